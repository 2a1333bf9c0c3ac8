//! The server's TLS configuration from `[tls]`.

use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use crate::config::TlsConfig;

fn read(what: &str, path: &std::path::Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

/// The TLS settings to serve with, `None` to serve plain HTTP/2.
pub fn server_config(tls: &TlsConfig) -> Result<Option<ServerTlsConfig>, String> {
    let (cert, key) = match (&tls.cert, &tls.key) {
        (Some(c), Some(k)) => (c, k),
        (None, None) if tls.client_ca.is_some() => {
            return Err("tls.client_ca needs tls.cert and tls.key (the server's own)".into());
        }
        (None, None) => return Ok(None),
        _ => return Err("set both tls.cert and tls.key, or neither".into()),
    };
    let identity = Identity::from_pem(read("tls.cert", cert)?, read("tls.key", key)?);
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &tls.client_ca {
        // Optional: clients with a token but no certificate are welcome too;
        // a certificate that is presented must chain to this CA.
        config = config
            .client_ca_root(Certificate::from_pem(read("tls.client_ca", ca)?))
            .client_auth_optional(true);
    }
    Ok(Some(config))
}
