//! Jobs this process runs, and the stream of RFC 32 responses each produces.
//!
//! A job's driver ([`run`]) writes its responses into a bounded channel that
//! belongs to the job, not to the gRPC call that started it. A forwarder copies
//! them to the current caller. When the caller goes away (the job manager
//! restarted) the job keeps running, its channel fills and backpressure stalls
//! the task output until a `Start` with `reattach` takes the channel over and
//! forwarding resumes where it stopped. While the driver waits on a full
//! channel it does not read its control requests either, so a Kill or a
//! shutdown reaches such a job only once someone reads its responses again;
//! its senders never wait for it ([`control`]). The entry leaves the table once its
//! last response (`release` final) has been handed on; its last few
//! responses are kept a while longer ([`ended`]), for a job manager that
//! died before it stored them. Each job also keeps the record of its tasks'
//! processes ([`procs`]) that `Exec.Tasks` answers from.
//!
//! A job spread over several exec services runs down a tree of them
//! ([`tree`]): each starts its children ([`peer`]) and answers for its
//! subtree. A part of a job whose caller (its parent in the tree) goes
//! away before the part has ended is torn down: nobody would hear its end,
//! and nobody else can reach it to end it.

pub mod contain;
pub mod control;
pub mod ended;
pub mod peer;
pub mod procs;
pub mod pty;
pub mod run;
pub mod stdin;
pub mod tree;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use fluxgate_proto::v1::{StartResponse, start_response::Response};
use tokio::sync::{mpsc, watch};
use tonic::Status;

use self::control::{ControlQueue, QueueFull};
use self::procs::Procs;

/// Responses buffered per job while nobody is reading.
pub const RESPONSE_CAPACITY: usize = 1024;
/// Responses queued towards one gRPC caller.
pub const STREAM_CAPACITY: usize = 4;
/// Kill and exception requests queued for one job.
const CONTROL_CAPACITY: usize = 64;

/// A request to a running job.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Forward a signal to the tasks (Exec.Kill).
    Signal(i32),
    /// A job exception; severity 0 tears the job down.
    Exception {
        /// RFC 21 exception type.
        kind: String,
        /// Severity (0 fatal).
        severity: u32,
        /// Free text.
        note: String,
    },
    /// The job's R expiration changed.
    Expiration(f64),
    /// The exec service is stopping: report an `exec` exception with this
    /// note and tear the job down.
    Shutdown(String),
    /// The exec service was cut off from its job manager past its fence:
    /// report a `node-failure` exception with this note and kill the tasks
    /// at once (their resources are about to be given to other jobs).
    Fence(String),
    /// The union of the job's PMI keys for the current barrier, handed
    /// down by this part's parent in the job's tree (`None`: the exchange
    /// failed).
    PmiFence(Option<fluxgate_shared::pmi::Dict>),
}

/// What is left of a job's response stream while no caller holds it.
#[derive(Debug)]
struct Responses {
    rx: mpsc::Receiver<StartResponse>,
    /// A response taken from `rx` that its caller never received.
    pending: Option<StartResponse>,
    /// The last responses handed on.
    tail: VecDeque<StartResponse>,
}

/// A job known to this process.
#[derive(Debug)]
pub struct JobHandle {
    id: u64,
    control: ControlQueue,
    responses: Arc<tokio::sync::Mutex<Responses>>,
    /// Bumped by every reattach, so the previous forwarder lets go.
    generation: watch::Sender<u64>,
    /// The processes of its tasks, as its driver launches them.
    procs: Arc<Procs>,
}

impl JobHandle {
    /// The job's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Queue a control request without waiting; `Ok(false)` when the job
    /// has already finished, `Err` when its queue is full.
    pub fn control(&self, c: Control) -> Result<bool, QueueFull> {
        self.control.send(c)
    }

    /// The processes of the job's tasks.
    pub fn procs(&self) -> &Procs {
        &self.procs
    }
}

/// The jobs of this process, by id.
#[derive(Debug, Clone, Default)]
pub struct JobTable {
    jobs: Arc<Mutex<HashMap<u64, Arc<JobHandle>>>>,
    ended: Arc<ended::Ended>,
}

/// The ends of a new job's channels, and its record of processes, that its
/// driver needs.
#[derive(Debug)]
pub struct JobChannels {
    /// Where the driver writes responses.
    pub responses: mpsc::Sender<StartResponse>,
    /// Where it reads control requests.
    pub control: mpsc::Receiver<Control>,
    /// Where it records the processes of the tasks it launches.
    pub procs: Arc<Procs>,
}

/// The response stream handed to tonic.
pub type ResponseStream = tokio_stream::wrappers::ReceiverStream<Result<StartResponse, Status>>;

/// Where a job's responses are forwarded: its own stream's, or a session's.
pub type ResponseSender = mpsc::Sender<Result<StartResponse, Status>>;

impl JobTable {
    /// Register a new job; `None` when one with that id is already known.
    pub fn insert(&self, id: u64) -> Option<(Arc<JobHandle>, JobChannels)> {
        let mut jobs = self.lock();
        if jobs.contains_key(&id) {
            return None;
        }
        let (tx, rx) = mpsc::channel(RESPONSE_CAPACITY);
        let (ctl_tx, ctl_rx) = ControlQueue::new(CONTROL_CAPACITY);
        let procs = Arc::new(Procs::default());
        let handle = Arc::new(JobHandle {
            id,
            control: ctl_tx,
            responses: Arc::new(tokio::sync::Mutex::new(Responses {
                rx,
                pending: None,
                tail: VecDeque::new(),
            })),
            generation: watch::Sender::new(0),
            procs: Arc::clone(&procs),
        });
        jobs.insert(id, handle.clone());
        metrics::gauge!(crate::telemetry::JOBS_RUNNING).set(jobs.len() as f64);
        Some((
            handle,
            JobChannels {
                responses: tx,
                control: ctl_rx,
                procs,
            },
        ))
    }

    /// The job with `id`, if known.
    pub fn get(&self, id: u64) -> Option<Arc<JobHandle>> {
        self.lock().get(&id).cloned()
    }

    /// The last responses of job `id`, if it ended lately.
    pub fn ended(&self, id: u64) -> Option<Vec<StartResponse>> {
        self.ended.get(id)
    }

    /// All known jobs.
    pub fn all(&self) -> Vec<Arc<JobHandle>> {
        self.lock().values().cloned().collect()
    }

    /// The ids of the jobs running here, and of those that ended and whose
    /// end is kept, as a hello lists them.
    pub fn known_ids(&self) -> (Vec<u64>, Vec<u64>) {
        let mut running: Vec<u64> = self.lock().keys().copied().collect();
        running.sort_unstable();
        let mut ended: Vec<u64> = self
            .ended
            .ids()
            .into_iter()
            .filter(|id| running.binary_search(id).is_err())
            .collect();
        ended.sort_unstable();
        (running, ended)
    }

    /// Number of known jobs.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when no job is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn remove(&self, id: u64) {
        let mut jobs = self.lock();
        jobs.remove(&id);
        metrics::gauge!(crate::telemetry::JOBS_RUNNING).set(jobs.len() as f64);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<JobHandle>>> {
        // A panic elsewhere while holding the lock leaves the map itself intact.
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Follow the job's responses from now on, after `prelude`; a previous
    /// follower is detached first.
    pub fn attach(&self, job: &Arc<JobHandle>, prelude: Vec<StartResponse>) -> ResponseStream {
        let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
        self.attach_to(job, prelude, tx);
        ResponseStream::new(rx)
    }

    /// As [`JobTable::attach`], into `out`, a stream shared with other jobs
    /// (a session): the job's responses are forwarded there until it ends,
    /// `out` closes, or a later attach takes over.
    pub fn attach_to(
        &self,
        job: &Arc<JobHandle>,
        prelude: Vec<StartResponse>,
        out: ResponseSender,
    ) {
        self.follow(job, prelude, Follow::Start, out);
    }

    /// As [`JobTable::attach_to`] for a part of a job started by its parent
    /// in the job's tree: should `out` close before the job has ended, the
    /// job is torn down and its responses are dropped.
    pub fn attach_part(&self, job: &Arc<JobHandle>, out: ResponseSender) {
        self.follow(job, Vec::new(), Follow::Part, out);
    }

    /// As [`JobTable::attach_to`] for a job manager that reattaches: the
    /// job's end (finish, release) already sent to the one before it is
    /// said again, as that one may have died before storing it.
    pub fn reattach_to(
        &self,
        job: &Arc<JobHandle>,
        prelude: Vec<StartResponse>,
        out: ResponseSender,
    ) {
        self.follow(job, prelude, Follow::Reattach, out);
    }

    fn follow(
        &self,
        job: &Arc<JobHandle>,
        prelude: Vec<StartResponse>,
        how: Follow,
        out: ResponseSender,
    ) {
        let mut generation = 0;
        job.generation.send_modify(|g| {
            *g += 1;
            generation = *g;
        });
        let f = Follower {
            table: self.clone(),
            job: job.clone(),
            generation,
            how,
        };
        tokio::spawn(forward(f, prelude, out));
    }
}

/// Who follows a job's responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Follow {
    /// The job manager, or a test, that started the job.
    Start,
    /// A job manager that reattaches: the job's end is said again.
    Reattach,
    /// The parent of a part in the job's tree.
    Part,
}

/// Who forwards a job's responses, and how.
struct Follower {
    table: JobTable,
    job: Arc<JobHandle>,
    generation: u64,
    how: Follow,
}

/// The exception that tears down a part whose parent went away.
fn orphaned() -> Control {
    Control::Exception {
        kind: "exec".into(),
        severity: 0,
        note: "lost the exec service that started this part of the job".into(),
    }
}

/// A part's parent is gone: end the part, and drop what it still says
/// (its driver must never wait on a full channel while its tasks are
/// being killed).
async fn orphan(
    table: JobTable,
    job: Arc<JobHandle>,
    mut responses: tokio::sync::OwnedMutexGuard<Responses>,
) {
    tracing::warn!("the parent of this part of the job went away: tearing it down");
    if let Err(full) = job.control(orphaned()) {
        tracing::warn!(
            queued = full.0,
            "cannot tear down the part: its queue is full"
        );
    }
    responses.pending = None;
    while responses.rx.recv().await.is_some() {}
    table.remove(job.id);
}

async fn forward(
    f: Follower,
    prelude: Vec<StartResponse>,
    out: mpsc::Sender<Result<StartResponse, Status>>,
) {
    let Follower {
        table,
        job,
        generation,
        how,
    } = f;
    let mut stolen = job.generation.subscribe();
    let mut responses = tokio::select! {
        r = job.responses.clone().lock_owned() => r,
        _ = stolen.wait_for(|g| *g > generation) => return,
    };
    // What of the end was already sent: the job manager ignores what it
    // has stored, and gets what died with its predecessor.
    let again: Vec<StartResponse> = if how == Follow::Reattach {
        responses
            .tail
            .iter()
            .filter(|m| matches!(m.response, Some(Response::Finish(_) | Response::Release(_))))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    for p in prelude.into_iter().chain(again) {
        if out.send(Ok(p)).await.is_err() {
            return;
        }
    }
    loop {
        let msg = match responses.pending.take() {
            Some(m) => Some(m),
            None => tokio::select! {
                m = responses.rx.recv() => match m {
                    Some(m) => Some(m),
                    None => {
                        table.remove(job.id);
                        table.ended.keep(job.id, responses.tail.drain(..).collect());
                        return;
                    }
                },
                _ = out.closed() => None,
                _ = stolen.wait_for(|g| *g > generation) => return,
            },
        };
        let Some(msg) = msg else {
            if how == Follow::Part {
                orphan(table, job, responses).await;
            }
            return;
        };
        let permit = tokio::select! {
            p = out.reserve() => p.ok(),
            _ = stolen.wait_for(|g| *g > generation) => None,
        };
        match permit {
            Some(p) => {
                // A replay follows a reattach: the launch is not said again.
                let launch = matches!(
                    msg.response,
                    Some(Response::Start(_) | Response::Reattached(_))
                );
                if !launch {
                    if responses.tail.len() == ended::TAIL {
                        responses.tail.pop_front();
                    }
                    responses.tail.push_back(msg.clone());
                }
                p.send(Ok(msg))
            }
            None => {
                responses.pending = Some(msg);
                if how == Follow::Part && out.is_closed() {
                    orphan(table, job, responses).await;
                }
                return;
            }
        }
    }
}

/// Build a response for job `id`.
pub fn response(id: u64, r: Response) -> StartResponse {
    StartResponse {
        id,
        response: Some(r),
    }
}
