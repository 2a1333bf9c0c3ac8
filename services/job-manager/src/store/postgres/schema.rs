//! The PostgreSQL tables, created and upgraded by the job manager.
//!
//! Format numbers are the SQLite store's (`store/schema.rs`); PostgreSQL
//! stores begin at format 4, so their history starts there:
//! - 4: jobs (with summary, t_inactive, waitable, idem_key), events,
//!   resource_events, meta, and `leader`: the elected job manager, its
//!   epoch (every commit checks it) and its lease.
//! - 5: nothing changes here. (SQLite rows began to hold several lines; a
//!   PostgreSQL row still holds one, as its group is one statement already.)
//!
//! `events.log` 3 is a job's `usage`, as in the SQLite store (no change of
//! tables).

use postgres::Client;

use super::connect::describe;
use crate::store::schema::FORMAT_VERSION;

/// Advisory lock taken while the schema is created or upgraded, so that two
/// job managers starting together do not both run it.
const SCHEMA_LOCK: i64 = 0x464c_5847_0001;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id         BIGINT PRIMARY KEY,
    userid     BIGINT NOT NULL,
    jobspec    TEXT NOT NULL,
    r          TEXT,
    summary    TEXT,
    t_inactive DOUBLE PRECISION,
    waitable   BOOLEAN NOT NULL DEFAULT false,
    idem_key   TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_age ON jobs (t_inactive, id) WHERE t_inactive IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_waitable ON jobs (id) WHERE waitable;
CREATE INDEX IF NOT EXISTS jobs_active ON jobs (id) WHERE t_inactive IS NULL;
CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs (userid, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS events (
    seq    BIGINT PRIMARY KEY,
    job_id BIGINT NOT NULL,
    log    SMALLINT NOT NULL,
    line   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_id, log, seq);
CREATE TABLE IF NOT EXISTS resource_events (
    seq  BIGINT PRIMARY KEY,
    line TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS leader (
    id         INT PRIMARY KEY CHECK (id = 1),
    epoch      BIGINT NOT NULL,
    uri        TEXT NOT NULL,
    pid        INT NOT NULL,
    renewed    TIMESTAMPTZ NOT NULL,
    holder     TEXT NOT NULL DEFAULT '',
    last_group BIGINT NOT NULL DEFAULT 0
);
";

/// Create the tables on an empty database, or check that an existing one
/// is a Fluxgate store this build can use; never touches foreign tables.
pub fn prepare(client: &mut Client) -> Result<(), String> {
    let mut tx = client
        .transaction()
        .map_err(|e| format!("cannot begin: {}", describe(&e)))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .map_err(|e| format!("cannot lock the schema: {}", describe(&e)))?;
    let has_meta: bool = tx
        .query_one("SELECT to_regclass('meta') IS NOT NULL", &[])
        .and_then(|r| r.try_get(0))
        .map_err(|e| format!("cannot read the catalog: {}", describe(&e)))?;
    if has_meta {
        let version: Option<String> = tx
            .query_opt("SELECT value FROM meta WHERE key = 'format_version'", &[])
            .map_err(|e| format!("cannot read the format version: {}", describe(&e)))?
            .map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| format!("cannot read the format version: {}", describe(&e)))?;
        let version: i64 = version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .ok_or("has a meta table but no format version: not a fluxgate store")?;
        if version > FORMAT_VERSION {
            return Err(format!(
                "has format {version}, newer than this build's {FORMAT_VERSION}; upgrade fluxgate"
            ));
        }
        if version < 4 {
            return Err(format!(
                "has format {version}, which no PostgreSQL store has"
            ));
        }
        // Later formats add their steps here, each from the one before.
    } else {
        tx.batch_execute(SCHEMA)
            .map_err(|e| format!("cannot create tables: {}", describe(&e)))?;
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('format_version', $1)",
            &[&FORMAT_VERSION.to_string()],
        )
        .map_err(|e| format!("cannot record the format: {}", describe(&e)))?;
    }
    tx.commit()
        .map_err(|e| format!("cannot commit the schema: {}", describe(&e)))
}
