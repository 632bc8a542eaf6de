//! 802.1Qbb priority flow control: the congestion point that generates PFC frames from
//! buffer occupancy, and the reaction point that keeps per-priority pause timers.

use super::{priorities, quanta_to_ns, PRIORITIES};
use crate::wire::MacControl;

/// XOFF/XON thresholds of one (ingress port, priority) buffer, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PfcThresholds {
    /// At or above this many bytes the priority is paused upstream.
    pub xoff: u64,
    /// At or below this many bytes a paused priority is resumed.
    pub xon: u64,
}

impl PfcThresholds {
    /// Whether a priority holding `bytes` is due a PFC frame: at or above XOFF, or
    /// `congested` (its port short of something other than bytes: RX buffers), while not
    /// paused upstream (`in_xoff` false); at or below XON and no longer congested while
    /// paused. The one rule of the congestion point, which the other workers also judge a
    /// crossing by.
    pub fn crossed(&self, bytes: u64, in_xoff: bool, congested: bool) -> bool {
        match in_xoff {
            false => congested || bytes >= self.xoff,
            true => !congested && bytes <= self.xon,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// Not pausing the upstream.
    Xon,
    /// Pausing the upstream; the pause must be refreshed at `refresh_at`.
    Xoff { refresh_at: u64 },
}

/// Congestion point of one ingress port: turns per-priority buffer occupancy into PFC frames.
///
/// Occupancy is an input (the dataplane charges bytes from RX until the frame leaves on TX);
/// [`PfcGenerator::poll`] decides whether a frame must go out now: XOFF when a priority
/// reaches its XOFF threshold, a refresh before the pause it sent expires while the priority
/// is still above XON, and a zero time once it falls to XON.
#[derive(Debug, Clone)]
pub struct PfcGenerator {
    thresholds: [Option<PfcThresholds>; PRIORITIES],
    state: [Signal; PRIORITIES],
    pause_quanta: u16,
    refresh_ns: u64,
    xoff_transitions: [u64; PRIORITIES],
    /// Time each priority spent paused upstream in finished episodes, ns.
    xoff_held_ns: [u64; PRIORITIES],
    /// When the running episode of each priority paused upstream began.
    xoff_since: [u64; PRIORITIES],
    /// Pausing every PFC priority whatever the occupancy (the daemon is stopping).
    holding: bool,
    /// Bit p set while `thresholds[p]` is some.
    lossless: u8,
    /// Bit p set while priority p is in XOFF. With `lossless`, the priorities a poll must
    /// look at: any other is XON without thresholds and has nothing to send.
    xoff: u8,
}

/// Bitmask of the priorities with thresholds.
fn lossless_mask(thresholds: &[Option<PfcThresholds>; PRIORITIES]) -> u8 {
    (0..PRIORITIES)
        .filter(|&p| thresholds[p].is_some())
        .fold(0, |m, p| m | (1 << p))
}

impl PfcGenerator {
    /// A generator that sends `pause_quanta` per XOFF, refreshed after half the pause time
    /// at `speed_bps`. Priorities with `None` thresholds never generate PFC.
    pub fn new(
        thresholds: [Option<PfcThresholds>; PRIORITIES],
        pause_quanta: u16,
        speed_bps: u64,
    ) -> Self {
        let refresh_ns = (quanta_to_ns(pause_quanta, speed_bps) / 2).max(1);
        PfcGenerator {
            thresholds,
            state: [Signal::Xon; PRIORITIES],
            pause_quanta,
            refresh_ns,
            xoff_transitions: [0; PRIORITIES],
            xoff_held_ns: [0; PRIORITIES],
            xoff_since: [0; PRIORITIES],
            holding: false,
            lossless: lossless_mask(&thresholds),
            xoff: 0,
        }
    }

    /// Pauses every PFC priority upstream from `now` on, whatever the occupancy, refreshing
    /// the pause and never resuming (a stopping daemon drains its queues). Returns the XOFF.
    pub fn hold(&mut self, now: u64) -> Option<MacControl> {
        self.holding = true;
        let mut quanta = [0u16; PRIORITIES];
        let mut enable = 0u8;
        for p in (0..PRIORITIES).filter(|&p| self.thresholds[p].is_some()) {
            enable |= 1 << p;
            quanta[p] = self.pause_quanta;
            if self.state[p] == Signal::Xon {
                self.xoff_since[p] = now;
            }
            self.state[p] = Signal::Xoff {
                refresh_at: now.saturating_add(self.refresh_ns),
            };
            self.xoff |= 1 << p;
        }
        (enable != 0).then_some(MacControl::Pfc { enable, quanta })
    }

    /// A zero pause for every PFC priority: a starting daemon resumes whatever a previous
    /// instance left paused upstream.
    pub fn resume_all(&self) -> Option<MacControl> {
        let enable = self.lossless;
        (enable != 0).then_some(MacControl::Pfc {
            enable,
            quanta: [0; PRIORITIES],
        })
    }

    /// Applies new thresholds and pause time (configuration reload), keeping each priority's
    /// XOFF/XON state so the upstream is neither left paused nor resumed by the change. A
    /// priority that is paused upstream and no longer lossless is resumed at the next poll.
    pub fn reconfigure(
        &mut self,
        thresholds: [Option<PfcThresholds>; PRIORITIES],
        pause_quanta: u16,
        speed_bps: u64,
    ) {
        self.thresholds = thresholds;
        self.lossless = lossless_mask(&thresholds);
        self.pause_quanta = pause_quanta;
        self.refresh_ns = (quanta_to_ns(pause_quanta, speed_bps) / 2).max(1);
    }

    /// Decides the PFC frame to send at `now` for the given per-priority occupancy. The
    /// priorities in `congested` are treated as above XOFF whatever their bytes: the port
    /// is short of something other than bytes (buffers for its RX ring).
    pub fn poll(
        &mut self,
        now: u64,
        occupancy: &[u64; PRIORITIES],
        congested: u8,
    ) -> Option<MacControl> {
        let mut enable = 0u8;
        let mut quanta = [0u16; PRIORITIES];
        for p in priorities(self.lossless | self.xoff) {
            let bytes = occupancy[p];
            let forced = congested & (1 << p) != 0;
            let send = match (self.thresholds[p], self.state[p]) {
                (None, Signal::Xon) => None,
                (None, Signal::Xoff { .. }) => Some(0),
                (Some(t), state) => match state {
                    Signal::Xon if t.crossed(bytes, false, forced) => {
                        self.xoff_transitions[p] += 1;
                        Some(self.pause_quanta)
                    }
                    Signal::Xoff { .. } if t.crossed(bytes, true, forced) && !self.holding => {
                        Some(0)
                    }
                    Signal::Xoff { refresh_at } if now >= refresh_at => Some(self.pause_quanta),
                    _ => None,
                },
            };
            if let Some(q) = send {
                enable |= 1 << p;
                quanta[p] = q;
                match (self.state[p], q) {
                    (Signal::Xon, 1..) => self.xoff_since[p] = now,
                    (Signal::Xoff { .. }, 0) => {
                        self.xoff_held_ns[p] += now.saturating_sub(self.xoff_since[p]);
                    }
                    _ => {}
                }
                self.state[p] = if q == 0 {
                    self.xoff &= !(1 << p);
                    Signal::Xon
                } else {
                    self.xoff |= 1 << p;
                    Signal::Xoff {
                        refresh_at: now.saturating_add(self.refresh_ns),
                    }
                };
            }
        }
        (enable != 0).then_some(MacControl::Pfc { enable, quanta })
    }

    /// The frame `poll`, `hold` or `resume_all` gave at `now` was not sent (no buffer to
    /// build it in, no room to queue it): every priority it named is due again at the next
    /// poll. A lost XOFF is otherwise retried only at the refresh, half a pause later (17 ms
    /// at 1 Gbit/s with the default quanta), while the upstream sends into the headroom; a
    /// lost XON would leave the upstream paused for the whole pause. An XOFF is retried while
    /// the bytes stay above XON, an XON while they stay at or below it: the priority counts
    /// as paused upstream until a frame saying otherwise goes out, which is also what the
    /// upstream sees.
    pub fn unsent(&mut self, frame: &MacControl, now: u64) {
        let MacControl::Pfc { enable, .. } = *frame else {
            return;
        };
        for p in priorities(enable) {
            if self.state[p] == Signal::Xon {
                self.xoff_since[p] = now;
            }
            self.xoff |= 1 << p;
            self.state[p] = Signal::Xoff { refresh_at: now };
        }
    }

    /// The earliest time a refresh is due, if any priority is paused.
    pub fn next_deadline(&self) -> Option<u64> {
        self.state
            .iter()
            .filter_map(|s| match s {
                Signal::Xoff { refresh_at } => Some(*refresh_at),
                Signal::Xon => None,
            })
            .min()
    }

    /// The XOFF/XON per priority in force (`None`: no PFC).
    pub fn thresholds(&self) -> &[Option<PfcThresholds>; PRIORITIES] {
        &self.thresholds
    }

    /// Bitmask of priorities this generator currently holds paused upstream.
    pub fn xoff_mask(&self) -> u8 {
        self.xoff
    }

    /// XON→XOFF transitions per priority since creation.
    pub fn xoff_transitions(&self) -> &[u64; PRIORITIES] {
        &self.xoff_transitions
    }

    /// Time each priority has been held paused upstream since creation, up to `now` (the
    /// running episode included), ns: what mlx5 calls `tx_prioN_pause_duration`.
    pub fn xoff_held_ns(&self, now: u64) -> [u64; PRIORITIES] {
        std::array::from_fn(|p| {
            let running = match self.state[p] {
                Signal::Xoff { .. } => now.saturating_sub(self.xoff_since[p]),
                Signal::Xon => 0,
            };
            self.xoff_held_ns[p] + running
        })
    }
}

/// Reaction point of one egress port: per-priority pause timers driven by received
/// PAUSE/PFC frames. A new time replaces the running timer; zero resumes; PAUSE pauses all.
#[derive(Debug, Clone)]
pub struct PauseTimers {
    speed_bps: u64,
    until: [u64; PRIORITIES],
    accounted_to: [u64; PRIORITIES],
    paused_ns: [u64; PRIORITIES],
}

impl PauseTimers {
    /// Timers for a port whose quanta run at `speed_bps`.
    pub fn new(speed_bps: u64) -> Self {
        PauseTimers {
            speed_bps,
            until: [0; PRIORITIES],
            accounted_to: [0; PRIORITIES],
            paused_ns: [0; PRIORITIES],
        }
    }

    /// New pause deadlines that `frame` received at `now` sets, per priority (`None` = untouched).
    pub fn deadlines(frame: &MacControl, now: u64, speed_bps: u64) -> [Option<u64>; PRIORITIES] {
        let mut out = [None; PRIORITIES];
        match *frame {
            MacControl::Pause { quanta } => {
                let until = now.saturating_add(quanta_to_ns(quanta, speed_bps));
                out = [Some(until); PRIORITIES];
            }
            MacControl::Pfc { enable, quanta } => {
                for p in 0..PRIORITIES {
                    if enable & (1 << p) != 0 {
                        out[p] = Some(now.saturating_add(quanta_to_ns(quanta[p], speed_bps)));
                    }
                }
            }
        }
        out
    }

    /// Applies a received PAUSE or PFC frame.
    pub fn on_frame(&mut self, frame: &MacControl, now: u64) {
        self.settle(now);
        for (p, d) in Self::deadlines(frame, now, self.speed_bps)
            .iter()
            .enumerate()
        {
            if let Some(until) = *d {
                self.until[p] = until;
            }
        }
    }

    /// True if priority `p` may not be transmitted at `now`.
    pub fn is_paused(&self, p: usize, now: u64) -> bool {
        self.until[p] > now
    }

    /// Bitmask of paused priorities at `now`.
    pub fn paused_mask(&self, now: u64) -> u8 {
        (0..PRIORITIES).fold(0, |m, p| m | (u8::from(self.is_paused(p, now)) << p))
    }

    /// The earliest time a running pause ends, if any.
    pub fn next_resume(&self, now: u64) -> Option<u64> {
        self.until.iter().copied().filter(|&u| u > now).min()
    }

    /// Total time each priority has spent paused up to `now`.
    pub fn paused_ns(&mut self, now: u64) -> [u64; PRIORITIES] {
        self.settle(now);
        self.paused_ns
    }

    fn settle(&mut self, now: u64) {
        for p in 0..PRIORITIES {
            let from = self.accounted_to[p];
            let to = self.until[p].min(now);
            if to > from {
                self.paused_ns[p] += to - from;
            }
            self.accounted_to[p] = self.accounted_to[p].max(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GBIT: u64 = 1_000_000_000;
    const T: PfcThresholds = PfcThresholds {
        xoff: 10_000,
        xon: 5_000,
    };

    fn gen() -> PfcGenerator {
        let mut th = [None; PRIORITIES];
        th[3] = Some(T);
        PfcGenerator::new(th, 1000, GBIT) // 1000 quanta = 512 us at 1G; refresh every 256 us
    }

    fn occ(p3: u64) -> [u64; PRIORITIES] {
        let mut o = [0; PRIORITIES];
        o[3] = p3;
        o
    }

    fn pfc(enable: u8, p: usize, q: u16) -> MacControl {
        let mut quanta = [0; PRIORITIES];
        quanta[p] = q;
        MacControl::Pfc { enable, quanta }
    }

    /// A PFC frame the worker could not send is due again at the next poll: the XOFF while
    /// the bytes stay above XON (not half a pause later, at the refresh), the XON while they
    /// stay at or below it (not never: the upstream would stay paused for the whole pause).
    #[test]
    fn a_frame_not_sent_is_sent_at_the_next_poll() {
        let mut g = gen();
        let xoff = g.poll(0, &occ(20_000), 0).expect("XOFF");
        g.unsent(&xoff, 0);
        assert_eq!(g.next_deadline(), Some(0));
        assert_eq!(g.poll(1_000, &occ(20_000), 0), Some(pfc(0b1000, 3, 1000)));
        assert_eq!(
            g.poll(2_000, &occ(20_000), 0),
            None,
            "sent: refresh at 257 us"
        );
        assert_eq!(g.next_deadline(), Some(257_000));

        let xon = g.poll(3_000, &occ(4_000), 0).expect("XON");
        assert_eq!(xon, pfc(0b1000, 3, 0));
        g.unsent(&xon, 3_000);
        assert_eq!(
            g.xoff_mask(),
            0b1000,
            "paused upstream until an XON goes out"
        );
        assert_eq!(g.poll(4_000, &occ(4_000), 0), Some(pfc(0b1000, 3, 0)));
        assert_eq!((g.xoff_mask(), g.next_deadline()), (0, None));
        assert_eq!(g.xoff_held_ns(10_000)[3], 4_000, "one episode, 0 to 4 us");

        // An XON lost while the bytes climb back above XON: the next poll refreshes the XOFF.
        g.poll(5_000, &occ(20_000), 0).expect("XOFF");
        let xon = g.poll(6_000, &occ(4_000), 0).expect("XON");
        g.unsent(&xon, 6_000);
        assert_eq!(g.poll(7_000, &occ(8_000), 0), Some(pfc(0b1000, 3, 1000)));
    }

    /// Times near the end of the clock saturate: a pause received there holds, a refresh
    /// is due at the end rather than at once (wrapped) on every poll.
    #[test]
    fn times_near_the_end_of_the_clock_saturate() {
        let mut t = PauseTimers::new(GBIT);
        t.on_frame(&MacControl::Pause { quanta: 1000 }, u64::MAX - 1000);
        assert!(t.is_paused(0, u64::MAX - 999));
        let mut g = gen();
        assert!(g.poll(u64::MAX - 10, &occ(20_000), 0).is_some());
        assert_eq!(g.poll(u64::MAX - 9, &occ(20_000), 0), None);
        assert_eq!(g.next_deadline(), Some(u64::MAX));
    }

    #[test]
    fn hold_pauses_everything_and_never_resumes_until_dropped() {
        let t = PfcThresholds {
            xoff: 1000,
            xon: 500,
        };
        let mut thresholds = [None; PRIORITIES];
        thresholds[3] = Some(t);
        thresholds[5] = Some(t);
        let mut g = PfcGenerator::new(thresholds, 100, 1_000_000_000);
        assert_eq!(
            g.resume_all(),
            Some(MacControl::Pfc {
                enable: 0b10_1000,
                quanta: [0; PRIORITIES]
            })
        );
        let mut quanta = [0; PRIORITIES];
        quanta[3] = 100;
        quanta[5] = 100;
        assert_eq!(
            g.hold(0),
            Some(MacControl::Pfc {
                enable: 0b10_1000,
                quanta
            })
        );
        // Empty buffers: no XON while holding, but the pause is refreshed (100 quanta at
        // 1 Gbit/s last 51.2 us; refresh at half).
        assert_eq!(g.poll(1_000, &[0; PRIORITIES], 0), None);
        assert_eq!(
            g.poll(26_000, &[0; PRIORITIES], 0),
            Some(MacControl::Pfc {
                enable: 0b10_1000,
                quanta
            })
        );
        assert_eq!(
            PfcGenerator::new([None; PRIORITIES], 100, 1).resume_all(),
            None
        );
    }

    #[test]
    fn xoff_xon_hysteresis() {
        let mut g = gen();
        assert_eq!(g.poll(0, &occ(9_999), 0), None);
        assert_eq!(g.poll(1, &occ(10_000), 0), Some(pfc(0x08, 3, 1000)));
        assert_eq!(g.xoff_mask(), 0x08);
        // Between XON and XOFF nothing changes, in either direction.
        assert_eq!(g.poll(2, &occ(7_000), 0), None);
        assert_eq!(g.poll(3, &occ(12_000), 0), None);
        assert_eq!(g.poll(4, &occ(5_001), 0), None);
        assert_eq!(g.poll(5, &occ(5_000), 0), Some(pfc(0x08, 3, 0)));
        assert_eq!(g.xoff_mask(), 0);
        assert_eq!(
            g.poll(6, &occ(9_000), 0),
            None,
            "below XOFF after XON: stay resumed"
        );
        assert_eq!(g.xoff_transitions()[3], 1);
        // Priorities without thresholds never pause.
        let mut o = occ(0);
        o[0] = u64::MAX;
        assert_eq!(g.poll(7, &o, 0), None);
    }

    #[test]
    fn time_held_paused_counts_each_episode_and_the_running_one() {
        let mut g = gen();
        assert_eq!(g.xoff_held_ns(1_000)[3], 0);
        g.poll(1_000, &occ(10_000), 0); // XOFF
        assert_eq!(g.xoff_held_ns(1_500)[3], 500, "the running episode counts");
        g.poll(200_000, &occ(10_000), 0); // a refresh does not restart the episode
        g.poll(301_000, &occ(5_000), 0); // XON after 300 us
        assert_eq!(g.xoff_held_ns(900_000)[3], 300_000);
        g.poll(1_000_000, &occ(20_000), 0); // XOFF again
        assert_eq!(g.xoff_held_ns(1_000_100)[3], 300_100);
        assert_eq!(
            g.xoff_held_ns(1_000_100)[0],
            0,
            "priorities without PFC never"
        );
        // Holding at stop continues a running episode and starts the others.
        g.hold(1_000_200);
        assert_eq!(g.xoff_held_ns(1_000_300)[3], 300_300);
    }

    #[test]
    fn a_congested_priority_is_paused_until_it_is_not_and_below_xon() {
        let mut g = gen();
        // Short of RX buffers with few bytes queued: XOFF all the same.
        assert_eq!(g.poll(0, &occ(100), 0x08), Some(pfc(0x08, 3, 1000)));
        assert_eq!(g.poll(1, &occ(100), 0x08), None, "held, no XON");
        // Buffers back but bytes above XON: still paused.
        assert_eq!(g.poll(2, &occ(6_000), 0), None);
        assert_eq!(g.poll(3, &occ(4_000), 0), Some(pfc(0x08, 3, 0)));
        // A congested priority without thresholds is not paused.
        assert_eq!(g.poll(4, &occ(0), 0x01), None);
        assert_eq!(g.xoff_transitions()[3], 1);
    }

    #[test]
    fn refresh_before_expiry_while_above_xon() {
        let mut g = gen();
        g.poll(0, &occ(20_000), 0).unwrap();
        assert_eq!(g.next_deadline(), Some(256_000));
        assert_eq!(g.poll(255_999, &occ(20_000), 0), None);
        assert_eq!(g.poll(256_000, &occ(8_000), 0), Some(pfc(0x08, 3, 1000)));
        assert_eq!(g.next_deadline(), Some(512_000));
        // The refresh lands well before the 512 us pause would have run out.
        assert!(256_000 < quanta_to_ns(1000, GBIT));
        assert_eq!(g.poll(300_000, &occ(100), 0), Some(pfc(0x08, 3, 0)));
        assert_eq!(g.next_deadline(), None);
        assert_eq!(g.xoff_transitions()[3], 1, "a refresh is not a transition");
    }

    #[test]
    fn reconfigure_keeps_state_and_resumes_a_priority_made_lossy() {
        let mut g = gen();
        g.poll(0, &occ(20_000), 0).unwrap();
        // Higher thresholds: still paused (no XON just because the numbers moved).
        let mut th = [None; PRIORITIES];
        th[3] = Some(PfcThresholds {
            xoff: 40_000,
            xon: 30_000,
        });
        g.reconfigure(th, 2000, GBIT);
        assert_eq!(
            g.poll(1, &occ(20_000), 0),
            Some(pfc(0x08, 3, 0)),
            "below the new XON"
        );
        g.poll(2, &occ(50_000), 0).unwrap();
        assert_eq!(
            g.next_deadline(),
            Some(2 + 512_000),
            "refresh from the new pause time"
        );
        // Priority 3 becomes lossy while paused upstream: it is resumed.
        g.reconfigure([None; PRIORITIES], 2000, GBIT);
        assert_eq!(g.poll(3, &occ(50_000), 0), Some(pfc(0x08, 3, 0)));
        assert_eq!(g.poll(4, &occ(50_000), 0), None);
    }

    #[test]
    fn timer_replacement_and_zero_resume() {
        let mut t = PauseTimers::new(10 * GBIT);
        t.on_frame(&pfc(0x08, 3, 1000), 0); // 51.2 us at 10G
        assert!(t.is_paused(3, 51_199));
        assert!(!t.is_paused(3, 51_200));
        assert!(!t.is_paused(2, 1));
        // A new value replaces the timer, even when shorter.
        t.on_frame(&pfc(0x08, 3, 100), 10_000);
        assert_eq!(t.next_resume(10_000), Some(15_120));
        // Zero resumes at once.
        t.on_frame(&pfc(0x08, 3, 0xffff), 20_000);
        assert_eq!(t.paused_mask(20_001), 0x08);
        t.on_frame(&pfc(0x08, 3, 0), 30_000);
        assert_eq!(t.paused_mask(30_000), 0);
        // Paused time: 0..15_120 then 20_000..30_000.
        assert_eq!(t.paused_ns(40_000)[3], 15_120 + 10_000);
        // Bits not enabled leave other timers alone.
        t.on_frame(&pfc(0x10, 3, 0), 40_000);
        t.on_frame(&pfc(0x08, 3, 500), 40_000);
        t.on_frame(&pfc(0x10, 3, 0), 41_000);
        assert!(t.is_paused(3, 41_000));
    }

    #[test]
    fn pause_pauses_every_priority_at_port_speed() {
        for (speed, ns) in [(GBIT, 512_000), (10 * GBIT, 51_200), (100 * GBIT, 5_120)] {
            let mut t = PauseTimers::new(speed);
            t.on_frame(&MacControl::Pause { quanta: 1000 }, 1_000);
            assert_eq!(t.paused_mask(1_000), 0xff);
            assert_eq!(t.next_resume(1_000), Some(1_000 + ns));
            assert_eq!(t.paused_mask(1_000 + ns), 0);
            assert_eq!(t.paused_ns(10_000_000), [ns; PRIORITIES]);
        }
    }
}
