//! Headroom over a grid of speeds and distances, for CSV export and SVG plots.
//!
//! For each speed the default interface-delay preset for that speed (the 802.3 response
//! allowance preset, see [`super::presets::for_speed`]) gives the stations' delays; each
//! distance on a logarithmic grid gives an Annex N delay value, and the headroom is that DV
//! times the cell factor α, rounded up to whole cells.

use super::adaptive::cell_alpha;
use super::annex_n::delay_value;
use super::presets;
use super::svg::{self, PlotLabels, Series};
use super::units::{Distance, Medium, Speed};
use super::{ceil_tolerant, round_up_to_cells, HeadroomError, Quantity};
use serde::Serialize;
use std::fmt::Write as _;

/// Inputs of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepInput {
    /// Speeds to sweep (each must have a preset).
    pub speeds: Vec<Speed>,
    /// Shortest distance (> 0, the axis is logarithmic).
    pub from: Distance,
    /// Longest distance (≥ `from`).
    pub to: Distance,
    /// Grid points per decade of distance (≥ 1).
    pub points_per_decade: u32,
    /// Medium; `None` uses each preset's medium.
    pub medium: Option<Medium>,
    /// Maximum frame, octets.
    pub max_frame_octets: u64,
    /// PFC frame, octets.
    pub pfc_frame_octets: u64,
    /// Higher-layer delay, bit times.
    pub higher_layer_bit_times: u64,
    /// Cell size, bytes.
    pub cell_size: u64,
}

/// One grid point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SweepPoint {
    /// Speed, bits per second.
    pub speed_bps: u64,
    /// Distance, metres.
    pub distance_m: f64,
    /// Annex N delay value, bit times.
    pub delay_value_bit_times: u64,
    /// Annex N delay value, bytes (rounded up).
    pub delay_value_bytes: u64,
    /// DV · α rounded up to cells, bytes.
    pub headroom_bytes: u64,
}

/// The sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepResult {
    /// The inputs, echoed.
    pub input: SweepInput,
    /// Preset used for each speed, in `input.speeds` order.
    pub presets: Vec<&'static str>,
    /// Grid points, speed-major.
    pub points: Vec<SweepPoint>,
}

/// Parses `"1m..100km"` (or a single distance `"100m"`) into `(from, to)`.
pub fn parse_range(s: &str) -> Result<(Distance, Distance), HeadroomError> {
    let (a, b) = match s.split_once("..") {
        Some((a, b)) => (a.parse::<Distance>()?, b.parse::<Distance>()?),
        None => {
            let d = s.parse::<Distance>()?;
            (d, d)
        }
    };
    Ok((a, b))
}

/// Log-spaced distances from `from` to `to` inclusive.
pub fn distance_grid(
    from: Distance,
    to: Distance,
    per_decade: u32,
) -> Result<Vec<Distance>, HeadroomError> {
    if from.meters() <= 0.0 {
        return Err(HeadroomError::invalid(
            Quantity::Sweep,
            "the shortest distance must be greater than 0 (the axis is logarithmic)",
        ));
    }
    if to.meters() < from.meters() {
        return Err(HeadroomError::invalid(
            Quantity::Sweep,
            format!("range end {to} is shorter than its start {from}"),
        ));
    }
    if per_decade == 0 {
        return Err(HeadroomError::invalid(
            Quantity::PointsPerDecade,
            "points per decade must be at least 1",
        ));
    }
    let decades = (to.meters() / from.meters()).log10();
    let steps = ceil_tolerant(decades * per_decade as f64) as usize;
    if steps > 100_000 {
        return Err(HeadroomError::invalid(
            Quantity::Sweep,
            "too many grid points",
        ));
    }
    if steps == 0 {
        return Ok(vec![from]);
    }
    (0..=steps)
        .map(|i| {
            let f = i as f64 / steps as f64;
            let m = if i == steps {
                to.meters()
            } else {
                round_significant(from.meters() * (to.meters() / from.meters()).powf(f), 9)
            };
            Distance::from_meters(m)
        })
        .collect()
}

/// Rounds `v` (> 0) to `digits` significant digits, so grid points print as 10 not 9.999999.
fn round_significant(v: f64, digits: i32) -> f64 {
    let mag = 10f64.powi(v.log10().floor() as i32 - digits + 1);
    (v / mag).round() * mag
}

/// Runs the sweep.
pub fn sweep(input: &SweepInput) -> Result<SweepResult, HeadroomError> {
    if input.speeds.is_empty() {
        return Err(HeadroomError::invalid(
            Quantity::Speed,
            "give at least one speed to sweep",
        ));
    }
    let grid = distance_grid(input.from, input.to, input.points_per_decade)?;
    let alpha = cell_alpha(input.cell_size, input.max_frame_octets)?.alpha;
    let mut points = Vec::new();
    let mut names = Vec::new();
    for &speed in &input.speeds {
        let preset = presets::for_speed_or_err(speed)?;
        names.push(preset.name);
        for &d in &grid {
            let mut a = preset.annex_n_input(d, input.max_frame_octets);
            if let Some(m) = input.medium {
                a.medium = m;
            }
            a.pfc_frame_octets = input.pfc_frame_octets;
            a.higher_layer_bit_times = input.higher_layer_bit_times;
            let r = delay_value(&a)?;
            let scaled = ceil_tolerant(r.delay_value_bit_times as f64 * alpha / 8.0) as u64;
            points.push(SweepPoint {
                speed_bps: speed.bps(),
                distance_m: d.meters(),
                delay_value_bit_times: r.delay_value_bit_times,
                delay_value_bytes: r.delay_value_bytes,
                headroom_bytes: round_up_to_cells(scaled.max(r.delay_value_bytes), input.cell_size),
            });
        }
    }
    Ok(SweepResult {
        input: input.clone(),
        presets: names,
        points,
    })
}

/// CSV header line (without newline).
pub const CSV_HEADER: &str =
    "speed_bps,speed,distance_m,delay_value_bit_times,delay_value_bytes,headroom_bytes";

/// The sweep as CSV, one line per grid point, with a header.
pub fn to_csv(r: &SweepResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{CSV_HEADER}");
    for p in &r.points {
        let speed = Speed::from_bps(p.speed_bps)
            .map(|s| s.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{}",
            p.speed_bps,
            speed,
            p.distance_m,
            p.delay_value_bit_times,
            p.delay_value_bytes,
            p.headroom_bytes
        );
    }
    s
}

fn distance_tick(m: f64) -> String {
    Distance::from_meters(m)
        .map(|d| d.to_string())
        .unwrap_or_default()
}

fn bytes_tick(b: f64) -> String {
    if b >= 1e9 {
        format!("{} GB", super::units::trim_float(b / 1e9))
    } else if b >= 1e6 {
        format!("{} MB", super::units::trim_float(b / 1e6))
    } else if b >= 1e3 {
        format!("{} kB", super::units::trim_float(b / 1e3))
    } else {
        format!("{} B", super::units::trim_float(b))
    }
}

/// The sweep as an SVG plot: log distance on x, headroom bytes (log) on y, one series per speed.
pub fn to_svg(r: &SweepResult) -> String {
    let series: Vec<Series> = r
        .input
        .speeds
        .iter()
        .zip(&r.presets)
        .map(|(speed, preset)| Series {
            label: format!("{speed} ({preset})"),
            points: r
                .points
                .iter()
                .filter(|p| p.speed_bps == speed.bps())
                .map(|p| (p.distance_m, p.headroom_bytes as f64))
                .collect(),
        })
        .collect();
    svg::render(
        &series,
        &PlotLabels {
            title: "PFC headroom vs cable length (802.1Q Annex N)",
            x_label: "cable length (log scale)",
            y_label: "headroom, bytes (log scale)",
            x_tick: distance_tick,
            y_tick: bytes_tick,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> SweepInput {
        let (from, to) = parse_range("1m..100km").unwrap();
        SweepInput {
            speeds: ["10G", "25G", "100G", "400G"]
                .iter()
                .map(|s| s.parse().unwrap())
                .collect(),
            from,
            to,
            points_per_decade: 4,
            medium: None,
            max_frame_octets: 9216,
            pfc_frame_octets: 64,
            higher_layer_bit_times: 0,
            cell_size: 1,
        }
    }

    #[test]
    fn grid_is_log_spaced_and_inclusive() {
        let (a, b) = parse_range("1m..100km").unwrap();
        let g = distance_grid(a, b, 4).unwrap();
        assert_eq!(g.len(), 21);
        assert_eq!(g[0].meters(), 1.0);
        assert_eq!(g[20].meters(), 100_000.0);
        assert_eq!(g[4].meters(), 10.0);
        assert_eq!(g[8].meters(), 100.0);
        assert_eq!(distance_grid(a, a, 4).unwrap().len(), 1);
        assert!(distance_grid(b, a, 4).is_err());
        let zero = Distance::from_meters(0.0).unwrap();
        assert_eq!(
            distance_grid(zero, b, 4).unwrap_err().quantity(),
            Quantity::Sweep
        );
        assert!(parse_range("-1m..2km").is_err());
        // A grid of 0 points per decade is that flag's fault, not the range's.
        assert_eq!(
            distance_grid(a, b, 0).unwrap_err().quantity(),
            Quantity::PointsPerDecade
        );
    }

    #[test]
    fn sweep_rows_and_monotonicity() {
        let r = sweep(&input()).unwrap();
        assert_eq!(r.points.len(), 4 * 21);
        assert_eq!(r.presets, vec!["10g", "25g", "100g", "400g"]);
        for w in r.points.windows(2) {
            if w[0].speed_bps == w[1].speed_bps {
                assert!(w[1].headroom_bytes >= w[0].headroom_bytes);
            }
        }
        // 100G at 100 km of fibre: cable = 100 km / 1.98e8 m/s = 505.05 us = 50,505,051 BT.
        let p = r
            .points
            .iter()
            .find(|p| p.speed_bps == 100_000_000_000 && p.distance_m == 100_000.0)
            .unwrap();
        assert_eq!(
            p.delay_value_bit_times,
            147_776 + 672 + 2 * 50_505_051 + 2 * 201_728
        );
        let csv = to_csv(&r);
        assert_eq!(csv.lines().count(), 1 + 84);
        assert!(csv.starts_with(CSV_HEADER));
    }

    #[test]
    fn svg_has_one_series_per_speed() {
        let r = sweep(&input()).unwrap();
        let svg = to_svg(&r);
        let names = crate::headroom::svg::tests::check_well_formed(&svg).unwrap();
        assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 4);
        assert!(svg.contains("400 Gb/s (400g)"));
    }

    #[test]
    fn unknown_speed_is_an_error() {
        let mut i = input();
        i.speeds = vec!["800G".parse().unwrap()];
        assert_eq!(sweep(&i).unwrap_err().quantity(), Quantity::Preset);
        i.speeds.clear();
        assert_eq!(sweep(&i).unwrap_err().quantity(), Quantity::Speed);
    }
}
