//! Signals: SIGINT/SIGTERM ask for a clean stop, SIGHUP for a configuration reload. The
//! handlers only store to atomic flags (async-signal-safe); loops poll the flags.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static RELOAD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_reload(_: libc::c_int) {
    RELOAD.store(true, Ordering::SeqCst);
}

fn handle(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: a zeroed sigaction with a valid handler is a valid argument; the handlers only
    // perform an atomic store.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Installs the SIGINT and SIGTERM handler and returns the flag it sets.
pub fn install() -> &'static AtomicBool {
    handle(libc::SIGINT, on_stop);
    handle(libc::SIGTERM, on_stop);
    &STOP
}

/// Installs the SIGHUP handler and returns the flag it sets (the consumer clears it).
pub fn install_reload() -> &'static AtomicBool {
    handle(libc::SIGHUP, on_reload);
    &RELOAD
}
