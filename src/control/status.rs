//! The control socket: a Unix stream socket (mode 0600, root only) that answers `status` with
//! the daemon's state as JSON, and `lossless status`, the client that prints it.

use std::{
    io::{BufRead, BufReader, Write},
    os::unix::{fs::PermissionsExt, net::UnixStream},
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use serde::{Deserialize, Serialize};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt},
    net::UnixListener,
};

use super::{
    reload::{unix_now_s, ReloadLog, ReloadOutcome},
    shutdown::{self, Shutdown},
};
use crate::linkup::shared::LinkShared;
use crate::{
    config::PortPlan,
    dataplane::{
        clock::now_ns,
        port::{iface_link, TimeStamping},
        sched::{RealtimeMode, WorkerSched},
        settings::{ModelTerms, SettingsCell},
        shared::SharedPort,
        stats::{snapshot, PortSnapshot, WorkerStats},
        xdp_prog::XdpProgram,
    },
    fc::PRIORITIES,
};

/// One priority of one port, as `status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PrioStatus {
    /// Priority 0..=7.
    pub priority: usize,
    /// `lossy`, `pfc`, `sfc` or `pfc+sfc`.
    pub mode: String,
    /// XOFF threshold, bytes (lossless only).
    pub xoff_bytes: Option<u64>,
    /// XON threshold, bytes (lossless only).
    pub xon_bytes: Option<u64>,
    /// Headroom beyond XOFF, bytes (lossless only).
    pub headroom_bytes: Option<u64>,
    /// SFC threshold on the egress queue, bytes (SFC only).
    pub sfc_threshold_bytes: Option<u64>,
    /// Bytes beyond which arriving frames are dropped (tail drop, or overflow if lossless).
    pub limit_bytes: Option<u64>,
    /// Where the PFC thresholds came from: `config`, or `measured` at link-up.
    pub source: String,
    /// Where the headroom in force comes from: `configured` (the floor), `measured` (link-up's
    /// model) or `observed` (the overshoot seen after XOFFs, times the margin).
    #[serde(default)]
    pub headroom_source: Option<String>,
    /// The terms of the headroom in force: floor, measured model, observed evidence, bytes.
    #[serde(default)]
    pub headroom_terms: Option<[u64; 3]>,
    /// The notice term, part of the observed evidence: what arrives while a crossing of XOFF
    /// may go unnoticed (the stall guard's bound at the fastest rate seen, or the most seen
    /// arriving between two turns of the worker, whichever is more), bytes.
    #[serde(default)]
    pub headroom_notice_bytes: u64,
    /// How often the headroom in force changed since the start.
    #[serde(default)]
    pub headroom_changes: u64,
    /// How long ago it last changed, seconds (`None`: never).
    #[serde(default)]
    pub headroom_changed_ago_s: Option<f64>,
    /// The headroom in force leaves XOFF less than its minimum: XOFF + headroom in force
    /// exceed the configured buffer (XOFF + headroom), which is too small for what the daemon
    /// measured.
    #[serde(default)]
    pub xoff_squeezed: bool,
    /// Largest overshoot seen after an XOFF (upper bound of its power-of-two bucket), bytes.
    #[serde(default)]
    pub overshoot_max_bytes: u64,
    /// The PFC buffer's measured drain rate, bytes per second (`[headroom] xoff_time` set
    /// and a backlog seen); XOFF is at most this × xoff_time less `peak_excess_bytes`.
    #[serde(default)]
    pub drain_rate_bytes_per_s: Option<u64>,
    /// How far recent backlog peaks went beyond XOFF, bytes (with `drain_rate_bytes_per_s`).
    #[serde(default)]
    pub peak_excess_bytes: Option<u64>,
    /// Bytes charged to this port as ingress now (queued for egress).
    pub ingress_bytes: u64,
    /// Bytes of this priority still waiting in the port's RX rings (steered by XDP, not yet
    /// taken); PFC acts on ingress + RX backlog.
    #[serde(default)]
    pub rx_backlog_bytes: u64,
    /// Egress of this port paused by a received PFC/PAUSE now.
    pub paused: bool,
    /// Egress queue depth now, bytes.
    pub queue_bytes: u64,
    /// PFC watchdog: `off`, `ok` or `stormed`.
    pub watchdog: String,
    /// Storms detected on this egress priority.
    pub storms: u64,
}

/// One port, as `status` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PortStatus {
    /// Interface.
    pub iface: String,
    /// Kernel operational state (`up`, `down`, ...).
    pub link: String,
    /// The daemon holds every frame for this egress: the port has no carrier, or the kernel
    /// just refused a frame and the carrier is being read (`operstate` can lag the carrier by
    /// up to a second).
    #[serde(default)]
    pub egress_held: bool,
    /// Configured line rate, bit/s.
    pub speed_bps: u64,
    /// Classification mode.
    pub trust: String,
    /// Link peer learnt by LLDP ("chassis / port").
    pub peer: Option<String>,
    /// Round trip measured at link-up, ns.
    pub round_trip_ns: Option<u64>,
    /// The terms of link-up's headroom model (wire, own lag, peer, frames), bytes.
    #[serde(default)]
    pub headroom_model: Option<ModelTerms>,
    /// Where the port's RX and TX times are taken (the round trip's accuracy depends on it).
    #[serde(default)]
    pub time_stamping: Option<TimeStamping>,
    /// Per priority.
    pub priorities: Vec<PrioStatus>,
    /// Counters summed over workers.
    pub counters: PortSnapshot,
}

/// The whole answer to `status`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// Daemon version.
    pub version: String,
    /// Packet I/O backend in use.
    pub backend: String,
    /// Worker threads.
    pub workers: usize,
    /// `[daemon] realtime`: what the workers' scheduling follows (`worker_threads` is what
    /// it gives now); `None` from a daemon older than the field.
    #[serde(default)]
    pub realtime: Option<RealtimeMode>,
    /// `[daemon] realtime_priority` (`None` likewise).
    #[serde(default)]
    pub realtime_priority: Option<u8>,
    /// Each worker thread's scheduling now (real-time policy and priority).
    pub worker_threads: Vec<WorkerSched>,
    /// Seconds since start.
    pub uptime_s: f64,
    /// The last configuration load: at start, or the last SIGHUP reload (refused or not).
    #[serde(default)]
    pub last_reload: Option<ReloadOutcome>,
    /// Ports.
    pub ports: Vec<PortStatus>,
}

/// Everything the status answer is built from.
pub struct StatusSource {
    /// Ports as planned.
    pub ports: Vec<PortPlan>,
    /// The live (reloadable) settings.
    pub live: Arc<SettingsCell>,
    /// Shared per-port state.
    pub shared: Vec<Arc<SharedPort>>,
    /// Every worker's counters.
    pub workers: Vec<Arc<WorkerStats>>,
    /// Backend in use.
    pub backend: &'static str,
    /// CLOCK_MONOTONIC ns at start.
    pub started_ns: u64,
    /// Link-up state per port (peer); empty when link-up is off.
    pub links: Vec<Arc<LinkShared>>,
    /// Thread id of each worker.
    pub worker_tids: Vec<i32>,
    /// `[daemon] realtime` and `realtime_priority`.
    pub realtime: (RealtimeMode, u8),
    /// The last configuration load (start or SIGHUP reload).
    pub reloads: Arc<ReloadLog>,
    /// How each port's times are taken (as set up; see [`TimeStamping::as_seen`]).
    pub time_stamping: Vec<TimeStamping>,
    /// Each port's XDP program, in port order; empty on AF_PACKET.
    pub xdp: Vec<Arc<XdpProgram>>,
}

impl StatusSource {
    /// The current status.
    pub fn status(&self) -> Status {
        let now = now_ns();
        let live = self.live.get();
        let refs: Vec<&WorkerStats> = self.workers.iter().map(|w| w.as_ref()).collect();
        let ports = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let counters = snapshot(&p.iface, i, &refs, &self.shared[i], now);
                let (paused, _) = self.shared[i].paused(now);
                let priorities = (0..PRIORITIES)
                    .map(|prio| {
                        let (plan, source) = live.plan_for(i, prio);
                        let pfc = counters.pfc_in_force(prio, plan.pfc);
                        PrioStatus {
                            priority: prio,
                            mode: plan.mode().to_string(),
                            xoff_bytes: pfc.map(|p| p.xoff),
                            xon_bytes: pfc.map(|p| p.xon),
                            headroom_bytes: pfc.map(|p| p.headroom),
                            sfc_threshold_bytes: plan.sfc.map(|f| f.threshold),
                            limit_bytes: Some(plan.limit),
                            source: source.to_string(),
                            headroom_source: counters.headroom_source(prio).map(str::to_string),
                            headroom_terms: counters.headroom_source(prio).map(|_| {
                                [
                                    counters.headroom_floor[prio],
                                    counters.headroom_model[prio],
                                    counters.headroom_evidence[prio],
                                ]
                            }),
                            headroom_notice_bytes: counters.headroom_notice[prio],
                            xoff_squeezed: pfc
                                .zip(plan.pfc)
                                .is_some_and(|(f, p)| f.buffer() > p.buffer()),
                            headroom_changes: counters.headroom_changes[prio],
                            headroom_changed_ago_s: (counters.headroom_changed_ns[prio] > 0).then(
                                || {
                                    now.saturating_sub(counters.headroom_changed_ns[prio]) as f64
                                        / 1e9
                                },
                            ),
                            overshoot_max_bytes: counters
                                .overshoot
                                .get(prio)
                                .map_or(0, |h| h.quantile_bound(1.0)),
                            drain_rate_bytes_per_s: (counters.pfc_drain_rate[prio] > 0)
                                .then_some(counters.pfc_drain_rate[prio]),
                            peak_excess_bytes: (counters.pfc_drain_rate[prio] > 0)
                                .then_some(counters.pfc_peak_excess[prio]),
                            ingress_bytes: self.shared[i].occupancy(prio),
                            rx_backlog_bytes: counters.rx_backlog_bytes[prio],
                            paused: paused & (1 << prio) != 0,
                            queue_bytes: counters.queue_bytes[prio],
                            watchdog: match (
                                live.watchdog.is_some(),
                                counters.watchdog_stormed[prio],
                            ) {
                                (false, _) => "off",
                                (true, 0) => "ok",
                                (true, _) => "stormed",
                            }
                            .to_string(),
                            storms: counters.watchdog_storms[prio],
                        }
                    })
                    .collect();
                PortStatus {
                    iface: p.iface.clone(),
                    link: iface_link(&p.iface)
                        .map_or_else(|_| "missing".to_string(), |l| l.operstate),
                    egress_held: self.shared[i].egress_held(),
                    speed_bps: p.speed_bps,
                    trust: p.trust.name().to_string(),
                    peer: self.links.get(i).and_then(|l| l.peer()),
                    round_trip_ns: live.rtt_ns.get(i).copied().flatten(),
                    headroom_model: live.model.get(i).copied().flatten(),
                    time_stamping: self
                        .time_stamping
                        .get(i)
                        .map(|t| self.xdp.get(i).map_or(*t, |x| t.as_seen(&x.counters()))),
                    priorities,
                    counters,
                }
            })
            .collect();
        Status {
            version: env!("CARGO_PKG_VERSION").to_string(),
            backend: self.backend.to_string(),
            workers: self.workers.len(),
            realtime: Some(self.realtime.0),
            realtime_priority: Some(self.realtime.1),
            worker_threads: self
                .worker_tids
                .iter()
                .enumerate()
                .map(|(w, &tid)| WorkerSched::read(w, tid))
                .collect(),
            uptime_s: now.saturating_sub(self.started_ns) as f64 / 1e9,
            last_reload: Some(self.reloads.last()),
            ports,
        }
    }
}

/// Why the control socket could not be set up or reached.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Binding the socket failed.
    #[error("control socket {path}: {source}")]
    Bind {
        /// Socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The client could not talk to the daemon.
    #[error("cannot reach the daemon at {path}: {source} (is `lossless run` running?)")]
    Connect {
        /// Socket path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The daemon answered something unexpected.
    #[error("bad answer from the daemon: {0}")]
    Answer(String),
}

/// Binds the control socket at `path` (replacing a stale one), mode 0600.
pub fn bind(path: &Path) -> Result<std::os::unix::net::UnixListener, ControlError> {
    let err = |source| ControlError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    // A socket file left by a crashed run is stale if nobody answers on it.
    if path.exists() && UnixStream::connect(path).is_err() {
        let _ = std::fs::remove_file(path);
    }
    let l = std::os::unix::net::UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    l.set_nonblocking(true).map_err(err)?;
    Ok(l)
}

/// Answers requests on `listener` until `shutdown`, then drains ([`shutdown::serve`]).
/// Requests are one line: `status`.
pub async fn serve(listener: UnixListener, source: Arc<StatusSource>, shutdown: Arc<Shutdown>) {
    shutdown::serve(listener, &shutdown, |conn| {
        let source = source.clone();
        async move {
            let _ = answer(conn, &source).await;
        }
    })
    .await;
}

async fn answer(conn: tokio::net::UnixStream, source: &StatusSource) -> std::io::Result<()> {
    let (rd, mut wr) = conn.into_split();
    let mut line = String::new();
    tokio::io::BufReader::new(rd)
        .take(4096)
        .read_line(&mut line)
        .await?;
    let reply = match line.trim() {
        "status" => serde_json::to_string(&source.status()).expect("status serialises"),
        other => serde_json::json!({ "error": format!("unknown request {other:?}; try status") })
            .to_string(),
    };
    wr.write_all(reply.as_bytes()).await?;
    wr.write_all(b"\n").await?;
    wr.shutdown().await
}

/// Asks the daemon at `path` for its status.
pub fn query(path: &Path) -> Result<Status, ControlError> {
    let connect_err = |source| ControlError::Connect {
        path: path.to_path_buf(),
        source,
    };
    let mut s = UnixStream::connect(path).map_err(connect_err)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(connect_err)?;
    s.write_all(b"status\n").map_err(connect_err)?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(connect_err)?;
    serde_json::from_str(&line).map_err(|e| ControlError::Answer(format!("{e}: {line}")))
}

/// `0`, or the total and the non-zero reasons: `5851 (headroom_overflow 5851)`.
fn by_reason<'a>(reasons: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let nonzero: Vec<(&str, u64)> = reasons.into_iter().filter(|&(_, n)| n > 0).collect();
    if nonzero.is_empty() {
        return "0".to_string();
    }
    let total: u64 = nonzero.iter().map(|&(_, n)| n).sum();
    let each: Vec<String> = nonzero.iter().map(|(r, n)| format!("{r} {n}")).collect();
    format!("{total} ({})", each.join(", "))
}

/// One line per port of what changed between two statuses of the same daemon, per second:
/// frames and bits received and sent, PFC frames sent and received, drops.
pub fn rates(before: &Status, now: &Status) -> String {
    use std::fmt::Write as _;
    let dt = now.uptime_s - before.uptime_s;
    let mut out = String::new();
    if dt <= 0.0 {
        return out;
    }
    for (b, n) in before.ports.iter().zip(&now.ports) {
        let per_s = |x: u64, y: u64| y.saturating_sub(x) as f64 / dt;
        let (bc, nc) = (&b.counters, &n.counters);
        let sum = |a: &[u64]| a.iter().sum::<u64>();
        let drops = |c: &PortSnapshot| {
            c.drops.values().sum::<u64>() + c.kernel_drops.rx_lost() + c.kernel_drops.tx_refused
        };
        let _ = writeln!(
            out,
            "{}: rx {:.0} frames/s {}, tx {:.0} frames/s {}, PFC tx {:.0}/s rx {:.0}/s, drops {:.0}/s",
            n.iface,
            per_s(bc.rx_frames, nc.rx_frames),
            crate::units::format_rate(8.0 * per_s(bc.rx_bytes, nc.rx_bytes)),
            per_s(bc.tx_frames, nc.tx_frames),
            crate::units::format_rate(8.0 * per_s(bc.tx_bytes, nc.tx_bytes)),
            per_s(sum(&bc.pfc_tx), sum(&nc.pfc_tx)),
            per_s(sum(&bc.pfc_rx), sum(&nc.pfc_rx)),
            per_s(drops(bc), drops(nc)),
        );
    }
    out
}

/// Human-readable rendering of a status.
pub fn text(s: &Status) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lossless {} up {:.0} s, {} worker(s), backend {}",
        s.version, s.uptime_s, s.workers, s.backend
    );
    if let (Some(mode), Some(priority)) = (s.realtime, s.realtime_priority) {
        let _ = writeln!(out, "real-time: {}", mode.describe(priority));
    }
    for t in &s.worker_threads {
        let _ = writeln!(out, "worker {} (thread {}): {}", t.worker, t.tid, t);
    }
    if let Some(r) = &s.last_reload {
        let ago = format!("{:.0} s", (unix_now_s() - r.at_unix_s).max(0.0));
        match &r.error {
            None => {
                let _ = writeln!(out, "configuration: loaded {ago} ago");
            }
            Some(e) => {
                let _ = writeln!(
                    out,
                    "configuration: last reload REFUSED {ago} ago, the previous one runs: {e}"
                );
            }
        }
        if !r.restart_pending.is_empty() {
            let _ = writeln!(
                out,
                "configuration: the file changes what takes effect only at a restart (the \
                 running values stay until then): {}",
                r.restart_pending.join(", ")
            );
        }
    }
    for p in &s.ports {
        let _ = writeln!(
            out,
            "\nport {} link {}{} speed {} trust {} peer {} round trip {} (stamping rx {}, tx {})",
            p.iface,
            p.link,
            if p.egress_held {
                " (egress held: no carrier)"
            } else {
                ""
            },
            crate::units::format_rate(p.speed_bps as f64),
            p.trust,
            p.peer.as_deref().unwrap_or("-"),
            p.round_trip_ns
                .map_or("-".to_string(), |ns| format!("{:.1} us", ns as f64 / 1e3)),
            p.time_stamping.map_or("-", |t| t.rx.name()),
            p.time_stamping.map_or("-", |t| t.tx.name()),
        );
        if let Some(m) = p.headroom_model {
            let _ = writeln!(
                out,
                "  headroom model {} B = wire {} + own lag {} ({:.1} us) + peer {} (reaction {:.1} us) + frames {}; lag and reaction at {}",
                m.split.total(),
                m.split.wire,
                m.split.own_lag,
                m.own_lag_ns as f64 / 1e3,
                m.split.peer,
                m.peer_reaction_ns as f64 / 1e3,
                m.split.frames,
                crate::units::format_rate(m.rate_bps as f64),
            );
        }
        let c = &p.counters;
        let _ = writeln!(
            out,
            "  rx {} frames, tx {} frames, RX ring peak {} frames, fill ring {} buffers, {} \
             zero-copy sockets, starved {} times, worker stalls {} ({} guard PFC, {} guard \
             SFCM){}",
            c.rx_frames,
            c.tx_frames,
            c.rx_backlog_frames_peak,
            c.fill_target,
            c.zero_copy_sockets,
            c.fill_starved_events,
            c.stalls,
            c.stall_pfc_tx.iter().sum::<u64>(),
            c.stall_sfcm_tx.iter().sum::<u64>(),
            match c.stall_guard_wait_ns {
                0 => String::new(),
                ns => format!(", guard waits {} us", ns / 1000),
            },
        );
        let _ = writeln!(
            out,
            "  drops {}, kernel drops {}",
            by_reason(c.drops.iter().map(|(r, n)| (r.as_str(), *n))),
            by_reason(c.kernel_drops.by_reason()),
        );
        let _ = writeln!(
            out,
            "  prio mode   xoff      xon       headroom  limit     source  rx ring   ingress   queue     paused watchdog pfc tx    pfc rx"
        );
        for q in &p.priorities {
            let o = |v: Option<u64>| v.map_or("-".to_string(), |b| b.to_string());
            let _ = writeln!(
                out,
                "  {:<4} {:<6} {:<9} {:<9} {:<9} {:<9} {:<7} {:<9} {:<9} {:<9} {:<6} {:<8} {:<9} {}",
                q.priority,
                q.mode,
                o(q.xoff_bytes),
                o(q.xon_bytes),
                o(q.headroom_bytes),
                o(q.limit_bytes),
                q.source,
                q.rx_backlog_bytes,
                q.ingress_bytes,
                q.queue_bytes,
                if q.paused { "yes" } else { "no" },
                q.watchdog,
                c.pfc_tx[q.priority],
                c.pfc_rx[q.priority],
            );
            if let (Some(src), Some([floor, measured, observed])) =
                (&q.headroom_source, q.headroom_terms)
            {
                let changed = match q.headroom_changed_ago_s {
                    Some(ago) => {
                        format!("changed {} times, last {ago:.1} s ago", q.headroom_changes)
                    }
                    None => "never changed".to_string(),
                };
                let _ = writeln!(
                    out,
                    "       headroom {} from {src}: floor {floor}, measured {measured}, observed {observed} (notice {}); {changed}; largest overshoot after XOFF < {}",
                    o(q.headroom_bytes),
                    q.headroom_notice_bytes,
                    q.overshoot_max_bytes
                );
                if q.xoff_squeezed {
                    let _ = writeln!(
                        out,
                        "       XOFF at its minimum: the buffer (xoff + headroom as configured) leaves no room for an XOFF beside the headroom in force; raise it"
                    );
                }
            }
            let prio = q.priority;
            if q.sfc_threshold_bytes.is_some() || c.sfcm_tx[prio] + c.sfcm_rx[prio] > 0 {
                let _ = writeln!(
                    out,
                    "       SFC messages sent {} (stall guard {}), received {} (passed on to \
                     another host {}); egress paused by SFC {:.1} ms",
                    c.sfcm_tx[prio],
                    c.stall_sfcm_tx[prio],
                    c.sfcm_rx[prio],
                    c.sfcm_forwarded[prio],
                    c.sfc_paused_ns[prio] as f64 / 1e6,
                );
            }
            if let Some(rate) = q.drain_rate_bytes_per_s {
                let _ = writeln!(
                    out,
                    "       drains {:.1} MB/s while backlogged (xoff_time); XOFF in force {}, peaks {} beyond it",
                    rate as f64 / 1e6,
                    o(q.xoff_bytes),
                    o(q.peak_excess_bytes)
                );
            }
            if c.headroom_borrowed[prio] > 0 {
                let _ = writeln!(
                    out,
                    "       beyond the buffer: {} frames kept in spare frames of the pool ([headroom] borrow), at most {} bytes beyond it",
                    c.headroom_borrowed[prio], c.headroom_borrowed_peak[prio],
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::port::KernelDrops;

    #[test]
    fn drops_by_reason_count_each_kernel_drop_once() {
        assert_eq!(by_reason([("tail_drop", 0)]), "0");
        // The kernel counts a fill-ring drop in rx_dropped too: one drop, not two.
        let k = KernelDrops {
            rx_dropped: 3732,
            rx_ring_full: 0,
            fill_ring_empty: 3732,
            ..KernelDrops::default()
        };
        assert_eq!(by_reason(k.by_reason()), "3732 (fill_ring_empty 3732)");
        let k = KernelDrops {
            rx_dropped: 10,
            rx_ring_full: 2,
            fill_ring_empty: 5,
            tx_invalid: 1,
            tx_refused: 4,
        };
        assert_eq!(
            by_reason(k.by_reason()),
            "17 (rx_ring_full 2, fill_ring_empty 5, tx_invalid 1, tx_refused 4, other 5)"
        );
        // A full RX ring's drops are not in rx_dropped: they leave `other` as it was.
        let more_full = KernelDrops {
            rx_ring_full: 6,
            ..k
        };
        assert_eq!(more_full.by_reason()[4], ("other", 5));
        assert_eq!(more_full.rx_lost(), 10 + 6);
    }

    #[test]
    fn the_scheduling_rule_is_shown_where_the_daemon_says_it() {
        let mut s = Status {
            version: "0".into(),
            backend: "af_xdp".into(),
            workers: 0,
            realtime: Some(RealtimeMode::Auto),
            realtime_priority: Some(50),
            worker_threads: Vec::new(),
            uptime_s: 0.0,
            last_reload: None,
            ports: Vec::new(),
        };
        assert!(text(&s).contains(
            "\nreal-time: auto (SCHED_FIFO priority 50 when permitted, while a priority is \
             lossless)\n"
        ));
        // A daemon older than the fields answers without them: no line rather than a guess.
        let mut older = serde_json::to_value(&s).unwrap();
        let fields = older.as_object_mut().unwrap();
        fields.remove("realtime");
        fields.remove("realtime_priority");
        s = serde_json::from_value(older).unwrap();
        assert_eq!(s.realtime, None);
        assert!(!text(&s).contains("real-time"), "{}", text(&s));
    }
}
