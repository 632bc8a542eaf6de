//! Per-port state every worker must see: buffer occupancy per priority (charged at RX,
//! released at TX, whichever workers do those), what waits in the port's RX rings, pause
//! deadlines from received PAUSE/PFC/SFC frames with the time they held each priority,
//! whether the port has a carrier, and when its line is free for the next frame.

use std::sync::{
    atomic::{
        AtomicBool, AtomicU32, AtomicU64, AtomicU8,
        Ordering::{AcqRel, Acquire, Relaxed},
    },
    OnceLock,
};

use super::{eventfd::EventFd, shaper::LineClock};
use crate::{
    fc::{priorities, PauseTimers, PfcThresholds, PRIORITIES},
    wire::MacControl,
};

/// Shared state of one port.
#[derive(Debug, Default)]
pub struct SharedPort {
    /// Bytes charged to this port as ingress, per priority.
    occupancy: [AtomicU64; PRIORITIES],
    /// Bytes steered by the XDP program and not yet taken from an RX ring, per priority,
    /// summed over the port's queues (each worker adds the change of its own queue's).
    rx_backlog: [AtomicU64; PRIORITIES],
    /// Workers whose fill ring for this port is running short of buffers.
    fill_starved: AtomicU32,
    /// Bytes arrived per priority: the XDP program's totals of each of the port's queues,
    /// as its worker last accounted them, summed.
    arrived: [AtomicU64; PRIORITIES],
    /// This port's egress pauses by PAUSE/PFC, per priority.
    pfc_clocks: [PauseClock; PRIORITIES],
    /// This port's egress pauses by SFC, per priority.
    sfc_clocks: [PauseClock; PRIORITIES],
    /// The port has no carrier (or is down): its egress holds every frame.
    link_down: AtomicBool,
    /// The kernel dropped a frame a worker sent on this port, and the carrier watch has not
    /// read the carrier since: the egress holds every frame until it has.
    tx_refused: AtomicBool,
    /// The carrier watch's doorbell for this port, once a watch runs.
    carrier_bell: OnceLock<EventFd>,
    /// A transmit on this port cannot tell of a lost carrier (a zero-copy socket), so the
    /// carrier watch reads the carrier at its recheck period even while it is up.
    tx_blind: AtomicBool,
    /// Until when the PFC this port sent (its workers' or the stall guard's) pauses each
    /// priority upstream, CLOCK_MONOTONIC ns (0: never paused).
    upstream_pause: [AtomicU64; PRIORITIES],
    /// Stalls the stall guard met on this port: a worker that made no turn while frames
    /// waited for it ([`super::stall_guard`]).
    stalls: AtomicU64,
    /// PFC frames the stall guard sent on this port, per priority they paused.
    stall_pfc_tx: [AtomicU64; PRIORITIES],
    /// SFC messages the stall guard sent on this port, per priority.
    stall_sfcm_tx: [AtomicU64; PRIORITIES],
    /// How long the stall guard may let frames wait before calling a stall, ns, as the
    /// leader worker's headroom affords it (0: the configured `stall_guard`).
    guard_stall_ns: AtomicU64,
    /// How long the stall guard lets frames wait before it calls a stall on this port, ns,
    /// as it last looked (0: no guard watches the port).
    guard_wait_ns: AtomicU64,
    /// The port's line: when it is free for the next frame, whichever worker sends it.
    line: LineClock,
    /// Frames the port's XDP program could not steer to a worker's socket while the workers
    /// ran (none on the RX queue they arrived on: gone to the kernel, never forwarded), as
    /// the control plane last read the program's count.
    unsteered: AtomicU64,
    /// The XOFF and XON in force per priority, as the leader's congestion point holds them
    /// (XOFF 0: no PFC, never a real XOFF), for the other workers to tell a crossing
    /// ([`SharedPort::pfc_crossing`]).
    pfc_xoff: [AtomicU64; PRIORITIES],
    pfc_xon: [AtomicU64; PRIORITIES],
    /// The priorities the leader's congestion point holds in XOFF (bit p: priority p).
    leader_xoff: AtomicU8,
    /// The bytes arrived per priority as of the latest look of another worker that found
    /// no crossing on this port while the leader slept ([`SharedPort::looked`]).
    looked_arrived: [AtomicU64; PRIORITIES],
}

/// What the stall guard met and did on a port ([`SharedPort::stall_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallCounts {
    /// Stalls met.
    pub stalls: u64,
    /// PFC frames sent, per priority they paused.
    pub pfc_tx: [u64; PRIORITIES],
    /// SFC messages sent, per priority.
    pub sfcm_tx: [u64; PRIORITIES],
}

impl SharedPort {
    /// Charges `bytes` to priority `p` if its occupancy stays within `limit`; returns whether
    /// it did. The charge is taken first and given back when it went beyond the limit, so of
    /// two workers charging at once, never both pass a limit with room for one (another
    /// reader may see the excess for the instant before it is given back).
    #[inline]
    pub fn try_charge(&self, p: usize, bytes: u64, limit: u64) -> bool {
        let before = self.occupancy[p].fetch_add(bytes, Relaxed);
        if before + bytes > limit {
            self.occupancy[p].fetch_sub(bytes, Relaxed);
            return false;
        }
        true
    }

    /// Charges `bytes` to priority `p` whatever its limit; returns the occupancy after it.
    #[inline]
    pub fn charge(&self, p: usize, bytes: u64) -> u64 {
        self.occupancy[p].fetch_add(bytes, Relaxed) + bytes
    }

    /// Releases `bytes` of priority `p`.
    #[inline]
    pub fn release(&self, p: usize, bytes: u64) {
        self.occupancy[p].fetch_sub(bytes, Relaxed);
    }

    /// The port's line, which every worker's egress on the port takes its frames' wire time
    /// from ([`LineClock`]).
    #[inline]
    pub fn line(&self) -> &LineClock {
        &self.line
    }

    /// Bytes charged to priority `p`.
    #[inline]
    pub fn occupancy(&self, p: usize) -> u64 {
        self.occupancy[p].load(Relaxed)
    }

    /// All priorities' occupancy.
    pub fn occupancy_all(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.occupancy(p))
    }

    /// Replaces one worker's share of the RX backlog: it was `old` and is now `new` bytes.
    #[inline]
    pub fn update_rx_backlog(&self, old: &[u64; PRIORITIES], new: &[u64; PRIORITIES]) {
        for p in 0..PRIORITIES {
            if old[p] != new[p] {
                // Wrapping: the sum over workers never goes below zero, one share may shrink.
                self.rx_backlog[p].fetch_add(new[p].wrapping_sub(old[p]), Relaxed);
            }
        }
    }

    /// Adds one worker's new arrivals per priority (`new` − `old` of its queue's totals).
    #[inline]
    pub fn add_arrived(&self, old: &[u64; PRIORITIES], new: &[u64; PRIORITIES]) {
        for p in 0..PRIORITIES {
            if old[p] != new[p] {
                self.arrived[p].fetch_add(new[p].wrapping_sub(old[p]), Relaxed);
            }
        }
    }

    /// Bytes arrived per priority on the port (steered by XDP), as the workers last accounted
    /// them: the program's totals, so the difference of two readings is what arrived between.
    pub fn arrived_all(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.arrived[p].load(Relaxed))
    }

    /// Bytes per priority waiting in the port's RX rings.
    pub fn rx_backlog_all(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.rx_backlog[p].load(Relaxed))
    }

    /// What the PFC congestion point of this port acts on, per priority: bytes queued plus
    /// bytes still waiting in its RX rings (a frame counts from the XDP hook on).
    pub fn pfc_occupancy(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.pfc_occupancy_of(p))
    }

    /// [`SharedPort::pfc_occupancy`] of priority `p` alone.
    fn pfc_occupancy_of(&self, p: usize) -> u64 {
        self.occupancy[p]
            .load(Relaxed)
            .wrapping_add(self.rx_backlog[p].load(Relaxed))
    }

    /// This port sent the PAUSE/PFC frame `m` at `now` at `speed_bps`: until when it pauses
    /// each priority it names upstream (the latest sent is what the peer obeys).
    pub fn sent_pause(&self, m: &MacControl, now: u64, speed_bps: u64) {
        for (p, until) in PauseTimers::deadlines(m, now, speed_bps).iter().enumerate() {
            if let Some(until) = until {
                self.upstream_pause[p].store(*until, Relaxed);
            }
        }
    }

    /// The leader's XOFF/XON in force, per priority (`None`: no PFC).
    pub fn set_pfc_thresholds(&self, t: &[Option<PfcThresholds>; PRIORITIES]) {
        for (p, t) in t.iter().enumerate() {
            let (xoff, xon) = t.map_or((0, 0), |t| (t.xoff, t.xon));
            self.pfc_xoff[p].store(xoff, Relaxed);
            self.pfc_xon[p].store(xon, Relaxed);
        }
    }

    /// The priorities the leader's congestion point holds in XOFF now.
    pub fn set_leader_xoff(&self, xoff: u8) {
        self.leader_xoff.store(xoff, Relaxed);
    }

    /// Whether a priority of `mask` stands where the leader's congestion point would send
    /// PFC: at or above XOFF (or the port short of RX buffers) and not in XOFF, or in XOFF and
    /// at or below XON (a leader that sleeps notices either only when it wakes). The leader's
    /// own state, not the pause upstream: the stall guard's pause, which the leader does not
    /// end, is no XON due.
    pub fn pfc_crossing(&self, mask: u8) -> bool {
        let xoff_held = self.leader_xoff.load(Relaxed);
        let starved = self.fill_starved();
        priorities(mask).any(|p| {
            let t = PfcThresholds {
                xoff: self.pfc_xoff[p].load(Relaxed),
                xon: self.pfc_xon[p].load(Relaxed),
            };
            let held = xoff_held & (1 << p) != 0;
            t.xoff != 0 && t.crossed(self.pfc_occupancy_of(p), held, starved)
        })
    }

    /// A worker other than the leader read `arrived` ([`SharedPort::arrived_all`]), then
    /// looked for a crossing of the priorities in `mask` on this port and found none: a
    /// crossing those bytes made would have been seen, and one made later rings the leader
    /// at that worker's next look. So what arrived up to then went no longer unnoticed than
    /// what arrives by a turn of the leader's (the notice term's measured part,
    /// [`super::pfc_headroom`]).
    pub fn looked(&self, mask: u8, arrived: &[u64; PRIORITIES]) {
        for p in priorities(mask) {
            if arrived[p] > self.looked_arrived[p].load(Relaxed) {
                self.looked_arrived[p].fetch_max(arrived[p], Relaxed);
            }
        }
    }

    /// The arrivals as of the latest look that found no crossing ([`SharedPort::looked`]).
    pub fn looked_arrived(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.looked_arrived[p].load(Relaxed))
    }

    /// Until when the PFC this port last sent pauses priority `p` upstream.
    pub fn upstream_pause_until(&self, p: usize) -> u64 {
        self.upstream_pause[p].load(Relaxed)
    }

    /// The stall guard met a stall on this port.
    pub fn count_stall(&self) {
        self.stalls.fetch_add(1, Relaxed);
    }

    /// The control plane read `n` frames the XDP program could not steer since the workers
    /// started.
    pub fn set_unsteered(&self, n: u64) {
        self.unsteered.store(n, Relaxed);
    }

    /// Frames the XDP program could not steer while the workers ran, as last read.
    pub fn unsteered(&self) -> u64 {
        self.unsteered.load(Relaxed)
    }

    /// The stall guard sent a PFC frame pausing the priorities in `enable`.
    pub fn count_stall_pfc(&self, enable: u8) {
        for (p, n) in self.stall_pfc_tx.iter().enumerate() {
            if enable & (1 << p) != 0 {
                n.fetch_add(1, Relaxed);
            }
        }
    }

    /// The stall guard may wait `ns` before calling a stall on this port (`None`: the
    /// configured `stall_guard`); see [`super::pfc_headroom::PortHeadroom::guard_stall_ns`].
    pub fn set_guard_stall(&self, ns: Option<u64>) {
        self.guard_stall_ns.store(ns.unwrap_or(0), Relaxed);
    }

    /// How long the stall guard may wait on this port, ns (0: the configured stall).
    pub fn guard_stall(&self) -> u64 {
        self.guard_stall_ns.load(Relaxed)
    }

    /// The stall guard now lets frames wait `ns` before calling a stall on this port. Stored
    /// only when it changed: the guard looks thousands of times a second, and the line is
    /// one the workers read.
    pub fn set_guard_wait(&self, ns: u64) {
        if self.guard_wait_ns.load(Relaxed) != ns {
            self.guard_wait_ns.store(ns, Relaxed);
        }
    }

    /// How long the stall guard lets frames wait on this port, ns (0: no guard watches it).
    pub fn guard_wait(&self) -> u64 {
        self.guard_wait_ns.load(Relaxed)
    }

    /// The stall guard sent an SFC message for priority `p`.
    pub fn count_stall_sfcm(&self, p: usize) {
        self.stall_sfcm_tx[p].fetch_add(1, Relaxed);
    }

    /// Stalls met on this port, and what the stall guard sent for them.
    pub fn stall_counts(&self) -> StallCounts {
        StallCounts {
            stalls: self.stalls.load(Relaxed),
            pfc_tx: std::array::from_fn(|p| self.stall_pfc_tx[p].load(Relaxed)),
            sfcm_tx: std::array::from_fn(|p| self.stall_sfcm_tx[p].load(Relaxed)),
        }
    }

    /// One worker's fill ring for this port started (`true`) or stopped running short.
    pub fn set_fill_starved(&self, starved: bool) {
        if starved {
            self.fill_starved.fetch_add(1, Relaxed);
        } else {
            self.fill_starved.fetch_sub(1, Relaxed);
        }
    }

    /// Some worker's fill ring for this port is running short of buffers.
    #[inline]
    pub fn fill_starved(&self) -> bool {
        self.fill_starved.load(Relaxed) != 0
    }

    /// Records whether the port is operational (the carrier watch does).
    pub fn set_link_up(&self, up: bool) {
        self.link_down.store(!up, Relaxed);
    }

    /// False while the port has no carrier.
    #[inline]
    pub fn link_up(&self) -> bool {
        !self.link_down.load(Relaxed)
    }

    /// The port's egress holds every frame: no carrier, or a refused transmit the carrier
    /// watch has not answered yet ([`SharedPort::transmit_refused`]).
    #[inline]
    pub fn egress_held(&self) -> bool {
        // Acquire: the watch records the carrier it read before it clears the refusal, so
        // a refusal seen cleared comes with that carrier.
        self.tx_refused.load(Acquire) || self.link_down.load(Relaxed)
    }

    /// A worker's transmit on this port was refused: the kernel dropped a frame it took
    /// ([`crate::dataplane::port::Port::tx_refusals`]), for want of a carrier most likely, and
    /// the kernel's link events say so up to a second late. The egress holds and the carrier
    /// watch is rung to read the carrier now. Without a watch nothing is held. Returns
    /// whether the egress is held now.
    pub fn transmit_refused(&self) -> bool {
        let Some(bell) = self.carrier_bell.get() else {
            return false;
        };
        if !self.tx_refused.swap(true, AcqRel) {
            bell.ring();
        }
        true
    }

    /// The carrier watch recorded the carrier it read after a refusal
    /// ([`SharedPort::transmit_refused`]): from now on that carrier alone decides whether the
    /// egress holds. Returns whether a refusal was waiting. (A refusal in between, after the
    /// read, is answered with it: a port still without carrier refuses the next frame too.)
    pub fn answer_transmit_refused(&self) -> bool {
        self.tx_refused.swap(false, AcqRel)
    }

    /// A socket of this port transmits without a word about the carrier: in zero-copy mode the
    /// driver takes frames from the TX ring into its hardware ring whatever the link, where the
    /// copy-mode path refuses them ([`SharedPort::transmit_refused`]). The carrier watch then
    /// reads this port's carrier at its recheck period even while it is up, instead of waiting
    /// for link events the kernel may send a second late (`control::carrier`).
    pub fn set_tx_blind(&self) {
        if !self.tx_blind.swap(true, Relaxed) {
            // A watch already asleep with every port up learns of it now.
            if let Some(bell) = self.carrier_bell.get() {
                bell.ring();
            }
        }
    }

    /// Whether [`SharedPort::set_tx_blind`] was called.
    pub fn tx_blind(&self) -> bool {
        self.tx_blind.load(Relaxed)
    }

    /// Installs the carrier watch's doorbell for [`SharedPort::transmit_refused`], unless one
    /// is (a port's first stays for its life: a second watch shares it).
    pub fn install_carrier_bell(&self) -> std::io::Result<()> {
        if self.carrier_bell.get().is_none() {
            let bell = EventFd::new()?;
            self.carrier_bell.get_or_init(|| bell);
        }
        Ok(())
    }

    /// The carrier watch's doorbell, once one is installed.
    pub fn carrier_bell(&self) -> Option<&EventFd> {
        self.carrier_bell.get()
    }

    /// Applies new pause deadlines received at `now` (a new value replaces the running timer,
    /// as 802.1Qbb says: quanta 0 ends the pause).
    pub fn set_pause(&self, now: u64, deadlines: &[Option<u64>; PRIORITIES]) {
        for (p, d) in deadlines.iter().enumerate() {
            if let Some(until) = d {
                self.pfc_clocks[p].replace(now, *until);
            }
        }
    }

    /// Pauses priority `p` until `until` by SFC at `now`; a running longer pause is kept (max
    /// rule).
    pub fn sfc_pause(&self, now: u64, p: usize, until: u64) {
        self.sfc_clocks[p].extend(now, until);
    }

    /// Time each egress priority has spent paused by PAUSE/PFC up to `now`, ns.
    pub fn paused_ns(&self, now: u64) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.pfc_clocks[p].paused_ns(now))
    }

    /// Time each egress priority has spent paused by SFC up to `now`, ns.
    pub fn sfc_paused_ns(&self, now: u64) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.sfc_clocks[p].paused_ns(now))
    }

    /// Bitmask of priorities paused (by PAUSE/PFC or SFC) at `now`, and the earliest running
    /// deadline.
    #[inline]
    pub fn paused(&self, now: u64) -> (u8, Option<u64>) {
        let mut mask = 0u8;
        let mut next: Option<u64> = None;
        for p in 0..PRIORITIES {
            let u = self.pfc_clocks[p].until().max(self.sfc_clocks[p].until());
            if u > now {
                mask |= 1 << p;
                next = Some(next.map_or(u, |n| n.min(u)));
            }
        }
        (mask, next)
    }
}

/// One pause timer of one (egress port, priority), and the time it has held the priority.
///
/// The one owner of both facts: egress reads the deadline, status and metrics the paused time,
/// so no worker keeps a copy that could disagree (or be summed twice over workers). A pause
/// period runs from `since` to `until` while `until > since`; `total` holds the periods that
/// ended. A writer that ends a period (a new deadline at or before `now`, or one set after the
/// last expired) adds it to `total` before starting the next. Writers for one port are the
/// workers that receive its PAUSE/PFC/SFC frames: normally one (those frames carry no flow to
/// spread them over queues); two at the same instant could misplace a period's start by the
/// time between their two stores, never count it twice. A reader may see `since` and `until`
/// from either side of a write: the paused time it computes is off by at most that write's
/// period, never more.
#[derive(Debug, Default)]
struct PauseClock {
    until: AtomicU64,
    since: AtomicU64,
    total: AtomicU64,
}

impl PauseClock {
    fn until(&self) -> u64 {
        self.until.load(Relaxed)
    }

    /// The deadline becomes `until` (replace rule).
    fn replace(&self, now: u64, until: u64) {
        let prev = self.until.swap(until, Relaxed);
        self.begin_or_end(now, prev, until);
    }

    /// The deadline becomes the later of the running one and `until` (max rule).
    fn extend(&self, now: u64, until: u64) {
        let prev = self.until.fetch_max(until, Relaxed);
        self.begin_or_end(now, prev, prev.max(until));
    }

    /// Books the deadline going from `prev` to `next` at `now`.
    fn begin_or_end(&self, now: u64, prev: u64, next: u64) {
        let since = self.since.load(Relaxed);
        if prev > now {
            // Paused until now: the same period goes on, or ends now.
            if next <= now {
                self.total.fetch_add(now - since.min(now), Relaxed);
                self.since.store(now, Relaxed);
            }
        } else {
            // Not paused: the last period (if any) ended at `prev`; a new one starts now.
            if prev > since {
                self.total.fetch_add(prev - since, Relaxed);
            }
            self.since.store(now, Relaxed);
        }
    }

    /// Time paused up to `now`, ns.
    fn paused_ns(&self, now: u64) -> u64 {
        let (until, since) = (self.until(), self.since.load(Relaxed));
        let running = if until > since {
            until.min(now).saturating_sub(since)
        } else {
            0
        };
        self.total.load(Relaxed) + running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crossing is where the leader's congestion point would act: at XOFF while it holds no
    /// XOFF, at XON while it holds one; a pause of the stall guard's, which the leader does
    /// not end, is none.
    #[test]
    fn a_crossing_is_where_the_leader_would_send_pfc() {
        let s = SharedPort::default();
        let mut t = [None; PRIORITIES];
        t[3] = Some(PfcThresholds {
            xoff: 10_000,
            xon: 5_000,
        });
        assert!(!s.pfc_crossing(1 << 3), "no thresholds published yet");
        s.set_pfc_thresholds(&t);
        assert!(s.try_charge(3, 12_000, u64::MAX));
        assert!(s.pfc_crossing(1 << 3), "at XOFF, no XOFF held");
        assert!(!s.pfc_crossing(1 << 2), "another priority");
        s.set_leader_xoff(1 << 3);
        assert!(!s.pfc_crossing(1 << 3), "XOFF held, above XON");
        s.release(3, 8_000);
        assert!(s.pfc_crossing(1 << 3), "XOFF held, at XON");
        // The stall guard's pause alone: no XON is due from the leader.
        s.set_leader_xoff(0);
        let mut quanta = [0; PRIORITIES];
        quanta[3] = 1954;
        s.sent_pause(
            &MacControl::Pfc {
                enable: 1 << 3,
                quanta,
            },
            0,
            1_000_000_000,
        );
        assert!(!s.pfc_crossing(1 << 3));
        // Short of RX buffers, whatever the bytes: XOFF is due (the leader treats it as
        // congestion), and no XON while it lasts. Before, another worker's starved fill ring
        // rang no one, and the leader slept on for up to 10 ms while the kernel dropped.
        s.release(3, 4_000);
        s.set_fill_starved(true);
        assert!(s.pfc_crossing(1 << 3), "starved, no XOFF held");
        s.set_leader_xoff(1 << 3);
        assert!(!s.pfc_crossing(1 << 3), "starved, XOFF held, below XON");
        s.set_fill_starved(false);
        assert!(s.pfc_crossing(1 << 3), "no longer starved, below XON");
    }

    #[test]
    fn a_look_keeps_the_latest_arrivals_of_its_priorities() {
        let s = SharedPort::default();
        let mut a = [0u64; PRIORITIES];
        (a[3], a[5]) = (1_000, 7);
        s.looked(1 << 3, &a);
        assert_eq!(s.looked_arrived()[3], 1_000);
        assert_eq!(s.looked_arrived()[5], 0, "not a priority of the mask");
        // Two workers' looks in either order: the later arrivals stay.
        a[3] = 900;
        s.looked(1 << 3, &a);
        assert_eq!(s.looked_arrived()[3], 1_000);
    }

    #[test]
    fn a_charge_beyond_the_limit_is_refused_and_given_back() {
        let s = SharedPort::default();
        assert!(s.try_charge(3, 1000, 2500));
        assert!(s.try_charge(3, 1000, 2500));
        assert!(!s.try_charge(3, 1000, 2500), "3000 > 2500");
        assert_eq!(s.occupancy(3), 2000, "the refused charge was given back");
        assert!(s.try_charge(3, 500, 2500), "exactly the limit fits");
        s.release(3, 2500);
        assert_eq!(s.occupancy_all(), [0; PRIORITIES]);
    }

    /// Two threads charging one priority at once never take it past its limit together.
    #[test]
    fn concurrent_charges_never_pass_the_limit_together() {
        let s = std::sync::Arc::new(SharedPort::default());
        let taken: u64 = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let s = &s;
                    scope
                        .spawn(move || (0..10_000).filter(|_| s.try_charge(0, 100, 50_000)).count())
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap() as u64).sum()
        });
        assert_eq!(taken, 500, "exactly the limit's worth was admitted");
        assert_eq!(s.occupancy(0), 50_000);
    }

    #[test]
    fn paused_time_follows_replace_and_max_rules() {
        const MS: u64 = 1_000_000;
        let s = SharedPort::default();
        // PFC: paused at 0 for 10 ms, refreshed at 5 ms for 10 ms more, XON (quanta 0) at 8 ms.
        let d = |until| {
            let mut a = [None; PRIORITIES];
            a[3] = Some(until);
            a
        };
        s.set_pause(0, &d(10 * MS));
        assert_eq!(s.paused(4 * MS).0, 1 << 3);
        assert_eq!(s.paused_ns(4 * MS)[3], 4 * MS);
        s.set_pause(5 * MS, &d(15 * MS));
        s.set_pause(8 * MS, &d(8 * MS));
        assert_eq!(s.paused(9 * MS).0, 0);
        assert_eq!(s.paused_ns(20 * MS)[3], 8 * MS);
        // A pause that runs out, then another after a gap: both periods, not the gap.
        s.set_pause(30 * MS, &d(32 * MS));
        s.set_pause(40 * MS, &d(41 * MS));
        assert_eq!(s.paused_ns(50 * MS)[3], 11 * MS);
        assert_eq!(s.paused_ns(50 * MS)[2], 0);
        // SFC: a shorter pause does not cut a running longer one.
        s.sfc_pause(0, 3, 10 * MS);
        s.sfc_pause(2 * MS, 3, 4 * MS);
        assert_eq!(s.paused(6 * MS).0, 1 << 3);
        assert_eq!(s.sfc_paused_ns(20 * MS)[3], 10 * MS);
        s.sfc_pause(20 * MS, 3, 25 * MS);
        assert_eq!(s.sfc_paused_ns(22 * MS)[3], 12 * MS);
        assert_eq!(s.sfc_paused_ns(30 * MS)[3], 15 * MS);
    }
}
