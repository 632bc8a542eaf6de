//! Reads every fact `lossless doctor` reports about one interface from the kernel.

use serde::Serialize;

use super::{
    drvinfo::{self, DrvInfo},
    link::{self, DcbPfc},
    netdev::{self, NetdevFeatures},
};
use crate::{
    kernel::{
        ethtool::{self, Bit, Channels, Features, LinkModes, Pause, TsInfo},
        link::{self as rtnl_link, LinkInfo},
        netlink::{Netlink, NlError},
    },
    wire::MacAddr,
};

/// The group address PAUSE and PFC frames are sent to.
pub const MAC_CONTROL_GROUP: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);

/// One fact: what the kernel said, or that the device does not implement the question, or why
/// it could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "value", rename_all = "snake_case")]
pub enum Fact<T> {
    /// The kernel answered.
    Known(T),
    /// The device does not implement this (EOPNOTSUPP): itself a fact.
    Unsupported(String),
    /// The question could not be asked or the answer not read.
    Failed(String),
}

impl<T> Fact<T> {
    /// The value, if known.
    pub fn known(&self) -> Option<&T> {
        match self {
            Fact::Known(v) => Some(v),
            _ => None,
        }
    }

    fn from_nl(r: Result<T, NlError>) -> Self {
        match r {
            Ok(v) => Fact::Known(v),
            Err(e) if e.unsupported() => Fact::Unsupported(e.to_string()),
            Err(e) => Fact::Failed(e.to_string()),
        }
    }
}

/// Whether frames to 01:80:c2:00:00:01 get past the NIC's address filter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Multicast {
    /// The group is in the device's multicast list (`ip maddr`).
    pub joined: bool,
    /// IFF_ALLMULTI.
    pub allmulti: bool,
    /// IFF_PROMISC.
    pub promisc: bool,
}

impl Multicast {
    /// Admitted by any of the three.
    pub fn admitted(&self) -> bool {
        self.joined || self.allmulti || self.promisc
    }
}

/// Everything read about one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NicFacts {
    /// Interface.
    pub iface: String,
    /// rtnetlink link attributes.
    pub link: Fact<LinkInfo>,
    /// Driver and firmware (ETHTOOL_GDRVINFO).
    pub driver: Fact<DrvInfo>,
    /// ethtool link state.
    pub link_up: Fact<Option<bool>>,
    /// ethtool link modes (speed, duplex).
    pub link_modes: Fact<LinkModes>,
    /// ethtool channels (queues).
    pub channels: Fact<Channels>,
    /// netdev family: XDP, zero-copy, RX and TX metadata.
    pub xdp: Fact<NetdevFeatures>,
    /// The NIC's own PAUSE.
    pub pause: Fact<Pause>,
    /// The NIC's own PFC (DCB).
    pub dcb_pfc: Fact<Option<DcbPfc>>,
    /// Offload features.
    pub features: Fact<Features>,
    /// Driver private flags.
    pub priv_flags: Fact<Vec<Bit>>,
    /// Timestamping.
    pub timestamping: Fact<TsInfo>,
    /// Admission of the MAC-control group.
    pub multicast: Fact<Multicast>,
}

impl NicFacts {
    /// The driver name, if known.
    pub fn driver_name(&self) -> Option<&str> {
        self.driver.known().map(|d| d.driver.as_str())
    }

    /// True if the interface exists.
    pub fn exists(&self) -> bool {
        self.link.known().is_some()
    }
}

/// Reads every fact. Never fails: each fact carries its own error.
pub fn probe(iface: &str, nl: &mut Netlink) -> NicFacts {
    let link = Fact::from_nl(rtnl_link::link(nl, iface));
    let driver = match drvinfo::query(iface) {
        Ok((d, _)) => Fact::Known(d),
        Err(e) => Fact::Failed(e.to_string()),
    };
    let xdp = match link.known() {
        Some(l) => Fact::from_nl(netdev::query(nl, l.ifindex)),
        None => Fact::Failed("interface not found".into()),
    };
    let multicast = match (link.known(), std::fs::read_to_string("/proc/net/dev_mcast")) {
        (Some(l), Ok(text)) => {
            let group = MAC_CONTROL_GROUP.to_string();
            Fact::Known(Multicast {
                joined: drvinfo::parse_dev_mcast(&text, iface).contains(&group),
                allmulti: l.allmulti,
                promisc: l.promisc,
            })
        }
        (None, _) => Fact::Failed("interface not found".into()),
        (_, Err(e)) => Fact::Failed(format!("/proc/net/dev_mcast: {e}")),
    };
    NicFacts {
        iface: iface.to_string(),
        driver,
        link_up: Fact::from_nl(ethtool::link_up(nl, iface)),
        link_modes: Fact::from_nl(ethtool::link_modes(nl, iface)),
        channels: Fact::from_nl(ethtool::channels(nl, iface)),
        xdp,
        pause: Fact::from_nl(ethtool::pause(nl, iface)),
        dcb_pfc: Fact::from_nl(link::dcb_pfc(nl, iface)),
        features: Fact::from_nl(ethtool::features(nl, iface)),
        priv_flags: Fact::from_nl(ethtool::priv_flags(nl, iface)),
        timestamping: Fact::from_nl(ethtool::ts_info(nl, iface)),
        multicast,
        link,
    }
}
