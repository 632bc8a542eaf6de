//! How a worker waits when it has nothing to do: `ppoll()` on its ports' descriptors with a
//! nanosecond timeout up to its next deadline (shaper, pause expiry, PFC refresh), or a spin
//! when the deadline is too close for a sleep to be accurate.
//!
//! Timed wake-ups come late on a VM (35-85 µs on average on the lab's, with outliers of
//! milliseconds), so the idler learns how late and ends each sleep that much early, spinning
//! the rest. Two rules keep that estimate honest. A sample counts for at most twice the
//! average plus `SPIN_NS` (30 µs): one outlier of a millisecond once raised the average to
//! 248 µs. And where the average forbids a sleep, one is still taken without the allowance
//! once per `PROBE_NS` (50 ms): an average that forbids sleeping is otherwise never sampled
//! again, and a generator paced at 20 Mbit/s spun a whole CPU for its whole run on that one
//! outlier.

use std::os::fd::RawFd;

/// Deadlines closer than this are waited for by spinning.
const SPIN_NS: u64 = 30_000;
/// Longest single sleep, so stop requests are seen promptly.
const MAX_SLEEP_NS: u64 = 10_000_000;
/// Most wake-up lateness the idler compensates for.
const MAX_LATE_NS: u64 = 1_000_000;
/// Where the lateness allowance forbids a sleep, how often one is taken anyway to sample it.
const PROBE_NS: u64 = 50_000_000;

/// A worker's idle strategy.
pub struct Idler {
    /// One per port, in port order; a negative descriptor is not waited on (poll(2) skips it).
    fds: Vec<libc::pollfd>,
    /// Each port's descriptor (-1: none), for [`Idler::hold`] to put back.
    port_fds: Vec<RawFd>,
    busy_poll: bool,
    coalesce_ns: u64,
    late: Lateness,
}

/// How late timed wake-ups come on this host, so sleeps end that much earlier and the spin
/// covers the rest.
#[derive(Debug, Clone, Copy, Default)]
struct Lateness {
    /// Moving average of the samples, each capped (see the module doc).
    avg_ns: u64,
    /// When the last sample was taken (CLOCK_MONOTONIC ns).
    sampled_at: u64,
}

impl Lateness {
    /// How long to sleep of `span` ns (at least [`SPIN_NS`]) before spinning to its end, or
    /// `None` to spin all of it.
    fn sleep_ns(&self, span: u64, now: u64) -> Option<u64> {
        span.checked_sub(SPIN_NS / 2 + self.avg_ns).or_else(|| {
            (now.saturating_sub(self.sampled_at) >= PROBE_NS).then(|| span - SPIN_NS / 2)
        })
    }

    /// Takes a sleep that ended `late_ns` after it should have, at `now`.
    fn sample(&mut self, late_ns: u64, now: u64) {
        let cap = (2 * self.avg_ns + SPIN_NS).min(MAX_LATE_NS);
        self.avg_ns = ewma(self.avg_ns, late_ns.min(cap));
        self.sampled_at = now;
    }
}

impl Idler {
    /// Waits on the ports' descriptors `fds` (in port order, `None` for a port without
    /// one); with `busy_poll` never sleeps. Also sets this thread's timer slack to 1 ns so
    /// short sleeps end on time.
    pub fn new(fds: impl IntoIterator<Item = Option<RawFd>>, busy_poll: bool) -> Self {
        // SAFETY: PR_SET_TIMERSLACK only affects the calling thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64, 0u64, 0u64, 0u64) };
        let port_fds: Vec<RawFd> = fds.into_iter().map(|fd| fd.unwrap_or(-1)).collect();
        Idler {
            fds: port_fds
                .iter()
                .map(|&fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect(),
            port_fds,
            busy_poll,
            coalesce_ns: 0,
            late: Lateness::default(),
        }
    }

    /// Interrupt moderation: when idle, sleep at least `ns` instead of waking for every frame
    /// (for receivers whose timestamps come from XDP, so latency figures stay exact). Keep it
    /// well below the time the RX fill ring lasts at line rate.
    pub fn coalesce(mut self, ns: u64) -> Self {
        self.coalesce_ns = ns;
        self
    }

    /// Stops (`held`) or resumes waiting on port `i`'s descriptor. Polling a copy-mode AF_XDP
    /// socket also transmits what its TX ring holds (the kernel's `xsk_poll` drives TX), so a
    /// port whose egress is held must not be polled: the frames would go into a dead link, one
    /// lost at each wait. Its RX is not missed: a port without carrier receives nothing, and
    /// a hold for a refused frame lasts until the carrier is read.
    pub fn hold(&mut self, i: usize, held: bool) {
        if let (Some(p), Some(&fd)) = (self.fds.get_mut(i), self.port_fds.get(i)) {
            p.fd = if held { -1 } else { fd };
        }
    }

    /// Waits until a port is readable or `deadline` (CLOCK_MONOTONIC ns) is near.
    pub fn wait(&mut self, now: u64, deadline: Option<u64>) {
        let until = deadline.unwrap_or(u64::MAX);
        if self.busy_poll || until.saturating_sub(now) < SPIN_NS {
            std::hint::spin_loop();
            return;
        }
        let Some(ns) = self.late.sleep_ns((until - now).min(MAX_SLEEP_NS), now) else {
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
            let woke = super::clock::now_ns();
            self.late.sample(woke.saturating_sub(now + ns), woke);
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
    fn a_held_port_is_left_out_of_the_wait_and_put_back() {
        let mut idler = Idler::new([Some(7), None, Some(9)], false);
        let fds = |i: &Idler| i.fds.iter().map(|p| p.fd).collect::<Vec<_>>();
        assert_eq!(fds(&idler), [7, -1, 9], "one entry per port, in port order");
        idler.hold(2, true);
        assert_eq!(fds(&idler), [7, -1, -1]);
        idler.hold(1, false);
        idler.hold(5, true);
        assert_eq!(
            fds(&idler),
            [7, -1, -1],
            "no descriptor, no port: nothing to do"
        );
        idler.hold(2, false);
        assert_eq!(fds(&idler), [7, -1, 9]);
    }

    #[test]
    fn one_outlier_moves_the_lateness_little() {
        let mut l = Lateness::default();
        for t in 1..=64 {
            l.sample(60_000, t);
        }
        assert!((59_000..=60_000).contains(&l.avg_ns), "{l:?}");
        l.sample(MAX_LATE_NS, 65);
        // Counted as 2 x 60 + 30 us, not 1 ms.
        assert!(l.avg_ns <= 60_000 + 90_000 / 8, "{l:?}");
    }

    #[test]
    fn an_allowance_that_forbids_sleeping_is_sampled_again() {
        let l = Lateness {
            avg_ns: 250_000,
            sampled_at: 1_000_000,
        };
        // A 200 us span, all of it within the allowance: spin...
        assert_eq!(l.sleep_ns(200_000, 1_000_000 + PROBE_NS - 1), None);
        // ...until the last sample is PROBE_NS old: then sleep all but the spin's half.
        assert_eq!(
            l.sleep_ns(200_000, 1_000_000 + PROBE_NS),
            Some(200_000 - SPIN_NS / 2)
        );
        // A span longer than the allowance sleeps up to it, probe or not.
        assert_eq!(
            l.sleep_ns(400_000, 1_000_001),
            Some(400_000 - SPIN_NS / 2 - 250_000)
        );
    }

    #[test]
    fn lateness_average_follows_the_host() {
        let mut l = Lateness::default();
        for t in 0..64 {
            l.sample(20_000, t);
        }
        assert!((19_000..=20_000).contains(&l.avg_ns), "{l:?}");
        // A host that got slower is followed too, if more slowly (each sample capped).
        for t in 64..128 {
            l.sample(200_000, t);
        }
        assert!((190_000..=200_000).contains(&l.avg_ns), "{l:?}");
        for t in 128..192 {
            l.sample(0, t);
        }
        assert!(l.avg_ns < 1_000, "{l:?}");
    }
}
