//! Real-time threads that the kernel never stops: each of our `SCHED_FIFO` threads gives up
//! its real-time policy for a short, aligned slice of every [`WINDOW_NS`], so the kernel's
//! safety nets against runaway real-time work never fire.
//!
//! Why: a Linux CPU keeps a share of its time for normal (`SCHED_OTHER`) tasks. Before 6.12
//! that is real-time throttling (`kernel.sched_rt_runtime_us` of `sched_rt_period_us`, 0.95 s
//! of 1 s by default): a CPU whose real-time tasks used up the runtime runs none of them for
//! the rest of the period. Since 6.12 it is the fair server, a deadline reservation (50 ms per
//! 1 s by default) that, once normal tasks on a CPU have been starved long enough, runs them
//! for its whole runtime at once. Either way a busy real-time worker with a normal task
//! waiting on its CPU is stopped for ~50 ms at a time: at 1 Gbit/s that is 6 MB arriving with
//! nobody to receive it, far beyond any headroom, measured here as 33-134 ms receive lags and
//! thousands of frames lost in a two-daemon chain.
//!
//! The cure is to hand out that share ourselves, in small pieces: for the last
//! [`Duty::fair_ns`] of every window aligned to CLOCK_MONOTONIC, every enrolled thread runs
//! `SCHED_OTHER` (at its own nice value), and at the window's end `SCHED_FIFO` again. Both
//! nets then see what they want: real-time time per CPU stays under the throttling runtime
//! (time spent `SCHED_OTHER` is not real-time time), and normal tasks, our demoted threads
//! among them, run in every window, which uses up the fair server's runtime before it would
//! run them in one block (normal tasks running outside the server are charged to it). The
//! worst a worker meets is sharing its CPU fairly for one slice, a millisecond, not a 50 ms
//! stop; all enrolled threads switch together, so several of ours on one CPU cannot add up.
//!
//! One duty thread per process does the switching (two `sched_setscheduler` calls per thread
//! per window, none in the frame loops); it runs `SCHED_FIFO` one priority above the workers
//! so that it wakes on time on a CPU they keep busy. Threads enroll when they enter
//! `SCHED_FIFO` ([`super::sched::enter_fifo`]) and leave when they exit.

use std::{
    cell::RefCell,
    sync::{Mutex, MutexGuard, OnceLock},
};

/// Length of one duty window: short enough that a slice is a brief share, long enough that
/// the switches cost nothing (200 system calls per second per thread).
pub const WINDOW_NS: u64 = 10_000_000;
/// The fair server's default share in parts per million (50 ms of 1 s; its settings are in
/// debugfs, `/sys/kernel/debug/sched/fair_server`, which a daemon may not read).
const FAIR_SERVER_PPM: u64 = 50_000;
/// The slice is this many times the largest share the kernel keeps for normal tasks, so
/// timer lateness and the nets' own accounting never see a shortfall.
const MARGIN: u64 = 2;

/// The duty schedule: which part of each window enrolled threads run `SCHED_OTHER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duty {
    /// Window length (ns).
    pub window_ns: u64,
    /// The slice at the end of each window that runs `SCHED_OTHER` (ns).
    pub fair_ns: u64,
}

/// What enrolled threads run at a given moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `SCHED_FIFO`.
    Realtime,
    /// `SCHED_OTHER`.
    Fair,
}

impl Duty {
    /// The schedule for a kernel whose real-time throttling is `throttle` ((runtime, period)
    /// in µs; `None` when off): the slice covers the larger of the throttling's and the fair
    /// server's shares, [`MARGIN`] times over.
    pub fn for_kernel(throttle: Option<(u64, u64)>) -> Self {
        let throttled_ppm = throttle
            .filter(|&(_, period)| period > 0)
            .map_or(0, |(runtime, period)| {
                (period - runtime.min(period)) * 1_000_000 / period
            });
        let share_ppm = (throttled_ppm.max(FAIR_SERVER_PPM) * MARGIN).min(500_000);
        Duty {
            window_ns: WINDOW_NS,
            fair_ns: WINDOW_NS * share_ppm / 1_000_000,
        }
    }

    /// The phase at `now` (CLOCK_MONOTONIC ns) and when the next one begins.
    pub fn at(&self, now: u64) -> (Phase, u64) {
        let start = now - now % self.window_ns;
        let fair_from = start + self.window_ns - self.fair_ns;
        if now < fair_from {
            (Phase::Realtime, fair_from)
        } else {
            (Phase::Fair, start + self.window_ns)
        }
    }
}

/// The enrolled threads: (thread id, `SCHED_FIFO` priority).
static ENROLLED: Mutex<Vec<(i32, u8)>> = Mutex::new(Vec::new());
/// Started once, by the first enrollment.
static DUTY_THREAD: OnceLock<()> = OnceLock::new();

/// Leaves the duty cycle when the enrolled thread exits.
struct Enrollment(i32);

impl Drop for Enrollment {
    fn drop(&mut self) {
        enrolled().retain(|&(tid, _)| tid != self.0);
    }
}

thread_local! {
    static ENROLLMENT: RefCell<Option<Enrollment>> = const { RefCell::new(None) };
}

fn enrolled() -> MutexGuard<'static, Vec<(i32, u8)>> {
    ENROLLED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `SCHED_FIFO` priority of thread `tid` if it is under the duty cycle.
pub fn priority_of(tid: i32) -> Option<u8> {
    enrolled()
        .iter()
        .find_map(|&(t, priority)| (t == tid).then_some(priority))
}

/// Puts the calling thread `tid`, just made `SCHED_FIFO` at `priority`, under the duty
/// cycle, and starts the process's duty thread (`SCHED_FIFO` at `own_priority`, schedule
/// `duty`) if this is the first.
pub(super) fn enroll(tid: i32, priority: u8, own_priority: u8, duty: Duty) {
    {
        let mut list = enrolled();
        list.retain(|&(t, _)| t != tid);
        list.push((tid, priority));
    }
    ENROLLMENT.with(|e| *e.borrow_mut() = Some(Enrollment(tid)));
    DUTY_THREAD.get_or_init(|| {
        tracing::info!(
            window_us = duty.window_ns / 1000,
            fair_us = duty.fair_ns / 1000,
            "real-time duty cycle: real-time threads run SCHED_OTHER for the end of each \
             window, so the kernel's real-time throttling and fair server never stop them"
        );
        if let Err(e) = std::thread::Builder::new()
            .name("lossless-duty".into())
            .spawn(move || run(duty, own_priority, priority))
        {
            tracing::warn!(error = %e, "no duty thread: real-time threads may be throttled");
        }
    });
}

/// The duty thread: switches every enrolled thread at each phase boundary, for ever.
fn run(duty: Duty, own: u8, workers: u8) {
    if set_policy(0, libc::SCHED_FIFO, own).is_err() {
        // Without a priority above the workers', theirs: late wake-ups but still a cycle.
        if let Err(e) = set_policy(0, libc::SCHED_FIFO, workers) {
            tracing::warn!(error = %e, "duty thread runs SCHED_OTHER and may wake late");
        }
    }
    loop {
        let (phase, until) = duty.at(super::clock::now_ns());
        let (policy, for_fifo) = match phase {
            Phase::Realtime => (libc::SCHED_FIFO, true),
            Phase::Fair => (libc::SCHED_OTHER, false),
        };
        enrolled().retain(|&(tid, prio)| {
            let prio = if for_fifo { prio } else { 0 };
            match set_policy(tid, policy, prio) {
                Ok(()) => true,
                // Gone: its Enrollment drop removes it too.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => false,
                Err(e) => {
                    tracing::warn!(tid, error = %e, "duty cycle: cannot switch a real-time \
                        thread's policy, so it leaves the cycle (status reads its policy as is)");
                    false
                }
            }
        });
        sleep_until(until);
    }
}

/// Sets thread `tid`'s (0: the calling thread's) policy and real-time priority (0 for
/// `SCHED_OTHER`, which keeps the thread's nice value).
pub(super) fn set_policy(tid: i32, policy: i32, priority: u8) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: param is a valid sched_param; the kernel checks the thread id.
    if unsafe { libc::sched_setscheduler(tid, policy, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sleeps until `at` on CLOCK_MONOTONIC.
fn sleep_until(at: u64) {
    let ts = libc::timespec {
        tv_sec: (at / 1_000_000_000) as libc::time_t,
        tv_nsec: (at % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid absolute timespec; no remainder is asked for with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_covers_the_kernels_share_twice() {
        // Default throttling (0.95 s of 1 s) and the fair server both keep 5 %.
        let d = Duty::for_kernel(Some((950_000, 1_000_000)));
        assert_eq!(d.fair_ns, 1_000_000);
        // A stricter throttle (0.8 s of 1 s) sets the slice.
        assert_eq!(
            Duty::for_kernel(Some((800_000, 1_000_000))).fair_ns,
            4_000_000
        );
        // Throttling off: the fair server's share still counts.
        assert_eq!(Duty::for_kernel(None).fair_ns, 1_000_000);
        // Absurd values are bounded: never more than half a window, no division by zero.
        assert_eq!(Duty::for_kernel(Some((0, 1_000_000))).fair_ns, 5_000_000);
        assert_eq!(Duty::for_kernel(Some((5, 0))).fair_ns, 1_000_000);
    }

    #[test]
    fn phases_follow_aligned_windows() {
        let d = Duty {
            window_ns: 10_000,
            fair_ns: 1_000,
        };
        assert_eq!(d.at(20_000), (Phase::Realtime, 29_000));
        assert_eq!(d.at(28_999), (Phase::Realtime, 29_000));
        assert_eq!(d.at(29_000), (Phase::Fair, 30_000));
        assert_eq!(d.at(29_999), (Phase::Fair, 30_000));
        assert_eq!(d.at(30_000), (Phase::Realtime, 39_000));
    }
}
