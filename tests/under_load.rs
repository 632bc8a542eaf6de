//! Lossless under load: with the daemon as the bottleneck (a generator at its maximum rate of
//! small frames, no shaping). Every lossless mode holds; a lossy priority under the same
//! overload loses frames (the control that proves the tests can fail).

mod common;

use std::time::Duration;

use common::{
    control_section, json_u64 as u, report_port as port, start_sink, traffic_lock, unique, veth,
    Netns, Proc, TempFile,
};
use serde_json::Value;

struct Wire {
    gen_ns: Netns,
    dut_ns: Netns,
    sink_ns: Netns,
    g: String,
    d0: String,
    d1: String,
    s: String,
}

fn wire() -> Wire {
    let (gen_ns, dut_ns, sink_ns) = (Netns::new("ug"), Netns::new("ud"), Netns::new("us"));
    let (g, d0, d1, s) = (unique("g"), unique("d"), unique("d"), unique("s"));
    veth(&gen_ns, &g, &dut_ns, &d0);
    veth(&dut_ns, &d1, &sink_ns, &s);
    Wire {
        gen_ns,
        dut_ns,
        sink_ns,
        g,
        d0,
        d1,
        s,
    }
}

/// Starts a daemon in `ns` with `config` (a control socket of its own added) and waits for it.
fn start_daemon(ns: &Netns, config: &str) -> (Proc, TempFile) {
    let (control, _socket) = control_section();
    let cfg = TempFile::new("cfg", &format!("{config}{control}"));
    let mut dut = Proc::spawn(ns, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    (dut, cfg)
}

struct Run {
    gen: Value,
    sink: Value,
    dut: Value,
}

/// gen (`gen_args`) → daemon (`config`) → sink; the reports of all three.
fn run(w: &Wire, config: &str, gen_args: &[&str]) -> Run {
    let sink = start_sink(&w.sink_ns, &w.s);
    let (dut, _cfg) = start_daemon(&w.dut_ns, config);
    let mut args = vec!["gen", "--iface", &w.g, "--json"];
    args.extend_from_slice(gen_args);
    let gen = Proc::spawn(&w.gen_ns, &args).json(Duration::from_secs(30));
    let sink = sink.json(Duration::from_secs(30));
    dut.interrupt();
    let dut = dut.json(Duration::from_secs(10));
    Run { gen, sink, dut }
}

/// The value of per-priority counter `field` for priority 3 in a port's report.
fn prio3(port: &Value, field: &str) -> u64 {
    port[field][3]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field}[3] in {port}"))
}

/// Every frame the generator sent reached the sink exactly once, in order.
fn assert_lossless(r: &Run) {
    let sent = u(&r.gen, &["frames_sent"]);
    assert!(sent > 20_000, "hardly any traffic flowed: {}", r.gen);
    assert_eq!(
        u(&r.sink, &["lost"]),
        0,
        "sink: {}\ndaemon: {}",
        r.sink,
        r.dut
    );
    assert_eq!(u(&r.sink, &["unique"]), sent, "sink: {}", r.sink);
    assert_eq!(u(&r.sink, &["duplicates"]), 0);
    assert_eq!(u(&r.sink, &["reordered"]), 0);
}

/// Nothing dropped anywhere on `iface` of the daemon: no drop reason, no kernel drop.
fn assert_no_drops(dut: &Value, iface: &str) {
    let p = port(dut, iface);
    for (reason, n) in p["drops"].as_object().unwrap() {
        assert_eq!(n.as_u64(), Some(0), "drop reason {reason}: {p}");
    }
    for (reason, n) in p["kernel_drops"].as_object().unwrap() {
        assert_eq!(n.as_u64(), Some(0), "kernel drops {reason}: {p}");
    }
}

/// Both ports at 10 Gbit/s: nothing is shaped, the daemon itself is the bottleneck.
fn daemon_bound_config(w: &Wire, plan: &str) -> String {
    format!(
        "[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n[priority.3]\n{plan}\n",
        w.d0, w.d1
    )
}

/// The generator at its maximum rate of 128-byte frames, far above what one worker forwards.
const FLOOD: &[&str] = &[
    "--rate",
    "10Gbit",
    "--size",
    "128",
    "--priority",
    "3",
    "--duration",
    "2s",
    "--link-speed",
    "10Gbit",
];

fn daemon_bound(plan: &str) -> (Wire, Run) {
    let w = wire();
    let r = run(&w, &daemon_bound_config(&w, plan), FLOOD);
    (w, r)
}

#[test]
fn daemon_bound_pfc_is_lossless() {
    let _serial = traffic_lock();
    let (w, r) =
        daemon_bound("mode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\nheadroom = \"2MiB\"");
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    // The congestion was in the RX ring: PFC went upstream and the generator was paused.
    assert!(prio3(d0, "pfc_tx") > 0, "{d0}");
    assert!(u(&r.gen, &["pfc_rx"]) > 0, "gen saw no PFC: {}", r.gen);
    assert!(u(&r.gen, &["paused_ns"]) > 0, "{}", r.gen);
    assert!(u(d0, &["rx_backlog_frames_peak"]) > 0, "{d0}");
    assert_no_drops(&r.dut, &w.d0);
    assert_no_drops(&r.dut, &w.d1);
}

#[test]
fn daemon_bound_sfc_is_lossless() {
    let _serial = traffic_lock();
    let (w, r) = daemon_bound("mode = \"sfc\"\nsfc_threshold = \"64KiB\"\nlimit = \"2MiB\"");
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    assert!(prio3(d0, "sfcm_tx") > 0, "no SFCM to the source: {d0}");
    assert!(u(&r.gen, &["sfcm_rx"]) > 0, "gen saw no SFCM: {}", r.gen);
    assert_no_drops(&r.dut, &w.d0);
}

#[test]
fn daemon_bound_pfc_and_sfc_is_lossless() {
    let _serial = traffic_lock();
    let (w, r) = daemon_bound(
        "mode = \"pfc+sfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\nheadroom = \"2MiB\"\nsfc_threshold = \"32KiB\"",
    );
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    assert!(
        prio3(d0, "pfc_tx") + prio3(d0, "sfcm_tx") > 0,
        "neither PFC nor SFCM upstream: {d0}"
    );
    assert_no_drops(&r.dut, &w.d0);
}

#[test]
fn daemon_bound_lossy_loses_frames_in_the_kernel() {
    let _serial = traffic_lock();
    let (w, r) = daemon_bound("mode = \"lossy\"\nlimit = \"1MiB\"");
    let sent = u(&r.gen, &["frames_sent"]);
    let lost = u(&r.sink, &["lost"]);
    assert!(
        lost > sent / 20,
        "expected loss without flow control: {}",
        r.sink
    );
    let d0 = port(&r.dut, &w.d0);
    assert_eq!(prio3(d0, "pfc_tx"), 0);
    // Where they were lost: at the fill ring, before the daemon saw them.
    assert!(u(d0, &["kernel_drops", "fill_ring_empty"]) > 0, "{d0}");
}
