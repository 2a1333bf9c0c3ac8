//! `fluxgate pstree`: the caller's jobs, and the jobs of the instances
//! running inside them, as a tree (flux-pstree(1)). Jobs are labelled by
//! name (`-o`, `--parent-label`, `-p` change that); with `-a` every state
//! is shown and leaves get `:STATUS`; `-x`, `-d NAME` or `--detail-format`
//! print details columns before the tree, where the `instance.*` fields of
//! jobs that run an instance are read from that instance; identical leaves
//! are combined as `n*[label]` unless `-X`. Lines are cut to the terminal's
//! width unless `-l`; `--ascii` and `--compact` change the connectors.

pub mod connectors;
pub mod formats;
pub mod root;
pub mod tree;
pub mod width;

use std::collections::HashMap;
use std::io::Write as _;
use std::process::ExitCode;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::StateMask;
use fluxgate_shared::{JobId, JobState};
use jiff::tz::TimeZone;

use crate::client::{self, Instance};
use crate::cmd::instance::nested::connect_inside;
use connectors::Style;
use fluxgate_jobfmt::instance::InstanceInfo;
use fluxgate_jobfmt::pyfmt::Value;
use fluxgate_jobfmt::{Ctx, JobRecord, Record, Template, record};
use root::RootRecord;
use tree::{Drawing, Node};

/// How deep instances are followed: a bound on a tree that could nest
/// without end.
const MAX_LEVEL: usize = 8;

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
    /// Do not truncate long lines to the terminal width ($COLUMNS, else the
    /// width of the terminal on stdout, else 132).
    #[arg(short = 'l', long)]
    long: bool,
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
    /// A named details format before the tree: default, resources, progress, stats.
    #[arg(
        short = 'd',
        long = "details",
        value_name = "NAME",
        long_help = details_help()
    )]
    details: Option<String>,
    /// A details format of your own before the tree (implies -x).
    #[arg(long, value_name = "FORMAT")]
    detail_format: Option<String>,
    /// Use compact tree connectors (two columns a level), for deep hierarchies.
    #[arg(short = 'C', long, conflicts_with = "ascii")]
    compact: bool,
    /// Use ASCII tree connectors.
    #[arg(long)]
    ascii: bool,
    /// Leave out (yes) or show (no) the enclosing instance as the root `.`;
    /// by default it is shown unless details are printed or jobs are named.
    #[arg(long, value_enum, value_name = "yes|no")]
    skip_root: Option<YesNo>,
    /// Only these jobs (and what runs inside them).
    #[arg(value_name = "JOBID")]
    jobids: Vec<String>,
}

/// `-d`'s long help, naming every format and what it shows.
fn details_help() -> String {
    format!(
        "Select a named details format printed before the tree ({}). \
         default: the -x columns; resources: nodes, cores and GPUs of each \
         instance, all and used; progress: jobs of each instance, the share \
         of them finished and the share of its cores and GPUs in use; stats: \
         each instance's jobs by state. The instance columns are empty for \
         jobs that run no instance.",
        formats::DETAIL_NAMES.join(",")
    )
}

/// What every level needs to label its jobs.
struct Labels {
    leaf: Template,
    parent: Template,
    details: Option<Template>,
    /// Some format shows `instance.*` fields: read them from each instance.
    instance_fields: bool,
    ctx: Ctx,
    now: f64,
    users: HashMap<u32, String>,
}

impl Labels {
    fn new(args: &Args) -> anyhow::Result<Labels> {
        let parse = |f: &str| Template::parse(f, record::heading).map_err(anyhow::Error::msg);
        // As flux-pstree: -o sets parents too unless --parent-label does;
        // -a adds the status to leaves only.
        let leaf = match &args.label {
            Some(l) => l.clone(),
            None => formats::leaf_label(args.all).to_string(),
        };
        let mut parent = match (&args.parent_label, &args.label) {
            (Some(p), _) => p.clone(),
            (None, Some(l)) => l.clone(),
            (None, None) => formats::PARENT_LABEL.to_string(),
        };
        if args.parent_ids {
            parent = format!("{{id.f58}} {parent}");
        }
        let details = match (&args.detail_format, &args.details) {
            (Some(f), _) => Some(f.as_str()),
            (None, Some(name)) => match formats::details(name) {
                Some(f) => Some(f),
                None => anyhow::bail!("Unknown --details format '{name}'"),
            },
            (None, None) => args.extended.then(|| formats::details("default")).flatten(),
        };
        let (leaf, parent) = (parse(&leaf)?, parse(&parent)?);
        let details = details.map(parse).transpose()?;
        let instance_fields = [Some(&leaf), Some(&parent), details.as_ref()]
            .into_iter()
            .flatten()
            .any(|t| t.field_names().any(|f| f.starts_with("instance.")));
        Ok(Labels {
            leaf,
            parent,
            details,
            instance_fields,
            ctx: Ctx::new(TimeZone::system()),
            now: client::now(),
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

    /// The node of `rec`, labelled as a parent when it runs an instance.
    fn node<R: Record>(&self, rec: &R, parent: bool, children: Vec<Node>) -> anyhow::Result<Node> {
        let t = if parent { &self.parent } else { &self.leaf };
        let shown = |t: &Template| {
            t.render(rec, &self.ctx)
                .map(|s| crate::output::printable(&s).into_owned())
                .map_err(anyhow::Error::msg)
        };
        Ok(Node {
            label: shown(t)?,
            details: self.details.as_ref().map(shown).transpose()?,
            children,
        })
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
    let (mut states, results) = crate::cmd::jobs::list::parse_filters(&args.filter)?;
    if args.all {
        states = StateMask::ALL;
    } else if states.is_empty() {
        states = StateMask::RUNNING;
    }
    let ids: Vec<u64> = client::parse_jobids(&args.jobids)?
        .into_iter()
        .map(JobId::as_u64)
        .collect();
    if !ids.is_empty() && (args.all || !args.filter.is_empty()) {
        // As flux-pstree, whose logger prints "NAME: LEVEL: message".
        eprintln!("fluxgate-pstree: WARNING: filtering options ignored with jobid list");
    }
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
    let style = if args.compact {
        Style::Compact
    } else if args.ascii {
        Style::Ascii
    } else {
        Style::Box
    };
    let drawing = Drawing {
        style,
        width: (!args.long).then(width::terminal_width),
    };
    client::block_on(async {
        let mut inst = client::connect().await?;
        // As flux-pstree: with the root skipped, its own level lists only
        // running jobs whatever the filter says; the filter applies below.
        let mut jobs = if skip_root && select.ids.is_empty() {
            let running = Select {
                states: JobState::Run.into(),
                results: Vec::new(),
                count: select.count,
                ids: Vec::new(),
            };
            jobs(&mut inst, &running, &select, depth, &mut labels).await?
        } else {
            jobs(&mut inst, &select, &select, depth, &mut labels).await?
        };
        if !args.no_combine {
            jobs = tree::combine(jobs);
        }
        let top = if skip_root {
            jobs
        } else {
            let (job, info) = root::read(&mut inst, labels.instance_fields).await;
            let rec = with_instance(labels.record(&job), info);
            vec![labels.node(&RootRecord(rec), true, jobs)?]
        };
        // A reader that stops early (`| head`) ends the output with an
        // error rather than a panic.
        let mut out = std::io::stdout().lock();
        // The header is not cut, as flux prints it apart from the tree.
        if let (Some(t), false) = (&labels.details, args.no_header) {
            writeln!(out, "{}", crate::output::printable(&t.header()))?;
        }
        for line in tree::render(&top, drawing) {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
        Ok(ExitCode::SUCCESS)
    })?
}

fn with_instance(rec: JobRecord, info: Option<InstanceInfo>) -> JobRecord {
    match info {
        Some(i) => rec.with_instance(i),
        None => rec,
    }
}

/// Whether the job runs an instance that may have jobs: running, with the
/// `uri` memo an instance's job leaves (flux: `job.uri and state == R`).
fn runs_instance(j: &pb::JobSummary, rec: &JobRecord) -> bool {
    j.state == "RUN" && matches!(rec.field("uri"), Value::Str(s) if !s.is_empty())
}

/// The tree of the jobs of the instance behind `inst`, `depth` levels down.
async fn jobs(
    inst: &mut Instance,
    select: &Select,
    below: &Select,
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
    // In the job list's order, as flux-pstree draws them: the latest
    // started running job first.
    crate::cmd::jobs::list::flux_order(&mut list);
    let below = Select {
        states: below.states,
        results: below.results.clone(),
        count: below.count,
        ids: Vec::new(),
    };
    let mut out = Vec::with_capacity(list.len());
    for j in list {
        let rec = labels.record(&j);
        // As flux: a job that runs an instance takes the parent label even
        // when nothing runs in it, or -L stops above it.
        let parent = runs_instance(&j, &rec);
        let (info, children) = if parent {
            Box::pin(inside(inst, JobId::from(j.id), &below, depth, labels)).await
        } else {
            (None, Vec::new())
        };
        out.push(labels.node(&with_instance(rec, info), parent, children)?);
    }
    Ok(out)
}

/// What the instance job `id` runs reports (when a format asks for it) and
/// its jobs `depth` levels down (none at 0); an instance that cannot be
/// reached or read shows empty fields and no children, as in flux.
async fn inside(
    inst: &mut Instance,
    id: JobId,
    select: &Select,
    depth: usize,
    labels: &mut Labels,
) -> (Option<InstanceInfo>, Vec<Node>) {
    if depth == 0 && !labels.instance_fields {
        return (None, Vec::new());
    }
    let Ok(Some((mut child, _))) = connect_inside(inst, id).await else {
        return (None, Vec::new());
    };
    let info = if labels.instance_fields {
        crate::cmd::instance::probe::instance_info(&mut child)
            .await
            .ok()
    } else {
        None
    };
    let children = if depth > 0 {
        jobs(&mut child, select, select, depth - 1, labels)
            .await
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    (info, children)
}
