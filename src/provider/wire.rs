//! The HTTP exchange shared by every vendor adapter: post JSON, classify failures.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::{ErrorKind, ProviderError, classify, retry_after};

/// Posts `body` and decodes a 2xx answer as `T`; anything else becomes a classified
/// [`ProviderError`] carrying the vendor's own error message.
pub async fn post_json<T: DeserializeOwned>(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<T, ProviderError> {
    let response = request
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .timeout(timeout)
        .body(body)
        .send()
        .await
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
    let status = response.status();
    let wait = retry_after(response.headers());
    let bytes = response
        .bytes()
        .await
        .map_err(|e| ProviderError::from_reqwest(provider, &e))?;
    if status.is_success() {
        return serde_json::from_slice(&bytes).map_err(|e| {
            ProviderError::new(
                provider,
                ErrorKind::Decode,
                format!("cannot decode response: {e}: {}", snippet(&bytes)),
            )
        });
    }
    let (code, message) = error_fields(&bytes);
    let mut err = ProviderError::new(
        provider,
        classify(status.as_u16(), &code, &message),
        format!(
            "HTTP {}: {}",
            status.as_u16(),
            if message.is_empty() {
                snippet(&bytes)
            } else {
                message
            }
        ),
    );
    err.status = Some(status.as_u16());
    err.retry_after = wait;
    Err(err)
}

/// Pulls `(code or type, message)` out of OpenAI (`{"error":{"code","type","message"}}`)
/// and Anthropic (`{"type":"error","error":{"type","message"}}`) error bodies.
fn error_fields(bytes: &[u8]) -> (String, String) {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return (String::new(), String::new());
    };
    let err = &value["error"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let code = match text(&err["code"]) {
        c if c.is_empty() => text(&err["type"]),
        c => c,
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
