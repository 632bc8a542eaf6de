//! Link-up end to end: `lossless measure` against `ptp4l` (both directions), its LLDP frames
//! decoded by tshark and listed by lldpd, and its measured round trip through the cable
//! emulator tracking the configured delay.

mod common;

use std::{
    io::{BufRead, BufReader},
    process::Stdio,
    time::{Duration, Instant},
};

use common::{
    histogram_top, once_more_after_a_loss, ptp4l, status_of, traffic_lock, unique, veth,
    where_frames_went, Daemon, Guard, Netns, Proc, TempFile,
};
use serde_json::Value;

const T: Duration = Duration::from_secs(20);

/// Two namespaces joined by a veth pair: (ns A, a_if, ns B, b_if).
fn pair() -> (Netns, String, Netns, String) {
    let (a, b) = (Netns::new("lua"), Netns::new("lub"));
    let (ai, bi) = (unique("lua"), unique("lub"));
    veth(&a, &ai, &b, &bi);
    (a, ai, b, bi)
}

fn mac_of(ns: &Netns, iface: &str) -> String {
    ns.run(&["cat", &format!("/sys/class/net/{iface}/address")])
        .trim()
        .to_string()
}

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .fold(v, |v, k| &v[*k])
        .as_f64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {v:#}"))
}

#[test]
fn ptp4l_measures_our_responder() {
    let _l = traffic_lock();
    let (a, ai, b, bi) = pair();
    let mut resp = Proc::spawn(
        &a,
        &["measure", "--iface", &ai, "--respond-for", "4s", "--json"],
    );
    resp.wait_ready(T);
    let (_ptp, out) = ptp4l(&b, &bi);
    // ptp4l logs "delay   filtered <ns>   raw <ns>" for each completed exchange.
    let mut delays = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    for line in out.lines().map_while(Result::ok) {
        if let Some(rest) = line.split("delay   filtered").nth(1) {
            let raw: i64 = rest.split_whitespace().nth(2).unwrap().parse().unwrap();
            delays.push(raw);
        }
        if delays.len() >= 5 || Instant::now() > deadline {
            break;
        }
    }
    assert!(
        delays.len() >= 5,
        "ptp4l reported {delays:?}; responder:\n{}",
        resp.stderr()
    );
    // Mean path delay (one way) over a veth with software stamps: microseconds, not seconds.
    for d in &delays {
        assert!((0..5_000_000).contains(d), "ptp4l path delay {d} ns");
    }
    eprintln!("ptp4l mean path delay to our responder, ns: {delays:?}");
    let r = resp.json(T);
    assert!(f(&r, &["counters", "answered"]) >= 5.0, "{r:#}");
    assert_eq!(r["mode"], "respond");
}

#[test]
fn we_measure_ptp4l() {
    let _l = traffic_lock();
    let (a, ai, b, bi) = pair();
    let (_ptp, _out) = ptp4l(&b, &bi);
    std::thread::sleep(Duration::from_millis(500));
    let m = Proc::spawn(
        &a,
        &[
            "measure",
            "--iface",
            &ai,
            "--samples",
            "10",
            "--lldp-wait",
            "0s",
            "--json",
        ],
    )
    .json(T);
    let meas = &m["measurement"];
    // Said like ptp4l's time_stamping: RX stamps from our XDP program, TX from the kernel.
    assert_eq!(m["time_stamping"]["rx"], "xdp", "{m:#}");
    assert_eq!(m["time_stamping"]["tx"], "kernel", "{m:#}");
    assert_eq!(meas["rejected"], 0, "{m:#}");
    let samples = meas["samples"].as_array().unwrap();
    assert!(samples.len() >= 5, "{m:#}");
    // ptp4l's port identity: the EUI-64 of its interface's MAC, port 1.
    let mac: Vec<u8> = mac_of(&b, &bi)
        .split(':')
        .map(|x| u8::from_str_radix(x, 16).unwrap())
        .collect();
    let eui = [mac[0], mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]];
    let id: Vec<u8> = meas["responder"]["clock_identity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u8)
        .collect();
    assert_eq!(id, eui, "{m:#}");
    let est = f(meas, &["estimate_ns"]);
    assert!(est > 0.0 && est < 5_000_000.0, "estimate {est} ns");
    // ptp4l's turnaround (its T3 - T2 on CLOCK_REALTIME) is removed from every sample.
    for s in samples {
        assert!(f(s, &["turnaround_ns"]) > 0.0, "{s:#}");
        assert!(f(s, &["round_trip_ns"]) < f(s, &["t4_ns"]) - f(s, &["t1_ns"]));
    }
    assert!(f(&m, &["plan", "headroom_bytes"]) > 0.0);
    eprintln!(
        "measured ptp4l: estimate {est} ns, min {} ns, spread {} ns",
        f(meas, &["min_ns"]),
        f(meas, &["spread_ns"])
    );
}

/// Starts tshark on `iface` in `ns` for LLDP frames from `src`, returning once it captures.
fn capture_lldp(ns: &Netns, iface: &str, src: &str, pcap: &str) -> Guard {
    let mut t = ns
        .cmd("tshark")
        .args(["-i", iface, "-c", "1", "-w", pcap, "-f"])
        .arg(format!("ether proto 0x88cc and ether src {src}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark is installed by scripts/setup");
    let mut err = BufReader::new(t.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("Capturing on") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "tshark exited");
    }
    std::thread::sleep(Duration::from_millis(500));
    Guard(t)
}

/// lldpd on `iface` in `ns`, its control socket unique to the test: the process and the
/// socket's path.
fn lldpd(ns: &Netns, iface: &str) -> (Daemon, String) {
    let sock = std::env::temp_dir().join(unique("lldp"));
    let sock = sock.to_str().unwrap().to_string();
    let process = ns
        .cmd("lldpd")
        .args(["-d", "-u", &sock, "-I", iface])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("lldpd is installed by scripts/setup");
    (
        Daemon::new(process, &[&sock, &format!("{sock}.lock")]),
        sock,
    )
}

/// `lldpcli show neighbors` of the lldpd on `sock` in `ns`, as key=value lines.
fn lldp_neighbours(ns: &Netns, sock: &str) -> String {
    ns.run(&["lldpcli", "-u", sock, "-f", "keyvalue", "show", "neighbors"])
}

/// Polls `lldp_neighbours` for up to `within` until `done` holds of the listing; returns
/// the last listing.
fn lldp_neighbours_until(
    ns: &Netns,
    sock: &str,
    within: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + within;
    loop {
        let s = lldp_neighbours(ns, sock);
        if done(&s) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn lldp_decoded_by_tshark_and_listed_by_lldpd() {
    let _l = traffic_lock();
    let (a, ai, b, bi) = pair();
    let (_lldpd, sock) = lldpd(&b, &bi);
    let pcap_file = TempFile::new("lldpcap", "");
    let pcap = pcap_file.path();
    let mut tshark = capture_lldp(&b, &bi, &mac_of(&a, &ai), pcap);
    let mut ours = Proc::spawn(
        &a,
        &[
            "measure",
            "--iface",
            &ai,
            "--respond-for",
            "3s",
            "--pfc-priorities",
            "3,4",
        ],
    );
    ours.wait_ready(T);
    // lldpd lists our port (Port ID subtype interface name).
    let listing = lldp_neighbours_until(&b, &sock, Duration::from_secs(3), |s| {
        s.contains(&format!("port.ifname={ai}"))
    });
    assert!(
        listing.contains(&format!("lldp.{bi}.port.ifname={ai}")),
        "lldpcli show neighbors:\n{listing}"
    );
    assert!(listing.contains("chassis.name=lossless"), "{listing}");
    assert!(
        listing.contains(&format!("chassis.mac={}", mac_of(&a, &ai))),
        "{listing}"
    );
    let status = tshark.0.wait().expect("tshark");
    assert!(status.success());
    let out = std::process::Command::new("tshark")
        .args(["-r", pcap, "-V"])
        .output()
        .expect("tshark");
    let v = String::from_utf8_lossy(&out.stdout);
    for want in [
        "Chassis Id Subtype: MAC address (4)".to_string(),
        format!("Port Id: {ai}"),
        "Seconds: 120".to_string(),
        "System Name: lossless".to_string(),
        "IEEE 802.1 Subtype: Priority Flow Control Configuration (0x0b)".to_string(),
        "0... .... = Willing: No".to_string(),
        ".0.. .... = MACsec Bypass Capability: Not capable".to_string(),
        ".... 1000 = Max PFC Enabled Traffic Classes: 8".to_string(),
        ".... 1... = PFC for Priority 3: Enabled".to_string(),
        "...1 .... = PFC for Priority 4: Enabled".to_string(),
        ".... ..0. = PFC for Priority 1: Disabled".to_string(),
        "Organization Unique Code: 02:4c:4c".to_string(),
        "Unknown Subtype Content: 010700000000".to_string(),
        "End of LLDPDU".to_string(),
    ] {
        assert!(v.contains(&want), "tshark -V lacks {want:?}:\n{v}");
    }
    assert!(!v.contains("Malformed"), "{v}");
    ours.interrupt();
    let _ = ours.finish(T);
}

/// The daemon's stop ends with a TTL-0 LLDPDU on each port that sent LLDPDUs (802.1AB's
/// shutdown LLDPDU: Chassis ID, Port ID, TTL 0, End): on the wire after every regular one,
/// and lldpd drops the daemon's port from its neighbours at once instead of 120 s later.
#[test]
fn daemon_stop_sends_a_ttl_zero_lldpdu_that_lldpd_obeys() {
    let _l = traffic_lock();
    let (nd, nb, np) = (Netns::new("lsd"), Netns::new("lsb"), Netns::new("lsp"));
    let (d0, b0, d1, p1) = (unique("lsd"), unique("lsb"), unique("lsd"), unique("lsp"));
    veth(&nd, &d0, &nb, &b0);
    veth(&nd, &d1, &np, &p1);
    let (_lldpd, sock) = lldpd(&nb, &b0);
    let (control, _socket) = common::control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n\
             [linkup]\nsamples = 2\ninterval = \"0s\"\n{control}"
        ),
    );
    let mut dut = Proc::spawn(&nd, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(T);
    let ours = format!("lldp.{b0}.port.ifname={d0}");
    let listing = lldp_neighbours_until(&nb, &sock, Duration::from_secs(10), |s| s.contains(&ours));
    assert!(
        listing.contains(&ours),
        "lldpd never heard the daemon:\n{listing}\n{}",
        dut.stderr()
    );
    let pcap_file = TempFile::new("lldpstop", "");
    let pcap = pcap_file.path();
    let filter = format!("ether proto 0x88cc and ether src {}", mac_of(&nd, &d0));
    let tshark = Guard(common::capture_matching(&nb, &b0, &filter, pcap, 100));
    dut.interrupt();
    let (_, log) = dut.json_and_log(T);
    // Gone from lldpd's table at once (its TTL, 120 s, has far to run).
    let listing = lldp_neighbours_until(&nb, &sock, Duration::from_secs(2), |s| !s.contains(&ours));
    assert!(
        !listing.contains(&ours),
        "lldpd still lists the stopped daemon:\n{listing}"
    );
    // SIGINT: tshark writes out what it captured and exits.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(tshark.0.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(500));
    drop(tshark);
    let frames = common::pcap_fields(pcap, &["lldp.time_to_live", "lldp.tlv.type", "_ws.expert"]);
    let last = frames
        .last()
        .unwrap_or_else(|| panic!("no LLDPDU captured at the stop"));
    let fields: Vec<&str> = last.split('\t').collect();
    assert_eq!(fields[0], "0", "the last LLDPDU has TTL 0: {frames:?}");
    assert_eq!(
        fields[1], "1,2,3,0",
        "Chassis ID, Port ID, TTL, End only: {frames:?}"
    );
    assert_eq!(fields[2], "", "no expert info (malformed): {frames:?}");
    assert_eq!(
        frames.iter().filter(|f| f.starts_with("0\t")).count(),
        1,
        "one TTL-0 LLDPDU (d1's went to its own link): {frames:?}"
    );
    assert!(log.contains("TTL-0 LLDPDU sent"), "{log}");
}

/// One measurement through the cable emulator with one-way delay `delay`: returns the
/// measuring side's report.
/// `lossless measure` through a cable of `delay` one way, with the software terms of the
/// headroom given by hand (1 ms own lag, 400 us peer reaction, charged at 2 Gbit/s).
fn through_cable(delay: &str) -> Value {
    let (na, nc, nb) = (Netns::new("lca"), Netns::new("lcc"), Netns::new("lcb"));
    let (a0, c0, c1, b0) = (unique("lca"), unique("lcc"), unique("lcd"), unique("lcb"));
    veth(&na, &a0, &nc, &c0);
    veth(&nc, &c1, &nb, &b0);
    // SCHED_FIFO, as in tests/cable.rs: the delay line's accuracy is the emulator's claim,
    // and a normal-priority cable on a loaded host adds its own scheduling to the figures.
    let mut cable = Proc::spawn(
        &nc,
        &[
            "cable",
            "--a",
            &c0,
            "--b",
            &c1,
            "--delay",
            delay,
            "--realtime",
        ],
    );
    cable.wait_ready(T);
    let mut resp = Proc::spawn(&nb, &["measure", "--iface", &b0, "--respond-for", "3s"]);
    resp.wait_ready(T);
    let m = Proc::spawn(
        &na,
        &[
            "measure",
            "--iface",
            &a0,
            "--samples",
            "20",
            "--interval",
            "5ms",
            "--lldp-wait",
            "0s",
            "--buffer",
            "8MiB",
            "--own-lag",
            "1ms",
            "--peer-reaction",
            "400us",
            "--software-rate",
            "2Gbit",
            "--json",
        ],
    )
    .json(T);
    resp.interrupt();
    cable.interrupt();
    let _ = resp.finish(T);
    let _ = cable.finish(T);
    m
}

/// The measured round trip grows by twice the one-way delay the cable adds.
///
/// Compared between two delayed cables, not against a cable without delay: without one the
/// cable forwards each frame when it wakes for it (its wake-up latency, 50-80 us each way on
/// the lab VM, is in that baseline), while with a delay it wakes inside the delay and sends
/// on its deadline, so the baseline's wake-ups are not added on top (seen in CI-like runs: a
/// 186 us baseline and 227 us through 2 x 100 us).
#[test]
fn round_trip_tracks_the_cable_delay() {
    let _l = traffic_lock();
    let base = through_cable("0s");
    let b_est = f(&base, &["measurement", "estimate_ns"]);
    // The software terms are in the plan: 2 Gbit/s x 1 ms and x 400 us.
    assert_eq!(f(&base, &["plan", "adaptive", "own_lag_bit_times"]), 2e6);
    assert_eq!(f(&base, &["plan", "adaptive", "peer_bit_times"]), 8e5);
    eprintln!(
        "no delay: estimate {:.1} us, min {:.1} us, spread {:.1} us",
        b_est / 1e3,
        f(&base, &["measurement", "min_ns"]) / 1e3,
        f(&base, &["measurement", "spread_ns"]) / 1e3
    );
    let runs = [("100us", 100_000.0), ("1ms", 1_000_000.0)].map(|(delay, one_way_ns)| {
        let m = through_cable(delay);
        let (est, min, spread) = (
            f(&m, &["measurement", "estimate_ns"]),
            f(&m, &["measurement", "min_ns"]),
            f(&m, &["measurement", "spread_ns"]),
        );
        eprintln!(
            "delay {delay}: estimate {:.1} us, min {:.1} us, spread {:.1} us",
            est / 1e3,
            min / 1e3,
            f(&m, &["measurement", "spread_ns"]) / 1e3
        );
        // No frame crosses faster than the delay (less 10 us for where the ends take their
        // stamps); the estimate is no more than the delay plus what the cable and the ends
        // took without one, plus the host's noise: 100 us, or this run's own spread where the
        // host was busier (one run here: an interquartile range of 400 us instead of ~115 us,
        // and a trimmed mean 105 us over the fixed allowance, its minimum exact).
        let noise = spread.max(100_000.0);
        assert!(
            min >= 2.0 * one_way_ns - 10_000.0 && est <= 2.0 * one_way_ns + b_est + noise,
            "delay {delay}: estimate {est} ns, min {min} ns, spread {spread} ns, no-delay \
             estimate {b_est} ns; {m:#}"
        );
        (m, est, min)
    });
    let [(short, s_est, s_min), (long, l_est, l_min)] = runs;
    // 2 x 900 us more loop: within 25 % of it plus 100 us (a noisy 2-vCPU VM).
    let want = 2.0 * 900_000.0;
    let tol = 0.25 * want + 100_000.0;
    for (what, d) in [("estimate", l_est - s_est), ("min", l_min - s_min)] {
        eprintln!(
            "1 ms against 100 us: {what} {:+.1} us ({:+.1} % of 2 x 900 us)",
            d / 1e3,
            100.0 * (d - want) / want
        );
        assert!(
            (d - want).abs() <= tol,
            "{what} grew {d} ns, want {want} ns +- {tol} ns"
        );
    }
    // The headroom grows by the bytes in flight over the longer loop (10 Gbit/s).
    let grow = f(&long, &["plan", "headroom_bytes"]) - f(&short, &["plan", "headroom_bytes"]);
    let expect = (l_est - s_est) * 10e9 / 8e9;
    assert!(
        (grow - expect).abs() <= 2.0,
        "headroom grew {grow} B, expected {expect} B"
    );
}

/// The daemon measures its link at start through a 1 ms cable and applies measured PFC
/// thresholds (`status` says `measured`, the headroom covers the loop, the buffer is kept);
/// a port whose peer cannot measure keeps the configured thresholds; a link flap triggers a
/// new measurement while the measured thresholds stay in force, and when the peer is gone
/// after a flap, the configured ones apply again.
#[test]
fn daemon_applies_measured_headroom_and_remeasures_after_a_flap() {
    let _l = traffic_lock();
    let (nd, nc, nb, np) = (
        Netns::new("lda"),
        Netns::new("ldc"),
        Netns::new("ldb"),
        Netns::new("ldp"),
    );
    let (d0, c0, c1, b0) = (unique("ld"), unique("lc"), unique("lc"), unique("lb"));
    let (d1, p1) = (unique("ld"), unique("lp"));
    veth(&nd, &d0, &nc, &c0);
    veth(&nc, &c1, &nb, &b0);
    veth(&nd, &d1, &np, &p1);
    let mut cable = Proc::spawn(&nc, &["cable", "--a", &c0, "--b", &c1, "--delay", "1ms"]);
    cable.wait_ready(T);
    let mut resp = Proc::spawn(&nb, &["measure", "--iface", &b0, "--respond-for", "30s"]);
    resp.wait_ready(T);
    let (control, socket) = common::control_section();
    // No traffic: the buffer is sized to hold what the 1 ms cable's round trip needs (at
    // least 250 kB at 1 Gbit/s) with XOFF to spare, so that the split of it can be checked.
    // Priority 5 has a buffer of its own, which a reload then changes.
    let config = |headroom5: &str| {
        format!(
            "[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n\
             [priority.3]\nmode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\nheadroom = \"2MiB\"\n\
             [priority.5]\nmode = \"pfc\"\nxoff = \"128KiB\"\nxon = \"64KiB\"\nheadroom = \"{headroom5}\"\n\
             [linkup]\nsamples = 8\nsample_interval = \"5ms\"\ninterval = \"0s\"\n\
             [metrics]\nlisten = \"127.0.0.1:9464\"\n{control}"
        )
    };
    let cfg = common::TempFile::new("cfg", &config("1MiB"));
    let mut dut = Proc::spawn(&nd, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(T);
    let prio3 = |s: &Value, port: usize| s["ports"][port]["priorities"][3].clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let measured = loop {
        let s = status_of(&socket);
        if prio3(&s, 0)["source"] == "measured" {
            break prio3(&s, 0);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never measured: {s}\n{}",
            dut.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let headroom = f(&measured, &["headroom_bytes"]);
    // 1 Gbit/s over a round trip of at least 2 ms: at least 250,000 bytes in flight.
    assert!(headroom >= 250_000.0, "{measured}");
    assert_eq!(
        f(&measured, &["xoff_bytes"]) + headroom,
        (64 * 1024 + 2 * 1024 * 1024) as f64,
        "the buffer is kept: {measured}"
    );
    assert!(f(&measured, &["xon_bytes"]) < f(&measured, &["xoff_bytes"]));
    // Priority 5 divides its own buffer, not priority 3's: its limit, and XOFF + headroom
    // in force (which the leader publishes at its next gauge period after a reload).
    let buffer5 = |s: &Value| {
        let p5 = &s["ports"][0]["priorities"][5];
        assert_eq!(p5["source"], "measured", "{p5}");
        assert!(f(p5, &["headroom_bytes"]) >= 250_000.0, "{p5}");
        assert!(f(p5, &["xon_bytes"]) < f(p5, &["xoff_bytes"]), "{p5}");
        (
            f(p5, &["limit_bytes"]) as u64,
            (f(p5, &["xoff_bytes"]) + f(p5, &["headroom_bytes"])) as u64,
        )
    };
    let before = 128 * 1024 + 1024 * 1024;
    assert_eq!(buffer5(&status_of(&socket)), (before, before));
    // status also shows the measured round trip (>= 2 x 1 ms of cable) and the LLDP peer.
    let s = status_of(&socket);
    assert!(f(&s["ports"][0], &["round_trip_ns"]) >= 2_000_000.0, "{s}");
    let peer = s["ports"][0]["peer"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut peer = peer;
    while peer.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no LLDP peer: {}",
            status_of(&socket)
        );
        std::thread::sleep(Duration::from_millis(100));
        peer = status_of(&socket)["ports"][0]["peer"]
            .as_str()
            .unwrap_or_default()
            .to_string();
    }
    assert!(
        peer.contains(&b0),
        "peer {peer} should name the responder's port {b0}"
    );
    // The metrics say the same: the neighbour, the thresholds' source, the round trip.
    let (_, m) = common::http_get(&nd, "127.0.0.1:9464", "/metrics");
    let neighbor = format!("lossless_lldp_neighbor_info{{device=\"{d0}\",neighbor=\"{peer}\"}}");
    assert_eq!(common::metric(&m, &neighbor), 1.0, "{m}");
    let measured_source =
        format!("lossless_threshold_source{{device=\"{d0}\",priority=\"3\",source=\"measured\"}}");
    assert_eq!(common::metric(&m, &measured_source), 1.0);
    let rtt = format!("lossless_link_round_trip_seconds{{device=\"{d0}\"}}");
    assert!(common::metric(&m, &rtt) >= 0.002, "{m}");
    // What link-up counted: the responses and follow-ups of the measurement among others.
    let ptp_rx = format!("lossless_linkup_events_total{{device=\"{d0}\",event=\"ptp_rx\"}}");
    assert!(common::metric(&m, &ptp_rx) >= 16.0, "{m}");
    let stamping =
        format!("lossless_time_stamping_info{{device=\"{d0}\",rx=\"xdp\",tx=\"kernel\"}}");
    assert_eq!(common::metric(&m, &stamping), 1.0, "{m}");
    // The port without a measuring peer keeps the configured thresholds.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !dut.stderr().contains("no peer-delay responder on the link") {
        assert!(std::time::Instant::now() < deadline, "{}", dut.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let s = status_of(&socket);
    assert_eq!(prio3(&s, 1)["source"], "config", "{s}");
    assert_eq!(prio3(&s, 1)["headroom_bytes"], 2 * 1024 * 1024);
    // A reload that gives priority 5 a larger buffer: divided by the same measurement.
    let applied = |log: &str| log.matches("PFC thresholds applied").count();
    std::fs::write(cfg.path(), config("3MiB")).unwrap();
    dut.hangup();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let after = 128 * 1024 + 3 * 1024 * 1024;
    while buffer5(&status_of(&socket)) != (after, after) {
        assert!(
            std::time::Instant::now() < deadline,
            "not reloaded: {}",
            dut.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(applied(&dut.stderr()), 1, "measured once: {}", dut.stderr());
    // Flap the measured link: a new measurement, the measured thresholds meanwhile.
    nd.run(&["ip", "link", "set", &d0, "down"]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(prio3(&status_of(&socket), 0)["source"], "measured");
    nd.run(&["ip", "link", "set", &d0, "up"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while applied(&dut.stderr()) < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "no new measurement: {}",
            dut.stderr()
        );
        assert_eq!(prio3(&status_of(&socket), 0)["source"], "measured");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(dut.stderr().contains("link up"), "{}", dut.stderr());
    // The peer goes (another cable, another host) and the link comes up again: the first
    // measurement fails, and what was measured of the link before no longer holds.
    resp.interrupt();
    let _ = resp.finish(T);
    nd.run(&["ip", "link", "set", &d0, "down"]);
    std::thread::sleep(Duration::from_millis(300));
    nd.run(&["ip", "link", "set", &d0, "up"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !dut.stderr().contains("no longer holds") {
        assert!(
            std::time::Instant::now() < deadline,
            "the old measurement kept: {}",
            dut.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let s = status_of(&socket);
    assert_eq!(prio3(&s, 0)["source"], "config", "{s}");
    assert_eq!(prio3(&s, 0)["headroom_bytes"], 2 * 1024 * 1024, "{s}");
    assert!(s["ports"][0]["round_trip_ns"].is_null(), "{s}");
    dut.interrupt();
    let report = dut.json(T);
    assert_eq!(report["ports"][0]["iface"], d0.as_str());
    cable.interrupt();
    let _ = cable.finish(T);
}

/// One run of `gen --link-partner` (100 Mbit/s) through a 1 ms cable into the daemon, whose
/// egress to the sink is shaped to 50 Mbit/s, with a 128 KiB buffer for priority 3: `linkup`
/// is the `[linkup]` section (measurement or not). Returns (gen, sink, daemon, status).
fn long_link_run(linkup: &str) -> (Value, Value, Value, Value) {
    let common::CableLine {
        ng,
        nd,
        ns,
        g0,
        d0,
        d1,
        s0,
        cable,
        ..
    } = common::CableLine::new("lh", &["--delay", "1ms", "--realtime"]);
    // The generator answers peer-delay requests before it sends (it starts idle).
    let mut partner = Proc::spawn(&ng, &["measure", "--iface", &g0, "--respond-for", "30s"]);
    partner.wait_ready(T);
    let (control, socket) = common::control_section();
    let cfg = common::TempFile::new(
        "cfg",
        &format!(
            "[[port]]\niface = \"{d0}\"\nspeed = \"100Mbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"50Mbit\"\n\
             [priority.3]\nmode = \"pfc\"\nxoff = \"120KiB\"\nxon = \"100KiB\"\nheadroom = \"8KiB\"\n\
             [watchdog]\nenabled = false\n{linkup}\n{control}"
        ),
    );
    let mut dut = Proc::spawn(&nd, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(T);
    if linkup.contains("enabled = true") {
        let deadline = Instant::now() + Duration::from_secs(15);
        while status_of(&socket)["ports"][0]["priorities"][3]["source"] != "measured" {
            assert!(
                Instant::now() < deadline,
                "never measured: {}",
                dut.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    partner.interrupt();
    let _ = partner.finish(T);
    let st = status_of(&socket);
    let sink = common::start_sink(&ns, &s0);
    let gen = Proc::spawn(
        &ng,
        &[
            "gen",
            "--iface",
            &g0,
            "--rate",
            "100Mbit",
            "--link-speed",
            "100Mbit",
            "--size",
            "1000",
            "--priority",
            "3",
            "--duration",
            "2s",
            // The reaction point as a fair peer (real-time, below the cable and the daemon).
            // At normal priority beside three real-time threads, 56-885 frames overflowed a
            // headroom sized for the link in 3 runs of about 20 (two in a row failed a full
            // run on 2026-11-28): tens of ms of arrivals while the worker's RX lag stayed at
            // 1-8 ms, so a source that kept sending, most likely the starved generator.
            "--realtime",
            "--json",
        ],
    )
    .json(T);
    let sink = sink.json(Duration::from_secs(60));
    dut.interrupt();
    let dut = dut.json(T);
    cable.interrupt();
    let _ = cable.finish(T);
    (gen, sink, dut, st)
}

/// The largest overshoot after an XOFF of priority 3 in a port's report: the lower bound of
/// the highest non-empty power-of-two bucket (`None`: no episode was measured).
fn peak_overshoot(port: &Value) -> Option<u64> {
    histogram_top(&port["overshoot"][3])
}

/// The configured headroom (8 KiB: a short cable's) overflows on a 1 ms link when it is held
/// fixed (and nothing beyond the buffer is kept in spare frames of the pool: `borrow =
/// false`); with link-up and the adaptive headroom (the defaults: no hand-set peer response),
/// the same 128 KiB buffer stays lossless with no frame kept beyond it, and the headroom in
/// force covers every overshoot seen.
#[test]
fn measured_headroom_keeps_a_long_link_lossless_where_the_static_one_overflows() {
    let _l = traffic_lock();
    let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"));
    let (gen, sink, dut, st) =
        long_link_run("[linkup]\nenabled = false\n[headroom]\nadaptive = false\nborrow = false");
    assert_eq!(st["ports"][0]["priorities"][3]["source"], "config", "{st}");
    let overflow = n(&dut["ports"][0]["drops"]["headroom_overflow"]);
    let sent = n(&gen["frames_sent"]);
    assert!(n(&gen["pfc_rx"]) > 0, "the daemon sent PFC: {gen}");
    assert!(
        overflow > 0,
        "the short-cable headroom must overflow: {dut}"
    );
    assert_eq!(n(&sink["unique"]) + overflow, sent, "{sink}");
    let static_overflow = overflow;

    // Once more on a loss: in 18 runs on the lab VM (2026-11-27) three lost 4-45 frames to
    // `headroom_overflow`, each with the worker held off 2-8 ms once (longer than a stall
    // plus the 2 ms round trip of the cable, which the headroom covers) by the host, which
    // stops the VM's vCPUs; the guard met one stall or none. Two losses in a row still fail.
    let (gen, sink, dut, st) = once_more_after_a_loss(
        || {
            long_link_run(
                "[linkup]\nenabled = true\nsamples = 8\nsample_interval = \"5ms\"\ninterval = \"0s\"",
            )
        },
        |(_, _, dut, _)| {
            let overflow = n(&dut["ports"][0]["drops"]["headroom_overflow"]);
            (overflow + common::borrowed(dut), where_frames_went(dut))
        },
    );
    let p3 = &st["ports"][0]["priorities"][3];
    assert_eq!(p3["source"], "measured", "{st}");
    // Link-up's model (the wire) is one term; the headroom in force is never below it.
    let [_, measured, _] = p3["headroom_terms"]
        .as_array()
        .map(|t| [n(&t[0]), n(&t[1]), n(&t[2])])
        .unwrap_or_else(|| panic!("no headroom terms: {p3}"));
    assert!(measured > 0, "{p3}");
    assert!(n(&p3["headroom_bytes"]) >= measured, "{p3}");
    // Changes of the value in force are counted, with when the last was (here the prior, half
    // the buffer, may hold it from the start: then none).
    assert_eq!(
        n(&p3["headroom_changes"]) > 0,
        p3["headroom_changed_ago_s"]
            .as_f64()
            .is_some_and(|s| s >= 0.0),
        "{p3}"
    );
    let d0 = &dut["ports"][0];
    let sent = n(&gen["frames_sent"]);
    assert!(n(&gen["pfc_rx"]) > 0, "the daemon sent PFC: {gen}");
    for (reason, count) in d0["drops"].as_object().unwrap() {
        assert_eq!(n(count), 0, "drops {reason}: {d0}");
    }
    assert_eq!(common::borrowed(&dut), 0, "kept beyond the buffer: {d0}");
    assert_eq!(n(&sink["unique"]), sent, "{sink}");
    assert_eq!(n(&sink["lost"]), 0, "{sink}");
    // The headroom in force at the end covers the largest overshoot seen (the lower bound of
    // its power-of-two bucket), and XOFF + headroom is still the buffer.
    let headroom = n(&d0["headroom_in_force"][3]);
    let peak = peak_overshoot(d0).unwrap_or_else(|| panic!("no XOFF episode was measured: {d0}"));
    assert!(
        headroom >= peak,
        "headroom {headroom} below an overshoot of {peak}: {d0}"
    );
    assert_eq!(n(&d0["xoff_in_force"][3]) + headroom, 128 * 1024, "{d0}");
    let episodes: u64 = d0["overshoot"][3]["buckets"]
        .as_array()
        .map_or(0, |b| b.iter().filter_map(|c| c.as_u64()).sum());
    let mean = n(&d0["overshoot"][3]["sum"]) as f64 / episodes.max(1) as f64;
    println!(
        "1 ms cable, 100 Mbit/s into 50 Mbit/s: static headroom 8 KiB -> {static_overflow} frames overflowed; \
         link-up measured {measured} B, headroom in force {headroom} B ({}) -> lossless; \
         {episodes} XOFF episodes, overshoot mean {mean:.0} B, peak {peak}..{} B; \
         ratio headroom/mean {:.2}, headroom/peak bucket {:.2}..{:.2}; peak queue {} B",
        p3["headroom_source"],
        peak.saturating_mul(2),
        headroom as f64 / mean.max(1.0),
        headroom as f64 / peak.saturating_mul(2).max(1) as f64,
        headroom as f64 / peak.max(1) as f64,
        n(&dut["ports"][1]["queue_peak_bytes"][3])
    );
}

/// The quick-start topology with link-up measuring through `gen --link-partner`: 200 Mbit/s
/// into a 100 Mbit/s egress with the default headroom (256 KiB). Link-up measures the wire (tens
/// of µs on veth, a headroom of a few KB), which used to replace the configured headroom and
/// lose frames; the headroom in force never goes below the configured one, and covers every
/// overshoot seen. Measuring again every second while the traffic runs, the model gains the
/// software terms seen meanwhile: the daemon's own lag and the generator's reaction to PFC.
#[test]
fn measuring_the_link_never_makes_a_safe_headroom_lossy() {
    let _l = traffic_lock();
    let n = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"));
    let (ng, nd, ns) = (Netns::new("mg"), Netns::new("md"), Netns::new("ms"));
    let (g0, d0, d1, s0) = (unique("g"), unique("d"), unique("d"), unique("s"));
    veth(&ng, &g0, &nd, &d0);
    veth(&nd, &d1, &ns, &s0);
    let (control, socket) = common::control_section();
    let cfg = common::TempFile::new(
        "cfg",
        &format!(
            "[[port]]\niface = \"{d0}\"\nspeed = \"10Gbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"100Mbit\"\n\
             [priority.3]\nmode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"\n\
             [linkup]\ninterval = \"1s\"\n{control}"
        ),
    );
    let mut dut = Proc::spawn(&nd, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(T);
    let sink = common::start_sink(&ns, &s0);
    let gen = Proc::spawn(
        &ng,
        &[
            "gen",
            "--iface",
            &g0,
            "--rate",
            "200Mbit",
            "--size",
            "1000",
            "--priority",
            "3",
            "--duration",
            "3s",
            "--link-partner",
            "--json",
        ],
    );
    // Link-up measures while the generator runs (it answers peer-delay requests).
    let deadline = Instant::now() + Duration::from_secs(15);
    while status_of(&socket)["ports"][0]["priorities"][3]["source"] != "measured" {
        assert!(
            Instant::now() < deadline,
            "never measured: {}",
            dut.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = status_of(&socket);
    let p3 = &st["ports"][0]["priorities"][3];
    let measured = n(&p3["headroom_terms"][1]);
    assert!(
        measured > 0 && measured < 256 * 1024,
        "link-up measured the wire: {p3}"
    );
    let gen = gen.json(Duration::from_secs(30));
    let sink = sink.json(Duration::from_secs(30));
    // After the traffic: the model of the last measurement taken while it ran holds the
    // software terms seen since the one before (the peer term is at least the 802.3
    // allowance).
    let deadline = Instant::now() + Duration::from_secs(15);
    let model = loop {
        let st = status_of(&socket);
        let m = st["ports"][0]["headroom_model"].clone();
        // The peer's reaction beyond the wire may be 0 (a generator that obeys at once).
        if m["own_lag_ns"].as_u64() > Some(0) && m["peer_reaction_ns"].is_u64() {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "no model with software terms: {st}\n{}",
            dut.stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = dut.stderr();
    dut.interrupt();
    let dut = dut.json(T);
    let [wire, own_lag, peer, frames] = ["wire", "own_lag", "peer", "frames"].map(|t| n(&model[t]));
    assert!(
        wire > 0 && own_lag > 0 && peer > 0 && frames >= 2 * 1518,
        "{model}"
    );
    // Charged at the fastest the port received: about the generator's 200 Mbit/s, not the
    // 10 Gbit/s the port is configured at. (Up to 1 Gbit/s: a generator held off by the host
    // catches up at more than its rate, and one 40 ms interval read 458 Mbit/s in a full run
    // on 2026-11-27 whose own lag reached 4 ms.)
    let rate = n(&model["rate_bps"]);
    assert!(
        (150_000_000..=1_000_000_000).contains(&rate),
        "rate {rate}: {model}\n{log}"
    );
    let at_rate = |ns: u64| (u128::from(ns) * u128::from(rate)).div_ceil(8_000_000_000) as u64;
    assert!(
        own_lag.abs_diff(at_rate(n(&model["own_lag_ns"]))) <= 1,
        "{model}"
    );
    assert!(peer >= at_rate(n(&model["peer_reaction_ns"])), "{model}");
    assert!(
        n(&p3["headroom_bytes"]) >= 256 * 1024,
        "never below the configured (default) headroom: {p3}"
    );
    let sent = n(&gen["frames_sent"]);
    assert!(n(&gen["pfc_rx"]) > 0, "the daemon sent PFC: {gen}");
    assert_eq!(
        n(&sink["unique"]),
        sent,
        "{}\n{sink}",
        where_frames_went(&dut)
    );
    assert_eq!(n(&sink["lost"]), 0, "{sink}");
    let d0 = &dut["ports"][0];
    for (reason, count) in d0["drops"].as_object().unwrap() {
        assert_eq!(n(count), 0, "drops {reason}: {d0}");
    }
    let peak = peak_overshoot(d0).unwrap_or(0);
    assert!(n(&d0["headroom_in_force"][3]) >= peak, "{d0}");
    println!(
        "link partner, 200 Mbit/s into 100 Mbit/s: link-up measured {measured} B at first, then \
         the model {} B = wire {wire} + own lag {own_lag} ({} ns) + peer {peer} ({} ns) + frames \
         {frames} (lag and reaction at {rate} bit/s); headroom in force {} B at the end, peak \
         overshoot {peak}..{} B",
        wire + own_lag + peer + frames,
        model["own_lag_ns"],
        model["peer_reaction_ns"],
        n(&d0["headroom_in_force"][3]),
        peak * 2
    );
}
