//! The job manager's side of the exec service's contract, for the exec
//! tests: a small fake `Node` server that welcomes every hello, and waits.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fluxgate_proto::v1::join_message::Message;
use fluxgate_proto::v1::join_reply::Reply;
use fluxgate_proto::v1::node_server::{Node, NodeServer};
use fluxgate_proto::v1::{Hello, JoinMessage, JoinReply, Welcome};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

/// What the fake job manager saw.
#[derive(Clone, Default)]
pub struct FakeJm {
    /// Every hello, in order.
    pub hellos: Arc<Mutex<Vec<Hello>>>,
    /// Heartbeats received on any join stream.
    pub heartbeats: Arc<AtomicUsize>,
    next_rank: Arc<AtomicU32>,
    /// Close the first join stream right after the welcome.
    pub drop_first: Arc<AtomicBool>,
    /// The fence (seconds) its welcomes ask for; 0 (none) unless set.
    pub fence: Arc<Mutex<f64>>,
    /// Acknowledge heartbeats (until cleared: a job manager cut off).
    pub ack: Arc<AtomicBool>,
}

#[tonic::async_trait]
impl Node for FakeJm {
    type JoinStream = ReceiverStream<Result<JoinReply, Status>>;

    async fn join(
        &self,
        request: Request<Streaming<JoinMessage>>,
    ) -> Result<Response<Self::JoinStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(4);
        let jm = self.clone();
        tokio::spawn(async move {
            let Ok(Some(JoinMessage {
                message: Some(Message::Hello(hello)),
            })) = inbound.message().await
            else {
                return;
            };
            let n = hello.nodes.len() as u32;
            let base = jm.next_rank.fetch_add(n, Ordering::SeqCst);
            jm.hellos.lock().unwrap().push(hello);
            let welcome = Welcome {
                ranks: (base..base + n).collect(),
                heartbeat_interval: 0.05,
                fence_timeout: *jm.fence.lock().unwrap(),
                heartbeat_idle: 0.0,
            };
            let _ = tx
                .send(Ok(JoinReply {
                    reply: Some(Reply::Welcome(welcome)),
                }))
                .await;
            if jm.drop_first.swap(false, Ordering::SeqCst) {
                return;
            }
            while let Ok(Some(m)) = inbound.message().await {
                if let Some(Message::Heartbeat(hb)) = m.message {
                    jm.heartbeats.fetch_add(1, Ordering::SeqCst);
                    if jm.ack.load(Ordering::SeqCst) {
                        let ack = JoinReply {
                            reply: Some(Reply::HeartbeatAck(hb)),
                        };
                        let _ = tx.try_send(Ok(ack));
                    }
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

/// A fake job manager on an ephemeral port: its URI and what it saw.
pub async fn fake_jm() -> (String, FakeJm) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let jm = FakeJm::default();
    let svc = NodeServer::new(jm.clone());
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    (format!("http://{addr}"), jm)
}

/// Poll `cond` until it holds (10 s at most).
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

impl FakeJm {
    /// Wait until `n` hellos have arrived.
    pub async fn wait_hellos(&self, n: usize) {
        wait_for("hello", || self.hellos.lock().unwrap().len() >= n).await;
    }
}
