//! `fluxgate resource list|status|R|drain|undrain|property|reload|eventlog`, with the
//! tables `flux resource` prints (see its default formats):
//! list `{state:>10} {nnodes:>6} {ncores:>6} {ngpus:>5} {nodelist}`,
//! status `{state:>12}{up:>2} {nnodes:>6} {nodelist}` (✔ up, ✗ down), drain
//! `{timestamp:%b%d %R:<12} {state:<8.8} {reason:<30.30} {nodelist}`.
//! The family's other commands: `resource info` ([`info`]) and `fluxgate R`
//! ([`r`]), which reads and writes the resource sets these commands show.

pub mod info;

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::{Hostlist, IdSet, ResourceSet};
use serde_json::Value;

use crate::client::{self, Instance};
use crate::cmd::jobs::job::eventlog::{Formatter, civil};
use crate::output::{self, Mode, Render, pad, printable};

/// Arguments of `fluxgate resource`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// List free, allocated and down resources.
    List {
        /// Only these states (free, allocated, down, all).
        #[arg(short, long, value_delimiter = ',')]
        states: Vec<String>,
        /// Do not print the header.
        #[arg(short, long = "no-header")]
        no_header: bool,
        /// Print the resource sets as JSON.
        #[arg(long)]
        json: bool,
        /// Only the resources of these queues (comma separated).
        #[arg(short, long, value_delimiter = ',')]
        queue: Vec<String>,
    },
    /// One line: nodes, cores and GPUs in the given states (as flux resource
    /// info); then how the selected nodes contain jobs, where they said.
    Info {
        /// Only these states (up, down, allocated, free, all).
        #[arg(short, long, value_delimiter = ',')]
        states: Vec<String>,
    },
    /// Show node states (avail, drained, offline, ...).
    Status {
        /// Only these states.
        #[arg(short, long, value_delimiter = ',')]
        states: Vec<String>,
        /// Do not print the header.
        #[arg(short, long = "no-header")]
        no_header: bool,
        /// Print the status object as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the instance's R.
    #[command(name = "R")]
    R,
    /// Drain targets (ranks or hostnames); with none, list drained nodes.
    Drain {
        /// Overwrite the reason of targets already drained.
        #[arg(short, long)]
        force: bool,
        /// Drain only targets not already drained.
        #[arg(short, long)]
        update: bool,
        /// Do not print the header.
        #[arg(short, long = "no-header")]
        no_header: bool,
        /// Idset of ranks or hostlist.
        targets: Option<String>,
        /// Reason.
        reason: Vec<String>,
    },
    /// Return drained targets to service.
    Undrain {
        /// Skip targets that are not drained.
        #[arg(short, long)]
        force: bool,
        /// Idset of ranks or hostlist.
        targets: String,
        /// Reason.
        reason: Vec<String>,
    },
    /// Add or remove a property on targets (the scheduler hears it at once).
    Property {
        #[command(subcommand)]
        action: PropertyAction,
    },
    /// Re-define the resources from an R file (resource-define method reload).
    Reload {
        /// R file (JSON).
        path: std::path::PathBuf,
    },
    /// Print the resource eventlog.
    Eventlog {
        /// Output format: text, json.
        #[arg(short = 'f', long = "format", default_value = "text")]
        format: String,
        /// Time format: raw, iso, offset, human.
        #[arg(short = 'T', long = "time-format", default_value = "raw")]
        time_format: String,
        /// Human-readable output.
        #[arg(short = 'H', long)]
        human: bool,
        /// Keep printing new events.
        #[arg(short = 'F', long)]
        follow: bool,
    },
}

/// `fluxgate resource property add|remove PROPERTY TARGETS`.
#[derive(Debug, clap::Subcommand)]
enum PropertyAction {
    /// Add PROPERTY to TARGETS.
    Add {
        /// Property name.
        property: String,
        /// Idset of ranks or hostlist.
        targets: String,
    },
    /// Remove PROPERTY from TARGETS.
    Remove {
        /// Property name.
        property: String,
        /// Idset of ranks or hostlist.
        targets: String,
    },
}

async fn inventory(inst: &mut Instance) -> anyhow::Result<pb::ResourceListResponse> {
    Ok(inst
        .resource
        .list(pb::ResourceListRequest {})
        .await
        .map_err(client::status_error)?
        .into_inner())
}

fn rset(s: &str) -> anyhow::Result<ResourceSet> {
    if s.trim().is_empty() {
        return Ok(ResourceSet::new());
    }
    ResourceSet::parse(s).context("the instance sent an unreadable R")
}

/// Hostnames of `ranks` in `all`.
fn hosts(all: &ResourceSet, ranks: &IdSet) -> String {
    let mut hl = Hostlist::new();
    for r in ranks.iter() {
        if let Some(h) = all.node(r).and_then(|n| n.hostname()) {
            let _ = hl.push(h);
        }
    }
    hl.encode()
}

fn nodelist(r: &ResourceSet) -> String {
    r.nodelist().map(|h| h.encode()).unwrap_or_default()
}

#[derive(Debug)]
struct ListView {
    rows: Vec<(String, ResourceSet)>,
    header: bool,
}

impl Render for ListView {
    fn table(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.header {
            writeln!(out, "     STATE NNODES NCORES NGPUS NODELIST")?;
        }
        for (state, r) in &self.rows {
            writeln!(
                out,
                "{} {} {} {} {}",
                pad(state, 10, None, true),
                pad(&r.nnodes().to_string(), 6, None, true),
                pad(&r.ncores().to_string(), 6, None, true),
                pad(&r.ngpus().to_string(), 5, None, true),
                printable(&nodelist(r))
            )?;
        }
        Ok(())
    }

    fn json(&self) -> Value {
        let m: serde_json::Map<String, Value> = self
            .rows
            .iter()
            .map(|(s, r)| (s.clone(), r.to_json()))
            .collect();
        Value::Object(m)
    }
}

#[derive(Debug)]
struct StatusView {
    rows: Vec<(String, bool, IdSet, String)>,
    raw: Value,
    header: bool,
}

impl Render for StatusView {
    fn table(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.header {
            writeln!(out, "       STATEUP NNODES NODELIST")?;
        }
        for (state, up, ranks, hosts) in &self.rows {
            writeln!(
                out,
                "{}{} {} {}",
                pad(state, 12, None, true),
                pad(if *up { "✔" } else { "✗" }, 2, None, true),
                pad(&ranks.count().to_string(), 6, None, true),
                printable(hosts)
            )?;
        }
        Ok(())
    }

    fn json(&self) -> Value {
        self.raw.clone()
    }
}

async fn status(inst: &mut Instance) -> anyhow::Result<Value> {
    let s = inst
        .resource
        .status(pb::StatusRequest {})
        .await
        .map_err(client::status_error)?
        .into_inner();
    serde_json::from_str(&s.status).context("the instance sent an unreadable status")
}

fn idset_of(v: &Value, key: &str) -> IdSet {
    v.get(key)
        .and_then(Value::as_str)
        .and_then(|s| IdSet::parse(s).ok())
        .unwrap_or_default()
}

/// Run `fluxgate resource`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    client::block_on(async {
        let mut inst = client::connect().await?;
        let inst = &mut inst;
        match args.command {
            Command::List {
                states,
                no_header,
                json,
                queue,
            } => list(inst, &states, no_header, json, &queue).await?,
            Command::Status {
                states,
                no_header,
                json,
            } => status_table(inst, &states, no_header, json).await?,
            Command::Info { states } => info(inst, &states).await?,
            Command::R => println!("{}", inventory(inst).await?.all),
            Command::Drain {
                force,
                update,
                no_header,
                targets,
                reason,
            } => match targets {
                None => drains(inst, no_header).await?,
                Some(t) => drain(inst, t, force, update, &reason).await?,
            },
            Command::Undrain {
                force,
                targets,
                reason,
            } => {
                inst.resource
                    .undrain(pb::UndrainRequest {
                        targets,
                        force,
                        reason: reason.join(" "),
                    })
                    .await
                    .map_err(client::status_error)?;
            }
            Command::Property { action } => property(inst, action).await?,
            Command::Reload { path } => reload(inst, &path).await?,
            Command::Eventlog {
                format,
                time_format,
                human,
                follow,
            } => eventlog(inst, &format, &time_format, human, follow).await?,
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// `info`: the one-line summary of resources in `states`.
async fn info(inst: &mut Instance, states: &[String]) -> anyhow::Result<()> {
    let inv = inventory(inst).await?;
    let by = info::ByState {
        all: rset(&inv.all)?,
        up: rset(&inv.up)?,
        down: rset(&inv.down)?,
        allocated: rset(&inv.allocated)?,
    };
    let r = info::select(&by, states)?;
    println!("{}", info::summary(&r));
    // How the selected nodes contain jobs, once their exec services said.
    if let Some(line) = info::containment(&r, &inv.containment) {
        println!("{line}");
    }
    Ok(())
}

/// `list`: free, allocated and down resources, as R sets.
async fn list(
    inst: &mut Instance,
    states: &[String],
    no_header: bool,
    json: bool,
    queues: &[String],
) -> anyhow::Result<()> {
    let inv = inventory(inst).await?;
    let (up, down, alloc) = (rset(&inv.up)?, rset(&inv.down)?, rset(&inv.allocated)?);
    let free = up.diff(&alloc);
    let mut all_rows = [("free", free), ("allocated", alloc), ("down", down)];
    if !queues.is_empty() {
        let ranks = crate::cmd::resources::queue::ranks_of(inst, &rset(&inv.all)?, queues).await?;
        for (_, r) in all_rows.iter_mut() {
            *r = r.include(&ranks);
        }
    }
    let want = |s: &str| states.is_empty() || states.iter().any(|x| x == s || x == "all");
    let rows = all_rows
        .into_iter()
        .filter(|(s, _)| want(s))
        .map(|(s, r)| (s.to_string(), r))
        .collect();
    output::emit(
        Mode::from_flags(json, false),
        &ListView {
            rows,
            header: !no_header,
        },
    )?;
    Ok(())
}

/// `status`: ranks and hosts by resource state, split into up and down.
async fn status_table(
    inst: &mut Instance,
    states: &[String],
    no_header: bool,
    json: bool,
) -> anyhow::Result<()> {
    let st = status(inst).await?;
    let inv = inventory(inst).await.ok();
    let all = match &inv {
        Some(i) => rset(&i.all)?,
        None => ResourceSet::new(),
    };
    let online = idset_of(&st, "online");
    let mut rows = Vec::new();
    for s in [
        "avail",
        "exclude",
        "draining",
        "drained",
        "torpid",
        "allocated",
        "offline",
    ] {
        if !states.is_empty() && !states.iter().any(|x| x == s) {
            continue;
        }
        let ranks = idset_of(&st, s);
        // allocated is shown only when asked for, as flux does.
        if s == "allocated" && states.is_empty() {
            continue;
        }
        let up = ranks.intersection(&online);
        let down = ranks.difference(&online);
        for (is_up, set) in [(true, up), (false, down)] {
            if !set.is_empty() || (!states.is_empty() && is_up && ranks.is_empty()) {
                let h = hosts(&all, &set);
                rows.push((s.to_string(), is_up, set, h));
            }
        }
    }
    output::emit(
        Mode::from_flags(json, false),
        &StatusView {
            rows,
            raw: st,
            header: !no_header,
        },
    )?;
    Ok(())
}

/// `drain` without targets: the drained and draining ranks with their reasons.
async fn drains(inst: &mut Instance, no_header: bool) -> anyhow::Result<()> {
    let st = status(inst).await?;
    let draining = idset_of(&st, "draining");
    if !no_header {
        println!("TIME         STATE    REASON                         NODELIST");
    }
    for d in st
        .get("drain_info")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        println!("{}", drain_row(d, &draining));
    }
    Ok(())
}

/// One line of the drain listing: when, draining or drained, why, where.
fn drain_row(d: &Value, draining: &IdSet) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let ranks = d
        .get("ranks")
        .and_then(Value::as_str)
        .and_then(|s| IdSet::parse(s).ok())
        .unwrap_or_default();
    let ts = d.get("timestamp").and_then(Value::as_f64).unwrap_or(0.0);
    let c = civil(ts.floor() as i64);
    let time = format!(
        "{}{:02} {:02}:{:02}",
        MONTHS[(c.month - 1) as usize],
        c.day,
        c.hour,
        c.min
    );
    let state = if ranks.is_subset(draining) && !ranks.is_empty() {
        "draining"
    } else {
        "drained"
    };
    let reason = d.get("reason").and_then(Value::as_str).unwrap_or("");
    let hosts = d.get("nodelist").and_then(Value::as_str).unwrap_or("");
    // Reasons are typed by admins and hostnames sent by nodes: neither may
    // drive the terminal.
    format!(
        "{} {} {} {}",
        pad(&time, 12, None, false),
        pad(state, 8, Some(8), false),
        pad(&printable(reason), 30, Some(30), false),
        printable(hosts)
    )
}

/// `drain TARGETS`: drain them, overwriting or updating earlier reasons.
async fn drain(
    inst: &mut Instance,
    t: String,
    force: bool,
    update: bool,
    reason: &[String],
) -> anyhow::Result<()> {
    if force && update {
        bail!("--force and --update are mutually exclusive");
    }
    let mode = if force {
        pb::DrainMode::Overwrite
    } else if update {
        pb::DrainMode::Update
    } else {
        pb::DrainMode::Unspecified
    };
    inst.resource
        .drain(pb::DrainRequest {
            targets: t,
            reason: reason.join(" "),
            mode: mode as i32,
        })
        .await
        .map_err(client::status_error)?;
    Ok(())
}

/// `property add|remove`.
async fn property(inst: &mut Instance, action: PropertyAction) -> anyhow::Result<()> {
    let (property, targets, remove) = match action {
        PropertyAction::Add { property, targets } => (property, targets, false),
        PropertyAction::Remove { property, targets } => (property, targets, true),
    };
    inst.resource
        .property(pb::PropertyRequest {
            property,
            targets,
            remove,
        })
        .await
        .map_err(client::status_error)?;
    Ok(())
}

/// `reload PATH`: a new R, checked here before it is sent.
async fn reload(inst: &mut Instance, path: &std::path::Path) -> anyhow::Result<()> {
    let r =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    ResourceSet::parse(&r).with_context(|| format!("{}", path.display()))?;
    inst.resource
        .reload(pb::ReloadRequest { r })
        .await
        .map_err(client::status_error)?;
    Ok(())
}

/// `eventlog`: the resource eventlog, formatted, optionally followed.
async fn eventlog(
    inst: &mut Instance,
    format: &str,
    time_format: &str,
    human: bool,
    follow: bool,
) -> anyhow::Result<()> {
    let mut fmt = Formatter::from_parts(format, time_format, human)?;
    let mut s = inst
        .resource
        .eventlog(pb::ResourceEventlogRequest { follow })
        .await
        .map_err(client::status_error)?
        .into_inner();
    while let Some(e) = s.message().await.map_err(client::status_error)? {
        if let Ok(ev) = client::parse_event(&e.line) {
            println!("{}", fmt.format(e.line.trim_end_matches('\n'), &ev));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn list_rows_match_flux() {
        let v = ListView {
            rows: vec![("free".into(), ResourceSet::new())],
            header: true,
        };
        let mut out = Vec::new();
        v.table(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "     STATE NNODES NCORES NGPUS NODELIST\n      free      0      0     0 \n"
        );
    }

    #[test]
    fn status_rows_match_flux() {
        let v = StatusView {
            rows: vec![(
                "avail".into(),
                true,
                IdSet::from_range(0, 1),
                "vm,vm".into(),
            )],
            raw: json!({}),
            header: true,
        };
        let mut out = Vec::new();
        v.table(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "       STATEUP NNODES NODELIST\n       avail ✔      2 vm,vm\n"
        );
    }
}
