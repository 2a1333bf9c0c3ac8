//! The PostgreSQL backend: the store of job managers that share a
//! replicated database, one of them leading (see `crate::ha`).
//!
//! The same contract as the SQLite store: a batch is acknowledged once
//! committed (synchronous_commit as the server has it, `on` by default),
//! batches are group committed by one writer thread, and every log line
//! keeps its order and bytes. Reads run on connections of their own, on
//! the blocking pool, and reconnect when the database went away.

pub mod connect;
mod group;
mod schema;
mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use postgres::Client;
use postgres::types::ToSql;
use tokio::sync::mpsc;

pub use connect::{PgConnect, is_postgres_url};
pub use schema::prepare;

use super::recent::Recent;
use super::writer::{Counters, Request, from_sql_id, to_sql_id};
use super::{Ack, Batch, CommitStats, Log, LogPos, Store, StoreError, StoredJob, Urgency};
use connect::describe;

/// Batches that may wait for the writer before submitters are slowed down.
const QUEUE_CAPACITY: usize = 65_536;

/// Connections for reads of a row: each read is a round trip, and job
/// starts read their jobspec concurrently.
const POINT_READERS: usize = 4;

/// The PostgreSQL store of the leading job manager, whose commits carry
/// its leader epoch.
pub struct PgStore {
    connect: PgConnect,
    tx: Option<mpsc::Sender<Request>>,
    point: Vec<Mutex<Option<Client>>>,
    bulk: Mutex<Option<Client>>,
    counters: Arc<Counters>,
    writer: Option<JoinHandle<()>>,
    /// Jobspecs of the jobs made lately.
    recent: Arc<Recent>,
    /// Set by [`PgStore::abandon`].
    abandoned: Arc<AtomicBool>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("connect", &self.connect)
            .field("stats", &self.counters.snapshot())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Open the store for the leader of `epoch` (see `crate::ha`): the
    /// schema must exist (the election made it).
    pub fn open(connect: PgConnect, epoch: i64) -> Result<Self, StoreError> {
        let fail = |reason: String| StoreError::Open {
            path: connect.shown().to_string(),
            reason,
        };
        let mut client = connect.connect()?;
        let row = client
            .query_one(
                "SELECT (SELECT coalesce(max(seq), 0) FROM events), \
                        (SELECT coalesce(max(seq), 0) FROM resource_events)",
                &[],
            )
            .map_err(|e| fail(describe(&e)))?;
        let next_event: i64 = row.try_get::<_, i64>(0).map_err(|e| fail(describe(&e)))? + 1;
        let next_resource: i64 = row.try_get::<_, i64>(1).map_err(|e| fail(describe(&e)))? + 1;
        let top = max_id(&mut client).map_err(|e| fail(describe(&e)))?;
        let stmts = group::Statements::prepare(&mut client).map_err(|e| fail(describe(&e)))?;
        let point = (0..POINT_READERS)
            .map(|_| connect.connect().map(|c| Mutex::new(Some(c))))
            .collect::<Result<Vec<_>, _>>()?;
        let bulk = connect.connect()?;
        let counters = Arc::new(Counters::default());
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let recent = Arc::new(Recent::default());
        let abandoned = Arc::new(AtomicBool::new(false));
        let state = writer::WriterState {
            recent: Arc::clone(&recent),
            connect: connect.clone(),
            client,
            stmts,
            known: Default::default(),
            max_id: top.unwrap_or(0),
            epoch,
            next_event,
            next_resource,
            counters: Arc::clone(&counters),
            abandoned: Arc::clone(&abandoned),
        };
        let writer = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer::run(state, rx))
            .map_err(|e| fail(format!("cannot start the writer thread: {e}")))?;
        Ok(PgStore {
            connect,
            tx: Some(tx),
            point,
            bulk: Mutex::new(Some(bulk)),
            counters,
            writer: Some(writer),
            recent,
            abandoned,
        })
    }

    /// This job manager stepped down: every batch from now on fails, the
    /// writer stops waiting for a database that went away, and dropping
    /// the store waits for no connection (the database may be out of
    /// reach). The epoch fences whatever is in flight.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
    }

    /// Finish every batch already handed over, then stop the writer.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.tx = None;
        let writer = self.writer.take();
        // An abandoned writer may be blocked on a database out of reach: it
        // ends on its own once its commit returns.
        if let Some(writer) = writer.filter(|_| !self.abandoned.load(Ordering::Acquire)) {
            let _ = writer.join();
        }
    }

    /// The writer's queue, for [`super::AnyStore`].
    pub(super) fn sender(&self) -> Option<mpsc::Sender<Request>> {
        self.tx.clone()
    }

    fn read<T>(
        &self,
        f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        self.with(&self.bulk, f)
    }

    fn read_point<T>(
        &self,
        f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        // The first idle connection; all busy, any one of them.
        let slot = self
            .point
            .iter()
            .find(|m| m.try_lock().is_ok())
            .unwrap_or(&self.point[0]);
        self.with(slot, f)
    }

    /// Run `f` on a reader connection, opening a new one when the old broke
    /// (once: a database that stays away is the caller's error).
    fn with<T>(
        &self,
        slot: &Mutex<Option<Client>>,
        mut f: impl FnMut(&mut Client) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let mut slot = slot
            .lock()
            .map_err(|_| StoreError::Read("reader lock poisoned".into()))?;
        for attempt in 0..2 {
            let client = match slot.as_mut() {
                Some(c) if !c.is_closed() => c,
                _ => {
                    *slot = Some(
                        self.connect
                            .connect()
                            .map_err(|e| StoreError::Read(e.to_string()))?,
                    );
                    slot.as_mut().ok_or(StoreError::Closed)?
                }
            };
            match f(client) {
                Ok(v) => return Ok(v),
                Err(e) if attempt == 0 && (e.is_closed() || e.as_db_error().is_none()) => {
                    *slot = None;
                }
                Err(e) => return Err(StoreError::Read(describe(&e))),
            }
        }
        Err(StoreError::Read(
            "the database connection keeps breaking".into(),
        ))
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        self.shutdown();
        // A synchronous client closes its connection on a runtime of its
        // own, which cannot start on a thread that drives async tasks (the
        // store may be dropped there): close the readers on a plain thread.
        let readers: Vec<Client> = self
            .point
            .iter()
            .chain([&self.bulk])
            .filter_map(|m| m.lock().ok().and_then(|mut c| c.take()))
            .collect();
        if !readers.is_empty() {
            let closing = std::thread::spawn(move || drop(readers));
            if !self.abandoned.load(Ordering::Acquire) {
                let _ = closing.join();
            }
        }
    }
}

/// The lines of a query's rows' text column `i`.
fn texts(rows: Vec<postgres::Row>, i: usize) -> Result<Vec<String>, postgres::Error> {
    rows.iter().map(|r| r.try_get(i)).collect()
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Store for PgStore {
    fn enqueue_with(
        &self,
        batch: Batch,
        urgency: Urgency,
    ) -> impl std::future::Future<Output = Result<Ack, StoreError>> + Send {
        crate::store::writer::enqueue(self.tx.clone(), batch, urgency)
    }

    fn read_log_page(
        &self,
        id: u64,
        log: Log,
        from: LogPos,
        limit: usize,
    ) -> Result<(Vec<String>, LogPos), StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (id_sql, code) = (to_sql_id(id), log_code(log));
        let rows = self.read(|c| {
            let rows = match from.after {
                Some(after) => c.query(
                    "SELECT seq, line FROM events WHERE job_id = $1 AND log = $2 \
                     AND seq > $3 ORDER BY seq LIMIT $4",
                    &[&id_sql, &code, &after, &limit],
                )?,
                None => {
                    let offset = i64::try_from(from.line).unwrap_or(i64::MAX);
                    c.query(
                        "SELECT seq, line FROM events WHERE job_id = $1 AND log = $2 \
                         ORDER BY seq LIMIT $3 OFFSET $4",
                        &[&id_sql, &code, &limit, &offset],
                    )?
                }
            };
            rows.iter()
                .map(|r| Ok((r.try_get::<_, i64>(0)?, r.try_get::<_, String>(1)?)))
                .collect::<Result<Vec<_>, postgres::Error>>()
        })?;
        let next = LogPos {
            line: from.line + rows.len() as u64,
            after: rows.last().map(|(seq, _)| *seq).or(from.after),
            // A row holds one line here.
            taken: 0,
        };
        Ok((rows.into_iter().map(|(_, line)| line).collect(), next))
    }

    fn read_log(&self, id: u64, log: Log) -> Result<Option<Vec<String>>, StoreError> {
        let (id_sql, code) = (to_sql_id(id), log_code(log));
        self.read(|c| {
            if c.query_opt("SELECT 1 FROM jobs WHERE id = $1", &[&id_sql])?
                .is_none()
            {
                return Ok(None);
            }
            let lines = texts(
                c.query(
                    "SELECT line FROM events WHERE job_id = $1 AND log = $2 ORDER BY seq",
                    &[&id_sql, &code],
                )?,
                0,
            )?;
            // A log that was never written does not exist (RFC 18: no empty logs).
            Ok((!lines.is_empty()).then_some(lines))
        })
    }

    fn log_len(&self, id: u64, log: Log) -> Result<u64, StoreError> {
        let (id_sql, code) = (to_sql_id(id), log_code(log));
        self.read_point(|c| {
            c.query_one(
                "SELECT count(*) FROM events WHERE job_id = $1 AND log = $2",
                &[&id_sql, &code],
            )?
            .try_get::<_, i64>(0)
            .map(count)
        })
    }

    fn active_log_lens(&self) -> Result<Option<HashMap<u64, [u64; 2]>>, StoreError> {
        self.read(|c| {
            let mut lens: HashMap<u64, [u64; 2]> = HashMap::new();
            for row in c.query(
                "SELECT e.job_id, e.log, count(*) FROM jobs j JOIN events e \
                 ON e.job_id = j.id AND e.log > 0 \
                 WHERE j.t_inactive IS NULL GROUP BY e.job_id, e.log",
                &[],
            )? {
                let id = from_sql_id(row.try_get(0)?);
                let log: i16 = row.try_get(1)?;
                let n = count(row.try_get(2)?);
                if let Some(slot) = lens
                    .entry(id)
                    .or_default()
                    .get_mut(usize::from(log as u8) - 1)
                {
                    *slot = n;
                }
            }
            Ok(Some(lens))
        })
    }

    fn take_recent_jobspec(&self, id: u64) -> Option<String> {
        self.recent.take(id)
    }

    fn jobspec(&self, id: u64) -> Result<Option<String>, StoreError> {
        if let Some(spec) = self.recent.get(id) {
            return Ok(Some(spec));
        }
        let id_sql = to_sql_id(id);
        self.read_point(|c| {
            c.query_opt("SELECT jobspec FROM jobs WHERE id = $1", &[&id_sql])?
                .map(|r| r.try_get(0))
                .transpose()
        })
    }

    fn read_job(&self, id: u64) -> Result<Option<StoredJob>, StoreError> {
        let id_sql = to_sql_id(id);
        let job = self.read(|c| {
            c.query_opt(
                "SELECT userid, jobspec, r, summary FROM jobs WHERE id = $1",
                &[&id_sql],
            )?
            .map(|r| {
                Ok(StoredJob {
                    id,
                    userid: userid(r.try_get(0)?),
                    jobspec: r.try_get(1)?,
                    r: r.try_get(2)?,
                    eventlog: Vec::new(),
                    summary: r.try_get(3)?,
                })
            })
            .transpose()
        })?;
        let Some(mut job) = job else {
            return Ok(None);
        };
        job.eventlog = self.read_log(id, Log::Main)?.unwrap_or_default();
        Ok(Some(job))
    }

    fn load_jobs(&self) -> Result<Vec<StoredJob>, StoreError> {
        self.read(|c| {
            let mut jobs: Vec<StoredJob> = c
                .query(
                    "SELECT id, userid, jobspec, r, summary FROM jobs \
                     WHERE t_inactive IS NULL ORDER BY id",
                    &[],
                )?
                .iter()
                .map(|r| {
                    Ok(StoredJob {
                        id: from_sql_id(r.try_get(0)?),
                        userid: userid(r.try_get(1)?),
                        jobspec: r.try_get(2)?,
                        r: r.try_get(3)?,
                        eventlog: Vec::new(),
                        summary: r.try_get(4)?,
                    })
                })
                .collect::<Result<_, postgres::Error>>()?;
            let rows = c.query(
                "SELECT e.job_id, e.line FROM jobs j JOIN events e \
                 ON e.job_id = j.id AND e.log = 0 \
                 WHERE j.t_inactive IS NULL ORDER BY e.job_id, e.seq",
                &[],
            )?;
            // Both queries are in stored id order: one merge pass attaches the lines.
            let mut i = 0;
            for row in rows {
                let id: i64 = row.try_get(0)?;
                let line: String = row.try_get(1)?;
                while i < jobs.len() && to_sql_id(jobs[i].id) < id {
                    i += 1;
                }
                if let Some(job) = jobs.get_mut(i).filter(|j| to_sql_id(j.id) == id) {
                    job.eventlog.push(line);
                }
            }
            Ok(jobs)
        })
    }

    fn summary(&self, id: u64) -> Result<Option<Option<String>>, StoreError> {
        let id_sql = to_sql_id(id);
        self.read_point(|c| {
            c.query_opt("SELECT summary FROM jobs WHERE id = $1", &[&id_sql])?
                .map(|r| r.try_get(0))
                .transpose()
        })
    }

    fn max_job_id(&self) -> Result<Option<u64>, StoreError> {
        self.read_point(max_id)
    }

    fn inactive_count(&self) -> Result<u64, StoreError> {
        self.read_point(|c| {
            c.query_one(
                "SELECT count(*) FROM jobs WHERE t_inactive IS NOT NULL",
                &[],
            )?
            .try_get::<_, i64>(0)
            .map(count)
        })
    }

    fn inactive_before(&self, t: f64) -> Result<u64, StoreError> {
        self.read_point(|c| {
            c.query_one("SELECT count(*) FROM jobs WHERE t_inactive < $1", &[&t])?
                .try_get::<_, i64>(0)
                .map(count)
        })
    }

    fn oldest_inactive(&self, limit: usize) -> Result<Vec<(f64, u64)>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read_point(|c| {
            c.query(
                "SELECT t_inactive, id FROM jobs WHERE t_inactive IS NOT NULL \
                 ORDER BY t_inactive, id LIMIT $1",
                &[&limit],
            )?
            .iter()
            .map(|r| Ok((r.try_get(0)?, from_sql_id(r.try_get(1)?))))
            .collect()
        })
    }

    fn waitable_ids(&self) -> Result<Vec<u64>, StoreError> {
        self.read_point(|c| {
            let mut ids: Vec<u64> = c
                .query("SELECT id FROM jobs WHERE waitable", &[])?
                .iter()
                .map(|r| r.try_get(0).map(from_sql_id))
                .collect::<Result<_, _>>()?;
            ids.sort_unstable();
            Ok(ids)
        })
    }

    fn scan_inactive_below(
        &self,
        userid: Option<u32>,
        since: Option<f64>,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        let user = userid.map(i64::from);
        const PAGE: i64 = 1000;
        let mut cursor = before.map(to_sql_id);
        loop {
            let params: [&(dyn ToSql + Sync); 4] = [&user, &since, &cursor, &PAGE];
            let page: Vec<(u64, String)> = self.read(|c| {
                c.query(
                    "SELECT id, coalesce(summary, '') FROM jobs \
                     WHERE t_inactive IS NOT NULL \
                     AND ($1::bigint IS NULL OR userid = $1) \
                     AND ($2::float8 IS NULL OR t_inactive >= $2) \
                     AND ($3::bigint IS NULL OR id < $3) \
                     ORDER BY id DESC LIMIT $4",
                    &params,
                )?
                .iter()
                .map(|r| Ok((from_sql_id(r.try_get(0)?), r.try_get(1)?)))
                .collect::<Result<_, postgres::Error>>()
            })?;
            let full = page.len() as i64 == PAGE;
            for (id, summary) in &page {
                if !visit(*id, summary) {
                    return Ok(());
                }
            }
            match page.last() {
                Some((id, _)) if full => cursor = Some(to_sql_id(*id)),
                _ => return Ok(()),
            }
        }
    }

    fn resource_eventlog(&self) -> Result<Vec<String>, StoreError> {
        self.read(|c| {
            texts(
                c.query("SELECT line FROM resource_events ORDER BY seq", &[])?,
                0,
            )
        })
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.read_point(|c| {
            c.query_opt("SELECT value FROM meta WHERE key = $1", &[&key])?
                .map(|r| r.try_get(0))
                .transpose()
        })
    }

    fn job_by_key(&self, userid: u32, key: &str) -> Result<Option<u64>, StoreError> {
        let user = i64::from(userid);
        self.read_point(|c| {
            c.query_opt(
                "SELECT id FROM jobs WHERE userid = $1 AND idem_key = $2",
                &[&user, &key],
            )?
            .map(|r| r.try_get(0).map(from_sql_id))
            .transpose()
        })
    }

    fn stats(&self) -> CommitStats {
        self.counters.snapshot()
    }
}

/// The largest stored job id, as unsigned ids compare.
fn max_id(c: &mut Client) -> Result<Option<u64>, postgres::Error> {
    // Ids in the upper half are stored negative and are the largest.
    let row = c.query_one(
        "SELECT (SELECT max(id) FROM jobs WHERE id < 0), (SELECT max(id) FROM jobs)",
        &[],
    )?;
    let upper: Option<i64> = row.try_get(0)?;
    let any: Option<i64> = row.try_get(1)?;
    Ok(upper.or(any).map(from_sql_id))
}

/// How a log is named in the `events` table: the SQLite store's codes, in
/// the column's type.
fn log_code(log: Log) -> i16 {
    // 0..=3: always fits.
    log.code() as i16
}

/// A stored owner back to a uid (written from one, so it fits).
fn userid(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}
