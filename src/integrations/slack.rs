//! Slack Web API client: JSON POSTs with the bot token. Slack reports errors as HTTP 200
//! with `ok: false`, and rate limits as 429 with `Retry-After`.

use std::time::Duration;

use serde_json::Value;

use super::ApiError;
use crate::config::Settings;
use crate::http::Egress;

/// Slack's Web API.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

const SERVICE: &str = "slack";
/// Retries of a 429 before giving up.
const MAX_RATE_LIMIT_RETRIES: u32 = 3;

/// A Web API client for one workspace.
#[derive(Clone)]
pub struct SlackClient {
    http: reqwest::Client,
    base_url: String,
    token: String,
    /// Upper bound on one `Retry-After` wait.
    pub max_wait: Duration,
}

impl std::fmt::Debug for SlackClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl SlackClient {
    pub fn new(http: reqwest::Client, base_url: &str, token: &str) -> Self {
        SlackClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            max_wait: Duration::from_secs(30),
        }
    }

    /// From `SLACK_BOT_TOKEN` and `SLACK_API_URL` (default `https://slack.com/api`).
    pub fn from_settings(http: reqwest::Client, s: &Settings) -> Option<Self> {
        let token = s.slack_bot_token.as_deref()?;
        let base = s.slack_api_url.as_deref().unwrap_or(DEFAULT_API_URL);
        Some(SlackClient::new(http, base, token))
    }

    /// Calls `method` with a JSON body; returns the response object when `ok: true`.
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        self.exchange(method, || {
            self.http.post(format!("{}/{method}", self.base_url)).json(body)
        })
        .await
    }

    /// Calls a read method with query parameters (GET), e.g. `conversations.history`.
    pub async fn get(&self, method: &str, params: &[(&str, String)]) -> Result<Value, ApiError> {
        self.exchange(method, || {
            self.http.get(format!("{}/{method}", self.base_url)).query(params)
        })
        .await
    }

    /// Sends (and on 429 re-sends after `Retry-After`) the request `build` makes;
    /// Slack's `ok: false` becomes an [`ApiError::Api`].
    async fn exchange(
        &self,
        method: &str,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<Value, ApiError> {
        let mut attempt = 0;
        loop {
            let request = build().bearer_auth(&self.token).timeout(Duration::from_secs(30));
            let (status, headers, value) = super::send_json(SERVICE, method, request).await?;
            if status.as_u16() == 429 {
                let wait = crate::http::retry_after_secs(&headers, 1);
                if attempt >= MAX_RATE_LIMIT_RETRIES || Duration::from_secs(wait) > self.max_wait {
                    return Err(ApiError::RateLimited {
                        service: SERVICE,
                        method: method.into(),
                        retry_after_secs: wait,
                    });
                }
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(wait)).await;
                continue;
            }
            if value["ok"].as_bool() == Some(true) {
                return Ok(value);
            }
            let message = value["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(ApiError::Api {
                service: SERVICE,
                method: method.into(),
                message,
            });
        }
    }

    /// Whether `url` is on a host that may see the bot token: Slack's file host over
    /// https, or the host of the configured API URL (a fake Slack in tests, a proxy).
    pub fn is_file_host(&self, url: &reqwest::Url) -> bool {
        let api_host = reqwest::Url::parse(&self.base_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
        let host = url.host_str().map(str::to_ascii_lowercase);
        (url.scheme() == "https" && host.as_deref() == Some("files.slack.com"))
            || (host.is_some() && host == api_host)
    }

    /// Downloads a private file URL with the bot token through the egress checks,
    /// refusing more than `cap` bytes. The token goes only to [`Self::is_file_host`].
    pub async fn download(&self, egress: &Egress, url: &str, cap: u64) -> Result<Vec<u8>, ApiError> {
        let refused = |message: String| ApiError::Api {
            service: SERVICE,
            method: "files.download".into(),
            message,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| refused(format!("invalid file URL: {e}")))?;
        if !self.is_file_host(&parsed) {
            return Err(refused(format!(
                "refused to send the bot token to {}: not a Slack file host",
                parsed.host_str().unwrap_or("(no host)")
            )));
        }
        let request = egress
            .get(url)
            .map_err(|e| refused(e.to_string()))?
            .bearer_auth(&self.token);
        super::download_capped(SERVICE, "files.download", request, cap).await
    }

    /// Joins a public channel (`conversations.join`).
    pub async fn join(&self, channel: &str) -> Result<(), ApiError> {
        self.call("conversations.join", &serde_json::json!({"channel": channel}))
            .await
            .map(|_| ())
    }
}
