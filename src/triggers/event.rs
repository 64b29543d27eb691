//! The event that starts a run, normalized across sources.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::files::NewFile;

/// Where an event came from, with what routing and replies need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Origin {
    #[default]
    Cli,
    Slack {
        team: Option<String>,
        channel: String,
        /// `channel`, `group`, `im` or `mpim` when Slack says.
        channel_type: Option<String>,
        user: Option<String>,
        /// The message the event is about.
        ts: Option<String>,
        /// The thread root, when the message is in a thread.
        thread_ts: Option<String>,
        reaction: Option<String>,
    },
    Jira {
        issue_key: String,
        project: String,
        webhook_event: String,
        changed_fields: Vec<String>,
        /// The triggering comment's `visibility` (a role or group): a reply is
        /// restricted the same way.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        visibility: Option<Value>,
        /// The triggering comment is a service desk's internal note (`jsdPublic:
        /// false`): a reply is internal too, never shown to the customer.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        internal: bool,
    },
    Notion {
        entity_id: Option<String>,
        entity_type: Option<String>,
        /// The database a page belongs to, dashes removed.
        database_id: Option<String>,
        /// The page the event is about (the page itself, or a comment's page).
        #[serde(default)]
        page_id: Option<String>,
    },
    Webhook {
        name: String,
    },
    Cron {
        agent: String,
        trigger: usize,
        schedule: String,
        slot: String,
    },
    Subagent {
        parent_run: String,
    },
}

impl Origin {
    /// Where a Slack reply goes: the channel, and the thread's root (the thread of a
    /// threaded message, else the message itself: a reaction's target, a mention). A
    /// message at the root of a direct message has no thread: a DM reads as a chat.
    /// `None` for other origins.
    pub fn slack_thread(&self) -> Option<(&str, Option<&str>)> {
        let Origin::Slack {
            channel,
            channel_type,
            ts,
            thread_ts,
            reaction,
            ..
        } = self
        else {
            return None;
        };
        let dm = channel_type.as_deref() == Some("im") || channel.starts_with('D');
        if dm && thread_ts.is_none() && reaction.is_none() {
            return Some((channel, None));
        }
        Some((channel, thread_ts.as_deref().or(ts.as_deref())))
    }

    /// A Jira origin's issue and the restriction an answer there is posted under (the
    /// triggering comment's visibility or internal flag; none for an issue event).
    pub fn jira_answer(&self) -> Option<(&str, crate::types::jira_restriction::Restriction)> {
        match self {
            Origin::Jira {
                issue_key,
                visibility,
                internal,
                ..
            } => Some((
                issue_key.as_str(),
                crate::types::jira_restriction::Restriction {
                    visibility: visibility.clone(),
                    internal: *internal,
                },
            )),
            _ => None,
        }
    }

    /// Where a reply to this origin lands, as a conversation: a Slack thread
    /// (`channel:root ts`) or DM (`channel`), a Jira issue's comments (`jira:KEY`), a
    /// Notion page's comments (`notion:page`). `None` for the other sources.
    pub fn conversation(&self) -> Option<String> {
        match self {
            Origin::Jira { issue_key, .. } if !issue_key.is_empty() => Some(format!("jira:{issue_key}")),
            Origin::Notion {
                page_id: Some(page), ..
            } => Some(format!("notion:{page}")),
            _ => self.slack_thread().map(|(channel, root)| match root {
                Some(root) => format!("{channel}:{root}"),
                None => channel.to_string(),
            }),
        }
    }
}

/// Event kinds that are a comment: a turn of the conversation on their issue or page.
pub const COMMENT_KINDS: &[&str] = &["comment_created", "comment.created"];

/// A normalized trigger: where it came from, a one-line summary for listings, and the
/// payload the agent sees.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TriggerEvent {
    /// `cli`, `slack`, `jira`, `notion`, `webhook`, `cron`, `subagent`.
    pub source: String,
    /// Source-specific event type (`app_mention`, `jira:issue_created`, ...).
    pub kind: String,
    /// One line for run listings; never message content from private channels.
    pub summary: String,
    /// Text addressed to the agent, when the event has one (a mention, a prompt).
    pub text: Option<String>,
    pub payload: Value,
    /// From a private channel: no message content may reach logs, traces or events.
    #[serde(default)]
    pub private: bool,
    #[serde(default)]
    pub origin: Origin,
    /// Files that came with the event (Slack files, Jira attachments, `--file`).
    #[serde(skip)]
    pub attachments: Vec<NewFile>,
    /// The W3C `traceparent` of the span that received the event, stored with it so the
    /// run continues the same trace across the queue and across a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Slack's `action_token` when a person caused the event: the run may search what
    /// they can see. Memory only (never serialized, so never stored or sealed).
    #[serde(skip)]
    pub action_token: Option<crate::types::ActionToken>,
}

impl TriggerEvent {
    /// An event handed to `steward run --event`. A top-level `text` (or `prompt`)
    /// string becomes the text addressed to the agent.
    pub fn from_cli(mut payload: Value) -> TriggerEvent {
        // The text moves out of the payload so the model does not read it twice.
        let text = ["text", "prompt"].iter().find_map(|k| {
            let obj = payload.as_object_mut()?;
            match obj.get(*k) {
                Some(Value::String(_)) => obj.remove(*k).and_then(|v| v.as_str().map(str::to_string)),
                _ => None,
            }
        });
        let summary = match &text {
            Some(t) => one_line(t, 120),
            None => one_line(&payload.to_string(), 120),
        };
        TriggerEvent {
            source: "cli".into(),
            kind: "manual".into(),
            summary,
            text,
            payload,
            private: false,
            origin: Origin::Cli,
            attachments: Vec::new(),
            traceparent: None,
            action_token: None,
        }
    }

    /// Who triggered the event, as the source names them: a Slack user id (the
    /// inspector turns it into a display name), a Jira account id (a display name is
    /// anyone's to choose), a Notion user id,
    /// the hook name, `schedule` or `cli`.
    pub fn actor(&self) -> Option<String> {
        let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        match &self.origin {
            Origin::Slack { user, .. } => user.clone(),
            Origin::Jira { .. } => text(&self.payload["account"]),
            Origin::Notion { .. } => text(&self.payload["authors"][0]["id"]),
            Origin::Webhook { name } => Some(format!("webhook {name}")),
            Origin::Cron { .. } => Some("schedule".into()),
            Origin::Cli => Some("cli".into()),
            Origin::Subagent { .. } => None,
        }
    }

    /// The conversation the trigger is a turn of, where runs answer one at a time: a
    /// Slack thread (`channel:root ts`; a message or reaction at a channel's root starts
    /// its own) or a whole direct message (`channel`); a comment on a Jira issue or a
    /// Notion page. `None` for other events (an issue update is no turn of its
    /// comments).
    pub fn conversation_key(&self) -> Option<String> {
        match &self.origin {
            Origin::Slack { .. } => self.origin.conversation(),
            Origin::Jira { .. } | Origin::Notion { .. } if COMMENT_KINDS.contains(&self.kind.as_str()) => {
                self.origin.conversation()
            }
            _ => None,
        }
    }

    /// Where a run of this trigger takes its conversation's later messages: the
    /// [`Self::conversation_key`] and who may read what is said there (private or not;
    /// a Jira comment's visibility and internal flag). A later message meant for fewer
    /// people (an internal note on a customer's ticket, a channel made private meanwhile)
    /// starts its own run rather than going to a run that answers more.
    pub fn handoff_key(&self) -> Option<String> {
        let conversation = self.conversation_key()?;
        let restriction = self.origin.jira_answer().map(|(_, r)| r).unwrap_or_default();
        Some(format!(
            "{conversation}\u{1f}private={}\u{1f}visibility={}\u{1f}internal={}",
            self.private,
            restriction
                .visibility_body()
                .map(|v| v.to_string())
                .unwrap_or_default(),
            restriction.internal
        ))
    }

    /// The first user message of an LLM run.
    pub fn to_prompt(&self) -> String {
        self.to_prompt_with(self.text.as_deref())
    }

    /// [`Self::to_prompt`] with `text` in place of the event's own (its readable form).
    pub fn to_prompt_with(&self, text: Option<&str>) -> String {
        let mut out = format!("Trigger: {} {}\n", self.source, self.kind);
        if let Some(text) = text {
            out.push_str("\nMessage:\n");
            out.push_str(text);
            out.push('\n');
        }
        let payload =
            serde_json::to_string_pretty(&self.payload).unwrap_or_else(|_| self.payload.to_string());
        out.push_str("\nEvent payload (JSON):\n```json\n");
        out.push_str(&payload);
        out.push_str("\n```\n");
        out
    }
}

/// The first line of `text`, cut to `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max {
        line.to_string()
    } else {
        let mut s: String = line.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_key_names_the_conversation_and_its_readers() {
        let jira = |visibility: Option<Value>, internal: bool, private: bool| TriggerEvent {
            private,
            kind: "comment_created".into(),
            origin: Origin::Jira {
                issue_key: "HELP-12".into(),
                project: "HELP".into(),
                webhook_event: "comment_created".into(),
                changed_fields: vec![],
                visibility,
                internal,
            },
            source: "jira".into(),
            ..TriggerEvent::from_cli(Value::Null)
        };
        let public = jira(None, false, false).handoff_key().unwrap();
        assert_eq!(Some(public.clone()), jira(None, false, false).handoff_key());
        assert!(public.starts_with("jira:HELP-12"), "{public}");
        let role = Some(serde_json::json!({"type": "role", "value": "Developers"}));
        for other in [
            jira(None, true, true),
            jira(role, false, true),
            jira(None, false, true),
        ] {
            assert_ne!(other.handoff_key().unwrap(), public);
        }
    }
    use serde_json::json;

    #[test]
    fn cli_events_pick_up_text() {
        let e = TriggerEvent::from_cli(json!({"text": "What time is it in Tokyo?\nthanks", "user": "U1"}));
        assert_eq!(e.summary, "What time is it in Tokyo?");
        let p = e.to_prompt();
        assert!(p.starts_with("Trigger: cli manual\n\nMessage:\nWhat time is it in Tokyo?\nthanks\n"));
        assert!(p.contains("\"user\": \"U1\""));
    }

    #[test]
    fn one_line_truncates() {
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("ab\ncd", 4), "ab");
    }
}

/// An inbound payload that cannot be understood (answered 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PayloadError(pub String);

impl From<&str> for PayloadError {
    fn from(reason: &str) -> Self {
        PayloadError(reason.to_string())
    }
}
