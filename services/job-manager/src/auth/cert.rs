//! The user a client certificate names: the subject's common name (CN).

use x509_parser::prelude::{FromDer, X509Certificate};

/// Why a client certificate names no user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertError {
    /// Not a DER X.509 certificate.
    #[error("the client certificate does not parse: {0}")]
    Parse(String),
    /// The subject has no common name.
    #[error("the client certificate's subject has no CN (the user name)")]
    NoCn,
    /// The common name is not a string.
    #[error("the client certificate's CN is not text")]
    NotText,
    /// The common name is empty.
    #[error("the client certificate's CN is empty")]
    Empty,
    /// The name maps to no uid.
    #[error(
        "certificate user {0:?} has no uid: add it under [auth.users] \
         or create the account on the job manager's host"
    )]
    NoUid(String),
}

/// The CN of a DER certificate, or why there is none.
pub fn user_name(der: &[u8]) -> Result<String, CertError> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| CertError::Parse(e.to_string()))?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()
        .ok_or(CertError::NoCn)?;
    let name = cn.as_str().map_err(|_| CertError::NotText)?;
    if name.is_empty() {
        return Err(CertError::Empty);
    }
    Ok(name.to_string())
}
