//! What the exec service measures for Prometheus (`--metrics-listen`); the
//! names and their meaning are listed in docs/CONFIG.md.

use std::net::SocketAddr;

use fluxgate_metrics::MetricsError;
use metrics::{describe_counter, describe_gauge};
use tokio_util::sync::CancellationToken;

/// Gauge: jobs (or parts of jobs) this process is running.
pub const JOBS_RUNNING: &str = "fluxgate_exec_jobs_running";
/// Counter: start requests accepted and launched.
pub const JOBS_STARTED: &str = "fluxgate_exec_jobs_started_total";
/// Counter: start requests refused (bad jobspec or R, unknown ranks).
pub const START_REFUSED: &str = "fluxgate_exec_start_refused_total";
/// Counter: task processes started.
pub const TASKS_STARTED: &str = "fluxgate_exec_tasks_started_total";
/// Counter: task processes that could not be started.
pub const TASK_START_FAILURES: &str = "fluxgate_exec_task_start_failures_total";
/// Counter: tasks that exited with a nonzero status or by a signal.
pub const TASKS_FAILED: &str = "fluxgate_exec_tasks_failed_total";

/// Serve `/metrics` on `listen` until `stop`; the bound address.
pub async fn serve(listen: &str, stop: CancellationToken) -> Result<SocketAddr, MetricsError> {
    let addr = fluxgate_metrics::serve(listen, &[], stop).await?;
    describe_gauge!(JOBS_RUNNING, "Jobs this exec process is running");
    describe_counter!(JOBS_STARTED, "Start requests accepted and launched");
    describe_counter!(START_REFUSED, "Start requests refused");
    describe_counter!(TASKS_STARTED, "Task processes started");
    describe_counter!(
        TASK_START_FAILURES,
        "Task processes that could not be started"
    );
    describe_counter!(
        TASKS_FAILED,
        "Tasks that exited with a nonzero status or by a signal"
    );
    Ok(addr)
}
