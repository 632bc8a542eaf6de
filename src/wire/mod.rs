//! Wire formats: zero-copy frame views and `Repr` types with `parse`/`emit` pairs.
//!
//! Nothing here touches a socket or a clock. Every parser takes untrusted bytes and
//! returns a [`WireError`] naming what was wrong; none panics on any input.

pub mod credit;
pub mod ethernet;
pub mod ipv4;
pub mod kind;
pub mod lldp;
pub mod mac_control;
pub mod ptp;
pub mod sfcm;
pub mod test_traffic;

use std::fmt;

pub use credit::{CreditEntry, CreditOp, CreditUpdate};
pub use ethernet::{EtherType, EthernetFrame, EthernetRepr, VlanTag};
pub use kind::{classify, Classified, FrameKind};
pub use mac_control::MacControl;
pub use sfcm::{Ipv4Flow, SfcScope, Sfcm, SfcmFrame, SfcmUdpFrame};
pub use test_traffic::{TestFrame, TestFrameView};

/// Why bytes could not be decoded (or a value could not be encoded).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before the field does.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        /// The structure or field that was cut short.
        what: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The frame's checksum does not match what it holds: it was damaged on its way.
    #[error("damaged frame: its {what} does not match")]
    Damaged {
        /// The checksum that failed.
        what: &'static str,
    },
    /// A field holds a value this codec does not accept.
    #[error("bad {field}: {value:#x}")]
    BadValue {
        /// The field's name.
        field: &'static str,
        /// The value found.
        value: u64,
    },
}

/// Checks that `buf` holds at least `need` bytes for `what`.
pub(crate) fn need(buf: &[u8], need: usize, what: &'static str) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::Truncated {
            what,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The all-ones broadcast address.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// True for group (multicast or broadcast) addresses.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }

    /// One of the group addresses 01-80-C2-00-00-00 to -0F, which 802.1Q bridges never
    /// forward (PAUSE/PFC, LLDP, peer delay, our credit updates use them).
    pub fn is_bridge_filtered(&self) -> bool {
        self.0[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && self.0[5] <= 0x0f
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for MacAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let parts: Vec<&str> = s.split([':', '-']).collect();
        if parts.len() != 6 {
            return Err(format!("MAC address {s:?} must have six octets"));
        }
        for (o, p) in out.iter_mut().zip(parts) {
            *o = u8::from_str_radix(p, 16)
                .map_err(|_| format!("MAC address {s:?}: octet {p:?} is not hex"))?;
        }
        Ok(MacAddr(out))
    }
}

impl serde::Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Reads a big-endian u16 at `at` (caller has checked the length).
pub(crate) fn be16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Minimum Ethernet frame length without the FCS (the MAC pads shorter frames).
pub const MIN_FRAME_LEN: usize = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parses_and_prints() {
        let m: MacAddr = "01-80-c2-00-00-01".parse().unwrap();
        assert_eq!(m.to_string(), "01:80:c2:00:00:01");
        assert!(m.is_multicast());
        assert!("01:02:03".parse::<MacAddr>().is_err());
        assert!("zz:02:03:04:05:06".parse::<MacAddr>().is_err());
    }
}
