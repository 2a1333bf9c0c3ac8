//! One exec service's side of its children in the job's tree ([`super::tree`]):
//! one `Exec.Start` per child, its responses merged into this service's
//! part of the job, and Kill, Exception, Expiration, input and the PMI
//! barrier's union passed down.
//!
//! A child runs only the ranks in its request's `ranks`, and starts in turn
//! the ranks below it that its request's `peers` names (none for a leaf). It
//! answers for its whole subtree: `start` once its own tasks have
//! launched (it knows the job from then on: Kill, Exception, Expiration,
//! input, the barrier's union and Tasks wait for it), RFC 24 `output_event` lines (data, eof, log; never a header),
//! `exception`s, a `pmi` message with its subtree's keys once all their
//! tasks entered a barrier, `finish{status}` (the largest shell status of
//! the subtree's ranks, the usage of each of its nodes) and
//! `release{ranks, final:true}` last, with every rank of the subtree. It
//! writes no exec eventlog events: the exec eventlog has one writer, the
//! leader. Asked for its tasks (`Exec.Tasks`), it lists those of its subtree.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::start_response::Response;
use fluxgate_proto::v1::{
    ExecExceptionRequest, ExecInputRequest, ExecKillRequest, ExecTasksRequest, ExecTasksResponse,
    ExpirationRequest, PmiFenceRequest, PmiKeys, StartRequest, StartResponse,
};
use fluxgate_shared::IdSet;
use tokio::sync::{mpsc, watch};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use super::tree::{Branch, Member};
use crate::auth::NodeCredential;
use crate::error::PeerError;
use tracing::Instrument;

/// How long to wait for a peer's connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Input chunks queued toward one peer.
const INPUT_CAPACITY: usize = 16;
/// How long a forwarded Kill or Exception, or a peer's list of tasks, may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(10);

/// Something a peer's stream delivered.
#[derive(Debug)]
pub enum PeerEvent {
    /// A response of peer `.0`.
    Response(usize, StartResponse),
    /// Peer `.0`'s stream ended before its final release; `.1` says why.
    Lost(usize, String),
}

/// Another exec service running some ranks of the job: a child of this one
/// in the job's tree.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Its Exec address.
    pub address: String,
    /// The ranks it runs.
    pub ranks: IdSet,
    /// Every rank of its subtree, its own included.
    pub subtree: IdSet,
    /// The Exec address of each rank below it, which it starts in turn.
    below: Arc<HashMap<u32, String>>,
    client: ExecClient<Channel>,
    credential: NodeCredential,
    /// Opened once the child has answered its Start (or can no longer):
    /// a child knows the job only from then on, so everything else sent to
    /// it waits for this.
    gate: Arc<watch::Sender<bool>>,
}

/// The one connection to the exec service at `address`, shared by every
/// job with ranks there (made on first use): a job spread over many nodes
/// costs no TCP and HTTP/2 handshakes per peer, which on a slow or lossy
/// link cost seconds. It pings the peer, so one cut off is noticed.
fn channel(address: &str, ranks: &IdSet, tls_ca: Option<&[u8]>) -> Result<Channel, PeerError> {
    static CHANNELS: OnceLock<Mutex<HashMap<String, Channel>>> = OnceLock::new();
    let mut map = CHANNELS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(address) {
        return Ok(c.clone());
    }
    let mut endpoint = Endpoint::from_shared(address.to_string())
        .map_err(|e| PeerError::NotUri {
            address: address.to_string(),
            ranks: ranks.to_string(),
            error: e.to_string(),
        })?
        .connect_timeout(CONNECT_TIMEOUT)
        .http2_keep_alive_interval(fluxgate_setup::conns::CLIENT_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(fluxgate_setup::conns::CLIENT_KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .initial_connection_window_size(fluxgate_proto::wire::CONNECTION_WINDOW);
    if address.starts_with("https://") {
        let ca = tls_ca.ok_or_else(|| PeerError::NoCa(address.to_string()))?;
        let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        endpoint = endpoint.tls_config(tls).map_err(|e| PeerError::Tls {
            address: address.to_string(),
            error: e.to_string(),
        })?;
    }
    let c = endpoint.connect_lazy();
    map.insert(address.to_string(), c.clone());
    Ok(c)
}

impl Peer {
    /// The child at the head of `branch` (over the connection shared with
    /// other jobs). `tls_ca` checks the certificate of a peer whose address
    /// is https.
    pub fn new(
        branch: &Branch,
        credential: NodeCredential,
        tls_ca: Option<&[u8]>,
    ) -> Result<Peer, PeerError> {
        let Member { address, ranks } = &branch.head;
        let channel = channel(address, ranks, tls_ca)?;
        Ok(Peer {
            address: address.clone(),
            ranks: ranks.clone(),
            subtree: branch.ranks(),
            below: Arc::new(branch.below_addresses()),
            client: ExecClient::new(channel),
            credential,
            gate: Arc::new(watch::channel(false).0),
        })
    }

    /// Let what waits for the child's Start go: it has answered, its
    /// stream is gone, or the job's part here has ended.
    pub fn open_gate(&self) {
        self.gate.send_replace(true);
    }

    /// Resolves once the gate is open.
    fn opened(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut gate = self.gate.subscribe();
        async move {
            // The sender lives as long as any clone of this peer.
            let _ = gate.wait_for(|open| *open).await;
        }
    }

    /// Start the peer's part of the job, `request` being the job's own with
    /// this peer's ranks and the ranks below it filled in; its responses go
    /// to `events` tagged `index`.
    pub fn start(&self, index: usize, mut request: StartRequest, events: mpsc::Sender<PeerEvent>) {
        request.ranks = self.ranks.to_string();
        request.peers = (*self.below).clone();
        let mut client = self.client.clone();
        let request = self.credential.request(request);
        let gate = self.gate.clone();
        tokio::spawn(
            async move {
                let lost = match client.start(request).await {
                    Err(status) => status.message().to_string(),
                    Ok(stream) => {
                        let mut stream = stream.into_inner();
                        loop {
                            match stream.message().await {
                                Ok(Some(r)) => {
                                    if matches!(&r.response, Some(Response::Start(_))) {
                                        gate.send_replace(true);
                                    }
                                    let last = matches!(
                                        &r.response,
                                        Some(Response::Release(rel)) if rel.r#final
                                    );
                                    if events.send(PeerEvent::Response(index, r)).await.is_err() {
                                        gate.send_replace(true);
                                        return;
                                    }
                                    if last {
                                        // To its end: a stream dropped early is
                                        // reset, and h2 drops a connection after
                                        // 1024 resets, with every stream on it.
                                        let _ = tokio::time::timeout(
                                            std::time::Duration::from_secs(5),
                                            async {
                                                while let Ok(Some(_)) = stream.message().await {}
                                            },
                                        )
                                        .await;
                                        gate.send_replace(true);
                                        return;
                                    }
                                }
                                Ok(None) => {
                                    break "its stream ended before the final release".into();
                                }
                                Err(status) => break status.message().to_string(),
                            }
                        }
                    }
                };
                gate.send_replace(true);
                let _ = events.send(PeerEvent::Lost(index, lost)).await;
            }
            .in_current_span(),
        );
    }

    /// Forward a signal (best effort: a peer that is gone has nothing to signal).
    pub fn kill(&self, id: u64, signum: i32) {
        let mut client = self.client.clone();
        let address = self.address.clone();
        let credential = self.credential.clone();
        let opened = self.opened();
        tokio::spawn(
            async move {
                opened.await;
                let call = client.kill(credential.request(ExecKillRequest { id, signum }));
                if let Ok(Err(e)) = tokio::time::timeout(CONTROL_TIMEOUT, call).await {
                    tracing::warn!(%address, error = %e.message(), "cannot forward kill");
                }
            }
            .in_current_span(),
        );
    }

    /// Forward a new expiration (best effort).
    pub fn expiration(&self, id: u64, expiration: f64) {
        let mut client = self.client.clone();
        let address = self.address.clone();
        let request = self
            .credential
            .request(ExpirationRequest { id, expiration });
        let opened = self.opened();
        tokio::spawn(
            async move {
                opened.await;
                let call = client.expiration(request);
                if let Ok(Err(e)) = tokio::time::timeout(CONTROL_TIMEOUT, call).await {
                    tracing::warn!(%address, error = %e.message(), "cannot forward expiration");
                }
            }
            .in_current_span(),
        );
    }

    /// Forward an exception (best effort).
    pub fn exception(&self, id: u64, kind: &str, severity: u32, note: &str) {
        let mut client = self.client.clone();
        let address = self.address.clone();
        let request = ExecExceptionRequest {
            id,
            r#type: kind.to_string(),
            severity,
            note: note.to_string(),
        };
        let request = self.credential.request(request);
        let opened = self.opened();
        tokio::spawn(
            async move {
                opened.await;
                let call = client.exception(request);
                if let Ok(Err(e)) = tokio::time::timeout(CONTROL_TIMEOUT, call).await {
                    tracing::warn!(%address, error = %e.message(), "cannot forward exception");
                }
            }
            .in_current_span(),
        );
    }

    /// A stream of input chunks to the peer's tasks, in order; ends when
    /// the sender is dropped.
    pub fn input_stream(&self) -> mpsc::Sender<ExecInputRequest> {
        let (tx, rx) = mpsc::channel(INPUT_CAPACITY);
        let mut client = self.client.clone();
        let address = self.address.clone();
        let request = self
            .credential
            .request(tokio_stream::wrappers::ReceiverStream::new(rx));
        let opened = self.opened();
        tokio::spawn(
            async move {
                opened.await;
                if let Err(e) = client.input(request).await {
                    tracing::warn!(%address, error = %e.message(), "cannot pass input on to a peer");
                }
            }
            .in_current_span(),
        );
        tx
    }

    /// Hand the peer the union of a PMI barrier's keys (`None`: the
    /// exchange failed). Best effort: a peer that cannot be reached is lost
    /// to the job anyway, and its stream says so.
    pub fn pmi_fence(&self, id: u64, keys: Option<&fluxgate_shared::pmi::Dict>) {
        let mut client = self.client.clone();
        let address = self.address.clone();
        let request = PmiFenceRequest {
            id,
            failed: keys.is_none(),
            keys: keys.map(|k| PmiKeys {
                kvs: k.iter().map(|(a, b)| (a.clone(), b.clone())).collect(),
            }),
        };
        let request = self.credential.request(request);
        let opened = self.opened();
        tokio::spawn(
            async move {
                opened.await;
                let call = client.pmi_fence(request);
                if let Ok(Err(e)) = tokio::time::timeout(CONTROL_TIMEOUT, call).await {
                    tracing::warn!(%address, error = %e.message(), "cannot hand a peer its PMI keys");
                }
            }
            .in_current_span(),
        );
    }

    /// The processes of the peer's tasks of job `id`, and its usage so far
    /// there; the reason when it cannot say.
    pub async fn tasks(&self, id: u64) -> Result<ExecTasksResponse, String> {
        let mut client = self.client.clone();
        let request = self.credential.request(ExecTasksRequest { id });
        let opened = self.opened();
        let call = async move {
            opened.await;
            client.tasks(request).await
        };
        match tokio::time::timeout(CONTROL_TIMEOUT, call).await {
            Ok(Ok(answer)) => Ok(answer.into_inner()),
            Ok(Err(status)) => Err(status.message().to_string()),
            Err(_) => Err(format!("no answer within {}s", CONTROL_TIMEOUT.as_secs())),
        }
    }
}
