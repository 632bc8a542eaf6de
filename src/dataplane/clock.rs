//! The dataplane's clock: CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall), the same clock
//! the XDP program stamps RX frames with (`bpf_ktime_get_ns`).

/// Nanoseconds on CLOCK_MONOTONIC.
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds on CLOCK_REALTIME, the clock of the kernel's socket timestamps (vDSO).
#[inline]
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The latest a received frame can have arrived, for a receive that was given the caller's
/// `now`: that clock was read at the start of the caller's turn, and a frame that came in
/// after it, before its ring or socket was read, carries a later stamp. Clamped to `now`, a
/// frame that a generator on this host stamped in between seemed to arrive before it was
/// sent (the sink lost its latency sample: 2-3 of the README quick start's 242,000 frames
/// in most runs, up to 14), and a peer-delay response's T4 could come early. So a stamp past
/// what is known is checked against the clock read again: once per batch for a ring read
/// whole (AF_XDP), at most once per frame for a socket read frame by frame (AF_PACKET), and
/// never while every stamp is older than `now`.
#[derive(Debug, Clone, Copy)]
pub struct ArrivedBy {
    /// A time by which every frame taken so far had arrived.
    known: u64,
}

impl ArrivedBy {
    /// For a receive given `now`.
    #[inline]
    pub fn new(now: u64) -> Self {
        ArrivedBy { known: now }
    }

    /// `stamp`, or the clock now if that is earlier: a stamp later than the clock read after
    /// its frame was taken is not a time the frame arrived at (a converted hardware stamp a
    /// little off, a realtime clock stepped since).
    #[inline]
    pub fn clamp(&mut self, stamp: u64) -> u64 {
        if stamp <= self.known {
            return stamp;
        }
        self.known = now_ns();
        stamp.min(self.known)
    }
}

/// Sleeps until `at` on CLOCK_MONOTONIC.
pub fn sleep_until(at: u64) {
    let ts = libc::timespec {
        tv_sec: (at / 1_000_000_000) as libc::time_t,
        tv_nsec: (at % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid absolute timespec; no remainder is asked for with TIMER_ABSTIME.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_after_the_callers_clock_is_kept_unless_it_is_in_the_future() {
        let now = now_ns();
        let mut by = ArrivedBy::new(now);
        assert_eq!(by.clamp(now - 5_000), now - 5_000);
        assert_eq!(by.clamp(now), now);
        // A frame stamped after the caller read its clock, taken since: its own stamp.
        let arrived = std::iter::repeat_with(now_ns)
            .find(|&t| t > now)
            .expect("the clock moves");
        assert_eq!(by.clamp(arrived), arrived);
        // A stamp ahead of the clock: the clock, read again.
        let ahead = now_ns() + 1_000_000_000;
        let got = by.clamp(ahead);
        assert!(got >= arrived && got < ahead, "{got}");
        assert!(got <= now_ns());
    }
}
