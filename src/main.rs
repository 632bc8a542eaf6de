//! `lossless`: the daemon and its tools.

use clap::{CommandFactory, Parser, Subcommand};
use lossless::cli;

/// Lossless Ethernet in software: an AF_XDP dataplane with PFC, a traffic generator and sink
/// that honour flow control, and a headroom calculator.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon: forward between two ports with PFC (wire mode).
    Run(cli::run::RunArgs),
    /// Show the running daemon's ports, priorities, thresholds, pause state and counters.
    Status(cli::status::StatusArgs),
    /// Validate a configuration file and explain what it sets up.
    CheckConfig(cli::run::CheckArgs),
    /// Send test traffic that honours PAUSE/PFC.
    Gen(cli::gen::GenArgs),
    /// Receive test traffic and prove delivery by sequence number.
    Sink(cli::sink::SinkArgs),
    /// Inject PFC or PAUSE frames.
    #[command(subcommand)]
    Send(cli::send::SendCommand),
    /// Size PFC headroom, thresholds and buffers, showing every term.
    Headroom(cli::headroom::HeadroomArgs),
    /// Emulate a cable: delay, rate, loss and corruption between two interfaces.
    Cable(cli::cable::CableArgs),
    /// Measure the link's round trip to the peer (LLDP and IEEE 1588 peer delay) and the
    /// PFC headroom it implies; or only answer the peer's measurement.
    Measure(cli::measure::MeasureArgs),
    /// Examine a port: what the NIC can do for lossless Ethernet, read from the kernel and
    /// the driver table, a verdict per capability and the commands that fix it.
    Doctor(cli::doctor::DoctorArgs),
    /// Send every frame class the daemon speaks each way between two ports wired to each
    /// other, and report which arrived intact.
    Selftest(cli::selftest::SelftestArgs),
    /// Print the shell completion script for bash, zsh, fish, elvish or powershell.
    Completions(cli::docs::CompletionsArgs),
    /// Print the man page, or write one page per command into a directory.
    Man(cli::docs::ManArgs),
}

fn main() {
    lossless::control::logging::init();
    let cli = Cli::parse();
    let result: Result<(), (String, i32)> = match &cli.command {
        Command::Run(a) => cli::run::run(a).map_err(|e| (e.to_string(), e.exit_code())),
        Command::CheckConfig(a) => cli::run::check(a).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Status(a) => cli::status::run(a).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Gen(a) => cli::gen::run(a).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Sink(a) => cli::sink::run(a).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Send(c) => cli::send::run(c).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Headroom(a) => cli::headroom::run(a).map_err(|e| (e.to_string(), 2)),
        Command::Cable(a) => cli::cable::run(a).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Measure(a) => cli::measure::run(a).map_err(|e| (e.to_string(), e.exit_code())),
        Command::Doctor(a) => match cli::doctor::run(a) {
            Ok(true) => Ok(()),
            Ok(false) => Err((format!("{} is not usable as configured", a.iface), 1)),
            Err(e) => Err((e.to_string(), 2)),
        },
        Command::Selftest(a) => match cli::selftest::run(a) {
            Ok(true) => Ok(()),
            Ok(false) => Err(("some frames did not get through intact".into(), 1)),
            Err(e) => Err((e.to_string(), 2)),
        },
        Command::Completions(a) => {
            cli::docs::completions(a, Cli::command()).map_err(|e| (e.to_string(), 1))
        }
        Command::Man(a) => cli::docs::man(a, Cli::command())
            .map(|written| {
                for path in written {
                    println!("{path}");
                }
            })
            .map_err(|e| (e.to_string(), 1)),
    };
    if let Err((msg, code)) = result {
        eprintln!("lossless: error: {msg}");
        std::process::exit(code);
    }
}
