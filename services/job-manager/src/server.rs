//! Assembly: open the store, build the core, serve gRPC until told to stop.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fluxgate_proto::v1::job_manager_server::JobManagerServer;
use fluxgate_proto::v1::node_server::NodeServer;
use fluxgate_proto::v1::resource_server::ResourceServer;
use fluxgate_shared::{Hostlist, ResourceSet};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::ServerTlsConfig;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_reflection::server::v1::{ServerReflection, ServerReflectionServer};

use crate::auth::{ActiveJobs, Authenticator, JobCredentials, keys};
use crate::config::Config;
use crate::core::{self, Carrier, Committer, Core, Heartbeats, Msg, Nodes};
use crate::exec_client::{ExecAccess, GrpcExec};
use crate::grpc::jobs::JobManagerService;
use crate::grpc::node::NodeService;
use crate::grpc::resource::ResourceService;
use crate::ha::incoming::Incoming;
use crate::ha::lead::{self, Lead, Shutdown};
use crate::hub::Hub;
use crate::journal::Journal;
use crate::policy::SitePolicy;
use crate::stop::{Ended, Stop, StopTx, Stopping, StoreCheck, stop_when};
use crate::store::postgres::is_postgres_url;
use crate::store::{AnyStore, SqliteStore};

pub use crate::serve_error::ServeError;

/// Where the store file lives in the state directory.
pub fn store_path(statedir: &std::path::Path) -> PathBuf {
    statedir.join("fluxgate.db")
}

/// Where the URI of a running instance is written.
pub fn uri_path(statedir: &std::path::Path) -> PathBuf {
    statedir.join("uri")
}

fn inventory(config: &Config) -> Result<(Option<ResourceSet>, Nodes), ServeError> {
    let r = &config.resource;
    if let Some(path) = &r.path {
        let text = std::fs::read_to_string(path).map_err(|source| ServeError::Io {
            what: format!("cannot read resource.path {}", path.display()),
            source,
        })?;
        let inv = ResourceSet::parse(&text)
            .map_err(|e| ServeError::Config(format!("resource.path {}: {e}", path.display())))?;
        let nodes = Nodes::fixed(&inv);
        return Ok((Some(inv), nodes));
    }
    if let Some(list) = &r.nodelist {
        let hosts = Hostlist::parse(list)
            .map_err(|e| ServeError::Config(format!("resource.nodelist: {e}")))?;
        if hosts.is_empty() {
            return Err(ServeError::Config("resource.nodelist is empty".into()));
        }
        return Ok((None, Nodes::nodelist(&hosts)));
    }
    match r.size {
        Some(n) if n > 0 => Ok((None, Nodes::size(n))),
        _ => Err(ServeError::Config(
            "no resources configured: set resource.path (an R file), resource.nodelist \
             (hostnames whose exec services report their cores) or resource.size"
                .into(),
        )),
    }
}

/// Is `listen` a loopback address (where clear text stays on this machine)?
fn is_loopback(listen: &str) -> bool {
    listen
        .parse::<SocketAddr>()
        .map(|a| a.ip().is_loopback())
        .unwrap_or_else(|_| listen.starts_with("localhost:"))
}

/// The CA of exec services' certificates, when `exec.tls_ca` names one.
fn exec_ca(config: &Config) -> Result<Option<Vec<u8>>, ServeError> {
    match &config.exec.tls_ca {
        Some(path) => Ok(Some(std::fs::read(path).map_err(|source| {
            ServeError::Io {
                what: format!("cannot read exec.tls_ca {}", path.display()),
                source,
            }
        })?)),
        None => Ok(None),
    }
}

/// Who may call: the authenticator, the node token exec services must
/// present (none when open) and the minter of per-job credentials.
fn credentials(
    config: &Config,
    serves_tls: bool,
) -> Result<(Authenticator, Option<String>, JobCredentials), ServeError> {
    if config.auth.enabled {
        let keys = keys::load_or_create(config).map_err(|e| ServeError::Config(e.to_string()))?;
        tracing::info!(
            owner_token = %config.statedir.join(keys::OWNER_TOKEN_FILE).display(),
            node_token = %config.statedir.join(keys::NODE_TOKEN_FILE).display(),
            "credentials required: tokens signed with {}, client certificates {}",
            keys::key_path(config).display(),
            if config.tls.client_ca.is_some() { "accepted" } else { "not configured" },
        );
        if !serves_tls && !is_loopback(&config.listen) {
            tracing::warn!(
                listen = %config.listen,
                "tokens travel in clear text: serve TLS (tls.cert, tls.key) off loopback"
            );
        }
        let active = ActiveJobs::default();
        let credentials = JobCredentials::new(
            keys.key.clone(),
            config.auth.job_credential_ttl(),
            active.clone(),
        );
        let auth = Authenticator::required(
            config.owner_uid,
            keys.key,
            config.auth.users.clone(),
            active,
        );
        Ok((auth, Some(keys.node_token), credentials))
    } else {
        if config.tls.client_ca.is_some() {
            tracing::warn!(
                "tls.client_ca is set but auth.enabled is not: certificates are checked, \
             yet every client acts as the owner"
            );
        }
        tracing::warn!(
            owner_uid = config.owner_uid,
            "running open: no credentials are checked and every client acts as the \
         instance owner (set auth.enabled = true to require them)"
        );
        Ok((
            Authenticator::open(config.owner_uid),
            None,
            JobCredentials::disabled(),
        ))
    }
}

/// A large store closed cleanly is checked beside serving, so that the
/// start does not read every page first; damage stops the job manager
/// with the same error an open would give. A shutdown interrupts the
/// check: the store was clean when opened and is closed cleanly again.
fn spawn_store_check(store: &AnyStore, stop_tx: StopTx) -> Result<StoreCheck, ServeError> {
    let Some(store) = store.sqlite().filter(|s| s.check_owed()) else {
        return Ok(None);
    };
    let check = store.check()?;
    let interrupt = check.interrupt_handle();
    let stopping = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stopping);
    tokio::task::spawn_blocking(move || {
        if stopped.load(Ordering::Acquire) {
            return;
        }
        let started = std::time::Instant::now();
        match check.run() {
            Ok(()) => tracing::info!(
                seconds = started.elapsed().as_secs_f64(),
                "store integrity check passed"
            ),
            Err(_) if stopped.load(Ordering::Acquire) => {
                tracing::info!("store integrity check left unfinished at shutdown")
            }
            Err(e) => {
                tracing::error!(error = %e, "store integrity check failed; stopping");
                stop_tx.send(Stopping::StoreFailed(e.to_string()));
            }
        }
    });
    Ok(Some((interrupt, stopping)))
}

/// Listen on `listen`; the listener and the address it got.
async fn bind(listen: &str) -> Result<(TcpListener, SocketAddr), ServeError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Io {
            what: format!("cannot listen on {listen}"),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Io {
        what: "cannot read the bound address".into(),
        source,
    })?;
    Ok((listener, addr))
}

/// Open the store: the SQLite file in the state directory, or PostgreSQL
/// once this job manager leads (serving as a standby until then). `None`
/// when told to stop first.
async fn open_store(
    config: &Config,
    addr: SocketAddr,
    incoming: &Incoming,
    tls: Option<tonic::transport::server::ServerTlsConfig>,
    shutdown: &mut Shutdown,
    ready: &mut Option<impl FnOnce(SocketAddr) + Send>,
) -> Result<Option<(AnyStore, Option<Lead>)>, ServeError> {
    match config.store.url.as_deref() {
        None | Some("") => Ok(Some((
            AnyStore::Sqlite(SqliteStore::open(&store_path(&config.statedir))?),
            None,
        ))),
        Some(url) if is_postgres_url(url) => {
            let lead =
                lead::standby_until_leader(config, url, addr, incoming, tls, shutdown, ready)
                    .await?;
            Ok(lead.map(|(store, lead)| (AnyStore::Postgres(store), Some(lead))))
        }
        Some(_) => Err(ServeError::Config(
            "store.url must be a postgres:// URL (unset, the store is fluxgate.db in the \
             state directory)"
                .into(),
        )),
    }
}

/// What the job manager holds before its store is open: its resources,
/// TLS, who may call, and how exec services are called.
struct Setup {
    core: CoreInputs,
    tls: Option<ServerTlsConfig>,
    authenticator: Authenticator,
    exec_access: ExecAccess,
}

/// What the core is recovered with besides the store.
struct CoreInputs {
    inventory: Option<ResourceSet>,
    nodes: Nodes,
    job_credentials: JobCredentials,
}

/// Make the state directory and read what the configuration names.
fn setup(config: &Config) -> Result<Setup, ServeError> {
    // 0700 before anything is created in it: the store holds every user's
    // environment and output, and beside it are the key and the tokens.
    fluxgate_os::private::create_dir(&config.statedir)
        .map_err(|e| ServeError::Config(format!("statedir {}: {e}", config.statedir.display())))?;
    let (inventory, nodes) = inventory(config)?;
    let tls = crate::auth::tls::server_config(&config.tls).map_err(ServeError::Config)?;
    let exec_ca = exec_ca(config)?;
    let (authenticator, node_token, job_credentials) = credentials(config, tls.is_some())?;
    let exec_access =
        ExecAccess::new(node_token.as_deref(), exec_ca.as_deref()).map_err(ServeError::Config)?;
    Ok(Setup {
        core: CoreInputs {
            inventory,
            nodes,
            job_credentials,
        },
        tls,
        authenticator,
        exec_access,
    })
}

/// The running core and what its services and its stop need.
struct Running {
    inbox: mpsc::Sender<Msg>,
    hub: Hub,
    journal: Journal,
    site: Arc<SitePolicy>,
    heartbeats: Heartbeats,
    /// Stops the core's loop (which flushes what it holds).
    core_stop: CancellationToken,
    core_task: JoinHandle<()>,
    /// Stops the committer from carrying effects (at a step down).
    halt: CancellationToken,
    /// Hears why the job manager must stop: the store failed, the lead was lost.
    stopping: watch::Receiver<Option<Stopping>>,
    /// The background store check, interrupted at shutdown.
    check: StoreCheck,
}

/// Recover the core from `store` (on the blocking pool: recovery reads the
/// whole store, before the core's loop, which never reads, starts), then
/// start its committer and its loop.
async fn start_core(
    config: &Arc<Config>,
    store: &Arc<AnyStore>,
    lead: Option<&Lead>,
    inputs: CoreInputs,
    exec_access: &ExecAccess,
) -> Result<Running, ServeError> {
    let CoreInputs {
        inventory,
        nodes,
        job_credentials,
    } = inputs;
    let core = {
        let (store, config) = (Arc::clone(store), Arc::clone(config));
        tokio::task::spawn_blocking(move || {
            Core::new(store, config, inventory, nodes, job_credentials)
        })
        .await
        .map_err(|e| ServeError::Config(format!("recovery: {e}")))?
        .map_err(|e| ServeError::Config(e.to_string()))?
    };
    let hub = Hub::default();
    let journal = Journal::new(config.resource.journal_capacity);
    let (inbox, inbox_rx) = mpsc::channel(core::INBOX_CAPACITY);
    let (stop_tx, stopping) = StopTx::new();
    let halt = CancellationToken::new();
    let committer = {
        let stop_tx = stop_tx.clone();
        let carrier = Carrier {
            hub: hub.clone(),
            journal: journal.clone(),
            exec: GrpcExec::new(Arc::clone(store), inbox.clone(), exec_access.clone()),
            inbox: inbox.clone(),
            reads: core.read_carrier(),
        };
        Committer::spawn(
            carrier,
            move |e| stop_tx.send(Stopping::of_store(e)),
            halt.clone(),
        )
    };
    if let Some(lead) = lead {
        // A lost lead sends this job manager back to standby.
        let (mut lost, stop_tx) = (lead.lost.clone(), stop_tx.clone());
        tokio::spawn(async move {
            if let Ok(why) = lost.wait_for(Option::is_some).await
                && let Some(why) = why.clone()
            {
                stop_tx.send(Stopping::LeadLost(why));
            }
        });
    }
    let check = spawn_store_check(store, stop_tx)?;
    let (site, heartbeats) = (core.site(), core.heartbeats());
    let core_stop = CancellationToken::new();
    let core_task = tokio::spawn(core.run(inbox_rx, committer, core_stop.clone()));
    Ok(Running {
        inbox,
        hub,
        journal,
        site,
        heartbeats,
        core_stop,
        core_task,
        halt,
        stopping,
        check,
    })
}

/// The job manager's own services.
struct Services {
    jobs: JobManagerService<AnyStore>,
    node: NodeService,
    resource: ResourceService<AnyStore>,
}

/// The services over the running core; `cancel` ends their streams.
fn services(
    config: &Arc<Config>,
    store: &Arc<AnyStore>,
    running: &Running,
    exec_access: ExecAccess,
    cancel: &CancellationToken,
) -> Services {
    let jobs = JobManagerService::new(
        running.inbox.clone(),
        Arc::clone(store),
        running.hub.clone(),
        Arc::clone(config),
        cancel.clone(),
    )
    .with_site(Arc::clone(&running.site))
    .with_exec_access(exec_access);
    let containment = crate::grpc::containment::Containment::default();
    let node = NodeService::new(
        running.inbox.clone(),
        Arc::clone(config),
        cancel.clone(),
        running.heartbeats.clone(),
    )
    .with_containment(containment.clone());
    let resource = ResourceService::new(
        running.inbox.clone(),
        running.journal.clone(),
        Arc::clone(store),
        cancel.clone(),
    )
    .with_containment(containment);
    Services {
        jobs,
        node,
        resource,
    }
}

/// Serve `services` (and health, reflection) on `incoming` until `stop`.
async fn run_server(
    incoming: Incoming,
    tls: Option<ServerTlsConfig>,
    authenticator: Authenticator,
    health_service: HealthServer<impl Health>,
    reflection: ServerReflectionServer<impl ServerReflection>,
    services: Services,
    stop: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    // Health and reflection stay open (probes, grpcurl); every fluxgate
    // service sees the caller the authenticator verified. Each call is a
    // span when spans are exported.
    builder
        .layer(fluxgate_setup::RpcSpans)
        .layer(incoming.auth_marks())
        .http2_keepalive_interval(Some(fluxgate_setup::conns::KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(fluxgate_setup::conns::KEEPALIVE_TIMEOUT))
        .initial_connection_window_size(fluxgate_proto::wire::CONNECTION_WINDOW)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(JobManagerServer::with_interceptor(
            services.jobs,
            authenticator.clone(),
        ))
        .add_service(NodeServer::with_interceptor(
            services.node,
            authenticator.clone(),
        ))
        .add_service(ResourceServer::with_interceptor(
            services.resource,
            authenticator,
        ))
        .serve_with_incoming_shutdown(incoming, stop)
        .await?;
    Ok(())
}

/// How long the server of a lead that was lost may take to end its calls
/// before the standby takes the listener back: a client's open stream that
/// no token ends (a health watch) must not keep the standby from serving.
const STEP_DOWN_GRACE: Duration = Duration::from_secs(5);

/// What lasts the whole process, across its leads: the configuration, the
/// listener and the metrics endpoint.
struct Process {
    config: Arc<Config>,
    addr: SocketAddr,
    incoming: Incoming,
    /// Ends the metrics endpoint with the process.
    metrics: CancellationToken,
    metrics_served: bool,
}

impl Process {
    /// Serve the metrics endpoint from the first lead on, when configured.
    async fn serve_metrics(&mut self) -> Result<(), ServeError> {
        if let (Some(listen), false) = (&self.config.metrics.listen, self.metrics_served) {
            let addr = crate::telemetry::serve(listen, self.metrics.clone()).await?;
            tracing::info!(%addr, "metrics served at http://{addr}/metrics");
            self.metrics_served = true;
        }
        Ok(())
    }

    /// One lead: stand by until it is won (PostgreSQL), recover the core
    /// from the store and serve until `shutdown`, a store failure or the
    /// lead's loss.
    async fn lead(
        &mut self,
        setup: Setup,
        shutdown: &mut Shutdown,
        ready: &mut Option<impl FnOnce(SocketAddr) + Send>,
    ) -> Result<Ended, ServeError> {
        let Setup {
            core: inputs,
            tls,
            authenticator,
            exec_access,
        } = setup;
        let config = Arc::clone(&self.config);
        let opened = open_store(
            &config,
            self.addr,
            &self.incoming,
            tls.clone(),
            shutdown,
            ready,
        )
        .await?;
        let Some((store, lead)) = opened else {
            return Ok(Ended::Shutdown);
        };
        let store = Arc::new(store);
        let running = start_core(&config, &store, lead.as_ref(), inputs, &exec_access).await?;
        self.serve_metrics().await?;
        // One token ends every long-lived stream when the lead ends, so
        // that the server's graceful stop does not wait on them forever.
        let cancel = CancellationToken::new();
        let services = services(&config, &store, &running, exec_access, &cancel);
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_serving::<JobManagerServer<JobManagerService<AnyStore>>>()
            .await;
        let Running {
            inbox,
            core_stop,
            core_task,
            halt,
            stopping,
            check,
            ..
        } = running;
        // The services hold the core's inbox now.
        drop(inbox);
        let stop = Stop {
            lead,
            health,
            check,
            store,
            core_stop,
            core_task,
            halt,
            cancel,
        };
        tracing::info!(addr = %self.addr, statedir = %config.statedir.display(), "job manager serving");
        if let Some(ready) = ready.take() {
            ready(self.addr);
        }
        let served = Served {
            tls,
            authenticator,
            health_service,
            services,
        };
        self.serve_until_stopped(served, shutdown, stopping, stop)
            .await
    }

    /// Serve the lead's services until [`stop_when`] has stopped them; how
    /// the lead ended.
    async fn serve_until_stopped(
        &self,
        served: Served<impl Health>,
        shutdown: &mut Shutdown,
        stopping: watch::Receiver<Option<Stopping>>,
        stop: Stop,
    ) -> Result<Ended, ServeError> {
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(fluxgate_proto::FILE_DESCRIPTOR_SET)
            .build_v1()
            .map_err(|e| ServeError::Config(format!("reflection: {e}")))?;
        let stepped_down = CancellationToken::new();
        let mut ended = None;
        let stopped = async {
            let how = stop_when(shutdown, stopping, stop).await;
            if matches!(how, Ended::LeadLost(_)) {
                stepped_down.cancel();
            }
            ended = Some(how);
        };
        let server = run_server(
            self.incoming.clone(),
            served.tls,
            served.authenticator,
            served.health_service,
            reflection,
            served.services,
            stopped,
        );
        let grace = async {
            stepped_down.cancelled().await;
            tokio::time::sleep(STEP_DOWN_GRACE).await;
        };
        tokio::select! {
            served = server => served?,
            () = grace => tracing::warn!(
                "calls still open on the lost lead's server are left to end on their own"
            ),
        }
        match ended {
            Some(Ended::Failed(e)) => Err(ServeError::Fatal(e)),
            Some(ended) => Ok(ended),
            None => Ok(Ended::Shutdown),
        }
    }
}

/// What a lead serves besides reflection.
struct Served<H> {
    tls: Option<ServerTlsConfig>,
    authenticator: Authenticator,
    health_service: HealthServer<H>,
    services: Services,
}

/// Run the job manager until `shutdown` resolves; `ready` hears the bound
/// address. A job manager that loses its lead (PostgreSQL) goes back to
/// standby on the same listener and campaigns again; a store failure or
/// an error ends it.
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr) + Send,
) -> Result<(), ServeError> {
    let config = Arc::new(config);
    let mut setup = setup(&config)?;
    // Bound before the store is opened: a standby serves its refusals on
    // the same port the leader's services take over.
    let (listener, addr) = bind(&config.listen).await?;
    let incoming = Incoming::new(listener, config.limits.conns());
    tracing::info!(
        max_connections = incoming.max_connections(),
        "connections limited"
    );
    let metrics = CancellationToken::new();
    let _metrics_end = metrics.clone().drop_guard();
    let mut process = Process {
        config: Arc::clone(&config),
        addr,
        incoming,
        metrics,
        metrics_served: false,
    };
    let mut shutdown: Shutdown = Box::pin(shutdown);
    let mut ready = Some(ready);
    loop {
        match process.lead(setup, &mut shutdown, &mut ready).await? {
            Ended::LeadLost(why) => {
                tracing::warn!(reason = %why, "stepped down; standing by for the lead again");
                // Each lead recovers from the store as at start, with
                // nothing of the last one.
                setup = self::setup(&config)?;
            }
            Ended::Shutdown => return Ok(()),
            Ended::Failed(e) => return Err(ServeError::Fatal(e)),
        }
    }
}
