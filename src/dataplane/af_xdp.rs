//! AF_XDP port: one socket per (interface, queue), all of a worker's sockets sharing its UMEM.

use std::{
    os::fd::{AsRawFd, RawFd},
    time::{Duration, Instant},
};

use xsk_rs::{
    config::{BindFlags, Interface, LibxdpFlags, SocketConfig},
    CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue,
};

use super::{
    clock::ArrivedBy,
    hwstamp::{DomainMap, HwClock},
    ingress::{FillRing, IngressTracker, RxBacklog},
    pool::{
        control_reserve, Frame, FramePool, JUMBO_MAX_FRAME, MAX_CHAIN, XDP_PKT_CONTD, XSK_MAX_FRAME,
    },
    port::{iface_mac, FillDepth, KernelDrops, Port, PortError, RxFrame, Stamping},
    rx_meta::{RxMeta, RxStamp},
    xdp_prog::XdpProgram,
};
use crate::fc::PRIORITIES;
use crate::wire::MacAddr;

/// Descriptors per RX and TX ring. The RX ring holds what arrives while the worker is not
/// running, so it is as deep as the fill ring can be.
const RING: u32 = 8192;
/// Frames kept in the fill ring at [`FillDepth::Deep`] (at most; and at most a quarter of the
/// pool, so a small pool shared by two ports still has frames for queues and TX). Half of it
/// is the receiver's slack after it pauses upstream for a short fill ring (8,192 frames:
/// 1 ms of 128-byte frames at 10 Gbit/s, counting preamble and gap).
const FILL_TARGET: usize = 8192;
/// Frames kept in the fill ring at [`FillDepth::Lean`]: libxdp's default ring, 2.5 ms of
/// 1,500-byte frames at 10 Gbit/s.
const LEAN_FILL_TARGET: usize = 2048;
/// Largest batch handled per call.
pub const MAX_BATCH: usize = 256;
/// Frames handed to the TX ring and not yet completed, at most. A frame in the TX ring is
/// committed: a pause that arrives after it cannot hold it back. Bounding the ring's depth
/// bounds what leaves after a PAUSE/PFC/SFC pause (on copy-mode veth a kick sends only a
/// few dozen frames, so an unbounded ring filled its thousands of slots whenever the sender's CPU
/// was busy: megabytes beyond XOFF).
const TX_IN_FLIGHT: usize = 128;
/// An RX stamp older than this is not believed (it would be a stale value in the metadata).
const MAX_STAMP_AGE_NS: u64 = 1_000_000_000;

/// A frame's RX time on CLOCK_MONOTONIC: the program's stamp, converted from the NIC's clock
/// if it is a hardware stamp; `None` if there is none or it is not believable (more than
/// [`MAX_STAMP_AGE_NS`] from the receive time `now`: a stale value, or a PHC stepped since the
/// last sample). A stamp after `now` is a frame that arrived after the worker read its clock
/// for the batch ([`ArrivedBy`] bounds it).
#[inline]
fn rx_time(stamp: RxStamp, hw: Option<&DomainMap>, now: u64) -> Option<u64> {
    let t = match stamp {
        RxStamp::Xdp(t) => t,
        RxStamp::Hardware(t) => hw.and_then(|c| c.to_mono(t)).unwrap_or(0),
        RxStamp::None => 0,
    };
    (t != 0 && t.abs_diff(now) < MAX_STAMP_AGE_NS).then_some(t)
}

/// Buffers a socket keeps in its fill ring over a pool of `pool_frames` frames at `depth`:
/// at most 8,192 (2,048 when lean) and at most a quarter of the pool.
pub fn fill_target(pool_frames: u32, depth: FillDepth) -> usize {
    let most = match depth {
        FillDepth::Deep => FILL_TARGET,
        FillDepth::Lean => LEAN_FILL_TARGET,
    };
    most.min(pool_frames as usize / 4).max(64)
}

/// Buffers each of `sockets` sockets keeps in its fill ring when they split one pool of
/// `pool_frames` frames at `depth` ([`AfXdpOptions::fill_share`]): what one socket would keep,
/// divided between them.
pub fn shared_fill_target(pool_frames: u32, depth: FillDepth, sockets: u32) -> usize {
    fill_target(pool_frames, depth).div_ceil(sockets.max(1) as usize)
}

/// Options for opening an AF_XDP port.
#[derive(Debug, Clone, Copy, Default)]
pub struct AfXdpOptions {
    /// Force copy mode (veth supports nothing else).
    pub force_copy: bool,
    /// Bind with `XDP_USE_SG` (kernel 6.6+): a frame longer than one UMEM chunk arrives, and
    /// leaves, as several descriptors chained with `XDP_PKT_CONTD`, up to
    /// [`JUMBO_MAX_FRAME`] bytes. Off, a socket carries one chunk's worth
    /// ([`super::pool::XSK_MAX_FRAME`]); it costs nothing per frame either way, but a driver
    /// without multi-buffer support refuses the bind, so it is asked for only where a port's
    /// MTU needs it.
    pub multi_buffer: bool,
    /// Sockets that split the pool's receive buffers, this one included (0 or 1: it alone): a
    /// tool that binds every RX queue of an interface over one pool keeps each socket's fill
    /// ring to its share ([`shared_fill_target`]), so that together they hold what one socket
    /// would, and the pool keeps frames for queues and TX.
    pub fill_share: u32,
}

/// A received frame still arriving in further descriptors.
#[derive(Debug)]
struct Partial {
    /// The head chunk, with the frame's stamp.
    rx: RxFrame,
    chunks: usize,
}

/// An AF_XDP socket bound to one queue of an interface.
pub struct AfXdpPort {
    name: String,
    mac: MacAddr,
    tx: TxQueue,
    rx: RxQueue,
    fq: FillQueue,
    cq: CompQueue,
    fd: RawFd,
    scratch: Vec<FrameDesc>,
    /// The frames of a fill batch until the fill ring took them (reused).
    filling: Vec<Frame>,
    /// Buffers handed to the kernel: in the fill ring, or holding a frame in the RX ring.
    in_fill: usize,
    /// Frame bytes one receive buffer takes on a multi-buffer socket, [`XSK_MAX_FRAME`]; 0
    /// where a frame takes one buffer.
    rx_chunk: usize,
    /// The pool's size, which bounds the fill target.
    pool_frames: u32,
    /// The sockets splitting the pool's fill buffers ([`AfXdpOptions::fill_share`]).
    fill_share: u32,
    fill_target: usize,
    /// Descriptors (chunks) in the TX ring and not yet completed.
    in_tx: usize,
    /// A frame whose first descriptors were consumed and whose last was not yet.
    partial: Option<Partial>,
    /// What this socket's RX ring holds, from the XDP program's counters.
    ingress: Option<IngressTracker>,
    /// The NIC's clock, where the program gives hardware RX stamps.
    hw_clock: Option<HwClock>,
    /// The socket is bound in zero-copy mode: the NIC, not the kernel's copy, reads what it
    /// sends ([`FramePool::prefetch_rx`]).
    zero_copy: bool,
    /// Frames the kernel took from the TX ring and dropped ([`Port::tx_refusals`]).
    tx_refused: u64,
    /// The port's egress is held ([`Port::hold_tx`]): no kicks from `reclaim`.
    tx_held: bool,
}

// SAFETY: the rings are only used from the worker thread that owns the port.
unsafe impl Send for AfXdpPort {}

/// Whether the AF_XDP socket `fd` is bound in zero-copy mode (`XDP_OPTIONS`); copy mode if
/// the kernel does not say.
fn is_zero_copy(fd: RawFd) -> bool {
    let mut opts = libc::xdp_options { flags: 0 };
    let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
    // SAFETY: `opts` and `len` are valid for the kernel to write, `len` their size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
            (&mut opts as *mut libc::xdp_options).cast(),
            &mut len,
        )
    };
    rc == 0 && opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0
}

fn is_transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::ENETDOWN)
    )
}

impl AfXdpPort {
    /// Asks the kernel to transmit what the TX ring holds. In copy mode it sends frame after
    /// frame and stops at the first it drops (the interface has no carrier, or its driver
    /// refused the frame): that one is completed unsent, and `sendto` says EBUSY. Counted
    /// here; the rest wait in the ring for the next kick.
    /// (xsk-rs's `TxQueue::wakeup` makes the same call but keeps EBUSY to itself.)
    fn kick(&mut self) -> std::io::Result<()> {
        // SAFETY: a zero-length sendto(2) on our own socket: the kernel reads no buffer.
        let rc = unsafe {
            libc::sendto(
                self.fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc >= 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBUSY) {
            self.tx_refused += 1;
        }
        Err(e)
    }

    /// Creates a socket on `iface`/`queue` over `pool`'s UMEM and registers it with `prog`.
    pub fn open(
        pool: &mut FramePool,
        prog: &XdpProgram,
        queue: u32,
        opts: AfXdpOptions,
    ) -> Result<Self, PortError> {
        let iface = prog.iface().to_string();
        let failed = |reason: String, source| PortError::Open {
            backend: "AF_XDP",
            iface: iface.clone(),
            queue,
            reason,
            source,
        };
        let err = |reason: String| failed(reason, None);
        let umem = pool
            .as_umem()
            .ok_or_else(|| err("the worker's frame pool is not a UMEM".into()))?
            .clone();
        let mut bind = BindFlags::XDP_USE_NEED_WAKEUP;
        if opts.force_copy {
            bind |= BindFlags::XDP_COPY;
        }
        if opts.multi_buffer {
            bind |= BindFlags::XDP_USE_SG;
        }
        let config = SocketConfig::builder()
            .rx_queue_size(RING.try_into().expect("power of two"))
            .tx_queue_size(RING.try_into().expect("power of two"))
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .bind_flags(bind)
            .build();
        let name: Interface = iface.parse().map_err(|e| err(format!("{e:?}")))?;
        // A re-bind right after an unclean exit can get EBUSY for about a second: retry.
        let deadline = Instant::now() + Duration::from_secs(3);
        let (tx, rx, rings) = loop {
            // SAFETY: the UMEM outlives the socket (the socket holds a clone of it).
            match unsafe { Socket::new(config, &umem, &name, queue) } {
                Ok(s) => break s,
                Err(e) => {
                    let e = failed(format!("{e}: {e:?}"), Some(Box::new(e)));
                    if !(e.is_busy() && Instant::now() < deadline) {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        let (fq, cq) =
            rings.ok_or_else(|| err("socket came without fill/completion rings".into()))?;
        let fd = rx.fd().as_raw_fd();
        let zero_copy = is_zero_copy(fd);
        tracing::debug!(iface = %iface, queue, zero_copy, "AF_XDP socket bound");
        if opts.multi_buffer {
            // The program may now redirect frames as long as the socket takes.
            prog.set_socket_max_frame(JUMBO_MAX_FRAME as u32)
                .map_err(|e| err(e.to_string()))?;
        }
        let mut port = AfXdpPort {
            mac: iface_mac(&iface).map_err(|e| err(format!("reading its MAC address: {e}")))?,
            tx,
            rx,
            fq,
            cq,
            fd,
            scratch: vec![FrameDesc::default(); (MAX_BATCH * MAX_CHAIN).max(FILL_TARGET)],
            filling: Vec::with_capacity(FILL_TARGET),
            in_fill: 0,
            rx_chunk: if opts.multi_buffer { XSK_MAX_FRAME } else { 0 },
            pool_frames: pool.capacity(),
            fill_share: opts.fill_share,
            fill_target: shared_fill_target(pool.capacity(), FillDepth::Deep, opts.fill_share),
            in_tx: 0,
            partial: None,
            ingress: IngressTracker::new(prog.ingress().clone(), queue),
            hw_clock: prog.hw_rx_phc().and_then(|phc| {
                HwClock::open(phc)
                    .map_err(|e| {
                        tracing::warn!(iface = %iface, phc, error = %e, "cannot read the PHC: RX stamps from XDP");
                    })
                    .ok()
            }),
            name: iface.clone(),
            zero_copy,
            tx_refused: 0,
            tx_held: false,
        };
        // Buffers first, then the program may redirect to the socket: registered over an
        // empty fill ring, a frame arriving in between was a kernel drop (fill_ring_empty),
        // seen once on a lossless priority in tests/under_load.rs's two-daemon chain.
        port.refill(pool)?;
        // The stall guards know the fill ring from the start, before any frame arrives.
        port.rx_backlog();
        prog.register_socket(queue, fd)
            .map_err(|e| err(e.to_string()))?;
        Ok(port)
    }

    fn refill(&mut self, pool: &mut FramePool) -> Result<(), PortError> {
        // The pool's last frames are kept for control frames (a PFC XOFF must always be
        // buildable); below that the fill ring runs short, which is itself congestion.
        let want = self.fill_target.saturating_sub(self.in_fill).min(
            pool.available()
                .saturating_sub(control_reserve(pool.capacity())),
        );
        if want < 32 && self.in_fill > 0 {
            return Ok(()); // refill in batches
        }
        let mut n = 0;
        self.filling.clear();
        while n < want {
            let Some(frame) = pool.alloc() else { break };
            self.scratch[n] = pool.fill_desc(&frame);
            self.filling.push(frame);
            n += 1;
        }
        // SAFETY: the frames are free (just taken from the pool, their tokens in `filling`)
        // and belong to this UMEM.
        let done = unsafe { self.fq.produce(&self.scratch[..n]) };
        // The ring took the first `done`: their tokens are given up, the frames are the
        // kernel's until the RX ring hands them back. The rest go back to the pool.
        self.filling.drain(..done);
        for frame in self.filling.drain(..) {
            pool.release(frame);
        }
        self.in_fill += done;
        if done > 0 && self.fq.needs_wakeup() {
            if let Err(e) = self.fq.wakeup(self.rx.fd_mut(), 0) {
                if !is_transient(&e) {
                    return Err(PortError::Io {
                        iface: self.name.clone(),
                        source: e,
                    });
                }
            }
        }
        Ok(())
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn mac(&self) -> MacAddr {
        self.mac
    }

    fn recv(
        &mut self,
        pool: &mut FramePool,
        out: &mut Vec<RxFrame>,
        max: usize,
        now: u64,
    ) -> Result<usize, PortError> {
        let max = max.min(MAX_BATCH);
        if let Some(t) = &mut self.ingress {
            t.turn();
        }
        // SAFETY: the descriptors are written by the kernel for frames of this UMEM.
        let n = unsafe { self.rx.consume(&mut self.scratch[..max]) };
        if let Some(c) = &mut self.hw_clock {
            c.refresh(now);
        }
        for d in &self.scratch[..n] {
            pool.prefetch_rx(d, !self.zero_copy);
        }
        let (mut frames, mut arrived) = (0, ArrivedBy::new(now));
        for d in &self.scratch[..n] {
            // SAFETY: consumed from this socket's RX ring just above: the kernel hands the
            // frame back (its token went with the fill ring).
            let seg = unsafe { pool.adopt_desc(d) };
            let more = d.options() & XDP_PKT_CONTD != 0;
            if let Some(p) = &mut self.partial {
                // A continuation chunk: chained behind the head, whose metadata counted
                // the whole frame; its token becomes part of the head's.
                pool.chain(&mut p.rx.frame, seg);
                p.chunks += 1;
                if !more || p.chunks > MAX_CHAIN {
                    // (A chain longer than any frame the program redirects cannot happen;
                    // bounded anyway, the rest would arrive as a frame of its own.)
                    let p = self.partial.take().expect("a partial frame");
                    out.push(p.rx);
                    frames += 1;
                }
                continue;
            }
            let meta = RxMeta::decode(pool.take_meta(&seg).unwrap_or_default());
            if let (Some(t), Some(s)) = (&mut self.ingress, meta.stamps) {
                t.on_taken(s);
            }
            let stamp = rx_time(meta.stamp, self.hw_clock.as_ref().map(HwClock::map), now)
                .map(|t| arrived.clamp(t));
            let rx = RxFrame {
                frame: seg,
                rx_ns: stamp.unwrap_or(now),
                stamped: stamp.is_some(),
            };
            if more {
                self.partial = Some(Partial { rx, chunks: 1 });
            } else {
                out.push(rx);
                frames += 1;
            }
        }
        if let Some(t) = &mut self.ingress {
            if n > 0 {
                t.publish();
            }
            if n < max {
                t.on_ring_empty(now);
            }
        }
        self.in_fill -= n.min(self.in_fill);
        self.refill(pool)?;
        Ok(frames)
    }

    fn tx_room(&mut self) -> usize {
        let free = self.tx.nb_free(MAX_BATCH as u32) as usize;
        free.min(TX_IN_FLIGHT.saturating_sub(self.in_tx))
    }

    fn send(&mut self, pool: &mut FramePool, frames: &mut Vec<Frame>) -> Result<usize, PortError> {
        let batch = &frames[..frames.len().min(MAX_BATCH)];
        // The ring takes a batch whole or not at all: only whole frames that fit go in it
        // (a chained frame is several descriptors).
        // The in-flight bound ([`Port::tx_room`]) counts descriptors: a batch of chained
        // frames stops at it, but its first frame always goes (rather than never leave).
        let free = self.tx.nb_free((MAX_BATCH * MAX_CHAIN) as u32) as usize;
        let budget = TX_IN_FLIGHT.saturating_sub(self.in_tx);
        let (mut n, mut descs) = (0, 0);
        for f in batch {
            let k = if pool.is_chained(f) {
                pool.chain_len(f)
            } else {
                1
            };
            if descs + k > free || (k > 1 && descs > 0 && descs + k > budget) {
                break;
            }
            descs += pool.tx_descs(f, &mut self.scratch[descs..descs + k]);
            n += 1;
        }
        // SAFETY: the frames are owned by the caller (their tokens are in `frames`), who
        // hands them to the kernel here.
        let done = unsafe { self.tx.produce(&self.scratch[..descs]) };
        if done < descs {
            // Refused after all: the frames stay the caller's (their tokens never left
            // `frames`), as single chunks now; put their chains back.
            // SAFETY: the descriptors were built just above by `tx_descs` from the frames
            // still in `frames`, and the ring took none of them.
            unsafe { pool.relink(&self.scratch[..descs]) };
            n = 0;
        }
        // The kernel owns what the ring took: their tokens are given up here, and the
        // completion ring hands each chunk back ([`Port::reclaim`]).
        frames.drain(..n);
        self.in_tx += done;
        // Held: the frames wait in the ring for the hold's end, when `reclaim` kicks.
        if done > 0 && !self.tx_held {
            if let Err(e) = self.kick() {
                if !is_transient(&e) {
                    return Err(PortError::Io {
                        iface: self.name.clone(),
                        source: e,
                    });
                }
            }
        }
        Ok(n)
    }

    fn reclaim(&mut self, pool: &mut FramePool) -> Result<(), PortError> {
        let cap = self.scratch.len();
        // SAFETY: completed descriptors are frames of this UMEM the kernel is done with.
        let n = unsafe { self.cq.consume(&mut self.scratch[..cap]) };
        for d in &self.scratch[..n] {
            // SAFETY: consumed from this socket's completion ring just above: the kernel is
            // done with the chunk, whose token was given up when it was sent.
            let chunk = unsafe { pool.adopt_desc(d) };
            pool.release(chunk);
        }
        self.in_tx -= n.min(self.in_tx);
        // Copy-mode TX sends a bounded batch per kick; keep kicking while frames are
        // outstanding, unless held: a kick into a dead link loses one frame each time.
        if self.in_tx > 0 && !self.tx_held && self.tx.needs_wakeup() {
            let _ = self.kick();
        }
        self.refill(pool)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }

    fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    fn tx_refusals(&self) -> u64 {
        self.tx_refused
    }

    fn tx_in_flight(&self) -> usize {
        self.in_tx
    }

    fn rx_chunk(&self) -> u64 {
        self.rx_chunk as u64
    }

    fn hold_tx(&mut self, held: bool) {
        self.tx_held = held;
    }

    fn give_up_tx(&mut self, pool: &mut FramePool) {
        // A kick into a dead link completes the ring's first frame unsent and says so (EBUSY,
        // counted by `kick`); into a live one it sends a batch (EAGAIN: more to send). The
        // completions are taken back after each, so this ends within one kick per frame.
        self.tx_held = false;
        for _ in 0..self.in_tx {
            if self.in_tx == 0 {
                break;
            }
            if let Err(e) = self.kick() {
                if !matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)
                ) {
                    break; // (the interface itself down: the kernel takes nothing)
                }
            }
            if self.reclaim(pool).is_err() {
                break;
            }
        }
    }

    fn set_fill_depth(&mut self, depth: FillDepth) -> u64 {
        // Deeper: the next refill tops up. Shallower: the ring drains to it as frames
        // arrive, and refills resume below it.
        self.fill_target = shared_fill_target(self.pool_frames, depth, self.fill_share);
        self.fill_target as u64
    }

    fn counts_arrivals(&self) -> bool {
        self.ingress.is_some()
    }

    fn rx_backlog(&mut self) -> RxBacklog {
        let Some(t) = &mut self.ingress else {
            return RxBacklog::default();
        };
        t.backlog(Some(FillRing {
            in_fill: self.in_fill as u64,
            target: self.fill_target as u64,
            chunk: self.rx_chunk as u64,
        }))
    }

    fn backlog_drops(&self) -> [u64; PRIORITIES] {
        self.ingress
            .as_ref()
            .map_or([0; PRIORITIES], IngressTracker::lossy_drops)
    }

    fn oversize_drops(&self) -> [u64; PRIORITIES] {
        self.ingress
            .as_ref()
            .map_or([0; PRIORITIES], IngressTracker::oversize_drops)
    }

    fn rx_stamping(&self) -> Stamping {
        // Our XDP program stamps every frame it redirects: with the NIC's stamp where the
        // device-bound program gets one (RX hardware stamping on, a PHC to convert from),
        // else with bpf_ktime_get_ns (a stamp missing or stale falls back to the receive
        // time, which is then what it is: rare, and only later).
        if self.hw_clock.is_some() {
            Stamping::Hardware
        } else {
            Stamping::Xdp
        }
    }

    fn kernel_drops(&self) -> KernelDrops {
        match self.rx.fd().xdp_statistics() {
            Ok(s) => KernelDrops {
                rx_dropped: s.rx_dropped(),
                rx_ring_full: s.rx_ring_full(),
                fill_ring_empty: s.rx_fill_ring_empty_descs(),
                tx_invalid: s.tx_invalid_descs(),
                tx_refused: self.tx_refused,
            },
            Err(_) => KernelDrops {
                tx_refused: self.tx_refused,
                ..KernelDrops::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 5_000_000_000;

    #[test]
    fn fill_rings_are_deep_or_lean_and_at_most_a_quarter_of_the_pool() {
        assert_eq!(fill_target(32768, FillDepth::Deep), 8192);
        assert_eq!(fill_target(32768, FillDepth::Lean), 2048);
        // A small pool bounds both: two ports must still leave frames for queues and TX.
        assert_eq!(fill_target(4096, FillDepth::Deep), 1024);
        assert_eq!(fill_target(4096, FillDepth::Lean), 1024);
        assert_eq!(fill_target(100, FillDepth::Lean), 64);
        // Sockets splitting a pool split what one would keep, not the pool.
        assert_eq!(shared_fill_target(32768, FillDepth::Deep, 1), 8192);
        assert_eq!(shared_fill_target(32768, FillDepth::Deep, 2), 4096);
        assert_eq!(shared_fill_target(65536, FillDepth::Deep, 2), 4096);
        assert_eq!(shared_fill_target(32768, FillDepth::Deep, 0), 8192);
    }

    #[test]
    fn a_socket_the_kernel_says_nothing_about_counts_as_copy_mode() {
        // Not an AF_XDP socket: getsockopt fails, and the port then hints the data too.
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
        assert!(!is_zero_copy(a.as_raw_fd()));
        assert!(!is_zero_copy(-1));
    }

    #[test]
    fn xdp_stamps_are_taken_as_they_are_unless_unbelievable() {
        assert_eq!(
            rx_time(RxStamp::Xdp(NOW - 3_000), None, NOW),
            Some(NOW - 3_000)
        );
        // A frame that arrived after the worker read its clock: its stamp (the receive
        // bounds it by the clock read again, `ArrivedBy`).
        assert_eq!(rx_time(RxStamp::Xdp(NOW + 1), None, NOW), Some(NOW + 1));
        // No stamp, one a second from now either way: none.
        assert_eq!(rx_time(RxStamp::None, None, NOW), None);
        assert_eq!(
            rx_time(RxStamp::Xdp(NOW - MAX_STAMP_AGE_NS), None, NOW),
            None
        );
        assert_eq!(
            rx_time(RxStamp::Xdp(NOW + MAX_STAMP_AGE_NS), None, NOW),
            None
        );
    }

    #[test]
    fn hardware_stamps_are_converted_from_the_phc() {
        // The PHC on TAI read 1,795,000,000 s when CLOCK_MONOTONIC read 4.9 s.
        let tai = 1_795_000_000_000_000_000u64;
        let mut map = DomainMap::default();
        map.update(tai, NOW - 100_000_000);
        // Stamped 100 ms - 2 us after that read: 2 us before now, on CLOCK_MONOTONIC.
        let hw = RxStamp::Hardware(tai + 99_998_000);
        assert_eq!(rx_time(hw, Some(&map), NOW), Some(NOW - 2_000));
        // Never a PHC time taken for a CLOCK_MONOTONIC one: without a map, none.
        assert_eq!(rx_time(hw, None, NOW), None);
        assert_eq!(rx_time(hw, Some(&DomainMap::default()), NOW), None);
        // A PHC stepped since the read puts the stamp out of range: none.
        let stepped = RxStamp::Hardware(tai + 37_000_000_000);
        assert_eq!(rx_time(stepped, Some(&map), NOW), None);
    }
}
