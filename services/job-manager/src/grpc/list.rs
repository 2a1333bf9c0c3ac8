//! `JobManager.List`, and the listing both it and the job journal read: the
//! core's active jobs merged with the store's inactive ones, in the wire
//! form of a row.

use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::auth::Action;
use fluxgate_shared::job::{JobResult, StateMask};
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use super::job_service::{JobManagerService, REPLY_MAX};
use super::{allow, ask};
use crate::auth::caller;
use crate::core::{self, ListFilter, Msg};
use crate::error::Error;
use crate::store::Store;

/// One page of jobs, newest first, within one reply's byte budget.
pub async fn list<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::ListRequest>,
) -> Result<Response<pb::ListResponse>, Status> {
    // Every user may list every job, in summary: a JobSummary holds no
    // jobspec, environment or output.
    allow(&caller(&request)?, Action::ListJobs, None)?;
    let filter = filter_of(request.into_inner())?;
    let wanted = filter.max;
    let (rows, cut) = list_rows(&svc.inbox, &svc.store, filter).await?;
    Ok(Response::new(page_of(rows, cut, wanted)))
}

/// The filter a List request asks for.
fn filter_of(req: pb::ListRequest) -> Result<ListFilter, Error> {
    let states = if req.states == 0 {
        None
    } else {
        Some(StateMask::from_bits(req.states).ok_or_else(|| {
            Error::Invalid(format!("state mask {:#x} has unknown bits", req.states))
        })?)
    };
    let results = req
        .results
        .iter()
        .map(|r| {
            r.parse::<JobResult>()
                .map_err(|e| Error::Invalid(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ListFilter {
        states,
        userid: req.userid,
        name: req.name,
        since: req.since,
        results,
        max: req.max_entries as usize,
        before: (req.before != 0).then(|| JobId::from(req.before)),
        max_bytes: REPLY_MAX,
        queue: req.queue,
    })
}

/// The reply holding as many of `rows` as fit, and where to go on from
/// when more match (`cut`: the listing's bounds left rows out).
fn page_of(rows: Vec<core::JobInfo>, cut: bool, wanted: usize) -> pb::ListResponse {
    let mut jobs = Vec::with_capacity(rows.len());
    let mut bytes = 0;
    let mut more = cut;
    for j in rows {
        let summary = summary_of(j);
        // Tag and length prefix of a repeated field: at most 6 bytes.
        let size = prost::Message::encoded_len(&summary) + 6;
        if !jobs.is_empty() && bytes + size > REPLY_MAX {
            more = true;
            break;
        }
        bytes += size;
        jobs.push(summary);
    }
    // A listing that reached the caller's max_entries is complete.
    if wanted > 0 && jobs.len() >= wanted {
        more = false;
    }
    let next = match jobs.last() {
        Some(last) if more => last.id,
        _ => 0,
    };
    pb::ListResponse { jobs, next }
}

/// The rows of a listing: the core's active jobs and the store's inactive
/// ones, merged; and whether more rows match than the filter's bounds let in.
pub async fn list_rows<S: Store>(
    inbox: &mpsc::Sender<Msg>,
    store: &Arc<S>,
    filter: ListFilter,
) -> Result<(Vec<core::JobInfo>, bool), Error> {
    let wants_inactive = filter.wants_inactive();
    let query = filter.clone();
    let active = ask(inbox, |reply| Msg::List { filter, reply }).await?;
    let stored = if wants_inactive {
        let store = Arc::clone(store);
        let q = query.clone();
        tokio::task::spawn_blocking(move || core::stored_inactive(&*store, &q))
            .await
            .map_err(|e| Error::Internal(format!("listing failed: {e}")))??
    } else {
        Vec::new()
    };
    Ok(core::merge_listings(active, stored, &query))
}

/// The wire form of a listing row.
pub fn summary_of(j: core::JobInfo) -> pb::JobSummary {
    pb::JobSummary {
        id: j.id.into(),
        userid: j.userid,
        name: j.name,
        queue: j.queue,
        state: j.state.name().to_string(),
        result: j.result.map(|r| r.name().to_string()).unwrap_or_default(),
        urgency: u32::from(j.urgency),
        priority: u64::from(j.priority.unwrap_or(0)),
        ntasks: j.ntasks,
        nnodes: j.nnodes,
        nodelist: j.nodelist,
        t_submit: j.t_submit,
        t_run: j.t_run.unwrap_or_default(),
        t_inactive: j.t_inactive.unwrap_or_default(),
        waitstatus: j.waitstatus,
        exception_type: j
            .exception
            .as_ref()
            .map(|e| e.0.clone())
            .unwrap_or_default(),
        exception_note: j.exception.map(|e| e.1).unwrap_or_default(),
        annotations: j.annotations.unwrap_or_default(),
        usage: j.usage.map(|u| pb::UsageTotal {
            user: u.user,
            system: u.system,
            max_rss: u.max_rss,
        }),
    }
}
