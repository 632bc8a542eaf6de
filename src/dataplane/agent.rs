//! What a forwarding worker runs beside forwarding on a port: a link agent (LLDP, peer delay).
//!
//! The dataplane owns this trait and knows nothing of link-up: the control plane builds the
//! agents (`crate::linkup::worker::ForwardingAgent`) and hands them to the leader worker
//! ([`super::forward::ForwardWorker::with_agents`]), which gives each the frames it
//! classified as LLDP or PTP and one turn per loop. The worker's cost is one indirect call per
//! such frame and per loop turn of a port that has an agent; data frames never reach it.

use super::{pool::FramePool, port::Port};
use crate::wire::FrameKind;

/// What an agent did with a frame handed to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// A PTP or LLDP frame, handled.
    Consumed,
    /// A PTP or LLDP frame that did not parse (counted).
    Malformed,
    /// Not the agent's: the caller goes on with it.
    NotMine,
}

/// A link agent on one port of a forwarding worker.
pub trait PortAgent: Send {
    /// A received frame of `kind` (as [`crate::wire::classify`] found), stamped `rx_ns`, at
    /// `now`.
    fn on_frame(&mut self, kind: FrameKind, data: &[u8], rx_ns: u64, now: u64) -> Taken;
    /// One loop turn at `now`: sends what is due on `port` (frames from `pool`) and exchanges
    /// requests and results with the control plane.
    fn poll(&mut self, port: &mut dyn Port, pool: &mut FramePool, now: u64);
    /// When the agent next has something to do without a frame arriving (CLOCK_MONOTONIC ns).
    fn next_deadline(&self) -> u64;
    /// The priorities with PFC changed (a reload) to `enabled` (bit n: priority n), at `now`:
    /// what the agent advertises to its peer (DCBX) says so.
    fn set_pfc_enabled(&mut self, enabled: u8, now: u64);
}
