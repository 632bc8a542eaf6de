//! The systemd unit and the daemon's side of it: notify protocol, watchdog, capabilities.

mod common;

use std::{
    os::unix::net::UnixDatagram,
    process::Command,
    time::{Duration, Instant},
};

use common::{control_section, unique, veth, Netns, Proc, TempFile, BIN};

const UNIT: &str = include_str!("../systemd/lossless.service");

fn dut() -> (Netns, Netns, TempFile, common::SocketPath) {
    let (ns, peer) = (Netns::new("ly"), Netns::new("lp"));
    let (d0, d1, p0, p1) = (unique("d"), unique("d"), unique("p"), unique("p"));
    veth(&ns, &d0, &peer, &p0);
    veth(&ns, &d1, &peer, &p1);
    let (control, socket) = control_section();
    let cfg = TempFile::new(
        "cfg",
        &format!("[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n{control}"),
    );
    (ns, peer, cfg, socket)
}

/// A notification socket owned by the test.
struct NotifySocket {
    sock: UnixDatagram,
    path: std::path::PathBuf,
}

impl NotifySocket {
    fn new() -> Self {
        let path = std::env::temp_dir().join(unique("notify"));
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        NotifySocket { sock, path }
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// Messages received within `within`.
    fn collect(&self, within: Duration) -> Vec<String> {
        let end = Instant::now() + within;
        let mut out = Vec::new();
        let mut buf = [0u8; 512];
        while Instant::now() < end {
            if let Ok(n) = self.sock.recv(&mut buf) {
                out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
        out
    }
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[test]
fn unit_passes_systemd_analyze_verify() {
    let dir = std::env::temp_dir().join(unique("unit"));
    std::fs::create_dir_all(&dir).unwrap();
    let unit = dir.join("lossless.service");
    std::fs::write(&unit, UNIT.replace("/usr/local/bin/lossless", BIN)).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {err}");
    assert!(!err.contains("lossless.service:"), "unit warnings: {err}");
}

#[test]
fn notifies_ready_watchdog_and_stopping() {
    let (ns, _peer, cfg, _socket) = dut();
    let n = NotifySocket::new();
    let env = [("NOTIFY_SOCKET", n.path()), ("WATCHDOG_USEC", "200000")];
    let mut d = Proc::spawn_with(&ns, &env, &[], &["run", "--config", cfg.path()]);
    d.wait_ready(Duration::from_secs(10));
    let msgs = n.collect(Duration::from_millis(700));
    assert!(
        msgs.first().is_some_and(|m| m.starts_with("READY=1")),
        "{msgs:?}"
    );
    let pings = msgs.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!(pings >= 3, "expected a ping every 100 ms: {msgs:?}");
    d.interrupt();
    let msgs = n.collect(Duration::from_millis(500));
    assert!(msgs.iter().any(|m| m == "STOPPING=1"), "{msgs:?}");
    let (status, _) = d.finish(Duration::from_secs(10));
    assert!(status.success());
}

#[test]
fn watchdog_pings_stop_when_a_worker_is_wedged() {
    let (ns, _peer, cfg, _socket) = dut();
    let n = NotifySocket::new();
    let env = [
        ("NOTIFY_SOCKET", n.path()),
        ("WATCHDOG_USEC", "200000"),
        ("LOSSLESS_TEST_WEDGE_AFTER_MS", "300"),
    ];
    let mut d = Proc::spawn_with(&ns, &env, &[], &["run", "--config", cfg.path()]);
    d.wait_ready(Duration::from_secs(10));
    let early = n.collect(Duration::from_millis(250));
    assert!(
        early.iter().any(|m| m == "WATCHDOG=1"),
        "pings before the wedge: {early:?}"
    );
    // Past the wedge (and one watchdog period to notice it); discard what was sent meanwhile.
    let _ = n.collect(Duration::from_millis(400));
    let late = n.collect(Duration::from_millis(800));
    assert!(
        !late.iter().any(|m| m == "WATCHDOG=1"),
        "pings while wedged: {late:?}"
    );
    assert!(
        d.stderr().contains("withholding the systemd watchdog ping"),
        "{}",
        d.stderr()
    );
}

/// The daemon gets AF_XDP with exactly the unit's capability bounding set (as root).
#[test]
fn runs_on_af_xdp_with_only_the_units_capabilities() {
    let caps: Vec<String> = UNIT
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit bounds capabilities")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    let bounding = format!("--bounding-set=-all,{}", caps.join(","));
    let (ns, _peer, cfg, _socket) = dut();
    let wrapper = ["setpriv", bounding.as_str(), "--inh-caps=-all"];
    let mut d = Proc::spawn_with(
        &ns,
        &[],
        &wrapper,
        &["run", "--config", cfg.path(), "--json"],
    );
    d.wait_ready(Duration::from_secs(10));
    d.interrupt();
    let report = d.json(Duration::from_secs(10));
    assert_eq!(
        report["backend"], "af_xdp",
        "capabilities short of what AF_XDP needs"
    );
}

#[test]
fn example_config_is_valid() {
    let out = Command::new(BIN)
        .args(["check-config", "systemd/lossless.toml"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
