//! The systemd unit and the daemon's side of it: notify protocol, watchdog, capabilities.

mod common;

use std::{
    os::unix::net::UnixDatagram,
    process::Command,
    time::{Duration, Instant},
};

use common::{
    chrt, threads_named, unique, unit_capabilities_except, unit_user_capabilities, Dut,
    FrozenThread, Proc, BIN, UNIT,
};

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
    let dut = Dut::new("ly", "");
    let n = NotifySocket::new();
    let env = [("NOTIFY_SOCKET", n.path()), ("WATCHDOG_USEC", "200000")];
    let mut d = Proc::spawn_with(&dut.ns, &env, &[], &["run", "--config", dut.cfg.path()]);
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

/// The stop is bounded by the control plane's drain, not by its clients: a client that holds
/// the control socket open without asking anything is closed within the drain (1 s) and the
/// daemon exits cleanly well before a connection's own 5 s answer timeout, its socket removed.
#[test]
fn a_silent_control_client_does_not_hold_up_the_stop() {
    use std::io::Read;
    let dut = Dut::new("ly", "");
    let mut d = dut.start(&[]);
    d.wait_ready(Duration::from_secs(10));
    let mut silent = std::os::unix::net::UnixStream::connect(&*dut.socket).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let start = Instant::now();
    d.interrupt();
    let mut b = [0u8; 1];
    assert_eq!(silent.read(&mut b).unwrap(), 0, "closed by the daemon");
    let (status, _) = d.finish(Duration::from_secs(10));
    let took = start.elapsed();
    assert!(status.success());
    assert!(took < Duration::from_secs(3), "stop took {took:?}");
    assert!(!std::path::Path::new(&*dut.socket).exists());
}

#[test]
fn watchdog_pings_stop_when_a_worker_is_wedged() {
    let dut = Dut::new("ly", "");
    let n = NotifySocket::new();
    let env = [("NOTIFY_SOCKET", n.path()), ("WATCHDOG_USEC", "200000")];
    let mut d = Proc::spawn_with(&dut.ns, &env, &[], &["run", "--config", dut.cfg.path()]);
    d.wait_ready(Duration::from_secs(10));
    let early = n.collect(Duration::from_millis(250));
    assert!(
        early.iter().any(|m| m == "WATCHDOG=1"),
        "pings before the wedge: {early:?}"
    );
    // The worker stops (ptrace), the rest of the daemon runs on. One watchdog period to
    // notice it; discard what was sent meanwhile.
    let workers = threads_named(d.pid(), "lossless-w");
    assert_eq!(workers.len(), 1, "one worker thread");
    let frozen = FrozenThread::freeze(workers[0]);
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
    // Let go, the pings come back.
    drop(frozen);
    let _ = n.collect(Duration::from_millis(300));
    let again = n.collect(Duration::from_millis(500));
    assert!(
        again.iter().any(|m| m == "WATCHDOG=1"),
        "pings after the worker resumed: {again:?}"
    );
}

/// `realtime = "auto"` with a lossless priority: what makes the workers real-time.
const REALTIME_AUTO: &str = "[daemon]\nrealtime = \"auto\"\n[priority.3]\nmode = \"pfc\"";

/// The daemon gets AF_XDP, and SCHED_FIFO workers (`realtime = "auto"` at the default
/// priority, with a lossless priority), with exactly the unit's capability bounding set (as
/// root, which the unit runs as). RLIMIT_RTPRIO is 0, so the capability alone grants it, not
/// the unit's LimitRTPRIO (which the test could not raise without CAP_SYS_RESOURCE anyway).
#[test]
fn runs_on_af_xdp_and_realtime_with_only_the_units_capabilities() {
    let mut wrapper = vec!["prlimit".to_string(), "--rtprio=0".to_string()];
    wrapper.extend(unit_capabilities_except(&[]));
    let dut = Dut::new("ly", REALTIME_AUTO);
    let mut d = dut.start(&wrapper);
    d.wait_ready(Duration::from_secs(10));
    let workers = threads_named(d.pid(), "lossless-w");
    assert_eq!(workers.len(), 1, "one worker thread");
    assert_eq!(
        chrt(workers[0]),
        ("SCHED_FIFO".to_string(), 50),
        "the unit does not grant real-time workers; stderr:\n{}",
        d.stderr()
    );
    d.interrupt();
    let report = d.json(Duration::from_secs(10));
    assert_eq!(
        report["backend"], "af_xdp",
        "capabilities short of what AF_XDP needs"
    );
    assert_eq!(report["worker_threads"][0]["policy"], "SCHED_FIFO");
    assert_eq!(report["memory_locked"], true);
}

/// The unit's sandbox as systemd sets it up, in a mount namespace of the daemon's own
/// (`PrivateMounts`): `ProtectKernelTunables` (`/sys` and `/proc/sys` read-only),
/// `ProtectProc=invisible` (a `/proc` with `hidepid=invisible`), `PrivateDevices` (a `/dev`
/// with only the pseudo devices), `UMask=0077`, and `DynamicUser` with the unit's ambient
/// capabilities (run as `nobody`). The daemon must still attach XDP, open AF_XDP sockets,
/// run real-time workers, lock its memory and serve its control socket.
#[test]
fn runs_in_the_units_sandbox_as_an_unprivileged_user() {
    for (key, value) in [
        ("DynamicUser", "yes"),
        ("PrivateMounts", "yes"),
        ("PrivateDevices", "yes"),
        ("ProtectKernelTunables", "yes"),
        ("ProtectProc", "invisible"),
        ("UMask", "0077"),
    ] {
        assert!(
            UNIT.lines().any(|l| l == format!("{key}={value}")),
            "the unit sets {key}={value}: what this test emulates"
        );
    }
    let sandbox = "mount -t proc -o hidepid=invisible proc /proc \
        && mount --bind /sys /sys && mount -o remount,bind,ro /sys \
        && mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys \
        && ! touch /proc/sys/kernel/sched_rt_runtime_us 2>/dev/null \
        && mount -t tmpfs -o mode=755 tmpfs /dev \
        && mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 \
        && mknod -m 666 /dev/full c 1 7 && mknod -m 666 /dev/random c 1 8 \
        && mknod -m 666 /dev/urandom c 1 9 \
        && [ \"$(ls /dev | wc -l)\" = 5 ] \
        && umask 0077 && exec \"$@\"";
    let mut wrapper: Vec<String> = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        sandbox,
        "sh",
    ]
    .map(String::from)
    .to_vec();
    wrapper.extend(unit_user_capabilities());
    let dut = Dut::new("lp", REALTIME_AUTO);
    let mut d = dut.start(&wrapper);
    d.wait_ready(Duration::from_secs(10));
    let workers = threads_named(d.pid(), "lossless-w");
    assert_eq!(
        workers.len(),
        1,
        "one worker thread; stderr:\n{}",
        d.stderr()
    );
    let status = Command::new(BIN)
        .args(["status", "--json", "--socket", &dut.socket])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "status over the control socket: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let stderr = d.stderr();
    d.interrupt();
    let report = d.json(Duration::from_secs(10));
    assert_eq!(report["backend"], "af_xdp", "stderr:\n{stderr}");
    assert_eq!(report["worker_threads"][0]["policy"], "SCHED_FIFO");
    assert_eq!(report["memory_locked"], true);
}

/// A bad configuration fails the unit once: `run` itself exits 78, which the unit's
/// `RestartPreventExitStatus=78` excludes from `Restart=on-failure`. No `ExecStartPre` check
/// may exit first: systemd applies that exclusion to the main process only, and would retry a
/// failing pre-check until the start limit.
#[test]
fn a_bad_configuration_is_not_restarted() {
    assert!(UNIT.lines().any(|l| l == "Restart=on-failure"));
    assert!(UNIT.lines().any(|l| l == "RestartPreventExitStatus=78"));
    assert!(
        !UNIT.lines().any(|l| l.starts_with("ExecStartPre=")),
        "a pre-check's exit status is not the main process's"
    );
    let dir = std::env::temp_dir().join(unique("badcfg"));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("lossless.toml");
    std::fs::write(
        &cfg,
        "[[port]]\niface = \"x0\"\nspeed = \"1Gbit\"\n[[port]]\niface = \"x1\"\nspeed = \"1Gbit\"\n[priority.3]\nmode = \"pfc\"\nxon = \"1MiB\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["run", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(err.contains("priority.3.xon"), "names the field: {err}");
}

#[test]
fn example_config_is_valid() {
    let out = Command::new(BIN)
        .args(["check-config", "--file-only", "systemd/lossless.toml"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
