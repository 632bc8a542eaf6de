//! The headroom in force of each PFC priority of one ingress port, and the XOFF/XON it leaves.
//!
//! A priority's buffer (its `limit`, XOFF + headroom) is what the configuration (or link-up)
//! gives it. This module decides how much of it is headroom: the larger of the floor, link-up's
//! model and the overshoot observed after XOFFs ([`crate::fc::adaptive`]), and sets
//! XOFF = buffer − headroom (never below [`min_xoff`]) and XON = XOFF − the configured
//! hysteresis. Admission still drops only beyond the buffer, so a larger headroom pauses the
//! source earlier and never drops more.
//!
//! **The notice term.** The overshoot meters see what arrives after an XOFF went out; what
//! arrived between the crossing of XOFF and the moment the worker noticed it is in no
//! overshoot, and on a busy host it is most of what a headroom holds (bench/RESULTS.md, the
//! `pfc-8KiB` row: 10-3,047 frames lost per run with the headroom at 1.5 × the overshoot). Since
//! issue 14's ingress accounting the worker reads the occupancy from the XDP counters at every
//! turn, so a crossing waits at most for the next turn, and turns are short (p99 131-524 us on
//! the lab VM) except when the worker does not run at all, which the stall guard covers: it
//! pauses the source of a worker that made no turn for `stall_guard`, woken by the XDP
//! program's doorbell (half of it again allows for the wake-up). So while the guard is on, no
//! crossing goes unnoticed for longer than `stall_guard` × 1.5
//! (`notice_ns`), and what arrives meanwhile is at most that time at the fastest rate the
//! priority arrived at while unpaused ([`crate::fc::arrival`], over 40 ms intervals, taken
//! once per gauge period, not per turn). (The time is a bound, not a percentile: the p99.99
//! of the turn gaps is the host's millisecond stalls, which would have asked for more than the
//! whole buffer.) The bound assumes frames reach the XDP hook as they are sent; they do not
//! always. On veth they wait in the peer's ring until its NAPI poll runs, and a poll hands
//! over up to 64 at once (a NIC's ring does the same); a turn can also run late without the
//! guard calling a stall. So the leader also measures what it bounds: at every turn, the
//! bytes of each priority that arrived since its previous turn while no XOFF of ours held the
//! priority (a crossing in there went unnoticed until this turn), the most of them per gauge
//! period. The notice term is the larger of the two, added to the observed overshoot in
//! [`crate::fc::adaptive`]. With several workers the leader sleeps while a flow fills another
//! worker's queue, and that worker, looking for a crossing at every turn to ring the leader
//! ([`super::leader_bell`]), sees what the leader does not: its looks that found none count
//! as the leader's turns ([`PortHeadroom::looked`]). Before, the leader's whole sleep counted
//! as blind: one flow on worker 1's queue (`tests/tools.rs`, compilers running) raised the
//! notice term to 497 kB, the headroom in force to 608 kB (the buffer is 320 KiB), XOFF to its
//! minimum (3 kB) and XON to 0, and the line ran dry after each XON (0.71 of it); after,
//! 70-82 kB, and XOFF and XON as configured. With the bound alone, `tests/under_load.rs`'s
//! 8 KiB floor lost 1-5 frames in 5 of 14 runs on the lab VM with no stall called (the notice term
//! 127-153 kB), and 2-3 frames in 3 of 14 with two CPU hogs running, the worker's longest lag
//! under 0.26-0.52 ms (notice 92-100 kB); with both, 0 of 20 and 0 of 30 with the hogs.
//! Measured alone (with the hogs) the term was 64-80 kB, under the bound most of the time, and
//! a run of 5 lost frames: the bound covers what the last second did not show. Without the
//! guard there is no bound and no notice term.
//!
//! **The guard's wait.** Each look of the guard costs a wake-up, about 60 us of CPU on the
//! lab VM whatever it finds, and before its doorbell it looked every half stall while traffic
//! flowed: at the default 250 us that was 30 % of the CPU beside the worker in
//! `bench/forward`'s PFC row. A headroom whose floor holds more than every term claims
//! (`slack`; the prior counts as a term here even after it stood aside,
//! [`AdaptiveHeadroom::slack`]) can pay for a later stall call, which since the doorbell spares
//! no looks but spares the source the guard's pauses for gaps the headroom absorbs anyway:
//! the guard may wait `stall_guard` × (notice + slack) / notice before it calls a stall
//! ([`PortHeadroom::guard_stall_ns`], the least over the port's PFC priorities, at most
//! [`GUARD_STALL_MAX_NS`], and with `[headroom] xoff_time` at most that: the frames a stall
//! holds up wait as long as it lasts, and the guard's wait decides how many there are; with
//! the guard at 2 ms, `bench/forward`'s `xoff_time` row at 500 us had a p99 of 1.16–1.49 ms in
//! four runs by hand, with it at most 500 us 0.71–1.50 ms, median about 0.95 ms, in
//! thirteen). What arrives while a crossing goes unnoticed then grows from the notice term by
//! at most the slack at the same rate, so the headroom in force still holds it: the bound
//! moves, the headroom does not. With no slack (the floor is what the evidence asks, or
//! less) the guard waits `stall_guard`, as before. The leader publishes the wait once
//! per gauge period, so for up to a period after the evidence rises (an overshoot larger than
//! any before) the guard may still wait by the slack that rise took.
//!
//! With `[headroom] xoff_time`, XOFF is also at most what the priority's buffer drains in that
//! time at its measured rate ([`crate::fc::drain`]) less how far recent episodes' peaks went
//! beyond XOFF, and XON shrinks in the same proportion: the peak of a backlog, not only its
//! XOFF, then waits about `xoff_time` however fast this host drains it and however late the
//! source stops. (With the cap at the budget alone, `bench/forward`'s `xoff_time` row at 500 us
//! had a p99 of 1.1–3.1 ms, median about 1.5 ms: the generator, a normal process, kept sending
//! for 0.13–1 ms after each XOFF, and its 8–16 kB beyond an 11–16 kB XOFF waited too.) The
//! room kept for the peak is the largest seen, less a quarter for each episode since, so one
//! stall's spike passes within a few dozen milliseconds of episodes. A lower XOFF leaves more
//! of the same buffer as headroom, so this too only pauses earlier. The cap moves in steps of
//! at least 1/8 and is not logged as a headroom change (it changes with the drain, often);
//! `status` and `lossless_pfc_drain_rate_bytes_per_second` show the rate and the XOFF in
//! force.
//!
//! The leader worker owns one per port: it sees every XOFF/XON of the port's generator and the
//! bytes arriving per priority (counted at the XDP hook; on AF_PACKET, which has no such
//! count, as the worker takes them), which is all the overshoot meters need
//! ([`crate::fc::overshoot`]).

use crate::fc::{
    adaptive::{AdaptiveConfig, AdaptiveHeadroom, HeadroomSettings, HeadroomSource},
    arrival::UnpausedRate,
    drain::DrainMeter,
    overshoot::{Overshoot, OvershootMeter},
    plan::{MeasuredHeadroom, PfcPlan, PrioPlan},
    PfcThresholds, PRIORITIES,
};

/// The longest the stall guard waits before calling a stall, however much slack the headroom
/// has: it then looks every millisecond, as it does on an idle port.
pub const GUARD_STALL_MAX_NS: u64 = 2_000_000;

/// How often the drain meters look, ns: four looks to a [`crate::fc::drain::WINDOW_NS`] window,
/// enough to see a backlog come and go, and a comparison per worker turn in between.
pub const DRAIN_LOOK_NS: u64 = crate::fc::drain::WINDOW_NS / 4;

/// Smallest XOFF a priority keeps however large its headroom grows: two of the port's
/// longest frames (at least two standard ones), so a jumbo port does not pause on every frame.
pub fn min_xoff(max_frame: u64) -> u64 {
    2 * max_frame.max(1518)
}

/// What status and metrics show of one priority's headroom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadroomReport {
    /// Bytes in force.
    pub in_force: u64,
    /// The term that decided it.
    pub source: HeadroomSource,
    /// The floor.
    pub floor: u64,
    /// Link-up's model (0 until measured).
    pub model: u64,
    /// Observed overshoot × margin plus the notice term, decayed.
    pub evidence: u64,
    /// The notice term (part of `evidence`): what arrives while a crossing of XOFF may go
    /// unnoticed (at the fastest rate seen within the guard's bound, or as seen between two
    /// turns, whichever is more).
    pub notice: u64,
    /// XOFF in force.
    pub xoff: u64,
    /// XON in force.
    pub xon: u64,
    /// The buffer, XOFF + headroom as configured: the headroom in force comes out of it.
    pub buffer: u64,
    /// The headroom in force leaves XOFF less than its minimum ([`min_xoff`]), so XOFF + the
    /// headroom in force exceed the buffer ([`crate::fc::plan::PfcPlan::buffer`]): the source
    /// is paused at almost every burst, and the buffer may run dry before the source resumes
    /// after XON (in `bench/forward`'s `xoff_time` row, 0.87x the lossy row's rate against
    /// 0.96x with room for an XOFF; bench/RESULTS.md (15)).
    pub squeezed: bool,
    /// The measured drain rate, bytes per second, while `[headroom] xoff_time` is set and a
    /// backlog has been seen.
    pub drain_rate: Option<u64>,
    /// How far recent episodes' peaks went beyond XOFF, bytes, which `xoff_time`'s cap keeps
    /// below its budget (`None` without `xoff_time`).
    pub peak_excess: Option<u64>,
    /// Changes of the value in force since the start, and when the last was (ns).
    pub changes: (u64, Option<u64>),
}

#[derive(Debug, Clone)]
struct Prio {
    meter: OvershootMeter,
    adaptive: AdaptiveHeadroom,
    /// The thresholds as configured: their buffer (XOFF + headroom) is what the headroom in
    /// force comes out of, and XON stays as far below XOFF.
    configured: PfcPlan,
    /// The port's [`min_xoff`].
    min_xoff: u64,
    /// Highest occupancy seen while the running episode lasted.
    peak: u64,
    /// XOFF in time (`xoff_time`).
    time: TimeCap,
}

/// What `[headroom] xoff_time` makes of one priority's XOFF: at most what the buffer drains in
/// that time less what recent episodes reached beyond XOFF, so that the peak, not only XOFF,
/// drains in about `xoff_time`.
#[derive(Debug, Clone)]
struct TimeCap {
    /// The buffer's drain rate (measured only with `xoff_time`).
    drain: DrainMeter,
    /// What drains in `xoff_time` at the measured rate, bytes (`None`: not measured).
    budget: Option<u64>,
    /// How far the peaks of recent episodes went beyond XOFF, bytes: the largest, less a
    /// quarter for each episode since.
    beyond: u64,
    /// XOFF at most this: `budget` − `beyond`, moved only in steps of more than 1/8.
    cap: Option<u64>,
}

impl TimeCap {
    fn new(max_frame: u64) -> Self {
        TimeCap {
            drain: DrainMeter::new(min_xoff(max_frame)),
            budget: None,
            beyond: 0,
            cap: None,
        }
    }

    /// A new drain `rate` measured, for `xoff_time_ns`; returns whether the cap moved.
    fn on_rate(&mut self, rate: u64, xoff_time_ns: u64) -> bool {
        let budget = u128::from(rate) * u128::from(xoff_time_ns) / 1_000_000_000;
        self.budget = Some(budget.min(u64::MAX.into()) as u64);
        self.retarget()
    }

    /// An episode ended with its peak `beyond` bytes over XOFF; returns whether the cap moved.
    fn on_episode(&mut self, beyond: u64) -> bool {
        self.beyond = beyond.max(self.beyond - self.beyond / 4);
        self.retarget()
    }

    /// Moves the cap to `budget` − `beyond` if that is more than 1/8 away from the cap in force
    /// (returns whether it moved).
    fn retarget(&mut self) -> bool {
        let Some(budget) = self.budget else {
            return false;
        };
        let cap = budget.saturating_sub(self.beyond);
        let moved = match self.cap {
            None => true,
            Some(old) => cap.abs_diff(old) > old / 8,
        };
        if moved {
            self.cap = Some(cap);
        }
        moved
    }
}

impl Prio {
    fn thresholds(&self) -> PfcThresholds {
        let floor = self.min_xoff.min(self.configured.buffer());
        let PfcPlan { xoff, xon, .. } = self
            .configured
            .with_headroom(self.adaptive.in_force(), self.min_xoff);
        match self.time.cap {
            Some(cap) if cap.max(floor) < xoff => {
                let capped = cap.max(floor);
                PfcThresholds {
                    xoff: capped,
                    // The same proportion of XOFF as before the cap.
                    xon: (u128::from(xon) * u128::from(capped) / u128::from(xoff)) as u64,
                }
            }
            _ => PfcThresholds { xoff, xon },
        }
    }
}

/// The PFC priorities of one ingress port.
#[derive(Debug, Clone)]
pub struct PortHeadroom {
    settings: HeadroomSettings,
    prios: [Option<Prio>; PRIORITIES],
    /// Priorities with an XOFF episode running (the meters to look at every turn).
    running: u8,
    /// The port's longest frame, bytes.
    max_frame: u64,
    /// No drain look before this (`xoff_time`): a look every [`DRAIN_LOOK_NS`], not every
    /// turn of the worker.
    next_drain_look: u64,
    /// Arrival rates while unpaused, for the notice term.
    arrivals: UnpausedRate,
    /// The bytes arrived per priority as of the previous turn (`None` before the first).
    turn_arrived: Option<[u64; PRIORITIES]>,
    /// The most bytes of each priority that arrived from one turn to the next while no XOFF
    /// of ours held it, since the notice term last took them ([`PortHeadroom::advance`]).
    blind: [u64; PRIORITIES],
}

impl PortHeadroom {
    /// For the `configured` plans and the headroom link-up `measured` on the port (if it
    /// did), at `now`.
    pub fn new(
        settings: HeadroomSettings,
        max_frame: u64,
        configured: &[PrioPlan; PRIORITIES],
        measured: Option<MeasuredHeadroom>,
        now: u64,
    ) -> Self {
        let mut h = PortHeadroom {
            settings,
            prios: std::array::from_fn(|_| None),
            running: 0,
            max_frame,
            next_drain_look: 0,
            arrivals: UnpausedRate::default(),
            turn_arrived: None,
            blind: [0; PRIORITIES],
        };
        h.reconfigure(settings, configured, measured, now);
        h
    }

    /// New plans or settings (reload, link-up measurement); meters and evidence of priorities
    /// that stay PFC are kept. `measured` is the headroom link-up measured on the port, the
    /// model term of every PFC priority there.
    pub fn reconfigure(
        &mut self,
        settings: HeadroomSettings,
        configured: &[PrioPlan; PRIORITIES],
        measured: Option<MeasuredHeadroom>,
        now: u64,
    ) {
        self.settings = settings;
        // New meters: episodes running under the old plans are not measured further.
        self.running = 0;
        for (p, slot) in self.prios.iter_mut().enumerate() {
            let Some(c) = configured[p].pfc else {
                *slot = None;
                continue;
            };
            let cfg = AdaptiveConfig {
                floor: settings.min_headroom.unwrap_or(c.headroom),
                margin: settings.margin,
                half_life_ns: settings.half_life_ns,
                cell: 1,
                // Until an overshoot is seen, assume up to half the buffer may be needed.
                prior: if settings.adaptive { c.buffer() / 2 } else { 0 },
            };
            // The evidence, the drain meter and its cap outlive a reload; without xoff_time
            // there is no cap.
            let (mut adaptive, time) = match slot.take() {
                Some(old) => {
                    let mut a = old.adaptive;
                    a.set_config(now, cfg);
                    if !settings.adaptive {
                        a.forget_observed(now);
                    }
                    match settings.xoff_time_ns {
                        Some(_) => (a, old.time),
                        None => (a, TimeCap::new(self.max_frame)),
                    }
                }
                None => (
                    AdaptiveHeadroom::new(cfg, now),
                    TimeCap::new(self.max_frame),
                ),
            };
            adaptive.set_model(now, measured.map_or(0, |m| m.headroom));
            *slot = Some(Prio {
                meter: OvershootMeter::new(settings.quiet_ns),
                adaptive,
                configured: c,
                min_xoff: min_xoff(self.max_frame),
                peak: 0,
                time,
            });
        }
    }

    /// XOFF/XON in force per priority (`None`: not PFC).
    pub fn thresholds(&self) -> [Option<PfcThresholds>; PRIORITIES] {
        std::array::from_fn(|p| self.prios[p].as_ref().map(Prio::thresholds))
    }

    /// The port's generator went from XOFF mask `before` to `after` at `now`, with `arrived`
    /// bytes per priority arrived so far and `occupancy` the bytes it acts on. Calls
    /// `seen(priority, overshoot)` for every episode that ended, and returns whether the
    /// thresholds changed.
    pub fn observe(
        &mut self,
        now: u64,
        before: u8,
        after: u8,
        arrived: &[u64; PRIORITIES],
        occupancy: &[u64; PRIORITIES],
        mut seen: impl FnMut(usize, Overshoot),
    ) -> bool {
        // What arrived since the previous turn while no XOFF held it: a crossing in there
        // went unnoticed until now (the notice term's measured part).
        if let Some(last) = self.turn_arrived.replace(*arrived) {
            for (p, blind) in self.blind.iter_mut().enumerate() {
                if before & (1 << p) == 0 {
                    *blind = (*blind).max(arrived[p].saturating_sub(last[p]));
                }
            }
        }
        if before == after && self.running == 0 {
            return false;
        }
        let mut changed = false;
        for (p, slot) in self.prios.iter_mut().enumerate() {
            let Some(s) = slot.as_mut() else { continue };
            let bit = 1u8 << p;
            let ended = match (before & bit != 0, after & bit != 0) {
                (false, true) => {
                    s.peak = 0;
                    s.meter.on_xoff(now, arrived[p])
                }
                (true, false) => s.meter.on_xon(arrived[p]),
                _ => s.meter.poll(now, arrived[p]),
            };
            s.peak = s.peak.max(occupancy[p]);
            if s.meter.running() {
                self.running |= bit;
            } else {
                self.running &= !bit;
            }
            if let Some(o) = ended {
                seen(p, o);
                let before = s.thresholds();
                let beyond = s.peak.saturating_sub(before.xoff);
                if self.settings.adaptive {
                    changed |= s.adaptive.on_overshoot(now, o.bytes, beyond);
                }
                if self.settings.xoff_time_ns.is_some() {
                    changed |= s.time.on_episode(beyond) && s.thresholds() != before;
                }
            }
        }
        changed
    }

    /// Another worker looked for a crossing when `looked` bytes per priority had arrived, and
    /// found none ([`super::shared::SharedPort::looked`]): up to there the arrivals were
    /// looked at as by a turn of ours, and only what arrived since counts as unnoticed at
    /// this turn. With the flow on another worker's queue the leader sleeps between its
    /// turns, and counting from its own previous turn took the whole sleep for blindness.
    pub fn looked(&mut self, looked: &[u64; PRIORITIES]) {
        if let Some(last) = self.turn_arrived.as_mut() {
            for (l, x) in last.iter_mut().zip(looked) {
                *l = (*l).max(*x);
            }
        }
    }

    /// Whether [`PortHeadroom::drain`] has a look to take at `now` (`[headroom] xoff_time` is
    /// set and [`DRAIN_LOOK_NS`] passed since the last).
    #[inline]
    pub fn drain_due(&self, now: u64) -> bool {
        self.settings.xoff_time_ns.is_some() && now >= self.next_drain_look
    }

    /// With `[headroom] xoff_time`: measures each priority's drain from the `arrived` totals
    /// and `occupancy` at `now` and caps XOFF at what drains in that time, at most once every
    /// [`DRAIN_LOOK_NS`]. Returns whether the thresholds changed.
    pub fn drain(
        &mut self,
        now: u64,
        arrived: &[u64; PRIORITIES],
        occupancy: &[u64; PRIORITIES],
    ) -> bool {
        let Some(t) = self.settings.xoff_time_ns else {
            return false;
        };
        if now < self.next_drain_look {
            return false;
        }
        self.next_drain_look = now + DRAIN_LOOK_NS;
        let mut changed = false;
        for (p, slot) in self.prios.iter_mut().enumerate() {
            let Some(s) = slot.as_mut() else { continue };
            if let Some(rate) = s.time.drain.observe(now, arrived[p], occupancy[p]) {
                let before = s.thresholds();
                changed |= s.time.on_rate(rate, t) && s.thresholds() != before;
            }
        }
        changed
    }

    /// Lets the evidence decay to `now` and, with the `arrived` totals and the time each
    /// priority was `held` paused so far, raises each notice term to what arrives in
    /// `notice_ns` at the rate the priority arrived at while unpaused, or to the most that
    /// arrived unpaused between two turns since the last call, whichever is more; returns
    /// whether the thresholds changed.
    pub fn advance(
        &mut self,
        now: u64,
        arrived: &[u64; PRIORITIES],
        held: &[u64; PRIORITIES],
    ) -> bool {
        let notice_ns = self.notice_ns();
        let rates = notice_ns.and_then(|_| self.arrivals.sample(now, arrived, held));
        let blind = std::mem::take(&mut self.blind);
        let mut changed = false;
        for (p, s) in self.prios.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            let Some(ns) = notice_ns else {
                changed |= s.adaptive.advance(now);
                continue;
            };
            let bound = rates
                .and_then(|r| r[p])
                .map_or(0, |bps| u128::from(bps) * u128::from(ns) / 8_000_000_000);
            changed |= s.adaptive.on_notice(now, (bound as u64).max(blind[p]));
        }
        changed
    }

    /// The bytes each PFC priority of this port may hold, XOFF + headroom in force (0 for the
    /// others), while that bounds its RX backlog even with the worker kept off its CPU: the
    /// stall guard on and the headroom adaptive, so that the headroom holds what arrives until
    /// the guard's XOFF takes effect (the notice term). `None` otherwise
    /// ([`super::fill_sizer`]).
    pub fn guarded_buffer(&self) -> Option<[u64; PRIORITIES]> {
        self.notice_ns()?;
        Some(std::array::from_fn(|p| {
            self.prios[p]
                .as_ref()
                .map_or(0, |s| s.thresholds().xoff + s.adaptive.in_force())
        }))
    }

    /// The longest a crossing of XOFF goes unnoticed, while the notice term counts (the guard
    /// on and the headroom adaptive).
    fn notice_ns(&self) -> Option<u64> {
        self.settings.notice_ns().filter(|_| self.settings.adaptive)
    }

    /// How long the stall guard may let frames wait for a worker on this port at `now`
    /// before it calls a stall, ns (the module doc, "The guard's wait"); `None` while no
    /// notice term bounds it (the guard off, the headroom not adaptive, or no rate seen yet).
    pub fn guard_stall_ns(&self, now: u64) -> Option<u64> {
        // Only while the notice term counts: the guard on and the headroom adaptive.
        let stall = self
            .settings
            .stall_guard_ns
            .filter(|_| self.notice_ns().is_some())?;
        let most = self
            .settings
            .xoff_time_ns
            .map_or(GUARD_STALL_MAX_NS, |t| t.min(GUARD_STALL_MAX_NS));
        self.prios
            .iter()
            .flatten()
            .filter_map(|s| {
                let notice = s.adaptive.notice(now);
                (notice > 0).then(|| {
                    let slack = s.adaptive.slack(now);
                    let wait = u128::from(stall) * u128::from(notice + slack) / u128::from(notice);
                    wait.min(u128::from(most)) as u64
                })
            })
            .min()
            .map(|wait| wait.max(stall))
    }

    /// What status and metrics show for priority `p` at `now`.
    pub fn report(&self, p: usize, now: u64) -> Option<HeadroomReport> {
        let s = self.prios[p].as_ref()?;
        let t = s.thresholds();
        Some(HeadroomReport {
            in_force: s.adaptive.in_force(),
            source: s.adaptive.source(),
            floor: s.adaptive.floor(),
            model: s.adaptive.model(),
            evidence: s.adaptive.evidence(now),
            notice: s.adaptive.notice(now),
            xoff: t.xoff,
            xon: t.xon,
            buffer: s.configured.buffer(),
            squeezed: t.xoff + s.adaptive.in_force() > s.configured.buffer(),
            drain_rate: self.settings.xoff_time_ns.and(s.time.drain.rate()),
            peak_excess: self.settings.xoff_time_ns.map(|_| s.time.beyond),
            changes: s.adaptive.changes(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn plans() -> [PrioPlan; PRIORITIES] {
        let mut p = [PrioPlan::lossy(64 * 1024); PRIORITIES];
        p[3] = PrioPlan::pfc(64 * 1024, 32 * 1024, 1024 * 1024);
        p
    }

    #[test]
    fn configured_thresholds_until_evidence_says_otherwise() {
        let c = plans();
        let mut h = PortHeadroom::new(HeadroomSettings::default(), 1518, &c, None, 0);
        let t = h.thresholds()[3].unwrap();
        assert_eq!((t.xoff, t.xon), (65_536, 32_768), "as configured");
        assert!(!h.report(3, 0).unwrap().squeezed);
        assert!(h.thresholds()[0].is_none());
        let mut arrived = [0u64; PRIORITIES];
        // XOFF, then 1.2 MB arrive before the source stops.
        assert!(!h.observe(0, 0, 0x08, &arrived, &arrived, |_, _| unreachable!()));
        arrived[3] = 1_200_000;
        assert!(!h.observe(
            MS / 2,
            0x08,
            0x08,
            &arrived,
            &arrived,
            |_, _| unreachable!()
        ));
        let mut seen = Vec::new();
        assert!(
            h.observe(2 * MS, 0x08, 0x08, &arrived, &arrived, |p, o| seen
                .push((p, o.bytes)))
        );
        assert_eq!(seen, [(3, 1_200_000)]);
        // The buffer cannot hold 1.5 x that as headroom: XOFF falls to its minimum.
        let t = h.thresholds()[3].unwrap();
        assert_eq!((t.xoff, t.xon), (min_xoff(1518), 0));
        let r = h.report(3, 2 * MS).unwrap();
        assert_eq!(r.source, HeadroomSource::Observed);
        assert_eq!(r.in_force, 1_800_000);
        assert_eq!(
            r.buffer, 1_114_112,
            "the configured 64 KiB XOFF + 1 MiB headroom"
        );
        assert!(
            r.squeezed,
            "the headroom in force leaves no room for an XOFF"
        );
        assert_eq!(r.changes, (1, Some(2 * MS)), "one change, when it was seen");
        // On a jumbo port the minimum is two of its frames.
        let jumbo = PortHeadroom::new(HeadroomSettings::default(), 9018, &c, None, 0);
        assert_eq!(min_xoff(9018), 18_036);
        assert_eq!(jumbo.prios[3].as_ref().unwrap().min_xoff, 18_036);
    }

    /// A reload gives the thresholds a start with the same settings gives: adaptation turned
    /// on brings the prior a start has (half the buffer), turned off it drops what was
    /// observed, and a new buffer starts its prior over. Before, the old prior stayed and
    /// decayed over the ten-minute half-life: 0 after turning adaptation on, half the old
    /// buffer after turning it off or shrinking the buffer (XOFF pinned at its minimum).
    #[test]
    fn a_reload_gives_what_a_start_with_the_same_settings_gives() {
        let mut c = plans();
        // The prior (half the buffer, 528 KiB) above the configured headroom (8 KiB).
        c[3] = PrioPlan::pfc(1 << 20, 512 * 1024, 8 * 1024);
        let on = HeadroomSettings::default();
        let off = HeadroomSettings {
            adaptive: false,
            ..on
        };
        let at = 10 * MS;
        let fresh = |s, c: &[PrioPlan; PRIORITIES]| PortHeadroom::new(s, 1518, c, None, at);
        assert_ne!(fresh(on, &c).thresholds(), fresh(off, &c).thresholds());
        for (from, to) in [(off, on), (on, off)] {
            let mut h = PortHeadroom::new(from, 1518, &c, None, 0);
            h.reconfigure(to, &c, None, at);
            assert_eq!(
                h.thresholds(),
                fresh(to, &c).thresholds(),
                "{}",
                to.adaptive
            );
        }
        let mut small = c;
        small[3] = PrioPlan::pfc(128 * 1024, 64 * 1024, 64 * 1024);
        let mut h = PortHeadroom::new(on, 1518, &c, None, 0);
        h.reconfigure(on, &small, None, at);
        assert_eq!(h.thresholds(), fresh(on, &small).thresholds());
    }

    /// The stall guard's default bound: 250 us and half of it again.
    fn guarded() -> HeadroomSettings {
        HeadroomSettings {
            stall_guard_ns: Some(250_000),
            ..HeadroomSettings::default()
        }
    }

    /// Runs `h` through traffic on priority 3 that starts within one 50 ms interval (which
    /// does not count, [`crate::fc::arrival`]) and goes on at 4 Gbit/s while free to send
    /// through the next: 12.5 MB arrive in it, 25 ms of it held paused. Returns when that
    /// interval ended and whether the thresholds changed on the way.
    fn four_gbit(h: &mut PortHeadroom) -> (u64, bool) {
        let (mut arrived, mut held) = ([0u64; PRIORITIES], [0u64; PRIORITIES]);
        let mut changed = h.advance(0, &arrived, &held);
        arrived[3] = 100_000;
        changed |= h.advance(50 * MS, &arrived, &held);
        arrived[3] += 12_500_000;
        held[3] = 25 * MS;
        changed |= h.advance(100 * MS, &arrived, &held);
        (100 * MS, changed)
    }

    #[test]
    fn the_notice_term_is_what_arrives_at_the_unpaused_rate_within_the_guard_bound() {
        let c = plans();
        let mut h = PortHeadroom::new(guarded(), 1518, &c, None, 0);
        // 4 Gbit/s while free to send: 375 us of it is 187.5 kB, held 1/8 above: 210,937 B on
        // top of the prior. (The configured 1 MiB floor still holds more: the thresholds stay.)
        let (now, changed) = four_gbit(&mut h);
        assert!(!changed);
        let r = h.report(3, now).unwrap();
        assert_eq!(r.notice, 210_937);
        // The prior (half the buffer, decayed over 100 ms of a 10-minute half-life) under it.
        let prior = (64 * 1024 + 1024 * 1024) / 2;
        assert!(r.evidence.abs_diff(210_937 + prior) < 100, "{}", r.evidence);
        // Without the stall guard there is no bound and no notice term.
        let off = HeadroomSettings::default();
        let mut h = PortHeadroom::new(off, 1518, &c, None, 0);
        let (now, _) = four_gbit(&mut h);
        assert_eq!(h.report(3, now).unwrap().notice, 0);
    }

    #[test]
    fn the_notice_term_rises_to_the_most_that_arrived_unpaused_between_two_turns() {
        let c = plans();
        let mut h = PortHeadroom::new(guarded(), 1518, &c, None, 0);
        let (mut arrived, held) = ([0u64; PRIORITIES], [0u64; PRIORITIES]);
        // A turn of the worker at `now` that finds `bytes` more arrived, with XOFF `paused`.
        fn turn(
            h: &mut PortHeadroom,
            arrived: &mut [u64; PRIORITIES],
            now: u64,
            paused: u8,
            bytes: u64,
        ) {
            arrived[3] += bytes;
            h.observe(now, paused, paused, arrived, arrived, |_, _| {});
        }
        // Turns 10 us apart, 2 kB each; then one turn finds 300 kB that came while it did
        // not look (a burst the kernel handed over at once, or a late turn); and 500 kB
        // arrive between two turns under our XOFF, which the overshoot counts, not this.
        turn(&mut h, &mut arrived, 0, 0, 0);
        for t in 1..10 {
            turn(&mut h, &mut arrived, t * 10_000, 0, 2_000);
        }
        turn(&mut h, &mut arrived, 100_000, 0, 300_000);
        turn(&mut h, &mut arrived, 110_000, 0x08, 500_000);
        h.advance(MS, &arrived, &held);
        // No rate measured yet: the term is what was seen, 1/8 above it.
        assert_eq!(h.report(3, MS).unwrap().notice, 337_500);
        // Taken once: the next period starts from nothing.
        assert_eq!(h.blind, [0; PRIORITIES]);
        // Without the stall guard there is no notice term, measured or bounded.
        let off = HeadroomSettings::default();
        let mut h = PortHeadroom::new(off, 1518, &c, None, 0);
        turn(&mut h, &mut arrived, 0, 0, 0);
        turn(&mut h, &mut arrived, 10_000, 0, 300_000);
        h.advance(MS, &arrived, &held);
        assert_eq!(h.report(3, MS).unwrap().notice, 0);
    }

    #[test]
    fn what_another_worker_looked_at_is_not_unnoticed() {
        let c = plans();
        let mut h = PortHeadroom::new(guarded(), 1518, &c, None, 0);
        let held = [0u64; PRIORITIES];
        let mut arrived = [0u64; PRIORITIES];
        h.observe(0, 0, 0, &arrived, &arrived, |_, _| {});
        // The leader sleeps 1 ms while 250 kB arrive on another worker's queue, whose last
        // look before the leader's turn (no crossing) had 240 kB of them: 10 kB went
        // unnoticed, not 250.
        arrived[3] = 250_000;
        let mut looked = [0u64; PRIORITIES];
        looked[3] = 240_000;
        h.looked(&looked);
        h.observe(MS, 0, 0, &arrived, &arrived, |_, _| {});
        assert_eq!(h.blind[3], 10_000);
        // A look older than the leader's own turn changes nothing.
        looked[3] = 100_000;
        arrived[3] = 260_000;
        h.looked(&looked);
        h.observe(2 * MS, 0, 0, &arrived, &arrived, |_, _| {});
        assert_eq!(h.blind[3], 10_000);
        h.advance(3 * MS, &arrived, &held);
        assert_eq!(h.report(3, 3 * MS).unwrap().notice, 11_250);
    }

    #[test]
    fn the_guard_waits_longer_only_by_what_the_floor_holds_beyond_every_term() {
        let c = plans();
        let settings = guarded();
        let mut h = PortHeadroom::new(settings, 1518, &c, None, 0);
        h.advance(0, &[0; PRIORITIES], &[0; PRIORITIES]);
        // No rate seen yet: nothing bounds a longer wait.
        assert_eq!(h.guard_stall_ns(0), None);
        // 4 Gbit/s unpaused: notice 210,937 B over the prior (557,056 B); the 1 MiB floor
        // holds 280,583 B more, which buys 1.33 more notice times at that rate.
        let (now, _) = four_gbit(&mut h);
        let r = h.report(3, now).unwrap();
        let slack = r.in_force - r.evidence;
        let wait = h.guard_stall_ns(now).unwrap();
        assert_eq!(wait, 250_000 * (r.notice + slack) / r.notice);
        assert!((582_000..583_000).contains(&wait), "{wait}");
        // What arrives at that rate over the longer bound (1.5 × the wait) is still within
        // the headroom in force beyond the prior.
        let unnoticed = wait as f64 * 1.5 * 4e9 / 8e9;
        assert!(
            unnoticed <= (r.in_force - (r.evidence - r.notice)) as f64,
            "{unnoticed}"
        );
        // An 8 KiB floor: the evidence decides, no slack, the configured stall.
        let mut h = PortHeadroom::new(
            HeadroomSettings {
                min_headroom: Some(8 * 1024),
                ..guarded()
            },
            1518,
            &c,
            None,
            0,
        );
        let (now, _) = four_gbit(&mut h);
        let wait = h.guard_stall_ns(now).unwrap();
        assert!((250_000..=250_002).contains(&wait), "{wait}");
        // A floor far above every term: at most GUARD_STALL_MAX_NS.
        let mut big = plans();
        big[3] = PrioPlan::pfc(64 * 1024, 32 * 1024, 64 * 1024 * 1024);
        let mut h = PortHeadroom::new(settings, 1518, &big, None, 0);
        let (now, _) = four_gbit(&mut h);
        assert_eq!(h.guard_stall_ns(now), Some(GUARD_STALL_MAX_NS));
        // With `xoff_time` the guard never waits longer than that: frames a stall holds up
        // would wait longer than the operator asked of every backlog.
        let timed = HeadroomSettings {
            xoff_time_ns: Some(MS / 2),
            ..settings
        };
        let mut h = PortHeadroom::new(timed, 1518, &big, None, 0);
        let (now, _) = four_gbit(&mut h);
        assert_eq!(h.guard_stall_ns(now), Some(MS / 2));
        // Without the stall guard nothing is afforded.
        let mut h = PortHeadroom::new(HeadroomSettings::default(), 1518, &c, None, 0);
        let (now, _) = four_gbit(&mut h);
        assert_eq!(h.guard_stall_ns(now), None);
    }

    #[test]
    fn xoff_time_caps_xoff_at_what_drains_in_that_time() {
        let c = plans();
        let settings = HeadroomSettings {
            xoff_time_ns: Some(MS / 2),
            ..HeadroomSettings::default()
        };
        let mut h = PortHeadroom::new(settings, 1518, &c, None, 0);
        let t = |h: &PortHeadroom| h.thresholds()[3].map(|t| (t.xoff, t.xon)).unwrap();
        let mut arrived = [0u64; PRIORITIES];
        let mut occ = [0u64; PRIORITIES];
        // No backlog yet: the drain is unknown and XOFF is as configured.
        assert!(!h.drain(0, &arrived, &occ));
        assert!(!h.drain(MS, &arrived, &occ));
        assert_eq!(t(&h), (65_536, 32_768));
        assert_eq!(h.report(3, MS).unwrap().drain_rate, None);
        // A backlog drains at 40 MB/s: half a millisecond of it is 20,000 bytes.
        occ[3] = 50_000;
        assert!(!h.drain(2 * MS, &arrived, &occ), "a window starts");
        arrived[3] = 16_000;
        occ[3] = 58_000;
        assert!(h.drain(2 * MS + MS / 5, &arrived, &occ));
        assert_eq!(t(&h), (20_000, 10_000), "XON in the same proportion");
        let r = h.report(3, 3 * MS).unwrap();
        assert_eq!(
            (r.drain_rate, r.xoff, r.xon),
            (Some(40_000_000), 20_000, 10_000)
        );
        // A slightly different rate (within 1/8) leaves the thresholds alone.
        arrived[3] += 16_000;
        occ[3] += 8_400;
        assert!(!h.drain(2 * MS + 2 * MS / 5, &arrived, &occ));
        assert_eq!(t(&h), (20_000, 10_000));
        // A fast drain lifts the cap above the configured XOFF: bytes decide again.
        for w in 3..12 {
            arrived[3] += 100_000;
            occ[3] += 1_000;
            h.drain(2 * MS + w * MS / 5, &arrived, &occ);
        }
        assert_eq!(t(&h), (65_536, 32_768));
        // A drain that stops (the egress paused downstream) never takes XOFF below two frames.
        for w in 12..40 {
            h.drain(2 * MS + w * MS / 5, &arrived, &occ);
        }
        assert_eq!(t(&h).0, min_xoff(1518));
        // A reload that keeps xoff_time keeps the measured drain and its cap.
        h.reconfigure(settings, &c, None, 9 * MS);
        assert_eq!(t(&h).0, min_xoff(1518));
        assert!(h.report(3, 9 * MS).unwrap().drain_rate.is_some());
        // Without xoff_time, nothing is measured and the configured thresholds hold.
        h.reconfigure(HeadroomSettings::default(), &c, None, 10 * MS);
        assert_eq!(t(&h), (65_536, 32_768));
        assert!(!h.drain(11 * MS, &arrived, &occ));
        assert_eq!(h.report(3, 11 * MS).unwrap().drain_rate, None);
    }

    #[test]
    fn xoff_time_leaves_room_below_the_budget_for_what_episodes_reach_beyond_xoff() {
        let c = plans();
        let settings = HeadroomSettings {
            xoff_time_ns: Some(MS / 2),
            adaptive: false,
            ..HeadroomSettings::default()
        };
        let mut h = PortHeadroom::new(settings, 1518, &c, None, 0);
        let xoff = |h: &PortHeadroom| h.thresholds()[3].unwrap().xoff;
        let mut arrived = [0u64; PRIORITIES];
        let mut occ = [0u64; PRIORITIES];
        // A backlog drains at 40 MB/s: the budget of half a millisecond is 20,000 bytes.
        occ[3] = 50_000;
        h.drain(0, &arrived, &occ);
        arrived[3] = 16_000;
        occ[3] = 58_000;
        assert!(h.drain(MS / 5, &arrived, &occ));
        assert_eq!(xoff(&h), 20_000);
        // An episode: XOFF at 20,000, its peak 8,000 beyond before the source stopped.
        let mut t = MS;
        let mut episode = |h: &mut PortHeadroom, beyond: u64| {
            let x = xoff(h);
            occ[3] = x;
            h.observe(t, 0, 1 << 3, &arrived, &occ, |_, _| {});
            arrived[3] += beyond;
            occ[3] = x + beyond;
            h.observe(t + 10_000, 1 << 3, 1 << 3, &arrived, &occ, |_, _| {});
            occ[3] = 0;
            let changed = h.observe(t + 20_000, 1 << 3, 0, &arrived, &occ, |_, _| {});
            t += MS;
            changed
        };
        assert!(episode(&mut h, 8_000));
        assert_eq!(
            xoff(&h),
            12_000,
            "the peak now drains in half a millisecond"
        );
        assert_eq!(h.report(3, 0).unwrap().peak_excess, Some(8_000));
        // Episodes that stop right at XOFF give the room back a quarter at a time, in steps
        // of more than 1/8.
        let mut seen = vec![xoff(&h)];
        for _ in 0..12 {
            episode(&mut h, 0);
            seen.push(xoff(&h));
        }
        seen.dedup();
        assert_eq!(seen, [12_000, 14_000, 16_625, 18_931]);
        // A large one takes XOFF down to its floor of two frames, never below.
        assert!(episode(&mut h, 100_000));
        assert_eq!(xoff(&h), min_xoff(1518));
    }

    #[test]
    fn a_measured_short_link_never_shrinks_the_configured_headroom() {
        let c = plans();
        // Link-up's model for a short wire: 22 KB of headroom.
        let measured = MeasuredHeadroom {
            headroom: 22_466,
            min_xoff: min_xoff(1518),
        };
        let h = PortHeadroom::new(HeadroomSettings::default(), 1518, &c, Some(measured), 0);
        let r = h.report(3, 0).unwrap();
        assert_eq!(
            (r.in_force, r.source, r.model),
            (1024 * 1024, HeadroomSource::Configured, 22_466)
        );
        assert_eq!(h.thresholds()[3].unwrap().xoff, 65_536);
    }

    /// The measured headroom is every PFC priority's model term, and each takes it out of its
    /// own buffer: a larger one moves XOFF down there only.
    #[test]
    fn a_measured_headroom_moves_xoff_within_each_priority_buffer() {
        let mut c = plans();
        c[5] = PrioPlan::pfc(256 * 1024, 128 * 1024, 256 * 1024);
        let measured = MeasuredHeadroom {
            headroom: 300_000,
            min_xoff: min_xoff(1518),
        };
        let h = PortHeadroom::new(HeadroomSettings::default(), 1518, &c, Some(measured), 0);
        // Priority 3's configured 1 MiB is more than the model: as configured.
        let t3 = h.thresholds()[3].unwrap();
        assert_eq!((t3.xoff, t3.xon), (65_536, 32_768));
        // Priority 5's 256 KiB is less: XOFF moves down by the difference, XON with it.
        let r5 = h.report(5, 0).unwrap();
        assert_eq!(
            (r5.in_force, r5.source),
            (300_000, HeadroomSource::Measured)
        );
        assert_eq!(
            (r5.xoff, r5.xon),
            (524_288 - 300_000, 524_288 - 300_000 - 131_072)
        );
        assert_eq!(r5.buffer, 524_288);
    }
}
