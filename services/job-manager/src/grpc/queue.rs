//! `JobManager.Queue` (status, start/stop, enable/disable, wait until idle
//! or drained) and `Accounting` (each association's fair-share usage).

use fluxgate_proto::v1 as pb;
use fluxgate_shared::auth::Action;
use tonic::{Request, Response, Status};

use super::job_service::JobManagerService;
use super::{allow, ask};
use crate::auth::caller;
use crate::core::{self, Msg, QueueAction, QueueRequest, Quiet, bounds};
use crate::error::Error;
use crate::policy::SitePolicy;
use crate::store::Store;

/// Act on the queues and answer their state.
pub async fn queue<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::QueueRequest>,
) -> Result<Response<pb::QueueResponse>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    if let Some(what) = quiet_of(req.action) {
        // As status: anyone who may see the queues may wait on them.
        allow(&caller, Action::QueueStatus, None)?;
        ask(&svc.inbox, |reply| Msg::Quiesce { what, reply }).await??;
    }
    let action = action_of(req.action)?;
    let what = match action {
        QueueAction::Disable => "queue disable reason",
        _ => "queue stop reason",
    };
    bounds::check_note(what, &req.reason)?;
    let needs = match action {
        QueueAction::Status => Action::QueueStatus,
        _ => Action::QueueControl,
    };
    allow(&caller, needs, None)?;
    let request = QueueRequest {
        action,
        name: (!req.name.is_empty()).then_some(req.name),
        all: req.all,
        reason: req.reason,
    };
    let statuses = ask(&svc.inbox, |reply| Msg::Queue { request, reply }).await??;
    let queues: Vec<pb::QueueInfo> = statuses
        .into_iter()
        .map(|s| queue_info(&svc.site, s))
        .collect();
    let (started, reason) = queues
        .first()
        .map(|q| (q.started, q.stop_reason.clone()))
        .unwrap_or((true, String::new()));
    Ok(Response::new(pb::QueueResponse {
        started,
        reason,
        queues,
    }))
}

/// Each association's fair-share usage.
pub async fn accounting<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::AccountingRequest>,
) -> Result<Response<pb::AccountingResponse>, Status> {
    // As listing: every user may see every association's usage.
    allow(&caller(&request)?, Action::ListJobs, None)?;
    let rows = ask(&svc.inbox, |reply| Msg::Accounts { reply }).await?;
    Ok(Response::new(pb::AccountingResponse {
        enabled: svc.site.accounting.is_some(),
        rows: rows
            .into_iter()
            .map(|r| pb::AccountRow {
                bank: r.bank,
                userid: r.userid,
                usage: r.usage,
                shares: r.shares,
                fairshare: r.fairshare,
            })
            .collect(),
    }))
}

/// What a wire action waits for first, if it waits (idle, drain).
fn quiet_of(action: i32) -> Option<Quiet> {
    match pb::QueueAction::try_from(action) {
        Ok(pb::QueueAction::Idle) => Some(Quiet::Idle),
        Ok(pb::QueueAction::Drain) => Some(Quiet::Drained),
        _ => None,
    }
}

/// The core's action for a wire action; waiting ones answer the status.
fn action_of(action: i32) -> Result<QueueAction, Error> {
    Ok(match pb::QueueAction::try_from(action) {
        Ok(pb::QueueAction::Idle | pb::QueueAction::Drain) => QueueAction::Status,
        Ok(pb::QueueAction::Stop) => QueueAction::Stop,
        Ok(pb::QueueAction::Start) => QueueAction::Start,
        Ok(pb::QueueAction::Enable) => QueueAction::Enable,
        Ok(pb::QueueAction::Disable) => QueueAction::Disable,
        Ok(pb::QueueAction::Status) | Ok(pb::QueueAction::Unspecified) => QueueAction::Status,
        Err(_) => return Err(Error::Invalid("unknown queue action".into())),
    })
}

/// The wire form of a queue's state and policy.
fn queue_info(site: &SitePolicy, s: core::QueueStatus) -> pb::QueueInfo {
    let policy = site
        .queues
        .effective((!s.name.is_empty()).then_some(s.name.as_str()))
        .cloned()
        .unwrap_or_default();
    pb::QueueInfo {
        name: s.name,
        enabled: s.state.enable,
        disable_reason: s.state.disable_reason,
        started: s.state.start,
        stop_reason: s.state.stop_reason,
        is_default: s.is_default,
        default_duration: policy.default_duration.unwrap_or(0.0),
        duration_limit: policy.duration_limit.unwrap_or(0.0),
        min: policy.min.to_vec(),
        max: policy.max.to_vec(),
        requires: policy.requires,
    }
}
