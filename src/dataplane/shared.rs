//! Per-port state every worker must see: buffer occupancy per priority (charged at RX,
//! released at TX, whichever workers do those), what waits in the port's RX rings, pause
//! deadlines from received PFC frames and whether the port has a carrier.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::fc::PRIORITIES;

/// Shared state of one port.
#[derive(Debug, Default)]
pub struct SharedPort {
    /// Bytes charged to this port as ingress, per priority.
    occupancy: [AtomicU64; PRIORITIES],
    /// Bytes steered by the XDP program and not yet taken from an RX ring, per priority,
    /// summed over the port's queues (each worker adds the change of its own queue's).
    rx_backlog: [AtomicU64; PRIORITIES],
    /// Workers whose fill ring for this port is running short of buffers.
    fill_starved: AtomicU32,
    /// Bytes arrived per priority (steered by XDP), summed over the port's queues.
    arrived: [AtomicU64; PRIORITIES],
    /// CLOCK_MONOTONIC ns until which this port's egress priority is paused by PAUSE/PFC.
    pause_until: [AtomicU64; PRIORITIES],
    /// CLOCK_MONOTONIC ns until which this port's egress priority is paused by SFC.
    sfc_until: [AtomicU64; PRIORITIES],
    /// The port has no carrier (or is down): its egress holds every frame.
    link_down: AtomicBool,
}

impl SharedPort {
    /// Charges `bytes` to priority `p` if its occupancy stays within `limit`; returns whether
    /// it did. The charge is taken first and given back when it went beyond the limit, so of
    /// two workers charging at once, never both pass a limit with room for one (another
    /// reader may see the excess for the instant before it is given back).
    #[inline]
    pub fn try_charge(&self, p: usize, bytes: u64, limit: u64) -> bool {
        let before = self.occupancy[p].fetch_add(bytes, Relaxed);
        if before + bytes > limit {
            self.occupancy[p].fetch_sub(bytes, Relaxed);
            return false;
        }
        true
    }

    /// Releases `bytes` of priority `p`.
    #[inline]
    pub fn release(&self, p: usize, bytes: u64) {
        self.occupancy[p].fetch_sub(bytes, Relaxed);
    }

    /// Bytes charged to priority `p`.
    #[inline]
    pub fn occupancy(&self, p: usize) -> u64 {
        self.occupancy[p].load(Relaxed)
    }

    /// All priorities' occupancy.
    pub fn occupancy_all(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.occupancy(p))
    }

    /// Replaces one worker's share of the RX backlog: it was `old` and is now `new` bytes.
    #[inline]
    pub fn update_rx_backlog(&self, old: &[u64; PRIORITIES], new: &[u64; PRIORITIES]) {
        for p in 0..PRIORITIES {
            if old[p] != new[p] {
                // Wrapping: the sum over workers never goes below zero, one share may shrink.
                self.rx_backlog[p].fetch_add(new[p].wrapping_sub(old[p]), Relaxed);
            }
        }
    }

    /// Adds one worker's new arrivals per priority (`new` − `old` of its queue's totals).
    #[inline]
    pub fn add_arrived(&self, old: &[u64; PRIORITIES], new: &[u64; PRIORITIES]) {
        for p in 0..PRIORITIES {
            if old[p] != new[p] {
                self.arrived[p].fetch_add(new[p].wrapping_sub(old[p]), Relaxed);
            }
        }
    }

    /// Bytes arrived per priority on the port (steered by XDP) since start.
    pub fn arrived_all(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.arrived[p].load(Relaxed))
    }

    /// Bytes per priority waiting in the port's RX rings.
    pub fn rx_backlog_all(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.rx_backlog[p].load(Relaxed))
    }

    /// What the PFC congestion point of this port acts on, per priority: bytes queued plus
    /// bytes still waiting in its RX rings (a frame counts from the XDP hook on).
    pub fn pfc_occupancy(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| {
            self.occupancy[p]
                .load(Relaxed)
                .wrapping_add(self.rx_backlog[p].load(Relaxed))
        })
    }

    /// One worker's fill ring for this port started (`true`) or stopped running short.
    pub fn set_fill_starved(&self, starved: bool) {
        if starved {
            self.fill_starved.fetch_add(1, Relaxed);
        } else {
            self.fill_starved.fetch_sub(1, Relaxed);
        }
    }

    /// Some worker's fill ring for this port is running short of buffers.
    #[inline]
    pub fn fill_starved(&self) -> bool {
        self.fill_starved.load(Relaxed) != 0
    }

    /// Records whether the port is operational (the carrier watch does).
    pub fn set_link_up(&self, up: bool) {
        self.link_down.store(!up, Relaxed);
    }

    /// False while the port has no carrier: its egress holds frames.
    #[inline]
    pub fn link_up(&self) -> bool {
        !self.link_down.load(Relaxed)
    }

    /// Applies new pause deadlines (a new value replaces the running timer).
    pub fn set_pause(&self, deadlines: &[Option<u64>; PRIORITIES]) {
        for (p, d) in deadlines.iter().enumerate() {
            if let Some(until) = d {
                self.pause_until[p].store(*until, Relaxed);
            }
        }
    }

    /// Pauses priority `p` until `until` by SFC; a running longer pause is kept (max rule).
    pub fn sfc_pause(&self, p: usize, until: u64) {
        self.sfc_until[p].fetch_max(until, Relaxed);
    }

    /// Bitmask of priorities paused (by PAUSE/PFC or SFC) at `now`, and the earliest running
    /// deadline.
    #[inline]
    pub fn paused(&self, now: u64) -> (u8, Option<u64>) {
        let mut mask = 0u8;
        let mut next: Option<u64> = None;
        for p in 0..PRIORITIES {
            let u = self.pause_until[p]
                .load(Relaxed)
                .max(self.sfc_until[p].load(Relaxed));
            if u > now {
                mask |= 1 << p;
                next = Some(next.map_or(u, |n| n.min(u)));
            }
        }
        (mask, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_beyond_the_limit_is_refused_and_given_back() {
        let s = SharedPort::default();
        assert!(s.try_charge(3, 1000, 2500));
        assert!(s.try_charge(3, 1000, 2500));
        assert!(!s.try_charge(3, 1000, 2500), "3000 > 2500");
        assert_eq!(s.occupancy(3), 2000, "the refused charge was given back");
        assert!(s.try_charge(3, 500, 2500), "exactly the limit fits");
        s.release(3, 2500);
        assert_eq!(s.occupancy_all(), [0; PRIORITIES]);
    }

    /// Two threads charging one priority at once never take it past its limit together.
    #[test]
    fn concurrent_charges_never_pass_the_limit_together() {
        let s = std::sync::Arc::new(SharedPort::default());
        let taken: u64 = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let s = &s;
                    scope
                        .spawn(move || (0..10_000).filter(|_| s.try_charge(0, 100, 50_000)).count())
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap() as u64).sum()
        });
        assert_eq!(taken, 500, "exactly the limit's worth was admitted");
        assert_eq!(s.occupancy(0), 50_000);
    }
}
