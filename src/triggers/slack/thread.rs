//! The conversation a Slack-triggered run continues, re-read from Slack when the run
//! starts (so edits and deletions count, and nothing of it is stored by steward): the
//! thread it was asked in (`conversations.replies`), or for a message at the root of a
//! direct message, the recent exchange there (`conversations.history`).

use serde_json::Value;

use crate::integrations::ApiError;
use crate::integrations::slack::SlackClient;
use crate::integrations::slack::entities::Entity;
use crate::triggers::Origin;
use crate::triggers::source::{Thread, ThreadTurn};

/// Messages of a thread read at most (paged 200 at a time); past this the oldest are
/// left out and the model is told so.
pub const MAX_THREAD_MESSAGES: usize = 1_000;
/// Messages of a DM's recent history read as context.
pub const DM_HISTORY: usize = 20;
/// Files shared in the conversation loaded with it, the newest first chosen.
pub const MAX_THREAD_FILES: usize = 10;

/// Reads the conversation `origin` belongs to, with the Slack `files` objects shared
/// in it (the triggering message's aside: they are its attachments); `None` when it
/// belongs to none (a mention at a channel's root, a reaction).
pub async fn read(client: &SlackClient, origin: &Origin) -> Option<Result<(Thread, Vec<Value>), ApiError>> {
    let Origin::Slack {
        channel,
        channel_type,
        ts,
        thread_ts,
        reaction,
        ..
    } = origin
    else {
        return None;
    };
    let dm = channel_type.as_deref() == Some("im") || channel.starts_with('D');
    let raw = match (thread_ts, reaction, ts) {
        (Some(root), _, _) => replies(client, channel, root).await,
        // A reaction names only its message: read the thread that message is in (a
        // lone message is a thread of one), the message itself included.
        (None, Some(_), Some(message)) => reacted_thread(client, channel, message).await,
        (None, None, _) if dm => history(client, channel).await,
        _ => return None,
    };
    // A reaction's message stays among the turns: it is what the reaction is about.
    let ts = if reaction.is_some() { &None } else { ts };
    Some(match raw {
        Ok((messages, omitted)) => {
            let at = ts.as_deref().and_then(ts_order);
            let mut thread = Thread {
                omitted,
                ..Thread::default()
            };
            let others = || messages.iter().filter(|m| m["ts"].as_str() != ts.as_deref());
            let mut files: Vec<Value> = others()
                .rev()
                .flat_map(|m| m["files"].as_array().cloned().unwrap_or_default())
                .take(MAX_THREAD_FILES)
                .collect();
            files.reverse();
            for m in others() {
                let Some(turn) = turn(client, m).await else {
                    continue;
                };
                let after = at.is_some_and(|at| ts_order(&turn.id).is_some_and(|t| t > at));
                if after && !turn.own {
                    thread.later.push(turn);
                } else {
                    thread.turns.push(turn);
                }
            }
            Ok((thread, files))
        }
        Err(e) => Err(e),
    })
}

/// A thread's messages, oldest first, paging with `cursor`; and how many were left out.
async fn replies(client: &SlackClient, channel: &str, root: &str) -> Result<(Vec<Value>, usize), ApiError> {
    let mut all = Vec::new();
    let mut cursor = String::new();
    loop {
        let mut params = vec![
            ("channel", channel.to_string()),
            ("ts", root.to_string()),
            ("limit", "200".to_string()),
            // Our own messages are known by their metadata (`steward_reply`, `steward_post`)
            // and our bot (`auth.test`).
            ("include_all_metadata", "true".to_string()),
        ];
        if !cursor.is_empty() {
            params.push(("cursor", cursor.clone()));
        }
        let page = client.get("conversations.replies", &params).await?;
        all.extend(page["messages"].as_array().cloned().unwrap_or_default());
        cursor = page["response_metadata"]["next_cursor"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if cursor.is_empty() || !page["has_more"].as_bool().unwrap_or(false) {
            break;
        }
    }
    // The root first, then the newest replies up to the cap: the start of a thread and
    // its latest turns matter most.
    let omitted = all.len().saturating_sub(MAX_THREAD_MESSAGES);
    if omitted > 0 {
        all.drain(1..1 + omitted);
    }
    Ok((all, omitted))
}

/// The thread a reacted-to message belongs to. `conversations.replies` with a reply's
/// `ts` answers with that reply only, which names its root; the root then gives the
/// whole thread.
async fn reacted_thread(
    client: &SlackClient,
    channel: &str,
    message: &str,
) -> Result<(Vec<Value>, usize), ApiError> {
    let (messages, omitted) = replies(client, channel, message).await?;
    let root = messages
        .first()
        .and_then(|m| m["thread_ts"].as_str())
        .filter(|root| *root != message)
        .map(str::to_string);
    match root {
        Some(root) => replies(client, channel, &root).await,
        None => Ok((messages, omitted)),
    }
}

/// A DM's recent messages, oldest first.
async fn history(client: &SlackClient, channel: &str) -> Result<(Vec<Value>, usize), ApiError> {
    let page = client
        .get(
            "conversations.history",
            &[
                ("channel", channel.to_string()),
                ("limit", DM_HISTORY.to_string()),
                ("include_all_metadata", "true".to_string()),
            ],
        )
        .await?;
    let mut messages = page["messages"].as_array().cloned().unwrap_or_default();
    messages.reverse();
    Ok((messages, 0))
}

/// One message as a turn; `None` for what is not a message someone wrote (joins,
/// deletions, empty messages).
async fn turn(client: &SlackClient, m: &Value) -> Option<ThreadTurn> {
    if m["subtype"]
        .as_str()
        .is_some_and(|s| !matches!(s, "file_share" | "thread_broadcast" | "bot_message"))
    {
        return None;
    }
    let text = m["text"].as_str().unwrap_or_default();
    let files: Vec<&str> = m["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["name"].as_str())
        .collect();
    if text.is_empty() && files.is_empty() {
        return None;
    }
    let mut text = client.humanize(text).await;
    if !files.is_empty() {
        text.push_str(&format!("\n[shared files: {}]", files.join(", ")));
    }
    let user = m["user"].as_str();
    // Another app can post with the same metadata: it is ours only from our bot.
    let own = matches!(
        m["metadata"]["event_type"].as_str(),
        Some("steward_reply" | "steward_post")
    ) && client.posted_by_me(m).await;
    let author = if own {
        "you".to_string()
    } else if let Some(app) = m["bot_id"]
        .as_str()
        .filter(|_| user.is_none() || m["subtype"] == "bot_message")
    {
        let name = m["username"]
            .as_str()
            .or(m["bot_profile"]["name"].as_str())
            .unwrap_or(app);
        format!("app {name}")
    } else {
        match user {
            Some(u) => {
                let name = client.name_of(&Entity::User(u.to_string())).await;
                format!("@{}", name.as_deref().unwrap_or(u))
            }
            None => "someone".to_string(),
        }
    };
    Some(ThreadTurn {
        id: m["ts"].as_str().unwrap_or_default().to_string(),
        own,
        author,
        text,
    })
}

/// A Slack `ts` (`1700000000.000100`) as (seconds, microseconds), to order messages
/// without floating point.
fn ts_order(ts: &str) -> Option<(u64, u64)> {
    let (secs, micros) = ts.split_once('.').unwrap_or((ts, "0"));
    Some((secs.parse().ok()?, micros.parse().ok()?))
}
