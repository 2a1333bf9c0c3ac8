//! `fluxgate.v1.Node` served by a relay: the join streams of the exec
//! services below it, each passed up its own join stream.

use std::collections::HashMap;
use std::pin::Pin;

use fluxgate_proto::v1::join_message::Message;
use fluxgate_proto::v1::node_server::Node;
use fluxgate_proto::v1::{
    Heartbeat, JoinMessage, JoinReply, RelayedGone, RelayedHello, join_reply,
};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use super::{CHILD_REPLIES, Relay, Upstream};

/// The Node service of a relay.
#[derive(Debug, Clone)]
pub struct RelayService {
    relay: Relay,
    shutdown: CancellationToken,
}

impl RelayService {
    /// Serve joins through `relay` until `shutdown`.
    pub fn new(relay: Relay, shutdown: CancellationToken) -> Self {
        RelayService { relay, shutdown }
    }
}

type ReplyStream = Pin<Box<dyn Stream<Item = Result<JoinReply, Status>> + Send>>;

#[tonic::async_trait]
impl Node for RelayService {
    type JoinStream = ReplyStream;

    async fn join(
        &self,
        request: Request<Streaming<JoinMessage>>,
    ) -> Result<Response<Self::JoinStream>, Status> {
        let (tx, rx) = mpsc::channel(CHILD_REPLIES);
        tokio::spawn(serve(
            self.relay.clone(),
            self.shutdown.clone(),
            request.into_inner(),
            tx,
        ));
        Ok(Response::new(
            Box::pin(ReceiverStream::new(rx)) as ReplyStream
        ))
    }
}

/// The upward stream is gone: the child's stream ends too.
struct Lost;

/// One child's stream: its own join and the joins it relays in turn, by
/// their ids below and on the upward stream.
struct Child {
    relay: Relay,
    up: Upstream,
    tx: mpsc::Sender<Result<JoinReply, Status>>,
    own: Option<u64>,
    below: HashMap<u64, u64>,
}

/// Read one child's stream until it ends, this relay's own join ends, or
/// `shutdown`. Nothing is read before this relay is joined: the child
/// waits (and, if that takes too long, tries the next address it lists).
async fn serve(
    relay: Relay,
    shutdown: CancellationToken,
    mut incoming: Streaming<JoinMessage>,
    tx: mpsc::Sender<Result<JoinReply, Status>>,
) {
    let Some(up) = relay.upstream(&shutdown).await else {
        return;
    };
    let mut child = Child {
        relay,
        up,
        tx,
        own: None,
        below: HashMap::new(),
    };
    loop {
        let msg = tokio::select! {
            m = incoming.message() => m,
            _ = child.up.lost.cancelled() => break,
            _ = shutdown.cancelled() => break,
        };
        let Ok(Some(msg)) = msg else {
            break;
        };
        if child.on(msg).await.is_err() {
            break;
        }
    }
    child.end().await;
}

impl Child {
    async fn send(&self, message: Message) -> Result<(), Lost> {
        let msg = JoinMessage {
            message: Some(message),
        };
        self.up.tx.send(msg).await.map_err(|_| Lost)
    }

    async fn on(&mut self, msg: JoinMessage) -> Result<(), Lost> {
        match msg.message {
            Some(Message::Hello(hello)) => {
                if let Some(old) = self.own.take() {
                    self.gone(old).await?;
                }
                let id = self.relay.add(self.tx.clone(), None);
                self.own = Some(id);
                self.send(Message::RelayedHello(RelayedHello {
                    child: id,
                    hello: Some(hello),
                }))
                .await
            }
            Some(Message::RelayedHello(RelayedHello { child, hello })) => {
                let id = self.relay.add(self.tx.clone(), Some(child));
                if let Some(old) = self.below.insert(child, id) {
                    self.gone(old).await?;
                }
                self.send(Message::RelayedHello(RelayedHello { child: id, hello }))
                    .await
            }
            Some(Message::RelayedGone(RelayedGone { child })) => match self.below.remove(&child) {
                Some(id) => self.gone(id).await,
                None => Ok(()),
            },
            Some(Message::Heartbeat(hb)) => {
                let below = &self.below;
                self.relay.heard(
                    self.own
                        .into_iter()
                        .chain(hb.children.iter().filter_map(|c| below.get(c).copied())),
                );
                // This relay is joined (else the stream would have ended):
                // the child is reachable from the job manager.
                let ack = JoinReply {
                    reply: Some(join_reply::Reply::HeartbeatAck(Heartbeat {
                        seq: hb.seq,
                        children: Vec::new(),
                    })),
                };
                let _ = self.tx.try_send(Ok(ack));
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Relayed join `id` ended: say so upward, if it is still known there.
    async fn gone(&self, id: u64) -> Result<(), Lost> {
        if self.relay.remove(id) {
            self.send(Message::RelayedGone(RelayedGone { child: id }))
                .await?;
        }
        Ok(())
    }

    async fn end(self) {
        for id in self.own.into_iter().chain(self.below.values().copied()) {
            if self.gone(id).await.is_err() {
                return;
            }
        }
    }
}
