//! `fluxgate job ...`: one module per job subcommand.

use std::process::ExitCode;

pub mod id;

/// Arguments of `fluxgate job`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Convert job ids between encodings (as `flux job id`).
    Id(id::Args),
}

/// Run `fluxgate job`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Id(a) => id::run(a),
    }
}
