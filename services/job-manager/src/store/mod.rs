//! The durable store: every event is on disk before anyone sees it.
//!
//! Writes are batched: callers hand a [`Batch`] to the store and wait for its
//! acknowledgement; one writer thread takes every batch that is waiting, applies
//! each in its own savepoint (a bad batch fails alone) and commits them together
//! with one fsync (group commit). Under load many events share one commit; alone,
//! a batch is committed at once.
//!
//! The store is a trait so that a replicated backend can replace the embedded
//! SQLite one without touching the job pipeline.

mod any;
pub mod memory;
pub mod postgres;
mod recent;
mod schema;
mod sqlite;
mod writer;

use std::collections::HashMap;
use std::future::Future;

pub use any::AnyStore;
pub use memory::MemoryStore;
pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// The per-job eventlogs the store keeps (RFC 16 key names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Log {
    /// `eventlog`: the RFC 21 job eventlog.
    Main,
    /// `exec.eventlog`: the RFC 50 exec eventlog.
    Exec,
    /// `output`: the RFC 24 output eventlog.
    Output,
    /// `usage`: what the job used on its nodes, one JSON document
    /// (`fluxgate_shared::job::usage`) a line, the last one current. Not an
    /// eventlog: never watched, read whole.
    Usage,
}

impl Log {
    /// The RFC 16 key name.
    pub fn key(self) -> &'static str {
        match self {
            Log::Main => "eventlog",
            Log::Exec => "exec.eventlog",
            Log::Output => "output",
            Log::Usage => "usage",
        }
    }

    /// Parse an RFC 16 eventlog key name (`usage` is no eventlog).
    pub fn from_key(key: &str) -> Option<Log> {
        match key {
            "eventlog" => Some(Log::Main),
            "exec.eventlog" => Some(Log::Exec),
            "output" => Some(Log::Output),
            _ => None,
        }
    }

    fn code(self) -> i64 {
        match self {
            Log::Main => 0,
            Log::Exec => 1,
            Log::Output => 2,
            Log::Usage => 3,
        }
    }
}

/// One change to the store. A [`Batch`] of them is atomic.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A new job with its jobspec (JSON text) and owner; fails if the id exists.
    NewJob {
        id: u64,
        userid: u32,
        jobspec: String,
    },
    /// Append one RFC 18 line (no trailing newline) to a job's log.
    Append { id: u64, log: Log, line: String },
    /// Record the job's R (JSON text) once allocated.
    SetR { id: u64, r: String },
    /// Append one RFC 18 line to the persistent resource eventlog.
    ResourceEvent { line: String },
    /// Set an instance-wide value (e.g. the last job id issued).
    Meta { key: String, value: String },
    /// Remove an inactive job and all its logs.
    Purge { id: u64 },
    /// Record an inactive job's summary (JSON text), so a restart lists it
    /// without replaying its eventlog or parsing its jobspec.
    Summary { id: u64, summary: String },
    /// Replace the whole persistent resource eventlog by a checkpoint of it.
    ReplaceResourceEventlog { lines: Vec<String> },
    /// Record the key the submitter chose for a new job, so that a retried
    /// submit finds the job instead of making a second one.
    IdempotencyKey { id: u64, key: String },
}

impl Write {
    /// About how many bytes the write holds in memory until it is durable.
    pub fn size(&self) -> usize {
        match self {
            Write::NewJob { jobspec, .. } => jobspec.len(),
            Write::Append { line, .. } | Write::ResourceEvent { line } => line.len(),
            Write::SetR { r, .. } => r.len(),
            Write::Meta { key, value } => key.len() + value.len(),
            Write::Purge { .. } => 0,
            Write::Summary { summary, .. } => summary.len(),
            Write::ReplaceResourceEventlog { lines } => lines.iter().map(String::len).sum(),
            Write::IdempotencyKey { key, .. } => key.len(),
        }
    }
}

/// A position in a job's log: its line number, and where that line is
/// stored once a page has been read (so that the next page is an index
/// seek, not a count of every line before it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogPos {
    /// Lines before this position.
    pub line: u64,
    /// Storage key of the row the last line read came from, when known.
    after: Option<i64>,
    /// Lines of that row already read, when it holds more (0: all of it).
    taken: u32,
}

impl LogPos {
    /// The position before line `line` (0-based).
    pub fn line(line: u64) -> LogPos {
        LogPos {
            line,
            after: None,
            taken: 0,
        }
    }
}

/// Writes that become durable together.
pub type Batch = Vec<Write>;

/// What can go wrong with the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store file cannot be opened or is damaged; the instance must not start.
    #[error("store {path}: {reason}")]
    Open { path: String, reason: String },
    /// A batch names a job that already exists.
    #[error("job {0} already exists in the store")]
    Duplicate(u64),
    /// A batch names a job the store does not hold.
    #[error("job {0} is not in the store")]
    UnknownJob(u64),
    /// The disk or database refused the write; nothing of the batch was kept.
    #[error("store write failed: {0}")]
    Write(String),
    /// A read failed.
    #[error("store read failed: {0}")]
    Read(String),
    /// The writer has stopped (shutdown or a fatal error).
    #[error("the store is closed")]
    Closed,
    /// Another job manager took the lead: this one must not write again.
    #[error("deposed: {0}")]
    Deposed(String),
}

/// Counters of the group commit, for metrics and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed (one fsync each).
    pub commits: u64,
    /// Batches acknowledged.
    pub batches: u64,
    /// Individual writes applied.
    pub writes: u64,
}

/// A job as stored, for recovery and for reads of inactive jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredJob {
    /// Job id.
    pub id: u64,
    /// Owner.
    pub userid: u32,
    /// Jobspec JSON text.
    pub jobspec: String,
    /// R JSON text, once allocated.
    pub r: Option<String>,
    /// Main eventlog lines, in order.
    pub eventlog: Vec<String>,
    /// The inactive job's summary (JSON text), once it has one.
    pub summary: Option<String>,
}

/// When a batch must reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// Someone waits for it (a reply, a task's start, a watcher): commit at once.
    Now,
    /// Nobody waits for it: it may ride the next group commit.
    Lazy,
}

/// The answer to one enqueued batch: resolves once the batch is on disk.
#[derive(Debug)]
pub struct Ack(tokio::sync::oneshot::Receiver<Result<(), StoreError>>);

impl Ack {
    /// Wait until the batch is durable (or failed, leaving nothing of it).
    pub async fn wait(self) -> Result<(), StoreError> {
        self.0.await.map_err(|_| StoreError::Closed)?
    }
}

/// A durable home for jobs, their eventlogs and the resource eventlog.
pub trait Store: Send + Sync + 'static {
    /// Hand `batch` to the writer; resolves once it is queued (in call order),
    /// giving the [`Ack`] that resolves once it is durable. Waits while the
    /// writer's queue is full. A lazy batch may wait for company before its
    /// commit (2 ms at most); an urgent one takes it along.
    fn enqueue_with(
        &self,
        batch: Batch,
        urgency: Urgency,
    ) -> impl Future<Output = Result<Ack, StoreError>> + Send;
    /// [`Self::enqueue_with`] for a batch someone waits for.
    fn enqueue(&self, batch: Batch) -> impl Future<Output = Result<Ack, StoreError>> + Send {
        self.enqueue_with(batch, Urgency::Now)
    }
    /// Make `batch` durable; resolves once it is on disk (or failed, leaving nothing).
    fn commit(&self, batch: Batch) -> impl Future<Output = Result<(), StoreError>> + Send {
        let queued = self.enqueue(batch);
        async move { queued.await?.wait().await }
    }
    /// Job `id`'s jobspec if it is at hand in memory, which lets it go: an
    /// answer without blocking, for the start request (which needs it once;
    /// see [`Self::jobspec`] otherwise).
    fn take_recent_jobspec(&self, _id: u64) -> Option<String> {
        None
    }
    /// Every line of one job's log, in order; `None` if the job or log does not exist.
    fn read_log(&self, id: u64, log: Log) -> Result<Option<Vec<String>>, StoreError>;
    /// Up to `limit` lines of one job's log from `from` on, in order, and the
    /// position after them: a reader of a long log holds one page at a time.
    fn read_log_page(
        &self,
        id: u64,
        log: Log,
        from: LogPos,
        limit: usize,
    ) -> Result<(Vec<String>, LogPos), StoreError>;
    /// How many lines one job's log holds (0 when it has none).
    fn log_len(&self, id: u64, log: Log) -> Result<u64, StoreError>;
    /// The exec and output log lengths of every job [`Store::load_jobs`]
    /// gives, in one read, where that is cheaper than one read per job
    /// (a database across the network); `None`: ask [`Store::log_len`].
    fn active_log_lens(&self) -> Result<Option<HashMap<u64, [u64; 2]>>, StoreError> {
        Ok(None)
    }
    /// A job's jobspec (JSON text).
    fn jobspec(&self, id: u64) -> Result<Option<String>, StoreError>;
    /// A job's jobspec and R.
    fn read_job(&self, id: u64) -> Result<Option<StoredJob>, StoreError>;
    /// Every stored job that is not known inactive (no readable summary
    /// time), in id order, with its jobspec, R, main eventlog and whatever
    /// summary it has: what recovery replays. Inactive jobs stay in the store.
    fn load_jobs(&self) -> Result<Vec<StoredJob>, StoreError>;
    /// Is job `id` stored, and with what summary: `None` when it is not,
    /// `Some(None)` while it has no summary (it is active).
    fn summary(&self, id: u64) -> Result<Option<Option<String>>, StoreError>;
    /// The largest job id stored (ids compare as unsigned).
    fn max_job_id(&self) -> Result<Option<u64>, StoreError>;
    /// How many stored jobs are inactive.
    fn inactive_count(&self) -> Result<u64, StoreError>;
    /// How many stored jobs became inactive before `t`.
    fn inactive_before(&self, t: f64) -> Result<u64, StoreError>;
    /// The `limit` oldest inactive jobs, by the time each became inactive
    /// (ties in id order): `(t_inactive, id)`.
    fn oldest_inactive(&self, limit: usize) -> Result<Vec<(f64, u64)>, StoreError>;
    /// Ids of the inactive jobs not yet reaped by `Wait`, in id order.
    fn waitable_ids(&self) -> Result<Vec<u64>, StoreError>;
    /// Visit inactive jobs, newest id first, with their summary; only those
    /// of `userid` and inactive since `since` when given. Stops when `visit`
    /// answers false.
    fn scan_inactive(
        &self,
        userid: Option<u32>,
        since: Option<f64>,
        visit: &mut dyn FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        self.scan_inactive_below(userid, since, None, visit)
    }
    /// As [`Store::scan_inactive`], starting below id `before` when given:
    /// a listing's later pages seek there instead of visiting every newer job.
    fn scan_inactive_below(
        &self,
        userid: Option<u32>,
        since: Option<f64>,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError>;
    /// The persistent resource eventlog, in order.
    fn resource_eventlog(&self) -> Result<Vec<String>, StoreError>;
    /// An instance-wide value.
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// The job `userid` submitted with idempotency key `key`, if any.
    fn job_by_key(&self, userid: u32, key: &str) -> Result<Option<u64>, StoreError>;
    /// Group commit counters so far.
    fn stats(&self) -> CommitStats;
}
