//! The credit lanes of one port: one [`CreditLane`] per credit-controlled priority, fed with
//! the credit updates the port receives, polled for the one update frame the port sends.
//!
//! Shared by the daemon's forwarding worker, the traffic generator (a transmitter) and the
//! sink (a receiver), so all three speak the same protocol from the same code. Sans-I/O like
//! the lanes: time is an argument, frames are bytes in and out.

use super::{
    credit::{blocks_for_len, CreditConfig, CreditError, CreditLane, CreditWindow, ReinitReason},
    priorities, PRIORITIES,
};
use crate::wire::{credit::CreditUpdate, MacAddr, WireError};

/// Where credit updates go: the IEEE 802.1Q "nearest bridge" group address. Credits are
/// hop by hop; no bridge forwards this address, and the peer need not be known in advance.
pub const CREDIT_DST: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);

/// Writes `update` as a frame from `src` to [`CREDIT_DST`] into `buf` (a frame buffer of at
/// least 114 bytes); returns its length.
pub fn emit_update(update: &CreditUpdate, src: MacAddr, buf: &mut [u8]) -> usize {
    update
        .emit_frame(CREDIT_DST, src, buf)
        .expect("a frame buffer holds a credit update")
}

/// Timers shared by every lane of a port (the `[credit]` settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditTimers {
    /// Longest time between credit advertisements, ns.
    pub update_interval_ns: u64,
    /// Longest time between FCTBS resyncs (and Init/InitAck repeats), ns.
    pub resync_interval_ns: u64,
    /// Re-initialise after hearing nothing from the peer for this long, ns.
    pub timeout_ns: u64,
}

impl Default for CreditTimers {
    /// 1 ms update and resync intervals, a 200 ms timeout (the `[credit]` defaults).
    ///
    /// The timeout is for a peer gone silent, not for one held up: a peer restarted says so
    /// with its `Init` at once. What holds a healthy peer up is its host's kernel, which can
    /// keep a real-time worker off its CPU for tens of milliseconds (a process binding an
    /// AF_XDP socket, or a kernel worker whose work is not known; neither preemptible here):
    /// with 50 ms, `tests/credits.rs` saw a worker take no frame for 52 ms and its sink
    /// re-initialise a running lane, and scheduler traces of that test showed real-time
    /// threads held 20-44 ms a few times per run. 200 ms is four times the longest seen.
    fn default() -> Self {
        CreditTimers {
            update_interval_ns: 1_000_000,
            resync_interval_ns: 1_000_000,
            timeout_ns: 200_000_000,
        }
    }
}

impl CreditTimers {
    /// The lane configuration of priority `prio` with a receive buffer of `buffer_bytes`.
    ///
    /// The peer's window is not known in advance, so the transmitter assumes the largest
    /// one the protocol allows (2048 blocks); an advertised credit still bounds what is sent.
    pub fn lane_config(&self, prio: u8, buffer_bytes: u64) -> Result<CreditConfig, CreditError> {
        let window = CreditWindow::from_buffer(buffer_bytes / super::credit::BLOCK_BYTES, 0)?;
        Ok(CreditConfig {
            update_interval_ns: self.update_interval_ns,
            resync_interval_ns: self.resync_interval_ns,
            update_timeout_ns: self.timeout_ns,
            peer_window_blocks: super::credit::MAX_WINDOW_BLOCKS,
            ..CreditConfig::new(prio, &window)
        })
    }
}

/// What [`CreditPort::gate`] says about the frame at the head of a priority's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// The priority has no lane on this port: send without credit.
    Free,
    /// Credit covers the frame: send it and call [`CreditPort::on_sent`].
    Send,
    /// Not enough credit (or the lane is re-initialising): wait for an update.
    Wait,
    /// No credit can ever cover the frame: drop it and count it.
    NeverFits,
}

/// What one lane did, for the generator's and sink's reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CreditLaneReport {
    /// The lane ran (handshake complete) when the report was taken.
    pub active: bool,
    /// Entries sent.
    pub updates_sent: u64,
    /// Entries received.
    pub updates_received: u64,
    /// Resyncs that repaired the count of received blocks.
    pub resyncs: u64,
    /// Re-initialisations, whatever the reason.
    pub reinits: u64,
    /// Frames refused for lack of room (the peer sent beyond its credit).
    pub rejected_frames: u64,
}

/// The credit lanes of one port, indexed by priority.
#[derive(Debug, Clone, Default)]
pub struct CreditPort {
    lanes: [Option<CreditLane>; PRIORITIES],
    /// Bit p set when priority p has a lane: what runs every loop turn (`poll`,
    /// `take_reinits`, `is_empty`) visits the lanes there are, not all eight slots.
    with_lane: u8,
}

impl CreditPort {
    /// A port with no lanes (every priority sends freely).
    pub fn none() -> Self {
        CreditPort::default()
    }

    /// A port with one lane per `(priority, receive buffer bytes)`, created at `now`.
    pub fn new(
        lanes: impl IntoIterator<Item = (u8, u64)>,
        timers: &CreditTimers,
        now: u64,
    ) -> Result<Self, CreditError> {
        let mut port = CreditPort::none();
        for (prio, buffer) in lanes {
            let cfg = timers.lane_config(prio, buffer)?;
            let p = usize::from(prio) % PRIORITIES;
            port.lanes[p] = Some(CreditLane::new(&cfg, now)?);
            port.with_lane |= 1 << p;
        }
        Ok(port)
    }

    /// True if no priority runs credits on this port.
    pub fn is_empty(&self) -> bool {
        self.with_lane == 0
    }

    /// The lane of `prio`, if it has one.
    pub fn lane(&self, prio: usize) -> Option<&CreditLane> {
        self.lanes.get(prio).and_then(Option::as_ref)
    }

    /// The report of `prio`'s lane, if it has one.
    pub fn report(&self, prio: usize) -> Option<CreditLaneReport> {
        let lane = self.lane(prio)?;
        let c = lane.counters();
        Some(CreditLaneReport {
            active: lane.state() == super::credit::LaneState::Active,
            updates_sent: c.updates_sent,
            updates_received: c.updates_received,
            resyncs: c.resyncs,
            reinits: c.reinit_timeout + c.reinit_overrun + c.reinit_peer + c.reinit_requested,
            rejected_frames: c.rejected_frames,
        })
    }

    /// Applies a received credit-update payload (the bytes after the EtherType) at `now`.
    /// Returns the VLs whose entries found no lane here (bit v: VL v), ignored: the peer runs
    /// credits where this port does not, and its lane there waits for an `InitAck` that never
    /// comes, sending nothing.
    pub fn on_update(&mut self, now: u64, payload: &[u8]) -> Result<u16, WireError> {
        let update = CreditUpdate::parse(payload)?;
        let mut unmatched = 0u16;
        for e in update.entries() {
            match self
                .lanes
                .get_mut(usize::from(e.vl))
                .and_then(Option::as_mut)
            {
                Some(lane) => lane.on_entry(now, e),
                None => unmatched |= 1 << e.vl,
            }
        }
        Ok(unmatched)
    }

    /// May the frame of `len` bytes at the head of `prio`'s queue be sent now?
    pub fn gate(&self, prio: usize, len: u32) -> Gate {
        let Some(lane) = self.lane(prio) else {
            return Gate::Free;
        };
        match lane.can_send(blocks_for_len(len)) {
            Ok(true) => Gate::Send,
            Ok(false) => Gate::Wait,
            Err(_) => Gate::NeverFits,
        }
    }

    /// Bitmask of the priorities in `queued` whose head frame (length from `head_len`) has
    /// to wait for credit.
    pub fn waiting(&self, queued: u8, mut head_len: impl FnMut(usize) -> Option<u32>) -> u8 {
        (0..PRIORITIES)
            .filter(|&p| queued & (1 << p) != 0 && self.lane(p).is_some())
            .filter(|&p| head_len(p).is_some_and(|len| self.gate(p, len) == Gate::Wait))
            .fold(0, |m, p| m | (1 << p))
    }

    /// Counts a frame of `len` bytes sent on `prio` (after [`Gate::Send`]).
    pub fn on_sent(&mut self, prio: usize, len: u32) {
        if let Some(lane) = self.lanes.get_mut(prio).and_then(Option::as_mut) {
            lane.on_sent(blocks_for_len(len));
        }
    }

    /// Accounts a data frame of `len` bytes received on `prio` at `now`: false if the lane
    /// has no room for it (the caller drops it; the lane re-initialises). Priorities without
    /// a lane always accept.
    pub fn on_data(&mut self, now: u64, prio: usize, len: u32) -> bool {
        match self.lanes.get_mut(prio).and_then(Option::as_mut) {
            Some(lane) => {
                lane.on_data(now, blocks_for_len(len)) != super::credit::RxVerdict::Rejected
            }
            None => true,
        }
    }

    /// Releases a received frame of `len` bytes on `prio` that left the buffer (sent on,
    /// consumed, or dropped after [`CreditPort::on_data`] accepted it).
    pub fn on_drain(&mut self, prio: usize, len: u32) {
        if let Some(lane) = self.lanes.get_mut(prio).and_then(Option::as_mut) {
            lane.on_drain(blocks_for_len(len));
        }
    }

    /// Re-initialises every lane (for instance after the link went down and up).
    pub fn reinit(&mut self, now: u64) {
        self.lanes.iter_mut().flatten().for_each(|l| l.reinit(now));
    }

    /// The update due at `now`, if any lane has an entry to send. Call after the data frames
    /// of this turn were counted with [`CreditPort::on_sent`], and send the update before any
    /// later data frame.
    pub fn poll(&mut self, now: u64) -> Option<CreditUpdate> {
        let mut update: Option<CreditUpdate> = None;
        for p in priorities(self.with_lane) {
            let lane = self.lanes[p].as_mut().expect("a lane where with_lane says");
            if let Some(e) = lane.poll(now) {
                update
                    .get_or_insert_with(CreditUpdate::new)
                    .push(e)
                    .expect("one valid entry per lane, at most 8 lanes");
            }
        }
        update
    }

    /// The earliest time [`CreditPort::poll`] has something to do without a new event.
    pub fn next_deadline(&self) -> Option<u64> {
        self.lanes
            .iter()
            .flatten()
            .map(CreditLane::next_deadline)
            .min()
    }

    /// Re-initialisations not yet reported, as (priority, reason); clears them.
    pub fn take_reinits(&mut self) -> impl Iterator<Item = (usize, ReinitReason)> + '_ {
        priorities(self.with_lane).filter_map(|p| Some((p, self.lanes[p].as_mut()?.take_reinit()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        fc::credit::LaneState,
        wire::{EthernetFrame, MacAddr},
    };

    const TIMERS: CreditTimers = CreditTimers {
        update_interval_ns: 10_000,
        resync_interval_ns: 10_000,
        timeout_ns: 100_000,
    };
    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    /// Delivers whatever `from` has due to `to` (a zero-delay wire).
    fn exchange(from: &mut CreditPort, to: &mut CreditPort, now: u64) -> bool {
        let mut buf = [0u8; 128];
        let Some(update) = from.poll(now) else {
            return false;
        };
        let len = emit_update(&update, A, &mut buf);
        let eth = EthernetFrame::new_checked(&buf[..len]).unwrap();
        assert_eq!(eth.dst(), CREDIT_DST);
        to.on_update(now, eth.payload()).unwrap();
        true
    }

    #[test]
    fn two_ports_handshake_then_send_within_the_window() {
        let mut tx = CreditPort::new([(3, 4096)], &TIMERS, 0).unwrap();
        let mut rx = CreditPort::new([(3, 4096)], &TIMERS, 0).unwrap();
        assert_eq!(
            tx.gate(3, 1000),
            Gate::Wait,
            "no credit before the handshake"
        );
        assert_eq!(tx.gate(0, 1000), Gate::Free, "priority 0 has no lane");
        for t in 0..4 {
            exchange(&mut tx, &mut rx, t);
            exchange(&mut rx, &mut tx, t);
        }
        assert_eq!(tx.lane(3).unwrap().state(), LaneState::Active);
        // 4096 bytes = 64 blocks: four 1000-byte frames (16 blocks each) fit, a fifth not.
        for _ in 0..4 {
            assert_eq!(tx.gate(3, 1000), Gate::Send);
            tx.on_sent(3, 1000);
            assert!(rx.on_data(5, 3, 1000));
        }
        assert_eq!(tx.gate(3, 1000), Gate::Wait);
        assert_eq!(tx.waiting(0b1000, |_| Some(1000)), 0b1000);
        // The receiver drains two frames and advertises; the sender may send two more.
        rx.on_drain(3, 1000);
        rx.on_drain(3, 1000);
        assert!(exchange(&mut rx, &mut tx, 6));
        assert_eq!(tx.gate(3, 1000), Gate::Send);
        assert_eq!(tx.waiting(0b1000, |_| Some(1000)), 0);
    }

    #[test]
    fn frames_beyond_any_credit_never_fit_and_overruns_are_refused() {
        let mut p = CreditPort::new([(1, 4096)], &TIMERS, 0).unwrap();
        assert_eq!(p.gate(1, 200_000), Gate::NeverFits);
        // The receive side holds 64 blocks: a 65th block is refused and re-initialises.
        assert!(p.on_data(1, 1, 4096));
        assert!(!p.on_data(2, 1, 64));
        assert!(p.on_data(3, 2, 64), "no lane: always accepted");
    }

    #[test]
    fn unknown_lanes_are_ignored_and_bad_updates_rejected() {
        let mut a = CreditPort::new([(2, 8192), (5, 8192)], &TIMERS, 0).unwrap();
        let mut b = CreditPort::new([(5, 8192)], &TIMERS, 0).unwrap();
        let mut buf = [0u8; 128];
        let len = emit_update(&a.poll(0).unwrap(), A, &mut buf);
        let eth = EthernetFrame::new_checked(&buf[..len]).unwrap();
        assert_eq!(
            b.on_update(0, eth.payload()),
            Ok(1 << 2),
            "the entry of VL 2"
        );
        assert!(b.on_update(0, &[1, 2, 0, 0]).is_err());
        assert!(b.take_reinits().next().is_none());
        b.reinit(1);
        assert_eq!(
            b.take_reinits().collect::<Vec<_>>(),
            vec![(5, ReinitReason::Requested)]
        );
    }

    #[test]
    fn empty_port_sends_nothing() {
        let mut p = CreditPort::none();
        assert!(p.is_empty());
        assert_eq!(p.poll(0), None);
        assert_eq!(p.next_deadline(), None);
        assert!(p.on_data(0, 3, 1500));
    }
}
