//! Peer-delay accuracy on one veth pair, against linuxptp in the same test (issue 16):
//! `ptp4l` ↔ `ptp4l` (the reference), `lossless measure` against `ptp4l`, and `ptp4l` against
//! our responder (`lossless measure --respond-for`). All three are one-way path delays
//! (half the round trip), with software time stamping on ptp4l's side.
//!
//! The three figures and their spreads are printed. The bound asserted is not the issue's
//! ±1 µs target (not reached: see `GAP_BOUND_NS`), but one that the user-space TX stamps
//! this replaced fail by far (path delay 7–12 µs against ptp4l's 0.3–2 µs).

mod common;

use std::{
    io::BufRead,
    sync::mpsc,
    time::{Duration, Instant},
};

use common::{traffic_lock, unique, veth, Guard, Netns, Proc};

const T: Duration = Duration::from_secs(30);

/// How far our median path delay may be from ptp4l ↔ ptp4l's, ns. Measured on the 2-vCPU
/// VM (kernel 6.18) with kernel TX stamps: `measure` 1.2–1.9 µs above ptp4l, ptp4l → our
/// responder 1.4–3.5 µs above. The remaining gap is where the RX time is taken: our XDP
/// program runs after the veth's NAPI or backlog turn, ptp4l's software stamp is taken in
/// `netif_rx` before it. With TX times read in user space before the kick the gaps were
/// 7–11 µs, so this bound catches that regression.
const GAP_BOUND_NS: f64 = 4_000.0;

/// Our interquartile spread may not exceed this, ns (user-space TX stamps: 3.3 µs).
const SPREAD_BOUND_NS: f64 = 2_000.0;

/// `ptp4l` in peer-to-peer mode over layer 2, software stamps, 4 requests a second; returns
/// the process and a channel of the raw path delays (ns) it logs.
fn ptp4l_delays(ns: &Netns, iface: &str) -> (Guard, mpsc::Receiver<i64>) {
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
        &["measure", "--iface", &ai, "--respond-for", "12s", "--json"],
    );
    resp.wait_ready(T);
    let (ptp, ptp_rx) = ptp4l_delays(&b, &bi);
    let mut theirs = collect(&ptp_rx, N + 2, Duration::from_secs(10));
    drop(ptp);
    resp.interrupt();
    let r = resp.json(T);
    assert_eq!(r["time_stamping"]["tx"], "kernel", "{r:#}");
    assert!(theirs.len() > 5, "ptp4l -> our responder: {theirs:?}");
    theirs.drain(..2);

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
    eprintln!("  samples: ref {reference:?}\n  ours {ours:?}\n  theirs {theirs:?}");

    assert!(
        (our_med - ref_med).abs() <= GAP_BOUND_NS,
        "lossless measure {our_med} ns vs ptp4l <-> ptp4l {ref_med} ns"
    );
    assert!(
        (their_med - ref_med).abs() <= GAP_BOUND_NS,
        "ptp4l -> our responder {their_med} ns vs ptp4l <-> ptp4l {ref_med} ns"
    );
    assert!(
        our_iqr <= SPREAD_BOUND_NS.max(ref_iqr),
        "our spread {our_iqr} ns (ptp4l's {ref_iqr} ns)"
    );
}
