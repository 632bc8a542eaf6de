//! The control plane: turning a validated configuration into running workers, signals and
//! shutdown, reports. (Metrics, the control socket, systemd and link-up build on this.)

pub mod carrier;
pub mod daemon;
pub mod link_model;
pub mod link_monitor;
pub mod logging;
pub mod metrics;
pub mod reload;
pub mod shutdown;
pub mod signals;
pub mod status;
pub mod systemd;
