//! `Exec.Tasks` toward a job's leader exec service: the processes of the
//! job's tasks on every node and its usage so far, for `JobManager.Tasks`
//! (`flux job hostpids`, `fluxgate job usage` of a running job).
//! Unlike starts and signals, this is a question with an answer, so it is
//! a unary call of its own rather than a message on the session.

use std::time::Duration;

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_shared::JobId;
use fluxgate_shared::job::usage::JobUsage;
use tonic::Code;

use super::access::{ExecAccess, channel};
use super::usage::from_wire;
use crate::error::Error;

/// How long the leader may take: longer than it gives each of its peers
/// (10 s), so that its own message about a silent peer arrives first.
const TASKS_TIMEOUT: Duration = Duration::from_secs(15);

/// One task's process, as the exec services report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskProcess {
    /// The task's global rank.
    pub task_rank: u32,
    /// The rank of R it runs on.
    pub node_rank: u32,
    /// That rank's hostname.
    pub hostname: String,
    /// Its process id on that host.
    pub pid: i32,
}

impl From<pb::ExecTaskProcess> for TaskProcess {
    fn from(t: pb::ExecTaskProcess) -> Self {
        TaskProcess {
            task_rank: t.task_rank,
            node_rank: t.node_rank,
            hostname: t.hostname,
            pid: t.pid,
        }
    }
}

/// What the leader exec service of a job answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Tasks {
    /// The processes of the job's tasks, in task rank order.
    pub tasks: Vec<TaskProcess>,
    /// What the job has used so far; `None` where no node contains it.
    pub usage: Option<JobUsage>,
}

/// Ask the leader exec service of job `id`, at `addr`, for the processes of
/// the job's tasks and its usage so far.
pub async fn tasks(access: &ExecAccess, addr: &str, id: JobId) -> Result<Tasks, Error> {
    let mut client = ExecClient::new(channel(addr, access).map_err(Error::Unavailable)?);
    let call = client.tasks(access.request(pb::ExecTasksRequest { id: id.into() }));
    let answer = tokio::time::timeout(TASKS_TIMEOUT, call)
        .await
        .map_err(|_| {
            Error::Unavailable(format!(
                "the exec service of job {id} at {addr} did not answer within {}s",
                TASKS_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|status| refusal(id, addr, &status))?
        .into_inner();
    let mut tasks: Vec<TaskProcess> = answer.tasks.into_iter().map(TaskProcess::from).collect();
    // The order is part of the answer; not left to each exec service.
    tasks.sort_by_key(|t| t.task_rank);
    Ok(Tasks {
        tasks,
        usage: from_wire(&answer.usage),
    })
}

/// What an exec service's refusal means for the caller of `JobManager.Tasks`.
fn refusal(id: JobId, addr: &str, status: &tonic::Status) -> Error {
    let msg = status.message();
    match status.code() {
        // The job ended between the core's answer and this call.
        Code::NotFound => Error::WrongState(format!(
            "job {id} is no longer running: its tasks have ended"
        )),
        Code::FailedPrecondition => Error::WrongState(msg.to_string()),
        Code::Unimplemented => Error::Unavailable(format!(
            "the exec service of job {id} at {addr} cannot list tasks \
             (it predates Exec.Tasks: upgrade it)"
        )),
        _ => Error::Unavailable(format!(
            "cannot list the tasks of job {id} from its exec service at {addr}: {msg}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_refusal_becomes_a_state_or_an_unavailable_error() {
        let id = JobId::from(1);
        let gone = refusal(id, "http://n:1", &tonic::Status::not_found("not here"));
        assert!(matches!(gone, Error::WrongState(m) if m.contains("no longer running")));
        let starting = refusal(
            id,
            "http://n:1",
            &tonic::Status::failed_precondition("still launching"),
        );
        assert_eq!(starting, Error::WrongState("still launching".into()));
        let down = refusal(id, "http://n:1", &tonic::Status::unavailable("refused"));
        assert!(matches!(down, Error::Unavailable(m) if m.contains("http://n:1: refused")));
    }
}
