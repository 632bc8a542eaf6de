//! The flags of `lossless headroom` and its subcommands, and the value parsers clap reports
//! errors of with the flag's name.

use crate::headroom::presets::{self, PhyPreset};
use crate::headroom::vendor::{self, SonicAsic};
use crate::headroom::{ByteSize, Distance, Duration, HeadroomError, Medium, Speed, Timestamp};
use clap::{Args, Subcommand};
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
    /// Defaults to the response-allowance preset for --speed. Its delays and allowance hold
    /// only at its own speed: with another --speed, or a speed with no preset, give all of
    /// --local-tx, --local-rx, --remote-tx, --remote-rx and --response-quanta.
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

    /// T1: peer-delay request sent (local clock), read exactly, e.g. 0ns or
    /// 1700000000.000000120s.
    #[arg(long, value_parser = parse_timestamp, allow_hyphen_values = true, requires_all = ["t2", "t3", "t4"])]
    pub t1: Option<Timestamp>,

    /// T2: request received (peer clock).
    #[arg(long, value_parser = parse_timestamp, allow_hyphen_values = true, requires_all = ["t1", "t3", "t4"])]
    pub t2: Option<Timestamp>,

    /// T3: reply sent (peer clock).
    #[arg(long, value_parser = parse_timestamp, allow_hyphen_values = true, requires_all = ["t1", "t2", "t4"])]
    pub t3: Option<Timestamp>,

    /// T4: reply received (local clock).
    #[arg(long, value_parser = parse_timestamp, allow_hyphen_values = true, requires_all = ["t1", "t2", "t3"])]
    pub t4: Option<Timestamp>,

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

    /// Time to generate PFC (default: one max frame plus the PFC frame at line rate, plus --hd).
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub t_gen: Option<Duration>,

    /// One-way link delay (default: half of 2 x cable propagation over --length plus both
    /// stations' TX + RX interface delays).
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

pub(super) fn parse_speed(s: &str) -> Result<Speed, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
pub(super) fn parse_distance(s: &str) -> Result<Distance, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
pub(super) fn parse_timestamp(s: &str) -> Result<Timestamp, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
pub(super) fn parse_medium(s: &str) -> Result<Medium, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
pub(super) fn parse_bytes(s: &str) -> Result<ByteSize, String> {
    s.parse().map_err(|e: HeadroomError| e.to_string())
}
pub(super) fn parse_preset(s: &str) -> Result<&'static PhyPreset, String> {
    presets::lookup(s).map_err(|e| e.to_string())
}
pub(super) fn parse_asic(s: &str) -> Result<SonicAsic, String> {
    vendor::sonic_asic(s).map_err(|e| e.to_string())
}

/// Parses a rate in Hz: `"1e6"`, `"500k"`, `"10MHz"`, `"2.5 GHz"`.
pub(super) fn parse_rate(s: &str) -> Result<f64, String> {
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
