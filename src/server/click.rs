//! A Slack click as steward reads it: the button in a `block_actions` payload, and what
//! the click came to (told to the person who clicked). Shared by the interactivity
//! route and the buttons' owners (approvals, escalations, digests).

use serde::Deserialize;
use serde_json::Value;
use slack_morphism::events::{SlackInteractionActionContainer, SlackInteractionEvent};

/// What a click came to, told to the person who clicked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Click {
    /// Decided now; the request message is updated for everyone.
    Decided { decision: &'static str },
    /// A 👍 / 👎 on an answer, recorded as a human score.
    Rated { up: bool },
    /// What went wrong, written after a 👎, stored with that score.
    Commented,
    /// A person was called from an answer ("Get help from a person").
    Escalated,
    /// An owner marked a call for a person resolved.
    Resolved,
    /// An owner asked for a fix to a digest's problem; the report follows in its thread.
    Proposing,
    /// An owner opened a pull request for an improvement, or dismissed it.
    Improvement,
    /// A note only the clicker sees.
    Refused(String),
    /// A click by someone steward does not act for (a workspace `SLACK_TEAM_IDS` does
    /// not list, or another organisation's person in a shared channel): nothing done,
    /// recorded as refused with `reason`.
    NotAdmitted { reason: String },
    /// Not an approval button (another app's action): nothing to do.
    Ignored,
}

/// A button click, read through slack-morphism's `block_actions` model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ButtonClick {
    pub user: String,
    pub channel: String,
    pub action_id: String,
    pub value: String,
    /// Lets the app open a modal for the clicker (a few seconds).
    pub trigger_id: String,
    /// The message the button is on, and its thread's root when it is in one.
    pub message_ts: Option<String>,
    pub thread_ts: Option<String>,
}

/// The click in an interactivity payload; `None` for other interactions (views,
/// shortcuts) and payloads without a button.
pub fn button_click(payload: &Value) -> Option<ButtonClick> {
    let event = match SlackInteractionEvent::deserialize(payload) {
        Ok(SlackInteractionEvent::BlockActions(event)) => event,
        Ok(_) => return None,
        Err(e) => {
            tracing::debug!(error = %e, "interactivity payload not understood");
            return None;
        }
    };
    let action = event.actions.as_ref()?.first()?;
    let container_channel = match &event.container {
        SlackInteractionActionContainer::Message(m) => m.channel_id.as_ref().map(|c| c.to_string()),
        _ => None,
    };
    Some(ButtonClick {
        user: event.user.as_ref()?.id.to_string(),
        channel: event
            .channel
            .as_ref()
            .map(|c| c.id.to_string())
            .or(container_channel)
            .unwrap_or_default(),
        action_id: action.action_id.to_string(),
        value: action.value.clone().unwrap_or_default(),
        trigger_id: event.trigger_id.to_string(),
        message_ts: payload["container"]["message_ts"]
            .as_str()
            .or(payload["message"]["ts"].as_str())
            .map(str::to_string),
        thread_ts: payload["message"]["thread_ts"].as_str().map(str::to_string),
    })
}
