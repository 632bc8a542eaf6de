//! Why a command failed: one error type for the tools' runners. Each variant keeps the error
//! it comes from (`source()` reaches the OS error where there is one), and prints what the
//! user needs: the flag, file or interface, and why.

use std::io;

use crate::{
    cable::CableError,
    config::ConfigError,
    control::status::ControlError,
    dataplane::{open::OpenError, port::PortError, sched::RealtimeError},
    linkup::{pdelay::MeasureError, run::LinkError},
    nic::selftest::SelftestError,
    wire::WireError,
};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Flags that cannot be honoured as given; the message names the flag and the fix.
    #[error("{0}")]
    Usage(String),
    /// The interface named does not exist.
    #[error("interface {0:?} not found")]
    NoInterface(String),
    /// The configuration file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The interface could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Sending or receiving on the open interface.
    #[error(transparent)]
    Port(#[from] PortError),
    /// A frame could not be built.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The frame pool had no frame free.
    #[error("frame pool exhausted")]
    PoolExhausted,
    /// Real-time scheduling was asked for and could not be applied.
    #[error(transparent)]
    Realtime(#[from] RealtimeError),
    /// The link agent (LLDP, peer delay) failed on the port.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The peer-delay measurement failed.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// Stopped (SIGINT, SIGTERM) before the measurement finished.
    #[error("interrupted before the measurement finished")]
    Interrupted,
    /// The cable emulator failed.
    #[error(transparent)]
    Cable(#[from] CableError),
    /// The self-test could not run.
    #[error(transparent)]
    Selftest(#[from] SelftestError),
    /// The daemon's control socket did not answer.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A file or directory could not be created or written; `what` names it.
    #[error("{what}: {source}")]
    File {
        /// The path, or the flag and the path.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// Writing to stdout failed (other than the reader going away).
    #[error("writing to stdout: {0}")]
    Stdout(#[source] io::Error),
    /// A man page could not be rendered.
    #[error("rendering {page}: {source}")]
    Render {
        /// Which page.
        page: String,
        /// The error.
        source: io::Error,
    },
}

impl CliError {
    /// The process's exit code: 2 for flags that cannot be honoured (as for the flags clap
    /// refuses itself), 1 for everything that failed while running.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            _ => 1,
        }
    }
}

impl CliError {
    /// A [`CliError::File`] for `path` (`what` names it, e.g. the flag and the path).
    pub fn file(what: impl std::fmt::Display) -> impl FnOnce(io::Error) -> CliError {
        let what = what.to_string();
        move |source| CliError::File { what, source }
    }
}
