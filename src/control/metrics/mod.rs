//! Prometheus metrics: a custom collector that sums the workers' counter shards at scrape time
//! (never a labelled lookup per packet); [`serve`] serves it over HTTP.

mod http;

pub use http::{serve, Liveness, HEALTHZ_STALLED};

use std::sync::Arc;

use super::reload::ReloadLog;
use crate::linkup::shared::{LinkShared, LINK_EVENTS};
use crate::{
    dataplane::{
        clock::now_ns,
        port::TimeStamping,
        sched::WorkerSched,
        settings::SettingsCell,
        shared::SharedPort,
        stats::{snapshot, Log2Snapshot, PortSnapshot, WorkerStats},
        xdp_prog::{XdpCounters, XdpProgram},
    },
    fc::{plan::PfcPlan, PRIORITIES},
};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder},
    metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType},
    registry::{Registry, Unit},
};

/// A [`Log2Snapshot`] as a Prometheus histogram over a fixed range of its power-of-two
/// buckets (so every scrape has the same `le` bounds), values divided by `per_unit` (1e9 for ns
/// in seconds). The encoder takes each bucket's own count and writes the running sum, so the
/// first bound carries everything at or below it and `+Inf` what lies beyond the last.
struct Log2Histogram<'a> {
    snap: &'a Log2Snapshot,
    range: std::ops::RangeInclusive<usize>,
    per_unit: f64,
}

impl std::fmt::Debug for Log2Histogram<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log2Histogram").finish_non_exhaustive()
    }
}

impl EncodeMetric for Log2Histogram<'_> {
    fn encode(&self, mut encoder: MetricEncoder) -> std::fmt::Result {
        let count = self.snap.count();
        let mut buckets: Vec<(f64, u64)> = self
            .snap
            .in_range(self.range.clone())
            .into_iter()
            .map(|(le, n)| (le as f64 / self.per_unit, n))
            .collect();
        let in_range: u64 = buckets.iter().map(|b| b.1).sum();
        buckets.push((f64::INFINITY, count - in_range));
        encoder.encode_histogram::<Vec<(String, String)>>(
            self.snap.sum as f64 / self.per_unit,
            count,
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// What the collector reads: the ports, the plan, every worker's shard and thread.
#[derive(Debug)]
pub struct DaemonCollector {
    /// The ports' interfaces, in plan order (every per-port field below is in this order).
    pub ifaces: Vec<String>,
    /// The plan in force.
    pub live: Arc<SettingsCell>,
    /// Every worker's counter shard.
    pub workers: Vec<Arc<WorkerStats>>,
    /// The worker threads, in worker order.
    pub worker_tids: Vec<i32>,
    /// The outcome of the last configuration load.
    pub reloads: Arc<ReloadLog>,
    /// Each port's shared state (ingress occupancy, pauses, link).
    pub shared: Vec<Arc<SharedPort>>,
    /// Each port's link-up state (LLDP neighbour); empty when link-up is off.
    pub links: Vec<Arc<LinkShared>>,
    /// How each port's times are taken.
    pub time_stamping: Vec<TimeStamping>,
    /// Each port's XDP program, in port order; empty on AF_PACKET.
    pub xdp: Vec<Arc<XdpProgram>>,
}

impl DaemonCollector {
    fn snapshots(&self) -> Vec<PortSnapshot> {
        let refs: Vec<&WorkerStats> = self.workers.iter().map(|w| w.as_ref()).collect();
        let now = now_ns();
        self.ifaces
            .iter()
            .enumerate()
            .map(|(i, iface)| snapshot(iface, i, &refs, &self.shared[i], now))
            .collect()
    }
}

type Labels = Vec<(&'static str, String)>;

fn device(s: &PortSnapshot) -> Labels {
    vec![("device", s.iface.clone())]
}

fn device_prio(s: &PortSnapshot, p: usize) -> Labels {
    vec![("device", s.iface.clone()), ("priority", p.to_string())]
}

/// One histogram per (port, PFC priority) that has sent XOFF or has a headroom in force:
/// `pick` chooses the port's histograms, `range` and `per_unit` as in [`Log2Histogram`].
fn pfc_histograms(
    s: &[PortSnapshot],
    pick: fn(&PortSnapshot) -> &[Log2Snapshot],
    range: std::ops::RangeInclusive<usize>,
    per_unit: f64,
) -> impl Iterator<Item = (Labels, Log2Histogram<'_>)> {
    s.iter().flat_map(move |p| {
        let range = range.clone();
        (0..PRIORITIES)
            .filter(move |&prio| p.xoff_transitions[prio] > 0 || p.headroom_in_force[prio] > 0)
            .map(move |prio| {
                (
                    device_prio(p, prio),
                    Log2Histogram {
                        snap: &pick(p)[prio],
                        range: range.clone(),
                        per_unit,
                    },
                )
            })
    })
}

/// Encodes one metric family from `(labels, value)` series.
fn family<M: EncodeMetric>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    kind: MetricType,
    series: impl IntoIterator<Item = (Labels, M)>,
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, unit.as_ref(), kind)?;
    for (labels, value) in series {
        value.encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// One counter series per `(value, count)`: `labels` plus `key="value"`.
fn split<const N: usize>(
    labels: &Labels,
    key: &'static str,
    counts: [(&str, u64); N],
) -> [(Labels, ConstCounter); N] {
    counts.map(|(value, n)| {
        let mut l = labels.clone();
        l.push((key, value.to_string()));
        (l, ConstCounter::new(n))
    })
}

fn per_port<'a>(
    snaps: &'a [PortSnapshot],
    f: fn(&PortSnapshot) -> u64,
) -> impl Iterator<Item = (Labels, ConstCounter)> + 'a {
    snaps
        .iter()
        .map(move |s| (device(s), ConstCounter::new(f(s))))
}

fn per_prio<'a>(
    snaps: &'a [PortSnapshot],
    f: fn(&PortSnapshot) -> &[u64; PRIORITIES],
) -> impl Iterator<Item = (Labels, u64)> + 'a {
    snaps
        .iter()
        .flat_map(move |s| (0..PRIORITIES).map(move |p| (device_prio(s, p), f(s)[p])))
}

/// [`per_prio`] for the (port, priority) pairs where `when` is non-zero only.
fn per_prio_where<'a>(
    snaps: &'a [PortSnapshot],
    when: fn(&PortSnapshot) -> &[u64; PRIORITIES],
    f: fn(&PortSnapshot) -> &[u64; PRIORITIES],
) -> impl Iterator<Item = (Labels, u64)> + 'a {
    snaps.iter().flat_map(move |s| {
        (0..PRIORITIES)
            .filter(move |&p| when(s)[p] > 0)
            .map(move |p| (device_prio(s, p), f(s)[p]))
    })
}

impl Collector for DaemonCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        use MetricType::{Counter, Gauge};
        let snaps = self.snapshots();
        let live = self.live.get();
        let s = &snaps;
        family(
            &mut enc,
            "build_info",
            "Build of the running daemon (value is always 1).",
            None,
            Gauge,
            [(
                vec![("version", env!("CARGO_PKG_VERSION").to_string())],
                ConstGauge::new(1i64),
            )],
        )?;
        family(
            &mut enc,
            "link_up",
            "1 while the port's link is operational (carrier watch), else 0.",
            None,
            Gauge,
            s.iter()
                .zip(&self.shared)
                .map(|(p, sh)| (device(p), ConstGauge::new(i64::from(sh.link_up())))),
        )?;
        let bytes = || Some(Unit::Bytes);
        family(
            &mut enc,
            "rx_frames",
            "Frames received.",
            None,
            Counter,
            per_port(s, |p| p.rx_frames),
        )?;
        family(
            &mut enc,
            "rx",
            "Bytes received.",
            bytes(),
            Counter,
            per_port(s, |p| p.rx_bytes),
        )?;
        family(
            &mut enc,
            "tx_frames",
            "Frames transmitted (data and control).",
            None,
            Counter,
            per_port(s, |p| p.tx_frames),
        )?;
        family(
            &mut enc,
            "tx",
            "Bytes transmitted.",
            bytes(),
            Counter,
            per_port(s, |p| p.tx_bytes),
        )?;
        let counters = |f: fn(&PortSnapshot) -> &[u64; PRIORITIES]| {
            per_prio(s, f).map(|(l, v)| (l, ConstCounter::new(v)))
        };
        family(
            &mut enc,
            "pfc_rx_frames",
            "PFC frames received with this priority enabled.",
            None,
            Counter,
            counters(|p| &p.pfc_rx),
        )?;
        family(
            &mut enc,
            "pfc_tx_frames",
            "PFC frames sent with this priority enabled (XOFF, refresh or XON).",
            None,
            Counter,
            counters(|p| &p.pfc_tx),
        )?;
        family(
            &mut enc,
            "stall_pfc_tx_frames",
            "PFC frames the stall guard sent for a stalled worker with this priority enabled \
             (also in lossless_pfc_tx_frames_total).",
            None,
            Counter,
            counters(|p| &p.stall_pfc_tx),
        )?;
        family(
            &mut enc,
            "stall_sfc_messages_tx",
            "SFC messages the stall guard sent for a stalled worker to the sources of this \
             SFC-only priority behind the port (also in lossless_sfc_messages_tx_total).",
            None,
            Counter,
            counters(|p| &p.stall_sfcm_tx),
        )?;
        family(
            &mut enc,
            "worker_stalls",
            "Stalls the stall guard met on the port: a worker that made no loop turn for \
             daemon.stall_guard while frames waited for it and more arrived.",
            None,
            Counter,
            per_port(s, |p| p.stalls),
        )?;
        family(
            &mut enc,
            "stall_guard_wait",
            "How long the stall guard lets frames wait for a worker on the port before it calls \
             a stall: daemon.stall_guard, or longer where the PFC headroom holds more than every \
             term claims, up to 2 ms and to [headroom] xoff_time where set (0: no guard watches \
             the port).",
            Some(Unit::Seconds),
            MetricType::Gauge,
            s.iter().map(|p| {
                (
                    device(p),
                    ConstGauge::new(p.stall_guard_wait_ns as f64 / 1e9),
                )
            }),
        )?;
        family(
            &mut enc,
            "pause_rx_frames",
            "802.3x PAUSE frames received.",
            None,
            Counter,
            per_port(s, |p| p.pause_rx),
        )?;
        family(
            &mut enc,
            "rx_data_frames",
            "Data frames received on this port per priority (control frames excluded).",
            None,
            Counter,
            counters(|p| &p.rx_data_frames),
        )?;
        family(
            &mut enc,
            "rx_data",
            "Bytes of data frames received on this port per priority.",
            bytes(),
            Counter,
            counters(|p| &p.rx_data_bytes),
        )?;
        family(
            &mut enc,
            "tx_data_frames",
            "Data frames sent on this port per priority.",
            None,
            Counter,
            counters(|p| &p.tx_data_frames),
        )?;
        family(
            &mut enc,
            "tx_data",
            "Bytes of data frames sent on this port per priority.",
            bytes(),
            Counter,
            counters(|p| &p.tx_data_bytes),
        )?;
        family(
            &mut enc,
            "data_drops",
            "Data frames that arrived on this port and were dropped, per priority, whatever the \
             reason (lossless_drops_total has the reasons).",
            None,
            Counter,
            counters(|p| &p.data_drops),
        )?;
        family(
            &mut enc,
            "xoff_held",
            "Time this ingress port held the priority paused upstream (XOFF in force), like \
             mlx5's tx_prioN_pause_duration.",
            Some(Unit::Seconds),
            Counter,
            per_prio(s, |p| &p.xoff_held_ns).map(|(l, ns)| (l, ConstCounter::new(ns as f64 / 1e9))),
        )?;
        family(
            &mut enc,
            "xoff_transitions",
            "XON to XOFF transitions of this ingress port and priority.",
            None,
            Counter,
            counters(|p| &p.xoff_transitions),
        )?;
        family(
            &mut enc,
            "paused",
            "Time this egress port and priority spent paused by PFC/PAUSE.",
            Some(Unit::Seconds),
            Counter,
            per_prio(s, |p| &p.paused_ns).map(|(l, ns)| (l, ConstCounter::new(ns as f64 / 1e9))),
        )?;
        let gauges = |f: fn(&PortSnapshot) -> &[u64; PRIORITIES]| {
            per_prio(s, f).map(|(l, v)| (l, ConstGauge::new(v as i64)))
        };
        family(
            &mut enc,
            "sfc_messages_tx",
            "SFC messages sent on this port to sources behind it (the stall guard's included).",
            None,
            Counter,
            counters(|p| &p.sfcm_tx),
        )?;
        family(
            &mut enc,
            "sfc_messages_rx",
            "SFC messages received on this port and admitted by the sender policy (for the \
             daemon or in transit).",
            None,
            Counter,
            counters(|p| &p.sfcm_rx),
        )?;
        family(
            &mut enc,
            "sfc_messages_forwarded",
            "SFC messages received on this port addressed to another host, passed on out of \
             the other port (obeyed too where the priority is lossless here).",
            None,
            Counter,
            counters(|p| &p.sfcm_forwarded),
        )?;
        family(
            &mut enc,
            "sfc_paused",
            "Time this egress port and priority spent paused by SFC.",
            Some(Unit::Seconds),
            Counter,
            per_prio(s, |p| &p.sfc_paused_ns)
                .map(|(l, ns)| (l, ConstCounter::new(ns as f64 / 1e9))),
        )?;
        family(
            &mut enc,
            "credit_available",
            "Credit this egress port may still send on the priority (credit priorities).",
            bytes(),
            Gauge,
            gauges(|p| &p.credit_available),
        )?;
        family(
            &mut enc,
            "credit_lane_active",
            "1 while the priority's credit lane on this port runs (handshake complete).",
            None,
            Gauge,
            gauges(|p| &p.credit_active),
        )?;
        family(
            &mut enc,
            "credit_updates_tx",
            "Credit-update entries sent for the priority on this port.",
            None,
            Counter,
            counters(|p| &p.credit_updates_tx),
        )?;
        family(
            &mut enc,
            "credit_updates_rx",
            "Credit-update entries received for the priority on this port.",
            None,
            Counter,
            counters(|p| &p.credit_updates_rx),
        )?;
        family(
            &mut enc,
            "credit_resyncs",
            "Resyncs that repaired this port's count of received blocks (data frames lost on the link).",
            None,
            Counter,
            counters(|p| &p.credit_resyncs),
        )?;
        family(
            &mut enc,
            "credit_reinits",
            "Re-initialisations of the priority's credit lane (update timeout, overrun, peer restart, link flap).",
            None,
            Counter,
            counters(|p| &p.credit_reinits),
        )?;
        family(
            &mut enc,
            "pfc_watchdog_storms",
            "PFC storms the watchdog detected on this egress port and priority.",
            None,
            Counter,
            counters(|p| &p.watchdog_storms),
        )?;
        family(
            &mut enc,
            "pfc_watchdog_stormed",
            "1 while the watchdog holds this egress port and priority stormed.",
            None,
            Gauge,
            gauges(|p| &p.watchdog_stormed),
        )?;
        family(
            &mut enc,
            "queue_depth",
            "Bytes queued for egress now.",
            bytes(),
            Gauge,
            gauges(|p| &p.queue_bytes),
        )?;
        family(
            &mut enc,
            "queue_peak",
            "Highest bytes queued for egress since start.",
            bytes(),
            Gauge,
            gauges(|p| &p.queue_peak_bytes),
        )?;
        family(
            &mut enc,
            "drops",
            "Frames dropped by the daemon, by reason.",
            None,
            Counter,
            s.iter().flat_map(|p| {
                p.drops.iter().map(move |(reason, &n)| {
                    let mut l = device(p);
                    l.push(("reason", reason.clone()));
                    (l, ConstCounter::new(n))
                })
            }),
        )?;
        family(
            &mut enc,
            "rx_backlog",
            "Bytes the XDP program steered to the daemon that still wait in the RX ring; \
             they count towards PFC and SFC congestion like queued bytes (0 on a port with no \
             lossless priority, which the program does not account).",
            bytes(),
            Gauge,
            gauges(|p| &p.rx_backlog_bytes),
        )?;
        let now = now_ns();
        let shared = || s.iter().zip(&self.shared);
        family(
            &mut enc,
            "ingress",
            "Bytes that arrived on this port and are queued for egress now (charged to it as \
             ingress); PFC compares this plus rx_backlog_bytes with the port's thresholds.",
            bytes(),
            Gauge,
            shared().flat_map(|(p, sh)| {
                (0..PRIORITIES).map(move |prio| {
                    (
                        device_prio(p, prio),
                        ConstGauge::new(sh.occupancy(prio) as i64),
                    )
                })
            }),
        )?;
        family(
            &mut enc,
            "paused",
            "1 while this egress port and priority is paused by a received PFC/PAUSE or SFC \
             message, else 0.",
            None,
            Gauge,
            shared().flat_map(move |(p, sh)| {
                let mask = sh.paused(now).0;
                (0..PRIORITIES).map(move |prio| {
                    (
                        device_prio(p, prio),
                        ConstGauge::new(i64::from(mask >> prio & 1)),
                    )
                })
            }),
        )?;
        family(
            &mut enc,
            "rx_backlog_peak_frames",
            "Most frames seen waiting in one RX ring of the port since start.",
            None,
            Gauge,
            s.iter()
                .map(|p| (device(p), ConstGauge::new(p.rx_backlog_frames_peak as i64))),
        )?;
        family(
            &mut enc,
            "rx_lag_peak",
            "The longest a frame waited between the XDP hook and the worker since start (the \
             largest value lossless_rx_lag_seconds took, exact).",
            Some(Unit::Seconds),
            Gauge,
            s.iter()
                .map(|p| (device(p), ConstGauge::new(p.rx_lag_peak_ns as f64 / 1e9))),
        )?;
        family(
            &mut enc,
            "fill_ring_target_frames",
            "Receive buffers each socket of the port keeps in its fill ring: deep (8192) where a \
             lossless priority is configured, its headroom in buffers; lean (2048) where none is; \
             at most a quarter of the frame pool (0: no fill ring).",
            None,
            Gauge,
            s.iter()
                .map(|p| (device(p), ConstGauge::new(p.fill_target as i64))),
        )?;
        family(
            &mut enc,
            "zero_copy_sockets",
            "The port's AF_XDP sockets (one per worker) bound in zero-copy mode, where the NIC \
             moves frames in and out of the frame pool itself; 0 in copy mode (veth, drivers \
             without AF_XDP zero-copy, AF_PACKET).",
            None,
            Gauge,
            s.iter()
                .map(|p| (device(p), ConstGauge::new(p.zero_copy_sockets as i64))),
        )?;
        family(
            &mut enc,
            "fill_ring_starved",
            "Times the port's fill ring ran short of receive buffers, which pauses its PFC \
             priorities upstream before the kernel has to drop.",
            None,
            Counter,
            per_port(s, |p| p.fill_starved_events),
        )?;
        family(
            &mut enc,
            "rx_backlog_drops",
            "Frames of lossy priorities the XDP program dropped because the RX backlog was \
             deep (they would have taken receive buffers the lossless priorities need).",
            None,
            Counter,
            counters(|p| &p.rx_backlog_drops),
        )?;
        family(
            &mut enc,
            "oversize_drops",
            "Frames longer than the ingress port's maximum frame (mtu + 18 bytes, at most what \
             the backend can receive) dropped on arrival, by priority; their sum is \
             lossless_drops_total{reason=\"oversize\"}.",
            None,
            Counter,
            counters(|p| &p.oversize),
        )?;
        family(
            &mut enc,
            "headroom_borrowed_frames",
            "Frames of a lossless priority that found its buffer on this ingress port full and \
             were kept in a spare frame of the frame pool rather than dropped ([headroom] \
             borrow): what arrived beyond XOFF plus the headroom.",
            None,
            Counter,
            counters(|p| &p.headroom_borrowed),
        )?;
        family(
            &mut enc,
            "headroom_borrowed_peak",
            "The most bytes such frames held the priority beyond its buffer since start: what \
             the buffer would have needed to hold them.",
            bytes(),
            Gauge,
            gauges(|p| &p.headroom_borrowed_peak),
        )?;
        family(
            &mut enc,
            "pfc_overshoot",
            "Bytes of the priority that arrived after each XOFF this ingress port sent, until \
             the pause took effect: what the headroom had to hold.",
            bytes(),
            MetricType::Histogram,
            pfc_histograms(s, |p| &p.overshoot, 6..=27, 1.0),
        )?;
        family(
            &mut enc,
            "pfc_reaction",
            "Time from each XOFF this ingress port sent to the last frame of the priority \
             arriving before the pause took effect: the wire round trip plus the peer's \
             reaction.",
            Some(Unit::Seconds),
            MetricType::Histogram,
            pfc_histograms(s, |p| &p.pfc_reaction_ns, 10..=31, 1e9),
        )?;
        family(
            &mut enc,
            "rx_lag",
            "The daemon's own lag per frame: worker time minus the XDP RX stamp (one data \
             frame in 64 on a port with no lossless priority).",
            Some(Unit::Seconds),
            MetricType::Histogram,
            s.iter().map(|p| {
                (
                    device(p),
                    Log2Histogram {
                        snap: &p.rx_lag_ns,
                        range: 10..=31,
                        per_unit: 1e9,
                    },
                )
            }),
        )?;
        family(
            &mut enc,
            "headroom_term",
            "Terms of the PFC headroom in force: the floor, link-up's model, the observed \
             overshoot times the margin plus the notice term (decayed), the notice term alone \
             (what arrives while a crossing of XOFF may go unnoticed), and the value in force \
             (the maximum of floor, measured and observed).",
            bytes(),
            Gauge,
            s.iter().flat_map(|p| {
                (0..PRIORITIES)
                    .filter(move |&prio| p.headroom_in_force[prio] > 0)
                    .flat_map(move |prio| {
                        [
                            ("floor", p.headroom_floor[prio]),
                            ("measured", p.headroom_model[prio]),
                            ("observed", p.headroom_evidence[prio]),
                            ("notice", p.headroom_notice[prio]),
                            ("in_force", p.headroom_in_force[prio]),
                        ]
                        .into_iter()
                        .map(move |(term, v)| {
                            let mut l = device_prio(p, prio);
                            l.push(("term", term.to_string()));
                            (l, ConstGauge::new(v as i64))
                        })
                    })
            }),
        )?;
        family(
            &mut enc,
            "pfc_drain_rate",
            "Measured rate at which the PFC buffer of this ingress port and priority drains \
             while it holds a backlog ([headroom] xoff_time caps XOFF at this rate times \
             xoff_time; absent until measured).",
            Some(Unit::Other("bytes_per_second".into())),
            Gauge,
            per_prio_where(s, |p| &p.pfc_drain_rate, |p| &p.pfc_drain_rate)
                .map(|(l, v)| (l, ConstGauge::new(v as i64))),
        )?;
        family(
            &mut enc,
            "headroom_changes",
            "Changes of the PFC headroom in force since the start (each is also logged, with \
             its terms, as \"PFC headroom changed\").",
            None,
            Counter,
            per_prio_where(s, |p| &p.headroom_in_force, |p| &p.headroom_changes)
                .map(|(l, v)| (l, ConstCounter::new(v))),
        )?;
        // Monotonic stamps become wall-clock ones against one pair of readings.
        let (mono_now, wall_now) = (
            now_ns(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
        family(
            &mut enc,
            "headroom_last_change_timestamp",
            "When the PFC headroom in force last changed (Unix time; absent while it never \
             changed).",
            Some(Unit::Seconds),
            Gauge,
            s.iter().flat_map(move |p| {
                (0..PRIORITIES)
                    .filter(move |&prio| p.headroom_changed_ns[prio] > 0)
                    .map(move |prio| {
                        let ago = mono_now.saturating_sub(p.headroom_changed_ns[prio]) as f64 / 1e9;
                        (device_prio(p, prio), ConstGauge::new(wall_now - ago))
                    })
            }),
        )?;
        family(
            &mut enc,
            "kernel_drops",
            "Frames the kernel dropped at the AF_XDP socket before the daemon saw them.",
            None,
            Counter,
            s.iter().flat_map(|p| {
                p.kernel_drops
                    .by_reason()
                    .into_iter()
                    .map(move |(reason, v)| {
                        let mut l = device(p);
                        l.push(("reason", reason.to_string()));
                        (l, ConstCounter::new(v))
                    })
            }),
        )?;
        let live = &live;
        // In force: the adaptive headroom the leader worker published, else the plan.
        let plan = |f: fn(&PfcPlan) -> u64| {
            s.iter().enumerate().flat_map(move |(i, port)| {
                (0..PRIORITIES).filter_map(move |p| {
                    port.pfc_in_force(p, live.plan_for(i, p).0.pfc)
                        .map(|v| (device_prio(port, p), ConstGauge::new(f(&v) as i64)))
                })
            })
        };
        family(
            &mut enc,
            "xoff_threshold",
            "PFC XOFF threshold per ingress port and lossless priority.",
            bytes(),
            Gauge,
            plan(|f| f.xoff),
        )?;
        family(
            &mut enc,
            "xon_threshold",
            "PFC XON threshold per ingress port and lossless priority.",
            bytes(),
            Gauge,
            plan(|f| f.xon),
        )?;
        family(
            &mut enc,
            "headroom",
            "PFC headroom beyond XOFF per ingress port and lossless priority.",
            bytes(),
            Gauge,
            plan(|f| f.headroom),
        )?;
        family(
            &mut enc,
            "priority_mode_info",
            "1 with what each priority of the ingress port does with its buffer: mode=\"lossy\", \
             \"pfc\", \"sfc\", \"pfc+sfc\" or \"credit\" (every mode but lossy is lossless).",
            None,
            Gauge,
            s.iter().enumerate().flat_map(move |(i, port)| {
                (0..PRIORITIES).map(move |p| {
                    let mut l = device_prio(port, p);
                    l.push(("mode", live.plan_for(i, p).0.mode().to_string()));
                    (l, ConstGauge::new(1i64))
                })
            }),
        )?;
        family(
            &mut enc,
            "threshold_source",
            "1 for where the PFC thresholds of this ingress port and lossless priority come \
             from: source=\"config\", or \"measured\" at link-up.",
            None,
            Gauge,
            s.iter().enumerate().flat_map(move |(i, port)| {
                (0..PRIORITIES).filter_map(move |p| {
                    let (prio_plan, source) = live.plan_for(i, p);
                    prio_plan.pfc.map(|_| {
                        let mut l = device_prio(port, p);
                        l.push(("source", source.to_string()));
                        (l, ConstGauge::new(1i64))
                    })
                })
            }),
        )?;
        // The programs' own counters: a map lookup per counter and CPU, once per scrape.
        let xdp: Vec<(Labels, XdpCounters)> = s
            .iter()
            .zip(&self.xdp)
            .map(|(port, prog)| (device(port), prog.counters()))
            .collect();
        family(
            &mut enc,
            "time_stamping_info",
            "1 with where the port's receive and transmit times are taken (hardware, kernel, xdp \
             or user), like ptp4l's time_stamping: the link measurement's accuracy depends on it. \
             rx says hardware only while most frames carry the NIC's stamp.",
            None,
            Gauge,
            s.iter()
                .zip(&self.time_stamping)
                .enumerate()
                .map(|(i, (port, t))| {
                    let t = xdp.get(i).map_or(*t, |(_, c)| t.as_seen(c));
                    let mut l = device(port);
                    l.push(("rx", t.rx.name().to_string()));
                    l.push(("tx", t.tx.name().to_string()));
                    (l, ConstGauge::new(1i64))
                }),
        )?;
        family(
            &mut enc,
            "xdp_frames",
            "Frames the XDP program handled on this port, by outcome: redirected to the \
             daemon's socket, passed to the kernel (not the daemon's), or redirect_failed (no \
             socket on the queue; the kernel got the frame).",
            None,
            Counter,
            xdp.iter().flat_map(|(l, c)| {
                split(
                    l,
                    "outcome",
                    [
                        ("redirected", c.redirected),
                        ("passed", c.passed),
                        ("redirect_failed", c.redirect_failed),
                    ],
                )
            }),
        )?;
        family(
            &mut enc,
            "xdp_rx_metadata",
            "What the device-bound XDP program got from the driver's RX metadata kfuncs, by \
             result: hw_stamp (a hardware RX stamp), stamp_error (the kfunc failed), stamp_zero \
             (it gave 0: veth, an skb without one), vlan_tag (a tag the driver held as \
             metadata); these stay 0 where the program is not device-bound. And, bound or not, \
             no_meta_area: frames redirected without room for the ingress stamps (a driver \
             that gives XDP no metadata area), which the RX backlog does not count.",
            None,
            Counter,
            xdp.iter().flat_map(|(l, c)| {
                split(
                    l,
                    "result",
                    [
                        ("hw_stamp", c.hw_stamps),
                        ("stamp_error", c.stamp_errors),
                        ("stamp_zero", c.stamp_zero),
                        ("vlan_tag", c.meta_vlan),
                        ("no_meta_area", c.no_meta),
                    ],
                )
            }),
        )?;
        family(
            &mut enc,
            "lldp_neighbor_info",
            "1 with the link partner LLDP announced on this port (\"chassis / port\"), once \
             link-up has heard it.",
            None,
            Gauge,
            s.iter().zip(&self.links).filter_map(|(port, link)| {
                link.peer().map(|peer| {
                    let mut l = device(port);
                    l.push(("neighbor", peer));
                    (l, ConstGauge::new(1i64))
                })
            }),
        )?;
        family(
            &mut enc,
            "linkup_events",
            "What link-up counted on the port, by event: PTP and LLDP frames received \
             (ptp_rx, lldp_rx), those that did not parse (malformed), frames sent and not sent \
             (tx, tx_dropped), peer-delay requests answered and refused (requests_answered; \
             requests_refused: less than 1 ms after the last answered), answers sent without a \
             kernel TX stamp in time (tx_stamp_missed), LLDP neighbours refused for a full table \
             (lldp_table_full).",
            None,
            Counter,
            s.iter().zip(&self.links).flat_map(|(port, link)| {
                LINK_EVENTS
                    .iter()
                    .zip(link.events())
                    .map(move |(event, n)| {
                        let mut l = device(port);
                        l.push(("event", event.to_string()));
                        (l, ConstCounter::new(n))
                    })
            }),
        )?;
        family(
            &mut enc,
            "link_round_trip",
            "Round trip of the link measured at link-up (IEEE 1588 peer delay).",
            Some(Unit::Seconds),
            Gauge,
            s.iter().enumerate().filter_map(|(i, port)| {
                live.rtt_ns
                    .get(i)
                    .copied()
                    .flatten()
                    .map(|ns| (device(port), ConstGauge::new(ns as f64 / 1e9)))
            }),
        )?;
        family(
            &mut enc,
            "headroom_model",
            "Terms of link-up's headroom model per ingress port: the wire round trip, the \
             daemon's own lag and the peer's response (each times the speed), and the frames \
             (2 maximum frames, the PFC frame); their sum is the measured headroom term.",
            bytes(),
            Gauge,
            s.iter().enumerate().flat_map(|(i, port)| {
                live.model
                    .get(i)
                    .copied()
                    .flatten()
                    .into_iter()
                    .flat_map(move |m| {
                        [
                            ("wire", m.split.wire),
                            ("own_lag", m.split.own_lag),
                            ("peer", m.split.peer),
                            ("frames", m.split.frames),
                        ]
                        .map(|(term, v)| {
                            let mut l = device(port);
                            l.push(("term", term.to_string()));
                            (l, ConstGauge::new(v as i64))
                        })
                    })
            }),
        )?;
        family(
            &mut enc,
            "worker_loops",
            "Loop turns of each worker (stalls show as a flat line).",
            None,
            Counter,
            self.workers.iter().enumerate().map(|(w, st)| {
                (
                    vec![("worker", w.to_string())],
                    ConstCounter::new(st.heartbeat.get()),
                )
            }),
        )?;
        let threads: Vec<WorkerSched> = self
            .worker_tids
            .iter()
            .enumerate()
            .map(|(w, &tid)| WorkerSched::read(w, tid))
            .collect();
        let worker = |t: &WorkerSched| vec![("worker", t.worker.to_string())];
        family(
            &mut enc,
            "worker_realtime",
            "1 while the worker thread runs a real-time policy (SCHED_FIFO or SCHED_RR), else 0.",
            None,
            Gauge,
            threads
                .iter()
                .map(|t| (worker(t), ConstGauge::new(i64::from(t.realtime)))),
        )?;
        family(
            &mut enc,
            "worker_realtime_priority",
            "Real-time priority of the worker thread (0 under a normal policy).",
            None,
            Gauge,
            threads
                .iter()
                .map(|t| (worker(t), ConstGauge::new(i64::from(t.priority)))),
        )?;
        let reload = self.reloads.last();
        ConstGauge::new(i64::from(reload.ok)).encode(enc.encode_descriptor(
            "reload_success",
            "1 if the last configuration load (start or SIGHUP reload) succeeded, 0 if the last \
             reload was refused (the previous configuration still runs).",
            None,
            Gauge,
        )?)?;
        ConstGauge::new(reload.restart_pending.len() as i64).encode(enc.encode_descriptor(
            "restart_pending_settings",
            "Settings the configuration file changes that take effect only at a restart (the \
             running values stay until then; status names them).",
            None,
            Gauge,
        )?)?;
        ConstGauge::new(reload.at_unix_s).encode(enc.encode_descriptor(
            "reload_timestamp",
            "When the configuration was last loaded or a reload refused, Unix time.",
            Some(&Unit::Seconds),
            Gauge,
        )?)?;
        Ok(())
    }
}

/// A registry with the daemon's collector under the `lossless_` prefix.
pub fn registry(collector: DaemonCollector) -> Registry {
    let mut r = Registry::with_prefix("lossless");
    r.register_collector(Box::new(collector));
    r
}

/// The exposition text of `registry`.
pub fn render(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)
        .expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::http::to_prometheus_text;
    use super::*;
    use crate::dataplane::{port::Stamping, stats::DropReason};
    use crate::{dataplane::settings::LiveSettings, fc::plan::PrioPlan};

    #[test]
    fn exposition_sums_shards_and_names_series() {
        let a = Arc::new(WorkerStats::new(2));
        let b = Arc::new(WorkerStats::new(2));
        a.ports[0].rx_frames.add(3);
        b.ports[0].rx_frames.add(4);
        b.ports[1].pfc_tx[3].add(2);
        a.ports[0].drop(DropReason::TailDrop);
        b.ports[1].drop_oversize(4, 2);
        let mut prios = [PrioPlan::lossy(1); PRIORITIES];
        prios[3] = PrioPlan::pfc(100, 50, 300);
        let live = Arc::new(SettingsCell::new(LiveSettings {
            prios,
            watchdog: None,
            pause_quanta: vec![1, 1],
            sfc: Default::default(),
            measured: vec![None; 2],
            rtt_ns: vec![None; 2],
            model: vec![None; 2],
            headroom: Default::default(),
        }));
        let shared: Vec<Arc<SharedPort>> = (0..2).map(|_| Arc::default()).collect();
        assert!(shared[0].try_charge(3, 1500, u64::MAX));
        // Paused by PFC from 0 to 1.5 s (on CLOCK_MONOTONIC, long ago), and by SFC from now on.
        let mut pfc = [None; PRIORITIES];
        pfc[3] = Some(1_500_000_000);
        shared[1].set_pause(0, &pfc);
        shared[1].sfc_pause(now_ns(), 3, u64::MAX);
        let link = Arc::new(LinkShared::default());
        link.publish_events(&[5, 2, 0, 7, 0, 4, 3, 0, 0]);
        let r = registry(DaemonCollector {
            ifaces: vec!["a0".into(), "b0".into()],
            live,
            workers: vec![a, b],
            worker_tids: vec![crate::dataplane::sched::this_thread_id()],
            reloads: Arc::new(ReloadLog::started()),
            shared: shared.clone(),
            links: vec![link, Arc::default()],
            time_stamping: vec![
                TimeStamping {
                    rx: Stamping::Xdp,
                    tx: Stamping::User,
                };
                2
            ],
            xdp: Vec::new(),
        });
        let text = render(&r);
        for line in [
            "lossless_rx_frames_total{device=\"a0\"} 7",
            "lossless_pfc_tx_frames_total{device=\"b0\",priority=\"3\"} 2",
            "lossless_paused_seconds_total{device=\"b0\",priority=\"3\"} 1.5",
            "lossless_drops_total{device=\"a0\",reason=\"tail_drop\"} 1",
            "lossless_drops_total{device=\"b0\",reason=\"oversize\"} 2",
            "lossless_oversize_drops_total{device=\"b0\",priority=\"4\"} 2",
            "lossless_xoff_threshold_bytes{device=\"a0\",priority=\"3\"} 100",
            "lossless_headroom_bytes{device=\"b0\",priority=\"3\"} 300",
            // The test's own thread stands in for worker 0: normal scheduling.
            "lossless_worker_realtime{worker=\"0\"} 0",
            "lossless_worker_realtime_priority{worker=\"0\"} 0",
            "lossless_reload_success 1",
            "lossless_time_stamping_info{device=\"b0\",rx=\"xdp\",tx=\"user\"} 1",
            "lossless_threshold_source{device=\"a0\",priority=\"3\",source=\"config\"} 1",
            "lossless_priority_mode_info{device=\"a0\",priority=\"3\",mode=\"pfc\"} 1",
            "lossless_priority_mode_info{device=\"a0\",priority=\"0\",mode=\"lossy\"} 1",
            "lossless_ingress_bytes{device=\"a0\",priority=\"3\"} 1500",
            "lossless_ingress_bytes{device=\"b0\",priority=\"3\"} 0",
            "lossless_paused{device=\"b0\",priority=\"3\"} 1",
            "lossless_paused{device=\"a0\",priority=\"3\"} 0",
            "lossless_reload_timestamp_seconds 1",
            "lossless_build_info{version=",
            "lossless_linkup_events_total{device=\"a0\",event=\"requests_refused\"} 3",
            "lossless_linkup_events_total{device=\"b0\",event=\"ptp_rx\"} 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("lossless_xoff_threshold_bytes{device=\"a0\",priority=\"0\"}"));
    }

    /// A histogram's buckets are cumulative once, end at `+Inf` with `_count`, and put each
    /// value in the first bucket whose bound holds it (they were summed twice: 5 us lags
    /// read as seconds in `histogram_quantile`).
    #[test]
    fn histogram_buckets_count_each_value_once() {
        let stats = Arc::new(WorkerStats::new(1));
        for ns in [5_000, 5_000, 5_000, 300] {
            stats.ports[0].rx_lag_ns.record(ns);
        }
        let text = exposition_of(vec![stats]);
        let buckets: Vec<(&str, u64)> = text
            .lines()
            .filter_map(|l| l.strip_prefix("lossless_rx_lag_seconds_bucket{"))
            .map(|l| {
                let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
                (le, l.rsplit(' ').next().unwrap().parse().unwrap())
            })
            .collect();
        let at = |bound: f64| {
            buckets
                .iter()
                .find(|(le, _)| le.parse::<f64>().is_ok_and(|v| (v - bound).abs() < 1e-12))
                .unwrap_or_else(|| panic!("no bucket {bound} in {buckets:?}"))
                .1
        };
        // 300 ns lies below the first bound (1023 ns): counted there.
        assert_eq!(at(1023e-9), 1, "{buckets:?}");
        assert_eq!(at(4095e-9), 1, "{buckets:?}");
        assert_eq!(at(8191e-9), 4, "{buckets:?}");
        assert_eq!(buckets.last(), Some(&("+Inf", 4)), "{buckets:?}");
        assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{buckets:?}");
        assert!(text.contains("lossless_rx_lag_seconds_count{device=\"x\"} 4"));
    }

    /// The classic-format exposition of one port `x` with every priority lossless, counted
    /// by `workers`.
    fn exposition_of(workers: Vec<Arc<WorkerStats>>) -> String {
        let live = Arc::new(SettingsCell::new(LiveSettings {
            prios: [PrioPlan::pfc(1, 0, 1); PRIORITIES],
            watchdog: None,
            pause_quanta: vec![1],
            sfc: Default::default(),
            measured: vec![None; 1],
            rtt_ns: vec![None; 1],
            model: vec![None; 1],
            headroom: Default::default(),
        }));
        to_prometheus_text(&render(&registry(DaemonCollector {
            ifaces: vec!["x".into()],
            live,
            workers,
            worker_tids: vec![crate::dataplane::sched::this_thread_id()],
            reloads: Arc::new(ReloadLog::started()),
            shared: vec![Arc::new(SharedPort::default())],
            links: Vec::new(),
            time_stamping: vec![TimeStamping {
                rx: Stamping::User,
                tx: Stamping::User,
            }],
            xdp: Vec::new(),
        })))
    }

    /// The classic-format exposition of a one-port daemon with every priority lossless.
    fn sample_exposition() -> String {
        exposition_of(vec![Arc::new(WorkerStats::new(1))])
    }

    /// Every `lossless_` series named in `text` (a dashboard, alert rules) is exposed;
    /// returns how many names were checked.
    fn names_only_exposed_series(what: &str, text: &str) -> usize {
        let exposition = sample_exposition();
        // Sample names, and the families (some have no series in this sample).
        let exposed: std::collections::HashSet<&str> = exposition
            .lines()
            .filter_map(|l| match l.strip_prefix("# TYPE ") {
                Some(family) => family.split(' ').next(),
                None => (!l.starts_with('#')).then(|| l.split(['{', ' ']).next())?,
            })
            .collect();
        let mut checked = 0;
        for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("lossless_") {
                // A histogram's series are its family name plus a suffix.
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| word.strip_suffix(s))
                    .unwrap_or(word);
                assert!(
                    exposed.contains(word) || exposed.contains(family),
                    "{what} names unknown series {word}"
                );
                checked += 1;
            }
        }
        checked
    }

    /// The README's metrics reference names every family the daemon exposes, and nothing
    /// else.
    #[test]
    fn readme_metrics_reference_matches_the_exposition() {
        let text = sample_exposition();
        let exposed: std::collections::BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        assert!(exposed.len() > 30 && exposed.contains("lossless_reload_success"));
        let readme = include_str!("../../../README.md");
        let documented: std::collections::BTreeSet<&str> = readme
            .lines()
            .filter(|l| l.starts_with("| `lossless_"))
            .filter_map(|l| l.split('|').nth(1))
            .flat_map(|cell| cell.split('`').filter(|w| w.starts_with("lossless_")))
            .collect();
        let undocumented: Vec<_> = exposed.difference(&documented).collect();
        let stale: Vec<_> = documented.difference(&exposed).collect();
        assert!(
            undocumented.is_empty() && stale.is_empty(),
            "README metrics reference: missing {undocumented:?}, not exposed {stale:?}"
        );
    }

    /// Every series the Grafana dashboard queries exists in the exposition.
    #[test]
    fn grafana_dashboard_queries_exposed_series() {
        let dash: serde_json::Value =
            serde_json::from_str(include_str!("../../../grafana/lossless.json")).unwrap();
        let mut checked = 0;
        for panel in dash["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().unwrap() {
                let expr = target["expr"].as_str().unwrap();
                checked += names_only_exposed_series("the Grafana dashboard", expr);
            }
        }
        assert!(checked > 15, "{checked}");
    }

    /// Every series the alert rules query exists in the exposition (tests/alerts.rs runs
    /// their promtool unit tests).
    #[test]
    fn alert_rules_query_exposed_series() {
        let rules = include_str!("../../../prometheus/lossless.rules.yml");
        let checked = names_only_exposed_series("prometheus/lossless.rules.yml", rules);
        assert!(checked >= 9, "{checked}");
    }
}
