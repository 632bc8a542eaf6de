//! What the cable did, per direction, for people (text) and scripts (JSON).

use std::fmt::Write as _;

use serde::Serialize;

use super::rules::KIND_NAMES;
use crate::{traffic::histogram::LatencySummary, units::format_rate};

/// Frame counts by class.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct ClassCounts {
    /// 802.1Qbb PFC.
    pub pfc: u64,
    /// 802.3x PAUSE (and other MAC control opcodes).
    pub pause: u64,
    /// Credit updates (EtherType 0x88B5).
    pub credit: u64,
    /// SFC messages (EtherType 0x88B5).
    pub sfc: u64,
    /// LLDP.
    pub lldp: u64,
    /// PTP.
    pub ptp: u64,
    /// Everything else.
    pub data: u64,
}

impl From<[u64; KIND_NAMES.len()]> for ClassCounts {
    fn from(c: [u64; KIND_NAMES.len()]) -> Self {
        ClassCounts {
            pfc: c[0],
            pause: c[1],
            credit: c[2],
            sfc: c[3],
            lldp: c[4],
            ptp: c[5],
            data: c[6],
        }
    }
}

impl ClassCounts {
    fn nonzero(&self) -> String {
        let v = [
            self.pfc,
            self.pause,
            self.credit,
            self.sfc,
            self.lldp,
            self.ptp,
            self.data,
        ];
        let parts: Vec<String> = KIND_NAMES
            .iter()
            .zip(v)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// One direction of the cable.
#[derive(Debug, Clone, Serialize)]
pub struct LaneReport {
    /// "a->b" or "b->a".
    pub direction: String,
    /// Interface the frames entered on.
    pub from: String,
    /// Interface they left on.
    pub to: String,
    /// Configured one-way delay, µs.
    pub delay_set_us: f64,
    /// Configured jitter (± uniform), µs.
    pub jitter_set_us: f64,
    /// Configured line rate, bit/s (none = unshaped).
    pub rate_set_bps: Option<u64>,
    /// Loss rule in force.
    pub loss: Option<String>,
    /// Corruption rule in force.
    pub corrupt: Option<String>,
    /// Reorder rule in force.
    pub reorder: Option<String>,
    /// Bytes the FIFO may hold.
    pub fifo_limit_bytes: u64,
    /// Frames the FIFO may hold.
    pub fifo_limit_frames: usize,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames received, by class.
    pub rx_by_class: ClassCounts,
    /// Frames transmitted on the far side.
    pub forwarded_frames: u64,
    /// Bytes transmitted on the far side.
    pub forwarded_bytes: u64,
    /// Frames dropped by the loss rule.
    pub dropped_loss: u64,
    /// Frames dropped by the loss rule, by class.
    pub dropped_loss_by_class: ClassCounts,
    /// Frames dropped because the FIFO was full (a real cable never does this).
    pub dropped_fifo_overflow: u64,
    /// Of `dropped_fifo_overflow`, frames refused because the FIFO held its most frames
    /// (`fifo_limit_frames`, at most 131,072) with bytes to spare: a larger `--fifo-limit`
    /// does not help; larger frames, a lower rate or a shorter delay do.
    pub dropped_fifo_frame_cap: u64,
    /// Frames longer than the cable receives whole, dropped on arrival (by the XDP program
    /// before the socket, or truncated by AF_PACKET); not in `rx_frames`.
    pub dropped_oversize: u64,
    /// Frames the kernel dropped at the cable's own receive socket on the `from` side (its
    /// RX ring full or its fill ring empty: the cable did not keep up; a real cable does not
    /// drop these); not in `rx_frames`.
    pub dropped_at_socket: u64,
    /// Of `forwarded_frames`, those the kernel took for sending on the `to` side and dropped
    /// (no carrier, or the driver refused them): they never reached the link.
    pub tx_refused: u64,
    /// Frames with one bit flipped.
    pub corrupted: u64,
    /// Frames swapped with the frame behind them.
    pub reordered: u64,
    /// Frames still in flight when the cable stopped (released, not sent).
    pub flushed_at_stop: u64,
    /// Peak FIFO occupancy, bytes.
    pub peak_fifo_bytes: u64,
    /// Peak FIFO occupancy, frames.
    pub peak_fifo_frames: u64,
    /// Achieved delay, RX stamp to hand-over to the TX ring.
    pub delay: LatencySummary,
    /// Mean achieved delay, µs (exact; the percentiles are within 0.1 %).
    pub delay_mean_us: f64,
    /// Seconds from the first to the last frame transmitted.
    pub tx_elapsed_s: f64,
    /// Achieved rate over that interval, wire overhead (24 bytes per frame) counted, bit/s.
    pub rate_bps: f64,
}

/// Both directions and the run.
#[derive(Debug, Clone, Serialize)]
pub struct CableReport {
    /// Side A interface.
    pub a: String,
    /// Side B interface.
    pub b: String,
    /// Packet I/O backend used.
    pub backend: &'static str,
    /// Seed of the random rules.
    pub seed: u64,
    /// Seconds the cable ran.
    pub elapsed_s: f64,
    /// a→b then b→a.
    pub directions: Vec<LaneReport>,
    /// Things a tester must know (FIFO overflow above all).
    pub warnings: Vec<String>,
}

/// The report as text.
pub fn text(r: &CableReport) -> String {
    let mut s = format!(
        "cable {} <-> {} ({}), seed {}, ran {:.3} s\n",
        r.a, r.b, r.backend, r.seed, r.elapsed_s
    );
    for d in &r.directions {
        let rate = d
            .rate_set_bps
            .map_or("unshaped".to_string(), |b| format_rate(b as f64));
        let _ = writeln!(
            s,
            "{} ({} -> {}): delay {} us ± {} us, rate {}",
            d.direction, d.from, d.to, d.delay_set_us, d.jitter_set_us, rate
        );
        for (what, rule) in [
            ("loss", &d.loss),
            ("corrupt", &d.corrupt),
            ("reorder", &d.reorder),
        ] {
            if let Some(rule) = rule {
                let _ = writeln!(s, "  {what}: {rule}");
            }
        }
        let _ = writeln!(
            s,
            "  received {} frames ({} bytes): {}",
            d.rx_frames,
            d.rx_bytes,
            d.rx_by_class.nonzero()
        );
        let _ = writeln!(
            s,
            "  forwarded {} frames ({} bytes) at {} over {:.3} s",
            d.forwarded_frames,
            d.forwarded_bytes,
            format_rate(d.rate_bps),
            d.tx_elapsed_s
        );
        let _ = writeln!(
            s,
            "  dropped by loss rule {} ({}), corrupted {}, reordered {}, flushed at stop {}",
            d.dropped_loss,
            d.dropped_loss_by_class.nonzero(),
            d.corrupted,
            d.reordered,
            d.flushed_at_stop
        );
        if d.dropped_at_socket > 0 || d.tx_refused > 0 {
            let _ = writeln!(
                s,
                "  LOST AT THE CABLE'S SOCKET {}, refused by the kernel on send {}",
                d.dropped_at_socket, d.tx_refused
            );
        }
        let _ = writeln!(
            s,
            "  FIFO: limit {} bytes / {} frames, peak {} bytes / {} frames, OVERFLOW DROPS {} ({} at the frame cap)",
            d.fifo_limit_bytes,
            d.fifo_limit_frames,
            d.peak_fifo_bytes,
            d.peak_fifo_frames,
            d.dropped_fifo_overflow,
            d.dropped_fifo_frame_cap
        );
        let l = &d.delay;
        let _ = writeln!(
            s,
            "  delay achieved: mean {:.1} us, min {:.1}, p50 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1} us ({} samples)",
            d.delay_mean_us, l.min_us, l.p50_us, l.p99_us, l.p999_us, l.max_us, l.samples
        );
    }
    for w in &r.warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    s
}
