//! The store a job manager runs on, chosen at start: the embedded SQLite
//! file or PostgreSQL. One type, so that the core and the services are
//! built once, not once per backend.

use tokio::sync::mpsc;

use super::writer::Request;
use super::{
    Ack, Batch, CommitStats, Log, LogPos, PgStore, SqliteStore, Store, StoreError, StoredJob,
    Urgency,
};

/// Either backend. Held once, behind an `Arc`, so the variants' sizes do
/// not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum AnyStore {
    /// One SQLite file in the state directory.
    Sqlite(SqliteStore),
    /// A PostgreSQL database shared with standby job managers.
    Postgres(PgStore),
}

impl AnyStore {
    fn sender(&self) -> Option<mpsc::Sender<Request>> {
        match self {
            AnyStore::Sqlite(s) => s.sender(),
            AnyStore::Postgres(s) => s.sender(),
        }
    }

    /// This job manager stepped down (PostgreSQL only: see
    /// [`PgStore::abandon`]); the SQLite store has no lead to lose.
    pub fn abandon(&self) {
        if let AnyStore::Postgres(s) = self {
            s.abandon();
        }
    }

    /// The SQLite store, when that is the backend.
    pub fn sqlite(&self) -> Option<&SqliteStore> {
        match self {
            AnyStore::Sqlite(s) => Some(s),
            AnyStore::Postgres(_) => None,
        }
    }
}

impl Store for AnyStore {
    fn enqueue_with(
        &self,
        batch: Batch,
        urgency: Urgency,
    ) -> impl std::future::Future<Output = Result<Ack, StoreError>> + Send {
        super::writer::enqueue(self.sender(), batch, urgency)
    }

    fn take_recent_jobspec(&self, id: u64) -> Option<String> {
        match self {
            AnyStore::Sqlite(s) => s.take_recent_jobspec(id),
            AnyStore::Postgres(s) => s.take_recent_jobspec(id),
        }
    }

    fn read_log(&self, id: u64, log: Log) -> Result<Option<Vec<String>>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.read_log(id, log),
            AnyStore::Postgres(s) => s.read_log(id, log),
        }
    }

    fn read_log_page(
        &self,
        id: u64,
        log: Log,
        from: LogPos,
        limit: usize,
    ) -> Result<(Vec<String>, LogPos), StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.read_log_page(id, log, from, limit),
            AnyStore::Postgres(s) => s.read_log_page(id, log, from, limit),
        }
    }

    fn log_len(&self, id: u64, log: Log) -> Result<u64, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.log_len(id, log),
            AnyStore::Postgres(s) => s.log_len(id, log),
        }
    }

    fn jobspec(&self, id: u64) -> Result<Option<String>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.jobspec(id),
            AnyStore::Postgres(s) => s.jobspec(id),
        }
    }

    fn read_job(&self, id: u64) -> Result<Option<StoredJob>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.read_job(id),
            AnyStore::Postgres(s) => s.read_job(id),
        }
    }

    fn load_jobs(&self) -> Result<Vec<StoredJob>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.load_jobs(),
            AnyStore::Postgres(s) => s.load_jobs(),
        }
    }

    fn summary(&self, id: u64) -> Result<Option<Option<String>>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.summary(id),
            AnyStore::Postgres(s) => s.summary(id),
        }
    }

    fn max_job_id(&self) -> Result<Option<u64>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.max_job_id(),
            AnyStore::Postgres(s) => s.max_job_id(),
        }
    }

    fn inactive_count(&self) -> Result<u64, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.inactive_count(),
            AnyStore::Postgres(s) => s.inactive_count(),
        }
    }

    fn inactive_before(&self, t: f64) -> Result<u64, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.inactive_before(t),
            AnyStore::Postgres(s) => s.inactive_before(t),
        }
    }

    fn oldest_inactive(&self, limit: usize) -> Result<Vec<(f64, u64)>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.oldest_inactive(limit),
            AnyStore::Postgres(s) => s.oldest_inactive(limit),
        }
    }

    fn waitable_ids(&self) -> Result<Vec<u64>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.waitable_ids(),
            AnyStore::Postgres(s) => s.waitable_ids(),
        }
    }

    fn scan_inactive_below(
        &self,
        userid: Option<u32>,
        since: Option<f64>,
        before: Option<u64>,
        visit: &mut dyn FnMut(u64, &str) -> bool,
    ) -> Result<(), StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.scan_inactive_below(userid, since, before, visit),
            AnyStore::Postgres(s) => s.scan_inactive_below(userid, since, before, visit),
        }
    }

    fn resource_eventlog(&self) -> Result<Vec<String>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.resource_eventlog(),
            AnyStore::Postgres(s) => s.resource_eventlog(),
        }
    }

    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.meta(key),
            AnyStore::Postgres(s) => s.meta(key),
        }
    }

    fn job_by_key(&self, userid: u32, key: &str) -> Result<Option<u64>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.job_by_key(userid, key),
            AnyStore::Postgres(s) => s.job_by_key(userid, key),
        }
    }

    fn active_log_lens(
        &self,
    ) -> Result<Option<std::collections::HashMap<u64, [u64; 2]>>, StoreError> {
        match self {
            AnyStore::Sqlite(s) => s.active_log_lens(),
            AnyStore::Postgres(s) => s.active_log_lens(),
        }
    }

    fn stats(&self) -> CommitStats {
        match self {
            AnyStore::Sqlite(s) => s.stats(),
            AnyStore::Postgres(s) => s.stats(),
        }
    }
}
