//! `fluxgate bench nodes`: a job manager facing thousands of nodes.
//!
//! The nodes are simulated in this process, each as a real exec service
//! would be to the job manager: its own connection and `Node.Join` stream,
//! a hello naming one node, a heartbeat at the interval the welcome gives.
//! Every node announces one exec address, served here: a session that
//! finishes each job at once (as test execution does), so what is measured
//! is the job manager's own work. Three figures:
//!
//! - join: from the first connection until the job manager counts every
//!   node up;
//! - idle CPU: the job manager's CPU time over a window in which only
//!   heartbeats arrive, as a share of one core;
//! - start: a job on every node, from its `submit` to its `start` event
//!   (allocation, R, the start request to the leader and its answer).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_server::{Exec, ExecServer};
use fluxgate_proto::v1::node_client::NodeClient;
use fluxgate_proto::v1::session_request::Request as SessionReq;
use fluxgate_proto::v1::start_response::Response as R;
use fluxgate_shared::jobspec::JobspecBuilder;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::target::Target;
use fluxgate_cli::client;

/// Cores each simulated node offers.
const CORES: u32 = 4;
/// Connections opened at once while joining (a real cluster's nodes boot
/// at about the same time; a bound keeps this process's accept queue sane).
const CONNECTING: usize = 256;
/// Time allowed for every node to join.
const JOIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The figures of one run.
#[derive(Debug, Clone, Default)]
pub struct NodeFigures {
    /// Nodes simulated.
    pub nodes: u32,
    /// First connection -> every node up, seconds.
    pub join_s: Option<f64>,
    /// Job manager CPU while only heartbeats arrive, percent of one core.
    pub idle_cpu_percent: Option<f64>,
    /// Heartbeat interval the job manager asked for, seconds.
    pub heartbeat_s: Option<f64>,
    /// A job on every node: `submit` -> `start`, seconds.
    pub start_s: Option<f64>,
    /// The same job: `alloc` -> `start`, seconds.
    pub alloc_to_start_s: Option<f64>,
    /// Job manager resident memory with every node joined.
    pub rss_bytes: Option<u64>,
    /// What went wrong, if the run did not finish.
    pub error: Option<String>,
}

impl NodeFigures {
    /// One JSON object.
    pub fn json(&self) -> Value {
        json!({
            "workload": "nodes",
            "nodes": self.nodes,
            "join_s": self.join_s,
            "idle_cpu_percent": self.idle_cpu_percent,
            "heartbeat_s": self.heartbeat_s,
            "start_s": self.start_s,
            "alloc_to_start_s": self.alloc_to_start_s,
            "rss_bytes": self.rss_bytes,
            "error": self.error,
            "loadavg": super::figures::loadavg(),
        })
    }

    /// One table line.
    pub fn line(&self) -> String {
        let f = |v: Option<f64>, d: usize| v.map_or("-".into(), |x| format!("{x:.d$}"));
        format!(
            "nodes {:>6}  join {:>7}s  idle cpu {:>6}% (heartbeat {}s)  start {:>7}s (alloc->start {}s)  rss {}{}",
            self.nodes,
            f(self.join_s, 2),
            f(self.idle_cpu_percent, 2),
            f(self.heartbeat_s, 1),
            f(self.start_s, 3),
            f(self.alloc_to_start_s, 3),
            self.rss_bytes
                .map_or("-".into(), |b| format!("{:.1}M", b as f64 / 1048576.0)),
            self.error
                .as_ref()
                .map_or(String::new(), |e| format!("  FAILED: {e}")),
        )
    }
}

/// Let this process and the job manager it starts hold a connection per
/// node: raise the soft limit on open files to the hard one.
pub fn raise_open_files(nodes: u32) -> anyhow::Result<()> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    // Each side holds one socket per node, and a few hundred more files.
    let want = u64::from(nodes) + 512;
    if soft >= want {
        return Ok(());
    }
    if hard < want {
        bail!(
            "{nodes} nodes need about {want} open files; the hard limit is {hard} \
             (raise it with ulimit -Hn as root)"
        );
    }
    setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    Ok(())
}

/// Run one measurement against `target`, a job manager of `nodes` hosts
/// `sim[0-N]` that no exec service serves yet.
pub async fn run(target: &Target, nodes: u32, idle: Duration) -> anyhow::Result<NodeFigures> {
    let mut fig = NodeFigures {
        nodes,
        ..Default::default()
    };
    let exec_addr = serve_exec().await?;
    let uri = target.uri().to_string();
    let t0 = Instant::now();
    let joined = Arc::new(AtomicU32::new(0));
    let interval = Arc::new(std::sync::Mutex::new(None::<f64>));
    let mut streams = JoinSet::new();
    let mut connecting = JoinSet::new();
    for i in 0..nodes {
        if connecting.len() >= CONNECTING
            && let Some(r) = connecting.join_next().await
        {
            streams.spawn(r??);
        }
        let (uri, addr) = (uri.clone(), exec_addr.clone());
        let (joined, interval) = (Arc::clone(&joined), Arc::clone(&interval));
        connecting.spawn(async move { node(i, uri, addr, joined, interval).await });
    }
    while let Some(r) = connecting.join_next().await {
        streams.spawn(r??);
    }
    wait_all_up(target, nodes, &joined, &mut streams).await?;
    fig.join_s = Some(t0.elapsed().as_secs_f64());
    fig.heartbeat_s = *interval.lock().unwrap_or_else(|e| e.into_inner());
    fig.rss_bytes = target.jm_rss();

    // Idle: heartbeats only.
    if let Some(pid) = target.jm_pid() {
        let before = super::cpu::own_seconds(pid);
        let t = Instant::now();
        tokio::time::sleep(idle).await;
        let after = super::cpu::own_seconds(pid);
        if let (Some(b), Some(a)) = (before, after) {
            fig.idle_cpu_percent = Some((a - b) / t.elapsed().as_secs_f64() * 100.0);
        }
    }
    check_streams(&mut streams)?;

    // One job on every node.
    let (submit, alloc, start) = whole_machine_job(target, nodes).await?;
    fig.start_s = Some(start - submit);
    fig.alloc_to_start_s = Some(start - alloc);
    streams.abort_all();
    Ok(fig)
}

/// A node's life: connect, hello, then heartbeats until the run ends.
/// Returns once welcomed, with the task that keeps the node alive.
async fn node(
    i: u32,
    uri: String,
    exec_addr: String,
    joined: Arc<AtomicU32>,
    interval: Arc<std::sync::Mutex<Option<f64>>>,
) -> anyhow::Result<std::pin::Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>>>
{
    let channel = tonic::transport::Endpoint::from_shared(uri.clone())?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("node sim{i}: cannot connect to {uri}"))?;
    let (tx, rx) = mpsc::channel(4);
    let hello = pb::JoinMessage {
        message: Some(pb::join_message::Message::Hello(pb::Hello {
            nodes: vec![pb::NodeInfo {
                hostname: format!("sim{i}"),
                cores: format!("0-{}", CORES - 1),
                gpus: String::new(),
                ..Default::default()
            }],
            exec_address: exec_addr,
            ..Default::default()
        })),
    };
    tx.send(hello)
        .await
        .map_err(|_| anyhow!("node sim{i}: join stream closed"))?;
    let mut replies = NodeClient::new(channel)
        .join(ReceiverStream::new(rx))
        .await
        .map_err(|s| anyhow!("node sim{i}: join refused: {}", s.message()))?
        .into_inner();
    let every = match replies.message().await {
        Ok(Some(pb::JoinReply {
            reply: Some(pb::join_reply::Reply::Welcome(w)),
        })) => w.heartbeat_interval,
        Ok(Some(pb::JoinReply {
            reply: Some(pb::join_reply::Reply::Refused(why)),
        })) => bail!("node sim{i} refused: {why}"),
        Ok(_) => bail!("node sim{i}: the join stream ended before a welcome"),
        Err(s) => bail!("node sim{i}: {}", s.message()),
    };
    joined.fetch_add(1, Ordering::Relaxed);
    interval
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(every);
    let period = Duration::from_secs_f64(every.clamp(0.05, 3600.0));
    Ok(Box::pin(async move {
        // Spread the heartbeats over the interval, as booted nodes are.
        let offset = period.mul_f64(f64::from(i % 997) / 997.0);
        tokio::time::sleep(offset).await;
        let mut tick = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let beat = pb::JoinMessage {
                        message: Some(pb::join_message::Message::Heartbeat(pb::Heartbeat::default())),
                    };
                    if tx.send(beat).await.is_err() {
                        bail!("node sim{i}: join stream closed");
                    }
                }
                m = replies.message() => match m {
                    Ok(Some(_)) => {}
                    Ok(None) => bail!("node sim{i}: the job manager ended its join stream"),
                    Err(s) => bail!("node sim{i}: {}", s.message()),
                },
            }
        }
    }))
}

/// Wait until the job manager counts `nodes` up; a node task that fails
/// ends the wait with its error.
async fn wait_all_up(
    target: &Target,
    nodes: u32,
    joined: &AtomicU32,
    streams: &mut JoinSet<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + JOIN_TIMEOUT;
    loop {
        check_streams(streams)?;
        if joined.load(Ordering::Relaxed) == nodes && target.nodes().await == Some(u64::from(nodes))
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} of {nodes} nodes welcomed, {:?} up after {}s",
                joined.load(Ordering::Relaxed),
                target.nodes().await,
                JOIN_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A node task that ended has failed: say why.
fn check_streams(streams: &mut JoinSet<anyhow::Result<()>>) -> anyhow::Result<()> {
    if let Some(done) = streams.try_join_next() {
        done??;
        bail!("a node's join stream ended");
    }
    Ok(())
}

/// Submit a test job on every node and wait for its end; the times of its
/// `submit`, `alloc` and `start` events.
async fn whole_machine_job(target: &Target, nodes: u32) -> anyhow::Result<(f64, f64, f64)> {
    let mut inst = target.connect().await?;
    let jobspec = JobspecBuilder::new(["true"])
        .nodes(u64::from(nodes))
        .ntasks(u64::from(nodes))
        .name("bench-nodes")
        .cwd("/")
        .setattr_kv("system.exec.test.run_duration=0")
        .build()?
        .to_json();
    let id = inst
        .jobs
        .submit(pb::SubmitRequest {
            jobspec,
            ..Default::default()
        })
        .await
        .map_err(client::status_error)?
        .into_inner()
        .id;
    let mut stream = fluxgate_cli::cmd::jobs::attach::watch(
        &mut inst,
        fluxgate_shared::JobId::from(id),
        "eventlog",
        true,
        true,
    )
    .await?;
    let (mut submit, mut alloc, mut start) = (None, None, None);
    while let Some(line) = stream.message().await.map_err(client::status_error)? {
        let ev = client::parse_event(&line.line)?;
        match &*ev.name {
            "submit" => submit = Some(ev.timestamp),
            "alloc" => alloc = Some(ev.timestamp),
            "start" => start = Some(ev.timestamp),
            "exception" => bail!("the whole-machine job failed: {}", line.line),
            "clean" => break,
            _ => {}
        }
    }
    match (submit, alloc, start) {
        (Some(s), Some(a), Some(t)) => Ok((s, a, t)),
        _ => bail!("the whole-machine job ended without starting"),
    }
}

/// Serve the simulated nodes' exec address on a free loopback port.
async fn serve_exec() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen for the simulated exec service")?;
    let addr = listener.local_addr()?;
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ExecServer::new(SimExec))
            .serve_with_incoming(incoming),
    );
    Ok(format!("http://{addr}"))
}

/// The exec service every simulated node announces: each job ends as
/// soon as it starts, on all of its ranks.
#[derive(Debug, Clone, Copy)]
struct SimExec;

type Responses = Pin<Box<dyn Stream<Item = Result<pb::StartResponse, Status>> + Send>>;

fn response(id: u64, r: R) -> Result<pb::StartResponse, Status> {
    Ok(pb::StartResponse {
        id,
        response: Some(r),
    })
}

#[tonic::async_trait]
impl Exec for SimExec {
    type StartStream = Responses;
    type SessionStream = Responses;

    async fn start(
        &self,
        _request: Request<pb::StartRequest>,
    ) -> Result<Response<Self::StartStream>, Status> {
        Err(Status::unimplemented(
            "the simulated nodes take starts on a session only",
        ))
    }

    async fn session(
        &self,
        request: Request<Streaming<pb::SessionRequest>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(async move {
            while let Ok(Some(req)) = inbound.message().await {
                let Some(SessionReq::Start(start)) = req.request else {
                    continue;
                };
                let id = start.id;
                let release = pb::Release {
                    ranks: "all".into(),
                    r#final: true,
                };
                for r in [
                    response(id, R::Start(true)),
                    response(
                        id,
                        R::Finish(pb::Finish {
                            status: 0,
                            ..Default::default()
                        }),
                    ),
                    response(id, R::Release(release)),
                ] {
                    if tx.send(r).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn kill(
        &self,
        _request: Request<pb::ExecKillRequest>,
    ) -> Result<Response<pb::ExecKillResponse>, Status> {
        Ok(Response::new(pb::ExecKillResponse {}))
    }

    async fn exception(
        &self,
        _request: Request<pb::ExecExceptionRequest>,
    ) -> Result<Response<pb::ExecExceptionResponse>, Status> {
        Ok(Response::new(pb::ExecExceptionResponse {}))
    }

    async fn expiration(
        &self,
        _request: Request<pb::ExpirationRequest>,
    ) -> Result<Response<pb::ExpirationResponse>, Status> {
        Ok(Response::new(pb::ExpirationResponse {}))
    }

    async fn tasks(
        &self,
        _request: Request<pb::ExecTasksRequest>,
    ) -> Result<Response<pb::ExecTasksResponse>, Status> {
        // Its jobs end as they start: none is ever running to be asked about.
        Err(Status::not_found("the simulated nodes run no processes"))
    }

    async fn pmi_fence(
        &self,
        _request: Request<pb::PmiFenceRequest>,
    ) -> Result<Response<pb::PmiFenceResponse>, Status> {
        Err(Status::not_found("the simulated nodes run no processes"))
    }

    async fn input(
        &self,
        _request: Request<tonic::Streaming<pb::ExecInputRequest>>,
    ) -> Result<Response<pb::ExecInputResponse>, Status> {
        Err(Status::not_found("the simulated nodes run no processes"))
    }
}
