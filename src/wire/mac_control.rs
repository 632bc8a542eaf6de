//! MAC control frames: 802.3x PAUSE (opcode 0x0001) and 802.1Qbb PFC (opcode 0x0101).
//!
//! Layout after the EtherType 0x8808:
//! ```text
//! PAUSE: opcode 0x0001 (2) | pause time in quanta (2)                      | pad to 60
//! PFC:   opcode 0x0101 (2) | class-enable vector (2, upper octet reserved) | C0..C7 times (8 x 2) | pad to 60
//! ```
//! One quantum is 512 bit times at the port's speed; a time of 0 means resume.

use super::{be16, need, EtherType, EthernetRepr, MacAddr, WireError, MIN_FRAME_LEN};

/// Destination address of MAC control frames (never forwarded by bridges).
pub const MAC_CONTROL_DST: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
/// Opcode of an 802.3x PAUSE frame.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// Opcode of an 802.1Qbb priority flow control frame.
pub const OPCODE_PFC: u16 = 0x0101;

/// A decoded MAC control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MacControl {
    /// 802.3x PAUSE: pauses every priority for `quanta`.
    Pause {
        /// Pause time in quanta (0 resumes).
        quanta: u16,
    },
    /// 802.1Qbb PFC: per-priority pause times; only priorities whose bit is set in
    /// `enable` are affected.
    Pfc {
        /// Class-enable vector: bit n set means `quanta[n]` is valid.
        enable: u8,
        /// Pause time per priority in quanta (0 resumes).
        quanta: [u16; 8],
    },
}

impl MacControl {
    /// Parses the MAC control payload (the bytes after the EtherType).
    pub fn parse(payload: &[u8]) -> Result<Self, WireError> {
        need(payload, 2, "MAC control opcode")?;
        match be16(payload, 0) {
            OPCODE_PAUSE => {
                need(payload, 4, "PAUSE time")?;
                Ok(MacControl::Pause {
                    quanta: be16(payload, 2),
                })
            }
            OPCODE_PFC => {
                need(payload, 20, "PFC class times")?;
                // The vector's upper octet is reserved: sent as zero, ignored on receipt. A
                // peer that sets it still means the pause its lower octet enables; refusing
                // the frame would send into a buffer that asked us to stop.
                let enable = payload[3];
                let mut quanta = [0u16; 8];
                for (i, q) in quanta.iter_mut().enumerate() {
                    *q = be16(payload, 4 + 2 * i);
                }
                Ok(MacControl::Pfc { enable, quanta })
            }
            other => Err(WireError::BadValue {
                field: "MAC control opcode",
                value: u64::from(other),
            }),
        }
    }

    /// Parses a whole frame, checking the EtherType.
    pub fn parse_frame(frame: &[u8]) -> Result<Self, WireError> {
        let eth = super::EthernetFrame::new_checked(frame)?;
        if eth.ethertype() != EtherType::MAC_CONTROL {
            return Err(WireError::BadValue {
                field: "EtherType (expected 0x8808)",
                value: u64::from(eth.ethertype()),
            });
        }
        Self::parse(eth.payload())
    }

    /// Writes a complete, padded 60-byte frame from `src` into `buf`; returns its length.
    pub fn emit_frame(&self, src: MacAddr, buf: &mut [u8]) -> Result<usize, WireError> {
        need(buf, MIN_FRAME_LEN, "MAC control frame buffer")?;
        let eth = EthernetRepr {
            dst: MAC_CONTROL_DST,
            src,
            vlan: None,
            ethertype: EtherType::MAC_CONTROL,
        };
        let at = eth.emit(buf)?;
        buf[at..MIN_FRAME_LEN].fill(0);
        match *self {
            MacControl::Pause { quanta } => {
                buf[at..at + 2].copy_from_slice(&OPCODE_PAUSE.to_be_bytes());
                buf[at + 2..at + 4].copy_from_slice(&quanta.to_be_bytes());
            }
            MacControl::Pfc { enable, quanta } => {
                buf[at..at + 2].copy_from_slice(&OPCODE_PFC.to_be_bytes());
                buf[at + 2..at + 4].copy_from_slice(&u16::from(enable).to_be_bytes());
                for (i, q) in quanta.iter().enumerate() {
                    let o = at + 4 + 2 * i;
                    buf[o..o + 2].copy_from_slice(&q.to_be_bytes());
                }
            }
        }
        Ok(MIN_FRAME_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PFC frame as a switch sends it: priorities 3 and 4 paused for 0xffff quanta.
    const CAPTURED_PFC: [u8; 60] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x00, 0x1b, 0x21, 0x3c, 0x9d, 0xf8, 0x88, 0x08, 0x01,
        0x01, 0x00, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn parses_captured_pfc() {
        let m = MacControl::parse_frame(&CAPTURED_PFC).unwrap();
        assert_eq!(
            m,
            MacControl::Pfc {
                enable: 0x18,
                quanta: [0, 0, 0, 0xffff, 0xffff, 0, 0, 0]
            }
        );
        let mut out = [0u8; 64];
        let n = m
            .emit_frame(MacAddr([0x00, 0x1b, 0x21, 0x3c, 0x9d, 0xf8]), &mut out)
            .unwrap();
        assert_eq!(&out[..n], &CAPTURED_PFC[..]);
    }

    #[test]
    fn pause_round_trip() {
        let m = MacControl::Pause { quanta: 1234 };
        let mut out = [0xaau8; 60];
        m.emit_frame(MacAddr([2, 0, 0, 0, 0, 9]), &mut out).unwrap();
        assert_eq!(&out[14..18], &[0x00, 0x01, 0x04, 0xd2]);
        assert!(out[18..].iter().all(|&b| b == 0), "padding is zeroed");
        assert_eq!(MacControl::parse_frame(&out).unwrap(), m);
    }

    #[test]
    fn malformed_inputs_are_errors_not_panics() {
        for n in 0..CAPTURED_PFC.len().min(34) {
            assert!(
                MacControl::parse_frame(&CAPTURED_PFC[..n]).is_err(),
                "len {n}"
            );
        }
        let mut bad = CAPTURED_PFC;
        bad[14] = 0x02; // unknown opcode 0x0201
        assert_eq!(
            MacControl::parse_frame(&bad),
            Err(WireError::BadValue {
                field: "MAC control opcode",
                value: 0x0201
            })
        );
        let mut reserved = CAPTURED_PFC;
        reserved[16] = 0x01; // upper octet of the vector set: ignored, the pause obeyed
        assert_eq!(
            MacControl::parse_frame(&reserved),
            MacControl::parse_frame(&CAPTURED_PFC)
        );
        let mut not_mac = CAPTURED_PFC;
        not_mac[12] = 0x08;
        not_mac[13] = 0x00;
        assert!(MacControl::parse_frame(&not_mac).is_err());
        assert!(MacControl::Pause { quanta: 1 }
            .emit_frame(MacAddr::default(), &mut [0u8; 59])
            .is_err());
    }
}
