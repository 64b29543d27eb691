//! `http_fetch`: GET a URL, following redirects, with a response size cap. Every target
//! (and every redirect hop) goes through the egress checks: internal addresses are
//! refused unless the operator allowed them.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::http::egress::{self, Egress};

use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// Default response cap: 20 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 20 * 1024 * 1024;

pub struct HttpFetch {
    spec: ToolSpec,
    egress: Egress,
    max_bytes: u64,
}

impl HttpFetch {
    pub fn new(egress: Egress) -> Self {
        HttpFetch::with_cap(egress, DEFAULT_MAX_BYTES)
    }

    /// A fetcher refusing responses larger than `max_bytes`.
    pub fn with_cap(egress: Egress, max_bytes: u64) -> Self {
        HttpFetch {
            spec: ToolSpec {
                name: "http_fetch".into(),
                description: "Fetches a public URL with HTTP GET (redirects are followed) and returns the status, content type and body text. Non-2xx answers are reported as errors; internal and private addresses are refused.".into(),
                parameters: super::args::schema_of::<FetchArgs>(),
                effect: Effect::ReadOnly,
            },
            egress,
            max_bytes,
        }
    }

    async fn fetch(&self, url: &str) -> ToolResult {
        reqwest::Url::parse(url).map_err(|e| ToolError::Model(format!("invalid URL '{url}': {e}")))?;
        let request = self
            .egress
            .get(url)
            .map_err(|e| ToolError::Model(e.to_string()))?;
        let mut response = request.send().await.map_err(|e| fetch_error(url, &e))?;
        let status = response.status();
        let final_url = response.url().to_string();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_string();
        if let Some(len) = response.content_length()
            && len > self.max_bytes
        {
            return Err(self.too_large(url));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| fetch_error(url, &e))? {
            if body.len() as u64 + chunk.len() as u64 > self.max_bytes {
                return Err(self.too_large(url));
            }
            body.extend_from_slice(&chunk);
        }
        let text = match String::from_utf8(body) {
            Ok(t) => t,
            Err(e) => format!("(binary content, {} bytes)", e.into_bytes().len()),
        };
        if !status.is_success() {
            let mut end = text.len().min(2000);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            return Err(ToolError::Model(format!(
                "HTTP {status} from {final_url}: {}",
                &text[..end]
            )));
        }
        Ok(ToolOutput::text(format!(
            "HTTP {status}\nurl: {final_url}\ncontent-type: {content_type}\n\n{text}"
        )))
    }

    fn too_large(&self, url: &str) -> ToolError {
        ToolError::Model(format!(
            "response from {url} exceeds the {} byte cap",
            self.max_bytes
        ))
    }
}

/// A refused target is named as such; anything else keeps the whole error chain.
fn fetch_error(url: &str, err: &reqwest::Error) -> ToolError {
    if let Some(refused) = egress::refusal(err) {
        return ToolError::Model(refused.to_string());
    }
    let what = if err.is_timeout() { "timed out" } else { "failed" };
    ToolError::Model(format!(
        "request to {url} {what}: {}",
        crate::http::error_chain(err)
    ))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FetchArgs {
    /// http:// or https:// URL
    #[schemars(length(min = 1))]
    url: String,
}

fn url_arg(args: Value) -> Result<String, ToolError> {
    super::args::parse::<FetchArgs>(args).map(|a| a.url)
}

#[async_trait]
impl Tool for HttpFetch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let url = url_arg(args)?;
        tokio::select! {
            r = self.fetch(&url) => r,
            _ = ctx.cancel.cancelled() => Err(ToolError::Model("cancelled".into())),
        }
    }

    async fn mock(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let url = url_arg(args)?;
        Ok(ToolOutput::text(format!(
            "HTTP 200 OK\nurl: {url}\ncontent-type: text/html; charset=utf-8\n\n<html><head><title>Example page</title></head><body><h1>Example page</h1><p>Mock content served for {url}.</p></body></html>"
        )))
    }
}
