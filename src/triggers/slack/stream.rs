//! A reply streamed into its Slack thread while the run works: `chat.startStream` at
//! the first text or tool call, `chat.appendStream` with the model's text as standard
//! Markdown (`markdown_text`, buffered: about [`FLUSH_CHARS`] characters or
//! [`FLUSH_EVERY`], whichever first) and each tool call as a `task_update` chunk, and
//! `chat.stopStream` with the footer and feedback buttons at the end.
//!
//! Never loses the answer: when Slack refuses the stream (`ok: false`), ends it
//! (`message_not_in_streaming_state`), rate-limits it, or a model attempt whose text
//! was already shown is retried, streaming stops and the part of the answer nobody has
//! seen is posted as a normal reply (see [`Finished::Post`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use slack_morphism::SlackMessageContent;
use slack_morphism::api::{
    SlackApiChatAppendStreamRequest, SlackApiChatStartStreamRequest, SlackApiChatStopStreamRequest,
    SlackStreamChunk,
};
use slack_morphism::blocks::{SlackTaskCardStatus, SlackTaskId};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::integrations::ApiError;
use crate::integrations::slack::{SlackClient, message};
use crate::triggers::Origin;
use crate::triggers::source::{Finished, Live, Reply, TaskState};

/// Buffered text goes to Slack once it is this long...
pub const FLUSH_CHARS: usize = 250;
/// ... or this old, whichever comes first.
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);

#[derive(Default)]
struct State {
    /// The streamed message, once started.
    ts: Option<String>,
    /// Every piece of text given (of attempts that stood).
    all: String,
    /// How much of `all` Slack has.
    sent: usize,
    /// How much more is on its way to Slack now.
    sending: usize,
    /// Where the current model attempt's text starts in `all`.
    attempt: usize,
    /// Task updates not yet sent.
    chunks: Vec<SlackStreamChunk>,
    last: Option<Instant>,
    /// Streaming stopped (Slack refused or ended it); the rest goes as a reply.
    failed: bool,
    /// Text of a failed attempt was shown: the whole answer goes as a reply.
    diverged: bool,
    closing: bool,
    /// Reasoning summaries shown, to number their steps.
    thoughts: usize,
}

/// Where a stream goes and what it holds; shared by the run and its flusher task.
struct Target {
    client: SlackClient,
    channel: String,
    thread_ts: String,
    /// Who the stream is for, in channels (`recipient_user_id`, `recipient_team_id`).
    recipient: Option<(String, Option<String>)>,
    state: Mutex<State>,
    wake: Notify,
}

/// The live reply of one run in one Slack thread.
pub struct SlackStream {
    target: Arc<Target>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for SlackStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackStream")
            .field("channel", &self.target.channel)
            .field("thread_ts", &self.target.thread_ts)
            .finish()
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl SlackStream {
    /// A stream for replies to `origin`: a Slack thread (a DM's root has none).
    pub fn open(client: &SlackClient, origin: &Origin) -> Option<Arc<SlackStream>> {
        let (channel, Some(thread_ts)) = origin.slack_thread()? else {
            return None;
        };
        let Origin::Slack { user, team, .. } = origin else {
            return None;
        };
        let dm = channel.starts_with('D');
        let target = Arc::new(Target {
            client: client.clone(),
            channel: channel.to_string(),
            thread_ts: thread_ts.to_string(),
            recipient: user.clone().filter(|_| !dm).map(|u| (u, team.clone())),
            state: Mutex::default(),
            wake: Notify::new(),
        });
        // The flusher holds the target only; `finish` or `abandon` ends it.
        let shared = target.clone();
        let task = tokio::spawn(async move {
            loop {
                // Woken: enough text, a task update, or the first piece. Otherwise text
                // goes once it has waited FLUSH_EVERY.
                let woken = tokio::select! {
                    _ = shared.wake.notified() => true,
                    _ = tokio::time::sleep(FLUSH_EVERY) => false,
                };
                let due = {
                    let s = lock(&shared.state);
                    if s.closing {
                        return;
                    }
                    woken || s.last.is_some_and(|at| at.elapsed() >= FLUSH_EVERY)
                };
                if due {
                    shared.flush(false).await;
                }
            }
        });
        Some(Arc::new(SlackStream {
            target,
            flusher: Mutex::new(Some(task)),
        }))
    }

    /// Stops the flusher after the flush it may be doing, so nothing is sent twice.
    async fn close(&self) {
        lock(&self.target.state).closing = true;
        self.target.wake.notify_one();
        let task = self.flusher.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Drop for SlackStream {
    fn drop(&mut self) {
        if let Some(task) = self.flusher.lock().unwrap_or_else(|e| e.into_inner()).take() {
            task.abort();
        }
    }
}

/// Where the text of `all` from `sent` on can be cut for a send: before a `<` that no
/// `>` closes yet, when it is at most [`MAX_FORM`] bytes from the end (a Slack form
/// being written), and before a trailing `]` or `](` (a Markdown link whose target may
/// be `!channel`, which [`defuse_broadcasts`] unlinks only when it sees `](!` whole);
/// else at the end.
///
/// [`defuse_broadcasts`]: crate::integrations::slack::mrkdwn::defuse_broadcasts
fn open_form_start(all: &str, sent: usize) -> usize {
    const MAX_FORM: usize = 128;
    let unsent = &all[sent..];
    let form = match unsent.rfind('<') {
        Some(at) if !unsent[at..].contains('>') && unsent.len() - at <= MAX_FORM => sent + at,
        _ => all.len(),
    };
    let link = if unsent.ends_with("](") {
        all.len() - 2
    } else if unsent.ends_with(']') {
        all.len() - 1
    } else {
        all.len()
    };
    form.min(link)
}

impl Target {
    /// A task or plan update, sent at once.
    fn push(&self, chunk: SlackStreamChunk) {
        lock(&self.state).chunks.push(chunk);
        self.wake.notify_one();
    }

    /// Sends what is buffered: starts the stream first when it has not started. Until
    /// the `last` flush, a `<…>` form still open at the end stays for the next one, so
    /// a broadcast split across two sends is still made plain (`defuse_broadcasts`).
    async fn flush(&self, last: bool) {
        let (ts, text, chunks) = {
            let mut s = lock(&self.state);
            let end = if last {
                s.all.len()
            } else {
                open_form_start(&s.all, s.sent)
            };
            if s.failed || s.diverged || (s.sent == end && s.chunks.is_empty()) {
                return;
            }
            s.last = Some(Instant::now());
            s.sending = end - s.sent;
            (
                s.ts.clone(),
                s.all[s.sent..end].to_string(),
                std::mem::take(&mut s.chunks),
            )
        };
        let markdown = (!text.is_empty())
            .then(|| crate::integrations::slack::mrkdwn::defuse_broadcasts(&text).into_owned());
        let chunks = (!chunks.is_empty()).then_some(chunks);
        let result = match &ts {
            None => {
                let recipient = self.recipient.as_ref();
                let request = SlackApiChatStartStreamRequest {
                    channel: self.channel.as_str().into(),
                    thread_ts: Some(self.thread_ts.as_str().into()),
                    recipient_user_id: recipient.map(|(u, _)| u.as_str().into()),
                    recipient_team_id: recipient.and_then(|(_, t)| t.as_deref()).map(Into::into),
                    markdown_text: markdown,
                    chunks,
                    task_display_mode: None,
                    icon_emoji: None,
                    icon_url: None,
                    username: None,
                };
                self.client.send("chat.startStream", &request).await
            }
            Some(ts) => {
                let request = SlackApiChatAppendStreamRequest {
                    channel: self.channel.as_str().into(),
                    ts: ts.as_str().into(),
                    markdown_text: markdown,
                    chunks,
                };
                self.client.send("chat.appendStream", &request).await
            }
        };
        let mut s = lock(&self.state);
        s.sending = 0;
        match result {
            Ok(answer) => {
                if s.ts.is_none() {
                    s.ts = answer["ts"].as_str().map(str::to_string);
                }
                s.sent += text.len();
            }
            Err(e) => {
                tracing::warn!(error = %e, "streaming the reply stopped; the rest goes as a reply");
                s.failed = true;
            }
        }
    }

    /// Ends a started stream, with `content` (footer, feedback, metadata) when given.
    async fn stop(&self, ts: &str, content: SlackMessageContent) -> Result<Value, ApiError> {
        let request = SlackApiChatStopStreamRequest {
            channel: self.channel.as_str().into(),
            ts: ts.into(),
            content,
            chunks: None,
            session_status: None,
        };
        self.client.send("chat.stopStream", &request).await
    }
}

impl crate::provider::Deltas for SlackStream {
    fn text(&self, delta: &str) {
        let mut s = lock(&self.target.state);
        s.all.push_str(delta);
        // Text already on its way does not count toward the next send.
        let waiting = s.all.len() - s.sent - s.sending;
        let due = waiting >= FLUSH_CHARS || s.last.is_none_or(|at| at.elapsed() >= FLUSH_EVERY);
        drop(s);
        if due {
            self.target.wake.notify_one();
        }
    }

    fn restart(&self) {
        let mut s = lock(&self.target.state);
        if s.sent > s.attempt {
            // People saw text of an answer that will not be: the answer goes as a reply.
            s.diverged = true;
        } else {
            let attempt = s.attempt;
            s.all.truncate(attempt);
        }
    }

    fn settled(&self) {
        let mut s = lock(&self.target.state);
        s.attempt = s.all.len();
    }

    fn waiting(&self, on: bool) {
        let state = if on { TaskState::Running } else { TaskState::Done };
        self.task(
            WAITING_TASK,
            "Waiting for the model provider (rate limit)",
            state,
            None,
        );
    }

    fn thinking(&self, summary: &str) {
        let id = {
            let mut s = lock(&self.target.state);
            s.thoughts += 1;
            format!("thinking-{}", s.thoughts)
        };
        self.task(&id, "Thinking…", TaskState::Done, Some(summary));
    }
}

/// The task step shown while a call waits on the provider's rate limit.
const WAITING_TASK: &str = "provider-wait";

#[async_trait]
impl Live for SlackStream {
    fn shown(&self) -> bool {
        // Anything given to the stream may be on its way to Slack: the flusher runs on
        // its own and may be starting the stream now.
        let state = lock(&self.target.state);
        state.ts.is_some()
            || state.sending > 0
            || state.last.is_some()
            || !state.all.is_empty()
            || !state.chunks.is_empty()
    }

    fn task(&self, id: &str, title: &str, state: TaskState, output: Option<&str>) {
        let status = match state {
            TaskState::Running => SlackTaskCardStatus::InProgress,
            TaskState::Done => SlackTaskCardStatus::Complete,
            TaskState::Failed => SlackTaskCardStatus::Error,
        };
        self.target.push(SlackStreamChunk::TaskUpdate {
            id: SlackTaskId(id.to_string()),
            title: title.to_string(),
            hide_title: None,
            icon: None,
            status,
            details: None,
            output: output.map(|o| crate::triggers::event::one_line(o, 120)),
            sources: None,
        });
    }

    fn plan(&self, title: &str) {
        self.target.push(SlackStreamChunk::PlanUpdate {
            title: crate::triggers::event::one_line(title, 120),
        });
    }

    async fn finish(&self, reply: &Reply<'_>) -> Finished {
        self.close().await;
        let target = &self.target;
        // Whatever is still buffered goes in one last append.
        target.flush(true).await;
        let (ts, failed, diverged, all, sent) = {
            let s = lock(&target.state);
            (s.ts.clone(), s.failed, s.diverged, s.all.clone(), s.sent)
        };
        let answer = reply.text;
        let Some(ts) = ts else {
            // Nothing was streamed: the answer goes as a normal reply, whole.
            return Finished::Post {
                rest: answer.to_string(),
            };
        };
        if !failed && !diverged {
            let asker = target.recipient.as_ref().map(|(u, _)| format!("<@{u}>"));
            let run = reply.run_link.map(|l| (l, "Run"));
            let mut content = SlackMessageContent::new()
                .with_metadata(message::reply_metadata(reply.idempotency_key.clone()));
            if let Some(footer) = message::footer(reply.prompt_link, run, asker.as_deref()) {
                content = content.with_blocks(vec![message::context_block(footer)]);
            }
            content = with_buttons(content, reply);
            match target.stop(&ts, content).await {
                Ok(sent) => return Finished::Streamed(sent),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot end the streamed reply; the answer goes as a reply")
                }
            }
        } else if let Err(e) = target.stop(&ts, SlackMessageContent::new()).await {
            tracing::debug!(error = %e, "cannot end a broken stream");
        }
        if diverged {
            return Finished::Post {
                rest: answer.to_string(),
            };
        }
        // The part of the answer Slack has: the answer is the end of the streamed text.
        let shown = match all.strip_suffix(answer) {
            Some(before) => sent.saturating_sub(before.len()).min(answer.len()),
            None => 0,
        };
        let seen = crate::tokens::floor_char(answer, shown).len();
        Finished::Post {
            rest: answer[seen..].to_string(),
        }
    }

    async fn abandon(&self) {
        self.close().await;
        let ts = lock(&self.target.state).ts.clone();
        if let Some(ts) = ts
            && let Err(e) = self.target.stop(&ts, SlackMessageContent::new()).await
        {
            tracing::debug!(error = %e, "cannot end the stream of a run without an answer");
        }
    }
}

/// The buttons under a reply's last message: "Get help from a person" (`escalation:`),
/// then 👍 / 👎 (`output.feedback`).
pub(super) fn with_buttons(mut msg: SlackMessageContent, reply: &Reply<'_>) -> SlackMessageContent {
    if let Some((run, label)) = reply.escalate {
        msg = message::with_escalation(msg, run, label);
    }
    match reply.feedback {
        Some(run) => message::with_feedback(msg, run),
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::open_form_start;
    use crate::integrations::slack::mrkdwn::defuse_broadcasts;

    #[test]
    fn a_form_being_written_waits_for_the_next_send() {
        let all = "Done. Telling everyone <!her";
        let cut = open_form_start(all, 0);
        assert_eq!(&all[..cut], "Done. Telling everyone ");
        // Once closed, it goes, made plain.
        let all = format!("{all}e> now");
        assert_eq!(open_form_start(&all, cut), all.len());
        assert_eq!(defuse_broadcasts(&all[cut..]), "@here now");
        // A lone `<` far from the end, or in text already sent, holds nothing back.
        let long = format!("a < b {}", "x".repeat(200));
        assert_eq!(open_form_start(&long, 0), long.len());
        assert_eq!(open_form_start("<!here> ok <", 11), 11);
    }

    /// `](!` split across two sends would reach Slack as `[team]` and `(!channel)`,
    /// each harmless alone to the defuser: the `](` waits for what follows.
    #[test]
    fn a_link_being_written_waits_for_its_target() {
        for (all, kept) in [("see [team]", "see [team"), ("see [team](", "see [team")] {
            let cut = open_form_start(all, 0);
            assert_eq!(&all[..cut], kept, "{all}");
            let whole = format!("{all}{}", &"](!channel) now"[all.len() - cut..]);
            assert_eq!(whole, "see [team](!channel) now");
            assert_eq!(open_form_start(&whole, cut), whole.len());
            assert_eq!(defuse_broadcasts(&whole[cut..]), "] (!channel) now");
        }
        assert_eq!(open_form_start("[a](b) done", 0), 11);
    }
}
