//! A fixed-size log-linear latency histogram (no allocation after creation): 16 linear
//! sub-buckets per power of two, so any percentile is within about 6 % of the true value.

use serde::Serialize;

const SUB: usize = 16;
const BUCKETS: usize = 64 * SUB;

/// Latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    min: u64,
    max: u64,
}

/// Percentiles for reports, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub samples: u64,
    /// Minimum.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
}

fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros() as usize; // >= 4
    let sub = ((v >> (exp - 4)) & (SUB as u64 - 1)) as usize;
    (exp - 3) * SUB + sub
}

fn lower_bound(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let exp = b / SUB + 3;
    let sub = (b % SUB) as u64;
    (1u64 << exp) | (sub << (exp - 4))
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Histogram {
    /// Records one sample.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns).min(BUCKETS - 1)] += 1;
        self.total += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// The value at quantile `q` (0..=1), as the lower bound of its bucket.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return lower_bound(b).clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Summary in microseconds.
    pub fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1000.0;
        if self.total == 0 {
            return LatencySummary::default();
        }
        LatencySummary {
            samples: self.total,
            min_us: us(self.min),
            p50_us: us(self.quantile(0.5)),
            p99_us: us(self.quantile(0.99)),
            p999_us: us(self.quantile(0.999)),
            max_us: us(self.max),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in [
            0u64,
            1,
            15,
            16,
            17,
            31,
            32,
            1000,
            4096,
            1 << 40,
            u64::MAX / 2,
        ] {
            let b = bucket(v);
            assert!(b >= last);
            last = b;
            let lb = lower_bound(b);
            assert!(lb <= v, "{v}: {lb}");
            assert!(v - lb <= v / 16 + 1, "{v}: {lb}");
        }
    }

    #[test]
    fn percentiles() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.samples, 1000);
        assert!((s.p50_us - 500.0).abs() / 500.0 < 0.07, "{s:?}");
        assert!((s.p99_us - 990.0).abs() / 990.0 < 0.07, "{s:?}");
        assert_eq!(s.max_us, 1000.0);
        assert_eq!(s.min_us, 1.0);
    }
}
