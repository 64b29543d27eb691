//! One proxy's run: the rules it enforces, the run's secrets, and the record and caps
//! of every request.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use super::hub::EgressHub;
use crate::http::secrets::{RunSecrets, SecretRule, host_listed};

/// Where a sandboxed program may connect, how much, and with which secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressRules {
    /// Host names (`api.example.com`) and suffix patterns (`*.example.com`, which also
    /// matches `example.com`), lower case; ports 80 and 443 unless the entry names its
    /// own (`api.example.com:8443`).
    pub allow: Vec<String>,
    /// Where `allow` comes from, for refusals (`this agent's
    /// skills.scripts.egress.allow`).
    pub listed_in: &'static str,
    /// A skill's own narrower list (its `egress.yaml`): a host must match both.
    pub within: Option<Vec<String>>,
    /// Requests per script run.
    pub max_requests: u32,
    /// Bytes both ways per script run; a request that starts past it is refused.
    pub max_bytes: u64,
    /// Secrets the program gets as placeholders, put in its requests by the proxy.
    pub secrets: Vec<SecretRule>,
}

impl EgressRules {
    /// Why `host` may not be reached, or `None` when it may.
    pub fn refusal(&self, host: &str, port: u16) -> Option<String> {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if !host_listed(&self.allow, &host, port) {
            return Some(format!("{host}:{port} is not in {}", self.listed_in));
        }
        match &self.within {
            Some(narrow) if !host_listed(narrow, &host, port) => {
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
    /// Why the proxy refused it, or why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The secrets the proxy put in it, by name (never values).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub secrets: Vec<String>,
    /// Order of arrival (records are kept as requests end; listed as they began).
    #[serde(skip)]
    pub seq: u32,
    /// The request's span while it is open (closed when the record is kept).
    #[serde(skip)]
    span: tracing::Span,
    /// Bytes of it already counted against the run's cap as they moved
    /// ([`Run::charge`]), so [`Run::finish`] does not count them again.
    #[serde(skip)]
    pub(super) charged: u64,
    /// Whether the host is one the rules list. One they do not is the program's own
    /// word, which can carry what a private run holds (`<secret>.attacker.example`):
    /// traces and logs name it [`UNLISTED`], and so does the run's record of a
    /// private run.
    #[serde(skip)]
    pub listed: bool,
}

/// How traces, logs and private runs' records name a host the rules do not list.
pub const UNLISTED: &str = "(a host not listed)";

impl NetRecord {
    /// A record of a request just arrived.
    pub(super) fn new(seq: u32, method: &str, host: &str, port: u16, path: Option<String>) -> NetRecord {
        NetRecord {
            span: tracing::Span::none(),
            method: method.to_string(),
            host: host.to_string(),
            port,
            path,
            status: None,
            bytes_sent: 0,
            bytes_received: 0,
            ms: 0,
            refused: None,
            secrets: Vec::new(),
            seq,
            charged: 0,
            listed: false,
        }
    }

    /// The host as traces and logs may name it.
    pub fn shown_host(&self) -> &str {
        if self.listed { &self.host } else { UNLISTED }
    }

    /// Why it was refused, as traces and logs may say it.
    pub fn shown_refusal(&self) -> Option<&str> {
        self.refused
            .as_deref()
            .map(|why| if self.listed { why } else { "not in the allow list" })
    }
}

/// Records kept waiting to be taken.
const MAX_KEPT: usize = 1000;

#[derive(Debug, Default)]
struct Tally {
    records: Vec<NetRecord>,
    /// Requests seen (numbering them).
    arrived: u32,
    requests: u32,
    bytes: u64,
}

/// A proxy's state, shared by its connections.
#[derive(Debug)]
pub(super) struct Run {
    pub rules: EgressRules,
    pub secrets: RunSecrets,
    pub hub: Arc<EgressHub>,
    /// The span requests are traced under (the tool call's); roots without one.
    parent: Option<tracing::Id>,
    tally: Mutex<Tally>,
}

impl Run {
    pub fn new(
        rules: EgressRules,
        secrets: RunSecrets,
        hub: Arc<EgressHub>,
        parent: Option<tracing::Id>,
    ) -> Run {
        Run {
            rules,
            secrets,
            hub,
            parent,
            tally: Mutex::default(),
        }
    }

    /// A record of a request just arrived, with its span open.
    pub fn record(&self, method: &str, host: &str, port: u16, path: Option<String>) -> NetRecord {
        let mut record = NetRecord::new(self.arrive(), method, host, port, path);
        record.listed = self.rules.allows(host, port);
        let host = record.shown_host();
        // No path on the span: a private run's paths are not kept.
        record.span = tracing::info_span!(
            parent: self.parent.clone(),
            "egress_request",
            otel.name = %format!("{method} {host}"),
            "http.request.method" = method,
            "server.address" = host,
            "server.port" = port,
            "http.response.status_code" = tracing::field::Empty,
            "steward.egress.secrets" = tracing::field::Empty,
            "steward.egress.refused" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
        );
        record
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next request's number.
    pub fn arrive(&self) -> u32 {
        let mut t = self.tally();
        t.arrived += 1;
        t.arrived
    }

    /// Counts a request to `host:port`, or says why it may not go.
    pub fn admit(&self, host: &str, port: u16) -> Result<(), String> {
        let mut t = self.tally();
        if let Some(why) = self.rules.refusal(host, port) {
            Err(why)
        } else if t.requests >= self.rules.max_requests {
            Err(format!(
                "the run's cap of {} requests is reached",
                self.rules.max_requests
            ))
        } else if t.bytes >= self.rules.max_bytes {
            Err(format!(
                "the run's cap of {} bytes is reached",
                self.rules.max_bytes
            ))
        } else {
            t.requests += 1;
            Ok(())
        }
    }

    /// Counts `n` bytes moving now against the run's cap; `false` (nothing counted)
    /// when they would pass it.
    pub fn charge(&self, n: u64) -> bool {
        let mut t = self.tally();
        if t.bytes + n > self.rules.max_bytes {
            return false;
        }
        t.bytes += n;
        true
    }

    /// Bytes the run may still move.
    pub fn bytes_left(&self) -> u64 {
        self.rules.max_bytes.saturating_sub(self.tally().bytes)
    }

    /// Keeps `record`, which took since `started`.
    pub fn finish(&self, mut record: NetRecord, started: Instant) {
        record.ms = started.elapsed().as_millis() as u64;
        let span = std::mem::replace(&mut record.span, tracing::Span::none());
        if let Some(status) = record.status {
            span.record("http.response.status_code", status);
        }
        if !record.secrets.is_empty() {
            span.record("steward.egress.secrets", record.secrets.join(",").as_str());
        }
        if let Some(why) = record.shown_refusal() {
            span.record("steward.egress.refused", why);
            span.record("error.type", "refused");
        }
        drop(span);
        // No path here either (the run's own event keeps it, redacted when the run is
        // private): a path can carry what a private run holds.
        tracing::info!(
            method = %record.method, host = %record.shown_host(), status = ?record.status,
            bytes_sent = record.bytes_sent, bytes_received = record.bytes_received,
            secrets = ?record.secrets, refused = ?record.shown_refusal(),
            "sandbox egress request"
        );
        let mut t = self.tally();
        t.bytes += (record.bytes_sent + record.bytes_received).saturating_sub(record.charged);
        // A server's proxy lives long and its records wait for a call to take them:
        // the oldest go first past the bound.
        if t.records.len() >= MAX_KEPT {
            t.records.remove(0);
        }
        t.records.push(record);
    }

    /// Every request that ended so far, in the order they began.
    pub fn records(&self) -> Vec<NetRecord> {
        let mut records = self.tally().records.clone();
        records.sort_by_key(|r| r.seq);
        records
    }

    /// The requests that ended since the last take, in the order they began.
    pub fn take_records(&self) -> Vec<NetRecord> {
        let mut records = std::mem::take(&mut self.tally().records);
        records.sort_by_key(|r| r.seq);
        records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host the rules do not list is the program's own word: traces, logs and a
    /// private run's record name it only as unlisted, and say why without it.
    #[test]
    fn unlisted_hosts_are_not_named() {
        let rules = EgressRules {
            allow: vec!["api.example.com".into()],
            listed_in: "this agent's skills.scripts.egress.allow",
            within: None,
            max_requests: 10,
            max_bytes: 1 << 20,
            secrets: Vec::new(),
        };
        let hub = Arc::new(EgressHub::new(crate::http::EgressPolicy::parse("").unwrap()));
        let run = Run::new(rules, RunSecrets::default(), hub, None);
        let listed = run.record("CONNECT", "api.example.com", 443, None);
        assert_eq!(listed.shown_host(), "api.example.com");
        let mut leak = run.record("CONNECT", "payroll-q3-cut-12pct.evil.example", 443, None);
        leak.refused = run.rules.refusal(&leak.host, 443);
        assert_eq!(leak.shown_host(), UNLISTED);
        assert_eq!(leak.shown_refusal(), Some("not in the allow list"));
        assert!(
            leak.refused.as_deref().is_some_and(|r| r.contains("payroll")),
            "the run itself is told"
        );
    }
}
