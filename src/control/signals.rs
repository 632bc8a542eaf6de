//! Signals: SIGINT/SIGTERM ask for a clean stop, SIGHUP (daemon only) for a configuration
//! reload. One way per kind of program:
//! - **The daemon** (`lossless run`) has a tokio control plane: it takes its signals as
//!   futures ([`StopSignals`], [`reloads`]) that its control loop `select!`s on, and turns a
//!   stop into its [`super::shutdown::Shutdown`].
//! - **Thread-only tools** (`gen`, `sink`, `send`, `cable`, `measure`, `lossless-bench`) run
//!   their loops on plain threads with no runtime: [`install`] gives them a flag that each
//!   loop turn reads. The handler only stores to it (async-signal-safe).

use std::{
    io,
    sync::atomic::{AtomicBool, Ordering},
};

use tokio::signal::unix::{signal, Signal, SignalKind};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn handle(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: a zeroed sigaction with a valid handler is a valid argument; the handler only
    // performs an atomic store.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// For thread-only tools: installs the SIGINT and SIGTERM handler and returns the flag it
/// sets.
pub fn install() -> &'static AtomicBool {
    handle(libc::SIGINT, on_stop);
    handle(libc::SIGTERM, on_stop);
    &STOP
}

/// For the daemon: SIGINT and SIGTERM as one future. The handlers are installed when this is
/// made, and a signal that arrives before [`StopSignals::recv`] is first awaited is kept, so
/// making it before anything is attached leaves no window where a stop kills the process
/// without its drain. Must be made inside a tokio runtime (with I/O enabled).
#[derive(Debug)]
pub struct StopSignals {
    int: Signal,
    term: Signal,
}

impl StopSignals {
    /// Installs the handlers.
    pub fn register() -> io::Result<Self> {
        Ok(StopSignals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// Resolves at the next SIGINT or SIGTERM (at once for one received since the last call).
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// For the daemon: SIGHUP as a stream, one item per reload asked for (several before the
/// first look count as one). Installed when called, inside a tokio runtime.
pub fn reloads() -> io::Result<Signal> {
    signal(SignalKind::hangup())
}
