//! The stall guard: PFC and SFC for a worker that cannot run.
//!
//! A worker sends PFC from its own loop, so the congestion point it runs is only as prompt as
//! the worker. Frames do not wait for it: on veth the XDP program runs on the sender's CPU, on
//! a NIC on the CPU that takes the interrupt, so a worker that is not running finds its RX
//! ring filling behind it with nobody to send XOFF. On the 2-vCPU lab VM the host stops a whole
//! vCPU for 1.4–2.5 ms about once a second while both are busy, and the README's quick start
//! with two CPU hogs lost 79–168 frames to `headroom_overflow` in about one run in twenty: 2 ms
//! at 2 Gbit/s is 500 kB, twice the default headroom. A real-time worker can also be held by
//! its duty-cycle slice or by a task of higher priority.
//!
//! The guard is a thread on each of (at most) two CPUs, so that whichever CPU a worker is
//! stopped on, a guard runs on another; `SCHED_FIFO` one below the workers when they are
//! real-time (above every normal task, never preempting a running worker). It looks, per
//! worker and port, at the worker's loop turns (`heartbeat`) and, in the port's XDP `ingress`
//! map, the frames steered to the worker's queue and the frames stamp of the last one the
//! worker took (which it publishes after each batch).
//!
//! **The doorbell: looks when a stall begins, not on a timer.** A look costs a timer wake-up,
//! 20-65 us of CPU on the lab VM whatever it finds, and a guard that looked often enough to
//! catch a stall as it began (every half `stall_guard` while traffic flowed) took 5-30 % of a
//! CPU, 10 % of the delivered rate in `bench/forward`'s `xoff_time` row. So the XDP program
//! says when one begins. Each worker counts its receive turns on each queue into the map
//! (`turns`, one store per turn); at each frame it steers, the program notes the time when it
//! finds those turns moved, or the queue empty before the frame (an idle worker, which this
//! frame wakes). A frame that arrives `stall_guard` after that note, the turns unmoved, rings:
//! a record in each guard thread's ring buffer (`bell0`, `bell1`), at most once per
//! `stall_guard` per queue, and the kernel wakes the guards. The look counts the wait from the
//! program's note, not from itself ([`StallWatch::look`]), so a look the doorbell woke calls
//! the stall at once unless the headroom affords a longer wait. Between stalls a guard sleeps
//! on its doorbell (looking every [`BELL_LOOK_NS`] anyway, for a reload); while frames wait for
//! a worker with no turn it looks again when the stall would be due, and while a stall lasts
//! every half `stall_guard`. In the README's quick start with two CPU hogs and the worker
//! frozen 4 ms every 150-450 ms (`bench/stall-guard --freeze 4`) each guard thread used
//! 0.0-0.3 % of a CPU, against 5.7-8.0 % looking on its timer, and every run was lossless.
//!
//! The wait is [`StallWatch::stall_ns`]: `stall_guard`, or longer where the port's headroom
//! holds more than every term claims ([`super::pfc_headroom`], "The guard's wait"). Without a
//! doorbell (its ring buffers could not be set up) a guard looks every half wait. Ports
//! without a priority the guard pauses for (PFC, or SFC alone) are not looked at, and with
//! none anywhere only every [`UNGUARDED_LOOK_NS`], for a reload. (Before the doorbell, the
//! guard looked every half wait only while a port could see a stall soon, traffic flowing or
//! a source paused, and backed off to 1 ms on an idle port: 3 % of a CPU per guard thread
//! with nothing to do, bench/RESULTS.md.)
//!
//! A worker is **stalled** on a port when frames waited for it at one look (or at the
//! doorbell's note), it has made no loop turn since, at least `stall` has passed, and more
//! frames have arrived meanwhile. Each
//! condition removes a false alarm: a frame waiting is, alone, a worker about to wake; no turn
//! is, alone, an idle worker (it sleeps up to 10 ms); and after a kernel drop the count of
//! waiting frames stays too high until the worker's next turns settle it
//! ([`super::ingress`]), so with nothing new arriving the guard stays quiet, which also
//! means it can never be what keeps a source paused.
//!
//! On a stalled port the guard pauses each PFC priority whose occupancy is at its XOFF or
//! above. The occupancy is what the worker's congestion point would see: the bytes charged to
//! the port plus its RX backlog, as the workers last published them, plus what the program
//! steered since they last accounted (its live totals less the port's shared `arrived`). The
//! XOFF is the one in force (the leader's, measured headroom included), else the plan's. A
//! stalled worker's fill ring short of buffers (fewer than half its target left: what was
//! left at the worker's last accounting less the buffers of what arrived since,
//! [`super::ingress::IngressQueue::fill_short_now`]) makes every PFC priority congested
//! whatever its bytes, as fill-ring starvation does for a running worker, and the guard then
//! calls the stall after `stall_guard` without the headroom's slack, which is bytes the ring
//! has no buffers for: a pool of small frames or a small `[daemon] frames` empties the ring
//! before any XOFF in bytes is reached (`tests/under_load.rs`: 232 and 236 frames lost before
//! this rule). A
//! priority whose last PFC from the port (the worker's or the guard's) still pauses it beyond
//! the next look is left alone: the worker's XOFF, refreshed at half its pause time, usually
//! covers a stall by itself. Each PFC frame pauses for 4 × `stall` at the port's speed,
//! leaves through the guard's own AF_PACKET socket, and is refreshed every 2 × `stall` while
//! the stall lasts. The guard never sends XON: its pause runs out by itself within a
//! millisecond, and the worker, back, sends its own XOFF if the occupancy still calls for one.
//!
//! **SFC-only priorities** (a `pfc+sfc` one is paused by the PFC above). An SFC pause goes to
//! a source, and the worker is the congestion point that knows the sources, so each worker
//! publishes per port a roster of those it took frames from ([`super::sfc_roster`]). On a
//! stalled port each SFC-only priority whose occupancy (as above) is at its SFC threshold (or
//! any, on a short fill ring) earns every source of that priority on a stalled worker's
//! roster an SFCM, and every source the doorbell's records named that no roster has
//! ([`super::doorbell`]: the program copies the head of the frame that rings, so a source
//! whose first frames arrive during the stall is paused too, though no worker has taken a
//! frame of it): class scope (the worker serves none of the source's flows), a pause of 4 ×
//! `stall` (at most `[sfc] max_pause`), drain rate 0, over UDP where the workers' go over
//! UDP, sent again every 2 × `stall` while the stall lasts. A port with such a priority is
//! watched with the wait `stall_guard` itself: the headroom's slack that lengthens the wait is
//! PFC's account, and none is kept of what an SFC priority's limit leaves.

use std::{
    io,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
        Arc, Mutex,
    },
    thread::JoinHandle,
    time::Duration,
};

use libbpf_rs::{MapHandle, RingBuffer};

use super::{
    af_packet::RawSender,
    clock::{now_ns, sleep_until},
    doorbell::{doorbell, heard, to_pause, Heard},
    ingress::IngressMap,
    port::iface_mac,
    sched,
    settings::SettingsCell,
    sfc_roster::{Source, SourceRoster},
    shared::SharedPort,
    stats::WorkerStats,
};
use crate::{
    fc::{ns_to_quanta, plan::PrioPlan, PRIORITIES},
    wire::{
        sfcm::{self, SfcScope},
        MacAddr, MacControl, Sfcm,
    },
};

/// How often a guard looks whether a reload gave a port a priority it pauses for (PFC, or SFC
/// alone), while none has one: it has nothing to send for other priorities, and its looks
/// would only take CPU (a daemon-bound lossy run has frames waiting for the worker all the
/// time).
pub const UNGUARDED_LOOK_NS: u64 = 100_000_000;

/// Longest a guard with a doorbell waits for it to ring before it looks anyway: to see a
/// reload give a port a priority it pauses for, and to publish the wait in use.
pub const BELL_LOOK_NS: u64 = 100_000_000;

/// The shortest time from one look to the next.
const MIN_LOOK_NS: u64 = 10_000;

/// The shortest and longest stall the guard may be set to wait for.
pub const STALL_RANGE_NS: std::ops::RangeInclusive<u64> = 10_000..=1_000_000_000;

/// What one look reads of one worker's queue on one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// The worker's loop turns so far.
    pub turns: u64,
    /// Frames the XDP program steered to the worker's queue, ever.
    pub steered: u64,
    /// Frames stamp of the last frame the worker took, as it published it.
    pub taken: u64,
    /// Since when, by the program's doorbell, the worker has made no receive turn on the
    /// queue, and the frames steered then ([`super::ingress::IngressQueue::quiet`]).
    pub quiet: Option<(u64, u64)>,
}

/// What a look found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The worker keeps up (or has nothing to do).
    Running,
    /// The worker is stalled, and was not at the previous look.
    Stalled,
    /// The worker is still stalled.
    StillStalled,
}

/// Whether one worker keeps up with its queue on one port: the stall rule of the module doc,
/// sans-I/O.
#[derive(Debug, Clone)]
pub struct StallWatch {
    stall_ns: u64,
    /// The worker's turns at the previous look.
    turns: Option<u64>,
    /// Since when frames have waited with no turn, and the steered count then.
    waiting: Option<(u64, u64)>,
    stalled: bool,
}

impl StallWatch {
    /// A watch that calls a worker stalled after `stall_ns`.
    pub fn new(stall_ns: u64) -> Self {
        StallWatch {
            stall_ns,
            turns: None,
            waiting: None,
            stalled: false,
        }
    }

    /// How long a worker must make no turn, with frames waiting and arriving, to be stalled.
    pub fn stall_ns(&self) -> u64 {
        self.stall_ns
    }

    /// Calls a stall after `stall_ns` from now on (the headroom's slack moved it).
    pub fn set_stall_ns(&mut self, stall_ns: u64) {
        self.stall_ns = stall_ns;
    }

    /// Takes the look `l` made at `now`. Where the program's doorbell says since when the
    /// worker has made no turn (`l.quiet`), the wait counts from then, not from this look: a
    /// look woken by the doorbell calls the stall at once.
    pub fn look(&mut self, now: u64, l: Look) -> Verdict {
        let turned = self.turns.replace(l.turns) != Some(l.turns);
        if turned || l.steered <= l.taken {
            self.stalled = false;
            // Turns before the doorbell's time are no turns since it.
            self.waiting = l.quiet.filter(|_| l.steered > l.taken);
            if self.waiting.is_none() {
                return Verdict::Running;
            }
        }
        let (since, steered) = *self
            .waiting
            .get_or_insert(l.quiet.unwrap_or((now, l.steered)));
        if now.saturating_sub(since) < self.stall_ns || l.steered == steered {
            return Verdict::Running;
        }
        if std::mem::replace(&mut self.stalled, true) {
            Verdict::StillStalled
        } else {
            Verdict::Stalled
        }
    }

    /// When the worker will be stalled if it makes no turn and frames keep arriving: frames
    /// wait for it (as of the last look) since the returned time less the wait. `None`: none
    /// wait, or it is stalled already.
    pub fn due(&self) -> Option<u64> {
        match self.waiting {
            Some((since, _)) if !self.stalled => Some(since.saturating_add(self.stall_ns)),
            _ => None,
        }
    }
}

/// When the guard sends again for a port: at once for a priority not in what it last sent,
/// and for the others once that is half spent (sans-I/O).
#[derive(Debug, Clone)]
struct Pacer {
    refresh_ns: u64,
    /// When the guard last sent, and for which priorities.
    last: Option<(u64, u8)>,
}

impl Pacer {
    /// Whether to send at `now` for the priorities in `congested` (then counted as sent).
    fn due(&mut self, now: u64, congested: u8) -> bool {
        if congested == 0 {
            return false;
        }
        if let Some((at, sent)) = self.last {
            if congested & !sent == 0 && now < at + self.refresh_ns {
                return false;
            }
        }
        self.last = Some((now, congested));
        true
    }
}

/// The guard's PFC on one port: an XOFF for the congested priorities at once, refreshed
/// every half pause while they stay congested, never an XON (sans-I/O).
#[derive(Debug, Clone)]
pub struct GuardPause {
    quanta: u16,
    pacer: Pacer,
}

impl GuardPause {
    /// Pauses of 4 × `stall_ns` at `speed_bps`, refreshed every 2 × `stall_ns`.
    pub fn new(stall_ns: u64, speed_bps: u64) -> Self {
        GuardPause {
            quanta: ns_to_quanta(4 * stall_ns, speed_bps),
            pacer: Pacer {
                refresh_ns: 2 * stall_ns,
                last: None,
            },
        }
    }

    /// The PFC frame to send at `now` for the priorities in `congested`, if one is due: a
    /// priority not in the last frame is paused at once, the others once the last frame is
    /// half spent.
    pub fn poll(&mut self, now: u64, congested: u8) -> Option<MacControl> {
        if !self.pacer.due(now, congested) {
            return None;
        }
        Some(MacControl::Pfc {
            enable: congested,
            quanta: std::array::from_fn(|p| {
                if congested & (1 << p) != 0 {
                    self.quanta
                } else {
                    0
                }
            }),
        })
    }
}

/// The guard's SFC on one port: for the congested SFC-only priorities, an SFCM to each
/// source it pauses ([`super::doorbell::to_pause`]), pausing its class for
/// 4 × `stall_ns`, at once and then every half pause while they stay congested (sans-I/O).
#[derive(Debug, Clone)]
pub struct GuardSfc {
    pause_ns: u64,
    pacer: Pacer,
    seq: u32,
}

impl GuardSfc {
    /// Pauses of 4 × `stall_ns`, sent again every 2 × `stall_ns`.
    pub fn new(stall_ns: u64) -> Self {
        GuardSfc {
            pause_ns: 4 * stall_ns,
            pacer: Pacer {
                refresh_ns: 2 * stall_ns,
                last: None,
            },
            seq: 0,
        }
    }

    /// Whether SFCMs are due at `now` for the priorities in `congested`.
    pub fn due(&mut self, now: u64, congested: u8) -> bool {
        self.pacer.due(now, congested)
    }

    /// The SFCM pausing `source`'s class, sent at `now` with `queue_bytes` waiting at its
    /// priority, for at most `max_pause_ns` (`[sfc] max_pause`). Its drain rate is 0: the
    /// stalled worker drains nothing.
    pub fn message(
        &mut self,
        source: &Source,
        now: u64,
        queue_bytes: u64,
        max_pause_ns: u64,
    ) -> Sfcm {
        self.seq = self.seq.wrapping_add(1);
        Sfcm {
            priority: source.priority,
            scope: SfcScope::Class,
            seq: self.seq,
            pause_ns: self.pause_ns.min(max_pause_ns),
            sent_ns: now,
            queue_bytes,
            drain_bps: 0,
            src_mac: source.mac,
            flow: source.flow,
        }
    }
}

/// What waits at each priority of a port: `occupancy` as the workers published it (queued +
/// RX backlog), plus what the XDP program steered since they last accounted (`live`, its
/// steered bytes now, less `accounted`; both summed over the port's queues).
pub fn waiting(
    occupancy: &[u64; PRIORITIES],
    live: &[u64; PRIORITIES],
    accounted: &[u64; PRIORITIES],
) -> [u64; PRIORITIES] {
    // A worker may account between the two reads: what it took is then in neither.
    std::array::from_fn(|p| occupancy[p].saturating_add(live[p].saturating_sub(accounted[p])))
}

/// The priorities whose `waiting` bytes are at their threshold or above (XOFF for PFC, the
/// SFC threshold for SFC).
pub fn congested(waiting: &[u64; PRIORITIES], threshold: &[Option<u64>; PRIORITIES]) -> u8 {
    (0..PRIORITIES)
        .filter(|&p| threshold[p].is_some_and(|t| waiting[p] >= t))
        .fold(0, |mask, p| mask | 1 << p)
}

/// Sends the guard's PFC frame `m` from `mac` through `sender`; returns whether the kernel
/// took it. One the kernel did not take is lost like one lost on the wire: the next look
/// sends again while the stall lasts.
pub fn send_pause(sender: &RawSender, mac: MacAddr, m: &MacControl) -> bool {
    let mut frame = [0u8; 64];
    let len = m
        .emit_frame(mac, &mut frame)
        .expect("64 bytes hold a PFC frame");
    sender.send(&frame[..len]).is_ok()
}

/// Sends the guard's SFC message `msg` from `mac` to the source it names through `sender`
/// (over UDP where `udp` is set, as the workers send theirs); returns whether the kernel took
/// it.
pub fn send_sfcm(
    sender: &RawSender,
    mac: MacAddr,
    msg: &Sfcm,
    udp: Option<(u16, [u8; 4])>,
) -> bool {
    let mut frame = [0u8; 128];
    let len = sfcm::emit_to_source(msg, mac, udp, &mut frame).expect("128 bytes hold an SFCM");
    sender.send(&frame[..len]).is_ok()
}

/// One port as the guard sees it.
pub struct GuardedPort {
    /// Interface the PFC leaves on.
    pub iface: String,
    /// Line rate (pause quanta).
    pub speed_bps: u64,
    /// The port's XDP `ingress` map.
    pub ingress: Arc<IngressMap>,
    /// Occupancy, RX backlog and arrivals as the workers publish them; the guard's counters.
    pub shared: Arc<SharedPort>,
    /// The program's doorbells, one per guard thread (`XdpProgram::bells`); none: the guard
    /// looks on a timer alone.
    pub bells: Vec<MapHandle>,
}

/// One worker as the guard sees it.
pub struct GuardedWorker {
    /// Its counters (loop turns; the leader's hold the XOFF in force).
    pub stats: Arc<WorkerStats>,
    /// The RX queue it owns on every port.
    pub queue: u32,
    /// The CPU it is pinned to, if any: the guard on that CPU cannot help it.
    pub core: Option<usize>,
}

/// What the guard threads watch and how.
pub struct GuardSetup {
    /// How long a worker must make no turn for its waiting frames to be a stall.
    pub stall_ns: u64,
    /// The ports, in plan order.
    pub ports: Vec<GuardedPort>,
    /// The workers; the first is the leader.
    pub workers: Vec<GuardedWorker>,
    /// The settings in force (which priorities are PFC, their planned XOFF).
    pub live: Arc<SettingsCell>,
    /// The workers' `SCHED_FIFO` priority, when they are real-time.
    pub realtime: Option<u8>,
}

/// What the guard threads share: per port a socket, its MAC and one pacer each for PFC and
/// SFC (so two guards seeing one stall send one stream); per (worker, port) the turn count of
/// the last stall counted (so they count it once).
struct Shared {
    setup: GuardSetup,
    senders: Vec<RawSender>,
    macs: Vec<MacAddr>,
    pauses: Vec<Mutex<GuardPause>>,
    sfcs: Vec<Mutex<GuardSfc>>,
    counted: Vec<AtomicU64>,
    stop: AtomicBool,
}

/// The running guard threads; stopped (and joined) on drop.
pub struct StallGuard {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl StallGuard {
    /// Starts the guard threads for `setup`: on the first two CPUs this process may use,
    /// those no worker is pinned to first. A guard with nothing it can help (every worker
    /// pinned to its own CPU) is not started; nor is any on a single CPU.
    pub fn spawn(setup: GuardSetup) -> io::Result<Self> {
        let mut cpus = sched::allowed_cpus();
        let pinned: Vec<usize> = setup.workers.iter().filter_map(|w| w.core).collect();
        cpus.sort_by_key(|c| pinned.contains(c));
        cpus.truncate(2);
        if cpus.len() < 2 {
            cpus.clear();
        }
        let senders = setup
            .ports
            .iter()
            .map(|p| RawSender::open(&p.iface))
            .collect::<io::Result<Vec<_>>>()?;
        let macs = setup
            .ports
            .iter()
            .map(|p| iface_mac(&p.iface).map_err(io::Error::other))
            .collect::<io::Result<Vec<_>>>()?;
        let shared = Arc::new(Shared {
            senders,
            macs,
            pauses: setup
                .ports
                .iter()
                .map(|p| Mutex::new(GuardPause::new(setup.stall_ns, p.speed_bps)))
                .collect(),
            sfcs: setup
                .ports
                .iter()
                .map(|_| Mutex::new(GuardSfc::new(setup.stall_ns)))
                .collect(),
            counted: (0..setup.workers.len() * setup.ports.len())
                .map(|_| AtomicU64::new(u64::MAX))
                .collect(),
            stop: AtomicBool::new(false),
            setup,
        });
        let mut threads = Vec::new();
        for (k, cpu) in cpus.into_iter().enumerate() {
            let watched: Vec<usize> = (0..shared.setup.workers.len())
                .filter(|&w| shared.setup.workers[w].core != Some(cpu))
                .collect();
            if watched.is_empty() {
                continue;
            }
            let shared = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("lossless-guard{cpu}"))
                    .spawn(move || guard_thread(&shared, cpu, k, &watched))?,
            );
        }
        Ok(StallGuard { shared, threads })
    }

    /// The CPUs a guard runs on.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for StallGuard {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The doorbell `k` of every port, as one ring buffer to wait on, the sources its records name
/// put on `heard` (one per port); `None` where a port has none (the guard then looks on its
/// timer alone).
fn doorbells(ports: &[GuardedPort], k: usize, heard: &Heard) -> Option<RingBuffer<'static>> {
    doorbell(ports.iter().map(|p| p.bells.get(k)), heard)
}

fn guard_thread(shared: &Shared, cpu: usize, k: usize, watched: &[usize]) {
    let s = &shared.setup;
    if let Err(e) = sched::pin_this_thread(cpu) {
        tracing::warn!(cpu, error = %e, "stall guard: pinning failed");
    }
    if let Some(prio) = s.realtime {
        // Just below the workers: above every normal task, and never preempting a worker that
        // runs (one that runs is not stalled, and on a VM each preemption costs it tens of
        // microseconds).
        if let Err(e) = sched::enter_fifo_unmetered(prio.saturating_sub(1).max(1)) {
            tracing::warn!(cpu, error = %e, "stall guard runs SCHED_OTHER and may look late");
        }
    }
    let mut watches: Vec<Vec<(usize, StallWatch)>> = s
        .ports
        .iter()
        .map(|_| {
            watched
                .iter()
                .map(|&w| (w, StallWatch::new(s.stall_ns)))
                .collect()
        })
        .collect();
    let heard = heard(s.ports.len());
    let bells = doorbells(&s.ports, k, &heard);
    if bells.is_none() {
        tracing::info!(cpu, "stall guard: no doorbell, looks on its timer alone");
    }
    let mut plan = Planned::read(&s.live);
    while !shared.stop.load(Relaxed) {
        let now = now_ns();
        plan.refresh(&s.live);
        // When the earliest stall is due where frames wait for a worker with no turn.
        let mut due: Option<u64> = None;
        let mut watching = false;
        let mut any_stalled = false;
        // The shortest wait before a stall is called on a guarded port.
        let mut wait = u64::MAX;
        for (i, port) in s.ports.iter().enumerate() {
            let xoff = plan.xoff(&s.workers[0].stats, i);
            let sfc = plan.sfc[i];
            let pfc = xoff.iter().any(Option::is_some);
            let sfc_only = sfc.iter().any(Option::is_some);
            // The doorbell rings for a port the guard pauses for, after `stall_guard`: sooner
            // than the headroom's wait, which the look then applies from the doorbell's time.
            let bell_ns = if (pfc || sfc_only) && bells.is_some() {
                s.stall_ns
            } else {
                0
            };
            for (w, _) in &watches[i] {
                if let Some(q) = port.ingress.queue(s.workers[*w].queue) {
                    q.set_bell_ns(bell_ns);
                }
            }
            if !pfc && !sfc_only {
                continue;
            }
            watching = true;
            let mut stalled = 0u64;
            // What the port's PFC headroom affords (pfc_headroom's "The guard's wait"); an
            // SFC-only priority's limit has no such account, so the guard waits `stall_guard`.
            let stall = if sfc_only {
                s.stall_ns
            } else {
                port.shared.guard_stall().max(s.stall_ns)
            };
            port.shared.set_guard_wait(stall);
            wait = wait.min(stall);
            // Whether a stalled worker's fill ring is short of buffers.
            let mut short = false;
            for (w, watch) in &mut watches[i] {
                let worker = &s.workers[*w];
                let Some(q) = port.ingress.queue(worker.queue) else {
                    watch.set_stall_ns(stall);
                    continue;
                };
                // The headroom's slack is bytes; a fill ring short of buffers has no room to
                // wait on, whatever the bytes say.
                let short_here = q.fill_short_now();
                watch.set_stall_ns(if short_here { s.stall_ns } else { stall });
                let look = Look {
                    turns: worker.stats.heartbeat.get(),
                    steered: q.steered_frames(),
                    taken: q.taken_frames(),
                    quiet: q.quiet(),
                };
                match watch.look(now, look) {
                    Verdict::Running => {}
                    Verdict::Stalled | Verdict::StillStalled => {
                        stalled |= 1 << *w;
                        short |= short_here;
                        let counted = &shared.counted[*w * s.ports.len() + i];
                        if counted.swap(look.turns, Relaxed) != look.turns {
                            port.shared.count_stall();
                        }
                    }
                }
                if let Some(d) = watch.due() {
                    due = Some(due.map_or(d, |e| e.min(d)));
                }
            }
            if stalled == 0 {
                continue;
            }
            any_stalled = true;
            let live = std::array::from_fn(|p| {
                s.workers
                    .iter()
                    .filter_map(|w| port.ingress.queue(w.queue))
                    .map(|q| q.steered_bytes(p))
                    .sum::<u64>()
            });
            let (occupancy, accounted) = (port.shared.pfc_occupancy(), port.shared.arrived_all());
            let waiting = waiting(&occupancy, &live, &accounted);
            // A stalled worker's fill ring short of buffers is congestion for every priority
            // the guard pauses for, whatever its bytes, as it is for a running worker: the
            // kernel drops what finds the ring empty, before any threshold is reached.
            let over = if short {
                [u64::MAX; PRIORITIES]
            } else {
                waiting
            };
            if pfc {
                pause_upstream(shared, i, now, congested(&over, &xoff));
            }
            if sfc_only {
                let mask = congested(&over, &sfc);
                let heard = &heard.borrow()[i].1;
                pause_sources(shared, &plan, i, now, mask, stalled, heard, &waiting);
            }
        }
        let found = if any_stalled {
            Found::Stall
        } else if let Some(due) = due {
            Found::Waiting { due }
        } else if watching {
            Found::Quiet
        } else {
            Found::Unguarded
        };
        match (
            next_look(found, now, wait, s.stall_ns, bells.is_some()),
            &bells,
        ) {
            (NextLook::AtBellOr(ns), Some(b)) => {
                let _ = b.poll(Duration::from_nanos(ns));
            }
            (NextLook::After(ns) | NextLook::AtBellOr(ns), _) => {
                sleep_until(now + ns);
                if let Some(b) = &bells {
                    // Rung while this look was due anyway.
                    let _ = b.consume();
                }
            }
        }
    }
}

/// PFC on port `i` for the priorities in `congested` at `now`, unless a pause the port already
/// sent lasts beyond the next look, or the other guard is sending for the port right now.
fn pause_upstream(shared: &Shared, i: usize, now: u64, congested: u8) {
    let port = &shared.setup.ports[i];
    let covered = (0..PRIORITIES)
        .filter(|&p| port.shared.upstream_pause_until(p) > now + shared.setup.stall_ns)
        .fold(0u8, |m, p| m | 1 << p);
    let mask = congested & !covered;
    let Ok(mut pause) = shared.pauses[i].try_lock() else {
        return;
    };
    let Some(m) = pause.poll(now, mask) else {
        return;
    };
    drop(pause);
    if send_pause(&shared.senders[i], shared.macs[i], &m) {
        port.shared.count_stall_pfc(mask);
        port.shared.sent_pause(&m, now, port.speed_bps);
    }
}

/// SFC messages on port `i` at `now` for the SFC-only priorities in `congested`: one to each
/// source on the roster of every worker in `stalled` (a bit per worker), and to each the
/// doorbell named (`heard`) that none of those has, `waiting` the bytes waiting at each
/// priority. Nothing while the other guard is sending for the port.
#[allow(clippy::too_many_arguments)]
fn pause_sources(
    shared: &Shared,
    plan: &Planned,
    i: usize,
    now: u64,
    congested: u8,
    stalled: u64,
    heard: &SourceRoster,
    waiting: &[u64; PRIORITIES],
) {
    let port = &shared.setup.ports[i];
    let Ok(mut sfc) = shared.sfcs[i].try_lock() else {
        return;
    };
    if !sfc.due(now, congested) {
        return;
    }
    let workers = &shared.setup.workers;
    let rosters = (0..workers.len())
        .filter(|w| stalled & (1 << w) != 0)
        .map(|w| &workers[w].stats.sfc_sources[i]);
    for source in to_pause(rosters, heard) {
        let prio = usize::from(source.priority);
        if congested & (1 << prio) == 0 {
            continue;
        }
        let msg = sfc.message(&source, now, waiting[prio], plan.max_pause_ns);
        if send_sfcm(&shared.senders[i], shared.macs[i], &msg, plan.udp) {
            port.shared.count_stall_sfcm(prio);
        }
    }
}

/// What a guard's look found, for the time to its next look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A worker is stalled on some port.
    Stall,
    /// Frames wait for a worker that has made no turn, not yet long enough to be a stall:
    /// the earliest stall is `due` then.
    Waiting { due: u64 },
    /// Guarded ports, every worker keeping up.
    Quiet,
    /// No port has a priority the guard pauses for.
    Unguarded,
}

/// When a guard looks next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextLook {
    /// This long after the look.
    After(u64),
    /// When a doorbell rings, at most this long after the look.
    AtBellOr(u64),
}

/// The next look after one at `now` that found `found`, `wait` being the shortest wait before
/// a stall is called on a guarded port: while a stall lasts, in half `stall_ns` (the guard's
/// pause is refreshed every two); while frames wait for a worker with no turn, when the stall
/// would be due; with every worker keeping up, when a doorbell rings, or without one in half
/// `wait`, so that a stall is seen at most half a wait late.
fn next_look(found: Found, now: u64, wait: u64, stall_ns: u64, doorbell: bool) -> NextLook {
    match (found, doorbell) {
        (Found::Stall, _) => NextLook::After(stall_ns / 2),
        (Found::Waiting { due }, _) => NextLook::After(due.saturating_sub(now).max(MIN_LOOK_NS)),
        (Found::Quiet, false) => NextLook::After(wait / 2),
        (Found::Quiet, true) => NextLook::AtBellOr(BELL_LOOK_NS),
        (Found::Unguarded, _) => NextLook::After(UNGUARDED_LOOK_NS),
    }
}

/// Which priorities the guard pauses for per port, and at which thresholds, from the settings
/// in force: PFC ones at their XOFF, SFC-only ones at their SFC threshold.
struct Planned {
    generation: u64,
    /// Planned XOFF per port and priority (`None`: not a PFC priority).
    xoff: Vec<[Option<u64>; PRIORITIES]>,
    /// SFC threshold per port and priority (`None`: not an SFC-only priority).
    sfc: Vec<[Option<u64>; PRIORITIES]>,
    /// The SFC transport: UDP (port, own address), or `None` for L2.
    udp: Option<(u16, [u8; 4])>,
    /// The longest SFC pause (`[sfc] max_pause`).
    max_pause_ns: u64,
}

impl Planned {
    fn read(live: &SettingsCell) -> Self {
        let generation = live.generation();
        let s = live.get();
        let ports = 0..s.pause_quanta.len();
        let xoff = ports
            .clone()
            .map(|port| std::array::from_fn(|p| s.plan_for(port, p).0.pfc.map(|pfc| pfc.xoff)))
            .collect();
        let sfc = ports
            .map(|port| {
                std::array::from_fn(|p| match s.plan_for(port, p).0 {
                    PrioPlan {
                        pfc: None,
                        sfc: Some(sfc),
                        ..
                    } => Some(sfc.threshold),
                    _ => None,
                })
            })
            .collect();
        Planned {
            generation,
            xoff,
            sfc,
            udp: s.sfc.udp,
            max_pause_ns: s.sfc.max_pause_ns,
        }
    }

    /// Reads the settings again if they changed (a reload, a measured headroom).
    fn refresh(&mut self, live: &SettingsCell) {
        if live.generation() != self.generation {
            *self = Planned::read(live);
        }
    }

    /// XOFF per priority of port `port`: the leader's in force where it published one.
    fn xoff(&self, leader: &WorkerStats, port: usize) -> [Option<u64>; PRIORITIES] {
        let planned = self.xoff.get(port).copied().unwrap_or([None; PRIORITIES]);
        std::array::from_fn(|p| {
            planned[p].map(|x| match leader.ports[port].xoff_in_force[p].get() {
                0 => x,
                in_force => in_force,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STALL: u64 = 250_000;

    fn look(turns: u64, steered: u64, taken: u64) -> Look {
        Look {
            turns,
            steered,
            taken,
            quiet: None,
        }
    }

    #[test]
    fn looks_come_at_the_doorbell_between_stalls_and_when_a_stall_is_due_while_frames_wait() {
        const WAIT: u64 = 2_000_000;
        const NOW: u64 = 50_000_000;
        // Every worker keeps up: the doorbell says when that ends.
        assert_eq!(
            next_look(Found::Quiet, NOW, WAIT, STALL, true),
            NextLook::AtBellOr(BELL_LOOK_NS)
        );
        // Without one, a look every half wait.
        assert_eq!(
            next_look(Found::Quiet, NOW, WAIT, STALL, false),
            NextLook::After(WAIT / 2)
        );
        // Frames wait for a worker with no turn: the look when the stall would be due.
        let waiting = Found::Waiting { due: NOW + 700_000 };
        assert_eq!(
            next_look(waiting, NOW, WAIT, STALL, true),
            NextLook::After(700_000)
        );
        let overdue = Found::Waiting { due: NOW - 1 };
        assert_eq!(
            next_look(overdue, NOW, WAIT, STALL, true),
            NextLook::After(MIN_LOOK_NS)
        );
        // A stall met: every half stall, so the guard's pause is refreshed in time.
        assert_eq!(
            next_look(Found::Stall, NOW, WAIT, STALL, true),
            NextLook::After(STALL / 2)
        );
        assert_eq!(
            next_look(Found::Unguarded, NOW, WAIT, STALL, true),
            NextLook::After(UNGUARDED_LOOK_NS)
        );
    }

    #[test]
    fn a_worker_that_turns_is_never_stalled() {
        let mut w = StallWatch::new(STALL);
        for t in 0..100 {
            // Frames always waiting and arriving, but a turn between every two looks.
            assert_eq!(
                w.look(t * STALL, look(t, 10 * t + 5, 10 * t)),
                Verdict::Running
            );
        }
    }

    #[test]
    fn frames_waiting_and_arriving_with_no_turn_for_the_stall_time_is_a_stall() {
        let mut w = StallWatch::new(STALL);
        assert_eq!(w.look(0, look(7, 100, 100)), Verdict::Running);
        assert_eq!(w.due(), None, "nothing waits");
        // Frames arrive; the worker makes no turn from here on.
        assert_eq!(w.look(100_000, look(7, 110, 100)), Verdict::Running);
        assert_eq!(
            w.due(),
            Some(100_000 + STALL),
            "the next look when the stall is due"
        );
        assert_eq!(
            w.look(300_000, look(7, 150, 100)),
            Verdict::Running,
            "waiting for 200 us only"
        );
        assert_eq!(w.look(350_000, look(7, 160, 100)), Verdict::Stalled);
        assert_eq!(w.due(), None, "stalled: due no more");
        assert_eq!(w.look(400_000, look(7, 160, 100)), Verdict::StillStalled);
        // The worker is back.
        assert_eq!(w.look(450_000, look(8, 170, 165)), Verdict::Running);
    }

    #[test]
    fn the_doorbells_time_counts_so_a_look_it_woke_calls_the_stall_at_once() {
        let mut w = StallWatch::new(STALL);
        // The last look, long ago; the worker turned many times since.
        assert_eq!(w.look(0, look(7, 100, 100)), Verdict::Running);
        // The program saw the worker's turns stop at 10 ms with frame 200 (and the queue
        // not empty), and rang at 10.25 ms: this look, woken by it, is a turn count ahead
        // of the last look but none ahead of the doorbell's.
        let woken = Look {
            quiet: Some((10_000_000, 200)),
            ..look(90, 260, 150)
        };
        assert_eq!(w.look(10_260_000, woken), Verdict::Stalled);
        // The worker is back: its turns moved past the doorbell's.
        assert_eq!(w.look(10_400_000, look(91, 270, 265)), Verdict::Running);
        // Nothing waits: the doorbell's time says nothing.
        let empty = Look {
            quiet: Some((10_500_000, 280)),
            ..look(92, 280, 280)
        };
        assert_eq!(w.look(20_000_000, empty), Verdict::Running);
        // The doorbell's time, but no frame since it: not a stall (a backlog that no longer
        // grows cannot overflow).
        let still = Look {
            quiet: Some((20_000_000, 300)),
            ..look(93, 300, 290)
        };
        assert_eq!(w.look(20_500_000, still), Verdict::Running);
    }

    #[test]
    fn an_idle_worker_is_not_stalled() {
        let mut w = StallWatch::new(STALL);
        // Nothing waits: no turn for 10 ms is a worker asleep.
        for t in 0..40 {
            assert_eq!(w.look(t * STALL, look(3, 100, 100)), Verdict::Running);
        }
        // A count left too high by a kernel drop, and nothing new arriving: quiet, so the
        // guard cannot be what keeps the source paused.
        for t in 40..80 {
            assert_eq!(w.look(t * STALL, look(3, 120, 100)), Verdict::Running);
        }
    }

    #[test]
    fn the_pause_is_sent_at_once_and_refreshed_at_half_its_time() {
        // 4 x 250 us at 1 Gbit/s = 1 ms = 1954 quanta (512 ns each).
        let mut g = GuardPause::new(STALL, 1_000_000_000);
        assert_eq!(g.poll(0, 0), None, "nothing congested");
        let Some(MacControl::Pfc { enable, quanta }) = g.poll(0, 1 << 3) else {
            panic!("an XOFF for priority 3");
        };
        assert_eq!(enable, 1 << 3);
        assert_eq!(quanta[3], 1954);
        assert_eq!(quanta[2], 0);
        assert_eq!(g.poll(100_000, 1 << 3), None, "still paused");
        let Some(MacControl::Pfc { enable, .. }) = g.poll(200_000, (1 << 3) | (1 << 4)) else {
            panic!("a newly congested priority is paused at once");
        };
        assert_eq!(enable, (1 << 3) | (1 << 4));
        assert_eq!(g.poll(600_000, 1 << 3), None);
        assert!(g.poll(700_000, 1 << 3).is_some(), "refreshed at half");
    }

    #[test]
    fn the_sources_are_paused_at_once_and_again_at_half_the_pause() {
        let mut g = GuardSfc::new(STALL);
        assert!(!g.due(0, 0), "nothing congested");
        assert!(g.due(0, 1 << 3));
        assert!(!g.due(400_000, 1 << 3), "still paused");
        assert!(
            g.due(400_000, (1 << 3) | (1 << 5)),
            "a new priority at once"
        );
        assert!(g.due(900_000, 1 << 3), "again at half the pause");
        let source = Source {
            priority: 3,
            mac: MacAddr([2, 0, 0, 0, 0, 1]),
            flow: Some(crate::wire::Ipv4Flow {
                src_ip: [10, 0, 0, 1],
                dst_ip: [10, 0, 0, 2],
                protocol: 17,
                src_port: 40000,
                dst_port: 48879,
            }),
        };
        let m = g.message(&source, 900_000, 70_000, 10_000_000);
        assert_eq!(m.priority, 3);
        assert_eq!(
            m.scope,
            SfcScope::Class,
            "the stalled worker serves no flow of it"
        );
        assert_eq!(m.pause_ns, 4 * STALL);
        assert_eq!(
            (m.queue_bytes, m.drain_bps, m.sent_ns),
            (70_000, 0, 900_000)
        );
        assert_eq!((m.src_mac, m.flow), (source.mac, source.flow));
        let next = g.message(&source, 900_000, 70_000, 600_000);
        assert_eq!(next.seq, m.seq.wrapping_add(1));
        assert_eq!(next.pause_ns, 600_000, "at most [sfc] max_pause");
    }

    #[test]
    fn congestion_counts_what_arrived_since_the_workers_accounted() {
        let mut xoff = [None; PRIORITIES];
        xoff[3] = Some(64 * 1024);
        xoff[5] = Some(64 * 1024);
        let mut occupancy = [0; PRIORITIES];
        occupancy[3] = 40 * 1024;
        occupancy[5] = 40 * 1024;
        let accounted = [1_000_000; PRIORITIES];
        let mut live = accounted;
        live[3] += 30 * 1024;
        live[0] += 1 << 30; // a lossy flood pauses nothing
        assert_eq!(
            congested(&waiting(&occupancy, &live, &accounted), &xoff),
            1 << 3
        );
        // A worker that accounted between the reads leaves live behind: no underflow.
        assert_eq!(congested(&waiting(&occupancy, &accounted, &live), &xoff), 0);
    }
}
