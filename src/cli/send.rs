//! `lossless send pfc|pause`: inject PFC or PAUSE frames, for testing a device under test.

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{
    common::{self, IfaceArgs},
    error::CliError,
};
use crate::{
    control::signals,
    dataplane::{clock::now_ns, port::send_or_release, xdp_prog::Steering},
    fc::PRIORITIES,
    traffic::open_iface,
    wire::MacControl,
};

/// What to send.
#[derive(Debug, Clone, Subcommand)]
pub enum SendCommand {
    /// 802.1Qbb PFC frames.
    Pfc(SendPfcArgs),
    /// 802.3x PAUSE frames.
    Pause(SendPauseArgs),
}

/// Flags shared by both frame kinds.
#[derive(Debug, Clone, Args)]
pub struct StreamArgs {
    #[command(flatten)]
    pub iface: IfaceArgs,
    /// Pause time in quanta (0 = resume).
    #[arg(long, default_value_t = u16::MAX)]
    pub quanta: u16,
    /// Number of frames to send.
    #[arg(long, default_value_t = 1)]
    pub count: u64,
    /// Time between frames ("1ms").
    #[arg(long, value_parser = common::duration, default_value = "1ms")]
    pub interval: std::time::Duration,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Flags of `send pfc`.
#[derive(Debug, Clone, Args)]
pub struct SendPfcArgs {
    #[command(flatten)]
    pub stream: StreamArgs,
    /// Priorities to pause (comma-separated, 0..=7); the others' enable bits stay clear.
    #[arg(long, value_delimiter = ',', required = true, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub priorities: Vec<u8>,
}

/// Flags of `send pause`.
#[derive(Debug, Clone, Args)]
pub struct SendPauseArgs {
    #[command(flatten)]
    pub stream: StreamArgs,
}

/// What was sent.
#[derive(Debug, Clone, Serialize)]
pub struct SendReport {
    /// Interface.
    pub iface: String,
    /// The frame, as decoded.
    pub frame: String,
    /// Frames handed to the kernel to send.
    pub sent: u64,
    /// Of `sent`, those the kernel took and dropped instead of sending (copy-mode AF_XDP: the
    /// port had no carrier, or its driver refused them); they never reached the link.
    pub tx_refused: u64,
}

/// Runs `lossless send`.
pub fn run(cmd: &SendCommand) -> Result<(), CliError> {
    let (stream, frame) = match cmd {
        SendCommand::Pfc(a) => {
            let enable = a.priorities.iter().fold(0u8, |m, p| m | (1 << p));
            let quanta = std::array::from_fn(|p| {
                if enable & (1 << p) != 0 {
                    a.stream.quanta
                } else {
                    0
                }
            });
            debug_assert_eq!(quanta.len(), PRIORITIES);
            (&a.stream, MacControl::Pfc { enable, quanta })
        }
        SendCommand::Pause(a) => (
            &a.stream,
            MacControl::Pause {
                quanta: a.stream.quanta,
            },
        ),
    };
    let stop = signals::install();
    let steering = Steering {
        forward_all: false,
        test_udp_port: 0,
        sfc_udp_port: 0,
    };
    let (mut wp, _attached) = open_iface(&stream.iface.setup(common::SENDER_FRAMES), steering)?;
    let port = &mut wp.ports[0];
    let mut sent = 0;
    let mut next = now_ns();
    let mut batch = Vec::with_capacity(1);
    while sent < stream.count && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let now = now_ns();
        port.reclaim(&mut wp.pool)?;
        if now < next {
            std::thread::sleep(std::time::Duration::from_nanos(
                (next - now).min(10_000_000),
            ));
            continue;
        }
        let mut f = wp.pool.alloc().ok_or(CliError::PoolExhausted)?;
        let len = match frame.emit_frame(port.mac(), wp.pool.buf_mut(&f)) {
            Ok(len) => len,
            Err(e) => {
                wp.pool.release(f);
                return Err(e.into());
            }
        };
        f.set_len(len);
        if send_or_release(&mut **port, &mut wp.pool, &mut batch, f)? {
            sent += 1;
            next += stream.interval.as_nanos() as u64;
        }
    }
    // Give copy-mode TX a moment to complete before the socket closes.
    for _ in 0..20 {
        port.reclaim(&mut wp.pool)?;
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let report = SendReport {
        iface: stream.iface.iface.clone(),
        frame: format!("{frame:?}"),
        sent,
        tx_refused: port.kernel_drops().tx_refused,
    };
    common::print_report(&report, stream.json, |r| {
        let mut s = format!("sent {} frame(s) on {}: {}\n", r.sent, r.iface, r.frame);
        if r.tx_refused > 0 {
            s += &format!(
                "{} of them refused by the kernel (no carrier, or the driver refused them): they never reached the link\n",
                r.tx_refused
            );
        }
        s
    });
    Ok(())
}
