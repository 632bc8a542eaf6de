//! Reading a configuration: TOML text into the file's serde types, then each section checked
//! into its part of the [`Plan`], one function a section; errors name the file, the field and
//! the reason.

use std::path::Path;

use super::{
    error::ConfigError,
    file::{
        ConfigFile, ControlSection, CreditSection, DaemonSection, HeadroomSection, LinkupSection,
        MetricsSection, PortSection, PrioMode, PrioritySection, SfcSection, SfcTransport,
        SizeValue, WatchdogSection,
    },
    plan::{LongestFrame, Plan, PortPlan, MAX_STD_FRAME},
};
use crate::{
    dataplane::{
        af_xdp::fill_target, open::Backend, pool::control_reserve, port::FillDepth,
        sched::MAX_PRIORITY, stall_guard::STALL_RANGE_NS,
    },
    fc::{
        adaptive::{notice_bound_ns, HeadroomSettings},
        credit_port::CreditTimers,
        ns_to_quanta,
        plan::{PfcPlan, PrioPlan, SfcPlan, SfcSettings},
        quanta_to_ns,
        sfc_guard::{SfcSourcePolicy, MAX_ALLOWED},
        watchdog::WatchdogConfig,
        PRIORITIES,
    },
    linkup::LinkupSettings,
    units,
    wire::{MacAddr, MIN_FRAME_LEN},
};

/// Smallest MTU a port may be configured with (IPv4's minimum).
const MIN_MTU: u32 = 68;
/// Default lossy limit per (ingress port, priority).
pub const DEFAULT_LOSSY_LIMIT: u64 = 512 * 1024;
/// Default PFC XOFF threshold.
pub const DEFAULT_XOFF: u64 = 128 * 1024;
/// Default PFC XON threshold.
pub const DEFAULT_XON: u64 = 64 * 1024;
/// Default PFC headroom.
pub const DEFAULT_HEADROOM: u64 = 256 * 1024;
/// Default SFC threshold on an egress queue.
pub const DEFAULT_SFC_THRESHOLD: u64 = 32 * 1024;
/// Default buffer of an SFC-only priority.
pub const DEFAULT_SFC_LIMIT: u64 = 1024 * 1024;
/// Default receive buffer of a credit priority.
pub const DEFAULT_CREDIT_LIMIT: u64 = 64 * 1024;
/// Largest buffer credits can advertise: 2048 blocks of 64 bytes.
pub const MAX_CREDIT_BUFFER: u64 = 2048 * 64;
/// Largest byte size a priority setting may have (256 TiB): far beyond any host's memory, and
/// small enough that sums of thresholds (XOFF + headroom, the buffer of all priorities times
/// the ports) and frame counts added to them cannot overflow.
pub const MAX_BUFFER_BYTES: u64 = 1 << 48;
pub use crate::units::MAX_DURATION_NS;

impl Plan {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Plan, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// Parses and validates TOML `text` (named `file` in errors).
    pub fn parse(text: &str, file: &str) -> Result<Plan, ConfigError> {
        let raw: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        validate(raw, file)
    }
}

/// Longest period between the daemon's progress lines, s.
const MAX_STATS_INTERVAL_S: u64 = 86_400;

/// What each worker's frame pool must hold for the configuration to be stored as written,
/// counted in frames (a pool frame holds one Ethernet frame whatever its size): the buffers
/// every AF_XDP socket keeps in its fill ring, the control frames the daemon must always be
/// able to build (PFC, SFCM, credit updates), and XOFF + headroom (the limit) of every
/// lossless priority of every ingress port: a buffer is per (ingress port, priority), the
/// frames it holds wait in the pool of the worker that received them, and in wire mode both
/// ports' buffers fill at once under congestion both ways (one worker receives them all
/// when there is one). Returns the frames needed with frames of `frame` bytes.
fn pool_needed(prios: &[PrioPlan; PRIORITIES], ports: usize, frames: u32, frame: u64) -> u64 {
    // (Only a configuration with a lossless priority is sized, and its fill rings are deep.)
    let fixed =
        ports as u64 * fill_target(frames, FillDepth::Deep) as u64 + control_reserve(frames) as u64;
    fixed
        + ports as u64
            * prios
                .iter()
                .filter(|p| p.lossless())
                .map(|p| p.limit.div_ceil(frame))
                .sum::<u64>()
}

/// Warns when the pool cannot hold the lossless buffers as configured (a PFC priority's
/// XOFF + headroom, another lossless priority's limit). Never refused: a pool running short
/// pauses upstream by itself (fill-ring starvation is congestion, for the worker and for the
/// stall guard of a stopped one), so such a configuration stays lossless, with less buffer in
/// bytes than the numbers say, as long as the workers and the guard run in time (real-time:
/// a fill ring of 1,024 buffers lasted less than a normal-priority worker's stalls beside the
/// daemon-bound flood of `tests/under_load.rs` and lost frames by hand); the warning
/// names the fields and what `daemon.frames` would hold it all.
fn check_pool(prios: &[PrioPlan; PRIORITIES], ports: usize, frames: u32) -> Option<String> {
    let names = (0..PRIORITIES)
        .filter(|&p| prios[p].lossless())
        .map(|p| format!("priority.{p}"))
        .collect::<Vec<_>>();
    if names.is_empty() {
        return None;
    }
    let (large, small) = (
        pool_needed(prios, ports, frames, MAX_STD_FRAME),
        pool_needed(prios, ports, frames, MIN_FRAME_LEN as u64),
    );
    let frames = u64::from(frames);
    if large > frames {
        Some(format!(
            "daemon.frames = {frames} cannot hold the buffers (XOFF + headroom with PFC, else limit) of {} \
             on both ports even in {MAX_STD_FRAME}-byte frames: the fill ring will pause upstream \
             before the configured bytes are reached (still lossless where the workers and the \
             stall guard run real-time); daemon.frames = {large} would hold them",
            names.join(", ")
        ))
    } else if small > frames {
        let bytes = ports as u64
            * prios
                .iter()
                .filter(|p| p.lossless())
                .map(|p| p.limit)
                .sum::<u64>();
        Some(format!(
            "daemon.frames = {frames} holds the buffers (XOFF + headroom with PFC, else limit) of {} \
             on both ports only in frames above {} bytes: smaller frames are paused by fill-ring \
             starvation first (still lossless where the workers and the stall guard run \
             real-time); daemon.frames = {small} would hold {MIN_FRAME_LEN}-byte frames",
            names.join(", "),
            bytes / frames.saturating_sub(pool_needed(prios, ports, frames as u32, u64::MAX)).max(1)
        ))
    } else {
        None
    }
}

/// The slowest port speed taken: 1 Mbit/s.
const MIN_PORT_SPEED_BPS: u64 = 1_000_000;

/// Warns, with `daemon.stall_guard = "off"`, what the PFC headroom then covers alone: nothing
/// pauses the sources of a worker kept off its CPU, and the headroom has no notice term, so
/// what arrives while a worker does not run must fit the headroom as configured (or as
/// observed after XOFFs); for an SFC-only priority, its limit above the threshold. Said in
/// time at the fastest port's speed, which is what an operator can hold against the stalls
/// of the host (milliseconds on a busy one: README, known limitations).
fn warn_unguarded(prios: &[PrioPlan; PRIORITIES], ports: &[PortPlan], out: &mut Vec<String>) {
    let fastest = ports.iter().map(|p| p.speed_bps).max().unwrap_or(0).max(1);
    let lasts = |bytes: u64| bytes as f64 * 8.0 * 1e6 / fastest as f64;
    let rate = crate::units::format_rate(fastest as f64);
    for (p, plan) in prios.iter().enumerate() {
        match (plan.pfc, plan.sfc) {
            (Some(pfc), _) => out.push(format!(
                "daemon.stall_guard is off: nothing pauses the sources of a worker kept off its \
                 CPU, and what arrives meanwhile must fit priority.{p}'s headroom of {} bytes, \
                 {:.0} us at {rate}",
                pfc.headroom,
                lasts(pfc.headroom),
            )),
            // The worker keeps the queue about at the threshold; the rest of the limit is
            // what a stall may fill.
            (None, Some(sfc)) => {
                let room = plan.limit.saturating_sub(sfc.threshold);
                out.push(format!(
                    "daemon.stall_guard is off: nothing sends SFC messages for a worker kept \
                     off its CPU, and what arrives meanwhile must fit priority.{p}'s limit \
                     above its sfc_threshold, {room} bytes, {:.0} us at {rate}",
                    lasts(room),
                ))
            }
            (None, None) => {}
        }
    }
}

/// Warns, with the stall guard on, where an SFC-only priority's limit above its threshold
/// (what a stall may fill: the worker keeps the queue about at the threshold) lasts less at
/// the fastest port's speed than a stall may go unnoticed ([`notice_bound_ns`]): frames
/// arriving at line rate overflow it before the guard's SFC messages go out. A PFC priority
/// needs no such check here: its headroom in force grows by what arrives in that time at the
/// rates seen, and `run` says when its buffer cannot hold that.
fn warn_sfc_outrun(
    prios: &[PrioPlan; PRIORITIES],
    ports: &[PortPlan],
    stall_guard_ns: u64,
    out: &mut Vec<String>,
) {
    let fastest = ports.iter().map(|p| p.speed_bps).max().unwrap_or(0).max(1);
    let notice_ns = notice_bound_ns(stall_guard_ns);
    let arrives = (u128::from(notice_ns) * u128::from(fastest) / 8_000_000_000) as u64;
    for (p, plan) in prios.iter().enumerate() {
        let Some(sfc) = plan.sfc.filter(|_| plan.pfc.is_none()) else {
            continue;
        };
        let room = plan.limit.saturating_sub(sfc.threshold);
        if room >= arrives {
            continue;
        }
        out.push(format!(
            "priority.{p}'s limit above its sfc_threshold, {room} bytes, lasts {:.0} us at {}, \
             less than the {:.0} us a stalled worker may go unnoticed (daemon.stall_guard \
             x 1.5): what arrives at that rate meanwhile overflows it before the stall guard's \
             SFC messages go out; a limit of {} bytes covers it (or a shorter stall_guard)",
            room as f64 * 8.0 * 1e6 / fastest as f64,
            crate::units::format_rate(fastest as f64),
            notice_ns as f64 / 1e3,
            sfc.threshold + arrives,
        ));
    }
}

impl Plan {
    /// What is valid in this plan but worth a look ([`Plan::warnings`]): the pool against the
    /// lossless buffers, what a stall may fill (with the stall guard off, or beyond an SFC
    /// limit with it on), credit buffers beyond the largest window, and pauses shorter than
    /// a worker can be counted on to refresh. A function of the plan alone, so that a reload
    /// says it of the plan it applies ([`Plan::reloadable`]), whose pool and stall guard are
    /// the running ones, not the file's.
    pub fn config_warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> =
            check_pool(&self.prios, self.ports.len(), self.daemon.frames)
                .into_iter()
                .collect();
        match self.stall_guard_ns {
            None => warn_unguarded(&self.prios, &self.ports, &mut warnings),
            Some(ns) => warn_sfc_outrun(&self.prios, &self.ports, ns, &mut warnings),
        }
        warn_credit_windows(&self.prios, &mut warnings);
        warn_short_pauses(&self.prios, &self.ports, &mut warnings);
        warnings
    }
}

/// The shortest PFC pause a port may send, ns. The leader worker sends the next XOFF (the
/// refresh) at half the pause ([`crate::fc::pfc`]), so the pause holds only if the worker
/// runs within that half. A worker woken from `poll()` takes about 43 us to run (DESIGN.md,
/// "Rates seen", on an idle vCPU; 4 us busy-polling): below twice that, rounded up to
/// 100 us, the refresh is late at a typical wake-up even on an idle host, and the source
/// resumes between most refreshes, into the headroom, while the generator counts it paused.
/// Refused, unless `pause_quanta` is already the most a PFC frame carries (65,535), whose
/// pause is this short only from 335 Gbit/s up: warned ([`SHORT_PAUSE_NS`]).
const MIN_PAUSE_NS: u64 = 100_000;

/// A PFC pause shorter than this is warned about, ns. Half of it, 500 us, covers a worker's
/// longest turns at normal priority on a busy host (p99 131-524 us on the lab VM,
/// [`crate::dataplane::pfc_headroom`]) and the stall guard's bound at its default (250 us x
/// 1.5 = 375 us: a worker that does not run for that long has its sources paused by the
/// guard instead). A shorter pause lapses whenever a turn runs longer than its half. The
/// default, 65,535 quanta, lasts less than this from 33.6 Gbit/s up: at 40 and 100 Gbit/s
/// the warning stands with the longest pause a frame carries, and says so.
const SHORT_PAUSE_NS: u64 = 1_000_000;

/// `ns` in words ("21 us").
fn us(ns: u64) -> String {
    format!("{} us", (ns as f64 / 1e3).round())
}

/// The time `quanta` last at `speed_bps`, in words ("21 us").
fn pause_words(quanta: u16, speed_bps: u64) -> String {
    us(quanta_to_ns(quanta, speed_bps))
}

/// Refuses a port whose PFC pause ([`MIN_PAUSE_NS`]) is shorter than a worker wakes up in,
/// where a PFC priority sends it and a larger `pause_quanta` could make it longer.
fn check_pauses(
    c: &Check,
    prios: &[PrioPlan; PRIORITIES],
    ports: &[PortPlan],
) -> Result<(), ConfigError> {
    if prios.iter().all(|p| p.pfc.is_none()) {
        return Ok(());
    }
    for (i, p) in ports.iter().enumerate() {
        let ns = quanta_to_ns(p.pause_quanta, p.speed_bps);
        if ns >= MIN_PAUSE_NS || p.pause_quanta == u16::MAX {
            continue;
        }
        let least = ns_to_quanta(MIN_PAUSE_NS, p.speed_bps);
        let ideal = ns_to_quanta(SHORT_PAUSE_NS, p.speed_bps);
        return Err(c.invalid(
            format!("port[{i}].pause_quanta"),
            format!(
                "{} quanta last {} at {}: the leader worker refreshes a pause at half its time, \
                 and {} is less than a worker takes to wake up (about 43 us from poll()), so the \
                 source would resume between most refreshes, into the headroom; set at least \
                 {least} ({} at this speed), better {ideal} ({})",
                p.pause_quanta,
                pause_words(p.pause_quanta, p.speed_bps),
                crate::units::format_rate(p.speed_bps as f64),
                us(ns / 2),
                pause_words(least, p.speed_bps),
                pause_words(ideal, p.speed_bps),
            ),
        ));
    }
    Ok(())
}

/// Warns where a port's PFC pause is shorter than [`SHORT_PAUSE_NS`], with a PFC priority
/// that sends it: it lasts only while the leader worker refreshes it in time.
fn warn_short_pauses(prios: &[PrioPlan; PRIORITIES], ports: &[PortPlan], out: &mut Vec<String>) {
    if prios.iter().all(|p| p.pfc.is_none()) {
        return;
    }
    for (i, p) in ports.iter().enumerate() {
        let ns = quanta_to_ns(p.pause_quanta, p.speed_bps);
        if ns >= SHORT_PAUSE_NS {
            continue;
        }
        let better = ns_to_quanta(SHORT_PAUSE_NS, p.speed_bps);
        let fix = if p.pause_quanta == u16::MAX {
            "; it is the longest pause a PFC frame carries at this speed".to_string()
        } else if better == u16::MAX {
            format!(
                "; {better}, the most a PFC frame carries, would last {}",
                pause_words(better, p.speed_bps)
            )
        } else {
            format!("; {better} would last 1 ms")
        };
        out.push(format!(
            "port[{i}].pause_quanta = {} lasts {} at {}: a PFC pause holds only while the \
             leader worker refreshes it within half that, {}, and on a busy host a worker's \
             turn may take longer (0.5 ms at p99 on a 2-vCPU VM; the stall guard steps in \
             after daemon.stall_guard x 1.5): the source then resumes into the headroom while \
             the pause is counted in force{fix}",
            p.pause_quanta,
            us(ns),
            crate::units::format_rate(p.speed_bps as f64),
            us(ns / 2),
        ));
    }
}

fn validate(raw: ConfigFile, file: &str) -> Result<Plan, ConfigError> {
    let c = Check { file };
    let stall_guard_ns = daemon(&c, &raw.daemon)?;
    let ports = ports(&c, &raw.port, raw.daemon.backend)?;
    let prios = priorities(&c, &raw.priority)?;
    check_pauses(&c, &prios, &ports)?;
    let metrics_listen = metrics_listen(&c, &raw.metrics)?;
    let control_socket = control_socket(&c, &raw.control)?;
    let watchdog = watchdog(&c, &raw.watchdog)?;
    let sfc = sfc(&c, &raw.sfc)?;
    let linkup = linkup(&c, &raw.linkup)?;
    let credit = credit(&c, &raw.credit, &prios, raw.daemon.workers)?;
    let mut headroom = headroom(&c, &raw.headroom)?;
    // The guard's bound is the headroom's notice term (dataplane::pfc_headroom).
    headroom.stall_guard_ns = stall_guard_ns;
    let mut plan = Plan {
        daemon: raw.daemon,
        ports,
        prios,
        metrics_listen,
        control_socket,
        watchdog,
        sfc,
        linkup,
        credit,
        headroom,
        stall_guard_ns,
        warnings: Vec::new(),
    };
    // The configured MTUs are checked now; the interfaces' (the default) at start, and by
    // `check-config` where the interface exists (`Plan::check_interfaces`).
    let max_frames: Vec<LongestFrame> = plan
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            p.mtu
                .and(p.max_frame(i, None, plan.daemon.backend, file).ok())
                .map_or(LongestFrame::Unknown, LongestFrame::Mtu)
        })
        .collect();
    plan.check_frames(&max_frames, file)?;
    plan.warnings = plan.config_warnings();
    Ok(plan)
}

/// Warns where a credit priority's buffer is larger than a credit window can advertise.
fn warn_credit_windows(prios: &[PrioPlan; PRIORITIES], out: &mut Vec<String>) {
    for (p, plan) in prios.iter().enumerate() {
        if plan.credit && plan.limit > MAX_CREDIT_BUFFER {
            out.push(format!(
                "priority.{p}.limit is {} bytes, but a credit window is at most 2048 blocks of \
                 64 bytes ({MAX_CREDIT_BUFFER} bytes): the rest of the buffer is never advertised",
                plan.limit
            ));
        }
    }
}

/// What every section's check needs: the file's name, for the errors.
struct Check<'a> {
    file: &'a str,
}

impl Check<'_> {
    /// `field` is refused for `reason`.
    fn invalid(&self, field: String, reason: String) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_string(),
            field,
            reason,
        }
    }

    /// A size in bytes, at most [`MAX_BUFFER_BYTES`], so that sums of buffers cannot overflow.
    fn buffer_size(&self, field: String, v: &SizeValue) -> Result<u64, ConfigError> {
        let b = match v {
            SizeValue::Bytes(b) => *b,
            SizeValue::Text(t) => {
                units::parse_size(t).map_err(|e| self.invalid(field.clone(), e.to_string()))?
            }
        };
        if b > MAX_BUFFER_BYTES {
            return Err(self.invalid(
                field,
                format!("{b} bytes is above the largest buffer, {MAX_BUFFER_BYTES} (256 TiB)"),
            ));
        }
        Ok(b)
    }

    /// A duration in ns, bounded so that the daemon can add it to a clock reading.
    fn duration_ns(&self, field: String, v: &str) -> Result<u64, ConfigError> {
        let d = units::parse_duration(v).map_err(|e| self.invalid(field.clone(), e.to_string()))?;
        u64::try_from(d.as_nanos())
            .ok()
            .filter(|&ns| ns <= MAX_DURATION_NS)
            .ok_or_else(|| {
                self.invalid(
                    field,
                    format!("{v:?} is longer than the longest duration, 2^62 ns (146 years)"),
                )
            })
    }
}

/// `[daemon]`: checked, kept as written; returns the stall guard's time (`None`: off).
fn daemon(c: &Check, d: &DaemonSection) -> Result<Option<u64>, ConfigError> {
    if d.workers == 0 || d.workers > 64 {
        return Err(c.invalid(
            "daemon.workers".into(),
            format!("{} is not in 1..=64", d.workers),
        ));
    }
    if d.backend == Backend::AfPacket && d.workers > 1 {
        return Err(c.invalid(
            "daemon.workers".into(),
            format!(
                "{} workers over backend = \"af-packet\": AF_PACKET carries one worker (every \
                 AF_PACKET socket on an interface receives every frame, so each worker would \
                 forward each frame again)",
                d.workers
            ),
        ));
    }
    if !d.cores.is_empty() && d.cores.len() < d.workers {
        return Err(c.invalid(
            "daemon.cores".into(),
            format!("{} cores listed for {} workers", d.cores.len(), d.workers),
        ));
    }
    // Worker w is pinned to cores[w]: two workers on one CPU share it, and two real-time
    // busy-polling ones starve one of them (SCHED_FIFO at one priority: the one running never
    // yields), whose RX queues are then served by no one.
    for (i, cpu) in d.cores.iter().enumerate() {
        if let Some(j) = d.cores[..i].iter().position(|c| c == cpu) {
            return Err(c.invalid(
                "daemon.cores".into(),
                format!(
                    "CPU {cpu} is listed twice (cores[{j}] and cores[{i}]): each worker needs a \
                     CPU of its own"
                ),
            ));
        }
    }
    if let Some(l) = &d.log {
        tracing_subscriber::EnvFilter::try_new(l)
            .map_err(|e| c.invalid("daemon.log".into(), format!("{l:?}: {e}")))?;
    }
    if !(1..=MAX_PRIORITY).contains(&d.realtime_priority) {
        return Err(c.invalid(
            "daemon.realtime_priority".into(),
            format!(
                "{} is not a SCHED_FIFO priority (1..={MAX_PRIORITY})",
                d.realtime_priority
            ),
        ));
    }
    if d.stats_interval_s > MAX_STATS_INTERVAL_S {
        return Err(c.invalid(
            "daemon.stats_interval_s".into(),
            format!(
                "{} is above {MAX_STATS_INTERVAL_S} (a day; 0 turns the progress lines off)",
                d.stats_interval_s
            ),
        ));
    }
    if d.frames < 4096 {
        return Err(c.invalid(
            "daemon.frames".into(),
            format!("{} is below the minimum of 4096", d.frames),
        ));
    }
    if d.stall_guard == "off" {
        return Ok(None);
    }
    let field = || "daemon.stall_guard".to_string();
    let ns = c.duration_ns(field(), &d.stall_guard)?;
    if !STALL_RANGE_NS.contains(&ns) {
        return Err(c.invalid(
            field(),
            format!("{:?} is not \"off\" or within 10us..1s", d.stall_guard),
        ));
    }
    Ok(Some(ns))
}

/// `[[port]]`: exactly two, each with a configured MTU `backend` carries.
fn ports(c: &Check, raw: &[PortSection], backend: Backend) -> Result<Vec<PortPlan>, ConfigError> {
    if raw.len() != 2 {
        return Err(c.invalid(
            "port".into(),
            format!(
                "wire mode forwards between exactly 2 ports, {} given",
                raw.len()
            ),
        ));
    }
    let mut ports = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        if p.iface.is_empty() || p.iface.len() > 15 {
            return Err(c.invalid(
                format!("port[{i}].iface"),
                format!("{:?} is not an interface name", p.iface),
            ));
        }
        if raw[..i].iter().any(|q| q.iface == p.iface) {
            return Err(c.invalid(
                format!("port[{i}].iface"),
                format!("{} is listed twice", p.iface),
            ));
        }
        let speed_bps = units::parse_rate(&p.speed)
            .map_err(|e| c.invalid(format!("port[{i}].speed"), e.to_string()))?;
        // No Ethernet is slower, and below it a frame's wire time and the pause quanta run
        // to seconds, beyond what the shaper's shared line tells from a clock gone wrong.
        if speed_bps < MIN_PORT_SPEED_BPS {
            return Err(c.invalid(
                format!("port[{i}].speed"),
                format!("{:?} is below the minimum of 1 Mbit/s", p.speed),
            ));
        }
        if p.pause_quanta == 0 {
            return Err(c.invalid(
                format!("port[{i}].pause_quanta"),
                "must be at least 1".into(),
            ));
        }
        let port = PortPlan {
            iface: p.iface.clone(),
            speed_bps,
            trust: p.trust,
            pause_quanta: p.pause_quanta,
            credit: p.credit,
            mtu: p.mtu,
        };
        if let Some(mtu) = p.mtu {
            if mtu < MIN_MTU {
                return Err(c.invalid(
                    format!("port[{i}].mtu"),
                    format!("{mtu} is below the minimum MTU, {MIN_MTU}"),
                ));
            }
            // The configured MTU is checked now; the interface's (the default) at start.
            port.max_frame(i, None, backend, c.file)?;
        }
        ports.push(port);
    }
    Ok(ports)
}

/// `[priority.N]`: each priority's mode and sizes; the rest stay lossy with the default limit.
fn priorities(
    c: &Check,
    raw: &std::collections::BTreeMap<String, PrioritySection>,
) -> Result<[PrioPlan; PRIORITIES], ConfigError> {
    let mut prios = [PrioPlan::lossy(DEFAULT_LOSSY_LIMIT); PRIORITIES];
    let number = |key: &str| key.parse::<usize>().ok().filter(|p| *p < PRIORITIES);
    for (key, s) in raw {
        // One name per priority, "0".."7": "03" and "+3" read as 3 too, and two sections for
        // one priority would leave one silently ignored (which, by how the keys sort).
        let p = match key.as_bytes() {
            &[d @ b'0'..=b'7'] => usize::from(d - b'0'),
            _ => {
                let reason = match number(key) {
                    None => "priority must be 0..=7".to_string(),
                    Some(p) => {
                        let others: Vec<String> = raw
                            .keys()
                            .filter(|k| *k != key && number(k) == Some(p))
                            .map(|k| format!("[priority.{k}]"))
                            .collect();
                        let also = match others.len() {
                            0 => String::new(),
                            1 => format!(
                                "; {} configures priority {p} too, and only one section may",
                                others[0]
                            ),
                            _ => format!(
                                "; {} configure priority {p} too, and only one section may",
                                others.join(" and ")
                            ),
                        };
                        format!("write priority {p} as [priority.{p}]{also}")
                    }
                };
                return Err(c.invalid(format!("priority.{key}"), reason));
            }
        };
        prios[p] = priority(c, key, s)?;
    }
    Ok(prios)
}

/// One `[priority.N]` (`key` as written).
fn priority(c: &Check, key: &str, s: &PrioritySection) -> Result<PrioPlan, ConfigError> {
    let size = |name: &str, v: &Option<SizeValue>, default: u64| -> Result<u64, ConfigError> {
        v.as_ref().map_or(Ok(default), |v| {
            c.buffer_size(format!("priority.{key}.{name}"), v)
        })
    };
    let uses_pfc = matches!(s.mode, PrioMode::Pfc | PrioMode::PfcSfc);
    let uses_sfc = matches!(s.mode, PrioMode::Sfc | PrioMode::PfcSfc);
    let only = |name: &str, v: &Option<SizeValue>, ok: bool, what: &str| {
        if v.is_some() && !ok {
            Err(c.invalid(
                format!("priority.{key}.{name}"),
                format!("only applies to {what}"),
            ))
        } else {
            Ok(())
        }
    };
    for (name, v) in [
        ("xoff", &s.xoff),
        ("xon", &s.xon),
        ("headroom", &s.headroom),
    ] {
        only(name, v, uses_pfc, "mode = \"pfc\" or \"pfc+sfc\"")?;
    }
    only(
        "sfc_threshold",
        &s.sfc_threshold,
        uses_sfc,
        "mode = \"sfc\" or \"pfc+sfc\"",
    )?;
    if uses_pfc && s.limit.is_some() {
        return Err(c.invalid(
            format!("priority.{key}.limit"),
            "a PFC priority never tail-drops; size it with xoff/headroom".into(),
        ));
    }
    let pfc = if uses_pfc {
        let xoff = size("xoff", &s.xoff, DEFAULT_XOFF)?;
        let xon = size("xon", &s.xon, DEFAULT_XON)?;
        let headroom = size("headroom", &s.headroom, DEFAULT_HEADROOM)?;
        if xon >= xoff {
            return Err(c.invalid(
                format!("priority.{key}.xon"),
                format!("xon ({xon}) must be below xoff ({xoff})"),
            ));
        }
        // XOFF and the headroom against the ports' longest frames: `Plan::check_pfc_frames`.
        Some(PfcPlan {
            xoff,
            xon,
            headroom,
        })
    } else {
        None
    };
    let sfc = if uses_sfc {
        let threshold = size("sfc_threshold", &s.sfc_threshold, DEFAULT_SFC_THRESHOLD)?;
        if threshold < 1522 {
            return Err(c.invalid(
                format!("priority.{key}.sfc_threshold"),
                format!("{threshold} bytes is below one frame"),
            ));
        }
        Some(SfcPlan { threshold })
    } else {
        None
    };
    let credit = s.mode == PrioMode::Credit;
    let limit = match (pfc, sfc) {
        _ if credit => {
            let l = size("limit", &s.limit, DEFAULT_CREDIT_LIMIT)?;
            if l < 2 * 1536 {
                return Err(c.invalid(
                    format!("priority.{key}.limit"),
                    format!("{l} bytes of credit cannot hold two full-size frames"),
                ));
            }
            l
        }
        (Some(p), _) => p.buffer(),
        (None, Some(f)) => {
            let l = size("limit", &s.limit, DEFAULT_SFC_LIMIT)?;
            if l <= f.threshold {
                return Err(c.invalid(
                    format!("priority.{key}.limit"),
                    format!("limit ({l}) must be above sfc_threshold ({})", f.threshold),
                ));
            }
            l
        }
        (None, None) => size("limit", &s.limit, DEFAULT_LOSSY_LIMIT)?,
    };
    Ok(PrioPlan {
        pfc,
        sfc,
        credit,
        limit,
    })
}

/// `[metrics] listen`: an address, or `None` for "".
fn metrics_listen(
    c: &Check,
    m: &MetricsSection,
) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    Ok(match m.listen.trim() {
        "" => None,
        a => Some(a.parse().map_err(|e| {
            c.invalid(
                "metrics.listen".into(),
                format!("{a:?} is not an address:port ({e})"),
            )
        })?),
    })
}

/// `[control] socket`: an absolute path, or `None` for "".
fn control_socket(
    c: &Check,
    s: &ControlSection,
) -> Result<Option<std::path::PathBuf>, ConfigError> {
    match s.socket.trim() {
        "" => Ok(None),
        p if p.starts_with('/') => Ok(Some(std::path::PathBuf::from(p))),
        p => Err(c.invalid(
            "control.socket".into(),
            format!("{p:?} must be an absolute path (or \"\" to disable)"),
        )),
    }
}

/// `[watchdog]`: `None` when disabled.
fn watchdog(c: &Check, w: &WatchdogSection) -> Result<Option<WatchdogConfig>, ConfigError> {
    let time = |field: &str, v: &str| {
        c.duration_ns(format!("watchdog.{field}"), v)
            .and_then(|ns| {
                if ns == 0 {
                    Err(c.invalid(format!("watchdog.{field}"), "must be above 0".into()))
                } else {
                    Ok(ns)
                }
            })
    };
    Ok(if w.enabled {
        Some(WatchdogConfig {
            detection_ns: time("detection", &w.detection)?,
            restoration_ns: time("restoration", &w.restoration)?,
            action: w.action,
        })
    } else {
        None
    })
}

/// `[sfc]`.
fn sfc(c: &Check, f: &SfcSection) -> Result<SfcSettings, ConfigError> {
    let udp = match (f.transport, &f.source_ip) {
        (SfcTransport::L2, _) => None,
        (SfcTransport::Udp, None) => {
            return Err(c.invalid(
                "sfc.source_ip".into(),
                "transport = \"udp\" needs the IPv4 address SFC messages come from".into(),
            ))
        }
        (SfcTransport::Udp, Some(ip)) => {
            let ip: std::net::Ipv4Addr = ip
                .parse()
                .map_err(|e| c.invalid("sfc.source_ip".into(), format!("{ip:?}: {e}")))?;
            Some((f.udp_port, ip.octets()))
        }
    };
    if f.reserve_percent >= 100 {
        return Err(c.invalid(
            "sfc.reserve_percent".into(),
            format!("{} leaves no pause at all; use 0..=99", f.reserve_percent),
        ));
    }
    let max_pause_ns = c.duration_ns("sfc.max_pause".into(), &f.max_pause)?;
    if max_pause_ns == 0 {
        return Err(c.invalid("sfc.max_pause".into(), "must be above 0".into()));
    }
    if f.accept_from.len() > MAX_ALLOWED {
        return Err(c.invalid(
            "sfc.accept_from".into(),
            format!(
                "{} congestion points listed; at most {MAX_ALLOWED}",
                f.accept_from.len()
            ),
        ));
    }
    let mut allow = [None; MAX_ALLOWED];
    for (i, m) in f.accept_from.iter().enumerate() {
        allow[i] = Some(
            m.parse::<MacAddr>()
                .map_err(|e| c.invalid(format!("sfc.accept_from[{i}]"), format!("{m:?}: {e}")))?,
        );
    }
    Ok(SfcSettings {
        udp,
        reserve_percent: f.reserve_percent,
        max_pause_ns,
        filter: f.filter,
        scope: f.scope,
        sources: SfcSourcePolicy {
            allow,
            max_per_second: f.max_rate,
        },
    })
}

/// `[linkup]`: `None` when disabled.
fn linkup(c: &Check, l: &LinkupSection) -> Result<Option<LinkupSettings>, ConfigError> {
    if !l.enabled {
        return Ok(None);
    }
    let dur = |field: &str, v: &str| c.duration_ns(format!("linkup.{field}"), v);
    if !(2..=1024).contains(&l.samples) {
        return Err(c.invalid(
            "linkup.samples".into(),
            format!("{} is not in 2..=1024", l.samples),
        ));
    }
    if !(64..=9216).contains(&l.max_frame) {
        return Err(c.invalid(
            "linkup.max_frame".into(),
            format!("{} is not in 64..=9216", l.max_frame),
        ));
    }
    Ok(Some(LinkupSettings {
        samples: l.samples,
        sample_interval_ns: dur("sample_interval", &l.sample_interval)?.max(1),
        interval_ns: dur("interval", &l.interval)?,
        max_frame: l.max_frame,
        peer_response_ns: dur("peer_response", &l.peer_response)?,
    }))
}

/// `[credit]`, and the one worker credit priorities need.
fn credit(
    c: &Check,
    s: &CreditSection,
    prios: &[PrioPlan; PRIORITIES],
    workers: usize,
) -> Result<CreditTimers, ConfigError> {
    let positive = |field: &str, v: &str| match c.duration_ns(format!("credit.{field}"), v)? {
        0 => Err(c.invalid(format!("credit.{field}"), "must be above 0".into())),
        ns => Ok(ns),
    };
    let credit = CreditTimers {
        update_interval_ns: positive("update_interval", &s.update_interval)?,
        resync_interval_ns: positive("resync_interval", &s.resync_interval)?,
        timeout_ns: positive("timeout", &s.timeout)?,
    };
    if credit.timeout_ns <= credit.update_interval_ns.max(credit.resync_interval_ns) {
        return Err(c.invalid(
            "credit.timeout".into(),
            format!("{} must exceed the update and resync intervals", s.timeout),
        ));
    }
    if let Some(p) = prios.iter().position(|p| p.credit) {
        if workers != 1 {
            return Err(c.invalid(
                format!("priority.{p}.mode"),
                format!(
                    "credit lanes count every block of a link in one place: it needs daemon.workers = 1, not {workers}"
                ),
            ));
        }
    }
    Ok(credit)
}

/// `[headroom]`.
fn headroom(c: &Check, h: &HeadroomSection) -> Result<HeadroomSettings, ConfigError> {
    if !(1.0..=100.0).contains(&h.margin) {
        return Err(c.invalid(
            "headroom.margin".into(),
            format!("{} is not in 1..=100", h.margin),
        ));
    }
    Ok(HeadroomSettings {
        adaptive: h.adaptive,
        min_headroom: h
            .min_headroom
            .as_ref()
            .map(|v| c.buffer_size("headroom.min_headroom".into(), v))
            .transpose()?,
        margin: h.margin,
        half_life_ns: c
            .duration_ns("headroom.half_life".into(), &h.half_life)?
            .max(1),
        quiet_ns: c.duration_ns("headroom.quiet".into(), &h.quiet)?.max(1),
        // Set from `daemon.stall_guard` by the caller.
        stall_guard_ns: None,
        xoff_time_ns: match &h.xoff_time {
            None => None,
            Some(t) => match c.duration_ns("headroom.xoff_time".into(), t)? {
                0 => {
                    return Err(c.invalid(
                        "headroom.xoff_time".into(),
                        "must be longer than 0 (leave it out for XOFF in bytes only)".into(),
                    ))
                }
                ns => Some(ns),
            },
        },
        borrow: h.borrow,
    })
}
