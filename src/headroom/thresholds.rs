//! XOFF/XON thresholds for a priority's buffer.
//!
//! ```text
//! reaction data = R · (T_gen + T_link + T_act)   arrives while PFC is generated, travels
//!                                                and is acted on
//! wire data     = R · T_link                     already on the wire when the sender stops
//! headroom      = reaction data + wire data      (rounded up to cells)
//! XOFF          = buffer − headroom              (rounded down to cells)
//! XON           = XOFF − hysteresis              (hysteresis defaults to one reaction data)
//! ```
//!
//! The buffer must hold the headroom plus one MTU rounded up to whole cells (so at least one
//! maximum frame fits below XOFF, which is rounded down to cells); otherwise
//! [`HeadroomError::BufferTooSmall`] names the numbers.
//!
//! Defaults used by the CLI (each overridable): `T_gen` = one maximum frame plus the PFC frame
//! (the PFC frame waits behind a frame in transmission) plus the higher-layer delay HD,
//! `T_link` = half the link's round trip, 2·cable + (TX_s1 + RX_s2) + (TX_s2 + RX_s1) (the
//! loop the daemon measures and halves), `T_act` = the 802.3 response-time allowance plus one
//! maximum frame (the sender finishes the frame it has started). The headroom is then Annex
//! N's delay value plus the response allowance.

use super::units::{Duration, Speed};
use super::{check_cell, check_frame, round_up_to_cells, HeadroomError, Quantity, Term};
use serde::Serialize;

/// Inputs of the threshold calculation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdInput {
    /// Arrival rate R (the link speed).
    pub speed: Speed,
    /// Buffer available to the priority (or PG), bytes.
    pub buffer_bytes: u64,
    /// One MTU (maximum frame), bytes.
    pub mtu_bytes: u64,
    /// Time for the receiver to generate and send PFC.
    pub t_gen: Duration,
    /// One-way link delay.
    pub t_link: Duration,
    /// Time for the sender to act on PFC.
    pub t_act: Duration,
    /// XOFF − XON, bytes; `None` = one reaction data (capped so XON ≥ 0).
    pub hysteresis_bytes: Option<u64>,
    /// Buffer cell size, bytes (1 = byte accounting).
    pub cell_size: u64,
}

/// Thresholds with every term.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThresholdResult {
    /// The inputs, echoed.
    pub input: ThresholdInput,
    /// Terms of the headroom (reaction data, wire data, cell rounding).
    pub terms: Vec<Term>,
    /// R·(T_gen + T_link + T_act), bytes (rounded up).
    pub reaction_bytes: u64,
    /// R·T_link, bytes (rounded up).
    pub wire_bytes: u64,
    /// Headroom above XOFF, bytes.
    pub headroom_bytes: u64,
    /// XOFF threshold: send XOFF when the priority's occupancy reaches this, bytes.
    pub xoff_bytes: u64,
    /// XON threshold: send XON when occupancy falls to this, bytes.
    pub xon_bytes: u64,
    /// XOFF − XON, bytes.
    pub hysteresis_bytes: u64,
    /// True when the default hysteresis was cut down so that XON ≥ 0.
    pub hysteresis_capped: bool,
}

/// Computes XOFF/XON thresholds.
pub fn thresholds(input: &ThresholdInput) -> Result<ThresholdResult, HeadroomError> {
    check_cell(input.cell_size)?;
    check_frame(Quantity::MaxFrame, input.mtu_bytes)?;
    let gen = input
        .speed
        .bit_times_in(input.t_gen, Quantity::GenerationTime)?;
    let link = input
        .speed
        .bit_times_in(input.t_link, Quantity::LinkDelay)?;
    let act = input
        .speed
        .bit_times_in(input.t_act, Quantity::ActivationTime)?;
    let reaction = (gen + link + act).div_ceil(8);
    let wire = link.div_ceil(8);
    let raw = reaction + wire;
    let headroom = round_up_to_cells(raw, input.cell_size);
    // XOFF is rounded down to whole cells, so one MTU fits below it only if the buffer
    // holds the MTU rounded up to whole cells.
    let needed = headroom + round_up_to_cells(input.mtu_bytes, input.cell_size);
    if input.buffer_bytes < needed {
        return Err(HeadroomError::BufferTooSmall {
            buffer: input.buffer_bytes,
            headroom,
            mtu: input.mtu_bytes,
            needed,
        });
    }
    let cell = input.cell_size.max(1);
    let xoff = (input.buffer_bytes - headroom) / cell * cell;
    let (hysteresis, capped) = match input.hysteresis_bytes {
        Some(h) if h > xoff => {
            return Err(HeadroomError::invalid(
                Quantity::Hysteresis,
                format!(
                    "{h} B is larger than the XOFF threshold ({xoff} B); XON would be negative"
                ),
            ))
        }
        Some(h) => (h, false),
        None => (reaction.min(xoff), reaction > xoff),
    };
    let xon = (xoff - hysteresis) / cell * cell;
    let terms = vec![
        Term::from_bytes(
            "reaction data",
            format!(
                "{} x ({} + {} + {})",
                input.speed, input.t_gen, input.t_link, input.t_act
            ),
            reaction,
        ),
        Term::from_bytes(
            "wire data",
            format!("{} x {}", input.speed, input.t_link),
            wire,
        ),
        Term::from_bytes(
            "round up to whole cells",
            format!("{} B cells", input.cell_size),
            headroom - raw,
        ),
    ];
    Ok(ThresholdResult {
        input: input.clone(),
        terms,
        reaction_bytes: reaction,
        wire_bytes: wire,
        headroom_bytes: headroom,
        xoff_bytes: xoff,
        xon_bytes: xon,
        hysteresis_bytes: xoff - xon,
        hysteresis_capped: capped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headroom::units::{Distance, Medium};

    /// 100G, 100 m fibre, 9216-octet frames, 1 MiB buffer:
    /// T_gen = (9236 + 84)·8 BT = 745.6 ns, T_link = 100 m / 1.98e8 m/s = 505.05 ns,
    /// T_act = 394·512 + 9236·8 BT = 2,756.16 ns;
    /// reaction = 12.5 GB/s · 4,006.81 ns = 50,085.13 → 50,086 B; wire = 6,313.13 → 6,314 B;
    /// headroom 56,400 B; XOFF = 1,048,576 − 56,400 = 992,176; XON = 992,176 − 50,086 = 942,090.
    fn example() -> ThresholdInput {
        let speed = Speed::from_gbps(100).unwrap();
        ThresholdInput {
            speed,
            buffer_bytes: 1 << 20,
            mtu_bytes: 9216,
            t_gen: speed.duration_of((9236 + 84) * 8),
            t_link: Distance::from_meters(100.0)
                .unwrap()
                .propagation(Medium::Fiber),
            t_act: speed.duration_of(394 * 512 + 9236 * 8),
            hysteresis_bytes: None,
            cell_size: 1,
        }
    }

    #[test]
    fn worked_example() {
        let r = thresholds(&example()).unwrap();
        assert_eq!(r.reaction_bytes, 50_086);
        assert_eq!(r.wire_bytes, 6_314);
        assert_eq!(r.headroom_bytes, 56_400);
        assert_eq!(r.xoff_bytes, 992_176);
        assert_eq!(r.xon_bytes, 942_090);
        assert!(!r.hysteresis_capped);
        assert_eq!(crate::headroom::total_bit_times(&r.terms), 56_400 * 8);
    }

    #[test]
    fn cells_round_headroom_up_and_thresholds_down() {
        let mut i = example();
        i.cell_size = 144;
        let r = thresholds(&i).unwrap();
        assert_eq!(r.headroom_bytes, 56_448); // 392 cells
        assert_eq!(r.xoff_bytes % 144, 0);
        assert_eq!(r.xon_bytes % 144, 0);
        assert!(r.xoff_bytes <= (1 << 20) - 56_448);
    }

    #[test]
    fn buffer_too_small_names_the_numbers() {
        let mut i = example();
        i.buffer_bytes = 60_000;
        let e = thresholds(&i).unwrap_err();
        assert_eq!(
            e,
            HeadroomError::BufferTooSmall {
                buffer: 60_000,
                headroom: 56_400,
                mtu: 9216,
                needed: 65_616
            }
        );
        assert!(e
            .to_string()
            .contains("cannot hold the headroom (56400 B) plus one MTU (9216 B)"));
        // Exactly headroom + MTU fits, with the default hysteresis capped.
        i.buffer_bytes = 65_616;
        let r = thresholds(&i).unwrap();
        assert_eq!(r.xoff_bytes, 9216);
        assert_eq!(r.xon_bytes, 0);
        assert!(r.hysteresis_capped);
    }

    /// Times beyond the limit (their products with the speed saturated and wrapped) and
    /// frames outside 64..=65,535 octets are errors naming the input.
    #[test]
    fn out_of_range_inputs_are_errors_not_wraps() {
        let huge = Duration::from_secs(1e12).unwrap();
        let check = |f: &dyn Fn(&mut ThresholdInput), q: Quantity| {
            let mut i = example();
            f(&mut i);
            assert_eq!(thresholds(&i).unwrap_err().quantity(), q);
        };
        check(&|i| i.t_gen = huge, Quantity::GenerationTime);
        check(&|i| i.t_link = huge, Quantity::LinkDelay);
        check(&|i| i.t_act = huge, Quantity::ActivationTime);
        check(&|i| i.mtu_bytes = u64::MAX, Quantity::MaxFrame);
        check(&|i| i.cell_size = u64::MAX, Quantity::CellSize);
    }

    /// XOFF is rounded down to cells, so the fit check needs the MTU in whole cells: 9000 B
    /// in 144 B cells is 9,072 B. With only headroom + 9000 B the XOFF came out at 8,928 B,
    /// below one MTU.
    #[test]
    fn one_mtu_fits_below_xoff_in_whole_cells() {
        let mut i = example();
        i.cell_size = 144;
        i.mtu_bytes = 9000;
        i.buffer_bytes = 56_448 + 9000;
        assert_eq!(
            thresholds(&i).unwrap_err(),
            HeadroomError::BufferTooSmall {
                buffer: 65_448,
                headroom: 56_448,
                mtu: 9000,
                needed: 65_520
            }
        );
        i.buffer_bytes = 65_520;
        assert_eq!(thresholds(&i).unwrap().xoff_bytes, 9_072);
    }

    #[test]
    fn explicit_hysteresis() {
        let mut i = example();
        i.hysteresis_bytes = Some(20_000);
        let r = thresholds(&i).unwrap();
        assert_eq!(r.xon_bytes, 972_176);
        i.hysteresis_bytes = Some(2_000_000);
        assert_eq!(thresholds(&i).unwrap_err().quantity(), Quantity::Hysteresis);
    }
}
