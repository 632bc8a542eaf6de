//! Test traffic: Ethernet + optional 802.1Q tag (PCP = priority) + IPv4 + UDP, with a payload
//! that identifies the frame.
//!
//! Payload layout (our own format, big-endian), right after the UDP header:
//! ```text
//! 0      4        8              16             24
//! | "LSLT" | flow id | sequence number | TX timestamp (ns, CLOCK_MONOTONIC) | zero fill to frame size
//! ```
//!
//! The UDP checksum is the real one (RFC 768, over the pseudo-header, the UDP header and the
//! payload), so a frame damaged on its way (`lossless cable --corrupt`, a bad link) is told
//! from a good one instead of landing in the sequence accounting as a wild sequence number or
//! flow id. It is cheap both ways because the fill is zero: a zero adds nothing to the sum, so
//! [`TestFrame::stamp`] sums only the headers and the test header for each frame, and
//! [`TestFrameView::parse`] checks that much (a flipped bit in the fill, which no count reads,
//! is not seen). A checksum of 0 means none was computed (RFC 768) and is not checked.

use super::{
    be16,
    ipv4::{udp_checksum, Ipv4UdpHeader, IPV4_LEN, IP_PROTO_UDP, UDP_LEN},
    need, EtherType, EthernetFrame, EthernetRepr, WireError,
};

/// Magic that opens every test payload.
pub const MAGIC: [u8; 4] = *b"LSLT";
/// Payload bytes the test header occupies.
pub const PAYLOAD_HEADER_LEN: usize = 24;
/// UDP destination port of test traffic unless told otherwise (`lossless gen`/`sink`
/// `--udp-port`; the self-test's frames).
pub const DEFAULT_TEST_UDP_PORT: u16 = 48879;

/// Everything needed to build one test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestFrame {
    /// Ethernet header; `vlan.pcp` carries the priority.
    pub eth: EthernetRepr,
    /// IPv4 source address.
    pub src_ip: [u8; 4],
    /// IPv4 destination address.
    pub dst_ip: [u8; 4],
    /// DSCP (6 bits) for DSCP-trusting classifiers.
    pub dscp: u8,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port (the XDP program steers test traffic by it).
    pub dst_port: u16,
    /// Flow identifier.
    pub flow: u32,
    /// Sequence number within the flow, from 0.
    pub seq: u64,
    /// Transmit timestamp in nanoseconds.
    pub tx_ns: u64,
    /// Total frame length without FCS.
    pub len: usize,
}

impl TestFrame {
    /// Smallest frame that holds the headers and the test payload header.
    pub fn min_len(tagged: bool) -> usize {
        14 + if tagged { 4 } else { 0 } + IPV4_LEN + UDP_LEN + PAYLOAD_HEADER_LEN
    }

    /// Writes the frame into `buf` and returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let tagged = self.eth.vlan.is_some();
        if self.len < Self::min_len(tagged) || self.len > u16::MAX as usize {
            return Err(WireError::BadValue {
                field: "test frame length",
                value: self.len as u64,
            });
        }
        need(buf, self.len, "test frame buffer")?;
        let frame = &mut buf[..self.len];
        let eth = EthernetRepr {
            ethertype: EtherType::IPV4,
            ..self.eth
        };
        let l3 = eth.emit(frame)?;
        Ipv4UdpHeader {
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            dscp: self.dscp,
            ttl: 64,
            src_port: self.src_port,
            dst_port: self.dst_port,
        }
        .emit(&mut frame[l3..], self.len - l3 - IPV4_LEN - UDP_LEN);
        let l4 = l3 + IPV4_LEN;
        let p = l4 + UDP_LEN;
        frame[p..p + 4].copy_from_slice(&MAGIC);
        frame[p + 4..p + 8].copy_from_slice(&self.flow.to_be_bytes());
        frame[p + 8..p + 16].copy_from_slice(&self.seq.to_be_bytes());
        frame[p + 16..p + 24].copy_from_slice(&self.tx_ns.to_be_bytes());
        frame[p + PAYLOAD_HEADER_LEN..].fill(0);
        set_udp_checksum(&mut frame[l3..]);
        Ok(self.len)
    }

    /// Rewrites in place what differs between the frames of a generator's flows, in a frame
    /// emitted from `self` or from a template that differs from it only there: the UDP source
    /// port and flow id (`self`'s), the sequence number and timestamp, and the UDP checksum.
    /// So one emitted image serves every flow.
    pub fn stamp(&self, frame: &mut [u8], seq: u64, tx_ns: u64) {
        let l4 = self.eth.header_len() + IPV4_LEN;
        frame[l4..l4 + 2].copy_from_slice(&self.src_port.to_be_bytes());
        let p = l4 + UDP_LEN;
        frame[p + 4..p + 8].copy_from_slice(&self.flow.to_be_bytes());
        frame[p + 8..p + 16].copy_from_slice(&seq.to_be_bytes());
        frame[p + 16..p + 24].copy_from_slice(&tx_ns.to_be_bytes());
        set_udp_checksum(&mut frame[self.eth.header_len()..]);
    }
}

#[cfg(test)]
impl TestFrame {
    /// A priority-3 test frame of `len` bytes (flow 7), the fixture of unit tests across the
    /// crate.
    pub(crate) fn sample(len: usize) -> TestFrame {
        use super::{MacAddr, VlanTag};
        TestFrame {
            eth: EthernetRepr {
                dst: MacAddr([2, 0, 0, 0, 0, 2]),
                src: MacAddr([2, 0, 0, 0, 0, 1]),
                vlan: Some(VlanTag {
                    pcp: 3,
                    dei: false,
                    vid: 0,
                }),
                ethertype: EtherType::IPV4,
            },
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            dscp: 26,
            src_port: 40000,
            dst_port: 48879,
            flow: 7,
            seq: 0x0102030405,
            tx_ns: 99,
            len,
        }
    }
}

/// The UDP checksum of the test frame's IPv4 packet `ip` (20-byte header), the checksum
/// field as it stands, summed over the headers and the test header: its fill is zero. 0 when
/// the datagram verifies.
fn test_checksum(ip: &[u8]) -> u16 {
    let udp = &ip[IPV4_LEN..IPV4_LEN + UDP_LEN + PAYLOAD_HEADER_LEN];
    let addr = |at: usize| [ip[at], ip[at + 1], ip[at + 2], ip[at + 3]];
    udp_checksum(addr(12), addr(16), be16(udp, 4), udp)
}

/// Writes the UDP checksum of the test frame's IPv4 packet `ip` (its fill zero).
fn set_udp_checksum(ip: &mut [u8]) {
    let at = IPV4_LEN + 6;
    ip[at..at + 2].fill(0);
    // 0 would say "no checksum": its ones'-complement twin 0xffff is sent instead.
    let c = match test_checksum(ip) {
        0 => 0xffff,
        c => c,
    };
    ip[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// What a receiver reads from a test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestFrameView {
    /// 802.1Q PCP, if tagged.
    pub pcp: Option<u8>,
    /// UDP destination port.
    pub dst_port: u16,
    /// Flow identifier.
    pub flow: u32,
    /// Sequence number.
    pub seq: u64,
    /// Transmit timestamp in nanoseconds.
    pub tx_ns: u64,
}

impl TestFrameView {
    /// Parses a whole frame; anything that is not a well-formed test frame is an error.
    pub fn parse(frame: &[u8]) -> Result<Self, WireError> {
        let eth = EthernetFrame::new_checked(frame)?;
        if eth.ethertype() != EtherType::IPV4 {
            return Err(WireError::BadValue {
                field: "EtherType (expected IPv4)",
                value: u64::from(eth.ethertype()),
            });
        }
        let ip = eth.payload();
        need(ip, IPV4_LEN, "IPv4 header")?;
        if ip[0] >> 4 != 4 {
            return Err(WireError::BadValue {
                field: "IP version",
                value: u64::from(ip[0] >> 4),
            });
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        if ihl < IPV4_LEN {
            return Err(WireError::BadValue {
                field: "IPv4 IHL",
                value: ihl as u64,
            });
        }
        if ip[9] != IP_PROTO_UDP {
            return Err(WireError::BadValue {
                field: "IP protocol (expected UDP)",
                value: u64::from(ip[9]),
            });
        }
        need(ip, ihl + UDP_LEN + PAYLOAD_HEADER_LEN, "test payload")?;
        let udp = &ip[ihl..];
        let p = &udp[UDP_LEN..];
        if ihl == IPV4_LEN && be16(udp, 6) != 0 && test_checksum(ip) != 0 {
            return Err(WireError::Damaged {
                what: "UDP checksum",
            });
        }
        if p[0..4] != MAGIC {
            return Err(WireError::BadValue {
                field: "test payload magic",
                value: u64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
            });
        }
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&p[o..o + 8]);
            u64::from_be_bytes(b)
        };
        Ok(TestFrameView {
            pcp: eth.vlan().map(|v| v.pcp),
            dst_port: be16(udp, 2),
            flow: u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
            seq: u64_at(8),
            tx_ns: u64_at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv4::ipv4_checksum;

    /// The UDP checksum is RFC 768's over the whole datagram (summed here over every byte,
    /// the fill too), after emit and after each stamp; a bit flipped in the headers or the
    /// test header makes the frame damaged, one in the fill (which no count reads) does not.
    #[test]
    fn the_udp_checksum_is_real_and_damage_is_told() {
        let full = |frame: &[u8]| -> u16 {
            let ip = &frame[18..];
            let udp_len = usize::from(u16::from_be_bytes([ip[24], ip[25]]));
            let mut pseudo = ip[12..20].to_vec();
            pseudo.extend_from_slice(&[0, 17]);
            pseudo.extend_from_slice(&ip[24..26]);
            pseudo.extend_from_slice(&ip[20..20 + udp_len]);
            ipv4_checksum(&pseudo)
        };
        let f = TestFrame::sample(1000);
        let mut buf = vec![0u8; 1000];
        f.emit(&mut buf).unwrap();
        assert_eq!(full(&buf), 0, "checks to zero over everything");
        f.stamp(&mut buf, u64::MAX - 3, 123_456_789);
        assert_eq!(full(&buf), 0, "after a stamp");
        let v = TestFrameView::parse(&buf).unwrap();
        assert_eq!((v.seq, v.tx_ns), (u64::MAX - 3, 123_456_789));
        for bit in [
            8 * (18 + 12) + 3,       // source address (pseudo-header)
            8 * (18 + 20 + 1),       // UDP source port
            8 * (18 + 28 + 4) + 5,   // flow id
            8 * (18 + 28 + 8) + 40,  // sequence number
            8 * (18 + 28 + 16) + 60, // TX time
        ] {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(TestFrameView::parse(&bad), Err(WireError::Damaged { .. })),
                "bit {bit}"
            );
        }
        let mut fill = buf.clone();
        fill[900] ^= 4;
        assert!(TestFrameView::parse(&fill).is_ok(), "the fill is not read");
        // A checksum of 0 says none was computed: not checked.
        let mut none = buf.clone();
        none[18 + 26..18 + 28].fill(0);
        none[18 + 28 + 8] ^= 1;
        assert!(TestFrameView::parse(&none).is_ok());
    }

    #[test]
    fn round_trip_and_stamp() {
        let f = TestFrame::sample(1000);
        let mut buf = vec![0xeeu8; 1500];
        assert_eq!(f.emit(&mut buf).unwrap(), 1000);
        let v = TestFrameView::parse(&buf[..1000]).unwrap();
        assert_eq!(
            (v.pcp, v.flow, v.seq, v.tx_ns, v.dst_port),
            (Some(3), 7, 0x0102030405, 99, 48879)
        );
        f.stamp(&mut buf, 42, 1_000_000);
        let v = TestFrameView::parse(&buf[..1000]).unwrap();
        assert_eq!((v.seq, v.tx_ns), (42, 1_000_000));
        // Another flow's template stamps its own flow into the same image: the frame is the
        // one that template emits.
        let other = TestFrame {
            flow: 9,
            src_port: 50_000,
            ..f
        };
        other.stamp(&mut buf, 43, 2_000_000);
        let mut direct = vec![0u8; 1000];
        TestFrame {
            seq: 43,
            tx_ns: 2_000_000,
            ..other
        }
        .emit(&mut direct)
        .unwrap();
        assert_eq!(buf[..1000], direct[..]);
        // The IPv4 header checksums to zero when verified.
        assert_eq!(ipv4_checksum(&buf[18..38]), 0);
        assert_eq!(u16::from_be_bytes([buf[20], buf[21]]), 1000 - 18);
    }

    #[test]
    fn rejects_bad_and_truncated() {
        let f = TestFrame::sample(100);
        let mut buf = vec![0u8; 100];
        f.emit(&mut buf).unwrap();
        for n in 0..TestFrame::min_len(true) {
            assert!(TestFrameView::parse(&buf[..n]).is_err(), "len {n}");
        }
        let mut bad = buf.clone();
        bad[18 + 28] = b'X';
        assert!(TestFrameView::parse(&bad).is_err());
        let mut bad = buf.clone();
        bad[18] = 0x41; // IHL 4
        assert!(TestFrameView::parse(&bad).is_err());
        assert!(TestFrame::sample(40).emit(&mut buf).is_err());
        assert!(TestFrame::sample(200).emit(&mut buf).is_err());
    }
}
