//! Errors of the Exec API, and their one conversion to gRPC status.

use fluxgate_shared::JobId;
use fluxgate_shared::idset::IdSetError;
use fluxgate_shared::jobspec::JobspecError;
use fluxgate_shared::rset::RsetError;

use crate::layout::LayoutError;
use crate::run_as::IdentityError;

/// Why an Exec call was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A Start for a job this process already runs.
    #[error("job {0} is already running here; send Start with reattach to follow it")]
    AlreadyRunning(JobId),
    /// A Kill, Exception, Expiration or Tasks for a job this process does not run.
    #[error("job {0} is not running on this exec service")]
    NotRunning(JobId),
    /// Input for a job whose jobspec asks for no input service.
    #[error(
        "job {0} takes no input: it was submitted without an input service (use run, or --input)"
    )]
    NoInput(JobId),
    /// An input stream that named no job.
    #[error("an input stream must start with a message naming its job")]
    EmptyInput,
    /// A Tasks request for a job whose tasks are still being launched.
    #[error("job {0} is still launching its tasks; ask again once it has started")]
    Starting(JobId),
    /// A peer running some ranks of the job could not list its tasks.
    #[error("cannot list the tasks of rank(s) {ranks} from the exec service at {address}: {error}")]
    PeerTasks {
        address: String,
        ranks: String,
        error: String,
    },
    /// The job has this many control requests waiting, and another unlike
    /// them kept aside.
    #[error(
        "job {0} has {1} control requests waiting and cannot take another now \
         (repeats of the last are merged); retry once it has handled them"
    )]
    ControlQueueFull(JobId, usize),
    /// A signal number outside 1..=64.
    #[error("signal {0} is not a valid signal number (1-64)")]
    BadSignal(i32),
    /// A field of the request is malformed.
    #[error("{0}")]
    InvalidArgument(String),
    /// The service is shutting down.
    #[error("the exec service is shutting down")]
    ShuttingDown,
    /// The caller did not present the instance's node credential.
    #[error(
        "this exec service runs jobs only for its job manager: \
         the request lacks the instance's node credential"
    )]
    NoCredential,
    /// The caller presented another credential.
    #[error(
        "the node credential does not match this exec service's \
         (copy the job manager's STATEDIR/node.token to --node-token-file)"
    )]
    WrongCredential,
}

impl From<ExecError> for tonic::Status {
    fn from(e: ExecError) -> Self {
        let msg = e.to_string();
        match e {
            ExecError::AlreadyRunning(_) => tonic::Status::already_exists(msg),
            ExecError::NotRunning(_) => tonic::Status::not_found(msg),
            ExecError::Starting(_) | ExecError::NoInput(_) => {
                tonic::Status::failed_precondition(msg)
            }
            ExecError::EmptyInput => tonic::Status::invalid_argument(msg),
            ExecError::PeerTasks { .. } => tonic::Status::unavailable(msg),
            ExecError::BadSignal(_) | ExecError::InvalidArgument(_) => {
                tonic::Status::invalid_argument(msg)
            }
            ExecError::ShuttingDown => tonic::Status::unavailable(msg),
            ExecError::ControlQueueFull(..) => tonic::Status::resource_exhausted(msg),
            ExecError::NoCredential | ExecError::WrongCredential => {
                tonic::Status::unauthenticated(msg)
            }
        }
    }
}

/// Why a job cannot start on this exec service: the note of the `exec`
/// exception that ends it.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The jobspec does not parse.
    #[error("invalid jobspec: {0}")]
    Jobspec(#[source] JobspecError),
    /// R does not parse.
    #[error("invalid R: {0}")]
    R(#[source] RsetError),
    /// The tasks cannot be laid out on R.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The tasks cannot run as their owner here.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The ranks this service is asked to run do not parse.
    #[error("invalid ranks {ranks:?}: {error}")]
    Ranks {
        ranks: String,
        #[source]
        error: IdSetError,
    },
    /// A rank asked for is not in R.
    #[error("rank {rank} is not in R ({in_r})")]
    RankNotInR { rank: u32, in_r: String },
    /// The leader does not know where a rank's exec service is.
    #[error("no exec service address for rank {0}")]
    NoAddress(u32),
    /// A peer exec service cannot be reached as configured.
    #[error(transparent)]
    Peer(#[from] PeerError),
}

/// Why a peer exec service cannot be reached as configured.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The address is not a URI.
    #[error("exec address {address:?} of ranks {ranks} is not a URI: {error}")]
    NotUri {
        address: String,
        ranks: String,
        error: String,
    },
    /// The peer uses TLS and this service has no CA to check it.
    #[error("exec service {0} uses TLS: start this one with --tls-ca")]
    NoCa(String),
    /// The TLS settings toward the peer are refused.
    #[error("TLS toward {address}: {error}")]
    Tls { address: String, error: String },
}
