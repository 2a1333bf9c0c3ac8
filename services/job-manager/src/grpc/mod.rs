//! The gRPC edge: wire types in and out, domain types inside.

pub mod containment;
pub mod control;
pub mod info;
pub mod job_journal;
pub mod job_service;
pub mod jobs;
pub mod list;
pub mod node;
pub mod queue;
pub mod resource;
pub mod streams;
pub mod submit;
pub mod submit_parse;
pub mod tasks;
pub mod watch;

use fluxgate_shared::auth::{Action, Caller, policy};
use tokio::sync::{mpsc, oneshot};

use crate::core::Msg;
use crate::error::Error;

/// Send `msg` to the core and wait for its answer.
pub async fn ask<T>(
    inbox: &mpsc::Sender<Msg>,
    make: impl FnOnce(oneshot::Sender<T>) -> Msg,
) -> Result<T, Error> {
    let (tx, rx) = oneshot::channel();
    inbox
        .send(make(tx))
        .await
        .map_err(|_| Error::Unavailable("the job manager is shutting down".into()))?;
    rx.await
        .map_err(|_| Error::Unavailable("the job manager is shutting down".into()))
}

/// Refuse with PERMISSION_DENIED unless `caller` may do `action` (on a job
/// owned by `job_owner`, for actions on one job).
pub fn allow(caller: &Caller, action: Action, job_owner: Option<u32>) -> Result<(), Error> {
    Ok(policy::check(caller, action, job_owner)?)
}
