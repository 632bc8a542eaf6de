//! Scheduling of the threads that move frames: pinning to a CPU, and real-time scheduling
//! (`SCHED_FIFO` at a chosen priority, with the process's memory locked) so that other work on
//! a busy machine cannot starve them. Every OS call of that kind is here; the daemon's workers
//! and the single-threaded tools (`gen`, `sink`, `cable`) go through the same decision.
//!
//! The decision ([`decide`]) is pure: a mode, a priority and what the process may do
//! ([`Permission`]: `CAP_SYS_NICE`, or an `RLIMIT_RTPRIO` soft limit at least the priority).
//! [`prepare`] probes the permission and logs the outcome; [`lock_memory`] and [`enter_fifo`]
//! make the calls; [`ThreadSched::of`] reads back what the kernel applied.

use std::{fmt, io};

use serde::{Deserialize, Serialize};

use super::rt_duty;

/// Whether the threads that move frames run `SCHED_FIFO` (`[daemon] realtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RealtimeMode {
    /// When permitted, while some priority is lossless (PFC, SFC or credits); otherwise
    /// normal scheduling, and a warning that names what is missing when it is not permitted.
    /// The default. A real-time worker bounds the reaction time of the lossless priorities on
    /// a busy host, and with the duty cycle ([`rt_duty`]) the kernel never stops it, so what
    /// it guards only gains. What it takes is the CPU of the host's other processes, on veth
    /// the receiver of the forwarded traffic among them (bench/RESULTS.md (30)); with no
    /// lossless priority there is no buffer of ours whose overflow it prevents, so the
    /// workers run `SCHED_OTHER` then, and switch when a reload makes a priority lossless
    /// (or the last one lossy): [`WorkerRealtime`].
    #[default]
    Auto,
    /// Always, lossless priorities or not (a lossy forwarder that must still answer a peer's
    /// PFC within the peer's headroom on a busy host): not being permitted is an error at
    /// start.
    On,
    /// Never: normal (`SCHED_OTHER`) scheduling.
    Off,
}

impl RealtimeMode {
    /// The mode as the configuration spells it.
    pub fn name(self) -> &'static str {
        match self {
            RealtimeMode::Auto => "auto",
            RealtimeMode::On => "on",
            RealtimeMode::Off => "off",
        }
    }

    /// What the mode does with `priority`, as `check-config` and `status` say it:
    /// `auto (SCHED_FIFO priority 50 when permitted, while a priority is lossless)`.
    pub fn describe(self, priority: u8) -> String {
        let when = match self {
            RealtimeMode::Auto => " when permitted, while a priority is lossless",
            RealtimeMode::On => ", required",
            RealtimeMode::Off => " not used",
        };
        format!("{} (SCHED_FIFO priority {priority}{when})", self.name())
    }
}

/// What a worker's scheduling follows once real-time scheduling is permitted
/// ([`RealtimeMode`]): `on` keeps it `SCHED_FIFO`, `auto` only while a priority is lossless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerRealtime {
    /// The `SCHED_FIFO` priority it takes.
    pub priority: u8,
    /// Real-time whatever the priorities (`on`).
    pub always: bool,
}

impl WorkerRealtime {
    /// Whether a worker runs `SCHED_FIFO` while `any_lossless` says whether some priority is
    /// lossless.
    pub fn wanted(&self, any_lossless: bool) -> bool {
        self.always || any_lossless
    }

    /// The priority to enter `SCHED_FIFO` at now, if the worker is to.
    pub fn now(&self, any_lossless: bool) -> Option<u8> {
        self.wanted(any_lossless).then_some(self.priority)
    }
}

/// Default `SCHED_FIFO` priority.
pub const DEFAULT_PRIORITY: u8 = 50;
/// Highest `SCHED_FIFO` priority on Linux (`sched_get_priority_max(SCHED_FIFO)`).
pub const MAX_PRIORITY: u8 = 99;
/// Bit of `CAP_SYS_NICE` in the capability sets (linux/capability.h).
const CAP_SYS_NICE: u32 = 23;

/// A request for real-time scheduling: what a setting or flag asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Auto, on or off.
    pub mode: RealtimeMode,
    /// `SCHED_FIFO` priority, 1..=[`MAX_PRIORITY`].
    pub priority: u8,
    /// The setting that asked, as errors and logs name it (`daemon.realtime`, `--realtime`).
    pub setting: &'static str,
}

/// Why real-time scheduling could not be had.
#[derive(Debug, thiserror::Error)]
pub enum RealtimeError {
    /// Asked for with `on` (or a tool's `--realtime`), and the process may not.
    #[error("{setting}: SCHED_FIFO at priority {priority} is not permitted: {missing}")]
    Denied {
        /// The setting that asked.
        setting: &'static str,
        /// Priority asked for.
        priority: u8,
        /// What is missing, and how to grant it.
        missing: String,
    },
    /// The process's capabilities or limits could not be read.
    #[error("{setting}: cannot read this process's capabilities and limits: {source}")]
    Probe {
        /// The setting that asked.
        setting: &'static str,
        /// Why.
        source: io::Error,
    },
    /// The kernel refused `sched_setscheduler` although the permission was there.
    #[error("{setting}: sched_setscheduler(SCHED_FIFO, {priority}) failed: {source}{hint}", hint = refusal_hint(source))]
    Apply {
        /// The setting that asked.
        setting: &'static str,
        /// Priority asked for.
        priority: u8,
        /// The kernel's answer.
        source: io::Error,
    },
}

/// EPERM with CAP_SYS_NICE or a sufficient RLIMIT_RTPRIO has two usual causes; name them.
fn refusal_hint(e: &io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::EPERM) {
        " (the permission is there, so something else refuses real-time policies: a seccomp \
         filter such as systemd's RestrictRealtime=yes, or a cgroup without real-time budget, \
         cpu.rt_runtime_us = 0 under CONFIG_RT_GROUP_SCHED)"
    } else {
        ""
    }
}

/// What the process may do about real-time scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// `CAP_SYS_NICE` is in the effective set.
    pub cap_sys_nice: bool,
    /// Soft `RLIMIT_RTPRIO`: the highest priority a thread may take without `CAP_SYS_NICE`
    /// (`u64::MAX` when unlimited).
    pub rtprio_limit: u64,
}

impl Permission {
    /// The calling thread's effective capabilities and the process's `RLIMIT_RTPRIO`.
    pub fn of_this_thread() -> io::Result<Self> {
        let status = std::fs::read_to_string("/proc/thread-self/status")?;
        let caps = effective_caps(&status).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "no CapEff line in /proc/thread-self/status",
            )
        })?;
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit through a valid pointer.
        if unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Permission {
            cap_sys_nice: caps & (1 << CAP_SYS_NICE) != 0,
            rtprio_limit: limit.rlim_cur,
        })
    }

    /// Whether a thread may take `SCHED_FIFO` at `priority` (sched(7)).
    pub fn allows(&self, priority: u8) -> bool {
        self.cap_sys_nice || self.rtprio_limit >= u64::from(priority)
    }

    /// What permits `priority`, for the log.
    fn grant(&self, priority: u8) -> String {
        if self.cap_sys_nice {
            "CAP_SYS_NICE".to_string()
        } else {
            format!("RLIMIT_RTPRIO {} >= {priority}", self.limit_text())
        }
    }

    /// What is missing for `priority`, and how to grant it.
    fn missing(&self, priority: u8) -> String {
        format!(
            "it needs CAP_SYS_NICE or RLIMIT_RTPRIO >= {priority}, and this process has no \
             CAP_SYS_NICE and RLIMIT_RTPRIO {} (grant CAP_SYS_NICE, e.g. systemd's \
             AmbientCapabilities=, or raise the limit: LimitRTPRIO=, ulimit -r)",
            self.limit_text()
        )
    }

    fn limit_text(&self) -> String {
        if self.rtprio_limit == u64::MAX {
            "unlimited".to_string()
        } else {
            self.rtprio_limit.to_string()
        }
    }
}

/// The effective capability set from the text of `/proc/<pid>/status`.
fn effective_caps(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// What [`decide`] concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run `SCHED_FIFO` at `priority`; `grant` is what permits it.
    Fifo {
        /// The priority.
        priority: u8,
        /// `CAP_SYS_NICE` or the `RLIMIT_RTPRIO` that allows it.
        grant: String,
    },
    /// Keep normal scheduling because the setting says so.
    Off,
    /// Keep normal scheduling because `auto` is not permitted; `missing` says what would be.
    NotPermitted {
        /// What is missing, and how to grant it.
        missing: String,
    },
}

/// Decides what `req` gets with `perm`: `on` without permission is an error naming the
/// setting and what is missing; `auto` without it falls back to normal scheduling.
pub fn decide(req: &Request, perm: &Permission) -> Result<Decision, RealtimeError> {
    let priority = req.priority;
    match req.mode {
        RealtimeMode::Off => Ok(Decision::Off),
        _ if perm.allows(priority) => Ok(Decision::Fifo {
            priority,
            grant: perm.grant(priority),
        }),
        RealtimeMode::Auto => Ok(Decision::NotPermitted {
            missing: perm.missing(priority),
        }),
        RealtimeMode::On => Err(RealtimeError::Denied {
            setting: req.setting,
            priority,
            missing: perm.missing(priority),
        }),
    }
}

/// Decides `req` for this process and logs the outcome in one line: INFO when real-time
/// scheduling will be used or is off by the setting, WARN naming what is missing when `auto`
/// is not permitted. Returns the priority to apply, if any.
pub fn prepare(req: &Request) -> Result<Option<u8>, RealtimeError> {
    let setting = req.setting;
    let mode = req.mode.name();
    let decision = match req.mode {
        RealtimeMode::Off => Decision::Off,
        _ => match Permission::of_this_thread() {
            Ok(perm) => decide(req, &perm)?,
            Err(source) if req.mode == RealtimeMode::On => {
                return Err(RealtimeError::Probe { setting, source })
            }
            Err(e) => Decision::NotPermitted {
                missing: format!("cannot read this process's capabilities and limits: {e}"),
            },
        },
    };
    match decision {
        Decision::Fifo { priority, grant } => {
            tracing::info!(
                setting,
                mode,
                priority,
                permitted_by = %grant,
                "real-time scheduling on: SCHED_FIFO with memory locked"
            );
            Ok(Some(priority))
        }
        Decision::Off => {
            tracing::info!(
                setting,
                mode,
                "real-time scheduling off: normal (SCHED_OTHER) scheduling"
            );
            Ok(None)
        }
        Decision::NotPermitted { missing } => {
            tracing::warn!(
                setting,
                mode,
                priority = req.priority,
                "real-time scheduling not permitted, so normal (SCHED_OTHER) scheduling: {missing}"
            );
            Ok(None)
        }
    }
}

/// The kernel's real-time throttling: (runtime, period) in µs of `kernel.sched_rt_runtime_us`
/// and `sched_rt_period_us`, or `None` when it is off (runtime -1) or unreadable. A
/// `SCHED_FIFO` thread that would use more than `runtime` of a CPU per `period` is stopped
/// for the rest of the period.
pub fn rt_throttle() -> Option<(u64, u64)> {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((read("sched_rt_runtime_us")?, read("sched_rt_period_us")?))
}

/// Locks the process's current and future memory (`mlockall`), so that a page fault cannot
/// stall a real-time thread. A failure is logged as a warning and the process goes on
/// unlocked; returns whether memory is locked.
pub fn lock_memory() -> bool {
    // SAFETY: mlockall takes flags only.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } == 0 {
        return true;
    }
    tracing::warn!(
        error = %io::Error::last_os_error(),
        "mlockall failed, memory not locked: page faults can still stall real-time threads \
         (needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK above the process's size)"
    );
    false
}

/// Makes the calling thread `SCHED_FIFO` at `priority`, under the process's duty cycle
/// ([`rt_duty`]: a short `SCHED_OTHER` slice in every window, so that the kernel never stops
/// it for tens of milliseconds).
pub fn enter_fifo(priority: u8) -> io::Result<()> {
    rt_duty::set_policy(0, libc::SCHED_FIFO, priority)?;
    rt_duty::enroll(
        this_thread_id(),
        priority,
        pinned_cpu(),
        priority.saturating_add(1).min(MAX_PRIORITY),
        rt_duty::Duty::for_kernel(rt_throttle()),
    );
    Ok(())
}

/// Warns that real-time workers with `busy_poll` keep their CPUs from every normal task except
/// in the duty cycle's slices, with the share the kernel keeps for them; nothing where the
/// kernel keeps none (real-time throttling off).
pub fn warn_of_busy_polling() {
    if let Some((runtime, period)) = rt_throttle() {
        tracing::warn!(
            runtime_us = runtime,
            period_us = period,
            "busy_poll with real-time workers: a worker that never sleeps keeps its CPU from every \
             normal task except in the duty cycle's slice of each window (the share the kernel \
             keeps for them, runtime_us of period_us); give it a core of its own (cores) or set \
             busy_poll = false"
        );
    }
}

/// Returns the calling thread, made `SCHED_FIFO` by [`enter_fifo`], to `SCHED_OTHER` and takes
/// it out of the duty cycle.
pub fn leave_fifo() -> io::Result<()> {
    rt_duty::leave();
    rt_duty::set_policy(0, libc::SCHED_OTHER, 0)
}

/// Makes the calling thread `SCHED_FIFO` at `priority` outside the duty cycle: only for a
/// thread that sleeps between short looks (the stall guard), so that it never holds a CPU
/// long enough for the kernel's fair server or RT throttling to matter, and must run even
/// in the workers' `SCHED_OTHER` slice.
pub fn enter_fifo_unmetered(priority: u8) -> io::Result<()> {
    rt_duty::set_policy(0, libc::SCHED_FIFO, priority)
}

/// For a single-threaded tool: decides `req` ([`prepare`]), and when it is granted locks
/// memory and makes the calling thread `SCHED_FIFO`. Call it after the tool's frame pool is
/// mapped, from the thread that runs its loop.
pub fn apply_to_this_thread(req: &Request) -> Result<(), RealtimeError> {
    let Some(priority) = prepare(req)? else {
        return Ok(());
    };
    lock_memory();
    enter_fifo(priority).map_err(|source| RealtimeError::Apply {
        setting: req.setting,
        priority,
        source,
    })
}

/// Pins the calling thread to CPU `core`.
pub fn pin_this_thread(core: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET sets one bit of it; pid 0 is this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The one CPU the calling thread may run on, if it is pinned to one.
fn pinned_cpu() -> Option<usize> {
    match allowed_cpus()[..] {
        [cpu] => Some(cpu),
        _ => None,
    }
}

/// The CPUs the calling thread may run on (empty if they cannot be read).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid buffer of the size given; pid 0 is this thread;
    // CPU_ISSET only reads the set the kernel filled in.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The calling thread's id (what `/proc/<pid>/task/` lists and `chrt -p` takes).
pub fn this_thread_id() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// A scheduling policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Normal time sharing.
    Other,
    /// Real-time first in, first out.
    Fifo,
    /// Real-time round robin.
    RoundRobin,
    /// Batch time sharing.
    Batch,
    /// Lowest priority.
    Idle,
    /// Earliest deadline first.
    Deadline,
}

/// `SCHED_DEADLINE` (linux/sched.h; not in the libc crate).
const SCHED_DEADLINE: i32 = 6;

impl Policy {
    /// The policy of a `sched_getscheduler` result (`SCHED_RESET_ON_FORK` ignored).
    fn from_raw(raw: i32) -> Option<Self> {
        match raw & !libc::SCHED_RESET_ON_FORK {
            libc::SCHED_OTHER => Some(Policy::Other),
            libc::SCHED_FIFO => Some(Policy::Fifo),
            libc::SCHED_RR => Some(Policy::RoundRobin),
            libc::SCHED_BATCH => Some(Policy::Batch),
            libc::SCHED_IDLE => Some(Policy::Idle),
            SCHED_DEADLINE => Some(Policy::Deadline),
            _ => None,
        }
    }

    /// The kernel's name (`SCHED_FIFO`).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Other => "SCHED_OTHER",
            Policy::Fifo => "SCHED_FIFO",
            Policy::RoundRobin => "SCHED_RR",
            Policy::Batch => "SCHED_BATCH",
            Policy::Idle => "SCHED_IDLE",
            Policy::Deadline => "SCHED_DEADLINE",
        }
    }
}

/// A thread's policy and real-time priority as the kernel reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSched {
    /// Policy.
    pub policy: Policy,
    /// Real-time priority (0 for the normal policies).
    pub priority: u8,
}

impl ThreadSched {
    /// Thread `tid`'s scheduling (0: the calling thread).
    pub fn of(tid: i32) -> io::Result<Self> {
        // SAFETY: sched_getscheduler takes a thread id only.
        let raw = unsafe { libc::sched_getscheduler(tid) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        let policy = Policy::from_raw(raw).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unknown scheduling policy {raw}"),
            )
        })?;
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_getparam writes one sched_param through a valid pointer.
        if unsafe { libc::sched_getparam(tid, &mut param) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ThreadSched {
            policy,
            priority: u8::try_from(param.sched_priority).unwrap_or(0),
        })
    }

    /// True for the real-time policies (`SCHED_FIFO`, `SCHED_RR`).
    pub fn realtime(&self) -> bool {
        matches!(self.policy, Policy::Fifo | Policy::RoundRobin)
    }
}

/// A worker thread's scheduling, as `status`, the run report and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSched {
    /// Worker index.
    pub worker: usize,
    /// Thread id.
    pub tid: i32,
    /// Runs a real-time policy.
    pub realtime: bool,
    /// `SCHED_FIFO`, `SCHED_OTHER`, ...; `unknown` if the thread could not be read (gone).
    pub policy: String,
    /// Real-time priority (0 for the normal policies).
    pub priority: u8,
}

impl WorkerSched {
    /// Worker `worker`'s thread `tid` as the kernel reports it now, except that a thread
    /// under the duty cycle ([`rt_duty`]) read in its `SCHED_OTHER` slice shows the
    /// `SCHED_FIFO` priority it returns to at the window's end. (A read during a switch can
    /// also show `SCHED_FIFO` at priority 0, which no real-time thread has: the kernel's stat
    /// line is not read atomically. That too is the priority it returns to.)
    pub fn read(worker: usize, tid: i32) -> Self {
        let sched = ThreadSched::of(tid).ok().map(|s| {
            match (s.policy, s.priority, rt_duty::priority_of(tid)) {
                (Policy::Other, _, Some(priority)) | (Policy::Fifo, 0, Some(priority)) => {
                    ThreadSched {
                        policy: Policy::Fifo,
                        priority,
                    }
                }
                _ => s,
            }
        });
        WorkerSched {
            worker,
            tid,
            realtime: sched.is_some_and(|s| s.realtime()),
            policy: sched.map_or("unknown", |s| s.policy.name()).to_string(),
            priority: sched.map_or(0, |s| s.priority),
        }
    }
}

impl fmt::Display for WorkerSched {
    /// `SCHED_FIFO 50`, `SCHED_OTHER`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.realtime {
            write!(f, "{} {}", self.policy, self.priority)
        } else {
            f.write_str(&self.policy)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: Request = Request {
        mode: RealtimeMode::On,
        priority: 50,
        setting: "daemon.realtime",
    };

    fn perm(cap_sys_nice: bool, rtprio_limit: u64) -> Permission {
        Permission {
            cap_sys_nice,
            rtprio_limit,
        }
    }

    #[test]
    fn parses_the_effective_capability_set() {
        let status = "Name:\tlossless\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                      CapEff:\t0000000000803000\nCapBnd:\t000001ffffffffff\n";
        let caps = effective_caps(status).unwrap();
        assert_eq!(caps, 0x80_3000);
        assert_ne!(caps & (1 << CAP_SYS_NICE), 0);
        assert_eq!(
            effective_caps("CapEff:\t0000000000003000\n").unwrap() & (1 << 23),
            0
        );
        assert_eq!(effective_caps("Name:\tx\n"), None);
        assert_eq!(effective_caps("CapEff:\tzz\n"), None);
    }

    #[test]
    fn permission_is_the_capability_or_a_high_enough_limit() {
        assert!(perm(true, 0).allows(99));
        assert!(perm(false, 50).allows(50));
        assert!(!perm(false, 49).allows(50));
        assert!(!perm(false, 0).allows(1));
        assert!(perm(false, u64::MAX).allows(99));
    }

    #[test]
    fn decisions() {
        let auto = Request {
            mode: RealtimeMode::Auto,
            ..ON
        };
        let off = Request {
            mode: RealtimeMode::Off,
            ..ON
        };
        assert_eq!(
            decide(&ON, &perm(true, 0)).unwrap(),
            Decision::Fifo {
                priority: 50,
                grant: "CAP_SYS_NICE".into()
            }
        );
        assert_eq!(
            decide(&auto, &perm(false, u64::MAX)).unwrap(),
            Decision::Fifo {
                priority: 50,
                grant: "RLIMIT_RTPRIO unlimited >= 50".into()
            }
        );
        assert_eq!(decide(&off, &perm(true, 99)).unwrap(), Decision::Off);
        let Decision::NotPermitted { missing } = decide(&auto, &perm(false, 10)).unwrap() else {
            panic!("auto without permission falls back")
        };
        assert!(
            missing.contains("CAP_SYS_NICE") && missing.contains("RLIMIT_RTPRIO 10"),
            "{missing}"
        );
        let e = decide(&ON, &perm(false, 0)).unwrap_err().to_string();
        assert!(
            e.starts_with("daemon.realtime: SCHED_FIFO at priority 50 is not permitted")
                && e.contains("CAP_SYS_NICE")
                && e.contains("RLIMIT_RTPRIO 0"),
            "{e}"
        );
    }

    #[test]
    fn refusal_hint_names_seccomp_and_cgroup_budget_for_eperm_only() {
        let apply = |errno| {
            RealtimeError::Apply {
                setting: "--realtime",
                priority: 7,
                source: io::Error::from_raw_os_error(errno),
            }
            .to_string()
        };
        let e = apply(libc::EPERM);
        assert!(
            e.starts_with("--realtime: sched_setscheduler(SCHED_FIFO, 7) failed")
                && e.contains("RestrictRealtime")
                && e.contains("cpu.rt_runtime_us"),
            "{e}"
        );
        assert!(!apply(libc::EINVAL).contains("RestrictRealtime"));
    }

    #[test]
    fn policies_from_the_kernel() {
        assert_eq!(Policy::from_raw(libc::SCHED_FIFO), Some(Policy::Fifo));
        assert_eq!(
            Policy::from_raw(libc::SCHED_RR | libc::SCHED_RESET_ON_FORK),
            Some(Policy::RoundRobin)
        );
        assert_eq!(Policy::from_raw(42), None);
        let fifo = WorkerSched {
            worker: 0,
            tid: 7,
            realtime: true,
            policy: "SCHED_FIFO".into(),
            priority: 50,
        };
        assert_eq!(fifo.to_string(), "SCHED_FIFO 50");
        let other = WorkerSched {
            realtime: false,
            policy: "SCHED_OTHER".into(),
            priority: 0,
            ..fifo
        };
        assert_eq!(other.to_string(), "SCHED_OTHER");
    }

    /// The real calls: SCHED_FIFO is entered and read back when this process may (the tests
    /// run as root), refused with EPERM when it may not.
    ///
    /// Under the duty cycle the kernel shows SCHED_FIFO 3, and SCHED_OTHER in the slices of
    /// windows the thread keeps its CPU busy, never while it leaves its CPU enough time; the
    /// worker's report shows SCHED_FIFO 3 throughout. An observer of its own looks: a demoted
    /// thread behind other work (other tests, CPU hogs) may not run during its slice at all,
    /// so it cannot be trusted to see its own demotion (CI saw none in five busy windows).
    #[test]
    fn enters_fifo_when_permitted() {
        use std::sync::atomic::{AtomicI32, AtomicU8, Ordering::Relaxed};
        use std::sync::Arc;
        const SPIN: u8 = 0;
        const SLEEP: u8 = 1;
        const STOP: u8 = 2;
        let allowed = Permission::of_this_thread().unwrap().allows(3);
        let phase = Arc::new(AtomicU8::new(SPIN));
        let tid = Arc::new(AtomicI32::new(0));
        let (p, t) = (phase.clone(), tid.clone());
        let subject = std::thread::spawn(move || {
            let before = ThreadSched::of(0).unwrap();
            assert!(!before.realtime(), "{before:?}");
            let entered = enter_fifo(3);
            t.store(
                if entered.is_ok() {
                    this_thread_id()
                } else {
                    -1
                },
                Relaxed,
            );
            while entered.is_ok() && p.load(Relaxed) != STOP {
                if p.load(Relaxed) == SLEEP {
                    std::thread::sleep(std::time::Duration::from_micros(500));
                }
            }
            entered
        });
        while tid.load(Relaxed) == 0 {
            std::thread::yield_now();
        }
        let tid = tid.load(Relaxed);
        if tid < 0 {
            let e = subject.join().unwrap().unwrap_err();
            assert!(!allowed && e.raw_os_error() == Some(libc::EPERM), "{e}");
            return;
        }
        assert!(allowed);
        let set = phase.clone();
        let observer = std::thread::spawn(move || {
            enter_fifo_unmetered(5).unwrap();
            // Looks every 20 µs for `windows` windows, or until both policies were seen.
            let watch = |windows: u64, until_both: bool| {
                let (mut fifo, mut other) = (false, false);
                let end = std::time::Instant::now()
                    + std::time::Duration::from_nanos(windows * rt_duty::WINDOW_NS);
                while std::time::Instant::now() < end && !(until_both && fifo && other) {
                    let s = ThreadSched::of(tid).unwrap();
                    match s.policy {
                        Policy::Fifo => fifo |= s.priority == 3,
                        Policy::Other => other = true,
                        _ => panic!("{s:?}"),
                    }
                    let w = WorkerSched::read(0, tid);
                    assert!(
                        w.realtime && w.policy == "SCHED_FIFO" && w.priority == 3,
                        "{w:?}"
                    );
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
                (fifo, other)
            };
            // A newly enrolled thread is noted at the duty thread's next turn, which may be
            // LIGHT_SKIP windows away, and judged a window after that.
            let busy = watch(rt_duty::LIGHT_SKIP + 4, true);
            set.store(SLEEP, Relaxed);
            // The last busy window's slice may still run: start idle after it.
            std::thread::sleep(std::time::Duration::from_nanos(2 * rt_duty::WINDOW_NS));
            (busy, watch(5, false))
        });
        // Stopped whether the observer finished or panicked, so the subject never spins on.
        let seen = observer.join();
        phase.store(STOP, Relaxed);
        subject.join().unwrap().unwrap();
        let (busy, idle) = seen.unwrap();
        assert_eq!(
            busy,
            (true, true),
            "busy: (SCHED_FIFO 3 seen, SCHED_OTHER seen)"
        );
        assert_eq!(
            idle,
            (true, false),
            "idle: (SCHED_FIFO 3 seen, SCHED_OTHER seen)"
        );
    }
}
