//! Helpers shared by the fuzz targets.
//!
//! [`plan_to_toml`] prints a validated [`Plan`] back as a configuration file, so the `config`
//! target can check that parse → print → parse is the identity: every value a Plan can hold
//! must be expressible in the file and must read back unchanged. The matches below are
//! exhaustive on purpose: a new setting or variant fails to compile here until it is printed.

use std::fmt::Write;

use lossless::config::Plan;
use lossless::dataplane::classify::Trust;
use lossless::dataplane::open::Backend;
use lossless::dataplane::xdp_prog::XdpMode;
use lossless::fc::watchdog::StormAction;
use lossless::wire::sfcm::SfcScope;

/// A TOML string literal (basic string, escaped by the toml crate).
fn s(v: &str) -> String {
    toml::Value::String(v.to_string()).to_string()
}

/// A byte size: a TOML integer where it fits i64, else a string (units are parsed as text).
fn size(v: u64) -> String {
    if i64::try_from(v).is_ok() {
        v.to_string()
    } else {
        s(&v.to_string())
    }
}

/// A duration in whole nanoseconds.
fn ns(v: u64) -> String {
    s(&format!("{v}ns"))
}

/// Prints `plan` as a configuration file that [`Plan::parse`] turns back into `plan`.
pub fn plan_to_toml(plan: &Plan) -> String {
    let mut o = String::new();
    let d = &plan.daemon;
    let xdp_mode = match d.xdp_mode {
        XdpMode::Auto => "auto",
        XdpMode::Native => "native",
        XdpMode::Skb => "skb",
    };
    let backend = match d.backend {
        Backend::Auto => "auto",
        Backend::AfXdp => "af-xdp",
        Backend::AfPacket => "af-packet",
    };
    let cores: Vec<String> = d.cores.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(o, "[daemon]");
    let _ = writeln!(o, "workers = {}", d.workers);
    let _ = writeln!(o, "cores = [{}]", cores.join(", "));
    let _ = writeln!(o, "xdp_mode = {}", s(xdp_mode));
    let _ = writeln!(o, "backend = {}", s(backend));
    let _ = writeln!(o, "frames = {}", d.frames);
    let _ = writeln!(o, "busy_poll = {}", d.busy_poll);
    let _ = writeln!(o, "stats_interval_s = {}", d.stats_interval_s);
    if let Some(log) = &d.log {
        let _ = writeln!(o, "log = {}", s(log));
    }

    let listen = plan
        .metrics_listen
        .map(|a| a.to_string())
        .unwrap_or_default();
    let _ = writeln!(o, "\n[metrics]\nlisten = {}", s(&listen));
    let socket = plan
        .control_socket
        .as_ref()
        .map(|p| p.to_str().expect("parsed from UTF-8").to_string())
        .unwrap_or_default();
    let _ = writeln!(o, "\n[control]\nsocket = {}", s(&socket));

    let _ = writeln!(o, "\n[watchdog]");
    match plan.watchdog {
        None => {
            let _ = writeln!(o, "enabled = false");
        }
        Some(w) => {
            let action = match w.action {
                StormAction::Drop => "drop",
                StormAction::Forward => "forward",
                StormAction::Alert => "alert",
            };
            let _ = writeln!(o, "enabled = true");
            let _ = writeln!(o, "detection = {}", ns(w.detection_ns));
            let _ = writeln!(o, "restoration = {}", ns(w.restoration_ns));
            let _ = writeln!(o, "action = {}", s(action));
        }
    }

    let f = &plan.sfc;
    let _ = writeln!(o, "\n[sfc]");
    match f.udp {
        None => {
            let _ = writeln!(o, "transport = \"l2\"");
        }
        Some((port, ip)) => {
            let ip = std::net::Ipv4Addr::from(ip).to_string();
            let _ = writeln!(o, "transport = \"udp\"\nudp_port = {port}");
            let _ = writeln!(o, "source_ip = {}", s(&ip));
        }
    }
    let scope = match f.scope {
        SfcScope::Class => "class",
        SfcScope::Flow => "flow",
    };
    let _ = writeln!(o, "reserve_percent = {}", f.reserve_percent);
    let _ = writeln!(o, "max_pause = {}", ns(f.max_pause_ns));
    let _ = writeln!(o, "filter = {}", f.filter);
    let _ = writeln!(o, "scope = {}", s(scope));
    let allowed: Vec<String> = f
        .sources
        .allow
        .iter()
        .flatten()
        .map(|m| s(&m.to_string()))
        .collect();
    let _ = writeln!(o, "accept_from = [{}]", allowed.join(", "));
    let _ = writeln!(o, "max_rate = {}", f.sources.max_per_second);

    let _ = writeln!(o, "\n[linkup]");
    match plan.linkup {
        None => {
            let _ = writeln!(o, "enabled = false");
        }
        Some(l) => {
            let _ = writeln!(o, "enabled = true");
            let _ = writeln!(o, "samples = {}", l.samples);
            let _ = writeln!(o, "sample_interval = {}", ns(l.sample_interval_ns));
            let _ = writeln!(o, "interval = {}", ns(l.interval_ns));
            let _ = writeln!(o, "max_frame = {}", l.max_frame);
            let _ = writeln!(o, "peer_response = {}", ns(l.peer_response_ns));
        }
    }

    let c = &plan.credit;
    let _ = writeln!(o, "\n[credit]");
    let _ = writeln!(o, "update_interval = {}", ns(c.update_interval_ns));
    let _ = writeln!(o, "resync_interval = {}", ns(c.resync_interval_ns));
    let _ = writeln!(o, "timeout = {}", ns(c.timeout_ns));

    for p in &plan.ports {
        let trust = match p.trust {
            Trust::Pcp => "pcp",
            Trust::Dscp => "dscp",
        };
        let _ = writeln!(o, "\n[[port]]");
        let _ = writeln!(o, "iface = {}", s(&p.iface));
        let _ = writeln!(o, "speed = {}", s(&p.speed_bps.to_string()));
        let _ = writeln!(o, "trust = {}", s(trust));
        let _ = writeln!(o, "pause_quanta = {}", p.pause_quanta);
        let _ = writeln!(o, "credit = {}", p.credit);
    }

    for (i, p) in plan.prios.iter().enumerate() {
        let _ = writeln!(o, "\n[priority.{i}]");
        let _ = writeln!(o, "mode = {}", s(p.mode()));
        if let Some(pfc) = p.pfc {
            let _ = writeln!(o, "xoff = {}", size(pfc.xoff));
            let _ = writeln!(o, "xon = {}", size(pfc.xon));
            let _ = writeln!(o, "headroom = {}", size(pfc.headroom));
        } else {
            let _ = writeln!(o, "limit = {}", size(p.limit));
        }
        if let Some(sfc) = p.sfc {
            let _ = writeln!(o, "sfc_threshold = {}", size(sfc.threshold));
        }
    }
    o
}
