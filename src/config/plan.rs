//! The validated configuration the daemon runs: [`Plan`], built by `validate` from the file.
//! The settings each part of the daemon runs with are that part's own types (a priority's
//! [`PrioPlan`] and [`SfcSettings`] in `fc`, [`LinkupSettings`] in `linkup`, the [`Backend`] in
//! `dataplane`); the plan gathers them with what only the daemon needs.

use super::{error::ConfigError, file::DaemonSection};
use crate::{
    dataplane::{
        classify::Trust,
        open::{Backend, FRAME_OVERHEAD},
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
};

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
    /// windows), one sentence each naming the fields; `run` and a reload log them,
    /// `check-config` prints them.
    pub warnings: Vec<String>,
}

impl Plan {
    /// Refuses a credit priority whose `limit` cannot hold two of a credit port's longest
    /// frames, `max_frames[i]` for port `i` (`None`: not known yet, the interface's MTU is
    /// read at start). The limit is the window a peer's sender works in, and a sender knows
    /// only the credit it is given, not the window: a frame longer than the window would wait
    /// at the head of its priority for ever, with nothing counted.
    pub fn check_credit_frames(
        &self,
        max_frames: &[Option<u32>],
        file: &str,
    ) -> Result<(), ConfigError> {
        for (i, (port, max_frame)) in self.ports.iter().zip(max_frames).enumerate() {
            let Some(max_frame) = max_frame.filter(|_| port.credit) else {
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
                             frames ({max_frame} bytes each, its MTU plus {FRAME_OVERHEAD}): \
                             raise the limit to at least {frames} or lower port[{i}].mtu",
                            prio.limit, port.iface
                        ),
                    });
                }
            }
        }
        Ok(())
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
