//! The shipped Prometheus alert rules (prometheus/lossless.rules.yml) pass `promtool check
//! rules`, and their unit tests (prometheus/lossless.rules.test.yml) pass `promtool test
//! rules`: each alert fires on the series that should trigger it and not on the healthy ones.
//! (A unit test in src/control/metrics.rs checks that every series they name is exposed.)

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
