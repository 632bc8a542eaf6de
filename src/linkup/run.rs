//! [`LinkAgent`]: the LLDP agent, the peer-delay responder and (on demand) the initiator of one
//! port, driven from the caller's loop. This is the I/O edge of link-up: it parses frames,
//! emits answers into the caller's [`FramePool`] and sends them on the caller's [`Port`]. The
//! TX times of Pdelay_Req and Pdelay_Resp are the kernel's software TX stamps when the agent
//! has [`LinkAgent::with_kernel_tx_stamps`] (those two frames then go out on an AF_PACKET
//! socket, see [`super::tx_stamp`]), else its clock read immediately before the `send` that
//! kicks the frame.
//!
//! Two ways to drive it:
//! - a port that carries only link-up traffic (the `measure` tool, or a daemon's port while it
//!   is not forwarding): call [`LinkAgent::poll`] every loop turn and sleep until
//!   [`LinkAgent::next_deadline`] or the port is readable;
//! - a forwarding worker that receives every frame itself: hand each received frame, with
//!   the kind [`crate::wire::classify`] found, to [`LinkAgent::on_frame`] (which takes PTP and
//!   LLDP frames and says so), and call [`LinkAgent::transmit`] once per loop turn and when the
//!   deadline passes.

use std::collections::VecDeque;

use super::{
    lldp::{LldpAgent, LldpConfig, NeighbourChange},
    pdelay::{InitiatorConfig, MeasureError, PdelayInitiator, PdelayResponder, Response},
    tx_stamp::TxStamper,
    Measurement,
};
use crate::dataplane::{
    agent::Taken,
    clock::now_ns,
    pool::{Frame, FramePool},
    port::{send_or_release, Port, PortError, RxFrame, Stamping},
};
use crate::wire::{
    classify,
    lldp::Lldpdu,
    ptp::{PdelayBody, PdelayMessage, PortIdentity, Ptp},
    FrameKind, MacAddr, WireError,
};

/// Frames received per [`LinkAgent::poll`].
const RX_BATCH: usize = 64;

/// The largest peer-delay frame we emit fits (Ethernet + 54-octet PTP header and body).
const STAMP_BUF: usize = 256;

/// The largest shutdown LLDPDU: Ethernet header (14), Chassis ID (2 + 7), Port ID (2 + 1 +
/// at most 255), TTL (4), End (2).
const SHUTDOWN_FRAME_MAX: usize = 14 + 9 + 258 + 4 + 2;

/// Configuration of a [`LinkAgent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkAgentConfig {
    /// The LLDP agent.
    pub lldp: LldpConfig,
    /// Measurements started with [`LinkAgent::start_measurement`].
    pub initiator: InitiatorConfig,
    /// Answer Pdelay_Req.
    pub respond: bool,
}

/// Why a [`LinkAgent`] call failed.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The port failed.
    #[error(transparent)]
    Port(#[from] PortError),
    /// A frame could not be encoded.
    #[error("encoding a link-up frame: {0}")]
    Wire(#[from] WireError),
}

/// Counters of a [`LinkAgent`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkCounters {
    /// PTP frames received.
    pub rx_ptp: u64,
    /// LLDP frames received.
    pub rx_lldp: u64,
    /// PTP or LLDP frames that did not parse.
    pub rx_malformed: u64,
    /// Frames of other EtherTypes given back (or released by [`LinkAgent::poll`]).
    pub rx_other: u64,
    /// Frames sent.
    pub tx: u64,
    /// Frames not sent because the pool was empty or the TX ring full.
    pub tx_dropped: u64,
    /// Pdelay_Req answered.
    pub answered: u64,
    /// Peer-delay frames sent for a kernel TX stamp that did not come in time (their time
    /// was read in user space instead).
    pub tx_stamp_missed: u64,
    /// Pdelay_Req not answered: less than [`MIN_ANSWER_GAP_NS`] after the last one answered.
    pub requests_refused: u64,
}

/// The least time between two requests the responder answers. Each answer waits for its
/// kernel TX stamp (up to tens of microseconds) in the worker that forwards, so a flood of
/// requests must not buy a wait per frame; a link partner asks once a second (ptp4l) or
/// every `sample_interval` (another daemon, 10 ms by default), far less often than this.
pub const MIN_ANSWER_GAP_NS: u64 = 1_000_000;

/// Link-up on one port: LLDP, the peer-delay responder and the initiator.
pub struct LinkAgent {
    mac: MacAddr,
    lldp: LldpAgent,
    responder: Option<PdelayResponder>,
    initiator: PdelayInitiator,
    /// Answers waiting for the TX path.
    answers: VecDeque<Response>,
    /// A request received before this time is not answered ([`MIN_ANSWER_GAP_NS`]).
    answer_after_ns: u64,
    rx: Vec<RxFrame>,
    /// The one-frame batch each send goes through (kept: nothing allocated per frame).
    tx: Vec<Frame>,
    clock: fn() -> u64,
    /// Kernel TX stamps for Pdelay_Req and Pdelay_Resp, when the port has them.
    stamper: Option<TxStamper>,
    /// The frame being sent through `stamper` (allocated once).
    stamp_buf: Vec<u8>,
    counters: LinkCounters,
}

impl LinkAgent {
    /// An agent for a port with MAC `mac`; its first LLDPDU is due at `now`. The PTP port
    /// identity is the EUI-64 of `mac`, port number 1.
    pub fn new(cfg: LinkAgentConfig, mac: MacAddr, now: u64) -> Self {
        let identity = PortIdentity::from_mac(mac, 1);
        LinkAgent {
            mac,
            lldp: LldpAgent::new(cfg.lldp, now),
            responder: cfg.respond.then(|| PdelayResponder::new(identity)),
            initiator: PdelayInitiator::new(cfg.initiator, identity),
            answers: VecDeque::new(),
            answer_after_ns: 0,
            rx: Vec::with_capacity(RX_BATCH),
            tx: Vec::with_capacity(1),
            clock: now_ns,
            stamper: None,
            stamp_buf: Vec::new(),
            counters: LinkCounters::default(),
        }
    }

    /// Takes the TX times of Pdelay_Req (T1) and Pdelay_Resp (T3) from the kernel: those two
    /// go out on an AF_PACKET socket on `iface` with software TX time stamping, as ptp4l
    /// sends them, instead of through the port (see [`crate::linkup::tx_stamp`]). If that
    /// socket cannot be opened (no CAP_NET_RAW, not a real interface) the agent keeps the
    /// user-space time read before the kick, says so in the log and in
    /// [`LinkAgent::tx_stamping`]. `wait` bounds the wait for each stamp
    /// ([`crate::linkup::tx_stamp::STAMP_TIMEOUT`] for a measuring tool,
    /// [`crate::linkup::tx_stamp::DATAPLANE_STAMP_TIMEOUT`] in a thread that forwards).
    pub fn with_kernel_tx_stamps(mut self, iface: &str, wait: std::time::Duration) -> Self {
        match TxStamper::open(iface, wait) {
            Ok(s) => {
                self.stamper = Some(s);
                self.stamp_buf = vec![0; STAMP_BUF];
            }
            Err(e) => tracing::warn!(
                iface,
                error = %e,
                "no kernel TX time stamps; peer-delay TX times are read in user space"
            ),
        }
        self
    }

    /// Where the TX times of our peer-delay frames come from.
    pub fn tx_stamping(&self) -> Stamping {
        if self.stamper.is_some() {
            Stamping::Kernel
        } else {
            Stamping::User
        }
    }

    /// Replaces the TX-stamp clock (CLOCK_MONOTONIC ns by default), for tests.
    pub fn with_clock(mut self, clock: fn() -> u64) -> Self {
        self.clock = clock;
        self
    }

    /// Starts a peer-delay measurement at `now` (abandoning one in progress).
    pub fn start_measurement(&mut self, now: u64) {
        self.initiator.start(now);
    }

    /// True while a measurement is in progress.
    pub fn measuring(&self) -> bool {
        self.initiator.running()
    }

    /// The finished measurement, once. A successful one is also advertised in our LLDP
    /// capability TLV (its estimate) from `now` on.
    pub fn take_measurement(&mut self, now: u64) -> Option<Result<Measurement, MeasureError>> {
        let r = self.initiator.take_result()?;
        if let Ok(m) = &r {
            let mut cap = self.lldp.config().capability;
            cap.round_trip_ns = u32::try_from(m.estimate_ns.max(0)).unwrap_or(u32::MAX);
            let pfc = self.lldp.config().pfc;
            self.lldp.set_advertised(now, pfc, cap);
        }
        Some(r)
    }

    /// The LLDP agent (neighbours, what we advertise).
    pub fn lldp(&self) -> &LldpAgent {
        &self.lldp
    }

    /// The LLDP agent, to change what we advertise.
    pub fn lldp_mut(&mut self) -> &mut LldpAgent {
        &mut self.lldp
    }

    /// Counters.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Takes in a received frame of kind `kind` ([`crate::wire::classify`]) that arrived at
    /// `rx_ns`: LLDP and peer-delay frames are the agent's (handled, or counted malformed);
    /// any other kind, and PTP other than peer delay, is not, and is left alone. The frame's
    /// buffer stays the caller's either way.
    pub fn on_frame(&mut self, kind: FrameKind, data: &[u8], rx_ns: u64, now: u64) -> Taken {
        match kind {
            FrameKind::Ptp => {
                self.counters.rx_ptp += 1;
                match Ptp::parse_frame(data) {
                    Ok((src, Ptp::Pdelay(m))) if src != self.mac => self.on_pdelay(rx_ns, &m),
                    // Sync, Announce, ...: end-to-end PTP is the hosts', not link-up's; the
                    // caller forwards it (or drops it as link-local), counted either way.
                    Ok((_, Ptp::NotOurs { .. })) => return Taken::NotMine,
                    // Our own request reflected back.
                    Ok(_) => {}
                    Err(_) => return self.malformed(),
                }
            }
            FrameKind::Lldp => {
                self.counters.rx_lldp += 1;
                match Lldpdu::parse_frame(data, self.lldp.config().org) {
                    Ok((src, pdu)) if src != self.mac => match self.lldp.handle_rx(now, src, pdu) {
                        NeighbourChange::Added => {
                            tracing::info!(neighbour = %src, "LLDP neighbour learnt");
                        }
                        // Said once: a flood would otherwise be a line per frame.
                        NeighbourChange::TableFull if self.lldp.counters().table_drops == 1 => {
                            tracing::warn!(
                                neighbour = %src, kept = crate::linkup::lldp::MAX_NEIGHBOURS,
                                "LLDP neighbour table full: more neighbours than a link has are not taken in until one expires"
                            );
                        }
                        _ => {}
                    },
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "malformed LLDPDU");
                        return self.malformed();
                    }
                }
            }
            _ => {
                self.counters.rx_other += 1;
                return Taken::NotMine;
            }
        }
        Taken::Consumed
    }

    fn malformed(&mut self) -> Taken {
        self.counters.rx_malformed += 1;
        Taken::Malformed
    }

    fn on_pdelay(&mut self, rx_ns: u64, m: &PdelayMessage) {
        match m.body {
            PdelayBody::Req { .. } => {
                if self.responder.is_none() {
                    return;
                }
                if rx_ns < self.answer_after_ns {
                    self.counters.requests_refused += 1;
                    return;
                }
                if let Some(r) = self
                    .responder
                    .as_mut()
                    .and_then(|r| r.handle_request(rx_ns, m))
                {
                    self.answer_after_ns = rx_ns + MIN_ANSWER_GAP_NS;
                    self.answers.push_back(r);
                }
            }
            _ => self.initiator.handle(rx_ns, m),
        }
    }

    /// Sends what is due at `now`: answers to requests (each Pdelay_Resp, then its Follow_Up
    /// carrying the Resp's TX time), our LLDPDU, the next Pdelay_Req. Also expires neighbours
    /// and times out exchanges.
    pub fn transmit(
        &mut self,
        port: &mut dyn Port,
        pool: &mut FramePool,
        now: u64,
    ) -> Result<(), LinkError> {
        while let Some(r) = self.answers.pop_front() {
            let resp = r.resp;
            if let Some(t3) = self.send_stamped(port, pool, |mac, buf| resp.emit_frame(mac, buf))? {
                let fup = r.follow_up(t3);
                self.send(port, pool, |mac, buf| fup.emit_frame(mac, buf))?;
                self.counters.answered += 1;
            }
        }
        self.lldp.expire(now, |gone| {
            tracing::info!(neighbour = %gone.src, "LLDP neighbour expired");
        });
        if let Some(pdu) = self.lldp.poll_transmit(now) {
            let org = self.lldp.config().org;
            self.send(port, pool, |mac, buf| pdu.emit_frame(mac, org, buf))?;
        }
        if let Some(req) = self.initiator.poll_transmit(now) {
            if let Some(t1) = self.send_stamped(port, pool, |mac, buf| req.emit_frame(mac, buf))? {
                self.initiator.on_sent(req.sequence_id, t1);
            }
        }
        Ok(())
    }

    /// Emits one frame and sends it with a kernel TX stamp (CLOCK_MONOTONIC) when the agent
    /// has [`TxStamper`], else through the port like [`LinkAgent::send`]. A frame whose stamp
    /// does not come is sent all the same and gets the time read just before its send, and
    /// counted in [`LinkCounters::tx_stamp_missed`].
    fn send_stamped(
        &mut self,
        port: &mut dyn Port,
        pool: &mut FramePool,
        emit: impl FnOnce(MacAddr, &mut [u8]) -> Result<usize, WireError>,
    ) -> Result<Option<u64>, LinkError> {
        let Some(stamper) = self.stamper.as_mut() else {
            return self.send(port, pool, emit);
        };
        let len = emit(self.mac, &mut self.stamp_buf)?;
        let before = (self.clock)();
        match stamper.send(&self.stamp_buf[..len]) {
            Ok(stamp) => {
                self.counters.tx += 1;
                if stamp.is_none() {
                    self.counters.tx_stamp_missed += 1;
                }
                Ok(Some(stamp.unwrap_or(before)))
            }
            Err(e) => {
                self.counters.tx_dropped += 1;
                tracing::debug!(error = %e, "peer-delay frame not sent");
                Ok(None)
            }
        }
    }

    /// Emits one frame and sends it; returns the TX time (read just before the kick), or
    /// `None` if there was no free frame or no TX room.
    fn send(
        &mut self,
        port: &mut dyn Port,
        pool: &mut FramePool,
        emit: impl FnOnce(MacAddr, &mut [u8]) -> Result<usize, WireError>,
    ) -> Result<Option<u64>, LinkError> {
        let Some(mut frame) = pool.alloc() else {
            self.counters.tx_dropped += 1;
            return Ok(None);
        };
        let len = match emit(self.mac, pool.buf_mut(&frame)) {
            Ok(n) => n,
            Err(e) => {
                pool.release(frame);
                return Err(e.into());
            }
        };
        frame.set_len(len);
        let t = (self.clock)();
        if send_or_release(port, pool, &mut self.tx, frame)? {
            self.counters.tx += 1;
            Ok(Some(t))
        } else {
            self.counters.tx_dropped += 1;
            Ok(None)
        }
    }

    /// One turn on a port that carries only link-up traffic: reclaims completed TX frames,
    /// receives a batch (frames that are not PTP or LLDP are dropped), handles it and sends
    /// what is due. Returns the number of frames received.
    pub fn poll(
        &mut self,
        port: &mut dyn Port,
        pool: &mut FramePool,
        now: u64,
    ) -> Result<usize, LinkError> {
        port.reclaim(pool)?;
        let mut rx = std::mem::take(&mut self.rx);
        rx.clear();
        let n = port.recv(pool, &mut rx, RX_BATCH, now)?;
        for f in rx.drain(..) {
            let data = pool.data(&f.frame);
            self.on_frame(classify(data).kind, data, f.rx_ns, now);
            pool.release(f.frame);
        }
        self.rx = rx;
        self.transmit(port, pool, now)?;
        Ok(n)
    }

    /// Sends the TTL-0 LLDPDU that tells neighbours to forget this port at once (if an
    /// LLDPDU went out: [`crate::linkup::lldp::LldpAgent::shutdown_pdu`]).
    pub fn shutdown(&mut self, port: &mut dyn Port, pool: &mut FramePool) -> Result<(), LinkError> {
        if let Some(pdu) = self.lldp.shutdown_pdu() {
            let org = self.lldp.config().org;
            self.send(port, pool, |mac, buf| pdu.emit_frame(mac, org, buf))?;
        }
        Ok(())
    }

    /// The same TTL-0 LLDPDU as a whole frame, for whoever sends it once this agent can no
    /// longer (the daemon, after its workers stopped: [`super::shared::LinkShared`]); `None`
    /// if no LLDPDU went out.
    pub fn shutdown_frame(&self) -> Result<Option<Vec<u8>>, WireError> {
        let Some(pdu) = self.lldp.shutdown_pdu() else {
            return Ok(None);
        };
        let mut buf = vec![0; SHUTDOWN_FRAME_MAX];
        let len = pdu.emit_frame(self.mac, self.lldp.config().org, &mut buf)?;
        buf.truncate(len);
        Ok(Some(buf))
    }

    /// The next time [`LinkAgent::transmit`] has timed work (an answer waiting means now).
    pub fn next_deadline(&self) -> u64 {
        let d = self.lldp.next_deadline();
        let d = self.initiator.next_deadline().map_or(d, |i| i.min(d));
        if self.answers.is_empty() {
            d
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::dataplane::mem_port::{mem_link, MemPeer, MemPort};
    use crate::wire::ptp::PtpTimestamp;

    thread_local! {
        /// The simulated clock of this test's thread (tests run in parallel threads).
        static CLOCK: Cell<u64> = const { Cell::new(0) };
    }
    fn fake_clock() -> u64 {
        CLOCK.with(Cell::get)
    }
    fn set_clock(ns: u64) {
        CLOCK.with(|c| c.set(ns));
    }

    fn agent(mac: MacAddr, name: &str, samples: u32) -> (LinkAgent, MemPort, MemPeer) {
        let (port, peer) = mem_link(name, mac, 16);
        let cfg = LinkAgentConfig {
            lldp: LldpConfig::new(mac, name, 0x08),
            initiator: InitiatorConfig::new(samples, 1_000_000),
            respond: true,
        };
        (
            LinkAgent::new(cfg, mac, 0).with_clock(fake_clock),
            port,
            peer,
        )
    }

    /// Two agents over simulated wires with a 40 us one-way delay: each learns the other by
    /// LLDP, and A measures B at 80 us.
    #[test]
    fn two_agents_measure_each_other() {
        let (ma, mb) = (MacAddr([2, 0, 0, 0, 0, 0xa]), MacAddr([2, 0, 0, 0, 0, 0xb]));
        let (mut a, mut pa, peer_a) = agent(ma, "a0", 5);
        let (mut b, mut pb, peer_b) = agent(mb, "b0", 5);
        let mut pool = FramePool::heap(64).unwrap();
        let delay = 40_000;
        a.start_measurement(0);
        let mut now = 0;
        let mut result = None;
        // Frames on the wires: (arrival, towards B, frame). They arrive `delay` after they
        // left, stamped on arrival (never in the future of the receiver's clock).
        let mut wire: Vec<(u64, bool, Vec<u8>)> = Vec::new();
        while now < 200_000_000 && result.is_none() {
            set_clock(now);
            wire.retain(|(due, to_b, f)| {
                let arrived = *due <= now;
                if arrived {
                    let peer = if *to_b { &peer_b } else { &peer_a };
                    peer.inject(f, *due);
                }
                !arrived
            });
            a.poll(&mut pa, &mut pool, now).unwrap();
            b.poll(&mut pb, &mut pool, now).unwrap();
            wire.extend(peer_a.take().into_iter().map(|f| (now + delay, true, f)));
            wire.extend(peer_b.take().into_iter().map(|f| (now + delay, false, f)));
            result = a.take_measurement(now);
            now += 10_000;
        }
        let m = result.expect("finished").expect("measured");
        assert_eq!(m.samples.len(), 5);
        // The wire adds 40 us each way; our 10 us loop granularity adds up to 2 x 10 us.
        for s in &m.samples {
            assert!(
                (80_000..=100_000).contains(&s.round_trip_ns),
                "{}",
                s.round_trip_ns
            );
        }
        assert_eq!(b.counters().answered, 5);
        assert_eq!(a.lldp().neighbours().len(), 1);
        assert_eq!(b.lldp().neighbours().len(), 1);
        assert!(a.lldp().peer_responds());
        assert_eq!(pool.available(), 64, "every frame went back to the pool");
        // The estimate is advertised in A's next LLDPDU (fast transmission, 1 s after the last).
        assert_eq!(
            a.lldp().pdu().adaptive.unwrap().round_trip_ns as i64,
            m.estimate_ns
        );
    }

    #[test]
    fn answers_a_captured_ptp4l_request_and_gives_back_other_frames() {
        let mac = MacAddr([2, 0, 0, 0, 0, 0xb]);
        let (mut b, mut pb, peer) = agent(mac, "b0", 1);
        let mut pool = FramePool::heap(16).unwrap();
        set_clock(0);
        b.poll(&mut pb, &mut pool, 0).unwrap();
        assert_eq!(peer.take().len(), 1, "the LLDPDU at start");
        peer.inject(&crate::wire::ptp::tests::PTP4L_REQ, 5_000_000_123);
        peer.inject(&[0u8; 60], 5_000_000_200);
        set_clock(5_000_090_000);
        let n = b.poll(&mut pb, &mut pool, 5_000_100_000).unwrap();
        assert_eq!(n, 2);
        let out = peer.take();
        assert_eq!(out.len(), 2);
        let (_, Ptp::Pdelay(resp)) = Ptp::parse_frame(&out[0]).unwrap() else {
            panic!("not a Pdelay_Resp")
        };
        let (_, Ptp::Pdelay(fup)) = Ptp::parse_frame(&out[1]).unwrap() else {
            panic!("not a Follow_Up")
        };
        let requester = PortIdentity::from_mac(MacAddr([0x72, 0x10, 0x05, 0xf2, 0x49, 0xaa]), 1);
        assert_eq!(
            resp.body,
            PdelayBody::Resp {
                request_receipt: PtpTimestamp::from_ns(5_000_000_123),
                requesting: requester
            }
        );
        assert_eq!(
            fup.body,
            PdelayBody::RespFollowUp {
                response_origin: PtpTimestamp::from_ns(5_000_090_000),
                requesting: requester
            }
        );
        let c = b.counters();
        assert_eq!((c.rx_ptp, c.rx_other, c.answered), (1, 1, 1));
        assert_eq!(pool.available(), 16);
        // A frame of another kind is not the agent's; one of its kinds that does not parse is
        // malformed.
        assert_eq!(b.on_frame(FrameKind::Data, &[0; 60], 1, 1), Taken::NotMine);
        assert_eq!(b.on_frame(FrameKind::Ptp, &[0; 60], 1, 1), Taken::Malformed);
        assert_eq!(b.counters().rx_malformed, 1);
        // A flood of requests buys one answer per MIN_ANSWER_GAP_NS, not a TX-stamp wait each.
        let req = crate::wire::ptp::tests::PTP4L_REQ;
        for i in 0..100 {
            b.on_frame(FrameKind::Ptp, &req, 6_000_000_000 + i * 1_000, 1);
        }
        b.on_frame(FrameKind::Ptp, &req, 6_000_000_000 + MIN_ANSWER_GAP_NS, 1);
        assert_eq!(b.answers.len(), 2);
        assert_eq!(b.counters().requests_refused, 99);
        // PTP that is not peer delay (a Sync) is the hosts': given back, to be forwarded.
        let mut sync = crate::wire::ptp::tests::PTP4L_REQ;
        sync[14] = 0x00;
        assert_eq!(b.on_frame(FrameKind::Ptp, &sync, 1, 1), Taken::NotMine);
    }
}
