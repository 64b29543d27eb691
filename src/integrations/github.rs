//! GitHub REST client (`GITHUB_TOKEN`, `GITHUB_API_URL`).

use std::time::Duration;

use serde_json::Value;

use super::ApiError;
use crate::config::Settings;

const SERVICE: &str = "github";

#[derive(Clone)]
pub struct GithubClient {
    http: reqwest::Client,
    base_url: String,
    token: Option<String>,
}

/// A pull request named by owner, repository and number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrRef {
    pub owner: String,
    pub repo: String,
    pub number: u64,
}

impl PrRef {
    /// Parses `https://github.com/{owner}/{repo}/pull/{number}` (extra path parts and
    /// fragments allowed).
    pub fn from_url(url: &str) -> Option<PrRef> {
        let rest = url.split("://").nth(1)?;
        let mut parts = rest.split(['/', '#', '?']);
        let _host = parts.next()?;
        let owner = parts.next()?.to_string();
        let repo = parts.next()?.to_string();
        if parts.next()? != "pull" {
            return None;
        }
        let number = parts.next()?.parse().ok()?;
        (!owner.is_empty() && !repo.is_empty()).then_some(PrRef { owner, repo, number })
    }
}

impl GithubClient {
    pub fn new(http: reqwest::Client, base_url: &str, token: Option<String>) -> Self {
        GithubClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            token,
        }
    }

    /// From `GITHUB_API_URL` (default `https://api.github.com`) and `GITHUB_TOKEN`.
    pub fn from_settings(http: reqwest::Client, s: &Settings) -> Self {
        let base = s.github_api_url.as_deref().unwrap_or("https://api.github.com");
        GithubClient::new(http, base, s.github_token.clone())
    }

    /// `GET /repos/{owner}/{repo}/pulls/{number}`.
    pub async fn pull_request(&self, pr: &PrRef) -> Result<Value, ApiError> {
        let owner = super::path_id(SERVICE, "a GitHub owner", &pr.owner)?;
        let repo = super::path_id(SERVICE, "a GitHub repository name", &pr.repo)?;
        let path = format!("/repos/{owner}/{repo}/pulls/{}", pr.number);
        self.get(&path, &[]).await
    }

    /// `GET /search/issues`: issues or pull requests matching `q` (which must say
    /// `is:issue` or `is:pull-request`), best match first.
    pub async fn search_issues(&self, q: &str, per_page: u32) -> Result<Value, ApiError> {
        let params = [
            ("q", q.to_string()),
            ("per_page", per_page.clamp(1, 100).to_string()),
        ];
        self.get("/search/issues", &params).await
    }

    /// `GET /repos/{repo}`: the repository (its `default_branch`). `repo` is
    /// `owner/name`.
    pub async fn repository(&self, repo: &str) -> Result<Value, ApiError> {
        self.get(&format!("/repos/{repo}"), &[]).await
    }

    /// The commit `branch` points at (`GET /repos/{repo}/git/ref/heads/{branch}`).
    pub async fn branch_sha(&self, repo: &str, branch: &str) -> Result<String, ApiError> {
        let v = self
            .get(&format!("/repos/{repo}/git/ref/heads/{branch}"), &[])
            .await?;
        Ok(v["object"]["sha"].as_str().unwrap_or_default().to_string())
    }

    /// Creates branch `branch` at commit `sha` (`POST /repos/{repo}/git/refs`).
    pub async fn create_branch(&self, repo: &str, branch: &str, sha: &str) -> Result<Value, ApiError> {
        let body = serde_json::json!({ "ref": format!("refs/heads/{branch}"), "sha": sha });
        self.send(
            reqwest::Method::POST,
            &format!("/repos/{repo}/git/refs"),
            &[],
            Some(&body),
        )
        .await
    }

    /// Writes `path` on `branch` with one commit (`PUT /repos/{repo}/contents/{path}`),
    /// replacing the file that is there (whose blob sha it looks up first).
    pub async fn put_file(
        &self,
        repo: &str,
        branch: &str,
        path: &str,
        content: &[u8],
        message: &str,
    ) -> Result<Value, ApiError> {
        use base64::Engine as _;
        let url = format!("/repos/{repo}/contents/{path}");
        // A new file has no blob to replace: GitHub answers 404.
        let (status, headers, found) = self
            .request(reqwest::Method::GET, &url, &[("ref", branch.to_string())], None)
            .await?;
        let existing = match status.as_u16() {
            404 => None,
            _ => Some(Self::checked(&url, status, &headers, found)?),
        }
        .and_then(|v| v["sha"].as_str().map(str::to_string));
        let mut body = serde_json::json!({
            "message": message,
            "content": base64::engine::general_purpose::STANDARD.encode(content),
            "branch": branch,
        });
        if let Some(sha) = existing {
            body["sha"] = Value::String(sha);
        }
        self.send(reqwest::Method::PUT, &url, &[], Some(&body)).await
    }

    /// Opens a pull request from `head` into `base` (`POST /repos/{repo}/pulls`);
    /// returns it (`html_url`, `number`).
    pub async fn create_pull(
        &self,
        repo: &str,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<Value, ApiError> {
        let payload = serde_json::json!({ "title": title, "head": head, "base": base, "body": body });
        self.send(
            reqwest::Method::POST,
            &format!("/repos/{repo}/pulls"),
            &[],
            Some(&payload),
        )
        .await
    }

    async fn get(&self, path: &str, params: &[(&str, String)]) -> Result<Value, ApiError> {
        self.send(reqwest::Method::GET, path, params, None).await
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        params: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let (status, headers, value) = self.request(method, path, params, body).await?;
        Self::checked(path, status, &headers, value)
    }

    /// One request and its answer, whatever the status.
    async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        params: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<(reqwest::StatusCode, reqwest::header::HeaderMap, Value), ApiError> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base_url))
            .query(params)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .timeout(Duration::from_secs(30));
        if let Some(body) = body {
            req = req.json(body);
        }
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        super::send_json(SERVICE, path, req).await
    }

    /// The answer, or the error its status and message say.
    fn checked(
        path: &str,
        status: reqwest::StatusCode,
        headers: &reqwest::header::HeaderMap,
        value: Value,
    ) -> Result<Value, ApiError> {
        if status.is_success() {
            return Ok(value);
        }
        let message = value["message"].as_str().map(str::to_string);
        // GitHub reports an exhausted rate limit as 403 with a message saying so.
        let limited = status.as_u16() == 429
            || (status.as_u16() == 403 && message.as_deref().is_some_and(|m| m.contains("rate limit")));
        Err(super::failure(
            SERVICE,
            path.to_string(),
            status,
            headers,
            limited,
            60,
            message,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pr_urls() {
        assert_eq!(
            PrRef::from_url("https://github.com/acme/steward/pull/42/files#diff"),
            Some(PrRef {
                owner: "acme".into(),
                repo: "steward".into(),
                number: 42
            })
        );
        assert_eq!(PrRef::from_url("https://github.com/acme/steward/issues/42"), None);
        assert_eq!(PrRef::from_url("not a url"), None);
    }
}
