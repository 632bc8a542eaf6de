//! The models' results as text (what `lossless headroom` prints): each result type, or a
//! report that pairs it with what it was computed for, implements [`fmt::Display`]. The table
//! of a formula's terms, the comparison table, and number formats live here too.

use std::fmt::{self, Write as _};

use super::adaptive::AdaptiveResult;
use super::annex_n::AnnexNResult;
use super::compare::CompareReport;
use super::credit::CreditResult;
use super::fabric::FabricResult;
use super::presets::PhyPreset;
use super::thresholds::ThresholdResult;
use super::units::trim_float;
use super::{Medium, Term};

/// `1234567` → `"1,234,567"`.
pub fn group(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn fmt_bytes(b: f64) -> String {
    let text = format!("{:.2}", b.max(0.0));
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let int = group(int.parse().unwrap_or(0));
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        int
    } else {
        format!("{int}.{frac}")
    }
}

/// The table of terms: name, bit times, bytes, share of the total, detail.
fn term_table(terms: &[Term], total_name: &str) -> String {
    let total: u64 = terms.iter().map(|t| t.bit_times).sum();
    let total_bytes: f64 = terms.iter().map(|t| t.bytes).sum();
    let w = terms
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(0)
        .max(total_name.len())
        .max(4);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<w$}  {:>13}  {:>12}  {:>6}  detail",
        "term", "bit times", "bytes", "share"
    );
    for t in terms {
        let share = if total == 0 {
            0.0
        } else {
            100.0 * t.bit_times as f64 / total as f64
        };
        let _ = writeln!(
            s,
            "  {:<w$}  {:>13}  {:>12}  {:>5.1}%  {}",
            t.name,
            group(t.bit_times),
            fmt_bytes(t.bytes),
            share,
            t.detail
        );
    }
    let _ = writeln!(s, "  {}", "-".repeat(w + 41));
    let _ = writeln!(
        s,
        "  {:<w$}  {:>13}  {:>12}  {:>5.1}%",
        total_name,
        group(total),
        fmt_bytes(total_bytes),
        100.0
    );
    s
}

/// The side-by-side comparison table.
fn compare_table(c: &CompareReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Comparison (headroom reserved above XOFF)\n");
    let _ = writeln!(
        s,
        "  {:<22}  {:>12}  {:>9}  {:>10}  {:>12}  note",
        "model", "bytes", "x AnnexN", "x adaptive", "vs AnnexN"
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "  {:<22}  {:>12}  {:>9.2}  {:>10.2}  {:>12}  {}",
            r.model,
            group(r.headroom_bytes),
            r.vs_annex_n,
            r.vs_adaptive,
            format!(
                "{}{}",
                if r.delta_vs_annex_n_bytes < 0 {
                    "-"
                } else {
                    "+"
                },
                group(r.delta_vs_annex_n_bytes.unsigned_abs())
            ),
            r.note
        );
    }
    let _ = writeln!(
        s,
        "\n  x AnnexN < 1: the model reserves less than 802.1Q's worst case for this link;\n  \
         x adaptive < 1: less than the measured (or estimated) loop needs."
    );
    s
}

/// `lossless headroom annex-n`: the delay value's terms, for a link of PHY `preset`.
fn annex_n(r: &AnnexNResult, preset: &str, cmp: Option<&CompareReport>) -> String {
    let mut s = String::new();
    let i = &r.input;
    let _ = writeln!(s, "802.1Q Annex N delay value");
    let _ = writeln!(
        s,
        "  link: {}, {} of {}, preset {}, max frame {} B, PFC frame {} B\n",
        i.speed, i.cable_length, i.medium, preset, i.max_frame_octets, i.pfc_frame_octets
    );
    s.push_str(&term_table(&r.terms, "delay value DV"));
    let _ = writeln!(
        s,
        "\nDV = {} bit times = {} bytes = {} at {}",
        group(r.delay_value_bit_times),
        group(r.delay_value_bytes),
        r.delay_value_time,
        i.speed
    );
    if let Some(c) = cmp {
        s.push('\n');
        s.push_str(&compare_table(c));
    }
    s
}

/// `lossless headroom adaptive`: the adaptive headroom's terms.
fn adaptive(r: &AdaptiveResult, cmp: Option<&CompareReport>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Adaptive headroom from a measured round trip");
    let _ = writeln!(
        s,
        "  link: {}, loop (T4-T1)-(T3-T2) = {}, max frame {} B, cell {} B, alpha {:.4}{}\n",
        r.input.speed,
        r.link_round_trip,
        r.input.max_frame_octets,
        r.input.cell_size,
        r.alpha.alpha,
        if r.alpha_overridden { " (given)" } else { "" }
    );
    s.push_str(&term_table(&r.terms, "headroom"));
    let _ = writeln!(
        s,
        "\nDV = {} bit times; headroom = {} bytes = {} cells of {} B",
        group(r.delay_value_bit_times),
        group(r.headroom_bytes),
        group(r.headroom_cells),
        r.input.cell_size
    );
    if let Some(c) = cmp {
        s.push('\n');
        s.push_str(&compare_table(c));
    }
    s
}

/// `lossless headroom thresholds`: the headroom's terms and the XOFF/XON they leave.
fn thresholds(r: &ThresholdResult) -> String {
    let i = &r.input;
    let mut s = String::new();
    let _ = writeln!(s, "XOFF/XON thresholds");
    let _ = writeln!(
        s,
        "  link: {}, buffer {} B, MTU {} B, T_gen {}, T_link {}, T_act {}, cell {} B\n",
        i.speed,
        group(i.buffer_bytes),
        i.mtu_bytes,
        i.t_gen,
        i.t_link,
        i.t_act,
        i.cell_size
    );
    s.push_str(&term_table(&r.terms, "headroom"));
    let _ = writeln!(s);
    let _ = writeln!(s, "buffer      {:>12} B", group(i.buffer_bytes));
    let _ = writeln!(
        s,
        "headroom    {:>12} B  (reaction data + wire data)",
        group(r.headroom_bytes)
    );
    let _ = writeln!(
        s,
        "XOFF        {:>12} B  (send XOFF at this occupancy)",
        group(r.xoff_bytes)
    );
    let _ = writeln!(
        s,
        "XON         {:>12} B  (hysteresis {} B{})",
        group(r.xon_bytes),
        group(r.hysteresis_bytes),
        if r.hysteresis_capped {
            ", capped so XON >= 0"
        } else {
            ""
        }
    );
    s
}

/// `lossless headroom credit`: the credit buffer and quantum.
fn credit(r: &CreditResult) -> String {
    let i = &r.input;
    let mut s = String::new();
    let _ = writeln!(s, "Credit-based flow control");
    let _ = writeln!(
        s,
        "  link: {}, RTT {}, credit rate {} Hz, speed-up {}, cell {} B\n",
        i.speed,
        i.rtt,
        trim_float(i.credit_rate_hz),
        trim_float(i.speedup),
        i.cell_size
    );
    s.push_str(&term_table(&r.terms, "minimum buffer"));
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "minimum buffer   {:>12} B  (one BDP, whole cells)",
        group(r.min_buffer_bytes)
    );
    let _ = writeln!(
        s,
        "credit quantum   {:>12} B  ({} B per credit interval x {} speed-up, {} cells)",
        group(r.quantum_bytes),
        trim_float(r.bytes_per_credit_interval),
        trim_float(i.speedup),
        r.quantum_cells
    );
    let _ = writeln!(s, "credits/buffer   {:>12}", group(r.credits_per_buffer));
    s
}

/// `lossless headroom fabric`: the M/D/1 cell-fabric buffer.
fn fabric(r: &FabricResult) -> String {
    let i = &r.input;
    let mut s = String::new();
    let _ = writeln!(s, "M/D/1 cell-fabric buffer");
    let _ = writeln!(
        s,
        "  load rho {}, target P(Q > N) <= {:e}, cell {} B\n",
        i.load, i.overflow_probability, i.cell_size
    );
    let _ = writeln!(
        s,
        "  theta (positive root of rho(e^theta - 1) = theta)  {:.6}",
        r.theta
    );
    let _ = writeln!(
        s,
        "  C = (1 - rho)/(rho e^theta - 1)                     {:.6}",
        r.c
    );
    let _ = writeln!(
        s,
        "  ln C / theta                                        {:.3} cells",
        r.ln_c_over_theta
    );
    let _ = writeln!(
        s,
        "  -ln P_max / theta                                   {:.3} cells",
        r.ln_inv_p_over_theta
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "buffer N = {} cells = {} bytes; P(Q > N) ~ {:.3e}",
        group(r.buffer_cells),
        group(r.buffer_bytes),
        r.overflow_at_buffer
    );
    s
}

/// `lossless headroom presets`: the PHY presets.
fn presets(presets: &[PhyPreset]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<11} {:>6} {:>8} {:>15} {:>8}  description",
        "preset", "speed", "medium", "station TX+RX", "quanta"
    );
    for p in presets {
        let _ = writeln!(
            s,
            "{:<11} {:>5}G {:>8} {:>12} BT {:>8}  {}",
            p.name,
            p.speed_gbps,
            match p.medium {
                Medium::Copper => "copper",
                Medium::Fiber => "fiber",
                Medium::Custom(_) => "custom",
            },
            group(p.station_bit_times()),
            p.response_quanta,
            p.description
        );
    }
    s
}

/// An Annex N result with the preset it was computed for and, optionally, the comparison.
pub struct AnnexNReport<'a> {
    /// The result.
    pub result: &'a AnnexNResult,
    /// The PHY preset's name.
    pub preset: &'a str,
    /// Every model's figure for the same link (`--compare`).
    pub compare: Option<&'a CompareReport>,
}

impl fmt::Display for AnnexNReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&annex_n(self.result, self.preset, self.compare))
    }
}

/// An adaptive result with, optionally, the comparison.
pub struct AdaptiveReport<'a> {
    /// The result.
    pub result: &'a AdaptiveResult,
    /// Every model's figure for the same link (`--compare`).
    pub compare: Option<&'a CompareReport>,
}

impl fmt::Display for AdaptiveReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&adaptive(self.result, self.compare))
    }
}

/// The table of PHY presets.
pub struct PresetTable<'a>(pub &'a [PhyPreset]);

impl fmt::Display for PresetTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&presets(self.0))
    }
}

/// `Display` for result types whose text one function above renders.
macro_rules! display_by {
    ($($ty:ty => $render:ident),* $(,)?) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&$render(self))
            }
        }
    )*};
}

display_by!(
    ThresholdResult => thresholds,
    CreditResult => credit,
    FabricResult => fabric,
    CompareReport => compare_table,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouping_and_bytes() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(126_024), "126,024");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(fmt_bytes(1389.0), "1,389");
        assert_eq!(fmt_bytes(1389.5), "1,389.5");
    }
}
