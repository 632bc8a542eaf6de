//! The cable's I/O loop: one thread, both ports of one pool (every RX queue of each interface), the
//! two [`Lane`]s in between. Receives in batches, transmits what is due, and sleeps on the
//! ports' descriptors up to the next deadline (the [`Idler`] spins the last stretch).

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use super::{lane::Lane, report::CableReport, CableSetup, MAX_FIFO_FRAMES};
use crate::{
    dataplane::{
        clock::now_ns,
        idle::Idler,
        open::{attach_for, iface_max_frame, open_worker_ports, OpenError, Queues, WorkerPorts},
        pool::Frame,
        port::{PortError, RxFrame},
        sched::{self, RealtimeError},
        xdp_prog::{Steering, XdpError},
    },
    traffic::progress::Progress,
    units::format_rate,
};

/// Frames per RX or TX batch.
pub const BATCH: usize = 64;
/// What to do about FIFO-overflow drops, some of them at the FIFO's frame cap or none.
fn overflow_advice(frame_cap: bool) -> String {
    if frame_cap {
        format!(
            "more than {MAX_FIFO_FRAMES} frames were in flight, the most one direction holds \
             whatever --fifo-limit: send larger frames, at a lower rate, or set a shorter \
             --delay"
        )
    } else {
        "frames beyond delay x rate + margin: raise --fifo-limit or lower the offered load".into()
    }
}

/// Least time between two FIFO-overflow warnings.
const WARN_EVERY_NS: u64 = 1_000_000_000;

/// Why the cable could not run.
#[derive(Debug, thiserror::Error)]
pub enum CableError {
    /// Settings that cannot work.
    #[error("{0}")]
    Invalid(String),
    /// Attaching XDP failed.
    #[error(transparent)]
    Xdp(#[from] XdpError),
    /// Opening the ports failed.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// A port failed while running.
    #[error(transparent)]
    Port(#[from] PortError),
    /// `--realtime` could not be applied.
    #[error(transparent)]
    Realtime(#[from] RealtimeError),
}

/// Runs the cable until `stop` is set or `setup.duration` has passed, and reports.
///
/// Logs `ready` (tracing, info) once both ports are open and forwarding.
pub fn run_cable(setup: &CableSetup, stop: &AtomicBool) -> Result<CableReport, CableError> {
    if setup.a == setup.b {
        return Err(CableError::Invalid(format!(
            "--a and --b are the same interface ({})",
            setup.a
        )));
    }
    let ifaces = [setup.a.clone(), setup.b.clone()];
    // Every frame belongs to the cable: nothing reaches the kernel stack of either side.
    let steering = Steering {
        forward_all: true,
        test_udp_port: 0,
        sfc_udp_port: 0,
    };
    let attached = attach_for(setup.backend, &ifaces, setup.xdp_mode, steering)?;
    let frames = setup.pool_frames();
    let wp = open_worker_ports(
        &ifaces,
        Queues::All,
        frames,
        iface_max_frame(&ifaces),
        setup.backend,
        attached.as_ref(),
    )?;
    if let Some(r) = &setup.realtime {
        sched::apply_to_this_thread(r)?;
    }
    tracing::info!(
        a = %setup.a,
        b = %setup.b,
        backend = wp.backend,
        frames,
        fifo_ab = setup.ab.fifo_limit_bytes(),
        fifo_ba = setup.ba.fifo_limit_bytes(),
        "ready"
    );
    let report = forward(wp, setup, stop);
    drop(attached);
    report
}

fn forward(
    wp: WorkerPorts,
    setup: &CableSetup,
    stop: &AtomicBool,
) -> Result<CableReport, CableError> {
    let WorkerPorts {
        mut pool,
        mut ports,
        backend,
        max_frame,
        ..
    } = wp;
    let start = now_ns();
    let end = setup.duration.map(|d| start + d.as_nanos() as u64);
    let mut lanes = [
        Lane::new(&setup.ab, setup.seed, 0, start),
        Lane::new(&setup.ba, setup.seed, 1, start),
    ];
    let names = ["a->b", "b->a"];
    let mut rx: Vec<RxFrame> = Vec::with_capacity(BATCH);
    let mut tx: Vec<Frame> = Vec::with_capacity(BATCH);
    let mut idler = Idler::new(ports.iter().map(|p| p.poll_fd()), setup.busy_poll);
    let mut warned = [0u64; 2];
    // Frames longer than the cable receives whole (truncated by AF_PACKET), per direction.
    let mut oversize = [0u64; 2];
    let mut last_warn = 0u64;
    let mut progress = [0, 1].map(|_| Progress::new(setup.progress, start));
    let result: Result<(), CableError> = (|| {
        loop {
            let now = now_ns();
            if stop.load(Ordering::Relaxed) || end.is_some_and(|e| now >= e) {
                return Ok(());
            }
            let mut work = 0;
            for (p, lane) in lanes.iter_mut().enumerate() {
                ports[p].reclaim(&mut pool)?;
                rx.clear();
                let n = ports[p].recv(&mut pool, &mut rx, BATCH, now)?;
                for r in rx.drain(..) {
                    if r.frame.len() > max_frame {
                        oversize[p] += 1;
                        pool.release(r.frame);
                        continue;
                    }
                    let len = r.frame.len() as usize;
                    let buf = pool.buf_mut(&r.frame);
                    let len = len.min(buf.len());
                    if let Err((_, frame)) = lane.ingress(r.frame, &mut buf[..len], r.rx_ns) {
                        pool.release(frame);
                    }
                }
                work += n;
            }
            for (d, lane) in lanes.iter_mut().enumerate() {
                let e = 1 - d;
                let now = now_ns();
                lane.poll(now);
                let room = ports[e].tx_room().min(BATCH);
                if room == 0 {
                    continue;
                }
                if lane.pop_ready(now, room, &mut tx) == 0 {
                    continue;
                }
                // What the port does not take stays in `tx` and goes back on the line, also
                // when the port fails.
                let sent = ports[e].send(&mut pool, &mut tx);
                lane.settle(now_ns(), &mut tx, |f| pool.release(f));
                work += sent?;
            }
            for (d, lane) in lanes.iter().enumerate() {
                let (frames, bytes) = lane.forwarded();
                if let Some(t) = progress[d].poll(now, frames, bytes) {
                    tracing::info!(
                        direction = names[d],
                        forwarded = frames,
                        rate = %format_rate(t.rate_bps()),
                        dropped_loss = lane.loss_drops(),
                        dropped_fifo_overflow = lane.overflow_drops(),
                        queued = lane.queued(),
                        "progress over the last {:.1} s",
                        t.secs()
                    );
                }
            }
            // Say it loudly when the FIFO bound drops frames (a real cable never would).
            let now = now_ns();
            if now.saturating_sub(last_warn) >= WARN_EVERY_NS {
                for (d, lane) in lanes.iter().enumerate() {
                    let o = lane.overflow_drops();
                    if o > warned[d] {
                        tracing::warn!(
                            direction = names[d],
                            dropped = o - warned[d],
                            total = o,
                            at_frame_cap = lane.frame_cap_drops(),
                            "cable FIFO overflow: {}",
                            overflow_advice(lane.frame_cap_drops() > 0)
                        );
                        warned[d] = o;
                        last_warn = now;
                    }
                }
            }
            if work == 0 {
                let mut deadline = [end, progress[0].next_deadline()]
                    .into_iter()
                    .flatten()
                    .min();
                for lane in &lanes {
                    // The idler wakes 15 µs early and spins the last 30 µs. Waking earlier
                    // (spinning longer) was tried: on two vCPUs the spinning cable then loses
                    // whole scheduler slices to the generator and sink (ms-long stalls).
                    if let Some(t) = lane.next_deadline() {
                        deadline = Some(deadline.map_or(t, |x| x.min(t)));
                    }
                }
                idler.wait(now, deadline);
            }
        }
    })();
    let stopped = now_ns();
    for lane in lanes.iter_mut() {
        lane.drain(|f| pool.release(f));
    }
    // Let the last transmissions complete before the sockets close.
    let settle = now_ns() + 20_000_000;
    while now_ns() < settle {
        for p in ports.iter_mut() {
            let _ = p.reclaim(&mut pool);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    result?;
    let mut directions = vec![
        lanes[0].report(names[0], &setup.a, &setup.b),
        lanes[1].report(names[1], &setup.b, &setup.a),
    ];
    let mut warnings = Vec::new();
    for (p, d) in directions.iter_mut().enumerate() {
        d.dropped_oversize = oversize[p] + ports[p].oversize_drops().iter().sum::<u64>();
        // Direction p receives on port p and sends on the other.
        d.dropped_at_socket = ports[p].kernel_drops().rx_lost();
        d.tx_refused = ports[1 - p].kernel_drops().tx_refused;
        if d.dropped_at_socket > 0 {
            warnings.push(format!(
                "{}: {} frames dropped at the cable's own receive socket (it did not keep up: \
                 give it its own core, --realtime); a real cable does not drop these",
                d.direction, d.dropped_at_socket
            ));
        }
        if d.tx_refused > 0 {
            warnings.push(format!(
                "{}: {} frames the kernel refused to send (no carrier, or the driver refused \
                 them); they never reached the link",
                d.direction, d.tx_refused
            ));
        }
        if d.dropped_oversize > 0 {
            warnings.push(format!(
                "{}: {} frames longer than the cable receives whole ({max_frame} bytes over \
                 {backend}) were dropped",
                d.direction, d.dropped_oversize
            ));
        }
        if d.dropped_fifo_overflow > 0 {
            warnings.push(format!(
                "{}: {} frames dropped by FIFO overflow (limit {} bytes = delay x rate + margin, \
                 {} frames; {} of them at the frame cap); a real cable does not drop these: {}",
                d.direction,
                d.dropped_fifo_overflow,
                d.fifo_limit_bytes,
                d.fifo_limit_frames,
                d.dropped_fifo_frame_cap,
                overflow_advice(d.dropped_fifo_frame_cap > 0)
            ));
        }
    }
    for w in &warnings {
        tracing::warn!("{w}");
    }
    Ok(CableReport {
        a: setup.a.clone(),
        b: setup.b.clone(),
        backend,
        seed: setup.seed,
        elapsed_s: stopped.saturating_sub(start) as f64 / 1e9,
        directions,
        warnings,
    })
}
