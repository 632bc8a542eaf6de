//! Helpers shared by the fuzz targets.
//!
//! [`plan_to_toml`] prints a validated [`Plan`] back as a configuration file, so the `config`
//! target can check that parse → print → parse is the identity ([`check_config_round_trip`]):
//! every value a Plan can hold must be expressible in the file and must read back unchanged.
//! The structs are destructured and the enums matched exhaustively on purpose: a new setting
//! or variant fails to compile here until it is printed (reading fields one by one let `mtu`,
//! `stall_guard`, `realtime` and `[headroom]` go unprinted, and the round trip never covered
//! them).

use std::fmt::Write;

use lossless::config::file::DaemonSection;
use lossless::config::{Plan, PortPlan};
use lossless::dataplane::classify::Trust;
use lossless::dataplane::open::Backend;
use lossless::dataplane::sched::RealtimeMode;
use lossless::dataplane::xdp_prog::XdpMode;
use lossless::fc::adaptive::HeadroomSettings;
use lossless::fc::credit_port::CreditTimers;
use lossless::fc::plan::SfcSettings;
use lossless::fc::sfc_guard::SfcSourcePolicy;
use lossless::fc::watchdog::{StormAction, WatchdogConfig};
use lossless::linkup::LinkupSettings;
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

/// A TOML float that reads back as the same f64: the toml crate writes the shortest digits
/// that do, with a fraction even for a whole number, so it stays a float.
fn float(v: f64) -> String {
    toml::Value::Float(v).to_string()
}

/// The `config` target's property: text that parses to a [`Plan`] prints ([`plan_to_toml`])
/// to text that parses to the same Plan. Panics otherwise (what the fuzzer reports); input
/// that is not UTF-8 or not a valid configuration is outside the property.
pub fn check_config_round_trip(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(plan) = Plan::parse(text, "fuzz.toml") else {
        return;
    };
    let again = plan_to_toml(&plan);
    match Plan::parse(&again, "again.toml") {
        Ok(p) => assert_eq!(p, plan, "round trip changed the plan; printed:\n{again}"),
        Err(e) => panic!("the printed plan does not parse: {e}\n{again}"),
    }
}

/// Prints `plan` as a configuration file that [`Plan::parse`] turns back into `plan`.
pub fn plan_to_toml(plan: &Plan) -> String {
    let Plan {
        daemon,
        ports,
        prios,
        metrics_listen,
        control_socket,
        watchdog,
        sfc,
        linkup,
        credit,
        headroom,
        // Both follow from what is printed: the guard's time from `daemon.stall_guard`, the
        // warnings from the whole plan.
        stall_guard_ns: _,
        warnings: _,
    } = plan;
    let mut o = String::new();
    print_daemon(&mut o, daemon);

    let listen = metrics_listen.map(|a| a.to_string()).unwrap_or_default();
    let _ = writeln!(o, "\n[metrics]\nlisten = {}", s(&listen));
    let socket = control_socket
        .as_ref()
        .map(|p| p.to_str().expect("parsed from UTF-8").to_string())
        .unwrap_or_default();
    let _ = writeln!(o, "\n[control]\nsocket = {}", s(&socket));

    print_watchdog(&mut o, watchdog.as_ref());
    print_sfc(&mut o, sfc);
    print_linkup(&mut o, linkup.as_ref());
    print_credit(&mut o, credit);
    print_headroom(&mut o, headroom);
    for p in ports {
        print_port(&mut o, p);
    }

    for (i, p) in prios.iter().enumerate() {
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

/// `[daemon]`, as given (the plan keeps the section as written, `stall_guard` too).
fn print_daemon(o: &mut String, d: &DaemonSection) {
    let DaemonSection {
        workers,
        cores,
        xdp_mode,
        backend,
        frames,
        busy_poll,
        stats_interval_s,
        log,
        realtime,
        realtime_priority,
        stall_guard,
    } = d;
    let xdp_mode = match xdp_mode {
        XdpMode::Auto => "auto",
        XdpMode::Native => "native",
        XdpMode::Skb => "skb",
    };
    let backend = match backend {
        Backend::Auto => "auto",
        Backend::AfXdp => "af-xdp",
        Backend::AfPacket => "af-packet",
    };
    let realtime = match realtime {
        RealtimeMode::Auto => "auto",
        RealtimeMode::On => "on",
        RealtimeMode::Off => "off",
    };
    let cores: Vec<String> = cores.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(o, "[daemon]");
    let _ = writeln!(o, "workers = {workers}");
    let _ = writeln!(o, "cores = [{}]", cores.join(", "));
    let _ = writeln!(o, "xdp_mode = {}", s(xdp_mode));
    let _ = writeln!(o, "backend = {}", s(backend));
    let _ = writeln!(o, "frames = {frames}");
    let _ = writeln!(o, "busy_poll = {busy_poll}");
    let _ = writeln!(o, "stats_interval_s = {stats_interval_s}");
    if let Some(log) = log {
        let _ = writeln!(o, "log = {}", s(log));
    }
    let _ = writeln!(o, "realtime = {}", s(realtime));
    let _ = writeln!(o, "realtime_priority = {realtime_priority}");
    let _ = writeln!(o, "stall_guard = {}", s(stall_guard));
}

/// `[watchdog]`.
fn print_watchdog(o: &mut String, w: Option<&WatchdogConfig>) {
    let _ = writeln!(o, "\n[watchdog]");
    let Some(WatchdogConfig {
        detection_ns,
        restoration_ns,
        action,
    }) = w
    else {
        let _ = writeln!(o, "enabled = false");
        return;
    };
    let action = match action {
        StormAction::Drop => "drop",
        StormAction::Forward => "forward",
        StormAction::Alert => "alert",
    };
    let _ = writeln!(o, "enabled = true");
    let _ = writeln!(o, "detection = {}", ns(*detection_ns));
    let _ = writeln!(o, "restoration = {}", ns(*restoration_ns));
    let _ = writeln!(o, "action = {}", s(action));
}

/// `[sfc]`.
fn print_sfc(o: &mut String, f: &SfcSettings) {
    let SfcSettings {
        udp,
        reserve_percent,
        max_pause_ns,
        filter,
        scope,
        sources: SfcSourcePolicy {
            allow,
            max_per_second,
        },
    } = f;
    let _ = writeln!(o, "\n[sfc]");
    match udp {
        None => {
            let _ = writeln!(o, "transport = \"l2\"");
        }
        Some((port, ip)) => {
            let ip = std::net::Ipv4Addr::from(*ip).to_string();
            let _ = writeln!(o, "transport = \"udp\"\nudp_port = {port}");
            let _ = writeln!(o, "source_ip = {}", s(&ip));
        }
    }
    let scope = match scope {
        SfcScope::Class => "class",
        SfcScope::Flow => "flow",
    };
    let _ = writeln!(o, "reserve_percent = {reserve_percent}");
    let _ = writeln!(o, "max_pause = {}", ns(*max_pause_ns));
    let _ = writeln!(o, "filter = {filter}");
    let _ = writeln!(o, "scope = {}", s(scope));
    let allowed: Vec<String> = allow.iter().flatten().map(|m| s(&m.to_string())).collect();
    let _ = writeln!(o, "accept_from = [{}]", allowed.join(", "));
    let _ = writeln!(o, "max_rate = {max_per_second}");
}

/// `[linkup]`.
fn print_linkup(o: &mut String, l: Option<&LinkupSettings>) {
    let _ = writeln!(o, "\n[linkup]");
    let Some(LinkupSettings {
        samples,
        sample_interval_ns,
        interval_ns,
        max_frame,
        peer_response_ns,
    }) = l
    else {
        let _ = writeln!(o, "enabled = false");
        return;
    };
    let _ = writeln!(o, "enabled = true");
    let _ = writeln!(o, "samples = {samples}");
    let _ = writeln!(o, "sample_interval = {}", ns(*sample_interval_ns));
    let _ = writeln!(o, "interval = {}", ns(*interval_ns));
    let _ = writeln!(o, "max_frame = {max_frame}");
    let _ = writeln!(o, "peer_response = {}", ns(*peer_response_ns));
}

/// `[credit]`.
fn print_credit(o: &mut String, c: &CreditTimers) {
    let CreditTimers {
        update_interval_ns,
        resync_interval_ns,
        timeout_ns,
    } = c;
    let _ = writeln!(o, "\n[credit]");
    let _ = writeln!(o, "update_interval = {}", ns(*update_interval_ns));
    let _ = writeln!(o, "resync_interval = {}", ns(*resync_interval_ns));
    let _ = writeln!(o, "timeout = {}", ns(*timeout_ns));
}

/// `[headroom]`. Its `stall_guard_ns` comes from `daemon.stall_guard`.
fn print_headroom(o: &mut String, h: &HeadroomSettings) {
    let HeadroomSettings {
        adaptive,
        min_headroom,
        margin,
        half_life_ns,
        quiet_ns,
        xoff_time_ns,
        stall_guard_ns: _,
        borrow,
    } = h;
    let _ = writeln!(o, "\n[headroom]");
    let _ = writeln!(o, "adaptive = {adaptive}");
    if let Some(m) = min_headroom {
        let _ = writeln!(o, "min_headroom = {}", size(*m));
    }
    let _ = writeln!(o, "margin = {}", float(*margin));
    let _ = writeln!(o, "half_life = {}", ns(*half_life_ns));
    let _ = writeln!(o, "quiet = {}", ns(*quiet_ns));
    if let Some(t) = xoff_time_ns {
        let _ = writeln!(o, "xoff_time = {}", ns(*t));
    }
    let _ = writeln!(o, "borrow = {borrow}");
}

/// One `[[port]]`.
fn print_port(o: &mut String, p: &PortPlan) {
    let PortPlan {
        iface,
        speed_bps,
        trust,
        pause_quanta,
        credit,
        mtu,
    } = p;
    let trust = match trust {
        Trust::Pcp => "pcp",
        Trust::Dscp => "dscp",
    };
    let _ = writeln!(o, "\n[[port]]");
    let _ = writeln!(o, "iface = {}", s(iface));
    let _ = writeln!(o, "speed = {}", s(&speed_bps.to_string()));
    let _ = writeln!(o, "trust = {}", s(trust));
    let _ = writeln!(o, "pause_quanta = {pause_quanta}");
    let _ = writeln!(o, "credit = {credit}");
    if let Some(mtu) = mtu {
        let _ = writeln!(o, "mtu = {mtu}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every committed seed of the `config` target round-trips. The seeds set every setting
    /// the file has (`tests/fuzz_corpus.rs` writes them), so a setting the printer leaves out
    /// fails here, not only when the fuzzer happens on it.
    #[test]
    fn every_config_seed_round_trips() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/config");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).expect("the config seed corpus") {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            Plan::parse(&text, "seed").unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            check_config_round_trip(text.as_bytes());
            seeds += 1;
        }
        assert!(seeds >= 3, "{seeds} seeds in {}", dir.display());
    }
}
