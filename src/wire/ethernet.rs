//! Ethernet II header with at most one 802.1Q / 802.1ad tag.

use super::{be16, need, MacAddr, WireError};

/// The frame check sequence a frame carries on the wire after its data (never seen by
/// software: the NIC adds and strips it).
pub const FCS_OCTETS: u64 = 4;

/// EtherType values the daemon knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtherType;

impl EtherType {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service VLAN tag.
    pub const QINQ: u16 = 0x88A8;
    /// MAC control: 802.3x PAUSE and 802.1Qbb PFC.
    pub const MAC_CONTROL: u16 = 0x8808;
    /// IEEE 1588 (PTP) over Ethernet.
    pub const PTP: u16 = 0x88F7;
    /// LLDP.
    pub const LLDP: u16 = 0x88CC;
    /// IEEE 802 local experimental EtherType 1: our SFC and credit messages.
    pub const LOSSLESS: u16 = 0x88B5;
}

/// An 802.1Q tag control field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VlanTag {
    /// Priority code point, 0–7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0–4095 (0 = priority-tagged only).
    pub vid: u16,
}

impl VlanTag {
    fn from_tci(tci: u16) -> Self {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    fn tci(&self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }
}

/// A zero-copy view of an Ethernet frame whose header has been length-checked.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buf: T,
    header_len: usize,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps `buf`, checking that the header (and a tag, if present) fits.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        need(b, 14, "Ethernet header")?;
        let outer = be16(b, 12);
        let header_len = if outer == EtherType::VLAN || outer == EtherType::QINQ {
            need(b, 18, "802.1Q tag")?;
            18
        } else {
            14
        };
        Ok(EthernetFrame { buf, header_len })
    }

    /// Wraps `buf` whose header [`Self::new_checked`] (through [`super::classify`]) already
    /// found `header_len` long: the view again, without checking again.
    #[inline]
    pub(super) fn checked_before(buf: T, header_len: usize) -> Self {
        debug_assert!(buf.as_ref().len() >= header_len && (header_len == 14 || header_len == 18));
        EthernetFrame { buf, header_len }
    }

    /// Destination address.
    pub fn dst(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buf.as_ref()[0..6]);
        MacAddr(m)
    }

    /// Source address.
    pub fn src(&self) -> MacAddr {
        let mut m = [0; 6];
        m.copy_from_slice(&self.buf.as_ref()[6..12]);
        MacAddr(m)
    }

    /// The tag, if the frame carries one.
    pub fn vlan(&self) -> Option<VlanTag> {
        (self.header_len == 18).then(|| VlanTag::from_tci(be16(self.buf.as_ref(), 14)))
    }

    /// The EtherType of the payload (inside the tag, if any).
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), self.header_len - 2)
    }

    /// Length of the header including the tag.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// Bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len..]
    }
}

/// The parsed form of an Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    /// Destination address.
    pub dst: MacAddr,
    /// Source address.
    pub src: MacAddr,
    /// Optional 802.1Q tag (always emitted as TPID 0x8100).
    pub vlan: Option<VlanTag>,
    /// Payload EtherType.
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Parses the header of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let f = EthernetFrame::new_checked(buf)?;
        Ok(EthernetRepr {
            dst: f.dst(),
            src: f.src(),
            vlan: f.vlan(),
            ethertype: f.ethertype(),
        })
    }

    /// Header length this repr emits.
    pub fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            18
        } else {
            14
        }
    }

    /// Writes the header to the start of `buf` and returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.header_len();
        need(buf, len, "Ethernet header buffer")?;
        buf[0..6].copy_from_slice(&self.dst.0);
        buf[6..12].copy_from_slice(&self.src.0);
        let mut at = 12;
        if let Some(tag) = self.vlan {
            buf[12..14].copy_from_slice(&EtherType::VLAN.to_be_bytes());
            buf[14..16].copy_from_slice(&tag.tci().to_be_bytes());
            at = 16;
        }
        buf[at..at + 2].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAGGED: [u8; 18] = [
        0x02, 0, 0, 0, 0, 2, // dst
        0x02, 0, 0, 0, 0, 1, // src
        0x81, 0x00, 0x60, 0x0a, // PCP 3, VID 10
        0x08, 0x00,
    ];

    #[test]
    fn parses_captured_tagged_header() {
        let r = EthernetRepr::parse(&TAGGED).unwrap();
        assert_eq!(
            r.vlan,
            Some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 10
            })
        );
        assert_eq!(r.ethertype, EtherType::IPV4);
        assert_eq!(r.src.0, [2, 0, 0, 0, 0, 1]);
        let mut out = [0u8; 18];
        assert_eq!(r.emit(&mut out).unwrap(), 18);
        assert_eq!(out, TAGGED);
    }

    #[test]
    fn untagged_round_trip() {
        let r = EthernetRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 1, 2, 3, 4, 5]),
            vlan: None,
            ethertype: EtherType::LLDP,
        };
        let mut out = [0u8; 14];
        r.emit(&mut out).unwrap();
        assert_eq!(EthernetRepr::parse(&out).unwrap(), r);
    }

    #[test]
    fn truncated_inputs_are_errors() {
        for n in 0..18 {
            let res = EthernetRepr::parse(&TAGGED[..n]);
            assert!(matches!(res, Err(WireError::Truncated { .. })), "len {n}");
        }
        assert!(EthernetRepr::parse(&TAGGED[..14]).is_err());
        let mut small = [0u8; 10];
        assert!(EthernetRepr::parse(&TAGGED)
            .unwrap()
            .emit(&mut small)
            .is_err());
    }
}
