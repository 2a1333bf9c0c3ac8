//! `fluxgate job purge`: remove the oldest inactive jobs, as `flux job purge`.

use std::process::ExitCode;

use anyhow::anyhow;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::parse_fsd;

use crate::client;

/// Arguments of `fluxgate job purge`.
#[derive(Debug, clap::Args)]
pub struct PurgeArgs {
    /// Purge inactive jobs older than this (FSD, e.g. 7d, 12h).
    #[arg(long, value_name = "FSD")]
    age_limit: Option<String>,
    /// Purge the oldest inactive jobs until at most COUNT remain.
    #[arg(long, value_name = "COUNT")]
    num_limit: Option<u64>,
    /// Purge at most COUNT jobs.
    #[arg(long, value_name = "COUNT", default_value_t = 50)]
    batch: u64,
    /// Really purge; without it, only say how many would be purged.
    #[arg(short, long)]
    force: bool,
}

/// Run `fluxgate job purge`.
pub fn run(args: PurgeArgs) -> anyhow::Result<ExitCode> {
    let age_limit = args
        .age_limit
        .as_deref()
        .map(|s| parse_fsd(s).map_err(|e| anyhow!("invalid --age-limit {s:?}: {e}")))
        .transpose()?;
    if age_limit.is_none() && args.num_limit.is_none() {
        return Err(anyhow!("specify --age-limit and/or --num-limit"));
    }
    let force = args.force;
    let count = client::block_on(async {
        let mut inst = client::connect().await?;
        let r = inst
            .jobs
            .purge(pb::PurgeRequest {
                age_limit,
                num_limit: args.num_limit,
                force,
                batch: args.batch,
            })
            .await
            .map_err(client::status_error)?;
        anyhow::Ok(r.into_inner().count)
    })??;
    if force {
        println!("purged {count} inactive jobs");
    } else {
        println!("use --force to purge {count} inactive jobs");
    }
    Ok(ExitCode::SUCCESS)
}
