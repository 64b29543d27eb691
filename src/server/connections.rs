//! Accepting HTTP/1.1 connections, with two timers where hyper has one.
//!
//! hyper's `header_read_timeout` starts whenever it waits for a request head, idle time
//! included, so one guard against clients that trickle headers also closes every
//! keep-alive connection that sits idle that long. A proxy keeping its upstream
//! connections longer (nginx, ingress-nginx and AWS load balancers keep them 60 s) then
//! sends a request on a connection just as steward closes it, and answers that request
//! 502. Go's net/http and Envoy keep the two apart, as hyper's maintainers mean to
//! (hyperium/hyper#3828); so does [`Timed`], a socket wrapper under hyper:
//! - **head**: a request head must arrive whole within [`ConnectionTimeouts::head`] of its
//!   first byte (of the connection's opening, for its first request);
//! - **idle**: after a response's last byte, a connection may wait
//!   [`ConnectionTimeouts::idle`] for the next request's first byte;
//! - **busy**: while a request is answered (from its head to its response's last byte)
//!   neither applies. The handler has its own limit (`REQUEST_TIMEOUT`);
//! - **write**: a write that makes no progress for [`ConnectionTimeouts::write`] fails (a
//!   client that stops reading a response would otherwise hold its connection, and a
//!   graceful stop, for as long as it likes; hyper alone has no such timer).
//!
//! A connection whose timer runs out has its read or write fail with `TimedOut`, and
//! hyper closes it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use futures_util::task::AtomicWaker;
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A connection's two timers (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionTimeouts {
    /// A request head must arrive whole within this long of its first byte, or of the
    /// connection's opening for its first request.
    pub head: Duration,
    /// An idle keep-alive connection is closed after this long without a new request.
    pub idle: Duration,
    /// A response write that makes no progress (the client stopped reading) fails after
    /// this long, closing the connection.
    pub write: Duration,
    /// Most connections served at once; one more is closed as soon as it is accepted.
    /// Each holds a file descriptor for as long as the timers above allow, and
    /// steward needs its own for the database, providers and scripts.
    pub max_connections: usize,
}

/// [`ConnectionTimeouts::max_connections`] for `serve`: far above what Slack, Jira and
/// the inspector open, and below the descriptors [`raise_open_files`] asks for.
pub const MAX_CONNECTIONS: usize = 1024;

/// Raises this process's soft limit on open files to its hard limit, at most 65,536
/// (systemd and many shells start services at 1,024, which [`MAX_CONNECTIONS`] alone
/// would take); the limit after it.
pub fn raise_open_files() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit for the call to fill in.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 0;
    }
    let wanted = limit.rlim_max.min(65_536);
    if wanted > limit.rlim_cur {
        let raised = libc::rlimit {
            rlim_cur: wanted,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit, within the hard limit.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return wanted;
        }
    }
    limit.rlim_cur
}

/// Accepts HTTP/1.1 connections until `stop`, then lets open connections finish within
/// `grace`, each under `timeouts` (axum's own `serve` sets no timer, so a client
/// trickling headers could hold a connection open indefinitely).
pub async fn serve_connections(
    listener: tokio::net::TcpListener,
    router: Router,
    stop: CancellationToken,
    timeouts: ConnectionTimeouts,
    grace: Duration,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).http1_only();
    // hyper's timer is for its graceful shutdown. Its header timeout (a 30 s default
    // once a timer is set, idle time included) is turned off explicitly: [`Timed`]
    // keeps the head and idle times apart.
    builder.http1().timer(TokioTimer::new()).header_read_timeout(None);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let connections = TaskTracker::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(timeouts.max_connections));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Debug, not warn: a flood of connections must not become a flood of logs.
            tracing::debug!(%peer, max = timeouts.max_connections, "too many connections open; closed a new one");
            drop(stream);
            continue;
        };
        let in_flight = Arc::new(InFlight::default());
        let service = WithPeer {
            inner: router.clone(),
            peer,
            in_flight: in_flight.clone(),
        };
        let io = TokioIo::new(Timed::new(stream, timeouts, in_flight));
        let conn = builder.serve_connection(io, service).into_owned();
        let conn = graceful.watch(conn);
        connections.spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection closed with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    connections.close();
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after the grace period; closing them");
    }
}

/// The requests of one connection being answered, how many have begun, and its
/// reader's waker: the reader is woken when the last one ends, so the idle timer starts
/// even when no byte comes.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    begun: AtomicUsize,
    reader: AtomicWaker,
}

impl InFlight {
    fn begin(self: &Arc<Self>) -> Answering {
        self.begun.fetch_add(1, Ordering::AcqRel);
        self.count.fetch_add(1, Ordering::AcqRel);
        Answering(self.clone())
    }

    fn busy(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }
}

/// Held while a request is answered: from its head to its response body's end (or its
/// drop, when the connection closes first).
struct Answering(Arc<InFlight>);

impl Drop for Answering {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.reader.wake();
        }
    }
}

/// What a connection's reader is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The rest of a request head (or its first byte, on a new connection).
    Head,
    /// Nothing: a request is being answered.
    Busy,
    /// The first byte of the next request.
    Idle,
}

/// `limit` from now, at most a year (a longer `--keep-alive` would overflow the clock).
fn after(limit: Duration) -> Instant {
    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
    Instant::now() + limit.min(YEAR)
}

/// A socket whose reads fail with `TimedOut` once its phase's time runs out.
struct Timed<S> {
    io: S,
    in_flight: Arc<InFlight>,
    timeouts: ConnectionTimeouts,
    phase: Phase,
    /// Requests begun when the reader last looked: a request can begin and end between
    /// two reads (hyper answers and writes in one turn), unseen as busy.
    seen: usize,
    deadline: Pin<Box<Sleep>>,
    /// Set while a write waits for the client to read; cleared by any progress.
    write_stall: Option<Pin<Box<Sleep>>>,
}

impl<S> Timed<S> {
    fn new(io: S, timeouts: ConnectionTimeouts, in_flight: Arc<InFlight>) -> Timed<S> {
        Timed {
            io,
            in_flight,
            timeouts,
            phase: Phase::Head,
            seen: 0,
            deadline: Box::pin(tokio::time::sleep_until(after(timeouts.head))),
            write_stall: None,
        }
    }

    /// `result` of a write (or flush), failed with `TimedOut` once writes have waited
    /// [`ConnectionTimeouts::write`] without progress.
    fn stalled<T>(&mut self, cx: &mut Context<'_>, result: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if result.is_ready() {
            self.write_stall = None;
            return result;
        }
        let limit = self.timeouts.write;
        let stall = self
            .write_stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(after(limit))));
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading the response",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn enter(&mut self, phase: Phase, limit: Duration) {
        self.phase = phase;
        self.deadline.as_mut().reset(after(limit));
    }

    fn timed_out(&self) -> io::Error {
        let what = match self.phase {
            Phase::Idle => "idle keep-alive connection closed",
            _ => "request head not received in time",
        };
        io::Error::new(io::ErrorKind::TimedOut, what)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Timed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let begun = this.in_flight.begun.load(Ordering::Acquire);
        if this.in_flight.busy() {
            this.phase = Phase::Busy;
            this.seen = begun;
            this.in_flight.reader.register(cx.waker());
            // The answer may have ended between the check and the registration.
            if this.in_flight.busy() {
                return Pin::new(&mut this.io).poll_read(cx, buf);
            }
        }
        if this.phase == Phase::Busy || begun != this.seen {
            this.seen = begun;
            this.enter(Phase::Idle, this.timeouts.idle);
        }
        // Bytes that keep coming do not extend a head's time.
        if this.deadline.is_elapsed() {
            return Poll::Ready(Err(this.timed_out()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if this.phase == Phase::Idle && buf.filled().len() > before {
                    this.enter(Phase::Head, this.timeouts.head);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(this.timed_out())),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Timed<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write(cx, buf);
        self.stalled(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.stalled(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_flush(cx);
        self.stalled(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The router with the connection's client address in every request's extensions, as
/// axum's `ConnectInfo` (sign-in throttling is per address), and each request counted
/// as answered until its response's body ends.
#[derive(Clone)]
struct WithPeer {
    inner: Router,
    peer: std::net::SocketAddr,
    in_flight: Arc<InFlight>,
}

type Answer =
    Pin<Box<dyn Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send>>;

/// hyper's own service trait rather than tower's: hyper calls it as soon as a request
/// head is parsed, so the request counts as answered before the reader looks again
/// (through tower's, the call would wait for the answer's first poll).
impl hyper::service::Service<axum::http::Request<hyper::body::Incoming>> for WithPeer {
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = Answer;

    fn call(&self, mut request: axum::http::Request<hyper::body::Incoming>) -> Self::Future {
        type Request = axum::http::Request<hyper::body::Incoming>;
        let answering = self.in_flight.begin();
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(self.peer));
        let mut router = self.inner.clone();
        Box::pin(async move {
            std::future::poll_fn(|cx| tower_service::Service::<Request>::poll_ready(&mut router, cx)).await?;
            let response = tower_service::Service::<Request>::call(&mut router, request).await?;
            Ok(response.map(|body| {
                Body::new(Counted {
                    body,
                    _answering: answering,
                })
            }))
        })
    }
}

/// A response body that holds its request's [`Answering`] until it is dropped.
struct Counted {
    body: Body,
    _answering: Answering,
}

impl HttpBody for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
