//! `lossless headroom`: the headroom calculator on the command line.
//!
//! Each subcommand sizes one thing and prints a table of the formula's terms (bit times,
//! bytes, share of the total) followed by the result, or JSON with `--json`. The math lives in
//! [`crate::headroom`]; this module turns the flags (`args`) into the models' inputs, calls
//! them, and prints the results as [`crate::headroom::report`] renders them, or as JSON.
//! See `docs/headroom.md` for every subcommand, flag and formula.

use crate::headroom::adaptive::{self, AdaptiveInput, RoundTrip};
use crate::headroom::annex_n::{self, AnnexNInput, StationDelays};
use crate::headroom::compare::{self, CompareInput, CompareReport};
use crate::headroom::credit::{self, CreditInput};
use crate::headroom::fabric::{self, FabricInput};
use crate::headroom::presets::{self, PhyPreset, PRESETS};
use crate::headroom::report::{AdaptiveReport, AnnexNReport, PresetTable};
use crate::headroom::sweep::{self, SweepInput};
use crate::headroom::thresholds::{self, ThresholdInput};
use crate::headroom::{
    check_bit_times, frame_bit_times, Duration, HeadroomError, Medium, Quantity, Speed,
    BIT_TIMES_PER_QUANTUM,
};
use serde::Serialize;
use std::io::{self, Write};
use std::path::PathBuf;

mod args;

pub use args::*;

/// Errors of `lossless headroom`.
#[derive(Debug, thiserror::Error)]
pub enum HeadroomCliError {
    /// A model rejected an input; `flag` is the command-line argument at fault.
    #[error("{flag}: {source}")]
    Model {
        /// The flag (or flags) at fault.
        flag: &'static str,
        /// The model's error.
        #[source]
        source: HeadroomError,
    },
    /// `--preset` is for another speed than `--speed`, and not every delay was given.
    #[error(
        "--preset {preset} is for {preset_speed}, not --speed {speed}: a preset's interface \
         delays (bit times) and response allowance (quanta) hold only at its own speed; give \
         all of --local-tx, --local-rx, --remote-tx, --remote-rx and --response-quanta for \
         {speed}, or leave out --preset or --speed"
    )]
    PresetSpeed {
        /// The preset named.
        preset: &'static str,
        /// Its speed.
        preset_speed: Speed,
        /// The speed given.
        speed: Speed,
    },
    /// No preset exists for `--speed`, and not every delay was given.
    #[error(
        "--speed {speed}: no --preset for this speed (see `lossless headroom presets`); give \
         all of --local-tx, --local-rx, --remote-tx, --remote-rx and --response-quanta"
    )]
    NoPreset {
        /// The speed given.
        speed: Speed,
    },
    /// A required combination of arguments was missing.
    #[error("missing argument: {0}")]
    Missing(String),
    /// Writing output failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file (or `<stdout>`).
        path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// JSON encoding failed.
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl From<HeadroomError> for HeadroomCliError {
    fn from(e: HeadroomError) -> Self {
        HeadroomCliError::Model {
            flag: flag_for(e.quantity()),
            source: e,
        }
    }
}

/// The command-line flag that sets `q`.
pub fn flag_for(q: Quantity) -> &'static str {
    match q {
        Quantity::Speed => "--speed",
        Quantity::CableLength => "--length",
        Quantity::VelocityFactor => "--medium",
        Quantity::MaxFrame => "--max-frame",
        Quantity::PfcFrame => "--pfc-frame",
        Quantity::CellSize => "--cell-size",
        Quantity::Alpha => "--alpha",
        Quantity::Timestamps => "--t1/--t2/--t3/--t4",
        Quantity::ResponseQuanta => "--response-quanta",
        Quantity::PeerResponse => "--peer-response",
        Quantity::OwnLag => "--own-lag",
        Quantity::PeerReaction => "--peer-reaction",
        Quantity::HigherLayerDelay => "--hd",
        Quantity::LocalTx => "--local-tx",
        Quantity::LocalRx => "--local-rx",
        Quantity::RemoteTx => "--remote-tx",
        Quantity::RemoteRx => "--remote-rx",
        Quantity::GenerationTime => "--t-gen",
        Quantity::LinkDelay => "--t-link",
        Quantity::ActivationTime => "--t-act",
        Quantity::RoundTrip => "--rtt",
        Quantity::Buffer => "--buffer",
        Quantity::Hysteresis => "--hysteresis",
        Quantity::CreditRate => "--credit-rate",
        Quantity::SpeedUp => "--speedup",
        Quantity::Load => "--load",
        Quantity::OverflowProbability => "--p-max",
        Quantity::Duration => "duration",
        Quantity::Preset => "--preset",
        Quantity::Sweep => "--distance",
        Quantity::PointsPerDecade => "--points-per-decade",
    }
}

// ---- resolving a link ----

/// A link after defaults and overrides.
struct Link {
    /// The preset its unspecified delays and medium came from (`None`: all were given).
    preset: Option<&'static PhyPreset>,
    annex: AnnexNInput,
    response_bit_times: u64,
}

impl Link {
    /// The preset's name, as the report prints it.
    fn preset_name(&self) -> &'static str {
        self.preset.map_or("none (delays given)", |p| p.name)
    }
}

/// A preset's interface delays (bit times) and response allowance (quanta) hold only at its
/// own speed. They are used for what the flags leave out, so a preset whose speed is not the
/// link's, or a speed with no preset, needs every delay and the allowance given explicitly.
fn resolve_link(l: &LinkArgs) -> Result<Link, HeadroomCliError> {
    let speed = match (l.speed, l.preset) {
        (Some(s), _) => s,
        (None, Some(p)) => p.speed(),
        (None, None) => {
            return Err(HeadroomCliError::Missing(
                "give --preset NAME or --speed SPEED (e.g. --preset 10gbase-t or --speed 100G)"
                    .into(),
            ))
        }
    };
    let all_given = l.local_tx.is_some()
        && l.local_rx.is_some()
        && l.remote_tx.is_some()
        && l.remote_rx.is_some()
        && l.response_quanta.is_some();
    let preset = l.preset.or_else(|| presets::for_speed(speed));
    match preset {
        Some(p) if p.speed() != speed && !all_given => {
            return Err(HeadroomCliError::PresetSpeed {
                preset: p.name,
                preset_speed: p.speed(),
                speed,
            })
        }
        None if !all_given => return Err(HeadroomCliError::NoPreset { speed }),
        _ => {}
    }
    // With no preset every delay is given, so the zero stand-ins below are never used.
    let station = preset.map_or(
        StationDelays {
            tx_bit_times: 0,
            rx_bit_times: 0,
        },
        |p| p.station_delays(),
    );
    let a = AnnexNInput {
        speed,
        cable_length: l.length,
        medium: l
            .medium
            .or(preset.map(|p| p.medium))
            .unwrap_or(Medium::Fiber),
        max_frame_octets: l.max_frame,
        pfc_frame_octets: l.pfc_frame,
        local: StationDelays {
            tx_bit_times: l.local_tx.unwrap_or(station.tx_bit_times),
            rx_bit_times: l.local_rx.unwrap_or(station.rx_bit_times),
        },
        remote: StationDelays {
            tx_bit_times: l.remote_tx.unwrap_or(station.tx_bit_times),
            rx_bit_times: l.remote_rx.unwrap_or(station.rx_bit_times),
        },
        higher_layer_bit_times: l.hd,
    };
    a.validate()?;
    let quanta = l
        .response_quanta
        .or(preset.map(|p| p.response_quanta))
        .unwrap_or(0);
    let response_bit_times = quanta.saturating_mul(BIT_TIMES_PER_QUANTUM);
    check_bit_times(Quantity::ResponseQuanta, response_bit_times)?;
    Ok(Link {
        preset,
        annex: a,
        response_bit_times,
    })
}

// ---- entry points ----

/// Runs `lossless headroom` and prints to standard output.
pub fn run(args: &HeadroomArgs) -> Result<(), HeadroomCliError> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    execute(args, &mut out)
}

/// Runs `lossless headroom`, writing what would go to standard output into `out`
/// (files named by `--csv`/`--svg` are still written).
pub fn execute(args: &HeadroomArgs, out: &mut dyn Write) -> Result<(), HeadroomCliError> {
    let text = match &args.command {
        HeadroomCommand::AnnexN(a) => annex_n_cmd(a, args.json)?,
        HeadroomCommand::Adaptive(a) => adaptive_cmd(a, args.json)?,
        HeadroomCommand::Thresholds(a) => thresholds_cmd(a, args.json)?,
        HeadroomCommand::Credit(a) => credit_cmd(a, args.json)?,
        HeadroomCommand::Fabric(a) => fabric_cmd(a, args.json)?,
        HeadroomCommand::Sweep(a) => sweep_cmd(a, args.json)?,
        HeadroomCommand::Presets => presets_cmd(args.json)?,
    };
    out.write_all(text.as_bytes())
        .map_err(|source| HeadroomCliError::Io {
            path: "<stdout>".into(),
            source,
        })
}

fn to_json<T: Serialize>(v: &T) -> Result<String, HeadroomCliError> {
    Ok(serde_json::to_string_pretty(v)? + "\n")
}

/// `r` as JSON, or as text.
fn emit<T: Serialize + std::fmt::Display>(json: bool, r: &T) -> Result<String, HeadroomCliError> {
    if json {
        to_json(r)
    } else {
        Ok(r.to_string())
    }
}

/// The adaptive model's input for `link` with the hardware formula's zero software terms.
fn hardware_adaptive(
    link: &Link,
    round_trip: RoundTrip,
    peer_response_bit_times: u64,
    cell_size: u64,
) -> AdaptiveInput {
    AdaptiveInput {
        speed: link.annex.speed,
        round_trip,
        max_frame_octets: link.annex.max_frame_octets,
        pfc_frame_octets: link.annex.pfc_frame_octets,
        peer_response_bit_times,
        own_lag: Duration::ZERO,
        peer_reaction: Duration::ZERO,
        software_rate: None,
        cell_size,
        alpha: None,
    }
}

fn compare_report(
    link: &Link,
    adaptive: AdaptiveInput,
    round_trip_estimated: bool,
    c: &CompareArgs,
) -> Result<CompareReport, HeadroomCliError> {
    Ok(compare::compare(&CompareInput {
        annex_n: link.annex.clone(),
        adaptive,
        round_trip_estimated,
        sonic_asic: c.sonic_asic,
    })?)
}

fn annex_n_cmd(a: &AnnexNArgs, json: bool) -> Result<String, HeadroomCliError> {
    let link = resolve_link(&a.link)?;
    let r = annex_n::delay_value(&link.annex)?;
    let cmp = if a.compare.compare {
        let (rtt, estimated) = match a.rtt {
            Some(d) => (d, false),
            None => (compare::estimated_round_trip(&link.annex)?, true),
        };
        let adaptive = hardware_adaptive(
            &link,
            RoundTrip::Measured(rtt),
            link.response_bit_times,
            a.cell_size,
        );
        Some(compare_report(&link, adaptive, estimated, &a.compare)?)
    } else {
        None
    };
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            preset: Option<&'static str>,
            annex_n: &'a annex_n::AnnexNResult,
            #[serde(skip_serializing_if = "Option::is_none")]
            compare: Option<&'a CompareReport>,
        }
        return to_json(&Out {
            preset: link.preset.map(|p| p.name),
            annex_n: &r,
            compare: cmp.as_ref(),
        });
    }
    Ok(AnnexNReport {
        result: &r,
        preset: link.preset_name(),
        compare: cmp.as_ref(),
    }
    .to_string())
}

fn adaptive_cmd(a: &AdaptiveArgs, json: bool) -> Result<String, HeadroomCliError> {
    let link = resolve_link(&a.link)?;
    let round_trip = match (a.rtt, a.t1, a.t2, a.t3, a.t4) {
        (Some(d), ..) => RoundTrip::Measured(d),
        (None, Some(t1), Some(t2), Some(t3), Some(t4)) => RoundTrip::Timestamps { t1, t2, t3, t4 },
        _ => {
            return Err(HeadroomCliError::Missing(
                "give the measured round trip with --rtt DURATION or all of --t1 --t2 --t3 --t4"
                    .into(),
            ))
        }
    };
    let peer = match a.peer_response {
        Some(d) => link.annex.speed.bit_times_in(d, Quantity::PeerResponse)?,
        None => link.response_bit_times,
    };
    let input = AdaptiveInput {
        own_lag: a.own_lag,
        peer_reaction: a.peer_reaction,
        software_rate: a.software_rate,
        alpha: a.alpha,
        ..hardware_adaptive(&link, round_trip, peer, a.cell_size)
    };
    let r = adaptive::headroom(&input)?;
    let cmp = if a.compare.compare {
        Some(compare_report(&link, input, false, &a.compare)?)
    } else {
        None
    };
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            adaptive: &'a adaptive::AdaptiveResult,
            #[serde(skip_serializing_if = "Option::is_none")]
            compare: Option<&'a CompareReport>,
        }
        return to_json(&Out {
            adaptive: &r,
            compare: cmp.as_ref(),
        });
    }
    Ok(AdaptiveReport {
        result: &r,
        compare: cmp.as_ref(),
    }
    .to_string())
}

fn thresholds_cmd(a: &ThresholdsArgs, json: bool) -> Result<String, HeadroomCliError> {
    let link = resolve_link(&a.link)?;
    let l = &link.annex;
    let speed = l.speed;
    let max = l.max_frame_octets;
    // The defaults cover Annex N's terms and the peer's response, as the daemon does with its
    // measured loop X: T_gen holds HD, T_link is half the loop (2·cable + both stations'
    // TX + RX), T_act the response allowance and the frame the peer has started.
    let t_gen = a.t_gen.unwrap_or_else(|| {
        speed.duration_of(
            frame_bit_times(max) + frame_bit_times(l.pfc_frame_octets) + l.higher_layer_bit_times,
        )
    });
    let t_link = match a.t_link {
        Some(t) => t,
        None => Duration::from_secs(compare::estimated_round_trip(l)?.seconds() / 2.0)?,
    };
    let t_act = a
        .t_act
        .unwrap_or_else(|| speed.duration_of(link.response_bit_times + frame_bit_times(max)));
    let r = thresholds::thresholds(&ThresholdInput {
        speed,
        buffer_bytes: a.buffer.0,
        mtu_bytes: max,
        t_gen,
        t_link,
        t_act,
        hysteresis_bytes: a.hysteresis.map(|h| h.0),
        cell_size: a.cell_size,
    })
    .map_err(|e| {
        // A default time too long comes from the link flags it was derived from.
        let flag = match e.quantity() {
            Quantity::GenerationTime if a.t_gen.is_none() => "--hd (in the default --t-gen)",
            Quantity::LinkDelay if a.t_link.is_none() => {
                "--length/--local-*/--remote-* (in the default --t-link)"
            }
            Quantity::ActivationTime if a.t_act.is_none() => {
                "--response-quanta (in the default --t-act)"
            }
            q => flag_for(q),
        };
        HeadroomCliError::Model { flag, source: e }
    })?;
    emit(json, &r)
}

fn credit_cmd(a: &CreditArgs, json: bool) -> Result<String, HeadroomCliError> {
    let rtt =
        match (a.rtt, a.distance) {
            (Some(d), _) => d,
            (None, Some(len)) => {
                let one = len.propagation(a.medium);
                one.plus(one)
            }
            (None, None) => return Err(HeadroomCliError::Missing(
                "give the round trip with --rtt DURATION or a cable length with --distance LENGTH"
                    .into(),
            )),
        };
    let r = credit::credits(&CreditInput {
        speed: a.speed,
        rtt,
        credit_rate_hz: a.credit_rate,
        speedup: a.speedup,
        cell_size: a.cell_size,
    })
    .map_err(|e| match e.quantity() {
        Quantity::RoundTrip if a.rtt.is_none() => HeadroomCliError::Model {
            flag: "--distance",
            source: e,
        },
        _ => e.into(),
    })?;
    emit(json, &r)
}

fn fabric_cmd(a: &FabricArgs, json: bool) -> Result<String, HeadroomCliError> {
    let r = fabric::fabric_buffer(&FabricInput {
        load: a.load,
        overflow_probability: a.p_max,
        cell_size: a.cell_size,
    })?;
    emit(json, &r)
}

fn sweep_cmd(a: &SweepArgs, json: bool) -> Result<String, HeadroomCliError> {
    let (from, to) = sweep::parse_range(&a.distance).map_err(|e| HeadroomCliError::Model {
        flag: "--distance",
        source: e,
    })?;
    let r = sweep::sweep(&SweepInput {
        speeds: a.speeds.clone(),
        from,
        to,
        points_per_decade: a.points_per_decade,
        medium: a.medium,
        max_frame_octets: a.max_frame,
        pfc_frame_octets: a.pfc_frame,
        higher_layer_bit_times: a.hd,
        cell_size: a.cell_size,
    })
    .map_err(|e| match e.quantity() {
        Quantity::Preset | Quantity::Speed => HeadroomCliError::Model {
            flag: "--speeds",
            source: e,
        },
        Quantity::CableLength => HeadroomCliError::Model {
            flag: "--distance",
            source: e,
        },
        _ => e.into(),
    })?;
    let csv = sweep::to_csv(&r);
    let mut stdout = String::new();
    match &a.csv {
        Some(path) => write_file(path, &csv)?,
        None if !json => stdout.push_str(&csv),
        None => {}
    }
    if let Some(path) = &a.svg {
        write_file(path, &sweep::to_svg(&r))?;
    }
    if json {
        stdout.push_str(&to_json(&r)?);
    }
    Ok(stdout)
}

fn presets_cmd(json: bool) -> Result<String, HeadroomCliError> {
    if json {
        return to_json(&PRESETS);
    }
    Ok(PresetTable(PRESETS).to_string())
}

fn write_file(path: &PathBuf, text: &str) -> Result<(), HeadroomCliError> {
    std::fs::write(path, text).map_err(|source| HeadroomCliError::Io {
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Parser, Subcommand};

    #[derive(Debug, Parser)]
    #[command(name = "lossless")]
    struct Cli {
        #[command(subcommand)]
        cmd: Top,
    }

    #[derive(Debug, Subcommand)]
    enum Top {
        Headroom(HeadroomArgs),
    }

    fn parse(args: &[&str]) -> Result<HeadroomArgs, clap::Error> {
        let mut v = vec!["lossless", "headroom"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| match c.cmd {
            Top::Headroom(h) => h,
        })
    }

    fn run_ok(args: &[&str]) -> String {
        let a = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let mut out = Vec::new();
        execute(&a, &mut out).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        String::from_utf8(out).unwrap()
    }

    fn run_err(args: &[&str]) -> String {
        match parse(args) {
            Err(e) => e.to_string(),
            Ok(a) => execute(&a, &mut Vec::new()).unwrap_err().to_string(),
        }
    }

    const EXAMPLE: &[&str] = &[
        "annex-n",
        "--preset",
        "10gbase-t",
        "--length",
        "100m",
        "--max-frame",
        "2000",
        "--hd",
        "6144",
    ];

    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn annex_n_table_reproduces_the_example() {
        let out = run_ok(EXAMPLE);
        assert!(out.contains("126,024"), "{out}");
        assert!(out.contains("15,753"));
        for t in [
            "2 x max frame",
            "PFC frame",
            "2 x cable delay",
            "TX s1 + RX s2",
            "higher-layer delay HD",
        ] {
            assert!(out.contains(t), "missing {t}: {out}");
        }
        assert!(out.contains("32,320") && out.contains("25.6%"));
    }

    #[test]
    fn annex_n_json() {
        let mut args = vec!["--json"];
        args.extend_from_slice(EXAMPLE);
        let v: serde_json::Value = serde_json::from_str(&run_ok(&args)).unwrap();
        assert_eq!(v["annex_n"]["delay_value_bit_times"], 126_024);
        assert_eq!(v["annex_n"]["terms"].as_array().unwrap().len(), 6);
        assert_eq!(v["preset"], "10gbase-t");
        // --json after the subcommand works too (global flag).
        let mut args = EXAMPLE.to_vec();
        args.push("--json");
        let v: serde_json::Value = serde_json::from_str(&run_ok(&args)).unwrap();
        assert_eq!(v["annex_n"]["delay_value_bytes"], 15_753);
    }

    #[test]
    fn compare_table_has_every_model() {
        let mut args = EXAMPLE.to_vec();
        args.push("--compare");
        let out = run_ok(&args);
        for m in [
            "802.1Q Annex N",
            "adaptive",
            "Linux mlx5",
            "SONiC (Mellanox) xoff",
            "SONiC (Mellanox) size",
        ] {
            assert!(out.contains(m), "missing {m}: {out}");
        }
        assert!(out.contains("26,071"), "{out}");
        let mut args = vec!["--json"];
        args.extend_from_slice(EXAMPLE);
        args.push("--compare");
        let v: serde_json::Value = serde_json::from_str(&run_ok(&args)).unwrap();
        assert_eq!(v["compare"]["rows"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn adaptive_from_timestamps_and_rtt() {
        let out = run_ok(&[
            "adaptive", "--speed", "100G", "--t1", "0ns", "--t2", "10us", "--t3", "10.2us", "--t4",
            "1.2us",
        ]);
        assert!(out.contains("56,272"), "{out}");
        // Epoch timestamps are read exactly: the loop is 100 ns (it was 0 through f64 seconds).
        let v: serde_json::Value = serde_json::from_str(&run_ok(&[
            "--json",
            "adaptive",
            "--speed",
            "100G",
            "--t1",
            "1700000000.000000120s",
            "--t2",
            "1700000005.000000000s",
            "--t3",
            "1700000005.000000100s",
            "--t4",
            "1700000000.000000320s",
        ]))
        .unwrap();
        assert_eq!(v["adaptive"]["x_bit_times"], 10_000, "{v}");
        let out = run_ok(&[
            "--json",
            "adaptive",
            "--speed",
            "100G",
            "--rtt",
            "1us",
            "--cell-size",
            "144",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["adaptive"]["headroom_bytes"], 126_720);
        let out = run_ok(&[
            "adaptive",
            "--speed",
            "100G",
            "--rtt",
            "1us",
            "--compare",
            "--length",
            "3m",
        ]);
        assert!(out.contains("measured loop"), "{out}");
        // The comparison's adaptive row is this result, software terms and alpha included.
        let v: serde_json::Value = serde_json::from_str(&run_ok(&[
            "--json",
            "adaptive",
            "--speed",
            "100G",
            "--rtt",
            "1us",
            "--own-lag",
            "10us",
            "--peer-reaction",
            "5us",
            "--software-rate",
            "40G",
            "--alpha",
            "1.5",
            "--compare",
        ]))
        .unwrap();
        let headroom = &v["adaptive"]["headroom_bytes"];
        assert_eq!(&v["compare"]["rows"][1]["headroom_bytes"], headroom, "{v}");
        assert_eq!(&v["compare"]["adaptive"]["headroom_bytes"], headroom);
    }

    #[test]
    fn thresholds_table() {
        let out = run_ok(&[
            "thresholds",
            "--speed",
            "100G",
            "--buffer",
            "1MiB",
            "--medium",
            "fiber",
        ]);
        assert!(out.contains("941,744") && out.contains("866,442"), "{out}");
        assert!(out.contains("reaction data") && out.contains("wire data"));
        // With the one-way delay given as cable propagation only (the old default), the
        // worked example of thresholds.rs.
        let out = run_ok(&[
            "thresholds",
            "--speed",
            "100G",
            "--buffer",
            "1MiB",
            "--t-link",
            "505.0505ns",
        ]);
        assert!(out.contains("992,176") && out.contains("942,090"), "{out}");
    }

    /// The default T_link and T_gen hold the interface delays and HD, so the headroom covers
    /// Annex N's delay value plus the peer's response allowance (it was 56,400 B with or
    /// without the delays, below Annex N's 81,615 B for the same link).
    #[test]
    fn thresholds_cover_annex_n_and_the_link_flags() {
        let json = |args: &[&str]| -> serde_json::Value {
            let mut v = vec!["--json"];
            v.extend_from_slice(args);
            serde_json::from_str(&run_ok(&v)).unwrap()
        };
        let link: &[&[&str]] = &[
            &["--speed", "100G"],
            &[
                "--speed",
                "100G",
                "--hd",
                "100000",
                "--local-tx",
                "500000",
                "--remote-rx",
                "500000",
            ],
        ];
        for flags in link {
            let mut t = vec!["thresholds", "--buffer", "4MiB"];
            t.extend_from_slice(flags);
            let mut n = vec!["annex-n"];
            n.extend_from_slice(flags);
            let thr = json(&t)["headroom_bytes"].as_u64().unwrap();
            let dv = json(&n)["annex_n"]["delay_value_bytes"].as_u64().unwrap();
            // 394 quanta x 64 B of response allowance, and up to 2 B of per-term rounding.
            assert!(
                (dv + 25_216..=dv + 25_218).contains(&thr),
                "{flags:?}: thresholds {thr}, Annex N {dv}"
            );
        }
    }

    #[test]
    fn credit_and_fabric() {
        let out = run_ok(&[
            "credit",
            "--speed",
            "100G",
            "--rtt",
            "1us",
            "--credit-rate",
            "10MHz",
            "--speedup",
            "1.2",
            "--cell-size",
            "64",
        ]);
        assert!(out.contains("12,544") && out.contains("1,536"), "{out}");
        let v: serde_json::Value = serde_json::from_str(&run_ok(&[
            "--json",
            "credit",
            "--speed",
            "400G",
            "--distance",
            "10km",
            "--credit-rate",
            "1e6",
        ]))
        .unwrap();
        assert_eq!(v["bdp_bytes"], 5_050_506);
        assert!(run_ok(&["fabric", "--load", "0.99999999", "--p-max", "1e-6"]).contains("cells"));
        let out = run_ok(&[
            "fabric",
            "--load",
            "0.8",
            "--p-max",
            "1e-6",
            "--cell-size",
            "64",
        ]);
        assert!(out.contains("32 cells = 2,048 bytes"), "{out}");
    }

    #[test]
    fn sweep_csv_and_svg_files() {
        let dir = std::env::temp_dir().join(format!("lossless-headroom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let svg = dir.join("plot.svg");
        let csv = dir.join("sweep.csv");
        let out = run_ok(&[
            "sweep",
            "--speeds",
            "10G,100G",
            "--distance",
            "1m..1km",
            "--points-per-decade",
            "2",
            "--svg",
            svg.to_str().unwrap(),
        ]);
        assert_eq!(out.lines().count(), 1 + 2 * 7, "{out}");
        assert!(out.starts_with(sweep::CSV_HEADER));
        let text = std::fs::read_to_string(&svg).unwrap();
        let names = crate::headroom::svg::tests::check_well_formed(&text).unwrap();
        assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 2);
        let out = run_ok(&["sweep", "--speeds", "25G", "--csv", csv.to_str().unwrap()]);
        assert!(out.is_empty());
        assert!(std::fs::read_to_string(&csv)
            .unwrap()
            .starts_with(sweep::CSV_HEADER));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn presets_list() {
        let out = run_ok(&["presets"]);
        assert!(out.contains("10gbase-t") && out.contains("37,888") && out.contains("905"));
    }

    #[test]
    fn errors_name_the_argument() {
        let cases: &[(&[&str], &str)] = &[
            (&["annex-n", "--speed", "0G"], "--speed"),
            (
                &["annex-n", "--preset", "10gbase-t", "--length", "-5m"],
                "--length",
            ),
            (&["annex-n", "--preset", "nope"], "--preset"),
            (&["annex-n"], "--preset"),
            (&["annex-n", "--speed", "800G"], "--preset"),
            (
                &["annex-n", "--preset", "100g", "--max-frame", "10"],
                "--max-frame",
            ),
            (&["fabric", "--load", "1.0", "--p-max", "1e-6"], "--load"),
            (&["fabric", "--load", "0.5", "--p-max", "1.5"], "--p-max"),
            (&["fabric", "--load", "-0.5", "--p-max", "0.01"], "--load"),
            (
                &["thresholds", "--speed", "100G", "--buffer", "10KB"],
                "--buffer",
            ),
            (&["adaptive", "--speed", "100G"], "--rtt"),
            (
                &[
                    "adaptive",
                    "--speed",
                    "100G",
                    "--rtt",
                    "1us",
                    "--cell-size",
                    "0",
                ],
                "--cell-size",
            ),
            (
                &["credit", "--speed", "100G", "--credit-rate", "1e6"],
                "--rtt",
            ),
            (
                &[
                    "credit",
                    "--speed",
                    "100G",
                    "--rtt",
                    "1us",
                    "--credit-rate",
                    "0",
                ],
                "--credit-rate",
            ),
            (
                &[
                    "credit",
                    "--speed",
                    "100G",
                    "--rtt",
                    "1us",
                    "--credit-rate",
                    "1e6",
                    "--speedup",
                    "0.5",
                ],
                "--speedup",
            ),
            (&["sweep", "--speeds", "800G"], "--speeds"),
            (
                &["annex-n", "--preset", "100g", "--medium", "glass"],
                "--medium",
            ),
            (
                &[
                    "thresholds",
                    "--speed",
                    "100G",
                    "--buffer",
                    "1MiB",
                    "--hysteresis",
                    "2MiB",
                ],
                "--hysteresis",
            ),
            (
                &[
                    "adaptive", "--speed", "100G", "--t1", "5us", "--t2", "0us", "--t3", "0.1us",
                    "--t4", "1us",
                ],
                "--t1",
            ),
            (
                &[
                    "adaptive", "--speed", "100G", "--rtt", "1us", "--alpha", "0.5",
                ],
                "--alpha",
            ),
            (&["fabric", "--load", "0.5", "--p-max", "0"], "--p-max"),
            (&["sweep", "--distance", "0m..1km"], "--distance"),
            (
                &["sweep", "--points-per-decade", "0"],
                "--points-per-decade",
            ),
            (
                &["fabric", "--load", "0.9999999999999", "--p-max", "1e-6"],
                "--load",
            ),
        ];
        for (args, flag) in cases {
            let msg = run_err(args);
            assert!(msg.contains(flag), "{args:?}: {msg:?} should name {flag}");
        }
        // A preset's delays in bit times and quanta are for its own speed.
        let msg = run_err(&["annex-n", "--preset", "10g", "--speed", "100G"]);
        assert!(
            msg.contains("--preset 10g") && msg.contains("--speed 100"),
            "{msg}"
        );
        let msg = run_err(&[
            "adaptive",
            "--speed",
            "1G",
            "--rtt",
            "1us",
            "--local-tx",
            "0",
        ]);
        assert!(msg.contains("--response-quanta"), "{msg}");
        // The audit's inputs that wrapped, panicked or hung: now errors naming the flag.
        let limits: &[(&str, &[&str], &str)] = &[
            (
                "credit --speed 400G --rtt 1us --credit-rate 1 --speedup 1e10 --cell-size 64",
                &[],
                "--speedup",
            ),
            (
                "credit --speed 400G --credit-rate 1e6",
                &["--distance", "1e300km"],
                "--distance",
            ),
            (
                "adaptive --speed 10G --rtt 1us --alpha 1e300 --cell-size 64",
                &[],
                "--alpha",
            ),
            (
                "adaptive --speed 10G --rtt 1us --own-lag 1e9s",
                &[],
                "--own-lag",
            ),
            (
                "adaptive --speed 10G --rtt 1us --peer-reaction 1e9s",
                &[],
                "--peer-reaction",
            ),
            (
                "adaptive --speed 10G --rtt 1us --peer-response 1e9s",
                &[],
                "--peer-response",
            ),
            ("adaptive --speed 10G --rtt 1e9s", &[], "--rtt"),
            (
                "adaptive --speed 10G --rtt 1us --max-frame 20000000000",
                &[],
                "--max-frame",
            ),
            (
                "adaptive --speed 10G --rtt 1us --response-quanta 18446744073709551615",
                &[],
                "--response-quanta",
            ),
            ("annex-n --speed 10G --length 1e300km", &[], "--length"),
            ("annex-n --speed 10G --hd 18446744073709551000", &[], "--hd"),
            (
                "annex-n --speed 10G --local-tx 18446744073709551615",
                &[],
                "--local-tx",
            ),
            (
                "annex-n --speed 10G --remote-rx 18446744073709551615",
                &[],
                "--remote-rx",
            ),
            (
                "annex-n --speed 10G --max-frame 2305843009213693952",
                &[],
                "--max-frame",
            ),
            (
                "annex-n --speed 10G --compare --cell-size 100000",
                &[],
                "--cell-size",
            ),
            (
                "thresholds --speed 10G --buffer 1GiB --t-link 1e9s",
                &[],
                "--t-link",
            ),
            (
                "sweep --speeds 10G",
                &["--distance", "1m..1e300km"],
                "--distance",
            ),
        ];
        for (line, extra, flag) in limits {
            let mut args: Vec<&str> = line.split(' ').collect();
            args.extend_from_slice(extra);
            let msg = run_err(&args);
            assert!(msg.contains(flag), "{args:?}: {msg:?} should name {flag}");
        }
        assert!(run_err(&["fabric", "--load", "1.0", "--p-max", "1e-6"]).contains("below 1"));
        assert!(
            run_err(&["thresholds", "--speed", "100G", "--buffer", "10KB"]).contains("one MTU")
        );
    }

    /// A preset at another speed, or a speed with no preset, is used with every delay and the
    /// response allowance given (before, the first silently kept the preset's 10G delays at
    /// 100G, DV 39,759 B instead of 81,615 B, and the second was refused).
    #[test]
    fn explicit_delays_replace_the_preset() {
        let dv = |args: &[&str]| -> u64 {
            let mut v = vec!["--json", "annex-n"];
            v.extend_from_slice(args);
            let j: serde_json::Value = serde_json::from_str(&run_ok(&v)).unwrap();
            j["annex_n"]["delay_value_bytes"].as_u64().unwrap()
        };
        assert_eq!(dv(&["--speed", "100G"]), 81_615);
        assert_eq!(dv(&["--preset", "100g", "--speed", "100G"]), 81_615);
        let d = "100864";
        let all = [
            "--local-tx",
            d,
            "--local-rx",
            d,
            "--remote-tx",
            d,
            "--remote-rx",
            d,
            "--response-quanta",
            "394",
        ];
        let mut args = vec!["--preset", "10g", "--speed", "100G"];
        args.extend_from_slice(&all);
        assert_eq!(dv(&args), 81_615);
        let out = run_ok(&[
            "--json",
            "adaptive",
            "--speed",
            "1G",
            "--rtt",
            "1us",
            "--response-quanta",
            "0",
            "--local-tx",
            "0",
            "--local-rx",
            "0",
            "--remote-tx",
            "0",
            "--remote-rx",
            "0",
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        // 1,000 BT of loop + 2 x 9,236 x 8 + 672, no response allowance.
        assert_eq!(
            v["adaptive"]["delay_value_bit_times"],
            1_000 + 147_776 + 672
        );
        let mut args = vec!["--json", "annex-n", "--speed", "800G"];
        args.extend_from_slice(&all);
        let v: serde_json::Value = serde_json::from_str(&run_ok(&args)).unwrap();
        assert_eq!(v["preset"], serde_json::Value::Null);
        assert_eq!(v["annex_n"]["input"]["medium"]["kind"], "fiber");
    }

    /// Prints example outputs for docs/headroom.md: `cargo test --lib print_examples -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn print_examples() {
        let mut compare = EXAMPLE.to_vec();
        compare.push("--compare");
        for args in [
            EXAMPLE,
            &compare[..],
            &[
                "adaptive",
                "--speed",
                "100G",
                "--t1",
                "0ns",
                "--t2",
                "10us",
                "--t3",
                "10.2us",
                "--t4",
                "1.2us",
                "--cell-size",
                "144",
            ],
            &["thresholds", "--speed", "100G", "--buffer", "1MiB"],
            &[
                "credit",
                "--speed",
                "100G",
                "--rtt",
                "1us",
                "--credit-rate",
                "10MHz",
                "--speedup",
                "1.2",
                "--cell-size",
                "64",
            ],
            &["fabric", "--load", "0.8", "--p-max", "1e-6"],
            &[
                "sweep",
                "--speeds",
                "10G,100G",
                "--distance",
                "1m..1km",
                "--points-per-decade",
                "1",
            ],
            &["presets"],
        ] {
            println!("$ lossless headroom {}\n{}", args.join(" "), run_ok(args));
        }
        println!(
            "{}",
            run_ok(&["--json", "fabric", "--load", "0.8", "--p-max", "1e-6"])
        );
    }
}
