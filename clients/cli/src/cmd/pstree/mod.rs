//! `fluxgate pstree`: the caller's jobs, and the jobs of the instances
//! running inside them, as a tree (flux-pstree(1)). Each job is printed as
//! `NAME:S` (S the one-letter state); only running jobs unless `-a`.

pub mod tree;

use std::process::ExitCode;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::job::StateMask;

use crate::client::{self, Instance};
use crate::cmd::instance::{lookup_uids, memo_uri, read_owner_token};
use tree::Node;

/// How deep instances are followed: a bound on a tree that could nest
/// without end.
const MAX_LEVEL: usize = 8;

/// Arguments of `fluxgate pstree`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Include jobs in every state, inactive ones too.
    #[arg(short = 'a', long)]
    all: bool,
    /// Descend at most N levels of instances (0: only this instance's jobs).
    #[arg(short = 'L', long, value_name = "N", default_value_t = MAX_LEVEL)]
    level: usize,
}

/// Run `fluxgate pstree`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let states = if args.all {
        StateMask::ALL
    } else {
        StateMask::RUNNING
    };
    let depth = args.level.min(MAX_LEVEL);
    client::block_on(async {
        let mut inst = client::connect().await?;
        let roots = jobs(&mut inst, states, depth).await?;
        for line in tree::render(&roots) {
            println!("{}", crate::output::printable(&line));
        }
        Ok(ExitCode::SUCCESS)
    })?
}

/// The tree of the jobs of the instance behind `inst`, `depth` levels down.
async fn jobs(inst: &mut Instance, states: StateMask, depth: usize) -> anyhow::Result<Vec<Node>> {
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
        let label = format!("{}:{}", j.name, tree::state_single(&j.state));
        let children = if depth > 0 && j.state == "RUN" {
            Box::pin(inside(inst, JobId::from(j.id), states, depth - 1)).await
        } else {
            Vec::new()
        };
        out.push(Node { label, children });
    }
    Ok(out)
}

/// The jobs of the instance job `id` runs, if it runs one this user can
/// reach; an instance that cannot be read is shown without children.
async fn inside(inst: &mut Instance, id: JobId, states: StateMask, depth: usize) -> Vec<Node> {
    let Ok((Some(uri), owner)) = memo_uri(inst, id).await else {
        return Vec::new();
    };
    let token = read_owner_token(&uri, &lookup_uids(owner));
    let creds = match &token {
        Some(t) => match client::Credentials::default().with_token(t) {
            Ok(c) => c,
            Err(_) => return Vec::new(),
        },
        None => client::Credentials::default(),
    };
    let Ok(mut child) = client::connect_with(&uri, &creds).await else {
        return Vec::new();
    };
    jobs(&mut child, states, depth).await.unwrap_or_default()
}
