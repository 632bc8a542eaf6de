//! The traffic sink: counts test frames per flow by sequence number (received, lost,
//! reordered, duplicated) and one-way latency. Optionally a congestion point: frames wait in
//! a bounded buffer drained at `drain_rate`, and PFC goes upstream at XOFF/XON.
//!
//! The sink is a lossless receiver like a host NIC in a lossless fabric: when it falls behind
//! (its RX ring backs up until the fill ring runs short of buffers, see
//! [`crate::dataplane::ingress`]) it pauses every priority upstream with PFC, so a starved sink
//! loses nothing and the frames it does lose at its own socket are told apart from frames lost
//! upstream.
//!
//! With SFC instead ([`SinkPause::Sfc`]), the same two conditions (at XOFF as a congestion
//! point, short of buffers) earn the source of each test frame that arrives meanwhile an SFC
//! message from the sink's congestion point for the frame's priority
//! ([`crate::fc::sfc::SfcCongestionPoint`], class scope, duplicates filtered): a pause for the
//! time what waits (buffer and RX ring) takes to drain at the drain rate measured, or the
//! configured one until measured (the drain rate as a congestion point, else the link speed),
//! at most 10 ms. The sources go on a roster for the sink's stall guard
//! ([`crate::dataplane::sfc_roster`]). There is no XON: a pause runs out by itself.

use std::{
    sync::{atomic::AtomicBool, Arc},
    time::Duration,
};

use serde::Serialize;

use super::{
    flows::{FlowReport, FlowTable, Sender},
    histogram::{Histogram, LatencySummary},
    progress::Progress,
    send_credit_update,
    sink_guard::{sfcm_udp, GuardPaused},
};
use crate::{
    dataplane::{
        clock::now_ns,
        idle::Idler,
        ingress::FillWatch,
        open::WorkerPorts,
        pool::{Frame, FramePool},
        port::{send_or_release, KernelDrops, Port, RxFrame},
        queue::{PrioQueues, Queued},
        sfc_roster::{RosterWriter, SourceRoster},
        shaper::Shaper,
    },
    fc::{
        credit_port::{CreditLaneReport, CreditPort, CreditTimers},
        sfc::{FrameSource, SfcCongestionPoint, SfcCpConfig},
        PfcGenerator, PfcThresholds, PRIORITIES,
    },
    units::format_rate,
    wire::{
        classify,
        sfcm::{self, Ipv4Flow},
        EthernetFrame, FrameKind, MacControl, Sfcm, TestFrameView, WireError,
    },
};

/// The sink as a credit receiver.
#[derive(Debug, Clone, Copy)]
pub struct SinkCredit {
    /// Priority (802.1Q PCP) whose frames are received under credit.
    pub priority: u8,
    /// Receive buffer advertised as credit, bytes (at most 128 KiB counts).
    pub buffer_bytes: u64,
    /// Lane timers.
    pub timers: CreditTimers,
}

/// The sink as a congestion point.
#[derive(Debug, Clone, Copy)]
pub struct SinkCongestion {
    /// Rate the buffer drains at, bit/s (wire overhead counted).
    pub drain_rate_bps: u64,
    /// Buffer size per priority; frames beyond it are dropped and counted.
    pub buffer_bytes: u64,
    /// PFC thresholds per priority.
    pub thresholds: PfcThresholds,
}

/// How the sink pauses upstream with PFC (at the congestion point's thresholds, and while its
/// RX ring is short of buffers).
#[derive(Debug, Clone)]
pub struct SinkPfc {
    /// Pause time of each XOFF, quanta.
    pub pause_quanta: u16,
    /// Link speed for quanta and refresh timing.
    pub link_speed_bps: u64,
    /// Where its stall guard, if it has one, says that it paused upstream.
    pub guard: Option<Arc<GuardPaused>>,
}

/// How the sink tells upstream to pause.
#[derive(Debug, Clone)]
pub enum SinkPause {
    /// PFC for every priority.
    Pfc(SinkPfc),
    /// SFC messages to the sources of the test frames (module doc).
    Sfc {
        /// The drain rate assumed until one is measured, when the sink is no congestion point.
        link_speed_bps: u64,
        /// The roster the sink publishes its sources on, for its stall guard.
        sources: Arc<SourceRoster>,
        /// Over UDP to this port ([`sfcm_udp`]), else at layer 2.
        udp_port: Option<u16>,
    },
}

/// When to stop and what to accept.
#[derive(Debug, Clone)]
pub struct SinkSetup {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop this long after the last test frame (once one has arrived).
    pub idle_timeout: Option<Duration>,
    /// Log a progress line this often (zero: never).
    pub progress: Duration,
    /// Stop after this many test frames.
    pub expect: Option<u64>,
    /// Flow ids accounted (0..max_flows).
    pub max_flows: u32,
    /// UDP destination port of test traffic.
    pub dst_port: u16,
    /// Be a congestion point.
    pub congestion: Option<SinkCongestion>,
    /// Pause upstream (for the congestion point, and while the RX ring is short of buffers);
    /// `None`: never, like a receiver without flow control.
    pub pause: Option<SinkPause>,
    /// Grant credit on one priority.
    pub credit: Option<SinkCredit>,
}

/// What the sink saw.
#[derive(Debug, Clone, Serialize)]
pub struct SinkReport {
    /// Interface.
    pub iface: String,
    /// Backend used.
    pub backend: &'static str,
    /// Test frames received (duplicates included).
    pub received: u64,
    /// Distinct (flow, sequence) pairs.
    pub unique: u64,
    /// Sequence numbers below each flow's highest that never arrived.
    pub lost: u64,
    /// Duplicated frames.
    pub duplicates: u64,
    /// Frames that arrived after a higher sequence number of their flow.
    pub reordered: u64,
    /// Bytes of test frames.
    pub bytes: u64,
    /// Seconds from first to last test frame.
    pub elapsed_s: f64,
    /// Receive rate with wire overhead, bit/s: the frames after the first over `elapsed_s`
    /// (0 for fewer than two).
    pub rate_bps: f64,
    /// Test frames per priority (PCP).
    pub per_priority: [u64; PRIORITIES],
    /// One-way latency (TX stamp to RX/drain, same host clock); `None` when the TX stamps
    /// are not on the sink's clock (the generator on another host).
    pub latency: Option<LatencySummary>,
    /// Test frames without a latency sample: stamped after they arrived, by the sink's
    /// clock (a generator on another host).
    pub latency_skipped: u64,
    /// Per-flow detail.
    pub flows: Vec<FlowReport>,
    /// Frames that were not test traffic for us.
    pub other_rx: u64,
    /// Test frames with a flow id beyond `max_flows` (not accounted).
    pub unknown_flow: u64,
    /// Test frames whose UDP checksum failed: damaged on their way (`cable --corrupt`, a bad
    /// link), not accounted, so each is also in `lost` (upstream).
    pub damaged: u64,
    /// Test frames older than the sequence window (the flows' `stale`, summed).
    pub stale: u64,
    /// Test frames from another source than their flow's first frame (source MAC or PCP),
    /// not accounted (the flows' `mixed_sources`, summed): generators sharing flow ids.
    pub mixed_sources: u64,
    /// New generator runs that restarted a flow's sequence numbers (the flows' `restarts`,
    /// summed).
    pub restarts: u64,
    /// Congestion point: frames dropped because the buffer was full.
    pub buffer_overflow: u64,
    /// PFC frames sent (congestion point, or RX ring short of buffers).
    pub pfc_tx: u64,
    /// SFC messages sent, with SFC instead of PFC (congestion point, or RX ring short of
    /// buffers).
    pub sfcm_tx: u64,
    /// Times the sink's fill ring ran short of buffers (it paused upstream).
    pub fill_starved_events: u64,
    /// Test frames the sink lost itself (its share of `lost`): the kernel's count of frames
    /// its socket had no buffer or ring slot for (whatever they were), its buffer's overflow
    /// drops and the frames its credit lane refused.
    pub lost_here: u64,
    /// Test frames lost before they reached the sink: `lost` minus `lost_here`.
    pub lost_upstream: u64,
    /// Stalls the sink's stall guard paused upstream for: the sink made no receive turn for
    /// [`super::sink_guard::STALL_NS`] while frames waited and arrived, and half its fill
    /// ring held frames.
    pub stalls: u64,
    /// PFC frames the sink's stall guard sent for them (not in `pfc_tx`).
    pub stall_pfc_tx: u64,
    /// SFC messages the sink's stall guard sent for them, with SFC (not in `sfcm_tx`).
    pub stall_sfcm_tx: u64,
    /// Congestion point: peak buffer bytes.
    pub peak_buffer_bytes: u64,
    /// Frames the kernel dropped before the sink saw them (AF_XDP socket statistics).
    pub kernel_drops: KernelDrops,
    /// Frames longer than the sink receives whole (1,792 bytes over AF_XDP, 2,044 over
    /// AF_PACKET), dropped on arrival: by the XDP program before the socket, or truncated.
    pub oversize: u64,
    /// The credit lane, when receiving under credit.
    pub credit: Option<CreditLaneReport>,
}

/// The fastest frame taking longer than this (10 s) means the TX stamps are not on the sink's
/// clock: no queue holds a frame that long.
const CLOCKS_DIFFER_US: f64 = 10e6;

struct Counting {
    flows: FlowTable,
    latency: Histogram,
    /// Frames stamped after they arrived, so without a latency sample.
    latency_skipped: u64,
    received: u64,
    bytes: u64,
    per_priority: [u64; PRIORITIES],
    first_ns: u64,
    /// Length of the first test frame: it opens the interval the rate is taken over.
    first_len: u64,
    last_ns: u64,
}

impl Counting {
    /// Nothing counted yet, flows `0..max_flows` accounted.
    fn new(max_flows: u32) -> Self {
        Counting {
            flows: FlowTable::new(max_flows),
            latency: Histogram::default(),
            latency_skipped: 0,
            received: 0,
            bytes: 0,
            per_priority: [0; PRIORITIES],
            first_ns: 0,
            first_len: 0,
            last_ns: 0,
        }
    }

    fn record(&mut self, v: &TestFrameView, from: Sender, len: u32, now: u64) {
        self.flows.record(v.flow, v.seq, v.tx_ns, from);
        match now.checked_sub(v.tx_ns) {
            Some(ns) => self.latency.record(ns),
            None => self.latency_skipped += 1,
        }
        self.received += 1;
        self.bytes += u64::from(len);
        self.per_priority[usize::from(v.pcp.unwrap_or(0) & 7)] += 1;
        if self.first_ns == 0 {
            (self.first_ns, self.first_len) = (now, u64::from(len));
        }
        self.last_ns = now;
    }

    /// From the first test frame to the last, ns.
    fn span_ns(&self) -> u64 {
        self.last_ns.saturating_sub(self.first_ns)
    }

    /// The receive rate, bit/s with wire overhead (0 for fewer than two frames).
    fn rate_bps(&self) -> f64 {
        super::line_rate_bps(self.received, self.bytes, self.first_len, self.span_ns())
    }

    /// The latency summary, or `None` when the generator's TX stamps and the sink's clock
    /// cannot be compared: each is its own host's CLOCK_MONOTONIC, so with the generator on
    /// another host most frames seem to arrive before they were sent, or even the fastest
    /// seems to take longer than any queue holds a frame.
    fn latency(&self) -> Option<LatencySummary> {
        let s = self.latency.summary();
        let differ = self.latency_skipped > s.samples || s.min_us > CLOCKS_DIFFER_US;
        (!differ).then_some(s)
    }
}

/// The sink's SFC: a congestion point per priority, the roster of its sources, and how its
/// messages go ([`sfcm_udp`]).
struct SfcUpstream {
    cps: Vec<SfcCongestionPoint>,
    roster: RosterWriter,
    sources: Arc<SourceRoster>,
    udp_port: Option<u16>,
}

impl SfcUpstream {
    /// Drains assumed at `nominal_bps` until measured.
    fn new(nominal_bps: u64, sources: Arc<SourceRoster>, udp_port: Option<u16>) -> Self {
        let cps = (0..PRIORITIES as u8)
            .map(|p| {
                // The sink decides when it is congested; every frame it asks about earns an
                // SFCM (duplicates filtered).
                SfcCongestionPoint::new(SfcCpConfig::new(p, 0, nominal_bps))
                    .expect("a valid congestion point")
            })
            .collect();
        SfcUpstream {
            cps,
            roster: RosterWriter::default(),
            sources,
            udp_port,
        }
    }

    /// A test frame `data` of priority `p` taken at `now`, `waiting` bytes of its priority
    /// ahead of it: its source goes on the roster, and while the sink is `congested` it is
    /// told to pause (if the congestion point has not told it already).
    fn on_frame(
        &mut self,
        p: usize,
        data: &[u8],
        now: u64,
        waiting: u64,
        congested: bool,
    ) -> Option<Sfcm> {
        let mac = EthernetFrame::new_checked(data).ok()?.src();
        let flow = Ipv4Flow::of_frame(data);
        self.roster.saw(p as u8, mac, flow.as_ref(), &self.sources);
        if !congested {
            return None;
        }
        self.cps[p].on_arrival(now, waiting.max(1), &FrameSource { mac, flow })
    }
}

/// The test frame of ours (to UDP port `port`) that `frame` is, and who sent it; `Err(true)`
/// for one that was damaged on its way (its checksum fails), `Err(false)` for any other frame.
fn parse_ours(pool: &FramePool, frame: &Frame, port: u16) -> Result<(TestFrameView, Sender), bool> {
    let data = pool.data(frame);
    match TestFrameView::parse(data) {
        Ok(v) if v.dst_port == port => {
            let mac = EthernetFrame::new_checked(data).map_err(|_| false)?.src();
            Ok((v, Sender { mac, pcp: v.pcp }))
        }
        Err(WireError::Damaged { .. }) => Err(true),
        _ => Err(false),
    }
}

/// Sends the PAUSE or PFC frame `m` on `port`; returns whether it left.
fn send_pfc(
    port: &mut dyn Port,
    pool: &mut FramePool,
    tx: &mut Vec<Frame>,
    m: &MacControl,
) -> bool {
    pool.alloc().is_some_and(|mut f| {
        let len = m
            .emit_frame(port.mac(), pool.buf_mut(&f))
            .expect("a pool frame holds a MAC control frame");
        f.set_len(len);
        send_or_release(port, pool, tx, f).unwrap_or(false)
    })
}

/// Sends the SFC message `msg` to its source (to the offending frame's source MAC, over UDP
/// to `udp_port` where set: [`sfcm_udp`]); returns whether it left.
fn send_sfcm(
    port: &mut dyn Port,
    pool: &mut FramePool,
    tx: &mut Vec<Frame>,
    msg: &Sfcm,
    udp_port: Option<u16>,
) -> bool {
    let Some(mut f) = pool.alloc() else {
        return false;
    };
    let udp = sfcm_udp(udp_port, msg);
    let len = sfcm::emit_to_source(msg, port.mac(), udp, pool.buf_mut(&f))
        .expect("a pool frame holds an SFCM");
    f.set_len(len);
    send_or_release(port, pool, tx, f).unwrap_or(false)
}

/// Runs the sink until its stop condition or `stop`.
pub fn run(
    ports: WorkerPorts,
    setup: &SinkSetup,
    busy_poll: bool,
    stop: &AtomicBool,
) -> SinkReport {
    let WorkerPorts {
        mut pool,
        mut ports,
        backend,
        max_frame,
        ..
    } = ports;
    let port = &mut ports[0];
    let start = now_ns();
    let mut c = Counting::new(setup.max_flows);
    let mut queues = PrioQueues::new(pool.capacity() as usize);
    let mut shaper = setup
        .congestion
        .map(|k| Shaper::paced(k.drain_rate_bps, start));
    // Without a congestion buffer only a short fill ring pauses upstream: thresholds no
    // byte count reaches.
    let thresholds = setup.congestion.map_or(
        PfcThresholds {
            xoff: u64::MAX,
            xon: u64::MAX,
        },
        |k| k.thresholds,
    );
    let guard_paused = match &setup.pause {
        Some(SinkPause::Pfc(k)) => k.guard.as_deref(),
        _ => None,
    };
    let mut generator = match &setup.pause {
        Some(SinkPause::Pfc(k)) => Some(PfcGenerator::new(
            [Some(thresholds); PRIORITIES],
            k.pause_quanta,
            k.link_speed_bps,
        )),
        _ => None,
    };
    let mut sfc = match &setup.pause {
        Some(SinkPause::Sfc {
            link_speed_bps,
            sources,
            udp_port,
        }) => Some(SfcUpstream::new(
            setup
                .congestion
                .map_or(*link_speed_bps, |k| k.drain_rate_bps),
            sources.clone(),
            *udp_port,
        )),
        _ => None,
    };
    // What waited per priority (buffer and RX ring) and whether the fill ring was short, as of
    // the last turn: what the SFC congestion points judge this turn's frames by.
    let (mut waiting, mut sfcm_tx) = ([0u64; PRIORITIES], 0u64);
    let mut fill = FillWatch::default();
    let mut fill_starved_events = 0u64;
    let (mut other_rx, mut overflow, mut pfc_tx, mut oversize) = (0u64, 0u64, 0u64, 0u64);
    // Test frames the sink's credit lane refused (sent beyond the credit granted), and frames
    // whose checksum failed (damaged on their way: not accounted, so lost upstream).
    let (mut refused, mut damaged) = (0u64, 0u64);
    let mut credit = match setup.credit {
        Some(k) => CreditPort::new([(k.priority, k.buffer_bytes)], &k.timers, start)
            .expect("the sink's lane settings are valid"),
        None => CreditPort::none(),
    };
    let mut rx: Vec<RxFrame> = Vec::with_capacity(64);
    let mut tx: Vec<Frame> = Vec::with_capacity(1);
    // Without a congestion buffer the sink only counts: coalesce wake-ups so it does not take
    // CPU from the device under test (latency uses the XDP RX stamps).
    let mut idler =
        Idler::new([port.poll_fd()], busy_poll).coalesce(if setup.congestion.is_none() {
            200_000
        } else {
            0
        });
    let mut last_arrival = 0u64;
    let mut progress = Progress::new(setup.progress, start);
    loop {
        let now = now_ns();
        if let Some(t) = progress.poll(now, c.received, c.bytes) {
            if last_arrival == 0 {
                tracing::info!(
                    iface = port.name(),
                    udp_port = setup.dst_port,
                    other_rx,
                    "no test frames yet, {:.0} s after the start",
                    (now - start) as f64 / 1e9
                );
            } else {
                tracing::info!(
                    iface = port.name(),
                    received = c.received,
                    rate = %format_rate(t.rate_bps()),
                    missing = c.flows.missing(),
                    lost_here = port.kernel_drops().rx_lost() + overflow + refused,
                    pfc_tx,
                    "progress over the last {:.1} s",
                    t.secs()
                );
            }
        }
        let idle_done = setup
            .idle_timeout
            .is_some_and(|t| last_arrival != 0 && now - last_arrival >= t.as_nanos() as u64);
        if stop.load(std::sync::atomic::Ordering::Relaxed)
            || setup
                .duration
                .is_some_and(|d| now - start >= d.as_nanos() as u64)
            || setup.expect.is_some_and(|e| c.received >= e)
            || idle_done
        {
            break;
        }
        if port.reclaim(&mut pool).is_err() {
            break;
        }
        rx.clear();
        let _ = port.recv(&mut pool, &mut rx, 64, now);
        let n = rx.len();
        for r in rx.drain(..) {
            let flen = r.frame.len();
            if flen > max_frame {
                // Truncated on receipt (AF_PACKET): never counted as received.
                oversize += 1;
                pool.release(r.frame);
                continue;
            }
            let data = pool.data(&r.frame);
            let class = classify(data);
            if class.kind == FrameKind::Credit {
                let payload = class.payload(data);
                if credit.is_empty() || credit.on_update(r.rx_ns.min(now), payload).is_err() {
                    other_rx += 1;
                }
                pool.release(r.frame);
                continue;
            }
            let (v, from) = match parse_ours(&pool, &r.frame, setup.dst_port) {
                Ok(v) => v,
                Err(true) => {
                    damaged += 1;
                    pool.release(r.frame);
                    continue;
                }
                Err(false) => {
                    // Other tagged data of a credit priority still counts as blocks received.
                    if let Some(p) = class
                        .eth(data)
                        .and_then(|e| e.vlan())
                        .map(|t| usize::from(t.pcp & 7))
                    {
                        if credit.on_data(now, p, flen) {
                            credit.on_drain(p, flen);
                        }
                    }
                    other_rx += 1;
                    pool.release(r.frame);
                    continue;
                }
            };
            last_arrival = now;
            let p = usize::from(v.pcp.unwrap_or(0) & 7);
            if !credit.on_data(now, p, flen) {
                // Sent beyond the credit granted: refused (in the lane's report, and this
                // sink's own loss).
                refused += 1;
                pool.release(r.frame);
                continue;
            }
            if let Some(s) = sfc.as_mut() {
                let congested = fill.starved() || waiting[p] >= thresholds.xoff;
                if let Some(msg) = s.on_frame(p, data, now, waiting[p], congested) {
                    sfcm_tx +=
                        u64::from(send_sfcm(&mut **port, &mut pool, &mut tx, &msg, s.udp_port));
                }
            }
            match setup.congestion {
                None => {
                    if let Some(s) = sfc.as_mut() {
                        // The sink's queue is its RX ring: taking a frame drains it.
                        s.cps[p].on_dequeue(u64::from(flen), now);
                    }
                    c.record(&v, from, flen, r.rx_ns);
                    credit.on_drain(p, flen);
                    pool.release(r.frame);
                }
                Some(k) => {
                    let fits = queues.bytes()[p] + u64::from(flen) <= k.buffer_bytes;
                    let q = Queued {
                        frame: r.frame,
                        ingress: 0,
                    };
                    // Queued, the frame is the queue's; refused, it comes back.
                    let refused = if fits {
                        queues.push(p, q).err()
                    } else {
                        Some(q)
                    };
                    if let Some(q) = refused {
                        overflow += 1;
                        credit.on_drain(p, flen);
                        pool.release(q.frame);
                    }
                }
            }
        }
        let mut work = n;
        if let Some(sh) = shaper.as_mut() {
            // A frame drains after it arrived: `now` was read before this turn's receive, and
            // a frame a generator on this host stamped since then would seem to drain before
            // it was sent (its sample lost, the fastest ones first).
            let drained_at = now_ns();
            while let Some(p) = queues.select(0) {
                let len = queues
                    .front(p)
                    .expect("selected ring is non-empty")
                    .frame
                    .len();
                if !sh.try_send(len, now) {
                    break;
                }
                let head = queues.pop(p).expect("selected ring is non-empty");
                credit.on_drain(p, len);
                if let Some(s) = sfc.as_mut() {
                    s.cps[p].on_dequeue(u64::from(len), now);
                    if queues.bytes()[p] == 0 {
                        s.cps[p].on_empty();
                    }
                }
                if let Ok((v, from)) = parse_ours(&pool, &head.frame, setup.dst_port) {
                    c.record(&v, from, len, drained_at);
                }
                pool.release(head.frame);
                work += 1;
            }
        }
        let backlog = port.rx_backlog();
        if fill.update(&backlog) == Some(true) {
            fill_starved_events += 1;
        }
        // What waits in the RX ring counts like what waits in the buffer.
        let queued = queues.bytes();
        waiting = std::array::from_fn(|p| queued[p] + backlog.bytes[p]);
        if let Some(s) = sfc.as_mut() {
            // Idle time is not drain time.
            for p in (0..PRIORITIES).filter(|&p| waiting[p] == 0) {
                s.cps[p].on_empty();
            }
        }
        if let Some(g) = generator.as_mut() {
            let congested = if fill.starved() { u8::MAX } else { 0 };
            if let Some(m) = g.poll(now, &waiting, congested) {
                if send_pfc(&mut **port, &mut pool, &mut tx, &m) {
                    pfc_tx += 1;
                } else {
                    // Sent again at the next turn, not half a pause later.
                    g.unsent(&m, now);
                }
            }
            // The stall guard paused upstream while the sink was away: back, and pausing
            // nothing itself, the sink ends that pause (`sink_guard`).
            if let Some(paused) = guard_paused.filter(|p| p.take()) {
                if let Some(m) = g.resume_all().filter(|_| g.xoff_mask() == 0) {
                    if send_pfc(&mut **port, &mut pool, &mut tx, &m) {
                        pfc_tx += 1;
                    } else {
                        paused.set();
                    }
                }
            }
        }
        send_credit_update(&mut credit, &mut **port, &mut pool, &mut tx, now);
        if work == 0 {
            let mut deadline = [
                generator.as_ref().and_then(|g| g.next_deadline()),
                credit.next_deadline(),
            ]
            .into_iter()
            .flatten()
            .min();
            if let (Some(sh), false) = (shaper.as_ref(), queues.is_empty()) {
                let r = sh.wake_at();
                deadline = Some(deadline.map_or(r, |d| d.min(r)));
            }
            if let Some(t) = setup.idle_timeout.filter(|_| last_arrival != 0) {
                let r = last_arrival + t.as_nanos() as u64;
                deadline = Some(deadline.map_or(r, |d| d.min(r)));
            }
            if let Some(r) = progress.next_deadline() {
                deadline = Some(deadline.map_or(r, |d| d.min(r)));
            }
            idler.wait(now, deadline);
        }
    }
    // Frames still buffered were received: count them.
    let now = now_ns();
    let peak = queues.peak_bytes().iter().copied().max().unwrap_or(0);
    queues.drain(|q| {
        if let Ok((v, from)) = parse_ours(&pool, &q.frame, setup.dst_port) {
            c.record(&v, from, q.frame.len(), now);
        }
        pool.release(q.frame);
    });
    let kernel_drops = port.kernel_drops();
    let oversize = super::oversize_total(oversize, port.as_ref(), max_frame, "sink");
    let flows = c.flows.report();
    let lost: u64 = flows.iter().map(|f| f.lost).sum();
    // What the sink dropped itself: at its socket, beyond its buffer, beyond its credit.
    let lost_here = (kernel_drops.rx_lost() + overflow + refused).min(lost);
    SinkReport {
        iface: port.name().to_string(),
        backend,
        received: c.received,
        unique: flows.iter().map(|f| f.unique).sum(),
        lost,
        lost_here,
        lost_upstream: lost - lost_here,
        fill_starved_events,
        duplicates: flows.iter().map(|f| f.duplicates).sum(),
        reordered: flows.iter().map(|f| f.reordered).sum(),
        bytes: c.bytes,
        elapsed_s: c.span_ns() as f64 / 1e9,
        rate_bps: c.rate_bps(),
        per_priority: c.per_priority,
        latency: c.latency(),
        latency_skipped: c.latency_skipped,
        unknown_flow: c.flows.unknown_flow,
        damaged,
        stale: flows.iter().map(|f| f.stale).sum(),
        mixed_sources: flows.iter().map(|f| f.mixed_sources).sum(),
        restarts: flows.iter().map(|f| f.restarts).sum(),
        flows,
        other_rx,
        buffer_overflow: overflow,
        pfc_tx,
        sfcm_tx,
        stalls: 0,
        stall_pfc_tx: 0,
        stall_sfcm_tx: 0,
        peak_buffer_bytes: peak,
        kernel_drops,
        oversize,
        credit: setup
            .credit
            .and_then(|k| credit.report(usize::from(k.priority))),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::RawFd;

    use super::*;
    use crate::{
        dataplane::{
            mem_port::{mem_link, MemPeer, MemPort},
            port::PortError,
        },
        wire::{MacAddr, TestFrame},
    };

    fn counting() -> Counting {
        Counting::new(4)
    }

    const FROM: Sender = Sender {
        mac: MacAddr([2, 0, 0, 0, 0, 1]),
        pcp: Some(3),
    };

    /// Frame `seq` of flow 7, stamped `tx_ns`.
    fn view(seq: u64, tx_ns: u64) -> TestFrameView {
        let f = TestFrame {
            seq,
            tx_ns,
            ..TestFrame::sample(100)
        };
        let mut b = [0u8; 100];
        f.emit(&mut b).unwrap();
        TestFrameView::parse(&b).unwrap()
    }

    #[test]
    fn latency_from_another_hosts_clock_is_told_not_reported() {
        // Uptime 23 days.
        const NOW: u64 = 2_000_000_000_000_000;
        // Same clock: one frame stamped after it arrived is counted, the rest are samples.
        let mut c = counting();
        for s in 0..10 {
            c.record(&view(s, NOW - 20_000), FROM, 100, NOW);
        }
        c.record(&view(10, NOW + 1), FROM, 100, NOW);
        assert_eq!(c.latency_skipped, 1);
        assert_eq!(c.latency().map(|l| l.samples), Some(10));
        // Stamped by a clock 10^15 ns ahead: every frame arrives "before" it was sent.
        let mut c = counting();
        for s in 0..10 {
            c.record(&view(s, NOW + 1_000_000_000_000_000), FROM, 100, NOW);
        }
        assert_eq!((c.latency_skipped, c.latency()), (10, None));
        // Or behind: even the fastest frame seems to take 10^6 s.
        let mut c = counting();
        for s in 0..10 {
            c.record(
                &view(s, NOW - 1_000_000_000_000_000.min(NOW)),
                FROM,
                100,
                NOW,
            );
        }
        assert_eq!((c.latency_skipped, c.latency()), (0, None));
    }

    /// Two 1,000-byte frames 8,192 ns apart (the wire time of one at 1 Gbit/s) arrived at
    /// the line's rate, not twice it.
    #[test]
    fn two_frames_give_the_line_rate() {
        let mut c = counting();
        c.record(&view(0, 1), FROM, 1000, 1_000_000);
        assert_eq!(c.rate_bps(), 0.0, "one frame spans no time");
        c.record(&view(1, 2), FROM, 1000, 1_008_192);
        assert_eq!(c.rate_bps(), 1e9);
    }

    /// The PFC frames a sink sends in 20 ms when its stall guard has (`guard_paused`) or has
    /// not paused upstream, with `queued` 1,000-byte test frames arriving at once into a
    /// congestion buffer that drains at 1 kbit/s (XOFF at 2 KiB).
    fn pfc_after_guard(guard_paused: bool, queued: u64) -> Vec<MacControl> {
        let (port, peer) = mem_link("s0", MacAddr([2, 0, 0, 0, 0, 2]), 64);
        for seq in 0..queued {
            let f = TestFrame {
                seq,
                ..TestFrame::sample(1000)
            };
            let mut b = [0u8; 1000];
            f.emit(&mut b).unwrap();
            peer.inject(&b, now_ns());
        }
        let guard = Arc::new(GuardPaused::default());
        if guard_paused {
            guard.set();
        }
        let ports = WorkerPorts {
            pool: FramePool::heap(256).unwrap(),
            ports: vec![Box::new(port)],
            backend: "mem",
            max_frame: 1518,
            rx_queues: vec![1],
        };
        let setup = SinkSetup {
            duration: Some(Duration::from_millis(20)),
            idle_timeout: None,
            progress: Duration::ZERO,
            expect: None,
            max_flows: 8,
            dst_port: TestFrame::sample(100).dst_port,
            congestion: Some(SinkCongestion {
                drain_rate_bps: 1_000,
                buffer_bytes: 64 * 1024,
                thresholds: PfcThresholds {
                    xoff: 2 * 1024,
                    xon: 1024,
                },
            }),
            pause: Some(SinkPause::Pfc(SinkPfc {
                pause_quanta: u16::MAX,
                link_speed_bps: 10_000_000_000,
                guard: Some(guard),
            })),
            credit: None,
        };
        run(ports, &setup, false, &AtomicBool::new(false));
        peer.take()
            .iter()
            .filter_map(|f| MacControl::parse_frame(f).ok())
            .collect()
    }

    #[test]
    fn a_sink_back_from_a_stall_ends_its_guards_pause_unless_it_pauses_itself() {
        let xon = MacControl::Pfc {
            enable: u8::MAX,
            quanta: [0; PRIORITIES],
        };
        assert_eq!(pfc_after_guard(false, 0), []);
        assert_eq!(pfc_after_guard(true, 0), [xon], "the guard's pause ended");
        // Above XOFF the sink's own pause of priority 3 holds (refreshed): no XON for the
        // guard's.
        let own = pfc_after_guard(true, 10);
        let xoff = MacControl::Pfc {
            enable: 1 << 3,
            quanta: std::array::from_fn(|p| if p == 3 { u16::MAX } else { 0 }),
        };
        assert!(!own.is_empty() && own.iter().all(|m| *m == xoff), "{own:?}");
    }

    /// A port on which one test frame arrives at each receive, stamped right then: after the
    /// sink's turn began, as a frame a generator on this host sends meanwhile is.
    struct FreshFrames {
        port: MemPort,
        peer: MemPeer,
        seq: u64,
    }

    impl Port for FreshFrames {
        fn name(&self) -> &str {
            self.port.name()
        }
        fn mac(&self) -> MacAddr {
            self.port.mac()
        }
        fn recv(
            &mut self,
            pool: &mut FramePool,
            out: &mut Vec<RxFrame>,
            max: usize,
            now: u64,
        ) -> Result<usize, PortError> {
            let tx_ns = now_ns();
            let f = TestFrame {
                seq: self.seq,
                tx_ns,
                ..TestFrame::sample(100)
            };
            let mut b = [0u8; 100];
            f.emit(&mut b).unwrap();
            self.peer.inject(&b, tx_ns);
            self.seq += 1;
            self.port.recv(pool, out, max, now)
        }
        fn tx_room(&mut self) -> usize {
            self.port.tx_room()
        }
        fn send(&mut self, pool: &mut FramePool, f: &mut Vec<Frame>) -> Result<usize, PortError> {
            self.port.send(pool, f)
        }
        fn reclaim(&mut self, pool: &mut FramePool) -> Result<(), PortError> {
            self.port.reclaim(pool)
        }
        fn poll_fd(&self) -> Option<RawFd> {
            None
        }
    }

    #[test]
    fn a_congestion_point_sink_samples_every_frame_it_drains() {
        let (port, peer) = mem_link("s0", MacAddr([2, 0, 0, 0, 0, 2]), 64);
        let ports = WorkerPorts {
            pool: FramePool::heap(256).unwrap(),
            ports: vec![Box::new(FreshFrames { port, peer, seq: 0 })],
            backend: "mem",
            max_frame: 1518,
            rx_queues: vec![1],
        };
        let setup = SinkSetup {
            duration: Some(Duration::from_secs(10)),
            idle_timeout: None,
            progress: Duration::ZERO,
            expect: Some(200),
            max_flows: 8,
            dst_port: TestFrame::sample(100).dst_port,
            congestion: Some(SinkCongestion {
                drain_rate_bps: 10_000_000_000,
                buffer_bytes: 512 * 1024,
                thresholds: PfcThresholds {
                    xoff: 128 * 1024,
                    xon: 64 * 1024,
                },
            }),
            pause: None,
            credit: None,
        };
        let r = run(ports, &setup, false, &AtomicBool::new(false));
        assert!(r.received >= 200, "{r:?}");
        assert_eq!(r.latency_skipped, 0, "{r:?}");
        assert_eq!(r.latency.map(|l| l.samples), Some(r.received), "{r:?}");
    }
}
