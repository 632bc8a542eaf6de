//! The control plane's look at each port every tick: its carrier, link-up's measurements, and
//! the headroom model they and the software terms give.
//!
//! The model of a port is the adaptive headroom `DV = speed·X + rate·(own lag) + 2·MaxFrame +
//! PFCFrame + max(allowance, rate·(peer reaction))` ([`crate::linkup::model_for_round_trip`]),
//! with X the wire round trip link-up last measured (0 until it has, or with link-up off) and
//! the software terms held by [`SoftwareWindow`]. It is published to the workers (as the
//! port's measured thresholds: XOFF = buffer − model) when it changes:
//! - at every link measurement (a new X), whatever the change, and
//! - at every fold of the software terms ([`super::link_model::FOLD_INTERVAL_NS`]) when `[headroom] adaptive` is
//!   on (the default) or link-up has measured, if it moved by at least 1/[`DECAY_STEP`] of
//!   the value published. A smaller move is not worth what a publication costs the workers
//!   (their overshoot meters start afresh on new thresholds), and the model's buckets are a
//!   factor of two coarse anyway.
//!
//! Until something was seen the model is small (frames and the response allowance); what the
//! workers keep in force is the largest of the floor, this model and the overshoot observed
//! ([`crate::fc::adaptive`]), so publishing it can only pause sources earlier than the
//! configuration says, never later (unless the operator lowered `min_headroom`).

use std::{sync::Arc, time::Duration};

use super::{
    carrier,
    link_model::{model_terms, SoftwareWindow},
};
use crate::{
    config::Plan,
    dataplane::{
        clock::now_ns, pfc_headroom::min_xoff, settings::SettingsCell, stats::PortSnapshot,
    },
    fc::{
        adaptive::DECAY_STEP,
        credit::{CreditWindow, BLOCK_BYTES},
        plan::PfcPlan,
    },
    headroom::HeadroomError,
    linkup::{
        model_for_round_trip, plan_for_round_trip, shared::LinkShared, LinkParams, Measurement,
    },
};

/// What the monitor keeps of one port.
#[derive(Debug, Clone)]
struct PortModel {
    /// Carrier as last seen.
    up: bool,
    /// When link-up was last asked to measure.
    last_request: std::time::Instant,
    software: SoftwareWindow,
    /// The wire round trip of the last link measurement, ns.
    round_trip_ns: Option<u64>,
    /// The headroom last published, bytes.
    published: Option<u64>,
    /// Whether the model last published did not fit the buffer (warned once per crossing).
    over_buffer: bool,
}

/// Whether a fold that computed `headroom` should publish it, `published` being the headroom
/// last published, `floor` the priority's floor and `measured` whether link-up has measured
/// the port: a move of 1/[`DECAY_STEP`] or more; the first only once it asks for more than
/// the floor or the port was measured (until then the configured thresholds stay, and the
/// status says so).
fn worth_publishing(published: Option<u64>, headroom: u64, floor: u64, measured: bool) -> bool {
    match published {
        Some(old) => headroom.abs_diff(old) * DECAY_STEP >= old.max(1),
        None => measured || headroom > floor,
    }
}

/// Why the model is being published.
#[derive(Debug, Clone, Copy)]
enum Trigger<'m> {
    /// A link measurement completed.
    Measured(&'m Measurement),
    /// The software terms were folded.
    Folded,
}

/// Watches each port's carrier, drives link-up measurements (at start, on every link-up and
/// every `interval`, when link-up is on) and publishes each port's headroom model.
pub struct LinkMonitor<'a> {
    plan: &'a Plan,
    /// Each port's longest frame (its `mtu` + 18), resolved at start.
    max_frames: &'a [u32],
    links: &'a [Arc<LinkShared>],
    ports: Vec<PortModel>,
}

impl<'a> LinkMonitor<'a> {
    /// Starts watching; with link-up on, every port whose carrier is up is measured at once.
    pub fn new(plan: &'a Plan, max_frames: &'a [u32], links: &'a [Arc<LinkShared>]) -> Self {
        let now = std::time::Instant::now();
        let ports = plan
            .ports
            .iter()
            .zip(links)
            .map(|(p, l)| {
                let up = carrier::is_up(&p.iface);
                if up && plan.linkup.is_some() {
                    tracing::info!(iface = %p.iface, "measuring the link");
                    l.request_measurement();
                }
                PortModel {
                    up,
                    last_request: now,
                    software: SoftwareWindow::default(),
                    round_trip_ns: None,
                    published: None,
                    over_buffer: false,
                }
            })
            .collect();
        LinkMonitor {
            plan,
            max_frames,
            links,
            ports,
        }
    }

    /// `snapshots` reads every port's counters: their receive rates, lag and reaction
    /// distributions feed the software terms.
    pub fn tick(&mut self, live: &SettingsCell, snapshots: impl Fn() -> Vec<PortSnapshot>) {
        let snaps = snapshots();
        let now = now_ns();
        let headroom = live.get().headroom;
        for (i, snap) in snaps.iter().enumerate().take(self.ports.len()) {
            self.ports[i].software.sample_rx(now, snap);
            if self.plan.linkup.is_some() {
                self.watch_link(i, live, now, snap);
            }
            let port = &mut self.ports[i];
            if port.software.fold_due(now) {
                let rtt = port.round_trip_ns.unwrap_or(0);
                port.software.fold(now, snap, rtt, headroom.half_life_ns);
                if headroom.adaptive || port.round_trip_ns.is_some() {
                    self.publish(i, live, Trigger::Folded);
                }
            }
        }
    }

    /// Port `i`'s carrier, its measurement requests and their results.
    fn watch_link(&mut self, i: usize, live: &SettingsCell, now: u64, snap: &PortSnapshot) {
        let Some(settings) = self.plan.linkup else {
            return;
        };
        let plan = self.plan;
        let iface = &plan.ports[i].iface;
        let port = &mut self.ports[i];
        let period = Duration::from_nanos(settings.interval_ns);
        let up = carrier::is_up(iface);
        let came_up = up && !port.up;
        if up != port.up {
            tracing::info!(iface = %iface, up, "link state changed");
            port.up = up;
        }
        let due = !period.is_zero() && port.last_request.elapsed() >= period;
        if up && (came_up || due) {
            tracing::info!(iface = %iface, reason = if came_up { "link up" } else { "periodic" }, "measuring the link");
            self.links[i].request_measurement();
            port.last_request = std::time::Instant::now();
        }
        match self.links[i].take_result() {
            None => {}
            Some(Err(e)) => tracing::warn!(
                iface = %iface, error = %e,
                "link measurement failed; keeping the thresholds in force"
            ),
            Some(Ok(m)) => {
                let mut s = live.get();
                s.rtt_ns[i] = u64::try_from(m.estimate_ns).ok();
                live.publish(s);
                self.check_credit_windows(i, &m);
                let rtt = m.estimate_ns.max(0) as u64;
                let port = &mut self.ports[i];
                port.round_trip_ns = Some(rtt);
                // What was seen up to now counts at once, with the wire taken out.
                let half_life = live.get().headroom.half_life_ns;
                port.software.fold(now, snap, rtt, half_life);
                self.publish(i, live, Trigger::Measured(&m));
            }
        }
    }

    /// Computes port `i`'s model and publishes it if `trigger` calls for it (see the module
    /// doc). A model larger than the buffer leaves XOFF at its minimum (the source paused
    /// earliest) and says so.
    fn publish(&mut self, i: usize, live: &SettingsCell, trigger: Trigger<'_>) {
        let plan = self.plan;
        let iface = &plan.ports[i].iface;
        let Some(configured) = plan.prios.iter().find_map(|p| p.pfc) else {
            if let Trigger::Measured(m) = trigger {
                tracing::info!(iface = %iface, round_trip_ns = m.estimate_ns, spread_ns = m.spread_ns, "link measured (no PFC priority to size)");
            }
            return;
        };
        let buffer = configured.xoff + configured.headroom;
        let port = &self.ports[i];
        let software = port.software.terms();
        let rtt = port.round_trip_ns.unwrap_or(0) as i64;
        // 2·MaxFrame: the port's own longest frame where its mtu is jumbo.
        let max_frame = self
            .plan
            .linkup
            .map_or(0, |l| l.max_frame)
            .max(self.max_frames.get(i).map_or(0, |&m| u64::from(m)));
        let speed_bps = plan.ports[i].speed_bps;
        let mut link = LinkParams::new(speed_bps, max_frame, buffer);
        if let Some(l) = self.plan.linkup.filter(|l| l.peer_response_ns > 0) {
            let bits = u128::from(l.peer_response_ns) * u128::from(speed_bps);
            link.peer_response_bit_times = (bits / 1_000_000_000) as u64;
        }
        link.own_lag_ns = software.own_lag_ns;
        link.peer_reaction_ns = software.peer_reaction_ns;
        link.software_rate_bps = software.peak_rx_bps;
        let unusable = |e: HeadroomError| {
            tracing::warn!(
                iface = %iface, round_trip_ns = rtt, error = %e,
                "headroom model unusable; keeping the thresholds in force"
            )
        };
        let (thresholds, adaptive, fits) = match plan_for_round_trip(rtt, &link) {
            Ok(h) => (
                PfcPlan {
                    xoff: h.xoff_bytes,
                    xon: h.xon_bytes,
                    headroom: h.headroom_bytes,
                },
                h.adaptive,
                true,
            ),
            // Only the buffer is short: the model (rare path: computed again) still stands.
            Err(HeadroomError::BufferTooSmall { .. }) => {
                let adaptive = match model_for_round_trip(rtt, &link) {
                    Ok(a) => a,
                    Err(e) => return unusable(e),
                };
                let xoff = min_xoff(max_frame).min(buffer);
                let thresholds = PfcPlan {
                    xoff,
                    xon: 0,
                    headroom: buffer - xoff,
                };
                (thresholds, adaptive, false)
            }
            Err(e) => return unusable(e),
        };
        let port = &mut self.ports[i];
        if let Trigger::Folded = trigger {
            let floor = live
                .get()
                .headroom
                .min_headroom
                .unwrap_or(configured.headroom);
            let measured = port.round_trip_ns.is_some();
            if !worth_publishing(port.published, thresholds.headroom, floor, measured) {
                return;
            }
        }
        port.published = Some(thresholds.headroom);
        if !fits && !port.over_buffer {
            tracing::warn!(
                iface = %iface, model = adaptive.headroom_bytes, buffer, xoff = thresholds.xoff,
                "the port needs more headroom than the buffer holds: XOFF at its minimum; raise xoff + headroom"
            );
        }
        port.over_buffer = !fits;
        let model = model_terms(&adaptive, software);
        let mut s = live.get();
        s.measured[i] = Some(thresholds);
        s.model[i] = Some(model);
        live.publish(s);
        let what = match trigger {
            Trigger::Measured(_) => "link measured; PFC thresholds applied",
            Trigger::Folded => "headroom model changed; thresholds follow",
        };
        tracing::info!(
            iface = %iface, round_trip_ns = rtt,
            own_lag_ns = software.own_lag_ns, peer_reaction_ns = software.peer_reaction_ns,
            peak_rx_bps = software.peak_rx_bps,
            wire = model.split.wire, own_lag = model.split.own_lag, peer = model.split.peer, frames = model.split.frames,
            headroom = thresholds.headroom, xoff = thresholds.xoff, xon = thresholds.xon,
            "{what}"
        );
    }

    /// Warns for each credit priority whose window is below the measured link's
    /// bandwidth-delay product: its peer cannot send at full rate.
    fn check_credit_windows(&self, i: usize, m: &Measurement) {
        let port = &self.plan.ports[i];
        if !port.credit {
            return;
        }
        let rtt_ns = u128::try_from(m.estimate_ns).unwrap_or(0);
        let bdp = (u128::from(port.speed_bps) * rtt_ns / 8 / 1_000_000_000) as u64;
        for (p, plan) in self.plan.prios.iter().enumerate().filter(|(_, p)| p.credit) {
            let Ok(w) = CreditWindow::from_buffer(plan.limit / BLOCK_BYTES, bdp) else {
                continue;
            };
            if w.below_bdp {
                tracing::warn!(
                    iface = %port.iface, priority = p, window = u64::from(w.window_blocks) * BLOCK_BYTES,
                    bdp, max_rate_percent = (w.max_rate_fraction() * 100.0).round(),
                    "credit window below the measured bandwidth-delay product: full rate is impossible"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fold_publishes_moves_of_a_sixteenth_and_a_first_model_above_the_floor() {
        const FLOOR: u64 = 256 * 1024;
        // Nothing published: a model within the floor changes nothing the workers keep.
        assert!(!worth_publishing(None, 20_000, FLOOR, false));
        assert!(worth_publishing(None, FLOOR + 1, FLOOR, false));
        // A measured port's model is shown whatever its size.
        assert!(worth_publishing(None, 20_000, FLOOR, true));
        // Published 320,000: moves under 20,000 (1/16) wait, larger ones go either way.
        assert!(!worth_publishing(Some(320_000), 339_999, FLOOR, true));
        assert!(!worth_publishing(Some(320_000), 300_001, FLOOR, true));
        assert!(worth_publishing(Some(320_000), 340_000, FLOOR, true));
        assert!(worth_publishing(Some(320_000), 300_000, FLOOR, false));
        assert!(!worth_publishing(Some(320_000), 320_000, FLOOR, false));
    }
}
