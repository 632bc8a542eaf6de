//! The injection tool, configuration errors, crash recovery and hostile control frames.
//!
//! Every test here takes the traffic lock, also those that push no traffic: a test beside a
//! traffic test held the workers of `one_flow_through_two_workers_gets_the_whole_line` off for
//! milliseconds (stalls, RX lag up to 9 ms), and it lost 29-278 frames to `headroom_overflow`
//! in 3 of 6 runs of this binary, none in 4 with the tests one at a time, which took as long
//! (43-45 s). Which neighbour did it was not pinned down; the candidates start a daemon whose
//! workers are real-time at the same priority (which a worker cannot preempt, nor a stall
//! guard one below it), or tshark.

mod common;

use std::{process::Command, time::Duration};

use common::{
    capture, control_section, has_xdp, json_u64, logged_values, pcap_fields, run_scapy, stdout_of,
    unique, veth, xdp_frames_per_queue, Netns, Proc, TempFile, BIN,
};

#[test]
fn send_pfc_and_pause_decode_in_tshark() {
    let _l = common::traffic_lock();
    let ns = Netns::new("lt");
    let (a, b) = (unique("ta"), unique("tb"));
    veth(&ns, &a, &ns, &b);
    let pcap = std::env::temp_dir().join(format!("{}.pcap", unique("cap")));
    let pcap = pcap.to_str().unwrap();
    let mut t = capture(&ns, &b, pcap, 3);
    let out = ns
        .cmd(BIN)
        .args([
            "send",
            "pfc",
            "--iface",
            &a,
            "--priorities",
            "3,4",
            "--quanta",
            "1234",
        ])
        .args(["--count", "2", "--interval", "1ms", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["sent"], 2);
    let out = ns
        .cmd(BIN)
        .args(["send", "pause", "--iface", &a, "--quanta", "100"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done = std::time::Instant::now() + Duration::from_secs(5);
    while t.try_wait().unwrap().is_none() && std::time::Instant::now() < done {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = t.kill();
    let rows = pcap_fields(
        pcap,
        &[
            "macc.opcode",
            "macc.cbfc.enbv",
            "macc.cbfc.pause_time.c3",
            "macc.cbfc.pause_time.c4",
            "macc.cbfc.pause_time.c5",
            "macc.pause_time",
        ],
    );
    let _ = std::fs::remove_file(pcap);
    assert_eq!(
        rows,
        vec![
            "0x0101\t0x0018\t1234\t1234\t0\t",
            "0x0101\t0x0018\t1234\t1234\t0\t",
            "0x0001\t\t\t\t\t100",
        ]
    );
}

/// `send` on a link without carrier (its peer is down) says how many of the frames it handed
/// to the kernel were refused rather than sent: it reported them all as sent.
#[test]
fn send_says_what_the_kernel_refused() {
    let _l = common::traffic_lock();
    let ns = Netns::new("lr");
    let (a, b) = (unique("ra"), unique("rb"));
    veth(&ns, &a, &ns, &b);
    ns.run(&["ip", "link", "set", &b, "down"]);
    let r: serde_json::Value = serde_json::from_slice(&stdout_of(
        ns.cmd(BIN)
            .args([
                "send",
                "pfc",
                "--iface",
                &a,
                "--priorities",
                "3",
                "--count",
                "5",
            ])
            .args(["--interval", "1ms", "--json"]),
    ))
    .unwrap();
    assert_eq!(r["sent"], 5, "{r}");
    assert!(json_u64(&r, &["tx_refused"]) >= 1, "{r}");
}

/// Tool flags that cannot be honoured exit 2 with a line naming the flag, whether clap or the
/// tool refuses them, before any interface is opened: zero stop times, watch intervals and
/// self-test timeouts (at zero every frame of a working link counted as lost),
/// flow ids past u32, more flows than a sink accounts (a per-flow table of millions, no
/// use to a sink), a credit window no full-size frame fits (the generator would wait for
/// ever), rule and threshold flags without the flag they belong to.
#[test]
fn tool_usage_errors_name_the_flag_and_exit_2() {
    let _l = common::traffic_lock();
    for (args, flag) in [
        (
            &["gen", "--iface", "lo", "--rate", "1G", "--duration", "0s"][..],
            "--duration",
        ),
        (
            &[
                "gen",
                "--iface",
                "lo",
                "--rate",
                "1G",
                "--count",
                "5",
                "--first-flow",
                "4294967295",
                "--flows",
                "2",
            ],
            "--first-flow",
        ),
        (
            &[
                "gen", "--iface", "lo", "--rate", "1G", "--size", "50", "--count", "1",
            ],
            "--size",
        ),
        (
            &[
                "gen", "--iface", "lo", "--rate", "1G", "--count", "1", "--flows", "2000000",
            ],
            "--flows",
        ),
        (
            &[
                "sink",
                "--iface",
                "lo",
                "--credit",
                "3",
                "--credit-buffer",
                "512",
            ],
            "--credit-buffer",
        ),
        (
            &[
                "sink",
                "--iface",
                "lo",
                "--credit",
                "3",
                "--credit-buffer",
                "96KiB",
                "--drain-rate",
                "1G",
                "--buffer",
                "64KiB",
                "--xoff",
                "32KiB",
                "--xon",
                "16KiB",
            ],
            "--credit-buffer",
        ),
        (
            &["sink", "--iface", "lo", "--pause-quanta", "0"],
            "--pause-quanta",
        ),
        (&["sink", "--iface", "lo", "--xoff", "1KiB"], "--drain-rate"),
        (
            &["sink", "--iface", "lo", "--idle-timeout", "0s"],
            "--idle-timeout",
        ),
        (&["status", "--watch", "0s"], "--watch"),
        (
            &["selftest", "--a", "x", "--b", "y", "--timeout", "0s"],
            "--timeout",
        ),
        (
            &["selftest", "--a", "x", "--b", "y", "--timeout", "500us"],
            "--timeout",
        ),
        (
            &["cable", "--a", "x", "--b", "y", "--loss-match", "data"],
            "--loss",
        ),
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?} names {flag}: {err}");
    }
}

#[test]
fn config_errors_name_the_field_and_exit_78() {
    let _l = common::traffic_lock();
    let cfg = TempFile::new("bad", "[[port]]\niface = \"a\"\nspeed = \"1G\"\n[[port]]\niface = \"b\"\nspeed = \"1G\"\n[priority.3]\nmode = \"pfc\"\nxoff = 1000\nxon = 2000\n");
    for sub in [
        vec!["check-config", cfg.path()],
        vec!["run", "--config", cfg.path()],
    ] {
        let out = Command::new(BIN).args(&sub).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{sub:?}: {err}");
        assert!(
            err.contains(cfg.path()) && err.contains("priority.3.xon"),
            "{err}"
        );
    }
    let good = TempFile::new("good", "[[port]]\niface = \"a\"\nspeed = \"1G\"\n[[port]]\niface = \"b\"\nspeed = \"10G\"\n[priority.3]\nmode = \"pfc\"\n");
    // Neither interface exists here: the file alone (`--file-only`).
    let out = Command::new(BIN)
        .args(["check-config", "--file-only", good.path()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("OK as a file (--file-only"), "{text}");
    assert!(text.contains("priority 3: lossless (PFC)"), "{text}");
    assert!(text.contains("port a: 1.000 Gbit/s, trust pcp,"), "{text}");
    // --json: the plan and the warnings, or the error.
    let out = Command::new(BIN)
        .args(["check-config", "--file-only", good.path(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["ok"], true);
    assert_eq!(r["host_checked"], false);
    assert_eq!(r["ports"][1]["speed_bps"], 10_000_000_000u64);
    assert_eq!(r["priorities"][3]["mode"], "pfc");
    assert!(
        r["priorities"][3]["xoff_bytes"].as_u64().unwrap() > 0,
        "{r}"
    );
    let out = Command::new(BIN)
        .args(["check-config", cfg.path(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["ok"], false);
    assert!(
        r["error"].as_str().unwrap().contains("priority.3.xon"),
        "{r}"
    );
}

/// `check-config` checks the ports' interfaces as `run` does at start, and refuses what `run`
/// would with the same error and exit 78: here `lo`, whose MTU (65536, `mtu` unset) no
/// backend carries. It also prints the thresholds a PFC priority runs from start where they
/// are not the file's (the adaptive headroom's prior: half the buffer).
#[test]
fn check_config_refuses_what_run_refuses_and_tells_what_runs() {
    let _l = common::traffic_lock();
    let ns = Netns::new("cc");
    veth(&ns, "dm0", &ns, "dm1");
    let lo = TempFile::new(
        "lo",
        "[control]\nsocket = \"\"\n[metrics]\nlisten = \"\"\n[[port]]\niface = \"lo\"\n\
         speed = \"10Gbit\"\n[[port]]\niface = \"dm0\"\nspeed = \"10Gbit\"\n\
         [priority.3]\nmode = \"credit\"\nlimit = \"8KiB\"\n",
    );
    let out = ns
        .cmd(BIN)
        .args(["check-config", lo.path()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains("field `port[0].mtu`") && err.contains("lo's MTU 65536"),
        "{err}"
    );
    check_config_json_refuses(&ns, lo.path(), 78, "port[0].mtu");
    // With `mtu` set, lo is checked against it and passes.
    let fixed = TempFile::new(
        "lo",
        &std::fs::read_to_string(lo.path())
            .unwrap()
            .replace("iface = \"lo\"\n", "iface = \"lo\"\nmtu = 1500\n"),
    );
    let out = ns
        .cmd(BIN)
        .args(["check-config", fixed.path()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let prior = TempFile::new(
        "prior",
        "[[port]]\niface = \"a\"\nspeed = \"10G\"\n[[port]]\niface = \"b\"\nspeed = \"10G\"\n\
         [priority.3]\nmode = \"pfc\"\nxoff = \"1MiB\"\nxon = \"512KiB\"\nheadroom = \"8KiB\"\n",
    );
    let text = String::from_utf8_lossy(&stdout_of(Command::new(BIN).args([
        "check-config",
        "--file-only",
        prior.path(),
    ])))
    .into_owned();
    assert!(
        text.contains(
            "priority 3: lossless (PFC), XOFF 1048576 B, XON 524288 B, headroom 8192 B\n  \
             runs from start with XOFF 528384 B, XON 4096 B, headroom 528384 B: the adaptive \
             headroom's prior"
        ),
        "{text}"
    );
    let r: serde_json::Value = serde_json::from_slice(&stdout_of(Command::new(BIN).args([
        "check-config",
        "--file-only",
        "--json",
        prior.path(),
    ])))
    .unwrap();
    let start = &r["priorities"][3]["at_start"];
    assert_eq!(start.as_array().unwrap().len(), 2, "{r}");
    assert_eq!(start[1]["iface"], "b");
    assert_eq!(start[1]["xoff_bytes"], 528384);
    assert_eq!(start[1]["source"], "observed");
    assert_eq!(r["priorities"][0]["at_start"], serde_json::json!([]));
}

/// What only a start showed, `check-config` sees too, with `run`'s error and exit code: a
/// port whose interface does not exist (exit 1, as `run`: systemd retries until it appears;
/// before, a warning under `OK`), and a worker CPU the process may not run on (exit 78;
/// before, `run` logged "pinning failed" and both accepted it). `--file-only` checks the
/// file alone, for a file meant for another machine.
/// `check-config --json` on `path` in `ns` exits `code` with `ok: false` and an error saying
/// `what`.
fn check_config_json_refuses(ns: &Netns, path: &str, code: i32, what: &str) {
    let out = ns
        .cmd(BIN)
        .args(["check-config", "--json", path])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(code));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["ok"], false);
    assert!(r["error"].as_str().unwrap().contains(what), "{r}");
}

/// check-config names the process that holds a port (its lock read from the kernel's list,
/// not taken) in a warning, and still passes: `run` would be refused while it runs, but on
/// `systemctl reload` the holder is the daemon being reloaded. Before, nothing said so.
#[test]
fn check_config_names_the_process_holding_a_port() {
    let _l = common::traffic_lock();
    let ns = Netns::new("ci");
    veth(&ns, "ci0", &ns, "ci1");
    let cfg = TempFile::new(
        "ci",
        "[control]\nsocket = \"\"\n[metrics]\nlisten = \"\"\n\
         [[port]]\niface = \"ci0\"\nspeed = \"10Gbit\"\n\
         [[port]]\niface = \"ci1\"\nspeed = \"10Gbit\"\n",
    );
    let check = || {
        String::from_utf8_lossy(&stdout_of(ns.cmd(BIN).args(["check-config", cfg.path()])))
            .into_owned()
    };
    assert!(!check().contains("in use by"), "{}", check());
    let mut dut = Proc::spawn(&ns, &["run", "--config", cfg.path()]);
    dut.wait_ready(Duration::from_secs(10));
    let (text, pid) = (check(), dut.pid());
    dut.interrupt();
    let (status, log) = dut.finish(Duration::from_secs(10));
    assert!(status.success(), "{log}");
    for (i, iface) in ["ci0", "ci1"].iter().enumerate() {
        let said = format!("port[{i}].iface {iface} is in use by lossless pid {pid}:");
        assert!(text.contains(&said), "{said:?} in {text}");
    }
}

#[test]
fn check_config_sees_what_a_start_refuses() {
    let _l = common::traffic_lock();
    let ns = Netns::new("ch");
    veth(&ns, "dm0", &ns, "dm1");
    let file = |daemon: &str, second: &str| {
        TempFile::new(
            "ch",
            &format!(
                "[daemon]\n{daemon}\n[control]\nsocket = \"\"\n[metrics]\nlisten = \"\"\n\
                 [[port]]\niface = \"dm0\"\nspeed = \"10Gbit\"\n\
                 [[port]]\niface = \"{second}\"\nspeed = \"10Gbit\"\n"
            ),
        )
    };
    // `lossless ARGS` behind `wrapper` (`env`: none) exits `code` saying `what`.
    let refused = |wrapper: &[&str], args: &[&str], code: i32, what: &[&str]| {
        let out = ns
            .cmd(wrapper[0])
            .args(&wrapper[1..])
            .arg(BIN)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        for w in what {
            assert!(err.contains(w), "{args:?}: {w:?} in {err}");
        }
    };
    let missing = file("", "nosuch0");
    let no_iface = ["port[1].iface: no interface \"nosuch0\""];
    for sub in [&["check-config"][..], &["run", "--config"][..]] {
        refused(&["env"], &[sub, &[missing.path()]].concat(), 1, &no_iface);
    }
    check_config_json_refuses(&ns, missing.path(), 1, no_iface[0]);
    let text = String::from_utf8_lossy(&stdout_of(ns.cmd(BIN).args([
        "check-config",
        "--file-only",
        missing.path(),
    ])))
    .into_owned();
    assert!(text.contains("OK as a file"), "{text}");

    let pinned = file("cores = [1]", "dm1");
    let outside = [
        "field `daemon.cores`: CPU 1 (cores[0]) is not one this process may run on",
        "it may run on CPUs 0 ",
    ];
    for sub in [&["check-config"][..], &["run", "--config"][..]] {
        refused(
            &["taskset", "-c", "0"],
            &[sub, &[pinned.path()]].concat(),
            78,
            &outside,
        );
    }
    // On CPU 1 it is accepted.
    let out = ns
        .cmd("taskset")
        .args(["-c", "1", BIN, "check-config", pinned.path()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// With the stall guard off, nothing bounds what arrives while a worker does not run but the
/// PFC headroom: `check-config` (and `run`, which validates the same way) says how long each
/// PFC priority's headroom lasts at the fastest port's speed.
#[test]
fn an_unguarded_pfc_headroom_and_sfc_limit_are_told_in_time() {
    let _l = common::traffic_lock();
    let cfg = TempFile::new(
        "sg",
        "[daemon]\nstall_guard = \"off\"\n[[port]]\niface = \"a\"\nspeed = \"1G\"\n\
         [[port]]\niface = \"b\"\nspeed = \"10G\"\n[priority.3]\nmode = \"pfc\"\n\
         [priority.4]\nmode = \"sfc\"\n[priority.5]\nmode = \"lossy\"\n",
    );
    let (err, lines) = check_config_lines(&cfg, "stall_guard is off");
    // The default 256 KiB headroom at 10 Gbit/s: 210 us; the SFC defaults' 1 MiB limit above
    // their 32 KiB threshold: 813 us. The lossy priority is not named.
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].contains("priority.3's headroom of 262144 bytes, 210 us at 10.000 Gbit/s"),
        "{err}"
    );
    assert!(
        lines[1].contains(
            "priority.4's limit above its sfc_threshold, 1015808 bytes, 813 us at 10.000 Gbit/s"
        ),
        "{err}"
    );
    // With the guard on (the default), no such line.
    let guarded = TempFile::new(
        "sg",
        &std::fs::read_to_string(cfg.path())
            .unwrap()
            .replace("stall_guard = \"off\"", "stall_guard = \"250us\""),
    );
    assert!(check_config_lines(&guarded, "stall_guard is off")
        .1
        .is_empty());
}

/// Runs `check-config` on `cfg`, asserts that it accepted it, and returns its output and the
/// warnings in it that contain `what`, after checking that `--json` lists the same.
fn check_config_lines(cfg: &TempFile, what: &str) -> (String, Vec<String>) {
    use serde_json::Value;
    let out = Command::new(BIN)
        .args(["check-config", "--file-only", cfg.path()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("warning: "))
        .filter(|l| l.contains(what))
        .map(str::to_string)
        .collect();
    let json: Value = serde_json::from_slice(&stdout_of(Command::new(BIN).args([
        "check-config",
        "--file-only",
        "--json",
        cfg.path(),
    ])))
    .unwrap();
    let listed: Vec<String> = json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.contains(what))
        .map(str::to_string)
        .collect();
    assert_eq!(listed, lines, "--json lists what the text says: {json}");
    (text, lines)
}

/// With the guard on, a stall still goes unnoticed for up to `stall_guard` x 1.5: an SFC-only
/// priority whose limit above its threshold fills faster than that at the fastest port is
/// named, with the limit that would cover it.
#[test]
fn an_sfc_limit_a_stall_outruns_is_told() {
    let _l = common::traffic_lock();
    let cfg = TempFile::new(
        "so",
        "[[port]]\niface = \"a\"\nspeed = \"10G\"\n[[port]]\niface = \"b\"\nspeed = \"25G\"\n\
         [priority.3]\nmode = \"sfc\"\n[priority.4]\nmode = \"sfc\"\nlimit = \"2MiB\"\n\
         [priority.5]\nmode = \"pfc+sfc\"\n",
    );
    let (err, lines) = check_config_lines(&cfg, "may go unnoticed");
    // 375 us at 25 Gbit/s is 1,171,875 bytes: more than the default 1 MiB limit above its
    // 32 KiB threshold (325 us), less than 2 MiB's. PFC's headroom adapts to it by itself.
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(
            "priority.3's limit above its sfc_threshold, 1015808 bytes, lasts 325 us at \
                 25.000 Gbit/s, less than the 375 us"
        ) && lines[0].contains("a limit of 1204643 bytes covers it"),
        "{err}"
    );
}

/// `run` with a port whose interface does not exist: one clear error naming the field, before
/// anything is attached or probed.
#[test]
fn a_missing_interface_is_one_clear_error() {
    let _l = common::traffic_lock();
    let good = TempFile::new("noif", "[[port]]\niface = \"lo\"\nspeed = \"1G\"\n[[port]]\niface = \"nosuch0\"\nspeed = \"10G\"\n");
    let out = Command::new(BIN)
        .args(["run", "--config", good.path()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "lossless: error: port[1].iface: no interface \"nosuch0\" in this network namespace \
         (`ip link` lists what exists; under systemd the service is restarted until it appears)"
    );
}

fn dut_config(d0: &str, d1: &str) -> (TempFile, common::SocketPath) {
    let (control, socket) = control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!("[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n{control}"),
    );
    (cfg, socket)
}

#[test]
fn stale_xdp_program_from_a_crash_is_replaced() {
    let _l = common::traffic_lock();
    let (ns, peer) = (Netns::new("lc"), Netns::new("lp"));
    let (d0, d1, p0, p1) = (unique("d"), unique("d"), unique("p"), unique("p"));
    veth(&ns, &d0, &peer, &p0);
    veth(&ns, &d1, &peer, &p1);
    let (cfg, _socket) = dut_config(&d0, &d1);
    let mut first = Proc::spawn(&ns, &["run", "--config", cfg.path()]);
    first.wait_ready(Duration::from_secs(10));
    first.kill(); // SIGKILL: no chance to detach
    assert!(
        has_xdp(&ns, &d0),
        "a killed daemon leaves its program behind"
    );
    let mut second = Proc::spawn(&ns, &["run", "--config", cfg.path(), "--json"]);
    second.wait_ready(Duration::from_secs(10));
    assert!(
        second.stderr().contains("replacing an XDP program"),
        "{}",
        second.stderr()
    );
    second.interrupt();
    let report = second.json(Duration::from_secs(10));
    assert_eq!(report["ports"].as_array().unwrap().len(), 2);
    assert!(!has_xdp(&ns, &d0) && !has_xdp(&ns, &d1));
}

/// Frames we did not write (crafted with scapy): a valid PFC frame is obeyed and counted,
/// malformed MAC control frames are counted drops, a truncated LLDPDU goes to the link agent
/// (which survives it and counts it malformed), other link-local traffic (LACP) is consumed
/// and counted, an SFCM addressed to the daemon's port is obeyed and one addressed to another
/// host goes on, and nothing panics.
#[test]
fn foreign_and_malformed_control_frames_are_counted() {
    let _l = common::traffic_lock();
    let (ns, peer) = (Netns::new("lc"), Netns::new("lp"));
    let (d0, d1, p0, p1) = (unique("d"), unique("d"), unique("p"), unique("p"));
    veth(&ns, &d0, &peer, &p0);
    veth(&ns, &d1, &peer, &p1);
    let (cfg, _socket) = dut_config(&d0, &d1);
    let mut dut = Proc::spawn(&ns, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    let d0_mac = ns.run(&["cat", &format!("/sys/class/net/{d0}/address")]);
    let d0_mac = d0_mac.trim();
    let script = format!(
        r#"
from scapy.all import Ether, Raw, sendp
import struct
pfc = Ether(dst="01:80:c2:00:00:01", type=0x8808) / Raw(struct.pack("!HH8H", 0x0101, 0x08, 0, 0, 0, 500, 0, 0, 0, 0))
bad_opcode = Ether(dst="01:80:c2:00:00:01", type=0x8808) / Raw(struct.pack("!HH", 0x0202, 1))
truncated = Ether(dst="01:80:c2:00:00:01", type=0x8808) / Raw(struct.pack("!HH", 0x0101, 0x08))
# Bits in the vector's reserved upper octet: ignored, the pause obeyed.
reserved = Ether(dst="01:80:c2:00:00:01", type=0x8808) / Raw(struct.pack("!HH8H", 0x0101, 0x0108, *([1] * 8)))
lldp = Ether(dst="01:80:c2:00:00:0e", type=0x88cc) / Raw(b"\x02\x07\x04" + b"\x00" * 6)
lacp = Ether(dst="01:80:c2:00:00:02", type=0x8809) / Raw(b"\x01" + b"\x00" * 45)
# SFCM (version 1, type 1, class scope, priority 3) asking for an absurd pause of 10^18 ns.
sfcm_body = struct.pack("!BBBBIQQQQ6sBB4s4sHH4s", 1, 1, 0, 3, 7, 10**18, 0, 1 << 20, 10**9,
                        b"\x02\x00\x00\x00\x00\x09", 0, 0, b"\0" * 4, b"\0" * 4, 0, 0, b"\0" * 4)
sfcm = Ether(dst="{d0_mac}", type=0x88b5) / Raw(sfcm_body)
# The same addressed to another host: in transit, passed on out of d1 (lossy here: not obeyed).
transit = Ether(dst="02:00:00:00:00:01", type=0x88b5) / Raw(sfcm_body)
bad_sfcm = Ether(dst="{d0_mac}", type=0x88b5) / Raw(b"\x01\x01\xff")
credit = Ether(dst="01:80:c2:00:00:01", type=0x88b5) / Raw(b"\x01\x02\x01\x00" + b"\xff" * 6)
runt = Raw(b"\x01\x02\x03")
sendp([pfc, pfc, bad_opcode, truncated, reserved, lldp, lacp, sfcm, transit, bad_sfcm, credit], iface="{p0}", verbose=False)
"#
    );
    run_scapy(&peer, &script);
    std::thread::sleep(Duration::from_millis(300));
    dut.interrupt();
    let report = dut.json(Duration::from_secs(10));
    let port0 = &report["ports"][0];
    assert_eq!(port0["iface"], d0.as_str());
    assert_eq!(port0["pfc_rx"][3], 3, "{port0}");
    // Bad opcode, truncated PFC, bad SFCM, and the truncated LLDPDU the link agent could not
    // parse.
    assert_eq!(port0["drops"]["malformed"], 4, "{port0}");
    // LACP, and a credit update while credits are not enabled: control traffic, not forwarded.
    assert_eq!(port0["drops"]["link_local"], 2, "{port0}");
    // The absurd SFC pause is clamped by the reaction point (100 ms at most), not obeyed.
    assert_eq!(port0["sfcm_rx"][3], 2, "{port0}");
    assert_eq!(port0["sfcm_forwarded"][3], 1, "{port0}");
    let sfc_paused = port0["sfc_paused_ns"][3].as_u64().unwrap();
    assert!(sfc_paused > 0 && sfc_paused <= 100_000_000, "{port0}");
    // 500 quanta at 1 Gbit/s pause priority 3 of d0's egress for 256 us, twice.
    assert!(
        port0["paused_ns"][3].as_u64().unwrap() >= 256_000,
        "{port0}"
    );
}

/// Hostile frames on a port that runs credits, sent by scapy in the middle of good traffic:
/// credit updates with a bad CRC, an unknown Op, no or too many entries, a non-zero reserved
/// byte, a VL twice or cut short; a PTP message whose length field overruns the frame; an
/// LLDPDU whose TLV overruns it. Each is a `malformed` drop (logged as such when the daemon
/// stops), a valid but absurd credit grant is taken for what it is (the send rule caps it),
/// and the good traffic is forwarded without a loss.
#[test]
fn hostile_frames_beside_good_traffic_are_counted_and_harmless() {
    let _l = common::traffic_lock();
    let (ng, nd, ns) = (Netns::new("hg"), Netns::new("hd"), Netns::new("hs"));
    let (g0, d0, d1, s0) = (unique("hg"), unique("hd"), unique("hd"), unique("hs"));
    veth(&ng, &g0, &nd, &d0);
    veth(&nd, &d1, &ns, &s0);
    let (control, _socket) = control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n\
             [priority.5]\nmode = \"credit\"\n[linkup]\ninterval = \"0s\"\n{control}"
        ),
    );
    let mut dut = Proc::spawn(&nd, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    let sink = common::start_sink(&ns, &s0);
    let gen = Proc::spawn(
        &ng,
        &[
            "gen",
            "--iface",
            &g0,
            "--rate",
            "100Mbit",
            "--size",
            "500",
            "--duration",
            "2s",
            "--json",
        ],
    );
    let script = format!(
        r#"
from scapy.all import Ether, Raw, sendp
import struct, time

def lpcrc(data):
    c = 0xFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0xD008 if c & 1 else c >> 1
    return c ^ 0xFFFF

assert lpcrc(b"123456789") == 0x0A3D
def entry(op, fctbs, vl, fccl, crc=None):
    body = struct.pack("!BBBB", (op << 4) | (fctbs >> 8), fctbs & 0xFF, (vl << 4) | (fccl >> 8), fccl & 0xFF)
    return body + struct.pack("!H", lpcrc(body) if crc is None else crc)
def credit(count, entries, reserved=0):
    return Ether(dst="01:80:c2:00:00:0e", type=0x88B5) / Raw(bytes([1, 2, count, reserved]) + entries)
good = entry(2, 0, 5, 0xFFF)
hostile = [
    credit(1, entry(0, 1, 5, 2, crc=0x1234)),      # bad LPCRC
    credit(1, entry(7, 1, 5, 2)),                  # unknown Op
    credit(0, b""),                                # no entry
    credit(17, good * 17),                         # too many entries
    credit(1, good, reserved=9),                   # reserved byte set
    credit(2, good + good),                        # VL 5 twice
    credit(2, good),                               # cut short
    # Pdelay_Req whose messageLength (1000) overruns the frame.
    Ether(dst="01:80:c2:00:00:0e", type=0x88F7) / Raw(struct.pack("!BBH", 0x02, 0x02, 1000) + b"\0" * 40),
    # LLDPDU whose Chassis ID TLV claims 200 octets.
    Ether(dst="01:80:c2:00:00:0e", type=0x88CC) / Raw(struct.pack("!H", (1 << 9) | 200) + b"\x04" + b"\0" * 20),
]
time.sleep(0.5)
sendp(hostile + [credit(1, good)], iface="{g0}", verbose=False)
"#
    );
    run_scapy(&ng, &script);
    let gen = gen.json(Duration::from_secs(20));
    let sink = sink.json(Duration::from_secs(20));
    dut.interrupt();
    let (report, log) = dut.json_and_log(Duration::from_secs(10));
    let d0r = &report["ports"][0];
    assert_eq!(d0r["drops"]["malformed"], 9, "{d0r}");
    assert_eq!(d0r["credit_updates_rx"][5], 1, "the valid grant: {d0r}");
    assert!(
        log.contains("frames dropped") && log.contains("malformed"),
        "{log}"
    );
    assert_eq!(sink["unique"], gen["frames_sent"], "{sink}");
    assert_eq!(sink["lost"], 0, "{sink}");
}

/// SFC messages as a reaction point sees them from hosts that are not its congestion point,
/// or too many: with `[sfc] accept_from` only the listed sender is obeyed, and at most
/// `max_rate` of its messages per second; the rest are counted drops. Messages addressed to
/// another host are not the daemon's to refuse: an admitted one goes on ahead of data (and
/// counts against its sender's rate), a refused one goes on as data, as any frame for
/// another host does.
#[test]
fn sfc_messages_from_strangers_or_floods_are_refused() {
    let _l = common::traffic_lock();
    let (ns, peer) = (Netns::new("lc"), Netns::new("lp"));
    let (d0, d1, p0, p1) = (unique("d"), unique("d"), unique("p"), unique("p"));
    veth(&ns, &d0, &peer, &p0);
    veth(&ns, &d1, &peer, &p1);
    let (control, socket) = control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n\
             [sfc]\naccept_from = [\"02:00:00:00:00:aa\"]\nmax_rate = 10\n{control}"
        ),
    );
    let mut dut = Proc::spawn(&ns, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    let d0_mac = ns.run(&["cat", &format!("/sys/class/net/{d0}/address")]);
    let d0_mac = d0_mac.trim();
    let script = format!(
        r#"
from scapy.all import Ether, Raw, sendp
import struct
body = struct.pack("!BBBBIQQQQ6sBB4s4sHH4s", 1, 1, 0, 3, 7, 1000000, 0, 1 << 20, 10**9,
                   b"\x02\x00\x00\x00\x00\x09", 0, 0, b"\0" * 4, b"\0" * 4, 0, 0, b"\0" * 4)
def sfcm(src, dst):
    return Ether(src=src, dst=dst, type=0x88b5) / Raw(body)
stranger, ours, other = "02:00:00:00:00:bb", "02:00:00:00:00:aa", "02:00:00:00:00:01"
sendp([sfcm(stranger, "{d0_mac}")] * 5 + [sfcm(stranger, other)] * 4 + [sfcm(ours, other)] * 3
      + [sfcm(ours, "{d0_mac}")] * 30, iface="{p0}", verbose=False)
"#
    );
    run_scapy(&peer, &script);
    std::thread::sleep(Duration::from_millis(300));
    // `status` says what SFC did at each priority that saw it, lossy ones included.
    let text = String::from_utf8(stdout_of(
        Command::new(BIN).args(["status", "--socket", &socket]),
    ))
    .unwrap();
    assert!(
        text.contains(
            "SFC messages sent 0 (stall guard 0), received 10 (passed on to another host 3); \
             egress paused by SFC"
        ),
        "{text}"
    );
    dut.interrupt();
    let report = dut.json(Duration::from_secs(10));
    let (port0, port1) = (&report["ports"][0], &report["ports"][1]);
    assert_eq!(port0["drops"]["sfcm_not_allowed"], 5, "{port0}");
    // A burst within far less than a second: a second's worth admitted (the 3 in transit and
    // 7 for the daemon), the other 23 refused.
    assert_eq!(port0["drops"]["sfcm_rate_limited"], 23, "{port0}");
    assert_eq!(port0["sfcm_rx"][3], 10, "{port0}");
    assert_eq!(port0["sfcm_forwarded"][3], 3, "{port0}");
    assert!(
        port0["sfc_paused_ns"][3].as_u64().unwrap() > 0,
        "obeyed: {port0}"
    );
    // The stranger's 4 for another host went on as data (untagged: priority 0).
    assert_eq!(port0["rx_data_frames"][0], 4, "{port0}");
    assert_eq!(port1["tx_data_frames"][0], 4, "{port1}");
}

/// gen —veth— tc mirred —veth— daemon —veth— sink over veths of two queues each: `g0` faces
/// `m0`, `m1` faces `d0`, `d1` faces `s0`.
///
/// Between the generator and the daemon, `mid` redirects every frame from `m0` to `m1` and
/// back with tc's `mirred`. The kernel then picks `m1`'s TX queue, and so `d0`'s RX queue
/// (veth hands a frame to the peer's RX queue of the same index), by each flow's hash, as a
/// NIC's RSS would: a generator's own AF_XDP socket sends on one queue. What comes back
/// (PFC, SFC messages) is spread over `g0`'s two RX queues the same way, and `s0` has two:
/// the daemon's second worker sends on `d1`'s second queue. The tools bind both.
struct TwoQueueWire {
    ns: Netns,
    gen_ns: Netns,
    sink_ns: Netns,
    mid: Netns,
    /// `mid`'s end facing d0.
    m1: String,
    d0: String,
    g0: String,
    d1: String,
    s0: String,
}

/// A veth pair of two queues each way, `a` in `an` and `b` in `bn`, both up.
fn two_queue_veth(a: &str, an: &Netns, b: &str, bn: &Netns) {
    common::sh(&[
        "ip",
        "link",
        "add",
        a,
        "netns",
        &an.name,
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        b,
        "netns",
        &bn.name,
        "numtxqueues",
        "2",
        "numrxqueues",
        "2",
    ]);
    an.run(&["ip", "link", "set", a, "up"]);
    bn.run(&["ip", "link", "set", b, "up"]);
}

/// A [`TwoQueueWire`] in namespaces named after `tag`.
fn two_queue_wire(tag: &str) -> TwoQueueWire {
    let (ns, gen_ns, sink_ns, mid) = (
        Netns::new(tag),
        Netns::new(&format!("{tag}g")),
        Netns::new(&format!("{tag}s")),
        Netns::new(&format!("{tag}m")),
    );
    let (d0, g0, d1, s0) = (unique("d"), unique("g"), unique("d"), unique("s"));
    let (m0, m1) = (unique("m"), unique("m"));
    for (a, an, b, bn) in [
        (&g0, &gen_ns, &m0, &mid),
        (&m1, &mid, &d0, &ns),
        (&d1, &ns, &s0, &sink_ns),
    ] {
        two_queue_veth(a, an, b, bn);
    }
    for (from, to) in [(&m0, &m1), (&m1, &m0)] {
        common::sh(&[
            "ip", "netns", "exec", &mid.name, "tc", "qdisc", "add", "dev", from, "clsact",
        ]);
        common::sh(&[
            "ip", "netns", "exec", &mid.name, "tc", "filter", "add", "dev", from, "ingress", "u32",
            "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", to,
        ]);
    }
    std::thread::sleep(Duration::from_millis(500));
    TwoQueueWire {
        ns,
        gen_ns,
        sink_ns,
        mid,
        m1,
        d0,
        g0,
        d1,
        s0,
    }
}

/// Through a two-worker daemon on `w` (d1's `speed` given, d0 at 10 Gbit/s, `prios` its
/// priority sections), started between a sink and `gen` with `gen_args`: the reports of gen,
/// sink and daemon.
fn through_two_workers(
    w: &TwoQueueWire,
    d1_speed: &str,
    prios: &str,
    gen_args: &[&str],
) -> (serde_json::Value, serde_json::Value, serde_json::Value) {
    let (control, _socket) = control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[daemon]\nworkers = 2\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\
             [[port]]\niface = \"{}\"\nspeed = \"{d1_speed}\"\n{prios}{control}",
            w.d0, w.d1
        ),
    );
    let sink = common::start_sink(&w.sink_ns, &w.s0);
    let mut dut = Proc::spawn(&w.ns, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    let mut args = vec!["gen", "--iface", &w.g0, "--json"];
    args.extend_from_slice(gen_args);
    let gen = Proc::spawn(&w.gen_ns, &args).json(Duration::from_secs(20));
    let sink = sink.json(Duration::from_secs(20));
    dut.interrupt();
    let dut = dut.json(Duration::from_secs(10));
    assert_eq!(dut["workers"], 2);
    (gen, sink, dut)
}

/// Two workers on two-queue veths: each opens its own queue of both ports over its own UMEM,
/// sixteen flows spread over both (the kernel's count per queue says so), every frame is
/// forwarded, and both workers stop cleanly.
#[test]
fn two_workers_on_two_queue_veths() {
    let _l = common::traffic_lock();
    let w = two_queue_wire("lw");
    let (gen, sink, report) = through_two_workers(
        &w,
        "10Gbit",
        "",
        &[
            "--rate",
            "100Mbit",
            "--count",
            "5000",
            "--duration",
            "10s",
            "--flows",
            "16",
        ],
    );
    assert_eq!(report["workers"], 2);
    assert_eq!(report["backend"], "af_xdp");
    assert_eq!(gen["frames_sent"], 5000);
    assert_eq!(sink["unique"], 5000, "{sink}");
    let split = xdp_frames_per_queue::<2>(&w.ns, &w.d0);
    assert!(split.iter().all(|&n| n >= 100), "d0's queues got {split:?}");
    assert!(!has_xdp(&w.ns, &w.d0) && !has_xdp(&w.ns, &w.d1));
}

/// Link-up with two workers, the link partner's frames all arriving on the second queue:
/// ptp4l's host sends everything on TX queue 1 (XPS maps every CPU there), and veth hands a
/// frame to the peer's RX queue of the same index, so d0 receives it on worker 1's queue.
/// Link-up runs on the leader, which binds queue 0: worker 1 hands the peer-delay frames
/// over, and the port is measured. Before the hand-over worker 1 dropped them as link-local
/// and the port was never measured.
#[test]
fn link_up_hears_a_partner_on_another_workers_queue() {
    let _l = common::traffic_lock();
    let (ns, pns, sns) = (Netns::new("lq"), Netns::new("lqp"), Netns::new("lqs"));
    let (d0, g0, d1, s0) = (unique("d"), unique("g"), unique("d"), unique("s"));
    for (a, an, b, bn) in [(&g0, &pns, &d0, &ns), (&d1, &ns, &s0, &sns)] {
        two_queue_veth(a, an, b, bn);
    }
    let cpus = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(32);
    let all = format!("{:x}", (1u64 << cpus) - 1);
    for (q, mask) in [(0, "0"), (1, all.as_str())] {
        pns.run(&[
            "sh",
            "-c",
            &format!("echo {mask} > /sys/class/net/{g0}/queues/tx-{q}/xps_cpus"),
        ]);
    }
    let (_ptp, _out) = common::ptp4l(&pns, &g0);
    let (control, socket) = control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[daemon]\nworkers = 2\n[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n\
             [[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n\
             [priority.3]\nmode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\nheadroom = \"1MiB\"\n\
             [linkup]\nsamples = 8\nsample_interval = \"5ms\"\ninterval = \"0s\"\n{control}"
        ),
    );
    let mut dut = Proc::spawn(&ns, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while common::status_of(&socket)["ports"][0]["priorities"][3]["source"] != "measured" {
        assert!(
            std::time::Instant::now() < deadline,
            "d0 never measured: drops {}\n{}",
            common::status_of(&socket)["ports"][0]["counters"]["drops"],
            dut.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // What the partner sent came in on worker 1's queue.
    let [q0, q1] = xdp_frames_per_queue::<2>(&ns, &d0);
    assert!(q0 == 0 && q1 > 0, "d0's queues got {q0} and {q1}");
    dut.interrupt();
    let report = dut.json(Duration::from_secs(10));
    assert_eq!(
        report["ports"][0]["drops"]["link_local"], 0,
        "{}",
        report["ports"][0]
    );
}

/// What a run through two workers leaves to look at.
struct LineRun {
    gen: serde_json::Value,
    sink: serde_json::Value,
    dut: serde_json::Value,
    /// Frames the XDP programs saw on each RX queue of d0 and of s0.
    d0_queues: [u64; 2],
    s0_queues: [u64; 2],
}

/// Priority 3 lossless by PFC, and its buffer (XOFF + the default 256 KiB headroom floor).
const PFC_3: (&str, u64) = (
    "[priority.3]\nmode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\n",
    (64 + 256) * 1024,
);

/// A run of `flows` flows at 2 Gbit/s of 1000-byte frames on priority 3 (`plan` its section,
/// `buffer` the bytes it may hold) through two workers into a 1 Gbit/s port, judged once more
/// on a fresh topology after a delivery below `min_bps`, as the cable's rate is (a host busy
/// elsewhere can starve a run; a rate above the line cannot), or after a loss with the worker
/// held off longer than `buffer` lasts at 2 Gbit/s; `None` if that second run was such a loss
/// too (the host's, not judged: the other tests of this file run beside it).
fn the_line_through_two_workers(
    tag: &str,
    (plan, buffer): (&str, u64),
    flows: &str,
    min_bps: f64,
) -> Option<LineRun> {
    let run = || {
        let w = two_queue_wire(tag);
        let (gen, sink, dut) = through_two_workers(
            &w,
            "1Gbit",
            plan,
            &[
                "--rate",
                "2Gbit",
                "--size",
                "1000",
                "--priority",
                "3",
                "--duration",
                "2s",
                "--flows",
                flows,
            ],
        );
        LineRun {
            gen,
            sink,
            dut,
            d0_queues: xdp_frames_per_queue::<2>(&w.ns, &w.d0),
            s0_queues: xdp_frames_per_queue::<2>(&w.sink_ns, &w.s0),
        }
    };
    let the_hosts = |r: &LineRun| {
        let lost = json_u64(&r.sink, &["lost"]);
        common::loss_is_the_hosts(lost, &r.dut["ports"][0], buffer, 2e9 as u64)
    };
    let first = run();
    if line_rate(&first.sink) >= min_bps && !the_hosts(&first) {
        return Some(first);
    }
    println!(
        "{} bit/s on the first run: once more",
        line_rate(&first.sink)
    );
    let second = run();
    (!the_hosts(&second)).then_some(second)
}

fn line_rate(sink: &serde_json::Value) -> f64 {
    sink["rate_bps"].as_f64().expect("rate_bps")
}

impl LineRun {
    /// Every frame the generator sent arrived once, PFC or SFC paused it, and the sink got at
    /// least `min_bps` of the 1 Gbit/s line, and no more than the line.
    fn assert_lossless(&self, min_bps: f64) {
        let (gen, sink) = (&self.gen, &self.sink);
        let sent = json_u64(gen, &["frames_sent"]);
        let went = common::where_frames_went(&self.dut);
        assert_eq!(json_u64(sink, &["unique"]), sent, "{went}\n{sink}");
        assert_eq!(json_u64(sink, &["lost"]), 0, "{sink}");
        let paused = json_u64(gen, &["pfc_rx"]) + json_u64(gen, &["sfcm_rx"]);
        assert!(paused > 0, "the line congested: {gen}");
        let r = line_rate(sink);
        assert!(r <= 1.01e9, "faster than the 1 Gbit/s line: {r} bit/s");
        assert!(
            r >= min_bps,
            "the 1 Gbit/s line delivered {r} bit/s: {sink}"
        );
        println!("the 1 Gbit/s line delivered {r} bit/s");
    }
}

/// A flow its sender put on one queue reaches one worker, and still gets the line, losing
/// nothing: the workers of a port share its line (`dataplane::shaper::LineClock`). With a
/// bucket per worker at its share of the speed, as before, this run delivered 499 Mbit/s of
/// the 1 Gbit/s port (997 with one worker).
///
/// Where the flow lands decides how much of the line: on the leader's queue, 0.99 of it; on
/// worker 1's (on the lab VM of 2026-12-06 the generator's frames arrive on d0's second queue)
/// the leader, which runs the congestion point, hears a crossing only when worker 1 rings it
/// (`dataplane::leader_bell`), a wake-up later, and its XON comes that much later after the
/// buffer fell to XON: 0.96-0.98 of the line in three runs on a quiet VM, 0.92-0.95 in three
/// with a compiler running beside.
/// Until the leader's notice term counted worker 1's looks as looks
/// (`dataplane::pfc_headroom`), it took the leader's sleeps for blindness, the headroom in
/// force ate the buffer, XOFF fell to its minimum and XON to 0: 0.83-0.85 in three runs in the
/// same conditions (6,100-6,800 XOFFs against 940-1,040), 0.78-0.85 in eight on a quiet VM.
/// Before the bell the leader slept up to 10 ms while worker 1's flow crossed XOFF, and the
/// run lost a quarter of its frames to `headroom_overflow` (60,000-104,000 in five runs). So
/// the floor here is 0.7 of the line: what is claimed for a flow on either queue, with room
/// for a busy host.
#[test]
fn one_flow_through_two_workers_gets_the_whole_line() {
    let _l = common::traffic_lock();
    if let Some(r) = the_line_through_two_workers("lo", PFC_3, "1", 0.7e9) {
        r.assert_lossless(0.7e9);
    }
}

/// Sixteen flows spread over both workers (d0's queues each got a share) share the line and
/// never exceed it, and PFC keeps every flow lossless: the port's congestion is counted over
/// both RX queues, whichever worker sees it. The sink binds both of `s0`'s RX queues (the
/// daemon's second worker sends on `d1`'s second, which veth hands to `s0`'s second), one
/// AF_XDP socket each over one pool: every flow arrives, whichever queue carried it.
///
/// How much of the line they fill is not judged: 0.72-0.84 of it on the 2-vCPU VM in
/// November (one flow: 0.99), where two busy real-time workers leave the generator and the tc
/// hop little CPU, so the generator resumes late after XON: with `gen --realtime` 0.92-0.93,
/// with the workers at normal priority 0.83-0.91, and 0.97-0.98 with XOFF 128 KiB and XON
/// 96 KiB, whose XON leaves more to drain while it resumes. On 2026-12-06, quiet: 0.95-0.97
/// in six runs, 0.90-0.94 in three with a compiler running.
#[test]
fn flows_over_two_workers_share_the_line_losslessly() {
    let _l = common::traffic_lock();
    if let Some(r) = the_line_through_two_workers("ls", PFC_3, "16", 0.0) {
        r.assert_lossless(0.0);
        let sent = json_u64(&r.gen, &["frames_sent"]);
        for (port, split) in [("d0", r.d0_queues), ("s0", r.s0_queues)] {
            assert!(
                split.iter().all(|&n| n >= sent / 32),
                "{port}'s queues got {split:?} of {sent}"
            );
        }
        // Both tools bound both queues of their two-queue veths over AF_XDP.
        assert_eq!(r.sink["backend"], "af_xdp", "{}", r.sink);
        assert_eq!(r.gen["backend"], "af_xdp", "{}", r.gen);
        assert_eq!(r.sink["flows"].as_array().map(Vec::len), Some(16));
    }
}

/// SFC over two workers: sixteen flows spread over both (d0's queues each got a share), each
/// worker's congestion point tells the generator to pause (its SFCMs leave on the worker's
/// own queue of d0 and reach the generator whichever queue carried them), and nothing is
/// lost.
#[test]
fn sfc_over_two_workers_is_lossless() {
    let _l = common::traffic_lock();
    let plan = "[priority.3]\nmode = \"sfc\"\nsfc_threshold = \"32KiB\"\nlimit = \"2MiB\"\n";
    if let Some(r) = the_line_through_two_workers("lf", (plan, 2 << 20), "16", 0.0) {
        r.assert_lossless(0.0);
        assert!(
            json_u64(&r.gen, &["sfcm_rx"]) > 0,
            "gen saw no SFCM: {}",
            r.gen
        );
        let sent = json_u64(&r.gen, &["frames_sent"]);
        let split = r.d0_queues;
        assert!(
            split.iter().all(|&n| n >= sent / 32),
            "d0's queues got {split:?} of {sent}"
        );
    }
}

/// A queue added to a port under a running daemon (`ethtool -L`) is an error in its log,
/// naming the port and both remedies: frames on it go to the kernel, never forwarded (on veth
/// a queue added under an XDP program runs none, so only the channel count tells).
#[test]
fn a_queue_added_under_a_running_daemon_is_an_error_in_its_log() {
    let _l = common::traffic_lock();
    let w = two_queue_wire("la");
    // One queue each way on both links to start with (an XDP program attaches only where the
    // port's RX queues cover what its peer may send on).
    let channels = |links: &[(&Netns, &String)], n: &str| {
        for (ns, iface) in links {
            common::sh(&[
                "ip", "netns", "exec", &ns.name, "ethtool", "-L", iface, "rx", n, "tx", n,
            ]);
        }
    };
    // d0 first: raising m1 past what d0 receives on is refused while d0 runs a program.
    let d0_link = [(&w.ns, &w.d0), (&w.mid, &w.m1)];
    channels(&d0_link, "1");
    channels(&[(&w.ns, &w.d1), (&w.sink_ns, &w.s0)], "1");
    let (control, _socket) = control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n{control}",
            w.d0, w.d1
        ),
    );
    let mut dut = Proc::spawn(&w.ns, &["run", "--config", cfg.path()]);
    dut.wait_ready(Duration::from_secs(10));
    channels(&d0_link, "2");
    let line = format!(
        "since start, port[0].iface: {} receives on 2 RX queues",
        w.d0
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(12);
    while !dut.stderr().contains(&line) {
        assert!(
            std::time::Instant::now() < deadline,
            "no error in\n{}",
            dut.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = dut.stderr();
    assert!(
        log.contains("workers = 2") && log.contains(&format!("ethtool -L {} combined 1", w.d0)),
        "{log}"
    );
    dut.interrupt();
}

/// A daemon whose port receives on more RX queues than it has workers refuses to start,
/// naming the port, the queues and both remedies: a frame on a queue no worker binds would go
/// to the kernel, never forwarded or counted. It is a configuration error (exit 78), which
/// `check-config` gives too, with the same message. `doctor` fails the port for it too.
#[test]
fn a_port_with_more_queues_than_workers_is_refused() {
    let _l = common::traffic_lock();
    let w = two_queue_wire("lq");
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n",
            w.d0, w.d1
        ),
    );
    let mut errors = Vec::new();
    for args in [
        vec!["run", "--config", cfg.path()],
        vec!["check-config", cfg.path()],
    ] {
        let out = w.ns.cmd(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(78), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "field `port[0].iface`: {} receives on 2 RX queues",
                w.d0
            )) && err.contains("daemon.workers = 1")
                && err.contains("workers = 2")
                && err.contains(&format!("ethtool -L {} combined 1", w.d0)),
            "{args:?}: {err}"
        );
        let line = err.lines().find(|l| l.starts_with("lossless: error:"));
        errors.push(line.map(str::to_string));
    }
    assert_eq!(
        errors[0], errors[1],
        "check-config refuses what run refuses, in its words"
    );
    // With a worker per queue, both accept it.
    let two = TempFile::new(
        "cfg",
        &format!(
            "[daemon]\nworkers = 2\n{}",
            std::fs::read_to_string(cfg.path()).unwrap()
        ),
    );
    let out =
        w.ns.cmd(BIN)
            .args(["check-config", two.path()])
            .output()
            .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `doctor` says so before anything is run.
    let out =
        w.ns.cmd(BIN)
            .args(["doctor", "--iface", &w.d0])
            .output()
            .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL    every RX queue bound")
            && text.contains(&format!("ethtool -L {} rx 1", w.d0)),
        "{text}"
    );
    assert!(!has_xdp(&w.ns, &w.d0) && !has_xdp(&w.ns, &w.d1));
}

/// An AF_PACKET sink that stops receiving counts what its socket's full receive queue drops
/// as its own (`lost_here`, `kernel_drops.rx_ring_full`), never as lost upstream: the
/// kernel's `PACKET_STATISTICS`, which resets on each read, summed.
#[test]
fn an_af_packet_sink_counts_its_own_drops() {
    let _l = common::traffic_lock();
    let (ng, ns) = (Netns::new("apg"), Netns::new("aps"));
    let (g, s) = (unique("apg"), unique("aps"));
    veth(&ng, &g, &ns, &s);
    let sink = common::start_sink_with(&ns, &s, &["--backend", "af-packet"]);
    let gen = Proc::spawn(
        &ng,
        &[
            "gen",
            "--iface",
            &g,
            "--rate",
            "2Gbit",
            "--size",
            "1000",
            "--duration",
            "2s",
            "--json",
        ],
    );
    // Stopped for 0.6 s of the 2 (its idle timeout is 1 s): at 2 Gbit/s that is about
    // 150 MB, far more than its 8 MiB receive queue holds.
    std::thread::sleep(Duration::from_millis(500));
    common::stop_for(sink.pid(), Duration::from_millis(600));
    let gen = gen.json(Duration::from_secs(20));
    let sink = sink.json(Duration::from_secs(20));
    let (sent, lost) = (json_u64(&gen, &["frames_sent"]), json_u64(&sink, &["lost"]));
    assert!(lost > 10_000, "the stop lost too little to tell: {sink}");
    assert_eq!(json_u64(&sink, &["received"]) + lost, sent, "{sink}");
    assert_eq!(json_u64(&sink, &["lost_upstream"]), 0, "{sink}");
    assert_eq!(json_u64(&sink, &["lost_here"]), lost, "{sink}");
    assert!(
        json_u64(&sink, &["kernel_drops", "rx_ring_full"]) >= lost,
        "{sink}"
    );
}

/// A congestion-point sink told not to pause (`--no-pfc`) drops what overflows its buffer:
/// that is its own loss (`lost_here`), as its socket's would be, never blamed upstream. One
/// test frame gives no rate (it spans no time).
#[test]
fn a_sinks_own_buffer_overflow_is_its_own_loss() {
    let _l = common::traffic_lock();
    let (ng, ns) = (Netns::new("sog"), Netns::new("sos"));
    let (g, s) = (unique("sog"), unique("sos"));
    veth(&ng, &g, &ns, &s);
    let run_gen = |count: &str| {
        Proc::spawn(
            &ng,
            &[
                "gen",
                "--iface",
                &g,
                "--rate",
                "1Gbit",
                "--size",
                "1000",
                "--count",
                count,
                "--duration",
                "5s",
                "--json",
            ],
        )
        .json(Duration::from_secs(20))
    };
    let sink = common::start_sink_with(&ns, &s, &["--drain-rate", "100Mbit", "--no-pfc"]);
    let gen = run_gen("20000");
    let sink = sink.json(Duration::from_secs(20));
    let (sent, lost) = (json_u64(&gen, &["frames_sent"]), json_u64(&sink, &["lost"]));
    let overflow = json_u64(&sink, &["buffer_overflow"]);
    assert!(
        overflow > 1_000,
        "the buffer overflowed too little to tell: {sink}"
    );
    assert!(lost > 0 && lost <= overflow, "{sink}");
    assert_eq!(json_u64(&sink, &["lost_here"]), lost, "{sink}");
    assert_eq!(json_u64(&sink, &["lost_upstream"]), 0, "{sink}");
    assert_eq!(json_u64(&sink, &["unique"]) + overflow, sent, "{sink}");
    let one = common::start_sink(&ns, &s);
    run_gen("1");
    let one = one.json(Duration::from_secs(20));
    assert_eq!(json_u64(&one, &["received"]), 1, "{one}");
    assert_eq!(one["rate_bps"], 0.0, "{one}");
}

/// A long run says what it is doing: a sink that has seen no test frame yet says so at every
/// progress line (one left waiting for a generator that never came shows in its log), and
/// once traffic flows gen and sink say what they sent and received since the previous line.
#[test]
fn gen_and_sink_log_progress_lines() {
    let _l = common::traffic_lock();
    let (ng, ns) = (Netns::new("prg"), Netns::new("prs"));
    let (g, s) = (unique("prg"), unique("prs"));
    veth(&ng, &g, &ns, &s);
    let mut sink = common::start_sink_with(&ns, &s, &["--progress", "400ms"]);
    sink.wait_for("no test frames yet", Duration::from_secs(5));
    let gen = Proc::spawn(
        &ng,
        &[
            "gen",
            "--iface",
            &g,
            "--rate",
            "100Mbit",
            "--size",
            "500",
            "--duration",
            "1500ms",
            "--progress",
            "400ms",
            "--json",
        ],
    );
    let (gen, gen_log) = gen.json_and_log(Duration::from_secs(20));
    let (sink, sink_log) = sink.json_and_log(Duration::from_secs(20));
    let sent_total = json_u64(&gen, &["frames_sent"]);
    assert_eq!(json_u64(&sink, &["unique"]), sent_total, "{sink}");

    let progress = "progress over the last";
    let sent = logged_values(&gen_log, progress, "sent");
    assert!(
        sent.len() >= 3,
        "gen: 1.5 s at one line per 0.4 s:\n{gen_log}"
    );
    assert!(sent[0] > 0, "gen sent from the start:\n{gen_log}");
    assert!(sent.windows(2).all(|w| w[0] < w[1]), "{gen_log}");
    assert!(*sent.last().unwrap() <= sent_total, "{gen_log}");
    // Paused by PFC/PAUSE, by class-scope SFC and by flow-scope SFC, each told apart.
    for field in [
        "rate=",
        " paused=0 %",
        "sfc_paused=0 %",
        "sfc_flow_paused=0 %",
    ] {
        assert!(gen_log.contains(field), "no {field}: {gen_log}");
    }

    let waiting = sink_log.matches("no test frames yet").count();
    let received = logged_values(&sink_log, progress, "received");
    assert!(waiting >= 1 && received.len() >= 3, "{sink_log}");
    let first_progress = sink_log.find(progress).unwrap();
    assert!(
        sink_log.rfind("no test frames yet").unwrap() < first_progress,
        "no 'waiting' line once traffic came:\n{sink_log}"
    );
    assert!(received.windows(2).all(|w| w[0] <= w[1]), "{sink_log}");
    assert!(*received.last().unwrap() <= sent_total, "{sink_log}");
    assert!(
        logged_values(&sink_log, progress, "missing")
            .iter()
            .all(|&m| m == 0),
        "{sink_log}"
    );
}

/// `bench/forward`'s reference forwarder (`lossless-bench forward`) carries every frame of a
/// modest stream from one port to the other over real AF_XDP sockets, counts them, and takes
/// its programs off both ports at SIGINT: a bench row it measures means forwarding, not loss.
/// (It is not lossless: at 20 Mbit/s of gen's 1,000-byte frames its lean fill ring of 2,048
/// buffers rides out a stall of 0.8 s, far beyond the longest this machine has shown.)
#[test]
fn the_bench_forwarder_carries_every_frame() {
    let _l = common::traffic_lock();
    let w = common::Wire::new("bf");
    let sink = common::start_sink(&w.sink_ns, &w.s);
    let mut fwd = Proc::command(
        &w.dut_ns,
        env!("CARGO_BIN_EXE_lossless-bench"),
        &["forward", "--ifaces", &w.d0, &w.d1, "--poll"],
    );
    fwd.wait_for("ready", Duration::from_secs(10));
    let gen = Proc::spawn(
        &w.gen_ns,
        &[
            "gen", "--iface", &w.g, "--rate", "20Mbit", "--count", "3000", "--json",
        ],
    )
    .json(Duration::from_secs(20));
    let sink = sink.json(Duration::from_secs(20));
    fwd.interrupt();
    let report = fwd.json(Duration::from_secs(10));
    assert_eq!(json_u64(&gen, &["frames_sent"]), 3000, "{gen}");
    assert_eq!(json_u64(&sink, &["unique"]), 3000, "{sink}");
    assert_eq!(json_u64(&sink, &["lost"]), 0, "{sink}");
    let there = &report["directions"][0];
    assert_eq!(there["from"], w.d0.as_str(), "{report}");
    assert!(
        json_u64(there, &["forwarded"]) >= 3000,
        "the test frames and any of the kernel's own: {report}"
    );
    assert_eq!(json_u64(there, &["no_room"]), 0, "{report}");
    assert!(!has_xdp(&w.dut_ns, &w.d0) && !has_xdp(&w.dut_ns, &w.d1));
}
