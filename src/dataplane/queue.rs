//! Per-priority egress queues: fixed-capacity rings of frames, allocated once.
//!
//! A queue owns the frames in it: [`Queued`] holds the frame's token ([`Frame`], not
//! `Copy`), so a frame is queued, or sent, or released, never two of them; pushing moves it
//! in and popping moves it out (see [`super::pool`]).

use std::collections::VecDeque;

use super::pool::Frame;
use crate::fc::PRIORITIES;

/// A queued frame and the ingress port its bytes are charged to.
#[derive(Debug, PartialEq, Eq)]
pub struct Queued {
    /// The frame, owned by the queue while it waits.
    pub frame: Frame,
    /// Ingress port (index in the worker's port list).
    pub ingress: u8,
    /// RX timestamp (for queueing-delay measurements).
    pub rx_ns: u64,
}

/// A bounded FIFO ring that never allocates after creation (a `VecDeque` made with room for
/// `cap` frames and never pushed beyond it).
#[derive(Debug)]
pub struct Ring {
    slots: VecDeque<Queued>,
    cap: usize,
    bytes: u64,
}

impl Ring {
    /// A ring for at most `cap` frames.
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        Ring {
            slots: VecDeque::with_capacity(cap),
            cap,
            bytes: 0,
        }
    }

    /// Appends `q`; returns it back when full.
    #[inline]
    pub fn push(&mut self, q: Queued) -> Result<(), Queued> {
        if self.slots.len() == self.cap {
            return Err(q);
        }
        self.bytes += u64::from(q.frame.len());
        self.slots.push_back(q);
        Ok(())
    }

    /// The oldest frame.
    #[inline]
    pub fn front(&self) -> Option<&Queued> {
        self.slots.front()
    }

    /// The newest frame (the one just pushed).
    #[inline]
    pub fn back(&self) -> Option<&Queued> {
        self.slots.back()
    }

    /// Removes the oldest frame.
    #[inline]
    pub fn pop(&mut self) -> Option<Queued> {
        let q = self.slots.pop_front()?;
        self.bytes -= u64::from(q.frame.len());
        Some(q)
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes queued.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Eight priority queues of one egress port with strict-priority selection.
#[derive(Debug)]
pub struct PrioQueues {
    rings: [Ring; PRIORITIES],
    peak_bytes: [u64; PRIORITIES],
    /// Bit p set while priority p has a frame queued, so selection is one bit scan.
    queued: u8,
}

impl PrioQueues {
    /// Queues holding at most `cap` frames each.
    pub fn new(cap: usize) -> Self {
        PrioQueues {
            rings: std::array::from_fn(|_| Ring::new(cap)),
            peak_bytes: [0; PRIORITIES],
            queued: 0,
        }
    }

    /// Enqueues at priority `p`; returns the frame back when the ring is full.
    pub fn push(&mut self, p: usize, q: Queued) -> Result<(), Queued> {
        self.rings[p].push(q)?;
        self.queued |= 1 << p;
        self.peak_bytes[p] = self.peak_bytes[p].max(self.rings[p].bytes());
        Ok(())
    }

    /// Removes the oldest frame of priority `p`.
    pub fn pop(&mut self, p: usize) -> Option<Queued> {
        let q = self.rings[p].pop()?;
        if self.rings[p].is_empty() {
            self.queued &= !(1 << p);
        }
        Some(q)
    }

    /// The oldest frame of priority `p`.
    pub fn front(&self, p: usize) -> Option<&Queued> {
        self.rings[p].front()
    }

    /// Bitmask of the priorities with a frame queued.
    pub fn queued(&self) -> u8 {
        self.queued
    }

    /// The highest priority with a frame queued whose bit is clear in `paused`.
    pub fn select(&self, paused: u8) -> Option<usize> {
        let ready = self.queued & !paused;
        (ready != 0).then(|| PRIORITIES - 1 - ready.leading_zeros() as usize)
    }

    /// The ring of priority `p`, read-only (push and pop go through [`PrioQueues`], which
    /// tracks what is queued).
    pub fn ring_ref(&self, p: usize) -> &Ring {
        &self.rings[p]
    }

    /// Bytes queued per priority.
    pub fn bytes(&self) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| self.rings[p].bytes())
    }

    /// Highest bytes ever queued per priority.
    pub fn peak_bytes(&self) -> [u64; PRIORITIES] {
        self.peak_bytes
    }

    /// True when nothing is queued at any priority.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Removes every queued frame (shutdown), handing each to `f`.
    pub fn drain(&mut self, mut f: impl FnMut(Queued)) {
        for r in &mut self.rings {
            while let Some(q) = r.pop() {
                f(q);
            }
        }
        self.queued = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(idx: u32, len: u32) -> Queued {
        Queued {
            frame: Frame::for_test(idx, len),
            ingress: 0,
            rx_ns: 0,
        }
    }

    #[test]
    fn ring_is_fifo_bounded_and_counts_bytes() {
        let mut r = Ring::new(2);
        r.push(q(1, 100)).unwrap();
        r.push(q(2, 50)).unwrap();
        assert_eq!(r.push(q(3, 1)), Err(q(3, 1)));
        assert_eq!(r.bytes(), 150);
        assert_eq!(r.pop().unwrap().frame.idx(), 1);
        r.push(q(3, 10)).unwrap(); // wraps around
        assert_eq!(r.pop().unwrap().frame.idx(), 2);
        assert_eq!(r.pop().unwrap().frame.idx(), 3);
        assert!(r.pop().is_none());
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn strict_priority_skips_paused() {
        let mut pq = PrioQueues::new(4);
        pq.push(1, q(1, 10)).unwrap();
        pq.push(5, q(2, 10)).unwrap();
        assert_eq!(pq.select(0), Some(5));
        assert_eq!(pq.select(1 << 5), Some(1));
        assert_eq!(pq.select((1 << 5) | (1 << 1)), None);
        assert_eq!(pq.queued(), (1 << 5) | (1 << 1));
        assert_eq!(pq.pop(5).unwrap().frame.idx(), 2);
        assert_eq!(
            pq.select(0),
            Some(1),
            "an emptied priority is no longer selected"
        );
        pq.push(7, q(3, 10)).unwrap();
        pq.push(0, q(4, 10)).unwrap();
        assert_eq!(pq.select(0), Some(7));
        assert_eq!(pq.select(0xfe), Some(0));
        assert_eq!(pq.peak_bytes()[5], 10);
        let mut n = 0;
        pq.drain(|_| n += 1);
        assert_eq!(n, 3);
        assert!(pq.is_empty());
    }
}
