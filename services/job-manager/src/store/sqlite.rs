//! The embedded backend: one SQLite file per instance, in WAL mode.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::{mpsc, oneshot};

use super::writer::{self, Counters, Request, from_sql_id, to_sql_id};
use super::{Ack, Batch, CommitStats, Log, Store, StoreError, StoredJob};

/// Batches that may wait for the writer before submitters are slowed down.
const QUEUE_CAPACITY: usize = 65_536;

/// The embedded store: a writer thread with group commit and a read connection.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    tx: Option<mpsc::Sender<Request>>,
    reader: Mutex<Connection>,
    counters: Arc<Counters>,
    writer: Option<JoinHandle<()>>,
}

impl SqliteStore {
    /// Open (or create) the store at `path`; a damaged or foreign file is an error, never reset.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let fail = |reason: String| StoreError::Open {
            path: path.display().to_string(),
            reason,
        };
        let conn = Connection::open(path).map_err(|e| fail(e.to_string()))?;
        super::schema::configure(&conn).map_err(|e| fail(e.to_string()))?;
        super::schema::open_check(&conn).map_err(fail)?;
        let reader = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| fail(e.to_string()))?;
        reader
            .busy_timeout(std::time::Duration::from_secs(10))
            .map_err(|e| fail(e.to_string()))?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let counters = Arc::new(Counters::default());
        let writer = {
            let counters = Arc::clone(&counters);
            std::thread::Builder::new()
                .name("store-writer".into())
                .spawn(move || writer::run(conn, rx, counters))
                .map_err(|e| fail(format!("cannot start the writer thread: {e}")))?
        };
        Ok(Self {
            path: path.to_path_buf(),
            tx: Some(tx),
            reader: Mutex::new(reader),
            counters,
            writer: Some(writer),
        })
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

    fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StoreError> {
        let conn = self
            .reader
            .lock()
            .map_err(|_| StoreError::Read("reader lock poisoned".into()))?;
        f(&conn).map_err(|e| StoreError::Read(e.to_string()))
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Store for SqliteStore {
    fn enqueue(
        &self,
        batch: Batch,
    ) -> impl std::future::Future<Output = Result<Ack, StoreError>> + Send {
        let tx = self.tx.clone();
        async move {
            let tx = tx.ok_or(StoreError::Closed)?;
            let (done, answer) = oneshot::channel();
            tx.send(Request { batch, done })
                .await
                .map_err(|_| StoreError::Closed)?;
            Ok(Ack(answer))
        }
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
                "SELECT line FROM events WHERE job_id = ?1 AND log = ?2 ORDER BY seq",
            )?;
            let lines = stmt
                .query_map(params![to_sql_id(id), log.code()], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()?;
            // A log that was never written does not exist (RFC 18: no empty logs).
            Ok((!lines.is_empty()).then_some(lines))
        })
    }

    fn log_len(&self, id: u64, log: Log) -> Result<u64, StoreError> {
        self.read(|c| {
            c.prepare_cached("SELECT count(*) FROM events WHERE job_id = ?1 AND log = ?2")?
                .query_row(params![to_sql_id(id), log.code()], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
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
            // Inactive jobs with a summary cost one short row each: neither
            // their jobspec nor their eventlog is read.
            let mut jobs: Vec<StoredJob> = c
                .prepare(
                    "SELECT id, userid, CASE WHEN summary IS NULL THEN jobspec ELSE '' END, \
                     CASE WHEN summary IS NULL THEN r END, summary FROM jobs ORDER BY id",
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
                "SELECT e.job_id, e.line FROM jobs j JOIN events e \
                 ON e.job_id = j.id AND e.log = 0 \
                 WHERE j.summary IS NULL ORDER BY e.job_id, e.seq",
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
                    job.eventlog.push(row.get(1)?);
                }
            }
            Ok(jobs)
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
        self.read(|c| {
            c.prepare_cached("SELECT value FROM meta WHERE key = ?1")?
                .query_row([key], |r| r.get(0))
                .optional()
        })
    }

    fn stats(&self) -> CommitStats {
        self.counters.snapshot()
    }
}
