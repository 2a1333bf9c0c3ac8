//! `fluxgate jobs`: list jobs as `flux jobs` does, by default with flux's
//! format `{id.f58:>12} ?:{queue:<8.8} +:{username:<8} {name:<10.10+}
//! {status_abbrev:>2.2} {ntasks:>6} {nnodes:>6h} {contextual_time!F:>8h}
//! {contextual_info}`; every `-o` format is rendered by `fluxgate_jobfmt`.
//! Pending jobs come first (highest priority first), then running, then
//! inactive, most recent first.

pub mod format;
pub mod pager;

use pager::list_all;

use std::collections::HashMap;
use std::process::ExitCode;

use anyhow::{anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::{JobResult, StateMask};
use fluxgate_shared::jobspec::parse_fsd;
use fluxgate_shared::{JobId, JobState};
use serde_json::{Value, json};

use fluxgate_jobfmt::details::{self, JobDetails};
use fluxgate_jobfmt::instance::InstanceInfo;
use fluxgate_jobfmt::{Template, record};
use fluxgate_shared::job::usage::Total;

use crate::client;
use crate::cmd::instance::probe;

/// Arguments of `fluxgate jobs`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// List jobs in all states, including inactive jobs.
    #[arg(short = 'a')]
    all: bool,
    /// List jobs of all users.
    #[arg(short = 'A')]
    all_users: bool,
    /// For default output, do not output column headers.
    #[arg(short = 'n', long = "no-header", alias = "suppress-header")]
    no_header: bool,
    /// List jobs for a specific username or userid; "all" for all users.
    #[arg(short = 'u', long = "user", value_name = "USER")]
    user: Option<String>,
    /// List jobs with a specific job name.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// List jobs in a specific queue.
    #[arg(short = 'q', long, value_name = "QUEUE")]
    queue: Option<String>,
    /// Limit output to N jobs.
    #[arg(short = 'c', long = "count", value_name = "N", default_value_t = 1000)]
    count: u32,
    /// List jobs inactive since WHEN (seconds since the epoch or -FSD ago); implies -a.
    #[arg(long, value_name = "WHEN", allow_hyphen_values = true)]
    since: Option<String>,
    /// List jobs with specific job state or result (comma separated).
    #[arg(
        short = 'f',
        long = "filter",
        value_name = "STATE|RESULT",
        value_delimiter = ','
    )]
    filter: Vec<String>,
    /// -o/--format, --sort, -w, --stats and --stats-only (flux-jobs(1) formats).
    #[command(flatten)]
    fmt: crate::cmd::jobs::list::format::FormatArgs,
    /// Emit the jobs as JSON.
    #[arg(long)]
    json: bool,
    /// Color output (accepted for compatibility; output is never colored).
    #[arg(long, value_name = "WHEN")]
    color: Option<String>,
    /// List jobs of instances inside jobs too, each under its id path.
    #[arg(short = 'R', long = "recursive")]
    recursive: bool,
    /// With -R, descend at most N levels.
    #[arg(short = 'L', long = "level", value_name = "N", default_value_t = MAX_LEVEL)]
    level: usize,
    /// Only these job ids.
    ids: Vec<String>,
}

/// How deep -R follows instances inside jobs: a bound on nesting.
const MAX_LEVEL: usize = 8;

fn username(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

fn state_of(j: &pb::JobSummary) -> Option<JobState> {
    j.state.parse().ok()
}

/// The listing as `--json` prints it.
fn jobs_json(jobs: &[pb::JobSummary]) -> Value {
    let jobs: Vec<Value> = jobs
        .iter()
        .map(|j| {
            let mut o = json!({
                "id": j.id,
                "userid": j.userid,
                "urgency": j.urgency,
                "priority": j.priority,
                "t_submit": j.t_submit,
                "state": j.state,
                "name": j.name,
                "ntasks": j.ntasks,
                "nnodes": j.nnodes,
                "nodelist": j.nodelist,
            });
            if let Some(m) = o.as_object_mut() {
                if !j.queue.is_empty() {
                    m.insert("queue".into(), json!(j.queue));
                }
                if j.t_run > 0.0 {
                    m.insert("t_run".into(), json!(j.t_run));
                }
                if j.t_inactive > 0.0 {
                    m.insert("t_inactive".into(), json!(j.t_inactive));
                }
                if !j.result.is_empty() {
                    m.insert("result".into(), json!(j.result));
                    m.insert("success".into(), json!(j.result == "COMPLETED"));
                }
                if let Some(ws) = j.waitstatus {
                    m.insert("waitstatus".into(), json!(ws));
                }
                if !j.exception_type.is_empty() {
                    m.insert("exception_occurred".into(), json!(true));
                    m.insert("exception_type".into(), json!(j.exception_type));
                    m.insert("exception_note".into(), json!(j.exception_note));
                }
                if let Ok(a) = serde_json::from_str::<Value>(&j.annotations)
                    && a.as_object().is_some_and(|a| !a.is_empty())
                {
                    m.insert("annotations".into(), a);
                }
            }
            o
        })
        .collect();
    json!({ "jobs": jobs })
}

fn parse_user(u: &str) -> anyhow::Result<Option<u32>> {
    if u == "all" {
        return Ok(None);
    }
    if let Ok(n) = u.parse::<u32>() {
        return Ok(Some(n));
    }
    match nix::unistd::User::from_name(u) {
        Ok(Some(user)) => Ok(Some(user.uid.as_raw())),
        _ => bail!("Unknown user {u}"),
    }
}

/// The states and results `-f STATE|RESULT,...` names, as flux-jobs(1)
/// reads them: a result selects inactive jobs with that result.
pub fn parse_filters(filters: &[String]) -> anyhow::Result<(StateMask, Vec<String>)> {
    let mut mask = StateMask::EMPTY;
    let mut results = Vec::new();
    for f in filters.iter().filter(|f| !f.is_empty()) {
        if let Ok(m) = f.parse::<StateMask>() {
            mask |= m;
        } else if let Ok(r) = f.parse::<JobResult>() {
            mask |= StateMask::from(JobState::Inactive);
            results.push(r.abbrev().to_string());
        } else if f.eq_ignore_ascii_case("inactive") {
            mask |= StateMask::from(JobState::Inactive);
        } else {
            bail!("invalid filter specified: {f}");
        }
    }
    Ok((mask, results))
}

/// The time `--since=WHEN` names: seconds since the epoch, or `-FSD`
/// before `now`; a time in the future is refused.
pub fn parse_since(w: &str, now: f64) -> anyhow::Result<f64> {
    let t = match w.strip_prefix('-') {
        Some(d) => now - parse_fsd(d).map_err(|e| anyhow!("--since={w}: {e}"))?,
        None => w
            .parse::<f64>()
            .map_err(|_| anyhow!("--since={w}: expected seconds since the epoch or -DURATION"))?,
    };
    if t > now {
        bail!("--since={w} appears to be in the future");
    }
    Ok(t)
}

/// Run `fluxgate jobs`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let fmt = match args.fmt.prepare(args.json, args.queue.as_deref())? {
        crate::cmd::jobs::list::format::Prepared::Format(f) => f,
        crate::cmd::jobs::list::format::Prepared::Done(code) => return Ok(code),
    };
    let now = client::now();
    let (mut mask, results) = parse_filters(&args.filter)?;
    let since = args
        .since
        .as_deref()
        .map(|w| parse_since(w, now))
        .transpose()?;
    if args.all || args.all_users || (since.is_some() && args.filter.is_empty()) {
        mask |= StateMask::ACTIVE | JobState::Inactive;
    }
    if mask.is_empty() {
        mask = StateMask::ACTIVE;
    }
    let userid = if args.all_users {
        None
    } else {
        match &args.user {
            Some(u) => parse_user(u)?,
            None => Some(client::my_uid()),
        }
    };
    let ids = args
        .ids
        .iter()
        .map(|s| client::parse_jobid(s).map(JobId::as_u64))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let request = pb::ListRequest {
        // Specific ids are listed whatever their state.
        states: if ids.is_empty() { mask.bits() } else { 0x7f },
        userid: if ids.is_empty() { userid } else { None },
        name: args.name.clone(),
        since,
        max_entries: if ids.is_empty() { args.count } else { 0 },
        results: results.clone(),
        before: 0,
        // Filtered by the service, so that --count counts the queue's jobs.
        queue: args.queue.clone(),
    };
    client::block_on(async {
        let mut inst = client::connect().await?;
        let depth = if args.recursive {
            args.level.min(MAX_LEVEL)
        } else {
            0
        };
        list_level(
            &args,
            &fmt,
            &mut inst,
            &request,
            &ids,
            now,
            String::new(),
            depth,
        )
        .await
    })??;
    Ok(ExitCode::SUCCESS)
}

/// List the jobs of `inst` and, `depth` levels down, of the instances its
/// running jobs hold, each introduced by its id path as flux jobs -R does.
#[allow(clippy::too_many_arguments)]
async fn list_level(
    args: &Args,
    fmt: &str,
    inst: &mut client::Instance,
    request: &pb::ListRequest,
    ids: &[u64],
    now: f64,
    path: String,
    depth: usize,
) -> anyhow::Result<()> {
    let jobs = select(args, list_all(inst, request.clone()).await?, ids);
    let inside = instances(inst, fmt, &jobs).await;
    let used = usages(&jobs);
    let more = details(inst, fmt, &jobs).await;
    show(args, fmt, &jobs, now, &inside, &used, &more)?;
    if depth == 0 {
        return Ok(());
    }
    for j in jobs.iter().filter(|j| j.state == "RUN") {
        let id = JobId::from(j.id);
        let Ok(Some((mut child, _))) = crate::cmd::instance::nested::connect_inside(inst, id).await
        else {
            continue;
        };
        let sub = format!("{path}{}", client::f58(id));
        println!("\n{}:", crate::output::printable(&sub));
        Box::pin(list_level(
            args,
            fmt,
            &mut child,
            request,
            &[],
            now,
            format!("{sub}/"),
            depth - 1,
        ))
        .await?;
    }
    Ok(())
}

/// What the instances running inside `jobs` report, by job id, when `fmt`
/// shows `instance.*` fields; a job that runs none, or one that cannot be
/// reached, has no entry and shows those fields empty, as in flux.
async fn instances(
    inst: &mut client::Instance,
    fmt: &str,
    jobs: &[pb::JobSummary],
) -> HashMap<u64, InstanceInfo> {
    let mut out = HashMap::new();
    let wanted = Template::parse(fmt, record::heading)
        .is_ok_and(|t| t.field_names().any(|f| f.starts_with("instance.")));
    if !wanted {
        return out;
    }
    for j in jobs.iter().filter(|j| j.state == "RUN") {
        let Ok(Some((mut child, _))) =
            crate::cmd::instance::nested::connect_inside(inst, JobId::from(j.id)).await
        else {
            continue;
        };
        if let Ok(info) = probe::instance_info(&mut child).await {
            out.insert(j.id, info);
        }
    }
    out
}

/// What the ended jobs of `jobs` used, by job id, as the listing carries it.
fn usages(jobs: &[pb::JobSummary]) -> HashMap<u64, Total> {
    jobs.iter()
        .filter_map(|j| {
            let u = j.usage.as_ref()?;
            Some((
                j.id,
                Total {
                    user: u.user,
                    system: u.system,
                    max_rss: u.max_rss,
                },
            ))
        })
        .collect()
}

/// The fields of `jobs` the summary lacks ([`JobDetails`]), by job id,
/// when `fmt` names one of them: read from each job's jobspec, eventlog
/// and R (one request a job, made only for those fields).
async fn details(
    inst: &mut client::Instance,
    fmt: &str,
    jobs: &[pb::JobSummary],
) -> HashMap<u64, JobDetails> {
    let mut out = HashMap::new();
    let wanted = Template::parse(fmt, record::heading)
        .is_ok_and(|t| t.field_names().any(|f| details::FIELDS.contains(&f)));
    if !wanted {
        return out;
    }
    for j in jobs {
        // R is asked for only once the job has one: it is an error before.
        let mut keys = vec!["jobspec".to_string(), "eventlog".to_string()];
        if !j.nodelist.is_empty() {
            keys.push("R".into());
        }
        let request = pb::InfoRequest {
            id: j.id,
            keys,
            offset: 0,
            max_bytes: 0,
        };
        let Ok(resp) = inst.jobs.info(request).await else {
            continue;
        };
        let values = resp.into_inner().values;
        let text = |k: &str| values.get(k).map(String::as_str).unwrap_or_default();
        let d = JobDetails::from_documents(text("jobspec"), text("eventlog"), text("R"));
        out.insert(j.id, d);
    }
    out
}

/// One instance's listing filtered and in flux's order ([`flux_order`]).
fn select(args: &Args, mut jobs: Vec<pb::JobSummary>, ids: &[u64]) -> Vec<pb::JobSummary> {
    if !ids.is_empty() {
        jobs.retain(|j| ids.contains(&j.id));
    }
    if let Some(q) = &args.queue {
        jobs.retain(|j| &j.queue == q);
    }
    flux_order(&mut jobs);
    jobs
}

/// Sort jobs as flux's job-list gives them: pending by priority (then
/// submit order), running latest started first, inactive latest ended first.
pub fn flux_order(jobs: &mut [pb::JobSummary]) {
    let rank = |j: &pb::JobSummary| match state_of(j) {
        Some(s) if s.is_pending() => 0,
        Some(s) if s.is_running() => 1,
        _ => 2,
    };
    jobs.sort_by(|a, b| {
        rank(a).cmp(&rank(b)).then_with(|| match rank(a) {
            0 => b.priority.cmp(&a.priority).then(a.id.cmp(&b.id)),
            1 => b.t_run.total_cmp(&a.t_run),
            _ => b.t_inactive.total_cmp(&a.t_inactive),
        })
    });
}

/// Print one instance's listing, with what the instances inside its jobs report.
fn show(
    args: &Args,
    fmt: &str,
    jobs: &[pb::JobSummary],
    now: f64,
    inside: &HashMap<u64, InstanceInfo>,
    used: &HashMap<u64, Total>,
    more: &HashMap<u64, JobDetails>,
) -> anyhow::Result<()> {
    let users = jobs
        .iter()
        .map(|j| j.userid)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|u| (u, username(u)))
        .collect();
    if args.json {
        println!("{}", jobs_json(jobs));
    } else {
        args.fmt.print(
            fmt,
            jobs.to_vec(),
            &users,
            now,
            args.no_header,
            inside,
            used,
            more,
        )?;
    }
    Ok(())
}
