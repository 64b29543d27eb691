//! Slack's agent DM view: when a person opens it (`app_home_opened` on the Messages
//! tab) or starts a thread in it (`assistant_thread_started`), the prompts of the agent
//! that answers DMs are suggested (`assistant.threads.setSuggestedPrompts`); the channel
//! the person looks at beside it (`assistant_thread_context_changed`) is remembered for
//! that thread and given to its runs as `viewing_channel` in the trigger's payload;
//! the channel beside the view as a whole (`app_context_changed`, when it names the
//! person) is kept for that person's DM runs without a thread context.
//! Only the channel id is kept: its content is fetched by a run's tools, with the
//! bot's access, only when the run needs it.

use serde_json::{Value, json};

use crate::config::{Config, TriggerSpec};
use crate::integrations::slack::SlackClient;
use crate::store::{Store, StoreError};
use crate::triggers::{Origin, TriggerEvent};

/// The setting holding the channel a person looks at beside agent thread `thread_ts`.
fn context_key(channel: &str, thread_ts: &str) -> String {
    format!("agent_view_context:{channel}:{thread_ts}")
}

/// The setting holding the channel `user` looks at beside the agent view
/// (`app_context_changed`); empty when none.
fn person_key(user: &str) -> String {
    format!("agent_view_person:{user}")
}

/// The `assistant.threads.setSuggestedPrompts` body for the agent that answers DMs;
/// `None` when no such agent suggests any.
pub fn suggestions(config: &Config, channel: &str, thread_ts: Option<&str>) -> Option<Value> {
    let agent = config.agents.values().find(|a| {
        !a.suggested_prompts.is_empty() && a.triggers.iter().any(|t| matches!(t, TriggerSpec::SlackDm(_)))
    })?;
    let mut body = json!({"channel_id": channel, "prompts": agent.suggested_prompts});
    if let Some(ts) = thread_ts {
        body["thread_ts"] = json!(ts);
    }
    Some(body)
}

/// Acts on an agent-view event; `false` when `trigger` is none (it routes as usual).
pub async fn handle(
    store: &dyn Store,
    slack: Option<&SlackClient>,
    config: &Config,
    trigger: &TriggerEvent,
) -> Result<bool, StoreError> {
    let Origin::Slack {
        channel, thread_ts, ..
    } = &trigger.origin
    else {
        return Ok(false);
    };
    let kind = trigger.kind.as_str();
    if !matches!(
        kind,
        "assistant_thread_started"
            | "assistant_thread_context_changed"
            | "app_home_opened"
            | "app_context_changed"
    ) {
        return Ok(false);
    }
    if kind == "app_context_changed" {
        if let (Origin::Slack { user: Some(user), .. }, Some(viewing)) =
            (&trigger.origin, trigger.payload["viewing_channel"].as_str())
        {
            store.set_setting(&person_key(user), viewing).await?;
        }
        return Ok(true);
    }
    if let (Some(ts), Some(viewing)) = (thread_ts, trigger.payload["viewing_channel"].as_str()) {
        store.set_setting(&context_key(channel, ts), viewing).await?;
    }
    if kind != "assistant_thread_context_changed"
        && let (Some(slack), Some(body)) = (slack, suggestions(config, channel, thread_ts.as_deref()))
        && let Err(e) = slack.call("assistant.threads.setSuggestedPrompts", &body).await
    {
        tracing::warn!(error = %e, "cannot suggest prompts in the agent view");
    }
    Ok(true)
}

/// Gives a DM run the channel its person looks at, when Slack said: for its agent
/// thread (`assistant_thread_context_changed`), else for the person
/// (`app_context_changed`).
pub async fn add_context(store: &dyn Store, trigger: &mut TriggerEvent) -> Result<(), StoreError> {
    let Origin::Slack {
        channel,
        thread_ts,
        user,
        ..
    } = &trigger.origin
    else {
        return Ok(());
    };
    if !trigger.payload["viewing_channel"].is_null() || !channel.starts_with('D') {
        return Ok(());
    }
    let mut viewing = match thread_ts {
        Some(ts) => store.get_setting(&context_key(channel, ts)).await?,
        None => None,
    };
    if viewing.is_none()
        && let Some(user) = user
    {
        viewing = store
            .get_setting(&person_key(user))
            .await?
            .filter(|v| !v.is_empty());
    }
    if let Some(viewing) = viewing {
        trigger.payload["viewing_channel"] = json!(viewing);
    }
    Ok(())
}
