//! One direction of the cable, sans I/O: frames go in with their RX time, come out when the
//! delay has passed and the line rate allows, in order; the seeded rules drop, corrupt or
//! swap some on the way. Driven with injected time, so unit tests use simulated time.
//!
//! A lane owns the frames it holds (their tokens, see [`crate::dataplane::pool`]): a frame
//! it refuses is handed back with the verdict, a frame it lets leave is moved into the
//! caller's batch, and one the port did not take is moved back in ([`Lane::settle`]). So no
//! frame is both on the cable and released or sent.

use super::{
    delay_line::{DelayLine, Entry},
    report::{ClassCounts, LaneReport},
    rules::{stream_seed, Kind, Purpose, Rule, SplitMix64, KIND_NAMES},
    LaneSettings,
};
use crate::{
    dataplane::{pool::Frame, shaper::Shaper},
    traffic::{histogram::Histogram, line_rate_bps},
};

/// What became of a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The cable holds it now ([`Lane::ingress`] returns `Ok`).
    Queued,
    /// Dropped by the loss rule; handed back for the caller to release.
    Lost,
    /// Dropped because the FIFO was full; handed back for the caller to release.
    Overflow,
}

/// The times of a frame [`Lane::pop_ready`] let leave, kept until [`Lane::settle`] says
/// whether the port took it.
#[derive(Debug, Clone, Copy)]
struct Popped {
    rx_ns: u64,
    eligible_ns: u64,
    len: u32,
}

/// Counters of one direction.
#[derive(Debug, Clone, Default)]
struct Counters {
    rx_frames: u64,
    rx_bytes: u64,
    rx_by_class: [u64; KIND_NAMES.len()],
    tx_frames: u64,
    tx_bytes: u64,
    lost: u64,
    lost_by_class: [u64; KIND_NAMES.len()],
    overflow: u64,
    /// Of `overflow`, frames the frame cap refused with bytes to spare.
    frame_cap: u64,
    corrupted: u64,
    reordered: u64,
    flushed: u64,
    peak_bytes: u64,
    peak_frames: usize,
    first_tx_ns: u64,
    /// Length of the first frame sent: it starts the interval the rate is measured over.
    first_tx_len: u64,
    last_tx_ns: u64,
    delay_sum_ns: u128,
}

/// One direction of the cable.
pub struct Lane {
    settings: LaneSettings,
    limit_bytes: u64,
    line: DelayLine,
    shaper: Option<Shaper>,
    loss: Option<Rule>,
    corrupt: Option<Rule>,
    reorder: Option<Rule>,
    jitter: SplitMix64,
    /// A frame picked by the reorder rule, waiting to be queued behind the next frame.
    held: Option<Entry>,
    /// The frames of the last [`Lane::pop_ready`], in order (reused, never shrunk).
    popped: Vec<Popped>,
    last_eligible: u64,
    delay: Histogram,
    c: Counters,
}

impl Lane {
    /// Direction `dir` (0 = a→b, 1 = b→a) with `settings`, random streams derived from
    /// `seed`, its clock starting at `now`.
    pub fn new(settings: &LaneSettings, seed: u64, dir: usize, now: u64) -> Self {
        let rule = |spec: &Option<super::rules::RuleSpec>, p: Purpose| {
            spec.as_ref()
                .filter(|s| s.probability > 0.0)
                .map(|s| Rule::new(s, stream_seed(seed, dir, p)))
        };
        Lane {
            limit_bytes: settings.fifo_limit_bytes(),
            line: DelayLine::new(settings.fifo_frames()),
            shaper: settings.rate_bps.map(|r| {
                // Serialisation at line rate. Up to 250 µs of line rate may go out back to back: enough for the average
                // rate to survive a short stall of the cable thread, short enough that a
                // fresh flow is still serialised almost at once.
                Shaper::new(r, (r / 8 / 4_000).max(2 * 1538), now)
            }),
            loss: rule(&settings.loss, Purpose::Loss),
            corrupt: rule(&settings.corrupt, Purpose::Corrupt),
            reorder: rule(&settings.reorder, Purpose::Reorder),
            jitter: SplitMix64::new(stream_seed(seed, dir, Purpose::Jitter)),
            held: None,
            popped: Vec::new(),
            last_eligible: 0,
            delay: Histogram::default(),
            c: Counters::default(),
            settings: settings.clone(),
        }
    }

    /// Takes a received frame. `data` is its bytes (a corruption rule may flip one bit past
    /// the Ethernet header); `rx_ns` is when it arrived. A frame the lane does not keep comes
    /// back with the reason ([`Verdict::Lost`] or [`Verdict::Overflow`]).
    pub fn ingress(
        &mut self,
        frame: Frame,
        data: &mut [u8],
        rx_ns: u64,
    ) -> Result<(), (Verdict, Frame)> {
        let class = crate::wire::classify(data);
        let kind = Kind::from(class.kind);
        let len = u64::from(frame.len());
        self.c.rx_frames += 1;
        self.c.rx_bytes += len;
        self.c.rx_by_class[kind.index()] += 1;
        if let Some(r) = self.loss.as_mut() {
            if r.fires(&class) {
                self.c.lost += 1;
                self.c.lost_by_class[kind.index()] += 1;
                return Err((Verdict::Lost, frame));
            }
        }
        let held = usize::from(self.held.is_some());
        let held_bytes = self.held.as_ref().map_or(0, |h| u64::from(h.frame.len()));
        let over_bytes = self.line.bytes() + held_bytes + len > self.limit_bytes;
        if over_bytes || self.line.len() + held + 1 > self.line.capacity() {
            self.c.overflow += 1;
            // The frame cap alone: no --fifo-limit helps (see `frame_cap_drops`).
            self.c.frame_cap += u64::from(!over_bytes);
            return Err((Verdict::Overflow, frame));
        }
        if let Some(r) = self.corrupt.as_mut() {
            if r.fires(&class) && data.len() > class.header_len {
                let span = (data.len() - class.header_len) as u64;
                let at = class.header_len + r.rng().below(span) as usize;
                let bit = r.rng().below(8);
                data[at] ^= 1 << bit;
                self.c.corrupted += 1;
            }
        }
        let mut t = rx_ns + self.settings.delay_ns;
        let j = self.settings.jitter_ns;
        if j > 0 {
            t = (t + self.jitter.below(2 * j + 1))
                .saturating_sub(j)
                .max(rx_ns);
        }
        // Order is kept: a frame never becomes eligible before the one ahead of it.
        let eligible_ns = t.max(self.last_eligible);
        self.last_eligible = eligible_ns;
        let e = Entry {
            frame,
            rx_ns,
            eligible_ns,
        };
        if self.held.is_none() {
            if let Some(r) = self.reorder.as_mut() {
                if r.fires(&class) {
                    self.held = Some(e);
                    return Ok(());
                }
            }
        }
        self.line.push_back(e).expect("capacity checked above");
        if let Some(mut h) = self.held.take() {
            h.eligible_ns = eligible_ns;
            self.line.push_back(h).expect("capacity checked above");
            self.c.reordered += 1;
        }
        self.c.peak_bytes = self.c.peak_bytes.max(self.line.bytes());
        self.c.peak_frames = self.c.peak_frames.max(self.line.len());
        Ok(())
    }

    /// Moves a frame held for reordering into the line once its own time has come and no
    /// frame followed it (so a lone frame is delayed, never stranded).
    pub fn poll(&mut self, now: u64) {
        if let Some(h) = self.held.take_if(|h| h.eligible_ns <= now) {
            if let Err(h) = self.line.push_back(h) {
                self.held = Some(h);
            }
        }
    }

    /// Moves to `out` up to `max` frames that may leave at `now` (delay passed, line rate
    /// permitting); returns how many. Hand `out` to the port, then to [`Lane::settle`].
    pub fn pop_ready(&mut self, now: u64, max: usize, out: &mut Vec<Frame>) -> usize {
        self.popped.clear();
        while self.popped.len() < max {
            let Some(f) = self.line.front() else { break };
            if f.eligible_ns > now {
                break;
            }
            if let Some(s) = self.shaper.as_mut() {
                if !s.try_send(f.frame.len(), now) {
                    break;
                }
            }
            let e = self.line.pop_front().expect("front exists");
            self.popped.push(Popped {
                rx_ns: e.rx_ns,
                eligible_ns: e.eligible_ns,
                len: e.frame.len(),
            });
            out.push(e.frame);
        }
        self.popped.len()
    }

    /// After the port was handed the frames of the last [`Lane::pop_ready`]: those it took
    /// (the first ones) left at `now`; those it did not, still in `unsent` and in order, go
    /// back to the head of the line, and any there is no room for goes to `release`.
    pub fn settle(&mut self, now: u64, unsent: &mut Vec<Frame>, mut release: impl FnMut(Frame)) {
        let sent = self.popped.len() - unsent.len().min(self.popped.len());
        for i in 0..sent {
            let p = self.popped[i];
            self.sent(p.rx_ns, p.len, now);
        }
        // Back in reverse order, so the line keeps its order.
        while let Some(frame) = unsent.pop() {
            let Some(p) = self.popped.pop() else {
                release(frame);
                continue;
            };
            let e = Entry {
                frame,
                rx_ns: p.rx_ns,
                eligible_ns: p.eligible_ns,
            };
            if let Err(e) = self.line.push_front(e) {
                release(e.frame);
            }
        }
        self.popped.clear();
    }

    /// Records that a frame of `len` bytes received at `rx_ns` left at `now`.
    #[inline]
    fn sent(&mut self, rx_ns: u64, len: u32, now: u64) {
        let d = now.saturating_sub(rx_ns);
        self.delay.record(d);
        self.c.delay_sum_ns += u128::from(d);
        self.c.tx_frames += 1;
        self.c.tx_bytes += u64::from(len);
        if self.c.first_tx_ns == 0 {
            self.c.first_tx_ns = now;
            self.c.first_tx_len = u64::from(len);
        }
        self.c.last_tx_ns = now;
    }

    /// When this direction next has something to do, if anything.
    pub fn next_deadline(&self) -> Option<u64> {
        let mut d = self.held.as_ref().map(|h| h.eligible_ns);
        if let Some(f) = self.line.front() {
            let mut t = f.eligible_ns;
            if let Some(s) = &self.shaper {
                t = t.max(s.ready_at());
            }
            d = Some(d.map_or(t, |x| x.min(t)));
        }
        d
    }

    /// Frames held (in the line and for reordering).
    pub fn queued(&self) -> usize {
        self.line.len() + usize::from(self.held.is_some())
    }

    /// Frames and bytes forwarded so far.
    pub fn forwarded(&self) -> (u64, u64) {
        (self.c.tx_frames, self.c.tx_bytes)
    }

    /// Frames dropped by the loss rule so far.
    pub fn loss_drops(&self) -> u64 {
        self.c.lost
    }

    /// FIFO-overflow drops so far.
    pub fn overflow_drops(&self) -> u64 {
        self.c.overflow
    }

    /// Of [`Lane::overflow_drops`], those the FIFO's frame cap refused while its byte limit
    /// had room: many small frames in flight, beyond [`super::MAX_FIFO_FRAMES`], which no
    /// `--fifo-limit` raises.
    pub fn frame_cap_drops(&self) -> u64 {
        self.c.frame_cap
    }

    /// Hands every frame still held to `release` (at stop); they count as flushed.
    pub fn drain(&mut self, mut release: impl FnMut(Frame)) {
        while let Some(e) = self.line.pop_front() {
            self.c.flushed += 1;
            release(e.frame);
        }
        if let Some(h) = self.held.take() {
            self.c.flushed += 1;
            release(h.frame);
        }
    }

    /// The report of this direction.
    pub fn report(&self, direction: &str, from: &str, to: &str) -> LaneReport {
        let c = &self.c;
        let span_ns = c.last_tx_ns.saturating_sub(c.first_tx_ns);
        let s = &self.settings;
        LaneReport {
            direction: direction.to_string(),
            from: from.to_string(),
            to: to.to_string(),
            delay_set_us: s.delay_ns as f64 / 1e3,
            jitter_set_us: s.jitter_ns as f64 / 1e3,
            rate_set_bps: s.rate_bps,
            loss: s.loss.as_ref().map(|r| r.to_string()),
            corrupt: s.corrupt.as_ref().map(|r| r.to_string()),
            reorder: s.reorder.as_ref().map(|r| r.to_string()),
            fifo_limit_bytes: self.limit_bytes,
            fifo_limit_frames: self.line.capacity(),
            rx_frames: c.rx_frames,
            rx_bytes: c.rx_bytes,
            rx_by_class: ClassCounts::from(c.rx_by_class),
            forwarded_frames: c.tx_frames,
            forwarded_bytes: c.tx_bytes,
            dropped_loss: c.lost,
            dropped_loss_by_class: ClassCounts::from(c.lost_by_class),
            dropped_fifo_overflow: c.overflow,
            dropped_fifo_frame_cap: c.frame_cap,
            // Counted by the worker, which sees the ports (see `cable::worker`).
            dropped_oversize: 0,
            dropped_at_socket: 0,
            tx_refused: 0,
            corrupted: c.corrupted,
            reordered: c.reordered,
            flushed_at_stop: c.flushed,
            peak_fifo_bytes: c.peak_bytes,
            peak_fifo_frames: c.peak_frames as u64,
            delay: self.delay.summary(),
            delay_mean_us: if c.tx_frames == 0 {
                0.0
            } else {
                (c.delay_sum_ns / u128::from(c.tx_frames)) as f64 / 1e3
            },
            tx_elapsed_s: if c.tx_frames > 1 {
                span_ns as f64 / 1e9
            } else {
                0.0
            },
            rate_bps: line_rate_bps(c.tx_frames, c.tx_bytes, c.first_tx_len, span_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        cable::rules::{Chance, RuleSpec},
        wire::{MacAddr, MacControl, TestFrame, TestFrameView},
    };

    /// A tiny simulated world: frames in a Vec<Vec<u8>> indexed like a pool.
    struct Sim {
        frames: Vec<Vec<u8>>,
    }

    impl Sim {
        fn test_frame(&mut self, seq: u64, len: usize) -> Frame {
            let t = TestFrame {
                seq,
                ..TestFrame::sample(len)
            };
            let mut b = vec![0u8; len];
            t.emit(&mut b).unwrap();
            self.push(b)
        }

        fn pfc_frame(&mut self) -> Frame {
            let mut b = vec![0u8; 64];
            let n = MacControl::Pfc {
                enable: 1,
                quanta: [9; 8],
            }
            .emit_frame(MacAddr([2, 0, 0, 0, 0, 1]), &mut b)
            .unwrap();
            b.truncate(n);
            self.push(b)
        }

        fn push(&mut self, b: Vec<u8>) -> Frame {
            let f = Frame::for_test(self.frames.len() as u32, b.len() as u32);
            self.frames.push(b);
            f
        }

        fn ingress(&mut self, lane: &mut Lane, f: Frame, t: u64) -> Verdict {
            let i = f.idx() as usize;
            match lane.ingress(f, &mut self.frames[i], t) {
                Ok(()) => Verdict::Queued,
                Err((v, _)) => v,
            }
        }

        fn seq(&self, f: &Frame) -> u64 {
            TestFrameView::parse(&self.frames[f.idx() as usize])
                .map(|v| v.seq)
                .unwrap_or(u64::MAX)
        }
    }

    fn settings() -> LaneSettings {
        LaneSettings::default()
    }

    /// Runs the lane in steps of `step` ns until `end`, collecting (frame, tx time).
    fn drain_until(lane: &mut Lane, mut now: u64, end: u64, step: u64) -> Vec<(Entry, u64)> {
        let mut got = Vec::new();
        let mut out = Vec::new();
        while now <= end {
            lane.poll(now);
            out.clear();
            lane.pop_ready(now, 64, &mut out);
            let popped = lane.popped.clone();
            lane.settle(now, &mut Vec::new(), |_| unreachable!("all sent"));
            for (frame, p) in out.drain(..).zip(popped) {
                let e = Entry {
                    frame,
                    rx_ns: p.rx_ns,
                    eligible_ns: p.eligible_ns,
                };
                got.push((e, now));
            }
            now += step;
        }
        got
    }

    #[test]
    fn delay_is_exact_and_order_kept() {
        let mut sim = Sim { frames: vec![] };
        let s = LaneSettings {
            delay_ns: 100_000,
            ..settings()
        };
        let mut lane = Lane::new(&s, 1, 0, 0);
        for i in 0..100u64 {
            let f = sim.test_frame(i, 100);
            assert_eq!(sim.ingress(&mut lane, f, i * 1000), Verdict::Queued);
        }
        assert_eq!(lane.next_deadline(), Some(100_000));
        let got = drain_until(&mut lane, 0, 300_000, 100);
        assert_eq!(got.len(), 100);
        for (i, (e, t)) in got.iter().enumerate() {
            assert_eq!(sim.seq(&e.frame), i as u64);
            assert_eq!(*t, i as u64 * 1000 + 100_000);
        }
        let r = lane.report("a->b", "x", "y");
        assert_eq!(r.forwarded_frames, 100);
        assert_eq!(r.delay_mean_us, 100.0);
        assert!((r.delay.p50_us - 100.0).abs() <= 100.0 / 16.0);
        assert_eq!(lane.next_deadline(), None);
    }

    #[test]
    fn jitter_never_reorders() {
        let mut sim = Sim { frames: vec![] };
        let s = LaneSettings {
            delay_ns: 50_000,
            jitter_ns: 20_000,
            ..settings()
        };
        let mut lane = Lane::new(&s, 3, 0, 0);
        for i in 0..500u64 {
            let f = sim.test_frame(i, 100);
            sim.ingress(&mut lane, f, i * 500);
        }
        let got = drain_until(&mut lane, 0, 1_000_000, 100);
        assert_eq!(got.len(), 500);
        let mut spread = (u64::MAX, 0);
        for (i, (e, t)) in got.iter().enumerate() {
            assert_eq!(sim.seq(&e.frame), i as u64);
            let d = t - e.rx_ns;
            assert!(d >= 30_000, "{d}");
            spread = (spread.0.min(d), spread.1.max(d));
        }
        assert!(spread.1 - spread.0 > 10_000, "{spread:?}");
    }

    /// A lane shaped to 1 Gbit/s with room for every frame, and its simulator: a 1000-byte
    /// frame is 1024 bytes on the wire, 8192 ns.
    fn one_gbit_lane() -> (Sim, Lane) {
        let s = LaneSettings {
            rate_bps: Some(1_000_000_000),
            fifo_limit: Some(10_000_000),
            ..settings()
        };
        (Sim { frames: vec![] }, Lane::new(&s, 1, 0, 0))
    }

    #[test]
    fn rate_serialises_frames() {
        let (mut sim, mut lane) = one_gbit_lane();
        for i in 0..2000u64 {
            let f = sim.test_frame(i, 1000);
            sim.ingress(&mut lane, f, 1 + i * 4096); // offered at 2 Gbit/s
        }
        let got = drain_until(&mut lane, 1, 20_000_000, 500);
        assert_eq!(got.len(), 2000);
        let span = got.last().unwrap().1 - got[0].1;
        let expect = 1999 * 8192;
        assert!(
            span.abs_diff(expect) < expect / 100,
            "{span} vs {expect} ns"
        );
        let r = lane.report("a->b", "x", "y");
        assert!((r.rate_bps - 1e9).abs() < 2e7, "{}", r.rate_bps);
    }

    /// Two frames give the line's rate, not twice it: the interval between their departures
    /// holds one frame's wire time.
    #[test]
    fn two_frames_give_the_line_rate() {
        let (mut sim, mut lane) = one_gbit_lane();
        for i in 0..2u64 {
            let f = sim.test_frame(i, 1000);
            sim.ingress(&mut lane, f, 1);
        }
        assert_eq!(drain_until(&mut lane, 1, 1_000_000, 2).len(), 2);
        let r = lane.report("a->b", "x", "y");
        assert!((r.rate_bps - 1e9).abs() < 2e7, "{}", r.rate_bps);
    }

    /// 200 ms at 1 Gbit/s of 128-byte frames are 164,000 frames in flight: more than the
    /// FIFO's 131,072 however many bytes it may hold, and the drops say so.
    #[test]
    fn many_small_frames_in_flight_overflow_at_the_frame_cap() {
        let mut sim = Sim { frames: vec![] };
        let s = LaneSettings {
            delay_ns: 200_000_000,
            rate_bps: Some(1_000_000_000),
            ..settings()
        };
        let mut lane = Lane::new(&s, 1, 0, 0);
        assert_eq!(lane.report("a->b", "x", "y").fifo_limit_frames, 131_072);
        // Offered at the line rate: one 152-byte wire slot every 1,216 ns.
        let n = 150_000u64;
        for i in 0..n {
            let f = sim.test_frame(i, 128);
            sim.ingress(&mut lane, f, 1 + i * 1216);
        }
        let r = lane.report("a->b", "x", "y");
        assert_eq!(r.dropped_fifo_overflow, n - 131_072);
        assert_eq!(r.dropped_fifo_frame_cap, r.dropped_fifo_overflow);
        // Some 10 MB of the byte limit were never used.
        assert!(r.peak_fifo_bytes * 3 < r.fifo_limit_bytes * 2, "{r:?}");
    }

    #[test]
    fn fifo_bound_drops_the_excess() {
        let mut sim = Sim { frames: vec![] };
        let s = LaneSettings {
            delay_ns: 1_000_000,
            rate_bps: Some(1_000_000_000),
            ..settings()
        };
        // 1 ms at 1 Gbit/s = 125 kB, plus the 64 KiB margin.
        assert_eq!(s.fifo_limit_bytes(), 125_000 + 65_536);
        let mut lane = Lane::new(&s, 1, 0, 0);
        let mut dropped = 0;
        for i in 0..1000u64 {
            let f = sim.test_frame(i, 1000);
            if sim.ingress(&mut lane, f, i) == Verdict::Overflow {
                dropped += 1;
            }
        }
        assert_eq!(dropped, 1000 - 190);
        assert_eq!(lane.overflow_drops(), 810);
        assert_eq!(lane.frame_cap_drops(), 0, "the byte limit refused them");
        let r = lane.report("a->b", "x", "y");
        assert_eq!(r.peak_fifo_bytes, 190_000);
        let mut released = 0;
        lane.drain(|_| released += 1);
        assert_eq!(released, 190);
        assert_eq!(lane.report("a->b", "x", "y").flushed_at_stop, 190);
    }

    #[test]
    fn loss_is_seeded_and_targets_a_class() {
        let spec = RuleSpec {
            probability: 0.01,
            matcher: "data".parse().unwrap(),
        };
        let s = LaneSettings {
            loss: Some(spec.clone()),
            ..settings()
        };
        let run = |seed: u64| {
            let mut sim = Sim { frames: vec![] };
            let mut lane = Lane::new(&s, seed, 0, 0);
            let mut lost = Vec::new();
            for i in 0..20_000u64 {
                let f = if i % 100 == 0 {
                    sim.pfc_frame()
                } else {
                    sim.test_frame(i, 80)
                };
                if sim.ingress(&mut lane, f, i) == Verdict::Lost {
                    lost.push(i);
                }
            }
            (lost, lane.report("a->b", "x", "y"))
        };
        let (a, ra) = run(7);
        let (b, _) = run(7);
        let (c, _) = run(8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|i| i % 100 != 0), "a PFC frame was dropped");
        // About 1 % of the 19,800 data frames.
        assert!((150..=250).contains(&a.len()), "{}", a.len());
        assert_eq!(ra.dropped_loss_by_class.data, a.len() as u64);
        assert_eq!(ra.dropped_loss_by_class.pfc, 0);
        assert_eq!(ra.rx_by_class.pfc, 200);
        // The decisions are exactly a replay of the public stream for (seed, direction).
        let mut replay = Chance::new(0.01, stream_seed(7, 0, Purpose::Loss));
        let expect: Vec<u64> = (0..20_000u64)
            .filter(|i| i % 100 != 0)
            .filter(|_| replay.hit())
            .collect();
        assert_eq!(a, expect);
    }

    #[test]
    fn pfc_only_loss() {
        let mut sim = Sim { frames: vec![] };
        let s = LaneSettings {
            loss: Some(RuleSpec {
                probability: 1.0,
                matcher: "pfc".parse().unwrap(),
            }),
            ..settings()
        };
        let mut lane = Lane::new(&s, 1, 1, 0);
        for i in 0..100u64 {
            let f = if i % 10 == 0 {
                sim.pfc_frame()
            } else {
                sim.test_frame(i, 80)
            };
            let v = sim.ingress(&mut lane, f, i);
            assert_eq!(v == Verdict::Lost, i % 10 == 0);
        }
        assert_eq!(drain_until(&mut lane, 0, 200, 1).len(), 90);
    }

    #[test]
    fn corruption_flips_one_payload_bit() {
        let mut sim = Sim { frames: vec![] };
        let s = LaneSettings {
            corrupt: Some(RuleSpec {
                probability: 1.0,
                matcher: "data".parse().unwrap(),
            }),
            ..settings()
        };
        let mut lane = Lane::new(&s, 5, 0, 0);
        for i in 0..200u64 {
            let f = sim.test_frame(i, 100);
            let at = f.idx() as usize;
            let before = sim.frames[at].clone();
            sim.ingress(&mut lane, f, i);
            let after = &sim.frames[at];
            let diff: u32 = before
                .iter()
                .zip(after)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert_eq!(diff, 1);
            assert_eq!(before[..18], after[..18], "Ethernet header touched");
        }
        // PFC frames are not data: left alone.
        let f = sim.pfc_frame();
        let at = f.idx() as usize;
        let before = sim.frames[at].clone();
        sim.ingress(&mut lane, f, 300);
        assert_eq!(before, sim.frames[at]);
        assert_eq!(lane.report("a->b", "x", "y").corrupted, 200);
    }

    #[test]
    fn reorder_swaps_neighbours_and_never_strands() {
        let mut sim = Sim { frames: vec![] };
        let s = LaneSettings {
            delay_ns: 10_000,
            reorder: Some(RuleSpec {
                probability: 0.1,
                matcher: Matcher::all(),
            }),
            fifo_limit: Some(1 << 20),
            ..settings()
        };
        let mut lane = Lane::new(&s, 11, 0, 0);
        for i in 0..1000u64 {
            let f = sim.test_frame(i, 100);
            sim.ingress(&mut lane, f, i * 100);
        }
        let got = drain_until(&mut lane, 0, 1_000_000, 50);
        assert_eq!(got.len(), 1000, "every frame leaves");
        let seqs: Vec<u64> = got.iter().map(|(e, _)| sim.seq(&e.frame)).collect();
        let late = seqs.windows(2).filter(|w| w[1] < w[0]).count() as u64;
        let r = lane.report("a->b", "x", "y");
        assert!(r.reordered >= 50 && r.reordered <= 150, "{}", r.reordered);
        assert!(late >= r.reordered - 1 && late <= r.reordered);
        let mut sorted = seqs.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        // A lone held frame still leaves at its time.
        let mut lane = Lane::new(
            &LaneSettings {
                reorder: Some(RuleSpec {
                    probability: 1.0,
                    matcher: Matcher::all(),
                }),
                ..settings()
            },
            1,
            0,
            0,
        );
        let f = sim.test_frame(0, 100);
        sim.ingress(&mut lane, f, 5);
        assert_eq!(lane.next_deadline(), Some(5));
        assert_eq!(drain_until(&mut lane, 0, 10, 1).len(), 1);
    }

    #[test]
    fn unsend_puts_frames_back_in_order() {
        let mut sim = Sim { frames: vec![] };
        let mut lane = Lane::new(&settings(), 1, 0, 0);
        for i in 0..5 {
            let f = sim.test_frame(i, 100);
            sim.ingress(&mut lane, f, 0);
        }
        let mut out = Vec::new();
        assert_eq!(lane.pop_ready(0, 64, &mut out), 5);
        // The port took the first two; the rest go back.
        let mut unsent = out.split_off(2);
        lane.settle(0, &mut unsent, |_| panic!("room to put them back"));
        out.clear();
        lane.pop_ready(0, 64, &mut out);
        let seqs: Vec<u64> = out.iter().map(|f| sim.seq(f)).collect();
        assert_eq!(seqs, vec![2, 3, 4]);
    }

    use crate::cable::rules::Matcher;
}
