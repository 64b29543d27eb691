//! Follow-ups: a person's message in a Slack thread that an agent answered reaches
//! that agent again without a new mention, within its `follow_up_window` after its
//! last reply there; so does a Jira or Notion comment that mentions the bot on an
//! issue or page where an agent answered. One agent per conversation (the last to
//! answer), so two never both answer the same follow-up.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::config::{AgentConfig, Config};
use crate::run::thread::owner_key;
use crate::store::{Store, StoreError};
use crate::triggers::event::COMMENT_KINDS;
use crate::triggers::{Origin, Sources, TriggerEvent};

/// Whether `trigger` may continue its conversation: in Slack, a plain message (not a
/// mention, an edit, a bot's) from a person in a channel thread that does not address
/// someone else; on Jira or Notion, a comment that mentions the bot.
async fn continues(sources: &Sources, trigger: &TriggerEvent) -> bool {
    match &trigger.origin {
        Origin::Slack {
            thread_ts: Some(_),
            user: Some(_),
            ..
        } => {
            // Addressed to someone else (a mention of the bot arrives as app_mention).
            trigger.kind == "message" && !trigger.text.as_deref().is_some_and(|t| t.contains("<@"))
        }
        Origin::Jira { .. } | Origin::Notion { .. } => {
            COMMENT_KINDS.contains(&trigger.kind.as_str()) && sources.addresses_bot(trigger).await
        }
        _ => false,
    }
}

/// The agent a message continues, if any: one that answered in its conversation
/// recently, when the message may continue it (see [`continues`]).
pub async fn owner(
    store: &dyn Store,
    sources: &Sources,
    config: &Config,
    trigger: &TriggerEvent,
    now: DateTime<Utc>,
) -> Result<Option<Arc<AgentConfig>>, StoreError> {
    let Some(conversation) = trigger.conversation_key() else {
        return Ok(None);
    };
    if !continues(sources, trigger).await {
        return Ok(None);
    }
    let Some(recorded) = store.get_setting(&owner_key(&conversation)).await? else {
        return Ok(None);
    };
    let Ok(recorded) = serde_json::from_str::<serde_json::Value>(&recorded) else {
        return Ok(None);
    };
    let Some(agent) = recorded["agent"].as_str().and_then(|a| config.agents.get(a)) else {
        return Ok(None);
    };
    let Some(window) = agent.follow_ups else {
        return Ok(None);
    };
    let answered = recorded["at"]
        .as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc));
    let fresh = answered.is_some_and(|at| now - at <= chrono::Duration::from_std(window).unwrap_or_default());
    Ok(fresh.then(|| agent.clone()))
}
