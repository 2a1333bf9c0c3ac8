//! `JobManager.Info`: a job's stored keys (jobspec, R, usage) and pages of
//! its logs, read from the store off the async workers, within one reply's
//! byte budget.

use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_shared::JobId;
use fluxgate_shared::auth::{Action, Caller};
use tonic::{Request, Response, Status};

use super::allow;
use super::job_service::{JobManagerService, REPLY_MAX};
use crate::auth::caller;
use crate::error::Error;
use crate::store::{Log, LogPos, Store, StoredJob};

/// Lines read from the store at a time.
const PAGE_LINES: usize = 256;

/// The keys the caller asked for of one job.
pub async fn info<S: Store>(
    svc: &JobManagerService<S>,
    request: Request<pb::InfoRequest>,
) -> Result<Response<pb::InfoResponse>, Status> {
    let caller = caller(&request)?;
    let req = request.into_inner();
    let store = Arc::clone(&svc.store);
    let reply = tokio::task::spawn_blocking(move || read_info(&*store, &caller, req))
        .await
        .map_err(|e| Error::Internal(e.to_string()))??;
    Ok(Response::new(reply))
}

/// The reply to `req`, read from `store` (blocking).
fn read_info<S: Store>(
    store: &S,
    caller: &Caller,
    req: pb::InfoRequest,
) -> Result<pb::InfoResponse, Error> {
    let id = JobId::from(req.id);
    let job = store.read_job(id.into())?.ok_or(Error::UnknownJob(id))?;
    allow(caller, Action::ReadJob, Some(job.userid))?;
    let asked = usize::try_from(req.max_bytes).unwrap_or(usize::MAX);
    let mut budget = if asked == 0 {
        REPLY_MAX
    } else {
        asked.min(REPLY_MAX)
    };
    let mut reply = pb::InfoResponse::default();
    for key in req.keys {
        let value = match key.as_str() {
            "jobspec" => job.jobspec.clone(),
            "R" => stored_r(&job, id)?,
            "usage" => stored_usage(store, id)?,
            other => {
                let log = Log::from_key(other).ok_or_else(|| {
                    Error::Invalid(format!(
                        "unknown key {other:?}: expected jobspec, R, eventlog, exec.eventlog, output or usage"
                    ))
                })?;
                let page = read_log_bytes(store, id, log, req.offset, budget)?;
                if page.text.is_empty() && req.offset == 0 {
                    return Err(Error::WrongState(format!("job {id} has no {other}")));
                }
                if let Some(next) = page.next {
                    reply.next_offset.insert(key.clone(), next);
                    reply.more = true;
                }
                page.text
            }
        };
        budget = budget.saturating_sub(value.len());
        reply.values.insert(key, value);
    }
    Ok(reply)
}

/// Job `id`'s R, or why it has none.
fn stored_r(job: &StoredJob, id: JobId) -> Result<String, Error> {
    job.r
        .clone()
        .ok_or_else(|| Error::WrongState(format!("job {id} has no R (it was never allocated)")))
}

/// Job `id`'s resource usage as JSON, or why it has none.
fn stored_usage<S: Store>(store: &S, id: JobId) -> Result<String, Error> {
    crate::core::usage::stored(store, id)?
        .and_then(|u| serde_json::to_string(&u).ok())
        .ok_or_else(|| {
            Error::WrongState(format!(
                "job {id} has no usage: it has not ended, or its nodes do \
                 not contain jobs in cgroups"
            ))
        })
}

/// One page of a log for `Info`: its text, and the line to read next when
/// lines are left.
struct LogBytes {
    text: String,
    next: Option<u64>,
}

/// Whole lines of a stored log from line `offset` on, each ending in a
/// newline, while they fit in `budget` bytes (at least one, so a reader
/// always moves on), read a store page at a time.
fn read_log_bytes<S: Store>(
    store: &S,
    id: JobId,
    log: Log,
    offset: u64,
    budget: usize,
) -> Result<LogBytes, Error> {
    let mut text = String::new();
    let mut pos = LogPos::line(offset);
    loop {
        let (lines, next) = store.read_log_page(id.into(), log, pos, PAGE_LINES)?;
        let full_page = lines.len() == PAGE_LINES;
        for (i, line) in lines.iter().enumerate() {
            if !text.is_empty() && text.len() + line.len() + 1 > budget {
                return Ok(LogBytes {
                    text,
                    next: Some(pos.line + i as u64),
                });
            }
            text.push_str(line);
            text.push('\n');
        }
        if !full_page {
            return Ok(LogBytes { text, next: None });
        }
        pos = next;
    }
}
