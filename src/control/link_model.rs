//! The software terms of the headroom model, taken from what the daemon measures as it runs.
//!
//! Link-up measures the wire; on a software path the wire is the smallest term. Two more are
//! measured all the time, whether or not link-up runs:
//! - **own lag**: how long a frame waits between the XDP hook and the worker (the receive-lag
//!   histogram). A threshold crossed while the worker is away is acted on only when it runs,
//!   so everything arriving meanwhile lands beyond XOFF. The p99.99 counts.
//! - **peer reaction**: for each XOFF the port sent, the time until the last frame of the
//!   priority arrived (the PFC reaction histogram), over every PFC priority of the port, at
//!   p99.99, less the measured wire round trip (which the model counts on its own; 0 until
//!   link-up has measured one, so the wire is then counted here).
//!
//! Both are charged at the fastest rate a priority of the port was seen arriving at while it
//! was not held paused (over the monitor's 50 ms ticks, at most the speed): a lag is only as
//! costly as what arrives during it, and a source held paused half the time sends at twice
//! its average while it may. A sender that speeds up beyond anything seen is covered by the
//! observed overshoot after its first XOFF ([`crate::fc::adaptive`]), and by the next fold.
//!
//! **Folding.** Every [`FOLD_INTERVAL_NS`] the distributions of that interval are read (at
//! p99.99, the largest value when the interval holds fewer than 10,000) and each term held is
//! replaced by the larger of what the interval showed and what it held, decayed: the held
//! value halves every `half_life_ns` (the headroom's `half_life`, 10 minutes by default). A
//! stall is thus remembered long after its interval, as an observed overshoot is, so the next
//! stall of the same size finds the headroom already sized for it; and one stall long ago
//! does not hold XOFF down for ever. Until the first fold every term is 0 (nothing seen,
//! nothing to add; the floor and the prior cover the start).
//!
//! The histograms have power-of-two buckets and a quantile is read as its bucket's upper
//! bound, so either term may be up to twice the true value: the model errs towards a larger
//! headroom, which pauses the source earlier and never drops more.

use crate::{
    dataplane::{
        settings::ModelTerms,
        stats::{Log2Snapshot, PortSnapshot},
    },
    fc::PRIORITIES,
    headroom::adaptive::AdaptiveResult,
};

/// The quantile of each distribution the model uses.
pub const QUANTILE: f64 = 0.9999;

/// The terms held, ns and bit/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SoftwareTerms {
    /// Own receive lag at [`QUANTILE`].
    pub own_lag_ns: u64,
    /// The peer's reaction to XOFF beyond the wire round trip, at [`QUANTILE`].
    pub peer_reaction_ns: u64,
    /// The fastest a priority arrived over one sample interval while not held paused, bit/s.
    pub peak_rx_bps: u64,
}

/// Receive rates are taken over at least this long (the monitor ticks every 50 ms).
pub const RATE_INTERVAL_NS: u64 = 40_000_000;

/// What each interval showed is folded into the held terms this often, ns.
pub const FOLD_INTERVAL_NS: u64 = 250_000_000;

/// An interval counts only if the priority was unpaused for at least this part of it (1/n):
/// a rate over a sliver of time is noise.
const MIN_UNPAUSED_PART: u64 = 10;

/// What a rate sample remembers of the previous one.
#[derive(Debug, Clone, Copy)]
struct RxSample {
    at: u64,
    bytes: [u64; PRIORITIES],
    held_ns: [u64; PRIORITIES],
}

/// The software terms of one port: the distributions as of the last fold, and the terms held.
#[derive(Debug, Clone, Default)]
pub struct SoftwareWindow {
    lag: Log2Snapshot,
    reaction: Log2Snapshot,
    last_rx: Option<RxSample>,
    /// The fastest rate since the last fold.
    peak_rx_bps: u64,
    folded_at: Option<u64>,
    /// Own lag, peer reaction (ns) and rate (bit/s) held, decayed to `folded_at`.
    held: [f64; 3],
}

impl SoftwareWindow {
    /// The port's counters at `now` (ns): the peak rate rises if a priority arrived faster,
    /// over the last [`RATE_INTERVAL_NS`] or more less the time it was held paused, than
    /// before since the last fold.
    pub fn sample_rx(&mut self, now: u64, port: &PortSnapshot) {
        let this = RxSample {
            at: now,
            bytes: port.rx_data_bytes,
            held_ns: port.xoff_held_ns,
        };
        let Some(last) = self.last_rx else {
            self.last_rx = Some(this);
            return;
        };
        let dt = now.saturating_sub(last.at);
        if dt < RATE_INTERVAL_NS {
            return;
        }
        for p in 0..PRIORITIES {
            let held = this.held_ns[p].saturating_sub(last.held_ns[p]).min(dt);
            let unpaused = dt - held;
            if unpaused * MIN_UNPAUSED_PART < dt {
                continue;
            }
            let bytes = this.bytes[p].saturating_sub(last.bytes[p]);
            let bps = u128::from(bytes) * 8_000_000_000 / u128::from(unpaused);
            self.peak_rx_bps = self.peak_rx_bps.max(bps as u64);
        }
        self.last_rx = Some(this);
    }

    /// Whether a fold is due at `now` ([`FOLD_INTERVAL_NS`] since the last, or none yet).
    pub fn fold_due(&self, now: u64) -> bool {
        self.folded_at
            .is_none_or(|t| now.saturating_sub(t) >= FOLD_INTERVAL_NS)
    }

    /// Folds what was seen since the last fold into the held terms at `now`, with
    /// `round_trip_ns` the wire round trip last measured (0: none) and the held terms halving
    /// every `half_life_ns`. Returns the terms now held.
    pub fn fold(
        &mut self,
        now: u64,
        port: &PortSnapshot,
        round_trip_ns: u64,
        half_life_ns: u64,
    ) -> SoftwareTerms {
        let mut reaction = Log2Snapshot::default();
        for h in &port.pfc_reaction_ns {
            reaction.merge(h);
        }
        let seen = [
            port.rx_lag_ns.since(&self.lag).quantile_bound(QUANTILE),
            reaction
                .since(&self.reaction)
                .quantile_bound(QUANTILE)
                .saturating_sub(round_trip_ns),
            std::mem::take(&mut self.peak_rx_bps),
        ];
        let decay = match self.folded_at {
            Some(t) => (-(now.saturating_sub(t) as f64) / half_life_ns.max(1) as f64).exp2(),
            None => 0.0,
        };
        for (held, seen) in self.held.iter_mut().zip(seen) {
            *held = (*held * decay).max(seen as f64);
        }
        self.lag = port.rx_lag_ns.clone();
        self.reaction = reaction;
        self.folded_at = Some(now);
        self.terms()
    }

    /// The terms held as of the last fold.
    pub fn terms(&self) -> SoftwareTerms {
        let [own_lag_ns, peer_reaction_ns, peak_rx_bps] = self.held.map(|v| v.ceil() as u64);
        SoftwareTerms {
            own_lag_ns,
            peer_reaction_ns,
            peak_rx_bps,
        }
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

    const MS: u64 = 1_000_000;
    const HALF_LIFE: u64 = 1_000 * MS;

    #[test]
    fn a_fold_holds_the_larger_of_what_it_saw_and_what_it_held_decayed() {
        let (lag, reaction) = (Log2Histogram::default(), Log2Histogram::default());
        let mut w = SoftwareWindow::default();
        assert!(w.fold_due(0));
        assert_eq!(
            w.fold(0, &port(&lag, &reaction), 10_000, HALF_LIFE),
            SoftwareTerms::default(),
            "nothing seen, nothing to add"
        );
        assert!(!w.fold_due(FOLD_INTERVAL_NS - 1));
        assert!(w.fold_due(FOLD_INTERVAL_NS));
        // 20,000 frames with 5 us of lag and one stalled 300 us: p99.99 is still ~5 us.
        for _ in 0..20_000 {
            lag.record(5_000);
        }
        lag.record(300_000);
        // Pauses took 40-70 us to take effect on a 10 us wire.
        for ns in [40_000, 55_000, 70_000] {
            reaction.record(ns);
        }
        let t = w.fold(250 * MS, &port(&lag, &reaction), 10_000, HALF_LIFE);
        assert_eq!(t.own_lag_ns, 8_191, "the upper bound of 5 us's bucket");
        assert_eq!(
            t.peer_reaction_ns,
            131_071 - 10_000,
            "the largest, less the wire"
        );
        // One half-life later, an interval of quick frames and no XOFF: the terms held have
        // halved, not vanished, so the next stall of that size is still covered.
        for _ in 0..100 {
            lag.record(1_000);
        }
        let t = w.fold(1_250 * MS, &port(&lag, &reaction), 10_000, HALF_LIFE);
        assert_eq!((t.own_lag_ns, t.peer_reaction_ns), (4_096, 60_536));
        // A longer lag than the decayed one is held at once.
        lag.record(40_000);
        let t = w.fold(1_500 * MS, &port(&lag, &reaction), 10_000, HALF_LIFE);
        assert_eq!(t.own_lag_ns, 65_535);
        assert_eq!(w.terms(), t);
    }

    #[test]
    fn the_peak_rate_is_the_fastest_unpaused_interval_and_is_held() {
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
        let t = w.fold(150 * MS, &PortSnapshot::default(), 0, HALF_LIFE);
        assert_eq!(t.peak_rx_bps, 400_000_000);
        // A slower interval one half-life later: the peak held has halved, and is still the
        // larger.
        w.sample_rx(1_150 * MS, &at(15_500_000, 73));
        let t = w.fold(1_150 * MS, &PortSnapshot::default(), 0, HALF_LIFE);
        assert_eq!(t.peak_rx_bps, 200_000_000);
    }

    #[test]
    fn a_reaction_within_the_wire_round_trip_adds_nothing() {
        let (lag, reaction) = (Log2Histogram::default(), Log2Histogram::default());
        reaction.record(3_000);
        let t = SoftwareWindow::default().fold(0, &port(&lag, &reaction), 1_000_000, HALF_LIFE);
        assert_eq!(t.peer_reaction_ns, 0);
    }
}
