//! `fluxgate pstree`: the caller's jobs, and the jobs of the instances
//! running inside them, as a tree (flux-pstree(1)). Jobs are labelled by
//! name; with `-a` every state is shown and leaves get `:STATUS`; `-x`
//! prints flux's details columns before the tree; identical leaves are
//! combined as `n*[label]` unless `-X` (or `-x`) is given.

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

/// flux-pstree's `default` details format (`-x`).
const DETAILS: &str = "{id.f58:>12} {username:<8.8} {status_abbrev:>2.2} {ntasks:>6} \
                       {nnodes:>6} {runtime!F:>8}";

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
        let leaf = if args.all {
            "{name}:{status_abbrev}"
        } else {
            "{name}"
        };
        let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        Ok(Labels {
            leaf: parse(leaf)?,
            parent: parse("{name}")?,
            details: args.extended.then(|| parse(DETAILS)).transpose()?,
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

/// Run `fluxgate pstree`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let states = if args.all {
        StateMask::ALL
    } else {
        StateMask::RUNNING
    };
    let depth = args.level.min(MAX_LEVEL);
    let mut labels = Labels::new(&args)?;
    client::block_on(async {
        let mut inst = client::connect().await?;
        let mut roots = jobs(&mut inst, states, depth, &mut labels).await?;
        if !args.no_combine && !args.extended {
            roots = tree::combine(roots);
        }
        let header = match (&labels.details, args.no_header) {
            (Some(t), false) => Some(t.header()),
            (Some(_), true) => Some(String::new()),
            (None, _) => None,
        };
        for line in tree::render(&roots, header.as_deref()) {
            println!("{}", crate::output::printable(&line));
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// The tree of the jobs of the instance behind `inst`, `depth` levels down.
async fn jobs(
    inst: &mut Instance,
    states: StateMask,
    depth: usize,
    labels: &mut Labels,
) -> anyhow::Result<Vec<Node>> {
    let request = pb::ListRequest {
        states: states.bits(),
        userid: Some(client::my_uid()),
        ..Default::default()
    };
    let mut list = crate::cmd::jobs::list_all(inst, request).await?;
    // Oldest first reads as the jobs were started.
    list.reverse();
    let mut out = Vec::with_capacity(list.len());
    for j in list {
        let children = if depth > 0 && j.state == "RUN" {
            Box::pin(inside(inst, JobId::from(j.id), states, depth - 1, labels)).await
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
    states: StateMask,
    depth: usize,
    labels: &mut Labels,
) -> Vec<Node> {
    let Ok(Some((mut child, _))) = connect_inside(inst, id).await else {
        return Vec::new();
    };
    jobs(&mut child, states, depth, labels)
        .await
        .unwrap_or_default()
}
