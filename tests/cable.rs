//! End-to-end tests of `lossless cable` on veth pairs in three network namespaces:
//! ns A [gen] a0 — c0 [cable] c1 — b0 [sink] ns B.
//!
//! The machine runs tests as root. Traffic is kept short (about 1 s per run) because the VM
//! has two vCPUs shared by generator, cable, sink and the veth softirq work.

mod common;

use std::time::Duration;

use common::{json_f64 as f, json_u64 as u, traffic_lock, Proc, Topo};
use lossless::cable::rules::{stream_seed, Chance, Purpose};
use serde_json::Value;

const T: Duration = Duration::from_secs(20);

/// One run: sink on b0, cable on c0/c1, then `before` (e.g. frames injected with `send`),
/// then the generator on a0. Returns the gen, sink and cable reports.
fn run(t: &Topo, cable: &[&str], gen: &[&str], before: impl FnOnce()) -> (Value, Value, Value) {
    let mut sink = Proc::spawn(
        &t.b,
        &[
            "sink",
            "--iface",
            &t.b0,
            "--duration",
            "15s",
            "--idle-timeout",
            "700ms",
            "--json",
            // A fair peer of the real-time cable (and of gen where it is one): at normal
            // priority a real-time generator starved it to 0.60-0.92 Gbit/s of 1.
            "--realtime",
        ],
    );
    sink.wait_ready(Duration::from_secs(10));
    let mut args = vec!["cable", "--a", &t.c0, "--b", &t.c1, "--json"];
    args.extend_from_slice(cable);
    let mut c = Proc::spawn(&t.c, &args);
    c.wait_ready(Duration::from_secs(10));
    before();
    let mut args = vec!["gen", "--iface", &t.a0, "--json"];
    args.extend_from_slice(gen);
    let mut g = Proc::spawn(&t.a, &args);
    g.wait_ready(Duration::from_secs(10));
    let gen = g.json(T);
    let sink = sink.json(T);
    c.interrupt();
    let cable = c.json(T);
    (gen, sink, cable)
}

fn ab(cable: &Value) -> &Value {
    &cable["directions"][0]
}

/// No loss, no reordering, every frame the generator sent delivered, nothing dropped.
fn assert_clean(gen: &Value, sink: &Value, cable: &Value) {
    let sent = u(gen, &["frames_sent"]);
    assert!(sent > 1000, "{gen:#}");
    assert_eq!(u(sink, &["received"]), sent, "sink: {sink:#}");
    assert_eq!(u(sink, &["lost"]), 0, "{sink:#}");
    assert_eq!(u(sink, &["reordered"]), 0, "{sink:#}");
    assert_eq!(u(sink, &["duplicates"]), 0, "{sink:#}");
    let d = ab(cable);
    assert_eq!(u(d, &["forwarded_frames"]), sent, "{cable:#}");
    assert_eq!(u(d, &["dropped_loss"]), 0);
    assert_eq!(u(d, &["dropped_fifo_overflow"]), 0);
    assert_eq!(u(d, &["flushed_at_stop"]), 0);
    assert!(cable["warnings"].as_array().unwrap().is_empty());
}

/// One-way delay of 100 µs and 1 ms, measured end to end by the sink from the generator's TX
/// stamps: the median lands on the setting plus the baseline of the same path without delay.
///
/// A host that is busy elsewhere for the whole measurement (once in CI, right after the test
/// binaries were built: the cable's baseline mean 450 us against its 46 us median, p99
/// 6.6 ms) cannot judge a delay line to 10 us, so a failed measurement is repeated once on a
/// fresh topology; both must fail for the test to fail, and the first failure is printed.
#[test]
fn delay_100us_and_1ms_end_to_end() {
    let _l = traffic_lock();
    measured_twice_at_most(delay_measured_end_to_end);
}

/// `measure`'s result, measured once more on a fresh topology if the first fell short; panics
/// with both reasons if the second does too. For figures a host busy elsewhere spoils
/// (lateness, shortfall); what the emulator must never do stays a hard assertion inside.
fn measured_twice_at_most<T>(measure: impl Fn() -> Result<T, String>) -> T {
    measure().unwrap_or_else(|first| {
        eprintln!("first measurement fell short, measuring again: {first}");
        measure().unwrap_or_else(|second| panic!("{second}\n(first measurement: {first})"))
    })
}

fn delay_measured_end_to_end() -> Result<(), String> {
    let t = Topo::new("d");
    // 100 Mbit/s of 500-byte frames: about 24,000 timestamped frames per run.
    let gen = ["--rate", "50Mbit", "--size", "1000", "--duration", "1s"];
    // `--realtime`: the cable's accuracy is a claim about the emulator, which an operator gets
    // by running it SCHED_FIFO. A normal-priority cable shares two vCPUs with generator, sink
    // and the veth softirqs; on a loaded CI host that put its median 324 µs late at 1 ms
    // (baseline sink p50 70 µs, p99 7.8 ms: the host, not the delay line).
    let (g0, s0, c0) = run(&t, &["--delay", "0s", "--realtime"], &gen, || {});
    assert_clean(&g0, &s0, &c0);
    let base = f(&s0, &["latency", "p50_us"]);
    // The cable's own lag on this path with no delay (RX stamp to TX): a delayed frame is
    // released no later than that after its due time, plus the bound below.
    let base_cable = f(ab(&c0), &["delay", "p50_us"]);
    eprintln!(
        "baseline: sink p50 {base:.1} us p99 {:.1} us; cable p50 {base_cable:.1} us mean {:.1} us",
        f(&s0, &["latency", "p99_us"]),
        f(ab(&c0), &["delay_mean_us"])
    );
    for (flag, set_us) in [("100us", 100.0), ("1ms", 1000.0)] {
        let (g, s, c) = run(&t, &["--delay", flag, "--realtime"], &gen, || {});
        assert_clean(&g, &s, &c);
        let p50 = f(&s, &["latency", "p50_us"]);
        let cable_mean = f(ab(&c), &["delay_mean_us"]);
        let cable_p50 = f(ab(&c), &["delay", "p50_us"]);
        let cable_p99 = f(ab(&c), &["delay", "p99_us"]);
        eprintln!(
            "delay {flag}: sink p50 {p50:.1} us (p99 {:.1}), expected {set_us} + baseline {base:.1}; \
             cable mean {cable_mean:.2} us, p50 {cable_p50:.1}, p99 {cable_p99:.1}, min {:.1}",
            f(&s, &["latency", "p99_us"]),
            f(ab(&c), &["delay", "min_us"]),
        );
        // The cable's own measure (XDP RX stamp to TX): never early, and the median no more
        // than 10 µs later than the same path's lag without delay. (The median, not the mean:
        // on two shared vCPUs one scheduler slice lost to the generator delays a few dozen
        // frames by milliseconds and moves the mean. The idler learns how late this host's
        // timed wake-ups come and wakes that much earlier; before it did, a slower host put
        // the median 10-23 µs late.)
        assert!(f(ab(&c), &["delay", "min_us"]) >= set_us, "{c:#}");
        if cable_p50 > set_us + base_cable + 10.0 {
            return Err(format!(
                "cable p50 {cable_p50} us for {set_us} us + baseline {base_cable} us \
                 (mean {cable_mean}, p99 {cable_p99})"
            ));
        }
        // End to end. Lower bound: the setting, less the sink histogram's resolution (0.1 %,
        // HdrHistogram with 3 significant digits). Upper bound: the setting plus the
        // baseline of the same path without delay, plus 10 µs. (Measured on the 2-vCPU VM:
        // +4 µs at both settings; the baseline, about 13 µs, includes the cable's wake-up on
        // RX, which a delayed frame no longer pays.)
        let (lo, hi) = (set_us * (1.0 - 0.001), set_us + base + 10.0);
        assert!(
            p50 >= lo,
            "delay {flag}: sink p50 {p50} us, below {lo:.1} us"
        );
        if p50 > hi {
            return Err(format!(
                "delay {flag}: sink p50 {p50} us, expected {lo:.1}..={hi:.1} us"
            ));
        }
    }
    Ok(())
}

/// At `--rate 1Gbit` with the generator offering 2 Gbit/s, the sink receives 1 Gbit/s (wire
/// overhead counted on both sides) and the FIFO bound drops the excess, loudly.
///
/// Never faster than the rate is a hard assertion. Slower is what a cable that lost its CPU
/// delivers (once in a full run on a noisy VM: 0.963 Gbit/s, no daemon involved), so a short
/// measurement is repeated once on a fresh topology before it fails the test.
#[test]
fn rate_1gbit() {
    let _l = traffic_lock();
    let (s, c) = measured_twice_at_most(shaped_to_1gbit);
    // The excess was dropped by the FIFO bound and said so.
    assert!(u(ab(&c), &["dropped_fifo_overflow"]) > 0);
    assert!(!c["warnings"].as_array().unwrap().is_empty());
    assert_eq!(u(&s, &["reordered"]), 0);
    assert_eq!(
        u(&s, &["received"]),
        u(ab(&c), &["forwarded_frames"]),
        "what the cable forwarded arrives"
    );
}

/// One run of [`rate_1gbit`]: the sink's and the cable's reports, or why the rate fell short.
fn shaped_to_1gbit() -> Result<(Value, Value), String> {
    let t = Topo::new("r");
    let (g, s, c) = run(
        &t,
        // SCHED_FIFO, as for the delay test: the shaper's accuracy is the emulator's claim.
        &["--rate", "1Gbit", "--realtime"],
        // gen real-time too: at normal priority beside one CPU-bound loop it offered
        // 0.995 Gbit/s, less than the shaper lets through, and the test could not judge it.
        &[
            "--rate",
            "2Gbit",
            "--size",
            "1000",
            "--duration",
            "1s",
            "--realtime",
        ],
        || {},
    );
    let sink_rate = f(&s, &["rate_bps"]);
    let cable_rate = f(ab(&c), &["rate_bps"]);
    eprintln!(
        "rate: gen {:.3} Gbit/s offered, sink {:.4} Gbit/s, cable {:.4} Gbit/s, overflow drops {}",
        f(&g, &["rate_bps"]) / 1e9,
        sink_rate / 1e9,
        cable_rate / 1e9,
        u(ab(&c), &["dropped_fifo_overflow"])
    );
    // The shaper is only exercised if more is offered than it lets through.
    assert!(
        f(&g, &["rate_bps"]) > 1.1e9,
        "generator offered less than the shaped rate: {g:#}"
    );
    for (what, rate) in [("sink", sink_rate), ("cable", cable_rate)] {
        assert!(
            rate <= 1.03e9,
            "{what} rate {rate}: faster than the shaper allows"
        );
        if rate < 0.97e9 {
            return Err(format!("{what} rate {rate}"));
        }
    }
    Ok((s, c))
}

/// `--loss 1% --loss-match data --seed 7` drops exactly the frames the seeded stream picks:
/// about 1 %, the same on every run.
#[test]
fn loss_1_percent_of_data_seeded() {
    let _l = traffic_lock();
    let t = Topo::new("l");
    const N: u64 = 20_000;
    let (g, s, c) = run(
        &t,
        &["--loss", "1%", "--loss-match", "data", "--seed", "7"],
        &["--rate", "200Mbit", "--size", "200", "--count", "20000"],
        || {},
    );
    assert_eq!(u(&g, &["frames_sent"]), N);
    // Replay the cable's stream for (seed 7, direction a->b, loss): the exact drop set.
    let mut chance = Chance::new(0.01, stream_seed(7, 0, Purpose::Loss));
    let dropped: Vec<u64> = (0..N).filter(|_| chance.hit()).collect();
    let n = dropped.len() as u64;
    let last_delivered = (0..N).rev().find(|s| !dropped.contains(s)).unwrap();
    let lost_below_highest = dropped.iter().filter(|s| **s < last_delivered).count() as u64;
    eprintln!("loss: {n} of {N} data frames dropped (seed 7)");
    assert!((140..=260).contains(&n), "{n}");
    let d = ab(&c);
    assert_eq!(u(d, &["rx_by_class", "data"]), N, "stray frames: {c:#}");
    assert_eq!(u(d, &["dropped_loss"]), n, "{c:#}");
    assert_eq!(u(d, &["dropped_loss_by_class", "data"]), n);
    assert_eq!(u(d, &["forwarded_frames"]), N - n);
    assert_eq!(u(d, &["dropped_fifo_overflow"]), 0);
    assert_eq!(u(&s, &["unique"]), N - n, "{s:#}");
    assert_eq!(u(&s, &["lost"]), lost_below_highest, "{s:#}");
    assert_eq!(u(&s, &["reordered"]), 0);
}

/// `--corrupt 2%`: a test frame damaged in its headers or test header fails its UDP checksum
/// and is counted as `damaged` by the sink, never accounted under a wild sequence number or
/// flow id: no flow's sequence runs past what was sent, no frame counts twice.
#[test]
fn corrupted_test_frames_are_told_not_accounted() {
    let _l = traffic_lock();
    let t = Topo::new("k");
    const N: u64 = 20_000;
    let (g, s, c) = run(
        &t,
        &["--corrupt", "2%", "--seed", "11"],
        &[
            "--rate", "200Mbit", "--size", "100", "--flows", "4", "--count", "20000",
        ],
        || {},
    );
    assert_eq!(u(&g, &["frames_sent"]), N);
    let corrupted = u(ab(&c), &["corrupted"]);
    assert!(corrupted > 200, "{c:#}");
    let (unique, damaged, other) = (
        u(&s, &["unique"]),
        u(&s, &["damaged"]),
        u(&s, &["other_rx"]),
    );
    // A 100-byte frame: about 52 of its 86 bytes after the Ethernet header are checked.
    assert!(damaged > corrupted / 4, "{s:#}");
    // Every frame the cable left alone arrived; none is counted twice. (A frame flipped in
    // its UDP port or IP protocol is no longer steered to the sink's socket at all.)
    assert!(unique >= N - corrupted, "{s:#}");
    assert!(unique + damaged + other <= N, "{s:#}");
    assert_eq!(
        (
            u(&s, &["duplicates"]),
            u(&s, &["stale"]),
            u(&s, &["unknown_flow"])
        ),
        (0, 0, 0)
    );
    for f in s["flows"].as_array().unwrap() {
        assert!(u(f, &["flow"]) < 4 && u(f, &["next_seq"]) <= N / 4, "{f}");
    }
}

/// A cable stopped for 300 ms while 1 Gbit/s arrives drops at its own receive socket: it says
/// so (`dropped_at_socket`, a warning), and that is where every frame the sink missed went,
/// where before the cable reported no drop and the sink's loss looked like the link's.
#[test]
fn a_cable_that_falls_behind_counts_what_its_socket_dropped() {
    let _l = traffic_lock();
    let t = Topo::new("f");
    let sink = common::start_sink(&t.b, &t.b0);
    let mut c = Proc::spawn(&t.c, &["cable", "--a", &t.c0, "--b", &t.c1, "--json"]);
    c.wait_ready(Duration::from_secs(10));
    let g = Proc::spawn(
        &t.a,
        &[
            "gen",
            "--iface",
            &t.a0,
            "--rate",
            "1Gbit",
            "--size",
            "1000",
            "--duration",
            "1500ms",
            "--json",
        ],
    );
    std::thread::sleep(Duration::from_millis(400));
    common::stop_for(c.pid(), Duration::from_millis(300));
    let g = g.json(T);
    let s = sink.json(T);
    c.interrupt();
    let (cable, log) = c.json_and_log(T);
    let d = ab(&cable);
    let dropped = u(d, &["dropped_at_socket"]);
    assert!(
        dropped > 1_000,
        "the stop dropped too little to tell: {cable:#}"
    );
    let missed = u(&g, &["frames_sent"]) - u(&s, &["unique"]);
    assert!(
        missed > 0 && missed <= dropped,
        "missed {missed}, dropped {dropped}: {s:#}"
    );
    assert_eq!(u(d, &["tx_refused"]), 0, "{cable:#}");
    assert!(
        log.contains("dropped at the cable's own receive socket"),
        "{log}"
    );
}

/// `--loss 100% --loss-match pfc` drops the PFC frames and only them: the data all arrives.
#[test]
fn loss_match_pfc_drops_only_pfc() {
    let _l = traffic_lock();
    let t = Topo::new("p");
    let a0 = t.a0.clone();
    let (g, s, c) = run(
        &t,
        &["--loss", "100%", "--loss-match", "pfc"],
        &["--rate", "200Mbit", "--size", "200", "--count", "5000"],
        || {
            // 20 PFC frames from side A (AF_PACKET, so no XDP program is attached to a0).
            let out = Proc::spawn(
                &t.a,
                &[
                    "send",
                    "pfc",
                    "--iface",
                    &a0,
                    "--backend",
                    "af-packet",
                    "--priorities",
                    "3",
                    "--count",
                    "20",
                    "--interval",
                    "1ms",
                    "--json",
                ],
            )
            .json(T);
            assert_eq!(u(&out, &["sent"]), 20);
        },
    );
    let d = ab(&c);
    assert_eq!(u(d, &["rx_by_class", "pfc"]), 20, "{c:#}");
    assert_eq!(u(d, &["dropped_loss"]), 20);
    assert_eq!(u(d, &["dropped_loss_by_class", "pfc"]), 20);
    assert_eq!(u(d, &["rx_by_class", "data"]), 5000);
    assert_eq!(u(d, &["forwarded_frames"]), 5000);
    assert_eq!(u(&g, &["frames_sent"]), 5000);
    assert_eq!(u(&s, &["received"]), 5000, "{s:#}");
    assert_eq!(u(&s, &["lost"]), 0);
    assert_eq!(u(&s, &["other_rx"]), 0, "a PFC frame got through: {s:#}");
}

/// PFC frames sent on one side arrive intact on the other: tshark on the far end decodes them.
#[test]
fn pfc_passes_through_intact() {
    let _l = traffic_lock();
    let t = Topo::new("t");
    let mut cap = Proc::command(
        &t.b,
        "tshark",
        &[
            "-i",
            &t.b0,
            "-l",
            "-n",
            "-a",
            "duration:8",
            "-c",
            "5",
            "-f",
            "ether proto 0x8808",
            "-V",
        ],
    );
    cap.wait_for("Capturing on", Duration::from_secs(10));
    let mut c = Proc::spawn(
        &t.c,
        &[
            "cable", "--a", &t.c0, "--b", &t.c1, "--delay", "50us", "--json",
        ],
    );
    c.wait_ready(Duration::from_secs(10));
    let out = Proc::spawn(
        &t.a,
        &[
            "send",
            "pfc",
            "--iface",
            &t.a0,
            "--backend",
            "af-packet",
            "--priorities",
            "3,5",
            "--quanta",
            "4660",
            "--count",
            "5",
            "--json",
        ],
    )
    .json(T);
    assert_eq!(u(&out, &["sent"]), 5);
    let (st, text) = cap.finish(T);
    c.interrupt();
    let cable = c.json(T);
    assert!(st.success(), "tshark failed");
    assert_eq!(u(ab(&cable), &["rx_by_class", "pfc"]), 5);
    assert_eq!(u(ab(&cable), &["forwarded_frames"]), 5);
    let frames = text.matches("\nFrame ").count() + usize::from(text.starts_with("Frame "));
    assert_eq!(frames, 5, "{text}");
    assert!(text.contains("01:80:c2:00:00:01"), "{text}");
    assert!(text.contains("0x0101"), "PFC opcode not decoded:\n{text}");
    // Quanta 4660 = 0x1234 on priorities 3 and 5, the others zero, in every frame.
    assert!(text.matches("4660").count() >= 10, "{text}");
}

/// A cable runs until it is stopped, so it says every `--progress` what each direction
/// forwarded since the previous line and what it dropped.
#[test]
fn the_cable_logs_progress_per_direction() {
    let _l = traffic_lock();
    let t = Topo::new("q");
    let sink = common::start_sink(&t.b, &t.b0);
    let mut args = vec!["cable", "--a", &t.c0, "--b", &t.c1, "--json"];
    args.extend_from_slice(&["--delay", "50us", "--progress", "300ms"]);
    let mut c = Proc::spawn(&t.c, &args);
    c.wait_ready(Duration::from_secs(10));
    let gen = Proc::spawn(
        &t.a,
        &[
            "gen",
            "--iface",
            &t.a0,
            "--rate",
            "200Mbit",
            "--size",
            "500",
            "--duration",
            "1s",
            "--json",
        ],
    )
    .json(T);
    let sink = sink.json(T);
    c.interrupt();
    let (cable, log) = c.json_and_log(T);
    let sent = u(&gen, &["frames_sent"]);
    assert_eq!(u(&sink, &["unique"]), sent, "{sink:#}");
    assert_eq!(u(ab(&cable), &["forwarded_frames"]), sent, "{cable:#}");

    let progress = "progress over the last";
    let ab_lines: String = log
        .lines()
        .filter(|l| l.contains("direction=\"a->b\""))
        .collect::<Vec<_>>()
        .join("\n");
    let forwarded = common::logged_values(&ab_lines, progress, "forwarded");
    assert!(
        forwarded.len() >= 3,
        "a 1 s run at a line per 0.3 s:\n{log}"
    );
    assert!(forwarded.windows(2).all(|w| w[0] <= w[1]), "{log}");
    assert!(
        forwarded.iter().any(|&f| f > 0) && *forwarded.last().unwrap() <= sent,
        "{log}"
    );
    assert!(
        common::logged_values(&ab_lines, progress, "dropped_loss")
            .iter()
            .all(|&d| d == 0),
        "{log}"
    );
    // The other direction has its own lines, with nothing (but the sink's PFC, if any) on it.
    assert_eq!(
        log.matches("direction=\"b->a\"").count(),
        forwarded.len(),
        "{log}"
    );
}
