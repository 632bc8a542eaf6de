//! `lossless measure`: LLDP and one IEEE 1588 peer-delay measurement against the link's peer,
//! and the PFC headroom and XOFF/XON the measured round trip implies. With `--respond-for` it
//! only answers peer-delay requests (and runs LLDP), so two of them can measure each other.

use std::{fmt::Write as _, sync::atomic::Ordering, time::Duration};

use clap::Args;
use serde::Serialize;

use super::{
    common::{self, IfaceArgs},
    error::CliError,
};
use crate::{
    control::signals,
    dataplane::{clock::now_ns, idle::Idler, port::TimeStamping, xdp_prog::Steering},
    linkup::{
        lldp::LldpConfig,
        pdelay::InitiatorConfig,
        plan_headroom,
        run::{LinkAgent, LinkAgentConfig, LinkCounters},
        HeadroomPlan, LinkParams, Measurement,
    },
    traffic::open_iface,
    wire::lldp::{AdaptiveCapability, PfcConfig},
};

/// Flags of `lossless measure`.
#[derive(Debug, Clone, Args)]
pub struct MeasureArgs {
    #[command(flatten)]
    pub iface: IfaceArgs,
    /// Peer-delay samples to take.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub samples: u32,
    /// Time between Pdelay_Req messages ("10ms").
    #[arg(long, value_parser = common::duration, default_value = "10ms")]
    pub interval: Duration,
    /// A request not answered within this time is lost (and retried, up to 3 x --samples).
    #[arg(long, value_parser = common::duration, default_value = "200ms")]
    pub timeout: Duration,
    /// Link speed the headroom is computed for ("10Gbit").
    #[arg(long, value_parser = common::rate, default_value = "10Gbit")]
    pub speed: u64,
    /// Largest frame on the lossless priority, octets.
    #[arg(long, default_value_t = 1518)]
    pub max_frame: u64,
    /// Buffer of the lossless priority per ingress port (XOFF + headroom) that XOFF/XON divide.
    #[arg(long, value_parser = common::size, default_value = "384KiB")]
    pub buffer: u64,
    /// Buffer cell size, bytes (1 = byte accounting).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub cell_size: u64,
    /// The congestion point's own lag from crossing XOFF to sending PFC, for the headroom
    /// (the daemon measures it: `lossless status`, "headroom model"), e.g. "500us".
    #[arg(long, value_parser = common::duration, default_value = "0s")]
    pub own_lag: Duration,
    /// The peer's reaction to PFC beyond the round trip, for the headroom (the daemon
    /// measures it), e.g. "2ms"; counts where it exceeds the 802.3 allowance.
    #[arg(long, value_parser = common::duration, default_value = "0s")]
    pub peer_reaction: Duration,
    /// The rate the own lag and peer reaction are charged at ("2Gbit"; default and at most
    /// --speed).
    #[arg(long, value_parser = common::rate)]
    pub software_rate: Option<u64>,
    /// Advertise these PFC-enabled priorities in the DCBX PFC TLV (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "3", value_parser = clap::value_parser!(u8).range(0..=7))]
    pub pfc_priorities: Vec<u8>,
    /// Only answer peer-delay requests and run LLDP for this long; measure nothing.
    #[arg(long, value_parser = common::duration)]
    pub respond_for: Option<Duration>,
    /// After measuring, wait up to this long for the peer's LLDPDU if none was heard yet.
    #[arg(long, value_parser = common::duration, default_value = "500ms")]
    pub lldp_wait: Duration,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// An LLDP neighbour, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct NeighbourReport {
    /// Source MAC of its LLDPDUs.
    pub src: String,
    /// Chassis ID.
    pub chassis_id: String,
    /// Port ID.
    pub port_id: String,
    /// TTL, seconds.
    pub ttl: u16,
    /// System name.
    pub system_name: Option<String>,
    /// Its DCBX PFC configuration TLV.
    pub pfc: Option<PfcConfig>,
    /// Its adaptive-headroom TLV.
    pub adaptive: Option<AdaptiveCapability>,
}

/// What `lossless measure` found.
#[derive(Debug, Clone, Serialize)]
pub struct MeasureReport {
    /// Interface.
    pub iface: String,
    /// Packet I/O backend used.
    pub backend: &'static str,
    /// Where the RX and TX times (T1..T4) were taken.
    pub time_stamping: TimeStamping,
    /// `measure` or `respond`.
    pub mode: &'static str,
    /// The measurement (measure mode).
    pub measurement: Option<Measurement>,
    /// The link the headroom is for.
    pub link: LinkParams,
    /// Headroom and XOFF/XON from the estimate (measure mode).
    pub plan: Option<HeadroomPlan>,
    /// Why there is no plan although there is a measurement (the buffer is too small).
    pub plan_error: Option<String>,
    /// LLDP neighbours heard.
    pub neighbours: Vec<NeighbourReport>,
    /// Frame counters.
    pub counters: LinkCounters,
}

/// Runs `lossless measure`.
pub fn run(args: &MeasureArgs) -> Result<(), CliError> {
    let stop = signals::install();
    let steering = Steering {
        forward_all: false,
        test_udp_port: 0,
        sfc_udp_port: 0,
    };
    let (mut wp, attached) = open_iface(&args.iface.setup(common::SENDER_FRAMES), steering)?;
    let port = &mut wp.ports[0];
    let mac = port.mac();
    let enabled = args.pfc_priorities.iter().fold(0u8, |m, p| m | (1 << p));
    let interval_ns = args.interval.as_nanos() as u64;
    let mut initiator = InitiatorConfig::new(args.samples, interval_ns);
    initiator.timeout_ns = args.timeout.as_nanos() as u64;
    let mut lldp = LldpConfig::new(mac, &args.iface.iface, enabled);
    lldp.system_name = Some("lossless".into());
    let cfg = LinkAgentConfig {
        lldp,
        initiator,
        respond: true,
    };
    let start = now_ns();
    let mut agent = LinkAgent::new(cfg, mac, start)
        .with_kernel_tx_stamps(&args.iface.iface, crate::linkup::tx_stamp::STAMP_TIMEOUT);
    let time_stamping = TimeStamping::of(port.as_ref(), agent.tx_stamping());
    let mut idler = Idler::new([port.poll_fd()], args.iface.busy_poll);
    tracing::info!(iface = %args.iface.iface, backend = wp.backend, %mac, "ready");

    let link = LinkParams {
        cell_size: args.cell_size,
        own_lag_ns: args.own_lag.as_nanos() as u64,
        peer_reaction_ns: args.peer_reaction.as_nanos() as u64,
        software_rate_bps: args.software_rate.unwrap_or(0),
        ..LinkParams::new(args.speed, args.max_frame, args.buffer)
    };
    let mut measurement = None;
    let respond_until = args
        .respond_for
        .map(|d| start.saturating_add(d.as_nanos() as u64));
    if respond_until.is_none() {
        agent.start_measurement(start);
    }
    let mut lldp_deadline = None;
    loop {
        let now = now_ns();
        agent.poll(port.as_mut(), &mut wp.pool, now)?;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match respond_until {
            Some(until) if now >= until => break,
            Some(_) => {}
            None => {
                if let Some(r) = agent.take_measurement(now) {
                    measurement = Some(r?);
                    lldp_deadline = Some(now + args.lldp_wait.as_nanos() as u64);
                }
                if let Some(d) = lldp_deadline {
                    if now >= d || !agent.lldp().neighbours().is_empty() {
                        break;
                    }
                }
            }
        }
        let mut deadline = agent.next_deadline();
        if let Some(d) = respond_until.or(lldp_deadline) {
            deadline = deadline.min(d);
        }
        idler.wait(now_ns(), Some(deadline));
    }
    agent.shutdown(port.as_mut(), &mut wp.pool)?;
    // Give copy-mode TX a moment to complete before the socket closes.
    for _ in 0..20 {
        port.reclaim(&mut wp.pool)?;
        std::thread::sleep(Duration::from_millis(1));
    }
    if respond_until.is_none() && measurement.is_none() {
        return Err(CliError::Interrupted);
    }
    // A buffer too small for the measured loop is a finding, not a failed measurement.
    let (plan, plan_error) = match measurement.as_ref().map(|m| plan_headroom(m, &link)) {
        Some(Ok(p)) => (Some(p), None),
        Some(Err(e)) => (None, Some(e.to_string())),
        None => (None, None),
    };
    // What the frames got, which is what the figures are made of.
    let time_stamping = match attached.as_ref().and_then(|a| a.programs.first()) {
        Some(prog) => time_stamping.as_seen(&prog.counters()),
        None => time_stamping,
    };
    let report = MeasureReport {
        iface: args.iface.iface.clone(),
        backend: wp.backend,
        time_stamping,
        mode: if respond_until.is_some() {
            "respond"
        } else {
            "measure"
        },
        measurement,
        link,
        plan,
        plan_error,
        neighbours: agent
            .lldp()
            .neighbours()
            .iter()
            .map(|n| NeighbourReport {
                src: n.src.to_string(),
                chassis_id: n.pdu.chassis_id.to_string(),
                port_id: n.pdu.port_id.to_string(),
                ttl: n.pdu.ttl,
                system_name: n.pdu.system_name.clone(),
                pfc: n.pdu.pfc,
                adaptive: n.pdu.adaptive,
            })
            .collect(),
        counters: agent.counters(),
    };
    common::print_report(&report, args.json, text);
    Ok(())
}

fn us(ns: i64) -> String {
    format!("{:.1} us", ns as f64 / 1e3)
}

fn text(r: &MeasureReport) -> String {
    let mut s = String::new();
    match &r.measurement {
        Some(m) => {
            let _ = writeln!(
                s,
                "measured {} ({}) against {}: {} samples from {} requests ({} lost, {} late, {} \
                 rejected for an implausible turnaround)",
                r.iface,
                r.backend,
                m.responder.map_or("?".into(), |p| p.to_string()),
                m.samples.len(),
                m.requests,
                m.lost,
                m.late,
                m.rejected
            );
            let _ = writeln!(
                s,
                "  time stamping: rx {}, tx {}",
                r.time_stamping.rx.name(),
                r.time_stamping.tx.name()
            );
            let _ = writeln!(
                s,
                "  link round trip X = (T4-T1)-(T3-T2): estimate {} (trimmed mean), min {}, \
                 median {}, max {}, spread {} (IQR)",
                us(m.estimate_ns),
                us(m.min_ns),
                us(m.median_ns),
                us(m.max_ns),
                us(m.spread_ns)
            );
            let xs: Vec<String> = m
                .samples
                .iter()
                .map(|x| format!("{:.1}", x.round_trip_ns as f64 / 1e3))
                .collect();
            let _ = writeln!(s, "  samples (us): {}", xs.join(" "));
            let link = format!(
                "  at {} bit/s, max frame {} B, buffer {} B",
                r.link.speed_bps, r.link.max_frame_octets, r.link.buffer_bytes
            );
            match (&r.plan, &r.plan_error) {
                (Some(p), _) => {
                    let _ = writeln!(
                        s,
                        "{link}: headroom {} B, XOFF {} B, XON {} B",
                        p.headroom_bytes, p.xoff_bytes, p.xon_bytes
                    );
                    let a = &p.adaptive;
                    let t = a.split();
                    let _ = writeln!(
                        s,
                        "  headroom model {} B = wire {} + own lag {} ({}) + peer {} (reaction \
                         {}) + frames {}; lag and reaction at {}",
                        a.headroom_bytes,
                        t.wire,
                        t.own_lag,
                        a.input.own_lag,
                        t.peer,
                        a.input.peer_reaction,
                        t.frames,
                        a.software_rate
                    );
                }
                (None, e) => {
                    let _ = writeln!(s, "{link}: {}", e.as_deref().unwrap_or("no plan"));
                }
            }
        }
        None => {
            let _ = writeln!(
                s,
                "answered {} peer-delay requests on {} ({})",
                r.counters.answered, r.iface, r.backend
            );
        }
    }
    if r.neighbours.is_empty() {
        let _ = writeln!(s, "  no LLDP neighbour heard");
    }
    for n in &r.neighbours {
        let _ = writeln!(
            s,
            "  LLDP neighbour {}: chassis {}, port {}, TTL {} s, PFC {}, adaptive {}",
            n.src,
            n.chassis_id,
            n.port_id,
            n.ttl,
            n.pfc
                .map_or("-".into(), |p| format!("enabled {:#04x}", p.enabled)),
            n.adaptive.map_or("-".into(), |a| format!(
                "responds {}, round trip {} ns",
                a.responds, a.round_trip_ns
            ))
        );
    }
    s
}
