//! Shell completions and man pages, generated from the same clap definitions as `--help` (and
//! docs/cli.md), so none of them can drift from the binary.

use std::path::Path;

use clap_complete::Shell;

use super::{common::to_stdout, error::CliError};

/// Flags of `lossless completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for (bash, zsh, fish, elvish, powershell). Install, e.g.:
    /// `lossless completions bash > /etc/bash_completion.d/lossless`.
    pub shell: Shell,
}

/// Flags of `lossless man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write lossless.1 and one page per subcommand (lossless-run.1, lossless-send-pfc.1,
    /// ...) into this directory, e.g. /usr/local/share/man/man1; without it, print
    /// lossless.1 to stdout.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<std::path::PathBuf>,
}

/// Prints the completion script for `args.shell` of command `cmd`.
pub fn completions(args: &CompletionsArgs, mut cmd: clap::Command) -> Result<(), CliError> {
    let name = cmd.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, name, &mut script);
    to_stdout(&script).map(drop)
}

/// Writes the man pages of `cmd` as `args` asks; returns the files written.
pub fn man(args: &ManArgs, cmd: clap::Command) -> Result<Vec<String>, CliError> {
    let cmd = cmd.version(env!("CARGO_PKG_VERSION"));
    let Some(dir) = &args.out_dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|source| CliError::Render {
                page: "the man page".into(),
                source,
            })?;
        return to_stdout(&page).map(|_| Vec::new());
    };
    std::fs::create_dir_all(dir)
        .map_err(CliError::file(format_args!("--out-dir {}", dir.display())))?;
    let mut written = Vec::new();
    write_pages(&cmd, cmd.get_name(), dir, &mut written)?;
    Ok(written)
}

/// Writes the page of `cmd` (named `name`, e.g. `lossless-send-pfc`) and its subcommands'.
fn write_pages(
    cmd: &clap::Command,
    name: &str,
    dir: &Path,
    written: &mut Vec<String>,
) -> Result<(), CliError> {
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone().name(name.to_string()))
        .render(&mut out)
        .map_err(|source| CliError::Render {
            page: format!("{name}.1"),
            source,
        })?;
    std::fs::write(&path, out).map_err(CliError::file(path.display()))?;
    written.push(path.display().to_string());
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}
