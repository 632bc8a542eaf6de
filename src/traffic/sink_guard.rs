//! The sink's stall guard: PFC upstream for a sink that is not running.
//!
//! The sink pauses every priority upstream while its fill ring is short of buffers
//! ([`super::sink`]), but it does so from its own loop, so only while it runs. A sink at normal
//! priority beside CPU-bound work often does not: in `bench/forward`'s PFC rows (the generator
//! and the sink sharing one CPU) it lost 1,127-22,542 frames at its own fill ring in 6 rounds
//! of 7, with the daemon lossless and the sink's own PFC too late. This thread covers the sink
//! the way the daemon's stall guard covers a worker, with that guard's pieces
//! ([`crate::dataplane::stall_guard`]): it sleeps on the XDP program's doorbell, which rings
//! when frames keep arriving [`STALL_NS`] after the sink's last receive turn. While the sink
//! stays stalled it looks again when half of what is left to half the fill ring could have
//! arrived (at the rate of the stall so far, at most [`STALL_NS`] later), and once fewer than
//! half the fill ring's buffers are left (where the sink itself would pause,
//! [`crate::dataplane::ingress::FillWatch`]: what was left at the sink's last turn less the
//! buffers of what arrived since, [`crate::dataplane::ingress::IngressQueue::fill_now`]) it
//! pauses every priority upstream for 2 ms at the link's speed through its own AF_PACKET
//! socket, refreshed every millisecond while that lasts. It never sends XON itself: it cannot
//! tell that the sink is back. The sink, back, ends the pause ([`GuardPaused`]) unless it
//! pauses upstream itself. Waiting for the pause to run out instead held the upstream
//! port idle for 20 ms after each stall in the README's quick start, where the upstream port
//! counts the quanta at 1 Gbit/s and the sink at its default 10 Gbit/s. The half of the fill
//! ring still free is what arrives before the pause takes effect: 4,096 buffers are 13 ms of
//! 128-byte frames at 300 kpps.
//!
//! With SFC instead of PFC (`sink --sfc`) it sends, in place of each PFC frame, an SFC message
//! pausing the class of every source on the sink's roster ([`crate::dataplane::sfc_roster`],
//! the sources of the test frames it took) and of every one the doorbell named that the roster
//! lacks (the sink may not have taken any frame yet), for the same 2 ms, refreshed as often.
//!
//! It runs `SCHED_FIFO` where permitted, one below the sink's own priority when the sink is
//! real-time: woken only by the doorbell, it costs nothing while the sink keeps up.

use std::{
    io,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
        Arc,
    },
    thread::JoinHandle,
    time::Duration,
};

use libbpf_rs::MapHandle;

use crate::{
    dataplane::{
        af_packet::RawSender,
        clock::{now_ns, sleep_until},
        doorbell::{doorbell, heard, to_pause},
        ingress::{fill_short, IngressMap},
        port::iface_mac,
        sched,
        sfc_roster::SourceRoster,
        stall_guard::{
            send_pause, send_sfcm, GuardPause, GuardSfc, Look, StallWatch, Verdict, BELL_LOOK_NS,
        },
    },
    wire::{MacAddr, Sfcm},
};

/// How long the sink may make no receive turn, with frames waiting and arriving, before the
/// doorbell rings: ten times the 200 us it lets wake-ups gather when it only counts
/// ([`super::sink`]), so that neither its own naps nor the short waits for its CPU that a busy
/// host hands out ring it (at 500 us a normal-priority sink beside the generator rang it about
/// 1,000 times a second, 5-7 % of a CPU in the guard's wake-ups). Half a fill ring of 4,096
/// frames lasts 8 ms at the 500 kpps veth delivers here; a sink on a NIC at millions of frames
/// a second needs `--realtime` instead.
pub const STALL_NS: u64 = 2_000_000;

/// The guard's pauses last 4 × this at the link's speed and are refreshed every 2 × this
/// while the sink stays stalled and short of buffers: 2 ms, so that a sink back at work is not
/// held up for long by a pause it no longer needs.
const PAUSE_UNIT_NS: u64 = 500_000;

/// How a receiving host sends an SFC message `msg` over UDP to `port`, if at all: to the
/// offending frame's source address from the address that frame was sent to (the host's
/// own); at layer 2 when `port` is `None` or the message names no flow.
pub fn sfcm_udp(port: Option<u16>, msg: &Sfcm) -> Option<(u16, [u8; 4])> {
    port.zip(msg.flow.map(|f| f.dst_ip))
}

/// Whether the guard has paused upstream with PFC since the sink last looked: set by the guard
/// after each PFC frame it sends, taken by the sink at its next turn, which then ends the
/// pause unless it holds its upstream paused itself (module doc). One relaxed load per turn
/// while unset.
#[derive(Debug, Default)]
pub struct GuardPaused(AtomicBool);

impl GuardPaused {
    /// The guard paused upstream.
    pub fn set(&self) {
        self.0.store(true, Relaxed);
    }

    /// Whether the guard paused upstream since the last call (and no longer says so).
    #[inline]
    pub fn take(&self) -> bool {
        self.0.load(Relaxed) && self.0.swap(false, Relaxed)
    }
}

/// What the sink's guard watches and how it pauses.
pub struct SinkGuardSetup {
    /// The sink's interface (the PFC leaves on it).
    pub iface: String,
    /// Its XDP program's `ingress` map.
    pub ingress: Arc<IngressMap>,
    /// The RX queues the sink receives on: 0 up to this.
    pub queues: u32,
    /// Its XDP program's first doorbell.
    pub bell: MapHandle,
    /// Link speed the pause quanta count at.
    pub link_speed_bps: u64,
    /// `SCHED_FIFO` priority of the guard thread.
    pub priority: u8,
    /// With SFC instead of PFC: the roster of the sink's sources, whom it pauses.
    pub sfc: Option<Arc<SourceRoster>>,
    /// With SFC: over UDP to this port ([`sfcm_udp`]), else at layer 2.
    pub sfc_udp_port: Option<u16>,
    /// Where it says that it paused upstream with PFC, for the sink to end the pause.
    pub paused: Arc<GuardPaused>,
}

/// What the guard did: the stalls it paused upstream for, and the PFC frames or SFC messages
/// it sent.
#[derive(Debug, Default)]
struct Counters {
    stalls: AtomicU64,
    pfc_tx: AtomicU64,
    sfcm_tx: AtomicU64,
}

/// What the guard did, once stopped ([`SinkGuard::finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardCounts {
    /// Stalls it paused upstream for.
    pub stalls: u64,
    /// PFC frames it sent.
    pub pfc_tx: u64,
    /// SFC messages it sent (with SFC instead of PFC).
    pub sfcm_tx: u64,
}

/// The running guard thread; stopped (and joined) on drop.
pub struct SinkGuard {
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SinkGuard {
    /// Starts the guard for `setup`.
    pub fn spawn(setup: SinkGuardSetup) -> io::Result<Self> {
        let sender = RawSender::open(&setup.iface)?;
        let mac = iface_mac(&setup.iface).map_err(io::Error::other)?;
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (counters, stop) = (counters.clone(), stop.clone());
            std::thread::Builder::new()
                .name("lossless-sguard".into())
                .spawn(move || guard(&setup, &sender, mac, &stop, &counters))?
        };
        Ok(SinkGuard {
            counters,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the guard; returns what it did.
    pub fn finish(mut self) -> GuardCounts {
        self.halt();
        GuardCounts {
            stalls: self.counters.stalls.load(Relaxed),
            pfc_tx: self.counters.pfc_tx.load(Relaxed),
            sfcm_tx: self.counters.sfcm_tx.load(Relaxed),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        self.halt();
    }
}

fn guard(s: &SinkGuardSetup, sender: &RawSender, mac: MacAddr, stop: &AtomicBool, c: &Counters) {
    if let Err(e) = sched::enter_fifo_unmetered(s.priority) {
        tracing::warn!(error = %e, "sink stall guard runs SCHED_OTHER and may pause late");
    }
    // Each queue's accounting, its stall watch, and its previous look's time and steered
    // count (the arrival rate during a stall). The queues ring one doorbell.
    let mut queues: Vec<_> = (0..s.queues)
        .filter_map(|i| s.ingress.queue(i))
        .map(|q| (q, StallWatch::new(STALL_NS), (now_ns(), 0u64)))
        .collect();
    if queues.is_empty() {
        return;
    }
    // The sources the doorbell named (with SFC: the sink may not have taken any frame yet).
    let heard = heard(1);
    let Some(bell) = doorbell([Some(&s.bell)], &heard) else {
        tracing::warn!("no sink stall guard: its doorbell could not be set up");
        return;
    };
    for (q, _, _) in &queues {
        q.set_bell_ns(STALL_NS);
    }
    let mut pause = GuardPause::new(PAUSE_UNIT_NS, s.link_speed_bps);
    let mut sfc = GuardSfc::new(PAUSE_UNIT_NS);
    // Whether the guard paused upstream in the stall running (a stall counts once it did),
    // and whether a queue stalled at the last look (the sink's stall is one, however many of
    // its queues show it, and in whatever order).
    let (mut paused_this_stall, mut was_stalled) = (false, false);
    while !stop.load(Relaxed) {
        let now = now_ns();
        // While a queue stalls: whether one is short of buffers, and when to look again.
        let mut stalled: Option<(bool, u64)> = None;
        // Else: when a watch is next due.
        let mut due: Option<u64> = None;
        for (q, watch, last) in &mut queues {
            let look = Look {
                turns: q.receive_turns(),
                steered: q.steered_frames(),
                taken: q.taken_frames(),
                quiet: q.quiet(),
            };
            if watch.look(now, look) != Verdict::Running {
                // Short of buffers as the sink judges it (its fill watch), from the ring as it
                // last accounted it: fewer than half its buffers left.
                let (free, target) = q.fill_now().unwrap_or((0, 0));
                let short = fill_short(free, target);
                // Short: look again in time to refresh the pause (every two PAUSE_UNIT_NS). Not
                // yet: when half of what is left to half the ring could have arrived at the
                // rate since the last look, so that a stall of a few milliseconds costs a few
                // looks, not dozens.
                let wait = if short {
                    PAUSE_UNIT_NS
                } else {
                    let rate_per_ms = look.steered.saturating_sub(last.1) * 1_000_000
                        / now.saturating_sub(last.0).max(1);
                    let left = free.saturating_sub(target / 2);
                    (left * 1_000_000 / rate_per_ms.max(1) / 2).clamp(PAUSE_UNIT_NS / 8, STALL_NS)
                };
                stalled = Some(stalled.map_or((short, wait), |(sh, w)| (sh || short, w.min(wait))));
            } else if let Some(d) = watch.due() {
                due = Some(due.map_or(d, |e| e.min(d)));
            }
            *last = (now, look.steered);
        }
        if stalled.is_some() && !was_stalled {
            paused_this_stall = false;
        }
        was_stalled = stalled.is_some();
        if let Some((short, wait)) = stalled {
            let congested = if short { u8::MAX } else { 0 };
            let sent = match &s.sfc {
                None => pause.poll(now, congested).is_some_and(|m| {
                    let sent = send_pause(sender, mac, &m);
                    c.pfc_tx.fetch_add(u64::from(sent), Relaxed);
                    if sent {
                        s.paused.set();
                    }
                    sent
                }),
                Some(roster) if sfc.due(now, congested) => {
                    let mut sent = false;
                    let heard = &heard.borrow()[0].1;
                    for source in to_pause(std::iter::once(&**roster), heard) {
                        // Its own pause (2 ms) is the longest; what waits it counts in
                        // frames, not bytes, so the message says 0.
                        let msg = sfc.message(&source, now, 0, u64::MAX);
                        if send_sfcm(sender, mac, &msg, sfcm_udp(s.sfc_udp_port, &msg)) {
                            c.sfcm_tx.fetch_add(1, Relaxed);
                            sent = true;
                        }
                    }
                    sent
                }
                Some(_) => false,
            };
            if sent && !std::mem::replace(&mut paused_this_stall, true) {
                c.stalls.fetch_add(1, Relaxed);
            }
            sleep_until(now + wait);
            let _ = bell.consume();
        } else if let Some(due) = due {
            sleep_until(due.max(now + PAUSE_UNIT_NS / 8));
            let _ = bell.consume();
        } else {
            let _ = bell.poll(Duration::from_nanos(BELL_LOOK_NS));
        }
    }
    for (q, _, _) in &queues {
        q.set_bell_ns(0);
    }
}
