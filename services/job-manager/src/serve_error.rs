//! Why the job manager could not start or had to stop: the one error of
//! its assembly (`server.rs`) and of the standby phase before it leads
//! (`ha/lead.rs`).

/// Why the job manager could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Bad configuration.
    #[error("{0}")]
    Config(String),
    /// The store cannot be used.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Network or file system.
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    /// The store failed while running: stopped so that a restart replays what is durable.
    #[error("store failure: {0}")]
    Fatal(String),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The metrics endpoint could not start.
    #[error(transparent)]
    Metrics(#[from] fluxgate_metrics::MetricsError),
}
