//! Every parser on replies captured from the kernel (`lossless doctor --dump-netlink`), in
//! `tests/fixtures/nic/<case>/`. Expected values were read from the same interfaces with
//! `ethtool` and `ip -d link` at capture time (kernel 6.18, veth pair in a namespace).

use super::{drvinfo, link, netdev};
use crate::kernel::{ethtool, link as rtnl_link, netlink};

macro_rules! fixture {
    ($case:literal, $name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/nic/",
            $case,
            "/",
            $name,
            ".bin"
        ))
    };
}

fn errno(r: Result<impl std::fmt::Debug, netlink::NlError>) -> (i32, Option<String>) {
    match r {
        Err(netlink::NlError::Kernel { errno, msg }) => (errno, msg),
        other => panic!("expected a kernel error, got {other:?}"),
    }
}

#[test]
fn veth_link() {
    let l = rtnl_link::parse_link(fixture!("veth", "rtnl-getlink")).unwrap();
    assert_eq!(l.ifindex, 3);
    assert!(l.up);
    assert_eq!(l.carrier, Some(true));
    assert!(l.has_carrier());
    assert_eq!(l.carrier_down_count, Some(1));
    assert_eq!(
        l.mac.map(|m| m.to_string()).as_deref(),
        Some("56:1f:fb:79:eb:5c")
    );
    assert_eq!(l.operstate, "up");
    assert_eq!(l.mtu, Some(1500));
    assert_eq!((l.rx_queues, l.tx_queues), (Some(2), Some(2)));
    assert_eq!(l.kind.as_deref(), Some("veth"));
    assert!(!l.allmulti && !l.promisc);
    assert_eq!(l.xdp_attached, "none");
    assert_eq!(l.xdp_prog_id, None);
}

#[test]
fn veth_with_generic_xdp_attached() {
    let l = rtnl_link::parse_link(fixture!("veth-xdp-generic", "rtnl-getlink")).unwrap();
    assert_eq!(l.xdp_attached, "generic");
    assert!(l.xdp_prog_id.is_some_and(|id| id > 0));
}

#[test]
fn veth_xdp_features_from_the_netdev_family() {
    let id = netlink::parse_family_id(fixture!("veth", "genl-family-netdev"), "netdev").unwrap();
    assert!(
        id >= 0x10,
        "dynamic family ids start after the controller: {id}"
    );
    let f = netdev::parse(fixture!("veth", "netdev-dev-get")).unwrap();
    assert_eq!(f.ifindex, 3);
    // Native XDP and redirect, no AF_XDP zero-copy: veth's real features.
    assert_eq!(f.xdp_features, ["basic", "redirect", "rx-sg"]);
    assert!(f.xdp("basic") && !f.xdp("xsk-zerocopy"));
    assert_eq!(f.rx_metadata, ["timestamp", "hash", "vlan-tag"]);
    assert!(f.xsk_features.is_empty());
}

#[test]
fn veth_ethtool_replies() {
    ethtool_family();
    assert_eq!(
        ethtool::parse_link_state(fixture!("veth", "ethtool-linkstate")).unwrap(),
        Some(true)
    );
    let m = ethtool::parse_link_modes(fixture!("veth", "ethtool-linkmodes")).unwrap();
    assert_eq!(m.speed_mbps, Some(10_000));
    assert_eq!(m.duplex, "full");
    assert_eq!(m.autoneg, Some(false));
    let c = ethtool::parse_channels(fixture!("veth", "ethtool-channels")).unwrap();
    assert_eq!((c.rx, c.tx, c.combined), (Some(1), Some(1), None));
    assert_eq!(c.rx_queues(), Some(1));
    let f = ethtool::parse_features(fixture!("veth", "ethtool-features")).unwrap();
    // `ethtool -k`: rx-all: off [fixed]; rx-vlan-offload: on; tx-vlan-offload: on.
    assert_eq!(f.rx_all, Some(false));
    assert!(!f.rx_all_changeable);
    assert_eq!(f.rx_vlan_hw_parse, Some(true));
    assert_eq!(f.tx_vlan_hw_insert, Some(true));
    let t = ethtool::parse_ts_info(fixture!("veth", "ethtool-tsinfo")).unwrap();
    assert_eq!(
        t.timestamping,
        [
            "software-transmit",
            "software-receive",
            "software-system-clock"
        ]
    );
    assert_eq!(t.phc_index, None);
    assert!(!t.hardware());
}

fn ethtool_family() {
    let id = netlink::parse_family_id(fixture!("veth", "genl-family-ethtool"), "ethtool").unwrap();
    assert!(id >= 0x10);
}

#[test]
fn veth_has_no_pause_no_dcb_no_private_flags() {
    for raw in [
        &fixture!("veth", "ethtool-pause")[..],
        &fixture!("veth", "rtnl-dcb-ieee-get")[..],
    ] {
        let e = netlink::split_replies(raw).unwrap_err();
        assert!(e.unsupported(), "{e}");
    }
    let e = ethtool::parse_pause(fixture!("veth", "ethtool-pause")).unwrap_err();
    assert!(
        e.unsupported() && e.to_string().contains("EOPNOTSUPP"),
        "{e}"
    );
    assert!(link::parse_dcb_pfc(fixture!("veth", "rtnl-dcb-ieee-get"))
        .unwrap_err()
        .unsupported());
    assert!(
        ethtool::parse_priv_flags(fixture!("veth", "ethtool-privflags"))
            .unwrap_err()
            .unsupported()
    );
}

#[test]
fn veth_driver_info() {
    let raw: &[u8; drvinfo::DRVINFO_LEN] = fixture!("veth", "ioctl-drvinfo");
    let d = drvinfo::parse(raw);
    assert_eq!(d.driver, "veth");
    assert_eq!(d.version, "1.0");
    assert_eq!(d.firmware, "");
}

#[test]
fn a_missing_interface_is_an_error_with_the_kernels_message() {
    let (e, _) = errno(rtnl_link::parse_link(fixture!("missing", "rtnl-getlink")));
    assert_eq!(e, libc::ENODEV);
    let (e, msg) = errno(ethtool::parse_pause(fixture!("missing", "ethtool-pause")));
    assert_eq!(e, libc::ENODEV);
    assert_eq!(msg.as_deref(), Some("no device matches name"));
    assert!(!netlink::NlError::Kernel {
        errno: e,
        msg: None
    }
    .unsupported());
    let (e, _) = errno(link::parse_dcb_pfc(fixture!(
        "missing",
        "rtnl-dcb-ieee-get"
    )));
    assert!(e == libc::ENODEV || e == libc::EINVAL, "errno {e}");
}

#[test]
fn truncated_captures_fail_cleanly() {
    let all: [&[u8]; 6] = [
        fixture!("veth", "rtnl-getlink"),
        fixture!("veth", "netdev-dev-get"),
        fixture!("veth", "ethtool-features"),
        fixture!("veth", "ethtool-linkmodes"),
        fixture!("veth", "ethtool-tsinfo"),
        fixture!("veth", "ethtool-channels"),
    ];
    for raw in all {
        for n in 0..raw.len() {
            let cut = &raw[..n];
            let _ = rtnl_link::parse_link(cut);
            let _ = netdev::parse(cut);
            let _ = ethtool::parse_features(cut);
            let _ = ethtool::parse_link_modes(cut);
            let _ = ethtool::parse_ts_info(cut);
            let _ = ethtool::parse_channels(cut);
            let _ = link::parse_dcb_pfc(cut);
        }
        // Every byte flipped in turn: errors or other values, never a panic.
        let mut v = raw.to_vec();
        for i in 0..v.len() {
            v[i] ^= 0xff;
            let _ = rtnl_link::parse_link(&v);
            let _ = netdev::parse(&v);
            let _ = ethtool::parse_features(&v);
            let _ = ethtool::parse_ts_info(&v);
            v[i] ^= 0xff;
        }
    }
}

/// The facts `probe` gathered on the veth, rebuilt from the captures.
pub(super) fn veth_facts() -> super::probe::NicFacts {
    use super::probe::{Fact, Multicast, NicFacts};
    fn unsupported<T>(raw: &[u8]) -> Fact<T> {
        Fact::Unsupported(netlink::split_replies(raw).unwrap_err().to_string())
    }
    let raw: &[u8; drvinfo::DRVINFO_LEN] = fixture!("veth", "ioctl-drvinfo");
    NicFacts {
        iface: "vd0".into(),
        link: Fact::Known(rtnl_link::parse_link(fixture!("veth", "rtnl-getlink")).unwrap()),
        driver: Fact::Known(drvinfo::parse(raw)),
        link_up: Fact::Known(
            ethtool::parse_link_state(fixture!("veth", "ethtool-linkstate")).unwrap(),
        ),
        link_modes: Fact::Known(
            ethtool::parse_link_modes(fixture!("veth", "ethtool-linkmodes")).unwrap(),
        ),
        channels: Fact::Known(
            ethtool::parse_channels(fixture!("veth", "ethtool-channels")).unwrap(),
        ),
        xdp: Fact::Known(netdev::parse(fixture!("veth", "netdev-dev-get")).unwrap()),
        pause: unsupported(fixture!("veth", "ethtool-pause")),
        dcb_pfc: unsupported(fixture!("veth", "rtnl-dcb-ieee-get")),
        features: Fact::Known(
            ethtool::parse_features(fixture!("veth", "ethtool-features")).unwrap(),
        ),
        priv_flags: unsupported(fixture!("veth", "ethtool-privflags")),
        timestamping: Fact::Known(
            ethtool::parse_ts_info(fixture!("veth", "ethtool-tsinfo")).unwrap(),
        ),
        multicast: Fact::Known(Multicast {
            joined: false,
            allmulti: false,
            promisc: false,
        }),
    }
}
