//! Slack Events API payloads (the same envelopes arrive over HTTP and Socket Mode).

use serde::Deserialize;
use serde_json::{Value, json};
use slack_morphism::events::{
    SlackAssistantThreadContextChangedEvent, SlackAssistantThreadStartedEvent, SlackEventCallbackBody,
    SlackMessageEventType, SlackPushEvent,
};
use slack_morphism::{SlackFile, SlackReactionsItem};

use reqwest::header::HeaderMap;

use crate::triggers::auth;
use crate::triggers::event::{PayloadError, one_line};
use crate::triggers::source::{ChannelChange, Inbound, InboundError, header, json_body};
use crate::triggers::{Origin, TriggerEvent};

/// What a Slack payload asks of us.
#[derive(Debug)]
pub enum SlackPayload {
    /// `url_verification`: answer with the challenge.
    Challenge(String),
    /// An event to persist and route, with its dedupe key (`event_id`).
    Event {
        event: Box<TriggerEvent>,
        dedupe_key: String,
    },
    /// An event whose author may be of another organisation (see
    /// [`Inbound::SlackOutsider`]); `team` is the author's workspace when named.
    Outsider {
        event: Box<TriggerEvent>,
        dedupe_key: String,
        team: Option<String>,
    },
    /// A new public channel: join it (answering there only when mentioned).
    ChannelCreated { channel: String, dedupe_key: String },
    /// A channel made private or shared with another organisation.
    ChannelChanged { channel: String, change: ChannelChange },
    /// Authenticated but nothing to do (our own message, an unhandled subtype, ...).
    Ignored(String),
}

/// Message subtypes that carry a human's message; others (edits, joins, bot
/// messages, deletions) are ignored.
const HANDLED_SUBTYPES: &[SlackMessageEventType] = &[
    SlackMessageEventType::FileShare,
    SlackMessageEventType::ThreadBroadcast,
];

/// The parts of a message-like event steward acts on.
struct Said {
    kind: &'static str,
    channel: Option<String>,
    channel_type: Option<String>,
    user: Option<String>,
    text: Option<String>,
    ts: Option<String>,
    thread_ts: Option<String>,
    reaction: Option<String>,
    files: Vec<SlackFile>,
    /// The channel a person looks at beside the agent's DM view (its context).
    viewing: Option<String>,
}

/// Slackbot's user id: its notices are not a person's message.
const SLACKBOT: &str = "USLACKBOT";

/// An org-wide (Enterprise Grid) install's delivery with the workspace ids Slack leaves
/// null filled in, so the typed models read it: `authorizations[].team_id` is null
/// for an org-wide install (the enterprise id stands in), and the top-level `team_id`
/// of org-level events such as `team_access_granted`. Other bodies pass unchanged.
pub fn org_wide(body: &Value) -> std::borrow::Cow<'_, Value> {
    let null_auth = body["authorizations"]
        .as_array()
        .is_some_and(|a| a.iter().any(|a| a["team_id"].is_null()));
    let null_team = body["type"] == "event_callback" && body["team_id"].is_null();
    if !null_auth && !null_team {
        return std::borrow::Cow::Borrowed(body);
    }
    let mut body = body.clone();
    let enterprise = body["enterprise_id"].clone();
    if let Some(auths) = body["authorizations"].as_array_mut() {
        for a in auths {
            if a["team_id"].is_null() {
                a["team_id"] = match &a["enterprise_id"] {
                    Value::String(e) => Value::String(e.clone()),
                    _ => enterprise.clone(),
                };
                if a["team_id"].is_null() {
                    a["team_id"] = Value::String(String::new());
                }
            }
        }
    }
    if null_team {
        body["team_id"] = match enterprise {
            Value::String(e) => Value::String(e),
            _ => Value::String(String::new()),
        };
    }
    std::borrow::Cow::Owned(body)
}

/// `message` with what serde quotes of the payload (`invalid type: string "…"`) left
/// out: this runs before the event's privacy is known, and the reason is kept in the
/// event log and logged.
fn without_strings(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '"' {
            // serde writes strings with Rust's escapes: skip to the unescaped close.
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => break,
                    _ => {}
                }
            }
            out.push_str("…\"");
        }
    }
    out
}

/// The channel and what changed, when `event` says a channel was made private or
/// shared with another organisation (read from the raw event: slack-morphism models
/// neither the subtype nor `channel_shared`).
fn channel_change(event: &Value) -> Option<(String, ChannelChange)> {
    let change = match (event["type"].as_str()?, event["subtype"].as_str()) {
        ("message", Some("channel_convert_to_private")) => ChannelChange::MadePrivate,
        ("channel_shared", _) => ChannelChange::SharedOutside,
        // Still shared with another organisation, or not said: nothing changes.
        ("channel_unshared", _) if event["is_ext_shared"] == false => ChannelChange::UnsharedOutside,
        _ => return None,
    };
    let channel = event["channel"].as_str().filter(|c| !c.is_empty())?;
    Some((channel.to_string(), change))
}

/// Parses an Events API body through slack-morphism's [`SlackPushEvent`]. `bot_user`
/// is the bot's user id, when known, so its own messages are ignored (the payload's
/// `authorizations` also name it). Event types steward does not act on, and known
/// types in a shape the models do not cover, are acknowledged and ignored, never 400.
pub fn parse(body: &Value, bot_user: Option<&str>) -> Result<SlackPayload, PayloadError> {
    let patched = org_wide(body);
    let body: &Value = &patched;
    let push = match SlackPushEvent::deserialize(body) {
        Ok(push) => push,
        Err(e) => {
            return match body["type"].as_str() {
                Some(kind @ ("url_verification" | "event_callback")) => Err(PayloadError(format!(
                    "malformed {kind} payload: {}",
                    without_strings(&e.to_string())
                ))),
                other => Ok(SlackPayload::Ignored(format!("payload type {other:?}"))),
            };
        }
    };
    let callback = match push {
        SlackPushEvent::UrlVerification(v) => return Ok(SlackPayload::Challenge(v.challenge)),
        SlackPushEvent::AppRateLimited(r) => {
            tracing::warn!(team = %r.team_id, "Slack rate-limited this app's events");
            return Ok(SlackPayload::Ignored("app_rate_limited".into()));
        }
        SlackPushEvent::EventCallback(callback) => callback,
    };
    let event_id = callback.event_id.to_string();
    let dedupe_key = format!("slack:{event_id}");
    let team = receiving_team(body);
    // The bot is the authorization Slack marks `is_bot`: the first entry may be a
    // person (a user token's installer), whose messages are then not "our own".
    let bot = bot_user.map(str::to_string).or_else(|| {
        callback
            .authorizations
            .as_ref()
            .and_then(|a| a.iter().find(|a| a.is_bot == Some(true)))
            .map(|a| a.user_id.to_string())
    });
    if let Some((channel, change)) = channel_change(&body["event"]) {
        return Ok(SlackPayload::ChannelChanged { channel, change });
    }
    let said = match callback.event {
        // Another app's mention is a bot's message, ignored like its plain messages (two
        // bots answering each other would loop).
        SlackEventCallbackBody::AppMention(_) if body["event"]["bot_id"].is_string() => {
            return Ok(SlackPayload::Ignored("a bot's mention".into()));
        }
        SlackEventCallbackBody::AppMention(m) => Said {
            kind: "app_mention",
            channel: Some(m.channel.to_string()),
            channel_type: m.origin.channel_type.map(|t| t.to_string()),
            user: Some(m.user.to_string()),
            text: m.content.text,
            ts: Some(m.origin.ts.to_string()),
            thread_ts: m.origin.thread_ts.map(|t| t.to_string()),
            reaction: None,
            files: m.content.files.unwrap_or_default(),
            viewing: None,
        },
        SlackEventCallbackBody::Message(m) => {
            if let Some(sub) = &m.subtype
                && !HANDLED_SUBTYPES.contains(sub)
            {
                return Ok(SlackPayload::Ignored(format!("message subtype {sub:?}")));
            }
            if m.sender.bot_id.is_some() {
                return Ok(SlackPayload::Ignored("our own or a bot's message".into()));
            }
            let (text, files) = match m.content {
                Some(c) => (c.text, c.files.unwrap_or_default()),
                None => (None, Vec::new()),
            };
            let channel_type = m.origin.channel_type.map(|t| t.to_string());
            // A mention also arrives as app_mention; route the mention once.
            if let (Some(b), Some(t)) = (&bot, &text)
                && t.contains(&format!("<@{b}>"))
                && channel_type.as_deref() != Some("im")
            {
                return Ok(SlackPayload::Ignored(
                    "message that mentions the bot (handled as app_mention)".into(),
                ));
            }
            Said {
                kind: "message",
                channel: m.origin.channel.map(|c| c.to_string()),
                channel_type,
                user: m.sender.user.map(|u| u.to_string()),
                text,
                ts: Some(m.origin.ts.to_string()),
                thread_ts: m.origin.thread_ts.map(|t| t.to_string()),
                reaction: None,
                files,
                viewing: None,
            }
        }
        SlackEventCallbackBody::ReactionAdded(r) => {
            let SlackReactionsItem::Message(item) = r.item else {
                return Ok(SlackPayload::Ignored("reaction on a file".into()));
            };
            Said {
                kind: "reaction_added",
                channel: item.origin.channel.map(|c| c.to_string()),
                channel_type: None,
                user: Some(r.user.to_string()),
                text: None,
                ts: Some(item.origin.ts.to_string()),
                thread_ts: None,
                reaction: Some(r.reaction.to_string()),
                files: Vec::new(),
                viewing: None,
            }
        }
        // Slack's Stop button on an agent session: routed as an event of its thread.
        SlackEventCallbackBody::AgentSessionStopped(stopped) => {
            let thread = stopped.thread_ts.map(|t| t.to_string());
            Said {
                kind: "agent_session_stopped",
                channel: Some(stopped.channel.to_string()),
                channel_type: None,
                user: stopped.user.map(|u| u.to_string()),
                text: None,
                ts: thread.clone(),
                thread_ts: thread,
                reaction: None,
                files: Vec::new(),
                viewing: None,
            }
        }
        // The agent DM view: a thread opened (suggested prompts go up), or the channel
        // the person looks at changed (runs of that thread may know it).
        SlackEventCallbackBody::AssistantThreadStarted(SlackAssistantThreadStartedEvent {
            assistant_thread: t,
            ..
        })
        | SlackEventCallbackBody::AssistantThreadContextChanged(SlackAssistantThreadContextChangedEvent {
            assistant_thread: t,
            ..
        }) => Said {
            kind: if body["event"]["type"] == "assistant_thread_started" {
                "assistant_thread_started"
            } else {
                "assistant_thread_context_changed"
            },
            channel: Some(t.channel_id.to_string()),
            channel_type: Some("im".into()),
            user: Some(t.user_id.to_string()),
            text: None,
            ts: Some(t.thread_ts.to_string()),
            thread_ts: Some(t.thread_ts.to_string()),
            reaction: None,
            files: Vec::new(),
            viewing: t.context.channel_id.map(|c| c.to_string()),
        },
        SlackEventCallbackBody::AppHomeOpened(home) if home.tab.as_deref() == Some("messages") => Said {
            kind: "app_home_opened",
            channel: Some(home.channel.to_string()),
            channel_type: Some("im".into()),
            user: Some(home.user.to_string()),
            text: None,
            ts: None,
            thread_ts: None,
            reaction: None,
            files: Vec::new(),
            viewing: None,
        },
        // The channel a person looks at beside the agent view changed. The event names
        // no channel of its own: it is kept for the person's DM with the app (which
        // Slack addresses by user id). Without a person it cannot be attributed to
        // anyone, so it is not kept for everyone.
        SlackEventCallbackBody::AppContextChanged(changed) => {
            let Some(user) = body["event"]["user"].as_str() else {
                return Ok(SlackPayload::Ignored(
                    "app_context_changed names no person".into(),
                ));
            };
            let viewing = changed
                .context
                .entities
                .iter()
                .flatten()
                .find(|e| e.entity_type.0 == "slack#/types/channel_id")
                .map(|e| e.value.clone());
            Said {
                kind: "app_context_changed",
                channel: Some(user.to_string()),
                channel_type: Some("im".into()),
                user: Some(user.to_string()),
                text: None,
                ts: None,
                thread_ts: None,
                reaction: None,
                files: Vec::new(),
                // An empty value: the person looks at no channel now.
                viewing: Some(viewing.unwrap_or_default()),
            }
        }
        SlackEventCallbackBody::ChannelCreated(c) => {
            return Ok(SlackPayload::ChannelCreated {
                channel: c.channel.id.to_string(),
                dedupe_key,
            });
        }
        // Modelled types steward does not act on, and unmodelled ones: named from the
        // raw body rather than by serializing the parsed event back.
        _ => {
            return Ok(SlackPayload::Ignored(format!(
                "event type {}",
                body["event"]["type"].as_str().unwrap_or("(none)")
            )));
        }
    };
    if said.user.is_some() && said.user == bot {
        return Ok(SlackPayload::Ignored("our own or a bot's message".into()));
    }
    // Slackbot's notices ("You have been removed from #...") in the bot's DM.
    if said.user.as_deref() == Some(SLACKBOT) {
        return Ok(SlackPayload::Ignored("a Slackbot notice".into()));
    }
    let kind = said.kind.to_string();
    let channel = said
        .channel
        .ok_or_else(|| PayloadError(format!("{kind} event without a channel")))?;
    let channel_type = said.channel_type;
    // Private channels and DMs: ids starting with G or D, or a non-public channel_type;
    // and channels shared with another organisation (Slack Connect): what a customer or
    // vendor says there is theirs, and is held as private text is.
    let private = channel.starts_with('G')
        || channel.starts_with('D')
        || matches!(channel_type.as_deref(), Some("group" | "im" | "mpim"))
        || body["is_ext_shared_channel"] == true;
    let (text, ts, thread_ts, reaction, user) =
        (said.text, said.ts, said.thread_ts, said.reaction, said.user);
    // Slack sends a mention again, under a new event id, each time its message is
    // edited: a mention is one per message, so an edit is a duplicate of the first
    // (and a mention added by an edit is the message's first).
    let dedupe_key = match (kind.as_str(), &ts) {
        ("app_mention", Some(ts)) => format!("slack:mention:{channel}:{ts}"),
        _ => dedupe_key,
    };
    let summary = match (&reaction, &text) {
        (Some(r), _) => format!(":{r}: in {channel}"),
        (None, Some(t)) if !private => one_line(t, 120),
        _ => format!("{kind} in {channel}"),
    };
    // Files shared with the message: fetched (with the bot token) when the run starts.
    // slack-morphism's file model has no `size`; it is read from the raw event.
    let raw_files = body["event"]["files"].as_array();
    let files: Vec<Value> = said
        .files
        .iter()
        .map(|f| {
            let raw = raw_files.and_then(|all| all.iter().find(|r| r["id"] == f.id.to_string()));
            let size = raw.map(|r| r["size"].clone()).unwrap_or(Value::Null);
            // Slack Connect shares arrive as `file_access: check_file_info`: an id only,
            // to be asked about with `files.info` when the run starts.
            let access = raw.map(|r| r["file_access"].clone()).unwrap_or(Value::Null);
            let url = f.url_private_download.as_ref().or(f.url_private.as_ref()).map(|u| u.to_string());
            json!({"id": f.id.to_string(), "name": f.name, "mimetype": f.mimetype.as_ref().map(|m| m.to_string()),
                   "size": size, "url_private_download": url, "file_access": access})
        })
        .collect();
    let mut event = TriggerEvent {
        source: "slack".into(),
        kind: kind.clone(),
        summary,
        text,
        payload: json!({
            "event_id": event_id, "type": kind, "channel": channel, "channel_type": channel_type,
            "user": user, "ts": ts, "thread_ts": thread_ts, "reaction": reaction, "team": team, "files": files,
        }),
        private,
        origin: Origin::Slack {
            team,
            channel,
            channel_type,
            user,
            ts,
            thread_ts,
            reaction,
        },
        attachments: Vec::new(),
        traceparent: None,
        action_token: None,
    };
    // A person's request may carry Slack's search grant for it (read at the top level,
    // then in the agent view's thread object, where Slack has sent it).
    event.action_token = [
        &body["event"]["action_token"],
        &body["event"]["assistant_thread"]["action_token"],
    ]
    .into_iter()
    .find_map(|v| v.as_str().filter(|t| !t.is_empty()))
    .map(crate::types::ActionToken::new);
    // Only agent-view events name the channel a person looks at.
    if let Some(viewing) = said.viewing {
        event.payload["viewing_channel"] = json!(viewing);
    }
    let event = Box::new(event);
    let home = match &event.origin {
        Origin::Slack { team, .. } => team.clone(),
        _ => None,
    };
    Ok(match outside_author(body, home.as_deref()) {
        Some(team) => SlackPayload::Outsider {
            event,
            dedupe_key,
            team,
        },
        None => SlackPayload::Event { event, dedupe_key },
    })
}

/// For an event in a channel shared with another organisation (Slack Connect: the
/// envelope's `is_ext_shared_channel`), the author's workspace when it is not the one
/// receiving the event: `event.user_team`, else `source_team`, else the profile's
/// `team`, `Some(None)` when the payload names none. `None` for an event of the
/// receiving workspace's own people (`home`, see [`receiving_team`]), and for every
/// event outside such channels. With no `home`, every author there is checked.
fn outside_author(body: &Value, home: Option<&str>) -> Option<Option<String>> {
    if body["is_ext_shared_channel"] != true {
        return None;
    }
    let e = &body["event"];
    let author = e["user_team"]
        .as_str()
        .or(e["source_team"].as_str())
        .or(e["user_profile"]["team"].as_str());
    match author {
        Some(t) if Some(t) == home => None,
        other => Some(other.map(str::to_string)),
    }
}

/// The workspace receiving an event (an org-wide install's body as [`org_wide`] left
/// it). Outside channels shared with another organisation it is the top-level
/// `team_id`. In such a channel that field names the workspace that made the channel,
/// which may be the other organisation's (slackapi/java-slack-sdk#629): the receiving
/// one is the installation's, the bot's entry in `authorizations`. An org-wide
/// install's entry names only its enterprise: the top-level workspace is taken when the
/// envelope places it in that enterprise, else none is, and every author in the
/// channel is checked as a possible outsider (fail closed).
pub fn receiving_team(body: &Value) -> Option<String> {
    let top = body["team_id"].as_str();
    if body["is_ext_shared_channel"] != true {
        return top.map(str::to_string);
    }
    let auths = body["authorizations"].as_array()?;
    let auth = auths.iter().find(|a| a["is_bot"] == true).or(auths.first())?;
    let enterprise = auth["enterprise_id"].as_str().filter(|e| !e.is_empty());
    match auth["team_id"].as_str().filter(|t| !t.is_empty()) {
        Some(t) if Some(t) != enterprise => Some(t.to_string()),
        _ => enterprise
            .filter(|e| body["enterprise_id"].as_str() == Some(e))
            .and(top)
            .filter(|t| !t.is_empty())
            .map(str::to_string),
    }
}

/// Authenticates a request to `/slack/events` (signing secret, five-minute replay
/// window) and parses it.
pub fn receive(
    signing_secret: &str,
    bot_user: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Inbound, InboundError> {
    auth::verify_slack(
        signing_secret,
        header(headers, "x-slack-request-timestamp"),
        header(headers, "x-slack-signature"),
        body,
        now,
    )?;
    receive_payload(&json_body(body)?, bot_user)
}

/// Parses a payload whose sender is already authenticated (Socket Mode).
pub fn receive_payload(value: &Value, bot_user: Option<&str>) -> Result<Inbound, InboundError> {
    Ok(match parse(value, bot_user)? {
        SlackPayload::Challenge(c) => Inbound::Answer(serde_json::json!({"challenge": c})),
        SlackPayload::Event { event, dedupe_key } => Inbound::Event { event, dedupe_key },
        SlackPayload::Outsider {
            event,
            dedupe_key,
            team,
        } => Inbound::SlackOutsider {
            event,
            dedupe_key,
            team,
        },
        SlackPayload::ChannelCreated { channel, .. } => Inbound::JoinChannel(channel),
        SlackPayload::ChannelChanged { channel, change } => Inbound::SlackChannelChanged { channel, change },
        SlackPayload::Ignored(why) => {
            tracing::debug!(%why, "slack event ignored");
            let kind = value["event"]["type"]
                .as_str()
                .or(value["type"].as_str())
                .unwrap_or("unknown");
            Inbound::Ignored {
                source: "slack",
                kind: kind.to_string(),
                reason: why,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(event: Value) -> Value {
        json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456", "event": event,
               "type": "event_callback", "event_id": "Ev123ABC456", "event_time": 1515449522,
               "authorizations": [{"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]})
    }

    /// Slack's own examples of a channel made private (a `message` subtype, from the
    /// Events API reference) and of one shared with another organisation.
    #[test]
    fn a_channel_made_private_or_shared_outside_is_a_channel_change() {
        let converted = envelope(
            json!({"subtype": "channel_convert_to_private", "user": "U1234ABCD",
            "text": "made this channel *private*. Now, it can only be viewed or joined by invitation.",
            "type": "message", "ts": "1730984822.596869", "channel": "C1234ABCD",
            "event_ts": "1730984822.596869", "channel_type": "group"}),
        );
        assert!(matches!(
            parse(&converted, None).unwrap(),
            SlackPayload::ChannelChanged { channel, change: ChannelChange::MadePrivate } if channel == "C1234ABCD"
        ));
        let shared = envelope(json!({"type": "channel_shared", "connected_team_id": "E163Q94DX",
            "channel": "C123ABC456", "event_ts": "1561064063.001100"}));
        assert!(matches!(
            parse(&shared, None).unwrap(),
            SlackPayload::ChannelChanged { channel, change: ChannelChange::SharedOutside } if channel == "C123ABC456"
        ));
        let unshared = envelope(
            json!({"type": "channel_unshared", "previously_connected_team_id": "E163Q94DX",
            "channel": "C123ABC456", "is_ext_shared": false, "event_ts": "1561064063.001100"}),
        );
        assert!(matches!(
            parse(&unshared, None).unwrap(),
            SlackPayload::ChannelChanged {
                change: ChannelChange::UnsharedOutside,
                ..
            }
        ));
        let still_shared = envelope(
            json!({"type": "channel_unshared", "previously_connected_team_id": "E163Q94DX",
            "channel": "C123ABC456", "is_ext_shared": true, "event_ts": "1561064063.001100"}),
        );
        assert!(matches!(
            parse(&still_shared, None).unwrap(),
            SlackPayload::Ignored(_)
        ));
        let nameless = envelope(json!({"type": "channel_shared", "connected_team_id": "E163Q94DX",
            "event_ts": "1561064063.001100"}));
        assert!(matches!(
            parse(&nameless, None).unwrap(),
            SlackPayload::Ignored(_)
        ));
    }

    /// A payload that does not fit the models is refused with what did not fit, never
    /// with the payload's own text (its privacy is not known yet).
    #[test]
    fn a_malformed_payload_is_refused_without_its_text() {
        let mut body = envelope(
            json!({"type": "app_mention", "user": "U1", "text": "hi", "ts": "1.1",
                                       "channel": "D0DM", "event_ts": "1.1"}),
        );
        body["event_time"] = json!("SECRET \"merger\" plans");
        let err = parse(&body, None).err().map(|e| e.0).unwrap_or_default();
        assert!(
            err.starts_with("malformed event_callback payload: invalid type: string \"…\""),
            "{err}"
        );
        assert!(!err.contains("SECRET") && !err.contains("merger"), "{err}");
        assert_eq!(without_strings(r#"a "b \" c" d"#), r#"a "…" d"#);
    }

    /// An org-wide (Enterprise Grid) install: `authorizations[].team_id` is null.
    #[test]
    fn an_org_wide_install_delivery_is_read_not_refused() {
        let body = json!({"token": "XXYYZZ", "team_id": "T0001", "enterprise_id": "E0001", "api_app_id": "A0001",
            "event": {"type": "message", "channel": "D0BOTDM", "user": "U0PERSON", "text": "hello",
                      "ts": "1700000000.000100", "channel_type": "im", "event_ts": "1700000000.000100"},
            "type": "event_callback", "event_id": "Ev0ORGWIDE", "event_time": 1700000000,
            "authorizations": [{"enterprise_id": "E0001", "team_id": null, "user_id": "U0BOT",
                                "is_bot": true, "is_enterprise_install": true}],
            "is_ext_shared_channel": false, "context_team_id": "T0001", "context_enterprise_id": null});
        match parse(&body, None).unwrap() {
            SlackPayload::Event { event, .. } => assert_eq!(event.text.as_deref(), Some("hello")),
            _ => panic!("an org-wide delivery is an event"),
        }
        // An org-level event with a null top-level team_id is acknowledged, not refused.
        let granted = json!({"token": "XXYYZZ", "team_id": null, "enterprise_id": "E0001", "api_app_id": "A0001",
            "event": {"type": "team_access_granted", "team_ids": ["T0002"], "event_ts": "1700000001.000100"},
            "type": "event_callback", "event_id": "Ev0GRANTED", "event_time": 1700000001,
            "authorizations": [{"enterprise_id": "E0001", "team_id": null, "user_id": "U0BOT", "is_bot": true}]});
        assert!(matches!(parse(&granted, None).unwrap(), SlackPayload::Ignored(_)));
    }

    /// In a channel shared with another organisation, the top-level `team_id` names the
    /// workspace that made the channel: in one the partner made, the partner's people
    /// carry that id, and the receiving workspace is the installation's.
    #[test]
    fn a_channel_the_partner_made_does_not_make_the_partner_home() {
        let shared = |user: &str, user_team: &str| {
            let mut body = envelope(
                json!({"type": "app_mention", "user": user, "user_team": user_team,
                "text": "<@UBOT> what did #eng-oncall say?", "ts": "1700000000.000100",
                "channel": "C0SHARED01", "event_ts": "1700000000.000100"}),
            );
            body["team_id"] = json!("T0PARTNER");
            body["is_ext_shared_channel"] = json!(true);
            body
        };
        match parse(&shared("U0PARTNER", "T0PARTNER"), None).unwrap() {
            SlackPayload::Outsider { team, event, .. } => {
                assert_eq!(team.as_deref(), Some("T0PARTNER"));
                assert!(matches!(&event.origin, Origin::Slack { team: Some(t), .. } if t == "T123ABC456"));
            }
            _ => panic!("the partner's person in the partner's channel is an outsider"),
        }
        assert!(matches!(
            parse(&shared("U0INSIDER", "T123ABC456"), None).unwrap(),
            SlackPayload::Event { .. }
        ));
        // An org-wide install names only its enterprise: a channel made outside it
        // places no one at home, whatever the author's workspace.
        let mut org_wide = shared("U0PARTNER", "T0PARTNER");
        org_wide["authorizations"] = json!([{"enterprise_id": "E0001", "team_id": null, "user_id": "UBOT",
            "is_bot": true, "is_enterprise_install": true}]);
        match parse(&org_wide, None).unwrap() {
            SlackPayload::Outsider { event, .. } => {
                assert!(matches!(&event.origin, Origin::Slack { team: None, .. }))
            }
            _ => panic!("an org-wide install checks every author of another's channel"),
        }
        // One made inside the enterprise keeps its workspace as home.
        org_wide["enterprise_id"] = json!("E0001");
        org_wide["team_id"] = json!("T0001");
        org_wide["event"]["user_team"] = json!("T0001");
        assert!(matches!(
            parse(&org_wide, None).unwrap(),
            SlackPayload::Event { .. }
        ));
    }

    /// `authorizations[0]` may be a person: the bot is the entry marked `is_bot`.
    #[test]
    fn a_person_first_in_authorizations_is_not_taken_for_the_bot() {
        let mut body = envelope(
            json!({"type": "message", "channel": "D0BOTDM", "user": "U0PERSON",
            "text": "can you help?", "ts": "1700000000.000100", "channel_type": "im",
            "event_ts": "1700000000.000100"}),
        );
        body["authorizations"] = json!([
            {"enterprise_id": null, "team_id": "T123ABC456", "user_id": "U0PERSON", "is_bot": false},
            {"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]);
        assert!(matches!(parse(&body, None).unwrap(), SlackPayload::Event { .. }));
        body["event"]["user"] = json!("UBOT");
        assert!(matches!(parse(&body, None).unwrap(), SlackPayload::Ignored(_)));
    }

    /// An edited mention arrives again under a new event id: it is the same message's
    /// mention (one dedupe key), so it starts no second run. Another app's mention is
    /// ignored like its messages.
    #[test]
    fn edited_mentions_are_one_mention_and_bots_mentions_are_ignored() {
        let mention = json!({"type": "app_mention", "user": "U0PERSON", "text": "<@UBOT> help",
            "ts": "1700000000.000100", "channel": "C0GEN", "event_ts": "1700000000.000100"});
        let key = |body: Value| match parse(&body, None).unwrap() {
            SlackPayload::Event { dedupe_key, .. } => dedupe_key,
            _ => panic!("a mention is an event"),
        };
        let first = key(envelope(mention.clone()));
        assert_eq!(first, "slack:mention:C0GEN:1700000000.000100");
        let mut edited = envelope(mention.clone());
        edited["event_id"] = json!("Ev0EDITED");
        edited["event"]["edited"] = json!({"user": "U0PERSON", "ts": "1700000005.000000"});
        assert_eq!(key(edited), first);
        let mut from_bot = mention;
        from_bot["bot_id"] = json!("B0OTHER");
        assert!(
            matches!(parse(&envelope(from_bot), None).unwrap(), SlackPayload::Ignored(w) if w.contains("bot"))
        );
    }

    #[test]
    fn slackbot_notices_are_ignored() {
        let body = envelope(
            json!({"type": "message", "channel": "D0BOTDM", "user": "USLACKBOT",
            "text": "You have been removed from #ops by <@U0ADMIN>", "ts": "1700000000.000100",
            "channel_type": "im", "event_ts": "1700000000.000100"}),
        );
        assert!(matches!(parse(&body, None).unwrap(), SlackPayload::Ignored(w) if w.contains("Slackbot")));
    }

    #[test]
    fn parses_the_documented_events() {
        let mention = envelope(
            json!({"type": "app_mention", "user": "U061F7AUR", "text": "<@UBOT> what's up?",
            "ts": "1515449522.000016", "channel": "C123ABC456", "event_ts": "1515449522000016"}),
        );
        let SlackPayload::Event { event, dedupe_key } = parse(&mention, None).unwrap() else {
            panic!()
        };
        assert_eq!(dedupe_key, "slack:mention:C123ABC456:1515449522.000016");
        assert_eq!(event.kind, "app_mention");
        assert!(!event.private);
        assert_eq!(event.text.as_deref(), Some("<@UBOT> what's up?"));

        let reaction = envelope(
            json!({"type": "reaction_added", "user": "U123ABC456", "reaction": "jira",
            "item_user": "U222222222", "item": {"type": "message", "channel": "C123ABC456", "ts": "1360782400.498405"},
            "event_ts": "1360782804.083113"}),
        );
        let SlackPayload::Event { event, .. } = parse(&reaction, None).unwrap() else {
            panic!()
        };
        assert!(
            matches!(&event.origin, Origin::Slack { reaction: Some(r), ts: Some(t), .. } if r == "jira" && t == "1360782400.498405")
        );

        let dm = envelope(
            json!({"type": "message", "channel": "D024BE91L", "user": "U2147483697", "text": "secret plans",
            "ts": "1355517523.000005", "channel_type": "im"}),
        );
        let SlackPayload::Event { event, .. } = parse(&dm, None).unwrap() else {
            panic!()
        };
        assert!(event.private);
        assert!(!event.summary.contains("secret"));

        let own = envelope(
            json!({"type": "message", "channel": "C1", "user": "UBOT", "text": "my reply", "ts": "1.2"}),
        );
        assert!(matches!(parse(&own, None).unwrap(), SlackPayload::Ignored(_)));
        let edit =
            envelope(json!({"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "1.2"}));
        assert!(matches!(parse(&edit, None).unwrap(), SlackPayload::Ignored(_)));
        let created = envelope(
            json!({"type": "channel_created", "channel": {"id": "C024BE91L", "name": "fun", "created": 1360782804, "creator": "U024BE7LH"}}),
        );
        assert!(
            matches!(parse(&created, None).unwrap(), SlackPayload::ChannelCreated { channel, .. } if channel == "C024BE91L")
        );
        let challenge = json!({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
        assert!(
            matches!(parse(&challenge, None).unwrap(), SlackPayload::Challenge(c) if c.starts_with("3eZbrw"))
        );
    }

    #[test]
    fn every_documented_payload_parses_through_the_typed_models() {
        // A message in a public channel, with a file.
        let channel = envelope(
            json!({"type": "message", "subtype": "file_share", "channel": "C123ABC456",
            "channel_type": "channel", "user": "U123ABC456", "text": "see <@U222>", "ts": "1355517523.000005",
            "files": [{"id": "F0S43PZDF", "name": "notes.txt", "mimetype": "text/plain", "size": 26,
                       "url_private": "https://files.slack.com/files-pri/T1-F0S43PZDF/notes.txt",
                       "url_private_download": "https://files.slack.com/files-pri/T1-F0S43PZDF/download/notes.txt"}]}),
        );
        let SlackPayload::Event { event, .. } = parse(&channel, None).unwrap() else {
            panic!()
        };
        assert!(!event.private);
        assert_eq!(event.payload["files"][0]["size"], 26);
        assert_eq!(
            event.payload["files"][0]["url_private_download"],
            "https://files.slack.com/files-pri/T1-F0S43PZDF/download/notes.txt"
        );
        // Events steward does not act on are acknowledged, never refused.
        let file_shared = envelope(
            json!({"type": "file_shared", "channel_id": "C024BE91L", "file_id": "F2147483862",
            "user_id": "U024BE7LH", "file": {"id": "F2147483862"}, "event_ts": "1234567890.123456"}),
        );
        assert!(
            matches!(parse(&file_shared, None).unwrap(), SlackPayload::Ignored(w) if w.contains("file_shared"))
        );
        let novel = envelope(json!({"type": "huddle_started", "channel": "C1", "event_ts": "1.2"}));
        assert!(
            matches!(parse(&novel, None).unwrap(), SlackPayload::Ignored(w) if w == "event type huddle_started")
        );
        let odd_subtype = envelope(
            json!({"type": "message", "subtype": "channel_join", "channel": "C1", "ts": "1.2", "user": "U1"}),
        );
        assert!(matches!(
            parse(&odd_subtype, None).unwrap(),
            SlackPayload::Ignored(_)
        ));
        let limited = json!({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "type": "app_rate_limited", "team_id": "T123456",
            "minute_rate_limited": 1518467820, "api_app_id": "A123456"});
        assert!(
            matches!(parse(&limited, None).unwrap(), SlackPayload::Ignored(w) if w == "app_rate_limited")
        );
        assert!(matches!(
            parse(&json!({"type": "something_new"}), None).unwrap(),
            SlackPayload::Ignored(_)
        ));
        // A callback missing what every callback has is a bad request.
        let mut broken = envelope(
            json!({"type": "app_mention", "user": "U1", "text": "hi", "ts": "1.2", "channel": "C1"}),
        );
        broken.as_object_mut().unwrap().remove("event_id");
        let err = parse(&broken, None).unwrap_err();
        assert!(
            err.to_string().contains("malformed event_callback payload"),
            "{err}"
        );
    }

    #[test]
    fn app_context_changed_is_kept_for_its_person_only() {
        let entities =
            json!({"entities": [{"type": "slack#/types/channel_id", "value": "C0VIEW", "team_id": "T1"}]});
        // Slack's documented shape names nobody: not attributable, so ignored.
        let anonymous = envelope(json!({"type": "app_context_changed", "context": entities}));
        assert!(matches!(
            parse(&anonymous, None).unwrap(),
            SlackPayload::Ignored(_)
        ));
        let named = envelope(json!({"type": "app_context_changed", "user": "U0ADA", "context": entities}));
        let SlackPayload::Event { event, .. } = parse(&named, None).unwrap() else {
            panic!()
        };
        assert_eq!(event.kind, "app_context_changed");
        assert!(event.private);
        assert_eq!(event.payload["viewing_channel"], "C0VIEW");
        // No channel in view any more: an empty value clears it.
        let cleared = envelope(json!({"type": "app_context_changed", "user": "U0ADA", "context": {}}));
        let SlackPayload::Event { event, .. } = parse(&cleared, None).unwrap() else {
            panic!()
        };
        assert_eq!(event.payload["viewing_channel"], "");
    }
}
