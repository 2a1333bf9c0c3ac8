//! The span of a job's life, sent over OTLP when `[telemetry] otlp_endpoint`
//! is set (docs/TRACING.md); the per-RPC spans are made by
//! `fluxgate_setup::RpcSpans` on the server.
//!
//! The span is made once, when the job becomes inactive (carried out by
//! the committer once its summary is durable, as an `Effect::JobSpan`
//! queued only while spans are exported), from what the job's fold holds: it starts at `submit`, ends when the job entered
//! INACTIVE, and each RFC 21 state the job entered, and each exception, is an
//! event at its own time. So nothing is kept per active job (the core, a
//! single-threaded state machine, holds no span object), and a job that
//! ends after a restart gets the same span, its times replayed from its
//! eventlog. Off, [`job_ended`] returns at once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fluxgate_shared::JobId;
use fluxgate_shared::job::{Job, JobResult, JobState};
use opentelemetry::KeyValue;
use opentelemetry::trace::{Span, SpanKind, Status, Tracer};

use crate::core::Inactive;

/// Name of the job spans.
pub const JOB_SPAN: &str = "job";

/// `id` became inactive: send the span of its life, when spans are exported.
pub fn job_ended(id: JobId, job: &Job, inactive: &Inactive) {
    if !fluxgate_setup::otlp::enabled() {
        return;
    }
    let tracer = opentelemetry::global::tracer("fluxgate-job-manager");
    let mut span = tracer
        .span_builder(JOB_SPAN)
        .with_kind(SpanKind::Internal)
        .with_start_time(time(inactive.t_submit))
        .with_attributes(attributes(id, inactive))
        .start(&tracer);
    for state in JobState::ALL {
        if let Some(t) = job.entered(state) {
            span.add_event_with_timestamp(state.name(), time(t), Vec::new());
        }
    }
    for e in job.exceptions() {
        span.add_event_with_timestamp(
            "exception",
            time(e.timestamp),
            vec![
                KeyValue::new("exception.type", e.kind.clone()),
                KeyValue::new("exception.severity", i64::from(e.severity)),
                KeyValue::new("exception.note", e.note.clone()),
            ],
        );
    }
    if inactive.result != JobResult::Completed {
        span.set_status(Status::error(inactive.result.name()));
    }
    span.end_with_timestamp(time(inactive.t_inactive));
}

/// The job's id (F58, and as an integer when it fits OTLP's i64), owner,
/// name, queue, result and nodes.
fn attributes(id: JobId, inactive: &Inactive) -> Vec<KeyValue> {
    let mut out = vec![
        KeyValue::new("job.id", id.to_string()),
        KeyValue::new("job.userid", i64::from(inactive.userid)),
        KeyValue::new("job.name", inactive.name.to_string()),
        KeyValue::new("job.result", inactive.result.name()),
        KeyValue::new("job.ntasks", i64::from(inactive.ntasks)),
        KeyValue::new("job.nnodes", i64::from(inactive.nnodes)),
    ];
    if let Ok(n) = i64::try_from(id.as_u64()) {
        out.push(KeyValue::new("job.id.int", n));
    }
    if !inactive.nodelist.is_empty() {
        out.push(KeyValue::new("job.nodelist", inactive.nodelist.to_string()));
    }
    if let Some(q) = &inactive.queue {
        out.push(KeyValue::new("job.queue", q.to_string()));
    }
    if let Some(w) = inactive.waitstatus {
        out.push(KeyValue::new("job.waitstatus", i64::from(w)));
    }
    out
}

/// An eventlog time (seconds since the epoch) as a span time; a damaged
/// (negative or not finite) time reads as the epoch.
fn time(t: f64) -> SystemTime {
    UNIX_EPOCH + Duration::try_from_secs_f64(t).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventlog_times_are_span_times() {
        assert_eq!(
            time(1.5),
            UNIX_EPOCH + Duration::from_millis(1500),
            "fractions kept"
        );
        assert_eq!(time(-1.0), UNIX_EPOCH);
        assert_eq!(time(f64::NAN), UNIX_EPOCH);
    }
}
