//! How fast a priority's buffer drains: the rate an XOFF set in time is computed from.
//!
//! PFC thresholds are bytes, but what a frame feels is time: one that arrives behind a backlog
//! of B bytes waits B / D, where D is the rate at which the backlog leaves (through the worker
//! and the egress). Where the worker is the bottleneck D is the worker's speed, which depends on
//! the host, the frame size and what else runs: on the 2-vCPU VM of `bench/forward` a 64 KiB
//! XOFF lets 128-byte frames wait 1.7 ms (D = 38 MB/s); on a faster host the same bytes are a
//! fraction of that. `[headroom] xoff_time` names the wait instead, and the XOFF in force
//! becomes at most D × xoff_time (`dataplane::pfc_headroom`).
//!
//! D is measured, not assumed, from two things the congestion point already has: the running
//! total of the priority's bytes arrived (counted at the XDP hook) and its occupancy. Between two
//! looks, departed = arrived(t1) − arrived(t0) + occupancy(t0) − occupancy(t1): whatever left
//! the buffer, forwarded or dropped. That is the drain only while a backlog waits; with an idle
//! buffer it is the arrival rate, which says nothing of how fast a backlog would go. So a look
//! that finds less than `backlog` bytes waiting ends the window as idle time, and the rate is
//! the SFC congestion point's estimator ([`DrainRateEstimator`]: bytes over busy time in
//! windows of [`WINDOW_NS`], each weighted 1/4) fed with these departures. Until a first
//! backlogged window closes the rate is unknown, and nothing is capped.
//!
//! The smoothing keeps one window in which the worker was descheduled from collapsing XOFF on
//! its own, while a slower drain is followed within a few windows. A stall lowers the estimate,
//! so XOFF and the pause come sooner: the safe direction. A drain that stops because the egress
//! is itself paused lowers it too, which passes the pause upstream sooner, as a switch whose
//! buffer fills would.
//!
//! Sans-I/O: `now` and the totals come from the caller; nothing here costs anything per frame.

use super::sfc::{DrainRateConfig, DrainRateEstimator};

/// Length of one measuring window, ns: several of the worker's turns, and short against the
/// millisecond waits an XOFF in time is for.
pub const WINDOW_NS: u64 = 200_000;

/// Drain rate of one (ingress port, priority) buffer.
#[derive(Debug, Clone)]
pub struct DrainMeter {
    /// Occupancy a look must find for the time since the previous one to count, bytes.
    backlog: u64,
    /// The previous look: (arrived total, occupancy).
    last: Option<(u64, u64)>,
    estimator: DrainRateEstimator,
}

impl DrainMeter {
    /// A meter for which a backlog is at least `backlog` bytes waiting.
    pub fn new(backlog: u64) -> Self {
        let cfg = DrainRateConfig {
            window_ns: WINDOW_NS,
            ewma_shift: 2,
        };
        DrainMeter {
            backlog: backlog.max(1),
            last: None,
            estimator: DrainRateEstimator::new(cfg).expect("a valid estimator configuration"),
        }
    }

    /// The smoothed drain rate, bytes per second (`None` until measured).
    pub fn rate(&self) -> Option<u64> {
        self.estimator.rate_bps().map(|bps| bps / 8)
    }

    /// At `now` the priority's arrival total was `arrived` and its occupancy `occupancy`.
    /// Returns the new rate when a backlogged window closed at this look and moved it.
    pub fn observe(&mut self, now: u64, arrived: u64, occupancy: u64) -> Option<u64> {
        let last = self.last.replace((arrived, occupancy));
        if occupancy < self.backlog {
            self.estimator.on_empty();
            return None;
        }
        let Some((a0, o0)) = last.filter(|&(_, o0)| o0 >= self.backlog) else {
            // A backlog begins: its window opens now.
            self.estimator.on_busy(now);
            return None;
        };
        let departed = arrived
            .wrapping_sub(a0)
            .saturating_add(o0)
            .saturating_sub(occupancy);
        let before = self.estimator.rate_bps();
        self.estimator.on_dequeue(departed, now);
        let after = self.estimator.rate_bps();
        after.filter(|_| after != before).map(|bps| bps / 8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn a_backlog_draining_at_a_steady_rate_is_measured_at_that_rate() {
        let mut m = DrainMeter::new(3_000);
        // 40 MB/s out (40 bytes per us), 100 MB/s in: the backlog grows all the while.
        let (mut arrived, mut occ) = (0u64, 10_000u64);
        assert_eq!(m.observe(0, arrived, occ), None, "a backlog opens a window");
        for look in 1..=6u64 {
            arrived += 100 * 100;
            occ += (100 - 40) * 100;
            let r = m.observe(look * 100 * US, arrived, occ);
            // The first window closes at 200 us; later ones measure the same rate.
            assert_eq!(r, (look == 2).then_some(40_000_000), "look {look}");
        }
        assert_eq!(m.rate(), Some(40_000_000));
    }

    #[test]
    fn an_idle_buffer_says_nothing_of_the_drain() {
        let mut m = DrainMeter::new(3_000);
        // 1 MB/s arrives and leaves at once: never a backlog, never a sample.
        for w in 0..10u64 {
            assert_eq!(m.observe(w * 200 * US, w * 200, 0), None);
        }
        assert_eq!(m.rate(), None, "unknown: nothing would be capped");
        // A backlog that comes and goes within a window leaves no sample either: the time
        // without one is not drain time.
        assert_eq!(m.observe(2_000 * US, 2_000, 50_000), None);
        assert_eq!(m.observe(2_100 * US, 2_000, 1_000), None);
        assert_eq!(m.observe(2_300 * US, 2_000, 0), None);
        assert_eq!(m.rate(), None);
    }

    #[test]
    fn looks_within_a_window_wait_for_its_end() {
        let mut m = DrainMeter::new(3_000);
        m.observe(0, 0, 10_000);
        assert_eq!(m.observe(150 * US, 0, 5_000), None, "window still open");
        // The window closes at 200 us, measured from its start: 6,000 bytes left in 200 us.
        assert_eq!(m.observe(200 * US, 0, 4_000), Some(30_000_000));
    }

    #[test]
    fn a_stalled_window_lowers_the_rate_by_a_quarter_of_the_gap_and_recovery_follows() {
        let mut m = DrainMeter::new(3_000);
        m.observe(0, 0, 100_000);
        assert_eq!(m.observe(200 * US, 0, 92_000), Some(40_000_000));
        // Descheduled for 2 ms: nothing left, arrivals piled up.
        assert_eq!(m.observe(2_200 * US, 50_000, 142_000), Some(30_000_000));
        // Draining at 40 MB/s again: the estimate climbs back a quarter of the gap per window.
        assert_eq!(m.observe(2_400 * US, 50_000, 134_000), Some(32_500_000));
        assert_eq!(m.observe(2_600 * US, 50_000, 126_000), Some(34_375_000));
    }

    #[test]
    fn wrapping_arrival_totals_and_a_growing_backlog_never_panic() {
        let mut m = DrainMeter::new(1);
        m.observe(0, u64::MAX - 10, 5);
        assert_eq!(
            m.observe(200 * US, 9, 5),
            Some(100_000),
            "20 bytes in 200 us"
        );
        // More occupancy than arrived and held: departed saturates at 0, not below.
        assert_eq!(m.observe(400 * US, 9, 1_000), Some(75_000));
    }
}
