//! `fluxgate queue status|stop|start|drain|idle`, as `flux queue`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::StateMask;
use fluxgate_shared::jobspec::parse_fsd;

use crate::client::{self, Instance};
use crate::output::printable;

/// Arguments of `fluxgate queue`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Report the queue status.
    Status,
    /// Stop scheduling; jobs may still be submitted.
    Stop {
        /// Why the queue is stopped.
        reason: Vec<String>,
    },
    /// Start scheduling.
    Start,
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
    reason: String,
) -> anyhow::Result<pb::QueueResponse> {
    Ok(inst
        .jobs
        .queue(pb::QueueRequest {
            action: action as i32,
            reason,
        })
        .await
        .map_err(client::status_error)?
        .into_inner())
}

fn print_status(r: &pb::QueueResponse) {
    println!("Job submission is enabled");
    if r.started {
        println!("Scheduling is started");
    } else if r.reason.is_empty() {
        println!("Scheduling is stopped");
    } else {
        println!("Scheduling is stopped: {}", printable(&r.reason));
    }
}

/// Wait until List with `mask` is empty; the count of pending jobs at the end.
async fn wait_empty(inst: &mut Instance, mask: StateMask) -> anyhow::Result<()> {
    loop {
        let n = inst
            .jobs
            .list(pb::ListRequest {
                states: mask.bits(),
                userid: None,
                max_entries: 1,
                ..Default::default()
            })
            .await
            .map_err(client::status_error)?
            .into_inner()
            .jobs
            .len();
        if n == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

/// Run `fluxgate queue`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    client::block_on(async {
        let mut inst = client::connect().await?;
        match args.command {
            Command::Status => {
                let r = queue(&mut inst, pb::QueueAction::Status, String::new()).await?;
                print_status(&r);
            }
            Command::Stop { reason } => {
                queue(&mut inst, pb::QueueAction::Stop, reason.join(" ")).await?;
            }
            Command::Start => {
                queue(&mut inst, pb::QueueAction::Start, String::new()).await?;
            }
            Command::Drain { timeout } => {
                // Waiting is done here by polling List, so it also works where
                // the service does not implement the drain action.
                with_timeout(&timeout, wait_empty(&mut inst, StateMask::ACTIVE)).await?;
            }
            Command::Idle { timeout, quiet } => {
                with_timeout(&timeout, wait_empty(&mut inst, StateMask::RUNNING)).await?;
                if !quiet {
                    let request = pb::ListRequest {
                        states: StateMask::PENDING.bits(),
                        ..Default::default()
                    };
                    // Every page: a listing reply is bounded in bytes.
                    let pending = crate::cmd::jobs::list_all(&mut inst, request).await?.len();
                    println!("{pending} pending jobs");
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    })?
}
