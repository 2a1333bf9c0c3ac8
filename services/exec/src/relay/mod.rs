//! Relaying joins: the exec services below this one join the job manager
//! through it, so the job manager holds one connection for a whole subtree
//! (flux's TBON, Slurm's message aggregation).
//!
//! ```text
//! child -> relay   Hello / Heartbeat{seq} / (from a relay below) RelayedHello,
//!                  RelayedGone, Heartbeat{children}
//! relay -> jm      RelayedHello{id, hello}, RelayedGone{id}, and on its own
//!                  heartbeat the ids of every join heard since the last one
//! jm -> relay      RelayedWelcome{id, welcome} | RelayedRefused{id, why}
//! relay -> child   Welcome / Refused / RelayedWelcome / RelayedRefused, and
//!                  the acknowledgement of each child heartbeat
//! ```
//!
//! Each relayed join gets an id of this relay's own on the upward stream,
//! so relays stack. A relay takes joins only while it is joined itself (a
//! child waits for that); when its own join ends, every join below it ends
//! too and the children join again, with fresh hellos, once it is back (or
//! through the next address they list: another relay or the job manager).

pub mod service;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use fluxgate_proto::v1::{JoinMessage, JoinReply, RelayedRefused, RelayedWelcome, join_reply};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::Status;

/// Replies queued toward one child stream.
pub const CHILD_REPLIES: usize = 64;

/// Where the replies for one relayed join go.
#[derive(Debug, Clone)]
struct Route {
    down: mpsc::Sender<Result<JoinReply, Status>>,
    /// The id the stream below knows it by; `None` for that stream's own hello.
    local: Option<u64>,
}

/// This service's own join, while it is welcomed: where relayed messages
/// go up, and the token cancelled when it ends.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The upward join stream's sender.
    pub tx: mpsc::Sender<JoinMessage>,
    /// Cancelled when that join ends: every join below ends with it.
    pub lost: CancellationToken,
}

#[derive(Debug, Default)]
struct Joins {
    next: u64,
    routes: HashMap<u64, Route>,
    heard: HashSet<u64>,
}

/// The joins this service relays.
#[derive(Debug, Clone)]
pub struct Relay {
    joins: Arc<Mutex<Joins>>,
    up: Arc<watch::Sender<Option<Upstream>>>,
}

impl Default for Relay {
    fn default() -> Self {
        Relay {
            joins: Arc::default(),
            up: Arc::new(watch::channel(None).0),
        }
    }
}

impl Relay {
    fn lock(&self) -> std::sync::MutexGuard<'_, Joins> {
        // Each change is a few map operations: a poisoned map is whole.
        self.joins.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This service's own join was welcomed: relayed joins may go up `tx`.
    pub fn joined(&self, tx: mpsc::Sender<JoinMessage>) -> CancellationToken {
        let lost = CancellationToken::new();
        self.up.send_replace(Some(Upstream {
            tx,
            lost: lost.clone(),
        }));
        lost
    }

    /// This service's own join ended: so does every join below it.
    pub fn left(&self) {
        if let Some(up) = self.up.send_replace(None) {
            up.lost.cancel();
        }
        let mut joins = self.lock();
        joins.routes.clear();
        joins.heard.clear();
    }

    /// Wait until this service is joined (or `shutdown`).
    pub async fn upstream(&self, shutdown: &CancellationToken) -> Option<Upstream> {
        let mut rx = self.up.subscribe();
        tokio::select! {
            r = rx.wait_for(Option::is_some) => r.ok().and_then(|u| u.clone()),
            _ = shutdown.cancelled() => None,
        }
    }

    /// A new relayed join whose replies go to `down` (under `local`, the
    /// id the stream below uses, or as its own welcome when `None`): its id
    /// on the upward stream.
    pub fn add(&self, down: mpsc::Sender<Result<JoinReply, Status>>, local: Option<u64>) -> u64 {
        let mut joins = self.lock();
        joins.next += 1;
        let id = joins.next;
        joins.routes.insert(id, Route { down, local });
        id
    }

    /// A relayed join ended: true when it was still known (its end must
    /// then go up).
    pub fn remove(&self, id: u64) -> bool {
        let mut joins = self.lock();
        joins.heard.remove(&id);
        joins.routes.remove(&id).is_some()
    }

    /// These relayed joins heartbeat.
    pub fn heard(&self, ids: impl IntoIterator<Item = u64>) {
        let mut joins = self.lock();
        for id in ids {
            if joins.routes.contains_key(&id) {
                joins.heard.insert(id);
            }
        }
    }

    /// The relayed joins heard since the last call, for this service's own
    /// heartbeat.
    pub fn take_heard(&self) -> Vec<u64> {
        let mut joins = self.lock();
        let mut ids: Vec<u64> = joins.heard.drain().collect();
        ids.sort_unstable();
        ids
    }

    /// A reply from the job manager for a relayed join: pass it down.
    /// Returns false when the reply was not for a relayed join.
    pub fn reply(&self, reply: &join_reply::Reply) -> bool {
        let (id, welcome) = match reply {
            join_reply::Reply::RelayedWelcome(w) => (w.child, Ok(w.welcome.clone())),
            join_reply::Reply::RelayedRefused(r) => (r.child, Err(r.why.clone())),
            _ => return false,
        };
        let Some(route) = self.lock().routes.get(&id).cloned() else {
            return true;
        };
        let down = match (route.local, welcome) {
            (None, Ok(w)) => join_reply::Reply::Welcome(w.unwrap_or_default()),
            (None, Err(why)) => join_reply::Reply::Refused(why),
            (Some(child), Ok(welcome)) => {
                join_reply::Reply::RelayedWelcome(RelayedWelcome { child, welcome })
            }
            (Some(child), Err(why)) => {
                join_reply::Reply::RelayedRefused(RelayedRefused { child, why })
            }
        };
        let msg = Ok(JoinReply { reply: Some(down) });
        // Never block the upward stream on one slow child.
        if let Err(mpsc::error::TrySendError::Full(msg)) = route.down.try_send(msg) {
            tokio::spawn(async move {
                let _ = route.down.send(msg).await;
            });
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_proto::v1::Welcome;

    fn welcome(child: u64, rank: u32) -> join_reply::Reply {
        join_reply::Reply::RelayedWelcome(RelayedWelcome {
            child,
            welcome: Some(Welcome {
                ranks: vec![rank],
                ..Default::default()
            }),
        })
    }

    #[tokio::test]
    async fn replies_go_down_under_the_id_the_stream_below_knows() {
        let relay = Relay::default();
        let (tx, mut rx) = mpsc::channel(4);
        let own = relay.add(tx.clone(), None);
        let below = relay.add(tx, Some(7));
        assert_ne!(own, below);
        assert!(relay.reply(&welcome(below, 3)));
        assert!(relay.reply(&welcome(own, 2)));
        let first = rx.recv().await.unwrap().unwrap().reply.unwrap();
        assert_eq!(first, welcome(7, 3));
        let second = rx.recv().await.unwrap().unwrap().reply.unwrap();
        assert_eq!(
            second,
            join_reply::Reply::Welcome(Welcome {
                ranks: vec![2],
                ..Default::default()
            })
        );
        assert!(!relay.reply(&join_reply::Reply::Refused("x".into())));
    }

    #[tokio::test]
    async fn heard_joins_are_taken_once_and_gone_ones_never() {
        let relay = Relay::default();
        let (tx, _rx) = mpsc::channel(4);
        let a = relay.add(tx.clone(), None);
        let b = relay.add(tx, Some(1));
        relay.heard([a, b, 99]);
        assert!(relay.remove(b));
        assert!(!relay.remove(b));
        assert_eq!(relay.take_heard(), vec![a]);
        assert!(relay.take_heard().is_empty());
    }

    #[tokio::test]
    async fn leaving_ends_every_join_below() {
        let relay = Relay::default();
        let (tx, _rx) = mpsc::channel(4);
        let (up, _up_rx) = mpsc::channel(4);
        let lost = relay.joined(up);
        let id = relay.add(tx, None);
        assert!(relay.upstream(&CancellationToken::new()).await.is_some());
        relay.left();
        assert!(lost.is_cancelled());
        assert!(!relay.remove(id));
    }
}
