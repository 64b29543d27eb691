//! Inbound webhooks: authenticate, normalize, persist, then acknowledge.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::AppState;
use crate::config::TriggerSpec;
use crate::triggers::TriggerEvent;
use crate::triggers::auth::{self, AuthError};
use crate::triggers::{jira, notion, slack, webhook};

/// Setting key of a verification token received during a setup window, waiting for
/// `steward notion-token --listen` to show it (then cleared). It never signs anything.
pub const NOTION_PENDING_KEY: &str = "notion.pending_verification_token";
/// Setting key of the end of the setup window (RFC 3339), opened by
/// `steward notion-token --listen`.
pub const NOTION_SETUP_UNTIL_KEY: &str = "notion.setup_until";

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
    match slack::parse(value, state.secrets.slack_bot_user.as_deref())
        .map_err(|e| HookError::BadRequest(e.to_string()))?
    {
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
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&body));
    let (event, key) = jira::parse(&value, &digest, chrono::Utc::now().timestamp()).map_err(|e| match e {
        jira::JiraError::Stale { .. } => HookError::Unauthorized(AuthError::StaleEvent(e.to_string())),
        jira::JiraError::Malformed(m) => HookError::BadRequest(m),
    })?;
    persist(&state, &event, &key).await
}

/// `POST /notion/webhook`. Closed (404) unless the operator enabled Notion: events are
/// verified only against `NOTION_WEBHOOK_TOKEN`, which the operator sets; nothing a
/// request carries becomes a signing key. The subscription handshake is accepted only
/// while `steward notion-token --listen` holds a setup window open, and then only
/// parked for that command to show.
pub async fn notion_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    let store = &state.runner.store;
    let unavailable = |e: crate::store::StoreError| HookError::Unavailable(e.to_string());
    let window_open = store
        .get_setting(NOTION_SETUP_UNTIL_KEY)
        .await
        .map_err(unavailable)?
        .and_then(|v| chrono::DateTime::parse_from_rfc3339(&v).ok())
        .is_some_and(|until| until > chrono::Utc::now());
    let Some(secret) = state.secrets.notion.clone() else {
        if !window_open {
            return Err(HookError::NotFound);
        }
        // During set-up only the handshake is expected.
        return match notion::parse(&json_body(&body)?).map_err(|e| HookError::BadRequest(e.to_string()))? {
            notion::NotionPayload::Verification(token) => park_notion_token(&state, &token).await,
            notion::NotionPayload::Event { .. } => {
                Err(AuthError::NotConfigured("NOTION_WEBHOOK_TOKEN").into())
            }
        };
    };
    // Parsed once: the handshake is recognised before the signature check (Notion does
    // not sign it), events only after it.
    let payload = notion::parse(&json_body(&body)?).map_err(|e| HookError::BadRequest(e.to_string()))?;
    match payload {
        notion::NotionPayload::Verification(token) if window_open => park_notion_token(&state, &token).await,
        notion::NotionPayload::Verification(_) => {
            tracing::warn!(
                "a Notion verification token arrived outside a setup window and was ignored; run `steward notion-token --listen` to accept a new subscription"
            );
            Err(AuthError::Missing("X-Notion-Signature").into())
        }
        notion::NotionPayload::Event { event, dedupe_key } => {
            auth::verify_sha256_header(
                &secret,
                header(&headers, "x-notion-signature"),
                "X-Notion-Signature",
                &body,
            )?;
            persist(&state, &event, &dedupe_key).await
        }
    }
}

async fn park_notion_token(state: &AppState, token: &str) -> Result<Response, HookError> {
    state
        .runner
        .store
        .set_setting(NOTION_PENDING_KEY, token)
        .await
        .map_err(|e| HookError::Unavailable(e.to_string()))?;
    tracing::info!("a Notion verification token arrived; `steward notion-token --listen` shows it");
    Ok((StatusCode::OK, Json(json!({"ok": true}))).into_response())
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
    // Unknown names, hooks without a token and wrong tokens all get the same 401, so
    // a caller cannot tell which hook names exist.
    let given = header(&headers, "authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let expected = state.secrets.hooks.get(&name).filter(|_| exists);
    match expected {
        Some(expected) if auth::token_eq(given.trim(), expected) => {}
        _ => return Err(AuthError::Mismatch.into()),
    }
    let event = webhook::event(&name, &body);
    let key = webhook::dedupe_key(&name, header(&headers, "idempotency-key"));
    persist(&state, &event, &key).await
}
