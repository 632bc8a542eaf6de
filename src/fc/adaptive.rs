//! The PFC headroom in force for one (ingress port, priority): the larger of what the link
//! model predicts and what was seen, never below a floor.
//!
//! A priority's buffer (XOFF + headroom) is configured; the headroom is the part of it kept
//! for what arrives after XOFF, so XOFF = buffer − headroom. Three things bound the headroom
//! from below, and the largest wins:
//! - the **floor** (`min_headroom`, by default the configured headroom): measurement can make
//!   a configuration safer, never less safe, unless the operator asks for it;
//! - the **model**: the headroom link-up computes from the measured round trip (wire, the
//!   peer's response, frames in flight), plus the daemon's own lag at a high percentile;
//! - the **evidence**: the overshoot observed after XOFFs (see [`super::overshoot`]) times a
//!   margin, plus the **notice** term: what arrives while a crossing of XOFF may go unnoticed
//!   before any XOFF goes out (the caller's bound on that time times the fastest arrival rate
//!   seen, or what the caller saw arrive unnoticed, whichever is more: see
//!   `dataplane::pfc_headroom`). The overshoot only counts what arrives *after*
//!   the XOFF, so the two add up. Both are raised at once by a larger value, so the next
//!   episode of the same size is covered, and decay slowly (exponentially, with a configurable
//!   half-life) so one stall long ago does not hold the XOFF point down for ever.
//!
//! Before anything has been observed, the evidence starts at a **prior** (the caller's guess
//! of the worst case, e.g. half the buffer) that decays like any evidence: the first XOFFs
//! after start are covered before the first overshoot has been seen. The prior stands aside
//! once [`PRIOR_EPISODES`] episodes were seen, for as long as none of them used more headroom
//! than the evidence alone holds: the largest occupancy beyond XOFF any episode reached
//! (everything the headroom held, including what crossed XOFF before the XOFF went out, less
//! what drained meanwhile), decayed like the evidence, is within it. Then the evidence is what
//! was seen, times the margin; one episode that spills beyond it brings the (decayed) prior
//! back until that spill has decayed. (With the prior kept, half a 128 KiB buffer held a 1 ms
//! link's headroom at 2.6 × its largest overshoot for the prior's whole ten-minute half-life;
//! the goal is 2 ×.) Why the gate and not a count: the overshoot is what arrives after XOFF,
//! and on a busy host much of what a headroom holds crossed XOFF while the worker was not
//! running to send it. Retiring after 16 episodes whatever they used made a 2 Gbit/s run with
//! an 8 KiB floor lose 209–1,300 frames instead of 27–141; retiring after 32 episodes *in a
//! row* within the evidence still let the prior go there for good (lag spikes are rare among
//! thousands of episodes, and came after the 32nd) and lost 28–843.
//!
//! The result is rounded up to whole buffer cells. A rise applies at once; a fall applies only
//! once it is at least [`DECAY_STEP`] of the value in force, so a decaying term moves the
//! thresholds (and writes the log line that says so) about once a minute at the default
//! half-life instead of at every look. Sans-I/O: `now` comes from the caller.

/// A fall of the headroom in force applies once it is at least this part (1/n) of it.
pub const DECAY_STEP: u64 = 16;
/// Episodes after which the prior may give way to what was seen.
pub const PRIOR_EPISODES: u64 = 32;

/// Where the headroom in force comes from: the term that won.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadroomSource {
    /// The floor (the configured headroom unless `min_headroom` says otherwise).
    Configured,
    /// The link model from link-up's measurement.
    Measured,
    /// The overshoot observed after XOFFs, times the margin.
    Observed,
}

impl HeadroomSource {
    /// The label used in status and metrics.
    pub fn label(self) -> &'static str {
        match self {
            HeadroomSource::Configured => "configured",
            HeadroomSource::Measured => "measured",
            HeadroomSource::Observed => "observed",
        }
    }
}

/// Settings of the adaptive headroom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveConfig {
    /// Never below this many bytes.
    pub floor: u64,
    /// Evidence = observed overshoot × this (≥ 1).
    pub margin: f64,
    /// The evidence halves every this many ns without a larger overshoot.
    pub half_life_ns: u64,
    /// Round up to multiples of this many bytes (buffer cells; 1 = bytes).
    pub cell: u64,
    /// Evidence assumed at start, before any overshoot was seen (decays like evidence).
    pub prior: u64,
}

/// Settings of the adaptive headroom (`[headroom]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeadroomSettings {
    /// Let observed overshoot raise the headroom.
    pub adaptive: bool,
    /// Never below this many bytes; `None`: each priority's configured headroom.
    pub min_headroom: Option<u64>,
    /// Evidence = observed overshoot × this.
    pub margin: f64,
    /// The evidence halves every this many ns.
    pub half_life_ns: u64,
    /// Arrivals stopping this long after XOFF mean the pause took effect.
    pub quiet_ns: u64,
    /// XOFF in force at most what the priority's buffer drains in this many ns, at the rate
    /// measured ([`crate::fc::drain`]); `None`: XOFF in bytes only.
    pub xoff_time_ns: Option<u64>,
    /// The stall guard's `stall_guard`, ns (`None`: the guard is off, and there is no notice
    /// term).
    pub stall_guard_ns: Option<u64>,
    /// A frame of a lossless priority (PFC, SFC or credit alike) that finds its buffer full is
    /// kept in a spare frame of the pool rather than dropped, while the pool has frames to
    /// spare (`dataplane::forward`'s admission); `false`: dropped at the buffer
    /// (`headroom_overflow`).
    pub borrow: bool,
}

impl HeadroomSettings {
    /// The longest a crossing of XOFF goes unnoticed, ns: the stall guard's doorbell rings
    /// `stall_guard` after the first frame that finds the worker stopped, and half of it again
    /// allows for the guard's wake-up (on a timer alone it looks every half `stall_guard`);
    /// it pauses the source by then. `None` while the guard is off.
    pub fn notice_ns(&self) -> Option<u64> {
        self.stall_guard_ns.map(notice_bound_ns)
    }
}

/// The longest a worker's stall goes unnoticed with the stall guard waiting `stall_guard_ns`:
/// the doorbell rings that long after the first frame that finds the worker stopped, and half
/// of it again allows for the guard's wake-up. What arrives meanwhile is what a lossless
/// priority's buffer must hold beyond the level its congestion point keeps.
pub const fn notice_bound_ns(stall_guard_ns: u64) -> u64 {
    stall_guard_ns + stall_guard_ns / 2
}

impl Default for HeadroomSettings {
    fn default() -> Self {
        HeadroomSettings {
            adaptive: true,
            min_headroom: None,
            margin: 1.5,
            half_life_ns: 600_000_000_000,
            quiet_ns: 1_000_000,
            xoff_time_ns: None,
            stall_guard_ns: None,
            borrow: true,
        }
    }
}

/// The headroom in force of one (ingress port, priority).
#[derive(Debug, Clone)]
pub struct AdaptiveHeadroom {
    cfg: AdaptiveConfig,
    model: u64,
    /// Observed overshoot × margin, decayed to `evidence_at`.
    evidence: f64,
    /// The notice term, decayed to `evidence_at`.
    notice: f64,
    /// The prior, decayed to `evidence_at` (it counts only while [`Self::prior_applies`]).
    prior: f64,
    evidence_at: u64,
    /// Episodes seen (counted up to [`PRIOR_EPISODES`]).
    episodes: u64,
    /// The largest occupancy beyond XOFF an episode reached, decayed like the evidence.
    spill: f64,
    in_force: u64,
    source: HeadroomSource,
    /// Changes of `in_force` since the start, and when the last one was (ns).
    changes: u64,
    changed_at: Option<u64>,
}

impl AdaptiveHeadroom {
    /// Starts at the larger of the floor and the prior, at `now`.
    pub fn new(cfg: AdaptiveConfig, now: u64) -> Self {
        let mut h = AdaptiveHeadroom {
            cfg,
            model: 0,
            evidence: 0.0,
            notice: 0.0,
            prior: cfg.prior as f64,
            evidence_at: now,
            episodes: 0,
            spill: 0.0,
            in_force: 0,
            source: HeadroomSource::Configured,
            changes: 0,
            changed_at: None,
        };
        h.recompute();
        h
    }

    /// The headroom in force, bytes.
    pub fn in_force(&self) -> u64 {
        self.in_force
    }

    /// The term that decided [`AdaptiveHeadroom::in_force`].
    pub fn source(&self) -> HeadroomSource {
        self.source
    }

    /// The model term, bytes.
    pub fn model(&self) -> u64 {
        self.model
    }

    /// The evidence term at `now` (observed overshoot × margin, or the prior where it
    /// applies, plus the notice term, decayed), bytes.
    pub fn evidence(&self, now: u64) -> u64 {
        (self.observed() * self.decay_factor(now)) as u64
    }

    /// The notice term at `now` (part of [`AdaptiveHeadroom::evidence`]), bytes.
    pub fn notice(&self, now: u64) -> u64 {
        (self.notice * self.decay_factor(now)) as u64
    }

    /// The part of the headroom in force at `now` that no term claims, the prior included
    /// even where it stood aside (the floor, or a headroom not yet decayed, above the model
    /// and the evidence), bytes. The prior counts here because it is the room kept for what
    /// has not been seen yet: the stall guard spends this slack on a later look
    /// (`dataplane::pfc_headroom`), and with the prior retired after quiet episodes the
    /// quick start's slack grew to 130-190 kB, the guard waited 0.6-1.2 ms instead of 0.29,
    /// and the next stall let 250-560 kB in before its first PFC (the buffer holds 320 KiB).
    pub fn slack(&self, now: u64) -> u64 {
        let claimed = (self.seen(true) * self.decay_factor(now)) as u64;
        self.in_force.saturating_sub(claimed.max(self.model))
    }

    /// The floor, bytes.
    pub fn floor(&self) -> u64 {
        self.cfg.floor
    }

    /// How often the headroom in force changed since the start, and when it last did (ns;
    /// `None`: never, it is what it started at).
    pub fn changes(&self) -> (u64, Option<u64>) {
        (self.changes, self.changed_at)
    }

    /// New settings (a reload) at `now`; the evidence seen so far is kept. A prior that
    /// changed (a new buffer, adaptation turned on) starts over as at a start, so a reload
    /// gives what a start with the same settings gives: the old prior, sized for another
    /// buffer (or 0, adaptation having been off), stood for its whole half-life.
    pub fn set_config(&mut self, now: u64, cfg: AdaptiveConfig) {
        self.decay_to(now);
        if cfg.prior != self.cfg.prior {
            self.prior = cfg.prior as f64;
            self.episodes = 0;
        }
        self.cfg = cfg;
        self.settle(now);
    }

    /// Forgets what was observed (a reload that turns adaptation off: the floor and the
    /// model alone from now on, as after a start, not once the old evidence has decayed).
    pub fn forget_observed(&mut self, now: u64) {
        self.evidence = 0.0;
        self.notice = 0.0;
        self.prior = 0.0;
        self.spill = 0.0;
        self.evidence_at = now;
        self.settle(now);
    }

    /// A new model term (a link-up measurement). Returns whether the headroom changed.
    pub fn set_model(&mut self, now: u64, bytes: u64) -> bool {
        self.model = bytes;
        self.advance(now)
    }

    /// An XOFF episode overshot by `bytes`, and the occupancy rose `beyond_xoff` bytes above
    /// XOFF while it ran: the evidence rises at once if the overshoot is more than it holds,
    /// and the prior stands aside once [`PRIOR_EPISODES`] episodes were seen while none of
    /// them (the largest, decayed) rose further beyond XOFF than the evidence alone holds.
    /// Returns whether the headroom changed.
    pub fn on_overshoot(&mut self, now: u64, bytes: u64, beyond_xoff: u64) -> bool {
        self.decay_to(now);
        self.evidence = self.evidence.max(bytes as f64 * self.cfg.margin);
        self.spill = self.spill.max(beyond_xoff as f64);
        self.episodes = (self.episodes + 1).min(PRIOR_EPISODES);
        self.settle(now)
    }

    /// Up to `bytes` may arrive before a crossing of XOFF is acted on: if the notice term
    /// holds less, it rises at once to 1/8 above it, so that a rate that wavers by a few
    /// percent does not move the thresholds (and write the log line) at every sample. Returns
    /// whether the headroom changed.
    pub fn on_notice(&mut self, now: u64, bytes: u64) -> bool {
        self.decay_to(now);
        if bytes as f64 > self.notice {
            self.notice = (bytes + bytes / 8) as f64;
        }
        self.settle(now)
    }

    /// Lets the evidence decay to `now`. Returns whether the headroom changed.
    pub fn advance(&mut self, now: u64) -> bool {
        self.decay_to(now);
        self.settle(now)
    }

    fn decay_to(&mut self, now: u64) {
        let f = self.decay_factor(now);
        self.evidence *= f;
        self.notice *= f;
        self.prior *= f;
        self.spill *= f;
        self.evidence_at = now;
    }

    /// Recomputes at `now`, counting a change.
    fn settle(&mut self, now: u64) -> bool {
        let changed = self.recompute();
        if changed {
            self.changes += 1;
            self.changed_at = Some(now);
        }
        changed
    }

    /// The prior counts until [`PRIOR_EPISODES`] episodes were seen, and again while an
    /// episode's occupancy beyond XOFF (decayed) exceeds what the evidence alone holds.
    fn prior_applies(&self) -> bool {
        self.episodes < PRIOR_EPISODES || self.spill > self.evidence + self.notice
    }

    /// The observed term at `evidence_at`: the evidence, or the prior where it applies, plus
    /// the notice term.
    fn observed(&self) -> f64 {
        self.seen(self.prior_applies())
    }

    /// The overshoot seen, or the prior where `with_prior` and it is larger, plus the notice
    /// term, undecayed.
    fn seen(&self, with_prior: bool) -> f64 {
        let seen = if with_prior {
            self.evidence.max(self.prior)
        } else {
            self.evidence
        };
        seen + self.notice
    }

    /// What evidence held at `evidence_at` is worth at `now`.
    fn decay_factor(&self, now: u64) -> f64 {
        let dt = now.saturating_sub(self.evidence_at) as f64;
        let hl = self.cfg.half_life_ns.max(1) as f64;
        (-dt / hl).exp2()
    }

    fn recompute(&mut self) -> bool {
        let evidence = self.observed().ceil() as u64;
        let (raw, source) = [
            (self.cfg.floor, HeadroomSource::Configured),
            (self.model, HeadroomSource::Measured),
            (evidence, HeadroomSource::Observed),
        ]
        .into_iter()
        // The first of equals wins: configured, then measured, then observed.
        .fold((0, HeadroomSource::Configured), |best, t| {
            if t.0 > best.0 {
                t
            } else {
                best
            }
        });
        let cell = self.cfg.cell.max(1);
        // Saturating: a model from an absurd measurement must not wrap to a headroom of 0.
        let value = raw.div_ceil(cell).saturating_mul(cell);
        let small_fall = value < self.in_force
            && (self.in_force - value).saturating_mul(DECAY_STEP) < self.in_force;
        // Down to the floor or the model, or one that moved (a reload, a measurement), a fall
        // applies whatever its size.
        if small_fall && raw > self.cfg.floor.max(self.model) {
            return false;
        }
        let changed = value != self.in_force;
        self.in_force = value;
        self.source = source;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn adaptive() -> AdaptiveHeadroom {
        AdaptiveHeadroom::new(
            AdaptiveConfig {
                floor: 64 * 1024,
                margin: 1.5,
                half_life_ns: 1_000 * MS,
                cell: 256,
                prior: 0,
            },
            0,
        )
    }

    #[test]
    fn starts_at_the_floor_and_a_small_model_cannot_shrink_it() {
        let mut h = adaptive();
        assert_eq!(h.in_force(), 65_536);
        assert_eq!(h.source(), HeadroomSource::Configured);
        // Link-up measured a short cable: 22 KB. The configured headroom stays.
        assert!(!h.set_model(0, 22_466));
        assert_eq!(
            (h.in_force(), h.source()),
            (65_536, HeadroomSource::Configured)
        );
        assert!(h.set_model(0, 100_000));
        assert_eq!(
            (h.in_force(), h.source()),
            (100_096, HeadroomSource::Measured)
        );
    }

    /// [`adaptive`] with a prior of 500 kB.
    fn with_prior() -> AdaptiveHeadroom {
        let cfg = AdaptiveConfig {
            prior: 500_000,
            ..adaptive().cfg
        };
        AdaptiveHeadroom::new(cfg, 0)
    }

    #[test]
    fn a_prior_covers_the_start_and_decays_like_evidence() {
        let mut h = with_prior();
        assert_eq!(
            (h.in_force(), h.source()),
            (500_224, HeadroomSource::Observed)
        );
        h.advance(1_000 * MS);
        assert!(
            (249_000..251_000).contains(&h.in_force()),
            "{}",
            h.in_force()
        );
        h.advance(60_000 * MS);
        assert_eq!(h.in_force(), 65_536);
    }

    #[test]
    fn the_prior_gives_way_once_enough_episodes_needed_less() {
        let mut h = with_prior();
        // Episodes of 80 kB whose occupancy rose 100 kB beyond XOFF: 1.5 x 80 kB holds that.
        // The prior holds until the last of them.
        for e in 1..PRIOR_EPISODES {
            assert!(!h.on_overshoot(e, 80_000, 100_000));
            assert_eq!(h.in_force(), 500_224, "episode {e}");
        }
        assert!(h.on_overshoot(PRIOR_EPISODES, 80_000, 100_000));
        assert_eq!(
            (h.in_force(), h.source()),
            (120_064, HeadroomSource::Observed),
            "1.5 x the largest seen, not the prior"
        );
        // It stays aside: a reload or a later look does not bring it back.
        h.set_config(MS, h.cfg);
        h.advance(2 * MS);
        assert!(h.in_force() < 121_000, "{}", h.in_force());
        // A larger episode still raises the evidence at once.
        assert!(h.on_overshoot(3 * MS, 200_000, 0));
        assert_eq!(h.in_force(), 300_032);
    }

    #[test]
    fn the_slack_counts_the_prior_even_where_it_stood_aside() {
        // A floor of 600 kB over a 500 kB prior and a 112.5 kB notice term: no slack.
        let mut h = AdaptiveHeadroom::new(
            AdaptiveConfig {
                floor: 600_000,
                ..with_prior().cfg
            },
            0,
        );
        h.on_notice(0, 100_000);
        assert_eq!(h.in_force(), 612_608, "the prior and the notice term");
        assert!(h.slack(0) < 256, "a cell's rounding at most");
        // Quiet episodes retire the prior: the headroom in force falls to the floor, and the
        // slack is still what the floor holds beyond the prior and the notice term, not
        // beyond the 120 kB the episodes asked.
        for e in 1..=PRIOR_EPISODES {
            h.on_overshoot(e, 80_000, 100_000);
        }
        assert_eq!(h.in_force(), 600_064);
        assert!(h.evidence(PRIOR_EPISODES) < 233_000);
        assert_eq!(h.slack(PRIOR_EPISODES), 0);
        // A floor above all of them leaves the difference (1,000,192 B in cells, less 612.5 kB).
        let mut h = AdaptiveHeadroom::new(
            AdaptiveConfig {
                floor: 1_000_000,
                ..with_prior().cfg
            },
            0,
        );
        h.on_notice(0, 100_000);
        for e in 1..=PRIOR_EPISODES {
            h.on_overshoot(e, 80_000, 100_000);
        }
        let slack = h.slack(PRIOR_EPISODES);
        assert!((387_600..387_800).contains(&slack), "{slack}");
    }

    #[test]
    fn the_notice_term_adds_to_the_overshoot_and_lets_the_prior_stand_aside() {
        let mut h = with_prior();
        // 100 kB may arrive before a crossing is noticed: held as 112.5 kB (1/8 above), on
        // top of the prior too (the prior stands for what arrives after XOFF).
        assert!(h.on_notice(0, 100_000));
        assert_eq!((h.notice(0), h.in_force()), (112_500, 612_608));
        // Episodes of 80 kB after XOFF whose occupancy rose 200 kB beyond it: the overshoot
        // alone (120 kB) would keep the prior; with the notice term (232.5 kB) it stands aside.
        for e in 1..=PRIOR_EPISODES {
            h.on_overshoot(e, 80_000, 200_000);
        }
        assert_eq!(
            (h.in_force(), h.source()),
            (232_704, HeadroomSource::Observed)
        );
        assert!((232_499..=232_500).contains(&h.evidence(PRIOR_EPISODES)));
        // A rate a few percent higher moves nothing; a clearly higher one raises it at once.
        assert!(!h.on_notice(100, 110_000));
        assert!(h.on_notice(101, 200_000));
        assert_eq!(h.notice(101), 225_000);
        assert_eq!(h.in_force(), 345_088);
        // It decays like the evidence, down to the floor.
        h.advance(60_000 * MS);
        assert_eq!(h.in_force(), 65_536);
    }

    #[test]
    fn one_episode_that_spilled_beyond_the_evidence_keeps_the_prior_while_it_decays() {
        let mut h = with_prior();
        // The worker was late to send one XOFF: 300 kB beyond it, where 1.5 x 80 kB is 120 kB.
        h.on_overshoot(0, 80_000, 300_000);
        for e in 1..4 * PRIOR_EPISODES {
            h.on_overshoot(e, 80_000, 100_000);
        }
        assert_eq!(h.source(), HeadroomSource::Observed);
        assert!(h.in_force() > 490_000, "the prior: {}", h.in_force());
        // One half-life later the spill (150 kB) is still above the evidence (120 kB): the
        // prior (250 kB by then) holds.
        h.on_overshoot(1_000 * MS, 80_000, 100_000);
        assert!(
            (249_000..251_000).contains(&h.in_force()),
            "{}",
            h.in_force()
        );
        // Two half-lives later it is 75 kB: the prior (125 kB) stands aside.
        assert!(h.on_overshoot(2_000 * MS, 80_000, 100_000));
        assert_eq!(h.in_force(), 120_064);
        // A spill right after brings it back at once, as far as it has decayed (125 kB).
        assert!(h.on_overshoot(2_001 * MS, 80_000, 400_000));
        assert!(
            (124_000..126_000).contains(&h.in_force()),
            "{}",
            h.in_force()
        );
    }

    #[test]
    fn a_decay_moves_the_headroom_in_steps_not_at_every_look() {
        let mut h = adaptive();
        assert!(h.on_overshoot(0, 200_000, 0));
        assert_eq!(h.in_force(), 300_032);
        // 1 ms of decay (half-life 1 s) is a fraction of a per cent: nothing to apply.
        let mut changes = 0;
        for t in 1..=200 {
            changes += u32::from(h.advance(t * MS));
        }
        // 200 ms of decay is 13 %: two steps of at least 1/16, not 200.
        assert_eq!(changes, 2);
        assert_eq!(h.changes().0, 3, "the rise and two steps");
        assert!(
            h.in_force() < 300_032 && h.in_force() > 260_000,
            "{}",
            h.in_force()
        );
        // A floor that moves applies at once, even by a little.
        h.set_config(
            200 * MS,
            AdaptiveConfig {
                floor: 270_000,
                ..h.cfg
            },
        );
        assert!(h.in_force() >= 270_000);
    }

    #[test]
    fn rises_within_one_event_and_decays_slowly_to_the_floor() {
        let mut h = adaptive();
        assert_eq!(h.changes(), (0, None));
        assert!(h.on_overshoot(0, 200_000, 0));
        assert_eq!(
            h.in_force(),
            300_032,
            "1.5 x 200,000 rounded up to 256-byte cells"
        );
        assert_eq!(h.changes(), (1, Some(0)), "one change, counted at its time");
        assert_eq!(h.source(), HeadroomSource::Observed);
        // A smaller overshoot does not lower it.
        assert!(!h.on_overshoot(MS, 50_000, 0));
        assert_eq!(h.in_force(), 300_032);
        // One half-life later it has halved: slowly, never at once.
        h.advance(1_000 * MS);
        assert!(
            (149_000..151_000).contains(&h.in_force()),
            "{}",
            h.in_force()
        );
        // Much later it is back at the floor, and never below it.
        h.advance(60_000 * MS);
        assert_eq!(
            (h.in_force(), h.source()),
            (65_536, HeadroomSource::Configured)
        );
        // A larger overshoot raises it again at once.
        assert!(h.on_overshoot(60_001 * MS, 100_000, 0));
        assert_eq!(h.in_force(), 150_016);
    }
}
