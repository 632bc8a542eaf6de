//! Command-line subcommands: each module holds one command's flags and its runner.

pub mod cable;
pub mod common;
pub mod gen;
pub mod headroom;
pub mod measure;
pub mod run;
pub mod send;
pub mod sink;
pub mod status;
