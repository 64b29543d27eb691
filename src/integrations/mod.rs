//! Clients for the services steward talks to. Every base URL is overridable so tests
//! run against fake servers on 127.0.0.1.

pub mod adf;
pub mod github;
pub mod jira;
pub mod notion;
pub mod slack;

/// A failed call to an integration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The service answered with an error (Slack's `ok: false`, a 4xx).
    #[error("{service} {method}: {message}")]
    Api {
        service: &'static str,
        method: String,
        message: String,
    },
    #[error("{service} {method}: rate limited, retry after {retry_after_secs}s")]
    RateLimited {
        service: &'static str,
        method: String,
        retry_after_secs: u64,
    },
    #[error("{service} {method}: {message}")]
    Transport {
        service: &'static str,
        method: String,
        message: String,
    },
    #[error("{0} is not configured")]
    NotConfigured(&'static str),
}
