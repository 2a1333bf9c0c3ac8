//! `fluxgate queue status|list|enable|disable|start|stop|drain|idle`, as
//! `flux queue` (flux-queue(1)).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::StateMask;
use fluxgate_shared::jobspec::parse_fsd;
use fluxgate_shared::policy::format_fsd_py;
use fluxgate_shared::rset::Constraint;
use fluxgate_shared::{IdSet, ResourceSet};
use serde_json::json;

use crate::client::{self, Instance};
use crate::output::{pad, printable};

/// Arguments of `fluxgate queue`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

/// Which queue a control command applies to.
#[derive(Debug, clap::Args)]
struct Target {
    /// The queue (with named queues, this or --all is needed).
    #[arg(short, long, value_name = "NAME")]
    queue: Option<String>,
    /// Every queue.
    #[arg(short, long, conflicts_with = "queue")]
    all: bool,
    /// Do not print the queue's status afterwards.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Report the queue status.
    Status {
        /// Only this queue.
        #[arg(short, long, value_name = "NAME")]
        queue: Option<String>,
    },
    /// List queues with their state, defaults and limits.
    List {
        /// Only these queues (comma separated).
        #[arg(short, long, value_delimiter = ',')]
        queue: Vec<String>,
        /// Do not print the header.
        #[arg(short, long = "no-header")]
        no_header: bool,
    },
    /// Take job submissions.
    Enable {
        #[command(flatten)]
        target: Target,
    },
    /// Refuse job submissions.
    Disable {
        #[command(flatten)]
        target: Target,
        /// Why submissions are refused.
        message: Vec<String>,
    },
    /// Start scheduling.
    Start {
        #[command(flatten)]
        target: Target,
    },
    /// Stop scheduling; jobs may still be submitted.
    Stop {
        #[command(flatten)]
        target: Target,
        /// Why the queue is stopped.
        reason: Vec<String>,
    },
    /// Wait until no job is active.
    Drain {
        /// Give up after DURATION.
        #[arg(short, long, value_name = "DURATION")]
        timeout: Option<String>,
    },
    /// Wait until no job is running.
    Idle {
        /// Give up after DURATION.
        #[arg(short, long, value_name = "DURATION")]
        timeout: Option<String>,
        /// Do not report the number of pending jobs.
        #[arg(short, long)]
        quiet: bool,
    },
}

async fn queue(
    inst: &mut Instance,
    action: pb::QueueAction,
    name: Option<&str>,
    all: bool,
    reason: String,
) -> anyhow::Result<pb::QueueResponse> {
    Ok(inst
        .jobs
        .queue(pb::QueueRequest {
            action: action as i32,
            reason,
            name: name.unwrap_or_default().to_string(),
            all,
        })
        .await
        .map_err(client::status_error)?
        .into_inner())
}

/// "NAME: " before a named queue's lines, as flux prints them.
fn prefix(q: &pb::QueueInfo) -> String {
    if q.name.is_empty() {
        String::new()
    } else {
        format!("{}: ", printable(&q.name))
    }
}

fn print_enable(q: &pb::QueueInfo) {
    if q.enabled {
        println!("{}Job submission is enabled", prefix(q));
    } else {
        println!(
            "{}Job submission is disabled: {}",
            prefix(q),
            printable(&q.disable_reason)
        );
    }
}

fn print_start(q: &pb::QueueInfo) {
    if q.started {
        println!("{}Scheduling is started", prefix(q));
    } else if q.stop_reason.is_empty() {
        println!("{}Scheduling is stopped", prefix(q));
    } else {
        println!(
            "{}Scheduling is stopped: {}",
            prefix(q),
            printable(&q.stop_reason)
        );
    }
}

/// How long `queue idle`/`drain` may wait without `--timeout`: as long as
/// it takes (the call is exempt from the client's usual bound).
const QUIET_UNBOUNDED: Duration = Duration::from_secs(365 * 86_400);

/// Wait on the service until no job runs (`Idle`) or none is active
/// (`Drain`): it answers at that moment. The call carries its own bound,
/// past `--timeout` (which [`with_timeout`] enforces with flux's words).
async fn wait_quiet(
    inst: &mut Instance,
    action: pb::QueueAction,
    timeout: &Option<String>,
) -> anyhow::Result<()> {
    let bound = match timeout {
        Some(t) => parse_fsd(t)
            .map(|s| Duration::from_secs_f64(s.clamp(0.0, 1e6)) + Duration::from_secs(1))
            .unwrap_or(QUIET_UNBOUNDED),
        None => QUIET_UNBOUNDED,
    };
    let mut request = tonic::Request::new(pb::QueueRequest {
        action: action as i32,
        ..Default::default()
    });
    request.set_timeout(bound);
    inst.jobs
        .queue(request)
        .await
        .map_err(client::status_error)?;
    Ok(())
}

async fn with_timeout<F: std::future::Future<Output = anyhow::Result<()>>>(
    timeout: &Option<String>,
    fut: F,
) -> anyhow::Result<()> {
    match timeout {
        Some(t) => {
            let secs = parse_fsd(t).map_err(|e| anyhow!("invalid timeout {t:?}: {e}"))?;
            tokio::time::timeout(Duration::from_secs_f64(secs.max(0.0)), fut)
                .await
                .map_err(|_| anyhow!("timeout"))?
        }
        None => fut.await,
    }
}

/// Ranks of `all` (the inventory, with its properties) that the queues
/// named in `names` cover: those with every property a queue requires.
pub async fn ranks_of(
    inst: &mut Instance,
    all: &ResourceSet,
    names: &[String],
) -> anyhow::Result<IdSet> {
    let r = queue(inst, pb::QueueAction::Status, None, false, String::new()).await?;
    let mut ranks = IdSet::new();
    for name in names {
        let q = r
            .queues
            .iter()
            .find(|q| &q.name == name)
            .ok_or_else(|| anyhow!("'{name}' is not a valid queue"))?;
        ranks = ranks.union(&queue_resources(all, q)?.ranks());
    }
    Ok(ranks)
}

/// The resources of queue `q`: those with every property it requires.
fn queue_resources(all: &ResourceSet, q: &pb::QueueInfo) -> anyhow::Result<ResourceSet> {
    if q.requires.is_empty() {
        return Ok(all.clone());
    }
    let c = Constraint::from_json(&json!({ "properties": q.requires }))
        .map_err(|e| anyhow!("queue {}: {e}", q.name))?;
    Ok(all.copy_constraint(&c))
}

/// A time limit as `flux queue list` prints it: `inf` when there is none.
fn limit(secs: f64) -> String {
    if secs <= 0.0 || secs.is_infinite() {
        "inf".into()
    } else {
        format_fsd_py(secs)
    }
}

/// `min-max` of a job-size limit, the maximum bounded by what the queue
/// has (flux's effective range); -1 is none.
fn range(min: i64, max: i64, have: u64) -> String {
    let lo = if min < 0 { 0 } else { min.unsigned_abs() };
    let hi = if max < 0 {
        have
    } else {
        have.min(max.unsigned_abs())
    };
    format!("{lo}-{hi}")
}

/// The lines of `flux queue list`'s default format.
fn list_lines(
    queues: &[pb::QueueInfo],
    all: &ResourceSet,
    header: bool,
) -> anyhow::Result<Vec<String>> {
    // `?:` in flux's format: the QUEUE column only when queues are named.
    let named = queues.iter().any(|q| !q.name.is_empty());
    let mut out = Vec::new();
    let head = |q: &str| {
        if named {
            format!("{} ", pad(q, 8, Some(8), false))
        } else {
            String::new()
        }
    };
    if header {
        out.push(format!(
            "{}EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS",
            head("QUEUE")
        ));
    }
    for q in queues {
        let r = queue_resources(all, q)?;
        let have = [r.nnodes() as u64, r.ncores(), r.ngpus()];
        let at = |v: &[i64], i: usize| v.get(i).copied().unwrap_or(-1);
        let name = if q.is_default && !q.name.is_empty() {
            format!("{}*", q.name)
        } else {
            q.name.clone()
        };
        out.push(format!(
            "{}{} {} {} {} {} {} {}",
            head(&printable(&name)),
            pad(if q.enabled { "✔" } else { "✗" }, 2, None, true),
            pad(if q.started { "✔" } else { "✗" }, 2, None, true),
            pad(&limit(q.default_duration), 8, None, true),
            pad(&limit(q.duration_limit), 8, None, true),
            pad(
                &range(at(&q.min, 0), at(&q.max, 0), have[0]),
                10,
                None,
                true
            ),
            pad(
                &range(at(&q.min, 1), at(&q.max, 1), have[1]),
                10,
                None,
                true
            ),
            pad(
                &range(at(&q.min, 2), at(&q.max, 2), have[2]),
                10,
                None,
                true
            ),
        ));
    }
    Ok(out)
}

async fn list(inst: &mut Instance, names: &[String], no_header: bool) -> anyhow::Result<()> {
    let r = queue(inst, pb::QueueAction::Status, None, false, String::new()).await?;
    let mut queues = r.queues;
    if !names.is_empty() {
        for n in names {
            if !queues.iter().any(|q| &q.name == n) {
                return Err(anyhow!("'{n}' is not a valid queue"));
            }
        }
        queues.retain(|q| names.contains(&q.name));
    }
    let inv = inst
        .resource
        .list(pb::ResourceListRequest {})
        .await
        .map_err(client::status_error)?
        .into_inner();
    let all = if inv.all.trim().is_empty() {
        ResourceSet::new()
    } else {
        ResourceSet::parse(&inv.all)
            .map_err(|e| anyhow!("the instance sent an unreadable R: {e}"))?
    };
    for line in list_lines(&queues, &all, !no_header)? {
        println!("{line}");
    }
    Ok(())
}

/// Run a control action and print the statuses it reports, as flux does.
async fn control(
    inst: &mut Instance,
    action: pb::QueueAction,
    target: &Target,
    reason: String,
    show: fn(&pb::QueueInfo),
) -> anyhow::Result<()> {
    let r = queue(inst, action, target.queue.as_deref(), target.all, reason).await?;
    if !target.quiet {
        r.queues.iter().for_each(show);
    }
    Ok(())
}

/// Run `fluxgate queue`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    client::block_on(async {
        let mut inst = client::connect().await?;
        let inst = &mut inst;
        match args.command {
            Command::Status { queue: name } => {
                let r = queue(
                    inst,
                    pb::QueueAction::Status,
                    name.as_deref(),
                    false,
                    String::new(),
                )
                .await?;
                for q in &r.queues {
                    print_enable(q);
                    print_start(q);
                }
            }
            Command::List {
                queue: names,
                no_header,
            } => list(inst, &names, no_header).await?,
            Command::Enable { target } => {
                control(
                    inst,
                    pb::QueueAction::Enable,
                    &target,
                    String::new(),
                    print_enable,
                )
                .await?
            }
            Command::Disable { target, message } => {
                control(
                    inst,
                    pb::QueueAction::Disable,
                    &target,
                    message.join(" "),
                    print_enable,
                )
                .await?
            }
            Command::Start { target } => {
                control(
                    inst,
                    pb::QueueAction::Start,
                    &target,
                    String::new(),
                    print_start,
                )
                .await?
            }
            Command::Stop { target, reason } => {
                control(
                    inst,
                    pb::QueueAction::Stop,
                    &target,
                    reason.join(" "),
                    print_start,
                )
                .await?
            }
            Command::Drain { timeout } => {
                with_timeout(&timeout, wait_quiet(inst, pb::QueueAction::Drain, &timeout)).await?;
            }
            Command::Idle { timeout, quiet } => {
                with_timeout(&timeout, wait_quiet(inst, pb::QueueAction::Idle, &timeout)).await?;
                if !quiet {
                    let request = pb::ListRequest {
                        states: StateMask::PENDING.bits(),
                        ..Default::default()
                    };
                    // Every page: a listing reply is bounded in bytes.
                    let pending = crate::cmd::jobs::list_all(inst, request).await?.len();
                    println!("{pending} pending jobs");
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })?
}

#[cfg(test)]
mod tests {
    use fluxgate_shared::rset::Node;

    use super::*;

    fn info(name: &str, requires: &[&str]) -> pb::QueueInfo {
        pb::QueueInfo {
            name: name.into(),
            enabled: true,
            started: true,
            min: vec![-1; 3],
            max: vec![-1; 3],
            requires: requires.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn list_rows_match_flux() {
        let mut all = ResourceSet::from_nodes((0..4).map(|r| {
            Node::new(
                r,
                Some(&format!("n{r}")),
                IdSet::from_range(0, 3),
                IdSet::new(),
            )
        }))
        .unwrap();
        all.set_property("batch", &IdSet::from_range(1, 3)).unwrap();
        let anon = info("", &[]);
        let lines = list_lines(&[anon], &all, true).unwrap();
        assert_eq!(
            lines,
            [
                "EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS",
                " ✔  ✔      inf      inf        0-4       0-16        0-0",
            ]
        );
        let mut batch = info("batch", &["batch"]);
        batch.is_default = true;
        batch.default_duration = 3600.0;
        batch.duration_limit = 4.0 * 3600.0;
        batch.max = vec![2, -1, -1];
        batch.min = vec![1, -1, -1];
        let mut debug = info("debug", &[]);
        debug.started = false;
        let lines = list_lines(&[batch, debug], &all, true).unwrap();
        assert_eq!(
            lines,
            [
                "QUEUE    EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS",
                "batch*    ✔  ✔       1h       4h        1-2       0-12        0-0",
                "debug     ✔  ✗      inf      inf        0-4       0-16        0-0",
            ]
        );
    }
}
