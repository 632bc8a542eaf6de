//! Seeded random rules of the cable: which frames a rule applies to (frame classes) and a
//! small deterministic PRNG, so the same seed over the same frame sequence makes the same
//! decisions on every run.

use std::{fmt, str::FromStr};

use crate::wire::{Classified, FrameKind};

/// SplitMix64: a tiny, fast, well-mixed 64-bit generator (Steele, Lea, Flood 2014).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (n > 0), by multiply-shift (bias below 2^-32 for small n).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// What a random stream of one direction is used for (each gets its own stream, so adding
/// a corruption rule does not change which frames the loss rule drops).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The loss rule.
    Loss = 1,
    /// The corruption rule (decision and bit position).
    Corrupt = 2,
    /// The reorder rule.
    Reorder = 3,
    /// Jitter samples.
    Jitter = 4,
}

/// The seed of the stream for `purpose` in direction `dir` (0 = a→b, 1 = b→a) under the
/// cable's `--seed`. Exposed so tests can replay a rule's decisions.
pub fn stream_seed(seed: u64, dir: usize, purpose: Purpose) -> u64 {
    let mut m = SplitMix64::new(seed ^ ((dir as u64 + 1) << 32) ^ (purpose as u64) << 8);
    m.next_u64()
}

/// A Bernoulli trial with probability `p`, one draw per call.
#[derive(Debug, Clone)]
pub struct Chance {
    rng: SplitMix64,
    /// Hit when the draw is below this (2^64 means always).
    threshold: u128,
}

impl Chance {
    /// Trials with probability `p` (clamped to 0..=1) from the stream seeded with `seed`.
    pub fn new(p: f64, seed: u64) -> Self {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        Chance {
            rng: SplitMix64::new(seed),
            threshold: (p * 18_446_744_073_709_551_616.0) as u128,
        }
    }

    /// One trial.
    #[inline]
    pub fn hit(&mut self) -> bool {
        u128::from(self.rng.next_u64()) < self.threshold
    }

    /// The underlying generator (for draws that follow a hit, e.g. a bit position).
    pub fn rng(&mut self) -> &mut SplitMix64 {
        &mut self.rng
    }
}

/// The class of a frame, as far as the cable's rules care: the wire's [`FrameKind`], with a
/// runt counted as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 802.1Qbb PFC.
    Pfc,
    /// 802.3x PAUSE, or another MAC control opcode.
    Pause,
    /// Credit update.
    Credit,
    /// SFC message (layer 2).
    Sfc,
    /// LLDP.
    Lldp,
    /// PTP over Ethernet.
    Ptp,
    /// Everything else (test traffic, IP, ARP, runts, …).
    Data,
}

/// Names of the kinds, in [`Kind::index`] order.
pub const KIND_NAMES: [&str; 7] = ["pfc", "pause", "credit", "sfc", "lldp", "ptp", "data"];

impl Kind {
    /// Position in [`KIND_NAMES`] (for counters).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl From<FrameKind> for Kind {
    fn from(k: FrameKind) -> Self {
        match k {
            FrameKind::Pfc => Kind::Pfc,
            FrameKind::Pause => Kind::Pause,
            FrameKind::Credit => Kind::Credit,
            FrameKind::Sfcm => Kind::Sfc,
            FrameKind::Lldp => Kind::Lldp,
            FrameKind::Ptp => Kind::Ptp,
            FrameKind::Data | FrameKind::Runt => Kind::Data,
        }
    }
}

/// One term of a `--*-match` list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassMatch {
    /// Every frame.
    All,
    /// One class.
    Kind(Kind),
    /// Every MAC control frame (PFC and PAUSE).
    MacControl,
    /// Frames of one EtherType (inside an 802.1Q tag).
    EtherType(u16),
}

/// Which frames a rule applies to: any of a list of terms ("pfc,pause", "data",
/// "ethertype=0x88b5", "all").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    terms: Vec<ClassMatch>,
}

impl Matcher {
    /// Every frame.
    pub fn all() -> Self {
        Matcher {
            terms: vec![ClassMatch::All],
        }
    }

    /// Data frames only.
    pub fn data() -> Self {
        Matcher {
            terms: vec![ClassMatch::Kind(Kind::Data)],
        }
    }

    /// True if the rule applies to a frame classified as `c`.
    #[inline]
    pub fn matches(&self, c: &Classified) -> bool {
        self.terms.iter().any(|t| match *t {
            ClassMatch::All => true,
            ClassMatch::Kind(k) => k == Kind::from(c.kind),
            ClassMatch::MacControl => c.kind.is_mac_control(),
            ClassMatch::EtherType(e) => e == c.ethertype,
        })
    }
}

impl FromStr for Matcher {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for t in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let lower = t.to_ascii_lowercase();
            let term = match lower.as_str() {
                "all" | "any" => ClassMatch::All,
                "pfc" => ClassMatch::Kind(Kind::Pfc),
                "pause" => ClassMatch::Kind(Kind::Pause),
                "mac-control" => ClassMatch::MacControl,
                "credit" => ClassMatch::Kind(Kind::Credit),
                "sfc" => ClassMatch::Kind(Kind::Sfc),
                "lldp" => ClassMatch::Kind(Kind::Lldp),
                "ptp" => ClassMatch::Kind(Kind::Ptp),
                "data" => ClassMatch::Kind(Kind::Data),
                _ => {
                    let Some(v) = lower.strip_prefix("ethertype=") else {
                        return Err(format!(
                            "frame class {t:?}: expected all, data, pfc, pause, mac-control, \
                             credit, sfc, lldp, ptp or ethertype=0x...."
                        ));
                    };
                    let hex = v.strip_prefix("0x").unwrap_or(v);
                    let e = u16::from_str_radix(hex, 16)
                        .map_err(|_| format!("frame class {t:?}: EtherType must be hex"))?;
                    ClassMatch::EtherType(e)
                }
            };
            terms.push(term);
        }
        if terms.is_empty() {
            return Err("empty frame class list".into());
        }
        Ok(Matcher { terms })
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match t {
                ClassMatch::All => f.write_str("all")?,
                ClassMatch::Kind(k) => f.write_str(KIND_NAMES[k.index()])?,
                ClassMatch::MacControl => f.write_str("mac-control")?,
                ClassMatch::EtherType(e) => write!(f, "ethertype=0x{e:04x}")?,
            }
        }
        Ok(())
    }
}

/// A probability and the frames it applies to.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSpec {
    /// Probability per matching frame, 0..=1.
    pub probability: f64,
    /// Frames the rule applies to.
    pub matcher: Matcher,
}

impl fmt::Display for RuleSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}% of {}", self.probability * 100.0, self.matcher)
    }
}

/// Parses a probability: "1%", "0.05%", "100ppm", or a fraction "0.01" (so "1" is 100 %).
pub fn parse_probability(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix('%') {
        (n, 0.01)
    } else if let Some(n) = t.strip_suffix("ppm") {
        (n, 1e-6)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("probability {s:?}: expected e.g. 1%, 50ppm or 0.01"))?;
    let p = v * scale;
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("probability {s:?} is outside 0..100 %"));
    }
    Ok(p)
}

/// A rule in force: which frames, and the seeded trials.
#[derive(Debug, Clone)]
pub struct Rule {
    matcher: Matcher,
    chance: Chance,
}

impl Rule {
    /// The rule `spec` drawing from the stream seeded with `seed`.
    pub fn new(spec: &RuleSpec, seed: u64) -> Self {
        Rule {
            matcher: spec.matcher.clone(),
            chance: Chance::new(spec.probability, seed),
        }
    }

    /// Whether the rule fires for a frame of class `c` (draws only for matching frames).
    #[inline]
    pub fn fires(&mut self, c: &Classified) -> bool {
        self.matcher.matches(c) && self.chance.hit()
    }

    /// The rule's generator (for follow-up draws).
    pub fn rng(&mut self) -> &mut SplitMix64 {
        self.chance.rng()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{classify, EthernetRepr, MacAddr, MacControl, VlanTag};

    fn frame(ethertype: u16, payload: &[u8], vlan: bool) -> Vec<u8> {
        let repr = EthernetRepr {
            dst: MacAddr::BROADCAST,
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            vlan: vlan.then_some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 0,
            }),
            ethertype,
        };
        let mut b = vec![0u8; 64];
        let h = repr.emit(&mut b).unwrap();
        b[h..h + payload.len()].copy_from_slice(payload);
        b
    }

    #[test]
    fn splitmix_reference_values() {
        // First outputs of SplitMix64 seeded with 1234567 (reference implementation).
        let mut r = SplitMix64::new(1234567);
        assert_eq!(r.next_u64(), 6457827717110365317);
        assert_eq!(r.next_u64(), 3203168211198807973);
        let mut r = SplitMix64::new(1);
        for _ in 0..1000 {
            assert!(r.below(10) < 10);
        }
    }

    #[test]
    fn chance_rate_and_determinism() {
        let mut c = Chance::new(0.01, stream_seed(7, 0, Purpose::Loss));
        let hits: Vec<bool> = (0..100_000).map(|_| c.hit()).collect();
        let n = hits.iter().filter(|h| **h).count();
        assert!((900..=1100).contains(&n), "{n}");
        let mut again = Chance::new(0.01, stream_seed(7, 0, Purpose::Loss));
        assert!(hits.iter().all(|h| *h == again.hit()));
        let mut other = Chance::new(0.01, stream_seed(8, 0, Purpose::Loss));
        assert!(hits.iter().any(|h| *h != other.hit()));
        assert!(!Chance::new(0.0, 1).hit());
        let mut all = Chance::new(1.0, 1);
        assert!((0..1000).all(|_| all.hit()));
        assert_ne!(
            stream_seed(7, 0, Purpose::Loss),
            stream_seed(7, 1, Purpose::Loss)
        );
        assert_ne!(
            stream_seed(7, 0, Purpose::Loss),
            stream_seed(7, 0, Purpose::Corrupt)
        );
    }

    #[test]
    fn classes_and_matchers() {
        let kind = |f: &[u8]| Kind::from(classify(f).kind);
        let mut pfc = vec![0u8; 64];
        MacControl::Pfc {
            enable: 1 << 3,
            quanta: [0, 0, 0, 100, 0, 0, 0, 0],
        }
        .emit_frame(MacAddr([2, 0, 0, 0, 0, 1]), &mut pfc)
        .unwrap();
        assert_eq!(kind(&pfc), Kind::Pfc);
        let mut pause = vec![0u8; 64];
        MacControl::Pause { quanta: 5 }
            .emit_frame(MacAddr([2, 0, 0, 0, 0, 1]), &mut pause)
            .unwrap();
        assert_eq!(kind(&pause), Kind::Pause);
        assert_eq!(kind(&frame(0x88B5, &[1, 0x02], false)), Kind::Credit);
        assert_eq!(kind(&frame(0x88B5, &[1, 0x01], false)), Kind::Sfc);
        assert_eq!(kind(&frame(0x88CC, &[], false)), Kind::Lldp);
        assert_eq!(kind(&frame(0x88F7, &[], false)), Kind::Ptp);
        let ip = classify(&frame(0x0800, &[0x45], true));
        assert_eq!(Kind::from(ip.kind), Kind::Data);
        assert_eq!(kind(&[1, 2, 3]), Kind::Data, "a runt counts as data");

        let m: Matcher = "pfc, ethertype=0x88cc".parse().unwrap();
        assert!(m.matches(&classify(&pfc)));
        assert!(!m.matches(&classify(&pause)));
        assert!(m.matches(&classify(&frame(0x88CC, &[], false))));
        assert!(!m.matches(&ip));
        assert_eq!(m.to_string(), "pfc,ethertype=0x88cc");
        let mc: Matcher = "mac-control".parse().unwrap();
        assert!(mc.matches(&classify(&pause)) && mc.matches(&classify(&pfc)));
        assert!(Matcher::all().matches(&ip));
        assert!(Matcher::data().matches(&ip));
        assert!(!Matcher::data().matches(&classify(&pfc)));
        assert!("bogus".parse::<Matcher>().is_err());
        assert!("ethertype=zz".parse::<Matcher>().is_err());
        assert!("".parse::<Matcher>().is_err());
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("1%").unwrap(), 0.01);
        assert_eq!(parse_probability("100%").unwrap(), 1.0);
        assert!((parse_probability("50ppm").unwrap() - 5e-5).abs() < 1e-12);
        assert_eq!(parse_probability("0.25").unwrap(), 0.25);
        assert!(parse_probability("101%").is_err());
        assert!(parse_probability("-1%").is_err());
        assert!(parse_probability("x").is_err());
    }
}
