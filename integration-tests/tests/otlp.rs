//! Trace export over OTLP (`telemetry.otlp_endpoint`): a real job manager and
//! exec service send their spans to an OTLP receiver run by the test.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fluxgate_integration_tests::{Instance, Setup, eventually};
use fluxgate_proto::v1 as pb;
use fluxgate_shared::jobspec::JobspecBuilder;
use nix::sys::signal::Signal;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use tonic::{Request, Response, Status};

/// Every span received, with the `service.name` of its resource.
#[derive(Debug, Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<(String, Span)>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut spans = self.spans.lock().expect("receiver lock");
        for rs in request.into_inner().resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| text(&r.attributes, "service.name"))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                spans.extend(ss.spans.into_iter().map(|s| (service.clone(), s)));
            }
        }
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

impl Receiver {
    /// Serve on an ephemeral port; its `http://` address.
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(self.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener));
        tokio::spawn(server);
        format!("http://{addr}")
    }

    /// The first span `pick` accepts, waiting up to 15 s for it.
    async fn wait_for(&self, what: &str, pick: impl Fn(&str, &Span) -> bool) -> Span {
        eventually(Duration::from_secs(15), async || {
            let spans = self.spans.lock().expect("receiver lock");
            if let Some((_, s)) = spans.iter().find(|(svc, s)| pick(svc, s)) {
                return Ok(s.clone());
            }
            let names: Vec<String> = spans
                .iter()
                .map(|(v, s)| format!("{v}: {}", s.name))
                .collect();
            Err(format!("no {what}; got {names:?}"))
        })
        .await
    }
}

fn value<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    match value(attributes, key)? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn int(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match value(attributes, key)? {
        any_value::Value::IntValue(n) => Some(*n),
        _ => None,
    }
}

/// An eventlog time in the nanoseconds of a span time.
fn nanos(t: f64) -> i128 {
    (t * 1e9) as i128
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpcs_and_a_job_life_reach_the_collector() {
    let receiver = Receiver::default();
    let endpoint = receiver.start().await;
    let set = vec![
        "--set".to_string(),
        format!("telemetry.otlp_endpoint={endpoint}"),
    ];
    let mut inst = Instance::start_setup(
        1,
        2,
        Setup {
            jm_args: set.clone(),
            exec_args: set,
            ..Setup::default()
        },
    )
    .await;
    let id = inst.submit(&JobspecBuilder::new(["true"]), None).await;
    let events = inst.wait_clean(id).await;
    let at = |name: &str| {
        events
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no {name} event"))
            .timestamp
    };
    let (t_submit, t_clean) = (at("submit"), at("clean"));
    // A call that fails: its span carries the code (NOT_FOUND is the
    // caller's error, not the server's).
    let e = inst
        .jobs()
        .await
        .cancel(pb::CancelRequest {
            id: 123_456_789,
            note: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e}");

    // Spans are batched; stopping the services sends what is queued.
    let status = inst.stop_jm().expect("the job manager ran");
    assert!(status.success(), "job manager exited {status}");
    inst.signal_exec(0, Signal::SIGTERM);

    let submit = receiver
        .wait_for("Submit span", |svc, s| {
            svc == "fluxgate-job-manager" && s.name == "fluxgate.v1.JobManager/Submit"
        })
        .await;
    assert_eq!(submit.kind, SpanKind::Server as i32);
    assert_eq!(
        text(&submit.attributes, "rpc.system").as_deref(),
        Some("grpc")
    );
    assert_eq!(
        text(&submit.attributes, "rpc.method").as_deref(),
        Some("Submit")
    );
    assert_eq!(int(&submit.attributes, "rpc.grpc.status_code"), Some(0));

    let cancel = receiver
        .wait_for("Cancel span", |svc, s| {
            svc == "fluxgate-job-manager" && s.name == "fluxgate.v1.JobManager/Cancel"
        })
        .await;
    assert_eq!(int(&cancel.attributes, "rpc.grpc.status_code"), Some(5));

    let job = receiver
        .wait_for("job span", |svc, s| {
            svc == "fluxgate-job-manager"
                && s.name == "job"
                && text(&s.attributes, "job.id") == Some(id.to_string())
        })
        .await;
    assert_eq!(
        int(&job.attributes, "job.id.int"),
        Some(i64::try_from(id.as_u64()).expect("a small id"))
    );
    assert_eq!(
        text(&job.attributes, "job.result").as_deref(),
        Some("COMPLETED")
    );
    // From submit to INACTIVE (entered at clean), to the eventlog's microsecond.
    let (start, end) = (
        i128::from(job.start_time_unix_nano),
        i128::from(job.end_time_unix_nano),
    );
    assert!(
        (start - nanos(t_submit)).abs() < 2_000,
        "start {start}, submit {t_submit}"
    );
    assert!(
        (end - nanos(t_clean)).abs() < 2_000,
        "end {end}, clean {t_clean}"
    );
    let states: Vec<&str> = job.events.iter().map(|e| e.name.as_str()).collect();
    for state in ["NEW", "SCHED", "RUN", "CLEANUP", "INACTIVE"] {
        assert!(states.contains(&state), "{state} missing from {states:?}");
    }

    // The exec service spans the calls the job manager made to it.
    receiver
        .wait_for("exec span", |svc, s| {
            svc == "fluxgate-exec" && s.name.starts_with("fluxgate.v1.Exec/")
        })
        .await;
}
