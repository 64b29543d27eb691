//! Inbound webhooks as HTTP glue: each source's `receive` (in `triggers/`) authenticates
//! and parses the request; these handlers persist what it returns, then acknowledge.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tracing::Instrument;

use super::AppState;
use crate::config::TriggerSpec;
use crate::metrics::TriggerOutcome;
use crate::triggers::TriggerEvent;
use crate::triggers::source::Inbound;
use crate::triggers::{jira, notion, slack, webhook};
use crate::types::event_outcome::{EventOutcome, OutcomeKind};

/// Setting key of a verification token received during a setup window, waiting for
/// `steward notion-token --listen` to show it (then cleared). It never signs anything.
pub const NOTION_PENDING_KEY: &str = "notion.pending_verification_token";
/// Setting key of the end of the setup window (RFC 3339), opened by
/// `steward notion-token --listen`.
pub const NOTION_SETUP_UNTIL_KEY: &str = "notion.setup_until";

pub use super::hook_error::{HookError, Refusal};

use crate::telemetry::propagation::from_headers;

async fn persist(state: &AppState, event: &TriggerEvent, dedupe_key: &str) -> Result<Response, HookError> {
    let new = state
        .ingest
        .submit(event, dedupe_key)
        .await
        .map_err(|e| HookError::Unavailable(e.to_string()))?;
    tracing::Span::current().record("steward.dedupe_hit", !new);
    let outcome = if new {
        TriggerOutcome::Accepted
    } else {
        TriggerOutcome::Duplicate
    };
    state.runner.metrics.trigger(&event.source, &event.kind, outcome);
    if !new {
        state
            .runner
            .metrics
            .event_outcome(&event.source, OutcomeKind::Duplicate);
        tracing::info!(dedupe_key, "duplicate event acknowledged, nothing started");
    }
    Ok((StatusCode::OK, Json(json!({"ok": true, "duplicate": !new}))).into_response())
}

/// Stores an authenticated event for routing (a Slack event only from an allowed
/// workspace, its privacy settled first), under an `ingest` span continuing `remote`.
async fn accept(
    state: &AppState,
    mut event: Box<TriggerEvent>,
    dedupe_key: &str,
    remote: Option<opentelemetry::trace::SpanContext>,
) -> Result<Response, HookError> {
    if let crate::triggers::Origin::Slack { team, .. } = &event.origin
        && !state.secrets.slack_team_allowed(team.as_deref())
    {
        tracing::warn!(team = ?team, kind = %event.kind, "refused a Slack event from a workspace not in SLACK_TEAM_IDS");
        return Ok(super::slack_teams::refuse_event(state, &event, None));
    }
    settle_privacy(state, &mut event).await;
    let span = tracing::info_span!(
        "ingest",
        otel.name = %format!("ingest {}", event.source),
        otel.kind = "server",
        "steward.trigger.source" = %event.source,
        "steward.trigger.kind" = %event.kind,
        "steward.dedupe_hit" = tracing::field::Empty,
        "steward.ack_ms" = tracing::field::Empty,
    );
    if let Some(remote) = &remote {
        crate::telemetry::continue_remote(&span, remote);
    }
    // Stored with the event: the run continues this trace after the queue.
    event.traceparent = crate::telemetry::traceparent(&span);
    let started = std::time::Instant::now();
    let response = persist(state, &event, dedupe_key).instrument(span.clone()).await;
    // How long the sender waited for its acknowledgement (the group commit).
    span.record("steward.ack_ms", started.elapsed().as_secs_f64() * 1000.0);
    response
}

/// Slack delivers an event at most this many times more after the first
/// (`X-Slack-Retry-Num`, Socket Mode's `retry_attempt`): at the last one, steward
/// decides with what it has rather than asking for another.
pub const SLACK_LAST_RETRY: u64 = 3;

/// Does what an authenticated request asks. `remote` is the sender's trace context
/// (`traceparent`), which the ingest span, and so the run, continues. `last_try`: the
/// sender will not deliver this request again, so nothing waits for a later delivery.
async fn act(
    state: &AppState,
    inbound: Inbound,
    remote: Option<opentelemetry::trace::SpanContext>,
    last_try: bool,
) -> Result<Response, HookError> {
    match inbound {
        Inbound::Answer(body) => Ok((StatusCode::OK, Json(body)).into_response()),
        Inbound::Ignored { source, kind, reason } => {
            state.runner.metrics.event_outcome(source, OutcomeKind::Ignored);
            let body = json!({"ok": true, "ignored": reason});
            state
                .ingest
                .record(source, &kind, EventOutcome::because(OutcomeKind::Ignored, reason));
            Ok((StatusCode::OK, Json(body)).into_response())
        }
        Inbound::Event { event, dedupe_key } => accept(state, event, &dedupe_key, remote).await,
        Inbound::SlackOutsider {
            event,
            dedupe_key,
            team,
        } => {
            let team = match super::slack_teams::author_team(state, &event, team).await {
                Ok(team) => team,
                // Refused now, the event would be lost; Slack delivers it again.
                Err(why) if !last_try => {
                    tracing::warn!(reason = %why, kind = %event.kind, "a Slack Connect event waits for Slack's next delivery");
                    return Err(HookError::Retry(why));
                }
                Err(why) => {
                    tracing::warn!(reason = %why, "Slack's last delivery of a Slack Connect event: its author is checked as unknown");
                    None
                }
            };
            if super::slack_teams::admitted(state, &event, team.as_deref()) {
                return accept(state, event, &dedupe_key, remote).await;
            }
            tracing::warn!(author_team = ?team, kind = %event.kind, "refused a Slack Connect event from a person of another organisation");
            Ok(super::slack_teams::refuse_event(
                state,
                &event,
                Some(team.as_deref()),
            ))
        }
        Inbound::JoinChannel(channel) => {
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
        Inbound::VerificationToken(token) => park_notion_token(state, &token).await,
        Inbound::SlackChannelChanged { channel, change } => {
            super::channel_changes::take(state, &channel, change).await
        }
    }
}

/// How long ingest waits for Slack to say whether a channel is private before
/// counting it as private (Slack wants its acknowledgement within 3 s).
const PRIVACY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Decides, before anything is stored, whether a Slack event comes from a private
/// conversation: its id (D, G), `channel_type` or the envelope's
/// `is_ext_shared_channel` say so, or else `conversations.info` (private channels can
/// have C ids and `app_mention` has no `channel_type`; a channel shared with another
/// organisation counts as private). Asked once per channel and cached; no answer, or
/// no Slack client to ask, counts as private.
async fn settle_privacy(state: &AppState, event: &mut TriggerEvent) {
    let crate::triggers::Origin::Slack { channel, .. } = &event.origin else {
        return;
    };
    if event.private || channel.is_empty() {
        return;
    }
    let private = match &state.slack {
        Some(client) => tokio::time::timeout(PRIVACY_WAIT, async {
            client.is_private_channel(channel).await || client.said_shared_outside(channel).await
        })
        .await
        .unwrap_or(true),
        None => true,
    };
    if private {
        event.private = true;
        event.summary = crate::run::trigger_summary(event);
    }
}

/// `POST /slack/events`. Interactivity payloads (form-encoded `payload=`, signed the
/// same way) are accepted here too, as Bolt apps do, so one Request URL serves both.
pub async fn slack_events(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    let form = crate::triggers::source::header(&headers, "content-type")
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if form {
        return super::interactivity::slack_interactivity(State(state), headers, body).await;
    }
    let secrets = &state.secrets;
    let bot = secrets.slack_bot_user.as_deref();
    let now = chrono::Utc::now().timestamp();
    let inbound = slack::receive(&secrets.slack_signing, bot, &headers, &body, now)?;
    if let Some(refused) = other_workspace(&state, &inbound, || {
        crate::triggers::source::json_body(&body).ok()
    }) {
        return Ok(refused);
    }
    let last_try = crate::triggers::source::header(&headers, "x-slack-retry-num")
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|n| n >= SLACK_LAST_RETRY);
    act(&state, inbound, from_headers(&headers), last_try).await
}

/// A Slack payload whose sender Socket Mode already authenticated; `last_try` when the
/// envelope is Slack's last delivery of it.
pub async fn handle_slack_payload(
    state: &AppState,
    value: &Value,
    last_try: bool,
) -> Result<Response, HookError> {
    let inbound = slack::receive_payload(value, state.secrets.slack_bot_user.as_deref())?;
    if let Some(refused) = other_workspace(state, &inbound, || Some(value.clone())) {
        return Ok(refused);
    }
    act(state, inbound, None, last_try).await
}

/// The refusal of a join, a channel change or an ignored event sent by a workspace `SLACK_TEAM_IDS` does
/// not list (events for agents are checked where they are accepted); `None` to go on.
/// `payload` is read only when there is a list.
fn other_workspace(
    state: &AppState,
    inbound: &Inbound,
    payload: impl FnOnce() -> Option<Value>,
) -> Option<Response> {
    let kind = match inbound {
        Inbound::Ignored { kind, .. } => kind.as_str(),
        Inbound::JoinChannel(_) => "channel_created",
        Inbound::SlackChannelChanged { change, .. } => change.event_type(),
        _ => return None,
    };
    if state.secrets.slack_team_allowed(None) {
        return None;
    }
    let team = payload().and_then(|v| slack::receiving_team(&slack::org_wide(&v)));
    (!state.secrets.slack_team_allowed(team.as_deref()))
        .then(|| super::slack_teams::refuse_workspace(state, kind, team.as_deref()))
}

/// `POST /jira/webhook`.
pub async fn jira_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    let now = chrono::Utc::now().timestamp();
    let inbound = jira::receive(&state.secrets.jira, &headers, &body, now)?;
    act(&state, inbound, from_headers(&headers), true).await
}

/// `POST /notion/webhook`: closed unless the operator enabled Notion or holds a setup
/// window open (see `triggers::notion::receive`).
pub async fn notion_webhook(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    // The setup window matters only to a handshake, or while no token is set: a flood
    // of unsigned events does not reach the database.
    let handshake = body
        .windows(b"verification_token".len())
        .any(|w| w == b"verification_token");
    let window_open = (handshake || state.secrets.notion.is_none())
        && state
            .notion_window
            .open(state.runner.store.as_ref(), NOTION_SETUP_UNTIL_KEY)
            .await
            .map_err(|e| HookError::Unavailable(e.to_string()))?;
    let now = chrono::Utc::now().timestamp();
    let inbound = notion::receive(state.secrets.notion.as_deref(), window_open, &headers, &body, now)?;
    act(&state, inbound, from_headers(&headers), true).await
}

/// Most distinct tokens one setup window keeps (more means someone is flooding it).
const MAX_PENDING_TOKENS: u32 = 8;

/// Keeps a verification token for `steward notion-token`, beside any others that
/// arrived in the same window (one per line): the handshake is unsigned, so anyone who
/// can reach the endpoint can post one, and the command refuses to pick among several.
async fn park_notion_token(state: &AppState, token: &str) -> Result<Response, HookError> {
    let token = token.trim();
    // A token is one printable word; anything else is not Notion's and would make a
    // second line of the list.
    if token.is_empty() || token.len() > 256 || !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(HookError::BadRequest("malformed verification_token".into()));
    }
    state
        .runner
        .store
        .add_setting_line(NOTION_PENDING_KEY, token, MAX_PENDING_TOKENS)
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
    let expected = state.secrets.hooks.get(&name).filter(|_| exists);
    let inbound = webhook::receive(&name, expected.map(String::as_str), &headers, &body)?;
    act(&state, inbound, from_headers(&headers), true).await
}
