//! Harness of the cable tests: network namespaces and veth pairs that clean up on drop (even
//! on panic), processes spawned in a namespace with a wait for their "ready" line, and JSON
//! report parsing.

#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{mpsc, Arc, Mutex, MutexGuard},
    thread::JoinHandle,
    time::{Duration, Instant},
};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_lossless");

/// Serialises the traffic tests of this binary (2 vCPUs: parallel runs would skew timing).
pub fn traffic_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A name unique to this process and `tag` (keep `tag` short: interface names are ≤ 15).
pub fn unique(tag: &str) -> String {
    let n = format!("lc{}{}", std::process::id() % 100_000, tag);
    assert!(n.len() <= 15, "name {n} is too long for an interface");
    n
}

/// Runs a command, panicking with its output if it fails.
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace, deleted (with its interfaces) on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(tag: &str) -> Self {
        let name = unique(tag);
        // A leftover from a crashed run with the same pid is removed first.
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        sh(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        ns.run(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// Runs a command in the namespace and returns its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        sh(&v)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Brings `iface` up in `ns` with IPv6 off, so the kernel sends nothing on its own (no
/// router solicitations or MLD reports to disturb frame counts and seeded rules).
fn quiet_up(ns: &Netns, iface: &str) {
    ns.run(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{iface}.disable_ipv6=1"),
    ]);
    ns.run(&["ip", "link", "set", iface, "up"]);
}

/// A veth pair between two namespaces.
pub fn veth(a: &Netns, a_if: &str, b: &Netns, b_if: &str) {
    sh(&[
        "ip", "link", "add", a_if, "netns", &a.name, "type", "veth", "peer", "name", b_if, "netns",
        &b.name,
    ]);
    quiet_up(a, a_if);
    quiet_up(b, b_if);
}

/// ns A [gen] a0 — c0 [cable] c1 — b0 [sink] ns B.
pub struct Topo {
    pub a: Netns,
    pub c: Netns,
    pub b: Netns,
    pub a0: String,
    pub c0: String,
    pub c1: String,
    pub b0: String,
}

impl Topo {
    /// Builds the topology; `tag` (one or two characters) keeps tests apart.
    pub fn new(tag: &str) -> Self {
        let (a, c, b) = (
            Netns::new(&format!("{tag}A")),
            Netns::new(&format!("{tag}C")),
            Netns::new(&format!("{tag}B")),
        );
        let t = Topo {
            a0: unique(&format!("{tag}a0")),
            c0: unique(&format!("{tag}c0")),
            c1: unique(&format!("{tag}c1")),
            b0: unique(&format!("{tag}b0")),
            a,
            c,
            b,
        };
        veth(&t.a, &t.a0, &t.c, &t.c0);
        veth(&t.c, &t.c1, &t.b, &t.b0);
        t
    }
}

/// A process running in a namespace; killed on drop if still running.
pub struct Proc {
    child: Child,
    what: String,
    lines: Arc<Mutex<Vec<String>>>,
    line_rx: mpsc::Receiver<String>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<()>>,
}

impl Proc {
    /// Starts `program args` in `ns` (through `ip netns exec`, which execs it: same pid).
    pub fn spawn(ns: &Netns, program: &str, args: &[&str]) -> Proc {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.name, program])
            .args(args)
            .env("LOSSLESS_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {program} {args:?}: {e}"));
        let mut out = child.stdout.take().expect("piped");
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let err = child.stderr.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, line_rx) = mpsc::channel();
        let l = lines.clone();
        let stderr = std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        Proc {
            child,
            what: format!(
                "{} {}",
                program.rsplit('/').next().unwrap_or(program),
                args.join(" ")
            ),
            lines,
            line_rx,
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    /// Starts `lossless args` in `ns`.
    pub fn lossless(ns: &Netns, args: &[&str]) -> Proc {
        Self::spawn(ns, BIN, args)
    }

    /// Everything written to stderr so far.
    pub fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits for a stderr line containing `pattern`; panics (with stderr) on timeout or exit.
    pub fn wait_for(&mut self, pattern: &str, timeout: Duration) {
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self
                .line_rx
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(line) if line.contains(pattern) => return,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(st)) = self.child.try_wait() {
                        panic!(
                            "{} exited ({st}) before {pattern:?}:\n{}",
                            self.what,
                            self.stderr()
                        );
                    }
                    if left.is_zero() {
                        panic!(
                            "{} not {pattern:?} after {timeout:?}:\n{}",
                            self.what,
                            self.stderr()
                        );
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    panic!(
                        "{} closed stderr before {pattern:?}:\n{}",
                        self.what,
                        self.stderr()
                    );
                }
            }
        }
    }

    /// Waits for the "ready" log line.
    pub fn wait_ready(&mut self) {
        self.wait_for("ready", Duration::from_secs(10));
    }

    /// Sends SIGTERM.
    pub fn interrupt(&self) {
        // SAFETY: kill() on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
    }

    /// Waits for exit (killing it after `timeout`) and returns status and stdout.
    pub fn finish(mut self, timeout: Duration) -> (ExitStatus, String) {
        let end = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            if Instant::now() >= end {
                let _ = self.child.kill();
                panic!(
                    "{} did not exit within {timeout:?}:\n{}",
                    self.what,
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if let Some(h) = self.stderr.take() {
            let _ = h.join();
        }
        let out = self.stdout.take().map(|h| h.join().unwrap_or_default());
        (status, out.unwrap_or_default())
    }

    /// Waits for a successful exit and parses stdout as JSON.
    pub fn json(self, timeout: Duration) -> serde_json::Value {
        let what = self.what.clone();
        let lines = self.lines.clone();
        let (st, out) = self.finish(timeout);
        let err = lines.lock().unwrap().join("\n");
        assert!(st.success(), "{what} failed ({st}):\n{err}\n{out}");
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e}):\n{out}\n{err}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `v[path...]` as u64, panicking with the JSON if absent.
pub fn u(v: &serde_json::Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("{path:?} is not an integer in {v:#}"))
}

/// `v[path...]` as f64, panicking with the JSON if absent.
pub fn f(v: &serde_json::Value, path: &[&str]) -> f64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v:#}"))
}
