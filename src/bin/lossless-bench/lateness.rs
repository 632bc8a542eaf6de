//! `lossless-bench lateness`: how late a real-time thread on each CPU wakes up, and whether the
//! CPUs are late at the same time.
//!
//! Why: frames have been lost on the lab VM in windows of minutes with nothing else running,
//! the daemon's real-time worker held off its CPU for milliseconds again and again, and the
//! VM reports no steal time (bench/RESULTS.md (28)). Two causes fit: kernel work in the guest
//! that the kernel does not preempt (`PREEMPT_NONE`), which holds one CPU, and the host
//! stopping the VM's vCPUs, which may hold both at once. A `SCHED_FIFO` thread pinned to each
//! CPU, above every thread of ours, that sleeps to an absolute deadline and notes how late it
//! woke tells the two apart: a late wake-up on one CPU while the other woke on time is that
//! CPU's (kernel work, or the host stopping that vCPU alone); both late over the same span is
//! the VM's. Run beside what loses frames (`bench/lateness -- COMMAND`) to see whether its
//! losses line up with such spans.
//!
//! The threads are not enrolled in the daemon's duty cycle ([`lossless::dataplane::rt_duty`]):
//! each sleeps far more than it runs, so the kernel's throttling never sees them.

use std::sync::atomic::{AtomicBool, Ordering};

use lossless::dataplane::{
    clock::{now_ns, sleep_until},
    sched,
};
use serde::Serialize;

/// Late wake-ups kept per CPU (the count goes on past it).
const MAX_EPISODES: usize = 1000;

/// One late wake-up: from the deadline to the wake-up, ms since the start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Episode {
    /// The deadline, ms since the start.
    pub from_ms: f64,
    /// The wake-up, ms since the start.
    pub to_ms: f64,
}

/// What one CPU's thread saw.
#[derive(Debug, Serialize)]
pub struct CpuReport {
    /// The CPU.
    pub cpu: usize,
    /// Whether the thread ran `SCHED_FIFO` (else it was refused, and it measured `SCHED_OTHER`).
    pub fifo: bool,
    /// Wake-ups.
    pub wakeups: u64,
    /// Wake-ups at least the report threshold late.
    pub late: u64,
    /// The latest wake-up, us.
    pub max_late_us: f64,
    /// Wake-ups per power-of-two lateness bucket: bucket i holds [2^(i-1), 2^i) ns.
    pub buckets: Vec<u64>,
    /// The first [`MAX_EPISODES`] late wake-ups.
    pub episodes: Vec<Episode>,
}

/// A span over which several CPUs were late at once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Together {
    /// The CPUs.
    pub cpus: [usize; 2],
    /// The span all of them were late over, ms since the start.
    pub from_ms: f64,
    /// Its end.
    pub to_ms: f64,
}

/// What `lateness` prints.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Each thread's deadline interval, us.
    pub period_us: f64,
    /// Their `SCHED_FIFO` priority.
    pub priority: u8,
    /// Wake-ups this late or later are listed, us.
    pub report_us: f64,
    /// How long the threads watched, ms.
    pub duration_ms: f64,
    /// Per CPU.
    pub cpus: Vec<CpuReport>,
    /// Spans over which two CPUs were late at once (both wake-ups at least `report_us` late).
    pub together: Vec<Together>,
}

/// Watches `cpus` with one thread each until `stop` is set: sleeps to deadlines `period_ns`
/// apart at `SCHED_FIFO` `priority`, and lists the wake-ups `report_ns` late or later.
pub fn run(
    cpus: &[usize],
    period_ns: u64,
    priority: u8,
    report_ns: u64,
    stop: &AtomicBool,
) -> Report {
    let start = now_ns();
    let reports: Vec<CpuReport> = std::thread::scope(|s| {
        let threads: Vec<_> = cpus
            .iter()
            .map(|&cpu| s.spawn(move || watch(cpu, period_ns, priority, report_ns, start, stop)))
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("lateness thread"))
            .collect()
    });
    let ms = |ns: u64| ns as f64 / 1e6;
    Report {
        period_us: period_ns as f64 / 1e3,
        priority,
        report_us: report_ns as f64 / 1e3,
        duration_ms: ms(now_ns() - start),
        together: together(&reports),
        cpus: reports,
    }
}

/// One CPU's thread.
fn watch(
    cpu: usize,
    period_ns: u64,
    priority: u8,
    report_ns: u64,
    start: u64,
    stop: &AtomicBool,
) -> CpuReport {
    if let Err(e) = sched::pin_this_thread(cpu) {
        eprintln!("lossless-bench lateness: pinning to CPU {cpu} failed: {e}");
    }
    let fifo = match sched::enter_fifo_unmetered(priority) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("lossless-bench lateness: SCHED_FIFO {priority} on CPU {cpu} refused ({e}): measuring SCHED_OTHER");
            false
        }
    };
    let mut r = CpuReport {
        cpu,
        fifo,
        wakeups: 0,
        late: 0,
        max_late_us: 0.0,
        buckets: vec![0; 64],
        episodes: Vec::with_capacity(MAX_EPISODES),
    };
    let mut due = now_ns() + period_ns;
    while !stop.load(Ordering::Relaxed) {
        sleep_until(due);
        let now = now_ns();
        let late = now.saturating_sub(due);
        r.wakeups += 1;
        r.buckets[(64 - late.leading_zeros()) as usize % 64] += 1;
        r.max_late_us = r.max_late_us.max(late as f64 / 1e3);
        if late >= report_ns {
            r.late += 1;
            if r.episodes.len() < MAX_EPISODES {
                r.episodes.push(Episode {
                    from_ms: (due - start) as f64 / 1e6,
                    to_ms: (now - start) as f64 / 1e6,
                });
            }
        }
        // The next deadline, or a period from now where the thread woke past it: a late
        // wake-up is one episode, not a run of them.
        due = (due + period_ns).max(now + period_ns / 2);
    }
    r
}

/// The spans over which two CPUs' late wake-ups overlap.
fn together(reports: &[CpuReport]) -> Vec<Together> {
    let mut out = Vec::new();
    for (i, a) in reports.iter().enumerate() {
        for b in &reports[i + 1..] {
            for x in &a.episodes {
                for y in &b.episodes {
                    let (from, to) = (x.from_ms.max(y.from_ms), x.to_ms.min(y.to_ms));
                    if to > from {
                        out.push(Together {
                            cpus: [a.cpu, b.cpu],
                            from_ms: from,
                            to_ms: to,
                        });
                    }
                }
            }
        }
    }
    out.sort_by(|p, q| p.from_ms.total_cmp(&q.from_ms));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(cpu: usize, episodes: &[(f64, f64)]) -> CpuReport {
        CpuReport {
            cpu,
            fifo: true,
            wakeups: 100,
            late: episodes.len() as u64,
            max_late_us: 0.0,
            buckets: vec![0; 64],
            episodes: episodes
                .iter()
                .map(|&(from_ms, to_ms)| Episode { from_ms, to_ms })
                .collect(),
        }
    }

    #[test]
    fn only_spans_late_on_both_cpus_at_once_are_together() {
        let a = cpu(0, &[(10.0, 13.0), (50.0, 51.5)]);
        let b = cpu(1, &[(12.0, 20.0), (51.5, 53.0), (70.0, 71.0)]);
        // 12-13 overlaps; 51.5 only touches; 70-71 is CPU 1's alone.
        assert_eq!(
            together(&[a, b]),
            [Together {
                cpus: [0, 1],
                from_ms: 12.0,
                to_ms: 13.0
            }]
        );
    }

    #[test]
    fn a_thread_measures_its_wakeups_until_stopped() {
        let stop = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            let t = s.spawn(|| run(&[0], 200_000, 1, u64::MAX, &stop));
            std::thread::sleep(std::time::Duration::from_millis(20));
            stop.store(true, Ordering::Relaxed);
            t.join().unwrap()
        });
        assert_eq!(r.cpus.len(), 1);
        let c = &r.cpus[0];
        assert!(c.wakeups > 10, "{c:?}");
        assert_eq!(c.buckets.iter().sum::<u64>(), c.wakeups);
        assert_eq!(c.late, 0, "nothing is u64::MAX late");
        assert!(r.together.is_empty());
    }
}
