//! The PostgreSQL writer thread: group commit, fenced by the leader's epoch.
//!
//! As the SQLite writer, it takes every batch waiting, decides each batch's
//! outcome (a new job whose id exists, or a write to a job that does not,
//! fails that batch alone) and commits the accepted ones together, answering
//! them only after the commit. Unlike SQLite's, it applies a group as one
//! statement of multi-row parts (`group.rs`), not a statement per write: a
//! round trip to the server costs more than a page write.
//!
//! Every group first updates the `leader` row where the epoch is still
//! this job manager's. A job manager that was deposed (paused past
//! its lease, cut off) finds no such row and can never commit again; a new
//! leader's epoch bump waits for a commit in flight, so their writes never
//! interleave. The row also records the group's number, so that after a
//! lost connection the writer knows whether its last commit happened.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use postgres::Client;
use tokio::sync::mpsc;

use super::connect::{PgConnect, describe};
use super::group::{Segment, SegmentError, Statements};
use crate::store::writer::{Counters, Queue, Request, answer, to_sql_id};
use crate::store::{StoreError, Write};

/// Longest pause between attempts to reach a database that went away.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// What the writer needs besides its queue.
pub struct WriterState {
    pub connect: PgConnect,
    /// Where committed jobspecs are kept for the readers.
    pub recent: Arc<crate::store::recent::Recent>,
    pub client: Client,
    pub stmts: Statements,
    /// Jobs known to be stored and active: this writer made or read them,
    /// and it is the only writer. A write to one needs no lookup.
    pub known: HashSet<u64>,
    /// No stored job has a larger id (as unsigned): a new job above it
    /// needs no lookup either.
    pub max_id: u64,
    pub epoch: i64,
    pub next_event: i64,
    pub next_resource: i64,
    pub counters: Arc<Counters>,
    /// Set when this job manager stepped down: nothing is tried again.
    pub abandoned: Arc<AtomicBool>,
}

/// Why the writer of a job manager that stepped down commits nothing more.
fn stepped_down() -> StoreError {
    StoreError::Deposed("this job manager stepped down".into())
}

/// Run until every sender is gone; once deposed or abandoned, every batch fails.
pub fn run(mut st: WriterState, rx: mpsc::Receiver<Request>) {
    let mut group: Vec<Request> = Vec::new();
    let mut number: i64 = 0;
    let mut deposed: Option<StoreError> = None;
    let mut queue = Queue::new(rx, crate::store::writer::LAZY_WINDOW);
    while queue.take_group(&mut group) {
        let committed = match &deposed {
            Some(err) => Err(err.clone()),
            None if st.abandoned.load(Ordering::Acquire) => Err(stepped_down()),
            None => {
                number += 1;
                let committed = commit_retrying(&mut st, &group, number);
                if let Err(err) = &committed {
                    tracing::error!(error = %err, batches = group.len(), "store commit failed");
                    if matches!(err, StoreError::Deposed(_)) {
                        deposed = Some(err.clone());
                    }
                }
                committed
            }
        };
        answer(&mut group, committed, &st.counters);
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
                    // A job manager that stepped down waits for no database:
                    // whether the commit landed, the new leader's recovery reads.
                    if st.abandoned.load(Ordering::Acquire) {
                        return Err(stepped_down());
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(RETRY_MAX);
                    match st.connect.connect() {
                        Ok(mut client) => match Statements::prepare(&mut client) {
                            Ok(stmts) => {
                                st.client = client;
                                st.stmts = stmts;
                                break;
                            }
                            Err(e) => tracing::warn!(error = %describe(&e), "store not ready"),
                        },
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
    // A session the server ended (57P01-03: a standby ending a silent
    // leader's sessions, a server shutting down) answers the statement in
    // flight with an error before it closes: a lost connection too, and
    // whether this writer still leads is asked after reconnecting.
    let ended = e.code().is_some_and(|c| c.code().starts_with("57P"));
    if ended || e.is_closed() || e.as_db_error().is_none() {
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

/// Each batch's outcome, in group order.
type Outcomes = Vec<Result<(), StoreError>>;

/// Outcomes per batch and the sequence numbers after the group.
type Decided = (Outcomes, i64, i64);

fn segment_failure(e: SegmentError) -> Failure {
    match e {
        SegmentError::Deposed => Failure::Store(StoreError::Deposed(e.to_string())),
        SegmentError::Db(e) => failure(e),
    }
}

fn commit_group(
    st: &mut WriterState,
    group: &[Request],
    number: i64,
    decided: &mut Option<Decided>,
) -> Result<Vec<Result<(), StoreError>>, Failure> {
    let (outcomes, learned) = decide(st, group)?;
    let mut seg = Segment::new(number, st.epoch, st.next_event, st.next_resource);
    let accepted = || {
        group
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.is_ok())
            .flat_map(|(r, _)| &r.batch)
    };
    let WriterState { client, stmts, .. } = st;
    if accepted().any(Segment::ends_segment) {
        // Several statements: one transaction makes them one commit.
        let mut tx = client.transaction().map_err(failure)?;
        for w in accepted() {
            seg.add(&mut tx, stmts, w).map_err(segment_failure)?;
        }
        seg.flush(&mut tx, stmts).map_err(segment_failure)?;
        *decided = Some((outcomes.clone(), seg.next_event, seg.next_resource));
        tx.commit().map_err(failure)?;
    } else {
        // One statement is its own transaction: one round trip.
        for w in accepted() {
            seg.add(client, stmts, w).map_err(segment_failure)?;
        }
        *decided = Some((outcomes.clone(), seg.next_event, seg.next_resource));
        seg.flush(client, stmts).map_err(segment_failure)?;
    }
    st.next_event = seg.next_event;
    st.next_resource = seg.next_resource;
    st.recent.committed(
        group
            .iter()
            .zip(&outcomes)
            .map(|(r, o)| (r.batch.as_slice(), o.is_ok())),
    );
    for (id, active) in learned {
        if active {
            st.known.insert(id);
            st.max_id = st.max_id.max(id);
        } else {
            st.known.remove(&id);
        }
    }
    Ok(outcomes)
}

/// Each batch's outcome, from which ids exist before the group (known, or
/// looked up) and what the batches before it in the group do; and what
/// the accepted batches teach about which jobs are stored and active.
fn decide(
    st: &mut WriterState,
    group: &[Request],
) -> Result<(Outcomes, Vec<(u64, bool)>), Failure> {
    let mut exists: HashMap<u64, bool> = HashMap::new();
    let mut asked: Vec<i64> = Vec::new();
    for w in group.iter().flat_map(|r| &r.batch) {
        let Some(id) = job_of(w) else { continue };
        if exists.contains_key(&id) {
            continue;
        }
        let known = st.known.contains(&id);
        exists.insert(id, known);
        // A new id above every stored one cannot be stored.
        let surely_new = matches!(w, Write::NewJob { .. }) && id > st.max_id;
        if !known && !surely_new {
            asked.push(to_sql_id(id));
        }
    }
    if !asked.is_empty() {
        for row in st
            .client
            .query(st.stmts.ids(), &[&asked])
            .map_err(failure)?
        {
            let id: i64 = row.try_get(0).map_err(failure)?;
            exists.insert(id as u64, true);
        }
    }
    let mut outcomes = Vec::with_capacity(group.len());
    let mut learned = Vec::new();
    for req in group {
        let mut changed: Vec<(u64, bool)> = Vec::new();
        let mut retired: Vec<u64> = Vec::new();
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
                Write::Summary { .. } => retired.push(id),
                _ => {}
            }
        }
        if outcome.is_ok() {
            for (id, e) in changed {
                exists.insert(id, e);
                learned.push((id, e));
            }
            // An inactive job is rarely written again: not kept in memory.
            learned.extend(retired.into_iter().map(|id| (id, false)));
        }
        outcomes.push(outcome);
    }
    Ok((outcomes, learned))
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
