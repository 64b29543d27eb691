//! Replies in the thread of the triggering message; files shared with it.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::config::StatusMode;
use crate::files::{NewFile, mime};
use crate::http::Egress;
use crate::integrations::ApiError;
use crate::integrations::slack::{SlackClient, message};
use crate::triggers::source::{ApprovalRequest, Fetched, Progress, Reply, Source, Thread};
use crate::triggers::{Origin, TriggerEvent};
use slack_morphism::SlackMessageContent;
use slack_morphism::api::SlackApiChatPostMessageRequest;

use super::stream::with_buttons;

pub struct SlackSource {
    client: Option<SlackClient>,
    egress: Egress,
}

impl SlackSource {
    pub fn new(client: Option<SlackClient>, egress: Egress) -> Self {
        SlackSource { client, egress }
    }
}

#[async_trait]
impl Source for SlackSource {
    fn owns(&self, origin: &Origin) -> bool {
        matches!(origin, Origin::Slack { .. })
    }

    fn reply_destination(&self, origin: &Origin) -> Option<Value> {
        origin
            .slack_thread()
            .map(|(channel, thread_ts)| json!({"slack": channel, "thread_ts": thread_ts}))
    }

    /// The answer as mrkdwn sections with a footer (prompt, run, who asked), split or
    /// attached when long (see [`message::layout`]). Returns the first message posted.
    async fn post_reply(&self, origin: &Origin, reply: &Reply<'_>) -> Result<Value, ApiError> {
        let (channel, thread_ts) = origin
            .slack_thread()
            .ok_or(ApiError::NotConfigured("a Slack origin"))?;
        let client = self
            .client
            .as_ref()
            .ok_or(ApiError::NotConfigured("SLACK_BOT_TOKEN"))?;
        let asker = match origin {
            Origin::Slack { user: Some(u), .. } => Some(format!("<@{u}>")),
            _ => None,
        };
        let run = reply.run_link.map(|l| (l, "Run"));
        let footer = message::footer(reply.prompt_link, run, asker.as_deref());
        let post = |n: usize, msg: SlackMessageContent| {
            // Retries and crash recovery recognise a post by its key; later runs of
            // the thread recognise their own turns by its event type.
            let key = match n {
                0 => reply.idempotency_key.clone(),
                n => format!("{}:{n}", reply.idempotency_key),
            };
            let metadata = message::reply_metadata(key);
            let mut request =
                SlackApiChatPostMessageRequest::new(channel.into(), msg.with_metadata(metadata))
                    .with_unfurl_links(false)
                    .with_unfurl_media(false);
            request.thread_ts = thread_ts.map(Into::into);
            async move { client.send("chat.postMessage", &request).await }
        };
        let feedback = |msg: SlackMessageContent| with_buttons(msg, reply);
        let post_all = |messages: Vec<SlackMessageContent>| async move {
            let last = messages.len().saturating_sub(1);
            let mut first = None;
            for (n, msg) in messages.into_iter().enumerate() {
                let msg = if n == last { feedback(msg) } else { msg };
                let sent = post(n, msg).await?;
                first.get_or_insert(sent);
            }
            first.ok_or(ApiError::NotConfigured("a reply with text"))
        };
        // The model's `@ada` and `#eng` become mentions again.
        let text = client.mentionize(reply.text);
        match message::layout(&text, footer.as_deref()) {
            message::Layout::Messages(messages) => post_all(messages).await,
            message::Layout::Snippet {
                message,
                content,
                fallback,
            } => {
                // The file first, so the opening that says it is attached is true.
                match client
                    .upload(channel, thread_ts, "answer.md", content.as_bytes(), None)
                    .await
                {
                    Ok(_) => post(0, feedback(*message)).await,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot attach a long answer; posting it in parts");
                        post_all(fallback).await
                    }
                }
            }
        }
    }

    /// In the trigger's thread when it came from Slack; otherwise by DM to the
    /// approvers (one conversation with all of them).
    async fn ask_approval(
        &self,
        origin: &Origin,
        request: &ApprovalRequest<'_>,
    ) -> Option<Result<(String, String), ApiError>> {
        let client = self.client.as_ref()?;
        Some(ask(client, origin, request).await)
    }

    /// The thread the trigger is in, or a DM's recent exchange.
    async fn thread(&self, trigger: &TriggerEvent, cap: u64) -> Option<Result<Thread, ApiError>> {
        let client = self.client.as_ref()?;
        Some(match super::thread::read(client, &trigger.origin).await? {
            Ok((mut thread, files)) => {
                let fetched = self.download(files, cap).await;
                thread.files = fetched.files;
                thread.notes = fetched.notes;
                Ok(thread)
            }
            Err(e) => Err(e),
        })
    }

    /// Mentions as `@name`, channels as `#name`, links as Markdown.
    async fn readable(&self, text: &str) -> String {
        match &self.client {
            Some(client) => client.humanize(text).await,
            None => text.to_string(),
        }
    }

    /// `:eyes:` while working; then `:white_check_mark:` or `:x:` in its place.
    /// Replies in a Slack thread stream there (not at a DM's root, which has none).
    fn live(&self, origin: &Origin) -> Option<std::sync::Arc<dyn crate::triggers::source::Live>> {
        let client = self.client.as_ref()?;
        let stream = super::stream::SlackStream::open(client, origin)?;
        Some(stream)
    }

    /// A thread of a DM (the agent view's threads) gets a title: its first request.
    async fn name_conversation(&self, origin: &Origin, title: &str) -> Result<(), ApiError> {
        let (
            Some(client),
            Origin::Slack {
                channel,
                thread_ts: Some(ts),
                ..
            },
        ) = (&self.client, origin)
        else {
            return Ok(());
        };
        if !channel.starts_with('D') {
            return Ok(());
        }
        let body = json!({"channel_id": channel, "thread_ts": ts,
                          "title": crate::triggers::event::one_line(title, 60)});
        client.call("assistant.threads.setTitle", &body).await.map(|_| ())
    }

    async fn show_progress(
        &self,
        origin: &Origin,
        mode: StatusMode,
        progress: &Progress,
    ) -> Result<bool, ApiError> {
        let client = self
            .client
            .as_ref()
            .ok_or(ApiError::NotConfigured("SLACK_BOT_TOKEN"))?;
        let native = async {
            match mode.native() {
                true => super::status::show(client, origin, progress).await,
                false => Ok(false),
            }
        };
        let reactions = async {
            match mode.reactions() {
                true => react(client, origin, progress).await,
                false => Ok(false),
            }
        };
        let (native, reactions) = tokio::join!(native, reactions);
        Ok(native? | reactions?)
    }

    async fn attachments(&self, trigger: &TriggerEvent, cap: u64) -> Fetched {
        let listed: Vec<Value> = trigger.payload["files"].as_array().cloned().unwrap_or_default();
        self.download(listed, cap).await
    }
}

impl SlackSource {
    /// Downloads Slack files (`files` objects of messages), each at most `cap` bytes;
    /// what cannot be loaded is said in a note.
    async fn download(&self, listed: Vec<Value>, cap: u64) -> Fetched {
        let mut out = Fetched::default();
        if listed.is_empty() {
            return out;
        }
        let Some(client) = &self.client else {
            out.notes.push(format!(
                "{} Slack file(s) were shared but SLACK_BOT_TOKEN is not set, so they were not loaded.",
                listed.len()
            ));
            return out;
        };
        for mut f in listed {
            if f["url_private_download"].is_null() && f["file_access"] == "check_file_info" {
                // A Slack Connect share: the event names the file only.
                let id = f["id"].as_str().unwrap_or_default().to_string();
                match client.get("files.info", &[("file", id.clone())]).await {
                    Ok(info) => {
                        let file = &info["file"];
                        f["name"] = file["name"].clone();
                        f["mimetype"] = file["mimetype"].clone();
                        f["size"] = file["size"].clone();
                        f["url_private_download"] = file["url_private_download"].clone();
                    }
                    Err(e) => {
                        out.notes.push(format!(
                            "file {id} (shared through Slack Connect) could not be read: files.info said {e}"
                        ));
                        continue;
                    }
                }
            }
            let name = f["name"].as_str().unwrap_or("file").to_string();
            let size = f["size"].as_u64().unwrap_or(0);
            if size > cap {
                out.notes.push(format!(
                    "file {name} ({size} bytes) was not loaded: it is over the {cap}-byte attachment cap."
                ));
                continue;
            }
            let Some(url) = f["url_private_download"].as_str() else {
                out.notes.push(format!(
                    "file {name} was shared without a download link, so it was not loaded."
                ));
                continue;
            };
            match client.download(&self.egress, url, cap).await {
                Ok(content) => {
                    let declared = f["mimetype"]
                        .as_str()
                        .filter(|m| !m.is_empty() && *m != "application/octet-stream");
                    let mime = declared.unwrap_or_else(|| mime::from_name(&name)).to_string();
                    out.files.push(NewFile { name, mime, content });
                }
                Err(e) => out.notes.push(format!("file {name} could not be loaded: {e}")),
            }
        }
        out
    }
}

async fn ask(
    client: &SlackClient,
    origin: &Origin,
    request: &ApprovalRequest<'_>,
) -> Result<(String, String), ApiError> {
    let (channel, thread_ts) = match origin.slack_thread() {
        Some((channel, ts)) => (channel.to_string(), ts.map(str::to_string)),
        None if !request.approvers.is_empty() => {
            let opened = client
                .call(
                    "conversations.open",
                    &json!({"users": request.approvers.join(",")}),
                )
                .await?;
            let channel = opened["channel"]["id"].as_str().unwrap_or_default().to_string();
            (channel, None)
        }
        None => {
            return Err(ApiError::NotConfigured(
                "approval.approvers (the trigger has no Slack thread)",
            ));
        }
    };
    let timeout = crate::types::duration::format_duration(request.timeout);
    let msg = message::approval_request(&message::Ask {
        approval: request.approval,
        run_id: request.run_id,
        agent: request.agent,
        tool: request.tool,
        arguments: request.arguments,
        reversible: request.reversible,
        requester: request.requester,
        approvers: request.approvers,
        timeout: &timeout,
        run_link: request.run_link.as_deref(),
        note: request.note.as_deref(),
    });
    let mut request = SlackApiChatPostMessageRequest::new(channel.as_str().into(), msg);
    request.thread_ts = thread_ts.map(Into::into);
    let sent = client.send("chat.postMessage", &request).await?;
    let ts = sent["ts"].as_str().unwrap_or_default().to_string();
    let channel = sent["channel"].as_str().map(str::to_string).unwrap_or(channel);
    Ok((channel, ts))
}

/// `:eyes:` on the triggering message while a run works, then `:white_check_mark:` or
/// `:x:`; nothing for steps.
async fn react(client: &SlackClient, origin: &Origin, progress: &Progress) -> Result<bool, ApiError> {
    let Origin::Slack {
        channel,
        ts: Some(ts),
        ..
    } = origin
    else {
        return Ok(false);
    };
    let react = |method: &'static str, name: &'static str| {
        let body = json!({"channel": channel, "timestamp": ts, "name": name});
        async move {
            match client.call(method, &body).await {
                Ok(_) => Ok(()),
                // Someone (or a retry) already did it: the mark is as wanted.
                Err(ApiError::Api { message, .. })
                    if message == "already_reacted" || message == "no_reaction" =>
                {
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
    };
    match progress {
        Progress::Working { .. } => react("reactions.add", "eyes").await?,
        Progress::Step(_) => return Ok(false),
        Progress::Done | Progress::Failed => {
            react("reactions.remove", "eyes").await?;
            let mark = if *progress == Progress::Done {
                "white_check_mark"
            } else {
                "x"
            };
            react("reactions.add", mark).await?;
        }
    }
    Ok(true)
}
