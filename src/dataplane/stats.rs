//! Per-worker counter shards: each worker writes its own plain atomics (no contention, no
//! locked instructions), readers sum the shards at report or scrape time.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

use super::{port::KernelDrops, sfc_roster::SourceRoster, shared::SharedPort};
use crate::fc::PRIORITIES;

/// A counter with one writer (its worker) and any number of readers.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n` (single writer: a plain load and store, no locked instruction).
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Sets a gauge value.
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }

    /// Raises a high-water-mark gauge to `v` if it is below.
    #[inline]
    pub fn max(&self, v: u64) {
        if v > self.get() {
            self.set(v);
        }
    }

    /// Reads the value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A histogram with power-of-two buckets, one writer (its worker): bucket `b` counts values
/// `v` with `2^(b-1) <= v < 2^b` (bucket 0 counts zeros). Recording is a leading-zero count
/// and two counter adds.
#[derive(Debug)]
pub struct Log2Histogram {
    buckets: [Counter; 65],
    sum: Counter,
}

impl Default for Log2Histogram {
    fn default() -> Self {
        Log2Histogram {
            buckets: std::array::from_fn(|_| Counter::default()),
            sum: Counter::default(),
        }
    }
}

impl Log2Histogram {
    /// Counts one value.
    #[inline]
    pub fn record(&self, v: u64) {
        self.buckets[(64 - v.leading_zeros()) as usize].add(1);
        self.sum.add(v);
    }
}

/// A [`Log2Histogram`] read (and summed over workers) for reports and metrics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Log2Snapshot {
    /// Count per bucket: index `b` counts values below `2^b` and at least `2^(b-1)`.
    pub buckets: Vec<u64>,
    /// Sum of the values.
    pub sum: u64,
}

impl Default for Log2Snapshot {
    fn default() -> Self {
        Log2Snapshot {
            buckets: vec![0; 65],
            sum: 0,
        }
    }
}

impl Log2Snapshot {
    /// Sums `histograms`.
    pub fn of<'a>(histograms: impl IntoIterator<Item = &'a Log2Histogram>) -> Self {
        let mut s = Log2Snapshot::default();
        for h in histograms {
            for (acc, c) in s.buckets.iter_mut().zip(&h.buckets) {
                *acc += c.get();
            }
            s.sum += h.sum.get();
        }
        s
    }

    /// What was counted after `earlier` (an earlier snapshot of the same histograms).
    pub fn since(&self, earlier: &Log2Snapshot) -> Log2Snapshot {
        Log2Snapshot {
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .map(|(b, n)| n.saturating_sub(earlier.buckets.get(b).copied().unwrap_or(0)))
                .collect(),
            sum: self.sum.saturating_sub(earlier.sum),
        }
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Log2Snapshot) {
        for (acc, n) in self.buckets.iter_mut().zip(&other.buckets) {
            *acc += n;
        }
        self.sum += other.sum;
    }

    /// Values counted.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// An upper bound of quantile `q` (0..=1): the bucket bound the quantile falls below
    /// (0 with no values).
    pub fn quantile_bound(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want {
                return if b == 0 {
                    0
                } else {
                    (1u64 << (b - 1)).saturating_mul(2) - 1
                };
            }
        }
        u64::MAX
    }

    /// Each bucket's own count at its upper bound `2^b - 1` for `b` in `range` (Prometheus
    /// `le`), the first with every value below it too; what lies beyond the range is
    /// [`Log2Snapshot::count`] less their sum.
    pub fn in_range(&self, range: std::ops::RangeInclusive<usize>) -> Vec<(u64, u64)> {
        let mut below = 0;
        let mut out = Vec::new();
        for (b, n) in self.buckets.iter().enumerate() {
            if b < *range.start() {
                below += n;
            } else if range.contains(&b) {
                out.push((((1u128 << b) - 1) as u64, n + std::mem::take(&mut below)));
            }
        }
        out
    }
}

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// A lossy priority exceeded its limit.
    TailDrop = 0,
    /// A lossless priority exceeded XOFF + headroom: the headroom was too small.
    HeadroomOverflow = 1,
    /// The frame could not be parsed (runt, bad MAC control, ...).
    Malformed = 2,
    /// Link-local control traffic (LLDP, PTP, control messages of a scheme not enabled) that is
    /// not forwarded.
    LinkLocal = 3,
    /// The egress queue had no slot (frame pool exhausted).
    NoBuffer = 4,
    /// The PFC watchdog declared the priority stormed (action drop).
    Watchdog = 5,
    /// A credit priority's frame arrived with no room in the buffer the port advertised: the
    /// peer sent beyond its credit (the lane re-initialises).
    CreditOverrun = 6,
    /// A frame larger than any credit the peer can grant: it could never be sent.
    CreditTooLarge = 7,
    /// Still queued when the daemon stopped, after it drained for as long as it may.
    Shutdown = 8,
    /// An SFC message from a sender not in `[sfc] accept_from` (not obeyed).
    SfcmNotAllowed = 9,
    /// An SFC message beyond its sender's `[sfc] max_rate` (not obeyed).
    SfcmRateLimited = 10,
    /// A frame longer than the port's maximum frame (`[[port]] mtu` + 18), or than the
    /// backend can receive: dropped whole on arrival, never truncated.
    Oversize = 11,
}

impl DropReason {
    /// All reasons, in index order.
    pub const ALL: [DropReason; 12] = [
        DropReason::TailDrop,
        DropReason::HeadroomOverflow,
        DropReason::Malformed,
        DropReason::LinkLocal,
        DropReason::NoBuffer,
        DropReason::Watchdog,
        DropReason::CreditOverrun,
        DropReason::CreditTooLarge,
        DropReason::Shutdown,
        DropReason::SfcmNotAllowed,
        DropReason::SfcmRateLimited,
        DropReason::Oversize,
    ];

    /// Label value used in reports and metrics.
    pub fn label(self) -> &'static str {
        match self {
            DropReason::TailDrop => "tail_drop",
            DropReason::HeadroomOverflow => "headroom_overflow",
            DropReason::Malformed => "malformed",
            DropReason::LinkLocal => "link_local",
            DropReason::NoBuffer => "no_buffer",
            DropReason::Watchdog => "watchdog",
            DropReason::CreditOverrun => "credit_overrun",
            DropReason::CreditTooLarge => "credit_too_large",
            DropReason::Shutdown => "shutdown",
            DropReason::SfcmNotAllowed => "sfcm_not_allowed",
            DropReason::SfcmRateLimited => "sfcm_rate_limited",
            DropReason::Oversize => "oversize",
        }
    }
}

/// One worker's counters for one port.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// Frames received.
    pub rx_frames: Counter,
    /// Bytes received.
    pub rx_bytes: Counter,
    /// Frames transmitted (data and control).
    pub tx_frames: Counter,
    /// Bytes transmitted.
    pub tx_bytes: Counter,
    /// Data frames received per priority (after classification; control frames excluded).
    pub rx_data_frames: [Counter; PRIORITIES],
    /// Bytes of those.
    pub rx_data_bytes: [Counter; PRIORITIES],
    /// Data frames transmitted per priority.
    pub tx_data_frames: [Counter; PRIORITIES],
    /// Bytes of those.
    pub tx_data_bytes: [Counter; PRIORITIES],
    /// Time this (ingress) port held each priority paused upstream (XOFF in force), ns
    /// (gauge of the leader's generator, updated at every PFC frame it sends).
    pub xoff_held_ns: [Counter; PRIORITIES],
    /// PFC frames received with the priority's enable bit set.
    pub pfc_rx: [Counter; PRIORITIES],
    /// 802.3x PAUSE frames received.
    pub pause_rx: Counter,
    /// PFC frames sent with the priority's enable bit set.
    pub pfc_tx: [Counter; PRIORITIES],
    /// SFC messages sent on this port (to sources behind it), per priority.
    pub sfcm_tx: [Counter; PRIORITIES],
    /// SFC messages received on this port and admitted by the sender policy, per priority:
    /// those for the daemon and those in transit.
    pub sfcm_rx: [Counter; PRIORITIES],
    /// Of those, the ones addressed to another host, passed on out of the other port.
    pub sfcm_forwarded: [Counter; PRIORITIES],
    /// XON→XOFF transitions of this (ingress) port's priorities.
    pub xoff_transitions: [Counter; PRIORITIES],
    /// Bytes queued for egress on this port now.
    pub queue_bytes: [Counter; PRIORITIES],
    /// Highest bytes queued for egress on this port.
    pub queue_peak_bytes: [Counter; PRIORITIES],
    /// Drops by [`DropReason`] index.
    pub drops: [Counter; DropReason::ALL.len()],
    /// Data frames of this (ingress) port dropped per priority, whatever the reason (the
    /// drops of frames classified before they were dropped: all but malformed and
    /// link-local ones, and the SFC messages).
    pub data_drops: [Counter; PRIORITIES],
    /// `oversize` drops of this (ingress) port per priority (their sum is the `oversize`
    /// entry of `drops`; both only through [`PortCounters::drop_oversize`]).
    pub oversize: [Counter; PRIORITIES],
    /// Frames of this (ingress) port's lossless priorities that found their buffer full and
    /// were kept in a spare frame of the pool (`[headroom] borrow`), per priority.
    pub headroom_borrowed: [Counter; PRIORITIES],
    /// The most bytes such frames held a priority beyond its buffer (gauge).
    pub headroom_borrowed_peak: [Counter; PRIORITIES],
    /// Bytes of this (ingress) port's priorities waiting in its RX ring (gauge).
    pub rx_backlog_bytes: [Counter; PRIORITIES],
    /// Highest number of frames seen waiting in this port's RX ring (gauge).
    pub rx_backlog_frames_peak: Counter,
    /// Times this port's fill ring ran short of buffers, which pauses its PFC priorities.
    pub fill_starved_events: Counter,
    /// Receive buffers each of this port's sockets keeps in its fill ring (gauge; 0 without
    /// a fill ring), as deep as the priorities in force ask ([`super::port::FillDepth`]).
    pub fill_target: Counter,
    /// 1 if this worker's socket on the port is bound in zero-copy mode, else 0 (gauge).
    pub zero_copy_sockets: Counter,
    /// Lossy frames the XDP program dropped because this port's RX backlog was deep, per
    /// priority (gauge of the program's counter).
    pub rx_backlog_drops: [Counter; PRIORITIES],
    /// Bytes of the priority that arrived after each XOFF this (ingress) port sent, until the
    /// pause took effect (leader worker).
    pub overshoot: [Log2Histogram; PRIORITIES],
    /// Time from each XOFF this (ingress) port sent to the last frame of the priority arriving
    /// before the pause took effect, ns (leader worker).
    pub pfc_reaction_ns: [Log2Histogram; PRIORITIES],
    /// The worker's lag behind the XDP hook per frame: worker time − XDP RX stamp, ns.
    pub rx_lag_ns: Log2Histogram,
    /// The longest of those lags, ns (gauge): exact, where the histogram has power-of-two
    /// resolution.
    pub rx_lag_peak_ns: Counter,
    /// PFC headroom in force per priority, bytes, and its terms (leader worker; gauges).
    pub headroom_in_force: [Counter; PRIORITIES],
    /// Where the headroom in force comes from: 0 configured, 1 measured, 2 observed.
    pub headroom_source: [Counter; PRIORITIES],
    /// The floor of the headroom.
    pub headroom_floor: [Counter; PRIORITIES],
    /// Link-up's model of the headroom (0 until measured).
    pub headroom_model: [Counter; PRIORITIES],
    /// Observed overshoot × margin plus the notice term, decayed.
    pub headroom_evidence: [Counter; PRIORITIES],
    /// The notice term (part of the evidence).
    pub headroom_notice: [Counter; PRIORITIES],
    /// Changes of the headroom in force since the start.
    pub headroom_changes: [Counter; PRIORITIES],
    /// When the headroom in force last changed, CLOCK_MONOTONIC ns (0: never).
    pub headroom_changed_ns: [Counter; PRIORITIES],
    /// XOFF and XON in force.
    pub xoff_in_force: [Counter; PRIORITIES],
    /// XON in force.
    pub xon_in_force: [Counter; PRIORITIES],
    /// The buffer's measured drain rate, bytes per second (0: not measured; `xoff_time`).
    pub pfc_drain_rate: [Counter; PRIORITIES],
    /// How far recent backlog peaks went beyond XOFF, bytes, kept below `xoff_time`'s budget.
    pub pfc_peak_excess: [Counter; PRIORITIES],
    /// PFC storms the watchdog detected on this egress port, per priority.
    pub watchdog_storms: [Counter; PRIORITIES],
    /// 1 while the priority is stormed (gauge).
    pub watchdog_stormed: [Counter; PRIORITIES],
    /// Credit this (egress) port may still send per priority, bytes (gauge).
    pub credit_available: [Counter; PRIORITIES],
    /// 1 while the priority's credit lane on this port runs (handshake done) (gauge).
    pub credit_active: [Counter; PRIORITIES],
    /// Credit-update entries sent per priority.
    pub credit_updates_tx: [Counter; PRIORITIES],
    /// Credit-update entries received per priority.
    pub credit_updates_rx: [Counter; PRIORITIES],
    /// Resyncs that repaired the count of received blocks (data frames lost on the link).
    pub credit_resyncs: [Counter; PRIORITIES],
    /// Re-initialisations of the priority's lane (timeout, overrun, peer, link flap).
    pub credit_reinits: [Counter; PRIORITIES],
    /// Kernel socket drops, as [`KernelDrops::to_array`] orders them (gauges, refreshed now
    /// and then by the worker).
    pub kernel: [Counter; KernelDrops::LEN],
}

impl PortCounters {
    /// Records the kernel's drop statistics of this worker's socket.
    pub fn set_kernel_drops(&self, k: &KernelDrops) {
        for (c, v) in self.kernel.iter().zip(k.to_array()) {
            c.set(v);
        }
    }
}

impl PortCounters {
    /// Counts a drop (in the worker; for frames the kernel dropped see [`PortCounters::kernel`]).
    #[inline]
    pub fn drop(&self, reason: DropReason) {
        debug_assert!(
            reason != DropReason::Oversize,
            "oversize drops are counted per priority: drop_oversize"
        );
        self.drops[reason as usize].add(1);
    }

    /// Counts a drop of a data frame of priority `prio` (classified): by reason, and in the
    /// port's per-priority total.
    #[inline]
    pub fn drop_data(&self, reason: DropReason, prio: usize) {
        self.drop(reason);
        self.data_drops[prio].add(1);
    }

    /// Counts `n` frames of priority `prio` dropped for being longer than the port's maximum
    /// frame (by the worker, or by the XDP program before the socket).
    #[inline]
    pub fn drop_oversize(&self, prio: usize, n: u64) {
        self.drops[DropReason::Oversize as usize].add(n);
        self.oversize[prio].add(n);
        self.data_drops[prio].add(n);
    }
}

/// Everything one worker counts, and what it publishes for the stall guard.
#[derive(Debug)]
pub struct WorkerStats {
    /// Per port, in plan order.
    pub ports: Vec<PortCounters>,
    /// Incremented every loop turn (for the watchdog).
    pub heartbeat: Counter,
    /// Per (ingress) port, in plan order: the sources of its SFC-only priorities this worker
    /// took frames from, which the stall guard pauses when the worker cannot.
    pub sfc_sources: Vec<SourceRoster>,
}

impl WorkerStats {
    /// Zeroed counters and empty rosters for `ports` ports.
    pub fn new(ports: usize) -> Self {
        WorkerStats {
            ports: (0..ports).map(|_| PortCounters::default()).collect(),
            heartbeat: Counter::default(),
            sfc_sources: (0..ports).map(|_| SourceRoster::default()).collect(),
        }
    }
}

/// Per-port counters summed over workers, for reports.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PortSnapshot {
    /// Interface.
    pub iface: String,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames transmitted.
    pub tx_frames: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// PFC frames received per priority.
    pub pfc_rx: [u64; PRIORITIES],
    /// PAUSE frames received.
    pub pause_rx: u64,
    /// PFC frames sent per priority (the stall guard's included).
    pub pfc_tx: [u64; PRIORITIES],
    /// Stalls the stall guard met: a worker that made no loop turn for `daemon.stall_guard`
    /// while frames waited for it in this port's RX ring and more arrived.
    #[serde(default)]
    pub stalls: u64,
    /// PFC frames the stall guard sent on this port per priority (also in `pfc_tx`).
    #[serde(default)]
    pub stall_pfc_tx: [u64; PRIORITIES],
    /// SFC messages the stall guard sent on this port per priority (also in `sfcm_tx`), to
    /// the sources of a stalled worker's SFC-only priorities.
    #[serde(default)]
    pub stall_sfcm_tx: [u64; PRIORITIES],
    /// How long the stall guard lets frames wait for a worker on this port before it calls a
    /// stall, ns: `daemon.stall_guard`, or longer where the headroom holds more than every
    /// term claims, up to 2 ms and to `[headroom] xoff_time` where set (0: no guard watches
    /// the port).
    #[serde(default)]
    pub stall_guard_wait_ns: u64,
    /// SFC messages sent per priority (the stall guard's included).
    pub sfcm_tx: [u64; PRIORITIES],
    /// SFC messages received and admitted per priority (for the daemon or in transit).
    pub sfcm_rx: [u64; PRIORITIES],
    /// Of those, the ones addressed to another host, passed on out of the other port.
    #[serde(default)]
    pub sfcm_forwarded: [u64; PRIORITIES],
    /// Time paused by SFC per priority, ns.
    pub sfc_paused_ns: [u64; PRIORITIES],
    /// Data frames received per priority.
    pub rx_data_frames: [u64; PRIORITIES],
    /// Data bytes received per priority.
    pub rx_data_bytes: [u64; PRIORITIES],
    /// Data frames transmitted per priority.
    pub tx_data_frames: [u64; PRIORITIES],
    /// Data bytes transmitted per priority.
    pub tx_data_bytes: [u64; PRIORITIES],
    /// Data frames dropped per priority, any reason.
    pub data_drops: [u64; PRIORITIES],
    /// Time held paused upstream per priority, ns.
    pub xoff_held_ns: [u64; PRIORITIES],
    /// XOFF transitions per priority.
    pub xoff_transitions: [u64; PRIORITIES],
    /// Paused time per priority, ns.
    pub paused_ns: [u64; PRIORITIES],
    /// Queue depth per priority, bytes.
    pub queue_bytes: [u64; PRIORITIES],
    /// Peak queue depth per priority, bytes (max over workers).
    pub queue_peak_bytes: [u64; PRIORITIES],
    /// Drops by reason.
    pub drops: std::collections::BTreeMap<String, u64>,
    /// PFC watchdog storms per priority.
    pub watchdog_storms: [u64; PRIORITIES],
    /// Priorities stormed now (1) per priority (max over workers).
    pub watchdog_stormed: [u64; PRIORITIES],
    /// Frames the kernel dropped before the daemon saw them.
    pub kernel_drops: KernelDrops,
    /// Bytes per priority waiting in the port's RX rings (steered by XDP, not yet taken).
    #[serde(default)]
    pub rx_backlog_bytes: [u64; PRIORITIES],
    /// Highest number of frames seen waiting in one of the port's RX rings.
    #[serde(default)]
    pub rx_backlog_frames_peak: u64,
    /// Times the port's fill ring ran short of buffers (its PFC priorities were paused).
    #[serde(default)]
    pub fill_starved_events: u64,
    /// Receive buffers each of the port's sockets keeps in its fill ring (0: no fill ring).
    #[serde(default)]
    pub fill_target: u64,
    /// The port's sockets (one per worker) bound in zero-copy mode.
    #[serde(default)]
    pub zero_copy_sockets: u64,
    /// Lossy frames the XDP program dropped because the RX backlog was deep, per priority.
    #[serde(default)]
    pub rx_backlog_drops: [u64; PRIORITIES],
    /// Frames longer than the port's maximum frame, dropped on arrival, per priority (the
    /// `oversize` entry of `drops` is their sum).
    #[serde(default)]
    pub oversize: [u64; PRIORITIES],
    /// Frames of a lossless priority that found its buffer full and were kept in a spare
    /// frame of the pool rather than dropped, per priority.
    #[serde(default)]
    pub headroom_borrowed: [u64; PRIORITIES],
    /// The most bytes such frames held a priority beyond its buffer, per priority.
    #[serde(default)]
    pub headroom_borrowed_peak: [u64; PRIORITIES],
    /// Bytes arrived after each XOFF until the pause took effect, per priority.
    #[serde(default)]
    pub overshoot: Vec<Log2Snapshot>,
    /// From each XOFF to the last arrival before the pause took effect, per priority, ns.
    #[serde(default)]
    pub pfc_reaction_ns: Vec<Log2Snapshot>,
    /// Worker time − XDP RX stamp per frame, ns.
    #[serde(default)]
    pub rx_lag_ns: Log2Snapshot,
    /// The longest worker time − XDP RX stamp of a frame since start, ns.
    #[serde(default)]
    pub rx_lag_peak_ns: u64,
    /// PFC headroom in force per priority, bytes.
    #[serde(default)]
    pub headroom_in_force: [u64; PRIORITIES],
    /// Where it comes from: 0 configured, 1 measured, 2 observed.
    #[serde(default)]
    pub headroom_source: [u64; PRIORITIES],
    /// Its floor.
    #[serde(default)]
    pub headroom_floor: [u64; PRIORITIES],
    /// Link-up's model of it.
    #[serde(default)]
    pub headroom_model: [u64; PRIORITIES],
    /// Observed overshoot × margin, decayed.
    #[serde(default)]
    pub headroom_evidence: [u64; PRIORITIES],
    /// The notice term, part of the evidence: what arrives while a crossing of XOFF may go
    /// unnoticed.
    #[serde(default)]
    pub headroom_notice: [u64; PRIORITIES],
    /// Changes of it since the start.
    #[serde(default)]
    pub headroom_changes: [u64; PRIORITIES],
    /// When it last changed, CLOCK_MONOTONIC ns (0: never).
    #[serde(default)]
    pub headroom_changed_ns: [u64; PRIORITIES],
    /// XOFF in force.
    #[serde(default)]
    pub xoff_in_force: [u64; PRIORITIES],
    /// XON in force.
    #[serde(default)]
    pub xon_in_force: [u64; PRIORITIES],
    /// Measured drain rate of the PFC buffer, bytes per second (0: not measured).
    #[serde(default)]
    pub pfc_drain_rate: [u64; PRIORITIES],
    /// How far recent backlog peaks went beyond XOFF, bytes (`xoff_time`; 0 without).
    #[serde(default)]
    pub pfc_peak_excess: [u64; PRIORITIES],
    /// Credit the port may still send per priority, bytes.
    #[serde(default)]
    pub credit_available: [u64; PRIORITIES],
    /// 1 where the priority's credit lane runs.
    #[serde(default)]
    pub credit_active: [u64; PRIORITIES],
    /// Credit-update entries sent per priority.
    #[serde(default)]
    pub credit_updates_tx: [u64; PRIORITIES],
    /// Credit-update entries received per priority.
    #[serde(default)]
    pub credit_updates_rx: [u64; PRIORITIES],
    /// Credit resyncs that repaired lost blocks, per priority.
    #[serde(default)]
    pub credit_resyncs: [u64; PRIORITIES],
    /// Credit lane re-initialisations per priority.
    #[serde(default)]
    pub credit_reinits: [u64; PRIORITIES],
}

impl PortSnapshot {
    /// The PFC thresholds in force for priority `p` of this ingress port: what the leader
    /// worker published (the adaptive headroom), else `planned` (configured or measured).
    pub fn pfc_in_force(
        &self,
        p: usize,
        planned: Option<crate::fc::plan::PfcPlan>,
    ) -> Option<crate::fc::plan::PfcPlan> {
        let planned = planned?;
        Some(if self.headroom_in_force[p] > 0 {
            crate::fc::plan::PfcPlan {
                xoff: self.xoff_in_force[p],
                xon: self.xon_in_force[p],
                headroom: self.headroom_in_force[p],
            }
        } else {
            planned
        })
    }

    /// Where priority `p`'s headroom in force comes from (`configured`, `measured`,
    /// `observed`), once the leader worker has published it.
    pub fn headroom_source(&self, p: usize) -> Option<&'static str> {
        (self.headroom_in_force[p] > 0).then(|| match self.headroom_source[p] {
            0 => "configured",
            1 => "measured",
            _ => "observed",
        })
    }
}

fn sum8(shards: &[&[Counter; PRIORITIES]]) -> [u64; PRIORITIES] {
    std::array::from_fn(|p| shards.iter().map(|s| s[p].get()).sum())
}

/// The drop reason of frames the port's XDP program could not steer to a worker's socket
/// (none on the RX queue they arrived on): they went to the kernel, never forwarded. The
/// program counts them, not a worker, so it is no [`DropReason`]
/// ([`SharedPort::unsteered`]).
pub const UNSTEERED: &str = "unsteered";

/// Sums the shards of port `port` over `workers`.
pub fn snapshot(
    iface: &str,
    port: usize,
    workers: &[&WorkerStats],
    shared: &SharedPort,
    now: u64,
) -> PortSnapshot {
    let c: Vec<&PortCounters> = workers.iter().map(|w| &w.ports[port]).collect();
    let sum = |f: fn(&PortCounters) -> &Counter| c.iter().map(|pc| f(pc).get()).sum();
    // A gauge's highest over the workers (peaks, and what each socket keeps).
    let most = |f: fn(&PortCounters) -> &Counter| c.iter().map(|pc| f(pc).get()).max().unwrap_or(0);
    let arr = |f: fn(&PortCounters) -> &[Counter; PRIORITIES]| {
        sum8(&c.iter().map(|pc| f(pc)).collect::<Vec<_>>())
    };
    // Per priority, the highest over the workers.
    let most8 = |f: fn(&PortCounters) -> &[Counter; PRIORITIES]| -> [u64; PRIORITIES] {
        std::array::from_fn(|p| c.iter().map(|pc| f(pc)[p].get()).max().unwrap_or(0))
    };
    let stall = shared.stall_counts();
    PortSnapshot {
        iface: iface.to_string(),
        rx_frames: sum(|p| &p.rx_frames),
        rx_bytes: sum(|p| &p.rx_bytes),
        tx_frames: sum(|p| &p.tx_frames),
        tx_bytes: sum(|p| &p.tx_bytes),
        pfc_rx: arr(|p| &p.pfc_rx),
        pause_rx: sum(|p| &p.pause_rx),
        pfc_tx: {
            let workers = arr(|p| &p.pfc_tx);
            std::array::from_fn(|p| workers[p] + stall.pfc_tx[p])
        },
        stalls: stall.stalls,
        stall_pfc_tx: stall.pfc_tx,
        stall_sfcm_tx: stall.sfcm_tx,
        stall_guard_wait_ns: shared.guard_wait(),
        sfcm_tx: {
            let workers = arr(|p| &p.sfcm_tx);
            std::array::from_fn(|p| workers[p] + stall.sfcm_tx[p])
        },
        sfcm_rx: arr(|p| &p.sfcm_rx),
        sfcm_forwarded: arr(|p| &p.sfcm_forwarded),
        sfc_paused_ns: shared.sfc_paused_ns(now),
        xoff_transitions: arr(|p| &p.xoff_transitions),
        rx_data_frames: arr(|p| &p.rx_data_frames),
        rx_data_bytes: arr(|p| &p.rx_data_bytes),
        tx_data_frames: arr(|p| &p.tx_data_frames),
        tx_data_bytes: arr(|p| &p.tx_data_bytes),
        xoff_held_ns: arr(|p| &p.xoff_held_ns),
        data_drops: arr(|p| &p.data_drops),
        paused_ns: shared.paused_ns(now),
        queue_bytes: arr(|p| &p.queue_bytes),
        queue_peak_bytes: most8(|p| &p.queue_peak_bytes),
        watchdog_storms: most8(|p| &p.watchdog_storms),
        watchdog_stormed: most8(|p| &p.watchdog_stormed),
        drops: DropReason::ALL
            .iter()
            .map(|r| {
                (
                    r.label().to_string(),
                    c.iter().map(|pc| pc.drops[*r as usize].get()).sum(),
                )
            })
            .chain([(UNSTEERED.to_string(), shared.unsteered())])
            .collect(),
        credit_available: arr(|p| &p.credit_available),
        credit_active: arr(|p| &p.credit_active),
        credit_updates_tx: arr(|p| &p.credit_updates_tx),
        credit_updates_rx: arr(|p| &p.credit_updates_rx),
        credit_resyncs: arr(|p| &p.credit_resyncs),
        credit_reinits: arr(|p| &p.credit_reinits),
        rx_backlog_bytes: arr(|p| &p.rx_backlog_bytes),
        rx_backlog_frames_peak: most(|p| &p.rx_backlog_frames_peak),
        fill_starved_events: sum(|p| &p.fill_starved_events),
        fill_target: most(|p| &p.fill_target),
        zero_copy_sockets: sum(|p| &p.zero_copy_sockets),
        rx_backlog_drops: arr(|p| &p.rx_backlog_drops),
        oversize: arr(|p| &p.oversize),
        headroom_borrowed: arr(|p| &p.headroom_borrowed),
        // Of one port's shared occupancy, whichever worker saw it: the highest, not a sum.
        headroom_borrowed_peak: most8(|p| &p.headroom_borrowed_peak),
        overshoot: (0..PRIORITIES)
            .map(|p| Log2Snapshot::of(c.iter().map(|pc| &pc.overshoot[p])))
            .collect(),
        pfc_reaction_ns: (0..PRIORITIES)
            .map(|p| Log2Snapshot::of(c.iter().map(|pc| &pc.pfc_reaction_ns[p])))
            .collect(),
        rx_lag_ns: Log2Snapshot::of(c.iter().map(|pc| &pc.rx_lag_ns)),
        rx_lag_peak_ns: most(|p| &p.rx_lag_peak_ns),
        headroom_in_force: arr(|p| &p.headroom_in_force),
        headroom_source: arr(|p| &p.headroom_source),
        headroom_floor: arr(|p| &p.headroom_floor),
        headroom_model: arr(|p| &p.headroom_model),
        headroom_evidence: arr(|p| &p.headroom_evidence),
        headroom_notice: arr(|p| &p.headroom_notice),
        headroom_changes: arr(|p| &p.headroom_changes),
        headroom_changed_ns: arr(|p| &p.headroom_changed_ns),
        xoff_in_force: arr(|p| &p.xoff_in_force),
        xon_in_force: arr(|p| &p.xon_in_force),
        pfc_drain_rate: arr(|p| &p.pfc_drain_rate),
        pfc_peak_excess: arr(|p| &p.pfc_peak_excess),
        kernel_drops: KernelDrops::from_array(std::array::from_fn(|i| {
            c.iter().map(|pc| pc.kernel[i].get()).sum()
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_sum() {
        let a = WorkerStats::new(1);
        let b = WorkerStats::new(1);
        a.ports[0].rx_frames.add(3);
        b.ports[0].rx_frames.add(4);
        a.ports[0].pfc_tx[3].add(1);
        b.ports[0].queue_peak_bytes[3].set(10);
        a.ports[0].queue_peak_bytes[3].set(7);
        b.ports[0].drop(DropReason::HeadroomOverflow);
        a.ports[0].drop_oversize(5, 2);
        b.ports[0].drop_oversize(5, 1);
        b.ports[0].drop_oversize(0, 1);
        let s = snapshot("x", 0, &[&a, &b], &SharedPort::default(), 0);
        assert_eq!(s.drops["oversize"], 4);
        assert_eq!(s.oversize, [1, 0, 0, 0, 0, 3, 0, 0]);
        assert_eq!(s.rx_frames, 7);
        assert_eq!(s.pfc_tx[3], 1);
        assert_eq!(s.queue_peak_bytes[3], 10);
        assert_eq!(s.drops["headroom_overflow"], 1);
        assert_eq!(s.drops["tail_drop"], 0);
    }
}
