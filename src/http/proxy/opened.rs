//! HTTPS to a host that gets a secret: the proxy ends the program's TLS with a
//! certificate from the process's CA, reads each request (HTTP/1.1), puts secret values
//! in place of their placeholders, and forwards it to the real host through a client
//! that checks the host's certificate and address as usual. Responses go back with
//! placeholders written over any echoed value. Each request is a record of its own.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Either, Full};

use super::hub::Interceptor;
use super::run::{NetRecord, Run};
use crate::http::secrets::Scrub;

/// Longest an opened connection waits for a request head.
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// What goes back to the program.
type Answer = http::Response<Either<Full<Bytes>, Relayed>>;

/// Headers about one connection, not the request (RFC 9110 §7.6.1), and `Host`, which
/// the forwarding client sets from the target.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Serves the opened connection `stream` of a CONNECT to `host:port`.
pub(super) async fn serve(
    stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    host: String,
    port: u16,
    run: Arc<Run>,
    tls: Arc<Interceptor>,
) {
    let started = Instant::now();
    let accepted = match tls.server_config(&host) {
        Ok(config) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            match tokio::time::timeout(super::HEAD_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(s)) => Ok(s),
                Ok(Err(e)) => Err(format!(
                    "the TLS handshake with the program failed ({e}); it must trust steward's CA (the sandbox sets SSL_CERT_FILE and REQUESTS_CA_BUNDLE)"
                )),
                Err(_) => Err("the program did not start TLS in time".into()),
            }
        }
        Err(e) => Err(e),
    };
    let tls_stream = match accepted {
        Ok(s) => s,
        Err(why) => {
            let mut record = run.record("CONNECT", &host, port, None);
            record.refused = Some(why);
            run.finish(record, started);
            return;
        }
    };
    let service = hyper::service::service_fn(move |request| {
        let (run, tls, host) = (run.clone(), tls.clone(), host.clone());
        async move { Ok::<_, Infallible>(forward(request, &host, port, run, &tls).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        // A connection that sends no request head in time is closed (a server's proxy
        // lives long: idle connections must not pile up).
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(IDLE_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(tls_stream), service)
        .await;
}

/// A refusal the program reads: 403 (or `status`) and why.
fn refusal(status: u16, why: &str) -> Answer {
    let mut answer = http::Response::new(Either::Left(Full::new(Bytes::from(format!(
        "steward egress proxy refused this request: {why}\n"
    )))));
    *answer.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::FORBIDDEN);
    answer.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

fn strip(headers: &mut http::HeaderMap) {
    // Headers the `Connection` header names are hop-by-hop too.
    let named: Vec<String> = headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .collect();
    for name in HOP_BY_HOP.iter().copied().chain(named.iter().map(String::as_str)) {
        headers.remove(name);
    }
}

/// Approximate size of a header block on the wire.
fn header_bytes(headers: &http::HeaderMap) -> u64 {
    headers
        .iter()
        .map(|(n, v)| (n.as_str().len() + v.len() + 4) as u64)
        .sum()
}

async fn forward(
    request: http::Request<hyper::body::Incoming>,
    host: &str,
    port: u16,
    run: Arc<Run>,
    tls: &Interceptor,
) -> Answer {
    let started = Instant::now();
    let mut record = run.record(
        request.method().as_str(),
        host,
        port,
        Some(request.uri().path().to_string()),
    );
    let refuse = |mut record: NetRecord, status: u16, why: String| {
        let answer = refusal(status, &why);
        record.refused = Some(why);
        run.finish(record, started);
        answer
    };
    if let Err(why) = run.admit(host, port) {
        return refuse(record, 403, why);
    }
    let (parts, body) = request.into_parts();
    let mut headers = parts.headers;
    strip(&mut headers);
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    match run.secrets.inject(host, port, &target, &mut headers) {
        Ok(used) => record.secrets = used,
        Err(why) => return refuse(record, 403, why),
    }
    // An echoed value (of this request's secret, or one the host kept) is written over
    // only in a body the proxy reads whole: plain, and not in pieces of a range.
    headers.insert(
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("identity"),
    );
    if !record.secrets.is_empty() {
        headers.remove(http::header::RANGE);
        headers.remove(http::header::IF_RANGE);
    }
    // The body streams on, each piece counted against the run's cap as it moves
    // (other requests move at the same time); past the cap, it fails.
    let sent_bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let body = reqwest::Body::wrap(Outgoing {
        inner: body,
        sent: sent_bytes.clone(),
        run: run.clone(),
    });
    let head_bytes = header_bytes(&headers);
    let authority = match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    };
    let sent = tls
        .client
        .request(parts.method, format!("https://{authority}{target}"))
        .headers(headers)
        .body(body)
        .send()
        .await;
    let body_sent = sent_bytes.load(std::sync::atomic::Ordering::Relaxed);
    record.bytes_sent = head_bytes + body_sent;
    record.charged = body_sent;
    let response = match sent {
        Ok(r) => r,
        Err(e) => {
            let why = match crate::http::egress::refusal(&e) {
                Some(refused) => refused.to_string(),
                // Without its URL: the query is never recorded.
                None => format!(
                    "cannot reach {host}: {}",
                    crate::http::error_chain(&e.without_url())
                ),
            };
            return refuse(record, 502, why);
        }
    };
    record.status = Some(response.status().as_u16());
    let mut scrub = run.secrets.scrubber();
    let response: http::Response<reqwest::Body> = response.into();
    let (mut parts, body) = response.into_parts();
    strip(&mut parts.headers);
    if !scrub.is_noop() {
        for value in parts.headers.values_mut() {
            if let Ok(v) = http::HeaderValue::from_bytes(&scrub.header(value.as_bytes())) {
                *value = v;
            }
        }
        // The length changes where a value is written over.
        parts.headers.remove(http::header::CONTENT_LENGTH);
    }
    let encoding = parts
        .headers
        .get(http::header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .filter(|v| !v.is_empty() && v != "identity");
    if let Some(encoding) = encoding {
        // Asked for identity and sent compressed anyway: an echoed value would pass
        // unread, so the body is decoded, scrubbed and sent plain (or refused).
        let left = buffer_limit(&run);
        let bytes = match http_body_util::Limited::new(body, left).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return refuse(record, 502, format!("the answer did not arrive whole: {e}")),
        };
        record.bytes_received = header_bytes(&parts.headers) + bytes.len() as u64;
        // Counted now: requests running beside this one took from the same cap.
        if !run.charge(bytes.len() as u64) {
            let why = capped(&run);
            return refuse(record, 502, why);
        }
        record.charged += bytes.len() as u64;
        let plain = match decode(&encoding, &bytes, left) {
            Ok(plain) => plain,
            Err(why) => return refuse(record, 502, why),
        };
        let mut out = scrub.push(&plain);
        out.extend(scrub.finish());
        parts.headers.remove(http::header::CONTENT_ENCODING);
        parts.headers.remove(http::header::CONTENT_LENGTH);
        run.finish(record, started);
        return http::Response::from_parts(parts, Either::Left(Full::new(Bytes::from(out))));
    }
    record.bytes_received = header_bytes(&parts.headers);
    http::Response::from_parts(
        parts,
        Either::Right(Relayed {
            inner: body,
            scrub,
            done: false,
            record: Some((record, started, run)),
        }),
    )
}

/// Most of a body the proxy holds at once: the run's bytes left, and never more than
/// [`MAX_BUFFER`] (a server's proxy has no byte cap).
fn buffer_limit(run: &Run) -> usize {
    usize::try_from(run.bytes_left())
        .unwrap_or(usize::MAX)
        .min(MAX_BUFFER)
}

/// Most bytes of one compressed answer, or of it decoded, held in memory.
const MAX_BUFFER: usize = 32 * 1024 * 1024;

/// Why a body stopped at the run's byte cap.
fn capped(run: &Run) -> String {
    format!("closed at the run's cap of {} bytes", run.rules.max_bytes)
}

/// A request body on its way to the host, each piece counted against the run's cap
/// ([`Run::charge`]) as it goes; it fails at the piece that would pass it.
struct Outgoing {
    inner: hyper::body::Incoming,
    /// Bytes of the body sent (and charged).
    sent: Arc<std::sync::atomic::AtomicU64>,
    run: Arc<Run>,
}

impl Body for Outgoing {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let n = data.len() as u64;
                    if !this.run.charge(n) {
                        return Poll::Ready(Some(Err(capped(&this.run).into())));
                    }
                    this.sent.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            other => other.map(|_| None),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

/// `bytes` decoded from `encoding` (gzip, deflate), at most `limit` bytes of it (a
/// small bomb does not become a large answer); other encodings are refused.
fn decode(encoding: &str, bytes: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    let cap = limit as u64 + 1;
    let read = match encoding {
        "gzip" | "x-gzip" => flate2::read::MultiGzDecoder::new(bytes)
            .take(cap)
            .read_to_end(&mut out),
        "deflate" => flate2::read::ZlibDecoder::new(bytes)
            .take(cap)
            .read_to_end(&mut out),
        other => {
            return Err(format!(
                "the answer is {other}-encoded though identity was asked, and steward cannot check it for the secret's value"
            ));
        }
    };
    read.map_err(|e| format!("the answer's {encoding} encoding is broken: {e}"))?;
    if out.len() > limit {
        return Err(format!("the answer decodes to more than {limit} bytes"));
    }
    Ok(out)
}

/// A response body on its way back: counted against the run's cap as it moves (it
/// fails at the piece that would pass it, which ends the program's connection),
/// scrubbed, and recorded when it ends (or is dropped).
pub(super) struct Relayed {
    inner: reqwest::Body,
    scrub: Scrub,
    done: bool,
    record: Option<(NetRecord, Instant, Arc<Run>)>,
}

impl Drop for Relayed {
    fn drop(&mut self) {
        if let Some((record, started, run)) = self.record.take() {
            run.finish(record, started);
        }
    }
}

impl Body for Relayed {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        // Trailers are not passed on (HTTP/1.1 programs rarely ask).
                        continue;
                    };
                    if let Some((record, _, run)) = &mut this.record {
                        let n = data.len() as u64;
                        if !run.charge(n) {
                            let why = capped(run);
                            record.refused = Some(why.clone());
                            this.done = true;
                            if let Some((record, started, run)) = this.record.take() {
                                run.finish(record, started);
                            }
                            return Poll::Ready(Some(Err(why.into())));
                        }
                        record.bytes_received += n;
                        record.charged += n;
                    }
                    if this.scrub.is_noop() {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    let out = this.scrub.push(&data);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                }
                Poll::Ready(None) => {
                    this.done = true;
                    let rest = this.scrub.finish();
                    if let Some((record, started, run)) = this.record.take() {
                        run.finish(record, started);
                    }
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
                    }
                }
            }
        }
    }
}
