//! What the control plane and the worker running a port's link agent share: a request to
//! measure (an atomic flag) and the last finished measurement (a lock taken only when one
//! finishes or is collected, never per frame).

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Mutex,
};

use super::{pdelay::MeasureError, Measurement};

/// One port's link-up exchange between control plane and worker.
#[derive(Debug, Default)]
pub struct LinkShared {
    measure: AtomicBool,
    result: Mutex<Option<Result<Measurement, MeasureError>>>,
    peer: Mutex<Option<String>>,
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

    /// Takes the finished measurement, if any (control-plane side).
    pub fn take_result(&self) -> Option<Result<Measurement, MeasureError>> {
        self.result.lock().expect("link result lock").take()
    }
}
