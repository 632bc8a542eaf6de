//! Human-friendly quantities used by the CLI and the config file: bit rates ("2Gbit", "10G",
//! "100Mbit"), byte sizes ("64KiB", "1MB", "1500") and durations ("5s", "200ms", "1.5us").

use std::time::Duration;

/// Why a quantity could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {input:?}: {reason}")]
pub struct UnitError {
    /// The kind of quantity expected ("rate", "size", "duration").
    pub what: &'static str,
    /// The text given.
    pub input: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let n: f64 = s[..end].parse().ok()?;
    Some((n, s[end..].trim()))
}

fn scaled(what: &'static str, s: &str, units: &[(&str, f64)]) -> Result<f64, UnitError> {
    let err = |reason| UnitError {
        what,
        input: s.to_string(),
        reason,
    };
    let (n, unit) = split_number(s).ok_or_else(|| err("expected a number"))?;
    let factor = units
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|(_, f)| *f)
        .ok_or_else(|| err("unknown unit"))?;
    let v = n * factor;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(err("out of range"));
    }
    Ok(v)
}

/// Parses a bit rate into bits per second ("1Gbit", "2.5G", "100Mbit", "1e9" is not accepted).
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    const U: &[(&str, f64)] = &[
        ("", 1.0),
        ("bit", 1.0),
        ("bps", 1.0),
        ("k", 1e3),
        ("kbit", 1e3),
        ("kbps", 1e3),
        ("m", 1e6),
        ("mbit", 1e6),
        ("mbps", 1e6),
        ("g", 1e9),
        ("gbit", 1e9),
        ("gbps", 1e9),
        ("gb/s", 1e9),
        ("t", 1e12),
        ("tbit", 1e12),
    ];
    let v = scaled("rate", s, U)?;
    if v < 1.0 {
        return Err(UnitError {
            what: "rate",
            input: s.to_string(),
            reason: "must be at least 1 bit/s",
        });
    }
    Ok(v.round() as u64)
}

/// Parses a byte size ("1500", "64KiB", "1MB", "2MiB").
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    const U: &[(&str, f64)] = &[
        ("", 1.0),
        ("b", 1.0),
        ("k", 1e3),
        ("kb", 1e3),
        ("kib", 1024.0),
        ("m", 1e6),
        ("mb", 1e6),
        ("mib", 1048576.0),
        ("g", 1e9),
        ("gb", 1e9),
        ("gib", 1073741824.0),
    ];
    Ok(scaled("size", s, U)?.round() as u64)
}

/// Parses a duration ("5s", "200ms", "50us", "1.5µs", "100ns", "2m").
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    const U: &[(&str, f64)] = &[
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
        ("m", 60e9),
        ("min", 60e9),
    ];
    Ok(Duration::from_nanos(
        scaled("duration", s, U)?.round() as u64
    ))
}

/// Formats bits per second for reports ("1.00 Gbit/s").
pub fn format_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.3} Mbit/s", bps / 1e6)
    } else {
        format!("{:.0} bit/s", bps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("2Gbit").unwrap(), 2_000_000_000);
        assert_eq!(parse_rate("10G").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("2.5gbit").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("100Mbit").unwrap(), 100_000_000);
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("1Qbit").is_err());
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert!(parse_size("-1").is_err());
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("1.5us").unwrap(), Duration::from_nanos(1500));
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert!(parse_duration("5").is_err());
    }
}
