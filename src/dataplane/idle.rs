//! How a worker waits when it has nothing to do: `ppoll()` on its ports' descriptors with a
//! nanosecond timeout up to its next deadline (shaper, pause expiry, PFC refresh), or a spin
//! when the deadline is too close for a sleep to be accurate.

use std::os::fd::RawFd;

/// Deadlines closer than this are waited for by spinning.
const SPIN_NS: u64 = 30_000;
/// Longest single sleep, so stop requests are seen promptly.
const MAX_SLEEP_NS: u64 = 10_000_000;

/// A worker's idle strategy.
pub struct Idler {
    fds: Vec<libc::pollfd>,
    busy_poll: bool,
    coalesce_ns: u64,
}

impl Idler {
    /// Waits on `fds`; with `busy_poll` never sleeps. Also sets this thread's timer slack to
    /// 1 ns so short sleeps end on time.
    pub fn new(fds: impl IntoIterator<Item = Option<RawFd>>, busy_poll: bool) -> Self {
        // SAFETY: PR_SET_TIMERSLACK only affects the calling thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        Idler {
            fds: fds
                .into_iter()
                .flatten()
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect(),
            busy_poll,
            coalesce_ns: 0,
        }
    }

    /// Interrupt moderation: when idle, sleep at least `ns` instead of waking for every frame
    /// (for receivers whose timestamps come from XDP, so latency figures stay exact). Keep it
    /// well below the time the RX fill ring lasts at line rate.
    pub fn coalesce(mut self, ns: u64) -> Self {
        self.coalesce_ns = ns;
        self
    }

    /// Waits until a port is readable or `deadline` (CLOCK_MONOTONIC ns) is near.
    pub fn wait(&mut self, now: u64, deadline: Option<u64>) {
        let until = deadline.unwrap_or(u64::MAX);
        if self.busy_poll || until.saturating_sub(now) < SPIN_NS {
            std::hint::spin_loop();
            return;
        }
        let ns = (until - now).min(MAX_SLEEP_NS) - SPIN_NS / 2;
        if self.coalesce_ns > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(ns.min(self.coalesce_ns)));
            return;
        }
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `fds` is a valid array of pollfd; a null sigmask keeps the current one.
        unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
    }
}
