//! `lossless status`: ask the running daemon for its state over the control socket, once or
//! every interval with rates (`--watch`).

use std::{io::IsTerminal, path::PathBuf, time::Duration};

use clap::Args;

use super::{common, error::CliError};
use crate::{config::DEFAULT_SOCKET, control::status};

/// Flags of `lossless status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Control socket of the daemon (`[control] socket` in its config).
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print the status as JSON (with --watch, one object per line). When the daemon cannot
    /// be reached, an object with an `error` field.
    #[arg(long)]
    pub json: bool,
    /// Print the status again every INTERVAL ("1s", "500ms") until interrupted, with the
    /// rates since the previous one (frames and bits per second, PFC frames, drops).
    #[arg(long, value_name = "INTERVAL", value_parser = common::nonzero_duration)]
    pub watch: Option<Duration>,
}

/// Runs `lossless status`.
pub fn run(args: &StatusArgs) -> Result<(), CliError> {
    let query = || {
        status::query(&args.socket).map_err(|e| {
            if args.json {
                println!("{}", serde_json::json!({ "error": e.to_string() }));
            }
            CliError::Control(e)
        })
    };
    let Some(every) = args.watch else {
        common::print_report(&query()?, args.json, status::text);
        return Ok(());
    };
    let clear = !args.json && std::io::stdout().is_terminal();
    let mut before = None;
    loop {
        let now = query()?;
        let mut page = String::new();
        if args.json {
            page = serde_json::to_string(&now).expect("status serialises");
        } else {
            if clear {
                page += "\x1b[2J\x1b[H";
            }
            page += &status::text(&now);
            if let Some(b) = &before {
                page += &format!(
                    "\nper second over the last {:.1} s:\n{}",
                    every.as_secs_f64(),
                    status::rates(b, &now)
                );
            }
        }
        page.push('\n');
        if !common::to_stdout(page.as_bytes())? {
            return Ok(()); // the reader went away (`| head`)
        }
        before = Some(now);
        std::thread::sleep(every);
    }
}
