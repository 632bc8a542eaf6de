//! Token-bucket shaper at a line rate, counting each frame's wire overhead (preamble, SFD,
//! FCS and inter-frame gap), so a veth behaves like a link of the configured speed.

/// Bytes a frame occupies on the wire beyond its data: 7 preamble + 1 SFD + 4 FCS + 12 IFG.
pub const WIRE_OVERHEAD: u64 = 24;

/// How far past the moment the next frame is allowed a paced sender sleeps: it then sends the
/// burst that accumulated. The average rate stays exact; the CPU is spent once per burst
/// instead of once per frame, which on a small machine is what keeps reaction times short.
pub const PACING_NS: u64 = 50_000;

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
        let burst = (u128::from(rate_bps) * u128::from(2 * PACING_NS) / 8_000_000_000) as u64;
        Self::new(rate_bps, burst.max(2 * 1538), now)
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
        if self.tokens_mb < 0 {
            return false;
        }
        self.tokens_mb -= (u64::from(len) + WIRE_OVERHEAD) as i64 * 1000;
        true
    }

    /// Charges a frame that bypasses the shaper (control frames) so its wire time still counts.
    pub fn charge(&mut self, len: u32, now: u64) {
        self.refill(now);
        self.tokens_mb -= (u64::from(len) + WIRE_OVERHEAD) as i64 * 1000;
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
}
