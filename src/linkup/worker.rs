//! [`ForwardingAgent`]: a port's [`LinkAgent`] run by the daemon's leader worker, as the
//! dataplane's [`PortAgent`]. Each loop turn it starts a measurement the control plane asked
//! for, sends what is due, hands a finished measurement back and publishes the LLDP neighbour
//! when the set of neighbours changed; all of that through the port's [`LinkShared`], whose
//! lock is taken only when a measurement finishes or the neighbours change.

use std::sync::Arc;

use super::{
    lldp::LldpConfig,
    pdelay::InitiatorConfig,
    run::{LinkAgent, LinkAgentConfig},
    shared::{LinkShared, LINK_EVENTS},
    tx_stamp::DATAPLANE_STAMP_TIMEOUT,
    LinkupSettings,
};
use crate::{
    dataplane::{
        agent::{PortAgent, Taken},
        pool::FramePool,
        port::Port,
    },
    wire::{lldp::PfcConfig, FrameKind, MacAddr},
};

/// Link-up on one port of a forwarding worker.
pub struct ForwardingAgent {
    agent: LinkAgent,
    link: Arc<LinkShared>,
    /// The LLDP agent's [`crate::linkup::lldp::LldpAgent::table_version`] when the peer was
    /// last published (`None`: never).
    table_seen: Option<u64>,
    /// Before this time a loop turn has nothing to do, unless a frame was handed in (which
    /// sets it to 0) or the control plane asks for a measurement: the agent's own next
    /// deadline as of its last turn. The worker turns every few microseconds; the agent has
    /// work every few milliseconds at most.
    idle_until: u64,
    /// The agent's counts as last published ([`LINK_EVENTS`] order).
    events_seen: [u64; LINK_EVENTS.len()],
    /// The shutdown LLDPDU is in [`LinkShared`] (or could not be built, said once).
    shutdown_frame_given: bool,
}

impl ForwardingAgent {
    /// The agent of port `iface` (MAC `mac`, PFC enabled on the priorities of `pfc_enabled`)
    /// with `settings`, talking to the control plane through `link`; its first LLDPDU is due
    /// at `now`. Peer-delay frames take kernel TX stamps where the interface gives them.
    pub fn new(
        settings: &LinkupSettings,
        link: Arc<LinkShared>,
        mac: MacAddr,
        iface: &str,
        pfc_enabled: u8,
        now: u64,
    ) -> Self {
        let agent = LinkAgent::new(
            LinkAgentConfig {
                lldp: LldpConfig::new(mac, iface, pfc_enabled),
                initiator: InitiatorConfig::new(settings.samples, settings.sample_interval_ns),
                respond: true,
            },
            mac,
            now,
        )
        .with_kernel_tx_stamps(iface, DATAPLANE_STAMP_TIMEOUT);
        ForwardingAgent {
            agent,
            link,
            table_seen: None,
            idle_until: 0,
            events_seen: [0; LINK_EVENTS.len()],
            shutdown_frame_given: false,
        }
    }
}

impl PortAgent for ForwardingAgent {
    fn on_frame(&mut self, kind: FrameKind, data: &[u8], rx_ns: u64, now: u64) -> Taken {
        // A frame may leave an answer to send, a measurement finished, a new neighbour.
        self.idle_until = 0;
        self.agent.on_frame(kind, data, rx_ns, now)
    }

    fn poll(&mut self, port: &mut dyn Port, pool: &mut FramePool, now: u64) {
        let requested = self.link.take_request();
        if !requested && now < self.idle_until {
            return;
        }
        if requested {
            self.agent.start_measurement(now);
        }
        if let Err(e) = self.agent.transmit(port, pool, now) {
            tracing::warn!(iface = port.name(), error = %e, "link-up transmit failed");
        }
        if let Some(r) = self.agent.take_measurement(now) {
            self.link.finish(r);
        }
        // The worker cannot send the shutdown LLDPDU: it stops with the agent (its drain knows
        // nothing of link-up). The control plane sends it after, from the frame given here
        // once the first LLDPDU went out (so only on a port whose neighbour may know us).
        if !self.shutdown_frame_given {
            match self.agent.shutdown_frame() {
                Ok(None) => {}
                Ok(Some(frame)) => {
                    self.link.set_shutdown_frame(frame);
                    self.shutdown_frame_given = true;
                }
                Err(e) => {
                    tracing::warn!(iface = port.name(), error = %e, "no shutdown LLDPDU for the stop");
                    self.shutdown_frame_given = true;
                }
            }
        }
        // Each learnt, expired or shut-down neighbour changes the version (the count would
        // miss one going as another comes); formatted only then, not every turn.
        let lldp = self.agent.lldp();
        if self.table_seen != Some(lldp.table_version()) {
            self.table_seen = Some(lldp.table_version());
            let peer = lldp
                .newest()
                .map(|n| format!("{} / {}", n.pdu.chassis_id, n.pdu.port_id));
            self.link.set_peer(peer);
        }
        // What the agent counted (refused requests, missed stamps, a full LLDP table: none
        // of them a frame the worker drops), for the metrics.
        let events = self
            .agent
            .counters()
            .by_event(self.agent.lldp().counters().table_drops);
        if events != self.events_seen {
            self.events_seen = events;
            self.link.publish_events(&events);
        }
        self.idle_until = self.agent.next_deadline();
    }

    fn next_deadline(&self) -> u64 {
        self.agent.next_deadline()
    }

    fn set_pfc_enabled(&mut self, enabled: u8, now: u64) {
        let lldp = self.agent.lldp_mut();
        let (pfc, capability) = (lldp.config().pfc, lldp.config().capability);
        lldp.set_advertised(now, PfcConfig { enabled, ..pfc }, capability);
        // An LLDPDU is due soon: look at once.
        self.idle_until = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        dataplane::mem_port::mem_link,
        linkup::lldp::{LldpAgent, FAST_TX_NS},
        wire::{lldp::Lldpdu, EtherType},
    };

    const S: u64 = 1_000_000_000;

    fn settings() -> LinkupSettings {
        LinkupSettings {
            samples: 4,
            sample_interval_ns: 10_000_000,
            interval_ns: 0,
            max_frame: 1518,
            peer_response_ns: 0,
        }
    }

    /// The LLDP frame of neighbour `n` (MAC 02::n, port `p<n>`) with TTL `ttl_s`.
    fn lldp_from(n: u8, ttl_s: u16) -> Vec<u8> {
        let mac = MacAddr([2, 0, 0, 0, 1, n]);
        let mut pdu = LldpAgent::new(LldpConfig::new(mac, &format!("p{n}"), 0x08), 0).pdu();
        pdu.ttl = ttl_s;
        let mut buf = vec![0; 256];
        let len = pdu.emit_frame(mac, Default::default(), &mut buf).unwrap();
        buf.truncate(len);
        buf
    }

    /// The shutdown LLDPDU is handed to the control plane once the first LLDPDU went out,
    /// and is sent once: before, and after it was taken, there is nothing to send. (An
    /// interface that does not exist shows whether there is a frame without sending one.)
    #[test]
    fn the_shutdown_lldpdu_is_given_once_an_lldpdu_went_out() {
        let mac = MacAddr([2, 0, 0, 0, 0, 10]);
        let (mut port, peer) = mem_link("m0", mac, 64);
        let mut pool = FramePool::heap(64).unwrap();
        let link = Arc::new(LinkShared::default());
        let mut a = ForwardingAgent::new(&settings(), link.clone(), mac, "m0", 0x08, S);
        let nowhere = "lossless-none0";
        a.poll(&mut port, &mut pool, 0);
        assert!(peer.take().is_empty(), "the first LLDPDU is due at 1 s");
        assert!(!link.send_shutdown_lldpdu(nowhere).unwrap(), "none yet");
        a.poll(&mut port, &mut pool, S);
        assert_eq!(peer.take().len(), 1);
        let e = link.send_shutdown_lldpdu(nowhere).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
        assert!(!link.send_shutdown_lldpdu(nowhere).unwrap(), "taken once");
    }

    /// What status and metrics report as the LLDP peer names a neighbour only while it is
    /// known: not once its TTL has run out, nor after its TTL-0 LLDPDU, also when another
    /// neighbour takes its place between two turns (the same number of neighbours).
    #[test]
    fn the_reported_peer_expires_and_clears() {
        let mac = MacAddr([2, 0, 0, 0, 0, 10]);
        let (mut port, _peer) = mem_link("m0", mac, 64);
        let mut pool = FramePool::heap(64).unwrap();
        let link = Arc::new(LinkShared::default());
        let mut a = ForwardingAgent::new(&settings(), link.clone(), mac, "m0", 0x08, 0);
        let name = |n: u8| Some(format!("02:00:00:00:01:{n:02x} / p{n}"));
        let hear = |a: &mut ForwardingAgent, n: u8, ttl_s: u16, now: u64| {
            let f = lldp_from(n, ttl_s);
            assert_eq!(a.on_frame(FrameKind::Lldp, &f, now, now), Taken::Consumed);
        };
        a.poll(&mut port, &mut pool, 0);
        assert_eq!(link.peer(), None);
        hear(&mut a, 1, 10, S);
        a.poll(&mut port, &mut pool, S);
        assert_eq!(link.peer(), name(1));
        // Its TTL runs out (10 s after it was heard) as neighbour 2 is heard.
        hear(&mut a, 2, 10, 11 * S);
        a.poll(&mut port, &mut pool, 11 * S);
        assert_eq!(link.peer(), name(2), "neighbour 1 expired");
        // Neighbour 2 shuts down (TTL 0) and neighbour 3 is heard before the next turn.
        hear(&mut a, 2, 0, 12 * S);
        hear(&mut a, 3, 10, 12 * S);
        a.poll(&mut port, &mut pool, 12 * S);
        assert_eq!(link.peer(), name(3), "neighbour 2 shut down");
        // Neighbour 3's TTL runs out with no one after it: the turn comes at that deadline.
        assert_eq!(a.next_deadline(), 22 * S);
        a.poll(&mut port, &mut pool, 22 * S - 1);
        assert_eq!(link.peer(), name(3));
        a.poll(&mut port, &mut pool, 22 * S);
        assert_eq!(link.peer(), None, "neighbour 3 expired");
        // A TTL-0 LLDPDU clears it at the next turn.
        hear(&mut a, 4, 120, 23 * S);
        a.poll(&mut port, &mut pool, 23 * S);
        assert_eq!(link.peer(), name(4));
        hear(&mut a, 4, 0, 24 * S);
        a.poll(&mut port, &mut pool, 24 * S);
        assert_eq!(link.peer(), None, "neighbour 4 shut down");
    }

    /// A reload that changes which priorities have PFC changes what the agent advertises
    /// (DCBX's PFC configuration TLV): an LLDPDU with the new priorities goes out within a
    /// second, not at the next 30 s refresh.
    #[test]
    fn a_reload_of_the_pfc_priorities_is_advertised() {
        let mac = MacAddr([2, 0, 0, 0, 0, 10]);
        let (mut port, peer) = mem_link("m0", mac, 64);
        let mut pool = FramePool::heap(64).unwrap();
        let mut a = ForwardingAgent::new(&settings(), Arc::default(), mac, "m0", 0x08, 0);
        let advertised = |frames: Vec<Vec<u8>>| -> Vec<u8> {
            frames
                .iter()
                .filter(|f| f[12..14] == EtherType::LLDP.to_be_bytes())
                .map(|f| {
                    let (_, pdu) = Lldpdu::parse_frame(f, Default::default()).unwrap();
                    pdu.pfc.unwrap().enabled
                })
                .collect()
        };
        a.poll(&mut port, &mut pool, 0);
        assert_eq!(advertised(peer.take()), [0x08], "at start");
        a.set_pfc_enabled(0x28, 1_000);
        a.poll(&mut port, &mut pool, FAST_TX_NS - 1);
        assert!(
            advertised(peer.take()).is_empty(),
            "one second after the last"
        );
        a.poll(&mut port, &mut pool, FAST_TX_NS);
        assert_eq!(advertised(peer.take()), [0x28], "priorities 3 and 5");
    }
}
