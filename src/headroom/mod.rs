//! Headroom math: pure functions that size PFC headroom, XOFF/XON thresholds, credit
//! buffers and cell-fabric buffers, and the calculator behind `lossless headroom`.
//!
//! Every model takes typed inputs ([`Speed`], [`Distance`], [`Duration`], octet counts) and
//! returns a result that keeps each term of its formula as a [`Term`], so a caller (the
//! daemon at link-up, or an operator at the command line) can see *why* a number is what
//! it is. Nothing here performs I/O.
//!
//! Models (formulas in `DESIGN.md`, section "Headroom math", and `docs/headroom.md`):
//! - [`annex_n`]: the IEEE 802.1Q-2018 Annex N delay value (worst case, from PHY tables);
//! - [`adaptive`]: headroom from a measured round trip (peer-delay timestamps T1..T4);
//! - [`thresholds`]: XOFF/XON thresholds for a given buffer;
//! - [`credit`]: credit-based flow control buffer (one BDP) and credit quantum;
//! - [`fabric`]: M/D/1 cell-fabric buffer for a target overflow probability;
//! - [`vendor`]: the Linux mlx5 driver's and SONiC's (Mellanox) headroom formulas;
//! - [`compare`]: all of the above for one link, side by side;
//! - [`sweep`] and [`svg`]: headroom over a grid of speeds and distances, as CSV and SVG.

pub mod adaptive;
pub mod annex_n;
pub mod compare;
pub mod credit;
pub mod fabric;
pub mod presets;
pub mod report;
pub mod svg;
pub mod sweep;
pub mod thresholds;
pub mod units;
pub mod vendor;

use serde::Serialize;
use std::fmt;

pub use units::{ByteSize, Distance, Duration, Medium, Speed, Timestamp};

/// Octets added to every frame on the wire: 7 preamble + 1 SFD + 12 inter-frame gap.
pub const WIRE_OVERHEAD_OCTETS: u64 = 20;

/// One pause quantum is 512 bit times at the port's speed (802.3 Annex 31B).
pub const BIT_TIMES_PER_QUANTUM: u64 = 512;

/// Smallest legal Ethernet frame (octets, destination address through FCS).
pub const MIN_FRAME_OCTETS: u64 = 64;

/// Largest frame the calculator accepts (maximum and PFC frame), octets.
pub const MAX_FRAME_OCTETS: u64 = 65_535;

/// Largest buffer cell the calculator accepts, bytes.
pub const MAX_CELL_OCTETS: u64 = 65_535;

/// Largest cell-overhead factor α accepted: about a 64-octet frame in the largest cell.
pub const MAX_ALPHA: f64 = 1024.0;

/// Largest single term the calculator accepts (a round trip, a lag, a cable, an interface or
/// higher-layer delay), bit times: 2^48, 703 s at 400 Gb/s. With every term at most this,
/// frames at most [`MAX_FRAME_OCTETS`] and α at most [`MAX_ALPHA`], every sum and product of
/// the models stays below 2^62 and cannot wrap; a larger input is an error naming it.
pub const MAX_TERM_BIT_TIMES: u64 = 1 << 48;

/// Checks that a frame size (`quantity` says which) is within 64..=65,535 octets.
pub(crate) fn check_frame(quantity: Quantity, octets: u64) -> Result<(), HeadroomError> {
    if !(MIN_FRAME_OCTETS..=MAX_FRAME_OCTETS).contains(&octets) {
        return Err(HeadroomError::invalid(
            quantity,
            format!("must be within {MIN_FRAME_OCTETS}..={MAX_FRAME_OCTETS} octets, got {octets}"),
        ));
    }
    Ok(())
}

/// Checks that a cell size is within 1..=65,535 bytes.
pub(crate) fn check_cell(cell: u64) -> Result<(), HeadroomError> {
    if !(1..=MAX_CELL_OCTETS).contains(&cell) {
        return Err(HeadroomError::invalid(
            Quantity::CellSize,
            format!("must be within 1..={MAX_CELL_OCTETS} bytes, got {cell}"),
        ));
    }
    Ok(())
}

/// `bit_times`, if it is at most [`MAX_TERM_BIT_TIMES`]; else an error naming `quantity`.
pub(crate) fn check_bit_times(quantity: Quantity, bit_times: u64) -> Result<u64, HeadroomError> {
    if bit_times > MAX_TERM_BIT_TIMES {
        return Err(HeadroomError::invalid(
            quantity,
            format!(
                "{bit_times} bit times is beyond the calculator's limit of {MAX_TERM_BIT_TIMES}"
            ),
        ));
    }
    Ok(bit_times)
}

/// Bit times a frame of `octets` octets occupies on the wire, counting preamble, SFD and
/// inter-frame gap: `(octets + 20) · 8`. A 64-octet PFC frame is 672 BT; a 2000-octet frame
/// 16,160 BT.
pub fn frame_bit_times(octets: u64) -> u64 {
    (octets + WIRE_OVERHEAD_OCTETS) * 8
}

/// Rounds `value` up to a whole multiple of `cell` (a `cell` of 0 or 1 leaves it unchanged).
pub fn round_up_to_cells(value: u64, cell: u64) -> u64 {
    if cell <= 1 {
        value
    } else {
        value.div_ceil(cell) * cell
    }
}

/// `x.ceil()`, tolerant of floating-point noise just above an integer (so that a value that
/// is mathematically 5,556 but computed as 5,556.000000001 stays 5,556).
pub(crate) fn ceil_tolerant(x: f64) -> f64 {
    let r = x.round();
    if (x - r).abs() <= 1e-9 * x.abs().max(1.0) {
        r
    } else {
        x.ceil()
    }
}

/// One named term of a formula, in bit times and in bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Term {
    /// Short label, for example `"2 x max frame"`.
    pub name: String,
    /// Where the number comes from, for example `"2 x (2000 + 20) x 8"`.
    pub detail: String,
    /// The term in bit times at the link's speed (for byte-based terms, bytes × 8).
    pub bit_times: u64,
    /// The term in bytes (`bit_times / 8`, possibly fractional).
    pub bytes: f64,
}

impl Term {
    /// A term measured in bit times.
    pub fn from_bit_times(
        name: impl Into<String>,
        detail: impl Into<String>,
        bit_times: u64,
    ) -> Self {
        Term {
            name: name.into(),
            detail: detail.into(),
            bit_times,
            bytes: bit_times as f64 / 8.0,
        }
    }

    /// A term measured in (possibly fractional) bytes; bit times are rounded to the nearest.
    pub fn from_fractional_bytes(
        name: impl Into<String>,
        detail: impl Into<String>,
        bytes: f64,
    ) -> Self {
        Term {
            name: name.into(),
            detail: detail.into(),
            bit_times: (bytes * 8.0).round().max(0.0) as u64,
            bytes,
        }
    }

    /// A term measured in whole bytes.
    pub fn from_bytes(name: impl Into<String>, detail: impl Into<String>, bytes: u64) -> Self {
        Term {
            name: name.into(),
            detail: detail.into(),
            bit_times: bytes * 8,
            bytes: bytes as f64,
        }
    }
}

/// Sum of the bit times of `terms`.
pub fn total_bit_times(terms: &[Term]) -> u64 {
    terms.iter().map(|t| t.bit_times).sum()
}

/// The input quantity an error is about; the CLI maps each to its flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quantity {
    /// Link speed.
    Speed,
    /// Cable length or distance.
    CableLength,
    /// Propagation velocity factor of the medium.
    VelocityFactor,
    /// Maximum frame size.
    MaxFrame,
    /// PFC frame size.
    PfcFrame,
    /// Buffer cell size.
    CellSize,
    /// Cell-overhead factor α.
    Alpha,
    /// Peer-delay timestamps T1..T4.
    Timestamps,
    /// The peer's response allowance, pause quanta.
    ResponseQuanta,
    /// The peer's response time, as a duration.
    PeerResponse,
    /// This station's own lag from crossing XOFF to sending PFC.
    OwnLag,
    /// The peer's measured reaction beyond the round trip.
    PeerReaction,
    /// Higher-layer delay HD.
    HigherLayerDelay,
    /// Station 1's transmit delay.
    LocalTx,
    /// Station 1's receive delay.
    LocalRx,
    /// Station 2's transmit delay.
    RemoteTx,
    /// Station 2's receive delay.
    RemoteRx,
    /// Time to generate PFC.
    GenerationTime,
    /// One-way link delay.
    LinkDelay,
    /// Time for the peer to act on PFC.
    ActivationTime,
    /// Round-trip time.
    RoundTrip,
    /// Total buffer available to a priority.
    Buffer,
    /// XOFF/XON hysteresis.
    Hysteresis,
    /// Credit issue rate.
    CreditRate,
    /// Fabric speed-up.
    SpeedUp,
    /// Offered load ρ.
    Load,
    /// Target overflow probability.
    OverflowProbability,
    /// A duration (generation, activation or processing time).
    Duration,
    /// An interface-delay preset name.
    Preset,
    /// A sweep range or grid.
    Sweep,
    /// Grid points per decade of a sweep.
    PointsPerDecade,
}

impl Quantity {
    /// Human-readable name of the quantity.
    pub fn name(self) -> &'static str {
        match self {
            Quantity::Speed => "link speed",
            Quantity::CableLength => "cable length",
            Quantity::VelocityFactor => "velocity factor",
            Quantity::MaxFrame => "maximum frame size",
            Quantity::PfcFrame => "PFC frame size",
            Quantity::CellSize => "cell size",
            Quantity::Alpha => "cell-overhead factor alpha",
            Quantity::Timestamps => "peer-delay timestamps",
            Quantity::ResponseQuanta => "response allowance",
            Quantity::PeerResponse => "peer response time",
            Quantity::OwnLag => "own lag",
            Quantity::PeerReaction => "peer reaction",
            Quantity::HigherLayerDelay => "higher-layer delay",
            Quantity::LocalTx => "station 1 transmit delay",
            Quantity::LocalRx => "station 1 receive delay",
            Quantity::RemoteTx => "station 2 transmit delay",
            Quantity::RemoteRx => "station 2 receive delay",
            Quantity::GenerationTime => "PFC generation time",
            Quantity::LinkDelay => "one-way link delay",
            Quantity::ActivationTime => "PFC activation time",
            Quantity::RoundTrip => "round-trip time",
            Quantity::Buffer => "buffer size",
            Quantity::Hysteresis => "hysteresis",
            Quantity::CreditRate => "credit issue rate",
            Quantity::SpeedUp => "fabric speed-up",
            Quantity::Load => "offered load rho",
            Quantity::OverflowProbability => "overflow probability",
            Quantity::Duration => "duration",
            Quantity::Preset => "interface-delay preset",
            Quantity::Sweep => "sweep range",
            Quantity::PointsPerDecade => "points per decade",
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of the headroom models. Every variant names the quantity at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HeadroomError {
    /// An input is outside its valid range.
    #[error("invalid {quantity}: {reason}")]
    Invalid {
        /// The quantity at fault.
        quantity: Quantity,
        /// Why it is invalid (includes the value).
        reason: String,
    },
    /// The buffer cannot hold the headroom plus one MTU (in whole cells).
    #[error(
        "buffer size {buffer} B cannot hold the headroom ({headroom} B) plus one MTU ({mtu} B) \
         in whole cells: at least {needed} B are needed"
    )]
    BufferTooSmall {
        /// Buffer offered, bytes.
        buffer: u64,
        /// Headroom required, bytes.
        headroom: u64,
        /// One MTU (maximum frame), bytes.
        mtu: u64,
        /// `headroom + mtu` (the MTU rounded up to whole cells), bytes.
        needed: u64,
    },
    /// A preset name that is not in the table.
    #[error("unknown interface-delay preset {name:?}; known presets: {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// Comma-separated list of known names.
        known: String,
    },
    /// A root finder failed to bracket or converge (should not happen for valid inputs).
    #[error("{quantity}: numeric solver failed: {reason}")]
    NoConvergence {
        /// The quantity being solved for.
        quantity: Quantity,
        /// What went wrong.
        reason: String,
    },
}

impl HeadroomError {
    /// Shorthand for [`HeadroomError::Invalid`].
    pub fn invalid(quantity: Quantity, reason: impl Into<String>) -> Self {
        HeadroomError::Invalid {
            quantity,
            reason: reason.into(),
        }
    }

    /// The quantity this error is about.
    pub fn quantity(&self) -> Quantity {
        match self {
            HeadroomError::Invalid { quantity, .. }
            | HeadroomError::NoConvergence { quantity, .. } => *quantity,
            HeadroomError::BufferTooSmall { .. } => Quantity::Buffer,
            HeadroomError::UnknownPreset { .. } => Quantity::Preset,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_sizes_on_the_wire() {
        assert_eq!(frame_bit_times(64), 672);
        assert_eq!(frame_bit_times(2000), 16_160);
        assert_eq!(frame_bit_times(1518), 12_304);
    }

    #[test]
    fn cell_rounding() {
        assert_eq!(round_up_to_cells(100, 64), 128);
        assert_eq!(round_up_to_cells(128, 64), 128);
        assert_eq!(round_up_to_cells(0, 64), 0);
        assert_eq!(round_up_to_cells(101, 1), 101);
        assert_eq!(round_up_to_cells(101, 0), 101);
    }

    #[test]
    fn tolerant_ceil() {
        assert_eq!(ceil_tolerant(5556.000000000001), 5556.0);
        assert_eq!(ceil_tolerant(5555.5556), 5556.0);
        assert_eq!(ceil_tolerant(0.2), 1.0);
    }

    #[test]
    fn errors_name_the_quantity() {
        let e = HeadroomError::invalid(Quantity::Load, "must be below 1, got 1.2");
        assert_eq!(
            e.to_string(),
            "invalid offered load rho: must be below 1, got 1.2"
        );
        assert_eq!(e.quantity(), Quantity::Load);
    }
}
