//! `fluxgate.v1.Node`: the join stream each exec service holds open.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::node_server::Node;
use fluxgate_shared::auth::Action;
use fluxgate_shared::{IdSet, JobId};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use super::containment::Containment;
use super::{allow, ask};
use crate::auth::caller;
use crate::config::Config;
use crate::core::{Heartbeats, HelloJobs, Msg, NodeInfo, NodeMsg};

/// The Node service.
#[derive(Debug, Clone)]
pub struct NodeService {
    inbox: mpsc::Sender<Msg>,
    config: Arc<Config>,
    sessions: Arc<AtomicU64>,
    cancel: CancellationToken,
    heartbeats: Heartbeats,
    containment: Containment,
}

impl NodeService {
    /// A service feeding the core's inbox, recording heartbeats in `heartbeats`.
    pub fn new(
        inbox: mpsc::Sender<Msg>,
        config: Arc<Config>,
        cancel: CancellationToken,
        heartbeats: Heartbeats,
    ) -> Self {
        NodeService {
            inbox,
            config,
            sessions: Arc::new(AtomicU64::new(1)),
            cancel,
            heartbeats,
            containment: Containment::default(),
        }
    }

    /// Record each joining node's containment mode in `containment`.
    pub fn with_containment(self, containment: Containment) -> Self {
        NodeService {
            containment,
            ..self
        }
    }
}

type ReplyStream = Pin<Box<dyn Stream<Item = Result<pb::JoinReply, Status>> + Send>>;

/// What a hello says: the nodes, the exec address, and the jobs the exec
/// service runs and those whose end it holds.
type Parsed = (Vec<NodeInfo>, String, HelloJobs);

fn parse_hello(hello: pb::Hello) -> Result<Parsed, String> {
    let mut nodes = Vec::with_capacity(hello.nodes.len());
    for n in hello.nodes {
        let cores =
            IdSet::parse(&n.cores).map_err(|e| format!("node {}: cores: {e}", n.hostname))?;
        let gpus = IdSet::parse(&n.gpus).map_err(|e| format!("node {}: gpus: {e}", n.hostname))?;
        if n.hostname.is_empty() || n.hostname.contains([',', '[', ']', ' ']) {
            return Err(format!("{:?} is not a valid hostname", n.hostname));
        }
        nodes.push(NodeInfo {
            hostname: n.hostname,
            cores,
            gpus,
        });
    }
    if !(hello.exec_address.starts_with("http://") || hello.exec_address.starts_with("https://")) {
        return Err(format!(
            "exec address {:?} must be a URI such as http://127.0.0.1:7001",
            hello.exec_address
        ));
    }
    let jobs = HelloJobs {
        running: hello.jobs.into_iter().map(JobId::from).collect(),
        ended: hello.ended.into_iter().map(JobId::from).collect(),
    };
    Ok((nodes, hello.exec_address, jobs))
}

#[tonic::async_trait]
impl Node for NodeService {
    type JoinStream = ReplyStream;

    async fn join(
        &self,
        request: Request<Streaming<pb::JoinMessage>>,
    ) -> Result<Response<Self::JoinStream>, Status> {
        // A rogue process must not become a node: joining needs the node
        // credential (or the owner's) when the instance requires credentials.
        allow(&caller(&request)?, Action::NodeJoin, None)?;
        let mut incoming = request.into_inner();
        let first = incoming
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("join stream closed before hello"))?;
        let Some(pb::join_message::Message::Hello(hello)) = first.message else {
            return Err(Status::invalid_argument(
                "the first join message must be hello",
            ));
        };
        let modes: Vec<(String, String)> = hello
            .nodes
            .iter()
            .map(|n| (n.hostname.clone(), n.containment.clone()))
            .collect();
        let (nodes, addr, jobs) = parse_hello(hello).map_err(Status::invalid_argument)?;
        let session = self.sessions.fetch_add(1, Ordering::Relaxed);
        let ranks = ask(&self.inbox, |reply| {
            Msg::Node(NodeMsg::Hello {
                session,
                nodes,
                addr,
                jobs,
                reply,
            })
        })
        .await?
        .map_err(|e| Status::failed_precondition(e.to_string()))?;
        self.containment
            .record(modes.iter().map(|(h, m)| (h.as_str(), m.as_str())));
        let (tx, rx) = mpsc::channel(16);
        let welcome = pb::JoinReply {
            reply: Some(pb::join_reply::Reply::Welcome(pb::Welcome {
                ranks,
                heartbeat_interval: self.config.resource.heartbeat_interval,
                fence_timeout: self.config.resource.liveness().fence,
            })),
        };
        let _ = tx.send(Ok(welcome)).await;
        let inbox = self.inbox.clone();
        let cancel = self.cancel.clone();
        let heartbeats = self.heartbeats.clone();
        tokio::spawn(async move {
            // Heartbeats until the stream ends or errs (or shutdown); then the
            // nodes are gone.
            loop {
                let msg = tokio::select! {
                    m = incoming.message() => m,
                    _ = cancel.cancelled() => break,
                };
                let Ok(Some(msg)) = msg else {
                    break;
                };
                if let Some(pb::join_message::Message::Heartbeat(hb)) = msg.message {
                    heartbeats.beat(session);
                    // The acknowledgement keeps the node from fencing
                    // itself; one that cannot be sent (the node reads no
                    // replies) is not owed.
                    let ack = pb::JoinReply {
                        reply: Some(pb::join_reply::Reply::HeartbeatAck(hb)),
                    };
                    if tx.try_send(Ok(ack)).is_err() {
                        tracing::debug!(session, "heartbeat acknowledgement dropped");
                    }
                }
            }
            let _ = inbox.send(Msg::Node(NodeMsg::Gone { session })).await;
            // Keep the reply stream open until the client is gone.
            drop(tx);
        });
        Ok(Response::new(
            Box::pin(ReceiverStream::new(rx)) as ReplyStream
        ))
    }
}
