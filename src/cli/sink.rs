//! `lossless sink`: the traffic sink.

use std::sync::Arc;

use clap::Args;

use super::{
    common::{self, IfaceArgs, ProgressArgs, RealtimeArgs},
    error::CliError,
};
use crate::{
    control::signals,
    dataplane::{
        open::iface_max_frame,
        sched,
        sfc_roster::SourceRoster,
        xdp_prog::{Steering, XdpProgram},
    },
    fc::{credit_port::CreditTimers, PfcThresholds},
    traffic::{
        flows::MAX_FLOWS,
        open_iface,
        sink::{self, SinkCongestion, SinkCredit, SinkPause, SinkPfc, SinkReport, SinkSetup},
        sink_guard::{GuardPaused, SinkGuard, SinkGuardSetup},
    },
    units::format_rate,
    wire::test_traffic::DEFAULT_TEST_UDP_PORT,
};

/// Flags of `lossless sink`.
#[derive(Debug, Clone, Args)]
pub struct SinkArgs {
    #[command(flatten)]
    pub iface: IfaceArgs,
    #[command(flatten)]
    pub realtime: RealtimeArgs,
    #[command(flatten)]
    pub progress: ProgressArgs,
    /// Stop after this long ("10s").
    #[arg(long, value_parser = common::nonzero_duration)]
    pub duration: Option<std::time::Duration>,
    /// Stop this long after the last test frame, once traffic has started ("1s").
    #[arg(long, value_parser = common::nonzero_duration)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Stop after this many test frames.
    #[arg(long)]
    pub expect: Option<u64>,
    /// Flow ids accounted: 0..max-flows, at most 1048576 (8 bytes each up front, 8 KiB more
    /// per flow seen); frames of other flows are counted as unknown_flow.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=MAX_FLOWS as i64))]
    pub max_flows: u32,
    /// UDP destination port of the test traffic.
    #[arg(long, default_value_t = DEFAULT_TEST_UDP_PORT)]
    pub port: u16,
    /// Be a congestion point: drain the receive buffer at this rate and send PFC upstream.
    #[arg(long, value_parser = common::rate)]
    pub drain_rate: Option<u64>,
    /// Congestion point: receive buffer per priority; frames beyond it are dropped.
    #[arg(long, value_parser = common::size, default_value = "512KiB", requires = "drain_rate")]
    pub buffer: u64,
    /// Congestion point: XOFF threshold per priority.
    #[arg(long, value_parser = common::size, default_value = "128KiB", requires = "drain_rate")]
    pub xoff: u64,
    /// Congestion point: XON threshold per priority.
    #[arg(long, value_parser = common::size, default_value = "64KiB", requires = "drain_rate")]
    pub xon: u64,
    /// Pause time of each XOFF the sink sends, in quanta (1..=65535; PFC only).
    #[arg(long, default_value_t = u16::MAX, value_parser = clap::value_parser!(u16).range(1..),
          conflicts_with_all = ["no_pfc", "sfc"])]
    pub pause_quanta: u16,
    /// Link speed the quanta are counted at, which must be the upstream port's (and, with
    /// --sfc and no --drain-rate, the drain rate assumed until one is measured) [default: the
    /// interface's speed as ethtool reports it, else 10Gbit].
    #[arg(long, value_parser = common::rate)]
    pub link_speed: Option<u64>,
    /// Never send PFC: by default the sink pauses every priority upstream while its RX ring
    /// is short of buffers (and at XOFF as a congestion point), like a lossless host NIC.
    #[arg(long)]
    pub no_pfc: bool,
    /// Pause upstream with SFC messages instead of PFC: the source of each test frame that
    /// arrives while the RX ring is short of buffers (or the buffer is at --xoff as a
    /// congestion point) is told, at layer 2 to the frame's source MAC (or over UDP:
    /// --sfc-udp-port), to pause its class
    /// for the time what waits takes to drain (at the drain rate measured; until then
    /// --drain-rate, else --link-speed), at most 10 ms; the stall guard sends them too.
    #[arg(long, conflicts_with = "no_pfc")]
    pub sfc: bool,
    /// With --sfc: send the SFC messages over UDP/IPv4 to this port, to the test frame's
    /// source address from the address it was sent to, so that they reach a source beyond
    /// this L2 segment (`gen` listens on --sfc-udp-port, 34997 by default); by default they
    /// go at layer 2.
    #[arg(long, requires = "sfc")]
    pub sfc_udp_port: Option<u16>,
    /// No stall guard: by default (AF_XDP, PFC or SFC on) a thread woken by the XDP program
    /// pauses upstream while the sink is not running and its fill ring runs short.
    #[arg(long)]
    pub no_stall_guard: bool,
    /// Grant credit on this priority (802.1Q PCP): the sender may only send what fits the
    /// --credit-buffer; the peer's port must run credits on that priority too.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub credit: Option<u8>,
    /// Receive buffer advertised as credit (3072..=131072 bytes, at most 2048 blocks of 64; at
    /// least two of the longest frames the interface carries, its MTU plus 18; with
    /// --drain-rate, at most --buffer).
    #[arg(long, value_parser = common::size, default_value = "64KiB", requires = "credit")]
    pub credit_buffer: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `lossless sink`.
pub fn run(args: &SinkArgs) -> Result<(), CliError> {
    // Two full-size frames must fit (a smaller window would hold a sender back for ever,
    // waiting for credit that can never come), and a window is at most 2048 blocks.
    if args.credit.is_some() && !(3 * 1024..=128 * 1024).contains(&args.credit_buffer) {
        return Err(CliError::Usage(format!(
            "--credit-buffer {}: must be 3072..=131072 bytes (two full-size frames, at most \
             2048 blocks of 64)",
            args.credit_buffer
        )));
    }
    if args.duration.is_none() && args.idle_timeout.is_none() && args.expect.is_none() {
        tracing::info!("no --duration, --idle-timeout or --expect: runs until interrupted");
    }
    let congestion = match args.drain_rate {
        None => None,
        Some(drain_rate_bps) => {
            if args.credit.is_some() && args.credit_buffer > args.buffer {
                return Err(CliError::Usage(format!(
                    "--credit-buffer {} is more than --buffer {}: the sink would grant credit \
                     for frames its buffer drops",
                    args.credit_buffer, args.buffer
                )));
            }
            if args.xon >= args.xoff || args.xoff > args.buffer {
                return Err(CliError::Usage(format!(
                    "need --xon ({}) < --xoff ({}) <= --buffer ({})",
                    args.xon, args.xoff, args.buffer
                )));
            }
            Some(SinkCongestion {
                drain_rate_bps,
                buffer_bytes: args.buffer,
                thresholds: PfcThresholds {
                    xoff: args.xoff,
                    xon: args.xon,
                },
            })
        }
    };
    // The same rule as the daemon's credit ports: two of the longest frames the interface's
    // MTU lets through, so that a jumbo sender is not held back for ever either.
    let longest = u64::from(iface_max_frame(std::slice::from_ref(&args.iface.iface)));
    if args.credit.is_some() && args.credit_buffer < 2 * longest {
        return Err(CliError::Usage(format!(
            "--credit-buffer {}: must hold two of the longest frames {} carries ({longest} \
             bytes: its MTU plus 18), at least {} bytes; a sender of such frames would wait \
             for credit for ever",
            args.credit_buffer,
            args.iface.iface,
            2 * longest
        )));
    }
    let stop = signals::install();
    let steering = Steering {
        forward_all: false,
        test_udp_port: args.port,
        sfc_udp_port: 0,
    };
    let (ports, attached) = open_iface(&args.iface.setup(common::RECEIVER_FRAMES), steering)?;
    let link_speed_bps = common::link_speed(args.link_speed, &args.iface.iface);
    let realtime = args.realtime.request(sched::DEFAULT_PRIORITY);
    // With SFC, the sources the sink takes frames from, whom it and its guard pause.
    let sources = args.sfc.then(|| Arc::new(SourceRoster::default()));
    // Where the stall guard says that it paused upstream with PFC, for the sink to end it.
    let guard_paused = Arc::new(GuardPaused::default());
    let guard = match attached.as_ref().and_then(|a| a.programs.first()) {
        Some(prog) if !args.no_pfc && !args.no_stall_guard => {
            let queues = ports.rx_queues.first().copied().unwrap_or(1);
            let priority = realtime.as_ref().map(|r| r.priority);
            let pfc = (link_speed_bps, guard_paused.clone());
            start_guard(args, prog, queues, priority, sources.clone(), pfc)
        }
        _ => None,
    };
    args.realtime.apply(sched::DEFAULT_PRIORITY)?;
    let setup = SinkSetup {
        duration: args.duration,
        idle_timeout: args.idle_timeout,
        progress: args.progress.progress,
        expect: args.expect,
        max_flows: args.max_flows,
        dst_port: args.port,
        congestion,
        pause: match (&sources, args.no_pfc) {
            (Some(sources), _) => Some(SinkPause::Sfc {
                link_speed_bps,
                sources: sources.clone(),
                udp_port: args.sfc_udp_port,
            }),
            (None, true) => None,
            (None, false) => Some(SinkPause::Pfc(SinkPfc {
                pause_quanta: args.pause_quanta,
                link_speed_bps,
                guard: guard.is_some().then_some(guard_paused),
            })),
        },
        credit: args.credit.map(|priority| SinkCredit {
            priority,
            buffer_bytes: args.credit_buffer,
            timers: CreditTimers::default(),
        }),
    };
    tracing::info!(iface = %args.iface.iface, backend = ports.backend, "ready");
    let mut report = sink::run(ports, &setup, args.iface.busy_poll, stop);
    if let Some(g) = guard {
        let done = g.finish();
        (report.stalls, report.stall_pfc_tx, report.stall_sfcm_tx) =
            (done.stalls, done.pfc_tx, done.sfcm_tx);
    }
    common::print_report(&report, args.json, text);
    Ok(())
}

/// Starts the sink's stall guard on `prog`'s interface, for its RX queues 0 up to `queues`,
/// one below the sink's own real-time `priority` when it has one (the daemon's default
/// otherwise), pausing the sources on `sfc` with SFC where given, else with PFC at the link
/// speed of `pfc`, saying so on its flag; `None` (logged) if it cannot.
fn start_guard(
    args: &SinkArgs,
    prog: &XdpProgram,
    queues: u32,
    priority: Option<u8>,
    sfc: Option<Arc<SourceRoster>>,
    pfc: (u64, Arc<GuardPaused>),
) -> Option<SinkGuard> {
    let setup = SinkGuardSetup {
        iface: args.iface.iface.clone(),
        ingress: prog.ingress().clone(),
        queues,
        bell: prog.bells().ok()?.into_iter().next()?,
        link_speed_bps: pfc.0,
        priority: priority
            .unwrap_or(sched::DEFAULT_PRIORITY)
            .saturating_sub(1)
            .max(1),
        sfc,
        sfc_udp_port: args.sfc_udp_port,
        paused: pfc.1,
    };
    SinkGuard::spawn(setup)
        .inspect_err(|e| tracing::warn!(error = %e, "no sink stall guard"))
        .ok()
}

fn text(r: &SinkReport) -> String {
    let mut s = format!(
        "sink {iface} ({backend}): received {rx} frames ({uniq} unique) in {secs:.3} s ({rate})\n\
         lost {lost} ({here} at this sink, {upstream} upstream), duplicated {dup}, reordered {reo}; other frames {other}\n",
        iface = r.iface,
        backend = r.backend,
        rx = r.received,
        uniq = r.unique,
        secs = r.elapsed_s,
        rate = format_rate(r.rate_bps),
        lost = r.lost,
        here = r.lost_here,
        upstream = r.lost_upstream,
        dup = r.duplicates,
        reo = r.reordered,
        other = r.other_rx,
    );
    s += &match &r.latency {
        Some(l) => format!(
            "latency: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us\n",
            l.p50_us, l.p99_us, l.p999_us, l.max_us
        ),
        None => format!(
            "latency: not meaningful, the TX stamps are not on this host's clock (the generator on another host?): {} frames arrived before they were stamped\n",
            r.latency_skipped
        ),
    };
    if r.latency.is_some() && r.latency_skipped > 0 {
        s += &format!(
            "latency: {} frames arrived before they were stamped, by this host's clock: no sample\n",
            r.latency_skipped
        );
    }
    if r.pfc_tx > 0 || r.sfcm_tx > 0 || r.buffer_overflow > 0 || r.peak_buffer_bytes > 0 {
        s += &format!(
            "PFC sent {}, SFC messages sent {} (RX ring short of buffers {} times), buffer overflow drops {}, peak buffer {} bytes\n",
            r.pfc_tx, r.sfcm_tx, r.fill_starved_events, r.buffer_overflow, r.peak_buffer_bytes
        );
    }
    if r.damaged > 0 {
        s += &format!(
            "damaged test frames (bad UDP checksum, not counted as received): {}\n",
            r.damaged
        );
    }
    if r.unknown_flow > 0 {
        s += &format!(
            "test frames of flows beyond --max-flows (not accounted): {}\n",
            r.unknown_flow
        );
    }
    if r.stale > 0 {
        s += &format!(
            "test frames older than the last {} of their flow (not accounted): {}\n",
            crate::traffic::flows::WINDOW,
            r.stale
        );
    }
    if r.mixed_sources > 0 {
        s += &format!(
            "test frames from another source than their flow's first frame (another MAC or priority; not accounted, so their loss is not counted): {}; give each generator its own --first-flow\n",
            r.mixed_sources
        );
    }
    if r.restarts > 0 {
        s += &format!(
            "flows restarted by a new generator run: {} (lost counts every run; give each run its own --first-flow to see them apart)\n",
            r.restarts
        );
    }
    if r.stalls > 0 {
        s += &format!(
            "stall guard: the sink stalled {} times, {} PFC frames and {} SFC messages sent for it\n",
            r.stalls, r.stall_pfc_tx, r.stall_sfcm_tx
        );
    }
    if r.oversize > 0 {
        s += &format!(
            "oversize: {} frames longer than the sink receives were dropped\n",
            r.oversize
        );
    }
    if let Some(c) = &r.credit {
        s += &common::credit_line(c, "");
    }
    s
}
