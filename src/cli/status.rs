//! `lossless status`: ask the running daemon for its state over the control socket.

use std::path::PathBuf;

use clap::Args;

use super::common;
use crate::control::status::{self, DEFAULT_SOCKET};

/// Flags of `lossless status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Control socket of the daemon (`[control] socket` in its config).
    #[arg(long, default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `lossless status`.
pub fn run(args: &StatusArgs) -> Result<(), String> {
    let s = status::query(&args.socket).map_err(|e| e.to_string())?;
    common::print_report(&s, args.json, status::text);
    Ok(())
}
