//! Classified provider errors, so callers can react to each kind.

use std::time::Duration;

/// What went wrong with a model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// 429: retry later.
    RateLimit,
    /// The conversation no longer fits the model's window: compact or give up.
    ContextLength,
    /// Missing, wrong or unauthorized key (401/403), or an exhausted quota.
    Auth,
    /// The request itself is wrong (400/404/422): retrying cannot help.
    BadRequest,
    /// 5xx or an overloaded server.
    Server,
    Timeout,
    Connection,
    /// The server answered 2xx with a body we could not understand.
    Decode,
    /// No provider or API key is configured for the model.
    NotConfigured,
}

impl ErrorKind {
    /// The kind as a label value (`rate_limit`, `context_length`, ...), as serialized.
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::RateLimit => "rate_limit",
            ErrorKind::ContextLength => "context_length",
            ErrorKind::Auth => "auth",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::Server => "server",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connection => "connection",
            ErrorKind::Decode => "decode",
            ErrorKind::NotConfigured => "not_configured",
        }
    }

    /// Whether retrying the same request may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimit | ErrorKind::Server | ErrorKind::Timeout | ErrorKind::Connection
        )
    }

    /// Whether another model (a fallback) may succeed where this one failed.
    pub fn allows_fallback(self) -> bool {
        self.is_retryable() || matches!(self, ErrorKind::Auth | ErrorKind::NotConfigured)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::RateLimit => "rate limit",
            ErrorKind::ContextLength => "context length exceeded",
            ErrorKind::Auth => "authentication",
            ErrorKind::BadRequest => "bad request",
            ErrorKind::Server => "server error",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connection => "connection error",
            ErrorKind::Decode => "unreadable response",
            ErrorKind::NotConfigured => "not configured",
        }
    }
}

/// A failed model call.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{provider} {}: {message}", kind.as_str())]
pub struct ProviderError {
    pub kind: ErrorKind,
    pub provider: &'static str,
    pub status: Option<u16>,
    pub message: String,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
    /// The model that failed, set by the chain (empty until then).
    pub model: String,
}

impl ProviderError {
    pub fn new(provider: &'static str, kind: ErrorKind, message: impl Into<String>) -> Self {
        ProviderError {
            kind,
            provider,
            status: None,
            message: message.into(),
            retry_after: None,
            model: String::new(),
        }
    }

    /// The provider asked us to slow down: a 429 rate limit, or an overloaded server
    /// (Anthropic's 529 `overloaded_error`, before or inside a stream). The limiter
    /// lowers the model's concurrency for these, and the run waits instead of failing.
    pub fn is_slow_down(&self) -> bool {
        self.kind == ErrorKind::RateLimit
            || self.status == Some(529)
            || self.message.contains("overloaded_error")
    }

    /// Maps a transport error from reqwest.
    pub fn from_reqwest(provider: &'static str, err: &reqwest::Error) -> Self {
        let kind = if err.is_timeout() {
            ErrorKind::Timeout
        } else if err.is_decode() {
            ErrorKind::Decode
        } else {
            ErrorKind::Connection
        };
        // reqwest's Display omits the cause chain, which holds the useful part.
        let mut message = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        ProviderError::new(provider, kind, message)
    }
}

/// Classifies a non-2xx answer from its status and the vendor's error code/message.
pub fn classify(status: u16, code: &str, message: &str) -> ErrorKind {
    let lower = message.to_ascii_lowercase();
    let context = code == "context_length_exceeded"
        || lower.contains("context length")
        || lower.contains("context window")
        || lower.contains("prompt is too long")
        || lower.contains("maximum context");
    match status {
        401 | 403 => ErrorKind::Auth,
        // An exhausted quota or spend limit: waiting does not help.
        429 if code == "insufficient_quota" || code == "enforced_spend_limit_reached" => ErrorKind::Auth,
        429 => ErrorKind::RateLimit,
        400 | 413 if context => ErrorKind::ContextLength,
        408 => ErrorKind::Timeout,
        500..=599 => ErrorKind::Server,
        _ => ErrorKind::BadRequest,
    }
}

pub use crate::http::retry_after;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_statuses() {
        assert_eq!(classify(429, "", "slow down"), ErrorKind::RateLimit);
        assert_eq!(classify(429, "insufficient_quota", ""), ErrorKind::Auth);
        assert_eq!(classify(429, "enforced_spend_limit_reached", ""), ErrorKind::Auth);
        assert_eq!(classify(401, "", ""), ErrorKind::Auth);
        assert_eq!(
            classify(400, "context_length_exceeded", ""),
            ErrorKind::ContextLength
        );
        assert_eq!(
            classify(
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum"
            ),
            ErrorKind::ContextLength
        );
        assert_eq!(classify(400, "", "bad"), ErrorKind::BadRequest);
        assert_eq!(classify(529, "overloaded_error", ""), ErrorKind::Server);
        assert_eq!(classify(503, "", ""), ErrorKind::Server);
    }
}
