//! How deep a port with lossless priorities keeps its fill ring: deep, unless what can wait in
//! its RX ring is bounded, in frames, well inside a lean ring.
//!
//! **Why lean at all.** The kernel takes fill buffers in ring order, so every buffer in the
//! ring is in circulation and each frame meets a cold per-buffer struct and a cold buffer
//! ([`FillDepth`]). On the lab VM that cost is what kept `bench/forward`'s PFC rows under the
//! lossy row: the `xoff_time` row delivered 0.88-0.89x the lossy row with 8,192 buffers,
//! 0.89-0.90x with 4,096 and 0.94-0.96x with 2,048 (bench/RESULTS.md (14)).
//!
//! **Why deep is the default.** A frame holds a fill buffer from its arrival until the worker
//! takes it from the RX ring, so the ring's depth is the receiver's buffer, in frames, for
//! whatever waits there. A worker that keeps running bounds that backlog by XOFF in bytes; a
//! worker kept off its CPU bounds nothing, and with 2,048 buffers an SFC-only priority, which
//! no stall guard covered then, lost 4,687 frames to a worker lag of 8.4 ms (2,048 128-byte
//! frames last 2.9 ms at 700 kpps, 8,192 last 12). The guard now sends SFCMs for a stalled
//! worker too, but nothing measures what arrives before an SFC source reacts to one (PFC's
//! headroom does, below), so an SFC-only priority still keeps the ring deep.
//!
//! **When lean is safe.** When every lossless priority of the port is paused by PFC and the
//! stall guard runs with the headroom adaptive (the notice term counts), the RX backlog of
//! those priorities is bounded in bytes in both cases: while the worker runs by XOFF in force
//! plus what arrives until the source reacts (the observed overshoot), while it does not by
//! what arrives until the guard's XOFF (the notice term) and the source reacts. The headroom in
//! force holds both terms, so each PFC priority's XOFF + headroom in force bounds its backlog
//! in bytes; divided by the smallest average size of that priority's frames, in frames. The
//! ring goes lean when their sum is at most half a lean ring, so the fill watch
//! ([`super::ingress::FillWatch`], which pauses upstream at half) never has to, and the other
//! half is margin. The bound moves with the headroom in force, so the check runs every
//! gauge period: the ring deepens at once when the bound stops fitting (or the fill watch finds
//! the ring short, or a lossy flood fills it), and goes lean again only after it has fitted
//! for [`LEAN_AFTER_NS`].
//!
//! **Buffers, not frames.** On a socket that receives long frames into several buffers (a
//! jumbo port) a frame of the bound takes one buffer per chunk of it: the bound is counted in
//! buffers ([`super::ingress::buffers`], as the fill watch counts them), or a ring that holds
//! 341 frames of 9,000 bytes went lean for a bound of 1,024.
//!
//! **The frame size** of a priority is the average of its data frames the worker took over
//! each stretch of at least [`MIN_SAMPLE`] of them, the smallest ever seen on the port: a
//! priority that carried small frames once may again. A priority not yet sampled counts at
//! the smallest Ethernet frame ([`MIN_FRAME_LEN`]), so a port with an idle PFC priority stays
//! deep unless even minimum-size frames would fit. A sudden burst of frames smaller than any
//! seen is what this does not see coming; the fill watch pauses upstream at half the ring, as
//! on a deep ring, and the next period deepens it.
//!
//! Only a port's leader worker holds the headroom in force, so on a port with several RX
//! queues the other workers' rings stay deep.
//!
//! Sans-I/O: time and the totals come from the caller, once per gauge period.

use super::{ingress::buffers, port::FillDepth};
use crate::{fc::PRIORITIES, wire::MIN_FRAME_LEN};

/// How long the bound must fit before the ring goes lean (ns): many gauge periods, so that a
/// ring the headroom's evidence keeps pushing past the bound does not flap between depths,
/// and short against a run (a lean ring is what a port with lossless priorities forwards
/// fastest with).
pub const LEAN_AFTER_NS: u64 = 250_000_000;
/// Frames a frame-size sample takes at least.
pub const MIN_SAMPLE: u64 = 64;

/// The fill depth of one port with lossless priorities.
#[derive(Debug, Clone)]
pub struct FillSizer {
    /// Buffers a lean ring holds on this port.
    lean_buffers: u64,
    /// Frame bytes a receive buffer takes (0: a frame takes one).
    chunk: u64,
    /// Per priority, the smallest average frame size seen, bytes (`None`: no sample yet).
    smallest_frame: [Option<u64>; PRIORITIES],
    /// Per priority, the data frames and bytes taken when the current sample began.
    sample_start: [Option<(u64, u64)>; PRIORITIES],
    /// Since when the bound has fitted a lean ring.
    fits_since: Option<u64>,
    depth: FillDepth,
}

impl FillSizer {
    /// A deep ring, on a port whose lean ring holds `lean_buffers`, each taking `chunk` bytes
    /// of a frame (0: a frame takes one, [`super::port::Port::rx_chunk`]).
    pub fn new(lean_buffers: u64, chunk: u64) -> Self {
        FillSizer {
            lean_buffers,
            chunk,
            smallest_frame: [None; PRIORITIES],
            sample_start: [None; PRIORITIES],
            fits_since: None,
            depth: FillDepth::Deep,
        }
    }

    /// The depth in force.
    pub fn depth(&self) -> FillDepth {
        self.depth
    }

    /// Deep again, until the bound has fitted for [`LEAN_AFTER_NS`] under settings that
    /// changed (a reload); the frame sizes seen stay.
    pub fn restart(&mut self) {
        self.depth = FillDepth::Deep;
        self.fits_since = None;
    }

    /// Once per gauge period at `now`: `taken` is the data frames and bytes per priority the
    /// worker has taken from the port so far; `guarded` the bytes each PFC priority of the
    /// port may hold (XOFF + headroom in force; 0 for the others) if every lossless priority
    /// of the port is PFC and the stall guard bounds what arrives while the worker is away,
    /// else `None`; `starved` whether the fill watch finds the ring short. Returns the new
    /// depth when it changed.
    pub fn update(
        &mut self,
        now: u64,
        taken: &[(u64, u64); PRIORITIES],
        guarded: Option<&[u64; PRIORITIES]>,
        starved: bool,
    ) -> Option<FillDepth> {
        for (p, &(frames, bytes)) in taken.iter().enumerate() {
            match self.sample_start[p] {
                Some((f0, b0)) if frames >= f0 + MIN_SAMPLE => {
                    let size = bytes.saturating_sub(b0) / (frames - f0);
                    let smallest = self.smallest_frame[p].map_or(size, |s| s.min(size));
                    self.smallest_frame[p] = Some(smallest);
                    self.sample_start[p] = Some((frames, bytes));
                }
                Some(_) => {}
                None => self.sample_start[p] = Some((frames, bytes)),
            }
        }
        let fits = !starved
            && guarded.is_some_and(|buffer| {
                let needed = (0..PRIORITIES).map(|p| {
                    let size = self.smallest_frame[p]
                        .unwrap_or(MIN_FRAME_LEN as u64)
                        .max(1);
                    buffers(buffer[p].div_ceil(size), buffer[p], self.chunk)
                });
                needed.sum::<u64>() <= self.lean_buffers / 2
            });
        let depth = if !fits {
            self.fits_since = None;
            FillDepth::Deep
        } else if now.saturating_sub(*self.fits_since.get_or_insert(now)) >= LEAN_AFTER_NS {
            FillDepth::Lean
        } else {
            self.depth
        };
        (depth != self.depth).then(|| {
            self.depth = depth;
            depth
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    /// Gauge periods (of 1 ms) the bound must fit for.
    const WAIT: u64 = LEAN_AFTER_NS / MS;

    /// A sizer fed period by period.
    struct Feed {
        s: FillSizer,
        taken: [(u64, u64); PRIORITIES],
        now: u64,
    }

    /// Priority 3 may hold `bytes` (the others nothing).
    fn prio3(bytes: u64) -> Option<[u64; PRIORITIES]> {
        let mut b = [0; PRIORITIES];
        b[3] = bytes;
        Some(b)
    }

    impl Feed {
        fn new() -> Self {
            Feed {
                s: FillSizer::new(2048, 0),
                taken: [(0, 0); PRIORITIES],
                now: 0,
            }
        }

        /// `n` periods of 1 ms, each taking `frames` frames of `size` bytes of priority 3
        /// (and 10 of 1,500 bytes of priority 0), with `guarded` and `starved`; the last
        /// change of depth.
        fn periods(
            &mut self,
            n: u64,
            (frames, size): (u64, u64),
            guarded: Option<[u64; PRIORITIES]>,
            starved: bool,
        ) -> Option<FillDepth> {
            let mut last = None;
            for _ in 0..n {
                let t = &mut self.taken;
                t[3] = (t[3].0 + frames, t[3].1 + frames * size);
                t[0] = (t[0].0 + 10, t[0].1 + 10 * 1500);
                let change = self.s.update(self.now, t, guarded.as_ref(), starved);
                last = change.or(last);
                self.now += MS;
            }
            last
        }
    }

    /// 700 frames of 128 bytes a millisecond.
    const SMALL: (u64, u64) = (700, 128);

    #[test]
    fn a_bound_that_fits_half_a_lean_ring_makes_it_lean_once_it_has_fitted_a_while() {
        let mut f = Feed::new();
        // 100 kB of 128-byte frames: 782 frames, within 1,024. The first period only starts
        // the first frame-size sample.
        assert_eq!(f.periods(WAIT, SMALL, prio3(100_000), false), None);
        assert_eq!(f.s.depth(), FillDepth::Deep, "not yet LEAN_AFTER_NS");
        assert_eq!(
            f.periods(2, SMALL, prio3(100_000), false),
            Some(FillDepth::Lean)
        );
    }

    /// On a jumbo port a 9,000-byte frame takes six 1,792-byte buffers: 4 MiB of them is
    /// 466 frames but 2,806 buffers, too many for half a lean ring (before: lean).
    #[test]
    fn a_jumbo_ports_bound_is_counted_in_buffers() {
        let mut f = Feed::new();
        f.s = FillSizer::new(2048, 1792);
        assert_eq!(
            f.periods(3 * WAIT, (100, 9000), prio3(4 << 20), false),
            None
        );
        assert_eq!(f.s.depth(), FillDepth::Deep);
        // The same bound in frames that each fit a buffer.
        f.s = FillSizer::new(2048, 0);
        f.periods(3 * WAIT, (100, 9000), prio3(4 << 20), false);
        assert_eq!(f.s.depth(), FillDepth::Lean);
    }

    #[test]
    fn a_bound_that_does_not_fit_keeps_it_deep() {
        let mut f = Feed::new();
        // 2 MiB of 128-byte frames: 16,384 frames.
        assert_eq!(f.periods(3 * WAIT, SMALL, prio3(2 << 20), false), None);
        // Without the guard (or with a lossless priority PFC does not cover), deep whatever
        // the bytes.
        assert_eq!(f.periods(3 * WAIT, SMALL, None, false), None);
        assert_eq!(f.s.depth(), FillDepth::Deep);
    }

    #[test]
    fn it_deepens_at_once_and_goes_lean_again_only_once_it_has_fitted_a_while() {
        let mut f = Feed::new();
        f.periods(WAIT + 2, SMALL, prio3(100_000), false);
        assert_eq!(f.s.depth(), FillDepth::Lean);
        // The fill watch finds the ring short: deep in the same period.
        assert_eq!(
            f.periods(1, SMALL, prio3(100_000), true),
            Some(FillDepth::Deep)
        );
        f.periods(WAIT + 1, SMALL, prio3(100_000), false);
        assert_eq!(f.s.depth(), FillDepth::Lean);
        // The headroom in force grows past half the ring (1,563 frames): deep too.
        assert_eq!(
            f.periods(1, SMALL, prio3(200_000), false),
            Some(FillDepth::Deep)
        );
        assert_eq!(
            f.periods(WAIT, SMALL, prio3(100_000), false),
            None,
            "not yet again"
        );
        assert_eq!(
            f.periods(1, SMALL, prio3(100_000), false),
            Some(FillDepth::Lean)
        );
        // A reload: deep until the bound has fitted a while under the new settings.
        f.s.restart();
        assert_eq!(f.s.depth(), FillDepth::Deep);
        assert_eq!(f.periods(WAIT, SMALL, prio3(100_000), false), None);
        assert_eq!(
            f.periods(1, SMALL, prio3(100_000), false),
            Some(FillDepth::Lean)
        );
    }

    #[test]
    fn each_priority_counts_at_its_own_smallest_frames() {
        let mut f = Feed::new();
        // Fewer than MIN_SAMPLE frames a period still add up to samples; priority 0's large
        // frames do not make priority 3's count less.
        f.periods(WAIT + 10, (10, 1000), prio3(500_000), false);
        assert_eq!(
            f.s.depth(),
            FillDepth::Lean,
            "500 kB of 1,000-byte frames: 500 frames"
        );
        // A stretch mostly of 64-byte frames (an average of 156 bytes: 3,206 frames), and it
        // stays so for larger ones after.
        f.periods(1, (10 * MIN_SAMPLE, 64), prio3(500_000), false);
        assert_eq!(f.s.depth(), FillDepth::Deep);
        f.periods(3 * WAIT, (10, 1000), prio3(500_000), false);
        assert_eq!(f.s.depth(), FillDepth::Deep);
        // Priority 3 not sampled yet: its bytes count in 60-byte frames, 61 kB as 1,017 (it
        // fits), 62 kB as 1,034 (it does not).
        for (bytes, lean) in [(61_000, true), (62_000, false)] {
            let mut f = Feed::new();
            f.periods(3 * WAIT, (0, 0), prio3(bytes), false);
            assert_eq!(f.s.depth() == FillDepth::Lean, lean, "{bytes} B");
        }
    }
}
