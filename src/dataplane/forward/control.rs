//! What the worker sends of its own: PFC frames from each ingress port's occupancy (and the
//! headroom they imply), SFCMs to the sources of a congested egress, credit updates, link-up's
//! LLDP and peer-delay frames. Control frames wait in their port's control queue and leave
//! ahead of data.

use crate::dataplane::{pool::Frame, queue::Queued, stats::DropReason};
use crate::{
    fc::{credit_port::emit_update, plan::pfc_mask, priorities, sfc::FrameSource, PRIORITIES},
    wire::{
        sfcm::{self, Ipv4Flow},
        MacAddr, MacControl,
    },
};

use super::ForwardWorker;

impl ForwardWorker {
    /// Queues the credit update port `p` has due, behind the data frames its FCTBS counts
    /// (control frames go out before any later data), and logs lane re-initialisations.
    pub(super) fn send_credit(&mut self, p: usize, now: u64) {
        if self.ports[p].credit.is_empty() {
            return;
        }
        let port = &mut self.ports[p];
        let iface = port.io.name();
        for (priority, reason) in port.credit.take_reinits() {
            tracing::warn!(iface, priority, ?reason, "credit lane re-initialised");
        }
        let Some(update) = self.ports[p].credit.poll(now) else {
            return;
        };
        let Some(mut frame) = self.pool.alloc() else {
            // Lost like an update lost on the wire: the next one carries the same credit.
            return self.stats.ports[p].drop(DropReason::NoBuffer);
        };
        let len = emit_update(&update, self.ports[p].io.mac(), self.pool.buf_mut(&frame));
        frame.set_len(len);
        self.queue_control(p, frame);
    }

    /// SFC congestion point: a frame just queued for `e` at `prio` (the newest of that queue,
    /// which owns it now) above the threshold earns its source (behind ingress port `p`) an
    /// SFCM with the time the queue needs to drain. The source of an SFC-only priority goes
    /// on port `p`'s roster for the stall guard.
    pub(super) fn congestion_sfc(
        &mut self,
        p: usize,
        e: usize,
        prio: usize,
        source: MacAddr,
        now: u64,
    ) {
        if self.ports[e].sfc_cps[prio].is_none() {
            return;
        }
        let ring = self.ports[e].egress.ring_ref(prio);
        // What waits in the ingress RX ring must drain through this queue too.
        let queued = ring.bytes() + self.ports[p].rx_backlog[prio];
        let offending = &ring.back().expect("the frame was just queued").frame;
        let flow = Ipv4Flow::of_frame(self.pool.data(offending));
        if self.setup.prios[prio].pfc.is_none() {
            // Whom the stall guard pauses while this worker cannot (no PFC covers the class).
            let roster = &self.stats.sfc_sources[p];
            self.ports[p]
                .sfc_roster
                .saw(prio as u8, source, flow.as_ref(), roster);
        }
        let cp = self.ports[e].sfc_cps[prio].as_mut().expect("checked above");
        let Some(msg) = cp.on_arrival(now, queued, &FrameSource { mac: source, flow }) else {
            return;
        };
        let c = &self.stats.ports[p];
        let Some(mut frame) = self.pool.alloc() else {
            return c.drop(DropReason::NoBuffer);
        };
        let from = self.ports[p].io.mac();
        let buf = self.pool.buf_mut(&frame);
        let emitted = sfcm::emit_to_source(&msg, from, self.setup.sfc.udp, buf);
        frame.set_len(emitted.expect("a pool frame holds an SFCM"));
        let c = &self.stats.ports[p];
        c.sfcm_tx[prio].add(1);
        self.queue_control(p, frame);
    }

    /// Queues a control frame for TX on `p` ahead of data; counts a drop if the queue is full.
    /// Whether it was queued.
    pub(super) fn queue_control(&mut self, p: usize, frame: Frame) -> bool {
        let q = Queued {
            frame,
            ingress: p as u8,
        };
        match self.ports[p].ctrl.push(q) {
            Ok(()) => true,
            Err(q) => {
                self.stats.ports[p].drop(DropReason::NoBuffer);
                self.pool.release(q.frame);
                false
            }
        }
    }

    /// Congestion point: turns port `p`'s ingress occupancy into PFC frames sent on `p`, and
    /// watches what arrives after each XOFF (the overshoot the headroom must hold).
    pub(super) fn generate_pfc(&mut self, p: usize, now: u64) {
        self.note_pfc_arrivals(p);
        if self.ports[p].shared.egress_held() {
            // No frame leaves a port without a carrier: what is due goes at the first poll
            // after it returns, rather than filling the control queue with retries.
            return;
        }
        let occupancy = self.ports[p].shared.pfc_occupancy();
        // XOFF in time: the cap follows the drain measured up to now, before this turn's poll.
        let port = &mut self.ports[p];
        if let Some(h) = port.headroom.as_mut().filter(|h| h.drain_due(now)) {
            if h.drain(now, &port.shared.arrived_all(), &occupancy) {
                self.apply_thresholds(p);
            }
        }
        // Short of RX buffers: every PFC priority of the port is congested, whatever its bytes.
        let congested = if self.ports[p].shared.fill_starved() {
            u8::MAX
        } else {
            0
        };
        let before = self.ports[p].generator.xoff_mask();
        let sent = self.ports[p].generator.poll(now, &occupancy, congested);
        let after = self.ports[p].generator.xoff_mask();
        if self.leader_bell.is_some() {
            self.ports[p].shared.set_leader_xoff(after);
        }
        let c = &self.stats.ports[p];
        let port = &mut self.ports[p];
        if let Some(h) = port.headroom.as_mut() {
            if self.leader_bell.is_some() {
                h.looked(&port.shared.looked_arrived());
            }
            let arrived = port.shared.arrived_all();
            if h.observe(now, before, after, &arrived, &occupancy, |prio, o| {
                c.overshoot[prio].record(o.bytes);
                c.pfc_reaction_ns[prio].record(o.settle_ns);
            }) {
                self.retune(p, now);
            }
        }
        let Some(m) = sent else {
            return;
        };
        let c = &self.stats.ports[p];
        for (prio, n) in self.ports[p]
            .generator
            .xoff_transitions()
            .iter()
            .enumerate()
        {
            c.xoff_transitions[prio].set(*n);
        }
        for (prio, ns) in self.ports[p].generator.xoff_held_ns(now).iter().enumerate() {
            c.xoff_held_ns[prio].set(*ns);
        }
        self.send_pfc(p, &m, now);
    }

    /// Leader, with several workers: publishes port `p`'s thresholds in force for the others,
    /// and notes whether frames of a PFC priority arrived at the port (on any worker's queue)
    /// since the previous turn; if so it watches by the clock
    /// ([`crate::dataplane::leader_bell::LEADER_WATCH_NS`]).
    fn note_pfc_arrivals(&mut self, p: usize) {
        if self.leader_bell.is_none() {
            return;
        }
        // The thresholds in force, for the other workers to tell a crossing (the XOFF held
        // goes right after each poll).
        let port = &mut self.ports[p];
        if *port.generator.thresholds() != port.published {
            port.published = *port.generator.thresholds();
            port.shared.set_pfc_thresholds(&port.published);
        }
        let mask = pfc_mask(&self.setup.prios);
        let arrived = self.ports[p].shared.arrived_all();
        let sum = priorities(mask).fold(0u64, |s, prio| s.wrapping_add(arrived[prio]));
        let port = &mut self.ports[p];
        self.pfc_flowing |= sum != std::mem::replace(&mut port.pfc_arrived_seen, sum);
    }

    /// Port `p`'s headroom in force changed: its generator gets the new XOFF/XON, and the log
    /// says why, with a warning where the buffer leaves no room for an XOFF.
    pub(super) fn retune(&mut self, p: usize, now: u64) {
        self.apply_thresholds(p);
        let state = &self.ports[p];
        let Some(h) = state.headroom.as_ref() else {
            return;
        };
        for prio in 0..PRIORITIES {
            if let Some(r) = h.report(prio, now) {
                if r.squeezed {
                    tracing::warn!(
                        iface = state.io.name(),
                        priority = prio,
                        headroom = r.in_force,
                        buffer = r.buffer,
                        xoff = r.xoff,
                        "the PFC headroom in force leaves XOFF at its minimum: the source is \
                         paused at almost every burst and the link may idle while it resumes; \
                         raise xoff + headroom to hold the headroom in force and an XOFF"
                    );
                }
                tracing::info!(
                    iface = state.io.name(),
                    priority = prio,
                    headroom = r.in_force,
                    source = r.source.label(),
                    floor = r.floor,
                    measured = r.model,
                    observed = r.evidence,
                    xoff = r.xoff,
                    xon = r.xon,
                    "PFC headroom changed"
                );
            }
        }
    }

    /// Port `p`'s generator gets the XOFF/XON its headroom leaves.
    fn apply_thresholds(&mut self, p: usize) {
        let state = &mut self.ports[p];
        if let Some(h) = state.headroom.as_ref() {
            let port = &self.setup.ports[p];
            state
                .generator
                .reconfigure(h.thresholds(), port.pause_quanta, port.speed_bps);
        }
    }

    /// Queues the PFC frame `m` for TX on port `p` at `now`, counts it, and notes until when it
    /// pauses each priority upstream (the stall guard reads it). A frame that cannot be queued
    /// (no buffer, a full control queue) is a counted drop, and the generator sends it again
    /// at its next poll.
    pub(super) fn send_pfc(&mut self, p: usize, m: &MacControl, now: u64) {
        let queued = match self.pool.alloc() {
            Some(mut frame) => {
                let src = self.ports[p].io.mac();
                let len = m
                    .emit_frame(src, self.pool.buf_mut(&frame))
                    .expect("a pool frame holds a MAC control frame");
                frame.set_len(len);
                self.queue_control(p, frame)
            }
            None => {
                self.stats.ports[p].drop(DropReason::NoBuffer);
                false
            }
        };
        if !queued {
            return self.ports[p].generator.unsent(m, now);
        }
        self.ports[p]
            .shared
            .sent_pause(m, now, self.setup.ports[p].speed_bps);
        if let MacControl::Pfc { enable, .. } = *m {
            let c = &self.stats.ports[p];
            for prio in priorities(enable) {
                c.pfc_tx[prio].add(1);
            }
        }
    }

    /// Link-up: each port's agent takes its loop turn.
    pub(super) fn run_link_agents(&mut self, now: u64) {
        for port in &mut self.ports {
            if let Some(agent) = port.agent.as_mut() {
                agent.poll(&mut *port.io, &mut self.pool, now);
            }
        }
    }
}
