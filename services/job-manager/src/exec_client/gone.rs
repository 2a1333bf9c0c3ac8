//! Whether a job's part still runs on a node: asked of that node's exec
//! service with `Exec.Tasks` until it no longer knows the job. The core
//! waits for this before it frees the node's share of a job whose first
//! node was lost: the node's tasks were told to end, and its cores go to
//! another job only once they have.

use std::time::Duration;

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_shared::JobId;
use tonic::Code;

use super::access::{ExecAccess, channel};
use crate::exec_link::{ExecMsg, ExecSink};

/// How often a node is asked again while the job's part runs there.
const POLL: Duration = Duration::from_millis(500);
/// How long one question may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Ask the exec service at `addr` until job `id` no longer runs there,
/// then say [`ExecMsg::PartGone`] for `rank`. A node that cannot be
/// reached is asked on: the core counts it gone once it has fenced itself.
/// Ends early when the core stops.
pub(super) async fn confirm<K: ExecSink>(
    sink: K,
    access: ExecAccess,
    addr: String,
    id: JobId,
    rank: u32,
) {
    let ask = async {
        loop {
            match still_runs(&access, &addr, id).await {
                Ok(false) => return,
                Ok(true) => {}
                Err(e) => {
                    tracing::debug!(job = %id, addr, error = %e, "cannot ask whether a part still runs")
                }
            }
            tokio::time::sleep(POLL).await;
        }
    };
    tokio::select! {
        () = ask => {
            let _ = sink.deliver(ExecMsg::PartGone { id, rank }).await;
        }
        () = sink.closed() => {}
    }
}

/// Whether job `id` still runs at `addr`; why the node could not say.
async fn still_runs(access: &ExecAccess, addr: &str, id: JobId) -> Result<bool, String> {
    let mut client = ExecClient::new(channel(addr, access)?);
    let call = client.tasks(access.request(pb::ExecTasksRequest { id: id.into() }));
    match tokio::time::timeout(ANSWER_TIMEOUT, call).await {
        Err(_) => Err(format!("no answer within {}s", ANSWER_TIMEOUT.as_secs())),
        Ok(Ok(_)) => Ok(true),
        Ok(Err(status)) if status.code() == Code::NotFound => Ok(false),
        // Still launching, or its own children are slow to say: it runs.
        Ok(Err(status)) if status.code() == Code::FailedPrecondition => Ok(true),
        Ok(Err(status)) => Err(status.message().to_string()),
    }
}
