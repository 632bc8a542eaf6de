//! rtnetlink: the NIC's own DCB/PFC settings (RTM_GETDCB, the interface `dcb pfc show` uses).
//! The link itself (RTM_GETLINK) is [`crate::kernel::link`]'s.

use serde::Serialize;

use crate::kernel::netlink::{split_replies, Attrs, MsgBuilder, Netlink, NlError, Proto};

const RTM_GETDCB: u16 = 78;
const DCB_CMD_IEEE_GET: u8 = 21;
const DCB_ATTR_IFNAME: u16 = 1;
const DCB_ATTR_IEEE: u16 = 13;
const DCB_ATTR_IEEE_PFC: u16 = 2;
const DCB_ATTR_DCB_BUFFER: u16 = 10;

/// The NIC's own PFC (IEEE 802.1Qaz DCB, `struct ieee_pfc`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DcbPfc {
    /// Priorities the NIC can do PFC on at once.
    pub pfc_cap: u8,
    /// Priorities with PFC on in the NIC (bit p = priority p).
    pub pfc_en: u8,
    /// MACsec bypass capability.
    pub mbc: u8,
    /// Headroom allowance in bits (`dcb pfc ... delay`).
    pub delay_bits: u16,
    /// PFC frames sent per priority.
    pub requests: [u64; 8],
    /// PFC frames received per priority.
    pub indications: [u64; 8],
    /// Whether the device also has a `dcb buffer` (the driver implements DCB buffer ops).
    pub buffer: bool,
}

/// Reads the NIC's IEEE DCB PFC settings; EOPNOTSUPP means the device has no DCB at all.
pub fn dcb_pfc(nl: &mut Netlink, iface: &str) -> Result<Option<DcbPfc>, NlError> {
    let mut m = MsgBuilder::new(
        RTM_GETDCB,
        0,
        &[libc::AF_UNSPEC as u8, DCB_CMD_IEEE_GET, 0, 0],
    );
    m.attr_str(DCB_ATTR_IFNAME, iface);
    parse_dcb_pfc(&nl.request("rtnl-dcb-ieee-get", Proto::Route, &m)?)
}

/// Parses a DCB_CMD_IEEE_GET reply (`None`: the device answered without a PFC attribute).
pub fn parse_dcb_pfc(raw: &[u8]) -> Result<Option<DcbPfc>, NlError> {
    let replies = split_replies(raw)?;
    let r = replies
        .first()
        .ok_or_else(|| NlError::Malformed("no DCB reply".into()))?;
    let attrs = r
        .payload
        .get(4..)
        .ok_or_else(|| NlError::Malformed("dcbmsg shorter than 4 bytes".into()))?;
    let a = Attrs::parse(attrs)?;
    let Some(ieee) = a.nested(DCB_ATTR_IEEE)? else {
        return Ok(None);
    };
    let buffer = ieee.get(DCB_ATTR_DCB_BUFFER).is_some();
    let Some(v) = ieee.get(DCB_ATTR_IEEE_PFC) else {
        return Ok(None);
    };
    // struct ieee_pfc { u8 pfc_cap, pfc_en, mbc; u16 delay; u64 requests[8], indications[8]; }
    if v.len() < 136 {
        return Err(NlError::Malformed(format!(
            "ieee_pfc of {} bytes, expected 136",
            v.len()
        )));
    }
    let u64_at = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&v[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    Ok(Some(DcbPfc {
        pfc_cap: v[0],
        pfc_en: v[1],
        mbc: v[2],
        delay_bits: u16::from_ne_bytes([v[4], v[5]]),
        requests: std::array::from_fn(|i| u64_at(8 + 8 * i)),
        indications: std::array::from_fn(|i| u64_at(72 + 8 * i)),
        buffer,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DCB reply built to the kernel's `struct ieee_pfc` layout (no DCB-capable device
    /// exists on the machines this was written on, so this one is constructed, not captured).
    #[test]
    fn ieee_pfc_layout() {
        let mut pfc = vec![0u8; 136];
        pfc[0] = 8;
        pfc[1] = 0b0000_1000;
        pfc[4..6].copy_from_slice(&3000u16.to_ne_bytes());
        pfc[8 + 8 * 3..16 + 8 * 3].copy_from_slice(&17u64.to_ne_bytes());
        pfc[72 + 8 * 3..80 + 8 * 3].copy_from_slice(&5u64.to_ne_bytes());
        let mut m = MsgBuilder::new(RTM_GETDCB, 0, &[0, DCB_CMD_IEEE_GET, 0, 0]);
        m.nest(DCB_ATTR_IEEE)
            .attr(DCB_ATTR_IEEE_PFC, &pfc)
            .end_nest();
        // A reply has no ACK flags that matter here; the builder's header is a valid message.
        let p = parse_dcb_pfc(&m.finish(1)).unwrap().unwrap();
        assert_eq!((p.pfc_cap, p.pfc_en, p.delay_bits), (8, 8, 3000));
        assert_eq!(p.requests[3], 17);
        assert_eq!(p.indications[3], 5);
        assert!(!p.buffer);
        // A truncated ieee_pfc is an error.
        let mut m = MsgBuilder::new(RTM_GETDCB, 0, &[0, DCB_CMD_IEEE_GET, 0, 0]);
        m.nest(DCB_ATTR_IEEE)
            .attr(DCB_ATTR_IEEE_PFC, &pfc[..100])
            .end_nest();
        assert!(parse_dcb_pfc(&m.finish(1)).is_err());
    }
}
