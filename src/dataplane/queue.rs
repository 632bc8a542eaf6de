//! Per-priority egress queues: fixed-capacity rings of frames, allocated once.
//!
//! A queue owns the frames in it: [`Queued`] holds the frame's token ([`Frame`], not
//! `Copy`), so a frame is queued, or sent, or released, never two of them; pushing moves it
//! in and popping moves it out (see [`super::pool`]).

use super::pool::Frame;
use crate::fc::PRIORITIES;

/// A queued frame and the ingress port its bytes are charged to.
#[derive(Debug, PartialEq, Eq)]
pub struct Queued {
    /// The frame, owned by the queue while it waits.
    pub frame: Frame,
    /// Ingress port (index in the worker's port list).
    pub ingress: u8,
}

/// A bounded FIFO ring that never allocates after creation.
///
/// Its slots are a power of two, so an index wraps with a mask rather than a compare or a
/// division: `head` and `tail` count pushes and pops and run freely (wrapping), and a frame's
/// slot is its count masked. A slot outside `head..tail` is always `None`, so `pop` and
/// `front` of an empty ring find `None` in the slot they read and need no length check.
#[derive(Debug)]
pub struct Ring {
    slots: Box<[Option<Queued>]>,
    /// Slots - 1.
    mask: usize,
    /// Pops so far (wrapping): the oldest frame's slot, masked.
    head: usize,
    /// Pushes so far (wrapping): the next frame's slot, masked.
    tail: usize,
    /// Most frames held (at most the slots).
    cap: usize,
    bytes: u64,
}

impl Ring {
    /// A ring for at most `cap` frames.
    pub fn new(cap: usize) -> Self {
        let cap = cap.max(1);
        let slots = cap.next_power_of_two();
        Ring {
            slots: (0..slots).map(|_| None).collect(),
            mask: slots - 1,
            head: 0,
            tail: 0,
            cap,
            bytes: 0,
        }
    }

    /// Appends `q`; returns it back when full.
    #[inline]
    pub fn push(&mut self, q: Queued) -> Result<(), Queued> {
        if self.len() == self.cap {
            return Err(q);
        }
        self.bytes += u64::from(q.frame.len());
        self.slots[self.tail & self.mask] = Some(q);
        self.tail = self.tail.wrapping_add(1);
        Ok(())
    }

    /// The oldest frame.
    #[inline]
    pub fn front(&self) -> Option<&Queued> {
        self.slots[self.head & self.mask].as_ref()
    }

    /// The newest frame (the one just pushed).
    #[inline]
    pub fn back(&self) -> Option<&Queued> {
        self.slots[self.tail.wrapping_sub(1) & self.mask].as_ref()
    }

    /// Removes the oldest frame.
    #[inline]
    pub fn pop(&mut self) -> Option<Queued> {
        let q = self.slots[self.head & self.mask].take()?;
        self.head = self.head.wrapping_add(1);
        self.bytes -= u64::from(q.frame.len());
        Some(q)
    }

    /// Frames queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.tail.wrapping_sub(self.head)
    }

    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Bytes queued.
    #[inline]
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

    /// A capacity that is not a power of two still bounds the ring, which wraps over its
    /// larger (power-of-two) slots many times in order.
    #[test]
    fn ring_of_any_capacity_wraps_in_order() {
        let mut r = Ring::new(3);
        let mut next = 0;
        for i in 0..20u32 {
            r.push(q(i, 1)).unwrap();
            if r.len() == 3 {
                assert_eq!(r.push(q(99, 1)), Err(q(99, 1)));
                assert_eq!(r.back().unwrap().frame.idx(), i);
                assert_eq!(r.pop().unwrap().frame.idx(), next);
                next += 1;
            }
        }
        while let Some(f) = r.pop() {
            assert_eq!(f.frame.idx(), next);
            next += 1;
        }
        assert_eq!((next, r.len(), r.bytes()), (20, 0, 0));
        assert!(r.front().is_none() && r.back().is_none());
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
