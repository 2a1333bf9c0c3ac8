//! `JobManager.Tasks` and `JobManager.Input`: the processes of a running
//! job's tasks, as its exec services report them (`flux job hostpids`),
//! and the standard input `run` forwards to them. The core says which exec
//! service leads the job, or why the job has no tasks running; the leader
//! answers (and passes input on) for every node of the job.

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::auth::Action;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::ask;
use super::job_service::JobManagerService;
use crate::auth::caller;
use crate::core::Msg;
use crate::error::Error;
use crate::exec_client::ExecAccess;
use crate::exec_client::tasks::{self, TaskProcess};
use crate::store::Store;

/// The processes of a job's tasks, for a caller who may read the job.
pub async fn tasks<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::TasksRequest>,
) -> Result<Response<pb::TasksResponse>, Status> {
    let caller = caller(&request)?;
    let id = JobId::from(request.get_ref().id);
    // ERROR level so the span is on whenever any line is, as the core's.
    let span = tracing::error_span!("job", job = %id);
    async {
        // Where a job's tasks run and their pids are the job's own, as
        // its eventlogs are: its owner's and the instance owner's.
        svc.authorize(&caller, Action::ReadJob, id.into()).await?;
        let answer = list(&svc.inbox, &svc.exec, id).await?;
        Ok(Response::new(answer))
    }
    .instrument(span)
    .await
}

/// Pass a caller's input stream on to a job's tasks, for a caller who may
/// control the job; the stream's first message names the job.
pub async fn input<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<tonic::Streaming<pb::InputRequest>>,
) -> Result<Response<pb::InputResponse>, Status> {
    let caller = caller(&request)?;
    let mut stream = request.into_inner();
    let first = stream
        .message()
        .await?
        .ok_or_else(|| Error::Invalid("an input stream must name its job first".into()))?;
    let id = JobId::from(first.id);
    let span = tracing::error_span!("job", job = %id);
    async {
        // Writing to a job's tasks is controlling them, as signalling is.
        svc.authorize(&caller, Action::Kill, id.into()).await?;
        forward(&svc.inbox, &svc.exec, id, first, stream).await?;
        Ok(Response::new(pb::InputResponse {}))
    }
    .instrument(span)
    .await
}

/// The processes of job `id`'s tasks, in task rank order; the caller has
/// been allowed to read the job.
async fn list(
    inbox: &mpsc::Sender<Msg>,
    exec: &ExecAccess,
    id: JobId,
) -> Result<pb::TasksResponse, Error> {
    let leader = ask(inbox, |reply| Msg::TasksLeader { id, reply }).await??;
    tracing::debug!(%leader, "asking the job's leader exec service for its tasks");
    let answer = tasks::tasks(exec, &leader, id).await?;
    let usage = match answer.usage {
        Some(u) => serde_json::to_string(&u)
            .map_err(|e| Error::Internal(format!("job {id}: usage as JSON: {e}")))?,
        None => String::new(),
    };
    Ok(pb::TasksResponse {
        tasks: answer.tasks.into_iter().map(wire).collect(),
        usage,
    })
}

/// Pass the caller's input stream to job `id`'s leader exec service; the
/// caller has been allowed to control the job.
async fn forward(
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
