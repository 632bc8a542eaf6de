//! LLDP (IEEE 802.1AB) data units: EtherType 0x88CC to 01-80-C2-00-00-0E.
//!
//! An LLDPDU is a sequence of TLVs, each with a 2-octet header (7-bit type, 9-bit length of
//! the value) and ending with End-of-LLDPDU (type 0, length 0). Chassis ID, Port ID and TTL
//! are mandatory and come first, in that order. This codec covers:
//! ```text
//! type 1   Chassis ID    subtype (1) | id (1..=255)           we send subtype 4 (MAC address)
//! type 2   Port ID       subtype (1) | id (1..=255)           we send subtype 5 (interface name)
//! type 3   TTL           seconds (2)                          0 = this neighbour is leaving
//! type 5   System Name   UTF-8 (0..=255), optional
//! type 127 IEEE 802.1 DCBX PFC configuration (802.1Qaz), 6 octets:
//!          OUI 00-80-C2 | subtype 0x0B | W MBC 0 0 PFCcap(4 bits) | PFC enable bitmap (1)
//! type 127 ours, "measures delay / adaptive headroom", 10 octets:
//!          OUI (3, default 02-4C-4C) | subtype (1, default 0x01) | version (1) = 1
//!          | flags (1): bit 0 answers Pdelay_Req, bit 1 initiates Pdelay_Req,
//!                       bit 2 sizes PFC headroom from the measurement (other bits 0)
//!          | measured link round trip (4, ns, big-endian; 0 = not measured yet)
//! type 0   End of LLDPDU
//! ```
//! The default OUI 02-4C-4C ("LL") is a locally administered (AAI quadrant) identifier, not an
//! IEEE assignment; an operator with an assigned CID configures it through [`OrgTlvId`].
//! Parsing skips TLVs it does not know (including other organisationally specific ones) and
//! rejects a TLV that overruns the frame, a missing, misplaced or repeated mandatory TLV, and
//! a known TLV of the wrong length, with a [`WireError`] naming the TLV.

use super::MIN_FRAME_LEN;
use super::{be16, need, EtherType, EthernetFrame, EthernetRepr, MacAddr, WireError};

/// Destination of LLDP frames (nearest bridge: never forwarded).
pub const LLDP_DST: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);
/// TLV type: End of LLDPDU.
pub const TLV_END: u8 = 0;
/// TLV type: Chassis ID.
pub const TLV_CHASSIS_ID: u8 = 1;
/// TLV type: Port ID.
pub const TLV_PORT_ID: u8 = 2;
/// TLV type: Time To Live.
pub const TLV_TTL: u8 = 3;
/// TLV type: System Name.
pub const TLV_SYSTEM_NAME: u8 = 5;
/// TLV type: organisationally specific.
pub const TLV_ORG: u8 = 127;
/// Chassis ID subtype: MAC address.
pub const CHASSIS_SUBTYPE_MAC: u8 = 4;
/// Port ID subtype: MAC address.
pub const PORT_SUBTYPE_MAC: u8 = 3;
/// Port ID subtype: interface name.
pub const PORT_SUBTYPE_IFNAME: u8 = 5;
/// The IEEE 802.1 OUI.
pub const OUI_IEEE_8021: [u8; 3] = [0x00, 0x80, 0xc2];
/// 802.1Qaz subtype of the PFC configuration TLV.
pub const SUBTYPE_PFC_CONFIG: u8 = 0x0b;
/// Version of our adaptive-headroom TLV.
pub const ADAPTIVE_TLV_VERSION: u8 = 1;
/// Length of our adaptive-headroom TLV's value.
const ADAPTIVE_TLV_LEN: usize = 10;

/// A Chassis ID or Port ID: a subtype and opaque bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct LldpId {
    /// The subtype (for example [`CHASSIS_SUBTYPE_MAC`] or [`PORT_SUBTYPE_IFNAME`]).
    pub subtype: u8,
    /// The identifier, 1..=255 octets.
    pub id: Vec<u8>,
}

impl LldpId {
    /// An identifier holding a MAC address.
    pub fn mac(subtype: u8, mac: MacAddr) -> Self {
        LldpId {
            subtype,
            id: mac.0.to_vec(),
        }
    }

    /// An identifier holding a name.
    pub fn name(subtype: u8, name: &str) -> Self {
        LldpId {
            subtype,
            id: name.as_bytes().to_vec(),
        }
    }
}

impl std::fmt::Display for LldpId {
    /// A 6-octet id prints as a MAC address, printable text as itself, anything else as hex.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Ok(m) = <[u8; 6]>::try_from(self.id.as_slice()) {
            if matches!(self.subtype, CHASSIS_SUBTYPE_MAC | PORT_SUBTYPE_MAC) {
                return write!(f, "{}", MacAddr(m));
            }
        }
        match std::str::from_utf8(&self.id) {
            Ok(s) if s.chars().all(|c| !c.is_control()) => f.write_str(s),
            _ => self.id.iter().try_for_each(|b| write!(f, "{b:02x}")),
        }
    }
}

/// The IEEE 802.1Qaz (DCBX) PFC configuration TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PfcConfig {
    /// Willing to accept the peer's configuration.
    pub willing: bool,
    /// MACsec bypass capability.
    pub mbc: bool,
    /// Number of priorities that may be PFC-enabled at once (0..=8; 4 bits on the wire).
    pub capability: u8,
    /// Bit n set: priority n is PFC-enabled.
    pub enabled: u8,
}

/// Which organisationally specific TLV carries our capability: an OUI (or CID) and a subtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct OrgTlvId {
    /// The OUI / CID.
    pub oui: [u8; 3],
    /// The subtype within it.
    pub subtype: u8,
}

impl Default for OrgTlvId {
    /// 02-4C-4C ("LL", locally administered), subtype 1.
    fn default() -> Self {
        OrgTlvId {
            oui: [0x02, 0x4c, 0x4c],
            subtype: 0x01,
        }
    }
}

/// Our TLV: what the station can do for link-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct AdaptiveCapability {
    /// Answers Pdelay_Req (flag bit 0).
    pub responds: bool,
    /// Initiates Pdelay_Req (flag bit 1).
    pub initiates: bool,
    /// Sizes PFC headroom from the measurement (flag bit 2).
    pub adaptive_headroom: bool,
    /// The link round trip it last measured, ns (0 = not measured yet; saturates at u32::MAX).
    pub round_trip_ns: u32,
}

impl AdaptiveCapability {
    fn flags(&self) -> u8 {
        u8::from(self.responds)
            | u8::from(self.initiates) << 1
            | u8::from(self.adaptive_headroom) << 2
    }
}

/// A decoded LLDPDU (the TLVs this codec knows; others are skipped when parsing).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Lldpdu {
    /// Chassis ID.
    pub chassis_id: LldpId,
    /// Port ID.
    pub port_id: LldpId,
    /// Seconds the receiver keeps this information (0 = forget it now).
    pub ttl: u16,
    /// System Name, if sent.
    pub system_name: Option<String>,
    /// DCBX PFC configuration, if sent.
    pub pfc: Option<PfcConfig>,
    /// Our adaptive-headroom TLV, if sent.
    pub adaptive: Option<AdaptiveCapability>,
}

/// The name of a TLV type, for errors.
fn tlv_name(ty: u8) -> &'static str {
    match ty {
        TLV_END => "LLDP End of LLDPDU TLV",
        TLV_CHASSIS_ID => "LLDP Chassis ID TLV",
        TLV_PORT_ID => "LLDP Port ID TLV",
        TLV_TTL => "LLDP TTL TLV",
        4 => "LLDP Port Description TLV",
        TLV_SYSTEM_NAME => "LLDP System Name TLV",
        6 => "LLDP System Description TLV",
        7 => "LLDP System Capabilities TLV",
        8 => "LLDP Management Address TLV",
        TLV_ORG => "LLDP organisationally specific TLV",
        _ => "LLDP TLV of a reserved type",
    }
}

fn bad(field: &'static str, value: usize) -> WireError {
    WireError::BadValue {
        field,
        value: value as u64,
    }
}

fn parse_id(v: &[u8], field: &'static str) -> Result<LldpId, WireError> {
    if !(2..=256).contains(&v.len()) {
        return Err(bad(field, v.len()));
    }
    Ok(LldpId {
        subtype: v[0],
        id: v[1..].to_vec(),
    })
}

/// The System Name as text: lossy UTF-8 (each invalid sequence becomes U+FFFD, three octets),
/// cut at a character boundary to the 255 octets the TLV can hold, so that whatever a
/// neighbour sent decodes to a name [`Lldpdu::emit`] can send again. A non-UTF-8 name is not
/// worth rejecting the neighbour's whole LLDPDU for; it is only displayed.
fn decode_system_name(v: &[u8]) -> String {
    let mut name = String::from_utf8_lossy(v).into_owned();
    if name.len() > 255 {
        let cut = (0..=255)
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        name.truncate(cut);
    }
    name
}

impl Lldpdu {
    /// Parses an LLDPDU (the bytes after the EtherType). `ours` says which organisationally
    /// specific TLV is our capability TLV.
    pub fn parse(b: &[u8], ours: OrgTlvId) -> Result<Self, WireError> {
        let mut at = 0;
        let mut index = 0;
        let (mut chassis, mut port, mut ttl) = (None, None, None);
        let (mut system_name, mut pfc, mut adaptive) = (None, None, None);
        while at < b.len() {
            need(&b[at..], 2, "LLDP TLV header")?;
            let hdr = be16(b, at);
            let ty = (hdr >> 9) as u8;
            let len = usize::from(hdr & 0x1ff);
            need(&b[at + 2..], len, tlv_name(ty))?;
            let v = &b[at + 2..at + 2 + len];
            at += 2 + len;
            match (index, ty) {
                (0, TLV_CHASSIS_ID) => {
                    chassis = Some(parse_id(v, "LLDP Chassis ID TLV length (2..=256)")?)
                }
                (0, _) => {
                    return Err(bad(
                        "LLDP Chassis ID TLV (missing: first TLV type)",
                        ty.into(),
                    ))
                }
                (1, TLV_PORT_ID) => port = Some(parse_id(v, "LLDP Port ID TLV length (2..=256)")?),
                (1, _) => {
                    return Err(bad(
                        "LLDP Port ID TLV (missing: second TLV type)",
                        ty.into(),
                    ))
                }
                (2, TLV_TTL) if len == 2 => ttl = Some(be16(v, 0)),
                (2, TLV_TTL) => return Err(bad("LLDP TTL TLV length (must be 2)", len)),
                (2, _) => return Err(bad("LLDP TTL TLV (missing: third TLV type)", ty.into())),
                (_, TLV_END) => break,
                (_, TLV_CHASSIS_ID | TLV_PORT_ID | TLV_TTL) => {
                    return Err(bad("LLDP mandatory TLV repeated (type)", ty.into()))
                }
                (_, TLV_SYSTEM_NAME) => {
                    system_name = Some(decode_system_name(v));
                }
                (_, TLV_ORG) => {
                    need(v, 4, "LLDP organisationally specific TLV (OUI and subtype)")?;
                    let (oui, sub) = ([v[0], v[1], v[2]], v[3]);
                    if oui == OUI_IEEE_8021 && sub == SUBTYPE_PFC_CONFIG {
                        if len != 6 {
                            return Err(bad(
                                "LLDP DCBX PFC configuration TLV length (must be 6)",
                                len,
                            ));
                        }
                        pfc = Some(PfcConfig {
                            willing: v[4] & 0x80 != 0,
                            mbc: v[4] & 0x40 != 0,
                            capability: v[4] & 0x0f,
                            enabled: v[5],
                        });
                    } else if oui == ours.oui && sub == ours.subtype {
                        if len < ADAPTIVE_TLV_LEN {
                            return Err(bad(
                                "LLDP adaptive-headroom TLV length (at least 10)",
                                len,
                            ));
                        }
                        if v[4] != ADAPTIVE_TLV_VERSION {
                            return Err(bad("LLDP adaptive-headroom TLV version", v[4].into()));
                        }
                        adaptive = Some(AdaptiveCapability {
                            responds: v[5] & 1 != 0,
                            initiates: v[5] & 2 != 0,
                            adaptive_headroom: v[5] & 4 != 0,
                            round_trip_ns: u32::from_be_bytes([v[6], v[7], v[8], v[9]]),
                        });
                    }
                }
                _ => {}
            }
            index += 1;
        }
        let missing = |what| WireError::Truncated {
            what,
            need: 2,
            have: 0,
        };
        Ok(Lldpdu {
            chassis_id: chassis.ok_or_else(|| missing("LLDP Chassis ID TLV (missing)"))?,
            port_id: port.ok_or_else(|| missing("LLDP Port ID TLV (missing)"))?,
            ttl: ttl.ok_or_else(|| missing("LLDP TTL TLV (missing)"))?,
            system_name,
            pfc,
            adaptive,
        })
    }

    /// Parses a whole frame, checking the EtherType; returns the sender's MAC too.
    pub fn parse_frame(frame: &[u8], ours: OrgTlvId) -> Result<(MacAddr, Self), WireError> {
        let eth = EthernetFrame::new_checked(frame)?;
        if eth.ethertype() != EtherType::LLDP {
            return Err(WireError::BadValue {
                field: "EtherType (expected 0x88CC)",
                value: u64::from(eth.ethertype()),
            });
        }
        Ok((eth.src(), Self::parse(eth.payload(), ours)?))
    }

    /// Writes the LLDPDU (no Ethernet header) into `buf`; returns its length.
    pub fn emit(&self, ours: OrgTlvId, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = TlvWriter { buf, at: 0 };
        for (ty, id, what) in [
            (
                TLV_CHASSIS_ID,
                &self.chassis_id,
                "LLDP Chassis ID (1..=255 octets)",
            ),
            (TLV_PORT_ID, &self.port_id, "LLDP Port ID (1..=255 octets)"),
        ] {
            if id.id.is_empty() || id.id.len() > 255 {
                return Err(bad(what, id.id.len()));
            }
            w.tlv(ty, &[&[id.subtype], &id.id])?;
        }
        w.tlv(TLV_TTL, &[&self.ttl.to_be_bytes()])?;
        if let Some(name) = &self.system_name {
            if name.len() > 255 {
                return Err(bad("LLDP System Name (at most 255 octets)", name.len()));
            }
            w.tlv(TLV_SYSTEM_NAME, &[name.as_bytes()])?;
        }
        if let Some(p) = self.pfc {
            let flags = u8::from(p.willing) << 7 | u8::from(p.mbc) << 6 | (p.capability & 0x0f);
            w.tlv(
                TLV_ORG,
                &[&OUI_IEEE_8021, &[SUBTYPE_PFC_CONFIG, flags, p.enabled]],
            )?;
        }
        if let Some(a) = self.adaptive {
            w.tlv(
                TLV_ORG,
                &[
                    &ours.oui,
                    &[ours.subtype, ADAPTIVE_TLV_VERSION, a.flags()],
                    &a.round_trip_ns.to_be_bytes(),
                ],
            )?;
        }
        w.tlv(TLV_END, &[])?;
        Ok(w.at)
    }

    /// Writes a complete frame from `src` to [`LLDP_DST`], padded to 60 bytes; returns its
    /// length.
    pub fn emit_frame(
        &self,
        src: MacAddr,
        ours: OrgTlvId,
        buf: &mut [u8],
    ) -> Result<usize, WireError> {
        let eth = EthernetRepr {
            dst: LLDP_DST,
            src,
            vlan: None,
            ethertype: EtherType::LLDP,
        };
        let at = eth.emit(buf)?;
        let end = at + self.emit(ours, &mut buf[at..])?;
        if end < MIN_FRAME_LEN {
            need(buf, MIN_FRAME_LEN, "LLDP frame buffer")?;
            buf[end..MIN_FRAME_LEN].fill(0);
            return Ok(MIN_FRAME_LEN);
        }
        Ok(end)
    }
}

struct TlvWriter<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl TlvWriter<'_> {
    fn tlv(&mut self, ty: u8, parts: &[&[u8]]) -> Result<(), WireError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        need(&self.buf[self.at..], 2 + len, "LLDP frame buffer")?;
        let hdr = (u16::from(ty) << 9) | len as u16;
        self.buf[self.at..self.at + 2].copy_from_slice(&hdr.to_be_bytes());
        self.at += 2;
        for p in parts {
            self.buf[self.at..self.at + p.len()].copy_from_slice(p);
            self.at += p.len();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured with tshark from `lldpd` 1.0.16 (Debian 12) on a veth: chassis and port by
    /// MAC, TTL 120, system name "vm", description, capabilities, management address, port
    /// description and two 802.3 organisationally specific TLVs we do not decode.
    const LLDPD_FRAME: [u8; 189] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e, 0x22, 0xab, 0x6d, 0x86, 0xaf, 0xa1, 0x88, 0xcc, 0x02,
        0x07, 0x04, 0x22, 0xab, 0x6d, 0x86, 0xaf, 0xa1, 0x04, 0x07, 0x03, 0x22, 0xab, 0x6d, 0x86,
        0xaf, 0xa1, 0x06, 0x02, 0x00, 0x78, 0x0a, 0x02, 0x76, 0x6d, 0x0c, 0x55, 0x44, 0x65, 0x62,
        0x69, 0x61, 0x6e, 0x20, 0x47, 0x4e, 0x55, 0x2f, 0x4c, 0x69, 0x6e, 0x75, 0x78, 0x20, 0x31,
        0x32, 0x20, 0x28, 0x62, 0x6f, 0x6f, 0x6b, 0x77, 0x6f, 0x72, 0x6d, 0x29, 0x20, 0x4c, 0x69,
        0x6e, 0x75, 0x78, 0x20, 0x36, 0x2e, 0x31, 0x38, 0x2e, 0x34, 0x34, 0x2d, 0x66, 0x63, 0x2d,
        0x76, 0x37, 0x36, 0x39, 0x20, 0x23, 0x31, 0x20, 0x53, 0x4d, 0x50, 0x20, 0x50, 0x52, 0x45,
        0x45, 0x4d, 0x50, 0x54, 0x5f, 0x44, 0x59, 0x4e, 0x41, 0x4d, 0x49, 0x43, 0x20, 0x40, 0x30,
        0x20, 0x78, 0x38, 0x36, 0x5f, 0x36, 0x34, 0x0e, 0x04, 0x00, 0x9c, 0x00, 0x80, 0x10, 0x18,
        0x11, 0x02, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0xab, 0x6d, 0xff, 0xfe,
        0x86, 0xaf, 0xa1, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x08, 0x04, 0x6c, 0x6b, 0x63, 0x30,
        0xfe, 0x09, 0x00, 0x12, 0x0f, 0x03, 0x01, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x09, 0x00, 0x12,
        0x0f, 0x01, 0x00, 0x80, 0x00, 0x00, 0x36, 0x00, 0x00,
    ];

    fn ours() -> Lldpdu {
        Lldpdu {
            chassis_id: LldpId::mac(CHASSIS_SUBTYPE_MAC, MacAddr([2, 0, 0, 0, 0, 1])),
            port_id: LldpId::name(PORT_SUBTYPE_IFNAME, "eth7"),
            ttl: 120,
            system_name: Some("lossless".into()),
            pfc: Some(PfcConfig {
                willing: false,
                mbc: false,
                capability: 8,
                enabled: 0x18,
            }),
            adaptive: Some(AdaptiveCapability {
                responds: true,
                initiates: true,
                adaptive_headroom: true,
                round_trip_ns: 123_456,
            }),
        }
    }

    #[test]
    fn parses_captured_lldpd_frame() {
        let (src, d) = Lldpdu::parse_frame(&LLDPD_FRAME, OrgTlvId::default()).unwrap();
        assert_eq!(src, MacAddr([0x22, 0xab, 0x6d, 0x86, 0xaf, 0xa1]));
        assert_eq!(d.chassis_id.subtype, CHASSIS_SUBTYPE_MAC);
        assert_eq!(d.chassis_id.to_string(), "22:ab:6d:86:af:a1");
        assert_eq!(d.port_id.subtype, PORT_SUBTYPE_MAC);
        assert_eq!(d.ttl, 120);
        assert_eq!(d.system_name.as_deref(), Some("vm"));
        assert_eq!(d.pfc, None);
        assert_eq!(d.adaptive, None);
    }

    #[test]
    fn round_trip_with_exact_layout() {
        let d = ours();
        let mut buf = [0u8; 128];
        let n = d
            .emit_frame(MacAddr([2, 0, 0, 0, 0, 1]), OrgTlvId::default(), &mut buf)
            .unwrap();
        let f = &buf[..n];
        // chassis (2+7) port (2+5) ttl (2+2) name (2+8) pfc (2+6) ours (2+10) end (2)
        assert_eq!(n, 14 + 9 + 7 + 4 + 10 + 8 + 12 + 2);
        let pfc_at = 14 + 9 + 7 + 4 + 10;
        assert_eq!(
            &f[pfc_at..pfc_at + 8],
            &[0xfe, 0x06, 0x00, 0x80, 0xc2, 0x0b, 0x08, 0x18]
        );
        assert_eq!(
            &f[pfc_at + 8..],
            &[0xfe, 0x0a, 0x02, 0x4c, 0x4c, 0x01, 0x01, 0x07, 0x00, 0x01, 0xe2, 0x40, 0x00, 0x00]
        );
        let (src, back) = Lldpdu::parse_frame(f, OrgTlvId::default()).unwrap();
        assert_eq!(src, MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(back, d);
        // Under another OUI our TLV is an unknown TLV, skipped.
        let other = OrgTlvId {
            oui: [0x00, 0x11, 0x22],
            subtype: 9,
        };
        assert_eq!(Lldpdu::parse_frame(f, other).unwrap().1.adaptive, None);
        let mut buf2 = [0u8; 128];
        let n2 = d.emit_frame(MacAddr::default(), other, &mut buf2).unwrap();
        assert_eq!(&buf2[n2 - 12..n2 - 8], &[0x00, 0x11, 0x22, 9]);
        assert_eq!(
            Lldpdu::parse_frame(&buf2[..n2], other).unwrap().1.adaptive,
            d.adaptive
        );
    }

    #[test]
    fn short_pdu_is_padded() {
        let mut d = ours();
        d.system_name = None;
        d.pfc = None;
        d.adaptive = None;
        let mut buf = [0xffu8; 64];
        assert_eq!(
            d.emit_frame(MacAddr::default(), OrgTlvId::default(), &mut buf)
                .unwrap(),
            60
        );
        assert!(buf[14 + 9 + 7 + 4..60].iter().all(|&b| b == 0));
        assert_eq!(
            Lldpdu::parse_frame(&buf[..60], OrgTlvId::default())
                .unwrap()
                .1,
            d
        );
    }

    fn parse(b: &[u8]) -> Result<Lldpdu, WireError> {
        Lldpdu::parse(b, OrgTlvId::default())
    }

    /// Found by the `lldp` fuzz target: a System Name of 255 octets that are not UTF-8 decoded
    /// to 765 octets of U+FFFD, which `emit` then refused ("at most 255 octets").
    #[test]
    fn non_utf8_system_name_stays_within_the_tlv() {
        let mut b = vec![
            0x02, 0x02, 0x04, 0xaa, 0x04, 0x02, 0x05, b'x', 0x06, 0x02, 0x00, 0x78,
        ];
        b.extend_from_slice(&[0x0a, 0xff]); // System Name, 255 octets
        b.extend_from_slice(b"ab");
        b.extend_from_slice(&[0xff; 253]);
        let d = parse(&b).unwrap();
        let name = d.system_name.clone().unwrap();
        assert!(
            name.starts_with("ab\u{fffd}") && name.len() <= 255,
            "{name:?}"
        );
        assert_eq!(name.len(), 2 + 84 * 3);
        let mut out = [0u8; 512];
        let n = d.emit(OrgTlvId::default(), &mut out).unwrap();
        assert_eq!(parse(&out[..n]).unwrap(), d);
        // A valid UTF-8 name of 255 octets is kept whole.
        let mut b2 = b[..14].to_vec();
        b2.extend_from_slice(&[b'n'; 255]);
        assert_eq!(parse(&b2).unwrap().system_name.unwrap().len(), 255);
    }

    #[test]
    fn malformed_inputs_name_the_tlv() {
        let mut buf = [0u8; 128];
        let n = ours().emit(OrgTlvId::default(), &mut buf).unwrap();
        let good = &buf[..n];
        // Every cut inside the mandatory TLVs or inside a later TLV is an error; a cut at a
        // TLV boundary after TTL is a valid LLDPDU without End (which is optional since 2009).
        let boundaries = [20, 30, 38, 50];
        for cut in 0..n - 2 {
            assert_eq!(
                parse(&good[..cut]).is_ok(),
                boundaries.contains(&cut),
                "cut at {cut}"
            );
        }
        // A TLV whose length overruns the frame.
        let mut over = good.to_vec();
        over[10] = 0xff; // Port ID length 255
        assert!(matches!(
            parse(&over),
            Err(WireError::Truncated {
                what: "LLDP Port ID TLV",
                ..
            })
        ));
        // Port ID first: Chassis ID missing.
        let mut swapped = good.to_vec();
        swapped[0] = TLV_PORT_ID << 1;
        assert!(matches!(
            parse(&swapped),
            Err(WireError::BadValue { field, value: 2 }) if field.contains("Chassis ID")
        ));
        // TTL with the wrong length.
        let mut ttl = vec![
            0x02, 0x02, 0x04, 0xaa, 0x04, 0x02, 0x05, b'x', 0x06, 0x01, 0x00,
        ];
        assert!(matches!(
            parse(&ttl),
            Err(WireError::BadValue {
                field: "LLDP TTL TLV length (must be 2)",
                value: 1
            })
        ));
        // Chassis and port only: TTL missing.
        ttl.truncate(8);
        assert!(matches!(
            parse(&ttl),
            Err(WireError::Truncated {
                what: "LLDP TTL TLV (missing)",
                ..
            })
        ));
        // Empty Chassis ID value.
        assert!(matches!(
            parse(&[0x02, 0x01, 0x04]),
            Err(WireError::BadValue { field, .. }) if field.contains("Chassis ID TLV length")
        ));
        // PFC TLV of the wrong length.
        let mut pfc = good.to_vec();
        let at = 9 + 7 + 4 + 10;
        pfc[at + 1] = 0x05;
        pfc.remove(at + 7);
        assert!(matches!(
            parse(&pfc),
            Err(WireError::BadValue { field, value: 5 }) if field.contains("PFC")
        ));
        // Our TLV with an unknown version.
        let mut ver = good.to_vec();
        ver[n - 8] = 9;
        assert!(matches!(
            parse(&ver),
            Err(WireError::BadValue { field, value: 9 }) if field.contains("version")
        ));
        // A repeated TTL.
        let mut rep = good[..n - 2].to_vec();
        rep.extend_from_slice(&[0x06, 0x02, 0x00, 0x10, 0x00, 0x00]);
        assert!(matches!(
            parse(&rep),
            Err(WireError::BadValue { value: 3, .. })
        ));
        // Unknown TLVs (type 9..126) are skipped, and bytes after End are ignored.
        let mut unknown = good[..n - 2].to_vec();
        unknown.extend_from_slice(&[0x12, 0x03, 1, 2, 3, 0x00, 0x00, 0xde, 0xad]);
        assert_eq!(parse(&unknown).unwrap(), ours());
        // Emit refuses what it cannot encode.
        let mut empty = ours();
        empty.port_id.id.clear();
        assert!(empty.emit(OrgTlvId::default(), &mut [0u8; 128]).is_err());
        assert!(ours().emit(OrgTlvId::default(), &mut [0u8; 20]).is_err());
    }
}
