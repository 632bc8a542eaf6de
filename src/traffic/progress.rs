//! The progress line of a long run: a tool that runs for minutes, or until interrupted (`gen`
//! without `--duration`, a `sink` waiting for a generator), says every so often what it has
//! done since the last line, so that an operator watching it, or finding it still running
//! later, can tell a run that is working from one that waits for traffic that never comes.
//!
//! Sans-I/O: the tool's loop calls [`Progress::poll`] with the time and its totals, adds
//! [`Progress::next_deadline`] to its wake-up, and logs what a due [`Tick`] says. Nothing is
//! done per frame: one comparison per turn of the loop.

use std::time::Duration;

use crate::dataplane::shaper::WIRE_OVERHEAD;

/// What happened since the previous line (or the start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    /// Frames counted since the previous line.
    pub frames: u64,
    /// Their bytes (without FCS).
    pub bytes: u64,
    /// Time since the previous line, ns.
    pub ns: u64,
}

impl Tick {
    /// The rate of the interval, bit/s, wire overhead counted (as the reports count it).
    pub fn rate_bps(&self) -> f64 {
        (self.bytes + self.frames * WIRE_OVERHEAD) as f64 * 8.0 / self.ns.max(1) as f64 * 1e9
    }

    /// The interval, seconds.
    pub fn secs(&self) -> f64 {
        self.ns as f64 / 1e9
    }
}

/// When the next progress line is due, and the totals at the previous one.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Interval, ns; 0 = no progress lines.
    every: u64,
    next: u64,
    /// Time and totals (frames, bytes) at the previous line.
    last: (u64, u64, u64),
}

impl Progress {
    /// A line every `every` from `start`; zero: none at all.
    pub fn new(every: Duration, start: u64) -> Self {
        let every = every.as_nanos() as u64;
        Progress {
            every,
            next: start.saturating_add(every),
            last: (start, 0, 0),
        }
    }

    /// At `now`, with `frames` and `bytes` counted so far: the interval to report if a line
    /// is due. A loop that woke late reports the longer interval it covered, and the next
    /// line is due one interval after this one (no burst of lines to catch up).
    pub fn poll(&mut self, now: u64, frames: u64, bytes: u64) -> Option<Tick> {
        if self.every == 0 || now < self.next {
            return None;
        }
        let (at, f, b) = self.last;
        self.last = (now, frames, bytes);
        self.next = now.saturating_add(self.every);
        Some(Tick {
            frames: frames.saturating_sub(f),
            bytes: bytes.saturating_sub(b),
            ns: now.saturating_sub(at),
        })
    }

    /// When the loop must be awake for the next line, if lines are on.
    pub fn next_deadline(&self) -> Option<u64> {
        (self.every != 0).then_some(self.next)
    }
}

/// The share of each line's interval a tool spent in some states (`gen`: paused by PFC, by
/// class-scope SFC, by flow-scope SFC), from the running totals of time it keeps for its
/// report: a line tells its own interval, not the run's average.
#[derive(Debug, Clone)]
pub struct Shares<const N: usize> {
    /// The totals at the previous line, ns.
    before: [u64; N],
}

impl<const N: usize> Default for Shares<N> {
    fn default() -> Self {
        Shares { before: [0; N] }
    }
}

impl<const N: usize> Shares<N> {
    /// With the `totals` (ns) now, each state's share of the interval of `tick`, as the line
    /// shows it ("12 %").
    pub fn of(&mut self, totals: [u64; N], tick: &Tick) -> [String; N] {
        let before = std::mem::replace(&mut self.before, totals);
        std::array::from_fn(|i| {
            let spent = totals[i].saturating_sub(before[i]);
            format!("{:.0} %", spent as f64 * 100.0 / tick.ns.max(1) as f64)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_line_each_interval_with_what_happened_in_it() {
        let mut p = Progress::new(Duration::from_secs(10), 5 * S);
        assert_eq!(p.next_deadline(), Some(15 * S));
        assert_eq!(p.poll(15 * S - 1, 100, 100_000), None);
        let t = p.poll(15 * S, 1_000, 1_000_000).expect("due");
        assert_eq!((t.frames, t.bytes, t.ns), (1_000, 1_000_000, 10 * S));
        // (1,000,000 + 1,000 * 24) bytes in 10 s.
        assert!((t.rate_bps() - 819_200.0).abs() < 1e-6);
        assert_eq!(p.next_deadline(), Some(25 * S));
        // Woken late: the line covers the longer interval; the next is one interval on.
        let t = p.poll(31 * S, 1_600, 1_600_000).expect("due");
        assert_eq!((t.frames, t.ns), (600, 16 * S));
        assert_eq!(t.secs(), 16.0);
        assert_eq!(p.next_deadline(), Some(41 * S));
    }

    #[test]
    fn off_when_zero() {
        let mut p = Progress::new(Duration::ZERO, 0);
        assert_eq!(p.next_deadline(), None);
        assert_eq!(p.poll(u64::MAX, 1, 1), None);
    }

    #[test]
    fn shares_are_of_each_lines_own_interval() {
        let mut shares = Shares::<2>::default();
        let tick = |ns| Tick {
            frames: 0,
            bytes: 0,
            ns,
        };
        assert_eq!(shares.of([S / 4, 0], &tick(S)), ["25 %", "0 %"]);
        // The second line counts only what came after the first.
        assert_eq!(shares.of([S / 4, 2 * S], &tick(2 * S)), ["0 %", "100 %"]);
        assert_eq!(
            shares.of([S / 4 + S / 100, 2 * S], &tick(S)),
            ["1 %", "0 %"]
        );
    }
}
