//! How fast each priority arrives while it is free to: the rate at which a lag costs
//! headroom.
//!
//! Bytes that arrive while a threshold crossing goes unnoticed all land beyond XOFF, so the
//! headroom a lag needs is the lag times the arrival rate. The rate that counts is the one at
//! which a source sends while it may: a source held paused half the time by our own XOFFs
//! sends at twice its average meanwhile. So each interval's rate is its bytes over the time the
//! priority was *not* held paused (the congestion point's running total of XOFF time), and an
//! interval counts only when the priority was unpaused for at least a tenth of it, since a rate
//! over a sliver of time is noise. Intervals are at least [`RATE_INTERVAL_NS`] long: shorter
//! ones would read a generator's batches as rates it never keeps up. And an interval counts
//! only if the priority already arrived in the one before, so that it begins inside traffic:
//! the interval in which traffic starts holds the idle time before it, and reads a rate the
//! source never sent at (the README's quick start read 0.01-0.3 Gbit/s of its 2 Gbit/s there,
//! and the stall guard, whose wait stretches by the headroom's slack over that rate, waited
//! 1.5-2 ms instead of 0.3 until the next interval corrected it).
//!
//! Used by link-up's model (`control::link_model`, the peak since the previous measurement)
//! and by the notice term of the adaptive headroom (`dataplane::pfc_headroom`). Sans-I/O: the
//! caller passes `now` and the running totals.

use super::PRIORITIES;

/// Rates are taken over at least this long, ns.
pub const RATE_INTERVAL_NS: u64 = 40_000_000;

/// An interval counts only if the priority was unpaused for at least this part of it (1/n).
const MIN_UNPAUSED_PART: u64 = 10;

/// What a sample remembers of the previous one.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: u64,
    bytes: [u64; PRIORITIES],
    held_ns: [u64; PRIORITIES],
    /// Which priorities arrived in the interval that ended here (none for the first sample).
    flowing: [bool; PRIORITIES],
}

/// Per-priority arrival rates while unpaused, interval by interval.
#[derive(Debug, Clone, Default)]
pub struct UnpausedRate {
    last: Option<Sample>,
}

impl UnpausedRate {
    /// The running totals at `now`: `bytes` arrived and `held_ns` spent held paused per
    /// priority. Once at least [`RATE_INTERVAL_NS`] passed since the previous counted sample,
    /// returns each priority's rate over the interval in bit/s (`None` where it was paused for
    /// too much of it, or did not arrive in the interval before); before that, `None`.
    pub fn sample(
        &mut self,
        now: u64,
        bytes: &[u64; PRIORITIES],
        held_ns: &[u64; PRIORITIES],
    ) -> Option<[Option<u64>; PRIORITIES]> {
        let mut this = Sample {
            at: now,
            bytes: *bytes,
            held_ns: *held_ns,
            flowing: [false; PRIORITIES],
        };
        let Some(last) = self.last else {
            self.last = Some(this);
            return None;
        };
        let dt = now.saturating_sub(last.at);
        if dt < RATE_INTERVAL_NS {
            return None;
        }
        this.flowing = std::array::from_fn(|p| this.bytes[p] > last.bytes[p]);
        self.last = Some(this);
        Some(std::array::from_fn(|p| {
            if !last.flowing[p] {
                return None;
            }
            let held = this.held_ns[p].saturating_sub(last.held_ns[p]).min(dt);
            let unpaused = dt - held;
            if unpaused * MIN_UNPAUSED_PART < dt {
                return None;
            }
            let bytes = this.bytes[p].saturating_sub(last.bytes[p]);
            let bps = u128::from(bytes) * 8_000_000_000 / u128::from(unpaused);
            Some(bps.min(u64::MAX.into()) as u64)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(bytes: u64, held_ms: u64) -> ([u64; PRIORITIES], [u64; PRIORITIES]) {
        let (mut b, mut h) = ([0; PRIORITIES], [0; PRIORITIES]);
        b[3] = bytes;
        h[3] = held_ms * MS;
        (b, h)
    }

    #[test]
    fn rates_count_the_time_a_priority_was_free_to_send() {
        let mut r = UnpausedRate::default();
        let s = |r: &mut UnpausedRate, t: u64, (b, h): ([u64; PRIORITIES], [u64; PRIORITIES])| {
            r.sample(t * MS, &b, &h).map(|x| x[3])
        };
        assert_eq!(s(&mut r, 0, at(0, 0)), None, "the first sample starts");
        // Traffic starts: the interval holds the idle time before it, and does not count.
        assert_eq!(s(&mut r, 50, at(250_000, 0)), Some(None));
        // 50 ms at 200 Mbit/s (1.25 MB), then a sample too soon to close an interval.
        assert_eq!(s(&mut r, 100, at(1_500_000, 0)), Some(Some(200_000_000)));
        assert_eq!(s(&mut r, 110, at(1_750_000, 0)), None);
        // The next 50 ms brought 1.25 MB while held paused for 25 ms of them: 400 Mbit/s while
        // it could send.
        assert_eq!(s(&mut r, 150, at(2_750_000, 25)), Some(Some(400_000_000)));
        // Paused 48 of 50 ms: too little unpaused time to say anything.
        assert_eq!(s(&mut r, 200, at(3_250_000, 73)), Some(None));
        // The traffic ends within the next interval, which still counts (it began inside it);
        // a priority that had no traffic before says nothing.
        let (b, h) = at(3_875_000, 73);
        let rates = r.sample(250 * MS, &b, &h).unwrap();
        assert_eq!((rates[3], rates[0]), (Some(100_000_000), None));
        // Idle (a rate of nothing, after traffic), then traffic again: the first interval of
        // it does not count.
        assert_eq!(s(&mut r, 300, at(3_875_000, 73)), Some(Some(0)));
        assert_eq!(s(&mut r, 350, at(4_000_000, 73)), Some(None));
        assert_eq!(s(&mut r, 400, at(5_250_000, 73)), Some(Some(200_000_000)));
    }
}
