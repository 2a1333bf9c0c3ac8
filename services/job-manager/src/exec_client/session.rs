//! One long-lived session per exec service.
//!
//! Every start, kill, exception and expiration for the jobs an exec service
//! leads goes down one bidirectional stream (`Exec.Session`), and every such
//! job's responses come back up it, tagged with the job's id: one HTTP/2
//! stream per exec service, not one per job (whose headers, flow-control
//! window and reset bookkeeping each cost the job manager and the exec
//! service work on every job).
//!
//! A session is opened on first use and lives until its stream fails (the
//! exec service went away, the connection broke). Then every job it still
//! carried (started, not yet finally released) is reported lost, as a
//! broken per-job stream was, and the next request to that address opens a
//! new session. Requests go down in the order they were asked: a start
//! whose request is still being prepared (its jobspec read off the runtime)
//! holds back the requests queued after it, so an exception never overtakes
//! the start of its job.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::session_request::Request;
use fluxgate_shared::JobId;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use super::{ExecAccess, channel, to_msg};
use crate::exec_link::{ExecMsg, ExecSink};
use crate::telemetry;

/// Requests handed to the stream but not yet taken by the transport.
const SESSION_WINDOW: usize = 256;

/// One request for a session, in the order asked.
pub(super) enum Outgoing {
    /// A start whose request is being prepared.
    Start {
        id: JobId,
        request: JoinHandle<Result<pb::StartRequest, String>>,
    },
    /// A request ready to send.
    Now(Request),
}

/// Jobs a session carries whose final release has not come yet.
type Open = Arc<Mutex<HashSet<JobId>>>;

/// The live session to one exec address.
struct Session {
    tx: mpsc::UnboundedSender<Outgoing>,
    open: Open,
    generation: u64,
}

/// The sessions of one job manager, by exec address.
pub(super) struct Sessions<K> {
    map: Mutex<HashMap<String, Session>>,
    sink: K,
    access: ExecAccess,
    generations: AtomicU64,
}

impl<K> std::fmt::Debug for Sessions<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("open", &lock(&self.map).len())
            .finish()
    }
}

/// A poisoned lock still holds a consistent map: every change is one call.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<K: ExecSink> Sessions<K> {
    /// No sessions yet; answers go to `sink`, every call carries `access`.
    pub(super) fn new(sink: K, access: ExecAccess) -> Arc<Self> {
        Arc::new(Sessions {
            map: Mutex::new(HashMap::new()),
            sink,
            access,
            generations: AtomicU64::new(0),
        })
    }

    /// Queue `item` on the session to `addr`, opening one if there is none.
    pub(super) fn send(self: &Arc<Self>, addr: &str, item: Outgoing) {
        let mut map = lock(&self.map);
        let session = map
            .entry(addr.to_string())
            .or_insert_with(|| self.open(addr));
        if let Outgoing::Start { id, .. } = &item {
            lock(&session.open).insert(*id);
        }
        // A session leaves the map (under this lock) before it stops
        // reading its queue, so a session found here still takes the item.
        if session.tx.send(item).is_err() {
            tracing::error!(%addr, "an exec session stopped without leaving the map");
        }
    }

    /// Start the task of a new session to `addr`.
    fn open(self: &Arc<Self>, addr: &str) -> Session {
        let (tx, rx) = mpsc::unbounded_channel();
        let open = Open::default();
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(Arc::clone(self).run(addr.to_string(), generation, rx, Arc::clone(&open)));
        Session {
            tx,
            open,
            generation,
        }
    }

    /// A session's life: write and read until the stream fails, then leave
    /// the map and report every job still carried as lost.
    async fn run(
        self: Arc<Self>,
        addr: String,
        generation: u64,
        mut rx: mpsc::UnboundedReceiver<Outgoing>,
        open: Open,
    ) {
        let (req_tx, req_rx) = mpsc::channel(SESSION_WINDOW);
        let error = tokio::select! {
            e = self.read(&addr, req_rx, &open) => e,
            () = self.write(&mut rx, req_tx, &open) => "the job manager stopped".to_string(),
        };
        tracing::warn!(%addr, %error, "exec session ended");
        {
            let mut map = lock(&self.map);
            if map.get(&addr).is_some_and(|s| s.generation == generation) {
                map.remove(&addr);
            }
        }
        // Nothing more can be queued here; what was is reported lost below.
        rx.close();
        while let Ok(item) = rx.try_recv() {
            if let Outgoing::Start { request, .. } = item {
                request.abort();
            }
        }
        let lost: Vec<JobId> = lock(&open).drain().collect();
        for id in lost {
            metrics::counter!(telemetry::EXEC_LOST).increment(1);
            let error = format!("{addr}: {error}");
            if !self.sink.deliver(ExecMsg::Lost { id, error }).await {
                return;
            }
        }
    }

    /// Send what is queued, in order, each start once its request is ready.
    /// Returns only when the queue is closed (the link is gone).
    async fn write(
        &self,
        rx: &mut mpsc::UnboundedReceiver<Outgoing>,
        req_tx: mpsc::Sender<pb::SessionRequest>,
        open: &Open,
    ) {
        while let Some(item) = rx.recv().await {
            let request = match item {
                Outgoing::Now(r) => r,
                Outgoing::Start { id, request } => match request.await {
                    Ok(Ok(start)) => Request::Start(start),
                    Ok(Err(error)) => {
                        self.lose(open, id, error).await;
                        continue;
                    }
                    Err(e) => {
                        self.lose(open, id, format!("preparing the start: {e}"))
                            .await;
                        continue;
                    }
                },
            };
            let message = pb::SessionRequest {
                request: Some(request),
            };
            if req_tx.send(message).await.is_err() {
                // The stream is failing: the reader says why, and ends the session.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Open the stream and deliver every response until it fails; why it did.
    async fn read(
        &self,
        addr: &str,
        requests: mpsc::Receiver<pb::SessionRequest>,
        open: &Open,
    ) -> String {
        let channel = match channel(addr, &self.access) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let request = self.access.request(ReceiverStream::new(requests));
        let mut stream = match ExecClient::new(channel).session(request).await {
            Ok(r) => r.into_inner(),
            Err(s) => return s.message().to_string(),
        };
        loop {
            let resp = match stream.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return "the exec service ended the session".into(),
                Err(s) => return s.message().to_string(),
            };
            let Some((msg, last)) = to_msg(resp) else {
                continue;
            };
            if last {
                lock(open).remove(&msg.id());
            }
            if !self.sink.deliver(msg).await {
                // The core has stopped: nobody reads the rest.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Job `id` will not start on this session: report it lost, once.
    async fn lose(&self, open: &Open, id: JobId, error: String) {
        if lock(open).remove(&id) {
            metrics::counter!(telemetry::EXEC_LOST).increment(1);
            let _ = self.sink.deliver(ExecMsg::Lost { id, error }).await;
        }
    }
}
