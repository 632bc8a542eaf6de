//! Source flow control (SFC): the congestion point that tells the source of every frame
//! arriving above a queue's threshold how long to pause, and the reaction point that pauses.
//!
//! Sans-I/O like [`super::pfc`]: every method takes `now` in nanoseconds on a clock the caller
//! chooses and returns what to send; nothing here allocates after construction.
//!
//! # Congestion point ([`SfcCongestionPoint`], one per egress queue)
//! For a frame that arrives while the queue holds more than `threshold_bytes`:
//! ```text
//! TTD = queued bytes · 8 · 10⁹ / drain rate            (time to drain, ns)
//! TTS + TFS = link_rtt_ns                              when a measurement is configured
//!           = TTD · reserve_percent / 100              otherwise (0 % = conservative default)
//! PI  = min(TTD − (TTS + TFS), max_pause_ns)           no SFCM when TTD ≤ TTS + TFS
//! ```
//! TTS is the time the SFCM takes to reach the source, TFS the time the source's frames already
//! on their way take to arrive; their sum is the round trip between congestion point and source.
//! The drain rate is the [`DrainRateEstimator`]'s EWMA, or the configured nominal rate until the
//! first sample. A measured rate of 0 (a stalled queue) makes TTD infinite, so PI = max_pause_ns.
//!
//! **Filtering** (on by default): a source that was sent an SFCM pausing it until `until`
//! (= send time + PI, in the congestion point's clock) gets no other SFCM before `until`, unless
//! the new one extends the pause by more than `min_extension_ns` (`now + PI > until +
//! min_extension_ns`). The source key is the flow's 5-tuple in flow scope, else its IPv4 source
//! address when the frame is IPv4, else its source MAC.
//!
//! **Bounded source table**: a set-associative table with a fixed number of slots allocated in
//! [`SfcCongestionPoint::new`] (`source_capacity` rounded up to a power of two number of 4-way
//! sets). A key hashes to one set; lookup and insert touch only its 4 slots, never allocate.
//! When the set is full, an expired slot is reused; if none has expired, the slot whose pause
//! ends soonest is evicted (counted in [`SfcCpStats::evicted`]). Eviction can only cause an extra
//! SFCM to the evicted source later, which the reaction point's max rule absorbs; it can never
//! suppress a needed one.
//!
//! # Reaction point ([`SfcReactionPoint`])
//! An SFCM received at `now` pauses its class (priority) or flow until `now + PI`; when already
//! paused the later deadline wins (`max(remaining, new)`). Flow pauses live in the same kind of
//! bounded table; a flow pause that finds its set full of running pauses pauses the whole class
//! instead (counted in [`SfcRpStats::escalated`]), so a pause is never lost.

use super::PRIORITIES;
use crate::wire::{Ipv4Flow, MacAddr, SfcScope, Sfcm};

/// Slots per set of the bounded tables.
const WAYS: usize = 4;

/// Why an SFC configuration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SfcConfigError {
    /// Priorities are 0–7.
    #[error("SFC priority {0} out of range 0-7")]
    Priority(u8),
    /// The reserve must leave part of TTD as pause.
    #[error("SFC reserve {0}% must be below 100%")]
    ReservePercent(u8),
    /// A table needs at least one slot.
    #[error("SFC {0} table capacity must be at least 1")]
    ZeroCapacity(&'static str),
    /// The drain-rate window must be positive.
    #[error("SFC drain-rate window must be positive")]
    ZeroWindow,
    /// The EWMA weight is 2^-shift; shifts above 16 smooth over far too many windows.
    #[error("SFC drain-rate EWMA shift {0} out of range 0-16")]
    EwmaShift(u32),
}

/// Time to drain `queue_bytes` at `drain_bps`, in ns (rounded up; `u64::MAX` at 0 bit/s).
pub fn time_to_drain_ns(queue_bytes: u64, drain_bps: u64) -> u64 {
    if drain_bps == 0 {
        return u64::MAX;
    }
    let ns = (u128::from(queue_bytes) * 8 * 1_000_000_000).div_ceil(u128::from(drain_bps));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// One-way signal delay (TTS) of an SFCM: receive time minus the message's send timestamp.
///
/// Assumes both timestamps are in the same clock domain: the same host (both sides on one
/// CLOCK_MONOTONIC, e.g. over veth) or clocks synchronised by PTP, whose residual offset then
/// adds to the estimate. Returns `None` when the message appears to arrive before it was sent,
/// which means the clocks are not comparable (or the offset exceeds the delay); the caller must
/// then not use the estimate. On a symmetric path TFS ≈ TTS, so `2 · TTS` estimates the
/// `link_rtt_ns` a congestion point can be configured with.
pub fn estimate_tts(sent_ns: u64, received_ns: u64) -> Option<u64> {
    received_ns.checked_sub(sent_ns)
}

/// Parameters of the drain-rate estimator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainRateConfig {
    /// A rate sample covers at least this much busy time (ns); it should span many frames.
    pub window_ns: u64,
    /// EWMA weight of a new sample is 2^-`ewma_shift` (0 = no smoothing).
    pub ewma_shift: u32,
}

impl Default for DrainRateConfig {
    /// 50 µs windows, weight 1/4.
    fn default() -> Self {
        DrainRateConfig {
            window_ns: 50_000,
            ewma_shift: 2,
        }
    }
}

/// Measures a queue's drain rate from dequeued bytes over busy time, smoothed by an EWMA.
///
/// A window opens at the first dequeue (or busy report) after the queue was idle; its bytes
/// are those dequeued after it opened. Once `window_ns` has passed, the next event closes it
/// into a sample `bytes · 8 · 10⁹ / elapsed` bit/s and opens the next window. Idle time is not
/// drain time: [`DrainRateEstimator::on_empty`] discards the open window. A queue that holds
/// bytes but dequeues nothing (paused downstream) yields samples of 0 through
/// [`DrainRateEstimator::on_busy`].
#[derive(Debug, Clone)]
pub struct DrainRateEstimator {
    cfg: DrainRateConfig,
    window_start: Option<u64>,
    window_bytes: u64,
    rate_bps: Option<u64>,
}

impl DrainRateEstimator {
    /// An estimator with no sample yet.
    pub fn new(cfg: DrainRateConfig) -> Result<Self, SfcConfigError> {
        if cfg.window_ns == 0 {
            return Err(SfcConfigError::ZeroWindow);
        }
        if cfg.ewma_shift > 16 {
            return Err(SfcConfigError::EwmaShift(cfg.ewma_shift));
        }
        Ok(DrainRateEstimator {
            cfg,
            window_start: None,
            window_bytes: 0,
            rate_bps: None,
        })
    }

    /// `bytes` left the queue at `now`.
    pub fn on_dequeue(&mut self, bytes: u64, now: u64) {
        match self.window_start {
            None => self.open(now),
            Some(start) => {
                self.window_bytes = self.window_bytes.saturating_add(bytes);
                self.close_if_due(start, now);
            }
        }
    }

    /// The queue holds bytes at `now` (whether or not anything left it).
    pub fn on_busy(&mut self, now: u64) {
        match self.window_start {
            None => self.open(now),
            Some(start) => self.close_if_due(start, now),
        }
    }

    /// The queue became empty: the open window, if any, is discarded.
    pub fn on_empty(&mut self) {
        self.window_start = None;
        self.window_bytes = 0;
    }

    /// The smoothed drain rate in bit/s, once one window has closed.
    pub fn rate_bps(&self) -> Option<u64> {
        self.rate_bps
    }

    fn open(&mut self, now: u64) {
        self.window_start = Some(now);
        self.window_bytes = 0;
    }

    fn close_if_due(&mut self, start: u64, now: u64) {
        let elapsed = now.saturating_sub(start);
        if elapsed < self.cfg.window_ns {
            return;
        }
        let sample = u128::from(self.window_bytes) * 8 * 1_000_000_000 / u128::from(elapsed);
        let rate = match self.rate_bps {
            None => sample,
            Some(old) => {
                let s = self.cfg.ewma_shift;
                (u128::from(old) * ((1u128 << s) - 1) + sample) >> s
            }
        };
        self.rate_bps = Some(u64::try_from(rate).unwrap_or(u64::MAX));
        self.open(now);
    }
}

/// What identifies the source of an arriving frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameSource {
    /// Ethernet source address.
    pub mac: MacAddr,
    /// IPv4 5-tuple, when the frame is IPv4 (needed for flow scope and for UDP SFCMs).
    pub flow: Option<Ipv4Flow>,
}

/// Configuration of one congestion point (one egress queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfcCpConfig {
    /// Priority of the queue (0–7), written into every SFCM.
    pub priority: u8,
    /// Frames arriving while the queue holds more than this many bytes trigger SFCMs.
    pub threshold_bytes: u64,
    /// Class or flow pauses; flow scope falls back to class for frames without an IPv4 flow.
    pub scope: SfcScope,
    /// Drain rate (bit/s) used until the estimator has a sample: the port or shaper rate.
    pub nominal_drain_bps: u64,
    /// TTS + TFS: the measured round trip to the sources (ns), `None` before a measurement.
    pub link_rtt_ns: Option<u64>,
    /// TTS + TFS as a percentage of TTD when `link_rtt_ns` is `None`; 0 is conservative.
    pub reserve_percent: u8,
    /// Upper bound of a pause interval (ns).
    pub max_pause_ns: u64,
    /// Filter duplicate SFCMs per source within its pause interval.
    pub filter: bool,
    /// A filtered source gets another SFCM only if it extends its pause by more than this (ns).
    pub min_extension_ns: u64,
    /// Source-table slots (rounded up to a power of two number of 4-way sets).
    pub source_capacity: usize,
    /// Drain-rate estimation.
    pub drain: DrainRateConfig,
}

impl SfcCpConfig {
    /// Defaults for a queue of `priority` with `threshold_bytes` draining nominally at
    /// `nominal_drain_bps`: class scope, no delay measurement and 0 % reserve (conservative),
    /// pauses up to 10 ms, filtering on with 10 µs minimum extension, 1024 source slots.
    pub fn new(priority: u8, threshold_bytes: u64, nominal_drain_bps: u64) -> Self {
        SfcCpConfig {
            priority,
            threshold_bytes,
            scope: SfcScope::Class,
            nominal_drain_bps,
            link_rtt_ns: None,
            reserve_percent: 0,
            max_pause_ns: 10_000_000,
            filter: true,
            min_extension_ns: 10_000,
            source_capacity: 1024,
            drain: DrainRateConfig::default(),
        }
    }
}

/// Counters of a congestion point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SfcCpStats {
    /// Frames that arrived above the threshold.
    pub above_threshold: u64,
    /// SFCMs decided (to be sent).
    pub sent: u64,
    /// Frames above the threshold for which PI ≤ 0 (no SFCM).
    pub no_pause: u64,
    /// SFCMs suppressed by filtering.
    pub filtered: u64,
    /// Running source entries evicted from the full source table.
    pub evicted: u64,
}

/// Key under which a congestion point filters SFCMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceKey {
    Mac(MacAddr),
    Ip([u8; 4]),
    Flow(Ipv4Flow),
}

/// A key of a bounded table.
trait TableKey: Copy + Eq {
    fn hash64(&self) -> u64;
}

/// SplitMix64's finaliser: a cheap, well-mixed 64-bit hash of one word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl TableKey for Ipv4Flow {
    fn hash64(&self) -> u64 {
        let ips = u64::from(u32::from_be_bytes(self.src_ip)) << 32
            | u64::from(u32::from_be_bytes(self.dst_ip));
        let rest = u64::from(self.protocol) << 32
            | u64::from(self.src_port) << 16
            | u64::from(self.dst_port);
        mix(mix(ips) ^ rest)
    }
}

impl TableKey for SourceKey {
    fn hash64(&self) -> u64 {
        let m = |m: MacAddr| m.0.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
        match self {
            SourceKey::Mac(mac) => mix(1 << 56 | m(*mac)),
            SourceKey::Ip(ip) => mix(2 << 56 | u64::from(u32::from_be_bytes(*ip))),
            SourceKey::Flow(f) => f.hash64(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry<K> {
    key: K,
    until: u64,
    priority: u8,
}

/// Where a key goes in its set.
enum Slot {
    /// The key is in this slot (its pause may have expired).
    Hit(usize),
    /// An empty or expired slot.
    Free(usize),
    /// The set is full of running pauses; this one ends soonest.
    Victim(usize),
}

/// Fixed-capacity, set-associative table of pause deadlines (see the module docs).
#[derive(Debug, Clone)]
struct PauseTable<K> {
    slots: Box<[Option<Entry<K>>]>,
    set_mask: usize,
}

impl<K: TableKey> PauseTable<K> {
    fn new(capacity: usize) -> Self {
        let sets = capacity.div_ceil(WAYS).next_power_of_two();
        PauseTable {
            slots: vec![None; sets * WAYS].into_boxed_slice(),
            set_mask: sets - 1,
        }
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn find(&self, key: &K, now: u64) -> Slot {
        let base = (key.hash64() as usize & self.set_mask) * WAYS;
        let mut free = None;
        let mut victim = (base, u64::MAX);
        for i in base..base + WAYS {
            match &self.slots[i] {
                Some(e) if e.key == *key => return Slot::Hit(i),
                Some(e) if e.until > now => {
                    if e.until < victim.1 {
                        victim = (i, e.until);
                    }
                }
                _ => {
                    free.get_or_insert(i);
                }
            }
        }
        free.map_or(Slot::Victim(victim.0), Slot::Free)
    }

    fn until(&self, i: usize) -> u64 {
        self.slots[i].map_or(0, |e| e.until)
    }

    fn live(&self, now: u64) -> impl Iterator<Item = &Entry<K>> {
        self.slots.iter().flatten().filter(move |e| e.until > now)
    }
}

/// Congestion point of one egress queue: decides the SFCMs to send (see the module docs).
///
/// The caller reports every dequeue ([`SfcCongestionPoint::on_dequeue`]) and the queue
/// becoming empty ([`SfcCongestionPoint::on_empty`]), and every arrival with the queue depth
/// ([`SfcCongestionPoint::on_arrival`]). An arrival to a queue that has held bytes for a whole
/// drain window without a dequeue measures a stalled queue (rate 0, so PI = `max_pause_ns`).
#[derive(Debug, Clone)]
pub struct SfcCongestionPoint {
    cfg: SfcCpConfig,
    drain: DrainRateEstimator,
    sources: PauseTable<SourceKey>,
    seq: u32,
    stats: SfcCpStats,
}

impl SfcCongestionPoint {
    /// A congestion point; allocates its source table once, here.
    pub fn new(cfg: SfcCpConfig) -> Result<Self, SfcConfigError> {
        if usize::from(cfg.priority) >= PRIORITIES {
            return Err(SfcConfigError::Priority(cfg.priority));
        }
        if cfg.reserve_percent >= 100 {
            return Err(SfcConfigError::ReservePercent(cfg.reserve_percent));
        }
        if cfg.source_capacity == 0 {
            return Err(SfcConfigError::ZeroCapacity("source"));
        }
        Ok(SfcCongestionPoint {
            drain: DrainRateEstimator::new(cfg.drain)?,
            sources: PauseTable::new(cfg.source_capacity),
            cfg,
            seq: 0,
            stats: SfcCpStats::default(),
        })
    }

    /// Sets TTS + TFS from a (new) link delay measurement, or clears it.
    pub fn set_link_rtt(&mut self, link_rtt_ns: Option<u64>) {
        self.cfg.link_rtt_ns = link_rtt_ns;
    }

    /// `bytes` left the queue at `now` (feeds the drain-rate estimate).
    pub fn on_dequeue(&mut self, bytes: u64, now: u64) {
        self.drain.on_dequeue(bytes, now);
    }

    /// The queue became empty (idle time does not count as drain time).
    pub fn on_empty(&mut self) {
        self.drain.on_empty();
    }

    /// The drain rate PI is computed with: the estimate, else the nominal rate.
    pub fn drain_rate_bps(&self) -> u64 {
        self.drain.rate_bps().unwrap_or(self.cfg.nominal_drain_bps)
    }

    /// PI for `queue_bytes` at the current drain rate, or `None` when PI ≤ 0.
    pub fn pause_interval(&self, queue_bytes: u64) -> Option<u64> {
        let ttd = time_to_drain_ns(queue_bytes, self.drain_rate_bps());
        let correction = match self.cfg.link_rtt_ns {
            Some(rtt) => rtt,
            None => {
                let c = u128::from(ttd) * u128::from(self.cfg.reserve_percent) / 100;
                c as u64 // at most ttd
            }
        };
        let pi = ttd.checked_sub(correction)?.min(self.cfg.max_pause_ns);
        (pi > 0).then_some(pi)
    }

    /// A frame from `source` arrived at `now`, leaving `queue_bytes` queued (itself included).
    /// Returns the SFCM to send to that source, if any.
    pub fn on_arrival(&mut self, now: u64, queue_bytes: u64, source: &FrameSource) -> Option<Sfcm> {
        if queue_bytes > 0 {
            self.drain.on_busy(now);
        }
        if queue_bytes <= self.cfg.threshold_bytes {
            return None;
        }
        self.stats.above_threshold += 1;
        let Some(pi) = self.pause_interval(queue_bytes) else {
            self.stats.no_pause += 1;
            return None;
        };
        let (scope, key) = match (self.cfg.scope, source.flow) {
            (SfcScope::Flow, Some(f)) => (SfcScope::Flow, SourceKey::Flow(f)),
            (_, Some(f)) => (SfcScope::Class, SourceKey::Ip(f.src_ip)),
            (_, None) => (SfcScope::Class, SourceKey::Mac(source.mac)),
        };
        let until = now.saturating_add(pi);
        if self.cfg.filter {
            let i = match self.sources.find(&key, now) {
                Slot::Hit(i) => {
                    let old = self.sources.until(i);
                    if old > now && until <= old.saturating_add(self.cfg.min_extension_ns) {
                        self.stats.filtered += 1;
                        return None;
                    }
                    i
                }
                Slot::Free(i) => i,
                Slot::Victim(i) => {
                    self.stats.evicted += 1;
                    i
                }
            };
            self.sources.slots[i] = Some(Entry {
                key,
                until,
                priority: self.cfg.priority,
            });
        }
        self.stats.sent += 1;
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        Some(Sfcm {
            priority: self.cfg.priority,
            scope,
            seq,
            pause_ns: pi,
            sent_ns: now,
            queue_bytes,
            drain_bps: self.drain_rate_bps(),
            src_mac: source.mac,
            flow: source.flow,
        })
    }

    /// Counters since creation.
    pub fn stats(&self) -> SfcCpStats {
        self.stats
    }

    /// Slots of the source table (the configured capacity, rounded up).
    pub fn source_capacity(&self) -> usize {
        self.sources.capacity()
    }
}

/// Configuration of a reaction point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfcRpConfig {
    /// Flow-table slots (rounded up to a power of two number of 4-way sets).
    pub flow_capacity: usize,
    /// Upper bound of an accepted pause interval (ns), against corrupt or hostile messages.
    pub max_pause_ns: u64,
}

impl SfcRpConfig {
    /// When the pause `msg` asks for at `now` ends: its interval, clamped to
    /// `max_pause_ns`.
    pub fn pause_until(&self, msg: &Sfcm, now: u64) -> u64 {
        now.saturating_add(msg.pause_ns.min(self.max_pause_ns))
    }
}

impl Default for SfcRpConfig {
    /// 1024 flow slots, pauses up to 100 ms.
    fn default() -> Self {
        SfcRpConfig {
            flow_capacity: 1024,
            max_pause_ns: 100_000_000,
        }
    }
}

/// What one SFCM did at the reaction point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SfcReaction {
    /// The class `priority` is paused until `until` (the later of old and new deadline).
    Class {
        /// Priority paused.
        priority: u8,
        /// Deadline now in force.
        until: u64,
    },
    /// The flow is paused until `until` (the later of old and new deadline).
    Flow {
        /// Deadline now in force.
        until: u64,
    },
    /// The flow table's set was full of running pauses: the whole class was paused instead.
    Escalated {
        /// Priority paused.
        priority: u8,
        /// Deadline now in force.
        until: u64,
    },
}

/// Counters of a reaction point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SfcRpStats {
    /// SFCMs applied.
    pub received: u64,
    /// SFCMs that lengthened a pause (or started one).
    pub extended: u64,
    /// SFCMs whose pause ended no later than the running one (max rule kept the old).
    pub kept: u64,
    /// Flow pauses turned into class pauses because the flow table's set was full.
    pub escalated: u64,
}

/// Paused time accounted by a reaction point, per priority, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SfcPausedNs {
    /// Time each class spent paused (overlapping pauses counted once).
    pub class: [u64; PRIORITIES],
    /// Sum over flows of the time each flow spent paused, by the flow's priority.
    pub flow: [u64; PRIORITIES],
}

/// Reaction point: class and flow pause deadlines set by received SFCMs (see the module docs).
#[derive(Debug, Clone)]
pub struct SfcReactionPoint {
    cfg: SfcRpConfig,
    class_until: [u64; PRIORITIES],
    accounted_to: [u64; PRIORITIES],
    class_paused_ns: [u64; PRIORITIES],
    flows: PauseTable<Ipv4Flow>,
    flows_until: u64,
    flow_granted_ns: [u64; PRIORITIES],
    stats: SfcRpStats,
}

impl SfcReactionPoint {
    /// A reaction point; allocates its flow table once, here.
    pub fn new(cfg: SfcRpConfig) -> Result<Self, SfcConfigError> {
        if cfg.flow_capacity == 0 {
            return Err(SfcConfigError::ZeroCapacity("flow"));
        }
        Ok(SfcReactionPoint {
            flows: PauseTable::new(cfg.flow_capacity),
            cfg,
            class_until: [0; PRIORITIES],
            accounted_to: [0; PRIORITIES],
            class_paused_ns: [0; PRIORITIES],
            flows_until: 0,
            flow_granted_ns: [0; PRIORITIES],
            stats: SfcRpStats::default(),
        })
    }

    /// Applies an SFCM received at `now`.
    pub fn on_sfcm(&mut self, msg: &Sfcm, now: u64) -> SfcReaction {
        self.settle(now);
        self.stats.received += 1;
        let until = self.cfg.pause_until(msg, now);
        let p = msg.priority & 7;
        match (msg.scope, msg.flow) {
            (SfcScope::Flow, Some(flow)) => self.pause_flow(flow, p, until, now),
            _ => {
                let extended = self.pause_class(usize::from(p), until);
                self.count(extended);
                SfcReaction::Class {
                    priority: p,
                    until: self.class_until[usize::from(p)],
                }
            }
        }
    }

    fn count(&mut self, extended: bool) {
        if extended {
            self.stats.extended += 1;
        } else {
            self.stats.kept += 1;
        }
    }

    /// Max rule on a class deadline; true if it moved.
    fn pause_class(&mut self, p: usize, until: u64) -> bool {
        let extended = until > self.class_until[p];
        self.class_until[p] = self.class_until[p].max(until);
        extended
    }

    fn pause_flow(&mut self, flow: Ipv4Flow, priority: u8, until: u64, now: u64) -> SfcReaction {
        let (i, old, priority) = match self.flows.find(&flow, now) {
            Slot::Hit(i) => match self.flows.slots[i] {
                // A running pause keeps the priority it is accounted under.
                Some(e) if e.until > now => (i, e.until, e.priority),
                _ => (i, now, priority),
            },
            Slot::Free(i) => (i, now, priority),
            Slot::Victim(_) => {
                self.stats.escalated += 1;
                let extended = self.pause_class(usize::from(priority), until);
                self.count(extended);
                return SfcReaction::Escalated {
                    priority,
                    until: self.class_until[usize::from(priority)],
                };
            }
        };
        let new = old.max(until);
        self.count(new > old);
        self.flow_granted_ns[usize::from(priority)] += new - old;
        self.flows.slots[i] = Some(Entry {
            key: flow,
            until: new,
            priority,
        });
        self.flows_until = self.flows_until.max(new);
        SfcReaction::Flow { until: new }
    }

    /// True if a frame of priority `p` (of IPv4 flow `flow`, if it is one) may not be sent.
    pub fn is_paused(&self, p: usize, flow: Option<&Ipv4Flow>, now: u64) -> bool {
        if self.class_until.get(p).is_some_and(|&u| u > now) {
            return true;
        }
        match flow {
            Some(f) if self.flows_until > now => match self.flows.find(f, now) {
                Slot::Hit(i) => self.flows.until(i) > now,
                Slot::Free(_) | Slot::Victim(_) => false,
            },
            _ => false,
        }
    }

    /// Bitmask of paused classes at `now` (flow pauses not included).
    pub fn paused_mask(&self, now: u64) -> u8 {
        (0..PRIORITIES).fold(0, |m, p| m | (u8::from(self.class_until[p] > now) << p))
    }

    /// The earliest time a running class or flow pause ends, if any (scans the flow table
    /// only while a flow pause runs).
    pub fn next_resume(&self, now: u64) -> Option<u64> {
        let class = self.class_until.iter().copied().filter(|&u| u > now).min();
        let flow = if self.flows_until > now {
            self.flows.live(now).map(|e| e.until).min()
        } else {
            None
        };
        class.into_iter().chain(flow).min()
    }

    /// Paused time up to `now`: per class, and summed over flows by priority.
    pub fn paused_ns(&mut self, now: u64) -> SfcPausedNs {
        self.settle(now);
        let mut flow = self.flow_granted_ns;
        for e in self.flows.live(now) {
            flow[usize::from(e.priority)] -= e.until - now;
        }
        SfcPausedNs {
            class: self.class_paused_ns,
            flow,
        }
    }

    /// Counters since creation.
    pub fn stats(&self) -> SfcRpStats {
        self.stats
    }

    /// Slots of the flow table (the configured capacity, rounded up).
    pub fn flow_capacity(&self) -> usize {
        self.flows.capacity()
    }

    fn settle(&mut self, now: u64) {
        for p in 0..PRIORITIES {
            let from = self.accounted_to[p];
            let to = self.class_until[p].min(now);
            if to > from {
                self.class_paused_ns[p] += to - from;
            }
            self.accounted_to[p] = self.accounted_to[p].max(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBIT: u64 = 1_000_000_000;
    const US: u64 = 1_000;

    fn mac(n: u16) -> MacAddr {
        let [a, b] = n.to_be_bytes();
        MacAddr([2, 0, 0, 0, a, b])
    }

    fn l2(n: u16) -> FrameSource {
        FrameSource {
            mac: mac(n),
            flow: None,
        }
    }

    fn flow(src: u8, port: u16) -> Ipv4Flow {
        Ipv4Flow {
            src_ip: [10, 0, 0, src],
            dst_ip: [10, 0, 1, 1],
            protocol: 17,
            src_port: port,
            dst_port: 48879,
        }
    }

    fn ip(src: u8, port: u16) -> FrameSource {
        FrameSource {
            mac: mac(0xfe), // behind a router: one MAC for every IP source
            flow: Some(flow(src, port)),
        }
    }

    /// Priority 3, 10 KB threshold, 10 Gbit/s nominal: 1,250 bytes take 1 us. Tests that do
    /// not report dequeues use a 1 s drain window, so the nominal rate applies throughout
    /// (with the default 50 us window, arrivals without dequeues measure a stalled queue).
    fn cfg() -> SfcCpConfig {
        SfcCpConfig {
            drain: DrainRateConfig {
                window_ns: 1_000_000_000,
                ewma_shift: 2,
            },
            ..SfcCpConfig::new(3, 10_000, 10 * GBIT)
        }
    }

    fn cp(cfg: SfcCpConfig) -> SfcCongestionPoint {
        SfcCongestionPoint::new(cfg).unwrap()
    }

    fn msg(priority: u8, pause_ns: u64) -> Sfcm {
        Sfcm {
            priority,
            scope: SfcScope::Class,
            seq: 0,
            pause_ns,
            sent_ns: 0,
            queue_bytes: 0,
            drain_bps: 0,
            src_mac: mac(1),
            flow: None,
        }
    }

    #[test]
    fn time_to_drain() {
        assert_eq!(time_to_drain_ns(1_250, 10 * GBIT), 1_000);
        assert_eq!(time_to_drain_ns(1, 3 * GBIT), 3, "8/3 ns rounds up");
        assert_eq!(time_to_drain_ns(0, GBIT), 0);
        assert_eq!(time_to_drain_ns(1, 0), u64::MAX);
        assert_eq!(time_to_drain_ns(u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn pause_interval_formula() {
        // 125,000 bytes at 10G: TTD = 100 us.
        let mut c = cp(cfg());
        assert_eq!(
            c.pause_interval(125_000),
            Some(100 * US),
            "no delay known: PI = TTD"
        );
        c.set_link_rtt(Some(30 * US));
        assert_eq!(
            c.pause_interval(125_000),
            Some(70 * US),
            "PI = TTD - (TTS + TFS)"
        );
        // PI <= 0: no pause.
        assert_eq!(c.pause_interval(37_500), None, "TTD = RTT");
        assert_eq!(c.pause_interval(20_000), None, "TTD < RTT");
        // Reserve percentage when no measurement.
        c.set_link_rtt(None);
        let r = cp(SfcCpConfig {
            reserve_percent: 25,
            ..cfg()
        });
        assert_eq!(r.pause_interval(125_000), Some(75 * US));
        // Capped at max_pause_ns.
        assert_eq!(c.pause_interval(1 << 40), Some(10_000_000));
    }

    #[test]
    fn no_sfcm_at_or_below_threshold_or_without_pause() {
        let mut c = cp(SfcCpConfig {
            link_rtt_ns: Some(50 * US),
            ..cfg()
        });
        assert_eq!(c.on_arrival(0, 10_000, &l2(1)), None, "at threshold");
        // Above threshold, but TTD = 40 us < 50 us RTT: PI <= 0.
        assert_eq!(c.on_arrival(1, 50_000, &l2(1)), None);
        assert_eq!(c.stats().no_pause, 1);
        let m = c.on_arrival(2, 125_000, &l2(1)).unwrap();
        assert_eq!(m.pause_ns, 50 * US);
        assert_eq!(
            (
                m.priority,
                m.scope,
                m.sent_ns,
                m.queue_bytes,
                m.drain_bps,
                m.src_mac
            ),
            (3, SfcScope::Class, 2, 125_000, 10 * GBIT, mac(1))
        );
        assert_eq!(c.stats().above_threshold, 2);
        assert_eq!(c.stats().sent, 1);
    }

    #[test]
    fn filter_first_per_interval_then_extension() {
        let mut c = cp(cfg());
        // First: 100 us pause, until 100 us.
        let m = c.on_arrival(0, 125_000, &l2(1)).unwrap();
        assert_eq!((m.seq, m.pause_ns), (0, 100 * US));
        // Same queue a bit later: until 101 us, extension 1 us < 10 us: filtered.
        assert_eq!(c.on_arrival(US, 125_000, &l2(1)), None);
        // Another source is not affected by the first one's entry.
        assert_eq!(c.on_arrival(2 * US, 125_000, &l2(2)).unwrap().seq, 1);
        // The queue grew: until 5 us + 120 us = 125 us > 100 + 10: sent, extends.
        let m = c.on_arrival(5 * US, 150_000, &l2(1)).unwrap();
        assert_eq!((m.seq, m.pause_ns), (2, 120 * US));
        // Within the new interval, a shorter one is filtered.
        assert_eq!(c.on_arrival(50 * US, 50_000, &l2(1)), None);
        // After the interval (125 us) the first SFCM of a new interval goes out.
        assert!(c.on_arrival(125 * US, 50_000, &l2(1)).is_some());
        assert_eq!(c.stats().filtered, 2);
        assert_eq!(c.stats().sent, 4);
        // Without filtering, every frame above the threshold gets one.
        let mut c = cp(SfcCpConfig {
            filter: false,
            ..cfg()
        });
        for t in 0..10 {
            assert!(c.on_arrival(t, 125_000, &l2(1)).is_some());
        }
    }

    #[test]
    fn class_vs_flow_scope_at_the_congestion_point() {
        // Class scope: IP sources are keyed by source address, not by port.
        let mut c = cp(cfg());
        let m = c.on_arrival(0, 125_000, &ip(1, 1000)).unwrap();
        assert_eq!((m.scope, m.flow), (SfcScope::Class, Some(flow(1, 1000))));
        assert_eq!(c.on_arrival(1, 125_000, &ip(1, 2000)), None, "same source");
        assert!(
            c.on_arrival(2, 125_000, &ip(2, 1000)).is_some(),
            "other IP, same MAC"
        );
        // Flow scope: each 5-tuple is its own source.
        let mut c = cp(SfcCpConfig {
            scope: SfcScope::Flow,
            ..cfg()
        });
        let m = c.on_arrival(0, 125_000, &ip(1, 1000)).unwrap();
        assert_eq!((m.scope, m.flow), (SfcScope::Flow, Some(flow(1, 1000))));
        assert!(
            c.on_arrival(1, 125_000, &ip(1, 2000)).is_some(),
            "other flow"
        );
        assert_eq!(c.on_arrival(2, 125_000, &ip(1, 1000)), None, "same flow");
        // A frame without an IPv4 flow falls back to a class pause for its MAC.
        let m = c.on_arrival(3, 125_000, &l2(7)).unwrap();
        assert_eq!((m.scope, m.flow), (SfcScope::Class, None));
    }

    #[test]
    fn bounded_source_table_under_many_sources() {
        let mut c = cp(SfcCpConfig {
            source_capacity: 16,
            ..cfg()
        });
        assert_eq!(c.source_capacity(), 16);
        // 10,000 sources within one pause interval: every one is signalled once, the table
        // stays at 16 slots and evicts the pauses that end soonest.
        for n in 0..10_000u16 {
            let m = c.on_arrival(u64::from(n), 125_000, &l2(n));
            assert!(m.is_some(), "source {n} signalled");
        }
        let s = c.stats();
        assert_eq!(s.sent, 10_000);
        assert_eq!(s.evicted, 10_000 - 16);
        assert_eq!(c.source_capacity(), 16);
        // Each set kept its 4 latest sources (their pauses end last), which are still
        // filtered; the earlier ones were evicted and may be signalled again (the max rule
        // absorbs that). Latest first, so re-signalled sources do not evict retained ones.
        let kept = (9_900..10_000u16)
            .rev()
            .filter(|&n| c.on_arrival(10_000, 125_000, &l2(n)).is_none())
            .count();
        assert_eq!(kept, 16);
        assert!(c.on_arrival(10_001, 125_000, &l2(0)).is_some());
        // Expired entries are reused before any running pause is evicted.
        let evicted = c.stats().evicted;
        for n in 0..4u16 {
            assert!(c
                .on_arrival(1_000_000 + u64::from(n), 125_000, &l2(20_000 + n))
                .is_some());
        }
        assert_eq!(c.stats().evicted, evicted, "all old entries had expired");
        // Capacity rounds up to whole 4-way sets, a power of two of them.
        assert_eq!(
            cp(SfcCpConfig {
                source_capacity: 17,
                ..cfg()
            })
            .source_capacity(),
            32
        );
        assert_eq!(
            cp(SfcCpConfig {
                source_capacity: 1,
                ..cfg()
            })
            .source_capacity(),
            4
        );
    }

    #[test]
    fn drain_rate_estimation() {
        let mut d = DrainRateEstimator::new(DrainRateConfig {
            window_ns: 10 * US,
            ewma_shift: 1,
        })
        .unwrap();
        assert_eq!(d.rate_bps(), None);
        // 1,250-byte frames every 2 us: 5 Gbit/s.
        for k in 0..=5 {
            d.on_dequeue(1_250, k * 2 * US);
        }
        assert_eq!(d.rate_bps(), Some(5 * GBIT));
        // Idle time does not count: empty, then resume 1 ms later at 10 Gbit/s.
        d.on_empty();
        for k in 0..=10 {
            d.on_dequeue(1_250, 1_000 * US + k * US);
        }
        assert_eq!(
            d.rate_bps(),
            Some((5 * GBIT + 10 * GBIT) / 2),
            "EWMA weight 1/2"
        );
        // Stalled but busy (paused downstream): samples of 0.
        d.on_busy(1_020 * US);
        assert_eq!(d.rate_bps(), Some((15 * GBIT / 2) / 2));
        // The congestion point uses the estimate, and nominal before the first sample.
        let mut c = cp(SfcCpConfig {
            drain: DrainRateConfig {
                window_ns: 10 * US,
                ewma_shift: 0,
            },
            ..cfg()
        });
        assert_eq!(c.drain_rate_bps(), 10 * GBIT);
        for k in 0..=10 {
            c.on_dequeue(1_250, k * 4 * US); // 2.5 Gbit/s
        }
        assert_eq!(c.drain_rate_bps(), 2_500_000_000);
        assert_eq!(c.pause_interval(125_000), Some(400 * US));
        // A queue that stops draining while full: TTD infinite, PI capped.
        c.on_arrival(50 * US, 20_000, &l2(1)); // closes the window holding the last dequeue
        c.on_arrival(70 * US, 20_000, &l2(1)); // 20 us busy, nothing dequeued
        assert_eq!(c.drain_rate_bps(), 0);
        assert_eq!(c.pause_interval(20_000), Some(10_000_000));
        c.on_empty();
        assert!(DrainRateEstimator::new(DrainRateConfig {
            window_ns: 0,
            ewma_shift: 0
        })
        .is_err());
    }

    #[test]
    fn config_is_validated() {
        assert_eq!(
            SfcCongestionPoint::new(SfcCpConfig::new(8, 1, 1)).unwrap_err(),
            SfcConfigError::Priority(8)
        );
        assert_eq!(
            SfcCongestionPoint::new(SfcCpConfig {
                reserve_percent: 100,
                ..cfg()
            })
            .unwrap_err(),
            SfcConfigError::ReservePercent(100)
        );
        assert!(SfcCongestionPoint::new(SfcCpConfig {
            source_capacity: 0,
            ..cfg()
        })
        .is_err());
        assert!(SfcCongestionPoint::new(SfcCpConfig {
            drain: DrainRateConfig {
                window_ns: 1,
                ewma_shift: 17
            },
            ..cfg()
        })
        .is_err());
        assert!(SfcReactionPoint::new(SfcRpConfig {
            flow_capacity: 0,
            ..SfcRpConfig::default()
        })
        .is_err());
    }

    fn rp() -> SfcReactionPoint {
        SfcReactionPoint::new(SfcRpConfig::default()).unwrap()
    }

    #[test]
    fn max_rule_and_paused_time() {
        let mut r = rp();
        assert_eq!(
            r.on_sfcm(&msg(3, 100 * US), 0),
            SfcReaction::Class {
                priority: 3,
                until: 100 * US
            }
        );
        assert!(r.is_paused(3, None, 99 * US));
        assert!(!r.is_paused(2, None, 0));
        // Shorter than the remaining pause: kept.
        assert_eq!(
            r.on_sfcm(&msg(3, 10 * US), 50 * US),
            SfcReaction::Class {
                priority: 3,
                until: 100 * US
            }
        );
        // Longer: extended.
        r.on_sfcm(&msg(3, 80 * US), 60 * US);
        assert_eq!(r.next_resume(60 * US), Some(140 * US));
        // PI 0 never shortens a pause.
        r.on_sfcm(&msg(3, 0), 70 * US);
        assert!(r.is_paused(3, None, 139 * US));
        assert!(!r.is_paused(3, None, 140 * US));
        assert_eq!(r.paused_mask(100 * US), 0x08);
        assert_eq!(r.next_resume(140 * US), None);
        // A later separate pause.
        r.on_sfcm(&msg(3, 10 * US), 200 * US);
        assert_eq!(r.paused_ns(1_000 * US).class[3], 140 * US + 10 * US);
        assert_eq!(
            r.stats(),
            SfcRpStats {
                received: 5,
                extended: 3,
                kept: 2,
                escalated: 0
            }
        );
        // A hostile PI is capped.
        let mut r = rp();
        r.on_sfcm(&msg(1, u64::MAX), 0);
        assert_eq!(r.next_resume(0), Some(100_000_000));
        assert!(
            !r.is_paused(99, None, 0),
            "out-of-range priority is never paused"
        );
    }

    fn flow_msg(f: Ipv4Flow, pause_ns: u64) -> Sfcm {
        Sfcm {
            scope: SfcScope::Flow,
            flow: Some(f),
            ..msg(5, pause_ns)
        }
    }

    #[test]
    fn class_vs_flow_scope_at_the_reaction_point() {
        let a = flow(1, 1000);
        let b = flow(1, 2000);
        let mut r = rp();
        assert_eq!(
            r.on_sfcm(&flow_msg(a, 100 * US), 0),
            SfcReaction::Flow { until: 100 * US }
        );
        assert!(r.is_paused(5, Some(&a), 50 * US));
        assert!(!r.is_paused(5, Some(&b), 50 * US), "other flow, same class");
        assert!(!r.is_paused(5, None, 50 * US), "class not paused");
        assert_eq!(r.paused_mask(50 * US), 0);
        // Max rule on flows too.
        r.on_sfcm(&flow_msg(a, 10 * US), 60 * US);
        r.on_sfcm(&flow_msg(b, 20 * US), 60 * US);
        assert_eq!(r.next_resume(60 * US), Some(80 * US));
        assert_eq!(r.next_resume(80 * US), Some(100 * US));
        assert!(!r.is_paused(5, Some(&a), 100 * US));
        // Paused time so far: a 0..100, b 60..80 -> 120 us at priority 5, mid-pause counted
        // only up to now.
        assert_eq!(r.paused_ns(70 * US).flow[5], 70 * US + 10 * US);
        assert_eq!(r.paused_ns(1_000 * US).flow[5], 120 * US);
        assert_eq!(r.paused_ns(1_000 * US).class, [0; PRIORITIES]);
        // A class-scope message pauses every flow of the class.
        r.on_sfcm(&msg(5, 10 * US), 1_000 * US);
        assert!(r.is_paused(5, Some(&a), 1_005 * US));
        assert!(r.is_paused(5, None, 1_005 * US));
    }

    #[test]
    fn full_flow_table_escalates_to_class_pause() {
        let mut r = SfcReactionPoint::new(SfcRpConfig {
            flow_capacity: 4,
            ..SfcRpConfig::default()
        })
        .unwrap();
        assert_eq!(r.flow_capacity(), 4);
        let mut escalated = None;
        for port in 0..5 {
            match r.on_sfcm(&flow_msg(flow(1, port), 100 * US), 0) {
                SfcReaction::Flow { .. } => {}
                SfcReaction::Escalated { priority, until } => {
                    escalated = Some((port, priority, until));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            escalated,
            Some((4, 5, 100 * US)),
            "fifth flow: one set, 4 ways"
        );
        assert_eq!(r.stats().escalated, 1);
        // No pause was lost: every flow is paused (the fifth through its class).
        for port in 0..5 {
            assert!(r.is_paused(5, Some(&flow(1, port)), 99 * US));
        }
        // Once they expire, slots are reused instead of escalating.
        assert_eq!(
            r.on_sfcm(&flow_msg(flow(9, 9), 10 * US), 100 * US),
            SfcReaction::Flow { until: 110 * US }
        );
        assert!(!r.is_paused(5, Some(&flow(1, 0)), 100 * US));
    }

    proptest::proptest! {
        /// Whatever order SFCMs arrive in, every class and flow stays paused at least until
        /// its latest requested deadline, and resumes exactly at the largest one.
        #[test]
        fn max_rule_never_shortens_a_pause(
            msgs in proptest::collection::vec((0u8..8, 0u64..1_000_000, 0u64..50_000, proptest::bool::ANY), 1..64)
        ) {
            let mut r = rp();
            let f = flow(1, 1);
            let mut now = 0;
            let mut class = [0u64; PRIORITIES];
            let mut flow_until = 0u64;
            for (p, pi, dt, is_flow) in msgs {
                now += dt;
                let m = if is_flow { Sfcm { priority: p, ..flow_msg(f, pi) } } else { msg(p, pi) };
                r.on_sfcm(&m, now);
                if is_flow {
                    flow_until = flow_until.max(now + pi);
                } else {
                    class[usize::from(p)] = class[usize::from(p)].max(now + pi);
                }
                for (q, &until) in class.iter().enumerate() {
                    if until > now {
                        proptest::prop_assert!(r.is_paused(q, None, until - 1));
                        proptest::prop_assert!(!r.is_paused(q, None, until));
                    }
                }
                if flow_until > now {
                    proptest::prop_assert!(r.is_paused(0, Some(&f), flow_until - 1));
                }
                let next = class.iter().copied().chain([flow_until]).filter(|&u| u > now).min();
                proptest::prop_assert_eq!(r.next_resume(now), next);
            }
        }
    }

    #[test]
    fn tts_from_timestamps_and_end_to_end() {
        assert_eq!(estimate_tts(1_000, 1_350), Some(350));
        assert_eq!(estimate_tts(1_000, 1_000), Some(0));
        assert_eq!(estimate_tts(1_350, 1_000), None, "clocks not comparable");
        // Simulated link: one-way delay 15 us each way. The reaction point estimates TTS from
        // the SFCM's timestamp; the congestion point, configured with 2·TTS, subtracts it.
        let d = 15 * US;
        let mut c = cp(cfg());
        let mut r = rp();
        let first = c.on_arrival(0, 125_000, &l2(1)).unwrap();
        let rx = first.sent_ns + d;
        let tts = estimate_tts(first.sent_ns, rx).unwrap();
        assert_eq!(tts, d);
        r.on_sfcm(&first, rx);
        c.set_link_rtt(Some(2 * tts));
        let next = c.on_arrival(1_000 * US, 125_000, &l2(2)).unwrap();
        assert_eq!(next.pause_ns, 100 * US - 2 * d);
        r.on_sfcm(&next, next.sent_ns + d);
        // The source stays paused until the queue would have drained, minus the frames the
        // source had in flight (TFS): it resumes TFS before the queue empties.
        assert_eq!(
            r.next_resume(next.sent_ns + d),
            Some(next.sent_ns + 100 * US - d)
        );
    }
}
