//! One simulated node: its own connection and `Node.Join` stream, a hello
//! naming it, a heartbeat at the interval the welcome gives; and the exec
//! service every simulated node of a process announces, which ends each
//! job as it starts (so what is measured is the job manager's own work).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_server::{Exec, ExecServer};
use fluxgate_proto::v1::node_client::NodeClient;
use fluxgate_proto::v1::session_request::Request as SessionReq;
use fluxgate_proto::v1::start_response::Response as R;
use fluxgate_shared::resource::liveness::next_heartbeat;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// Cores each simulated node offers.
pub const CORES: u32 = 4;

/// What keeps a joined node alive: its heartbeats, until it fails.
pub type Alive = Pin<Box<dyn std::future::Future<Output = anyhow::Result<()>> + Send>>;

/// A node's life: connect, hello, then heartbeats until the run ends.
/// Returns once welcomed, with the task that keeps the node alive.
pub async fn node(
    i: u32,
    uri: String,
    exec_addr: String,
    joined: Arc<AtomicU32>,
    interval: Arc<std::sync::Mutex<Option<f64>>>,
) -> anyhow::Result<Alive> {
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
    let (every, idle) = match replies.message().await {
        Ok(Some(pb::JoinReply {
            reply: Some(pb::join_reply::Reply::Welcome(w)),
        })) => (w.heartbeat_interval, w.heartbeat_idle),
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
    let base = every.clamp(0.05, 3600.0);
    let idle = if idle.is_finite() {
        idle.clamp(base, 3600.0)
    } else {
        base
    };
    Ok(Box::pin(async move {
        // Spread the heartbeats over the interval, as booted nodes are;
        // idle, as a real exec service with no job is, they slow down.
        let mut period = base;
        let offset = period * f64::from(i % 997) / 997.0;
        let mut next = tokio::time::Instant::now() + Duration::from_secs_f64(offset);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {
                    let beat = pb::JoinMessage {
                        message: Some(pb::join_message::Message::Heartbeat(pb::Heartbeat::default())),
                    };
                    if tx.send(beat).await.is_err() {
                        bail!("node sim{i}: join stream closed");
                    }
                    period = next_heartbeat(period, base, idle, false);
                    next = tokio::time::Instant::now() + Duration::from_secs_f64(period);
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

/// Serve the simulated nodes' exec address on a free loopback port.
pub async fn serve_exec() -> anyhow::Result<String> {
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
