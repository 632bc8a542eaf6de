//! `worker-profile`: a deterministic load for the forwarding worker, to run under
//! `valgrind --tool=callgrind` (see `bench/profile`). It drives the real [`ForwardWorker`]
//! over in-memory ports with simulated time, so the instructions it executes depend on
//! nothing but its arguments: whatever else runs on the machine, the counts repeat.
//!
//! Every scenario sends `frames` frames of `size` bytes, priority 3 (802.1Q PCP), into port 0
//! and takes them off port 1. One simulated turn lasts the time the source needs for half a
//! worker batch, so each [`ForwardWorker::step`] sees about 32 frames.
//!
//! - `lossy`: a lossy priority, 10 Gbit/s offered at 5 Gbit/s: plain forwarding.
//! - `pfc`: a PFC priority, 10 Gbit/s offered into a 5 Gbit/s egress by a source that obeys
//!   the worker's PFC frames: the worker runs congested, pausing and resuming its source.
//! - `sfc`: an SFC-only priority, the same overload, the source obeying the worker's SFC
//!   messages (class scope, its defaults: a 32 KiB threshold, a 1 MiB limit).
//! - `credit`: a credit priority, the same overload held back by credit lanes on both sides
//!   (source, worker, sink), updates every 20 µs.
//! - `mem-port`: no worker. The same frames through the same in-memory ports and peers
//!   (inject, `recv`, `send`, take): the simulation's own cost, to subtract from the others.
//!
//! In the worker scenarios link-up runs as in the daemon (its default): each port's link agent
//! sends LLDP and takes the peer's, and one peer-delay measurement is asked for at the start. A
//! [`Partner`] on the far side of each link advertises itself by LLDP (so the agent keeps a
//! neighbour, whose expiry it checks every turn) and answers the peer-delay requests.
//!
//! Only [`drive`] is meant to be measured (`--toggle-collect`); setup is outside it.

use std::sync::Arc;

use lossless::linkup::shared::LinkShared;
use lossless::{
    dataplane::{
        agent::PortAgent,
        classify::Trust,
        forward::{ForwardSetup, ForwardWorker, PortSetup, BATCH},
        mem_port::{mem_link, MemPeer, MemPort},
        pool::FramePool,
        port::{Port, RxFrame},
        stats::{Counter, WorkerStats},
    },
    fc::{
        adaptive::HeadroomSettings,
        credit_port::{emit_update, CreditPort, CreditTimers, Gate},
        plan::{pfc_mask, PrioPlan, SfcPlan, SfcSettings},
        sfc::{SfcReactionPoint, SfcRpConfig},
        PauseTimers, PRIORITIES,
    },
    linkup::{
        lldp::{LldpAgent, LldpConfig},
        pdelay::PdelayResponder,
        worker::ForwardingAgent,
        LinkupSettings,
    },
    wire::{
        ptp::{PdelayBody, PortIdentity, Ptp},
        EtherType, EthernetFrame, EthernetRepr, MacAddr, MacControl, SfcmFrame, VlanTag,
    },
};
use serde::Serialize;

/// Ingress line rate of every scenario.
const INGRESS_BPS: u64 = 10_000_000_000;
/// Egress line rate of the congested scenarios (`pfc`, `sfc`, `credit`).
const SLOW_EGRESS_BPS: u64 = 5_000_000_000;
/// Frames in the worker's pool (as in the worker's unit tests).
const POOL_FRAMES: u32 = 4096;
/// The priority every frame carries.
const PRIO: usize = 3;
/// Credit buffer of the credit scenario, bytes per lane.
const CREDIT_BUFFER: u64 = 64 * 1024;

/// What `worker-profile` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Lossy priority, uncongested.
    Lossy,
    /// PFC priority under congestion, the source obeying PFC.
    Pfc,
    /// The same with `[headroom] xoff_time = "500us"` (the drain measured, XOFF capped).
    PfcTime,
    /// SFC-only priority under congestion, the source obeying SFC messages.
    Sfc,
    /// Credit priority under congestion, credit lanes on both links.
    Credit,
    /// The in-memory ports alone (the simulation's cost), no worker.
    MemPort,
}

/// What `worker-profile` prints.
#[derive(Debug, Serialize)]
pub struct ProfileReport {
    scenario: Scenario,
    size: usize,
    /// Frames the source sent.
    sent: u64,
    /// Data frames that came out of port 1.
    delivered: u64,
    /// Frames the worker dropped, whatever the reason.
    dropped: u64,
    /// Simulated loop turns.
    turns: u64,
}

/// A VLAN-tagged (PCP 3) IPv4-typed frame of `size` bytes; the payload is zeros.
fn data_frame(size: usize) -> Vec<u8> {
    let mut b = vec![0u8; size];
    EthernetRepr {
        dst: MacAddr([2, 0, 0, 0, 0, 2]),
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        vlan: Some(VlanTag {
            pcp: PRIO as u8,
            dei: false,
            vid: 0,
        }),
        ethertype: EtherType::IPV4,
    }
    .emit(&mut b)
    .expect("a data frame holds an Ethernet header");
    b
}

/// Nanoseconds one frame of `size` bytes takes at `bps` (preamble and gap included).
fn frame_ns(size: usize, bps: u64) -> u64 {
    ((size as u64 + 24) * 8 * 1_000_000_000).div_ceil(bps)
}

/// Link-up as the daemon runs it by default (`[linkup]` unset).
const LINKUP: LinkupSettings = LinkupSettings {
    samples: 16,
    sample_interval_ns: 10_000_000,
    interval_ns: 60_000_000_000,
    max_frame: 1518,
    peer_response_ns: 0,
};

/// A worker over two in-memory ports with `plan` on priority 3 and port 1 at `egress_bps`,
/// link-up on, a peer-delay measurement asked for on each port, `headroom` settings.
fn worker(
    plan: PrioPlan,
    egress_bps: u64,
    headroom: HeadroomSettings,
) -> (ForwardWorker, MemPeer, MemPeer, Arc<WorkerStats>) {
    let (p0, peer0) = mem_link("m0", MacAddr([2, 0, 0, 0, 0, 10]), BATCH);
    let (p1, peer1) = mem_link("m1", MacAddr([2, 0, 0, 0, 0, 11]), BATCH);
    let mut prios = [PrioPlan::lossy(1 << 20); PRIORITIES];
    prios[PRIO] = plan;
    let port = |speed_bps| PortSetup {
        speed_bps,
        trust: Trust::Pcp,
        pause_quanta: 65535,
        credit: true,
        max_frame: lossless::dataplane::pool::XSK_MAX_FRAME as u32,
    };
    let stats = Arc::new(WorkerStats::new(2));
    let agents = [&p0, &p1]
        .map(|p| -> Option<Box<dyn PortAgent>> {
            let link = Arc::new(LinkShared::default());
            link.request_measurement();
            Some(Box::new(ForwardingAgent::new(
                &LINKUP,
                link,
                p.mac(),
                p.name(),
                pfc_mask(&prios),
                0,
            )))
        })
        .into();
    let w = ForwardWorker::new(
        FramePool::heap(POOL_FRAMES).expect("a heap pool"),
        vec![Box::new(p0), Box::new(p1)],
        vec![Arc::default(), Arc::default()],
        stats.clone(),
        ForwardSetup {
            ports: vec![port(INGRESS_BPS), port(egress_bps)],
            prios,
            pfc_generator: true,
            watchdog: None,
            sfc: SfcSettings::default(),
            rate_share: 1.0,
            busy_poll: true,
            live: None,
            credit: credit_timers(),
            headroom,
        },
        0,
    )
    .with_agents(agents);
    (w, peer0, peer1, stats)
}

fn credit_timers() -> CreditTimers {
    CreditTimers {
        update_interval_ns: 20_000,
        resync_interval_ns: 50_000,
        timeout_ns: 2_000_000,
    }
}

/// The credit update in `frame`, applied to `port`; false if `frame` is not one.
fn take_credit(port: &mut CreditPort, frame: &[u8], now: u64) -> bool {
    EthernetFrame::new_checked(frame).is_ok_and(|eth| {
        eth.ethertype() == EtherType::LOSSLESS && port.on_update(now, eth.payload()).is_ok()
    })
}

/// Injects `update` into `peer` as a frame.
fn inject_credit(peer: &MemPeer, update: &lossless::wire::CreditUpdate, now: u64) {
    let mut b = [0u8; 128];
    let len = emit_update(update, MacAddr([2, 0, 0, 0, 0, 99]), &mut b);
    peer.inject(&b[..len], now);
}

/// The link partner on the far side of one port: it sends its LLDPDU when the run starts (it
/// advertises that it answers peer-delay requests) and answers the worker's Pdelay_Req with a
/// Pdelay_Resp and its Follow_Up, stamped with the simulated time.
struct Partner {
    mac: MacAddr,
    lldp: LldpAgent,
    responder: PdelayResponder,
}

impl Partner {
    fn new(mac: MacAddr) -> Self {
        Partner {
            mac,
            lldp: LldpAgent::new(LldpConfig::new(mac, "partner", 1 << PRIO), 0),
            responder: PdelayResponder::new(PortIdentity::from_mac(mac, 1)),
        }
    }

    /// Sends the LLDPDU that makes the worker's agent learn this partner.
    fn hello(&mut self, peer: &MemPeer, now: u64) {
        let mut b = [0u8; 256];
        let org = self.lldp.config().org;
        let pdu = self
            .lldp
            .poll_transmit(now)
            .expect("the first LLDPDU is due at once");
        let len = pdu
            .emit_frame(self.mac, org, &mut b)
            .expect("an LLDPDU fits");
        peer.inject(&b[..len], now);
    }

    /// Takes `frame`, which the worker sent on this link, if it is link-up's (LLDP or PTP),
    /// answering a Pdelay_Req; false for any other frame.
    fn take(&mut self, peer: &MemPeer, frame: &[u8], now: u64) -> bool {
        let ethertype = EthernetFrame::new_checked(frame).map(|e| e.ethertype());
        if ethertype == Ok(EtherType::LLDP) {
            return true;
        }
        if ethertype != Ok(EtherType::PTP) {
            return false;
        }
        if let Ok((_, Ptp::Pdelay(m))) = Ptp::parse_frame(frame) {
            if matches!(m.body, PdelayBody::Req { .. }) {
                if let Some(a) = self.responder.handle_request(now, &m) {
                    let mut b = [0u8; 128];
                    for msg in [a.resp, a.follow_up(now)] {
                        let len = msg.emit_frame(self.mac, &mut b).expect("a PTP frame fits");
                        peer.inject(&b[..len], now);
                    }
                }
            }
        }
        true
    }
}

/// The source side of a scenario: what holds it back.
enum Source {
    Free,
    Pfc(PauseTimers),
    Sfc(Box<SfcReactionPoint>),
    /// The source's and the sink's lanes (boxed: they are large).
    Credit {
        source: Box<CreditPort>,
        sink: Box<CreditPort>,
    },
}

/// Runs `scenario` and reports what happened. Setup happens here, the measured loop in
/// [`drive`].
pub fn run(scenario: Scenario, size: usize, frames: u64) -> ProfileReport {
    let frame = data_frame(size);
    let (turns, sent, delivered, dropped) = match scenario {
        Scenario::MemPort => {
            let (port_in, peer_in) = mem_link("m0", MacAddr([2, 0, 0, 0, 0, 10]), BATCH);
            let (port_out, peer_out) = mem_link("m1", MacAddr([2, 0, 0, 0, 0, 11]), BATCH);
            let pool = FramePool::heap(POOL_FRAMES).expect("a heap pool");
            let (turns, sent, delivered) = drive_mem_port(
                (port_in, peer_in),
                (port_out, peer_out),
                pool,
                &frame,
                frames,
            );
            (turns, sent, delivered, 0)
        }
        _ => {
            let (plan, egress, source) = match scenario {
                Scenario::Lossy => (PrioPlan::lossy(1 << 20), INGRESS_BPS, Source::Free),
                Scenario::Pfc | Scenario::PfcTime => (
                    PrioPlan::pfc(32 * 1024, 16 * 1024, 64 * 1024),
                    SLOW_EGRESS_BPS,
                    Source::Pfc(PauseTimers::new(INGRESS_BPS)),
                ),
                Scenario::Sfc => (
                    PrioPlan {
                        sfc: Some(SfcPlan {
                            threshold: 32 * 1024,
                        }),
                        ..PrioPlan::lossy(1 << 20)
                    },
                    SLOW_EGRESS_BPS,
                    Source::Sfc(Box::new(
                        SfcReactionPoint::new(SfcRpConfig::default()).expect("the defaults"),
                    )),
                ),
                _ => {
                    let lane = [(PRIO as u8, CREDIT_BUFFER)];
                    let mk = || {
                        Box::new(CreditPort::new(lane, &credit_timers(), 0).expect("valid lane"))
                    };
                    (
                        PrioPlan::credit(CREDIT_BUFFER),
                        SLOW_EGRESS_BPS,
                        Source::Credit {
                            source: mk(),
                            sink: mk(),
                        },
                    )
                }
            };
            let headroom = HeadroomSettings {
                xoff_time_ns: (scenario == Scenario::PfcTime).then_some(500_000),
                ..HeadroomSettings::default()
            };
            let (w, src, dst, stats) = worker(plan, egress, headroom);
            let (turns, sent, delivered) = drive(w, &src, &dst, source, &frame, frames);
            let p0 = &stats.ports[0];
            let dropped = p0.drops.iter().map(Counter::get).sum();
            (turns, sent, delivered, dropped)
        }
    };
    ProfileReport {
        scenario,
        size,
        sent,
        delivered,
        dropped,
        turns,
    }
}

/// The measured loop of the worker scenarios: the source offers `frame` at the ingress rate
/// (as far as PFC or credit let it) until `frames` were sent, the worker turns, the sink takes
/// what comes out; then the worker drains. Returns (turns, sent, delivered).
#[inline(never)]
fn drive(
    mut w: ForwardWorker,
    src: &MemPeer,
    dst: &MemPeer,
    mut source: Source,
    frame: &[u8],
    frames: u64,
) -> (u64, u64, u64) {
    let gap = frame_ns(frame.len(), INGRESS_BPS);
    let turn_ns = gap * (BATCH as u64 / 2);
    let len = frame.len() as u32;
    let (mut now, mut next_tx, mut sent, mut delivered, mut turns) = (0u64, 0u64, 0, 0, 0u64);
    let mut idle_turns = 0;
    let mut partners = [(src, 20), (dst, 21)].map(|(peer, mac)| {
        let mut p = Partner::new(MacAddr([2, 0, 0, 0, 0, mac]));
        p.hello(peer, now);
        p
    });
    // Stop once everything was sent and nothing came out for a while (queues drained).
    while sent < frames || idle_turns < 100 {
        while next_tx <= now && sent < frames {
            let go = match &mut source {
                Source::Free => true,
                Source::Pfc(timers) => !timers.is_paused(PRIO, next_tx),
                Source::Sfc(rp) => !rp.is_paused(PRIO, None, next_tx),
                Source::Credit { source, .. } => {
                    if source.gate(PRIO, len) == Gate::Send {
                        source.on_sent(PRIO, len);
                        true
                    } else {
                        next_tx = now + turn_ns;
                        break;
                    }
                }
            };
            if go {
                src.inject(frame, next_tx);
                sent += 1;
            }
            next_tx += gap;
        }
        if let Source::Credit { source, .. } = &mut source {
            if let Some(u) = source.poll(now) {
                inject_credit(src, &u, now);
            }
        }
        w.step(now).expect("in-memory ports do not fail");
        turns += 1;
        for f in src.take() {
            if partners[0].take(src, &f, now) {
                continue;
            }
            match &mut source {
                Source::Pfc(timers) => {
                    if let Ok(m) = MacControl::parse_frame(&f) {
                        timers.on_frame(&m, now);
                    }
                }
                Source::Sfc(rp) => {
                    if let Ok(m) = SfcmFrame::parse(&f) {
                        rp.on_sfcm(&m.msg, now);
                    }
                }
                Source::Credit { source, .. } => {
                    take_credit(source, &f, now);
                }
                Source::Free => {}
            }
        }
        let out = dst.take();
        let before = delivered;
        for f in &out {
            if partners[1].take(dst, f, now) {
                continue;
            }
            if let Source::Credit { sink, .. } = &mut source {
                if take_credit(sink, f, now) {
                    continue;
                }
                // The sink consumes at once.
                sink.on_data(now, PRIO, f.len() as u32);
                sink.on_drain(PRIO, f.len() as u32);
            }
            delivered += 1;
        }
        if let Source::Credit { sink, .. } = &mut source {
            if let Some(u) = sink.poll(now) {
                inject_credit(dst, &u, now);
            }
        }
        idle_turns = if delivered == before {
            idle_turns + 1
        } else {
            0
        };
        now += turn_ns;
    }
    (turns, sent, delivered)
}

/// The measured loop of `mem-port`: the same injection schedule and turns as [`drive`], but
/// each turn only moves what port 0 received straight out of port 1.
#[inline(never)]
fn drive_mem_port(
    (mut port_in, peer_in): (MemPort, MemPeer),
    (mut port_out, peer_out): (MemPort, MemPeer),
    mut pool: FramePool,
    frame: &[u8],
    frames: u64,
) -> (u64, u64, u64) {
    let gap = frame_ns(frame.len(), INGRESS_BPS);
    let turn_ns = gap * (BATCH as u64 / 2);
    let (mut now, mut next_tx, mut sent, mut delivered, mut turns) = (0u64, 0u64, 0, 0, 0u64);
    let mut rx: Vec<RxFrame> = Vec::with_capacity(BATCH);
    let mut tx = Vec::with_capacity(BATCH);
    while sent < frames || peer_in.pending() > 0 {
        while next_tx <= now && sent < frames {
            peer_in.inject(frame, next_tx);
            sent += 1;
            next_tx += gap;
        }
        rx.clear();
        port_in
            .recv(&mut pool, &mut rx, BATCH, now)
            .expect("in-memory ports do not fail");
        tx.clear();
        tx.extend(rx.drain(..).map(|r| r.frame));
        port_out
            .send(&mut pool, &mut tx)
            .expect("in-memory ports do not fail");
        turns += 1;
        delivered += peer_out.take().len() as u64;
        now += turn_ns;
    }
    (turns, sent, delivered)
}
