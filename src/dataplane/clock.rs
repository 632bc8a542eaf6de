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
