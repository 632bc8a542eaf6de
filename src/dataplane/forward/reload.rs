//! Settings reloaded while the worker runs, and the gauges it publishes for readers.

use crate::dataplane::{
    clock::now_ns, pfc_headroom::HeadroomReport, sched, settings::LiveSettings,
};
use crate::fc::{
    plan::{pfc_mask, PrioPlan},
    sfc_guard::SfcGuard,
    watchdog::PfcWatchdog,
    PRIORITIES,
};

use super::{admission_row, sfc_congestion_points, ForwardWorker};

impl ForwardWorker {
    /// Publishes the gauges readers see (queue depth and peak, paused time, headroom) for
    /// every port, and lets the observed headroom evidence decay.
    pub(super) fn publish_gauges(&mut self, now: u64) {
        for p in 0..self.ports.len() {
            let port = &mut self.ports[p];
            if let Some(h) = port.headroom.as_mut() {
                let held = port.generator.xoff_held_ns(now);
                if h.advance(now, &port.shared.arrived_all(), &held) {
                    self.retune(p, now);
                }
            }
            self.size_fill_ring(p, now);
            let c = &self.stats.ports[p];
            let Some(h) = self.ports[p].headroom.as_ref() else {
                continue;
            };
            self.ports[p].shared.set_guard_stall(h.guard_stall_ns(now));
            for prio in 0..PRIORITIES {
                // A priority that is not PFC, or no longer after a reload, has nothing in
                // force to show (metrics and status show a headroom only where one is).
                let r = h.report(prio, now);
                let v = |f: fn(&HeadroomReport) -> u64| r.as_ref().map_or(0, f);
                c.headroom_in_force[prio].set(v(|r| r.in_force));
                c.headroom_source[prio].set(v(|r| r.source as u64));
                c.headroom_floor[prio].set(v(|r| r.floor));
                c.headroom_model[prio].set(v(|r| r.model));
                c.headroom_evidence[prio].set(v(|r| r.evidence));
                c.headroom_notice[prio].set(v(|r| r.notice));
                c.headroom_changes[prio].set(v(|r| r.changes.0));
                c.headroom_changed_ns[prio].set(v(|r| r.changes.1.unwrap_or(0)));
                c.xoff_in_force[prio].set(v(|r| r.xoff));
                c.xon_in_force[prio].set(v(|r| r.xon));
                c.pfc_drain_rate[prio].set(v(|r| r.drain_rate.unwrap_or(0)));
                c.pfc_peak_excess[prio].set(v(|r| r.peak_excess.unwrap_or(0)));
            }
        }
        for e in 0..self.ports.len() {
            let c = &self.stats.ports[e];
            let depth = self.ports[e].egress.bytes();
            let peak = self.ports[e].egress.peak_bytes();
            for p in 0..PRIORITIES {
                let (Some(lane), Some(r)) =
                    (self.ports[e].credit.lane(p), self.ports[e].credit.report(p))
                else {
                    continue;
                };
                let available = if r.active {
                    lane.tx().available_blocks()
                } else {
                    0
                };
                c.credit_available[p].set(u64::from(available) * crate::fc::credit::BLOCK_BYTES);
                c.credit_active[p].set(u64::from(r.active));
                c.credit_updates_tx[p].set(r.updates_sent);
                c.credit_updates_rx[p].set(r.updates_received);
                c.credit_resyncs[p].set(r.resyncs);
                c.credit_reinits[p].set(r.reinits);
            }
            let backlog_drops = self.ports[e].io.backlog_drops();
            let oversize = self.ports[e].io.oversize_drops();
            for p in 0..PRIORITIES {
                let new = oversize[p].saturating_sub(self.ports[e].oversize_seen[p]);
                if new > 0 {
                    c.drop_oversize(p, new);
                    self.ports[e].oversize_seen[p] = oversize[p];
                }
                c.rx_backlog_bytes[p].set(self.ports[e].rx_backlog[p]);
                c.rx_backlog_drops[p].set(backlog_drops[p]);
                c.queue_bytes[p].set(depth[p]);
                c.queue_peak_bytes[p].set(peak[p]);
            }
        }
    }

    /// Enters or leaves `SCHED_FIFO` as `[daemon] realtime` asks of the priorities now
    /// ([`sched::WorkerRealtime`]), from the worker's own thread, at a reload only. A refusal
    /// leaves the policy as it was, and the next reload tries again.
    fn follow_realtime(&mut self) {
        let Some(rt) = self.realtime else {
            return;
        };
        let want = rt.wanted(self.setup.prios.iter().any(PrioPlan::lossless));
        if want == self.fifo {
            return;
        }
        let (switched, policy) = if want {
            (sched::enter_fifo(rt.priority), "SCHED_FIFO")
        } else {
            (sched::leave_fifo(), "SCHED_OTHER")
        };
        match switched {
            Ok(()) => {
                self.fifo = want;
                if want && self.setup.busy_poll {
                    sched::warn_of_busy_polling();
                }
                tracing::info!(
                    policy,
                    priority = rt.priority,
                    "{}",
                    if want {
                        "a priority is lossless now: the worker runs real-time"
                    } else {
                        "no priority is lossless now: the worker runs normal scheduling"
                    }
                );
            }
            Err(e) => tracing::warn!(policy, error = %e, "the worker's policy was not switched"),
        }
    }

    /// Applies reloaded settings without dropping queued frames: admission and PFC use the new
    /// thresholds from now on; PFC and watchdog keep their state; the worker's policy follows
    /// the priorities ([`Self::follow_realtime`]).
    pub(super) fn apply(&mut self, s: &LiveSettings) {
        let sfc_changed =
            s.prios.map(|p| p.sfc) != self.setup.prios.map(|p| p.sfc) || s.sfc != self.setup.sfc;
        let guards_changed = s.sfc.sources != self.setup.sfc.sources;
        self.setup.sfc = s.sfc;
        if pfc_mask(&s.prios) != pfc_mask(&self.setup.prios) {
            let now = now_ns();
            for agent in self.ports.iter_mut().filter_map(|p| p.agent.as_mut()) {
                agent.set_pfc_enabled(pfc_mask(&s.prios), now);
            }
        }
        self.setup.prios = s.prios;
        self.follow_realtime();
        // A priority turned lossless gets its buffers from the next refill on, and the pool's
        // reserve against lossy frames at once; a lean ring is deep again until its bound has
        // fitted a while under the new settings.
        for port in &mut self.ports {
            port.fill_sizer.restart();
        }
        self.keep_lossless_buffers();
        self.setup.headroom = s.headroom;
        self.setup.watchdog = s.watchdog;
        let now = now_ns();
        for (i, (state, port)) in self.ports.iter_mut().zip(&mut self.setup.ports).enumerate() {
            if sfc_changed {
                state.sfc_cps =
                    sfc_congestion_points(&s.prios, &s.sfc, port.speed_bps, self.setup.rate_share);
            }
            if guards_changed {
                state.sfc_guard = SfcGuard::new(s.sfc.sources);
            }
            let measured = s.measured.get(i).copied().flatten();
            let thresholds = match state.headroom.as_mut() {
                Some(h) => {
                    h.reconfigure(s.headroom, &s.prios, measured, now);
                    h.thresholds()
                }
                None => std::array::from_fn(|p| s.plan_for(i, p).0.thresholds()),
            };
            port.pause_quanta = s.pause_quanta.get(i).copied().unwrap_or(u16::MAX);
            state
                .generator
                .reconfigure(thresholds, port.pause_quanta, port.speed_bps);
            // SFC: the sources of this egress's queues sit behind the other port of the wire.
            let rtt = s.rtt_ns.get(1 - i).copied().flatten();
            for cp in state.sfc_cps.iter_mut().flatten() {
                cp.set_link_rtt(rtt);
            }
            state.admission = admission_row(|prio| s.plan_for(i, prio).0);
            match (s.watchdog, state.watchdog.as_mut()) {
                (None, _) => {
                    // No watchdog, no storm: its gauge would say one for ever.
                    state.watchdog = None;
                    for stormed in &self.stats.ports[i].watchdog_stormed {
                        stormed.set(0);
                    }
                }
                (Some(c), None) => state.watchdog = Some(PfcWatchdog::new(c)),
                (Some(c), Some(w)) => w.set_config(c),
            }
        }
    }
}
