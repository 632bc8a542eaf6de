//! `lossless doctor`: what a port can do for lossless Ethernet, read from the kernel, judged
//! against the driver table and the configuration, with the commands that fix it.

use std::{fmt::Write as _, path::PathBuf};

use clap::Args;
use serde::Serialize;

use super::{common, error::CliError};
use crate::{
    config::Plan,
    kernel::netlink::Netlink,
    nic::{
        needs::needs_for,
        probe::{probe, Fact, NicFacts},
        table::{self, Cell, DriverRow},
        verdict::{diagnose, Diagnosis, Needs},
    },
};

/// Flags of `lossless doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// Interface to examine.
    #[arg(long)]
    pub iface: String,
    /// Judge the port against this configuration (its PFC priorities, speed and headroom)
    /// instead of the defaults (PFC on priority 3).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Write every raw netlink reply into this directory (one file per request), for a NIC
    /// report: the parser's tests run on such captures.
    #[arg(long)]
    pub dump_netlink: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What the doctor found.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// Facts read from the kernel.
    pub facts: NicFacts,
    /// The driver's row of the knowledge table (absent: nobody has described this driver).
    pub knowledge: Option<DriverRow>,
    /// What the port is judged against.
    pub needs: Needs,
    /// Verdicts and fixes.
    pub diagnosis: Diagnosis,
}

/// Runs `lossless doctor`; `Ok(false)` when the port is not usable as configured.
pub fn run(args: &DoctorArgs) -> Result<bool, CliError> {
    let needs = match &args.config {
        Some(path) => {
            let plan = Plan::load(path)?;
            needs_for(&plan, &args.iface).ok_or_else(|| {
                CliError::Usage(format!(
                    "{} is not a [[port]] of {}",
                    args.iface,
                    path.display()
                ))
            })?
        }
        None => Needs::default(),
    };
    let mut nl = Netlink::new(args.dump_netlink.is_some());
    let facts = probe(&args.iface, &mut nl);
    if let (Some(dir), Some(rec)) = (&args.dump_netlink, &nl.recorded) {
        std::fs::create_dir_all(dir).map_err(CliError::file(dir.display()))?;
        for (name, raw) in rec {
            let p = dir.join(format!("{name}.bin"));
            std::fs::write(&p, raw).map_err(CliError::file(p.display()))?;
        }
        if let Ok((_, raw)) = crate::nic::drvinfo::query(&args.iface) {
            let p = dir.join("ioctl-drvinfo.bin");
            std::fs::write(&p, raw).map_err(CliError::file(p.display()))?;
        }
    }
    if !facts.exists() {
        return Err(CliError::NoInterface(args.iface.clone()));
    }
    let row = facts.driver_name().and_then(table::row).copied();
    let diagnosis = diagnose(&facts, row.as_ref(), &needs);
    let report = DoctorReport {
        facts,
        knowledge: row,
        needs,
        diagnosis,
    };
    common::print_report(&report, args.json, text);
    Ok(report.diagnosis.usable)
}

fn fact<T>(f: &Fact<T>, show: impl FnOnce(&T) -> String) -> String {
    match f {
        Fact::Known(v) => show(v),
        Fact::Unsupported(_) => "not supported by the device (EOPNOTSUPP)".into(),
        Fact::Failed(e) => format!("could not read: {e}"),
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn onoff(b: Option<bool>) -> &'static str {
    match b {
        Some(true) => "on",
        Some(false) => "off",
        None => "-",
    }
}

fn cell_line(name: &str, c: &Cell) -> String {
    format!(
        "  {name}: {}{} [source: {}; {}]\n",
        c.answer.label(),
        if c.detail.is_empty() {
            String::new()
        } else {
            format!(", {}", c.detail)
        },
        c.source,
        if c.verified {
            "verified"
        } else {
            "not verified on hardware"
        }
    )
}

fn text(r: &DoctorReport) -> String {
    let f = &r.facts;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "lossless doctor: {} — driver {}",
        f.iface,
        fact(&f.driver, |d| format!(
            "{} {}, firmware {}, bus {}",
            d.driver,
            d.version,
            if d.firmware.is_empty() {
                "-"
            } else {
                &d.firmware
            },
            if d.bus_info.is_empty() {
                "-"
            } else {
                &d.bus_info
            }
        ))
    );
    let _ = writeln!(s, "read from the kernel:");
    let _ = writeln!(
        s,
        "  link: {}; ethtool link {}; {}",
        fact(&f.link, |l| format!(
            "{}, operstate {}, carrier {}, MAC {}, MTU {}, {} RX / {} TX queues{}",
            if l.up { "up" } else { "down" },
            l.operstate,
            onoff(l.carrier),
            l.mac.map_or("-".into(), |m| m.to_string()),
            l.mtu.map_or("-".into(), |m| m.to_string()),
            l.rx_queues.map_or("-".into(), |m| m.to_string()),
            l.tx_queues.map_or("-".into(), |m| m.to_string()),
            l.kind
                .as_ref()
                .map_or(String::new(), |k| format!(", kind {k}")),
        )),
        fact(&f.link_up, |u| onoff(*u).to_string()),
        fact(&f.link_modes, |m| format!(
            "{} Mbit/s {} duplex, autoneg {}",
            m.speed_mbps.map_or("unknown".into(), |v| v.to_string()),
            m.duplex,
            onoff(m.autoneg)
        )),
    );
    let _ = writeln!(
        s,
        "  channels: {}",
        fact(&f.channels, |c| format!(
            "combined {} (max {}), rx {}, tx {}",
            c.combined.map_or("-".into(), |v| v.to_string()),
            c.combined_max.map_or("-".into(), |v| v.to_string()),
            c.rx.map_or("-".into(), |v| v.to_string()),
            c.tx.map_or("-".into(), |v| v.to_string())
        ))
    );
    let _ = writeln!(
        s,
        "  XDP (netdev family): {}",
        fact(&f.xdp, |x| format!(
            "features {}; RX metadata {}; AF_XDP TX metadata {}",
            list(&x.xdp_features),
            list(&x.rx_metadata),
            list(&x.xsk_features)
        ))
    );
    if let Some(l) = f.link.known() {
        let _ = writeln!(
            s,
            "  XDP attached now: {}{}",
            l.xdp_attached,
            l.xdp_prog_id
                .map_or(String::new(), |i| format!(" (prog {i})"))
        );
    }
    let _ = writeln!(
        s,
        "  NIC's own PAUSE: {}",
        fact(&f.pause, |p| format!(
            "autoneg {}, rx {}, tx {}{}",
            onoff(Some(p.autoneg)),
            onoff(Some(p.rx)),
            onoff(Some(p.tx)),
            match (p.rx_frames, p.tx_frames) {
                (Some(rx), Some(tx)) => format!(", frames rx {rx} tx {tx}"),
                _ => String::new(),
            }
        ))
    );
    let _ = writeln!(
        s,
        "  NIC's own PFC (DCB): {}",
        fact(&f.dcb_pfc, |p| match p {
            None => "the device answered without PFC settings".into(),
            Some(p) => format!(
                "enabled {:#04x}, capability {} priorities, delay {} bits, buffer {}",
                p.pfc_en,
                p.pfc_cap,
                p.delay_bits,
                if p.buffer { "yes" } else { "no" }
            ),
        })
    );
    let _ = writeln!(
        s,
        "  features: {}",
        fact(&f.features, |x| format!(
            "rx-all {}, rx-vlan-hw-parse {}, tx-vlan-hw-insert {}",
            onoff(x.rx_all),
            onoff(x.rx_vlan_hw_parse),
            onoff(x.tx_vlan_hw_insert)
        ))
    );
    let _ = writeln!(
        s,
        "  private flags: {}",
        fact(&f.priv_flags, |b| {
            let v: Vec<String> = b
                .iter()
                .map(|b| format!("{} {}", b.name, onoff(Some(b.on))))
                .collect();
            list(&v)
        })
    );
    let _ = writeln!(
        s,
        "  timestamping: {}",
        fact(&f.timestamping, |t| format!(
            "{}; PHC {}",
            list(&t.timestamping),
            t.phc_index.map_or("none".into(), |i| i.to_string())
        ))
    );
    let _ = writeln!(
        s,
        "  01:80:c2:00:00:01: {}",
        fact(&f.multicast, |m| format!(
            "joined {}, allmulti {}, promisc {}",
            if m.joined { "yes" } else { "no" },
            onoff(Some(m.allmulti)),
            onoff(Some(m.promisc))
        ))
    );
    match &r.knowledge {
        None => {
            let _ = writeln!(
                s,
                "driver knowledge: none for {} (see docs/nics.md to report it)",
                f.driver_name().unwrap_or("this driver")
            );
        }
        Some(k) => {
            let _ = writeln!(s, "driver knowledge ({}):", k.drivers.join("/"));
            s += &cell_line("received PAUSE/PFC reach XDP", &k.rx_mac_control);
            s += &cell_line("host may transmit 0x8808", &k.tx_mac_control);
            s += &cell_line("AF_XDP zero-copy", &k.zero_copy);
            s += &cell_line("XDP RX timestamp kfunc", &k.rx_timestamp);
            s += &cell_line("AF_XDP TX timestamp", &k.tx_timestamp);
        }
    }
    let n = &r.needs;
    let prios: Vec<String> = (0..8)
        .filter(|p| n.pfc_priorities & (1 << p) != 0)
        .map(|p| p.to_string())
        .collect();
    let _ = writeln!(
        s,
        "verdicts for {} ({}):",
        if n.mac_control {
            format!("PFC on priority {}", prios.join(","))
        } else {
            "no PFC priority".into()
        },
        if n.from_config {
            "as configured"
        } else {
            "the defaults; --config FILE judges against a configuration"
        }
    );
    for v in &r.diagnosis.verdicts {
        let _ = writeln!(
            s,
            "  {:<7} {}{}",
            v.status.label(),
            v.capability.label(),
            if v.needed { "" } else { " (not needed)" }
        );
        for why in &v.reasons {
            let _ = writeln!(s, "          {why}");
        }
    }
    if !r.diagnosis.fixes.is_empty() {
        let _ = writeln!(s, "fixes, in order:");
        for f in &r.diagnosis.fixes {
            let _ = writeln!(s, "  {f}");
        }
    }
    if !r.diagnosis.hardware_pfc.is_empty() {
        let _ = writeln!(
            s,
            "this NIC cannot carry PFC in software; hand the headroom to its own PFC instead:"
        );
        for f in &r.diagnosis.hardware_pfc {
            let _ = writeln!(s, "  {f}");
        }
    }
    let _ = writeln!(
        s,
        "usable as configured: {}",
        if r.diagnosis.usable { "yes" } else { "NO" }
    );
    s
}
