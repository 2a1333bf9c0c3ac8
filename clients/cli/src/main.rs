//! `fluxgate`: the user and admin command line.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Fluxgate: a job manager that follows the Flux RFCs.
#[derive(Debug, Parser)]
#[command(name = "fluxgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decode, combine and encode RFC 22 idsets.
    Idset(cmd::idset::Args),
    /// Manipulate RFC 29 hostlists (as flux-hostlist).
    Hostlist(cmd::hostlist::Args),
    /// Encode, decode and combine RFC 20 resource sets (as flux R).
    #[command(name = "R")]
    R(cmd::r::Args),
    /// Job commands.
    Job(cmd::job::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (name, result) = match cli.command {
        Command::Idset(args) => ("idset", cmd::idset::run(args)),
        Command::Hostlist(args) => ("hostlist", cmd::hostlist::run(args)),
        Command::R(args) => ("R", cmd::r::run(args)),
        Command::Job(args) => ("job", cmd::job::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // One line a person can act on, as flux's tools print it.
            eprintln!("fluxgate-{name}: {err:#}");
            ExitCode::FAILURE
        }
    }
}
