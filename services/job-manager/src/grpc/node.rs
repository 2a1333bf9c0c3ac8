//! `fluxgate.v1.Node`: the join stream each exec service holds open.

use std::collections::HashMap;
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
use crate::error::Error;

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

impl NodeService {
    /// Admit the nodes of `hello` under a new session: their ranks and the
    /// session, or why not.
    async fn admit(&self, hello: pb::Hello) -> Result<(Vec<u32>, u64), Error> {
        let modes: Vec<(String, String)> = hello
            .nodes
            .iter()
            .map(|n| (n.hostname.clone(), n.containment.clone()))
            .collect();
        let (nodes, addr, jobs) = parse_hello(hello).map_err(Error::Invalid)?;
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
        .map_err(|e| Error::WrongState(e.to_string()))?;
        self.containment
            .record(modes.iter().map(|(h, m)| (h.as_str(), m.as_str())));
        Ok((ranks, session))
    }

    fn welcome(&self, ranks: Vec<u32>) -> pb::Welcome {
        let liveness = self.config.resource.liveness();
        let heartbeat = self.config.resource.heartbeat_interval;
        pb::Welcome {
            ranks,
            heartbeat_interval: heartbeat,
            fence_timeout: liveness.fence,
            heartbeat_idle: liveness.idle_heartbeat(heartbeat),
        }
    }

    /// The nodes of `session` are gone.
    async fn gone(&self, session: u64) {
        let _ = self.inbox.send(Msg::Node(NodeMsg::Gone { session })).await;
    }
}

/// Replies queued on one join stream: a relay's carries a welcome per node
/// below it while thousands join at once.
const REPLIES: usize = 256;

/// One join stream after its hello: its own session (none for a relay that
/// serves no node) and the sessions of the joins it relays, by their ids.
struct Joined {
    own: Option<u64>,
    relayed: HashMap<u64, u64>,
    tx: mpsc::Sender<Result<pb::JoinReply, Status>>,
}

impl Joined {
    async fn reply(&self, reply: pb::join_reply::Reply) {
        let _ = self.tx.send(Ok(pb::JoinReply { reply: Some(reply) })).await;
    }

    /// A heartbeat: it vouches for this stream's nodes and for the relayed
    /// joins it names.
    fn heartbeat(&self, service: &NodeService, hb: pb::Heartbeat) {
        let sessions = self.own.into_iter().chain(
            hb.children
                .iter()
                .filter_map(|c| self.relayed.get(c).copied()),
        );
        service.heartbeats.beat_all(sessions);
        // The acknowledgement keeps the node from fencing itself; one that
        // cannot be sent (the node reads no replies) is not owed.
        let ack = pb::JoinReply {
            reply: Some(pb::join_reply::Reply::HeartbeatAck(pb::Heartbeat {
                seq: hb.seq,
                children: Vec::new(),
            })),
        };
        if self.tx.try_send(Ok(ack)).is_err() {
            tracing::debug!(session = ?self.own, "heartbeat acknowledgement dropped");
        }
    }

    async fn relayed_hello(&mut self, service: &NodeService, child: u64, hello: pb::Hello) {
        let reply = match service.admit(hello).await {
            Ok((ranks, session)) => {
                if let Some(old) = self.relayed.insert(child, session) {
                    service.gone(old).await;
                }
                pb::join_reply::Reply::RelayedWelcome(pb::RelayedWelcome {
                    child,
                    welcome: Some(service.welcome(ranks)),
                })
            }
            Err(e) => pb::join_reply::Reply::RelayedRefused(pb::RelayedRefused {
                child,
                why: e.to_string(),
            }),
        };
        self.reply(reply).await;
    }

    /// Read the stream until it ends or errs (or shutdown); then every node
    /// it carried is gone.
    async fn serve(mut self, service: NodeService, mut incoming: Streaming<pb::JoinMessage>) {
        use pb::join_message::Message as M;
        loop {
            let msg = tokio::select! {
                m = incoming.message() => m,
                _ = service.cancel.cancelled() => break,
            };
            let Ok(Some(msg)) = msg else {
                break;
            };
            match msg.message {
                Some(M::Heartbeat(hb)) => self.heartbeat(&service, hb),
                Some(M::RelayedHello(pb::RelayedHello {
                    child,
                    hello: Some(hello),
                })) => self.relayed_hello(&service, child, hello).await,
                Some(M::RelayedGone(g)) => {
                    if let Some(session) = self.relayed.remove(&g.child) {
                        service.gone(session).await;
                    }
                }
                Some(M::Hello(_) | M::RelayedHello(_)) | None => {}
            }
        }
        for session in self.own.into_iter().chain(self.relayed.into_values()) {
            service.gone(session).await;
        }
        // Keep the reply stream open until the client is gone.
        drop(self.tx);
    }
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
            .ok_or_else(|| Error::Invalid("join stream closed before hello".into()))?;
        let Some(pb::join_message::Message::Hello(hello)) = first.message else {
            return Err(Error::Invalid("the first join message must be hello".into()).into());
        };
        // A relay may serve no node of its own: it joins for those below it.
        let (ranks, own) = if hello.relay && hello.nodes.is_empty() {
            (Vec::new(), None)
        } else {
            let (ranks, session) = self.admit(hello).await?;
            (ranks, Some(session))
        };
        let (tx, rx) = mpsc::channel(REPLIES);
        let welcome = pb::JoinReply {
            reply: Some(pb::join_reply::Reply::Welcome(self.welcome(ranks))),
        };
        let _ = tx.send(Ok(welcome)).await;
        let stream = Joined {
            own,
            relayed: HashMap::new(),
            tx,
        };
        tokio::spawn(stream.serve(self.clone(), incoming));
        Ok(Response::new(
            Box::pin(ReceiverStream::new(rx)) as ReplyStream
        ))
    }
}
