//! Driver and firmware names (`ETHTOOL_GDRVINFO`: ethtool netlink has no equivalent, so this
//! one fact comes through the SIOCETHTOOL ioctl) and multicast admission (`/proc/net/dev_mcast`,
//! the kernel's list of link-layer groups each device receives).

use serde::Serialize;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 3;
/// `sizeof(struct ethtool_drvinfo)`.
pub const DRVINFO_LEN: usize = 196;

/// What the driver says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DrvInfo {
    /// Driver name (`ixgbe`, `veth`, ...).
    pub driver: String,
    /// Driver version string.
    pub version: String,
    /// Firmware version (empty when the device has none).
    pub firmware: String,
    /// Bus address.
    pub bus_info: String,
}

/// Why the driver could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrvInfoError {
    /// The interface name is not a valid C string of at most 15 bytes.
    #[error("interface name {0:?} is not valid")]
    BadName(String),
    /// The ioctl failed.
    #[error("ETHTOOL_GDRVINFO on {iface}: {reason}")]
    Ioctl {
        /// Interface.
        iface: String,
        /// errno text.
        reason: String,
    },
}

/// Asks the driver (`ethtool -i`).
pub fn query(iface: &str) -> Result<(DrvInfo, [u8; DRVINFO_LEN]), DrvInfoError> {
    let name = iface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(DrvInfoError::BadName(iface.to_string()));
    }
    let mut info = [0u8; DRVINFO_LEN];
    info[..4].copy_from_slice(&ETHTOOL_GDRVINFO.to_ne_bytes());
    // SAFETY: socket() with constant arguments; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(DrvInfoError::Ioctl {
            iface: iface.to_string(),
            reason: std::io::Error::last_os_error().to_string(),
        });
    }
    // SAFETY: an all-zero ifreq is valid; we fill the name (NUL-terminated, checked above) and
    // point ifr_data at `info`, which outlives the call and is as large as the kernel writes.
    let rc = unsafe {
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
            *d = *s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = info.as_mut_ptr() as *mut libc::c_char;
        let rc = libc::ioctl(fd, SIOCETHTOOL as _, &mut ifr);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        (rc, err)
    };
    if rc.0 < 0 {
        return Err(DrvInfoError::Ioctl {
            iface: iface.to_string(),
            reason: rc.1.to_string(),
        });
    }
    Ok((parse(&info), info))
}

/// Decodes a `struct ethtool_drvinfo` (strings are NUL-terminated within their 32 bytes).
pub fn parse(b: &[u8; DRVINFO_LEN]) -> DrvInfo {
    let s = |at: usize| {
        let f = &b[at..at + 32];
        let end = f.iter().position(|&c| c == 0).unwrap_or(32);
        String::from_utf8_lossy(&f[..end]).into_owned()
    };
    DrvInfo {
        driver: s(4),
        version: s(36),
        firmware: s(68),
        bus_info: s(100),
    }
}

/// The group addresses `iface` has joined, from the text of `/proc/net/dev_mcast`
/// (`index name users global address`, the address as 12 hex digits).
pub fn parse_dev_mcast(text: &str, iface: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [_, name, _, _, addr] if *name == iface && addr.len() == 12 => {
                    let b = addr.as_bytes();
                    Some(
                        (0..6)
                            .map(|i| String::from_utf8_lossy(&b[2 * i..2 * i + 2]).into_owned())
                            .collect::<Vec<_>>()
                            .join(":"),
                    )
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_mcast_lines() {
        let t = "2    eth0            1     0     333300000001\n\
                 2    eth0            1     0     0180c2000001\n\
                 3    eth1            1     0     01005e000001\n\
                 garbage\n";
        assert_eq!(
            parse_dev_mcast(t, "eth0"),
            ["33:33:00:00:00:01", "01:80:c2:00:00:01"]
        );
        assert!(parse_dev_mcast(t, "eth9").is_empty());
    }
}
