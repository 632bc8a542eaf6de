//! What the control plane and the worker running a port's link agent share: a request to
//! measure (an atomic flag), the last finished measurement and the LLDP neighbour (locks
//! taken only when one finishes or is collected, or the neighbours change, never per frame),
//! and the port's shutdown LLDPDU, which the control plane sends once the worker has ended.

use std::{
    io,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Mutex,
    },
};

use super::{pdelay::MeasureError, run::LinkCounters, Measurement};
use crate::dataplane::af_packet::RawSender;

/// What link-up counts on a port, each with its name (the metric's `event` label).
pub const LINK_EVENTS: [&str; 9] = [
    "ptp_rx",
    "lldp_rx",
    "malformed",
    "tx",
    "tx_dropped",
    "requests_answered",
    "requests_refused",
    "tx_stamp_missed",
    "lldp_table_full",
];

impl LinkCounters {
    /// The counts in [`LINK_EVENTS`] order, with the LLDP neighbours refused for a full table.
    pub fn by_event(&self, lldp_table_full: u64) -> [u64; LINK_EVENTS.len()] {
        [
            self.rx_ptp,
            self.rx_lldp,
            self.rx_malformed,
            self.tx,
            self.tx_dropped,
            self.answered,
            self.requests_refused,
            self.tx_stamp_missed,
            lldp_table_full,
        ]
    }
}

/// One port's link-up exchange between control plane and worker.
#[derive(Debug, Default)]
pub struct LinkShared {
    measure: AtomicBool,
    result: Mutex<Option<Result<Measurement, MeasureError>>>,
    peer: Mutex<Option<String>>,
    /// The TTL-0 LLDPDU (a whole frame) to send when the daemon stops, once one went out.
    shutdown_frame: Mutex<Option<Vec<u8>>>,
    /// The agent's counts, [`LINK_EVENTS`] order, as the worker last published them.
    events: [AtomicU64; LINK_EVENTS.len()],
}

impl LinkShared {
    /// Asks the worker to start a measurement.
    pub fn request_measurement(&self) {
        self.measure.store(true, Ordering::Release);
    }

    /// Takes a pending request (worker side).
    #[inline]
    pub fn take_request(&self) -> bool {
        self.measure.load(Ordering::Relaxed) && self.measure.swap(false, Ordering::AcqRel)
    }

    /// Publishes a finished measurement (worker side).
    pub fn finish(&self, r: Result<Measurement, MeasureError>) {
        *self.result.lock().expect("link result lock") = Some(r);
    }

    /// Records the LLDP neighbour (worker side, when the neighbour set changes).
    pub fn set_peer(&self, peer: Option<String>) {
        *self.peer.lock().expect("link peer lock") = peer;
    }

    /// The LLDP neighbour, as "chassis / port".
    pub fn peer(&self) -> Option<String> {
        self.peer.lock().expect("link peer lock").clone()
    }

    /// Records the port's shutdown LLDPDU, a whole frame (worker side, once, after the
    /// agent's first LLDPDU).
    pub fn set_shutdown_frame(&self, frame: Vec<u8>) {
        *self.shutdown_frame.lock().expect("link shutdown lock") = Some(frame);
    }

    /// Sends the port's shutdown LLDPDU on `iface`, once, through a packet socket of its own;
    /// true if there was one (none if the agent sent no LLDPDU). Control-plane side, after
    /// the worker that ran the agent has ended: the agent and the worker's socket went with
    /// it, and no regular LLDPDU of ours may follow the shutdown one and undo it.
    pub fn send_shutdown_lldpdu(&self, iface: &str) -> io::Result<bool> {
        let Some(frame) = self
            .shutdown_frame
            .lock()
            .expect("link shutdown lock")
            .take()
        else {
            return Ok(false);
        };
        let sent = RawSender::open(iface)?.send(&frame)?;
        if sent < frame.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short send: {sent} of {} bytes", frame.len()),
            ));
        }
        Ok(true)
    }

    /// Publishes the agent's counts (worker side: plain stores, no lock).
    pub fn publish_events(&self, counts: &[u64; LINK_EVENTS.len()]) {
        for (a, v) in self.events.iter().zip(counts) {
            a.store(*v, Ordering::Relaxed);
        }
    }

    /// The agent's counts as last published, [`LINK_EVENTS`] order.
    pub fn events(&self) -> [u64; LINK_EVENTS.len()] {
        std::array::from_fn(|i| self.events[i].load(Ordering::Relaxed))
    }

    /// Takes the finished measurement, if any (control-plane side).
    pub fn take_result(&self) -> Option<Result<Measurement, MeasureError>> {
        self.result.lock().expect("link result lock").take()
    }
}
