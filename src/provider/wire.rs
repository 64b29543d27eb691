//! The HTTP exchange shared by every vendor adapter: post JSON, classify failures.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{ErrorKind, ProviderError, classify, retry_after};
use super::rate_headers::spent_for;

/// Posts `body` and decodes a 2xx answer as `T`, with how long the model's rate-limit
/// budget is spent for (see [`spent_for`]); anything else becomes a classified
/// [`ProviderError`] carrying the vendor's own error message.
pub async fn post_json<T: DeserializeOwned>(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<(T, Option<Duration>), ProviderError> {
    let response = crate::telemetry::propagation::outgoing(request)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .timeout(timeout)
        .body(body)
        .send()
        .await
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
    let status = response.status();
    let spent = spent_for(response.headers());
    let wait = retry_after(response.headers()).or(spent);
    let bytes = response
        .bytes()
        .await
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
    if status.is_success() {
        let body = serde_json::from_slice(&bytes).map_err(|e| {
            ProviderError::new(
                provider,
                ErrorKind::Decode,
                format!("cannot decode response: {e}: {}", snippet(&bytes)),
            )
        })?;
        return Ok((body, spent));
    }
    Err(failure(provider, status, wait, &bytes))
}

/// Sends a GET (a listing, not a model call) and decodes a 2xx answer as `T`.
pub async fn get_json<T: DeserializeOwned>(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<T, ProviderError> {
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
    let status = response.status();
    let wait = retry_after(response.headers());
    let bytes = response
        .bytes()
        .await
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
    if !status.is_success() {
        return Err(failure(provider, status, wait, &bytes));
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ProviderError::new(
            provider,
            ErrorKind::Decode,
            format!("cannot decode response: {e}: {}", snippet(&bytes)),
        )
    })
}

/// Longest a whole stream may take: a model that keeps sending (a long reasoning
/// effort, a long answer) is not cut at the request timeout, which bounds the wait for
/// the answer's start and each gap in it instead. The run's own deadline still holds.
pub const STREAM_TOTAL: Duration = Duration::from_secs(30 * 60);

/// Posts `body` asking for server-sent events and hands each event's `data` (JSON, the
/// `[DONE]` marker left out) to `on_data` as it arrives, and answers how long the
/// rate-limit budget is spent for; a non-2xx answer becomes a classified
/// [`ProviderError`], as for [`post_json`]. `timeout` bounds the wait for the answer's
/// head and each wait for more of it; the whole stream gets [`STREAM_TOTAL`].
pub async fn post_sse(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    body: Vec<u8>,
    timeout: Duration,
    on_data: impl FnMut(&str) -> Result<(), ProviderError>,
) -> Result<Option<Duration>, ProviderError> {
    let stream = read_sse(provider, request, body, timeout, on_data);
    tokio::time::timeout(STREAM_TOTAL, stream)
        .await
        .unwrap_or_else(|_| {
            Err(ProviderError::new(
                provider,
                ErrorKind::Timeout,
                format!("the stream went on for more than {} s", STREAM_TOTAL.as_secs()),
            ))
        })
}

async fn read_sse(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    body: Vec<u8>,
    timeout: Duration,
    mut on_data: impl FnMut(&str) -> Result<(), ProviderError>,
) -> Result<Option<Duration>, ProviderError> {
    let waited = |what: &str| {
        ProviderError::new(
            provider,
            ErrorKind::Timeout,
            format!("no {what} within {} s", timeout.as_secs()),
        )
    };
    let sent = crate::telemetry::propagation::outgoing(request)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .body(body)
        .send();
    let mut response = tokio::time::timeout(timeout, sent)
        .await
        .map_err(|_| waited("answer"))?
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
    let status = response.status();
    let spent = spent_for(response.headers());
    if !status.is_success() {
        let wait = retry_after(response.headers()).or(spent);
        let bytes = tokio::time::timeout(timeout, response.bytes())
            .await
            .map_err(|_| waited("error body"))?
            .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
        return Err(failure(provider, status, wait, &bytes));
    }
    let mut pending: Vec<u8> = Vec::new();
    while let Some(chunk) = tokio::time::timeout(timeout, response.chunk())
        .await
        .map_err(|_| waited("more of the stream"))?
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?
    {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if let Some(data) = line.strip_prefix("data:").map(str::trim)
                && !data.is_empty()
                && data != "[DONE]"
            {
                on_data(data)?;
            }
        }
    }
    Ok(spent)
}

/// A non-2xx answer as a classified error with the vendor's message.
fn failure(
    provider: &'static str,
    status: reqwest::StatusCode,
    wait: Option<Duration>,
    bytes: &[u8],
) -> ProviderError {
    let (code, message) = error_fields(bytes);
    let mut err = ProviderError::new(
        provider,
        classify(status.as_u16(), &code, &message),
        format!(
            "HTTP {}: {}",
            status.as_u16(),
            if message.is_empty() {
                snippet(bytes)
            } else {
                message
            }
        ),
    );
    err.status = Some(status.as_u16());
    err.retry_after = wait;
    err
}

/// One server-sent event's `data` as JSON; undecodable data fails the call.
pub fn stream_event(provider: &'static str, data: &str) -> Result<Value, ProviderError> {
    serde_json::from_str(data).map_err(|e| {
        ProviderError::new(
            provider,
            ErrorKind::Decode,
            format!("cannot decode a stream event: {e}"),
        )
    })
}

/// An `error` event inside a stream (Anthropic sends `overloaded_error` this way) as a
/// classified error.
pub fn stream_error(provider: &'static str, data: &str) -> ProviderError {
    let (code, message) = error_fields(data.as_bytes());
    // Classified as the HTTP status the same error gets before a stream starts.
    let status = match code.as_str() {
        "overloaded_error" => 529,
        "api_error" => 500,
        "rate_limit_error" => 429,
        _ => 400,
    };
    ProviderError::new(
        provider,
        classify(status, &code, &message),
        format!("stream error: {code}: {message}"),
    )
}

/// Pulls `(code or type, message)` out of OpenAI (`{"error":{"code","type","message"}}`)
/// and Anthropic (`{"type":"error","error":{"type","message"}}`) error bodies.
fn error_fields(bytes: &[u8]) -> (String, String) {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return (String::new(), String::new());
    };
    let err = &value["error"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    // Anthropic names the cause of some refusals in `details.error_code` (a spend
    // limit's 429 is not a "slow down"); OpenAI in `code`; both in `type` otherwise.
    let code = match (text(&err["details"]["error_code"]), text(&err["code"])) {
        (detail, _) if !detail.is_empty() => detail,
        (_, c) if c.is_empty() => text(&err["type"]),
        (_, c) => c,
    };
    let message = match &err {
        Value::String(s) => s.clone(),
        _ => text(&err["message"]),
    };
    (code, message)
}

fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut end = text.len().min(300);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ErrorKind;

    #[test]
    fn a_spend_limit_is_not_a_slow_down() {
        let spent = br#"{"type": "error", "error": {"type": "rate_limit_error",
            "message": "You have reached your specified workspace spend limit",
            "details": {"error_code": "enforced_spend_limit_reached"}}}"#;
        let err = failure("anthropic", reqwest::StatusCode::TOO_MANY_REQUESTS, None, spent);
        assert_eq!(err.kind, ErrorKind::Auth, "{err}");
        let slow = br#"{"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}"#;
        let err = failure("anthropic", reqwest::StatusCode::TOO_MANY_REQUESTS, None, slow);
        assert_eq!(err.kind, ErrorKind::RateLimit);
        let quota =
            br#"{"error": {"message": "quota", "type": "insufficient_quota", "code": "insufficient_quota"}}"#;
        let err = failure("openai", reqwest::StatusCode::TOO_MANY_REQUESTS, None, quota);
        assert_eq!(err.kind, ErrorKind::Auth);
    }
}
