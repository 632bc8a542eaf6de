//! The cable emulator behind `lossless cable`: a two-port forwarder that adds what these
//! kernels cannot (no `tc netem`): one-way delay, jitter, a line rate, and seeded loss,
//! corruption and reordering that can target one frame class.
//!
//! Like a fibre it owns no protocol: PFC, PAUSE, LLDP, PTP, SFC and credit frames pass through
//! untouched unless a rule names them. Each direction is a sans-I/O [`lane::Lane`] (a timed
//! FIFO of frame indexes, order kept, bounded to delay × rate plus a margin) driven by one
//! worker loop over both ports, which share one frame pool so forwarding never copies.
//!
//! Use it from tests with [`run_cable`] and a stop flag, or from the CLI (`lossless cable`).

pub mod delay_line;
pub mod lane;
pub mod report;
pub mod rules;
mod worker;

use std::time::Duration;

pub use report::{CableReport, LaneReport};
pub use rules::{Matcher, RuleSpec};
pub use worker::{run_cable, CableError};

use crate::{
    dataplane::{open::Backend, sched::Request, xdp_prog::XdpMode},
    wire::MIN_FRAME_LEN,
};

/// Rate the FIFO bound assumes for an unshaped direction.
pub const UNSHAPED_BOUND_BPS: u64 = 10_000_000_000;
/// Least slack the FIFO gets beyond delay × rate.
pub const FIFO_MARGIN_BYTES: u64 = 64 * 1024;
/// Most frames one direction's FIFO may hold (2 KiB of frame pool each).
pub const MAX_FIFO_FRAMES: usize = 1 << 17;

/// Settings of one direction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaneSettings {
    /// One-way delay added to every frame, ns.
    pub delay_ns: u64,
    /// Uniform jitter of ± this many ns around the delay (order is still kept).
    pub jitter_ns: u64,
    /// Line rate, bit/s, with 24 bytes of wire overhead per frame; `None` = unshaped.
    pub rate_bps: Option<u64>,
    /// Drop matching frames with this probability.
    pub loss: Option<RuleSpec>,
    /// Flip one bit past the Ethernet header of matching frames with this probability.
    pub corrupt: Option<RuleSpec>,
    /// Swap matching frames with the next frame with this probability.
    pub reorder: Option<RuleSpec>,
    /// FIFO limit in bytes; `None` = (delay + jitter) × rate + margin.
    pub fifo_limit: Option<u64>,
}

impl LaneSettings {
    /// Bytes the FIFO may hold: the bandwidth-delay product at the configured rate (or
    /// [`UNSHAPED_BOUND_BPS`]) plus the larger of [`FIFO_MARGIN_BYTES`] and 1/8 of it.
    pub fn fifo_limit_bytes(&self) -> u64 {
        if let Some(l) = self.fifo_limit {
            return l.max(MIN_FRAME_LEN as u64);
        }
        let rate = self.rate_bps.unwrap_or(UNSHAPED_BOUND_BPS);
        let ns = u128::from(self.delay_ns + self.jitter_ns);
        let bdp = (ns * u128::from(rate)).div_ceil(8_000_000_000) as u64;
        bdp + FIFO_MARGIN_BYTES.max(bdp / 8)
    }

    /// Frames the FIFO may hold: its byte limit in minimum-size frames, at most
    /// [`MAX_FIFO_FRAMES`].
    pub fn fifo_frames(&self) -> usize {
        ((self.fifo_limit_bytes() / MIN_FRAME_LEN as u64) as usize + 64).min(MAX_FIFO_FRAMES)
    }
}

/// Everything [`run_cable`] needs.
#[derive(Debug, Clone)]
pub struct CableSetup {
    /// Side A interface.
    pub a: String,
    /// Side B interface.
    pub b: String,
    /// Direction A → B.
    pub ab: LaneSettings,
    /// Direction B → A.
    pub ba: LaneSettings,
    /// Seed of every random rule and of the jitter.
    pub seed: u64,
    /// Stop after this long (else only the stop flag ends the run).
    pub duration: Option<Duration>,
    /// Packet I/O backend.
    pub backend: Backend,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Frame pool size; `None` sizes it from the FIFOs and rings.
    pub frames: Option<u32>,
    /// Spin instead of sleeping when idle.
    pub busy_poll: bool,
    /// Run the cable's thread real-time (`--realtime`).
    pub realtime: Option<Request>,
    /// Log a progress line this often (zero: never).
    pub progress: Duration,
}

impl CableSetup {
    /// A plain cable (no delay, unshaped, no rules) between `a` and `b`.
    pub fn new(a: impl Into<String>, b: impl Into<String>) -> Self {
        CableSetup {
            a: a.into(),
            b: b.into(),
            ab: LaneSettings::default(),
            ba: LaneSettings::default(),
            seed: 1,
            duration: None,
            backend: Backend::Auto,
            xdp_mode: XdpMode::Auto,
            frames: None,
            busy_poll: false,
            realtime: None,
            progress: Duration::ZERO,
        }
    }

    /// The same settings in both directions.
    pub fn both(mut self, s: LaneSettings) -> Self {
        self.ab = s.clone();
        self.ba = s;
        self
    }

    /// Frames in the pool: both FIFOs, each port's RX fill ring (2048) and TX ring (4096),
    /// and a few batches of slack.
    pub fn pool_frames(&self) -> u32 {
        self.frames.unwrap_or_else(|| {
            let rings = 2 * (2048 + 4096) + 4 * worker::BATCH;
            (rings + self.ab.fifo_frames() + self.ba.fifo_frames()) as u32
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_sizing() {
        let s = LaneSettings::default();
        assert_eq!(s.fifo_limit_bytes(), FIFO_MARGIN_BYTES);
        let s = LaneSettings {
            delay_ns: 1_000_000,
            ..Default::default()
        };
        // 1 ms at the 10 Gbit/s bound = 1.25 MB, plus 1/8.
        assert_eq!(s.fifo_limit_bytes(), 1_250_000 + 156_250);
        assert_eq!(s.fifo_frames(), 1_406_250 / 60 + 64);
        let s = LaneSettings {
            delay_ns: 100_000,
            rate_bps: Some(1_000_000_000),
            ..Default::default()
        };
        assert_eq!(s.fifo_limit_bytes(), 12_500 + FIFO_MARGIN_BYTES);
        let s = LaneSettings {
            fifo_limit: Some(10),
            ..Default::default()
        };
        assert_eq!(s.fifo_limit_bytes(), 60);
        let c = CableSetup::new("x", "y");
        assert!(c.pool_frames() as usize > 2 * (2048 + 4096));
    }
}
