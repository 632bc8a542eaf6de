//! The software terms of link-up's headroom model, taken from what the daemon measured.
//!
//! Link-up measures the wire; on a software path the wire is the smallest term. Two more are
//! measured as the daemon runs, and each link measurement folds in what was seen since the
//! previous one:
//! - **own lag**: how long a frame waits between the XDP hook and the worker (the receive-lag
//!   histogram). A threshold crossed while the worker is away is acted on only when it runs,
//!   so everything arriving meanwhile lands beyond XOFF. The p99.99 counts.
//! - **peer reaction**: for each XOFF the port sent, the time until the last frame of the
//!   priority arrived (the PFC reaction histogram), over every PFC priority of the port, at
//!   p99.99, less the measured wire round trip (which the model counts on its own).
//!
//! Both are charged at the fastest rate a priority of the port was seen arriving at while it
//! was not held paused (over the monitor's 50 ms ticks since the previous measurement, at most
//! the speed): a lag is only as costly as what arrives during it, and a source held paused
//! half the time sends at twice its average while it may. A sender that speeds up beyond
//! anything seen is covered by the observed overshoot after its first XOFF, and by the next
//! measurement.
//!
//! The histograms have power-of-two buckets and a quantile is read as its bucket's upper
//! bound, so either term may be up to twice the true value: the model errs towards a larger
//! headroom, which pauses the source earlier and never drops more. With fewer than 10,000
//! values in a window, p99.99 is the largest value seen. A window with no values gives 0 (an
//! idle link has nothing to say), so a stall long ago does not hold the model up for ever:
//! the observed overshoot ([`crate::fc::adaptive`]) is what remembers.

use crate::{
    dataplane::{
        settings::ModelTerms,
        stats::{Log2Snapshot, PortSnapshot},
    },
    fc::arrival::UnpausedRate,
    headroom::adaptive::AdaptiveResult,
};

/// The quantile of each distribution the model uses.
pub const QUANTILE: f64 = 0.9999;

/// What one window showed, ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SoftwareTerms {
    /// Own receive lag at [`QUANTILE`].
    pub own_lag_ns: u64,
    /// The peer's reaction to XOFF beyond the wire round trip, at [`QUANTILE`].
    pub peer_reaction_ns: u64,
    /// The fastest a priority arrived over one sample interval while not held paused, bit/s.
    pub peak_rx_bps: u64,
}

/// The histograms of one port as of the previous measurement.
#[derive(Debug, Clone, Default)]
pub struct SoftwareWindow {
    lag: Log2Snapshot,
    reaction: Log2Snapshot,
    rx: UnpausedRate,
    peak_rx_bps: u64,
}

impl SoftwareWindow {
    /// The port's counters at `now` (ns): the peak rate rises if a priority arrived faster
    /// while unpaused, over [`crate::fc::arrival::RATE_INTERVAL_NS`] or more, than ever
    /// before in this window ([`UnpausedRate`]).
    pub fn sample_rx(&mut self, now: u64, port: &PortSnapshot) {
        if let Some(rates) = self.rx.sample(now, &port.rx_data_bytes, &port.xoff_held_ns) {
            let peak = rates.into_iter().flatten().max().unwrap_or(0);
            self.peak_rx_bps = self.peak_rx_bps.max(peak);
        }
    }

    /// The terms seen since the previous call (or start), with `round_trip_ns` the wire round
    /// trip just measured; the next window starts here.
    pub fn take(&mut self, port: &PortSnapshot, round_trip_ns: u64) -> SoftwareTerms {
        let mut reaction = Log2Snapshot::default();
        for h in &port.pfc_reaction_ns {
            reaction.merge(h);
        }
        let terms = SoftwareTerms {
            own_lag_ns: port.rx_lag_ns.since(&self.lag).quantile_bound(QUANTILE),
            peer_reaction_ns: reaction
                .since(&self.reaction)
                .quantile_bound(QUANTILE)
                .saturating_sub(round_trip_ns),
            peak_rx_bps: std::mem::take(&mut self.peak_rx_bps),
        };
        self.lag = port.rx_lag_ns.clone();
        self.reaction = reaction;
        terms
    }
}

/// The terms of `model` in bytes, computed with the software terms `software`.
pub fn model_terms(model: &AdaptiveResult, software: SoftwareTerms) -> ModelTerms {
    ModelTerms {
        split: model.split(),
        own_lag_ns: software.own_lag_ns,
        peer_reaction_ns: software.peer_reaction_ns,
        rate_bps: model.software_rate.bps_f64() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::stats::Log2Histogram;

    fn port(lag: &Log2Histogram, reaction: &Log2Histogram) -> PortSnapshot {
        PortSnapshot {
            rx_lag_ns: Log2Snapshot::of([lag]),
            pfc_reaction_ns: (0..8)
                .map(|p| {
                    if p == 3 {
                        Log2Snapshot::of([reaction])
                    } else {
                        Log2Snapshot::default()
                    }
                })
                .collect(),
            ..PortSnapshot::default()
        }
    }

    #[test]
    fn each_window_reports_what_it_saw_then_starts_afresh() {
        let (lag, reaction) = (Log2Histogram::default(), Log2Histogram::default());
        let mut w = SoftwareWindow::default();
        assert_eq!(
            w.take(&port(&lag, &reaction), 10_000),
            SoftwareTerms::default(),
            "nothing seen, nothing to add"
        );
        // 20,000 frames with 5 us of lag and one stalled 300 us: p99.99 is still ~5 us.
        for _ in 0..20_000 {
            lag.record(5_000);
        }
        lag.record(300_000);
        // Pauses took 40-70 us to take effect on a 10 us wire.
        for ns in [40_000, 55_000, 70_000] {
            reaction.record(ns);
        }
        let t = w.take(&port(&lag, &reaction), 10_000);
        assert_eq!(t.own_lag_ns, 8_191, "the upper bound of 5 us's bucket");
        assert_eq!(
            t.peer_reaction_ns,
            131_071 - 10_000,
            "the largest, less the wire"
        );
        // The next window saw only quick frames: the stall is forgotten.
        for _ in 0..100 {
            lag.record(1_000);
        }
        let t = w.take(&port(&lag, &reaction), 10_000);
        assert_eq!((t.own_lag_ns, t.peer_reaction_ns), (1_023, 0));
    }

    #[test]
    fn the_peak_rate_is_the_fastest_unpaused_interval_since_the_last_take() {
        const MS: u64 = 1_000_000;
        let at = |bytes: u64, held_ms: u64| {
            let mut p = PortSnapshot::default();
            p.rx_data_bytes[3] = bytes;
            p.xoff_held_ns[3] = held_ms * MS;
            p
        };
        let mut w = SoftwareWindow::default();
        w.sample_rx(0, &at(0, 0));
        // 50 ms at 200 Mbit/s (1.25 MB), then a tick too soon to count on its own.
        w.sample_rx(50 * MS, &at(1_250_000, 0));
        w.sample_rx(60 * MS, &at(1_500_000, 0));
        // The next 50 ms (from the last counted sample) brought 1.25 MB while held paused for
        // 25 ms of them: 400 Mbit/s while it could send.
        w.sample_rx(100 * MS, &at(2_500_000, 25));
        // Paused 48 of 50 ms: too little unpaused time to say anything.
        w.sample_rx(150 * MS, &at(3_000_000, 73));
        let t = w.take(&PortSnapshot::default(), 0);
        assert_eq!(t.peak_rx_bps, 400_000_000);
        w.sample_rx(200 * MS, &at(3_625_000, 73));
        assert_eq!(
            w.take(&PortSnapshot::default(), 0).peak_rx_bps,
            100_000_000,
            "a new window"
        );
    }

    #[test]
    fn a_reaction_within_the_wire_round_trip_adds_nothing() {
        let (lag, reaction) = (Log2Histogram::default(), Log2Histogram::default());
        reaction.record(3_000);
        let t = SoftwareWindow::default().take(&port(&lag, &reaction), 1_000_000);
        assert_eq!(t.peer_reaction_ns, 0);
    }
}
