//! The Debian package (`scripts/package`, cargo-deb): what `dpkg-deb` says is in it, the
//! conffile, and the two units it installs passing `systemd-analyze verify` (the template as
//! an instance), with the packaged binary itself answering.

mod common;

use std::process::Command;

use common::unique;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run command");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn deb_holds_the_daemon_units_config_man_pages_and_completions() {
    let deb = run(Command::new("scripts/package").arg("--fast"));
    let deb = deb.trim();
    assert!(deb.ends_with(".deb"), "{deb}");
    let info = run(Command::new("dpkg-deb").args(["--info", deb]));
    for line in [
        "Package: lossless",
        "Section: net",
        "Depends: ",
        "libelf1",
        " conffiles",
    ] {
        assert!(info.contains(line), "no {line:?} in\n{info}");
    }
    let contents = run(Command::new("dpkg-deb").args(["--contents", deb]));
    for path in [
        "./usr/bin/lossless",
        "./lib/systemd/system/lossless.service",
        "./lib/systemd/system/lossless@.service",
        "./etc/lossless/lossless.toml",
        "./usr/share/man/man1/lossless.1.gz",
        "./usr/share/man/man1/lossless-run.1.gz",
        "./usr/share/bash-completion/completions/lossless",
        "./usr/share/doc/lossless/README.md",
        "./usr/share/doc/lossless/prometheus/lossless.rules.yml",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(path)),
            "{path} missing:\n{contents}"
        );
    }
    assert!(!contents.contains("lossless-bench"), "bench tool packaged");
    let dir = std::env::temp_dir().join(unique("deb"));
    run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&dir));
    let conffiles = run(Command::new("dpkg-deb").args(["--info", deb, "conffiles"]));
    assert_eq!(conffiles.trim(), "/etc/lossless/lossless.toml");
    // The packaged binary runs and checks the packaged example config.
    let bin = dir.join("usr/bin/lossless");
    let version = run(Command::new(&bin).arg("--version"));
    assert!(version.starts_with("lossless "), "{version}");
    run(Command::new(&bin)
        .args(["check-config", "--file-only"])
        .arg(dir.join("etc/lossless/lossless.toml")));
    // Both units verify, with their /usr/bin paths pointed at the extracted binary; the
    // template as an instance, which takes its own config and runtime directory.
    let units = dir.join("units");
    std::fs::create_dir_all(&units).unwrap();
    for (file, name) in [
        ("lossless.service", "lossless.service"),
        ("lossless@.service", "lossless@pair1.service"),
    ] {
        let text = std::fs::read_to_string(dir.join("lib/systemd/system").join(file)).unwrap();
        assert!(
            text.contains("ExecStart=/usr/bin/lossless run"),
            "{file}:\n{text}"
        );
        if name.contains('@') {
            assert!(text.contains("--config /etc/lossless/%i.toml"), "{text}");
            assert!(text.contains("RuntimeDirectory=lossless/%i"), "{text}");
        }
        std::fs::write(
            units.join(file),
            text.replace("/usr/bin/lossless", bin.to_str().unwrap()),
        )
        .unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(units.join(name))
            .current_dir(&units)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "systemd-analyze verify {name}: {err}");
        assert!(!err.contains(".service:"), "{name} warnings: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
