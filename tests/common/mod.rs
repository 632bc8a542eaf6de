//! Shared harness of the integration tests: network namespaces and veth pairs that are
//! removed even when a test fails, and real `lossless` processes started inside them.
#![allow(dead_code)] // each test binary uses a different subset

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        atomic::{AtomicU32, Ordering},
        mpsc, Arc, Mutex, MutexGuard,
    },
    time::{Duration, Instant},
};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_lossless");

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique across parallel test processes and tests: `<tag><pid><n>`, ≤ 15 chars.
pub fn unique(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("{tag}{}{n}", std::process::id() % 100_000);
    assert!(name.len() <= 15, "interface name {name} too long");
    name
}

/// Traffic tests share two CPUs: run them one at a time within a test binary.
pub fn traffic_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs a command to completion and returns its stdout; panics with its stderr on failure.
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("run command");
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace, deleted on drop (with everything in it).
pub struct Netns {
    pub name: String,
    /// `lossless` processes ([`Proc::spawn`]) join it with `nsenter --net`, which leaves them
    /// the host's `/sys` (as a service that joins a namespace has), instead of `ip netns exec`,
    /// which mounts the namespace's own.
    pub lossless_by_nsenter: bool,
}

impl Netns {
    pub fn new(tag: &str) -> Self {
        let name = unique(tag);
        sh(&["ip", "netns", "add", &name]);
        sh(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        let ns = Netns {
            name,
            lossless_by_nsenter: false,
        };
        // No IPv6 neighbour discovery: the kernel's own frames would show up in counters.
        ns.run(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]);
        ns
    }

    /// A command run inside the namespace.
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Output of a command in the namespace.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.cmd(args[0]).args(&args[1..]).output().expect("run");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// Creates a veth pair `a_if` in `a` and `b_if` in `b`, both up.
pub fn veth(a: &Netns, a_if: &str, b: &Netns, b_if: &str) {
    sh(&[
        "ip", "link", "add", a_if, "netns", &a.name, "type", "veth", "peer", "name", b_if, "netns",
        &b.name,
    ]);
    for (ns, iface) in [(a, a_if), (b, b_if)] {
        ns.run(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{iface}.disable_ipv6=1"),
        ]);
        sh(&["ip", "-n", &ns.name, "link", "set", iface, "up"]);
    }
    // The kernel brings the operational state up asynchronously (linkwatch); frames sent
    // before that can vanish, so wait for it.
    let deadline = Instant::now() + Duration::from_secs(5);
    for (ns, iface) in [(a, a_if), (b, b_if)] {
        while !ns.run(&["ip", "link", "show", iface]).contains("state UP") {
            assert!(Instant::now() < deadline, "{iface} did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Sets the MTU of `iface` in `ns`.
pub fn set_mtu(ns: &Netns, iface: &str, mtu: u32) {
    sh(&[
        "ip",
        "-n",
        &ns.name,
        "link",
        "set",
        iface,
        "mtu",
        &mtu.to_string(),
    ]);
}

/// Runs a scapy script (Python) in `ns`; fails the test if it fails.
pub fn run_scapy(ns: &Netns, script: &str) {
    let out = ns
        .cmd("/usr/bin/python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scapy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `lossless` process; killed on drop if still running.
pub struct Proc {
    pub what: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    line_rx: mpsc::Receiver<String>,
    stdout: Option<std::thread::JoinHandle<String>>,
}

impl Proc {
    /// Starts `lossless ARGS` in `ns`, capturing stdout and stderr.
    pub fn spawn(ns: &Netns, args: &[&str]) -> Proc {
        Self::spawn_with(ns, &[], &[], args)
    }

    /// Like [`Proc::spawn`], with extra environment and a wrapper command (e.g. `setpriv ...`).
    pub fn spawn_with(ns: &Netns, env: &[(&str, &str)], wrapper: &[&str], args: &[&str]) -> Proc {
        let mut cmd = match wrapper.split_first() {
            Some((w, rest)) => {
                let mut c = ns.cmd(w);
                c.args(rest).arg(BIN);
                c
            }
            None if ns.lossless_by_nsenter => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net=/run/netns/{}", ns.name)).arg(BIN);
                c
            }
            None => ns.cmd(BIN),
        };
        cmd.args(args).envs(env.iter().copied());
        Self::start(cmd, format!("lossless {}", args.join(" ")))
    }

    /// Starts any `program args` in `ns` (a capture, a peer tool).
    pub fn command(ns: &Netns, program: &str, args: &[&str]) -> Proc {
        let mut cmd = ns.cmd(program);
        cmd.args(args);
        let name = program.rsplit('/').next().unwrap_or(program);
        Self::start(cmd, format!("{name} {}", args.join(" ")))
    }

    /// Spawns `cmd` with stdout collected and stderr read line by line as it comes.
    fn start(mut cmd: Command, what: String) -> Proc {
        let mut child = cmd
            .env("LOSSLESS_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        let mut out = child.stdout.take().expect("piped");
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let lines = Arc::new(Mutex::new(Vec::new()));
        let (tx, line_rx) = mpsc::channel();
        let stderr = child.stderr.take().expect("piped");
        let l = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                l.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        Proc {
            what,
            child,
            lines,
            line_rx,
            stdout: Some(stdout),
        }
    }

    /// The process id (`ip netns exec`, `setpriv` and `prlimit` exec the next command, so
    /// this is `lossless` itself behind any of them).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything written to stderr so far.
    pub fn stderr(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits until the process logs that it is ready.
    pub fn wait_ready(&mut self, timeout: Duration) {
        self.wait_for(" ready", timeout);
    }

    /// Waits for a stderr line containing `pattern`; panics with stderr on timeout or exit.
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
                Err(mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => {}
                Err(_) => {
                    let status = self.child.try_wait().ok().flatten();
                    panic!(
                        "{} logged no {pattern:?} within {timeout:?} (exit {status:?}); stderr:\n{}",
                        self.what,
                        self.stderr()
                    );
                }
            }
        }
    }

    /// Sends SIGINT (a clean stop).
    pub fn interrupt(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
    }

    /// Sends SIGHUP (reload).
    pub fn hangup(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGHUP) };
    }

    /// Sends SIGKILL (a crash).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for exit (at most `timeout`) and returns the status and stdout.
    pub fn finish(mut self, timeout: Duration) -> (ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let out = self
                    .stdout
                    .take()
                    .map(|h| h.join().unwrap_or_default())
                    .unwrap_or_default();
                return (status, out);
            }
            if Instant::now() > deadline {
                panic!(
                    "{} did not exit within {timeout:?}; stderr:\n{}",
                    self.what,
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for a clean exit and parses stdout as JSON.
    pub fn json(self, timeout: Duration) -> serde_json::Value {
        let what = self.what.clone();
        let lines = self.lines.clone();
        let (status, out) = self.finish(timeout);
        assert!(
            status.success(),
            "{what} exited with {status}; stderr:\n{}",
            lines.lock().unwrap().join("\n")
        );
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{what}: bad JSON ({e}): {out}"))
    }
}

impl Proc {
    /// [`Proc::json`], and the whole stderr including what the process logged while stopping.
    pub fn json_and_log(self, timeout: Duration) -> (serde_json::Value, String) {
        let lines = self.lines.clone();
        let v = self.json(timeout);
        (v, Self::whole_log(&lines))
    }

    /// [`Proc::finish`], with the whole stderr instead of stdout.
    pub fn finish_and_log(self, timeout: Duration) -> (ExitStatus, String) {
        let lines = self.lines.clone();
        let (status, _) = self.finish(timeout);
        (status, Self::whole_log(&lines))
    }

    fn whole_log(lines: &Mutex<Vec<String>>) -> String {
        // The reader thread drains the pipe until EOF, right after the exit.
        std::thread::sleep(Duration::from_millis(200));
        lines.lock().unwrap().join("\n")
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

/// Writes a temporary file that is removed on drop.
pub struct TempFile {
    pub path: std::path::PathBuf,
}

impl TempFile {
    pub fn new(tag: &str, contents: &str) -> Self {
        let path = std::env::temp_dir().join(unique(tag));
        std::fs::write(&path, contents).expect("write temp file");
        TempFile { path }
    }

    pub fn path(&self) -> &str {
        self.path.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// True if an XDP program is attached to `iface` in `ns`.
pub fn has_xdp(ns: &Netns, iface: &str) -> bool {
    ns.run(&["ip", "link", "show", iface]).contains("xdp")
}

/// Whether an XDP program is attached to `iface` in `ns` in native (driver) mode, not generic.
pub fn has_native_xdp(ns: &Netns, iface: &str) -> bool {
    ns.run(&["ip", "link", "show", iface]).contains(" xdp ")
}

/// A child process killed and reaped on drop.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Another project's daemon, killed and reaped on drop and then the files it leaves behind
/// when killed (its sockets, its lock file) removed.
pub struct Daemon {
    _process: Guard,
    _leaves: Vec<SocketPath>,
}

impl Daemon {
    pub fn new(process: Child, leaves: &[&str]) -> Self {
        Daemon {
            _process: Guard(process),
            _leaves: leaves.iter().map(|p| SocketPath(p.to_string())).collect(),
        }
    }
}

/// `ptp4l` on `iface` in `ns`: peer-to-peer mode over layer 2 with software timestamps, 4
/// requests a second, debug logging (which prints each peer-delay result), its control socket
/// unique to the test. Returns the process and its stdout.
pub fn ptp4l(ns: &Netns, iface: &str) -> (Daemon, BufReader<std::process::ChildStdout>) {
    let uds = std::env::temp_dir().join(unique("ptp"));
    let uds = uds.to_str().expect("utf-8 temp path");
    let mut child = ns
        .cmd("ptp4l")
        .args(["-i", iface, "-P", "-2", "-S", "-m", "-l", "7"])
        .args(["--logMinPdelayReqInterval", "-2", "--uds_address"])
        .arg(uds)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("ptp4l is installed by scripts/setup (Debian linuxptp)");
    let out = BufReader::new(child.stdout.take().expect("piped"));
    (Daemon::new(child, &[uds]), out)
}

/// Starts tshark on `iface` in `ns` for MAC control frames, returning once it captures.
pub fn capture(ns: &Netns, iface: &str, pcap: &str, count: u32) -> std::process::Child {
    capture_matching(ns, iface, "ether proto 0x8808", pcap, count)
}

/// Starts tshark on `iface` in `ns` for the first `count` frames that `filter` (a capture
/// filter) passes, into `pcap`, returning once it captures.
pub fn capture_matching(
    ns: &Netns,
    iface: &str,
    filter: &str,
    pcap: &str,
    count: u32,
) -> std::process::Child {
    let mut t = ns
        .cmd("tshark")
        .args([
            "-i",
            iface,
            "-f",
            filter,
            "-c",
            &count.to_string(),
            "-w",
            pcap,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tshark is installed by scripts/setup");
    let mut err = BufReader::new(t.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("Capturing on") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "tshark exited before capturing"
        );
    }
    // tshark announces the capture a moment before dumpcap's socket is receiving.
    std::thread::sleep(Duration::from_millis(500));
    t
}

/// The `fields` of every frame in `pcap`, as `tshark -T fields` prints them: one line per
/// frame, the fields separated by tabs. (A capture cut short by killing tshark still gives
/// its whole frames: tshark's exit status is not checked.)
pub fn pcap_fields(pcap: &str, fields: &[&str]) -> Vec<String> {
    let mut c = Command::new("tshark");
    c.args(["-r", pcap, "-T", "fields"]);
    for f in fields {
        c.args(["-e", f]);
    }
    let out = c.output().expect("tshark is installed by scripts/setup");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// HTTP GET from inside `ns` (a thread joins the namespace), returning (status line, body).
pub fn http_get(ns: &Netns, addr: &str, path: &str) -> (String, String) {
    use std::{io::Write, os::fd::AsRawFd};
    let ns_path = format!("/var/run/netns/{}", ns.name);
    let (addr, path) = (addr.to_string(), path.to_string());
    std::thread::spawn(move || {
        let f = std::fs::File::open(&ns_path).expect("netns file");
        // SAFETY: setns on this thread only, with a valid namespace fd.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        let mut s = std::net::TcpStream::connect(&addr).expect("connect to metrics");
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: lossless\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        let (head, body) = resp.split_once("\r\n\r\n").expect("HTTP response");
        (
            head.lines().next().unwrap_or("").to_string(),
            body.to_string(),
        )
    })
    .join()
    .expect("http thread")
}

/// The value of the sample `series` (name and labels exactly as exposed) in `exposition`.
pub fn metric(exposition: &str, series: &str) -> f64 {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no series {series} in\n{exposition}"))
        .trim()
        .parse()
        .expect("numeric sample")
}

/// A socket's path that is removed when dropped (a killed daemon leaves its socket).
pub struct SocketPath(String);

impl std::ops::Deref for SocketPath {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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

/// A `[control]` section with a socket path unique to this test (the default path would
/// collide between daemons of parallel tests), and that path.
pub fn control_section() -> (String, SocketPath) {
    let path = std::env::temp_dir().join(format!("{}.sock", unique("ctl")));
    let path = path.to_str().expect("utf-8 temp path").to_string();
    (
        format!("\n[control]\nsocket = \"{path}\"\n"),
        SocketPath(path),
    )
}

/// Stops process `pid` (SIGSTOP) for `how_long`, then lets it go on (SIGCONT): a tool that
/// does not run while traffic arrives.
pub fn stop_for(pid: u32, how_long: Duration) {
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {sig} {pid}");
    };
    signal("-STOP");
    std::thread::sleep(how_long);
    signal("-CONT");
}

/// Starts `lossless sink` on `iface` in `ns` (JSON report, stops 1 s after the traffic) and
/// waits until it is ready.
pub fn start_sink(ns: &Netns, iface: &str) -> Proc {
    start_sink_with(ns, iface, &[])
}

/// [`start_sink`] with `extra` flags (e.g. `--realtime`).
pub fn start_sink_with(ns: &Netns, iface: &str, extra: &[&str]) -> Proc {
    let mut args = vec![
        "sink",
        "--iface",
        iface,
        "--idle-timeout",
        "1s",
        "--duration",
        "60s",
        "--json",
    ];
    args.extend_from_slice(extra);
    let mut sink = Proc::spawn(ns, &args);
    sink.wait_ready(Duration::from_secs(10));
    sink
}

/// gen —veth— daemon —veth— sink, each in its own namespace: `g` faces `d0`, `d1` faces `s`.
pub struct Wire {
    pub gen_ns: Netns,
    pub dut_ns: Netns,
    pub sink_ns: Netns,
    pub g: String,
    pub d0: String,
    pub d1: String,
    pub s: String,
}

impl Wire {
    /// Namespaces and interfaces named after `tag`.
    pub fn new(tag: &str) -> Self {
        let n = |part: &str| format!("{tag}{part}");
        let (gen_ns, dut_ns, sink_ns) = (
            Netns::new(&n("g")),
            Netns::new(&n("d")),
            Netns::new(&n("s")),
        );
        let (g, d0, d1, s) = (unique("g"), unique("d"), unique("d"), unique("s"));
        veth(&gen_ns, &g, &dut_ns, &d0);
        veth(&dut_ns, &d1, &sink_ns, &s);
        Wire {
            gen_ns,
            dut_ns,
            sink_ns,
            g,
            d0,
            d1,
            s,
        }
    }
}

/// gen —veth— [cable] —veth— daemon —veth— sink, each in its own namespace, with
/// `lossless cable` running between `c0` and `c1`.
pub struct CableLine {
    pub ng: Netns,
    pub nc: Netns,
    pub nd: Netns,
    pub ns: Netns,
    pub g0: String,
    pub d0: String,
    pub d1: String,
    pub s0: String,
    /// The running cable (stopped with `interrupt`, or killed on drop).
    pub cable: Proc,
}

impl CableLine {
    /// Builds the line (names start with `tag`) and starts the cable with `cable_args` after
    /// its `--a`/`--b` interfaces.
    pub fn new(tag: &str, cable_args: &[&str]) -> Self {
        let name = |part: &str| format!("{tag}{part}");
        let (ng, nc, nd, ns) = (
            Netns::new(&name("g")),
            Netns::new(&name("c")),
            Netns::new(&name("d")),
            Netns::new(&name("s")),
        );
        let (g0, c0, c1) = (unique(&name("g")), unique(&name("c")), unique(&name("c")));
        let (d0, d1, s0) = (unique(&name("d")), unique(&name("d")), unique(&name("s")));
        veth(&ng, &g0, &nc, &c0);
        veth(&nc, &c1, &nd, &d0);
        veth(&nd, &d1, &ns, &s0);
        let mut args = vec!["cable", "--a", &c0, "--b", &c1];
        args.extend_from_slice(cable_args);
        let mut cable = Proc::spawn(&nc, &args);
        cable.wait_ready(Duration::from_secs(20));
        CableLine {
            ng,
            nc,
            nd,
            ns,
            g0,
            d0,
            d1,
            s0,
            cable,
        }
    }
}

/// CPU-bound processes (`while :; do :; done` at normal priority) competing with a test's
/// processes for the CPUs; killed on drop.
pub struct Hogs(Vec<Child>);

impl Hogs {
    pub fn start(n: usize) -> Self {
        Hogs(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("spawn a CPU hog")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The value at `path` in a JSON value.
fn json_at<'a>(v: &'a serde_json::Value, path: &[&str]) -> &'a serde_json::Value {
    path.iter().fold(v, |x, p| &x[*p])
}

/// The values of `field=` in the log lines that contain `line`, in order.
pub fn logged_values(log: &str, line: &str, field: &str) -> Vec<u64> {
    let key = format!(" {field}=");
    log.lines()
        .filter(|l| l.contains(line))
        .map(|l| {
            let at = l.find(&key).unwrap_or_else(|| panic!("no {field} in {l}")) + key.len();
            let v: String = l[at..].chars().take_while(char::is_ascii_digit).collect();
            v.parse().unwrap_or_else(|e| panic!("{field} in {l}: {e}"))
        })
        .collect()
}

/// An integer at `path` in a JSON value.
pub fn json_u64(v: &serde_json::Value, path: &[&str]) -> u64 {
    json_at(v, path)
        .as_u64()
        .unwrap_or_else(|| panic!("{path:?} is not an integer in {v:#}"))
}

/// A number at `path` in a JSON value.
pub fn json_f64(v: &serde_json::Value, path: &[&str]) -> f64 {
    json_at(v, path)
        .as_f64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v:#}"))
}

/// The port `iface` in a daemon's JSON report.
pub fn report_port<'a>(dut: &'a serde_json::Value, iface: &str) -> &'a serde_json::Value {
    dut["ports"]
        .as_array()
        .expect("ports in the report")
        .iter()
        .find(|p| p["iface"] == iface)
        .unwrap_or_else(|| panic!("no port {iface} in {dut}"))
}

/// The largest value a power-of-two histogram of a daemon's JSON report holds, as the lower
/// bound of its highest non-empty bucket (`buckets[b]` counts 2^(b−1) to below 2^b, `buckets[0]`
/// zeros); `None` when it is empty.
pub fn histogram_top(hist: &serde_json::Value) -> Option<u64> {
    let top = hist["buckets"]
        .as_array()?
        .iter()
        .rposition(|n| n.as_u64() > Some(0))?;
    Some(if top == 0 { 0 } else { 1 << (top - 1) })
}

/// The longest a frame waited for the worker on `port` (a port of a daemon's JSON report),
/// ns: its exact `rx_lag_peak_ns`.
pub fn longest_rx_lag_ns(port: &serde_json::Value) -> u64 {
    port["rx_lag_peak_ns"]
        .as_u64()
        .unwrap_or_else(|| panic!("no rx_lag_peak_ns in {port}"))
}

/// Frames the RX lag histogram of `port` (a port of a daemon's JSON report) holds: those
/// the worker received with the XDP program's stamp.
pub fn rx_lag_samples(port: &serde_json::Value) -> u64 {
    port["rx_lag_ns"]["buckets"]
        .as_array()
        .unwrap_or_else(|| panic!("no RX lag buckets in {port}"))
        .iter()
        .map(|n| n.as_u64().unwrap_or(0))
        .sum()
}

/// Frames a daemon (its JSON report) kept beyond a full buffer in spare frames of its pool
/// (`headroom_borrowed`, over every port and priority): what that buffer alone would have lost.
pub fn borrowed(dut: &serde_json::Value) -> u64 {
    let ports = dut["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    ports.iter().map(borrowed_on).sum()
}

/// [`borrowed`] for one port of a daemon's JSON report, over its priorities.
pub fn borrowed_on(port: &serde_json::Value) -> u64 {
    port["headroom_borrowed"]
        .as_array()
        .map_or(0, |a| a.iter().filter_map(serde_json::Value::as_u64).sum())
}

/// Whether `lost` frames are the host's: frames were lost and the worker on `port` (a port
/// of a daemon's JSON report) left a frame waiting at least as long as a `buffer_bytes` buffer lasts
/// at `offered_bps`. A worker the host held off that long (the VM stopping a vCPU) overflows
/// whatever part of the buffer is headroom, so such a loss is reported (printed here) rather
/// than judged. The wait is the RX lag, which also holds the time frames queued in the RX
/// ring: it excuses more than stalls, never a run without loss.
pub fn loss_is_the_hosts(
    lost: u64,
    port: &serde_json::Value,
    buffer_bytes: u64,
    offered_bps: u64,
) -> bool {
    let lag = longest_rx_lag_ns(port);
    let buffer_ns = buffer_bytes * 8 * 1_000_000_000 / offered_bps;
    let excused = lost > 0 && lag >= buffer_ns;
    if excused {
        println!(
            "lost {lost} frames with the worker held off {lag} ns, longer than the \
             buffer lasts ({buffer_ns} ns): not judged\n{}",
            where_frames_went_port(port)
        );
    }
    excused
}

/// Runs `run` (a traffic run on a topology of its own) and, if `lost` finds frames lost in it,
/// once more on a fresh one; returns the run to judge: the first if it lost nothing, else the
/// second. `lost(&run)` gives the frames lost and where they went (printed before the second
/// run). On the lab VM the host stops a vCPU for milliseconds now and then, beyond what a
/// headroom sized for the link holds, and a test that judged every run would fail on the
/// host about once in a few dozen; two losses in a row are the daemon's. The first run is
/// dropped, its topology with it, before the second starts.
pub fn once_more_after_a_loss<T>(
    mut run: impl FnMut() -> T,
    lost: impl Fn(&T) -> (u64, String),
) -> T {
    let first = run();
    let (n, went) = lost(&first);
    if n == 0 {
        return first;
    }
    println!("lost {n} frames: once more on a fresh topology\n{went}");
    drop(first);
    run()
}

/// Where a daemon's frames went, a line per port, for the head of a failure message (CI
/// keeps the start and the end of a long message, not its middle): drops and kernel drops
/// that are not zero, PFC frames sent by the worker and by the stall guard, stalls met, the
/// guard's wait before calling one (as it was at the end), and the longest a frame waited for
/// the worker.
pub fn where_frames_went(dut: &serde_json::Value) -> String {
    let ports = dut["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    ports
        .iter()
        .map(where_frames_went_port)
        .collect::<Vec<_>>()
        .join("\n")
}

/// [`where_frames_went`] for one port of a daemon's JSON report.
pub fn where_frames_went_port(port: &serde_json::Value) -> String {
    let nonzero = |v: &serde_json::Value| -> String {
        v.as_object()
            .map(|o| {
                o.iter()
                    .filter(|(_, n)| n.as_u64().is_some_and(|n| n > 0))
                    .map(|(k, n)| format!("{k}={n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    let total = |v: &serde_json::Value| -> u64 {
        v.as_array()
            .map_or(0, |a| a.iter().filter_map(|n| n.as_u64()).sum())
    };
    format!(
        "{}: drops [{}] kernel [{}] borrowed {} (at most {} B beyond the buffer) pfc_tx {} \
         stall_pfc_tx {} stalls {} guard waits {} us longest rx lag {} us",
        port["iface"].as_str().unwrap_or("?"),
        nonzero(&port["drops"]),
        nonzero(&port["kernel_drops"]),
        borrowed_on(port),
        port["headroom_borrowed_peak"].as_array().map_or(0, |a| a
            .iter()
            .filter_map(|n| n.as_u64())
            .max()
            .unwrap_or(0)),
        total(&port["pfc_tx"]),
        total(&port["stall_pfc_tx"]),
        port["stalls"],
        port["stall_guard_wait_ns"].as_u64().unwrap_or(0) / 1000,
        longest_rx_lag_ns(port) / 1000
    )
}

/// Runs `cmd`, asserts that it succeeded (showing its stderr if not) and returns its stdout.
pub fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// `lossless status --socket SOCKET --json`, parsed.
pub fn status_of(socket: &str) -> serde_json::Value {
    let out = stdout_of(Command::new(BIN).args(["status", "--socket", socket, "--json"]));
    serde_json::from_slice(&out).unwrap()
}

/// A daemon's namespace `ns` with two 1 Gbit/s ports `d0` and `d1`, each a veth to `peer`,
/// and its configuration: `extra` TOML, the ports and a control socket of its own.
pub struct Dut {
    pub ns: Netns,
    pub peer: Netns,
    pub d0: String,
    pub d1: String,
    pub cfg: TempFile,
    pub socket: SocketPath,
}

impl Dut {
    /// Namespaces named after `tag`.
    pub fn new(tag: &str, extra: &str) -> Self {
        let (ns, peer) = (Netns::new(tag), Netns::new(&format!("{tag}p")));
        let (d0, d1, p0, p1) = (unique("d"), unique("d"), unique("p"), unique("p"));
        veth(&ns, &d0, &peer, &p0);
        veth(&ns, &d1, &peer, &p1);
        let (control, socket) = control_section();
        let cfg = TempFile::new(
            "cfg",
            &format!(
                "{extra}\n[[port]]\niface = \"{d0}\"\nspeed = \"1Gbit\"\n\
                 [[port]]\niface = \"{d1}\"\nspeed = \"1Gbit\"\n{control}"
            ),
        );
        Dut {
            ns,
            peer,
            d0,
            d1,
            cfg,
            socket,
        }
    }

    /// Starts `lossless run` on the configuration with a JSON report, behind `wrapper`
    /// (e.g. `setpriv ...`; empty for none).
    pub fn start(&self, wrapper: &[String]) -> Proc {
        let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
        Proc::spawn_with(
            &self.ns,
            &[],
            &wrapper,
            &["run", "--config", self.cfg.path(), "--json"],
        )
    }
}

/// Asserts that `promtool check metrics` accepts `exposition`.
pub fn promtool_check(exposition: &str) {
    use std::io::Write;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is installed by scripts/setup");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The systemd unit shipped in systemd/.
pub const UNIT: &str = include_str!("../../systemd/lossless.service");

/// The value of `Key=` in the unit.
fn unit_setting(key: &str) -> &'static str {
    UNIT.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("the unit sets {key}"))
}

/// A `setpriv` wrapper that bounds capabilities to the unit's set without `except` (as
/// `CAP_...` names) and clears the inheritable set: how root runs under the unit.
pub fn unit_capabilities_except(except: &[&str]) -> Vec<String> {
    vec![
        "setpriv".into(),
        format!("--bounding-set=-all,{}", unit_caps(except)),
        "--inh-caps=-all".into(),
    ]
}

/// The unit's capabilities without `except`, as setpriv's `+cap,...` list.
fn unit_caps(except: &[&str]) -> String {
    unit_setting("CapabilityBoundingSet")
        .split_whitespace()
        .filter(|c| !except.contains(c))
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

/// A `setpriv` wrapper that runs as `nobody` with the unit's capabilities bounding, inheritable
/// and ambient: how `DynamicUser=yes` with `AmbientCapabilities=` runs the daemon.
pub fn unit_user_capabilities() -> Vec<String> {
    let caps = unit_caps(&[]);
    vec![
        "setpriv".into(),
        "--reuid=65534".into(),
        "--regid=65534".into(),
        "--clear-groups".into(),
        format!("--bounding-set=-all,{caps}"),
        format!("--inh-caps=-all,{caps}"),
        format!("--ambient-caps=-all,{caps}"),
    ]
}

/// Thread ids of process `pid` whose name starts with `prefix`, in name order.
pub fn threads_named(pid: u32, prefix: &str) -> Vec<u32> {
    let comm = |tid: u32| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok();
    let mut found: Vec<(String, u32)> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process runs")
        .filter_map(|e| {
            let tid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let c = comm(tid)?;
            c.starts_with(prefix).then(|| (c.trim().to_string(), tid))
        })
        .collect();
    // A thread just spawned carries its parent's name until it sets its own (the duty thread
    // a worker starts is "lossless-w0" for a moment): look again a little later.
    std::thread::sleep(std::time::Duration::from_millis(20));
    found.retain(|&(_, tid)| comm(tid).is_some_and(|c| c.starts_with(prefix)));
    found.sort();
    found.into_iter().map(|(_, tid)| tid).collect()
}

/// A thread's scheduling policy and priority as `chrt -p` reports them ("SCHED_FIFO", 50),
/// outside the duty cycle's slices where possible.
pub fn chrt(tid: u32) -> (String, u32) {
    // A real-time thread of ours runs SCHED_OTHER for the last 1 ms of every 10 ms window
    // (the duty cycle, src/dataplane/rt_duty.rs): a reading in that slice is retried.
    let mut reading = chrt_once(tid);
    for _ in 0..20 {
        if reading.0 != "SCHED_OTHER" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        reading = chrt_once(tid);
    }
    reading
}

fn chrt_once(tid: u32) -> (String, u32) {
    let out = Command::new("chrt")
        .args(["-p", &tid.to_string()])
        .output()
        .expect("chrt (util-linux)");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.split_once(name).map(|(_, v)| v.trim().to_string()))
            .unwrap_or_else(|| panic!("chrt -p {tid}: no {name:?} in {text}"))
    };
    (
        field("scheduling policy:"),
        field("scheduling priority:").parse().expect("a priority"),
    )
}

/// One thread of another process stopped with ptrace (`PTRACE_SEIZE` + `PTRACE_INTERRUPT`)
/// while the rest of the process runs on: a worker wedged for real, as a hung driver call or
/// a debugger would leave it. Resumed (detached) on drop, which must happen on the thread
/// that froze it (ptrace's tracer is a thread).
pub struct FrozenThread {
    tid: libc::pid_t,
}

impl FrozenThread {
    /// Stops thread `tid` and waits until it has stopped.
    pub fn freeze(tid: u32) -> Self {
        let tid = tid as libc::pid_t;
        let null = std::ptr::null_mut::<libc::c_void>();
        // SAFETY: plain ptrace requests on a thread id; no memory is passed.
        let seized = unsafe { libc::ptrace(libc::PTRACE_SEIZE, tid, null, null) };
        assert_eq!(
            seized,
            0,
            "PTRACE_SEIZE {tid}: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: as above.
        let stopped = unsafe { libc::ptrace(libc::PTRACE_INTERRUPT, tid, null, null) };
        assert_eq!(
            stopped,
            0,
            "PTRACE_INTERRUPT {tid}: {}",
            std::io::Error::last_os_error()
        );
        let mut status = 0;
        // SAFETY: waits for the traced thread's stop; `status` is a valid out pointer.
        let waited = unsafe { libc::waitpid(tid, &mut status, libc::__WALL) };
        assert_eq!(
            waited,
            tid,
            "waitpid {tid}: {}",
            std::io::Error::last_os_error()
        );
        FrozenThread { tid }
    }
}

impl Drop for FrozenThread {
    fn drop(&mut self) {
        let null = std::ptr::null_mut::<libc::c_void>();
        // SAFETY: detaches the thread this tracer stopped; it resumes.
        unsafe { libc::ptrace(libc::PTRACE_DETACH, self.tid, null, null) };
    }
}

/// Frames the XDP program saw on each of `iface`'s first `N` RX queues (`ethtool -S`, the
/// kernel's count: an oracle independent of the daemon's).
pub fn xdp_frames_per_queue<const N: usize>(ns: &Netns, iface: &str) -> [u64; N] {
    let stats = ns.run(&["ethtool", "-S", iface]);
    std::array::from_fn(|q| {
        let key = format!("rx_queue_{q}_xdp_packets:");
        stats
            .lines()
            .find_map(|l| l.trim().strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in\n{stats}"))
    })
}
