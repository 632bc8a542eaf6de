//! Opening a worker's ports with the configured backend: AF_XDP over a UMEM pool with the
//! XDP program attached, falling back to AF_PACKET over a heap pool where AF_XDP is refused.

use std::sync::Arc;

use super::{
    af_packet::AfPacketPort,
    af_xdp::{AfXdpOptions, AfXdpPort},
    ingress::MAX_QUEUES,
    pool::{heap_frame_size, FramePool, PoolError, JUMBO_MAX_FRAME, XSK_MAX_FRAME},
    port::{iface_mtu, iface_rx_queues, Port, PortError},
    queue_set::QueueSet,
    xdp_prog::{Steering, XdpError, XdpMode, XdpProgram},
};

/// Packet I/O backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// AF_XDP, falling back to AF_PACKET where AF_XDP is refused.
    #[default]
    Auto,
    /// AF_XDP only.
    AfXdp,
    /// AF_PACKET only (no XDP program; copies every frame).
    AfPacket,
}

/// Bytes a frame has beyond its MTU: the Ethernet header and one 802.1Q tag (the FCS never
/// reaches software).
pub const FRAME_OVERHEAD: u32 = 18;

impl Backend {
    /// Longest frame (bytes, without FCS) this backend receives whole. `auto` may end up on
    /// either, so it carries what both carry.
    pub fn max_frame(self) -> u32 {
        // AF_XDP through multi-buffer sockets, AF_PACKET through a pool of larger frames.
        JUMBO_MAX_FRAME as u32
    }

    /// The largest MTU whose frames this backend carries.
    pub fn max_mtu(self) -> u32 {
        self.max_frame() - FRAME_OVERHEAD
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto (AF_XDP)",
            Backend::AfXdp => "af-xdp",
            Backend::AfPacket => "af-packet",
        }
    }
}

/// Why ports could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The frame pool could not be created.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The XDP program could not be attached.
    #[error(transparent)]
    Xdp(#[from] XdpError),
    /// A socket could not be opened.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// The RX queues `iface` receives on, where that is more than `sockets` cover (bound to
/// queues 0 up to `sockets`). An AF_XDP socket receives what arrives on its queue, and the XDP
/// program can steer a frame only to the socket of the queue it arrived on, so a frame on a
/// queue without one goes to the kernel, unseen: on veth, what its peer sent on that TX queue;
/// on a NIC, whatever flows RSS hashes there. An interface whose driver does not report its
/// channels counts as covered.
pub fn uncovered_queues(iface: &str, sockets: u32) -> Option<u32> {
    iface_rx_queues(iface).filter(|&n| n > sockets)
}

/// XDP programs attached to a set of interfaces (detached on drop).
pub struct Attached {
    /// One per interface, in the order given.
    pub programs: Vec<Arc<XdpProgram>>,
}

/// Attaches the XDP program to every interface in `ifaces`.
pub fn attach_all(
    ifaces: &[String],
    mode: XdpMode,
    steering: Steering,
) -> Result<Attached, XdpError> {
    let programs = ifaces
        .iter()
        .map(|i| XdpProgram::attach(i, mode, steering).map(Arc::new))
        .collect::<Result<_, _>>()?;
    Ok(Attached { programs })
}

/// Attaches the XDP program as `backend` asks: not at all for AF_PACKET, required for AF_XDP,
/// and for `auto` attempted, with a warning and `None` (AF_PACKET) when refused.
pub fn attach_for(
    backend: Backend,
    ifaces: &[String],
    mode: XdpMode,
    steering: Steering,
) -> Result<Option<Attached>, XdpError> {
    match backend {
        Backend::AfPacket => Ok(None),
        Backend::AfXdp => attach_all(ifaces, mode, steering).map(Some),
        Backend::Auto => match attach_all(ifaces, mode, steering) {
            Ok(a) => Ok(Some(a)),
            // Not a refusal of XDP: AF_PACKET beside the other process would forward too.
            Err(e @ XdpError::InUse(_)) => Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "XDP refused; using AF_PACKET");
                Ok(None)
            }
        },
    }
}

/// The ports of one worker and the pool they share.
pub struct WorkerPorts {
    /// Frame memory.
    pub pool: FramePool,
    /// One port per interface, in the order given.
    pub ports: Vec<Box<dyn Port>>,
    /// The backend actually used.
    pub backend: &'static str,
    /// Longest frame (bytes) the ports receive whole. A received frame reported longer was
    /// truncated (AF_PACKET reports the real length) and must be dropped as oversize; over
    /// AF_XDP the XDP program drops longer frames before the socket
    /// ([`Port::oversize_drops`]).
    pub max_frame: u32,
    /// Per port, the RX queues its AF_XDP sockets bind, from queue 0 ([`Queues::All`]); 1 for
    /// a worker's port (its own queue) and for an AF_PACKET port (one socket for them all).
    pub rx_queues: Vec<u32>,
}

/// Longest frame (bytes, without FCS) the interfaces' MTUs let through: the largest MTU plus
/// Ethernet header and one 802.1Q tag (a tool's need when nothing is configured; an unknown
/// MTU counts as 1500).
pub fn iface_max_frame(ifaces: &[String]) -> u32 {
    ifaces
        .iter()
        .map(|i| iface_mtu(i).unwrap_or(1500).saturating_add(FRAME_OVERHEAD))
        .max()
        .unwrap_or(1518)
}

/// Which RX queues of each interface a set of ports binds (over AF_XDP; an AF_PACKET socket
/// receives from every queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queues {
    /// Queue `q` only: a daemon worker's (worker q binds queue q of every port).
    One(u32),
    /// Every RX queue the interface receives on, as one port ([`QueueSet`]; a plain socket
    /// where there is one queue): a tool's, whose one thread must see every frame.
    All,
}

/// Opens `queues` of each interface for one worker, able to receive frames of up to
/// `max_frame` bytes whole (at most [`JUMBO_MAX_FRAME`]): beyond one 2 KiB buffer, AF_XDP
/// sockets are bound multi-buffer and an AF_PACKET pool's frames grow to hold it. A smaller
/// `max_frame` keeps the 2 KiB layout (and its cost).
///
/// `attached` must be `Some` for AF_XDP (the programs steer frames to the sockets).
pub fn open_worker_ports(
    ifaces: &[String],
    queues: Queues,
    frames: u32,
    max_frame: u32,
    backend: Backend,
    attached: Option<&Attached>,
) -> Result<WorkerPorts, OpenError> {
    let max_frame = max_frame.min(JUMBO_MAX_FRAME as u32);
    if backend != Backend::AfPacket {
        if let Some(att) = attached {
            match open_af_xdp(att, queues, frames, max_frame) {
                Ok(wp) => return Ok(wp),
                Err(e) if backend == Backend::Auto => {
                    tracing::warn!(error = %e, "AF_XDP refused; falling back to AF_PACKET");
                }
                Err(e) => return Err(e),
            }
        }
    }
    let frame_size = heap_frame_size(max_frame as usize);
    let mut pool = FramePool::heap_sized(frames, frame_size)?;
    let ports = ifaces
        .iter()
        .map(|i| AfPacketPort::open(i, &mut pool).map(|p| Box::new(p) as Box<dyn Port>))
        .collect::<Result<_, _>>()?;
    Ok(WorkerPorts {
        pool,
        ports,
        backend: "af_packet",
        // (A jumbo pool's frames hold a little more than JUMBO_MAX_FRAME: never more is taken.)
        max_frame: ((frame_size - 4) as u32).min(JUMBO_MAX_FRAME as u32),
        rx_queues: vec![1; ifaces.len()],
    })
}

fn open_af_xdp(
    att: &Attached,
    queues: Queues,
    frames: u32,
    max_frame: u32,
) -> Result<WorkerPorts, OpenError> {
    let mut pool = FramePool::umem(frames)?;
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut rx_queues = Vec::new();
    let opts = AfXdpOptions {
        multi_buffer: max_frame > XSK_MAX_FRAME as u32,
        ..AfXdpOptions::default()
    };
    for prog in &att.programs {
        let port: Box<dyn Port> = match queues {
            Queues::One(q) => {
                rx_queues.push(1);
                Box::new(AfXdpPort::open(&mut pool, prog, q, opts)?)
            }
            Queues::All => {
                let active = iface_rx_queues(prog.iface()).unwrap_or(1).max(1);
                if active > MAX_QUEUES as u32 {
                    tracing::warn!(
                        iface = prog.iface(),
                        "{active} RX queues, of which the first {MAX_QUEUES} are bound: frames \
                         on the others go to the kernel, unseen (use --backend af-packet)"
                    );
                }
                let n = active.min(MAX_QUEUES as u32);
                rx_queues.push(n);
                let opts = AfXdpOptions {
                    fill_share: n,
                    ..opts
                };
                let mut set = (0..n)
                    .map(|q| Ok(Box::new(AfXdpPort::open(&mut pool, prog, q, opts)?) as _))
                    .collect::<Result<Vec<Box<dyn Port>>, PortError>>()?;
                match set.len() {
                    1 => set.remove(0),
                    _ => Box::new(QueueSet::new(set)?),
                }
            }
        };
        ports.push(port);
    }
    Ok(WorkerPorts {
        pool,
        ports,
        backend: "af_xdp",
        max_frame: if opts.multi_buffer {
            JUMBO_MAX_FRAME as u32
        } else {
            XSK_MAX_FRAME as u32
        },
        rx_queues,
    })
}
