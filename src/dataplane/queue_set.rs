//! [`QueueSet`]: every RX queue of one interface as one [`Port`], for a tool's single thread.
//!
//! An AF_XDP socket receives only what arrives on its RX queue, and the XDP program can steer
//! a frame only to the socket of the queue it arrived on ([`super::open::uncovered_queues`]).
//! A tool that must see every frame of an interface (a sink counting sequence numbers, a
//! generator obeying PFC and SFC, a cable) binds a socket to each RX queue, all over one pool,
//! and this port stands for them: it receives from each in turn, starting one further on at
//! every call so that no queue waits behind the others, and transmits on the first (what a
//! tool originates needs no spreading). Its poll descriptor is an epoll instance holding every
//! socket, readable when any is.
//!
//! What it reports adds up its sockets, except the fill ring: the socket whose ring has the
//! fewest buffers left for its target speaks for the set, so that a receiver pauses upstream
//! as soon as one queue runs short ([`super::ingress::FillWatch`]). Kernel drops, frames
//! dropped before the sockets and the RX backlog are the sums, since a frame waits in, or is
//! lost at, exactly one queue.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::{
    ingress::RxBacklog,
    pool::{Frame, FramePool},
    port::{FillDepth, KernelDrops, Port, PortError, RxFrame, Stamping},
};
use crate::{fc::PRIORITIES, wire::MacAddr};

/// The ports of one interface's RX queues, as one port (the module doc).
pub struct QueueSet {
    /// One per RX queue, queue 0 first; the first also transmits.
    queues: Vec<Box<dyn Port>>,
    /// An epoll instance holding every queue's descriptor.
    epoll: OwnedFd,
    /// The queue the next receive starts at.
    next: usize,
}

impl QueueSet {
    /// The set of `queues` (queue 0 first, at least one), all of one interface.
    pub fn new(queues: Vec<Box<dyn Port>>) -> Result<Self, PortError> {
        assert!(!queues.is_empty(), "a queue set holds at least one queue");
        let name = queues[0].name().to_string();
        let io = |source| PortError::Io {
            iface: name.clone(),
            source,
        };
        // SAFETY: plain epoll_create1; the result is checked before use.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a new descriptor this function owns.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        for fd in queues.iter().filter_map(|q| q.poll_fd()) {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            // SAFETY: both descriptors are open; `ev` is a valid event for the call.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                return Err(io(std::io::Error::last_os_error()));
            }
        }
        Ok(QueueSet {
            queues,
            epoll,
            next: 0,
        })
    }

    fn tx(&mut self) -> &mut dyn Port {
        &mut *self.queues[0]
    }
}

impl Port for QueueSet {
    fn name(&self) -> &str {
        self.queues[0].name()
    }

    fn mac(&self) -> MacAddr {
        self.queues[0].mac()
    }

    /// A receive that fails on one queue fails the call, with what the queues before it gave
    /// already in `out` (the caller's, as always).
    fn recv(
        &mut self,
        pool: &mut FramePool,
        out: &mut Vec<RxFrame>,
        max: usize,
        now: u64,
    ) -> Result<usize, PortError> {
        let (start, n) = (self.next, self.queues.len());
        self.next = (start + 1) % n;
        let mut got = 0;
        for i in 0..n {
            if got >= max {
                break;
            }
            got += self.queues[(start + i) % n].recv(pool, out, max - got, now)?;
        }
        Ok(got)
    }

    fn tx_room(&mut self) -> usize {
        self.tx().tx_room()
    }

    fn send(&mut self, pool: &mut FramePool, frames: &mut Vec<Frame>) -> Result<usize, PortError> {
        self.tx().send(pool, frames)
    }

    fn reclaim(&mut self, pool: &mut FramePool) -> Result<(), PortError> {
        self.queues.iter_mut().try_for_each(|q| q.reclaim(pool))
    }

    fn hold_tx(&mut self, held: bool) {
        self.tx().hold_tx(held);
    }

    fn give_up_tx(&mut self, pool: &mut FramePool) {
        self.queues.iter_mut().for_each(|q| q.give_up_tx(pool));
    }

    fn rx_chunk(&self) -> u64 {
        self.queues[0].rx_chunk()
    }

    fn tx_in_flight(&self) -> usize {
        self.queues.iter().map(|q| q.tx_in_flight()).sum()
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.epoll.as_raw_fd())
    }

    fn counts_arrivals(&self) -> bool {
        self.queues.iter().all(|q| q.counts_arrivals())
    }

    fn rx_backlog(&mut self) -> RxBacklog {
        let mut sum = RxBacklog::default();
        // The shortest fill ring, as the fraction of its target left: free / target.
        let mut shortest: Option<(u64, u64)> = None;
        for q in &mut self.queues {
            let b = q.rx_backlog();
            for p in 0..PRIORITIES {
                sum.bytes[p] += b.bytes[p];
                sum.arrived[p] += b.arrived[p];
            }
            sum.frames += b.frames;
            if let Some(free) = b.fill_free {
                let shorter = shortest.is_none_or(|(f, t)| {
                    u128::from(free) * u128::from(t) < u128::from(f) * u128::from(b.fill_target)
                });
                if shorter {
                    shortest = Some((free, b.fill_target));
                }
            }
        }
        if let Some((free, target)) = shortest {
            (sum.fill_free, sum.fill_target) = (Some(free), target);
        }
        sum
    }

    fn backlog_drops(&self) -> [u64; PRIORITIES] {
        self.sum_per_priority(|q| q.backlog_drops())
    }

    fn oversize_drops(&self) -> [u64; PRIORITIES] {
        self.sum_per_priority(|q| q.oversize_drops())
    }

    fn kernel_drops(&self) -> KernelDrops {
        let mut sum = [0; KernelDrops::LEN];
        for q in &self.queues {
            for (s, n) in sum.iter_mut().zip(q.kernel_drops().to_array()) {
                *s += n;
            }
        }
        KernelDrops::from_array(sum)
    }

    fn tx_refusals(&self) -> u64 {
        self.queues[0].tx_refusals()
    }

    fn rx_stamping(&self) -> Stamping {
        self.queues[0].rx_stamping()
    }

    fn zero_copy(&self) -> bool {
        self.queues.iter().all(|q| q.zero_copy())
    }

    fn set_fill_depth(&mut self, depth: FillDepth) -> u64 {
        self.queues
            .iter_mut()
            .map(|q| q.set_fill_depth(depth))
            .sum()
    }
}

impl QueueSet {
    fn sum_per_priority(&self, f: impl Fn(&dyn Port) -> [u64; PRIORITIES]) -> [u64; PRIORITIES] {
        let mut sum = [0; PRIORITIES];
        for q in &self.queues {
            for (s, n) in sum.iter_mut().zip(f(q.as_ref())) {
                *s += n;
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::mem_port::{mem_link, MemPeer};

    const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    /// A set of `n` in-memory queues and their peers.
    fn set(n: usize) -> (QueueSet, Vec<MemPeer>) {
        let (ports, peers): (Vec<Box<dyn Port>>, Vec<MemPeer>) = (0..n)
            .map(|_| {
                let (p, peer) = mem_link("q", MAC, 64);
                (Box::new(p) as Box<dyn Port>, peer)
            })
            .unzip();
        (QueueSet::new(ports).unwrap(), peers)
    }

    /// A 60-byte frame of priority 3 (802.1Q tagged), its last byte `id`.
    fn frame(id: u8) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        f[14] = 3 << 5;
        f[16..18].copy_from_slice(&0x88b5u16.to_be_bytes());
        f[59] = id;
        f
    }

    fn ids(pool: &FramePool, rx: &[RxFrame]) -> Vec<u8> {
        rx.iter().map(|r| pool.data(&r.frame)[59]).collect()
    }

    #[test]
    fn receives_from_every_queue_starting_one_further_each_time() {
        let (mut s, peers) = set(2);
        let mut pool = FramePool::heap(64).unwrap();
        for id in [1, 2, 3] {
            peers[0].inject(&frame(id), 0);
        }
        for id in [11, 12, 13] {
            peers[1].inject(&frame(id), 0);
        }
        let mut rx = Vec::new();
        assert_eq!(s.recv(&mut pool, &mut rx, 4, 0).unwrap(), 4);
        assert_eq!(
            ids(&pool, &rx),
            [1, 2, 3, 11],
            "queue 0 first, then queue 1"
        );
        rx.clear();
        assert_eq!(s.recv(&mut pool, &mut rx, 1, 0).unwrap(), 1);
        assert_eq!(ids(&pool, &rx), [12], "the next call starts at queue 1");
        rx.clear();
        peers[0].inject(&frame(4), 0);
        assert_eq!(s.recv(&mut pool, &mut rx, 8, 0).unwrap(), 2);
        assert_eq!(ids(&pool, &rx), [4, 13]);
    }

    #[test]
    fn transmits_on_the_first_queue_and_adds_up_the_rest() {
        let (mut s, peers) = set(3);
        let mut pool = FramePool::heap(64).unwrap();
        let mut f = pool.alloc().unwrap();
        pool.buf_mut(&f)[..60].copy_from_slice(&frame(7));
        f.set_len(60);
        let mut batch = vec![f];
        assert_eq!(s.send(&mut pool, &mut batch).unwrap(), 1);
        assert_eq!(peers[0].take().len(), 1);
        assert!(peers[1].take().is_empty() && peers[2].take().is_empty());
        // What waits in the RX rings, and what the program dropped, is the sum of the queues'.
        peers[1].inject(&frame(1), 0);
        peers[2].inject(&frame(2), 0);
        peers[2].inject(&frame(3), 0);
        let b = s.rx_backlog();
        assert_eq!((b.frames, b.bytes[3], b.arrived[3]), (3, 180, 180));
        peers[1].drop_oversize(3);
        peers[2].drop_oversize(3);
        assert_eq!(s.oversize_drops()[3], 2);
        assert!(s.poll_fd().is_some(), "the epoll descriptor");
    }
}
