//! One classifier for every frame a station of ours receives: the worker, `gen`, `sink`, the
//! cable and the NIC self-test all sort frames with [`classify`], so a frame is what it is
//! in every one of them.
//!
//! The kind comes from the EtherType (the one inside an 802.1Q tag) and, where two of our
//! messages share EtherType 0x88B5, from the message-type byte after the version byte. It
//! reads the header once and never parses a payload: what a PFC, SFCM or credit payload
//! holds, and whether it is well formed, is its own codec's business (each answers with a
//! [`super::WireError`], which the caller counts as malformed).

use super::{mac_control, EtherType, EthernetFrame};

/// Message type (the byte after the version byte) of an SFC message on EtherType 0x88B5.
pub const SFCM_MSG_TYPE: u8 = 0x01;
/// Message type of a credit update on EtherType 0x88B5.
pub const CREDIT_MSG_TYPE: u8 = 0x02;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// 802.1Qbb PFC (EtherType 0x8808, opcode 0x0101).
    Pfc,
    /// 802.3x PAUSE (EtherType 0x8808, opcode 0x0001), or another MAC control opcode.
    Pause,
    /// A credit update (EtherType 0x88B5, message type [`CREDIT_MSG_TYPE`]).
    Credit,
    /// An SFC message at layer 2 (EtherType 0x88B5, any other message type).
    Sfcm,
    /// LLDP (EtherType 0x88CC).
    Lldp,
    /// PTP over Ethernet (EtherType 0x88F7).
    Ptp,
    /// Everything else: data (test traffic, IP, ARP, …), SFC messages over UDP included.
    Data,
    /// Shorter than its Ethernet header (with the tag, if tagged).
    Runt,
}

impl FrameKind {
    /// MAC control: PFC or PAUSE, the frames a reaction point obeys.
    pub fn is_mac_control(self) -> bool {
        matches!(self, FrameKind::Pfc | FrameKind::Pause)
    }
}

/// A frame's kind and where its payload starts, read once per frame. It holds no borrow of
/// the frame, so a caller can keep it while it hands the frame's buffer on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    /// What the frame is.
    pub kind: FrameKind,
    /// EtherType of the payload (inside an 802.1Q tag; 0 for a runt).
    pub ethertype: u16,
    /// Ethernet header length including the tag (the frame's length for a runt): the payload
    /// is `frame[header_len..]`.
    pub header_len: usize,
}

impl Classified {
    /// The payload of `frame`, the frame this was classified from.
    pub fn payload<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        frame.get(self.header_len..).unwrap_or_default()
    }

    /// The Ethernet view of `frame`, the frame this was classified from, without checking its
    /// header again (`None` for a runt). Given another, shorter frame, the view's accessors
    /// panic (bounds-checked), they never read past it.
    #[inline]
    pub fn eth<'a>(&self, frame: &'a [u8]) -> Option<EthernetFrame<&'a [u8]>> {
        (self.kind != FrameKind::Runt)
            .then(|| EthernetFrame::checked_before(frame, self.header_len))
    }
}

/// Classifies `frame`. Never panics; reads at most the Ethernet header and two payload bytes.
#[inline]
pub fn classify(frame: &[u8]) -> Classified {
    let Ok(eth) = EthernetFrame::new_checked(frame) else {
        return Classified {
            kind: FrameKind::Runt,
            ethertype: 0,
            header_len: frame.len(),
        };
    };
    let ethertype = eth.ethertype();
    let p = eth.payload();
    let kind = match ethertype {
        EtherType::MAC_CONTROL => {
            if p.len() >= 2 && u16::from_be_bytes([p[0], p[1]]) == mac_control::OPCODE_PFC {
                FrameKind::Pfc
            } else {
                FrameKind::Pause
            }
        }
        EtherType::LOSSLESS => {
            if p.get(1) == Some(&CREDIT_MSG_TYPE) {
                FrameKind::Credit
            } else {
                FrameKind::Sfcm
            }
        }
        EtherType::LLDP => FrameKind::Lldp,
        EtherType::PTP => FrameKind::Ptp,
        _ => FrameKind::Data,
    };
    Classified {
        kind,
        ethertype,
        header_len: eth.header_len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        CreditEntry, CreditOp, CreditUpdate, EthernetRepr, MacAddr, MacControl, VlanTag,
    };

    fn frame(vlan: Option<VlanTag>, ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        let eth = EthernetRepr {
            dst: MacAddr([1, 0x80, 0xc2, 0, 0, 1]),
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            vlan,
            ethertype,
        };
        let at = eth.emit(&mut b).unwrap();
        b[at..at + payload.len()].copy_from_slice(payload);
        b
    }

    #[test]
    fn each_kind_by_ethertype_and_message_type() {
        let k = |et, p: &[u8]| classify(&frame(None, et, p)).kind;
        assert_eq!(k(EtherType::MAC_CONTROL, &[0x01, 0x01]), FrameKind::Pfc);
        assert_eq!(k(EtherType::MAC_CONTROL, &[0x00, 0x01]), FrameKind::Pause);
        assert_eq!(k(EtherType::MAC_CONTROL, &[0x00, 0x02]), FrameKind::Pause);
        assert_eq!(
            k(EtherType::LOSSLESS, &[1, CREDIT_MSG_TYPE]),
            FrameKind::Credit
        );
        assert_eq!(k(EtherType::LOSSLESS, &[1, SFCM_MSG_TYPE]), FrameKind::Sfcm);
        assert_eq!(k(EtherType::LLDP, &[]), FrameKind::Lldp);
        assert_eq!(k(EtherType::PTP, &[]), FrameKind::Ptp);
        assert_eq!(k(EtherType::IPV4, &[]), FrameKind::Data);
        assert!(FrameKind::Pause.is_mac_control() && !FrameKind::Credit.is_mac_control());
    }

    #[test]
    fn the_kind_is_read_inside_a_vlan_tag() {
        let tag = Some(VlanTag {
            pcp: 3,
            dei: false,
            vid: 7,
        });
        let f = frame(tag, EtherType::LOSSLESS, &[1, CREDIT_MSG_TYPE]);
        let c = classify(&f);
        assert_eq!(
            (c.kind, c.ethertype, c.header_len),
            (FrameKind::Credit, 0x88b5, 18)
        );
        assert_eq!(&c.payload(&f)[..2], &[1, CREDIT_MSG_TYPE]);
        let eth = c.eth(&f).unwrap();
        assert_eq!((eth.vlan().unwrap().pcp, eth.ethertype()), (3, 0x88b5));
    }

    #[test]
    fn the_codecs_emit_what_the_classifier_says() {
        let mut b = [0u8; 128];
        let n = MacControl::Pfc {
            enable: 0x08,
            quanta: [0; 8],
        }
        .emit_frame(MacAddr([2, 0, 0, 0, 0, 1]), &mut b)
        .unwrap();
        assert_eq!(classify(&b[..n]).kind, FrameKind::Pfc);
        let mut update = CreditUpdate::new();
        update
            .push(CreditEntry {
                op: CreditOp::Normal,
                fctbs: 1,
                vl: 3,
                fccl: 2,
            })
            .unwrap();
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let n = update.emit_frame(mac, mac, &mut b).unwrap();
        assert_eq!(classify(&b[..n]).kind, FrameKind::Credit);
    }

    #[test]
    fn runts_and_empty_frames_never_panic() {
        for n in 0..20 {
            let c = classify(&vec![0x88u8; n]);
            if n < 14 {
                assert_eq!((c.kind, c.header_len), (FrameKind::Runt, n));
                assert!(c.payload(&vec![0; n]).is_empty());
                assert!(c.eth(&vec![0; n]).is_none());
            }
        }
    }
}
