//! Placeholder: to be written.

use std::process::ExitCode;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run the command.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
