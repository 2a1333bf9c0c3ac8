//! The PostgreSQL writer thread: group commit, fenced by the leader's epoch.
//!
//! As the SQLite writer, it takes every batch waiting, decides each batch's
//! outcome (a new job whose id exists, or a write to a job that does not,
//! fails that batch alone) and commits the accepted ones together, answering
//! them only after the commit. Unlike SQLite's, it applies a group as a few
//! multi-row statements (unnest of arrays), not a statement per write: a
//! round trip to the server costs more than a page write.
//!
//! Every transaction first updates the `leader` row where the epoch is
//! still this job manager's. A job manager that was deposed (paused past
//! its lease, cut off) finds no such row and can never commit again; a new
//! leader's epoch bump waits for a commit in flight, so their writes never
//! interleave. The row also records the group's number, so that after a
//! lost connection the writer knows whether its last commit happened.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use postgres::{Client, Transaction};
use tokio::sync::mpsc;

use super::connect::{PgConnect, describe};
use super::log_code;
use crate::store::writer::{Counters, MAX_GROUP, Request, to_sql_id};
use crate::store::{StoreError, Write};

/// Longest pause between attempts to reach a database that went away.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// What the writer needs besides its queue.
pub struct WriterState {
    pub connect: PgConnect,
    pub client: Client,
    pub epoch: i64,
    pub next_event: i64,
    pub next_resource: i64,
    pub counters: Arc<Counters>,
}

/// Run until every sender is gone or the writer is deposed.
pub fn run(mut st: WriterState, mut rx: mpsc::Receiver<Request>) {
    let mut group: Vec<Request> = Vec::new();
    let mut number: i64 = 0;
    let mut deposed: Option<StoreError> = None;
    while let Some(first) = rx.blocking_recv() {
        group.push(first);
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(req) => group.push(req),
                Err(_) => break,
            }
        }
        if let Some(err) = &deposed {
            for req in group.drain(..) {
                let _ = req.done.send(Err(err.clone()));
            }
            continue;
        }
        number += 1;
        match commit_retrying(&mut st, &group, number) {
            Ok(outcomes) => {
                let writes: usize = group.iter().map(|r| r.batch.len()).sum();
                st.counters.commits.fetch_add(1, Ordering::Relaxed);
                st.counters
                    .batches
                    .fetch_add(group.len() as u64, Ordering::Relaxed);
                st.counters
                    .writes
                    .fetch_add(writes as u64, Ordering::Relaxed);
                crate::store::writer::count_events(&group);
                for (req, outcome) in group.drain(..).zip(outcomes) {
                    let _ = req.done.send(outcome);
                }
            }
            Err(err) => {
                tracing::error!(error = %err, batches = group.len(), "store commit failed");
                if matches!(err, StoreError::Deposed(_)) {
                    deposed = Some(err.clone());
                }
                for req in group.drain(..) {
                    let _ = req.done.send(Err(err.clone()));
                }
            }
        }
    }
}

/// Commit `group`; when the connection is lost, reconnect (waiting for the
/// database as long as it takes) and commit again unless it already was.
fn commit_retrying(
    st: &mut WriterState,
    group: &[Request],
    number: i64,
) -> Result<Vec<Result<(), StoreError>>, StoreError> {
    let mut pause = Duration::from_millis(50);
    loop {
        // The outcomes decided for the attempt whose commit was sent.
        let mut decided = None;
        match commit_group(st, group, number, &mut decided) {
            Ok(outcomes) => return Ok(outcomes),
            Err(Failure::Store(e)) => return Err(e),
            Err(Failure::Connection(reason)) => {
                tracing::warn!(%reason, "store connection lost; reconnecting");
                loop {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(RETRY_MAX);
                    match st.connect.connect() {
                        Ok(client) => {
                            st.client = client;
                            break;
                        }
                        Err(e) => tracing::warn!(error = %e, "store still unreachable"),
                    }
                }
                match (last_group(&mut st.client, st.epoch), decided) {
                    (Ok(Some(last)), Some((outcomes, next_event, next_resource)))
                        if last == number =>
                    {
                        // The commit landed before the connection broke.
                        tracing::info!("store reconnected; the last commit had landed");
                        st.next_event = next_event;
                        st.next_resource = next_resource;
                        return Ok(outcomes);
                    }
                    (Ok(Some(_)), _) => tracing::info!("store reconnected; committing again"),
                    (Ok(None), _) => {
                        return Err(StoreError::Deposed(
                            "another job manager leads this store".into(),
                        ));
                    }
                    (Err(reason), _) => tracing::warn!(%reason, "store check after reconnecting"),
                }
            }
        }
    }
}

/// Why a commit did not happen.
enum Failure {
    /// The database refused it, or this writer is deposed: no retry.
    Store(StoreError),
    /// The connection broke: whether it committed must be asked.
    Connection(String),
}

fn failure(e: postgres::Error) -> Failure {
    if e.is_closed() || e.as_db_error().is_none() {
        Failure::Connection(describe(&e))
    } else {
        Failure::Store(StoreError::Write(describe(&e)))
    }
}

/// The `last_group` of the leader row, if this writer's epoch still holds it.
fn last_group(client: &mut Client, epoch: i64) -> Result<Option<i64>, String> {
    client
        .query_opt(
            "SELECT last_group FROM leader WHERE id = 1 AND epoch = $1",
            &[&epoch],
        )
        .map_err(|e| describe(&e))?
        .map(|r| r.try_get(0).map_err(|e| describe(&e)))
        .transpose()
}

/// Outcomes per batch and the sequence numbers after the group.
type Decided = (Vec<Result<(), StoreError>>, i64, i64);

fn commit_group(
    st: &mut WriterState,
    group: &[Request],
    number: i64,
    decided: &mut Option<Decided>,
) -> Result<Vec<Result<(), StoreError>>, Failure> {
    let mut tx = st.client.transaction().map_err(failure)?;
    let fenced = tx
        .execute(
            "UPDATE leader SET last_group = $2 WHERE id = 1 AND epoch = $1",
            &[&st.epoch, &number],
        )
        .map_err(failure)?;
    if fenced == 0 {
        return Err(Failure::Store(StoreError::Deposed(
            "another job manager leads this store".into(),
        )));
    }
    let outcomes = decide(&mut tx, group)?;
    let mut pending = Pending::new(st.next_event, st.next_resource);
    for (req, outcome) in group.iter().zip(&outcomes) {
        if outcome.is_err() {
            continue;
        }
        for write in &req.batch {
            pending.add(&mut tx, write)?;
        }
    }
    pending.flush(&mut tx)?;
    *decided = Some((outcomes.clone(), pending.next_event, pending.next_resource));
    tx.commit().map_err(failure)?;
    st.next_event = pending.next_event;
    st.next_resource = pending.next_resource;
    Ok(outcomes)
}

/// Each batch's outcome, from which ids exist before the group and what
/// the batches before it in the group do.
fn decide(
    tx: &mut Transaction<'_>,
    group: &[Request],
) -> Result<Vec<Result<(), StoreError>>, Failure> {
    let mut ids: HashSet<i64> = HashSet::new();
    for w in group.iter().flat_map(|r| &r.batch) {
        if let Some(id) = job_of(w) {
            ids.insert(to_sql_id(id));
        }
    }
    let asked: Vec<i64> = ids.into_iter().collect();
    let mut exists: HashMap<u64, bool> = HashMap::with_capacity(asked.len());
    for id in &asked {
        exists.insert(*id as u64, false);
    }
    if !asked.is_empty() {
        for row in tx
            .query("SELECT id FROM jobs WHERE id = ANY($1)", &[&asked])
            .map_err(failure)?
        {
            let id: i64 = row.try_get(0).map_err(failure)?;
            exists.insert(id as u64, true);
        }
    }
    let mut outcomes = Vec::with_capacity(group.len());
    for req in group {
        let mut changed: Vec<(u64, bool)> = Vec::new();
        let mut outcome = Ok(());
        for w in &req.batch {
            let Some(id) = job_of(w) else { continue };
            let now = changed
                .iter()
                .rev()
                .find(|(i, _)| *i == id)
                .map(|(_, e)| *e)
                .unwrap_or_else(|| exists.get(&id).copied().unwrap_or(false));
            match w {
                Write::NewJob { .. } if now => {
                    outcome = Err(StoreError::Duplicate(id));
                    break;
                }
                Write::NewJob { .. } => changed.push((id, true)),
                Write::Purge { .. } => changed.push((id, false)),
                _ if !now => {
                    outcome = Err(StoreError::UnknownJob(id));
                    break;
                }
                _ => {}
            }
        }
        if outcome.is_ok() {
            for (id, e) in changed {
                exists.insert(id, e);
            }
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The job a write touches, if any.
fn job_of(w: &Write) -> Option<u64> {
    match w {
        Write::NewJob { id, .. }
        | Write::Append { id, .. }
        | Write::SetR { id, .. }
        | Write::Purge { id }
        | Write::Summary { id, .. }
        | Write::IdempotencyKey { id, .. } => Some(*id),
        Write::ResourceEvent { .. }
        | Write::Meta { .. }
        | Write::ReplaceResourceEventlog { .. } => None,
    }
}

/// The inactive time and waitable flag a summary carries (as the SQLite
/// store's json_extract reads them).
pub fn summary_columns(summary: &str) -> (Option<f64>, bool) {
    let parsed: Option<serde_json::Value> = serde_json::from_str(summary).ok();
    let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k));
    let t = field("t_inactive").and_then(serde_json::Value::as_f64);
    let waitable = match field("waitable") {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
        _ => false,
    };
    (t, waitable)
}

/// Accepted writes gathered into columns, applied as one statement per kind.
/// Order across kinds is kept where it matters: a purge or a resource
/// eventlog checkpoint first applies everything gathered before it.
struct Pending {
    next_event: i64,
    next_resource: i64,
    jobs: (Vec<i64>, Vec<i64>, Vec<String>),
    events: (Vec<i64>, Vec<i64>, Vec<i16>, Vec<String>),
    r: HashMap<i64, String>,
    summaries: HashMap<i64, String>,
    keys: HashMap<i64, String>,
    resource: (Vec<i64>, Vec<String>),
    meta: HashMap<String, String>,
}

impl Pending {
    fn new(next_event: i64, next_resource: i64) -> Self {
        Pending {
            next_event,
            next_resource,
            jobs: Default::default(),
            events: Default::default(),
            r: HashMap::new(),
            summaries: HashMap::new(),
            keys: HashMap::new(),
            resource: Default::default(),
            meta: HashMap::new(),
        }
    }

    fn add(&mut self, tx: &mut Transaction<'_>, w: &Write) -> Result<(), Failure> {
        match w {
            Write::NewJob {
                id,
                userid,
                jobspec,
            } => {
                self.jobs.0.push(to_sql_id(*id));
                self.jobs.1.push(i64::from(*userid));
                self.jobs.2.push(jobspec.clone());
            }
            Write::Append { id, log, line } => {
                self.events.0.push(self.next_event);
                self.next_event += 1;
                self.events.1.push(to_sql_id(*id));
                self.events.2.push(log_code(*log));
                self.events.3.push(line.clone());
            }
            Write::SetR { id, r } => {
                self.r.insert(to_sql_id(*id), r.clone());
            }
            Write::Summary { id, summary } => {
                self.summaries.insert(to_sql_id(*id), summary.clone());
            }
            Write::IdempotencyKey { id, key } => {
                self.keys.insert(to_sql_id(*id), key.clone());
            }
            Write::ResourceEvent { line } => {
                self.resource.0.push(self.next_resource);
                self.next_resource += 1;
                self.resource.1.push(line.clone());
            }
            Write::Meta { key, value } => {
                self.meta.insert(key.clone(), value.clone());
            }
            Write::Purge { id } => {
                self.flush(tx)?;
                let id = [to_sql_id(*id)];
                tx.execute("DELETE FROM events WHERE job_id = ANY($1)", &[&&id[..]])
                    .map_err(failure)?;
                tx.execute("DELETE FROM jobs WHERE id = ANY($1)", &[&&id[..]])
                    .map_err(failure)?;
            }
            Write::ReplaceResourceEventlog { lines } => {
                self.flush(tx)?;
                tx.execute("DELETE FROM resource_events", &[])
                    .map_err(failure)?;
                for line in lines {
                    self.resource.0.push(self.next_resource);
                    self.next_resource += 1;
                    self.resource.1.push(line.clone());
                }
            }
        }
        Ok(())
    }

    /// Apply everything gathered, in an order that keeps each write's meaning:
    /// jobs before their events and updates.
    fn flush(&mut self, tx: &mut Transaction<'_>) -> Result<(), Failure> {
        if !self.jobs.0.is_empty() {
            let (ids, users, specs) = std::mem::take(&mut self.jobs);
            tx.execute(
                "INSERT INTO jobs (id, userid, jobspec) \
                 SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[])",
                &[&ids, &users, &specs],
            )
            .map_err(failure)?;
        }
        if !self.events.0.is_empty() {
            let (seqs, ids, logs, lines) = std::mem::take(&mut self.events);
            tx.execute(
                "INSERT INTO events (seq, job_id, log, line) \
                 SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::smallint[], $4::text[])",
                &[&seqs, &ids, &logs, &lines],
            )
            .map_err(failure)?;
        }
        if !self.r.is_empty() {
            let (ids, rs): (Vec<i64>, Vec<String>) =
                std::mem::take(&mut self.r).into_iter().unzip();
            tx.execute(
                "UPDATE jobs SET r = u.r FROM unnest($1::bigint[], $2::text[]) AS u(id, r) \
                 WHERE jobs.id = u.id",
                &[&ids, &rs],
            )
            .map_err(failure)?;
        }
        if !self.keys.is_empty() {
            let (ids, keys): (Vec<i64>, Vec<String>) =
                std::mem::take(&mut self.keys).into_iter().unzip();
            tx.execute(
                "UPDATE jobs SET idem_key = u.k FROM unnest($1::bigint[], $2::text[]) AS u(id, k) \
                 WHERE jobs.id = u.id",
                &[&ids, &keys],
            )
            .map_err(failure)?;
        }
        if !self.summaries.is_empty() {
            let mut ids = Vec::with_capacity(self.summaries.len());
            let mut texts = Vec::with_capacity(self.summaries.len());
            let mut times: Vec<Option<f64>> = Vec::with_capacity(self.summaries.len());
            let mut waitable = Vec::with_capacity(self.summaries.len());
            for (id, text) in std::mem::take(&mut self.summaries) {
                let (t, w) = summary_columns(&text);
                ids.push(id);
                texts.push(text);
                times.push(t);
                waitable.push(w);
            }
            tx.execute(
                "UPDATE jobs SET summary = u.s, t_inactive = u.t, waitable = u.w \
                 FROM unnest($1::bigint[], $2::text[], $3::float8[], $4::bool[]) AS u(id, s, t, w) \
                 WHERE jobs.id = u.id",
                &[&ids, &texts, &times, &waitable],
            )
            .map_err(failure)?;
        }
        if !self.resource.0.is_empty() {
            let (seqs, lines) = std::mem::take(&mut self.resource);
            tx.execute(
                "INSERT INTO resource_events (seq, line) \
                 SELECT * FROM unnest($1::bigint[], $2::text[])",
                &[&seqs, &lines],
            )
            .map_err(failure)?;
        }
        if !self.meta.is_empty() {
            let (keys, values): (Vec<String>, Vec<String>) =
                std::mem::take(&mut self.meta).into_iter().unzip();
            tx.execute(
                "INSERT INTO meta (key, value) SELECT * FROM unnest($1::text[], $2::text[]) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &[&keys, &values],
            )
            .map_err(failure)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::summary_columns;

    #[test]
    fn summary_columns_read_as_sqlite_does() {
        assert_eq!(
            summary_columns(r#"{"t_inactive":2.5,"waitable":true}"#),
            (Some(2.5), true)
        );
        assert_eq!(summary_columns(r#"{"t_inactive":1}"#), (Some(1.0), false));
        assert_eq!(summary_columns("not json"), (None, false));
    }
}
