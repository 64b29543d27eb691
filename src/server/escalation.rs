//! "Get help from a person": the button under an agent's answers and failure notices
//! (`escalation:`), and "Resolved" on the call for help it posts. Both are clicks on
//! `POST /slack/interactivity`, signed like every Slack request, and idempotent: the
//! store keeps one escalation per run, so a second click (or a retried one) is told
//! who asked, and a second "Resolved" who resolved it.
//!
//! Only the person who asked the agent, or a listed owner, may call for help; only a
//! listed owner (a user id in `to`) or the asker may mark it resolved. User groups in
//! `to` are called with a group mention; their members are not looked up.

use chrono::Utc;
use slack_morphism::api::{SlackApiChatPostMessageRequest, SlackApiChatUpdateRequest};

use super::AppState;
use super::click::{ButtonClick, Click};
use crate::config::Escalation;
use crate::integrations::slack::message;
use crate::store::{EscalationRow, StoreError};

/// A click on "Get help from a person" (`esc:<run>`).
pub async fn escalate(state: &AppState, click: &ButtonClick) -> Result<Click, StoreError> {
    let Some(run_id) = click.value.strip_prefix("esc:") else {
        return Ok(Click::Refused("This button is not valid.".into()));
    };
    let store = &state.runner.store;
    let Some(run) = store.get_run(run_id).await? else {
        return Ok(Click::Refused("This answer's run is gone.".into()));
    };
    let Some(esc) = state
        .config
        .agents
        .get(&run.agent)
        .and_then(|a| a.escalation.clone())
    else {
        tracing::warn!(run = %run_id, user = %click.user, "refused an escalation for an agent without one");
        return Ok(Click::Refused("This button is not valid.".into()));
    };
    let asker = run.actor.clone().unwrap_or_default();
    if click.user != asker && !is_owner(&esc, &click.user) {
        return Ok(Click::Refused(format!(
            "Only <@{asker}>, who asked, or {} can ask for a person here.",
            owners(&esc)
        )));
    }
    let row = EscalationRow {
        run_id: run_id.to_string(),
        agent: run.agent.clone(),
        escalated_by: click.user.clone(),
        escalated_at: Utc::now(),
        channel: None,
        message_ts: None,
        resolved_by: None,
        resolved_at: None,
    };
    if !store.escalate(&row).await? {
        let by = store
            .escalation(run_id)
            .await?
            .map(|e| format!(" by <@{}>", e.escalated_by))
            .unwrap_or_default();
        return Ok(Click::Refused(format!("A person was already asked{by}.")));
    }
    state.runner.metrics.escalation(&run.agent, false);
    tracing::info!(run = %run_id, agent = %run.agent, user = %click.user, "escalated to a person");
    if let Some(slack) = state.slack.clone() {
        let (store, click, run_id) = (store.clone(), click.clone(), run_id.to_string());
        state.tasks.spawn(async move {
            if let Err(e) = post_call(&slack, store.as_ref(), &esc, &click, &run_id).await {
                tracing::warn!(run = %run_id, error = %e, "cannot post the call for a person");
            }
        });
    }
    Ok(Click::Escalated)
}

/// Posts the call in the conversation's thread, or in the escalation channel with a
/// link to the conversation, and keeps where it went.
async fn post_call(
    slack: &crate::integrations::slack::SlackClient,
    store: &dyn crate::store::Store,
    esc: &Escalation,
    click: &ButtonClick,
    run_id: &str,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let root = click.thread_ts.clone().or_else(|| click.message_ts.clone());
    let (channel, thread, link) = match &esc.channel {
        Some(channel) => {
            let link = match &click.message_ts {
                Some(ts) => slack
                    .call(
                        "chat.getPermalink",
                        &serde_json::json!({"channel": click.channel, "message_ts": ts}),
                    )
                    .await
                    .ok()
                    .and_then(|v| v["permalink"].as_str().map(str::to_string)),
                None => None,
            };
            (channel.clone(), None, link)
        }
        None => (click.channel.clone(), root, None),
    };
    let content = message::escalation_call(&click.user, &esc.to, link.as_deref(), run_id);
    let mut request = SlackApiChatPostMessageRequest::new(channel.as_str().into(), content);
    request.thread_ts = thread.map(Into::into);
    let sent = slack.send("chat.postMessage", &request).await?;
    if let Some(ts) = sent["ts"].as_str() {
        store.set_escalation_message(run_id, &channel, ts).await?;
    }
    Ok(())
}

/// A click on "Resolved" (`resolve:<run>`).
pub async fn resolve(state: &AppState, click: &ButtonClick) -> Result<Click, StoreError> {
    let Some(run_id) = click.value.strip_prefix("resolve:") else {
        return Ok(Click::Refused("This button is not valid.".into()));
    };
    let store = &state.runner.store;
    let Some(row) = store.escalation(run_id).await? else {
        return Ok(Click::Refused("This button is not valid.".into()));
    };
    let esc = state
        .config
        .agents
        .get(&row.agent)
        .and_then(|a| a.escalation.clone());
    let asker = store.get_run(run_id).await?.and_then(|r| r.actor);
    let allowed = asker.as_deref() == Some(click.user.as_str())
        || esc.as_ref().is_some_and(|e| is_owner(e, &click.user));
    if !allowed {
        let who = esc.as_ref().map_or_else(|| "an owner".to_string(), owners);
        return Ok(Click::Refused(format!("Only {who} can mark this resolved.")));
    }
    if !store.resolve_escalation(run_id, &click.user, Utc::now()).await? {
        let by = row.resolved_by.map(|u| format!(" by <@{u}>")).unwrap_or_default();
        return Ok(Click::Refused(format!("Already resolved{by}.")));
    }
    state.runner.metrics.escalation(&row.agent, true);
    tracing::info!(run = %run_id, user = %click.user, "escalation resolved");
    if let (Some(slack), Some(channel), Some(ts)) = (state.slack.clone(), row.channel, row.message_ts) {
        let to = esc.map(|e| e.to).unwrap_or_default();
        let content = message::escalation_resolved(&row.escalated_by, &to, &click.user);
        state.tasks.spawn(async move {
            let request =
                SlackApiChatUpdateRequest::new(channel.as_str().into(), content, ts.as_str().into());
            if let Err(e) = slack.send("chat.update", &request).await {
                tracing::warn!(error = %e, "cannot mark the call for a person resolved");
            }
        });
    }
    Ok(Click::Resolved)
}

/// Whether `user` is one of the people listed (not a group: members are not looked up).
fn is_owner(esc: &Escalation, user: &str) -> bool {
    esc.to.iter().any(|id| id == user)
}

fn owners(esc: &Escalation) -> String {
    let people: Vec<String> = esc
        .to
        .iter()
        .filter(|id| !id.starts_with('S'))
        .map(|id| format!("<@{id}>"))
        .collect();
    if people.is_empty() {
        "the agent's owners".into()
    } else {
        people.join(", ")
    }
}
