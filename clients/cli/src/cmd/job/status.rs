//! `fluxgate job status ID…`: wait for jobs to end and exit with the
//! largest exit code among them, as `flux job status`.

use std::process::ExitCode;

use fluxgate_shared::JobId;
use serde_json::json;

use crate::client::{self, Instance};
use crate::cmd::attach;

/// Arguments of `fluxgate job status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Say how each job that did not succeed ended (twice: every job).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Exit code of a job ended by an exception alone (e.g. canceled).
    #[arg(
        short = 'e',
        long = "exception-exit-code",
        value_name = "N",
        default_value_t = 1
    )]
    exception_exit_code: i32,
    /// Print each job's result as JSON on standard output.
    #[arg(short, long)]
    json: bool,
    /// The jobs.
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
}

/// How one job ended, from its eventlog.
#[derive(Debug, Default, PartialEq)]
struct Ended {
    waitstatus: Option<i32>,
    /// Type of the fatal exception, if one was raised.
    exception: Option<String>,
}

impl Ended {
    /// The shell's exit code for this job (128+N for a signal).
    fn exit_code(&self, exception_exit_code: i32) -> i32 {
        let code = self
            .waitstatus
            .map_or(0, |ws| client::waitstatus_to_exitcode(ws).0);
        if self.exception.is_some() {
            code.max(exception_exit_code)
        } else {
            code
        }
    }
}

/// Follow job `id`'s eventlog to its end.
async fn ended(inst: &mut Instance, id: JobId) -> anyhow::Result<Ended> {
    let mut watch = attach::watch(inst, id, "eventlog", true, false).await?;
    let mut out = Ended::default();
    while let Some(line) = watch.message().await.map_err(client::status_error)? {
        let ev = client::parse_event(&line.line)?;
        match ev.name.as_str() {
            "finish" => out.waitstatus = ev.ctx_i64("status").ok().map(|s| s as i32),
            "exception" if ev.ctx_i64("severity").unwrap_or(1) == 0 && out.exception.is_none() => {
                out.exception = Some(ev.ctx_str("type").unwrap_or("").to_string());
            }
            "clean" => break,
            _ => {}
        }
    }
    Ok(out)
}

/// Run `fluxgate job status`.
pub fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let ids = args
        .ids
        .iter()
        .map(|s| client::parse_jobid(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let results = client::block_on(async {
        let mut inst = client::connect().await?;
        let mut results = Vec::with_capacity(ids.len());
        for id in &ids {
            results.push((*id, ended(&mut inst, *id).await?));
        }
        Ok::<_, anyhow::Error>(results)
    })??;
    let mut worst = 0;
    for (id, end) in &results {
        let code = end.exit_code(args.exception_exit_code);
        worst = worst.max(code);
        if args.json {
            println!(
                "{}",
                json!({
                    "id": id.as_u64(),
                    "waitstatus": end.waitstatus,
                    "exception_occurred": end.exception.is_some(),
                    "exception_type": end.exception,
                    "exitcode": code,
                })
            );
        }
        let signal = end
            .waitstatus
            .and_then(|ws| fluxgate_shared::job::WaitStatus(ws).signal());
        if args.verbose > 0 {
            let name = client::f58(*id);
            if let Some(sig) = signal {
                eprintln!("fluxgate-job: {name}: job shell died by signal {sig}");
            } else if args.verbose > 1 || code != 0 {
                match &end.exception {
                    Some(kind) => eprintln!("fluxgate-job: {name}: exception type={kind}"),
                    None => eprintln!("fluxgate-job: {name}: exited with exit code {code}"),
                }
            }
        }
    }
    Ok(ExitCode::from(worst.clamp(0, 255) as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        let ok = Ended {
            waitstatus: Some(0),
            exception: None,
        };
        assert_eq!(ok.exit_code(1), 0);
        let exited = Ended {
            waitstatus: Some(3 << 8),
            exception: None,
        };
        assert_eq!(exited.exit_code(1), 3);
        let killed = Ended {
            waitstatus: Some(9),
            exception: None,
        };
        assert_eq!(killed.exit_code(1), 137);
        let canceled = Ended {
            waitstatus: None,
            exception: Some("cancel".into()),
        };
        assert_eq!(canceled.exit_code(1), 1);
        assert_eq!(canceled.exit_code(42), 42);
    }
}
