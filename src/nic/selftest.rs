//! `lossless selftest`: every frame class the daemon speaks, sent each way between two ports
//! wired to each other through the same AF_XDP (or AF_PACKET) ports the daemon uses, and
//! compared byte for byte on arrival; plus a real IEEE 1588 peer-delay exchange each way.
//!
//! Frames are built with the project's codecs (`wire/`) and the exchange runs the link-up
//! state machines (`linkup::pdelay`), so a pass means the daemon's own frames get through.

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use serde::Serialize;

use crate::{
    dataplane::{
        clock::now_ns,
        open::{
            attach_for, iface_max_frame, open_worker_ports, Backend, OpenError, Queues, WorkerPorts,
        },
        port::{send_or_release, Port, PortError, RxFrame},
        xdp_prog::{Steering, XdpMode},
    },
    linkup::{
        lldp::LldpConfig,
        pdelay::{InitiatorConfig, PdelayInitiator, PdelayResponder},
        Measurement,
    },
    wire::{
        ptp::{PdelayBody, PortIdentity, Ptp},
        test_traffic::DEFAULT_TEST_UDP_PORT,
        CreditEntry, CreditOp, CreditUpdate, EtherType, EthernetRepr, FrameKind, MacAddr,
        MacControl, SfcScope, Sfcm, SfcmFrame, TestFrame, VlanTag, WireError,
    },
};

/// The frame classes checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameClass {
    /// 802.3x PAUSE.
    Pause,
    /// 802.1Qbb PFC.
    Pfc,
    /// LLDP with the DCBX PFC TLV and our capability TLV.
    Lldp,
    /// Source flow control message (EtherType 0x88B5).
    Sfcm,
    /// Credit update (EtherType 0x88B5).
    Credit,
    /// 802.1Q-tagged IPv4/UDP test traffic.
    Test,
}

impl FrameClass {
    /// Every class, in report order.
    pub const ALL: [FrameClass; 6] = [
        FrameClass::Pause,
        FrameClass::Pfc,
        FrameClass::Lldp,
        FrameClass::Sfcm,
        FrameClass::Credit,
        FrameClass::Test,
    ];

    /// Name in reports.
    pub fn label(self) -> &'static str {
        match self {
            FrameClass::Pause => "PAUSE",
            FrameClass::Pfc => "PFC",
            FrameClass::Lldp => "LLDP",
            FrameClass::Sfcm => "SFCM",
            FrameClass::Credit => "credit update",
            FrameClass::Test => "test frame",
        }
    }
}

/// What a selftest does.
#[derive(Debug, Clone)]
pub struct SelftestConfig {
    /// First port.
    pub a: String,
    /// Second port.
    pub b: String,
    /// Frames of each class each way.
    pub count: u32,
    /// Peer-delay samples each way.
    pub pdelay_samples: u32,
    /// How long to wait for frames after the last was sent, and for each peer-delay answer.
    pub timeout: Duration,
    /// Priority of the PFC and test frames.
    pub priority: u8,
    /// Packet I/O backend.
    pub backend: Backend,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Frame pool size.
    pub frames: u32,
    /// What must get through for a pass (others are reported but do not fail the test).
    pub required: Required,
    /// Set to stop early (SIGINT, SIGTERM): the run returns [`SelftestError::Interrupted`]
    /// after detaching what it attached, which a process killed by the signal never does.
    pub stop: &'static AtomicBool,
}

impl SelftestConfig {
    /// [`SelftestError::Interrupted`] once [`SelftestConfig::stop`] is set.
    fn go_on(&self) -> Result<(), SelftestError> {
        match self.stop.load(Ordering::Relaxed) {
            true => Err(SelftestError::Interrupted),
            false => Ok(()),
        }
    }
}

/// The classes (and the peer-delay exchange) a pass requires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Required {
    /// Frame classes.
    pub classes: Vec<FrameClass>,
    /// The peer-delay exchange.
    pub pdelay: bool,
}

impl Required {
    /// Everything.
    pub fn all() -> Self {
        Required {
            classes: FrameClass::ALL.to_vec(),
            pdelay: true,
        }
    }

    /// What a configuration relies on: PAUSE and PFC for PFC priorities, LLDP and peer delay
    /// for link-up, SFCM for SFC priorities, credit updates for credit priorities, and test
    /// frames (data) always.
    pub fn for_plan(plan: &crate::config::Plan) -> Self {
        let any = |f: fn(&crate::fc::plan::PrioPlan) -> bool| plan.prios.iter().any(f);
        let mut classes = Vec::new();
        if any(|p| p.pfc.is_some()) {
            classes.extend([FrameClass::Pause, FrameClass::Pfc]);
        }
        if plan.linkup.is_some() {
            classes.push(FrameClass::Lldp);
        }
        if any(|p| p.sfc.is_some()) {
            classes.push(FrameClass::Sfcm);
        }
        if any(|p| p.credit) {
            classes.push(FrameClass::Credit);
        }
        classes.push(FrameClass::Test);
        Required {
            classes,
            pdelay: plan.linkup.is_some(),
        }
    }
}

/// One class in one direction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassResult {
    /// Class.
    pub class: FrameClass,
    /// Frames sent (taken by the TX ring).
    pub sent: u32,
    /// Arrived byte for byte as sent.
    pub intact: u32,
    /// Arrived as this class but with different bytes.
    pub damaged: u32,
    /// A pass requires this class.
    pub required: bool,
}

impl ClassResult {
    /// "2/3 intact, 1 damaged".
    pub fn tally(&self) -> String {
        let mut t = format!("{}/{} intact", self.intact, self.sent);
        if self.damaged > 0 {
            t += &format!(", {} damaged", self.damaged);
        }
        t
    }

    /// Every frame arrived intact.
    pub fn passed(&self) -> bool {
        self.sent > 0 && self.intact == self.sent && self.damaged == 0
    }
}

/// The peer-delay exchange in one direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PdelayResult {
    /// Requests the initiator sent.
    pub requests: u32,
    /// Requests the responder answered.
    pub answered: u64,
    /// The measurement, when it completed.
    pub measurement: Option<Measurement>,
    /// Why it did not.
    pub error: Option<String>,
    /// A pass requires the exchange.
    pub required: bool,
}

impl PdelayResult {
    /// The exchange completed with every sample asked for.
    pub fn passed(&self, samples: u32) -> bool {
        self.measurement
            .as_ref()
            .is_some_and(|m| m.samples.len() >= samples as usize)
    }
}

/// One direction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionReport {
    /// Sending port.
    pub from: String,
    /// Receiving port.
    pub to: String,
    /// One entry per class.
    pub classes: Vec<ClassResult>,
    /// Peer delay: `from` asks, `to` answers.
    pub pdelay: PdelayResult,
    /// Frames that arrived on `to` and matched no class sent (other traffic on the link).
    pub other_frames: u64,
}

/// The whole test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelftestReport {
    /// First port.
    pub a: String,
    /// Second port.
    pub b: String,
    /// Packet I/O backend used.
    pub backend: &'static str,
    /// a→b, then b→a.
    pub directions: Vec<DirectionReport>,
    /// What a pass requires.
    pub required: Required,
    /// What did not get through, one line each (empty: everything did); a class the
    /// configuration does not rely on is marked so.
    pub missing: Vec<String>,
    /// Every required class arrived intact both ways (and the required peer-delay exchanges
    /// completed).
    pub passed: bool,
}

/// Why the test could not run.
#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    /// The two ports are the same interface.
    #[error("--a and --b must be two different interfaces")]
    SamePort,
    /// Opening the ports failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Port I/O failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// A frame could not be built.
    #[error("building a frame: {0}")]
    Wire(#[from] WireError),
    /// The frame pool ran dry.
    #[error("frame pool exhausted")]
    NoFrames,
    /// SIGINT or SIGTERM came before the end.
    #[error("interrupted: nothing to report (the ports were released)")]
    Interrupted,
}

/// A frame sent and waiting to be matched on the other side.
struct Expected {
    class: FrameClass,
    bytes: Vec<u8>,
    seen: bool,
}

/// Builds the frames of `class` number `i` from `src` to `dst`.
fn build(
    class: FrameClass,
    i: u32,
    src: MacAddr,
    dst: MacAddr,
    prio: u8,
    buf: &mut [u8],
) -> Result<usize, WireError> {
    // Small, distinct values: a PAUSE or PFC that a real NIC acts on pauses it for microseconds.
    let q = 1 + i as u16;
    match class {
        FrameClass::Pause => MacControl::Pause { quanta: q }.emit_frame(src, buf),
        FrameClass::Pfc => MacControl::Pfc {
            enable: 1 << prio,
            quanta: std::array::from_fn(|p| if p == usize::from(prio) { q } else { 0 }),
        }
        .emit_frame(src, buf),
        FrameClass::Lldp => {
            let mut cfg = LldpConfig::new(src, "selftest", 1 << prio);
            cfg.system_name = Some(format!("lossless selftest {i}"));
            let org = cfg.org;
            crate::linkup::lldp::LldpAgent::new(cfg, 0)
                .pdu()
                .emit_frame(src, org, buf)
        }
        FrameClass::Sfcm => SfcmFrame {
            eth: EthernetRepr {
                dst,
                src,
                vlan: None,
                ethertype: EtherType::LOSSLESS,
            },
            msg: Sfcm {
                priority: prio,
                scope: SfcScope::Class,
                seq: i,
                pause_ns: 1_000 + u64::from(i),
                sent_ns: now_ns(),
                queue_bytes: 4096,
                drain_bps: 10_000_000_000,
                src_mac: dst,
                flow: None,
            },
        }
        .emit(buf),
        FrameClass::Credit => {
            let mut u = CreditUpdate::new();
            u.push(CreditEntry {
                op: CreditOp::Normal,
                fctbs: (i % 4096) as u16,
                vl: prio,
                fccl: ((i + 100) % 4096) as u16,
            })?;
            u.emit_frame(crate::fc::credit_port::CREDIT_DST, src, buf)
        }
        FrameClass::Test => {
            let f = TestFrame {
                eth: EthernetRepr {
                    dst,
                    src,
                    vlan: Some(VlanTag {
                        pcp: prio,
                        dei: false,
                        vid: 0,
                    }),
                    ethertype: EtherType::IPV4,
                },
                src_ip: [192, 0, 2, 1],
                dst_ip: [192, 0, 2, 2],
                dscp: 0,
                src_port: DEFAULT_TEST_UDP_PORT,
                dst_port: DEFAULT_TEST_UDP_PORT,
                flow: 1,
                seq: u64::from(i),
                tx_ns: now_ns(),
                len: 128,
            };
            f.emit(buf)
        }
    }
}

/// Which class a received frame belongs to, by the wire's classifier (a frame whose payload
/// is damaged still counts as its class, so it shows up as damaged); test frames are IPv4
/// data our test-frame parser accepts.
fn classify(frame: &[u8]) -> Option<FrameClass> {
    let c = crate::wire::classify(frame);
    match c.kind {
        FrameKind::Pause => Some(FrameClass::Pause),
        FrameKind::Pfc => Some(FrameClass::Pfc),
        FrameKind::Lldp => Some(FrameClass::Lldp),
        FrameKind::Credit => Some(FrameClass::Credit),
        FrameKind::Sfcm => Some(FrameClass::Sfcm),
        FrameKind::Data if c.ethertype == EtherType::IPV4 => {
            crate::wire::TestFrameView::parse(frame)
                .ok()
                .map(|_| FrameClass::Test)
        }
        FrameKind::Ptp | FrameKind::Data | FrameKind::Runt => None,
    }
}

struct Side {
    name: String,
    mac: MacAddr,
}

/// Sends one frame built by `emit`; returns its bytes and the TX time, or `None` if the TX
/// ring had no room.
fn send_one(
    port: &mut dyn Port,
    wp_pool: &mut crate::dataplane::pool::FramePool,
    emit: impl FnOnce(&mut [u8]) -> Result<usize, WireError>,
) -> Result<Option<(Vec<u8>, u64)>, SelftestError> {
    let mut f = wp_pool.alloc().ok_or(SelftestError::NoFrames)?;
    let len = match emit(wp_pool.buf_mut(&f)) {
        Ok(n) => n,
        Err(e) => {
            wp_pool.release(f);
            return Err(e.into());
        }
    };
    let bytes = wp_pool.buf_mut(&f)[..len].to_vec();
    f.set_len(len);
    let t = now_ns();
    let mut batch = Vec::with_capacity(1);
    Ok(send_or_release(port, wp_pool, &mut batch, f)?.then_some((bytes, t)))
}

/// Receives what is waiting on port `i`, hands each frame to `f`, and frees it.
fn drain(
    wp: &mut WorkerPorts,
    i: usize,
    rx: &mut Vec<RxFrame>,
    mut f: impl FnMut(&[u8], u64),
) -> Result<usize, SelftestError> {
    let WorkerPorts { pool, ports, .. } = wp;
    ports[i].reclaim(pool)?;
    rx.clear();
    let n = ports[i].recv(pool, rx, 64, now_ns())?;
    for r in rx.drain(..) {
        f(pool.data(&r.frame), r.rx_ns);
        pool.release(r.frame);
    }
    Ok(n)
}

/// Runs the test.
pub fn run(cfg: &SelftestConfig) -> Result<SelftestReport, SelftestError> {
    if cfg.a == cfg.b {
        return Err(SelftestError::SamePort);
    }
    let ifaces = [cfg.a.clone(), cfg.b.clone()];
    let steering = Steering {
        forward_all: false,
        test_udp_port: DEFAULT_TEST_UDP_PORT,
        sfc_udp_port: 0,
    };
    let attached =
        attach_for(cfg.backend, &ifaces, cfg.xdp_mode, steering).map_err(OpenError::from)?;
    let mut wp = open_worker_ports(
        &ifaces,
        Queues::All,
        cfg.frames,
        iface_max_frame(&ifaces),
        cfg.backend,
        attached.as_ref(),
    )?;
    let sides = [
        Side {
            name: cfg.a.clone(),
            mac: wp.ports[0].mac(),
        },
        Side {
            name: cfg.b.clone(),
            mac: wp.ports[1].mac(),
        },
    ];
    let macs = [sides[0].mac, sides[1].mac];
    tracing::info!(a = %cfg.a, b = %cfg.b, backend = wp.backend, "ready");
    let mut rx = Vec::with_capacity(64);
    // Let anything in flight from before (an earlier run, the kernel) go by.
    let settle = now_ns() + 50_000_000;
    while now_ns() < settle {
        cfg.go_on()?;
        drain(&mut wp, 0, &mut rx, |_, _| {})?;
        drain(&mut wp, 1, &mut rx, |_, _| {})?;
        std::thread::sleep(Duration::from_millis(1));
    }

    // The frame classes, both directions at once.
    let mut expected: [Vec<Expected>; 2] = [Vec::new(), Vec::new()];
    let mut sent = [[0u32; 6]; 2];
    let mut tally = Unmatched::default();
    for i in 0..cfg.count {
        for (ci, class) in FrameClass::ALL.iter().enumerate() {
            for d in 0..2 {
                let (from, to) = (&sides[d], &sides[1 - d]);
                let WorkerPorts { pool, ports, .. } = &mut wp;
                let mut r = None;
                for _ in 0..100 {
                    r = send_one(ports[d].as_mut(), pool, |buf| {
                        build(*class, i, from.mac, to.mac, cfg.priority, buf)
                    })?;
                    if r.is_some() {
                        break;
                    }
                    ports[d].reclaim(pool)?;
                    std::thread::sleep(Duration::from_micros(100));
                }
                if let Some((bytes, _)) = r {
                    sent[d][ci] += 1;
                    expected[d].push(Expected {
                        class: *class,
                        bytes,
                        seen: false,
                    });
                }
            }
        }
        // Receive as we go, so a slow receiver is not what is measured.
        drain_both(&mut wp, &mut rx, &mut expected, macs, &mut tally)?;
        cfg.go_on()?;
    }
    let deadline = now_ns() + cfg.timeout.as_nanos() as u64;
    loop {
        cfg.go_on()?;
        drain_both(&mut wp, &mut rx, &mut expected, macs, &mut tally)?;
        if expected.iter().all(|e| e.iter().all(|x| x.seen)) || now_ns() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }

    // Peer delay, one direction at a time.
    let mut pdelay = Vec::new();
    for d in 0..2 {
        pdelay.push(pdelay_exchange(&mut wp, d, &sides, cfg, &mut rx)?);
    }

    let mut directions = Vec::new();
    let mut missing = Vec::new();
    let mut failed = false;
    for (d, pd) in pdelay.into_iter().enumerate() {
        let (from, to) = (&sides[d], &sides[1 - d]);
        let classes: Vec<ClassResult> = FrameClass::ALL
            .iter()
            .enumerate()
            .map(|(ci, class)| ClassResult {
                class: *class,
                sent: sent[d][ci],
                intact: expected[d]
                    .iter()
                    .filter(|e| e.class == *class && e.seen)
                    .count() as u32,
                damaged: tally.damaged[1 - d][ci],
                required: cfg.required.classes.contains(class),
            })
            .collect();
        let note = |required: bool| {
            if required {
                ""
            } else {
                " (not needed by the configuration)"
            }
        };
        for c in &classes {
            if !c.passed() {
                failed |= c.required;
                missing.push(format!(
                    "{} {} -> {}: {}{}",
                    c.class.label(),
                    from.name,
                    to.name,
                    c.tally(),
                    note(c.required)
                ));
            }
        }
        if !pd.passed(cfg.pdelay_samples) {
            failed |= pd.required;
            missing.push(format!(
                "peer delay {} -> {}: {}{}",
                from.name,
                to.name,
                pd.error.as_deref().unwrap_or("too few samples"),
                note(pd.required)
            ));
        }
        directions.push(DirectionReport {
            from: from.name.clone(),
            to: to.name.clone(),
            classes,
            pdelay: pd,
            other_frames: tally.other[1 - d],
        });
    }
    // Let copy-mode TX complete before the sockets close.
    for _ in 0..20 {
        for p in wp.ports.iter_mut() {
            p.reclaim(&mut wp.pool)?;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(SelftestReport {
        a: cfg.a.clone(),
        b: cfg.b.clone(),
        backend: wp.backend,
        passed: !failed,
        required: cfg.required.clone(),
        missing,
        directions,
    })
}

/// Frames that matched nothing sent, per receiving port.
#[derive(Debug, Default)]
struct Unmatched {
    /// Our class from the other port, with other bytes, per class.
    damaged: [[u32; 6]; 2],
    /// Anything else.
    other: [u64; 2],
}

/// Receives on both ports and matches frames against what the other side sent; what matches
/// nothing is added to `tally`.
fn drain_both(
    wp: &mut WorkerPorts,
    rx: &mut Vec<RxFrame>,
    expected: &mut [Vec<Expected>; 2],
    macs: [MacAddr; 2],
    tally: &mut Unmatched,
) -> Result<(), SelftestError> {
    for port in 0..2 {
        // Frames arriving on `port` were sent by the other side.
        let exp = &mut expected[1 - port];
        let sender = macs[1 - port];
        drain(wp, port, rx, |data, _| {
            if let Some(e) = exp.iter_mut().find(|e| !e.seen && e.bytes == data) {
                e.seen = true;
                return;
            }
            // Damaged: our class from our sender, with other bytes; anything else (the link
            // partner's own LLDP, say) is other traffic.
            let from_sender = EthernetRepr::parse(data).is_ok_and(|h| h.src == sender);
            match classify(data) {
                Some(c) if from_sender && exp.iter().any(|e| e.class == c) => {
                    let ci = FrameClass::ALL.iter().position(|x| *x == c).unwrap_or(0);
                    tally.damaged[port][ci] += 1;
                }
                _ => tally.other[port] += 1,
            }
        })?;
    }
    Ok(())
}

/// One peer-delay measurement: port `d` asks, the other answers.
fn pdelay_exchange(
    wp: &mut WorkerPorts,
    d: usize,
    sides: &[Side; 2],
    cfg: &SelftestConfig,
    rx: &mut Vec<RxFrame>,
) -> Result<PdelayResult, SelftestError> {
    let r = 1 - d;
    let mut icfg = InitiatorConfig::new(cfg.pdelay_samples, 5_000_000);
    icfg.timeout_ns = cfg.timeout.as_nanos() as u64;
    let mut init = PdelayInitiator::new(icfg, PortIdentity::from_mac(sides[d].mac, 1));
    let mut resp = PdelayResponder::new(PortIdentity::from_mac(sides[r].mac, 1));
    init.start(now_ns());
    let mut requests = 0u32;
    let hard_stop = now_ns()
        + (cfg.timeout.as_nanos() as u64 + 5_000_000) * u64::from(cfg.pdelay_samples * 3 + 2);
    let result = loop {
        cfg.go_on()?;
        let now = now_ns();
        init.poll(now);
        if let Some(res) = init.take_result() {
            break res.map_err(|e| e.to_string());
        }
        if now >= hard_stop {
            break Err("no result before the deadline".to_string());
        }
        if let Some(req) = init.poll_transmit(now) {
            let WorkerPorts { pool, ports, .. } = &mut *wp;
            let mac = sides[d].mac;
            if let Some((_, t1)) = send_one(ports[d].as_mut(), pool, |b| req.emit_frame(mac, b))? {
                init.on_sent(req.sequence_id, t1);
                requests += 1;
            }
        }
        // The responder's side.
        let mut answers = Vec::new();
        drain(wp, r, rx, |data, rx_ns| {
            if let Ok((src, Ptp::Pdelay(m))) = Ptp::parse_frame(data) {
                if src != sides[r].mac && matches!(m.body, PdelayBody::Req { .. }) {
                    if let Some(a) = resp.handle_request(rx_ns, &m) {
                        answers.push(a);
                    }
                }
            }
        })?;
        for a in answers {
            let WorkerPorts { pool, ports, .. } = &mut *wp;
            let mac = sides[r].mac;
            let msg = a.resp;
            if let Some((_, t3)) = send_one(ports[r].as_mut(), pool, |b| msg.emit_frame(mac, b))? {
                let fup = a.follow_up(t3);
                send_one(ports[r].as_mut(), pool, |b| fup.emit_frame(mac, b))?;
            }
        }
        // The initiator's side.
        drain(wp, d, rx, |data, rx_ns| {
            if let Ok((src, Ptp::Pdelay(m))) = Ptp::parse_frame(data) {
                if src != sides[d].mac {
                    init.handle(rx_ns, &m);
                }
            }
        })?;
        std::thread::sleep(Duration::from_micros(50));
    };
    let (measurement, error) = match result {
        Ok(m) => (Some(m), None),
        Err(e) => (None, Some(e)),
    };
    Ok(PdelayResult {
        requests,
        answered: resp.answered(),
        measurement,
        error,
        required: cfg.required.pdelay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_builds_and_classifies_as_itself() {
        let (a, b) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
        for class in FrameClass::ALL {
            let mut buf = [0u8; 2048];
            let n = build(class, 5, a, b, 3, &mut buf).unwrap();
            assert!(n >= 60, "{class:?} is {n} bytes");
            assert_eq!(classify(&buf[..n]), Some(class), "{class:?}");
        }
        // A damaged PFC body still counts as PFC (opcode), an unknown EtherType as nothing.
        let mut buf = [0u8; 64];
        let n = build(FrameClass::Pfc, 0, a, b, 3, &mut buf).unwrap();
        buf[16] = 0xff; // the priority-enable vector's reserved upper octet
        assert_eq!(classify(&buf[..n]), Some(FrameClass::Pfc));
        buf[12] = 0x12;
        assert_eq!(classify(&buf[..n]), None);
    }
}
