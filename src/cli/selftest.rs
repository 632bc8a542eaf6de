//! `lossless selftest`: every frame class the daemon speaks, each way between two ports wired
//! to each other, compared byte for byte on arrival, and a peer-delay exchange each way.

use std::{fmt::Write as _, time::Duration};

use clap::Args;

use super::{common, error::CliError};
use crate::control::signals;
use crate::{
    config::Plan,
    dataplane::{open::Backend, xdp_prog::XdpMode},
    nic::selftest::{self, Required, SelftestConfig, SelftestReport},
};

/// Flags of `lossless selftest`.
#[derive(Debug, Clone, Args)]
pub struct SelftestArgs {
    /// First port.
    #[arg(long)]
    pub a: String,
    /// Second port, wired to the first (a cable, a veth pair, or through a device under test).
    #[arg(long)]
    pub b: String,
    /// Frames of each class to send each way.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub count: u32,
    /// Peer-delay samples to take each way.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pdelay_samples: u32,
    /// How long to wait for frames after the last one was sent, and for each peer-delay answer
    /// (at least 1ms).
    #[arg(long, value_parser = timeout, default_value = "500ms")]
    pub timeout: Duration,
    /// Priority of the PFC, SFCM, credit and test frames.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub priority: u8,
    /// Packet I/O backend: auto (AF_XDP, else AF_PACKET), af-xdp or af-packet.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// XDP attach mode: auto (native, else generic), native or skb.
    #[arg(long, value_enum, default_value_t = XdpMode::Auto)]
    pub xdp_mode: XdpMode,
    /// Frames in the frame pool (2 KiB each).
    #[arg(long, default_value_t = 4096)]
    pub frames: u32,
    /// Fail only on what this configuration relies on (PAUSE and PFC for PFC priorities, LLDP
    /// and peer delay with link-up, SFCM for SFC, credit updates for credit priorities, test
    /// frames always); without it every class must get through.
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The shortest `--timeout`: frames still on their way (through a device under test, or a
/// peer-delay answer) are not "lost" after less than a millisecond, and at zero every one was.
const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// Parses `--timeout`, at least [`MIN_TIMEOUT`].
fn timeout(s: &str) -> Result<Duration, String> {
    match common::duration(s)? {
        d if d < MIN_TIMEOUT => Err(format!(
            "{s:?}: must be at least 1ms, or frames still on their way count as lost"
        )),
        d => Ok(d),
    }
}

/// Runs `lossless selftest`; `Ok(false)` when something did not get through intact.
pub fn run(args: &SelftestArgs) -> Result<bool, CliError> {
    let required = match &args.config {
        Some(path) => Required::for_plan(&Plan::load(path)?),
        None => Required::all(),
    };
    let cfg = SelftestConfig {
        a: args.a.clone(),
        b: args.b.clone(),
        count: args.count,
        pdelay_samples: args.pdelay_samples,
        timeout: args.timeout,
        priority: args.priority,
        backend: args.backend,
        xdp_mode: args.xdp_mode,
        frames: args.frames,
        required,
        stop: signals::install(),
    };
    let report = selftest::run(&cfg)?;
    common::print_report(&report, args.json, text);
    Ok(report.passed)
}

fn us(ns: i64) -> String {
    format!("{:.1} us", ns as f64 / 1e3)
}

fn text(r: &SelftestReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "selftest {} <-> {} ({})", r.a, r.b, r.backend);
    for d in &r.directions {
        let _ = writeln!(s, "{} -> {}:", d.from, d.to);
        for c in &d.classes {
            let _ = writeln!(
                s,
                "  {:<5} {:<13} {}{}",
                match (c.passed(), c.required) {
                    (true, _) => "ok",
                    (false, true) => "FAIL",
                    (false, false) => "miss",
                },
                c.class.label(),
                c.tally(),
                if c.required { "" } else { " (not needed)" }
            );
        }
        match &d.pdelay.measurement {
            Some(m) => {
                let _ = writeln!(
                    s,
                    "  ok    peer delay    {} samples of {} requests, round trip min {}, median {}, max {}",
                    m.samples.len(),
                    m.requests,
                    us(m.min_ns),
                    us(m.median_ns),
                    us(m.max_ns)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "  {:<5} peer delay    {} requests, {} answered: {}",
                    if d.pdelay.required { "FAIL" } else { "miss" },
                    d.pdelay.requests,
                    d.pdelay.answered,
                    d.pdelay.error.as_deref().unwrap_or("no measurement")
                );
            }
        }
        if d.other_frames > 0 {
            let _ = writeln!(s, "  ({} other frames arrived)", d.other_frames);
        }
    }
    if r.passed && r.missing.is_empty() {
        let _ = writeln!(s, "passed: every frame class arrived intact both ways");
    } else {
        let _ = writeln!(
            s,
            "{}:",
            if r.passed {
                "passed (what the configuration relies on got through); missing"
            } else {
                "FAILED"
            }
        );
        for m in &r.missing {
            let _ = writeln!(s, "  {m}");
        }
    }
    s
}
