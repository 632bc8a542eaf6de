//! The forwarding worker of wire mode: what enters port A leaves port B and back, through
//! per-priority egress queues, buffer accounting per (ingress port, priority), the PFC
//! congestion point, the PFC reaction point and a shaper at each port's line rate.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use super::{
    classify::{self, Trust},
    clock::now_ns,
    idle::Idler,
    ingress::FillWatch,
    linkstate::LinkShared,
    pfc_headroom::PortHeadroom,
    pool::{Frame, FramePool},
    port::{Port, PortError, RxFrame},
    queue::{PrioQueues, Queued, Ring},
    settings::{LiveSettings, SettingsCell},
    shaper::Shaper,
    shared::SharedPort,
    stats::{DropReason, PortCounters, WorkerStats},
};
use crate::{
    config::PrioPlan,
    config::{LinkupSettings, SfcSettings},
    fc::{
        adaptive::HeadroomSettings,
        credit_port::{emit_update, CreditPort, CreditTimers, Gate},
        sfc::{
            FrameSource, ReactionScope, SfcCongestionPoint, SfcCpConfig, SfcReaction,
            SfcReactionPoint, SfcRpConfig,
        },
        sfc_guard::{Refusal, SfcGuard},
        watchdog::{PfcWatchdog, WatchdogConfig, WatchdogEvent},
        PauseTimers, PfcGenerator, PRIORITIES,
    },
    linkup::{
        lldp::LldpConfig,
        pdelay::InitiatorConfig,
        run::{LinkAgent, LinkAgentConfig},
    },
    wire::{
        credit::is_credit_payload, sfcm::Ipv4Flow, EtherType, EthernetFrame, EthernetRepr, MacAddr,
        MacControl, Sfcm, SfcmFrame, SfcmUdpFrame,
    },
};

/// Frames handled per RX or TX batch.
pub const BATCH: usize = 64;
/// How often gauges (queue depth, paused time) are published for readers: often enough for
/// any scrape, rare enough to cost nothing per frame.
const GAUGE_PERIOD_NS: u64 = 1_000_000;

/// How often a worker holding frames for a port without carrier looks whether it is back.
const LINK_DOWN_RECHECK_NS: u64 = 1_000_000;

/// Control frames (PFC, SFCM) that may wait for TX per port.
const CTRL_QUEUE: usize = 256;

/// SFC congestion points for the SFC priorities of an egress port draining at `speed_bps`
/// (times this worker's share).
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

/// Loop turns between reads of the kernel's socket drop statistics (a syscall each).
const KERNEL_STATS_EVERY: u32 = 1 << 14;

/// With lossless priorities configured, the XDP program drops lossy frames once the RX
/// backlog reaches 1/this of the fill ring, so a lossy flood never gets near the point where
/// the fill ring is short of buffers (half of it, see [`FillWatch`]).
const LOSSY_BACKLOG_DIVISOR: u64 = 4;

/// The XDP program's ingress policy for a port classifying by `trust` and taking frames of
/// at most `max_frame` bytes, with priorities `prios`, whose sockets keep `fill_target`
/// buffers in their fill rings.
pub fn ingress_policy(
    trust: Trust,
    max_frame: u32,
    prios: &[PrioPlan; PRIORITIES],
    fill_target: usize,
) -> crate::dataplane::xdp_prog::IngressPolicy {
    let lossless = prios.iter().any(PrioPlan::lossless);
    crate::dataplane::xdp_prog::IngressPolicy {
        trust,
        lossy_mask: (0..PRIORITIES)
            .filter(|&p| !prios[p].lossless())
            .fold(0, |m, p| m | (1 << p)),
        lossy_backlog_frames: if lossless {
            (fill_target as u64 / LOSSY_BACKLOG_DIVISOR) as u32
        } else {
            0
        },
        max_frame,
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
    /// Share of each port's line rate this worker's shaper gets (1/workers).
    pub rate_share: f64,
    /// Spin instead of sleeping when idle.
    pub busy_poll: bool,
    /// Where reloaded settings are published (SIGHUP), if anywhere.
    pub live: Option<Arc<SettingsCell>>,
    /// Link-up measurement (run by the leader worker), with one exchange per port.
    pub linkup: Option<(LinkupSettings, Vec<Arc<LinkShared>>)>,
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
    /// Generation of the live settings last applied.
    settings_seen: u64,
    /// Free frames the pool keeps for lossless priorities and control: below it, lossy frames
    /// are tail-dropped, so a lossy flood cannot starve the RX fill ring of lossless traffic.
    lossy_reserve: usize,
    rx: Vec<RxFrame>,
    tx: Vec<Frame>,
    /// The priority of each data frame in `tx` (per-priority TX counters).
    tx_prios: [u8; BATCH],
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
    shaper: Shaper,
    /// Pauses received on this port (its egress).
    timers: PauseTimers,
    /// PFC this port sends for its ingress occupancy.
    generator: PfcGenerator,
    /// When the watchdog is enabled.
    watchdog: Option<PfcWatchdog>,
    /// LLDP and peer delay, on the leader worker when link-up is enabled.
    agent: Option<LinkAgent>,
    /// LLDP neighbours the agent knew when last published.
    neighbours_seen: usize,
    /// Admission per priority, from the settings in force (measured thresholds included).
    admission: [Admission; PRIORITIES],
    /// Control frames (PFC, SFCM, credit) waiting for TX; sent ahead of data.
    ctrl: Ring,
    /// SFC congestion point per priority of this egress (SFC priorities only).
    sfc_cps: [Option<SfcCongestionPoint>; PRIORITIES],
    /// SFC reaction point (pauses this port's egress).
    sfc_rp: SfcReactionPoint,
    /// Whose SFC messages the reaction point obeys.
    sfc_guard: SfcGuard,
    /// Credit lanes: the receive side accounts frames that arrived on the port, the transmit
    /// side gates what the port sends.
    credit: CreditPort,
    /// This worker's share of the port's RX backlog as last published in [`SharedPort`].
    rx_backlog: [u64; PRIORITIES],
    /// Bytes arrived per priority on this worker's queue, as last published.
    arrived: [u64; PRIORITIES],
    /// Headroom in force per PFC priority (the leader's; `None` on other workers).
    headroom: Option<PortHeadroom>,
    /// Whether this worker's fill ring is short of buffers (published in [`SharedPort`]).
    fill_watch: FillWatch,
    /// The port's count of `oversize` drops before the socket (XDP), as last added to the
    /// stats.
    oversize_seen: [u64; PRIORITIES],
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
        let pfc_enabled = (0..PRIORITIES)
            .filter(|&p| setup.prios[p].pfc.is_some())
            .fold(0u8, |m, p| m | (1 << p));
        let ports = ports
            .into_iter()
            .zip(shared)
            .zip(&setup.ports)
            .map(|((io, shared), port)| {
                let headroom = setup.pfc_generator.then(|| {
                    PortHeadroom::new(
                        setup.headroom,
                        u64::from(port.max_frame),
                        &setup.prios,
                        |p| (setup.prios[p], false),
                        now,
                    )
                });
                let thresholds = headroom.as_ref().map_or_else(
                    || std::array::from_fn(|p| setup.prios[p].thresholds()),
                    PortHeadroom::thresholds,
                );
                let agent = match (&setup.linkup, setup.pfc_generator) {
                    (Some((l, _)), true) => Some(
                        LinkAgent::new(
                            LinkAgentConfig {
                                lldp: LldpConfig::new(io.mac(), io.name(), pfc_enabled),
                                initiator: InitiatorConfig::new(l.samples, l.sample_interval_ns),
                                respond: true,
                            },
                            io.mac(),
                            now,
                        )
                        .with_kernel_tx_stamps(
                            io.name(),
                            crate::linkup::tx_stamp::DATAPLANE_STAMP_TIMEOUT,
                        ),
                    ),
                    _ => None,
                };
                let lanes = (0..PRIORITIES)
                    .filter(|&p| port.credit && setup.prios[p].credit)
                    .map(|p| (p as u8, setup.prios[p].limit));
                PortState {
                    egress: PrioQueues::new(cap),
                    shaper: Shaper::paced(((port.speed_bps as f64) * setup.rate_share) as u64, now),
                    timers: PauseTimers::new(port.speed_bps),
                    generator: PfcGenerator::new(thresholds, port.pause_quanta, port.speed_bps),
                    watchdog: setup.watchdog.map(PfcWatchdog::new),
                    agent,
                    neighbours_seen: usize::MAX,
                    // Nothing measured yet: every port has the configured plans.
                    admission: admission_row(|prio| setup.prios[prio]),
                    ctrl: Ring::new(CTRL_QUEUE),
                    sfc_cps: sfc_congestion_points(
                        &setup.prios,
                        &setup.sfc,
                        port.speed_bps,
                        setup.rate_share,
                    ),
                    sfc_rp: SfcReactionPoint::new(SfcRpConfig {
                        scope: ReactionScope::Class,
                        ..SfcRpConfig::default()
                    })
                    .expect("the default reaction-point config is valid"),
                    sfc_guard: SfcGuard::new(setup.sfc.sources),
                    credit: CreditPort::new(lanes, &setup.credit, now)
                        .expect("validated credit settings make valid lanes"),
                    rx_backlog: [0; PRIORITIES],
                    arrived: [0; PRIORITIES],
                    headroom,
                    fill_watch: FillWatch::default(),
                    oversize_seen: [0; PRIORITIES],
                    io,
                    shared,
                }
            })
            .collect();
        ForwardWorker {
            lossy_reserve: if setup.prios.iter().any(PrioPlan::lossless) {
                cap / LOSSY_RESERVE_DIVISOR
            } else {
                0
            },
            gauges_due: now,
            settings_seen: setup.live.as_ref().map_or(0, |l| l.generation()),
            rx: Vec::with_capacity(BATCH),
            tx: Vec::with_capacity(BATCH),
            tx_prios: [0; BATCH],
            pool,
            ports,
            stats,
            setup,
        }
    }

    /// Runs until `stop` is set; then pauses its PFC sources, forwards what it holds (see
    /// [`ForwardWorker::drain`]) and releases the rest, counted.
    pub fn run(mut self, stop: &AtomicBool) -> Result<(), WorkerError> {
        let mut idler = Idler::new(
            self.ports.iter().map(|p| p.io.poll_fd()),
            self.setup.busy_poll,
        );
        if self.setup.pfc_generator {
            // Resume whatever a previous instance paused upstream when it stopped.
            for p in 0..self.ports.len() {
                if let Some(m) = self.ports[p].generator.resume_all() {
                    self.send_pfc(p, &m);
                }
            }
        }
        let mut turns = 0u32;
        // Test hook for the systemd watchdog tests: the loop stops turning after this many ms.
        let wedge_at = std::env::var("LOSSLESS_TEST_WEDGE_AFTER_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(|ms| now_ns() + ms * 1_000_000);
        while !stop.load(Ordering::Relaxed) {
            let now = now_ns();
            if wedge_at.is_some_and(|t| now >= t) {
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            if self.step(now)? == 0 {
                let deadline = self.next_deadline(now);
                idler.wait(now, deadline);
            }
            turns = turns.wrapping_add(1);
            if turns % KERNEL_STATS_EVERY == 0 {
                self.read_kernel_drops();
            }
        }
        self.drain(&mut idler)?;
        self.read_kernel_drops();
        self.shutdown();
        self.publish_gauges(now_ns());
        Ok(())
    }

    /// Stopping without losing what was accepted: the leader pauses every PFC priority
    /// upstream (and keeps the pause refreshed), then the worker goes on receiving and
    /// forwarding until its queues are empty, at least [`STOP_GRACE_NS`] so frames already on
    /// their way arrive, at most [`STOP_DRAIN_NS`].
    fn drain(&mut self, idler: &mut Idler) -> Result<(), WorkerError> {
        let start = now_ns();
        if self.setup.pfc_generator {
            for p in 0..self.ports.len() {
                if let Some(m) = self.ports[p].generator.hold(start) {
                    self.send_pfc(p, &m);
                }
            }
        }
        loop {
            let now = now_ns();
            let empty = self
                .ports
                .iter()
                .all(|s| s.egress.is_empty() && s.ctrl.is_empty());
            if (empty && now >= start + STOP_GRACE_NS) || now >= start + STOP_DRAIN_NS {
                return Ok(());
            }
            if self.step(now)? == 0 {
                let deadline = self.next_deadline(now).unwrap_or(u64::MAX);
                idler.wait(now, Some(deadline.min(now + 1_000_000)));
            }
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
            for p in 0..self.ports.len() {
                self.generate_pfc(p, now);
            }
        }
        for e in 0..self.ports.len() {
            work += self.transmit(e, now)?;
            self.send_credit(e, now);
        }
        self.run_link_agents(now);
        if now >= self.gauges_due {
            self.publish_gauges(now);
            self.gauges_due = now + GAUGE_PERIOD_NS;
        }
        Ok(work)
    }

    fn receive(&mut self, p: usize, now: u64) -> Result<usize, WorkerError> {
        self.ports[p].io.reclaim(&mut self.pool)?;
        self.rx.clear();
        let n = self.ports[p]
            .io
            .recv(&mut self.pool, &mut self.rx, BATCH, now)?;
        for i in 0..n {
            let mut rx = self.rx[i];
            if rx.frame.len > self.setup.ports[p].max_frame {
                self.oversize(p, rx.frame);
                continue;
            }
            if let Some(agent) = self.ports[p].agent.as_mut() {
                let malformed = agent.counters().rx_malformed;
                match agent.handle_rx(&mut self.pool, rx, now) {
                    Some(r) => rx = r,
                    // LLDP or PTP, taken by the link agent (which counts what did not parse).
                    None => {
                        if agent.counters().rx_malformed != malformed {
                            self.stats.ports[p].drop(DropReason::Malformed);
                        }
                        continue;
                    }
                }
            }
            self.ingress(p, rx, now);
        }
        // An empty turn with nothing published as waiting has nothing new to say.
        if n > 0
            || self.ports[p].rx_backlog != [0; PRIORITIES]
            || self.ports[p].fill_watch.starved()
        {
            self.account_rx_backlog(p);
        }
        Ok(n)
    }

    /// Publishes what still waits in port `p`'s RX ring (from the XDP program's counters) and
    /// whether its fill ring is short of buffers: both are congestion the PFC and SFC
    /// congestion points of `p` act on, before the kernel has to drop anything.
    fn account_rx_backlog(&mut self, p: usize) {
        let b = self.ports[p].io.rx_backlog();
        if b.bytes != self.ports[p].rx_backlog {
            self.ports[p]
                .shared
                .update_rx_backlog(&self.ports[p].rx_backlog, &b.bytes);
            self.ports[p].rx_backlog = b.bytes;
        }
        if b.arrived != self.ports[p].arrived {
            self.ports[p]
                .shared
                .add_arrived(&self.ports[p].arrived, &b.arrived);
            self.ports[p].arrived = b.arrived;
        }
        let c = &self.stats.ports[p];
        if let Some(starved) = self.ports[p].fill_watch.update(&b) {
            self.ports[p].shared.set_fill_starved(starved);
            if starved {
                c.fill_starved_events.add(1);
            }
        }
        c.rx_backlog_frames_peak.max(b.frames);
    }

    /// Drops a frame longer than port `p` takes (a backend that cannot see it before the
    /// worker: AF_PACKET reports a truncated frame's real length), counted per priority.
    fn oversize(&mut self, p: usize, frame: Frame) {
        let prio = EthernetFrame::new_checked(self.pool.data(frame))
            .map_or(0, |eth| classify::priority(&eth, self.setup.ports[p].trust));
        self.stats.ports[p].drop_oversize(prio, 1);
        self.pool.release(frame.idx);
    }

    /// Classifies one received frame: PAUSE/PFC feed the reaction point, link-local control
    /// is consumed, data is admitted to the other port's queue or dropped with a reason.
    fn ingress(&mut self, p: usize, rx: RxFrame, now: u64) {
        let c = &self.stats.ports[p];
        let len = u64::from(rx.frame.len);
        c.rx_frames.add(1);
        c.rx_bytes.add(len);
        c.rx_lag_ns.record(now.saturating_sub(rx.rx_ns));
        let data = self.pool.data(rx.frame);
        let Ok(eth) = EthernetFrame::new_checked(data) else {
            return self.discard(p, rx.frame, DropReason::Malformed);
        };
        // The header is parsed once per frame: every test below reads this EtherType.
        let ethertype = eth.ethertype();
        if ethertype == EtherType::MAC_CONTROL {
            let parsed = MacControl::parse(eth.payload());
            return match parsed {
                Ok(m) => {
                    self.react(p, &m, now);
                    self.pool.release(rx.frame.idx);
                }
                Err(_) => self.discard(p, rx.frame, DropReason::Malformed),
            };
        }
        if ethertype == EtherType::LOSSLESS && is_credit_payload(eth.payload()) {
            if self.ports[p].credit.is_empty() {
                // Credits are not enabled on this port: link-local, not forwarded.
                return self.discard(p, rx.frame, DropReason::LinkLocal);
            }
            return match self.ports[p].credit.on_update(now, eth.payload()) {
                Ok(_) => self.pool.release(rx.frame.idx),
                Err(_) => self.discard(p, rx.frame, DropReason::Malformed),
            };
        }
        if ethertype == EtherType::LOSSLESS {
            let parsed = SfcmFrame::parse(data);
            return match parsed {
                Ok(f) => match self.ports[p].sfc_guard.admit(f.eth.src, now) {
                    Ok(()) => {
                        self.react_sfc(p, &f.msg, now);
                        self.pool.release(rx.frame.idx);
                    }
                    Err(Refusal::NotAllowed) => {
                        self.discard(p, rx.frame, DropReason::SfcmNotAllowed)
                    }
                    Err(Refusal::RateLimited) => {
                        self.discard(p, rx.frame, DropReason::SfcmRateLimited)
                    }
                },
                Err(_) => self.discard(p, rx.frame, DropReason::Malformed),
            };
        }
        let source = eth.src();
        let dst = eth.dst().0;
        if dst[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && dst[5] <= 0x0f {
            return self.discard(p, rx.frame, DropReason::LinkLocal);
        }
        let prio = classify::priority(&eth, self.setup.ports[p].trust);
        self.stats.ports[p].rx_data_frames[prio].add(1);
        self.stats.ports[p].rx_data_bytes[prio].add(len);
        // Every data frame counts towards the blocks received, kept or not.
        if !self.ports[p].credit.on_data(now, prio, rx.frame.len) {
            return self.discard_data(p, rx.frame, DropReason::CreditOverrun, prio);
        }
        let admit = self.ports[p].admission[prio];
        let before = self.ports[p].shared.occupancy(prio);
        let reserve_hit = !admit.lossless && self.pool.available() < self.lossy_reserve;
        if before + len > admit.limit || reserve_hit {
            let reason = if admit.lossless {
                DropReason::HeadroomOverflow
            } else {
                DropReason::TailDrop
            };
            self.ports[p].credit.on_drain(prio, rx.frame.len);
            return self.discard_data(p, rx.frame, reason, prio);
        }
        let e = 1 - p;
        if self.watchdog_dropping(e) & (1 << prio) != 0 {
            self.ports[p].credit.on_drain(prio, rx.frame.len);
            return self.discard_data(p, rx.frame, DropReason::Watchdog, prio);
        }
        let q = Queued {
            idx: rx.frame.idx,
            len: rx.frame.len,
            ingress: p as u8,
            rx_ns: rx.rx_ns,
        };
        match self.ports[e].egress.push(prio, q) {
            Ok(()) => {
                self.ports[p].shared.charge(prio, len);
                self.congestion_sfc(p, e, prio, source, rx.frame, now);
            }
            Err(_) => {
                self.ports[p].credit.on_drain(prio, rx.frame.len);
                self.discard_data(p, rx.frame, DropReason::NoBuffer, prio)
            }
        }
    }

    /// A queued frame of `prio` left the buffer (sent or dropped): its ingress port's
    /// occupancy and credit get the room back.
    fn release_queued(&mut self, prio: usize, q: &Queued) {
        let ingress = usize::from(q.ingress);
        self.ports[ingress].shared.release(prio, u64::from(q.len));
        self.ports[ingress].credit.on_drain(prio, q.len);
    }

    /// Queues the credit update port `p` has due, behind the data frames its FCTBS counts
    /// (control frames go out before any later data), and logs lane re-initialisations.
    fn send_credit(&mut self, p: usize, now: u64) {
        if self.ports[p].credit.is_empty() {
            return;
        }
        let port = &mut self.ports[p];
        let iface = port.io.name();
        for (priority, reason) in port.credit.take_reinits() {
            tracing::warn!(iface, priority, ?reason, "credit lane re-initialised");
        }
        let Some(update) = self.ports[p].credit.poll(now) else {
            return;
        };
        let Some(idx) = self.pool.alloc() else {
            // Lost like an update lost on the wire: the next one carries the same credit.
            return self.stats.ports[p].drop(DropReason::NoBuffer);
        };
        let len = emit_update(&update, self.ports[p].io.mac(), self.pool.buf_mut(idx));
        self.queue_control(
            p,
            Frame {
                idx,
                len: len as u32,
            },
        );
    }

    /// SFC congestion point: a frame queued for `e` at `prio` above the threshold earns its
    /// source (behind ingress port `p`) an SFCM with the time the queue needs to drain.
    fn congestion_sfc(
        &mut self,
        p: usize,
        e: usize,
        prio: usize,
        source: MacAddr,
        offending: Frame,
        now: u64,
    ) {
        // What waits in the ingress RX ring must drain through this queue too.
        let queued = self.ports[e].egress.ring_ref(prio).bytes() + self.ports[p].rx_backlog[prio];
        let Some(cp) = self.ports[e].sfc_cps[prio].as_mut() else {
            return;
        };
        let flow = Ipv4Flow::of_frame(self.pool.data(offending));
        let Some(msg) = cp.on_arrival(now, queued, &FrameSource { mac: source, flow }) else {
            return;
        };
        let eth = EthernetRepr {
            dst: source,
            src: self.ports[p].io.mac(),
            vlan: None,
            ethertype: EtherType::LOSSLESS,
        };
        let c = &self.stats.ports[p];
        let Some(idx) = self.pool.alloc() else {
            return c.drop(DropReason::NoBuffer);
        };
        let buf = self.pool.buf_mut(idx);
        // UDP reaches a source beyond this L2 segment (via its MAC as the next hop back).
        let emitted = match (self.setup.sfc.udp, flow) {
            (Some((port, src_ip)), Some(f)) => SfcmUdpFrame {
                eth,
                src_ip,
                dst_ip: f.src_ip,
                dscp: 48,
                ttl: 64,
                src_port: port,
                dst_port: port,
                msg,
            }
            .emit(buf),
            _ => SfcmFrame { eth, msg }.emit(buf),
        };
        let len = emitted.expect("a pool frame holds an SFCM");
        let c = &self.stats.ports[p];
        c.sfcm_tx[prio].add(1);
        self.queue_control(
            p,
            Frame {
                idx,
                len: len as u32,
            },
        );
    }

    /// SFC reaction point: an SFCM received on port `p` pauses `p`'s egress class (max rule).
    fn react_sfc(&mut self, p: usize, msg: &Sfcm, now: u64) {
        let prio = usize::from(msg.priority & 7);
        self.stats.ports[p].sfcm_rx[prio].add(1);
        match self.ports[p].sfc_rp.on_sfcm(msg, now) {
            SfcReaction::Class { priority, until } | SfcReaction::Escalated { priority, until } => {
                self.ports[p]
                    .shared
                    .sfc_pause(usize::from(priority & 7), until)
            }
            SfcReaction::Interface { until } => {
                (0..PRIORITIES).for_each(|q| self.ports[p].shared.sfc_pause(q, until))
            }
            // Class scope is configured, so no flow pauses arrive here.
            SfcReaction::Flow { .. } => {}
        }
    }

    /// Queues a control frame for TX on `p` ahead of data; counts a drop if the queue is full.
    fn queue_control(&mut self, p: usize, frame: Frame) {
        let q = Queued {
            idx: frame.idx,
            len: frame.len,
            ingress: p as u8,
            rx_ns: 0,
        };
        if self.ports[p].ctrl.push(q).is_err() {
            self.stats.ports[p].drop(DropReason::NoBuffer);
            self.pool.release(frame.idx);
        }
    }

    fn discard(&mut self, p: usize, frame: Frame, reason: DropReason) {
        self.stats.ports[p].drop(reason);
        self.pool.release(frame.idx);
    }

    /// Drops a data frame of priority `prio` that arrived on port `p`, counted per reason and
    /// per priority.
    fn discard_data(&mut self, p: usize, frame: Frame, reason: DropReason, prio: usize) {
        self.stats.ports[p].drop_data(reason, prio);
        self.pool.release(frame.idx);
    }

    /// Reaction point: a PAUSE/PFC frame received on port `p` pauses `p`'s egress.
    fn react(&mut self, p: usize, m: &MacControl, now: u64) {
        let c: &PortCounters = &self.stats.ports[p];
        match *m {
            MacControl::Pause { .. } => c.pause_rx.add(1),
            MacControl::Pfc { enable, .. } => {
                for (prio, counter) in c.pfc_rx.iter().enumerate() {
                    if enable & (1 << prio) != 0 {
                        counter.add(1);
                    }
                }
            }
        }
        let deadlines = PauseTimers::deadlines(m, now, self.setup.ports[p].speed_bps);
        self.ports[p].shared.set_pause(&deadlines);
        self.ports[p].timers.on_frame(m, now);
    }

    /// Congestion point: turns port `p`'s ingress occupancy into PFC frames sent on `p`, and
    /// watches what arrives after each XOFF (the overshoot the headroom must hold).
    fn generate_pfc(&mut self, p: usize, now: u64) {
        let occupancy = self.ports[p].shared.pfc_occupancy();
        // Short of RX buffers: every PFC priority of the port is congested, whatever its bytes.
        let congested = if self.ports[p].shared.fill_starved() {
            u8::MAX
        } else {
            0
        };
        let before = self.ports[p].generator.xoff_mask();
        let sent = self.ports[p].generator.poll(now, &occupancy, congested);
        let after = self.ports[p].generator.xoff_mask();
        let c = &self.stats.ports[p];
        let port = &mut self.ports[p];
        if let Some(h) = port.headroom.as_mut() {
            let arrived = port.shared.arrived_all();
            if h.observe(now, before, after, &arrived, |prio, o| {
                c.overshoot[prio].record(o.bytes);
                c.pfc_reaction_ns[prio].record(o.settle_ns);
            }) {
                self.retune(p, now);
            }
        }
        let Some(m) = sent else {
            return;
        };
        let c = &self.stats.ports[p];
        for (prio, n) in self.ports[p]
            .generator
            .xoff_transitions()
            .iter()
            .enumerate()
        {
            c.xoff_transitions[prio].set(*n);
        }
        for (prio, ns) in self.ports[p].generator.xoff_held_ns(now).iter().enumerate() {
            c.xoff_held_ns[prio].set(*ns);
        }
        self.send_pfc(p, &m);
    }

    /// Port `p`'s headroom in force changed: its generator gets the new XOFF/XON, and the log
    /// says why.
    fn retune(&mut self, p: usize, now: u64) {
        let state = &mut self.ports[p];
        let Some(h) = state.headroom.as_ref() else {
            return;
        };
        let port = &self.setup.ports[p];
        state
            .generator
            .reconfigure(h.thresholds(), port.pause_quanta, port.speed_bps);
        for prio in 0..PRIORITIES {
            if let Some(r) = h.report(prio, now) {
                tracing::info!(
                    iface = state.io.name(),
                    priority = prio,
                    headroom = r.in_force,
                    source = r.source.label(),
                    floor = r.floor,
                    measured = r.model,
                    observed = r.evidence,
                    xoff = r.xoff,
                    xon = r.xon,
                    "PFC headroom changed"
                );
            }
        }
    }

    /// Queues the PFC frame `m` for TX on port `p` and counts it.
    fn send_pfc(&mut self, p: usize, m: &MacControl) {
        let c = &self.stats.ports[p];
        if let MacControl::Pfc { enable, .. } = *m {
            for (prio, counter) in c.pfc_tx.iter().enumerate() {
                if enable & (1 << prio) != 0 {
                    counter.add(1);
                }
            }
        }
        let Some(idx) = self.pool.alloc() else {
            // No frame to build it in: the generator will refresh the signal shortly.
            return c.drop(DropReason::NoBuffer);
        };
        let src = self.ports[p].io.mac();
        let len = m
            .emit_frame(src, self.pool.buf_mut(idx))
            .expect("a pool frame holds a MAC control frame");
        self.queue_control(
            p,
            Frame {
                idx,
                len: len as u32,
            },
        );
    }

    fn transmit(&mut self, e: usize, now: u64) -> Result<usize, WorkerError> {
        let mut sent = 0;
        if !self.ports[e].ctrl.is_empty() {
            self.tx.clear();
            let room = self.ports[e].io.tx_room().min(BATCH);
            while self.tx.len() < room {
                let Some(q) = self.ports[e].ctrl.pop() else {
                    break;
                };
                self.ports[e].shaper.charge(q.len, now);
                self.tx.push(q.frame());
            }
            let n = self.ports[e].io.send(&mut self.pool, &self.tx)?;
            let c = &self.stats.ports[e];
            c.tx_frames.add(n as u64);
            c.tx_bytes
                .add(self.tx[..n].iter().map(|f| u64::from(f.len)).sum());
            for f in &self.tx[n..] {
                c.drop(DropReason::NoBuffer);
                self.pool.release(f.idx);
            }
            sent += n;
        }
        if !self.ports[e].ctrl.is_empty() {
            // A credit update waiting here counts only the data sent before it: no data
            // overtakes it.
            return Ok(sent);
        }
        let (received_pause, _) = self.ports[e].shared.paused(now);
        let mut paused = received_pause & !self.watch(e, received_pause, now);
        if !self.ports[e].shared.link_up() {
            // No carrier: hold every frame rather than send it into a dead link.
            paused = u8::MAX;
        }
        let room = self.ports[e].io.tx_room().min(BATCH);
        self.tx.clear();
        // `room` counts buffers: a jumbo frame over AF_XDP takes several. A frame the port
        // would refuse is never taken (the port would have it dropped).
        let mut slots = 0;
        while slots < room {
            let Some(prio) = self.ports[e].egress.select(paused) else {
                break;
            };
            let head = *self.ports[e]
                .egress
                .front(prio)
                .expect("selected ring is non-empty");
            let k = self.pool.tx_slots(head.frame());
            if slots > 0 && slots + k > room {
                break;
            }
            match self.ports[e].credit.gate(prio, head.len) {
                Gate::Free | Gate::Send => {}
                Gate::Wait => {
                    paused |= 1 << prio;
                    continue;
                }
                Gate::NeverFits => {
                    self.ports[e].egress.pop(prio);
                    self.release_queued(prio, &head);
                    self.discard_data(
                        usize::from(head.ingress),
                        head.frame(),
                        DropReason::CreditTooLarge,
                        prio,
                    );
                    continue;
                }
            }
            if !self.ports[e].shaper.try_send(head.len, now) {
                break;
            }
            self.ports[e].egress.pop(prio);
            self.ports[e].credit.on_sent(prio, head.len);
            self.release_queued(prio, &head);
            let port = &mut self.ports[e];
            if let Some(cp) = port.sfc_cps[prio].as_mut() {
                cp.on_dequeue(u64::from(head.len), now);
                if port.egress.ring_ref(prio).is_empty() {
                    cp.on_empty();
                }
            }
            self.tx_prios[self.tx.len()] = prio as u8;
            self.tx.push(head.frame());
            slots += k;
        }
        if !self.tx.is_empty() {
            let n = self.ports[e].io.send(&mut self.pool, &self.tx)?;
            let c = &self.stats.ports[e];
            let bytes: u64 = self.tx[..n].iter().map(|f| u64::from(f.len)).sum();
            c.tx_frames.add(n as u64);
            c.tx_bytes.add(bytes);
            for (f, &prio) in self.tx[..n].iter().zip(&self.tx_prios) {
                c.tx_data_frames[usize::from(prio)].add(1);
                c.tx_data_bytes[usize::from(prio)].add(u64::from(f.len));
            }
            // `tx_room` promised space; should the ring still refuse, the frames are dropped
            // and counted rather than leaked.
            for f in &self.tx[n..] {
                c.drop(DropReason::NoBuffer);
                self.pool.release(f.idx);
            }
            sent += n;
        }
        Ok(sent)
    }

    /// Publishes the gauges readers see (queue depth and peak, paused time, headroom) for
    /// every port, and lets the observed headroom evidence decay.
    fn publish_gauges(&mut self, now: u64) {
        for p in 0..self.ports.len() {
            let Some(h) = self.ports[p].headroom.as_mut() else {
                continue;
            };
            if h.advance(now) {
                self.retune(p, now);
            }
            let c = &self.stats.ports[p];
            let Some(h) = self.ports[p].headroom.as_ref() else {
                continue;
            };
            for prio in 0..PRIORITIES {
                let Some(r) = h.report(prio, now) else {
                    continue;
                };
                c.headroom_in_force[prio].set(r.in_force);
                c.headroom_source[prio].set(r.source as u64);
                c.headroom_floor[prio].set(r.floor);
                c.headroom_model[prio].set(r.model);
                c.headroom_evidence[prio].set(r.evidence);
                c.headroom_changes[prio].set(r.changes.0);
                c.headroom_changed_ns[prio].set(r.changes.1.unwrap_or(0));
                c.xoff_in_force[prio].set(r.xoff);
                c.xon_in_force[prio].set(r.xon);
            }
        }
        for e in 0..self.ports.len() {
            let c = &self.stats.ports[e];
            let depth = self.ports[e].egress.bytes();
            let peak = self.ports[e].egress.peak_bytes();
            let paused_ns = self.ports[e].timers.paused_ns(now);
            let sfc_paused = self.ports[e].sfc_rp.paused_ns(now).class;
            for p in 0..PRIORITIES {
                let (Some(lane), Some(r)) =
                    (self.ports[e].credit.lane(p), self.ports[e].credit.report(p))
                else {
                    continue;
                };
                let available = if r.active {
                    lane.tx().available_blocks()
                } else {
                    0
                };
                c.credit_available[p].set(u64::from(available) * crate::fc::credit::BLOCK_BYTES);
                c.credit_active[p].set(u64::from(r.active));
                c.credit_updates_tx[p].set(r.updates_sent);
                c.credit_updates_rx[p].set(r.updates_received);
                c.credit_resyncs[p].set(r.resyncs);
                c.credit_reinits[p].set(r.reinits);
            }
            let backlog_drops = self.ports[e].io.backlog_drops();
            let oversize = self.ports[e].io.oversize_drops();
            for p in 0..PRIORITIES {
                let new = oversize[p].saturating_sub(self.ports[e].oversize_seen[p]);
                if new > 0 {
                    c.drop_oversize(p, new);
                    self.ports[e].oversize_seen[p] = oversize[p];
                }
                c.rx_backlog_bytes[p].set(self.ports[e].rx_backlog[p]);
                c.rx_backlog_drops[p].set(backlog_drops[p]);
                c.sfc_paused_ns[p].set(sfc_paused[p]);
                c.queue_bytes[p].set(depth[p]);
                c.queue_peak_bytes[p].set(peak[p]);
                c.paused_ns[p].set(paused_ns[p]);
            }
        }
    }

    /// Link-up: starts requested measurements, sends what the agents have due, and hands
    /// finished measurements to the control plane.
    fn run_link_agents(&mut self, now: u64) {
        let Some((_, links)) = &self.setup.linkup else {
            return;
        };
        for (port, link) in self.ports.iter_mut().zip(links) {
            let Some(agent) = port.agent.as_mut() else {
                continue;
            };
            if link.take_request() {
                agent.start_measurement(now);
            }
            if let Err(e) = agent.transmit(&mut *port.io, &mut self.pool, now) {
                tracing::warn!(iface = port.io.name(), error = %e, "link-up transmit failed");
            }
            if let Some(r) = agent.take_measurement(now) {
                link.finish(r);
            }
            let known = agent.lldp().neighbours();
            if known.len() != port.neighbours_seen {
                port.neighbours_seen = known.len();
                let peer = known
                    .first()
                    .map(|n| format!("{} / {}", n.pdu.chassis_id, n.pdu.port_id));
                link.set_peer(peer);
            }
        }
    }

    /// Applies reloaded settings without dropping queued frames: admission and PFC use the new
    /// thresholds from now on; PFC and watchdog keep their state.
    fn apply(&mut self, s: &LiveSettings) {
        let sfc_changed =
            s.prios.map(|p| p.sfc) != self.setup.prios.map(|p| p.sfc) || s.sfc != self.setup.sfc;
        let guards_changed = s.sfc.sources != self.setup.sfc.sources;
        self.setup.sfc = s.sfc;
        self.setup.prios = s.prios;
        self.setup.headroom = s.headroom;
        self.setup.watchdog = s.watchdog;
        let now = now_ns();
        for (i, (state, port)) in self.ports.iter_mut().zip(&mut self.setup.ports).enumerate() {
            if sfc_changed {
                state.sfc_cps =
                    sfc_congestion_points(&s.prios, &s.sfc, port.speed_bps, self.setup.rate_share);
            }
            if guards_changed {
                state.sfc_guard = SfcGuard::new(s.sfc.sources);
            }
            let in_force = |p| {
                let (plan, source) = s.plan_for(i, p);
                (plan, source == "measured")
            };
            let thresholds = match state.headroom.as_mut() {
                Some(h) => {
                    h.reconfigure(s.headroom, &s.prios, in_force, now);
                    h.thresholds()
                }
                None => std::array::from_fn(|p| s.plan_for(i, p).0.thresholds()),
            };
            port.pause_quanta = s.pause_quanta.get(i).copied().unwrap_or(u16::MAX);
            state
                .generator
                .reconfigure(thresholds, port.pause_quanta, port.speed_bps);
            // SFC: the sources of this egress's queues sit behind the other port of the wire.
            let rtt = s.rtt_ns.get(1 - i).copied().flatten();
            for cp in state.sfc_cps.iter_mut().flatten() {
                cp.set_link_rtt(rtt);
            }
            state.admission = admission_row(|prio| s.plan_for(i, prio).0);
            match (s.watchdog, state.watchdog.as_mut()) {
                (None, _) => state.watchdog = None,
                (Some(c), None) => state.watchdog = Some(PfcWatchdog::new(c)),
                (Some(c), Some(w)) => w.set_config(c),
            }
        }
    }

    /// Priorities whose frames egress `e` drops because the watchdog declared them stormed.
    fn watchdog_dropping(&self, e: usize) -> u8 {
        self.ports[e]
            .watchdog
            .as_ref()
            .map_or(0, PfcWatchdog::dropping)
    }

    /// Runs egress `e`'s watchdog on the pause state received; applies the drop action to
    /// queued frames and returns the priorities whose pause is overridden.
    fn watch(&mut self, e: usize, received_pause: u8, now: u64) -> u8 {
        let leader = self.setup.pfc_generator;
        let port = &mut self.ports[e];
        let Some(wd) = port.watchdog.as_mut() else {
            return 0;
        };
        let iface = port.io.name();
        wd.tick(now, received_pause, |ev| {
            if !leader {
                return;
            }
            match ev {
                WatchdogEvent::Storm {
                    priority,
                    paused_since,
                } => tracing::warn!(
                    iface,
                    priority,
                    paused_ms = (now - paused_since) / 1_000_000,
                    "PFC storm detected"
                ),
                WatchdogEvent::Restored {
                    priority,
                    lasted_ns,
                } => tracing::info!(
                    iface,
                    priority,
                    lasted_ms = lasted_ns / 1_000_000,
                    "PFC storm over"
                ),
            }
        });
        let (overridden, dropping, stormed) = (wd.overridden(), wd.dropping(), wd.stormed());
        let storms = *wd.storms();
        for (p, storms) in storms.into_iter().enumerate() {
            let c = &self.stats.ports[e];
            c.watchdog_storms[p].set(storms);
            c.watchdog_stormed[p].set(u64::from(stormed & (1 << p) != 0));
            if dropping & (1 << p) != 0 {
                while let Some(q) = self.ports[e].egress.pop(p) {
                    self.release_queued(p, &q);
                    let ingress = usize::from(q.ingress);
                    self.discard_data(ingress, q.frame(), DropReason::Watchdog, p);
                }
            }
        }
        overridden
    }

    /// The earliest time something can happen without a frame arriving.
    pub fn next_deadline(&self, now: u64) -> Option<u64> {
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| next = Some(next.map_or(t, |n: u64| n.min(t)));
        for e in 0..self.ports.len() {
            if !self.ports[e].ctrl.is_empty() {
                consider(now);
            }
            if self.ports[e].egress.is_empty() {
                continue;
            }
            if !self.ports[e].shared.link_up() {
                // Held for a dead link: look again soon (the carrier watch has no wake-up).
                consider(now + LINK_DOWN_RECHECK_NS);
                continue;
            }
            let (received_pause, resume) = self.ports[e].shared.paused(now);
            let overridden = self.ports[e]
                .watchdog
                .as_ref()
                .map_or(0, PfcWatchdog::overridden);
            let waiting = self.ports[e]
                .credit
                .waiting(self.ports[e].egress.queued(), |p| {
                    self.ports[e].egress.front(p).map(|q| q.len)
                });
            if self.ports[e]
                .egress
                .select((received_pause & !overridden) | waiting)
                .is_some()
            {
                consider(self.ports[e].shaper.wake_at());
            } else if let Some(r) = resume {
                consider(r);
            }
        }
        for port in &self.ports {
            let timers = [
                port.watchdog.as_ref().and_then(PfcWatchdog::next_deadline),
                port.agent.as_ref().map(LinkAgent::next_deadline),
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
        for port in &mut self.ports {
            while let Some(q) = port.ctrl.pop() {
                self.pool.release(q.idx);
            }
        }
        for e in 0..self.ports.len() {
            for prio in 0..PRIORITIES {
                while let Some(q) = self.ports[e].egress.pop(prio) {
                    self.release_queued(prio, &q);
                    let ingress = usize::from(q.ingress);
                    self.discard_data(ingress, q.frame(), DropReason::Shutdown, prio);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        dataplane::{
            mem_port::{mem_link, MemPeer},
            stats::Counter,
        },
        wire::{MacAddr, TestFrame, TestFrameView},
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
                linkup: None,
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
        let mut pause = [0u8; 60];
        MacControl::Pause { quanta: 1000 }
            .emit_frame(MacAddr([2, 0, 0, 0, 0, 3]), &mut pause)
            .unwrap();
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
