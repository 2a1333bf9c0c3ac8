//! The JobManager service's state (core inbox, store, hub, limits, site
//! policy) and the checks every RPC family shares: who owns a job, whether a
//! caller may act on it.

use std::sync::Arc;

use fluxgate_shared::JobId;
use fluxgate_shared::auth::{Action, Caller};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::allow;
use super::streams::StreamCaps;
use super::submit_parse::ParseGate;
use crate::config::Config;
use crate::core::Msg;
use crate::error::Error;
use crate::exec_client::ExecAccess;
use crate::hub::Hub;
use crate::policy::SitePolicy;
use crate::store::Store;

/// Most bytes of jobs or log lines in one `Info` or `List` reply: under
/// gRPC's default 4 MiB message limit with room for the framing, so every
/// client with default settings reads every page (one reply of 220 MB once
/// raised the service's memory by 860 MB and failed every such client).
pub const REPLY_MAX: usize = (4 << 20) - (64 << 10);

/// The JobManager service.
#[derive(Debug, Clone)]
pub struct JobManagerService<S> {
    pub(super) inbox: mpsc::Sender<Msg>,
    pub(super) store: Arc<S>,
    pub(super) hub: Hub,
    pub(super) config: Arc<Config>,
    pub(super) cancel: CancellationToken,
    /// Submitted jobspecs are read behind it, off the async workers.
    pub(super) parse_gate: Arc<ParseGate>,
    /// Queues and the policy applied to submitted jobs.
    pub(super) site: Arc<SitePolicy>,
    /// How exec services are called (their node credential, TLS), to ask
    /// a job's leader for its tasks.
    pub(super) exec: ExecAccess,
    /// Long-lived streams open per user.
    pub(super) streams: Arc<StreamCaps>,
}

impl<S: Store> JobManagerService<S> {
    /// A service over the core's inbox, the store (reads) and the hub (watchers).
    pub fn new(
        inbox: mpsc::Sender<Msg>,
        store: Arc<S>,
        hub: Hub,
        config: Arc<Config>,
        cancel: CancellationToken,
    ) -> Self {
        JobManagerService {
            inbox,
            store,
            hub,
            cancel,
            parse_gate: Arc::new(ParseGate::per_core()),
            site: Arc::default(),
            exec: ExecAccess::default(),
            streams: StreamCaps::new(config.limits.max_streams_per_user),
            config,
        }
    }

    /// Call exec services with `access` (the instance's node credential and
    /// exec TLS settings) when asking them for a job's tasks.
    pub fn with_exec_access(mut self, access: ExecAccess) -> Self {
        self.exec = access;
        self
    }

    /// Apply `site` (the core's, read at its start) to submitted jobs and
    /// show it in queue listings.
    pub fn with_site(mut self, site: Arc<SitePolicy>) -> Self {
        self.site = site;
        self
    }

    /// The owner of job `id`, as stored since its submission.
    async fn owner_of(&self, id: JobId) -> Result<u32, Error> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || store.read_job(id.into()))
            .await
            .map_err(|e| Error::Unavailable(format!("reading job {id}: {e}")))??
            .map(|job| job.userid)
            .ok_or(Error::UnknownJob(id))
    }

    /// Refuse `action` on job `id` unless `caller` may do it.
    pub(super) async fn authorize(
        &self,
        caller: &Caller,
        action: Action,
        id: u64,
    ) -> Result<(), Error> {
        let id = JobId::from(id);
        // The owner may act on any job; only guests need the job's owner.
        let owner = if caller.is_owner() {
            None
        } else {
            Some(self.owner_of(id).await?)
        };
        allow(caller, action, owner)
    }
}
