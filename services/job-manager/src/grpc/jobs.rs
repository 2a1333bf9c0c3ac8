//! `fluxgate.v1.JobManager`: submit, control, list, wait and watch jobs.

use std::pin::Pin;
use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::job_manager_server::JobManager;
use fluxgate_shared::auth::{Action, Caller};
use fluxgate_shared::job::{JobResult, StateMask};
use fluxgate_shared::{JobId, Jobspec};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::{allow, ask};
use crate::auth::caller;
use crate::config::Config;
use crate::core::{self, ListFilter, Msg, QueueAction, SubmitArgs};
use crate::error::Error;
use crate::hub::{Hub, Published};
use crate::store::{Log, LogPos, SqliteStore, Store};

/// Lines buffered per watcher before the watcher's stream is back-pressured.
const WATCH_BUFFER: usize = 256;

/// Lines a watcher reads from the store at a time.
const PAGE_LINES: usize = 256;

/// The JobManager service.
#[derive(Debug, Clone)]
pub struct JobManagerService {
    inbox: mpsc::Sender<Msg>,
    store: Arc<SqliteStore>,
    hub: Hub,
    config: Arc<Config>,
    cancel: CancellationToken,
}

impl JobManagerService {
    /// A service over the core's inbox, the store (reads) and the hub (watchers).
    pub fn new(
        inbox: mpsc::Sender<Msg>,
        store: Arc<SqliteStore>,
        hub: Hub,
        config: Arc<Config>,
        cancel: CancellationToken,
    ) -> Self {
        JobManagerService {
            inbox,
            store,
            hub,
            config,
            cancel,
        }
    }

    /// The owner of job `id`, as stored since its submission.
    async fn owner_of(&self, id: JobId) -> Result<u32, Error> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || store.read_job(id.into()))
            .await
            .map_err(|e| Error::Unavailable(format!("reading job {id}: {e}")))??
            .map(|job| job.userid)
            .ok_or(Error::UnknownJob(id))
    }

    /// Refuse `action` on job `id` unless `caller` may do it.
    async fn authorize(&self, caller: &Caller, action: Action, id: u64) -> Result<(), Status> {
        let id = JobId::from(id);
        // The owner may act on any job; only guests need the job's owner.
        let owner = if caller.is_owner() {
            None
        } else {
            Some(self.owner_of(id).await?)
        };
        Ok(allow(caller, action, owner)?)
    }

    /// Parse and authorize one submission; the job is the caller's.
    fn parse_submit(&self, req: pb::SubmitRequest, caller: &Caller) -> Result<SubmitArgs, Error> {
        let max = self.config.limits.max_jobspec_bytes;
        if req.jobspec.len() > max {
            return Err(Error::Invalid(format!(
                "jobspec is {} bytes, over the limit of {max} bytes",
                req.jobspec.len()
            )));
        }
        let jobspec =
            Jobspec::parse(&req.jobspec).map_err(|e| Error::Invalid(format!("jobspec: {e}")))?;
        let urgency = req.urgency.unwrap_or(16);
        let urgency = u8::try_from(urgency)
            .ok()
            .filter(|u| *u <= 31)
            .ok_or_else(|| Error::Invalid(format!("urgency {urgency} is out of range 0-31")))?;
        const KNOWN: u32 = 2 | 4 | 8;
        if req.flags & !KNOWN != 0 {
            return Err(Error::Invalid(format!(
                "unknown submit flags {:#x}",
                req.flags & !KNOWN
            )));
        }
        let action = Action::Submit {
            urgency,
            waitable: req.flags & pb::SubmitFlag::Waitable as u32 != 0,
            novalidate: req.flags & pb::SubmitFlag::Novalidate as u32 != 0,
        };
        allow(caller, action, None)?;
        Ok(SubmitArgs {
            jobspec_json: jobspec.to_json(),
            jobspec: Arc::new(jobspec),
            urgency,
            flags: i64::from(req.flags),
            // The verified identity, never a userid from the request.
            userid: caller.uid,
        })
    }

    async fn raise(
        &self,
        caller: &Caller,
        id: u64,
        kind: &str,
        severity: u32,
        note: String,
    ) -> Result<(), Error> {
        let severity = u8::try_from(severity)
            .ok()
            .filter(|s| *s <= 7)
            .ok_or_else(|| Error::Invalid(format!("severity {severity} is out of range 0-7")))?;
        let userid = caller.uid;
        ask(&self.inbox, |reply| Msg::Raise {
            id: JobId::from(id),
            kind: kind.to_string(),
            severity,
            note,
            userid,
            reply,
        })
        .await?
    }
}

type LineStream = Pin<Box<dyn Stream<Item = Result<pb::EventlogLine, Status>> + Send>>;

#[tonic::async_trait]
impl JobManager for JobManagerService {
    async fn submit(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let caller = caller(&request)?;
        let args = self.parse_submit(request.into_inner(), &caller)?;
        let mut results = ask(&self.inbox, |reply| Msg::Submit {
            jobs: vec![args],
            reply,
        })
        .await?;
        let id = results
            .pop()
            .ok_or_else(|| Status::internal("no submit result"))??;
        Ok(Response::new(pb::SubmitResponse { id: id.into() }))
    }

    async fn submit_many(
        &self,
        request: Request<pb::SubmitManyRequest>,
    ) -> Result<Response<pb::SubmitManyResponse>, Status> {
        let caller = caller(&request)?;
        let jobs = request.into_inner().jobs;
        let max = self.config.limits.max_batch;
        if jobs.len() > max {
            return Err(Status::invalid_argument(format!(
                "{} jobs in one request, over the limit of {max}",
                jobs.len()
            )));
        }
        // Parse every jobspec here, off the core; bad ones are answered alone.
        let parsed: Vec<Result<SubmitArgs, Error>> = jobs
            .into_iter()
            .map(|j| self.parse_submit(j, &caller))
            .collect();
        let good: Vec<SubmitArgs> = parsed
            .iter()
            .filter_map(|r| r.as_ref().ok().cloned())
            .collect();
        let mut answers = if good.is_empty() {
            Vec::new()
        } else {
            ask(&self.inbox, |reply| Msg::Submit { jobs: good, reply }).await?
        }
        .into_iter();
        let results = parsed
            .into_iter()
            .map(|p| {
                let r = match p {
                    Err(e) => Err(e),
                    Ok(_) => answers
                        .next()
                        .unwrap_or_else(|| Err(Error::Unavailable("no answer".into()))),
                };
                pb::SubmitResult {
                    result: Some(match r {
                        Ok(id) => pb::submit_result::Result::Id(id.into()),
                        Err(e) => pb::submit_result::Result::Error(e.to_string()),
                    }),
                }
            })
            .collect();
        Ok(Response::new(pb::SubmitManyResponse { results }))
    }

    async fn cancel(
        &self,
        request: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        self.authorize(&caller, Action::Cancel, req.id).await?;
        self.raise(&caller, req.id, "cancel", 0, req.note).await?;
        Ok(Response::new(pb::CancelResponse {}))
    }

    async fn raise_exception(
        &self,
        request: Request<pb::RaiseExceptionRequest>,
    ) -> Result<Response<pb::RaiseExceptionResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        self.authorize(&caller, Action::RaiseException, req.id)
            .await?;
        self.raise(&caller, req.id, &req.r#type, req.severity, req.note)
            .await?;
        Ok(Response::new(pb::RaiseExceptionResponse {}))
    }

    async fn kill(
        &self,
        request: Request<pb::KillRequest>,
    ) -> Result<Response<pb::KillResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        self.authorize(&caller, Action::Kill, req.id).await?;
        ask(&self.inbox, |reply| Msg::Kill {
            id: JobId::from(req.id),
            signum: req.signum,
            reply,
        })
        .await??;
        Ok(Response::new(pb::KillResponse {}))
    }

    async fn update(
        &self,
        request: Request<pb::UpdateRequest>,
    ) -> Result<Response<pb::UpdateResponse>, Status> {
        // As flux-core's update of a running job's duration: the instance owner's.
        allow(&caller(&request)?, Action::UpdateJob, None)?;
        let req = request.into_inner();
        let updates: Map<String, Value> = match serde_json::from_str(&req.updates) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(Status::invalid_argument(
                    "updates must be a JSON object, e.g. {\"attributes.system.duration\": 600}",
                ));
            }
        };
        let expiration = ask(&self.inbox, |reply| Msg::Update {
            id: JobId::from(req.id),
            updates,
            reply,
        })
        .await??;
        Ok(Response::new(pb::UpdateResponse { expiration }))
    }

    async fn set_urgency(
        &self,
        request: Request<pb::SetUrgencyRequest>,
    ) -> Result<Response<pb::SetUrgencyResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let urgency = u8::try_from(req.urgency)
            .ok()
            .filter(|u| *u <= 31)
            .ok_or_else(|| {
                Status::invalid_argument(format!("urgency {} is out of range 0-31", req.urgency))
            })?;
        self.authorize(&caller, Action::SetUrgency(urgency), req.id)
            .await?;
        // The verified identity, never a userid from the request.
        let userid = caller.uid;
        let old = ask(&self.inbox, |reply| Msg::Urgency {
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

    async fn memo(
        &self,
        request: Request<pb::MemoRequest>,
    ) -> Result<Response<pb::MemoResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        self.authorize(&caller, Action::Memo, req.id).await?;
        let memo: Map<String, Value> = match serde_json::from_str(&req.memo) {
            Ok(Value::Object(m)) => m,
            _ => {
                return Err(Status::invalid_argument(
                    "memo must be a JSON object, e.g. {\"key\": \"value\"}",
                ));
            }
        };
        ask(&self.inbox, |reply| Msg::Memo {
            id: JobId::from(req.id),
            memo,
            reply,
        })
        .await??;
        Ok(Response::new(pb::MemoResponse {}))
    }

    async fn info(
        &self,
        request: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::InfoResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let id = JobId::from(req.id);
        let store = Arc::clone(&self.store);
        let values = tokio::task::spawn_blocking(move || -> Result<_, Error> {
            let job = store.read_job(id.into())?.ok_or(Error::UnknownJob(id))?;
            allow(&caller, Action::ReadJob, Some(job.userid))?;
            let mut values = std::collections::HashMap::new();
            for key in req.keys {
                let value = match key.as_str() {
                    "jobspec" => job.jobspec.clone(),
                    "R" => job.r.clone().ok_or_else(|| {
                        Error::WrongState(format!("job {id} has no R (it was never allocated)"))
                    })?,
                    other => {
                        let log = Log::from_key(other).ok_or_else(|| {
                            Error::Invalid(format!(
                                "unknown key {other:?}: expected jobspec, R, eventlog, exec.eventlog or output"
                            ))
                        })?;
                        let lines = store.read_log(id.into(), log)?.ok_or_else(|| {
                            Error::WrongState(format!("job {id} has no {other}"))
                        })?;
                        let mut text = lines.join("\n");
                        text.push('\n');
                        text
                    }
                };
                values.insert(key, value);
            }
            Ok(values)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(pb::InfoResponse { values }))
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        // Every user may list every job, in summary: a JobSummary holds no
        // jobspec, environment or output.
        allow(&caller(&request)?, Action::ListJobs, None)?;
        let req = request.into_inner();
        let states = if req.states == 0 {
            None
        } else {
            Some(StateMask::from_bits(req.states).ok_or_else(|| {
                Status::invalid_argument(format!("state mask {:#x} has unknown bits", req.states))
            })?)
        };
        let results = req
            .results
            .iter()
            .map(|r| {
                r.parse::<JobResult>()
                    .map_err(|e| Status::invalid_argument(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let filter = ListFilter {
            states,
            userid: req.userid,
            name: req.name,
            since: req.since,
            results,
            max: req.max_entries as usize,
        };
        let (max, wants_inactive) = (filter.max, filter.wants_inactive());
        let query = filter.clone();
        let mut jobs = ask(&self.inbox, |reply| Msg::List { filter, reply }).await?;
        if wants_inactive {
            let store = Arc::clone(&self.store);
            let stored =
                tokio::task::spawn_blocking(move || core::stored_inactive(&*store, &query))
                    .await
                    .map_err(|e| Status::internal(format!("listing failed: {e}")))?
                    .map_err(Error::from)?;
            jobs = core::merge_listings(jobs, stored, max);
        }
        let jobs = jobs
            .into_iter()
            .map(|j| pb::JobSummary {
                id: j.id.into(),
                userid: j.userid,
                name: j.name,
                queue: String::new(),
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
            })
            .collect();
        Ok(Response::new(pb::ListResponse { jobs }))
    }

    async fn wait(
        &self,
        request: Request<pb::WaitRequest>,
    ) -> Result<Response<pb::WaitResponse>, Status> {
        allow(&caller(&request)?, Action::Wait, None)?;
        let req = request.into_inner();
        let id = (req.id != 0).then(|| JobId::from(req.id));
        let r = ask(&self.inbox, |reply| Msg::Wait { id, reply }).await??;
        Ok(Response::new(pb::WaitResponse {
            id: r.id.into(),
            success: r.success,
            error: r.error,
        }))
    }

    type WatchEventlogStream = LineStream;

    async fn watch_eventlog(
        &self,
        request: Request<pb::WatchEventlogRequest>,
    ) -> Result<Response<Self::WatchEventlogStream>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let id = JobId::from(req.id);
        self.authorize(&caller, Action::ReadJob, req.id).await?;
        let log = Log::from_key(&req.name).ok_or_else(|| {
            Status::invalid_argument(format!(
                "unknown eventlog {:?}: expected eventlog, exec.eventlog or output",
                req.name
            ))
        })?;
        // Subscribe before the first read, so nothing falls between them.
        let rx = self.hub.subscribe();
        ask(&self.inbox, |reply| Msg::Lookup { id, reply })
            .await??
            .ok_or(Error::UnknownJob(id))?;
        // Whether the logs are final is read from the store, not from the
        // core's memory, which may be ahead of what is durable: a job the core
        // already retired may still have its last events in the writer's queue.
        let store = Arc::clone(&self.store);
        // Finality first, lines second: when the log was already final, the
        // lines read after hold all of it; when it was not, the subscription
        // above delivers whatever comes after the read.
        let finished = is_final(&store, id).await?;
        let (first, pos) = read_page(&store, id, log, LogPos::line(0)).await?;
        // The job exists (checked above): no line means no log (RFC 18).
        if first.is_empty() && (finished || !req.wait_create) {
            return Err(Status::not_found(format!("job {id} has no {}", log.key())));
        }
        let (tx, out) = mpsc::channel(WATCH_BUFFER);
        let follow = req.follow && !finished;
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            let Some(next) = send_pages(&store, id, log, pos, Some(first), &tx).await else {
                return;
            };
            if follow {
                // Shutdown ends followers, so that the server can stop.
                tokio::select! {
                    _ = follow_log(rx, store, id, log, next, tx) => {}
                    _ = cancel.cancelled() => {}
                }
            }
        });
        Ok(Response::new(
            Box::pin(ReceiverStream::new(out)) as LineStream
        ))
    }

    async fn purge(
        &self,
        request: Request<pb::PurgeRequest>,
    ) -> Result<Response<pb::PurgeResponse>, Status> {
        allow(&caller(&request)?, Action::Purge, None)?;
        let req = request.into_inner();
        if req.age_limit.is_some_and(|a| !a.is_finite() || a < 0.0) {
            return Err(Status::invalid_argument(
                "age limit must be a non-negative number of seconds",
            ));
        }
        let batch = usize::try_from(req.batch).unwrap_or(usize::MAX);
        let count = ask(&self.inbox, |reply| Msg::Purge {
            age_limit: req.age_limit,
            num_limit: req.num_limit,
            force: req.force,
            batch,
            reply,
        })
        .await??;
        Ok(Response::new(pb::PurgeResponse { count }))
    }

    async fn queue(
        &self,
        request: Request<pb::QueueRequest>,
    ) -> Result<Response<pb::QueueResponse>, Status> {
        let caller = caller(&request)?;
        let req = request.into_inner();
        let action = match pb::QueueAction::try_from(req.action) {
            Ok(pb::QueueAction::Stop) => QueueAction::Stop,
            Ok(pb::QueueAction::Start) => QueueAction::Start,
            Ok(pb::QueueAction::Status) | Ok(pb::QueueAction::Unspecified) => QueueAction::Status,
            Ok(other) => {
                return Err(Status::unimplemented(format!(
                    "queue action {other:?} is not supported yet"
                )));
            }
            Err(_) => return Err(Status::invalid_argument("unknown queue action")),
        };
        let needs = match action {
            QueueAction::Status => Action::QueueStatus,
            QueueAction::Stop | QueueAction::Start => Action::QueueControl,
        };
        allow(&caller, needs, None)?;
        let status = ask(&self.inbox, |reply| Msg::Queue {
            action,
            reason: req.reason,
            reply,
        })
        .await??;
        Ok(Response::new(pb::QueueResponse {
            started: status.started,
            reason: status.reason,
        }))
    }
}

/// One page of a stored log from `from` on, and the position after it.
async fn read_page(
    store: &Arc<SqliteStore>,
    id: JobId,
    log: Log,
    from: LogPos,
) -> Result<(Vec<String>, LogPos), Status> {
    let store = Arc::clone(store);
    let page =
        tokio::task::spawn_blocking(move || store.read_log_page(id.into(), log, from, PAGE_LINES))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(Error::from)?;
    Ok(page)
}

/// Send `page` (the lines before `pos`, when given), then the stored lines
/// from `pos` on, a page at a time, so that a reader that does not read
/// holds up one page, never a copy of the whole log. The position reached,
/// or `None` once the reader is gone or a read failed (the reader was told).
async fn send_pages(
    store: &Arc<SqliteStore>,
    id: JobId,
    log: Log,
    mut pos: LogPos,
    mut page: Option<Vec<String>>,
    tx: &mpsc::Sender<Result<pb::EventlogLine, Status>>,
) -> Option<LogPos> {
    loop {
        let lines = match page.take() {
            Some(lines) => lines,
            None => match read_page(store, id, log, pos).await {
                Ok((lines, next)) => {
                    pos = next;
                    lines
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return None;
                }
            },
        };
        let more = lines.len() == PAGE_LINES;
        for line in lines {
            if tx.send(Ok(pb::EventlogLine { line })).await.is_err() {
                return None;
            }
        }
        if !more {
            return Some(pos);
        }
    }
}

/// Is the job's stored eventlog final (it ends with `clean`)?
async fn is_final(store: &Arc<SqliteStore>, id: JobId) -> Result<bool, Status> {
    let store = Arc::clone(store);
    let main = tokio::task::spawn_blocking(move || store.read_log(id.into(), Log::Main))
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(Error::from)?
        .unwrap_or_default();
    Ok(main
        .last()
        .and_then(|l| fluxgate_shared::Event::parse_json(l).ok())
        .is_some_and(|e| e.name == "clean"))
}

/// Stream published lines from position `next` until the job is inactive.
async fn follow_log(
    mut rx: broadcast::Receiver<Published>,
    store: Arc<SqliteStore>,
    id: JobId,
    log: Log,
    mut next: LogPos,
    tx: mpsc::Sender<Result<pb::EventlogLine, Status>>,
) {
    loop {
        let msg = match rx.recv().await {
            Ok(m) => m,
            Err(broadcast::error::RecvError::Lagged(_)) => {
                // Fell behind the hub: catch up from the store, then go on.
                match send_pages(&store, id, log, next, None, &tx).await {
                    Some(pos) => next = pos,
                    None => return,
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        match msg {
            Published::Line {
                id: lid,
                log: llog,
                seq,
                line,
            } if lid == id && llog == log => {
                if seq < next.line {
                    continue;
                }
                let Some(line) = line else {
                    // Too long for the hub: this line and what follows it
                    // from the store.
                    match send_pages(&store, id, log, LogPos::line(seq), None, &tx).await {
                        Some(pos) => next = pos,
                        None => return,
                    }
                    continue;
                };
                next = LogPos::line(seq + 1);
                if tx
                    .send(Ok(pb::EventlogLine {
                        line: line.to_string(),
                    }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Published::Inactive { id: lid } if lid == id => return,
            _ => {}
        }
    }
}
