//! The on-disk format: SQLite tables and the format version that guards them.
//!
//! Format history (bump [`FORMAT_VERSION`] and add a migration for each change):
//! - 1: jobs, events (per job and log, in insertion order), resource_events, meta.
//! - 2: jobs.summary, an inactive job's summary, so a restart need not replay it.
//! - 3: jobs.t_inactive and jobs.waitable, taken from the summary, with
//!   partial indexes of the active jobs, of the inactive ones by age and of
//!   the waitable ones, and a count of inactive jobs kept by triggers:
//!   inactive jobs stay in the store and are read from it on demand, so a
//!   start reads only what is active.
//! - 4: jobs.idem_key, the key a submitter gave its job (a retried submit
//!   answers the job it made), indexed by owner and key.
//! - 5: events.n: a row holds the `n` lines (joined by newlines) that one
//!   batch appended to one job's log, up to about 16 KiB a row, so a job
//!   costs a few rows, index entries and WAL frames, not one of each per
//!   eventlog line. Rows of older formats hold one line each, `n = 1`.
//!
//! Not a format change: `events.log` 3 holds a job's `usage` (one JSON
//! document a line, as its exec services reported it at its end). Builds
//! that predate it read logs by code and never see those rows; a purge
//! removes them with the job's other rows.
//!
//! The PostgreSQL store (`postgres/schema.rs`) shares these numbers.

use rusqlite::{Connection, OptionalExtension};

/// Version of the on-disk format this build writes.
pub const FORMAT_VERSION: i64 = 5;

const APPLICATION_ID: i64 = 0x464c_5847; // "FLXG"

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs (
    id      INTEGER PRIMARY KEY,
    userid  INTEGER NOT NULL,
    jobspec TEXT NOT NULL,
    r       TEXT,
    summary TEXT,
    t_inactive REAL,
    waitable INTEGER NOT NULL DEFAULT 0,
    idem_key TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs (userid, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_by_age ON jobs (t_inactive, id) WHERE t_inactive IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_waitable ON jobs (id) WHERE waitable != 0;
CREATE INDEX IF NOT EXISTS jobs_active ON jobs (id) WHERE t_inactive IS NULL;
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    n    INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO counters (name, n)
    SELECT 'inactive', count(*) FROM jobs WHERE t_inactive IS NOT NULL;
CREATE TRIGGER IF NOT EXISTS jobs_inactive_set AFTER UPDATE OF t_inactive ON jobs
    WHEN (old.t_inactive IS NULL) != (new.t_inactive IS NULL)
    BEGIN
        UPDATE counters SET n = n + (CASE WHEN new.t_inactive IS NULL THEN -1 ELSE 1 END)
            WHERE name = 'inactive';
    END;
CREATE TRIGGER IF NOT EXISTS jobs_inactive_gone AFTER DELETE ON jobs
    WHEN old.t_inactive IS NOT NULL
    BEGIN
        UPDATE counters SET n = n - 1 WHERE name = 'inactive';
    END;
CREATE TABLE IF NOT EXISTS events (
    seq    INTEGER PRIMARY KEY,
    job_id INTEGER NOT NULL,
    log    INTEGER NOT NULL,
    line   TEXT NOT NULL,
    n      INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job_id, log, seq);
CREATE TABLE IF NOT EXISTS resource_events (
    seq  INTEGER PRIMARY KEY,
    line TEXT NOT NULL
);
";

/// Set the connection options every connection uses.
pub fn configure(conn: &Connection) -> rusqlite::Result<()> {
    // WAL lets readers run beside the single writer; FULL fsyncs each commit, so
    // an acknowledged write survives power loss, not only a crash.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Each batch is applied in a savepoint, whose statement journal is a
    // temporary file by default: one write(2) per page a batch touches.
    // Kept in memory it costs no system call (and never needs to be durable).
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    Ok(())
}

/// Meta key: "1" once the writer stopped after a clean shutdown, "0" while
/// a job manager has the store open (so a crash leaves "0").
pub const CLEAN_CLOSE_KEY: &str = "clean_close";

/// Run SQLite's quick integrity check of the whole file (it reads every page).
pub fn quick_check(conn: &Connection) -> Result<(), String> {
    let check: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(|e| format!("integrity check failed to run: {e}"))?;
    if check != "ok" {
        return Err(format!(
            "is damaged ({check}); restore it from a backup or move it away to start empty"
        ));
    }
    Ok(())
}

/// Record whether the store is closed cleanly (see [`CLEAN_CLOSE_KEY`]).
pub fn set_clean_close(conn: &Connection, clean: bool) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [CLEAN_CLOSE_KEY, if clean { "1" } else { "0" }],
    )
    .map(|_| ())
}

/// Was the store last closed cleanly?
pub fn closed_cleanly(conn: &Connection) -> bool {
    conn.query_row(
        "SELECT value FROM meta WHERE key = ?1",
        [CLEAN_CLOSE_KEY],
        |r| r.get::<_, String>(0),
    )
    .is_ok_and(|v| v == "1")
}

/// Create a fresh store, or check that an existing one is ours, run `pages`
/// (which checks its pages, or says the check is owed), check that it is
/// not newer and upgrade it. What `pages` answered (false when fresh).
pub fn open_check(
    conn: &Connection,
    pages: impl FnOnce(&Connection) -> Result<bool, String>,
) -> Result<bool, String> {
    let app_id: i64 = conn
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .map_err(|e| format!("not a readable SQLite database ({e})"))?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
        .map_err(|e| format!("not a readable SQLite database ({e})"))?;
    if tables == 0 {
        conn.execute_batch(SCHEMA)
            .map_err(|e| format!("cannot create tables: {e}"))?;
        conn.pragma_update(None, "application_id", APPLICATION_ID)
            .map_err(|e| e.to_string())?;
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('format_version', ?1)",
            [FORMAT_VERSION.to_string()],
        )
        .map_err(|e| e.to_string())?;
        return Ok(false);
    }
    if app_id != APPLICATION_ID {
        return Err("exists but is not a fluxgate store (refusing to touch it)".into());
    }
    let owed = pages(conn)?;
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'format_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| format!("cannot read the format version: {e}"))?;
    let version: i64 = version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .ok_or("has no format version; it is damaged or not a fluxgate store")?;
    if version > FORMAT_VERSION {
        return Err(format!(
            "has format {version}, newer than this build's {FORMAT_VERSION}; upgrade fluxgate"
        ));
    }
    migrate(conn, version)?;
    Ok(owed)
}

/// Bring a store of an older format up to [`FORMAT_VERSION`], in one transaction.
fn migrate(conn: &Connection, from: i64) -> Result<(), String> {
    if from == FORMAT_VERSION {
        return Ok(());
    }
    let steps: &[(i64, &str)] = &[
        (1, "ALTER TABLE jobs ADD COLUMN summary TEXT;"),
        (
            2,
            "ALTER TABLE jobs ADD COLUMN t_inactive REAL; \
             ALTER TABLE jobs ADD COLUMN waitable INTEGER NOT NULL DEFAULT 0; \
             UPDATE jobs SET t_inactive = json_extract(summary, '$.t_inactive'), \
                 waitable = coalesce(json_extract(summary, '$.waitable'), 0) \
                 WHERE summary IS NOT NULL AND json_valid(summary);",
        ),
        (3, "ALTER TABLE jobs ADD COLUMN idem_key TEXT;"),
        (
            4,
            "ALTER TABLE events ADD COLUMN n INTEGER NOT NULL DEFAULT 1;",
        ),
    ];
    let mut sql = String::from("BEGIN IMMEDIATE;");
    for (version, step) in steps {
        if *version >= from {
            sql.push_str(step);
        }
    }
    // What the steps did not make (indexes, tables, triggers) the schema
    // makes now: every statement of it is IF NOT EXISTS.
    sql.push_str(SCHEMA);
    sql.push_str(&format!(
        "UPDATE meta SET value = '{FORMAT_VERSION}' WHERE key = 'format_version'; COMMIT;"
    ));
    conn.execute_batch(&sql).map_err(|e| {
        let _ = conn.execute_batch("ROLLBACK;");
        format!("cannot upgrade from format {from} to {FORMAT_VERSION}: {e}")
    })?;
    tracing::info!(from, to = FORMAT_VERSION, "store format upgraded");
    Ok(())
}
