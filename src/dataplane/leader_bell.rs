//! Waking the leader when PFC traffic reaches another worker.
//!
//! **Why.** One worker, the leader, runs every port's PFC congestion point: it reads each
//! port's occupancy (what every worker queued plus what waits in every RX ring, [`super::shared`])
//! at each of its loop turns and sends the XOFF. A worker with nothing of its own to do sleeps
//! until its next deadline, up to the idler's 10 ms. A flow that RSS (or the veth peer's queue)
//! puts on another worker's queue never wakes the leader: the other worker queues it, the
//! occupancy crosses XOFF, and nobody looks until the leader's sleep ends. At 2 Gbit/s 10 ms is
//! 2.5 MB, ten times the default headroom: one flow on worker 1's queue into a 1 Gbit/s egress
//! lost a quarter of its frames to `headroom_overflow` (`tests/tools.rs`
//! `one_flow_through_two_workers_gets_the_whole_line`), while the leader's notice term
//! measured the 10 ms and squeezed XOFF to its minimum, to no avail.
//!
//! **How.** The leader publishes the XOFF and XON in force and the priorities it holds in
//! XOFF in each port's shared state, and says here when it goes to sleep. Another worker, at
//! the end of each of its turns while the leader sleeps, looks whether a PFC priority of a
//! port stands where the leader would send PFC (at or above XOFF and not in XOFF, or in XOFF
//! and at or below XON: [`super::shared::SharedPort::pfc_crossing`]) and if so rings this
//! eventfd, which the
//! leader's `ppoll` waits on beside its ports: XOFF and XON go out a wake-up after the
//! crossing, whoever's queue it happened on. One ring a sleep: the ring clears the flag. And
//! while frames of a PFC priority arrive at a port (on any worker's queue, from the ports'
//! shared arrival counts) the leader sleeps at most [`LEADER_WATCH_NS`] between turns, so its
//! overshoot and notice meters see the episode at the cadence they are made for. No lock, and
//! a system call only at a crossing, never per frame.
//!
//! **Two races.** The leader says it sleeps and then sleeps; another worker charges or
//! releases bytes and then looks whether the leader sleeps. Each side stores, then loads what
//! the other stored: with a full fence between on both sides (a store may otherwise pass a
//! later load), at least one of them sees the other's store. So the leader, having said it
//! sleeps, looks once more for a crossing and does not sleep if one stands; else a crossing
//! made while it was between its congestion point and its sleep (an XON due, with the source
//! paused and nothing more arriving to make another) waited for the leader's deadline, up to
//! 10 ms. And a ring is two steps, the flag then the write: a leader that wakes (for its own
//! reasons) between them finds the flag taken but nothing yet to read, and the write that
//! lands later would leave the eventfd readable for good, every later sleep ending at once:
//! the leader remembers the ring it could not take back and takes it back at its next wake.

use std::{
    io,
    os::fd::{AsRawFd, RawFd},
    sync::atomic::{fence, AtomicBool, Ordering},
};

use super::eventfd::EventFd;

/// Longest sleep of the leader while frames of a PFC priority arrive somewhere, ns: a crossing
/// of XOFF on another worker's queue waits at most this (and the wake-up's lateness) for the
/// XOFF. 100 us is 25 kB at 2 Gbit/s, a tenth of the default headroom floor.
pub const LEADER_WATCH_NS: u64 = 100_000;

/// The leader's doorbell, shared by every worker of a daemon with more than one.
#[derive(Debug)]
pub struct LeaderBell {
    fd: EventFd,
    /// The leader sleeps: the next crossing another worker sees rings.
    asleep: AtomicBool,
    /// A ring whose write had not landed when the leader woke: still to be taken back.
    /// (The leader's alone; atomic only to be `Sync`.)
    owed: AtomicBool,
}

impl LeaderBell {
    /// A bell, the leader awake.
    pub fn new() -> io::Result<Self> {
        Ok(LeaderBell {
            fd: EventFd::new()?,
            asleep: AtomicBool::new(false),
            owed: AtomicBool::new(false),
        })
    }

    /// The leader is about to sleep; it looks for a crossing once more after this, before it
    /// sleeps (see the module doc).
    pub fn sleeping(&self) {
        self.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// The leader woke; if it was rung meanwhile, the ring is taken back.
    pub fn woke(&self) {
        let rung = !self.asleep.swap(false, Ordering::AcqRel);
        if rung || self.owed.load(Ordering::Relaxed) {
            // Cleared by a ring: the eventfd is readable until read, once the ring's write
            // has landed.
            let taken = self.fd.reset();
            self.owed.store(!taken, Ordering::Relaxed);
        }
    }

    /// Whether the leader sleeps (and no one rang yet). Called by another worker after it
    /// charged or released bytes (see the module doc).
    #[inline]
    pub fn leader_asleep(&self) -> bool {
        fence(Ordering::SeqCst);
        self.asleep.load(Ordering::Relaxed)
    }

    /// Wakes the leader if it sleeps; whether this rang (one ring a sleep).
    pub fn ring(&self) -> bool {
        if !self.asleep.swap(false, Ordering::AcqRel) {
            return false;
        }
        self.fd.ring();
        true
    }
}

impl AsRawFd for LeaderBell {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn rings_once_per_sleep_and_only_while_the_leader_sleeps() {
        let b = LeaderBell::new().unwrap();
        assert!(!b.ring(), "awake: no ring");
        b.sleeping();
        assert!(b.leader_asleep());
        assert!(b.ring());
        assert!(!b.leader_asleep() && !b.ring(), "one ring a sleep");
        assert!(readable(b.as_raw_fd()));
        b.woke();
        assert!(!readable(b.as_raw_fd()), "taken back");
        b.sleeping();
        b.woke();
        assert!(!readable(b.as_raw_fd()));
    }

    /// A ring whose write lands after the leader woke is taken back at the next wake: before,
    /// the eventfd stayed readable and every later sleep of the leader ended at once.
    #[test]
    fn a_ring_that_lands_after_the_wake_is_taken_back_at_the_next() {
        let b = LeaderBell::new().unwrap();
        b.sleeping();
        // The ring's first step, then the leader wakes, then the ring's write.
        assert!(b.asleep.swap(false, Ordering::AcqRel));
        b.woke();
        b.fd.ring();
        assert!(readable(b.as_raw_fd()));
        b.sleeping();
        b.woke();
        assert!(!readable(b.as_raw_fd()), "taken back");
        b.sleeping();
        b.woke();
        assert!(!readable(b.as_raw_fd()));
    }
}
