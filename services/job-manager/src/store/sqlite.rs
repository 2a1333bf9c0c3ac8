//! The embedded backend: one SQLite file per instance, in WAL mode.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::mpsc;

use super::recent::Recent;
use super::writer::{self, Counters, Request, from_sql_id, to_sql_id};
use super::{Ack, Batch, CommitStats, Log, LogPos, Store, StoreError, StoredJob, Urgency};

/// Stores up to this size are checked whole before they are used; a larger
/// one that was closed cleanly is checked beside serving (see [`SqliteStore::open`]).
pub const SYNC_CHECK_MAX: u64 = 64 << 20;

/// Batches that may wait for the writer before submitters are slowed down.
const QUEUE_CAPACITY: usize = 65_536;

/// The embedded store: a writer thread with group commit and two read
/// connections: one for reads of a row or an index range, which the core
/// makes while it handles a request, and one for reads of whole logs and
/// listings, so that a long read never holds up the core. Long reads take
/// turns, which bounds the memory they hold at once.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    tx: Option<mpsc::Sender<Request>>,
    point: Mutex<Connection>,
    bulk: Mutex<Connection>,
    counters: Arc<Counters>,
    /// Jobspecs of recent jobs, for start requests.
    recent: Arc<Recent>,
    writer: Option<JoinHandle<()>>,
    /// The whole-file check was left for [`SqliteStore::check`].
    check_owed: bool,
}

/// Create the store file 0600 if it is missing. SQLite gives its `-wal`
/// and `-shm` files the mode of the database file, so all three are private
/// whatever the process umask.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map(drop)
}

impl SqliteStore {
    /// Open (or create) the store at `path`; a damaged or foreign file is an
    /// error, never reset. Every page is checked first, unless the store is
    /// larger than [`SYNC_CHECK_MAX`] and was closed cleanly: then the check
    /// is owed ([`Self::check_owed`]), so that a store of a million jobs
    /// opens as fast as an empty one.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_with(path, SYNC_CHECK_MAX)
    }

    /// [`Self::open`] with the size above which a clean store's check waits.
    pub fn open_with(path: &Path, sync_check_max: u64) -> Result<Self, StoreError> {
        Self::open_inner(path, sync_check_max, writer::LAZY_WINDOW)
    }

    /// [`Self::open`] with the longest a lazy batch waits for an urgent one.
    pub fn open_lazy_window(path: &Path, window: std::time::Duration) -> Result<Self, StoreError> {
        Self::open_inner(path, SYNC_CHECK_MAX, window)
    }

    fn open_inner(
        path: &Path,
        sync_check_max: u64,
        window: std::time::Duration,
    ) -> Result<Self, StoreError> {
        let fail = |reason: String| StoreError::Open {
            path: path.display().to_string(),
            reason,
        };
        create_private(path).map_err(|e| fail(e.to_string()))?;
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        super::schema::configure(&conn).map_err(|e| fail(e.to_string()))?;
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(u64::MAX);
        let check_owed = super::schema::open_check(&conn, |conn| {
            // After a crash, or while it is cheap, check before anything is read.
            if size > sync_check_max && super::schema::closed_cleanly(conn) {
                return Ok(true);
            }
            super::schema::quick_check(conn).map(|()| false)
        })
        .map_err(fail)?;
        super::schema::set_clean_close(&conn, false).map_err(|e| fail(e.to_string()))?;
        let point = open_reader(path).map_err(|e| fail(e.to_string()))?;
        let bulk = open_reader(path).map_err(|e| fail(e.to_string()))?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let counters = Arc::new(Counters::default());
        let recent = Arc::new(Recent::default());
        let writer = {
            let counters = Arc::clone(&counters);
            let recent = Arc::clone(&recent);
            std::thread::Builder::new()
                .name("store-writer".into())
                .spawn(move || writer::run(conn, writer::Queue::new(rx, window), counters, recent))
                .map_err(|e| fail(format!("cannot start the writer thread: {e}")))?
        };
        Ok(Self {
            path: path.to_path_buf(),
            tx: Some(tx),
            point: Mutex::new(point),
            bulk: Mutex::new(bulk),
            counters,
            recent,
            writer: Some(writer),
            check_owed,
        })
    }

    /// The whole-file check was not made at open and must be run ([`Self::check`]).
    pub fn check_owed(&self) -> bool {
        self.check_owed
    }

    /// The whole-file check, on a connection of its own that does not keep
    /// the store open: a shutdown during the check interrupts it and still
    /// closes the store cleanly.
    pub fn check(&self) -> Result<StoreCheck, StoreError> {
        let conn = open_reader(&self.path).map_err(|e| StoreError::Read(e.to_string()))?;
        Ok(StoreCheck {
            conn,
            path: self.path.clone(),
        })
    }

    /// The writer's queue, for [`super::AnyStore`].
    pub(super) fn sender(&self) -> Option<mpsc::Sender<Request>> {
        self.tx.clone()
    }

    /// Where the store lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Finish every batch already handed over, then stop the writer.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.tx = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }

    /// A read of whole logs or many rows.
    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        Self::with(&self.bulk, f)
    }

    /// A read of one row or a short index range.
    fn read_point<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        Self::with(&self.point, f)
    }

    fn with<T>(
        conn: &Mutex<Connection>,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let conn = conn
            .lock()
            .map_err(|_| StoreError::Read("reader lock poisoned".into()))?;
        f(&conn).map_err(|e| StoreError::Read(e.to_string()))
    }
}

/// SQLite's quick check of every page of a store ([`SqliteStore::check`]).
#[derive(Debug)]
pub struct StoreCheck {
    conn: Connection,
    path: PathBuf,
}

impl StoreCheck {
    /// A handle that stops [`Self::run`] from another thread.
    pub fn interrupt_handle(&self) -> rusqlite::InterruptHandle {
        self.conn.get_interrupt_handle()
    }

    /// Read every page; a damaged store is the same error as at open. An
    /// interrupted check is an error too: the caller knows whether it asked.
    pub fn run(self) -> Result<(), StoreError> {
        super::schema::quick_check(&self.conn).map_err(|reason| StoreError::Open {
            path: self.path.display().to_string(),
            reason,
        })
    }
}

/// A read-only connection to the store at `path`.
fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(conn)
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Store for SqliteStore {
    fn enqueue_with(
        &self,
        batch: Batch,
        urgency: Urgency,
    ) -> impl std::future::Future<Output = Result<Ack, StoreError>> + Send {
        super::writer::enqueue(self.tx.clone(), batch, urgency)
    }

    fn read_log_page(
        &self,
        id: u64,
        log: Log,
        from: LogPos,
        limit: usize,
    ) -> Result<(Vec<String>, LogPos), StoreError> {
        // Where to begin: the row the last page stopped in (skipping what it
        // gave), or the row after it; with no row known, count lines from the
        // start. Rows are read one at a time, so only what the page needs is.
        let (first_seq, mut skip) = match from.after {
            Some(after) if from.taken > 0 => (after, u64::from(from.taken)),
            Some(after) => (after.saturating_add(1), 0),
            None => (i64::MIN, from.line),
        };
        let (lines, last) = self.read(|c| {
            let mut lines = Vec::new();
            let mut last: Option<(i64, u32)> = None;
            let mut stmt = c.prepare_cached(
                "SELECT seq, n, line FROM events WHERE job_id = ?1 AND log = ?2 \
                 AND seq >= ?3 ORDER BY seq",
            )?;
            let mut q = stmt.query(params![to_sql_id(id), log.code(), first_seq])?;
            while lines.len() < limit {
                let Some(r) = q.next()? else { break };
                let n = line_count(r.get(1)?);
                if skip >= n {
                    skip -= n;
                    continue;
                }
                let seq: i64 = r.get(0)?;
                let text: String = r.get(2)?;
                let want = limit - lines.len();
                let before = lines.len();
                lines.extend(row_lines(text, n).skip(skip as usize).take(want));
                let taken = skip + (lines.len() - before) as u64;
                skip = 0;
                let whole = taken >= n;
                last = Some((seq, if whole { 0 } else { taken as u32 }));
            }
            Ok((lines, last))
        })?;
        let next = match last {
            Some((seq, taken)) => LogPos {
                line: from.line + lines.len() as u64,
                after: Some(seq),
                taken,
            },
            None => from,
        };
        Ok((lines, next))
    }

    fn read_log(&self, id: u64, log: Log) -> Result<Option<Vec<String>>, StoreError> {
        self.read(|c| {
            let exists = c
                .prepare_cached("SELECT 1 FROM jobs WHERE id = ?1")?
                .query_row([to_sql_id(id)], |_| Ok(()))
                .optional()?;
            if exists.is_none() {
                return Ok(None);
            }
            let mut stmt = c.prepare_cached(
                "SELECT n, line FROM events WHERE job_id = ?1 AND log = ?2 ORDER BY seq",
            )?;
            let mut q = stmt.query(params![to_sql_id(id), log.code()])?;
            let mut lines = Vec::new();
            while let Some(r) = q.next()? {
                lines.extend(row_lines(r.get(1)?, line_count(r.get(0)?)));
            }
            // A log that was never written does not exist (RFC 18: no empty logs).
            Ok((!lines.is_empty()).then_some(lines))
        })
    }

    fn log_len(&self, id: u64, log: Log) -> Result<u64, StoreError> {
        self.read_point(|c| {
            c.prepare_cached(
                "SELECT coalesce(sum(n), 0) FROM events WHERE job_id = ?1 AND log = ?2",
            )?
            .query_row(params![to_sql_id(id), log.code()], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
        })
    }

    fn take_recent_jobspec(&self, id: u64) -> Option<String> {
        self.recent.take(id)
    }

    fn jobspec(&self, id: u64) -> Result<Option<String>, StoreError> {
        if let Some(spec) = self.recent.get(id) {
            return Ok(Some(spec));
        }
        self.read_point(|c| {
            c.prepare_cached("SELECT jobspec FROM jobs WHERE id = ?1")?
                .query_row([to_sql_id(id)], |r| r.get(0))
                .optional()
        })
    }

    fn read_job(&self, id: u64) -> Result<Option<StoredJob>, StoreError> {
        let job = self.read(|c| {
            c.prepare_cached("SELECT userid, jobspec, r, summary FROM jobs WHERE id = ?1")?
                .query_row([to_sql_id(id)], |r| {
                    Ok(StoredJob {
                        id,
                        userid: r.get(0)?,
                        jobspec: r.get(1)?,
                        r: r.get(2)?,
                        eventlog: Vec::new(),
                        summary: r.get(3)?,
                    })
                })
                .optional()
        })?;
        let Some(mut job) = job else {
            return Ok(None);
        };
        job.eventlog = self.read_log(id, Log::Main)?.unwrap_or_default();
        Ok(Some(job))
    }

    fn load_jobs(&self) -> Result<Vec<StoredJob>, StoreError> {
        self.read(|c| {
            // Inactive jobs are not read at all: a start costs what is active.
            let mut jobs: Vec<StoredJob> = c
                .prepare(
                    "SELECT id, userid, jobspec, r, summary FROM jobs \
                     WHERE t_inactive IS NULL ORDER BY id",
                )?
                .query_map([], |r| {
                    Ok(StoredJob {
                        id: from_sql_id(r.get(0)?),
                        userid: r.get(1)?,
                        jobspec: r.get(2)?,
                        r: r.get(3)?,
                        eventlog: Vec::new(),
                        summary: r.get(4)?,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            let mut stmt = c.prepare(
                // CROSS JOIN keeps jobs (by the index of active ones) as the
                // outer loop: each job's lines come from the events index, so
                // the cost is what is active, not every event ever stored.
                "SELECT e.job_id, e.n, e.line FROM jobs j CROSS JOIN events e \
                 ON e.job_id = j.id AND e.log = 0 \
                 WHERE j.t_inactive IS NULL ORDER BY j.id, e.seq",
            )?;
            let mut rows = stmt.query([])?;
            // Both scans are in id order, so one merge pass attaches the lines.
            let mut i = 0;
            while let Some(row) = rows.next()? {
                let id = from_sql_id(row.get(0)?);
                while i < jobs.len() && jobs[i].id < id {
                    i += 1;
                }
                if let Some(job) = jobs.get_mut(i).filter(|j| j.id == id) {
                    job.eventlog
                        .extend(row_lines(row.get(2)?, line_count(row.get(1)?)));
                }
            }
            Ok(jobs)
        })
    }

    fn summary(&self, id: u64) -> Result<Option<Option<String>>, StoreError> {
        self.read_point(|c| {
            c.prepare_cached("SELECT summary FROM jobs WHERE id = ?1")?
                .query_row([to_sql_id(id)], |r| r.get(0))
                .optional()
        })
    }

    fn max_job_id(&self) -> Result<Option<u64>, StoreError> {
        self.read_point(|c| {
            // Ids in the upper half are stored negative (see `to_sql_id`) and
            // are the largest when present.
            let upper: Option<i64> = c
                .prepare_cached("SELECT max(id) FROM jobs WHERE id < 0")?
                .query_row([], |r| r.get(0))?;
            let top = match upper {
                Some(v) => Some(v),
                None => c
                    .prepare_cached("SELECT max(id) FROM jobs")?
                    .query_row([], |r| r.get(0))?,
            };
            Ok(top.map(from_sql_id))
        })
    }

    fn inactive_count(&self) -> Result<u64, StoreError> {
        self.read_point(|c| {
            // Kept by triggers (see schema.rs): no scan, however many there are.
            c.prepare_cached("SELECT n FROM counters WHERE name = 'inactive'")?
                .query_row([], |r| r.get::<_, i64>(0))
                .map(|n| n.max(0) as u64)
        })
    }

    fn inactive_before(&self, t: f64) -> Result<u64, StoreError> {
        self.read_point(|c| {
            c.prepare_cached("SELECT count(*) FROM jobs WHERE t_inactive < ?1")?
                .query_row([t], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
        })
    }

    fn oldest_inactive(&self, limit: usize) -> Result<Vec<(f64, u64)>, StoreError> {
        self.read_point(|c| {
            c.prepare_cached(
                "SELECT t_inactive, id FROM jobs WHERE t_inactive IS NOT NULL \
                 ORDER BY t_inactive, id LIMIT ?1",
            )?
            .query_map([i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                // A time that is not a number (a damaged summary) counts as the oldest.
                let t = r.get::<_, f64>(0).unwrap_or(0.0);
                Ok((t, from_sql_id(r.get(1)?)))
            })?
            .collect()
        })
    }

    fn waitable_ids(&self) -> Result<Vec<u64>, StoreError> {
        self.read_point(|c| {
            c.prepare_cached("SELECT id FROM jobs WHERE waitable != 0 ORDER BY id")?
                .query_map([], |r| r.get(0).map(from_sql_id))?
                .collect()
        })
    }

    fn scan_inactive_below(
        &self,
        userid: Option<u32>,
        since: Option<f64>,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        let before = before.map(to_sql_id);
        self.read(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT id, coalesce(summary, '') FROM jobs \
                 WHERE t_inactive IS NOT NULL \
                 AND (?1 IS NULL OR userid = ?1) AND (?2 IS NULL OR t_inactive >= ?2) \
                 AND (?3 IS NULL OR id < ?3) \
                 ORDER BY id DESC",
            )?;
            let mut rows = stmt.query(params![userid, since, before])?;
            while let Some(row) = rows.next()? {
                let id = from_sql_id(row.get(0)?);
                let summary = row.get_ref(1)?.as_str().unwrap_or("");
                if !visit(id, summary) {
                    break;
                }
            }
            Ok(())
        })
    }

    fn resource_eventlog(&self) -> Result<Vec<String>, StoreError> {
        self.read(|c| {
            c.prepare_cached("SELECT line FROM resource_events ORDER BY seq")?
                .query_map([], |r| r.get(0))?
                .collect()
        })
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.read_point(|c| {
            c.prepare_cached("SELECT value FROM meta WHERE key = ?1")?
                .query_row([key], |r| r.get(0))
                .optional()
        })
    }

    fn job_by_key(&self, userid: u32, key: &str) -> Result<Option<u64>, StoreError> {
        self.read_point(|c| {
            c.prepare_cached("SELECT id FROM jobs WHERE userid = ?1 AND idem_key = ?2")?
                .query_row(params![userid, key], |r| r.get(0).map(from_sql_id))
                .optional()
        })
    }

    fn stats(&self) -> CommitStats {
        self.counters.snapshot()
    }
}

/// How many lines an events row holds, from its `n` column (at least one).
fn line_count(n: i64) -> u64 {
    n.max(1) as u64
}

/// The lines an events row holds: `n` lines joined by newlines (a row of
/// one line is taken whole, so a line is never split however it reads).
fn row_lines(text: String, n: u64) -> std::vec::IntoIter<String> {
    if n <= 1 {
        vec![text].into_iter()
    } else {
        let lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        lines.into_iter()
    }
}
