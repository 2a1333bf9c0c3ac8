//! Trace export over OTLP/gRPC (`[telemetry] otlp_endpoint`), off unless an
//! endpoint is configured (docs/TRACING.md).
//!
//! What is sent: one span per gRPC call a service serves ([`RpcSpans`], a
//! layer on its tonic server), named `package.Service/Method` as the
//! OpenTelemetry RPC conventions name them, with the gRPC status code; and
//! whatever spans a service builds itself through the `opentelemetry` API
//! (the job manager's span of a job's life), which reach the same exporter
//! through the global tracer provider set here.
//!
//! Off, nothing is built: no exporter, no layer in the subscriber, and
//! [`enabled`] is false, so the RPC layer passes calls straight through and
//! the job manager makes no job spans.
//!
//! The SDK's batch span processor queues finished spans and exports them in
//! batches from a thread of its own; the export itself is a tonic call whose
//! connection is driven by the service's tokio runtime, so the exporter must
//! be built inside that runtime ([`TraceExport::start`] is called under
//! `Runtime::enter`). [`TraceExport::shutdown`] flushes what is queued.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tonic::codegen::{Service, http};
use tracing::field::Empty;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::registry::LookupSpan;

/// Target of the per-RPC spans: the only `tracing` spans exported, so the
/// short spans the services open for their logs' context stay in the logs.
pub const RPC_TARGET: &str = "fluxgate::rpc";

/// How long one export, and the flush at shutdown, may take before it is
/// abandoned: a collector that does not answer must not hold a stop for long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Set once the exporter is installed; read on every call and job end.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Spans are being exported: the per-RPC and per-job spans are made only then.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Where spans go and under which service name (`[telemetry]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The collector's OTLP/gRPC address (`http://host:4317`); empty, no export.
    pub endpoint: String,
    /// `service.name` of the spans' resource.
    pub service_name: String,
}

/// The trace export could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The endpoint is not an address the exporter can use.
    #[error(
        "telemetry.otlp_endpoint {endpoint:?} cannot be used ({reason}); \
         give the collector's OTLP/gRPC address, e.g. http://127.0.0.1:4317"
    )]
    Endpoint {
        /// What was configured.
        endpoint: String,
        /// What the exporter said.
        reason: String,
    },
    /// Logging was already set up in this process.
    #[error("logging is already set up: {0}")]
    AlreadySet(String),
}

/// The running export; flushed by [`TraceExport::shutdown`] or when dropped.
#[derive(Debug, Default)]
pub struct TraceExport {
    provider: Option<SdkTracerProvider>,
}

impl TraceExport {
    /// Build the exporter for `config`, or nothing when its endpoint is
    /// empty; must run inside the tokio runtime that will carry the exports.
    pub(crate) fn start(config: &OtlpConfig) -> Result<TraceExport, OtlpError> {
        if config.endpoint.is_empty() {
            return Ok(TraceExport::default());
        }
        let bad = |reason: String| OtlpError::Endpoint {
            endpoint: config.endpoint.clone(),
            reason,
        };
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(config.endpoint.clone())
            .with_timeout(EXPORT_TIMEOUT);
        if config.endpoint.starts_with("https:") {
            // The exporter's default TLS trusts no root: use the system's.
            builder = builder
                .with_tls_config(tonic::transport::ClientTlsConfig::new().with_native_roots());
        }
        let exporter = builder.build().map_err(|e| bad(e.to_string()))?;
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        Ok(TraceExport {
            provider: Some(provider),
        })
    }

    /// The layer that turns exported `tracing` spans into OpenTelemetry spans.
    pub(crate) fn layer<S>(&self) -> Option<impl Layer<S> + Send + Sync + 'static>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let provider = self.provider.as_ref()?;
        let tracer = provider.tracer("fluxgate");
        // Spans: only the RPC spans. Events: those at INFO and above become
        // events of the RPC span they happen in (none outside one).
        let only_rpcs = filter_fn(|meta| {
            if meta.is_span() {
                meta.target() == RPC_TARGET
            } else {
                *meta.level() <= tracing::Level::INFO
            }
        });
        Some(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_threads(false)
                .with_location(false)
                .with_filter(only_rpcs),
        )
    }

    /// Make the provider the global one, for spans built directly with the
    /// `opentelemetry` API, and turn the RPC and job spans on.
    pub(crate) fn install(&self) {
        if let Some(provider) = &self.provider {
            opentelemetry::global::set_tracer_provider(provider.clone());
            ENABLED.store(true, Ordering::Relaxed);
        }
    }

    /// Export what is queued and stop; a no-op when nothing is exported.
    /// Blocks for up to the export timeout: call it outside async code,
    /// while the runtime that carries the exports still runs.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(provider) = self.provider.take() else {
            return;
        };
        ENABLED.store(false, Ordering::Relaxed);
        if let Err(e) = provider.shutdown_with_timeout(EXPORT_TIMEOUT) {
            tracing::warn!(error = %e, "trace export: spans may be lost at shutdown");
        }
    }
}

impl Drop for TraceExport {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A tower layer for the tonic servers: one span per call while spans are
/// exported, named for its method, with its gRPC status code.
///
/// The span covers the call up to its response headers: all of a unary call
/// and the opening of a stream. The status is read from those headers, where
/// tonic puts it for every failed call (a trailers-only response); a call
/// whose headers carry none succeeded, or is a stream whose end is not seen
/// here.
#[derive(Debug, Clone, Copy, Default)]
pub struct RpcSpans;

impl<S> tower_layer::Layer<S> for RpcSpans {
    type Service = RpcSpan<S>;

    fn layer(&self, inner: S) -> RpcSpan<S> {
        RpcSpan { inner }
    }
}

/// The service [`RpcSpans`] wraps around a server.
#[derive(Debug, Clone)]
pub struct RpcSpan<S> {
    inner: S,
}

impl<S, B, R> Service<http::Request<B>> for RpcSpan<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = RpcFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if !enabled() {
            return RpcFuture {
                inner: self.inner.call(request),
                span: None,
            };
        }
        let span = rpc_span(request.uri().path());
        let inner = span.in_scope(|| self.inner.call(request));
        RpcFuture {
            inner,
            span: Some(span),
        }
    }
}

/// The span of one call: `fluxgate.v1.JobManager/Submit` from the request
/// path `/fluxgate.v1.JobManager/Submit`.
fn rpc_span(path: &str) -> tracing::Span {
    let name = path.trim_start_matches('/');
    let (service, method) = name.rsplit_once('/').unwrap_or(("", name));
    tracing::info_span!(
        target: RPC_TARGET,
        "rpc",
        otel.name = name,
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        rpc.grpc.status_code = Empty,
    )
}

pin_project_lite::pin_project! {
    /// A call's response, in its span when there is one.
    #[derive(Debug)]
    pub struct RpcFuture<F> {
        #[pin]
        inner: F,
        span: Option<tracing::Span>,
    }
}

impl<F, R, E> Future for RpcFuture<F>
where
    F: Future<Output = Result<http::Response<R>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Some(span) = this.span.as_ref() else {
            return this.inner.poll(cx);
        };
        let out = ready!(span.in_scope(|| this.inner.poll(cx)));
        match &out {
            Ok(response) => record_status(span, response.headers()),
            Err(_) => {
                span.record("otel.status_code", "ERROR");
            }
        }
        Poll::Ready(out)
    }
}

/// The gRPC status of a response's headers on its span (0, OK, when absent).
fn record_status(span: &tracing::Span, headers: &http::HeaderMap) {
    let code = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    span.record("rpc.grpc.status_code", code);
    if server_error(code) {
        span.record("otel.status_code", "ERROR");
        if let Some(message) = headers.get("grpc-message").and_then(|v| v.to_str().ok()) {
            span.record("otel.status_description", message);
        }
    }
}

/// The codes the OpenTelemetry RPC conventions count as a server's error;
/// the others (NOT_FOUND, INVALID_ARGUMENT, ...) are the caller's.
fn server_error(code: i64) -> bool {
    // UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS.
    matches!(code, 2 | 4 | 12 | 13 | 14 | 15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_endpoint_exports_nothing() {
        let export = TraceExport::start(&OtlpConfig::default()).unwrap();
        assert!(export.provider.is_none());
        assert!(!enabled());
        export.shutdown();
    }

    #[test]
    fn a_bad_endpoint_is_refused_by_name() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in = runtime.enter();
        let err = TraceExport::start(&OtlpConfig {
            endpoint: "not a uri".into(),
            service_name: "x".into(),
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("\"not a uri\""), "{err}");
    }

    #[test]
    fn server_errors_are_the_servers_codes() {
        assert!(!server_error(0));
        assert!(!server_error(3), "INVALID_ARGUMENT is the caller's");
        assert!(!server_error(5), "NOT_FOUND is the caller's");
        assert!(server_error(13));
        assert!(server_error(14));
    }
}
