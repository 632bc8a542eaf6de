//! What a PFC headroom actually had to hold: the bytes of a priority that arrive after the
//! congestion point sent XOFF, until the pause took effect.
//!
//! The headroom formula (802.1Q Annex N, and its adaptive form) predicts this from the link:
//! cable, interface delays, the peer's response time, frames in flight. In software the
//! prediction misses the largest terms (when the daemon's and the peer's threads next run),
//! but the congestion point can simply watch: an XOFF episode starts when the priority goes
//! from XON to XOFF, every byte of the priority that arrives at the port afterwards is
//! overshoot, and the episode ends when the pause has taken effect. That is seen as arrivals
//! stopping for `quiet_ns` (a paused source sends nothing), or as the XON that ends the pause.
//! Refreshes of a running XOFF do not start a new episode.
//!
//! The time from XOFF to the last arrival of the episode is how long the pause took to take
//! effect: the wire round trip, this station's transmit delay and the peer's reaction. Less
//! the measured wire round trip, it is the peer's reaction the headroom model needs
//! ([`crate::headroom::adaptive`]); for an episode ended by XON it is a lower bound.
//!
//! Arrivals are counted where they happen (the XDP hook, see `dataplane::ingress`), as a
//! running total per priority; the meter only remembers totals, so it costs nothing per frame.
//! Sans-I/O: `now` and the totals come from the caller.

/// What one XOFF episode showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overshoot {
    /// Bytes of the priority that arrived after XOFF.
    pub bytes: u64,
    /// From XOFF to the last of those arrivals, ns (the pause taking effect).
    pub settle_ns: u64,
}

/// One running XOFF episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Episode {
    /// When XOFF was sent.
    start: u64,
    /// Arrival total when XOFF was sent.
    base: u64,
    /// Arrival total last seen.
    last: u64,
    /// When the total last grew.
    last_change: u64,
}

/// Overshoot of one (ingress port, priority): bytes arrived after each XOFF.
#[derive(Debug, Clone)]
pub struct OvershootMeter {
    quiet_ns: u64,
    episode: Option<Episode>,
}

impl OvershootMeter {
    /// A meter that takes arrivals stopping for `quiet_ns` as the pause having taken effect.
    pub fn new(quiet_ns: u64) -> Self {
        OvershootMeter {
            quiet_ns,
            episode: None,
        }
    }

    /// XOFF was sent at `now`, with `arrived` bytes of the priority arrived so far. A previous
    /// episode still running ends here; its overshoot is returned.
    pub fn on_xoff(&mut self, now: u64, arrived: u64) -> Option<Overshoot> {
        let ended = self.finish();
        self.episode = Some(Episode {
            start: now,
            base: arrived,
            last: arrived,
            last_change: now,
        });
        ended
    }

    /// XON was sent with `arrived` bytes arrived so far: the running episode ends.
    pub fn on_xon(&mut self, arrived: u64) -> Option<Overshoot> {
        self.observe_total(arrived);
        self.finish()
    }

    /// Looks at the arrival total at `now`; returns the overshoot of an episode whose arrivals
    /// have stopped.
    pub fn poll(&mut self, now: u64, arrived: u64) -> Option<Overshoot> {
        let e = self.episode.as_mut()?;
        if arrived != e.last {
            e.last = arrived;
            e.last_change = now;
            return None;
        }
        if now.saturating_sub(e.last_change) >= self.quiet_ns {
            return self.finish();
        }
        None
    }

    /// An episode is running (XOFF sent, its effect not yet seen).
    pub fn running(&self) -> bool {
        self.episode.is_some()
    }

    fn observe_total(&mut self, arrived: u64) {
        if let Some(e) = self.episode.as_mut() {
            e.last = arrived;
        }
    }

    fn finish(&mut self) -> Option<Overshoot> {
        self.episode.take().map(|e| Overshoot {
            bytes: e.last.wrapping_sub(e.base),
            settle_ns: e.last_change.saturating_sub(e.start),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUIET: u64 = 100_000;

    #[test]
    fn overshoot_is_what_arrives_after_xoff_until_arrivals_stop() {
        let mut m = OvershootMeter::new(QUIET);
        assert_eq!(m.poll(0, 5_000), None, "no episode, nothing to report");
        assert_eq!(m.on_xoff(1_000, 70_000), None);
        assert!(m.running());
        // Frames already on their way keep arriving for a while...
        assert_eq!(m.poll(2_000, 71_000), None);
        assert_eq!(m.poll(30_000, 90_000), None);
        // ...then nothing: the pause took effect, but only a quiet period says so.
        assert_eq!(m.poll(129_999, 90_000), None);
        assert_eq!(
            m.poll(130_000, 90_000),
            Some(Overshoot {
                bytes: 20_000,
                settle_ns: 29_000
            }),
            "20 KB arrived, the last 29 us after XOFF"
        );
        assert!(!m.running());
        assert_eq!(
            m.poll(500_000, 95_000),
            None,
            "arrivals between episodes are not overshoot"
        );
    }

    #[test]
    fn xon_or_a_new_xoff_ends_a_running_episode() {
        let mut m = OvershootMeter::new(QUIET);
        m.on_xoff(0, 0);
        // A source that never pauses: its arrivals never stop, the XON ends the episode.
        for t in 1..50 {
            assert_eq!(m.poll(t * 10_000, t * 1_000), None);
        }
        assert_eq!(
            m.on_xon(60_000),
            Some(Overshoot {
                bytes: 60_000,
                settle_ns: 490_000
            }),
            "a lower bound: arrivals were last seen growing at 490 us"
        );
        assert_eq!(m.on_xon(70_000), None, "no episode running");
        m.on_xoff(1_000_000, 100_000);
        assert_eq!(
            m.on_xoff(1_050_000, 103_000).map(|o| o.bytes),
            Some(0),
            "the total seen so far"
        );
        assert_eq!(m.on_xon(110_000).map(|o| o.bytes), Some(7_000));
    }
}
