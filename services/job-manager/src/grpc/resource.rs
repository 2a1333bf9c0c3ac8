//! `fluxgate.v1.Resource`: RFC 28 acquire, RFC 44 journal and eventlog, drain,
//! status and list.

use std::pin::Pin;
use std::sync::Arc;

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::resource_server::Resource;
use fluxgate_shared::auth::Action;
use fluxgate_shared::resource::DrainMode;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use super::containment::Containment;
use super::{allow, ask};
use crate::auth::caller;
use crate::core::{Msg, ResourceMsg};
use crate::error::Error;
use crate::journal::Journal;
use crate::store::Store;

/// The Resource service.
#[derive(Debug, Clone)]
pub struct ResourceService<S> {
    inbox: mpsc::Sender<Msg>,
    journal: Journal,
    store: Arc<S>,
    cancel: CancellationToken,
    /// When this job manager started serving (seconds since the epoch):
    /// status reports it, so that tools show the instance's uptime.
    started: f64,
    /// Each node's containment mode, as its hello said.
    containment: Containment,
}

impl<S: Store> ResourceService<S> {
    /// A service over the core, the journal and the store.
    pub fn new(
        inbox: mpsc::Sender<Msg>,
        journal: Journal,
        store: Arc<S>,
        cancel: CancellationToken,
    ) -> Self {
        ResourceService {
            inbox,
            journal,
            store,
            cancel,
            started: crate::clock::now(),
            containment: Containment::default(),
        }
    }

    /// Answer each node's containment mode from `containment`.
    pub fn with_containment(self, containment: Containment) -> Self {
        ResourceService {
            containment,
            ..self
        }
    }
}

type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

#[tonic::async_trait]
impl<S: Store> Resource for ResourceService<S> {
    type AcquireStream = Boxed<pb::AcquireResponse>;

    async fn acquire(
        &self,
        request: Request<pb::AcquireRequest>,
    ) -> Result<Response<Self::AcquireStream>, Status> {
        allow(&caller(&request)?, Action::Acquire, None)?;
        let mut rx = ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Acquire { reply })
        })
        .await??;
        let (tx, out) = mpsc::channel(16);
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            loop {
                let m = tokio::select! {
                    m = rx.recv() => m,
                    _ = cancel.cancelled() => None,
                };
                let Some(m) = m else {
                    return;
                };
                let text = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
                let json_of = |k: &str| m.get(k).map(Value::to_string);
                let resp = pb::AcquireResponse {
                    resources: json_of("resources"),
                    up: text("up"),
                    down: text("down"),
                    property_add: json_of("property-add"),
                    property_remove: json_of("property-remove"),
                    expiration: m.get("expiration").and_then(Value::as_f64),
                };
                if tx.send(Ok(resp)).await.is_err() {
                    return;
                }
            }
        });
        Ok(Response::new(
            Box::pin(ReceiverStream::new(out)) as Self::AcquireStream
        ))
    }

    type JournalStream = Boxed<pb::JournalEntry>;

    async fn journal(
        &self,
        request: Request<pb::JournalRequest>,
    ) -> Result<Response<Self::JournalStream>, Status> {
        allow(&caller(&request)?, Action::ResourceJournal, None)?;
        let (backlog, mut rx) = self.journal.watch();
        let (tx, out) = mpsc::channel(256);
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            for line in backlog {
                let entry = pb::JournalEntry {
                    line: line.to_string(),
                    sentinel: false,
                };
                if tx.send(Ok(entry)).await.is_err() {
                    return;
                }
            }
            let sentinel = pb::JournalEntry {
                line: String::new(),
                sentinel: true,
            };
            if tx.send(Ok(sentinel)).await.is_err() {
                return;
            }
            loop {
                let next = tokio::select! {
                    n = rx.recv() => n,
                    _ = cancel.cancelled() => return,
                };
                match next {
                    Ok(line) => {
                        let entry = pb::JournalEntry {
                            line: line.to_string(),
                            sentinel: false,
                        };
                        if tx.send(Ok(entry)).await.is_err() {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let _ = tx
                            .send(Err(Error::DataLoss(format!(
                                "journal reader fell {n} events behind; reconnect to resynchronise"
                            ))
                            .into()))
                            .await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Response::new(
            Box::pin(ReceiverStream::new(out)) as Self::JournalStream
        ))
    }

    type EventlogStream = Boxed<pb::EventlogEntry>;

    async fn eventlog(
        &self,
        request: Request<pb::ResourceEventlogRequest>,
    ) -> Result<Response<Self::EventlogStream>, Status> {
        allow(&caller(&request)?, Action::ResourceJournal, None)?;
        let follow = request.into_inner().follow;
        // Subscribe before reading the store: an event committed in between is
        // both stored and heard, and is sent once.
        let (_, mut rx) = self.journal.watch();
        let store = Arc::clone(&self.store);
        let lines = tokio::task::spawn_blocking(move || store.resource_eventlog())
            .await
            .map_err(|e| Error::Internal(e.to_string()))?
            .map_err(Error::from)?;
        let (tx, out) = mpsc::channel(256);
        let cancel = self.cancel.clone();
        tokio::spawn(async move {
            let sent: std::collections::HashSet<String> = lines.iter().cloned().collect();
            for line in lines {
                if tx.send(Ok(pb::EventlogEntry { line })).await.is_err() {
                    return;
                }
            }
            if !follow {
                return;
            }
            loop {
                let next = tokio::select! {
                    n = rx.recv() => n,
                    _ = cancel.cancelled() => return,
                };
                let line = match next {
                    Ok(line) => line,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        let _ = tx
                            .send(Err(Error::DataLoss(format!(
                                "resource eventlog reader fell {n} events behind; reconnect"
                            ))
                            .into()))
                            .await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                // The journal carries every resource event; the eventlog only
                // the persistent ones.
                let persistent = fluxgate_shared::Event::parse_json(&line)
                    .ok()
                    .and_then(|e| fluxgate_shared::resource::ResourceEvent::from_event(&e).ok())
                    .is_some_and(|e| e.is_persistent());
                if !persistent || sent.contains(&*line) {
                    continue;
                }
                if tx
                    .send(Ok(pb::EventlogEntry {
                        line: line.to_string(),
                    }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
        Ok(Response::new(
            Box::pin(ReceiverStream::new(out)) as Self::EventlogStream
        ))
    }

    async fn update(
        &self,
        request: Request<pb::ResourceUpdateRequest>,
    ) -> Result<Response<pb::ResourceUpdateResponse>, Status> {
        allow(&caller(&request)?, Action::ResourceAdmin, None)?;
        let expiration = request.into_inner().expiration;
        ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Update { expiration, reply })
        })
        .await??;
        Ok(Response::new(pb::ResourceUpdateResponse {}))
    }

    async fn property(
        &self,
        request: Request<pb::PropertyRequest>,
    ) -> Result<Response<pb::PropertyResponse>, Status> {
        allow(&caller(&request)?, Action::ResourceAdmin, None)?;
        let req = request.into_inner();
        ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Property {
                name: req.property,
                targets: req.targets,
                remove: req.remove,
                reply,
            })
        })
        .await??;
        Ok(Response::new(pb::PropertyResponse {}))
    }

    async fn reload(
        &self,
        request: Request<pb::ReloadRequest>,
    ) -> Result<Response<pb::ReloadResponse>, Status> {
        allow(&caller(&request)?, Action::ResourceAdmin, None)?;
        let r = fluxgate_shared::ResourceSet::parse(&request.into_inner().r)
            .map_err(|e| Error::Invalid(format!("R: {e}")))?;
        ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Reload { r, reply })
        })
        .await??;
        Ok(Response::new(pb::ReloadResponse {}))
    }

    async fn drain(
        &self,
        request: Request<pb::DrainRequest>,
    ) -> Result<Response<pb::DrainResponse>, Status> {
        allow(&caller(&request)?, Action::Drain, None)?;
        let req = request.into_inner();
        let mode = match pb::DrainMode::try_from(req.mode) {
            Ok(pb::DrainMode::Unspecified) => DrainMode::Fail,
            Ok(pb::DrainMode::Overwrite) => DrainMode::Overwrite,
            Ok(pb::DrainMode::Update) => DrainMode::Update,
            Err(_) => {
                return Err(Error::Invalid(format!("unknown drain mode {}", req.mode)).into());
            }
        };
        ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Drain {
                targets: req.targets,
                reason: non_empty(req.reason),
                mode,
                reply,
            })
        })
        .await??;
        Ok(Response::new(pb::DrainResponse {}))
    }

    async fn undrain(
        &self,
        request: Request<pb::UndrainRequest>,
    ) -> Result<Response<pb::UndrainResponse>, Status> {
        allow(&caller(&request)?, Action::Undrain, None)?;
        let req = request.into_inner();
        ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Undrain {
                targets: req.targets,
                reason: non_empty(req.reason),
                force: req.force,
                reply,
            })
        })
        .await??;
        Ok(Response::new(pb::UndrainResponse {}))
    }

    async fn status(
        &self,
        request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        allow(&caller(&request)?, Action::ResourceView, None)?;
        let view = ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Status { reply })
        })
        .await?;
        let g = &view.groups;
        let drains: Vec<Value> = view
            .drains
            .iter()
            .map(|(ranks, hosts, t, reason)| {
                json!({"ranks": ranks.to_string(), "nodelist": hosts, "timestamp": t, "reason": reason})
            })
            .collect();
        let status = json!({
            "defined": view.inventory.is_some(),
            "all": view.inventory.as_ref().map(|r| r.ranks().to_string()).unwrap_or_default(),
            "avail": g.avail.to_string(),
            "exclude": g.exclude.to_string(),
            "draining": g.draining.to_string(),
            "drained": g.drained.to_string(),
            "torpid": g.torpid.to_string(),
            "offline": g.offline.to_string(),
            "allocated": g.allocated.to_string(),
            "online": g.up.to_string(),
            "up": view.up.to_string(),
            "drain_info": drains,
            "starttime": self.started,
        });
        Ok(Response::new(pb::StatusResponse {
            status: status.to_string(),
        }))
    }

    async fn list(
        &self,
        request: Request<pb::ResourceListRequest>,
    ) -> Result<Response<pb::ResourceListResponse>, Status> {
        allow(&caller(&request)?, Action::ResourceView, None)?;
        let view = ask(&self.inbox, |reply| {
            Msg::Resource(ResourceMsg::Status { reply })
        })
        .await?;
        let Some(all) = view.inventory else {
            return Err(Error::Unavailable(
                "the resource inventory is not defined yet: waiting for nodes to join".into(),
            )
            .into());
        };
        let up = all.copy_ranks(&view.up);
        let down = all.diff(&up);
        let allocated = view.allocated.unwrap_or_default();
        Ok(Response::new(pb::ResourceListResponse {
            all: all.to_json_string(),
            up: up.to_json_string(),
            down: down.to_json_string(),
            allocated: allocated.to_json_string(),
            containment: self.containment.all().into_iter().collect(),
        }))
    }
}
