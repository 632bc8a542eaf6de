//! The worker's receive side: a batch from a port's RX ring, each frame classified once
//! (oversize, link-up's, PAUSE/PFC, credit update, SFCM, link-local, data), data admitted
//! against its (ingress port, priority) limit and queued for the other port or dropped with a
//! reason; what waits in the RX ring is accounted from the XDP program's counters.

use crate::dataplane::{
    agent::Taken,
    classify::{self, Trust},
    handoff::HandoffEnd,
    pool::{Frame, FramePool},
    port::RxFrame,
    queue::Queued,
    stats::{DropReason, PortCounters},
};
use crate::{
    fc::{sfc::SfcRpConfig, sfc_guard::Refusal, PauseTimers, PRIORITIES},
    wire::{self, EthernetFrame, FrameKind, MacControl, Sfcm, SfcmFrame},
};

use super::{this_and_other, ForwardWorker, PortState, WorkerError, BATCH};

/// What receiving a batch on one port reads of the worker's settings and state, looked up
/// once per batch rather than per frame: none of it changes while the batch is handled.
struct RxBatch {
    /// Longest frame the port takes.
    max_frame: u32,
    /// How the port's frames are classified.
    trust: Trust,
    /// Priorities the other port's watchdog drops (it changes only when that port transmits).
    dropping: u8,
}

impl PortState {
    /// A queued frame of `prio` that arrived on this port left the buffer (sent or dropped):
    /// its occupancy and credit get the room back.
    pub(super) fn release_queued(&mut self, prio: usize, q: &Queued) {
        self.shared.release(prio, u64::from(q.frame.len()));
        self.credit.on_drain(prio, q.frame.len());
    }
}

impl ForwardWorker {
    pub(super) fn receive(&mut self, p: usize, now: u64) -> Result<usize, WorkerError> {
        self.ports[p].io.reclaim(&mut self.pool)?;
        // The batch is moved out while its frames are handed on (each moves into a queue or
        // back to the pool), and the emptied vector back in: no allocation.
        let mut rx = std::mem::take(&mut self.rx);
        rx.clear();
        let got = self.ports[p].io.recv(&mut self.pool, &mut rx, BATCH, now);
        let n = rx.len();
        let batch = RxBatch {
            max_frame: self.setup.ports[p].max_frame,
            trust: self.setup.ports[p].trust,
            dropping: self.watchdog_dropping(1 - p),
        };
        for rx in rx.drain(..) {
            if rx.frame.len() > batch.max_frame {
                self.oversize(p, rx.frame);
                continue;
            }
            self.ingress(p, &batch, rx, now);
        }
        self.rx = rx;
        let n = got.map(|_| n)?;
        // An empty turn with nothing published as waiting has nothing new to say.
        if n > 0
            || self.ports[p].rx_backlog != [0; PRIORITIES]
            || self.ports[p].fill_watch.starved()
        {
            self.account_rx_backlog(p);
        }
        Ok(n)
    }

    /// Publishes what still waits in port `p`'s RX ring (from the XDP program's counters) and
    /// whether its fill ring is short of buffers: both are congestion the PFC and SFC
    /// congestion points of `p` act on, before the kernel has to drop anything.
    pub(super) fn account_rx_backlog(&mut self, p: usize) {
        let b = self.ports[p].io.rx_backlog();
        if b.bytes != self.ports[p].rx_backlog {
            self.ports[p]
                .shared
                .update_rx_backlog(&self.ports[p].rx_backlog, &b.bytes);
            self.ports[p].rx_backlog = b.bytes;
        }
        let arrived = self.ports[p].taken.unwrap_or(b.arrived);
        if arrived != self.ports[p].arrived {
            self.ports[p]
                .shared
                .add_arrived(&self.ports[p].arrived, &arrived);
            self.ports[p].arrived = arrived;
        }
        let c = &self.stats.ports[p];
        if let Some(starved) = self.ports[p].fill_watch.update(&b) {
            self.ports[p].shared.set_fill_starved(starved);
            if starved {
                c.fill_starved_events.add(1);
            }
        }
        c.rx_backlog_frames_peak.max(b.frames);
    }

    /// Drops a frame longer than port `p` takes (a backend that cannot see it before the
    /// worker: AF_PACKET reports a truncated frame's real length), counted per priority.
    pub(super) fn oversize(&mut self, p: usize, frame: Frame) {
        let prio = EthernetFrame::new_checked(self.pool.data(&frame))
            .map_or(0, |eth| classify::priority(&eth, self.setup.ports[p].trust));
        self.stats.ports[p].drop_oversize(prio, 1);
        self.pool.release(frame);
    }

    /// Classifies one received frame: PAUSE/PFC feed the reaction point, link-local control
    /// is consumed, data is admitted to the other port's queue or dropped with a reason.
    fn ingress(&mut self, p: usize, batch: &RxBatch, rx: RxFrame, now: u64) {
        let data = self.pool.data(&rx.frame);
        // The frame's header is read here, once: everything below goes by this.
        let class = wire::classify(data);
        // The link agents' frames: LLDP and PTP to the bridge group addresses or to the port;
        // to another host they go the way of data (end-to-end PTP, say), on every worker.
        if matches!(class.kind, FrameKind::Lldp | FrameKind::Ptp)
            && class
                .eth(data)
                .is_some_and(|e| e.dst().is_bridge_filtered() || e.dst() == self.ports[p].io.mac())
        {
            if let Some(agent) = &mut self.ports[p].agent {
                match agent.on_frame(class.kind, data, rx.rx_ns, now) {
                    Taken::Consumed => return self.pool.release(rx.frame),
                    Taken::Malformed => return self.discard(p, rx.frame, DropReason::Malformed),
                    Taken::NotMine => {}
                }
            } else if let Some(HandoffEnd::ToLeader(leader)) = &mut self.handoff {
                // The leader runs the port's agent: what it would take is handed over with its
                // stamp.
                if leader.post(p, class.kind, data, rx.rx_ns) {
                    return self.pool.release(rx.frame);
                }
                return self.discard(p, rx.frame, DropReason::NoBuffer);
            }
        }
        let c = &self.stats.ports[p];
        let flen = rx.frame.len();
        let len = u64::from(flen);
        c.rx_frames.add(1);
        c.rx_bytes.add(len);
        if rx.stamped {
            let lag = now.saturating_sub(rx.rx_ns);
            c.rx_lag_ns.record(lag);
            c.rx_lag_peak_ns.max(lag);
        }
        match class.kind {
            FrameKind::Runt => return self.discard(p, rx.frame, DropReason::Malformed),
            FrameKind::Pfc | FrameKind::Pause => {
                return match MacControl::parse(class.payload(data)) {
                    Ok(m) => {
                        self.react(p, &m, now);
                        self.pool.release(rx.frame);
                    }
                    Err(_) => self.discard(p, rx.frame, DropReason::Malformed),
                };
            }
            FrameKind::Credit => {
                if self.ports[p].credit.is_empty() {
                    // Credits are not enabled on this port: link-local, not forwarded.
                    return self.discard(p, rx.frame, DropReason::LinkLocal);
                }
                return match self.ports[p].credit.on_update(now, class.payload(data)) {
                    Ok(unmatched) => {
                        self.credit_unmatched(p, unmatched);
                        self.pool.release(rx.frame);
                    }
                    Err(_) => self.discard(p, rx.frame, DropReason::Malformed),
                };
            }
            FrameKind::Sfcm => {
                // One addressed to another host that the port's policy refuses, or that does
                // not parse, is not the daemon's to judge: it goes the way of data below, as
                // any frame for another host does (the host's own policy decides).
                let own = self.ports[p].io.mac();
                match SfcmFrame::parse(data) {
                    Ok(f) => match self.ports[p].sfc_guard.admit(f.eth.src, now) {
                        Ok(()) => return self.take_sfcm(p, &f, rx.frame, now),
                        Err(_) if f.eth.dst != own => {}
                        Err(Refusal::NotAllowed) => {
                            return self.discard(p, rx.frame, DropReason::SfcmNotAllowed)
                        }
                        Err(Refusal::RateLimited) => {
                            return self.discard(p, rx.frame, DropReason::SfcmRateLimited)
                        }
                    },
                    Err(_) if class.eth(data).is_some_and(|e| e.dst() != own) => {}
                    Err(_) => return self.discard(p, rx.frame, DropReason::Malformed),
                }
            }
            // LLDP and PTP no link agent took go the way of data: link-local, dropped below.
            FrameKind::Lldp | FrameKind::Ptp | FrameKind::Data => {}
        }
        let Some(eth) = class.eth(data) else {
            return self.discard(p, rx.frame, DropReason::Malformed);
        };
        let source = eth.src();
        if eth.dst().is_bridge_filtered() {
            return self.discard(p, rx.frame, DropReason::LinkLocal);
        }
        let prio = classify::priority(&eth, batch.trust);
        c.rx_data_frames[prio].add(1);
        c.rx_data_bytes[prio].add(len);
        let e = 1 - p;
        let (ingress, egress) = this_and_other(&mut self.ports, p);
        if let Some(taken) = &mut ingress.taken {
            taken[prio] = taken[prio].wrapping_add(len);
        }
        // Every data frame counts towards the blocks received, kept or not.
        if !ingress.credit.on_data(now, prio, flen) {
            return drop_data(c, &mut self.pool, rx.frame, DropReason::CreditOverrun, prio);
        }
        let admit = ingress.admission[prio];
        // The bytes are reserved by the check itself: two workers admitting to one (port,
        // priority) at once cannot both pass a limit that has room for one of them.
        let admitted = if !admit.lossless {
            self.pool.available() >= self.lossy_reserve
                && ingress.shared.try_charge(prio, len, admit.limit)
        } else if ingress.shared.try_charge(prio, len, admit.limit) {
            true
        } else if self.setup.headroom.borrow && self.pool.available() > self.borrow_floor {
            borrow(ingress, c, prio, len, admit.limit);
            true
        } else {
            false
        };
        if !admitted {
            let reason = if admit.lossless {
                DropReason::HeadroomOverflow
            } else {
                DropReason::TailDrop
            };
            ingress.credit.on_drain(prio, flen);
            return drop_data(c, &mut self.pool, rx.frame, reason, prio);
        }
        let (refused, frame) = if batch.dropping & (1 << prio) != 0 {
            (DropReason::Watchdog, rx.frame)
        } else {
            let q = Queued {
                frame: rx.frame,
                ingress: p as u8,
            };
            // The queue owns the frame now; a full one hands it back.
            match egress.egress.push(prio, q) {
                Ok(()) => return self.congestion_sfc(p, e, prio, source, now),
                Err(q) => (DropReason::NoBuffer, q.frame),
            }
        };
        ingress.shared.release(prio, len);
        ingress.credit.on_drain(prio, flen);
        drop_data(c, &mut self.pool, frame, refused, prio)
    }

    /// A queued frame of `prio` left the buffer (sent or dropped): its ingress port's
    /// occupancy and credit get the room back.
    pub(super) fn release_queued(&mut self, prio: usize, q: &Queued) {
        self.ports[usize::from(q.ingress)].release_queued(prio, q);
    }

    /// An SFCM received on port `p` and admitted by its sender policy (`frame` holds it).
    /// One addressed to this port is for the daemon as its reaction point. One addressed to
    /// any other host is in transit: the daemon never rewrites addresses, so a congestion
    /// point behind it (a host, or the next daemon of a chain) addresses the source in front
    /// of it, and the message goes on to that source out of the other port, ahead of data as
    /// the daemon's own SFCMs do. The daemon also obeys it where the priority is lossless
    /// here, so that the class is held hop by hop even if the source never hears it (its own
    /// PFC or SFC then tells the source). Where the priority is lossy here, pausing the
    /// egress would only turn the congestion point's message into tail drops at the daemon
    /// while the source went on sending: the source's own pause is what keeps the frames.
    fn take_sfcm(&mut self, p: usize, f: &SfcmFrame, frame: Frame, now: u64) {
        let prio = usize::from(f.msg.priority & 7);
        self.stats.ports[p].sfcm_rx[prio].add(1);
        let transit = f.eth.dst != self.ports[p].io.mac();
        if !transit || self.setup.prios[prio].lossless() {
            self.react_sfc(p, &f.msg, now);
        }
        if transit {
            self.stats.ports[p].sfcm_forwarded[prio].add(1);
            self.queue_control(1 - p, frame);
        } else {
            self.pool.release(frame);
        }
    }

    /// SFC reaction point: an SFCM received on port `p` pauses `p`'s egress class for the
    /// interval it asks for (clamped as [`SfcRpConfig::pause_until`] says). The port's
    /// [`SharedPort`](crate::dataplane::shared::SharedPort) keeps the later of that and a
    /// pause already running (the max rule), and is the one owner of the deadline every
    /// worker's egress reads. The daemon pauses classes only: a forwarder has no per-flow
    /// queues to hold a single flow back.
    fn react_sfc(&mut self, p: usize, msg: &Sfcm, now: u64) {
        let prio = usize::from(msg.priority & 7);
        let until = SfcRpConfig::default().pause_until(msg, now);
        self.ports[p].shared.sfc_pause(now, prio, until);
    }

    /// Says once per VL that port `p`'s peer runs credits where the port does not (`unmatched`
    /// from [`crate::fc::credit_port::CreditPort::on_update`]): nothing is lost here, but the
    /// peer's lane waits for ever and that priority of the peer sends nothing.
    fn credit_unmatched(&mut self, p: usize, unmatched: u16) {
        let new = unmatched & !self.ports[p].credit_unmatched;
        if new == 0 {
            return;
        }
        self.ports[p].credit_unmatched |= new;
        let vls: Vec<u16> = (0..16).filter(|v| new & (1 << v) != 0).collect();
        tracing::warn!(
            iface = self.ports[p].io.name(),
            ?vls,
            "the link partner runs credits on priorities this port does not: its lane waits \
             for an answer that never comes and sends nothing; make them credit priorities \
             here, or not there"
        );
    }

    pub(super) fn discard(&mut self, p: usize, frame: Frame, reason: DropReason) {
        self.stats.ports[p].drop(reason);
        self.pool.release(frame);
    }

    /// Drops a data frame of priority `prio` that arrived on port `p`, counted per reason and
    /// per priority.
    pub(super) fn discard_data(&mut self, p: usize, frame: Frame, reason: DropReason, prio: usize) {
        drop_data(&self.stats.ports[p], &mut self.pool, frame, reason, prio);
    }

    /// Reaction point: a PAUSE/PFC frame received on port `p` pauses `p`'s egress.
    pub(super) fn react(&mut self, p: usize, m: &MacControl, now: u64) {
        let c: &PortCounters = &self.stats.ports[p];
        match *m {
            MacControl::Pause { .. } => c.pause_rx.add(1),
            MacControl::Pfc { enable, .. } => {
                for (prio, counter) in c.pfc_rx.iter().enumerate() {
                    if enable & (1 << prio) != 0 {
                        counter.add(1);
                    }
                }
            }
        }
        let deadlines = PauseTimers::deadlines(m, now, self.setup.ports[p].speed_bps);
        self.ports[p].shared.set_pause(now, &deadlines);
    }
}

/// Keeps a frame of lossless priority `prio` (`len` bytes) that found the buffer of its
/// ingress port `ingress` full (`limit`): its bytes are charged beyond the limit, so the
/// congestion point sees them and keeps its source paused until they have left, and the
/// frame and how far beyond the buffer it went are counted in `c`. The caller has checked
/// that the pool has the frame to spare.
///
/// A switch drops such a frame because the memory behind its buffer is used up; here the
/// frame is already in a frame of the pool, and dropping it would only free that frame. A
/// worker or a source held off its CPU for milliseconds (a host that stops a vCPU, kernel
/// work that is not preempted) sends more than the headroom in force was sized for
/// (bench/RESULTS.md (29)); the pool's spare frames hold it, as a switch's shared headroom
/// pool holds what one priority's headroom cannot. Beyond [`super::BORROW_FLOOR_DIVISOR`]'s
/// share of the pool the frame is dropped after all, as `headroom_overflow`: the fill rings
/// and the control frames need what is left.
fn borrow(ingress: &PortState, c: &PortCounters, prio: usize, len: u64, limit: u64) {
    let held = ingress.shared.charge(prio, len);
    c.headroom_borrowed[prio].add(1);
    c.headroom_borrowed_peak[prio].max(held.saturating_sub(limit));
}

/// Drops a data frame of priority `prio`, counted in `c` per reason and per priority: what
/// [`ForwardWorker::discard_data`] does, for a caller holding a port's state borrowed.
pub(super) fn drop_data(
    c: &PortCounters,
    pool: &mut FramePool,
    frame: Frame,
    reason: DropReason,
    prio: usize,
) {
    c.drop_data(reason, prio);
    pool.release(frame);
}
