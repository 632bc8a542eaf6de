//! The cable's timed FIFO: a fixed-capacity ring of frames with the time each becomes eligible
//! for transmission. Order is kept (eligible times never decrease along the ring) and nothing
//! is allocated after creation.
//!
//! The line owns the frames in it: an [`Entry`] holds the frame's token (not `Copy`, see
//! [`crate::dataplane::pool`]), moved in by a push and out by a pop, so a frame is on the
//! cable or with its sender, never both.

use std::collections::VecDeque;

use crate::dataplane::pool::Frame;

/// A frame in flight on the cable.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    /// The frame (owned by the cable until sent).
    pub frame: Frame,
    /// When it was received (CLOCK_MONOTONIC ns, the XDP RX stamp where available).
    pub rx_ns: u64,
    /// When it may leave.
    pub eligible_ns: u64,
}

/// A bounded ring of [`Entry`] in order of eligibility (a `VecDeque` made with room for
/// `capacity` entries and never pushed beyond it).
#[derive(Debug)]
pub struct DelayLine {
    ring: VecDeque<Entry>,
    capacity: usize,
    bytes: u64,
}

impl DelayLine {
    /// A ring for at most `capacity` frames (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        DelayLine {
            ring: VecDeque::with_capacity(capacity),
            capacity,
            bytes: 0,
        }
    }

    /// Most frames the ring holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True if no frame is held.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// True if no frame fits.
    pub fn is_full(&self) -> bool {
        self.ring.len() == self.capacity
    }

    /// Bytes of the frames held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Appends `e`; gives it back if the ring is full. The caller keeps eligible times
    /// non-decreasing.
    #[inline]
    pub fn push_back(&mut self, e: Entry) -> Result<(), Entry> {
        if self.is_full() {
            return Err(e);
        }
        self.bytes += u64::from(e.frame.len());
        self.ring.push_back(e);
        Ok(())
    }

    /// Puts `e` back at the head (a frame the TX ring did not take); gives it back if full.
    #[inline]
    pub fn push_front(&mut self, e: Entry) -> Result<(), Entry> {
        if self.is_full() {
            return Err(e);
        }
        self.bytes += u64::from(e.frame.len());
        self.ring.push_front(e);
        Ok(())
    }

    /// The oldest frame.
    #[inline]
    pub fn front(&self) -> Option<&Entry> {
        self.ring.front()
    }

    /// Removes and returns the oldest frame.
    #[inline]
    pub fn pop_front(&mut self) -> Option<Entry> {
        let e = self.ring.pop_front()?;
        self.bytes -= u64::from(e.frame.len());
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(idx: u32, len: u32, t: u64) -> Entry {
        Entry {
            frame: Frame::for_test(idx, len),
            rx_ns: t,
            eligible_ns: t + 10,
        }
    }

    #[test]
    fn fifo_order_capacity_and_bytes() {
        let mut d = DelayLine::new(3);
        assert!(d.is_empty() && d.front().is_none() && d.pop_front().is_none());
        d.push_back(e(1, 100, 0)).unwrap();
        d.push_back(e(2, 200, 1)).unwrap();
        d.push_back(e(3, 300, 2)).unwrap();
        assert!(d.is_full());
        assert_eq!(d.push_back(e(4, 1, 3)), Err(e(4, 1, 3)));
        assert_eq!(d.bytes(), 600);
        assert_eq!(d.pop_front().unwrap().frame.idx(), 1);
        // Wrap around.
        d.push_back(e(4, 400, 3)).unwrap();
        assert_eq!(d.pop_front().unwrap().frame.idx(), 2);
        let f = d.pop_front().unwrap();
        assert_eq!(f.frame.idx(), 3);
        d.push_front(f).unwrap();
        assert_eq!(d.front().unwrap().frame.idx(), 3);
        assert_eq!(d.len(), 2);
        assert_eq!(d.bytes(), 700);
        assert_eq!(d.pop_front().unwrap().frame.idx(), 3);
        assert_eq!(d.pop_front().unwrap().frame.idx(), 4);
        assert_eq!(d.bytes(), 0);
        assert_eq!(d.capacity(), 3);
    }
}
