//! IPv4 (no options, don't-fragment) and UDP headers, as our own UDP messages (test traffic,
//! SFC messages over UDP) emit them, and the Internet checksum.

/// Length of an IPv4 header without options.
pub const IPV4_LEN: usize = 20;
/// Length of a UDP header.
pub const UDP_LEN: usize = 8;

/// The IPv4 and UDP header fields of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4UdpHeader {
    /// Source address.
    pub src_ip: [u8; 4],
    /// Destination address.
    pub dst_ip: [u8; 4],
    /// DSCP (6 bits).
    pub dscp: u8,
    /// Time to live.
    pub ttl: u8,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
}

impl Ipv4UdpHeader {
    /// Writes both headers (28 bytes) at the start of `buf` for a UDP payload of `payload_len`
    /// bytes, with the IPv4 header checksum and a zero UDP checksum (optional over IPv4).
    /// The caller has checked that `buf` holds the headers and that the lengths fit 16 bits.
    pub fn emit(&self, buf: &mut [u8], payload_len: usize) {
        let udp_len = (UDP_LEN + payload_len) as u16;
        let ip = &mut buf[..IPV4_LEN];
        ip[0] = 0x45;
        ip[1] = self.dscp << 2;
        ip[2..4].copy_from_slice(&(IPV4_LEN as u16 + udp_len).to_be_bytes());
        ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]); // id 0, don't fragment
        ip[8] = self.ttl;
        ip[9] = IP_PROTO_UDP;
        ip[10..12].fill(0);
        ip[12..16].copy_from_slice(&self.src_ip);
        ip[16..20].copy_from_slice(&self.dst_ip);
        let csum = ipv4_checksum(ip);
        ip[10..12].copy_from_slice(&csum.to_be_bytes());
        let udp = &mut buf[IPV4_LEN..IPV4_LEN + UDP_LEN];
        udp[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        udp[6..8].fill(0);
    }
}

/// IP protocol number of UDP.
pub const IP_PROTO_UDP: u8 = 17;

/// Internet checksum (RFC 1071) over `data`.
pub fn ipv4_checksum(data: &[u8]) -> u16 {
    !fold(sum16(data))
}

/// The UDP checksum (RFC 768) of a datagram of `udp_len` bytes from `src_ip` to `dst_ip`:
/// the Internet checksum of the pseudo-header and `summed`, which is the UDP header (its
/// checksum field as it stands) and the payload, or as much of the payload as is not zero
/// (zeros add nothing). 0 when a datagram carrying its checksum verifies.
pub fn udp_checksum(src_ip: [u8; 4], dst_ip: [u8; 4], udp_len: u16, summed: &[u8]) -> u16 {
    let pseudo = sum16(&src_ip) + sum16(&dst_ip) + u32::from(IP_PROTO_UDP) + u32::from(udp_len);
    !fold(pseudo + sum16(summed))
}

/// The 16-bit big-endian words of `data` added up (an odd last byte padded with zero).
fn sum16(data: &[u8]) -> u32 {
    data.chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum()
}

/// `sum` folded into 16 bits with end-around carry.
fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_checksum() {
        // Example header from RFC 1071 discussions (checksum field zeroed): 0xb861.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ipv4_checksum(&h), 0xb861);
    }

    #[test]
    fn headers_verify() {
        let mut b = [0u8; 28];
        Ipv4UdpHeader {
            src_ip: [10, 0, 0, 1],
            dst_ip: [10, 0, 0, 2],
            dscp: 26,
            ttl: 64,
            src_port: 1,
            dst_port: 2,
        }
        .emit(&mut b, 100);
        assert_eq!(ipv4_checksum(&b[..20]), 0);
        assert_eq!(u16::from_be_bytes([b[2], b[3]]), 128);
        assert_eq!(u16::from_be_bytes([b[24], b[25]]), 108);
        assert_eq!(b[1], 26 << 2);
    }
}
