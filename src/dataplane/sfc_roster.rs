//! Who sends on a port's SFC-only priorities: the addresses the stall guard pauses for a
//! worker that cannot run.
//!
//! PFC needs no address: a pause goes to the link, and the stall guard
//! ([`super::stall_guard`]) sends one for a stalled worker from the port it watches. An SFC
//! message goes to a source, and the congestion point that knows the sources is the worker,
//! which sends nothing while it is kept off its CPU and its RX ring fills. So each worker keeps,
//! per ingress port, a roster of the sources whose frames it took on the port's SFC-only
//! priorities (a `pfc+sfc` priority is paused by the guard's PFC): the priority, the source MAC
//! and the IPv4 flow of the frame that put the source on the roster, whose source address is
//! where an SFCM over UDP goes. The roster is of hosts, not flows: a stalled worker serves none
//! of a source's flows, so the guard pauses the source's whole class.
//!
//! **Cost on the worker.** A frame of an SFC-only priority is compared with the source its
//! worker saw last (one comparison for a run of frames from one source), else with the
//! roster's [`SLOTS`] slots; only a new source is published (five stores). A frame the worker
//! has not taken cannot put its source on the roster: a source whose first frames wait behind
//! a stall is known to the guard only from the XDP program's doorbell, which names the source
//! of the frame that rings it ([`super::doorbell`]).
//!
//! **Bounded.** [`SLOTS`] sources per (worker, port); a new one takes the slots in turn, so
//! with more than [`SLOTS`] sources sending at once the roster holds the latest seen and the
//! guard pauses those. A source that stopped sending stays until its slot is taken: the guard
//! may then pause an idle host, which costs it nothing.
//!
//! **Publication** is a sequence lock per slot, with the worker the only writer: the version
//! is odd while a slot is written, and a reader that sees it odd or changed across its read
//! skips the slot (its next look reads it again).

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::wire::{Ipv4Flow, MacAddr};

/// Sources a roster holds.
pub const SLOTS: usize = 16;

/// One source of an SFC-only priority, as the guard addresses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// The priority its frames arrived on.
    pub priority: u8,
    /// Its Ethernet address (an L2 SFCM's destination; a UDP one's next hop).
    pub mac: MacAddr,
    /// The IPv4 flow of the frame that put it on the roster, when it was one.
    pub flow: Option<Ipv4Flow>,
}

impl Source {
    /// What the roster keeps one slot for: the host (MAC and IPv4 source) on a priority,
    /// packed for one comparison; never 0.
    #[inline]
    fn host_key(priority: u8, mac: MacAddr, flow: Option<&Ipv4Flow>) -> u128 {
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&mac.0);
        b[6] = 0x80 | (priority & 7);
        if let Some(f) = flow {
            b[7] = 1;
            b[8..12].copy_from_slice(&f.src_ip);
        }
        u128::from_ne_bytes(b)
    }

    /// The same host on the same priority: what the roster keeps one slot for.
    pub fn same_host(&self, other: &Source) -> bool {
        Self::host_key(self.priority, self.mac, self.flow.as_ref())
            == Self::host_key(other.priority, other.mac, other.flow.as_ref())
    }

    const VALID: u64 = 1 << 63;
    const HAS_FLOW: u64 = 1 << 62;

    fn encode(&self) -> [u64; 3] {
        let mut mac = [0u8; 8];
        mac[2..].copy_from_slice(&self.mac.0);
        let f = self.flow.unwrap_or_default();
        [
            Self::VALID
                | if self.flow.is_some() {
                    Self::HAS_FLOW
                } else {
                    0
                }
                | u64::from(self.priority & 7) << 48
                | u64::from_be_bytes(mac),
            u64::from(u32::from_be_bytes(f.src_ip)) << 32 | u64::from(u32::from_be_bytes(f.dst_ip)),
            u64::from(f.protocol) << 32 | u64::from(f.src_port) << 16 | u64::from(f.dst_port),
        ]
    }

    fn decode(w: [u64; 3]) -> Option<Source> {
        if w[0] & Self::VALID == 0 {
            return None;
        }
        let b = w[0].to_be_bytes();
        let flow = (w[0] & Self::HAS_FLOW != 0).then(|| Ipv4Flow {
            src_ip: ((w[1] >> 32) as u32).to_be_bytes(),
            dst_ip: (w[1] as u32).to_be_bytes(),
            protocol: (w[2] >> 32) as u8,
            src_port: (w[2] >> 16) as u16,
            dst_port: w[2] as u16,
        });
        Some(Source {
            priority: ((w[0] >> 48) & 7) as u8,
            mac: MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]]),
            flow,
        })
    }
}

#[derive(Debug, Default)]
struct Slot {
    version: AtomicU64,
    words: [AtomicU64; 3],
}

/// The roster one worker publishes for one port; any thread may read it.
#[derive(Debug, Default)]
pub struct SourceRoster {
    slots: [Slot; SLOTS],
}

impl SourceRoster {
    /// The sources on the roster (a slot being written just now is left out).
    pub fn sources(&self) -> impl Iterator<Item = Source> + '_ {
        self.slots.iter().filter_map(|s| {
            let before = s.version.load(Ordering::Acquire);
            if before & 1 != 0 {
                return None;
            }
            let w = std::array::from_fn(|i| s.words[i].load(Ordering::Relaxed));
            fence(Ordering::Acquire);
            if s.version.load(Ordering::Relaxed) != before {
                return None;
            }
            Source::decode(w)
        })
    }

    /// Writes `source` into slot `i` (the one writer only).
    fn publish(&self, i: usize, source: &Source) {
        let s = &self.slots[i];
        let v = s.version.load(Ordering::Relaxed);
        s.version.store(v.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (word, value) in s.words.iter().zip(source.encode()) {
            word.store(value, Ordering::Relaxed);
        }
        s.version.store(v.wrapping_add(2), Ordering::Release);
    }
}

/// The worker's side of a [`SourceRoster`]: the hosts it published, so a known source costs it
/// one comparison and no shared memory access.
#[derive(Debug, Clone, Default)]
pub struct RosterWriter {
    /// [`Source::host_key`] per slot (0: empty).
    known: [u128; SLOTS],
    /// The slot of the source seen last.
    last: usize,
    /// The slot the next new source takes.
    next: usize,
}

impl RosterWriter {
    /// The worker took a frame of `priority` from `mac` (IPv4 `flow`, if it is one): puts the
    /// source on `roster` unless it is there.
    #[inline]
    pub fn saw(
        &mut self,
        priority: u8,
        mac: MacAddr,
        flow: Option<&Ipv4Flow>,
        roster: &SourceRoster,
    ) {
        let key = Source::host_key(priority, mac, flow);
        if self.known[self.last] == key {
            return;
        }
        if let Some(i) = self.known.iter().position(|&k| k == key) {
            self.last = i;
            return;
        }
        let i = self.next;
        self.next = (i + 1) % SLOTS;
        self.known[i] = key;
        self.last = i;
        let source = Source {
            priority,
            mac,
            flow: flow.copied(),
        };
        roster.publish(i, &source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saw(w: &mut RosterWriter, s: Source, roster: &SourceRoster) {
        w.saw(s.priority, s.mac, s.flow.as_ref(), roster);
    }

    fn source(priority: u8, host: u8, src_port: u16) -> Source {
        Source {
            priority,
            mac: MacAddr([2, 0, 0, 0, 0, host]),
            flow: Some(Ipv4Flow {
                src_ip: [10, 0, 0, host],
                dst_ip: [10, 0, 1, 1],
                protocol: 17,
                src_port,
                dst_port: 48879,
            }),
        }
    }

    #[test]
    fn a_source_round_trips_through_its_slot() {
        for s in [
            source(3, 7, 40000),
            source(7, 255, 65535),
            Source {
                priority: 0,
                mac: MacAddr([0xff; 6]),
                flow: None,
            },
        ] {
            assert_eq!(Source::decode(s.encode()), Some(s));
        }
        assert_eq!(Source::decode([0; 3]), None, "an empty slot");
    }

    #[test]
    fn one_slot_per_host_and_priority_whatever_its_flows() {
        let roster = SourceRoster::default();
        let mut w = RosterWriter::default();
        // Sixteen flows of one host on priority 3, then the same host on priority 5 and
        // another host on priority 3.
        for port in 0..16 {
            saw(&mut w, source(3, 1, 40000 + port), &roster);
        }
        saw(&mut w, source(5, 1, 40000), &roster);
        saw(&mut w, source(3, 2, 40000), &roster);
        saw(&mut w, source(3, 1, 40001), &roster);
        let got: Vec<Source> = roster.sources().collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            got[0],
            source(3, 1, 40000),
            "the first flow's identity stays"
        );
        assert_eq!(got[1].priority, 5);
        assert_eq!(got[2].mac, MacAddr([2, 0, 0, 0, 0, 2]));
    }

    #[test]
    fn beyond_its_slots_the_roster_holds_the_latest_sources() {
        let roster = SourceRoster::default();
        let mut w = RosterWriter::default();
        for host in 0..(SLOTS as u8 + 4) {
            saw(&mut w, source(3, host, 40000), &roster);
        }
        let hosts: Vec<u8> = roster.sources().map(|s| s.mac.0[5]).collect();
        assert_eq!(hosts.len(), SLOTS);
        assert!(
            (4..SLOTS as u8 + 4).all(|h| hosts.contains(&h)),
            "{hosts:?}"
        );
    }

    #[test]
    fn a_slot_being_written_is_skipped_not_read_torn() {
        let roster = SourceRoster::default();
        let mut w = RosterWriter::default();
        saw(&mut w, source(3, 1, 40000), &roster);
        // A write under way: the version odd.
        roster.slots[0].version.fetch_add(1, Ordering::Relaxed);
        assert_eq!(roster.sources().count(), 0);
        roster.slots[0].version.fetch_add(1, Ordering::Relaxed);
        assert_eq!(roster.sources().count(), 1);
    }

    #[test]
    fn readers_on_another_thread_see_whole_sources_only() {
        let roster = std::sync::Arc::new(SourceRoster::default());
        let r = roster.clone();
        let reader = std::thread::spawn(move || {
            let mut seen = 0u64;
            for _ in 0..20_000 {
                for s in r.sources() {
                    // Every source written has its host number in its MAC, its IPv4 source
                    // and its UDP source port: a torn read would mix two.
                    let f = s.flow.expect("written with a flow");
                    assert_eq!(f.src_ip[3], s.mac.0[5]);
                    assert_eq!(f.src_port, 40000 + u16::from(s.mac.0[5]));
                    seen += 1;
                }
            }
            seen
        });
        let mut w = RosterWriter::default();
        for round in 0..20_000u32 {
            let host = (round % 200) as u8;
            saw(&mut w, source(3, host, 40000 + u16::from(host)), &roster);
        }
        assert!(reader.join().expect("no torn source") > 0);
    }
}
