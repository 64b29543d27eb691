//! Whose Slack requests steward acts on: workspaces `SLACK_TEAM_IDS` does not list are
//! refused (counted and recorded here), and in a channel shared with another
//! organisation (Slack Connect) only people of the workspace receiving the event, or of
//! one `SLACK_TEAM_IDS` lists, start runs. Everyone else there is an outsider: a run
//! they start could read the organisation's public channels (which need no membership
//! check inside it) into the shared channel, and approve its own gated calls as the
//! person who asked.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;
use super::click::Click;
use crate::metrics::TriggerOutcome;
use crate::triggers::{Origin, TriggerEvent};
use crate::types::event_outcome::{EventOutcome, OutcomeKind};

/// How long ingest waits for `users.info` to name an author's workspace (Slack wants
/// its acknowledgement within 3 s; privacy may take 2 s more after this).
const LOOKUP_WAIT: Duration = Duration::from_millis(800);

/// The workspace of a Slack Connect event's author: `named` when the payload says,
/// else Slack's `users.info` for the author (`user.team_id`); `Ok(None)` when neither
/// can say (no client, no author, Slack's answer names none). `Err` when Slack did not
/// answer (no answer in time, rate limited, unreachable): worth asking again later.
pub(crate) async fn author_team(
    state: &AppState,
    event: &TriggerEvent,
    named: Option<String>,
) -> Result<Option<String>, String> {
    if named.is_some() {
        return Ok(named);
    }
    let (Some(client), Origin::Slack { user: Some(user), .. }) = (&state.slack, &event.origin) else {
        return Ok(None);
    };
    let query = [("user", user.clone())];
    match tokio::time::timeout(LOOKUP_WAIT, client.get("users.info", &query)).await {
        Ok(Ok(v)) => Ok(v["user"]["team_id"].as_str().map(str::to_string)),
        Ok(Err(e)) if e.is_transient() => Err(format!("Slack could not name the author's workspace: {e}")),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "users.info could not name a Slack Connect author's workspace");
            Ok(None)
        }
        Err(_) => Err("Slack did not name the author's workspace in time".into()),
    }
}

/// Whether a Slack Connect event's author, of workspace `team`, may start runs: a
/// person of the receiving workspace, or of one `SLACK_TEAM_IDS` lists. An author whose
/// workspace nobody could name is refused.
pub(crate) fn admitted(state: &AppState, event: &TriggerEvent, team: Option<&str>) -> bool {
    let home = match &event.origin {
        Origin::Slack { team, .. } => team.as_deref(),
        _ => None,
    };
    team.is_some_and(|t| Some(t) == home || state.secrets.slack_team_listed(t))
}

/// The workspace of a person clicking one of steward's buttons in a channel shared with
/// another organisation, when it is neither the workspace the click came through, nor
/// that workspace's Enterprise Grid org (Grid payloads give the org's `E…` id as
/// `user.team_id`), nor one `SLACK_TEAM_IDS` lists: such a person's 👍/👎, comment or
/// "Get help" would feed the scores and the refinement loop, or page someone, on an
/// outsider's word. A clicker of another workspace, or one the payload does not place,
/// is an outsider unless `conversations.info` says the channel is not shared outside;
/// when Slack cannot say in time, the click is refused. `None`: the click is taken.
pub(crate) async fn click_outsider(state: &AppState, payload: &serde_json::Value) -> Option<String> {
    let theirs = payload["user"]["team_id"].as_str();
    let home = [
        payload["team"]["id"].as_str(),
        payload["team"]["enterprise_id"].as_str(),
        payload["enterprise"]["id"].as_str(),
    ];
    if let Some(t) = theirs
        && (home.contains(&Some(t)) || state.secrets.slack_team_listed(t))
    {
        return None;
    }
    let channel = payload["channel"]["id"]
        .as_str()
        .or(payload["container"]["channel_id"].as_str());
    let shared = match (&state.slack, channel) {
        (Some(client), Some(channel)) => tokio::time::timeout(LOOKUP_WAIT, client.is_shared_outside(channel))
            .await
            .unwrap_or(true),
        _ => true,
    };
    shared.then(|| theirs.unwrap_or("(not named)").to_string())
}

/// A click steward does not act on: from a workspace `SLACK_TEAM_IDS` does not list
/// (`outsider: false`), or by another organisation's person in a shared channel (see
/// [`click_outsider`]). Counted as `foreign_team`; the interactivity route records it.
pub(crate) fn refuse_click(state: &AppState, kind: &str, team: Option<&str>, outsider: bool) -> Click {
    state
        .runner
        .metrics
        .trigger("slack", kind, TriggerOutcome::ForeignTeam);
    let reason = if outsider {
        format!(
            "a click by a person of workspace {} (a channel shared with another organisation), neither this one nor in SLACK_TEAM_IDS",
            team.unwrap_or("(not named)")
        )
    } else {
        foreign_team_reason(team)
    };
    Click::NotAdmitted { reason }
}

fn foreign_team_reason(team: Option<&str>) -> String {
    format!(
        "workspace {} is not in SLACK_TEAM_IDS",
        team.unwrap_or("(none given)")
    )
}

/// Refuses a Slack event whose workspace (`author: None`) or whose Slack Connect
/// author's workspace (`author: Some`) steward does not act for: counted as
/// `foreign_team`, recorded without its content, and acknowledged with 200 (Slack
/// would retry anything else).
pub(crate) fn refuse_event(state: &AppState, event: &TriggerEvent, author: Option<Option<&str>>) -> Response {
    state
        .runner
        .metrics
        .trigger(&event.source, &event.kind, TriggerOutcome::ForeignTeam);
    let (answer, reason) = match author {
        None => {
            let team = match &event.origin {
                Origin::Slack { team, .. } => team.as_deref(),
                _ => None,
            };
            ("workspace not allowed", foreign_team_reason(team))
        }
        Some(team) => (
            "author of another organisation",
            format!(
                "the author is of workspace {} (a channel shared with another organisation), neither this one nor in SLACK_TEAM_IDS",
                team.unwrap_or("(not named)")
            ),
        ),
    };
    refuse_slack(state, &event.kind, || reason);
    (StatusCode::OK, Json(json!({"ok": true, "refused": answer}))).into_response()
}

/// Refuses what a workspace not in `SLACK_TEAM_IDS` sent that is no event for an agent
/// (a new channel to join, an event steward ignores): nothing is joined, and nothing
/// is kept but the refusal, within its budget.
pub(crate) fn refuse_workspace(state: &AppState, kind: &str, team: Option<&str>) -> Response {
    state
        .runner
        .metrics
        .trigger("slack", kind, TriggerOutcome::ForeignTeam);
    refuse_slack(state, kind, || foreign_team_reason(team));
    (
        StatusCode::OK,
        Json(json!({"ok": true, "refused": "workspace not allowed"})),
    )
        .into_response()
}

/// Counts a refused Slack event and records `reason` within the refusal budget.
fn refuse_slack(state: &AppState, kind: &str, reason: impl FnOnce() -> String) {
    state.runner.metrics.event_outcome("slack", OutcomeKind::Refused);
    if state.refusals.admit("slack", super::refusals::Refused::Policy) {
        state.ingest.record(
            "slack",
            kind,
            EventOutcome::because(OutcomeKind::Refused, reason()),
        );
    }
}
