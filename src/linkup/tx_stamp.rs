//! Kernel TX time stamps for the peer-delay frames that need one (Pdelay_Req → T1,
//! Pdelay_Resp → T3), taken where ptp4l's software time stamping takes them.
//!
//! **Why not AF_XDP TX metadata.** On this kernel (6.18) a UMEM registered with
//! `tx_metadata_len` and `XDP_UMEM_TX_METADATA_LEN`, and a descriptor with `XDP_TX_METADATA`
//! and `XDP_TXMD_FLAGS_TIMESTAMP`, does get `completion.tx_timestamp` filled in copy mode
//! (veth). But copy mode fills it when the skb is freed (`xsk_destruct_skb`, "sw completion
//! timestamp, not a real one"), and on veth the skb is freed only after the peer has received
//! it: in 10 of 10 frames the completion stamp came 2.6–4.7 µs *after* the peer's
//! SO_TIMESTAMPING RX stamp of the same frame. Used as T1 or T3 it makes the link look that
//! much shorter (negative on veth). (libxdp 1.6, under xsk-rs 0.11, also has no way to register
//! the UMEM with a metadata length.)
//!
//! **What is used instead** is what ptp4l does: the frame is sent on an AF_PACKET socket bound to
//! the port with `SO_TIMESTAMPING` = `SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE |
//! SOF_TIMESTAMPING_OPT_TSONLY`; the kernel stamps it in the driver's transmit
//! (`skb_tx_timestamp`, at the start of `veth_xmit` on veth) and hands the stamp back on the
//! socket's error queue. One send, one poll and one or two `recvmsg` per stamped frame: peer
//! delay sends a few frames a second, never on the data path.
//!
//! **Clock domains.** The stamp is CLOCK_REALTIME; our RX stamps (`bpf_ktime_get_ns`) and the
//! rest of the link-up code are CLOCK_MONOTONIC. Each stamp is converted with the offset
//! REALTIME − MONOTONIC sampled right after it arrives (MONOTONIC read on both sides of one
//! REALTIME read, the midpoint taken): [`ClockOffset`].

use std::{
    io,
    os::fd::{AsFd, AsRawFd},
    time::Duration,
};

use thiserror::Error;

use crate::dataplane::af_packet::RawSender;

/// How long `lossless measure` waits for the kernel's TX stamp of one frame: ptp4l's
/// `tx_timestamp_timeout` default. A software stamp is taken within the send (veth, and any
/// driver calling `skb_tx_timestamp` in its xmit), so it is normally on the error queue when
/// `sendto` returns and this bounds only a stamp that comes late (a frame a qdisc held).
pub const STAMP_TIMEOUT: Duration = Duration::from_millis(1);

/// The same for a forwarding or generating thread, which must not stall: a stamp this late is
/// given up (counted in `missed`; the user-space time stands in).
pub const DATAPLANE_STAMP_TIMEOUT: Duration = Duration::from_micros(50);

/// Errors of the stamping socket.
#[derive(Debug, Error)]
pub enum TxStampError {
    /// The interface has no index (does not exist in this namespace).
    #[error("interface {0} not found")]
    NoInterface(String),
    /// A socket call failed.
    #[error("{call}: {source}")]
    Io {
        /// The call.
        call: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The kernel took fewer bytes than the frame.
    #[error("short send: {sent} of {len} bytes")]
    ShortSend {
        /// Bytes sent.
        sent: usize,
        /// Frame length.
        len: usize,
    },
}

fn io_err(call: &'static str) -> TxStampError {
    TxStampError::Io {
        call,
        source: io::Error::last_os_error(),
    }
}

/// REALTIME − MONOTONIC, in ns, from one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC, ns.
    pub realtime_minus_mono: i64,
    /// The sample's uncertainty: half the time between the two MONOTONIC reads, ns.
    pub uncertainty_ns: u64,
}

impl ClockOffset {
    /// The offset from MONOTONIC `mono_before`, REALTIME `real`, MONOTONIC `mono_after`,
    /// read in that order: the REALTIME read is placed at the midpoint of the two others.
    pub fn from_sample(mono_before: u64, real: u64, mono_after: u64) -> Self {
        let (lo, hi) = (mono_before.min(mono_after), mono_before.max(mono_after));
        let mid = lo + (hi - lo) / 2;
        ClockOffset {
            realtime_minus_mono: real as i64 - mid as i64,
            uncertainty_ns: (hi - lo) / 2,
        }
    }

    /// Samples the two clocks now.
    pub fn sample() -> Self {
        let a = clock_ns(libc::CLOCK_MONOTONIC);
        let r = clock_ns(libc::CLOCK_REALTIME);
        let b = clock_ns(libc::CLOCK_MONOTONIC);
        Self::from_sample(a, r, b)
    }

    /// A CLOCK_REALTIME time as CLOCK_MONOTONIC (0 if it would fall before boot).
    pub fn realtime_to_mono(self, real_ns: u64) -> u64 {
        (real_ns as i128 - self.realtime_minus_mono as i128).clamp(0, u64::MAX as i128) as u64
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// An AF_PACKET socket on one interface that sends a frame and returns the kernel's software
/// TX stamp of it, as CLOCK_MONOTONIC ns.
#[derive(Debug)]
pub struct TxStamper {
    raw: RawSender,
    /// How long [`TxStamper::send`] waits for a stamp.
    timeout: Duration,
    /// Stamps that did not come within the timeout.
    pub missed: u64,
}

impl TxStamper {
    /// Opens the socket on `iface` (needs CAP_NET_RAW), waiting up to `timeout` for each
    /// stamp. It is bound with protocol 0, so it receives nothing: RX stays with the port (and
    /// its XDP stamps).
    pub fn open(iface: &str, timeout: Duration) -> Result<Self, TxStampError> {
        let raw = RawSender::open(iface).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => TxStampError::NoInterface(iface.to_string()),
            _ => TxStampError::Io {
                call: "AF_PACKET socket",
                source,
            },
        })?;
        let flags: libc::c_uint = libc::SOF_TIMESTAMPING_TX_SOFTWARE
            | libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        // SAFETY: SO_TIMESTAMPING takes a c_uint (or so_timestamping); `flags` lives across
        // the call.
        let r = unsafe {
            libc::setsockopt(
                raw.as_fd().as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPING,
                &flags as *const libc::c_uint as *const libc::c_void,
                std::mem::size_of::<libc::c_uint>() as u32,
            )
        };
        if r < 0 {
            return Err(io_err("setsockopt(SO_TIMESTAMPING)"));
        }
        Ok(TxStamper {
            raw,
            timeout,
            missed: 0,
        })
    }

    /// Sends `frame` (a whole Ethernet frame) and waits up to its timeout for its
    /// kernel TX stamp; returns it as CLOCK_MONOTONIC ns, or `None` if none came (the frame
    /// was sent all the same).
    pub fn send(&mut self, frame: &[u8]) -> Result<Option<u64>, TxStampError> {
        // A stamp left from a frame whose wait timed out must not be taken for this one.
        while self.read_stamp()?.is_some() {}
        let n = self.raw.send(frame).map_err(|source| TxStampError::Io {
            call: "sendto(AF_PACKET)",
            source,
        })?;
        if n != frame.len() {
            return Err(TxStampError::ShortSend {
                sent: n,
                len: frame.len(),
            });
        }
        let deadline = std::time::Instant::now() + self.timeout;
        loop {
            if let Some(real) = self.read_stamp()? {
                return Ok(Some(ClockOffset::sample().realtime_to_mono(real)));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                self.missed += 1;
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: self.raw.as_fd().as_raw_fd(),
                events: 0, // the error queue shows as POLLERR, always reported
                revents: 0,
            };
            // ppoll: poll's milliseconds would round the 50 us a forwarding thread waits up to
            // a whole millisecond.
            let wait = timespec(left);
            // SAFETY: one valid pollfd and a valid timespec; no signal mask.
            let r = unsafe { libc::ppoll(&mut pfd, 1, &wait, std::ptr::null()) };
            if r < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Err(io_err("poll"));
            }
        }
    }

    /// The next software stamp on the error queue (CLOCK_REALTIME ns), skipping messages
    /// without one; `None` when the queue is empty.
    fn read_stamp(&mut self) -> Result<Option<u64>, TxStampError> {
        loop {
            // u64 array: cmsg headers need 8-byte alignment.
            let mut control = [0u64; 64];
            let mut data = [0u8; 64];
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
            // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&control);
            // SAFETY: `msg` points at live buffers of the sizes it states.
            let n = unsafe {
                libc::recvmsg(
                    self.raw.as_fd().as_raw_fd(),
                    &mut msg,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => {
                        return Err(TxStampError::Io {
                            call: "recvmsg(MSG_ERRQUEUE)",
                            source: e,
                        })
                    }
                }
            }
            // SAFETY: `msg` was filled by recvmsg; CMSG_* walk its control buffer within
            // msg_controllen, and a SCM_TIMESTAMPING payload is three timespecs (the first
            // is the software stamp).
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET
                        && (*c).cmsg_type == libc::SCM_TIMESTAMPING
                    {
                        let ts =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                        if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                            return Ok(Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64));
                        }
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
        }
    }
}

/// `d` as a `timespec`, to the nanosecond.
fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: libc::c_long::from(d.subsec_nanos() as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait for a stamp keeps its microseconds (poll's milliseconds made 50 us a 1 ms
    /// block of the forwarding thread).
    #[test]
    fn a_stamp_wait_keeps_its_microseconds() {
        let t = timespec(Duration::from_micros(50));
        assert_eq!((t.tv_sec, t.tv_nsec), (0, 50_000));
        let t = timespec(Duration::from_nanos(2_000_000_123));
        assert_eq!((t.tv_sec, t.tv_nsec), (2, 123));
    }

    #[test]
    fn offset_places_the_realtime_read_at_the_midpoint() {
        // MONOTONIC 1,000,000 and 1,000,200 around a REALTIME read of 1.7e18.
        let o = ClockOffset::from_sample(1_000_000, 1_700_000_000_000_000_000, 1_000_200);
        assert_eq!(o.realtime_minus_mono, 1_700_000_000_000_000_000 - 1_000_100);
        assert_eq!(o.uncertainty_ns, 100);
        // Converting the REALTIME read back lands on the midpoint.
        assert_eq!(o.realtime_to_mono(1_700_000_000_000_000_000), 1_000_100);
        // A stamp 5 µs earlier in REALTIME is 5 µs earlier in MONOTONIC.
        assert_eq!(
            o.realtime_to_mono(1_700_000_000_000_000_000 - 5_000),
            995_100
        );
    }

    #[test]
    fn differences_survive_the_conversion() {
        // T1 (converted) and T4 (already MONOTONIC) must give the same difference as the two
        // clocks would have had on one clock: the conversion is a pure shift.
        let o = ClockOffset::from_sample(50_000_000, 1_763_000_000_123_456_789, 50_000_400);
        let t1_real = 1_763_000_000_123_450_000u64;
        let t1 = o.realtime_to_mono(t1_real);
        assert_eq!(t1, 50_000_200 - 6_789);
        let t4 = t1 + 3_210;
        assert_eq!(t4 - t1, 3_210);
    }

    #[test]
    fn reversed_reads_and_times_before_boot() {
        // A sample whose reads came back in the other order still has a midpoint.
        let o = ClockOffset::from_sample(1_200, 10_000, 1_000);
        assert_eq!(o.realtime_minus_mono, 10_000 - 1_100);
        // A REALTIME time before boot clamps to 0 rather than wrapping.
        assert_eq!(o.realtime_to_mono(5), 0);
    }

    #[test]
    fn a_live_sample_matches_the_clocks() {
        let o = ClockOffset::sample();
        let mono = crate::dataplane::clock::now_ns();
        let real = clock_ns(libc::CLOCK_REALTIME);
        let back = o.realtime_to_mono(real);
        // Within a millisecond even on a busy VM (no step of the clock in between).
        assert!(back.abs_diff(mono) < 1_000_000, "{back} vs {mono}");
    }

    #[test]
    fn loopback_stamps_a_frame_between_the_reads_around_its_send() {
        // Needs CAP_NET_RAW (the tests run as root); `lo` stamps in loopback_xmit.
        let mut s = TxStamper::open("lo", STAMP_TIMEOUT).expect("AF_PACKET socket on lo");
        let mut frame = [0u8; 68];
        frame[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
        frame[12..14].copy_from_slice(&0x88f7u16.to_be_bytes());
        for _ in 0..3 {
            let before = crate::dataplane::clock::now_ns();
            let t = s.send(&frame).expect("send").expect("a stamp");
            let after = crate::dataplane::clock::now_ns();
            // The stamp, converted to MONOTONIC, falls inside the send (a few µs of slack
            // for the offset sample's uncertainty).
            assert!(
                t + 5_000 >= before && t <= after + 5_000,
                "{before} <= {t} <= {after}"
            );
        }
        assert_eq!(s.missed, 0);
    }

    #[test]
    fn opening_a_missing_interface_fails() {
        assert!(matches!(
            TxStamper::open("no-such-if0", STAMP_TIMEOUT),
            Err(TxStampError::NoInterface(_))
        ));
    }
}
