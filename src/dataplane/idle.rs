//! How a worker waits when it has nothing to do: `ppoll()` on its ports' descriptors with a
//! nanosecond timeout up to its next deadline (shaper, pause expiry, PFC refresh), or a spin
//! when the deadline is too close for a sleep to be accurate.

use std::os::fd::RawFd;

/// Deadlines closer than this are waited for by spinning.
const SPIN_NS: u64 = 30_000;
/// Longest single sleep, so stop requests are seen promptly.
const MAX_SLEEP_NS: u64 = 10_000_000;
/// Most wake-up lateness the idler compensates for.
const MAX_LATE_NS: u64 = 1_000_000;

/// A worker's idle strategy.
pub struct Idler {
    fds: Vec<libc::pollfd>,
    busy_poll: bool,
    coalesce_ns: u64,
    /// How late timed wake-ups come on this host (moving average), so sleeps end that much
    /// earlier and the spin covers the rest.
    late_ns: u64,
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
            late_ns: 0,
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
        let early = SPIN_NS / 2 + self.late_ns;
        let Some(ns) = (until - now).min(MAX_SLEEP_NS).checked_sub(early) else {
            std::hint::spin_loop();
            return;
        };
        if self.coalesce_ns > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(ns.min(self.coalesce_ns)));
            return;
        }
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `fds` is a valid array of pollfd; a null sigmask keeps the current one.
        let ready = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if ready == 0 {
            // Timed out: learn how late the wake-up came.
            let late = super::clock::now_ns().saturating_sub(now + ns);
            self.late_ns = ewma(self.late_ns, late.min(MAX_LATE_NS));
        }
    }
}

/// Moving average with weight 1/8 for the new sample.
fn ewma(avg: u64, sample: u64) -> u64 {
    (avg * 7 + sample) / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_average_follows_the_host() {
        let mut avg = 0;
        for _ in 0..64 {
            avg = ewma(avg, 20_000);
        }
        assert!((19_000..=20_000).contains(&avg), "{avg}");
        for _ in 0..64 {
            avg = ewma(avg, 0);
        }
        assert!(avg < 1_000, "{avg}");
    }
}
