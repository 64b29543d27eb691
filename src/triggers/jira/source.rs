//! Replies as a comment on the triggering issue.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::integrations::ApiError;
use crate::integrations::jira::JiraClient;
use crate::triggers::Origin;
use crate::triggers::source::{Reply, Source};

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
        let Origin::Jira { issue_key, .. } = origin else {
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
        client.add_comment(issue_key, &body).await
    }
}
