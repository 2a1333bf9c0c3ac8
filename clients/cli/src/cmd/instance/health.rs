//! `fluxgate health`: the standard gRPC health check (grpc.health.v1.Health/Check)
//! against a job manager or an exec service, so that container and Kubernetes
//! probes need no extra binary. Exit status 0 only when the answer is SERVING.
//!
//! The empty service name asks about the server as a whole; the job manager
//! and exec services also report `fluxgate.v1.JobManager` and `fluxgate.v1.Exec`,
//! which turn NOT_SERVING as soon as a shutdown begins.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow};
use tonic_health::pb::health_check_response::ServingStatus;

use crate::client;

/// Arguments of `fluxgate health`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Service to ask about, e.g. fluxgate.v1.JobManager or fluxgate.v1.Exec
    /// (default: the server as a whole).
    #[arg(short, long, value_name = "NAME", default_value = "")]
    service: String,
    /// Give up after SECS seconds (connecting included).
    #[arg(short, long, value_name = "SECS", default_value_t = 5.0)]
    timeout: f64,
    /// Print nothing; only the exit status tells.
    #[arg(short, long)]
    quiet: bool,
    /// Address to check, e.g. http://127.0.0.1:7000 or node0:7001 (default: $FLUXGATE_URI).
    address: Option<String>,
}

/// `host:port` is taken as plain-text gRPC, as the services serve it.
fn endpoint_uri(address: &str) -> String {
    if address.contains("://") {
        address.to_string()
    } else {
        format!("http://{address}")
    }
}

fn timeout(secs: f64) -> anyhow::Result<Duration> {
    if secs.is_finite() && secs > 0.0 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(anyhow!(
            "--timeout {secs} must be a positive number of seconds"
        ))
    }
}

/// Ask `uri` whether `service` is serving, within `limit`.
pub async fn check(uri: &str, service: &str, limit: Duration) -> anyhow::Result<ServingStatus> {
    let endpoint = client::Credentials::from_env()?
        .endpoint(uri)
        .with_context(|| format!("{uri:?} is not a valid address"))?
        .connect_timeout(limit)
        .timeout(limit);
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("cannot connect to {uri}"))?;
    client::health(channel, service)
        .await
        .map_err(|status| match status.code() {
            tonic::Code::NotFound => anyhow!("{uri}: unknown service {service:?}"),
            _ => client::status_error(status).context(format!("health check of {uri}")),
        })
}

/// How the exec service at `uri` contains jobs (`v2`, `v1`, `off`);
/// `None` for a job manager, or an exec service that does not say.
async fn containment(uri: &str, limit: Duration) -> Option<&'static str> {
    for mode in fluxgate_proto::CONTAINMENT_MODES {
        let name = format!("{}{mode}", fluxgate_proto::CONTAINMENT_HEALTH);
        if check(uri, &name, limit)
            .await
            .is_ok_and(|s| s == ServingStatus::Serving)
        {
            return Some(mode);
        }
    }
    None
}

/// Run `fluxgate health`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let limit = timeout(args.timeout)?;
    let uri = match &args.address {
        Some(a) => endpoint_uri(a),
        None => client::uri()?,
    };
    let (status, mode) = client::block_on(async {
        tokio::time::timeout(limit, async {
            let status = check(&uri, &args.service, limit).await?;
            let mode = match args.quiet {
                true => None,
                false => containment(&uri, limit).await,
            };
            Ok::<_, anyhow::Error>((status, mode))
        })
        .await
        .map_err(|_| anyhow!("{uri}: no answer in {}s", args.timeout))?
    })??;
    if !args.quiet {
        println!("{}", status.as_str_name());
        // An exec service also says how it contains jobs.
        if let Some(mode) = mode {
            println!("containment: {mode}");
        }
    }
    Ok(if status == ServingStatus::Serving {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_addresses_get_the_http_scheme() {
        assert_eq!(endpoint_uri("node0:7001"), "http://node0:7001");
        assert_eq!(endpoint_uri("http://a:1"), "http://a:1");
        assert_eq!(endpoint_uri("https://a:1"), "https://a:1");
    }

    #[test]
    fn timeouts_must_be_positive() {
        assert!(timeout(0.0).is_err());
        assert!(timeout(f64::NAN).is_err());
        assert_eq!(timeout(1.5).ok(), Some(Duration::from_millis(1500)));
    }
}
