//! Logging and tracing setup. Spans are created throughout the code (run, model call,
//! tool call); this installs the subscriber that prints them and, when an OTLP endpoint
//! is configured, exports them over OTLP/HTTP (protobuf) from one export thread behind
//! a bounded queue ([`queue`]).
//!
//! Log lines are filtered by `RUST_LOG` (else a per-command default); exported spans by
//! their own filter (steward's spans at `info` and above), so a quiet terminal does not
//! mean an empty trace.

pub mod queue;

use std::io::IsTerminal;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Where and how spans are exported (from the standard `OTEL_*` variables).
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// The full traces URL (`.../v1/traces`).
    pub traces_url: String,
    pub headers: Vec<(String, String)>,
    pub service_name: String,
    pub sampler: TraceSampler,
}

/// `OTEL_TRACES_SAMPLER` (and its `_ARG` ratio).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TraceSampler {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
    ParentBasedAlwaysOn,
    ParentBasedAlwaysOff,
    ParentBasedRatio(f64),
}

impl TraceSampler {
    fn sdk(self) -> Sampler {
        match self {
            TraceSampler::AlwaysOn => Sampler::AlwaysOn,
            TraceSampler::AlwaysOff => Sampler::AlwaysOff,
            TraceSampler::Ratio(r) => Sampler::TraceIdRatioBased(r),
            TraceSampler::ParentBasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            TraceSampler::ParentBasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
            TraceSampler::ParentBasedRatio(r) => {
                Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(r)))
            }
        }
    }
}

/// The exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the OTLP trace exporter: {0}")]
pub struct TelemetryError(String);

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes what is still queued.
#[must_use = "call shutdown() before exiting so queued spans are sent"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Sends the spans still queued (bounded wait) and stops the exporter. The wait is
    /// longer than one export's own timeout (10 s), so a slow export in progress does
    /// not make the last batch miss the exit.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown_with_timeout(Duration::from_secs(12))
        {
            eprintln!("warning: could not flush traces: {e}");
        }
    }
}

/// Installs the subscriber: stderr logs filtered by `RUST_LOG`, else by `default` (such
/// as `warn,steward=info`), one JSON object per line with `json`; and, with `otlp`, a
/// layer exporting steward's spans.
///
/// Spans that cannot be sent (the queue is full, the endpoint failed) are dropped and
/// reported to `dropped`.
pub fn init(
    json: bool,
    default: &str,
    otlp: Option<OtlpConfig>,
    dropped: Option<queue::DropSink>,
) -> Result<Telemetry, TelemetryError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let fmt = if json {
        fmt.json().boxed()
    } else {
        fmt.compact().boxed()
    };
    let (provider, otel) = match otlp {
        None => (None, None),
        Some(config) => {
            let provider = provider(config, dropped)?;
            let tracer = provider.tracer("steward");
            let spans = Targets::new().with_target("steward", LevelFilter::INFO);
            // No per-poll busy/idle timing, source locations or thread names: they cost
            // on every poll of a run's futures and say nothing a trace reader needs.
            let layer = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_tracked_inactivity(false)
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_filter(spans);
            (Some(provider), Some(layer))
        }
    };
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(otel)
        .try_init();
    Ok(Telemetry { provider })
}

fn provider(
    config: OtlpConfig,
    dropped: Option<queue::DropSink>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(config.traces_url)
        .with_headers(config.headers.into_iter().collect())
        .with_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| TelemetryError(e.to_string()))?;
    let resource = Resource::builder().with_service_name(config.service_name).build();
    let queue = queue::BoundedQueue::start(exporter, dropped)
        .map_err(|e| TelemetryError(format!("cannot start the export thread: {e}")))?;
    Ok(SdkTracerProvider::builder()
        .with_span_processor(queue)
        .with_sampler(config.sampler.sdk())
        .with_resource(resource)
        .build())
}

/// The W3C `traceparent` of `span` (`00-<trace id>-<span id>-<flags>`), or `None` when no
/// trace is being exported.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            sc.trace_flags().to_u8()
        )
    })
}

/// Makes `span` a child of the remote span `traceparent` names (one received before a
/// queue or a restart). A malformed value is ignored: the span starts its own trace.
pub fn continue_trace(span: &tracing::Span, traceparent: &str) {
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let parts: Vec<&str> = traceparent.trim().split('-').collect();
    let [version, trace, parent, flags] = parts.as_slice() else {
        return;
    };
    if *version != "00" {
        return;
    }
    let (Ok(trace), Ok(parent), Ok(flags)) = (
        TraceId::from_hex(trace),
        SpanId::from_hex(parent),
        u8::from_str_radix(flags, 16),
    ) else {
        return;
    };
    let remote = SpanContext::new(trace, parent, TraceFlags::new(flags), true, TraceState::default());
    if remote.is_valid() {
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}
