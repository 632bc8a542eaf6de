//! Source flow control under incast: three generators, each in its own namespace, share a
//! Linux bridge into `lossless run`, whose egress toward the sink is shaped below their sum.
//! A bridge never forwards PFC (link-local), so only SFC can reach the sources. And a
//! generator obeys only the SFC messages addressed to it.

mod common;

use std::{process::Command, time::Duration};

use common::{control_section, run_scapy, traffic_lock, unique, veth, Netns, Proc, TempFile};
use serde_json::Value;

struct Incast {
    gens: Vec<(Netns, String)>,
    _lan: Netns,
    dut: Netns,
    sink: Netns,
    d0: String,
    d1: String,
    s: String,
}

fn incast() -> Incast {
    incast_learning(true)
}

/// [`incast`], its bridge learning where the generators are when `learning`; without, it
/// floods every frame for one of them to all three, as a bridge does for a host it has not
/// learnt (yet, or any more).
fn incast_learning(learning: bool) -> Incast {
    let (lan, dut, sink) = (Netns::new("ln"), Netns::new("ld"), Netns::new("ls"));
    let br = unique("br");
    let sh = |args: &[&str]| {
        let out = Command::new("ip")
            .args(["-n", &lan.name])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh(&["link", "add", &br, "type", "bridge"]);
    sh(&["link", "set", &br, "up"]);
    let mut gens = Vec::new();
    for _ in 0..3 {
        let ns = Netns::new("lg");
        let (g, l) = (unique("g"), unique("l"));
        veth(&ns, &g, &lan, &l);
        sh(&["link", "set", &l, "master", &br]);
        if !learning {
            sh(&["link", "set", &l, "type", "bridge_slave", "learning", "off"]);
        }
        gens.push((ns, g));
    }
    let (d0, l0, d1, s) = (unique("d"), unique("l"), unique("d"), unique("s"));
    veth(&dut, &d0, &lan, &l0);
    sh(&["link", "set", &l0, "master", &br]);
    // The bridge hands the 802.1Q tag to l0 as skb metadata, which XDP on d0 never sees:
    // keep it in the frame (see README, "Known limitations").
    let out = Command::new("ip")
        .args([
            "netns", "exec", &lan.name, "ethtool", "-K", &l0, "txvlan", "off",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    veth(&dut, &d1, &sink, &s);
    Incast {
        gens,
        _lan: lan,
        dut,
        sink,
        d0,
        d1,
        s,
    }
}

fn run(w: &Incast, prio3: &str) -> (Vec<Value>, Value, Value) {
    run_with(w, prio3, "")
}

fn run_with(w: &Incast, prio3: &str, extra: &str) -> (Vec<Value>, Value, Value) {
    run_at(w, prio3, extra, Rates::INCAST)
}

/// What each generator offers and what the egress toward the sink drains.
#[derive(Clone, Copy)]
struct Rates {
    gen: &'static str,
    egress: &'static str,
}

impl Rates {
    /// Three times 500 Mbit/s into 1 Gbit/s.
    const INCAST: Rates = Rates {
        gen: "500Mbit",
        egress: "1Gbit",
    };
}

fn run_at(w: &Incast, prio3: &str, extra: &str, rates: Rates) -> (Vec<Value>, Value, Value) {
    let (control, _socket) = control_section();
    // Three generators must overload the 1 Gbit/s egress on two vCPUs: a real-time worker
    // would take the CPU they need to (0.95 Gbit/s offered in all, measured), so the worker
    // shares the CPUs as an ordinary process here.
    let cfg = TempFile::new(
        "cfg",
        &format!(
            "[daemon]\nrealtime = \"off\"\n[[port]]\niface = \"{}\"\nspeed = \"10Gbit\"\n[[port]]\niface = \"{}\"\nspeed = \"{}\"\n[priority.3]\n{prio3}\n{control}{extra}",
            w.d0, w.d1, rates.egress
        ),
    );
    let sink = common::start_sink(&w.sink, &w.s);
    let mut dut = Proc::spawn(&w.dut, &["run", "--config", cfg.path(), "--json"]);
    dut.wait_ready(Duration::from_secs(10));
    let d0_mac = w
        .dut
        .run(&["cat", &format!("/sys/class/net/{}/address", w.d0)]);
    let gens: Vec<Proc> = w
        .gens
        .iter()
        .enumerate()
        .map(|(i, (ns, g))| {
            let (ip, flow) = (format!("198.18.0.{}", 10 + i), i.to_string());
            Proc::spawn(
                ns,
                &[
                    "gen",
                    "--iface",
                    g,
                    "--rate",
                    rates.gen,
                    "--size",
                    "1000",
                    "--priority",
                    "3",
                    "--duration",
                    "2s",
                    "--dst-mac",
                    d0_mac.trim(),
                    "--src-ip",
                    &ip,
                    "--first-flow",
                    &flow,
                    "--json",
                ],
            )
        })
        .collect();
    let gens: Vec<Value> = gens
        .into_iter()
        .map(|g| g.json(Duration::from_secs(20)))
        .collect();
    let sink = sink.json(Duration::from_secs(20));
    dut.interrupt();
    let dut = dut.json(Duration::from_secs(10));
    (gens, sink, dut)
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

const SFC: &str = "mode = \"sfc\"\nsfc_threshold = \"32KiB\"\nlimit = \"2MiB\"";

#[test]
fn sfc_alone_makes_incast_lossless() {
    let _serial = traffic_lock();
    let w = incast();
    let (gens, sink, dut) = run(&w, SFC);
    assert_lossless(&gens, &sink, &dut);
}

/// The same incast with SFC messages sent over UDP/IPv4 to each source's address.
#[test]
fn sfc_over_udp_makes_incast_lossless() {
    let _serial = traffic_lock();
    let w = incast();
    let udp = "\n[sfc]\ntransport = \"udp\"\nsource_ip = \"198.18.0.254\"\n";
    let (gens, sink, dut) = run_with(&w, SFC, udp);
    assert_lossless(&gens, &sink, &dut);
}

/// An incast with flow-scope SFC: each message names the offending 5-tuple, and each
/// generator must pause the flow named. Slower than the class-scope incast so that the
/// congestion point's flow messages are what holds the sources: a daemon worker short of CPU
/// stalls, and its stall guard's class-scope messages alone held three 500 Mbit/s sources
/// (hiding a generator that obeyed no flow pause); here one that ignores them overflows the
/// SFC buffer (17,722 `headroom_overflow` drops, measured).
#[test]
fn flow_scope_sfc_makes_incast_lossless() {
    let _serial = traffic_lock();
    let w = incast();
    let slow = Rates {
        gen: "100Mbit",
        egress: "100Mbit",
    };
    let (gens, sink, dut) = run_at(&w, SFC, "\n[sfc]\nscope = \"flow\"\n", slow);
    assert_lossless(&gens, &sink, &dut);
    for g in &gens {
        assert!(n(&g["sfc_flow_paused_ns"]) > 0, "no flow paused: {g}");
    }
}

/// The SFC incast through a bridge that floods each message to all three generators: each
/// counts the messages for the others apart (`sfcm_not_ours`) and pauses for its own alone.
/// Before, each took every message as its own, one source's congestion pausing all three.
#[test]
fn each_source_obeys_its_own_sfc_messages_through_a_flooding_bridge() {
    let _serial = traffic_lock();
    let w = incast_learning(false);
    let (gens, sink, dut) = run(&w, SFC);
    assert_lossless(&gens, &sink, &dut);
    for g in &gens {
        assert!(n(&g["sfcm_not_ours"]) > 0, "not flooded: {g}");
    }
}

/// SFC messages for other sources reach a generator (a bridge floods them while it has not
/// learnt where their source is), asking for 100 ms: at layer 2 to another MAC, over UDP to
/// its MAC but another source's address. It counts them apart and goes on; the one
/// addressed to it pauses it for the 1 ms it says. Before, it paused for 100 ms.
#[test]
fn a_generator_obeys_only_sfc_messages_addressed_to_it() {
    // It pushes traffic and runs scapy: not beside another traffic test's lossless claim.
    let _serial = traffic_lock();
    let (gn, pn) = (Netns::new("lg"), Netns::new("lp"));
    let (g, p) = (unique("g"), unique("p"));
    veth(&gn, &g, &pn, &p);
    let mut gen = Proc::spawn(
        &gn,
        &[
            "gen",
            "--iface",
            &g,
            "--rate",
            "100Mbit",
            "--size",
            "1000",
            "--priority",
            "3",
            "--duration",
            "30s",
            "--src-ip",
            "198.18.0.10",
            "--json",
        ],
    );
    gen.wait_ready(Duration::from_secs(10));
    let mac = gn.run(&["cat", &format!("/sys/class/net/{g}/address")]);
    let mac = mac.trim();
    let script = format!(
        r#"
from scapy.all import Ether, IP, UDP, Raw, sendp
import struct
# SFCM body: version 1, type 1, class scope, priority 3, the pause interval in ns.
def body(pause_ns):
    return struct.pack("!BBBBIQQQQ6sBB4s4sHH4s", 1, 1, 0, 3, 7, pause_ns, 0, 1 << 20, 10**9,
                       b"\x02\x00\x00\x00\x00\x09", 0, 0, b"\0" * 4, b"\0" * 4, 0, 0, b"\0" * 4)
other_mac = Ether(dst="02:00:00:00:00:01", type=0x88b5) / Raw(body(100_000_000))
other_ip = (Ether(dst="{mac}") / IP(src="198.18.0.254", dst="198.18.0.11", flags="DF")
            / UDP(sport=34997, dport=34997) / Raw(body(100_000_000)))
ours = Ether(dst="{mac}", type=0x88b5) / Raw(body(1_000_000))
sendp([other_mac] * 5 + [other_ip] * 5 + [ours], iface="{p}", verbose=False)
"#
    );
    run_scapy(&pn, &script);
    std::thread::sleep(Duration::from_millis(200));
    gen.interrupt();
    let g = gen.json(Duration::from_secs(10));
    assert_eq!(n(&g["sfc_paused_ns"]), 1_000_000, "{g}");
    assert_eq!(n(&g["sfcm_not_ours"]), 10, "{g}");
    assert_eq!(n(&g["sfcm_rx"]), 1, "{g}");
    assert_eq!(n(&g["other_rx"]), 0, "{g}");
}

fn assert_lossless(gens: &[Value], sink: &Value, dut: &Value) {
    let sent: u64 = gens.iter().map(|g| n(&g["frames_sent"])).sum();
    // Every sequence number of every source delivered once.
    assert_eq!(
        n(&sink["unique"]),
        sent,
        "{}\nsink {sink}\ndaemon {dut}",
        common::where_frames_went(dut)
    );
    assert_eq!(n(&sink["received"]), sent);
    assert_eq!(n(&sink["lost"]), 0);
    assert_eq!(n(&sink["per_priority"][3]), sent);
    for (i, g) in gens.iter().enumerate() {
        let flow = &sink["flows"][i];
        assert_eq!(
            n(&g["other_rx"]),
            0,
            "a source could not parse its SFCMs: {g}"
        );
        assert_eq!(flow["flow"], i, "{sink}");
        assert_eq!(flow["next_seq"], g["frames_sent"], "source {i}: {flow}");
    }
    for g in gens {
        assert!(n(&g["sfcm_rx"]) > 0, "a source never got an SFCM: {g}");
        // Paused by class or by flow, as the messages' scope says.
        let paused = n(&g["sfc_paused_ns"]) + g["sfc_flow_paused_ns"].as_u64().unwrap_or(0);
        assert!(paused > 0, "a source never paused: {g}");
        assert_eq!(n(&g["pfc_rx"]), 0, "PFC cannot cross the bridge");
    }
    let d0 = &dut["ports"][0];
    assert!(n(&d0["sfcm_tx"][3]) > 0, "{d0}");
    // Each message is addressed to one source: the others may hear it too (flooded by the
    // bridge), but count it apart and do not obey it.
    let heard: u64 = gens.iter().map(|g| n(&g["sfcm_rx"])).sum();
    assert!(
        heard <= n(&d0["sfcm_tx"][3]),
        "the sources took {heard} messages as theirs: {gens:?}\n{d0}"
    );
    for (reason, count) in d0["drops"].as_object().unwrap() {
        assert_eq!(n(count), 0, "drops {reason}: {d0}");
    }
    // SFC held the buffer, not the pool's spare frames (a source that ignores its messages
    // would fill both).
    assert_eq!(common::borrowed(dut), 0, "kept beyond the buffer: {d0}");
    // The queue really was congested.
    assert!(n(&dut["ports"][1]["queue_peak_bytes"][3]) > 32 * 1024);
}

#[test]
fn the_same_incast_without_sfc_loses_frames() {
    let _serial = traffic_lock();
    let w = incast();
    let (gens, sink, dut) = run(&w, "mode = \"lossy\"\nlimit = \"2MiB\"");
    let sent: u64 = gens.iter().map(|g| n(&g["frames_sent"])).sum();
    let received = n(&sink["received"]);
    assert!(
        received < sent * 95 / 100,
        "expected loss: sent {sent}, received {received}; generators: {gens:?}"
    );
    assert_eq!(n(&dut["ports"][0]["drops"]["tail_drop"]), sent - received);
    assert!(gens.iter().all(|g| n(&g["sfcm_rx"]) == 0));
}
