//! Peer-delay accuracy on one veth pair, against linuxptp in the same test (issue 16):
//! `ptp4l` ↔ `ptp4l` (the plain reference), `lossless measure` against `ptp4l`, `ptp4l`
//! against our responder (`lossless measure --respond-for`), and `ptp4l` ↔ `ptp4l` again
//! with a do-nothing XDP program on our side's interface (the path reference). All are
//! one-way path delays (half the round trip), with software time stamping on ptp4l's side.
//!
//! Why two references. On veth, a frame for an interface without XDP is stamped for ptp4l in
//! `netif_rx`, in the sender's context, the moment it is sent: the plain reference measures
//! almost nothing (0.5–1.9 µs here). With any XDP program attached, the frame waits for the
//! receiving veth's NAPI turn, and ptp4l's own figures over that path move to 1.5–7.6 µs:
//! which of the two ptp4l sides sees the larger figure flips from run to run (bimodal, not
//! fixed by pinning both to one CPU), with interquartile spreads up to 6.5 µs. Our side
//! always has XDP attached, so the plain reference is not the path we measure, and no
//! per-direction figure over the XDP path is stable to the issue's ±1 µs, ptp4l's included.
//! The direction effect cancels in the mean of both directions: that is compared, within
//! [`PATH_BOUND_NS`].

mod common;

use std::{
    io::BufRead,
    sync::mpsc,
    time::{Duration, Instant},
};

use common::{traffic_lock, unique, veth, Daemon, Netns, Proc, TempFile};

const T: Duration = Duration::from_secs(30);

/// How far the mean of our two medians (`measure` on A, ptp4l on B against our responder)
/// may be from the mean of ptp4l's two views over the same XDP path, ns. Not the issue's
/// ±1 µs: measured on the 2-vCPU VM (kernel 6.18), ten runs in one hour, the difference
/// ranged −666 to +1,660 ns while ptp4l's own views over that path moved by 1.5–5 µs between
/// runs (and ours by 1.5 µs with a build running beside). With TX times read in user space
/// before the kick, our figures were 5–10 µs higher, about +5 µs on this measure: caught.
const PATH_BOUND_NS: f64 = 2_500.0;

/// Our interquartile spread may not exceed this, ns (user-space TX stamps: 3.3 µs).
const SPREAD_BOUND_NS: f64 = 2_000.0;

/// `ptp4l` in peer-to-peer mode over layer 2, software stamps, 4 requests a second; returns
/// the process and a channel of the raw path delays (ns) it logs.
fn ptp4l_delays(ns: &Netns, iface: &str) -> (Daemon, mpsc::Receiver<i64>) {
    let (guard, out) = common::ptp4l(ns, iface);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // "delay   filtered <ns>   raw <ns>" for each completed exchange.
        for line in out.lines().map_while(Result::ok) {
            if let Some(rest) = line.split("delay   filtered").nth(1) {
                if let Some(Ok(raw)) = rest.split_whitespace().nth(2).map(str::parse) {
                    if tx.send(raw).is_err() {
                        break;
                    }
                }
            }
        }
    });
    (guard, rx)
}

fn collect(rx: &mpsc::Receiver<i64>, n: usize, within: Duration) -> Vec<i64> {
    let deadline = Instant::now() + within;
    let mut v = Vec::new();
    while v.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(d) => v.push(d),
            Err(_) => break,
        }
    }
    v
}

/// (median, interquartile spread) of `v`.
fn summary(v: &[i64]) -> (f64, f64) {
    let mut s = v.to_vec();
    s.sort_unstable();
    let q = |p: f64| s[((s.len() - 1) as f64 * p).round() as usize] as f64;
    (q(0.5), q(0.75) - q(0.25))
}

#[test]
fn our_path_delay_tracks_ptp4l_on_one_veth() {
    let _l = traffic_lock();
    let (a, b) = (Netns::new("pda"), Netns::new("pdb"));
    let (ai, bi) = (unique("pda"), unique("pdb"));
    veth(&a, &ai, &b, &bi);
    const N: usize = 20;
    // ptp4l's own figures over the XDP path spread by up to 3.5 µs (interquartile): twice
    // the samples for the comparisons made against them.
    const N2: usize = 2 * N;

    // 1. ptp4l <-> ptp4l: the reference, read on A's side.
    let (peer, peer_rx) = ptp4l_delays(&b, &bi);
    let (refp, ref_rx) = ptp4l_delays(&a, &ai);
    // ptp4l's first exchanges include its start-up; skip two.
    let mut reference = collect(&ref_rx, N + 2, Duration::from_secs(15));
    drop(refp);
    assert!(reference.len() > 5, "ptp4l <-> ptp4l: {reference:?}");
    reference.drain(..2);

    // 2. lossless measure (A) against ptp4l (B).
    let m = Proc::spawn(
        &a,
        &[
            "measure",
            "--iface",
            &ai,
            "--samples",
            &(2 * N).to_string(),
            "--lldp-wait",
            "0s",
            "--json",
        ],
    )
    .json(T);
    assert_eq!(m["time_stamping"]["rx"], "xdp", "{m:#}");
    assert_eq!(m["time_stamping"]["tx"], "kernel", "{m:#}");
    assert_eq!(m["counters"]["tx_stamp_missed"], 0, "{m:#}");
    let ours: Vec<i64> = m["measurement"]["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| s["round_trip_ns"].as_i64().expect("round_trip_ns") / 2)
        .collect();
    assert!(ours.len() >= N, "{m:#}");
    drop(peer);
    drop(peer_rx);

    // 3. ptp4l (B) against our responder (A).
    let mut resp = Proc::spawn(
        &a,
        &["measure", "--iface", &ai, "--respond-for", "20s", "--json"],
    );
    resp.wait_ready(T);
    let (ptp, ptp_rx) = ptp4l_delays(&b, &bi);
    let mut theirs = collect(&ptp_rx, N2 + 2, Duration::from_secs(15));
    drop(ptp);
    resp.interrupt();
    let r = resp.json(T);
    assert_eq!(r["time_stamping"]["tx"], "kernel", "{r:#}");
    assert!(theirs.len() > 5, "ptp4l -> our responder: {theirs:?}");
    theirs.drain(..2);

    // 4. ptp4l <-> ptp4l again, with an XDP program (XDP_PASS) on A's interface: the path
    // our measurement has (on veth, a frame for an interface with XDP is handed over through
    // the peer's NAPI instead of netif_rx, and ptp4l stamps it after that hop). A's view is
    // the reference for `measure` on A, B's view the one for B's ptp4l against our responder.
    let pass = XdpPass::attach(&a, &ai);
    let (xpeer, xpeer_rx) = ptp4l_delays(&b, &bi);
    let (xrefp, xref_rx) = ptp4l_delays(&a, &ai);
    let mut xdp_ref_a = collect(&xref_rx, N2 + 2, Duration::from_secs(20));
    let mut xdp_ref_b = collect(&xpeer_rx, N2 + 2, Duration::from_secs(5));
    drop((xrefp, xpeer, xpeer_rx, xref_rx));
    drop(pass);
    assert!(
        xdp_ref_a.len() > 5,
        "ptp4l <-> ptp4l, XDP on A: {xdp_ref_a:?}"
    );
    assert!(
        xdp_ref_b.len() > 5,
        "ptp4l <-> ptp4l, XDP on A: {xdp_ref_b:?}"
    );
    xdp_ref_a.drain(..2);
    xdp_ref_b.drain(..2);

    let (ref_med, ref_iqr) = summary(&reference);
    let (our_med, our_iqr) = summary(&ours);
    let (their_med, their_iqr) = summary(&theirs);
    eprintln!("path delay, ns (median, interquartile spread, n):");
    eprintln!(
        "  ptp4l <-> ptp4l            {ref_med:>8.0} {ref_iqr:>8.0} {:>3}",
        reference.len()
    );
    eprintln!(
        "  lossless measure -> ptp4l  {our_med:>8.0} {our_iqr:>8.0} {:>3}  ({:+.0})",
        ours.len(),
        our_med - ref_med
    );
    eprintln!(
        "  ptp4l -> lossless responder {their_med:>7.0} {their_iqr:>8.0} {:>3}  ({:+.0})",
        theirs.len(),
        their_med - ref_med
    );
    let (xa_med, xa_iqr) = summary(&xdp_ref_a);
    let (xb_med, xb_iqr) = summary(&xdp_ref_b);
    eprintln!(
        "  ptp4l <-> ptp4l, XDP on A, A's view {xa_med:>8.0} {xa_iqr:>8.0} {:>3}  (measure: {:+.0})",
        xdp_ref_a.len(),
        our_med - xa_med
    );
    eprintln!(
        "  ptp4l <-> ptp4l, XDP on A, B's view {xb_med:>8.0} {xb_iqr:>8.0} {:>3}  (responder: {:+.0})",
        xdp_ref_b.len(),
        their_med - xb_med
    );
    eprintln!("  samples: ref {reference:?}\n  ours {ours:?}\n  theirs {theirs:?}");
    eprintln!("  xdp ref A {xdp_ref_a:?}\n  xdp ref B {xdp_ref_b:?}");

    let ours_both = (our_med + their_med) / 2.0;
    let ptp4l_both = (xa_med + xb_med) / 2.0;
    eprintln!(
        "  both directions over the XDP path: ours {ours_both:.0}, ptp4l's {ptp4l_both:.0} \
         ({:+.0})",
        ours_both - ptp4l_both
    );
    assert!(
        (ours_both - ptp4l_both).abs() <= PATH_BOUND_NS,
        "our two directions {ours_both} ns (measure {our_med}, responder {their_med}) vs \
         ptp4l's over the same XDP path {ptp4l_both} ns (A's view {xa_med}, B's {xb_med})"
    );
    assert!(
        our_iqr <= SPREAD_BOUND_NS.max(ref_iqr),
        "our spread {our_iqr} ns (ptp4l's {ref_iqr} ns)"
    );
}

/// A do-nothing XDP program (`XDP_PASS`) attached natively to an interface while it lives:
/// built with clang (installed by scripts/setup) and attached with `ip link`.
struct XdpPass<'a> {
    ns: &'a Netns,
    iface: String,
}

impl<'a> XdpPass<'a> {
    fn attach(ns: &'a Netns, iface: &str) -> Self {
        // No headers: 2 is XDP_PASS.
        let src = TempFile::new(
            "xdppass.c",
            "__attribute__((section(\"xdp\"), used)) int xdp_pass(void *ctx) { return 2; }\n\
             char _license[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
        );
        let obj = TempFile::new("xdppass.o", "");
        let out = std::process::Command::new("clang")
            .args([
                "-O2",
                "-target",
                "bpf",
                "-x",
                "c",
                "-c",
                src.path(),
                "-o",
                obj.path(),
            ])
            .output()
            .expect("clang is installed by scripts/setup");
        assert!(out.status.success(), "clang: {out:?}");
        ns.run(&[
            "ip",
            "link",
            "set",
            "dev",
            iface,
            "xdpdrv",
            "obj",
            obj.path(),
            "sec",
            "xdp",
        ]);
        XdpPass {
            ns,
            iface: iface.to_string(),
        }
    }
}

impl Drop for XdpPass<'_> {
    fn drop(&mut self) {
        self.ns
            .run(&["ip", "link", "set", "dev", &self.iface, "xdpdrv", "off"]);
    }
}
