//! `lossless doctor`, `lossless selftest` and the start-up probe on veth pairs in network
//! namespaces (the machine runs tests as root).
//!
//! The doctor's facts are checked against `ethtool` and `ip` (independent readers of the same
//! kernel interfaces); the selftest is shown to fail when `lossless cable` drops PFC.

mod common;

use std::{process::Command, time::Duration};

use common::{sh, traffic_lock, unique, veth, Netns, Proc};
use serde_json::Value;

const T: Duration = Duration::from_secs(30);

/// Runs `lossless args` in `ns`; returns exit code, stdout and stderr.
fn lossless(ns: &Netns, args: &[&str]) -> (i32, String, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, common::BIN])
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run lossless");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

fn verdict<'a>(r: &'a Value, cap: &str) -> &'a Value {
    r["diagnosis"]["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["capability"] == cap)
        .unwrap_or_else(|| panic!("no verdict {cap}: {r:#}"))
}

#[test]
fn doctor_reports_veths_real_features() {
    let ns = Netns::new("D");
    let (x, y) = (unique("dx"), unique("dy"));
    veth(&ns, &x, &ns, &y);
    let (code, out, err) = lossless(&ns, &["doctor", "--iface", &x, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r = json(&out);
    let f = &r["facts"];
    assert_eq!(f["driver"]["value"]["driver"], "veth", "{r:#}");
    assert_eq!(f["link"]["value"]["kind"], "veth");
    // Native XDP, no zero-copy, from the netdev family.
    let xdp: Vec<&str> = f["xdp"]["value"]["xdp_features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(xdp.contains(&"basic"), "{xdp:?}");
    assert!(!xdp.contains(&"xsk-zerocopy"), "{xdp:?}");
    assert_eq!(verdict(&r, "native_xdp")["status"], "ok");
    assert_eq!(verdict(&r, "zero_copy")["status"], "warn");
    // No pause support: the kernel says EOPNOTSUPP, and so does ethtool.
    assert_eq!(f["pause"]["status"], "unsupported", "{r:#}");
    let eth = Command::new("ip")
        .args(["netns", "exec", &ns.name, "ethtool", "-a", &x])
        .output()
        .expect("ethtool");
    assert!(!eth.status.success(), "ethtool -a succeeded on veth?");
    assert_eq!(f["dcb_pfc"]["status"], "unsupported");
    // Speed and queues as ethtool / ip see them.
    let ethtool = sh(&["ip", "netns", "exec", &ns.name, "ethtool", &x]);
    assert!(ethtool.contains("Speed: 10000Mb/s"), "{ethtool}");
    assert_eq!(f["link_modes"]["value"]["speed_mbps"], 10000);
    let ipj = json(&sh(&[
        "ip", "netns", "exec", &ns.name, "ip", "-j", "-d", "link", "show", &x,
    ]));
    assert_eq!(
        f["link"]["value"]["rx_queues"], ipj[0]["num_rx_queues"],
        "{ipj:#}"
    );
    assert_eq!(f["link"]["value"]["mtu"], ipj[0]["mtu"]);
    let mac = ipj[0]["address"].as_str().expect("ip -j gives the address");
    assert_eq!(f["link"]["value"]["mac"], mac, "{ipj:#}");
    // Verdicts: veth carries PAUSE/PFC both ways; usable.
    assert_eq!(verdict(&r, "receive_pause_pfc")["status"], "ok");
    assert_eq!(verdict(&r, "send_pause_pfc")["status"], "ok");
    assert_eq!(r["knowledge"]["drivers"][0], "veth");
    assert_eq!(r["diagnosis"]["usable"], true);

    // Text mode names the driver and the verdicts.
    let (code, out, _) = lossless(&ns, &["doctor", "--iface", &x]);
    assert_eq!(code, 0);
    assert!(out.contains("driver veth"), "{out}");
    assert!(out.contains(&format!("MAC {mac}, ")), "{out}");
    assert!(out.contains("usable as configured: yes"), "{out}");

    // A port that is down is not usable: exit 1 and the fix.
    sh(&[
        "ip", "netns", "exec", &ns.name, "ip", "link", "set", &x, "down",
    ]);
    let (code, out, _) = lossless(&ns, &["doctor", "--iface", &x, "--json"]);
    assert_eq!(code, 1, "{out}");
    let r = json(&out);
    assert_eq!(verdict(&r, "link")["status"], "fail");
    assert_eq!(r["diagnosis"]["fixes"][0], format!("ip link set {x} up"));
    // No such interface: exit 2.
    let (code, _, err) = lossless(&ns, &["doctor", "--iface", "nosuch0"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn check_config_warns_with_the_fix() {
    let ns = Netns::new("K");
    let (x, y) = (unique("kx"), unique("ky"));
    veth(&ns, &x, &ns, &y);
    let path = std::env::temp_dir().join(format!("{}.toml", unique("kc")));
    std::fs::write(
        &path,
        format!(
            "[[port]]\niface = \"{x}\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"{y}\"\nspeed = \"10Gbit\"\n\
             [priority.3]\nmode = \"pfc\"\n"
        ),
    )
    .unwrap();
    let p = path.to_str().unwrap();
    let check = || {
        let (code, out, err) = lossless(&ns, &["check-config", p]);
        assert_eq!(code, 0, "{out}\n{err}");
        out
    };
    // x is configured at 1 Gbit/s where veth says 10: no warning, a veth's speed is nominal and
    // the configured one is what the daemon shapes to (the README's quick start does this).
    let out = check();
    assert!(!out.contains("warning: port"), "{out}");
    // `run` starts without one too.
    {
        let _l = traffic_lock();
        let mut daemon = Proc::spawn(&ns, &["run", "--config", p]);
        daemon.wait_ready(Duration::from_secs(10));
        daemon.interrupt();
        let (st, log) = daemon.finish_and_log(T);
        assert!(st.success(), "{st}");
        assert!(!log.contains("link warn"), "{log}");
    }
    let (code, out, _) = lossless(&ns, &["doctor", "--iface", &y, "--config", p, "--json"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(json(&out)["needs"]["from_config"], true);
    assert_eq!(json(&out)["needs"]["speed_bps"], 10_000_000_000u64);

    // x down: x must be brought up, and y has no carrier.
    sh(&[
        "ip", "netns", "exec", &ns.name, "ip", "link", "set", &x, "down",
    ]);
    let out = check();
    assert!(
        out.contains(&format!(
            "warning: port {x}: link FAIL: administratively down"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("fix: ip link set {x} up")), "{out}");
    assert!(
        out.contains(&format!("warning: port {y}: link FAIL: no carrier")),
        "{out}"
    );
    let (code_x, _, _) = lossless(&ns, &["doctor", "--iface", &x, "--config", p]);
    let (code_y, _, _) = lossless(&ns, &["doctor", "--iface", &y, "--config", p]);
    let _ = std::fs::remove_file(&path);
    assert_eq!((code_x, code_y), (1, 1));
}

fn classes(dir: &Value) -> Vec<(String, u64, u64)> {
    dir["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["class"].as_str().unwrap().to_string(),
                c["sent"].as_u64().unwrap(),
                c["intact"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn selftest_passes_on_a_veth_pair() {
    let _l = traffic_lock();
    let ns = Netns::new("S");
    let (x, y) = (unique("sx"), unique("sy"));
    veth(&ns, &x, &ns, &y);
    let (code, out, err) = lossless(&ns, &["selftest", "--a", &x, "--b", &y, "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r = json(&out);
    assert_eq!(r["passed"], true);
    assert_eq!(r["backend"], "af_xdp");
    for d in r["directions"].as_array().unwrap() {
        let c = classes(d);
        assert_eq!(c.len(), 6, "{d:#}");
        for (class, sent, intact) in c {
            assert_eq!((sent, intact), (3, 3), "{class}: {d:#}");
        }
        let m = &d["pdelay"]["measurement"];
        assert_eq!(m["samples"].as_array().unwrap().len(), 5, "{d:#}");
        let rt = m["median_ns"].as_i64().unwrap();
        // A veth round trip is scheduling: positive, and well under the 500 ms timeout.
        assert!(rt > 0 && rt < 100_000_000, "round trip {rt} ns");
    }
}

/// A selftest stopped by SIGINT while it waits on a port that hears nothing (peer delay
/// waits up to 17 s a direction there) releases both ports: before, the signal killed it and
/// its XDP programs stayed attached to both.
#[test]
fn an_interrupted_selftest_releases_its_ports() {
    let _l = traffic_lock();
    let (ns, peers) = (Netns::new("I"), Netns::new("Ip"));
    let (a, b) = (unique("ia"), unique("ib"));
    veth(&ns, &a, &peers, &unique("ix"));
    veth(&ns, &b, &peers, &unique("iy"));
    let mut t = Proc::spawn(&ns, &["selftest", "--a", &a, "--b", &b]);
    t.wait_ready(T);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        common::has_xdp(&ns, &a) && common::has_xdp(&ns, &b),
        "still running"
    );
    t.interrupt();
    let (status, log) = t.finish_and_log(Duration::from_secs(5));
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("interrupted"), "{log}");
    assert!(
        !common::has_xdp(&ns, &a) && !common::has_xdp(&ns, &b),
        "{log}"
    );
}

/// ns S: a0 — c0 [`lossless cable` in ns C] c1 — b0, both ends in S for the selftest.
fn through_cable(tag: &str, rules: &[&str]) -> (Netns, Netns, String, String, Proc) {
    let s = Netns::new(&format!("{tag}S"));
    let c = Netns::new(&format!("{tag}C"));
    let (a0, c0, c1, b0) = (
        unique(&format!("{tag}a0")),
        unique(&format!("{tag}c0")),
        unique(&format!("{tag}c1")),
        unique(&format!("{tag}b0")),
    );
    veth(&s, &a0, &c, &c0);
    veth(&c, &c1, &s, &b0);
    let mut args = vec!["cable", "--a", &c0, "--b", &c1, "--json"];
    args.extend_from_slice(rules);
    let mut cable = Proc::spawn(&c, &args);
    cable.wait_ready(Duration::from_secs(10));
    (s, c, a0, b0, cable)
}

#[test]
fn selftest_fails_when_the_cable_drops_pfc() {
    let _l = traffic_lock();
    let (s, _c, a0, b0, cable) = through_cable("T", &["--loss", "100%", "--loss-match", "pfc"]);
    let (code, out, err) = lossless(&s, &["selftest", "--a", &a0, "--b", &b0, "--json"]);
    // A configuration without PFC priorities does not rely on PFC: the same loss is reported
    // but passes; one with a PFC priority fails.
    let cfg = |prio: &str| {
        let path = std::env::temp_dir().join(format!("{}{prio}.toml", unique("tcf")));
        std::fs::write(
            &path,
            format!(
                "[[port]]\niface = \"{a0}\"\nspeed = \"10Gbit\"\n[[port]]\niface = \"{b0}\"\nspeed = \"10Gbit\"\n\
                 [priority.3]\nmode = \"{prio}\"\n"
            ),
        )
        .unwrap();
        let p = path.to_str().unwrap().to_string();
        let r = lossless(&s, &["selftest", "--a", &a0, "--b", &b0, "--config", &p]);
        let _ = std::fs::remove_file(&path);
        r
    };
    let (lossy_code, lossy_out, lossy_err) = cfg("lossy");
    let (pfc_code, pfc_out, _) = cfg("pfc");
    cable.interrupt();
    let cable_report = cable.json(T);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(err.contains("did not get through"), "{err}");
    let r = json(&out);
    assert_eq!(r["passed"], false);
    for d in r["directions"].as_array().unwrap() {
        for (class, sent, intact) in classes(d) {
            if class == "pfc" {
                assert_eq!((sent, intact), (3, 0), "{d:#}");
            } else {
                // Everything else crosses the cable intact, PAUSE included.
                assert_eq!((sent, intact), (3, 3), "{class}: {d:#}");
            }
        }
        assert!(d["pdelay"]["measurement"].is_object(), "{d:#}");
    }
    let missing: Vec<&str> = r["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert!(missing.iter().all(|m| m.starts_with("PFC ")), "{missing:?}");
    assert_eq!(lossy_code, 0, "{lossy_out}\n{lossy_err}");
    assert!(
        lossy_out.contains(&format!(
            "PFC {a0} -> {b0}: 0/3 intact (not needed by the configuration)"
        )),
        "{lossy_out}"
    );
    assert_eq!(pfc_code, 1, "{pfc_out}");
    assert!(pfc_out.contains("FAILED"), "{pfc_out}");
    // The cable did drop them: 3 each way per run.
    for d in cable_report["directions"].as_array().unwrap() {
        assert_eq!(d["dropped_loss"], 9, "{cable_report:#}");
    }
}

#[test]
fn selftest_counts_corrupted_frames_as_damaged() {
    let _l = traffic_lock();
    let (s, _c, a0, b0, cable) =
        through_cable("R", &["--corrupt", "100%", "--corrupt-match", "lldp"]);
    let (code, out, err) = lossless(&s, &["selftest", "--a", &a0, "--b", &b0, "--json"]);
    cable.interrupt();
    let _ = cable.finish(T);
    assert_eq!(code, 1, "{out}\n{err}");
    let r = json(&out);
    for d in r["directions"].as_array().unwrap() {
        let lldp = d["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["class"] == "lldp")
            .unwrap();
        assert_eq!(lldp["intact"], 0, "{d:#}");
        assert_eq!(lldp["damaged"], 3, "{d:#}");
    }
    assert!(
        r["missing"][0]
            .as_str()
            .unwrap()
            .ends_with("0/3 intact, 3 damaged"),
        "{r:#}"
    );
}
