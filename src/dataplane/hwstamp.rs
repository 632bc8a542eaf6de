//! Hardware RX stamps: turning on a port's RX hardware time stamping, and converting the
//! stamps from the NIC's clock (its PTP hardware clock, PHC) to the dataplane's clock
//! (CLOCK_MONOTONIC, [`super::clock::now_ns`]).
//!
//! The device-bound XDP program (`bpf/lossless.bpf.c`) reads a frame's hardware stamp with
//! `bpf_xdp_metadata_rx_timestamp`. The driver returns it in its PHC's time scale: whatever
//! ptp4l / phc2sys set it to (usually TAI), or a free-running count, never CLOCK_MONOTONIC.
//! Every other time in the dataplane is CLOCK_MONOTONIC, so a port with hardware stamps keeps
//! a [`DomainMap`] from PHC to CLOCK_MONOTONIC, fitted from reads of both clocks, each PHC
//! read between two CLOCK_MONOTONIC reads ([`Phc::sample`]): the offset at the last read and
//! the rate between the last two. The port samples about once a second ([`SAMPLE_EVERY_NS`];
//! a syscall per second, never per frame), and converting a stamp is arithmetic.

use std::{
    ffi::CString,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
};

use super::clock::now_ns;
use crate::kernel::{ethtool, netlink::Netlink};

/// How often a port reads its PHC against CLOCK_MONOTONIC.
pub const SAMPLE_EVERY_NS: u64 = 1_000_000_000;
/// Reads per sample; the one with the narrowest CLOCK_MONOTONIC window is kept.
const SAMPLE_TRIES: usize = 5;
/// A rate between the two clocks further than this from 1 means the PHC was stepped (ptp4l
/// does that when it starts): the rate is then not believed.
const MAX_RATE_PPB: i64 = 1_000_000;
/// Samples closer than this give no rate (too little time for a useful quotient).
const MIN_RATE_SPAN_NS: u64 = 100_000_000;

/// From a PHC's time to CLOCK_MONOTONIC: `mono = mono0 + (phc - phc0) * (1 + ppb / 1e9)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DomainMap {
    /// The last sample: the PHC's time ...
    phc0: u64,
    /// ... and CLOCK_MONOTONIC at the same instant (0: no sample yet).
    mono0: u64,
    /// How much faster CLOCK_MONOTONIC runs than the PHC, in parts per billion.
    ppb: i64,
}

impl DomainMap {
    /// True once a sample was taken.
    pub fn valid(&self) -> bool {
        self.mono0 != 0
    }

    /// Takes a sample: the PHC read `phc` when CLOCK_MONOTONIC read `mono`. The rate comes
    /// from the previous sample when it is far enough back and plausible; else it is kept
    /// (too close) or reset to 0 (the PHC was stepped, or runs backwards).
    pub fn update(&mut self, phc: u64, mono: u64) {
        if self.valid() && mono > self.mono0 && phc > self.phc0 {
            let dp = phc - self.phc0;
            let dm = mono - self.mono0;
            if dp >= MIN_RATE_SPAN_NS {
                let ppb = (i128::from(dm) - i128::from(dp)) * 1_000_000_000 / i128::from(dp);
                self.ppb = if ppb.unsigned_abs() <= MAX_RATE_PPB as u128 {
                    ppb as i64
                } else {
                    0
                };
            }
        } else {
            self.ppb = 0;
        }
        self.phc0 = phc;
        self.mono0 = mono;
    }

    /// The CLOCK_MONOTONIC time of PHC time `phc` (`None` before the first sample, or if it
    /// would fall before CLOCK_MONOTONIC's zero).
    #[inline]
    pub fn to_mono(&self, phc: u64) -> Option<u64> {
        if !self.valid() {
            return None;
        }
        let dp = i128::from(phc) - i128::from(self.phc0);
        let dm = dp + dp * i128::from(self.ppb) / 1_000_000_000;
        u64::try_from(i128::from(self.mono0) + dm).ok()
    }
}

/// `FD_TO_CLOCKID` of `<linux/posix-timers.h>`: the dynamic clock of an open PHC device.
fn fd_to_clockid(fd: i32) -> libc::clockid_t {
    ((!fd) << 3) | 3
}

fn read_clock(id: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// An open PTP hardware clock (`/dev/ptpN`).
#[derive(Debug)]
pub struct Phc {
    fd: OwnedFd,
    index: u32,
}

impl Phc {
    /// Opens `/dev/ptp<index>` read-only.
    pub fn open(index: u32) -> std::io::Result<Self> {
        let path = CString::new(format!("/dev/ptp{index}")).expect("no NUL in a device path");
        // SAFETY: a valid path; the fd is owned from here on.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is not owned elsewhere.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Phc { fd, index })
    }

    /// The PHC's index (`/dev/ptp<index>`).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The PHC's time and CLOCK_MONOTONIC at the same instant: the PHC read between two
    /// CLOCK_MONOTONIC reads, the midpoint taken, best of a few tries (three syscalls each).
    pub fn sample(&self) -> Option<(u64, u64)> {
        let id = fd_to_clockid(self.fd.as_raw_fd());
        let mut best: Option<(u64, u64, u64)> = None;
        for _ in 0..SAMPLE_TRIES {
            let m1 = now_ns();
            let p = read_clock(id)?;
            let m2 = now_ns();
            let window = m2.saturating_sub(m1);
            if best.is_none_or(|(_, _, w)| window < w) {
                best = Some((p, m1 + window / 2, window));
            }
        }
        best.map(|(p, m, _)| (p, m))
    }
}

/// A port's conversion of hardware stamps, refreshed as it goes.
#[derive(Debug)]
pub struct HwClock {
    phc: Phc,
    map: DomainMap,
    next_sample: u64,
}

impl HwClock {
    /// Opens PHC `index` and takes a first sample.
    pub fn open(index: u32) -> std::io::Result<Self> {
        let mut c = HwClock {
            phc: Phc::open(index)?,
            map: DomainMap::default(),
            next_sample: 0,
        };
        c.refresh(now_ns());
        Ok(c)
    }

    /// Samples the PHC again if [`SAMPLE_EVERY_NS`] have passed since the last sample (call
    /// once per batch; a syscall about once a second).
    #[inline]
    pub fn refresh(&mut self, now: u64) {
        if now < self.next_sample {
            return;
        }
        self.next_sample = now + SAMPLE_EVERY_NS;
        if let Some((p, m)) = self.phc.sample() {
            self.map.update(p, m);
        }
    }

    /// The conversion as of the last sample.
    #[inline]
    pub fn map(&self) -> &DomainMap {
        &self.map
    }

    /// The PHC's index.
    pub fn index(&self) -> u32 {
        self.phc.index()
    }
}

const SIOCGHWTSTAMP: libc::c_ulong = 0x89b1;
const SIOCSHWTSTAMP: libc::c_ulong = 0x89b0;
/// `HWTSTAMP_FILTER_NONE` / `HWTSTAMP_FILTER_ALL` of `<linux/net_tstamp.h>`.
const HWTSTAMP_FILTER_NONE: i32 = 0;
const HWTSTAMP_FILTER_ALL: i32 = 1;

/// `struct hwtstamp_config`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct HwTstampConfig {
    flags: i32,
    tx_type: i32,
    rx_filter: i32,
}

fn hwtstamp_ioctl(iface: &str, req: libc::c_ulong, cfg: &mut HwTstampConfig) -> Result<(), String> {
    let name = CString::new(iface).map_err(|_| format!("bad interface name {iface:?}"))?;
    if name.as_bytes().len() >= libc::IFNAMSIZ {
        return Err(format!("bad interface name {iface:?}"));
    }
    // SAFETY: socket() with constant arguments; owned (closed) right away.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: just opened, owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is valid; the name fits (checked above) and ifr_data points at
    // `cfg`, which outlives the call and is what the kernel reads and writes.
    let rc = unsafe {
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, s) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
            *d = *s as libc::c_char;
        }
        ifr.ifr_ifru.ifru_data = (cfg as *mut HwTstampConfig).cast();
        libc::ioctl(fd.as_raw_fd(), req as _, &mut ifr)
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

/// Makes `iface` stamp received frames in hardware, if it can, and returns its PHC's index:
/// the device must report `hardware-receive` and a PHC (`ethtool -T`), and RX hardware
/// stamping must be on; if it is off (`HWTSTAMP_FILTER_NONE`) it is turned on for all
/// frames, as ptp4l does (a driver stamps nothing for XDP otherwise). `Err` says why not.
pub fn enable_rx(iface: &str) -> Result<u32, String> {
    let info = ethtool::ts_info(&mut Netlink::new(false), iface).map_err(|e| e.to_string())?;
    if !info.timestamping.iter().any(|t| t == "hardware-receive") {
        return Err("the device does not stamp received frames in hardware".into());
    }
    let index = info
        .phc_index
        .ok_or_else(|| "the device has no PTP hardware clock".to_string())?;
    let mut cfg = HwTstampConfig::default();
    hwtstamp_ioctl(iface, SIOCGHWTSTAMP, &mut cfg).map_err(|e| format!("SIOCGHWTSTAMP: {e}"))?;
    if cfg.rx_filter == HWTSTAMP_FILTER_NONE {
        cfg.rx_filter = HWTSTAMP_FILTER_ALL;
        hwtstamp_ioctl(iface, SIOCSHWTSTAMP, &mut cfg)
            .map_err(|e| format!("SIOCSHWTSTAMP (RX filter all): {e}"))?;
        if cfg.rx_filter == HWTSTAMP_FILTER_NONE {
            return Err("the driver left RX hardware stamping off".into());
        }
        tracing::info!(
            iface,
            rx_filter = cfg.rx_filter,
            "RX hardware time stamping turned on"
        );
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_sample_no_conversion() {
        assert_eq!(DomainMap::default().to_mono(5), None);
    }

    #[test]
    fn offset_between_the_domains() {
        // A PHC on TAI (2026) against a CLOCK_MONOTONIC of a machine up for 1,000 s.
        let tai = 1_795_000_000_000_000_000u64;
        let mono = 1_000_000_000_000u64;
        let mut m = DomainMap::default();
        m.update(tai, mono);
        assert_eq!(m.to_mono(tai), Some(mono));
        // A frame stamped 3 us before the sample, one 2 ms after.
        assert_eq!(m.to_mono(tai - 3_000), Some(mono - 3_000));
        assert_eq!(m.to_mono(tai + 2_000_000), Some(mono + 2_000_000));
        // Before CLOCK_MONOTONIC's zero: no time.
        assert_eq!(m.to_mono(tai - mono - 1), None);
    }

    #[test]
    fn rate_between_samples() {
        // CLOCK_MONOTONIC runs 50 ppm faster than the PHC.
        let (p0, m0) = (10_000_000_000_000u64, 500_000_000_000u64);
        let mut m = DomainMap::default();
        m.update(p0, m0);
        m.update(p0 + 1_000_000_000, m0 + 1_000_050_000);
        assert_eq!(m.ppb, 50_000);
        // Half a second after the last sample: 25 us more than the PHC's half second.
        let p = p0 + 1_500_000_000;
        assert_eq!(m.to_mono(p), Some(m0 + 1_000_050_000 + 500_025_000));
        // Samples too close keep the rate, but move the offset.
        m.update(p0 + 1_010_000_000, m0 + 1_010_050_500);
        assert_eq!(m.ppb, 50_000);
        assert_eq!(m.to_mono(p0 + 1_010_000_000), Some(m0 + 1_010_050_500));
    }

    #[test]
    fn a_stepped_phc_resets_the_rate() {
        let mut m = DomainMap::default();
        m.update(1_000_000_000_000, 1_000_000_000);
        m.update(1_000_000_000_000 + 1_000_000_000, 2_000_010_000);
        assert_eq!(m.ppb, 10_000);
        // ptp4l steps the PHC by 37 s: the next pair's rate is absurd, so it is not taken.
        m.update(1_000_000_000_000 + 39_000_000_000, 3_000_010_000);
        assert_eq!(m.ppb, 0);
        assert_eq!(
            m.to_mono(1_000_000_000_000 + 39_000_000_100),
            Some(3_000_010_100)
        );
        // Backwards too.
        m.update(5, 4_000_000_000);
        assert_eq!(m.ppb, 0);
        assert_eq!(m.to_mono(5), Some(4_000_000_000));
    }

    #[test]
    fn clockid_of_a_phc_fd() {
        // FD_TO_CLOCKID(3) == ((~3) << 3) | 3 == -29.
        assert_eq!(fd_to_clockid(3), -29);
    }
}
