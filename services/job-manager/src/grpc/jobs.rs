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
use tracing::Instrument;

use super::submit_parse::ParseGate;
use super::{allow, ask};
use crate::auth::caller;
use crate::config::Config;
use crate::core::{
    self, Antecedents, ListFilter, Msg, QueueAction, QueueRequest, Quiet, SubmitArgs, bounds,
};
use crate::error::Error;
use crate::exec_client::ExecAccess;
use crate::hub::{Hub, Published};
use crate::policy::SitePolicy;
use crate::store::{Log, LogPos, Store};
use crate::values::{Severity, Urgency};

/// Lines buffered per watcher before the watcher's stream is back-pressured.
const WATCH_BUFFER: usize = 256;

/// Lines a watcher reads from the store at a time.
const PAGE_LINES: usize = 256;

/// Most bytes of jobs or log lines in one `Info` or `List` reply: under
/// gRPC's default 4 MiB message limit with room for the framing, so every
/// client with default settings reads every page (one reply of 220 MB once
/// raised the service's memory by 860 MB and failed every such client).
const REPLY_MAX: usize = (4 << 20) - (64 << 10);

/// The JobManager service.
#[derive(Debug, Clone)]
pub struct JobManagerService<S> {
    inbox: mpsc::Sender<Msg>,
    store: Arc<S>,
    hub: Hub,
    config: Arc<Config>,
    cancel: CancellationToken,
    /// Submitted jobspecs are read behind it, off the async workers.
    parse_gate: Arc<ParseGate>,
    /// Queues and the policy applied to submitted jobs.
    site: Arc<SitePolicy>,
    /// How exec services are called (their node credential, TLS), to ask
    /// a job's leader for its tasks.
    exec: ExecAccess,
    /// Long-lived streams open per user.
    streams: Arc<super::streams::StreamCaps>,
}

impl<S: Store> JobManagerService<S> {
    /// A service over the core's inbox, the store (reads) and the hub (watchers).
    pub fn new(
        inbox: mpsc::Sender<Msg>,
        store: Arc<S>,
        hub: Hub,
        config: Arc<Config>,
        cancel: CancellationToken,
    ) -> Self {
        JobManagerService {
            inbox,
            store,
            hub,
            cancel,
            parse_gate: Arc::new(ParseGate::per_core()),
            site: Arc::default(),
            exec: ExecAccess::default(),
            streams: super::streams::StreamCaps::new(config.limits.max_streams_per_user),
            config,
        }
    }

    /// Call exec services with `access` (the instance's node credential and
    /// exec TLS settings) when asking them for a job's tasks.
    pub fn with_exec_access(mut self, access: ExecAccess) -> Self {
        self.exec = access;
        self
    }

    /// Apply `site` (the core's, read at its start) to submitted jobs and
    /// show it in queue listings.
    pub fn with_site(mut self, site: Arc<SitePolicy>) -> Self {
        self.site = site;
        self
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

    /// Find the stored jobs that earlier tries of these submissions made
    /// (same owner and idempotency key): a retry answers that job.
    async fn read_prior(&self, jobs: &mut [SubmitArgs]) -> Result<(), Error> {
        let wanted: Vec<(usize, u32, String)> = jobs
            .iter()
            .enumerate()
            .filter_map(|(i, j)| Some((i, j.userid, j.key.clone()?)))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let store = Arc::clone(&self.store);
        let found = tokio::task::spawn_blocking(move || {
            wanted
                .into_iter()
                .map(|(i, uid, key)| store.job_by_key(uid, &key).map(|id| (i, id)))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| Error::Unavailable(format!("reading idempotency keys: {e}")))??;
        for (i, id) in found {
            jobs[i].prior = id.map(JobId::from);
        }
        Ok(())
    }

    /// Read the stored jobs that submissions' dependencies name, so the
    /// core decides them without reading the store on its task.
    async fn read_antecedents(&self, jobs: &mut [SubmitArgs]) -> Result<(), Error> {
        let wanted: Vec<(usize, Arc<Jobspec>)> = jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| Antecedents::needed(&j.jobspec))
            .map(|(i, j)| (i, Arc::clone(&j.jobspec)))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let store = Arc::clone(&self.store);
        let read = tokio::task::spawn_blocking(move || {
            wanted
                .into_iter()
                .map(|(i, spec)| Antecedents::read(&*store, &spec).map(|a| (i, a)))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(|e| Error::Unavailable(format!("reading dependencies: {e}")))??;
        for (i, antecedents) in read {
            jobs[i].antecedents = antecedents;
        }
        Ok(())
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

    async fn raise(
        &self,
        caller: &Caller,
        id: u64,
        kind: &str,
        severity: u32,
        note: String,
    ) -> Result<(), Error> {
        let severity = Severity::new(severity)?;
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
impl<S: Store> JobManager for JobManagerService<S> {
    async fn submit(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        let caller = caller(&request)?;
        let max = self.config.limits.max_jobspec_bytes;
        let mut args = self
            .parse_gate
            .parse_one(request.into_inner(), &caller, max, &self.site)
            .await?;
        self.read_prior(std::slice::from_mut(&mut args)).await?;
        self.read_antecedents(std::slice::from_mut(&mut args))
            .await?;
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
        // Parse every jobspec here, off the core and off the async workers;
        // bad ones are answered alone.
        let max_bytes = self.config.limits.max_jobspec_bytes;
        let parsed: Vec<Result<SubmitArgs, Error>> = self
            .parse_gate
            .parse_many(jobs, &caller, max_bytes, &self.site)
            .await?;
        let mut good: Vec<SubmitArgs> = parsed
            .iter()
            .filter_map(|r| r.as_ref().ok().cloned())
            .collect();
        self.read_prior(&mut good).await?;
        self.read_antecedents(&mut good).await?;
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
        bounds::check_note("cancel note", &req.note)?;
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
        bounds::check_note("exception note", &req.note)?;
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
        let urgency = Urgency::new(req.urgency)?;
        self.authorize(&caller, Action::SetUrgency(urgency.get()), req.id)
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
        bounds::check_memo_request(&req.memo)?;
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
        let reply = tokio::task::spawn_blocking(move || -> Result<_, Error> {
            let job = store.read_job(id.into())?.ok_or(Error::UnknownJob(id))?;
            allow(&caller, Action::ReadJob, Some(job.userid))?;
            let asked = usize::try_from(req.max_bytes).unwrap_or(usize::MAX);
            let mut budget = if asked == 0 { REPLY_MAX } else { asked.min(REPLY_MAX) };
            let mut reply = pb::InfoResponse::default();
            for key in req.keys {
                let value = match key.as_str() {
                    "jobspec" => job.jobspec.clone(),
                    "R" => job.r.clone().ok_or_else(|| {
                        Error::WrongState(format!("job {id} has no R (it was never allocated)"))
                    })?,
                    "usage" => crate::core::usage::stored(&*store, id)?
                        .and_then(|u| serde_json::to_string(&u).ok())
                        .ok_or_else(|| {
                            Error::WrongState(format!(
                                "job {id} has no usage: it has not ended, or its nodes do \
                                 not contain jobs in cgroups"
                            ))
                        })?,
                    other => {
                        let log = Log::from_key(other).ok_or_else(|| {
                            Error::Invalid(format!(
                                "unknown key {other:?}: expected jobspec, R, eventlog, exec.eventlog, output or usage"
                            ))
                        })?;
                        let page = read_log_bytes(&*store, id, log, req.offset, budget)?;
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
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(reply))
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
            before: (req.before != 0).then(|| JobId::from(req.before)),
            max_bytes: REPLY_MAX,
            queue: req.queue,
        };
        let query = filter.clone();
        let (rows, cut) = list_rows(&self.inbox, &self.store, filter).await?;
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
        if query.max > 0 && jobs.len() >= query.max {
            more = false;
        }
        let next = match jobs.last() {
            Some(last) if more => last.id,
            _ => 0,
        };
        Ok(Response::new(pb::ListResponse { jobs, next }))
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
        let permit = self.streams.open(&caller)?;
        let log = Log::from_key(&req.name).ok_or_else(|| {
            Status::invalid_argument(format!(
                "unknown eventlog {:?}: expected eventlog, exec.eventlog or output",
                req.name
            ))
        })?;
        // Subscribe before the first read, so nothing falls between them.
        let rx = self.hub.subscribe();
        let following = self.hub.follow(id);
        ask(&self.inbox, |reply| Msg::Lookup { id, reply })
            .await??
            .ok_or(Error::UnknownJob(id))?;
        // Whether the logs are final is read from the store, not from the
        // core's memory, which may be ahead of what is durable: a job the core
        // already retired may still have its last events in the writer's queue.
        let store = Arc::clone(&self.store);
        // A watcher resuming (after a failover) starts after what it saw.
        let (finished, first, pos) =
            final_and_first_page(&store, id, log, LogPos::line(req.from_line)).await?;
        // The job exists (checked above): no line means no log (RFC 18),
        // unless the watcher saw lines before.
        if first.is_empty() && req.from_line == 0 && (finished || !req.wait_create) {
            return Err(Status::not_found(format!("job {id} has no {}", log.key())));
        }
        let (tx, out) = mpsc::channel(WATCH_BUFFER);
        let follow = req.follow && !finished;
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            let (_following, _permit) = (following, permit);
            let Some(next) = send_pages(&store, id, log, pos, Some(first), &tx).await else {
                return;
            };
            if follow {
                // Shutdown ends followers, so that the server can stop; a
                // caller gone ends its follower at once, not at the job's
                // next event.
                let gone = tx.clone();
                tokio::select! {
                    _ = follow_log(rx, store, id, log, next, tx) => {}
                    _ = cancel.cancelled() => {}
                    _ = gone.closed() => {}
                }
            }
        });
        Ok(Response::new(
            Box::pin(ReceiverStream::new(out)) as LineStream
        ))
    }

    async fn tasks(
        &self,
        request: Request<pb::TasksRequest>,
    ) -> Result<Response<pb::TasksResponse>, Status> {
        let caller = caller(&request)?;
        let id = JobId::from(request.get_ref().id);
        // ERROR level so the span is on whenever any line is, as the core's.
        let span = tracing::error_span!("job", job = %id);
        async {
            // Where a job's tasks run and their pids are the job's own, as
            // its eventlogs are: its owner's and the instance owner's.
            self.authorize(&caller, Action::ReadJob, id.into()).await?;
            let answer = super::tasks::list(&self.inbox, &self.exec, id).await?;
            Ok(Response::new(answer))
        }
        .instrument(span)
        .await
    }

    async fn input(
        &self,
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
            self.authorize(&caller, Action::Kill, id.into()).await?;
            super::tasks::input(&self.inbox, &self.exec, id, first, stream).await?;
            Ok(Response::new(pb::InputResponse {}))
        }
        .instrument(span)
        .await
    }

    type JournalStream = super::job_journal::EntryStream;

    async fn journal(
        &self,
        request: Request<pb::JobJournalRequest>,
    ) -> Result<Response<Self::JournalStream>, Status> {
        let caller = caller(&request)?;
        // The journal is a live listing: whoever may list may read it, and
        // each entry is cut to what that caller's List would show.
        allow(&caller, Action::ListJobs, None)?;
        let permit = self.streams.open(&caller)?;
        let journal = super::job_journal::JobJournal {
            inbox: self.inbox.clone(),
            store: Arc::clone(&self.store),
            hub: self.hub.clone(),
            caller,
        };
        Ok(Response::new(journal.start(self.cancel.clone(), permit)))
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
        let quiet = match pb::QueueAction::try_from(req.action) {
            Ok(pb::QueueAction::Idle) => Some(Quiet::Idle),
            Ok(pb::QueueAction::Drain) => Some(Quiet::Drained),
            _ => None,
        };
        if let Some(what) = quiet {
            // As status: anyone who may see the queues may wait on them.
            allow(&caller, Action::QueueStatus, None)?;
            ask(&self.inbox, |reply| Msg::Quiesce { what, reply }).await??;
        }
        let action = match pb::QueueAction::try_from(req.action) {
            Ok(pb::QueueAction::Idle | pb::QueueAction::Drain) => QueueAction::Status,
            Ok(pb::QueueAction::Stop) => QueueAction::Stop,
            Ok(pb::QueueAction::Start) => QueueAction::Start,
            Ok(pb::QueueAction::Enable) => QueueAction::Enable,
            Ok(pb::QueueAction::Disable) => QueueAction::Disable,
            Ok(pb::QueueAction::Status) | Ok(pb::QueueAction::Unspecified) => QueueAction::Status,
            Err(_) => return Err(Status::invalid_argument("unknown queue action")),
        };
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
        let statuses = ask(&self.inbox, |reply| Msg::Queue { request, reply }).await??;
        let queues: Vec<pb::QueueInfo> = statuses
            .into_iter()
            .map(|s| queue_info(&self.site, s))
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

    async fn accounting(
        &self,
        request: Request<pb::AccountingRequest>,
    ) -> Result<Response<pb::AccountingResponse>, Status> {
        // As listing: every user may see every association's usage.
        allow(&caller(&request)?, Action::ListJobs, None)?;
        let rows = ask(&self.inbox, |reply| Msg::Accounts { reply }).await?;
        Ok(Response::new(pb::AccountingResponse {
            enabled: self.site.accounting.is_some(),
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

/// The rows of a listing: the core's active jobs and the store's inactive
/// ones, merged; and whether more rows match than the filter's bounds let in.
pub(super) async fn list_rows<S: Store>(
    inbox: &mpsc::Sender<Msg>,
    store: &Arc<S>,
    filter: ListFilter,
) -> Result<(Vec<core::JobInfo>, bool), Status> {
    let wants_inactive = filter.wants_inactive();
    let query = filter.clone();
    let active = ask(inbox, |reply| Msg::List { filter, reply }).await?;
    let stored = if wants_inactive {
        let store = Arc::clone(store);
        let q = query.clone();
        tokio::task::spawn_blocking(move || core::stored_inactive(&*store, &q))
            .await
            .map_err(|e| Status::internal(format!("listing failed: {e}")))?
            .map_err(Error::from)?
    } else {
        Vec::new()
    };
    Ok(core::merge_listings(active, stored, &query))
}

/// The wire form of a listing row.
pub(super) fn summary_of(j: core::JobInfo) -> pb::JobSummary {
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

/// One page of a stored log from `from` on, and the position after it.
async fn read_page<S: Store>(
    store: &Arc<S>,
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
async fn send_pages<S: Store>(
    store: &Arc<S>,
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

/// Whether the job's stored eventlog is final (it ends with `clean`), and
/// the first page of `log` from `from`, in one trip off the runtime.
/// Finality first, lines second: when the log was already final, the lines
/// read after hold all of it; when it was not, a subscription made before
/// this call delivers whatever comes after the read.
async fn final_and_first_page<S: Store>(
    store: &Arc<S>,
    id: JobId,
    log: Log,
    from: LogPos,
) -> Result<(bool, Vec<String>, LogPos), Status> {
    let store = Arc::clone(store);
    let read = tokio::task::spawn_blocking(move || {
        let main = store.read_log(id.into(), Log::Main)?.unwrap_or_default();
        let finished = main
            .last()
            .and_then(|l| fluxgate_shared::Event::parse_json(l).ok())
            .is_some_and(|e| e.name == "clean");
        let (lines, next) = store.read_log_page(id.into(), log, from, PAGE_LINES)?;
        Ok::<_, crate::store::StoreError>((finished, lines, next))
    })
    .await
    .map_err(|e| Status::internal(e.to_string()))?
    .map_err(Error::from)?;
    Ok(read)
}

/// Stream published lines from position `next` until the job is inactive.
async fn follow_log<S: Store>(
    mut rx: broadcast::Receiver<Published>,
    store: Arc<S>,
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
