//! `fluxgate completions SHELL` and `fluxgate man DIR`: shell completions
//! and man pages made from the command line's own definitions, so they
//! never disagree with it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap_complete::Shell;

/// Arguments of `fluxgate completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    shell: Shell,
}

/// Arguments of `fluxgate man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory the pages are written to (fluxgate.1, fluxgate-submit.1, ...).
    dir: PathBuf,
}

/// Print the completion script of `cli` for the shell asked.
pub fn run_completions(args: CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<ExitCode> {
    let name = cli.get_name().to_string();
    // Made whole first: the generator panics on a write error, and a
    // reader that stops early (`| head`) is not one.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, name, &mut script);
    match std::io::Write::write_all(&mut std::io::stdout(), &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("writing the completion script")
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Write a man page for `cli` and each of its subcommands, nested ones too.
pub fn run_man(args: ManArgs, cli: clap::Command) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let written = write_pages(&args.dir, cli.clone(), cli.get_name())?;
    eprintln!("fluxgate-man: {written} pages in {}", args.dir.display());
    Ok(ExitCode::SUCCESS)
}

/// The page of `cmd`, named `name`, and those of its visible subcommands.
fn write_pages(dir: &std::path::Path, cmd: clap::Command, name: &str) -> anyhow::Result<usize> {
    let cmd = cmd.display_name(name).bin_name(name.replace('-', " "));
    let mut page = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .render(&mut page)
        .with_context(|| format!("rendering {name}(1)"))?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    let mut written = 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written += write_pages(dir, sub.clone(), &format!("{name}-{}", sub.get_name()))?;
    }
    Ok(written)
}
