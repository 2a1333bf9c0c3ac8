//! `fluxgate pstree`: the caller's jobs, and the jobs of the instances
//! running inside them, as a tree (flux-pstree(1)). Jobs are labelled by
//! name (`-o`, `--parent-label`, `-p` change that); with `-a` every state
//! is shown and leaves get `:STATUS`; `-x`, `-d NAME` or `--detail-format`
//! print details columns before the tree; identical leaves are combined as
//! `n*[label]` unless `-X` (or details) is given.

pub mod tree;

use std::collections::HashMap;
use std::process::ExitCode;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::job::StateMask;
use jiff::tz::TimeZone;

use crate::client::{self, Instance};
use crate::cmd::instance::connect_inside;
use crate::jobfmt::{Ctx, JobRecord, Template, record};
use tree::Node;

/// How deep instances are followed: a bound on a tree that could nest
/// without end.
const MAX_LEVEL: usize = 8;

/// flux-pstree's `default` details format (`-x`, `-d default`).
const DETAILS: &str = "{id.f58:>12} {username:<8.8} {status_abbrev:>2.2} {ntasks:>6h} \
                       {nnodes:>6h} {runtime!F:>8h}";

/// Yes or no, as flux's `--skip-root` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum YesNo {
    Yes,
    No,
}

/// Arguments of `fluxgate pstree`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Include jobs in every state, inactive ones too.
    #[arg(short = 'a', long)]
    all: bool,
    /// Print extended details (id, user, status, tasks, nodes, runtime) before the tree.
    #[arg(short = 'x', long)]
    extended: bool,
    /// With -x, do not print the header row.
    #[arg(short = 'n', long = "no-header")]
    no_header: bool,
    /// Do not combine identical leaves as n*[label].
    #[arg(short = 'X', long = "no-combine")]
    no_combine: bool,
    /// Descend at most N levels of instances (0: only this instance's jobs).
    #[arg(short = 'L', long, value_name = "N", default_value_t = MAX_LEVEL)]
    level: usize,
    /// Limit output to N jobs at every level.
    #[arg(short = 'c', long, value_name = "N", default_value_t = 1000)]
    count: u32,
    /// List jobs with specific job states or results (comma separated);
    /// -a is pending,running,inactive.
    #[arg(
        short = 'f',
        long,
        value_name = "STATE|RESULT",
        value_delimiter = ',',
        conflicts_with = "all"
    )]
    filter: Vec<String>,
    /// Label format of the jobs, as `fluxgate jobs -o` (default: {name}).
    #[arg(short = 'o', long, value_name = "FORMAT")]
    label: Option<String>,
    /// Label format of jobs that run an instance (default: as -o).
    #[arg(long, value_name = "FORMAT")]
    parent_label: Option<String>,
    /// Prepend the job id to parent labels.
    #[arg(short = 'p', long)]
    parent_ids: bool,
    /// A named details format before the tree: default.
    #[arg(short = 'd', long = "details", value_name = "NAME")]
    details: Option<String>,
    /// A details format of your own before the tree (implies -x).
    #[arg(long, value_name = "FORMAT")]
    detail_format: Option<String>,
    /// Leave out (yes) or show (no) the enclosing instance as the root `.`;
    /// by default it is shown unless details are printed or jobs are named.
    #[arg(long, value_enum, value_name = "yes|no")]
    skip_root: Option<YesNo>,
    /// Only these jobs (and what runs inside them).
    #[arg(value_name = "JOBID")]
    jobids: Vec<String>,
}

/// What every level needs to label its jobs.
struct Labels {
    leaf: Template,
    parent: Template,
    details: Option<Template>,
    ctx: Ctx,
    now: f64,
    users: HashMap<u32, String>,
}

impl Labels {
    fn new(args: &Args) -> anyhow::Result<Labels> {
        let parse = |f: &str| Template::parse(f, record::heading).map_err(anyhow::Error::msg);
        // As flux-pstree: -o sets parents too unless --parent-label does;
        // -a adds the status to leaves only.
        let leaf = match (&args.label, args.all) {
            (Some(l), _) => l.clone(),
            (None, true) => "{name}:{status_abbrev}".to_string(),
            (None, false) => "{name}".to_string(),
        };
        let mut parent = match (&args.parent_label, &args.label) {
            (Some(p), _) => p.clone(),
            (None, Some(l)) => l.clone(),
            (None, None) => "{name}".to_string(),
        };
        if args.parent_ids {
            parent = format!("{{id.f58}} {parent}");
        }
        let details = match (&args.detail_format, &args.details) {
            (Some(f), _) => Some(f.as_str()),
            (None, Some(name)) => match name.as_str() {
                "default" => Some(DETAILS),
                other => anyhow::bail!("Unknown --details format '{other}'"),
            },
            (None, None) => args.extended.then_some(DETAILS),
        };
        let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        Ok(Labels {
            leaf: parse(&leaf)?,
            parent: parse(&parent)?,
            details: details.map(parse).transpose()?,
            ctx: Ctx::new(TimeZone::system()),
            now,
            users: HashMap::new(),
        })
    }

    fn record(&mut self, j: &pb::JobSummary) -> JobRecord {
        let user = self
            .users
            .entry(j.userid)
            .or_insert_with(|| match nix::unistd::User::from_uid(j.userid.into()) {
                Ok(Some(u)) => u.name,
                _ => j.userid.to_string(),
            })
            .clone();
        JobRecord::new(j.clone(), user, client::f58(JobId::from(j.id)), self.now)
    }
}

/// Which jobs each level lists.
struct Select {
    states: StateMask,
    results: Vec<String>,
    count: u32,
    /// Only these, at the top level.
    ids: Vec<u64>,
}

/// Run `fluxgate pstree`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (mut states, results) = crate::cmd::jobs::parse_filters(&args.filter)?;
    if args.all {
        states = StateMask::ALL;
    } else if states.is_empty() {
        states = StateMask::RUNNING;
    }
    let ids = args
        .jobids
        .iter()
        .map(|s| client::parse_jobid(s).map(JobId::as_u64))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let select = Select {
        states,
        results,
        count: args.count,
        ids,
    };
    let depth = args.level.min(MAX_LEVEL);
    let mut labels = Labels::new(&args)?;
    let skip_root = match args.skip_root {
        Some(yes_no) => yes_no == YesNo::Yes,
        None => labels.details.is_some() || !select.ids.is_empty(),
    };
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut roots = jobs(&mut inst, &select, depth, &mut labels).await?;
        if !args.no_combine && labels.details.is_none() {
            roots = tree::combine(roots);
        }
        let header = match (&labels.details, args.no_header) {
            (Some(t), false) => Some(t.header()),
            (Some(t), true) => Some(" ".repeat(t.header().chars().count())),
            (None, _) => None,
        };
        let root = (!skip_root).then_some(".");
        for line in tree::render(&roots, header.as_deref(), root) {
            println!("{}", crate::output::printable(&line));
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// The tree of the jobs of the instance behind `inst`, `depth` levels down.
async fn jobs(
    inst: &mut Instance,
    select: &Select,
    depth: usize,
    labels: &mut Labels,
) -> anyhow::Result<Vec<Node>> {
    let request = pb::ListRequest {
        states: select.states.bits(),
        userid: Some(client::my_uid()),
        max_entries: select.count,
        results: select.results.clone(),
        ..Default::default()
    };
    let mut list = if select.ids.is_empty() {
        crate::cmd::jobs::list_all(inst, request).await?
    } else {
        let request = pb::ListRequest {
            states: StateMask::ALL.bits(),
            ..Default::default()
        };
        let mut all = crate::cmd::jobs::list_all(inst, request).await?;
        all.retain(|j| select.ids.contains(&j.id));
        all
    };
    // Oldest first reads as the jobs were started.
    list.reverse();
    let mut out = Vec::with_capacity(list.len());
    for j in list {
        let children = if depth > 0 && j.state == "RUN" {
            let below = Select {
                states: select.states,
                results: select.results.clone(),
                count: select.count,
                ids: Vec::new(),
            };
            Box::pin(inside(inst, JobId::from(j.id), &below, depth - 1, labels)).await
        } else {
            Vec::new()
        };
        let rec = labels.record(&j);
        let t = if children.is_empty() {
            &labels.leaf
        } else {
            &labels.parent
        };
        let label = t.render(&rec, &labels.ctx).map_err(anyhow::Error::msg)?;
        let details = match &labels.details {
            Some(d) => Some(d.render(&rec, &labels.ctx).map_err(anyhow::Error::msg)?),
            None => None,
        };
        out.push(Node {
            label,
            details,
            children,
        });
    }
    Ok(out)
}

/// The jobs of the instance job `id` runs, if it runs one this user can
/// reach; an instance that cannot be read is shown without children.
async fn inside(
    inst: &mut Instance,
    id: JobId,
    select: &Select,
    depth: usize,
    labels: &mut Labels,
) -> Vec<Node> {
    let Ok(Some((mut child, _))) = connect_inside(inst, id).await else {
        return Vec::new();
    };
    jobs(&mut child, select, depth, labels)
        .await
        .unwrap_or_default()
}
