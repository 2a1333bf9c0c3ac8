//! The node credential: what this service presents to join the job manager,
//! and what it requires of whoever calls its Exec service.
//!
//! Every exec service of an instance and its job manager hold the same node
//! token (the job manager's `STATEDIR/node.token`). The job manager checks
//! it on `Node.Join`; this service checks it on every Exec call (from the
//! job manager, or from a leader exec service fanning out to its peers), so
//! a process that lacks it can neither join as a node nor start or signal
//! anything. Without a token configured the service runs open.

use std::fmt;
use std::sync::Arc;

use fluxgate_shared::auth::constant_time_eq;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::error::ExecError;

/// The node token and the checks made with it.
#[derive(Clone, Default)]
pub struct NodeCredential {
    token: Option<Arc<str>>,
}

impl fmt::Debug for NodeCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret itself.
        f.write_str(if self.token.is_some() {
            "NodeCredential(set)"
        } else {
            "NodeCredential(none)"
        })
    }
}

impl NodeCredential {
    /// The credential of `token`; `None` runs open.
    pub fn new(token: Option<&str>) -> Self {
        NodeCredential {
            token: token.map(|t| Arc::from(t.trim())),
        }
    }

    /// True when a token is configured (the service does not run open).
    pub fn is_set(&self) -> bool {
        self.token.is_some()
    }

    /// The `authorization` header value to send, if there is a token.
    fn header(&self) -> Option<AsciiMetadataValue> {
        let token = self.token.as_ref()?;
        format!("Bearer {token}").parse().ok()
    }

    /// `message` as a request carrying the credential.
    pub fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(v) = self.header() {
            request.metadata_mut().insert("authorization", v);
        }
        request
    }

    /// Accept `request` if it carries this credential (or none is configured).
    pub fn check<T>(&self, request: &Request<T>) -> Result<(), ExecError> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let presented = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or(ExecError::NoCredential)?;
        if constant_time_eq(presented.trim().as_bytes(), token.as_bytes()) {
            Ok(())
        } else {
            Err(ExecError::WrongCredential)
        }
    }
}

/// This service's TLS certificate and key (PEM), when it serves TLS.
#[derive(Clone)]
pub struct ServerIdentity {
    /// The certificate chain.
    pub cert: Vec<u8>,
    /// The private key.
    pub key: Vec<u8>,
}

impl fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the private key.
        f.write_str("ServerIdentity")
    }
}

impl Interceptor for NodeCredential {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(&request)?;
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_token_passes() {
        let c = NodeCredential::new(Some("fgt1.abc.def\n"));
        assert!(c.check(&c.request(())).is_ok());
        let missing = Status::from(c.check(&Request::new(())).unwrap_err());
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
        let other = NodeCredential::new(Some("fgt1.abc.xyz"));
        let wrong = Status::from(c.check(&other.request(())).unwrap_err());
        assert!(wrong.message().contains("does not match"), "{wrong:?}");
        assert!(NodeCredential::new(None).check(&Request::new(())).is_ok());
        assert_eq!(format!("{c:?}"), "NodeCredential(set)");
    }
}
