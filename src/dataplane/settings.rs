//! Settings that may change while the daemon runs (SIGHUP): the per-priority plan, the PFC
//! watchdog and each port's pause time. Workers poll a generation number (one relaxed load
//! per loop turn) and take the lock only when it changed.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex,
};

use crate::fc::adaptive::HeadroomSettings;
use crate::fc::{
    plan::{MeasuredHeadroom, PrioPlan, SfcSettings},
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
    /// The headroom link-up measured, per (ingress) port: every PFC priority of the port
    /// divides its own buffer by it ([`LiveSettings::plan_for`]). `None`: the configured
    /// thresholds apply.
    pub measured: Vec<Option<MeasuredHeadroom>>,
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
    /// (`measured` or `config`). A measured port keeps each priority's buffer (its limit) as
    /// configured now and moves XOFF by the measured headroom.
    pub fn plan_for(&self, port: usize, prio: usize) -> (PrioPlan, &'static str) {
        let plan = self.prios[prio];
        match (plan.pfc, self.measured.get(port).copied().flatten()) {
            (Some(c), Some(m)) => (
                PrioPlan {
                    pfc: Some(m.divide(&c)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fc::plan::PfcPlan;

    /// Two PFC priorities with buffers of their own on a port link-up measured: each takes the
    /// measured headroom out of its own buffer (one too small for it keeps XOFF at the
    /// minimum), keeps its own limit and XOFF − XON; a lossy priority and the port link-up
    /// did not measure keep what is configured.
    #[test]
    fn a_measured_port_divides_each_priority_buffer_by_the_measured_headroom() {
        let mut prios = [PrioPlan::lossy(512 * 1024); PRIORITIES];
        prios[3] = PrioPlan::pfc(64 * 1024, 32 * 1024, 2 * 1024 * 1024);
        prios[5] = PrioPlan::pfc(256 * 1024, 128 * 1024, 256 * 1024);
        let measured = MeasuredHeadroom {
            headroom: 300_000,
            min_xoff: 3036,
        };
        let s = LiveSettings {
            prios,
            watchdog: None,
            pause_quanta: vec![u16::MAX; 2],
            sfc: SfcSettings::default(),
            measured: vec![Some(measured), None],
            rtt_ns: vec![None; 2],
            model: vec![None; 2],
            headroom: HeadroomSettings::default(),
        };
        let buffer3 = 64 * 1024 + 2 * 1024 * 1024;
        let (p3, source) = s.plan_for(0, 3);
        assert_eq!(source, "measured");
        assert_eq!(
            p3.pfc,
            Some(PfcPlan {
                xoff: buffer3 - 300_000,
                xon: buffer3 - 300_000 - 32 * 1024,
                headroom: 300_000,
            })
        );
        assert_eq!(p3.limit, buffer3);
        // 512 KiB cannot hold 300,000 bytes of headroom above an XOFF of 256 KiB, but it
        // holds them above the smallest XOFF.
        let buffer5 = 512 * 1024;
        let (p5, _) = s.plan_for(0, 5);
        assert!(measured.fits(buffer5));
        assert_eq!(p5.pfc.unwrap().xoff, buffer5 - 300_000);
        assert_eq!(p5.pfc.unwrap().xon, buffer5 - 300_000 - 128 * 1024);
        assert_eq!(p5.limit, buffer5);
        // A buffer too small for it: XOFF at its minimum, the rest headroom.
        let small = PfcPlan {
            xoff: 100_000,
            xon: 50_000,
            headroom: 100_000,
        };
        assert!(!measured.fits(small.buffer()));
        assert_eq!(
            measured.divide(&small),
            PfcPlan {
                xoff: 3036,
                xon: 0,
                headroom: 200_000 - 3036,
            }
        );
        assert_eq!(s.plan_for(0, 0), (prios[0], "config"));
        assert_eq!(s.plan_for(1, 3), (prios[3], "config"));
    }
}
