//! Reading and validating configurations: what a good file gives, and what each bad one is
//! refused for.

use super::{
    plan::{min_pfc_headroom, IfaceFacts, LongestFrame, StartThresholds},
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
        pfc_headroom::{min_xoff, PortHeadroom},
        sched::{RealtimeMode, DEFAULT_PRIORITY},
    },
    fc::{
        adaptive::HeadroomSettings,
        credit_port::CreditTimers,
        plan::{PrioPlan, SfcPlan},
        PRIORITIES,
    },
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

/// A file without `[credit]` gets the timers the generator and the sink run with.
#[test]
fn credit_timers_default_to_the_tools_timers() {
    let p = Plan::parse(&format!("{GOOD}\n[priority.4]\nmode = \"credit\"\n"), "x").unwrap();
    assert_eq!(p.credit, CreditTimers::default());
    assert_eq!(p.credit.timeout_ns, 200_000_000);
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
        .replace("trust = \"dscp\"", "trust = \"pcp\"\npause_quanta = 20000")
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
    assert_eq!(r.ports[1].pause_quanta, 20000);
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
        .check_credit_frames(&[LongestFrame::Unknown, LongestFrame::Mtu(9018)], "x")
        .unwrap_err()
        .to_string()
        .contains("port[1]"));
    credit_on_b
        .check_credit_frames(&[LongestFrame::Unknown, LongestFrame::Mtu(1518)], "x")
        .unwrap();
}

/// Two ports at 10 Gbit/s, `mtu` under each (`""`: unset), for the tests below.
fn ten_gig(mtu: &str) -> String {
    let mtu = match mtu {
        "" => String::new(),
        m => format!("mtu = {m}\n"),
    };
    format!(
        "[[port]]\niface = \"d0\"\nspeed = \"10Gbit\"\n{mtu}[[port]]\niface = \"d1\"\n\
         speed = \"10Gbit\"\n{mtu}"
    )
}

/// A PFC priority's XOFF below the port's smallest XOFF, or a headroom that cannot hold two
/// of its longest frames and a PFC frame, is refused naming the field and the numbers: the
/// dataplane would hold XOFF at its minimum and take the difference out of the headroom
/// (all of it on a jumbo port with `xoff = "8KiB"`). Without `mtu`, a standard frame is the
/// least the port takes.
#[test]
fn a_pfc_priority_fits_two_of_the_ports_longest_frames() {
    // The audit's e2: standard MTU, XOFF 1 KiB; and e1: MTU 9000, XOFF 8 KiB.
    let e2 = "[priority.3]\nmode = \"pfc\"\nxoff = \"1KiB\"\nxon = \"512\"\nheadroom = 3044\n";
    let e = err(&format!("{}{e2}", ten_gig("")));
    assert!(
        e.contains("priority.3.xoff") && e.contains("1024 bytes") && e.contains("3036"),
        "{e}"
    );
    let e1 = "[priority.3]\nmode = \"pfc\"\nxoff = \"8KiB\"\nxon = \"4KiB\"\nheadroom = \"4KiB\"\n";
    let e = err(&format!("{}{e1}", ten_gig("9000")));
    assert!(
        e.contains("priority.3.xoff")
            && e.contains("8192 bytes")
            && e.contains("18036")
            && e.contains("port[0].mtu"),
        "{e}"
    );
    // What the dataplane would have run: XOFF at the limit, no headroom at all.
    let squeezed = {
        let mut prios = [PrioPlan::lossy(1024); PRIORITIES];
        prios[3] = PrioPlan::pfc(8192, 4096, 4096);
        let h = PortHeadroom::new(HeadroomSettings::default(), 9018, &prios, None, 0);
        h.thresholds()[3].unwrap().xoff
    };
    assert_eq!(squeezed, 12288);
    // The headroom: two of the longest frames with their FCS and a PFC frame.
    assert_eq!(min_pfc_headroom(1518), 2 * 1522 + 64);
    assert_eq!(min_pfc_headroom(9018), 2 * 9022 + 64);
    assert_eq!(
        min_pfc_headroom(1000),
        min_pfc_headroom(1518),
        "at least standard"
    );
    let pfc = |xoff: u64, headroom: u64| {
        format!("[priority.3]\nmode = \"pfc\"\nxoff = {xoff}\nxon = 0\nheadroom = {headroom}\n")
    };
    for (mtu, frame) in [("", 1518), ("1500", 1518), ("9000", 9018), ("576", 1518)] {
        let (xoff, headroom) = (min_xoff(frame), min_pfc_headroom(frame));
        let p = Plan::parse(&format!("{}{}", ten_gig(mtu), pfc(xoff, headroom)), "x").unwrap();
        // At the least accepted, the dataplane runs the file's thresholds, squeezing nothing.
        let h = PortHeadroom::new(p.headroom, frame, &p.prios, None, 0);
        let r = h.report(3, 0).unwrap();
        assert!(!r.squeezed && r.xoff >= xoff, "{mtu}: {r:?}");
        let e = err(&format!("{}{}", ten_gig(mtu), pfc(xoff - 1, headroom)));
        assert!(e.contains("priority.3.xoff"), "{mtu}: {e}");
        let e = err(&format!("{}{}", ten_gig(mtu), pfc(xoff, headroom - 1)));
        assert!(
            e.contains("priority.3.headroom") && e.contains(&format!("at least {headroom}")),
            "{mtu}: {e}"
        );
    }
    // The old "two in-flight frames" floor without the PFC frame is short of it now.
    let e = err(&format!("{}{}", ten_gig(""), pfc(65536, 3044)));
    assert!(
        e.contains("priority.3.headroom") && e.contains("3108"),
        "{e}"
    );
}

/// `[headroom] min_headroom` replaces each PFC priority's configured headroom as the floor:
/// it must hold the two frames too, and leave every PFC buffer its smallest XOFF (else XOFF
/// sits at that minimum and XON at 0).
#[test]
fn min_headroom_leaves_every_pfc_buffer_its_smallest_xoff() {
    let text = |min: &str| {
        format!(
            "{}[headroom]\nmin_headroom = {min}\n[priority.3]\nmode = \"pfc\"\n",
            ten_gig("")
        )
    };
    // The audit's h2: 1 GiB against the default 384 KiB buffer.
    let e = err(&text("\"1GiB\""));
    assert!(
        e.contains("headroom.min_headroom")
            && e.contains("priority.3")
            && e.contains("393216")
            && e.contains("at most 390180"),
        "{e}"
    );
    Plan::parse(&text("390180"), "x").unwrap();
    assert!(err(&text("390181")).contains("headroom.min_headroom"));
    let e = err(&text("3000"));
    assert!(
        e.contains("headroom.min_headroom") && e.contains("at least 3108"),
        "{e}"
    );
    // On a jumbo port the smallest XOFF is larger.
    let jumbo = text("390180").replace("speed = \"10Gbit\"\n", "speed = \"10Gbit\"\nmtu = 9000\n");
    assert!(err(&jumbo).contains("headroom.min_headroom"));
}

/// What `check-config` prints beside the file's thresholds: those a PFC priority runs from
/// start where they differ (the adaptive prior, `min_headroom`), as the dataplane divides
/// the buffer.
#[test]
fn the_thresholds_that_run_from_start_are_told_where_they_differ() {
    let p = Plan::parse(GOOD, "x").unwrap();
    assert_eq!(
        p.start_thresholds(None),
        [None; PRIORITIES],
        "as configured"
    );
    // XOFF 1 MiB, headroom 8 KiB: the prior (half the buffer) is the headroom at start.
    let text = format!(
        "{}[priority.3]\nmode = \"pfc\"\nxoff = \"1MiB\"\nxon = \"512KiB\"\nheadroom = \"8KiB\"\n",
        ten_gig("")
    );
    let p = Plan::parse(&text, "x").unwrap();
    let half = (1024 + 8) * 1024 / 2;
    let start = StartThresholds {
        xoff: half,
        xon: half - 512 * 1024,
        headroom: half,
        source: "observed",
    };
    assert_eq!(p.start_thresholds(None)[3], Some(start));
    assert_eq!(p.start_thresholds(Some(9018))[3], Some(start));
    let fixed = Plan::parse(&format!("{text}[headroom]\nadaptive = false\n"), "x").unwrap();
    assert_eq!(fixed.start_thresholds(None)[3], None, "no prior");
    let floor = Plan::parse(
        &format!("{text}[headroom]\nadaptive = false\nmin_headroom = \"64KiB\"\n"),
        "x",
    )
    .unwrap();
    assert_eq!(
        floor.start_thresholds(None)[3],
        Some(StartThresholds {
            xoff: (1024 + 8 - 64) * 1024,
            xon: (1024 + 8 - 64 - 512) * 1024,
            headroom: 64 * 1024,
            source: "configured",
        }),
        "the floor"
    );
}

/// The checks that need the interfaces are one function, which `run` calls at start and
/// `check-config` for the interfaces that exist: an interface MTU the backend cannot carry,
/// credit and PFC settings against the interface's longest frame when `mtu` is unset, and an
/// RX queue without a worker, each refused naming the field; a missing interface is left to
/// what the file says.
#[test]
fn the_interfaces_are_checked_by_one_function() {
    let facts = |mtu: u32, queues: u32| {
        Some(IfaceFacts {
            mtu: Some(mtu),
            rx_queues: Some(queues),
        })
    };
    let p = Plan::parse(
        &format!(
            "{}[priority.3]\nmode = \"pfc\"\nxoff = \"16KiB\"\nxon = \"8KiB\"\n",
            ten_gig("")
        ),
        "x",
    )
    .unwrap();
    assert_eq!(
        p.check_interfaces(&[facts(1500, 1), facts(1500, 1)], &[], "x")
            .unwrap(),
        [Some(1518), Some(1518)]
    );
    assert_eq!(
        p.check_interfaces(&[None, None], &[], "x").unwrap(),
        [None, None]
    );
    // The audit's a1: lo's MTU, 65536.
    let e = p
        .check_interfaces(&[facts(65536, 1), None], &[], "x")
        .unwrap_err()
        .to_string();
    assert!(e.contains("port[0].mtu") && e.contains("MTU 65536"), "{e}");
    // A 9,000-byte interface with `mtu` unset: XOFF 16 KiB is below its 18,036.
    let e = p
        .check_interfaces(&[facts(1500, 1), facts(9000, 1)], &[], "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("priority.3.xoff")
            && e.contains("port[1]")
            && e.contains("d1's MTU 9000")
            && e.contains("18036"),
        "{e}"
    );
    // A credit window against a jumbo interface.
    let credit = Plan::parse(
        &format!(
            "{}[priority.3]\nmode = \"credit\"\nlimit = \"16KiB\"\n",
            ten_gig("")
        ),
        "x",
    )
    .unwrap();
    let e = credit
        .check_interfaces(&[facts(9000, 1), None], &[], "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("priority.3.limit") && e.contains("port[0]"),
        "{e}"
    );
    // Four RX queues and one worker: refused, unless AF_PACKET takes every queue.
    let e = p
        .check_interfaces(&[facts(1500, 4), facts(1500, 1)], &[], "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field `port[0].iface`")
            && e.contains("d0 receives on 4 RX queues")
            && e.contains("ethtool -L d0 combined 1"),
        "{e}"
    );
    let two = Plan::parse(&format!("[daemon]\nworkers = 4\n{}", ten_gig("")), "x").unwrap();
    two.check_interfaces(&[facts(1500, 4), facts(1500, 4)], &[], "x")
        .unwrap();
    let packet = Plan::parse(
        &format!("[daemon]\nbackend = \"af-packet\"\n{}", ten_gig("")),
        "x",
    )
    .unwrap();
    packet
        .check_interfaces(&[facts(1500, 4), facts(1500, 4)], &[], "x")
        .unwrap();
}

/// A reload says its warnings of the plan it applies ([`Plan::reloadable`]): the running
/// pool and stall guard, not the file's values that wait for a restart (the audit's
/// c_32768 / c_524288).
#[test]
fn reload_warnings_are_of_the_plan_that_runs() {
    let file = |frames: u32, guard: &str| {
        format!(
            "[daemon]\nframes = {frames}\nstall_guard = \"{guard}\"\n{}[priority.3]\nmode = \"pfc\"\n\
             xoff = \"8MiB\"\nxon = \"4MiB\"\nheadroom = \"8MiB\"\n",
            ten_gig("")
        )
    };
    let running = Plan::parse(&file(32768, "250us"), "x").unwrap();
    let new = Plan::parse(&file(524288, "off"), "x").unwrap();
    // The file alone: a pool that holds it above 66-byte frames, and no guard.
    assert!(new
        .warnings
        .iter()
        .any(|w| w.contains("stall_guard is off")));
    let applied = running.reloadable(&new);
    assert!(
        applied.warnings.iter().any(|w| {
            w.starts_with("daemon.frames = 32768 cannot hold the buffers")
                && w.contains("priority.3")
        }),
        "{:?}",
        applied.warnings
    );
    assert!(
        !applied
            .warnings
            .iter()
            .any(|w| w.contains("stall_guard is off")),
        "the guard still runs: {:?}",
        applied.warnings
    );
    assert_eq!(applied.warnings, applied.config_warnings());
}

/// The pool holds the lossless buffers of both ingress ports: in wire mode both fill at once
/// under congestion both ways, in the pool of the worker that received them.
#[test]
fn the_pool_is_sized_for_both_ports_buffers() {
    // 15,872 pool frames beside the fill rings and the control reserve; two PFC priorities of
    // 384 KiB are 13,108 60-byte frames per port: one port's fit, both ports' do not.
    let text = format!(
        "{}[priority.3]\nmode = \"pfc\"\n[priority.4]\nmode = \"pfc\"\n",
        ten_gig("")
    );
    let p = Plan::parse(&text, "x").unwrap();
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(
        p.warnings[0].starts_with("daemon.frames = 32768 holds the buffers")
            && p.warnings[0].contains("priority.3, priority.4 on both ports")
            && p.warnings[0].contains("daemon.frames = 43112"),
        "{}",
        p.warnings[0]
    );
    // One such priority fits both ports' in 60-byte frames.
    let one = Plan::parse(
        &format!("{}[priority.3]\nmode = \"pfc\"\n", ten_gig("")),
        "x",
    )
    .unwrap();
    assert!(one.warnings.is_empty(), "{:?}", one.warnings);
}

/// Each worker is pinned to a CPU of its own: a CPU listed twice is refused, naming it.
#[test]
fn a_cpu_listed_twice_in_cores_is_refused() {
    let e = err(&format!(
        "[daemon]\nworkers = 2\ncores = [1, 1]\nbusy_poll = true\n{}",
        ten_gig("")
    ));
    assert!(
        e.contains("daemon.cores") && e.contains("CPU 1 is listed twice"),
        "{e}"
    );
    let e = err(&format!(
        "[daemon]\nworkers = 2\ncores = [0, 1, 0]\n{}",
        ten_gig("")
    ));
    assert!(
        e.contains("daemon.cores") && e.contains("cores[0] and cores[2]"),
        "{e}"
    );
    Plan::parse(
        &format!("[daemon]\nworkers = 2\ncores = [1, 0]\n{}", ten_gig("")),
        "x",
    )
    .unwrap();
}

/// An interface whose MTU netlink did not report, with `mtu` unset: the backend's largest
/// frame is assumed, and an error it causes says so instead of naming an MTU 9198 the
/// interface never had and the file never set.
#[test]
fn an_unread_mtu_is_said_to_be_assumed() {
    let unread = Some(IfaceFacts {
        mtu: None,
        rx_queues: Some(1),
    });
    let pfc = Plan::parse(
        &format!(
            "{}[priority.3]\nmode = \"pfc\"\nxoff = \"16KiB\"\nxon = \"8KiB\"\n",
            ten_gig("")
        ),
        "x",
    )
    .unwrap();
    let e = pfc
        .check_interfaces(&[unread, None], &[], "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("priority.3.xoff")
            && e.contains("d0's MTU could not be read")
            && e.contains("9216 bytes each, assumed")
            && e.contains("or set port[0].mtu")
            && !e.contains("d0's MTU 9198"),
        "{e}"
    );
    let credit = Plan::parse(
        &format!(
            "{}[priority.3]\nmode = \"credit\"\nlimit = \"16KiB\"\n",
            ten_gig("")
        ),
        "x",
    )
    .unwrap();
    let e = credit
        .check_interfaces(&[None, unread], &[], "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("priority.3.limit")
            && e.contains("d1's MTU could not be read")
            && e.contains("or set port[1].mtu"),
        "{e}"
    );
}

/// A worker's CPU outside the process's affinity is a configuration error at start and in
/// `check-config` (one check, [`Plan::check_interfaces`]), naming the field and the CPUs
/// allowed; before, `run` logged "pinning failed" and ran the worker unpinned.
#[test]
fn a_core_outside_the_affinity_is_refused() {
    let p = Plan::parse(
        &format!("[daemon]\nworkers = 2\ncores = [1, 4, 7]\n{}", ten_gig("")),
        "x",
    )
    .unwrap();
    let e = p
        .check_interfaces(&[None, None], &[0, 1, 2, 3, 6], "x")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field `daemon.cores`")
            && e.contains("CPU 4 (cores[1])")
            && e.contains("CPUs 0-3,6"),
        "{e}"
    );
    // cores[2] pins no worker (two workers); an unknown affinity checks nothing.
    p.check_interfaces(&[None, None], &[0, 1, 4], "x").unwrap();
    p.check_interfaces(&[None, None], &[], "x").unwrap();
}

/// A priority has one name, "0".."7": "03" and "+3" read as 3 too, and were silently
/// overwritten (or won) by key order.
#[test]
fn a_priority_is_configured_by_one_section() {
    // The audit's h1.
    let e = err(&format!(
        "{}[priority.3]\nmode = \"pfc\"\n[priority.\"+3\"]\nmode = \"lossy\"\nlimit = 0\n\
         [priority.03]\nmode = \"sfc\"\n",
        ten_gig("")
    ));
    assert!(
        e.contains("priority.+3")
            && e.contains("[priority.03] and [priority.3] configure priority 3 too"),
        "{e}"
    );
    let e = err(&format!("{}[priority.03]\nmode = \"sfc\"\n", ten_gig("")));
    assert!(
        e.contains("field `priority.03`") && e.contains("write priority 3 as [priority.3]"),
        "{e}"
    );
    for bad in ["8", "x", "-1", "33"] {
        let e = err(&format!(
            "{}[priority.\"{bad}\"]\nmode = \"sfc\"\n",
            ten_gig("")
        ));
        assert!(e.contains("priority must be 0..=7"), "{bad}: {e}");
    }
}

/// A PFC pause shorter than a worker wakes up in is refused, naming the port's
/// `pause_quanta` and how long it lasts; one shorter than 1 ms is warned about; the longest
/// a frame carries is never refused.
#[test]
fn a_pause_a_worker_cannot_refresh_in_time_is_named() {
    let text = |speed: &str, quanta: u16, mode: &str| {
        format!(
            "[[port]]\niface = \"d0\"\nspeed = \"{speed}\"\npause_quanta = {quanta}\n\
             [[port]]\niface = \"d1\"\nspeed = \"10Gbit\"\n[priority.3]\nmode = \"{mode}\"\n"
        )
    };
    // The audit's 100 quanta at 10 Gbit/s: 5 us.
    let e = err(&text("10Gbit", 100, "pfc"));
    assert!(
        e.contains("port[0].pause_quanta")
            && e.contains("100 quanta last 5 us at 10.000 Gbit/s")
            && e.contains("at least 1954"),
        "{e}"
    );
    // No PFC priority sends it: nothing to say.
    let sfc = Plan::parse(&text("10Gbit", 100, "sfc"), "x").unwrap();
    assert!(!sfc.warnings.iter().any(|w| w.contains("pause_quanta")));
    // 100 us to 1 ms: a warning with the quanta that last 1 ms.
    let p = Plan::parse(&text("10Gbit", 10000, "pfc"), "x").unwrap();
    let w: Vec<_> = p
        .warnings
        .iter()
        .filter(|w| w.contains("pause_quanta"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(
        w[0].starts_with("port[0].pause_quanta = 10000 lasts 512 us at 10.000 Gbit/s")
            && w[0].contains("19532 would last 1 ms"),
        "{}",
        w[0]
    );
    // The default at 10 Gbit/s (3.4 ms): no warning.
    let p = Plan::parse(&text("10Gbit", 65535, "pfc"), "x").unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    // At 100 Gbit/s the longest pause lasts 336 us: warned, and said to be the longest; at
    // 400 Gbit/s (84 us) too, never refused.
    for speed in ["100Gbit", "400Gbit"] {
        let p = Plan::parse(&text(speed, 65535, "pfc"), "x").unwrap();
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("port[0].pause_quanta = 65535")
                    && w.contains("the longest pause a PFC frame carries")),
            "{:?}",
            p.warnings
        );
    }
    assert!(err(&text("400Gbit", 60000, "pfc")).contains("port[0].pause_quanta"));
}

/// A size that is not a whole number of bytes is refused, naming the field and the value,
/// not rounded (a unit left out made `xoff = "0.9"` 1 byte); fractions of a unit stay.
#[test]
fn a_fractional_byte_size_is_refused() {
    let e = err(&format!(
        "{}[priority.3]\nmode = \"pfc\"\nxoff = \"0.9\"\nxon = \"0.4\"\n",
        ten_gig("")
    ));
    assert!(
        e.contains("priority.3.xoff") && e.contains("size \"0.9\": not a whole number of bytes"),
        "{e}"
    );
    let p = Plan::parse(
        &format!(
            "{}[priority.3]\nmode = \"pfc\"\nxoff = \"4.5KiB\"\nxon = 0\n[priority.4]\n\
             limit = \"1.5MB\"\n",
            ten_gig("")
        ),
        "x",
    )
    .unwrap();
    assert_eq!(p.prios[3].pfc.unwrap().xoff, 4608);
    assert_eq!(p.prios[4].limit, 1_500_000);
}
