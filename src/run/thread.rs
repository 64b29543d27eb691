//! A run that continues a conversation (a Slack thread, a DM) starts with it: earlier
//! turns before the request, the bot's own replies as assistant turns, everyone else's
//! as user turns named by their author. Re-read from the source each run.

use super::RunError;
use super::context::RunContext;
use super::events::RunEvent;
use crate::files::{FileMeta, FileSource, NewFile};
use crate::provider::Message;

/// Earlier files of a conversation carried into a later run of it, at most.
pub const MAX_CARRIED_FILES: usize = 20;

/// The earlier turns as messages, the conversation's files (shared in it, or produced
/// by its earlier runs) added to the run and listed with them, and notes on the
/// request in `prompt`; nothing when
/// the agent has `context.thread: false` or the trigger continues no conversation. A
/// thread that cannot be read is said so in `prompt`, and the run goes on without it.
pub async fn history(cx: &RunContext<'_>, prompt: &mut String) -> Result<Vec<Message>, RunError> {
    let mut out = Vec::new();
    if !cx.agent.context.thread {
        return Ok(out);
    }
    let thread = match cx.runner.sources.thread(cx.trigger).await {
        None => return Ok(out),
        Some(Err(e)) => {
            prompt.push_str(&format!(
                "\n[steward: the earlier messages of this conversation could not be read: {e}]"
            ));
            return Ok(out);
        }
        Some(Ok(thread)) => thread,
    };
    if let Some(inbox) = &cx.inbox {
        inbox.seen(thread.later.iter().map(|t| t.id.clone()));
    }
    if thread.turns.iter().any(|t| t.own) {
        cx.answered_before
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if !thread.later.is_empty() {
        prompt.push_str("\n[steward: written after it in the conversation, answer these too:]\n");
        for turn in &thread.later {
            prompt.push_str(&format!("{}: {}\n", turn.author, turn.text));
        }
    }
    let mut listed = Vec::new();
    for file in thread.files {
        let meta = cx.files.add(file, FileSource::Attachment, None).await?;
        record_file(cx, &meta);
        listed.push(meta.describe());
    }
    for (from, meta) in carried(cx).await? {
        listed.push(format!("{} (was {from})", meta.describe()));
    }
    if let Some(request) = &thread.request {
        prompt.push_str(&format!("\nThe comment, as it reads now:\n{request}\n"));
    }
    for note in &thread.notes {
        prompt.push_str(&format!("\n[steward: {note}]"));
    }
    if thread.turns.is_empty() && listed.is_empty() {
        return Ok(out);
    }
    let omitted = match thread.omitted {
        0 => String::new(),
        n => format!(" ({n} older messages are not shown)"),
    };
    let files = match listed.is_empty() {
        true => String::new(),
        false => format!(
            " Files of the conversation, readable with the file tools:\n- {}\n",
            listed.join("\n- ")
        ),
    };
    out.push(Message::user(format!(
        "[steward: this request continues a conversation. Its earlier messages follow, oldest first{omitted}; your own earlier replies are your turns.]{files}"
    )));
    for turn in thread.turns {
        out.push(if turn.own {
            Message::assistant(Some(turn.text), Vec::new())
        } else {
            Message::user(format!("{}: {}", turn.author, turn.text))
        });
    }
    let what = match &cx.trigger.origin {
        crate::triggers::Origin::Slack {
            reaction: Some(r), ..
        } => {
            format!(
                "[steward: the event to act on, a :{r}: reaction on a message of the conversation above:]\n"
            )
        }
        _ => "[steward: the newest message of the conversation, the one to answer:]\n".to_string(),
    };
    prompt.insert_str(0, &what);
    Ok(out)
}

/// Files earlier runs of a non-private conversation produced (tool outputs kept as
/// files), added to this run: `(where it came from, its metadata here)`. A private
/// conversation carries nothing over: its runs keep no files.
async fn carried(cx: &RunContext<'_>) -> Result<Vec<(String, FileMeta)>, RunError> {
    let Some(key) = cx.trigger.conversation_key().filter(|_| !cx.trigger.private) else {
        return Ok(Vec::new());
    };
    let stored = cx.runner.store.conversation_files(&key, &cx.run_id).await?;
    let produced: Vec<_> = stored
        .into_iter()
        .filter_map(|(run, f)| {
            let meta: FileMeta = serde_json::from_value(f.meta).ok()?;
            (meta.source == FileSource::ToolOutput).then_some((run, meta, f.content))
        })
        .collect();
    let skip = produced.len().saturating_sub(MAX_CARRIED_FILES);
    let mut out = Vec::new();
    for (run, meta, content) in produced.into_iter().skip(skip) {
        // Past the run's files cap, an earlier run's file stays behind rather than
        // failing this run (and every later one of the conversation).
        if let Err(why) = cx.files.room_for(content.len() as u64) {
            tracing::info!(file = %meta.id, %run, %why, "an earlier run's file is not carried");
            continue;
        }
        let file = NewFile {
            name: meta.name.clone(),
            mime: meta.mime.clone(),
            content,
        };
        let added = cx.files.add(file, FileSource::ToolOutput, None).await?;
        record_file(cx, &added);
        out.push((format!("{} of run {run}", meta.id), added));
    }
    Ok(out)
}

fn record_file(cx: &RunContext<'_>, meta: &FileMeta) {
    cx.recorder.record(RunEvent::FileAdded {
        file: meta.id.clone(),
        name: cx.recorder.wrap(meta.name.as_str()),
        mime: meta.mime.clone(),
        bytes: meta.size_bytes,
    });
}

/// The setting naming the agent that last answered in a conversation (see
/// [`crate::triggers::Origin::conversation`]).
pub fn owner_key(conversation: &str) -> String {
    format!("conversation_owner:{conversation}")
}

/// Records that `agent` answered in the conversation of `origin` (a Slack thread, a
/// Jira issue, a Notion page), so later messages there reach it (when it takes
/// follow-ups).
pub async fn remember(
    store: &dyn crate::store::Store,
    agent: &crate::config::AgentConfig,
    origin: &crate::triggers::Origin,
) {
    let Some(conversation) = origin.conversation().filter(|_| agent.follow_ups.is_some()) else {
        return;
    };
    let owner = serde_json::json!({"agent": agent.name, "at": chrono::Utc::now().to_rfc3339()});
    if let Err(e) = store
        .set_setting(&owner_key(&conversation), &owner.to_string())
        .await
    {
        tracing::warn!(error = %e, "cannot record the conversation's agent; follow-ups there need a mention");
    }
}
