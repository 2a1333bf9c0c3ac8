//! `fluxgate job status`: wait for jobs to end and exit with the largest of
//! their exit codes, as `flux job status` (flux-core `src/cmd/job/status.c`
//! waits on each job's eventlog for `clean` the same way).

use std::process::ExitCode;

use crate::client;
use crate::cmd::jobs::attach;

/// Arguments of `fluxgate job status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Say how each job ended on stderr.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// The exit code of jobs that ended by an exception (e.g. canceled).
    #[arg(
        short = 'e',
        long = "exception-exit-code",
        value_name = "N",
        default_value_t = 1
    )]
    exception_exit_code: i32,
    /// Job ids.
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
}

/// Run `fluxgate job status`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let ids = client::parse_jobids(&args.ids)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut code = 0;
        for id in ids {
            let mut outcome = attach::outcome(&mut inst, id).await?;
            if outcome.exception {
                outcome.exit_code = args.exception_exit_code;
            }
            if args.verbose {
                let what = outcome
                    .message
                    .clone()
                    .unwrap_or_else(|| format!("exited with exit code {}", outcome.exit_code));
                eprintln!("{}: {what}", client::f58(id));
            }
            code = code.max(outcome.exit_code);
        }
        Ok(ExitCode::from(code.clamp(0, 255) as u8))
    })?
}
