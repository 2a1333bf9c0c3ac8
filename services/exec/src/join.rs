//! Membership: the `Node.Join` stream this process holds open to the job manager.
//!
//! ```text
//! exec -> jm  Hello{nodes: [(hostname, cores, gpus)...], exec_address, jobs}
//! jm -> exec  Welcome{ranks (one per node, hello order), heartbeat_interval,
//!             fence_timeout} | refused(why)
//! exec -> jm  Heartbeat{seq} every interval (--heartbeat overrides the job manager's)
//! jm -> exec  heartbeat_ack{seq}, for each
//! ```
//!
//! A lost or refused stream is retried forever with bounded, jittered
//! exponential backoff; running jobs are not touched (the job manager
//! re-attaches to them; the hello lists them) unless no heartbeat has been
//! acknowledged for the fence time the job manager asked for: then every
//! job here is killed (see `fluxgate_shared::resource::liveness`), since
//! the job manager will soon give their resources to other jobs. The loop
//! ends when `shutdown` is cancelled.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fluxgate_proto::v1::join_message::Message;
use fluxgate_proto::v1::join_reply::Reply;
use fluxgate_proto::v1::node_client::NodeClient;
use fluxgate_proto::v1::{Heartbeat, Hello, JoinMessage, JoinReply, NodeInfo, Welcome};
use fluxgate_shared::resource::liveness::{fenced, next_heartbeat};
use fluxgate_shared::{IdSet, JobId};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Streaming;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::config::Config;
use crate::job::{Control, JobTable};
use crate::relay::Relay;
use crate::service::NodeState;

/// First retry delay.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
/// Longest retry delay.
const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// Heartbeat when neither the job manager nor the flags say.
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// How long to wait for the job manager's connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for a welcome: a relay that cannot reach the job
/// manager keeps its children waiting, who then try the next address.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(30);
/// Messages queued on the upward join stream of a relay (the hellos of a
/// subtree that joins at once); a plain node sends one at a time.
const RELAY_QUEUE: usize = 1024;

/// Why a join session ended.
#[derive(Debug, thiserror::Error)]
enum JoinError {
    #[error("job manager address {0:?} is not a URI: {1}")]
    BadUri(String, String),
    #[error("cannot reach the job manager: {0}")]
    Connect(#[from] tonic::transport::Error),
    #[error("join stream failed: {0}")]
    Stream(#[from] tonic::Status),
    #[error("the job manager closed the join stream")]
    Closed,
    #[error("the job manager refused this node: {0}")]
    Refused(String),
    #[error("the job manager's first reply was not a welcome")]
    NoWelcome,
    #[error("no welcome within {}s", WELCOME_TIMEOUT.as_secs())]
    WelcomeTimeout,
    #[error("TLS toward the job manager: {0}")]
    Tls(String),
}

/// Between HTTP/2 pings of a job manager (a silent connection breaks).
const PING_INTERVAL: Duration = fluxgate_setup::conns::CLIENT_KEEPALIVE_INTERVAL;
/// A ping unanswered this long breaks the connection.
const PING_TIMEOUT: Duration = fluxgate_setup::conns::CLIENT_KEEPALIVE_TIMEOUT;
/// How often the fence is checked.
const FENCE_CHECK: Duration = Duration::from_millis(250);
/// Heartbeats remembered while their acknowledgements are awaited.
const UNACKED_MAX: usize = 64;

/// When a job manager last answered this process: the send time of the
/// last heartbeat (or hello) it acknowledged, and the fence it asked for.
#[derive(Debug, Default)]
pub struct Contact {
    inner: Mutex<ContactInner>,
}

#[derive(Debug, Default)]
struct ContactInner {
    last: Option<Instant>,
    fence: f64,
}

impl Contact {
    fn lock(&self) -> std::sync::MutexGuard<'_, ContactInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A job manager answered what was sent at `sent`, asking for `fence`
    /// (seconds; `None` keeps the one asked before).
    fn answered(&self, sent: Instant, fence: Option<f64>) {
        let mut inner = self.lock();
        if inner.last.is_none_or(|t| t < sent) {
            inner.last = Some(sent);
        }
        if let Some(f) = fence {
            inner.fence = if f.is_finite() { f.max(0.0) } else { 0.0 };
        }
    }

    /// Seconds since the last answered message was sent, when the job
    /// manager asked for a fence and has answered once; else `None`.
    fn cut_off_for(&self, now: Instant) -> Option<(f64, f64)> {
        let inner = self.lock();
        let last = inner.last?;
        (inner.fence > 0.0).then(|| (now.duration_since(last).as_secs_f64(), inner.fence))
    }
}

/// Kill every job here once no job manager has answered for the fence
/// time, each once per cut; until `shutdown`.
async fn fence(contact: Arc<Contact>, jobs: JobTable, shutdown: CancellationToken) {
    let mut done: HashSet<u64> = HashSet::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(FENCE_CHECK) => {}
            _ = shutdown.cancelled() => return,
        }
        let Some((since, limit)) = contact.cut_off_for(Instant::now()) else {
            continue;
        };
        if !fenced(limit, since) {
            done.clear();
            continue;
        }
        for job in jobs.all() {
            if !done.insert(job.id()) {
                continue;
            }
            let note = format!(
                "cut off from the job manager for {since:.0}s (fence {limit}s): tasks killed"
            );
            tracing::warn!(job = %JobId::from(job.id()), %note, "fenced");
            let _ = job.control(Control::Fence(note));
        }
    }
}

/// Between pings of a job manager that has standbys.
const HA_PING_INTERVAL: Duration = Duration::from_secs(1);
/// A ping unanswered this long ends the join: the leader is gone.
const HA_PING_TIMEOUT: Duration = Duration::from_secs(2);

/// The metadata key a standby job manager names the leader with.
const LEADER_KEY: &str = "fluxgate-leader";

/// Which job manager to try next: `job_manager` may list several (one
/// leads, the others are standbys); a standby's refusal names the leader.
#[derive(Debug)]
struct Targets {
    listed: Vec<String>,
    next: usize,
    redirect: Option<String>,
    last: String,
}

impl Targets {
    fn new(job_manager: &str) -> Self {
        let listed: Vec<String> = job_manager
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_string)
            .collect();
        Targets {
            listed,
            next: 0,
            redirect: None,
            last: String::new(),
        }
    }

    /// The address to join next.
    fn take(&mut self) -> String {
        let uri = match self.redirect.take() {
            Some(uri) => uri,
            None => {
                let uri = self
                    .listed
                    .get(self.next % self.listed.len().max(1))
                    .cloned()
                    .unwrap_or_default();
                self.next = self.next.wrapping_add(1);
                uri
            }
        };
        self.last.clone_from(&uri);
        uri
    }

    /// After a failed session: follow a standby's pointer to the leader
    /// (true when there was one). A stream closed in order (a relay whose
    /// own join ended, a job manager restarting) is joined again first, so
    /// the tree keeps its shape; a dead address is left for the next.
    fn failed(&mut self, error: &JoinError) -> bool {
        if matches!(error, JoinError::Closed) && !self.last.is_empty() {
            self.redirect = Some(self.last.clone());
            return false;
        }
        if let JoinError::Stream(status) = error
            && status.code() == tonic::Code::Unavailable
            && let Some(leader) = status
                .metadata()
                .get(LEADER_KEY)
                .and_then(|v| v.to_str().ok())
        {
            self.redirect = Some(leader.to_string());
            return true;
        }
        false
    }
}

/// Join and heartbeat until `shutdown`, reconnecting as needed; fence the
/// jobs of `jobs` when cut off.
pub async fn run(
    config: Arc<Config>,
    node: Arc<NodeState>,
    jobs: JobTable,
    relay: Option<Relay>,
    shutdown: CancellationToken,
) {
    let mut backoff = Backoff::new();
    let mut targets = Targets::new(&config.job_manager);
    let contact = Arc::new(Contact::default());
    tokio::spawn(fence(Arc::clone(&contact), jobs.clone(), shutdown.clone()));
    let link = Link {
        node: &node,
        jobs: &jobs,
        contact: &contact,
        relay: relay.as_ref(),
    };
    loop {
        let target = targets.take();
        match session(&config, &target, &link, &shutdown, &mut backoff).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(job_manager = %target, error = %e, "not joined to the job manager");
                if targets.failed(&e) {
                    // A standby named the leader: go there before backing off.
                    backoff.reset();
                }
            }
        }
        let delay = backoff.next_delay();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// What a join session works with.
struct Link<'a> {
    node: &'a NodeState,
    jobs: &'a JobTable,
    contact: &'a Contact,
    relay: Option<&'a Relay>,
}

/// Ends the joins relayed through a session when the session ends, however.
struct Relaying<'a>(Option<&'a Relay>);

impl Drop for Relaying<'_> {
    fn drop(&mut self) {
        if let Some(relay) = self.0 {
            relay.left();
        }
    }
}

/// The hello this process sends, listing `jobs`: those it runs and those
/// whose end it holds.
pub fn hello(
    config: &Config,
    exec_address: &str,
    containment: &str,
    jobs: (Vec<u64>, Vec<u64>),
) -> Hello {
    let (jobs, ended) = jobs;
    let memory = crate::discover::memory(std::path::Path::new("/proc"));
    Hello {
        nodes: config
            .nodes
            .iter()
            .map(|n| NodeInfo {
                hostname: n.hostname.clone(),
                cores: n.cores.to_string(),
                gpus: n.gpus.to_string(),
                containment: containment.to_string(),
                memory,
            })
            .collect(),
        exec_address: exec_address.to_string(),
        jobs,
        ended,
        relay: config.relay,
    }
}

/// The connection to `target`, with the pings that notice a cut-off peer;
/// `None` on shutdown.
async fn connect(
    config: &Config,
    target: &str,
    shutdown: &CancellationToken,
) -> Result<Option<Channel>, JoinError> {
    let endpoint = Endpoint::from_shared(target.to_string())
        .map_err(|e| JoinError::BadUri(target.to_string(), e.to_string()))?
        .connect_timeout(CONNECT_TIMEOUT)
        .initial_connection_window_size(fluxgate_proto::wire::CONNECTION_WINDOW);
    // A job manager cut off on the network is noticed by HTTP/2 pings it
    // cannot answer (not when TCP gives up, minutes later). With standbys,
    // a leader that is paused or cut off (its kernel still answers TCP)
    // must be noticed in seconds, so the node joins the one that takes over.
    let (ping, ping_timeout) = if config.job_manager.contains(',') {
        (HA_PING_INTERVAL, HA_PING_TIMEOUT)
    } else {
        (PING_INTERVAL, PING_TIMEOUT)
    };
    let endpoint = endpoint
        .http2_keep_alive_interval(ping)
        .keep_alive_timeout(ping_timeout)
        .keep_alive_while_idle(true);
    let endpoint = match &config.tls_ca {
        Some(ca) => endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)))
            .map_err(|e| JoinError::Tls(e.to_string()))?,
        None => endpoint,
    };
    tokio::select! {
        c = endpoint.connect() => Ok(Some(c?)),
        _ = shutdown.cancelled() => Ok(None),
    }
}

/// Open the join stream on `channel` with this process's hello, sent
/// through `tx`: the welcome and the stream of replies; `None` on shutdown.
async fn open(
    config: &Config,
    channel: Channel,
    link: &Link<'_>,
    tx: &mpsc::Sender<JoinMessage>,
    rx: mpsc::Receiver<JoinMessage>,
    shutdown: &CancellationToken,
) -> Result<Option<(Welcome, Streaming<JoinReply>)>, JoinError> {
    let node = link.node;
    let hello = JoinMessage {
        message: Some(Message::Hello(hello(
            config,
            &node.address,
            node.containment(),
            link.jobs.known_ids(),
        ))),
    };
    let hello_sent = Instant::now();
    // Cannot fail: the receiver is alive and the channel empty.
    let _ = tx.try_send(hello);
    let credential = &config.node_credential;
    let welcomed = async {
        let mut replies = NodeClient::new(channel)
            .join(credential.request(ReceiverStream::new(rx)))
            .await?
            .into_inner();
        match replies.message().await? {
            Some(r) => match r.reply {
                Some(Reply::Welcome(w)) => Ok((w, replies)),
                Some(Reply::Refused(why)) => Err(JoinError::Refused(why)),
                Some(_) | None => Err(JoinError::NoWelcome),
            },
            None => Err(JoinError::Closed),
        }
    };
    let (welcome, replies) = tokio::select! {
        r = tokio::time::timeout(WELCOME_TIMEOUT, welcomed) => {
            r.map_err(|_| JoinError::WelcomeTimeout)??
        }
        _ = shutdown.cancelled() => return Ok(None),
    };
    link.contact
        .answered(hello_sent, Some(welcome.fence_timeout));
    let ranks: IdSet = welcome.ranks.iter().copied().collect();
    tracing::info!(ranks = %ranks, heartbeat = welcome.heartbeat_interval, fence = welcome.fence_timeout, "joined the job manager");
    node.set_ranks(ranks);
    Ok(Some((welcome, replies)))
}

/// How often to heartbeat, busy and idle: the flag's interval (always),
/// else the welcome's.
fn heartbeat_interval(config: &Config, welcome: &Welcome) -> (Duration, Duration) {
    if let Some(every) = config.heartbeat {
        return (every, every);
    }
    let secs = |s: f64| (s.is_finite() && s > 0.0).then(|| Duration::from_secs_f64(s.min(3600.0)));
    let base = secs(welcome.heartbeat_interval).unwrap_or(DEFAULT_HEARTBEAT);
    let idle = secs(welcome.heartbeat_idle).map_or(base, |idle| idle.max(base));
    (base, idle)
}

async fn session(
    config: &Config,
    target: &str,
    link: &Link<'_>,
    shutdown: &CancellationToken,
    backoff: &mut Backoff,
) -> Result<(), JoinError> {
    let Some(channel) = connect(config, target, shutdown).await? else {
        return Ok(());
    };
    let (tx, rx) = mpsc::channel(if link.relay.is_some() { RELAY_QUEUE } else { 4 });
    let Some((welcome, replies)) = open(config, channel, link, &tx, rx, shutdown).await? else {
        return Ok(());
    };
    backoff.reset();
    let _relaying = Relaying(link.relay);
    if let Some(relay) = link.relay {
        relay.joined(tx.clone());
    }
    let interval = heartbeat_interval(config, &welcome);
    heartbeat(link, &tx, replies, interval, shutdown).await
}

/// Heartbeat (every `base` while jobs run here or joins are relayed, else
/// slowing toward `idle`) and read the replies until the stream ends or
/// `shutdown`.
async fn heartbeat(
    link: &Link<'_>,
    tx: &mpsc::Sender<JoinMessage>,
    mut replies: Streaming<JoinReply>,
    (base, idle): (Duration, Duration),
    shutdown: &CancellationToken,
) -> Result<(), JoinError> {
    let mut every = base;
    let mut next = tokio::time::Instant::now() + every;
    let mut unacked = Unacked::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {
                let seq = unacked.sent(Instant::now());
                let children = link.relay.map(Relay::take_heard).unwrap_or_default();
                let hb = JoinMessage { message: Some(Message::Heartbeat(Heartbeat { seq, children })) };
                if tx.send(hb).await.is_err() {
                    return Err(JoinError::Closed);
                }
                let busy = link.relay.is_some() || !link.jobs.is_empty();
                every = Duration::from_secs_f64(next_heartbeat(
                    every.as_secs_f64(),
                    base.as_secs_f64(),
                    idle.as_secs_f64(),
                    busy,
                ));
                next = tokio::time::Instant::now() + every;
            }
            r = replies.message() => match r? {
                Some(JoinReply { reply: Some(Reply::Welcome(w)) }) => {
                    link.node.set_ranks(w.ranks.iter().copied().collect());
                }
                Some(JoinReply { reply: Some(Reply::HeartbeatAck(hb)) }) => {
                    if let Some(sent) = unacked.acked(hb.seq) {
                        link.contact.answered(sent, None);
                    }
                }
                Some(JoinReply { reply: Some(Reply::Refused(why)) }) => {
                    return Err(JoinError::Refused(why));
                }
                Some(JoinReply { reply: Some(r) }) => {
                    if let Some(relay) = link.relay {
                        relay.reply(&r);
                    }
                }
                Some(_) => {}
                None => return Err(JoinError::Closed),
            },
            _ = shutdown.cancelled() => return Ok(()),
        }
    }
}

/// Heartbeats sent on one stream whose acknowledgement has not come, by
/// sequence number, oldest first.
#[derive(Debug, Default)]
struct Unacked {
    next: u64,
    sent: VecDeque<(u64, Instant)>,
}

impl Unacked {
    /// A heartbeat goes at `at`: its sequence number.
    fn sent(&mut self, at: Instant) -> u64 {
        self.next += 1;
        if self.sent.len() == UNACKED_MAX {
            self.sent.pop_front();
        }
        self.sent.push_back((self.next, at));
        self.next
    }

    /// Heartbeat `seq` was acknowledged (and every one before it): when it
    /// was sent, if it is still remembered.
    fn acked(&mut self, seq: u64) -> Option<Instant> {
        let mut at = None;
        while let Some(&(s, t)) = self.sent.front() {
            if s > seq {
                break;
            }
            self.sent.pop_front();
            if s == seq {
                at = Some(t);
            }
        }
        at
    }
}

/// Exponential backoff with jitter: each delay is uniform in [d/2, d], d doubling up to the cap.
#[derive(Debug)]
struct Backoff {
    current: Duration,
    seed: u64,
}

impl Backoff {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0);
        Backoff {
            current: BACKOFF_MIN,
            seed: nanos ^ (u64::from(std::process::id()) << 32) | 1,
        }
    }

    fn reset(&mut self) {
        self.current = BACKOFF_MIN;
    }

    fn next_delay(&mut self) -> Duration {
        // xorshift64: enough to keep many nodes from retrying in lockstep.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let fraction = 0.5 + (self.seed % 1000) as f64 / 2000.0;
        let delay = self.current.mul_f64(fraction);
        self.current = (self.current * 2).min(BACKOFF_MAX);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_rotate_and_follow_the_leader_named() {
        let mut t = Targets::new("http://a:1, http://b:2");
        assert_eq!(t.take(), "http://a:1");
        assert_eq!(t.take(), "http://b:2");
        let mut refusal = tonic::Status::unavailable("standby");
        refusal
            .metadata_mut()
            .insert(LEADER_KEY, "http://c:3".parse().unwrap());
        assert!(t.failed(&JoinError::Stream(refusal)));
        assert_eq!(t.take(), "http://c:3");
        assert_eq!(t.take(), "http://a:1");
        assert!(!t.failed(&JoinError::NoWelcome));
        assert_eq!(t.take(), "http://b:2");
    }

    #[test]
    fn a_stream_closed_in_order_joins_the_same_parent_again() {
        // A relay whose own join ended closes its children's streams: they
        // wait for it rather than all joining the job manager directly.
        let mut t = Targets::new("http://relay:1,http://jm:2");
        assert_eq!(t.take(), "http://relay:1");
        assert!(!t.failed(&JoinError::Closed));
        assert_eq!(t.take(), "http://relay:1");
        // A relay that is gone (no answer, no welcome) is left for the next.
        assert!(!t.failed(&JoinError::WelcomeTimeout));
        assert_eq!(t.take(), "http://jm:2");
    }

    #[test]
    fn an_acknowledgement_dates_contact_from_its_heartbeats_send() {
        let t0 = Instant::now();
        let mut u = Unacked::default();
        let a = u.sent(t0);
        let b = u.sent(t0 + Duration::from_secs(1));
        let c = u.sent(t0 + Duration::from_secs(2));
        assert_eq!(u.acked(b), Some(t0 + Duration::from_secs(1)));
        // An older one, acknowledged late, is forgotten already.
        assert_eq!(u.acked(a), None);
        assert_eq!(u.acked(c), Some(t0 + Duration::from_secs(2)));
        assert_eq!(u.acked(99), None);
    }

    #[test]
    fn contact_fences_only_after_a_job_manager_asked_for_it() {
        let contact = Contact::default();
        let t0 = Instant::now();
        assert_eq!(contact.cut_off_for(t0), None, "never answered");
        contact.answered(t0, Some(0.0));
        assert_eq!(contact.cut_off_for(t0), None, "no fence asked");
        contact.answered(t0, Some(5.0));
        let (since, fence) = contact
            .cut_off_for(t0 + Duration::from_secs(6))
            .expect("a fence");
        assert_eq!(fence, 5.0);
        assert!(fenced(fence, since));
        // An answer to an older message does not move contact back.
        contact.answered(t0 + Duration::from_secs(5), None);
        contact.answered(t0, None);
        let (since, _) = contact
            .cut_off_for(t0 + Duration::from_secs(6))
            .expect("a fence");
        assert!(!fenced(5.0, since));
    }

    #[test]
    fn backoff_is_bounded_and_jittered() {
        let mut b = Backoff::new();
        let delays: Vec<_> = (0..20).map(|_| b.next_delay()).collect();
        assert!(delays[0] >= BACKOFF_MIN / 2 && delays[0] <= BACKOFF_MIN);
        assert!(delays.iter().all(|d| *d <= BACKOFF_MAX));
        assert!(delays[19] >= BACKOFF_MAX / 2);
        b.reset();
        assert!(b.next_delay() <= BACKOFF_MIN);
    }
}
