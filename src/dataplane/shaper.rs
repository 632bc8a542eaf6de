//! Token-bucket shaper at a line rate, counting each frame's wire overhead (preamble, SFD,
//! FCS and inter-frame gap), so a veth behaves like a link of the configured speed.
//!
//! One thread's bucket is a [`Shaper`]. A port's line that several workers transmit on is a
//! [`LineClock`]: the time the line is next free, one atomic (the generic cell rate
//! algorithm, the same bucket kept as a time). A worker takes what the line has free at the
//! start of a batch ([`LineClock::grant`], one compare-and-swap), spends it frame by frame as
//! a [`Shaper`] spends its tokens, and gives back what it did not spend when the batch ends
//! (one atomic add): two atomics a batch, nothing shared per frame. With a bucket per worker
//! at its share of the speed instead, a flow the NIC (or a veth's sender) put on one queue got
//! that share of the link: half of it with two workers.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bytes a frame occupies on the wire beyond its data: 7 preamble + 1 SFD + 4 FCS + 12 IFG.
pub const WIRE_OVERHEAD: u64 = 24;

/// How far past the moment the next frame is allowed a paced sender sleeps: it then sends the
/// burst that accumulated. The average rate stays exact; the CPU is spent once per burst
/// instead of once per frame, which on a small machine is what keeps reaction times short.
pub const PACING_NS: u64 = 50_000;

/// The burst of a paced sender at `rate_bps`: two pacing intervals (at least two full frames).
fn paced_burst(rate_bps: u64) -> u64 {
    let burst = (u128::from(rate_bps) * u128::from(2 * PACING_NS) / 8_000_000_000) as u64;
    burst.max(2 * 1538)
}

/// A frame of `len` bytes on the wire, in milli-bytes (the buckets' unit).
fn wire_mb(len: u32) -> i64 {
    (i64::from(len) + WIRE_OVERHEAD as i64) * 1000
}

/// Spends a frame of `len` bytes from `tokens_mb` if they are not in deficit: the one rule of
/// both buckets, which may go negative by the frame that spent the last tokens (a frame once
/// started is finished).
fn spend(tokens_mb: &mut i64, len: u32) -> bool {
    if *tokens_mb < 0 {
        return false;
    }
    *tokens_mb -= wire_mb(len);
    true
}

/// A token bucket in bytes, refilled at `rate_bps / 8` bytes per second.
#[derive(Debug, Clone)]
pub struct Shaper {
    rate_bps: u64,
    burst: i64,
    /// Tokens in milli-bytes (integer math, no drift).
    tokens_mb: i64,
    last_ns: u64,
}

impl Shaper {
    /// A shaper at `rate_bps` allowing bursts of `burst_bytes`.
    pub fn new(rate_bps: u64, burst_bytes: u64, now: u64) -> Self {
        Shaper {
            rate_bps: rate_bps.max(1),
            burst: burst_bytes.max(1) as i64 * 1000,
            tokens_mb: 0,
            last_ns: now,
        }
    }

    /// A shaper whose burst holds two pacing intervals at `rate_bps` (at least two full frames).
    pub fn paced(rate_bps: u64, now: u64) -> Self {
        Self::new(rate_bps, paced_burst(rate_bps), now)
    }

    /// When a paced sender should wake to send again (see [`PACING_NS`]).
    pub fn wake_at(&self) -> u64 {
        if self.tokens_mb >= 0 {
            self.last_ns
        } else {
            self.ready_at() + PACING_NS
        }
    }

    /// The configured rate.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    fn refill(&mut self, now: u64) {
        if now > self.last_ns {
            let dt = (now - self.last_ns) as u128;
            // milli-bytes = ns * bps / 8 / 1e9 * 1000 = ns * bps / 8e6
            let add = dt * u128::from(self.rate_bps) / 8_000_000;
            self.tokens_mb = (self.tokens_mb as i128 + add as i128).min(self.burst as i128) as i64;
            self.last_ns = now;
        }
    }

    /// Takes the tokens for a frame of `len` bytes if the bucket is not in deficit.
    /// The bucket may go negative by one frame (the frame already started).
    pub fn try_send(&mut self, len: u32, now: u64) -> bool {
        self.refill(now);
        spend(&mut self.tokens_mb, len)
    }

    /// Charges a frame that bypasses the shaper (control frames) so its wire time still counts.
    pub fn charge(&mut self, len: u32, now: u64) {
        self.refill(now);
        self.tokens_mb -= wire_mb(len);
    }

    /// When the next frame may go, if the bucket is in deficit now.
    pub fn ready_at(&self) -> u64 {
        if self.tokens_mb >= 0 {
            return self.last_ns;
        }
        let deficit = (-self.tokens_mb) as u128;
        let ns = (deficit * 8_000_000).div_ceil(u128::from(self.rate_bps));
        self.last_ns + ns as u64
    }
}

/// The line's clock counts picoseconds: a 64-byte frame at 400 Gbit/s is 1,760 of them.
const PS_PER_NS: u64 = 1_000;

/// A free time this far ahead of now is no line's: a clock never set (0, read against an
/// uptime of more than 106 days, the most a wrapping difference of ps tells), or one a stale
/// reading wrapped. Taken as an idle line.
const ABSURD_PS: i64 = 10_000_000_000_000; // 10 s

/// The rate and burst of a shared line (the bucket's arithmetic; its state is the
/// [`LineClock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRate {
    rate_bps: u64,
    burst_ps: u64,
}

impl LineRate {
    /// `rate_bps`, banking at most `burst_bytes` while idle.
    pub fn new(rate_bps: u64, burst_bytes: u64) -> Self {
        let rate_bps = rate_bps.max(1);
        let burst_ps =
            (u128::from(burst_bytes.max(1)) * 8 * 1_000_000_000_000).div_ceil(u128::from(rate_bps));
        LineRate {
            rate_bps,
            burst_ps: burst_ps.min(ABSURD_PS as u128 / 2) as u64,
        }
    }

    /// A burst of two pacing intervals at `rate_bps` (at least two full frames), as
    /// [`Shaper::paced`].
    pub fn paced(rate_bps: u64) -> Self {
        Self::new(rate_bps, paced_burst(rate_bps))
    }

    /// Milli-bytes (a [`Shaper`]'s tokens) the line carries in `ps`, rounded down.
    fn ps_to_mb(&self, ps: u64) -> i64 {
        (u128::from(ps) * u128::from(self.rate_bps) / 8_000_000_000) as i64
    }

    /// The time the line takes for `mb` milli-bytes, ps, rounded up (what is charged).
    fn mb_to_ps(&self, mb: u64) -> u64 {
        (u128::from(mb) * 8_000_000_000).div_ceil(u128::from(self.rate_bps)) as u64
    }

    /// The same rounded down (what is given back).
    fn mb_to_ps_down(&self, mb: u64) -> u64 {
        (u128::from(mb) * 8_000_000_000 / u128::from(self.rate_bps)) as u64
    }

    /// Where the line's free time stands at `now_ps`, from `free_at`: `Err(ps)` busy for `ps`
    /// more, or `Ok(base)` free, with `base` the free time an idle line keeps (never further
    /// back than a burst).
    fn state(&self, free_at: u64, now_ps: u64) -> Result<u64, u64> {
        let ahead = free_at.wrapping_sub(now_ps) as i64;
        let idle_from = now_ps.wrapping_sub(self.burst_ps);
        if ahead > ABSURD_PS || ahead < -(self.burst_ps as i64) {
            Ok(idle_from)
        } else if ahead > 0 {
            Err(ahead as u64)
        } else {
            Ok(free_at)
        }
    }
}

/// The line of a port that several workers transmit on: when it is next free, shared.
/// Aligned to a cache line of its own, so that the workers contend on it only with each
/// other, not with the state beside it.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct LineClock {
    /// ps of CLOCK_MONOTONIC, wrapping (0: never used, which reads as idle).
    free_at: AtomicU64,
}

impl LineClock {
    /// Takes what the line has free at `now`, at most a burst, for one batch of frames:
    /// `None` while it is busy (no frame may start). Another worker finds the line busy until
    /// the grant is dropped and gives back what it did not spend.
    pub fn grant<'a>(&'a self, rate: &'a LineRate, now: u64) -> Option<LineGrant<'a>> {
        let now_ps = now.wrapping_mul(PS_PER_NS);
        let mut cur = self.free_at.load(Relaxed);
        loop {
            let base = rate.state(cur, now_ps).ok()?;
            // Relaxed: the free time is the only datum, and every change is one atomic on it.
            match self
                .free_at
                .compare_exchange_weak(cur, now_ps, Relaxed, Relaxed)
            {
                Ok(_) => {
                    return Some(LineGrant {
                        line: self,
                        rate,
                        tokens_mb: rate.ps_to_mb(now_ps.wrapping_sub(base)),
                    })
                }
                Err(seen) => cur = seen,
            }
        }
    }

    /// Charges a frame that bypasses the shaping (a control frame), so its wire time counts.
    pub fn charge(&self, rate: &LineRate, len: u32, now: u64) {
        let now_ps = now.wrapping_mul(PS_PER_NS);
        let cost = rate.mb_to_ps(wire_mb(len) as u64);
        let _ = self.free_at.fetch_update(Relaxed, Relaxed, |cur| {
            let base = rate.state(cur, now_ps).unwrap_or(cur);
            Some(base.wrapping_add(cost))
        });
    }

    /// When a paced sender should wake to send again: at once if the line is free, else
    /// [`PACING_NS`] after it is.
    pub fn wake_at(&self, rate: &LineRate, now: u64) -> u64 {
        match rate.state(self.free_at.load(Relaxed), now.wrapping_mul(PS_PER_NS)) {
            Ok(_) => now,
            Err(ps) => now + ps.div_ceil(PS_PER_NS) + PACING_NS,
        }
    }
}

/// A worker's share of a [`LineClock`] for one batch: spent frame by frame like a
/// [`Shaper`]'s tokens (it may end one frame in deficit, a frame once started being
/// finished), the rest given back when dropped.
#[derive(Debug)]
pub struct LineGrant<'a> {
    line: &'a LineClock,
    rate: &'a LineRate,
    /// Milli-bytes left (negative: the last frame's overdraft).
    tokens_mb: i64,
}

impl LineGrant<'_> {
    /// Takes the line for a frame of `len` bytes if the grant is not spent.
    #[inline]
    pub fn try_send(&mut self, len: u32) -> bool {
        spend(&mut self.tokens_mb, len)
    }
}

impl Drop for LineGrant<'_> {
    fn drop(&mut self) {
        // What was not spent goes back (rounded down), an overdraft is charged (rounded up).
        if self.tokens_mb > 0 {
            let ps = self.rate.mb_to_ps_down(self.tokens_mb as u64);
            self.line.free_at.fetch_sub(ps, Relaxed);
        } else if self.tokens_mb < 0 {
            let ps = self.rate.mb_to_ps(self.tokens_mb.unsigned_abs());
            self.line.free_at.fetch_add(ps, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_exact_over_time() {
        // 1 Gbit/s, 1000-byte frames: 1024 wire bytes = 8192 ns each.
        let mut s = Shaper::new(1_000_000_000, 2048, 0);
        let mut now = 0;
        let mut sent = 0u64;
        while now < 10_000_000 {
            if s.try_send(1000, now) {
                sent += 1;
            } else {
                now = s.ready_at().max(now + 1);
            }
        }
        // 10 ms / 8192 ns = 1220.7 frames (+1 for the first frame in deficit).
        assert!((1220..=1222).contains(&sent), "sent {sent}");
    }

    #[test]
    fn ready_at_and_charge() {
        let mut s = Shaper::new(8_000_000_000, 100, 0); // 1 byte per ns
        assert!(s.try_send(976, 0)); // 1000 bytes on the wire
        assert!(!s.try_send(976, 0));
        assert_eq!(s.ready_at(), 1000);
        assert!(s.try_send(976, 1000));
        s.charge(36, 2000); // 60 bytes
        assert_eq!(s.ready_at(), 2060);
        // Burst caps idle credit.
        let mut s = Shaper::new(8_000_000_000, 100, 0);
        assert!(s.try_send(1000, 1_000_000));
        assert!(!s.try_send(1000, 1_000_000));
    }

    #[test]
    fn paced_burst_covers_two_intervals() {
        // 1 Gbit/s: 100 us = 12,500 bytes.
        let mut s = Shaper::paced(1_000_000_000, 0);
        let mut n = 0;
        while s.try_send(1000, 1_000_000) {
            n += 1;
        }
        assert_eq!(n, 13); // 12,500 bytes of credit, the 13th frame drives it negative
        assert_eq!(s.wake_at(), s.ready_at() + PACING_NS);
    }

    /// Frames of 1,000 bytes sent on one line in 10 ms by `workers` taking turns, a batch of
    /// up to `batch` frames per grant, each worker's clock `skew` ns behind the previous one's.
    fn shared_for_10ms(workers: u64, batch: usize, skew: u64) -> u64 {
        let line = LineClock::default();
        let rate = LineRate::new(1_000_000_000, 2048);
        let (mut now, mut sent) = (5_000_000_000u64, 0);
        let end = now + 10_000_000;
        while now < end {
            let mut any = false;
            for w in 0..workers {
                let Some(mut g) = line.grant(&rate, now.saturating_sub(w * skew)) else {
                    continue;
                };
                for _ in 0..batch {
                    if !g.try_send(1000) {
                        break;
                    }
                    sent += 1;
                    any = true;
                }
            }
            if !any {
                now = line.wake_at(&rate, now).min(now + 1_000).max(now + 1);
            }
        }
        sent
    }

    #[test]
    fn a_shared_line_gives_one_worker_the_whole_rate_and_two_no_more() {
        // 1 Gbit/s, 1000-byte frames: 8192 ns each, 1220.7 in 10 ms (+1: the first frame
        // goes at once; +2: the burst banked before the start).
        for (workers, batch, skew) in [(1, 64, 0), (2, 64, 0), (2, 1, 3_000), (4, 3, 700)] {
            let sent = shared_for_10ms(workers, batch, skew);
            assert!(
                (1220..=1224).contains(&sent),
                "{workers} workers, batch {batch}, skew {skew} ns: {sent}"
            );
        }
    }

    #[test]
    fn a_grant_gives_back_what_it_did_not_spend() {
        let line = LineClock::default();
        let rate = LineRate::new(8_000_000_000, 100_000); // 1 byte per ns
        let now = 1_000_000_000;
        // Idle: the grant holds the burst; one frame of it spent, the rest given back.
        let mut g = line.grant(&rate, now).expect("idle");
        assert!(g.try_send(976));
        drop(g);
        let mut g = line.grant(&rate, now).expect("99,000 bytes left");
        assert_eq!(g.tokens_mb, 99_000_000);
        // Spent beyond the grant by one frame: no more frames, and the overdraft is charged.
        while g.try_send(976) {}
        drop(g);
        assert!(line.grant(&rate, now).is_none());
        assert_eq!(line.wake_at(&rate, now), now + 1000 + PACING_NS);
        // A control frame's charge moves a busy line on.
        line.charge(&rate, 36, now);
        assert_eq!(line.wake_at(&rate, now), now + 1060 + PACING_NS);
        assert!(line.grant(&rate, now + 1059).is_none());
        assert!(line.grant(&rate, now + 1060).is_some());
    }

    #[test]
    fn a_clock_never_set_or_far_off_reads_as_idle() {
        let rate = LineRate::paced(10_000_000_000);
        // Never used (0), against an uptime past the 2^63 ps that a wrapping difference
        // can tell (106 days): idle, with a burst banked.
        for now in [1_000_000, 200 * 86_400 * 1_000_000_000] {
            let line = LineClock::default();
            let mut g = line.grant(&rate, now).expect("idle");
            assert!(
                g.try_send(1500) && g.try_send(1500),
                "now {now}: a burst holds two"
            );
        }
    }
}
