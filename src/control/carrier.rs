//! Carrier watch: a thread on a `NETLINK_ROUTE` socket subscribed to link events. The moment a
//! port loses its carrier (or is set down), its egress is marked down in [`SharedPort`], so the
//! workers hold its frames in their queues (back-pressure, PFC upstream) instead of sending
//! them into a dead link; when the carrier returns, the queues drain.
//!
//! The thread sleeps in `poll` on the socket and an eventfd, with no timeout: it wakes for a
//! link event or for its stop ([`CarrierWatch`] dropped), never to look at a flag.

use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    sync::Arc,
    thread::JoinHandle,
};

use crate::dataplane::{shared::SharedPort, xdp_prog::ifindex};

/// Bytes of `struct nlmsghdr`.
const NLMSG_HDR: usize = 16;
/// Bytes of `struct ifinfomsg`.
const IFINFO: usize = 16;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTMGRP_LINK: u32 = 1;
const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x1_0000;

/// One link event: interface index and whether it is operational (up with a carrier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkEvent {
    /// Interface index.
    pub index: u32,
    /// Administratively up and carrier present.
    pub up: bool,
}

/// The link events in one datagram of netlink messages; anything else (other message types,
/// truncated messages) is skipped.
pub fn parse_link_events(mut buf: &[u8]) -> Vec<LinkEvent> {
    let mut out = Vec::new();
    while buf.len() >= NLMSG_HDR {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < NLMSG_HDR || len > buf.len() {
            break;
        }
        if (kind == RTM_NEWLINK || kind == RTM_DELLINK) && len >= NLMSG_HDR + IFINFO {
            let m = &buf[NLMSG_HDR..];
            let index = u32::from_ne_bytes([m[4], m[5], m[6], m[7]]);
            let flags = u32::from_ne_bytes([m[8], m[9], m[10], m[11]]);
            let up = kind == RTM_NEWLINK && flags & IFF_UP != 0 && flags & IFF_LOWER_UP != 0;
            out.push(LinkEvent { index, up });
        }
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
    }
    out
}

/// True if `iface` is operational now (sysfs), for the initial state and after a lost event.
pub fn is_up(iface: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/operstate"))
        .is_ok_and(|s| matches!(s.trim(), "up" | "unknown"))
}

/// A port the watch keeps up to date.
pub struct Watched {
    /// Interface name.
    pub iface: String,
    /// Its shared state.
    pub shared: Arc<SharedPort>,
}

impl Watched {
    /// Records the port's carrier, and logs a change: from a link event, or from sysfs at the
    /// start and after lost events (a port down at the start is named too).
    fn set_carrier(&self, up: bool) {
        if self.shared.link_up() != up {
            self.shared.set_link_up(up);
            if up {
                tracing::info!(iface = %self.iface, "carrier back: egress resumes");
            } else {
                tracing::warn!(iface = %self.iface, "carrier lost: holding egress frames");
            }
        }
    }
}

/// The running watch. Dropping it stops the thread and waits for it: an eventfd wakes the
/// thread out of its `poll`, so the stop takes no timeout.
pub struct CarrierWatch {
    wake: OwnedFd,
    thread: Option<JoinHandle<()>>,
}

impl Drop for CarrierWatch {
    fn drop(&mut self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live buffer to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts the watch: sets every port's state now, then follows link events until the
/// returned [`CarrierWatch`] is dropped.
pub fn spawn(ports: Vec<Watched>) -> io::Result<CarrierWatch> {
    let indexes: Vec<u32> = ports
        .iter()
        .map(|p| ifindex(&p.iface).map_or(0, |i| i as u32))
        .collect();
    let socket = open_socket()?;
    // SAFETY: plain eventfd(2); the result is checked before it is owned.
    let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if wake < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `wake` is a descriptor we just opened and own alone.
    let wake = unsafe { OwnedFd::from_raw_fd(wake) };
    let woken = wake.try_clone()?;
    let refresh = |ports: &[Watched]| {
        for p in ports {
            p.set_carrier(is_up(&p.iface));
        }
    };
    refresh(&ports);
    let thread = std::thread::Builder::new()
        .name("lossless-carrier".into())
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            let mut fds = [
                libc::pollfd {
                    fd: socket.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: woken.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let failed = loop {
                // SAFETY: `fds` is a valid array of two pollfds for the call.
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
                if ready < 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EINTR) {
                        break Some(e);
                    }
                }
                if fds[1].revents != 0 {
                    break None;
                }
                if ready <= 0 || fds[0].revents == 0 {
                    continue;
                }
                // SAFETY: `buf` is writable for its length; the socket is ours.
                let n = unsafe {
                    libc::recv(
                        socket.as_raw_fd(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    match e.raw_os_error() {
                        // Events were lost: read the truth from sysfs.
                        Some(libc::ENOBUFS) => refresh(&ports),
                        Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                        _ => break Some(e),
                    }
                    continue;
                }
                for ev in parse_link_events(&buf[..n as usize]) {
                    if let Some(i) = indexes.iter().position(|&x| x == ev.index) {
                        ports[i].set_carrier(ev.up);
                    }
                }
            };
            if let Some(e) = failed {
                tracing::error!(
                    error = %e,
                    "carrier watch stopped: a carrier change is no longer seen, so egress is not held while a link is down"
                );
            }
        })?;
    Ok(CarrierWatch {
        wake,
        thread: Some(thread),
    })
}

/// A NETLINK_ROUTE socket bound to the link group.
fn open_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before it is owned.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor we just opened and own alone (closed on drop, also on error).
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: zeroed sockaddr_nl is valid; we fill family and groups.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    addr.nl_groups = RTMGRP_LINK;
    // SAFETY: valid pointer and size for bind(2).
    let bound = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if bound != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn msg(kind: u16, index: u32, flags: u32, extra: usize) -> Vec<u8> {
        let len = (NLMSG_HDR + IFINFO + extra) as u32;
        let mut b = Vec::new();
        b.extend_from_slice(&len.to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&[0; 10]);
        b.extend_from_slice(&[0, 0, 1, 0]); // family, pad, type
        b.extend_from_slice(&index.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&[0; 4]);
        b.resize(b.len() + extra, 0xaa);
        b.resize(b.len().next_multiple_of(4), 0);
        b
    }

    #[test]
    fn dropping_the_watch_wakes_and_joins_its_thread() {
        let watch = spawn(Vec::new()).expect("netlink socket");
        std::thread::sleep(Duration::from_millis(20));
        let start = Instant::now();
        drop(watch);
        assert!(start.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_port_without_carrier_at_the_start_holds_its_egress_from_the_start() {
        let (absent, here): (Arc<SharedPort>, Arc<SharedPort>) = (Arc::default(), Arc::default());
        let watch = spawn(vec![
            Watched {
                iface: "no-such-link0".into(),
                shared: absent.clone(),
            },
            Watched {
                iface: "lo".into(),
                shared: here.clone(),
            },
        ])
        .expect("netlink socket");
        assert!(!absent.link_up(), "read from sysfs before the first event");
        assert!(here.link_up());
        drop(watch);
    }

    #[test]
    fn link_events_need_admin_up_and_carrier() {
        let mut buf = msg(RTM_NEWLINK, 7, IFF_UP | IFF_LOWER_UP, 5);
        buf.extend(msg(RTM_NEWLINK, 8, IFF_UP, 0)); // carrier lost
        buf.extend(msg(24, 9, 0, 0)); // RTM_NEWADDR: not ours
        buf.extend(msg(RTM_DELLINK, 10, IFF_UP | IFF_LOWER_UP, 0));
        assert_eq!(
            parse_link_events(&buf),
            vec![
                LinkEvent { index: 7, up: true },
                LinkEvent {
                    index: 8,
                    up: false
                },
                LinkEvent {
                    index: 10,
                    up: false
                },
            ]
        );
    }

    #[test]
    fn truncated_or_bogus_lengths_stop_parsing_without_panic() {
        let good = msg(RTM_NEWLINK, 7, IFF_UP | IFF_LOWER_UP, 0);
        assert!(parse_link_events(&good[..20]).is_empty());
        let mut bad = good.clone();
        bad[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert!(parse_link_events(&bad).is_empty());
        let mut huge = good;
        huge[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(parse_link_events(&huge).is_empty());
        assert!(parse_link_events(&[]).is_empty());
    }
}
