//! systemd integration without libsystemd: `sd_notify` datagrams to `$NOTIFY_SOCKET`
//! (READY=1, WATCHDOG=1, STOPPING=1, STATUS=...) and the watchdog interval from
//! `$WATCHDOG_USEC`. Outside systemd (no `NOTIFY_SOCKET`) every call is a no-op.

use std::{os::unix::net::UnixDatagram, path::PathBuf, time::Duration};

/// A connection to the service manager's notification socket.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, Target)>,
    watchdog: Option<Duration>,
}

#[derive(Debug)]
enum Target {
    Path(PathBuf),
    Abstract(Vec<u8>),
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` from the environment.
    pub fn from_env() -> Self {
        let target = std::env::var_os("NOTIFY_SOCKET").and_then(|s| {
            let s = s.into_encoded_bytes();
            let t = match s.first() {
                Some(b'@') => Target::Abstract(s[1..].to_vec()),
                Some(b'/') => Target::Path(PathBuf::from(String::from_utf8_lossy(&s).into_owned())),
                _ => return None,
            };
            UnixDatagram::unbound().ok().map(|sock| (sock, t))
        });
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&us| us > 0)
            .map(Duration::from_micros);
        Notifier { target, watchdog }
    }

    /// How often to send WATCHDOG=1: half the configured watchdog timeout.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|w| w / 2)
    }

    /// Sends one notification (e.g. "READY=1"); errors are logged, never fatal.
    pub fn notify(&self, state: &str) {
        let Some((sock, target)) = &self.target else {
            return;
        };
        let sent = match target {
            Target::Path(p) => sock.send_to(state.as_bytes(), p),
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name)
                    .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
            }
        };
        if let Err(e) = sent {
            tracing::warn!(error = %e, state, "sd_notify failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifies_a_path_socket() {
        let dir = std::env::temp_dir().join(format!("lossless-notify-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let rx = UnixDatagram::bind(&dir).unwrap();
        let n = Notifier {
            target: Some((UnixDatagram::unbound().unwrap(), Target::Path(dir.clone()))),
            watchdog: Some(Duration::from_millis(400)),
        };
        n.notify("READY=1");
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
        assert_eq!(n.watchdog_interval(), Some(Duration::from_millis(200)));
        let _ = std::fs::remove_file(&dir);
        // Without a socket nothing happens.
        Notifier {
            target: None,
            watchdog: None,
        }
        .notify("READY=1");
    }
}
