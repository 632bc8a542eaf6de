//! The seed corpus of the fuzz targets in `fuzz/` (one folder per target under `fuzz/corpus/`).
//!
//! `seed-*` files are written by the crate's own emit functions here; `capture-*` files are
//! frames captured from other implementations (lldpd, ptp4l, a switch). This test fails when
//! a committed seed differs from what the codecs emit now, when a seed is missing or stale, or
//! when any seed or capture no longer parses, so the corpus follows the wire formats. After a
//! deliberate format change, rewrite the seeds with
//! `LOSSLESS_WRITE_SEEDS=1 cargo test --release --test fuzz_corpus`.
//! No root needed.

use std::{collections::BTreeMap, fs, path::PathBuf};

use lossless::config::Plan;
use lossless::wire::lldp::{
    AdaptiveCapability, LldpId, Lldpdu, OrgTlvId, PfcConfig, CHASSIS_SUBTYPE_MAC,
    PORT_SUBTYPE_IFNAME,
};
use lossless::wire::ptp::{PdelayBody, PdelayMessage, PortIdentity, Ptp, PtpTimestamp};
use lossless::wire::sfcm::{Ipv4Flow, SfcScope, Sfcm, SfcmFrame, SfcmUdpFrame, SFCM_UDP_PORT};
use lossless::wire::{
    CreditEntry, CreditOp, CreditUpdate, EtherType, EthernetRepr, MacAddr, MacControl, TestFrame,
    TestFrameView, VlanTag,
};

const A: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
const B: MacAddr = MacAddr([0x02, 0x00, 0x00, 0x00, 0x00, 0x02]);

fn tag(pcp: u8, vid: u16) -> Option<VlanTag> {
    Some(VlanTag {
        pcp,
        dei: false,
        vid,
    })
}

fn eth(vlan: Option<VlanTag>, ethertype: u16) -> EthernetRepr {
    EthernetRepr {
        dst: B,
        src: A,
        vlan,
        ethertype,
    }
}

/// Emits with `f` into a large buffer and keeps the written bytes.
fn emitted(f: impl FnOnce(&mut [u8]) -> usize) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let n = f(&mut buf);
    buf.truncate(n);
    buf
}

fn test_frame(vlan: Option<VlanTag>, len: usize, flow: u32, seq: u64) -> Vec<u8> {
    let f = TestFrame {
        eth: eth(vlan, EtherType::IPV4),
        src_ip: [10, 0, 0, 1],
        dst_ip: [10, 0, 0, 2],
        dscp: 26,
        src_port: 40000,
        dst_port: 48879,
        flow,
        seq,
        tx_ns: 1_234_567_890,
        len,
    };
    emitted(|b| f.emit(b).unwrap())
}

fn sfcm(scope: SfcScope, flow: Option<Ipv4Flow>) -> Sfcm {
    Sfcm {
        priority: 3,
        scope,
        seq: 42,
        pause_ns: 250_000,
        sent_ns: 9_876_543_210,
        queue_bytes: 96 * 1024,
        drain_bps: 1_000_000_000,
        src_mac: A,
        flow,
    }
}

const FLOW: Ipv4Flow = Ipv4Flow {
    src_ip: [10, 0, 0, 1],
    dst_ip: [10, 0, 0, 2],
    protocol: 17,
    src_port: 40000,
    dst_port: 48879,
};

fn sfcm_udp(vlan: Option<VlanTag>, msg: Sfcm) -> SfcmUdpFrame {
    SfcmUdpFrame {
        eth: eth(vlan, EtherType::IPV4),
        src_ip: [192, 0, 2, 1],
        dst_ip: [10, 0, 0, 1],
        dscp: 48,
        ttl: 64,
        src_port: SFCM_UDP_PORT,
        dst_port: SFCM_UDP_PORT,
        msg,
    }
}

/// A UDP SFCM whose IPv4 header carries 4 octets of options (NOP NOP NOP EOL) and whose UDP
/// checksum is 0 ("not computed"): both accepted on receipt, never emitted.
fn sfcm_udp_with_options() -> Vec<u8> {
    let plain = emitted(|b| sfcm_udp(None, sfcm(SfcScope::Class, None)).emit(b).unwrap());
    let mut f = plain[..34].to_vec();
    f.extend_from_slice(&[1, 1, 1, 0]);
    f.extend_from_slice(&plain[34..]);
    f[14] = 0x46; // IHL 6
    let total = u16::from_be_bytes([f[16], f[17]]) + 4;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[24..26].fill(0);
    let csum = lossless::wire::ipv4::ipv4_checksum(&f[14..38]);
    f[24..26].copy_from_slice(&csum.to_be_bytes());
    f[38 + 6..38 + 8].fill(0); // UDP checksum
    f
}

fn credit(entries: &[(CreditOp, u16, u8, u16)]) -> CreditUpdate {
    let mut u = CreditUpdate::new();
    for &(op, fctbs, vl, fccl) in entries {
        u.push(CreditEntry {
            op,
            fctbs,
            vl,
            fccl,
        })
        .unwrap();
    }
    u
}

fn pdelay(body: PdelayBody, flags: u16, seq: u16) -> PdelayMessage {
    PdelayMessage {
        transport_specific: 0,
        minor_version: 0,
        domain: 0,
        flags,
        correction: 0,
        source: PortIdentity::from_mac(A, 1),
        sequence_id: seq,
        log_interval: 0x7f,
        body,
    }
}

fn lldp(full: bool) -> Lldpdu {
    Lldpdu {
        chassis_id: LldpId::mac(CHASSIS_SUBTYPE_MAC, A),
        port_id: LldpId::name(PORT_SUBTYPE_IFNAME, "eth7"),
        ttl: if full { 120 } else { 0 },
        system_name: full.then(|| "lossless".to_string()),
        pfc: full.then_some(PfcConfig {
            willing: false,
            mbc: false,
            capability: 8,
            enabled: 0x18,
        }),
        adaptive: full.then_some(AdaptiveCapability {
            responds: true,
            initiates: true,
            adaptive_headroom: true,
            round_trip_ns: 123_456,
        }),
    }
}

const CONFIG_QUICK_START: &str = r#"[[port]]
iface = "d0"
speed = "10Gbit"
[[port]]
iface = "d1"
speed = "1Gbit"
[priority.3]
mode = "pfc"
xoff = "64KiB"
xon = "32KiB"
headroom = "1MiB"
"#;

const CONFIG_FULL: &str = r#"[daemon]
workers = 2
cores = [0, 1]
xdp_mode = "native"
backend = "af-xdp"
frames = 32768
busy_poll = false
stats_interval_s = 5
log = "info,lossless=debug"
realtime = "on"
realtime_priority = 40
stall_guard = "500us"

[metrics]
listen = "[::1]:9464"

[watchdog]
enabled = true
detection = "200ms"
restoration = "1.5s"
action = "forward"

[sfc]
transport = "udp"
udp_port = 34997
source_ip = "192.0.2.1"
reserve_percent = 10
max_pause = "10ms"
filter = true
scope = "flow"
accept_from = ["02:00:00:00:00:01"]
max_rate = 5000

[control]
socket = "/run/lossless/lossless.sock"

[linkup]
enabled = true
samples = 16
sample_interval = "10ms"
interval = "60s"
max_frame = 9216
peer_response = "1ms"

[credit]
update_interval = "2ms"
resync_interval = "4ms"
timeout = "100ms"

[headroom]
adaptive = true
min_headroom = "64KiB"
margin = 2.5
half_life = "5min"
quiet = "2ms"
xoff_time = "800us"
borrow = false

[[port]]
iface = "eth0"
speed = "25G"
trust = "dscp"
pause_quanta = 65535
mtu = 9000

[[port]]
iface = "eth1"
speed = "100Gbit"
pause_quanta = 32768
credit = false

[priority.0]
limit = "1MB"

[priority.3]
mode = "pfc+sfc"
xoff = "128KiB"
xon = 65536
headroom = "256KiB"
sfc_threshold = "32KiB"

[priority.5]
mode = "sfc"
sfc_threshold = 16384
limit = "2MiB"
"#;

const CONFIG_MINIMAL_OFF: &str = r#"[daemon]
realtime = "off"
stall_guard = "off"
[headroom]
adaptive = false
[metrics]
listen = ""
[control]
socket = ""
[watchdog]
enabled = false
[linkup]
enabled = false
[[port]]
iface = "a"
speed = "100Mbit"
[[port]]
iface = "b"
speed = "100Mbit"
[priority.7]
mode = "lossy"
limit = 3000
"#;

/// Every generated seed: (target, file name) -> bytes.
fn seeds() -> BTreeMap<(&'static str, &'static str), Vec<u8>> {
    let mut s = BTreeMap::new();
    let mut add = |t, n, b: Vec<u8>| assert!(s.insert((t, n), b).is_none());

    let ipv4_hdr = emitted(|b| eth(None, EtherType::IPV4).emit(b).unwrap());
    add("ethernet", "seed-untagged-ipv4", ipv4_hdr);
    add(
        "ethernet",
        "seed-8021q-pcp3-vid10",
        test_frame(tag(3, 10), 70, 1, 0),
    );
    let mut qinq = emitted(|b| eth(tag(5, 100), EtherType::LLDP).emit(b).unwrap());
    qinq[12..14].copy_from_slice(&EtherType::QINQ.to_be_bytes());
    add("ethernet", "seed-8021ad-pcp5-vid100", qinq);

    add(
        "mac_control",
        "seed-pause-max",
        emitted(|b| {
            MacControl::Pause { quanta: 0xffff }
                .emit_frame(A, b)
                .unwrap()
        }),
    );
    add(
        "mac_control",
        "seed-pause-resume",
        emitted(|b| MacControl::Pause { quanta: 0 }.emit_frame(A, b).unwrap()),
    );
    let pfc = MacControl::Pfc {
        enable: 0xff,
        quanta: [1, 2, 3, 0xffff, 0x8000, 0, 7, 65534],
    };
    add(
        "mac_control",
        "seed-pfc-all-priorities",
        emitted(|b| pfc.emit_frame(A, b).unwrap()),
    );

    let ours = OrgTlvId::default();
    add(
        "lldp",
        "seed-ours-every-tlv",
        emitted(|b| lldp(true).emit_frame(A, ours, b).unwrap()),
    );
    add(
        "lldp",
        "seed-shutdown-ttl0",
        emitted(|b| lldp(false).emit_frame(A, ours, b).unwrap()),
    );

    let t = PtpTimestamp {
        seconds: 1_700_000_000,
        nanoseconds: 123_456_789,
    };
    let requesting = PortIdentity::from_mac(B, 1);
    for (name, body, flags) in [
        ("seed-pdelay-req", PdelayBody::Req { origin: t }, 0),
        (
            "seed-pdelay-resp",
            PdelayBody::Resp {
                request_receipt: t,
                requesting,
            },
            0x0200,
        ),
        (
            "seed-pdelay-resp-follow-up",
            PdelayBody::RespFollowUp {
                response_origin: t,
                requesting,
            },
            0,
        ),
    ] {
        add(
            "ptp",
            name,
            emitted(|b| pdelay(body, flags, 7).emit_frame(A, b).unwrap()),
        );
    }
    // A Sync (message type 0, 44 octets): well formed, not a peer-delay message.
    let mut sync = emitted(|b| {
        pdelay(PdelayBody::Req { origin: t }, 0, 9)
            .emit_frame(A, b)
            .unwrap()
    });
    sync[14] = 0x00;
    sync[16..18].copy_from_slice(&44u16.to_be_bytes());
    sync.truncate(14 + 44);
    add("ptp", "seed-sync-not-ours", sync);

    let class = SfcmFrame {
        eth: eth(None, EtherType::LOSSLESS),
        msg: sfcm(SfcScope::Class, None),
    };
    let flow = SfcmFrame {
        eth: eth(tag(3, 0), EtherType::LOSSLESS),
        msg: sfcm(SfcScope::Flow, Some(FLOW)),
    };
    add("sfcm_l2", "seed-class", emitted(|b| class.emit(b).unwrap()));
    add(
        "sfcm_l2",
        "seed-flow-tagged",
        emitted(|b| flow.emit(b).unwrap()),
    );
    let udp_class = sfcm_udp(None, sfcm(SfcScope::Class, None));
    let udp_flow = sfcm_udp(tag(6, 20), sfcm(SfcScope::Flow, Some(FLOW)));
    add(
        "sfcm_udp",
        "seed-class",
        emitted(|b| udp_class.emit(b).unwrap()),
    );
    add(
        "sfcm_udp",
        "seed-flow-tagged",
        emitted(|b| udp_flow.emit(b).unwrap()),
    );
    add("sfcm_udp", "seed-ipv4-options", sfcm_udp_with_options());

    let one = credit(&[(CreditOp::Normal, 0x123, 3, 0x456)]);
    let init = credit(&[
        (CreditOp::Init, 0xfff, 5, 0),
        (CreditOp::InitAck, 0, 4, 0xfff),
    ]);
    let all: Vec<_> = (0..16u8)
        .map(|vl| {
            (
                CreditOp::Normal,
                u16::from(vl) * 256,
                vl,
                4095 - u16::from(vl),
            )
        })
        .collect();
    let all = credit(&all);
    add(
        "credit",
        "seed-one-lane",
        emitted(|b| one.emit_frame(B, A, b).unwrap()),
    );
    add(
        "credit",
        "seed-init-initack",
        emitted(|b| init.emit_frame(B, A, b).unwrap()),
    );
    add(
        "credit",
        "seed-sixteen-lanes",
        emitted(|b| all.emit_frame(B, A, b).unwrap()),
    );

    add(
        "test_traffic",
        "seed-min-tagged",
        test_frame(tag(3, 0), 70, 7, 0),
    );
    add(
        "test_traffic",
        "seed-untagged-128",
        test_frame(None, 128, 1, 1 << 40),
    );
    add(
        "test_traffic",
        "seed-tagged-256",
        test_frame(tag(7, 4095), 256, u32::MAX, 5),
    );

    add("config", "seed-quick-start.toml", CONFIG_QUICK_START.into());
    add("config", "seed-every-section.toml", CONFIG_FULL.into());
    add(
        "config",
        "seed-everything-off.toml",
        CONFIG_MINIMAL_OFF.into(),
    );
    s
}

/// The parser the fuzz target `target` starts with must accept `bytes`.
fn check_parses(target: &str, name: &str, bytes: &[u8]) {
    let ok = match target {
        "ethernet" => EthernetRepr::parse(bytes).is_ok(),
        "mac_control" => MacControl::parse_frame(bytes).is_ok(),
        "lldp" => Lldpdu::parse_frame(bytes, OrgTlvId::default()).is_ok(),
        "ptp" => Ptp::parse_frame(bytes).is_ok(),
        "sfcm_l2" => SfcmFrame::parse(bytes).is_ok(),
        "sfcm_udp" => SfcmUdpFrame::parse(bytes, SFCM_UDP_PORT).is_ok(),
        "credit" => CreditUpdate::parse_frame(bytes).is_ok(),
        "test_traffic" => TestFrameView::parse(bytes).is_ok(),
        "config" => {
            let text = std::str::from_utf8(bytes).unwrap();
            Plan::parse(text, name).unwrap_or_else(|e| panic!("{e}"));
            true
        }
        other => panic!("fuzz/corpus/{other}: no such fuzz target"),
    };
    assert!(ok, "fuzz/corpus/{target}/{name} does not parse");
}

#[test]
fn fuzz_seed_corpus_is_current() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let write = std::env::var_os("LOSSLESS_WRITE_SEEDS").is_some();
    let seeds = seeds();
    for ((target, name), bytes) in &seeds {
        check_parses(target, name, bytes);
        let path = root.join(target).join(name);
        if write {
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, bytes).unwrap();
        } else {
            let on_disk = fs::read(&path).unwrap_or_default();
            assert!(
                on_disk == *bytes,
                "{} is missing or out of date; rewrite the seeds with \
                 LOSSLESS_WRITE_SEEDS=1 cargo test --release --test fuzz_corpus",
                path.display()
            );
        }
    }
    // Every file in the corpus (generated seeds and captures) parses; no stale seed is left.
    for dir in fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap();
        let target = dir.file_name().into_string().unwrap();
        for f in fs::read_dir(dir.path()).unwrap() {
            let f = f.unwrap();
            let name = f.file_name().into_string().unwrap();
            if name.starts_with("seed-") && !seeds.keys().any(|k| k.0 == target && k.1 == name) {
                if write {
                    fs::remove_file(f.path()).unwrap();
                    continue;
                }
                panic!("{}: stale seed (no longer generated)", f.path().display());
            }
            check_parses(&target, &name, &fs::read(f.path()).unwrap());
        }
    }
}
