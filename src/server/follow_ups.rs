//! Follow-ups: a person's message in a Slack thread that an agent answered reaches
//! that agent again without a new mention, within its `follow_up_window` after its
//! last reply there. One agent per thread (the last to answer), so two never both
//! answer the same follow-up.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::config::{AgentConfig, Config};
use crate::run::thread::owner_key;
use crate::store::{Store, StoreError};
use crate::triggers::{Origin, TriggerEvent};

/// The agent a thread message continues, if any: a plain message (not a mention, an
/// edit, a bot's) from a person, in a channel thread an agent answered recently, that
/// does not address someone else.
pub async fn owner(
    store: &dyn Store,
    config: &Config,
    trigger: &TriggerEvent,
    now: DateTime<Utc>,
) -> Result<Option<Arc<AgentConfig>>, StoreError> {
    let Origin::Slack {
        channel,
        thread_ts: Some(thread_ts),
        user: Some(_),
        ..
    } = &trigger.origin
    else {
        return Ok(None);
    };
    if trigger.kind != "message" {
        return Ok(None);
    }
    // Addressed to someone else (a mention of the bot arrives as app_mention instead).
    if trigger.text.as_deref().is_some_and(|t| t.contains("<@")) {
        return Ok(None);
    }
    let Some(recorded) = store.get_setting(&owner_key(channel, thread_ts)).await? else {
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
