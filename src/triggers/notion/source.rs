//! Replies as a comment on the triggering page; files in the page's `files` properties.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::files::{NewFile, mime};
use crate::http::Egress;
use crate::integrations::ApiError;
use crate::integrations::notion::NotionClient;
use crate::integrations::notion::rich_text;
use crate::triggers::notion::inbound::normalize_id;
use crate::triggers::source::{Fetched, Reply, Source, Thread, ThreadTurn};
use crate::triggers::{Origin, TriggerEvent};

/// Comments of a page read to find a discussion, at most.
pub const MAX_COMMENTS: usize = 500;

pub struct NotionSource {
    client: Option<NotionClient>,
    egress: Egress,
}

impl NotionSource {
    pub fn new(client: Option<NotionClient>, egress: Egress) -> Self {
        NotionSource { client, egress }
    }
}

/// The page an origin is about (a comment's page for a comment).
fn page(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::Notion {
            page_id: Some(page), ..
        } => Some(page),
        // Only a page is one: a database's or data source's id takes no comments.
        Origin::Notion {
            entity_id: Some(page),
            entity_type,
            ..
        } if matches!(entity_type.as_deref(), Some("page") | None) => Some(page),
        _ => None,
    }
}

/// The comment an origin is about, for a comment event.
fn comment(origin: &Origin) -> Option<&str> {
    match origin {
        Origin::Notion {
            entity_id: Some(id),
            entity_type: Some(t),
            ..
        } if t == "comment" => Some(id),
        _ => None,
    }
}

/// A comment's discussion on its page: the bot's user id, the triggering comment and
/// every comment of its discussion, oldest first.
struct Discussion {
    me: String,
    this: Value,
    comments: Vec<Value>,
}

async fn discussion(
    client: &NotionClient,
    page: &str,
    comment: &str,
) -> Result<Option<Discussion>, ApiError> {
    let me = client.bot_user_id().await?;
    let all = client.comments(page, MAX_COMMENTS).await?;
    let wanted = normalize_id(comment);
    let Some(this) = all
        .iter()
        .find(|c| c["id"].as_str().map(normalize_id).as_deref() == Some(wanted.as_str()))
        .cloned()
    else {
        return Ok(None);
    };
    let comments = all
        .into_iter()
        .filter(|c| c["discussion_id"] == this["discussion_id"])
        .collect();
    Ok(Some(Discussion { me, this, comments }))
}

/// Whether a comment's rich text mentions `user`.
fn mentions(comment: &Value, user: &str) -> bool {
    comment["rich_text"].as_array().into_iter().flatten().any(|t| {
        t["type"] == "mention"
            && t["mention"]["type"] == "user"
            && t["mention"]["user"]["id"].as_str().map(normalize_id) == Some(normalize_id(user))
    })
}

fn author_id(comment: &Value) -> Option<String> {
    comment["created_by"]["id"].as_str().map(normalize_id)
}

#[async_trait]
impl Source for NotionSource {
    fn owns(&self, origin: &Origin) -> bool {
        matches!(origin, Origin::Notion { .. })
    }

    /// An event whose authors are all the integration's own bot user (Notion groups
    /// edits close in time into one event: a person's among them is theirs).
    async fn is_our_own(&self, trigger: &TriggerEvent) -> Result<bool, ApiError> {
        let Some(client) = self.client.as_ref() else {
            return Ok(false);
        };
        let Some(authors) = trigger.payload["authors"].as_array().filter(|a| !a.is_empty()) else {
            return Ok(false);
        };
        let me = normalize_id(&client.bot_user_id().await?);
        Ok(authors
            .iter()
            .all(|a| a["id"].as_str().map(normalize_id).as_deref() == Some(me.as_str())))
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
        // A comment is answered in its discussion; anything else on the page.
        if let Some(comment) = comment(origin)
            && let Some(d) = discussion(client, page, comment).await?
            && let Some(id) = d.this["discussion_id"].as_str()
        {
            return client.reply_in_discussion(id, &body).await;
        }
        client.add_comment(page, &body).await
    }

    /// A comment that mentions the integration, written by someone else.
    async fn addresses_bot(&self, trigger: &TriggerEvent) -> bool {
        let (Some(client), Some(page), Some(comment)) =
            (&self.client, page(&trigger.origin), comment(&trigger.origin))
        else {
            return false;
        };
        match discussion(client, page, comment).await {
            Ok(Some(d)) => author_id(&d.this) != Some(normalize_id(&d.me)) && mentions(&d.this, &d.me),
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a Notion comment to see whom it addresses");
                false
            }
        }
    }

    /// For a comment: its discussion, the integration's comments as its own turns, and
    /// the comment's text (the event carries only ids).
    async fn thread(&self, trigger: &TriggerEvent, _cap: u64) -> Option<Result<Thread, ApiError>> {
        let (client, page, comment) = (
            self.client.as_ref()?,
            page(&trigger.origin)?,
            comment(&trigger.origin)?,
        );
        Some(match discussion(client, page, comment).await {
            Ok(Some(d)) => {
                let me = normalize_id(&d.me);
                let mut thread = Thread {
                    request: Some(rich_text(&d.this["rich_text"])),
                    ..Thread::default()
                };
                let mut after = false;
                for c in &d.comments {
                    if c["id"] == d.this["id"] {
                        after = true;
                        continue;
                    }
                    let own = author_id(c).as_deref() == Some(me.as_str());
                    let turn = ThreadTurn {
                        id: c["id"].as_str().unwrap_or_default().to_string(),
                        own,
                        author: if own { "you".into() } else { "a Notion user".into() },
                        text: rich_text(&c["rich_text"]),
                    };
                    if after && !own {
                        thread.later.push(turn);
                    } else {
                        thread.turns.push(turn);
                    }
                }
                Ok(thread)
            }
            Ok(None) => Ok(Thread::default()),
            Err(e) => Err(e),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_page_takes_the_reply() {
        // As Notion sends them: a data source's schema change, a page's property update.
        let data_source = crate::triggers::notion::parse(&serde_json::json!({
            "id": "ev-1", "timestamp": "2025-09-01T10:00:00.000Z", "type": "data_source.schema_updated",
            "entity": {"id": "248104cd-477e-80af-bc30-000bd28de8f9", "type": "data_source"},
            "data": {"parent": {"id": "1a2b3c4d-5e6f-47a8-b9c0-d1e2f3a4b5c6", "type": "database"}}
        }))
        .unwrap();
        let page_event = crate::triggers::notion::parse(&serde_json::json!({
            "id": "ev-2", "timestamp": "2025-09-01T10:00:00.000Z", "type": "page.properties_updated",
            "entity": {"id": "153104cd-477e-809d-8dc4-ff2d96ae3090", "type": "page"},
            "data": {"parent": {"id": "1a2b3c4d-5e6f-47a8-b9c0-d1e2f3a4b5c6", "type": "data_source"}, "updated_properties": ["s"]}
        }))
        .unwrap();
        let origin = |p: crate::triggers::notion::NotionPayload| match p {
            crate::triggers::notion::NotionPayload::Event { event, .. } => event.origin,
            _ => panic!("not an event"),
        };
        assert_eq!(
            page(&origin(data_source)),
            None,
            "a data source is not a page to comment on"
        );
        assert_eq!(
            page(&origin(page_event)),
            Some("153104cd-477e-809d-8dc4-ff2d96ae3090")
        );
    }
}
