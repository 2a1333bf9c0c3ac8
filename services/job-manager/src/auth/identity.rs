//! The interceptor that turns a request's credentials into a [`Caller`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use fluxgate_shared::JobId;
use fluxgate_shared::auth::Caller;
use fluxgate_shared::auth::token::{self, TokenError};
use tonic::service::Interceptor;
use tonic::{Request, Status};

use super::job::ActiveJobs;
use crate::clock;

/// Why a request's credentials were not accepted (UNAUTHENTICATED).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AuthError {
    /// Neither a token nor a client certificate.
    #[error(
        "this instance requires credentials: set FLUXGATE_TOKEN to a token from the \
         instance owner (`fluxgate token create`), or connect with a client certificate"
    )]
    Missing,
    /// The authorization header is not `Bearer TOKEN`.
    #[error("the authorization header must be `Bearer TOKEN`")]
    BadHeader,
    /// The token failed verification.
    #[error("{0}")]
    Token(#[from] TokenError),
    /// The client certificate names no usable user.
    #[error(transparent)]
    Certificate(#[from] super::cert::CertError),
    /// A job's credential presented after the job ended.
    #[error("the credential of job {} is no longer valid: the job has ended", JobId::from(*.0))]
    JobEnded(u64),
}

impl From<AuthError> for Status {
    fn from(e: AuthError) -> Status {
        Status::unauthenticated(e.to_string())
    }
}

/// How callers are identified.
enum Mode {
    /// Every caller is the instance owner.
    Open,
    /// A token signed with `key`, or a client certificate.
    Required {
        key: Vec<u8>,
        users: BTreeMap<String, u32>,
        /// The jobs whose credentials hold (the core keeps it).
        jobs: ActiveJobs,
    },
}

struct Inner {
    owner_uid: u32,
    mode: Mode,
}

/// Verifies each request's credentials and records the [`Caller`] in its extensions.
#[derive(Clone)]
pub struct Authenticator {
    inner: Arc<Inner>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.inner.mode {
            Mode::Open => "open",
            Mode::Required { .. } => "required",
        };
        f.debug_struct("Authenticator")
            .field("owner_uid", &self.inner.owner_uid)
            .field("mode", &mode)
            .finish()
    }
}

impl Authenticator {
    /// Every caller is the owner `owner_uid`.
    pub fn open(owner_uid: u32) -> Self {
        Authenticator {
            inner: Arc::new(Inner {
                owner_uid,
                mode: Mode::Open,
            }),
        }
    }

    /// Callers must present a token signed with `key` or a client certificate
    /// whose CN is in `users` or the account database; a job's credential
    /// holds while its job is in `jobs`.
    pub fn required(
        owner_uid: u32,
        key: Vec<u8>,
        users: BTreeMap<String, u32>,
        jobs: ActiveJobs,
    ) -> Self {
        Authenticator {
            inner: Arc::new(Inner {
                owner_uid,
                mode: Mode::Required { key, users, jobs },
            }),
        }
    }

    /// Who is calling, from the request's metadata and TLS peer certificates.
    pub fn identify<T>(&self, request: &Request<T>) -> Result<Caller, AuthError> {
        let owner_uid = self.inner.owner_uid;
        let Mode::Required { key, users, jobs } = &self.inner.mode else {
            return Ok(Caller::owner(owner_uid));
        };
        if let Some(value) = request.metadata().get("authorization") {
            let text = value.to_str().map_err(|_| AuthError::BadHeader)?;
            let token = text.strip_prefix("Bearer ").ok_or(AuthError::BadHeader)?;
            let now = clock::now().max(0.0) as u64;
            let claims = token::verify(token, key, now)?;
            if let Some(job) = claims.job
                && !jobs.contains(job)
            {
                return Err(AuthError::JobEnded(job));
            }
            return Ok(Caller::from_claims(&claims, owner_uid));
        }
        let certs = request.peer_certs().ok_or(AuthError::Missing)?;
        // The first certificate is the client's own; the rest is its chain,
        // which rustls has already verified against tls.client_ca.
        let leaf = certs.first().ok_or(AuthError::Missing)?;
        let user = super::cert::user_name(leaf)?;
        let uid =
            uid_of(&user, users).ok_or_else(|| super::cert::CertError::NoUid(user.clone()))?;
        Ok(Caller::user(&user, uid, owner_uid))
    }
}

/// A certificate user's uid: the configured mapping first, then the system's.
fn uid_of(user: &str, users: &BTreeMap<String, u32>) -> Option<u32> {
    if let Some(uid) = users.get(user) {
        return Some(*uid);
    }
    nix::unistd::User::from_name(user)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

impl Interceptor for Authenticator {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let caller = self.identify(&request)?;
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_shared::auth::{Claims, Role};

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn with_header(value: &str) -> Request<()> {
        let mut r = Request::new(());
        r.metadata_mut()
            .insert("authorization", value.parse().unwrap());
        r
    }

    fn required() -> Authenticator {
        Authenticator::required(100, KEY.to_vec(), BTreeMap::new(), ActiveJobs::default())
    }

    #[test]
    fn open_mode_makes_everyone_the_owner() {
        let a = Authenticator::open(100);
        let c = a.identify(&Request::new(())).unwrap();
        assert_eq!((c.uid, c.role), (100, Role::Owner));
    }

    #[test]
    fn tokens_make_owners_guests_and_nodes() {
        let a = required();
        let now = clock::now() as u64;
        let t = |c: Claims| format!("Bearer {}", c.sign(KEY).unwrap());
        let owner = a
            .identify(&with_header(&t(Claims::user("o", 100, now, None))))
            .unwrap();
        assert_eq!(owner.role, Role::Owner);
        let guest = a
            .identify(&with_header(&t(Claims::user("g", 7, now, Some(60)))))
            .unwrap();
        assert_eq!((guest.uid, guest.role), (7, Role::Guest));
        let node = a.identify(&with_header(&t(Claims::node(100, 0)))).unwrap();
        assert_eq!(node.role, Role::Node);
    }

    #[test]
    fn missing_bad_expired_and_forged_credentials_are_refused() {
        let a = required();
        assert_eq!(a.identify(&Request::new(())), Err(AuthError::Missing));
        assert_eq!(
            a.identify(&with_header("Basic abc")),
            Err(AuthError::BadHeader)
        );
        let expired = Claims::user("g", 7, 1000, Some(1)).sign(KEY).unwrap();
        assert!(matches!(
            a.identify(&with_header(&format!("Bearer {expired}"))),
            Err(AuthError::Token(TokenError::Expired { .. }))
        ));
        let forged = Claims::user("g", 100, 1000, None)
            .sign(b"another key, long enough!")
            .unwrap();
        let e = a
            .identify(&with_header(&format!("Bearer {forged}")))
            .unwrap_err();
        assert_eq!(e, AuthError::Token(TokenError::BadSignature));
        let status = Status::from(e);
        assert_eq!(status.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn a_job_credential_holds_only_while_its_job_is_active() {
        let jobs = ActiveJobs::default();
        let a = Authenticator::required(100, KEY.to_vec(), BTreeMap::new(), jobs.clone());
        let now = clock::now() as u64;
        let id = JobId::from(1234u64);
        let t = Claims::job("g", 7, id.as_u64(), now, now + 60)
            .sign(KEY)
            .unwrap();
        let request = || with_header(&format!("Bearer {t}"));
        // Before its start is sent, a job's credential is not live either.
        assert_eq!(a.identify(&request()), Err(AuthError::JobEnded(1234)));
        jobs.insert(id);
        let c = a.identify(&request()).unwrap();
        assert_eq!((c.uid, c.role), (7, Role::Guest));
        // The owner's job credential makes the owner, as the owner's token does.
        let o = Claims::job("o", 100, id.as_u64(), now, now + 60)
            .sign(KEY)
            .unwrap();
        let c = a.identify(&with_header(&format!("Bearer {o}"))).unwrap();
        assert_eq!(c.role, Role::Owner);
        jobs.remove(id);
        let e = a.identify(&request()).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("the credential of job {id} is no longer valid: the job has ended")
        );
        assert_eq!(Status::from(e).code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn certificate_users_map_to_configured_uids_first() {
        let users = BTreeMap::from([("root".to_string(), 55)]);
        assert_eq!(uid_of("root", &users), Some(55));
        assert_eq!(uid_of("root", &BTreeMap::new()), Some(0));
        assert_eq!(uid_of("no-such-user-here", &BTreeMap::new()), None);
    }
}
