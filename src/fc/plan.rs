//! What each priority does with its buffer ([`PrioPlan`]: PFC, SFC, credits or lossy, and its
//! limits) and how SFC runs ([`SfcSettings`]): the validated settings the dataplane runs, built
//! by `config` from the file and replaced by link-up's measurements and SIGHUP.

use super::{sfc_guard::SfcSourcePolicy, PfcThresholds, PRIORITIES};

/// The priorities of `prios` with PFC, as a class-enable mask (bit n: priority n).
pub fn pfc_mask(prios: &[PrioPlan; PRIORITIES]) -> u8 {
    (0..PRIORITIES)
        .filter(|&p| prios[p].pfc.is_some())
        .fold(0u8, |m, p| m | (1 << p))
}

/// PFC settings of a lossless priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PfcPlan {
    /// Bytes (per ingress port) at which XOFF is sent.
    pub xoff: u64,
    /// Bytes at which XON is sent.
    pub xon: u64,
    /// Bytes accepted beyond XOFF while the pause takes effect.
    pub headroom: u64,
}

impl PfcPlan {
    /// XOFF + headroom: the buffer these thresholds take. Thresholds in force that take more
    /// than the configured buffer have a headroom that left XOFF no room: XOFF is held at its
    /// minimum, above what the buffer leaves it.
    pub const fn buffer(&self) -> u64 {
        self.xoff + self.headroom
    }

    /// The same buffer split for a headroom of `headroom` bytes: XOFF = buffer − headroom, but
    /// never below `min_xoff` (nor above the buffer), and XON as far below XOFF as these
    /// thresholds put it. The one rule by which a measured or adapted headroom moves XOFF.
    pub fn with_headroom(&self, headroom: u64, min_xoff: u64) -> PfcPlan {
        let buffer = self.buffer();
        let xoff = buffer.saturating_sub(headroom).max(min_xoff.min(buffer));
        PfcPlan {
            xoff,
            xon: xoff.saturating_sub(self.xoff - self.xon),
            headroom: buffer - xoff,
        }
    }
}

/// What link-up measured on one port, whatever a priority's buffer: the headroom its model
/// asks for, and the smallest XOFF the port keeps (two of its longest frames). Each PFC
/// priority of the port divides its own buffer by it ([`PfcPlan::with_headroom`]), so a
/// reload that changes a buffer is divided anew without measuring again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MeasuredHeadroom {
    /// The model's headroom, bytes (wire, software terms and frames).
    pub headroom: u64,
    /// The port's smallest XOFF, bytes.
    pub min_xoff: u64,
}

impl MeasuredHeadroom {
    /// The thresholds of a priority configured as `configured` on the measured port.
    pub fn divide(&self, configured: &PfcPlan) -> PfcPlan {
        configured.with_headroom(self.headroom, self.min_xoff)
    }

    /// True if a buffer of `buffer` bytes holds the measured headroom above the smallest
    /// XOFF; else the headroom in force is what the buffer leaves it.
    pub fn fits(&self, buffer: u64) -> bool {
        buffer >= self.headroom.saturating_add(self.min_xoff)
    }
}

/// SFC settings of a priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SfcPlan {
    /// Egress-queue bytes above which each arriving frame's source gets an SFCM.
    pub threshold: u64,
}

/// What a priority does with its buffer, validated. PFC and SFC are independent: a priority
/// may use either, both, or neither (lossy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PrioPlan {
    /// PFC, if the priority uses it.
    pub pfc: Option<PfcPlan>,
    /// SFC, if the priority uses it.
    pub sfc: Option<SfcPlan>,
    /// Credit-based flow control (never combined with PFC or SFC); `limit` is the buffer.
    pub credit: bool,
    /// Bytes (per ingress port) above which an arriving frame is dropped: the tail-drop limit
    /// of a lossy priority; for a lossless one an overflow that means the buffer was too small
    /// (XOFF + headroom with PFC); for a credit priority the receive buffer.
    pub limit: u64,
}

impl PrioPlan {
    /// A lossy priority that tail-drops above `limit`.
    pub const fn lossy(limit: u64) -> Self {
        PrioPlan {
            pfc: None,
            sfc: None,
            credit: false,
            limit,
        }
    }

    /// A credit priority with a receive buffer of `buffer` bytes per ingress port.
    pub const fn credit(buffer: u64) -> Self {
        PrioPlan {
            pfc: None,
            sfc: None,
            credit: true,
            limit: buffer,
        }
    }

    /// A PFC priority.
    pub const fn pfc(xoff: u64, xon: u64, headroom: u64) -> Self {
        let pfc = PfcPlan {
            xoff,
            xon,
            headroom,
        };
        PrioPlan {
            pfc: Some(pfc),
            sfc: None,
            credit: false,
            limit: pfc.buffer(),
        }
    }

    /// True if the priority never tail-drops (PFC, SFC or credits).
    pub fn lossless(&self) -> bool {
        self.pfc.is_some() || self.sfc.is_some() || self.credit
    }

    /// The mode's name: `lossy`, `pfc`, `sfc`, `pfc+sfc` or `credit`.
    pub fn mode(&self) -> &'static str {
        match (self.pfc.is_some(), self.sfc.is_some()) {
            _ if self.credit => "credit",
            (false, false) => "lossy",
            (true, false) => "pfc",
            (false, true) => "sfc",
            (true, true) => "pfc+sfc",
        }
    }

    /// PFC thresholds, for PFC priorities.
    pub fn thresholds(&self) -> Option<PfcThresholds> {
        self.pfc.map(|p| PfcThresholds {
            xoff: p.xoff,
            xon: p.xon,
        })
    }

    /// Bytes above which an arriving frame is dropped.
    pub fn admit_limit(&self) -> u64 {
        self.limit
    }
}

/// `[sfc]`, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfcSettings {
    /// UDP transport: (port, source IPv4), or `None` for L2.
    pub udp: Option<(u16, [u8; 4])>,
    /// Reserve percentage for TTS + TFS.
    pub reserve_percent: u8,
    /// Longest pause, ns.
    pub max_pause_ns: u64,
    /// Filter duplicates.
    pub filter: bool,
    /// Class or flow scope.
    pub scope: crate::wire::sfcm::SfcScope,
    /// Whose SFC messages the reaction point obeys, and how often.
    pub sources: SfcSourcePolicy,
}

impl Default for SfcSettings {
    /// L2 transport, no reserve, 10 ms maximum pause, filtering on, class scope, messages
    /// from anyone up to the default rate.
    fn default() -> Self {
        SfcSettings {
            udp: None,
            reserve_percent: 0,
            max_pause_ns: 10_000_000,
            filter: true,
            scope: crate::wire::sfcm::SfcScope::Class,
            sources: SfcSourcePolicy::default(),
        }
    }
}
