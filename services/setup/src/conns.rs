//! Connection limits of a service's gRPC listener, the same for the job
//! manager and the exec service: no caller can exhaust the service's
//! descriptors or keep it busy with sockets that do nothing.
//!
//! - At most `max_connections` connections (never more than the descriptor
//!   limit less a reserve the service keeps for its own files), and at most
//!   `max_per_peer` from one address.
//! - A connection that sends nothing within `handshake_timeout`, or nothing
//!   for `idle_timeout` later (a live HTTP/2 client answers the server's
//!   keepalive pings), is closed.
//! - At a cap, a connection that has made no authenticated call (the oldest
//!   first) is closed to make room; only when every one has, is the new
//!   one refused. Authenticated callers and nodes thus keep being served
//!   under a flood of anonymous sockets ([`AuthMarks`] notes them).
//! - An accept that fails for want of descriptors or memory (`EMFILE`,
//!   `ENFILE`, `ENOBUFS`, `ENOMEM`) is retried after a pause that grows to
//!   a second, never at once: the connection waits in the backlog.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;
use tonic::codegen::{Service, http};
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

/// The limits of one listener.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnLimits {
    /// Most connections at once.
    pub max_connections: usize,
    /// Most connections from one peer address.
    pub max_per_peer: usize,
    /// Seconds a new connection has to send its first bytes.
    pub handshake_timeout: Duration,
    /// Seconds a connection may send nothing (keepalive answers count).
    pub idle_timeout: Duration,
    /// Descriptors kept for the service's own files, never used by
    /// connections.
    pub fd_reserve: u64,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 4096,
            max_per_peer: 1024,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            fd_reserve: 256,
        }
    }
}

/// The interval of the server's HTTP/2 keepalive pings.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// How long a keepalive ping may go unanswered before the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// Between HTTP/2 pings a client sends on a long-lived connection (a job
/// manager's to its exec services, theirs to it and to each other), so a
/// peer cut off on the network is noticed in seconds, not when TCP gives up.
pub const CLIENT_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// A client's ping unanswered this long breaks its connection.
pub const CLIENT_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest pause between two accepts that failed for want of resources.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// First such pause.
const MIN_BACKOFF: Duration = Duration::from_millis(20);

impl ConnLimits {
    /// `max_connections`, lowered so that connections leave `fd_reserve`
    /// descriptors free under the soft descriptor limit (raised to the hard
    /// one first).
    pub fn effective_max(&self) -> usize {
        use nix::sys::resource::{Resource, getrlimit, setrlimit};
        let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
            return self.max_connections;
        };
        let soft = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
            hard
        } else {
            soft
        };
        let room = soft.saturating_sub(self.fd_reserve).max(1);
        self.max_connections
            .min(usize::try_from(room).unwrap_or(usize::MAX))
    }
}

/// One accepted connection, as the table sees it.
#[derive(Debug)]
struct Conn {
    peer: IpAddr,
    accepted: Instant,
    authenticated: AtomicBool,
    evicted: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Conn {
    fn evict(&self) {
        self.evicted.store(true, Ordering::SeqCst);
        if let Some(w) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }
}

/// The connections of one listener.
#[derive(Debug, Default)]
struct Table {
    conns: HashMap<SocketAddr, Arc<Conn>>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Table {
    /// Make room for one more from `peer`; false when every connection in
    /// the way is authenticated.
    fn make_room(&mut self, peer: IpAddr, max: usize, max_per_peer: usize) -> bool {
        let from_peer = self.per_peer.get(&peer).copied().unwrap_or(0);
        let same_peer = from_peer >= max_per_peer;
        if !same_peer && self.conns.len() < max {
            return true;
        }
        let victim = self
            .conns
            .iter()
            .filter(|(_, c)| !c.authenticated.load(Ordering::Relaxed))
            .filter(|(_, c)| !c.evicted.load(Ordering::Relaxed))
            .filter(|(_, c)| !same_peer || c.peer == peer)
            .min_by_key(|(_, c)| c.accepted)
            .map(|(addr, c)| (*addr, c.clone()));
        match victim {
            Some((addr, conn)) => {
                conn.evict();
                self.remove(addr);
                true
            }
            None => false,
        }
    }

    fn remove(&mut self, addr: SocketAddr) {
        if let Some(conn) = self.conns.remove(&addr)
            && let Some(n) = self.per_peer.get_mut(&conn.peer)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_peer.remove(&conn.peer);
            }
        }
    }
}

/// A listener's connections under [`ConnLimits`]: the accept stream to give
/// tonic (`serve_with_incoming`), cloned for each server that serves it.
pub struct Guarded {
    listener: Arc<TcpListener>,
    table: Arc<Mutex<Table>>,
    limits: Arc<ConnLimits>,
    max: usize,
    backoff: Option<Pin<Box<Sleep>>>,
    next_backoff: Duration,
}

impl Clone for Guarded {
    fn clone(&self) -> Self {
        Guarded {
            listener: self.listener.clone(),
            table: self.table.clone(),
            limits: self.limits.clone(),
            max: self.max,
            backoff: None,
            next_backoff: MIN_BACKOFF,
        }
    }
}

impl std::fmt::Debug for Guarded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("limits", &self.limits)
            .field("max", &self.max)
            .finish()
    }
}

impl Guarded {
    /// Serve `listener` under `limits`.
    pub fn new(listener: TcpListener, limits: ConnLimits) -> Guarded {
        let max = limits.effective_max();
        Guarded {
            listener: Arc::new(listener),
            table: Arc::default(),
            limits: Arc::new(limits),
            max,
            backoff: None,
            next_backoff: MIN_BACKOFF,
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The most connections served at once (the descriptor limit applied).
    pub fn max_connections(&self) -> usize {
        self.max
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.lock().conns.len()
    }

    /// The layer that notes which connections made an authenticated call.
    pub fn auth_marks(&self) -> AuthMarks {
        AuthMarks {
            table: self.table.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register `stream` from `peer`, or refuse it (dropped: closed).
    fn admit(&self, stream: TcpStream, peer: SocketAddr) -> Option<GuardedStream> {
        let mut table = self.lock();
        if !table.make_room(peer.ip(), self.max, self.limits.max_per_peer) {
            tracing::debug!(%peer, "connection refused: at the connection limit");
            return None;
        }
        let conn = Arc::new(Conn {
            peer: peer.ip(),
            accepted: Instant::now(),
            authenticated: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            waker: Mutex::new(None),
        });
        table.conns.insert(peer, conn.clone());
        *table.per_peer.entry(peer.ip()).or_default() += 1;
        let _ = stream.set_nodelay(true);
        Some(GuardedStream {
            inner: stream,
            conn,
            peer,
            table: self.table.clone(),
            idle: Box::pin(tokio::time::sleep(self.limits.handshake_timeout)),
            idle_timeout: self.limits.idle_timeout,
        })
    }
}

/// Errors of `accept` that say the process (or system) is out of
/// descriptors or memory, not that one connection failed.
fn exhausted(e: &io::Error) -> bool {
    use nix::errno::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(Errno::EMFILE | Errno::ENFILE | Errno::ENOBUFS | Errno::ENOMEM)
    )
}

impl tokio_stream::Stream for Guarded {
    type Item = io::Result<GuardedStream>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(pause) = self.backoff.as_mut() {
                std::task::ready!(pause.as_mut().poll(cx));
                self.backoff = None;
            }
            match self.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) if exhausted(&e) => {
                    let pause = self.next_backoff;
                    tracing::warn!(error = %e, ?pause, "cannot accept a connection; pausing");
                    self.backoff = Some(Box::pin(tokio::time::sleep(pause)));
                    self.next_backoff = (pause * 2).min(MAX_BACKOFF);
                }
                // One connection's failure (reset before accept): the next.
                Poll::Ready(Err(e)) => tracing::debug!(error = %e, "accept failed"),
                Poll::Ready(Ok((stream, peer))) => {
                    self.next_backoff = MIN_BACKOFF;
                    if let Some(s) = self.admit(stream, peer) {
                        return Poll::Ready(Some(Ok(s)));
                    }
                }
            }
        }
    }
}

/// An accepted connection: closed when evicted or idle, unregistered when
/// dropped.
pub struct GuardedStream {
    inner: TcpStream,
    conn: Arc<Conn>,
    peer: SocketAddr,
    table: Arc<Mutex<Table>>,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
}

impl std::fmt::Debug for GuardedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedStream")
            .field("peer", &self.peer)
            .finish()
    }
}

impl Drop for GuardedStream {
    fn drop(&mut self) {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        // An evicted connection left the table already, and its address
        // may be a new connection's by now.
        if !self.conn.evicted.load(Ordering::SeqCst) {
            table.remove(self.peer);
        }
    }
}

impl Connected for GuardedStream {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.conn.evicted.load(Ordering::SeqCst) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        *self.conn.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let deadline = tokio::time::Instant::now() + self.idle_timeout;
                    self.idle.as_mut().reset(deadline);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.idle.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle for too long",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.conn.evicted.load(Ordering::SeqCst) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A layer on the server that marks a connection authenticated once one of
/// its calls passed the service's credential check (any call but health
/// and reflection, which are open to all, answered other than
/// UNAUTHENTICATED).
#[derive(Debug, Clone)]
pub struct AuthMarks {
    table: Arc<Mutex<Table>>,
}

impl<S> tower_layer::Layer<S> for AuthMarks {
    type Service = AuthMark<S>;

    fn layer(&self, inner: S) -> AuthMark<S> {
        AuthMark {
            inner,
            table: self.table.clone(),
        }
    }
}

/// The service [`AuthMarks`] wraps around a server.
#[derive(Debug, Clone)]
pub struct AuthMark<S> {
    inner: S,
    table: Arc<Mutex<Table>>,
}

/// The caller's address, over TLS or not.
fn remote<B>(request: &http::Request<B>) -> Option<SocketAddr> {
    let ext = request.extensions();
    ext.get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|i| i.get_ref().remote_addr())
        })
}

impl<S, B, R> Service<http::Request<B>> for AuthMark<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    R: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let path = request.uri().path();
        let open = path.starts_with("/grpc.health.") || path.starts_with("/grpc.reflection.");
        let conn = match remote(&request) {
            Some(addr) if !open => {
                let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
                table.conns.get(&addr).cloned()
            }
            _ => None,
        };
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            if let Some(conn) = conn {
                let refused = response
                    .headers()
                    .get("grpc-status")
                    .is_some_and(|s| s.as_bytes() == b"16");
                if !refused {
                    conn.authenticated.store(true, Ordering::Relaxed);
                }
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio_stream::StreamExt;

    async fn listener(limits: ConnLimits) -> (Guarded, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let g = Guarded::new(l, limits);
        let addr = g.local_addr().unwrap();
        (g, addr)
    }

    #[tokio::test]
    async fn at_the_cap_the_oldest_anonymous_connection_makes_room() {
        let limits = ConnLimits {
            max_connections: 2,
            ..ConnLimits::default()
        };
        let (mut g, addr) = listener(limits).await;
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let mut s1 = g.next().await.unwrap().unwrap();
        let _c2 = TcpStream::connect(addr).await.unwrap();
        let s2 = g.next().await.unwrap().unwrap();
        s2.conn.authenticated.store(true, Ordering::Relaxed);
        let _c3 = TcpStream::connect(addr).await.unwrap();
        let _s3 = g.next().await.unwrap().unwrap();
        assert_eq!(g.open_connections(), 2);
        // The first was evicted: its reads fail.
        let mut buf = [0u8; 4];
        let e = s1.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted);
        drop(s1);
        assert_eq!(g.open_connections(), 2);
    }

    #[tokio::test]
    async fn a_peer_over_its_share_is_refused_when_all_are_authenticated() {
        let limits = ConnLimits {
            max_per_peer: 1,
            ..ConnLimits::default()
        };
        let (mut g, addr) = listener(limits).await;
        let _c1 = TcpStream::connect(addr).await.unwrap();
        let s1 = g.next().await.unwrap().unwrap();
        s1.conn.authenticated.store(true, Ordering::Relaxed);
        let mut c2 = TcpStream::connect(addr).await.unwrap();
        // Refused: accepted and closed at once, the stream yields nothing
        // for it (it is in the backlog: the first poll takes it).
        let next = tokio::time::timeout(Duration::from_millis(300), g.next()).await;
        assert!(
            next.is_err(),
            "a connection over the peer's share was served"
        );
        let mut buf = [0u8; 1];
        assert_eq!(c2.read(&mut buf).await.unwrap(), 0);
        assert_eq!(g.open_connections(), 1);
        drop(s1);
        assert_eq!(g.open_connections(), 0);
    }

    #[tokio::test]
    async fn a_silent_connection_is_closed_after_the_handshake_timeout() {
        let limits = ConnLimits {
            handshake_timeout: Duration::from_millis(100),
            ..ConnLimits::default()
        };
        let (mut g, addr) = listener(limits).await;
        let _c = TcpStream::connect(addr).await.unwrap();
        let mut s = g.next().await.unwrap().unwrap();
        let mut buf = [0u8; 1];
        let e = s.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[test]
    fn the_reserve_is_kept_under_the_descriptor_limit() {
        let limits = ConnLimits {
            max_connections: usize::MAX,
            ..ConnLimits::default()
        };
        let (soft, _) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        let max = limits.effective_max() as u64;
        let (raised, _) =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        assert!(raised >= soft);
        assert_eq!(max, raised - 256);
    }
}
