//! Loading and attaching the XDP steering program (`bpf/lossless.bpf.c`) with libbpf-rs.
//!
//! The program is tried device-bound first (`lossless_xdp_dev`, bound to the port's ifindex
//! with `BPF_F_XDP_DEV_BOUND_ONLY`, so one object per port): it reads the frame's hardware
//! RX stamp and a VLAN tag held as metadata through the XDP RX metadata kfuncs. A port where
//! that cannot load or attach (a driver without native XDP, an old kernel, generic mode)
//! gets the plain program (`lossless_xdp`) and a log line saying so; never an error.

use std::{
    ffi::CString,
    os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd},
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex,
    },
};

use libbpf_rs::{AsRawLibbpf, MapCore, MapFlags, MapHandle, Object, ObjectBuilder, Xdp, XdpFlags};
use serde::Deserialize;

use super::{
    classify::Trust,
    hwstamp,
    iface_lock::{IfaceLock, InUse},
    ingress::IngressMap,
    pool::XSK_MAX_FRAME,
};

/// The program's doorbells for the stall guard, one per guard thread at most
/// (`bell0`, `bell1` in `bpf/lossless.bpf.c`).
pub const BELLS: usize = 2;

/// A program bound to one device (for the XDP metadata kfuncs), not offloaded to it.
const BPF_F_XDP_DEV_BOUND_ONLY: u32 = libbpf_rs::libbpf_sys::BPF_F_XDP_DEV_BOUND_ONLY;

/// The per-CPU `counters` of the program (one entry, an array in the order of `CNT_*` in
/// `bpf/lossless.bpf.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XdpCounters {
    /// Frames redirected to a socket.
    pub redirected: u64,
    /// Frames passed to the kernel.
    pub passed: u64,
    /// Frames whose redirect failed (no socket on the queue).
    pub redirect_failed: u64,
    /// Redirected frames stamped in hardware (device-bound program).
    pub hw_stamps: u64,
    /// Redirected frames for which `bpf_xdp_metadata_rx_timestamp` returned an error.
    pub stamp_errors: u64,
    /// Redirected frames for which it returned 0 as the stamp (veth: an skb without one).
    pub stamp_zero: u64,
    /// Frames whose VLAN tag came from the metadata (`bpf_xdp_metadata_rx_vlan_tag`).
    pub meta_vlan: u64,
    /// Redirected frames that were to carry the ingress stamps and found no metadata area
    /// (a driver without one): not counted in the RX backlog.
    pub no_meta: u64,
}

impl XdpCounters {
    /// Number of counters in the map's entry.
    pub const LEN: u32 = 8;

    /// From the counters' values in map order.
    pub fn from_values(v: [u64; Self::LEN as usize]) -> Self {
        let [redirected, passed, redirect_failed, hw_stamps, stamp_errors, stamp_zero, meta_vlan, no_meta] =
            v;
        XdpCounters {
            redirected,
            passed,
            redirect_failed,
            hw_stamps,
            stamp_errors,
            stamp_zero,
            meta_vlan,
            no_meta,
        }
    }
}

/// The compiled XDP object, built by `build.rs`.
static OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/lossless.bpf.o"));

/// How the XDP program is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native (driver) mode if the driver supports it, else generic (SKB) mode.
    #[default]
    Auto,
    /// Driver mode only.
    Native,
    /// Generic SKB mode only.
    Skb,
}

/// Which frames the program steers to the daemon on one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steering {
    /// Every frame (a forwarding port).
    pub forward_all: bool,
    /// UDP destination port of test traffic (0 = none).
    pub test_udp_port: u16,
    /// UDP destination port of SFC messages (0 = none).
    pub sfc_udp_port: u16,
}

/// How the program accounts and polices a forwarding port's ingress (see
/// [`super::ingress`]). The default classifies by PCP, never drops for backlog and drops
/// (counted) only frames longer than an AF_XDP socket can receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IngressPolicy {
    /// The port's classification, the same rule as the worker's.
    pub trust: Trust,
    /// Priorities whose frames the program drops once the RX backlog is deep (the lossy ones).
    pub lossy_mask: u8,
    /// RX backlog, in frames, from which those frames are dropped (0 = never).
    pub lossy_backlog_frames: u32,
    /// Longest frame (bytes, without FCS) the port takes; longer ones are dropped and
    /// counted as `oversize`. At most what the port's sockets receive
    /// ([`XdpProgram::set_socket_max_frame`]); 0 = that.
    pub max_frame: u32,
    /// Keep no ingress counters and stamp only control frames and one data frame in 64 (for
    /// a forwarding port none of whose priorities is lossless, where nothing reads the
    /// counters: the accounting and the clock are most of the program's per-frame cost).
    /// Never for the tools' ports, whose every frame's stamp is read.
    pub sampled: bool,
}

/// Why the program could not be loaded or attached.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    /// The interface does not exist.
    #[error("interface {0:?} not found")]
    NoInterface(String),
    /// libbpf refused the object.
    #[error("loading the XDP program failed: {0}")]
    Load(String),
    /// The kernel refused the attachment.
    #[error("attaching XDP in {mode:?} mode to {iface} failed: {reason}")]
    Attach {
        /// Interface.
        iface: String,
        /// Mode asked for.
        mode: XdpMode,
        /// The kernel's answer.
        reason: String,
    },
    /// Another lossless process has the interface.
    #[error(transparent)]
    InUse(#[from] InUse),
    /// A map update failed.
    #[error("updating XDP map {map} on {iface} failed: {reason}")]
    Map {
        /// Interface.
        iface: String,
        /// Map name.
        map: &'static str,
        /// The kernel's answer.
        reason: String,
    },
}

/// The program attached to one interface; detached when dropped.
pub struct XdpProgram {
    obj: Object,
    prog_fd: RawFd,
    iface: String,
    ifindex: i32,
    /// Attach flags in force (`XdpFlags` bits; the type is not `Copy`).
    flags: u32,
    mode: XdpMode,
    steering: Steering,
    /// The program's ingress counters, mapped into this process.
    ingress: Arc<IngressMap>,
    /// Longest frame the port's sockets receive ([`XSK_MAX_FRAME`] unless multi-buffer).
    sock_max_frame: AtomicU32,
    /// The policy last set (rewritten when the sockets' capacity changes).
    policy: Mutex<IngressPolicy>,
    /// The device-bound variant is attached (hardware stamps and VLAN tags from metadata).
    device_bound: bool,
    /// PTP hardware clock of the port's hardware RX stamps, when the device-bound program
    /// can get them (RX hardware stamping on, a PHC to convert from).
    hw_rx_phc: Option<u32>,
    /// Attached (so detached on drop).
    attached: bool,
    /// The interface's lock, held while attached and let go after the detach (a field is
    /// dropped after `Drop::drop` runs).
    lock: Option<IfaceLock>,
}

impl std::fmt::Debug for XdpProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpProgram")
            .field("iface", &self.iface)
            .field("mode", &self.mode)
            .field("device_bound", &self.device_bound)
            .finish_non_exhaustive()
    }
}

/// Interface index of `iface`, if it exists.
pub fn ifindex(iface: &str) -> Option<i32> {
    let name = CString::new(iface).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (idx != 0).then_some(idx as i32)
}

/// Bytes of the kernel's `struct bpf_prog` in front of its instructions (6.x, x86-64).
const BPF_PROG_HEADER: usize = 72;
const PAGE: usize = 4096;

/// Whether a program submitted with `insns` instructions was reallocated during verification:
/// the kernel allocates whole pages for the header and the submitted instructions, and
/// `memlock` (from the program's fdinfo) is the pages it holds now. On 6.18 a device-bound
/// program reallocated this way keeps its old address in its offload record
/// (`bpf_prog_realloc` does not update `aux->offload->prog`), and removing the interface while
/// it is loaded oopses in `__bpf_prog_offload_destroy` with RTNL held: every later `ip` call
/// hangs. Our device-bound program grows by about 30 instructions at load (kfunc calls and
/// map lookups rewritten) to 463 of the 503 one page holds: close to that edge.
fn outgrew(insns: usize, memlock: usize) -> bool {
    memlock > (BPF_PROG_HEADER + insns * 8).div_ceil(PAGE) * PAGE
}

/// The bytes the kernel has locked for program `fd` (its pages), from `/proc/self/fdinfo`.
fn prog_memlock(fd: RawFd) -> Option<usize> {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("memlock:"))
        .and_then(|v| v.trim().parse().ok())
}

impl XdpProgram {
    /// Loads a fresh copy of the program, configures its steering and attaches it to `iface`,
    /// replacing any program left behind by a crashed run: the device-bound variant where
    /// the mode allows a native attachment and the kernel takes it, else the plain one.
    pub fn attach(iface: &str, mode: XdpMode, steering: Steering) -> Result<Self, XdpError> {
        let ifindex = ifindex(iface).ok_or_else(|| XdpError::NoInterface(iface.to_string()))?;
        // Before anything on the interface is touched: a live process's program is not stale.
        let mut lock = IfaceLock::take(iface, ifindex)?;
        if mode != XdpMode::Skb {
            match Self::load(iface, ifindex, mode, steering, true) {
                Ok(mut prog) => {
                    prog.lock = lock.take();
                    prog.hw_rx_phc = match hwstamp::enable_rx(iface) {
                        Ok(phc) => {
                            tracing::info!(
                                iface,
                                phc,
                                "RX stamps: hardware where the driver gives one (device-bound XDP)"
                            );
                            Some(phc)
                        }
                        Err(reason) => {
                            tracing::info!(iface, %reason, "RX stamps: XDP (bpf_ktime_get_ns), no hardware RX stamps");
                            None
                        }
                    };
                    // Only now does the program ask the driver for stamps (a PHC to convert
                    // them from is known): until here every frame had an XDP stamp.
                    if prog.hw_rx_phc.is_some() {
                        prog.rewrite_settings()?;
                    }
                    return Ok(prog);
                }
                Err(e) => tracing::warn!(
                    iface,
                    error = %e,
                    "device-bound XDP program refused (no hardware RX stamps, no VLAN tags \
                     held as metadata); using the plain program"
                ),
            }
        }
        let mut prog = Self::load(iface, ifindex, mode, steering, false)?;
        prog.lock = lock;
        Ok(prog)
    }

    /// Loads the program (`dev_bound`: the device-bound variant, bound to `ifindex`, attached
    /// natively only: the kernel refuses a device-bound program in generic mode).
    fn load(
        iface: &str,
        ifindex: i32,
        mode: XdpMode,
        steering: Steering,
        dev_bound: bool,
    ) -> Result<Self, XdpError> {
        let name = if dev_bound {
            "lossless_xdp_dev"
        } else {
            "lossless_xdp"
        };
        let mut open = ObjectBuilder::default()
            .open_memory(OBJECT)
            .map_err(|e| XdpError::Load(e.to_string()))?;
        for mut p in open.progs_mut() {
            let wanted = p.name() == name;
            p.set_autoload(wanted);
            if wanted && dev_bound {
                p.set_ifindex(ifindex as u32);
                // SAFETY: the program pointer is valid while `open` lives (libbpf-rs has no
                // getter for an open program's flags: "xdp.frags" set BPF_F_XDP_HAS_FRAGS).
                let flags = unsafe {
                    libbpf_rs::libbpf_sys::bpf_program__flags(p.as_libbpf_object().as_ptr())
                } | BPF_F_XDP_DEV_BOUND_ONLY;
                p.set_flags(flags);
            }
        }
        let obj = open.load().map_err(|e| XdpError::Load(e.to_string()))?;
        let (prog_fd, insns) = obj
            .progs()
            .find(|p| p.name() == name)
            .map(|p| (p.as_fd().as_raw_fd(), p.insn_cnt()))
            .ok_or_else(|| XdpError::Load(format!("object has no program {name}")))?;
        let memlock = prog_memlock(prog_fd);
        tracing::debug!(iface, program = name, insns, ?memlock, "XDP program loaded");
        if let Some(memlock) = memlock.filter(|&m| dev_bound && outgrew(insns, m)) {
            // Unloaded here (`obj` dropped), before the interface can go away.
            return Err(XdpError::Load(format!(
                "the verifier grew the program ({insns} instructions submitted, {memlock} bytes \
                 locked now) past the pages it was loaded in: device-bound, the kernel would keep \
                 a stale pointer to it and oops when {iface} is removed"
            )));
        }
        let ingress = obj
            .maps()
            .find(|m| m.name() == "ingress")
            .ok_or_else(|| XdpError::Load("object has no map ingress".into()))
            .and_then(|m| {
                IngressMap::map(m.as_fd()).map_err(|e| XdpError::Map {
                    iface: iface.to_string(),
                    map: "ingress",
                    reason: format!("mmap: {e}"),
                })
            })?;
        let mut prog = Self {
            obj,
            prog_fd,
            iface: iface.to_string(),
            ifindex,
            flags: 0,
            mode,
            steering,
            ingress: Arc::new(ingress),
            sock_max_frame: AtomicU32::new(XSK_MAX_FRAME as u32),
            policy: Mutex::new(IngressPolicy::default()),
            device_bound: dev_bound,
            hw_rx_phc: None,
            attached: false,
            lock: None,
        };
        prog.write_settings(IngressPolicy::default())?;
        prog.attach_mode(if dev_bound { XdpMode::Native } else { mode })?;
        Ok(prog)
    }

    fn attach_mode(&mut self, mode: XdpMode) -> Result<(), XdpError> {
        let (drv, skb) = (XdpFlags::DRV_MODE.bits(), XdpFlags::SKB_MODE.bits());
        let tries: &[u32] = match mode {
            XdpMode::Auto => &[drv, skb],
            XdpMode::Native => &[drv],
            XdpMode::Skb => &[skb],
        };
        let mut last = String::new();
        for &flags in tries {
            // A stale program from a crashed run (in either mode) is replaced, not an error.
            for stale in [drv, skb] {
                let stale = XdpFlags::from_bits_retain(stale);
                if self
                    .xdp()
                    .query_id(self.ifindex, XdpFlags::from_bits_retain(stale.bits()))
                    .unwrap_or(0)
                    != 0
                {
                    tracing::warn!(iface = %self.iface, "replacing an XDP program already attached");
                    let _ = self.xdp().detach(self.ifindex, stale);
                }
            }
            match self
                .xdp()
                .attach(self.ifindex, XdpFlags::from_bits_retain(flags))
            {
                Ok(()) => {
                    self.flags = flags;
                    self.attached = true;
                    tracing::info!(
                        iface = %self.iface,
                        native = flags == drv,
                        device_bound = self.device_bound,
                        "XDP program attached"
                    );
                    return Ok(());
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(XdpError::Attach {
            iface: self.iface.clone(),
            mode,
            reason: last,
        })
    }

    fn xdp(&self) -> Xdp<'_> {
        // SAFETY: the program fd is owned by `self.obj`, which outlives the returned borrow.
        Xdp::new(unsafe { BorrowedFd::borrow_raw(self.prog_fd) })
    }

    fn map_update(&self, name: &'static str, key: &[u8], value: &[u8]) -> Result<(), XdpError> {
        let map = self
            .obj
            .maps()
            .find(|m| m.name() == name)
            .ok_or_else(|| XdpError::Load(format!("object has no map {name}")))?;
        map.update(key, value, MapFlags::ANY)
            .map_err(|e| XdpError::Map {
                iface: self.iface.clone(),
                map: name,
                reason: e.to_string(),
            })
    }

    fn write_settings(&self, i: IngressPolicy) -> Result<(), XdpError> {
        let s = self.steering;
        let mut v = [0u8; 20];
        v[0..4].copy_from_slice(&u32::from(s.forward_all).to_ne_bytes());
        v[4..6].copy_from_slice(&s.test_udp_port.to_ne_bytes());
        v[6..8].copy_from_slice(&s.sfc_udp_port.to_ne_bytes());
        v[8] = u8::from(i.trust == Trust::Dscp);
        v[9] = i.lossy_mask;
        v[10] = u8::from(i.sampled);
        // Without a PHC to convert from, a hardware stamp would be thrown away (the worker
        // then takes its own clock): the program keeps the XDP stamp and skips the kfunc.
        v[11] = u8::from(self.hw_rx_phc.is_some());
        v[12..16].copy_from_slice(&i.lossy_backlog_frames.to_ne_bytes());
        // Never above what a socket receives (nor unlimited): the kernel would drop a longer
        // frame at the socket, uncounted.
        let sock = self.sock_max_frame.load(Ordering::Relaxed);
        let max_frame = match i.max_frame {
            0 => sock,
            m => m.min(sock),
        };
        v[16..20].copy_from_slice(&max_frame.to_ne_bytes());
        self.map_update("settings", &0u32.to_ne_bytes(), &v)
    }

    /// Sets how the program classifies and polices this port's ingress.
    pub fn set_ingress_policy(&self, policy: IngressPolicy) -> Result<(), XdpError> {
        *self.policy.lock().unwrap_or_else(|e| e.into_inner()) = policy;
        self.write_settings(policy)
    }

    /// Records that the port's sockets receive frames of up to `max_frame` bytes
    /// (multi-buffer sockets: [`super::pool::JUMBO_MAX_FRAME`]) and lets the program redirect
    /// frames that long, within the policy's own `max_frame`.
    pub fn set_socket_max_frame(&self, max_frame: u32) -> Result<(), XdpError> {
        if self.sock_max_frame.swap(max_frame, Ordering::Relaxed) == max_frame {
            return Ok(());
        }
        self.rewrite_settings()
    }

    /// Writes the settings again with the policy last set, after a fact of the port they
    /// carry changed (the sockets' capacity, hardware stamping).
    fn rewrite_settings(&self) -> Result<(), XdpError> {
        let policy = *self.policy.lock().unwrap_or_else(|e| e.into_inner());
        self.write_settings(policy)
    }

    /// The program's ingress counters (one entry per RX queue).
    pub fn ingress(&self) -> &Arc<IngressMap> {
        &self.ingress
    }

    /// The program's doorbells (ring buffers `bell0` and `bell1`, [`BELLS`]): a record in
    /// each when frames keep arriving for a queue whose worker has stopped taking its turns,
    /// naming the source of the frame that rang ([`super::doorbell::BellRecord`], see
    /// `bpf/lossless.bpf.c`); the stall guard's thread `k` waits on `bell<k>`.
    pub fn bells(&self) -> Result<Vec<MapHandle>, XdpError> {
        (0..BELLS)
            .map(|k| {
                let name = format!("bell{k}");
                let map = self
                    .obj
                    .maps()
                    .find(|m| m.name() == name.as_str())
                    .ok_or_else(|| XdpError::Load(format!("object has no map {name}")))?;
                MapHandle::try_from(&map).map_err(|e| XdpError::Map {
                    iface: self.iface.clone(),
                    map: "bell",
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// Steers frames received on `queue` to the AF_XDP socket `fd`.
    pub fn register_socket(&self, queue: u32, fd: RawFd) -> Result<(), XdpError> {
        self.map_update("xsks", &queue.to_ne_bytes(), &fd.to_ne_bytes())
    }

    /// The interface this program is attached to.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The mode asked for at attach time.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// True if the device-bound variant is attached: frames get hardware RX stamps where
    /// the driver has them, and a VLAN tag the driver holds as metadata counts.
    pub fn device_bound(&self) -> bool {
        self.device_bound
    }

    /// The PTP hardware clock (`/dev/ptp<n>`) whose time the program's hardware RX stamps
    /// are in, if the port gets them.
    pub fn hw_rx_phc(&self) -> Option<u32> {
        self.hw_rx_phc
    }

    /// The program's counters, summed over CPUs (a syscall: not for a worker).
    pub fn counters(&self) -> XdpCounters {
        let Some(map) = self.obj.maps().find(|m| m.name() == "counters") else {
            return XdpCounters::default();
        };
        // One entry per CPU, each the whole array of counters.
        let cpus = map
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .unwrap_or_default();
        let v = std::array::from_fn(|i| {
            cpus.iter()
                .filter_map(|c| c.get(i * 8..i * 8 + 8)?.try_into().ok())
                .map(u64::from_ne_bytes)
                .sum()
        });
        XdpCounters::from_values(v)
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        if !self.attached {
            return;
        }
        if self.device_bound {
            // What the metadata kfuncs gave, for the record (on a plain veth: no hardware
            // stamp, 0 from the kfunc for every frame from an skb).
            let c = self.counters();
            tracing::info!(
                iface = %self.iface,
                redirected = c.redirected,
                hw_stamps = c.hw_stamps,
                stamp_errors = c.stamp_errors,
                stamp_zero = c.stamp_zero,
                meta_vlan = c.meta_vlan,
                "XDP RX metadata"
            );
        }
        match self
            .xdp()
            .detach(self.ifindex, XdpFlags::from_bits_retain(self.flags))
        {
            Ok(()) => tracing::info!(iface = %self.iface, "XDP program detached"),
            Err(e) => tracing::warn!(iface = %self.iface, error = %e, "detaching XDP failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_reallocated_past_its_pages_is_seen() {
        // 420 submitted instructions take one page with the header; the kernel kept one.
        assert!(!outgrew(420, 4096));
        // It grew into a second page during verification.
        assert!(outgrew(420, 8192));
        // Submitted at two pages, still two.
        assert!(!outgrew(600, 8192));
        // The edge: 503 instructions and the header fill exactly one page.
        assert!(!outgrew(503, 4096));
        assert!(outgrew(503, 8192));
    }
}
