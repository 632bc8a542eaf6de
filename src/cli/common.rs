//! Flags shared by the single-interface tools and helpers for their output.

use std::str::FromStr;

use clap::Args;
use serde::Serialize;

use super::error::CliError;
use crate::{
    dataplane::{
        open::Backend,
        sched::{self, RealtimeError, RealtimeMode, Request},
        xdp_prog::XdpMode,
    },
    kernel::{ethtool, netlink::Netlink},
    traffic::IfaceSetup,
    units,
};

/// How a tool reaches its interface.
#[derive(Debug, Clone, Args)]
pub struct IfaceArgs {
    /// Interface to use.
    #[arg(long)]
    pub iface: String,
    /// Packet I/O backend: auto (AF_XDP, else AF_PACKET), af-xdp or af-packet.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// XDP attach mode: auto (native, else generic), native or skb.
    #[arg(long, value_enum, default_value_t = XdpMode::Auto)]
    pub xdp_mode: XdpMode,
    /// Frames in the frame pool (2 KiB each). A quarter of them, at most 8192, wait in the
    /// fill ring: the buffers a receiver has while it is not running (split between the
    /// interface's RX queues where it has several) [default: sink 32768; gen, send and
    /// measure 4096, which their sending needs, since binding a large pool stalls its CPU].
    #[arg(long)]
    pub frames: Option<u32>,
    /// Spin instead of sleeping when idle (lowest latency; burns a core).
    #[arg(long)]
    pub busy_poll: bool,
}

/// `--frames` of the sink when not given: its fill ring, a quarter of the pool (8,192
/// frames), is what it can receive while it is not running.
pub const RECEIVER_FRAMES: u32 = 32768;

/// `--frames` of the tools that mostly send (`gen`, `send`, `measure`) when not given. What
/// they hold is at most 128 frames in flight on the TX ring and a fill ring of a quarter of
/// the pool, so 4,096 frames (8 MiB) are plenty; and a small pool is quick to bind. Binding
/// an AF_XDP socket sets up one kernel struct per frame of its pool without letting any
/// other thread onto the CPU: 9.2-9.5 ms for 32,768 frames on the lab VM (`strace -T`),
/// during which a `SCHED_FIFO` thread on that CPU waited 8.7-9.1 ms, and the tool's exit held
/// it 5.8-6.5 ms more; with 4,096 frames neither waited 2 ms. A generator
/// started beside a running daemon does that to the worker pinned to its CPU: in a traced run
/// of `tests/credits.rs` the generator's start held it 44 ms (under load it takes longer than
/// on an idle VM), and in an untraced one a worker took no frame for 52 ms as the generator
/// started and a credit lane timed out.
pub const SENDER_FRAMES: u32 = 4096;

impl IfaceArgs {
    /// The traffic module's view of these flags, with `default_frames` ([`RECEIVER_FRAMES`]
    /// or [`SENDER_FRAMES`]) unless `--frames` was given.
    pub fn setup(&self, default_frames: u32) -> IfaceSetup {
        IfaceSetup {
            iface: self.iface.clone(),
            backend: self.backend,
            xdp_mode: self.xdp_mode,
            frames: self.frames.unwrap_or(default_frames),
            busy_poll: self.busy_poll,
        }
    }
}

/// The progress line of the tools that can run long (`gen`, `sink`, `cable`).
#[derive(Debug, Clone, Args)]
pub struct ProgressArgs {
    /// Log a progress line this often: what was sent or received since the previous one (a
    /// sink that has seen no test frame yet says so); "0s": never.
    #[arg(long, value_parser = duration, default_value = "10s")]
    pub progress: std::time::Duration,
}

/// Real-time flags of the tools that move frames (`gen`, `sink`, `cable`), so that they can be
/// fair peers of a real-time daemon on a busy machine.
#[derive(Debug, Clone, Args)]
pub struct RealtimeArgs {
    /// Run the frame loop SCHED_FIFO with memory locked, so other work on the machine cannot
    /// starve it (needs CAP_SYS_NICE or RLIMIT_RTPRIO; an error if not permitted).
    #[arg(long)]
    pub realtime: bool,
    /// SCHED_FIFO priority of --realtime (1..=99) [default: 50; gen: 40, below the daemon, sink
    /// and cable it feeds, since a paced generator spins between frames].
    #[arg(long, requires = "realtime",
          value_parser = clap::value_parser!(u8).range(1..=i64::from(sched::MAX_PRIORITY)))]
    pub realtime_priority: Option<u8>,
}

/// `--realtime-priority` of `gen` when not given. A generator paced on a host whose timed
/// wake-ups come late (35-85 µs on average on the lab VM) spins between its frames, so at `SCHED_FIFO` it keeps its CPU
/// from every thread of its priority or below except in the duty cycle's slices; below the
/// tools and daemon that carry its frames, it can never starve them (a generator at 23 starved
/// a cable at 21 into losing 805 frames at its RX ring in CI).
pub const GEN_REALTIME_PRIORITY: u8 = sched::DEFAULT_PRIORITY - 10;

impl RealtimeArgs {
    /// The request these flags make, if any, at `default` priority unless one is given.
    pub fn request(&self, default: u8) -> Option<Request> {
        self.realtime.then_some(Request {
            mode: RealtimeMode::On,
            priority: self.realtime_priority.unwrap_or(default),
            setting: "--realtime",
        })
    }

    /// Makes the calling thread (the tool's frame loop) real-time if asked, at `default`
    /// priority unless one is given: call it once the interface is open.
    pub fn apply(&self, default: u8) -> Result<(), RealtimeError> {
        self.request(default)
            .map_or(Ok(()), |r| sched::apply_to_this_thread(&r))
    }
}

/// Parses a rate flag ("2Gbit").
pub fn rate(s: &str) -> Result<u64, String> {
    units::parse_rate(s).map_err(|e| e.to_string())
}

/// Parses a size flag ("64KiB").
pub fn size(s: &str) -> Result<u64, String> {
    units::parse_size(s).map_err(|e| e.to_string())
}

/// Parses a duration flag ("5s"), at most [`units::MAX_DURATION_NS`]: a deadline of a clock
/// reading plus a longer one would wrap (a jitter of 2^63 ns became none at all).
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    let d = units::parse_duration(s).map_err(|e| e.to_string())?;
    if d.as_nanos() > u128::from(units::MAX_DURATION_NS) {
        return Err(format!(
            "{s:?} is longer than the longest duration, 2^62 ns (146 years)"
        ));
    }
    Ok(d)
}

/// Parses a duration flag that must be longer than zero (a stop time, a watch interval):
/// zero would end a run before it began, or spin.
pub fn nonzero_duration(s: &str) -> Result<std::time::Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err(format!("{s:?}: must be longer than 0")),
        d => Ok(d),
    }
}

/// Link speed a tool counts PAUSE/PFC quanta at: `flag` (`--link-speed`) if given, else the
/// interface's own speed as ethtool reports it (that of the link, so of the port at its other
/// end), else 10 Gbit/s. Logged, since the peer counts the same quanta at its own port's
/// speed: where the two differ, every pause lasts longer or shorter than meant.
pub fn link_speed(flag: Option<u64>, iface: &str) -> u64 {
    let (bps, from) = match flag {
        Some(bps) => (bps, "--link-speed"),
        None => match ethtool::link_modes(&mut Netlink::new(false), iface)
            .ok()
            .and_then(|m| m.speed_mbps)
        {
            Some(mbps) => (u64::from(mbps) * 1_000_000, "the interface's speed"),
            None => (DEFAULT_LINK_SPEED_BPS, "the interface tells none: assumed"),
        },
    };
    tracing::info!(
        iface,
        link_speed = %units::format_rate(bps as f64),
        from,
        "PAUSE/PFC quanta count at this speed; the port at the other end counts them at its own (--link-speed)"
    );
    bps
}

/// [`link_speed`] when neither the flag nor the interface tells one.
const DEFAULT_LINK_SPEED_BPS: u64 = 10_000_000_000;

/// Parses an IPv4 address flag.
pub fn ipv4(s: &str) -> Result<[u8; 4], String> {
    std::net::Ipv4Addr::from_str(s)
        .map(|a| a.octets())
        .map_err(|e| format!("{s:?}: {e}"))
}

/// Writes `bytes` to stdout. A reader that went away (`| head`) is not an error: returns
/// `Ok(false)` then, so a command that prints repeatedly can stop.
pub fn to_stdout(bytes: &[u8]) -> Result<bool, CliError> {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(CliError::Stdout(e)),
    }
}

/// Prints `report` as pretty JSON (scripts) or through `text` (people).
pub fn print_report<T: Serialize>(report: &T, json: bool, text: impl FnOnce(&T) -> String) {
    print!("{}", render_report(report, json, text));
}

/// What [`print_report`] prints.
pub fn render_report<T: Serialize>(
    report: &T,
    json: bool,
    text: impl FnOnce(&T) -> String,
) -> String {
    if json {
        serde_json::to_string_pretty(report).expect("reports serialise") + "\n"
    } else {
        text(report)
    }
}

/// One report line about a credit lane (generator and sink).
pub fn credit_line(c: &crate::fc::credit_port::CreditLaneReport, extra: &str) -> String {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!("; {extra}")
    };
    format!(
        "credits: lane {state}, updates sent {tx}, received {rx}, resyncs {resyncs}, re-initialisations {reinits}, refused frames {refused}{extra}\n",
        state = if c.active { "active" } else { "not active" },
        tx = c.updates_sent,
        rx = c.updates_received,
        resyncs = c.resyncs,
        reinits = c.reinits,
        refused = c.rejected_frames,
    )
}
