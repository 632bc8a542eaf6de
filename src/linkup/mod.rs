//! Link-up: the LLDP capability exchange, the IEEE 1588 peer-delay measurement of the link's
//! round trip, and the adaptive PFC headroom and XOFF/XON the measurement implies.
//!
//! - [`lldp`]: the LLDP agent (sans-I/O): our LLDPDU, when to send it, neighbours by TTL;
//! - [`pdelay`]: the peer-delay initiator and responder (sans-I/O);
//! - [`run`]: [`run::LinkAgent`], which drives both over one [`crate::dataplane::port::Port`]
//!   from the caller's loop (the `lossless measure` tool, `gen --link-partner`);
//! - [`worker`]: the same agent as a forwarding worker's [`crate::dataplane::agent::PortAgent`],
//!   exchanging requests and results with the control plane through [`shared::LinkShared`];
//! - this module: [`Measurement`] (samples and a robust estimate) and [`plan_headroom`], a
//!   pure function from a measurement and the link's parameters to headroom and XOFF/XON.
//!
//! **Clock domains.** Our timestamps are CLOCK_MONOTONIC ns: RX times are
//! [`crate::dataplane::port::RxFrame::rx_ns`] (the XDP program's `bpf_ktime_get_ns()` where the
//! AF_XDP backend is used, or the NIC's hardware stamp converted from its PHC's clock where the
//! device-bound program gets one, see [`crate::dataplane::hwstamp`]; else the worker's clock at
//! receive), and TX times are read from the
//! same clock immediately before the [`crate::dataplane::port::Port::send`] call that kicks the
//! frame. The responder puts its monotonic T2 and T3 on the wire as PTP timestamps; a peer
//! such as `ptp4l` puts its own clock (CLOCK_REALTIME with software timestamping) there. Only
//! differences taken on one side are used, T4 − T1 on the initiator's clock and T3 − T2 on the
//! responder's, so neither the epochs nor the offset between the two clocks matter; what
//! remains is the two clocks' rate difference over one exchange (ppm of a millisecond).

pub mod lldp;
pub mod pdelay;
pub mod run;
pub mod shared;
pub mod tx_stamp;
pub mod worker;

use serde::Serialize;

use crate::headroom::{
    adaptive::{self, AdaptiveInput, AdaptiveResult, RoundTrip},
    frame_bit_times, presets, round_up_to_cells,
    thresholds::{self, ThresholdInput},
    Duration, HeadroomError, Quantity, Speed, BIT_TIMES_PER_QUANTUM,
};
use crate::wire::ptp::PortIdentity;
pub use pdelay::Sample;

/// `[linkup]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkupSettings {
    /// Samples per measurement.
    pub samples: u32,
    /// Time between samples, ns.
    pub sample_interval_ns: u64,
    /// Re-measurement period, ns (0 = none).
    pub interval_ns: u64,
    /// Largest frame, octets.
    pub max_frame: u64,
    /// Peer response time beyond the 802.3 allowance, ns (0 = the allowance only).
    pub peer_response_ns: u64,
}

/// Fraction of samples dropped at each end for the trimmed mean.
pub const TRIM_FRACTION: f64 = 0.25;

/// One peer-delay measurement: its samples and their summary. All times in ns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// The samples, in the order taken.
    pub samples: Vec<Sample>,
    /// Pdelay_Req messages sent.
    pub requests: u32,
    /// Requests with no complete answer before the timeout.
    pub lost: u32,
    /// Answers that arrived after their request timed out (ignored).
    pub late: u32,
    /// Complete exchanges rejected because the responder's turnaround was implausible
    /// (negative, longer than the exchange, or longer than the timeout).
    pub rejected: u32,
    /// The responder's port identity (of the first sample).
    pub responder: Option<PortIdentity>,
    /// The smallest round trip X = (T4 − T1) − (T3 − T2).
    pub min_ns: i64,
    /// The largest round trip.
    pub max_ns: i64,
    /// The median round trip.
    pub median_ns: i64,
    /// The mean after dropping [`TRIM_FRACTION`] of the samples at each end.
    pub trimmed_mean_ns: i64,
    /// The estimate used for headroom: the trimmed mean.
    pub estimate_ns: i64,
    /// The spread: the interquartile range (75th minus 25th percentile).
    pub spread_ns: i64,
}

impl Measurement {
    /// Summarises `samples` (at least one).
    pub fn from_samples(
        samples: Vec<Sample>,
        requests: u32,
        lost: u32,
        late: u32,
    ) -> Option<Measurement> {
        let mut x: Vec<i64> = samples.iter().map(|s| s.round_trip_ns).collect();
        x.sort_unstable();
        let n = x.len();
        if n == 0 {
            return None;
        }
        let k = (n as f64 * TRIM_FRACTION).floor() as usize;
        let kept = &x[k..n - k];
        let trimmed = (kept.iter().map(|&v| v as f64).sum::<f64>() / kept.len() as f64).round();
        let rank = |p: f64| x[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        let median = if n % 2 == 1 {
            x[n / 2]
        } else {
            (x[n / 2 - 1] + x[n / 2]) / 2
        };
        Some(Measurement {
            responder: samples.first().map(|s| s.responder),
            samples,
            requests,
            lost,
            late,
            rejected: 0,
            min_ns: x[0],
            max_ns: x[n - 1],
            median_ns: median,
            trimmed_mean_ns: trimmed as i64,
            estimate_ns: trimmed as i64,
            spread_ns: rank(0.75) - rank(0.25),
        })
    }
}

/// The link a measurement is turned into headroom for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LinkParams {
    /// Link speed, bit/s.
    pub speed_bps: u64,
    /// Largest frame on the lossless priority, octets.
    pub max_frame_octets: u64,
    /// PFC frame size, octets (64).
    pub pfc_frame_octets: u64,
    /// The peer's response time to PFC (802.3 allowance or configured), bit times.
    pub peer_response_bit_times: u64,
    /// This station's own lag from crossing XOFF to sending PFC (measured), ns.
    pub own_lag_ns: u64,
    /// The peer's measured reaction beyond the wire round trip, ns (counts where it exceeds
    /// the response allowance).
    pub peer_reaction_ns: u64,
    /// The rate the software terms are charged at, bit/s (0: the speed).
    pub software_rate_bps: u64,
    /// Buffer cell size, bytes (1 = byte accounting).
    pub cell_size: u64,
    /// The priority's buffer per ingress port (XOFF + headroom), bytes.
    pub buffer_bytes: u64,
}

impl LinkParams {
    /// A link at `speed_bps` carrying frames up to `max_frame_octets`, with byte accounting,
    /// 64-octet PFC frames, the 802.3 response allowance tabulated for the speed (0 for a
    /// speed with no table entry) and `buffer_bytes` per priority.
    pub fn new(speed_bps: u64, max_frame_octets: u64, buffer_bytes: u64) -> Self {
        let quanta = Speed::from_bps(speed_bps)
            .ok()
            .and_then(presets::response_quanta_for_speed)
            .unwrap_or(0);
        LinkParams {
            speed_bps,
            max_frame_octets,
            pfc_frame_octets: 64,
            peer_response_bit_times: quanta * BIT_TIMES_PER_QUANTUM,
            own_lag_ns: 0,
            peer_reaction_ns: 0,
            software_rate_bps: 0,
            cell_size: 1,
            buffer_bytes,
        }
    }
}

/// Headroom and thresholds for one lossless priority, derived from a round trip.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeadroomPlan {
    /// The link round trip used, ns.
    pub round_trip_ns: i64,
    /// The adaptive headroom with every term (`crate::headroom::adaptive`).
    pub adaptive: AdaptiveResult,
    /// Headroom above XOFF, bytes (the adaptive headroom).
    pub headroom_bytes: u64,
    /// XOFF: buffer − headroom, rounded down to cells.
    pub xoff_bytes: u64,
    /// XON: XOFF − hysteresis, rounded down to cells.
    pub xon_bytes: u64,
    /// XOFF − XON: one reaction data, R·(T_gen + T_link + T_act) (`crate::headroom::thresholds`).
    pub hysteresis_bytes: u64,
    /// The buffer the thresholds divide, bytes.
    pub buffer_bytes: u64,
}

/// Headroom and XOFF/XON from a measurement (its estimate).
pub fn plan_headroom(m: &Measurement, link: &LinkParams) -> Result<HeadroomPlan, HeadroomError> {
    plan_for_round_trip(m.estimate_ns, link)
}

/// The adaptive headroom model (every term) for a link round trip X of `round_trip_ns`,
/// whatever the buffer.
pub fn model_for_round_trip(
    round_trip_ns: i64,
    link: &LinkParams,
) -> Result<AdaptiveResult, HeadroomError> {
    if round_trip_ns < 0 {
        return Err(HeadroomError::invalid(
            Quantity::Timestamps,
            format!("the measured round trip is negative ({round_trip_ns} ns)"),
        ));
    }
    let speed = Speed::from_bps(link.speed_bps)?;
    let rtt = Duration::from_nanos(round_trip_ns as f64)?;
    adaptive::headroom(&AdaptiveInput {
        speed,
        round_trip: RoundTrip::Measured(rtt),
        max_frame_octets: link.max_frame_octets,
        pfc_frame_octets: link.pfc_frame_octets,
        peer_response_bit_times: link.peer_response_bit_times,
        own_lag: Duration::from_nanos(link.own_lag_ns as f64)?,
        peer_reaction: Duration::from_nanos(link.peer_reaction_ns as f64)?,
        software_rate: match link.software_rate_bps {
            0 => None,
            bps => Some(Speed::from_bps(bps)?),
        },
        cell_size: link.cell_size,
        alpha: None,
    })
}

/// Headroom and XOFF/XON for a link round trip X of `round_trip_ns`.
///
/// Headroom is the adaptive headroom `DV·α` with `DV = speed·(X + own lag) + 2·MaxFrame +
/// PFCFrame + PeerResponse` ([`model_for_round_trip`]). XOFF is the buffer minus that
/// headroom; XON is XOFF minus one reaction data `R·(T_gen + T_link + T_act)` as
/// `crate::headroom::thresholds` computes it with `T_gen` = one maximum frame plus the PFC
/// frame, `T_link` = X/2 and `T_act` = the peer response plus one maximum frame. The buffer
/// must hold the headroom plus one maximum frame.
pub fn plan_for_round_trip(
    round_trip_ns: i64,
    link: &LinkParams,
) -> Result<HeadroomPlan, HeadroomError> {
    let adaptive = model_for_round_trip(round_trip_ns, link)?;
    let speed = Speed::from_bps(link.speed_bps)?;
    let max = frame_bit_times(link.max_frame_octets);
    let thr = thresholds::thresholds(&ThresholdInput {
        speed,
        buffer_bytes: link.buffer_bytes,
        mtu_bytes: link.max_frame_octets,
        t_gen: speed.duration_of(max + frame_bit_times(link.pfc_frame_octets)),
        t_link: Duration::from_nanos(round_trip_ns as f64 / 2.0)?,
        t_act: speed.duration_of(link.peer_response_bit_times + max),
        hysteresis_bytes: None,
        cell_size: link.cell_size,
    })?;
    let headroom = adaptive.headroom_bytes;
    // XOFF is the rest in whole cells: it holds one frame only if the frame's cells fit.
    let needed = headroom + round_up_to_cells(link.max_frame_octets, link.cell_size);
    if link.buffer_bytes < needed {
        return Err(HeadroomError::BufferTooSmall {
            buffer: link.buffer_bytes,
            headroom,
            mtu: link.max_frame_octets,
            needed,
        });
    }
    let cell = link.cell_size.max(1);
    let xoff = (link.buffer_bytes - headroom) / cell * cell;
    let xon = xoff.saturating_sub(thr.reaction_bytes) / cell * cell;
    Ok(HeadroomPlan {
        round_trip_ns,
        headroom_bytes: headroom,
        xoff_bytes: xoff,
        xon_bytes: xon,
        hysteresis_bytes: xoff - xon,
        buffer_bytes: link.buffer_bytes,
        adaptive,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ptp::PtpTimestamp;

    fn sample(x: i64) -> Sample {
        Sample {
            sequence_id: 0,
            responder: PortIdentity::default(),
            t1_ns: 1_000,
            t2: PtpTimestamp::from_ns(5_000),
            t3: PtpTimestamp::from_ns(5_500),
            t4_ns: 1_000 + 500 + x as u64,
            correction_ns: 0,
            turnaround_ns: 500,
            round_trip_ns: x,
        }
    }

    #[test]
    fn robust_summary() {
        // Eight samples around 10 us and one 2 ms outlier (a late wake-up).
        let xs = [
            10_100, 9_900, 10_000, 2_000_000, 10_050, 9_950, 10_020, 9_980, 10_000,
        ];
        let m =
            Measurement::from_samples(xs.iter().map(|&x| sample(x)).collect(), 10, 1, 0).unwrap();
        assert_eq!(m.min_ns, 9_900);
        assert_eq!(m.max_ns, 2_000_000);
        assert_eq!(m.median_ns, 10_000);
        // Sorted: 9900 9950 9980 10000 10000 10020 10050 10100 2e6; trim 2 each side.
        assert_eq!(
            m.trimmed_mean_ns,
            (9_980 + 10_000 + 10_000 + 10_020 + 10_050) / 5
        );
        assert_eq!(m.estimate_ns, m.trimmed_mean_ns);
        // 25th percentile: rank 3 (9980); 75th: rank 7 (10050).
        assert_eq!(m.spread_ns, 70);
        assert_eq!(m.requests, 10);
        assert_eq!(m.lost, 1);
        assert!(Measurement::from_samples(Vec::new(), 3, 3, 0).is_none());
        let one = Measurement::from_samples(vec![sample(42)], 1, 0, 0).unwrap();
        assert_eq!((one.estimate_ns, one.spread_ns), (42, 0));
    }

    /// 10 Gbit/s, 1518-octet frames, 10 us loop: X = 100,000 BT; 2·max = 2·1538·8 = 24,608;
    /// PFC 672; response 67 quanta = 34,304 BT. DV = 159,584 BT = 19,948 B.
    #[test]
    fn headroom_and_thresholds_from_a_round_trip() {
        let link = LinkParams::new(10_000_000_000, 1518, 256 * 1024);
        assert_eq!(link.peer_response_bit_times, 67 * 512);
        let p = plan_for_round_trip(10_000, &link).unwrap();
        assert_eq!(p.adaptive.x_bit_times, 100_000);
        assert_eq!(p.headroom_bytes, 19_948);
        assert_eq!(p.xoff_bytes, 256 * 1024 - 19_948);
        // Reaction data = R·(T_gen + X/2 + T_act) = (1538·8 + 672 + 50,000 + 34,304 + 1538·8)/8.
        assert_eq!(p.hysteresis_bytes, (24_608 + 672 + 50_000 + 34_304) / 8);
        assert_eq!(p.xon_bytes, p.xoff_bytes - p.hysteresis_bytes);
        // A longer loop needs more headroom and leaves a lower XOFF.
        let big = LinkParams::new(10_000_000_000, 1518, 4 << 20);
        let near = plan_for_round_trip(10_000, &big).unwrap();
        let far = plan_for_round_trip(2_000_000, &big).unwrap();
        assert_eq!(near.headroom_bytes, p.headroom_bytes);
        assert_eq!(
            far.headroom_bytes - near.headroom_bytes,
            (20_000_000 - 100_000) / 8
        );
        assert_eq!(near.xoff_bytes - far.xoff_bytes, (20_000_000 - 100_000) / 8);
        // Too small a buffer, and a negative loop, are errors naming the quantity.
        let small = LinkParams::new(10_000_000_000, 1518, 20_000);
        assert!(matches!(
            plan_for_round_trip(10_000, &small),
            Err(HeadroomError::BufferTooSmall {
                headroom: 19_948,
                ..
            })
        ));
        assert_eq!(
            plan_for_round_trip(-5, &link).unwrap_err().quantity(),
            Quantity::Timestamps
        );
        // In cells of 144 bytes XOFF is whole cells: 9,000-byte frames need 63 of them
        // (9,072 bytes) below it, not 9,000 bytes rounded down to 62 (8,928).
        let mut cells = LinkParams::new(10_000_000_000, 9_000, 0);
        cells.cell_size = 144;
        let headroom = plan_for_round_trip(
            10_000,
            &LinkParams {
                buffer_bytes: 1 << 20,
                ..cells
            },
        )
        .unwrap()
        .headroom_bytes;
        let just = LinkParams {
            buffer_bytes: headroom + 9_072,
            ..cells
        };
        assert_eq!(
            plan_for_round_trip(10_000, &just).unwrap().xoff_bytes,
            9_072
        );
        let short = LinkParams {
            buffer_bytes: headroom + 9_071,
            ..cells
        };
        assert!(matches!(
            plan_for_round_trip(10_000, &short),
            Err(HeadroomError::BufferTooSmall { needed, .. }) if needed == headroom + 9_072
        ));
        // No tabulated response allowance at 1 Gbit/s: zero.
        assert_eq!(
            LinkParams::new(1_000_000_000, 1518, 1 << 20).peer_response_bit_times,
            0
        );
    }

    #[test]
    fn plan_from_measurement_uses_the_estimate() {
        let m = Measurement::from_samples(vec![sample(10_000), sample(10_000)], 2, 0, 0).unwrap();
        let link = LinkParams::new(10_000_000_000, 1518, 256 * 1024);
        assert_eq!(
            plan_headroom(&m, &link).unwrap(),
            plan_for_round_trip(10_000, &link).unwrap()
        );
    }
}
