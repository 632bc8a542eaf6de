//! The daemon's TOML configuration: the file as written ([`file`](mod@file): serde types, unknown fields
//! rejected), read and checked section by section (`validate`) into the typed [`Plan`] the
//! daemon runs ([`plan`]); errors name the file, the field and the reason ([`ConfigError`]).
//!
//! Config sits above the dataplane and below the control plane: it reads the types the
//! dataplane, `fc` and `linkup` run with (and builds them), and only `control`, `nic` and the
//! CLI read it.

mod error;
pub mod file;
pub mod plan;
mod validate;

#[cfg(test)]
mod tests;

pub use error::ConfigError;
pub use file::DEFAULT_SOCKET;
pub use plan::{Plan, PortPlan};
