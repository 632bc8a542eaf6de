//! Typed physical quantities and their parsers: speeds (`"10G"`, `"25Gbit"`, `"400G"`),
//! distances (`"100m"`, `"2km"`), durations (`"1.5us"`) and byte sizes (`"9216"`, `"12MiB"`).

use super::{HeadroomError, Quantity};
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// Propagation speed of light used by the Annex N worked example and by this calculator,
/// in m/s. Annex N's 10GBASE-T example (5,556 BT for 100 m of copper at 0.6c) is reproduced
/// with the rounded value 3·10⁸ m/s; the exact 299,792,458 m/s would give 5,560 BT.
pub const SPEED_OF_LIGHT_M_PER_S: f64 = 3.0e8;

/// A link speed in bits per second. Always greater than zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Speed(u64);

impl Speed {
    /// A speed of `bps` bits per second; zero is rejected.
    pub fn from_bps(bps: u64) -> Result<Self, HeadroomError> {
        if bps == 0 {
            return Err(HeadroomError::invalid(
                Quantity::Speed,
                "must be greater than zero",
            ));
        }
        Ok(Speed(bps))
    }

    /// `gbps` gigabits per second.
    pub fn from_gbps(gbps: u64) -> Result<Self, HeadroomError> {
        Self::from_bps(gbps.saturating_mul(1_000_000_000))
    }

    /// Bits per second.
    pub fn bps(self) -> u64 {
        self.0
    }

    /// Bits per second as `f64`.
    pub fn bps_f64(self) -> f64 {
        self.0 as f64
    }

    /// Megabits per second (rounded down), as vendor formulas take it.
    pub fn mbps(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Bit times (rounded up to a whole bit time) that `d` lasts at this speed; beyond
    /// [`super::MAX_TERM_BIT_TIMES`] an error naming `quantity` (the input `d` came from).
    pub fn bit_times_in(self, d: Duration, quantity: Quantity) -> Result<u64, HeadroomError> {
        let bt = super::ceil_tolerant(d.seconds() * self.bps_f64());
        if bt > super::MAX_TERM_BIT_TIMES as f64 {
            return Err(HeadroomError::invalid(
                quantity,
                format!(
                    "{d} at {self} is {bt:.3e} bit times, beyond the calculator's limit of {}",
                    super::MAX_TERM_BIT_TIMES
                ),
            ));
        }
        Ok(bt as u64)
    }

    /// Bytes (rounded up) that arrive in `d` at this speed; errors as [`Self::bit_times_in`].
    pub fn bytes_in(self, d: Duration, quantity: Quantity) -> Result<u64, HeadroomError> {
        Ok(self.bit_times_in(d, quantity)?.div_ceil(8))
    }

    /// Duration of `bit_times` bit times at this speed.
    pub fn duration_of(self, bit_times: u64) -> Duration {
        Duration(bit_times as f64 / self.bps_f64())
    }
}

impl FromStr for Speed {
    type Err = HeadroomError;

    /// Parses a rate in the shared grammar ([`crate::units::parse_rate`]): `"10G"`,
    /// `"25Gbit"`, `"100Gb/s"`, `"1.6T"`, `"2500Mbps"`; a bare number is bit/s.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bps = crate::units::parse_rate(s)
            .map_err(|e| HeadroomError::invalid(Quantity::Speed, e.to_string()))?;
        Speed::from_bps(bps)
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        let (v, u) = if b >= 1e12 {
            (b / 1e12, "Tb/s")
        } else if b >= 1e9 {
            (b / 1e9, "Gb/s")
        } else if b >= 1e6 {
            (b / 1e6, "Mb/s")
        } else if b >= 1e3 {
            (b / 1e3, "kb/s")
        } else {
            (b, "b/s")
        };
        write!(f, "{} {u}", trim_float(v))
    }
}

/// Formats `v` with up to 3 decimals and no trailing zeros.
pub(crate) fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A non-negative, finite distance in metres.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Distance(f64);

impl Distance {
    /// `m` metres; negative or non-finite values are rejected.
    pub fn from_meters(m: f64) -> Result<Self, HeadroomError> {
        if !m.is_finite() || m < 0.0 {
            return Err(HeadroomError::invalid(
                Quantity::CableLength,
                format!("must be a non-negative length, got {m} m"),
            ));
        }
        Ok(Distance(m))
    }

    /// Metres.
    pub fn meters(self) -> f64 {
        self.0
    }

    /// One-way propagation time over this distance in `medium`.
    pub fn propagation(self, medium: Medium) -> Duration {
        Duration(self.0 / (medium.velocity_factor() * SPEED_OF_LIGHT_M_PER_S))
    }
}

impl FromStr for Distance {
    type Err = HeadroomError;

    /// Parses `"100m"`, `"2km"`, `"50cm"`, `"3mm"`, `"1.5 km"`; a bare number is metres.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let q = Quantity::CableLength;
        if s.trim_start().starts_with('-') {
            return Err(HeadroomError::invalid(
                q,
                format!("{s:?}: length must not be negative"),
            ));
        }
        let (v, unit) = crate::units::split_number(s).ok_or_else(|| {
            HeadroomError::invalid(q, format!("cannot parse {s:?} as a number with a unit"))
        })?;
        let mult = match unit.to_ascii_lowercase().as_str() {
            "" | "m" => 1.0,
            "km" => 1e3,
            "cm" => 1e-2,
            "mm" => 1e-3,
            _ => {
                return Err(HeadroomError::invalid(
                    q,
                    format!("{s:?}: unknown unit (use m, km, cm or mm)"),
                ))
            }
        };
        Distance::from_meters(v * mult)
    }
}

impl fmt::Display for Distance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1000.0 {
            write!(f, "{} km", trim_float(self.0 / 1000.0))
        } else {
            write!(f, "{} m", trim_float(self.0))
        }
    }
}

/// A non-negative, finite duration in seconds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
#[serde(transparent)]
pub struct Duration(f64);

impl Duration {
    /// The zero duration.
    pub const ZERO: Duration = Duration(0.0);

    /// `s` seconds; negative or non-finite values are rejected.
    pub fn from_secs(s: f64) -> Result<Self, HeadroomError> {
        if !s.is_finite() || s < 0.0 {
            return Err(HeadroomError::invalid(
                Quantity::Duration,
                format!("must be a non-negative time, got {s} s"),
            ));
        }
        Ok(Duration(s))
    }

    /// `ps` picoseconds, exactly as far as an `f64` of seconds holds them (negative values are
    /// rejected).
    pub fn from_picos(ps: i128) -> Result<Self, HeadroomError> {
        Self::from_secs(ps as f64 * 1e-12)
    }

    /// `ns` nanoseconds (negative values are rejected).
    pub fn from_nanos(ns: f64) -> Result<Self, HeadroomError> {
        Self::from_secs(ns * 1e-9)
    }

    /// Seconds.
    pub fn seconds(self) -> f64 {
        self.0
    }

    /// Nanoseconds.
    pub fn nanos(self) -> f64 {
        self.0 * 1e9
    }

    /// Sum of two durations.
    pub fn plus(self, other: Duration) -> Duration {
        Duration(self.0 + other.0)
    }
}

impl FromStr for Duration {
    type Err = HeadroomError;

    /// Parses a duration in the shared grammar ([`crate::units::parse_duration_secs`]):
    /// `"1.5us"`, `"1.5µs"`, `"500ns"`, `"250ps"`, `"10ms"`, `"1s"`. A unit is required.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let secs = crate::units::parse_duration_secs(s)
            .map_err(|e| HeadroomError::invalid(Quantity::Duration, e.to_string()))?;
        Duration::from_secs(secs)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s == 0.0 {
            write!(f, "0 s")
        } else if s >= 1.0 {
            write!(f, "{} s", trim_float(s))
        } else if s >= 1e-3 {
            write!(f, "{} ms", trim_float(s * 1e3))
        } else if s >= 1e-6 {
            write!(f, "{} us", trim_float(s * 1e6))
        } else {
            write!(f, "{} ns", trim_float(s * 1e9))
        }
    }
}

/// A clock reading (one of the peer-delay timestamps T1..T4), kept exactly as an integer
/// number of picoseconds.
///
/// Timestamps are epoch times (for example 1,700,000,000 s), where an `f64` of seconds resolves
/// only 238 ns; the round trip `(T4 − T1) − (T3 − T2)` is a difference of such readings, so
/// they are parsed from their decimal text into integers and subtracted exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Timestamp {
    /// The reading, picoseconds.
    picoseconds: i128,
}

impl Timestamp {
    /// A reading of `ps` picoseconds.
    pub fn from_picos(ps: i128) -> Self {
        Timestamp { picoseconds: ps }
    }

    /// The reading, picoseconds.
    pub fn picos(self) -> i128 {
        self.picoseconds
    }
}

impl FromStr for Timestamp {
    type Err = HeadroomError;

    /// Parses a duration in the shared grammar, exactly ([`crate::units::parse_duration_ps`]):
    /// `"1700000000.000000120s"`, `"10.2us"`, `"1.7e9s"`. Digits finer than a picosecond are
    /// refused rather than rounded.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ps = crate::units::parse_duration_ps(s)
            .map_err(|e| HeadroomError::invalid(Quantity::Timestamps, e.to_string()))?;
        // At most u64::MAX ns, so within i128.
        Ok(Timestamp::from_picos(ps as i128))
    }
}

impl fmt::Display for Timestamp {
    /// Seconds with every significant digit: `1700000000.00000012 s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const PS: i128 = 1_000_000_000_000;
        let sign = if self.picoseconds < 0 { "-" } else { "" };
        let abs = self.picoseconds.unsigned_abs();
        let (secs, frac) = (abs / PS as u128, abs % PS as u128);
        if frac == 0 {
            write!(f, "{sign}{secs} s")
        } else {
            let frac = format!("{frac:012}");
            write!(f, "{sign}{secs}.{} s", frac.trim_end_matches('0'))
        }
    }
}

/// A byte count, parsed from `"9216"`, `"512KB"`, `"12MiB"`, `"1.5MB"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = HeadroomError;

    /// Parses a size in the shared grammar ([`crate::units::parse_size`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::units::parse_size(s)
            .map(ByteSize)
            .map_err(|e| HeadroomError::invalid(Quantity::Buffer, e.to_string()))
    }
}

/// Transmission medium, which fixes the propagation velocity factor v/c.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "velocity_factor")]
pub enum Medium {
    /// Twisted-pair or twinax copper, v ≈ 0.6c (the value Annex N's example uses).
    Copper,
    /// Optical fibre, v ≈ 0.66c (refractive index ≈ 1.5).
    Fiber,
    /// Any other medium with the given velocity factor, 0 < v/c ≤ 1.
    Custom(f64),
}

impl Medium {
    /// Builds a custom medium, checking 0 < `factor` ≤ 1.
    pub fn custom(factor: f64) -> Result<Self, HeadroomError> {
        if !(factor > 0.0 && factor <= 1.0) {
            return Err(HeadroomError::invalid(
                Quantity::VelocityFactor,
                format!("must be in (0, 1], got {factor}"),
            ));
        }
        Ok(Medium::Custom(factor))
    }

    /// Propagation velocity as a fraction of c.
    pub fn velocity_factor(self) -> f64 {
        match self {
            Medium::Copper => 0.6,
            Medium::Fiber => 0.66,
            Medium::Custom(f) => f,
        }
    }
}

impl FromStr for Medium {
    type Err = HeadroomError;

    /// `"copper"`, `"fiber"`/`"fibre"`, or a velocity factor such as `"0.7"`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "copper" | "cu" | "dac" => Ok(Medium::Copper),
            "fiber" | "fibre" | "optical" => Ok(Medium::Fiber),
            other => match other.parse::<f64>() {
                Ok(f) => Medium::custom(f),
                Err(_) => Err(HeadroomError::invalid(
                    Quantity::VelocityFactor,
                    format!("{s:?}: use copper, fiber or a velocity factor such as 0.7"),
                )),
            },
        }
    }
}

impl fmt::Display for Medium {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Medium::Copper => write!(f, "copper (v = 0.6c)"),
            Medium::Fiber => write!(f, "fiber (v = 0.66c)"),
            Medium::Custom(v) => write!(f, "custom (v = {}c)", trim_float(*v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds() {
        assert_eq!("10G".parse::<Speed>().unwrap().bps(), 10_000_000_000);
        assert_eq!("25Gbit".parse::<Speed>().unwrap().bps(), 25_000_000_000);
        assert_eq!("400G".parse::<Speed>().unwrap().bps(), 400_000_000_000);
        assert_eq!("100Gb/s".parse::<Speed>().unwrap().bps(), 100_000_000_000);
        assert_eq!("2500Mbps".parse::<Speed>().unwrap().bps(), 2_500_000_000);
        assert_eq!("1.6T".parse::<Speed>().unwrap().bps(), 1_600_000_000_000);
        assert_eq!("40gbit/s".parse::<Speed>().unwrap().mbps(), 40_000);
        for bad in ["0G", "10X", "", "-10G", "G"] {
            let e = bad.parse::<Speed>().unwrap_err();
            assert_eq!(e.quantity(), Quantity::Speed, "{bad}");
        }
        assert_eq!(Speed::from_gbps(100).unwrap().to_string(), "100 Gb/s");
    }

    #[test]
    fn distances() {
        assert_eq!("100m".parse::<Distance>().unwrap().meters(), 100.0);
        assert_eq!("2km".parse::<Distance>().unwrap().meters(), 2000.0);
        assert_eq!("1.5 km".parse::<Distance>().unwrap().meters(), 1500.0);
        assert_eq!("50cm".parse::<Distance>().unwrap().meters(), 0.5);
        assert_eq!("7".parse::<Distance>().unwrap().meters(), 7.0);
        let e = "-5m".parse::<Distance>().unwrap_err();
        assert_eq!(e.quantity(), Quantity::CableLength);
        assert!(e.to_string().contains("negative"));
        assert!("5 parsecs".parse::<Distance>().is_err());
        assert_eq!(Distance::from_meters(2000.0).unwrap().to_string(), "2 km");
    }

    #[test]
    fn durations() {
        let d: Duration = "1.5us".parse().unwrap();
        assert!((d.seconds() - 1.5e-6).abs() < 1e-18);
        assert!(("500ns".parse::<Duration>().unwrap().nanos() - 500.0).abs() < 1e-9);
        assert!(("2ms".parse::<Duration>().unwrap().seconds() - 2e-3).abs() < 1e-15);
        assert!(("1µs".parse::<Duration>().unwrap().nanos() - 1000.0).abs() < 1e-9);
        assert!("1.5".parse::<Duration>().is_err());
        assert!("-1us".parse::<Duration>().is_err());
        assert_eq!(d.to_string(), "1.5 us");
    }

    /// Epoch-sized readings keep every picosecond: near 1.7e9 s an f64 of seconds resolves
    /// only 238 ns, so 1700000000.000000120 s and ...320 s would be 0 or 238 ns apart.
    #[test]
    fn timestamps_are_exact() {
        let t = |s: &str| s.parse::<Timestamp>().unwrap();
        assert_eq!(
            t("1700000000.000000120s").picos(),
            1_700_000_000_000_000_120_000
        );
        assert_eq!(
            t("1700000000.000000320s").picos() - t("1700000000.000000120s").picos(),
            200_000
        );
        assert_eq!(t("10.2us").picos(), 10_200_000);
        assert_eq!(t("1.7e9s"), t("1700000000s"));
        assert_eq!(t("250ps").picos(), 250);
        assert_eq!(t("5e-3ns").picos(), 5);
        assert_eq!(t("0ns").picos(), 0);
        assert_eq!(t("1.5 ms").to_string(), "0.0015 s");
        assert_eq!(
            t("1700000000.000000120s").to_string(),
            "1700000000.00000012 s"
        );
        for bad in [
            "1.5",
            "-1s",
            "1.0001ps",
            "1e99s",
            "s",
            ".s",
            "1.2.3s",
            "99999999999999999999999999999999999999999s",
        ] {
            let e = bad.parse::<Timestamp>().unwrap_err();
            assert_eq!(e.quantity(), Quantity::Timestamps, "{bad}");
        }
    }

    #[test]
    fn byte_sizes() {
        assert_eq!("9216".parse::<ByteSize>().unwrap().0, 9216);
        assert_eq!("12MiB".parse::<ByteSize>().unwrap().0, 12 * 1024 * 1024);
        assert_eq!("512KB".parse::<ByteSize>().unwrap().0, 512_000);
        assert!("-1KB".parse::<ByteSize>().is_err());
    }

    #[test]
    fn media_and_propagation() {
        assert_eq!("copper".parse::<Medium>().unwrap(), Medium::Copper);
        assert_eq!("fibre".parse::<Medium>().unwrap(), Medium::Fiber);
        assert_eq!("0.7".parse::<Medium>().unwrap(), Medium::Custom(0.7));
        assert!("1.5".parse::<Medium>().is_err());
        assert!("glass".parse::<Medium>().is_err());
        // 100 m of copper at 0.6 x 3e8 m/s = 555.56 ns = 5,556 BT at 10 Gb/s (rounded up).
        let t = Distance::from_meters(100.0)
            .unwrap()
            .propagation(Medium::Copper);
        assert!((t.nanos() - 555.5556).abs() < 1e-3);
        assert_eq!(
            Speed::from_gbps(10)
                .unwrap()
                .bit_times_in(t, Quantity::CableLength)
                .unwrap(),
            5_556
        );
        // 1 km of fibre: 1000 / 1.98e8 = 5.0505 us.
        let f = Distance::from_meters(1000.0)
            .unwrap()
            .propagation(Medium::Fiber);
        assert!((f.nanos() - 5050.505).abs() < 1e-2);
    }
}
