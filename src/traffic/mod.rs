//! Test traffic: the generator (`lossless gen`), a reaction point that honours PAUSE/PFC, and
//! the sink (`lossless sink`), which proves delivery by sequence number and can itself be a
//! congestion point.

pub mod flows;
pub mod gen;
pub mod histogram;
pub mod sink;

use crate::{
    config::Backend,
    dataplane::{
        open::{attach_for, open_worker_ports, Attached, OpenError, WorkerPorts},
        xdp_prog::{Steering, XdpMode},
    },
};

/// How a single-interface tool (gen, sink, send) reaches its interface.
#[derive(Debug, Clone)]
pub struct IfaceSetup {
    /// Interface.
    pub iface: String,
    /// Packet I/O backend.
    pub backend: Backend,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Frames in the pool.
    pub frames: u32,
    /// Spin instead of sleeping.
    pub busy_poll: bool,
}

/// Opens the interface: attaches XDP (unless AF_PACKET) steering the frames the tool owns.
pub fn open_iface(
    setup: &IfaceSetup,
    steering: Steering,
) -> Result<(WorkerPorts, Option<Attached>), OpenError> {
    let ifaces = [setup.iface.clone()];
    let attached = attach_for(setup.backend, &ifaces, setup.xdp_mode, steering)?;
    let ports = open_worker_ports(&ifaces, 0, setup.frames, setup.backend, attached.as_ref())?;
    Ok((ports, attached))
}
