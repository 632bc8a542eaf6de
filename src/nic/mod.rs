//! Real NICs: what a port can do for lossless Ethernet, read from the kernel (`lossless doctor`),
//! what the driver sources say about it (the knowledge table), and a two-port frame test
//! (`lossless selftest`).
//!
//! - [`link`], [`netdev`], [`drvinfo`] (and [`crate::kernel::ethtool`]): one module per kernel
//!   interface, each a query and a parse function tested on captured replies
//!   (`tests/fixtures/nic/`), over [`crate::kernel::netlink`];
//! - [`probe`]: every fact about one interface;
//! - [`table`]: the per-driver knowledge, with sources;
//! - [`verdict`]: facts + knowledge + what the configuration needs → verdicts and fixes;
//! - [`selftest`]: every frame class the daemon speaks, each way between two ports.

pub mod drvinfo;
pub mod link;
pub mod needs;
pub mod netdev;
pub mod probe;
pub mod selftest;
pub mod table;
pub mod verdict;

#[cfg(test)]
mod fixtures;
