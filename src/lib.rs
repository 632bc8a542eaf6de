//! `lossless`: lossless Ethernet in software.
//!
//! AF_XDP sockets feed per-core workers that forward frames between ports through bounded
//! per-priority queues and generate and react to flow-control signals (802.1Qbb PFC and
//! 802.3x PAUSE first; SFC and credits plug into the same seams).
//!
//! Module map (see `DESIGN.md` in the shared folder):
//! - [`wire`]: zero-copy frame views with `parse`/`emit` pairs;
//! - [`fc`]: sans-I/O flow-control state machines driven with injected time;
//! - [`headroom`]: pure headroom / threshold math and the calculator behind `lossless headroom`;
//! - [`dataplane`]: frame pools, ports (AF_XDP, AF_PACKET, in-memory), queues, shaper, workers;
//! - [`control`]: the daemon's control plane (XDP attach, signals, reports);
//! - [`config`]: the TOML configuration and its validation;
//! - [`kernel`]: netlink and ethtool readers.

pub mod cable;
pub mod cli;
pub mod config;
pub mod control;
pub mod dataplane;
pub mod fc;
pub mod headroom;
pub mod kernel;
pub mod linkup;
pub mod nic;
pub mod traffic;
pub mod units;
pub mod wire;
