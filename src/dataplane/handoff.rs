//! Link-local control frames (LLDP, peer delay) that arrive at a worker other than the leader,
//! handed over to the leader, which runs every port's link agent.
//!
//! **Why.** An AF_XDP socket receives what arrives on its RX queue, and worker w binds queue w
//! of every port. A NIC's RSS, or on veth the queue the peer sent on, can put a link
//! partner's LLDP and peer-delay frames on any queue. Link-up runs on the leader only (one
//! agent per port: one neighbour, one measurement in flight), so the other workers dropped
//! them as link-local, and a port whose partner's frames landed on their queues was never
//! measured and never saw its neighbour.
//!
//! **How.** One mailbox per other worker, with one writer (that worker) and one reader (the
//! leader): [`SLOTS`] fixed slots, each holding a frame's bytes, its port, its kind and its
//! receive stamp. The stamp is what the measurement uses (T2 of a request, T4 of a
//! response), so the hand-over's delay does not enter it. The writer copies the frame in and
//! publishes it by moving `head`; the reader takes what lies between `tail` and `head` at each
//! loop turn and then moves `tail`. No lock, no allocation, no system call: the leader looks at
//! an idle mailbox with one load per turn, and it sleeps at most the idler's longest sleep
//! (10 ms) before it looks, which delays only its answer to a peer's request (the answer
//! carries its own turnaround, T3 − T2, which the peer subtracts).
//!
//! **Bounded.** A full mailbox, or a frame longer than a slot ([`MAX_FRAME`], which an LLDPDU
//! of at most 1,500 bytes in a tagged frame never is), is refused and the worker counts the
//! frame as `no_buffer`: a flood of link-local frames on another queue costs the leader at
//! most [`SLOTS`] frames a turn.

use std::{
    cell::UnsafeCell,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use crate::wire::FrameKind;

/// Frames a mailbox holds.
pub const SLOTS: usize = 16;

/// Longest frame a slot holds, bytes.
pub const MAX_FRAME: usize = 1536;

/// One frame handed over.
struct Slot {
    port: u8,
    kind: FrameKind,
    len: u16,
    rx_ns: u64,
    data: [u8; MAX_FRAME],
}

/// The slots and the two positions; shared by one [`HandoffSender`] and one
/// [`HandoffReceiver`].
struct Mailbox {
    slots: Box<[UnsafeCell<Slot>]>,
    /// Frames written so far (the writer's; the next slot is `head % SLOTS`).
    head: AtomicUsize,
    /// Frames taken so far (the reader's).
    tail: AtomicUsize,
}

// SAFETY: a slot is written only by the one sender, and only while it lies outside
// `tail..head` (free); it is read only by the one receiver, and only while it lies inside
// (published by the sender's release store of `head`, freed by the receiver's release store
// of `tail` after it has read it). Neither end can be cloned, so there is one of each.
unsafe impl Sync for Mailbox {}

/// The writing end: the worker that received the frame.
pub struct HandoffSender(Arc<Mailbox>);

/// The reading end: the leader.
pub struct HandoffReceiver(Arc<Mailbox>);

/// A worker's end of the hand-over.
pub enum HandoffEnd {
    /// A worker other than the leader: it posts to the leader.
    ToLeader(HandoffSender),
    /// The leader: it takes from every other worker's mailbox.
    FromOthers(Vec<HandoffReceiver>),
}

/// The ends for `workers` workers, worker 0 (the leader) first: `None` for a lone worker.
pub fn handoff_ends(workers: usize) -> Vec<Option<HandoffEnd>> {
    if workers < 2 {
        return (0..workers).map(|_| None).collect();
    }
    let (senders, receivers): (Vec<_>, Vec<_>) = (1..workers).map(|_| handoff()).unzip();
    std::iter::once(Some(HandoffEnd::FromOthers(receivers)))
        .chain(senders.into_iter().map(|s| Some(HandoffEnd::ToLeader(s))))
        .collect()
}

/// A mailbox's two ends.
pub fn handoff() -> (HandoffSender, HandoffReceiver) {
    let slots = (0..SLOTS)
        .map(|_| {
            UnsafeCell::new(Slot {
                port: 0,
                kind: FrameKind::Data,
                len: 0,
                rx_ns: 0,
                data: [0; MAX_FRAME],
            })
        })
        .collect();
    let m = Arc::new(Mailbox {
        slots,
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
    });
    (HandoffSender(m.clone()), HandoffReceiver(m))
}

impl HandoffSender {
    /// Hands over `frame`, of `kind`, received on `port` at `rx_ns`. False if the mailbox is
    /// full or the frame longer than a slot (the frame is then the caller's to count).
    pub fn post(&mut self, port: usize, kind: FrameKind, frame: &[u8], rx_ns: u64) -> bool {
        let m = &self.0;
        let head = m.head.load(Ordering::Relaxed);
        if head - m.tail.load(Ordering::Acquire) == SLOTS || frame.len() > MAX_FRAME {
            return false;
        }
        // SAFETY: the slot is free (outside tail..head) and only this sender writes slots.
        let slot = unsafe { &mut *m.slots[head % SLOTS].get() };
        slot.port = port as u8;
        slot.kind = kind;
        slot.len = frame.len() as u16;
        slot.rx_ns = rx_ns;
        slot.data[..frame.len()].copy_from_slice(frame);
        m.head.store(head + 1, Ordering::Release);
        true
    }
}

impl HandoffReceiver {
    /// True if a frame waits.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.head.load(Ordering::Relaxed) == self.0.tail.load(Ordering::Relaxed)
    }

    /// Calls `f(port, kind, frame, rx_ns)` for every frame waiting, oldest first, and frees
    /// their slots.
    pub fn take(&mut self, mut f: impl FnMut(usize, FrameKind, &[u8], u64)) {
        let m = &self.0;
        let tail = m.tail.load(Ordering::Relaxed);
        let head = m.head.load(Ordering::Acquire);
        for i in tail..head {
            // SAFETY: published by the sender (inside tail..head), not written until freed.
            let slot = unsafe { &*m.slots[i % SLOTS].get() };
            f(
                usize::from(slot.port),
                slot.kind,
                &slot.data[..usize::from(slot.len)],
                slot.rx_ns,
            );
        }
        m.tail.store(head, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(rx: &mut HandoffReceiver) -> Vec<(usize, FrameKind, Vec<u8>, u64)> {
        let mut out = Vec::new();
        rx.take(|p, k, f, t| out.push((p, k, f.to_vec(), t)));
        out
    }

    #[test]
    fn frames_arrive_in_order_and_a_full_mailbox_refuses() {
        let (mut tx, mut rx) = handoff();
        assert!(rx.is_empty());
        assert!(tx.post(1, FrameKind::Ptp, &[1, 2, 3], 10));
        assert!(tx.post(0, FrameKind::Lldp, &[4; 60], 20));
        assert!(!rx.is_empty());
        assert_eq!(
            taken(&mut rx),
            [
                (1, FrameKind::Ptp, vec![1, 2, 3], 10),
                (0, FrameKind::Lldp, vec![4; 60], 20)
            ]
        );
        assert!(rx.is_empty());
        for i in 0..SLOTS {
            assert!(tx.post(0, FrameKind::Ptp, &[i as u8], i as u64));
        }
        assert!(!tx.post(0, FrameKind::Ptp, &[0xff], 99), "full");
        assert!(
            !tx.post(0, FrameKind::Ptp, &[0; MAX_FRAME + 1], 0),
            "too long"
        );
        let all = taken(&mut rx);
        assert_eq!(all.len(), SLOTS);
        assert!(all.iter().enumerate().all(|(i, f)| f.2 == [i as u8]));
        // Freed: room again, past the wrap.
        assert!(tx.post(1, FrameKind::Lldp, &[7; MAX_FRAME], 5));
        assert_eq!(
            taken(&mut rx),
            [(1, FrameKind::Lldp, vec![7; MAX_FRAME], 5)]
        );
    }

    /// One thread writes while another reads: every frame arrives once, intact, in order.
    #[test]
    fn a_writer_and_a_reader_on_two_threads() {
        let (mut tx, mut rx) = handoff();
        const N: u64 = 20_000;
        let writer = std::thread::spawn(move || {
            let mut i = 0u64;
            while i < N {
                let b = i.to_le_bytes();
                if tx.post(
                    (i % 2) as usize,
                    FrameKind::Ptp,
                    &[b.as_slice(), &b].concat(),
                    i,
                ) {
                    i += 1;
                }
            }
        });
        let mut next = 0u64;
        while next < N {
            rx.take(|p, _, f, t| {
                assert_eq!((p as u64, t), (next % 2, next));
                assert_eq!(f[..8], next.to_le_bytes());
                assert_eq!(f[8..], next.to_le_bytes());
                next += 1;
            });
        }
        writer.join().unwrap();
    }
}
