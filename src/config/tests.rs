//! Reading and validating configurations: what a good file gives, and what each bad one is
//! refused for.

use super::{
    validate::{
        DEFAULT_CREDIT_LIMIT, DEFAULT_HEADROOM, DEFAULT_LOSSY_LIMIT, DEFAULT_SFC_THRESHOLD,
        DEFAULT_XOFF, MAX_BUFFER_BYTES, MAX_DURATION_NS,
    },
    Plan,
};
use crate::{
    dataplane::{
        classify::Trust,
        open::Backend,
        sched::{RealtimeMode, DEFAULT_PRIORITY},
    },
    fc::plan::{PrioPlan, SfcPlan},
};

const GOOD: &str = r#"
[daemon]
workers = 1

[[port]]
iface = "veth0"
speed = "1Gbit"

[[port]]
iface = "veth1"
speed = "10G"
trust = "dscp"

[priority.3]
mode = "pfc"
xoff = "64KiB"
xon = 32768
headroom = "128KiB"

[priority.0]
limit = "1MB"
"#;

fn err(text: &str) -> String {
    Plan::parse(text, "test.toml").unwrap_err().to_string()
}

#[test]
fn good_config() {
    let p = Plan::parse(GOOD, "x").unwrap();
    assert_eq!(p.ports[1].speed_bps, 10_000_000_000);
    assert_eq!(p.ports[1].trust, Trust::Dscp);
    assert_eq!(p.prios[3], PrioPlan::pfc(65536, 32768, 131072));
    assert_eq!(p.prios[0], PrioPlan::lossy(1_000_000));
    assert_eq!(p.prios[5], PrioPlan::lossy(DEFAULT_LOSSY_LIMIT));
    assert_eq!(p.prios[3].admit_limit(), 65536 + 131072);
    assert_eq!(p.prios[3].mode(), "pfc");
    assert_eq!(
        p.headroom.xoff_time_ns, None,
        "XOFF in bytes only unless asked"
    );
    assert_eq!(
        p.headroom.notice_ns(),
        Some(375_000),
        "the stall guard's bound: 250 us and half of it"
    );
    let off = Plan::parse(
        &GOOD.replace("[daemon]\n", "[daemon]\nstall_guard = \"off\"\n"),
        "x",
    )
    .unwrap();
    assert_eq!(off.headroom.notice_ns(), None);
    let p = Plan::parse(&format!("{GOOD}\n[headroom]\nxoff_time = \"800us\"\n"), "x").unwrap();
    assert_eq!(p.headroom.xoff_time_ns, Some(800_000));
}

#[test]
fn port_mtu_is_checked_against_what_the_backend_carries() {
    let with_mtu = |mtu: &str, backend: &str| {
        GOOD.replace(
            "workers = 1",
            &format!("workers = 1\nbackend = \"{backend}\""),
        )
        .replace(
            "iface = \"veth1\"",
            &format!("iface = \"veth1\"\nmtu = {mtu}"),
        )
    };
    let p = Plan::parse(GOOD, "x").unwrap();
    assert_eq!(p.ports[1].mtu, None);
    let q = Plan::parse(&with_mtu("1500", "af-xdp"), "x").unwrap();
    assert_eq!(q.ports[1].mtu, Some(1500));
    assert_eq!(
        q.ports[1]
            .max_frame(1, Some(9000), Backend::AfXdp, "x")
            .unwrap(),
        1518,
        "the configured MTU wins over the interface's"
    );
    assert_eq!(
        p.restart_only_changes(&q),
        ["daemon.backend", "port (iface, speed, trust, mtu)"]
    );
    // Jumbo frames: multi-buffer AF_XDP sockets, larger AF_PACKET frames.
    assert_eq!(Backend::AfXdp.max_frame(), 9216);
    assert_eq!(Backend::Auto.max_frame(), 9216);
    assert_eq!(Backend::AfPacket.max_frame(), 9216);
    for backend in ["af-xdp", "af-packet", "auto"] {
        Plan::parse(&with_mtu("9000", backend), "x").unwrap();
        Plan::parse(&with_mtu("9198", backend), "x").unwrap();
        let e = err(&with_mtu("9199", backend));
        assert!(e.contains("port[1].mtu"), "{e}");
        assert!(e.contains("9217 bytes") && e.contains("mtu <= 9198"), "{e}");
    }
    assert!(err(&with_mtu("67", "auto")).contains("below the minimum MTU"));
    // Unset, the interface's MTU applies, checked at start.
    assert_eq!(
        p.ports[0]
            .max_frame(0, Some(1500), Backend::Auto, "x")
            .unwrap(),
        1518
    );
    assert_eq!(
        p.ports[0]
            .max_frame(0, Some(9000), Backend::Auto, "x")
            .unwrap(),
        9018
    );
    let e = p.ports[0]
        .max_frame(0, Some(16000), Backend::Auto, "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("port[0].mtu") && e.contains("veth0's MTU 16000") && e.contains("16018"),
        "{e}"
    );
    assert_eq!(
        p.ports[0].max_frame(0, None, Backend::AfXdp, "x").unwrap(),
        9216,
        "interface unknown: what the backend carries"
    );
}

#[test]
fn realtime_settings() {
    let p = Plan::parse(GOOD, "x").unwrap();
    assert_eq!(p.daemon.realtime, RealtimeMode::Auto);
    assert_eq!(p.daemon.realtime_priority, DEFAULT_PRIORITY);
    for (text, mode) in [("on", RealtimeMode::On), ("off", RealtimeMode::Off)] {
        let q = Plan::parse(
            &GOOD.replace(
                "workers = 1",
                &format!("workers = 1\nrealtime = \"{text}\"\nrealtime_priority = 99"),
            ),
            "x",
        )
        .unwrap();
        assert_eq!((q.daemon.realtime, q.daemon.realtime_priority), (mode, 99));
        assert_eq!(
            p.restart_only_changes(&q),
            ["daemon.realtime", "daemon.realtime_priority"]
        );
    }
}

#[test]
fn sfc_modes() {
    let p = Plan::parse(
        &format!("{GOOD}\n[priority.4]\nmode = \"sfc\"\nsfc_threshold = \"16KiB\"\nlimit = \"2MiB\"\n[priority.5]\nmode = \"pfc+sfc\"\n"),
        "x",
    )
    .unwrap();
    assert_eq!(p.prios[4].mode(), "sfc");
    assert_eq!(p.prios[4].sfc, Some(SfcPlan { threshold: 16384 }));
    assert_eq!(p.prios[4].limit, 2 * 1024 * 1024);
    assert!(p.prios[4].lossless() && p.prios[4].thresholds().is_none());
    assert_eq!(p.prios[5].mode(), "pfc+sfc");
    assert_eq!(
        p.prios[5].sfc,
        Some(SfcPlan {
            threshold: DEFAULT_SFC_THRESHOLD
        })
    );
    assert_eq!(p.prios[5].limit, DEFAULT_XOFF + DEFAULT_HEADROOM);
    let e = err(&format!(
        "{GOOD}\n[priority.4]\nmode = \"sfc\"\nsfc_threshold = 5000\nlimit = 4000\n"
    ));
    assert!(e.contains("priority.4.limit"), "{e}");
    let e = err(&format!(
        "{GOOD}\n[priority.4]\nmode = \"pfc\"\nsfc_threshold = 5000\n"
    ));
    assert!(e.contains("priority.4.sfc_threshold"), "{e}");
}

#[test]
fn credit_mode() {
    let p = Plan::parse(
        &format!("{GOOD}\n[priority.4]\nmode = \"credit\"\n[priority.5]\nmode = \"credit\"\nlimit = \"32KiB\"\n[credit]\ntimeout = \"20ms\"\n"),
        "x",
    )
    .unwrap();
    assert_eq!(p.prios[4], PrioPlan::credit(DEFAULT_CREDIT_LIMIT));
    assert_eq!(p.prios[5], PrioPlan::credit(32 * 1024));
    assert!(p.prios[5].lossless() && p.prios[5].thresholds().is_none());
    assert_eq!(p.prios[5].mode(), "credit");
    assert!(p.ports.iter().all(|port| port.credit));
    assert_eq!(p.credit.timeout_ns, 20_000_000);
    assert_eq!(p.credit.update_interval_ns, 1_000_000);
    let mut other = p.clone();
    other.prios[5] = PrioPlan::credit(64 * 1024);
    assert!(p
        .restart_only_changes(&other)
        .contains(&"priority.N (credit mode and buffer)"));
    // Link-up is built at start: a changed [linkup] is named, not silently ignored.
    let mut other = p.clone();
    other.linkup = None;
    assert_eq!(p.restart_only_changes(&other), ["linkup"]);
}

#[test]
fn errors_name_file_field_and_reason() {
    let e = err(&GOOD.replace("xon = 32768", "xon = 99999"));
    assert!(
        e.contains("test.toml") && e.contains("priority.3.xon") && e.contains("below xoff"),
        "{e}"
    );
    let e = err(&GOOD.replace("speed = \"10G\"", "speed = \"fast\""));
    assert!(e.contains("port[1].speed"), "{e}");
    let e = err(&GOOD.replace("workers = 1", "workers = 1\nworkerz = 2"));
    assert!(e.contains("unknown field") && e.contains("workerz"), "{e}");
    let e = err(&GOOD.replace("[priority.0]", "[priority.9]"));
    assert!(e.contains("priority.9"), "{e}");
    let e = err(&GOOD.replace("limit = \"1MB\"", "limit = \"1MB\"\nxoff = 5"));
    assert!(e.contains("priority.0.xoff"), "{e}");
    let e = err(&GOOD.replace("iface = \"veth1\"", "iface = \"veth0\""));
    assert!(e.contains("listed twice"), "{e}");
    let e = err("[[port]]\niface = \"a\"\nspeed = \"1G\"\n");
    assert!(e.contains("exactly 2 ports"), "{e}");
    let e = err(&format!("{GOOD}\n[sfc]\ntransport = \"udp\"\n"));
    assert!(e.contains("sfc.source_ip"), "{e}");
    let e = err(&format!("{GOOD}\n[sfc]\nreserve_percent = 100\n"));
    assert!(e.contains("sfc.reserve_percent"), "{e}");
    let ok = Plan::parse(
        &format!(
            "{GOOD}\n[sfc]\ntransport = \"udp\"\nsource_ip = \"192.0.2.1\"\nscope = \"flow\"\n"
        ),
        "x",
    )
    .unwrap();
    assert_eq!(
        ok.sfc.udp,
        Some((crate::wire::sfcm::SFCM_UDP_PORT, [192, 0, 2, 1]))
    );
    let e = err(&format!("{GOOD}\n[watchdog]\ndetection = \"0s\"\n"));
    assert!(e.contains("watchdog.detection"), "{e}");
    let e = err(&format!("{GOOD}\n[watchdog]\naction = \"panic\"\n"));
    assert!(e.contains("action") || e.contains("panic"), "{e}");
    let e = err(&format!("{GOOD}\n[metrics]\nlisten = \"localhost\"\n"));
    assert!(e.contains("metrics.listen"), "{e}");
    let e = err(&GOOD.replace("trust = \"dscp\"", "trust = \"vibes\""));
    assert!(e.contains("trust") || e.contains("vibes"), "{e}");
}

/// Every invalid setting gets an error that names its field.
/// The largest sizes and durations that are accepted, and the sum of all priorities'
/// buffers at those sizes, stay clear of overflow.
#[test]
fn largest_sizes_and_durations_are_accepted() {
    let text = format!(
        "{GOOD}\n[priority.4]\nmode = \"pfc\"\nxoff = {m}\nxon = 0\nheadroom = {m}\n\
         [priority.5]\nlimit = {m}\n[watchdog]\ndetection = \"{d}ns\"\n",
        m = MAX_BUFFER_BYTES,
        d = MAX_DURATION_NS
    );
    let p = Plan::parse(&text, "x").unwrap();
    assert_eq!(p.prios[4].limit, 2 * MAX_BUFFER_BYTES);
    assert_eq!(p.prios[5].limit, MAX_BUFFER_BYTES);
    assert_eq!(p.watchdog.unwrap().detection_ns, MAX_DURATION_NS);
}

#[test]
fn invalid_configs_name_their_field() {
    let two_ports =
        "[[port]]\niface = \"a\"\nspeed = \"1G\"\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n";
    let cases: &[(&str, &str)] = &[
        ("[daemon]\nworkers = 0\n", "daemon.workers"),
        ("[daemon]\nworkers = 2\ncores = [1]\n", "daemon.cores"),
        ("[daemon]\nframes = 100\n", "daemon.frames"),
        ("[daemon]\nlog = \"lossless=loud\"\n", "daemon.log"),
        (
            "[daemon]\nrealtime_priority = 0\n",
            "daemon.realtime_priority",
        ),
        (
            "[daemon]\nrealtime_priority = 100\n",
            "daemon.realtime_priority",
        ),
        ("[daemon]\nrealtime_priority = 300\n", "realtime_priority"),
        ("[daemon]\nrealtime = \"yes\"\n", "realtime"),
        ("[daemon]\nbackend = \"dpdk\"\n", "backend"),
        ("[daemon]\nxdp_mode = \"offload\"\n", "xdp_mode"),
        (
            "[daemon]\nbackend = \"af-packet\"\nworkers = 2\n",
            "daemon.workers",
        ),
        ("[metrics]\nlisten = \"nowhere\"\n", "metrics.listen"),
        ("[control]\nsocket = \"relative.sock\"\n", "control.socket"),
        (
            "[watchdog]\nrestoration = \"soon\"\n",
            "watchdog.restoration",
        ),
        ("[sfc]\nmax_pause = \"0s\"\n", "sfc.max_pause"),
        (
            "[sfc]\naccept_from = [\"02:00:00:00:00:01\", \"nope\"]\n",
            "sfc.accept_from[1]",
        ),
        (
            "[sfc]\ntransport = \"udp\"\nsource_ip = \"1.2.3\"\n",
            "sfc.source_ip",
        ),
        ("[headroom]\nxoff_time = \"0us\"\n", "headroom.xoff_time"),
        ("[headroom]\nxoff_time = \"soon\"\n", "headroom.xoff_time"),
        ("[linkup]\nsamples = 1\n", "linkup.samples"),
        ("[linkup]\nmax_frame = 10\n", "linkup.max_frame"),
        ("[linkup]\ninterval = \"often\"\n", "linkup.interval"),
        (
            "[priority.3]\nmode = \"pfc\"\nheadroom = 100\n",
            "priority.3.headroom",
        ),
        (
            "[priority.3]\nmode = \"pfc\"\nxoff = \"lots\"\n",
            "priority.3.xoff",
        ),
        (
            "[priority.3]\nmode = \"sfc\"\nsfc_threshold = 10\n",
            "priority.3.sfc_threshold",
        ),
        ("[priority.3]\nmode = \"sfc\"\nxon = 10\n", "priority.3.xon"),
        (
            "[priority.3]\nmode = \"pfc\"\nlimit = 10\n",
            "priority.3.limit",
        ),
        // Sizes beyond MAX_BUFFER_BYTES and durations beyond MAX_DURATION_NS: the first
        // two made validation overflow (found while writing the config fuzz target).
        (
            "[priority.3]\nmode = \"pfc\"\nxoff = \"10000000000000000000\"\nheadroom = \"10000000000000000000\"\n",
            "priority.3.xoff",
        ),
        (
            "[priority.3]\nlimit = 9223372036854775807\n",
            "priority.3.limit",
        ),
        (
            "[priority.3]\nmode = \"pfc\"\nheadroom = \"300000GiB\"\n",
            "priority.3.headroom",
        ),
        (
            "[watchdog]\ndetection = \"18000000000s\"\n",
            "watchdog.detection",
        ),
        ("[sfc]\nmax_pause = \"5000000000s\"\n", "sfc.max_pause"),
        (
            "[linkup]\npeer_response = \"18446744073s\"\n",
            "linkup.peer_response",
        ),
        ("[priority.x]\nmode = \"pfc\"\n", "priority.x"),
        ("[priority.3]\nmode = \"bogus\"\n", "mode"),
        (
            "[priority.3]\nmode = \"credit\"\nlimit = 1000\n",
            "priority.3.limit",
        ),
        (
            "[priority.3]\nmode = \"credit\"\nxoff = 5000\n",
            "priority.3.xoff",
        ),
        (
            "[daemon]\nworkers = 2\n[priority.3]\nmode = \"credit\"\n",
            "priority.3.mode",
        ),
        ("[credit]\ntimeout = \"1ms\"\n", "credit.timeout"),
        (
            "[credit]\nupdate_interval = \"0s\"\n",
            "credit.update_interval",
        ),
        (
            "[credit]\nresync_interval = \"x\"\n",
            "credit.resync_interval",
        ),
        ("[priority.3]\ncolour = \"red\"\n", "colour"),
    ];
    for (snippet, field) in cases {
        let e = err(&format!("{two_ports}{snippet}"));
        assert!(e.contains(field), "{snippet:?} should name {field}: {e}");
    }
    for (ports, field) in [
        ("[[port]]\niface = \"a\"\nspeed = \"1G\"\n", "port"),
        (
            "[[port]]\niface = \"\"\nspeed = \"1G\"\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n",
            "port[0].iface",
        ),
        (
            "[[port]]\niface = \"a\"\nspeed = \"0\"\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n",
            "port[0].speed",
        ),
        (
            "[[port]]\niface = \"a\"\nspeed = \"1G\"\n[[port]]\niface = \"b\"\nspeed = \"999kbit\"\n",
            "port[1].speed",
        ),
        (
            "[[port]]\niface = \"a\"\nspeed = \"1G\"\npause_quanta = 0\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n",
            "port[0].pause_quanta",
        ),
    ] {
        let e = err(ports);
        assert!(e.contains(field), "should name {field}: {e}");
    }
}

/// Valid but worth a look: the plan carries one sentence per finding, naming the fields
/// (what `check-config` prints and `--json` lists, and `run` and a reload log).
#[test]
fn warnings_name_the_fields() {
    assert!(Plan::parse(GOOD, "x").unwrap().warnings.is_empty());
    let p = Plan::parse(
        &GOOD
            .replace("workers = 1", "workers = 1\nframes = 4096")
            .replace(
                "[priority.3]",
                "[priority.5]\nmode = \"credit\"\nlimit = \"4MiB\"\n[priority.3]",
            ),
        "x",
    )
    .unwrap();
    assert_eq!(p.warnings.len(), 2, "{:?}", p.warnings);
    assert!(
        p.warnings[0].starts_with("daemon.frames = 4096 cannot hold the buffers")
            && p.warnings[0].contains("priority.3, priority.5"),
        "{}",
        p.warnings[0]
    );
    assert!(
        p.warnings[1].starts_with("priority.5.limit is 4194304 bytes")
            && p.warnings[1].contains("131072 bytes"),
        "{}",
        p.warnings[1]
    );
}

/// A reload applies the live settings of the new file and none of what needs a restart:
/// after [`Plan::reloadable`] nothing is left for [`Plan::restart_only_changes`] to name, and
/// every live change is there.
#[test]
fn a_reload_takes_the_live_settings_only() {
    let p = Plan::parse(
        &format!("{GOOD}\n[priority.5]\nmode = \"credit\"\nlimit = \"64KiB\"\n"),
        "x",
    )
    .unwrap();
    let text = format!("{GOOD}\n[priority.5]\nmode = \"credit\"\nlimit = \"32KiB\"\n")
        .replace(
            "workers = 1",
            "workers = 1\nframes = 8192\nstall_guard = \"1ms\"\nlog = \"debug\"",
        )
        .replace("trust = \"dscp\"", "trust = \"pcp\"\npause_quanta = 1000")
        .replace("xon = 32768", "xon = 16384")
        + "[linkup]\nenabled = false\n[watchdog]\ndetection = \"50ms\"\n";
    let q = Plan::parse(&text, "x").unwrap();
    let changed = p.restart_only_changes(&q);
    for field in [
        "daemon.frames",
        "daemon.stall_guard",
        "port (iface, speed, trust, mtu)",
        "priority.N (credit mode and buffer)",
        "linkup",
    ] {
        assert!(changed.contains(&field), "{field} in {changed:?}");
    }
    let r = p.reloadable(&q);
    assert!(
        p.restart_only_changes(&r).is_empty(),
        "{:?}",
        p.restart_only_changes(&r)
    );
    assert_eq!(r.headroom.stall_guard_ns, p.stall_guard_ns);
    assert_eq!(r.ports[1].trust, p.ports[1].trust);
    // The live ones are the new file's.
    assert_eq!(r.daemon.log.as_deref(), Some("debug"));
    assert_eq!(r.ports[1].pause_quanta, 1000);
    assert_eq!(r.prios[3], q.prios[3]);
    assert_eq!(r.watchdog, q.watchdog);
    assert_ne!(r.watchdog, p.watchdog);
    assert_eq!(
        r.prios[5], p.prios[5],
        "a credit priority keeps its running buffer"
    );
}

/// Sizes and periods a daemon would overflow on are refused, naming the field.
#[test]
fn absurd_sizes_and_periods_are_refused() {
    let e = err(&format!(
        "{GOOD}\n[headroom]\nmin_headroom = 9223372036854775807\n"
    ));
    assert!(
        e.contains("headroom.min_headroom") && e.contains("256 TiB"),
        "{e}"
    );
    let e = err(&format!("{GOOD}\n[headroom]\nmin_headroom = \"1PiB\"\n"));
    assert!(e.contains("headroom.min_headroom"), "{e}");
    let e = err(&GOOD.replace(
        "workers = 1",
        "workers = 1\nstats_interval_s = 9223372036854775807",
    ));
    assert!(e.contains("daemon.stats_interval_s"), "{e}");
    Plan::parse(
        &GOOD.replace("workers = 1", "workers = 1\nstats_interval_s = 86400"),
        "x",
    )
    .unwrap();
}

/// A credit window must hold two of a credit port's longest frames: the sender does not know
/// the peer's window, and a frame longer than it would wait at the head for ever.
#[test]
fn a_credit_limit_holds_two_of_the_longest_frames() {
    let ports = |credit: bool| {
        format!(
            "[[port]]\niface = \"a\"\nspeed = \"10G\"\nmtu = 9000\ncredit = {credit}\n\
             [[port]]\niface = \"b\"\nspeed = \"10G\"\n"
        )
    };
    let prio = |limit: &str| format!("[priority.3]\nmode = \"credit\"\nlimit = \"{limit}\"\n");
    let e = err(&format!("{}{}", ports(true), prio("16KiB")));
    assert!(
        e.contains("priority.3.limit") && e.contains("port[0]") && e.contains("18036"),
        "{e}"
    );
    Plan::parse(&format!("{}{}", ports(true), prio("18036")), "x").unwrap();
    // A port without credits carries the priority without a window.
    Plan::parse(&format!("{}{}", ports(false), prio("16KiB")), "x").unwrap();
    // The interface's own MTU is known at start only: a plan of the default MTU checks then.
    let known = Plan::parse(&format!("{}{}", ports(false), prio("16KiB")), "x").unwrap();
    let mut credit_on_b = known.clone();
    credit_on_b.ports[1].credit = true;
    assert!(credit_on_b
        .check_credit_frames(&[None, Some(9018)], "x")
        .unwrap_err()
        .to_string()
        .contains("port[1]"));
    credit_on_b
        .check_credit_frames(&[None, Some(1518)], "x")
        .unwrap();
}
