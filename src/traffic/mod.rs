//! Test traffic: the generator (`lossless gen`), a reaction point that honours PAUSE/PFC, and
//! the sink (`lossless sink`), which proves delivery by sequence number and can itself be a
//! congestion point.

pub mod flows;
pub mod gen;
pub mod histogram;
pub mod progress;
pub mod sink;
pub mod sink_guard;

use crate::{
    dataplane::{
        open::{
            attach_for, iface_max_frame, open_worker_ports, Attached, Backend, OpenError, Queues,
            WorkerPorts,
        },
        pool::{Frame, FramePool},
        port::{send_or_release, Port},
        shaper::WIRE_OVERHEAD,
        xdp_prog::{Steering, XdpMode},
    },
    fc::credit_port::{emit_update, CreditPort},
};

/// The line rate, bit/s with wire overhead, of `frames` frames of `bytes` in all (the first
/// `first_len` long) whose first started `span_ns` before the last: the first frame opens the
/// interval, so only the others' wire time fills it (N frames span N − 1 gaps). 0 for fewer
/// than two frames, or none apart.
pub fn line_rate_bps(frames: u64, bytes: u64, first_len: u64, span_ns: u64) -> f64 {
    if frames < 2 || span_ns == 0 {
        return 0.0;
    }
    (bytes - first_len + (frames - 1) * WIRE_OVERHEAD) as f64 * 8.0 * 1e9 / span_ns as f64
}

/// The frames too long to receive a tool dropped on `port`: `counted` by the tool itself
/// plus those its XDP program dropped; logged once when there were any (`tool`: "generator",
/// "sink"), never per frame.
pub fn oversize_total(counted: u64, port: &dyn Port, max_frame: u32, tool: &str) -> u64 {
    let oversize = counted + port.oversize_drops().iter().sum::<u64>();
    if oversize > 0 {
        tracing::warn!(
            iface = port.name(),
            oversize,
            max_frame,
            "frames longer than the {tool} receives were dropped"
        );
    }
    oversize
}

/// Sends the credit update `credit` has due at `now`, if any, as one frame on `port` (behind
/// whatever data was sent before, which its blocks-sent count includes). A frame that cannot
/// be had or sent is lost like an update lost on the wire: the next one carries the same
/// absolute credit.
///
/// `batch` is an empty vector the caller keeps for it (so nothing is allocated).
pub fn send_credit_update(
    credit: &mut CreditPort,
    port: &mut dyn Port,
    pool: &mut FramePool,
    batch: &mut Vec<Frame>,
    now: u64,
) {
    let Some(update) = credit.poll(now) else {
        return;
    };
    let Some(mut frame) = pool.alloc() else {
        return;
    };
    frame.set_len(emit_update(&update, port.mac(), pool.buf_mut(&frame)));
    let _ = send_or_release(port, pool, batch, frame);
}

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
    let ports = open_worker_ports(
        &ifaces,
        Queues::All,
        setup.frames,
        iface_max_frame(&ifaces),
        setup.backend,
        attached.as_ref(),
    )?;
    Ok((ports, attached))
}
