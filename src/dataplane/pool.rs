//! A worker's frame memory: one region of equal-sized frames that every port of the worker
//! receives into and transmits from, so forwarding moves a frame index, never the bytes.
//!
//! With AF_XDP the region is the worker's UMEM (shared by its sockets); for the AF_PACKET and
//! in-memory backends it is plain heap memory, and those ports copy at their boundary.
//!
//! A frame longer than one UMEM chunk (a jumbo frame over a multi-buffer socket) is a chain of
//! chunks: [`Frame::idx`] is its head, which holds the headers, and [`Frame::len`] is the
//! whole frame's length, so queues, admission and byte accounting see one frame of its real
//! size. Heap pools never chain: their frames are as large as the configured maximum frame.
//!
//! # Ownership: one token per frame
//! A [`Frame`] is the token for one frame of the pool (for a chain, its head and with it
//! every chunk): neither `Copy` nor `Clone`, with private fields, so holding one is owning
//! the frame. Each frame has exactly one owner at any time: the free list, one `Frame`
//! somewhere in a worker (an RX batch, a queue, a delay line, a TX batch), or the kernel.
//! - **Made** only here: [`FramePool::alloc`] and [`FramePool::alloc_frame`] take it from the
//!   free list; `FramePool::adopt_desc` makes it for a frame an AF_XDP RX or completion ring
//!   hands back. That one is `unsafe` and `pub(super)`: its contract is that the descriptor
//!   came from the kernel just now, whose frame has no token anywhere.
//! - **Moved** by everything that passes a frame on: a queue push, an RX batch, a delay line,
//!   a TX batch. A port's [`super::port::Port::send`] drains what it takes from the caller's
//!   vector and owns it from then on; what it leaves there stays the caller's.
//! - **Consumed** by [`FramePool::release`] (back to the free list) and by handing the frame
//!   to the kernel: the AF_XDP port drops the tokens of the frames its fill or TX ring took,
//!   and only those (`FramePool::fill_desc` and `FramePool::tx_descs` borrow the token to
//!   build the descriptor, so a frame a ring refuses is still owned).
//! - **Borrowed** by code that only reads or writes the bytes ([`FramePool::data`],
//!   [`FramePool::buf_mut`]) or counts its chunks ([`FramePool::tx_slots`]).
//!
//! So a frame released twice, or released and also queued or sent, is a use of a moved value
//! and does not compile. `release` took an index before, checked only by a debug assertion
//! (that the index lay in the pool); it has nothing left to check and is gone, and
//! `FramePool::adopt_desc` asserts that a descriptor lies in the pool instead.
//!
//! Where an index still travels without its token, it stays inside this module and the
//! AF_XDP port: the links of a chain (`next`), and the descriptors in the kernel's rings.
//! `FramePool::relink` (`unsafe`: its contract is exactly this) reads descriptors the port
//! built a moment before from tokens it still holds, to restore their chains, and makes no
//! token. `FramePool::chain` links a received chunk only from one owned token into
//! another. The only other way to make a token is `Frame::for_test`, compiled only into unit
//! tests that keep their own frames.

use std::num::NonZeroU32;

use xsk_rs::{config::UmemConfig, FrameDesc, Umem};

/// Bytes per frame (UMEM chunk; and a heap frame for frames up to [`PACKET_MAX_FRAME`]).
pub const FRAME_SIZE: usize = 2048;

/// Longest frame (bytes, without FCS) any backend carries: 9,216, the jumbo size switches and
/// NICs agree on (a 9,198-byte MTU plus Ethernet header and one 802.1Q tag).
pub const JUMBO_MAX_FRAME: usize = 9216;

/// Chunks a frame of [`JUMBO_MAX_FRAME`] takes at most over AF_XDP (a chunk carries at least
/// [`XSK_MAX_FRAME`] bytes of it).
pub const MAX_CHAIN: usize = JUMBO_MAX_FRAME.div_ceil(XSK_MAX_FRAME);

/// Bytes of a received frame's data [`FramePool::prefetch_rx`] asks for: the headers, and
/// all of a small frame (beyond that the CPU's own prefetcher follows a sequential copy).
const PREFETCH_DATA: usize = 256;

/// Option bit of an AF_XDP descriptor: the frame continues in the next descriptor.
pub const XDP_PKT_CONTD: u32 = 1;

/// No next chunk.
const NIL: u32 = u32::MAX;

/// Room the kernel keeps in front of a received frame in an AF_XDP buffer
/// (`XDP_PACKET_HEADROOM`; the XDP metadata lives there).
const XDP_PACKET_HEADROOM: usize = 256;

/// Longest frame (bytes, without FCS) an AF_XDP socket receives into one of our UMEM
/// frames: the kernel drops anything longer at the socket (counted only in its `rx_dropped`).
pub const XSK_MAX_FRAME: usize = FRAME_SIZE - XDP_PACKET_HEADROOM;

/// Longest frame (bytes, without FCS) an AF_PACKET port receives whole into one heap frame:
/// it receives 4 bytes in, to put back the 802.1Q tag the kernel strips.
pub const PACKET_MAX_FRAME: usize = FRAME_SIZE - 4;

/// Frames of a pool of `pool_frames` that a worker never hands to the kernel's fill rings, so
/// the control frames it must send (PFC above all: it is what relieves a pool running short)
/// always find a buffer: 512, or an eighth of a small pool.
pub fn control_reserve(pool_frames: u32) -> usize {
    512.min(pool_frames as usize / 8)
}

pub use super::rx_meta::META_WORDS;

/// The token of one frame owned by the worker: its index in the pool and its length in
/// bytes. Not `Copy`, not `Clone`, and made only by the pool (see the module doc): holding
/// one is owning the frame, and [`FramePool::release`] takes it back.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a frame dropped without FramePool::release never returns to the pool"]
pub struct Frame {
    /// Index of the frame (of a chain: its head chunk) in its pool.
    idx: u32,
    /// Length of the packet data (of a chain: of the whole frame).
    len: u32,
}

impl Frame {
    /// Index of the frame in its pool (to look at, or to key a table: it gives no access).
    #[inline]
    pub fn idx(&self) -> u32 {
        self.idx
    }

    /// Length of the packet data in bytes.
    #[inline]
    pub fn len(&self) -> u32 {
        self.len
    }

    /// True for a frame of no bytes (one just taken with [`FramePool::alloc`]).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sets the length of a single-chunk frame from [`FramePool::alloc`] after its bytes
    /// were written ([`FramePool::data`] never reads past the chunk whatever it says).
    #[inline]
    pub fn set_len(&mut self, len: usize) {
        self.len = len as u32;
    }

    /// A token for frame `idx` made up by a unit test that keeps its own frames (a `Vec` of
    /// buffers indexed like a pool): never compiled outside tests, so no code can forge one.
    #[cfg(test)]
    pub(crate) fn for_test(idx: u32, len: u32) -> Self {
        Frame { idx, len }
    }
}

/// Why a pool could not be created.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The UMEM could not be registered.
    #[error("creating the AF_XDP UMEM of {frames} frames failed: {reason} (is RLIMIT_MEMLOCK high enough? run as root or with CAP_IPC_LOCK)")]
    Umem {
        /// Frames asked for.
        frames: u32,
        /// libxdp's error.
        reason: String,
    },
    /// Zero frames were asked for.
    #[error("a frame pool needs at least one frame")]
    Empty,
}

enum Backing {
    Umem { umem: Umem, descs: Vec<FrameDesc> },
    Heap(#[allow(dead_code)] Box<[u8]>),
}

/// Bytes per frame of a heap pool that receives frames of up to `max_frame` bytes whole:
/// [`FRAME_SIZE`] (the 2 KiB layout) up to [`PACKET_MAX_FRAME`], else room for any jumbo
/// frame, [`JUMBO_MAX_FRAME`] (an AF_PACKET port receives 4 bytes in, see
/// [`PACKET_MAX_FRAME`]): 10 KiB.
pub fn heap_frame_size(max_frame: usize) -> usize {
    if max_frame <= PACKET_MAX_FRAME {
        FRAME_SIZE
    } else {
        (JUMBO_MAX_FRAME + 4).next_multiple_of(1024)
    }
}

/// Fixed-size frames in one memory region with a free list.
pub struct FramePool {
    base: *mut u8,
    frames: u32,
    /// Bytes per frame (chunk).
    frame_size: usize,
    /// Next chunk of a chained frame ([`NIL`]: the last, or not chained).
    next: Vec<u32>,
    /// Bytes of a chained frame held in each of its chunks.
    seg_len: Vec<u32>,
    /// Offset of each frame's packet data from `base` (AF_XDP may move it within the frame).
    data_off: Vec<usize>,
    free: Vec<u32>,
    backing: Backing,
}

// SAFETY: the pool owns its region; the raw pointer is only dereferenced through `&self` /
// `&mut self` methods, and a pool is used by one worker thread at a time.
unsafe impl Send for FramePool {}

impl FramePool {
    /// A heap-backed pool of [`FRAME_SIZE`] frames for the AF_PACKET and in-memory backends.
    pub fn heap(frames: u32) -> Result<Self, PoolError> {
        Self::heap_sized(frames, FRAME_SIZE)
    }

    /// A heap-backed pool of `frame_size`-byte frames (see [`heap_frame_size`]).
    pub fn heap_sized(frames: u32, frame_size: usize) -> Result<Self, PoolError> {
        if frames == 0 {
            return Err(PoolError::Empty);
        }
        // Zeroed allocation: pages of frames never used are never touched.
        let mut mem = vec![0u8; frames as usize * frame_size].into_boxed_slice();
        let base = mem.as_mut_ptr();
        Ok(FramePool {
            base,
            frames,
            frame_size,
            next: vec![NIL; frames as usize],
            seg_len: vec![0; frames as usize],
            data_off: (0..frames as usize).map(|i| i * frame_size).collect(),
            free: (0..frames).rev().collect(),
            backing: Backing::Heap(mem),
        })
    }

    /// A UMEM-backed pool for AF_XDP sockets.
    pub fn umem(frames: u32) -> Result<Self, PoolError> {
        let n = NonZeroU32::new(frames).ok_or(PoolError::Empty)?;
        let config = UmemConfig::builder()
            .frame_size(
                (FRAME_SIZE as u32)
                    .try_into()
                    .expect("FRAME_SIZE is a valid frame size"),
            )
            .fill_queue_size(16384.try_into().expect("power of two"))
            .comp_queue_size(4096.try_into().expect("power of two"))
            .build()
            .map_err(|e| PoolError::Umem {
                frames,
                reason: e.to_string(),
            })?;
        let (umem, mut descs) = Umem::new(config, n, false).map_err(|e| PoolError::Umem {
            frames,
            reason: e.to_string(),
        })?;
        // SAFETY: descs[0] belongs to this UMEM and nothing else accesses it yet.
        let first = unsafe { umem.data_mut(&mut descs[0]).contents_mut().as_mut_ptr() };
        // SAFETY: the data segment of frame 0 lies `addr` bytes into the region.
        let base = unsafe { first.sub(descs[0].addr()) };
        Ok(FramePool {
            base,
            frames,
            frame_size: FRAME_SIZE,
            next: vec![NIL; frames as usize],
            seg_len: vec![0; frames as usize],
            data_off: descs.iter().map(|d| d.addr()).collect(),
            free: (0..frames).rev().collect(),
            backing: Backing::Umem { umem, descs },
        })
    }

    /// The UMEM, if this pool is one.
    pub fn as_umem(&self) -> Option<&Umem> {
        match &self.backing {
            Backing::Umem { umem, .. } => Some(umem),
            Backing::Heap(_) => None,
        }
    }

    /// Total frames.
    pub fn capacity(&self) -> u32 {
        self.frames
    }

    /// Frames currently free.
    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Takes a free frame (one chunk, of length 0: write it with [`FramePool::buf_mut`],
    /// then [`Frame::set_len`]).
    #[inline]
    pub fn alloc(&mut self) -> Option<Frame> {
        self.free.pop().map(|idx| Frame { idx, len: 0 })
    }

    /// Returns a frame to the free list: every chunk of it, if it is a chain. It takes the
    /// token, so the frame cannot be released again or used after.
    #[inline]
    pub fn release(&mut self, frame: Frame) {
        self.release_idx(frame.idx);
    }

    /// [`FramePool::release`] of an index whose token was consumed by the caller (this
    /// module's own failure paths).
    #[inline]
    fn release_idx(&mut self, idx: u32) {
        self.free.push(idx);
        if self.next[idx as usize] != NIL {
            self.release_chain(idx);
        }
    }

    /// The rest of a chain whose head [`FramePool::release`] freed (kept out of line: the
    /// common frame is one chunk).
    #[cold]
    #[inline(never)]
    fn release_chain(&mut self, head: u32) {
        let mut n = std::mem::replace(&mut self.next[head as usize], NIL);
        while n != NIL {
            self.free.push(n);
            n = std::mem::replace(&mut self.next[n as usize], NIL);
        }
    }

    /// Bytes per frame (chunk) of this pool.
    pub fn frame_size(&self) -> usize {
        self.frame_size
    }

    /// Whether `frame` continues in further chunks.
    #[inline]
    pub fn is_chained(&self, frame: &Frame) -> bool {
        self.next[frame.idx as usize] != NIL
    }

    /// Appends chunk `seg` holding `seg_len` bytes to the chain ending in `tail`
    /// (`tail`'s own `seg_len` is recorded too).
    #[inline]
    fn link(&mut self, tail: u32, tail_len: u32, seg: u32, seg_len: u32) {
        self.next[tail as usize] = seg;
        self.seg_len[tail as usize] = tail_len;
        self.seg_len[seg as usize] = seg_len;
    }

    /// Takes free chunks for a frame of `len` bytes, chained when one chunk does not hold it
    /// (UMEM pools; a heap pool's frame holds any frame it was sized for). `None`, with
    /// nothing taken, when the pool runs short or `len` exceeds [`JUMBO_MAX_FRAME`].
    pub fn alloc_frame(&mut self, len: usize) -> Option<Frame> {
        let head = self.free.pop()?;
        let mut left = len.saturating_sub(self.room(head));
        if left > 0 && (len > JUMBO_MAX_FRAME || !matches!(self.backing, Backing::Umem { .. })) {
            self.release_idx(head);
            return None;
        }
        let mut tail = head;
        let mut tail_len = len.min(self.room(head));
        while left > 0 {
            let Some(seg) = self.free.pop() else {
                self.release_idx(head);
                return None;
            };
            let n = left.min(self.room(seg));
            self.link(tail, tail_len as u32, seg, n as u32);
            (tail, tail_len) = (seg, n);
            left -= n;
        }
        Some(Frame {
            idx: head,
            len: len as u32,
        })
    }

    /// Copies `bytes` into `frame` (from [`FramePool::alloc_frame`] for `bytes.len()`),
    /// across its chunks.
    pub fn write_frame(&mut self, frame: &Frame, bytes: &[u8]) {
        let mut c = frame.idx;
        let mut rest = &bytes[..bytes.len().min(frame.len as usize)];
        while !rest.is_empty() && c != NIL {
            let buf = self.chunk_mut(c);
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            c = self.next[c as usize];
        }
    }

    /// The whole frame's bytes, appended to `out` (all chunks of a chain; a test and
    /// copy-out helper, not for the hot path).
    pub fn copy_frame(&self, frame: &Frame, out: &mut Vec<u8>) {
        if !self.is_chained(frame) {
            out.extend_from_slice(self.data(frame));
            return;
        }
        let mut c = frame.idx;
        while c != NIL {
            let len = (self.seg_len[c as usize] as usize).min(self.room(c));
            let off = self.data_off[c as usize];
            // SAFETY: `off + len` stays within chunk `c`, which lies within the region.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(self.base.add(off), len) });
            c = self.next[c as usize];
        }
    }

    /// The packet data of `frame` (of a chain: its head chunk, which holds the headers; a
    /// chain's head is full, whether copy-mode AF_XDP or [`FramePool::alloc_frame`] made it).
    #[inline]
    pub fn data(&self, frame: &Frame) -> &[u8] {
        let off = self.data_off[frame.idx as usize];
        let len = (frame.len as usize).min(self.room(frame.idx));
        // SAFETY: `off + len` stays within the frame, which lies within the region.
        unsafe { std::slice::from_raw_parts(self.base.add(off), len) }
    }

    /// The whole writable data area of `frame` (from its data start to the end of its head
    /// chunk).
    #[inline]
    pub fn buf_mut(&mut self, frame: &Frame) -> &mut [u8] {
        self.chunk_mut(frame.idx)
    }

    /// The writable data area of chunk `idx`.
    #[inline]
    fn chunk_mut(&mut self, idx: u32) -> &mut [u8] {
        let off = self.data_off[idx as usize];
        let room = self.room(idx);
        // SAFETY: as in `data`; `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(off), room) }
    }

    /// Reads and clears the [`META_WORDS`] words right before the packet data of `frame`
    /// (the XDP metadata area, [`super::rx_meta`]), so a later frame in the same
    /// buffer never sees stale values. `None` if the frame has no room for them.
    #[inline]
    pub fn take_meta(&mut self, frame: &Frame) -> Option<[u64; META_WORDS]> {
        const LEN: usize = META_WORDS * 8;
        let off = self.data_off[frame.idx as usize];
        let frame_start = off - off % FRAME_SIZE;
        if off < frame_start + LEN {
            return None;
        }
        let mut b = [0u8; LEN];
        // SAFETY: the bytes lie in the same frame before its data.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(off - LEN), b.as_mut_ptr(), LEN);
            std::ptr::write_bytes(self.base.add(off - LEN), 0, LEN);
        }
        Some(std::array::from_fn(|i| {
            u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
        }))
    }

    /// Bytes from frame `idx`'s data start to its end (frame `idx` spans
    /// `idx * frame_size ..` of the region: a multiplication, not a division per call).
    #[inline]
    fn room(&self, idx: u32) -> usize {
        let off = self.data_off[idx as usize];
        (idx as usize + 1) * self.frame_size - off
    }

    /// The token of the frame an AF_XDP descriptor the kernel handed back holds, recording
    /// where the kernel put the data (one chunk: a frame continued in further descriptors is
    /// chained with [`FramePool::chain`]). The one place outside the free list where a token
    /// is made.
    ///
    /// # Safety
    /// `desc` was just consumed from the RX or completion ring of a socket on this pool's
    /// UMEM: the kernel gave the frame back, and no token for it exists (its token was
    /// dropped when its fill or TX ring took it).
    /// Adopting any other descriptor makes a second owner of a frame.
    #[inline]
    pub(super) unsafe fn adopt_desc(&mut self, desc: &FrameDesc) -> Frame {
        let idx = (desc.addr() / FRAME_SIZE) as u32;
        assert!(idx < self.frames, "a descriptor outside the UMEM");
        self.data_off[idx as usize] = desc.addr();
        if let Backing::Umem { descs, .. } = &mut self.backing {
            descs[idx as usize] = *desc;
        }
        Frame {
            idx,
            len: desc.lengths().data() as u32,
        }
    }

    /// Hints the CPU to start loading what will be read of the frame an RX descriptor holds:
    /// its XDP metadata (read and cleared by [`FramePool::take_meta`]) and, with `data`, its
    /// first [`PREFETCH_DATA`] bytes.
    ///
    /// Why: in copy mode the kernel wrote the frame on the CPU that received it, which on
    /// veth is the sender's, so every line of it the worker's CPU touches is a miss served
    /// from another core's cache. Touched one frame at a time, they are waited for one after
    /// another: the metadata in [`super::port::Port::recv`], the data in the kernel's copy
    /// into an skb when the frame is sent. Hinted for a whole batch first, the misses
    /// overlap: on bench/forward's lossy row that copy went from 73-116 to 19-57 ns per
    /// frame forwarded (OVS's, whose user space reads each frame's headers before it sends
    /// it, 11-14 ns) and the worker's own step from 69-85 to 25-66 (three profiles each,
    /// bench/RESULTS.md "(12)"). In zero-copy mode the NIC reads the data itself, so the port
    /// asks only for the metadata. A hint never faults and is a no-op off x86-64.
    #[inline]
    pub(super) fn prefetch_rx(&self, desc: &FrameDesc, data: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let at = self.base.wrapping_add(desc.addr());
            // SAFETY: a prefetch is a hint: it reads nothing and never faults, whatever the
            // address (which lies in the UMEM anyway: the kernel wrote the descriptor).
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(at.wrapping_sub(META_WORDS * 8).cast());
                if data {
                    let len = desc.lengths().data().min(PREFETCH_DATA);
                    for off in (0..len).step_by(64) {
                        _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(off).cast());
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (desc, data);
    }

    /// Buffers (TX descriptors) `frame` takes: 1, or its chunks if it is a chain. What
    /// [`super::port::Port::tx_room`] counts.
    #[inline]
    pub fn tx_slots(&self, frame: &Frame) -> usize {
        if !self.is_chained(frame) {
            return 1;
        }
        self.chain_len(frame)
    }

    /// Chunks of `frame`.
    #[inline]
    pub(crate) fn chain_len(&self, frame: &Frame) -> usize {
        let mut n = 1;
        let mut c = self.next[frame.idx as usize];
        while c != NIL {
            n += 1;
            c = self.next[c as usize];
        }
        n
    }

    /// The AF_XDP descriptors for transmitting `frame` (UMEM pools only), written to `out`:
    /// one, or one per chunk of a chain, all but the last marked [`XDP_PKT_CONTD`]. The chain
    /// is undone (each chunk completes, and is released, on its own). The caller still holds
    /// the token: it gives it up once the ring took the descriptors, or puts the chain back
    /// with [`FramePool::relink`] if the ring refused them.
    #[inline]
    pub(super) fn tx_descs(&mut self, frame: &Frame, out: &mut [FrameDesc]) -> usize {
        let Backing::Umem { umem, descs } = &mut self.backing else {
            unreachable!("AF_XDP ports are only built on UMEM pools")
        };
        let mut c = frame.idx;
        let mut n = 0;
        loop {
            let next = std::mem::replace(&mut self.next[c as usize], NIL);
            let len = if next == NIL && n == 0 {
                frame.len
            } else {
                self.seg_len[c as usize]
            };
            let d = &mut descs[c as usize];
            // SAFETY: the descriptor belongs to this UMEM; setting the length only.
            unsafe { umem.data_mut(d).cursor().set_pos(len as usize) };
            d.set_options(if next == NIL { 0 } else { XDP_PKT_CONTD });
            out[n] = *d;
            n += 1;
            if next == NIL {
                return n;
            }
            c = next;
        }
    }

    /// The AF_XDP descriptor for handing free `frame` to a fill ring (UMEM pools only). The
    /// caller gives up the token once the ring took the descriptor: the frame is the
    /// kernel's until its RX ring hands it back ([`FramePool::adopt_desc`]).
    #[inline]
    pub(super) fn fill_desc(&self, frame: &Frame) -> FrameDesc {
        match &self.backing {
            Backing::Umem { descs, .. } => descs[frame.idx as usize],
            Backing::Heap(_) => unreachable!("AF_XDP ports are only built on UMEM pools"),
        }
    }

    /// Chains a received chunk `seg` (adopted from a descriptor marked [`XDP_PKT_CONTD`] in
    /// front of it) behind the last chunk of `head`: the chunk's token becomes part of the
    /// head's, and the head's length grows by it. Both are owned tokens, so no chunk can be
    /// linked into a frame someone else owns. (The walk to the last chunk is at most
    /// [`MAX_CHAIN`] steps, and only for jumbo frames.)
    #[inline]
    pub(super) fn chain(&mut self, head: &mut Frame, seg: Frame) {
        let (mut tail, mut tail_len) = (head.idx, head.len);
        while self.next[tail as usize] != NIL {
            tail = self.next[tail as usize];
            tail_len = self.seg_len[tail as usize];
        }
        self.link(tail, tail_len, seg.idx, seg.len);
        head.len += seg.len;
    }

    /// Chains again the frames whose descriptors `descs` were built by
    /// [`FramePool::tx_descs`] (which undid their chains) and not handed to the kernel: the
    /// tokens stayed with the caller, only the links come back.
    ///
    /// # Safety
    /// `descs` were built by [`FramePool::tx_descs`] from frames whose tokens the caller
    /// still holds (none went to the kernel): linked from any other descriptors, a chunk
    /// someone else owns would go back to the free list with a chain's head.
    pub(super) unsafe fn relink(&mut self, descs: &[FrameDesc]) {
        let mut prev: Option<(u32, u32)> = None;
        for d in descs {
            let idx = (d.addr() / FRAME_SIZE) as u32;
            let len = d.lengths().data() as u32;
            if let Some((tail, tail_len)) = prev {
                self.link(tail, tail_len, idx, len);
            }
            prev = (d.options() & XDP_PKT_CONTD != 0).then_some((idx, len));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_pool_alloc_write_read_release() {
        let mut p = FramePool::heap(4).unwrap();
        assert_eq!(p.available(), 4);
        let mut a = p.alloc().unwrap();
        let mut b = p.alloc().unwrap();
        assert_ne!(a.idx(), b.idx());
        assert!(a.is_empty());
        p.buf_mut(&a)[..3].copy_from_slice(b"abc");
        p.buf_mut(&b)[..3].copy_from_slice(b"xyz");
        a.set_len(3);
        b.set_len(3);
        assert_eq!(p.data(&a), b"abc");
        assert_eq!(p.data(&b), b"xyz");
        assert_eq!(p.buf_mut(&a).len(), FRAME_SIZE);
        // An absurd length is clamped to the frame, never read past it.
        a.set_len(1 << 20);
        assert_eq!(p.data(&a).len(), FRAME_SIZE);
        p.release(a);
        p.release(b);
        assert_eq!(p.available(), 4);
        assert!(FramePool::heap(0).is_err());
    }

    #[test]
    fn heap_frames_follow_the_max_frame() {
        assert_eq!(heap_frame_size(1518), FRAME_SIZE);
        assert_eq!(heap_frame_size(PACKET_MAX_FRAME), FRAME_SIZE);
        assert_eq!(heap_frame_size(9018), 10240);
        assert_eq!(heap_frame_size(20_000), 10240, "never above a jumbo frame");
        let mut p = FramePool::heap_sized(2, heap_frame_size(9216)).unwrap();
        let f = p.alloc_frame(9216).expect("one frame holds it");
        assert!(!p.is_chained(&f));
        let bytes: Vec<u8> = (0..9216u32).map(|i| i as u8).collect();
        p.write_frame(&f, &bytes);
        assert_eq!(p.data(&f), &bytes[..]);
        // A heap frame is never chained: longer than it holds is refused, nothing taken.
        assert!(p.alloc_frame(10_241).is_none());
        assert_eq!(p.available(), 1);
    }

    /// A jumbo frame in 2 KiB UMEM chunks: allocated as a chain, written across it, read
    /// back whole, transmitted as descriptors marked to continue, released whole.
    #[test]
    fn umem_chains_carry_a_jumbo_frame() {
        let Ok(mut p) = FramePool::umem(64) else {
            eprintln!("skipped: no UMEM (RLIMIT_MEMLOCK)");
            return;
        };
        let bytes: Vec<u8> = (0..9000u32).map(|i| (i * 7) as u8).collect();
        let f = p.alloc_frame(9000).expect("chunks free");
        assert!(p.is_chained(&f));
        let chunks = p.chain_len(&f);
        assert!((5..=MAX_CHAIN).contains(&chunks), "{chunks}");
        assert_eq!(p.available(), 64 - chunks);
        p.write_frame(&f, &bytes);
        let mut back = Vec::new();
        p.copy_frame(&f, &mut back);
        assert_eq!(back, bytes);
        // The head holds the headers: `data` is the first chunk only.
        assert_eq!(p.data(&f), &bytes[..p.data(&f).len()]);
        assert!(p.data(&f).len() >= XSK_MAX_FRAME);

        let mut descs = vec![FrameDesc::default(); MAX_CHAIN];
        let n = p.tx_descs(&f, &mut descs);
        assert_eq!(n, chunks);
        let total: usize = descs[..n].iter().map(|d| d.lengths().data()).sum();
        assert_eq!(total, 9000);
        assert!(descs[..n - 1]
            .iter()
            .all(|d| d.options() & XDP_PKT_CONTD != 0));
        assert_eq!(descs[n - 1].options() & XDP_PKT_CONTD, 0);
        // Transmitted, the chain is undone: each chunk completes and is released alone.
        assert!(!p.is_chained(&f));
        // The chunks went to the kernel with the descriptors: the port drops the token here,
        // and the completions hand each chunk back.
        drop(f);
        for d in &descs[..n] {
            // SAFETY: as if completed: the chunks' token was given up above.
            let seg = unsafe { p.adopt_desc(d) };
            p.release(seg);
        }
        assert_eq!(p.available(), 64);

        // Refused by the ring, the descriptors are chained again behind the caller's token.
        let f = p.alloc_frame(9000).expect("chunks free");
        let n = p.tx_descs(&f, &mut descs);
        assert!(!p.is_chained(&f));
        // SAFETY: built from `f`, still held, by `tx_descs` just above.
        unsafe { p.relink(&descs[..n]) };
        assert_eq!(p.chain_len(&f), n);
        let mut back = Vec::new();
        p.copy_frame(&f, &mut back);
        assert_eq!(back.len(), 9000);
        p.release(f);
        assert_eq!(p.available(), 64);

        // Chunks arriving one by one (multi-buffer RX) go behind the last chunk of the head.
        let mut head = p.alloc().unwrap();
        head.set_len(1000);
        for _ in 0..2 {
            let mut seg = p.alloc().unwrap();
            seg.set_len(100);
            p.chain(&mut head, seg);
        }
        assert_eq!((p.chain_len(&head), head.len()), (3, 1200));
        let mut back = Vec::new();
        p.copy_frame(&head, &mut back);
        assert_eq!(back.len(), 1200);
        p.release(head);
        assert_eq!(p.available(), 64);

        // Released before TX, the whole chain goes back.
        let f = p.alloc_frame(9216).expect("chunks free");
        p.release(f);
        assert_eq!(p.available(), 64);
        // A single-chunk frame stays one descriptor, its length the frame's.
        let f = p.alloc_frame(1518).unwrap();
        assert!(!p.is_chained(&f));
        assert_eq!(p.tx_descs(&f, &mut descs), 1);
        assert_eq!(descs[0].lengths().data(), 1518);
        assert_eq!(descs[0].options(), 0);
        p.release(f);
        // Longer than any frame carried, or more than the pool holds: refused, nothing taken.
        assert!(p.alloc_frame(JUMBO_MAX_FRAME + 1).is_none());
        let mut small = FramePool::umem(4).unwrap();
        assert!(small.alloc_frame(9000).is_none());
        assert_eq!(small.available(), 4);
    }
}
