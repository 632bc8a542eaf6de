//! The LLDP agent: a sans-I/O state machine that builds this port's LLDPDU, decides when to
//! send it (at start, every `tx_interval_ns`, and promptly after a change or a new neighbour),
//! and learns and expires neighbours by their TTL. Time is injected as `now` (ns).

use crate::wire::lldp::{
    AdaptiveCapability, LldpId, Lldpdu, OrgTlvId, PfcConfig, CHASSIS_SUBTYPE_MAC,
    PORT_SUBTYPE_IFNAME,
};
use crate::wire::MacAddr;

/// 802.1AB's default msgTxInterval: 30 s.
pub const DEFAULT_TX_INTERVAL_NS: u64 = 30_000_000_000;
/// 802.1AB's default TTL: msgTxInterval × msgTxHold (4) = 120 s.
pub const DEFAULT_TTL_S: u16 = 120;
/// Quiet time between LLDPDUs sent early because something changed (802.1AB's msgFastTx, 1 s).
pub const FAST_TX_NS: u64 = 1_000_000_000;

/// What the agent advertises and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LldpConfig {
    /// Chassis ID: this port's MAC (subtype 4).
    pub chassis: MacAddr,
    /// Port ID: the interface name (subtype 5).
    pub port_name: String,
    /// System Name TLV, if any.
    pub system_name: Option<String>,
    /// Seconds neighbours keep our information.
    pub ttl_s: u16,
    /// Time between regular transmissions.
    pub tx_interval_ns: u64,
    /// The DCBX PFC configuration TLV.
    pub pfc: PfcConfig,
    /// Our capability TLV.
    pub capability: AdaptiveCapability,
    /// Which organisationally specific TLV is ours.
    pub org: OrgTlvId,
}

impl LldpConfig {
    /// The defaults for a port: 30 s interval, TTL 120 s, PFC capability 8 with priorities
    /// `pfc_enabled`, and a capability TLV that answers, initiates and adapts.
    pub fn new(chassis: MacAddr, port_name: &str, pfc_enabled: u8) -> Self {
        LldpConfig {
            chassis,
            port_name: port_name.to_string(),
            system_name: None,
            ttl_s: DEFAULT_TTL_S,
            tx_interval_ns: DEFAULT_TX_INTERVAL_NS,
            pfc: PfcConfig {
                willing: false,
                mbc: false,
                capability: 8,
                enabled: pfc_enabled,
            },
            capability: AdaptiveCapability {
                responds: true,
                initiates: true,
                adaptive_headroom: true,
                round_trip_ns: 0,
            },
            org: OrgTlvId::default(),
        }
    }
}

/// A neighbour learnt from its LLDPDUs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Neighbour {
    /// The frame's source MAC.
    pub src: MacAddr,
    /// Its last LLDPDU.
    pub pdu: Lldpdu,
    /// When it was first heard (ns).
    pub first_seen_ns: u64,
    /// When it was last heard (ns).
    pub last_seen_ns: u64,
    /// When it is forgotten unless heard again (ns).
    pub expires_ns: u64,
}

impl Neighbour {
    /// True if it advertises that it answers peer-delay requests.
    pub fn responds_to_pdelay(&self) -> bool {
        self.pdu.adaptive.is_some_and(|a| a.responds)
    }
}

/// What a received LLDPDU did to the neighbour table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighbourChange {
    /// A neighbour not known before.
    Added,
    /// A known neighbour sent the same information again.
    Refreshed,
    /// A known neighbour's information changed.
    Changed,
    /// A known neighbour sent TTL 0 (it is shutting down) and was removed.
    Removed,
    /// TTL 0 from a neighbour we did not know: nothing to do.
    Ignored,
    /// A new neighbour while [`MAX_NEIGHBOURS`] are known: not taken in, until one expires.
    TableFull,
}

/// Counters of the agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LldpCounters {
    /// LLDPDUs handed out for transmission.
    pub tx: u64,
    /// LLDPDUs received and accepted.
    pub rx: u64,
    /// Neighbours removed because their TTL ran out.
    pub expired: u64,
    /// LLDPDUs from a neighbour not in a full table, not taken in (802.1AB's
    /// `tooManyNeighbors`, counted as its `lldpStatsRemTablesDrops`).
    pub table_drops: u64,
}

/// Neighbours one port keeps. A link has one partner (a hub or a bridge that forwards LLDP
/// may show a few); the bound keeps a flood of invented neighbours from growing the table,
/// which the leader worker searches for every LLDPDU and filters every turn, without end.
pub const MAX_NEIGHBOURS: usize = 8;

/// The LLDP agent of one port.
#[derive(Debug, Clone)]
pub struct LldpAgent {
    cfg: LldpConfig,
    next_tx_ns: u64,
    last_tx_ns: Option<u64>,
    neighbours: Vec<Neighbour>,
    /// Bumped whenever a neighbour comes or goes ([`LldpAgent::table_version`]).
    table_version: u64,
    counters: LldpCounters,
}

impl LldpAgent {
    /// An agent that sends its first LLDPDU at `now`.
    pub fn new(cfg: LldpConfig, now: u64) -> Self {
        LldpAgent {
            cfg,
            next_tx_ns: now,
            last_tx_ns: None,
            neighbours: Vec::with_capacity(MAX_NEIGHBOURS),
            table_version: 0,
            counters: LldpCounters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LldpConfig {
        &self.cfg
    }

    /// The LLDPDU this agent sends.
    pub fn pdu(&self) -> Lldpdu {
        Lldpdu {
            chassis_id: LldpId::mac(CHASSIS_SUBTYPE_MAC, self.cfg.chassis),
            port_id: LldpId::name(PORT_SUBTYPE_IFNAME, &self.cfg.port_name),
            ttl: self.cfg.ttl_s,
            system_name: self.cfg.system_name.clone(),
            pfc: Some(self.cfg.pfc),
            adaptive: Some(self.cfg.capability),
        }
    }

    /// The LLDPDU a port sends when it shuts down (802.1AB's shutdown LLDPDU): Chassis ID,
    /// Port ID and TTL 0, so neighbours forget it at once, and no optional TLV (there is
    /// nothing left to advertise). `None` until this agent has handed out an LLDPDU: no
    /// neighbour can hold anything of ours to forget.
    pub fn shutdown_pdu(&self) -> Option<Lldpdu> {
        self.last_tx_ns.map(|_| Lldpdu {
            ttl: 0,
            system_name: None,
            pfc: None,
            adaptive: None,
            ..self.pdu()
        })
    }

    /// The LLDPDU to send at `now`, if one is due; schedules the next one.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Lldpdu> {
        if now < self.next_tx_ns {
            return None;
        }
        self.last_tx_ns = Some(now);
        self.next_tx_ns = now + self.cfg.tx_interval_ns;
        self.counters.tx += 1;
        Some(self.pdu())
    }

    /// Asks for an early transmission (something changed): at once, or one [`FAST_TX_NS`]
    /// after the last one, whichever is later.
    fn send_soon(&mut self, now: u64) {
        let earliest = self.last_tx_ns.map_or(now, |t| t + FAST_TX_NS).max(now);
        self.next_tx_ns = self.next_tx_ns.min(earliest);
    }

    /// Changes the advertised PFC configuration and capability (for example after a
    /// measurement, to advertise the round trip); an LLDPDU goes out soon if they changed.
    pub fn set_advertised(&mut self, now: u64, pfc: PfcConfig, capability: AdaptiveCapability) {
        if pfc != self.cfg.pfc || capability != self.cfg.capability {
            self.cfg.pfc = pfc;
            self.cfg.capability = capability;
            self.send_soon(now);
        }
    }

    /// Takes in an LLDPDU received at `now` from `src`. A new neighbour makes the agent send
    /// its own LLDPDU soon, so the two ends learn each other without waiting 30 s.
    pub fn handle_rx(&mut self, now: u64, src: MacAddr, pdu: Lldpdu) -> NeighbourChange {
        self.counters.rx += 1;
        let pos = self
            .neighbours
            .iter()
            .position(|n| n.pdu.chassis_id == pdu.chassis_id && n.pdu.port_id == pdu.port_id);
        if pdu.ttl == 0 {
            return match pos {
                Some(i) => {
                    self.neighbours.remove(i);
                    self.table_version += 1;
                    NeighbourChange::Removed
                }
                None => NeighbourChange::Ignored,
            };
        }
        let expires_ns = now + u64::from(pdu.ttl) * 1_000_000_000;
        match pos {
            Some(i) => {
                let n = &mut self.neighbours[i];
                let changed = n.pdu != pdu || n.src != src;
                n.pdu = pdu;
                n.src = src;
                n.last_seen_ns = now;
                n.expires_ns = expires_ns;
                if changed {
                    NeighbourChange::Changed
                } else {
                    NeighbourChange::Refreshed
                }
            }
            None if self.neighbours.len() >= MAX_NEIGHBOURS => {
                self.counters.table_drops += 1;
                NeighbourChange::TableFull
            }
            None => {
                self.neighbours.push(Neighbour {
                    src,
                    pdu,
                    first_seen_ns: now,
                    last_seen_ns: now,
                    expires_ns,
                });
                self.table_version += 1;
                self.send_soon(now);
                NeighbourChange::Added
            }
        }
    }

    /// Removes the neighbours whose TTL ran out by `now`, handing each to `gone` on its way
    /// out, and returns how many went. The table is filtered in place: worker 0 calls this
    /// every loop turn, so it must not allocate.
    pub fn expire(&mut self, now: u64, mut gone: impl FnMut(&Neighbour)) -> usize {
        let before = self.neighbours.len();
        self.neighbours.retain(|n| {
            let expired = n.expires_ns <= now;
            if expired {
                gone(n);
            }
            !expired
        });
        let expired = before - self.neighbours.len();
        self.counters.expired += expired as u64;
        if expired > 0 {
            self.table_version += 1;
        }
        expired
    }

    /// The current neighbours.
    pub fn neighbours(&self) -> &[Neighbour] {
        &self.neighbours
    }

    /// The neighbour learnt last, the one to report as the port's peer: when a cable moves to
    /// another peer, the one now heard, while the one before waits out its TTL (120 s from
    /// `lldpd`) in the table. The first learnt, reported before, named the old peer that long.
    pub fn newest(&self) -> Option<&Neighbour> {
        self.neighbours.iter().max_by_key(|n| n.first_seen_ns)
    }

    /// Which neighbours are known, as a number that changes whenever one is learnt, removed
    /// by its TTL-0 LLDPDU or expired. Their count would not do: one going and another
    /// coming between two looks leave it the same, and whoever reports the neighbour would
    /// keep naming the one gone.
    pub fn table_version(&self) -> u64 {
        self.table_version
    }

    /// True if some neighbour advertises that it answers peer-delay requests.
    pub fn peer_responds(&self) -> bool {
        self.neighbours.iter().any(Neighbour::responds_to_pdelay)
    }

    /// Counters.
    pub fn counters(&self) -> LldpCounters {
        self.counters
    }

    /// The next time [`LldpAgent::poll_transmit`] or [`LldpAgent::expire`] has work.
    pub fn next_deadline(&self) -> u64 {
        self.neighbours
            .iter()
            .map(|n| n.expires_ns)
            .fold(self.next_tx_ns, u64::min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn agent(mac: u8, name: &str) -> LldpAgent {
        LldpAgent::new(
            LldpConfig::new(MacAddr([2, 0, 0, 0, 0, mac]), name, 0x08),
            0,
        )
    }

    #[test]
    fn transmits_at_start_and_every_30s() {
        let mut a = agent(1, "eth0");
        let pdu = a.poll_transmit(0).expect("first LLDPDU at start");
        assert_eq!(pdu.ttl, 120);
        assert_eq!(pdu.port_id.to_string(), "eth0");
        assert_eq!(pdu.pfc.unwrap().enabled, 0x08);
        assert!(pdu.adaptive.unwrap().responds);
        assert_eq!(a.poll_transmit(1), None);
        assert_eq!(a.next_deadline(), 30 * S);
        assert_eq!(a.poll_transmit(30 * S - 1), None);
        assert!(a.poll_transmit(30 * S).is_some());
        assert!(a.poll_transmit(60 * S + 5).is_some());
        assert_eq!(a.next_deadline(), 90 * S + 5);
        assert_eq!(a.counters().tx, 3);
    }

    /// The shutdown LLDPDU holds only what identifies the port, with TTL 0, and comes only
    /// once an LLDPDU went out.
    #[test]
    fn shuts_down_with_ttl_zero_once_it_has_sent() {
        let mut a = agent(1, "eth0");
        assert_eq!(a.shutdown_pdu(), None, "nothing sent, nothing to take back");
        let sent = a.poll_transmit(0).unwrap();
        let bye = a.shutdown_pdu().unwrap();
        assert_eq!(
            (bye.chassis_id, bye.port_id),
            (sent.chassis_id, sent.port_id)
        );
        assert_eq!(bye.ttl, 0);
        assert_eq!((bye.system_name, bye.pfc, bye.adaptive), (None, None, None));
    }

    #[test]
    fn learns_refreshes_and_expires_neighbours() {
        let mut a = agent(1, "eth0");
        let mut b = agent(2, "eth1");
        a.poll_transmit(0);
        let pb = b.poll_transmit(0).unwrap();
        let src = MacAddr([2, 0, 0, 0, 0, 2]);
        // A new neighbour: learnt, and our next LLDPDU is pulled forward to 1 s after the last.
        assert_eq!(a.handle_rx(10 * S, src, pb.clone()), NeighbourChange::Added);
        assert!(a.peer_responds());
        assert_eq!(a.neighbours()[0].expires_ns, 130 * S);
        assert_eq!(a.poll_transmit(10 * S), Some(a.pdu()));
        assert_eq!(
            a.handle_rx(40 * S, src, pb.clone()),
            NeighbourChange::Refreshed
        );
        let mut changed = pb.clone();
        changed.adaptive.as_mut().unwrap().round_trip_ns = 77;
        assert_eq!(a.handle_rx(41 * S, src, changed), NeighbourChange::Changed);
        assert_eq!(a.neighbours()[0].pdu.adaptive.unwrap().round_trip_ns, 77);
        assert_eq!(a.next_deadline(), 40 * S, "the regular 30 s transmission");
        a.poll_transmit(40 * S);
        assert_eq!(a.next_deadline(), 70 * S);
        // Not heard again: expires 120 s after the last LLDPDU.
        a.poll_transmit(70 * S);
        a.poll_transmit(100 * S);
        assert_eq!(a.next_deadline(), 130 * S);
        assert_eq!(a.expire(161 * S - 1, |_| ()), 0);
        let mut gone = Vec::new();
        a.expire(161 * S, |n| gone.push(n.clone()));
        assert_eq!(gone.len(), 1);
        assert!(a.neighbours().is_empty());
        assert!(!a.peer_responds());
        assert_eq!(a.counters().expired, 1);
    }

    /// A flood of invented neighbours fills the table to its bound and no further; those
    /// known are still refreshed, and a new one gets in once one has expired.
    #[test]
    fn a_full_table_takes_no_new_neighbour() {
        let mut a = agent(1, "eth0");
        let stranger = |i: u8| {
            let mut pdu = agent(100 + i, &format!("x{i}")).pdu();
            pdu.ttl = if i == 0 { 10 } else { 65535 };
            (MacAddr([2, 0, 0, 0, 1, i]), pdu)
        };
        for i in 0..MAX_NEIGHBOURS as u8 {
            let (src, pdu) = stranger(i);
            assert_eq!(a.handle_rx(S, src, pdu), NeighbourChange::Added);
        }
        let (src, pdu) = stranger(200);
        assert_eq!(a.handle_rx(S, src, pdu.clone()), NeighbourChange::TableFull);
        assert_eq!(a.neighbours().len(), MAX_NEIGHBOURS);
        assert_eq!(a.counters().table_drops, 1);
        let (known, known_pdu) = stranger(1);
        assert_eq!(
            a.handle_rx(2 * S, known, known_pdu),
            NeighbourChange::Refreshed
        );
        // The first one's 10 s TTL runs out: room for the newcomer.
        assert_eq!(a.expire(11 * S, |_| ()), 1);
        assert_eq!(a.handle_rx(12 * S, src, pdu), NeighbourChange::Added);
        assert_eq!(a.neighbours.capacity(), MAX_NEIGHBOURS, "never grown");
    }

    #[test]
    fn expiry_filters_the_table_in_place() {
        let mut a = agent(1, "eth0");
        let (early, late) = (MacAddr([2, 0, 0, 0, 0, 2]), MacAddr([2, 0, 0, 0, 0, 3]));
        a.handle_rx(0, early, agent(2, "eth1").pdu());
        a.handle_rx(10 * S, late, agent(3, "eth2").pdu());
        let table = (a.neighbours().as_ptr(), a.neighbours.capacity());
        // Nothing due: nothing reported, the table untouched.
        assert_eq!(a.expire(S, |n| panic!("{} is not due", n.src)), 0);
        assert_eq!((a.neighbours().as_ptr(), a.neighbours.capacity()), table);
        // One due: reported and removed, the other kept in the same allocation.
        let mut gone = Vec::new();
        assert_eq!(a.expire(125 * S, |n| gone.push(n.src)), 1);
        assert_eq!(gone, [early]);
        assert_eq!(a.neighbours().len(), 1);
        assert_eq!(a.neighbours()[0].src, late);
        assert_eq!((a.neighbours().as_ptr(), a.neighbours.capacity()), table);
        assert_eq!(a.counters().expired, 1);
    }

    #[test]
    fn ttl_zero_removes_at_once() {
        let mut a = agent(1, "eth0");
        let mut b = agent(2, "eth1");
        b.poll_transmit(0);
        let src = MacAddr([2, 0, 0, 0, 0, 2]);
        let bye = b.shutdown_pdu().unwrap();
        assert_eq!(a.handle_rx(S, src, bye.clone()), NeighbourChange::Ignored);
        assert_eq!(a.table_version(), 0, "nothing came or went");
        a.handle_rx(S, src, b.pdu());
        a.handle_rx(S, src, b.pdu());
        assert_eq!(a.neighbours().len(), 1);
        assert_eq!(a.table_version(), 1, "learnt, then refreshed");
        assert_eq!(a.handle_rx(2 * S, src, bye), NeighbourChange::Removed);
        assert!(a.neighbours().is_empty());
        assert_eq!(a.table_version(), 2);
    }

    #[test]
    fn the_newest_neighbour_is_the_one_learnt_last() {
        let mut a = agent(1, "eth0");
        let (b, c) = (agent(2, "eth1"), agent(3, "eth2"));
        let (src_b, src_c) = (MacAddr([2, 0, 0, 0, 0, 2]), MacAddr([2, 0, 0, 0, 0, 3]));
        assert!(a.newest().is_none());
        a.handle_rx(S, src_b, b.pdu());
        a.handle_rx(2 * S, src_c, c.pdu());
        // The first peer heard again after the second was learnt is still the older one.
        a.handle_rx(3 * S, src_b, b.pdu());
        assert_eq!(a.newest().map(|n| n.src), Some(src_c));
        a.expire(2 * S + 120 * S, |_| {});
        assert_eq!(a.newest().map(|n| n.src), Some(src_b), "the newest expired");
    }

    #[test]
    fn advertising_a_change_sends_soon() {
        let mut a = agent(1, "eth0");
        a.poll_transmit(0);
        let mut cap = a.config().capability;
        let pfc = a.config().pfc;
        a.set_advertised(S / 2, pfc, cap);
        assert_eq!(a.next_deadline(), 30 * S, "no change, no early LLDPDU");
        cap.round_trip_ns = 12_345;
        a.set_advertised(S / 2, pfc, cap);
        assert_eq!(
            a.next_deadline(),
            S,
            "fast transmission one second after the last"
        );
        let pdu = a.poll_transmit(S).unwrap();
        assert_eq!(pdu.adaptive.unwrap().round_trip_ns, 12_345);
    }
}
