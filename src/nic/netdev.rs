//! The `netdev` generic netlink family: which XDP features, AF_XDP zero-copy, XDP RX metadata
//! and AF_XDP TX metadata a device supports (`Documentation/netlink/specs/netdev.yaml`).

use serde::Serialize;

use crate::kernel::netlink::{
    genl_attrs, split_replies, Attrs, MsgBuilder, Netlink, NlError, Proto,
};

const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;
const NETDEV_A_DEV_XDP_RX_METADATA_FEATURES: u16 = 5;
const NETDEV_A_DEV_XSK_FEATURES: u16 = 6;

/// `enum netdev_xdp_act` bit names, in bit order.
const XDP_ACT: [&str; 7] = [
    "basic",
    "redirect",
    "ndo-xmit",
    "xsk-zerocopy",
    "hw-offload",
    "rx-sg",
    "ndo-xmit-sg",
];
/// `enum netdev_xdp_rx_metadata` bit names.
const RX_META: [&str; 3] = ["timestamp", "hash", "vlan-tag"];
/// `enum netdev_xsk_flags` bit names.
const XSK: [&str; 3] = ["tx-timestamp", "tx-checksum", "tx-launch-time-fifo"];

/// What the kernel says a device supports for XDP and AF_XDP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetdevFeatures {
    /// Interface index.
    pub ifindex: u32,
    /// XDP features (`basic` = native XDP, `redirect`, `xsk-zerocopy` = AF_XDP zero-copy, ...).
    pub xdp_features: Vec<String>,
    /// Fragments per frame in zero-copy mode (absent if the kernel did not say).
    pub xdp_zc_max_segs: Option<u32>,
    /// XDP RX metadata kfuncs the driver implements (`timestamp`, `hash`, `vlan-tag`).
    pub rx_metadata: Vec<String>,
    /// AF_XDP TX metadata the driver implements (`tx-timestamp`, `tx-checksum`, ...).
    pub xsk_features: Vec<String>,
}

impl NetdevFeatures {
    /// True if `name` is among the XDP features.
    pub fn xdp(&self, name: &str) -> bool {
        self.xdp_features.iter().any(|f| f == name)
    }
}

fn names(bits: u64, table: &[&str]) -> Vec<String> {
    (0..64)
        .filter(|b| bits & (1u64 << b) != 0)
        .map(|b| {
            table
                .get(b)
                .map_or_else(|| format!("bit{b}"), |s| (*s).to_string())
        })
        .collect()
}

/// Asks the kernel for device `ifindex`.
pub fn query(nl: &mut Netlink, ifindex: u32) -> Result<NetdevFeatures, NlError> {
    let fam = nl.family("netdev")?;
    let mut m = MsgBuilder::genl(fam, NETDEV_CMD_DEV_GET, 1, 0);
    m.attr(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes());
    let raw = nl.request("netdev-dev-get", Proto::Generic, &m)?;
    parse(&raw)
}

/// Parses a `dev-get` reply.
pub fn parse(raw: &[u8]) -> Result<NetdevFeatures, NlError> {
    let replies = split_replies(raw)?;
    let r = replies
        .first()
        .ok_or_else(|| NlError::Malformed("no netdev dev-get reply".into()))?;
    let a = Attrs::parse(genl_attrs(r.payload)?)?;
    Ok(NetdevFeatures {
        ifindex: a
            .u32(NETDEV_A_DEV_IFINDEX)?
            .ok_or_else(|| NlError::Malformed("netdev reply without ifindex".into()))?,
        xdp_features: names(a.u64(NETDEV_A_DEV_XDP_FEATURES)?.unwrap_or(0), &XDP_ACT),
        xdp_zc_max_segs: a.u32(NETDEV_A_DEV_XDP_ZC_MAX_SEGS)?,
        rx_metadata: names(
            a.u64(NETDEV_A_DEV_XDP_RX_METADATA_FEATURES)?.unwrap_or(0),
            &RX_META,
        ),
        xsk_features: names(a.u64(NETDEV_A_DEV_XSK_FEATURES)?.unwrap_or(0), &XSK),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_bits_are_named_by_number() {
        assert_eq!(
            names(0b1001 | 1 << 40, &XDP_ACT),
            ["basic", "xsk-zerocopy", "bit40"]
        );
    }
}
