//! Ingress accounting from the XDP hook: what waits in a socket's RX ring, per priority,
//! read without a syscall.
//!
//! A switch charges a frame to its (ingress port, priority) the moment it arrives. The
//! earliest point software has is the XDP program (`bpf/lossless.bpf.c`): for every frame it
//! steers it adds the frame's bytes to a per-(RX queue, priority) counter and the frame to a
//! per-queue frame counter, in the mmapable array map `ingress`, and writes the counters'
//! values *after* this frame into the frame's metadata area (its stamps).
//!
//! Why the backlog this module computes is exact, without any lock or syscall:
//! - the counters only grow, and only the program writes them;
//! - a frame's frames stamp tells the worker that every frame steered to this queue before
//!   it has left the ring: taken by the worker, or dropped by the kernel (a fill ring with no
//!   buffer). So `steered frames - stamp of the last frame taken` is what still waits, and a
//!   kernel drop never leaves a phantom frame behind: the next frame taken jumps past it;
//! - per priority the same holds with the bytes stamp of the last frame *of that priority*.
//!   A dropped frame of a priority that sends nothing after it would stay counted, so when
//!   the ring is seen empty of frames (frames stamp = steered frames) every priority's bytes
//!   are taken as seen. Reading the bytes before the frames counter (the program adds bytes
//!   first) makes that err only towards a frame in flight between the two adds, which its own
//!   stamp then covers: the error is one frame for microseconds, never a drift.
//!
//! One case the stamps cannot resolve: frames the kernel dropped after the last frame taken,
//! when nothing arrives after them (typically because this very backlog paused the source).
//! So when the worker finds its ring empty it notes the steered totals and the time; finding
//! it empty again at least [`SETTLE_NS`] later, every frame counted in that note has had the
//! time to reach the ring and is gone from it: taken, or dropped by the kernel. The note then
//! counts as seen. Without it the phantom backlog would hold XOFF for ever.
//!
//! The worker also writes the frames stamp of the last frame it took into the map, so the
//! program sees the ring's depth and can drop lossy frames once it is deep (counted per
//! priority in `lossy_drops`) before they take the buffers the lossless priorities need.
//! And it counts its receive turns into the map (`turns`), from which the program rings the
//! stall guard's doorbell when a worker stops taking turns while frames keep arriving
//! (`bell_*`, written by the program; `bell_ns` by the guard; [`super::stall_guard`]).
//!
//! A frame longer than the port's maximum (never more than a UMEM frame holds) the program
//! drops and counts per priority in `oversize`, instead of redirecting it for the kernel to
//! drop at the socket, where only a per-socket `rx_dropped` would show it.

use std::{
    os::fd::{AsRawFd, BorrowedFd},
    sync::{
        atomic::{AtomicU64, Ordering::Relaxed},
        Arc,
    },
};

use crate::fc::PRIORITIES;

/// RX queues the map has an entry for (the XSKMAP's size).
pub const MAX_QUEUES: usize = 64;

/// How long a frame the XDP program counted may take to reach the RX ring (one NAPI poll):
/// a note of the steered totals older than this, with the ring found empty, is all taken or
/// dropped.
pub const SETTLE_NS: u64 = 1_000_000;

/// One RX queue's counters; mirrors `struct ingress_queue` in the XDP program (320 bytes).
#[repr(C)]
#[derive(Debug, Default)]
pub struct IngressQueue {
    /// Bytes steered per priority, ever (written by the program).
    bytes: [AtomicU64; PRIORITIES],
    /// Frames steered, ever (written by the program).
    frames: AtomicU64,
    /// The stall guard's doorbell (written by the program): `turns` as it last saw them
    /// move (or the queue empty), when, and `frames` then; when the bell last rang.
    bell_turns: AtomicU64,
    bell_since: AtomicU64,
    bell_frames: AtomicU64,
    bell_rung: AtomicU64,
    _reserved1: [u64; 3],
    /// Lossy frames the program dropped because the backlog was deep, per priority.
    lossy_drops: [AtomicU64; PRIORITIES],
    /// Frames stamp of the last frame the worker took (written by the worker).
    seen_frames: AtomicU64,
    /// The worker's receive turns on this queue (written by the worker).
    turns: AtomicU64,
    /// The doorbell rings after this long without a turn while frames wait, ns; 0: never
    /// (written by the stall guard).
    bell_ns: AtomicU64,
    /// The queue's fill ring at the worker's last accounting (written by the worker): the
    /// buffers left in it for the kernel, `frames` and the sum of `bytes` then, how many it
    /// keeps there (0: no fill ring), and the frame bytes one buffer takes (0: a frame takes
    /// one buffer; else a multi-buffer socket's).
    fill_free: AtomicU64,
    fill_frames: AtomicU64,
    fill_bytes: AtomicU64,
    fill_target: AtomicU64,
    fill_chunk: AtomicU64,
    /// Frames over the port's maximum frame the program dropped, per priority.
    oversize: [AtomicU64; PRIORITIES],
}

const _: () = assert!(std::mem::size_of::<IngressQueue>() == 320);

impl IngressQueue {
    /// Frames the program steered to this queue, ever.
    #[inline]
    pub fn steered_frames(&self) -> u64 {
        self.frames.load(Relaxed)
    }

    /// Frames stamp of the last frame the worker took, as it last published it.
    #[inline]
    pub fn taken_frames(&self) -> u64 {
        self.seen_frames.load(Relaxed)
    }

    /// Bytes of priority `prio` the program steered to this queue, ever.
    #[inline]
    pub fn steered_bytes(&self, prio: usize) -> u64 {
        self.bytes[prio].load(Relaxed)
    }

    /// The worker's receive turns on this queue, as it last published them.
    pub fn receive_turns(&self) -> u64 {
        self.turns.load(Relaxed)
    }

    /// Since when, by the program's doorbell, the worker has made no receive turn on this
    /// queue with frames waiting, and the frames steered by then: the program notes the time
    /// at each frame that finds the turns moved (or the queue empty before it), so if the
    /// turns it noted are still the worker's, none came since.
    pub fn quiet(&self) -> Option<(u64, u64)> {
        let turns = self.turns.load(Relaxed);
        let (since, frames) = (
            self.bell_since.load(Relaxed),
            self.bell_frames.load(Relaxed),
        );
        (frames > 0 && self.bell_turns.load(Relaxed) == turns).then_some((since, frames))
    }

    /// Whether the kernel has fewer than half the buffers the worker keeps in this queue's
    /// fill ring left to receive into ([`fill_short`]), now: what was left at the worker's
    /// last accounting, less the buffers of what the program steered since (frames the kernel
    /// dropped for want of a buffer count too, so an empty ring stays short). `false` without
    /// a fill ring.
    pub fn fill_short_now(&self) -> bool {
        self.fill_now()
            .is_some_and(|(free, target)| fill_short(free, target))
    }

    /// The buffers left in this queue's fill ring now, as [`Self::fill_short_now`] counts
    /// them, and how many the worker keeps there; `None` without a fill ring (or before the
    /// worker first accounted it).
    pub fn fill_now(&self) -> Option<(u64, u64)> {
        let target = self.fill_target.load(Relaxed);
        let frames = self
            .steered_frames()
            .saturating_sub(self.fill_frames.load(Relaxed));
        let bytes = (self.bytes.iter().map(|b| b.load(Relaxed)).sum::<u64>())
            .saturating_sub(self.fill_bytes.load(Relaxed));
        let used = buffers(frames, bytes, self.fill_chunk.load(Relaxed));
        let free = self.fill_free.load(Relaxed).saturating_sub(used);
        (target > 0).then_some((free, target))
    }

    /// Has the program ring the doorbell when frames arrive after `ns` without a receive turn
    /// while frames waited (0: never).
    pub fn set_bell_ns(&self, ns: u64) {
        if self.bell_ns.load(Relaxed) != ns {
            self.bell_ns.store(ns, Relaxed);
        }
    }
}

/// Where the counters live: the program's map, mapped into this process, or plain memory
/// for tests that play the program's part.
enum Backing {
    Mmap {
        ptr: *mut libc::c_void,
        len: usize,
    },
    /// Owns the memory `queues` points into.
    Heap(#[allow(dead_code)] Box<[IngressQueue]>),
}

/// The `ingress` map of one interface's program.
pub struct IngressMap {
    queues: *const IngressQueue,
    backing: Backing,
}

// SAFETY: the memory is only accessed through atomics (the kernel writes it concurrently
// anyway); the mapping lives as long as the value.
unsafe impl Send for IngressMap {}
// SAFETY: as above.
unsafe impl Sync for IngressMap {}

impl IngressMap {
    /// Maps the array map behind `fd` (created with `BPF_F_MMAPABLE`, [`MAX_QUEUES`] entries
    /// of [`IngressQueue`]).
    pub fn map(fd: BorrowedFd<'_>) -> std::io::Result<Self> {
        let len = MAX_QUEUES * std::mem::size_of::<IngressQueue>();
        // SAFETY: a shared read-write mapping of a BPF array map; the kernel checks the size
        // and flags and keeps the map alive while it is mapped.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(IngressMap {
            queues: ptr as *const IngressQueue,
            backing: Backing::Mmap { ptr, len },
        })
    }

    /// Counters in plain memory, for tests that play the XDP program's part.
    pub fn heap() -> Self {
        let queues: Box<[IngressQueue]> = (0..MAX_QUEUES).map(|_| Default::default()).collect();
        IngressMap {
            queues: queues.as_ptr(),
            backing: Backing::Heap(queues),
        }
    }

    /// The counters of RX queue `q`, if the map has an entry for it.
    pub fn queue(&self, q: u32) -> Option<&IngressQueue> {
        // SAFETY: the region holds MAX_QUEUES entries and outlives `&self`.
        ((q as usize) < MAX_QUEUES).then(|| unsafe { &*self.queues.add(q as usize) })
    }

    /// Plays the XDP program dropping a frame of priority `prio` on queue `q` for being over
    /// the port's maximum frame (tests).
    pub fn drop_oversize(&self, q: u32, prio: usize) {
        let e = self.queue(q).expect("queue within the map");
        e.oversize[prio].fetch_add(1, Relaxed);
    }

    /// Plays the XDP program for one frame of `len` bytes and priority `prio` steered to queue
    /// `q` (tests); returns the frame's stamps.
    pub fn steer(&self, q: u32, prio: usize, len: u64) -> Stamps {
        let e = self.queue(q).expect("queue within the map");
        let bytes = e.bytes[prio].fetch_add(len, Relaxed) + len;
        let frames = e.frames.fetch_add(1, Relaxed) + 1;
        Stamps {
            frames,
            prio,
            bytes: bytes & STAMP_BYTES_MASK,
        }
    }
}

impl Drop for IngressMap {
    fn drop(&mut self) {
        if let Backing::Mmap { ptr, len } = self.backing {
            // SAFETY: `ptr`/`len` are the mapping made in `map`, unmapped once.
            unsafe { libc::munmap(ptr, len) };
        }
    }
}

const STAMP_VALID: u64 = 1 << 63;
const STAMP_PRIO_SHIFT: u32 = 60;
const STAMP_BYTES_MASK: u64 = (1 << STAMP_PRIO_SHIFT) - 1;

/// The ingress stamps the XDP program wrote in front of one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamps {
    /// The queue's steered-frames counter after this frame.
    pub frames: u64,
    /// The frame's priority.
    pub prio: usize,
    /// The priority's steered-bytes counter after this frame.
    pub bytes: u64,
}

impl Stamps {
    /// Decodes the two metadata words (frames, then valid/priority/bytes); `None` when the
    /// program wrote none (no map entry for the queue, or no metadata area).
    pub fn decode(words: [u64; 2]) -> Option<Self> {
        let [frames, w] = words;
        (w & STAMP_VALID != 0).then_some(Stamps {
            frames,
            prio: ((w >> STAMP_PRIO_SHIFT) & 7) as usize,
            bytes: w & STAMP_BYTES_MASK,
        })
    }

    /// The two metadata words the program writes for these stamps.
    pub fn encode(self) -> [u64; 2] {
        [
            self.frames,
            STAMP_VALID
                | ((self.prio as u64 & 7) << STAMP_PRIO_SHIFT)
                | (self.bytes & STAMP_BYTES_MASK),
        ]
    }
}

/// What waits for a worker on one port's RX side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxBacklog {
    /// Bytes steered to the socket and not yet taken, per priority.
    pub bytes: [u64; PRIORITIES],
    /// Frames in the same state.
    pub frames: u64,
    /// Buffers the kernel still has to receive into (fill ring), where that is bounded.
    pub fill_free: Option<u64>,
    /// Buffers the worker keeps handed to the kernel when it keeps up.
    pub fill_target: u64,
    /// Bytes steered to the socket per priority, ever: the program's totals (arrivals, for
    /// the overshoot after XOFF, and for the stall guard to see what arrived since).
    pub arrived: [u64; PRIORITIES],
}

/// A socket's receive buffers as its port holds them.
#[derive(Debug, Clone, Copy)]
pub struct FillRing {
    /// Buffers handed to the kernel: in the fill ring, or holding a frame in the RX ring.
    pub in_fill: u64,
    /// Buffers kept in the fill ring.
    pub target: u64,
    /// Frame bytes one buffer takes (0: a frame takes one buffer; [`buffers`]).
    pub chunk: u64,
}

/// The receive buffers at most that `frames` frames of `bytes` in all take, `chunk` frame
/// bytes to a buffer (0: one buffer a frame, a socket without multi-buffer frames). A frame
/// of `len` bytes takes `ceil(len / chunk)`, at most `len / chunk + 1`: exact where every
/// frame fits one buffer, an upper bound where the frames' sizes are not known one by one.
pub fn buffers(frames: u64, bytes: u64, chunk: u64) -> u64 {
    frames + bytes.checked_div(chunk).unwrap_or(0)
}

/// Whether `free` buffers left for the kernel to receive into are short of a fill ring kept
/// at `target`: fewer than half (the onset of [`FillWatch`]'s starvation, which the stall
/// guard also applies to a stopped worker's queue).
pub fn fill_short(free: u64, target: u64) -> bool {
    free * 2 < target
}

/// Whether a socket's fill ring is short of buffers: fewer than half its target left for the
/// kernel to receive into, until three quarters are back (hysteresis). Short is congestion:
/// the receiver pauses upstream before the kernel has to drop, and the half still there is
/// the headroom, in buffers, for what arrives until the pause takes effect.
#[derive(Debug, Clone, Copy, Default)]
pub struct FillWatch {
    starved: bool,
}

impl FillWatch {
    /// Looks at `b`; returns the new state when it changed.
    pub fn update(&mut self, b: &RxBacklog) -> Option<bool> {
        let free = b.fill_free?;
        let starved = if self.starved {
            free * 4 < b.fill_target * 3
        } else {
            fill_short(free, b.fill_target)
        };
        (starved != self.starved).then(|| {
            self.starved = starved;
            starved
        })
    }

    /// The fill ring is short of buffers now.
    pub fn starved(&self) -> bool {
        self.starved
    }
}

/// The worker's side of one RX queue's accounting: the stamps of what it has taken.
pub struct IngressTracker {
    map: Arc<IngressMap>,
    queue: u32,
    seen_bytes: [u64; PRIORITIES],
    seen_frames: u64,
    /// Steered totals (frames, bytes) noted when the ring was found empty, and when.
    empty_note: Option<(u64, [u64; PRIORITIES], u64)>,
    /// Receive turns on this queue (published for the doorbell).
    turns: u64,
}

impl IngressTracker {
    /// Tracks RX queue `queue` of `map`; `None` if the map has no entry for it.
    pub fn new(map: Arc<IngressMap>, queue: u32) -> Option<Self> {
        let e = map.queue(queue)?;
        // Whatever was steered before this worker started is not its backlog.
        let seen_bytes = std::array::from_fn(|p| e.bytes[p].load(Relaxed));
        let seen_frames = e.frames.load(Relaxed);
        e.seen_frames.store(seen_frames, Relaxed);
        let turns = e.turns.load(Relaxed);
        Some(IngressTracker {
            map,
            queue,
            seen_bytes,
            seen_frames,
            empty_note: None,
            turns,
        })
    }

    /// The worker found the ring empty at `now` (a receive returned fewer frames than asked
    /// for): frames noted at an earlier empty ring, at least [`SETTLE_NS`] ago, are gone.
    pub fn on_ring_empty(&mut self, now: u64) {
        match self.empty_note {
            Some((_, _, at)) if now.saturating_sub(at) < SETTLE_NS => {}
            note => {
                if let Some((frames, bytes, _)) = note {
                    self.seen_frames = self.seen_frames.max(frames);
                    for (seen, noted) in self.seen_bytes.iter_mut().zip(bytes) {
                        *seen = (*seen).max(noted);
                    }
                    self.publish();
                }
                let e = self.entry();
                let bytes = std::array::from_fn(|p| e.bytes[p].load(Relaxed));
                self.empty_note = Some((e.frames.load(Relaxed), bytes, now));
            }
        }
    }

    fn entry(&self) -> &IngressQueue {
        self.map.queue(self.queue).expect("checked at creation")
    }

    /// The worker took a frame with these stamps from the ring.
    #[inline]
    pub fn on_taken(&mut self, s: Stamps) {
        // Frames of several CPUs may land out of stamp order (generic XDP): keep the highest.
        self.seen_frames = self.seen_frames.max(s.frames);
        self.seen_bytes[s.prio] = self.seen_bytes[s.prio].max(s.bytes);
    }

    /// A receive turn on this queue begins (before the ring is read): the program's doorbell
    /// sees the worker move.
    #[inline]
    pub fn turn(&mut self) {
        self.turns = self.turns.wrapping_add(1);
        self.entry().turns.store(self.turns, Relaxed);
    }

    /// Tells the program how far the worker got (after each batch).
    #[inline]
    pub fn publish(&self) {
        self.entry().seen_frames.store(self.seen_frames, Relaxed);
    }

    /// What waits in the ring (see the module doc) and, for a socket with a fill ring, what
    /// is left in it ([`buffers`]). Tells the stall guard the fill ring's state as well: a
    /// stopped worker's may run short before any threshold is reached.
    pub fn backlog(&mut self, fill: Option<FillRing>) -> RxBacklog {
        let e = self.map.queue(self.queue).expect("checked at creation");
        let steered: [u64; PRIORITIES] = std::array::from_fn(|p| e.bytes[p].load(Relaxed));
        let steered_frames = e.frames.load(Relaxed);
        let frames = steered_frames.saturating_sub(self.seen_frames);
        if frames == 0 {
            // Nothing waits: frames of a priority the kernel dropped are not backlog.
            self.seen_bytes = steered;
        }
        let bytes: [u64; PRIORITIES] =
            std::array::from_fn(|p| steered[p].saturating_sub(self.seen_bytes[p]));
        let fill_free = fill.map(|f| {
            let free = f
                .in_fill
                .saturating_sub(buffers(frames, bytes.iter().sum(), f.chunk));
            e.fill_free.store(free, Relaxed);
            e.fill_frames.store(steered_frames, Relaxed);
            e.fill_bytes.store(steered.iter().sum(), Relaxed);
            e.fill_target.store(f.target, Relaxed);
            e.fill_chunk.store(f.chunk, Relaxed);
            free
        });
        RxBacklog {
            bytes,
            frames,
            fill_free,
            fill_target: fill.map_or(0, |f| f.target),
            arrived: steered,
        }
    }

    /// Lossy frames the program dropped on this queue because the backlog was deep.
    pub fn lossy_drops(&self) -> [u64; PRIORITIES] {
        let e = self.entry();
        std::array::from_fn(|p| e.lossy_drops[p].load(Relaxed))
    }

    /// Frames over the port's maximum the program dropped on this queue, per priority.
    pub fn oversize_drops(&self) -> [u64; PRIORITIES] {
        let e = self.entry();
        std::array::from_fn(|p| e.oversize[p].load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker() -> (Arc<IngressMap>, IngressTracker) {
        let map = Arc::new(IngressMap::heap());
        // Traffic before the worker started is not its backlog.
        map.steer(3, 0, 100);
        let t = IngressTracker::new(map.clone(), 3).unwrap();
        (map, t)
    }

    #[test]
    fn backlog_is_what_was_steered_and_not_taken() {
        let (map, mut t) = tracker();
        let a = map.steer(3, 3, 1000);
        let b = map.steer(3, 5, 64);
        let c = map.steer(3, 3, 1000);
        let RxBacklog {
            bytes,
            frames,
            arrived,
            ..
        } = t.backlog(None);
        assert_eq!((bytes[3], bytes[5], frames), (2000, 64, 3));
        assert_eq!(
            (arrived[0], arrived[3]),
            (100, 2000),
            "the program's totals, from before the tracker too"
        );
        t.on_taken(a);
        t.on_taken(b);
        let RxBacklog { bytes, frames, .. } = t.backlog(None);
        assert_eq!((bytes[3], bytes[5], frames), (1000, 0, 1));
        t.on_taken(c);
        assert_eq!(t.backlog(None).bytes, [0; PRIORITIES]);
    }

    #[test]
    fn kernel_drops_leave_no_phantom_backlog() {
        let (map, mut t) = tracker();
        // The kernel drops the first two (no fill buffer); the worker takes the third.
        map.steer(3, 3, 1000);
        map.steer(3, 3, 1000);
        let c = map.steer(3, 3, 1000);
        t.on_taken(c);
        assert_eq!(t.backlog(None).bytes, [0; PRIORITIES]);
        // A dropped frame of a priority that sends nothing after it: cleared once the ring is
        // seen empty of frames.
        map.steer(3, 6, 500);
        let d = map.steer(3, 1, 100);
        t.on_taken(d);
        assert_eq!(t.backlog(None).bytes, [0; PRIORITIES]);
        assert_eq!(t.backlog(None).frames, 0);
    }

    #[test]
    fn frames_dropped_with_nothing_after_them_stop_counting_once_settled() {
        let (map, mut t) = tracker();
        let a = map.steer(3, 3, 1000);
        t.on_taken(a);
        // Two more steered, both dropped by the kernel; the source is paused, nothing follows.
        map.steer(3, 3, 1000);
        map.steer(3, 3, 1000);
        t.on_ring_empty(0);
        assert_eq!(t.backlog(None).frames, 2, "not settled yet");
        t.on_ring_empty(SETTLE_NS - 1);
        assert_eq!(t.backlog(None).frames, 2);
        // A frame steered after the note is not written off with it.
        map.steer(3, 5, 64);
        t.on_ring_empty(SETTLE_NS);
        let RxBacklog { bytes, frames, .. } = t.backlog(None);
        assert_eq!((bytes[3], bytes[5], frames), (0, 64, 1));
        t.on_ring_empty(2 * SETTLE_NS);
        assert_eq!(t.backlog(None).bytes, [0; PRIORITIES]);
        assert_eq!(t.backlog(None).frames, 0);
    }

    /// What the worker and the stall guard read of a fill ring: the buffers left at the
    /// worker's last accounting, less those of what was steered since (a kernel drop
    /// included), a multi-buffer socket's frames taking one per `chunk` bytes.
    #[test]
    fn the_guard_sees_a_stopped_workers_fill_ring_run_short() {
        // 100-byte frames take a buffer each; 9,000-byte frames six of 1,792 bytes.
        for (chunk, len, per) in [(0, 100, 1), (1792, 9000, 6)] {
            let (map, mut t) = tracker();
            let q = map.queue(3).unwrap();
            assert!(!q.fill_short_now(), "no fill ring published");
            let ring = FillRing {
                in_fill: 120,
                target: 120,
                chunk,
            };
            assert_eq!(t.backlog(Some(ring)).fill_free, Some(120));
            assert!(!q.fill_short_now());
            for _ in 0..60 / per {
                map.steer(3, 2, len);
            }
            assert!(!q.fill_short_now(), "half the buffers left ({chunk})");
            map.steer(3, 2, len);
            assert!(q.fill_short_now(), "fewer than half left ({chunk})");
            // The worker's own view, from the same rule.
            let b = t.backlog(Some(ring));
            assert_eq!(b.fill_free, Some(120 - (60 / per + 1) * per), "{chunk}");
            assert!(q.fill_short_now());
            // The worker back: it took them all and refilled.
            for _ in 0..=60 / per {
                t.on_taken(map.steer(3, 2, len));
            }
            t.publish();
            assert_eq!(t.backlog(Some(ring)).fill_free, Some(120), "{chunk}");
            assert!(!q.fill_short_now());
        }
    }

    #[test]
    fn the_program_sees_how_far_the_worker_got() {
        let (map, mut t) = tracker();
        let a = map.steer(3, 2, 100);
        map.steer(3, 2, 100);
        t.on_taken(a);
        t.publish();
        let e = map.queue(3).unwrap();
        assert_eq!(
            e.frames.load(Relaxed) - e.seen_frames.load(Relaxed),
            1,
            "one frame still in the ring"
        );
        assert_eq!(t.lossy_drops(), [0; PRIORITIES]);
        map.drop_oversize(3, 6);
        map.drop_oversize(2, 6);
        let mut want = [0; PRIORITIES];
        want[6] = 1;
        assert_eq!(t.oversize_drops(), want, "this queue's only");
    }

    #[test]
    fn fill_watch_has_hysteresis() {
        let mut w = FillWatch::default();
        let b = |free| RxBacklog {
            fill_free: Some(free),
            fill_target: 4096,
            ..RxBacklog::default()
        };
        assert_eq!(w.update(&b(2048)), None);
        assert_eq!(w.update(&b(2047)), Some(true));
        assert_eq!(w.update(&b(3071)), None, "still short below 3/4");
        assert_eq!(w.update(&b(3072)), Some(false));
        assert!(!w.starved());
        assert_eq!(
            w.update(&RxBacklog::default()),
            None,
            "unbounded: never short"
        );
    }

    #[test]
    fn stamps_decode_and_an_unwritten_area_is_none() {
        assert_eq!(Stamps::decode([0, 0]), None);
        let s = Stamps::decode([7, STAMP_VALID | (5 << STAMP_PRIO_SHIFT) | 4242]).unwrap();
        assert_eq!((s.frames, s.prio, s.bytes), (7, 5, 4242));
        assert!(IngressMap::heap().queue(MAX_QUEUES as u32).is_none());
    }
}
