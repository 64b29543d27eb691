//! The egress proxy of one sandboxed script run: HTTP (absolute-form requests) and
//! HTTPS (CONNECT tunnels, never decrypted) to the hosts the agent's
//! `skills.scripts.egress.allow` lists, nothing else. It listens on a Unix socket that
//! only that sandbox can reach (bind-mounted; the sandbox has no other route out), and
//! checks every target after DNS resolution as `http_fetch` does: private, loopback and
//! link-local addresses are refused unless `STEWARD_HTTP_ALLOW` opens them. Each
//! request is recorded (method, host, path without its query, status, bytes, why it
//! was refused), and the run's requests and bytes are capped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::EgressPolicy;

/// Longest request head read.
const MAX_HEAD: usize = 16 * 1024;
/// A request head must arrive within this long.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Connecting to a target takes at most this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where scripts may connect, and how much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRules {
    /// Host names (`api.example.com`) and suffix patterns (`*.example.com`, which also
    /// matches `example.com`), lower case; ports 80 and 443 unless the entry names its
    /// own (`api.example.com:8443`).
    pub allow: Vec<String>,
    /// A skill's own narrower list (its `egress.yaml`): a host must match both.
    pub within: Option<Vec<String>>,
    /// Requests per script run.
    pub max_requests: u32,
    /// Bytes both ways per script run; a request that starts past it is refused.
    pub max_bytes: u64,
}

impl EgressRules {
    /// Why `host` may not be reached, or `None` when it may.
    pub fn refusal(&self, host: &str, port: u16) -> Option<String> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let listed = |patterns: &[String]| {
            patterns.iter().any(|entry| {
                // `host:port` names its port; a bare host means the web's two.
                let (pattern, port_ok) = match entry.rsplit_once(':') {
                    Some((p, n)) if n.chars().all(|c| c.is_ascii_digit()) => (p, n.parse() == Ok(port)),
                    _ => (entry.as_str(), port == 80 || port == 443),
                };
                port_ok
                    && match pattern.strip_prefix("*.") {
                        Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
                        None => pattern == host,
                    }
            })
        };
        if !listed(&self.allow) {
            return Some(format!(
                "{host}:{port} is not in this agent's skills.scripts.egress.allow"
            ));
        }
        match &self.within {
            Some(narrow) if !listed(narrow) => {
                Some(format!("{host}:{port} is not in the skill's egress.yaml"))
            }
            _ => None,
        }
    }

    /// Whether `host` may be reached on `port`.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.refusal(host, port).is_none()
    }
}

/// One request through the proxy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetRecord {
    /// `CONNECT` for an HTTPS tunnel, else the HTTP method.
    pub method: String,
    pub host: String,
    pub port: u16,
    /// The path without its query (`None` for a tunnel: its requests are encrypted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The target's status (200 for an opened tunnel); `None` when refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub ms: u64,
    /// Why the proxy refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Order of arrival (records are kept as requests end; listed as they began).
    #[serde(skip)]
    pub seq: u32,
}

#[derive(Debug, Default)]
struct Tally {
    records: Vec<NetRecord>,
    /// Connections seen (numbering them).
    arrived: u32,
    requests: u32,
    bytes: u64,
}

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    socket: PathBuf,
    tally: Arc<Mutex<Tally>>,
    stop: CancellationToken,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Proxy {
    /// Listens on `socket` (a fresh path in a folder only steward reads).
    pub fn start(socket: &Path, rules: EgressRules, internal: EgressPolicy) -> std::io::Result<Proxy> {
        let _ = std::fs::remove_file(socket);
        let listener = tokio::net::UnixListener::bind(socket)?;
        // The sandbox's user is mapped to another uid: it must be able to connect (the
        // folder holding the socket is steward's alone).
        std::fs::set_permissions(
            socket,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o666),
        )?;
        let tally: Arc<Mutex<Tally>> = Arc::default();
        let stop = CancellationToken::new();
        let shared = Arc::new((rules, internal));
        let (t, s) = (tally.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let conn = tokio::select! {
                    c = listener.accept() => c,
                    () = s.cancelled() => return,
                };
                let Ok((stream, _)) = conn else { continue };
                let (shared, tally, stop) = (shared.clone(), t.clone(), s.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        () = serve(stream, &shared.0, &shared.1, &tally) => {}
                        () = stop.cancelled() => {}
                    }
                });
            }
        });
        Ok(Proxy {
            socket: socket.to_path_buf(),
            tally,
            stop,
        })
    }

    /// The socket the sandbox connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Every request that ended so far, in the order they began.
    pub fn records(&self) -> Vec<NetRecord> {
        let mut records = self
            .tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .records
            .clone();
        records.sort_by_key(|r| r.seq);
        records
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
        return Ok(Head {
            method: method.into(),
            host: host.trim_matches(['[', ']']).to_string(),
            port,
            upstream: None,
            path: None,
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
    let mut upstream = format!("{method} {origin} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line
            .split(':')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if matches!(
            name.as_str(),
            "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive"
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
    })
}

/// A refusal the script reads: the status line and body say why.
async fn refuse(stream: &mut tokio::net::UnixStream, why: &str) {
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

/// The first address of `host` the policy allows; the reason when none is.
async fn resolve(host: &str, port: u16, internal: &EgressPolicy) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let mut last = format!("{host} has no address");
    for addr in addrs {
        match internal.check_addr(host, addr.ip()) {
            Ok(()) => return Ok(addr),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

async fn serve(
    mut stream: tokio::net::UnixStream,
    rules: &EgressRules,
    internal: &EgressPolicy,
    tally: &Mutex<Tally>,
) {
    let started = Instant::now();
    let seq = {
        let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
        t.arrived += 1;
        t.arrived
    };
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
    let head = match parse_head(&String::from_utf8_lossy(&buf[..end])) {
        Ok(h) => h,
        Err(why) => {
            refuse(&mut stream, &why).await;
            return;
        }
    };
    let mut record = NetRecord {
        method: head.method.clone(),
        host: head.host.clone(),
        port: head.port,
        path: head.path.clone(),
        status: None,
        bytes_sent: 0,
        bytes_received: 0,
        ms: 0,
        refused: None,
        seq,
    };
    let admitted = {
        let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = rules.refusal(&head.host, head.port) {
            Err(why)
        } else if t.requests >= rules.max_requests {
            Err(format!(
                "the run's cap of {} requests is reached",
                rules.max_requests
            ))
        } else if t.bytes >= rules.max_bytes {
            Err(format!("the run's cap of {} bytes is reached", rules.max_bytes))
        } else {
            t.requests += 1;
            Ok(())
        }
    };
    let target = match admitted {
        Ok(()) => resolve(&head.host, head.port, internal).await,
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
            finish(tally, record, started);
            return;
        }
    };
    let rest = &buf[end..];
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
            if !rest.is_empty() && upstream.write_all(rest).await.is_err() {
                return;
            }
            record.bytes_sent = rest.len() as u64;
        }
        Some(request) => {
            if upstream.write_all(request).await.is_err() || upstream.write_all(rest).await.is_err() {
                return;
            }
            record.bytes_sent = (request.len() + rest.len()) as u64;
            // The status line, for the record; passed on as is.
            let mut first = [0u8; 1024];
            let n = upstream.read(&mut first).await.unwrap_or(0);
            let line = String::from_utf8_lossy(&first[..n]);
            record.status = line.split(' ').nth(1).and_then(|s| s.parse().ok());
            if stream.write_all(&first[..n]).await.is_err() {
                return;
            }
            record.bytes_received = n as u64;
        }
    }
    if let Ok((sent, received)) = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await {
        record.bytes_sent += sent;
        record.bytes_received += received;
    }
    finish(tally, record, started);
}

fn finish(tally: &Mutex<Tally>, mut record: NetRecord, started: Instant) {
    record.ms = started.elapsed().as_millis() as u64;
    tracing::info!(
        method = %record.method, host = %record.host, path = ?record.path, status = ?record.status,
        bytes_sent = record.bytes_sent, bytes_received = record.bytes_received, refused = ?record.refused,
        "skill script request"
    );
    let mut t = tally.lock().unwrap_or_else(|e| e.into_inner());
    t.bytes += record.bytes_sent + record.bytes_received;
    t.records.push(record);
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
            within: None,
            max_requests: 10,
            max_bytes: 1,
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
        assert!(parse_head("GET https://x.example/ HTTP/1.1\r\n\r\n").is_err());
    }
}
