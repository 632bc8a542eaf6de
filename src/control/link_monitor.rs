//! The control plane's look at each port: its carrier, link-up's measurements, and the
//! headroom model each measurement gives.
//!
//! The model of a port is the adaptive headroom `DV = speed·X + rate·(own lag) + 2·MaxFrame +
//! PFCFrame + max(allowance, rate·(peer reaction))` ([`crate::linkup::model_for_round_trip`]),
//! with X the wire round trip just measured and the software terms seen since the previous
//! measurement ([`SoftwareWindow`]). It is published to the workers at every measurement, as
//! the port's measured headroom: each PFC priority of the port takes it out of its own buffer
//! (XOFF = buffer − model), the buffer as configured now, so a reload that changes a buffer
//! needs no new measurement. What the workers keep in force is
//! the largest of the floor, this model and the overshoot observed ([`crate::fc::adaptive`]),
//! so a measurement can only pause sources earlier than the configuration says, never later
//! (unless the operator lowered `min_headroom`).
//!
//! Folding the software terms in continuously, between measurements and with link-up off, was
//! tried and is not in: the p99.99 receive lag times the fastest arrival rate predicted 2.7 MB
//! where 64 KiB was observed (frames that wait in the RX ring while the source is already
//! paused cost no headroom), and the thresholds collapsed to XOFF at its minimum.

use std::{sync::Arc, time::Duration};

use super::link_model::{model_terms, SoftwareWindow};
use crate::{
    config::Plan,
    dataplane::{
        clock::now_ns, pfc_headroom::min_xoff, port::iface_carrier, settings::SettingsCell,
        stats::PortSnapshot,
    },
    fc::{
        credit::{CreditWindow, BLOCK_BYTES},
        plan::MeasuredHeadroom,
    },
    kernel::netlink::Netlink,
    linkup::{
        model_for_round_trip, pdelay::MeasureError, shared::LinkShared, LinkParams, LinkupSettings,
        Measurement,
    },
    wire::ethernet::FCS_OCTETS,
};

/// What the monitor keeps of one port.
#[derive(Debug, Clone)]
struct PortModel {
    /// Carrier as last seen.
    up: bool,
    /// When link-up was last asked to measure.
    last_request: std::time::Instant,
    /// The lag and reaction histograms as of the previous measurement, and the peak rate since.
    software: SoftwareWindow,
    /// A peer-delay responder has answered on this port since the start.
    answered: bool,
    /// That none answers was logged (once: most hosts, `gen` and `sink` included, run none).
    told_silent: bool,
    /// A measurement succeeded since the carrier last came up: what is in force describes
    /// this link, not the one before a flap (a new cable, another peer).
    measured_since_up: bool,
}

/// Watches each port's carrier, drives link-up measurements (at start, on every link-up and
/// every `interval`) and publishes each port's headroom model.
pub struct LinkMonitor<'a> {
    plan: &'a Plan,
    settings: LinkupSettings,
    /// Each port's longest frame (its `mtu` + 18), resolved at start.
    max_frames: &'a [u32],
    links: &'a [Arc<LinkShared>],
    ports: Vec<PortModel>,
    /// The carrier's looks (every 50 ms) share one netlink socket.
    nl: Netlink,
}

impl<'a> LinkMonitor<'a> {
    /// Starts watching, if link-up is on (`None` otherwise): every port whose carrier is up is
    /// measured at once.
    pub fn new(
        plan: &'a Plan,
        max_frames: &'a [u32],
        links: &'a [Arc<LinkShared>],
    ) -> Option<Self> {
        let settings = plan.linkup?;
        let now = std::time::Instant::now();
        let mut nl = Netlink::new(false);
        let ports = plan
            .ports
            .iter()
            .zip(links)
            .map(|(p, l)| {
                let up = iface_carrier(&mut nl, &p.iface);
                if up {
                    tracing::info!(iface = %p.iface, "measuring the link");
                    l.request_measurement();
                }
                PortModel {
                    up,
                    last_request: now,
                    software: SoftwareWindow::default(),
                    answered: false,
                    told_silent: false,
                    measured_since_up: false,
                }
            })
            .collect();
        Some(LinkMonitor {
            plan,
            settings,
            max_frames,
            links,
            ports,
            nl,
        })
    }

    /// `snapshots` reads every port's counters: their receive rates and, when a measurement
    /// completed, the software terms of its model.
    pub fn tick(&mut self, live: &SettingsCell, snapshots: impl Fn() -> Vec<PortSnapshot>) {
        let snaps = snapshots();
        let now = now_ns();
        for (i, snap) in snaps.iter().enumerate().take(self.ports.len()) {
            self.ports[i].software.sample_rx(now, snap);
            self.watch_link(i, live, snap);
        }
    }

    /// Port `i`'s carrier, its measurement requests and their results.
    fn watch_link(&mut self, i: usize, live: &SettingsCell, snap: &PortSnapshot) {
        let settings = self.settings;
        let plan = self.plan;
        let iface = &plan.ports[i].iface;
        let port = &mut self.ports[i];
        let period = Duration::from_nanos(settings.interval_ns);
        let up = iface_carrier(&mut self.nl, iface);
        let came_up = up && !port.up;
        if up != port.up {
            tracing::info!(iface = %iface, up, "link state changed");
            port.up = up;
        }
        if came_up {
            port.measured_since_up = false;
        }
        let due = !period.is_zero() && port.last_request.elapsed() >= period;
        if up && (came_up || due) {
            tracing::info!(iface = %iface, reason = if came_up { "link up" } else { "periodic" }, "measuring the link");
            self.links[i].request_measurement();
            port.last_request = std::time::Instant::now();
        }
        match self.links[i].take_result() {
            None => {}
            // A peer that never answered runs no responder: not a failure of the link.
            Some(Err(MeasureError::NoResponse { requests, .. })) if !port.answered => {
                let first = !std::mem::replace(&mut port.told_silent, true);
                if first {
                    tracing::info!(
                        iface = %iface, requests,
                        "no peer-delay responder on the link (the peer runs neither lossless nor ptp4l -P): the thresholds stay as configured; link-up asks again at every link up and interval"
                    );
                }
            }
            // The first measurement since the carrier came back failed: what is in force
            // describes the link before (another cable, another peer), not this one.
            Some(Err(e)) if !port.measured_since_up && forget(live, i) => tracing::warn!(
                iface = %iface, error = %e,
                "link measurement failed after the link came up; the measurement of the link \
                 before no longer holds: the thresholds as configured apply until one succeeds"
            ),
            Some(Err(e)) => tracing::warn!(
                iface = %iface, error = %e,
                "link measurement failed; keeping the thresholds in force"
            ),
            Some(Ok(m)) => {
                port.answered = true;
                port.measured_since_up = true;
                let mut s = live.get();
                s.rtt_ns[i] = u64::try_from(m.estimate_ns).ok();
                live.publish(s);
                self.check_credit_windows(i, &m);
                self.apply(i, &m, live, snap);
            }
        }
    }

    /// Measurement `m` of port `i` completed: the model (wire, the software terms seen since
    /// the previous measurement, frames) becomes the port's measured headroom, which every PFC
    /// priority of the port takes out of its own buffer as configured now
    /// ([`MeasuredHeadroom::divide`]). A buffer too small for the model leaves that priority's
    /// XOFF at its minimum (the source paused earliest) and says so.
    fn apply(&mut self, i: usize, m: &Measurement, live: &SettingsCell, snap: &PortSnapshot) {
        let iface = &self.plan.ports[i].iface;
        let prios = live.get().prios;
        if prios.iter().all(|p| p.pfc.is_none()) {
            tracing::info!(iface = %iface, round_trip_ns = m.estimate_ns, spread_ns = m.spread_ns, "link measured (no PFC priority to size)");
            return;
        }
        let rtt = m.estimate_ns;
        let software = self.ports[i].software.take(snap, rtt.max(0) as u64);
        let max_frame = max_frame_on_wire(self.settings.max_frame, self.max_frames.get(i));
        // The model needs no buffer: each priority fits it into its own below.
        let mut link = LinkParams::new(self.plan.ports[i].speed_bps, max_frame, 0);
        if self.settings.peer_response_ns > 0 {
            let bits = u128::from(self.settings.peer_response_ns) * u128::from(link.speed_bps);
            link.peer_response_bit_times = (bits / 1_000_000_000) as u64;
        }
        link.own_lag_ns = software.own_lag_ns;
        link.peer_reaction_ns = software.peer_reaction_ns;
        link.software_rate_bps = software.peak_rx_bps;
        let adaptive = match model_for_round_trip(rtt, &link) {
            Ok(a) => a,
            Err(e) => {
                return tracing::warn!(
                    iface = %iface, round_trip_ns = rtt, error = %e,
                    "headroom model unusable; keeping the thresholds in force"
                )
            }
        };
        let measured = MeasuredHeadroom {
            headroom: adaptive.headroom_bytes,
            min_xoff: min_xoff(max_frame),
        };
        for (p, c) in prios
            .iter()
            .enumerate()
            .filter_map(|(p, c)| Some((p, c.pfc?)))
        {
            if !measured.fits(c.buffer()) {
                tracing::warn!(
                    iface = %iface, priority = p, model = measured.headroom, buffer = c.buffer(),
                    xoff = measured.divide(&c).xoff,
                    "the measured link needs more headroom than the priority's buffer holds: XOFF at its minimum; raise xoff + headroom"
                );
            }
        }
        let model = model_terms(&adaptive, software);
        let mut s = live.get();
        s.measured[i] = Some(measured);
        s.model[i] = Some(model);
        live.publish(s);
        tracing::info!(
            iface = %iface, round_trip_ns = rtt, spread_ns = m.spread_ns,
            own_lag_ns = software.own_lag_ns, peer_reaction_ns = software.peer_reaction_ns,
            peak_rx_bps = software.peak_rx_bps,
            wire = model.split.wire, own_lag = model.split.own_lag, peer = model.split.peer, frames = model.split.frames,
            headroom = measured.headroom,
            "link measured; PFC thresholds applied"
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

/// Takes port `i`'s measurement (round trip, headroom, model) out of the live settings; whether
/// there was one.
fn forget(live: &SettingsCell, i: usize) -> bool {
    let mut s = live.get();
    let held = s.rtt_ns[i].is_some() || s.measured[i].is_some() || s.model[i].is_some();
    if held {
        (s.rtt_ns[i], s.measured[i], s.model[i]) = (None, None, None);
        live.publish(s);
    }
    held
}

/// The headroom's MaxFrame (2·MaxFrame is its term) for a port whose longest frame software
/// sees is `port` bytes: the larger of `linkup.max_frame` and that frame on the wire, its FCS
/// (which software never sees) included, as `linkup.max_frame` counts it.
fn max_frame_on_wire(linkup_max_frame: u64, port: Option<&u32>) -> u64 {
    linkup_max_frame.max(port.map_or(0, |&m| u64::from(m) + FCS_OCTETS))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forgetting a port's measurement takes out its three facts and leaves the other port's.
    #[test]
    fn forgetting_a_measurement_leaves_the_other_port() {
        use crate::dataplane::settings::LiveSettings;
        use crate::fc::plan::PrioPlan;
        let held = MeasuredHeadroom {
            headroom: 100_000,
            min_xoff: 3_044,
        };
        let live = SettingsCell::new(LiveSettings {
            prios: [PrioPlan::lossy(1); crate::fc::PRIORITIES],
            watchdog: None,
            pause_quanta: vec![1, 1],
            sfc: Default::default(),
            measured: vec![Some(held); 2],
            rtt_ns: vec![Some(10_000); 2],
            model: vec![None; 2],
            headroom: Default::default(),
        });
        assert!(forget(&live, 0));
        let s = live.get();
        assert_eq!((s.rtt_ns[0], s.measured[0]), (None, None));
        assert_eq!((s.rtt_ns[1], s.measured[1]), (Some(10_000), Some(held)));
        assert!(!forget(&live, 0), "nothing left to forget");
    }

    #[test]
    fn a_ports_longest_frame_counts_with_its_fcs() {
        // MTU 1500 with a tag: 1,518 bytes in software, 1,522 on the wire.
        assert_eq!(max_frame_on_wire(1518, Some(&1518)), 1522);
        assert_eq!(max_frame_on_wire(1518, Some(&9018)), 9022);
        assert_eq!(max_frame_on_wire(2000, Some(&1518)), 2000);
        assert_eq!(max_frame_on_wire(1518, None), 1518);
    }
}
