//! Acting on jobs: `Cancel`, `RaiseException`, `Kill`, `Update`,
//! `SetUrgency`, `Memo` and `Purge`. Each checks the caller against the
//! job's owner (or the instance owner's actions) and hands the change to
//! the core, which answers once it is durable.

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::auth::{Action, Caller};
use serde_json::{Map, Value};
use tonic::{Request, Response, Status};

use super::job_service::JobManagerService;
use super::{allow, ask};
use crate::auth::caller;
use crate::core::{Msg, bounds};
use crate::error::Error;
use crate::store::Store;
use crate::values::{Severity, Urgency};

/// Cancel a job: an exception of type `cancel`, severity 0.
pub async fn cancel<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::CancelRequest>,
) -> Result<Response<pb::CancelResponse>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    bounds::check_note("cancel note", &req.note)?;
    svc.authorize(&caller, Action::Cancel, req.id).await?;
    raise(svc, &caller, req.id, "cancel", 0, req.note).await?;
    Ok(Response::new(pb::CancelResponse {}))
}

/// Raise an exception of the caller's type and severity on a job.
pub async fn raise_exception<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::RaiseExceptionRequest>,
) -> Result<Response<pb::RaiseExceptionResponse>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    bounds::check_note("exception note", &req.note)?;
    svc.authorize(&caller, Action::RaiseException, req.id)
        .await?;
    raise(svc, &caller, req.id, &req.r#type, req.severity, req.note).await?;
    Ok(Response::new(pb::RaiseExceptionResponse {}))
}

/// Signal a running job's tasks.
pub async fn kill<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::KillRequest>,
) -> Result<Response<pb::KillResponse>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    svc.authorize(&caller, Action::Kill, req.id).await?;
    ask(&svc.inbox, |reply| Msg::Kill {
        id: JobId::from(req.id),
        signum: req.signum,
        reply,
    })
    .await??;
    Ok(Response::new(pb::KillResponse {}))
}

/// Update a job's jobspec keys (a running job's duration).
pub async fn update<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::UpdateRequest>,
) -> Result<Response<pb::UpdateResponse>, Status> {
    // As flux-core's update of a running job's duration: the instance owner's.
    allow(&caller(&request)?, Action::UpdateJob, None)?;
    let req = request.into_inner();
    let updates = json_object(
        &req.updates,
        "updates must be a JSON object, e.g. {\"attributes.system.duration\": 600}",
    )?;
    let expiration = ask(&svc.inbox, |reply| Msg::Update {
        id: JobId::from(req.id),
        updates,
        reply,
    })
    .await??;
    Ok(Response::new(pb::UpdateResponse { expiration }))
}

/// Set a job's urgency; answers the urgency it had.
pub async fn set_urgency<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::SetUrgencyRequest>,
) -> Result<Response<pb::SetUrgencyResponse>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let urgency = Urgency::new(req.urgency)?;
    svc.authorize(&caller, Action::SetUrgency(urgency.get()), req.id)
        .await?;
    // The verified identity, never a userid from the request.
    let userid = caller.uid;
    let old = ask(&svc.inbox, |reply| Msg::Urgency {
        id: JobId::from(req.id),
        urgency,
        userid,
        reply,
    })
    .await??;
    Ok(Response::new(pb::SetUrgencyResponse {
        old_urgency: u32::from(old),
    }))
}

/// Add or remove a job's memo keys.
pub async fn memo<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::MemoRequest>,
) -> Result<Response<pb::MemoResponse>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    svc.authorize(&caller, Action::Memo, req.id).await?;
    bounds::check_memo_request(&req.memo)?;
    let memo = json_object(
        &req.memo,
        "memo must be a JSON object, e.g. {\"key\": \"value\"}",
    )?;
    ask(&svc.inbox, |reply| Msg::Memo {
        id: JobId::from(req.id),
        memo,
        reply,
    })
    .await??;
    Ok(Response::new(pb::MemoResponse {}))
}

/// Remove inactive jobs by age or count.
pub async fn purge<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::PurgeRequest>,
) -> Result<Response<pb::PurgeResponse>, Status> {
    allow(&caller(&request)?, Action::Purge, None)?;
    let req = request.into_inner();
    if req.age_limit.is_some_and(|a| !a.is_finite() || a < 0.0) {
        return Err(
            Error::Invalid("age limit must be a non-negative number of seconds".into()).into(),
        );
    }
    let batch = usize::try_from(req.batch).unwrap_or(usize::MAX);
    let count = ask(&svc.inbox, |reply| Msg::Purge {
        age_limit: req.age_limit,
        num_limit: req.num_limit,
        force: req.force,
        batch,
        reply,
    })
    .await??;
    Ok(Response::new(pb::PurgeResponse { count }))
}

/// `text` as a JSON object, or `Invalid` with `refusal`.
fn json_object(text: &str, refusal: &str) -> Result<Map<String, Value>, Error> {
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(Error::Invalid(refusal.to_string())),
    }
}

/// Ask the core to raise an exception on job `id` for `caller`.
async fn raise<S: Store>(
    svc: &JobManagerService<S>,
    caller: &Caller,
    id: u64,
    kind: &str,
    severity: u32,
    note: String,
) -> Result<(), Error> {
    let severity = Severity::new(severity)?;
    let userid = caller.uid;
    ask(&svc.inbox, |reply| Msg::Raise {
        id: JobId::from(id),
        kind: kind.to_string(),
        severity,
        note,
        userid,
        reply,
    })
    .await?
}
