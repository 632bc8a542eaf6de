//! The `Port` trait: what a worker needs from a network interface, whatever the backend.

use std::os::fd::RawFd;

use serde::{Deserialize, Serialize};

use super::{
    ingress::RxBacklog,
    pool::{Frame, FramePool},
    xdp_prog::XdpCounters,
};
use crate::{
    kernel::{
        self,
        link::LinkInfo,
        netlink::{Netlink, NlError},
    },
    wire::MacAddr,
};

/// A received frame and when it arrived (CLOCK_MONOTONIC ns).
#[derive(Debug, PartialEq, Eq)]
pub struct RxFrame {
    /// The frame, now owned by the worker.
    pub frame: Frame,
    /// RX timestamp: from the XDP program where available, else the worker's clock. It may
    /// be later than the `now` the receive was given (a frame that arrived after that clock
    /// read), never later than the receive itself ([`super::clock::ArrivedBy`]).
    pub rx_ns: u64,
    /// Whether `rx_ns` is the program's (or the NIC's) stamp; false where it is the worker's
    /// clock at receipt (AF_PACKET, and a sampled port's unstamped frames:
    /// [`super::xdp_prog::IngressPolicy::sampled`]).
    pub stamped: bool,
}

/// Frames the kernel dropped on a port's socket: received ones before the worker saw them
/// (AF_XDP socket statistics), and sent ones it took and then dropped (`tx_refused`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelDrops {
    /// Dropped for reasons other than the two below.
    pub rx_dropped: u64,
    /// The RX ring was full (the worker did not keep up).
    pub rx_ring_full: u64,
    /// The fill ring was empty (no free frame to receive into).
    pub fill_ring_empty: u64,
    /// TX descriptors the kernel rejected.
    pub tx_invalid: u64,
    /// Frames the kernel took from the TX ring and dropped instead of sending (see
    /// [`Port::tx_refusals`]): the port had no carrier, or its driver would not take the frame.
    #[serde(default)]
    pub tx_refused: u64,
}

impl KernelDrops {
    /// The number of counts, as [`KernelDrops::to_array`] orders them.
    pub const LEN: usize = 5;

    /// The counts in field order, for storing them as counters.
    pub fn to_array(&self) -> [u64; Self::LEN] {
        [
            self.rx_dropped,
            self.rx_ring_full,
            self.fill_ring_empty,
            self.tx_invalid,
            self.tx_refused,
        ]
    }

    /// The counts [`KernelDrops::to_array`] gave.
    pub fn from_array(a: [u64; Self::LEN]) -> Self {
        let [rx_dropped, rx_ring_full, fill_ring_empty, tx_invalid, tx_refused] = a;
        KernelDrops {
            rx_dropped,
            rx_ring_full,
            fill_ring_empty,
            tx_invalid,
            tx_refused,
        }
    }

    /// Received frames the kernel dropped at the socket: no fill buffer (counted in
    /// `rx_dropped`, and as empty fill-ring reads in `fill_ring_empty`) or no RX ring slot.
    pub fn rx_lost(&self) -> u64 {
        self.rx_dropped.max(self.fill_ring_empty) + self.rx_ring_full
    }

    /// The drops by reason, each counted once, as the metrics and `status` show them. The
    /// kernel's `rx_dropped` includes the fill-ring drops but not the full RX ring's (with
    /// the extended statistics, `xsk_getsockopt` adds `rx_queue_full` to it only for callers
    /// that cannot read it apart), so only what it has beyond the fill-ring drops is `other`:
    /// taking the ring's drops from it too made `other` shrink, a counter going backwards.
    pub fn by_reason(&self) -> [(&'static str, u64); 5] {
        [
            ("rx_ring_full", self.rx_ring_full),
            ("fill_ring_empty", self.fill_ring_empty),
            ("tx_invalid", self.tx_invalid),
            ("tx_refused", self.tx_refused),
            (
                "other",
                self.rx_dropped.saturating_sub(self.fill_ring_empty),
            ),
        ]
    }
}

impl std::ops::AddAssign for KernelDrops {
    fn add_assign(&mut self, o: Self) {
        let (a, b) = (self.to_array(), o.to_array());
        *self = KernelDrops::from_array(std::array::from_fn(|i| a[i] + b[i]));
    }
}

/// Why a port operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// Opening the port failed.
    #[error("opening {backend} port on {iface} queue {queue} failed: {reason}")]
    Open {
        /// Backend name.
        backend: &'static str,
        /// Interface.
        iface: String,
        /// Queue index.
        queue: u32,
        /// Why.
        reason: String,
        /// The error it comes from, where there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// An I/O error on an open port.
    #[error("I/O on {iface}: {source}")]
    Io {
        /// Interface.
        iface: String,
        /// The error.
        source: std::io::Error,
    },
}

impl PortError {
    /// Whether the port could not be opened because the kernel said EBUSY somewhere in its
    /// error's chain (an AF_XDP queue still bound, briefly, after an unclean exit).
    pub fn is_busy(&self) -> bool {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(self);
        while let Some(e) = cur {
            if e.downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::raw_os_error)
                == Some(libc::EBUSY)
            {
                return true;
            }
            cur = e.source();
        }
        false
    }
}

/// Where a frame's time is taken, as ptp4l's `time_stamping` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stamping {
    /// By the NIC.
    Hardware,
    /// By the kernel (ptp4l's `software`): on transmit in the driver (`SO_TIMESTAMPING`
    /// software TX stamp, taken by `skb_tx_timestamp`; the peer-delay frames that need a TX
    /// time are sent on an AF_PACKET socket for it, see [`crate::linkup::tx_stamp`]); on
    /// receive where the frame entered the stack (`SO_TIMESTAMPNS`, the AF_PACKET backend).
    Kernel,
    /// By our XDP program on arrival (`bpf_ktime_get_ns`, CLOCK_MONOTONIC), before the
    /// socket and the worker's wake-up.
    Xdp,
    /// In user space: read when the worker takes the frame (RX), or just before the send
    /// that kicks it (TX), so it includes the wake-up or the send path.
    User,
}

impl Stamping {
    /// The name reports use (`hardware`, `kernel`, `xdp`, `user`).
    pub fn name(self) -> &'static str {
        match self {
            Stamping::Hardware => "hardware",
            Stamping::Kernel => "kernel",
            Stamping::Xdp => "xdp",
            Stamping::User => "user",
        }
    }
}

/// How a port's times are taken: RX from [`Port::rx_stamping`]; TX as the link-up agent
/// takes the peer-delay frames' TX times ([`crate::linkup::run::LinkAgent::tx_stamping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeStamping {
    /// Receive times.
    pub rx: Stamping,
    /// Transmit times.
    pub tx: Stamping,
}

impl TimeStamping {
    /// The stamping of `port`, whose TX times are taken as `tx`.
    pub fn of(port: &dyn Port, tx: Stamping) -> Self {
        TimeStamping {
            rx: port.rx_stamping(),
            tx,
        }
    }

    /// What the frames actually got, by the port's XDP program's counters (frames
    /// redirected, and how many of those carried the NIC's stamp): a port set up for hardware
    /// RX stamps whose frames mostly came without one (the program then stamps them itself)
    /// says `xdp`, as ptp4l would not claim `hardware` for stamps it did not get. Before any
    /// frame, as set up.
    pub fn as_seen(self, c: &XdpCounters) -> Self {
        let rx = if self.rx == Stamping::Hardware && c.hw_stamps.saturating_mul(2) < c.redirected {
            Stamping::Xdp
        } else {
            self.rx
        };
        TimeStamping { rx, ..self }
    }
}

/// One RX/TX queue pair of an interface, bound to a worker's [`FramePool`].
///
/// All methods work in batches and never allocate: a worker calls them once per loop turn.
pub trait Port: Send {
    /// Interface name.
    fn name(&self) -> &str;
    /// The interface's MAC address (source of the frames the daemon originates).
    fn mac(&self) -> MacAddr;
    /// Receives up to `max` frames, appending them to `out`; returns how many.
    fn recv(
        &mut self,
        pool: &mut FramePool,
        out: &mut Vec<RxFrame>,
        max: usize,
        now: u64,
    ) -> Result<usize, PortError>;
    /// How many frames [`Port::send`] would accept right now, counted in buffers: a chained
    /// (jumbo) frame takes [`FramePool::tx_slots`] of it. A batch whose frames fit within it
    /// (or of one frame, whatever its size, when it is above 0) is accepted whole.
    fn tx_room(&mut self) -> usize;
    /// Transmits a prefix of `frames`, draining it from the vector, and returns its length:
    /// the port owns those frames from then on (until [`Port::reclaim`] returns them to the
    /// pool, or at once for the copying backends). The frames not taken stay in `frames`, in
    /// order, the caller's; also on an error, which is the port's and says nothing about
    /// the frames (a frame the port took before it failed is gone from `frames`).
    fn send(&mut self, pool: &mut FramePool, frames: &mut Vec<Frame>) -> Result<usize, PortError>;
    /// Returns completed TX frames to the pool and tops up the RX buffers; pushes what the
    /// port already took towards the link, unless its transmit is held ([`Port::hold_tx`]).
    fn reclaim(&mut self, pool: &mut FramePool) -> Result<(), PortError>;
    /// Frames the port took ([`Port::send`]) and has not seen leave: in a TX ring the kernel
    /// empties a few dozen frames per kick, or refused and kept to be sent again. A stopping
    /// worker waits for them, since closing the socket would lose them uncounted.
    fn tx_in_flight(&self) -> usize {
        0
    }
    /// Whether the port's egress is held (no carrier, or not known since the kernel refused a
    /// frame): while it is, the port pushes nothing towards the link, neither at
    /// [`Port::reclaim`] nor at [`Port::send`], which takes frames and keeps them (a copy-mode
    /// AF_XDP kick would lose the first frame in the ring, an AF_PACKET retry would be
    /// refused). The worker sends no data while held; a link agent's frame (an LLDPDU) waits
    /// behind what the port holds.
    fn hold_tx(&mut self, _held: bool) {}
    /// The worker stops, and what the port took and has not sent (its egress held: no
    /// carrier) goes with it. Those frames were counted as sent when the port took them: each
    /// is pushed at the link once more (a carrier back sends it), and one that stays unsent
    /// is counted as refused ([`KernelDrops::tx_refused`]) rather than lost uncounted.
    fn give_up_tx(&mut self, _pool: &mut FramePool) {}
    /// A file descriptor that becomes readable when frames arrive, for `poll()`.
    fn poll_fd(&self) -> Option<RawFd>;
    /// What waits in this port's RX ring for the worker (no syscall: call once per turn).
    /// Zero where the backend cannot see it.
    fn rx_backlog(&mut self) -> RxBacklog {
        RxBacklog::default()
    }
    /// Whether [`Port::rx_backlog`]'s `arrived` counts what arrives (the XDP program's
    /// totals). Where it does not (AF_PACKET), the worker counts what it takes instead.
    fn counts_arrivals(&self) -> bool {
        false
    }
    /// Lossy frames dropped before the socket because the RX backlog was deep, per priority
    /// (the XDP program's count for this port's queue).
    fn backlog_drops(&self) -> [u64; crate::fc::PRIORITIES] {
        [0; crate::fc::PRIORITIES]
    }
    /// Frames longer than the port's maximum dropped before the socket, per priority (the XDP
    /// program's count for this port's queue; never reset, the caller takes differences).
    fn oversize_drops(&self) -> [u64; crate::fc::PRIORITIES] {
        [0; crate::fc::PRIORITIES]
    }
    /// Frames the kernel dropped on this port's socket so far (a syscall: call rarely).
    fn kernel_drops(&self) -> KernelDrops {
        KernelDrops::default()
    }
    /// Times the kernel refused a frame this port handed it for transmit, so far (no
    /// syscall; never reset, the caller takes differences): the interface had no carrier (a
    /// link that just died, before any link event says so), or its driver or queue would not
    /// take the frame (veth, when its peer's receive ring is full). A copy-mode AF_XDP socket
    /// has then lost the frame (`sendto` says EBUSY, one frame each time; counted in
    /// [`KernelDrops::tx_refused`]); the AF_PACKET port keeps it and sends it again.
    fn tx_refusals(&self) -> u64 {
        0
    }
    /// Where received frames' times come from (see [`Stamping`]).
    fn rx_stamping(&self) -> Stamping {
        Stamping::User
    }
    /// The port's socket is bound in zero-copy mode: the NIC moves frames in and out of the
    /// frame pool itself (AF_XDP on a driver that supports it; never veth or AF_PACKET).
    fn zero_copy(&self) -> bool {
        false
    }
    /// Frame bytes one receive buffer takes on a socket that receives a long frame into
    /// several ([`super::ingress::buffers`]); 0: a frame takes one buffer.
    fn rx_chunk(&self) -> u64 {
        0
    }
    /// Keeps the port's kernel receive buffers at `depth` from the next refill on; returns
    /// the buffers that now are (0: the backend has no fill ring).
    fn set_fill_depth(&mut self, _depth: FillDepth) -> u64 {
        0
    }
}

/// How many receive buffers a port keeps handed to the kernel (an AF_XDP fill ring).
///
/// They are what arrives while the receiver is not running, so where a lossless priority
/// rides on them they are its headroom in buffers ([`super::ingress::FillWatch`] pauses
/// upstream at half). Where none does they buy nothing a lossy priority keeps, and cost the
/// kernel a cold buffer per frame: it takes them in ring order, so every buffer in the ring
/// is in circulation, and the per-buffer state and memory it writes for each frame are as
/// many cache lines as the ring is deep. `bench/forward`'s lossy row on the lab VM: with
/// 8,192 buffers `xp_alloc` alone took 5-7 % of the receiving CPU, with 2,048 1-3 %, and the
/// generator sharing that CPU offered 7-11 % more (bench/RESULTS.md). A port with lossless
/// priorities is deep unless its [`super::fill_sizer::FillSizer`] finds the backlog bounded
/// well inside a lean ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FillDepth {
    /// Deep (8,192 buffers over AF_XDP): a lossless priority's headroom, or a receiver that
    /// must ride out being descheduled (the sink).
    #[default]
    Deep,
    /// Lean (2,048, libxdp's default ring): no lossless priority arrives here, or PFC and the
    /// stall guard bound what can wait to half of it.
    Lean,
}

/// Sends `frame` alone through `batch` (an empty vector the caller keeps, so nothing is
/// allocated); a frame the port does not take goes back to the pool. Whether it was taken.
pub fn send_or_release(
    port: &mut (impl Port + ?Sized),
    pool: &mut FramePool,
    batch: &mut Vec<Frame>,
    frame: Frame,
) -> Result<bool, PortError> {
    batch.clear();
    batch.push(frame);
    let res = port.send(pool, batch);
    let taken = batch.is_empty();
    for f in batch.drain(..) {
        pool.release(f);
    }
    res.map(|_| taken)
}

/// What the kernel says of interface `iface` now (RTM_GETLINK, in the calling thread's network
/// namespace: the port's, not that of whoever mounted `/sys`; see [`crate::kernel::link`]).
pub fn iface_link(iface: &str) -> Result<LinkInfo, NlError> {
    kernel::link::link(&mut Netlink::new(false), iface)
}

/// An interface's MAC address.
pub fn iface_mac(iface: &str) -> Result<MacAddr, NlError> {
    iface_link(iface)?
        .mac
        .ok_or_else(|| NlError::Malformed(format!("{iface} has no 6-byte hardware address")))
}

/// An interface's MTU.
pub fn iface_mtu(iface: &str) -> Option<u32> {
    iface_link(iface).ok()?.mtu
}

/// The RX queues `iface` receives on now (ethtool's channels); `None` where its driver does
/// not say.
pub fn iface_rx_queues(iface: &str) -> Option<u32> {
    kernel::ethtool::channels(&mut Netlink::new(false), iface)
        .ok()?
        .rx_queues()
}

/// True if `iface` is up with a carrier now: the kernel's state this instant (an interface
/// that is down, or cannot be read: false), where link events and `operstate` wait for the
/// kernel's link watch, which reports a change of a physical NIC at most once a second (see
/// `control::carrier`). Asked over `nl`, which keeps its socket for the next look (a caller
/// that looks every few milliseconds holds one).
pub fn iface_carrier(nl: &mut Netlink, iface: &str) -> bool {
    kernel::link::link(nl, iface).is_ok_and(|l| l.has_carrier())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that wraps another, as a socket library's does.
    #[derive(Debug, thiserror::Error)]
    #[error("socket creation failed")]
    struct Wrapper(#[source] std::io::Error);

    fn open(source: Option<Box<dyn std::error::Error + Send + Sync>>) -> PortError {
        PortError::Open {
            backend: "AF_XDP",
            iface: "veth0".into(),
            queue: 0,
            reason: "socket creation failed".into(),
            source,
        }
    }

    #[test]
    fn busy_is_read_from_the_errno_anywhere_in_the_chain() {
        let errno = |n| Box::new(std::io::Error::from_raw_os_error(n));
        assert!(open(Some(errno(libc::EBUSY))).is_busy());
        assert!(open(Some(Box::new(Wrapper(*errno(libc::EBUSY))))).is_busy());
        assert!(!open(Some(Box::new(Wrapper(*errno(libc::EPERM))))).is_busy());
        assert!(!open(None).is_busy());
        // The message users see is the reason; the source stays reachable.
        let e = open(Some(errno(libc::EBUSY)));
        assert_eq!(
            e.to_string(),
            "opening AF_XDP port on veth0 queue 0 failed: socket creation failed"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    fn counters(redirected: u64, hw_stamps: u64) -> XdpCounters {
        XdpCounters {
            redirected,
            hw_stamps,
            ..XdpCounters::default()
        }
    }

    #[test]
    fn hardware_stamping_is_claimed_only_while_frames_carry_the_nics_stamp() {
        let hw = TimeStamping {
            rx: Stamping::Hardware,
            tx: Stamping::Kernel,
        };
        assert_eq!(
            hw.as_seen(&counters(0, 0)).rx,
            Stamping::Hardware,
            "no frame yet"
        );
        assert_eq!(hw.as_seen(&counters(100, 100)).rx, Stamping::Hardware);
        assert_eq!(
            hw.as_seen(&counters(100, 50)).rx,
            Stamping::Hardware,
            "half of them"
        );
        assert_eq!(hw.as_seen(&counters(100, 49)).rx, Stamping::Xdp);
        assert_eq!(
            hw.as_seen(&counters(100, 0)).tx,
            Stamping::Kernel,
            "TX untouched"
        );
        let xdp = TimeStamping {
            rx: Stamping::Xdp,
            tx: Stamping::User,
        };
        assert_eq!(xdp.as_seen(&counters(100, 0)), xdp);
    }
}
