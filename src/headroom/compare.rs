//! One link sized by every model, side by side: 802.1Q Annex N, adaptive (measured or
//! estimated round trip), the Linux mlx5 driver and SONiC's Mellanox calculation.
//!
//! Each row reports the headroom a model reserves above XOFF (for SONiC also the full PG
//! size), its ratio to Annex N's delay value and to the adaptive headroom, and the
//! difference in bytes. A ratio below 1 means the model reserves *less* than the link can
//! need, and frames may be dropped in the worst case.

use super::adaptive::{self, AdaptiveInput, AdaptiveResult};
use super::annex_n::{self, AnnexNInput, AnnexNResult};
use super::units::Duration;
use super::vendor::{self, Mlx5Input, Mlx5Result, SonicAsic, SonicInput, SonicResult};
use super::{HeadroomError, MIN_FRAME_OCTETS};
use serde::Serialize;

/// Ethernet header + FCS: a netdev MTU of M carries frames of M + 18 octets.
pub const L2_OVERHEAD_OCTETS: u64 = 18;

/// Inputs of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareInput {
    /// The link as Annex N sees it (speed, cable, frames, interface delays, HD).
    pub annex_n: AnnexNInput,
    /// The adaptive model's input for the same link, as the caller computes it (with its
    /// software terms, rate and α), so the row is the adaptive result itself.
    pub adaptive: AdaptiveInput,
    /// Whether the adaptive round trip is [`estimated_round_trip`] rather than measured.
    pub round_trip_estimated: bool,
    /// SONiC ASIC parameters.
    pub sonic_asic: SonicAsic,
}

/// One row of the comparison table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareRow {
    /// Model name.
    pub model: String,
    /// Headroom reserved above XOFF, bytes.
    pub headroom_bytes: u64,
    /// `headroom_bytes / Annex N DV bytes`.
    pub vs_annex_n: f64,
    /// `headroom_bytes / adaptive headroom`.
    pub vs_adaptive: f64,
    /// `headroom_bytes − Annex N DV bytes`.
    pub delta_vs_annex_n_bytes: i64,
    /// What the number is.
    pub note: String,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareReport {
    /// Annex N in full.
    pub annex_n: AnnexNResult,
    /// Adaptive in full.
    pub adaptive: AdaptiveResult,
    /// Whether the adaptive round trip was estimated rather than measured.
    pub adaptive_round_trip_estimated: bool,
    /// mlx5 in full.
    pub mlx5: Mlx5Result,
    /// SONiC in full.
    pub sonic: SonicResult,
    /// The table.
    pub rows: Vec<CompareRow>,
}

/// The round trip the adaptive model would measure on an ideal link: both cable delays and
/// both stations' TX + RX delays.
pub fn estimated_round_trip(a: &AnnexNInput) -> Result<Duration, HeadroomError> {
    a.validate()?;
    let cable = annex_n::cable_delay_bit_times(a.speed, a.cable_length, a.medium)?;
    let bt = 2 * cable
        + a.local.tx_bit_times
        + a.local.rx_bit_times
        + a.remote.tx_bit_times
        + a.remote.rx_bit_times;
    Ok(a.speed.duration_of(bt))
}

/// Sizes the link with every model.
pub fn compare(input: &CompareInput) -> Result<CompareReport, HeadroomError> {
    let a = &input.annex_n;
    let annex = annex_n::delay_value(a)?;
    let adaptive = adaptive::headroom(&input.adaptive)?;
    let mtu = a
        .max_frame_octets
        .saturating_sub(L2_OVERHEAD_OCTETS)
        .max(MIN_FRAME_OCTETS);
    let mlx = vendor::mlx5(&Mlx5Input {
        speed: a.speed,
        cable_length_m: a.cable_length.meters().ceil() as u64,
        mtu,
        max_mtu: mtu,
        cell_size: vendor::MLX5_DEFAULT_CELL,
        buffer_bytes: None,
    })?;
    let mut sonic_in = SonicInput::new(a.speed, a.cable_length.meters(), input.sonic_asic);
    sonic_in.port_mtu = mtu;
    let sonic = vendor::sonic(&sonic_in)?;

    let reference = annex.delay_value_bytes.max(1);
    let adaptive_ref = adaptive.headroom_bytes.max(1);
    let row = |model: &str, bytes: u64, note: String| CompareRow {
        model: model.to_string(),
        headroom_bytes: bytes,
        vs_annex_n: bytes as f64 / reference as f64,
        vs_adaptive: bytes as f64 / adaptive_ref as f64,
        delta_vs_annex_n_bytes: bytes as i64 - annex.delay_value_bytes as i64,
        note,
    };
    let rows = vec![
        row(
            "802.1Q Annex N",
            annex.delay_value_bytes,
            format!(
                "DV = {} BT, worst-case interface tables",
                annex.delay_value_bit_times
            ),
        ),
        row(
            "adaptive",
            adaptive.headroom_bytes,
            format!(
                "{} loop {}, alpha {:.3}, {} B cells{}",
                if input.round_trip_estimated {
                    "estimated"
                } else {
                    "measured"
                },
                adaptive.link_round_trip,
                adaptive.alpha.alpha,
                input.adaptive.cell_size,
                if adaptive.own_lag_bit_times > 0
                    || adaptive.peer_bit_times > input.adaptive.peer_response_bit_times
                {
                    ", software terms"
                } else {
                    ""
                }
            ),
        ),
        row(
            "Linux mlx5",
            mlx.xoff_bytes,
            format!(
                "xoff at {} Gb/s, {} m, MTU {}",
                mlx.effective_speed_mbps / 1000,
                mlx.input.cable_length_m,
                mtu
            ),
        ),
        row(
            "SONiC (Mellanox) xoff",
            sonic.xoff_bytes,
            format!(
                "{}, cell occupancy {:.3}, lossless MTU {}",
                input.sonic_asic.name, sonic.cell_occupancy, sonic.input.lossless_mtu
            ),
        ),
        row(
            "SONiC (Mellanox) size",
            sonic.size_bytes,
            format!("xoff + xon ({} B pipeline)", sonic.xon_bytes),
        ),
    ];
    Ok(CompareReport {
        annex_n: annex,
        adaptive,
        adaptive_round_trip_estimated: input.round_trip_estimated,
        mlx5: mlx,
        sonic,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headroom::adaptive::RoundTrip;
    use crate::headroom::presets::lookup;
    use crate::headroom::vendor::SPECTRUM2;

    /// The comparison of `a` with the adaptive model's hardware formula over `round_trip`.
    fn input(a: AnnexNInput, round_trip: Option<Duration>, response: u64) -> CompareInput {
        let rtt = round_trip.unwrap_or_else(|| estimated_round_trip(&a).unwrap());
        CompareInput {
            adaptive: AdaptiveInput {
                speed: a.speed,
                round_trip: RoundTrip::Measured(rtt),
                max_frame_octets: a.max_frame_octets,
                pfc_frame_octets: a.pfc_frame_octets,
                peer_response_bit_times: response,
                own_lag: Duration::ZERO,
                peer_reaction: Duration::ZERO,
                software_rate: None,
                cell_size: 1,
                alpha: None,
            },
            round_trip_estimated: round_trip.is_none(),
            annex_n: a,
            sonic_asic: SPECTRUM2,
        }
    }

    #[test]
    fn compare_annex_n_example_link() {
        let p = lookup("10gbase-t").unwrap();
        let mut a = p.annex_n_input("100m".parse().unwrap(), 2000);
        a.higher_layer_bit_times = 6_144;
        let r = compare(&input(a, None, p.response_bit_times())).unwrap();
        assert!(r.adaptive_round_trip_estimated);
        assert_eq!(r.rows.len(), 5);
        assert_eq!(r.rows[0].headroom_bytes, 15_753);
        assert!((r.rows[0].vs_annex_n - 1.0).abs() < 1e-12);
        // Estimated loop = 2·5,556 + 4·18,944 = 86,888 BT; adaptive DV = 86,888 + 32,320 + 672
        // + 67·512 = 154,184 BT = 19,273 B.
        assert_eq!(r.adaptive.x_bit_times, 86_888);
        assert_eq!(r.adaptive.headroom_bytes, 19_273);
        // mlx5: 10G clamped to 40G, 100 m, MTU 1982: (301 + 216)·40 + 272·1982/100 = 26,071.
        assert_eq!(r.mlx5.xoff_bytes, 20_680 + 5_391);
        assert_eq!(r.rows[2].headroom_bytes, 26_071);
        assert_eq!(r.rows[2].delta_vs_annex_n_bytes, 26_071 - 15_753);
    }

    #[test]
    fn measured_round_trip_is_used() {
        let p = lookup("100g").unwrap();
        let a = p.annex_n_input("3m".parse().unwrap(), 9216);
        let r = compare(&input(
            a,
            Some("1us".parse().unwrap()),
            p.response_bit_times(),
        ))
        .unwrap();
        assert!(!r.adaptive_round_trip_estimated);
        assert_eq!(r.adaptive.headroom_bytes, 56_272);
    }

    /// The adaptive row is the adaptive result for the input given, software terms, rate and
    /// α included (it was rebuilt with them zeroed, so it understated the adaptive headroom).
    #[test]
    fn adaptive_row_keeps_the_software_terms() {
        let p = lookup("100g").unwrap();
        let mut i = input(
            p.annex_n_input("3m".parse().unwrap(), 9216),
            Some("1us".parse().unwrap()),
            p.response_bit_times(),
        );
        i.adaptive.own_lag = "10us".parse().unwrap();
        i.adaptive.peer_reaction = "5us".parse().unwrap();
        i.adaptive.software_rate = Some("40G".parse().unwrap());
        i.adaptive.cell_size = 144;
        i.adaptive.alpha = Some(3.0);
        let want = adaptive::headroom(&i.adaptive).unwrap().headroom_bytes;
        let r = compare(&i).unwrap();
        assert_eq!(r.rows[1].headroom_bytes, want);
        assert!(want > 56_272 * 3, "{want}");
        assert!(
            r.rows[1].note.contains("software terms"),
            "{}",
            r.rows[1].note
        );
    }
}
