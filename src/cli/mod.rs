//! Command-line subcommands.
