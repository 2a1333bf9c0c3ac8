//! Connections to PostgreSQL: the URL parsed once, TLS when it asks.

use std::path::Path;
use std::sync::Arc;

use postgres::config::SslMode;
use postgres::{Client, NoTls};

use crate::store::StoreError;

/// How to reach the database: the parsed URL and, for `sslmode=require`, a
/// TLS connector verified against the system's CAs (and `ca_file`).
#[derive(Clone)]
pub struct PgConnect {
    config: postgres::Config,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// The URL without its password, for messages.
    shown: String,
}

impl std::fmt::Debug for PgConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConnect")
            .field("url", &self.shown)
            .finish()
    }
}

/// Is `url` one of PostgreSQL's (rather than a path)?
pub fn is_postgres_url(url: &str) -> bool {
    fluxgate_shared::conninfo::is_uri(url)
}

impl PgConnect {
    /// Parse `url` (`postgres://user:pass@host:port/db?sslmode=require`).
    pub fn new(url: &str, ca_file: Option<&Path>) -> Result<Self, StoreError> {
        let shown = hide_password(url);
        let fail = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| fail(format!("not a PostgreSQL URL: {e}")))?;
        if config.get_application_name().is_none() {
            config.application_name("fluxgate-job-manager");
        }
        // A dead server or a cut cable is noticed by the kernel, not only
        // when the next query times out.
        config.keepalives(true);
        config.keepalives_idle(std::time::Duration::from_secs(5));
        config.connect_timeout(std::time::Duration::from_secs(5));
        let tls = match config.get_ssl_mode() {
            SslMode::Require => Some(tls_connector(ca_file).map_err(fail)?),
            // `prefer` (the default) would fall back to clear text: only
            // an explicit `require` gets TLS, and then nothing less.
            _ => {
                config.ssl_mode(SslMode::Disable);
                None
            }
        };
        Ok(PgConnect { config, tls, shown })
    }

    /// The same database, with sessions named `name` (so that a successor
    /// can find and end them).
    pub fn named(&self, name: &str) -> PgConnect {
        let mut named = self.clone();
        named.config.application_name(name);
        named
    }

    /// A new connection.
    pub fn connect(&self) -> Result<Client, StoreError> {
        let result = match &self.tls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        };
        result.map_err(|e| StoreError::Open {
            path: self.shown.clone(),
            reason: describe(&e),
        })
    }

    /// The URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// A PostgreSQL error with the server's message when it sent one.
pub fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        // The cause says what to fix (a refused certificate, a refused
        // connection), the error alone only what failed.
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            text
        }
    }
}

/// The rustls connector: the system's roots plus `ca_file`'s certificates.
fn tls_connector(
    ca_file: Option<&Path>,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // One unreadable system certificate must not stop the others.
        let _ = roots.add(cert);
    }
    if let Some(path) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect())
            .map_err(|e| format!("store.ca_file {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "store.ca_file {}: no certificate in it",
                path.display()
            ));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("store.ca_file {}: {e}", path.display()))?;
        }
    }
    if roots.is_empty() {
        return Err(
            "sslmode=require but no CA certificate is known: set store.ca_file".to_string(),
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// Every libpq form of a password masked (`postgres://user:***@host/db`).
pub use fluxgate_shared::conninfo::hide_password;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_url_is_refused_with_a_reason() {
        let e = PgConnect::new("postgres://h:notaport/db", None).unwrap_err();
        assert!(e.to_string().contains("not a PostgreSQL URL"), "{e}");
        assert!(is_postgres_url("postgresql://x"));
        assert!(!is_postgres_url("/var/lib/x.db"));
    }
}
