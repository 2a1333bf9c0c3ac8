//! `Exec.Input` toward a job's leader exec service: the standard input
//! that `run` and `job attach` forward through `JobManager.Input`, chunk by
//! chunk in order (the leader passes it on to its peers).

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_shared::JobId;
use tokio_stream::StreamExt;
use tonic::Code;

use super::access::{ExecAccess, channel};
use crate::error::Error;

/// Copy `first` and the rest of the caller's stream to the leader exec
/// service of job `id` at `addr`, until the caller's stream ends.
pub async fn forward(
    access: &ExecAccess,
    addr: &str,
    id: JobId,
    first: pb::InputRequest,
    rest: tonic::Streaming<pb::InputRequest>,
) -> Result<(), Error> {
    let mut client = ExecClient::new(channel(addr, access).map_err(Error::Unavailable)?);
    let wire = move |m: pb::InputRequest| pb::ExecInputRequest {
        id: id.into(),
        ranks: m.ranks,
        data: m.data,
        eof: m.eof,
        rows: m.rows,
        cols: m.cols,
    };
    // A caller's stream that breaks ends the input here; what came is passed on.
    let rest = rest.map_while(Result::ok);
    let chunks = tokio_stream::once(first).chain(rest).map(wire);
    client
        .input(access.request(chunks))
        .await
        .map(|_| ())
        .map_err(|status| refusal(id, addr, &status))
}

/// What an exec service's refusal means for the writer of the input.
fn refusal(id: JobId, addr: &str, status: &tonic::Status) -> Error {
    match status.code() {
        Code::NotFound => Error::WrongState(format!(
            "job {id} is no longer running: its tasks have ended"
        )),
        Code::FailedPrecondition | Code::InvalidArgument => {
            Error::WrongState(status.message().to_string())
        }
        _ => Error::Unavailable(format!(
            "cannot pass input to job {id} at its exec service {addr}: {}",
            status.message()
        )),
    }
}
