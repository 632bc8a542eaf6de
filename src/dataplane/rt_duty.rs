//! Real-time threads that the kernel never stops: a `SCHED_FIFO` thread of ours that keeps its
//! CPU busy gives up its real-time policy for a short, aligned slice of every [`WINDOW_NS`], so
//! the kernel's safety nets against runaway real-time work never fire; one that leaves its CPU
//! that much time of its own accord keeps `SCHED_FIFO` throughout.
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
//! [`Duty::fair_ns`] of a window aligned to CLOCK_MONOTONIC, an enrolled thread runs
//! `SCHED_OTHER` (at its own nice value), and at the window's end `SCHED_FIFO` again. Both
//! nets then see what they want: real-time time per CPU stays under the throttling runtime
//! (time spent `SCHED_OTHER` is not real-time time), and normal tasks, our demoted threads
//! among them, run in every window, which uses up the fair server's runtime before it would
//! run them in one block (normal tasks running outside the server are charged to it).
//!
//! **Only what is owed.** The slice costs a worker its CPU whenever a normal task wants it,
//! and on a busy host that is time in which its RX ring fills (measured: with other work on
//! both CPUs, 9.5 % of the frames waited 0.5 ms or more, all of it the slices; without them
//! 0.2 %). A thread that over the last window ran less than the window minus one slice has
//! already left its CPU a slice's worth of time, which normal tasks used (the fair server is
//! charged for it) or which nobody wanted (an idle CPU starves nobody); a slice on top buys
//! the kernel nothing. So at each slice's start the duty thread reads, per enrolled thread,
//! the time it has run and waited runnable so far (`/proc/self/task/<tid>/schedstat`), and
//! demotes it only for what it still owes: the slice less the time it left its CPU since it
//! was last read, a window ago ([`Duty::owed_ns`]), back to `SCHED_FIFO` as soon as that is
//! paid. Waiting counts as running: a `SCHED_FIFO` thread waits only behind real-time work
//! (another process's, softirq work, or the kernel's fair server stopping it), which uses its
//! CPU as much as it does. Threads pinned to one CPU are judged together (their times add up
//! on it), as are all unpinned ones (they may share a CPU); a thread whose times cannot be read
//! owes the whole slice. Not seen: a real-time thread of another process that shares the CPU
//! without ever making ours wait; that process's own duty thread answers for its threads.
//!
//! **Short windows.** A demoted worker behind normal tasks may not run at all during its
//! slice, and at 2 Gbit/s a 1 ms slice (of 10 ms windows) is 250 kB arriving with nobody to
//! send PFC, the default headroom. Windows are 2 ms, slices 0.2 ms (50 kB at 2 Gbit/s): in
//! the README's quick start with two CPU hogs, 0.3-0.6 % of the frames waited 0.5 ms or more
//! in the RX ring with 10 ms windows, 0-0.1 % with 2 ms ones (bench/RESULTS.md). Wake-ups are
//! what short windows cost (20-80 µs of CPU each on the lab VM), so the duty thread wakes
//! only at a slice's start and, for a demoted thread, at its end, and a group of threads that
//! used at most half its time is judged again only `LIGHT_SKIP` windows later: an idle
//! daemon's duty thread wakes about 60 times a second (200 with 10 ms windows).
//!
//! One duty thread per process does the switching (two `sched_setscheduler` calls per demoted
//! thread per window and two small `/proc` reads per judged thread, none in the frame loops); it runs
//! `SCHED_FIFO` one priority above the workers so that it wakes on time on a CPU they keep
//! busy. Threads enroll when they enter `SCHED_FIFO` ([`super::sched::enter_fifo`]) and leave
//! when they exit or return to `SCHED_OTHER` ([`super::sched::leave_fifo`]: a worker whose
//! last lossless priority a reload made lossy); with nobody enrolled the duty thread looks
//! again only every `LIGHT_SKIP` windows.

use std::{
    cell::RefCell,
    sync::{Mutex, MutexGuard, OnceLock},
};

/// Length of one duty window: short enough that a slice is brief (0.2 ms, 50 kB at
/// 2 Gbit/s), long enough that its wake-ups cost little (see the module doc).
pub const WINDOW_NS: u64 = 2_000_000;
/// A group of threads that used at most half its time is judged again only after this many
/// windows: a thread that turns busy meanwhile holds its CPU for at most that long (16 ms)
/// before its first slice, far inside what either of the kernel's nets allows.
pub(super) const LIGHT_SKIP: u64 = 8;
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
    /// server's shares, `MARGIN` times over.
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

/// What a thread did over a stretch of time, as the kernel counts it (`schedstat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuUse {
    /// Time it ran (ns).
    pub run_ns: u64,
    /// Time it waited on a run queue while runnable (ns).
    pub wait_ns: u64,
}

impl CpuUse {
    /// Thread `tid`'s totals since it started (`None`: not readable, e.g. a kernel without
    /// `CONFIG_SCHED_INFO`, or the thread is gone).
    fn of(tid: i32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
        let stat = Self::parse(&text)?;
        // schedstat's run time of a thread running on another CPU lags by up to a scheduler
        // tick (4 ms at HZ=250: more than the slice); the thread's CPU clock is brought up to
        // date when read.
        Some(CpuUse {
            run_ns: thread_cpu_ns(tid).unwrap_or(stat.run_ns),
            ..stat
        })
    }

    /// Parses `schedstat`: "run_ns wait_ns timeslices".
    fn parse(text: &str) -> Option<Self> {
        let mut f = text.split_ascii_whitespace().map(str::parse::<u64>);
        Some(CpuUse {
            run_ns: f.next()?.ok()?,
            wait_ns: f.next()?.ok()?,
        })
    }

    /// What was added between `earlier` and `self`.
    fn since(self, earlier: Self) -> Self {
        CpuUse {
            run_ns: self.run_ns.saturating_sub(earlier.run_ns),
            wait_ns: self.wait_ns.saturating_sub(earlier.wait_ns),
        }
    }

    fn add(self, other: Self) -> Self {
        CpuUse {
            run_ns: self.run_ns + other.run_ns,
            wait_ns: self.wait_ns + other.wait_ns,
        }
    }
}

impl Duty {
    /// How much of this window's slice threads sharing a CPU owe the kernel, when over
    /// `elapsed_ns` of the window they ran and waited `used` (summed): what they did not
    /// leave their CPU of a slice's worth.
    pub fn owed_ns(&self, used: CpuUse, elapsed_ns: u64) -> u64 {
        (used.run_ns + used.wait_ns + self.fair_ns)
            .saturating_sub(elapsed_ns)
            .min(self.fair_ns)
    }

    /// One turn of the duty cycle over the threads of `list` at `now`: threads whose slice
    /// is over return to `SCHED_FIFO`; in a slice, the threads due for judging (with the
    /// rest of their group, see [`Duty::group_owed`]) are judged on their use since they were
    /// last noted (`use_of`), those that owe part of the slice run `SCHED_OTHER` for that
    /// part, and their totals are noted for the next judgment; a thread seen for the first
    /// time is only noted. `switch(thread, phase)` makes a change, false when the thread must
    /// leave the cycle. Returns when the next turn is due.
    fn turn(
        &self,
        list: &mut Vec<Enrolled>,
        now: u64,
        use_of: impl Fn(i32) -> Option<CpuUse>,
        mut switch: impl FnMut(&Enrolled, Phase) -> bool,
    ) -> u64 {
        list.retain_mut(|t| match t.demoted_until {
            Some(until) if until <= now => {
                t.demoted_until = None;
                switch(t, Phase::Realtime)
            }
            _ => true,
        });
        let fair_from = self.slice_at_or_before(now);
        let groups: Vec<Option<usize>> = if now < fair_from + self.fair_ns {
            list.iter()
                .filter(|t| t.judge_from <= now && t.noted.is_some_and(|(at, _)| at < fair_from))
                .map(|t| t.cpu)
                .collect()
        } else {
            Vec::new()
        };
        let judged = |t: &Enrolled| t.noted.is_some() && groups.contains(&t.cpu);
        for t in list.iter_mut().filter(|t| judged(t)) {
            let total = use_of(t.tid);
            t.window = t
                .noted
                .and_then(|(at, then)| Some((total?.since(then?), now.saturating_sub(at))));
            t.noted = Some((now, total));
        }
        let owed: Vec<Option<(u64, bool)>> = list
            .iter()
            .map(|t| judged(t).then(|| self.group_owed(list, t.cpu)))
            .collect();
        let mut owed = owed.into_iter();
        list.retain_mut(|t| {
            let Some((owed, light)) = owed.next().flatten() else {
                return true;
            };
            t.judge_from = now
                + if light {
                    LIGHT_SKIP * self.window_ns
                } else {
                    0
                };
            if owed == 0 || t.demoted_until.is_some() {
                return true;
            }
            t.demoted_until = Some(fair_from + owed);
            switch(t, Phase::Fair)
        });
        for t in list.iter_mut().filter(|t| t.noted.is_none()) {
            t.noted = Some((now, use_of(t.tid)));
        }
        list.iter()
            .map(|t| {
                t.demoted_until
                    .unwrap_or_else(|| self.slice_at_or_after(t.judge_from.max(now + 1)))
            })
            .min()
            // Nobody enrolled (every worker left when the last lossless priority went): look
            // again as seldom as at a light group, for a thread that enrols meanwhile.
            .unwrap_or_else(|| self.slice_at_or_after(now + LIGHT_SKIP * self.window_ns))
    }

    /// The start of the latest slice that began at or before `t`.
    fn slice_at_or_before(&self, t: u64) -> u64 {
        match self.at(t) {
            (Phase::Fair, window_end) => window_end - self.fair_ns,
            (Phase::Realtime, slice) => slice.saturating_sub(self.window_ns),
        }
    }

    /// The start of the first slice that begins at or after `t`.
    fn slice_at_or_after(&self, t: u64) -> u64 {
        match self.at(t) {
            (Phase::Realtime, slice) => slice,
            (Phase::Fair, window_end) if window_end - self.fair_ns == t => t,
            (Phase::Fair, window_end) => window_end + self.window_ns - self.fair_ns,
        }
    }

    /// What the threads of `list` on `cpu` (a pinned CPU, or `None`: the unpinned ones) owe
    /// of this slice, judged on their summed use since they were last judged (any not known:
    /// all of it), and whether they are light: used at most half the time, so that they may
    /// go `LIGHT_SKIP` windows unjudged.
    fn group_owed(&self, list: &[Enrolled], cpu: Option<usize>) -> (u64, bool) {
        let sum = list
            .iter()
            .filter(|t| t.cpu == cpu && t.noted.is_some())
            .try_fold((CpuUse::default(), 0u64), |(sum, elapsed), t| {
                t.window.map(|(u, e)| (sum.add(u), elapsed.max(e)))
            });
        sum.map_or((self.fair_ns, false), |(used, elapsed)| {
            (
                self.owed_ns(used, elapsed),
                2 * (used.run_ns + used.wait_ns) <= elapsed,
            )
        })
    }
}

/// The CPU time thread `tid` of this process has used (ns), current to the moment of reading
/// (its per-thread CPU clock: `MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)` of the kernel's
/// `posix-timers.h`, readable for threads of the caller's own process).
fn thread_cpu_ns(tid: i32) -> Option<u64> {
    const CPUCLOCK_SCHED: libc::clockid_t = 2;
    const CPUCLOCK_PERTHREAD: libc::clockid_t = 4;
    let clock = (!tid << 3) | CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write; the kernel validates the clock id.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// One thread under the duty cycle.
#[derive(Debug, Clone, Copy)]
struct Enrolled {
    tid: i32,
    /// Its `SCHED_FIFO` priority.
    priority: u8,
    /// The one CPU it may run on, if pinned.
    cpu: Option<usize>,
    /// It runs `SCHED_OTHER` until then (ns).
    demoted_until: Option<u64>,
    /// When it was last judged (or first seen), and its totals then (`None`: unreadable).
    noted: Option<(u64, Option<CpuUse>)>,
    /// It is not judged again before this time (ns): a light thread skips windows.
    judge_from: u64,
    /// At its last judgment: its use since it was noted before, and the time elapsed (ns).
    window: Option<(CpuUse, u64)>,
}

/// The enrolled threads.
static ENROLLED: Mutex<Vec<Enrolled>> = Mutex::new(Vec::new());
/// Started once, by the first enrollment.
static DUTY_THREAD: OnceLock<()> = OnceLock::new();

/// Leaves the duty cycle when the enrolled thread exits.
struct Enrollment(i32);

impl Drop for Enrollment {
    fn drop(&mut self) {
        enrolled().retain(|t| t.tid != self.0);
    }
}

thread_local! {
    static ENROLLMENT: RefCell<Option<Enrollment>> = const { RefCell::new(None) };
}

fn enrolled() -> MutexGuard<'static, Vec<Enrolled>> {
    ENROLLED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `SCHED_FIFO` priority of thread `tid` if it is under the duty cycle.
pub fn priority_of(tid: i32) -> Option<u8> {
    enrolled()
        .iter()
        .find_map(|t| (t.tid == tid).then_some(t.priority))
}

/// Puts the calling thread `tid`, just made `SCHED_FIFO` at `priority` and pinned to `cpu`
/// (if it is), under the duty cycle, and starts the process's duty thread (`SCHED_FIFO` at
/// `own_priority`, schedule `duty`) if this is the first.
pub(super) fn enroll(tid: i32, priority: u8, cpu: Option<usize>, own_priority: u8, duty: Duty) {
    {
        let mut list = enrolled();
        list.retain(|t| t.tid != tid);
        list.push(Enrolled {
            tid,
            priority,
            cpu,
            demoted_until: None,
            noted: None,
            judge_from: 0,
            window: None,
        });
    }
    ENROLLMENT.with(|e| *e.borrow_mut() = Some(Enrollment(tid)));
    DUTY_THREAD.get_or_init(|| {
        tracing::info!(
            window_us = duty.window_ns / 1000,
            fair_us = duty.fair_ns / 1000,
            "real-time duty cycle: a real-time thread that keeps its CPU busy runs \
             SCHED_OTHER for the end of each window, so the kernel's real-time throttling and \
             fair server never stop it"
        );
        if let Err(e) = std::thread::Builder::new()
            .name("lossless-duty".into())
            .spawn(move || run(duty, own_priority, priority))
        {
            tracing::warn!(error = %e, "no duty thread: real-time threads may be throttled");
        }
    });
}

/// Takes the calling thread out of the duty cycle (a worker that leaves `SCHED_FIFO`): under
/// the list's lock, so the duty thread switches it no more once this returns.
pub(super) fn leave() {
    ENROLLMENT.with(|e| e.borrow_mut().take());
}

/// The duty thread: at each window's start returns the demoted threads to `SCHED_FIFO` and
/// notes every thread's totals; at each slice's start demotes the threads that owe it.
fn run(duty: Duty, own: u8, workers: u8) {
    if set_policy(0, libc::SCHED_FIFO, own).is_err() {
        // Without a priority above the workers', theirs: late wake-ups but still a cycle.
        if let Err(e) = set_policy(0, libc::SCHED_FIFO, workers) {
            tracing::warn!(error = %e, "duty thread runs SCHED_OTHER and may wake late");
        }
    }
    loop {
        let next = duty.turn(
            &mut enrolled(),
            super::clock::now_ns(),
            CpuUse::of,
            |t, phase| match phase {
                Phase::Realtime => switch(t, libc::SCHED_FIFO, t.priority),
                Phase::Fair => switch(t, libc::SCHED_OTHER, 0),
            },
        );
        super::clock::sleep_until(next);
    }
}

/// Switches enrolled thread `t` to `policy` at `priority`; false when it must leave the cycle
/// (gone, or the switch is refused: `status` then reads its policy as it is).
fn switch(t: &Enrolled, policy: i32, priority: u8) -> bool {
    match set_policy(t.tid, policy, priority) {
        Ok(()) => true,
        // Gone: its Enrollment drop removes it too.
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => false,
        Err(e) => {
            tracing::warn!(tid = t.tid, error = %e, "duty cycle: cannot switch a real-time \
                thread's policy, so it leaves the cycle (status reads its policy as is)");
            false
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slice_covers_the_kernels_share_twice() {
        let tenth = WINDOW_NS / 10;
        // Default throttling (0.95 s of 1 s) and the fair server both keep 5 %.
        let d = Duty::for_kernel(Some((950_000, 1_000_000)));
        assert_eq!(d.fair_ns, tenth);
        // A stricter throttle (0.8 s of 1 s) sets the slice.
        assert_eq!(
            Duty::for_kernel(Some((800_000, 1_000_000))).fair_ns,
            4 * tenth
        );
        // Throttling off: the fair server's share still counts.
        assert_eq!(Duty::for_kernel(None).fair_ns, tenth);
        // Absurd values are bounded: never more than half a window, no division by zero.
        assert_eq!(Duty::for_kernel(Some((0, 1_000_000))).fair_ns, 5 * tenth);
        assert_eq!(Duty::for_kernel(Some((5, 0))).fair_ns, tenth);
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

    /// A duty of 10 ms windows with a 1 ms slice, and thread `tid` pinned to `cpu`.
    fn duty() -> Duty {
        Duty {
            window_ns: 10_000_000,
            fair_ns: 1_000_000,
        }
    }

    fn thread(tid: i32, cpu: Option<usize>) -> Enrolled {
        Enrolled {
            tid,
            priority: 50,
            cpu,
            demoted_until: None,
            noted: None,
            judge_from: 0,
            window: None,
        }
    }

    /// Runs the cycle over `list` from 0 to `until` ns, each thread's totals growing by its
    /// busy fraction (ppm) of the elapsed time (`None`: unreadable); returns the switches
    /// made as (time, tid, phase).
    fn simulate(
        list: &mut Vec<Enrolled>,
        busy_ppm: &[(i32, Option<u64>)],
        until: u64,
    ) -> Vec<(u64, i32, Phase)> {
        simulate_turns(
            list,
            |tid, _| busy_ppm.iter().find(|(t, _)| *t == tid)?.1,
            until,
        )
        .0
    }

    /// [`simulate`] with each thread's busy fraction a function of (tid, now); also returns
    /// how many turns the cycle took.
    fn simulate_turns(
        list: &mut Vec<Enrolled>,
        busy_ppm: impl Fn(i32, u64) -> Option<u64>,
        until: u64,
    ) -> (Vec<(u64, i32, Phase)>, u64) {
        let d = duty();
        let mut switches = Vec::new();
        let mut turns = 0;
        let mut now = 0;
        while now < until {
            turns += 1;
            // Totals as if the thread had always been as busy as it is now.
            let use_of = |tid: i32| {
                let ppm = busy_ppm(tid, now)?;
                Some(CpuUse {
                    run_ns: now * ppm / 1_000_000,
                    wait_ns: 0,
                })
            };
            now = d.turn(list, now, use_of, |t, phase| {
                switches.push((now, t.tid, phase));
                true
            });
        }
        (switches, turns)
    }

    #[test]
    fn a_thread_that_leaves_its_cpu_a_slice_keeps_sched_fifo() {
        // 80 % busy leaves 1.8 ms of each 9 ms real-time part: nothing is owed.
        let mut list = vec![thread(1, None)];
        assert_eq!(simulate(&mut list, &[(1, Some(800_000))], 100_000_000), []);
    }

    #[test]
    fn light_threads_are_judged_every_eighth_window_and_busy_ones_every_window() {
        // 30 % busy: one turn (a judgment) per eight windows after the first.
        let mut list = vec![thread(1, None)];
        let (s, turns) = simulate_turns(&mut list, |_, _| Some(300_000), 100 * 10_000_000);
        assert_eq!(s, []);
        assert!(turns <= 2 + 100 / LIGHT_SKIP, "{turns} turns");
        // Busy: a slice and a return per window.
        let mut list = vec![thread(1, None)];
        let (_, turns) = simulate_turns(&mut list, |_, _| Some(1_000_000), 100 * 10_000_000);
        assert!((199..=201).contains(&turns), "{turns} turns");
    }

    #[test]
    fn with_nobody_enrolled_the_cycle_looks_again_as_seldom_as_at_a_light_group() {
        // Every worker left SCHED_FIFO (the last lossless priority went): a turn per
        // LIGHT_SKIP windows, not one per window, and no switches.
        let (s, turns) = simulate_turns(&mut Vec::new(), |_, _| None, 100 * 10_000_000);
        assert_eq!(s, []);
        assert!(turns <= 1 + 100 / LIGHT_SKIP, "{turns} turns");
    }

    #[test]
    fn a_light_thread_that_turns_busy_pays_within_the_skipped_windows() {
        // Idle for 50 ms, then busy: its first slice comes within LIGHT_SKIP windows (plus the
        // one that judges it busy), and from then on every window.
        let mut list = vec![thread(1, None)];
        let busy_from = 50_000_000;
        let ppm = |_, now| Some(if now < busy_from { 0 } else { 1_000_000 });
        let (s, _) = simulate_turns(&mut list, ppm, 200_000_000);
        let first = s.first().expect("demoted at last").0;
        assert!(
            first <= busy_from + (LIGHT_SKIP + 1) * 10_000_000,
            "first slice at {first}"
        );
        let slices = s.iter().filter(|(_, _, p)| *p == Phase::Fair).count();
        assert!(slices >= 5, "{s:?}");
    }

    #[test]
    fn a_busy_thread_pays_the_whole_slice_each_window() {
        let mut list = vec![thread(1, None)];
        let s = simulate(&mut list, &[(1, Some(1_000_000))], 30_000_000);
        assert_eq!(
            s,
            [
                (9_000_000, 1, Phase::Fair),
                (10_000_000, 1, Phase::Realtime),
                (19_000_000, 1, Phase::Fair),
                (20_000_000, 1, Phase::Realtime),
                (29_000_000, 1, Phase::Fair),
            ]
        );
    }

    #[test]
    fn a_thread_pays_only_what_it_did_not_leave() {
        // 95 % busy: 8.55 ms of 9 ms, 0.45 ms left, 0.55 ms owed.
        let mut list = vec![thread(1, None)];
        let s = simulate(&mut list, &[(1, Some(950_000))], 20_000_000);
        assert_eq!(
            s[..2],
            [(9_000_000, 1, Phase::Fair), (9_550_000, 1, Phase::Realtime)]
        );
    }

    #[test]
    fn threads_on_one_cpu_are_judged_together() {
        // Two threads at 50 % each: together on CPU 0 they leave it nothing; on CPUs 0 and 1
        // each leaves half.
        let busy = [(1, Some(500_000)), (2, Some(500_000))];
        let mut shared = vec![thread(1, Some(0)), thread(2, Some(0))];
        let s = simulate(&mut shared, &busy, 10_000_000);
        assert_eq!(
            s,
            [(9_000_000, 1, Phase::Fair), (9_000_000, 2, Phase::Fair)]
        );
        let mut apart = vec![thread(1, Some(0)), thread(2, Some(1))];
        assert_eq!(simulate(&mut apart, &busy, 10_000_000), []);
    }

    #[test]
    fn unreadable_times_owe_the_whole_slice() {
        let mut list = vec![thread(1, None)];
        let s = simulate(&mut list, &[(1, None)], 10_000_000);
        assert_eq!(s, [(9_000_000, 1, Phase::Fair)]);
        assert_eq!(list[0].demoted_until, Some(10_000_000));
    }

    #[test]
    fn a_thread_whose_switch_fails_leaves_the_cycle() {
        let d = duty();
        let mut list = vec![thread(1, None)];
        let use_of = |_| None;
        d.turn(&mut list, 0, use_of, |_, _| true);
        d.turn(&mut list, 9_000_000, use_of, |_, _| false);
        assert!(list.is_empty());
    }

    #[test]
    fn schedstat_parses_run_and_wait() {
        assert_eq!(
            CpuUse::parse("176912851 20257492 391\n"),
            Some(CpuUse {
                run_ns: 176_912_851,
                wait_ns: 20_257_492
            })
        );
        assert_eq!(CpuUse::parse("12"), None);
        assert_eq!(CpuUse::parse("x 1 2"), None);
        // This thread's own line is readable here (the kernel has CONFIG_SCHED_INFO), and its
        // CPU clock, read through the thread id, agrees with the one the thread reads itself.
        let tid = crate::dataplane::sched::this_thread_id();
        assert!(CpuUse::of(tid).is_some());
        let own = |c| {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid timespec to write.
            assert_eq!(unsafe { libc::clock_gettime(c, &mut ts) }, 0);
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        let before = own(libc::CLOCK_THREAD_CPUTIME_ID);
        let by_tid = thread_cpu_ns(tid).unwrap();
        let after = own(libc::CLOCK_THREAD_CPUTIME_ID);
        assert!(
            before <= by_tid && by_tid <= after,
            "{before} {by_tid} {after}"
        );
    }
}
