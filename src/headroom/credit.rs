//! Credit-based flow control: minimum receive buffer and credit quantum.
//!
//! ```text
//! min buffer = BDP = R · RTT                     (rounded up to cells)
//! quantum    = ⌈R / credit_issue_rate · speed-up⌉ (rounded up to cells)
//! ```
//!
//! With absolute credits the sender may only send what the receiver has advertised, so the
//! link runs at full rate without loss only if the receiver's buffer covers everything that
//! can be in flight between a credit leaving and the data it allows arriving: one
//! bandwidth-delay product. A credit must also be worth at least what the link carries
//! between two credit updates (rate / credit-issue rate), times the fabric's speed-up.

use super::units::{Duration, Speed};
use super::{
    ceil_tolerant, check_cell, round_up_to_cells, HeadroomError, Quantity, Term, MAX_TERM_BIT_TIMES,
};
use serde::Serialize;

/// Inputs of the credit calculation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CreditInput {
    /// Link rate R.
    pub speed: Speed,
    /// Round-trip time of a credit and the data it releases.
    pub rtt: Duration,
    /// Credit updates issued per second (Hz).
    pub credit_rate_hz: f64,
    /// Fabric speed-up (≥ 1).
    pub speedup: f64,
    /// Buffer cell size, bytes (1 = byte accounting).
    pub cell_size: u64,
}

/// Credit sizing with every term.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CreditResult {
    /// The inputs, echoed.
    pub input: CreditInput,
    /// Terms of the minimum buffer (BDP and cell rounding).
    pub terms: Vec<Term>,
    /// R·RTT, bytes (rounded up).
    pub bdp_bytes: u64,
    /// Minimum lossless full-rate receive buffer, bytes (whole cells).
    pub min_buffer_bytes: u64,
    /// R / credit-issue rate, bytes (unrounded).
    pub bytes_per_credit_interval: f64,
    /// Credit quantum, bytes (whole cells).
    pub quantum_bytes: u64,
    /// Credit quantum, cells.
    pub quantum_cells: u64,
    /// Credits needed to cover the minimum buffer.
    pub credits_per_buffer: u64,
}

/// Computes the credit buffer and quantum.
pub fn credits(input: &CreditInput) -> Result<CreditResult, HeadroomError> {
    if !(input.credit_rate_hz.is_finite() && input.credit_rate_hz > 0.0) {
        return Err(HeadroomError::invalid(
            Quantity::CreditRate,
            format!("must be a positive rate, got {} Hz", input.credit_rate_hz),
        ));
    }
    if !(input.speedup.is_finite() && input.speedup >= 1.0) {
        return Err(HeadroomError::invalid(
            Quantity::SpeedUp,
            format!("must be at least 1, got {}", input.speedup),
        ));
    }
    check_cell(input.cell_size)?;
    let bdp = input.speed.bytes_in(input.rtt, Quantity::RoundTrip)?;
    let min_buffer = round_up_to_cells(bdp, input.cell_size);
    let per_interval = input.speed.bps_f64() / 8.0 / input.credit_rate_hz;
    let limit = (MAX_TERM_BIT_TIMES / 8) as f64;
    if per_interval > limit {
        return Err(HeadroomError::invalid(
            Quantity::CreditRate,
            format!(
                "{per_interval:.3e} B per credit interval is beyond the calculator's limit of \
                 {limit} B"
            ),
        ));
    }
    let quantum_raw = ceil_tolerant(per_interval * input.speedup).max(1.0);
    if quantum_raw > limit {
        return Err(HeadroomError::invalid(
            Quantity::SpeedUp,
            format!("a credit quantum of {quantum_raw:.3e} B is beyond the calculator's limit of {limit} B"),
        ));
    }
    let quantum = round_up_to_cells(quantum_raw as u64, input.cell_size);
    let terms = vec![
        Term::from_bytes(
            "BDP = R x RTT",
            format!("{} x {}", input.speed, input.rtt),
            bdp,
        ),
        Term::from_bytes(
            "round up to whole cells",
            format!("{} B cells", input.cell_size),
            min_buffer - bdp,
        ),
    ];
    Ok(CreditResult {
        input: input.clone(),
        terms,
        bdp_bytes: bdp,
        min_buffer_bytes: min_buffer,
        bytes_per_credit_interval: per_interval,
        quantum_bytes: quantum,
        quantum_cells: quantum / input.cell_size,
        credits_per_buffer: min_buffer.div_ceil(quantum),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headroom::units::{Distance, Medium};

    fn base() -> CreditInput {
        CreditInput {
            speed: Speed::from_gbps(100).unwrap(),
            rtt: "1us".parse().unwrap(),
            credit_rate_hz: 10e6,
            speedup: 1.2,
            cell_size: 64,
        }
    }

    /// 100G, RTT 1 us: BDP = 12.5 GB/s x 1 us = 12,500 B -> 196 cells = 12,544 B.
    /// Credits every 100 ns: 1,250 B per interval x 1.2 = 1,500 B -> 24 cells = 1,536 B;
    /// 12,544 / 1,536 = 8.17 -> 9 credits.
    #[test]
    fn hundred_gig_one_microsecond() {
        let r = credits(&base()).unwrap();
        assert_eq!(r.bdp_bytes, 12_500);
        assert_eq!(r.min_buffer_bytes, 12_544);
        assert!((r.bytes_per_credit_interval - 1250.0).abs() < 1e-9);
        assert_eq!(r.quantum_bytes, 1_536);
        assert_eq!(r.quantum_cells, 24);
        assert_eq!(r.credits_per_buffer, 9);
    }

    /// 400G over 10 km of fibre: RTT = 2 x 10 km / 1.98e8 m/s = 101.0101 us;
    /// BDP = 50 GB/s x 101.0101 us = 5,050,505.05 -> 5,050,506 B (byte accounting).
    #[test]
    fn four_hundred_gig_ten_km() {
        let one_way = Distance::from_meters(10_000.0)
            .unwrap()
            .propagation(Medium::Fiber);
        let i = CreditInput {
            speed: Speed::from_gbps(400).unwrap(),
            rtt: one_way.plus(one_way),
            credit_rate_hz: 1e6,
            speedup: 1.0,
            cell_size: 1,
        };
        let r = credits(&i).unwrap();
        assert_eq!(r.bdp_bytes, 5_050_506);
        assert_eq!(r.min_buffer_bytes, 5_050_506);
        assert_eq!(r.quantum_bytes, 50_000);
    }

    #[test]
    fn errors() {
        let mut i = base();
        i.credit_rate_hz = 0.0;
        assert_eq!(credits(&i).unwrap_err().quantity(), Quantity::CreditRate);
        let mut i = base();
        i.speedup = 0.9;
        assert_eq!(credits(&i).unwrap_err().quantity(), Quantity::SpeedUp);
        let mut i = base();
        i.cell_size = 0;
        assert_eq!(credits(&i).unwrap_err().quantity(), Quantity::CellSize);
    }

    /// A quantum beyond u64 (it panicked: the cell rounding wrapped to 0, then a division by
    /// it) and a round trip beyond the limit (it gave 0 B) are errors naming the input.
    #[test]
    fn out_of_range_inputs_are_errors_not_wraps() {
        let mut i = base();
        i.speed = Speed::from_gbps(400).unwrap();
        i.credit_rate_hz = 1.0;
        i.speedup = 1e10;
        assert_eq!(credits(&i).unwrap_err().quantity(), Quantity::SpeedUp);
        i.speedup = 1.0;
        i.credit_rate_hz = 1e-9;
        assert_eq!(credits(&i).unwrap_err().quantity(), Quantity::CreditRate);
        let mut i = base();
        i.rtt = Distance::from_meters(1e303)
            .unwrap()
            .propagation(Medium::Fiber);
        assert_eq!(credits(&i).unwrap_err().quantity(), Quantity::RoundTrip);
    }
}
