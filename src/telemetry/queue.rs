//! The span export queue: closed spans go into a bounded buffer and one thread sends
//! them in batches as OTLP/HTTP protobuf. A run never waits on the collector: when the
//! buffer is full (the endpoint is slow or down) a span is dropped, and so is a batch the
//! endpoint refused. Every dropped span is counted (through the sink, into
//! `steward_otel_spans_dropped_total`) and warned about at most once a minute.
//!
//! Adding a span takes an uncontended lock and wakes the export thread only when a batch
//! starts or fills, not once per span: the thread sleeps until a batch is due.

use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::TelemetryError;
use super::otlp;
use super::record::SpanRecord;

/// Spans waiting to be sent, at most.
pub const QUEUE: usize = 4096;
/// Spans per export request, at most.
const BATCH: usize = 512;
/// A partial batch is sent after this long: the OpenTelemetry SDKs' default schedule
/// delay (`OTEL_BSP_SCHEDULE_DELAY`). Each export is an HTTP request, which costs more
/// than encoding a hundred spans; a long run pays for one every this long.
const DELAY: Duration = Duration::from_secs(5);
/// One export request may take this long.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// At shutdown, spans closing late are taken until none came for `LATE_QUIET`, for at
/// most `LATE_WINDOW`.
const LATE_QUIET: Duration = Duration::from_millis(50);
const LATE_WINDOW: Duration = Duration::from_millis(500);
/// At most one warning about dropped spans per this long.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Told how many spans were dropped (the metrics counter).
pub type DropSink = Arc<dyn Fn(u64) + Send + Sync>;

/// What the export thread is asked to do, with the spans it is to send.
#[derive(Default)]
struct State {
    spans: Vec<SpanRecord>,
    /// When the first span of the current batch came.
    first_at: Option<Instant>,
    /// Flushes waiting for the spans queued before them to be sent.
    flushes: Vec<SyncSender<()>>,
    shutdown: Option<SyncSender<()>>,
    /// The thread has stopped: new spans are ignored.
    closed: bool,
}

/// The buffer and the export thread's wake-up call.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
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
            // Straight to stderr: a tracing event here could make more spans.
            eprintln!(
                "warning: dropped {n} trace span(s): {why} (counted in steward_otel_spans_dropped_total; this warning repeats at most once a minute)"
            );
        }
    }
}

/// Where closed spans go: never blocks.
pub struct SpanSink {
    shared: Arc<Shared>,
    drops: Arc<Drops>,
}

impl SpanSink {
    /// Queues `span` for export, or drops (and counts) it when the buffer is full.
    pub fn send(&self, span: SpanRecord) {
        let mut state = self.shared.lock();
        if state.closed {
            // Shut down: nothing more is exported.
            return;
        }
        if state.spans.len() >= QUEUE {
            drop(state);
            self.drops.record(1, "the export queue is full");
            return;
        }
        state.spans.push(span);
        // The thread sleeps until a batch starts (to time its delay) or fills.
        let wake = state.first_at.is_none() || state.spans.len() == BATCH;
        if state.first_at.is_none() {
            state.first_at = Some(Instant::now());
        }
        drop(state);
        if wake {
            self.shared.wake.notify_one();
        }
    }
}

/// Sends one encoded batch; `Err` says why it was not accepted.
pub trait Transport: Send + 'static {
    fn send(&mut self, body: Vec<u8>) -> Result<(), String>;
}

/// OTLP/HTTP: a POST of the protobuf body to the traces URL, from a single-threaded
/// runtime owned by the export thread. The client is built on first use (building one
/// loads the system's root certificates).
pub struct HttpTransport {
    url: String,
    headers: reqwest::header::HeaderMap,
    runtime: tokio::runtime::Runtime,
    client: Option<reqwest::Client>,
}

impl HttpTransport {
    /// A transport for `url` sending `headers` with every request; a header that is not
    /// valid HTTP is an error naming it.
    pub fn new(url: String, headers: &[(String, String)]) -> Result<HttpTransport, TelemetryError> {
        use reqwest::header::{HeaderName, HeaderValue};
        let mut map = reqwest::header::HeaderMap::new();
        for (k, v) in headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                TelemetryError(format!("OTEL_EXPORTER_OTLP_HEADERS: '{k}' is not a header name"))
            })?;
            let value = HeaderValue::from_str(v).map_err(|_| {
                TelemetryError(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: the value of '{k}' is not a valid header value"
                ))
            })?;
            map.insert(name, value);
        }
        map.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| TelemetryError(format!("cannot start the export runtime: {e}")))?;
        Ok(HttpTransport {
            url,
            headers: map,
            runtime,
            client: None,
        })
    }
}

impl Transport for HttpTransport {
    fn send(&mut self, body: Vec<u8>) -> Result<(), String> {
        let client = match &self.client {
            Some(c) => c.clone(),
            None => {
                let c = export_client(&self.url).map_err(|e| format!("cannot build the HTTP client: {e}"))?;
                self.client = Some(c.clone());
                c
            }
        };
        let request = client
            .post(&self.url)
            .headers(self.headers.clone())
            .timeout(EXPORT_TIMEOUT)
            .body(body);
        self.runtime.block_on(async move {
            let response = request.send().await.map_err(|e| e.to_string())?;
            let status = response.status();
            // Read the (small) answer so the connection can be reused.
            let _ = response.bytes().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the OTLP endpoint answered {status}"))
            }
        })
    }
}

/// The client for `url`. A plain `http://` collector (a local agent or sidecar) needs no
/// certificate roots, and loading the system's costs a one-shot `steward run` about as
/// much CPU as its first ten turns; an `https://` one gets the usual client.
fn export_client(url: &str) -> Result<reqwest::Client, reqwest::Error> {
    if !url.starts_with("http://") {
        return crate::http::client();
    }
    crate::http::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .tls_certs_only(Vec::<reqwest::Certificate>::new())
        .build()
}

/// The export thread's handle: flush and shut down.
pub struct Exporter {
    shared: Arc<Shared>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Exporter {
    /// Starts the export thread sending through `transport`, with spans of
    /// `service_name`; returns its handle and the sink the tracing layer writes to.
    pub fn start<T: Transport>(
        transport: T,
        service_name: &str,
        dropped: Option<DropSink>,
    ) -> std::io::Result<(Exporter, SpanSink)> {
        let shared = Arc::new(Shared::default());
        let drops = Arc::new(Drops {
            sink: dropped,
            warned: Mutex::new(None),
        });
        let (thread_shared, thread_drops) = (shared.clone(), drops.clone());
        let resource = otlp::resource(service_name);
        let worker = std::thread::Builder::new()
            .name("steward-otlp".into())
            .spawn(move || run(transport, &resource, &thread_shared, &thread_drops))?;
        let sink = SpanSink {
            shared: shared.clone(),
            drops,
        };
        Ok((
            Exporter {
                shared,
                worker: Some(worker),
            },
            sink,
        ))
    }

    /// Asks the worker for something and waits (bounded) until it is done.
    fn control(&self, ask: impl FnOnce(&mut State, SyncSender<()>), timeout: Duration) -> bool {
        let (done_tx, done_rx) = sync_channel(1);
        {
            let mut state = self.shared.lock();
            if state.closed {
                return false;
            }
            ask(&mut state, done_tx);
        }
        self.shared.wake.notify_one();
        done_rx.recv_timeout(timeout).is_ok()
    }

    /// Sends what is queued; `false` when that did not finish within `timeout`.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.control(|s, done| s.flushes.push(done), timeout)
    }

    /// Sends what is queued and stops the thread; `false` when that did not finish
    /// within `timeout` (the thread is then left to end on its own).
    pub fn shutdown(mut self, timeout: Duration) -> bool {
        let done = self.control(|s, done| s.shutdown = Some(done), timeout);
        if done && let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        done
    }
}

/// The export thread: sends the buffered spans when a batch is full, when [`DELAY`] has
/// passed since its first span, on a flush, and at shutdown.
fn run<T: Transport>(mut transport: T, resource: &otlp::Resource, shared: &Shared, drops: &Drops) {
    let mut send = |batch: Vec<SpanRecord>| {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let body = otlp::encode(resource, &batch);
        if let Err(e) = transport.send(body) {
            drops.record(n, &format!("the OTLP endpoint failed: {e}"));
        }
    };
    loop {
        let mut state = shared.lock();
        // Sleep until there is something to do.
        loop {
            if state.shutdown.is_some() || !state.flushes.is_empty() || state.spans.len() >= BATCH {
                break;
            }
            match state.first_at {
                None => state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner()),
                Some(first) => {
                    let left = (first + DELAY).saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    state = shared
                        .wake
                        .wait_timeout(state, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        let batch: Vec<SpanRecord> = if state.spans.len() <= BATCH {
            // The whole buffer is the batch: handed over, not copied span by span.
            let batch = std::mem::take(&mut state.spans);
            state.spans.reserve(batch.len());
            batch
        } else {
            state.spans.drain(..BATCH).collect()
        };
        state.first_at = (!state.spans.is_empty()).then(Instant::now);
        let flushes = if state.spans.is_empty() {
            std::mem::take(&mut state.flushes)
        } else {
            Vec::new()
        };
        let shutdown = if state.spans.is_empty() {
            state.shutdown.take()
        } else {
            None
        };
        drop(state);
        send(batch);
        for done in flushes {
            let _ = done.send(());
        }
        if let Some(done) = shutdown {
            // A span can close just after the run that made it: its last handle may be
            // dropped on another thread (sqlx's worker holds the current span with each
            // statement it runs). Such spans are still taken while they keep coming,
            // for at most LATE_WINDOW.
            let until = Instant::now() + LATE_WINDOW;
            let mut late = Vec::new();
            while Instant::now() < until {
                std::thread::sleep(LATE_QUIET);
                let mut state = shared.lock();
                if state.spans.is_empty() {
                    break;
                }
                late.append(&mut state.spans);
            }
            {
                let mut state = shared.lock();
                late.append(&mut state.spans);
                state.closed = true;
            }
            while !late.is_empty() {
                let rest = late.split_off(late.len().min(BATCH));
                send(std::mem::replace(&mut late, rest));
            }
            let _ = done.send(());
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A transport whose endpoint is down, or that counts the spans it got.
    #[derive(Clone, Default)]
    struct Fake {
        fail: bool,
        got: Arc<AtomicU64>,
    }

    impl Transport for Fake {
        fn send(&mut self, body: Vec<u8>) -> Result<(), String> {
            use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
            use prost::Message as _;
            if self.fail {
                return Err("connection refused".into());
            }
            let request = ExportTraceServiceRequest::decode(body.as_slice()).map_err(|e| e.to_string())?;
            let n: usize = request.resource_spans[0]
                .scope_spans
                .iter()
                .map(|s| s.spans.len())
                .sum();
            self.got.fetch_add(n as u64, Ordering::SeqCst);
            Ok(())
        }
    }

    fn span() -> SpanRecord {
        SpanRecord::new("s", None, true)
    }

    #[test]
    fn spans_are_sent_on_flush_and_failures_counted() {
        let ok = Fake::default();
        let (exporter, sink) = Exporter::start(ok.clone(), "svc", None).unwrap();
        for _ in 0..3 {
            sink.send(span());
        }
        assert!(exporter.flush(Duration::from_secs(10)));
        assert_eq!(ok.got.load(Ordering::SeqCst), 3);
        assert!(exporter.shutdown(Duration::from_secs(5)));

        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        let drop_sink: DropSink = Arc::new(move |n| {
            counter.fetch_add(n, Ordering::SeqCst);
        });
        let down = Fake {
            fail: true,
            ..Fake::default()
        };
        let (exporter, sink) = Exporter::start(down, "svc", Some(drop_sink)).unwrap();
        for _ in 0..5 {
            sink.send(span());
        }
        assert!(exporter.shutdown(Duration::from_secs(5)));
        assert_eq!(dropped.load(Ordering::SeqCst), 5);
        // After shutdown spans are ignored, not queued forever.
        sink.send(span());
    }

    #[test]
    fn more_than_a_batch_is_sent_whole_on_flush_and_a_full_buffer_drops_and_counts() {
        let ok = Fake::default();
        let (exporter, sink) = Exporter::start(ok.clone(), "svc", None).unwrap();
        for _ in 0..(BATCH * 2 + 100) {
            sink.send(span());
        }
        assert!(exporter.flush(Duration::from_secs(10)));
        assert_eq!(ok.got.load(Ordering::SeqCst), (BATCH * 2 + 100) as u64);
        assert!(exporter.shutdown(Duration::from_secs(5)));

        // A transport that blocks until released: the buffer fills, and what does not
        // fit is dropped and counted.
        struct Stuck(Arc<std::sync::Barrier>);
        impl Transport for Stuck {
            fn send(&mut self, _body: Vec<u8>) -> Result<(), String> {
                self.0.wait();
                Ok(())
            }
        }
        let release = Arc::new(std::sync::Barrier::new(2));
        let dropped = Arc::new(AtomicU64::new(0));
        let counter = dropped.clone();
        let drop_sink: DropSink = Arc::new(move |n| {
            counter.fetch_add(n, Ordering::SeqCst);
        });
        let (exporter, sink) = Exporter::start(Stuck(release.clone()), "svc", Some(drop_sink)).unwrap();
        // The first full batch goes to the stuck transport; then the buffer fills.
        for _ in 0..BATCH {
            sink.send(span());
        }
        while !exporter.shared.lock().spans.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        for _ in 0..(QUEUE + 10) {
            sink.send(span());
        }
        assert_eq!(dropped.load(Ordering::SeqCst), 10);
        release.wait();
        // The rest goes out in batches, each released in turn.
        let releaser = std::thread::spawn(move || {
            for _ in 0..(QUEUE / BATCH) {
                release.wait();
            }
        });
        assert!(exporter.shutdown(Duration::from_secs(10)));
        releaser.join().unwrap();
    }

    #[test]
    fn a_header_that_is_not_http_is_refused_by_name() {
        let err = HttpTransport::new(
            "http://127.0.0.1:1/v1/traces".into(),
            &[("x-key".into(), "a\nb".into())],
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("'x-key'"), "{err}");
    }
}
