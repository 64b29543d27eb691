//! Notion API client (`NOTION_TOKEN`, `NOTION_API_URL`, a pinned `Notion-Version`).

use std::time::Duration;

use serde_json::Value;

use super::ApiError;
use crate::config::Settings;
use crate::http::Egress;

const SERVICE: &str = "notion";
/// The API version steward is written against.
pub const NOTION_VERSION: &str = "2022-06-28";

/// A page, database or block id (a UUID, with or without dashes), checked before it
/// goes into a path or query.
fn notion_id(id: &str) -> Result<&str, ApiError> {
    super::path_id(SERVICE, "a Notion id (32 hex digits, dashes optional)", id)
}

#[derive(Clone)]
pub struct NotionClient {
    http: reqwest::Client,
    base_url: String,
    token: String,
    /// The integration's bot user, looked up once.
    bot_user: super::own_id::OwnId,
}

impl NotionClient {
    pub fn new(http: reqwest::Client, base_url: &str, token: &str) -> Self {
        NotionClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            bot_user: Default::default(),
        }
    }

    /// From `NOTION_TOKEN` and `NOTION_API_URL` (default `https://api.notion.com`).
    pub fn from_settings(http: reqwest::Client, s: &Settings) -> Option<Self> {
        let token = s.notion_token.as_deref()?;
        let base = s.notion_api_url.as_deref().unwrap_or("https://api.notion.com");
        Some(NotionClient::new(http, base, token))
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let what = format!("{method} {path}");
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base_url))
            .bearer_auth(&self.token)
            .header("Notion-Version", NOTION_VERSION)
            .timeout(Duration::from_secs(30));
        if let Some(b) = body {
            req = req.json(b);
        }
        let (status, headers, value) = super::send_json(SERVICE, &what, req).await?;
        if status.is_success() {
            return Ok(value);
        }
        let message = value["message"].as_str().map(str::to_string);
        Err(super::failure(
            SERVICE,
            what,
            status,
            &headers,
            status.as_u16() == 429,
            1,
            message,
        ))
    }

    /// `GET /v1/pages/{id}`.
    pub async fn get_page(&self, id: &str) -> Result<Value, ApiError> {
        let id = notion_id(id)?;
        self.send(reqwest::Method::GET, &format!("/v1/pages/{id}"), None)
            .await
    }

    /// `GET /v1/databases/{id}` (its title and parent).
    pub async fn get_database(&self, id: &str) -> Result<Value, ApiError> {
        let id = notion_id(id)?;
        self.send(reqwest::Method::GET, &format!("/v1/databases/{id}"), None)
            .await
    }

    /// `POST /v1/search`: pages (or data sources, with `object`) shared with the
    /// integration whose title matches `query`, most recently edited first.
    pub async fn search(&self, query: &str, object: Option<&str>, page_size: u32) -> Result<Value, ApiError> {
        let mut body = serde_json::json!({
            "query": query,
            "page_size": page_size.clamp(1, 100),
            "sort": {"timestamp": "last_edited_time", "direction": "descending"},
        });
        if let Some(o) = object {
            body["filter"] = serde_json::json!({"property": "object", "value": o});
        }
        self.send(reqwest::Method::POST, "/v1/search", Some(&body)).await
    }
}

impl NotionClient {
    /// `POST /v1/databases/{id}/query` (one page of results).
    pub async fn query_database(
        &self,
        id: &str,
        filter: Option<&Value>,
        cursor: Option<&str>,
    ) -> Result<Value, ApiError> {
        let id = notion_id(id)?;
        let mut body = serde_json::json!({"page_size": 100});
        if let Some(f) = filter {
            body["filter"] = f.clone();
        }
        if let Some(c) = cursor {
            body["start_cursor"] = serde_json::json!(c);
        }
        self.send(
            reqwest::Method::POST,
            &format!("/v1/databases/{id}/query"),
            Some(&body),
        )
        .await
    }

    /// `PATCH /v1/pages/{id}` with new property values (Notion's property JSON).
    pub async fn update_properties(&self, id: &str, properties: &Value) -> Result<Value, ApiError> {
        let id = notion_id(id)?;
        let body = serde_json::json!({"properties": properties});
        self.send(reqwest::Method::PATCH, &format!("/v1/pages/{id}"), Some(&body))
            .await
    }

    /// A page's content as Markdown: blocks paged through `next_cursor` and children
    /// recursed (to `max_depth` levels, at most `max_blocks` blocks).
    pub async fn page_markdown(&self, id: &str, max_blocks: usize) -> Result<String, ApiError> {
        let mut out = String::new();
        let mut count = 0;
        self.blocks_markdown(id, 0, &mut out, &mut count, max_blocks)
            .await?;
        Ok(out)
    }

    fn blocks_markdown<'a>(
        &'a self,
        id: &'a str,
        depth: usize,
        out: &'a mut String,
        count: &'a mut usize,
        max_blocks: usize,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ApiError>> + Send + 'a>> {
        Box::pin(async move {
            let id = notion_id(id)?;
            let mut cursor: Option<String> = None;
            loop {
                let path = match &cursor {
                    Some(c) => format!("/v1/blocks/{id}/children?page_size=100&start_cursor={c}"),
                    None => format!("/v1/blocks/{id}/children?page_size=100"),
                };
                let page = self.send(reqwest::Method::GET, &path, None).await?;
                for block in page["results"].as_array().into_iter().flatten() {
                    if *count >= max_blocks {
                        return Ok(());
                    }
                    *count += 1;
                    out.push_str(&"  ".repeat(depth));
                    out.push_str(&block_markdown(block));
                    out.push('\n');
                    if block["has_children"].as_bool() == Some(true)
                        && depth < 3
                        && let Some(child) = block["id"].as_str()
                    {
                        self.blocks_markdown(child, depth + 1, out, count, max_blocks)
                            .await?;
                    }
                }
                match page["next_cursor"].as_str() {
                    Some(c) if page["has_more"].as_bool() == Some(true) => cursor = Some(c.to_string()),
                    _ => return Ok(()),
                }
            }
        })
    }

    /// Downloads a file a page links to (Notion-hosted files are signed URLs: no auth
    /// header; `external` files can point anywhere) through the egress checks, refusing
    /// more than `cap` bytes.
    pub async fn download(&self, egress: &Egress, url: &str, cap: u64) -> Result<Vec<u8>, ApiError> {
        let request = egress.get(url).map_err(|e| ApiError::Api {
            service: SERVICE,
            method: "file download".into(),
            message: e.to_string(),
        })?;
        super::download_capped(SERVICE, "file download", request, cap).await
    }

    /// The integration's bot user id (`GET /v1/users/me`), looked up once.
    pub async fn bot_user_id(&self) -> Result<String, ApiError> {
        self.bot_user
            .get(|| async {
                let me = self.send(reqwest::Method::GET, "/v1/users/me", None).await?;
                me["id"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::Api {
                        service: SERVICE,
                        method: "GET /v1/users/me".into(),
                        message: "no id in the answer".into(),
                    })
            })
            .await
    }

    /// The open comments on a page or block, oldest first, at most `max`
    /// (`GET /v1/comments?block_id=`, paged).
    pub async fn comments(&self, block_id: &str, max: usize) -> Result<Vec<Value>, ApiError> {
        let block_id = notion_id(block_id)?;
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        while out.len() < max {
            let mut path = format!("/v1/comments?block_id={block_id}&page_size=100");
            if let Some(c) = &cursor {
                path.push_str(&format!("&start_cursor={c}"));
            }
            let page = self.send(reqwest::Method::GET, &path, None).await?;
            out.extend(page["results"].as_array().cloned().unwrap_or_default());
            cursor = page["next_cursor"].as_str().map(str::to_string);
            if cursor.is_none() || page["has_more"] != true {
                break;
            }
        }
        out.truncate(max);
        Ok(out)
    }

    /// `POST /v1/comments` in an existing discussion thread.
    pub async fn reply_in_discussion(&self, discussion_id: &str, text: &str) -> Result<Value, ApiError> {
        let body = serde_json::json!({"discussion_id": discussion_id,
            "rich_text": [{"type": "text", "text": {"content": text}}]});
        self.send(reqwest::Method::POST, "/v1/comments", Some(&body))
            .await
    }

    /// `POST /v1/comments` on a page.
    pub async fn add_comment(&self, page_id: &str, text: &str) -> Result<Value, ApiError> {
        // Notion takes at most 2,000 characters per text object and 100 objects.
        let chars: Vec<char> = text.chars().collect();
        let parts: Vec<Value> = chars
            .chunks(2000)
            .take(100)
            .map(|c| serde_json::json!({"type": "text", "text": {"content": c.iter().collect::<String>()}}))
            .collect();
        let body = serde_json::json!({"parent": {"page_id": page_id}, "rich_text": parts});
        self.send(reqwest::Method::POST, "/v1/comments", Some(&body))
            .await
    }
}

/// A rich-text array as Markdown (`plain_text`, with code, bold and links).
pub fn rich_text(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let text = t["plain_text"].as_str().unwrap_or_default();
            let a = &t["annotations"];
            let text = if a["code"] == true {
                format!("`{text}`")
            } else {
                text.to_string()
            };
            let text = if a["bold"] == true {
                format!("**{text}**")
            } else {
                text
            };
            match t["href"].as_str() {
                Some(h) => format!("[{text}]({h})"),
                None => text,
            }
        })
        .collect()
}

/// One block as a Markdown line.
pub fn block_markdown(block: &Value) -> String {
    let kind = block["type"].as_str().unwrap_or_default();
    let body = &block[kind];
    let text = rich_text(&body["rich_text"]);
    match kind {
        "heading_1" => format!("# {text}"),
        "heading_2" => format!("## {text}"),
        "heading_3" => format!("### {text}"),
        "bulleted_list_item" => format!("- {text}"),
        "numbered_list_item" => format!("1. {text}"),
        "to_do" => format!("- [{}] {text}", if body["checked"] == true { "x" } else { " " }),
        "quote" => format!("> {text}"),
        "code" => format!(
            "```{}\n{text}\n```",
            body["language"].as_str().unwrap_or_default()
        ),
        "divider" => "---".into(),
        "child_page" => format!("(page: {})", body["title"].as_str().unwrap_or_default()),
        _ => text,
    }
}

/// A page property's value as text: status and select names, titles and rich text,
/// numbers, checkboxes, dates and people names.
pub fn property_text(page: &Value, property: &str) -> Option<String> {
    let p = page["properties"].get(property)?;
    let plain = |arr: &Value| -> String {
        arr.as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["plain_text"].as_str())
            .collect()
    };
    Some(match p["type"].as_str()? {
        "status" | "select" => p[p["type"].as_str()?]["name"].as_str()?.to_string(),
        "title" => plain(&p["title"]),
        "rich_text" => plain(&p["rich_text"]),
        "number" => p["number"].to_string(),
        "checkbox" => p["checkbox"].to_string(),
        "date" => p["date"]["start"].as_str()?.to_string(),
        "multi_select" => p["multi_select"]
            .as_array()?
            .iter()
            .filter_map(|o| o["name"].as_str())
            .collect::<Vec<_>>()
            .join(", "),
        "people" => p["people"]
            .as_array()?
            .iter()
            .filter_map(|o| o["name"].as_str())
            .collect::<Vec<_>>()
            .join(", "),
        _ => return None,
    })
}
