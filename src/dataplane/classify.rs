//! Classification of a data frame to a priority by 802.1Q PCP or IPv4 DSCP.

use serde::{Deserialize, Serialize};

use crate::wire::{EtherType, EthernetFrame};

/// Which header field decides a frame's priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// The 802.1Q PCP; untagged frames get priority 0.
    #[default]
    Pcp,
    /// The IPv4 DSCP class selector (DSCP >> 3); non-IPv4 frames get priority 0.
    Dscp,
}

impl Trust {
    /// The mode as the configuration spells it (`pcp`, `dscp`).
    pub fn name(self) -> &'static str {
        match self {
            Trust::Pcp => "pcp",
            Trust::Dscp => "dscp",
        }
    }
}

/// The shortest IPv4 header: a frame too short to hold one has no DSCP to trust (the XDP
/// program's rule too, which charges the frame to its RX backlog by the same priority).
const IPV4_MIN_HEADER: usize = 20;

/// The priority of `frame` under `trust`.
#[inline(always)]
pub fn priority<T: AsRef<[u8]>>(frame: &EthernetFrame<T>, trust: Trust) -> usize {
    match trust {
        Trust::Pcp => frame.vlan().map_or(0, |v| usize::from(v.pcp & 7)),
        Trust::Dscp => {
            let ip = frame.payload();
            if frame.ethertype() == EtherType::IPV4
                && ip.len() >= IPV4_MIN_HEADER
                && ip[0] >> 4 == 4
            {
                usize::from(ip[1] >> 5)
            } else {
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcp_and_dscp() {
        let mut f = [0u8; 60];
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[14..16].copy_from_slice(&[0xa0, 0x01]); // PCP 5
        f[16..18].copy_from_slice(&[0x08, 0x00]);
        f[18] = 0x45;
        f[19] = 26 << 2; // DSCP AF31 -> class 3
        let e = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(priority(&e, Trust::Pcp), 5);
        assert_eq!(priority(&e, Trust::Dscp), 3);
        let untagged = [0u8; 14];
        let e = EthernetFrame::new_checked(&untagged[..]).unwrap();
        assert_eq!(priority(&e, Trust::Pcp), 0);
        assert_eq!(priority(&e, Trust::Dscp), 0);
    }

    /// A runt whose IPv4 header is cut short has no DSCP, as in the XDP program: the worker
    /// read the TOS from 2 bytes of header, and charged the frame to another priority than
    /// the program had (and the program may have dropped it as lossy).
    #[test]
    fn a_truncated_ipv4_header_has_no_dscp() {
        let mut f = [0u8; 14 + IPV4_MIN_HEADER];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[15] = 0xa0; // DSCP 40 -> class 5
        let whole = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(priority(&whole, Trust::Dscp), 5);
        let cut = EthernetFrame::new_checked(&f[..f.len() - 1]).unwrap();
        assert_eq!(priority(&cut, Trust::Dscp), 0);
    }
}
