//! SFC messages (SFCM): a congested queue tells the source of an offending frame how long to
//! pause. No public format exists, so the project defines one.
//!
//! # Encapsulations
//! - **Layer 2**: EtherType 0x88B5 (IEEE 802 local experimental 1, [`EtherType::LOSSLESS`]),
//!   optionally inside one 802.1Q tag; the 64-byte body below follows the EtherType directly.
//!   An untagged SFCM frame is 14 + 64 = [`SFCM_FRAME_LEN`] = 78 bytes (no padding needed).
//! - **UDP/IPv4**, for sources beyond this L2 segment: Ethernet (EtherType 0x0800) + a 20-byte
//!   IPv4 header (no options, DF set, protocol 17, header checksum) + an 8-byte UDP header
//!   (destination port configurable, [`SFCM_UDP_PORT`] suggested; length 72; checksum over the
//!   pseudo-header, 0 accepted on receive as "not computed") + the same 64-byte body.
//!   An untagged UDP SFCM frame is 14 + 20 + 8 + 64 = [`SFCM_UDP_FRAME_LEN`] = 106 bytes.
//!
//! # Body (64 bytes, big-endian, every field naturally aligned from the body's start)
//! ```text
//! off len field
//!   0   1 version              = 1 (SFCM_VERSION)
//!   1   1 message type         = 0x01 (wire::kind::SFCM_MSG_TYPE; 0x02 is a credit update)
//!   2   1 flags                bit 0 FLOW_SCOPE: pause the flow, not the whole class
//!                              bit 1 IPV4_FLOW: bytes 46..60 carry the offending IPv4 flow
//!                              bits 2..7 reserved, must be 0
//!                              (FLOW_SCOPE requires IPV4_FLOW)
//!   3   1 priority             802.1p priority of the congested queue, 0..=7
//!   4   4 sequence number      per congestion point, +1 per SFCM sent (wraps)
//!   8   8 pause interval       PI in ns (how long the source must pause)
//!  16   8 send timestamp       ns, in the congestion point's clock
//!  24   8 queue depth          bytes queued when the offending frame arrived
//!  32   8 drain rate           bit/s the queue drains at (as used for PI)
//!  40   6 source MAC           Ethernet source address of the offending frame
//!  46   1 IP protocol          of the offending flow (17 = UDP); 0 without IPV4_FLOW
//!  47   1 reserved             0
//!  48   4 source IPv4          of the offending flow; 0 without IPV4_FLOW
//!  52   4 destination IPv4     of the offending flow; 0 without IPV4_FLOW
//!  56   2 source port          of the offending flow; 0 without IPV4_FLOW
//!  58   2 destination port     of the offending flow; 0 without IPV4_FLOW
//!  60   4 reserved             0
//! ```
//! Parsers reject any other version or message type, reserved bits or bytes that are not zero,
//! a priority above 7, and flow bytes that are not zero without `IPV4_FLOW`, so every accepted
//! body re-emits to the same bytes. Bytes after the body (Ethernet padding) are ignored.

use super::ipv4::{ipv4_checksum, udp_checksum, Ipv4UdpHeader, IPV4_LEN, IP_PROTO_UDP, UDP_LEN};
use super::kind::SFCM_MSG_TYPE;
use super::{be16, need, EtherType, EthernetFrame, EthernetRepr, MacAddr, WireError};

/// Version byte of the SFCM format this codec reads and writes.
pub const SFCM_VERSION: u8 = 1;
/// Length of the SFCM body (after the EtherType, or after the UDP header).
pub const SFCM_LEN: usize = 64;
/// Length of an untagged layer-2 SFCM frame without FCS.
pub const SFCM_FRAME_LEN: usize = 14 + SFCM_LEN;
/// Length of an untagged UDP/IPv4 SFCM frame without FCS.
pub const SFCM_UDP_FRAME_LEN: usize = 14 + IPV4_LEN + UDP_LEN + SFCM_LEN;
/// Suggested UDP destination port of SFCMs (0x88B5, echoing the EtherType; not IANA-assigned,
/// so deployments configure their own).
pub const SFCM_UDP_PORT: u16 = 0x88B5;
/// Flags bit: the pause applies to the offending flow only, not to its whole class.
pub const FLAG_FLOW_SCOPE: u8 = 0x01;
/// Flags bit: the message carries the offending flow's IPv4 identity.
pub const FLAG_IPV4_FLOW: u8 = 0x02;

const UDP_TOTAL: usize = UDP_LEN + SFCM_LEN;

/// What an SFCM asks the reaction point to pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SfcScope {
    /// The whole class: every frame of the message's priority from that source.
    #[default]
    Class,
    /// Only the offending flow (identified by its IPv4 5-tuple).
    Flow,
}

/// An IPv4 flow's identity (5-tuple).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ipv4Flow {
    /// Source address.
    pub src_ip: [u8; 4],
    /// Destination address.
    pub dst_ip: [u8; 4],
    /// IP protocol number (17 = UDP).
    pub protocol: u8,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

impl Ipv4Flow {
    /// The 5-tuple of an IPv4 UDP or TCP frame (optionally 802.1Q-tagged), if it is one.
    pub fn of_frame(frame: &[u8]) -> Option<Self> {
        let eth = super::EthernetFrame::new_checked(frame).ok()?;
        if eth.ethertype() != EtherType::IPV4 {
            return None;
        }
        let ip = eth.payload();
        if ip.len() < IPV4_LEN || ip[0] >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let protocol = ip[9];
        let l4 = ip
            .get(ihl..ihl + 4)
            .filter(|_| ihl >= IPV4_LEN && (protocol == 6 || protocol == 17))?;
        Some(Ipv4Flow {
            src_ip: ip4(ip, 12),
            dst_ip: ip4(ip, 16),
            protocol,
            src_port: u16::from_be_bytes([l4[0], l4[1]]),
            dst_port: u16::from_be_bytes([l4[2], l4[3]]),
        })
    }
}

/// A decoded SFC message body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sfcm {
    /// Priority (0–7) of the congested queue.
    pub priority: u8,
    /// Class or flow pause; [`SfcScope::Flow`] requires `flow`.
    pub scope: SfcScope,
    /// Sequence number per congestion point.
    pub seq: u32,
    /// Pause interval in nanoseconds.
    pub pause_ns: u64,
    /// Congestion point's send timestamp in nanoseconds (its own clock).
    pub sent_ns: u64,
    /// Queue depth in bytes when the offending frame arrived.
    pub queue_bytes: u64,
    /// Drain rate of the queue in bit/s.
    pub drain_bps: u64,
    /// Ethernet source address of the offending frame.
    pub src_mac: MacAddr,
    /// The offending frame's IPv4 flow, when it was one.
    pub flow: Option<Ipv4Flow>,
}

fn be32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn be64(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_be_bytes(b)
}

fn ip4(buf: &[u8], at: usize) -> [u8; 4] {
    [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]
}

fn bad(field: &'static str, value: u64) -> WireError {
    WireError::BadValue { field, value }
}

impl Sfcm {
    /// Parses an SFCM body (from the version byte on); trailing bytes are ignored.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        need(body, 2, "SFCM version and type")?;
        if body[0] != SFCM_VERSION {
            return Err(bad("SFCM version", u64::from(body[0])));
        }
        if body[1] != SFCM_MSG_TYPE {
            return Err(bad("SFCM message type", u64::from(body[1])));
        }
        need(body, SFCM_LEN, "SFCM body")?;
        let flags = body[2];
        if flags & !(FLAG_FLOW_SCOPE | FLAG_IPV4_FLOW) != 0 {
            return Err(bad("SFCM flags (reserved bits)", u64::from(flags)));
        }
        if flags & FLAG_FLOW_SCOPE != 0 && flags & FLAG_IPV4_FLOW == 0 {
            return Err(bad(
                "SFCM flags (flow scope without an IPv4 flow)",
                u64::from(flags),
            ));
        }
        if body[3] > 7 {
            return Err(bad("SFCM priority", u64::from(body[3])));
        }
        if body[47] != 0 || body[60..64] != [0; 4] {
            return Err(bad(
                "SFCM reserved bytes",
                u64::from(body[47]) | u64::from(be32(body, 60)) << 8,
            ));
        }
        let flow = if flags & FLAG_IPV4_FLOW != 0 {
            Some(Ipv4Flow {
                src_ip: ip4(body, 48),
                dst_ip: ip4(body, 52),
                protocol: body[46],
                src_port: be16(body, 56),
                dst_port: be16(body, 58),
            })
        } else {
            if body[46] != 0 || body[48..60].iter().any(|&b| b != 0) {
                return Err(bad(
                    "SFCM flow bytes (must be zero without the IPv4 flag)",
                    be64(body, 48),
                ));
            }
            None
        };
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&body[40..46]);
        Ok(Sfcm {
            priority: body[3],
            scope: if flags & FLAG_FLOW_SCOPE != 0 {
                SfcScope::Flow
            } else {
                SfcScope::Class
            },
            seq: be32(body, 4),
            pause_ns: be64(body, 8),
            sent_ns: be64(body, 16),
            queue_bytes: be64(body, 24),
            drain_bps: be64(body, 32),
            src_mac: MacAddr(mac),
            flow,
        })
    }

    /// Writes the 64-byte body to the start of `buf`; returns [`SFCM_LEN`].
    ///
    /// Fails without writing on a priority above 7 or a flow scope without a flow.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.priority > 7 {
            return Err(bad("SFCM priority", u64::from(self.priority)));
        }
        if self.scope == SfcScope::Flow && self.flow.is_none() {
            return Err(bad("SFCM flags (flow scope without an IPv4 flow)", 1));
        }
        need(buf, SFCM_LEN, "SFCM buffer")?;
        let b = &mut buf[..SFCM_LEN];
        b.fill(0);
        b[0] = SFCM_VERSION;
        b[1] = SFCM_MSG_TYPE;
        b[2] = match self.scope {
            SfcScope::Class => 0,
            SfcScope::Flow => FLAG_FLOW_SCOPE,
        } | if self.flow.is_some() {
            FLAG_IPV4_FLOW
        } else {
            0
        };
        b[3] = self.priority;
        b[4..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..16].copy_from_slice(&self.pause_ns.to_be_bytes());
        b[16..24].copy_from_slice(&self.sent_ns.to_be_bytes());
        b[24..32].copy_from_slice(&self.queue_bytes.to_be_bytes());
        b[32..40].copy_from_slice(&self.drain_bps.to_be_bytes());
        b[40..46].copy_from_slice(&self.src_mac.0);
        if let Some(f) = self.flow {
            b[46] = f.protocol;
            b[48..52].copy_from_slice(&f.src_ip);
            b[52..56].copy_from_slice(&f.dst_ip);
            b[56..58].copy_from_slice(&f.src_port.to_be_bytes());
            b[58..60].copy_from_slice(&f.dst_port.to_be_bytes());
        }
        Ok(SFCM_LEN)
    }
}

/// A whole layer-2 SFCM frame: Ethernet header (EtherType 0x88B5) + body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfcmFrame {
    /// Ethernet header; `dst` is the source being paused. [`SfcmFrame::emit`] writes
    /// EtherType 0x88B5 whatever `ethertype` holds; [`SfcmFrame::parse`] returns 0x88B5.
    pub eth: EthernetRepr,
    /// The message.
    pub msg: Sfcm,
}

impl SfcmFrame {
    /// Parses a whole frame, checking the EtherType; padding after the body is ignored.
    pub fn parse(frame: &[u8]) -> Result<Self, WireError> {
        let eth = EthernetRepr::parse(frame)?;
        if eth.ethertype != EtherType::LOSSLESS {
            return Err(bad("EtherType (expected 0x88B5)", u64::from(eth.ethertype)));
        }
        Ok(SfcmFrame {
            eth,
            msg: Sfcm::parse(&frame[eth.header_len()..])?,
        })
    }

    /// Writes the frame into `buf`; returns its length (78, or 82 with a tag).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let eth = EthernetRepr {
            ethertype: EtherType::LOSSLESS,
            ..self.eth
        };
        let len = eth.header_len() + SFCM_LEN;
        need(buf, len, "SFCM frame buffer")?;
        self.msg.emit(&mut buf[eth.header_len()..len])?;
        eth.emit(buf)?;
        Ok(len)
    }
}

/// A whole UDP/IPv4 SFCM frame: Ethernet + IPv4 + UDP + body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SfcmUdpFrame {
    /// Ethernet header (`dst` is the next hop). [`SfcmUdpFrame::emit`] writes EtherType 0x0800
    /// whatever `ethertype` holds; [`SfcmUdpFrame::parse`] returns 0x0800.
    pub eth: EthernetRepr,
    /// IPv4 source (the congestion point).
    pub src_ip: [u8; 4],
    /// IPv4 destination (the source being paused).
    pub dst_ip: [u8; 4],
    /// DSCP (6 bits).
    pub dscp: u8,
    /// IPv4 time to live.
    pub ttl: u8,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port (the configured SFCM port).
    pub dst_port: u16,
    /// The message.
    pub msg: Sfcm,
}

/// The UDP checksum of a 72-byte SFCM datagram (whose checksum field is taken as is), over the
/// IPv4 pseudo-header. Returns 0 when the datagram (with its checksum) verifies.
fn sfcm_checksum(src_ip: [u8; 4], dst_ip: [u8; 4], udp: &[u8]) -> u16 {
    udp_checksum(src_ip, dst_ip, UDP_TOTAL as u16, &udp[..UDP_TOTAL])
}

impl SfcmUdpFrame {
    /// Parses a whole frame whose UDP destination port must be `port`.
    ///
    /// Checks EtherType, IP version, IHL, total length, the IPv4 header checksum, that the
    /// datagram is not a fragment, protocol UDP, the port, UDP length 72 and the UDP checksum
    /// (unless 0). Bytes after the IPv4 total length (Ethernet padding) are ignored.
    pub fn parse(frame: &[u8], port: u16) -> Result<Self, WireError> {
        let f = EthernetFrame::new_checked(frame)?;
        if f.ethertype() != EtherType::IPV4 {
            return Err(bad("EtherType (expected IPv4)", u64::from(f.ethertype())));
        }
        let ip = f.payload();
        need(ip, IPV4_LEN, "IPv4 header")?;
        if ip[0] >> 4 != 4 {
            return Err(bad("IP version", u64::from(ip[0] >> 4)));
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ihl < IPV4_LEN {
            return Err(bad("IPv4 IHL", ihl as u64));
        }
        need(ip, ihl, "IPv4 options")?;
        let total = usize::from(be16(ip, 2));
        if total != ihl + UDP_TOTAL {
            return Err(bad("IPv4 total length", total as u64));
        }
        need(ip, total, "SFCM datagram")?;
        if ipv4_checksum(&ip[..ihl]) != 0 {
            return Err(bad("IPv4 header checksum", u64::from(be16(ip, 10))));
        }
        if be16(ip, 6) & 0x3fff != 0 {
            return Err(bad("IPv4 fragment (MF or offset)", u64::from(be16(ip, 6))));
        }
        if ip[9] != IP_PROTO_UDP {
            return Err(bad("IP protocol (expected UDP)", u64::from(ip[9])));
        }
        let src_ip = ip4(ip, 12);
        let dst_ip = ip4(ip, 16);
        let udp = &ip[ihl..total];
        if be16(udp, 2) != port {
            return Err(bad("UDP destination port", u64::from(be16(udp, 2))));
        }
        if usize::from(be16(udp, 4)) != UDP_TOTAL {
            return Err(bad("UDP length", u64::from(be16(udp, 4))));
        }
        if be16(udp, 6) != 0 && sfcm_checksum(src_ip, dst_ip, udp) != 0 {
            return Err(bad("UDP checksum", u64::from(be16(udp, 6))));
        }
        Ok(SfcmUdpFrame {
            eth: EthernetRepr {
                dst: f.dst(),
                src: f.src(),
                vlan: f.vlan(),
                ethertype: EtherType::IPV4,
            },
            src_ip,
            dst_ip,
            dscp: ip[1] >> 2,
            ttl: ip[8],
            src_port: be16(udp, 0),
            dst_port: be16(udp, 2),
            msg: Sfcm::parse(&udp[UDP_LEN..])?,
        })
    }

    /// Writes the frame into `buf`; returns its length (106, or 110 with a tag).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.dscp > 63 {
            return Err(bad("DSCP", u64::from(self.dscp)));
        }
        let eth = EthernetRepr {
            ethertype: EtherType::IPV4,
            ..self.eth
        };
        let l3 = eth.header_len();
        let len = l3 + IPV4_LEN + UDP_TOTAL;
        need(buf, len, "SFCM UDP frame buffer")?;
        let l4 = l3 + IPV4_LEN;
        self.msg.emit(&mut buf[l4 + UDP_LEN..len])?;
        eth.emit(buf)?;
        Ipv4UdpHeader {
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            dscp: self.dscp,
            ttl: self.ttl,
            src_port: self.src_port,
            dst_port: self.dst_port,
        }
        .emit(&mut buf[l3..], SFCM_LEN);
        let udp = &mut buf[l4..len];
        let csum = match sfcm_checksum(self.src_ip, self.dst_ip, udp) {
            0 => 0xffff, // 0 on the wire means "no checksum"
            c => c,
        };
        udp[6..8].copy_from_slice(&csum.to_be_bytes());
        Ok(len)
    }
}

/// Writes the SFC message `msg` from the congestion point's port (`from`) to the source it
/// pauses, the offending frame's source MAC (`msg.src_mac`): over UDP/IPv4 to the source
/// address of `msg`'s flow when `udp` (the configured port and the congestion point's own
/// address) is set and the message names a flow, so that it reaches a source beyond this L2
/// segment with that MAC as the next hop; else at layer 2. Returns the frame's length.
pub fn emit_to_source(
    msg: &Sfcm,
    from: MacAddr,
    udp: Option<(u16, [u8; 4])>,
    buf: &mut [u8],
) -> Result<usize, WireError> {
    let eth = EthernetRepr {
        dst: msg.src_mac,
        src: from,
        vlan: None,
        ethertype: EtherType::LOSSLESS,
    };
    match (udp, msg.flow) {
        (Some((port, src_ip)), Some(f)) => SfcmUdpFrame {
            eth,
            src_ip,
            dst_ip: f.src_ip,
            dscp: 48,
            ttl: 64,
            src_port: port,
            dst_port: port,
            msg: *msg,
        }
        .emit(buf),
        _ => SfcmFrame { eth, msg: *msg }.emit(buf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{classify, FrameKind};

    #[test]
    fn a_message_goes_to_its_source_over_udp_when_configured_and_it_names_a_flow() {
        let flow = Ipv4Flow {
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 1, 1],
            protocol: 17,
            src_port: 40000,
            dst_port: 48879,
        };
        let msg = Sfcm {
            priority: 3,
            scope: SfcScope::Class,
            seq: 7,
            pause_ns: 1_000_000,
            sent_ns: 5,
            queue_bytes: 70_000,
            drain_bps: 0,
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            flow: Some(flow),
        };
        let (from, to) = (MacAddr([2, 0, 0, 0, 0, 9]), MacAddr([2, 0, 0, 0, 0, 1]));
        let udp = Some((SFCM_UDP_PORT, [10, 0, 0, 254]));
        let mut buf = [0u8; 128];
        let len = emit_to_source(&msg, from, udp, &mut buf).unwrap();
        assert_eq!(len, SFCM_UDP_FRAME_LEN);
        let f = SfcmUdpFrame::parse(&buf[..len], SFCM_UDP_PORT).unwrap();
        assert_eq!((f.eth.src, f.eth.dst), (from, to));
        assert_eq!((f.src_ip, f.dst_ip), ([10, 0, 0, 254], flow.src_ip));
        assert_eq!(f.msg, msg);
        // L2 without the UDP transport, and with it for a message naming no flow.
        for (udp, flow) in [(None, Some(flow)), (udp, None)] {
            let msg = Sfcm { flow, ..msg };
            let len = emit_to_source(&msg, from, udp, &mut buf).unwrap();
            assert_eq!(len, SFCM_FRAME_LEN);
            let f = SfcmFrame::parse(&buf[..len]).unwrap();
            assert_eq!((f.eth.src, f.eth.dst, f.msg), (from, to, msg));
        }
    }

    #[test]
    fn flow_of_a_test_frame() {
        let mut buf = [0u8; 100];
        let f = crate::wire::TestFrame::sample(100);
        f.emit(&mut buf).unwrap();
        assert_eq!(
            Ipv4Flow::of_frame(&buf),
            Some(Ipv4Flow {
                src_ip: [10, 0, 0, 1],
                dst_ip: [10, 0, 0, 2],
                protocol: 17,
                src_port: 40000,
                dst_port: 48879
            })
        );
        assert_eq!(Ipv4Flow::of_frame(&buf[..30]), None);
        buf[16] = 0x88; // not IPv4
        assert_eq!(Ipv4Flow::of_frame(&buf), None);
    }
    use crate::wire::VlanTag;
    use proptest::prelude::*;

    const CP_MAC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0xcc]);
    const SRC_MAC: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);

    /// A class-scope SFCM without a flow, byte by byte: priority 3, seq 7, PI 100 us,
    /// sent at 1 s, 150,000 bytes queued, draining at 10 Gbit/s, offending source 02:..:01.
    const L2_CLASS: [u8; 78] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // dst: the source being paused
        0x02, 0x00, 0x00, 0x00, 0x00, 0xcc, // src: the congestion point
        0x88, 0xb5, // EtherType
        0x01, 0x01, 0x00, 0x03, // version 1, type SFCM, flags 0, priority 3
        0x00, 0x00, 0x00, 0x07, // seq 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xa0, // PI 100,000 ns
        0x00, 0x00, 0x00, 0x00, 0x3b, 0x9a, 0xca, 0x00, // sent 1,000,000,000 ns
        0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x49, 0xf0, // queue 150,000 bytes
        0x00, 0x00, 0x00, 0x02, 0x54, 0x0b, 0xe4, 0x00, // drain 10,000,000,000 bit/s
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // offending source MAC
        0x00, 0x00, // protocol, reserved
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // no flow
        0, 0, 0, 0, // reserved
    ];

    fn class_msg() -> Sfcm {
        Sfcm {
            priority: 3,
            scope: SfcScope::Class,
            seq: 7,
            pause_ns: 100_000,
            sent_ns: 1_000_000_000,
            queue_bytes: 150_000,
            drain_bps: 10_000_000_000,
            src_mac: SRC_MAC,
            flow: None,
        }
    }

    fn flow() -> Ipv4Flow {
        Ipv4Flow {
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            protocol: 17,
            src_port: 40000,
            dst_port: 48879,
        }
    }

    fn flow_msg() -> Sfcm {
        Sfcm {
            scope: SfcScope::Flow,
            flow: Some(flow()),
            ..class_msg()
        }
    }

    fn udp_frame(msg: Sfcm) -> SfcmUdpFrame {
        SfcmUdpFrame {
            eth: EthernetRepr {
                dst: MacAddr([2, 0, 0, 0, 0, 0xfe]),
                src: CP_MAC,
                vlan: None,
                ethertype: EtherType::IPV4,
            },
            src_ip: [10, 0, 9, 9],
            dst_ip: [10, 0, 0, 1],
            dscp: 48,
            ttl: 64,
            src_port: 50000,
            dst_port: SFCM_UDP_PORT,
            msg,
        }
    }

    #[test]
    fn parses_reference_bytes_and_re_emits_them() {
        let f = SfcmFrame::parse(&L2_CLASS).unwrap();
        assert_eq!(f.msg, class_msg());
        assert_eq!((f.eth.dst, f.eth.src), (SRC_MAC, CP_MAC));
        assert_eq!(f.eth.ethertype, EtherType::LOSSLESS);
        let mut out = [0xaau8; 100];
        assert_eq!(f.emit(&mut out).unwrap(), SFCM_FRAME_LEN);
        assert_eq!(&out[..SFCM_FRAME_LEN], &L2_CLASS[..]);
        // The cable's classifier sees it as an SFC message, not a credit update.
        assert_eq!(classify(&L2_CLASS).kind, FrameKind::Sfcm);
        // Ethernet padding after the body is ignored.
        let mut padded = L2_CLASS.to_vec();
        padded.extend_from_slice(&[0; 20]);
        assert_eq!(SfcmFrame::parse(&padded).unwrap(), f);
    }

    #[test]
    fn flow_scope_layout_and_tagged_round_trip() {
        let mut body = [0u8; SFCM_LEN];
        flow_msg().emit(&mut body).unwrap();
        assert_eq!(body[2], FLAG_FLOW_SCOPE | FLAG_IPV4_FLOW);
        assert_eq!(&body[46..48], &[17, 0]);
        assert_eq!(&body[48..56], &[10, 0, 0, 1, 10, 0, 0, 2]);
        assert_eq!(&body[56..60], &[0x9c, 0x40, 0xbe, 0xef]);
        assert_eq!(Sfcm::parse(&body).unwrap(), flow_msg());
        // Class scope may still name the flow.
        let named = Sfcm {
            scope: SfcScope::Class,
            ..flow_msg()
        };
        named.emit(&mut body).unwrap();
        assert_eq!(body[2], FLAG_IPV4_FLOW);
        assert_eq!(Sfcm::parse(&body).unwrap(), named);

        let f = SfcmFrame {
            eth: EthernetRepr {
                dst: SRC_MAC,
                src: CP_MAC,
                vlan: Some(VlanTag {
                    pcp: 7,
                    dei: false,
                    vid: 0,
                }),
                ethertype: EtherType::LOSSLESS,
            },
            msg: flow_msg(),
        };
        let mut out = [0u8; 82];
        assert_eq!(f.emit(&mut out).unwrap(), 82);
        assert_eq!(&out[12..18], &[0x81, 0x00, 0xe0, 0x00, 0x88, 0xb5]);
        assert_eq!(SfcmFrame::parse(&out).unwrap(), f);
        assert_eq!(classify(&out).kind, FrameKind::Sfcm, "inside the tag");
    }

    #[test]
    fn udp_round_trip_with_checksums() {
        let f = udp_frame(flow_msg());
        let mut out = [0u8; 128];
        let n = f.emit(&mut out).unwrap();
        assert_eq!(n, SFCM_UDP_FRAME_LEN);
        assert_eq!(&out[12..14], &[0x08, 0x00]);
        // IPv4 header: 0x45, DSCP 48 (CS6), total length 92, DF, TTL 64, UDP.
        assert_eq!(&out[14..24], &[0x45, 0xc0, 0, 92, 0, 0, 0x40, 0, 64, 17]);
        assert_eq!(ipv4_checksum(&out[14..34]), 0, "IPv4 header verifies");
        assert_eq!(&out[34..40], &[0xc3, 0x50, 0x88, 0xb5, 0, 72]);
        assert_ne!(&out[40..42], &[0, 0], "UDP checksum is filled in");
        assert_eq!(sfcm_checksum([10, 0, 9, 9], [10, 0, 0, 1], &out[34..n]), 0);
        assert_eq!(&out[42..44], &[SFCM_VERSION, SFCM_MSG_TYPE]);
        assert_eq!(SfcmUdpFrame::parse(&out[..n], SFCM_UDP_PORT).unwrap(), f);
        // Padding after the datagram is ignored; a zero UDP checksum means "none".
        let mut padded = out;
        padded[40..42].fill(0);
        assert_eq!(SfcmUdpFrame::parse(&padded, SFCM_UDP_PORT).unwrap(), f);
        // Another port is not ours.
        assert_eq!(
            SfcmUdpFrame::parse(&out[..n], 9999),
            Err(WireError::BadValue {
                field: "UDP destination port",
                value: u64::from(SFCM_UDP_PORT)
            })
        );
        // Tagged.
        let tagged = SfcmUdpFrame {
            eth: EthernetRepr {
                vlan: Some(VlanTag {
                    pcp: 6,
                    dei: false,
                    vid: 12,
                }),
                ..f.eth
            },
            ..f
        };
        assert_eq!(tagged.emit(&mut out).unwrap(), SFCM_UDP_FRAME_LEN + 4);
        assert_eq!(
            SfcmUdpFrame::parse(&out[..SFCM_UDP_FRAME_LEN + 4], SFCM_UDP_PORT).unwrap(),
            tagged
        );
    }

    #[test]
    fn ipv4_options_are_skipped() {
        let mut out = [0u8; SFCM_UDP_FRAME_LEN];
        udp_frame(class_msg()).emit(&mut out).unwrap();
        // Rebuild with IHL 6 (one 4-byte NOP option).
        let mut v = out[..34].to_vec();
        v.extend_from_slice(&[1, 1, 1, 1]);
        v.extend_from_slice(&out[34..]);
        v[14] = 0x46;
        v[16..18].copy_from_slice(&96u16.to_be_bytes());
        v[24..26].fill(0);
        let c = ipv4_checksum(&v[14..38]);
        v[24..26].copy_from_slice(&c.to_be_bytes());
        let f = SfcmUdpFrame::parse(&v, SFCM_UDP_PORT).unwrap();
        assert_eq!(f.msg, class_msg());
    }

    #[test]
    fn every_truncation_is_an_error() {
        for n in 0..SFCM_FRAME_LEN {
            assert!(
                matches!(
                    SfcmFrame::parse(&L2_CLASS[..n]),
                    Err(WireError::Truncated { .. })
                ),
                "len {n}"
            );
        }
        for n in 0..SFCM_LEN {
            assert!(Sfcm::parse(&L2_CLASS[14..14 + n]).is_err(), "body len {n}");
        }
        let mut out = [0u8; SFCM_UDP_FRAME_LEN];
        udp_frame(flow_msg()).emit(&mut out).unwrap();
        for n in 0..SFCM_UDP_FRAME_LEN {
            assert!(
                matches!(
                    SfcmUdpFrame::parse(&out[..n], SFCM_UDP_PORT),
                    Err(WireError::Truncated { .. })
                ),
                "udp len {n}"
            );
        }
        // Buffers too small to emit into.
        assert!(SfcmFrame::parse(&L2_CLASS)
            .unwrap()
            .emit(&mut [0u8; 77])
            .is_err());
        assert!(udp_frame(class_msg()).emit(&mut [0u8; 105]).is_err());
        assert!(class_msg().emit(&mut [0u8; 63]).is_err());
    }

    fn l2_field_error(at: usize, value: u8) -> WireError {
        let mut b = L2_CLASS;
        b[at] = value;
        SfcmFrame::parse(&b).unwrap_err()
    }

    fn field(e: WireError) -> &'static str {
        match e {
            WireError::BadValue { field, .. } => field,
            other => panic!("expected a bad value, got {other:?}"),
        }
    }

    #[test]
    fn bad_values_name_their_field() {
        assert_eq!(
            l2_field_error(14, 2),
            WireError::BadValue {
                field: "SFCM version",
                value: 2
            }
        );
        assert_eq!(
            l2_field_error(15, 0x02),
            WireError::BadValue {
                field: "SFCM message type",
                value: 2
            }
        );
        assert_eq!(
            field(l2_field_error(16, 0x04)),
            "SFCM flags (reserved bits)"
        );
        assert_eq!(
            field(l2_field_error(16, FLAG_FLOW_SCOPE)),
            "SFCM flags (flow scope without an IPv4 flow)"
        );
        assert_eq!(field(l2_field_error(17, 8)), "SFCM priority");
        assert_eq!(field(l2_field_error(14 + 47, 1)), "SFCM reserved bytes");
        assert_eq!(field(l2_field_error(14 + 63, 1)), "SFCM reserved bytes");
        for at in [46, 48, 55, 59] {
            assert_eq!(
                field(l2_field_error(14 + at, 1)),
                "SFCM flow bytes (must be zero without the IPv4 flag)",
                "offset {at}"
            );
        }
        assert_eq!(
            field(l2_field_error(13, 0xb6)),
            "EtherType (expected 0x88B5)"
        );
        // Emit refuses what parse would refuse.
        let mut buf = [0u8; 64];
        let e = Sfcm {
            priority: 8,
            ..class_msg()
        }
        .emit(&mut buf);
        assert_eq!(field(e.unwrap_err()), "SFCM priority");
        let e = Sfcm {
            scope: SfcScope::Flow,
            ..class_msg()
        }
        .emit(&mut buf);
        assert_eq!(
            field(e.unwrap_err()),
            "SFCM flags (flow scope without an IPv4 flow)"
        );
        let e = SfcmUdpFrame {
            dscp: 64,
            ..udp_frame(class_msg())
        }
        .emit(&mut [0u8; 128]);
        assert_eq!(field(e.unwrap_err()), "DSCP");
    }

    #[test]
    fn bad_udp_headers_are_rejected() {
        let mut good = [0u8; SFCM_UDP_FRAME_LEN];
        udp_frame(flow_msg()).emit(&mut good).unwrap();
        let cases: [(usize, u8, &str); 9] = [
            (12, 0x86, "EtherType (expected IPv4)"),
            (14, 0x65, "IP version"),
            (14, 0x44, "IPv4 IHL"),
            (17, 93, "IPv4 total length"),
            (22, 65, "IPv4 header checksum"),
            (23, 6, "IPv4 header checksum"),
            (37, 0xb6, "UDP destination port"),
            (39, 73, "UDP length"),
            (60, 0xff, "UDP checksum"),
        ];
        for (at, v, name) in cases {
            let mut b = good;
            b[at] = v;
            assert_eq!(
                field(SfcmUdpFrame::parse(&b, SFCM_UDP_PORT).unwrap_err()),
                name,
                "byte {at}"
            );
        }
        // Fragment and wrong protocol with a valid header checksum.
        for (at, v, name) in [
            (20, 0x20, "IPv4 fragment (MF or offset)"),
            (21, 0x01, "IPv4 fragment (MF or offset)"),
            (23, 6, "IP protocol (expected UDP)"),
        ] {
            let mut b = good;
            b[at] = v;
            b[24..26].fill(0);
            let c = ipv4_checksum(&b[14..34]);
            b[24..26].copy_from_slice(&c.to_be_bytes());
            assert_eq!(
                field(SfcmUdpFrame::parse(&b, SFCM_UDP_PORT).unwrap_err()),
                name
            );
        }
        // A bad body inside a good datagram (checksum disabled) is still caught.
        let mut b = good;
        b[40..42].fill(0);
        b[43] = 0x02;
        assert_eq!(
            field(SfcmUdpFrame::parse(&b, SFCM_UDP_PORT).unwrap_err()),
            "SFCM message type"
        );
    }

    fn arb_flow() -> impl Strategy<Value = Ipv4Flow> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            any::<u16>(),
            any::<u16>(),
        )
            .prop_map(|(src_ip, dst_ip, protocol, src_port, dst_port)| Ipv4Flow {
                src_ip,
                dst_ip,
                protocol,
                src_port,
                dst_port,
            })
    }

    fn arb_sfcm() -> impl Strategy<Value = Sfcm> {
        (
            0u8..8,
            any::<bool>(),
            any::<u32>(),
            any::<[u64; 4]>(),
            any::<[u8; 6]>(),
            proptest::option::of(arb_flow()),
        )
            .prop_map(|(priority, flow_scope, seq, v, mac, flow)| Sfcm {
                priority,
                scope: if flow_scope && flow.is_some() {
                    SfcScope::Flow
                } else {
                    SfcScope::Class
                },
                seq,
                pause_ns: v[0],
                sent_ns: v[1],
                queue_bytes: v[2],
                drain_bps: v[3],
                src_mac: MacAddr(mac),
                flow,
            })
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160), port in any::<u16>()) {
            let _ = Sfcm::parse(&bytes);
            let _ = SfcmFrame::parse(&bytes);
            let _ = SfcmUdpFrame::parse(&bytes, port);
        }

        #[test]
        fn accepted_bodies_re_emit_identically(mut bytes in proptest::collection::vec(any::<u8>(), 64)) {
            // Make the header plausible so that most inputs are accepted.
            bytes[0] = SFCM_VERSION;
            bytes[1] = SFCM_MSG_TYPE;
            bytes[2] &= FLAG_FLOW_SCOPE | FLAG_IPV4_FLOW;
            bytes[3] &= 7;
            bytes[47] = 0;
            bytes[60..64].fill(0);
            if bytes[2] & FLAG_IPV4_FLOW == 0 {
                bytes[46..60].fill(0);
            }
            if let Ok(m) = Sfcm::parse(&bytes) {
                let mut out = [0u8; SFCM_LEN];
                m.emit(&mut out).unwrap();
                prop_assert_eq!(&out[..], &bytes[..]);
            }
        }

        #[test]
        fn emit_parse_round_trips(msg in arb_sfcm(), tag in proptest::option::of(0u8..8), port in any::<u16>()) {
            let eth = EthernetRepr {
                dst: SRC_MAC,
                src: CP_MAC,
                vlan: tag.map(|pcp| VlanTag { pcp, dei: false, vid: 0 }),
                ethertype: EtherType::LOSSLESS,
            };
            let l2 = SfcmFrame { eth, msg };
            let mut buf = [0u8; 128];
            let n = l2.emit(&mut buf).unwrap();
            prop_assert_eq!(SfcmFrame::parse(&buf[..n]).unwrap(), l2);

            let udp = SfcmUdpFrame {
                eth: EthernetRepr { ethertype: EtherType::IPV4, ..eth },
                dst_port: port,
                ..udp_frame(msg)
            };
            let n = udp.emit(&mut buf).unwrap();
            prop_assert_eq!(SfcmUdpFrame::parse(&buf[..n], port).unwrap(), udp);
        }
    }
}
