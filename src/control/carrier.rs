//! Carrier watch: a thread that keeps every port's carrier in [`SharedPort`]. While a port
//! has none (or is down), its egress is held, so the workers keep its frames in their queues
//! (back-pressure, PFC upstream) instead of sending them into a dead link; when the carrier
//! returns, the queues drain.
//!
//! **What the kernel says, and when.** The carrier itself (`netif_carrier_ok`: RTM_GETLINK's
//! `IFLA_CARRIER`, sysfs `carrier`) changes the instant the driver sees the link go. Netlink's
//! link events (and `operstate`) follow through the kernel's link watch, which reports a
//! change of an interface that is its own link (a physical NIC, or a veth whose index equals
//! its peer's) at most once a second: a change within a second of the last report waits for
//! the next, and a flap shorter than that wait is reported as where it ended, up, or never at
//! all. On such a port a watch that believed the events would let the workers send into a
//! dead link for up to a second, every frame lost (`tests/faults.rs` shows 7,500 of them in a
//! 300 ms flap). So an event is only a reason to look: the watch reads the carrier itself,
//! with a request on its own netlink socket (in the daemon's network namespace, which sysfs
//! need not show: [`crate::kernel::link`])
//! - on every link event, and at the start;
//! - when a worker's transmit was refused ([`SharedPort::transmit_refused`]): in copy mode the
//!   kernel drops the first frame sent to a port without carrier and says so, and the worker
//!   holds the port's egress and rings this thread's doorbell until the carrier has been read;
//! - every [`RECHECK`] while a port is down, since its return may be reported late too;
//! - every [`RECHECK`] too while a port is up whose transmit cannot be refused
//!   ([`SharedPort::set_tx_blind`]): a zero-copy socket's driver takes frames into its
//!   hardware ring whatever the link, and what the NIC then does with them (hold them, or
//!   drop them and complete) is its own, so there the watch waits neither for a refusal that
//!   never comes nor for the late event. It costs a netlink request per such port every
//!   [`RECHECK`] (about 7 us each on the lab VM: 0.15 % of a CPU per port).
//!
//! Reading a port's link (RTM_GETLINK) also makes the kernel run its link watch for that port
//! at once, so an event it held back goes out then, to every listener (measured: 0.1 ms after
//! the carrier went, against 0.3-1 s without a read).
//!
//! A flap between two looks still shows in the port's `carrier_down_count`, and is logged.
//!
//! The thread sleeps in `poll` on the netlink socket, the ports' doorbells and an eventfd
//! for its stop, with no timeout while every port is up and none is blind.

use std::{
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    sync::Arc,
    thread::JoinHandle,
    time::Duration,
};

use crate::{
    dataplane::{eventfd::EventFd, shared::SharedPort},
    kernel::{
        link::{self, LinkInfo},
        netlink::Netlink,
    },
};

const RTMGRP_LINK: u32 = 1;

/// How often a port that is down, or whose transmit is blind to the carrier, is looked at
/// again.
pub const RECHECK: Duration = Duration::from_millis(5);

/// A port the watch keeps up to date.
pub struct Watched {
    iface: String,
    shared: Arc<SharedPort>,
    /// The carrier as last read (and logged).
    up: bool,
    /// Its `carrier_down_count` then.
    downs: Option<u64>,
}

impl Watched {
    /// Port `iface`, whose state is `shared`.
    pub fn new(iface: String, shared: Arc<SharedPort>) -> Self {
        Watched {
            iface,
            shared,
            up: true,
            downs: None,
        }
    }

    /// Reads the port's carrier, records it, and logs a change (a port down at the start is
    /// named too, and so is a flap between two looks). A refused transmit that waited is
    /// answered once the carrier it read is recorded.
    fn look(&mut self, nl: &mut Netlink) {
        // A port that cannot be read (gone, or netlink failed) has no carrier to send on.
        let link = link::link(nl, &self.iface).ok();
        let up = link.as_ref().is_some_and(LinkInfo::has_carrier);
        let downs = link.and_then(|l| l.carrier_down_count).map(u64::from);
        self.shared.set_link_up(up);
        let refused = self.shared.answer_transmit_refused();
        match self.observe(up, downs) {
            Change::None => {}
            Change::Back => tracing::info!(iface = %self.iface, "carrier back: egress resumes"),
            Change::Lost => tracing::warn!(
                iface = %self.iface,
                refused_transmit = refused,
                "carrier lost: holding egress frames"
            ),
            Change::Flapped(times) => tracing::warn!(
                iface = %self.iface,
                times,
                "carrier lost and back between two looks (the kernel reported it late): frames sent meanwhile went into a dead link"
            ),
        }
    }

    /// Whether the port is read every [`RECHECK`]: it is down, or its transmit is blind.
    fn rechecked(&self) -> bool {
        !self.up || self.shared.tx_blind()
    }

    /// What a look that read carrier `up` and `downs` losses in all tells against the last.
    fn observe(&mut self, up: bool, downs: Option<u64>) -> Change {
        let lost = match (self.downs, downs) {
            (Some(before), Some(now)) => now.saturating_sub(before),
            _ => 0,
        };
        self.downs = downs.or(self.downs);
        let was = std::mem::replace(&mut self.up, up);
        match (was, up) {
            (true, false) => Change::Lost,
            (false, true) => Change::Back,
            (true, true) if lost > 0 => Change::Flapped(lost),
            _ => Change::None,
        }
    }
}

/// What one look at a port found, against the look before.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    None,
    Lost,
    Back,
    /// Up at both looks, and down this many times in between.
    Flapped(u64),
}

/// The running watch. Dropping it stops the thread and waits for it: `stop` wakes the thread
/// out of its `poll`, so the stop takes no timeout.
pub struct CarrierWatch {
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for CarrierWatch {
    fn drop(&mut self) {
        self.stop.ring();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads (and so drops) the link events waiting on the netlink socket: each look reads
/// every port's carrier anyway. Returns the error that ended the read, other than "no more".
fn drain_events(socket: &OwnedFd, buf: &mut [u8]) -> Option<io::Error> {
    loop {
        // SAFETY: `buf` is writable for its length; the socket is ours.
        let n = unsafe {
            libc::recv(
                socket.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            continue;
        }
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            // ENOBUFS: events were lost, which the look that follows makes good.
            Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ENOBUFS) => None,
            _ => Some(e),
        };
    }
}

/// Starts the watch: reads every port's carrier now, then looks again whenever a link event,
/// a port's doorbell or a down port's recheck calls for it, until the returned
/// [`CarrierWatch`] is dropped.
pub fn spawn(mut ports: Vec<Watched>) -> io::Result<CarrierWatch> {
    let socket = open_socket()?;
    let mut nl = Netlink::new(false);
    let stop = Arc::new(EventFd::new()?);
    let stopped = stop.clone();
    for p in &ports {
        p.shared.install_carrier_bell()?;
    }
    for p in &mut ports {
        p.look(&mut nl);
    }
    let thread = std::thread::Builder::new()
        .name("lossless-carrier".into())
        .spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            let mut fds: Vec<libc::pollfd> = [socket.as_raw_fd(), stopped.as_raw_fd()]
                .into_iter()
                .chain(ports.iter().map(|p| bell(&p.shared).as_raw_fd()))
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            let failed = loop {
                let timeout = if !ports.iter().any(Watched::rechecked) {
                    -1
                } else {
                    RECHECK.as_millis() as libc::c_int
                };
                // SAFETY: `fds` is a valid array of pollfds for the call, its length given.
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as _, timeout) };
                if ready < 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EINTR) {
                        break Some(e);
                    }
                    continue;
                }
                if fds[1].revents != 0 {
                    break None;
                }
                if fds[0].revents != 0 {
                    if let Some(e) = drain_events(&socket, &mut buf) {
                        break Some(e);
                    }
                }
                for (p, fd) in ports.iter().zip(&fds[2..]) {
                    if fd.revents != 0 {
                        bell(&p.shared).reset();
                    }
                }
                // A timeout is the recheck of the ports that asked for one; an event or a
                // doorbell has every port read.
                for p in ports.iter_mut().filter(|p| ready > 0 || p.rechecked()) {
                    p.look(&mut nl);
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
        stop,
        thread: Some(thread),
    })
}

/// Port `shared`'s doorbell, installed by [`spawn`] before the thread starts.
fn bell(shared: &SharedPort) -> &EventFd {
    shared
        .carrier_bell()
        .expect("spawn installs every port's doorbell")
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
    use std::time::Instant;

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
            Watched::new("no-such-link0".into(), absent.clone()),
            Watched::new("lo".into(), here.clone()),
        ])
        .expect("netlink socket");
        assert!(!absent.link_up(), "read before the first event");
        assert!(absent.egress_held());
        assert!(here.link_up());
        drop(watch);
    }

    #[test]
    fn a_flap_between_two_looks_is_told_by_the_down_count() {
        let mut w = Watched::new("x".into(), Arc::default());
        assert_eq!(w.observe(true, Some(3)), Change::None);
        // The kernel reported only the end of a flap: up again, one more loss.
        assert_eq!(w.observe(true, Some(4)), Change::Flapped(1));
        assert_eq!(w.observe(true, Some(4)), Change::None);
        assert_eq!(w.observe(false, Some(5)), Change::Lost);
        // Down at both looks: no news, whatever the count did.
        assert_eq!(w.observe(false, Some(6)), Change::None);
        assert_eq!(w.observe(true, Some(6)), Change::Back);
        // A look without the count (unreadable) keeps the one before.
        assert_eq!(w.observe(true, None), Change::None);
        assert_eq!(w.observe(true, Some(9)), Change::Flapped(3));
        // A port first read without it: changes only.
        let mut w = Watched::new("y".into(), Arc::default());
        assert_eq!(w.observe(true, None), Change::None);
        assert_eq!(w.observe(true, Some(2)), Change::None);
    }

    #[test]
    fn a_refused_transmit_holds_the_egress_until_the_watch_has_read_the_carrier() {
        let lo: Arc<SharedPort> = Arc::default();
        // Without a watch nothing would answer a refusal: nothing is held.
        lo.transmit_refused();
        assert!(!lo.egress_held());
        let watch = spawn(vec![Watched::new("lo".into(), lo.clone())]).expect("netlink socket");
        lo.transmit_refused();
        // Rung, the watch reads lo's carrier (up) and lets the egress go.
        let deadline = Instant::now() + Duration::from_secs(5);
        while lo.egress_held() {
            assert!(Instant::now() < deadline, "the watch answered the refusal");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(lo.link_up());
        drop(watch);
    }
}
