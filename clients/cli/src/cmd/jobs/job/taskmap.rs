//! `fluxgate job taskmap`: the RFC 34 task map of a started job, as `flux
//! job taskmap`, with `--to=raw|pmi|multiline|hosts`.
//!
//! The job manager stores no task map, so it is computed here from the
//! jobspec and R the way the exec service places tasks (flux's `rcalc`
//! rule): each task goes to the node with the most free slots left, ties
//! to the lower node, and task ids are numbered in node order.

use std::process::ExitCode;

use anyhow::{Context, anyhow};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::rset::ResourceSet;
use fluxgate_shared::taskmap::{Taskmap, tasks_per_node};
use fluxgate_shared::{IdSet, Jobspec};

use crate::client;

/// Arguments of `fluxgate job taskmap`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the map as: raw, pmi, multiline or hosts (default: RFC 34 JSON).
    #[arg(long, value_name = "FORMAT")]
    to: Option<String>,
    /// Job id.
    id: String,
}

/// RFC 34 blocks `[nodeid, nnodes, ppn, repeat]` (see [`Taskmap`]).
pub fn blocks(counts: &[u64]) -> Vec<[u64; 4]> {
    Taskmap::from_counts(counts).blocks().to_vec()
}

/// The task ids of each node, in order.
fn task_ids(counts: &[u64]) -> Vec<std::ops::Range<u64>> {
    let mut next = 0;
    counts
        .iter()
        .map(|c| {
            let r = next..next + c;
            next += c;
            r
        })
        .collect()
}

fn idset_text(r: &std::ops::Range<u64>) -> String {
    let ids: IdSet = r.clone().filter_map(|i| u32::try_from(i).ok()).collect();
    ids.to_string()
}

/// The map in `format`; `hosts` names the nodes for `hosts`.
pub fn render(counts: &[u64], hosts: &[String], format: Option<&str>) -> anyhow::Result<String> {
    let map = Taskmap::from_counts(counts);
    Ok(match format {
        None => map.to_json(),
        Some("raw") => task_ids(counts)
            .iter()
            .map(idset_text)
            .collect::<Vec<_>>()
            .join(";"),
        Some("pmi") => map.to_pmi(),
        Some("multiline") => task_ids(counts)
            .iter()
            .enumerate()
            .flat_map(|(node, r)| r.clone().map(move |t| format!("{t}: {node}")))
            .collect::<Vec<_>>()
            .join("\n"),
        Some("hosts") => task_ids(counts)
            .iter()
            .enumerate()
            .map(|(node, r)| {
                let host = hosts.get(node).cloned().unwrap_or_else(|| node.to_string());
                format!("{host}: {}", idset_text(r))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => anyhow::bail!("--to={other}: expected raw, pmi, multiline or hosts"),
    })
}

/// Run `fluxgate job taskmap`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let id = client::parse_jobid(&args.id)?;
    let (jobspec, r) = client::block_on(async {
        let mut inst = client::connect().await?;
        let mut resp = inst
            .jobs
            .info(pb::InfoRequest {
                id: id.as_u64(),
                keys: vec!["jobspec".into(), "R".into()],
                offset: 0,
                max_bytes: 0,
            })
            .await
            .map_err(client::status_error)?
            .into_inner();
        let jobspec = resp.values.remove("jobspec").unwrap_or_default();
        let r = resp.values.remove("R").unwrap_or_default();
        anyhow::Ok((jobspec, r))
    })??;
    if r.trim().is_empty() {
        anyhow::bail!("job {} has not started", args.id);
    }
    let jobspec = Jobspec::parse(&jobspec).context("the instance sent an unreadable jobspec")?;
    let r = ResourceSet::parse(&r).context("the instance sent an unreadable R")?;
    let per_slot = jobspec.cores_per_slot().max(1);
    let slots: Vec<u64> = r
        .nodes()
        .iter()
        .map(|n| n.cores().count() / per_slot)
        .collect();
    let counts = tasks_per_node(&slots, jobspec.ntasks());
    let hosts: Vec<String> = r
        .nodes()
        .iter()
        .map(|n| {
            n.hostname()
                .map(str::to_string)
                .unwrap_or_else(|| n.rank().to_string())
        })
        .collect();
    let text = render(&counts, &hosts, args.to.as_deref()).map_err(|e| anyhow!("{e}"))?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc34_blocks() {
        assert_eq!(blocks(&[2, 2, 2]), [[0, 3, 2, 1]]);
        assert_eq!(blocks(&[2, 1]), [[0, 1, 2, 1], [1, 1, 1, 1]]);
        assert_eq!(blocks(&[1, 0, 1]), [[0, 1, 1, 1], [2, 1, 1, 1]]);
    }

    #[test]
    fn formats_as_flux_job_taskmap() {
        let hosts = vec!["a".to_string(), "b".to_string()];
        let r = |f| render(&[2, 1], &hosts, f).unwrap();
        assert_eq!(r(None), r#"{"version":1,"map":[[0,1,2,1],[1,1,1,1]]}"#);
        assert_eq!(r(Some("raw")), "0-1;2");
        assert_eq!(r(Some("pmi")), "(vector,(0,1,2),(1,1,1))");
        assert_eq!(r(Some("multiline")), "0: 0\n1: 0\n2: 1");
        assert_eq!(r(Some("hosts")), "a: 0-1\nb: 2");
        assert!(render(&[1], &hosts, Some("bogus")).is_err());
    }
}
