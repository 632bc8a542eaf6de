//! Command-line subcommands: each module holds one command's flags and its runner.

pub mod cable;
pub mod common;
pub mod docs;
pub mod doctor;
pub mod error;
pub mod gen;
pub mod headroom;
pub mod measure;
pub mod run;
pub mod selftest;
pub mod send;
pub mod sink;
pub mod status;
