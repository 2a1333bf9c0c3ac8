//! The `fluxgate.v1.Exec` service (RFC 32 shaped): Start, Kill, Exception,
//! Expiration, and Tasks (the processes of a job's tasks).
//!
//! Start always answers with a stream, even when the job cannot run: per RFC
//! 32 a transport error means "exec service dead", so a bad jobspec or R is an
//! `exception` (type `exec`, severity 0) followed by the final `release`.
//! Reattach to a job this process still runs answers `reattached` (after the
//! RFC 50 `reattach` and `re-starting` events) and continues its stream; for a
//! job it does not know it answers `exception` "job lost: ..." and `release`.
//!
//! A job over several exec services runs down a tree of them
//! ([`crate::job::tree`]): a request with `ranks` is a part of a job, sent
//! by its parent in the tree, and its `peers` are the ranks below it, which
//! it starts in turn (each exec service splitting them among at most its
//! configured `fanout` children). A part's `peers` that name its own ranks
//! are a whole job's map, as a leader that starts every part itself sends:
//! such a part starts nobody.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use fluxgate_proto::v1::exec_server::Exec;
use fluxgate_proto::v1::session_request::Request as Session;
use fluxgate_proto::v1::start_response::Response as R;
use fluxgate_proto::v1::{
    ExecException, ExecExceptionRequest, ExecExceptionResponse, ExecInputRequest,
    ExecInputResponse, ExecKillRequest, ExecKillResponse, ExecTasksRequest, ExecTasksResponse,
    ExpirationRequest, ExpirationResponse, PmiFenceRequest, PmiFenceResponse, Release,
    SessionRequest, StartRequest,
};
use fluxgate_shared::{IdSet, JobId, Jobspec, ResourceSet};

use crate::job::stdin::Chunk;
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::cgroup::Cgroups;
use crate::config::Config;
use crate::error::{ExecError, PlanError};
use crate::event::line;
use crate::job::peer::Peer;
use crate::job::procs::{self, Gathered};
use crate::job::run::{self, Launch};
use crate::job::tree;
use crate::job::{Control, JobTable, ResponseSender, ResponseStream, STREAM_CAPACITY, response};
use crate::layout::Layout;
use crate::output::Redirects;
use crate::run_as::{self, IdentityError, RunAs};
use crate::telemetry;

/// What this process is to the job manager: its address and assigned ranks.
#[derive(Debug)]
pub struct NodeState {
    /// The Exec address announced in the hello.
    pub address: String,
    ranks: RwLock<IdSet>,
    /// How this node contains jobs (`v2`, `v1` or `off`), once known.
    containment: std::sync::OnceLock<&'static str>,
}

impl NodeState {
    /// A node listening at `address`, no ranks assigned yet.
    pub fn new(address: String) -> Self {
        NodeState {
            address,
            ranks: RwLock::new(IdSet::new()),
            containment: std::sync::OnceLock::new(),
        }
    }

    /// How this node contains jobs: `v2`, `v1` (cgroups) or `off`
    /// (process groups only); empty before the service has looked.
    pub fn containment(&self) -> &'static str {
        self.containment.get().copied().unwrap_or("")
    }

    /// The ranks the job manager assigned in its last welcome.
    pub fn ranks(&self) -> IdSet {
        self.ranks.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Record a welcome's ranks.
    pub fn set_ranks(&self, ranks: IdSet) {
        *self.ranks.write().unwrap_or_else(|e| e.into_inner()) = ranks;
    }
}

/// The Exec service.
#[derive(Debug, Clone)]
pub struct ExecService {
    config: Arc<Config>,
    node: Arc<NodeState>,
    jobs: JobTable,
    shutting_down: Arc<AtomicBool>,
    credential: crate::auth::NodeCredential,
    cgroups: Arc<Cgroups>,
}

impl ExecService {
    /// A service for `config`, announced at `node.address`.
    pub fn new(config: Arc<Config>, node: Arc<NodeState>) -> Self {
        let cores = config.nodes.iter().map(|n| n.cores.count()).sum();
        let cgroups = Cgroups::init(config.cgroup.clone(), cores);
        let _ = node.containment.set(cgroups.mode());
        tracing::info!(mode = cgroups.mode(), "job containment");
        ExecService {
            cgroups,
            node,
            jobs: JobTable::default(),
            shutting_down: Arc::new(AtomicBool::new(false)),
            credential: config.node_credential.clone(),
            config,
        }
    }

    /// The jobs this process knows.
    pub fn jobs(&self) -> &JobTable {
        &self.jobs
    }

    /// True when shutdown leaves running tasks alone.
    pub fn leaves_running(&self) -> bool {
        self.config.leave_running
    }

    /// Refuse new jobs and, unless configured to leave them, terminate the
    /// running ones (they report their end on their streams as usual).
    pub async fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        if self.config.leave_running {
            return;
        }
        for job in self.jobs.all() {
            let note = format!(
                "exec service {} is shutting down: tasks terminated",
                self.node.address
            );
            // A shutdown is never refused, a full queue or not.
            let _ = job.control(Control::Shutdown(note));
        }
    }

    /// Start (or re-attach to) a job, its responses in a stream of its
    /// own; runs inside the job's span.
    fn start_job(&self, req: StartRequest) -> Result<ResponseStream, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_CAPACITY);
        self.start_job_to(req, tx)?;
        Ok(ResponseStream::new(rx))
    }

    /// Start (or re-attach to) a job, its responses into `out`; runs inside
    /// the job's span.
    fn start_job_to(&self, req: StartRequest, out: ResponseSender) -> Result<(), ExecError> {
        let id = req.id;
        if req.reattach {
            tracing::info!("reattach");
            self.reattach(id, out);
            return Ok(());
        }
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(ExecError::ShuttingDown);
        }
        let Some((job, channels)) = self.jobs.insert(id) else {
            // The job manager restarted after launching the job but before it
            // stored `start`: it asks again. Launching twice would run the tasks
            // twice, so adopt the running job and say `start` once more.
            let Some(job) = self.jobs.get(id) else {
                return Err(ExecError::AlreadyRunning(JobId::from(id)));
            };
            tracing::info!("start for a running job: adopting it");
            self.jobs
                .attach_to(&job, vec![response(id, R::Start(true))], out);
            return Ok(());
        };
        if req.ranks.is_empty() {
            self.jobs.attach_to(&job, Vec::new(), out);
        } else {
            self.jobs.attach_part(&job, out);
        }
        match self.plan(&req) {
            Ok(launch) => {
                // Per job: debug, as flux-core's job-exec logs it (at info,
                // two lines a job were a write(2) each under load).
                tracing::debug!(
                    leader = launch.leader,
                    ranks = launch.local.len(),
                    peers = launch.peers.len(),
                    "start"
                );
                metrics::counter!(telemetry::JOBS_STARTED).increment(1);
                tokio::spawn(run::run(launch, channels).in_current_span());
            }
            Err(why) => {
                let note = why.to_string();
                tracing::warn!(%note, "cannot start job");
                metrics::counter!(telemetry::START_REFUSED).increment(1);
                let ranks = if req.ranks.is_empty() {
                    "all".into()
                } else {
                    req.ranks.clone()
                };
                tokio::spawn(
                    async move {
                        let tx = channels.responses;
                        let e = ExecException {
                            severity: 0,
                            r#type: "exec".into(),
                            note,
                        };
                        let _ = tx.send(response(id, R::Exception(e))).await;
                        let rel = Release {
                            ranks,
                            r#final: true,
                        };
                        let _ = tx.send(response(id, R::Release(rel))).await;
                    }
                    .in_current_span(),
                );
            }
        }
        Ok(())
    }

    /// One request of a session: a start's responses go into `out`; what
    /// cannot be done is logged (as a refused call would be) or, for a
    /// start, answered into `out` as the job's exec exception.
    async fn session_request(&self, req: SessionRequest, out: &ResponseSender) {
        let Some(req) = req.request else {
            return;
        };
        match req {
            Session::Start(start) => {
                let id = start.id;
                let span = tracing::error_span!("job", job = %JobId::from(id));
                let ranks = if start.ranks.is_empty() {
                    "all".to_string()
                } else {
                    start.ranks.clone()
                };
                if let Err(e) = span.in_scope(|| self.start_job_to(start, out.clone())) {
                    tracing::warn!(job = %JobId::from(id), error = %e, "start refused");
                    send_refusal(out, id, e.to_string(), ranks).await;
                }
            }
            Session::Kill(k) => {
                if let Err(e) = self.kill_job(k).await {
                    tracing::warn!(error = %e, "kill refused");
                }
            }
            Session::Exception(x) => {
                if let Err(e) = self.exception_job(x).await {
                    tracing::warn!(error = %e, "exception refused");
                }
            }
            Session::Expiration(x) => {
                if let Err(e) = self.expiration_job(x).await {
                    tracing::warn!(error = %e, "expiration refused");
                }
            }
        }
    }

    /// Hand `c` to job `id`, which must be running here, without waiting:
    /// one session carries every job of the node, so no job's full queue
    /// may hold it up.
    async fn control(&self, id: u64, c: Control) -> Result<(), ExecError> {
        let job = self
            .jobs
            .get(id)
            .ok_or(ExecError::NotRunning(JobId::from(id)))?;
        job.control(c)
            .map_err(|full| ExecError::ControlQueueFull(JobId::from(id), full.0))?;
        Ok(())
    }

    /// Signal a job's tasks.
    async fn kill_job(&self, req: ExecKillRequest) -> Result<(), ExecError> {
        if !(1..=64).contains(&req.signum) {
            return Err(ExecError::BadSignal(req.signum));
        }
        self.control(req.id, Control::Signal(req.signum)).await
    }

    /// Deliver an exception to a job.
    async fn exception_job(&self, req: ExecExceptionRequest) -> Result<(), ExecError> {
        let exception = Control::Exception {
            kind: req.r#type,
            severity: req.severity,
            note: req.note,
        };
        self.control(req.id, exception).await
    }

    /// Tell a job its new expiration.
    async fn expiration_job(&self, req: ExpirationRequest) -> Result<(), ExecError> {
        self.control(req.id, Control::Expiration(req.expiration))
            .await
    }

    /// Copy an input stream to the job's local tasks and to its children in
    /// the job's tree, chunk by chunk in order.
    async fn input_job(
        &self,
        mut stream: tonic::Streaming<ExecInputRequest>,
    ) -> Result<(), Status> {
        let first = stream.message().await?.ok_or(ExecError::EmptyInput)?;
        let id = JobId::from(first.id);
        let job = self.jobs.get(first.id).ok_or(ExecError::NotRunning(id))?;
        let (local, peers) = job.procs().input_targets();
        if local.is_none() && peers.is_empty() {
            return Err(ExecError::NoInput(id).into());
        }
        let forwards: Vec<_> = peers.iter().map(|p| p.input_stream()).collect();
        let mut first_chunk = true;
        let mut next = Some(first);
        while let Some(m) = next {
            let ranks = if m.ranks.is_empty() {
                None
            } else {
                Some(m.ranks.parse::<IdSet>().map_err(|e| {
                    ExecError::InvalidArgument(format!("input ranks {:?}: {e}", m.ranks))
                })?)
            };
            for f in &forwards {
                // A peer that is gone has no tasks to feed.
                let _ = f.send(m.clone()).await;
            }
            if let Some(tx) = &local {
                let chunk = Chunk {
                    ranks,
                    data: m.data,
                    eof: m.eof,
                    others_eof: first_chunk,
                    winsize: (m.rows > 0 && m.cols > 0)
                        .then(|| (m.rows.min(0xffff) as u16, m.cols.min(0xffff) as u16)),
                };
                let _ = tx.send(chunk).await;
            }
            first_chunk = false;
            next = stream.message().await?;
        }
        Ok(())
    }

    /// The parent's answer to a PMI barrier: the union of the job's keys.
    async fn pmi_fence_job(&self, req: PmiFenceRequest) -> Result<(), ExecError> {
        let keys = (!req.failed).then(|| {
            req.keys
                .map(|k| k.kvs.into_iter().collect())
                .unwrap_or_default()
        });
        // The barrier's end must not be lost to a queue full of kills: it
        // waits its turn (the parent's call waits meanwhile), within a bound.
        let deadline = tokio::time::Instant::now() + PMI_FENCE_WAIT;
        loop {
            match self.control(req.id, Control::PmiFence(keys.clone())).await {
                Err(ExecError::ControlQueueFull(..)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                other => return other,
            }
        }
    }

    /// The processes of a job's tasks: this process's and those of its
    /// subtree in the job's tree (its children ask theirs).
    async fn tasks_job(&self, req: ExecTasksRequest) -> Result<Gathered, ExecError> {
        let id = JobId::from(req.id);
        let job = self.jobs.get(req.id).ok_or(ExecError::NotRunning(id))?;
        let snapshot = job.procs().snapshot().ok_or(ExecError::Starting(id))?;
        procs::gather(id, snapshot).await
    }

    fn plan(&self, req: &StartRequest) -> Result<Launch, PlanError> {
        let id = JobId::from(req.id);
        let jobspec = Jobspec::from_json(&req.jobspec).map_err(PlanError::Jobspec)?;
        let r = ResourceSet::parse(&req.r).map_err(PlanError::R)?;
        let layout = Layout::new(&jobspec, &r)?;
        // Test execution starts no processes, so nobody's identity is used.
        let run_as = match jobspec.test_run_duration() {
            Some(_) => None,
            None => self.identity(req.userid)?,
        };
        let leader = req.ranks.is_empty();
        let mut local = Vec::new();
        // The ranks other exec services run, below this one in the job's tree.
        let mut remote: Vec<(u32, &String)> = Vec::new();
        let not_in_r = |rank| PlanError::RankNotInR {
            rank,
            in_r: layout.rank_set().to_string(),
        };
        if !leader {
            let ranks = IdSet::parse(&req.ranks).map_err(|error| PlanError::Ranks {
                ranks: req.ranks.clone(),
                error,
            })?;
            for rank in ranks.iter() {
                local.push(layout.rank(rank).ok_or_else(|| not_in_r(rank))?.clone());
            }
            if !req.peers.keys().any(|r| ranks.contains(*r)) {
                for (&rank, address) in &req.peers {
                    layout.rank(rank).ok_or_else(|| not_in_r(rank))?;
                    remote.push((rank, address));
                }
            }
        } else if jobspec.test_run_duration().is_some() {
            // Test execution runs nothing, so the leader pretends for all ranks.
            local = layout.ranks.clone();
        } else {
            let mine = self.node.ranks();
            for rt in &layout.ranks {
                let address = req.peers.get(&rt.rank);
                if mine.contains(rt.rank) || address == Some(&self.node.address) {
                    local.push(rt.clone());
                } else if let Some(a) = address {
                    remote.push((rt.rank, a));
                } else {
                    return Err(PlanError::NoAddress(rt.rank));
                }
            }
        }
        let ca = self.config.tls_ca.as_deref();
        let peers = tree::branches(tree::members(remote), self.config.fanout)
            .iter()
            .map(|b| Peer::new(b, self.credential.clone(), ca))
            .collect::<Result<Vec<_>, _>>()?;
        let redirects = if leader {
            Redirects::from_jobspec(&jobspec, id)
        } else {
            Redirects::default()
        };
        Ok(Launch {
            id,
            userid: req.userid,
            jobspec,
            jobspec_text: req.jobspec.clone(),
            r_text: req.r.clone(),
            layout,
            leader,
            local,
            peers,
            kill_timeout: self.config.kill_timeout,
            redirects,
            run_as,
            credential: req.credential.clone(),
            instance_uri: self.config.job_manager.clone(),
            expiration: r.expiration(),
            cgroups: self.cgroups.clone(),
            tmpdir: self.config.tmpdir.clone(),
        })
    }

    /// The identity the tasks of a job owned by `userid` start with: `None`
    /// for this service's own; an error (the job's exception note) when this
    /// node may not run the job.
    fn identity(&self, userid: u32) -> Result<Option<RunAs>, IdentityError> {
        let service_uid = nix::unistd::geteuid().as_raw();
        match run_as::decide(userid, service_uid, self.config.allow_root_jobs)? {
            None => Ok(None),
            Some(uid) => run_as::lookup(uid).map(Some),
        }
    }

    fn reattach(&self, id: u64, out: ResponseSender) {
        match self.jobs.get(id) {
            Some(job) => self.jobs.reattach_to(
                &job,
                vec![
                    response(id, R::ExecEvent(line("reattach", None))),
                    response(id, R::ExecEvent(line("re-starting", None))),
                    response(id, R::Reattached(true)),
                ],
                out,
            ),
            None if let Some(tail) = self.jobs.ended(id) => {
                // It ended while no job manager stored its end: say it again.
                let mut replay = vec![
                    response(id, R::ExecEvent(line("reattach", None))),
                    response(id, R::ExecEvent(line("re-starting", None))),
                    response(id, R::Reattached(true)),
                ];
                replay.extend(tail);
                tokio::spawn(
                    async move {
                        for r in replay {
                            if out.send(Ok(r)).await.is_err() {
                                return;
                            }
                        }
                    }
                    .in_current_span(),
                );
            }
            None => {
                let note = format!(
                    "job lost: this exec service ({}) has no record of job {} (restarted since it started?)",
                    self.node.address,
                    JobId::from(id)
                );
                tokio::spawn(
                    async move { send_refusal(&out, id, note, "all".into()).await }
                        .in_current_span(),
                );
            }
        }
    }
}

/// Say on `out` that job `id` cannot run: an `exec` exception, then the
/// final release of `ranks`.
async fn send_refusal(out: &ResponseSender, id: u64, note: String, ranks: String) {
    let e = ExecException {
        severity: 0,
        r#type: "exec".into(),
        note,
    };
    let _ = out.send(Ok(response(id, R::Exception(e)))).await;
    let release = Release {
        ranks,
        r#final: true,
    };
    let _ = out.send(Ok(response(id, R::Release(release)))).await;
}

/// How long a PMI barrier's union may wait for room in a job's control queue.
const PMI_FENCE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Requests of a session not yet read while a start's responses wait: the
/// reader stops (and the job manager's writes wait) beyond this many.
const SESSION_CAPACITY: usize = 256;

#[tonic::async_trait]
impl Exec for ExecService {
    type StartStream = ResponseStream;
    type SessionStream = ResponseStream;

    async fn session(
        &self,
        request: Request<tonic::Streaming<SessionRequest>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(SESSION_CAPACITY);
        let service = self.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    m = inbound.message() => m,
                    // The job manager dropped the session: its jobs keep
                    // running until a later session reattaches.
                    _ = tx.closed() => break,
                };
                match next {
                    Ok(Some(req)) => service.session_request(req, &tx).await,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::info!(error = %e.message(), "session from the job manager ended");
                        break;
                    }
                }
            }
        });
        Ok(Response::new(ResponseStream::new(rx)))
    }

    async fn start(
        &self,
        request: Request<StartRequest>,
    ) -> Result<Response<Self::StartStream>, Status> {
        let req = request.into_inner();
        // ERROR level so the span is on whenever any line is: every line about
        // the job, here and in the tasks spawned for it, carries its id.
        let span = tracing::error_span!("job", job = %JobId::from(req.id));
        span.in_scope(|| self.start_job(req)).map(Response::new)
    }

    async fn kill(
        &self,
        request: Request<ExecKillRequest>,
    ) -> Result<Response<ExecKillResponse>, Status> {
        self.kill_job(request.into_inner()).await?;
        Ok(Response::new(ExecKillResponse {}))
    }

    async fn exception(
        &self,
        request: Request<ExecExceptionRequest>,
    ) -> Result<Response<ExecExceptionResponse>, Status> {
        self.exception_job(request.into_inner()).await?;
        Ok(Response::new(ExecExceptionResponse {}))
    }

    async fn expiration(
        &self,
        request: Request<ExpirationRequest>,
    ) -> Result<Response<ExpirationResponse>, Status> {
        self.expiration_job(request.into_inner()).await?;
        Ok(Response::new(ExpirationResponse {}))
    }

    async fn input(
        &self,
        request: Request<tonic::Streaming<ExecInputRequest>>,
    ) -> Result<Response<ExecInputResponse>, Status> {
        self.input_job(request.into_inner()).await?;
        Ok(Response::new(ExecInputResponse {}))
    }

    async fn pmi_fence(
        &self,
        request: Request<PmiFenceRequest>,
    ) -> Result<Response<PmiFenceResponse>, Status> {
        self.pmi_fence_job(request.into_inner()).await?;
        Ok(Response::new(PmiFenceResponse {}))
    }

    async fn tasks(
        &self,
        request: Request<ExecTasksRequest>,
    ) -> Result<Response<ExecTasksResponse>, Status> {
        let req = request.into_inner();
        let span = tracing::error_span!("job", job = %JobId::from(req.id));
        let gathered = self.tasks_job(req).instrument(span).await?;
        Ok(Response::new(ExecTasksResponse {
            tasks: gathered.tasks.into_iter().map(Into::into).collect(),
            usage: gathered.usage,
        }))
    }
}
