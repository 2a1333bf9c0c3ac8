//! `JobManager.Tasks` and `JobManager.Input`: the processes of a running
//! job's tasks, as its exec services report them (`flux job hostpids`),
//! and the standard input `run` forwards to them. The core says which exec
//! service leads the job, or why the job has no tasks running; the leader
//! answers (and passes input on) for every node of the job.

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use tokio::sync::mpsc;

use super::ask;
use crate::core::Msg;
use crate::error::Error;
use crate::exec_client::ExecAccess;
use crate::exec_client::tasks::{self, TaskProcess};

/// The processes of job `id`'s tasks, in task rank order; the caller has
/// been allowed to read the job.
pub async fn list(
    inbox: &mpsc::Sender<Msg>,
    exec: &ExecAccess,
    id: JobId,
) -> Result<pb::TasksResponse, Error> {
    let leader = ask(inbox, |reply| Msg::TasksLeader { id, reply }).await??;
    tracing::debug!(%leader, "asking the job's leader exec service for its tasks");
    let tasks = tasks::tasks(exec, &leader, id).await?;
    Ok(pb::TasksResponse {
        tasks: tasks.into_iter().map(wire).collect(),
    })
}

/// Pass the caller's input stream to job `id`'s leader exec service; the
/// caller has been allowed to control the job.
pub async fn input(
    inbox: &mpsc::Sender<Msg>,
    exec: &ExecAccess,
    id: JobId,
    first: pb::InputRequest,
    rest: tonic::Streaming<pb::InputRequest>,
) -> Result<(), Error> {
    let leader = ask(inbox, |reply| Msg::TasksLeader { id, reply }).await??;
    crate::exec_client::input::forward(exec, &leader, id, first, rest).await
}

/// The wire form of one task's process.
fn wire(t: TaskProcess) -> pb::TaskProcess {
    pb::TaskProcess {
        task_rank: t.task_rank,
        node_rank: t.node_rank,
        hostname: t.hostname,
        pid: t.pid,
    }
}
