//! The XDP program's doorbell as the stall guards hear it: the ring buffers they wait on, and
//! what each record says.
//!
//! The program rings when frames keep arriving for a queue whose worker (or sink) has made no
//! receive turn for `bell_ns` ([`super::stall_guard`], "The doorbell"). Each record carries
//! the priority and the first 48 bytes of the frame that rang (`struct bell_record` in
//! `bpf/lossless.bpf.c`: one helper call when it rings, nothing per frame), from which the
//! guard parses its source with the wire module. A guard that pauses with SFC needs the
//! source's address, and the sources the workers publish ([`super::sfc_roster`]) are only
//! those they took frames from: a source whose first frames arrive during a stall is known
//! from the doorbell alone. (Parsing the source in the program grew the device-bound program
//! past its page, which the loader refuses: bench/RESULTS.md (20).)

use std::{cell::RefCell, rc::Rc};

use libbpf_rs::{MapHandle, RingBuffer, RingBufferBuilder};

use super::sfc_roster::{RosterWriter, Source, SourceRoster};
use crate::wire::{EthernetFrame, Ipv4Flow};

/// A doorbell record (`struct bell_record` in `bpf/lossless.bpf.c`, native byte order): when
/// it rang, the RX queue, and the source of the frame that rang it, parsed from the frame's
/// first bytes the record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BellRecord {
    /// When it rang, CLOCK_MONOTONIC ns.
    pub now: u64,
    /// The RX queue.
    pub queue: u32,
    /// The frame's priority (as the program classified it), Ethernet source and IPv4 flow,
    /// where its first bytes held them.
    pub source: Option<Source>,
}

impl BellRecord {
    /// Bytes in a record.
    pub const LEN: usize = 64;
    /// Bytes of the frame it carries.
    const HEAD: usize = 48;

    /// The record in `b`; `None` if it is too short.
    pub fn parse(b: &[u8]) -> Option<BellRecord> {
        let b: &[u8; Self::LEN] = b.get(..Self::LEN)?.try_into().ok()?;
        let head = &b[Self::LEN - Self::HEAD..];
        let source = (b[13] != 0)
            .then(|| EthernetFrame::new_checked(head).ok())
            .flatten()
            .map(|eth| Source {
                priority: b[12] & 7,
                mac: eth.src(),
                flow: Ipv4Flow::of_frame(head),
            });
        Some(BellRecord {
            now: u64::from_ne_bytes(b[0..8].try_into().ok()?),
            queue: u32::from_ne_bytes(b[8..12].try_into().ok()?),
            source,
        })
    }
}

/// The sources the doorbell's records named, per port: a source the guard pauses with SFC
/// although no worker has taken a frame of it yet (its first frames arrived during the stall).
/// One guard thread writes and reads its own, so each is a roster with its one writer.
pub type Heard = Rc<RefCell<Vec<(RosterWriter, SourceRoster)>>>;

/// An empty [`Heard`] for `ports` ports.
pub fn heard(ports: usize) -> Heard {
    Rc::new(RefCell::new(
        (0..ports)
            .map(|_| (RosterWriter::default(), SourceRoster::default()))
            .collect(),
    ))
}

/// The doorbells `bells` as one ring buffer to wait on, each record's source put on `heard`
/// (the `i`th bell's on its `i`th roster); `None` if one is missing or the buffer cannot be set
/// up.
pub fn doorbell<'a>(
    bells: impl IntoIterator<Item = Option<&'a MapHandle>>,
    heard: &Heard,
) -> Option<RingBuffer<'static>> {
    let mut b = RingBufferBuilder::new();
    for (i, bell) in bells.into_iter().enumerate() {
        let heard = heard.clone();
        b.add(bell?, move |record: &[u8]| {
            let source = BellRecord::parse(record).and_then(|r| r.source);
            if let (Some(s), Some((writer, roster))) = (source, heard.borrow_mut().get_mut(i)) {
                writer.saw(s.priority, s.mac, s.flow.as_ref(), roster);
            }
            0
        })
        .ok()?;
    }
    b.build().ok()
}

/// Whom a guard pauses with SFC: the sources on `rosters` (what the workers, or the sink, took
/// frames from), then those the doorbell named (`heard`) that none of them has.
pub fn to_pause<'a>(
    rosters: impl Iterator<Item = &'a SourceRoster> + Clone + 'a,
    heard: &'a SourceRoster,
) -> impl Iterator<Item = Source> + 'a {
    let known = rosters.clone();
    let unheard = heard
        .sources()
        .filter(move |h| !known.clone().any(|r| r.sources().any(|k| k.same_host(h))));
    rosters.flat_map(SourceRoster::sources).chain(unheard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacAddr;

    #[test]
    fn a_guard_pauses_the_rosters_sources_then_those_only_the_doorbell_named() {
        let host = |h: u8| Source {
            priority: 3,
            mac: MacAddr([2, 0, 0, 0, 0, h]),
            flow: None,
        };
        let (roster, heard) = (SourceRoster::default(), SourceRoster::default());
        let (mut w, mut hw) = (RosterWriter::default(), RosterWriter::default());
        w.saw(3, host(1).mac, None, &roster);
        hw.saw(3, host(1).mac, None, &heard);
        hw.saw(3, host(2).mac, None, &heard);
        let all: Vec<Source> = to_pause(std::iter::once(&roster), &heard).collect();
        assert_eq!(all, [host(1), host(2)], "each host once");
    }

    #[test]
    fn a_doorbell_record_names_the_source_of_the_frame_that_rang() {
        let mut b = [0u8; BellRecord::LEN];
        b[0..8].copy_from_slice(&123_456_789u64.to_ne_bytes());
        b[8..12].copy_from_slice(&1u32.to_ne_bytes());
        b[12] = 3;
        b[13] = 1;
        // The head of a tagged IPv4/UDP test frame from 02:00:00:00:00:07, 10.0.0.7:40000.
        let sample = crate::wire::TestFrame::sample(128);
        let frame = crate::wire::TestFrame {
            eth: crate::wire::EthernetRepr {
                src: MacAddr([2, 0, 0, 0, 0, 7]),
                ..sample.eth
            },
            src_ip: [10, 0, 0, 7],
            ..sample
        };
        let mut f = [0u8; 128];
        let n = frame.emit(&mut f).expect("a test frame");
        b[16..].copy_from_slice(&f[..BellRecord::HEAD.min(n)]);
        let r = BellRecord::parse(&b).expect("64 bytes");
        assert_eq!((r.now, r.queue), (123_456_789, 1));
        let s = r.source.expect("a source");
        assert_eq!(s.priority, 3);
        assert_eq!(s.mac, MacAddr([2, 0, 0, 0, 0, 7]));
        let flow = s.flow.expect("IPv4");
        assert_eq!((flow.src_ip, flow.src_port), ([10, 0, 0, 7], 40000));
        // The program could not copy the head: no source.
        b[13] = 0;
        assert_eq!(BellRecord::parse(&b).unwrap().source, None);
        assert_eq!(BellRecord::parse(&b[..63]), None, "too short");
    }
}
