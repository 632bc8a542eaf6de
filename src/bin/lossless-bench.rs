//! `lossless-bench`: reference receivers for the benchmarks in `bench/`, kept out of the
//! `lossless` binary so nothing here is on the daemon's path.
//!
//! - `xdp-drop`: attaches `bpf/xdp_drop.bpf.c` (count in a per-CPU map, then `XDP_DROP`): the
//!   in-kernel ceiling of receiving on an interface.
//! - `rx`: a bare AF_XDP receive loop over the project's own socket code (`AfXdpPort` on a UMEM
//!   `FramePool`, steered by the daemon's XDP program): it receives a batch, returns the
//!   frames to the pool (the next receive refills the fill ring) and counts. Nothing else:
//!   the userspace ceiling the daemon's worker is compared with.
//!
//! - `forward`: a bare AF_XDP forwarder between two interfaces over the same socket code
//!   (`forward.rs`): what the kernel's copy-mode paths leave a forwarder that adds nothing.
//!
//! They run until SIGINT/SIGTERM (or `--duration`) and then print one JSON line with the
//! frames they counted. They assert nothing and measure no time themselves: the bench
//! scripts divide by the sender's window, the same way for every receiver.
//!
//! - `lateness`: a real-time thread per CPU that notes how late it wakes (`bench/lateness`),
//!   to tell a CPU held by kernel work from a VM whose vCPUs the host stops.

use std::{
    os::fd::{AsFd, AsRawFd, BorrowedFd},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use clap::{Parser, Subcommand};
use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder, Xdp, XdpFlags};
use lossless::{
    cli::common,
    control::signals,
    dataplane::{
        af_xdp::{AfXdpOptions, AfXdpPort},
        clock::now_ns,
        pool::FramePool,
        port::{KernelDrops, Port, RxFrame},
        sched,
        xdp_prog::{ifindex, Steering, XdpMode, XdpProgram},
    },
};
use serde::Serialize;

#[path = "lossless-bench/forward.rs"]
mod forward;
#[path = "lossless-bench/lateness.rs"]
mod lateness;
#[path = "lossless-bench/profile.rs"]
mod profile;

/// The count-and-drop reference program, built by `build.rs`.
static DROP_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_drop.bpf.o"));

/// Reference receivers for bench/rx (benchmarks only; not part of the daemon).
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Count and drop every frame in XDP (the in-kernel ceiling).
    XdpDrop(DropArgs),
    /// Bare AF_XDP receive loop: receive, recycle the frames, count (the userspace ceiling).
    Rx(RxArgs),
    /// Bare AF_XDP forwarder between two interfaces (nothing between receive and send).
    Forward(ForwardArgs),
    /// Drive the forwarding worker over in-memory ports with simulated time (for callgrind).
    WorkerProfile(ProfileArgs),
    /// How late a SCHED_FIFO thread on each CPU wakes, and when the CPUs are late together.
    Lateness(LatenessArgs),
}

/// Flags of `lateness`.
#[derive(Debug, clap::Args)]
struct LatenessArgs {
    /// CPUs to watch, a thread pinned to each (default: every CPU this process may use).
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
    /// How far apart each thread's deadlines are.
    #[arg(long, default_value = "1ms", value_parser = common::duration)]
    period: Duration,
    /// SCHED_FIFO priority of the threads: above the daemon's workers (50) and its duty
    /// thread (51), so that only the kernel or the host holds them.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u8).range(1..=99))]
    priority: u8,
    /// List every wake-up at least this late.
    #[arg(long, default_value = "1ms", value_parser = common::duration)]
    report: Duration,
    /// Stop after this long (default: at SIGINT/SIGTERM).
    #[arg(long, value_parser = common::duration)]
    duration: Option<Duration>,
}

/// Flags of `worker-profile`.
#[derive(Debug, clap::Args)]
struct ProfileArgs {
    /// What to run.
    #[arg(long, value_enum)]
    scenario: profile::Scenario,
    /// Frame size, bytes (at least 18: a tagged Ethernet header).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(18..=2048))]
    size: u16,
    /// Frames the source sends.
    #[arg(long, default_value_t = 200_000)]
    frames: u64,
}

/// Flags of `xdp-drop`.
#[derive(Debug, clap::Args)]
struct DropArgs {
    /// Interface to attach to.
    #[arg(long)]
    iface: String,
    /// XDP attach mode: native (driver) or skb (generic); auto tries native first.
    #[arg(long, value_enum, default_value_t = XdpMode::Auto)]
    xdp_mode: XdpMode,
    /// Stop after this long (default: at SIGINT/SIGTERM).
    #[arg(long, value_parser = common::duration)]
    duration: Option<Duration>,
}

/// Flags of `rx`.
#[derive(Debug, clap::Args)]
struct RxArgs {
    /// Interface to receive on.
    #[arg(long)]
    iface: String,
    /// Queues 0..N to receive on, one thread and one UMEM per queue.
    #[arg(long, default_value_t = 1)]
    queues: u32,
    /// Frames in each queue's UMEM (2 KiB each).
    #[arg(long, default_value_t = 8192)]
    frames: u32,
    #[command(flatten)]
    run: LoopArgs,
    /// Pin queue q's thread to CPU `cores[q]` (default: no pinning).
    #[arg(long, value_delimiter = ',')]
    cores: Vec<usize>,
}

/// Flags of the loops `rx` and `forward` run.
#[derive(Debug, clap::Args)]
struct LoopArgs {
    /// Frames taken per receive call (at most 256; the daemon worker's batch is 64).
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// XDP attach mode of the steering program.
    #[arg(long, value_enum, default_value_t = XdpMode::Auto)]
    xdp_mode: XdpMode,
    /// When a turn receives nothing, sleep in poll() on the sockets (up to 10 ms) instead of
    /// spinning: the daemon's default idle strategy.
    #[arg(long)]
    poll: bool,
    /// Stop after this long (default: at SIGINT/SIGTERM).
    #[arg(long, value_parser = common::duration)]
    duration: Option<Duration>,
}

/// Flags of `forward`.
#[derive(Debug, clap::Args)]
struct ForwardArgs {
    /// The two interfaces (queue 0 of each): frames from one are sent on the other.
    #[arg(long, num_args = 2, value_names = ["A", "B"], required = true)]
    ifaces: Vec<String>,
    /// Frames in the UMEM both sockets share (2 KiB each): the daemon's default.
    #[arg(long, default_value_t = 32768)]
    frames: u32,
    #[command(flatten)]
    run: LoopArgs,
    /// Pin the thread to this CPU (default: no pinning).
    #[arg(long)]
    core: Option<usize>,
}

/// What `xdp-drop` prints.
#[derive(Debug, Serialize)]
struct DropReport {
    iface: String,
    native: bool,
    frames: u64,
}

/// What `rx` prints.
#[derive(Debug, Serialize, PartialEq)]
struct RxReport {
    iface: String,
    frames: u64,
    per_queue: Vec<u64>,
    kernel_drops: KernelDrops,
}

/// Sums the per-CPU values of one `PERCPU_ARRAY` slot (native-endian u64 each).
fn sum_percpu(values: &[Vec<u8>]) -> u64 {
    values
        .iter()
        .filter_map(|v| v.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .sum()
}

/// Adds up per-queue results into one report.
fn merge(iface: &str, queues: Vec<(u64, KernelDrops)>) -> RxReport {
    let mut kd = KernelDrops::default();
    for (_, k) in &queues {
        kd += *k;
    }
    RxReport {
        iface: iface.to_string(),
        frames: queues.iter().map(|(n, _)| n).sum(),
        per_queue: queues.iter().map(|(n, _)| *n).collect(),
        kernel_drops: kd,
    }
}

/// Waits until `stop` is set or `duration` has passed, checking every 10 ms.
fn wait(stop: &AtomicBool, duration: Option<Duration>, mut tick: impl FnMut()) {
    let end = duration.map(|d| Instant::now() + d);
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| Instant::now() < e) {
        tick();
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn xdp_drop(a: &DropArgs) -> Result<DropReport, String> {
    let stop = signals::install();
    let idx = ifindex(&a.iface).ok_or_else(|| format!("interface {:?} not found", a.iface))?;
    let obj: Object = ObjectBuilder::default()
        .open_memory(DROP_OBJECT)
        .and_then(|o| o.load())
        .map_err(|e| format!("loading xdp_drop.bpf.o: {e}"))?;
    let prog = obj
        .progs()
        .find(|p| p.name() == "xdp_drop_count")
        .ok_or("object has no program xdp_drop_count")?;
    // SAFETY: the program fd is owned by `obj`, which lives until the end of this function.
    let fd = unsafe { BorrowedFd::borrow_raw(prog.as_fd().as_raw_fd()) };
    let xdp = Xdp::new(fd);
    let modes: &[XdpFlags] = match a.xdp_mode {
        XdpMode::Auto => &[XdpFlags::DRV_MODE, XdpFlags::SKB_MODE],
        XdpMode::Native => &[XdpFlags::DRV_MODE],
        XdpMode::Skb => &[XdpFlags::SKB_MODE],
    };
    let mut attached = None;
    let mut last = String::new();
    for m in modes {
        match xdp.attach(idx, XdpFlags::from_bits_retain(m.bits())) {
            Ok(()) => {
                attached = Some(m.bits());
                break;
            }
            Err(e) => last = e.to_string(),
        }
    }
    let flags = attached.ok_or_else(|| format!("attaching XDP to {}: {last}", a.iface))?;
    eprintln!("lossless-bench xdp-drop: ready on {}", a.iface);
    wait(stop, a.duration, || {});
    let map = obj
        .maps()
        .find(|m| m.name() == "drop_count")
        .ok_or("object has no map drop_count")?;
    let frames = map
        .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| format!("reading drop_count: {e}"))?
        .map(|v| sum_percpu(&v))
        .unwrap_or(0);
    xdp.detach(idx, XdpFlags::from_bits_retain(flags))
        .map_err(|e| format!("detaching XDP from {}: {e}", a.iface))?;
    Ok(DropReport {
        iface: a.iface.clone(),
        native: flags == XdpFlags::DRV_MODE.bits(),
        frames,
    })
}

/// The loop of one queue: receive, give the frames back, count. Spins when the ring is empty,
/// or with `poll` sleeps in `poll()` until the socket is readable (10 ms at most).
fn rx_loop(
    mut pool: FramePool,
    mut port: AfXdpPort,
    batch: usize,
    poll: bool,
    stop: &AtomicBool,
) -> (u64, KernelDrops) {
    let mut pfd = libc::pollfd {
        fd: port.poll_fd().expect("AF_XDP sockets have a descriptor"),
        events: libc::POLLIN,
        revents: 0,
    };
    let mut rx: Vec<RxFrame> = Vec::with_capacity(batch);
    let mut frames = 0u64;
    while !stop.load(Ordering::Relaxed) {
        rx.clear();
        match port.recv(&mut pool, &mut rx, batch, now_ns()) {
            Ok(n) => frames += n as u64,
            Err(e) => {
                eprintln!("lossless-bench rx: {e}");
                break;
            }
        }
        let got = rx.len();
        for r in rx.drain(..) {
            pool.release(r.frame);
        }
        if poll && got == 0 {
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 10) };
        }
    }
    (frames, port.kernel_drops())
}

fn bare_rx(a: &RxArgs) -> Result<RxReport, String> {
    let stop = signals::install();
    let steering = Steering {
        forward_all: true,
        test_udp_port: 0,
        sfc_udp_port: 0,
    };
    let prog = XdpProgram::attach(&a.iface, a.run.xdp_mode, steering).map_err(|e| e.to_string())?;
    let mut opened = Vec::new();
    for q in 0..a.queues {
        let mut pool = FramePool::umem(a.frames).map_err(|e| e.to_string())?;
        let port = AfXdpPort::open(&mut pool, &prog, q, AfXdpOptions::default())
            .map_err(|e| e.to_string())?;
        opened.push((pool, port));
    }
    let batch = a.run.batch.clamp(1, 256);
    let poll = a.run.poll;
    eprintln!(
        "lossless-bench rx: ready on {} ({} queue(s))",
        a.iface, a.queues
    );
    let results = std::thread::scope(|s| {
        let threads: Vec<_> = opened
            .into_iter()
            .enumerate()
            .map(|(q, (pool, port))| {
                let core = a.cores.get(q).copied();
                s.spawn(move || {
                    if let Some(c) = core {
                        if let Err(e) = sched::pin_this_thread(c) {
                            eprintln!("lossless-bench: pinning to CPU {c} failed: {e}");
                        }
                    }
                    rx_loop(pool, port, batch, poll, stop)
                })
            })
            .collect();
        wait(stop, a.run.duration, || {});
        stop.store(true, Ordering::Relaxed);
        threads
            .into_iter()
            .map(|t| t.join().expect("rx thread"))
            .collect::<Vec<_>>()
    });
    drop(prog);
    Ok(merge(&a.iface, results))
}

fn bare_forward(a: &ForwardArgs) -> Result<forward::Report, String> {
    let stop = signals::install();
    let [x, y] = [&a.ifaces[0], &a.ifaces[1]];
    let setup = forward::Setup {
        ifaces: [x.clone(), y.clone()],
        frames: a.frames,
        batch: a.run.batch,
        xdp_mode: a.run.xdp_mode,
        poll: a.run.poll,
        stop,
    };
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            if let Some(c) = a.core {
                sched::pin_this_thread(c).map_err(|e| format!("pinning to CPU {c}: {e}"))?;
            }
            forward::run(setup, || {
                eprintln!("lossless-bench forward: ready, {x} <-> {y}");
            })
        });
        wait(stop, a.run.duration, || {
            if t.is_finished() {
                stop.store(true, Ordering::Relaxed);
            }
        });
        stop.store(true, Ordering::Relaxed);
        t.join().expect("forward thread")
    })
}

fn watch_lateness(a: &LatenessArgs) -> lateness::Report {
    let stop = signals::install();
    let cpus = if a.cpus.is_empty() {
        sched::allowed_cpus()
    } else {
        a.cpus.clone()
    };
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    eprintln!("lossless-bench lateness: watching CPUs {cpus:?}");
    std::thread::scope(|s| {
        let t =
            s.spawn(|| lateness::run(&cpus, ns(a.period).max(1), a.priority, ns(a.report), stop));
        wait(stop, a.duration, || {});
        stop.store(true, Ordering::Relaxed);
        t.join().expect("lateness threads")
    })
}

fn main() {
    let cli = Cli::parse();
    let out = match &cli.command {
        Command::XdpDrop(a) => xdp_drop(a).map(|r| serde_json::to_string(&r)),
        Command::Rx(a) => bare_rx(a).map(|r| serde_json::to_string(&r)),
        Command::Forward(a) => bare_forward(a).map(|r| serde_json::to_string(&r)),
        Command::WorkerProfile(a) => Ok(serde_json::to_string(&profile::run(
            a.scenario,
            usize::from(a.size),
            a.frames,
        ))),
        Command::Lateness(a) => Ok(serde_json::to_string(&watch_lateness(a))),
    };
    match out {
        Ok(json) => println!("{}", json.expect("reports serialise")),
        Err(e) => {
            eprintln!("lossless-bench: error: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percpu_values_are_summed_and_short_slots_ignored() {
        let v = vec![
            5u64.to_ne_bytes().to_vec(),
            7u64.to_ne_bytes().to_vec(),
            vec![1, 2, 3],
        ];
        assert_eq!(sum_percpu(&v), 12);
        assert_eq!(sum_percpu(&[]), 0);
    }

    #[test]
    fn queues_merge_into_one_report() {
        let k = |f| KernelDrops {
            fill_ring_empty: f,
            rx_ring_full: 1,
            ..KernelDrops::default()
        };
        let r = merge("v0", vec![(10, k(2)), (32, k(3))]);
        assert_eq!(r.frames, 42);
        assert_eq!(r.per_queue, vec![10, 32]);
        assert_eq!(r.kernel_drops.fill_ring_empty, 5);
        assert_eq!(r.kernel_drops.rx_ring_full, 2);
    }

    #[test]
    fn flags_parse() {
        let c = Cli::try_parse_from([
            "lossless-bench",
            "rx",
            "--iface",
            "v0",
            "--queues",
            "2",
            "--cores",
            "0,1",
        ])
        .unwrap();
        match c.command {
            Command::Rx(a) => {
                assert_eq!(a.queues, 2);
                assert_eq!(a.cores, vec![0, 1]);
                assert_eq!(a.run.batch, 64);
            }
            Command::XdpDrop(_)
            | Command::Forward(_)
            | Command::WorkerProfile(_)
            | Command::Lateness(_) => {
                panic!("parsed the wrong subcommand")
            }
        }
        assert!(Cli::try_parse_from(["lossless-bench", "xdp-drop"]).is_err());
        let c = Cli::try_parse_from([
            "lossless-bench",
            "lateness",
            "--cpus",
            "1",
            "--period",
            "500us",
        ])
        .unwrap();
        let Command::Lateness(a) = c.command else {
            panic!("parsed the wrong subcommand")
        };
        assert_eq!(
            (a.cpus, a.period, a.priority),
            (vec![1], Duration::from_micros(500), 60)
        );
        assert!(Cli::try_parse_from(["lossless-bench", "lateness", "--priority", "0"]).is_err());
        let c = Cli::try_parse_from(["lossless-bench", "forward", "--ifaces", "d0", "d1"]).unwrap();
        let Command::Forward(a) = c.command else {
            panic!("parsed the wrong subcommand")
        };
        assert_eq!(
            (a.ifaces, a.frames, a.run.batch, a.run.poll, a.core),
            (
                vec!["d0".to_string(), "d1".to_string()],
                32768,
                64,
                false,
                None
            )
        );
        assert!(
            Cli::try_parse_from(["lossless-bench", "forward", "--ifaces", "d0"]).is_err(),
            "two interfaces"
        );
    }
}
