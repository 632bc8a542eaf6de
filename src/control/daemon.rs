//! `lossless run`: attaches XDP, opens every worker's ports, runs the forwarding workers and
//! the control-plane loop (tokio), and on SIGINT/SIGTERM stops the workers, releases their
//! queues and detaches XDP before reporting.

use std::{
    path::Path,
    sync::{mpsc, Arc},
    thread::JoinHandle,
    time::Duration,
};

use serde::Serialize;

use super::{
    carrier,
    link_monitor::LinkMonitor,
    logging,
    metrics::{self, DaemonCollector, Liveness},
    reload::ReloadLog,
    shutdown::Shutdown,
    signals::{self, StopSignals},
    status::{self, StatusSource},
    systemd::Notifier,
};
use crate::linkup::{shared::LinkShared, worker::ForwardingAgent};
use crate::{
    config::{
        plan::{uncovered_queues_reason, IfaceFacts},
        ConfigError, Plan,
    },
    dataplane::{
        agent::PortAgent,
        clock::now_ns,
        forward::{ingress_policy, ForwardSetup, ForwardWorker, PortSetup, WorkerError},
        handoff::handoff_ends,
        iface_lock,
        leader_bell::LeaderBell,
        open::{attach_for, open_worker_ports, uncovered_queues, Attached, OpenError, Queues},
        port::{iface_mtu, iface_rx_queues, Stamping, TimeStamping},
        sched::{
            self, Decision, Permission, RealtimeError, RealtimeMode, Request, WorkerRealtime,
            WorkerSched,
        },
        settings::SettingsCell,
        shared::SharedPort,
        stall_guard::{GuardSetup, GuardedPort, GuardedWorker, StallGuard},
        stats::{snapshot, PortSnapshot, WorkerStats},
        xdp_prog::{ifindex, Steering},
    },
    fc::{
        plan::{pfc_mask, PrioPlan},
        PRIORITIES,
    },
};

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Ports could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The configuration does not fit the interfaces as found at start.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// A worker failed.
    #[error("worker {worker}: {source}")]
    Worker {
        /// Worker index.
        worker: usize,
        /// The failure.
        source: WorkerError,
    },
    /// The control-plane runtime could not start.
    #[error("starting the control plane failed: {0}")]
    Runtime(std::io::Error),
    /// A worker panicked (a bug).
    #[error("worker {0} panicked")]
    Panic(usize),
    /// Real-time scheduling was required (`realtime = "on"`) and could not be had.
    #[error(transparent)]
    Realtime(#[from] RealtimeError),
    /// The control socket could not be bound.
    #[error(transparent)]
    Control(#[from] status::ControlError),
    /// A configured port's interface does not exist (yet): one clear error, before anything
    /// is attached.
    #[error(
        "port[{port}].iface: no interface {iface:?} in this network namespace (`ip link` lists \
         what exists; under systemd the service is restarted until it appears)"
    )]
    NoInterface {
        /// Index of the port in the configuration.
        port: usize,
        /// The interface name.
        iface: String,
    },
    /// AF_XDP refused to a worker (`backend = "auto"`) with several workers: AF_PACKET
    /// carries one.
    #[error(
        "daemon.workers = {workers}, but AF_XDP was refused (the warning above says why) and \
         AF_PACKET carries one worker: every AF_PACKET socket on an interface receives every \
         frame, so each worker would forward each frame again. Set `[daemon] workers = 1`, or \
         make AF_XDP work on the ports (`lossless doctor`)"
    )]
    PacketWorkers {
        /// `daemon.workers`.
        workers: usize,
    },
    /// The metrics address could not be bound.
    #[error("metrics.listen {addr}: {source}")]
    Metrics {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// What the daemon reports when it stops.
#[derive(Debug, Clone, Serialize)]
pub struct DaemonReport {
    /// Backend in use.
    pub backend: &'static str,
    /// Worker threads.
    pub workers: usize,
    /// Per-priority plan.
    pub priorities: [PrioPlan; PRIORITIES],
    /// Per-port counters summed over workers.
    pub ports: Vec<PortSnapshot>,
    /// Each worker thread's scheduling as it ran last, read as the stop began.
    pub worker_threads: Vec<WorkerSched>,
    /// Memory was locked (`mlockall`) for real-time workers.
    pub memory_locked: bool,
}

/// How the daemon stopped: what it counted, and the worker failure that stopped it, if one
/// did (the counts up to the failure are what tells the operator what got through).
#[derive(Debug)]
pub struct Stopped {
    /// The report of what was counted.
    pub report: DaemonReport,
    /// The worker failure (or panic) that stopped the daemon (`None`: a signal did).
    pub failure: Option<DaemonError>,
}

/// What a worker thread reports once it is set up, before it starts forwarding.
struct WorkerStart {
    worker: usize,
    tid: i32,
    /// Entering `SCHED_FIFO`, when asked for.
    realtime: std::io::Result<()>,
}

/// Sets the calling worker thread up: pins it to `core` and makes it `SCHED_FIFO` at
/// `realtime`'s priority, if given.
fn set_up_worker_thread(core: Option<usize>, realtime: Option<u8>) -> std::io::Result<()> {
    if let Some(c) = core {
        if let Err(e) = sched::pin_this_thread(c) {
            tracing::warn!(core = c, error = %e, "pinning failed");
        }
    }
    realtime.map_or(Ok(()), sched::enter_fifo)
}

/// Checks `plan` (read from `file`) against the ports' interfaces and the CPUs this process
/// may run on as they are now, as `run` does at start ([`Plan::check_interfaces`]: the MTU a
/// port takes, the credit and PFC settings against its longest frame, a worker for every RX
/// queue, `daemon.cores` within the affinity); an interface that does
/// not exist is left out (`run` has refused it before, [`check_interfaces`]). Returns each
/// port's longest frame (`None`: no interface and no `mtu`).
fn check_against_interfaces(plan: &Plan, file: &str) -> Result<Vec<Option<u32>>, ConfigError> {
    let facts: Vec<Option<IfaceFacts>> = plan
        .ports
        .iter()
        .map(|p| {
            ifindex(&p.iface).map(|_| IfaceFacts {
                mtu: iface_mtu(&p.iface),
                rx_queues: iface_rx_queues(&p.iface),
            })
        })
        .collect();
    plan.check_interfaces(&facts, &sched::allowed_cpus(), file)
}

/// What `check-config` finds of this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCheck {
    /// Each port's longest frame as start takes it (`None`: not known).
    pub max_frames: Vec<Option<u32>>,
    /// What `run` would only log: `realtime = "auto"` that is not permitted.
    pub warnings: Vec<String>,
}

/// Checks `plan` (read from `file`) against this host as `run` does at start, in its order,
/// and with its errors: a port's interface that does not exist ([`check_interfaces`]),
/// `realtime = "on"` without the permission ([`check_realtime`]), then the interfaces and
/// CPUs (`Plan::check_interfaces` with what is read of them).
pub fn check_host(plan: &Plan, file: &str) -> Result<HostCheck, DaemonError> {
    check_interfaces(plan)?;
    let mut warnings: Vec<String> = check_realtime(plan)?.into_iter().collect();
    warnings.extend(ports_in_use(plan));
    Ok(HostCheck {
        max_frames: check_against_interfaces(plan, file)?,
        warnings,
    })
}

/// A warning for each port whose interface another lossless process holds
/// ([`iface_lock::holder`]): `run` would be refused while it runs. Not an error: on
/// `systemctl reload` the holder is the daemon being reloaded, which may go on.
fn ports_in_use(plan: &Plan) -> Vec<String> {
    plan.ports
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let pid = iface_lock::holder(ifindex(&p.iface)?)?;
            (pid != std::process::id()).then(|| {
                format!(
                    "port[{i}].iface {} is in use by lossless pid {pid}: `run` is refused while \
                     that process runs (a reload of it is not)",
                    p.iface
                )
            })
        })
        .collect()
}

/// `[daemon] realtime` as a request for real-time scheduling.
fn realtime_request(plan: &Plan) -> Request {
    Request {
        mode: plan.daemon.realtime,
        priority: plan.daemon.realtime_priority,
        setting: "daemon.realtime",
    }
}

/// Decides `[daemon] realtime` for this process by the rule `run` decides it with
/// ([`sched::decide`], which [`sched::prepare`] logs), without logging or applying anything:
/// `on` without the permission is the error `run` stops with; `auto` without it is the
/// warning returned (the workers would run `SCHED_OTHER`).
pub fn check_realtime(plan: &Plan) -> Result<Option<String>, RealtimeError> {
    let req = realtime_request(plan);
    if req.mode == RealtimeMode::Off {
        return Ok(None);
    }
    let missing = match Permission::of_this_thread() {
        Ok(perm) => match sched::decide(&req, &perm)? {
            Decision::NotPermitted { missing } => missing,
            Decision::Fifo { .. } | Decision::Off => return Ok(None),
        },
        Err(source) if req.mode == RealtimeMode::On => {
            return Err(RealtimeError::Probe {
                setting: req.setting,
                source,
            })
        }
        Err(e) => format!("cannot read this process's capabilities and limits: {e}"),
    };
    Ok(Some(format!(
        "daemon.realtime = \"auto\" is not permitted here, so the workers would run normal \
         (SCHED_OTHER) scheduling: {missing}"
    )))
}

/// Fails with one clear error naming the field when a port's interface does not exist.
pub fn check_interfaces(plan: &Plan) -> Result<(), DaemonError> {
    match plan
        .ports
        .iter()
        .enumerate()
        .find(|(_, p)| ifindex(&p.iface).is_none())
    {
        Some((port, p)) => Err(DaemonError::NoInterface {
            port,
            iface: p.iface.clone(),
        }),
        None => Ok(()),
    }
}

/// Starts the stall guard (`daemon.stall_guard`) over the workers and ports: it reads the XDP
/// program's counters, so there is none on AF_PACKET. Without it the daemon still runs (a
/// warning says why).
fn start_stall_guard(
    plan: &Plan,
    attached: Option<&Attached>,
    shared: &[Arc<SharedPort>],
    workers: &[Arc<WorkerStats>],
    live: &Arc<SettingsCell>,
    realtime: Option<u8>,
) -> Option<StallGuard> {
    let stall_ns = plan.stall_guard_ns?;
    let Some(att) = attached else {
        tracing::info!("no stall guard: the AF_PACKET backend has no XDP counters to watch");
        return None;
    };
    let setup = GuardSetup {
        stall_ns,
        ports: plan
            .ports
            .iter()
            .zip(&att.programs)
            .zip(shared)
            .map(|((p, prog), shared)| GuardedPort {
                iface: p.iface.clone(),
                speed_bps: p.speed_bps,
                ingress: prog.ingress().clone(),
                shared: shared.clone(),
                bells: prog.bells().unwrap_or_else(|e| {
                    tracing::warn!(iface = %p.iface, error = %e, "stall guard: no doorbell");
                    Vec::new()
                }),
            })
            .collect(),
        workers: workers
            .iter()
            .enumerate()
            .map(|(w, stats)| GuardedWorker {
                stats: stats.clone(),
                queue: w as u32,
                core: plan.daemon.cores.get(w).copied(),
            })
            .collect(),
        live: live.clone(),
        realtime,
    };
    match StallGuard::spawn(setup) {
        Ok(g) if g.threads() == 0 => {
            tracing::warn!(
                "no stall guard: it needs a CPU no worker is pinned to, and at least two CPUs"
            );
            None
        }
        Ok(g) => {
            tracing::info!(
                stall_us = stall_ns / 1000,
                threads = g.threads(),
                "stall guard on"
            );
            Some(g)
        }
        Err(e) => {
            tracing::warn!(error = %e, "no stall guard: a stalled worker's PFC waits for it");
            None
        }
    }
}

/// Tells each port's XDP program how to classify its ingress, the longest frame it takes
/// (`max_frames`, per port, resolved at start) and which priorities it may drop when the RX
/// backlog is deep (the lossy ones of `plan`).
fn apply_ingress_policy(attached: Option<&Attached>, plan: &Plan, max_frames: &[u32]) {
    let Some(att) = attached else { return };
    for ((prog, port), &max_frame) in att.programs.iter().zip(&plan.ports).zip(max_frames) {
        let policy = ingress_policy(port.trust, max_frame, &plan.prios, plan.daemon.frames);
        if let Err(e) = prog.set_ingress_policy(policy) {
            tracing::warn!(error = %e, "XDP ingress policy not applied");
        }
    }
}

/// Reads the configuration again and publishes its reloadable part; refuses an invalid file
/// (the error says why). The ports' maximum frames stay those resolved at start
/// (`max_frames`). Returns the settings the file changes that wait for a restart.
fn reload_config(
    running: &Plan,
    path: &Path,
    live: &SettingsCell,
    attached: Option<&Attached>,
    max_frames: &[u32],
) -> Result<Vec<String>, String> {
    let new = match Plan::load(path) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "reload refused; keeping the running configuration");
            return Err(e.to_string());
        }
    };
    let pending: Vec<String> = running
        .restart_only_changes(&new)
        .into_iter()
        .map(String::from)
        .collect();
    for field in &pending {
        tracing::warn!(
            field,
            "changed in the file but only takes effect after a restart"
        );
    }
    let new = running.reloadable(&new);
    // Of the plan that runs: the running pool and stall guard, not the file's restart-only
    // values.
    for w in &new.warnings {
        tracing::warn!("{w}");
    }
    if let Err(e) = logging::apply_config_filter(new.daemon.log.as_deref()) {
        tracing::warn!(error = %e, "log filter not applied");
    }
    apply_ingress_policy(attached, &new, max_frames);
    let mut settings = new.live_settings();
    // The headroom and round trips measured at link-up stay until the next measurement; each
    // PFC priority divides its buffer as reloaded by the measured headroom.
    let running = live.get();
    settings.measured = running.measured;
    settings.rtt_ns = running.rtt_ns;
    settings.model = running.model;
    if settings == live.get() {
        tracing::info!("configuration reloaded: no live setting changed");
        return Ok(pending);
    }
    live.publish(settings);
    tracing::info!(priorities = ?new.prios, watchdog = ?new.watchdog, "configuration reloaded");
    Ok(pending)
}

/// What is wrong with port `port` (`iface`) receiving on `active` RX queues while `workers`
/// workers bind the first `workers`, and the remedies.
fn uncovered_message(port: usize, iface: &str, active: u32, workers: u32) -> String {
    format!(
        "port[{port}].iface: {}",
        uncovered_queues_reason(iface, active, workers)
    )
}

/// Logs the drops counted since the last look, per port and reason, at most once per
/// [`DropLog::INTERVAL`]: a hostile or broken peer shows in the log without a line per frame.
///
/// It also looks again at what `run` checked at start: that every RX queue of a port has a
/// worker. A port's queues can change under a running daemon (`ethtool -L`); frames on one
/// added since go to the kernel, never forwarded. On a NIC the XDP program counts them
/// (`redirect_failed`), and from the first look on, while the workers run, they are the
/// port's `unsteered` drops ([`SharedPort::set_unsteered`]); before it the program also
/// counts what arrived between its attach and the sockets, and after the last what arrives
/// once the workers are gone, which were never theirs. On veth a queue added under a program
/// runs none, so only the channel count tells: an error in the log, once per change.
///
/// And it tells, once per port, of frames the program redirected with no room for its
/// metadata (`no_meta_area`): a driver without an XDP metadata area. Such a frame carries no
/// arrival stamp and is not counted into the port's RX backlog (the worker could not take it
/// off again), so what waits in the RX ring is invisible to XOFF and to the stall guard's
/// doorbell on that port; only the fill ring's watch and the queued bytes are left to pause
/// the peer. The metric alone would leave an operator to find that out from late pauses.
struct DropLog {
    seen: Vec<std::collections::BTreeMap<String, u64>>,
    /// Per port, the program's `redirect_failed` at the first look.
    unsteered_base: Vec<Option<u64>>,
    /// Per port, the RX queue count last reported beyond the workers.
    uncovered: Vec<Option<u32>>,
    /// Per port, whether frames without a metadata area were told of.
    no_meta_told: Vec<bool>,
    workers: u32,
}

impl DropLog {
    const INTERVAL: Duration = Duration::from_secs(5);

    fn new(ports: usize, workers: usize) -> Self {
        DropLog {
            seen: vec![Default::default(); ports],
            unsteered_base: vec![None; ports],
            uncovered: vec![None; ports],
            no_meta_told: vec![false; ports],
            workers: workers as u32,
        }
    }

    /// Whether `no_meta` frames without a metadata area on `port` are news: the first look
    /// that finds any, once per port.
    fn no_meta_news(&mut self, port: usize, no_meta: u64) -> bool {
        let told = &mut self.no_meta_told[port];
        let news = no_meta > 0 && !*told;
        *told |= news;
        news
    }

    /// Where the workers run AF_XDP, reads the ports' XDP programs `xdp` (in port order) into
    /// `shared` and looks at their RX queues.
    fn look_at_programs(&mut self, xdp: Option<&Attached>, shared: &[Arc<SharedPort>]) {
        let programs = xdp.map_or(&[][..], |a| &a.programs[..]);
        for (port, (prog, shared)) in programs.iter().zip(shared).enumerate() {
            let iface = prog.iface();
            let counters = prog.counters();
            let failed = counters.redirect_failed;
            if self.no_meta_news(port, counters.no_meta) {
                tracing::warn!(
                    iface,
                    frames = counters.no_meta,
                    "port[{port}]: the driver gives the XDP program no metadata area for these \
                     frames: they carry no arrival stamp and are not in the RX backlog, so XOFF \
                     and the stall guard do not see them waiting in the RX ring; this port's \
                     lossless priorities are paused on the fill ring's watch and the queued \
                     bytes alone (metric lossless_xdp_rx_metadata_total{{result=\"no_meta_area\"}})"
                );
            }
            let base = *self.unsteered_base[port].get_or_insert(failed);
            shared.set_unsteered(failed.saturating_sub(base));
            let queues = uncovered_queues(iface, self.workers);
            if let Some(n) = queues.filter(|_| queues != self.uncovered[port]) {
                let what = uncovered_message(port, iface, n, self.workers);
                tracing::error!("since start, {what}");
            }
            self.uncovered[port] = queues;
        }
    }

    /// Logs what `snaps` counts since the last look.
    fn log(&mut self, snaps: &[PortSnapshot]) {
        for (seen, s) in self.seen.iter_mut().zip(snaps) {
            for (reason, &count) in &s.drops {
                let before = seen.insert(reason.clone(), count).unwrap_or(0);
                if count > before {
                    tracing::warn!(iface = %s.iface, reason = %reason, new = count - before, total = count, "frames dropped");
                }
            }
        }
    }
}

/// The forwarding threads. However `run` ends they are stopped and joined before XDP is
/// detached: by [`Workers::join`] on the way out, or when dropped on an early error return
/// (declared after the attachment, so dropped before it). Then each port whose link agent
/// sent an LLDPDU sends the TTL-0 one, so its neighbour forgets it now rather than after the
/// TTL (802.1AB's shutdown LLDPDU).
struct Workers {
    shutdown: Arc<Shutdown>,
    handles: Vec<JoinHandle<Result<(), WorkerError>>>,
    /// Each port's interface and link-up exchange, for the shutdown LLDPDU.
    links: Vec<(String, Arc<LinkShared>)>,
}

impl Workers {
    /// Triggers the shutdown, joins every worker and returns the first failure.
    fn join(mut self) -> Option<DaemonError> {
        self.stop()
    }

    fn stop(&mut self) -> Option<DaemonError> {
        self.shutdown.trigger();
        let mut failure = None;
        for (w, h) in self.handles.drain(..).enumerate() {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(source)) => {
                    failure = failure.or(Some(DaemonError::Worker { worker: w, source }))
                }
                Err(_) => failure = failure.or(Some(DaemonError::Panic(w))),
            }
        }
        // Only now: the leader's agents sent LLDPDUs until it ended, and the last word must be
        // the TTL-0 one. Each is taken when sent, so a second stop sends nothing.
        for (iface, link) in &self.links {
            match link.send_shutdown_lldpdu(iface) {
                Ok(true) => tracing::info!(
                    iface,
                    "TTL-0 LLDPDU sent: the LLDP neighbour forgets this port now"
                ),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(iface, error = %e, "shutdown LLDPDU not sent: the LLDP neighbour keeps this port until its TTL runs out")
                }
            }
        }
        failure
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A timer that first fires one `period` from now, and after a stall goes on from when it
/// fired rather than catching up.
fn every(period: Duration) -> tokio::time::Interval {
    let mut i = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

/// The next tick of `timer`, or never if there is none.
async fn tick(timer: &mut Option<tokio::time::Interval>) {
    match timer {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Runs the daemon until SIGINT/SIGTERM or until a worker ends (fails), then drains: see
/// [`super::shutdown`] for what is waited for and how long. On SIGHUP the configuration at
/// `config_path` is read again: the reloadable settings are applied live; an invalid file is
/// refused and the running configuration kept. The caller has checked that the ports'
/// interfaces exist ([`check_interfaces`]). Once the workers ran, the report comes back even
/// when one failed, with the failure ([`Stopped`]); an error is what stopped it before.
pub fn run(plan: &Plan, config_path: &Path) -> Result<Stopped, DaemonError> {
    let d = &plan.daemon;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()
        .map_err(DaemonError::Runtime)?;
    // Before anything is attached, so a stop from now on goes through the drain.
    let (mut stops, mut reloads_asked) = {
        let _rt = rt.enter();
        (
            StopSignals::register().map_err(DaemonError::Runtime)?,
            signals::reloads().map_err(DaemonError::Runtime)?,
        )
    };
    let shutdown = Arc::new(Shutdown::default());
    if let Err(e) = logging::apply_config_filter(d.log.as_deref()) {
        tracing::warn!(error = %e, "log filter not applied");
    }
    let realtime_request = realtime_request(plan);
    // Decided before anything is attached: `on` without permission stops here.
    let realtime = sched::prepare(&realtime_request)?;
    // What the workers' policy follows; real-time from the start if a priority is lossless.
    let worker_realtime = realtime.map(|priority| WorkerRealtime {
        priority,
        always: d.realtime == RealtimeMode::On,
    });
    let lossless_at_start = plan.prios.iter().any(PrioPlan::lossless);
    if worker_realtime.is_some_and(|r| !r.wanted(lossless_at_start)) {
        tracing::info!(
            "no priority is lossless, so the workers run normal (SCHED_OTHER) scheduling until \
             a reload makes one lossless (realtime = \"on\" keeps them real-time regardless)"
        );
    }
    if d.busy_poll && worker_realtime.is_some_and(|r| r.wanted(lossless_at_start)) {
        sched::warn_of_busy_polling();
    }
    let live = Arc::new(SettingsCell::new(plan.live_settings()));
    let links: Vec<Arc<LinkShared>> = plan.ports.iter().map(|_| Arc::default()).collect();
    let ifaces: Vec<String> = plan.ports.iter().map(|p| p.iface.clone()).collect();
    // Before anything is attached, the configuration against the interfaces as they are now
    // (the same check as `check-config`'s): each port's longest frame, its `mtu` else the
    // interface's MTU, which the backend must carry and the credit and PFC settings fit; and
    // a worker for every RX queue of every port (worker w binds queue w: a frame on another
    // would go to the kernel, never forwarded).
    let file = config_path.display().to_string();
    let max_frames: Vec<u32> = check_against_interfaces(plan, &file)?
        .into_iter()
        // A port whose interface went away since `check_interfaces`: what the backend carries.
        .map(|m| m.unwrap_or(d.backend.max_frame()))
        .collect();
    for (p, max_frame) in plan.ports.iter().zip(&max_frames) {
        tracing::info!(iface = %p.iface, max_frame, "longer frames are dropped as oversize");
    }
    let steering = Steering {
        forward_all: true,
        test_udp_port: 0,
        sfc_udp_port: 0,
    };
    let attached = attach_for(d.backend, &ifaces, d.xdp_mode, steering).map_err(OpenError::from)?;
    apply_ingress_policy(attached.as_ref(), plan, &max_frames);
    let shared: Vec<Arc<SharedPort>> = ifaces.iter().map(|_| Arc::default()).collect();
    let mut all_stats = Vec::new();
    let mut workers = Workers {
        shutdown: shutdown.clone(),
        handles: Vec::new(),
        links: ifaces.iter().cloned().zip(links.iter().cloned()).collect(),
    };
    let mut opened = Vec::new();
    for w in 0..d.workers {
        opened.push(open_worker_ports(
            &ifaces,
            Queues::One(w as u32),
            d.frames,
            max_frames.iter().copied().max().unwrap_or(0),
            d.backend,
            attached.as_ref(),
        )?);
    }
    // Each worker falls back by itself (`auto`), also after the program attached: a worker on
    // AF_PACKET beside others would forward every frame again.
    let backend = opened[0].backend;
    if d.workers > 1 && opened.iter().any(|o| o.backend == "af_packet") {
        return Err(DaemonError::PacketWorkers { workers: d.workers });
    }
    // The programs steer to the workers' sockets only over AF_XDP: what they count (and the
    // RX queues they cover) means nothing to AF_PACKET workers.
    let steering_programs = attached.as_ref().filter(|_| backend == "af_xdp");
    let time_stamping: Vec<TimeStamping> = opened[0]
        .ports
        .iter()
        .map(|p| {
            // What the workers' link-up agents will get (they open the same socket).
            let tx = match crate::linkup::tx_stamp::TxStamper::open(
                p.name(),
                crate::linkup::tx_stamp::DATAPLANE_STAMP_TIMEOUT,
            ) {
                Ok(_) => Stamping::Kernel,
                Err(_) => Stamping::User,
            };
            TimeStamping::of(p.as_ref(), tx)
        })
        .collect();
    // Locked once every pool is mapped, so the pools are locked too (and a memlock limit
    // shows here as a warning rather than as a pool that cannot be mapped).
    let memory_locked = realtime.is_some() && sched::lock_memory();
    let (started_tx, started) = mpsc::channel();
    // Link-up runs on the leader: the others hand it what its agents take.
    // With several workers, PFC frames may reach one other than the leader, which runs the
    // congestion points: it rings the leader awake.
    let leader_bell = match d.workers {
        1 => None,
        _ => Some(Arc::new(LeaderBell::new().map_err(DaemonError::Runtime)?)),
    };
    let mut handoffs = match plan.linkup {
        Some(_) => handoff_ends(d.workers),
        None => (0..d.workers).map(|_| None).collect(),
    }
    .into_iter();
    for (w, ports) in opened.into_iter().enumerate() {
        let stats = Arc::new(WorkerStats::new(ifaces.len()));
        all_stats.push(stats.clone());
        let setup = ForwardSetup {
            ports: plan
                .ports
                .iter()
                .zip(&max_frames)
                .map(|(p, &max_frame)| PortSetup {
                    speed_bps: p.speed_bps,
                    trust: p.trust,
                    pause_quanta: p.pause_quanta,
                    credit: p.credit,
                    max_frame,
                })
                .collect(),
            prios: plan.prios,
            pfc_generator: w == 0,
            watchdog: plan.watchdog,
            sfc: plan.sfc,
            live: Some(live.clone()),
            rate_share: 1.0 / d.workers as f64,
            busy_poll: d.busy_poll,
            credit: plan.credit,
            headroom: plan.headroom,
        };
        // Link-up runs on the leader worker, which receives every port's control frames.
        let agents = ports
            .ports
            .iter()
            .zip(&links)
            .map(|(port, link)| -> Option<Box<dyn PortAgent>> {
                let l = plan.linkup.filter(|_| w == 0)?;
                Some(Box::new(ForwardingAgent::new(
                    &l,
                    link.clone(),
                    port.mac(),
                    port.name(),
                    pfc_mask(&plan.prios),
                    now_ns(),
                )))
            })
            .collect();
        let worker = ForwardWorker::new(
            ports.pool,
            ports.ports,
            shared.clone(),
            stats,
            setup,
            now_ns(),
        )
        .with_agents(agents)
        .with_handoff(handoffs.next().flatten())
        .with_leader_bell(leader_bell.clone());
        let core = d.cores.get(w).copied();
        let required = d.realtime == RealtimeMode::On;
        let started = started_tx.clone();
        let shutdown = shutdown.clone();
        let handle = std::thread::Builder::new()
            .name(format!("lossless-w{w}"))
            .spawn(move || {
                // However this worker ends, the daemon stops.
                let shutdown = shutdown.trigger_on_drop();
                let fifo = worker_realtime.and_then(|r| r.now(lossless_at_start));
                let setup = set_up_worker_thread(core, fifo);
                let forward = setup.is_ok() || !required;
                let worker = worker.with_realtime(worker_realtime, fifo.is_some() && setup.is_ok());
                let _ = started.send(WorkerStart {
                    worker: w,
                    tid: sched::this_thread_id(),
                    realtime: setup,
                });
                if forward {
                    worker.run(shutdown.flag())
                } else {
                    Ok(())
                }
            })
            .map_err(DaemonError::Runtime)?;
        workers.handles.push(handle);
    }
    drop(started_tx);
    let mut tids = vec![0; d.workers];
    let mut refused = None;
    // A worker that dies before reporting closes the channel early; the loop below sees it.
    for s in started.iter().take(d.workers) {
        tids[s.worker] = s.tid;
        let Err(source) = s.realtime else { continue };
        let e = RealtimeError::Apply {
            setting: realtime_request.setting,
            priority: d.realtime_priority,
            source,
        };
        if d.realtime == RealtimeMode::On {
            refused = refused.or(Some(e));
        } else {
            tracing::warn!(worker = s.worker, error = %e, "real-time scheduling refused: the worker runs SCHED_OTHER");
        }
    }
    if let Some(e) = refused {
        return Err(e.into()); // `workers` stops and joins them
    }
    let worker_threads: Vec<WorkerSched> = tids
        .iter()
        .enumerate()
        .map(|(w, &tid)| WorkerSched::read(w, tid))
        .collect();
    let stall_guard = start_stall_guard(
        plan,
        attached.as_ref(),
        &shared,
        &all_stats,
        &live,
        realtime,
    );
    let watched = ifaces
        .iter()
        .zip(&shared)
        .map(|(iface, s)| carrier::Watched::new(iface.clone(), s.clone()))
        .collect();
    let carrier_watch = carrier::spawn(watched).map_err(DaemonError::Runtime)?;
    let metrics_listener = match plan.metrics_listen {
        None => None,
        Some(addr) => {
            let l = std::net::TcpListener::bind(addr)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|source| DaemonError::Metrics { addr, source })?;
            Some(l)
        }
    };
    let reloads = Arc::new(ReloadLog::started());
    // Each port's XDP program (none on AF_PACKET), for its counters in metrics and status.
    let xdp_programs = attached.as_ref().map_or(Vec::new(), |a| a.programs.clone());
    let registry = Arc::new(metrics::registry(DaemonCollector {
        ifaces: ifaces.clone(),
        live: live.clone(),
        workers: all_stats.clone(),
        worker_tids: tids.clone(),
        reloads: reloads.clone(),
        shared: shared.clone(),
        links: links.clone(),
        time_stamping: time_stamping.clone(),
        xdp: xdp_programs.clone(),
    }));
    let liveness = Arc::new(Liveness::new(all_stats.clone(), metrics::HEALTHZ_STALLED));
    let control_listener = match &plan.control_socket {
        None => None,
        Some(path) => Some(status::bind(path)?),
    };
    let status_source = Arc::new(StatusSource {
        ports: plan.ports.clone(),
        live: live.clone(),
        shared: shared.clone(),
        workers: all_stats.clone(),
        backend,
        started_ns: now_ns(),
        links: links.clone(),
        worker_tids: tids,
        realtime: (d.realtime, d.realtime_priority),
        reloads: reloads.clone(),
        time_stamping,
        xdp: xdp_programs,
    });
    let scheduling: Vec<String> = worker_threads.iter().map(|t| t.to_string()).collect();
    tracing::info!(workers = d.workers, backend, ports = ?ifaces, metrics = ?plan.metrics_listen, scheduling = ?scheduling, memory_locked, "ready");
    let notifier = Notifier::from_env();
    notifier.notify(&format!(
        "READY=1\nSTATUS=forwarding {} <-> {}",
        ifaces[0], ifaces[1]
    ));
    // A worker that did not move between two pings is wedged: the ping is withheld. (Half
    // the period: a tick that comes a little early still finds the heartbeat it last saw
    // older than that.)
    let watchdog_liveness = Liveness::new(
        all_stats.clone(),
        notifier
            .watchdog_interval()
            .map_or(metrics::HEALTHZ_STALLED, |p| p / 2),
    );
    let mut drop_log = DropLog::new(ifaces.len(), d.workers);
    let snapshots = || {
        let refs: Vec<&WorkerStats> = all_stats.iter().map(|s| s.as_ref()).collect();
        let now = now_ns();
        ifaces
            .iter()
            .enumerate()
            .map(|(i, iface)| snapshot(iface, i, &refs, &shared[i], now))
            .collect::<Vec<PortSnapshot>>()
    };
    let worker_threads = rt.block_on(async {
        let mut servers = tokio::task::JoinSet::new();
        if let Some(l) = metrics_listener {
            match tokio::net::TcpListener::from_std(l) {
                Ok(l) => {
                    servers.spawn(metrics::serve(l, registry, liveness, shutdown.clone()));
                }
                Err(e) => tracing::error!(error = %e, "metrics endpoint unavailable"),
            }
        }
        if let Some(l) = control_listener {
            match tokio::net::UnixListener::from_std(l) {
                Ok(l) => {
                    servers.spawn(status::serve(l, status_source, shutdown.clone()));
                }
                Err(e) => tracing::error!(error = %e, "control socket unavailable"),
            }
        }
        // With link-up on, the link monitor looks at what wakes nobody: the carrier (netlink),
        // the measurements worker 0 publishes and the counters its software terms fold. It
        // keeps a 50 ms look; the stop, reloads and the other duties below are events and
        // timers of their own.
        let mut monitor = LinkMonitor::new(plan, &max_frames, &links);
        let mut link_look = every(Duration::from_millis(50));
        // The systemd watchdog is fed only while every worker's loop advances.
        let mut watchdog = notifier.watchdog_interval().map(every);
        let mut drops = every(DropLog::INTERVAL);
        let progress = Duration::from_secs(d.stats_interval_s);
        let mut progress = (!progress.is_zero()).then(|| every(progress));
        loop {
            tokio::select! {
                () = stops.recv() => break,
                // A worker ended (it fails or panics; none ends on its own otherwise).
                () = shutdown.triggered() => break,
                Some(()) = reloads_asked.recv() => reloads.record(reload_config(
                    plan,
                    config_path,
                    &live,
                    attached.as_ref(),
                    &max_frames,
                )),
                _ = link_look.tick(), if monitor.is_some() => {
                    if let Some(m) = monitor.as_mut() {
                        m.tick(&live, snapshots);
                    }
                }
                () = tick(&mut watchdog) => {
                    if watchdog_liveness.check() {
                        notifier.notify("WATCHDOG=1");
                    } else {
                        tracing::error!("a worker stalled: withholding the systemd watchdog ping");
                    }
                }
                _ = drops.tick() => {
                    drop_log.look_at_programs(steering_programs, &shared);
                    drop_log.log(&snapshots());
                }
                () = tick(&mut progress) => {
                    for s in snapshots() {
                        tracing::info!(
                            iface = %s.iface, rx = s.rx_frames, tx = s.tx_frames,
                            pfc_tx = s.pfc_tx.iter().sum::<u64>(), pfc_rx = s.pfc_rx.iter().sum::<u64>(),
                            drops = s.drops.values().sum::<u64>(), "progress"
                        );
                    }
                }
            }
        }
        // The last look at what the programs could not steer while the workers ran.
        drop_log.look_at_programs(steering_programs, &shared);
        // What the workers ran last (a reload may have switched their policy), for the report;
        // a worker already gone keeps what it ran at start.
        let at_stop = worker_threads
            .into_iter()
            .map(|start| match WorkerSched::read(start.worker, start.tid) {
                now if now.policy == "unknown" => start,
                now => now,
            })
            .collect::<Vec<_>>();
        // The workers see the flag at their next loop turn and drain their queues.
        shutdown.trigger();
        notifier.notify("STOPPING=1");
        // Each server returns within `shutdown::DRAIN`.
        while servers.join_next().await.is_some() {}
        at_stop
    });
    let failure = workers.join();
    // Guarding the workers' drain too, it stops once they are done.
    drop(stall_guard);
    // (No look at the programs: the workers are gone, what arrives now is for no one.)
    drop_log.log(&snapshots());
    drop(carrier_watch);
    drop(attached); // detaches XDP
    if let Some(path) = &plan.control_socket {
        let _ = std::fs::remove_file(path);
    }
    Ok(Stopped {
        report: DaemonReport {
            backend,
            workers: d.workers,
            priorities: plan.prios,
            ports: snapshots(),
            worker_threads,
            memory_locked,
        },
        failure,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_without_a_metadata_area_are_told_once_per_port() {
        let mut log = DropLog::new(2, 1);
        assert!(!log.no_meta_news(0, 0), "none yet");
        assert!(log.no_meta_news(0, 3));
        assert!(!log.no_meta_news(0, 9), "told already");
        assert!(log.no_meta_news(1, 1), "the other port's are its own news");
    }
}
