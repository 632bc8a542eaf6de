//! The worker's transmit side: per egress port, control frames first, then data by priority
//! as pauses (PFC, SFC, the watchdog's overrides), credit and the port's shaper allow.
//!
//! Frames move: popped from a queue into the batch `tx`, from `tx` into the port, which
//! drains what it takes; what it leaves in `tx` is dropped (released) here, so each frame
//! leaves the worker exactly once.

use crate::dataplane::{
    shaper::LineGrant,
    stats::{DropReason, PortCounters},
};
use crate::fc::{
    credit_port::Gate,
    priorities,
    watchdog::{PfcWatchdog, WatchdogEvent},
    PRIORITIES,
};

use super::{receive::drop_data, this_and_other, ForwardWorker, WorkerError, BATCH};

/// Data frames and bytes sent per priority in one TX batch: added to the port's counters
/// once per batch, not per frame.
#[derive(Default)]
struct TxTally {
    frames: [u64; PRIORITIES],
    bytes: [u64; PRIORITIES],
    /// Bit p set when priority p has frames in the tally.
    prios: u8,
}

impl TxTally {
    fn add(&mut self, prio: usize, len: u32) {
        self.frames[prio] += 1;
        self.bytes[prio] += u64::from(len);
        self.prios |= 1 << prio;
    }

    /// Takes back a frame that was added but not sent.
    fn remove(&mut self, prio: usize, len: u32) {
        self.frames[prio] -= 1;
        self.bytes[prio] -= u64::from(len);
    }

    /// Adds the tally to `c`: per priority, and the port's totals.
    fn count(&self, c: &PortCounters) {
        let (mut frames, mut bytes) = (0, 0);
        for p in priorities(self.prios) {
            c.tx_data_frames[p].add(self.frames[p]);
            c.tx_data_bytes[p].add(self.bytes[p]);
            frames += self.frames[p];
            bytes += self.bytes[p];
        }
        c.tx_frames.add(frames);
        c.tx_bytes.add(bytes);
    }
}

impl ForwardWorker {
    /// Holds port `e`'s egress when the kernel dropped a frame this worker handed it (since
    /// the last look; kicks in receive's reclaim included), until the carrier watch has read
    /// the carrier: a link that just died says so at once in the drop, up to a second later
    /// in the kernel's link events, and every frame sent meanwhile would be lost.
    pub(super) fn hold_if_refused(&mut self, e: usize) {
        let port = &mut self.ports[e];
        let refused = port.io.tx_refusals();
        if refused != port.tx_refused_seen {
            port.tx_refused_seen = refused;
            if port.shared.transmit_refused() && !port.tx_held {
                // At once: the next receive's reclaim would push the next frame after it.
                port.tx_held = true;
                port.io.hold_tx(true);
            }
        }
    }

    pub(super) fn transmit(&mut self, e: usize, now: u64) -> Result<usize, WorkerError> {
        // No carrier, or not known since the kernel refused a frame: hold every frame rather
        // than send it into a dead link, the ones the port already took included.
        let held = self.ports[e].shared.egress_held();
        if held != self.ports[e].tx_held {
            self.ports[e].tx_held = held;
            self.ports[e].io.hold_tx(held);
            if !held {
                // What the port took before the hold goes first.
                self.ports[e].io.reclaim(&mut self.pool)?;
            }
        }
        let mut sent = 0;
        if !held && !self.ports[e].ctrl.is_empty() {
            self.tx.clear();
            let room = self.ports[e].io.tx_room().min(BATCH);
            let mut bytes = 0;
            while self.tx.len() < room {
                let Some(q) = self.ports[e].ctrl.pop() else {
                    break;
                };
                let port = &self.ports[e];
                port.shared.line().charge(&port.rate, q.frame.len(), now);
                bytes += u64::from(q.frame.len());
                self.tx.push(q.frame);
            }
            let batch = self.tx.len();
            let res = self.ports[e].io.send(&mut self.pool, &mut self.tx);
            let n = batch - self.tx.len();
            let c = &self.stats.ports[e];
            c.tx_frames.add(n as u64);
            // What the port left in `tx` was not sent: its bytes are not counted.
            let unsent: u64 = self.tx.iter().map(|f| u64::from(f.len())).sum();
            c.tx_bytes.add(bytes - unsent);
            for f in self.tx.drain(..) {
                c.drop(DropReason::NoBuffer);
                self.pool.release(f);
            }
            res?;
            sent += n;
        }
        if !self.ports[e].ctrl.is_empty() {
            // A credit update waiting here counts only the data sent before it: no data
            // overtakes it.
            return Ok(sent);
        }
        let (received_pause, _) = self.ports[e].shared.paused(now);
        let mut paused = received_pause & !self.watch(e, received_pause, now);
        if held {
            paused = u8::MAX;
        }
        let room = self.ports[e].io.tx_room().min(BATCH);
        self.tx.clear();
        // What leaves, per priority, counted once per batch below.
        let mut tally = TxTally::default();
        // `room` counts buffers: a jumbo frame over AF_XDP takes several. A frame the port
        // would refuse is never taken (the port would have it dropped).
        let mut slots = 0;
        // Every data frame queued here arrived on the other port, which holds its charge.
        let (port, ingress) = this_and_other(&mut self.ports, e);
        // The port's line, shared with its other workers: what it has free is taken at the
        // first frame that may go, and what this batch does not spend is given back when the
        // grant is dropped below.
        let mut grant: Option<LineGrant> = None;
        while slots < room {
            let Some(prio) = port.egress.select(paused) else {
                break;
            };
            // Looked at in place; taken from the queue below only if it goes.
            let head = port.egress.front(prio).expect("selected ring is non-empty");
            debug_assert_eq!(usize::from(head.ingress), 1 - e);
            let len = head.frame.len();
            let k = self.pool.tx_slots(&head.frame);
            if slots > 0 && slots + k > room {
                break;
            }
            match port.credit.gate(prio, len) {
                Gate::Free | Gate::Send => {}
                Gate::Wait => {
                    paused |= 1 << prio;
                    continue;
                }
                Gate::NeverFits => {
                    let q = port.egress.pop(prio).expect("selected");
                    ingress.release_queued(prio, &q);
                    let c = &self.stats.ports[1 - e];
                    drop_data(c, &mut self.pool, q.frame, DropReason::CreditTooLarge, prio);
                    continue;
                }
            }
            let line = match grant.as_mut() {
                Some(g) => g,
                None => match port.shared.line().grant(&port.rate, now) {
                    Some(g) => grant.insert(g),
                    None => break,
                },
            };
            if !line.try_send(len) {
                break;
            }
            let q = port.egress.pop(prio).expect("selected");
            port.credit.on_sent(prio, len);
            ingress.release_queued(prio, &q);
            if let Some(cp) = port.sfc_cps[prio].as_mut() {
                cp.on_dequeue(u64::from(len), now);
                if port.egress.ring_ref(prio).is_empty() {
                    cp.on_empty();
                }
            }
            self.tx_prios[self.tx.len()] = prio as u8;
            tally.add(prio, len);
            self.tx.push(q.frame);
            slots += k;
        }
        drop(grant);
        if !self.tx.is_empty() {
            let batch = self.tx.len();
            let res = self.ports[e].io.send(&mut self.pool, &mut self.tx);
            // The port drained the first `n`; what it left in `tx` was not sent and is taken
            // off the tally (its priorities are kept beside the batch).
            let n = batch - self.tx.len();
            for (f, &prio) in self.tx.iter().zip(&self.tx_prios[n..]) {
                tally.remove(usize::from(prio), f.len());
            }
            let c = &self.stats.ports[e];
            tally.count(c);
            // `tx_room` promised space; should the ring still refuse, the frames are dropped
            // and counted rather than leaked.
            for f in self.tx.drain(..) {
                c.drop(DropReason::NoBuffer);
                self.pool.release(f);
            }
            res?;
            sent += n;
        }
        Ok(sent)
    }

    /// Priorities whose frames egress `e` drops because the watchdog declared them stormed.
    pub(super) fn watchdog_dropping(&self, e: usize) -> u8 {
        self.ports[e]
            .watchdog
            .as_ref()
            .map_or(0, PfcWatchdog::dropping)
    }

    /// Runs egress `e`'s watchdog on the pause state received; applies the drop action to
    /// queued frames and returns the priorities whose pause is overridden.
    pub(super) fn watch(&mut self, e: usize, received_pause: u8, now: u64) -> u8 {
        let leader = self.setup.pfc_generator;
        let port = &mut self.ports[e];
        let Some(wd) = port.watchdog.as_mut() else {
            return 0;
        };
        let iface = port.io.name();
        let c = &self.stats.ports[e];
        wd.tick(now, received_pause, |ev| {
            // Counted as they come (a watchdog a reload re-creates starts its own count
            // at 0; the counter goes on).
            if let WatchdogEvent::Storm { priority, .. } = ev {
                c.watchdog_storms[priority].add(1);
            }
            if !leader {
                return;
            }
            match ev {
                WatchdogEvent::Storm {
                    priority,
                    paused_since,
                } => tracing::warn!(
                    iface,
                    priority,
                    paused_ms = now.saturating_sub(paused_since) / 1_000_000,
                    "PFC storm detected"
                ),
                WatchdogEvent::Restored {
                    priority,
                    lasted_ns,
                } => tracing::info!(
                    iface,
                    priority,
                    lasted_ms = lasted_ns / 1_000_000,
                    "PFC storm over"
                ),
            }
        });
        let (overridden, dropping, stormed) = (wd.overridden(), wd.dropping(), wd.stormed());
        for p in 0..PRIORITIES {
            let c = &self.stats.ports[e];
            c.watchdog_stormed[p].set(u64::from(stormed & (1 << p) != 0));
            if dropping & (1 << p) != 0 {
                while let Some(q) = self.ports[e].egress.pop(p) {
                    self.release_queued(p, &q);
                    let ingress = usize::from(q.ingress);
                    self.discard_data(ingress, q.frame, DropReason::Watchdog, p);
                }
            }
        }
        overridden
    }
}
