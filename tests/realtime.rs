//! Real-time workers: `[daemon] realtime` / `realtime_priority`, and `--realtime` on the
//! tools. The kernel's own answer (`chrt -p` on the thread) is the oracle.
//!
//! Every test that opens a port takes the traffic lock, idle ones too: binding an AF_XDP
//! socket holds its CPU without preemption (9.2-9.5 ms for a pool of 32,768 frames, four such
//! binds in a two-worker daemon), which beside this file's traffic test is a worker or a
//! tool of that test held off its CPU (README, known limitations).

mod common;

use std::{process::Command, time::Duration};

use common::{
    chrt, has_xdp, http_get, metric, promtool_check, status_of, threads_named, traffic_lock,
    unique, unit_capabilities_except, veth, Dut, Netns, Proc, BIN,
};

/// Root without CAP_SYS_NICE (the unit's other capabilities) and with RLIMIT_RTPRIO 0: a
/// process that may not take SCHED_FIFO.
fn without_permission() -> Vec<String> {
    let mut w = vec!["prlimit".to_string(), "--rtprio=0".to_string()];
    w.extend(unit_capabilities_except(&["CAP_SYS_NICE"]));
    w
}

/// A daemon with `daemon` in its `[daemon]` section and metrics on 127.0.0.1:9464, started
/// behind `wrapper` and ready.
fn running(daemon: &str, wrapper: &[String]) -> (Dut, Proc) {
    let dut = Dut::new(
        "rt",
        &format!("[daemon]\n{daemon}\n[metrics]\nlisten = \"127.0.0.1:9464\""),
    );
    let mut d = dut.start(wrapper);
    d.wait_ready(Duration::from_secs(10));
    (dut, d)
}

/// The worker threads' scheduling as the kernel reports it.
fn worker_policies(d: &Proc) -> Vec<(String, u32)> {
    threads_named(d.pid(), "lossless-w")
        .into_iter()
        .map(chrt)
        .collect()
}

/// Writes `cfg` over the daemon's configuration, reloads it and waits up to 5 s for the worker
/// threads to run `want` (a worker takes a reload at its next turn); returns what they run.
fn policies_after_reload(
    dut: &Dut,
    d: &Proc,
    cfg: &str,
    want: &[(String, u32)],
) -> Vec<(String, u32)> {
    std::fs::write(dut.cfg.path(), cfg).unwrap();
    d.hangup();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while worker_policies(d) != want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    worker_policies(d)
}

fn locked_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmLck in /proc/PID/status")
}

/// `realtime = "on"`: the worker runs SCHED_FIFO at the configured priority, only the worker
/// does, memory is locked, and status, metrics and the report say so.
#[test]
fn on_runs_workers_sched_fifo_at_the_configured_priority() {
    let _serial = traffic_lock(); // its start binds AF_XDP pools (module doc)
    let (dut, d) = running("realtime = \"on\"\nrealtime_priority = 37", &[]);
    assert_eq!(worker_policies(&d), [("SCHED_FIFO".to_string(), 37)]);
    assert_eq!(
        chrt(d.pid()).0,
        "SCHED_OTHER",
        "the main (control-plane) thread stays normal"
    );
    assert!(locked_kib(d.pid()) > 0, "mlockall did not lock memory");
    assert!(
        d.stderr().contains("real-time scheduling on"),
        "{}",
        d.stderr()
    );
    let st = status_of(&dut.socket);
    let t = &st["worker_threads"][0];
    assert_eq!(
        (&t["policy"], &t["priority"], &t["realtime"]),
        (
            &"SCHED_FIFO".into(),
            &37.into(),
            &serde_json::Value::Bool(true)
        ),
        "{st}"
    );
    assert_eq!(
        t["tid"].as_u64(),
        Some(u64::from(threads_named(d.pid(), "lossless-w0")[0]))
    );
    let (_, m) = http_get(&dut.ns, "127.0.0.1:9464", "/metrics");
    assert_eq!(metric(&m, "lossless_worker_realtime{worker=\"0\"}"), 1.0);
    assert_eq!(
        metric(&m, "lossless_worker_realtime_priority{worker=\"0\"}"),
        37.0
    );
    promtool_check(&m);
    d.interrupt();
    let report = d.json(Duration::from_secs(10));
    assert_eq!(report["worker_threads"][0]["policy"], "SCHED_FIFO");
    assert_eq!(report["worker_threads"][0]["priority"], 37);
    assert_eq!(report["memory_locked"], true);
}

/// `realtime = "auto"` (the default) keeps the workers real-time only while a priority is
/// lossless: a daemon with every priority lossy runs them `SCHED_OTHER` (no buffer of its own
/// for them to guard, and a real-time worker takes the CPU of a receiver beside it:
/// bench/RESULTS.md (30)), with memory locked all the same; a reload that makes priority 3
/// PFC makes them `SCHED_FIFO` at the configured priority, and one that makes it lossy again
/// returns them. `on` is the other side: real-time with every priority lossy (the test above).
#[test]
fn auto_is_real_time_only_while_a_priority_is_lossless() {
    let _serial = traffic_lock(); // its start binds AF_XDP pools (module doc)
    let (dut, d) = running("realtime = \"auto\"\nrealtime_priority = 41", &[]);
    let normal = [("SCHED_OTHER".to_string(), 0)];
    assert_eq!(worker_policies(&d), normal, "{}", d.stderr());
    assert!(
        d.stderr()
            .contains("no priority is lossless, so the workers run normal"),
        "{}",
        d.stderr()
    );
    assert!(
        locked_kib(d.pid()) > 0,
        "memory locked for a switch to come"
    );
    let lossy = std::fs::read_to_string(dut.cfg.path()).unwrap();
    let after_reload =
        |cfg: &str, want: &[(String, u32)]| policies_after_reload(&dut, &d, cfg, want);
    let pfc = format!("[priority.3]\nmode = \"pfc\"\n{lossy}");
    let realtime = [("SCHED_FIFO".to_string(), 41)];
    assert_eq!(after_reload(&pfc, &realtime), realtime, "{}", d.stderr());
    assert!(
        d.stderr()
            .contains("a priority is lossless now: the worker runs real-time"),
        "{}",
        d.stderr()
    );
    let st = status_of(&dut.socket);
    assert_eq!(st["worker_threads"][0]["realtime"], true, "{st}");
    assert_eq!(
        (&st["realtime"], &st["realtime_priority"]),
        (&"auto".into(), &41.into())
    );
    assert_eq!(after_reload(&lossy, &normal), normal, "{}", d.stderr());
    // What an operator reads: the rule, and what it gives now.
    let text = String::from_utf8(common::stdout_of(Command::new(BIN).args([
        "status",
        "--socket",
        &dut.socket,
    ])))
    .unwrap();
    assert!(
        text.contains(
            "real-time: auto (SCHED_FIFO priority 41 when permitted, while a priority is \
             lossless)\nworker 0 (thread "
        ) && text.contains("): SCHED_OTHER\n"),
        "{text}"
    );
    assert!(
        d.stderr()
            .contains("no priority is lossless now: the worker runs normal"),
        "{}",
        d.stderr()
    );
    d.interrupt();
    let report = d.json(Duration::from_secs(10));
    assert_eq!(report["worker_threads"][0]["policy"], "SCHED_OTHER");
    assert_eq!(report["memory_locked"], true);
}

/// A real-time worker that busy-polls keeps its CPU from normal tasks except in the duty
/// cycle's slice: the daemon says so at start, with the share the kernel keeps for them,
/// unless real-time throttling is off (kernel.sched_rt_runtime_us -1).
#[test]
fn busy_poll_with_realtime_warns_of_throttling() {
    let _serial = traffic_lock(); // a spinning SCHED_FIFO thread takes a CPU while it runs
    let (_dut, d) = running("realtime = \"on\"\nbusy_poll = true", &[]);
    assert_eq!(worker_policies(&d), [("SCHED_FIFO".to_string(), 50)]);
    d.interrupt();
    let (_, log) = d.json_and_log(Duration::from_secs(10));
    let runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    let warned = log.contains("busy_poll with real-time workers");
    if runtime.trim() == "-1" {
        assert!(!warned, "{log}");
    } else {
        assert!(
            warned && log.contains(&format!("runtime_us={}", runtime.trim())),
            "{log}"
        );
    }
}

/// With `realtime = "auto"` and every priority lossy the busy-polling worker runs
/// `SCHED_OTHER` and nothing is said; the reload that makes priority 3 PFC makes it real-time,
/// and the warning comes then. The run report shows the policy it ran last.
#[test]
fn busy_poll_warns_when_a_reload_makes_the_workers_real_time() {
    let _serial = traffic_lock(); // a spinning SCHED_FIFO thread takes a CPU while it runs
    let (dut, d) = running("realtime = \"auto\"\nbusy_poll = true", &[]);
    let runtime = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap();
    let throttled = runtime.trim() != "-1";
    assert_eq!(worker_policies(&d), [("SCHED_OTHER".to_string(), 0)]);
    assert!(
        !d.stderr().contains("busy_poll with real-time workers"),
        "{}",
        d.stderr()
    );
    let lossy = std::fs::read_to_string(dut.cfg.path()).unwrap();
    let pfc = format!("[priority.3]\nmode = \"pfc\"\n{lossy}");
    let realtime = [("SCHED_FIFO".to_string(), 50)];
    assert_eq!(policies_after_reload(&dut, &d, &pfc, &realtime), realtime);
    d.interrupt();
    let (report, log) = d.json_and_log(Duration::from_secs(10));
    assert!(log.contains("the worker runs real-time"), "{log}");
    assert_eq!(
        report["worker_threads"][0]["policy"], "SCHED_FIFO",
        "the report says what the worker ran last, not at start"
    );
    assert_eq!(
        log.contains("busy_poll with real-time workers"),
        throttled,
        "warned exactly where the kernel keeps a share for normal tasks:\n{log}"
    );
}

/// `realtime = "auto"` where SCHED_FIFO is not permitted: the daemon runs with normal workers
/// and says why in one warning.
#[test]
fn auto_without_permission_runs_normal_and_says_why() {
    let _serial = traffic_lock(); // its start binds AF_XDP pools (module doc)
    let (dut, d) = running("realtime = \"auto\"", &without_permission());
    assert_eq!(worker_policies(&d), [("SCHED_OTHER".to_string(), 0)]);
    let log = d.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("real-time scheduling not permitted"))
        .unwrap_or_else(|| panic!("no warning in\n{log}"));
    assert!(
        line.contains("WARN")
            && line.contains("daemon.realtime")
            && line.contains("CAP_SYS_NICE")
            && line.contains("RLIMIT_RTPRIO 0"),
        "{line}"
    );
    let (_, m) = http_get(&dut.ns, "127.0.0.1:9464", "/metrics");
    assert_eq!(metric(&m, "lossless_worker_realtime{worker=\"0\"}"), 0.0);
    assert_eq!(
        status_of(&dut.socket)["worker_threads"][0]["realtime"],
        false
    );
    d.interrupt();
    let report = d.json(Duration::from_secs(10));
    assert_eq!(report["worker_threads"][0]["policy"], "SCHED_OTHER");
    assert_eq!(report["memory_locked"], false);
}

/// `realtime = "off"` keeps normal workers even where SCHED_FIFO is permitted.
#[test]
fn off_keeps_normal_workers_where_permitted() {
    let _serial = traffic_lock(); // its start binds AF_XDP pools (module doc)
    let (_dut, d) = running("realtime = \"off\"", &[]);
    assert_eq!(worker_policies(&d), [("SCHED_OTHER".to_string(), 0)]);
    assert!(
        d.stderr().contains("real-time scheduling off"),
        "{}",
        d.stderr()
    );
    d.interrupt();
    assert_eq!(d.json(Duration::from_secs(10))["memory_locked"], false);
}

/// `realtime = "on"` where SCHED_FIFO is not permitted: a start-up error that names the
/// setting and the missing permission, before XDP is attached.
#[test]
fn on_without_permission_fails_at_start() {
    let dut = Dut::new("rt", "[daemon]\nrealtime = \"on\"");
    let (status, log) = dut
        .start(&without_permission())
        .finish_and_log(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("daemon.realtime: SCHED_FIFO at priority 50 is not permitted")
            && log.contains("CAP_SYS_NICE"),
        "{log}"
    );
    assert!(!log.contains(" ready"), "{log}");
    assert!(!has_xdp(&dut.ns, &dut.d0) && !has_xdp(&dut.ns, &dut.d1));
}

/// `check-config` decides `realtime` by `run`'s rule: `on` where SCHED_FIFO is not permitted
/// is `run`'s error and exit code (before, it said OK and only a start failed), `auto` a
/// warning that the workers would run SCHED_OTHER.
#[test]
fn check_config_refuses_on_without_permission() {
    let check = |daemon: &str| {
        let dut = Dut::new("rc", &format!("[daemon]\n{daemon}"));
        let out = dut
            .ns
            .cmd("env")
            .args(without_permission())
            .args([BIN, "check-config", dut.cfg.path()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), text, err)
    };
    let (code, _, err) = check("realtime = \"on\"");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("daemon.realtime: SCHED_FIFO at priority 50 is not permitted")
            && err.contains("CAP_SYS_NICE"),
        "{err}"
    );
    let (code, text, err) = check("realtime = \"auto\"");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        text.contains("warning: daemon.realtime = \"auto\" is not permitted here")
            && text.contains("RLIMIT_RTPRIO 0"),
        "{text}"
    );
}

/// `--realtime` on gen, sink and cable: each tool's frame loop (its main thread) runs
/// SCHED_FIFO at the priority asked for (gen at its default, 40, below the others), and the
/// traffic still arrives whole. The order matters: a paced generator spins between frames on a
/// VM, and at a priority above the cable's it starved the cable into dropping at its RX ring
/// whenever the other CPU was busy (`chrt -f 50` on a spinner there: 20,115 of 41,113 frames).
#[test]
fn tools_run_sched_fifo_with_realtime() {
    let _serial = traffic_lock();
    let (ng, nc, ns) = (Netns::new("tg"), Netns::new("tc"), Netns::new("ts"));
    let (g0, c0, c1, s0) = (unique("g"), unique("c"), unique("c"), unique("s"));
    veth(&ng, &g0, &nc, &c0);
    veth(&nc, &c1, &ns, &s0);
    let rt = |p: &'static str| ["--realtime", "--realtime-priority", p];
    let mut cable = Proc::spawn(
        &nc,
        &[&["cable", "--a", &c0, "--b", &c1][..], &rt("46")].concat(),
    );
    cable.wait_ready(Duration::from_secs(20));
    let sink_args = [
        "sink",
        "--iface",
        &s0,
        "--idle-timeout",
        "1s",
        "--duration",
        "30s",
        "--json",
    ];
    let mut sink = Proc::spawn(&ns, &[&sink_args[..], &rt("45")].concat());
    sink.wait_ready(Duration::from_secs(10));
    let gen_args = [
        "gen",
        "--iface",
        &g0,
        "--rate",
        "200Mbit",
        "--size",
        "500",
        "--duration",
        "1s",
        "--json",
    ];
    let mut gen = Proc::spawn(&ng, &[&gen_args[..], &["--realtime"]].concat());
    gen.wait_ready(Duration::from_secs(10));
    for (tool, p, priority) in [
        ("gen", &gen, 40),
        ("sink", &sink, 45),
        ("cable", &cable, 46),
    ] {
        assert_eq!(
            chrt(p.pid()),
            ("SCHED_FIFO".to_string(), priority),
            "{tool}: {}",
            p.stderr()
        );
    }
    let sent = gen.json(Duration::from_secs(10))["frames_sent"]
        .as_u64()
        .unwrap();
    let sink = sink.json(Duration::from_secs(10));
    assert!(sent > 10_000, "{sent}");
    assert_eq!(sink["unique"].as_u64(), Some(sent), "{sink}");
    assert_eq!(sink["lost"], 0, "{sink}");
    cable.interrupt();
    let (status, _) = cable.finish(Duration::from_secs(10));
    assert!(status.success());
}

/// `--realtime` where SCHED_FIFO is not permitted is an error naming the flag and what is
/// missing; `--realtime-priority` alone is a usage error.
#[test]
fn tools_refuse_realtime_without_permission() {
    let _serial = traffic_lock(); // its start binds AF_XDP pools (module doc)
    let (na, nb) = (Netns::new("ta"), Netns::new("tb"));
    let (a, b) = (unique("a"), unique("b"));
    veth(&na, &a, &nb, &b);
    let wrapper = without_permission();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let sink = Proc::spawn_with(
        &na,
        &[],
        &wrapper,
        &["sink", "--iface", &a, "--duration", "5s", "--realtime"],
    );
    let (status, log) = sink.finish_and_log(Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains("--realtime: SCHED_FIFO at priority 50 is not permitted")
            && log.contains("CAP_SYS_NICE"),
        "{log}"
    );
    let out = Command::new(BIN)
        .args(["gen", "--iface", &a, "--rate", "1Mbit", "--count", "1"])
        .args(["--realtime-priority", "5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2) && err.contains("--realtime"),
        "{err}"
    );
}
