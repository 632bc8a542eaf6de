//! AF_PACKET port: the fallback where AF_XDP is refused. pnet's datalink finds and binds the
//! interface; reception uses `recvmsg` on the same socket straight into the worker's pool,
//! with PACKET_AUXDATA so the 802.1Q tag the kernel strips before packet sockets see a frame
//! is put back (PCP classification needs it), and transmission a non-blocking `sendto` (pnet's
//! sender polls before each send, and waits without end while the socket buffer is full).
//! One syscall per frame.

use std::{
    cell::Cell,
    collections::VecDeque,
    io,
    os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd},
    time::Duration,
};

use pnet::datalink::{self, Channel, DataLinkReceiver};

use super::{
    clock::{now_ns, realtime_ns, ArrivedBy},
    pool::{Frame, FramePool},
    port::{iface_mac, KernelDrops, Port, PortError, RxFrame, Stamping},
};
use crate::wire::MacAddr;

/// A packet socket on one interface.
pub struct AfPacketPort {
    name: String,
    mac: MacAddr,
    fd: RawFd,
    /// The interface's index, where frames are sent.
    ifindex: i32,
    /// Kept so pnet does not close the shared socket; reception and transmission bypass it
    /// (see module doc).
    _rx: Box<dyn DataLinkReceiver>,
    /// Frames the kernel dropped for want of room in the socket's receive queue so far: the
    /// kernel's count resets on each read, so the reads are summed here.
    rx_queue_drops: Cell<u64>,
    /// Frames taken for transmit that the kernel refused (ENOBUFS), in order: sent again, ahead
    /// of anything new, once it takes them (at most [`TX_PENDING`]; never grows).
    pending: VecDeque<Frame>,
    /// Times the kernel refused a frame ([`Port::tx_refusals`]).
    refusals: u64,
    /// Frames still refused when the worker stopped ([`Port::give_up_tx`]).
    given_up: u64,
    /// The port's egress is held ([`Port::hold_tx`]): `pending` waits.
    tx_held: bool,
}

/// Frames the port takes per [`Port::send`] at most, and so at most holds refused: a batch.
const TX_PENDING: usize = 64;

/// A send-only packet socket on one interface: bound with protocol 0, so it receives
/// nothing and the interface's reception stays with its port. For frames sent beside a
/// port's own TX path (link-up's stamped frames, the stall guard's PFC).
#[derive(Debug)]
pub struct RawSender {
    fd: OwnedFd,
    ifindex: i32,
}

impl RawSender {
    /// Opens the socket on `iface` (needs CAP_NET_RAW); `NotFound` when there is no such
    /// interface. Sends never block: a full queue is an error (`WouldBlock`) to count.
    pub fn open(iface: &str) -> io::Result<Self> {
        let ifindex = super::xdp_prog::ifindex(iface).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no interface {iface}"))
        })?;
        // SAFETY: plain socket(2); the result is checked before use.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sll = sockaddr_ll(ifindex);
        // SAFETY: `sll` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RawSender { fd, ifindex })
    }

    /// Sends `frame`, a whole Ethernet frame; returns the bytes the kernel took.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        send_frame(self.fd.as_raw_fd(), self.ifindex, frame)
    }
}

/// Sends `frame`, a whole Ethernet frame, out of interface `ifindex` on packet socket `fd`,
/// never blocking: a full socket buffer is `WouldBlock`. Returns the bytes the kernel took.
fn send_frame(fd: RawFd, ifindex: i32, frame: &[u8]) -> io::Result<usize> {
    let sll = sockaddr_ll(ifindex);
    // SAFETY: `frame` is valid for its length; `sll` is a valid sockaddr_ll.
    let n = unsafe {
        libc::sendto(
            fd,
            frame.as_ptr() as *const libc::c_void,
            frame.len(),
            libc::MSG_DONTWAIT,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

impl AsFd for RawSender {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn sockaddr_ll(ifindex: i32) -> libc::sockaddr_ll {
    // SAFETY: an all-zero sockaddr_ll is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex;
    sll
}

/// `tpacket_auxdata` from <linux/if_packet.h>.
#[repr(C)]
#[derive(Clone, Copy)]
struct AuxData {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}

const PACKET_AUXDATA: libc::c_int = 8;
/// `getsockopt` level `SOL_PACKET`: a `struct tpacket_stats`, reset by the read.
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// Socket receive buffer asked for (the kernel drops what does not fit while we sleep).
const RCVBUF: libc::c_int = 8 << 20;

fn set_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt with a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn packet_socket() -> io::Result<RawFd> {
    let proto = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(proto)) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Our own transmissions must not come back as receptions.
    set_opt(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    set_opt(fd, libc::SOL_PACKET, PACKET_AUXDATA, 1)?;
    // Each frame's arrival time as the kernel took it (`netif_rx` or the NAPI poll, before
    // any softirq backlog and the socket's queue), which `recv` turns into the worker's clock.
    set_opt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    if set_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF).is_err() {
        set_opt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF)?;
    }
    Ok(fd)
}

/// The frames the kernel dropped on packet socket `fd` since the last read (the receive
/// queue was full: `tp_drops` of `struct tpacket_stats`, which the read resets).
fn drops_since_last_read(fd: RawFd) -> io::Result<u64> {
    // struct tpacket_stats { unsigned int tp_packets; unsigned int tp_drops; }
    let mut stats = [0u32; 2];
    let mut len = std::mem::size_of_val(&stats) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live array it points to.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            stats.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(stats[1]))
}

/// A frame [`recv_frame`] received: its real length (above the buffer's, the frame was
/// truncated, and the caller must drop it, counted as oversize, never use it) and the
/// kernel's arrival stamp, CLOCK_REALTIME ns, where the socket gave one.
struct Received {
    len: usize,
    stamp_realtime: Option<u64>,
}

/// Receives one frame into `buf` without blocking, re-inserting a stripped 802.1Q tag.
/// Returns `Ok(None)` when nothing is waiting.
fn recv_frame(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    const TAG: usize = 4;
    if buf.len() <= 12 + TAG {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    // Receive 4 bytes in, so a tag can be inserted after the addresses without moving the payload.
    let mut iov = libc::iovec {
        iov_base: buf[TAG..].as_mut_ptr().cast(),
        iov_len: buf.len() - TAG,
    };
    let mut cmsg = [0u64; 16]; // aligned room for a tpacket_auxdata and a timespec message
                               // SAFETY: a zeroed msghdr is valid; the pointers reference live local buffers.
    let (n, msg) = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg);
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT | libc::MSG_TRUNC);
        (n, msg)
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        // ENETDOWN: the interface was set down (the kernel reports it once on the socket);
        // nothing arrives until it is up again, when the socket receives again by itself.
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ if e.raw_os_error() == Some(libc::ENETDOWN) => Ok(None),
            _ => Err(e),
        };
    }
    // With MSG_TRUNC, `n` is the frame's length even when `buf` held less of it.
    let real = n as usize;
    let len = real.min(buf.len() - TAG);
    let mut aux: Option<AuxData> = None;
    let mut stamp_realtime = None;
    // SAFETY: walking the control messages recvmsg filled in, within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                aux = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()));
            } else if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp_realtime = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let frame_len = match aux {
        Some(a) if a.tp_status & TP_STATUS_VLAN_VALID != 0 && len >= 12 => {
            let tpid = if a.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                a.tp_vlan_tpid
            } else {
                0x8100
            };
            buf.copy_within(TAG..TAG + 12, 0);
            buf[12..14].copy_from_slice(&tpid.to_be_bytes());
            buf[14..16].copy_from_slice(&a.tp_vlan_tci.to_be_bytes());
            real + TAG
        }
        _ => {
            buf.copy_within(TAG..TAG + len, 0);
            real
        }
    };
    Ok(Some(Received {
        len: frame_len,
        stamp_realtime,
    }))
}

impl AfPacketPort {
    /// Opens a promiscuous packet socket on `iface`.
    pub fn open(iface: &str, _pool: &mut FramePool) -> Result<Self, PortError> {
        let err = |reason: String| PortError::Open {
            backend: "AF_PACKET",
            iface: iface.to_string(),
            queue: 0,
            reason,
            source: None,
        };
        let ni = datalink::interfaces()
            .into_iter()
            .find(|i| i.name == iface)
            .ok_or_else(|| err("no such interface".into()))?;
        let fd = packet_socket().map_err(|e| err(e.to_string()))?;

        let config = datalink::Config {
            read_timeout: Some(Duration::ZERO),
            socket_fd: Some(fd),
            promiscuous: true,
            ..Default::default()
        };
        let _rx = match datalink::channel(&ni, config) {
            Ok(Channel::Ethernet(_tx, rx)) => rx,
            Ok(_) => return Err(err("unexpected channel type".into())),
            Err(e) => return Err(err(e.to_string())),
        };
        Ok(AfPacketPort {
            name: iface.to_string(),
            mac: iface_mac(iface).map_err(|e| err(format!("reading its MAC address: {e}")))?,
            fd,
            ifindex: ni.index as i32,
            _rx,
            rx_queue_drops: Cell::new(0),
            pending: VecDeque::with_capacity(TX_PENDING),
            refusals: 0,
            given_up: 0,
            tx_held: false,
        })
    }

    /// Sends what waits in `pending`, in order, until the kernel refuses one (it stays first).
    /// A frame sent goes back to the pool.
    fn flush(&mut self, pool: &mut FramePool) -> Result<(), PortError> {
        while let Some(f) = self.pending.front() {
            let sent = send_frame(self.fd, self.ifindex, pool.data(f));
            // ENOBUFS: no carrier or a full device queue; ENETDOWN: the interface is set down.
            // Either is waited out with the frame kept.
            if matches!(&sent, Err(e) if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ENETDOWN))
                || e.kind() == io::ErrorKind::WouldBlock)
            {
                self.refusals += 1;
                return Ok(());
            }
            // Sent, or dropped on an error that is no refusal to wait out, as the caller is told.
            let f = self.pending.pop_front().expect("looked at");
            pool.release(f);
            sent.map_err(|source| PortError::Io {
                iface: self.name.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

impl Port for AfPacketPort {
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
        let mut n = 0;
        // The kernel stamps on CLOCK_REALTIME, the worker's clock is CLOCK_MONOTONIC: one
        // reading of their difference serves the batch, taken at its first stamped frame (a
        // turn that finds the socket empty reads no clock).
        let (mut realtime_ahead, mut arrived) = (None, ArrivedBy::new(now));
        while n < max {
            let Some(mut frame) = pool.alloc() else { break };
            match recv_frame(self.fd, pool.buf_mut(&frame)) {
                Ok(Some(r)) => {
                    frame.set_len(r.len);
                    // A stamp past the clock (the realtime clock stepped) is taken as
                    // the clock's time.
                    let stamp = r.stamp_realtime.map(|t| {
                        let ahead = *realtime_ahead
                            .get_or_insert_with(|| realtime_ns().wrapping_sub(now_ns()));
                        arrived.clamp(t.wrapping_sub(ahead))
                    });
                    out.push(RxFrame {
                        frame,
                        rx_ns: stamp.unwrap_or(now),
                        stamped: stamp.is_some(),
                    });
                    n += 1;
                }
                Ok(None) => {
                    pool.release(frame);
                    break;
                }
                Err(e) => {
                    pool.release(frame);
                    return Err(PortError::Io {
                        iface: self.name.clone(),
                        source: e,
                    });
                }
            }
        }
        Ok(n)
    }

    /// A batch, or nothing while frames the kernel refused still wait ([`Port::tx_refusals`]).
    fn tx_room(&mut self) -> usize {
        if self.pending.is_empty() {
            TX_PENDING
        } else {
            0
        }
    }

    fn send(&mut self, pool: &mut FramePool, frames: &mut Vec<Frame>) -> Result<usize, PortError> {
        // Each frame is copied into the socket and goes straight back to the pool. One the
        // kernel refuses (ENOBUFS: the interface has no carrier, or its queue is full) is
        // kept, with every frame taken after it, and sent again in order ahead of anything new
        // (`flush`): the port takes frames as a TX ring does, and gives none back to be
        // dropped. While any wait it takes nothing. On another error the failed frame goes
        // back to the pool (dropped) and the ones after it stay the caller's.
        // Held: the frames wait in `pending` for the hold's end, when `reclaim` flushes.
        if !self.tx_held {
            self.flush(pool)?;
        }
        let n = frames.len().min(self.tx_room());
        for f in frames.drain(..n) {
            self.pending.push_back(f);
        }
        if !self.tx_held {
            self.flush(pool)?;
        }
        Ok(n)
    }

    /// Sends again what the kernel refused before, unless the egress is held.
    fn reclaim(&mut self, pool: &mut FramePool) -> Result<(), PortError> {
        if self.tx_held {
            return Ok(());
        }
        self.flush(pool)
    }

    fn tx_refusals(&self) -> u64 {
        self.refusals
    }

    fn tx_in_flight(&self) -> usize {
        self.pending.len()
    }

    fn hold_tx(&mut self, held: bool) {
        self.tx_held = held;
    }

    fn give_up_tx(&mut self, pool: &mut FramePool) {
        // One more try (a carrier back sends them); what the kernel still refuses goes with
        // the port.
        self.tx_held = false;
        let _ = self.flush(pool);
        self.given_up += self.pending.len() as u64;
        for f in self.pending.drain(..) {
            pool.release(f);
        }
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }

    /// The kernel's software RX stamp (`SO_TIMESTAMPNS`), taken where the frame entered the
    /// stack, before it waited for a softirq and in the socket's queue.
    fn rx_stamping(&self) -> Stamping {
        Stamping::Kernel
    }

    /// A full receive queue is this backend's full RX ring.
    fn kernel_drops(&self) -> KernelDrops {
        if let Ok(n) = drops_since_last_read(self.fd) {
            self.rx_queue_drops.set(self.rx_queue_drops.get() + n);
        }
        KernelDrops {
            rx_ring_full: self.rx_queue_drops.get(),
            tx_refused: self.given_up,
            ..KernelDrops::default()
        }
    }
}
