//! Jira Cloud REST v3 client (`JIRA_BASE_URL`, `JIRA_EMAIL` + `JIRA_API_TOKEN`).

use std::time::Duration;

use serde_json::{Value, json};

use super::ApiError;
use crate::config::Settings;

const SERVICE: &str = "jira";

/// An issue key (`OPS-7`) or numeric id, checked before it goes into a path.
fn issue_key(key: &str) -> Result<&str, ApiError> {
    super::path_id(SERVICE, "an issue key (such as OPS-7) or id", key)
}

#[derive(Clone)]
pub struct JiraClient {
    http: reqwest::Client,
    base_url: String,
    email: String,
    token: String,
    /// Largest attachment `jira_get_attachment` downloads.
    attachment_cap: u64,
    /// The account these credentials belong to (the bot's), looked up once.
    account: super::own_id::OwnId,
}

/// Who may read a comment steward writes: the restriction of the one it answers.
pub use crate::types::jira_restriction::Restriction;

/// An issue's attachments, as [`JiraClient::attachment_ids`] reads them.
#[derive(Debug, Clone, PartialEq)]
pub struct IssueAttachments {
    /// The issue's key as Jira answers it (a moved issue's new key).
    pub key: String,
    pub ids: Vec<String>,
    /// The issue has a security level: what is attached is restricted text.
    pub restricted: bool,
}

impl JiraClient {
    pub fn new(http: reqwest::Client, base_url: &str, email: &str, token: &str) -> Self {
        JiraClient {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            email: email.into(),
            token: token.into(),
            attachment_cap: crate::config::settings::DEFAULT_ATTACHMENT_CAP,
            account: Default::default(),
        }
    }

    /// Limits attachment downloads to `cap` bytes.
    pub fn with_attachment_cap(mut self, cap: u64) -> Self {
        self.attachment_cap = cap;
        self
    }

    /// The largest attachment this client downloads.
    pub fn attachment_cap(&self) -> u64 {
        self.attachment_cap
    }

    /// From `JIRA_BASE_URL`, `JIRA_EMAIL` and `JIRA_API_TOKEN`; `None` unless all three are set.
    pub fn from_settings(http: reqwest::Client, s: &Settings) -> Option<Self> {
        let client = JiraClient::new(
            http,
            s.jira_base_url.as_deref()?,
            s.jira_email.as_deref()?,
            s.jira_api_token.as_deref()?,
        );
        Some(client.with_attachment_cap(s.max_attachment_bytes))
    }

    /// The browse URL of an issue key.
    pub fn browse_url(&self, key: &str) -> String {
        format!("{}/browse/{key}", self.base_url)
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
            .basic_auth(&self.email, Some(&self.token))
            .header("Accept", "application/json")
            .timeout(Duration::from_secs(30));
        if let Some(b) = body {
            req = req.json(b);
        }
        let (status, headers, value) = super::send_json(SERVICE, &what, req).await?;
        if status.is_success() {
            return Ok(value);
        }
        let mut parts: Vec<String> = value["errorMessages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str().map(str::to_string))
            .collect();
        if let Some(errors) = value["errors"].as_object() {
            parts.extend(
                errors
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or_default())),
            );
        }
        let message = (!parts.is_empty()).then(|| parts.join("; "));
        Err(super::failure(
            SERVICE,
            what,
            status,
            &headers,
            status.as_u16() == 429,
            5,
            message,
        ))
    }

    /// The `accountId` steward comments as (`GET /rest/api/3/myself`), looked up once.
    pub async fn account_id(&self) -> Result<String, ApiError> {
        self.account
            .get(|| async {
                let me = self
                    .send(reqwest::Method::GET, "/rest/api/3/myself", None)
                    .await?;
                me["accountId"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| ApiError::Api {
                        service: SERVICE,
                        method: "GET /rest/api/3/myself".into(),
                        message: "no accountId in the answer".into(),
                    })
            })
            .await
    }

    /// The newest `max` comments of an issue, oldest first, and how many older ones
    /// there are (`GET /rest/api/3/issue/{key}/comment`).
    pub async fn comments(&self, key: &str, max: usize) -> Result<(Vec<Value>, usize), ApiError> {
        let key = issue_key(key)?;
        let page = self
            .send(
                reqwest::Method::GET,
                &format!("/rest/api/3/issue/{key}/comment?orderBy=-created&maxResults={max}"),
                None,
            )
            .await?;
        let mut comments = page["comments"].as_array().cloned().unwrap_or_default();
        comments.reverse();
        let total = page["total"].as_u64().unwrap_or(0) as usize;
        Ok((comments.clone(), total.saturating_sub(comments.len())))
    }

    pub async fn get_issue(&self, key: &str) -> Result<Value, ApiError> {
        let key = issue_key(key)?;
        self.send(reqwest::Method::GET, &format!("/rest/api/3/issue/{key}"), None)
            .await
    }

    /// Issue `key` with only `fields` (`GET /rest/api/3/issue/{key}?fields=…`), and the
    /// key Jira answers for it now (a moved issue's new key).
    async fn issue_with(&self, key: &str, fields: &str) -> Result<(String, Value), ApiError> {
        let key = issue_key(key)?;
        let raw = self
            .send(
                reqwest::Method::GET,
                &format!("/rest/api/3/issue/{key}?fields={fields}"),
                None,
            )
            .await?;
        Ok((raw["key"].as_str().unwrap_or(key).to_string(), raw))
    }

    /// The key Jira answers for issue `key` now (a moved issue's new key).
    pub async fn current_key(&self, key: &str) -> Result<String, ApiError> {
        Ok(self.issue_with(key, "none").await?.0)
    }

    /// The attachments on issue `key` (`fields=attachment,security`): the issue's own
    /// key (Jira answers a moved issue's old key too), the attachments' ids, and whether
    /// the issue has a security level.
    pub async fn attachment_ids(&self, key: &str) -> Result<IssueAttachments, ApiError> {
        let (key, raw) = self.issue_with(key, "attachment,security").await?;
        Ok(IssueAttachments {
            key,
            ids: raw["fields"]["attachment"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a["id"].as_str().map(str::to_string))
                .collect(),
            restricted: !raw["fields"]["security"].is_null(),
        })
    }

    /// Downloads an attachment's content (`GET /rest/api/3/attachment/content/{id}`),
    /// refusing more than `cap` bytes.
    pub async fn attachment(&self, id: &str, cap: u64) -> Result<Vec<u8>, ApiError> {
        let id = super::path_id(SERVICE, "an attachment id", id)?;
        let request = self
            .http
            .get(format!("{}/rest/api/3/attachment/content/{id}", self.base_url))
            .basic_auth(&self.email, Some(&self.token))
            .timeout(Duration::from_secs(120));
        let request = crate::telemetry::propagation::outgoing(request);
        super::download_capped(
            SERVICE,
            &format!("GET /rest/api/3/attachment/content/{id}"),
            request,
            cap,
        )
        .await
    }

    /// Creates an issue; `description` is Markdown, converted to ADF.
    pub async fn create_issue(
        &self,
        project: &str,
        issue_type: &str,
        summary: &str,
        description: &str,
    ) -> Result<Value, ApiError> {
        let body = json!({"fields": {
            "project": {"key": project}, "issuetype": {"name": issue_type}, "summary": summary,
            "description": super::adf::markdown_to_adf(description)}});
        self.send(reqwest::Method::POST, "/rest/api/3/issue", Some(&body))
            .await
    }

    /// Adds a comment; `body` is Markdown, converted to ADF.
    pub async fn add_comment(&self, key: &str, body: &str) -> Result<Value, ApiError> {
        self.add_comment_restricted(key, body, &Restriction::default())
            .await
    }

    /// [`Self::add_comment`] restricted as `restriction` says: to a role or group
    /// (`visibility`), or as a service desk's internal note (the `sd.public.comment`
    /// property), so an answer to restricted text is restricted the same way.
    pub async fn add_comment_restricted(
        &self,
        key: &str,
        body: &str,
        restriction: &Restriction,
    ) -> Result<Value, ApiError> {
        let key = issue_key(key)?;
        let mut body = json!({"body": super::adf::markdown_to_adf(body)});
        if let Some(visibility) = restriction.visibility_body() {
            body["visibility"] = visibility;
        }
        if restriction.internal {
            body["properties"] = json!([{"key": "sd.public.comment", "value": {"internal": true}}]);
        }
        self.send(
            reqwest::Method::POST,
            &format!("/rest/api/3/issue/{key}/comment"),
            Some(&body),
        )
        .await
    }

    /// One page of `/rest/api/3/search/jql`.
    pub async fn search_page(
        &self,
        jql: &str,
        max_results: u32,
        next_page_token: Option<&str>,
    ) -> Result<Value, ApiError> {
        let mut body = json!({"jql": jql, "maxResults": max_results, "fields": ["summary", "status", "assignee", "updated", "security"]});
        if let Some(t) = next_page_token {
            body["nextPageToken"] = json!(t);
        }
        self.send(reqwest::Method::POST, "/rest/api/3/search/jql", Some(&body))
            .await
    }
}
