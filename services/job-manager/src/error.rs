//! The job manager's errors, mapped once to gRPC status at the edge.

use fluxgate_shared::JobId;

use crate::store::StoreError;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The request is malformed; the message says what to fix.
    #[error("{0}")]
    Invalid(String),
    /// No such job.
    #[error("job {0} not found")]
    UnknownJob(JobId),
    /// The job is not active; whether it is inactive or unknown is decided
    /// before the answer (the core asks the store), so callers see one of those.
    #[error("job {0} is not active")]
    NotActive(JobId),
    /// The job exists but is not in a state that allows the request.
    #[error("{0}")]
    WrongState(String),
    /// The caller may not do this.
    #[error("{0}")]
    Denied(String),
    /// The instance cannot take the request now (shutting down, queue stopped).
    #[error("{0}")]
    Unavailable(String),
    /// The caller has reached a limit (e.g. active jobs per user).
    #[error("{0}")]
    Exhausted(String),
    /// Something the request names, other than a job, does not exist (a
    /// job's log that was never written).
    #[error("{0}")]
    NotFound(String),
    /// Lines a stream owed its reader were lost (it fell behind); the reader
    /// reconnects to resynchronise.
    #[error("{0}")]
    DataLoss(String),
    /// The service failed inside (a blocking read's task panicked).
    #[error("{0}")]
    Internal(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<fluxgate_shared::auth::Denied> for Error {
    fn from(d: fluxgate_shared::auth::Denied) -> Self {
        Error::Denied(d.0)
    }
}

impl From<Error> for tonic::Status {
    fn from(e: Error) -> Self {
        let msg = e.to_string();
        match e {
            Error::Invalid(_) => tonic::Status::invalid_argument(msg),
            Error::UnknownJob(_) | Error::NotFound(_) => tonic::Status::not_found(msg),
            Error::WrongState(_) | Error::NotActive(_) => tonic::Status::failed_precondition(msg),
            Error::Denied(_) => tonic::Status::permission_denied(msg),
            Error::Unavailable(_) => tonic::Status::unavailable(msg),
            Error::Exhausted(_) => tonic::Status::resource_exhausted(msg),
            Error::DataLoss(_) => tonic::Status::data_loss(msg),
            Error::Internal(_) => tonic::Status::internal(msg),
            Error::Store(StoreError::Closed) => tonic::Status::unavailable(msg),
            Error::Store(_) => tonic::Status::internal(msg),
        }
    }
}
