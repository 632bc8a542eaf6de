//! The device-bound XDP program and the XDP RX metadata kfuncs, on veth (issue 16 item 2).
//!
//! The sender's frames get their VLAN tag (VID 10, PCP 5) from a tc egress program
//! (`tests/fixtures/vlan_push.bpf.c`, `bpf_skb_vlan_push`): the kernel keeps it as skb
//! metadata and the sender's veth, with tx-vlan offload on, hands it over that way, as a VLAN
//! device over an offloading NIC would (this kernel has no 8021q module to show that with).
//! The daemon's XDP program never sees the tag in the frame's bytes. The device-bound
//! program reads it with `bpf_xdp_metadata_rx_vlan_tag`, classifies the frame to priority 5
//! and puts the tag back, so the worker counts priority 5 too and the frame leaves the far
//! port tagged. A veth has no RX hardware stamping for the daemon to turn on (nor a PHC), so
//! the program never asks `bpf_xdp_metadata_rx_timestamp`: RX stamps are XDP ones and every
//! report says so.
//!
//! A port with a lossless priority has every frame counted and stamped by the program; one
//! without keeps no counters and stamps one data frame in 64, which the worker's RX lag shows.
mod common;

use std::time::Duration;

use common::*;

const SENT: u64 = 200;

/// Priority 5, the tag's, lossless: the program counts and stamps every frame.
const PFC_5: &str = "[priority.5]\nmode = \"pfc\"\nxoff = \"64KiB\"\nxon = \"32KiB\"";

#[test]
fn vlan_tag_held_as_metadata_classifies_and_stays() {
    let _lock = traffic_lock();
    let dut = Dut::new(
        "md",
        &format!("[metrics]\nlisten = \"127.0.0.1:9464\"\n{PFC_5}"),
    );
    let peer = &dut.peer;
    let (p0, p1) = (
        // Dut names the peer ends p<pid><n> right after d0 and d1.
        peer_of(&dut, &dut.d0),
        peer_of(&dut, &dut.d1),
    );
    // The sender: p0, tagging in tc egress; the tag stays metadata (tx-vlan offload on).
    let obj = TempFile::new("vlanpush", "");
    sh(&[
        "clang",
        "-O2",
        "-target",
        "bpf",
        &format!("-I/usr/include/{}-linux-gnu", std::env::consts::ARCH),
        "-c",
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/vlan_push.bpf.c"
        ),
        "-o",
        obj.path(),
    ]);
    sh(&[
        "ip", "netns", "exec", &peer.name, "tc", "qdisc", "add", "dev", &p0, "clsact",
    ]);
    sh(&[
        "ip",
        "netns",
        "exec",
        &peer.name,
        "tc",
        "filter",
        "add",
        "dev",
        &p0,
        "egress",
        "bpf",
        "da",
        "obj",
        obj.path(),
        "sec",
        "tc",
    ]);
    peer.run(&["ethtool", "-K", &p0, "txvlan", "on"]);
    let features = peer.run(&["ethtool", "-k", &p0]);
    assert!(
        features.contains("tx-vlan-offload: on"),
        "tx-vlan offload not on: {features}"
    );
    let mut d = dut.start(&[]);
    d.wait_ready(Duration::from_secs(20));
    let log = d.stderr();
    assert!(
        log.contains("device_bound=true"),
        "the device-bound program did not attach on veth:\n{log}"
    );
    // The far side: what leaves d1 arrives at p1 (the tag in its bytes, as AF_XDP sends them).
    let pcap = TempFile::new("mdpcap", "");
    let tshark = capture_matching(peer, &p1, "udp port 7777", pcap.path(), SENT as u32);

    let st = status_of(&dut.socket);
    let port0 = &st["ports"][0];
    assert_eq!(port0["time_stamping"]["rx"], "xdp", "{port0}");

    send_udp_7777(peer, &p0, SENT);
    let tshark = tshark.wait_with_output().expect("tshark ran");
    assert!(tshark.status.success(), "{tshark:?}");
    let (_, metrics) = http_get(&dut.ns, "127.0.0.1:9464", "/metrics");
    d.interrupt();
    let (report, log) = d.json_and_log(Duration::from_secs(10));

    // The program took the tag from the metadata for every frame ...
    let meta_line = log
        .lines()
        .find(|l| l.contains("XDP RX metadata") && l.contains(dut.d0.as_str()))
        .unwrap_or_else(|| panic!("no XDP RX metadata line for {}:\n{log}", dut.d0));
    assert_eq!(field(meta_line, "meta_vlan"), SENT, "{meta_line}");
    // ... and, on a veth, never asked the driver for a hardware stamp (it would give none:
    // veth_xdp_rx_timestamp has only an skb's), so every frame kept its XDP stamp.
    for asked in ["hw_stamps", "stamp_zero", "stamp_errors"] {
        assert_eq!(field(meta_line, asked), 0, "{meta_line}");
    }
    println!("{meta_line}");

    // The worker classified them as the program did: priority 5, none on 0.
    let r0 = report_port(&report, &dut.d0);
    assert_eq!(r0["rx_data_frames"][5].as_u64(), Some(SENT), "{r0}");
    assert_eq!(r0["rx_data_frames"][0].as_u64(), Some(0), "{r0}");
    let r1 = report_port(&report, &dut.d1);
    assert_eq!(r1["tx_data_frames"][5].as_u64(), Some(SENT), "{r1}");

    // They left tagged: VID 10, PCP 5, in the frame's bytes.
    let rows = pcap_fields(pcap.path(), &["vlan.id", "vlan.priority", "udp.dstport"]);
    assert_eq!(rows.len() as u64, SENT, "{rows:?}");
    for r in rows {
        assert_eq!(
            r.split('\t').collect::<Vec<_>>(),
            ["10", "5", "7777"],
            "{r}"
        );
    }

    // Every report says which RX stamps were used.
    let series = format!(
        "lossless_time_stamping_info{{device=\"{}\",rx=\"xdp\",tx=\"kernel\"}}",
        dut.d0
    );
    assert_eq!(metric(&metrics, &series), 1.0, "{metrics}");
    // The program's counters are metrics too (scraped once the capture had every frame).
    let xdp = |family: &str, label: &str| {
        metric(
            &metrics,
            &format!(
                "lossless_xdp_{family}_total{{device=\"{}\",{label}}}",
                dut.d0
            ),
        )
    };
    assert_eq!(
        xdp("rx_metadata", "result=\"vlan_tag\""),
        SENT as f64,
        "{metrics}"
    );
    assert_eq!(xdp("rx_metadata", "result=\"hw_stamp\""), 0.0, "{metrics}");
    assert!(
        xdp("frames", "outcome=\"redirected\"") >= SENT as f64,
        "{metrics}"
    );
    assert_eq!(
        xdp("frames", "outcome=\"redirect_failed\""),
        0.0,
        "{metrics}"
    );
}

/// Sends `frames` untagged priority-0 frames through a daemon configured with `extra` and
/// returns the report's entry for its ingress port.
fn forward_plain_frames(tag: &str, extra: &str, frames: u64) -> serde_json::Value {
    let dut = Dut::new(tag, extra);
    let (p0, p1) = (peer_of(&dut, &dut.d0), peer_of(&dut, &dut.d1));
    let mut d = dut.start(&[]);
    d.wait_ready(Duration::from_secs(20));
    let pcap = TempFile::new("smpcap", "");
    let tshark = capture_matching(&dut.peer, &p1, "udp port 7777", pcap.path(), frames as u32);
    send_udp_7777(&dut.peer, &p0, frames);
    let tshark = tshark.wait_with_output().expect("tshark ran");
    assert!(tshark.status.success(), "{tshark:?}");
    d.interrupt();
    let report = d.json(Duration::from_secs(10));
    let port = report_port(&report, &dut.d0).clone();
    assert_eq!(port["rx_data_frames"][0].as_u64(), Some(frames), "{port}");
    port
}

#[test]
fn stamps_are_sampled_where_no_priority_is_lossless() {
    let _lock = traffic_lock();
    const FRAMES: u64 = 640;
    // A lossless priority (5; the frames are priority 0): every frame stamped, so the worker
    // measured its lag on every frame it received.
    let full = forward_plain_frames("smf", PFC_5, FRAMES);
    let received = full["rx_frames"].as_u64().expect("rx_frames");
    assert_eq!(rx_lag_samples(&full), received, "{full}");
    // Every priority lossy: one data frame in 64 per CPU, counted from any frame the
    // program redirected (the link-up's frames too), so 10 of these 640 give or take
    // one per CPU's phase and a few control frames.
    let sampled = forward_plain_frames("sms", "", FRAMES);
    let lag = rx_lag_samples(&sampled);
    assert!(
        (FRAMES / 64 - 2..=FRAMES / 64 + 4).contains(&lag),
        "{lag} RX lag samples for {FRAMES} frames: {sampled}"
    );
}

/// Sends `frames` untagged 106-byte UDP frames to port 7777 out of `iface` (scapy).
fn send_udp_7777(ns: &Netns, iface: &str, frames: u64) {
    run_scapy(
        ns,
        &format!(
            "from scapy.all import *\n\
             f = Ether(dst='02:00:00:00:00:02')/IP(src='10.9.0.1', dst='10.9.0.2')/\
             UDP(sport=7777, dport=7777)/Raw(b'x' * 64)\n\
             sendp([f] * {frames}, iface='{iface}', verbose=False)\n"
        ),
    );
}

/// The peer end of the daemon's port `d` (its veth peer in the peer namespace).
fn peer_of(dut: &Dut, d: &str) -> String {
    let link = dut.ns.run(&["ip", "-o", "link", "show", d]);
    // "7: d123@if6: ..." names the peer's ifindex.
    let peer_idx = link
        .split_once("@if")
        .and_then(|(_, r)| r.split(':').next())
        .unwrap_or_else(|| panic!("no peer index in {link}"));
    let links = dut.peer.run(&["ip", "-o", "link"]);
    links
        .lines()
        .find(|l| l.starts_with(&format!("{peer_idx}: ")))
        .and_then(|l| l.split(": ").nth(1))
        .and_then(|n| n.split('@').next())
        .unwrap_or_else(|| panic!("no link {peer_idx} in {links}"))
        .to_string()
}

/// The number after `name=` in a log line.
fn field(line: &str, name: &str) -> u64 {
    let pat = format!("{name}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&pat))
        .and_then(|v| v.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}
