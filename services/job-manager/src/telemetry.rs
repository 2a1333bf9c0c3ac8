//! What the job manager measures for Prometheus (`[metrics] listen`); the
//! names and their meaning are listed in docs/CONFIG.md.
//!
//! Counters and histograms are recorded where things happen. The gauges (jobs
//! by state, nodes by state) are counts of what the core holds: it sets them
//! on its heartbeat tick, so a scrape sees them at most one tick old, and no
//! per-event bookkeeping can drift from the truth.

use std::net::SocketAddr;

use fluxgate_metrics::{Buckets, MetricsError};
use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use tokio_util::sync::CancellationToken;

/// Gauge: jobs held, by `state` (RFC 21 name); INACTIVE counts those not purged.
pub const JOBS: &str = "fluxgate_jobs";
/// Counter: jobs accepted by Submit and SubmitMany.
pub const SUBMITTED: &str = "fluxgate_jobs_submitted_total";
/// Counter: events made durable, by `log` (eventlog, exec.eventlog, output, resource).
pub const EVENTS: &str = "fluxgate_events_committed_total";
/// Counter: store transactions committed (each holds many events).
pub const COMMITS: &str = "fluxgate_store_commits_total";
/// Histogram: seconds from a job's `submit` to its `alloc`.
pub const ALLOC_LATENCY: &str = "fluxgate_sched_alloc_latency_seconds";
/// Histogram: seconds of one scheduling pass over the head of the queue.
pub const SCHED_PASS: &str = "fluxgate_sched_pass_seconds";
/// Counter: start requests sent to exec services (`reattach` = true/false).
pub const EXEC_STARTS: &str = "fluxgate_exec_starts_total";
/// Counter: start streams that failed before their final release.
pub const EXEC_LOST: &str = "fluxgate_exec_lost_total";
/// Counter: exceptions reported by exec services, by `severity`.
pub const EXEC_EXCEPTIONS: &str = "fluxgate_exec_exceptions_total";
/// Gauge: nodes, by `state` (online, offline, torpid, drained, draining,
/// allocated, schedulable), as `flux resource status` groups them.
pub const NODES: &str = "fluxgate_nodes";
/// Counter: CPU time jobs used in their cgroups, microseconds (counters
/// are integers), by `mode` (user, system), counted when each job's exec
/// services report its usage.
pub const JOB_CPU: &str = "fluxgate_job_cpu_microseconds_total";
/// Histogram: a job's peak memory, bytes, summed over its nodes.
pub const JOB_MAX_RSS: &str = "fluxgate_job_max_rss_bytes";

/// Bucket bounds of the histograms, in their units (seconds, bytes).
const BUCKETS: &[Buckets<'static>] = &[
    (
        ALLOC_LATENCY,
        &[
            0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 3600.0,
        ],
    ),
    (
        SCHED_PASS,
        &[
            0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1,
        ],
    ),
    (
        JOB_MAX_RSS,
        &[
            1_048_576.0,
            16_777_216.0,
            134_217_728.0,
            1_073_741_824.0,
            8_589_934_592.0,
            68_719_476_736.0,
        ],
    ),
];

/// Serve `/metrics` on `listen` until `stop`; the bound address.
pub async fn serve(listen: &str, stop: CancellationToken) -> Result<SocketAddr, MetricsError> {
    let addr = fluxgate_metrics::serve(listen, BUCKETS, stop).await?;
    describe();
    Ok(addr)
}

fn describe() {
    describe_gauge!(JOBS, "Jobs held by the job manager, by RFC 21 state");
    describe_counter!(SUBMITTED, "Jobs accepted by Submit and SubmitMany");
    describe_counter!(EVENTS, "Events made durable in the store, by eventlog");
    describe_counter!(COMMITS, "Store transactions committed");
    describe_histogram!(
        ALLOC_LATENCY,
        Unit::Seconds,
        "Time from a job's submit event to its alloc event"
    );
    describe_histogram!(SCHED_PASS, Unit::Seconds, "Duration of one scheduling pass");
    describe_counter!(EXEC_STARTS, "Start requests sent to exec services");
    describe_counter!(
        EXEC_LOST,
        "Start streams to exec services that failed before the final release"
    );
    describe_counter!(EXEC_EXCEPTIONS, "Exceptions reported by exec services");
    describe_gauge!(NODES, "Nodes by resource state");
    describe_counter!(
        JOB_CPU,
        Unit::Microseconds,
        "CPU time used by jobs in their cgroups, by mode"
    );
    describe_histogram!(
        JOB_MAX_RSS,
        Unit::Bytes,
        "Peak memory of a job, summed over its nodes"
    );
}
