//! The gRPC edge toward exec services: start streams in, kills and exceptions out.
//! Proto messages stop here; the core sees [`ExecMsg`]s, delivered through
//! an [`ExecSink`]. [`GrpcExec`] is the core's [`ExecLink`] in service.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::start_response::Response;
use fluxgate_shared::JobId;
use fluxgate_shared::job::apply_jobspec_updates;
use serde_json::Value;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

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

/// The exec link over gRPC: start streams read into `sink`, the jobspec
/// read from `store`, every call carrying `access`.
#[derive(Debug)]
pub struct GrpcExec<S, K> {
    store: Arc<S>,
    sink: K,
    access: ExecAccess,
}

impl<S: Store, K: ExecSink> GrpcExec<S, K> {
    /// A link that reads jobspecs from `store` and answers into `sink`.
    pub fn new(store: Arc<S>, sink: K, access: ExecAccess) -> Self {
        GrpcExec {
            store,
            sink,
            access,
        }
    }
}

impl<S: Store, K: ExecSink> ExecLink for GrpcExec<S, K> {
    fn start(&self, job: StartJob) {
        start(
            job,
            Arc::clone(&self.store),
            self.sink.clone(),
            self.access.clone(),
        );
    }

    fn exception(&self, addr: String, id: JobId, kind: String, note: String) {
        exception(addr, id, kind, note, self.access.clone());
    }

    fn signal(&self, addr: String, id: JobId, signum: i32) {
        kill(addr, id, signum, self.access.clone());
    }

    fn expiration(&self, addr: String, id: JobId, expiration: f64) {
        expiration_to(addr, id, expiration, self.access.clone());
    }
}

/// Send the start request and feed every response to `sink`.
fn start<S: Store, K: ExecSink>(job: StartJob, store: Arc<S>, sink: K, credential: ExecAccess) {
    let reattach = if job.reattach { "true" } else { "false" };
    metrics::counter!(telemetry::EXEC_STARTS, "reattach" => reattach).increment(1);
    tokio::spawn(async move {
        let id = job.id;
        let lost = |error: String| ExecMsg::Lost { id, error };
        let outcome = run_start(job, store, &sink, &credential).await;
        if let Err(error) = outcome {
            metrics::counter!(telemetry::EXEC_LOST).increment(1);
            let _ = sink.deliver(lost(error)).await;
        }
    });
}

/// What a start request carries besides R: the jobspec as stored (durable
/// since submit, which was committed before any start) with its updates
/// applied, and the credential the job's tasks get as `FLUXGATE_TOKEN`
/// (empty when the instance runs open). Both need blocking work (a store
/// read; naming the owner reads the account database), done in one trip
/// off the runtime.
async fn start_inputs<S: Store>(store: Arc<S>, job: &StartJob) -> Result<(String, String), String> {
    let (credentials, id, uid, expiration) =
        (job.credentials.clone(), job.id, job.userid, job.expiration);
    let now = crate::clock::now().max(0.0) as u64;
    let (text, minted) = tokio::task::spawn_blocking(move || {
        (
            store.jobspec(id.into()),
            credentials.mint(id, uid, expiration, now),
        )
    })
    .await
    .map_err(|e| format!("reading the jobspec: {e}"))?;
    let text = text
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("job {id} has no stored jobspec"))?;
    let credential = minted.unwrap_or_else(|e| {
        tracing::error!(job = %id, error = %e, "cannot sign the job's credential");
        String::new()
    });
    if job.jobspec_updates.is_empty() {
        return Ok((text, credential));
    }
    let mut value: Value =
        serde_json::from_str(&text).map_err(|e| format!("stored jobspec: {e}"))?;
    apply_jobspec_updates(&job.jobspec_updates, &mut value);
    Ok((value.to_string(), credential))
}

async fn run_start<S: Store, K: ExecSink>(
    job: StartJob,
    store: Arc<S>,
    sink: &K,
    access: &ExecAccess,
) -> Result<(), String> {
    let id = job.id;
    let (jobspec, credential) = start_inputs(store, &job).await?;
    let mut client = ExecClient::new(channel(&job.leader, access)?);
    let req = pb::StartRequest {
        id: job.id.into(),
        userid: job.userid,
        jobspec,
        r: job.r,
        reattach: job.reattach,
        ranks: String::new(),
        peers: job.peers.into_iter().collect(),
        credential,
    };
    let mut stream = client
        .start(access.request(req))
        .await
        .map_err(|s| format!("{}: {}", job.leader, s.message()))?
        .into_inner();
    loop {
        let resp = match stream.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return Err("the start stream ended before the final release".into()),
            Err(s) => return Err(s.message().to_string()),
        };
        let Some(resp) = resp.response else {
            continue;
        };
        if let Response::Exception(e) = &resp {
            let severity = e.severity.min(7).to_string();
            metrics::counter!(telemetry::EXEC_EXCEPTIONS, "severity" => severity).increment(1);
        }
        let (msg, last) = match resp {
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
                },
                false,
            ),
            Response::ExecEvent(line) => (ExecMsg::ExecLine { id, line }, false),
            Response::OutputEvent(line) => (ExecMsg::OutputLine { id, line }, false),
        };
        if !sink.deliver(msg).await {
            return Ok(());
        }
        if last {
            read_to_end(&mut stream).await;
            return Ok(());
        }
    }
}

/// How long a start stream may stay open after its final release.
const STREAM_END_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Read a start stream to its end after the final release. Dropping it
/// before resets it, and h2 allows a connection only so many streams reset
/// by this side (1024) before it drops the connection, and with it every
/// start stream on it: under load, jobs failed with "lost contact".
async fn read_to_end(stream: &mut tonic::Streaming<pb::StartResponse>) {
    let _ = tokio::time::timeout(STREAM_END_WAIT, async {
        while let Ok(Some(_)) = stream.message().await {}
    })
    .await;
}

/// Send one request to a job's leader exec service in the background; a
/// failure is only logged (the job's start stream reports what matters).
fn tell<F, Fut>(addr: String, id: JobId, credential: ExecAccess, what: &'static str, call: F)
where
    F: FnOnce(ExecClient<Channel>, ExecAccess) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<(), tonic::Status>> + Send,
{
    tokio::spawn(async move {
        let result = match channel(&addr, &credential) {
            Ok(c) => call(ExecClient::new(c), credential)
                .await
                .map_err(|s| s.message().to_string()),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::warn!(job = %id, error = %e, "cannot deliver {what} to exec");
        }
    });
}

/// Deliver a fatal exception to the job's leader exec service.
fn exception(addr: String, id: JobId, kind: String, note: String, credential: ExecAccess) {
    tell(
        addr,
        id,
        credential,
        "exception",
        move |mut c, cred| async move {
            let request = cred.request(pb::ExecExceptionRequest {
                id: id.into(),
                r#type: kind,
                severity: 0,
                note,
            });
            c.exception(request).await.map(drop)
        },
    );
}

/// Signal the job's tasks through its leader exec service.
fn kill(addr: String, id: JobId, signum: i32, credential: ExecAccess) {
    tell(
        addr,
        id,
        credential,
        "signal",
        move |mut c, cred| async move {
            let request = cred.request(pb::ExecKillRequest {
                id: id.into(),
                signum,
            });
            c.kill(request).await.map(drop)
        },
    );
}

/// Tell the job's leader exec service its new R expiration (RFC 32 practice:
/// the execution system hears a running job's `resource-update`).
fn expiration_to(addr: String, id: JobId, expiration: f64, credential: ExecAccess) {
    tell(
        addr,
        id,
        credential,
        "expiration",
        move |mut c, cred| async move {
            let request = cred.request(pb::ExpirationRequest {
                id: id.into(),
                expiration,
            });
            c.expiration(request).await.map(drop)
        },
    );
}
