//! Replies as a comment on the triggering page; files in the page's `files` properties.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::files::{NewFile, mime};
use crate::http::Egress;
use crate::integrations::ApiError;
use crate::integrations::notion::NotionClient;
use crate::triggers::source::{Fetched, Reply, Source};
use crate::triggers::{Origin, TriggerEvent};

pub struct NotionSource {
    client: Option<NotionClient>,
    egress: Egress,
}

impl NotionSource {
    pub fn new(client: Option<NotionClient>, egress: Egress) -> Self {
        NotionSource { client, egress }
    }
}

fn page(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::Notion {
            entity_id: Some(page),
            ..
        } => Some(page),
        _ => None,
    }
}

#[async_trait]
impl Source for NotionSource {
    fn owns(&self, origin: &Origin) -> bool {
        matches!(origin, Origin::Notion { .. })
    }

    fn reply_destination(&self, origin: &Origin) -> Option<Value> {
        page(origin).map(|p| json!({"notion": p}))
    }

    async fn post_reply(&self, origin: &Origin, reply: &Reply<'_>) -> Result<Value, ApiError> {
        let page = page(origin).ok_or(ApiError::NotConfigured("a Notion page origin"))?;
        let client = self
            .client
            .as_ref()
            .ok_or(ApiError::NotConfigured("NOTION_TOKEN"))?;
        let mut body = reply.text.to_string();
        let links = [("Prompt", reply.prompt_link), ("Run", reply.run_link)];
        let links: Vec<String> = links
            .iter()
            .filter_map(|(label, link)| link.map(|l| format!("{label}: {l}")))
            .collect();
        if !links.is_empty() {
            body.push_str("\n\n");
            body.push_str(&links.join(" · "));
        }
        client.add_comment(page, &body).await
    }

    /// `notion:<page-id>`: the page as Markdown (nested blocks included).
    async fn fetch_prompt(&self, reference: &str) -> Option<Result<String, ApiError>> {
        let page = reference.strip_prefix("notion:")?.trim();
        Some(match &self.client {
            Some(client) => client.page_markdown(page, 2_000).await,
            None => Err(ApiError::NotConfigured("NOTION_TOKEN")),
        })
    }

    /// Files attached to the page through `files` properties (comments have none).
    async fn attachments(&self, trigger: &TriggerEvent, cap: u64) -> Fetched {
        let mut out = Fetched::default();
        let Origin::Notion {
            entity_id: Some(page),
            entity_type,
            ..
        } = &trigger.origin
        else {
            return out;
        };
        if entity_type.as_deref() == Some("comment") {
            return out;
        }
        let Some(client) = &self.client else {
            return out;
        };
        let Ok(page) = client.get_page(page).await else {
            return out;
        };
        let listed: Vec<Value> = page["properties"]
            .as_object()
            .into_iter()
            .flat_map(|props| props.values())
            .filter(|p| p["type"] == "files")
            .flat_map(|p| p["files"].as_array().cloned().unwrap_or_default())
            .collect();
        for f in listed {
            let name = f["name"].as_str().unwrap_or("file").to_string();
            let Some(url) = f["file"]["url"].as_str().or(f["external"]["url"].as_str()) else {
                continue;
            };
            match client.download(&self.egress, url, cap).await {
                Ok(content) => out.files.push(NewFile {
                    mime: mime::from_name(&name).to_string(),
                    name,
                    content,
                }),
                Err(e) => out.notes.push(format!("file {name} could not be loaded: {e}")),
            }
        }
        out
    }
}
