//! `lossless run` and `lossless check-config`.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::common;
use crate::{
    config::{plan::StartThresholds, Plan},
    control::daemon,
    dataplane::sched::RealtimeMode,
    nic::needs::startup_warnings,
    units::format_rate,
};

/// Flags of `lossless run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Configuration file (TOML).
    #[arg(long, short)]
    pub config: PathBuf,
    /// Print the final report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `lossless check-config`.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Configuration file (TOML).
    pub file: PathBuf,
    /// Print the result as JSON: the plan, the warnings, or `ok: false` and the error.
    #[arg(long)]
    pub json: bool,
    /// Check the file alone, not against this host (its interfaces, the CPUs this process
    /// may run on, its permission for real-time scheduling): for a file meant for another
    /// machine.
    #[arg(long)]
    pub file_only: bool,
}

/// Exit code for a configuration error (sysexits EX_CONFIG; systemd does not restart on it).
pub const EXIT_CONFIG: i32 = 78;

/// Errors of these commands, with the exit code each maps to.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The daemon failed.
    #[error(transparent)]
    Daemon(#[from] daemon::DaemonError),
}

impl RunError {
    /// Process exit code.
    pub fn exit_code(&self) -> i32 {
        match self {
            // The interfaces as found at start do not fit the configuration (port[N].mtu).
            RunError::Config(_) | RunError::Daemon(daemon::DaemonError::Config(_)) => EXIT_CONFIG,
            RunError::Daemon(_) => 1,
        }
    }
}

/// Runs the daemon.
pub fn run(args: &RunArgs) -> Result<(), RunError> {
    let plan = Plan::load(&args.config)?;
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }
    // A missing interface is one clear error, not a warning followed by failures.
    daemon::check_interfaces(&plan)?;
    // The same probe as `lossless doctor`: say now, naming the fix, when a port cannot send or
    // receive what its priorities' modes need, instead of failing silently under load.
    for w in startup_warnings(&plan) {
        tracing::warn!("{w}");
    }
    let (out, end) = stopped_output(daemon::run(&plan, &args.config)?, args.json);
    print!("{out}");
    end
}

/// What `run` prints when the daemon stopped, and how it ends: the report of what was
/// counted, also when a worker failed (what got through up to the failure), then that
/// failure as the error.
fn stopped_output(stopped: daemon::Stopped, json: bool) -> (String, Result<(), RunError>) {
    let out = common::render_report(&stopped.report, json, |r| {
        let mut s = format!("lossless stopped ({} workers, {})\n", r.workers, r.backend);
        for t in &r.worker_threads {
            s += &format!("worker {}: {}\n", t.worker, t);
        }
        for p in &r.ports {
            s += &format!(
                "{}: rx {} frames, tx {} frames, PFC tx {:?}, PFC rx {:?}, drops {:?}\n",
                p.iface, p.rx_frames, p.tx_frames, p.pfc_tx, p.pfc_rx, p.drops
            );
        }
        s
    });
    (out, stopped.failure.map_or(Ok(()), |e| Err(e.into())))
}

/// What `check-config` found: the plan explained, and the warnings of the configuration's
/// own checks and of the start-up probe.
#[derive(Debug, Serialize)]
struct CheckReport {
    file: String,
    ok: bool,
    /// Checked against this host as `run` checks it at start (false: `--file-only`).
    host_checked: bool,
    workers: usize,
    realtime: RealtimeMode,
    realtime_priority: u8,
    ports: Vec<PortCheck>,
    priorities: Vec<PrioCheck>,
    warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
struct PortCheck {
    iface: String,
    speed_bps: u64,
    trust: String,
    pause_quanta: u16,
}

#[derive(Debug, Serialize)]
struct PrioCheck {
    priority: usize,
    mode: String,
    xoff_bytes: Option<u64>,
    xon_bytes: Option<u64>,
    headroom_bytes: Option<u64>,
    /// Tail-drop limit (lossy) or buffer (credit), bytes.
    limit_bytes: u64,
    sfc_threshold_bytes: Option<u64>,
    /// Where a PFC priority's thresholds from start differ from the file's, per port: the
    /// ones that run (`[headroom] min_headroom`, the adaptive prior). Empty: as in the file.
    at_start: Vec<StartCheck>,
}

/// A PFC priority's thresholds as they run from start on one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct StartCheck {
    iface: String,
    xoff_bytes: u64,
    xon_bytes: u64,
    headroom_bytes: u64,
    /// What set the headroom: `configured` (the floor, `[headroom] min_headroom`) or
    /// `observed` (the adaptive headroom's prior, half the buffer).
    source: &'static str,
}

impl StartCheck {
    fn of(iface: &str, t: StartThresholds) -> Self {
        StartCheck {
            iface: iface.to_string(),
            xoff_bytes: t.xoff,
            xon_bytes: t.xon,
            headroom_bytes: t.headroom,
            source: t.source,
        }
    }

    /// The thresholds in words, for the text report.
    fn words(&self) -> String {
        let why = match self.source {
            "observed" => {
                "the adaptive headroom's prior, half the buffer, until XOFFs show \
                           what it needs ([headroom] adaptive)"
            }
            _ => "[headroom] min_headroom is the floor",
        };
        format!(
            "XOFF {} B, XON {} B, headroom {} B: {why}",
            self.xoff_bytes, self.xon_bytes, self.headroom_bytes
        )
    }
}

impl CheckReport {
    /// `plan` from `file` explained; `host` is what was found of this host (`None`: the file
    /// alone was checked, `--file-only`).
    fn of(file: &std::path::Path, plan: &Plan, host: Option<&daemon::HostCheck>) -> Self {
        let max_frames = match host {
            Some(h) => h.max_frames.clone(),
            None => plan.ports.iter().map(|_| None).collect(),
        };
        // What start runs of each PFC priority, per port, where it is not the file's.
        let starts: Vec<_> = plan
            .ports
            .iter()
            .zip(max_frames)
            .map(|(port, m)| (port, plan.start_thresholds(m)))
            .collect();
        CheckReport {
            file: file.display().to_string(),
            ok: true,
            host_checked: host.is_some(),
            workers: plan.daemon.workers,
            realtime: plan.daemon.realtime,
            realtime_priority: plan.daemon.realtime_priority,
            ports: plan
                .ports
                .iter()
                .map(|p| PortCheck {
                    iface: p.iface.clone(),
                    speed_bps: p.speed_bps,
                    trust: p.trust.name().to_string(),
                    pause_quanta: p.pause_quanta,
                })
                .collect(),
            priorities: plan
                .prios
                .iter()
                .enumerate()
                .map(|(priority, p)| PrioCheck {
                    priority,
                    mode: p.mode().to_string(),
                    xoff_bytes: p.pfc.map(|f| f.xoff),
                    xon_bytes: p.pfc.map(|f| f.xon),
                    headroom_bytes: p.pfc.map(|f| f.headroom),
                    limit_bytes: p.limit,
                    sfc_threshold_bytes: p.sfc.map(|f| f.threshold),
                    at_start: match p.pfc {
                        Some(f) if starts.iter().any(|(_, s)| s[priority].is_some()) => starts
                            .iter()
                            .map(|(port, s)| {
                                let as_configured = StartThresholds {
                                    xoff: f.xoff,
                                    xon: f.xon,
                                    headroom: f.headroom,
                                    source: "configured",
                                };
                                StartCheck::of(&port.iface, s[priority].unwrap_or(as_configured))
                            })
                            .collect(),
                        _ => Vec::new(),
                    },
                })
                .collect(),
            warnings: match host {
                Some(h) => plan
                    .warnings
                    .iter()
                    .chain(&h.warnings)
                    .cloned()
                    .chain(startup_warnings(plan))
                    .collect(),
                None => plan.warnings.clone(),
            },
        }
    }

    fn text(&self) -> String {
        let mut out = match self.host_checked {
            true => format!("{}: OK\n", self.file),
            false => format!(
                "{}: OK as a file (--file-only: not checked against this host's interfaces, \
                 CPUs and real-time permission)\n",
                self.file
            ),
        };
        out += &format!(
            "workers: {}, real-time {}\n",
            self.workers,
            self.realtime.describe(self.realtime_priority)
        );
        for p in &self.ports {
            out += &format!(
                "port {}: {}, trust {}, PFC pause {} quanta\n",
                p.iface,
                format_rate(p.speed_bps as f64),
                p.trust,
                p.pause_quanta
            );
        }
        for q in &self.priorities {
            let prio = q.priority;
            out += &match (q.xoff_bytes, q.xon_bytes, q.headroom_bytes) {
                _ if q.mode == "lossy" => {
                    format!("priority {prio}: lossy, tail-drop above {} bytes", q.limit_bytes)
                }
                (Some(xoff), Some(xon), Some(headroom)) => format!(
                    "priority {prio}: lossless ({}), XOFF {xoff} B, XON {xon} B, headroom {headroom} B",
                    q.mode.to_uppercase(),
                ),
                _ => format!(
                    "priority {prio}: lossless ({}), buffer {} B",
                    q.mode.to_uppercase(),
                    q.limit_bytes
                ),
            };
            if let Some(t) = q.sfc_threshold_bytes {
                out += &format!(", SFC above {t} B queued");
            }
            out += "\n";
            let same = q.at_start.windows(2).all(|w| {
                (w[0].xoff_bytes, w[0].xon_bytes, w[0].headroom_bytes)
                    == (w[1].xoff_bytes, w[1].xon_bytes, w[1].headroom_bytes)
            });
            match q.at_start.first() {
                None => {}
                Some(s) if same => out += &format!("  runs from start with {}\n", s.words()),
                Some(_) => {
                    for s in &q.at_start {
                        out += &format!("  runs from start on {} with {}\n", s.iface, s.words());
                    }
                }
            }
        }
        for w in &self.warnings {
            out += &format!("warning: {w}\n");
        }
        out
    }
}

/// Validates a configuration file and explains what it will do; with `--json`, as one
/// object (`ok: false` and `error` when the file is invalid). Unless `--file-only`, the file
/// is checked against this host as `run` checks it at start ([`daemon::check_host`]), so
/// that a file `run` would refuse is refused here with the same error and exit code.
pub fn check(args: &CheckArgs) -> Result<(), RunError> {
    let file = args.file.display().to_string();
    let refused = |e: RunError| {
        if args.json {
            let error = e.to_string();
            println!(
                "{}",
                serde_json::json!({ "file": file, "ok": false, "error": error })
            );
        }
        Err(e)
    };
    let plan = match Plan::load(&args.file) {
        Ok(p) => p,
        Err(e) => return refused(e.into()),
    };
    let host = match args.file_only {
        true => None,
        false => match daemon::check_host(&plan, &file) {
            Ok(h) => Some(h),
            Err(e) => return refused(e.into()),
        },
    };
    common::print_report(
        &CheckReport::of(&args.file, &plan, host.as_ref()),
        args.json,
        CheckReport::text,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        control::daemon::{DaemonReport, Stopped},
        dataplane::stats::PortSnapshot,
        fc::plan::PrioPlan,
    };

    /// A daemon stopped by a failed worker prints the report of what it counted, then exits
    /// with the failure (before, it exited with the error alone: what got through until the
    /// failure was not said anywhere).
    #[test]
    fn a_failed_worker_still_reports_what_was_counted() {
        let stopped = || Stopped {
            report: DaemonReport {
                backend: "af_xdp",
                workers: 1,
                priorities: [PrioPlan::lossy(1000); 8],
                ports: vec![PortSnapshot {
                    iface: "d0".into(),
                    rx_frames: 1234,
                    ..Default::default()
                }],
                worker_threads: Vec::new(),
                memory_locked: false,
            },
            failure: Some(daemon::DaemonError::Panic(0)),
        };
        let (out, end) = stopped_output(stopped(), false);
        assert!(
            out.contains("lossless stopped (1 workers, af_xdp)") && out.contains("d0: rx 1234"),
            "{out}"
        );
        let e = end.unwrap_err();
        assert_eq!(
            (e.to_string().as_str(), e.exit_code()),
            ("worker 0 panicked", 1)
        );
        let (out, end) = stopped_output(stopped(), true);
        let r: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(r["ports"][0]["rx_frames"], 1234);
        assert!(end.is_err());
    }
}
