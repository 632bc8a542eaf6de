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

/// `lossless completions SHELL` prints a script for each shell (bash's parses with `bash -n`)
/// that knows the subcommands.
#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = Command::new(env!("CARGO_BIN_EXE_lossless"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for sub in ["run", "check-config", "headroom", "selftest"] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
        if shell == "bash" {
            let path = std::env::temp_dir().join(format!("lossless-{}.bash", std::process::id()));
            std::fs::write(&path, &script).unwrap();
            let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
            let _ = std::fs::remove_file(&path);
            assert!(check.status.success(), "{check:?}");
        }
    }
}

/// `lossless man --out-dir DIR` writes a roff page for the tool and one per subcommand, each
/// section of docs/cli.md included.
#[test]
fn man_pages_for_every_command() {
    let dir = std::env::temp_dir().join(format!("lossless-man-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_lossless"))
        .args(["man", "--out-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let docs = std::fs::read_to_string("docs/cli.md").unwrap();
    let commands: Vec<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|c| c.trim().replace(' ', "-"))
        .collect();
    assert!(commands.len() > 20, "{commands:?}");
    for c in &commands {
        let page = std::fs::read_to_string(dir.join(format!("{c}.1")))
            .unwrap_or_else(|e| panic!("no man page {c}.1: {e}"));
        assert!(page.contains(".TH"), "{c}.1 is not a roff man page");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
