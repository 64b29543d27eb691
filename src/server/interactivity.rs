//! `POST /slack/interactivity`: clicks on the Approve / Deny buttons of an approval
//! request and on the 👍 / 👎 buttons under an answer (`block_actions` payloads,
//! form-encoded, signed like events). A click
//! decides the request once; the run, parked in the store, is queued again and the
//! dispatcher of whichever replica reconciles next resumes it.
//!
//! Refused without changing anything: a bad signature (401), a click by someone who
//! is neither the requester nor an approver, a second click or one on a finished run
//! ("already decided"), and a button whose value names a request of another run.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde_json::Value;
use slack_morphism::SlackMessageContent;
use slack_morphism::api::{SlackApiChatPostEphemeralRequest, SlackApiChatUpdateRequest};

use super::AppState;
use super::click::{ButtonClick, Click, button_click};
use super::hook_error::HookError;
use crate::integrations::slack::message;
use crate::run::approval::{APPROVED, DENIED};
use crate::triggers::auth;
use crate::triggers::source::header;

/// `POST /slack/interactivity`.
pub async fn slack_interactivity(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HookError> {
    let now = Utc::now().timestamp();
    auth::verify_slack(
        &state.secrets.slack_signing,
        header(&headers, "x-slack-request-timestamp"),
        header(&headers, "x-slack-signature"),
        &body,
        now,
    )?;
    let payload = form_urlencoded::parse(&body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or_else(|| HookError::BadRequest("interactivity request without a payload field".into()))?;
    let payload: Value = serde_json::from_str(&payload)
        .map_err(|e| HookError::BadRequest(format!("payload is not JSON: {e}")))?;
    handle(&state, &payload)
        .await
        .map_err(|e| HookError::Unavailable(e.to_string()))?;
    Ok(StatusCode::OK.into_response())
}

/// Decides on an interactivity payload (from HTTP or Socket Mode) and tells Slack: a
/// button click, or the comment of a 👎. Other payload types are logged and
/// acknowledged. Every payload ends in the event log: `handled` with what the click
/// did, or `ignored` with why not.
pub async fn handle(state: &AppState, payload: &Value) -> Result<Click, crate::store::StoreError> {
    let click = handle_click(state, payload).await?;
    use crate::types::event_outcome::{EventOutcome, OutcomeKind};
    let (kind, reason) = match &click {
        Click::Decided { decision } => (OutcomeKind::Handled, format!("approval {decision}")),
        Click::Rated { up: true } => (OutcomeKind::Handled, "feedback: good answer".into()),
        Click::Rated { up: false } => (OutcomeKind::Handled, "feedback: bad answer".into()),
        Click::Commented => (OutcomeKind::Handled, "feedback comment".into()),
        Click::Escalated => (OutcomeKind::Handled, "a person was called".into()),
        Click::Resolved => (OutcomeKind::Handled, "a call for a person was resolved".into()),
        Click::Proposing => (OutcomeKind::Handled, "propose a fix: queued".into()),
        Click::Improvement => (
            OutcomeKind::Handled,
            "an improvement: pull request or dismissal".into(),
        ),
        Click::Refused(why) => (OutcomeKind::Ignored, format!("click refused: {why}")),
        Click::NotAdmitted { reason } => (OutcomeKind::Refused, reason.clone()),
        Click::Ignored => (OutcomeKind::Ignored, "not a steward button or view".into()),
    };
    let action = payload["actions"][0]["action_id"].as_str().unwrap_or_default();
    let detail = serde_json::json!({"reason": reason, "action": action, "user": payload["user"]["id"]});
    state.runner.metrics.event_outcome("slack", kind);
    // Refusals are recorded within the refusal budget, like refused events: a flood
    // of them is counted, not written.
    if matches!(click, Click::NotAdmitted { .. })
        && !state.refusals.admit("slack", super::refusals::Refused::Policy)
    {
        return Ok(click);
    }
    let what = payload["type"].as_str().unwrap_or("interactivity");
    state
        .ingest
        .record("slack", what, EventOutcome::new(kind, detail));
    Ok(click)
}

async fn handle_click(state: &AppState, payload: &Value) -> Result<Click, crate::store::StoreError> {
    let team = payload["team"]["id"]
        .as_str()
        .or(payload["user"]["team_id"].as_str());
    let kind = payload["type"].as_str().unwrap_or("interactivity");
    if !state.secrets.slack_team_allowed(team) {
        tracing::warn!(team = ?team, "refused a Slack click from a workspace not in SLACK_TEAM_IDS");
        return Ok(super::slack_teams::refuse_click(state, kind, team, false));
    }
    // A comment needs the commenter's own 👎, which an outsider's click never stores
    // (and Slack sends a modal's submission only from the person it was opened for).
    if payload["type"] == "view_submission" && payload["view"]["callback_id"] == message::FEEDBACK_COMMENT {
        return comment(state, payload).await;
    }
    let Some(click) = button_click(payload) else {
        tracing::info!(
            kind = payload["type"].as_str().unwrap_or("(none)"),
            "interactivity payload ignored"
        );
        return Ok(Click::Ignored);
    };
    let outsider = super::slack_teams::click_outsider(state, payload).await;
    let outcome = match (outsider, click.action_id.as_str()) {
        (Some(team), _) => {
            tracing::warn!(team = %team, "refused a Slack click from another organisation's person");
            super::slack_teams::refuse_click(state, kind, Some(&team), true)
        }
        (None, super::digest::PROPOSE_ACTION | super::digest::PR_ACTION | super::digest::DISMISS_ACTION) => {
            super::digest::click(state, &click, payload).await?
        }
        (None, _) => decide(state, &click).await?,
    };
    let Some(slack) = state.slack.clone() else {
        return Ok(outcome);
    };
    let note = match &outcome {
        Click::Refused(text) => Some(text.clone()),
        Click::NotAdmitted { .. } => {
            Some("This button takes clicks only from people of the organisation that runs steward.".to_string())
        }
        Click::Rated { .. } => Some("Thanks for the feedback.".to_string()),
        Click::Escalated => Some("I've asked a person to help; they'll answer in the thread.".to_string()),
        Click::Proposing => Some(
            "Proposing a fix: cases from the problem's runs, a change, and the evals run live before and after it. The report comes in this thread.".to_string(),
        ),
        _ => None,
    };
    // A 👎 asks what went wrong, in a modal (it must open within Slack's 3 s).
    let modal = match &outcome {
        Click::Rated { up: false } => click.value.split_once(':').map(|(_, run)| {
            serde_json::json!({"trigger_id": click.trigger_id, "view": message::feedback_modal(run)})
        }),
        _ => None,
    };
    state.tasks.spawn(async move {
        if let Some(body) = modal
            && let Err(e) = slack.call("views.open", &body).await
        {
            tracing::warn!(error = %e, "cannot ask what went wrong");
        }
        if let Some(text) = note {
            let request = SlackApiChatPostEphemeralRequest::new(
                click.channel.as_str().into(),
                click.user.as_str().into(),
                SlackMessageContent::new().with_text(text),
            );
            if let Err(e) = slack.send("chat.postEphemeral", &request).await {
                tracing::warn!(error = %e, "cannot answer a click");
            }
        }
    });
    Ok(outcome)
}

/// What a person wrote in the 👎 modal, stored with their score. A private run keeps
/// no text at rest: only that a comment was given.
async fn comment(state: &AppState, payload: &Value) -> Result<Click, crate::store::StoreError> {
    let (Some(user), Some(run_id)) = (
        payload["user"]["id"].as_str(),
        payload["view"]["private_metadata"].as_str(),
    ) else {
        return Ok(Click::Ignored);
    };
    let text = payload["view"]["state"]["values"]["comment"]["text"]["value"]
        .as_str()
        .unwrap_or_default()
        .trim();
    let store = &state.runner.store;
    let Some(run) = store.get_run(run_id).await? else {
        return Ok(Click::Ignored);
    };
    if text.is_empty() {
        return Ok(Click::Ignored);
    }
    let kept = crate::types::Privacy::from_private(run.private)
        .wrap(text)
        .to_string();
    if !store
        .explain_score(run_id, FEEDBACK_CRITERION, user, &kept)
        .await?
    {
        tracing::warn!(run = %run_id, "a feedback comment without a score");
        return Ok(Click::Ignored);
    }
    tracing::info!(run = %run_id, "feedback comment recorded");
    Ok(Click::Commented)
}

async fn decide(state: &AppState, click: &ButtonClick) -> Result<Click, crate::store::StoreError> {
    let (user, value) = (click.user.as_str(), click.value.as_str());
    let decision = match click.action_id.as_str() {
        "steward_approve" => APPROVED,
        "steward_deny" => DENIED,
        // `steward_feedback_up` / `_down`: the buttons of answers posted before Slack's
        // feedback buttons; their clicks still count.
        message::FEEDBACK_ACTION | "steward_feedback_up" | "steward_feedback_down" => {
            return rate(state, click).await;
        }
        message::ESCALATE_ACTION => return super::escalation::escalate(state, click).await,
        message::RESOLVE_ACTION => return super::escalation::resolve(state, click).await,
        _ => return Ok(Click::Ignored),
    };
    let Some((approval_id, run_id)) = value.split_once(':') else {
        return Ok(Click::Refused("This button is not valid.".into()));
    };
    let store = &state.runner.store;
    let row = match store.get_approval(approval_id).await? {
        Some(row) if row.run_id == run_id => row,
        _ => {
            tracing::warn!(%user, value, "refused an approval click naming no such request");
            return Ok(Click::Refused(
                "This button does not match a request waiting for a decision.".into(),
            ));
        }
    };
    if let Some(done) = &row.decision {
        let by = row
            .decided_by
            .as_deref()
            .map(|u| format!(" by <@{u}>"))
            .unwrap_or_default();
        return Ok(Click::Refused(format!(
            "Already decided: {}{by}.",
            done.replace('_', " ")
        )));
    }
    let allowed = row.requester.as_deref() == Some(user) || row.approvers.iter().any(|a| a == user);
    if !allowed {
        let mut who: Vec<String> = row.requester.iter().map(|u| format!("<@{u}>")).collect();
        who.extend(row.approvers.iter().map(|u| format!("<@{u}>")));
        return Ok(Click::Refused(format!(
            "Only {} can decide this.",
            who.join(", ")
        )));
    }
    // Past its deadline a request is timed out, though the sweep that records it may
    // not have run yet (a stopping process, one just started).
    let now = Utc::now();
    if row.deadline <= now {
        return Ok(Click::Refused(
            "This request timed out before it was decided; ask again if it is still needed.".into(),
        ));
    }
    if !store.decide_approval(&row.id, decision, Some(user), now).await? {
        return Ok(Click::Refused("Already decided.".into()));
    }
    tracing::info!(run = %row.run_id, tool = %row.tool, decision, %user, "approval decided");
    state.resume.notify_one();
    let verdict = if decision == APPROVED {
        "Approved"
    } else {
        "Denied"
    };
    let outcome = format!("{verdict} by <@{user}>.");
    let (store, slack) = (store.clone(), state.slack.clone());
    state
        .tasks
        .spawn(async move { update_request(store.as_ref(), slack.as_ref(), &row, &outcome).await });
    Ok(Click::Decided { decision })
}

/// A 👍 / 👎 button: one human score per person and run (a second click is refused).
/// Counted only for a run of an agent that asks for feedback and that posted its
/// answer in Slack in the channel the button is in, and only for the two votes.
async fn rate(state: &AppState, click: &ButtonClick) -> Result<Click, crate::store::StoreError> {
    let (user, value) = (click.user.as_str(), click.value.as_str());
    let up = match value.split_once(':') {
        Some(("up", _)) => true,
        Some(("down", _)) => false,
        _ => return Ok(Click::Refused("This button is not valid.".into())),
    };
    let run_id = value.split_once(':').map(|(_, r)| r).unwrap_or_default();
    let store = &state.runner.store;
    let Some(run) = store.get_run(run_id).await? else {
        return Ok(Click::Refused("This answer's run is gone.".into()));
    };
    let asks = state
        .config
        .agents
        .get(&run.agent)
        .is_some_and(|a| a.output.feedback);
    if !asks || !posted_in(store.as_ref(), run_id, &click.channel).await? {
        tracing::warn!(run = %run_id, %user, "refused feedback for a run that posted no answer with feedback buttons here");
        return Ok(Click::Refused("This button is not valid.".into()));
    }
    let scores = store.run_scores(run_id).await?;
    if scores
        .iter()
        .any(|s| s.kind == "human" && s.criterion == FEEDBACK_CRITERION && s.source.as_deref() == Some(user))
    {
        return Ok(Click::Refused("You already rated this answer.".into()));
    }
    let score = crate::store::Score {
        kind: "human".into(),
        criterion: FEEDBACK_CRITERION.into(),
        passed: Some(up),
        score: if up { 1.0 } else { -1.0 },
        explanation: None,
        source: Some(user.to_string()),
        cost_usd: 0.0,
        at: Utc::now(),
    };
    // The check above is for the usual case; two clicks arriving together both pass it,
    // and the store takes one.
    if !store.add_score(run_id, &score).await? {
        return Ok(Click::Refused("You already rated this answer.".into()));
    }
    state.runner.metrics.feedback(&run.agent, up);
    tracing::info!(run = %run_id, up, "feedback recorded");
    Ok(Click::Rated { up })
}

/// Whether run `run_id` posted its answer in Slack channel `channel`: its `reply`
/// event names that channel and a `reply_sent` event says it went out.
async fn posted_in(
    store: &dyn crate::store::Store,
    run_id: &str,
    channel: &str,
) -> Result<bool, crate::store::StoreError> {
    let events = store.run_events(run_id).await?;
    let aimed = events
        .iter()
        .any(|e| e.kind == "reply" && e.data["destination"]["slack"].as_str() == Some(channel));
    let sent = events
        .iter()
        .any(|e| e.kind == "reply_sent" && e.data["ok"] == true);
    Ok(aimed && sent)
}

/// The criterion of a score from the feedback buttons.
pub const FEEDBACK_CRITERION: &str = "feedback_button";

/// Replaces the request's buttons with its outcome (`chat.update`).
pub async fn update_request(
    store: &dyn crate::store::Store,
    slack: Option<&crate::integrations::slack::SlackClient>,
    row: &crate::store::ApprovalRow,
    outcome: &str,
) {
    let (Some(slack), Some(channel), Some(ts)) = (slack, &row.channel, &row.message_ts) else {
        return;
    };
    let agent = match store.get_run(&row.run_id).await {
        Ok(Some(run)) => run.agent,
        _ => String::new(),
    };
    let content = message::approval_decided(&agent, &row.tool, outcome);
    let request = SlackApiChatUpdateRequest::new(channel.as_str().into(), content, ts.as_str().into());
    if let Err(e) = slack.send("chat.update", &request).await {
        tracing::warn!(error = %e, "cannot update an approval request");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_documented_block_actions_payload_is_a_click() {
        let payload = json!({"type": "block_actions", "team": {"id": "T9TK3CUKW", "domain": "example"},
            "user": {"id": "UA8RXUSPL", "username": "jtorrance", "team_id": "T9TK3CUKW"},
            "api_app_id": "AABA1ABCD", "token": "9s8d9as89d8as9d8as989", "trigger_id": "13345224609.738474920.8088930838d88f008e0",
            "container": {"type": "message", "message_ts": "1548261231.000200", "channel_id": "CBR2V3XEX", "is_ephemeral": false},
            "channel": {"id": "CBR2V3XEX", "name": "review-updates"},
            "response_url": "https://hooks.slack.com/actions/AABA1ABCD/1232321/8BCtKMS0MI2RRaZJBwxLHSR",
            "actions": [{"action_id": "steward_approve", "block_id": "steward_approval", "type": "button",
                         "text": {"type": "plain_text", "text": "Approve", "emoji": true},
                         "value": "a1:r1", "style": "primary", "action_ts": "1548426417.840180"}]});
        assert_eq!(
            button_click(&payload),
            Some(ButtonClick {
                user: "UA8RXUSPL".into(),
                channel: "CBR2V3XEX".into(),
                action_id: "steward_approve".into(),
                value: "a1:r1".into(),
                trigger_id: "13345224609.738474920.8088930838d88f008e0".into(),
                message_ts: Some("1548261231.000200".into()),
                thread_ts: None,
            })
        );
        let view = json!({"type": "view_closed", "team": {"id": "T1", "domain": "x"}, "user": {"id": "U1"},
            "api_app_id": "A1", "view": {"id": "V1"}, "is_cleared": false});
        assert_eq!(button_click(&view), None);
        assert_eq!(button_click(&json!({"type": "block_actions"})), None);
    }
}
