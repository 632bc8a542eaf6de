//! The dataplane: frame pools, ports (AF_XDP, AF_PACKET, in-memory), per-priority queues, the
//! shaper, the worker loops that forward, generate and sink traffic, and how their threads are
//! scheduled.

pub mod af_packet;
pub mod af_xdp;
pub mod agent;
pub mod classify;
pub mod clock;
pub mod doorbell;
pub mod eventfd;
pub mod fill_sizer;
pub mod forward;
pub mod handoff;
pub mod hwstamp;
pub mod idle;
pub mod iface_lock;
pub mod ingress;
pub mod leader_bell;
pub mod mem_port;
pub mod open;
pub mod pfc_headroom;
pub mod pool;
pub mod port;
pub mod queue;
pub mod queue_set;
pub mod rt_duty;
pub mod rx_meta;
pub mod sched;
pub mod settings;
pub mod sfc_roster;
pub mod shaper;
pub mod shared;
pub mod stall_guard;
pub mod stats;
pub mod xdp_prog;
