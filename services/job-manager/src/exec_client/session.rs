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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::exec_client::ExecClient;
use fluxgate_proto::v1::session_request::Request;
use fluxgate_shared::JobId;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use super::access::{ExecAccess, channel};
use super::response::to_msg;
use crate::exec_link::{ExecMsg, ExecSink};
use crate::telemetry;

/// Requests handed to the stream but not yet taken by the transport.
const SESSION_WINDOW: usize = 256;

/// One request for a session, in the order asked.
pub(super) enum Outgoing {
    /// The start of a job.
    Start { id: JobId, request: Prepared },
    /// A request ready to send.
    Now(Request),
}

/// A start request, or why it cannot be made.
pub(super) enum Prepared {
    /// Made at once.
    Ready(Result<pb::StartRequest, String>),
    /// Being made by a task of its own (its inputs needed blocking work).
    Pending(JoinHandle<Result<pb::StartRequest, String>>),
}

/// Jobs a session carries whose final release has not come yet.
type Open = Arc<Mutex<HashSet<JobId>>>;

/// The live session to one exec address.
struct Session {
    tx: mpsc::UnboundedSender<Outgoing>,
    /// The stream's own queue, for a request with nothing queued before it.
    direct: mpsc::Sender<pb::SessionRequest>,
    /// Requests in `tx` (or being prepared) not yet handed to the stream.
    queued: Arc<AtomicUsize>,
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

impl Session {
    /// Hand `item` to the stream itself when it is ready and nothing queued
    /// waits before it, so that the start of a job does not wait for the
    /// session's task to be scheduled; the item back when it must queue.
    /// The order holds: every request asked earlier is in the stream's
    /// queue already (`queued` counts those that are not), and `send` asks
    /// under the map's lock.
    fn try_direct(&self, item: Outgoing) -> Option<Outgoing> {
        if self.queued.load(Ordering::Acquire) != 0 {
            return Some(item);
        }
        let request = match item.ready() {
            Ok(request) => request,
            Err(item) => return Some(*item),
        };
        let message = pb::SessionRequest {
            request: Some(request),
        };
        match self.direct.try_send(message) {
            Ok(()) => None,
            // The stream's queue is full (or the session is ending): the
            // session's task sends it, or reports its job lost.
            Err(mpsc::error::TrySendError::Full(m) | mpsc::error::TrySendError::Closed(m)) => {
                m.request.map(Outgoing::Now)
            }
        }
    }
}

impl<K: ExecSink> Sessions<K> {
    /// Where answers go and what every call carries, for a call of its own.
    pub(super) fn link(&self) -> (K, ExecAccess)
    where
        K: Clone,
    {
        (self.sink.clone(), self.access.clone())
    }

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
        let Some(item) = session.try_direct(item) else {
            return;
        };
        session.queued.fetch_add(1, Ordering::AcqRel);
        // A session leaves the map (under this lock) before it stops
        // reading its queue, so a session found here still takes the item.
        if session.tx.send(item).is_err() {
            tracing::error!(%addr, "an exec session stopped without leaving the map");
        }
    }

    /// Start the task of a new session to `addr`.
    fn open(self: &Arc<Self>, addr: &str) -> Session {
        let (tx, rx) = mpsc::unbounded_channel();
        let (direct, requests) = mpsc::channel(SESSION_WINDOW);
        let queued = Arc::new(AtomicUsize::new(0));
        let open = Open::default();
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let queue = Queue {
            rx,
            to_stream: direct.clone(),
            queued: Arc::clone(&queued),
        };
        tokio::spawn(Arc::clone(self).run(
            addr.to_string(),
            generation,
            queue,
            requests,
            Arc::clone(&open),
        ));
        Session {
            tx,
            direct,
            queued,
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
        mut queue: Queue,
        requests: mpsc::Receiver<pb::SessionRequest>,
        open: Open,
    ) {
        let error = tokio::select! {
            e = self.read(&addr, requests, &open) => e,
            () = self.write(&mut queue, &open) => Ended::Failed("the job manager stopped".into()),
        };
        {
            let mut map = lock(&self.map);
            if map.get(&addr).is_some_and(|s| s.generation == generation) {
                map.remove(&addr);
            }
        }
        // Nothing more can be queued here; what was is reported lost below.
        let rx = &mut queue.rx;
        rx.close();
        while let Ok(item) = rx.try_recv() {
            if let Outgoing::Start {
                request: Prepared::Pending(request),
                ..
            } = item
            {
                request.abort();
            }
        }
        let error = match error {
            Ended::Failed(error) => error,
            Ended::CoreStopped => {
                // At shutdown or a step down: the jobs run on, for the
                // next leader to reattach, and nobody hears them lost.
                tracing::debug!(%addr, "exec session ended with the core");
                return;
            }
        };
        tracing::warn!(%addr, %error, "exec session ended");
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
    async fn write(&self, queue: &mut Queue, open: &Open) {
        while let Some(item) = queue.rx.recv().await {
            // Whatever becomes of this item, it no longer waits before the
            // next one once this pass is over.
            let _taken = Taken(&queue.queued);
            let request = match item {
                Outgoing::Now(r) => r,
                Outgoing::Start { id, request } => {
                    let made = match request {
                        Prepared::Ready(made) => made,
                        Prepared::Pending(task) => task
                            .await
                            .unwrap_or_else(|e| Err(format!("preparing the start: {e}"))),
                    };
                    match made {
                        Ok(start) => Request::Start(start),
                        Err(error) => {
                            self.lose(open, id, error).await;
                            continue;
                        }
                    }
                }
            };
            let message = pb::SessionRequest {
                request: Some(request),
            };
            if queue.to_stream.send(message).await.is_err() {
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
    ) -> Ended {
        let channel = match channel(addr, &self.access) {
            Ok(c) => c,
            Err(e) => return Ended::Failed(e),
        };
        let request = self.access.request(ReceiverStream::new(requests));
        let mut stream = match ExecClient::new(channel).session(request).await {
            Ok(r) => r.into_inner(),
            Err(s) => return Ended::Failed(s.message().to_string()),
        };
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                () = self.sink.closed() => return Ended::CoreStopped,
            };
            let resp = match message {
                Ok(Some(r)) => r,
                Ok(None) => return Ended::Failed("the exec service ended the session".into()),
                Err(s) => return Ended::Failed(s.message().to_string()),
            };
            let Some((msg, last)) = to_msg(resp) else {
                continue;
            };
            if last {
                lock(open).remove(&msg.id());
            }
            if !self.sink.deliver(msg).await {
                // The core has stopped: nobody reads the rest.
                return Ended::CoreStopped;
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

/// Why a session ended.
enum Ended {
    /// The stream failed or was never opened: why.
    Failed(String),
    /// The core stopped (shutdown, or a step down): nobody reads its answers.
    CoreStopped,
}

/// The session task's side of the queue.
struct Queue {
    rx: mpsc::UnboundedReceiver<Outgoing>,
    to_stream: mpsc::Sender<pb::SessionRequest>,
    queued: Arc<AtomicUsize>,
}

/// Counts one queued request as handed on when dropped.
struct Taken<'a>(&'a AtomicUsize);

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Outgoing {
    /// The request itself, when it can be sent as it is; else the item back.
    fn ready(self) -> Result<Request, Box<Outgoing>> {
        match self {
            Outgoing::Now(r) => Ok(r),
            Outgoing::Start {
                request: Prepared::Ready(Ok(start)),
                ..
            } => Ok(Request::Start(start)),
            other => Err(Box::new(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::time::Duration;

    use fluxgate_proto::v1::exec_server::{Exec, ExecServer};
    use tokio_stream::Stream;
    use tokio_stream::wrappers::TcpListenerStream;
    use tonic::{Response, Status};

    use super::*;

    type Responses = Pin<Box<dyn Stream<Item = Result<pb::StartResponse, Status>> + Send>>;

    /// An exec service that says what each session request was, in the
    /// order they came.
    struct Recorder(mpsc::UnboundedSender<String>);

    fn what(r: &pb::SessionRequest) -> String {
        match &r.request {
            Some(Request::Start(s)) => format!("start {}", s.id),
            Some(Request::Kill(k)) => format!("kill {}", k.id),
            Some(Request::Exception(e)) => format!("exception {}", e.id),
            Some(Request::Expiration(e)) => format!("expiration {}", e.id),
            None => "nothing".into(),
        }
    }

    #[tonic::async_trait]
    impl Exec for Recorder {
        type StartStream = Responses;
        type SessionStream = Responses;

        async fn session(
            &self,
            request: tonic::Request<tonic::Streaming<pb::SessionRequest>>,
        ) -> Result<Response<Responses>, Status> {
            let mut inbound = request.into_inner();
            let seen = self.0.clone();
            // The answer stays open while the requests come.
            let (open, answers) = mpsc::channel(1);
            tokio::spawn(async move {
                while let Ok(Some(r)) = inbound.message().await {
                    let _ = seen.send(what(&r));
                }
                drop(open);
            });
            Ok(Response::new(Box::pin(ReceiverStream::new(answers))))
        }

        async fn start(
            &self,
            _: tonic::Request<pb::StartRequest>,
        ) -> Result<Response<Responses>, Status> {
            Err(Status::unimplemented("sessions only"))
        }

        async fn kill(
            &self,
            _: tonic::Request<pb::ExecKillRequest>,
        ) -> Result<Response<pb::ExecKillResponse>, Status> {
            Err(Status::unimplemented("sessions only"))
        }

        async fn exception(
            &self,
            _: tonic::Request<pb::ExecExceptionRequest>,
        ) -> Result<Response<pb::ExecExceptionResponse>, Status> {
            Err(Status::unimplemented("sessions only"))
        }

        async fn expiration(
            &self,
            _: tonic::Request<pb::ExpirationRequest>,
        ) -> Result<Response<pb::ExpirationResponse>, Status> {
            Err(Status::unimplemented("sessions only"))
        }

        async fn tasks(
            &self,
            _: tonic::Request<pb::ExecTasksRequest>,
        ) -> Result<Response<pb::ExecTasksResponse>, Status> {
            Err(Status::unimplemented("sessions only"))
        }

        async fn pmi_fence(
            &self,
            _: tonic::Request<pb::PmiFenceRequest>,
        ) -> Result<Response<pb::PmiFenceResponse>, Status> {
            Err(Status::unimplemented("sessions only"))
        }

        async fn input(
            &self,
            _: tonic::Request<tonic::Streaming<pb::ExecInputRequest>>,
        ) -> Result<Response<pb::ExecInputResponse>, Status> {
            Err(Status::unimplemented("sessions only"))
        }
    }

    /// Where the session's answers go: only the lost jobs matter here.
    #[derive(Clone)]
    struct Lost(mpsc::UnboundedSender<JobId>);

    impl ExecSink for Lost {
        async fn deliver(&self, msg: ExecMsg) -> bool {
            if let ExecMsg::Lost { id, .. } = msg {
                let _ = self.0.send(id);
            }
            true
        }

        async fn closed(&self) {
            std::future::pending().await
        }
    }

    fn start(id: u64) -> pb::StartRequest {
        pb::StartRequest {
            id,
            ..Default::default()
        }
    }

    fn kill(id: u64) -> Outgoing {
        Outgoing::Now(Request::Kill(pb::ExecKillRequest { id, signum: 15 }))
    }

    async fn next(seen: &mut mpsc::UnboundedReceiver<String>) -> String {
        tokio::time::timeout(Duration::from_secs(10), seen.recv())
            .await
            .expect("a request in time")
            .expect("the recorder is up")
    }

    #[tokio::test]
    async fn requests_reach_the_exec_service_in_the_order_asked() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = format!("http://{}", listener.local_addr().expect("address"));
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(ExecServer::new(Recorder(seen_tx)))
                .serve_with_incoming(TcpListenerStream::new(listener)),
        );
        let (lost_tx, mut lost) = mpsc::unbounded_channel();
        let sessions = Sessions::new(Lost(lost_tx), ExecAccess::default());

        // A start still being made holds back everything asked after it,
        // ready or not.
        let (go, made) = tokio::sync::oneshot::channel::<()>();
        let pending = tokio::spawn(async move {
            let _ = made.await;
            Ok(start(1))
        });
        let id = |n: u64| JobId::from(n);
        sessions.send(
            &addr,
            Outgoing::Start {
                id: id(1),
                request: Prepared::Pending(pending),
            },
        );
        sessions.send(&addr, kill(1));
        sessions.send(
            &addr,
            Outgoing::Start {
                id: id(2),
                request: Prepared::Ready(Ok(start(2))),
            },
        );
        let early = tokio::time::timeout(Duration::from_millis(300), seen.recv()).await;
        assert!(early.is_err(), "sent before the first start: {early:?}");
        go.send(()).expect("the start is still being made");
        for want in ["start 1", "kill 1", "start 2"] {
            assert_eq!(next(&mut seen).await, want);
        }

        // With nothing waiting, ready requests go straight to the stream,
        // still in order; a start that could not be made is not sent, and
        // its job is reported lost.
        sessions.send(&addr, kill(2));
        sessions.send(
            &addr,
            Outgoing::Start {
                id: id(3),
                request: Prepared::Ready(Ok(start(3))),
            },
        );
        sessions.send(
            &addr,
            Outgoing::Start {
                id: id(4),
                request: Prepared::Ready(Err("no jobspec".into())),
            },
        );
        sessions.send(&addr, kill(4));
        for want in ["kill 2", "start 3", "kill 4"] {
            assert_eq!(next(&mut seen).await, want);
        }
        let gone = tokio::time::timeout(Duration::from_secs(10), lost.recv()).await;
        assert_eq!(gone.ok().flatten(), Some(id(4)));
    }
}
