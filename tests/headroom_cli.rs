//! End-to-end tests of `lossless headroom …` through the built binary.
//!
//! They assume `main.rs` dispatches `lossless headroom <sub> …` to
//! `lossless::cli::headroom::run` and reports its error on stderr with a non-zero exit.

use std::process::{Command, Output};

fn lossless(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lossless"))
        .arg("headroom")
        .args(args)
        .output()
        .expect("run the lossless binary")
}

fn ok(args: &[&str]) -> String {
    let o = lossless(args);
    assert!(
        o.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn fails_naming(args: &[&str], flag: &str) {
    let o = lossless(args);
    assert!(!o.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(flag),
        "{args:?}: stderr {err:?} should name {flag}"
    );
}

const EXAMPLE: &[&str] = &[
    "annex-n",
    "--preset",
    "10gbase-t",
    "--length",
    "100m",
    "--max-frame",
    "2000",
    "--hd",
    "6144",
];

#[test]
fn annex_n_table() {
    let out = ok(EXAMPLE);
    assert!(out.contains("126,024"), "{out}");
    assert!(out.contains("15,753"));
    assert!(out.contains("2 x cable delay") && out.contains("share"));
}

#[test]
fn annex_n_json() {
    let mut args = vec!["--json"];
    args.extend_from_slice(EXAMPLE);
    let v: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    assert_eq!(v["annex_n"]["delay_value_bit_times"], 126_024);
    let names: Vec<&str> = v["annex_n"]["terms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 6);
}

#[test]
fn compare_table_and_json() {
    let mut args = EXAMPLE.to_vec();
    args.push("--compare");
    let out = ok(&args);
    for m in [
        "802.1Q Annex N",
        "adaptive",
        "Linux mlx5",
        "SONiC (Mellanox) xoff",
    ] {
        assert!(out.contains(m), "missing {m}: {out}");
    }
    let mut args = vec!["--json"];
    args.extend_from_slice(EXAMPLE);
    args.push("--compare");
    let v: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
    assert_eq!(v["compare"]["mlx5"]["xoff_bytes"], 26_071);
}

#[test]
fn adaptive_thresholds_credit_fabric() {
    let out = ok(&[
        "adaptive", "--speed", "100G", "--t1", "0ns", "--t2", "10us", "--t3", "10.2us", "--t4",
        "1.2us",
    ]);
    assert!(out.contains("56,272"), "{out}");
    // The software terms, as the daemon's status prints them: 1 ms of own lag and a 400 us
    // peer reaction at the 2 Gbit/s the peer sends on a 10 Gbit/s port.
    let v: serde_json::Value = serde_json::from_str(&ok(&[
        "--json",
        "adaptive",
        "--speed",
        "10G",
        "--rtt",
        "12us",
        "--own-lag",
        "1ms",
        "--peer-reaction",
        "400us",
        "--software-rate",
        "2Gbit",
        "--max-frame",
        "1518",
    ]))
    .unwrap();
    let a = &v["adaptive"];
    assert_eq!(a["own_lag_bit_times"], 2_000_000, "{a}");
    assert_eq!(a["peer_bit_times"], 800_000, "{a}");
    // 15,000 wire + 250,000 own lag + 100,000 peer + 3,076 + 84 frames.
    assert_eq!(a["headroom_bytes"], 368_160, "{a}");
    // Annex N's delay value (81,615 B) plus the 394-quanta response allowance: the default
    // one-way delay holds both stations' interface delays.
    let out = ok(&["thresholds", "--speed", "100G", "--buffer", "1MiB"]);
    assert!(out.contains("941,744") && out.contains("866,442"), "{out}");
    let v: serde_json::Value = serde_json::from_str(&ok(&[
        "--json",
        "credit",
        "--speed",
        "100G",
        "--rtt",
        "1us",
        "--credit-rate",
        "10MHz",
        "--speedup",
        "1.2",
        "--cell-size",
        "64",
    ]))
    .unwrap();
    assert_eq!(v["bdp_bytes"], 12_500);
    assert_eq!(v["quantum_bytes"], 1_536);
    let v: serde_json::Value = serde_json::from_str(&ok(&[
        "--json", "fabric", "--load", "0.8", "--p-max", "1e-6",
    ]))
    .unwrap();
    assert_eq!(v["buffer_cells"], 32);
}

#[test]
fn sweep_csv_and_svg() {
    let dir = std::env::temp_dir().join(format!("lossless-headroom-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("headroom.svg");
    let out = ok(&[
        "sweep",
        "--speeds",
        "10G,25G,100G,400G",
        "--distance",
        "1m..100km",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(out.starts_with("speed_bps,"));
    assert_eq!(out.lines().count(), 1 + 4 * 51);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.trim_end().ends_with("</svg>"));
    assert_eq!(text.matches("<polyline class=\"series\"").count(), 4);
    assert_eq!(text.matches("<svg ").count(), 1);
    // Every opened element is closed (self-closing or with an end tag).
    let opens = text.matches('<').count() - text.matches("</").count() - 1; // minus <?xml
    let closes = text.matches("/>").count() + text.matches("</").count();
    assert_eq!(opens, closes, "unbalanced tags");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_error_names_its_argument() {
    fails_naming(&["annex-n", "--speed", "0G"], "--speed");
    fails_naming(
        &["annex-n", "--preset", "10gbase-t", "--length", "-5m"],
        "--length",
    );
    fails_naming(&["annex-n", "--preset", "10gbase-zz"], "--preset");
    fails_naming(
        &["annex-n", "--preset", "100g", "--max-frame", "10"],
        "--max-frame",
    );
    fails_naming(
        &["annex-n", "--preset", "100g", "--medium", "glass"],
        "--medium",
    );
    fails_naming(&["fabric", "--load", "1.0", "--p-max", "1e-6"], "--load");
    fails_naming(&["fabric", "--load", "0.5", "--p-max", "0"], "--p-max");
    fails_naming(&["fabric", "--load", "0.5", "--p-max", "1.5"], "--p-max");
    fails_naming(
        &["thresholds", "--speed", "100G", "--buffer", "10KB"],
        "--buffer",
    );
    fails_naming(
        &[
            "thresholds",
            "--speed",
            "100G",
            "--buffer",
            "1MiB",
            "--hysteresis",
            "2MiB",
        ],
        "--hysteresis",
    );
    fails_naming(&["adaptive", "--speed", "100G"], "--rtt");
    fails_naming(
        &[
            "adaptive", "--speed", "100G", "--t1", "5us", "--t2", "0us", "--t3", "0.1us", "--t4",
            "1us",
        ],
        "--t1",
    );
    fails_naming(
        &[
            "adaptive", "--speed", "100G", "--rtt", "1us", "--alpha", "0.5",
        ],
        "--alpha",
    );
    fails_naming(
        &["credit", "--speed", "100G", "--credit-rate", "1e6"],
        "--rtt",
    );
    fails_naming(
        &[
            "credit",
            "--speed",
            "100G",
            "--rtt",
            "1us",
            "--credit-rate",
            "0",
        ],
        "--credit-rate",
    );
    fails_naming(
        &[
            "credit",
            "--speed",
            "100G",
            "--rtt",
            "1us",
            "--credit-rate",
            "1e6",
            "--speedup",
            "0.5",
        ],
        "--speedup",
    );
    fails_naming(&["sweep", "--speeds", "800G"], "--speeds");
    fails_naming(&["sweep", "--distance", "0m..1km"], "--distance");
}

#[test]
fn help_documents_every_subcommand() {
    let out = ok(&["--help"]);
    for sub in [
        "annex-n",
        "adaptive",
        "thresholds",
        "credit",
        "fabric",
        "sweep",
        "presets",
    ] {
        assert!(out.contains(sub), "--help lacks {sub}: {out}");
    }
    let out = ok(&["annex-n", "--help"]);
    for flag in [
        "--preset",
        "--speed",
        "--length",
        "--medium",
        "--max-frame",
        "--hd",
        "--compare",
        "--json",
    ] {
        assert!(out.contains(flag), "annex-n --help lacks {flag}");
    }
}
