//! Per-flow sequence accounting for the sink: received, unique, lost, duplicated, reordered.
//!
//! Each flow keeps a sliding bitmap of the last [`WINDOW`] sequence numbers below the highest
//! seen, so duplicates are told apart from late (reordered) frames without allocating.
//!
//! A flow id names one generator run, but nothing stops two runs from using the same one
//! (`gen --first-flow` is 0 by default), and sequence numbers alone cannot tell their frames
//! apart: a second source's frames would fill the first one's gaps (hiding its loss) or count
//! as duplicates. Two rules, a few compares per frame, catch both ways it happens:
//! - **Another source at the same time**: a flow belongs to the [`Sender`] (source MAC and
//!   PCP) of its first frame. A frame from another is not accounted, only counted
//!   (`mixed_sources`), so the first source's counts stay true and the report says why the
//!   others are missing. Two generators on one host and priority still look the same.
//! - **A new run after the last** (a generator run again on a sink that keeps running): a
//!   generator stamps its frames in sequence order, so every frame of a run below its highest
//!   sequence number was sent before that one. A frame below the highest that was sent after
//!   it (later `tx_ns`) comes from a new run: the flow restarts (`restarts`), its window is
//!   cleared, and its lost count carries the old run's sequence numbers as well as the new
//!   one's. A duplicate or a late frame is never newer than the highest.

use serde::Serialize;

use crate::wire::MacAddr;

/// Most flow ids a sink accounts (`sink --max-flows`), and so a generator sends
/// (`gen --flows`).
pub const MAX_FLOWS: u32 = 1 << 20;

/// Sequence numbers remembered per flow below the highest one seen.
pub const WINDOW: u64 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;

/// Who sent a test frame, as far as the sink can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sender {
    /// Ethernet source address.
    pub mac: MacAddr,
    /// 802.1Q PCP, if tagged.
    pub pcp: Option<u8>,
}

#[derive(Debug, Clone)]
struct Flow {
    /// Whose flow it is: the sender of its first frame.
    sender: Sender,
    received: u64,
    duplicates: u64,
    reordered: u64,
    too_old: u64,
    /// Frames of other senders, not accounted.
    mixed: u64,
    restarts: u64,
    /// One past the highest sequence number seen in this run (0 = nothing yet).
    next: u64,
    /// The TX stamp of the frame with the highest sequence number.
    high_tx_ns: u64,
    /// `next` of the runs before this one, summed.
    earlier_next: u64,
    seen: [u64; WORDS],
}

impl Flow {
    fn boxed(sender: Sender) -> Box<Self> {
        Box::new(Flow {
            sender,
            received: 0,
            duplicates: 0,
            reordered: 0,
            too_old: 0,
            mixed: 0,
            restarts: 0,
            next: 0,
            high_tx_ns: 0,
            earlier_next: 0,
            seen: [0; WORDS],
        })
    }

    /// Distinct sequence numbers received.
    fn unique(&self) -> u64 {
        self.received - self.duplicates - self.too_old
    }

    /// Sequence numbers below the highest of each run that have not arrived (yet: a late one
    /// still may).
    fn lost(&self) -> u64 {
        (self.earlier_next + self.next).saturating_sub(self.unique())
    }

    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn record(&mut self, seq: u64, tx_ns: u64, sender: Sender) {
        if sender != self.sender {
            self.mixed += 1;
            return;
        }
        if seq < self.next && tx_ns > self.high_tx_ns {
            // Sent after the highest, yet below it: a new run (module doc).
            self.restarts += 1;
            self.earlier_next += self.next;
            self.next = 0;
            self.seen.fill(0);
        }
        self.received += 1;
        if seq >= self.next {
            self.high_tx_ns = tx_ns;
            // Clear the bits of the sequence numbers the window slides over.
            let from = self.next.max(seq.saturating_sub(WINDOW - 1));
            if seq - from >= WINDOW {
                self.seen.fill(0);
            } else {
                for s in from..=seq {
                    let (w, b) = Self::bit(s);
                    self.seen[w] &= !b;
                }
            }
            let (w, b) = Self::bit(seq);
            self.seen[w] |= b;
            self.next = seq.saturating_add(1);
            return;
        }
        if self.next - seq > WINDOW {
            self.too_old += 1;
            return;
        }
        let (w, b) = Self::bit(seq);
        if self.seen[w] & b != 0 {
            self.duplicates += 1;
        } else {
            self.seen[w] |= b;
            self.reordered += 1;
        }
    }
}

/// Counts of one flow for reports.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FlowReport {
    /// Flow id.
    pub flow: u32,
    /// Frames received, duplicates included.
    pub received: u64,
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// Sequence numbers below the highest that never arrived.
    pub lost: u64,
    /// Frames received twice or more.
    pub duplicates: u64,
    /// Frames that arrived after a higher sequence number.
    pub reordered: u64,
    /// Frames whose sequence number lies more than [`WINDOW`] below the highest: frames that
    /// late; in `received`, not in `unique`.
    pub stale: u64,
    /// Frames of another source than the flow's first frame (source MAC or PCP): two
    /// generators on one flow id. Not accounted (in no other count of the flow).
    pub mixed_sources: u64,
    /// Times a new generator run restarted the flow's sequence numbers; `lost` covers every
    /// run, `next_seq` is the last run's.
    pub restarts: u64,
    /// Highest sequence number + 1 (0 = none) of the last run.
    pub next_seq: u64,
}

/// Sequence accounting of up to `max_flows` flows.
#[derive(Debug)]
pub struct FlowTable {
    /// Boxed: a flow's 8 KiB are taken when it first appears, a slot is one pointer.
    flows: Vec<Option<Box<Flow>>>,
    /// Frames whose flow id is beyond the table.
    pub unknown_flow: u64,
}

impl FlowTable {
    /// A table for flow ids `0..max_flows` (memory is taken when a flow first appears).
    pub fn new(max_flows: u32) -> Self {
        FlowTable {
            flows: vec![None; max_flows as usize],
            unknown_flow: 0,
        }
    }

    /// Records frame `seq` of `flow`, stamped `tx_ns` by its generator, from `sender`.
    #[inline]
    pub fn record(&mut self, flow: u32, seq: u64, tx_ns: u64, sender: Sender) {
        match self.flows.get_mut(flow as usize) {
            Some(slot) => slot
                .get_or_insert_with(|| Flow::boxed(sender))
                .record(seq, tx_ns, sender),
            None => self.unknown_flow += 1,
        }
    }

    /// One report per flow seen.
    pub fn report(&self) -> Vec<FlowReport> {
        self.flows
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.as_ref().map(|f| (i, f)))
            .map(|(i, f)| FlowReport {
                flow: i as u32,
                received: f.received,
                unique: f.unique(),
                lost: f.lost(),
                duplicates: f.duplicates,
                reordered: f.reordered,
                stale: f.too_old,
                mixed_sources: f.mixed,
                restarts: f.restarts,
                next_seq: f.next,
            })
            .collect()
    }

    /// Sequence numbers missing so far over all flows (the reports' `lost`, summed), without
    /// making the reports: for a progress line.
    pub fn missing(&self) -> u64 {
        self.flows.iter().flatten().map(|f| f.lost()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Sender = Sender {
        mac: MacAddr([2, 0, 0, 0, 0, 1]),
        pcp: Some(3),
    };

    /// Records `seq` of `flow` from `A`, stamped as a generator does: in sequence order.
    fn rec(t: &mut FlowTable, flow: u32, seq: u64) {
        t.record(flow, seq, seq, A);
    }

    #[test]
    fn in_order_gaps_duplicates_reordering() {
        let mut t = FlowTable::new(4);
        for s in [0, 1, 2, 4, 5, 5, 3, 9] {
            rec(&mut t, 1, s);
        }
        rec(&mut t, 7, 0);
        rec(&mut t, 2, 2); // another flow: 0 and 1 missing
        assert_eq!(t.missing(), 3 + 2);
        let r = &t.report()[0];
        assert_eq!(r.flow, 1);
        assert_eq!(r.received, 8);
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.reordered, 1); // 3 arrived after 5
        assert_eq!(r.unique, 7);
        assert_eq!(r.lost, 3); // 6, 7, 8
        assert_eq!(r.next_seq, 10);
        assert_eq!(t.unknown_flow, 1);
        // A late one fills its gap.
        rec(&mut t, 1, 7);
        assert_eq!(t.missing(), 2 + 2);
    }

    #[test]
    fn window_slides_without_false_duplicates() {
        let mut t = FlowTable::new(1);
        for s in 0..(3 * WINDOW) {
            rec(&mut t, 0, s);
        }
        rec(&mut t, 0, 10 * WINDOW); // jump far ahead
        rec(&mut t, 0, 10 * WINDOW - 1); // late but in window: reordered, not duplicate
        let r = &t.report()[0];
        assert_eq!(r.duplicates, 0);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.unique, 3 * WINDOW + 2);
    }

    #[test]
    fn a_generator_run_again_restarts_its_flows_and_its_loss_shows() {
        let mut t = FlowTable::new(1);
        for s in 0..1000 {
            rec(&mut t, 0, s);
        }
        // The second run loses every other frame; its numbers are the first run's again.
        for s in (0..500).step_by(2) {
            t.record(0, s, 2000 + s, A);
        }
        let r = &t.report()[0];
        assert_eq!(r.restarts, 1);
        assert_eq!((r.duplicates, r.reordered, r.stale), (0, 0, 0));
        assert_eq!(r.unique, 1000 + 250);
        assert_eq!(r.lost, 249, "1, 3, .. 497 of the second run");
        assert_eq!(r.next_seq, 499);
        // A duplicate and a late frame of the second run are older than its highest.
        t.record(0, 2, 2002, A);
        t.record(0, 3, 2003, A);
        let r = &t.report()[0];
        assert_eq!(
            (r.restarts, r.duplicates, r.reordered, r.lost),
            (1, 1, 1, 248)
        );
    }

    #[test]
    fn a_second_source_on_the_flow_is_counted_apart_and_hides_no_loss() {
        let mut t = FlowTable::new(1);
        let b = Sender { pcp: Some(1), ..A };
        let c = Sender {
            mac: MacAddr([2, 0, 0, 0, 0, 9]),
            ..A
        };
        // A on priority 3 loses every other frame; B on priority 1 and C from another port
        // deliver them all, interleaved.
        for s in 0..1000 {
            if s % 2 == 0 {
                rec(&mut t, 0, s);
            }
            t.record(0, s, s, b);
            t.record(0, s, s, c);
        }
        let r = &t.report()[0];
        assert_eq!(r.mixed_sources, 2000);
        assert_eq!(r.lost, 499, "A's own loss");
        assert_eq!((r.duplicates, r.reordered, r.restarts), (0, 0, 0));
        assert_eq!(r.received, 500);
    }
}
