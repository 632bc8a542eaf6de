//! `lossless gen`: the traffic generator.

use clap::Args;

use super::{
    common::{self, IfaceArgs, ProgressArgs, RealtimeArgs},
    error::CliError,
};
use crate::{
    control::signals,
    dataplane::{pool::JUMBO_MAX_FRAME, xdp_prog::Steering},
    fc::credit_port::CreditTimers,
    traffic::{
        flows::MAX_FLOWS,
        gen::{self, GenReport, GenSetup},
        open_iface,
    },
    units::format_rate,
    wire::{
        test_traffic::{TestFrame, DEFAULT_TEST_UDP_PORT},
        MacAddr,
    },
};

/// Flags of `lossless gen`.
#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    #[command(flatten)]
    pub iface: IfaceArgs,
    #[command(flatten)]
    pub realtime: RealtimeArgs,
    #[command(flatten)]
    pub progress: ProgressArgs,
    /// Line rate to send at, wire overhead included ("2Gbit", "500Mbit").
    #[arg(long, value_parser = common::rate)]
    pub rate: u64,
    /// Frame size in bytes, without FCS (70..=9216: tag, IPv4, UDP and the test header; above
    /// 1518, jumbo, which the interface's MTU must let through).
    #[arg(long, default_value_t = 1000)]
    pub size: usize,
    /// Priority: the 802.1Q PCP of every frame (and DSCP class selector).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub priority: u8,
    /// Number of flows, sent round-robin, each with its own sequence numbers (at most
    /// 1048576, what a sink accounts with --max-flows).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_FLOWS as i64))]
    pub flows: u32,
    /// Id of the first flow (flows are first-flow .. first-flow + flows), so several
    /// generators feeding one sink keep their sequence numbers apart.
    #[arg(long, default_value_t = 0)]
    pub first_flow: u32,
    /// How long to send ("5s").
    #[arg(long, value_parser = common::nonzero_duration)]
    pub duration: Option<std::time::Duration>,
    /// Stop after this many frames.
    #[arg(long)]
    pub count: Option<u64>,
    /// Link speed PAUSE/PFC quanta are counted at, which must be the peer's port speed
    /// [default: the interface's speed as ethtool reports it, else 10Gbit].
    #[arg(long, value_parser = common::rate)]
    pub link_speed: Option<u64>,
    /// Destination MAC address.
    #[arg(long, default_value = "ff:ff:ff:ff:ff:ff")]
    pub dst_mac: MacAddr,
    /// Source IPv4 address.
    #[arg(long, value_parser = common::ipv4, default_value = "198.18.0.1")]
    pub src_ip: [u8; 4],
    /// Destination IPv4 address.
    #[arg(long, value_parser = common::ipv4, default_value = "198.18.0.2")]
    pub dst_ip: [u8; 4],
    /// UDP destination port of the test traffic.
    #[arg(long, default_value_t = DEFAULT_TEST_UDP_PORT)]
    pub port: u16,
    /// VLAN id of the 802.1Q tag (0 = priority-tagged).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=4094))]
    pub vid: u16,
    /// Act as a link partner: send LLDP and answer IEEE 1588 peer-delay requests, so the device
    /// under test can measure the link (off by default: the generator then sends test frames only).
    #[arg(long)]
    pub link_partner: bool,
    /// UDP port SFC messages arrive on (when the congestion point sends them over UDP).
    #[arg(long, default_value_t = crate::wire::sfcm::SFCM_UDP_PORT)]
    pub sfc_udp_port: u16,
    /// Keep sending through PAUSE/PFC/SFC (shows what a source without flow control does).
    #[arg(long)]
    pub ignore_pause: bool,
    /// Send under credit-based flow control on --priority: only what the peer advertised
    /// credit for (the peer's port must run credits on that priority too).
    #[arg(long)]
    pub credit: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `lossless gen`.
pub fn run(args: &GenArgs) -> Result<(), CliError> {
    let min = TestFrame::min_len(true);
    if args.size < min.max(60) || args.size > JUMBO_MAX_FRAME {
        return Err(CliError::Usage(format!(
            "--size {}: must be {}..={JUMBO_MAX_FRAME}",
            args.size,
            min.max(60)
        )));
    }
    if args.duration.is_none() && args.count.is_none() {
        return Err(CliError::Usage(
            "give --duration or --count (or both)".into(),
        ));
    }
    if args.first_flow.checked_add(args.flows - 1).is_none() {
        return Err(CliError::Usage(format!(
            "--first-flow {} with --flows {}: flow ids run past {}",
            args.first_flow,
            args.flows,
            u32::MAX
        )));
    }
    let stop = signals::install();
    let steering = Steering {
        forward_all: false,
        test_udp_port: 0,
        sfc_udp_port: args.sfc_udp_port,
    };
    let (ports, _attached) = open_iface(&args.iface.setup(common::SENDER_FRAMES), steering)?;
    if args.size > ports.max_frame as usize {
        return Err(CliError::Usage(format!(
            "--size {}: {} carries frames of at most {} bytes (its MTU plus 18); raise its MTU \
             (ip link set {} mtu {}) or send smaller frames",
            args.size,
            args.iface.iface,
            ports.max_frame,
            args.iface.iface,
            args.size - 18
        )));
    }
    args.realtime.apply(common::GEN_REALTIME_PRIORITY)?;
    let setup = GenSetup {
        rate_bps: args.rate,
        link_speed_bps: common::link_speed(args.link_speed, &args.iface.iface),
        size: args.size,
        priority: args.priority,
        vid: args.vid,
        flows: args.flows,
        first_flow: args.first_flow,
        duration: args.duration,
        count: args.count,
        dst_mac: args.dst_mac,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        dst_port: args.port,
        sfc_udp_port: args.sfc_udp_port,
        link_partner: args.link_partner,
        ignore_pause: args.ignore_pause,
        credit: args.credit.then(CreditTimers::default),
        progress: args.progress.progress,
    };
    tracing::info!(iface = %args.iface.iface, backend = ports.backend, "ready");
    let report = gen::run(ports, &setup, args.iface.busy_poll, stop);
    common::print_report(&report, args.json, text);
    Ok(())
}

fn text(r: &GenReport) -> String {
    let mut s = format!(
        "gen {iface} ({backend}): sent {frames} frames, {bytes} bytes in {secs:.3} s ({rate})\n\
         flow control: paused {paused:.3} ms by PFC/PAUSE, {sfc_paused:.3} ms by SFC, flows {sfc_flow_paused:.3} ms by flow-scope SFC (summed); PFC received {pfc} (for our priority; {pfc_all} total), PAUSE {pause}, SFCM {sfcm} (for other sources, not obeyed: {sfcm_not_ours})\n",
        iface = r.iface,
        backend = r.backend,
        frames = r.frames_sent,
        bytes = r.bytes_sent,
        secs = r.elapsed_s,
        rate = format_rate(r.rate_bps),
        paused = r.paused_ns as f64 / 1e6,
        pfc = r.pfc_rx,
        pfc_all = r.pfc_rx_total,
        pause = r.pause_rx,
        sfc_paused = r.sfc_paused_ns as f64 / 1e6,
        sfc_flow_paused = r.sfc_flow_paused_ns as f64 / 1e6,
        sfcm = r.sfcm_rx,
        sfcm_not_ours = r.sfcm_not_ours,
    );
    if r.no_carrier_ns > 0 {
        s += &format!(
            "carrier: the link had none for {:.3} ms, frames held meanwhile\n",
            r.no_carrier_ns as f64 / 1e6
        );
    }
    if r.tx_refused > 0 {
        s += &format!(
            "kernel: refused {} of the frames sent (no carrier, or the driver would not take them): they never reached the link\n",
            r.tx_refused
        );
    }
    if let Some(c) = &r.credit {
        s += &common::credit_line(
            c,
            &format!("waited for credit {:.3} ms", r.credit_wait_ns as f64 / 1e6),
        );
    }
    s
}
