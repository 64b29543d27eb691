//! The egress proxy of one sandboxed run (a skill script, an MCP stdio server): HTTP
//! (absolute-form requests) and HTTPS (CONNECT) to the hosts its policy lists, nothing
//! else. It listens on a Unix socket that only that sandbox can reach (bind-mounted; the
//! sandbox has no other route out), and checks every target after DNS resolution as
//! `http_fetch` does: private, loopback and link-local addresses are refused unless
//! `STEWARD_HTTP_ALLOW` opens them. A CONNECT to a host without secrets is a tunnel,
//! never decrypted; one to a host that gets a secret is opened (`opened`) so the proxy
//! can put the secret's value in place of the program's placeholder. Each request is
//! recorded (method, host, path without its query, status, bytes, secret names, why it
//! was refused), and the run's requests and bytes are capped.

mod hub;
mod opened;
mod run;
mod status;
mod tunnel;

pub use hub::EgressHub;
pub use run::{EgressRules, NetRecord};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::secrets::RunSecrets;
use run::Run;

/// Longest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// A request head (and an opened connection's TLS handshake) must arrive within this
/// long.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connecting to a target takes at most this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen for the sandbox: {0}")]
    Io(#[from] std::io::Error),
    /// A secret's variable is unset.
    #[error("{0}")]
    Secrets(String),
    /// The CA or the forwarding client could not be made.
    #[error("cannot open HTTPS for secrets: {0}")]
    Tls(String),
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    /// The Unix socket it listens on (empty for a TCP proxy).
    socket: PathBuf,
    /// The loopback address it listens on, for a host program ([`Proxy::start_tcp`]).
    addr: Option<std::net::SocketAddr>,
    /// The trust bundle the sandbox mounts (when the run has secrets).
    bundle: Option<PathBuf>,
    /// The program's secret variables, each with its placeholder.
    env: Vec<(String, String)>,
    run: Arc<Run>,
    stop: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        if self.addr.is_none() {
            let _ = std::fs::remove_file(&self.socket);
        }
        if let Some(bundle) = &self.bundle {
            let _ = std::fs::remove_file(bundle);
        }
    }
}

impl Proxy {
    /// Listens on `socket` (a fresh path in a folder only steward reads) for a run under
    /// `rules`; secret values are read from `hub` now, and each gets a new placeholder.
    /// Its requests are traced as spans under `parent` (the tool call's), roots without.
    pub fn start(
        socket: &Path,
        rules: EgressRules,
        hub: Arc<EgressHub>,
        parent: Option<tracing::Id>,
    ) -> Result<Proxy, ProxyError> {
        let secrets = RunSecrets::new(&rules.secrets, &|name| hub.var(name)).map_err(ProxyError::Secrets)?;
        let bundle = match secrets.is_empty() {
            true => None,
            false => {
                let tls = hub.interceptor().map_err(ProxyError::Tls)?;
                let path = socket.with_extension("pem");
                std::fs::write(&path, tls.bundle.as_bytes())?;
                std::fs::set_permissions(
                    &path,
                    <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644),
                )?;
                Some(path)
            }
        };
        let _ = std::fs::remove_file(socket);
        let listener = tokio::net::UnixListener::bind(socket)?;
        // The sandbox's user is mapped to another uid: it must be able to connect (the
        // folder holding the socket is steward's alone).
        std::fs::set_permissions(
            socket,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o666),
        )?;
        let env = secrets.env();
        let run = Arc::new(Run::new(rules, secrets, hub, parent));
        let stop = CancellationToken::new();
        listen(Listener::Unix(listener), run.clone(), stop.clone());
        Ok(Proxy {
            socket: socket.to_path_buf(),
            addr: None,
            bundle,
            env,
            run,
            stop,
        })
    }

    /// A proxy on a loopback TCP port, for a program steward runs on the host (the
    /// skill requirements' installer): the same rules and checks, no secrets.
    pub fn start_tcp(rules: EgressRules, hub: Arc<EgressHub>) -> Result<Proxy, ProxyError> {
        if !rules.secrets.is_empty() {
            return Err(ProxyError::Secrets(
                "a host program's proxy takes no secrets".into(),
            ));
        }
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(std_listener)?;
        let run = Arc::new(Run::new(rules, RunSecrets::default(), hub, None));
        let stop = CancellationToken::new();
        listen(Listener::Tcp(listener), run.clone(), stop.clone());
        Ok(Proxy {
            socket: PathBuf::new(),
            addr: Some(addr),
            bundle: None,
            env: Vec::new(),
            run,
            stop,
        })
    }

    /// The loopback address of a TCP proxy.
    pub fn addr(&self) -> Option<std::net::SocketAddr> {
        self.addr
    }

    /// The socket the sandbox connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The trust bundle (PEM: the host's roots and the process's CA) programs must use
    /// when the run has secrets.
    pub fn trust_bundle(&self) -> Option<&Path> {
        self.bundle.as_deref()
    }

    /// The program's secret variables: each name with its placeholder.
    pub fn secret_env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Every request that ended so far, in the order they began.
    pub fn records(&self) -> Vec<NetRecord> {
        self.run.records()
    }

    /// The requests that ended since the last take, in the order they began (a
    /// long-lived server's proxy: each tool call takes its own).
    pub fn take_records(&self) -> Vec<NetRecord> {
        self.run.take_records()
    }
}

/// A parsed request head.
struct Head {
    method: String,
    host: String,
    port: u16,
    /// The head to send upstream (origin-form, hop-by-hop headers dropped); `None` for
    /// CONNECT.
    upstream: Option<Vec<u8>>,
    path: Option<String>,
    /// The request body's length (`Content-Length`; none is 0): exactly this much more
    /// goes upstream, so nothing can follow the request on its connection.
    body: u64,
}

/// Refuses a head that servers could read otherwise than the proxy does: lines must end
/// in CRLF (a bare LF ends a line for nginx and Go, which would see headers, or a
/// second request, the proxy never checked), no line may be folded, and header names
/// are tokens and values hold no control character but tab.
fn well_formed(head: &[u8]) -> Result<(), String> {
    let bad = || {
        Err("a malformed request head (every line must end in CRLF, with no folded lines or control characters)".to_string())
    };
    for (i, b) in head.iter().enumerate() {
        let ok = match b {
            b'\n' => i > 0 && head[i - 1] == b'\r',
            b'\r' => head.get(i + 1) == Some(&b'\n'),
            b'\t' => true,
            0..=31 | 127 => false,
            _ => true,
        };
        if !ok {
            return bad();
        }
    }
    let text = String::from_utf8_lossy(head);
    for line in text.split("\r\n").skip(1).filter(|l| !l.is_empty()) {
        let Some((name, _)) = line.split_once(':') else {
            return bad();
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return bad();
        }
    }
    Ok(())
}

fn parse_head(head: &str) -> Result<Head, String> {
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("not an HTTP request".into());
    };
    if method == "CONNECT" {
        let (host, port) = target.rsplit_once(':').ok_or("CONNECT needs host:port")?;
        let port = port.parse().map_err(|_| "CONNECT needs host:port")?;
        let host = host.trim_matches(['[', ']']);
        // A name of letters, digits, `-` and `.`, or an IP address: nothing that could
        // end a host inside a URL (`evil.com?.example.com`).
        let plain_name = !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        if !plain_name && host.parse::<std::net::IpAddr>().is_err() {
            return Err("CONNECT needs a host name or an IP address".into());
        }
        return Ok(Head {
            method: method.into(),
            host: host.to_ascii_lowercase(),
            port,
            upstream: None,
            path: None,
            body: 0,
        });
    }
    let url =
        url::Url::parse(target).map_err(|_| "a proxy request needs an absolute http:// URL".to_string())?;
    if url.scheme() != "http" {
        return Err("only http:// URLs go through the proxy as requests; https uses CONNECT".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs with a user name or password are refused".into());
    }
    let host = url
        .host_str()
        .ok_or("the URL has no host")?
        .trim_matches(['[', ']'])
        .to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let origin = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let authority = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let mut upstream = format!("{method} {origin} {version}\r\nHost: {authority}\r\n");
    let mut body = None;
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let name = name.trim().to_ascii_lowercase();
        match name.as_str() {
            "transfer-encoding" => {
                return Err(
                    "a request body needs a Content-Length through the proxy (chunked bodies are refused)"
                        .into(),
                );
            }
            "content-length" => {
                let length = value
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| "the Content-Length is not a number".to_string())?;
                if body.is_some_and(|b| b != length) {
                    return Err("the request has two different Content-Lengths".into());
                }
                body = Some(length);
            }
            _ => {}
        }
        // `Host` comes from the URL that was checked, never from the program.
        if matches!(
            name.as_str(),
            "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive" | "host"
        ) {
            continue;
        }
        upstream.push_str(line);
        upstream.push_str("\r\n");
    }
    upstream.push_str("Connection: close\r\n\r\n");
    Ok(Head {
        method: method.into(),
        host,
        port,
        upstream: Some(upstream.into_bytes()),
        path: Some(url.path().to_string()),
        body: body.unwrap_or(0),
    })
}

/// What a proxy serves: a sandbox's Unix socket or a host program's TCP connection.
trait Conn: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static> Conn for T {}

/// Where a proxy listens.
enum Listener {
    Unix(tokio::net::UnixListener),
    Tcp(tokio::net::TcpListener),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Box<dyn Conn>> {
        Ok(match self {
            Listener::Unix(l) => Box::new(l.accept().await?.0),
            Listener::Tcp(l) => Box::new(l.accept().await?.0),
        })
    }
}

/// Most connections one proxy serves at once. Each holds one of steward's file
/// descriptors, and a sandboxed program could otherwise open thousands that send
/// nothing, leaving steward none for its own HTTP, database and provider calls; a
/// program's real fetches stay far below it.
pub const MAX_CONNECTIONS: usize = 64;

/// Connections past [`MAX_CONNECTIONS`] that wait for a place (a package installer's
/// burst of parallel downloads); one more than these is closed at once.
pub const MAX_WAITING: usize = 64;

/// Accepts connections and serves each, at most [`MAX_CONNECTIONS`] at once and
/// [`MAX_WAITING`] more waiting their turn (one more is closed at once), until `stop`.
fn listen(listener: Listener, run: Arc<Run>, stop: CancellationToken) {
    // Places for every connection held, served or waiting (taken at accept, kept for
    // the connection's life), and the slots of those served.
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS + MAX_WAITING));
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let conn = tokio::select! {
                c = listener.accept() => c,
                () = stop.cancelled() => return,
            };
            let Ok(stream) = conn else {
                // Out of descriptors, say: not a busy loop.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            let Ok(place) = places.clone().try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let (run, stop, slots) = (run.clone(), stop.clone(), slots.clone());
            tokio::spawn(async move {
                let _place = place;
                let slot = tokio::select! {
                    slot = slots.acquire_owned() => slot,
                    () = stop.cancelled() => return,
                };
                let Ok(_slot) = slot else {
                    return;
                };
                tokio::select! {
                    () = serve(stream, run) => {}
                    () = stop.cancelled() => {}
                }
            });
        }
    });
}

/// A refusal the script reads: the status line and body say why.
async fn refuse(stream: &mut impl Conn, why: &str) {
    let phrase: String = why
        .chars()
        .filter(|c| *c != '\r' && *c != '\n')
        .take(200)
        .collect();
    let body = format!("steward egress proxy refused this request: {why}\n");
    let answer = format!(
        "HTTP/1.1 403 {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
}

async fn serve(mut stream: impl Conn, run: Arc<Run>) {
    let started = Instant::now();
    let mut buf = Vec::with_capacity(1024);
    let reading = async {
        loop {
            let mut chunk = [0u8; 2048];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                return Some(Ok(i + 4));
            }
            if buf.len() > MAX_HEAD {
                return Some(Err("the request head is too large"));
            }
        }
    };
    // A connection that never finishes its head holds nothing for long.
    let end = match tokio::time::timeout(HEAD_TIMEOUT, reading).await {
        Ok(Some(Ok(end))) => end,
        Ok(Some(Err(why))) => {
            refuse(&mut stream, why).await;
            return;
        }
        Ok(None) => return,
        Err(_) => {
            refuse(&mut stream, "the request head did not arrive in time").await;
            return;
        }
    };
    let head = match well_formed(&buf[..end]).and_then(|()| parse_head(&String::from_utf8_lossy(&buf[..end])))
    {
        Ok(h) => h,
        Err(why) => {
            refuse(&mut stream, &why).await;
            return;
        }
    };
    let mut record = run.record(&head.method, &head.host, head.port, head.path.clone());
    let rest = &buf[end..];
    if head.upstream.is_none() && run.secrets.intercepts(&head.host, head.port) {
        // A host that gets a secret: opened here, each request inside counted alone.
        let checked = match run.rules.refusal(&head.host, head.port) {
            Some(why) => Err(why),
            None if !rest.is_empty() => Err("data was sent before the tunnel opened".into()),
            None => match run.hub.resolve(&head.host, head.port).await {
                Ok(_) => run.hub.interceptor(),
                Err(why) => Err(why),
            },
        };
        match checked {
            Ok(tls) => {
                if stream
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .is_ok()
                {
                    opened::serve(stream, head.host, head.port, run, tls).await;
                }
            }
            Err(why) => {
                refuse(&mut stream, &why).await;
                record.refused = Some(why);
                run.finish(record, started);
            }
        }
        return;
    }
    let admitted = match &head.upstream {
        // One request a connection: bytes past its body would reach the host as a
        // second request the proxy never checked.
        Some(_) if rest.len() as u64 > head.body => {
            Err("data after the request's body (the proxy takes one request a connection)".into())
        }
        Some(_) => run
            .secrets
            .check_plain(&buf, &head.host)
            .and_then(|()| run.admit(&head.host, head.port)),
        None => run.admit(&head.host, head.port),
    };
    let target = match admitted {
        Ok(()) => run.hub.resolve(&head.host, head.port).await,
        Err(why) => Err(why),
    };
    let upstream = match target {
        Ok(addr) => tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| format!("connecting to {} timed out", head.host))
            .and_then(|r| r.map_err(|e| format!("cannot connect to {}: {e}", head.host))),
        Err(why) => Err(why),
    };
    let mut upstream = match upstream {
        Ok(u) => u,
        Err(why) => {
            refuse(&mut stream, &why).await;
            record.refused = Some(why);
            run.finish(record, started);
            return;
        }
    };
    match &head.upstream {
        None => {
            // A tunnel: opened, then bytes both ways, never read.
            if stream
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
            record.status = Some(200);
        }
        Some(request) => {
            if upstream.write_all(request).await.is_err() || upstream.write_all(rest).await.is_err() {
                return;
            }
            record.bytes_sent = (request.len() + rest.len()) as u64;
        }
    }
    // A tunnel's first bytes (those sent with the CONNECT among them) are checked
    // before they go on; a plain request's head went above, and the rest of its body
    // follows, nothing more.
    let up = match head.upstream {
        None => Up::Tunnel {
            host: &head.host,
            port: head.port,
            rest,
        },
        Some(_) => Up::Body(head.body - rest.len() as u64),
    };
    let relayed = relay(stream, upstream, &run, up).await;
    record.bytes_sent += relayed.sent;
    record.bytes_received += relayed.received;
    record.charged = relayed.charged;
    if let Some(status) = relayed.status {
        record.status = Some(status);
    }
    match relayed.ended {
        Ended::Capped => {
            record.refused = Some(format!(
                "closed at the run's cap of {} bytes",
                run.rules.max_bytes
            ));
        }
        Ended::Refused(why) => record.refused = Some(why),
        Ended::Done => {}
    }
    run.finish(record, started);
}

/// How one direction of [`relay`] ended.
enum Ended {
    /// Its sender finished (or the connection failed).
    Done,
    /// The run's byte cap stopped it.
    Capped,
    /// A tunnel's first bytes were refused ([`tunnel::judge`]).
    Refused(String),
}

/// Reads a tunnel's first bytes, starting with `rest` (read with the `CONNECT`), until
/// [`tunnel::judge`] decides: the bytes to pass on, or why the tunnel is closed. It waits
/// as long as the program sends nothing (the host may speak first), and at most
/// [`HEAD_TIMEOUT`] for the rest of a start it has begun.
async fn first_bytes(
    from: &mut (impl tokio::io::AsyncRead + Unpin),
    host: &str,
    port: u16,
    rest: &[u8],
) -> Result<Vec<u8>, String> {
    let mut buf = rest.to_vec();
    loop {
        match tunnel::judge(&buf, host, port) {
            tunnel::First::Pass => return Ok(buf),
            tunnel::First::Refuse(why) => return Err(why),
            tunnel::First::More => {}
        }
        let mut chunk = [0u8; 4096];
        let read = match buf.is_empty() {
            true => from.read(&mut chunk).await,
            false => tokio::time::timeout(HEAD_TIMEOUT, from.read(&mut chunk))
                .await
                .map_err(|_| "the tunnel's first bytes did not arrive in time".to_string())?,
        };
        match read {
            Ok(0) | Err(_) if buf.is_empty() => return Ok(buf),
            Ok(0) | Err(_) => return Err("the tunnel closed before its first bytes could be checked".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// What [`relay`] sends the host from the program.
enum Up<'a> {
    /// A tunnel's bytes, its first (`rest` among them) checked before any go on.
    Tunnel {
        host: &'a str,
        port: u16,
        rest: &'a [u8],
    },
    /// This much more of a plain request's body; the host's status line is read from
    /// the first bytes back.
    Body(u64),
}

/// What [`relay`] moved.
struct Relayed {
    sent: u64,
    received: u64,
    /// Counted against the run's cap as it moved.
    charged: u64,
    /// Why it stopped early: the cap, or a tunnel's refused start.
    ended: Ended,
    /// A plain request's response status.
    status: Option<u16>,
}

/// Copies bytes both ways until both sides are done (one side's end is passed on as a
/// shutdown of the other's write side), counting every chunk against the run's byte
/// cap as it moves: a tunnel, or many at once, stops at the cap rather than after it.
/// A tunnel's first bytes are checked before any go on (the host's come back
/// meanwhile); a plain request's body goes on to its length and no further.
async fn relay(client: impl Conn, upstream: tokio::net::TcpStream, run: &Run, up: Up<'_>) -> Relayed {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let (sent, received, charged) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let plain = matches!(up, Up::Body(_));
    // The status as last read (0: none yet); both directions run in this task.
    let status = std::sync::atomic::AtomicU16::new(0);
    let up = async {
        match up {
            Up::Tunnel { host, port, rest } => {
                let start = match first_bytes(&mut client_read, host, port, rest).await {
                    Ok(start) => start,
                    Err(why) => return Ended::Refused(why),
                };
                // A TLS client's later hellos (after a HelloRetryRequest) are checked
                // as its first was, each before it goes on.
                let mut hellos = tunnel::LaterHellos::new(host);
                let tls = matches!(start.first(), Some(0x14..=0x18)) && start.get(1) == Some(&0x03);
                let mut chunk = start;
                loop {
                    if tls && let Err(why) = hellos.feed(&chunk) {
                        return Ended::Refused(why);
                    }
                    if let Some(ended) = forward(&chunk, &mut upstream_write, run, &sent, &charged).await {
                        return ended;
                    }
                    if !tls || hellos.done() {
                        break;
                    }
                    chunk = vec![0u8; 16 * 1024];
                    match client_read.read(&mut chunk).await {
                        Ok(0) | Err(_) => {
                            let _ = upstream_write.shutdown().await;
                            return Ended::Done;
                        }
                        Ok(n) => chunk.truncate(n),
                    }
                }
                pump(&mut client_read, &mut upstream_write, run, &sent, &charged, None).await
            }
            Up::Body(0) => Ended::Done,
            Up::Body(left) => {
                pump(
                    &mut client_read,
                    &mut upstream_write,
                    run,
                    &sent,
                    &charged,
                    Some(left),
                )
                .await
            }
        }
    };
    let down = async {
        if plain {
            // The final status, for the record (past any `100 Continue`); the bytes
            // pass on as they are.
            let mut watch = status::StatusWatch::default();
            let mut buf = vec![0u8; 16 * 1024];
            while !watch.done() {
                let n: usize = upstream_read.read(&mut buf).await.unwrap_or_default();
                watch.feed(&buf[..n]);
                status.store(watch.status().unwrap_or(0), Relaxed);
                if let Some(ended) = forward(&buf[..n], &mut client_write, run, &received, &charged).await {
                    return ended;
                }
                if n == 0 {
                    let _ = client_write.shutdown().await;
                    return Ended::Done;
                }
            }
        }
        pump(
            &mut upstream_read,
            &mut client_write,
            run,
            &received,
            &charged,
            None,
        )
        .await
    };
    tokio::pin!(up, down);
    let (mut up_done, mut down_done, mut ended) = (false, false, Ended::Done);
    while matches!(ended, Ended::Done) && !(up_done && down_done) {
        tokio::select! {
            end = &mut up, if !up_done => { up_done = true; ended = end; }
            end = &mut down, if !down_done => { down_done = true; ended = end; }
        }
    }
    Relayed {
        sent: sent.load(Relaxed),
        received: received.load(Relaxed),
        charged: charged.load(Relaxed),
        ended,
        status: Some(status.load(Relaxed)).filter(|&s| s != 0),
    }
}

/// Passes one chunk on, counted against the run's cap; `None` while the way stays open.
async fn forward(
    chunk: &[u8],
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
    run: &Run,
    moved: &std::sync::atomic::AtomicU64,
    charged: &std::sync::atomic::AtomicU64,
) -> Option<Ended> {
    use std::sync::atomic::Ordering::Relaxed;
    if chunk.is_empty() {
        return None;
    }
    if !run.charge(chunk.len() as u64) {
        return Some(Ended::Capped);
    }
    charged.fetch_add(chunk.len() as u64, Relaxed);
    if to.write_all(chunk).await.is_err() {
        let _ = to.shutdown().await;
        return Some(Ended::Done);
    }
    moved.fetch_add(chunk.len() as u64, Relaxed);
    None
}

/// One direction of [`relay`], until its sender finishes, `limit` bytes have gone (the
/// write side then stays open: the host is still answering), or the run's cap stops it.
async fn pump(
    from: &mut (impl tokio::io::AsyncRead + Unpin),
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
    run: &Run,
    moved: &std::sync::atomic::AtomicU64,
    charged: &std::sync::atomic::AtomicU64,
    mut limit: Option<u64>,
) -> Ended {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let room = limit.map_or(buf.len(), |l| {
            buf.len().min(usize::try_from(l).unwrap_or(usize::MAX))
        });
        let n = match from.read(&mut buf[..room]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(ended) = forward(&buf[..n], to, run, moved, charged).await {
            return ended;
        }
        if let Some(left) = limit.as_mut() {
            *left -= n as u64;
            if *left == 0 {
                return Ended::Done;
            }
        }
    }
    let _ = to.shutdown().await;
    Ended::Done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_exactly_or_by_domain_suffix() {
        let rules = EgressRules {
            allow: vec![
                "api.example.com".into(),
                "*.github.com".into(),
                "wiki.corp.example:8443".into(),
            ],
            listed_in: "this agent's skills.scripts.egress.allow",
            within: None,
            max_requests: 10,
            max_bytes: 1,
            secrets: Vec::new(),
        };
        assert!(rules.allows("API.example.com.", 443) && rules.allows("api.example.com", 80));
        assert!(rules.allows("github.com", 443) && rules.allows("raw.github.com", 443));
        assert!(
            !rules.allows("example.com", 443)
                && !rules.allows("evilgithub.com", 443)
                && !rules.allows("api.example.com.evil", 443)
        );
        // Other ports only where the entry names them.
        assert!(!rules.allows("api.example.com", 22) && !rules.allows("wiki.corp.example", 443));
        assert!(rules.allows("wiki.corp.example", 8443));
        assert_eq!(
            rules.refusal("api.example.com", 6379).unwrap(),
            "api.example.com:6379 is not in this agent's skills.scripts.egress.allow"
        );
        // A skill narrows, never widens.
        let narrowed = EgressRules {
            listed_in: "this agent's skills.scripts.egress.allow",
            within: Some(vec!["raw.github.com".into(), "other.example.org".into()]),
            ..rules
        };
        assert!(narrowed.allows("raw.github.com", 443));
        assert_eq!(
            narrowed.refusal("api.example.com", 443).unwrap(),
            "api.example.com:443 is not in the skill's egress.yaml"
        );
        assert!(
            narrowed
                .refusal("other.example.org", 443)
                .unwrap()
                .contains("this agent's")
        );
    }

    /// Connections that send nothing hold at most [`MAX_CONNECTIONS`] places and
    /// [`MAX_WAITING`] more wait in turn: one past both is closed at once, and a waiting
    /// one is served, first come first served, when a place frees.
    #[tokio::test]
    async fn idle_connections_are_capped_and_a_burst_waits_its_turn() {
        use tokio::io::AsyncWriteExt as _;
        let rules = EgressRules {
            allow: vec!["api.example.com".into()],
            listed_in: "this agent's skills.scripts.egress.allow",
            within: None,
            max_requests: 10,
            max_bytes: 1,
            secrets: Vec::new(),
        };
        let hub = Arc::new(EgressHub::new(crate::http::EgressPolicy::parse("").unwrap()));
        let proxy = Proxy::start_tcp(rules, hub).unwrap();
        let addr = proxy.addr().unwrap();
        let connect = || tokio::net::TcpStream::connect(addr);
        let mut served = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            served.push(connect().await.unwrap());
        }
        // The first to wait has sent its request; it is not answered while it waits.
        let mut first = connect().await.unwrap();
        first
            .write_all(b"CONNECT unlisted.example:443 HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut waiting = Vec::new();
        for _ in 1..MAX_WAITING {
            waiting.push(connect().await.unwrap());
        }
        let mut byte = [0u8; 1];
        let quiet = tokio::time::timeout(Duration::from_millis(300), first.read(&mut byte)).await;
        assert!(quiet.is_err(), "a waiting connection is not served yet");
        // One past both is closed at once.
        let mut extra = connect().await.unwrap();
        let closed = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut byte)).await;
        assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
        // A place frees: the first waiting connection is served.
        drop(served.pop());
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), first.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "served once a place freed");
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 403 unlisted.example:443 is not in this agent's"),
            "{answer}"
        );
    }

    /// A tunnel stops at the run's byte cap as the bytes move, not after: a host
    /// sending 4 MB through a 64 KB cap delivers at most the cap, and the record says why
    /// it closed.
    #[tokio::test]
    async fn a_tunnel_stops_at_the_runs_byte_cap() {
        use tokio::io::AsyncWriteExt as _;
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        tokio::spawn(async move {
            if let Ok((mut s, _)) = upstream.accept().await {
                let chunk = vec![b'x'; 64 * 1024];
                for _ in 0..64 {
                    if s.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
            }
        });
        let cap = 64 * 1024;
        let rules = EgressRules {
            allow: vec![format!("127.0.0.1:{port}")],
            listed_in: "this agent's skills.scripts.egress.allow",
            within: None,
            max_requests: 10,
            max_bytes: cap,
            secrets: Vec::new(),
        };
        let hub = Arc::new(EgressHub::new(
            crate::http::EgressPolicy::parse("127.0.0.1").unwrap(),
        ));
        let proxy = Proxy::start_tcp(rules, hub).unwrap();
        let mut client = tokio::net::TcpStream::connect(proxy.addr().unwrap())
            .await
            .unwrap();
        client
            .write_all(
                format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(10), client.read_to_end(&mut got))
            .await
            .unwrap()
            .unwrap();
        let head = b"HTTP/1.1 200 Connection established\r\n\r\n";
        assert!(got.starts_with(head));
        let body = (got.len() - head.len()) as u64;
        assert!(body > 0 && body <= cap, "{body} bytes through a {cap}-byte cap");
        let mut records = Vec::new();
        for _ in 0..100 {
            records = proxy.records();
            if !records.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(
            records[0].refused.as_deref(),
            Some(format!("closed at the run's cap of {cap} bytes").as_str())
        );
    }

    /// A tunnel carries TLS that names its own host (or none) and other protocols, and
    /// closes before anything goes on when the program names another host in its TLS
    /// hello or sends plain HTTP (whose `Host` nothing would check).
    #[tokio::test]
    async fn a_tunnel_carries_only_its_own_hosts_tls_and_no_plain_http() {
        use tokio::io::AsyncWriteExt as _;
        use tunnel::tests::client_hello;
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        // What each connection delivered to the host, in the order they ended.
        let (delivered, mut arrived) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                let delivered = delivered.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    let _ = s.read_to_end(&mut got).await;
                    let _ = delivered.send(got);
                });
            }
        });
        let rules = EgressRules {
            allow: vec![format!("localhost:{port}"), format!("127.0.0.1:{port}")],
            listed_in: "this agent's skills.scripts.egress.allow",
            within: None,
            max_requests: 10,
            max_bytes: 1 << 20,
            secrets: Vec::new(),
        };
        let hub = Arc::new(EgressHub::new(
            crate::http::EgressPolicy::parse("127.0.0.1").unwrap(),
        ));
        let proxy = Proxy::start_tcp(rules, hub).unwrap();
        let through = |target: String, send: Vec<u8>| {
            let addr = proxy.addr().unwrap();
            async move {
                let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
                client
                    .write_all(format!("CONNECT {target} HTTP/1.1\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
                let mut head = [0u8; 39];
                client.read_exact(&mut head).await.unwrap();
                assert_eq!(&head, b"HTTP/1.1 200 Connection established\r\n\r\n");
                client.write_all(&send).await.unwrap();
                let _ = client.shutdown().await;
                let mut rest = Vec::new();
                let read = client.read_to_end(&mut rest);
                let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
            }
        };
        async fn next(arrived: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) -> Vec<u8> {
            let got = tokio::time::timeout(Duration::from_secs(10), arrived.recv());
            got.await.unwrap().unwrap()
        }
        let own = client_hello("localhost");
        through(format!("localhost:{port}"), own.clone()).await;
        assert_eq!(
            next(&mut arrived).await,
            own,
            "its own host's hello goes on whole"
        );
        through(format!("127.0.0.1:{port}"), client_hello("evil.example")).await;
        assert!(
            next(&mut arrived).await.is_empty(),
            "another host's hello never reaches it"
        );
        let fronted = b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_vec();
        through(format!("localhost:{port}"), fronted).await;
        assert!(next(&mut arrived).await.is_empty(), "plain HTTP never reaches it");
        // A retried hello (after a HelloRetryRequest) naming another host goes no further.
        let evil = client_hello("evil.example");
        let mut retried = own.clone();
        retried.extend_from_slice(&[0x14, 0x03, 0x03, 0x00, 0x01, 0x01]);
        retried.extend_from_slice(&evil);
        through(format!("localhost:{port}"), retried).await;
        let got = next(&mut arrived).await;
        assert!(
            !got.windows(evil.len()).any(|w| w == evil.as_slice()),
            "the second hello never reaches it"
        );
        let mut records = Vec::new();
        for _ in 0..100 {
            records = proxy.records();
            if records.len() == 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let refused: Vec<Option<&str>> = records.iter().map(|r| r.refused.as_deref()).collect();
        assert_eq!(
            refused,
            [
                None,
                Some(
                    "the TLS server name sent through the tunnel is not 127.0.0.1, the host it was opened to"
                ),
                Some("plain HTTP goes through the proxy as a request (an http:// URL), not through a tunnel"),
                Some(
                    "the TLS server name sent through the tunnel is not localhost, the host it was opened to"
                ),
            ]
        );
        assert_eq!(records[0].bytes_sent, own.len() as u64);
    }

    /// A head servers could read otherwise than the proxy is refused: a bare LF (nginx
    /// and Go end a line there, so `X: a\n\nGET ...` is a second request to them),
    /// a bare CR, a folded line, a name that is not a token, a control character.
    #[test]
    fn heads_servers_could_read_otherwise_are_refused() {
        let ok = b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX-Tab: a\tb\r\n\r\n";
        assert!(well_formed(ok).is_ok());
        for head in [
            &b"GET http://a.example/ HTTP/1.1\r\nX: a\n\nGET /x?d=1 HTTP/1.1\nHost: b.example\n\r\n\r\n"[..],
            b"GET http://a.example/ HTTP/1.1\r\nX: a\rY: b\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX Y: a\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\n: a\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nX: a\x00b\r\n\r\n",
            b"GET http://a.example/ HTTP/1.1\r\nno colon\r\n\r\n",
        ] {
            assert!(well_formed(head).is_err(), "{}", String::from_utf8_lossy(head));
        }
        // A body has one length; chunked bodies are refused.
        let parse = |h: &str| parse_head(h).map(|h| h.body);
        assert_eq!(
            parse("POST http://a.example/ HTTP/1.1\r\nContent-Length: 12\r\n\r\n"),
            Ok(12)
        );
        assert_eq!(parse("GET http://a.example/ HTTP/1.1\r\n\r\n"), Ok(0));
        assert!(parse("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(
            parse("POST http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
                .is_err()
        );
        assert!(parse("POST http://a.example/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n").is_err());
    }

    /// A plain request's body reaches the host whole however it arrives, and nothing
    /// after it: a request pipelined behind it is refused before anything goes on.
    #[tokio::test]
    async fn a_plain_request_carries_its_body_and_nothing_after_it() {
        use tokio::io::AsyncWriteExt as _;
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = upstream.local_addr().unwrap().port();
        let (delivered, mut arrived) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = upstream.accept().await {
                let delivered = delivered.clone();
                tokio::spawn(async move {
                    // Reads the head and a 100 KB body, answers, and reports what came.
                    let mut got = Vec::new();
                    let mut chunk = [0u8; 8192];
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
                    while got.len() < 100_000 {
                        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
                            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&chunk[..n]),
                            _ => break,
                        }
                    }
                    // An interim answer first (as to `Expect: 100-continue`), in a
                    // write of its own: the record keeps the final status.
                    let _ = s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = s
                        .write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                        .await;
                    let _ = delivered.send(got);
                });
            }
        });
        let rules = EgressRules {
            allow: vec![format!("127.0.0.1:{port}")],
            listed_in: "this agent's skills.scripts.egress.allow",
            within: None,
            max_requests: 10,
            max_bytes: 1 << 20,
            secrets: Vec::new(),
        };
        let hub = Arc::new(EgressHub::new(
            crate::http::EgressPolicy::parse("127.0.0.1").unwrap(),
        ));
        let proxy = Proxy::start_tcp(rules, hub).unwrap();
        let body = vec![b'b'; 100_000];
        let mut client = tokio::net::TcpStream::connect(proxy.addr().unwrap())
            .await
            .unwrap();
        let head = format!(
            "POST http://127.0.0.1:{port}/up HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        client.write_all(head.as_bytes()).await.unwrap();
        for piece in body.chunks(7_000) {
            client.write_all(piece).await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "answered");
        assert!(
            answer.starts_with(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created"),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        let got = tokio::time::timeout(Duration::from_secs(5), arrived.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(got.ends_with(&body), "the whole body arrived");
        // A second request sent behind a bodiless first: refused, nothing goes on.
        let mut client = tokio::net::TcpStream::connect(proxy.addr().unwrap())
            .await
            .unwrap();
        let two = format!(
            "GET http://127.0.0.1:{port}/a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nHost: other.example\r\n\r\n"
        );
        client.write_all(two.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with("HTTP/1.1 403 data after the request's body"),
            "{answer}"
        );
        let records = proxy.records();
        assert_eq!(records.len(), 2, "{records:?}");
        assert_eq!(records[0].status, Some(201));
        assert!(records[1].refused.is_some());
        assert!(
            tokio::time::timeout(Duration::from_millis(300), arrived.recv())
                .await
                .is_err(),
            "the host saw no second connection"
        );
    }

    #[test]
    fn requests_become_origin_form_without_hop_by_hop_headers() {
        let head = parse_head("GET http://api.example.com:8080/v1/x?q=secret HTTP/1.1\r\nHost: api.example.com:8080\r\nProxy-Authorization: Basic x\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert_eq!(
            (head.host.as_str(), head.port, head.path.as_deref()),
            ("api.example.com", 8080, Some("/v1/x"))
        );
        let up = String::from_utf8(head.upstream.unwrap()).unwrap();
        assert!(
            up.starts_with("GET /v1/x?q=secret HTTP/1.1\r\nHost: api.example.com:8080\r\n"),
            "{up}"
        );
        assert!(
            !up.contains("Proxy-Authorization") && up.ends_with("Connection: close\r\n\r\n"),
            "{up}"
        );
        let connect = parse_head("CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n").unwrap();
        assert_eq!(
            (connect.method.as_str(), connect.host.as_str(), connect.port),
            ("CONNECT", "pypi.org", 443)
        );
        assert!(parse_head("GET /relative HTTP/1.1\r\n\r\n").is_err());
        // The program's own Host never goes upstream (no fronting to another site).
        let fronted =
            parse_head("GET http://api.example.com/ HTTP/1.1\r\nHost: evil.example\r\n\r\n").unwrap();
        let up = String::from_utf8(fronted.upstream.unwrap()).unwrap();
        assert!(
            up.starts_with("GET / HTTP/1.1\r\nHost: api.example.com\r\n") && !up.contains("evil"),
            "{up}"
        );
        // A CONNECT host is a plain name or an address, nothing that ends a URL's host.
        assert!(parse_head("CONNECT evil.com?.example.com:443 HTTP/1.1\r\n\r\n").is_err());
        assert!(parse_head("CONNECT a/b.example.com:443 HTTP/1.1\r\n\r\n").is_err());
        assert_eq!(
            parse_head("CONNECT [::1]:443 HTTP/1.1\r\n\r\n").unwrap().host,
            "::1"
        );
        assert!(parse_head("GET https://x.example/ HTTP/1.1\r\n\r\n").is_err());
    }
}
