//! The gRPC edge: wire types in and out, domain types inside.

pub mod jobs;
pub mod node;
pub mod resource;

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
