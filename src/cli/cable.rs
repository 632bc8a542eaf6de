//! `lossless cable`: emulate a cable between two interfaces (delay, jitter, rate, loss,
//! corruption, reordering), reported per direction.

use std::time::Duration;

use clap::Args;

use super::{common, error::CliError};
use crate::{
    cable::{
        report, rules::parse_probability, run_cable, CableSetup, LaneSettings, Matcher, RuleSpec,
    },
    control::signals,
    dataplane::{open::Backend, sched, xdp_prog::XdpMode},
};

fn matcher(s: &str) -> Result<Matcher, String> {
    s.parse()
}

/// Flags of `lossless cable`. Per-direction flags (`-ab`: frames entering on `--a` and
/// leaving on `--b`; `-ba`: the reverse) override the flag without suffix.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("loss_rule").args(["loss", "loss_ab", "loss_ba"]).multiple(true)))]
#[command(group(clap::ArgGroup::new("corrupt_rule").args(["corrupt", "corrupt_ab", "corrupt_ba"]).multiple(true)))]
#[command(group(clap::ArgGroup::new("reorder_rule").args(["reorder", "reorder_ab", "reorder_ba"]).multiple(true)))]
pub struct CableArgs {
    /// Side A interface.
    #[arg(long = "a", value_name = "IFACE")]
    pub a: String,
    /// Side B interface.
    #[arg(long = "b", value_name = "IFACE")]
    pub b: String,
    /// One-way delay of both directions ("100us", "1ms"): a frame leaves this long after its
    /// RX timestamp.
    #[arg(long, value_parser = common::duration, default_value = "0s")]
    pub delay: Duration,
    /// One-way delay of direction a->b.
    #[arg(long, value_parser = common::duration)]
    pub delay_ab: Option<Duration>,
    /// One-way delay of direction b->a.
    #[arg(long, value_parser = common::duration)]
    pub delay_ba: Option<Duration>,
    /// Jitter: each frame's delay varies uniformly within ± this; order is still kept, so a
    /// frame never leaves before the one ahead of it.
    #[arg(long, value_parser = common::duration, default_value = "0s")]
    pub jitter: Duration,
    /// Jitter of direction a->b.
    #[arg(long, value_parser = common::duration)]
    pub jitter_ab: Option<Duration>,
    /// Jitter of direction b->a.
    #[arg(long, value_parser = common::duration)]
    pub jitter_ba: Option<Duration>,
    /// Line rate of both directions ("10Gbit"): serialisation time per frame with 24 bytes of
    /// preamble, SFD, FCS and inter-frame gap counted. Unshaped if not given.
    #[arg(long, value_parser = common::rate)]
    pub rate: Option<u64>,
    /// Line rate of direction a->b.
    #[arg(long, value_parser = common::rate)]
    pub rate_ab: Option<u64>,
    /// Line rate of direction b->a.
    #[arg(long, value_parser = common::rate)]
    pub rate_ba: Option<u64>,
    /// Drop frames matching --loss-match with this probability ("1%", "50ppm", "0.01").
    #[arg(long, value_parser = parse_probability)]
    pub loss: Option<f64>,
    /// Loss probability of direction a->b.
    #[arg(long, value_parser = parse_probability)]
    pub loss_ab: Option<f64>,
    /// Loss probability of direction b->a.
    #[arg(long, value_parser = parse_probability)]
    pub loss_ba: Option<f64>,
    /// Frames the loss rule applies to, comma-separated: all, data, pfc, pause, mac-control,
    /// credit, sfc, lldp, ptp, ethertype=0xNNNN.
    #[arg(long, value_parser = matcher, default_value = "all", requires = "loss_rule")]
    pub loss_match: Matcher,
    /// Flip one random bit after the Ethernet header of frames matching --corrupt-match with
    /// this probability.
    #[arg(long, value_parser = parse_probability)]
    pub corrupt: Option<f64>,
    /// Corruption probability of direction a->b.
    #[arg(long, value_parser = parse_probability)]
    pub corrupt_ab: Option<f64>,
    /// Corruption probability of direction b->a.
    #[arg(long, value_parser = parse_probability)]
    pub corrupt_ba: Option<f64>,
    /// Frames the corruption rule applies to (same classes as --loss-match).
    #[arg(long, value_parser = matcher, default_value = "data", requires = "corrupt_rule")]
    pub corrupt_match: Matcher,
    /// Swap frames matching --reorder-match with the next frame, with this probability.
    #[arg(long, value_parser = parse_probability)]
    pub reorder: Option<f64>,
    /// Reorder probability of direction a->b.
    #[arg(long, value_parser = parse_probability)]
    pub reorder_ab: Option<f64>,
    /// Reorder probability of direction b->a.
    #[arg(long, value_parser = parse_probability)]
    pub reorder_ba: Option<f64>,
    /// Frames the reorder rule applies to (same classes as --loss-match).
    #[arg(long, value_parser = matcher, default_value = "data", requires = "reorder_rule")]
    pub reorder_match: Matcher,
    /// Bytes each direction's FIFO may hold before it drops (and warns). Default:
    /// (delay + jitter) x rate (10 Gbit/s if unshaped) plus max(64 KiB, 1/8 of that).
    #[arg(long, value_parser = common::size)]
    pub fifo_limit: Option<u64>,
    /// FIFO limit of direction a->b.
    #[arg(long, value_parser = common::size)]
    pub fifo_limit_ab: Option<u64>,
    /// FIFO limit of direction b->a.
    #[arg(long, value_parser = common::size)]
    pub fifo_limit_ba: Option<u64>,
    /// Seed of the random rules and jitter: the same seed over the same frame sequence makes
    /// the same decisions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop after this long ("10s"); otherwise run until SIGINT/SIGTERM.
    #[arg(long, value_parser = common::duration)]
    pub duration: Option<Duration>,
    /// Packet I/O backend: auto (AF_XDP, else AF_PACKET), af-xdp or af-packet.
    #[arg(long, value_enum, default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// XDP attach mode: auto (native, else generic), native or skb.
    #[arg(long, value_enum, default_value_t = XdpMode::Auto)]
    pub xdp_mode: XdpMode,
    /// Frames in the frame pool (2 KiB each). Default: enough for both FIFOs and the rings.
    #[arg(long)]
    pub frames: Option<u32>,
    /// Spin instead of sleeping when idle (most accurate delay; burns a core).
    #[arg(long)]
    pub busy_poll: bool,
    #[command(flatten)]
    pub realtime: common::RealtimeArgs,
    #[command(flatten)]
    pub progress: common::ProgressArgs,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn rule(p: Option<f64>, m: &Matcher) -> Option<RuleSpec> {
    p.filter(|p| *p > 0.0).map(|probability| RuleSpec {
        probability,
        matcher: m.clone(),
    })
}

impl CableArgs {
    /// The settings of direction 0 (a->b) or 1 (b->a).
    pub fn lane(&self, dir: usize) -> LaneSettings {
        fn pick<T>(dir: usize, ab: T, ba: T) -> T {
            if dir == 0 {
                ab
            } else {
                ba
            }
        }
        let ns = |d: Duration| d.as_nanos() as u64;
        LaneSettings {
            delay_ns: ns(pick(dir, self.delay_ab, self.delay_ba).unwrap_or(self.delay)),
            jitter_ns: ns(pick(dir, self.jitter_ab, self.jitter_ba).unwrap_or(self.jitter)),
            rate_bps: pick(dir, self.rate_ab, self.rate_ba).or(self.rate),
            loss: rule(
                pick(dir, self.loss_ab, self.loss_ba).or(self.loss),
                &self.loss_match,
            ),
            corrupt: rule(
                pick(dir, self.corrupt_ab, self.corrupt_ba).or(self.corrupt),
                &self.corrupt_match,
            ),
            reorder: rule(
                pick(dir, self.reorder_ab, self.reorder_ba).or(self.reorder),
                &self.reorder_match,
            ),
            fifo_limit: pick(dir, self.fifo_limit_ab, self.fifo_limit_ba).or(self.fifo_limit),
        }
    }

    /// The library's view of these flags.
    pub fn setup(&self) -> CableSetup {
        CableSetup {
            a: self.a.clone(),
            b: self.b.clone(),
            ab: self.lane(0),
            ba: self.lane(1),
            seed: self.seed,
            duration: self.duration,
            backend: self.backend,
            xdp_mode: self.xdp_mode,
            frames: self.frames,
            busy_poll: self.busy_poll,
            realtime: self.realtime.request(sched::DEFAULT_PRIORITY),
            progress: self.progress.progress,
        }
    }
}

/// Runs `lossless cable`.
pub fn run(args: &CableArgs) -> Result<(), CliError> {
    let stop = signals::install();
    let report = run_cable(&args.setup(), stop)?;
    common::print_report(&report, args.json, report::text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: CableArgs,
    }

    #[test]
    fn per_direction_flags_override() {
        let t = T::parse_from([
            "x",
            "--a",
            "p",
            "--b",
            "q",
            "--delay",
            "100us",
            "--delay-ba",
            "1ms",
            "--rate",
            "1Gbit",
            "--loss",
            "1%",
            "--loss-ab",
            "0",
            "--loss-match",
            "pfc,data",
            "--jitter-ab",
            "5us",
        ]);
        let s = t.a.setup();
        assert_eq!(s.ab.delay_ns, 100_000);
        assert_eq!(s.ba.delay_ns, 1_000_000);
        assert_eq!(s.ab.jitter_ns, 5_000);
        assert_eq!(s.ba.jitter_ns, 0);
        assert_eq!(s.ab.rate_bps, Some(1_000_000_000));
        assert_eq!(s.ab.loss, None);
        let l = s.ba.loss.unwrap();
        assert_eq!(l.probability, 0.01);
        assert_eq!(l.matcher.to_string(), "pfc,data");
        assert!(s.ab.corrupt.is_none() && s.ab.reorder.is_none());
        assert!(T::try_parse_from(["x", "--a", "p", "--b", "q", "--loss", "200%"]).is_err());
        assert!(T::try_parse_from(["x", "--a", "p", "--b", "q", "--loss-match", "nope"]).is_err());
    }
}
