//! `lossless headroom`: the headroom calculator on the command line.
//!
//! Each subcommand sizes one thing and prints a table of the formula's terms (bit times,
//! bytes, share of the total) followed by the result, or JSON with `--json`. The math lives in
//! [`crate::headroom`]; this module only parses arguments, calls it and formats the output.
//! See `docs/headroom.md` for every subcommand, flag and formula.

use crate::headroom::adaptive::{self, AdaptiveInput, RoundTrip};
use crate::headroom::annex_n::{self, AnnexNInput, StationDelays};
use crate::headroom::compare::{self, CompareInput, CompareReport};
use crate::headroom::credit::{self, CreditInput};
use crate::headroom::fabric::{self, FabricInput};
use crate::headroom::presets::{self, PhyPreset, PRESETS};
use crate::headroom::sweep::{self, SweepInput};
use crate::headroom::thresholds::{self, ThresholdInput};
use crate::headroom::units::trim_float;
use crate::headroom::vendor::{self, SonicAsic};
use crate::headroom::{
    frame_bit_times, ByteSize, Distance, Duration, HeadroomError, Medium, Quantity, Speed, Term,
    BIT_TIMES_PER_QUANTUM,
};
use clap::{Args, Subcommand};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;

/// Arguments of `lossless headroom`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Size PFC headroom, XOFF/XON thresholds, credit and fabric buffers, showing every term"
)]
pub struct HeadroomArgs {
    /// Print the result as JSON (for scripts) instead of a table.
    #[arg(long, global = true)]
    pub json: bool,

    /// What to calculate.
    #[command(subcommand)]
    pub command: HeadroomCommand,
}

/// The calculator's subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum HeadroomCommand {
    /// 802.1Q Annex N delay value from PHY delay tables (worst case).
    #[command(name = "annex-n")]
    AnnexN(AnnexNArgs),
    /// Headroom from a measured round trip: X = speed·((T4−T1)−(T3−T2)).
    Adaptive(AdaptiveArgs),
    /// XOFF/XON thresholds for a given buffer.
    Thresholds(ThresholdsArgs),
    /// Credit-based flow control: minimum buffer (one BDP) and credit quantum.
    Credit(CreditArgs),
    /// M/D/1 cell-fabric buffer for a target overflow probability.
    Fabric(FabricArgs),
    /// Headroom over speeds × distances, as CSV and an SVG plot.
    Sweep(SweepArgs),
    /// List the interface-delay presets.
    Presets,
}

/// Describes a link: speed, PHY preset, cable, frames and interface delays.
#[derive(Debug, Clone, Args)]
pub struct LinkArgs {
    /// Interface-delay preset (see `lossless headroom presets`), e.g. 10gbase-t, 100g, 400g.
    /// Defaults to the response-allowance preset for --speed.
    #[arg(long, value_parser = parse_preset)]
    pub preset: Option<&'static PhyPreset>,

    /// Link speed, e.g. 10G, 25Gbit, 400G. Defaults to the preset's speed.
    #[arg(long, value_parser = parse_speed, allow_hyphen_values = true)]
    pub speed: Option<Speed>,

    /// Cable length, e.g. 3m, 100m, 2km.
    #[arg(long, visible_alias = "distance", default_value = "100m", value_parser = parse_distance, allow_hyphen_values = true)]
    pub length: Distance,

    /// Cable medium: copper (0.6c), fiber (0.66c) or a velocity factor such as 0.7.
    /// Defaults to the preset's medium.
    #[arg(long, value_parser = parse_medium, allow_hyphen_values = true)]
    pub medium: Option<Medium>,

    /// Largest frame on the lossless priority, octets (destination address through FCS).
    #[arg(long, default_value_t = 9216)]
    pub max_frame: u64,

    /// PFC frame size, octets.
    #[arg(long, default_value_t = 64)]
    pub pfc_frame: u64,

    /// Higher-layer delay HD (MACsec, memory pipelining, decision time), bit times.
    #[arg(long, visible_alias = "higher-layer-delay", default_value_t = 0)]
    pub hd: u64,

    /// Override station 1's (the PFC sender's) transmit delay, bit times.
    #[arg(long)]
    pub local_tx: Option<u64>,

    /// Override station 1's receive delay, bit times.
    #[arg(long)]
    pub local_rx: Option<u64>,

    /// Override station 2's (the paused peer's) transmit delay, bit times.
    #[arg(long)]
    pub remote_tx: Option<u64>,

    /// Override station 2's receive delay, bit times.
    #[arg(long)]
    pub remote_rx: Option<u64>,

    /// Override the peer's PAUSE/PFC response-time allowance, in pause quanta (512 BT).
    #[arg(long)]
    pub response_quanta: Option<u64>,
}

/// Options of `--compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Also size the link with the Linux mlx5 and SONiC formulas and print them side by side.
    #[arg(long)]
    pub compare: bool,

    /// SONiC ASIC parameters for --compare: spectrum1 (96-byte cells) or spectrum2 (144).
    #[arg(long, default_value = "spectrum2", value_parser = parse_asic)]
    pub sonic_asic: SonicAsic,
}

/// `lossless headroom annex-n`.
#[derive(Debug, Clone, Args)]
pub struct AnnexNArgs {
    /// The link.
    #[command(flatten)]
    pub link: LinkArgs,

    /// Measured link round trip for the adaptive row of --compare (estimated if omitted).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub rtt: Option<Duration>,

    /// Buffer cell size for the adaptive row of --compare, bytes (1 = byte accounting).
    #[arg(long, default_value_t = 1)]
    pub cell_size: u64,

    /// Comparison options.
    #[command(flatten)]
    pub compare: CompareArgs,
}

/// `lossless headroom adaptive`.
#[derive(Debug, Clone, Args)]
pub struct AdaptiveArgs {
    /// The link (speed and response allowance; cable and PHY only matter for --compare).
    #[command(flatten)]
    pub link: LinkArgs,

    /// Measured link round trip (T4−T1)−(T3−T2), e.g. 1.2us. Alternative to --t1..--t4.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, conflicts_with_all = ["t1", "t2", "t3", "t4"])]
    pub rtt: Option<Duration>,

    /// T1: peer-delay request sent (local clock), e.g. 0ns.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, requires_all = ["t2", "t3", "t4"])]
    pub t1: Option<Duration>,

    /// T2: request received (peer clock).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, requires_all = ["t1", "t3", "t4"])]
    pub t2: Option<Duration>,

    /// T3: reply sent (peer clock).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, requires_all = ["t1", "t2", "t4"])]
    pub t3: Option<Duration>,

    /// T4: reply received (local clock).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, requires_all = ["t1", "t2", "t3"])]
    pub t4: Option<Duration>,

    /// The peer's response time as a duration (overrides the quanta allowance), e.g. 2us.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub peer_response: Option<Duration>,

    /// This station's own lag from crossing XOFF to sending PFC (the daemon's receive lag at
    /// p99.99, `lossless status`), e.g. 500us.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub own_lag: Duration,

    /// The peer's measured reaction beyond the round trip (`lossless status`); counts where it
    /// exceeds the response allowance, e.g. 2ms.
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub peer_reaction: Duration,

    /// The rate the own lag and peer reaction are charged at (the fastest the peer sends;
    /// default and at most: the link speed), e.g. 2Gbit.
    #[arg(long, value_parser = parse_speed)]
    pub software_rate: Option<Speed>,

    /// Buffer cell size, bytes; sets alpha = worst-case cell overhead (1 = byte accounting).
    #[arg(long, default_value_t = 1)]
    pub cell_size: u64,

    /// Override the cell-overhead factor alpha (>= 1).
    #[arg(long, allow_hyphen_values = true)]
    pub alpha: Option<f64>,

    /// Comparison options.
    #[command(flatten)]
    pub compare: CompareArgs,
}

/// `lossless headroom thresholds`.
#[derive(Debug, Clone, Args)]
pub struct ThresholdsArgs {
    /// The link.
    #[command(flatten)]
    pub link: LinkArgs,

    /// Buffer available to the priority, e.g. 262144, 256KiB, 1MiB.
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    pub buffer: ByteSize,

    /// Time to generate PFC (default: one max frame plus the PFC frame at line rate).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub t_gen: Option<Duration>,

    /// One-way link delay (default: cable propagation over --length).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub t_link: Option<Duration>,

    /// Time for the peer to act on PFC (default: response allowance plus one max frame).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub t_act: Option<Duration>,

    /// XOFF − XON, e.g. 20KB (default: one reaction data, capped so XON >= 0).
    #[arg(long, value_parser = parse_bytes, allow_hyphen_values = true)]
    pub hysteresis: Option<ByteSize>,

    /// Buffer cell size, bytes (headroom rounds up, thresholds round down to cells).
    #[arg(long, default_value_t = 1)]
    pub cell_size: u64,
}

/// `lossless headroom credit`.
#[derive(Debug, Clone, Args)]
pub struct CreditArgs {
    /// Link rate, e.g. 100G.
    #[arg(long, value_parser = parse_speed, allow_hyphen_values = true)]
    pub speed: Speed,

    /// Round-trip time of a credit and the data it releases, e.g. 1us.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, conflicts_with = "distance")]
    pub rtt: Option<Duration>,

    /// Derive the round trip from a cable length instead (2 × propagation), e.g. 10km.
    #[arg(long, value_parser = parse_distance, allow_hyphen_values = true)]
    pub distance: Option<Distance>,

    /// Medium for --distance: copper, fiber or a velocity factor.
    #[arg(long, default_value = "fiber", value_parser = parse_medium, allow_hyphen_values = true)]
    pub medium: Medium,

    /// Credit updates issued per second, e.g. 1e6, 10MHz, 500k.
    #[arg(long, value_parser = parse_rate, allow_hyphen_values = true)]
    pub credit_rate: f64,

    /// Fabric speed-up (>= 1).
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub speedup: f64,

    /// Buffer cell size, bytes (buffer and quantum round up to cells).
    #[arg(long, default_value_t = 1)]
    pub cell_size: u64,
}

/// `lossless headroom fabric`.
#[derive(Debug, Clone, Args)]
pub struct FabricArgs {
    /// Offered load rho in cells per cell time, 0 < rho < 1.
    #[arg(long, allow_hyphen_values = true)]
    pub load: f64,

    /// Target overflow probability P_max, 0 < P < 1, e.g. 1e-6.
    #[arg(
        long,
        visible_alias = "overflow-probability",
        allow_hyphen_values = true
    )]
    pub p_max: f64,

    /// Cell size in bytes, to express the buffer in bytes.
    #[arg(long, default_value_t = 64)]
    pub cell_size: u64,
}

/// `lossless headroom sweep`.
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Comma-separated speeds, e.g. 10G,25G,100G,400G.
    #[arg(long, value_delimiter = ',', value_parser = parse_speed, default_value = "10G,25G,100G,400G", allow_hyphen_values = true)]
    pub speeds: Vec<Speed>,

    /// Distance range FROM..TO (log-spaced), e.g. 1m..100km.
    #[arg(long, default_value = "1m..100km", allow_hyphen_values = true)]
    pub distance: String,

    /// Grid points per decade of distance.
    #[arg(long, default_value_t = 10)]
    pub points_per_decade: u32,

    /// Medium: copper, fiber or a velocity factor (default: each speed's preset, fiber).
    #[arg(long, value_parser = parse_medium, allow_hyphen_values = true)]
    pub medium: Option<Medium>,

    /// Largest frame, octets.
    #[arg(long, default_value_t = 9216)]
    pub max_frame: u64,

    /// PFC frame size, octets.
    #[arg(long, default_value_t = 64)]
    pub pfc_frame: u64,

    /// Higher-layer delay HD, bit times.
    #[arg(long, default_value_t = 0)]
    pub hd: u64,

    /// Buffer cell size, bytes (headroom = DV × alpha, rounded up to cells).
    #[arg(long, default_value_t = 1)]
    pub cell_size: u64,

    /// Write the CSV to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,

    /// Write an SVG plot (log distance vs headroom bytes, one line per speed) to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

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
    }
}

// ---- value parsers (clap reports their errors with the flag name) ----

fn parse_speed(s: &str) -> Result<Speed, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
fn parse_distance(s: &str) -> Result<Distance, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
fn parse_duration(s: &str) -> Result<Duration, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
fn parse_medium(s: &str) -> Result<Medium, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
fn parse_bytes(s: &str) -> Result<ByteSize, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
fn parse_preset(s: &str) -> Result<&'static PhyPreset, String> {
    presets::lookup(s).map_err(|e| e.to_string())
}
fn parse_asic(s: &str) -> Result<SonicAsic, String> {
    vendor::sonic_asic(s).map_err(|e| e.to_string())
}

/// Parses a rate in Hz: `"1e6"`, `"500k"`, `"10MHz"`, `"2.5 GHz"`.
fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower.strip_suffix("hz").unwrap_or(&lower).trim_end();
    let (num, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1e3),
        Some('m') => (&body[..body.len() - 1], 1e6),
        Some('g') => (&body[..body.len() - 1], 1e9),
        _ => (body, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("invalid credit issue rate: cannot parse {s:?} (use e.g. 1e6, 500k, 10MHz)")
    })?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!(
            "invalid credit issue rate: must be a positive rate, got {s:?}"
        ));
    }
    Ok(v * mult)
}

// ---- resolving a link ----

/// A link after defaults and overrides.
struct Link {
    preset: &'static PhyPreset,
    annex: AnnexNInput,
    response_bit_times: u64,
}

fn resolve_link(l: &LinkArgs) -> Result<Link, HeadroomCliError> {
    let preset = match (l.preset, l.speed) {
        (Some(p), _) => p,
        (None, Some(s)) => presets::for_speed_or_err(s)?,
        (None, None) => {
            return Err(HeadroomCliError::Missing(
                "give --preset NAME or --speed SPEED (e.g. --preset 10gbase-t or --speed 100G)"
                    .into(),
            ))
        }
    };
    let mut a = preset.annex_n_input(l.length, l.max_frame);
    if let Some(s) = l.speed {
        a.speed = s;
    }
    if let Some(m) = l.medium {
        a.medium = m;
    }
    a.pfc_frame_octets = l.pfc_frame;
    a.higher_layer_bit_times = l.hd;
    a.local = StationDelays {
        tx_bit_times: l.local_tx.unwrap_or(a.local.tx_bit_times),
        rx_bit_times: l.local_rx.unwrap_or(a.local.rx_bit_times),
    };
    a.remote = StationDelays {
        tx_bit_times: l.remote_tx.unwrap_or(a.remote.tx_bit_times),
        rx_bit_times: l.remote_rx.unwrap_or(a.remote.rx_bit_times),
    };
    a.validate()?;
    let quanta = l.response_quanta.unwrap_or(preset.response_quanta);
    Ok(Link {
        preset,
        annex: a,
        response_bit_times: quanta * BIT_TIMES_PER_QUANTUM,
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

fn compare_report(
    link: &Link,
    rtt: Option<Duration>,
    cell_size: u64,
    c: &CompareArgs,
) -> Result<CompareReport, HeadroomCliError> {
    Ok(compare::compare(&CompareInput {
        annex_n: link.annex.clone(),
        measured_round_trip: rtt,
        peer_response_bit_times: link.response_bit_times,
        cell_size,
        sonic_asic: c.sonic_asic,
    })?)
}

fn annex_n_cmd(a: &AnnexNArgs, json: bool) -> Result<String, HeadroomCliError> {
    let link = resolve_link(&a.link)?;
    let r = annex_n::delay_value(&link.annex)?;
    let cmp = if a.compare.compare {
        Some(compare_report(&link, a.rtt, a.cell_size, &a.compare)?)
    } else {
        None
    };
    if json {
        #[derive(Serialize)]
        struct Out<'a> {
            preset: &'static str,
            annex_n: &'a annex_n::AnnexNResult,
            #[serde(skip_serializing_if = "Option::is_none")]
            compare: Option<&'a CompareReport>,
        }
        return to_json(&Out {
            preset: link.preset.name,
            annex_n: &r,
            compare: cmp.as_ref(),
        });
    }
    let mut s = String::new();
    let i = &r.input;
    let _ = writeln!(s, "802.1Q Annex N delay value");
    let _ = writeln!(
        s,
        "  link: {}, {} of {}, preset {}, max frame {} B, PFC frame {} B\n",
        i.speed, i.cable_length, i.medium, link.preset.name, i.max_frame_octets, i.pfc_frame_octets
    );
    s.push_str(&term_table(&r.terms, "delay value DV"));
    let _ = writeln!(
        s,
        "\nDV = {} bit times = {} bytes = {} at {}",
        group(r.delay_value_bit_times),
        group(r.delay_value_bytes),
        r.delay_value_time,
        i.speed
    );
    if let Some(c) = &cmp {
        s.push('\n');
        s.push_str(&compare_table(c));
    }
    Ok(s)
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
        Some(d) => link.annex.speed.bit_times_in(d),
        None => link.response_bit_times,
    };
    let r = adaptive::headroom(&AdaptiveInput {
        speed: link.annex.speed,
        round_trip,
        max_frame_octets: link.annex.max_frame_octets,
        pfc_frame_octets: link.annex.pfc_frame_octets,
        peer_response_bit_times: peer,
        own_lag: a.own_lag,
        peer_reaction: a.peer_reaction,
        software_rate: a.software_rate,
        cell_size: a.cell_size,
        alpha: a.alpha,
    })?;
    let cmp = if a.compare.compare {
        Some(compare_report(
            &link,
            Some(r.link_round_trip),
            a.cell_size,
            &a.compare,
        )?)
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
    let mut s = String::new();
    let _ = writeln!(s, "Adaptive headroom from a measured round trip");
    let _ = writeln!(
        s,
        "  link: {}, loop (T4-T1)-(T3-T2) = {}, max frame {} B, cell {} B, alpha {:.4}{}\n",
        r.input.speed,
        r.link_round_trip,
        r.input.max_frame_octets,
        r.input.cell_size,
        r.alpha.alpha,
        if r.alpha_overridden { " (given)" } else { "" }
    );
    s.push_str(&term_table(&r.terms, "headroom"));
    let _ = writeln!(
        s,
        "\nDV = {} bit times; headroom = {} bytes = {} cells of {} B",
        group(r.delay_value_bit_times),
        group(r.headroom_bytes),
        group(r.headroom_cells),
        r.input.cell_size
    );
    if let Some(c) = &cmp {
        s.push('\n');
        s.push_str(&compare_table(c));
    }
    Ok(s)
}

fn thresholds_cmd(a: &ThresholdsArgs, json: bool) -> Result<String, HeadroomCliError> {
    let link = resolve_link(&a.link)?;
    let speed = link.annex.speed;
    let max = link.annex.max_frame_octets;
    let t_gen = a.t_gen.unwrap_or_else(|| {
        speed.duration_of(frame_bit_times(max) + frame_bit_times(link.annex.pfc_frame_octets))
    });
    let t_link = a
        .t_link
        .unwrap_or_else(|| link.annex.cable_length.propagation(link.annex.medium));
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
    })?;
    if json {
        return to_json(&r);
    }
    let mut s = String::new();
    let _ = writeln!(s, "XOFF/XON thresholds");
    let _ = writeln!(
        s,
        "  link: {}, buffer {} B, MTU {} B, T_gen {}, T_link {}, T_act {}, cell {} B\n",
        speed,
        group(a.buffer.0),
        max,
        t_gen,
        t_link,
        t_act,
        a.cell_size
    );
    s.push_str(&term_table(&r.terms, "headroom"));
    let _ = writeln!(s);
    let _ = writeln!(s, "buffer      {:>12} B", group(a.buffer.0));
    let _ = writeln!(
        s,
        "headroom    {:>12} B  (reaction data + wire data)",
        group(r.headroom_bytes)
    );
    let _ = writeln!(
        s,
        "XOFF        {:>12} B  (send XOFF at this occupancy)",
        group(r.xoff_bytes)
    );
    let _ = writeln!(
        s,
        "XON         {:>12} B  (hysteresis {} B{})",
        group(r.xon_bytes),
        group(r.hysteresis_bytes),
        if r.hysteresis_capped {
            ", capped so XON >= 0"
        } else {
            ""
        }
    );
    Ok(s)
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
    })?;
    if json {
        return to_json(&r);
    }
    let mut s = String::new();
    let _ = writeln!(s, "Credit-based flow control");
    let _ = writeln!(
        s,
        "  link: {}, RTT {}, credit rate {} Hz, speed-up {}, cell {} B\n",
        a.speed,
        rtt,
        trim_float(a.credit_rate),
        trim_float(a.speedup),
        a.cell_size
    );
    s.push_str(&term_table(&r.terms, "minimum buffer"));
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "minimum buffer   {:>12} B  (one BDP, whole cells)",
        group(r.min_buffer_bytes)
    );
    let _ = writeln!(
        s,
        "credit quantum   {:>12} B  ({} B per credit interval x {} speed-up, {} cells)",
        group(r.quantum_bytes),
        trim_float(r.bytes_per_credit_interval),
        trim_float(a.speedup),
        r.quantum_cells
    );
    let _ = writeln!(s, "credits/buffer   {:>12}", group(r.credits_per_buffer));
    Ok(s)
}

fn fabric_cmd(a: &FabricArgs, json: bool) -> Result<String, HeadroomCliError> {
    let r = fabric::fabric_buffer(&FabricInput {
        load: a.load,
        overflow_probability: a.p_max,
        cell_size: a.cell_size,
    })?;
    if json {
        return to_json(&r);
    }
    let mut s = String::new();
    let _ = writeln!(s, "M/D/1 cell-fabric buffer");
    let _ = writeln!(
        s,
        "  load rho {}, target P(Q > N) <= {:e}, cell {} B\n",
        a.load, a.p_max, a.cell_size
    );
    let _ = writeln!(
        s,
        "  theta (positive root of rho(e^theta - 1) = theta)  {:.6}",
        r.theta
    );
    let _ = writeln!(
        s,
        "  C = (1 - rho)/(rho e^theta - 1)                     {:.6}",
        r.c
    );
    let _ = writeln!(
        s,
        "  ln C / theta                                        {:.3} cells",
        r.ln_c_over_theta
    );
    let _ = writeln!(
        s,
        "  -ln P_max / theta                                   {:.3} cells",
        r.ln_inv_p_over_theta
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "buffer N = {} cells = {} bytes; P(Q > N) ~ {:.3e}",
        group(r.buffer_cells),
        group(r.buffer_bytes),
        r.overflow_at_buffer
    );
    Ok(s)
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
        Quantity::Preset => HeadroomCliError::Model {
            flag: "--speeds",
            source: e,
        },
        Quantity::Speed => HeadroomCliError::Model {
            flag: "--speeds",
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
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<11} {:>6} {:>8} {:>15} {:>8}  description",
        "preset", "speed", "medium", "station TX+RX", "quanta"
    );
    for p in PRESETS {
        let _ = writeln!(
            s,
            "{:<11} {:>5}G {:>8} {:>12} BT {:>8}  {}",
            p.name,
            p.speed_gbps,
            match p.medium {
                Medium::Copper => "copper",
                Medium::Fiber => "fiber",
                Medium::Custom(_) => "custom",
            },
            group(p.station_bit_times()),
            p.response_quanta,
            p.description
        );
    }
    Ok(s)
}

fn write_file(path: &PathBuf, text: &str) -> Result<(), HeadroomCliError> {
    std::fs::write(path, text).map_err(|source| HeadroomCliError::Io {
        path: path.display().to_string(),
        source,
    })
}

// ---- formatting ----

/// `1234567` → `"1,234,567"`.
fn group(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn fmt_bytes(b: f64) -> String {
    let text = format!("{:.2}", b.max(0.0));
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let int = group(int.parse().unwrap_or(0));
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        int
    } else {
        format!("{int}.{frac}")
    }
}

/// The table of terms: name, bit times, bytes, share of the total, detail.
fn term_table(terms: &[Term], total_name: &str) -> String {
    let total: u64 = terms.iter().map(|t| t.bit_times).sum();
    let total_bytes: f64 = terms.iter().map(|t| t.bytes).sum();
    let w = terms
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(0)
        .max(total_name.len())
        .max(4);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<w$}  {:>13}  {:>12}  {:>6}  detail",
        "term", "bit times", "bytes", "share"
    );
    for t in terms {
        let share = if total == 0 {
            0.0
        } else {
            100.0 * t.bit_times as f64 / total as f64
        };
        let _ = writeln!(
            s,
            "  {:<w$}  {:>13}  {:>12}  {:>5.1}%  {}",
            t.name,
            group(t.bit_times),
            fmt_bytes(t.bytes),
            share,
            t.detail
        );
    }
    let _ = writeln!(s, "  {}", "-".repeat(w + 41));
    let _ = writeln!(
        s,
        "  {:<w$}  {:>13}  {:>12}  {:>5.1}%",
        total_name,
        group(total),
        fmt_bytes(total_bytes),
        100.0
    );
    s
}

/// The side-by-side comparison table.
fn compare_table(c: &CompareReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Comparison (headroom reserved above XOFF)\n");
    let _ = writeln!(
        s,
        "  {:<22}  {:>12}  {:>9}  {:>10}  {:>12}  note",
        "model", "bytes", "x AnnexN", "x adaptive", "vs AnnexN"
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "  {:<22}  {:>12}  {:>9.2}  {:>10.2}  {:>12}  {}",
            r.model,
            group(r.headroom_bytes),
            r.vs_annex_n,
            r.vs_adaptive,
            format!(
                "{}{}",
                if r.delta_vs_annex_n_bytes < 0 {
                    "-"
                } else {
                    "+"
                },
                group(r.delta_vs_annex_n_bytes.unsigned_abs())
            ),
            r.note
        );
    }
    let _ = writeln!(
        s,
        "\n  x AnnexN < 1: the model reserves less than 802.1Q's worst case for this link;\n  \
         x adaptive < 1: less than the measured (or estimated) loop needs."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

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
        assert!(out.contains("992,176") && out.contains("942,090"), "{out}");
        assert!(out.contains("reaction data") && out.contains("wire data"));
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
        ];
        for (args, flag) in cases {
            let msg = run_err(args);
            assert!(msg.contains(flag), "{args:?}: {msg:?} should name {flag}");
        }
        assert!(run_err(&["fabric", "--load", "1.0", "--p-max", "1e-6"]).contains("below 1"));
        assert!(
            run_err(&["thresholds", "--speed", "100G", "--buffer", "10KB"]).contains("one MTU")
        );
    }

    #[test]
    fn grouping_and_bytes() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(126_024), "126,024");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(fmt_bytes(1389.0), "1,389");
        assert_eq!(fmt_bytes(1389.5), "1,389.5");
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
