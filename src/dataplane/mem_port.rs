//! In-memory ports for tests: the worker side implements [`Port`] over queues that a test
//! (the [`MemPeer`]) fills and drains, so the real worker code runs with simulated time.
//! Frames are copied at the boundary; this backend exists beside the real ones, for tests.

use std::{
    collections::VecDeque,
    os::fd::RawFd,
    sync::{Arc, Mutex},
};

use super::{
    classify::{self, Trust},
    ingress::{IngressMap, IngressTracker, RxBacklog, Stamps},
    pool::{Frame, FramePool},
    port::{FillDepth, KernelDrops, Port, PortError, RxFrame},
};
use crate::wire::{EthernetFrame, MacAddr};

#[derive(Debug, Default)]
struct Queues {
    /// Frames on their way to the port, with the ingress stamps the XDP program would give.
    to_port: VecDeque<(Vec<u8>, u64, Stamps)>,
    from_port: VecDeque<Vec<u8>>,
    /// Frames the port took and has not sent yet, where it sends at most `kick` of them per
    /// send and per reclaim (as a copy-mode AF_XDP kick does); `None`: all at once.
    in_ring: VecDeque<Vec<u8>>,
    kick: Option<usize>,
    /// The port's egress is held ([`Port::hold_tx`]): nothing leaves.
    held: bool,
    /// What the kernel would say it dropped.
    kernel_drops: KernelDrops,
    /// The receive-buffer depth the worker last asked for (nothing to keep: no fill ring).
    fill_depth: Option<FillDepth>,
    /// The port's next receive fails, as a device that went away does.
    fail: bool,
}

impl Queues {
    /// Sends what the port took, as far as one kick goes.
    fn kick(&mut self) {
        if self.held {
            return;
        }
        let n = self.kick.unwrap_or(usize::MAX).min(self.in_ring.len());
        self.from_port.extend(self.in_ring.drain(..n));
    }
}

/// The worker's end of an in-memory link.
pub struct MemPort {
    name: String,
    mac: MacAddr,
    q: Arc<Mutex<Queues>>,
    tx_room: usize,
    /// The worker's side of the ingress accounting, as over AF_XDP (queue 0 of the link).
    ingress: IngressTracker,
}

/// The test's end of an in-memory link; it plays the XDP program's part in the ingress
/// accounting (PCP classification), so the worker sees its RX backlog as over AF_XDP.
#[derive(Clone)]
pub struct MemPeer {
    q: Arc<Mutex<Queues>>,
    ingress: Arc<IngressMap>,
}

/// A connected port/peer pair. `tx_room` bounds how many frames one `send` accepts.
pub fn mem_link(name: &str, mac: MacAddr, tx_room: usize) -> (MemPort, MemPeer) {
    let q = Arc::new(Mutex::new(Queues::default()));
    let ingress = Arc::new(IngressMap::heap());
    (
        MemPort {
            name: name.to_string(),
            mac,
            q: q.clone(),
            tx_room,
            ingress: IngressTracker::new(ingress.clone(), 0).expect("queue 0 is in the map"),
        },
        MemPeer { q, ingress },
    )
}

impl MemPeer {
    /// Plays the XDP program dropping a frame of priority `prio` longer than the port takes.
    pub fn drop_oversize(&self, prio: usize) {
        self.ingress.drop_oversize(0, prio);
    }

    /// Makes the port's next receive fail with an I/O error.
    pub fn fail(&self) {
        self.q.lock().expect("test queue").fail = true;
    }

    /// Delivers `frame` to the port, received at `rx_ns`.
    pub fn inject(&self, frame: &[u8], rx_ns: u64) {
        let prio =
            EthernetFrame::new_checked(frame).map_or(0, |e| classify::priority(&e, Trust::Pcp));
        let stamps = self.ingress.steer(0, prio, frame.len() as u64);
        let mut q = self.q.lock().expect("test queue");
        q.to_port.push_back((frame.to_vec(), rx_ns, stamps));
    }

    /// Takes every frame the port has transmitted.
    pub fn take(&self) -> Vec<Vec<u8>> {
        self.q
            .lock()
            .expect("test queue")
            .from_port
            .drain(..)
            .collect()
    }

    /// Frames injected but not yet received by the port.
    pub fn pending(&self) -> usize {
        self.q.lock().expect("test queue").to_port.len()
    }

    /// From now on the port sends at most `kick` of the frames it took per send and per
    /// reclaim, keeping the rest in flight ([`Port::tx_in_flight`]).
    pub fn set_kick(&self, kick: usize) {
        self.q.lock().expect("test queue").kick = Some(kick);
    }

    /// Plays the kernel's socket statistics: what it says it dropped so far.
    pub fn set_kernel_drops(&self, drops: KernelDrops) {
        self.q.lock().expect("test queue").kernel_drops = drops;
    }

    /// The receive-buffer depth the worker last asked the port for.
    pub fn fill_depth(&self) -> Option<FillDepth> {
        self.q.lock().expect("test queue").fill_depth
    }
}

impl Port for MemPort {
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
        _now: u64,
    ) -> Result<usize, PortError> {
        let mut q = self.q.lock().expect("test queue");
        if std::mem::take(&mut q.fail) {
            return Err(PortError::Io {
                iface: self.name.clone(),
                source: std::io::Error::other("the test failed the port"),
            });
        }
        self.ingress.turn();
        let mut n = 0;
        while n < max {
            let Some(mut frame) = pool.alloc() else { break };
            let Some((bytes, rx_ns, stamps)) = q.to_port.pop_front() else {
                pool.release(frame);
                break;
            };
            self.ingress.on_taken(stamps);
            let buf = pool.buf_mut(&frame);
            let copied = bytes.len().min(buf.len());
            buf[..copied].copy_from_slice(&bytes[..copied]);
            // The frame's real length, as AF_PACKET reports it: a frame longer than the
            // buffer is the worker's to drop as oversize, never to forward truncated.
            frame.set_len(bytes.len());
            out.push(RxFrame {
                frame,
                rx_ns,
                stamped: true,
            });
            n += 1;
        }
        self.ingress.publish();
        Ok(n)
    }

    fn rx_backlog(&mut self) -> RxBacklog {
        self.ingress.backlog(None)
    }

    fn counts_arrivals(&self) -> bool {
        true
    }

    fn oversize_drops(&self) -> [u64; crate::fc::PRIORITIES] {
        self.ingress.oversize_drops()
    }

    fn tx_room(&mut self) -> usize {
        self.tx_room
    }

    fn send(&mut self, pool: &mut FramePool, frames: &mut Vec<Frame>) -> Result<usize, PortError> {
        let n = frames.len().min(self.tx_room);
        let mut q = self.q.lock().expect("test queue");
        // Copied out, the frames go straight back to the pool.
        for f in frames.drain(..n) {
            q.in_ring.push_back(pool.data(&f).to_vec());
            pool.release(f);
        }
        q.kick();
        Ok(n)
    }

    fn reclaim(&mut self, _pool: &mut FramePool) -> Result<(), PortError> {
        self.q.lock().expect("test queue").kick();
        Ok(())
    }

    fn tx_in_flight(&self) -> usize {
        self.q.lock().expect("test queue").in_ring.len()
    }

    fn hold_tx(&mut self, held: bool) {
        self.q.lock().expect("test queue").held = held;
    }

    /// A held link is a dead one here: what the ring keeps is refused, as the kernel would.
    fn give_up_tx(&mut self, _pool: &mut FramePool) {
        let mut q = self.q.lock().expect("test queue");
        if q.held {
            q.kernel_drops.tx_refused += q.in_ring.len() as u64;
            q.in_ring.clear();
        } else {
            q.kick();
        }
    }

    fn kernel_drops(&self) -> KernelDrops {
        self.q.lock().expect("test queue").kernel_drops
    }

    fn poll_fd(&self) -> Option<RawFd> {
        None
    }

    fn set_fill_depth(&mut self, depth: FillDepth) -> u64 {
        self.q.lock().expect("test queue").fill_depth = Some(depth);
        0
    }
}
