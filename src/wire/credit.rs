//! Credit update: InfiniBand-style flow-control link packets carried over Ethernet.
//!
//! No public format exists for credit-based flow control on Ethernet, so the project defines
//! one on EtherType 0x88B5 (IEEE 802 local experimental, [`EtherType::LOSSLESS`]), shared
//! with the SFC message and told apart by the message-type byte. One frame carries one
//! *entry* per virtual lane (VL = 802.1p priority); each entry holds the fields of an
//! InfiniBand flow-control packet: Op, FCTBS, VL, FCCL and a 16-bit CRC (LPCRC).
//!
//! Layout after the EtherType (offsets from the start of the payload, big-endian):
//! ```text
//! off len field
//!   0   1 version              = 1 (CREDIT_VERSION)
//!   1   1 message type         = 0x02 (wire::kind::CREDIT_MSG_TYPE; 0x01 is an SFCM)
//!   2   1 entry count N        1..=16
//!   3   1 reserved             = 0 (a non-zero value is rejected)
//!   4  6N entries, one per VL, no VL twice:
//!         +0  bits 7..4  Op          0 = Normal, 1 = Init, 2 = InitAck (see below)
//!             bits 3..0  FCTBS[11:8]
//!         +1  bits 7..0  FCTBS[7:0]  sender's flow-control total blocks sent (mod 4096)
//!         +2  bits 7..4  VL          0..=15
//!             bits 3..0  FCCL[11:8]
//!         +3  bits 7..0  FCCL[7:0]   sender's flow-control credit limit (mod 4096)
//!         +4  2          LPCRC over bytes +0..+3 of this entry, big-endian
//! 4+6N  …  zero padding up to the 60-byte minimum frame (ignored on receipt)
//! ```
//! Bytes +0..+3 of an entry are bit for bit the first 32 bits of an InfiniBand
//! flow-control packet (Op 4 bits, FCTBS 12, VL 4, FCCL 12, most significant bit first).
//! A frame with one entry is 14 + 10 = 24 bytes of content and is padded to 60; a frame with
//! all 16 lanes is 14 + 100 = 114 bytes.
//!
//! **LPCRC** uses InfiniBand's 16-bit link CRC (the VCRC polynomial, which the IB spec also
//! prescribes for the LPCRC): generator x¹⁶ + x¹² + x³ + x + 1 (0x100B), bits fed least
//! significant first (reflected input and output, table constant 0xD008), initial value
//! 0xFFFF, final XOR 0xFFFF. Its check value over the ASCII string `123456789` is 0x0A3D.
//! Every entry carries its own CRC, so a corrupted entry is rejected on its own; a frame with
//! any bad entry is rejected whole (it is not worth acting on half a frame).
//!
//! **Op**: InfiniBand defines 0 (Normal) and 1 (Init) and reserves the rest. This project
//! adds 2 (InitAck), the second phase of the re-initialisation handshake (see
//! [`crate::fc::credit`]); values 3..=15 are rejected. One entry carries two directions:
//! FCTBS describes what the *sender* transmitted on the VL, FCCL what the sender's
//! *receiver* will accept on it.

use super::kind::CREDIT_MSG_TYPE;
use super::{need, EtherType, EthernetFrame, EthernetRepr, MacAddr, WireError, MIN_FRAME_LEN};

/// Version byte of this credit-update format.
pub const CREDIT_VERSION: u8 = 1;
/// Bytes before the first entry (version, type, count, reserved).
pub const CREDIT_HEADER_LEN: usize = 4;
/// Bytes of one per-VL entry (4 bytes of fields and the 2-byte LPCRC).
pub const CREDIT_ENTRY_LEN: usize = 6;
/// Most entries one update can carry (one per 4-bit VL value).
pub const MAX_CREDIT_ENTRIES: usize = 16;
/// Largest value of the 12-bit FCTBS and FCCL fields.
pub const CREDIT_FIELD_MAX: u16 = 0x0fff;
/// Largest virtual lane number (4 bits).
pub const VL_MAX: u8 = 15;

/// InfiniBand's link CRC: generator 0x100B, reflected, initial value 0xFFFF, final XOR 0xFFFF.
pub fn lpcrc(bytes: &[u8]) -> u16 {
    // 0xD008 is 0x100B with its 16 bits reversed (the reflected form of the generator).
    let mut crc: u16 = 0xffff;
    for &b in bytes {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xd008
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// What an entry asks of its receiver (the 4-bit Op field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreditOp {
    /// Op 0: running normally; FCTBS resyncs the receiver and FCCL is a credit.
    Normal,
    /// Op 1: the sender is (re)initialising the lane: its transmitter is quiesced at FCTBS and
    /// its FCCL is not a credit (it may not yet know the peer's FCTBS).
    Init,
    /// Op 2 (project extension): the sender saw the peer's Init; its transmitter is quiesced
    /// at FCTBS and its FCCL is a credit computed after that Init.
    InitAck,
}

impl CreditOp {
    /// The 4-bit wire value.
    pub fn value(self) -> u8 {
        match self {
            CreditOp::Normal => 0,
            CreditOp::Init => 1,
            CreditOp::InitAck => 2,
        }
    }

    /// Decodes the 4-bit wire value.
    pub fn from_value(v: u8) -> Result<Self, WireError> {
        match v {
            0 => Ok(CreditOp::Normal),
            1 => Ok(CreditOp::Init),
            2 => Ok(CreditOp::InitAck),
            other => Err(WireError::BadValue {
                field: "credit entry Op",
                value: u64::from(other),
            }),
        }
    }
}

/// One per-VL entry: the fields of an InfiniBand flow-control packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreditEntry {
    /// Normal, Init or InitAck.
    pub op: CreditOp,
    /// Flow-control total blocks sent by the entry's sender on this VL, modulo 4096 (12 bits).
    pub fctbs: u16,
    /// Virtual lane (= priority), 0..=15.
    pub vl: u8,
    /// Flow-control credit limit the entry's sender grants on this VL, modulo 4096 (12 bits).
    pub fccl: u16,
}

impl CreditEntry {
    /// Checks that every field fits its width.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.fctbs > CREDIT_FIELD_MAX {
            return Err(WireError::BadValue {
                field: "credit entry FCTBS (12 bits)",
                value: u64::from(self.fctbs),
            });
        }
        if self.vl > VL_MAX {
            return Err(WireError::BadValue {
                field: "credit entry VL (4 bits)",
                value: u64::from(self.vl),
            });
        }
        if self.fccl > CREDIT_FIELD_MAX {
            return Err(WireError::BadValue {
                field: "credit entry FCCL (12 bits)",
                value: u64::from(self.fccl),
            });
        }
        Ok(())
    }

    /// Parses one 6-byte entry, checking its LPCRC.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need(buf, CREDIT_ENTRY_LEN, "credit entry")?;
        let sent = u16::from_be_bytes([buf[4], buf[5]]);
        if lpcrc(&buf[..4]) != sent {
            return Err(WireError::BadValue {
                field: "credit entry LPCRC",
                value: u64::from(sent),
            });
        }
        Ok(CreditEntry {
            op: CreditOp::from_value(buf[0] >> 4)?,
            fctbs: (u16::from(buf[0] & 0x0f) << 8) | u16::from(buf[1]),
            vl: buf[2] >> 4,
            fccl: (u16::from(buf[2] & 0x0f) << 8) | u16::from(buf[3]),
        })
    }

    /// Writes the entry and its LPCRC to the start of `buf`; returns [`CREDIT_ENTRY_LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.validate()?;
        need(buf, CREDIT_ENTRY_LEN, "credit entry buffer")?;
        buf[0] = (self.op.value() << 4) | (self.fctbs >> 8) as u8;
        buf[1] = self.fctbs as u8;
        buf[2] = (self.vl << 4) | (self.fccl >> 8) as u8;
        buf[3] = self.fccl as u8;
        let crc = lpcrc(&buf[..4]);
        buf[4..6].copy_from_slice(&crc.to_be_bytes());
        Ok(CREDIT_ENTRY_LEN)
    }
}

const EMPTY_ENTRY: CreditEntry = CreditEntry {
    op: CreditOp::Normal,
    fctbs: 0,
    vl: 0,
    fccl: 0,
};

/// A credit update: 1 to 16 entries, at most one per VL. Fixed-size, never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditUpdate {
    entries: [CreditEntry; MAX_CREDIT_ENTRIES],
    len: usize,
}

impl Default for CreditUpdate {
    fn default() -> Self {
        Self::new()
    }
}

impl CreditUpdate {
    /// An update with no entries yet (not emittable until one is pushed).
    pub fn new() -> Self {
        CreditUpdate {
            entries: [EMPTY_ENTRY; MAX_CREDIT_ENTRIES],
            len: 0,
        }
    }

    /// Adds an entry; fails if a field is out of range, the VL is already present or the
    /// update is full.
    pub fn push(&mut self, entry: CreditEntry) -> Result<(), WireError> {
        entry.validate()?;
        if self.entries().iter().any(|e| e.vl == entry.vl) {
            return Err(WireError::BadValue {
                field: "credit entry VL (duplicate)",
                value: u64::from(entry.vl),
            });
        }
        if self.len == MAX_CREDIT_ENTRIES {
            return Err(WireError::BadValue {
                field: "credit entry count (at most 16)",
                value: self.len as u64 + 1,
            });
        }
        self.entries[self.len] = entry;
        self.len += 1;
        Ok(())
    }

    /// The entries, in wire order.
    pub fn entries(&self) -> &[CreditEntry] {
        &self.entries[..self.len]
    }

    /// True if no entry has been pushed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Payload bytes this update occupies (without padding).
    pub fn payload_len(&self) -> usize {
        CREDIT_HEADER_LEN + CREDIT_ENTRY_LEN * self.len
    }

    /// Length of the untagged frame [`CreditUpdate::emit_frame`] writes (padded to 60).
    pub fn frame_len(&self) -> usize {
        (14 + self.payload_len()).max(MIN_FRAME_LEN)
    }

    /// Parses a credit-update payload (the bytes after the EtherType); padding is ignored.
    pub fn parse(payload: &[u8]) -> Result<Self, WireError> {
        need(payload, CREDIT_HEADER_LEN, "credit update header")?;
        if payload[0] != CREDIT_VERSION {
            return Err(WireError::BadValue {
                field: "credit update version",
                value: u64::from(payload[0]),
            });
        }
        if payload[1] != CREDIT_MSG_TYPE {
            return Err(WireError::BadValue {
                field: "credit update message type",
                value: u64::from(payload[1]),
            });
        }
        let count = usize::from(payload[2]);
        if count == 0 || count > MAX_CREDIT_ENTRIES {
            return Err(WireError::BadValue {
                field: "credit entry count (1..=16)",
                value: count as u64,
            });
        }
        if payload[3] != 0 {
            return Err(WireError::BadValue {
                field: "credit update reserved byte",
                value: u64::from(payload[3]),
            });
        }
        need(
            payload,
            CREDIT_HEADER_LEN + CREDIT_ENTRY_LEN * count,
            "credit entries",
        )?;
        let mut update = CreditUpdate::new();
        for i in 0..count {
            let at = CREDIT_HEADER_LEN + CREDIT_ENTRY_LEN * i;
            update.push(CreditEntry::parse(&payload[at..at + CREDIT_ENTRY_LEN])?)?;
        }
        Ok(update)
    }

    /// Parses a whole frame, checking the EtherType (an 802.1Q tag is allowed).
    pub fn parse_frame(frame: &[u8]) -> Result<Self, WireError> {
        let eth = EthernetFrame::new_checked(frame)?;
        if eth.ethertype() != EtherType::LOSSLESS {
            return Err(WireError::BadValue {
                field: "EtherType (expected 0x88b5)",
                value: u64::from(eth.ethertype()),
            });
        }
        Self::parse(eth.payload())
    }

    /// Writes the payload (no padding) to the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.is_empty() {
            return Err(WireError::BadValue {
                field: "credit entry count (1..=16)",
                value: 0,
            });
        }
        let len = self.payload_len();
        need(buf, len, "credit update buffer")?;
        buf[0] = CREDIT_VERSION;
        buf[1] = CREDIT_MSG_TYPE;
        buf[2] = self.len as u8;
        buf[3] = 0;
        for (i, e) in self.entries().iter().enumerate() {
            let at = CREDIT_HEADER_LEN + CREDIT_ENTRY_LEN * i;
            e.emit(&mut buf[at..])?;
        }
        Ok(len)
    }

    /// Writes a complete untagged frame from `src` to `dst`, zero-padded to 60 bytes;
    /// returns its length ([`CreditUpdate::frame_len`]).
    pub fn emit_frame(
        &self,
        dst: MacAddr,
        src: MacAddr,
        buf: &mut [u8],
    ) -> Result<usize, WireError> {
        let len = self.frame_len();
        need(buf, len, "credit update frame buffer")?;
        let eth = EthernetRepr {
            dst,
            src,
            vlan: None,
            ethertype: EtherType::LOSSLESS,
        };
        let at = eth.emit(buf)?;
        buf[at..len].fill(0);
        self.emit(&mut buf[at..len])?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0a]);
    const DST: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x0b]);

    /// A credit update written down byte by byte from the layout above: VL 3 Normal with
    /// FCTBS 0x123 and FCCL 0x456, then VL 5 Init with FCTBS 0xfff and FCCL 0.
    const CAPTURED: [u8; 60] = [
        0x02, 0, 0, 0, 0, 0x0b, // dst
        0x02, 0, 0, 0, 0, 0x0a, // src
        0x88, 0xb5, // EtherType
        0x01, 0x02, 0x02, 0x00, // version, type, count, reserved
        0x01, 0x23, 0x34, 0x56, 0x9f,
        0xd1, // VL 3: Op 0 | FCTBS 0x123, VL 3 | FCCL 0x456, LPCRC
        0x1f, 0xff, 0x50, 0x00, 0x05, 0xb9, // VL 5: Op 1 | FCTBS 0xfff, VL 5 | FCCL 0, LPCRC
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    fn captured_update() -> CreditUpdate {
        let mut u = CreditUpdate::new();
        u.push(CreditEntry {
            op: CreditOp::Normal,
            fctbs: 0x123,
            vl: 3,
            fccl: 0x456,
        })
        .unwrap();
        u.push(CreditEntry {
            op: CreditOp::Init,
            fctbs: 0xfff,
            vl: 5,
            fccl: 0,
        })
        .unwrap();
        u
    }

    /// The same CRC written the textbook way (MSB first with explicit bit reversal), as an
    /// independent check of the reflected implementation's parameters.
    fn lpcrc_msb_first(bytes: &[u8]) -> u16 {
        let mut crc: u16 = 0xffff;
        for &b in bytes {
            crc ^= u16::from(b.reverse_bits()) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x100b
                } else {
                    crc << 1
                };
            }
        }
        crc.reverse_bits() ^ 0xffff
    }

    #[test]
    fn lpcrc_check_value_and_definition() {
        assert_eq!(lpcrc(b"123456789"), 0x0a3d);
        for data in [&b""[..], b"\x00", b"\x01\x23\x34\x56", b"\xff\xff\xff\xff"] {
            assert_eq!(lpcrc(data), lpcrc_msb_first(data), "{data:02x?}");
        }
        assert_eq!(lpcrc(&CAPTURED[18..22]), 0x9fd1);
        assert_eq!(lpcrc(&CAPTURED[24..28]), 0x05b9);
    }

    #[test]
    fn parses_captured_update() {
        let u = CreditUpdate::parse_frame(&CAPTURED).unwrap();
        assert_eq!(u, captured_update());
        assert_eq!(u.entries().len(), 2);
        let mut out = [0xaau8; 64];
        let n = u.emit_frame(DST, SRC, &mut out).unwrap();
        assert_eq!(n, 60);
        assert_eq!(&out[..n], &CAPTURED[..]);
    }

    #[test]
    fn round_trips_every_op_and_sixteen_lanes() {
        let mut u = CreditUpdate::new();
        for vl in 0..=VL_MAX {
            let op = [CreditOp::Normal, CreditOp::Init, CreditOp::InitAck][usize::from(vl) % 3];
            u.push(CreditEntry {
                op,
                fctbs: 0xfff - u16::from(vl) * 17,
                vl,
                fccl: u16::from(vl) * 255,
            })
            .unwrap();
        }
        assert_eq!(u.frame_len(), 14 + 4 + 16 * 6);
        let mut out = [0u8; 128];
        let n = u.emit_frame(DST, SRC, &mut out).unwrap();
        assert_eq!(n, 114);
        assert_eq!(CreditUpdate::parse_frame(&out[..n]).unwrap(), u);
        // Trailing padding after the entries is ignored.
        assert_eq!(CreditUpdate::parse_frame(&out).unwrap(), u);
        // A 17th entry does not fit (and would repeat a VL anyway).
        assert!(u
            .push(CreditEntry {
                op: CreditOp::Normal,
                fctbs: 0,
                vl: 0,
                fccl: 0
            })
            .is_err());
    }

    #[test]
    fn tagged_frames_parse() {
        let mut tagged = Vec::from(&CAPTURED[..12]);
        tagged.extend_from_slice(&[0x81, 0x00, 0xe0, 0x00]); // PCP 7, VID 0
        tagged.extend_from_slice(&CAPTURED[12..]);
        assert_eq!(
            CreditUpdate::parse_frame(&tagged).unwrap(),
            captured_update()
        );
    }

    #[test]
    fn truncations_are_errors_not_panics() {
        // Everything short of the last entry's CRC is truncated.
        for n in 0..30 {
            assert!(
                CreditUpdate::parse_frame(&CAPTURED[..n]).is_err(),
                "len {n}"
            );
        }
        assert_eq!(
            CreditUpdate::parse_frame(&CAPTURED[..29]),
            Err(WireError::Truncated {
                what: "credit entries",
                need: 16,
                have: 15
            })
        );
        assert!(CreditUpdate::parse_frame(&CAPTURED[..30]).is_ok());
        assert!(CreditEntry::parse(&CAPTURED[18..23]).is_err());
        // Output buffers that are too small.
        let u = captured_update();
        assert!(u.emit_frame(DST, SRC, &mut [0u8; 59]).is_err());
        assert!(u.emit(&mut [0u8; 15]).is_err());
        assert!(CreditUpdate::new().emit(&mut [0u8; 64]).is_err());
    }

    #[test]
    fn bad_values_are_rejected_naming_the_field() {
        let field_of = |bytes: &[u8]| match CreditUpdate::parse_frame(bytes) {
            Err(WireError::BadValue { field, .. }) => field,
            other => panic!("expected BadValue, got {other:?}"),
        };
        let mut bad = CAPTURED;
        bad[14] = 2;
        assert_eq!(field_of(&bad), "credit update version");
        let mut bad = CAPTURED;
        bad[15] = 0x01; // an SFC message
        assert_eq!(field_of(&bad), "credit update message type");
        for count in [0u8, 17, 0xff] {
            let mut bad = CAPTURED;
            bad[16] = count;
            assert_eq!(field_of(&bad), "credit entry count (1..=16)");
        }
        let mut bad = CAPTURED;
        bad[17] = 1;
        assert_eq!(field_of(&bad), "credit update reserved byte");
        let mut bad = CAPTURED;
        bad[20] ^= 0x01; // one flipped bit in VL 3's FCCL
        assert_eq!(field_of(&bad), "credit entry LPCRC");
        let mut bad = CAPTURED;
        bad[23] ^= 0x80; // one flipped bit in a CRC
        assert_eq!(field_of(&bad), "credit entry LPCRC");
        // A reserved Op with a correct CRC.
        let mut bad = CAPTURED;
        bad[18] = 0x31;
        let crc = lpcrc(&bad[18..22]);
        bad[22..24].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(field_of(&bad), "credit entry Op");
        // The same VL twice, each entry valid on its own.
        let mut bad = CAPTURED;
        bad[26] = 0x30;
        let crc = lpcrc(&bad[24..28]);
        bad[28..30].copy_from_slice(&crc.to_be_bytes());
        assert_eq!(field_of(&bad), "credit entry VL (duplicate)");
        let mut not_ours = CAPTURED;
        not_ours[12..14].copy_from_slice(&EtherType::MAC_CONTROL.to_be_bytes());
        assert_eq!(field_of(&not_ours), "EtherType (expected 0x88b5)");
        // Out-of-range fields cannot be pushed or emitted.
        let too_big = [
            CreditEntry {
                op: CreditOp::Normal,
                fctbs: 0x1000,
                vl: 0,
                fccl: 0,
            },
            CreditEntry {
                op: CreditOp::Normal,
                fctbs: 0,
                vl: 16,
                fccl: 0,
            },
            CreditEntry {
                op: CreditOp::Normal,
                fctbs: 0,
                vl: 0,
                fccl: 0x1000,
            },
        ];
        for e in too_big {
            assert!(CreditUpdate::new().push(e).is_err(), "{e:?}");
            assert!(e.emit(&mut [0u8; 6]).is_err(), "{e:?}");
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
            let _ = CreditUpdate::parse_frame(&bytes);
            let _ = CreditUpdate::parse(&bytes);
            let _ = CreditEntry::parse(&bytes);
        }

        #[test]
        fn valid_headers_with_random_entries_never_panic(
            count in 0u8..20,
            body in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            let mut payload = vec![CREDIT_VERSION, CREDIT_MSG_TYPE, count, 0];
            payload.extend_from_slice(&body);
            if let Ok(u) = CreditUpdate::parse(&payload) {
                // Whatever parses re-emits to the same bytes.
                let mut out = [0u8; 128];
                let n = u.emit(&mut out).unwrap();
                prop_assert_eq!(&out[..n], &payload[..n]);
            }
        }

        #[test]
        fn entries_round_trip(op in 0u8..3, fctbs in 0u16..4096, vl in 0u8..16, fccl in 0u16..4096) {
            let e = CreditEntry { op: CreditOp::from_value(op).unwrap(), fctbs, vl, fccl };
            let mut buf = [0u8; CREDIT_ENTRY_LEN];
            e.emit(&mut buf).unwrap();
            prop_assert_eq!(CreditEntry::parse(&buf).unwrap(), e);
        }
    }
}
