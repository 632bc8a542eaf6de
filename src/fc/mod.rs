//! Flow-control state machines. Sans-I/O: every method takes `now` (nanoseconds on a
//! monotonic clock chosen by the caller) and returns what to send and when to be called again.

pub mod adaptive;
pub mod arrival;
pub mod credit;
pub mod credit_port;
pub mod drain;
pub mod overshoot;
pub mod pfc;
pub mod plan;
pub mod sfc;
pub mod sfc_guard;
pub mod watchdog;

pub use credit::{CreditConfig, CreditError, CreditLane, CreditRx, CreditTx, CreditWindow};
pub use pfc::{PauseTimers, PfcGenerator, PfcThresholds};
pub use sfc::{SfcCongestionPoint, SfcCpConfig, SfcReactionPoint, SfcRpConfig};

/// Number of 802.1p priorities.
pub const PRIORITIES: usize = 8;

/// The priorities whose bit is set in `mask`, lowest first: how per-turn and per-batch work
/// visits only the priorities that have something (lanes, thresholds, frames sent).
#[inline]
pub fn priorities(mut mask: u8) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let p = (mask != 0).then(|| mask.trailing_zeros() as usize)?;
        mask &= mask - 1;
        Some(p)
    })
}

/// Nanoseconds one pause quantum (512 bit times) lasts at `speed_bps`.
///
/// Returns the time for `quanta` quanta, rounded up so a pause is never shorter than asked.
pub fn quanta_to_ns(quanta: u16, speed_bps: u64) -> u64 {
    let bits = u128::from(quanta) * 512 * 1_000_000_000;
    let speed = u128::from(speed_bps.max(1));
    bits.div_ceil(speed) as u64
}

/// The pause, in quanta at `speed_bps`, that lasts at least `ns` (at least one quantum, at
/// most the 65,535 a frame carries).
pub fn ns_to_quanta(ns: u64, speed_bps: u64) -> u16 {
    let quanta = (u128::from(ns) * u128::from(speed_bps)).div_ceil(512 * 1_000_000_000);
    quanta.clamp(1, u128::from(u16::MAX)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_in_quanta_lasts_at_least_the_time_asked() {
        assert_eq!(ns_to_quanta(512, 1_000_000_000), 1);
        assert_eq!(ns_to_quanta(513, 1_000_000_000), 2);
        assert_eq!(ns_to_quanta(1_000_000, 10_000_000_000), 19_532);
        assert!(quanta_to_ns(ns_to_quanta(1_000_000, 10_000_000_000), 10_000_000_000) >= 1_000_000);
        assert_eq!(ns_to_quanta(0, 1_000_000_000), 1, "never a resume");
        assert_eq!(ns_to_quanta(u64::MAX, 100_000_000_000), u16::MAX);
    }

    #[test]
    fn quanta_at_common_speeds() {
        // One quantum is 512 ns at 1G, 51.2 ns at 10G, 5.12 ns at 100G.
        assert_eq!(quanta_to_ns(1, 1_000_000_000), 512);
        assert_eq!(quanta_to_ns(10, 10_000_000_000), 512);
        assert_eq!(quanta_to_ns(100, 100_000_000_000), 512);
        assert_eq!(quanta_to_ns(1, 10_000_000_000), 52); // 51.2 rounded up
        assert_eq!(quanta_to_ns(0xffff, 1_000_000_000), 33_553_920);
        assert_eq!(quanta_to_ns(0, 1_000_000_000), 0);
    }
}
