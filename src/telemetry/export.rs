//! Span export on the OpenTelemetry SDK: the OTLP exporter (`opentelemetry-otlp`, over
//! http/protobuf, http/json, or gRPC with the `grpc` cargo feature) behind the SDK's
//! `BatchSpanProcessor`, which batches on its own thread (`OTEL_BSP_*` settings).
//!
//! A run never waits on the collector: the processor's queue is bounded and a span that
//! does not fit is dropped, as is a batch the endpoint refused after the exporter's
//! retries. Two things the SDK does not do are added here, around it rather than instead
//! of it:
//! - **Dropped spans are counted** (through [`DropSink`] into
//!   `steward_otel_spans_dropped_total`) and warned about at most once a minute. The
//!   processor's own count is private and logged only at shutdown, so spans are counted
//!   in and out here, and one that would overflow the processor's queue is refused
//!   before it could be dropped silently.
//! - **GenAI span names and string arrays** are finished on the export thread
//!   ([`finish_for_export`]), which keeps a `format!` per span off the run's thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::{Array, StringValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SpanData, SpanExporter, SpanProcessor,
};

/// Told how many spans were dropped (the metrics counter).
pub type DropSink = Arc<dyn Fn(u64) + Send + Sync>;

/// At most one warning about dropped spans per this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Counts drops and rate-limits the warning.
struct Drops {
    sink: Option<DropSink>,
    warned: Mutex<Option<Instant>>,
}

impl Drops {
    fn record(&self, n: u64, why: &str) {
        if n == 0 {
            return;
        }
        if let Some(sink) = &self.sink {
            sink(n);
        }
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            *warned = Some(Instant::now());
            // Straight to stderr: a tracing event here could make more spans.
            eprintln!(
                "warning: dropped {n} trace span(s): {why} (counted in steward_otel_spans_dropped_total; this warning repeats at most once a minute)"
            );
        }
    }
}

/// The batch processor and the count of spans it holds.
pub struct Export {
    processor: BatchSpanProcessor,
    /// Spans handed to the processor and not yet taken by its exporter.
    pending: Arc<AtomicUsize>,
    /// The processor's queue size: at `pending == capacity` a span is refused here.
    capacity: usize,
    drops: Arc<Drops>,
}

impl Export {
    /// Starts the SDK's batch processor (its thread) over `exporter`, for spans of
    /// `resource`, with a queue of `queue` spans; the other batch settings are the SDK's
    /// (`OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`,
    /// `OTEL_BSP_EXPORT_TIMEOUT`).
    pub fn start<E: SpanExporter + 'static>(
        exporter: E,
        resource: &Resource,
        queue: usize,
        dropped: Option<DropSink>,
    ) -> Export {
        let pending = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(Drops {
            sink: dropped,
            warned: Mutex::new(None),
        });
        let counted = Counted {
            inner: exporter,
            pending: pending.clone(),
            drops: drops.clone(),
        };
        let config = BatchConfigBuilder::default().with_max_queue_size(queue).build();
        let mut processor = BatchSpanProcessor::new(counted, config);
        processor.set_resource(resource);
        Export {
            processor,
            pending,
            capacity: queue,
            drops,
        }
    }

    /// Queues a closed span for export, or drops (and counts) it when the queue is full.
    pub fn end(&self, span: SpanData) {
        if self.pending.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            self.drops.record(1, "the export queue is full");
            return;
        }
        self.processor.on_end(span);
    }

    /// Sends what is queued and stops the processor's thread; `false` when that did not
    /// finish within `timeout`.
    pub fn shutdown(&self, timeout: Duration) -> bool {
        self.processor.shutdown_with_timeout(timeout).is_ok()
    }
}

/// The exporter as the processor sees it: counts the spans it takes and the ones the
/// endpoint refused, and finishes each span's name and arrays first.
struct Counted<E> {
    inner: E,
    pending: Arc<AtomicUsize>,
    drops: Arc<Drops>,
}

impl<E> std::fmt::Debug for Counted<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counted")
    }
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, mut batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        self.pending.fetch_sub(n, Ordering::AcqRel);
        batch.iter_mut().for_each(finish_for_export);
        let result = self.inner.export(batch).await;
        if let Err(e) = &result {
            self.drops
                .record(n as u64, &format!("the OTLP endpoint failed: {e}"));
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Attributes the GenAI conventions type as string arrays. tracing's fields carry one
/// string, comma-separated; they are exported as an array.
const STRING_ARRAYS: [&str; 1] = ["gen_ai.response.finish_reasons"];

/// The span's name and typed arrays as the GenAI conventions want them: for the GenAI
/// operations, unless the code named the span (`otel.name`), `{operation} {subject}`
/// (`chat gpt-4.1`, `execute_tool http_fetch`, `invoke_agent helpdesk`).
pub fn finish_for_export(span: &mut SpanData) {
    let subject = match (&span.name, span.name.as_ref()) {
        (std::borrow::Cow::Owned(_), _) => None,
        (_, "chat") => Some("gen_ai.request.model"),
        (_, "execute_tool") => Some("gen_ai.tool.name"),
        (_, "invoke_agent") => Some("gen_ai.agent.name"),
        _ => None,
    };
    if let Some(key) = subject
        && let Some(Value::String(subject)) = span
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| &kv.value)
    {
        span.name = format!("{} {}", span.name, subject.as_str()).into();
    }
    for kv in &mut span.attributes {
        if STRING_ARRAYS.contains(&kv.key.as_str())
            && let Value::String(text) = &kv.value
        {
            let items: Vec<StringValue> = text
                .as_str()
                .split(',')
                .filter(|i| !i.is_empty())
                .map(|i| StringValue::from(i.to_string()))
                .collect();
            kv.value = Value::Array(Array::String(items));
        }
    }
}

#[cfg(test)]
pub mod testing {
    //! A collecting exporter for the layer's tests.
    use super::*;

    /// Keeps every span it is given.
    #[derive(Debug, Clone, Default)]
    pub struct Collect(pub Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Collect {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }
}

/// An exporter whose requests run on a runtime of their own (gRPC's channel needs tokio;
/// the processor's thread has none).
#[cfg(feature = "grpc")]
#[derive(Debug)]
pub struct OnRuntime<E> {
    inner: Arc<E>,
    runtime: tokio::runtime::Handle,
}

#[cfg(feature = "grpc")]
impl<E> OnRuntime<E> {
    pub fn new(inner: E, runtime: tokio::runtime::Handle) -> OnRuntime<E> {
        OnRuntime {
            inner: Arc::new(inner),
            runtime,
        }
    }
}

#[cfg(feature = "grpc")]
impl<E: SpanExporter + 'static> SpanExporter for OnRuntime<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let inner = self.inner.clone();
        self.runtime
            .spawn(async move { inner.export(batch).await })
            .await
            .map_err(|e| opentelemetry_sdk::error::OTelSdkError::InternalFailure(e.to_string()))?
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.set_resource(resource);
        }
    }
}
