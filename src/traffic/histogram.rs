//! The latency histogram of the sink and the cable: an HdrHistogram sized once at creation
//! (1 ns to an hour, 3 significant digits), so recording never allocates and every
//! percentile is within 0.1 % of the true value, not a power-of-two bucket edge.

use serde::Serialize;

/// Largest latency recorded exactly (an hour); longer samples count as this.
const HIGHEST_NS: u64 = 3_600_000_000_000;
/// Significant decimal digits kept: every percentile within 0.1 % of the true value.
const DIGITS: u8 = 3;

/// Latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct Histogram {
    h: hdrhistogram::Histogram<u64>,
    /// Smallest and largest sample, exactly (the histogram keeps them to 0.1 %).
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

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            h: hdrhistogram::Histogram::new_with_bounds(1, HIGHEST_NS, DIGITS)
                .expect("constant bounds are valid"),
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Histogram {
    /// Records one sample (no allocation: the counts were sized at creation).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// The value at quantile `q` (0..=1), within 0.1 % (HdrHistogram, 3 significant digits),
    /// never outside the smallest and largest sample.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.h.is_empty() {
            return 0;
        }
        self.h.value_at_quantile(q).clamp(self.min, self.max)
    }

    /// Summary in microseconds.
    pub fn summary(&self) -> LatencySummary {
        let us = |ns: u64| ns as f64 / 1000.0;
        if self.h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            samples: self.h.len(),
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
    fn percentiles() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.samples, 1000);
        // Within 0.1 %, not at a bucket edge (2^24 ns = 16,777.216 us was one before).
        assert!((s.p50_us - 500.0).abs() / 500.0 < 0.001, "{s:?}");
        assert!((s.p99_us - 990.0).abs() / 990.0 < 0.001, "{s:?}");
        assert!((s.p999_us - 999.0).abs() / 999.0 < 0.001, "{s:?}");
        let mut h = Histogram::default();
        h.record(17_000_000);
        assert!((h.quantile(0.999) as f64 - 17e6).abs() / 17e6 < 0.001);
        assert_eq!(s.max_us, 1000.0);
        assert_eq!(s.min_us, 1.0);
    }
}
