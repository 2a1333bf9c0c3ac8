//! `fluxgate cancel`: cancel jobs as `flux cancel` does (an exception of
//! type `cancel`, severity 0), by id or all of a user's active jobs.

use std::process::ExitCode;

use anyhow::bail;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::job::StateMask;

use crate::client;

/// Arguments of `fluxgate cancel`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Target all jobs matching the filters (default: your pending and running jobs).
    #[arg(long)]
    all: bool,
    /// Target jobs of USER ("all" for every user); implies --all.
    #[arg(short = 'u', long = "user", value_name = "USER")]
    user: Option<String>,
    /// Target jobs in these states (default: pending,running); implies --all.
    #[arg(
        short = 'S',
        long = "states",
        value_name = "STATES",
        value_delimiter = ','
    )]
    states: Vec<String>,
    /// Do not cancel, only say what would be canceled.
    #[arg(short = 'n', long = "dry-run")]
    dry_run: bool,
    /// Say nothing when no job matches.
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
    /// Set the cancel exception note.
    #[arg(short = 'm', long = "message", value_name = "NOTE")]
    message: Option<String>,
    /// Job ids.
    ids: Vec<String>,
}

/// Run `fluxgate cancel`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // As flux: a user or states filter means every matching job.
    let all = args.all || args.user.is_some() || !args.states.is_empty();
    if args.ids.is_empty() && !all {
        bail!("specify jobids or use --all");
    }
    if !args.ids.is_empty() && all {
        bail!("Do not specify a list of jobids with --all,--user,--states options");
    }
    let mut mask = StateMask::EMPTY;
    for s in args.states.iter().filter(|s| !s.is_empty()) {
        mask |= s
            .parse::<StateMask>()
            .map_err(|e| anyhow::anyhow!("--states: {e}"))?;
    }
    if mask.is_empty() {
        mask = StateMask::ACTIVE;
    }
    let ids = client::parse_jobids(&args.ids)?;
    let note = args.message.clone().unwrap_or_default();
    client::block_on(async {
        let mut inst = client::connect().await?;
        let targets: Vec<JobId> = if all {
            let userid = match args.user.as_deref() {
                Some("all") => None,
                Some(u) => Some(u.parse::<u32>().or_else(|_| {
                    nix::unistd::User::from_name(u)
                        .ok()
                        .flatten()
                        .map(|x| x.uid.as_raw())
                        .ok_or_else(|| anyhow::anyhow!("Unknown user {u}"))
                })?),
                None => Some(client::my_uid()),
            };
            let request = pb::ListRequest {
                states: mask.bits(),
                userid,
                ..Default::default()
            };
            // Every page: a listing reply is bounded in bytes.
            crate::cmd::jobs::list_all(&mut inst, request)
                .await?
                .iter()
                .map(|j| JobId::from(j.id))
                .collect()
        } else {
            ids
        };
        if all && targets.is_empty() {
            if !args.quiet {
                eprintln!("fluxgate-cancel: Matched 0 jobs");
            }
            return Ok(ExitCode::SUCCESS);
        }
        if args.dry_run {
            eprintln!(
                "fluxgate-cancel: Would cancel {}",
                count(targets.len(), "job")
            );
            return Ok(ExitCode::SUCCESS);
        }
        let mut errors = 0;
        for id in &targets {
            if let Err(e) = inst
                .jobs
                .cancel(pb::CancelRequest {
                    id: id.as_u64(),
                    note: note.clone(),
                })
                .await
            {
                errors += 1;
                eprintln!(
                    "fluxgate-cancel: {}: {}",
                    client::f58(*id),
                    crate::output::printable(e.message())
                );
            }
        }
        if all {
            eprintln!(
                "fluxgate-cancel: Canceled {} ({})",
                count(targets.len() - errors, "job"),
                count(errors, "error")
            );
        }
        Ok(if errors > 0 {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    })?
}

/// `n word(s)`, as flux words its summaries ("1 job", "2 jobs", "0 errors").
fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn summaries_as_flux_words_them() {
        assert_eq!(count(1, "job"), "1 job");
        assert_eq!(count(3, "job"), "3 jobs");
        assert_eq!(count(0, "error"), "0 errors");
    }
}
