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
            HookError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        let mut response = (status, Json(json!({"error": self.to_string()}))).into_response();
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
