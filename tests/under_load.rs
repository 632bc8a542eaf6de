//! Lossless under load: with the daemon as the bottleneck (a generator at its maximum rate of
//! small frames, no shaping), with CPU-bound processes competing for the two CPUs, and through
//! two daemons in a chain. Every lossless claim holds in all three; a lossy priority under the
//! same overload loses frames (the control that proves the tests can fail).

mod common;

use std::{process::Command, time::Duration};

use common::{
    borrowed, borrowed_on, control_section, http_get, json_u64 as u, loss_is_the_hosts, metric,
    once_more_after_a_loss, promtool_check, report_port as port, set_mtu, start_sink_with,
    status_of, stdout_of, threads_named, traffic_lock, unique, veth, where_frames_went,
    xdp_frames_per_queue, FrozenThread, Hogs, Netns, Proc, SocketPath, TempFile, Wire, BIN,
};
use serde_json::Value;

fn wire() -> Wire {
    Wire::new("u")
}

/// Starts a daemon in `ns` with `config` (a control socket of its own added) and waits for it;
/// the config file and the socket's path live as long as the caller keeps them.
fn start_daemon(ns: &Netns, config: &str) -> (Proc, TempFile, SocketPath) {
    let (control, socket) = control_section();
    let cfg = TempFile::new("cfg", &format!("{config}{control}"));
    let mut dut = Proc::spawn(ns, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    (dut, cfg, socket)
}

struct Run {
    gen: Value,
    sink: Value,
    dut: Value,
}

/// A `[metrics]` section for the daemon's namespace, which [`run_with`] reads.
const METRICS: &str = "\n[metrics]\nlisten = \"127.0.0.1:9464\"\n";

/// gen (`gen_args`) → daemon (`config`) → sink; the reports of all three.
fn run(w: &Wire, config: &str, gen_args: &[&str]) -> Run {
    run_with(w, config, gen_args, &[]).0
}

/// [`run`] with `sink_args` for the sink, and `/metrics` after the traffic, before the daemon
/// stopped, where `config` has [`METRICS`].
fn run_with(
    w: &Wire,
    config: &str,
    gen_args: &[&str],
    sink_args: &[&str],
) -> (Run, Option<String>) {
    let sink = start_sink_with(&w.sink_ns, &w.s, sink_args);
    let (dut, _cfg, _socket) = start_daemon(&w.dut_ns, config);
    let mut args = vec!["gen", "--iface", &w.g, "--json"];
    args.extend_from_slice(gen_args);
    let gen = Proc::spawn(&w.gen_ns, &args).json(Duration::from_secs(30));
    let sink = sink.json(Duration::from_secs(30));
    let metrics = config
        .contains(METRICS)
        .then(|| http_get(&w.dut_ns, "127.0.0.1:9464", "/metrics").1);
    dut.interrupt();
    let dut = dut.json(Duration::from_secs(10));
    (Run { gen, sink, dut }, metrics)
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
        "{}\ngen: {}\nsink: {}\ndaemon: {}",
        where_frames_went(&r.dut),
        r.gen,
        r.sink,
        r.dut
    );
    assert_eq!(u(&r.sink, &["unique"]), sent, "sink: {}", r.sink);
    assert_eq!(u(&r.sink, &["duplicates"]), 0);
    assert_eq!(u(&r.sink, &["reordered"]), 0);
    // The generator and the sink share a clock here: no frame arrives before it was sent.
    assert_eq!(u(&r.sink, &["latency_skipped"]), 0, "sink: {}", r.sink);
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

/// No frame on `iface` of the daemon was kept beyond its priority's buffer in a spare frame of
/// the pool (`headroom_borrowed`): where a test shows what keeps the buffers (the ingress
/// accounting, the stall guard, the headroom in force), the pool's spare frames are not it.
fn assert_within_the_buffer(dut: &Value, iface: &str) {
    let p = port(dut, iface);
    assert!(
        p["headroom_borrowed"].is_array(),
        "no headroom_borrowed: {p}"
    );
    assert_eq!(borrowed_on(p), 0, "frames kept beyond the buffer: {p}");
}

/// Frames a run lost, or would have lost but for the pool's spare frames: what a test of the
/// headroom judges (see [`assert_within_the_buffer`]).
fn beyond_the_buffer(r: &Run) -> u64 {
    u(&r.sink, &["lost"]) + borrowed(&r.dut)
}

/// Both ports at 10 Gbit/s: nothing is shaped, the daemon itself is the bottleneck (its
/// worker at normal priority, sharing the CPUs with the generator and the sink).
fn daemon_bound_config(w: &Wire, plan: &str) -> String {
    format!(
        "[daemon]\nrealtime = \"off\"\n\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n[priority.3]\n{plan}\n",
        w.d0, w.d1
    )
}

/// Priority 3 lossless by PFC as a user writes it: XOFF and XON, the headroom left to the
/// daemon (the default 256 KiB floor, raised by what it measures).
const PFC: &str = "mode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"";

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

/// The quick start's traffic: 2 Gbit/s of 1000-byte frames on priority 3.
const QUICK_START_TRAFFIC: [&str; 6] = ["--rate", "2Gbit", "--size", "1000", "--priority", "3"];

/// Starts the generator with [`QUICK_START_TRAFFIC`] for `duration`, with `extra` flags (its
/// frame size where they name one).
fn gen_2gbit(ns: &Netns, iface: &str, duration: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["gen", "--iface", iface, "--json"];
    let sized = extra.contains(&"--size");
    args.extend(
        QUICK_START_TRAFFIC
            .chunks(2)
            .filter(|flag| !(sized && flag[0] == "--size"))
            .flatten(),
    );
    args.extend(["--duration", duration]);
    args.extend_from_slice(extra);
    Proc::spawn(ns, &args)
}

fn daemon_bound(plan: &str) -> (Wire, Run) {
    let w = wire();
    let r = run(&w, &daemon_bound_config(&w, plan), FLOOD);
    (w, r)
}

#[test]
fn daemon_bound_pfc_is_lossless() {
    let _serial = traffic_lock();
    let (w, r) = daemon_bound(PFC);
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    // The congestion was in the RX ring: PFC went upstream and the generator was paused.
    assert!(prio3(d0, "pfc_tx") > 0, "{d0}");
    assert!(u(&r.gen, &["pfc_rx"]) > 0, "gen saw no PFC: {}", r.gen);
    assert!(u(&r.gen, &["paused_ns"]) > 0, "{}", r.gen);
    assert!(u(d0, &["rx_backlog_frames_peak"]) > 0, "{d0}");
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    assert_no_drops(&r.dut, &w.d1);
    // XOFF + the 256 KiB floor of 128-byte frames is 2,560 buffers, more than half a lean
    // ring holds: the fill ring stays deep.
    assert_eq!(u(d0, &["fill_target"]), 8192, "{d0}");
}

/// The same flood with an 8 KiB floor and a real-time worker (the default, as in
/// `bench/forward`): the daemon sizes the headroom from what it measures (about 60 kB here),
/// XOFF + headroom in 128-byte frames fits half a lean fill ring, and the stall guard bounds
/// what arrives while the worker is away, so the ring goes lean (2,048 buffers: the cost
/// `bench/forward`'s PFC rows paid for a deep one) and nothing is lost. (With the worker at
/// normal priority, as above, it was held off often enough that the notice term rose to
/// 207 kB in one run of three, 1,790 frames: the ring stayed deep, as it should.)
#[test]
fn a_measured_headroom_lets_the_fill_ring_go_lean_and_loses_nothing() {
    let _serial = traffic_lock();
    let w = wire();
    let plan = "mode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\nheadroom = \"8KiB\"";
    let config = daemon_bound_config(&w, plan).replace("realtime = \"off\"\n", "");
    let r = run(&w, &config, FLOOD);
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    assert!(prio3(d0, "pfc_tx") > 0, "{d0}");
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    assert_no_drops(&r.dut, &w.d1);
    let (headroom, xoff) = (prio3(d0, "headroom_in_force"), prio3(d0, "xoff_in_force"));
    println!(
        "headroom in force {headroom} B, XOFF {xoff} B, fill ring {}",
        u(d0, &["fill_target"])
    );
    assert_eq!(u(d0, &["fill_target"]), 2048, "{d0}");
}

/// A buffer (XOFF + headroom as configured, 12 KiB) smaller than the headroom the daemon
/// measures under the daemon-bound flood (the notice term alone is tens of kB): the headroom
/// in force leaves XOFF at its minimum, the daemon says so in a warning naming the buffer, and
/// what overflows the buffer is counted. (`bench/forward`'s `xoff_time` row ran at 0.87x the
/// lossy row with its XOFF held there, 0.96x with room for one; bench/RESULTS.md (15).)
#[test]
fn a_buffer_smaller_than_the_measured_headroom_is_named() {
    let _serial = traffic_lock();
    let w = wire();
    let plan = "mode = \"pfc\"\nxoff = \"8KiB\"\nxon = \"4KiB\"\nheadroom = \"4KiB\"";
    let config = daemon_bound_config(&w, plan).replace("realtime = \"off\"\n", "");
    let sink = start_sink_with(&w.sink_ns, &w.s, &[]);
    let (dut, _cfg, socket) = start_daemon(&w.dut_ns, &config);
    let mut args = vec!["gen", "--iface", &w.g, "--json"];
    args.extend_from_slice(FLOOD);
    let gen = Proc::spawn(&w.gen_ns, &args).json(Duration::from_secs(30));
    let sink = sink.json(Duration::from_secs(30));
    // `status` says so too, in JSON and on the priority's headroom line.
    let st = status_of(&socket);
    assert_eq!(
        st["ports"][0]["priorities"][3]["xoff_squeezed"], true,
        "{st}"
    );
    let text = stdout_of(Command::new(BIN).args(["status", "--socket", &socket]));
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("XOFF at its minimum"), "{text}");
    dut.interrupt();
    let (dut, log) = dut.json_and_log(Duration::from_secs(10));
    let r = Run { gen, sink, dut };
    let d0 = port(&r.dut, &w.d0);
    let (headroom, xoff) = (prio3(d0, "headroom_in_force"), prio3(d0, "xoff_in_force"));
    assert!(
        xoff + headroom > 12_288 && xoff == 2 * 1518,
        "headroom in force {headroom} B, XOFF {xoff} B: {d0}"
    );
    let line = log
        .lines()
        .find(|l| l.contains("leaves XOFF at its minimum"))
        .unwrap_or_else(|| panic!("no warning in\n{log}"));
    assert!(
        line.contains("WARN") && line.contains("buffer=12288") && line.contains("priority=3"),
        "{line}"
    );
    // Every frame the sink misses is counted: dropped by the daemon with a reason (here
    // `headroom_overflow`), by the kernel at d0's fill ring, or at the sink's own socket.
    let dropped: u64 = d0["drops"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_u64)
        .sum();
    let sent = u(&r.gen, &["frames_sent"]);
    assert_eq!(
        dropped + u(d0, &["kernel_drops", "fill_ring_empty"]) + u(&r.sink, &["lost_here"]),
        sent - u(&r.sink, &["received"]),
        "{}\nsink: {}",
        where_frames_went(&r.dut),
        r.sink
    );
    println!("headroom in force {headroom} B, XOFF {xoff} B, dropped {dropped} of {sent}\n{line}");
}

/// `[headroom] xoff_time`: with the worker as the bottleneck the daemon measures how fast the
/// backlog drains and caps XOFF at what drains in 500 us less how far recent peaks went beyond
/// XOFF, so the backlog's peak (and the wait behind it) is bounded in time; lossless as without
/// it. (What it does to latency is measured in `bench/forward`'s `lossless-pfc-t` row, not
/// asserted here.)
#[test]
fn daemon_bound_pfc_with_xoff_time_caps_xoff_at_the_measured_drain() {
    let _serial = traffic_lock();
    let w = wire();
    let plan = format!("{PFC}\n[headroom]\nxoff_time = \"500us\"{METRICS}");
    let (r, metrics) = run_with(&w, &daemon_bound_config(&w, &plan), FLOOD, &[]);
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    assert!(prio3(d0, "pfc_tx") > 0, "{d0}");
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    assert_no_drops(&r.dut, &w.d1);
    let rate = prio3(d0, "pfc_drain_rate");
    assert!(rate > 0, "a backlog was there to measure: {d0}");
    // XOFF in force: 500 us of the measured drain less the peaks' excess (within the 1/8
    // steps it moves in, never below two frames), or where that is less what the buffer
    // (64 KiB + the 256 KiB floor) leaves beside the headroom in force. Both the drain and
    // the excess are the last ones published, so allow a quarter.
    let cap = rate / 2_000;
    let excess = prio3(d0, "pfc_peak_excess");
    let xoff = prio3(d0, "xoff_in_force");
    let room = ((64 + 256) * 1024u64).saturating_sub(prio3(d0, "headroom_in_force"));
    let expected = cap.saturating_sub(excess).min(room).clamp(2 * 1518, 65_536);
    assert!(
        xoff.abs_diff(expected) <= expected / 4 + cap / 8,
        "XOFF in force {xoff} for a drain of {rate} B/s and peaks {excess} B beyond XOFF \
         (expected about {expected}): {d0}"
    );
    println!(
        "drain {rate} B/s, peaks {excess} B beyond XOFF, XOFF in force {xoff} B (configured \
         65,536, {room} B beside the headroom in force)"
    );
    // The exposition shows the drain and the XOFF in force, and promtool accepts it.
    let m = metrics.as_deref().expect("scraped");
    let series = |name: &str| format!("{name}{{device=\"{}\",priority=\"3\"}}", w.d0);
    let scraped = metric(m, &series("lossless_pfc_drain_rate_bytes_per_second"));
    assert!(scraped > 0.0, "{m}");
    let xoff_scraped = metric(m, &series("lossless_xoff_threshold_bytes"));
    assert!(xoff_scraped < 65_536.0 || cap >= 65_536 * 7 / 8, "{m}");
    promtool_check(m);
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
    assert_within_the_buffer(&r.dut, &w.d0);
    // Nothing bounds an SFC-only priority's backlog in frames (no headroom measures what
    // arrives before its source reacts): the fill ring stays deep.
    assert_eq!(u(d0, &["fill_target"]), 8192, "{d0}");
}

#[test]
fn daemon_bound_pfc_and_sfc_is_lossless() {
    let _serial = traffic_lock();
    let (w, r) = daemon_bound(
        "mode = \"pfc+sfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\nsfc_threshold = \"32KiB\"",
    );
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    assert!(
        prio3(d0, "pfc_tx") + prio3(d0, "sfcm_tx") > 0,
        "neither PFC nor SFCM upstream: {d0}"
    );
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
}

#[test]
fn daemon_bound_lossy_loses_frames_in_the_kernel() {
    let _serial = traffic_lock();
    let (w, r) = daemon_bound(LOSSY_1MIB);
    let sent = u(&r.gen, &["frames_sent"]);
    let lost = u(&r.sink, &["lost"]);
    // Any loss proves the daemon was the bottleneck, which is what the lossless runs above
    // need to mean something. How much depends on how fast the worker was that run: 16–44 %
    // of the frames when this was written, 1.6 % (19,532 of 1.2 million) once on 2026-11-26,
    // when a 5 % bound failed.
    assert!(
        lost > 0,
        "expected loss without flow control (else the daemon was not the bottleneck): \
         0 of {sent} lost; sink {}",
        r.sink
    );
    let d0 = port(&r.dut, &w.d0);
    assert_eq!(prio3(d0, "pfc_tx"), 0);
    // Where they were lost: at the fill ring, before the daemon saw them.
    assert!(u(d0, &["kernel_drops", "fill_ring_empty"]) > 0, "{d0}");
}

/// The sink as the bottleneck: two CPU-bound processes starve a sink at normal priority while
/// a real-time daemon forwards 2 Gbit/s to it. The sink pauses the daemon with PFC while its
/// RX ring is short of buffers; what it still loses while it is not running at all is its own,
/// counted as `lost_here` and never blamed upstream. As a fair peer (`--realtime`) it loses
/// nothing. (The daemon is not saturated here: a SCHED_FIFO worker that needs a whole CPU is
/// throttled by the kernel, see the README's "Real-time workers".)
#[test]
fn a_starved_sink_pauses_upstream_and_loses_nothing() {
    let _serial = traffic_lock();
    for realtime in [false, true] {
        let extra: &[&str] = if realtime { &["--realtime"] } else { &[] };
        let (w, r) = starved_sink(PFC, extra);
        assert_no_drops(&r.dut, &w.d0);
        assert_no_drops(&r.dut, &w.d1);
        assert_eq!(
            u(&r.sink, &["lost_here"]),
            0,
            "the sink lost frames at its socket: {}",
            r.sink
        );
        assert_lossless(&r);
    }
}

/// The same starved sink pausing upstream with SFC messages instead (`--sfc`): it tells the
/// source of the frames it takes while short of buffers, and its stall guard tells the sources
/// on its roster while it is not running. The generator's frames carry its own address, so
/// the messages are addressed to it: the daemon between passes them on, and as priority 3 is
/// PFC there it also holds its egress to the sink for them, and its PFC congestion point
/// pauses the generator hop by hop. Nothing is lost.
#[test]
fn a_starved_sink_pauses_upstream_with_sfc_and_loses_nothing() {
    let _serial = traffic_lock();
    let (w, r) = starved_sink(PFC, &["--sfc"]);
    let d1 = port(&r.dut, &w.d1);
    eprintln!(
        "d1: SFC messages taken {}, paused {} ms, drops {}; sink short of buffers {} times",
        d1["sfcm_rx"][3],
        d1["sfc_paused_ns"][3].as_u64().unwrap_or(0) / 1_000_000,
        d1["drops"],
        r.sink["fill_starved_events"]
    );
    assert_no_drops(&r.dut, &w.d0);
    assert_no_drops(&r.dut, &w.d1);
    assert_eq!(u(&r.sink, &["lost_here"]), 0, "{}", r.sink);
    assert_lossless(&r);
    assert_eq!(u(&r.sink, &["pfc_tx"]) + u(&r.sink, &["stall_pfc_tx"]), 0);
    let sfcm = sfc_messages_sent(&r.sink);
    assert!(sfcm > 0, "the starved sink sent no SFC message: {}", r.sink);
    let d1 = port(&r.dut, &w.d1);
    assert!(prio3(d1, "sfcm_rx") > 0, "the daemon took none: {d1}");
}

/// The starved `--sfc` sink behind a daemon that keeps priority 3 lossy. The sink's SFC
/// messages are addressed to the generator (the daemon never rewrites addresses), so the
/// daemon passes them on out of `d0` and does not pause its own lossy egress for them: the
/// generator pauses, as the sink asked. Taken as its own instead (the daemon before), they
/// held `d1`'s egress for 48-62 ms and the daemon tail-dropped 34,905 and 35,594 frames there
/// in two runs by hand. The flood still loses at `d0`'s ingress, where the daemon is the
/// bottleneck of a lossy priority: kernel drops, not judged here.
#[test]
fn a_starved_sfc_sink_behind_a_lossy_daemon_pauses_the_generator() {
    let _serial = traffic_lock();
    let (w, r) = starved_sfc_sink(LOSSY_1MIB, &["--sfc"]);
    let (d0, d1) = (port(&r.dut, &w.d0), port(&r.dut, &w.d1));
    eprintln!(
        "d1: SFC messages passed on {}, paused {} ns; d0: drops {}, kernel {}; gen {}",
        d1["sfcm_forwarded"][3], d1["sfc_paused_ns"][3], d0["drops"], d0["kernel_drops"], r.gen
    );
    let forwarded = prio3(d1, "sfcm_forwarded");
    assert!(forwarded > 0, "the daemon passed on no SFC message: {d1}");
    assert_eq!(prio3(d1, "sfcm_rx"), forwarded, "{d1}");
    // d0 sent nothing else: no data goes back to the generator, and a lossy priority earns
    // no PFC.
    assert_eq!(u(d0, &["tx_frames"]), forwarded, "{d0}");
    assert_eq!(
        prio3(d1, "sfc_paused_ns"),
        0,
        "the lossy egress paused: {d1}"
    );
    let heard = u(&r.gen, &["sfcm_rx"]);
    assert!(heard > 0 && heard <= forwarded, "{}", r.gen);
    assert_eq!(d0["drops"]["tail_drop"], 0, "{d0}");
    assert_eq!(u(&r.sink, &["lost_here"]), 0, "{}", r.sink);
}

/// The same starved sink sending its SFC messages over UDP (`--sfc-udp-port`, to the frame's
/// source address from the address it was sent to), as a host whose sources sit beyond its
/// L2 segment would. To the daemon they are data (it neither takes nor counts them as SFC
/// messages) and it forwards them; the generator, listening on that port by default, pauses.
#[test]
fn a_starved_sink_pauses_its_source_with_sfc_over_udp() {
    let _serial = traffic_lock();
    let (w, r) = starved_sfc_sink(LOSSY_1MIB, &["--sfc", "--sfc-udp-port", "34997"]);
    let (d0, d1) = (port(&r.dut, &w.d0), port(&r.dut, &w.d1));
    let sent = sfc_messages_sent(&r.sink);
    assert_eq!(prio3(d1, "sfcm_rx"), 0, "UDP is data to the daemon: {d1}");
    let heard = u(&r.gen, &["sfcm_rx"]);
    assert!(heard > 0 && heard <= sent, "{}", r.gen);
    assert_eq!(prio3(d1, "sfc_paused_ns"), 0, "{d1}");
    assert_eq!(d0["drops"]["tail_drop"], 0, "{d0}");
    assert_eq!(u(&r.sink, &["lost_here"]), 0, "{}", r.sink);
}

/// [`starved_sink`] with `--sfc` among `sink_args`, run again (up to three times in all)
/// while the sink sent no SFC message: behind a lossy priority the daemon drops part of the
/// flood at its own ingress, and in one scripts/test run of 495 tests the sink kept up with
/// the rest and never was starved, which proves nothing either way.
fn starved_sfc_sink(plan: &str, sink_args: &[&str]) -> (Wire, Run) {
    for _ in 1..3 {
        let (w, r) = starved_sink(plan, sink_args);
        if sfc_messages_sent(&r.sink) > 0 {
            return (w, r);
        }
        println!("the sink was never starved: once more");
    }
    let (w, r) = starved_sink(plan, sink_args);
    assert!(
        sfc_messages_sent(&r.sink) > 0,
        "the sink was never starved in three runs: {}",
        r.sink
    );
    (w, r)
}

/// The SFC messages a sink's report says it and its guard sent.
fn sfc_messages_sent(sink: &Value) -> u64 {
    u(sink, &["sfcm_tx"]) + u(sink, &["stall_sfcm_tx"])
}

/// Priority 3 lossy, tail-dropping above 1 MiB.
const LOSSY_1MIB: &str = "mode = \"lossy\"\nlimit = \"1MiB\"";

/// gen → real-time daemon (its worker on CPU 1) → sink with `sink_args`, the daemon-bound
/// flood: bench/forward's PFC row, in which the worker forwards the flood faster than a
/// normal-priority sink, which shares the other CPU with the generator, takes it. Without its
/// stall guard (a real-time thread the XDP program wakes while the sink is not running) such a
/// sink lost 7,204-12,570 frames at its own socket in three runs of three by hand
/// (bench/RESULTS.md); real-time, it keeps up by itself.
fn starved_sink(plan: &str, sink_args: &[&str]) -> (Wire, Run) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "the row needs two CPUs");
    let w = wire();
    let config = daemon_bound_config(&w, plan)
        .replace("realtime = \"off\"", "realtime = \"on\"\ncores = [1]");
    let sink = start_sink_with(&w.sink_ns, &w.s, sink_args);
    let (dut, _cfg, _socket) = start_daemon(&w.dut_ns, &config);
    let mut args = vec!["gen", "--iface", &w.g, "--json"];
    args.extend_from_slice(FLOOD);
    let gen = Proc::spawn(&w.gen_ns, &args).json(Duration::from_secs(30));
    let sink = sink.json(Duration::from_secs(30));
    dut.interrupt();
    let r = Run {
        gen,
        sink,
        dut: dut.json(Duration::from_secs(10)),
    };
    eprintln!(
        "sink {sink_args:?}: lost here {}, upstream {}, PFC {}, SFCM {}, stalls paused for {} \
         ({} PFC, {} SFCM)",
        r.sink["lost_here"],
        r.sink["lost_upstream"],
        r.sink["pfc_tx"],
        r.sink["sfcm_tx"],
        r.sink["stalls"],
        r.sink["stall_pfc_tx"],
        r.sink["stall_sfcm_tx"]
    );
    (w, r)
}

/// The README's quick start, its config and commands taken from the README itself, with two
/// CPU-bound processes competing for the two CPUs.
#[test]
fn readme_quick_start_is_lossless_with_two_cpu_hogs() {
    let _serial = traffic_lock();
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme.find("<<'TOML'\n").expect("quick start config") + 9;
    let toml = &readme[start..start + readme[start..].find("\nTOML\n").unwrap()];
    let args_of = |cmd: &str| -> Vec<String> {
        let line = readme
            .lines()
            .find(|l| l.contains(&format!("$B {cmd} ")))
            .unwrap_or_else(|| panic!("no `{cmd}` command in the quick start"));
        line.split(&format!("$B {cmd} "))
            .nth(1)
            .unwrap()
            .trim_end_matches('&')
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let w = wire();
    let config = toml
        .replace("\"d0\"", &format!("\"{}\"", w.d0))
        .replace("\"d1\"", &format!("\"{}\"", w.d1));
    let swap = |args: Vec<String>, from: &str, to: &str| -> Vec<String> {
        args.into_iter()
            .map(|a| if a == from { to.to_string() } else { a })
            .collect()
    };
    let sink_args = swap(args_of("sink"), "s0", &w.s);
    let gen_args = swap(args_of("gen"), "g0", &w.g);
    let _hogs = Hogs::start(2);
    let mut sargs = vec!["sink", "--json", "--duration", "60s"];
    sargs.extend(sink_args.iter().map(String::as_str));
    let mut sink = Proc::spawn(&w.sink_ns, &sargs);
    sink.wait_ready(Duration::from_secs(20));
    let (dut, _cfg, _socket) = start_daemon(&w.dut_ns, &config);
    let mut gargs = vec!["gen", "--json"];
    gargs.extend(gen_args.iter().map(String::as_str));
    let gen = Proc::spawn(&w.gen_ns, &gargs).json(Duration::from_secs(60));
    let sink = sink.json(Duration::from_secs(60));
    dut.interrupt();
    let dut = dut.json(Duration::from_secs(20));
    let r = Run { gen, sink, dut };
    assert_lossless(&r);
    let d0 = port(&r.dut, &w.d0);
    assert!(prio3(d0, "pfc_tx") > 0, "{}", r.dut);
    assert_no_drops(&r.dut, &w.d0);
    // XOFF + the default 256 KiB headroom is about 330 frames of 1,000 bytes and the stall
    // guard runs: the fill ring went lean, so this is also a lean ring's test with two hogs.
    assert_eq!(u(d0, &["fill_target"]), 2048, "{d0}");
}

/// SFC alone on the quick start's topology (2 Gbit/s of 1,000-byte frames into a 1 Gbit/s
/// egress), with its defaults (a 32 KiB threshold, a 1 MiB limit), two CPU-bound processes
/// competing for the two CPUs: the worker's congestion point pauses the generator with SFC
/// messages, the stall guard does while the worker is held off, and nothing is lost. (By hand,
/// 4 runs each: lost 0 with about 17,000 SFCMs and 0-2 guard SFCMs, and lost 0 as well with
/// `stall_guard = "off"`: the 1 MiB limit outlasts how long the hogs held the worker off here.
/// The ptrace stops above are the guard's test.)
#[test]
fn sfc_is_lossless_with_two_cpu_hogs() {
    let _serial = traffic_lock();
    let _hogs = Hogs::start(2);
    let w = wire();
    let config = format!(
        "[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n[[port]]\niface = \"{}\"\n\
         speed = \"1Gbit\"\n\n[priority.3]\nmode = \"sfc\"\n",
        w.d0, w.d1
    );
    let mut gen = QUICK_START_TRAFFIC.to_vec();
    gen.extend(["--duration", "3s"]);
    let r = run(&w, &config, &gen);
    let d0 = port(&r.dut, &w.d0);
    eprintln!(
        "lost {}, SFCMs {} (guard {}), stalls {}, gen paused by SFC {} ms",
        u(&r.sink, &["lost"]),
        d0["sfcm_tx"][3],
        d0["stall_sfcm_tx"][3],
        d0["stalls"],
        u(&r.gen, &["sfc_paused_ns"]) / 1_000_000
    );
    assert_lossless(&r);
    assert_no_drops(&r.dut, &w.d0);
    assert!(prio3(d0, "sfcm_tx") > 0, "{d0}");
    assert!(u(&r.gen, &["sfcm_rx"]) > 0, "{}", r.gen);
}

/// The headroom left to the daemon: the quick start's 2 Gbit/s into 1 Gbit/s with the same
/// 320 KiB buffer as the default split as XOFF 312 KiB + an 8 KiB floor, so the headroom in
/// force is the daemon's choice. The observed overshoot after XOFF (about 32 KiB here) misses
/// what crosses XOFF before the worker notices; the notice term (the stall guard's bound times
/// the fastest arrival rate, or the most that arrived between two turns, whichever is more)
/// covers it, and nothing is lost (`bench/reaction`'s `pfc-8KiB`
/// row lost 0-3,047 frames per run without the term). The sink is `--realtime`: at normal
/// priority it lost frames at its own socket in about one run in ten here (the daemon none),
/// which is the sink's test, not this one. The generator is not: as a real-time peer of the
/// worker it held the worker off beyond the buffer in every run (bench/RESULTS.md).
#[test]
fn an_8kib_floor_leaves_the_headroom_to_the_daemon_and_loses_nothing() {
    let _serial = traffic_lock();
    // Once more on a fresh topology if frames were lost: in 33 runs on the lab VM one run lost
    // frames with the worker's lag under the bound below (12 frames, 9 stalls met by the guard
    // and an overshoot after XOFF of 131-262 kB: the generator, at normal priority, was itself
    // held off). Before the notice term this row lost frames in most runs, which two in a row
    // still show. With the bound alone (no turn-to-turn measurement) it lost 1-5 frames in 5 of
    // 14 runs after the stall guard's test, twice in a row in 2 of them as in CI.
    let (w, r) = once_more_after_a_loss(
        || {
            let w = wire();
            let config = format!(
                "[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n[[port]]\niface = \"{}\"\nspeed = \"1Gbit\"\n\n\
                 [priority.3]\nmode = \"pfc\"\nxoff = \"312KiB\"\nxon = \"280KiB\"\nheadroom = \"8KiB\"\n",
                w.d0, w.d1
            );
            let gen = "--rate 2Gbit --size 1000 --priority 3 --flows 3 --duration 2s";
            let gen: Vec<&str> = gen.split(' ').collect();
            let (r, _) = run_with(&w, &config, &gen, &["--realtime"]);
            (w, r)
        },
        |(_, r)| (beyond_the_buffer(r), where_frames_went(&r.dut)),
    );
    let d0 = port(&r.dut, &w.d0);
    assert!(prio3(d0, "pfc_tx") > 0, "{d0}");
    // A loss with the worker held off longer than the whole 320 KiB buffer lasts at the
    // 2 Gbit/s offered (1.31 ms) is the host's: reported, not judged. A run without loss is
    // judged whatever the worker's lag.
    if loss_is_the_hosts(beyond_the_buffer(&r), d0, 327_680, 2_000_000_000) {
        return;
    }
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    assert_no_drops(&r.dut, &w.d1);
    assert_lossless(&r);
    let (headroom, notice) = (prio3(d0, "headroom_in_force"), prio3(d0, "headroom_notice"));
    // 375 us at no less than the 1 Gbit/s the egress drains (the generator sends 2).
    assert!(notice >= 46_875, "notice term {notice}: {d0}");
    // The headroom is the evidence itself, with no slack beyond it (but for the 1/16 it may lag
    // behind a decaying evidence): the stall guard waits its 250 us.
    let wait = u(d0, &["stall_guard_wait_ns"]);
    assert!(
        (250_000..=270_000).contains(&wait),
        "guard waits {wait} ns: {d0}"
    );
    assert!(
        headroom >= notice,
        "headroom {headroom}, notice {notice}: {d0}"
    );
    println!("headroom in force {headroom} B, of which notice {notice} B; guard waits {wait} ns");
}

/// When [`stop_the_worker`] stops the worker.
#[derive(Debug, Clone, Copy)]
enum Stops {
    /// Three times during 3 s of traffic, for 5, 20 and 100 ms.
    DuringTraffic,
    /// Three times during 3 s of traffic, for 5 ms each: 1.25 MB at 2 Gbit/s, four times the
    /// default buffer, and within a lean fill ring (2,048 buffers).
    Briefly,
    /// Before the generator's first frame, until 200 ms after its frames reach d0 (it takes
    /// 100-200 ms to start), during 1 s of traffic: 50,000 frames, six times the RX ring.
    BeforeTheFirstFrame,
}

/// Runs the generator at 2 Gbit/s through a daemon with priority 3 as `plan` and `[daemon]`
/// as `daemon`, and stops its worker outright as `stops` says (ptrace, as a hypervisor stops a
/// vCPU or a hung call holds a thread). Both egresses run at 10 Gbit/s, so that outside the
/// stops the worker keeps up and nothing but a stop can lose frames, however busy the host.
fn stop_the_worker(plan: &str, daemon: &str, stops: Stops) -> (Wire, Run) {
    stop_the_worker_sending(plan, daemon, stops, 1000, "10Gbit")
}

/// [`stop_the_worker`] with frames of `size` bytes (every link's MTU 9,000 for a jumbo size)
/// into an egress (d1) of `egress`.
fn stop_the_worker_sending(
    plan: &str,
    daemon: &str,
    stops: Stops,
    size: usize,
    egress: &str,
) -> (Wire, Run) {
    let w = wire();
    if size > 1514 {
        for (ns, iface) in [
            (&w.gen_ns, &w.g),
            (&w.dut_ns, &w.d0),
            (&w.dut_ns, &w.d1),
            (&w.sink_ns, &w.s),
        ] {
            set_mtu(ns, iface, 9000);
        }
    }
    let size_arg = size.to_string();
    let sized: &[&str] = &["--size", &size_arg];
    let config = format!(
        "[daemon]\n{daemon}\n\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n\
         [[port]]\niface = \"{}\"\nspeed = \"{egress}\"\n\n[priority.3]\n{plan}\n",
        w.d0, w.d1
    );
    // The daemon's workers and guard are real-time: after a stop the worker forwards its
    // backlog at full speed, and a sink at normal priority left without a CPU for the few ms
    // its fill ring lasts at 10 Gbit/s drops at its own ring (412 `lost_here` in one CI
    // run, none upstream). That is the starved-sink case above; here the sink is a fair peer.
    let sink = start_sink_with(&w.sink_ns, &w.s, &["--realtime"]);
    let (dut, _cfg, _socket) = start_daemon(&w.dut_ns, &config);
    let worker = threads_named(dut.pid(), "lossless-w0");
    assert_eq!(worker.len(), 1, "one worker thread");
    let gen = match stops {
        Stops::DuringTraffic | Stops::Briefly => {
            let gen = gen_2gbit(&w.gen_ns, &w.g, "3s", sized);
            let stops: &[u64] = match stops {
                Stops::Briefly => &[5, 5, 5],
                _ => &[5, 20, 100],
            };
            for &stop_ms in stops {
                std::thread::sleep(Duration::from_millis(600));
                let frozen = FrozenThread::freeze(worker[0]);
                std::thread::sleep(Duration::from_millis(stop_ms));
                drop(frozen);
            }
            gen
        }
        Stops::BeforeTheFirstFrame => {
            let frozen = FrozenThread::freeze(worker[0]);
            let gen = gen_2gbit(&w.gen_ns, &w.g, "1s", sized);
            let first = std::time::Instant::now();
            while xdp_frames_per_queue::<1>(&w.dut_ns, &w.d0)[0] == 0 {
                assert!(
                    first.elapsed() < Duration::from_secs(5),
                    "no frame reached d0"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_millis(200));
            drop(frozen);
            gen
        }
    };
    let r = Run {
        gen: gen.json(Duration::from_secs(30)),
        sink: sink.json(Duration::from_secs(30)),
        dut: {
            dut.interrupt();
            dut.json(Duration::from_secs(10))
        },
    };
    let d0 = port(&r.dut, &w.d0);
    eprintln!(
        "[daemon] {daemon:?}, {plan:?}: lost {}, stalls {}, guard pfc {}, guard sfcm {}, \
         sfcm {}, kernel drops {}",
        u(&r.sink, &["lost"]),
        d0["stalls"],
        d0["stall_pfc_tx"][3],
        d0["stall_sfcm_tx"][3],
        d0["sfcm_tx"][3],
        d0["kernel_drops"]
    );
    (w, r)
}

/// With the guard off the 100 ms stop overflows the RX ring's 8,192 buffers (33 ms at this
/// rate) and the kernel drops frames: the control that proves the guard is what covers a
/// stop. (A 50 ms stop did not always: with two CPU hogs on the lab VM the generator, at
/// normal priority, sometimes sent at half its rate through it, 6,700 frames, and 14 of 52
/// controls lost nothing.)
fn assert_the_stops_lost_frames(w: &Wire, r: &Run) {
    assert!(
        u(&r.sink, &["lost"]) > 0,
        "the stops lost nothing: sink {}\ngen {}\ndaemon {}",
        r.sink,
        r.gen,
        r.dut
    );
    let d0 = port(&r.dut, &w.d0);
    assert!(
        u(d0, &["kernel_drops", "fill_ring_empty"]) > 0,
        "lost in the kernel: {d0}"
    );
    assert_eq!(u(d0, &["stalls"]), 0);
}

/// A worker stopped outright for 5, 20 and 100 ms ([`stop_the_worker`]) under PFC: the stall
/// guard pauses the generator for it with PFC and nothing is lost.
#[test]
fn a_stopped_worker_is_covered_by_the_stall_guard() {
    let _serial = traffic_lock();
    const PLAN: &str = "mode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"";
    let (w, r) = stop_the_worker(PLAN, "", Stops::DuringTraffic);
    assert_lossless(&r);
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    let d0 = port(&r.dut, &w.d0);
    // Every stop, the 5 ms one included: the XDP program's doorbell wakes the guard
    // `stall_guard` into each (it sleeps up to 100 ms between stalls).
    assert!(u(d0, &["stalls"]) >= 3, "{d0}");
    assert!(prio3(d0, "stall_pfc_tx") > 0, "{d0}");
    let (w, r) = stop_the_worker(PLAN, "stall_guard = \"off\"", Stops::DuringTraffic);
    assert_the_stops_lost_frames(&w, &r);
}

/// The same stops with a fill ring of fewer buffers than XOFF is frames: `[daemon] frames =
/// 4096` keeps 1,024 buffers in d0's ring (4 ms at this rate), and an XOFF of 4 MiB (about
/// 2 MiB in force once the headroom takes its share) is some 2,000 of the generator's
/// frames, so a stopped worker's ring runs dry before its bytes reach any threshold. The
/// guard counts a stalled worker's fill ring short of half its buffers as congestion, as the
/// worker does its own, and calls the stall without waiting on the headroom's slack (bytes
/// the ring has no buffers for): nothing is lost. Before, the same stops lost 232 and 236
/// frames in the kernel (`fill_ring_empty`) in two runs by hand, with 140 guard PFC frames
/// sent too late.
#[test]
fn a_stopped_worker_with_a_short_fill_ring_is_covered_by_the_stall_guard() {
    let _serial = traffic_lock();
    stops_with_a_short_fill_ring("4MiB", "2MiB", 1000);
}

/// The ptrace stops with 1,024 buffers in d0's fill ring (`[daemon] frames = 4096`), frames
/// of `size` bytes and priority 3 PFC at `xoff` and `xon`: lossless, the guard paused
/// upstream.
fn stops_with_a_short_fill_ring(xoff: &str, xon: &str, size: usize) {
    let plan = format!("mode = \"pfc\"\nxoff = \"{xoff}\"\nxon = \"{xon}\"");
    let (w, r) =
        stop_the_worker_sending(&plan, "frames = 4096", Stops::DuringTraffic, size, "10Gbit");
    assert_lossless(&r);
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    let d0 = port(&r.dut, &w.d0);
    assert_eq!(u(d0, &["fill_target"]), 1024, "{d0}");
    assert!(u(d0, &["stalls"]) >= 3, "{d0}");
    assert!(prio3(d0, "stall_pfc_tx") > 0, "{d0}");
}

/// The same with 9,000-byte frames, each of which takes six receive buffers of a
/// multi-buffer socket: the fill ring's 1,024 buffers hold 170 of them (6 ms at this rate),
/// and an XOFF of 8 MiB stays above that. The worker and the guard count the buffers the
/// frames waiting take (frames plus their bytes over a buffer's), not the frames: counting
/// frames, the guard saw the ring short only at 512 of them, and the same stops lost 153 and
/// 154 frames in the kernel (`rx_dropped`) in two runs by hand.
#[test]
fn a_stopped_worker_with_a_short_fill_ring_of_jumbo_frames_is_covered() {
    let _serial = traffic_lock();
    stops_with_a_short_fill_ring("8MiB", "4MiB", 9000);
}

/// The same stops under SFC alone, with its defaults (a 32 KiB threshold, a 1 MiB limit, 4 ms
/// at this rate): the worker is the congestion point, and stopped it sends no SFCM, so the
/// guard sends them for it, to the sources on the worker's roster (the generator), and
/// nothing is lost. Without the guard the same stops lose frames.
#[test]
fn a_stopped_worker_is_covered_for_sfc_by_the_stall_guard() {
    let _serial = traffic_lock();
    const PLAN: &str = "mode = \"sfc\"";
    let (w, r) = stop_the_worker(PLAN, "", Stops::DuringTraffic);
    assert_lossless(&r);
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    let d0 = port(&r.dut, &w.d0);
    assert!(u(d0, &["stalls"]) >= 3, "{d0}");
    assert!(prio3(d0, "stall_sfcm_tx") > 0, "{d0}");
    assert_eq!(
        prio3(d0, "stall_pfc_tx"),
        0,
        "no PFC for an SFC-only priority: {d0}"
    );
    assert!(
        prio3(d0, "sfcm_tx") >= prio3(d0, "stall_sfcm_tx"),
        "the guard's SFCMs are among the port's: {d0}"
    );
    assert!(u(&r.gen, &["sfcm_rx"]) > 0, "{}", r.gen);
    let (w, r) = stop_the_worker(PLAN, "stall_guard = \"off\"", Stops::DuringTraffic);
    assert_the_stops_lost_frames(&w, &r);
}

/// A source the worker has never taken a frame from: the worker is stopped before the
/// generator's first frame and held 200 ms into its traffic ([`Stops::BeforeTheFirstFrame`],
/// SFC alone, its defaults), so its roster is empty while its RX ring fills. The XDP program's doorbell names the source of the
/// frame that rings it, and the guard pauses that one. Nothing is lost. (With the guard's
/// SFCMs going only to the workers' rosters, by hand: 63,142 and 67,293 frames dropped in the
/// kernel, none sent.)
#[test]
fn a_source_first_seen_during_a_stall_is_paused_by_the_stall_guard() {
    let _serial = traffic_lock();
    let (w, r) = stop_the_worker("mode = \"sfc\"", "", Stops::BeforeTheFirstFrame);
    assert_lossless(&r);
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    let d0 = port(&r.dut, &w.d0);
    assert!(u(d0, &["stalls"]) >= 1, "{d0}");
    assert!(prio3(d0, "stall_sfcm_tx") > 0, "{d0}");
}

/// A worker stopped for 5 ms three times with the stall guard off, so that nobody pauses the
/// generator until the worker is back: about 1.25 MB reaches d0's RX ring each time, and with
/// the quick start's egress of 1 Gbit/s it queues there, four times the buffer (XOFF 64 KiB +
/// the default 256 KiB headroom), as when the host holds a worker off its CPU for longer than
/// the headroom in force was sized for. What finds the buffer full is kept in spare frames of
/// the pool (`[headroom] borrow`, on by default) and counted, and nothing is lost; with
/// `borrow = false` the same stops overflow the buffer (the control).
#[test]
fn a_backlog_beyond_the_buffer_is_kept_in_spare_frames_of_the_pool() {
    let _serial = traffic_lock();
    const PLAN: &str = "mode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"";
    let stops = |daemon: &str| stop_the_worker_sending(PLAN, daemon, Stops::Briefly, 1000, "1Gbit");
    let (w, r) = stops("stall_guard = \"off\"");
    assert_lossless(&r);
    assert_no_drops(&r.dut, &w.d0);
    let d0 = port(&r.dut, &w.d0);
    assert_eq!(u(d0, &["stalls"]), 0, "no guard: {d0}");
    let kept = prio3(d0, "headroom_borrowed");
    let beyond = prio3(d0, "headroom_borrowed_peak");
    assert!(kept > 0 && beyond > 0, "{d0}");
    // At most what one stop brought, less the buffer (a little more: a frame or two came
    // while the worker was sending XOFF).
    assert!(beyond < 2_000_000, "{beyond} B beyond the buffer: {d0}");
    println!("kept {kept} frames beyond the buffer, at most {beyond} B beyond it");

    let (w, r) = stops("stall_guard = \"off\"\n[headroom]\nborrow = false");
    let d0 = port(&r.dut, &w.d0);
    let overflow = u(d0, &["drops", "headroom_overflow"]);
    assert!(overflow > 0, "the stops overflowed nothing: {d0}");
    assert_eq!(
        u(&r.sink, &["lost"]),
        overflow,
        "lost at the buffer: {}",
        r.sink
    );
    assert_eq!(prio3(d0, "headroom_borrowed"), 0, "{d0}");
}

/// What the fill ring's size cannot see coming: frames smaller than any the port has carried.
/// The quick start's 1,000-byte frames let the ingress ring go lean (XOFF + headroom in
/// force is a few hundred of them); then a second generator floods 70-byte frames as fast as
/// it can, each a fifteenth of the bytes the ring was sized by, into a worker at normal
/// priority sharing the CPUs with two CPU-bound processes. What arrives while the worker is
/// away is bounded by the stall guard and by the fill watch (which pauses upstream at half
/// the ring), the sizer takes the ring deep once it has seen the small frames, and nothing
/// is lost. (By hand, three runs: lost 0, 99-187 guard PFC frames each; with `stall_guard =
/// "off"` the same runs lost 9,366-13,994 frames to `headroom_overflow`, as the README's
/// known limitations say of an 8 KiB floor without the guard.)
#[test]
fn small_frames_after_the_ring_went_lean_lose_nothing() {
    let _serial = traffic_lock();
    let _hogs = Hogs::start(2);
    let (w, large, lean, r) = once_more_after_a_loss(
        || {
            let w = wire();
            let config = format!(
                "[daemon]\nrealtime = \"off\"\n\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n\n\
                 [[port]]\niface = \"{}\"\nspeed = \"1Gbit\"\n\n[priority.3]\nmode = \"pfc\"\n\
                 xoff = \"312KiB\"\nxon = \"280KiB\"\nheadroom = \"8KiB\"\n",
                w.d0, w.d1
            );
            let sink = start_sink_with(&w.sink_ns, &w.s, &["--realtime"]);
            let (dut, _cfg, socket) = start_daemon(&w.dut_ns, &config);
            let large = gen_2gbit(&w.gen_ns, &w.g, "1500ms", &[]).json(Duration::from_secs(30));
            let lean = u(
                &status_of(&socket)["ports"][0],
                &["counters", "fill_target"],
            );
            let small = Proc::spawn(
                &w.gen_ns,
                &[
                    "gen",
                    "--iface",
                    &w.g,
                    "--json",
                    "--rate",
                    "10Gbit",
                    "--size",
                    "70",
                    "--priority",
                    "3",
                    "--duration",
                    "2s",
                    "--first-flow",
                    "100",
                ],
            )
            .json(Duration::from_secs(30));
            let sink = sink.json(Duration::from_secs(30));
            dut.interrupt();
            let dut = dut.json(Duration::from_secs(10));
            (
                w,
                large,
                lean,
                Run {
                    gen: small,
                    sink,
                    dut,
                },
            )
        },
        |(_, _, _, r)| (beyond_the_buffer(r), where_frames_went(&r.dut)),
    );
    let d0 = port(&r.dut, &w.d0);
    assert_eq!(lean, 2048, "the 1,000-byte frames left the ring deep: {d0}");
    let small_sent = u(&r.gen, &["frames_sent"]);
    assert!(small_sent > 100_000, "{}", r.gen);
    let sent = u(&large, &["frames_sent"]) + small_sent;
    // A loss with the worker held off longer than the buffer lasts at the small frames'
    // offered rate (about 0.4 Gbit/s of wire here) is the host's: reported, not judged.
    if loss_is_the_hosts(beyond_the_buffer(&r), d0, 327_680, 400_000_000) {
        return;
    }
    assert_eq!(
        u(&r.sink, &["lost"]),
        0,
        "{}
sink: {}",
        where_frames_went(&r.dut),
        r.sink
    );
    assert_eq!(u(&r.sink, &["unique"]), sent, "sink: {}", r.sink);
    assert_no_drops(&r.dut, &w.d0);
    assert_within_the_buffer(&r.dut, &w.d0);
    assert_no_drops(&r.dut, &w.d1);
    // Sized by what it carried, the ring is deep again for frames of 70 bytes.
    assert_eq!(u(d0, &["fill_target"]), 8192, "{d0}");
    println!(
        "small frames {small_sent}, PFC {} (guard {}), stalls {}",
        prio3(d0, "pfc_tx"),
        prio3(d0, "stall_pfc_tx"),
        u(d0, &["stalls"])
    );
}

/// gen → daemon 1 → daemon 2 → sink, only daemon 2's egress shaped: PFC goes back hop by hop
/// (daemon 2 pauses daemon 1, whose queue then builds and pauses the generator).
#[test]
fn pfc_propagates_hop_by_hop_through_two_daemons() {
    let _serial = traffic_lock();
    let (ng, n1, n2, ns) = (
        Netns::new("cg"),
        Netns::new("c1"),
        Netns::new("c2"),
        Netns::new("cs"),
    );
    let (g, a0, a1, b0, b1, s) = (
        unique("g"),
        unique("a"),
        unique("a"),
        unique("b"),
        unique("b"),
        unique("s"),
    );
    veth(&ng, &g, &n1, &a0);
    veth(&n1, &a1, &n2, &b0);
    veth(&n2, &b1, &ns, &s);
    let pfc = format!("[priority.3]\n{PFC}\n");
    let cfg = |i: &str, e: &str, speed: &str| {
        format!("[daemon]\nrealtime = \"auto\"\n\n[[port]]\niface = \"{i}\"\nspeed = \"10Gbit\"\n\n[[port]]\niface = \"{e}\"\nspeed = \"{speed}\"\n\n{pfc}")
    };
    // Two real-time daemons would starve a sink at normal priority: it is a fair peer.
    let sink = start_sink_with(&ns, &s, &["--realtime"]);
    let (d2, _c2, _s2) = start_daemon(&n2, &cfg(&b0, &b1, "1Gbit"));
    let (d1, _c1, _s1) = start_daemon(&n1, &cfg(&a0, &a1, "10Gbit"));
    let gen = gen_2gbit(&ng, &g, "2s", &["--link-speed", "10Gbit"]).json(Duration::from_secs(30));
    let sink = sink.json(Duration::from_secs(30));
    d1.interrupt();
    d2.interrupt();
    let (d1, d2) = (
        d1.json(Duration::from_secs(10)),
        d2.json(Duration::from_secs(10)),
    );
    let sent = u(&gen, &["frames_sent"]);
    assert_lossless(&Run {
        gen: gen.clone(),
        sink: sink.clone(),
        dut: serde_json::json!({ "daemon 1": d1, "daemon 2": d2 }),
    });
    // Hop by hop: daemon 2 paused daemon 1, and daemon 1 paused the generator.
    assert!(prio3(port(&d2, &b0), "pfc_tx") > 0, "{d2}");
    assert!(prio3(port(&d1, &a1), "pfc_rx") > 0, "{d1}");
    assert!(prio3(port(&d1, &a0), "pfc_tx") > 0, "{d1}");
    assert!(u(&gen, &["pfc_rx"]) > 0, "{gen}");
    // Each daemon's counters balance: every data frame in went out, nothing dropped (PFC
    // frames, the only other frames on these links, are counted on both sides too).
    for (d, i, e) in [(&d1, &a0, &a1), (&d2, &b0, &b1)] {
        assert_no_drops(d, i);
        assert_no_drops(d, e);
        let (pi, pe) = (port(d, i), port(d, e));
        assert_eq!(u(pi, &["rx_frames"]) - prio3(pi, "pfc_rx"), sent, "{d}");
        assert_eq!(u(pe, &["tx_frames"]) - prio3(pe, "pfc_tx"), sent, "{d}");
    }
}
