//! `fluxgate bench`: the load generator lives in its own binary,
//! `fluxgate-bench`; this entry runs it with the same arguments.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::Context;

/// The man page of `fluxgate bench`, shown by `--help`.
pub const HELP: &str = "\
Runs fluxgate-bench (beside this executable, else on PATH) with the same
arguments: `fluxgate bench --help` shows its workloads and figures.";

/// Arguments of `fluxgate bench`: all of them are `fluxgate-bench`'s.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// The arguments of fluxgate-bench (WORKLOAD and options).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// The `fluxgate-bench` beside this executable, else the one on PATH.
fn bench_exe() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("fluxgate-bench")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("fluxgate-bench"))
}

/// Replace this process with `fluxgate-bench ARGS`; returns only on failure.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let exe = bench_exe();
    let err = Command::new(&exe).args(&args.args).exec();
    Err(err).with_context(|| format!("cannot run {}", exe.display()))
}
