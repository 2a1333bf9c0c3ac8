//! A job manager on PostgreSQL: serve as a standby until the lead is won,
//! then open the store with the leader's epoch and keep the lease.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fluxgate_proto::v1::job_manager_server::JobManagerServer;
use fluxgate_proto::v1::node_server::NodeServer;
use fluxgate_proto::v1::resource_server::ResourceServer;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::ServerTlsConfig;

use super::election::{self, Elector, Leadership};
use super::incoming::Incoming;
use super::standby::Refuse;
use crate::config::Config;
use crate::grpc::jobs::JobManagerService;
use crate::grpc::node::NodeService;
use crate::grpc::resource::ResourceService;
use crate::serve_error::ServeError;
use crate::store::postgres::PgConnect;
use crate::store::{AnyStore, PgStore, StoreError};

/// The shutdown signal, kept across the standby and leader phases.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What keeps the lead.
#[derive(Debug)]
pub struct Lead {
    /// Set to stop renewing the lease (at shutdown, or once the lead is lost).
    pub stop: Arc<AtomicBool>,
    /// Hears why the lead was lost, if it is.
    pub lost: watch::Receiver<Option<String>>,
}

/// The URI this job manager gives clients while it leads.
pub fn advertised(config: &Config, addr: SocketAddr) -> String {
    if let Some(uri) = &config.ha.advertise {
        return uri.clone();
    }
    let scheme = if config.tls.cert.is_some() {
        "https"
    } else {
        "http"
    };
    if addr.ip().is_unspecified() {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into());
        format!("{scheme}://{host}:{}", addr.port())
    } else {
        format!("{scheme}://{addr}")
    }
}

/// What `campaign` ends with: the lead and its lock session, none when
/// told to stop, or why the election failed.
type Won = Result<Option<(Leadership, postgres::Client)>, StoreError>;

/// Serve refusals on `incoming` until this job manager leads; `None` when
/// `shutdown` came first.
pub async fn standby_until_leader(
    config: &Config,
    url: &str,
    addr: SocketAddr,
    incoming: &Incoming,
    tls: Option<ServerTlsConfig>,
    shutdown: &mut Shutdown,
    ready: &mut Option<impl FnOnce(SocketAddr) + Send>,
) -> Result<Option<(PgStore, Lead)>, ServeError> {
    let (elector, connect) = elector(config, url, addr)?;
    let (leader_tx, leader_rx) = watch::channel(None::<String>);
    let stop = Arc::new(AtomicBool::new(false));
    let mut campaign = {
        let (elector, stop) = (elector.clone(), Arc::clone(&stop));
        tokio::task::spawn_blocking(move || elector.campaign(&leader_tx, &stop))
    };
    let end = CancellationToken::new();
    let mut server = serve_refusals(incoming, tls, leader_rx, &end).await?;
    tracing::info!(%addr, uri = %elector.uri, "campaigning for the lead");
    // A free lead is won within a few polls. Only a job manager still
    // without it after that is announced while standing by; a lone one is
    // announced once it leads, so that its first callers are served.
    let settle = (elector.poll * 5).max(Duration::from_millis(500));
    let won = tokio::select! {
        _ = shutdown.as_mut() => None,
        won = &mut campaign => Some(won),
        _ = tokio::time::sleep(settle) => {
            if let Some(ready) = ready.take() {
                ready(addr);
            }
            tokio::select! {
                _ = shutdown.as_mut() => None,
                won = &mut campaign => Some(won),
            }
        }
    };
    stop.store(true, Ordering::Release);
    end.cancel();
    // Refusals end at once; a client's open stream (a health watch) must
    // not hold the lead back.
    if tokio::time::timeout(Duration::from_secs(1), &mut server)
        .await
        .is_err()
    {
        server.abort();
    }
    let Some(won) = won else {
        return Ok(None);
    };
    let won: Won = won.map_err(|e| ServeError::Config(format!("election: {e}")))?;
    take_lead(elector, connect, won).await
}

/// The elector campaigning for this job manager (its lease and poll
/// checked), and the connection the store opens with once it leads.
fn elector(
    config: &Config,
    url: &str,
    addr: SocketAddr,
) -> Result<(Elector, PgConnect), ServeError> {
    let holder = election::new_holder()
        .map_err(|e| ServeError::Config(format!("no random holder name: {e}")))?;
    let connect = PgConnect::new(url, config.store.ca_file.as_deref())?
        .named(&election::session_name(&holder));
    let seconds = |v: f64, key: &str| {
        if v.is_finite() && v > 0.0 {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(ServeError::Config(format!(
                "{key} must be a positive number of seconds"
            )))
        }
    };
    let elector = Elector {
        connect: connect.clone(),
        holder,
        uri: advertised(config, addr),
        lease: seconds(config.ha.lease, "ha.lease")?,
        poll: seconds(config.ha.poll_interval, "ha.poll_interval")?,
    };
    Ok((elector, connect))
}

/// Serve health and the refusals that name the leader (`leader_rx`) on
/// `incoming` until `end`, on a task of its own.
async fn serve_refusals(
    incoming: &Incoming,
    tls: Option<ServerTlsConfig>,
    leader_rx: watch::Receiver<Option<String>>,
    end: &CancellationToken,
) -> Result<JoinHandle<Result<(), tonic::transport::Error>>, ServeError> {
    // The process is live (the server as a whole, "", serves) but does not
    // lead: readiness probes and clients ask for the JobManager service.
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_not_serving::<JobManagerServer<JobManagerService<AnyStore>>>()
        .await;
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    let server = builder
        .http2_keepalive_interval(Some(fluxgate_setup::conns::KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(fluxgate_setup::conns::KEEPALIVE_TIMEOUT))
        .add_service(health_service)
        .add_service(
            Refuse::<JobManagerServer<JobManagerService<AnyStore>>>::new(leader_rx.clone()),
        )
        .add_service(Refuse::<NodeServer<NodeService>>::new(leader_rx.clone()))
        .add_service(Refuse::<ResourceServer<ResourceService<AnyStore>>>::new(
            leader_rx,
        ))
        .serve_with_incoming_shutdown(incoming.clone(), end.clone().cancelled_owned());
    Ok(tokio::spawn(server))
}

/// Once the campaign is won, open the store with the leader's epoch and
/// keep the lease on a thread of its own; `None` when it was not won.
async fn take_lead(
    elector: Elector,
    connect: PgConnect,
    won: Won,
) -> Result<Option<(PgStore, Lead)>, ServeError> {
    let Some((leadership, lock_session)) = won? else {
        return Ok(None);
    };
    let store = {
        let epoch = leadership.epoch;
        tokio::task::spawn_blocking(move || PgStore::open(connect, epoch))
            .await
            .map_err(|e| ServeError::Config(format!("opening the store: {e}")))??
    };
    let keep = Arc::new(AtomicBool::new(false));
    let (lost_tx, lost) = watch::channel(None);
    election::keep(
        elector,
        &leadership,
        lock_session,
        Arc::clone(&keep),
        move |why| {
            tracing::error!(reason = %why, "lost the lead; stepping down");
            let _ = lost_tx.send(Some(why));
        },
    )
    .map_err(|source| ServeError::Io {
        what: "cannot start the lease thread".into(),
        source,
    })?;
    Ok(Some((store, Lead { stop: keep, lost })))
}
