//! Settings that may change while the daemon runs (SIGHUP): the per-priority plan, the PFC
//! watchdog and each port's pause time. Workers poll a generation number (one relaxed load
//! per loop turn) and take the lock only when it changed.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex,
};

use crate::fc::adaptive::HeadroomSettings;
use crate::fc::{
    plan::{PfcPlan, PrioPlan, SfcSettings},
    watchdog::WatchdogConfig,
    PRIORITIES,
};
use crate::headroom::adaptive::HeadroomSplit;

/// The reloadable part of the configuration (`config::Plan::live_settings`).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSettings {
    /// Per-priority buffer policy.
    pub prios: [PrioPlan; PRIORITIES],
    /// PFC watchdog, if enabled.
    pub watchdog: Option<WatchdogConfig>,
    /// XOFF pause time per port, quanta.
    pub pause_quanta: Vec<u16>,
    /// SFC transport and corrections.
    pub sfc: SfcSettings,
    /// PFC thresholds measured at link-up, per (ingress) port; they replace the configured
    /// thresholds of every PFC priority on that port. `None`: the configured ones apply.
    pub measured: Vec<Option<PfcPlan>>,
    /// Round trip measured at link-up per port, ns (TTS + TFS of SFC for sources behind it).
    pub rtt_ns: Vec<Option<u64>>,
    /// The terms of link-up's headroom model per port (what status and metrics show).
    pub model: Vec<Option<ModelTerms>>,
    /// How the PFC headroom adapts.
    pub headroom: HeadroomSettings,
}

/// The terms of link-up's headroom model of one port (what status and metrics show).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ModelTerms {
    /// Wire (speed × round trip), own lag and peer (each × the rate below), frames, bytes:
    /// they add up to the measured headroom before it is fitted into the buffer.
    #[serde(flatten)]
    pub split: HeadroomSplit,
    /// The own lag used (receive lag at p99.99 since the last measurement), ns.
    pub own_lag_ns: u64,
    /// The peer reaction measured (p99.99 of XOFF to last arrival, less the wire round trip),
    /// ns.
    pub peer_reaction_ns: u64,
    /// The rate the own lag and peer reaction were charged at: the fastest the port received
    /// since the previous measurement, at most the speed, bit/s.
    pub rate_bps: u64,
}

impl LiveSettings {
    /// The plan of `prio` on ingress port `port`, and where its PFC thresholds come from
    /// (`measured` or `config`).
    pub fn plan_for(&self, port: usize, prio: usize) -> (PrioPlan, &'static str) {
        let plan = self.prios[prio];
        match (plan.pfc, self.measured.get(port).copied().flatten()) {
            (Some(_), Some(m)) => (
                PrioPlan {
                    pfc: Some(m),
                    limit: m.buffer(),
                    ..plan
                },
                "measured",
            ),
            _ => (plan, "config"),
        }
    }
}

/// The current settings and their generation.
#[derive(Debug)]
pub struct SettingsCell {
    generation: AtomicU64,
    current: Mutex<LiveSettings>,
}

impl SettingsCell {
    /// A cell holding `s` at generation 0.
    pub fn new(s: LiveSettings) -> Self {
        SettingsCell {
            generation: AtomicU64::new(0),
            current: Mutex::new(s),
        }
    }

    /// The generation, bumped by every [`SettingsCell::publish`].
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A copy of the current settings.
    pub fn get(&self) -> LiveSettings {
        self.current.lock().expect("settings lock").clone()
    }

    /// Replaces the settings; workers pick them up at their next loop turn.
    pub fn publish(&self, s: LiveSettings) {
        *self.current.lock().expect("settings lock") = s;
        self.generation.fetch_add(1, Ordering::Release);
    }
}
