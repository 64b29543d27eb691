//! The span export queue: finished spans go into a bounded channel and one thread
//! sends them in batches. A run never waits on the collector: when the queue is full
//! (the endpoint is slow or down) a span is dropped, and so is a batch the endpoint
//! refused. Every dropped span is counted (through the sink, into
//! `steward_otel_spans_dropped_total`) and warned about at most once a minute.
//!
//! The SDK's batch processor drops silently (it logs once, through its own diagnostics);
//! this one is small enough to own.

use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};

/// Spans waiting to be sent, at most.
pub const QUEUE: usize = 4096;
/// Spans per export request, at most.
const BATCH: usize = 512;
/// A partial batch is sent after this long.
const DELAY: Duration = Duration::from_secs(2);
/// At most one warning about dropped spans per this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Told how many spans were dropped (the metrics counter).
pub type DropSink = Arc<dyn Fn(u64) + Send + Sync>;

enum Message {
    Span(Box<SpanData>),
    Resource(Resource),
    Flush(SyncSender<()>),
    Shutdown(SyncSender<()>),
}

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
            // Straight to stderr: a tracing event here would make more spans.
            eprintln!(
                "warning: dropped {n} trace span(s): {why} (counted in steward_otel_spans_dropped_total; this warning repeats at most once a minute)"
            );
        }
    }
}

/// A [`SpanProcessor`] with a bounded queue in front of one export thread.
pub struct BoundedQueue {
    tx: SyncSender<Message>,
    drops: Arc<Drops>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for BoundedQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedQueue").finish_non_exhaustive()
    }
}

impl BoundedQueue {
    /// Starts the export thread for `exporter`.
    pub fn start<E: SpanExporter + 'static>(exporter: E, sink: Option<DropSink>) -> std::io::Result<Self> {
        let (tx, rx) = sync_channel(QUEUE);
        let drops = Arc::new(Drops {
            sink,
            warned: Mutex::new(None),
        });
        let thread_drops = drops.clone();
        let worker = std::thread::Builder::new()
            .name("steward-otlp".into())
            .spawn(move || run(exporter, rx, &thread_drops))?;
        Ok(BoundedQueue {
            tx,
            drops,
            worker: Mutex::new(Some(worker)),
        })
    }

    /// Sends a control message and waits (bounded) for the worker to act on it.
    fn control(&self, make: impl FnOnce(SyncSender<()>) -> Message, timeout: Duration) -> OTelSdkResult {
        let (done_tx, done_rx) = sync_channel(1);
        self.tx
            .send(make(done_tx))
            .map_err(|_| OTelSdkError::AlreadyShutdown)?;
        done_rx
            .recv_timeout(timeout)
            .map_err(|_| OTelSdkError::Timeout(timeout))
    }
}

impl SpanProcessor for BoundedQueue {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        match self.tx.try_send(Message::Span(Box::new(span))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.drops.record(1, "the export queue is full"),
            // Shut down: nothing more is exported.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.control(Message::Flush, Duration::from_secs(10))
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let result = self.control(Message::Shutdown, timeout);
        if result.is_ok()
            && let Some(worker) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            let _ = worker.join();
        }
        result
    }

    fn set_resource(&mut self, resource: &Resource) {
        // The worker owns the exporter; the resource goes to it before any span.
        let _ = self.tx.send(Message::Resource(resource.clone()));
    }
}

/// The export thread: collects spans into batches and sends each when it is full, when
/// [`DELAY`] has passed since its first span, on a flush, and at shutdown.
fn run<E: SpanExporter>(mut exporter: E, rx: Receiver<Message>, drops: &Drops) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH);
    let mut due: Option<Instant> = None;
    let send = |exporter: &E, batch: &mut Vec<SpanData>| {
        if batch.is_empty() {
            return;
        }
        let spans = std::mem::take(batch);
        let n = spans.len() as u64;
        if let Err(e) = futures_executor::block_on(exporter.export(spans)) {
            drops.record(n, &format!("the OTLP endpoint failed: {e}"));
        }
    };
    loop {
        let message = match due {
            Some(at) => match rx.recv_timeout(at.saturating_duration_since(Instant::now())) {
                Ok(m) => Some(m),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match rx.recv() {
                Ok(m) => Some(m),
                Err(_) => break,
            },
        };
        match message {
            Some(Message::Span(span)) => {
                batch.push(*span);
                due.get_or_insert_with(|| Instant::now() + DELAY);
                if batch.len() >= BATCH {
                    send(&exporter, &mut batch);
                    due = None;
                }
            }
            Some(Message::Resource(resource)) => exporter.set_resource(&resource),
            Some(Message::Flush(done)) => {
                send(&exporter, &mut batch);
                due = None;
                let _ = done.send(());
            }
            Some(Message::Shutdown(done)) => {
                send(&exporter, &mut batch);
                let _ = exporter.shutdown();
                let _ = done.send(());
                return;
            }
            None => {
                send(&exporter, &mut batch);
                due = None;
            }
        }
    }
    send(&exporter, &mut batch);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// An exporter whose endpoint is down, or that counts what it got.
    #[derive(Debug, Clone, Default)]
    struct Fake {
        fail: bool,
        got: Arc<AtomicU64>,
    }

    impl SpanExporter for Fake {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            if self.fail {
                return Err(OTelSdkError::InternalFailure("connection refused".into()));
            }
            self.got.fetch_add(batch.len() as u64, Ordering::SeqCst);
            Ok(())
        }
    }

    fn span() -> SpanData {
        use opentelemetry::trace::{SpanContext, SpanKind, Status};
        SpanData {
            span_context: SpanContext::empty_context(),
            parent_span_id: opentelemetry::trace::SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "s".into(),
            start_time: std::time::SystemTime::now(),
            end_time: std::time::SystemTime::now(),
            attributes: Vec::new(),
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    #[test]
    fn spans_are_sent_on_flush_and_failures_counted() {
        let ok = Fake::default();
        let queue = BoundedQueue::start(ok.clone(), None).unwrap();
        for _ in 0..3 {
            queue.on_end(span());
        }
        queue.force_flush().unwrap();
        assert_eq!(ok.got.load(Ordering::SeqCst), 3);

        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        let sink: DropSink = Arc::new(move |n| {
            counter.fetch_add(n, Ordering::SeqCst);
        });
        let down = BoundedQueue::start(
            Fake {
                fail: true,
                ..Fake::default()
            },
            Some(sink),
        )
        .unwrap();
        for _ in 0..5 {
            down.on_end(span());
        }
        down.shutdown_with_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 5);
        // After shutdown spans are ignored, not queued forever.
        down.on_end(span());
    }
}
