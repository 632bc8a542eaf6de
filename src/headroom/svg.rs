//! A hand-written SVG line plot with logarithmic axes (no plotting crate): one polyline per
//! series, decade grid lines, axis labels and a legend. The output is standalone SVG 1.1 that
//! a browser opens directly.

use std::fmt::Write as _;

/// One line of the plot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label, for example `"100 Gb/s"`.
    pub label: String,
    /// (x, y) points; both must be positive (the axes are logarithmic).
    pub points: Vec<(f64, f64)>,
}

/// Plot labels and tick formatters.
#[derive(Debug, Clone, Copy)]
pub struct PlotLabels<'a> {
    /// Title at the top.
    pub title: &'a str,
    /// X-axis caption.
    pub x_label: &'a str,
    /// Y-axis caption.
    pub y_label: &'a str,
    /// Formats an x tick value (a power of ten).
    pub x_tick: fn(f64) -> String,
    /// Formats a y tick value (a power of ten).
    pub y_tick: fn(f64) -> String,
}

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 600.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

/// Escapes text for XML character data and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

fn decade_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let (a, mut b) = (lo.log10().floor(), hi.log10().ceil());
    if b <= a {
        b = a + 1.0;
    }
    (a, b)
}

/// Renders the plot to an SVG document.
pub fn render(series: &[Series], labels: &PlotLabels<'_>) -> String {
    let (x0, x1) = decade_range(series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let (y0, y1) = decade_range(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let pw = WIDTH - LEFT - RIGHT;
    let ph = HEIGHT - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x.log10() - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + ph - (y.log10() - y0) / (y1 - y0) * ph;

    let mut s = String::new();
    let _ = writeln!(s, r##"<?xml version="1.0" encoding="UTF-8"?>"##);
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(s, r##"<title>{}</title>"##, escape(labels.title));
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"##,
        LEFT + pw / 2.0,
        escape(labels.title)
    );
    // Grid and ticks.
    let _ = writeln!(s, r##"<g class="grid" stroke="#dddddd" stroke-width="1">"##);
    for d in (x0 as i32)..=(x1 as i32) {
        let x = sx(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.2}" y1="{TOP}" x2="{x:.2}" y2="{:.2}"/>"##,
            TOP + ph
        );
    }
    for d in (y0 as i32)..=(y1 as i32) {
        let y = sy(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.2}" x2="{:.2}" y2="{y:.2}"/>"##,
            LEFT + pw
        );
    }
    let _ = writeln!(s, "</g>");
    let _ = writeln!(s, r##"<g class="ticks" fill="#333333">"##);
    for d in (x0 as i32)..=(x1 as i32) {
        let x = sx(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<text x="{x:.2}" y="{:.2}" text-anchor="middle">{}</text>"##,
            TOP + ph + 18.0,
            escape(&(labels.x_tick)(10f64.powi(d)))
        );
    }
    for d in (y0 as i32)..=(y1 as i32) {
        let y = sy(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
            LEFT - 8.0,
            y + 4.0,
            escape(&(labels.y_tick)(10f64.powi(d)))
        );
    }
    let _ = writeln!(s, "</g>");
    let _ = writeln!(
        s,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#333333"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.2}" y="{:.2}" text-anchor="middle">{}</text>"##,
        LEFT + pw / 2.0,
        HEIGHT - 20.0,
        escape(labels.x_label)
    );
    let _ = writeln!(
        s,
        r##"<text x="20" y="{:.2}" text-anchor="middle" transform="rotate(-90 20 {:.2})">{}</text>"##,
        TOP + ph / 2.0,
        TOP + ph / 2.0,
        escape(labels.y_label)
    );
    // Series and legend.
    for (i, ser) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = ser
            .points
            .iter()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0)
            .map(|&(x, y)| format!("{:.2},{:.2}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            s,
            r##"<polyline class="series" data-label="{}" fill="none" stroke="{color}" stroke-width="2" points="{}"/>"##,
            escape(&ser.label),
            pts.join(" ")
        );
        let ly = TOP + 10.0 + 22.0 * i as f64;
        let lx = LEFT + pw + 20.0;
        let _ = writeln!(
            s,
            r##"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"/>"##,
            lx + 24.0
        );
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}">{}</text>"##,
            lx + 32.0,
            ly + 4.0,
            escape(&ser.label)
        );
    }
    let _ = writeln!(s, "</svg>");
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal XML well-formedness check: balanced, properly nested tags, quoted
    /// attributes, no stray `<` or `&` in text. Returns the element names in document order.
    pub(crate) fn check_well_formed(doc: &str) -> Result<Vec<String>, String> {
        let mut stack: Vec<String> = Vec::new();
        let mut names = Vec::new();
        let b = doc.as_bytes();
        let mut i = 0;
        let mut root_closed = false;
        while i < b.len() {
            if b[i] == b'<' {
                let end = doc[i..].find('>').ok_or("unterminated tag")? + i;
                let tag = &doc[i + 1..end];
                if tag.starts_with('?') {
                    if !tag.ends_with('?') {
                        return Err("bad processing instruction".into());
                    }
                } else if let Some(rest) = tag.strip_prefix('/') {
                    let open = stack.pop().ok_or("close without open")?;
                    if open != rest.trim() {
                        return Err(format!("</{rest}> closes <{open}>"));
                    }
                    if stack.is_empty() {
                        root_closed = true;
                    }
                } else {
                    if root_closed {
                        return Err("content after the root element".into());
                    }
                    let self_closing = tag.ends_with('/');
                    let body = tag.trim_end_matches('/');
                    let name: String = body.chars().take_while(|c| !c.is_whitespace()).collect();
                    if name.is_empty() {
                        return Err("empty tag name".into());
                    }
                    // Attributes: name="value" pairs.
                    let mut attrs = body[name.len()..].trim();
                    while !attrs.is_empty() {
                        let eq = attrs
                            .find('=')
                            .ok_or(format!("attribute without value in <{name}>"))?;
                        let rest = attrs[eq + 1..].trim_start();
                        let q = rest.chars().next().ok_or("missing quote")?;
                        if q != '"' && q != '\'' {
                            return Err(format!("unquoted attribute in <{name}>"));
                        }
                        let close = rest[1..].find(q).ok_or("unterminated attribute")?;
                        let val = &rest[1..1 + close];
                        if val.contains('<') {
                            return Err("< in attribute".into());
                        }
                        attrs = rest[close + 2..].trim_start();
                    }
                    names.push(name.clone());
                    if !self_closing {
                        stack.push(name);
                    } else if stack.is_empty() {
                        root_closed = true;
                    }
                }
                i = end + 1;
            } else {
                if b[i] == b'&' {
                    let semi = doc[i..].find(';').ok_or("bare &")?;
                    let ent = &doc[i + 1..i + semi];
                    if !["amp", "lt", "gt", "quot", "apos"].contains(&ent) {
                        return Err(format!("unknown entity &{ent};"));
                    }
                }
                i += 1;
            }
        }
        if !stack.is_empty() {
            return Err(format!("unclosed elements: {stack:?}"));
        }
        Ok(names)
    }

    #[test]
    fn renders_well_formed_svg_with_one_polyline_per_series() {
        let series = vec![
            Series {
                label: "10 Gb/s".into(),
                points: vec![
                    (1.0, 10_000.0),
                    (1000.0, 20_000.0),
                    (100_000.0, 1_000_000.0),
                ],
            },
            Series {
                label: "A & <B>".into(),
                points: vec![(1.0, 50_000.0), (100_000.0, 9_000_000.0)],
            },
        ];
        let svg = render(
            &series,
            &PlotLabels {
                title: "headroom vs distance",
                x_label: "distance",
                y_label: "bytes",
                x_tick: |v| format!("{v} m"),
                y_tick: |v| format!("{v} B"),
            },
        );
        let names = check_well_formed(&svg).unwrap();
        assert_eq!(names.iter().filter(|n| *n == "polyline").count(), 2);
        assert!(svg.contains("A &amp; &lt;B&gt;"));
        assert!(check_well_formed("<a><b></a></b>").is_err());
        assert!(check_well_formed("<a x=1/>").is_err());
        assert!(check_well_formed("<a>&</a>").is_err());
    }
}
