//! Which Slack rules an event matches.

use crate::config::TriggerSpec;
use crate::triggers::{Origin, TriggerEvent};

use crate::config::trigger::in_list;

/// Whether Slack `rule` matches `event`; `None` when `rule` is not a Slack rule.
pub fn matches(rule: &TriggerSpec, event: &TriggerEvent) -> Option<bool> {
    let Origin::Slack {
        channel,
        channel_type,
        reaction,
        ..
    } = &event.origin
    else {
        return match rule {
            TriggerSpec::SlackMention(_)
            | TriggerSpec::SlackMessage(_)
            | TriggerSpec::SlackDm(_)
            | TriggerSpec::SlackReaction(_) => Some(false),
            _ => None,
        };
    };
    Some(match rule {
        TriggerSpec::SlackMention(r) => event.kind == "app_mention" && in_list(&r.channels, channel),
        TriggerSpec::SlackMessage(r) => event.kind == "message" && in_list(&r.channels, channel),
        TriggerSpec::SlackDm(_) => {
            event.kind == "message" && (channel_type.as_deref() == Some("im") || channel.starts_with('D'))
        }
        TriggerSpec::SlackReaction(r) => {
            event.kind == "reaction_added"
                && reaction.as_deref() == Some(r.reaction.as_str())
                && in_list(&r.channels, channel)
        }
        _ => return None,
    })
}
