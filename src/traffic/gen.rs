//! The traffic generator: sends test frames at a line rate on one priority, round-robin over
//! flows, and is a real reaction point: PAUSE and PFC received on its interface stop it for
//! the time they say, at the link speed's quanta, and SFC messages stop its priority (class
//! scope) or the one flow they name (flow scope: the others go on, round-robin over those not
//! paused). Like a NIC, it sends nothing while its link has no carrier (`CarrierHold`).

use std::{sync::atomic::AtomicBool, time::Duration};

use serde::Serialize;

use super::{
    progress::{Progress, Shares},
    send_credit_update,
};

use crate::{
    dataplane::{
        agent::Taken,
        clock::now_ns,
        idle::Idler,
        open::WorkerPorts,
        pool::Frame,
        port::{iface_carrier, RxFrame},
        shaper::Shaper,
    },
    fc::{
        credit::{LaneState, BLOCK_BYTES},
        credit_port::{CreditLaneReport, CreditPort, CreditTimers, Gate},
        sfc::{SfcReactionPoint, SfcRpConfig},
        PauseTimers, PRIORITIES,
    },
    kernel::netlink::Netlink,
    linkup::{
        lldp::LldpConfig,
        pdelay::InitiatorConfig,
        run::{LinkAgent, LinkAgentConfig},
    },
    units::format_rate,
    wire::{
        classify, ipv4::IP_PROTO_UDP, EtherType, EthernetRepr, FrameKind, Ipv4Flow, MacAddr,
        MacControl, Sfcm, SfcmFrame, SfcmUdpFrame, TestFrame, VlanTag,
    },
};

/// What to send.
#[derive(Debug, Clone)]
pub struct GenSetup {
    /// Line rate to send at, bit/s (wire overhead counted).
    pub rate_bps: u64,
    /// Speed of the link, for PAUSE/PFC quanta.
    pub link_speed_bps: u64,
    /// Frame size without FCS.
    pub size: usize,
    /// Priority (802.1Q PCP; also the DSCP class selector).
    pub priority: u8,
    /// VLAN id of the tag (0 = priority-tagged).
    pub vid: u16,
    /// Number of flows (round-robin).
    pub flows: u32,
    /// Id of the first flow.
    pub first_flow: u32,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Destination MAC.
    pub dst_mac: MacAddr,
    /// Source and destination IPv4 addresses.
    pub src_ip: [u8; 4],
    /// Destination IPv4 address.
    pub dst_ip: [u8; 4],
    /// UDP destination port.
    pub dst_port: u16,
    /// UDP port of SFC messages sent over UDP.
    pub sfc_udp_port: u16,
    /// Send LLDP and answer peer-delay requests.
    pub link_partner: bool,
    /// Ignore PAUSE/PFC/SFC (to show what happens without flow control).
    pub ignore_pause: bool,
    /// Send under credit-based flow control on the priority (with these lane timers).
    pub credit: Option<CreditTimers>,
    /// Log a progress line this often (zero: never).
    pub progress: Duration,
}

/// Frames sent (and received) per turn at most.
const BATCH: usize = 64;

/// The UDP source port of flow `f` (from the first): the dynamic ports 49152..=65535, again
/// every 16,384 flows (flows that far apart share a 5-tuple, so a flow-scope SFC pause of
/// one pauses both).
fn src_port(f: usize) -> u16 {
    49152 + (f % SRC_PORTS) as u16
}

/// How many UDP source ports the flows take turns on.
const SRC_PORTS: usize = 16384;

/// The IPv4 5-tuple of `t`'s frames: the key a flow-scope SFC message names them by
/// ([`Ipv4Flow::of_frame`] at the congestion point).
fn flow_key(t: &TestFrame) -> Ipv4Flow {
    Ipv4Flow {
        src_ip: t.src_ip,
        dst_ip: t.dst_ip,
        protocol: IP_PROTO_UDP,
        src_port: t.src_port,
        dst_port: t.dst_port,
    }
}

/// Receive buffer the generator's lane advertises (it receives no data; the peer may).
const GEN_CREDIT_BUFFER: u64 = 64 * 1024;

/// What the generator did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GenReport {
    /// Interface.
    pub iface: String,
    /// Backend used.
    pub backend: &'static str,
    /// Frames sent.
    pub frames_sent: u64,
    /// Bytes sent (without FCS).
    pub bytes_sent: u64,
    /// Frames sent per flow (= next sequence number of each flow), from the first flow.
    pub sent_per_flow: Vec<u64>,
    /// Seconds from the first frame sent to the last (0 for one frame).
    pub elapsed_s: f64,
    /// Achieved rate, counting wire overhead, bit/s: the frames after the first over
    /// `elapsed_s` (0 for fewer than two frames).
    pub rate_bps: f64,
    /// Time the generator's priority spent paused by PAUSE/PFC, ns.
    pub paused_ns: u64,
    /// Time the generator's priority spent paused by class-scope SFC messages, ns.
    pub sfc_paused_ns: u64,
    /// Time its flows spent paused by flow-scope SFC messages, summed over the flows, ns.
    pub sfc_flow_paused_ns: u64,
    /// SFC messages received addressed to the generator, the source they pause (obeyed
    /// unless `--ignore-pause`).
    pub sfcm_rx: u64,
    /// SFC messages received addressed to another source (not in `sfcm_rx`), never obeyed: a
    /// bridge floods the frames for a host it has not learnt to all its ports.
    pub sfcm_not_ours: u64,
    /// PFC frames received with the generator's priority enabled.
    pub pfc_rx: u64,
    /// PFC frames received in total.
    pub pfc_rx_total: u64,
    /// 802.3x PAUSE frames received.
    pub pause_rx: u64,
    /// Frames received that were neither (malformed or other control).
    pub other_rx: u64,
    /// Frames longer than the generator receives whole (1,792 bytes over AF_XDP, 2,044 over
    /// AF_PACKET; 9,216 on an interface whose MTU is jumbo), dropped on arrival: by the XDP
    /// program before the socket, or truncated.
    pub oversize: u64,
    /// The credit lane, when sending under credit.
    pub credit: Option<CreditLaneReport>,
    /// Time the generator had frames to send but no credit, ns.
    pub credit_wait_ns: u64,
    /// Of `frames_sent`, frames the kernel took and dropped instead of sending
    /// ([`crate::dataplane::port::KernelDrops::tx_refused`]): the interface had no carrier, or
    /// its driver refused them (veth, when its peer's receive ring is full). They never
    /// reached the link.
    pub tx_refused: u64,
    /// Time the generator held its frames because its link had no carrier, ns.
    pub no_carrier_ns: u64,
}

/// How often a generator holding for a carrier looks whether it is back.
const CARRIER_LOOK_NS: u64 = 1_000_000;

/// The generator's hold while its link has no carrier. It learns of a loss when the kernel
/// refuses a frame ([`crate::dataplane::port::Port::tx_refusals`]: copy-mode AF_XDP then loses
/// that one frame, AF_PACKET keeps it), reads the carrier then (`look`), and while it is down
/// looks again every [`CARRIER_LOOK_NS`]: the kernel's link events come up to a second late. A
/// generator that kept sending would lose a frame at every kick into the dead link, and the
/// sink would count them lost upstream, as if the device under test had dropped them.
#[derive(Debug, Default)]
struct CarrierHold {
    refusals_seen: u64,
    /// Held since, while held.
    since: Option<u64>,
    next_look: u64,
    held_ns: u64,
}

impl CarrierHold {
    /// At `now`, with the port's refusals so far: whether the generator holds its frames, and
    /// whether that changed. `look` reads the carrier.
    fn update(&mut self, refusals: u64, now: u64, look: impl FnOnce() -> bool) -> (bool, bool) {
        let refused = refusals != self.refusals_seen;
        self.refusals_seen = refusals;
        let due = self.since.is_some() && now >= self.next_look;
        if !(refused || due) {
            return (self.since.is_some(), false);
        }
        let was = self.since.is_some();
        if look() {
            if let Some(t) = self.since.take() {
                self.held_ns += now.saturating_sub(t);
            }
        } else {
            self.since.get_or_insert(now);
            self.next_look = now + CARRIER_LOOK_NS;
        }
        let held = self.since.is_some();
        (held, held != was)
    }

    /// When to look again, while held.
    fn next_look(&self) -> Option<u64> {
        self.since.map(|_| self.next_look)
    }

    /// Time held so far, ns, at `now`.
    fn held_ns(&self, now: u64) -> u64 {
        self.held_ns + self.since.map_or(0, |t| now.saturating_sub(t))
    }
}

/// The generator's waits for credit: how long it had frames to send but no credit, and
/// whether it has said that one wait lasts too long (once a run: a window shorter than a
/// frame never opens, and nothing else would tell why nothing is sent).
#[derive(Debug, Default)]
struct CreditWait {
    /// Waiting since, while waiting.
    since: Option<u64>,
    waited_ns: u64,
    told: bool,
}

impl CreditWait {
    /// At `now`, whether the generator is `waiting`: true once, when one wait first lasts
    /// `patience_ns`.
    fn update(&mut self, waiting: bool, now: u64, patience_ns: u64) -> bool {
        match (waiting, self.since) {
            (true, None) => self.since = Some(now),
            (false, Some(t)) => {
                self.waited_ns += now - t;
                self.since = None;
            }
            _ => {}
        }
        let tell = !self.told && self.since.is_some_and(|t| now - t >= patience_ns);
        self.told |= tell;
        tell
    }

    /// Time waited so far, ns, at `now`.
    fn waited_ns(&self, now: u64) -> u64 {
        self.waited_ns + self.since.map_or(0, |t| now.saturating_sub(t))
    }
}

/// The generator's paused time so far at `now`, ns, as its progress line tells it: by
/// PAUSE/PFC, by class-scope SFC, and by flow-scope SFC as the mean over its `flow_keys`
/// 5-tuples (a flow-scope pause holds one flow while the others go on: their summed time
/// would pass the line's interval with two flows paused).
fn paused_totals(
    timers: &mut PauseTimers,
    sfc: &mut SfcReactionPoint,
    prio: usize,
    flow_keys: u64,
    now: u64,
) -> [u64; 3] {
    let sfc_paused = sfc.paused_ns(now);
    [
        timers.paused_ns(now)[prio],
        sfc_paused.class[prio],
        sfc_paused.flow[prio] / flow_keys,
    ]
}

/// Runs the generator until done or `stop` is set.
pub fn run(ports: WorkerPorts, setup: &GenSetup, busy_poll: bool, stop: &AtomicBool) -> GenReport {
    let WorkerPorts {
        mut pool,
        mut ports,
        backend,
        max_frame,
        ..
    } = ports;
    let port = &mut ports[0];
    let flows = setup.flows.max(1) as usize;
    // Flow f's frames are the first flow's with its own UDP source port and flow id
    // (`of_flow`): one template, and nothing per flow but its next sequence number.
    let template = TestFrame {
        eth: EthernetRepr {
            dst: setup.dst_mac,
            src: port.mac(),
            vlan: Some(VlanTag {
                pcp: setup.priority,
                dei: false,
                vid: setup.vid,
            }),
            ethertype: EtherType::IPV4,
        },
        src_ip: setup.src_ip,
        dst_ip: setup.dst_ip,
        dscp: setup.priority << 3,
        src_port: src_port(0),
        dst_port: setup.dst_port,
        flow: setup.first_flow,
        seq: 0,
        tx_ns: 0,
        len: setup.size,
    };
    let of_flow = |f: usize| TestFrame {
        src_port: src_port(f),
        flow: setup.first_flow + f as u32,
        ..template
    };
    let key = flow_key(&template);
    // A frame longer than one pool frame (a jumbo frame over AF_XDP) is written whole from
    // one image, made once here, then stamped with its flow in its first chunk.
    let image = (setup.size > crate::dataplane::pool::XSK_MAX_FRAME).then(|| {
        let mut b = vec![0u8; setup.size];
        template
            .emit(&mut b)
            .expect("frame size validated by the CLI");
        b
    });
    let mut next_seq = vec![0u64; flows];
    let start = now_ns();
    let end = setup.duration.map(|d| start + d.as_nanos() as u64);
    let mut timers = PauseTimers::new(setup.link_speed_bps);
    let (mut pfc_rx, mut pfc_rx_total, mut pause_rx, mut other_rx) = (0u64, 0u64, 0u64, 0u64);
    let mut sfc = SfcReactionPoint::new(SfcRpConfig::default())
        .expect("the default reaction-point config is valid");
    let (mut sfcm_rx, mut sfcm_not_ours, mut oversize) = (0u64, 0u64, 0u64);
    // What SFC messages for this generator are addressed to (docs/sfc.md): its MAC, and over
    // UDP also the source address of its frames.
    let (mac, ip) = (port.mac(), setup.src_ip);
    let mut rx: Vec<RxFrame> = Vec::with_capacity(BATCH);
    let mut tx: Vec<Frame> = Vec::with_capacity(BATCH);
    // The flow of each frame in `tx`, to roll back those the port refuses.
    let mut batch_flows = [0u32; BATCH];
    let mut idler = Idler::new([port.poll_fd()], busy_poll);
    // As a link partner the generator sends LLDP and answers peer-delay requests, so the
    // device under test can measure the link and size its headroom.
    let mut link = setup.link_partner.then(|| {
        LinkAgent::new(
            LinkAgentConfig {
                lldp: LldpConfig::new(port.mac(), port.name(), 1 << (setup.priority & 7)),
                initiator: InitiatorConfig::new(2, 10_000_000),
                respond: true,
            },
            port.mac(),
            start,
        )
        .with_kernel_tx_stamps(
            port.name(),
            crate::linkup::tx_stamp::DATAPLANE_STAMP_TIMEOUT,
        )
    });
    let (mut sent, mut bytes, mut flow) = (0u64, 0u64, 0usize);
    // When the first and the last batch with frames went out.
    let (mut first_tx, mut last_tx) = (None::<u64>, 0u64);
    let prio = usize::from(setup.priority) % PRIORITIES;
    let mut credit = match setup.credit {
        Some(t) => CreditPort::new([(setup.priority, GEN_CREDIT_BUFFER)], &t, start)
            .expect("the generator's lane settings are valid"),
        None => CreditPort::none(),
    };
    let mut credit_wait = CreditWait::default();
    // How long one wait for credit may last before the generator says so: the lane's
    // timeout, after which a peer that runs credits would have re-initialised the lane.
    let credit_patience = setup.credit.map_or(u64::MAX, |t| t.timeout_ns);
    let mut carrier = CarrierHold::default();
    // The carrier's looks share one netlink socket (every millisecond while held).
    let mut nl = Netlink::new(false);
    let mut progress = Progress::new(setup.progress, start);
    // The shares of each progress line's interval paused ([`paused_totals`]).
    let mut paused_shares = Shares::<3>::default();
    let flow_keys = flows.min(SRC_PORTS) as u64;
    // Paced from here: the setup's time is no credit for a burst.
    let mut shaper = Shaper::paced(setup.rate_bps, now_ns());
    loop {
        let now = now_ns();
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        if let Some(t) = progress.poll(now, sent, bytes) {
            let [pfc_share, sfc_share, sfc_flow_share] = paused_shares.of(
                paused_totals(&mut timers, &mut sfc, prio, flow_keys, now),
                &t,
            );
            if carrier.next_look().is_some() {
                tracing::info!(
                    iface = port.name(),
                    sent,
                    "holding: the link has no carrier"
                );
            } else {
                tracing::info!(
                    iface = port.name(),
                    sent,
                    rate = %format_rate(t.rate_bps()),
                    paused = %pfc_share,
                    pfc_rx,
                    sfc_paused = %sfc_share,
                    sfc_flow_paused = %sfc_flow_share,
                    sfcm_rx,
                    sfcm_not_ours,
                    "progress over the last {:.1} s",
                    t.secs()
                );
            }
        }
        let done = end.is_some_and(|e| now >= e) || setup.count.is_some_and(|c| sent >= c);
        if done {
            break;
        }
        if port.reclaim(&mut pool).is_err() {
            break;
        }
        rx.clear();
        let _ = port.recv(&mut pool, &mut rx, BATCH, now);
        for r in rx.drain(..) {
            if r.frame.len() > max_frame {
                // Truncated on receipt (AF_PACKET): never read.
                oversize += 1;
                pool.release(r.frame);
                continue;
            }
            let data = pool.data(&r.frame);
            let class = classify(data);
            if let Some(l) = link.as_mut() {
                // LLDP or PTP, taken by the link agent (which counts what did not parse).
                if l.on_frame(class.kind, data, r.rx_ns, now) != Taken::NotMine {
                    pool.release(r.frame);
                    continue;
                }
            }
            let at = r.rx_ns.min(now);
            // A message for another source is another source's to obey: taken as ours, one
            // congested source would pause every source that hears it.
            let mut on_sfcm = |msg: &Sfcm, ours: bool| {
                if !ours {
                    sfcm_not_ours += 1;
                    return;
                }
                sfcm_rx += 1;
                if !setup.ignore_pause {
                    sfc.on_sfcm(msg, at);
                }
            };
            match class.kind {
                FrameKind::Credit => {
                    if credit.is_empty() || credit.on_update(at, class.payload(data)).is_err() {
                        other_rx += 1;
                    }
                }
                FrameKind::Sfcm => match SfcmFrame::parse(data) {
                    Ok(f) => on_sfcm(&f.msg, f.eth.dst == mac),
                    Err(_) => other_rx += 1,
                },
                FrameKind::Data if class.ethertype == EtherType::IPV4 => {
                    match SfcmUdpFrame::parse(data, setup.sfc_udp_port) {
                        Ok(f) => on_sfcm(&f.msg, f.eth.dst == mac && f.dst_ip == ip),
                        Err(_) => other_rx += 1,
                    }
                }
                FrameKind::Pfc | FrameKind::Pause => match MacControl::parse(class.payload(data)) {
                    Ok(m) => {
                        match m {
                            MacControl::Pause { .. } => pause_rx += 1,
                            MacControl::Pfc { enable, .. } => {
                                pfc_rx_total += 1;
                                if enable & (1 << prio) != 0 {
                                    pfc_rx += 1;
                                }
                            }
                        }
                        if !setup.ignore_pause {
                            timers.on_frame(&m, at);
                        }
                    }
                    Err(_) => other_rx += 1,
                },
                _ => other_rx += 1,
            }
            pool.release(r.frame);
        }
        tx.clear();
        if let Some(l) = link.as_mut() {
            if l.transmit(&mut **port, &mut pool, now).is_err() {
                break;
            }
        }
        let (held, changed) = carrier.update(port.tx_refusals(), now, || {
            iface_carrier(&mut nl, port.name())
        });
        if changed {
            port.hold_tx(held);
        }
        let paused = |now| timers.is_paused(prio, now) || sfc.is_paused(prio, None, now);
        let (mut credit_waiting, mut flows_paused) = (false, false);
        if !paused(now) && !held {
            // In buffers: a jumbo frame over AF_XDP takes several (as many as the previous
            // one, near enough; a frame the port refuses is rolled back below).
            let room = port.tx_room().min(BATCH);
            let (mut slots, mut k) = (0, 1);
            while room > 0
                && (slots == 0 || slots + k <= room)
                && setup.count.is_none_or(|c| sent + (tx.len() as u64) < c)
            {
                match credit.gate(prio, setup.size as u32) {
                    Gate::Free | Gate::Send => {}
                    // NeverFits is for frames above the lane's frame limit, 1,024 blocks of its
                    // 64 KiB window: the CLI's 9,216 bytes are 144. A peer's window can still
                    // be shorter than one frame: that is a wait that never ends (told below).
                    Gate::Wait | Gate::NeverFits => {
                        credit_waiting = true;
                        break;
                    }
                }
                // Flow-scope SFC pauses single flows: the next flow on, round-robin, that is
                // not paused. While no flow pause runs the first flow asked is free (its
                // class answers, no table is read); all are asked only when all are paused,
                // once, and the batch stops.
                let Some(f) = (0..flows).map(|i| (flow + i) % flows).find(|&f| {
                    let key = Ipv4Flow {
                        src_port: src_port(f),
                        ..key
                    };
                    !sfc.is_paused(prio, Some(&key), now)
                }) else {
                    flows_paused = true;
                    break;
                };
                if !shaper.try_send(setup.size as u32, now) {
                    break;
                }
                let Some(frame) = pool.alloc_frame(setup.size) else {
                    break;
                };
                flow = f;
                let t = of_flow(flow);
                match &image {
                    None => {
                        t.emit(pool.buf_mut(&frame))
                            .expect("frame size validated by the CLI");
                    }
                    Some(image) => pool.write_frame(&frame, image),
                }
                t.stamp(pool.buf_mut(&frame), next_seq[flow], now_ns());
                next_seq[flow] += 1;
                batch_flows[tx.len()] = flow as u32;
                flow = (flow + 1) % flows;
                // A frame the ring refuses below was counted but never sent: the peer's
                // count is repaired at the next resync, as for a frame lost on the wire.
                credit.on_sent(prio, setup.size as u32);
                k = pool.tx_slots(&frame);
                slots += k;
                tx.push(frame);
            }
        }
        if credit_wait.update(credit_waiting, now, credit_patience) {
            let lane = credit.lane(prio);
            tracing::warn!(
                iface = port.name(),
                size = setup.size,
                lane_active = lane.is_some_and(|l| l.state() == LaneState::Active),
                granted_bytes =
                    lane.map_or(0, |l| u64::from(l.tx().available_blocks()) * BLOCK_BYTES),
                "no credit for one frame in {} ms: the peer must run credits on priority {} \
                 and its receive buffer must hold two frames (sink --credit-buffer), or this \
                 generator waits for ever",
                credit_patience / 1_000_000,
                setup.priority
            );
        }
        let sending = !tx.is_empty();
        if sending {
            let batch = tx.len();
            // A port error is the next turn's: what the port took before it is sent.
            let _ = port.send(&mut pool, &mut tx);
            let k = batch - tx.len();
            // Frames the ring refused (left in `tx`) were never sent: roll their sequence
            // numbers back, and send the first of them next.
            for &f in &batch_flows[k..batch] {
                next_seq[f as usize] -= 1;
            }
            if k < batch {
                flow = batch_flows[k] as usize;
            }
            for f in tx.drain(..) {
                pool.release(f);
            }
            sent += k as u64;
            bytes += k as u64 * setup.size as u64;
            if k > 0 {
                first_tx.get_or_insert(now);
                last_tx = now;
            }
        }
        // The update goes out behind the data its blocks-sent count includes.
        send_credit_update(&mut credit, &mut **port, &mut pool, &mut tx, now);
        if sending {
            continue;
        }
        let mut deadline = end;
        let wake = if held {
            carrier.next_look()
        } else if paused(now) || flows_paused {
            [timers.next_resume(now), sfc.next_resume(now)]
                .into_iter()
                .flatten()
                .min()
        } else if credit_waiting {
            None // credit arrives as a frame, which wakes the idler
        } else {
            Some(shaper.wake_at())
        };
        let wake = [wake, credit.next_deadline(), progress.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        if let Some(w) = wake {
            deadline = Some(deadline.map_or(w, |d| d.min(w)));
        }
        idler.hold(0, held);
        idler.wait(now, deadline);
    }
    // Times are taken as the run ends: a pause still running is no part of the run after it.
    let now = now_ns();
    let sfc_paused = sfc.paused_ns(now);
    // A link partner that stops says so (802.1AB's shutdown LLDPDU, TTL 0), so the daemon
    // forgets it at once rather than at the end of its TTL.
    if let Some(l) = link.as_mut() {
        let _ = l.shutdown(&mut **port, &mut pool);
    }
    // Let the last frames leave before the port closes.
    let settle = now_ns() + 50_000_000;
    while now_ns() < settle {
        let _ = port.reclaim(&mut pool);
        std::thread::sleep(Duration::from_millis(1));
    }
    let span_ns = first_tx.map_or(0, |t| last_tx - t);
    let oversize = super::oversize_total(oversize, port.as_ref(), max_frame, "generator");
    GenReport {
        iface: port.name().to_string(),
        backend,
        frames_sent: sent,
        bytes_sent: bytes,
        sent_per_flow: next_seq,
        elapsed_s: span_ns as f64 / 1e9,
        rate_bps: super::line_rate_bps(sent, bytes, setup.size as u64, span_ns),
        paused_ns: timers.paused_ns(now)[prio],
        sfc_paused_ns: sfc_paused.class[prio],
        sfc_flow_paused_ns: sfc_paused.flow[prio],
        sfcm_rx,
        sfcm_not_ours,
        pfc_rx,
        pfc_rx_total,
        pause_rx,
        other_rx,
        oversize,
        credit: credit.report(prio),
        credit_wait_ns: credit_wait.waited_ns(now),
        tx_refused: port.kernel_drops().tx_refused,
        no_carrier_ns: carrier.held_ns(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        dataplane::{
            mem_port::{mem_link, MemPeer},
            pool::{heap_frame_size, FramePool, JUMBO_MAX_FRAME},
        },
        traffic::progress::Tick,
        wire::{
            lldp::{Lldpdu, OrgTlvId},
            sfcm, SfcScope, TestFrameView,
        },
    };

    const MS: u64 = 1_000_000;

    /// A generator of `flows` flows of 100-byte frames at 100 Mbit/s on priority 3, for
    /// `duration_ms`, over an in-memory port.
    fn mem_gen(flows: u32, duration_ms: u64) -> (WorkerPorts, MemPeer, GenSetup) {
        let (port, peer) = mem_link("g0", MacAddr([2, 0, 0, 0, 0, 1]), BATCH);
        let ports = WorkerPorts {
            pool: FramePool::heap(1024).unwrap(),
            ports: vec![Box::new(port)],
            backend: "mem",
            max_frame: 1518,
            rx_queues: vec![1],
        };
        let setup = GenSetup {
            rate_bps: 100_000_000,
            link_speed_bps: 1_000_000_000,
            size: 100,
            priority: 3,
            vid: 0,
            flows,
            first_flow: 0,
            duration: Some(Duration::from_millis(duration_ms)),
            count: None,
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: [198, 18, 0, 1],
            dst_ip: [198, 18, 0, 2],
            dst_port: 48879,
            sfc_udp_port: crate::wire::sfcm::SFCM_UDP_PORT,
            link_partner: false,
            ignore_pause: false,
            credit: None,
            progress: Duration::ZERO,
        };
        (ports, peer, setup)
    }

    /// Runs `setup` on `ports`, handing `during` the peer once the generator runs.
    fn run_with(
        ports: WorkerPorts,
        setup: &GenSetup,
        peer: &MemPeer,
        during: impl FnOnce(&MemPeer),
    ) -> GenReport {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let gen = s.spawn(|| run(ports, setup, false, &stop));
            during(peer);
            gen.join().unwrap()
        })
    }

    /// The test frames the generator sent.
    fn sent(peer: &MemPeer) -> Vec<TestFrameView> {
        peer.take()
            .iter()
            .filter_map(|f| TestFrameView::parse(f).ok())
            .collect()
    }

    #[test]
    fn a_link_partner_says_goodbye_with_a_ttl_zero_lldpdu() {
        let (ports, peer, setup) = mem_gen(1, 30);
        let setup = GenSetup {
            link_partner: true,
            ..setup
        };
        run_with(ports, &setup, &peer, |_| {});
        let ttls: Vec<u16> = peer
            .take()
            .iter()
            .filter_map(|f| Lldpdu::parse_frame(f, OrgTlvId::default()).ok())
            .map(|(_, pdu)| pdu.ttl)
            .collect();
        assert!(ttls.len() >= 2, "{ttls:?}");
        assert_eq!(ttls.last(), Some(&0), "the last LLDPDU: {ttls:?}");
        assert!(ttls[..ttls.len() - 1].iter().all(|&t| t > 0), "{ttls:?}");
    }

    #[test]
    fn the_rate_is_the_paced_one_however_few_frames() {
        // 10 frames at 100 kbit/s: 9.6 ms apart, 86 ms from the first to the last.
        let (ports, peer, setup) = mem_gen(1, 10_000);
        let setup = GenSetup {
            rate_bps: 100_000,
            count: Some(10),
            ..setup
        };
        let r = run_with(ports, &setup, &peer, |_| {});
        assert_eq!(r.frames_sent, 10);
        assert!(
            (r.rate_bps - 100_000.0).abs() < 2_000.0,
            "{} bit/s over {} s",
            r.rate_bps,
            r.elapsed_s
        );
        // One frame spans no time: no rate.
        let (ports, peer, setup) = mem_gen(1, 10_000);
        let setup = GenSetup {
            count: Some(1),
            ..setup
        };
        let r = run_with(ports, &setup, &peer, |_| {});
        assert_eq!((r.frames_sent, r.rate_bps, r.elapsed_s), (1, 0.0, 0.0));
    }

    #[test]
    fn a_pause_running_at_the_end_counts_only_within_the_run() {
        // 60 ms of sending, and at 30 ms a PFC pause of 65,535 quanta at 100 Mbit/s (335 ms).
        let (ports, peer, setup) = mem_gen(1, 60);
        let setup = GenSetup {
            link_speed_bps: 100_000_000,
            ..setup
        };
        let r = run_with(ports, &setup, &peer, |peer| {
            std::thread::sleep(Duration::from_millis(30));
            let pfc = MacControl::Pfc {
                enable: 1 << 3,
                quanta: [u16::MAX; 8],
            };
            let mut buf = [0u8; 64];
            let len = pfc
                .emit_frame(MacAddr([2, 0, 0, 0, 0, 2]), &mut buf)
                .unwrap();
            peer.inject(&buf[..len], now_ns());
        });
        assert_eq!(r.pfc_rx, 1);
        assert!(
            r.paused_ns > 0 && r.paused_ns <= 60 * MS,
            "paused {} ns in a 60 ms run",
            r.paused_ns
        );
    }

    #[test]
    fn every_flow_of_one_jumbo_image_is_its_own() {
        // 4,000-byte frames are written from the one image, stamped with their flow.
        let (mut ports, peer, setup) = mem_gen(3, 10_000);
        ports.pool = FramePool::heap_sized(64, heap_frame_size(JUMBO_MAX_FRAME)).unwrap();
        let setup = GenSetup {
            size: 4000,
            count: Some(9),
            first_flow: 5,
            ..setup
        };
        run_with(ports, &setup, &peer, |_| {});
        let frames = peer.take();
        assert_eq!(frames.len(), 9);
        for (i, f) in frames.iter().enumerate() {
            let v = TestFrameView::parse(f).expect("a whole test frame, its checksum right");
            let flow = i % 3;
            assert_eq!((v.flow, v.seq), (5 + flow as u32, (i / 3) as u64));
            assert_eq!(Ipv4Flow::of_frame(f).unwrap().src_port, 49152 + flow as u16);
            assert_eq!(f.len(), 4000);
        }
    }

    #[test]
    fn a_wait_for_credit_that_lasts_is_told_once() {
        let mut w = CreditWait::default();
        assert!(!w.update(true, 0, 50));
        assert!(!w.update(false, 40, 50), "credit came in time");
        assert!(!w.update(true, 100, 50));
        assert!(!w.update(true, 149, 50));
        assert!(w.update(true, 150, 50), "one wait of 50");
        assert!(!w.update(true, 200, 50), "told once");
        assert!(!w.update(false, 210, 50));
        assert!(!w.update(true, 300, 50));
        assert!(!w.update(true, 400, 50), "told once a run");
        assert_eq!(w.waited_ns(420), 40 + 110 + 120);
    }

    #[test]
    fn a_flow_scope_sfc_message_pauses_that_flow_and_no_other() {
        let (ports, peer, setup) = mem_gen(2, 200);
        // Flow 0's 5-tuple, as the congestion point reads it from a frame of flow 0.
        let flow0 = Ipv4Flow {
            src_ip: setup.src_ip,
            dst_ip: setup.dst_ip,
            protocol: IP_PROTO_UDP,
            src_port: 49152,
            dst_port: setup.dst_port,
        };
        let mut at = 0;
        let report = run_with(ports, &setup, &peer, |peer| {
            std::thread::sleep(Duration::from_millis(10));
            at = now_ns();
            let msg = Sfcm {
                priority: 3,
                scope: SfcScope::Flow,
                seq: 0,
                pause_ns: 20 * MS,
                sent_ns: at,
                queue_bytes: 64 * 1024,
                drain_bps: 1_000_000_000,
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                flow: Some(flow0),
            };
            let mut buf = [0u8; 128];
            let len =
                sfcm::emit_to_source(&msg, MacAddr([2, 0, 0, 0, 0, 2]), None, &mut buf).unwrap();
            peer.inject(&buf[..len], at);
        });
        let frames = sent(&peer);
        // Frames built before the message was read may carry a later stamp: 1 ms margins.
        let paused = |v: &&TestFrameView| v.tx_ns > at + MS && v.tx_ns < at + 19 * MS;
        let of = |flow: u32| frames.iter().filter(move |v| v.flow == flow);
        assert_eq!(of(0).filter(paused).count(), 0, "flow 0 sent while paused");
        assert!(of(1).filter(paused).count() > 100, "flow 1 must go on");
        assert!(
            of(0).any(|v| v.tx_ns > at + 21 * MS),
            "flow 0 resumes after the pause"
        );
        assert_eq!(report.sfcm_rx, 1);
        assert_eq!(report.sfc_paused_ns, 0, "{report:?}");
        assert_eq!(report.sfc_flow_paused_ns, 20 * MS, "{report:?}");
        // Every frame sent has its own sequence number: none skipped or repeated.
        for f in 0..2 {
            let seqs: Vec<u64> = of(f).map(|v| v.seq).collect();
            assert_eq!(
                seqs,
                (0..report.sent_per_flow[f as usize]).collect::<Vec<_>>()
            );
        }
    }

    /// Class-scope SFC messages for other sources, each pausing for 50 ms, reach the
    /// generator (as a bridge floods them): at layer 2 to another MAC, over UDP to another
    /// address or to another MAC. None pauses it; one to it (5 ms) does.
    #[test]
    fn sfc_messages_for_another_source_are_counted_and_not_obeyed() {
        let (ports, peer, setup) = mem_gen(1, 100);
        let (ours, other) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 9]));
        let report = run_with(ports, &setup, &peer, |peer| {
            std::thread::sleep(Duration::from_millis(10));
            let send = |src_mac, src_ip, udp: bool, pause_ns| {
                let msg = Sfcm {
                    priority: 3,
                    scope: SfcScope::Class,
                    seq: 0,
                    pause_ns,
                    sent_ns: now_ns(),
                    queue_bytes: 64 * 1024,
                    drain_bps: 1_000_000_000,
                    src_mac,
                    flow: Some(Ipv4Flow {
                        src_ip,
                        dst_ip: setup.dst_ip,
                        protocol: IP_PROTO_UDP,
                        src_port: src_port(0),
                        dst_port: setup.dst_port,
                    }),
                };
                let udp = udp.then_some((sfcm::SFCM_UDP_PORT, [198, 18, 0, 2]));
                let mut buf = [0u8; 128];
                let len =
                    sfcm::emit_to_source(&msg, MacAddr([2, 0, 0, 0, 0, 2]), udp, &mut buf).unwrap();
                peer.inject(&buf[..len], now_ns());
            };
            send(other, setup.src_ip, false, 50 * MS);
            send(ours, [198, 18, 0, 9], true, 50 * MS);
            send(other, setup.src_ip, true, 50 * MS);
            std::thread::sleep(Duration::from_millis(10));
            send(ours, setup.src_ip, false, 5 * MS);
        });
        assert_eq!((report.sfcm_rx, report.sfcm_not_ours), (1, 3), "{report:?}");
        assert_eq!(report.sfc_paused_ns, 5 * MS, "{report:?}");
        assert_eq!(report.other_rx, 0, "{report:?}");
    }

    #[test]
    fn the_progress_line_tells_class_and_flow_scope_sfc_pauses_apart() {
        let mut timers = PauseTimers::new(1_000_000_000);
        let mut sfc = SfcReactionPoint::new(SfcRpConfig::default()).unwrap();
        let msg = |scope, pause_ns| Sfcm {
            priority: 3,
            scope,
            seq: 0,
            pause_ns,
            sent_ns: 0,
            queue_bytes: 0,
            drain_bps: 0,
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            flow: Some(Ipv4Flow {
                src_ip: [198, 18, 0, 1],
                dst_ip: [198, 18, 0, 2],
                protocol: IP_PROTO_UDP,
                src_port: src_port(0),
                dst_port: 48879,
            }),
        };
        // One of two flows paused for 40 ms, then the class for 10 ms, in a line of 100 ms.
        sfc.on_sfcm(&msg(SfcScope::Flow, 40 * MS), 0);
        sfc.on_sfcm(&msg(SfcScope::Class, 10 * MS), 50 * MS);
        let mut shares = Shares::<3>::default();
        let tick = Tick {
            frames: 0,
            bytes: 0,
            ns: 100 * MS,
        };
        let totals = paused_totals(&mut timers, &mut sfc, 3, 2, 100 * MS);
        assert_eq!(totals, [0, 10 * MS, 20 * MS]);
        assert_eq!(shares.of(totals, &tick), ["0 %", "10 %", "20 %"]);
    }

    #[test]
    fn a_refused_frame_holds_the_generator_until_the_carrier_is_back() {
        let mut c = CarrierHold::default();
        let look = |up: bool| move || up;
        // No refusal: nothing is read, nothing held.
        assert_eq!(c.update(0, 10, || panic!("no look")), (false, false));
        // A refusal with the carrier there (a full queue): read, not held.
        assert_eq!(c.update(1, 20, look(true)), (false, false));
        // A refusal without carrier: held, and looked at again only when due.
        assert_eq!(c.update(2, 30, look(false)), (true, true));
        assert_eq!(c.next_look(), Some(30 + CARRIER_LOOK_NS));
        assert_eq!(c.update(2, 40, || panic!("not due")), (true, false));
        assert_eq!(
            c.update(2, 30 + CARRIER_LOOK_NS, look(false)),
            (true, false)
        );
        let back = 30 + 2 * CARRIER_LOOK_NS;
        assert_eq!(c.update(2, back, look(true)), (false, true));
        assert_eq!(c.next_look(), None);
        assert_eq!(c.held_ns(back + 5), back - 30);
    }
}
