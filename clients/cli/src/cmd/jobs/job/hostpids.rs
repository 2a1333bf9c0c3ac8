//! `fluxgate job hostpids`: `host:pid` of each task of a running job, in
//! task rank order, as `flux job hostpids` (flux-core's
//! `src/cmd/job/hostpids.c`) prints it.
//!
//! A job that has not started yet is waited for: its main eventlog is
//! followed to its `start` event (flux follows the exec eventlog to
//! `shell.start`; here `start` is said once every task has launched). The
//! pids come from the job manager (`JobManager.Tasks`), which asks the
//! job's exec services. Refusals are worded as flux words them.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::parse_fsd;
use fluxgate_shared::{IdSet, JobId};

use crate::client::{self, Instance};
use crate::cmd::jobs::attach;
use crate::output::printable;

/// Arguments of `fluxgate job hostpids`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Set output delimiter (default=","; `\n` is a newline).
    #[arg(short = 'd', long, value_name = "STRING", default_value = ",")]
    delimiter: String,
    /// Include only task ranks in IDSET (default: all).
    #[arg(short = 'r', long, value_name = "IDSET")]
    ranks: Option<String>,
    /// Timeout after DURATION (a Flux Standard Duration, e.g. 30s, 1.5m).
    #[arg(short = 't', long, value_name = "DURATION")]
    timeout: Option<String>,
    /// Job id.
    id: String,
}

/// The delimiter as given, with flux's one escape: `\n` for a newline.
fn delimiter(given: &str) -> &str {
    if given == "\\n" { "\n" } else { given }
}

/// The task ranks to print: `None` for all (no option, or `all`).
fn task_ranks(given: Option<&str>) -> anyhow::Result<Option<IdSet>> {
    match given {
        None | Some("all") => Ok(None),
        Some(text) => IdSet::parse(text)
            .map(Some)
            .map_err(|e| anyhow!("--ranks={text}: {e}")),
    }
}

/// How long to wait at most: `None` without a timeout (or an infinite one).
fn timeout(given: Option<&str>) -> anyhow::Result<Option<Duration>> {
    let Some(text) = given else {
        return Ok(None);
    };
    let secs = parse_fsd(text).map_err(|e| anyhow!("--timeout: {e}"))?;
    Ok(Duration::try_from_secs_f64(secs).ok())
}

/// `host:pid` of each task in `ranks` (all when `None`), in task rank
/// order, joined by `delimiter`.
pub fn render(tasks: &[pb::TaskProcess], delimiter: &str, ranks: Option<&IdSet>) -> String {
    let mut shown: Vec<&pb::TaskProcess> = tasks
        .iter()
        .filter(|t| ranks.is_none_or(|r| r.contains(t.task_rank)))
        .collect();
    shown.sort_by_key(|t| t.task_rank);
    shown
        .iter()
        // Hostnames come from the instance's configuration, not from this
        // terminal's user: nothing in them may drive the terminal.
        .map(|t| format!("{}:{}", printable(&t.hostname), t.pid))
        .collect::<Vec<_>>()
        .join(delimiter)
}

/// A refusal of the job manager, worded as flux's hostpids words it.
fn refusal(status: tonic::Status, jobid: &str) -> anyhow::Error {
    match status.code() {
        tonic::Code::NotFound => anyhow!("{jobid}: No such job"),
        tonic::Code::PermissionDenied => anyhow!("hostpids: Permission denied"),
        _ => anyhow!("hostpids: {}", client::status_error(status)),
    }
}

/// Follow the job's main eventlog until its tasks have started; an error
/// when the job is (or becomes) inactive first.
async fn wait_for_start(inst: &Instance, id: JobId, jobid: &str) -> anyhow::Result<()> {
    let mut watch = attach::open_watch(inst, id, "eventlog", true, false)
        .await
        .map_err(|s| refusal(s, jobid))?;
    while let Some(line) = watch.message().await.map_err(|s| refusal(s, jobid))? {
        let ev =
            client::parse_event(&line.line).context("bad eventlog line from the job manager")?;
        match ev.name.as_str() {
            "start" => return Ok(()),
            "clean" => break,
            _ => {}
        }
    }
    // The log ended (the job is inactive) without a start.
    Err(anyhow!("hostpids: job {jobid} is inactive"))
}

/// Wait for the job's tasks to start, then ask where they run.
async fn task_processes(id: JobId, jobid: &str) -> anyhow::Result<Vec<pb::TaskProcess>> {
    let mut inst = client::connect().await?;
    wait_for_start(&inst, id, jobid).await?;
    // The job may have ended since its start: the job manager then says
    // it is inactive (or no longer running).
    let answer = inst
        .jobs
        .tasks(pb::TasksRequest { id: id.as_u64() })
        .await
        .map_err(|s| refusal(s, jobid))?;
    Ok(answer.into_inner().tasks)
}

/// Run `fluxgate job hostpids`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    let delimiter = delimiter(&args.delimiter);
    let ranks = task_ranks(args.ranks.as_deref())?;
    let limit = timeout(args.timeout.as_deref())?;
    let tasks = client::block_on(async {
        let work = task_processes(id, &args.id);
        match limit {
            Some(limit) => tokio::time::timeout(limit, work)
                .await
                .unwrap_or_else(|_| Err(anyhow!("hostpids: timeout waiting for start event"))),
            None => work.await,
        }
    })??;
    if tasks.is_empty() {
        // Test execution (`system.exec.test`) starts no processes.
        return Err(anyhow!(
            "hostpids: job {} has no task processes to list",
            args.id
        ));
    }
    println!("{}", render(&tasks, delimiter, ranks.as_ref()));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(task_rank: u32, host: &str, pid: i32) -> pb::TaskProcess {
        pb::TaskProcess {
            task_rank,
            node_rank: 0,
            hostname: host.into(),
            pid,
        }
    }

    #[test]
    fn host_pid_pairs_in_task_rank_order_as_flux_prints_them() {
        let tasks = [
            task(1, "node1", 12),
            task(0, "node0", 11),
            task(2, "node1", 13),
        ];
        assert_eq!(render(&tasks, ",", None), "node0:11,node1:12,node1:13");
        assert_eq!(
            render(&tasks, delimiter("\\n"), None),
            "node0:11\nnode1:12\nnode1:13"
        );
        assert_eq!(render(&tasks, " ", None), "node0:11 node1:12 node1:13");
        let ranks = task_ranks(Some("0,2")).unwrap();
        assert_eq!(render(&tasks, ",", ranks.as_ref()), "node0:11,node1:13");
        let none = task_ranks(Some("7")).unwrap();
        assert_eq!(render(&tasks, ",", none.as_ref()), "");
    }

    #[test]
    fn options_as_flux_reads_them() {
        assert!(task_ranks(Some("all")).unwrap().is_none());
        assert!(task_ranks(None).unwrap().is_none());
        let bad = task_ranks(Some("1-")).unwrap_err().to_string();
        assert!(bad.starts_with("--ranks=1-: "), "{bad}");
        assert_eq!(delimiter(";"), ";");
        assert_eq!(
            timeout(Some("1.5m")).unwrap(),
            Some(Duration::from_secs(90))
        );
        assert_eq!(timeout(Some("inf")).unwrap(), None);
        assert!(timeout(Some("soon")).is_err());
    }

    #[test]
    fn refusals_in_flux_words() {
        let f = |s| refusal(s, "f2").to_string();
        assert_eq!(
            f(tonic::Status::not_found("job f2 not found")),
            "f2: No such job"
        );
        assert_eq!(
            f(tonic::Status::permission_denied("user x may not read")),
            "hostpids: Permission denied"
        );
        assert_eq!(
            f(tonic::Status::failed_precondition("job f2 is inactive")),
            "hostpids: job f2 is inactive"
        );
    }

    #[test]
    fn a_hostname_cannot_drive_the_terminal() {
        let shown = render(&[task(0, "evil\u{1b}[2J", 1)], ",", None);
        assert!(!shown.contains('\u{1b}'), "{shown:?}");
    }
}
