//! Logging and tracing setup. Spans are created throughout the code (run, model call,
//! tool call); this installs the subscriber that prints them and, when an OTLP endpoint
//! is configured, exports them over OTLP/HTTP (protobuf) from one export thread behind
//! a bounded queue ([`queue`]).
//!
//! Log lines are filtered by `RUST_LOG` (else a per-command default); exported spans by
//! their own filter (steward's spans at `info` and above), so a quiet terminal does not
//! mean an empty trace.

pub mod layer;
pub mod otlp;
pub mod queue;
pub mod record;

use std::io::IsTerminal;
use std::time::Duration;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub use layer::{continue_trace, traceparent};

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

/// The exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the OTLP trace exporter: {0}")]
pub struct TelemetryError(pub(crate) String);

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes what is still queued.
#[must_use = "call shutdown() before exiting so queued spans are sent"]
pub struct Telemetry {
    exporter: Option<queue::Exporter>,
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
        if let Some(exporter) = self.exporter
            && !exporter.shutdown(Duration::from_secs(12))
        {
            eprintln!("warning: could not flush traces within 12 s");
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
    dropped: Option<queue::DropSink>,
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
    let (exporter, export) = match otlp {
        None => (None, None),
        Some(config) => {
            let transport = queue::HttpTransport::new(config.traces_url, &config.headers)?;
            let (exporter, sink) = queue::Exporter::start(transport, &config.service_name, dropped)
                .map_err(|e| TelemetryError(format!("cannot start the export thread: {e}")))?;
            let spans = Targets::new().with_target("steward", LevelFilter::INFO);
            let layer = layer::ExportLayer::new(sink, config.sampler).with_filter(spans);
            (Some(exporter), Some(layer))
        }
    };
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(filter))
        .with(export)
        .try_init();
    Ok(Telemetry { exporter, logs_spans })
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
