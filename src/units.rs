//! The one grammar for quantities, shared by every command and the config file: bit rates
//! ("2Gbit", "10G", "10Gb", "25Gbps", "100Mbit"; decimal prefixes), byte sizes ("64KiB",
//! "1MB", "1500"; decimal and binary prefixes explicit) and durations ("5s", "200ms", "1.5us",
//! "1m30s"; one grammar, read as a float or exactly to the picosecond). The headroom
//! calculator parses through the same functions, its peer-delay timestamps included.

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

/// The number at the start of `s` (digits and one decimal point, optionally an exponent such
/// as `1e-6`) and the rest, trimmed.
pub(crate) fn split_number(s: &str) -> Option<(f64, &str)> {
    let (number, rest) = split_number_text(s);
    Some((number.parse().ok()?, rest))
}

/// The text of the number at the start of `s` (as [`split_number`] reads it, not checked to
/// be one) and the rest, trimmed.
fn split_number_text(s: &str) -> (&str, &str) {
    let s = s.trim();
    let bytes = s.as_bytes();
    let mut end = 0;
    while end < s.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
        end += 1;
    }
    // An exponent only when digits follow (so "1e" is not one, and "2ms" is not "2m" + "s").
    if end > 0 && end < s.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let exp = &s[end + 1..];
        let digits = exp.strip_prefix(['-', '+']).unwrap_or(exp);
        let n = digits.bytes().take_while(u8::is_ascii_digit).count();
        if n > 0 {
            end += 1 + (exp.len() - digits.len()) + n;
        }
    }
    (&s[..end], s[end..].trim_start())
}

/// A number as [`split_number`] reads it (digits, at most one point, an exponent), read
/// exactly: its value is `digits × 10^scale`. `None` for anything else, or more digits than
/// 128 bits carry.
fn exact_number(number: &str) -> Option<(u128, i64)> {
    let (mantissa, exponent) = match number.find(['e', 'E']) {
        Some(i) => (&number[..i], number[i + 1..].parse::<i64>().ok()?),
        None => (number, 0),
    };
    let (digits, after_point) = decimal_digits(mantissa)?;
    Some((digits, exponent.saturating_sub(i64::from(after_point))))
}

/// The value of `s` (a number and a unit from `units`, matched without regard to case
/// unless `exact_case`), checked to be a finite non-negative number within `u64`.
fn scaled(what: &'static str, s: &str, units: &[(&str, f64)]) -> Result<f64, UnitError> {
    let err = |reason| UnitError {
        what,
        input: s.to_string(),
        reason,
    };
    let (n, unit) = split_number(s).ok_or_else(|| err("expected a number and a unit"))?;
    let factor = units
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit.trim()))
        .map(|(_, f)| *f)
        .ok_or_else(|| err(units_hint(what)))?;
    let v = n * factor;
    if !v.is_finite() || v > u64::MAX as f64 {
        return Err(err("out of range"));
    }
    Ok(v)
}

/// What `what` accepts, for the error when the unit is unknown.
fn units_hint(what: &'static str) -> &'static str {
    match what {
        "rate" => {
            "unknown unit: use bit/s with a decimal prefix, e.g. 100Mbit, 10G, 10Gb, 25Gbps, \
             400Gb/s, 1.6T (a bare number is bit/s)"
        }
        "size" => {
            "unknown unit: use B, decimal kB/MB/GB (10^3) or binary KiB/MiB/GiB (2^10); a bare \
             k, M or G is refused because tools disagree on it (tc reads 1024, SI 1000)"
        }
        _ => "unknown or missing unit: use ps, ns, us, ms, s, m (minutes) or h, e.g. 1.5us, 1m30s",
    }
}

/// Bit rates: decimal prefixes (k, M, G, T: 10^3 to 10^12), each alone or followed by `bit`,
/// `b`, `bps`, `b/s` or `bit/s`, in any case: "100Mbit", "10G", "10Gb", "25Gbps", "1.6T". A
/// bare number is bit/s ("200000000"), as scripts that compute a rate write it.
const RATE_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("bit", 1.0),
    ("b", 1.0),
    ("bps", 1.0),
    ("b/s", 1.0),
    ("bit/s", 1.0),
    ("k", 1e3),
    ("kbit", 1e3),
    ("kb", 1e3),
    ("kbps", 1e3),
    ("kb/s", 1e3),
    ("kbit/s", 1e3),
    ("m", 1e6),
    ("mbit", 1e6),
    ("mb", 1e6),
    ("mbps", 1e6),
    ("mb/s", 1e6),
    ("mbit/s", 1e6),
    ("g", 1e9),
    ("gbit", 1e9),
    ("gb", 1e9),
    ("gbps", 1e9),
    ("gb/s", 1e9),
    ("gbit/s", 1e9),
    ("t", 1e12),
    ("tbit", 1e12),
    ("tb", 1e12),
    ("tbps", 1e12),
    ("tb/s", 1e12),
    ("tbit/s", 1e12),
];

/// Parses a bit rate into bits per second (see `RATE_UNITS`); at least 1 bit/s.
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let v = scaled("rate", s, RATE_UNITS)?;
    if v < 1.0 {
        return Err(UnitError {
            what: "rate",
            input: s.to_string(),
            reason: "must be at least 1 bit/s",
        });
    }
    Ok(v.round() as u64)
}

/// Parses a byte size: a bare number or `B`, decimal `kB`/`MB`/`GB` (10^3, 10^6, 10^9) or
/// binary `KiB`/`MiB`/`GiB` (2^10, 2^20, 2^30), in any case ("1500", "64KiB", "1MB"). A bare
/// `k`, `M` or `G` is refused: tc reads `64k` as 65,536 bytes, SI as 64,000.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    const U: &[(&str, f64)] = &[
        ("", 1.0),
        ("b", 1.0),
        ("kb", 1e3),
        ("kib", 1024.0),
        ("mb", 1e6),
        ("mib", 1048576.0),
        ("gb", 1e9),
        ("gib", 1073741824.0),
    ];
    let bytes = scaled("size", s, U)?;
    // A byte is the smallest unit: "0.4" (0 bytes when rounded) or "0.9" (1 byte) is a typo
    // or a unit left out, not a size; "1.5KiB" is 1,536 bytes and stays. The value is
    // checked exactly, in decimal, so that "1.1kB" (1,100, which is 1100.0000000000002 in
    // binary floating point) is whole.
    if !whole_bytes(s, bytes, U) {
        return Err(UnitError {
            what: "size",
            input: s.to_string(),
            reason: "not a whole number of bytes",
        });
    }
    Ok(bytes.round() as u64)
}

/// The digits of a plain decimal number `int.frac` read exactly as one integer, and how many
/// of them follow the point ("1.50": 150 and 2): the number is `digits / 10^after_point`,
/// without a float's rounding. `None` for anything but ASCII digits around at most one point
/// (none at all included), or more digits than 128 bits carry.
fn decimal_digits(number: &str) -> Option<(u128, u32)> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let digits = int.bytes().chain(frac.bytes()).try_fold(0u128, |n, b| {
        let d = b.is_ascii_digit().then(|| u128::from(b - b'0'))?;
        n.checked_mul(10)?.checked_add(d)
    })?;
    Some((digits, u32::try_from(frac.len()).ok()?))
}

/// True if `s`, which [`scaled`] read as `value` with the integer factors of `units`, is a
/// whole number: its digits, decimal point and exponent read exactly, times the unit's
/// factor. A number with more significant digits than 128-bit arithmetic carries is judged
/// by `value`.
fn whole_bytes(s: &str, value: f64, units: &[(&str, f64)]) -> bool {
    let s = s.trim();
    let Some((_, unit)) = split_number(s) else {
        return false;
    };
    let number = s[..s.len() - unit.len()].trim_end();
    let factor = units
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit.trim()))
        .map_or(1, |(_, f)| *f as u128);
    // The value is digits × 10^scale × factor.
    let Some((digits, scale)) = exact_number(number) else {
        return value.fract() == 0.0;
    };
    let Some(product) = digits.checked_mul(factor) else {
        return value.fract() == 0.0;
    };
    if product == 0 || scale >= 0 {
        return true;
    }
    match u32::try_from(-scale)
        .ok()
        .and_then(|k| 10u128.checked_pow(k))
    {
        Some(divisor) => product % divisor == 0,
        // 10^39 or more: above any u128, so the value is a fraction between 0 and 1.
        None => false,
    }
}

/// The terms of a duration, each its number's text and its unit's picoseconds: one or more
/// terms of a number and a unit (`ps`, `ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`/`min`, `h`),
/// largest first or not, with or without spaces ("1.5us", "200ms", "1m30s", "1h 2m"). A unit
/// is required except for a plain "0" (no terms).
fn duration_terms(s: &str) -> Result<Vec<(&str, u128)>, UnitError> {
    /// Picoseconds per unit.
    const U: &[(&str, u128)] = &[
        ("ps", 1),
        ("ns", 1_000),
        ("us", 1_000_000),
        ("µs", 1_000_000),
        ("μs", 1_000_000),
        ("ms", 1_000_000_000),
        ("s", 1_000_000_000_000),
        ("m", 60_000_000_000_000),
        ("min", 60_000_000_000_000),
        ("h", 3_600_000_000_000_000),
    ];
    let err = |reason| duration_error(s, reason);
    if s.trim() == "0" {
        return Ok(Vec::new());
    }
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(err("expected a number and a unit"));
    }
    let mut terms = Vec::new();
    while !rest.is_empty() {
        let (number, after) = split_number_text(rest);
        if number.parse::<f64>().is_err() {
            return Err(err("expected a number and a unit"));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(after.len());
        let (unit, tail) = after.split_at(unit_len);
        let factor = U
            .iter()
            .find(|(u, _)| u.eq_ignore_ascii_case(unit))
            .map(|(_, f)| *f)
            .ok_or_else(|| err(units_hint("duration")))?;
        terms.push((number, factor));
        rest = tail.trim_start();
    }
    Ok(terms)
}

fn duration_error(s: &str, reason: &'static str) -> UnitError {
    UnitError {
        what: "duration",
        input: s.to_string(),
        reason,
    }
}

/// Parses a duration (the grammar of `duration_terms`) exactly, into picoseconds: each
/// term's digits, point and exponent are read as integers, not as a float, for the
/// calculator's timestamps, epoch-sized readings subtracted from each other, where an `f64`
/// of seconds resolves only 238 ns ("1700000000.000000120s"). Digits finer than a picosecond
/// are refused, not rounded; at most `u64::MAX` ns.
pub fn parse_duration_ps(s: &str) -> Result<u128, UnitError> {
    let err = |reason| duration_error(s, reason);
    let mut total: u128 = 0;
    for (number, factor) in duration_terms(s)? {
        let (digits, scale) = exact_number(number).ok_or_else(|| err("out of range"))?;
        let ps = digits
            .checked_mul(factor)
            .ok_or_else(|| err("out of range"))?;
        let power = |k: i64| u32::try_from(k).ok().and_then(|k| 10u128.checked_pow(k));
        let term = match scale {
            _ if ps == 0 => 0,
            0.. => power(scale)
                .and_then(|p| ps.checked_mul(p))
                .ok_or_else(|| err("out of range"))?,
            _ => match power(-scale) {
                Some(p) if ps % p == 0 => ps / p,
                _ => return Err(err("finer than one picosecond")),
            },
        };
        total = total.checked_add(term).ok_or_else(|| err("out of range"))?;
    }
    if total / 1000 > u128::from(u64::MAX) {
        return Err(err("out of range"));
    }
    Ok(total)
}

/// Parses a duration (the grammar of `duration_terms`) into seconds, as a float: a time a
/// formula takes ("505.0505ns", a cable's delay), where a fraction of a picosecond is a
/// value, not a typo. At most `u64::MAX` ns.
pub fn parse_duration_secs(s: &str) -> Result<f64, UnitError> {
    let total: f64 = duration_terms(s)?
        .into_iter()
        .map(|(number, factor)| number.parse::<f64>().unwrap_or(f64::NAN) * (factor as f64 / 1e12))
        .sum();
    if !total.is_finite() || total * 1e9 > u64::MAX as f64 {
        return Err(duration_error(s, "out of range"));
    }
    Ok(total)
}

/// Longest duration a setting or a flag may have (2^62 ns, about 146 years), so that a
/// deadline computed as a clock reading plus the setting cannot overflow.
pub const MAX_DURATION_NS: u64 = 1 << 62;

/// Parses a duration (see [`parse_duration_secs`]), to the nearest nanosecond.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    Ok(Duration::from_nanos(
        (parse_duration_secs(s)? * 1e9).round() as u64,
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
        assert_eq!(parse_rate("10Gb").unwrap(), 10_000_000_000);
        assert_eq!(parse_rate("25Gbps").unwrap(), 25_000_000_000);
        assert_eq!(parse_rate("400Gb/s").unwrap(), 400_000_000_000);
        assert_eq!(parse_rate("40gbit/s").unwrap(), 40_000_000_000);
        assert_eq!(parse_rate("2.5gbit").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("100Mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("1.6T").unwrap(), 1_600_000_000_000);
        assert_eq!(parse_rate("9600bit").unwrap(), 9600);
        assert_eq!(parse_rate("200000000").unwrap(), 200_000_000);
        for bad in ["fast", "0G", "0", "1Qbit", "", "G", "-10G"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert!(parse_rate("1Qbit")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64KiB").unwrap(), 65536);
        assert_eq!(parse_size("1500").unwrap(), 1500);
        assert_eq!(parse_size("1500B").unwrap(), 1500);
        assert_eq!(parse_size("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_size("512kB").unwrap(), 512_000);
        assert_eq!(parse_size("2MiB").unwrap(), 2_097_152);
        assert_eq!(parse_size("1.5GB").unwrap(), 1_500_000_000);
        assert!(parse_size("-1").is_err());
        // Not a whole number of bytes: refused, not rounded to 0 or 1.
        for fraction in [
            "0.4",
            "0.9",
            "1.5",
            "1.5B",
            "0.0005kB",
            "1.0001KiB",
            "1e-1",
            "2.5e0",
        ] {
            let e = parse_size(fraction).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{fraction:?}")) && e.contains("not a whole number of bytes"),
                "{e}"
            );
        }
        // Fractions of a larger unit that come to whole bytes, exactly.
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        assert_eq!(parse_size("1.1kB").unwrap(), 1100);
        assert_eq!(parse_size("0.001kB").unwrap(), 1);
        assert_eq!(parse_size("1.50KiB").unwrap(), 1536);
        assert_eq!(parse_size("0.5MiB").unwrap(), 524_288);
        assert_eq!(parse_size("1e3").unwrap(), 1000);
        assert_eq!(parse_size("1.5e3").unwrap(), 1500);
        assert_eq!(parse_size("1500.0").unwrap(), 1500);
        assert_eq!(parse_size("0").unwrap(), 0);
        assert_eq!(parse_size("0.0").unwrap(), 0);
        assert!(
            parse_size("1e-400").is_err(),
            "a fraction too small for a float is one"
        );
        for ambiguous in ["64k", "1M", "2G"] {
            let e = parse_size(ambiguous).unwrap_err().to_string();
            assert!(e.contains("tc reads 1024"), "{e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("1.5us").unwrap(), Duration::from_nanos(1500));
        assert_eq!(parse_duration("1.5µs").unwrap(), Duration::from_nanos(1500));
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        // Case does not matter, as in rates and sizes.
        assert_eq!(parse_duration("200MS").unwrap(), Duration::from_millis(200));
        assert_eq!(parse_duration("1US").unwrap(), Duration::from_micros(1));
        assert_eq!(parse_duration("10Min").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1H").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h 2m").unwrap(), Duration::from_secs(3720));
        assert_eq!(
            parse_duration("1s500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!((parse_duration_secs("250ps").unwrap() - 250e-12).abs() < 1e-24);
        for bad in ["5", "", "1m30", "-1s", "1x", "s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        // Exact, as the calculator's timestamps need (one parser for both): an epoch-sized
        // reading keeps its picoseconds, and finer digits are refused rather than rounded.
        assert_eq!(
            parse_duration_ps("1700000000.000000120s").unwrap(),
            1_700_000_000_000_000_120_000
        );
        assert_eq!(
            parse_duration_ps("1m30.000000000001s").unwrap(),
            90_000_000_000_001
        );
        assert_eq!(parse_duration_ps("5e-3ns").unwrap(), 5);
        // A time a formula takes may be finer (a cable's delay); as seconds it is read.
        assert!((parse_duration_secs("505.0505ns").unwrap() - 505.0505e-9).abs() < 1e-20);
        for (bad, why) in [
            ("1.0001ps", "finer than one picosecond"),
            ("1e99s", "out of range"),
            (".s", "expected a number"),
            ("1.2.3s", "expected a number"),
        ] {
            let e = parse_duration_ps(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
