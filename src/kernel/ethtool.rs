//! The `ethtool` generic netlink family: link modes and state, PAUSE settings and counters,
//! channels, features, private flags and timestamping (`Documentation/networking/ethtool-netlink.rst`).
//!
//! Requests ask for verbose bitsets, so every bit arrives with its name and no string set has
//! to be fetched separately.

use serde::Serialize;

use super::netlink::{genl_attrs, split_replies, Attrs, MsgBuilder, Netlink, NlError, Proto};

const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
const ETHTOOL_FLAG_STATS: u32 = 1 << 2;
/// Every `*_GET` request's header attribute.
const A_HEADER: u16 = 1;

const MSG_LINKMODES_GET: u8 = 4;
const MSG_LINKSTATE_GET: u8 = 6;
const MSG_FEATURES_GET: u8 = 11;
const MSG_PRIVFLAGS_GET: u8 = 13;
const MSG_CHANNELS_GET: u8 = 17;
const MSG_PAUSE_GET: u8 = 21;
const MSG_TSINFO_GET: u8 = 25;

/// A request for `cmd` on `iface`.
fn get(nl: &mut Netlink, name: &str, cmd: u8, iface: &str, flags: u32) -> Result<Vec<u8>, NlError> {
    let fam = nl.family("ethtool")?;
    let mut m = MsgBuilder::genl(fam, cmd, 1, 0);
    m.nest(A_HEADER).attr_str(ETHTOOL_A_HEADER_DEV_NAME, iface);
    if flags != 0 {
        m.attr(ETHTOOL_A_HEADER_FLAGS, &flags.to_ne_bytes());
    }
    m.end_nest();
    nl.request(name, Proto::Generic, &m)
}

/// The attributes of the single reply to a `*_GET`.
fn reply_attrs(
    raw: &[u8],
    what: &str,
    f: impl FnOnce(&Attrs<'_>) -> Result<(), NlError>,
) -> Result<(), NlError> {
    let replies = split_replies(raw)?;
    let r = replies
        .first()
        .ok_or_else(|| NlError::Malformed(format!("no {what} reply")))?;
    f(&Attrs::parse(genl_attrs(r.payload)?)?)
}

/// One bit of a verbose bitset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bit {
    /// Index.
    pub index: u32,
    /// Name (empty if the kernel did not send one).
    pub name: String,
    /// Set.
    pub on: bool,
}

/// A parsed bitset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bitset {
    /// A list (no mask): only the set bits are sent, so a missing name is a clear bit.
    pub list: bool,
    /// The bits sent.
    pub bits: Vec<Bit>,
}

impl Bitset {
    /// The value of the bit called `name`: `None` if the kernel sent every bit with a mask and
    /// this one was not among them.
    pub fn get(&self, name: &str) -> Option<bool> {
        match self.bits.iter().find(|b| b.name == name) {
            Some(b) => Some(b.on),
            None if self.list => Some(false),
            None => None,
        }
    }
}

/// Parses an `ETHTOOL_A_BITSET_*` nest (verbose form; a compact one yields numbered bits).
pub fn parse_bitset(buf: &[u8]) -> Result<Bitset, NlError> {
    const NOMASK: u16 = 1;
    const SIZE: u16 = 2;
    const BITS: u16 = 3;
    const VALUE: u16 = 4;
    const BIT: u16 = 1;
    const BIT_INDEX: u16 = 1;
    const BIT_NAME: u16 = 2;
    const BIT_VALUE: u16 = 3;
    let a = Attrs::parse(buf)?;
    let nomask = a.flag(NOMASK);
    let mut out = Vec::new();
    if let Some(bits) = a.nested(BITS)? {
        for b in bits.all(BIT) {
            let b = Attrs::parse(b)?;
            out.push(Bit {
                index: b
                    .u32(BIT_INDEX)?
                    .ok_or_else(|| NlError::Malformed("bitset bit without an index".into()))?,
                name: b.string(BIT_NAME)?.unwrap_or_default(),
                // In a list (no mask) every listed bit is set; otherwise the flag says.
                on: nomask || b.flag(BIT_VALUE),
            });
        }
    } else if let Some(v) = a.get(VALUE) {
        let size = a.u32(SIZE)?.unwrap_or(v.len() as u32 * 8);
        for i in 0..size.min(v.len() as u32 * 8) {
            let word = v.get((i / 32 * 4) as usize..(i / 32 * 4 + 4) as usize);
            let on = word
                .and_then(|w| w.try_into().ok())
                .map(u32::from_ne_bytes)
                .is_some_and(|w| w & (1 << (i % 32)) != 0);
            out.push(Bit {
                index: i,
                name: String::new(),
                on,
            });
        }
    }
    Ok(Bitset {
        list: nomask,
        bits: out,
    })
}

/// Link speed, duplex and autonegotiation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkModes {
    /// Autonegotiation on.
    pub autoneg: Option<bool>,
    /// Speed in Mbit/s (None when unknown, e.g. link down).
    pub speed_mbps: Option<u32>,
    /// "full", "half" or "unknown".
    pub duplex: String,
}

/// Reads link modes.
pub fn link_modes(nl: &mut Netlink, iface: &str) -> Result<LinkModes, NlError> {
    parse_link_modes(&get(nl, "ethtool-linkmodes", MSG_LINKMODES_GET, iface, 0)?)
}

/// Parses a LINKMODES_GET reply.
pub fn parse_link_modes(raw: &[u8]) -> Result<LinkModes, NlError> {
    let mut out = None;
    reply_attrs(raw, "linkmodes", |a| {
        let speed = a.u32(5)?;
        out = Some(LinkModes {
            autoneg: a.u8(2)?.map(|v| v == 1),
            // SPEED_UNKNOWN is u32::MAX.
            speed_mbps: speed.filter(|&s| s != u32::MAX && s != 0),
            duplex: match a.u8(6)? {
                Some(0) => "half",
                Some(1) => "full",
                _ => "unknown",
            }
            .to_string(),
        });
        Ok(())
    })?;
    out.ok_or_else(|| NlError::Malformed("linkmodes".into()))
}

/// Reads whether the link is up (`ETHTOOL_A_LINKSTATE_LINK`).
pub fn link_up(nl: &mut Netlink, iface: &str) -> Result<Option<bool>, NlError> {
    parse_link_state(&get(nl, "ethtool-linkstate", MSG_LINKSTATE_GET, iface, 0)?)
}

/// Parses a LINKSTATE_GET reply.
pub fn parse_link_state(raw: &[u8]) -> Result<Option<bool>, NlError> {
    let mut out = None;
    reply_attrs(raw, "linkstate", |a| {
        out = a.u8(2)?.map(|v| v != 0);
        Ok(())
    })?;
    Ok(out)
}

/// The NIC's own 802.3x PAUSE settings and counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    /// PAUSE autonegotiation.
    pub autoneg: bool,
    /// The NIC honours received PAUSE frames itself (and usually swallows them).
    pub rx: bool,
    /// The NIC sends PAUSE frames itself.
    pub tx: bool,
    /// PAUSE frames the NIC sent (driver statistics, if it reports them).
    pub tx_frames: Option<u64>,
    /// PAUSE frames the NIC received.
    pub rx_frames: Option<u64>,
}

/// Reads PAUSE settings (with statistics where the driver has them).
pub fn pause(nl: &mut Netlink, iface: &str) -> Result<Pause, NlError> {
    parse_pause(&get(
        nl,
        "ethtool-pause",
        MSG_PAUSE_GET,
        iface,
        ETHTOOL_FLAG_STATS,
    )?)
}

/// Parses a PAUSE_GET reply.
pub fn parse_pause(raw: &[u8]) -> Result<Pause, NlError> {
    let mut out = None;
    reply_attrs(raw, "pause", |a| {
        let stats = a.nested(5)?;
        out = Some(Pause {
            autoneg: a.u8(2)? == Some(1),
            rx: a.u8(3)? == Some(1),
            tx: a.u8(4)? == Some(1),
            tx_frames: stats.as_ref().map(|s| s.u64(2)).transpose()?.flatten(),
            rx_frames: stats.as_ref().map(|s| s.u64(3)).transpose()?.flatten(),
        });
        Ok(())
    })?;
    out.ok_or_else(|| NlError::Malformed("pause".into()))
}

/// Queue counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Channels {
    /// Combined RX/TX channels in use.
    pub combined: Option<u32>,
    /// Maximum combined channels.
    pub combined_max: Option<u32>,
    /// RX-only channels.
    pub rx: Option<u32>,
    /// TX-only channels.
    pub tx: Option<u32>,
}

impl Channels {
    /// RX queues in use: the combined channels and the RX-only ones (veth has only those);
    /// `None` where the driver reports neither.
    pub fn rx_queues(&self) -> Option<u32> {
        let n = self.combined.unwrap_or(0) + self.rx.unwrap_or(0);
        (n > 0).then_some(n)
    }
}

/// Reads channel counts.
pub fn channels(nl: &mut Netlink, iface: &str) -> Result<Channels, NlError> {
    parse_channels(&get(nl, "ethtool-channels", MSG_CHANNELS_GET, iface, 0)?)
}

/// Parses a CHANNELS_GET reply.
pub fn parse_channels(raw: &[u8]) -> Result<Channels, NlError> {
    let mut out = Channels::default();
    reply_attrs(raw, "channels", |a| {
        out = Channels {
            combined_max: a.u32(5)?,
            rx: a.u32(6)?,
            tx: a.u32(7)?,
            combined: a.u32(9)?,
        };
        Ok(())
    })?;
    Ok(out)
}

/// The offload features this project cares about (`ethtool -k` names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Features {
    /// `rx-all`: receive frames the MAC would drop (on igb/igc/ixgbe: pass MAC control frames).
    pub rx_all: Option<bool>,
    /// `rx-all` can be changed.
    pub rx_all_changeable: bool,
    /// `rx-vlan-hw-parse` (an 802.1Q tag stripped into metadata, invisible to XDP).
    pub rx_vlan_hw_parse: Option<bool>,
    /// `tx-vlan-hw-insert`.
    pub tx_vlan_hw_insert: Option<bool>,
}

/// Reads the features.
pub fn features(nl: &mut Netlink, iface: &str) -> Result<Features, NlError> {
    parse_features(&get(nl, "ethtool-features", MSG_FEATURES_GET, iface, 0)?)
}

/// Parses a FEATURES_GET reply.
pub fn parse_features(raw: &[u8]) -> Result<Features, NlError> {
    let mut out = Features::default();
    reply_attrs(raw, "features", |a| {
        let hw = a.get(2).map(parse_bitset).transpose()?.unwrap_or_default();
        let active = a.get(4).map(parse_bitset).transpose()?.unwrap_or_default();
        let nochange = a.get(5).map(parse_bitset).transpose()?.unwrap_or_default();
        out = Features {
            rx_all: active.get("rx-all"),
            rx_all_changeable: hw.get("rx-all") == Some(true)
                && nochange.get("rx-all") != Some(true),
            rx_vlan_hw_parse: active.get("rx-vlan-hw-parse"),
            tx_vlan_hw_insert: active.get("tx-vlan-hw-insert"),
        };
        Ok(())
    })?;
    Ok(out)
}

/// Reads the driver's private flags (`ethtool --show-priv-flags`).
pub fn priv_flags(nl: &mut Netlink, iface: &str) -> Result<Vec<Bit>, NlError> {
    parse_priv_flags(&get(nl, "ethtool-privflags", MSG_PRIVFLAGS_GET, iface, 0)?)
}

/// Parses a PRIVFLAGS_GET reply.
pub fn parse_priv_flags(raw: &[u8]) -> Result<Vec<Bit>, NlError> {
    let mut out = Vec::new();
    reply_attrs(raw, "privflags", |a| {
        out = a
            .get(2)
            .map(parse_bitset)
            .transpose()?
            .unwrap_or_default()
            .bits;
        Ok(())
    })?;
    Ok(out)
}

/// Timestamping capabilities (`ethtool -T`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TsInfo {
    /// SOF_TIMESTAMPING_* capabilities by name (`hardware-transmit`, `software-receive`, ...).
    pub timestamping: Vec<String>,
    /// PTP hardware clock index.
    pub phc_index: Option<u32>,
}

impl TsInfo {
    /// True if the device stamps in hardware both ways.
    pub fn hardware(&self) -> bool {
        ["hardware-transmit", "hardware-receive"]
            .iter()
            .all(|c| self.timestamping.iter().any(|t| t == c))
    }
}

/// Reads timestamping capabilities.
pub fn ts_info(nl: &mut Netlink, iface: &str) -> Result<TsInfo, NlError> {
    parse_ts_info(&get(nl, "ethtool-tsinfo", MSG_TSINFO_GET, iface, 0)?)
}

/// Parses a TSINFO_GET reply.
pub fn parse_ts_info(raw: &[u8]) -> Result<TsInfo, NlError> {
    let mut out = TsInfo::default();
    reply_attrs(raw, "tsinfo", |a| {
        let ts = a.get(2).map(parse_bitset).transpose()?.unwrap_or_default();
        out = TsInfo {
            timestamping: ts
                .bits
                .into_iter()
                .filter(|b| b.on)
                .map(|b| {
                    if b.name.is_empty() {
                        format!("bit{}", b.index)
                    } else {
                        b.name
                    }
                })
                .collect(),
            // -1 (no PHC) arrives as u32::MAX.
            phc_index: a.u32(5)?.filter(|&i| i != u32::MAX),
        };
        Ok(())
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_bitset_reads_words() {
        // SIZE 40, VALUE two words: bits 0 and 33 set.
        let mut m = MsgBuilder::new(0, 0, &[]);
        m.attr(2, &40u32.to_ne_bytes());
        let mut v = 1u32.to_ne_bytes().to_vec();
        v.extend_from_slice(&2u32.to_ne_bytes());
        m.attr(4, &v);
        let b = m.finish(0);
        let bits = parse_bitset(&b[16..]).unwrap().bits;
        let on: Vec<u32> = bits.iter().filter(|b| b.on).map(|b| b.index).collect();
        assert_eq!(on, [0, 33]);
    }
}
