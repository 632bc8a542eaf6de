//! `forward`: a bare AF_XDP forwarder between two interfaces, the reference `bench/forward`
//! holds the daemon's worker and Open vSwitch against.
//!
//! It is built from the project's own socket code, as the daemon's worker is: the daemon's XDP
//! program on both interfaces, one UMEM pool shared by one socket on queue 0 of each
//! ([`open_worker_ports`]), so a frame received on one port is sent on the other without a copy.
//! Between receive and send there is nothing: no classification, no queue, no accounting, no
//! flow control, no link-up. What a turn does is receive a batch on each port, hand it to the
//! other port's transmit ring (a frame the ring has no room for is released and counted as
//! `no_room`), then take back completed frames and refill the fill rings. It busy-polls, as
//! Open vSwitch's PMD does, unless `--poll` (then it sleeps in `poll()` on both sockets, 10 ms
//! at most, when a turn received nothing).
//!
//! Below the sockets it runs as the daemon's lossy row does: the program sampled (no ingress
//! counters, one data frame in 64 stamped) and the fill rings lean (libxdp's 2,048 buffers).
//! With deep rings and every frame accounted it was the slowest of the three rows, since
//! those cost the receiving CPU (bench/RESULTS.md (10), (11), (34)).
//!
//! So where this loop delivers what the daemon and OVS do, the per-frame time that sets the
//! rate is the kernel's (copy-mode receive and transmit), which no AF_XDP forwarder avoids.

use std::sync::atomic::{AtomicBool, Ordering};

use lossless::dataplane::{
    clock::now_ns,
    open::{attach_all, open_worker_ports, Backend, Queues},
    pool::{Frame, FramePool},
    port::{FillDepth, KernelDrops, Port, PortError, RxFrame},
    xdp_prog::{IngressPolicy, Steering, XdpMode},
};
use serde::Serialize;

/// What one direction of the forwarder counted.
#[derive(Debug, Default, Serialize)]
pub struct Direction {
    /// Interface received on.
    pub from: String,
    /// Interface sent on.
    pub to: String,
    /// Frames the transmit ring took.
    pub forwarded: u64,
    /// Frames released because the transmit ring had no room.
    pub no_room: u64,
}

/// What `forward` prints.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Port 0 to port 1, then port 1 to port 0.
    pub directions: [Direction; 2],
    /// What the kernel dropped on each port's socket.
    pub kernel_drops: [KernelDrops; 2],
}

/// How the forwarder runs.
pub struct Setup<'a> {
    /// The two interfaces.
    pub ifaces: [String; 2],
    /// Frames in the shared UMEM.
    pub frames: u32,
    /// Frames taken per receive.
    pub batch: usize,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Sleep in `poll()` when a turn received nothing, instead of spinning.
    pub poll: bool,
    /// Set when the forwarder is to stop.
    pub stop: &'a AtomicBool,
}

/// Forwards until `setup.stop` is set; `ready` is called once both sockets are bound.
pub fn run(setup: Setup, ready: impl FnOnce()) -> Result<Report, String> {
    let steering = Steering {
        forward_all: true,
        test_udp_port: 0,
        sfc_udp_port: 0,
    };
    let attached =
        attach_all(&setup.ifaces, setup.xdp_mode, steering).map_err(|e| e.to_string())?;
    for prog in &attached.programs {
        prog.set_ingress_policy(IngressPolicy {
            sampled: true,
            ..IngressPolicy::default()
        })
        .map_err(|e| e.to_string())?;
    }
    let wp = open_worker_ports(
        &setup.ifaces,
        Queues::One(0),
        setup.frames,
        1518,
        Backend::AfXdp,
        Some(&attached),
    )
    .map_err(|e| e.to_string())?;
    let mut pool = wp.pool;
    let mut ports = wp.ports;
    let [a, b] = &setup.ifaces;
    let mut directions = [
        Direction {
            from: a.clone(),
            to: b.clone(),
            ..Direction::default()
        },
        Direction {
            from: b.clone(),
            to: a.clone(),
            ..Direction::default()
        },
    ];
    let mut fds: Vec<libc::pollfd> = ports
        .iter()
        .map(|p| libc::pollfd {
            fd: p.poll_fd().expect("AF_XDP sockets have a descriptor"),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let batch = setup.batch.clamp(1, 256);
    let mut rx: Vec<RxFrame> = Vec::with_capacity(batch);
    let mut tx: Vec<Frame> = Vec::with_capacity(batch);
    for p in ports.iter_mut() {
        p.set_fill_depth(FillDepth::Lean);
        p.reclaim(&mut pool).map_err(|e| e.to_string())?;
    }
    ready();
    while !setup.stop.load(Ordering::Relaxed) {
        let mut got = 0;
        for (from, d) in directions.iter_mut().enumerate() {
            got += turn(&mut pool, &mut ports, from, d, &mut rx, &mut tx, batch)
                .map_err(|e| e.to_string())?;
        }
        for p in ports.iter_mut() {
            p.reclaim(&mut pool).map_err(|e| e.to_string())?;
        }
        if setup.poll && got == 0 {
            // SAFETY: `fds` holds two valid pollfds for the duration of the call.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 10) };
        }
    }
    for p in ports.iter_mut() {
        p.give_up_tx(&mut pool);
    }
    Ok(Report {
        directions,
        kernel_drops: [ports[0].kernel_drops(), ports[1].kernel_drops()],
    })
}

/// One batch from port `from` to the other; returns the frames received.
fn turn(
    pool: &mut FramePool,
    ports: &mut [Box<dyn Port>],
    from: usize,
    d: &mut Direction,
    rx: &mut Vec<RxFrame>,
    tx: &mut Vec<Frame>,
    batch: usize,
) -> Result<usize, PortError> {
    rx.clear();
    let n = ports[from].recv(pool, rx, batch, now_ns())?;
    if n == 0 {
        return Ok(0);
    }
    tx.clear();
    tx.extend(rx.drain(..).map(|r| r.frame));
    d.forwarded += ports[1 - from].send(pool, tx)? as u64;
    d.no_room += tx.len() as u64;
    for f in tx.drain(..) {
        pool.release(f);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use lossless::{dataplane::mem_port::mem_link, wire::MacAddr};

    use super::*;

    #[test]
    fn a_turn_sends_what_one_port_received_on_the_other_and_counts_what_had_no_room() {
        let mac = MacAddr([2, 0, 0, 0, 0, 1]);
        let (a, peer_a) = mem_link("a", mac, 64);
        let (b, peer_b) = mem_link("b", mac, 3);
        let mut ports: Vec<Box<dyn Port>> = vec![Box::new(a), Box::new(b)];
        let mut pool = FramePool::heap(64).expect("pool");
        let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60]).collect();
        for f in &frames {
            peer_a.inject(f, 1);
        }
        let (mut rx, mut tx) = (Vec::new(), Vec::new());
        let mut d = Direction::default();
        let got = turn(&mut pool, &mut ports, 0, &mut d, &mut rx, &mut tx, 64).expect("turn");
        assert_eq!(got, 5);
        assert_eq!(
            (d.forwarded, d.no_room),
            (3, 2),
            "b's ring takes 3 per send"
        );
        assert_eq!(peer_b.take(), frames[..3].to_vec(), "in order, unchanged");
        assert!(
            peer_a.take().is_empty(),
            "nothing goes back where it came from"
        );
        assert_eq!(
            pool.available(),
            64,
            "the unsent frames went back to the pool"
        );
        let got = turn(&mut pool, &mut ports, 1, &mut d, &mut rx, &mut tx, 64).expect("turn");
        assert_eq!(got, 0, "b received nothing");
    }
}
