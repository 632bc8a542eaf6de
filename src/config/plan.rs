//! The validated configuration the daemon runs: [`Plan`], built by `validate` from the file.
//! The settings each part of the daemon runs with are that part's own types (a priority's
//! [`PrioPlan`] and [`SfcSettings`] in `fc`, [`LinkupSettings`] in `linkup`, the [`Backend`] in
//! `dataplane`); the plan gathers them with what only the daemon needs.

use super::{error::ConfigError, file::DaemonSection};
use crate::{
    dataplane::{
        classify::Trust,
        open::{Backend, FRAME_OVERHEAD},
        pfc_headroom::{min_xoff, PortHeadroom},
        settings::LiveSettings,
    },
    fc::{
        adaptive::HeadroomSettings,
        credit_port::CreditTimers,
        plan::{PrioPlan, SfcSettings},
        watchdog::WatchdogConfig,
        PRIORITIES,
    },
    linkup::LinkupSettings,
    wire::{ethernet::FCS_OCTETS, MIN_FRAME_LEN},
};

/// Largest standard frame (1,500-byte payload, 802.1Q tag, no FCS): the longest frame a PFC
/// check assumes of a port whose MTU is not known yet, and the least it assumes of any
/// ([`min_xoff`] takes the same).
pub const MAX_STD_FRAME: u64 = 1518;

/// A PFC frame in a buffer: the 60-byte minimum frame it is padded to, and its FCS.
const PFC_FRAME: u64 = MIN_FRAME_LEN as u64 + FCS_OCTETS;

/// The smallest headroom a PFC priority may have on a port whose longest frame is
/// `max_frame` bytes (without FCS): what still arrives after XOFF goes out on the shortest
/// link, two of the port's longest frames on the wire (the one being received and the one
/// the upstream started before it saw the pause; at least standard ones, 1,522 bytes with
/// their FCS) and a PFC frame's time.
pub fn min_pfc_headroom(max_frame: u64) -> u64 {
    2 * (max_frame.max(MAX_STD_FRAME) + FCS_OCTETS) + PFC_FRAME
}

/// A port's longest frame (bytes, without FCS) as a check knows it, and where it comes from,
/// so that an error says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongestFrame {
    /// Not known yet: `mtu` is not set and the interface's MTU is read at start.
    Unknown,
    /// `port[N].mtu`, else the interface's MTU, plus [`FRAME_OVERHEAD`].
    Mtu(u32),
    /// `mtu` is not set and the interface's MTU could not be read (netlink did not report
    /// it): the backend's largest frame is assumed, the one frame length it can take.
    Assumed(u32),
}

impl LongestFrame {
    /// The length, bytes (`None`: not known).
    pub fn bytes(self) -> Option<u32> {
        match self {
            LongestFrame::Unknown => None,
            LongestFrame::Mtu(f) | LongestFrame::Assumed(f) => Some(f),
        }
    }
}

/// What start-up reads of one port's interface (`None` in a field: the kernel did not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfaceFacts {
    /// Its MTU.
    pub mtu: Option<u32>,
    /// The RX queues it receives on (ethtool's channels).
    pub rx_queues: Option<u32>,
}

/// Why `iface` receiving on `active` RX queues while `workers` workers bind the first
/// `workers` is refused, and the remedies (the reason of `port[N].iface`'s error at start,
/// and of the daemon's error line when a queue is added under it).
pub fn uncovered_queues_reason(iface: &str, active: u32, workers: u32) -> String {
    format!(
        "{iface} receives on {active} RX queues, but daemon.workers = {workers} binds the \
         first {workers} (worker w binds queue w): frames its NIC or peer puts on the others go \
         to the kernel, never forwarded or counted. Set `[daemon] workers = {active}` (one per \
         queue, at most 64, and as many TX queues), or reduce its RX queues: `ethtool -L \
         {iface} combined {workers}` (`rx {workers}` where the driver has RX-only channels, as \
         veth)"
    )
}

/// `cpus` (ascending) as the kernel's CPU lists write them: "0-3,6".
fn cpu_list(cpus: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &c in cpus {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == c => *last = c,
            _ => runs.push((c, c)),
        }
    }
    runs.iter()
        .map(|&(a, b)| match a == b {
            true => a.to_string(),
            false => format!("{a}-{b}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The XOFF, XON and headroom of one PFC priority as they run from start on one port, where
/// they differ from the file's (see [`Plan::start_thresholds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StartThresholds {
    /// XOFF in force, bytes.
    pub xoff: u64,
    /// XON in force, bytes.
    pub xon: u64,
    /// What the buffer (XOFF + headroom as configured) leaves above XOFF, bytes.
    pub headroom: u64,
    /// What set the headroom in force: `configured` (the floor: `[headroom] min_headroom`
    /// where it is set) or `observed` (the adaptive headroom's prior, half the buffer until
    /// overshoots are seen).
    pub source: &'static str,
}

/// One port, validated.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PortPlan {
    /// Interface.
    pub iface: String,
    /// Line rate in bit/s.
    pub speed_bps: u64,
    /// Classification.
    pub trust: Trust,
    /// PFC XOFF pause time in quanta.
    pub pause_quanta: u16,
    /// Credit-based flow control runs on this port (for the `credit` priorities).
    pub credit: bool,
    /// MTU as configured (`None`: the interface's MTU at start, see [`PortPlan::max_frame`]).
    pub mtu: Option<u32>,
}

impl PortPlan {
    /// The longest frame (bytes, without FCS) port `index` takes: its configured MTU, else
    /// `iface_mtu` (the interface's, read at start), plus [`FRAME_OVERHEAD`]; an error naming
    /// `port[index].mtu` when `backend` cannot carry frames that long (`None`: the
    /// interface's MTU is unknown, so the backend's largest is taken).
    pub fn max_frame(
        &self,
        index: usize,
        iface_mtu: Option<u32>,
        backend: Backend,
        file: &str,
    ) -> Result<u32, ConfigError> {
        let Some(mtu) = self.mtu.or(iface_mtu) else {
            return Ok(backend.max_frame());
        };
        let frame = mtu.saturating_add(FRAME_OVERHEAD);
        if frame <= backend.max_frame() {
            return Ok(frame);
        }
        let (whose, or) = if self.mtu.is_some() {
            (format!("{mtu}"), "")
        } else {
            (
                format!("not set, so {}'s MTU {mtu} applies, which", self.iface),
                " or lower the interface's MTU",
            )
        };
        Err(ConfigError::Invalid {
            file: file.to_string(),
            field: format!("port[{index}].mtu"),
            reason: format!(
                "{whose} means frames of up to {frame} bytes; the {} backend carries frames of \
                 at most {} bytes (mtu <= {}): set port[{index}].mtu to at most {} (longer \
                 frames are then dropped and counted as oversize){or}",
                backend.name(),
                backend.max_frame(),
                backend.max_mtu(),
                backend.max_mtu(),
            ),
        })
    }
}

/// The validated configuration the daemon runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `[daemon]` as given.
    pub daemon: DaemonSection,
    /// The two ports of the wire.
    pub ports: Vec<PortPlan>,
    /// Per priority.
    pub prios: [PrioPlan; PRIORITIES],
    /// Where to serve metrics, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Control socket path, if any.
    pub control_socket: Option<std::path::PathBuf>,
    /// PFC watchdog, if enabled.
    pub watchdog: Option<WatchdogConfig>,
    /// SFC settings.
    pub sfc: SfcSettings,
    /// Link-up measurement, if enabled.
    pub linkup: Option<LinkupSettings>,
    /// Credit lane timers.
    pub credit: CreditTimers,
    /// How the PFC headroom adapts.
    pub headroom: HeadroomSettings,
    /// How long a worker may stall before the stall guard pauses for it (`None`: off).
    pub stall_guard_ns: Option<u64>,
    /// What is valid but worth a look (sizing against the pool, the stall guard, credit
    /// windows, short pauses), one sentence each naming the fields
    /// ([`Plan::config_warnings`]); `run` and a reload log them (a reload those of the plan
    /// it applies, [`Plan::reloadable`]), `check-config` prints them.
    pub warnings: Vec<String>,
}

impl Plan {
    /// Refuses a credit priority whose `limit` cannot hold two of a credit port's longest
    /// frames, `max_frames[i]` for port `i`. The limit is the window a peer's sender works
    /// in, and a sender knows only the credit it is given, not the window: a frame longer
    /// than the window would wait at the head of its priority for ever, with nothing counted.
    pub fn check_credit_frames(
        &self,
        max_frames: &[LongestFrame],
        file: &str,
    ) -> Result<(), ConfigError> {
        for (i, (port, longest)) in self.ports.iter().zip(max_frames).enumerate() {
            let Some(max_frame) = longest.bytes().filter(|_| port.credit) else {
                continue;
            };
            for (p, prio) in self.prios.iter().enumerate() {
                let frames = 2 * u64::from(max_frame);
                if prio.credit && prio.limit < frames {
                    return Err(ConfigError::Invalid {
                        file: file.to_string(),
                        field: format!("priority.{p}.limit"),
                        reason: format!(
                            "{} bytes of credit cannot hold two of port[{i}]'s ({}) longest \
                             frames ({}): raise the limit to at least {frames} or {} \
                             port[{i}].mtu",
                            prio.limit,
                            port.iface,
                            self.longest_frame_words(i, *longest),
                            match longest {
                                LongestFrame::Assumed(_) => "set",
                                _ => "lower",
                            },
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Refuses what the ports' longest frames do not fit, `max_frames[i]` for port `i`: a credit
    /// limit ([`Plan::check_credit_frames`]) and a PFC priority's thresholds
    /// ([`Plan::check_pfc_frames`]). The file's validation calls it with the configured MTUs,
    /// `run` and `check-config` with the interfaces' ([`Plan::check_interfaces`]).
    pub fn check_frames(&self, max_frames: &[LongestFrame], file: &str) -> Result<(), ConfigError> {
        self.check_pfc_frames(max_frames, file)?;
        self.check_credit_frames(max_frames, file)
    }

    /// Refuses a PFC priority that the dataplane would run with less headroom than the file
    /// says, on a port whose longest frame is `max_frames[i]` (not known yet: at least a
    /// standard frame, [`MAX_STD_FRAME`]):
    /// - `priority.N.xoff` below the port's smallest XOFF ([`min_xoff`], two of its longest
    ///   frames): the dataplane holds XOFF at that minimum and takes the difference out of the
    ///   headroom, all of it where the buffer is smaller (a jumbo port, `xoff = "8KiB"`);
    /// - `priority.N.headroom` (or `headroom.min_headroom`, which replaces it as the floor)
    ///   below what arrives after XOFF on the shortest link ([`min_pfc_headroom`]);
    /// - `headroom.min_headroom` above what a priority's buffer leaves above the smallest
    ///   XOFF: XOFF would be held there and XON at 0, pausing the source at every burst.
    pub fn check_pfc_frames(
        &self,
        max_frames: &[LongestFrame],
        file: &str,
    ) -> Result<(), ConfigError> {
        let invalid = |field: String, reason: String| ConfigError::Invalid {
            file: file.to_string(),
            field,
            reason,
        };
        let pfc: Vec<_> = (0..PRIORITIES)
            .filter_map(|p| Some((p, self.prios[p].pfc?)))
            .collect();
        if pfc.is_empty() {
            return Ok(());
        }
        for (i, (port, max_frame)) in self.ports.iter().zip(max_frames).enumerate() {
            let frame = max_frame.bytes().map_or(MAX_STD_FRAME, u64::from);
            let least_xoff = min_xoff(frame);
            let least_headroom = min_pfc_headroom(frame);
            let longest = self.longest_frame_words(i, *max_frame);
            let mtu_fix = match max_frame {
                LongestFrame::Assumed(_) => format!(" or set port[{i}].mtu"),
                LongestFrame::Mtu(f) if u64::from(*f) > MAX_STD_FRAME => {
                    format!(" or lower port[{i}].mtu")
                }
                _ => String::new(),
            };
            for &(p, plan) in &pfc {
                if plan.xoff < least_xoff {
                    return Err(invalid(
                        format!("priority.{p}.xoff"),
                        format!(
                            "{} bytes is below port[{i}]'s ({}) smallest XOFF, {least_xoff} \
                             bytes: two of its longest frames ({longest}); the daemon would \
                             run XOFF at {} and leave {} bytes of the {} bytes of headroom \
                             configured: raise xoff to at least {least_xoff}{mtu_fix}",
                            plan.xoff,
                            port.iface,
                            least_xoff.min(plan.buffer()),
                            plan.buffer().saturating_sub(least_xoff),
                            plan.headroom,
                        ),
                    ));
                }
                if plan.headroom < least_headroom {
                    return Err(invalid(
                        format!("priority.{p}.headroom"),
                        self.short_headroom(plan.headroom, i, &longest, least_headroom),
                    ));
                }
            }
            let Some(floor) = self.headroom.min_headroom else {
                continue;
            };
            if floor < least_headroom {
                return Err(invalid(
                    "headroom.min_headroom".into(),
                    self.short_headroom(floor, i, &longest, least_headroom),
                ));
            }
            for &(p, plan) in &pfc {
                let room = plan.buffer().saturating_sub(least_xoff);
                if floor > room {
                    return Err(invalid(
                        "headroom.min_headroom".into(),
                        format!(
                            "{floor} bytes is more than priority.{p}'s buffer (xoff + headroom, \
                             {} bytes) leaves above port[{i}]'s ({}) smallest XOFF, \
                             {least_xoff} bytes ({longest}): the daemon would hold XOFF at \
                             {least_xoff} and XON at 0, pausing the source at every burst; \
                             set it to at most {room}, or raise priority.{p}.xoff",
                            plan.buffer(),
                            port.iface,
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Why a headroom (or floor) of `headroom` bytes is refused on port `i`, whose longest
    /// frame `longest` describes and which needs `least` bytes.
    fn short_headroom(&self, headroom: u64, i: usize, longest: &str, least: u64) -> String {
        format!(
            "{headroom} bytes cannot hold what arrives after XOFF even on the shortest link: \
             two of port[{i}]'s ({}) longest frames on the wire ({longest}, plus {FCS_OCTETS} \
             of FCS each) and a PFC frame ({PFC_FRAME}), {least} bytes; raise it to at least \
             {least}",
            self.ports[i].iface
        )
    }

    /// Port `i`'s longest frame, `max_frame`, in words.
    fn longest_frame_words(&self, i: usize, max_frame: LongestFrame) -> String {
        let port = &self.ports[i];
        let backend = self.daemon.backend;
        let max_frame = match max_frame {
            LongestFrame::Assumed(f) => {
                return format!(
                    "{f} bytes each, assumed: port[{i}].mtu is not set and {}'s MTU could not be \
                     read (netlink did not report it), so the {} backend's largest frame \
                     (MTU {}) is taken",
                    port.iface,
                    backend.name(),
                    backend.max_mtu(),
                )
            }
            LongestFrame::Mtu(f) => Some(f),
            LongestFrame::Unknown => None,
        };
        match (max_frame, port.mtu) {
            (None, _) => format!(
                "{MAX_STD_FRAME} bytes at least, a standard frame; port[{i}].mtu is not set, so \
                 the interface's MTU, read at start, may ask more"
            ),
            (Some(f), _) if u64::from(f) < MAX_STD_FRAME => {
                format!("{f} bytes, counted as a standard frame, {MAX_STD_FRAME}")
            }
            (Some(f), Some(mtu)) => format!("{f} bytes each, its mtu {mtu} plus {FRAME_OVERHEAD}"),
            (Some(f), None) => format!(
                "{f} bytes each: port[{i}].mtu is not set, so {}'s MTU {} plus {FRAME_OVERHEAD} \
                 applies",
                port.iface,
                f - FRAME_OVERHEAD
            ),
        }
    }

    /// The checks that need the host, done by `run` at start and by `check-config`, so that
    /// `check-config` refuses what `run` would: `ifaces[i]` is what was read of port `i`'s
    /// interface (`None`: there is no such interface, and only what the file says is checked,
    /// as its validation did), `cpus` the CPUs the process may run on ([`Plan::check_cores`]).
    /// Each port's longest frame is its `mtu`, else the interface's MTU, which the backend
    /// must carry ([`PortPlan::max_frame`]), and the credit and PFC settings must fit it
    /// ([`Plan::check_frames`]); and every RX queue a port receives on needs a worker (worker
    /// w binds queue w of every port; over AF_PACKET, one socket takes them all). Returns
    /// each port's longest frame (`None`: no interface and no `mtu`).
    pub fn check_interfaces(
        &self,
        ifaces: &[Option<IfaceFacts>],
        cpus: &[usize],
        file: &str,
    ) -> Result<Vec<Option<u32>>, ConfigError> {
        self.check_cores(cpus, file)?;
        let backend = self.daemon.backend;
        let max_frames = self
            .ports
            .iter()
            .zip(ifaces)
            .enumerate()
            .map(|(i, (port, facts))| match facts {
                Some(IfaceFacts { mtu: None, .. }) if port.mtu.is_none() => {
                    Ok(LongestFrame::Assumed(backend.max_frame()))
                }
                Some(f) => port
                    .max_frame(i, f.mtu, backend, file)
                    .map(LongestFrame::Mtu),
                None if port.mtu.is_some() => port
                    .max_frame(i, None, backend, file)
                    .map(LongestFrame::Mtu),
                None => Ok(LongestFrame::Unknown),
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.check_frames(&max_frames, file)?;
        // Whatever the backend may fall back to: AF_PACKET carries one worker only.
        if backend != Backend::AfPacket {
            let workers = self.daemon.workers as u32;
            for (i, (port, facts)) in self.ports.iter().zip(ifaces).enumerate() {
                if let Some(active) = facts.and_then(|f| f.rx_queues).filter(|&n| n > workers) {
                    return Err(ConfigError::Invalid {
                        file: file.to_string(),
                        field: format!("port[{i}].iface"),
                        reason: uncovered_queues_reason(&port.iface, active, workers),
                    });
                }
            }
        }
        Ok(max_frames.into_iter().map(LongestFrame::bytes).collect())
    }

    /// Refuses a `daemon.cores` entry naming a CPU outside `allowed`, the CPUs this process
    /// may run on (its affinity: the machine's CPUs less what `taskset`, systemd's
    /// `CPUAffinity=` or a cpuset takes away; empty: not known, nothing is checked). The
    /// kernel refuses to pin a worker there, and the worker would run wherever the scheduler
    /// puts it, beside another worker or the stall guard that counts on having a CPU of its
    /// own, while the file says it has one.
    pub fn check_cores(&self, allowed: &[usize], file: &str) -> Result<(), ConfigError> {
        if allowed.is_empty() {
            return Ok(());
        }
        let cores = &self.daemon.cores[..self.daemon.cores.len().min(self.daemon.workers)];
        let Some((i, cpu)) = cores.iter().enumerate().find(|(_, c)| !allowed.contains(c)) else {
            return Ok(());
        };
        Err(ConfigError::Invalid {
            file: file.to_string(),
            field: "daemon.cores".into(),
            reason: format!(
                "CPU {cpu} (cores[{i}]) is not one this process may run on: it may run on CPUs \
                 {} (its affinity, what taskset, systemd's CPUAffinity= or a cpuset leaves of \
                 the machine's); list only those, or leave cores out for no pinning",
                cpu_list(allowed)
            ),
        })
    }

    /// The XOFF, XON and headroom each PFC priority runs with from start on a port whose
    /// longest frame is `max_frame` bytes (`None`: not known, a standard frame), where they
    /// differ from the file's: the dataplane's own division of the buffer
    /// ([`PortHeadroom`]), with `[headroom] min_headroom` as the floor and, while
    /// `adaptive`, half the buffer as the prior until overshoots are seen. (Link-up's
    /// measurement and the overshoots move them later; `status` shows them then.)
    pub fn start_thresholds(
        &self,
        max_frame: Option<u32>,
    ) -> [Option<StartThresholds>; PRIORITIES] {
        let frame = max_frame.map_or(MAX_STD_FRAME, u64::from);
        let h = PortHeadroom::new(self.headroom, frame, &self.prios, None, 0);
        std::array::from_fn(|p| {
            let pfc = self.prios[p].pfc?;
            let r = h.report(p, 0)?;
            let run = StartThresholds {
                xoff: r.xoff,
                xon: r.xon,
                headroom: pfc.buffer().saturating_sub(r.xoff),
                source: r.source.label(),
            };
            (run.xoff != pfc.xoff || run.xon != pfc.xon || run.headroom != pfc.headroom)
                .then_some(run)
        })
    }

    /// The settings that differ between `self` and `new` but only take effect after a restart
    /// (SIGHUP applies priorities, thresholds, pause times, the watchdog and the log filter).
    pub fn restart_only_changes(&self, new: &Plan) -> Vec<&'static str> {
        let mut out = Vec::new();
        let (a, b) = (&self.daemon, &new.daemon);
        let credit_prios = |plan: &Plan| plan.prios.map(|p| p.credit.then_some(p.limit));
        let checks: [(&'static str, bool); 17] = [
            ("daemon.workers", a.workers != b.workers),
            ("daemon.cores", a.cores != b.cores),
            ("daemon.xdp_mode", a.xdp_mode != b.xdp_mode),
            ("daemon.backend", a.backend != b.backend),
            ("daemon.frames", a.frames != b.frames),
            ("daemon.busy_poll", a.busy_poll != b.busy_poll),
            (
                "daemon.stall_guard",
                self.stall_guard_ns != new.stall_guard_ns,
            ),
            ("daemon.realtime", a.realtime != b.realtime),
            (
                "daemon.realtime_priority",
                a.realtime_priority != b.realtime_priority,
            ),
            ("metrics.listen", self.metrics_listen != new.metrics_listen),
            ("control.socket", self.control_socket != new.control_socket),
            (
                "port (iface, speed, trust, mtu)",
                self.ports.len() != new.ports.len()
                    || self.ports.iter().zip(&new.ports).any(|(x, y)| {
                        x.iface != y.iface
                            || x.speed_bps != y.speed_bps
                            || x.trust != y.trust
                            || x.mtu != y.mtu
                    }),
            ),
            (
                "daemon.stats_interval_s",
                a.stats_interval_s != b.stats_interval_s,
            ),
            (
                "priority.N (credit mode and buffer)",
                credit_prios(self) != credit_prios(new),
            ),
            (
                "port.credit",
                self.ports
                    .iter()
                    .map(|p| p.credit)
                    .ne(new.ports.iter().map(|p| p.credit)),
            ),
            ("credit", self.credit != new.credit),
            // Link-up's agents and the link monitor are built with them at start.
            ("linkup", self.linkup != new.linkup),
        ];
        for (name, changed) in checks {
            if changed {
                out.push(name);
            }
        }
        out
    }

    /// `new` as a reload applies it: every setting [`Plan::restart_only_changes`] names keeps
    /// the value `self` runs with, so that nothing of a change the reload does not apply
    /// reaches the workers, the stall guard or the XDP programs in part (a changed `trust`
    /// reaching the programs alone would file frames under other priorities than the workers
    /// do; a credit priority's new buffer reaching admission alone would drop what the peer
    /// was granted; a new `stall_guard` reaching the headroom alone would size it for a guard
    /// that does not run). What is live comes from `new`: a port's pause time, the other
    /// priorities, the watchdog, `[sfc]`, `[headroom]` and the log filter.
    pub fn reloadable(&self, new: &Plan) -> Plan {
        let mut r = new.clone();
        r.daemon = DaemonSection {
            log: new.daemon.log.clone(),
            ..self.daemon.clone()
        };
        r.ports = if self.ports.len() == new.ports.len() {
            self.ports
                .iter()
                .zip(&new.ports)
                .map(|(running, n)| PortPlan {
                    pause_quanta: n.pause_quanta,
                    ..running.clone()
                })
                .collect()
        } else {
            self.ports.clone()
        };
        for (p, prio) in r.prios.iter_mut().enumerate() {
            if self.prios[p].credit || new.prios[p].credit {
                *prio = self.prios[p];
            }
        }
        r.metrics_listen = self.metrics_listen;
        r.control_socket.clone_from(&self.control_socket);
        r.credit = self.credit;
        r.linkup = self.linkup;
        r.stall_guard_ns = self.stall_guard_ns;
        r.headroom.stall_guard_ns = self.stall_guard_ns;
        // Said of what runs: the running pool and stall guard, not the file's values that
        // wait for a restart.
        r.warnings = r.config_warnings();
        r
    }

    /// The reloadable part of the plan (nothing measured yet).
    pub fn live_settings(&self) -> LiveSettings {
        LiveSettings {
            prios: self.prios,
            watchdog: self.watchdog,
            pause_quanta: self.ports.iter().map(|p| p.pause_quanta).collect(),
            sfc: self.sfc,
            measured: vec![None; self.ports.len()],
            rtt_ns: vec![None; self.ports.len()],
            model: vec![None; self.ports.len()],
            headroom: self.headroom,
        }
    }
}
