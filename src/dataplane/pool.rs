//! A worker's frame memory: one region of equal-sized frames that every port of the worker
//! receives into and transmits from, so forwarding moves a frame index, never the bytes.
//!
//! With AF_XDP the region is the worker's UMEM (shared by its sockets); for the AF_PACKET and
//! in-memory backends it is plain heap memory, and those ports copy at their boundary.

use std::num::NonZeroU32;

use xsk_rs::{config::UmemConfig, FrameDesc, Umem};

/// Bytes per frame.
pub const FRAME_SIZE: usize = 2048;

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

/// 64-bit words the XDP program writes in front of a frame's data (`bpf/lossless.bpf.c`):
/// the ingress frames stamp, the ingress bytes stamp, the RX timestamp.
pub const META_WORDS: usize = 3;

/// A frame owned by the worker: its index in the pool and its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Index of the frame in its pool.
    pub idx: u32,
    /// Length of the packet data.
    pub len: u32,
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

/// Fixed-size frames in one memory region with a free list.
pub struct FramePool {
    base: *mut u8,
    frames: u32,
    /// Offset of each frame's packet data from `base` (AF_XDP may move it within the frame).
    data_off: Vec<usize>,
    free: Vec<u32>,
    backing: Backing,
}

// SAFETY: the pool owns its region; the raw pointer is only dereferenced through `&self` /
// `&mut self` methods, and a pool is used by one worker thread at a time.
unsafe impl Send for FramePool {}

impl FramePool {
    /// A heap-backed pool for the AF_PACKET and in-memory backends.
    pub fn heap(frames: u32) -> Result<Self, PoolError> {
        if frames == 0 {
            return Err(PoolError::Empty);
        }
        let mut mem = vec![0u8; frames as usize * FRAME_SIZE].into_boxed_slice();
        let base = mem.as_mut_ptr();
        Ok(FramePool {
            base,
            frames,
            data_off: (0..frames as usize).map(|i| i * FRAME_SIZE).collect(),
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

    /// Takes a free frame.
    #[inline]
    pub fn alloc(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// Returns a frame to the free list.
    #[inline]
    pub fn release(&mut self, idx: u32) {
        debug_assert!(idx < self.frames);
        self.free.push(idx);
    }

    /// The packet data of `frame`.
    #[inline]
    pub fn data(&self, frame: Frame) -> &[u8] {
        let off = self.data_off[frame.idx as usize];
        let len = (frame.len as usize).min(self.room(frame.idx));
        // SAFETY: `off + len` stays within the frame, which lies within the region.
        unsafe { std::slice::from_raw_parts(self.base.add(off), len) }
    }

    /// The whole writable data area of frame `idx` (from its data start to the frame's end).
    #[inline]
    pub fn buf_mut(&mut self, idx: u32) -> &mut [u8] {
        let off = self.data_off[idx as usize];
        let room = self.room(idx);
        // SAFETY: as in `data`; `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(off), room) }
    }

    /// Reads and clears the [`META_WORDS`] words right before the packet data of `idx` (the
    /// XDP metadata area: ingress stamps, then the RX timestamp), so a later frame in the same
    /// buffer never sees stale values. `None` if the frame has no room for them.
    #[inline]
    pub fn take_meta(&mut self, idx: u32) -> Option<[u64; META_WORDS]> {
        const LEN: usize = META_WORDS * 8;
        let off = self.data_off[idx as usize];
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

    fn room(&self, idx: u32) -> usize {
        let off = self.data_off[idx as usize];
        FRAME_SIZE - off % FRAME_SIZE
    }

    /// Frame index of an AF_XDP descriptor, recording where the kernel put the data.
    #[inline]
    pub(crate) fn adopt_desc(&mut self, desc: &FrameDesc) -> Frame {
        let idx = (desc.addr() / FRAME_SIZE) as u32;
        self.data_off[idx as usize] = desc.addr();
        if let Backing::Umem { descs, .. } = &mut self.backing {
            descs[idx as usize] = *desc;
        }
        Frame {
            idx,
            len: desc.lengths().data() as u32,
        }
    }

    /// The AF_XDP descriptor for transmitting `frame` (UMEM pools only).
    #[inline]
    pub(crate) fn tx_desc(&mut self, frame: Frame) -> FrameDesc {
        match &mut self.backing {
            Backing::Umem { umem, descs } => {
                let d = &mut descs[frame.idx as usize];
                // SAFETY: the descriptor belongs to this UMEM; setting the length only.
                unsafe { umem.data_mut(d).cursor().set_pos(frame.len as usize) };
                *d
            }
            Backing::Heap(_) => unreachable!("AF_XDP ports are only built on UMEM pools"),
        }
    }

    /// The AF_XDP descriptor for handing free frame `idx` to a fill ring (UMEM pools only).
    #[inline]
    pub(crate) fn fill_desc(&self, idx: u32) -> FrameDesc {
        match &self.backing {
            Backing::Umem { descs, .. } => descs[idx as usize],
            Backing::Heap(_) => unreachable!("AF_XDP ports are only built on UMEM pools"),
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
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_ne!(a, b);
        p.buf_mut(a)[..3].copy_from_slice(b"abc");
        p.buf_mut(b)[..3].copy_from_slice(b"xyz");
        assert_eq!(p.data(Frame { idx: a, len: 3 }), b"abc");
        assert_eq!(p.data(Frame { idx: b, len: 3 }), b"xyz");
        assert_eq!(p.buf_mut(a).len(), FRAME_SIZE);
        // An absurd length is clamped to the frame, never read past it.
        assert_eq!(
            p.data(Frame {
                idx: a,
                len: 1 << 20
            })
            .len(),
            FRAME_SIZE
        );
        p.release(a);
        p.release(b);
        assert_eq!(p.available(), 4);
        assert!(FramePool::heap(0).is_err());
    }
}
