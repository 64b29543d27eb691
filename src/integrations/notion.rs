//! Notion API client (`NOTION_TOKEN`, `NOTION_API_URL`, a pinned `Notion-Version`).

use std::time::Duration;

use serde_json::Value;

use super::ApiError;

const SERVICE: &str = "notion";
/// The API version steward is written against.
pub const NOTION_VERSION: &str = "2022-06-28";

#[derive(Clone)]
pub struct NotionClient {
    http: reqwest::Client,
    base_url: String,
    token: String,
}

impl NotionClient {
    pub fn new(http: reqwest::Client, base_url: &str, token: &str) -> Self {
        NotionClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    /// From `NOTION_TOKEN` and `NOTION_API_URL` (default `https://api.notion.com`).
    pub fn from_env(http: reqwest::Client) -> Option<Self> {
        let token = std::env::var("NOTION_TOKEN").ok().filter(|t| !t.is_empty())?;
        let base = std::env::var("NOTION_API_URL").unwrap_or_else(|_| "https://api.notion.com".into());
        Some(NotionClient::new(http, &base, &token))
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
        let (status, _, value) = super::send_json(SERVICE, &what, req).await?;
        if status.is_success() {
            return Ok(value);
        }
        if status.as_u16() == 429 {
            return Err(ApiError::RateLimited {
                service: SERVICE,
                method: what,
                retry_after_secs: 1,
            });
        }
        let message = value["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("HTTP {status}"));
        Err(ApiError::Api {
            service: SERVICE,
            method: what,
            message,
        })
    }

    /// `GET /v1/pages/{id}`.
    pub async fn get_page(&self, id: &str) -> Result<Value, ApiError> {
        self.send(reqwest::Method::GET, &format!("/v1/pages/{id}"), None)
            .await
    }
}

impl NotionClient {
    /// `POST /v1/comments` on a page.
    pub async fn add_comment(&self, page_id: &str, text: &str) -> Result<Value, ApiError> {
        let body = serde_json::json!({"parent": {"page_id": page_id},
            "rich_text": [{"type": "text", "text": {"content": text}}]});
        self.send(reqwest::Method::POST, "/v1/comments", Some(&body))
            .await
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
