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

use std::{
    io,
    os::fd::{AsRawFd, RawFd},
    sync::atomic::{AtomicBool, Ordering},
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
}

impl LeaderBell {
    /// A bell, the leader awake.
    pub fn new() -> io::Result<Self> {
        Ok(LeaderBell {
            fd: EventFd::new()?,
            asleep: AtomicBool::new(false),
        })
    }

    /// The leader is about to sleep.
    pub fn sleeping(&self) {
        self.asleep.store(true, Ordering::Release);
    }

    /// The leader woke; if it was rung meanwhile, the ring is taken back.
    pub fn woke(&self) {
        if !self.asleep.swap(false, Ordering::AcqRel) {
            // Cleared by a ring: the eventfd is readable until read.
            self.fd.reset();
        }
    }

    /// Whether the leader sleeps (and no one rang yet).
    #[inline]
    pub fn leader_asleep(&self) -> bool {
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
}
