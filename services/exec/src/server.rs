//! Serving: bind the listener first (so the hello can carry the real port),
//! then serve Exec + health + reflection and join the job manager.
//!
//! Shutdown (one cancellation token): health goes NOT_SERVING, new Starts are
//! refused, running jobs are terminated and report their end (unless
//! `--leave-running`), the join loop stops, and the server stops once the
//! job streams have drained or the grace period ran out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use fluxgate_proto::v1::exec_server::ExecServer;
use fluxgate_proto::v1::node_server::NodeServer;
use fluxgate_setup::conns::{KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::join;
use crate::relay::Relay;
use crate::relay::service::RelayService;
use crate::service::{ExecService, NodeState};
use fluxgate_proto::CONTAINMENT_HEALTH;

/// Why the service could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The reflection service could not be built from the descriptor set.
    #[error("cannot build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The gRPC server failed.
    #[error("gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The metrics endpoint could not start.
    #[error(transparent)]
    Metrics(#[from] fluxgate_metrics::MetricsError),
}

/// A running exec service.
#[derive(Debug)]
pub struct Running {
    /// The bound address.
    pub local_addr: SocketAddr,
    /// The Exec address announced to the job manager (`http://IP:PORT`).
    pub exec_address: String,
    /// The service itself (for its job table).
    pub service: ExecService,
    /// Where `/metrics` is served, when it is.
    pub metrics_addr: Option<SocketAddr>,
    shutdown: CancellationToken,
    server: JoinHandle<Result<(), ServeError>>,
}

impl Running {
    /// Stop as on SIGTERM and wait for the server to end.
    pub async fn stop(self) -> Result<(), ServeError> {
        self.shutdown.cancel();
        self.wait().await
    }

    /// Wait for the server to end (after [`Running::shutdown_token`] is cancelled).
    pub async fn wait(self) -> Result<(), ServeError> {
        match self.server.await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "server task failed");
                Ok(())
            }
        }
    }

    /// The token whose cancellation stops the service.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

/// Bind, serve and join; returns once listening.
pub async fn start(config: Config) -> Result<Running, ServeError> {
    let config = Arc::new(config);
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
    let incoming = fluxgate_setup::Guarded::new(listener, config.conns.clone());
    let local_addr = incoming.local_addr().map_err(|source| ServeError::Bind {
        addr: config.listen,
        source,
    })?;
    let exec_address = announced_address(&config, local_addr);
    let node = Arc::new(NodeState::new(exec_address.clone()));
    let credential = config.node_credential.clone();
    if !credential.is_set() {
        tracing::warn!(
            "no node credential (--node-token-file): this exec service runs whatever \
             any caller asks"
        );
    }
    let service = ExecService::new(config.clone(), node.clone());
    let mode = node.containment();

    let (health, health_service) = health(mode).await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(fluxgate_proto::FILE_DESCRIPTOR_SET)
        .build_v1()?;

    let shutdown = CancellationToken::new();
    let metrics_addr = match &config.metrics_listen {
        Some(listen) => {
            let addr = crate::telemetry::serve(listen, shutdown.clone()).await?;
            tracing::info!(%addr, "metrics served at http://{addr}/metrics");
            Some(addr)
        }
        None => None,
    };
    let relay = config.relay.then(Relay::default);
    tokio::spawn(join::run(
        config.clone(),
        node,
        service.jobs().clone(),
        relay.clone(),
        shutdown.clone(),
    ));

    let stopped = CancellationToken::new();
    let mut builder = tonic::transport::Server::builder();
    if let Some(id) = &config.tls_identity {
        let identity = tonic::transport::Identity::from_pem(&id.cert, &id.key);
        builder =
            builder.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    // Each call is a span when spans are exported.
    let server = builder
        .layer(fluxgate_setup::RpcSpans)
        .layer(incoming.auth_marks())
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .initial_connection_window_size(fluxgate_proto::wire::CONNECTION_WINDOW)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(ExecServer::with_interceptor(
            service.clone(),
            credential.clone(),
        ))
        .add_optional_service(relay.map(|relay| {
            NodeServer::with_interceptor(RelayService::new(relay, shutdown.clone()), credential)
        }))
        .serve_with_incoming_shutdown(incoming, stopped.clone().cancelled_owned());
    let grace = config.kill_timeout + Duration::from_secs(5);
    let server = tokio::spawn(serve_then_drain(
        server,
        health,
        format!("{CONTAINMENT_HEALTH}{mode}"),
        service.clone(),
        shutdown.clone(),
        stopped,
        grace,
    ));
    tracing::info!(%exec_address, nodes = config.nodes.len(), "exec service listening");
    Ok(Running {
        local_addr,
        exec_address,
        service,
        metrics_addr,
        shutdown,
        server,
    })
}

/// The health service, SERVING for the Exec service and for the name that
/// carries this node's containment `mode`, as `fluxgate health` shows it.
async fn health(
    mode: &str,
) -> (
    tonic_health::server::HealthReporter,
    tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
) {
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<ExecServer<ExecService>>().await;
    health
        .set_service_status(
            format!("{CONTAINMENT_HEALTH}{mode}"),
            tonic_health::ServingStatus::Serving,
        )
        .await;
    (health, health_service)
}

/// The address announced to the job manager: the configured one, else
/// derived from the listener (as https when served over TLS).
fn announced_address(config: &Config, local_addr: SocketAddr) -> String {
    let derived = crate::config::exec_address(
        config.advertise.as_deref(),
        local_addr,
        &crate::config::machine_hostname(),
    );
    match (&config.tls_identity, &config.advertise) {
        (Some(_), None) => derived.replacen("http://", "https://", 1),
        _ => derived,
    }
}

/// Serve until `shutdown`, then end the jobs and let them report their end
/// (for up to `grace`) before the listener closes (`stopped`).
async fn serve_then_drain(
    server: impl Future<Output = Result<(), tonic::transport::Error>>,
    health: tonic_health::server::HealthReporter,
    containment: String,
    svc: ExecService,
    shutdown: CancellationToken,
    stopped: CancellationToken,
    grace: Duration,
) -> Result<(), ServeError> {
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return r.map_err(ServeError::from),
        _ = shutdown.cancelled() => {}
    }
    tracing::info!("shutting down");
    health.set_not_serving::<ExecServer<ExecService>>().await;
    health
        .set_service_status(containment, tonic_health::ServingStatus::NotServing)
        .await;
    svc.shut_down().await;
    // Let the terminated jobs report their end before the listener closes.
    let deadline = tokio::time::Instant::now() + grace;
    while !svc.jobs().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::select! {
            r = &mut server => return r.map_err(ServeError::from),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        if svc.jobs().is_empty() || svc.leaves_running() {
            break;
        }
    }
    stopped.cancel();
    match tokio::time::timeout(Duration::from_secs(2), &mut server).await {
        Ok(r) => r.map_err(ServeError::from),
        Err(_) => Ok(()),
    }
}
