//! Replies as a comment on the triggering issue.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::integrations::ApiError;
use crate::integrations::adf_text::field_text;
use crate::integrations::jira::JiraClient;
use crate::triggers::source::{Reply, Source, Thread, ThreadTurn};
use crate::triggers::{Origin, TriggerEvent};

/// Comments of an issue read as its conversation, the newest.
pub const MAX_COMMENTS: usize = 100;

pub struct JiraSource {
    client: Option<JiraClient>,
}

impl JiraSource {
    pub fn new(client: Option<JiraClient>) -> Self {
        JiraSource { client }
    }
}

#[async_trait]
impl Source for JiraSource {
    fn owns(&self, origin: &Origin) -> bool {
        matches!(origin, Origin::Jira { .. })
    }

    fn reply_destination(&self, origin: &Origin) -> Option<Value> {
        match origin {
            Origin::Jira { issue_key, .. } => Some(json!({"jira": issue_key})),
            _ => None,
        }
    }

    async fn post_reply(&self, origin: &Origin, reply: &Reply<'_>) -> Result<Value, ApiError> {
        let Some((issue_key, restriction)) = origin.jira_answer() else {
            return Err(ApiError::NotConfigured("a Jira origin"));
        };
        let client = self
            .client
            .as_ref()
            .ok_or(ApiError::NotConfigured("JIRA_BASE_URL"))?;
        let mut body = reply.text.to_string();
        let links = [("Prompt", reply.prompt_link), ("Run", reply.run_link)];
        let links: Vec<String> = links
            .iter()
            .filter_map(|(label, link)| link.map(|l| format!("[{label}]({l})")))
            .collect();
        if !links.is_empty() {
            body.push_str("\n\n");
            body.push_str(&links.join(" · "));
        }
        client
            .add_comment_restricted(issue_key, &body, &restriction)
            .await
    }

    /// An event whose actor, or whose comment's author, is the account steward acts as.
    async fn is_our_own(&self, trigger: &TriggerEvent) -> Result<bool, ApiError> {
        let Some(client) = self.client.as_ref() else {
            return Ok(false);
        };
        let me = client.account_id().await?;
        let me = Some(me.as_str());
        Ok(trigger.payload["account"].as_str() == me || trigger.payload["comment"]["author"].as_str() == me)
    }

    /// A comment that mentions the account steward comments as, written by someone else.
    async fn addresses_bot(&self, trigger: &TriggerEvent) -> bool {
        let Some(client) = self.client.as_ref().filter(|_| trigger.kind == "comment_created") else {
            return false;
        };
        let Ok(me) = client.account_id().await else {
            return false;
        };
        let comment = &trigger.payload["comment"];
        comment["author"].as_str() != Some(me.as_str())
            && comment["mentions"]
                .as_array()
                .is_some_and(|m| m.iter().any(|id| id.as_str() == Some(me.as_str())))
    }

    /// For a comment: the issue's comments, steward's own as its turns.
    async fn thread(&self, trigger: &TriggerEvent, _cap: u64) -> Option<Result<Thread, ApiError>> {
        // The answer is posted under the triggering comment's restriction.
        let (issue_key, answer) = trigger.origin.jira_answer()?;
        trigger.conversation_key()?;
        let client = self.client.as_ref()?;
        let this = trigger.payload["comment"]["id"].as_str();
        Some(
            async {
                let me = client.account_id().await?;
                let (comments, omitted) = client.comments(issue_key, MAX_COMMENTS).await?;
                let mut thread = Thread {
                    omitted,
                    ..Thread::default()
                };
                let mut after = false;
                for c in comments {
                    // A comment shown to a role or group, or a service desk's internal
                    // note, stays out of a run whose answer others than those read.
                    if !answer.covers(&crate::integrations::jira::Restriction::of_comment(&c)) {
                        thread.omitted += 1;
                        continue;
                    }
                    let id = c["id"].as_str().unwrap_or_default().to_string();
                    if Some(id.as_str()) == this {
                        after = true;
                        continue;
                    }
                    let own = c["author"]["accountId"].as_str() == Some(me.as_str());
                    let author = match c["author"]["displayName"].as_str() {
                        _ if own => "you".to_string(),
                        Some(name) => format!("@{name}"),
                        None => "someone".to_string(),
                    };
                    let turn = ThreadTurn {
                        id,
                        own,
                        author,
                        text: field_text(&c["body"]),
                    };
                    if after && !own {
                        thread.later.push(turn);
                    } else {
                        thread.turns.push(turn);
                    }
                }
                Ok(thread)
            }
            .await,
        )
    }
}
