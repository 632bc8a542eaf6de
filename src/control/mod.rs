//! The control plane: turning a validated configuration into running workers, signals and
//! shutdown, reports. (Metrics, the control socket, systemd and link-up build on this.)

pub mod daemon;
pub mod metrics;
pub mod shutdown;
pub mod status;
pub mod systemd;
