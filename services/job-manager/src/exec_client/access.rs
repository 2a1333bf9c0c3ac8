//! How the job manager reaches exec services: its credential on every call,
//! TLS toward https addresses, one multiplexed connection per address.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// How the job manager reaches exec services: the node credential sent on
/// every call, so that they run only what the job manager asks (none when
/// the instance runs open), and the TLS settings for https exec addresses.
#[derive(Clone, Default)]
pub struct ExecAccess {
    header: Option<AsciiMetadataValue>,
    tls: Option<ClientTlsConfig>,
}

impl std::fmt::Debug for ExecAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        f.debug_struct("ExecAccess")
            .field("credential", &self.header.is_some())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl ExecAccess {
    /// Access with `token` (the instance's node token), if any, checking
    /// exec services' certificates against the PEM CA `tls_ca`, if any.
    pub fn new(token: Option<&str>, tls_ca: Option<&[u8]>) -> Result<Self, String> {
        let header = token
            .map(|t| {
                format!("Bearer {}", t.trim())
                    .parse()
                    .map_err(|_| "the node token is not valid header text".to_string())
            })
            .transpose()?;
        let tls = tls_ca.map(|ca| ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)));
        Ok(ExecAccess { header, tls })
    }

    /// `message` as a request carrying the credential.
    pub(super) fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(v) = &self.header {
            request.metadata_mut().insert("authorization", v.clone());
        }
        request
    }
}

/// One multiplexed connection per exec address, made on first use.
pub(super) fn channel(addr: &str, access: &ExecAccess) -> Result<Channel, String> {
    static CHANNELS: OnceLock<Mutex<HashMap<String, Channel>>> = OnceLock::new();
    let map = CHANNELS.get_or_init(Default::default);
    let mut map = map
        .lock()
        .map_err(|_| "channel cache poisoned".to_string())?;
    if let Some(c) = map.get(addr) {
        return Ok(c.clone());
    }
    let mut endpoint = Endpoint::from_shared(addr.to_string())
        .map_err(|e| format!("bad exec address {addr:?}: {e}"))?
        .connect_timeout(std::time::Duration::from_secs(5))
        // A session whose exec service is cut off on the network breaks in
        // seconds (its jobs are then reattached or fenced, see core/exec.rs),
        // not when TCP gives up after many minutes.
        .http2_keep_alive_interval(fluxgate_setup::conns::CLIENT_KEEPALIVE_INTERVAL)
        .keep_alive_timeout(fluxgate_setup::conns::CLIENT_KEEPALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .tcp_nodelay(true)
        .initial_connection_window_size(fluxgate_proto::wire::CONNECTION_WINDOW);
    if addr.starts_with("https://") {
        let tls = access.tls.clone().ok_or_else(|| {
            format!("exec service {addr} serves TLS: set exec.tls_ca to the CA of its certificate")
        })?;
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|e| format!("TLS toward {addr}: {e}"))?;
    }
    let c = endpoint.connect_lazy();
    map.insert(addr.to_string(), c.clone());
    Ok(c)
}
