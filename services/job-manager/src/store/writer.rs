//! The single writer thread and its group commit.
//!
//! Protocol: a [`Request`] carries one batch and a oneshot for its outcome. The
//! thread blocks for the first request, takes every request already waiting (up
//! to [`MAX_GROUP`]), applies each in a savepoint, commits once and answers all.
//! A request is answered only after the commit returned, so "acknowledged" means
//! "on disk".
//!
//! A group of lazy batches only (nobody waits for them: exec lines of an
//! unwatched job, its end) is held up to [`LAZY_WINDOW`] for company: the
//! next urgent batch (a submit's reply, an allocation whose start waits)
//! takes them into its own commit. Under load a job's lines ride the commit
//! of another job's allocation instead of paying for one of their own.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rusqlite::{Connection, params};
use tokio::sync::{mpsc, oneshot};

use super::recent::Recent;
use super::{Batch, CommitStats, Log, StoreError, Urgency, Write};

/// Most batches folded into one transaction: bounds commit latency and memory.
pub const MAX_GROUP: usize = 4096;

/// Longest a lazy batch waits for an urgent one to share its commit.
pub const LAZY_WINDOW: Duration = Duration::from_millis(2);

/// One batch waiting to be committed.
#[derive(Debug)]
pub struct Request {
    pub batch: Batch,
    pub urgency: Urgency,
    pub done: oneshot::Sender<Result<(), StoreError>>,
}

/// Group commit counters shared with readers of [`CommitStats`].
#[derive(Debug, Default)]
pub struct Counters {
    commits: AtomicU64,
    batches: AtomicU64,
    writes: AtomicU64,
}

impl Counters {
    pub fn snapshot(&self) -> CommitStats {
        CommitStats {
            commits: self.commits.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
        }
    }
}

/// Hand `batch` to a writer's queue (`None`: the store is closed); the
/// [`super::Ack`] that resolves once it is durable. Shared by the backends.
pub(in crate::store) async fn enqueue(
    tx: Option<mpsc::Sender<Request>>,
    batch: super::Batch,
    urgency: Urgency,
) -> Result<super::Ack, StoreError> {
    let tx = tx.ok_or(StoreError::Closed)?;
    let (done, answer) = oneshot::channel();
    tx.send(Request {
        batch,
        urgency,
        done,
    })
    .await
    .map_err(|_| StoreError::Closed)?;
    Ok(super::Ack(answer))
}

/// The writer's queue, read a group at a time.
pub(in crate::store) struct Queue {
    rx: mpsc::Receiver<Request>,
    window: Duration,
    /// Only to wait for the queue with a deadline: the writer is a plain thread.
    timer: Option<tokio::runtime::Runtime>,
}

impl Queue {
    /// Read `rx`, holding lazy batches up to `window`.
    pub fn new(rx: mpsc::Receiver<Request>, window: Duration) -> Self {
        let timer = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .inspect_err(|e| {
                tracing::warn!(error = %e, "no timer for lazy batches: every batch commits at once")
            })
            .ok();
        Queue { rx, window, timer }
    }

    /// Wait for a batch, then take it and every one already waiting (up to
    /// [`MAX_GROUP`]) into `group`. A group of lazy batches only waits for
    /// more until one is urgent or the window has passed. False once
    /// every sender is gone and nothing is left.
    pub fn take_group(&mut self, group: &mut Vec<Request>) -> bool {
        let Some(first) = self.rx.blocking_recv() else {
            return false;
        };
        group.push(first);
        drain(&mut self.rx, group);
        let Some(timer) = &self.timer else {
            return true;
        };
        let deadline = std::time::Instant::now() + self.window;
        while group.len() < MAX_GROUP && group.iter().all(|r| r.urgency == Urgency::Lazy) {
            // The timer is made inside block_on: it needs the runtime's context.
            let rx = &mut self.rx;
            let next =
                timer.block_on(async { tokio::time::timeout_at(deadline.into(), rx.recv()).await });
            match next {
                Ok(Some(req)) => {
                    group.push(req);
                    drain(&mut self.rx, group);
                }
                // Closed (commit what is here) or the window is over.
                Ok(None) | Err(_) => break,
            }
        }
        true
    }
}

/// Take what is already waiting, up to [`MAX_GROUP`] in all.
fn drain(rx: &mut mpsc::Receiver<Request>, group: &mut Vec<Request>) {
    while group.len() < MAX_GROUP {
        match rx.try_recv() {
            Ok(req) => group.push(req),
            Err(_) => break,
        }
    }
}

/// Answer every request of `group` and empty it: each with its outcome
/// once the group committed (and counted), or all with the group's error.
pub(in crate::store) fn answer(
    group: &mut Vec<Request>,
    committed: Result<Vec<Result<(), StoreError>>, StoreError>,
    counters: &Counters,
) {
    match committed {
        Ok(outcomes) => {
            let writes: usize = group.iter().map(|r| r.batch.len()).sum();
            counters.commits.fetch_add(1, Ordering::Relaxed);
            counters
                .batches
                .fetch_add(group.len() as u64, Ordering::Relaxed);
            counters.writes.fetch_add(writes as u64, Ordering::Relaxed);
            count_events(group);
            for (req, outcome) in group.drain(..).zip(outcomes) {
                // A caller that went away no longer needs the answer.
                let _ = req.done.send(outcome);
            }
        }
        Err(err) => {
            for req in group.drain(..) {
                let _ = req.done.send(Err(err.clone()));
            }
        }
    }
}

/// Run the writer until every sender is gone; then return.
pub fn run(conn: Connection, mut queue: Queue, counters: Arc<Counters>, recent: Arc<Recent>) {
    // Room for every statement the writer makes, so that none is evicted
    // and parsed again (rusqlite keeps 16 by default; the writer has 15).
    conn.set_prepared_statement_cache_capacity(STATEMENTS);
    let mut group: Vec<Request> = Vec::new();
    let mut failed = false;
    while queue.take_group(&mut group) {
        let committed = commit_group(&conn, &group);
        match &committed {
            Ok(outcomes) => recent.committed(
                group
                    .iter()
                    .zip(outcomes)
                    .map(|(r, o)| (r.batch.as_slice(), o.is_ok())),
            ),
            Err(err) => {
                failed = true;
                tracing::error!(error = %err, batches = group.len(), "store commit failed");
            }
        }
        answer(&mut group, committed, &counters);
    }
    // Every sender is gone: a clean shutdown, unless a commit failed.
    if !failed && let Err(e) = super::schema::set_clean_close(&conn, true) {
        tracing::warn!(error = %e, "cannot mark the store closed cleanly");
    }
}

/// Add the events of a committed group to the Prometheus counters.
fn count_events(group: &[Request]) {
    use crate::telemetry::{COMMITS, EVENTS};
    // Index: eventlog, exec.eventlog, output, resource.
    let mut n = [0u64; 4];
    for w in group.iter().flat_map(|r| &r.batch) {
        match w {
            Write::Append { log, .. } => {
                n[match log {
                    Log::Main => 0,
                    Log::Exec => 1,
                    Log::Output => 2,
                    Log::Usage => continue,
                }] += 1
            }
            Write::ResourceEvent { .. } => n[3] += 1,
            _ => {}
        }
    }
    for (log, n) in ["eventlog", "exec.eventlog", "output", "resource"]
        .into_iter()
        .zip(n)
    {
        if n > 0 {
            metrics::counter!(EVENTS, "log" => log).increment(n);
        }
    }
    metrics::counter!(COMMITS).increment(1);
}

/// Apply every batch in its own savepoint and commit them all; per-batch outcomes.
fn commit_group(
    conn: &Connection,
    group: &[Request],
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let write_err = |e: rusqlite::Error| StoreError::Write(e.to_string());
    let tx = Tx::begin(conn).map_err(write_err)?;
    let mut outcomes = Vec::with_capacity(group.len());
    let mut known = Known::default();
    for req in group {
        run_cached(&tx, "SAVEPOINT batch").map_err(write_err)?;
        let outcome = apply_batch(&tx, &req.batch, &mut known);
        if outcome.is_ok() {
            known.keep();
        } else {
            run_cached(&tx, "ROLLBACK TO batch").map_err(write_err)?;
            known.forget();
        }
        run_cached(&tx, "RELEASE batch").map_err(write_err)?;
        outcomes.push(outcome);
    }
    tx.commit().map_err(write_err)?;
    Ok(outcomes)
}

/// Statements the writer keeps prepared.
const STATEMENTS: usize = 32;

/// Run a statement without parameters or rows from the statement cache.
///
/// For BEGIN, COMMIT and the savepoints: rusqlite's `transaction()` and
/// `savepoint()` parse their SQL anew on every call, which was six parses
/// a commit under `bench real`.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

/// A transaction begun and committed by cached statements; rolled back if
/// dropped while still open (as rusqlite's own `Transaction` is).
struct Tx<'c> {
    conn: &'c Connection,
}

impl<'c> Tx<'c> {
    fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        run_cached(conn, "BEGIN")?;
        Ok(Self { conn })
    }

    fn commit(self) -> rusqlite::Result<()> {
        run_cached(self.conn, "COMMIT")
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // Open after a failed statement or COMMIT: nothing of it may stay.
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// Jobs known to be stored, within one group: made by it or looked up once.
///
/// An append checks that its job exists; with this, once per job and group,
/// not once per line. (The check used to be part of the INSERT, as
/// INSERT ... SELECT ... WHERE EXISTS, which also made SQLite open and
/// truncate a statement journal for every line: a seventh of the job
/// manager's time under load.)
#[derive(Default)]
struct Known {
    ids: HashSet<u64>,
    /// Learned in the current batch: forgotten if it rolls back.
    batch: Vec<u64>,
}

impl Known {
    fn learn(&mut self, id: u64) {
        if self.ids.insert(id) {
            self.batch.push(id);
        }
    }

    fn keep(&mut self) {
        self.batch.clear();
    }

    fn forget(&mut self) {
        for id in self.batch.drain(..) {
            self.ids.remove(&id);
        }
    }
}

/// Apply one batch. The lines it appends to each job's log are gathered
/// into one row (format 5; more past [`ROW_BYTES`]), written where that
/// log's first line of the batch stood among its other writes: any other
/// write first stores what was gathered, so a purge or a new job is never
/// reordered with lines.
fn apply_batch(conn: &Connection, batch: &[Write], known: &mut Known) -> Result<(), StoreError> {
    let mut rows = Gathered::default();
    for write in batch {
        match write {
            // A line holding a newline (none does: an RFC 18 line is one
            // line) would read back as two if joined; it gets a row alone.
            Write::Append { id, log, line } if !line.contains('\n') => rows.add(*id, *log, line),
            other => {
                rows.store(conn, known)?;
                apply(conn, other, known)?;
            }
        }
    }
    rows.store(conn, known)
}

/// Bytes past which a job log's lines in a batch go on in a new row. A
/// reader pages through a log a few hundred lines at a time and reads each
/// row whole: a row of a chatty job's output must not be megabytes.
const ROW_BYTES: usize = 16 << 10;

/// Lines of one batch, one row per job log (or more, for long ones), in
/// the order first seen.
#[derive(Default)]
struct Gathered {
    rows: Vec<Row>,
    at: HashMap<(u64, Log), usize>,
}

/// One job log's lines of a batch: `n` lines joined by newlines.
struct Row {
    id: u64,
    log: Log,
    text: String,
    n: i64,
}

impl Gathered {
    fn add(&mut self, id: u64, log: Log, line: &str) {
        match self.at.get(&(id, log)) {
            Some(&i) if self.rows[i].text.len() < ROW_BYTES => {
                let row = &mut self.rows[i];
                row.text.push('\n');
                row.text.push_str(line);
                row.n += 1;
            }
            _ => {
                self.at.insert((id, log), self.rows.len());
                self.rows.push(Row {
                    id,
                    log,
                    text: line.to_owned(),
                    n: 1,
                });
            }
        }
    }

    /// Insert a row for each job log gathered, and start empty.
    fn store(&mut self, conn: &Connection, known: &mut Known) -> Result<(), StoreError> {
        for Row { id, log, text, n } in self.rows.drain(..) {
            insert_lines(conn, known, id, log, &text, n)?;
        }
        self.at.clear();
        Ok(())
    }
}

/// Store `n` lines of job `id`'s `log`, joined by newlines, as one row.
fn insert_lines(
    conn: &Connection,
    known: &mut Known,
    id: u64,
    log: Log,
    text: &str,
    n: i64,
) -> Result<(), StoreError> {
    check_job(conn, id, known)?;
    conn.prepare_cached("INSERT INTO events (job_id, log, line, n) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![to_sql_id(id), log.code(), text, n]))
        .map(|_| ())
        .map_err(|e| StoreError::Write(e.to_string()))
}

/// Fail unless job `id` is stored (made earlier, or in this group).
fn check_job(conn: &Connection, id: u64, known: &mut Known) -> Result<(), StoreError> {
    if !known.ids.contains(&id) {
        let exists = conn
            .prepare_cached("SELECT 1 FROM jobs WHERE id = ?1")
            .and_then(|mut s| s.exists([to_sql_id(id)]))
            .map_err(|e| StoreError::Write(e.to_string()))?;
        if !exists {
            return Err(StoreError::UnknownJob(id));
        }
        known.learn(id);
    }
    Ok(())
}

fn apply(conn: &Connection, write: &Write, known: &mut Known) -> Result<(), StoreError> {
    let err = |e: rusqlite::Error| StoreError::Write(e.to_string());
    match write {
        Write::NewJob {
            id,
            userid,
            jobspec,
        } => {
            let n = conn
                .prepare_cached(
                    "INSERT INTO jobs (id, userid, jobspec) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (id) DO NOTHING",
                )
                .and_then(|mut s| s.execute(params![to_sql_id(*id), userid, jobspec]))
                .map_err(err)?;
            if n == 0 {
                return Err(StoreError::Duplicate(*id));
            }
            known.learn(*id);
        }
        Write::Append { id, log, line } => insert_lines(conn, known, *id, *log, line, 1)?,
        Write::SetR { id, r } => {
            let n = conn
                .prepare_cached("UPDATE jobs SET r = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![to_sql_id(*id), r]))
                .map_err(err)?;
            if n == 0 {
                return Err(StoreError::UnknownJob(*id));
            }
        }
        Write::ResourceEvent { line } => {
            conn.prepare_cached("INSERT INTO resource_events (line) VALUES (?1)")
                .and_then(|mut s| s.execute([line]))
                .map_err(err)?;
        }
        Write::Purge { id } => {
            known.ids.remove(id);
            for sql in [
                "DELETE FROM events WHERE job_id = ?1",
                "DELETE FROM jobs WHERE id = ?1",
            ] {
                conn.prepare_cached(sql)
                    .and_then(|mut s| s.execute([to_sql_id(*id)]))
                    .map_err(err)?;
            }
        }
        Write::Summary { id, summary } => {
            let n = conn
                .prepare_cached(
                    "UPDATE jobs SET summary = ?2, \
                     t_inactive = CASE WHEN json_valid(?2) THEN json_extract(?2, '$.t_inactive') END, \
                     waitable = CASE WHEN json_valid(?2) \
                         THEN coalesce(json_extract(?2, '$.waitable'), 0) ELSE 0 END \
                     WHERE id = ?1",
                )
                .and_then(|mut s| s.execute(params![to_sql_id(*id), summary]))
                .map_err(err)?;
            if n == 0 {
                return Err(StoreError::UnknownJob(*id));
            }
        }
        Write::ReplaceResourceEventlog { lines } => {
            conn.execute("DELETE FROM resource_events", [])
                .map_err(err)?;
            let mut insert = conn
                .prepare_cached("INSERT INTO resource_events (line) VALUES (?1)")
                .map_err(err)?;
            for line in lines {
                insert.execute([line]).map_err(err)?;
            }
        }
        Write::IdempotencyKey { id, key } => {
            let n = conn
                .prepare_cached("UPDATE jobs SET idem_key = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![to_sql_id(*id), key]))
                .map_err(err)?;
            if n == 0 {
                return Err(StoreError::UnknownJob(*id));
            }
        }
        Write::Meta { key, value } => {
            conn.prepare_cached(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut s| s.execute([key, value]))
            .map_err(err)?;
        }
    }
    Ok(())
}

/// SQLite integers are signed: store the id's bits, so ids above i64::MAX keep their order
/// within the upper half and round-trip exactly.
pub fn to_sql_id(id: u64) -> i64 {
    id as i64
}

/// Inverse of [`to_sql_id`].
pub fn from_sql_id(v: i64) -> u64 {
    v as u64
}
