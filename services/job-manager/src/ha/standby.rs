//! What a standby serves: every job manager RPC is refused with
//! UNAVAILABLE, naming the leader so that clients go there.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::task::{Context, Poll};

use tokio::sync::watch;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::NamedService;

/// The metadata key carrying the leader's URI on a standby's refusals.
pub const LEADER_KEY: &str = "fluxgate-leader";

/// Refuses every call to the service `S` names.
#[derive(Debug)]
pub struct Refuse<S> {
    leader: watch::Receiver<Option<String>>,
    service: PhantomData<fn() -> S>,
}

impl<S> Clone for Refuse<S> {
    fn clone(&self) -> Self {
        Refuse {
            leader: self.leader.clone(),
            service: PhantomData,
        }
    }
}

impl<S> Refuse<S> {
    /// Refusals that name the leader `leader` currently holds.
    pub fn new(leader: watch::Receiver<Option<String>>) -> Self {
        Refuse {
            leader,
            service: PhantomData,
        }
    }
}

impl<S: NamedService> NamedService for Refuse<S> {
    const NAME: &'static str = S::NAME;
}

/// The refusal: UNAVAILABLE, and the leader when one is known.
pub fn refusal(leader: Option<&str>) -> tonic::Status {
    let mut status = tonic::Status::unavailable(match leader {
        Some(uri) => format!("this job manager is a standby; the leader is at {uri}"),
        None => "this job manager is a standby and no leader is known yet; retry".to_string(),
    });
    if let Some(value) = leader.and_then(|uri| uri.parse().ok()) {
        status.metadata_mut().insert(LEADER_KEY, value);
    }
    status
}

impl<S> tonic::codegen::Service<http::Request<Body>> for Refuse<S> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: http::Request<Body>) -> Self::Future {
        let leader = self.leader.borrow().clone();
        std::future::ready(Ok(refusal(leader.as_deref()).into_http()))
    }
}
