//! An eventfd as a doorbell between threads: one rings it, another sleeping in `poll(2)` on
//! its descriptor wakes, and resets it once it has answered. Non-blocking, so neither side
//! ever waits on the descriptor itself.

use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
};

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new one, not rung.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain eventfd(2); the result is checked before it is owned.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor we just opened and own alone.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Rings it: its descriptor becomes readable. (A failure, the counter full, never in
    /// practice, leaves it readable anyway.)
    pub fn ring(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live buffer to our eventfd.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Resets it after a ring: its descriptor is no longer readable. Whether it was rung.
    pub fn reset(&self) -> bool {
        let mut count = [0u8; 8];
        // SAFETY: reading 8 bytes into a live buffer from our non-blocking eventfd; EAGAIN
        // (not rung) leaves nothing to do.
        unsafe { libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) == 8 }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(e: &EventFd) -> bool {
        let mut p = libc::pollfd {
            fd: e.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn rung_it_is_readable_until_reset() {
        let e = EventFd::new().expect("eventfd");
        assert!(!readable(&e));
        e.ring();
        e.ring();
        assert!(readable(&e));
        assert!(e.reset());
        assert!(!readable(&e), "one reset answers every ring before it");
        assert!(!e.reset());
        assert!(!readable(&e));
    }
}
