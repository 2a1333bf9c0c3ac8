//! Assembly: open the store, build the core, serve gRPC until told to stop.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
use tonic_health::server::HealthReporter;
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
fn spawn_store_check(
    store: &AnyStore,
    fatal_tx: Arc<watch::Sender<Option<String>>>,
) -> Result<StoreCheck, ServeError> {
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
                let _ = fatal_tx.send(Some(e.to_string()));
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

/// The background store check's interrupt, and the flag that tells it
/// the job manager is stopping.
type StoreCheck = Option<(rusqlite::InterruptHandle, Arc<AtomicBool>)>;

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
    /// Hears why the job manager must stop: the store failed, the lead was lost.
    fatal_rx: watch::Receiver<Option<String>>,
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
    let (fatal_tx, fatal_rx) = watch::channel(None::<String>);
    let fatal_tx = Arc::new(fatal_tx);
    let committer = {
        let fatal_tx = Arc::clone(&fatal_tx);
        let carrier = Carrier {
            hub: hub.clone(),
            journal: journal.clone(),
            exec: GrpcExec::new(Arc::clone(store), inbox.clone(), exec_access.clone()),
            inbox: inbox.clone(),
            reads: core.read_carrier(),
        };
        Committer::spawn(carrier, move |e| {
            let _ = fatal_tx.send(Some(e));
        })
    };
    if let Some(lead) = lead {
        // A lost lead stops this job manager as a store failure does.
        let (mut lost, fatal_tx) = (lead.lost.clone(), Arc::clone(&fatal_tx));
        tokio::spawn(async move {
            if let Ok(why) = lost.wait_for(Option::is_some).await {
                let _ = fatal_tx.send(why.clone());
            }
        });
    }
    let check = spawn_store_check(store, fatal_tx)?;
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
        fatal_rx,
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

/// What stops at shutdown, in the order [`stop_when`] stops it.
struct Stop {
    lead: Option<Lead>,
    health: HealthReporter,
    check: StoreCheck,
    core_stop: CancellationToken,
    core_task: JoinHandle<()>,
    /// Ends every long-lived stream.
    cancel: CancellationToken,
}

/// Wait for `shutdown` or a fatal error, then stop in order: the lease,
/// health, the store check, the core (flushing what it holds, so that the
/// join streams ending next are not taken for lost nodes), and last every
/// long-lived stream, so that the server can stop.
async fn stop_when(shutdown: Shutdown, mut fatal_rx: watch::Receiver<Option<String>>, stop: Stop) {
    tokio::select! {
        _ = shutdown => {}
        _ = fatal_rx.changed() => {}
    }
    let Stop {
        lead,
        health,
        check,
        core_stop,
        mut core_task,
        cancel,
    } = stop;
    if let Some(lead) = &lead {
        lead.stop.store(true, Ordering::Release);
    }
    health
        .set_not_serving::<JobManagerServer<JobManagerService<AnyStore>>>()
        .await;
    if let Some((interrupt, stopping)) = &check {
        stopping.store(true, Ordering::Release);
        interrupt.interrupt();
    }
    core_stop.cancel();
    let _ = (&mut core_task).await;
    cancel.cancel();
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

/// Run the job manager until `shutdown` resolves; `ready` hears the bound address.
pub async fn serve(
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: impl FnOnce(SocketAddr) + Send,
) -> Result<(), ServeError> {
    let config = Arc::new(config);
    let Setup {
        core: inputs,
        tls,
        authenticator,
        exec_access,
    } = setup(&config)?;
    // Bound before the store is opened: a standby serves its refusals on
    // the same port the leader's services take over.
    let (listener, addr) = bind(&config.listen).await?;
    let incoming = Incoming::new(listener, config.limits.conns());
    tracing::info!(
        max_connections = incoming.max_connections(),
        "connections limited"
    );
    let mut shutdown: Shutdown = Box::pin(shutdown);
    let mut ready = Some(ready);
    let Some((store, lead)) = open_store(
        &config,
        addr,
        &incoming,
        tls.clone(),
        &mut shutdown,
        &mut ready,
    )
    .await?
    else {
        return Ok(());
    };
    let store = Arc::new(store);
    let running = start_core(&config, &store, lead.as_ref(), inputs, &exec_access).await?;

    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<JobManagerServer<JobManagerService<AnyStore>>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(fluxgate_proto::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| ServeError::Config(format!("reflection: {e}")))?;
    // One token ends every long-lived stream at shutdown, so that the
    // server's graceful stop does not wait on them forever.
    let cancel = CancellationToken::new();
    if let Some(listen) = &config.metrics.listen {
        let addr = crate::telemetry::serve(listen, cancel.clone()).await?;
        tracing::info!(%addr, "metrics served at http://{addr}/metrics");
    }
    let services = services(&config, &store, &running, exec_access, &cancel);
    let Running {
        inbox,
        core_stop,
        core_task,
        fatal_rx,
        check,
        ..
    } = running;
    // The services hold the core's inbox now.
    drop(inbox);
    let stop = Stop {
        lead,
        health,
        check,
        core_stop,
        core_task,
        cancel,
    };
    let stop = stop_when(shutdown, fatal_rx.clone(), stop);
    tracing::info!(%addr, statedir = %config.statedir.display(), "job manager serving");
    if let Some(ready) = ready.take() {
        ready(addr);
    }
    run_server(
        incoming,
        tls,
        authenticator,
        health_service,
        reflection,
        services,
        stop,
    )
    .await?;
    if let Some(e) = fatal_rx.borrow().clone() {
        return Err(ServeError::Fatal(e));
    }
    Ok(())
}
