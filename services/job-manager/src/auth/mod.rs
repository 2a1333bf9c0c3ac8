//! Authentication at the gRPC edge: who is calling, verified once per
//! request by [`Authenticator`] (a tonic interceptor) and handed to the
//! handlers as a [`Caller`] in the request's extensions. The handlers then
//! ask `fluxgate_shared::auth::policy` whether the caller may do what it asks.
//!
//! Credentials, in the order they are looked for:
//!
//! ```text
//! authorization: Bearer fgt1....   a token signed with the instance key
//! client certificate (mTLS)        user = subject CN, uid from [auth.users]
//!                                  or the system's account database
//! ```
//!
//! A token with a `job` claim is a job's credential ([`job`]): accepted only
//! while that job is active.
//!
//! Without `auth.enabled` the instance runs open: every caller is its owner.

pub mod cert;
pub mod identity;
pub mod job;
pub mod keys;
pub mod tls;

use fluxgate_shared::auth::Caller;
use tonic::{Request, Status};

pub use identity::Authenticator;
pub use job::{ActiveJobs, JobCredentials};
pub use keys::InstanceKeys;

/// The verified caller of a request that passed the [`Authenticator`].
pub fn caller<T>(request: &Request<T>) -> Result<Caller, Status> {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .ok_or_else(|| Status::unauthenticated("the request carries no verified identity"))
}

/// The login name of `uid` for a token's `user` field; `uid{N}` when the
/// system has no account for it.
pub(crate) fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| format!("uid{uid}"))
}
