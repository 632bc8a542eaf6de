//! Per-flow sequence accounting for the sink: received, unique, lost, duplicated, reordered.
//!
//! Each flow keeps a sliding bitmap of the last [`WINDOW`] sequence numbers below the highest
//! seen, so duplicates are told apart from late (reordered) frames without allocating.

use serde::Serialize;

/// Sequence numbers remembered per flow below the highest one seen.
pub const WINDOW: u64 = 1 << 16;
const WORDS: usize = (WINDOW / 64) as usize;

#[derive(Debug, Clone)]
struct Flow {
    received: u64,
    duplicates: u64,
    reordered: u64,
    too_old: u64,
    /// One past the highest sequence number seen (0 = nothing yet).
    next: u64,
    seen: Box<[u64; WORDS]>,
}

impl Flow {
    fn new() -> Self {
        Flow {
            received: 0,
            duplicates: 0,
            reordered: 0,
            too_old: 0,
            next: 0,
            seen: Box::new([0; WORDS]),
        }
    }

    /// Distinct sequence numbers received.
    fn unique(&self) -> u64 {
        self.received - self.duplicates - self.too_old
    }

    /// Sequence numbers below the highest that have not arrived (yet: a late one still may).
    fn lost(&self) -> u64 {
        self.next.saturating_sub(self.unique())
    }

    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn record(&mut self, seq: u64) {
        self.received += 1;
        if seq >= self.next {
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
    /// Frames whose sequence number lies more than [`WINDOW`] below the highest: a generator
    /// restarted on the same flow id (its run cannot be told from the first), or a frame
    /// that late; in `received`, not in `unique`.
    pub stale: u64,
    /// Highest sequence number + 1 (0 = none).
    pub next_seq: u64,
}

/// Sequence accounting of up to `max_flows` flows.
#[derive(Debug)]
pub struct FlowTable {
    flows: Vec<Option<Flow>>,
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

    /// Records frame `seq` of `flow`.
    #[inline]
    pub fn record(&mut self, flow: u32, seq: u64) {
        match self.flows.get_mut(flow as usize) {
            Some(slot) => slot.get_or_insert_with(Flow::new).record(seq),
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
                next_seq: f.next,
            })
            .collect()
    }

    /// Sequence numbers missing so far over all flows (the reports' `lost`, summed), without
    /// making the reports: for a progress line.
    pub fn missing(&self) -> u64 {
        self.flows.iter().flatten().map(Flow::lost).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_gaps_duplicates_reordering() {
        let mut t = FlowTable::new(4);
        for s in [0, 1, 2, 4, 5, 5, 3, 9] {
            t.record(1, s);
        }
        t.record(7, 0);
        t.record(2, 2); // another flow: 0 and 1 missing
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
        t.record(1, 7);
        assert_eq!(t.missing(), 2 + 2);
    }

    #[test]
    fn window_slides_without_false_duplicates() {
        let mut t = FlowTable::new(1);
        for s in 0..(3 * WINDOW) {
            t.record(0, s);
        }
        t.record(0, 10 * WINDOW); // jump far ahead
        t.record(0, 10 * WINDOW - 1); // late but in window: reordered, not duplicate
        let r = &t.report()[0];
        assert_eq!(r.duplicates, 0);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.unique, 3 * WINDOW + 2);
    }
}
