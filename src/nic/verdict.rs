//! From facts, the driver table and what the configuration needs, to one verdict per
//! capability and the exact commands that fix what can be fixed. Pure: unit-tested on
//! hand-made facts.

use serde::Serialize;

use super::{
    probe::{Fact, NicFacts},
    table::{Answer, Cell, DriverRow},
};

/// Link kinds (rtnetlink's `IFLA_INFO_KIND`) whose speed is a constant of the driver, not of
/// anything that carries the frames: veth pairs, and tun/tap devices (kind `tun`), both 10000
/// Mbit/s. Bonds, VLANs and macvlans report their lower device's speed, and are judged.
const NOMINAL_SPEED_KINDS: [&str; 2] = ["veth", "tun"];

/// What the configuration asks of the port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Needs {
    /// PAUSE/PFC must be received and sent (some lossless priority uses PFC on this port).
    pub mac_control: bool,
    /// Priorities with PFC (bit p = priority p).
    pub pfc_priorities: u8,
    /// The configured link speed.
    pub speed_bps: Option<u64>,
    /// The configured PFC headroom, bytes (for handing it to the NIC's own PFC).
    pub headroom_bytes: Option<u64>,
    /// From a configuration file (otherwise the defaults: PFC on priority 3).
    pub from_config: bool,
    /// `[daemon] workers`: worker w binds RX queue w of every port.
    pub workers: u32,
}

impl Default for Needs {
    fn default() -> Self {
        Needs {
            mac_control: true,
            pfc_priorities: 1 << 3,
            speed_bps: None,
            headroom_bytes: None,
            from_config: false,
            workers: 1,
        }
    }
}

/// A capability the doctor judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// The link is up at the configured speed.
    Link,
    /// The XDP program can attach in driver mode.
    NativeXdp,
    /// Received PAUSE/PFC reach the daemon.
    ReceivePausePfc,
    /// PAUSE/PFC the daemon sends leave the NIC.
    SendPausePfc,
    /// The firmware's own DCBX agent is off.
    FirmwareDcbx,
    /// Hardware timestamps for the peer-delay measurement.
    Timestamps,
    /// AF_XDP zero-copy.
    ZeroCopy,
    /// Every RX queue has a worker to bind it.
    RxQueues,
}

impl Capability {
    /// The name printed in text reports.
    pub fn label(self) -> &'static str {
        match self {
            Capability::Link => "link",
            Capability::NativeXdp => "native XDP",
            Capability::ReceivePausePfc => "receive PAUSE/PFC",
            Capability::SendPausePfc => "send PAUSE/PFC",
            Capability::FirmwareDcbx => "firmware DCBX off",
            Capability::Timestamps => "hardware timestamps",
            Capability::ZeroCopy => "AF_XDP zero-copy",
            Capability::RxQueues => "every RX queue bound",
        }
    }
}

/// How a capability stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Works.
    Ok,
    /// Nobody knows: run `lossless selftest` against a peer.
    Unknown,
    /// Works worse than it could, or needs a look.
    Warn,
    /// Does not work as things stand.
    Fail,
}

impl Status {
    /// Text label.
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Unknown => "unknown",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

/// One capability's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Which.
    pub capability: Capability,
    /// How it stands.
    pub status: Status,
    /// Whether the configuration relies on it (a failed needed capability makes the port unusable).
    pub needed: bool,
    /// Why, one reason per item.
    pub reasons: Vec<String>,
    /// Commands that fix it, in order.
    pub fixes: Vec<String>,
}

impl Verdict {
    fn new(capability: Capability, needed: bool) -> Self {
        Verdict {
            capability,
            status: Status::Ok,
            needed,
            reasons: Vec::new(),
            fixes: Vec::new(),
        }
    }

    fn add(&mut self, status: Status, reason: impl Into<String>) {
        self.status = self.status.max(status);
        self.reasons.push(reason.into());
    }

    fn fix(&mut self, cmd: String) {
        if !self.fixes.contains(&cmd) {
            self.fixes.push(cmd);
        }
    }
}

/// The doctor's conclusion about one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    /// One per capability.
    pub verdicts: Vec<Verdict>,
    /// Every fix, in the order to run them.
    pub fixes: Vec<String>,
    /// Where the NIC cannot carry PFC for us but has its own: the settings that hand it our
    /// headroom instead.
    pub hardware_pfc: Vec<String>,
    /// No needed capability fails.
    pub usable: bool,
}

fn cell_text(c: &Cell) -> String {
    let v = if c.verified {
        "verified"
    } else {
        "from driver sources, not verified on hardware"
    };
    if c.detail.is_empty() {
        format!("{} ({v})", c.source)
    } else {
        format!("{}: {} ({v})", c.detail, c.source)
    }
}

fn prio_list(mask: u8) -> String {
    let v: Vec<String> = (0..8)
        .filter(|p| mask & (1 << p) != 0)
        .map(|p| p.to_string())
        .collect();
    v.join(",")
}

/// Judges `facts` with the driver's row (if any) for `needs`.
pub fn diagnose(facts: &NicFacts, row: Option<&DriverRow>, needs: &Needs) -> Diagnosis {
    let x = &facts.iface;
    let driver = facts.driver_name().unwrap_or("unknown");
    let not_in_table = match facts.driver_name() {
        Some(d) => format!("driver {d} is not in the table: run `lossless selftest` against a peer"),
        None => "the driver could not be identified (ETHTOOL_GDRVINFO failed): run `lossless selftest` against a peer".to_string(),
    };
    let mut out = Vec::new();

    // Link.
    let mut v = Verdict::new(Capability::Link, true);
    match (facts.link.known(), facts.link_up.known()) {
        (None, _) => v.add(Status::Fail, format!("interface {x} not found")),
        (Some(l), up) => {
            if !l.up {
                v.add(Status::Fail, "administratively down");
                v.fix(format!("ip link set {x} up"));
            } else if up == Some(&Some(false)) || l.carrier == Some(false) {
                v.add(
                    Status::Fail,
                    "no carrier: check the cable and the link partner",
                );
            }
        }
    }
    // A veth's or a tap's 10000 Mbit/s is nominal (the driver says so whatever carries it):
    // there the configured speed is the link's, the rate the daemon shapes its egress to.
    let nominal = facts
        .link
        .known()
        .is_some_and(|l| NOMINAL_SPEED_KINDS.contains(&l.kind.as_deref().unwrap_or_default()));
    if let (Some(want), Some(m), false) = (needs.speed_bps, facts.link_modes.known(), nominal) {
        if let Some(mbps) = m.speed_mbps {
            if u64::from(mbps) * 1_000_000 != want {
                v.add(
                    Status::Warn,
                    format!(
                        "link at {mbps} Mbit/s but the configuration says {} Mbit/s: pause quanta and headroom are computed for the wrong speed",
                        want / 1_000_000
                    ),
                );
                v.fix(format!("set speed = \"{mbps}Mbit\" in the [[port]] of {x}"));
            }
        }
    }
    out.push(v);

    // Native XDP.
    let mut v = Verdict::new(Capability::NativeXdp, false);
    match &facts.xdp {
        Fact::Known(f) if f.xdp("basic") => {}
        Fact::Known(_) => v.add(
            Status::Warn,
            "the driver has no native XDP: generic (skb) mode only, slower",
        ),
        Fact::Unsupported(e) | Fact::Failed(e) => v.add(Status::Unknown, e.clone()),
    }
    out.push(v);

    let dcb_pfc_on = match &facts.dcb_pfc {
        Fact::Known(Some(p)) => p.pfc_en,
        _ => 0,
    };
    let dcb_off = format!("dcb pfc set dev {x} prio-pfc all:off");

    // Receive.
    let mut rx = Verdict::new(Capability::ReceivePausePfc, needs.mac_control);
    match &facts.pause {
        Fact::Known(p) if p.rx || p.tx || p.autoneg => {
            if p.rx {
                rx.add(
                    Status::Fail,
                    "the NIC's own RX pause is on: it acts on received PAUSE itself and swallows them",
                );
            }
            if dcb_pfc_on != 0 && row.is_some_and(|r| r.pause_blocked_by_pfc) {
                rx.fix(dcb_off.clone());
            }
            rx.fix(format!("ethtool -A {x} autoneg off rx off tx off"));
        }
        Fact::Known(_) => {}
        Fact::Unsupported(_) => {}
        Fact::Failed(e) => rx.add(Status::Unknown, format!("PAUSE settings unreadable: {e}")),
    }
    if dcb_pfc_on != 0 {
        rx.add(
            Status::Fail,
            format!(
                "the NIC's own PFC is on for priorities {}: it consumes received PFC frames",
                prio_list(dcb_pfc_on)
            ),
        );
        rx.fix(dcb_off.clone());
    }
    let mut driver_cannot = false;
    match row {
        None => rx.add(Status::Unknown, not_in_table.clone()),
        Some(r) => match r.rx_mac_control.answer {
            Answer::Yes => {}
            Answer::No => {
                driver_cannot = true;
                rx.add(Status::Fail, cell_text(&r.rx_mac_control));
            }
            Answer::Unknown => rx.add(
                Status::Unknown,
                format!(
                    "not known for {driver} ({}): run `lossless selftest` against a peer",
                    r.rx_mac_control.source
                ),
            ),
            Answer::IfConfigured => match facts.features.known().and_then(|f| f.rx_all) {
                Some(true) => {}
                _ => {
                    rx.add(Status::Fail, cell_text(&r.rx_mac_control));
                    rx.fix(format!("ethtool -K {x} rx-all on"));
                }
            },
        },
    }
    let filters = row.is_none_or(|r| r.filters_multicast);
    if let Fact::Known(m) = &facts.multicast {
        if filters && !m.admitted() {
            rx.add(
                if row.is_some() {
                    Status::Fail
                } else {
                    Status::Warn
                },
                "01:80:c2:00:00:01 is not admitted by the NIC's address filter",
            );
            rx.fix(format!("ip maddr add 01:80:c2:00:00:01 dev {x}"));
        }
    }
    out.push(rx);

    // Send.
    let mut tx = Verdict::new(Capability::SendPausePfc, needs.mac_control);
    match row {
        None => tx.add(Status::Unknown, not_in_table),
        Some(r) => match r.tx_mac_control.answer {
            Answer::Yes => {
                if !r.tx_mac_control.detail.is_empty() {
                    tx.reasons.push(r.tx_mac_control.detail.to_string());
                }
            }
            Answer::No => {
                driver_cannot = true;
                tx.add(Status::Fail, cell_text(&r.tx_mac_control));
            }
            Answer::IfConfigured => tx.add(Status::Warn, cell_text(&r.tx_mac_control)),
            Answer::Unknown => tx.add(
                Status::Unknown,
                format!(
                    "not known for {driver} ({}): run `lossless selftest` against a peer",
                    r.tx_mac_control.source
                ),
            ),
        },
    }
    if let Fact::Known(p) = &facts.pause {
        if p.tx {
            tx.add(
                Status::Warn,
                "the NIC sends PAUSE itself too (its TX pause is on), beside the daemon's",
            );
            tx.fix(format!("ethtool -A {x} autoneg off rx off tx off"));
        }
    }
    if tx.status == Status::Ok {
        tx.reasons.push(
            "an AF_XDP TX completion does not prove the frame left the NIC: confirm with `lossless selftest` or the link partner's counters".into(),
        );
    }
    out.push(tx);

    // Firmware DCBX agent.
    if let Some(fw) = row.and_then(|r| r.firmware_lldp) {
        let mut v = Verdict::new(Capability::FirmwareDcbx, needs.mac_control);
        match &facts.priv_flags {
            Fact::Known(flags) => match flags.iter().find(|b| b.name == fw.flag) {
                Some(b) if b.on == fw.off_value => {}
                Some(_) => {
                    v.add(
                        Status::Fail,
                        format!(
                            "the firmware LLDP agent runs ({} is {}): it turns the NIC's own PFC back on",
                            fw.flag,
                            if fw.off_value { "off" } else { "on" }
                        ),
                    );
                    v.fix(format!(
                        "ethtool --set-priv-flags {x} {} {}",
                        fw.flag,
                        if fw.off_value { "on" } else { "off" }
                    ));
                }
                None => v.add(
                    Status::Unknown,
                    format!(
                        "private flag {} not offered by this driver version",
                        fw.flag
                    ),
                ),
            },
            Fact::Unsupported(e) | Fact::Failed(e) => v.add(Status::Unknown, e.clone()),
        }
        out.push(v);
    }

    // Timestamps.
    let mut v = Verdict::new(Capability::Timestamps, false);
    let (rx_hw, tx_hw) = match facts.xdp.known() {
        Some(f) => (
            f.rx_metadata.iter().any(|m| m == "timestamp"),
            f.xsk_features.iter().any(|m| m == "tx-timestamp"),
        ),
        None => (false, false),
    };
    // The kernel says whether the driver implements the kfunc; the table says whether the
    // kfunc returns a hardware stamp (veth implements it and returns nothing for XDP frames).
    let rx_kfunc_empty = rx_hw && row.is_some_and(|r| r.rx_timestamp.answer == Answer::No);
    let rx_hw = rx_hw && !rx_kfunc_empty;
    if rx_kfunc_empty {
        let c = row.map(|r| r.rx_timestamp);
        v.add(
            Status::Warn,
            format!(
                "the driver implements the XDP RX timestamp kfunc, but it gives no hardware stamp ({}): \
                 RX stamps are bpf_ktime_get_ns() at XDP time (software)",
                c.map_or(String::new(), |c| cell_text(&c))
            ),
        );
    } else if !rx_hw {
        v.add(
            Status::Warn,
            "no XDP RX timestamp kfunc: RX stamps are bpf_ktime_get_ns() at XDP time (software)",
        );
    }
    if !tx_hw {
        v.add(
            Status::Warn,
            "no AF_XDP TX timestamp metadata: TX stamps are taken before the kick (software)",
        );
    }
    if rx_hw && tx_hw {
        v.reasons
            .push("XDP RX timestamp kfunc and AF_XDP TX timestamps available".into());
    }
    out.push(v);

    // Zero-copy.
    let mut v = Verdict::new(Capability::ZeroCopy, false);
    match &facts.xdp {
        Fact::Known(f) if f.xdp("xsk-zerocopy") => {}
        Fact::Known(_) => v.add(
            Status::Warn,
            "copy mode only: every frame is copied once each way",
        ),
        Fact::Unsupported(e) | Fact::Failed(e) => v.add(Status::Unknown, e.clone()),
    }
    out.push(v);

    // RX queues: worker w binds queue w; a frame on a queue without one goes to the kernel.
    let mut v = Verdict::new(Capability::RxQueues, true);
    let w = needs.workers.max(1);
    if let Fact::Known(c) = &facts.channels {
        if let Some(n) = c.rx_queues().filter(|&n| n > w) {
            v.add(
                Status::Fail,
                format!(
                    "{n} RX queues and {w} worker(s): frames the NIC puts on queue {w} or above \
                     would go to the kernel, never forwarded (`run` refuses the port); set \
                     [daemon] workers = {n}, or reduce the queues"
                ),
            );
            let kind = if c.combined.unwrap_or(0) > 0 {
                "combined"
            } else {
                "rx"
            };
            v.fix(format!("ethtool -L {x} {kind} {w}"));
        }
    }
    out.push(v);

    // Handing the headroom to the NIC's own PFC where it cannot carry ours.
    let mut hardware_pfc = Vec::new();
    if driver_cannot && needs.mac_control {
        let prios = prio_list(needs.pfc_priorities);
        match (&facts.dcb_pfc, needs.headroom_bytes) {
            (Fact::Known(_), Some(h)) => {
                let on: Vec<String> = prios.split(',').map(|p| format!("{p}:on")).collect();
                // No `delay`: it is 16 bits (at most 8 KiB of headroom in bits, below any real
                // one, so dcb refuses the command) and drivers read it differently (mlx5: the
                // cable's length in metres); the headroom goes in the buffer's size instead.
                hardware_pfc.push(format!(
                    "dcb pfc set dev {x} prio-pfc all:off {}",
                    on.join(" ")
                ));
                let map: Vec<String> = prios.split(',').map(|p| format!("{p}:1")).collect();
                hardware_pfc.push(format!(
                    "dcb buffer set dev {x} prio-buffer all:0 {} buffer-size all:0 1:{h}",
                    map.join(" ")
                ));
            }
            (Fact::Known(_), None) => hardware_pfc.push(format!(
                "measure first (`lossless measure --iface {x} --json`, plan.headroom_bytes = H), then \
                 `dcb pfc set dev {x} prio-pfc all:off {prios}:on` and `dcb buffer set dev {x} \
                 prio-buffer all:0 {prios}:1 buffer-size all:0 1:<H>`"
            )),
            _ => hardware_pfc.push(format!(
                "the kernel reports no DCB on {x}: this port can carry neither our PFC nor its own"
            )),
        }
    }

    let mut fixes = Vec::new();
    for v in &out {
        for f in &v.fixes {
            if !fixes.contains(f) {
                fixes.push(f.clone());
            }
        }
    }
    // The NIC's PFC goes off before its PAUSE settings can change.
    fixes.sort_by_key(|f| !f.starts_with("dcb pfc"));
    let usable = !out.iter().any(|v| v.needed && v.status == Status::Fail);
    Diagnosis {
        verdicts: out,
        fixes,
        hardware_pfc,
        usable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        kernel::ethtool::{Bit, Pause},
        nic::{drvinfo::DrvInfo, fixtures::veth_facts, link::DcbPfc, table},
    };

    fn judge(facts: &NicFacts, needs: &Needs) -> Diagnosis {
        diagnose(facts, facts.driver_name().and_then(table::row), needs)
    }

    fn status(d: &Diagnosis, c: Capability) -> Status {
        d.verdicts
            .iter()
            .find(|v| v.capability == c)
            .unwrap_or_else(|| panic!("no verdict for {c:?}: {d:#?}"))
            .status
    }

    /// A physical NIC of `driver`: the veth's facts with another driver name, pause readable
    /// and off, DCB present and off.
    fn nic(driver: &str) -> NicFacts {
        let mut f = veth_facts();
        if let Fact::Known(l) = &mut f.link {
            l.kind = None;
        }
        f.driver = Fact::Known(DrvInfo {
            driver: driver.into(),
            version: "1".into(),
            firmware: "fw 1.0".into(),
            bus_info: "0000:01:00.0".into(),
        });
        f.pause = Fact::Known(Pause {
            autoneg: false,
            rx: false,
            tx: false,
            tx_frames: None,
            rx_frames: None,
        });
        f.dcb_pfc = Fact::Known(Some(DcbPfc {
            pfc_cap: 8,
            pfc_en: 0,
            mbc: 0,
            delay_bits: 0,
            requests: [0; 8],
            indications: [0; 8],
            buffer: true,
        }));
        f.multicast = Fact::Known(crate::nic::probe::Multicast {
            joined: true,
            allmulti: false,
            promisc: false,
        });
        f
    }

    #[test]
    fn more_rx_queues_than_workers_is_unusable_and_names_the_fix() {
        let mut f = nic("ixgbe");
        f.channels = Fact::Known(crate::kernel::ethtool::Channels {
            combined: Some(4),
            combined_max: Some(64),
            rx: Some(0),
            tx: Some(0),
        });
        let d = judge(&f, &Needs::default());
        assert_eq!(status(&d, Capability::RxQueues), Status::Fail);
        assert!(!d.usable);
        assert!(
            d.fixes.contains(&"ethtool -L vd0 combined 1".to_string()),
            "{:?}",
            d.fixes
        );
        let four = Needs {
            workers: 4,
            ..Needs::default()
        };
        assert_eq!(status(&judge(&f, &four), Capability::RxQueues), Status::Ok);
        // veth has RX-only channels.
        let mut f = veth_facts();
        f.channels = Fact::Known(crate::kernel::ethtool::Channels {
            rx: Some(2),
            tx: Some(2),
            ..Default::default()
        });
        let d = judge(&f, &Needs::default());
        assert!(
            d.fixes.contains(&"ethtool -L vd0 rx 1".to_string()),
            "{:?}",
            d.fixes
        );
    }

    #[test]
    fn veth_is_usable_copy_mode_software_stamps() {
        let d = judge(&veth_facts(), &Needs::default());
        assert!(d.usable, "{d:#?}");
        assert_eq!(status(&d, Capability::ReceivePausePfc), Status::Ok);
        assert_eq!(status(&d, Capability::SendPausePfc), Status::Ok);
        assert_eq!(status(&d, Capability::NativeXdp), Status::Ok);
        assert_eq!(status(&d, Capability::ZeroCopy), Status::Warn);
        // veth implements the RX timestamp kfunc but it returns nothing for XDP frames.
        assert_eq!(status(&d, Capability::Timestamps), Status::Warn);
        assert!(d.fixes.is_empty(), "{:?}", d.fixes);
        assert!(d.hardware_pfc.is_empty());
    }

    #[test]
    fn nic_rx_pause_on_swallows_pfc_and_the_fix_turns_dcb_off_first() {
        let mut f = nic("ixgbe");
        f.features = Fact::Known(crate::kernel::ethtool::Features {
            rx_all: Some(true),
            rx_all_changeable: true,
            ..Default::default()
        });
        if let Fact::Known(p) = &mut f.pause {
            p.rx = true;
            p.tx = true;
        }
        if let Fact::Known(Some(p)) = &mut f.dcb_pfc {
            p.pfc_en = 0b1000;
        }
        let d = judge(&f, &Needs::default());
        assert!(!d.usable);
        assert_eq!(status(&d, Capability::ReceivePausePfc), Status::Fail);
        assert_eq!(
            d.fixes,
            [
                "dcb pfc set dev vd0 prio-pfc all:off",
                "ethtool -A vd0 autoneg off rx off tx off"
            ]
        );
        // Fixed: usable.
        if let Fact::Known(p) = &mut f.pause {
            p.rx = false;
            p.tx = false;
        }
        if let Fact::Known(Some(p)) = &mut f.dcb_pfc {
            p.pfc_en = 0;
        }
        assert!(judge(&f, &Needs::default()).usable);
    }

    #[test]
    fn ixgbe_and_igb_need_rx_all_for_pfc() {
        for driver in ["ixgbe", "igb", "igc"] {
            let f = nic(driver);
            let d = judge(&f, &Needs::default());
            assert_eq!(
                status(&d, Capability::ReceivePausePfc),
                Status::Fail,
                "{driver}"
            );
            assert_eq!(d.fixes, ["ethtool -K vd0 rx-all on"], "{driver}");
            assert_eq!(status(&d, Capability::SendPausePfc), Status::Ok, "{driver}");
        }
    }

    #[test]
    fn i40e_cannot_send_and_gets_the_hardware_pfc_handoff() {
        let mut f = nic("i40e");
        f.priv_flags = Fact::Known(vec![Bit {
            index: 0,
            name: "disable-fw-lldp".into(),
            on: false,
        }]);
        let needs = Needs {
            headroom_bytes: Some(10_000),
            from_config: true,
            pfc_priorities: 0b1000,
            ..Needs::default()
        };
        let d = judge(&f, &needs);
        assert!(!d.usable);
        assert_eq!(status(&d, Capability::SendPausePfc), Status::Fail);
        assert_eq!(status(&d, Capability::ReceivePausePfc), Status::Fail);
        assert_eq!(status(&d, Capability::FirmwareDcbx), Status::Fail);
        assert!(d
            .fixes
            .contains(&"ethtool --set-priv-flags vd0 disable-fw-lldp on".to_string()));
        assert_eq!(
            d.hardware_pfc,
            [
                "dcb pfc set dev vd0 prio-pfc all:off 3:on",
                "dcb buffer set dev vd0 prio-buffer all:0 3:1 buffer-size all:0 1:10000"
            ]
        );
        // ice's flag has the opposite sense.
        let mut f = nic("ice");
        f.priv_flags = Fact::Known(vec![Bit {
            index: 0,
            name: "fw-lldp-agent".into(),
            on: true,
        }]);
        let d = judge(&f, &needs);
        assert!(d
            .fixes
            .contains(&"ethtool --set-priv-flags vd0 fw-lldp-agent off".to_string()));
        assert_eq!(status(&d, Capability::ReceivePausePfc), Status::Unknown);
    }

    #[test]
    fn a_port_without_pfc_priorities_does_not_need_mac_control() {
        let needs = Needs {
            mac_control: false,
            pfc_priorities: 0,
            from_config: true,
            ..Needs::default()
        };
        let d = judge(&nic("i40e"), &needs);
        assert!(d.usable, "{d:#?}");
        assert!(d.hardware_pfc.is_empty());
    }

    #[test]
    fn unknown_driver_is_unknown_not_ok_and_unadmitted_group_is_fixed() {
        let mut f = nic("r8169");
        f.multicast = Fact::Known(crate::nic::probe::Multicast {
            joined: false,
            allmulti: false,
            promisc: false,
        });
        let d = judge(&f, &Needs::default());
        assert_eq!(status(&d, Capability::ReceivePausePfc), Status::Warn);
        assert_eq!(status(&d, Capability::SendPausePfc), Status::Unknown);
        assert!(d.usable);
        assert_eq!(d.fixes, ["ip maddr add 01:80:c2:00:00:01 dev vd0"]);
        // A driver that cannot be asked (loopback) is not guessed at.
        f.driver = Fact::Failed("ETHTOOL_GDRVINFO on lo: Operation not supported".into());
        let d = judge(&f, &Needs::default());
        let tx = d
            .verdicts
            .iter()
            .find(|v| v.capability == Capability::SendPausePfc)
            .unwrap();
        assert_eq!(tx.status, Status::Unknown);
        assert!(tx.reasons[0].contains("could not be identified"), "{tx:?}");
    }

    #[test]
    fn speed_mismatch_and_link_down() {
        let needs = Needs {
            speed_bps: Some(25_000_000_000),
            ..Needs::default()
        };
        let d = judge(&nic("ice"), &needs);
        assert_eq!(status(&d, Capability::Link), Status::Warn);
        assert!(d
            .fixes
            .contains(&"set speed = \"10000Mbit\" in the [[port]] of vd0".to_string()));
        // A veth's speed is nominal: the configured one is the link's (the shaper's rate).
        let d = judge(&veth_facts(), &needs);
        assert_eq!(status(&d, Capability::Link), Status::Ok);
        assert!(d.usable);
        // So is a tap's (kind tun), which a VM on the lab host hangs off.
        let mut tap = veth_facts();
        if let Fact::Known(l) = &mut tap.link {
            l.kind = Some("tun".into());
        }
        assert_eq!(status(&judge(&tap, &needs), Capability::Link), Status::Ok);
        let mut f = veth_facts();
        if let Fact::Known(l) = &mut f.link {
            l.up = false;
        }
        let d = judge(&f, &Needs::default());
        assert_eq!(status(&d, Capability::Link), Status::Fail);
        assert_eq!(d.fixes, ["ip link set vd0 up"]);
        assert!(!d.usable);
    }
}
