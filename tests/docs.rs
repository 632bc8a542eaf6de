//! The command-line reference in docs/cli.md must match the binary's `--help`.

use std::process::Command;

#[test]
fn cli_reference_is_current() {
    let out = Command::new("bash")
        .args(["scripts/cli-docs", env!("CARGO_BIN_EXE_lossless")])
        .output()
        .expect("run scripts/cli-docs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let current = std::fs::read_to_string("docs/cli.md").expect("docs/cli.md exists");
    assert!(
        current == String::from_utf8_lossy(&out.stdout),
        "docs/cli.md is stale: run `scripts/cli-docs > docs/cli.md`"
    );
}
