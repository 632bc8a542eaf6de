//! SIGINT/SIGTERM handling: the handler only stores to an atomic flag (async-signal-safe);
//! loops poll it and wind down cleanly (queues released, XDP detached, report printed).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT and SIGTERM and returns the flag it sets.
pub fn install() -> &'static AtomicBool {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a valid handler is a valid argument; the handler
        // only performs an atomic store.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    &STOP
}

/// The flag without installing the handler (for code that is handed a stop flag in tests).
pub fn flag() -> &'static AtomicBool {
    &STOP
}
