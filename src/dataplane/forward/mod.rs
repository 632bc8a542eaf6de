//! The forwarding worker of wire mode: what enters port A leaves port B and back, through
//! per-priority egress queues, buffer accounting per (ingress port, priority), the PFC
//! congestion point, the PFC reaction point and a shaper at each port's line rate.

use std::{
    os::fd::AsRawFd,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use super::{
    af_xdp::fill_target,
    agent::{PortAgent, Taken},
    classify::Trust,
    clock::now_ns,
    fill_sizer::FillSizer,
    handoff::HandoffEnd,
    idle::Idler,
    ingress::FillWatch,
    leader_bell::{LeaderBell, LEADER_WATCH_NS},
    pfc_headroom::PortHeadroom,
    pool::{Frame, FramePool, XSK_MAX_FRAME},
    port::{FillDepth, Port, PortError, RxFrame},
    queue::{PrioQueues, Ring},
    sched::WorkerRealtime,
    settings::SettingsCell,
    sfc_roster::RosterWriter,
    shaper::LineRate,
    shared::SharedPort,
    stats::{DropReason, WorkerStats},
};
use crate::fc::{
    adaptive::HeadroomSettings,
    credit_port::{CreditPort, CreditTimers},
    plan::{pfc_mask, PrioPlan, SfcSettings},
    sfc::{SfcCongestionPoint, SfcCpConfig},
    sfc_guard::SfcGuard,
    watchdog::{PfcWatchdog, WatchdogConfig},
    PfcGenerator, PRIORITIES,
};

mod control;
mod receive;
mod reload;
mod transmit;

/// Frames handled per RX or TX batch.
pub const BATCH: usize = 64;
/// How often gauges (queue depth, paused time) are published for readers: often enough for
/// any scrape, rare enough to cost nothing per frame.
const GAUGE_PERIOD_NS: u64 = 1_000_000;

/// How often a worker holding frames for a port without carrier looks whether it is back.
const LINK_DOWN_RECHECK_NS: u64 = 1_000_000;

/// Control frames (PFC, SFCM) that may wait for TX per port.
const CTRL_QUEUE: usize = 256;

/// SFC congestion points for the SFC priorities of an egress port, assuming until they have
/// measured their queue's drain rate that it is `speed_bps` times this worker's share: what
/// each worker gets of the shared line while all are busy.
fn sfc_congestion_points(
    prios: &[PrioPlan; PRIORITIES],
    sfc: &SfcSettings,
    speed_bps: u64,
    share: f64,
) -> [Option<SfcCongestionPoint>; PRIORITIES] {
    std::array::from_fn(|p| {
        prios[p].sfc.map(|f| {
            let rate = ((speed_bps as f64) * share) as u64;
            let cfg = SfcCpConfig {
                scope: sfc.scope,
                reserve_percent: sfc.reserve_percent,
                max_pause_ns: sfc.max_pause_ns,
                filter: sfc.filter,
                ..SfcCpConfig::new(p as u8, f.threshold, rate)
            };
            SfcCongestionPoint::new(cfg)
                .expect("validated SFC settings make a valid congestion point")
        })
    })
}

/// What admitting a frame needs of its (ingress port, priority) plan, kept per worker so
/// that no [`PrioPlan`] is looked up and copied per frame ([`LiveSettings::plan_for`] builds
/// one by value).
#[derive(Debug, Clone, Copy)]
struct Admission {
    /// Occupancy in bytes above which an arriving frame is dropped.
    limit: u64,
    /// The priority is lossless: an overflow is a headroom overflow, not a tail drop, and
    /// the pool's lossy reserve does not apply.
    lossless: bool,
}

/// Admission of every priority of one ingress port, `plan(prio)` giving the plan in force.
fn admission_row(plan: impl Fn(usize) -> PrioPlan) -> [Admission; PRIORITIES] {
    std::array::from_fn(|prio| {
        let plan = plan(prio);
        Admission {
            limit: plan.admit_limit(),
            lossless: plan.lossless(),
        }
    })
}

/// Longest a stopping worker keeps forwarding to empty its queues; what is left after it is
/// counted as `shutdown` drops.
const STOP_DRAIN_NS: u64 = 1_000_000_000;
/// A stopping worker keeps receiving at least this long after its XOFF, for the frames that
/// were already on their way.
const STOP_GRACE_NS: u64 = 20_000_000;

/// With lossless priorities configured, lossy frames may use the frame pool only down to
/// 1/this of it: the rest is kept for the lossless priorities (their own thresholds bound
/// them) and for control frames.
const LOSSY_RESERVE_DIVISOR: usize = 4;

/// Lossless frames beyond their buffers may use the frame pool down to 1/this of it (half the
/// lossy reserve): what is left refills the fill rings and carries the XOFFs and SFCMs that
/// such a backlog calls for, each of which takes a frame of the pool.
const BORROW_FLOOR_DIVISOR: usize = 8;

/// How often the kernel's socket drop statistics are read, ns (a syscall per port): by time,
/// not by loop turns, whose length goes from microseconds to the idler's 10 ms (16,384 idle
/// turns left a burst's drops unseen for nearly three minutes).
const KERNEL_STATS_PERIOD_NS: u64 = 100_000_000;

/// With lossless priorities configured, the XDP program drops lossy frames once the RX
/// backlog reaches 1/this of a lean fill ring (the shallowest the ring of such a port gets,
/// [`FillSizer`]), so a lossy flood never gets near the point where the fill ring is short of
/// buffers (half of it, see [`FillWatch`]).
const LOSSY_BACKLOG_DIVISOR: u64 = 4;

/// The XDP program's ingress policy for a port classifying by `trust` and taking frames of
/// at most `max_frame` bytes, with priorities `prios`, whose sockets' fill rings are drawn
/// from pools of `pool_frames` frames ([`fill_depth`]).
pub fn ingress_policy(
    trust: Trust,
    max_frame: u32,
    prios: &[PrioPlan; PRIORITIES],
    pool_frames: u32,
) -> crate::dataplane::xdp_prog::IngressPolicy {
    let depth = fill_depth(prios);
    crate::dataplane::xdp_prog::IngressPolicy {
        trust,
        lossy_mask: (0..PRIORITIES)
            .filter(|&p| !prios[p].lossless())
            .fold(0, |m, p| m | (1 << p)),
        lossy_backlog_frames: match depth {
            FillDepth::Deep => {
                // The program counts frames; a jumbo port's may take several buffers each.
                let buffers_a_frame = (max_frame as usize).div_ceil(XSK_MAX_FRAME).max(1) as u64;
                let lean = fill_target(pool_frames, FillDepth::Lean) as u64;
                (lean / LOSSY_BACKLOG_DIVISOR / buffers_a_frame) as u32
            }
            // No lossless priority needs the buffers kept from a lossy flood.
            FillDepth::Lean => 0,
        },
        max_frame,
        // Nothing reads a lean wire's ingress counters (no XOFF, no SFC, no stall guard).
        sampled: depth == FillDepth::Lean,
    }
}

/// How deep the sockets of a wire with priorities `prios` keep their fill rings: deep where a
/// lossless priority is configured (the buffers are its headroom), lean where none is.
pub fn fill_depth(prios: &[PrioPlan; PRIORITIES]) -> FillDepth {
    if prios.iter().any(PrioPlan::lossless) {
        FillDepth::Deep
    } else {
        FillDepth::Lean
    }
}

/// What one port of the wire needs besides its socket.
#[derive(Debug, Clone)]
pub struct PortSetup {
    /// Line rate (shaper and pause quanta).
    pub speed_bps: u64,
    /// Classification of frames received on this port.
    pub trust: Trust,
    /// Pause time of each XOFF, quanta.
    pub pause_quanta: u16,
    /// Run credit lanes on this port for the credit priorities.
    pub credit: bool,
    /// Longest frame (bytes, without FCS) this port takes; longer ones are `oversize` drops.
    pub max_frame: u32,
}

/// Settings of one forwarding worker.
#[derive(Debug, Clone)]
pub struct ForwardSetup {
    /// The two ports, in the order of the ports handed to [`ForwardWorker::new`].
    pub ports: Vec<PortSetup>,
    /// Per-priority buffer policy.
    pub prios: [PrioPlan; PRIORITIES],
    /// This worker generates PFC frames and reports watchdog storms (exactly one worker does).
    pub pfc_generator: bool,
    /// PFC watchdog, if enabled.
    pub watchdog: Option<WatchdogConfig>,
    /// SFC transport and corrections.
    pub sfc: SfcSettings,
    /// Share of each port's line rate this worker's queues are taken to drain at (1/workers)
    /// by its SFC congestion points until they have measured it. (The line itself is shared:
    /// a worker alone on it sends at the whole speed.)
    pub rate_share: f64,
    /// Spin instead of sleeping when idle.
    pub busy_poll: bool,
    /// Where reloaded settings are published (SIGHUP), if anywhere.
    pub live: Option<Arc<SettingsCell>>,
    /// Timers of the credit lanes.
    pub credit: CreditTimers,
    /// How the PFC headroom adapts to the overshoot seen.
    pub headroom: HeadroomSettings,
}

/// One worker of wire mode.
pub struct ForwardWorker {
    pool: FramePool,
    /// The ports, in `setup.ports` order.
    ports: Vec<PortState>,
    stats: Arc<WorkerStats>,
    setup: ForwardSetup,
    /// When the gauges are next published.
    gauges_due: u64,
    /// When the kernel's drop statistics are next read.
    kernel_stats_due: u64,
    /// Generation of the live settings last applied.
    settings_seen: u64,
    /// Free frames the pool keeps for lossless priorities and control: below it, lossy frames
    /// are tail-dropped, so a lossy flood cannot starve the RX fill ring of lossless traffic.
    lossy_reserve: usize,
    /// Free frames the pool keeps from lossless frames beyond their buffers (`[headroom]
    /// borrow`): at or below it such a frame is dropped as `headroom_overflow`.
    borrow_floor: usize,
    rx: Vec<RxFrame>,
    tx: Vec<Frame>,
    /// The priority of each data frame in `tx`: what the port does not take is taken off
    /// that priority's TX counts.
    tx_prios: [u8; BATCH],
    /// Where link-local control frames for the link agents go between workers, with several
    /// and link-up on ([`ForwardWorker::with_handoff`]).
    handoff: Option<HandoffEnd>,
    /// The leader's doorbell, with several workers ([`ForwardWorker::with_leader_bell`]).
    leader_bell: Option<Arc<LeaderBell>>,
    /// Leader: frames of a PFC priority arrived at a port (on any worker's queue) since its
    /// previous turn, so it watches by the clock ([`LEADER_WATCH_NS`]).
    pfc_flowing: bool,
    /// What this worker's scheduling follows, where real-time scheduling is permitted
    /// ([`ForwardWorker::with_realtime`]).
    realtime: Option<WorkerRealtime>,
    /// This worker's thread runs `SCHED_FIFO` (under the duty cycle).
    fifo: bool,
}

/// What a worker keeps for one port: its socket, the state it shares with the other workers,
/// and the port's part in each flow-control role: as ingress (admission, PFC and credit
/// receive side, SFC guard), as egress (queues, shaper, pause timers, SFC congestion and
/// reaction points, credit transmit side) and on its link (control frames, link agent).
struct PortState {
    io: Box<dyn Port>,
    shared: Arc<SharedPort>,
    /// Data queued to leave through this port, per priority.
    egress: PrioQueues,
    /// The port's line rate, on the line every worker of the port shares
    /// ([`SharedPort::line`]): a worker alone on it gets the whole speed.
    rate: LineRate,
    /// PFC this port sends for its ingress occupancy.
    generator: PfcGenerator,
    /// When the watchdog is enabled.
    watchdog: Option<PfcWatchdog>,
    /// LLDP and peer delay, on the leader worker when link-up is enabled
    /// ([`ForwardWorker::with_agents`]).
    agent: Option<Box<dyn PortAgent>>,
    /// Admission per priority, from the settings in force (measured thresholds included).
    admission: [Admission; PRIORITIES],
    /// Control frames (PFC, SFCM, credit) waiting for TX; sent ahead of data.
    ctrl: Ring,
    /// SFC congestion point per priority of this egress (SFC priorities only).
    sfc_cps: [Option<SfcCongestionPoint>; PRIORITIES],
    /// Whose SFC messages the reaction point obeys.
    sfc_guard: SfcGuard,
    /// The sources of this (ingress) port's SFC-only priorities this worker published for the
    /// stall guard.
    sfc_roster: RosterWriter,
    /// Credit lanes: the receive side accounts frames that arrived on the port, the transmit
    /// side gates what the port sends.
    credit: CreditPort,
    /// This worker's share of the port's RX backlog as last published in [`SharedPort`].
    rx_backlog: [u64; PRIORITIES],
    /// Bytes arrived per priority on this worker's queue, as last published.
    arrived: [u64; PRIORITIES],
    /// Where the port does not count arrivals ([`Port::counts_arrivals`]: AF_PACKET), the
    /// data bytes this worker took per priority, which stand in for them: the overshoot
    /// meters and the adaptive headroom then see the bytes that came after an XOFF as the
    /// worker took them (including any that arrived before it and waited, so never less).
    /// Before, they saw nothing there, and the headroom stayed at its floor whatever came.
    taken: Option<[u64; PRIORITIES]>,
    /// Headroom in force per PFC priority (the leader's; `None` on other workers).
    headroom: Option<PortHeadroom>,
    /// Whether this worker's fill ring is short of buffers (published in [`SharedPort`]).
    fill_watch: FillWatch,
    /// How deep the fill ring is kept while a priority is lossless.
    fill_sizer: FillSizer,
    /// The port's count of `oversize` drops before the socket (XDP), as last added to the
    /// stats.
    oversize_seen: [u64; PRIORITIES],
    /// The port's count of frames the kernel refused to send, as last seen.
    tx_refused_seen: u64,
    /// The port's egress was held at the last transmit ([`Port::hold_tx`]).
    tx_held: bool,
    /// VLs the peer runs credits on and this port does not, as logged (bit v: VL v).
    credit_unmatched: u16,
    /// Leader: the port's arrivals of PFC priorities (every worker's queues), summed, as it
    /// last read them.
    pfc_arrived_seen: u64,
    /// Leader: the XOFF/XON in force as last published to the other workers.
    published: [Option<crate::fc::PfcThresholds>; PRIORITIES],
}

/// Port `p` and the other one of a worker's two, both borrowed mutably at once: a data frame's
/// ingress and egress, or its egress and ingress.
fn this_and_other(ports: &mut [PortState], p: usize) -> (&mut PortState, &mut PortState) {
    let [a, b] = ports else {
        unreachable!("a forwarding worker has two ports")
    };
    if p == 0 {
        (a, b)
    } else {
        (b, a)
    }
}

/// Why a worker stopped early.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// A port failed.
    #[error(transparent)]
    Port(#[from] PortError),
}

impl ForwardWorker {
    /// A worker over `ports` (two, in `setup.ports` order) sharing `pool`, starting at `now`.
    pub fn new(
        pool: FramePool,
        ports: Vec<Box<dyn Port>>,
        shared: Vec<Arc<SharedPort>>,
        stats: Arc<WorkerStats>,
        setup: ForwardSetup,
        now: u64,
    ) -> Self {
        let cap = pool.capacity() as usize;
        let ports = ports
            .into_iter()
            .zip(shared)
            .zip(&setup.ports)
            .map(|((mut io, shared), port)| {
                // Arrivals are shared as the XDP program counts them, from before this worker
                // too: summed over the workers they are the program's totals as last accounted,
                // which the stall guard compares with the live ones.
                let arrived = io.rx_backlog().arrived;
                shared.add_arrived(&[0; PRIORITIES], &arrived);
                let headroom = setup.pfc_generator.then(|| {
                    PortHeadroom::new(
                        setup.headroom,
                        u64::from(port.max_frame),
                        &setup.prios,
                        None,
                        now,
                    )
                });
                let thresholds = headroom.as_ref().map_or_else(
                    || std::array::from_fn(|p| setup.prios[p].thresholds()),
                    PortHeadroom::thresholds,
                );
                let lanes = (0..PRIORITIES)
                    .filter(|&p| port.credit && setup.prios[p].credit)
                    .map(|p| (p as u8, setup.prios[p].limit));
                PortState {
                    egress: PrioQueues::new(cap),
                    rate: LineRate::paced(port.speed_bps),
                    generator: PfcGenerator::new(thresholds, port.pause_quanta, port.speed_bps),
                    watchdog: setup.watchdog.map(PfcWatchdog::new),
                    agent: None,
                    // Nothing measured yet: every port has the configured plans.
                    admission: admission_row(|prio| setup.prios[prio]),
                    ctrl: Ring::new(CTRL_QUEUE),
                    sfc_cps: sfc_congestion_points(
                        &setup.prios,
                        &setup.sfc,
                        port.speed_bps,
                        setup.rate_share,
                    ),
                    sfc_guard: SfcGuard::new(setup.sfc.sources),
                    sfc_roster: RosterWriter::default(),
                    credit: CreditPort::new(lanes, &setup.credit, now)
                        .expect("validated credit settings make valid lanes"),
                    rx_backlog: [0; PRIORITIES],
                    arrived,
                    taken: (!io.counts_arrivals()).then_some([0; PRIORITIES]),
                    headroom,
                    fill_watch: FillWatch::default(),
                    fill_sizer: FillSizer::new(
                        fill_target(cap as u32, FillDepth::Lean) as u64,
                        io.rx_chunk(),
                    ),
                    oversize_seen: [0; PRIORITIES],
                    tx_refused_seen: 0,
                    tx_held: false,
                    credit_unmatched: 0,
                    pfc_arrived_seen: 0,
                    published: [None; PRIORITIES],
                    io,
                    shared,
                }
            })
            .collect();
        let mut worker = ForwardWorker {
            // Set with the fill depth below, from the same priorities.
            lossy_reserve: 0,
            borrow_floor: 0,
            gauges_due: now,
            kernel_stats_due: now,
            settings_seen: setup.live.as_ref().map_or(0, |l| l.generation()),
            rx: Vec::with_capacity(BATCH),
            tx: Vec::with_capacity(BATCH),
            tx_prios: [0; BATCH],
            handoff: None,
            leader_bell: None,
            pfc_flowing: false,
            realtime: None,
            fifo: false,
            pool,
            ports,
            stats,
            setup,
        };
        for (p, port) in worker.ports.iter().enumerate() {
            let zero_copy = port.io.zero_copy();
            worker.stats.ports[p]
                .zero_copy_sockets
                .set(u64::from(zero_copy));
            if zero_copy {
                port.shared.set_tx_blind();
            }
        }
        worker.keep_lossless_buffers();
        worker
    }

    /// Keeps what the pool holds back for lossless priorities as the priorities in force ask:
    /// every port's receive buffers as deep ([`fill_depth`]; with a lossless priority as its
    /// [`FillSizer`] finds, published), the frames lossy priorities may not take, and those
    /// lossless frames beyond their buffers may not. A socket opens deep: a lean one lets the
    /// ring drain to it.
    fn keep_lossless_buffers(&mut self) {
        let depth = fill_depth(&self.setup.prios);
        self.lossy_reserve = match depth {
            FillDepth::Deep => self.pool.capacity() as usize / LOSSY_RESERVE_DIVISOR,
            FillDepth::Lean => 0,
        };
        self.borrow_floor = self.pool.capacity() as usize / BORROW_FLOOR_DIVISOR;
        for p in 0..self.ports.len() {
            self.set_fill_depth(p, depth);
        }
    }

    /// Port `p`'s fill ring at `depth`, or at what its [`FillSizer`] finds where `depth` is
    /// deep (a lossless priority), published.
    fn set_fill_depth(&mut self, p: usize, depth: FillDepth) {
        let port = &mut self.ports[p];
        let depth = match depth {
            FillDepth::Deep => port.fill_sizer.depth(),
            FillDepth::Lean => FillDepth::Lean,
        };
        let buffers = port.io.set_fill_depth(depth);
        self.stats.ports[p].fill_target.set(buffers);
    }

    /// Once per gauge period: lets port `p`'s [`FillSizer`] look at what the port's PFC
    /// priorities may hold and the data frames the worker took of each, and applies a new
    /// depth.
    pub(super) fn size_fill_ring(&mut self, p: usize, now: u64) {
        let depth = fill_depth(&self.setup.prios);
        if depth == FillDepth::Lean {
            return;
        }
        // Only where PFC pauses every lossless priority (the stall guard's XOFF is PFC).
        let pfc_covers = self
            .setup
            .prios
            .iter()
            .all(|prio| !prio.lossless() || prio.pfc.is_some());
        let port = &mut self.ports[p];
        let guarded = port
            .headroom
            .as_ref()
            .and_then(PortHeadroom::guarded_buffer)
            .filter(|_| pfc_covers);
        let c = &self.stats.ports[p];
        let taken =
            std::array::from_fn(|prio| (c.rx_data_frames[prio].get(), c.rx_data_bytes[prio].get()));
        let starved = port.fill_watch.starved();
        let sizer = &mut port.fill_sizer;
        if sizer
            .update(now, &taken, guarded.as_ref(), starved)
            .is_some()
        {
            self.set_fill_depth(p, depth);
        }
    }

    /// Gives port `p` the agent `agents[p]` (link-up's LLDP and peer delay, built by the
    /// control plane). Only the leader worker (`pfc_generator`) runs agents: it receives every
    /// port's control frames.
    pub fn with_agents(mut self, agents: Vec<Option<Box<dyn PortAgent>>>) -> Self {
        debug_assert!(self.setup.pfc_generator || agents.iter().all(Option::is_none));
        for (port, agent) in self.ports.iter_mut().zip(agents) {
            port.agent = agent;
        }
        self
    }

    /// Gives the worker its end of the hand-over of link-local control frames
    /// ([`crate::dataplane::handoff`]): a worker other than the leader posts the LLDP and
    /// peer-delay frames it receives to the leader, which runs every port's agent.
    pub fn with_handoff(mut self, end: Option<HandoffEnd>) -> Self {
        self.handoff = end;
        self
    }

    /// Gives the worker the leader's doorbell ([`crate::dataplane::leader_bell`]), shared by
    /// every worker of a daemon with more than one: the leader sleeps on it, the others ring
    /// it when frames of a PFC priority reach their queues while the leader sleeps long.
    pub fn with_leader_bell(mut self, bell: Option<Arc<LeaderBell>>) -> Self {
        self.leader_bell = bell;
        self
    }

    /// Has the worker's thread enter or leave `SCHED_FIFO` when a reload makes the first
    /// priority lossless or the last one lossy, as `realtime` asks ([`WorkerRealtime`]);
    /// `fifo`: whether it runs `SCHED_FIFO` now.
    pub fn with_realtime(mut self, realtime: Option<WorkerRealtime>, fifo: bool) -> Self {
        self.realtime = realtime;
        self.fifo = fifo;
        self
    }

    /// The frames the other workers handed over, to the agents of their ports (leader only).
    fn take_handed_over(&mut self, now: u64) {
        let Some(HandoffEnd::FromOthers(mailboxes)) = &mut self.handoff else {
            return;
        };
        for m in mailboxes.iter_mut().filter(|m| !m.is_empty()) {
            m.take(|p, kind, data, rx_ns| {
                let Some(agent) = self.ports.get_mut(p).and_then(|s| s.agent.as_mut()) else {
                    return self.stats.ports[p].drop(DropReason::LinkLocal);
                };
                match agent.on_frame(kind, data, rx_ns, now) {
                    Taken::Consumed => {}
                    Taken::Malformed => self.stats.ports[p].drop(DropReason::Malformed),
                    // Link-local, so not forwarded (the worker that took it handed over only
                    // frames to the bridge group addresses).
                    Taken::NotMine => self.stats.ports[p].drop(DropReason::LinkLocal),
                }
            });
        }
    }

    /// Runs until `stop` is set; then pauses its PFC sources, forwards what it holds (see
    /// `ForwardWorker::drain`) and releases the rest, counted; also when a port fails, which
    /// ends the run at once with what it held counted as `shutdown` drops.
    pub fn run(mut self, stop: &AtomicBool) -> Result<(), WorkerError> {
        // The leader also wakes for its doorbell (after the ports: `Idler::hold` counts them).
        let bell = self
            .leader_bell
            .as_ref()
            .filter(|_| self.setup.pfc_generator)
            .map(|b| b.as_raw_fd());
        let mut idler = Idler::new(
            self.ports.iter().map(|p| p.io.poll_fd()).chain([bell]),
            self.setup.busy_poll,
        );
        if self.setup.pfc_generator {
            // Resume whatever a previous instance paused upstream when it stopped.
            for p in 0..self.ports.len() {
                if let Some(m) = self.ports[p].generator.resume_all() {
                    self.send_pfc(p, &m, now_ns());
                }
            }
        }
        let outcome = self
            .forward(stop, &mut idler)
            .and_then(|()| self.drain(&mut idler));
        self.give_up_tx();
        self.read_kernel_drops();
        self.shutdown();
        self.publish_gauges(now_ns());
        outcome
    }

    /// Forwards until `stop` is set, or a port fails.
    fn forward(&mut self, stop: &AtomicBool, idler: &mut Idler) -> Result<(), WorkerError> {
        while !stop.load(Ordering::Relaxed) {
            let now = now_ns();
            if self.step(now)? == 0 {
                let deadline = self.next_deadline(now);
                self.hold_idler(idler);
                // The leader's sleep is cut short by a crossing another worker sees.
                let bell = self
                    .leader_bell
                    .as_ref()
                    .filter(|_| self.setup.pfc_generator);
                // Said, then looked once more: a crossing made since its congestion point ran
                // either rings or is seen here ([`crate::dataplane::leader_bell`]).
                let crossing = bell.is_some_and(|b| {
                    b.sleeping();
                    self.a_crossing_stands()
                });
                if !crossing {
                    idler.wait(now, deadline);
                }
                if let Some(b) = bell {
                    b.woke();
                }
            }
        }
        Ok(())
    }

    /// Stopping without losing what was accepted: the leader pauses every PFC priority
    /// upstream (and keeps the pause refreshed), then the worker goes on receiving and
    /// forwarding until it holds nothing ([`ForwardWorker::settled`]), at least
    /// [`STOP_GRACE_NS`] so frames already on their way arrive, at most [`STOP_DRAIN_NS`].
    fn drain(&mut self, idler: &mut Idler) -> Result<(), WorkerError> {
        let start = now_ns();
        if self.setup.pfc_generator {
            for p in 0..self.ports.len() {
                if let Some(m) = self.ports[p].generator.hold(start) {
                    self.send_pfc(p, &m, start);
                }
            }
        }
        loop {
            let now = now_ns();
            if (now >= start + STOP_GRACE_NS && self.settled()) || now >= start + STOP_DRAIN_NS {
                return Ok(());
            }
            if self.step(now)? == 0 {
                let deadline = self.next_deadline(now).unwrap_or(u64::MAX);
                self.hold_idler(idler);
                idler.wait(now, Some(deadline.min(now + 1_000_000)));
            }
        }
    }

    /// Whether a stopping worker holds nothing more it could deliver: its queues are empty,
    /// its ports have sent what they took (a copy-mode AF_XDP kick sends a few dozen frames;
    /// the rest would go with the socket, uncounted), and nothing of a PFC priority waits in
    /// an RX ring (its sources are paused, so what waits there is the last of it). A held
    /// egress cannot send until its carrier is back: what its port took is not waited for.
    fn settled(&self) -> bool {
        let pfc = pfc_mask(&self.setup.prios);
        self.ports.iter().all(|s| {
            s.egress.is_empty()
                && s.ctrl.is_empty()
                && (s.tx_held || s.io.tx_in_flight() == 0)
                && (0..PRIORITIES).all(|p| pfc & (1 << p) == 0 || s.rx_backlog[p] == 0)
        })
    }

    /// What the ports took and could not send by the end of the drain (an egress held, with no
    /// carrier) goes with their sockets, each frame counted ([`Port::give_up_tx`]).
    fn give_up_tx(&mut self) {
        for s in &mut self.ports {
            s.io.give_up_tx(&mut self.pool);
        }
    }

    /// The idler leaves alone the sockets of ports whose egress is held ([`Idler::hold`]).
    fn hold_idler(&self, idler: &mut Idler) {
        for (i, p) in self.ports.iter().enumerate() {
            idler.hold(i, p.tx_held);
        }
    }

    fn read_kernel_drops(&self) {
        for (p, port) in self.ports.iter().enumerate() {
            self.stats.ports[p].set_kernel_drops(&port.io.kernel_drops());
        }
    }

    /// One loop turn at time `now`: receive a batch on every port, run the congestion point,
    /// transmit a batch on every port. Returns the frames handled (0 = idle).
    pub fn step(&mut self, now: u64) -> Result<usize, WorkerError> {
        self.stats.heartbeat.add(1);
        if let Some(live) = &self.setup.live {
            if live.generation() != self.settings_seen {
                self.settings_seen = live.generation();
                let s = live.get();
                self.apply(&s);
            }
        }
        let mut work = 0;
        for p in 0..self.ports.len() {
            work += self.receive(p, now)?;
        }
        if self.setup.pfc_generator {
            self.pfc_flowing = false;
            for p in 0..self.ports.len() {
                self.generate_pfc(p, now);
            }
        }
        for e in 0..self.ports.len() {
            work += self.transmit(e, now)?;
            self.send_credit(e, now);
            self.hold_if_refused(e);
        }
        self.wake_the_leader_at_a_crossing();
        self.take_handed_over(now);
        self.run_link_agents(now);
        if now >= self.gauges_due {
            self.publish_gauges(now);
            self.gauges_due = now + GAUGE_PERIOD_NS;
        }
        if now >= self.kernel_stats_due {
            self.read_kernel_drops();
            self.kernel_stats_due = now.saturating_add(KERNEL_STATS_PERIOD_NS);
        }
        Ok(work)
    }

    /// A worker other than the leader: rings the leader if it sleeps while a PFC priority of
    /// a port stands where it would send PFC ([`crate::dataplane::leader_bell`]), and says of
    /// each port it found none on what had arrived when it looked ([`SharedPort::looked`]).
    #[inline]
    fn wake_the_leader_at_a_crossing(&self) {
        let Some(bell) = self
            .leader_bell
            .as_ref()
            .filter(|_| !self.setup.pfc_generator)
        else {
            return;
        };
        if !bell.leader_asleep() {
            return;
        }
        let mask = pfc_mask(&self.setup.prios);
        for port in &self.ports {
            // Read before the look: a crossing those bytes made is in what it reads.
            let arrived = port.shared.arrived_all();
            if crossing_due(&port.shared, mask) {
                bell.ring();
                return;
            }
            port.shared.looked(mask, &arrived);
        }
    }

    /// Whether a PFC priority of a port stands where the leader's congestion point would send
    /// PFC ([`crossing_due`]).
    fn a_crossing_stands(&self) -> bool {
        let mask = pfc_mask(&self.setup.prios);
        self.ports.iter().any(|p| crossing_due(&p.shared, mask))
    }

    /// The earliest time something can happen without a frame arriving.
    pub fn next_deadline(&self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        for e in 0..self.ports.len() {
            if self.ports[e].shared.egress_held() {
                // Held for a dead link: look again soon (the carrier watch wakes no worker),
                // also with nothing queued: the port may hold frames it took.
                consider(now + LINK_DOWN_RECHECK_NS);
                continue;
            }
            if !self.ports[e].ctrl.is_empty() {
                consider(now);
            }
            let (received_pause, resume) = self.ports[e].shared.paused(now);
            if self.ports[e].egress.is_empty() {
                // The watchdog judges a pause continuous from its ticks: while it watches
                // one, it must see it end, or pauses with gaps between them add up to a storm.
                let watching = self.ports[e]
                    .watchdog
                    .as_ref()
                    .is_some_and(|w| w.next_deadline().is_some());
                if let Some(r) = resume.filter(|_| watching) {
                    consider(r);
                }
                continue;
            }
            let overridden = self.ports[e]
                .watchdog
                .as_ref()
                .map_or(0, PfcWatchdog::overridden);
            let waiting = self.ports[e]
                .credit
                .waiting(self.ports[e].egress.queued(), |p| {
                    self.ports[e].egress.front(p).map(|q| q.frame.len())
                });
            if self.ports[e]
                .egress
                .select((received_pause & !overridden) | waiting)
                .is_some()
            {
                let port = &self.ports[e];
                consider(port.shared.line().wake_at(&port.rate, now));
            } else if let Some(r) = resume {
                consider(r);
            }
        }
        if self.pfc_flowing && self.leader_bell.is_some() {
            // PFC frames arrive, maybe on another worker's queue: look again soon.
            consider(now + LEADER_WATCH_NS);
        }
        if let Some(HandoffEnd::FromOthers(mailboxes)) = &self.handoff {
            if mailboxes.iter().any(|m| !m.is_empty()) {
                consider(now);
            }
        }
        for port in &self.ports {
            let timers = [
                port.watchdog.as_ref().and_then(PfcWatchdog::next_deadline),
                port.agent.as_ref().map(|a| a.next_deadline()),
                port.credit.next_deadline(),
                self.setup
                    .pfc_generator
                    .then(|| port.generator.next_deadline())
                    .flatten(),
            ];
            timers.into_iter().flatten().for_each(&mut consider);
        }
        next
    }

    fn shutdown(&mut self) {
        // This worker's share of what waits at ingress goes with it.
        for p in 0..self.ports.len() {
            self.ports[p]
                .shared
                .update_rx_backlog(&self.ports[p].rx_backlog, &[0; PRIORITIES]);
            self.ports[p].rx_backlog = [0; PRIORITIES];
            if std::mem::take(&mut self.ports[p].fill_watch).starved() {
                self.ports[p].shared.set_fill_starved(false);
            }
        }
        // Control frames still waiting (a held egress: no carrier at the stop) are counted on
        // the port they were to leave by: the daemon's own PFC and SFC messages, and SFC
        // messages in transit to another host.
        for (port, c) in self.ports.iter_mut().zip(&self.stats.ports) {
            while let Some(q) = port.ctrl.pop() {
                c.drop(DropReason::Shutdown);
                self.pool.release(q.frame);
            }
        }
        for e in 0..self.ports.len() {
            for prio in 0..PRIORITIES {
                while let Some(q) = self.ports[e].egress.pop(prio) {
                    self.release_queued(prio, &q);
                    let ingress = usize::from(q.ingress);
                    self.discard_data(ingress, q.frame, DropReason::Shutdown, prio);
                }
            }
        }
    }
}

/// Whether a PFC priority of `mask` on `port` stands where the leader's congestion point
/// would send PFC ([`SharedPort::pfc_crossing`]). Not on a port whose egress is held: nothing
/// is sent there until its carrier is back, and its crossing would wake the leader for nothing.
#[inline]
fn crossing_due(port: &SharedPort, mask: u8) -> bool {
    !port.egress_held() && port.pfc_crossing(mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        dataplane::{
            mem_port::{mem_link, MemPeer},
            stats::Counter,
        },
        fc::{
            credit_port::{emit_update, Gate},
            PauseTimers,
        },
        wire::{
            EtherType, EthernetFrame, EthernetRepr, MacAddr, MacControl, SfcScope, Sfcm, SfcmFrame,
            TestFrame, TestFrameView,
        },
    };

    const GBIT: u64 = 1_000_000_000;

    fn worker(prio3: PrioPlan) -> (ForwardWorker, MemPeer, MemPeer, Arc<WorkerStats>) {
        let (p0, peer0) = mem_link("m0", MacAddr([2, 0, 0, 0, 0, 10]), 64);
        let (p1, peer1) = mem_link("m1", MacAddr([2, 0, 0, 0, 0, 11]), 64);
        let mut prios = [PrioPlan::lossy(64 * 1024); PRIORITIES];
        prios[3] = prio3;
        let port = |speed_bps| PortSetup {
            speed_bps,
            trust: Trust::Pcp,
            pause_quanta: 65535,
            credit: true,
            max_frame: 1518,
        };
        let stats = Arc::new(WorkerStats::new(2));
        let w = ForwardWorker::new(
            FramePool::heap(4096).unwrap(),
            vec![Box::new(p0), Box::new(p1)],
            vec![Arc::default(), Arc::default()],
            stats.clone(),
            ForwardSetup {
                ports: vec![port(10 * GBIT), port(GBIT)],
                prios,
                pfc_generator: true,
                watchdog: None,
                sfc: SfcSettings::default(),
                rate_share: 1.0,
                busy_poll: false,
                live: None,
                credit: CreditTimers {
                    update_interval_ns: 20_000,
                    resync_interval_ns: 50_000,
                    timeout_ns: 2_000_000,
                },
                headroom: HeadroomSettings::default(),
            },
            0,
        );
        (w, peer0, peer1, stats)
    }

    /// A PFC frame pausing priority 3 for `quanta`, from the sink side's MAC.
    fn pfc3_frame(quanta: u16) -> [u8; 60] {
        let mut q = [0; PRIORITIES];
        q[3] = quanta;
        let mut b = [0u8; 60];
        MacControl::Pfc {
            enable: 1 << 3,
            quanta: q,
        }
        .emit_frame(MacAddr([2, 0, 0, 0, 0, 3]), &mut b)
        .unwrap();
        b
    }

    /// Reloadable settings for the two-port [`worker`]: priority 3 `prio3`, the others lossy.
    fn live_settings(
        prio3: PrioPlan,
        watchdog: Option<WatchdogConfig>,
    ) -> crate::dataplane::settings::LiveSettings {
        let mut prios = [PrioPlan::lossy(64 * 1024); PRIORITIES];
        prios[3] = prio3;
        crate::dataplane::settings::LiveSettings {
            prios,
            watchdog,
            pause_quanta: vec![65535; 2],
            sfc: SfcSettings::default(),
            measured: vec![None; 2],
            rtt_ns: vec![None; 2],
            model: vec![None; 2],
            headroom: HeadroomSettings::default(),
        }
    }

    /// A PAUSE frame of `quanta` from the sink side's MAC.
    fn pause_frame(quanta: u16) -> [u8; 60] {
        let mut b = [0u8; 60];
        MacControl::Pause { quanta }
            .emit_frame(MacAddr([2, 0, 0, 0, 0, 3]), &mut b)
            .unwrap();
        b
    }

    fn frame(seq: u64) -> Vec<u8> {
        let f = TestFrame {
            seq,
            ..TestFrame::sample(1000)
        };
        let mut b = vec![0; 1000];
        f.emit(&mut b).unwrap();
        b
    }

    /// Drives the real worker with simulated time: a source at 2 Gbit/s that obeys PFC
    /// into an egress shaped to 1 Gbit/s, for 20 ms. Returns the sequence numbers delivered
    /// and the number of frames offered.
    fn simulate(prio3: PrioPlan) -> (Vec<u64>, u64, Arc<WorkerStats>) {
        let (mut w, src, dst, stats) = worker(prio3);
        let mut source = PauseTimers::new(10 * GBIT);
        let mut delivered = Vec::new();
        let (mut seq, mut next_tx) = (0u64, 0u64);
        let gap = (1000 + 24) * 8 / 2; // ns per 1000-byte frame at 2 Gbit/s
        for now in (0..20_000_000u64).step_by(1_000) {
            while next_tx <= now {
                if !source.is_paused(3, next_tx) {
                    src.inject(&frame(seq), next_tx);
                    seq += 1;
                }
                next_tx += gap;
            }
            w.step(now).unwrap();
            for f in src.take() {
                // The daemon's PFC reaches the source 5 us later.
                source.on_frame(&MacControl::parse_frame(&f).unwrap(), now + 5_000);
            }
            delivered.extend(
                dst.take()
                    .iter()
                    .map(|f| TestFrameView::parse(f).unwrap().seq),
            );
        }
        // Drain what is still queued.
        for now in (20_000_000u64..60_000_000).step_by(1_000) {
            w.step(now).unwrap();
            delivered.extend(
                dst.take()
                    .iter()
                    .map(|f| TestFrameView::parse(f).unwrap().seq),
            );
        }
        (delivered, seq, stats)
    }

    #[test]
    fn pfc_keeps_an_overloaded_egress_lossless() {
        let (delivered, offered, stats) = simulate(PrioPlan::pfc(32 * 1024, 16 * 1024, 64 * 1024));
        assert_eq!(
            delivered,
            (0..offered).collect::<Vec<_>>(),
            "in order, no gaps"
        );
        assert!(
            offered > 2_400,
            "the source ran above the egress rate: {offered}"
        );
        let p0 = &stats.ports[0];
        assert!(p0.pfc_tx[3].get() > 2, "PFC sent upstream");
        assert_eq!(p0.drops.iter().map(Counter::get).sum::<u64>(), 0);
        // The queue never needed the headroom beyond what 5 us of reaction allows.
        assert!(stats.ports[1].queue_peak_bytes[3].get() < 32 * 1024 + 8 * 1024);
    }

    /// The worker as the bottleneck: a 10 Gbit/s source of 128-byte frames steps ahead of a
    /// worker that takes one batch per port per 100 us, into an egress that is not congested.
    /// Only the RX backlog (frames steered, not yet taken) can tell the PFC congestion point.
    #[test]
    fn a_worker_that_falls_behind_pauses_its_source_from_the_rx_backlog() {
        const LEN: usize = 128;
        let (mut w, src, dst, stats) = worker(PrioPlan::pfc(16 * 1024, 8 * 1024, 64 * 1024));
        let mut source = PauseTimers::new(10 * GBIT);
        let (mut seq, mut next_tx, mut peak, mut delivered) = (0u64, 0u64, 0, Vec::new());
        let gap = (LEN as u64 + 24) * 8 / 10; // ns per frame at 10 Gbit/s
        let mut bytes = vec![0; LEN];
        // When the last PFC reached the source: it sends on until then.
        let mut pfc_at = 0;
        for now in (0..20_000_000u64).step_by(100_000) {
            while next_tx <= now {
                let paused = next_tx >= pfc_at && source.is_paused(3, next_tx);
                if !paused && now < 15_000_000 {
                    let f = TestFrame {
                        seq,
                        ..TestFrame::sample(LEN)
                    };
                    f.emit(&mut bytes).unwrap();
                    src.inject(&bytes, next_tx);
                    seq += 1;
                }
                next_tx += gap;
            }
            peak = peak.max(src.pending());
            w.step(now).unwrap();
            for f in src.take() {
                // The daemon's PFC reaches the source 5 us later.
                pfc_at = now + 5_000;
                source.on_frame(&MacControl::parse_frame(&f).unwrap(), pfc_at);
            }
            delivered.extend(
                dst.take()
                    .iter()
                    .map(|f| TestFrameView::parse(f).unwrap().seq),
            );
        }
        assert!(seq > 5_000, "the source ran: {seq}");
        assert_eq!(delivered, (0..seq).collect::<Vec<_>>(), "in order, no gaps");
        assert!(stats.ports[0].pfc_tx[3].get() > 10, "PFC sent upstream");
        // The source is held near XOFF (16 KiB = 128 frames) plus what one 100 us turn lets
        // through at 10 Gbit/s (~820 frames); without the RX backlog it never pauses at all.
        assert!(peak < 128 + 2 * 830, "RX backlog peaked at {peak} frames");
        // Each XOFF was followed by what arrived until the source stopped: seen and counted.
        let overshoot = crate::dataplane::stats::Log2Snapshot::of([&stats.ports[0].overshoot[3]]);
        assert!(overshoot.count() > 0 && overshoot.sum > 0, "{overshoot:?}");
        assert_eq!(
            stats.ports[0].drops.iter().map(Counter::get).sum::<u64>(),
            0
        );
    }

    /// The program keeps ingress counters and stamps every frame where something reads them
    /// (any lossless priority: PFC, SFC or credits) and samples where every priority is lossy.
    #[test]
    fn the_program_samples_only_where_no_priority_is_lossless() {
        let lossy = [PrioPlan::lossy(64 * 1024); PRIORITIES];
        let p = ingress_policy(Trust::Pcp, 1514, &lossy, 32768);
        assert!(p.sampled);
        assert_eq!((p.lossy_mask, p.lossy_backlog_frames), (0xff, 0));
        for lossless in [
            PrioPlan::pfc(64 * 1024, 32 * 1024, 256 * 1024),
            PrioPlan::credit(64 * 1024),
        ] {
            let mut prios = lossy;
            prios[3] = lossless;
            let p = ingress_policy(Trust::Pcp, 1514, &prios, 32768);
            assert!(!p.sampled, "{lossless:?}");
            assert_eq!(p.lossy_mask, 0b1111_0111);
            assert_eq!(p.lossy_backlog_frames, 2048 / 4, "a quarter of a lean ring");
            // A jumbo port's 9,216-byte frames take six buffers each (before: 512 frames,
            // 3,072 buffers, more than the lean ring).
            let p = ingress_policy(Trust::Pcp, 9216, &prios, 32768);
            assert_eq!(p.lossy_backlog_frames, 2048 / 4 / 6, "{lossless:?}");
        }
    }

    /// Receive buffers follow the priorities in force: lean while none is lossless, deep
    /// from the turn after a reload makes one lossless, lean again when none is; the pool's
    /// lossy reserve follows too (it was set at start only).
    #[test]
    fn fill_rings_and_the_lossy_reserve_follow_the_lossless_priorities() {
        let lossy = PrioPlan::lossy(64 * 1024);
        let (mut w, p0, p1, stats) = worker(lossy);
        assert_eq!(p0.fill_depth(), Some(FillDepth::Lean));
        assert_eq!(p1.fill_depth(), Some(FillDepth::Lean));
        let settings = |prio3| live_settings(prio3, None);
        let live = Arc::new(SettingsCell::new(settings(lossy)));
        w.setup.live = Some(live.clone());
        live.publish(settings(PrioPlan::pfc(64 * 1024, 32 * 1024, 256 * 1024)));
        w.step(1_000).unwrap();
        assert_eq!(p0.fill_depth(), Some(FillDepth::Deep));
        assert_eq!(p1.fill_depth(), Some(FillDepth::Deep));
        // And the pool keeps its quarter from lossy frames for the new lossless priority.
        assert_eq!(w.lossy_reserve, 4096 / LOSSY_RESERVE_DIVISOR);
        live.publish(settings(lossy));
        w.step(2_000).unwrap();
        assert_eq!(p0.fill_depth(), Some(FillDepth::Lean));
        assert_eq!(w.lossy_reserve, 0);
        // In-memory ports keep no buffers in a kernel ring: the gauge says none.
        assert_eq!(stats.ports[0].fill_target.get(), 0);
    }

    /// `n` frames of priority 3 into `w` at one instant, as a source that went on sending past
    /// XOFF and the headroom would (a stalled worker's RX backlog, a source held off its
    /// CPU), then time for the 1 Gbit/s egress to send what was kept: the sequence numbers
    /// delivered.
    fn burst_past_the_buffer(
        w: &mut ForwardWorker,
        src: &MemPeer,
        dst: &MemPeer,
        n: u64,
    ) -> Vec<u64> {
        for seq in 0..n {
            src.inject(&frame(seq), 0);
        }
        let mut delivered = Vec::new();
        for now in (0..100_000_000u64).step_by(10_000) {
            w.step(now).unwrap();
            src.take();
            delivered.extend(
                dst.take()
                    .iter()
                    .map(|f| TestFrameView::parse(f).unwrap().seq),
            );
        }
        delivered
    }

    #[test]
    fn frames_beyond_a_full_buffer_are_kept_in_spare_frames_down_to_the_pools_floor() {
        // A buffer of 32 KiB: 32 of the 1000-byte frames.
        let plan = PrioPlan::pfc(16 * 1024, 8 * 1024, 16 * 1024);
        let (mut w, src, dst, stats) = worker(plan);
        let delivered = burst_past_the_buffer(&mut w, &src, &dst, 1000);
        let c = &stats.ports[0];
        assert_eq!(
            delivered,
            (0..1000).collect::<Vec<_>>(),
            "every frame, in order"
        );
        assert_eq!(c.drops.iter().map(Counter::get).sum::<u64>(), 0);
        let borrowed = c.headroom_borrowed[3].get();
        assert!((900..=968).contains(&borrowed), "{borrowed}");
        let peak = c.headroom_borrowed_peak[3].get();
        assert!(
            (borrowed - 100) * 1000 <= peak && peak <= borrowed * 1000,
            "{peak} bytes beyond the buffer at most, of {borrowed} frames"
        );
        assert!(c.pfc_tx[3].get() > 0, "and the source was paused");

        // The pool of 4,096 frames lends down to an eighth of it; beyond, frames are dropped.
        let (mut w, src, dst, stats) = worker(plan);
        let delivered = burst_past_the_buffer(&mut w, &src, &dst, 4000);
        let c = &stats.ports[0];
        let overflow = c.drops[DropReason::HeadroomOverflow as usize].get();
        assert!(overflow > 0, "{overflow}");
        assert_eq!(delivered.len() as u64 + overflow, 4000);
        // At most the frames above the floor were held at once, one frame each.
        let most = (4096 - 4096 / BORROW_FLOOR_DIVISOR as u64) * 1000;
        let peak = c.headroom_borrowed_peak[3].get();
        assert!(most - 100_000 < peak && peak < most, "{peak}");

        // `[headroom] borrow = false`: dropped at the buffer.
        let (mut w, src, dst, stats) = worker(plan);
        w.setup.headroom.borrow = false;
        let delivered = burst_past_the_buffer(&mut w, &src, &dst, 1000);
        let c = &stats.ports[0];
        let overflow = c.drops[DropReason::HeadroomOverflow as usize].get();
        assert!(overflow >= 900, "{overflow}");
        assert_eq!(delivered.len() as u64 + overflow, 1000);
        assert_eq!(c.headroom_borrowed[3].get(), 0);
    }

    #[test]
    fn lossy_priority_tail_drops_under_the_same_load() {
        let (delivered, offered, stats) = simulate(PrioPlan::lossy(64 * 1024));
        let drops = stats.ports[0].drops[DropReason::TailDrop as usize].get();
        assert!(drops > 1000, "{drops}");
        assert_eq!(
            stats.ports[0].data_drops[3].get(),
            drops,
            "all on priority 3"
        );
        assert_eq!(delivered.len() as u64 + drops, offered);
        assert!(
            delivered.windows(2).all(|w| w[0] < w[1]),
            "survivors stay in order"
        );
        assert_eq!(stats.ports[0].pfc_tx[3].get(), 0);
    }

    #[test]
    fn pause_stops_egress_and_malformed_control_is_counted() {
        let (mut w, src, dst, stats) = worker(PrioPlan::lossy(1 << 20));
        // The sink side pauses every priority for 1000 quanta (512 us at 1 Gbit/s).
        let pause = pause_frame(1000);
        dst.inject(&pause, 0);
        let mut bad = pause;
        bad[15] = 0x77; // unknown opcode
        dst.inject(&bad, 0);
        dst.inject(&[1, 2, 3], 0); // runt
        w.step(0).unwrap();
        src.inject(&frame(0), 1_000);
        w.step(1_000).unwrap();
        assert!(dst.take().is_empty(), "paused egress must not transmit");
        assert_eq!(w.next_deadline(1_000), Some(512_000));
        w.step(512_000).unwrap();
        assert_eq!(dst.take().len(), 1);
        let c = &stats.ports[1];
        assert_eq!(c.pause_rx.get(), 1);
        assert_eq!(c.drops[DropReason::Malformed as usize].get(), 2);
    }

    /// An SFC message from a congestion point at 02:00:00:00:00:02 to `to`, pausing the class
    /// of priority 3 at source 02:00:00:00:00:01 for 400 us.
    fn sfcm_for_priority_3(to: MacAddr) -> Vec<u8> {
        let mut b = vec![0; 128];
        let f = SfcmFrame {
            eth: EthernetRepr {
                dst: to,
                src: MacAddr([2, 0, 0, 0, 0, 2]),
                vlan: None,
                ethertype: EtherType::LOSSLESS,
            },
            msg: Sfcm {
                priority: 3,
                scope: SfcScope::Class,
                seq: 1,
                pause_ns: 400_000,
                sent_ns: 0,
                queue_bytes: 1 << 20,
                drain_bps: 0,
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                flow: None,
            },
        };
        let n = f.emit(&mut b).unwrap();
        b.truncate(n);
        b
    }

    /// An SFCM addressed to the daemon's port pauses that egress class and goes no further;
    /// one addressed to another host (the source in front of the daemon) goes on to it out
    /// of the other port unchanged, and pauses the class here too only where the priority is
    /// lossless: a lossy class held here would tail-drop what its source would have held.
    #[test]
    fn sfc_messages_in_transit_go_on_to_their_source() {
        let source = MacAddr([2, 0, 0, 0, 0, 1]);
        let daemon = MacAddr([2, 0, 0, 0, 0, 11]);
        let sfcm = sfcm_for_priority_3;
        let pfc = PrioPlan::pfc(32 * 1024, 16 * 1024, 64 * 1024);
        for (plan, to, forwarded, paused) in [
            (PrioPlan::lossy(1 << 20), source, true, false),
            (pfc, source, true, true),
            (PrioPlan::lossy(1 << 20), daemon, false, true),
        ] {
            let (mut w, src, dst, stats) = worker(plan);
            dst.inject(&sfcm(to), 0);
            w.step(0).unwrap();
            let passed_on: Vec<_> = src
                .take()
                .into_iter()
                .filter(|f| f[12..14] == EtherType::LOSSLESS.to_be_bytes())
                .collect();
            let expected = if forwarded { vec![sfcm(to)] } else { vec![] };
            assert_eq!(passed_on, expected, "SFCM to {to:?}, {plan:?}");
            src.inject(&frame(0), 1_000);
            w.step(1_000).unwrap();
            assert_eq!(dst.take().is_empty(), paused, "SFCM to {to:?}, {plan:?}");
            let c = &stats.ports[1];
            assert_eq!(c.sfcm_rx[3].get(), 1);
            assert_eq!(c.sfcm_forwarded[3].get(), u64::from(forwarded));
        }
    }

    /// A port that fails ends the worker's run with the error, and what the worker held is
    /// counted as `shutdown` (it went uncounted: the error returned before the count).
    #[test]
    fn a_failed_port_ends_the_run_with_what_it_held_counted() {
        let (mut w, src, dst, stats) = worker(PrioPlan::lossy(1 << 20));
        dst.inject(&pause_frame(65535), 0);
        w.step(0).unwrap();
        for seq in 0..3 {
            src.inject(&frame(seq), 1_000);
        }
        w.step(1_000).unwrap();
        assert!(dst.take().is_empty(), "paused: queued");
        src.fail();
        let r = w.run(&AtomicBool::new(false));
        assert!(matches!(r, Err(WorkerError::Port(_))), "{r:?}");
        assert_eq!(stats.ports[0].drops[DropReason::Shutdown as usize].get(), 3);
    }

    /// A stop waits for the frames the egress port took but has not sent yet (a copy-mode
    /// AF_XDP kick sends a few dozen): the drain ended once its queues were empty, and the
    /// socket's closing lost what was still in the TX ring, uncounted. Here the egress is
    /// paused past the drain's grace time, then its queue goes to the port at once, which
    /// sends one frame per kick: before, the last of the 50 were lost (41 arrived in one run).
    #[test]
    fn a_stop_waits_for_what_the_port_has_yet_to_send() {
        let (w, src, dst, _) = worker(PrioPlan::pfc(32 * 1024, 16 * 1024, 64 * 1024));
        dst.set_kick(1);
        // 65535 quanta at 1 Gbit/s: 34 ms.
        dst.inject(&pause_frame(65535), 0);
        for seq in 0..50 {
            src.inject(&frame(seq), 0);
        }
        w.run(&AtomicBool::new(true)).unwrap();
        let delivered: Vec<u64> = dst
            .take()
            .iter()
            .filter_map(|f| TestFrameView::parse(f).ok().map(|t| t.seq))
            .collect();
        assert_eq!(delivered, (0..50).collect::<Vec<_>>());
    }

    /// What the worker still holds when it stops, its egress held for a link without carrier,
    /// is counted as `shutdown`: a data frame on the port it arrived by, a control frame (an
    /// SFC message in transit) on the port it was to leave by. Every buffer goes back.
    /// An XOFF that finds the control queue full goes out at the worker's next turn, not at
    /// the refresh half a pause later (1.7 ms here) while the source sends on.
    #[test]
    fn an_xoff_that_could_not_be_queued_goes_out_at_the_next_turn() {
        let (mut w, src, _dst, stats) = worker(PrioPlan::pfc(16 * 1024, 8 * 1024, 64 * 1024));
        while let Some(frame) = w.pool.alloc() {
            let mut frame = frame;
            frame.set_len(60);
            if let Err(q) = w.ports[0]
                .ctrl
                .push(crate::dataplane::queue::Queued { frame, ingress: 0 })
            {
                w.pool.release(q.frame);
                break;
            }
        }
        for seq in 0..40 {
            src.inject(&frame(seq), 0);
        }
        let xoff_to_src = |frames: Vec<Vec<u8>>| {
            frames.iter().any(|f| {
                matches!(MacControl::parse_frame(f),
                         Ok(MacControl::Pfc { enable, quanta }) if enable == 1 << 3 && quanta[3] > 0)
            })
        };
        w.step(0).unwrap();
        assert!(!xoff_to_src(src.take()), "the control queue was full");
        assert_eq!(stats.ports[0].drops[DropReason::NoBuffer as usize].get(), 1);
        assert_eq!(stats.ports[0].pfc_tx[3].get(), 0, "counted when queued");
        let sent = (1..5).any(|turn| {
            w.step(turn * 10_000).unwrap();
            xoff_to_src(src.take())
        });
        assert!(sent, "the XOFF went out within 40 us");
        assert_eq!(stats.ports[0].pfc_tx[3].get(), 1);
    }

    /// The watchdog sees every pause end, also on an idle egress: a peer pausing priority 3
    /// for 5 ms in every 10 ms is no storm. The worker, sleeping from frame to frame, woke
    /// only for the PFC frames and at the detection time, and took the pauses for one.
    #[test]
    fn pauses_with_gaps_on_an_idle_egress_are_no_storm() {
        use crate::fc::watchdog::StormAction;
        const MS: u64 = 1_000_000;
        let (mut w, _src, dst, stats) = worker(PrioPlan::pfc(32 * 1024, 16 * 1024, 64 * 1024));
        w.ports[1].watchdog = Some(PfcWatchdog::new(WatchdogConfig {
            detection_ns: 200 * MS,
            restoration_ns: 200 * MS,
            action: StormAction::Drop,
        }));
        let pfc = pfc3_frame(9_766); // 5 ms at 1 Gbit/s
        let mut now = 0;
        for k in 0..40 {
            let arrival = k * 10 * MS;
            // Asleep until the next deadline or the next frame, whichever comes first.
            while let Some(t) = w.next_deadline(now).map(|t| t.max(now + 1_000)) {
                if t >= arrival {
                    break;
                }
                now = t;
                w.step(now).unwrap();
            }
            now = arrival;
            dst.inject(&pfc, now);
            w.step(now).unwrap();
        }
        assert_eq!(stats.ports[1].pfc_rx[3].get(), 40);
        assert_eq!(stats.ports[1].watchdog_storms[3].get(), 0);
    }

    /// A reload that turns the watchdog off ends what it said of a storm, and one that turns
    /// it on again goes on counting storms from where they were: the stormed gauge stayed
    /// at 1 for ever (and status said the watchdog was off), and the storm counter went back
    /// to 0, a counter going backwards. And a priority that is no longer PFC shows no headroom.
    #[test]
    fn a_reload_keeps_the_watchdog_and_headroom_metrics_true() {
        use crate::fc::watchdog::StormAction;
        const MS: u64 = 1_000_000;
        let prio3 = PrioPlan::pfc(32 * 1024, 16 * 1024, 64 * 1024);
        let (mut w, _src, dst, stats) = worker(prio3);
        let watchdog = WatchdogConfig {
            detection_ns: 10 * MS,
            restoration_ns: 10 * MS,
            action: StormAction::Alert,
        };
        let settings = |watchdog| live_settings(prio3, watchdog);
        let live = Arc::new(SettingsCell::new(settings(None)));
        w.setup.live = Some(live.clone());
        live.publish(settings(Some(watchdog)));
        // The sink pauses priority 3 for good: a storm.
        let pfc = pfc3_frame(65535);
        let storm = |w: &mut ForwardWorker, from: u64| {
            for now in (from..from + 40 * MS).step_by(MS as usize) {
                dst.inject(&pfc, now);
                w.step(now).unwrap();
            }
        };
        storm(&mut w, 0);
        let c = &stats.ports[1];
        assert_eq!(
            (c.watchdog_storms[3].get(), c.watchdog_stormed[3].get()),
            (1, 1)
        );
        live.publish(settings(None));
        w.step(41 * MS).unwrap();
        assert_eq!(c.watchdog_stormed[3].get(), 0, "off: no storm");
        live.publish(settings(Some(watchdog)));
        storm(&mut w, 42 * MS);
        assert_eq!(c.watchdog_storms[3].get(), 2, "counted on");
        // Priority 3 no longer PFC: no headroom in force to show (its gauges kept their last
        // values, so metrics and status went on showing one).
        assert!(stats.ports[0].headroom_in_force[3].get() > 0);
        let mut lossy = settings(None);
        lossy.prios[3] = PrioPlan::lossy(64 * 1024);
        live.publish(lossy);
        w.step(90 * MS).unwrap();
        assert_eq!(stats.ports[0].headroom_in_force[3].get(), 0);
        assert_eq!(stats.ports[0].xoff_in_force[3].get(), 0);
    }

    /// A link agent that takes every frame it is offered, counting them.
    struct Taker(Arc<std::sync::atomic::AtomicUsize>);

    impl PortAgent for Taker {
        fn on_frame(&mut self, _: crate::wire::FrameKind, _: &[u8], _: u64, _: u64) -> Taken {
            self.0.fetch_add(1, Ordering::Relaxed);
            Taken::Consumed
        }
        fn poll(&mut self, _: &mut dyn Port, _: &mut FramePool, _: u64) {}
        fn next_deadline(&self) -> u64 {
            u64::MAX
        }
        fn set_pfc_enabled(&mut self, _: u8, _: u64) {}
    }

    /// The link agent is offered LLDP and PTP to the bridge group addresses and to the port,
    /// not to another host (the leader answered a unicast peer-delay request to anyone, while
    /// another worker forwarded it: the same frame met another fate on another queue).
    #[test]
    fn the_link_agent_gets_frames_to_the_group_or_the_port_only() {
        let (w, src, _dst, _stats) = worker(PrioPlan::lossy(64 * 1024));
        let offered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut w = w.with_agents(vec![Some(Box::new(Taker(offered.clone()))), None]);
        let frame = |dst: [u8; 6], ethertype: u16| {
            let mut b = vec![0u8; 60];
            b[..6].copy_from_slice(&dst);
            b[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 3]);
            b[12..14].copy_from_slice(&ethertype.to_be_bytes());
            b
        };
        let port = [2, 0, 0, 0, 0, 10];
        src.inject(&frame([0x01, 0x80, 0xc2, 0, 0, 0x0e], EtherType::LLDP), 0);
        src.inject(&frame([0x01, 0x80, 0xc2, 0, 0, 0x0e], EtherType::PTP), 0);
        src.inject(&frame(port, EtherType::PTP), 0);
        src.inject(&frame([2, 0, 0, 0, 0, 99], EtherType::PTP), 0);
        w.step(1_000).unwrap();
        assert_eq!(offered.load(Ordering::Relaxed), 3);
    }

    /// The kernel's drop statistics are read every 100 ms of the worker's time, however long
    /// its turns: they were read every 16,384 turns, which at an idle worker's 10 ms sleeps
    /// left a burst's drops out of the metrics for nearly three minutes.
    #[test]
    fn the_kernels_drops_are_read_by_time() {
        let (mut w, _src, dst, stats) = worker(PrioPlan::lossy(64 * 1024));
        w.step(0).unwrap();
        dst.set_kernel_drops(crate::dataplane::port::KernelDrops {
            fill_ring_empty: 7,
            ..Default::default()
        });
        let seen = || {
            crate::dataplane::port::KernelDrops::from_array(std::array::from_fn(|i| {
                stats.ports[1].kernel[i].get()
            }))
        };
        w.step(50_000_000).unwrap();
        assert_eq!(seen().fill_ring_empty, 0, "not due yet");
        w.step(100_000_000).unwrap();
        assert_eq!(seen().fill_ring_empty, 7);
    }

    /// A link agent that sends one 60-byte frame at every turn.
    struct Sender;

    impl PortAgent for Sender {
        fn on_frame(&mut self, _: crate::wire::FrameKind, _: &[u8], _: u64, _: u64) -> Taken {
            Taken::Consumed
        }
        fn poll(&mut self, port: &mut dyn Port, pool: &mut FramePool, _: u64) {
            let mut frame = pool.alloc().expect("a free frame");
            frame.set_len(60);
            let _ = crate::dataplane::port::send_or_release(port, pool, &mut Vec::new(), frame);
        }
        fn next_deadline(&self) -> u64 {
            u64::MAX
        }
        fn set_pfc_enabled(&mut self, _: u8, _: u64) {}
    }

    /// A link agent's frame (an LLDPDU) sent while the egress is held waits behind what the
    /// port holds and leaves after it once the hold ends: the port pushed it at once, and on
    /// a copy-mode AF_XDP socket the kick into the dead link lost the frame at the head of
    /// the ring, a held data frame, one per LLDPDU.
    #[test]
    fn a_link_agents_frame_does_not_push_a_held_egress() {
        let (w, src, dst, _) = worker(PrioPlan::lossy(1 << 20));
        let mut w = w.with_agents(vec![None, Some(Box::new(Sender))]);
        dst.set_kick(0);
        src.inject(&frame(0), 0);
        w.step(1_000).unwrap();
        assert_eq!(
            w.ports[1].io.tx_in_flight(),
            2,
            "the data frame and the agent's"
        );
        w.ports[1].shared.set_link_up(false);
        w.step(2_000).unwrap();
        dst.set_kick(usize::MAX);
        w.step(3_000).unwrap();
        assert!(dst.take().is_empty(), "held: nothing pushed");
        w.ports[1].shared.set_link_up(true);
        w.step(4_000).unwrap();
        let sent = dst.take();
        assert_eq!(sent.len(), 5, "data first, then the agent's four frames");
        assert_eq!(TestFrameView::parse(&sent[0]).unwrap().seq, 0);
    }

    #[test]
    fn what_a_held_egress_keeps_at_the_stop_is_counted() {
        let (mut w, src, dst, stats) = worker(PrioPlan::lossy(1 << 20));
        let free = w.pool.available();
        w.ports[1].shared.set_link_up(false);
        src.inject(&frame(0), 0);
        src.inject(&sfcm_for_priority_3(MacAddr([2, 0, 0, 0, 0, 1])), 0);
        w.step(1_000).unwrap();
        assert!(dst.take().is_empty(), "held");
        w.shutdown();
        let shutdown = |p: usize| stats.ports[p].drops[DropReason::Shutdown as usize].get();
        assert_eq!((shutdown(0), shutdown(1)), (1, 1));
        assert_eq!(
            stats.ports[0].sfcm_forwarded[3].get(),
            1,
            "received on port 0"
        );
        assert_eq!(w.pool.available(), free);
    }

    /// Frames the port took before its egress was held go with it at the stop, each counted
    /// as refused (they were counted as sent when taken), none lost uncounted: on AF_XDP a
    /// copy-mode ring keeps what came after the first frame a dead link refused (1-6 frames
    /// a stop by hand, the sink's veth set down mid-traffic and the daemon stopped then;
    /// before, only that first refusal was counted).
    #[test]
    fn what_a_held_ports_ring_keeps_at_the_stop_is_counted_as_refused() {
        let (mut w, src, dst, stats) = worker(PrioPlan::lossy(1 << 20));
        dst.set_kick(0);
        src.inject(&frame(0), 0);
        src.inject(&frame(1), 0);
        w.step(1_000).unwrap();
        w.step(1_000_000).unwrap(); // (the egress is shaped to 1 Gbit/s)
        assert_eq!(w.ports[1].io.tx_in_flight(), 2);
        w.ports[1].shared.set_link_up(false);
        w.step(2_000_000).unwrap();
        w.give_up_tx();
        w.read_kernel_drops();
        let kernel = std::array::from_fn(|i| stats.ports[1].kernel[i].get());
        assert_eq!(
            crate::dataplane::port::KernelDrops::from_array(kernel).tx_refused,
            2
        );
        assert_eq!(w.ports[1].io.tx_in_flight(), 0);
        assert!(dst.take().is_empty(), "nothing sent into the dead link");
    }

    /// A frame longer than the port takes is dropped whole and counted as `oversize` for
    /// its priority, whoever sees it first: the XDP program (its count is added once, however
    /// often it is read) or the worker (a frame longer than the buffer, whose real length
    /// the backend reports, or one that fits the buffer but not the port's maximum).
    #[test]
    fn oversize_frames_are_counted_never_forwarded() {
        let (mut w, src, dst, stats) = worker(PrioPlan::lossy(1 << 20));
        let sized = |len: usize, seq: u64| {
            let mut b = vec![0; len];
            TestFrame {
                seq,
                ..TestFrame::sample(len)
            }
            .emit(&mut b)
            .unwrap();
            b
        };
        src.inject(&sized(1518, 0), 0); // the largest the port takes (max_frame 1518)
        src.inject(&sized(1519, 1), 0);
        src.inject(&sized(9000, 2), 0); // longer than a pool frame
        src.inject(&sized(1000, 3), 0);
        src.drop_oversize(3);
        src.drop_oversize(5);
        for now in (0..2_000_000).step_by(100_000) {
            w.step(now).unwrap();
        }
        let seqs: Vec<u64> = dst
            .take()
            .iter()
            .map(|f| TestFrameView::parse(f).unwrap().seq)
            .collect();
        assert_eq!(seqs, [0, 3], "the frames that fit, whole");
        let c = &stats.ports[0];
        assert_eq!(c.drops[DropReason::Oversize as usize].get(), 4);
        assert_eq!(
            std::array::from_fn::<u64, PRIORITIES, _>(|p| c.oversize[p].get()),
            [0, 0, 0, 3, 0, 1, 0, 0]
        );
        assert_eq!(c.rx_frames.get(), 2, "an oversize frame is never received");
        assert_eq!(
            c.drops.iter().map(Counter::get).sum::<u64>(),
            4,
            "nothing else dropped"
        );
    }

    /// Sends `update` from a simulated peer port as frame bytes.
    fn credit_frame(update: &crate::wire::credit::CreditUpdate) -> Vec<u8> {
        let mut b = vec![0; 128];
        let len = emit_update(update, MacAddr([2, 0, 0, 0, 0, 99]), &mut b);
        b.truncate(len);
        b
    }

    /// Applies the credit update in `frame` to `port`; false if it is not one.
    fn take_credit(port: &mut CreditPort, frame: &[u8], now: u64) -> bool {
        let eth = EthernetFrame::new_checked(frame).unwrap();
        eth.ethertype() == EtherType::LOSSLESS && port.on_update(now, eth.payload()).is_ok()
    }

    #[test]
    fn credits_hold_a_fast_source_to_the_buffer_through_a_delayed_link() {
        const BUFFER: u64 = 16 * 1024;
        const DELAY: u64 = 20_000; // one way, source <-> worker
        let (mut w, src, dst, stats) = worker(PrioPlan::credit(BUFFER));
        let timers = CreditTimers::default();
        let mut source = CreditPort::new([(3, BUFFER)], &timers, 0).unwrap();
        let mut sink = CreditPort::new([(3, 64 * 1024)], &timers, 0).unwrap();
        let mut to_worker = std::collections::VecDeque::new();
        let mut to_source = std::collections::VecDeque::new();
        let (mut seq, mut next_tx, mut delivered) = (0u64, 0u64, Vec::new());
        let gap = (1000 + 24) * 8 / 2; // 2 Gbit/s offered into a 1 Gbit/s egress
        for now in (0..20_000_000u64).step_by(1_000) {
            while next_tx <= now && now < 15_000_000 {
                if source.gate(3, 1000) != Gate::Send {
                    next_tx = now + 1_000;
                    break;
                }
                source.on_sent(3, 1000);
                to_worker.push_back((now + DELAY, frame(seq)));
                seq += 1;
                next_tx += gap;
            }
            if let Some(u) = source.poll(now) {
                to_worker.push_back((now + DELAY, credit_frame(&u)));
            }
            while to_worker.front().is_some_and(|(t, _)| *t <= now) {
                let (t, f) = to_worker.pop_front().unwrap();
                src.inject(&f, t);
            }
            w.step(now).unwrap();
            for f in src.take() {
                to_source.push_back((now + DELAY, f));
            }
            while to_source.front().is_some_and(|(t, _)| *t <= now) {
                let (_, f) = to_source.pop_front().unwrap();
                assert!(take_credit(&mut source, &f, now), "only credit flows back");
            }
            for f in dst.take() {
                if take_credit(&mut sink, &f, now) {
                    continue;
                }
                // The sink consumes at once: its buffer only bounds what is in flight.
                assert!(sink.on_data(now, 3, f.len() as u32));
                sink.on_drain(3, f.len() as u32);
                delivered.push(TestFrameView::parse(&f).unwrap().seq);
            }
            if let Some(u) = sink.poll(now) {
                dst.inject(&credit_frame(&u), now);
            }
        }
        assert!(seq > 1000, "the source ran: {seq}");
        assert_eq!(delivered, (0..seq).collect::<Vec<_>>(), "in order, no gaps");
        let (p0, p1) = (&stats.ports[0], &stats.ports[1]);
        assert_eq!(p0.drops.iter().map(Counter::get).sum::<u64>(), 0);
        // Credit, not the buffer limit, held the source back: the queue stayed within the
        // 256 blocks advertised (16 frames of 16 blocks).
        assert!(p1.queue_peak_bytes[3].get() <= 16 * 1000);
        assert!(
            p1.queue_peak_bytes[3].get() >= 8 * 1000,
            "the egress was the bottleneck"
        );
        w.publish_gauges(20_000_000);
        assert_eq!(p0.credit_active[3].get(), 1);
        assert_eq!(p1.credit_active[3].get(), 1);
        assert!(p0.credit_updates_tx[3].get() > 10);
        assert_eq!(p0.credit_reinits[3].get(), 0);
        assert_eq!(p0.pfc_tx[3].get(), 0, "no PFC on a credit priority");
    }

    #[test]
    fn a_source_ignoring_credit_is_cut_off_at_the_buffer() {
        let (mut w, src, _dst, stats) = worker(PrioPlan::credit(8 * 1024));
        // 32 frames of 16 blocks into a 128-block buffer with no credit granted.
        for seq in 0..32 {
            src.inject(&frame(seq), 0);
        }
        w.step(0).unwrap();
        let c = &stats.ports[0];
        assert_eq!(c.drops[DropReason::CreditOverrun as usize].get(), 24);
        w.publish_gauges(0);
        assert_eq!(
            c.credit_active[3].get(),
            0,
            "still waiting for the handshake"
        );
    }
}
