//! A run that continues a conversation (a Slack thread, a DM) starts with it: earlier
//! turns before the request, the bot's own replies as assistant turns, everyone else's
//! as user turns named by their author. Re-read from the source each run.

use super::context::RunContext;
use crate::provider::Message;

/// The earlier turns as messages, and a note on the request in `prompt`; nothing when
/// the agent has `context.thread: false` or the trigger continues no conversation. A
/// thread that cannot be read is said so in `prompt`, and the run goes on without it.
pub async fn history(cx: &RunContext<'_>, prompt: &mut String) -> Vec<Message> {
    if !cx.agent.context.thread {
        return Vec::new();
    }
    let thread = match cx.runner.sources.thread(cx.trigger).await {
        None => return Vec::new(),
        Some(Err(e)) => {
            prompt.push_str(&format!(
                "\n[steward: the earlier messages of this conversation could not be read: {e}]"
            ));
            return Vec::new();
        }
        Some(Ok(thread)) => thread,
    };
    if let Some(inbox) = &cx.inbox {
        inbox.seen(thread.later.iter().map(|t| t.id.clone()));
    }
    if !thread.later.is_empty() {
        prompt.push_str("\n[steward: written after it in the conversation, answer these too:]\n");
        for turn in &thread.later {
            prompt.push_str(&format!("{}: {}\n", turn.author, turn.text));
        }
    }
    if thread.turns.is_empty() {
        return Vec::new();
    }
    let omitted = match thread.omitted {
        0 => String::new(),
        n => format!(" ({n} older messages are not shown)"),
    };
    let mut out = vec![Message::user(format!(
        "[steward: this request continues a conversation. Its earlier messages follow, oldest first{omitted}; your own earlier replies are your turns.]"
    ))];
    for turn in thread.turns {
        out.push(if turn.own {
            Message::Assistant {
                text: Some(turn.text),
                tool_calls: Vec::new(),
            }
        } else {
            Message::user(format!("{}: {}", turn.author, turn.text))
        });
    }
    prompt.insert_str(
        0,
        "[steward: the newest message of the conversation, the one to answer:]\n",
    );
    out
}

/// The setting naming the agent that last answered in a Slack thread.
pub fn owner_key(channel: &str, thread_ts: &str) -> String {
    format!("slack_thread:{channel}:{thread_ts}")
}

/// Records that `agent` answered in the thread `origin`'s reply went to, so later
/// messages there reach it without a mention (when it takes follow-ups).
pub async fn remember(
    store: &dyn crate::store::Store,
    sources: &crate::triggers::Sources,
    agent: &crate::config::AgentConfig,
    origin: &crate::triggers::Origin,
) {
    if agent.follow_ups.is_none() {
        return;
    }
    let Some(destination) = sources
        .for_origin(origin)
        .and_then(|s| s.reply_destination(origin))
    else {
        return;
    };
    let (Some(channel), Some(ts)) = (destination["slack"].as_str(), destination["thread_ts"].as_str()) else {
        return;
    };
    let owner = serde_json::json!({"agent": agent.name, "at": chrono::Utc::now().to_rfc3339()});
    if let Err(e) = store
        .set_setting(&owner_key(channel, ts), &owner.to_string())
        .await
    {
        tracing::warn!(error = %e, "cannot record the thread's agent; follow-ups there need a mention");
    }
}
