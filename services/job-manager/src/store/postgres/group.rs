//! A commit group as SQL: the accepted writes gathered into columns and
//! applied by one statement, fenced on the leader's epoch.
//!
//! One statement is one round trip, and on its own (autocommit) it is also
//! its own transaction: a group costs a round trip and the WAL flush. Its
//! parts are data-modifying WITH queries, which all see the rows as they
//! were before the statement and must not touch one row twice; so a job
//! made in the group is inserted with its R, key and summary already set,
//! and the jobs that existed get one UPDATE row each. A purge or a resource
//! eventlog checkpoint ends a segment: a group holding one is applied as
//! several statements in one transaction.

use std::collections::HashMap;

use postgres::{Client, GenericClient, Statement};

use super::connect::describe;
use super::log_code;
use crate::store::Write;
use crate::store::writer::to_sql_id;

/// The statement that applies one segment of a group. Every part runs only
/// when the fence (the leader row with this writer's epoch) is found; the
/// answer is how many leader rows were: 0 means deposed.
const SEGMENT: &str = "
WITH f AS (
    UPDATE leader SET last_group = $1 WHERE id = 1 AND epoch = $2 RETURNING 1
), j AS (
    INSERT INTO jobs (id, userid, jobspec, r, summary, t_inactive, waitable, idem_key)
    SELECT * FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[],
                         $8::float8[], $9::bool[], $10::text[])
    WHERE EXISTS (SELECT 1 FROM f)
), e AS (
    INSERT INTO events (seq, job_id, log, line)
    SELECT * FROM unnest($11::bigint[], $12::bigint[], $13::smallint[], $14::text[])
    WHERE EXISTS (SELECT 1 FROM f)
), u AS (
    UPDATE jobs SET r = coalesce(u.r, jobs.r),
                    idem_key = coalesce(u.k, jobs.idem_key),
                    summary = CASE WHEN u.has_s THEN u.s ELSE jobs.summary END,
                    t_inactive = CASE WHEN u.has_s THEN u.t ELSE jobs.t_inactive END,
                    waitable = CASE WHEN u.has_s THEN u.w ELSE jobs.waitable END
    FROM unnest($15::bigint[], $16::text[], $17::text[], $18::bool[], $19::text[],
                $20::float8[], $21::bool[]) AS u(id, r, k, has_s, s, t, w)
    WHERE jobs.id = u.id AND EXISTS (SELECT 1 FROM f)
), res AS (
    INSERT INTO resource_events (seq, line)
    SELECT * FROM unnest($22::bigint[], $23::text[])
    WHERE EXISTS (SELECT 1 FROM f)
), m AS (
    INSERT INTO meta (key, value)
    SELECT * FROM unnest($24::text[], $25::text[])
    WHERE EXISTS (SELECT 1 FROM f)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value
)
SELECT count(*) FROM f";

/// The writer's statements, prepared once per connection.
pub struct Statements {
    segment: Statement,
    ids: Statement,
    purge_events: Statement,
    purge_jobs: Statement,
    clear_resource: Statement,
}

impl Statements {
    /// Prepare every statement on `client`.
    pub fn prepare(client: &mut Client) -> Result<Statements, postgres::Error> {
        Ok(Statements {
            segment: client.prepare(SEGMENT)?,
            ids: client.prepare("SELECT id FROM jobs WHERE id = ANY($1)")?,
            purge_events: client.prepare("DELETE FROM events WHERE job_id = ANY($1)")?,
            purge_jobs: client.prepare("DELETE FROM jobs WHERE id = ANY($1)")?,
            clear_resource: client.prepare("DELETE FROM resource_events")?,
        })
    }

    /// The lookup of which ids are stored.
    pub fn ids(&self) -> &Statement {
        &self.ids
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

/// Changes to one job's row.
#[derive(Default)]
struct Row {
    userid: i64,
    jobspec: String,
    r: Option<String>,
    key: Option<String>,
    summary: Option<String>,
}

/// A group being gathered; [`Segment::flush`] applies what it holds.
pub struct Segment {
    /// The group's number, recorded in the leader row.
    number: i64,
    epoch: i64,
    /// Sequence numbers of the next event and resource event.
    pub next_event: i64,
    pub next_resource: i64,
    /// Jobs made in this segment, in order, and where each is.
    new: Vec<(i64, Row)>,
    new_at: HashMap<i64, usize>,
    /// Changes to jobs that existed before it.
    updates: HashMap<i64, Row>,
    events: (Vec<i64>, Vec<i64>, Vec<i16>, Vec<String>),
    resource: (Vec<i64>, Vec<String>),
    meta: HashMap<String, String>,
    /// Statements run: a group of one needs no transaction.
    pub statements: u32,
}

/// Why a segment did not apply.
#[derive(Debug)]
pub enum SegmentError {
    /// The leader row has another epoch.
    Deposed,
    /// The database's error.
    Db(postgres::Error),
}

impl From<postgres::Error> for SegmentError {
    fn from(e: postgres::Error) -> Self {
        SegmentError::Db(e)
    }
}

impl std::fmt::Display for SegmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SegmentError::Deposed => f.write_str("another job manager leads this store"),
            SegmentError::Db(e) => f.write_str(&describe(e)),
        }
    }
}

impl Segment {
    /// An empty group `number` of the writer of `epoch`.
    pub fn new(number: i64, epoch: i64, next_event: i64, next_resource: i64) -> Self {
        Segment {
            number,
            epoch,
            next_event,
            next_resource,
            new: Vec::new(),
            new_at: HashMap::new(),
            updates: HashMap::new(),
            events: Default::default(),
            resource: Default::default(),
            meta: HashMap::new(),
            statements: 0,
        }
    }

    /// Does `w` end a segment (it must follow what came before it)?
    pub fn ends_segment(w: &Write) -> bool {
        matches!(
            w,
            Write::Purge { .. } | Write::ReplaceResourceEventlog { .. }
        )
    }

    fn row(&mut self, id: i64) -> &mut Row {
        match self.new_at.get(&id) {
            Some(&i) => &mut self.new[i].1,
            None => self.updates.entry(id).or_default(),
        }
    }

    /// Gather `w`; a purge or checkpoint is applied at once on `db`, after
    /// what was gathered before it.
    pub fn add(
        &mut self,
        db: &mut impl GenericClient,
        stmts: &Statements,
        w: &Write,
    ) -> Result<(), SegmentError> {
        match w {
            Write::NewJob {
                id,
                userid,
                jobspec,
            } => {
                let id = to_sql_id(*id);
                self.new_at.insert(id, self.new.len());
                self.new.push((
                    id,
                    Row {
                        userid: i64::from(*userid),
                        jobspec: jobspec.clone(),
                        ..Row::default()
                    },
                ));
            }
            Write::Append { id, log, line } => {
                self.events.0.push(self.next_event);
                self.next_event += 1;
                self.events.1.push(to_sql_id(*id));
                self.events.2.push(log_code(*log));
                self.events.3.push(line.clone());
            }
            Write::SetR { id, r } => self.row(to_sql_id(*id)).r = Some(r.clone()),
            Write::Summary { id, summary } => {
                self.row(to_sql_id(*id)).summary = Some(summary.clone())
            }
            Write::IdempotencyKey { id, key } => self.row(to_sql_id(*id)).key = Some(key.clone()),
            Write::ResourceEvent { line } => {
                self.resource.0.push(self.next_resource);
                self.next_resource += 1;
                self.resource.1.push(line.clone());
            }
            Write::Meta { key, value } => {
                self.meta.insert(key.clone(), value.clone());
            }
            Write::Purge { id } => {
                self.flush(db, stmts)?;
                let id = [to_sql_id(*id)];
                db.execute(&stmts.purge_events, &[&&id[..]])?;
                db.execute(&stmts.purge_jobs, &[&&id[..]])?;
                self.statements += 2;
            }
            Write::ReplaceResourceEventlog { lines } => {
                self.flush(db, stmts)?;
                db.execute(&stmts.clear_resource, &[])?;
                self.statements += 1;
                for line in lines {
                    self.resource.0.push(self.next_resource);
                    self.next_resource += 1;
                    self.resource.1.push(line.clone());
                }
            }
        }
        Ok(())
    }

    /// Apply what is gathered as one statement (the fence always: a group
    /// with nothing else still records its number).
    pub fn flush(
        &mut self,
        db: &mut impl GenericClient,
        stmts: &Statements,
    ) -> Result<(), SegmentError> {
        let new = std::mem::take(&mut self.new);
        self.new_at.clear();
        let n = new.len();
        let (mut ids, mut users, mut specs, mut rs, mut sums, mut times, mut waits, mut keys) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::<Option<f64>>::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (id, row) in new {
            let (t, w) = row
                .summary
                .as_deref()
                .map_or((None, false), summary_columns);
            ids.push(id);
            users.push(row.userid);
            specs.push(row.jobspec);
            rs.push(row.r);
            sums.push(row.summary);
            times.push(t);
            waits.push(w);
            keys.push(row.key);
        }
        let updates = std::mem::take(&mut self.updates);
        let n = updates.len();
        let (mut u_ids, mut u_r, mut u_k, mut u_has, mut u_s, mut u_t, mut u_w) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::<Option<f64>>::with_capacity(n),
            Vec::with_capacity(n),
        );
        for (id, row) in updates {
            let (t, w) = row
                .summary
                .as_deref()
                .map_or((None, false), summary_columns);
            u_ids.push(id);
            u_r.push(row.r);
            u_k.push(row.key);
            u_has.push(row.summary.is_some());
            u_s.push(row.summary);
            u_t.push(t);
            u_w.push(w);
        }
        let (e_seq, e_id, e_log, e_line) = std::mem::take(&mut self.events);
        let (r_seq, r_line) = std::mem::take(&mut self.resource);
        let (m_keys, m_values): (Vec<String>, Vec<String>) =
            std::mem::take(&mut self.meta).into_iter().unzip();
        let fenced: i64 = db
            .query_one(
                &stmts.segment,
                &[
                    &self.number,
                    &self.epoch,
                    &ids,
                    &users,
                    &specs,
                    &rs,
                    &sums,
                    &times,
                    &waits,
                    &keys,
                    &e_seq,
                    &e_id,
                    &e_log,
                    &e_line,
                    &u_ids,
                    &u_r,
                    &u_k,
                    &u_has,
                    &u_s,
                    &u_t,
                    &u_w,
                    &r_seq,
                    &r_line,
                    &m_keys,
                    &m_values,
                ],
            )?
            .try_get(0)?;
        self.statements += 1;
        if fenced == 0 {
            return Err(SegmentError::Deposed);
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
