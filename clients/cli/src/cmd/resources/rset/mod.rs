//! `fluxgate R`: read, generate and combine RFC 20 resource sets, as flux-R(1).
//!
//! R objects are read from stdin (one or more JSON objects, back to back)
//! and written the way `flux R` writes them, so output compares byte for
//! byte. Messages follow flux-R.c.

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use fluxgate_shared::ResourceSet;
use fluxgate_shared::hostlist::Hostlist;
use fluxgate_shared::idset::{EncodeFlags, IdSet};
use fluxgate_shared::rset::Constraint;
use serde_json::{Map, Value};

mod config;

/// Arguments of `fluxgate R`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// Encode RFC 20 R objects for testing.
    Encode(EncodeArgs),
    /// Append multiple R objects on stdin; error if they are not disjoint.
    Append,
    /// Set difference of multiple R objects on stdin ((R1 - R2) - R3 ...).
    Diff,
    /// Intersection of all R objects on stdin.
    Intersect,
    /// Union of all R objects on stdin with ranks renumbered from 0.
    Remap,
    /// Union of all R objects on stdin with ranks ordered as HOSTLIST.
    Rerank {
        /// Hosts in their new rank order.
        hostlist: Option<String>,
    },
    /// Union of all R objects on stdin, printed in full or summarised.
    Decode(DecodeArgs),
    /// Check that the rank of R2 has at least the resources it has in R1.
    Verify,
    /// Set properties on the R on stdin.
    #[command(name = "set-property")]
    SetProperty {
        /// PROPERTY or PROPERTY:RANKS.
        #[arg(value_name = "PROPERTY:RANKS")]
        specs: Vec<String>,
    },
    /// Build R from a resource configuration (`resource.config` or `resource.path`).
    #[command(name = "parse-config")]
    ParseConfig {
        /// A config directory of *.toml files, a TOML file or a JSON file.
        path: String,
    },
}

#[derive(Debug, clap::Args)]
struct EncodeArgs {
    /// Generate an R with ranks in IDSET (default: one per host, or "0").
    #[arg(short = 'r', long, value_name = "IDSET")]
    ranks: Option<String>,
    /// Assign cores with IDS to each rank (default "0").
    #[arg(short = 'c', long, value_name = "IDS")]
    cores: Option<String>,
    /// Assign gpus with IDS to each rank (default none).
    #[arg(short = 'g', long, value_name = "IDS")]
    gpus: Option<String>,
    /// Generate R with nodelist set to HOSTS (default: the local hostname).
    #[arg(short = 'H', long, value_name = "HOSTS")]
    hosts: Option<String>,
    /// Assign property NAME to RANKS (default all ranks); repeatable.
    #[arg(short = 'p', long, value_name = "NAME[:RANKS]")]
    property: Vec<String>,
    /// Generate child resources from the local system.
    #[arg(short = 'l', long)]
    local: bool,
    /// Generate child resources from hwloc XML.
    #[arg(short = 'f', long, value_name = "FILE")]
    xml: Option<String>,
}

#[derive(Debug, clap::Args)]
struct DecodeArgs {
    /// Print short-form representation of R.
    #[arg(short = 's', long)]
    short: bool,
    /// Print nodelist in hostlist form from R.
    #[arg(short = 'n', long)]
    nodelist: bool,
    /// Print ranks in idset form from R.
    #[arg(short = 'r', long)]
    ranks: bool,
    /// Print count of resource TYPE in R (node, core, gpu).
    #[arg(short = 'c', long, value_name = "TYPE")]
    count: Option<String>,
    /// Include only specified ranks.
    #[arg(short = 'i', long, value_name = "RANKS")]
    include: Option<String>,
    /// Exclude specified ranks.
    #[arg(short = 'x', long, value_name = "RANKS")]
    exclude: Option<String>,
    /// Filter on properties (comma separated, ^NAME = without NAME).
    #[arg(short = 'p', long, value_name = "LIST")]
    properties: Option<String>,
}

/// Run `fluxgate R`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match args.cmd {
        Cmd::Encode(a) => put(&mut out, &encode(a)?)?,
        Cmd::Append => put(&mut out, &append_all(read_all()?)?)?,
        Cmd::Diff => put(&mut out, &fold("diff", 2, ResourceSet::diff)?)?,
        Cmd::Intersect => put(&mut out, &fold("intersect", 2, ResourceSet::intersect)?)?,
        Cmd::Remap => {
            let mut rs = fold("union", 1, ResourceSet::union)?;
            rs.remap();
            put(&mut out, &rs)?;
        }
        Cmd::Rerank { hostlist } => put(&mut out, &rerank(hostlist)?)?,
        Cmd::Decode(a) => decode(a, &mut out)?,
        Cmd::Verify => return verify(),
        Cmd::SetProperty { specs } => {
            let mut rs = fold("union", 1, ResourceSet::union)?;
            assign_properties(&mut rs, &specs)?;
            put(&mut out, &rs)?;
        }
        Cmd::ParseConfig { path } => put(&mut out, &config::parse_config(&path)?)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn put(out: &mut impl Write, rs: &ResourceSet) -> anyhow::Result<()> {
    writeln!(out, "{}", rs.encode_flux())?;
    Ok(())
}

/// Every R object on stdin; reading stops at the first thing that is not JSON.
fn read_all() -> anyhow::Result<Vec<ResourceSet>> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("reading stdin")?;
    parse_stream(&text)
}

fn parse_stream(text: &str) -> anyhow::Result<Vec<ResourceSet>> {
    // Most input is one R object: read it without building a JSON tree
    // (from_json_str; a 16k-node R reads several times faster). Anything
    // else, several objects or a bad one, is read below, which decides what
    // is read and what is reported.
    if let Ok(rs) = ResourceSet::from_json_str(text) {
        return Ok(vec![rs]);
    }
    let mut sets = Vec::new();
    let mut last_err = String::from("no JSON object on stdin");
    for v in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        match v {
            Ok(v) => sets.push(
                ResourceSet::from_json(&v)
                    .map_err(|e| anyhow!("Failed to decode R on stdin: {e}"))?,
            ),
            Err(e) => {
                last_err = e.to_string();
                break;
            }
        }
    }
    if sets.is_empty() {
        bail!("Failed to read an R object: {last_err}");
    }
    Ok(sets)
}

fn fold(
    cmd: &str,
    min: usize,
    f: impl Fn(&ResourceSet, &ResourceSet) -> ResourceSet,
) -> anyhow::Result<ResourceSet> {
    let sets = read_all()?;
    if sets.len() < min {
        bail!("{cmd} requires at least {min} resource sets");
    }
    let mut it = sets.into_iter();
    let first = it.next().ok_or_else(|| anyhow!("no R on stdin"))?;
    Ok(it.fold(first, |acc, rs| f(&acc, &rs)))
}

fn append_all(sets: Vec<ResourceSet>) -> anyhow::Result<ResourceSet> {
    let mut result = ResourceSet::new();
    for rs in sets {
        if result.intersect(&rs).nnodes() > 0 {
            bail!(
                "R objects '{}' and '{}' overlap",
                result.dumps(),
                rs.dumps()
            );
        }
        result.append(&rs).context("rlist_append")?;
    }
    Ok(result)
}

fn rerank(hostlist: Option<String>) -> anyhow::Result<ResourceSet> {
    let mut rs = fold("union", 1, ResourceSet::union)?;
    let Some(hosts) = hostlist else {
        bail!("Must provide a hostlist for re-ranking");
    };
    let n = rs.nnodes();
    let hl = Hostlist::parse(&hosts).map_err(|e| anyhow!("rlist_rerank: {e}"))?;
    if hl.len() > n {
        bail!("Too many hosts specified (expected {n})");
    }
    if hl.len() < n {
        bail!("Too few hosts specified (expected {n})");
    }
    rs.rerank(&hosts)
        .map_err(|_| anyhow!("failed to find one or more provided hosts in R"))?;
    Ok(rs)
}

fn range(ids: &IdSet) -> String {
    ids.encode(EncodeFlags {
        range: true,
        brackets: false,
    })
}

/// Apply `NAME[:RANKS]` specs as flux-R does: collected into one JSON object
/// (a repeated name keeps the last), then validated and applied together.
fn assign_properties(rs: &mut ResourceSet, specs: &[String]) -> anyhow::Result<()> {
    if specs.is_empty() {
        return Ok(());
    }
    let all = range(&rs.ranks());
    let mut obj = Map::new();
    for spec in specs {
        let (name, ranks) = spec.split_once(':').unwrap_or((spec, &all));
        obj.insert(name.to_owned(), Value::String(ranks.to_owned()));
    }
    rs.assign_properties(&Value::Object(obj))
        .map_err(|e| anyhow!("failed to assign properties: {e}"))
}

fn local_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

fn encode(a: EncodeArgs) -> anyhow::Result<ResourceSet> {
    let gpus = a.gpus.clone().unwrap_or_default();
    let mut cores = a.cores.clone().unwrap_or_default();
    if gpus.is_empty() && cores.is_empty() {
        cores = "0".into();
    } else if a.local || a.xml.is_some() {
        bail!("do not specify --cores or --gpus with --local or --xml");
    }
    if a.local || a.xml.is_some() {
        bail!(
            "--local and --xml read the hardware topology (hwloc), which fluxgate R does not do; \
             describe the node with --cores/--gpus, or let a running instance discover it"
        );
    }
    let host_list = |expected: usize| -> anyhow::Result<Vec<String>> {
        match &a.hosts {
            None => Ok(vec![local_hostname(); expected]),
            Some(s) => {
                let hl = Hostlist::parse(s).map_err(|_| anyhow!("invalid hostlist '{s}'"))?;
                if expected != 0 && hl.len() != expected {
                    bail!("hostname count in '{s}' does not match nranks ({expected})");
                }
                Ok(hl.iter().collect())
            }
        }
    };
    let (ranks, hosts) = match &a.ranks {
        None => {
            let hosts = host_list(if a.hosts.is_some() { 0 } else { 1 })?;
            let ranks = if hosts.is_empty() {
                IdSet::new()
            } else {
                IdSet::from_range(0, hosts.len() as u32 - 1)
            };
            (ranks, hosts)
        }
        Some(s) => {
            let ranks =
                IdSet::parse(s).map_err(|_| anyhow!("Failed to decode ranks='{s}' as idset"))?;
            let hosts = host_list(ranks.count() as usize)?;
            (ranks, hosts)
        }
    };
    let core_ids =
        IdSet::parse(&cores).map_err(|_| anyhow!("Failed to decode cores='{cores}' as idset"))?;
    let gpu_ids =
        IdSet::parse(&gpus).map_err(|_| anyhow!("Failed to decode gpus='{gpus}' as idset"))?;
    let nodes = ranks.iter().zip(hosts.iter()).map(|(rank, host)| {
        fluxgate_shared::rset::Node::new(rank, Some(host), core_ids.clone(), gpu_ids.clone())
    });
    // One sorted build: a node at a time costs a vector insert per rank.
    let mut rs = ResourceSet::from_nodes(nodes).map_err(|e| {
        let rank = match &e {
            fluxgate_shared::rset::RsetError::Overlap { rank, .. } => rank.to_string(),
            _ => "?".into(),
        };
        anyhow::Error::new(e).context(format!("rlist_append rank={rank}"))
    })?;
    assign_properties(&mut rs, &a.property)?;
    Ok(rs)
}

fn decode(a: DecodeArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let mut rs = fold("union", 1, ResourceSet::union)
        .map_err(|e| anyhow!("failed to read R on stdin: {e}"))?;
    if let Some(list) = &a.properties {
        let props: Vec<Value> = list
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| Value::String(s.to_owned()))
            .collect();
        let mut obj = Map::new();
        obj.insert("properties".into(), Value::Array(props));
        let c = Constraint::from_json(&Value::Object(obj))
            .map_err(|e| anyhow!("Invalid property constraint: {e}"))?;
        rs = rs.copy_constraint(&c);
    }
    if let Some(arg) = &a.include {
        let ids = IdSet::parse(arg).map_err(|_| anyhow!("Invalid ranks option: '{arg}'"))?;
        rs = rs.copy_ranks(&ids);
    }
    if let Some(arg) = &a.exclude {
        let ids =
            IdSet::parse(arg).map_err(|_| anyhow!("Invalid idset in --exclude option: {arg}"))?;
        rs.remove_ranks(&ids);
    }
    let mut lines = 0;
    if a.short {
        writeln!(out, "{}", rs.dumps())?;
        lines += 1;
    }
    if a.nodelist {
        let hl = rs
            .nodelist()
            .ok_or_else(|| anyhow!("rlist_nodelist: R has no nodelist"))?;
        writeln!(out, "{}", hl.encode())?;
        lines += 1;
    }
    if a.ranks {
        writeln!(out, "{}", range(&rs.ranks()))?;
        lines += 1;
    }
    if let Some(kind) = &a.count {
        writeln!(out, "{}", rs.count(kind))?;
        lines += 1;
    }
    if lines == 0 {
        put(out, &rs)?;
    }
    Ok(())
}

fn verify() -> anyhow::Result<ExitCode> {
    let sets = read_all()?;
    let [expected, actual] = sets.as_slice() else {
        bail!("verify requires exactly 2 R objects on stdin");
    };
    match expected.verify(actual) {
        Ok(None) => Ok(ExitCode::SUCCESS),
        Ok(Some(extra)) => {
            eprintln!("fluxgate-R: {extra}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("fluxgate-R: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_reads_back_to_back_objects() {
        let text = r#"{"version":1,"execution":{"R_lite":[]}}{"version":1,"execution":{"R_lite":[]}}
        "#;
        assert_eq!(parse_stream(text).unwrap().len(), 2);
        assert!(parse_stream("").is_err());
    }
}
