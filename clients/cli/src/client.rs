//! Reaching an instance: `FLUXGATE_URI`, a small runtime, and gRPC errors
//! turned into the one-line messages flux tools print.

use std::fmt;
use std::time::Duration;

use anyhow::{Context, anyhow};
use fluxgate_proto::v1::job_manager_client::JobManagerClient;
use fluxgate_proto::v1::resource_client::ResourceClient;
use fluxgate_shared::JobId;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The environment variable naming the instance, as `FLUX_URI` does for flux.
pub const URI_ENV: &str = "FLUXGATE_URI";
/// The environment variable holding the caller's token.
pub const TOKEN_ENV: &str = "FLUXGATE_TOKEN";
/// PEM CA certificate that signs an https instance's certificate.
pub const TLS_CA_ENV: &str = "FLUXGATE_TLS_CA";
/// PEM client certificate (mTLS; its CN is the user name).
pub const CLIENT_CERT_ENV: &str = "FLUXGATE_CLIENT_CERT";
/// PEM private key of the client certificate.
pub const CLIENT_KEY_ENV: &str = "FLUXGATE_CLIENT_KEY";

/// The environment variable bounding each call, in seconds (`0`: no bound).
pub const TIMEOUT_ENV: &str = "FLUXGATE_TIMEOUT";

/// How long one call may wait for its answer unless `FLUXGATE_TIMEOUT`
/// says otherwise: long enough for a batch of a thousand submits on a busy
/// job manager, short enough that a user whose answer was lost on the
/// network hears so (a lost reply once went unnoticed for 11 minutes).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Calls that last as long as what they follow (a job's eventlog, its
/// end, its input, the journals): no overall bound; the connection's
/// HTTP/2 keepalive notices a peer that went silent instead.
const OPEN_ENDED: &[&str] = &[
    "WatchEventlog",
    "Journal",
    "Acquire",
    "Eventlog",
    "Wait",
    "Input",
];

/// Whether a call of `method` has no overall bound.
pub fn open_ended(method: &str) -> bool {
    OPEN_ENDED.contains(&method)
}

/// Between HTTP/2 pings on an idle or busy connection.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// A ping unanswered this long breaks the connection.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long making a connection may take (a SYN to a host cut off is
/// otherwise retried by the kernel for minutes).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The bound on one call from `FLUXGATE_TIMEOUT` (seconds, fractions
/// allowed; `0` for none), else [`DEFAULT_CALL_TIMEOUT`].
pub fn call_timeout_from(value: Option<&str>) -> anyhow::Result<Option<Duration>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Some(DEFAULT_CALL_TIMEOUT));
    };
    let secs: f64 = v
        .parse()
        .ok()
        .filter(|s: &f64| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| anyhow!("{TIMEOUT_ENV}={v:?}: expected seconds (0 for no bound)"))?;
    Ok((secs > 0.0).then(|| Duration::from_secs_f64(secs.min(1e6))))
}

/// What a client proves itself with: a token, TLS settings, both or neither;
/// and how long each of its calls may wait.
#[derive(Clone)]
pub struct Credentials {
    token: Option<AsciiMetadataValue>,
    tls: Option<ClientTlsConfig>,
    timeout: Option<Duration>,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials {
            token: None,
            tls: None,
            timeout: Some(DEFAULT_CALL_TIMEOUT),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token itself.
        f.debug_struct("Credentials")
            .field("token", &self.token.is_some())
            .field("tls", &self.tls.is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Credentials {
    /// From `FLUXGATE_TOKEN`, `FLUXGATE_TLS_CA`, `FLUXGATE_CLIENT_CERT` and `FLUXGATE_CLIENT_KEY`.
    pub fn from_env() -> anyhow::Result<Credentials> {
        let mut creds = Credentials {
            timeout: call_timeout_from(env(TIMEOUT_ENV).as_deref())?,
            ..Credentials::default()
        };
        if let Some(token) = env(TOKEN_ENV) {
            creds = creds.with_token(&token)?;
        }
        let read = |name: &str, path: &str| {
            std::fs::read(path).with_context(|| format!("{name}={path}: cannot read it"))
        };
        let ca = env(TLS_CA_ENV);
        let cert = env(CLIENT_CERT_ENV);
        let key = env(CLIENT_KEY_ENV);
        if ca.is_some() || cert.is_some() || key.is_some() {
            let mut tls = ClientTlsConfig::new();
            if let Some(ca) = &ca {
                tls = tls.ca_certificate(Certificate::from_pem(read(TLS_CA_ENV, ca)?));
            }
            match (&cert, &key) {
                (Some(c), Some(k)) => {
                    tls = tls.identity(Identity::from_pem(
                        read(CLIENT_CERT_ENV, c)?,
                        read(CLIENT_KEY_ENV, k)?,
                    ));
                }
                (None, None) => {}
                _ => {
                    return Err(anyhow!(
                        "set both {CLIENT_CERT_ENV} and {CLIENT_KEY_ENV}, or neither"
                    ));
                }
            }
            creds.tls = Some(tls);
        }
        Ok(creds)
    }

    /// The same, presenting `token`.
    pub fn with_token(mut self, token: &str) -> anyhow::Result<Credentials> {
        let value = format!("Bearer {}", token.trim())
            .parse()
            .map_err(|_| anyhow!("{TOKEN_ENV} holds characters a token cannot have"))?;
        self.token = Some(value);
        Ok(self)
    }

    /// The same, each call bounded by `timeout` (none: unbounded).
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> Credentials {
        self.timeout = timeout;
        self
    }

    /// The bound on each call that is not open-ended.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// An endpoint for `uri`, with TLS when the URI is https. Its
    /// connection pings the server, so one cut off on the network is
    /// noticed (and a call on it fails) in seconds, not when the kernel
    /// gives up on TCP.
    pub fn endpoint(&self, uri: &str) -> anyhow::Result<Endpoint> {
        let endpoint = Endpoint::from_shared(uri.to_string())
            .with_context(|| format!("{URI_ENV}={uri:?} is not a valid address"))?
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true)
            .connect_timeout(CONNECT_TIMEOUT);
        if !uri.starts_with("https://") {
            return Ok(endpoint);
        }
        let tls = self.tls.clone().ok_or_else(|| {
            anyhow!("{uri} uses TLS: set {TLS_CA_ENV} to the CA that signed its certificate")
        })?;
        endpoint
            .tls_config(tls)
            .with_context(|| format!("TLS settings for {uri}"))
    }
}

impl Interceptor for Credentials {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.token {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        // A call that set its own bound keeps it; an open-ended one has none.
        if let Some(timeout) = self.timeout
            && !request.metadata().contains_key("grpc-timeout")
            && !request
                .extensions()
                .get::<tonic::GrpcMethod>()
                .is_some_and(|m| open_ended(m.method()))
        {
            request.set_timeout(timeout);
        }
        Ok(request)
    }
}

/// The caller's uid as the instance sees it: the one the token in
/// `FLUXGATE_TOKEN` names, else this process's. For default filters only;
/// the instance verifies the token itself.
pub fn my_uid() -> u32 {
    env(TOKEN_ENV)
        .and_then(|t| fluxgate_shared::auth::token::peek(&t))
        .map(|c| c.uid)
        .unwrap_or_else(|| nix::unistd::getuid().as_raw())
}

/// A connection whose every call carries the caller's credentials.
pub type AuthChannel = InterceptedService<Channel, Credentials>;

/// Clients of one instance, sharing one connection.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The JobManager service.
    pub jobs: JobManagerClient<AuthChannel>,
    /// The Resource service.
    pub resource: ResourceClient<AuthChannel>,
    /// The job managers it may be served by (one leads), as given.
    uris: String,
    creds: Credentials,
}

impl Instance {
    /// More than one job manager serves it: a refused or broken call may
    /// succeed on the new leader after a failover.
    pub fn has_standbys(&self) -> bool {
        self.uris.contains(',')
    }

    /// How long an idempotent call is tried again after failures that a
    /// retry may cure: a failover's length, and at least two bounded tries.
    pub fn retry_window(&self) -> Duration {
        let per_call = self.creds.timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        FAILOVER_TIMEOUT.max(per_call * 2)
    }

    /// Connect again, to whichever job manager leads now.
    pub async fn reconnect(&mut self) -> anyhow::Result<()> {
        *self = connect_with(&self.uris.clone(), &self.creds.clone()).await?;
        Ok(())
    }
}

/// How long a client looks for a leader among several job managers
/// before it gives up (a failover takes seconds).
pub const FAILOVER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Is this refusal or failure one a failover explains (a standby's
/// refusal, a job manager that went away)?
pub fn is_failover(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    )
}

/// May a call that failed so be made again (when it is idempotent)? Its
/// answer may have been lost: a failover, a broken connection, or no answer
/// in time.
pub fn is_retryable(status: &tonic::Status) -> bool {
    is_failover(status) || is_timeout(status)
}

/// Did this call run out of its time (see [`TIMEOUT_ENV`])? The
/// transport says so as a cancel, a server as an expired deadline.
pub fn is_timeout(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::DeadlineExceeded
        || (status.code() == tonic::Code::Cancelled && status.message() == "Timeout expired")
}

/// The instance address from the environment.
pub fn uri() -> anyhow::Result<String> {
    match std::env::var(URI_ENV) {
        Ok(u) if !u.is_empty() => Ok(u),
        _ => Err(anyhow!(
            "{URI_ENV} is not set: run inside `fluxgate start` or export the instance address"
        )),
    }
}

/// A single-threaded runtime: the CLI does one thing at a time.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Connect to `uri` with `creds`. `uri` may list several job managers,
/// comma-separated: the one that leads is found (by its health, SERVING
/// only on the leader), waiting up to [`FAILOVER_TIMEOUT`] for one.
pub async fn connect_with(uri: &str, creds: &Credentials) -> anyhow::Result<Instance> {
    let listed: Vec<&str> = uri
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect();
    let channel = match listed.as_slice() {
        [] => return Err(anyhow!("{URI_ENV} is empty")),
        // One job manager: no health round trip before the first call.
        [one] => creds
            .endpoint(one)?
            .connect()
            .await
            .with_context(|| format!("cannot connect to {one}"))?,
        several => find_leader(several, creds).await?,
    };
    let authed = |c: Channel| InterceptedService::new(c, creds.clone());
    Ok(Instance {
        jobs: JobManagerClient::new(authed(channel.clone())).max_decoding_message_size(64 << 20),
        resource: ResourceClient::new(authed(channel)).max_decoding_message_size(64 << 20),
        uris: uri.to_string(),
        creds: creds.clone(),
    })
}

/// The job manager among `listed` whose JobManager service is SERVING.
async fn find_leader(listed: &[&str], creds: &Credentials) -> anyhow::Result<Channel> {
    use tonic_health::pb::health_check_response::ServingStatus;
    // A paused job manager accepts connections and answers nothing:
    // neither the connection nor the check may wait on it for long. The
    // limit is on the probe alone, not on the channel's later calls.
    const PROBE: std::time::Duration = std::time::Duration::from_secs(1);
    let deadline = tokio::time::Instant::now() + FAILOVER_TIMEOUT;
    let mut last = String::new();
    loop {
        for uri in listed {
            let endpoint = creds.endpoint(uri)?.connect_timeout(PROBE);
            let channel = match endpoint.connect().await {
                Ok(c) => c,
                Err(e) => {
                    last = format!("{uri}: {e}");
                    continue;
                }
            };
            match tokio::time::timeout(PROBE, health(channel.clone(), JOB_MANAGER_SERVICE)).await {
                Ok(Ok(ServingStatus::Serving)) => return Ok(channel),
                Ok(Ok(_)) => last = format!("{uri} is a standby"),
                Ok(Err(e)) => last = format!("{uri}: {}", e.message()),
                Err(_) => last = format!("{uri}: no answer within {PROBE:?}"),
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(anyhow!(
                "no job manager of {} leads (last: {last})",
                listed.join(",")
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The health service name a job manager serves only while it leads.
pub const JOB_MANAGER_SERVICE: &str = "fluxgate.v1.JobManager";

/// Ask the server behind `channel` whether `service` is serving (gRPC
/// health, which answers without credentials).
pub async fn health(
    channel: Channel,
    service: &str,
) -> Result<tonic_health::pb::health_check_response::ServingStatus, tonic::Status> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let reply = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await?;
    Ok(ServingStatus::try_from(reply.into_inner().status).unwrap_or(ServingStatus::Unknown))
}

/// A key unique to one job this client means to submit (see
/// `SubmitRequest.idempotency_key`): host, process, time and a counter.
pub fn idempotency_key() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{host}-{:x}-{nanos:x}-{n}", std::process::id())
}

/// Connect to `uri` with the credentials of the environment.
pub async fn connect_to(uri: &str) -> anyhow::Result<Instance> {
    connect_with(uri, &Credentials::from_env()?).await
}

/// Connect to the instance named by `FLUXGATE_URI`.
pub async fn connect() -> anyhow::Result<Instance> {
    connect_to(&uri()?).await
}

/// A gRPC status as a person reads it: the server's message alone.
pub fn status_error(status: tonic::Status) -> anyhow::Error {
    if is_timeout(&status) {
        return anyhow!(
            "no answer from the instance in time (the bound is {TIMEOUT_ENV}, in seconds)"
        );
    }
    let msg = status.message();
    if msg.is_empty() {
        anyhow!("{:?}", status.code())
    } else {
        anyhow!("{msg}")
    }
}

/// Parse a job id in any RFC 19 encoding, with flux's message when it is bad.
pub fn parse_jobid(s: &str) -> anyhow::Result<JobId> {
    JobId::parse(s.trim()).map_err(|_| anyhow!("error parsing jobid: \"{s}\""))
}

/// Parse every job id given, failing at the first bad one.
pub fn parse_jobids(ids: &[String]) -> anyhow::Result<Vec<JobId>> {
    ids.iter().map(|s| parse_jobid(s)).collect()
}

/// The wall clock, in seconds since the epoch (0 before it).
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Run `fut` on a fresh runtime.
pub fn block_on<F: std::future::Future>(fut: F) -> anyhow::Result<F::Output> {
    Ok(runtime()?.block_on(fut))
}

/// A job id as flux prints it: F58, with an ASCII `f` when the locale is not
/// UTF-8 (or `FLUX_F58_FORCE_ASCII` is set), as flux-core's `fluid_encode`.
pub fn f58(id: JobId) -> String {
    if f58_ascii() {
        id.to_f58_ascii()
    } else {
        id.to_f58()
    }
}

fn f58_ascii() -> bool {
    if std::env::var_os("FLUX_F58_FORCE_ASCII").is_some()
        || std::env::var_os("FLUXGATE_F58_FORCE_ASCII").is_some()
    {
        return true;
    }
    let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .filter_map(|name| std::env::var(name).ok())
        .find(|value| !value.is_empty())
        .unwrap_or_default()
        .to_ascii_lowercase();
    !(locale.contains("utf-8") || locale.contains("utf8"))
}

/// One eventlog line as the wire carries it (without its newline).
pub fn parse_event(
    line: &str,
) -> Result<fluxgate_shared::Event, fluxgate_shared::eventlog::EventError> {
    fluxgate_shared::Event::parse_json(line.strip_suffix('\n').unwrap_or(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_timeout_defaults_parses_and_turns_off() {
        assert_eq!(call_timeout_from(None).unwrap(), Some(DEFAULT_CALL_TIMEOUT));
        assert_eq!(
            call_timeout_from(Some(" ")).unwrap(),
            Some(DEFAULT_CALL_TIMEOUT)
        );
        assert_eq!(
            call_timeout_from(Some("2.5")).unwrap(),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(call_timeout_from(Some("0")).unwrap(), None);
        assert!(call_timeout_from(Some("-1")).is_err());
        assert!(call_timeout_from(Some("soon")).is_err());
    }

    #[test]
    fn streams_and_waits_are_open_ended_other_calls_are_bounded() {
        for m in [
            "WatchEventlog",
            "Journal",
            "Wait",
            "Input",
            "Acquire",
            "Eventlog",
        ] {
            assert!(open_ended(m), "{m}");
        }
        for m in [
            "Submit",
            "SubmitMany",
            "Cancel",
            "List",
            "Info",
            "Drain",
            "Status",
        ] {
            assert!(!open_ended(m), "{m}");
        }
    }

    #[test]
    fn a_bounded_call_carries_its_deadline_an_open_ended_one_none() {
        let mut creds = Credentials::default().with_timeout(Some(Duration::from_secs(3)));
        let mut bounded = tonic::Request::new(());
        bounded
            .extensions_mut()
            .insert(tonic::GrpcMethod::new("fluxgate.v1.JobManager", "Submit"));
        let bounded = creds.call(bounded).unwrap();
        assert_eq!(bounded.metadata().get("grpc-timeout").unwrap(), "3000000u");
        let mut open = tonic::Request::new(());
        open.extensions_mut()
            .insert(tonic::GrpcMethod::new("fluxgate.v1.JobManager", "Wait"));
        assert!(
            creds
                .call(open)
                .unwrap()
                .metadata()
                .get("grpc-timeout")
                .is_none()
        );
        // A call that set its own bound keeps it.
        let mut own = tonic::Request::new(());
        own.set_timeout(Duration::from_secs(1));
        let own = creds.call(own).unwrap();
        assert_eq!(own.metadata().get("grpc-timeout").unwrap(), "1000000u");
    }
}
