//! Logging and tracing setup. Spans are created throughout the code (run, model call,
//! tool call); this installs the subscriber that prints them and, when an OTLP endpoint
//! is configured, exports them on the OpenTelemetry SDK: steward's layer ([`layer`])
//! builds each span's record, the SDK's sampler, ids, resource, batch processor and OTLP
//! exporter do the rest ([`export`]), and W3C trace context goes in and out with the
//! SDK's propagator ([`propagation`]).
//!
//! Log lines are filtered by `RUST_LOG` (else a per-command default); exported spans by
//! their own filter (steward's spans at `info` and above), so a quiet terminal does not
//! mean an empty trace.

pub mod export;
pub mod layer;
pub mod propagation;
pub mod record;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::Sampler;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub use export::DropSink;
pub use layer::{continue_remote, continue_trace, span_context, traceparent};

/// Where and how spans are exported (from the standard `OTEL_*` variables).
#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// The traces URL: `.../v1/traces` over HTTP; the collector's address over gRPC.
    pub traces_url: String,
    pub protocol: OtlpProtocol,
    pub headers: Vec<(String, String)>,
    /// `OTEL_SERVICE_NAME`, when set (else `service.name` from
    /// `OTEL_RESOURCE_ATTRIBUTES`, else `steward`).
    pub service_name: Option<String>,
    pub sampler: TraceSampler,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: spans waiting to be sent, at most.
    pub queue: usize,
}

/// `OTEL_EXPORTER_OTLP_PROTOCOL`: how spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtlpProtocol {
    HttpProtobuf,
    HttpJson,
    /// Only in builds with the `grpc` cargo feature.
    Grpc,
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
    /// The SDK's sampler for this setting.
    pub fn sdk(self) -> Sampler {
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
pub struct TelemetryError(pub(crate) String);

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes what is still queued.
#[must_use = "call shutdown() before exiting so queued spans are sent"]
pub struct Telemetry {
    export: Option<Arc<export::Export>>,
    /// gRPC's connections live on a runtime of their own, which must outlast the
    /// processor's last export (the program's runtime is gone by then).
    #[cfg(feature = "grpc")]
    grpc_runtime: Option<tokio::runtime::Runtime>,
    /// The log filter shows `info` spans (as `serve`'s default does): log lines inside a
    /// run then carry the run's span.
    logs_spans: bool,
}

impl Telemetry {
    /// Whether log lines show `info` spans. When they do not (a quiet `steward run`),
    /// runs need not enter their span on every poll: exported spans name their parents
    /// explicitly ([`parent_or`]), and the per-poll bookkeeping is saved.
    pub fn logs_spans(&self) -> bool {
        self.logs_spans
    }

    /// Sends the spans still queued (bounded wait) and stops the exporter. The wait is
    /// longer than one export's own timeout (10 s), so a slow export in progress does
    /// not make the last batch miss the exit.
    pub fn shutdown(self) {
        if let Some(export) = self.export
            && !export.shutdown(Duration::from_secs(12))
        {
            eprintln!("warning: could not flush traces within 12 s");
        }
        #[cfg(feature = "grpc")]
        if let Some(runtime) = self.grpc_runtime {
            runtime.shutdown_background();
        }
    }
}

/// Installs the subscriber: stderr logs filtered by `RUST_LOG`, else by `default` (such
/// as `warn,steward=info`), one JSON object per line with `json`; and, with `otlp`, a
/// layer exporting steward's spans ([`layer::ExportLayer`]).
///
/// Spans that cannot be sent (the queue is full, the endpoint failed) are dropped and
/// reported to `dropped`.
pub fn init(
    json: bool,
    default: &str,
    otlp: Option<OtlpConfig>,
    dropped: Option<DropSink>,
) -> Result<Telemetry, TelemetryError> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let logs_spans = filter
        .max_level_hint()
        .is_none_or(|level| level >= LevelFilter::INFO);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let fmt = if json {
        fmt.json().boxed()
    } else {
        fmt.compact().boxed()
    };
    let mut telemetry = Telemetry {
        export: None,
        #[cfg(feature = "grpc")]
        grpc_runtime: None,
        logs_spans,
    };
    let layer = match otlp {
        None => None,
        Some(config) => {
            let resource = resource(config.service_name.as_deref());
            let export = Arc::new(start_export(&config, &resource, dropped, &mut telemetry)?);
            telemetry.export = Some(export.clone());
            let spans = Targets::new().with_target("steward", LevelFilter::INFO);
            Some(layer::ExportLayer::new(export, config.sampler.sdk()).with_filter(spans))
        }
    };
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(layer)
        .try_init();
    Ok(telemetry)
}

/// The resource every span of this process belongs to: the SDK's detectors
/// (`OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SERVICE_NAME`, the SDK's own attributes), with
/// `service.name` defaulting to `steward` and `service.version` to this build's.
pub fn resource(service_name: Option<&str>) -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|v| !v.as_str().starts_with("unknown_service"));
    let mut builder = Resource::builder();
    match service_name {
        Some(name) => builder = builder.with_service_name(name.to_string()),
        None if !named => builder = builder.with_service_name("steward"),
        None => {}
    }
    if detected
        .get(&opentelemetry::Key::from_static_str("service.version"))
        .is_none()
    {
        builder = builder.with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    }
    builder.build()
}

/// The OTLP exporter for `config` behind the SDK's batch processor.
fn start_export(
    config: &OtlpConfig,
    resource: &Resource,
    dropped: Option<DropSink>,
    telemetry: &mut Telemetry,
) -> Result<export::Export, TelemetryError> {
    let failed = |e: opentelemetry_otlp::ExporterBuildError| TelemetryError(e.to_string());
    let protocol = match config.protocol {
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::Protocol::HttpBinary,
        OtlpProtocol::HttpJson => opentelemetry_otlp::Protocol::HttpJson,
        OtlpProtocol::Grpc => return start_grpc(config, resource, dropped, telemetry),
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(http_client(&config.traces_url)?)
        .with_protocol(protocol)
        .with_endpoint(config.traces_url.clone())
        .with_headers(config.headers.iter().cloned().collect())
        .build()
        .map_err(failed)?;
    Ok(export::Export::start(exporter, resource, config.queue, dropped))
}

/// The blocking client the exporter posts with, on the processor's thread. A plain
/// `http://` collector gets no certificate roots: loading the system's costs a one-shot
/// `steward run` about as much CPU as its first ten turns.
fn http_client(url: &str) -> Result<reqwest::blocking::Client, TelemetryError> {
    crate::http::install_crypto_provider();
    let url = url.to_string();
    // Built on a thread of its own: the blocking client starts (and, dropped, stops) a
    // runtime, which tokio refuses inside another runtime's thread.
    std::thread::spawn(move || {
        let builder = reqwest::blocking::Client::builder()
            .user_agent(concat!("steward/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none());
        let builder = if url.starts_with("http://") {
            builder.tls_certs_only(Vec::<reqwest::Certificate>::new())
        } else {
            builder
        };
        builder.build()
    })
    .join()
    .map_err(|_| TelemetryError("building the HTTP client panicked".into()))?
    .map_err(|e| TelemetryError(format!("cannot build the HTTP client: {e}")))
}

#[cfg(feature = "grpc")]
fn start_grpc(
    config: &OtlpConfig,
    resource: &Resource,
    dropped: Option<DropSink>,
    telemetry: &mut Telemetry,
) -> Result<export::Export, TelemetryError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("steward-otlp-grpc")
        .enable_all()
        .build()
        .map_err(|e| TelemetryError(format!("cannot start the gRPC runtime: {e}")))?;
    // The tonic exporter reads the OTLP header variables itself (validated at start).
    // The channel's worker task is spawned onto the current runtime when it is built.
    let exporter = {
        let _entered = runtime.enter();
        opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(config.traces_url.clone())
            .build()
            .map_err(|e| TelemetryError(e.to_string()))?
    };
    let exporter = export::OnRuntime::new(exporter, runtime.handle().clone());
    let export = export::Export::start(exporter, resource, config.queue, dropped);
    telemetry.grpc_runtime = Some(runtime);
    Ok(export)
}

#[cfg(not(feature = "grpc"))]
fn start_grpc(
    _: &OtlpConfig,
    _: &Resource,
    _: Option<DropSink>,
    _: &mut Telemetry,
) -> Result<export::Export, TelemetryError> {
    Err(TelemetryError(
        "OTLP over gRPC needs a build with the `grpc` feature (the shipped image has it); use http/protobuf on the collector's port 4318".into(),
    ))
}

tokio::task_local! {
    /// The span a task is [`within`] without entering it on every poll.
    static WITHIN: tracing::Span;
}

/// Runs `fut` inside `span`: entered on every poll when `enter` (log lines inside then
/// carry it), else only named as the parent of the spans made inside ([`parent`]),
/// which saves the subscriber's work on every poll.
pub async fn within<F: std::future::Future>(span: &tracing::Span, enter: bool, fut: F) -> F::Output {
    use tracing::Instrument;
    if enter {
        fut.instrument(span.clone()).await
    } else {
        WITHIN.scope(span.clone(), fut).await
    }
}

/// The parent for a new span (`info_span!(parent: ...)`): the current span, else the
/// span this task is [`within`], else none (the new span is a root). An id rather than a
/// `Span`: a handle would be cloned and dropped around every span made, each a trip
/// through the subscriber's registry.
pub fn parent() -> Option<tracing::Id> {
    let current = tracing::dispatcher::get_default(|d| d.current_span().id().cloned());
    current.or_else(|| WITHIN.try_with(tracing::Span::id).ok().flatten())
}

/// The parent for a span made inside a run: [`parent`] when there is one (a tool call's,
/// a compaction's, or the run's own when runs are entered on every poll), else `run`,
/// the run's span, named explicitly.
pub fn parent_or(run: &tracing::Span) -> Option<tracing::Id> {
    parent().or_else(|| run.id())
}

/// Records several fields of `span` in one call into the subscriber (one span lookup)
/// rather than one call per field, which is what a span's closing figures cost most.
/// Names the span does not declare are ignored, as with `Span::record`.
pub fn record_fields(span: &tracing::Span, values: &[(&str, &dyn tracing::Value)]) {
    const MAX_FIELDS: usize = 48;
    let Some(meta) = span.metadata() else {
        return;
    };
    let fields = meta.fields();
    if fields.len() > MAX_FIELDS {
        for (name, value) in values {
            span.record(*name, *value);
        }
        return;
    }
    let mut slots: [Option<&dyn tracing::Value>; MAX_FIELDS] = [None; MAX_FIELDS];
    for (name, value) in values {
        if let Some(field) = fields.field(name) {
            slots[field.index()] = Some(*value);
        }
    }
    span.record_all(&fields.value_set_all(&slots[..fields.len()]));
}
