//! Posting a run's final answer back where its trigger came from: the Slack thread
//! (never the channel root for a thread event), a comment on the Jira issue, a comment on
//! the Notion page; each ending with a link to the prompt that drove it.

use serde_json::{Value, json};

use super::{Origin, Recorder};
use crate::config::{AgentConfig, Coordinator};
use crate::integrations::ApiError;
use crate::integrations::jira::JiraClient;
use crate::integrations::notion::NotionClient;
use crate::integrations::slack::SlackClient;
use crate::run::events::RunEvent;

/// Where replies go; clients are optional (a missing one means no reply there).
#[derive(Clone, Default)]
pub struct Outputs {
    pub slack: Option<SlackClient>,
    pub jira: Option<JiraClient>,
    pub notion: Option<NotionClient>,
    /// Prefix turning a prompt's repository path into a link, e.g.
    /// `https://github.com/acme/steward/blob/main/` (`STEWARD_PROMPT_BASE_URL`).
    pub prompt_base_url: Option<String>,
    /// Notion-hosted prompts, cached.
    pub prompts: std::sync::Arc<super::prompts::PromptCache>,
    /// Checked client for file URLs found in events (Slack files, Notion file links).
    pub egress: crate::http::Egress,
}

impl Outputs {
    /// Replies through `clients`; prompt links use `STEWARD_PROMPT_BASE_URL`.
    pub fn new(clients: &crate::integrations::Clients, egress: crate::http::Egress) -> Outputs {
        Outputs {
            slack: clients.slack.clone(),
            jira: clients.jira.clone(),
            notion: clients.notion.clone(),
            prompt_base_url: std::env::var("STEWARD_PROMPT_BASE_URL")
                .ok()
                .filter(|v| !v.is_empty()),
            prompts: Default::default(),
            egress,
        }
    }

    /// The link to the prompt (or script) that drove `agent`.
    pub fn prompt_link(&self, agent: &AgentConfig) -> Option<String> {
        let path = match (&agent.prompt, &agent.coordinator) {
            (Some(p), _) if p.url.is_some() => return p.url.clone(),
            (_, Coordinator::Script { path, .. }) => path.display().to_string(),
            (Some(p), _) => p.path.clone(),
            (None, _) => return None,
        };
        Some(match &self.prompt_base_url {
            Some(base) => format!("{}/{path}", base.trim_end_matches('/')),
            None => path,
        })
    }

    /// Posts `text` to the trigger's place. Returns `Ok(None)` when the origin has no
    /// reply destination. The `reply` event is flushed before posting so crash recovery
    /// treats the run as having side effects.
    pub async fn post(
        &self,
        agent: &AgentConfig,
        origin: &Origin,
        text: &str,
        recorder: &Recorder,
    ) -> Result<Option<Value>, ApiError> {
        let link = agent
            .output
            .prompt_link
            .then(|| self.prompt_link(agent))
            .flatten();
        let destination = match origin {
            Origin::Slack {
                channel,
                ts,
                thread_ts,
                ..
            } => json!({"slack": channel, "thread_ts": thread_ts.as_ref().or(ts.as_ref())}),
            Origin::Jira { issue_key, .. } => json!({"jira": issue_key}),
            Origin::Notion {
                entity_id: Some(page),
                ..
            } => json!({"notion": page}),
            _ => return Ok(None),
        };
        recorder.record(RunEvent::Reply {
            destination,
            side_effect: true,
            text: recorder.wrap(text),
        });
        recorder.flush().await.map_err(|e| ApiError::Transport {
            service: "steward",
            method: "reply".into(),
            message: e.to_string(),
        })?;
        let sent = match origin {
            Origin::Slack {
                channel,
                ts,
                thread_ts,
                ..
            } => {
                let client = self
                    .slack
                    .as_ref()
                    .ok_or(ApiError::NotConfigured("SLACK_BOT_TOKEN"))?;
                let body = match &link {
                    Some(l) => format!("{text}\n\n_<{l}|Prompt>_"),
                    None => text.to_string(),
                };
                // Reply in the thread: the thread root for a threaded message, else the
                // message itself (a reaction's target, a mention).
                let mut msg = json!({"channel": channel, "text": body, "unfurl_links": false,
                    "metadata": {"event_type": "steward_reply", "event_payload": {"idempotency_key": format!("{}:reply", recorder.run_id())}}});
                if let Some(t) = thread_ts.as_ref().or(ts.as_ref()) {
                    msg["thread_ts"] = json!(t);
                }
                client.call("chat.postMessage", &msg).await?
            }
            Origin::Jira { issue_key, .. } => {
                let client = self
                    .jira
                    .as_ref()
                    .ok_or(ApiError::NotConfigured("JIRA_BASE_URL"))?;
                let body = match &link {
                    Some(l) => format!("{text}\n\n[Prompt]({l})"),
                    None => text.to_string(),
                };
                client.add_comment(issue_key, &body).await?
            }
            Origin::Notion {
                entity_id: Some(page),
                ..
            } => {
                let client = self
                    .notion
                    .as_ref()
                    .ok_or(ApiError::NotConfigured("NOTION_TOKEN"))?;
                let body = match &link {
                    Some(l) => format!("{text}\n\nPrompt: {l}"),
                    None => text.to_string(),
                };
                client.add_comment(page, &body).await?
            }
            _ => return Ok(None),
        };
        Ok(Some(sent))
    }
}
