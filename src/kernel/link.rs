//! The link itself, from rtnetlink (RTM_GETLINK): the facts of an interface the daemon, its
//! tools and `lossless doctor` read (MAC, MTU, carrier, operational state, ...).
//!
//! **Why not sysfs.** `/sys/class/net` shows the network namespace of whoever mounted that
//! sysfs, not the reader's. `ip netns exec` mounts a fresh one; `nsenter --net`, a service
//! that joins a namespace (`NetworkNamespacePath=`) or a process that calls `setns` do not,
//! and there sysfs shows the host's interfaces: a port name absent there read as "no
//! carrier" (its egress held for good) and a zero MAC, and a name present there read another
//! interface's facts. A netlink socket answers for the namespace of the thread that opened
//! it, which is the daemon's own.

use serde::Serialize;

use super::netlink::{split_replies, Attrs, MsgBuilder, Netlink, NlError, Proto};
use crate::wire::MacAddr;

const RTM_GETLINK: u16 = 18;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MTU: u16 = 4;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_NUM_TX_QUEUES: u16 = 31;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFLA_CARRIER: u16 = 33;
const IFLA_XDP: u16 = 43;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_CARRIER_DOWN_COUNT: u16 = 48;
const IFLA_PARENT_DEV_NAME: u16 = 56;
const IFF_PROMISC: u32 = 0x100;
const IFF_ALLMULTI: u32 = 0x200;
const IFF_UP: u32 = 0x1;

/// What RTM_GETLINK says about an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkInfo {
    /// Interface index.
    pub ifindex: u32,
    /// Administratively up.
    pub up: bool,
    /// Carrier present (`netif_carrier_ok` this instant, whether the interface is up or not:
    /// see [`LinkInfo::has_carrier`]).
    pub carrier: Option<bool>,
    /// Times the carrier was lost since the interface was created.
    #[serde(skip)]
    pub carrier_down_count: Option<u32>,
    /// Hardware address, where the interface has a 6-byte one.
    pub mac: Option<MacAddr>,
    /// RFC 2863 operational state ("up", "down", "lowerlayerdown", ...).
    pub operstate: String,
    /// MTU.
    pub mtu: Option<u32>,
    /// Queues the device has (not necessarily active).
    pub rx_queues: Option<u32>,
    /// TX queues.
    pub tx_queues: Option<u32>,
    /// Receives every multicast group (IFF_ALLMULTI).
    pub allmulti: bool,
    /// Promiscuous.
    pub promisc: bool,
    /// Software link kind (`veth`, `bridge`, ...); absent for a physical NIC.
    pub kind: Option<String>,
    /// Parent device (PCI address of a physical NIC).
    pub parent: Option<String>,
    /// XDP program attached now: "none", "native", "generic", "offload" or "multi".
    pub xdp_attached: String,
    /// Its program id.
    pub xdp_prog_id: Option<u32>,
}

impl LinkInfo {
    /// Up with a carrier: what sysfs `carrier` says (it reads nothing from an interface
    /// that is down) and what a port needs to transmit.
    pub fn has_carrier(&self) -> bool {
        self.up && self.carrier == Some(true)
    }
}

/// Reads the link, in the network namespace of the calling thread.
pub fn link(nl: &mut Netlink, iface: &str) -> Result<LinkInfo, NlError> {
    let mut m = MsgBuilder::new(RTM_GETLINK, 0, &[0u8; 16]);
    m.attr_str(IFLA_IFNAME, iface);
    parse_link(&nl.request("rtnl-getlink", Proto::Route, &m)?)
}

/// Parses an RTM_GETLINK reply.
pub fn parse_link(raw: &[u8]) -> Result<LinkInfo, NlError> {
    let replies = split_replies(raw)?;
    let r = replies
        .first()
        .ok_or_else(|| NlError::Malformed("no RTM_NEWLINK reply".into()))?;
    let p = r.payload;
    if p.len() < 16 {
        return Err(NlError::Malformed("ifinfomsg shorter than 16 bytes".into()));
    }
    let word = |at: usize| u32::from_ne_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
    let ifindex = word(4);
    let flags = word(8);
    let a = Attrs::parse(&p[16..])?;
    let xdp = a.nested(IFLA_XDP)?;
    let attached = match &xdp {
        Some(x) => x.u8(IFLA_XDP_ATTACHED)?.unwrap_or(0),
        None => 0,
    };
    Ok(LinkInfo {
        ifindex,
        up: flags & IFF_UP != 0,
        carrier: a.u8(IFLA_CARRIER)?.map(|c| c != 0),
        carrier_down_count: a.u32(IFLA_CARRIER_DOWN_COUNT)?,
        mac: a
            .get(IFLA_ADDRESS)
            .and_then(|m| <[u8; 6]>::try_from(m).ok())
            .map(MacAddr),
        operstate: match a.u8(IFLA_OPERSTATE)? {
            Some(0) | None => "unknown",
            Some(1) => "notpresent",
            Some(2) => "down",
            Some(3) => "lowerlayerdown",
            Some(4) => "testing",
            Some(5) => "dormant",
            Some(6) => "up",
            Some(_) => "other",
        }
        .to_string(),
        mtu: a.u32(IFLA_MTU)?,
        rx_queues: a.u32(IFLA_NUM_RX_QUEUES)?,
        tx_queues: a.u32(IFLA_NUM_TX_QUEUES)?,
        allmulti: flags & IFF_ALLMULTI != 0,
        promisc: flags & IFF_PROMISC != 0,
        kind: a
            .nested(IFLA_LINKINFO)?
            .map(|li| li.string(IFLA_INFO_KIND))
            .transpose()?
            .flatten(),
        parent: a.string(IFLA_PARENT_DEV_NAME)?,
        xdp_attached: match attached {
            0 => "none",
            1 => "native",
            2 => "generic",
            3 => "offload",
            _ => "multi",
        }
        .to_string(),
        xdp_prog_id: xdp
            .as_ref()
            .map(|x| x.u32(IFLA_XDP_PROG_ID))
            .transpose()?
            .flatten(),
    })
}
