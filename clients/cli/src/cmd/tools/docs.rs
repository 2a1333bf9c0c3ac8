//! `fluxgate completions SHELL` and the hidden `fluxgate man DIR`: shell
//! completion scripts and man pages generated from the clap definitions,
//! so they never drift from the options the binary accepts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `fluxgate completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write a completion script for.
    shell: clap_complete::Shell,
}

/// Arguments of `fluxgate man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write `fluxgate.1` and one page per subcommand into.
    dir: PathBuf,
}

/// Write the completion script for `args.shell` to stdout.
pub fn run_completions(args: CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    let name = cli.get_name().to_string();
    clap_complete::generate(args.shell, &mut cli, name, &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Write the man pages into `args.dir` (created if missing).
pub fn run_man(args: ManArgs, cli: clap::Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    clap_mangen::generate_to(cli, &args.dir)
        .with_context(|| format!("cannot write man pages into {}", args.dir.display()))?;
    Ok(ExitCode::SUCCESS)
}
