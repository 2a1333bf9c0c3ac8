//! What exec services answer on a session, turned into the core's
//! [`ExecMsg`]s: proto messages stop here.

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::start_response::Response;
use fluxgate_shared::JobId;

use super::usage;
use crate::exec_link::ExecMsg;
use crate::telemetry;

/// What one start response says, for the core; `None` for an empty one.
/// The flag is true for the job's final release.
pub(super) fn to_msg(resp: pb::StartResponse) -> Option<(ExecMsg, bool)> {
    let id = JobId::from(resp.id);
    let resp = resp.response?;
    if let Response::Exception(e) = &resp {
        let severity = e.severity.min(7).to_string();
        metrics::counter!(telemetry::EXEC_EXCEPTIONS, "severity" => severity).increment(1);
    }
    Some(match resp {
        Response::Start(_) => (ExecMsg::Started { id }, false),
        Response::Reattached(_) => (ExecMsg::Reattached { id }, false),
        Response::Release(r) => (
            ExecMsg::Release {
                id,
                ranks: r.ranks,
                last: r.r#final,
            },
            r.r#final,
        ),
        Response::Exception(e) => (
            ExecMsg::Exception {
                id,
                kind: e.r#type,
                severity: u8::try_from(e.severity.min(7)).unwrap_or(7),
                note: e.note,
            },
            false,
        ),
        Response::Finish(f) => (
            ExecMsg::Finish {
                id,
                status: f.status,
                usage: usage::from_wire(&f.usage),
            },
            false,
        ),
        Response::ExecEvent(line) => (ExecMsg::ExecLine { id, line }, false),
        Response::OutputEvent(line) => (ExecMsg::OutputLine { id, line }, false),
        Response::LiveOutputEvent(line) => (ExecMsg::LiveOutputLine { id, line }, false),
        // A leader consumes its peers' PMI keys; nothing for the job manager.
        Response::Pmi(_) => return None,
    })
}
