//! The shipped Prometheus alert rules (prometheus/lossless.rules.yml) pass `promtool check
//! rules`, and their unit tests (prometheus/lossless.rules.test.yml) pass `promtool test
//! rules`: each alert fires on the series that should trigger it and not on the healthy ones.
//! Every query of the Grafana dashboard parses. (Unit tests in src/control/metrics.rs check
//! that every series they name is exposed.)

use std::process::Command;

fn promtool(args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir("prometheus")
        .output()
        .expect("promtool (Debian package prometheus, installed by scripts/setup)");
    assert!(
        out.status.success(),
        "promtool {args:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn alert_rules_are_valid() {
    promtool(&["check", "rules", "lossless.rules.yml"]);
}

#[test]
fn alert_rules_pass_their_unit_tests() {
    promtool(&["test", "rules", "lossless.rules.test.yml"]);
}

/// Every query of the Grafana dashboard is valid PromQL: each becomes a recording rule (with
/// Grafana's variables filled in) that `promtool check rules` parses.
#[test]
fn grafana_dashboard_queries_parse() {
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string("grafana/lossless.json").unwrap()).unwrap();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut n = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$__range", "1h")
                .replace("$instance", ".*")
                .replace("$device", ".*");
            n += 1;
            rules += &format!(
                "      - record: dashboard:query{n}\n        expr: {}\n",
                serde_json::to_string(&expr).unwrap()
            );
        }
    }
    assert!(n > 30, "{n} queries");
    let file = std::env::temp_dir().join(format!(
        "lossless-dashboard-{}.rules.yml",
        std::process::id()
    ));
    std::fs::write(&file, rules).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules", file.to_str().unwrap()])
        .output()
        .expect("promtool");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
