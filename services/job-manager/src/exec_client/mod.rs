//! The gRPC edge toward exec services: starts, kills, exceptions and
//! expirations out, every job's responses in, over one session per exec
//! service. Proto messages stop here; the core sees [`ExecMsg`]s, delivered
//! through an [`ExecSink`]. [`GrpcExec`] is the core's [`ExecLink`] in service.
//! The gRPC edge asks a job's leader for its tasks' processes ([`tasks`]).

pub mod input;
mod session;
pub mod tasks;
mod usage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::session_request::Request;
use fluxgate_proto::v1::start_response::Response;
use fluxgate_shared::JobId;
use fluxgate_shared::auth::token::TokenError;
use fluxgate_shared::job::apply_jobspec_updates;
use serde_json::Value;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use self::session::{Outgoing, Prepared, Sessions};
use crate::exec_link::{ExecLink, ExecMsg, ExecSink, StartJob};
use crate::store::Store;
use crate::telemetry;

/// How the job manager reaches exec services: the node credential sent on
/// every call, so that they run only what the job manager asks (none when
/// the instance runs open), and the TLS settings for https exec addresses.
#[derive(Clone, Default)]
pub struct ExecAccess {
    header: Option<AsciiMetadataValue>,
    tls: Option<ClientTlsConfig>,
}

impl std::fmt::Debug for ExecAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        f.debug_struct("ExecAccess")
            .field("credential", &self.header.is_some())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl ExecAccess {
    /// Access with `token` (the instance's node token), if any, checking
    /// exec services' certificates against the PEM CA `tls_ca`, if any.
    pub fn new(token: Option<&str>, tls_ca: Option<&[u8]>) -> Result<Self, String> {
        let header = token
            .map(|t| {
                format!("Bearer {}", t.trim())
                    .parse()
                    .map_err(|_| "the node token is not valid header text".to_string())
            })
            .transpose()?;
        let tls = tls_ca.map(|ca| ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)));
        Ok(ExecAccess { header, tls })
    }

    /// `message` as a request carrying the credential.
    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(v) = &self.header {
            request.metadata_mut().insert("authorization", v.clone());
        }
        request
    }
}

/// One multiplexed connection per exec address, made on first use.
fn channel(addr: &str, access: &ExecAccess) -> Result<Channel, String> {
    static CHANNELS: OnceLock<Mutex<HashMap<String, Channel>>> = OnceLock::new();
    let map = CHANNELS.get_or_init(Default::default);
    let mut map = map
        .lock()
        .map_err(|_| "channel cache poisoned".to_string())?;
    if let Some(c) = map.get(addr) {
        return Ok(c.clone());
    }
    let mut endpoint = Endpoint::from_shared(addr.to_string())
        .map_err(|e| format!("bad exec address {addr:?}: {e}"))?
        .connect_timeout(std::time::Duration::from_secs(5))
        // A session whose exec service is cut off on the network breaks in
        // seconds (its jobs are then reattached or fenced, see core/exec.rs),
        // not when TCP gives up after many minutes.
        .http2_keep_alive_interval(fluxgate_setup::conns::CLIENT_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(fluxgate_setup::conns::CLIENT_KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true)
        .initial_connection_window_size(fluxgate_proto::wire::CONNECTION_WINDOW);
    if addr.starts_with("https://") {
        let tls = access.tls.clone().ok_or_else(|| {
            format!("exec service {addr} serves TLS: set exec.tls_ca to the CA of its certificate")
        })?;
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| format!("TLS toward {addr}: {e}"))?;
    }
    let c = endpoint.connect_lazy();
    map.insert(addr.to_string(), c.clone());
    Ok(c)
}

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

/// What one start response says, for the core; `None` for an empty one.
/// The flag is true for the job's final release.
fn to_msg(resp: pb::StartResponse) -> Option<(ExecMsg, bool)> {
    let id = JobId::from(resp.id);
    let resp = resp.response?;
    if let Response::Exception(e) = &resp {
        let severity = e.severity.min(7).to_string();
        metrics::counter!(telemetry::EXEC_EXCEPTIONS, "severity" => severity).increment(1);
    }
    Some(match resp {
        Response::Start(_) => (ExecMsg::Started { id }, false),
        Response::Reattached(_) => (ExecMsg::Reattached { id }, false),
        Response::Release(r) => (
            ExecMsg::Release {
                id,
                ranks: r.ranks,
                last: r.r#final,
            },
            r.r#final,
        ),
        Response::Exception(e) => (
            ExecMsg::Exception {
                id,
                kind: e.r#type,
                severity: u8::try_from(e.severity.min(7)).unwrap_or(7),
                note: e.note,
            },
            false,
        ),
        Response::Finish(f) => (
            ExecMsg::Finish {
                id,
                status: f.status,
                usage: usage::from_wire(&f.usage),
            },
            false,
        ),
        Response::ExecEvent(line) => (ExecMsg::ExecLine { id, line }, false),
        Response::OutputEvent(line) => (ExecMsg::OutputLine { id, line }, false),
        // A leader consumes its peers' PMI keys; nothing for the job manager.
        Response::Pmi(_) => return None,
    })
}
