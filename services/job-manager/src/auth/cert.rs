//! The user a client certificate names: the subject's common name (CN).

use x509_parser::prelude::{FromDer, X509Certificate};

/// The CN of a DER certificate, or why there is none.
pub fn user_name(der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|e| format!("the client certificate does not parse: {e}"))?;
    let cn =
        cert.subject().iter_common_name().next().ok_or_else(|| {
            "the client certificate's subject has no CN (the user name)".to_string()
        })?;
    let name = cn
        .as_str()
        .map_err(|_| "the client certificate's CN is not text".to_string())?;
    if name.is_empty() {
        return Err("the client certificate's CN is empty".into());
    }
    Ok(name.to_string())
}
