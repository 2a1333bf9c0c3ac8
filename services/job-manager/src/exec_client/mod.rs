//! The gRPC edge toward exec services: starts, kills, exceptions and
//! expirations out, every job's responses in, over one session per exec
//! service. Proto messages stop here; the core sees [`ExecMsg`]s, delivered
//! through an [`ExecSink`]. [`GrpcExec`] is the core's [`ExecLink`] in service.
//! The gRPC edge asks a job's leader for its tasks' processes ([`tasks`]).

mod access;
mod gone;
pub mod input;
mod response;
mod session;
pub mod tasks;
mod usage;

use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::session_request::Request;
use fluxgate_shared::JobId;
use fluxgate_shared::auth::token::TokenError;
use fluxgate_shared::job::apply_jobspec_updates;
use serde_json::Value;

pub use self::access::ExecAccess;
use self::session::{Outgoing, Prepared, Sessions};
use crate::exec_link::{ExecLink, ExecSink, StartJob};
use crate::store::Store;
use crate::telemetry;

/// The exec link over gRPC: one session per exec service carries every
/// request and answer (`session.rs`); start requests take their jobspec
/// from `store`; every call carries `access`.
#[derive(Debug)]
pub struct GrpcExec<S, K> {
    store: Arc<S>,
    sessions: Arc<Sessions<K>>,
}

impl<S: Store, K: ExecSink> GrpcExec<S, K> {
    /// A link that reads jobspecs from `store` and answers into `sink`.
    pub fn new(store: Arc<S>, sink: K, access: ExecAccess) -> Self {
        GrpcExec {
            store,
            sessions: Sessions::new(sink, access),
        }
    }
}

impl<S: Store, K: ExecSink> ExecLink for GrpcExec<S, K> {
    fn start(&self, job: StartJob) {
        let reattach = if job.reattach { "true" } else { "false" };
        metrics::counter!(telemetry::EXEC_STARTS, "reattach" => reattach).increment(1);
        let (id, leader) = (job.id, job.leader.clone());
        // Sent in the order asked (see `session.rs`): at once when all it
        // needs is at hand, else once a task of its own has prepared it.
        let request = match ready_request(job, &*self.store) {
            Ok(ready) => Prepared::Ready(ready),
            Err(job) => {
                Prepared::Pending(tokio::spawn(start_request(*job, Arc::clone(&self.store))))
            }
        };
        self.sessions.send(&leader, Outgoing::Start { id, request });
    }

    fn exception(&self, addr: String, id: JobId, kind: String, note: String) {
        let request = Request::Exception(pb::ExecExceptionRequest {
            id: id.into(),
            r#type: kind,
            severity: 0,
            note,
        });
        self.sessions.send(&addr, Outgoing::Now(request));
    }

    fn signal(&self, addr: String, id: JobId, signum: i32) {
        let request = Request::Kill(pb::ExecKillRequest {
            id: id.into(),
            signum,
        });
        self.sessions.send(&addr, Outgoing::Now(request));
    }

    fn expiration(&self, addr: String, id: JobId, expiration: f64) {
        let request = Request::Expiration(pb::ExpirationRequest {
            id: id.into(),
            expiration,
        });
        self.sessions.send(&addr, Outgoing::Now(request));
    }

    fn confirm_gone(&self, addr: String, id: JobId, rank: u32) {
        let (sink, access) = self.sessions.link();
        tokio::spawn(gone::confirm(sink, access, addr, id, rank));
    }
}

/// Seconds since the epoch, for a credential's issue time.
fn now_secs() -> u64 {
    crate::clock::now().max(0.0) as u64
}

/// The start request of `job` when everything it needs is at hand, as for
/// most jobs, which start soon after their submit: the jobspec still in
/// memory, the owner's login name already looked up. `Err(job)` when
/// getting either would block (a store read, an account lookup).
fn ready_request<S: Store>(
    job: StartJob,
    store: &S,
) -> Result<Result<pb::StartRequest, String>, Box<StartJob>> {
    let Some(minted) = job
        .credentials
        .try_mint(job.id, job.userid, job.expiration, now_secs())
    else {
        return Err(Box::new(job));
    };
    let Some(text) = store.take_recent_jobspec(job.id.into()) else {
        return Err(Box::new(job));
    };
    Ok(request_from(job, text, minted))
}

/// What a start request carries besides R: the jobspec as stored (durable
/// since submit, which was committed before any start) and the credential
/// the job's tasks get as `FLUXGATE_TOKEN`, made off the runtime when that
/// needs blocking work (a store read; naming the owner reads the account
/// database), in one trip.
async fn start_inputs<S: Store>(
    store: Arc<S>,
    job: &StartJob,
) -> Result<(String, Result<String, TokenError>), String> {
    let (credentials, id, uid, expiration) =
        (job.credentials.clone(), job.id, job.userid, job.expiration);
    let now = now_secs();
    let blocking = |e: tokio::task::JoinError| format!("reading the jobspec: {e}");
    let (text, minted) = match store.take_recent_jobspec(id.into()) {
        // The owner's name is looked up off the runtime: it may be a
        // directory service's round trip.
        Some(text) => {
            let minted =
                tokio::task::spawn_blocking(move || credentials.mint(id, uid, expiration, now))
                    .await
                    .map_err(blocking)?;
            (Ok(Some(text)), minted)
        }
        None => tokio::task::spawn_blocking(move || {
            (
                store.jobspec(id.into()),
                credentials.mint(id, uid, expiration, now),
            )
        })
        .await
        .map_err(blocking)?,
    };
    let text = text
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("job {id} has no stored jobspec"))?;
    Ok((text, minted))
}

/// The start request for `job`, to its leader (all of R), once its inputs
/// are read.
async fn start_request<S: Store>(job: StartJob, store: Arc<S>) -> Result<pb::StartRequest, String> {
    let (text, minted) = start_inputs(store, &job).await?;
    request_from(job, text, minted)
}

/// The start request for `job` from its stored jobspec `text` (updates
/// applied here) and its minted credential.
fn request_from(
    job: StartJob,
    text: String,
    minted: Result<String, TokenError>,
) -> Result<pb::StartRequest, String> {
    let credential = minted.unwrap_or_else(|e| {
        tracing::error!(job = %job.id, error = %e, "cannot sign the job's credential");
        String::new()
    });
    let jobspec = if job.jobspec_updates.is_empty() {
        text
    } else {
        let mut value: Value =
            serde_json::from_str(&text).map_err(|e| format!("stored jobspec: {e}"))?;
        apply_jobspec_updates(&job.jobspec_updates, &mut value);
        value.to_string()
    };
    Ok(pb::StartRequest {
        id: job.id.into(),
        userid: job.userid,
        jobspec,
        r: job.r,
        reattach: job.reattach,
        ranks: String::new(),
        peers: job.peers.into_iter().collect(),
        credential,
    })
}
