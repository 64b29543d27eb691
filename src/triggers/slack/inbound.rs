//! Slack Events API payloads (the same envelopes arrive over HTTP and Socket Mode).

use serde_json::{Value, json};

use reqwest::header::HeaderMap;

use crate::triggers::auth;
use crate::triggers::event::{PayloadError, one_line};
use crate::triggers::source::{Inbound, InboundError, header, json_body};
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
    /// A new public channel: join it (answering there only when mentioned).
    ChannelCreated { channel: String, dedupe_key: String },
    /// Authenticated but nothing to do (our own message, an unhandled subtype, ...).
    Ignored(String),
}

/// Message subtypes that carry a human's message; others (edits, joins, bot
/// messages, deletions) are ignored.
const HANDLED_SUBTYPES: &[&str] = &["file_share", "thread_broadcast"];

fn s(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// Parses an Events API body. `bot_user` is the bot's user id, when known, so its own
/// messages are ignored (the payload's `authorizations` also name it).
pub fn parse(body: &Value, bot_user: Option<&str>) -> Result<SlackPayload, PayloadError> {
    match body["type"].as_str() {
        Some("url_verification") => {
            return body["challenge"]
                .as_str()
                .map(|c| SlackPayload::Challenge(c.to_string()))
                .ok_or_else(|| PayloadError::from("url_verification without a challenge"));
        }
        Some("event_callback") => {}
        other => return Ok(SlackPayload::Ignored(format!("payload type {other:?}"))),
    }
    let event_id = body["event_id"]
        .as_str()
        .ok_or("event_callback without event_id")?
        .to_string();
    let dedupe_key = format!("slack:{event_id}");
    let ev = &body["event"];
    let team = s(&body["team_id"]);
    let bot = bot_user
        .map(str::to_string)
        .or_else(|| s(&body["authorizations"][0]["user_id"]));
    let kind = ev["type"].as_str().unwrap_or_default().to_string();
    let user = s(&ev["user"]);
    if ev.get("bot_id").is_some_and(|b| !b.is_null()) || (user.is_some() && user == bot) {
        return Ok(SlackPayload::Ignored("our own or a bot's message".into()));
    }
    let (channel, channel_type, text, ts, thread_ts, reaction) = match kind.as_str() {
        "app_mention" => (
            s(&ev["channel"]),
            None,
            s(&ev["text"]),
            s(&ev["ts"]),
            s(&ev["thread_ts"]),
            None,
        ),
        "message" => {
            if let Some(sub) = ev["subtype"].as_str()
                && !HANDLED_SUBTYPES.contains(&sub)
            {
                return Ok(SlackPayload::Ignored(format!("message subtype {sub}")));
            }
            // A mention also arrives as app_mention; route the mention once.
            if let (Some(b), Some(t)) = (&bot, ev["text"].as_str())
                && t.contains(&format!("<@{b}>"))
                && ev["channel_type"] != "im"
            {
                return Ok(SlackPayload::Ignored(
                    "message that mentions the bot (handled as app_mention)".into(),
                ));
            }
            (
                s(&ev["channel"]),
                s(&ev["channel_type"]),
                s(&ev["text"]),
                s(&ev["ts"]),
                s(&ev["thread_ts"]),
                None,
            )
        }
        "reaction_added" => (
            s(&ev["item"]["channel"]),
            None,
            None,
            s(&ev["item"]["ts"]),
            None,
            s(&ev["reaction"]),
        ),
        "channel_created" => {
            let channel = ev["channel"]["id"]
                .as_str()
                .ok_or("channel_created without channel.id")?
                .to_string();
            return Ok(SlackPayload::ChannelCreated { channel, dedupe_key });
        }
        other => return Ok(SlackPayload::Ignored(format!("event type {other}"))),
    };
    let channel = channel.ok_or_else(|| PayloadError(format!("{kind} event without a channel")))?;
    // Private channels and DMs: ids starting with G or D, or a non-public channel_type.
    let private = channel.starts_with('G')
        || channel.starts_with('D')
        || matches!(channel_type.as_deref(), Some("group" | "im" | "mpim"));
    let summary = match (&reaction, &text) {
        (Some(r), _) => format!(":{r}: in {channel}"),
        (None, Some(t)) if !private => one_line(t, 120),
        _ => format!("{kind} in {channel}"),
    };
    // Files shared with the message: fetched (with the bot token) when the run starts.
    let files: Vec<Value> = ev["files"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| json!({"id": f["id"], "name": f["name"], "mimetype": f["mimetype"], "size": f["size"],
                        "url_private_download": f["url_private_download"].as_str().or(f["url_private"].as_str())}))
        .collect();
    let event = TriggerEvent {
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
    };
    Ok(SlackPayload::Event {
        event: Box::new(event),
        dedupe_key,
    })
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
        SlackPayload::ChannelCreated { channel, .. } => Inbound::JoinChannel(channel),
        SlackPayload::Ignored(why) => {
            tracing::debug!(%why, "slack event ignored");
            Inbound::Answer(serde_json::json!({"ok": true, "ignored": why}))
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

    #[test]
    fn parses_the_documented_events() {
        let mention = envelope(
            json!({"type": "app_mention", "user": "U061F7AUR", "text": "<@UBOT> what's up?",
            "ts": "1515449522.000016", "channel": "C123ABC456", "event_ts": "1515449522000016"}),
        );
        let SlackPayload::Event { event, dedupe_key } = parse(&mention, None).unwrap() else {
            panic!()
        };
        assert_eq!(dedupe_key, "slack:Ev123ABC456");
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
}
