//! Adaptive headroom from a measured round trip (the daemon's peer-delay exchange at link-up).
//!
//! ```text
//! X        = speed · ((T4 − T1) − (T3 − T2))        bits in flight over the measured loop
//! L        = rate · own lag                          arriving before our PFC frame leaves
//! P        = max(PeerResponse, rate · peer reaction)
//! DV       = X + L + 2·MaxFrame + PFCFrame + P
//! Headroom = ⌈DV · α⌉ rounded up to whole cells
//! ```
//!
//! The two software terms are what a hardware formula assumes away. **L**: a congestion point
//! in silicon sends PFC within a few hundred ns of crossing XOFF; a software one sends it when
//! its thread next runs, and everything arriving meanwhile lands beyond XOFF. The daemon
//! measures this as its own receive lag (worker time − XDP stamp) at a high percentile.
//! **P**: 802.3 allows a MAC a few hundred bit times to obey PFC; a software sender obeys when
//! its thread next runs. The daemon measures it from the XOFFs it sends: the time until the
//! last frame of the priority arrives, less the wire round trip. The larger of the allowance
//! and the measurement counts (the measurement contains the peer's MAC too). Both default to
//! zero, which leaves the hardware formula.
//!
//! `rate` is what the peer can send meanwhile: the link speed unless a lower rate is given
//! (the fastest the daemon saw the port receive). On a real link a peer can always reach line
//! rate; on veth, where "speed" is only what the operator wrote, the observed rate keeps a
//! millisecond of scheduling lag from claiming a 10 Gbit/s worth of buffer that no sender
//! fills.
//!
//! T1 is when the request left this station, T2 when it reached the peer, T3 when the
//! peer's reply left, T4 when the reply arrived (T1, T4 on the local clock, T2, T3 on the
//! peer's, so clock offsets cancel). The measured loop already contains both cable delays and
//! both stations' interface delays, which Annex N has to take from worst-case tables.
//!
//! α accounts for buffer cells: a frame of s octets stored in cells of c octets uses
//! ⌈s/c⌉·c octets, so a stream of the worst-sized frames fills the buffer α = max_s ⌈s/c⌉·c / s
//! times faster than its byte count suggests (a 65-byte frame in 64-byte cells: 128/65 ≈ 1.97).
//! α is evaluated over every frame size from 64 octets to the maximum frame.

use super::units::{Duration, Speed, Timestamp};
use super::{
    ceil_tolerant, check_bit_times, check_cell, check_frame, frame_bit_times, round_up_to_cells,
    HeadroomError, Quantity, Term, MAX_ALPHA, MIN_FRAME_OCTETS,
};
use serde::Serialize;

/// How the round trip was measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoundTrip {
    /// The four peer-delay timestamps.
    Timestamps {
        /// Request sent (local clock).
        t1: Timestamp,
        /// Request received (peer clock).
        t2: Timestamp,
        /// Reply sent (peer clock).
        t3: Timestamp,
        /// Reply received (local clock).
        t4: Timestamp,
    },
    /// The link round trip `(T4 − T1) − (T3 − T2)` measured by other means.
    Measured(Duration),
}

impl RoundTrip {
    /// The link's round-trip time with the peer's turnaround removed, taken exactly from the
    /// timestamps' integer picoseconds.
    pub fn link_round_trip(&self) -> Result<Duration, HeadroomError> {
        match *self {
            RoundTrip::Measured(d) => Ok(d),
            RoundTrip::Timestamps { t1, t2, t3, t4 } => {
                let bad = |why: String| HeadroomError::invalid(Quantity::Timestamps, why);
                let apart = |a: Timestamp, b: Timestamp| {
                    b.picos()
                        .checked_sub(a.picos())
                        .ok_or_else(|| bad(format!("{a} and {b} are too far apart")))
                };
                let (outer, inner) = (apart(t1, t4)?, apart(t2, t3)?);
                if outer < 0 {
                    return Err(bad(format!("T4 ({t4}) is before T1 ({t1})")));
                }
                if inner < 0 {
                    return Err(bad(format!("T3 ({t3}) is before T2 ({t2})")));
                }
                if inner > outer {
                    return Err(bad(format!(
                        "peer turnaround T3 - T2 ({}) exceeds the round trip T4 - T1 ({})",
                        Timestamp::from_picos(inner),
                        Timestamp::from_picos(outer)
                    )));
                }
                Duration::from_picos(outer - inner)
            }
        }
    }
}

/// Inputs of the adaptive headroom.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdaptiveInput {
    /// Link speed.
    pub speed: Speed,
    /// The measurement.
    pub round_trip: RoundTrip,
    /// Largest frame on the priority, octets.
    pub max_frame_octets: u64,
    /// PFC frame size, octets.
    pub pfc_frame_octets: u64,
    /// The peer's response time (802.3 allowance or configured), bit times.
    pub peer_response_bit_times: u64,
    /// This station's own reaction beyond the wire: from crossing XOFF until its PFC frame
    /// leaves (a software daemon's receive lag at a high percentile).
    pub own_lag: Duration,
    /// The peer's measured reaction beyond the wire round trip; the larger of this (at the
    /// rate) and `peer_response_bit_times` counts.
    pub peer_reaction: Duration,
    /// The rate the two software terms are charged at (`None`: the speed; never above it).
    pub software_rate: Option<Speed>,
    /// Buffer cell size, bytes (1 = byte-granular accounting, α = 1).
    pub cell_size: u64,
    /// Override of the cell-overhead factor α (≥ 1); `None` derives it from the cell size.
    pub alpha: Option<f64>,
}

/// The cell-overhead factor α and the frame size that attains it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CellAlpha {
    /// max over frame sizes s of ⌈s/c⌉·c / s.
    pub alpha: f64,
    /// The frame size (octets) with the worst ratio.
    pub worst_frame_octets: u64,
    /// Cells that frame occupies.
    pub worst_frame_cells: u64,
}

/// α for `cell_size`-byte cells over frames of 64..=`max_frame_octets` octets.
///
/// Within the cells k·c + 1 ..= (k + 1)·c the ratio is largest at the first size, and those
/// maxima (k + 1)·c / (k·c + 1) fall as k grows; so the worst size is 64 or the first k·c + 1
/// above it, both at most 64 + c, and only sizes up to min(max, 64 + c) need trying.
pub fn cell_alpha(cell_size: u64, max_frame_octets: u64) -> Result<CellAlpha, HeadroomError> {
    check_cell(cell_size)?;
    check_frame(Quantity::MaxFrame, max_frame_octets)?;
    let mut best = CellAlpha {
        alpha: 1.0,
        worst_frame_octets: max_frame_octets,
        worst_frame_cells: max_frame_octets.div_ceil(cell_size),
    };
    for s in MIN_FRAME_OCTETS..=max_frame_octets.min(MIN_FRAME_OCTETS + cell_size) {
        let cells = s.div_ceil(cell_size);
        let ratio = (cells * cell_size) as f64 / s as f64;
        if ratio > best.alpha {
            best = CellAlpha {
                alpha: ratio,
                worst_frame_octets: s,
                worst_frame_cells: cells,
            };
        }
    }
    Ok(best)
}

/// The adaptive headroom with every term.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdaptiveResult {
    /// The inputs, echoed.
    pub input: AdaptiveInput,
    /// `(T4 − T1) − (T3 − T2)`.
    pub link_round_trip: Duration,
    /// X = speed · link round trip, bit times (rounded up).
    pub x_bit_times: u64,
    /// The rate the software terms were charged at (the lower of the given rate and the speed).
    pub software_rate: Speed,
    /// L = rate · own lag, bit times.
    pub own_lag_bit_times: u64,
    /// The peer response counted: max(allowance, speed · peer reaction), bit times.
    pub peer_bit_times: u64,
    /// DV = X + L + 2·MaxFrame + PFCFrame + peer response, bit times.
    pub delay_value_bit_times: u64,
    /// α used and where it came from.
    pub alpha: CellAlpha,
    /// Whether α was given by the operator instead of derived.
    pub alpha_overridden: bool,
    /// Terms of the headroom (DV terms, then byte and cell overheads); they add up to
    /// `headroom_bytes` × 8 bit times.
    pub terms: Vec<Term>,
    /// The headroom, bytes (a whole number of cells).
    pub headroom_bytes: u64,
    /// The headroom, cells.
    pub headroom_cells: u64,
}

/// The headroom split into what causes it, bytes (rounded up, the frames term taking the rest
/// of the total, cell overhead included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
pub struct HeadroomSplit {
    /// Speed × the measured loop.
    pub wire: u64,
    /// Rate × own lag.
    pub own_lag: u64,
    /// The peer response counted.
    pub peer: u64,
    /// Two maximum frames, the PFC frame, rounding and cell overhead.
    pub frames: u64,
}

impl HeadroomSplit {
    /// Their sum, bytes.
    pub fn total(&self) -> u64 {
        self.wire + self.own_lag + self.peer + self.frames
    }
}

impl AdaptiveResult {
    /// What the headroom is made of, bytes.
    pub fn split(&self) -> HeadroomSplit {
        let wire = self.x_bit_times.div_ceil(8);
        let own_lag = self.own_lag_bit_times.div_ceil(8);
        let peer = self.peer_bit_times.div_ceil(8);
        HeadroomSplit {
            wire,
            own_lag,
            peer,
            frames: self.headroom_bytes.saturating_sub(wire + own_lag + peer),
        }
    }
}

/// Computes the adaptive headroom.
pub fn headroom(input: &AdaptiveInput) -> Result<AdaptiveResult, HeadroomError> {
    check_frame(Quantity::PfcFrame, input.pfc_frame_octets)?;
    check_bit_times(Quantity::PeerResponse, input.peer_response_bit_times)?;
    let derived = cell_alpha(input.cell_size, input.max_frame_octets)?;
    let (alpha, overridden) = match input.alpha {
        Some(a) if !(a.is_finite() && (1.0..=MAX_ALPHA).contains(&a)) => {
            return Err(HeadroomError::invalid(
                Quantity::Alpha,
                format!("must be within 1..={MAX_ALPHA}, got {a}"),
            ))
        }
        Some(a) => (
            CellAlpha {
                alpha: a,
                ..derived
            },
            true,
        ),
        None => (derived, false),
    };
    let rtt = input.round_trip.link_round_trip()?;
    let rtt_quantity = match input.round_trip {
        RoundTrip::Timestamps { .. } => Quantity::Timestamps,
        RoundTrip::Measured(_) => Quantity::RoundTrip,
    };
    let x = input.speed.bit_times_in(rtt, rtt_quantity)?;
    let max2 = 2 * frame_bit_times(input.max_frame_octets);
    let pfc = frame_bit_times(input.pfc_frame_octets);
    let rate = match input.software_rate {
        Some(r) if r.bps_f64() < input.speed.bps_f64() => r,
        _ => input.speed,
    };
    let lag = rate.bit_times_in(input.own_lag, Quantity::OwnLag)?;
    let reaction = rate.bit_times_in(input.peer_reaction, Quantity::PeerReaction)?;
    let peer = input.peer_response_bit_times.max(reaction);
    let dv = x + lag + max2 + pfc + peer;
    let dv_bytes = dv.div_ceil(8);
    let scaled = ceil_tolerant(dv as f64 * alpha.alpha / 8.0) as u64;
    let scaled = scaled.max(dv_bytes);
    let headroom = round_up_to_cells(scaled, input.cell_size);
    let terms = vec![
        Term::from_bit_times("X (measured loop)", format!("{} x {rtt}", input.speed), x),
        Term::from_bit_times("own lag", format!("{rate} x {}", input.own_lag), lag),
        Term::from_bit_times(
            "2 x max frame",
            format!("2 x ({} + 20) x 8", input.max_frame_octets),
            max2,
        ),
        Term::from_bit_times(
            "PFC frame",
            format!("({} + 20) x 8", input.pfc_frame_octets),
            pfc,
        ),
        Term::from_bit_times(
            "peer response",
            if reaction > input.peer_response_bit_times {
                format!(
                    "{rate} x {} measured (allowance {} quanta)",
                    input.peer_reaction,
                    input.peer_response_bit_times as f64 / 512.0
                )
            } else {
                format!("{} quanta", peer as f64 / 512.0)
            },
            peer,
        ),
        Term::from_bit_times("round DV up to bytes", "", dv_bytes * 8 - dv),
        Term::from_bytes(
            "cell overhead (alpha - 1)",
            format!(
                "alpha = {:.4} ({}-octet frame in {} x {}-byte cells)",
                alpha.alpha, alpha.worst_frame_octets, alpha.worst_frame_cells, input.cell_size
            ),
            scaled - dv_bytes,
        ),
        Term::from_bytes(
            "round up to whole cells",
            format!(
                "{} cells of {} B",
                headroom / input.cell_size,
                input.cell_size
            ),
            headroom - scaled,
        ),
    ];
    Ok(AdaptiveResult {
        input: input.clone(),
        link_round_trip: rtt,
        x_bit_times: x,
        software_rate: rate,
        own_lag_bit_times: lag,
        peer_bit_times: peer,
        delay_value_bit_times: dv,
        alpha,
        alpha_overridden: overridden,
        terms,
        headroom_bytes: headroom,
        headroom_cells: headroom / input.cell_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: f64) -> Duration {
        Duration::from_secs(v * 1e-6).unwrap()
    }

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn input(cell: u64) -> AdaptiveInput {
        AdaptiveInput {
            speed: Speed::from_gbps(100).unwrap(),
            // Peer clock 10 us ahead; T4 - T1 = 1.2 us, T3 - T2 = 0.2 us -> loop 1 us.
            round_trip: RoundTrip::Timestamps {
                t1: ts("0us"),
                t2: ts("10us"),
                t3: ts("10.2us"),
                t4: ts("1.2us"),
            },
            max_frame_octets: 9216,
            pfc_frame_octets: 64,
            peer_response_bit_times: 394 * 512,
            own_lag: Duration::ZERO,
            peer_reaction: Duration::ZERO,
            software_rate: None,
            cell_size: cell,
            alpha: None,
        }
    }

    /// The software terms: 10 us of own lag at 100G adds 1,000,000 BT; a measured peer
    /// reaction counts only where it exceeds the allowance (394 quanta = 201,728 BT ≈ 2.02 us).
    #[test]
    fn own_lag_and_measured_peer_reaction() {
        let base = headroom(&input(1)).unwrap();
        let mut i = input(1);
        i.own_lag = us(10.0);
        let r = headroom(&i).unwrap();
        assert_eq!(
            r.delay_value_bit_times,
            base.delay_value_bit_times + 1_000_000
        );
        assert_eq!(
            crate::headroom::total_bit_times(&r.terms),
            r.headroom_bytes * 8
        );
        i.peer_reaction = us(1.0);
        assert_eq!(headroom(&i).unwrap().headroom_bytes, r.headroom_bytes);
        i.peer_reaction = us(5.0);
        let r5 = headroom(&i).unwrap();
        assert_eq!(
            r5.delay_value_bit_times,
            r.delay_value_bit_times - 201_728 + 500_000
        );
        assert!(
            r5.terms.iter().any(|t| t.detail.contains("measured")),
            "{:?}",
            r5.terms
        );
        // Charged at 10G instead of 100G: a tenth of each (the allowance wins again).
        i.software_rate = Some(Speed::from_gbps(10).unwrap());
        let r10 = headroom(&i).unwrap();
        assert_eq!(r10.own_lag_bit_times, 100_000);
        assert_eq!(r10.peer_bit_times, 201_728);
        // Never above the speed.
        i.software_rate = Some(Speed::from_gbps(400).unwrap());
        assert_eq!(headroom(&i).unwrap().own_lag_bit_times, 1_000_000);
    }

    #[test]
    fn alpha_from_cell_size() {
        // 64-byte cells: a 65-octet frame takes 2 cells -> 128/65.
        let a = cell_alpha(64, 9216).unwrap();
        assert_eq!(a.worst_frame_octets, 65);
        assert!((a.alpha - 128.0 / 65.0).abs() < 1e-12);
        // 144-byte cells (Spectrum-2): a 64-octet frame takes a whole cell -> 2.25.
        let a = cell_alpha(144, 9216).unwrap();
        assert_eq!(a.worst_frame_octets, 64);
        assert!((a.alpha - 2.25).abs() < 1e-12);
        // 80-byte cells: 81-octet frame in 2 cells -> 160/81 beats 80/64.
        let a = cell_alpha(80, 9216).unwrap();
        assert_eq!(a.worst_frame_octets, 81);
        // Byte accounting: no overhead.
        assert_eq!(cell_alpha(1, 9216).unwrap().alpha, 1.0);
        assert_eq!(
            cell_alpha(0, 9216).unwrap_err().quantity(),
            Quantity::CellSize
        );
    }

    /// 100G, loop 1 us: X = 100,000 BT; DV = 100,000 + 147,776 + 672 + 201,728 = 450,176 BT
    /// = 56,272 B. Byte accounting: headroom 56,272 B.
    #[test]
    fn worked_example_bytes() {
        let r = headroom(&input(1)).unwrap();
        assert!((r.link_round_trip.nanos() - 1000.0).abs() < 1e-6);
        assert_eq!(r.x_bit_times, 100_000);
        assert_eq!(r.delay_value_bit_times, 450_176);
        assert_eq!(r.headroom_bytes, 56_272);
        assert_eq!(
            crate::headroom::total_bit_times(&r.terms),
            r.headroom_bytes * 8
        );
    }

    /// Same link, 144-byte cells: ⌈56,272 · 2.25⌉ = 126,612 B -> 880 cells = 126,720 B.
    #[test]
    fn worked_example_cells() {
        let r = headroom(&input(144)).unwrap();
        assert_eq!(r.headroom_cells, 880);
        assert_eq!(r.headroom_bytes, 126_720);
        assert_eq!(crate::headroom::total_bit_times(&r.terms), 126_720 * 8);
    }

    #[test]
    fn alpha_override_and_errors() {
        let mut i = input(1);
        i.alpha = Some(1.5);
        let r = headroom(&i).unwrap();
        assert_eq!(r.headroom_bytes, 84_408); // 56,272 x 1.5
        i.alpha = Some(0.5);
        assert_eq!(headroom(&i).unwrap_err().quantity(), Quantity::Alpha);
        let mut i = input(1);
        i.round_trip = RoundTrip::Timestamps {
            t1: ts("5us"),
            t2: ts("0us"),
            t3: ts("0.1us"),
            t4: ts("1us"),
        };
        assert_eq!(headroom(&i).unwrap_err().quantity(), Quantity::Timestamps);
        i.round_trip = RoundTrip::Timestamps {
            t1: ts("0us"),
            t2: ts("0us"),
            t3: ts("3us"),
            t4: ts("1us"),
        };
        assert!(headroom(&i).unwrap_err().to_string().contains("turnaround"));
    }

    /// Epoch timestamps (the audit's case): the loop is 100 ns, which an f64 of seconds near
    /// 1.7e9 s (238 ns resolution) turned into 0.
    #[test]
    fn epoch_timestamps_keep_nanoseconds() {
        let mut i = input(1);
        i.round_trip = RoundTrip::Timestamps {
            t1: ts("1700000000.000000120s"),
            t2: ts("1700000005.000000000s"),
            t3: ts("1700000005.000000100s"),
            t4: ts("1700000000.000000320s"),
        };
        let r = headroom(&i).unwrap();
        assert_eq!(r.link_round_trip.nanos().round(), 100.0);
        assert_eq!(r.x_bit_times, 10_000);
    }

    /// Inputs that wrapped or hung: an α of 1e300 (headroom 0), 1e9 s of own lag (less than
    /// none), a 2e10-octet frame (α looped over every size). Each is an error naming it; at
    /// the limits the sums are exact.
    #[test]
    fn out_of_range_inputs_are_errors_not_wraps() {
        let check = |f: &dyn Fn(&mut AdaptiveInput), q: Quantity| {
            let mut i = input(64);
            f(&mut i);
            assert_eq!(headroom(&i).unwrap_err().quantity(), q);
        };
        check(&|i| i.alpha = Some(1e300), Quantity::Alpha);
        check(&|i| i.alpha = Some(1025.0), Quantity::Alpha);
        check(
            &|i| i.own_lag = Duration::from_secs(1e9).unwrap(),
            Quantity::OwnLag,
        );
        check(
            &|i| i.peer_reaction = Duration::from_secs(1e9).unwrap(),
            Quantity::PeerReaction,
        );
        check(
            &|i| i.round_trip = RoundTrip::Measured(Duration::from_secs(1e9).unwrap()),
            Quantity::RoundTrip,
        );
        check(&|i| i.max_frame_octets = 20_000_000_000, Quantity::MaxFrame);
        check(&|i| i.pfc_frame_octets = 1 << 62, Quantity::PfcFrame);
        check(
            &|i| i.peer_response_bit_times = u64::MAX,
            Quantity::PeerResponse,
        );
        check(&|i| i.cell_size = 1 << 20, Quantity::CellSize);
        check(
            &|i| {
                i.round_trip = RoundTrip::Timestamps {
                    t1: ts("0s"),
                    t2: ts("0s"),
                    t3: ts("0s"),
                    t4: ts("1e9s"),
                }
            },
            Quantity::Timestamps,
        );
        let lim = crate::headroom::MAX_TERM_BIT_TIMES;
        let mut i = input(crate::headroom::MAX_CELL_OCTETS);
        i.speed = Speed::from_bps(1_000_000_000).unwrap();
        i.round_trip = RoundTrip::Measured(i.speed.duration_of(lim));
        i.own_lag = i.speed.duration_of(lim);
        i.peer_response_bit_times = lim;
        i.max_frame_octets = crate::headroom::MAX_FRAME_OCTETS;
        i.pfc_frame_octets = crate::headroom::MAX_FRAME_OCTETS;
        i.alpha = Some(MAX_ALPHA);
        let r = headroom(&i).unwrap();
        let dv = 3 * u128::from(lim) + 3 * (65_535 + 20) * 8;
        assert_eq!(u128::from(r.delay_value_bit_times), dv);
        assert!(u128::from(r.headroom_bytes) >= dv * 1024 / 8);
    }

    /// α needs only frames up to 64 + cell: the same answer as trying every size.
    #[test]
    fn alpha_search_is_bounded() {
        for cell in [1, 2, 63, 64, 80, 96, 128, 144, 200, 256, 4096] {
            // (numerator, denominator, frame) of the worst ratio, first of equals.
            let mut worst = (1, 1, 9216);
            for s in 64..=9216u64 {
                let used = s.div_ceil(cell) * cell;
                if used * worst.1 > worst.0 * s {
                    worst = (used, s, s);
                }
            }
            let a = cell_alpha(cell, 9216).unwrap();
            assert_eq!(a.worst_frame_octets, worst.2, "cell {cell}");
        }
        assert!(cell_alpha(64, crate::headroom::MAX_FRAME_OCTETS).is_ok());
    }

    #[test]
    fn measured_round_trip() {
        let mut i = input(1);
        i.round_trip = RoundTrip::Measured(us(1.0));
        assert_eq!(headroom(&i).unwrap().headroom_bytes, 56_272);
    }
}
