//! `lossless run` and `lossless check-config`.

use std::path::PathBuf;

use clap::Args;

use super::common;
use crate::{
    config::Plan,
    control::{daemon, signals},
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
    // The same probe as `lossless doctor`: say now, naming the fix, when a port cannot send or
    // receive what its priorities' modes need, instead of failing silently under load.
    for w in startup_warnings(&plan) {
        tracing::warn!("{w}");
    }
    let stop = signals::install();
    let reload = signals::install_reload();
    let report = daemon::run(&plan, &args.config, stop, reload)?;
    common::print_report(&report, args.json, |r| {
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
    Ok(())
}

/// Validates a configuration file and explains what it will do.
pub fn check(args: &CheckArgs) -> Result<(), RunError> {
    let plan = Plan::load(&args.file)?;
    println!("{}: OK", args.file.display());
    let d = &plan.daemon;
    println!(
        "workers: {}, real-time {} (SCHED_FIFO priority {}{})",
        d.workers,
        d.realtime.name(),
        d.realtime_priority,
        match d.realtime {
            RealtimeMode::Auto => " when permitted",
            RealtimeMode::On => ", required",
            RealtimeMode::Off => " not used",
        }
    );
    for p in &plan.ports {
        println!(
            "port {}: {} , trust {:?}, PFC pause {} quanta",
            p.iface,
            format_rate(p.speed_bps as f64),
            p.trust,
            p.pause_quanta
        );
    }
    for (prio, p) in plan.prios.iter().enumerate() {
        let mut line = match (p.pfc, p.lossless()) {
            (_, false) => format!("priority {prio}: lossy, tail-drop above {} bytes", p.limit),
            (Some(f), true) => format!(
                "priority {prio}: lossless ({}), XOFF {} B, XON {} B, headroom {} B",
                p.mode().to_uppercase(),
                f.xoff,
                f.xon,
                f.headroom
            ),
            (None, true) => format!(
                "priority {prio}: lossless ({}), buffer {} B",
                p.mode().to_uppercase(),
                p.limit
            ),
        };
        if let Some(f) = p.sfc {
            line += &format!(", SFC above {} B queued", f.threshold);
        }
        println!("{line}");
    }
    for w in startup_warnings(&plan) {
        println!("warning: {w}");
    }
    Ok(())
}
