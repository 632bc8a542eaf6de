//! What the Linux driver sources say each driver does with the frames the daemon needs: the
//! "Real NICs" table of the design, one cell per fact, each with its source and whether anyone
//! has verified it on hardware. `lossless doctor` prints the row of the port's driver; docs/nics.md
//! is the same table (tests check they agree).

use serde::Serialize;

/// One cell's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Yes, always.
    Yes,
    /// No, and nothing an operator can set changes it.
    No,
    /// Only with the setting named in the detail.
    IfConfigured,
    /// Nobody knows yet.
    Unknown,
}

/// One fact about a driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// The answer.
    pub answer: Answer,
    /// What exactly, in the operator's terms.
    pub detail: &'static str,
    /// Where it comes from (driver source function, kernel version, measurement).
    pub source: &'static str,
    /// Checked on the device itself (real hardware; for veth, the kernel's veth on the project's
    /// machines). False for everything read from driver sources only.
    pub verified: bool,
}

const fn cell(answer: Answer, detail: &'static str, source: &'static str, verified: bool) -> Cell {
    Cell {
        answer,
        detail,
        source,
        verified,
    }
}

/// A private flag that must be set to keep the firmware's DCB agent from turning PFC back on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FirmwareLldp {
    /// `ethtool --show-priv-flags` name.
    pub flag: &'static str,
    /// The value that turns the firmware agent off.
    pub off_value: bool,
    /// Source.
    pub source: &'static str,
}

/// One driver's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DriverRow {
    /// Driver names this row covers (as `ethtool -i` prints them).
    pub drivers: &'static [&'static str],
    /// Received PAUSE/PFC frames reach XDP.
    pub rx_mac_control: Cell,
    /// The host may transmit EtherType 0x8808 frames and they leave the NIC.
    pub tx_mac_control: Cell,
    /// AF_XDP zero-copy.
    pub zero_copy: Cell,
    /// XDP RX timestamp kfunc.
    pub rx_timestamp: Cell,
    /// AF_XDP TX (completion) timestamp.
    pub tx_timestamp: Cell,
    /// The NIC filters group addresses (so 01:80:c2:00:00:01 must be admitted).
    pub filters_multicast: bool,
    /// The firmware LLDP/DCBX agent's private flag, if the driver has one.
    pub firmware_lldp: Option<FirmwareLldp>,
    /// The driver refuses `ethtool -A` while its PFC is on (turn PFC off first).
    pub pause_blocked_by_pfc: bool,
}

impl Answer {
    /// Text label.
    pub fn label(self) -> &'static str {
        match self {
            Answer::Yes => "yes",
            Answer::No => "no",
            Answer::IfConfigured => "if configured",
            Answer::Unknown => "unknown",
        }
    }
}

use Answer::*;

/// AF_XDP TX stamps in copy mode: the generic path's software stamp, nothing from the NIC.
const COPY_MODE_TX_STAMP: Cell = cell(
    IfConfigured,
    "copy-mode software stamps only",
    "generic xsk copy path",
    false,
);

/// The table. Unknown drivers have no row: the doctor says so and asks for a selftest.
pub const TABLE: &[DriverRow] = &[
    DriverRow {
        drivers: &["ixgbe"],
        rx_mac_control: cell(
            IfConfigured,
            "dropped by default (MFLCN.DPF); `rx-all on` sets FCTRL.PMCF (82598 layout; on 82599+ unverified)",
            "ixgbe_fc_enable_generic() sets MFLCN.DPF; ixgbe_set_rx_mode() sets PMCF with NETIF_F_RXALL",
            false,
        ),
        tx_mac_control: cell(Yes, "the PF may send them", "no TX filter in ixgbe_main.c", false),
        zero_copy: cell(Yes, "AF_XDP zero-copy", "ixgbe_xsk.c", false),
        rx_timestamp: cell(No, "no xmo_rx_timestamp", "ixgbe has no xdp_metadata_ops", false),
        tx_timestamp: cell(No, "no AF_XDP TX metadata", "ixgbe has no xsk_tx_metadata_ops", false),
        filters_multicast: true,
        firmware_lldp: None,
        pause_blocked_by_pfc: true,
    },
    DriverRow {
        drivers: &["ixgbevf"],
        rx_mac_control: cell(Unknown, "depends on the PF", "not read", false),
        tx_mac_control: cell(
            IfConfigured,
            "only with spoofchk off on the PF (`ip link set PF vf N spoofchk off`)",
            "ixgbe_sriov.c: with spoofchk on, the PF's ETQF flow-control filter drops VF 0x8808 frames",
            false,
        ),
        zero_copy: cell(Unknown, "", "not read", false),
        rx_timestamp: cell(Unknown, "", "not read", false),
        tx_timestamp: cell(Unknown, "", "not read", false),
        filters_multicast: true,
        firmware_lldp: None,
        pause_blocked_by_pfc: false,
    },
    DriverRow {
        drivers: &["i40e"],
        rx_mac_control: cell(No, "dropped in the NIC (DPF), no PMCF knob", "i40e_main.c: no rx-all for MAC control", false),
        tx_mac_control: cell(
            No,
            "every EtherType 0x8808 frame the host sends is dropped in the NIC; no knob changes it",
            "i40e_add_filter_to_drop_tx_flow_control_frames() at probe and rebuild",
            false,
        ),
        zero_copy: cell(Yes, "AF_XDP zero-copy", "i40e_xsk.c", false),
        rx_timestamp: cell(No, "", "no xdp_metadata_ops", false),
        tx_timestamp: cell(No, "", "no xsk_tx_metadata_ops", false),
        filters_multicast: true,
        firmware_lldp: Some(FirmwareLldp {
            flag: "disable-fw-lldp",
            off_value: true,
            source: "i40e_ethtool.c private flag disable-fw-lldp",
        }),
        pause_blocked_by_pfc: true,
    },
    DriverRow {
        drivers: &["ice"],
        rx_mac_control: cell(Unknown, "", "not established from ice sources", false),
        tx_mac_control: cell(
            No,
            "a TX drop filter for ETH_P_PAUSE is installed on every VSI; no knob changes it",
            "ice_vsi_setup() adds the ETH_P_PAUSE TX drop rule",
            false,
        ),
        zero_copy: cell(Yes, "AF_XDP zero-copy", "ice_xsk.c", false),
        rx_timestamp: cell(Yes, "xmo_rx_timestamp", "ice_xdp_rx_hw_ts() in ice_txrx_lib.c", false),
        tx_timestamp: cell(No, "", "no xsk_tx_metadata_ops", false),
        filters_multicast: true,
        firmware_lldp: Some(FirmwareLldp {
            flag: "fw-lldp-agent",
            off_value: false,
            source: "ice_ethtool.c private flag fw-lldp-agent",
        }),
        pause_blocked_by_pfc: true,
    },
    DriverRow {
        drivers: &["igb", "igc"],
        rx_mac_control: cell(
            IfConfigured,
            "PAUSE with the NIC's RX pause off; PFC needs `rx-all on` (PMCF)",
            "igb_set_rx_mode()/igc_set_rx_mode(): NETIF_F_RXALL sets RCTL.PMCF",
            false,
        ),
        tx_mac_control: cell(Yes, "", "no TX filter in igb_main.c / igc_main.c", false),
        zero_copy: cell(Yes, "igb since 6.14, igc since 5.14", "igb_xsk.c, igc_main.c igc_xdp_setup_pool()", false),
        rx_timestamp: cell(IfConfigured, "igc only", "igc_xdp_rx_timestamp()", false),
        tx_timestamp: cell(IfConfigured, "igc only, plus launch time", "igc_xsk_tx_metadata_ops", false),
        filters_multicast: true,
        firmware_lldp: None,
        pause_blocked_by_pfc: false,
    },
    DriverRow {
        drivers: &["mlx5_core"],
        rx_mac_control: cell(Unknown, "counted as rx_mac_control_phy", "mlx5 ethtool stats", false),
        tx_mac_control: cell(Unknown, "", "not established from mlx5 sources", false),
        zero_copy: cell(Yes, "AF_XDP zero-copy", "en/xsk/", false),
        rx_timestamp: cell(Yes, "", "mlx5e_xdp_rx_timestamp()", false),
        tx_timestamp: cell(Yes, "", "mlx5e_xsk_tx_metadata_ops", false),
        filters_multicast: true,
        firmware_lldp: None,
        pause_blocked_by_pfc: false,
    },
    DriverRow {
        drivers: &["bnxt_en"],
        rx_mac_control: cell(Unknown, "", "not established from bnxt sources", false),
        tx_mac_control: cell(Unknown, "", "not established from bnxt sources", false),
        zero_copy: cell(No, "copy mode only", "no ndo_xsk_wakeup", false),
        rx_timestamp: cell(No, "", "no xdp_metadata_ops", false),
        tx_timestamp: COPY_MODE_TX_STAMP,
        filters_multicast: true,
        firmware_lldp: None,
        pause_blocked_by_pfc: false,
    },
    DriverRow {
        drivers: &["virtio_net"],
        rx_mac_control: cell(Yes, "", "virtio_net passes every frame the host hands it", false),
        tx_mac_control: cell(Yes, "a host bridge drops them (br_handle_frame)", "net/bridge/br_input.c", false),
        zero_copy: cell(Yes, "since 6.11", "virtio_net xsk support", false),
        rx_timestamp: cell(No, "", "no xdp_metadata_ops", false),
        tx_timestamp: COPY_MODE_TX_STAMP,
        filters_multicast: true,
        firmware_lldp: None,
        pause_blocked_by_pfc: false,
    },
    DriverRow {
        drivers: &["veth"],
        rx_mac_control: cell(Yes, "", "veth_xmit() hands every frame to the peer; measured by lossless selftest", true),
        tx_mac_control: cell(Yes, "a Linux bridge in the path drops them", "veth_xmit(); br_handle_frame()", true),
        zero_copy: cell(No, "never (EOPNOTSUPP)", "veth has no ndo_xsk_wakeup zero-copy; measured", true),
        rx_timestamp: cell(No, "only an skb's HW stamp", "veth_xdp_rx_timestamp(); measured: nothing", true),
        tx_timestamp: cell(IfConfigured, "copy-mode software stamps only", "generic xsk copy path; measured", true),
        filters_multicast: false,
        firmware_lldp: None,
        pause_blocked_by_pfc: false,
    },
];

/// The table as markdown, the form docs/nics.md carries (a test keeps them equal).
pub fn markdown() -> String {
    let cellmd = |c: &Cell| {
        let mut t = c.answer.label().to_string();
        if !c.detail.is_empty() {
            t += &format!(": {}", c.detail);
        }
        t += &format!(" <br>*source:* {}", c.source);
        if c.verified {
            t += " <br>**verified**";
        }
        t.replace('|', "\\|")
    };
    let mut s = String::from(
        "| driver | received PAUSE/PFC reach XDP | host may transmit 0x8808 | AF_XDP zero-copy | XDP RX timestamp kfunc | AF_XDP TX timestamp | firmware DCBX flag |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in TABLE {
        let cells: Vec<String> = r.cells().iter().map(cellmd).collect();
        s += &format!(
            "| {} | {} | {} |\n",
            r.drivers.join(" / "),
            cells.join(" | "),
            r.firmware_lldp.map_or("-".to_string(), |f| format!(
                "`{}` {}",
                f.flag,
                if f.off_value { "on" } else { "off" }
            )),
        );
    }
    s
}

impl DriverRow {
    /// The five cells, in table order.
    pub fn cells(&self) -> [Cell; 5] {
        [
            self.rx_mac_control,
            self.tx_mac_control,
            self.zero_copy,
            self.rx_timestamp,
            self.tx_timestamp,
        ]
    }
}

/// The row of `driver`, if the table has one.
pub fn row(driver: &str) -> Option<&'static DriverRow> {
    TABLE.iter().find(|r| r.drivers.contains(&driver))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_nics_md_carries_this_table() {
        let doc = include_str!("../../docs/nics.md");
        assert!(
            doc.contains(&markdown()),
            "docs/nics.md's table differs from src/nic/table.rs; it should read:\n{}",
            markdown()
        );
    }

    #[test]
    fn every_driver_has_one_row_and_sources() {
        let mut seen = std::collections::BTreeSet::new();
        for r in TABLE {
            for d in r.drivers {
                assert!(seen.insert(*d), "{d} twice");
                assert_eq!(row(d), Some(r));
            }
            for c in r.cells() {
                assert!(!c.source.is_empty(), "{:?}", r.drivers);
            }
        }
        assert!(row("e1000e").is_none());
        // Nothing but veth has been checked on the device itself.
        for r in TABLE.iter().filter(|r| r.drivers != ["veth"]) {
            for c in r.cells() {
                assert!(!c.verified, "{:?}", r.drivers);
            }
        }
    }
}
