//! What a webhook answers when it refuses a request, and the reason the refusal count
//! reads from the response (`scrape::count_refusals`).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::triggers::auth::AuthError;
use crate::triggers::source::InboundError;

/// Errors a webhook answers with.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("unauthorized: {0}")]
    Unauthorized(#[from] AuthError),
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("not found")]
    NotFound,
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A service steward asks before it can decide did not answer: the sender should
    /// deliver the request again (503; Slack retries, Socket Mode redelivers what is
    /// not acknowledged). The reason is steward's own words.
    #[error("try again: {0}")]
    Retry(String),
}

impl IntoResponse for HookError {
    fn into_response(self) -> Response {
        let status = match &self {
            HookError::Unauthorized(e) => {
                tracing::warn!(reason = %e, "refused an unauthenticated webhook");
                StatusCode::UNAUTHORIZED
            }
            HookError::BadRequest(_) => StatusCode::BAD_REQUEST,
            HookError::NotFound => StatusCode::NOT_FOUND,
            HookError::Unavailable(_) | HookError::Retry(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        // The store's own words (a driver error can name the database user or host) go
        // to the log, not to whoever sent the request.
        let shown = match &self {
            HookError::Unavailable(why) => {
                tracing::warn!(reason = %why, "a webhook could not be taken: the run store is unavailable");
                "unavailable: the run store cannot be reached; try again".to_string()
            }
            other => other.to_string(),
        };
        let mut response = (status, Json(json!({"error": shown}))).into_response();
        // For the refusal's record (see `scrape::count_refusals`).
        response.extensions_mut().insert(Refusal(self.to_string()));
        response
    }
}

/// Why a request was refused, as its response carries it to the refusal count.
#[derive(Debug, Clone)]
pub struct Refusal(pub String);

impl From<InboundError> for HookError {
    fn from(e: InboundError) -> Self {
        match e {
            InboundError::Unauthorized(e) => HookError::Unauthorized(e),
            InboundError::BadRequest(m) => HookError::BadRequest(m),
            InboundError::NotFound => HookError::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store error's own words (a driver error names the database user or host) stay
    /// in the log and the refusal's record; the sender reads a plain 503.
    #[tokio::test]
    async fn an_unavailable_store_is_not_described_to_the_sender() {
        let why = r#"database error: password authentication failed for user "steward""#;
        let response = HookError::Unavailable(why.into()).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let refusal = response.extensions().get::<Refusal>().map(|r| r.0.clone());
        assert_eq!(refusal.as_deref(), Some(format!("unavailable: {why}").as_str()));
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        assert_eq!(
            body,
            r#"{"error":"unavailable: the run store cannot be reached; try again"}"#
        );
    }
}
