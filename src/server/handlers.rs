//! Inbound webhooks: authenticate, normalize, persist, then acknowledge.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use crate::config::TriggerSpec;
use crate::run::{Origin, TriggerEvent};
use crate::triggers::auth::{self, AuthError};
use crate::triggers::{jira, notion, slack};

/// Setting key of the Notion verification token.
pub const NOTION_TOKEN_KEY: &str = "notion.verification_token";

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
        (status, Json(json!({"error": self.to_string()}))).into_response()
    }
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

fn json_body(body: &[u8]) -> Result<Value, HookError> {
    serde_json::from_slice(body).map_err(|e| HookError::BadRequest(format!("body is not JSON: {e}")))
}

async fn persist(state: &AppState, event: &TriggerEvent, dedupe_key: &str) -> Result<Response, HookError> {
    let new = state
        .ingest
        .submit(event, dedupe_key)
        .await
        .map_err(|e| HookError::Unavailable(e.to_string()))?;
    if !new {
        tracing::info!(dedupe_key, "duplicate event acknowledged, nothing started");
    }
    Ok((StatusCode::OK, Json(json!({"ok": true, "duplicate": !new}))).into_response())
}

/// `POST /slack/events`.
pub async fn slack_events(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    auth::verify_slack(
        &state.secrets.slack_signing,
        header(&headers, "x-slack-request-timestamp"),
        header(&headers, "x-slack-signature"),
        &body,
        chrono::Utc::now().timestamp(),
    )?;
    let value = json_body(&body)?;
    handle_slack_payload(&state, &value).await
}

/// Shared by the Events API endpoint and Socket Mode.
pub async fn handle_slack_payload(state: &AppState, value: &Value) -> Result<Response, HookError> {
    match slack::parse(value, state.secrets.slack_bot_user.as_deref()).map_err(HookError::BadRequest)? {
        slack::SlackPayload::Challenge(c) => {
            Ok((StatusCode::OK, Json(json!({"challenge": c}))).into_response())
        }
        slack::SlackPayload::Event { event, dedupe_key } => persist(state, &event, &dedupe_key).await,
        slack::SlackPayload::ChannelCreated { channel, .. } => {
            match state.slack.clone() {
                Some(client) => {
                    state.tasks.spawn(async move {
                        match client.join(&channel).await {
                            Ok(()) => tracing::info!(%channel, "joined a new public channel"),
                            Err(e) => tracing::warn!(%channel, error = %e, "cannot join the new channel"),
                        }
                    });
                }
                None => {
                    tracing::warn!(%channel, "a channel was created but SLACK_BOT_TOKEN is not set; not joining")
                }
            }
            Ok((StatusCode::OK, Json(json!({"ok": true}))).into_response())
        }
        slack::SlackPayload::Ignored(why) => {
            tracing::debug!(%why, "slack event ignored");
            Ok((StatusCode::OK, Json(json!({"ok": true, "ignored": why}))).into_response())
        }
    }
}

/// `POST /jira/webhook`.
pub async fn jira_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    if state.secrets.jira.is_empty() {
        return Err(AuthError::NotConfigured("JIRA_WEBHOOK_SECRET").into());
    }
    auth::verify_sha256_header(
        &state.secrets.jira,
        header(&headers, "x-hub-signature"),
        "X-Hub-Signature",
        &body,
    )?;
    let value = json_body(&body)?;
    let (event, key) = jira::parse(&value, header(&headers, "x-atlassian-webhook-identifier"))
        .map_err(HookError::BadRequest)?;
    persist(&state, &event, &key).await
}

/// `POST /notion/webhook`: the verification handshake, then signed events.
pub async fn notion_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    let value = json_body(&body)?;
    let store = &state.runner.store;
    let stored = store
        .get_setting(NOTION_TOKEN_KEY)
        .await
        .map_err(|e| HookError::Unavailable(e.to_string()))?;
    match notion::parse(&value).map_err(HookError::BadRequest)? {
        notion::NotionPayload::Verification(token) => {
            // Once a token is set, changing it takes a signed request.
            if let Some(current) = &stored {
                auth::verify_sha256_header(
                    current,
                    header(&headers, "x-notion-signature"),
                    "X-Notion-Signature",
                    &body,
                )?;
            }
            store
                .set_setting(NOTION_TOKEN_KEY, &token)
                .await
                .map_err(|e| HookError::Unavailable(e.to_string()))?;
            tracing::info!(
                "notion verification token received and stored (paste it into Notion to finish the subscription)"
            );
            Ok((StatusCode::OK, Json(json!({"ok": true}))).into_response())
        }
        notion::NotionPayload::Event { event, dedupe_key } => {
            let token = stored.ok_or(AuthError::NotConfigured("notion verification token"))?;
            auth::verify_sha256_header(
                &token,
                header(&headers, "x-notion-signature"),
                "X-Notion-Signature",
                &body,
            )?;
            persist(&state, &event, &dedupe_key).await
        }
    }
}

/// `POST /hooks/{name}`: generic webhooks with a bearer token per hook.
pub async fn generic_hook(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    let exists = state.config.agents.values().any(|a| {
        a.triggers
            .iter()
            .any(|t| matches!(t, TriggerSpec::Webhook(w) if w.name == name))
    });
    if !exists {
        return Err(HookError::NotFound);
    }
    let expected = state
        .secrets
        .hooks
        .get(&name)
        .ok_or(AuthError::NotConfigured("the hook's token"))?;
    let given = header(&headers, "authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(AuthError::Missing("Authorization"))?;
    if !auth::token_eq(given.trim(), expected) {
        return Err(AuthError::Mismatch.into());
    }
    let (payload, text) = match serde_json::from_slice::<Value>(&body) {
        Ok(v) => (v, None),
        Err(_) => (
            json!({"body": String::from_utf8_lossy(&body)}),
            Some(String::from_utf8_lossy(&body).into_owned()),
        ),
    };
    let event = TriggerEvent {
        source: "webhook".into(),
        kind: name.clone(),
        summary: format!("webhook {name} ({} bytes)", body.len()),
        text,
        payload,
        private: false,
        origin: Origin::Webhook { name: name.clone() },
        attachments: Vec::new(),
    };
    let key = match header(&headers, "idempotency-key") {
        Some(k) => format!("hook:{name}:{k}"),
        None => format!("hook:{name}:{}", uuid::Uuid::now_v7()),
    };
    persist(&state, &event, &key).await
}
