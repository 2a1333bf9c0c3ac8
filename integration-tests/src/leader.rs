//! Asking a job manager of several on one PostgreSQL store whether it
//! leads: the health of its JobManager service, and the leader its
//! refusals name when it stands by.

use std::time::Duration;

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::job_manager_client::JobManagerClient;
use tonic::transport::{Channel, Endpoint};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The metadata key of a standby's refusals that carries the leader's URI.
pub const LEADER_KEY: &str = "fluxgate-leader";

/// How long one question may take: a paused job manager takes the
/// connection and answers nothing.
const ASK: Duration = Duration::from_millis(500);

async fn connect(uri: &str) -> Result<Channel, String> {
    Endpoint::from_shared(uri.to_string())
        .map_err(|e| e.to_string())?
        .connect_timeout(ASK)
        .timeout(ASK)
        .connect()
        .await
        .map_err(|e| format!("{uri}: {e}"))
}

/// The health of the JobManager service at `uri`; why not, when it does
/// not answer.
pub async fn health(uri: &str) -> Result<ServingStatus, String> {
    let reply = HealthClient::new(connect(uri).await?)
        .check(HealthCheckRequest {
            service: "fluxgate.v1.JobManager".into(),
        })
        .await
        .map_err(|s| format!("{uri}: health: {s:?}"))?;
    ServingStatus::try_from(reply.into_inner().status).map_err(|e| format!("{uri}: {e}"))
}

/// Is the JobManager service at `uri` SERVING (false when it does not
/// answer at all)?
pub async fn serving(uri: &str) -> bool {
    health(uri).await == Ok(ServingStatus::Serving)
}

/// The leader a JobManager call to `uri` is refused for: the call fails
/// with UNAVAILABLE, and the refusal names the leader (`None` while the
/// standby knows of none). An error when the call is answered or fails
/// otherwise.
pub async fn refused_for(uri: &str) -> Result<Option<String>, String> {
    let answer = JobManagerClient::new(connect(uri).await?)
        .list(pb::ListRequest::default())
        .await;
    match answer {
        Ok(_) => Err(format!("{uri} answers JobManager calls")),
        Err(s) if s.code() == tonic::Code::Unavailable => Ok(s
            .metadata()
            .get(LEADER_KEY)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)),
        Err(s) => Err(format!("{uri}: {s:?}")),
    }
}
