//! Slack and GitHub tools used by workflows: read a channel, add a reaction, get a pull
//! request's state. Each has a real implementation and a mock with the same shape.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::tool_args::*;
use crate::integrations::ApiError;
use crate::integrations::github::{GithubClient, PrRef};
use crate::integrations::jira::{JiraClient, Restriction};
use crate::integrations::notion::NotionClient;
use crate::integrations::slack::SlackClient;
use crate::integrations::slack::entities::Entity;
use crate::tools::args::{parse, schema_of};
use crate::tools::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

fn api_err(e: ApiError) -> ToolError {
    ToolError::Model(e.to_string())
}

fn slack(client: &Option<SlackClient>) -> Result<&SlackClient, ToolError> {
    client
        .as_ref()
        .ok_or_else(|| ToolError::Model("Slack is not configured (set SLACK_BOT_TOKEN)".into()))
}

/// `slack_channel_history`: recent messages of a channel with their reactions.
pub struct SlackHistory {
    spec: ToolSpec,
    client: Option<SlackClient>,
}

/// `slack_add_reaction`: add an emoji reaction to a message (side effect).
pub struct SlackReaction {
    spec: ToolSpec,
    client: Option<SlackClient>,
}

/// `github_pr_state`: whether a pull request is open, closed or merged.
pub struct GithubPrState {
    spec: ToolSpec,
    client: GithubClient,
}

/// The integration tools, with clients from the environment (or given, for tests).
pub fn integration_tools(slack: Option<SlackClient>, github: GithubClient) -> Vec<Arc<dyn Tool>> {
    integration_tools_with(slack, github, None)
}

fn spec(name: &str, description: &str, parameters: Value, effect: Effect) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters,
        effect,
    }
}

/// Like [`integration_tools`], with a Jira client.
pub fn integration_tools_with(
    slack: Option<SlackClient>,
    github: GithubClient,
    jira: Option<JiraClient>,
) -> Vec<Arc<dyn Tool>> {
    let api = |spec: ToolSpec, kind: ApiKind| -> Arc<dyn Tool> { Arc::new(Api { spec, kind }) };
    let mut tools: Vec<Arc<dyn Tool>> = vec![
        api(
            spec(
                "slack_permalink",
                "Get the permanent link of a Slack message.",
                schema_of::<SlackMessage>(),
                Effect::ReadOnly,
            ),
            ApiKind::SlackPermalink(slack.clone()),
        ),
        api(
            spec(
                "slack_user_info",
                "Look up a Slack user by id: name, display name, title, time zone.",
                schema_of::<SlackUserArgs>(),
                Effect::ReadOnly,
            ),
            ApiKind::SlackUser(slack.clone()),
        ),
        api(
            spec(
                "slack_channel_info",
                "Look up a Slack channel by id: name, topic, purpose, whether it is private.",
                schema_of::<SlackChannelArgs>(),
                Effect::ReadOnly,
            ),
            ApiKind::SlackChannel(slack.clone()),
        ),
        Arc::new(Api {
            spec: spec(
                "slack_read_thread",
                "Read every message of a Slack thread (conversations.replies), oldest first.",
                schema_of::<SlackMessage>(),
                Effect::ReadOnly,
            ),
            kind: ApiKind::SlackThread(slack.clone()),
        }),
        Arc::new(Api {
            spec: spec(
                "slack_post_message",
                "Post a Slack message (mrkdwn) to a channel, or as a thread reply with thread_ts.",
                schema_of::<SlackPostArgs>(),
                Effect::Irreversible,
            ),
            kind: ApiKind::SlackPost(slack.clone()),
        }),
        api(
            spec(
                "jira_get_issue",
                "Get a Jira issue: summary, status, type, reporter, assignee, description (as text), comments and attachments (id, filename, size, mime).",
                schema_of::<JiraIssueArgs>(),
                Effect::ReadOnly,
            ),
            ApiKind::JiraGet(jira.clone()),
        ),
        api(
            spec(
                "jira_get_attachment",
                "Download a Jira attachment by id (with the key of the issue it is on) into a virtual file of this run; returns the file id (read it with the file tools).",
                schema_of::<JiraAttachmentArgs>(),
                Effect::ReadOnly,
            ),
            ApiKind::JiraAttachment(jira.clone()),
        ),
        Arc::new(Api {
            spec: spec(
                "jira_create_issue",
                "Create a Jira issue. The description is Markdown (converted to Atlassian Document Format). Returns its key and URL.",
                schema_of::<JiraCreateArgs>(),
                Effect::Irreversible,
            ),
            kind: ApiKind::JiraCreate(jira.clone()),
        }),
        Arc::new(Api {
            spec: spec(
                "jira_add_comment",
                "Add a comment (Markdown, converted to Atlassian Document Format) to a Jira issue.",
                schema_of::<JiraCommentArgs>(),
                Effect::Irreversible,
            ),
            kind: ApiKind::JiraComment(jira.clone()),
        }),
        Arc::new(Api {
            spec: spec(
                "jira_search",
                "Search Jira with JQL (pages through results with nextPageToken). Returns key, summary, status, assignee, updated.",
                schema_of::<JiraSearchArgs>(),
                Effect::ReadOnly,
            ),
            kind: ApiKind::JiraSearch(jira),
        }),
    ];
    tools.extend(base_integration_tools(slack, github));
    tools
}

fn base_integration_tools(slack: Option<SlackClient>, github: GithubClient) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(SlackHistory {
            spec: ToolSpec {
                name: "slack_channel_history".into(),
                description: "Read the most recent messages of a Slack channel (newest first), with each message's ts, user, text, thread_ts and reactions.".into(),
                parameters: schema_of::<SlackHistoryArgs>(),
                effect: Effect::ReadOnly,
            },
            client: slack.clone(),
        }),
        Arc::new(SlackReaction {
            spec: ToolSpec {
                name: "slack_add_reaction".into(),
                description: "Add an emoji reaction (name without colons) to a Slack message.".into(),
                parameters: schema_of::<SlackReactionArgs>(),
                effect: Effect::SideEffecting,
            },
            client: slack,
        }),
        Arc::new(GithubPrState {
            spec: ToolSpec {
                name: "github_pr_state".into(),
                description: "Get a GitHub pull request's state: open, closed (not merged) or merged. Pass its URL, or owner, repo and number.".into(),
                parameters: schema_of::<PullRequestArgs>(),
                effect: Effect::ReadOnly,
            },
            client: github,
        }),
    ]
}

fn messages_out(raw: &Value) -> Value {
    let messages: Vec<Value> = raw["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            json!({
                "ts": m["ts"], "user": m["user"], "text": m["text"].as_str().unwrap_or_default(),
                "thread_ts": m["thread_ts"],
                "reactions": m["reactions"].as_array().cloned().unwrap_or_default()
                    .iter().map(|r| json!({"name": r["name"], "count": r["count"], "users": r["users"]})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({"messages": messages, "has_more": raw["has_more"].as_bool().unwrap_or(false)})
}

#[async_trait]
impl Tool for SlackHistory {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let a: SlackHistoryArgs = parse(args)?;
        let (channel, limit) = (a.channel, a.limit.unwrap_or(50).to_string());
        let raw = slack(&self.client)?
            .get("conversations.history", &[("channel", channel), ("limit", limit)])
            .await
            .map_err(api_err)?;
        Ok(ToolOutput::json(messages_out(&raw)))
    }
    async fn mock(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        // The shape of Slack's documented conversations.history example.
        Ok(ToolOutput::json(messages_out(&json!({"ok": true, "messages": [
            {"type": "message", "user": "U123ABC456", "text": "Ready for review: https://github.com/acme/steward/pull/42", "ts": "1512085950.000216",
             "reactions": [{"name": "eyes", "count": 1, "users": ["U222222222"]}]},
            {"type": "message", "user": "U222222222", "text": "Thanks, will look after lunch", "ts": "1512104434.000490"}
        ], "has_more": false}))))
    }
}

#[async_trait]
impl Tool for SlackReaction {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let a: SlackReactionArgs = parse(args)?;
        let body = json!({"channel": a.channel, "timestamp": a.ts, "name": a.name});
        match slack(&self.client)?.call("reactions.add", &body).await {
            Ok(_) => Ok(ToolOutput::json(json!({"ok": true}))),
            // Idempotent: a reaction that is already there is success.
            Err(ApiError::Api { message, .. }) if message == "already_reacted" => {
                Ok(ToolOutput::json(json!({"ok": true, "already": true})))
            }
            Err(e) => Err(api_err(e)),
        }
    }
    async fn mock(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        Ok(ToolOutput::json(json!({"ok": true})))
    }
}

fn pr_ref(args: Value) -> Result<PrRef, ToolError> {
    let a: PullRequestArgs = parse(args)?;
    if let Some(url) = a.url {
        return PrRef::from_url(&url)
            .ok_or_else(|| ToolError::Model(format!("'{url}' is not a GitHub pull request URL")));
    }
    match (a.owner, a.repo, a.number) {
        (Some(owner), Some(repo), Some(number)) => Ok(PrRef { owner, repo, number }),
        _ => Err(ToolError::Model(
            "give a pull request url, or owner, repo and number".into(),
        )),
    }
}

fn pr_out(pr: &PrRef, raw: &Value) -> Value {
    let state = if raw["merged"].as_bool() == Some(true)
        || !raw["merged_at"].is_null() && raw["merged_at"].is_string()
    {
        "merged"
    } else {
        raw["state"].as_str().unwrap_or("unknown")
    };
    json!({"state": state, "title": raw["title"], "url": raw["html_url"], "merged_at": raw["merged_at"],
           "owner": pr.owner, "repo": pr.repo, "number": pr.number})
}

#[async_trait]
impl Tool for GithubPrState {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let pr = pr_ref(args)?;
        // An agent that lists its GitHub repositories (`search.github.repos`) reads
        // only those, as its searches do.
        let scope = &ctx.search.scope;
        let repo = format!("{}/{}", pr.owner, pr.repo);
        if !scope.github_repos.is_empty() && !scope.github_repo(&repo) {
            return Err(ToolError::Model(format!(
                "{repo} is not one of this agent's GitHub repositories ({}; search.github.repos)",
                scope.github_repos.join(", ")
            )));
        }
        let raw = self.client.pull_request(&pr).await.map_err(api_err)?;
        Ok(ToolOutput::json(pr_out(&pr, &raw)))
    }
    /// Deterministic: even numbers are merged, odd ones open.
    async fn mock(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let pr = pr_ref(args)?;
        let merged = pr.number % 2 == 0;
        let raw = json!({"state": if merged { "closed" } else { "open" }, "merged": merged, "title": "Mock pull request",
                         "html_url": format!("https://github.com/{}/{}/pull/{}", pr.owner, pr.repo, pr.number),
                         "merged_at": if merged { json!("2026-01-05T17:00:00Z") } else { Value::Null }});
        Ok(ToolOutput::json(pr_out(&pr, &raw)))
    }
}

fn notion(client: &Option<NotionClient>) -> Result<&NotionClient, ToolError> {
    client
        .as_ref()
        .ok_or_else(|| ToolError::Model("Notion is not configured (set NOTION_TOKEN)".into()))
}

/// The Notion tools.
pub fn notion_tools(client: Option<NotionClient>) -> Vec<Arc<dyn Tool>> {
    let api =
        |name: &str, description: &str, params: Value, effect: Effect, kind: ApiKind| -> Arc<dyn Tool> {
            Arc::new(Api {
                spec: spec(name, description, params, effect),
                kind,
            })
        };
    vec![
        api(
            "notion_get_page",
            "Get a Notion page's title, URL and properties (as text).",
            schema_of::<NotionPageArgs>(),
            Effect::ReadOnly,
            ApiKind::NotionPage(client.clone()),
        ),
        api(
            "notion_read_page",
            "Read a Notion page's content as Markdown (nested blocks included).",
            schema_of::<NotionPageArgs>(),
            Effect::ReadOnly,
            ApiKind::NotionContent(client.clone()),
        ),
        api(
            "notion_query_database",
            "Query a Notion database, optionally with a Notion filter object; returns pages with their properties as text.",
            schema_of::<NotionQueryArgs>(),
            Effect::ReadOnly,
            ApiKind::NotionQuery(client.clone()),
        ),
        api(
            "notion_add_comment",
            "Add a comment to a Notion page.",
            schema_of::<NotionCommentArgs>(),
            Effect::Irreversible,
            ApiKind::NotionComment(client.clone()),
        ),
        api(
            "notion_update_property",
            "Set properties of a Notion page; `properties` uses Notion's property value JSON, e.g. {\"Reviewers\": {\"people\": [{\"id\": \"...\"}]}}.",
            schema_of::<NotionUpdateArgs>(),
            Effect::SideEffecting,
            ApiKind::NotionUpdate(client),
        ),
    ]
}

/// A page with its properties flattened to text.
fn page_out(page: &Value) -> Value {
    let props: serde_json::Map<String, Value> = page["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| {
            (
                k.clone(),
                json!(crate::integrations::notion::property_text(page, k)),
            )
        })
        .collect();
    json!({"id": page["id"], "url": page["url"], "properties": props})
}

fn jira(client: &Option<JiraClient>) -> Result<&JiraClient, ToolError> {
    client.as_ref().ok_or_else(|| {
        ToolError::Model("Jira is not configured (set JIRA_BASE_URL, JIRA_EMAIL, JIRA_API_TOKEN)".into())
    })
}

enum ApiKind {
    JiraGet(Option<JiraClient>),
    JiraAttachment(Option<JiraClient>),
    NotionPage(Option<NotionClient>),
    NotionContent(Option<NotionClient>),
    NotionQuery(Option<NotionClient>),
    NotionComment(Option<NotionClient>),
    NotionUpdate(Option<NotionClient>),
    SlackPermalink(Option<SlackClient>),
    SlackUser(Option<SlackClient>),
    SlackChannel(Option<SlackClient>),
    SlackThread(Option<SlackClient>),
    SlackPost(Option<SlackClient>),
    JiraCreate(Option<JiraClient>),
    JiraComment(Option<JiraClient>),
    JiraSearch(Option<JiraClient>),
}

/// The remaining Slack and Jira tools.
struct Api {
    spec: ToolSpec,
    kind: ApiKind,
}

/// Every message's text as people read it, with its author's name.
async fn resolve_messages(client: &SlackClient, mut out: Value) -> Value {
    if let Some(msgs) = out["messages"].as_array_mut() {
        for m in msgs {
            if let Some(t) = m["text"].as_str().map(str::to_string) {
                m["text"] = json!(client.humanize(&t).await);
            }
            if let Some(u) = m["user"].as_str().map(str::to_string)
                && let Some(name) = client.name_of(&Entity::User(u)).await
            {
                m["user_name"] = json!(name);
            }
        }
    }
    out
}

/// Most pages of 100 one `jira_search` call reads.
const MAX_SEARCH_PAGES: usize = 10;

/// An agent that lists its Jira projects (`search.jira.projects`) reads only their
/// issues, as its searches do; the check comes before any request.
fn jira_in_scope(ctx: &ToolCtx, key: &str) -> Result<(), ToolError> {
    let scope = &ctx.search.scope;
    if scope.reads_jira_issue(key) {
        return Ok(());
    }
    Err(ToolError::Model(format!(
        "issue {key} is outside this agent's Jira projects ({}; search.jira.projects)",
        scope.jira_projects.join(", ")
    )))
}

/// An attachment id names no project, so the tool names the issue too, and the
/// attachment must be on it (a model that mixed up its ids learns so before a
/// download); the issue Jira answers for that key (a moved issue's new key) must be in
/// the agent's projects. Whether the issue has a security level.
async fn attachment_in_scope(
    client: &JiraClient,
    ctx: &ToolCtx,
    a: &JiraAttachmentArgs,
) -> Result<crate::integrations::jira::IssueAttachments, ToolError> {
    let issue = a.issue.as_str();
    jira_in_scope(ctx, issue)?;
    let found = client.attachment_ids(issue).await.map_err(api_err)?;
    jira_in_scope(ctx, &found.key)?;
    if found.ids.contains(&a.id) {
        return Ok(found);
    }
    Err(ToolError::Model(format!(
        "attachment {} is not on {issue} (its attachments: {})",
        a.id,
        if found.ids.is_empty() {
            "none".to_string()
        } else {
            found.ids.join(", ")
        }
    )))
}

/// [`notion_in_scope`] for a page named by id, read first only when the agent's Notion
/// roots are limited: a write tool reaches only pages its agent may read.
async fn notion_page_in_scope(client: &NotionClient, ctx: &ToolCtx, page_id: &str) -> Result<(), ToolError> {
    if ctx.search.scope.notion_roots.is_empty() {
        return Ok(());
    }
    let page = client.get_page(page_id).await.map_err(api_err)?;
    notion_in_scope(client, ctx, &page).await
}

/// An agent that lists its Notion roots (`search.notion.roots`) reads only pages and
/// databases under them (a root, in a root database, or below a root page up to four
/// levels), as its searches do; nothing of one outside reaches the model.
async fn notion_in_scope(client: &NotionClient, ctx: &ToolCtx, object: &Value) -> Result<(), ToolError> {
    if ctx.search.scope.notion_roots.is_empty()
        || super::search::sources::in_notion_scope(client, &ctx.search, object).await
    {
        return Ok(());
    }
    Err(ToolError::Model(
        "that Notion page or database is outside this agent's Notion roots (search.notion.roots)".into(),
    ))
}

fn issue_out(client_url: String, raw: &Value) -> Value {
    json!({"key": raw["key"], "id": raw["id"], "url": client_url})
}

#[async_trait]
impl Tool for Api {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        match &self.kind {
            ApiKind::JiraGet(c) => {
                let a: JiraIssueArgs = parse(args)?;
                jira_in_scope(ctx, &a.key)?;
                let raw = jira(c)?.get_issue(&a.key).await.map_err(api_err)?;
                // Jira answers a moved issue's old key with the issue where it is now.
                let key = raw["key"].as_str().unwrap_or(&a.key).to_string();
                jira_in_scope(ctx, &key)?;
                let f = &raw["fields"];
                let text = super::adf_text::field_text;
                // On the issue the run answers on, a comment its answer's readers may not
                // read (another role's, an internal note under a public answer) is left
                // out: the answer goes back there under its trigger's restriction.
                let answer = ctx.search.restriction_on(&key);
                let (mut shown, mut omitted, mut restricted_comment) = (Vec::new(), 0, false);
                for c in f["comment"]["comments"].as_array().into_iter().flatten() {
                    let restriction = Restriction::of_comment(c);
                    if answer.is_some_and(|a| !a.covers(&restriction)) {
                        omitted += 1;
                        continue;
                    }
                    restricted_comment |= !restriction.is_public();
                    shown.push(c);
                }
                let comments: Vec<Value> = shown.iter()
                    .map(|c| json!({"author": c["author"]["displayName"], "created": c["created"], "body": text(&c["body"])})).collect();
                // An issue with a security level, or a comment shown to a role or group
                // or kept internal: the run holds restricted text (run::custody).
                let restricted = !f["security"].is_null() || restricted_comment;
                let attachments: Vec<Value> = f["attachment"].as_array().into_iter().flatten()
                    .map(|a| json!({"id": a["id"], "filename": a["filename"], "size": a["size"], "mime": a["mimeType"]})).collect();
                let mut out = json!({"key": key, "summary": f["summary"], "status": f["status"]["name"],
                    "type": f["issuetype"]["name"], "reporter": f["reporter"]["displayName"], "assignee": f["assignee"]["displayName"],
                    "description": text(&f["description"]), "comments": comments, "attachments": attachments,
                    "restricted": restricted});
                if omitted > 0 {
                    // Said, so the model does not take the thread for the whole of it.
                    out["comments_left_out"] = json!(omitted);
                }
                Ok(ToolOutput::json(out))
            }
            ApiKind::JiraAttachment(c) => {
                let a: JiraAttachmentArgs = parse(args)?;
                let issue = attachment_in_scope(jira(c)?, ctx, &a).await?;
                let content = jira(c)?
                    .attachment(&a.id, jira(c)?.attachment_cap())
                    .await
                    .map_err(api_err)?;
                let name = a.filename.unwrap_or_else(|| format!("jira-attachment-{}", a.id));
                if issue.restricted {
                    // Before the file is added: the gateway holds the run as private
                    // only once this call returns, and a stored file would stay in
                    // `run_files` in plaintext.
                    ctx.files.keep_in_memory();
                }
                let file = crate::files::NewFile {
                    mime: crate::files::mime::from_name(&name).to_string(),
                    name,
                    content,
                };
                let meta = ctx
                    .files
                    .add(file, crate::files::FileSource::Attachment, None)
                    .await
                    .map_err(|e| ToolError::Fatal(e.to_string()))?;
                let downloaded = format!("Downloaded into {}", meta.describe());
                if issue.restricted {
                    // Held as the issue's restricted text is (run::custody).
                    return Ok(ToolOutput::json(json!({
                        "downloaded": downloaded, "key": issue.key, "restricted": true})));
                }
                Ok(ToolOutput::text(downloaded))
            }
            ApiKind::NotionPage(c) => {
                let a: NotionPageArgs = parse(args)?;
                let page = notion(c)?.get_page(&a.page_id).await.map_err(api_err)?;
                notion_in_scope(notion(c)?, ctx, &page).await?;
                Ok(ToolOutput::json(page_out(&page)))
            }
            ApiKind::NotionContent(c) => {
                let a: NotionPageArgs = parse(args)?;
                if !ctx.search.scope.notion_roots.is_empty() {
                    let page = notion(c)?.get_page(&a.page_id).await.map_err(api_err)?;
                    notion_in_scope(notion(c)?, ctx, &page).await?;
                }
                let text = notion(c)?
                    .page_markdown(&a.page_id, 2_000)
                    .await
                    .map_err(api_err)?;
                Ok(ToolOutput::text(text))
            }
            ApiKind::NotionQuery(c) => {
                let client = notion(c)?;
                let a: NotionQueryArgs = parse(args)?;
                if !ctx.search.scope.notion_roots.is_empty() && !ctx.search.scope.notion_root(&a.database_id)
                {
                    let database = client.get_database(&a.database_id).await.map_err(api_err)?;
                    notion_in_scope(client, ctx, &database).await?;
                }
                let want = a.max_results.unwrap_or(100) as usize;
                let filter = a.filter.map(Value::Object);
                let mut pages = Vec::new();
                let mut cursor: Option<String> = None;
                loop {
                    let page = client
                        .query_database(&a.database_id, filter.as_ref(), cursor.as_deref())
                        .await
                        .map_err(api_err)?;
                    pages.extend(page["results"].as_array().into_iter().flatten().map(page_out));
                    cursor = page["next_cursor"].as_str().map(str::to_string);
                    if page["has_more"].as_bool() != Some(true) || cursor.is_none() || pages.len() >= want {
                        break;
                    }
                }
                pages.truncate(want);
                Ok(ToolOutput::json(json!({"pages": pages, "count": pages.len()})))
            }
            ApiKind::NotionComment(c) => {
                let a: NotionCommentArgs = parse(args)?;
                notion_page_in_scope(notion(c)?, ctx, &a.page_id).await?;
                let raw = notion(c)?
                    .add_comment(&a.page_id, &a.text)
                    .await
                    .map_err(api_err)?;
                Ok(ToolOutput::json(json!({"ok": true, "id": raw["id"]})))
            }
            ApiKind::NotionUpdate(c) => {
                let a: NotionUpdateArgs = parse(args)?;
                notion_page_in_scope(notion(c)?, ctx, &a.page_id).await?;
                let raw = notion(c)?
                    .update_properties(&a.page_id, &Value::Object(a.properties))
                    .await
                    .map_err(api_err)?;
                Ok(ToolOutput::json(page_out(&raw)))
            }
            ApiKind::SlackPermalink(c) => {
                let SlackMessage { channel, ts } = parse(args)?;
                let raw = slack(c)?
                    .get("chat.getPermalink", &[("channel", channel), ("message_ts", ts)])
                    .await
                    .map_err(api_err)?;
                Ok(ToolOutput::json(json!({"permalink": raw["permalink"]})))
            }
            ApiKind::SlackUser(c) => {
                let SlackUserArgs { user } = parse(args)?;
                let raw = slack(c)?
                    .get("users.info", &[("user", user)])
                    .await
                    .map_err(api_err)?;
                let u = &raw["user"];
                Ok(ToolOutput::json(
                    json!({"id": u["id"], "name": u["name"], "real_name": u["profile"]["real_name"],
                    "display_name": u["profile"]["display_name"], "title": u["profile"]["title"], "tz": u["tz"], "is_bot": u["is_bot"]}),
                ))
            }
            ApiKind::SlackChannel(c) => {
                let SlackChannelArgs { channel } = parse(args)?;
                let raw = slack(c)?
                    .get("conversations.info", &[("channel", channel)])
                    .await
                    .map_err(api_err)?;
                let ch = &raw["channel"];
                Ok(ToolOutput::json(
                    json!({"id": ch["id"], "name": ch["name"], "is_private": ch["is_private"],
                    "topic": ch["topic"]["value"], "purpose": ch["purpose"]["value"]}),
                ))
            }
            ApiKind::SlackThread(c) => {
                let SlackMessage { channel, ts } = parse(args)?;
                let client = slack(c)?;
                let raw = client
                    .get(
                        "conversations.replies",
                        &[("channel", channel), ("ts", ts), ("limit", "200".into())],
                    )
                    .await
                    .map_err(api_err)?;
                Ok(ToolOutput::json(
                    resolve_messages(client, messages_out(&raw)).await,
                ))
            }
            ApiKind::SlackPost(c) => {
                let a: SlackPostArgs = parse(args)?;
                let text = crate::integrations::slack::mrkdwn::defuse_broadcasts(&a.text);
                let mut body = json!({"channel": a.channel, "text": slack(c)?.mentionize(&text), "unfurl_links": false, "unfurl_media": false,
                    // Lets anyone trace a message back to the run and call that posted it.
                    "metadata": {"event_type": "steward_post", "event_payload": {"idempotency_key": ctx.idempotency_key()}}});
                if let Some(t) = a.thread_ts {
                    body["thread_ts"] = json!(t);
                }
                let raw = slack(c)?.call("chat.postMessage", &body).await.map_err(api_err)?;
                Ok(ToolOutput::json(
                    json!({"ok": true, "channel": raw["channel"], "ts": raw["ts"]}),
                ))
            }
            ApiKind::JiraCreate(c) => {
                let client = jira(c)?;
                let a: JiraCreateArgs = parse(args)?;
                // A project key names its own project in the scope's terms.
                if !ctx.search.scope.reads_jira_issue(&a.project) {
                    return Err(ToolError::Model(format!(
                        "project {} is outside this agent's Jira projects ({}; search.jira.projects)",
                        a.project,
                        ctx.search.scope.jira_projects.join(", ")
                    )));
                }
                let issue_type = a.issue_type.as_deref().unwrap_or("Task");
                let description = a.description.unwrap_or_default();
                let raw = client
                    .create_issue(&a.project, issue_type, &a.summary, &description)
                    .await
                    .map_err(api_err)?;
                let key = raw["key"].as_str().unwrap_or_default().to_string();
                Ok(ToolOutput::json(issue_out(client.browse_url(&key), &raw)))
            }
            ApiKind::JiraComment(c) => {
                let a: JiraCommentArgs = parse(args)?;
                jira_in_scope(ctx, &a.key)?;
                // Jira posts to a moved issue by its old key: where it is now must be in
                // scope too (asked only when the agent's projects are limited).
                if !ctx.search.scope.jira_projects.is_empty() {
                    let now = jira(c)?.current_key(&a.key).await.map_err(api_err)?;
                    jira_in_scope(ctx, &now)?;
                }
                // On the issue the run answers on, a comment is restricted as the answer
                // is (run::custody lets it through there without approval for that).
                let restriction = ctx.search.restriction_on(&a.key).cloned().unwrap_or_default();
                let raw = jira(c)?
                    .add_comment_restricted(&a.key, &a.body, &restriction)
                    .await
                    .map_err(api_err)?;
                Ok(ToolOutput::json(json!({"ok": true, "id": raw["id"]})))
            }
            ApiKind::JiraSearch(c) => {
                let client = jira(c)?;
                let a: JiraSearchArgs = parse(args)?;
                let want = a.max_results.unwrap_or(50) as usize;
                let mut issues = Vec::new();
                let mut token: Option<String> = None;
                // Hits out of the agent's projects are dropped here, not by Jira: a query
                // whose hits are all elsewhere would otherwise page through everything.
                for _ in 0..MAX_SEARCH_PAGES {
                    let page = client
                        .search_page(&a.jql, 100.min(want as u32), token.as_deref())
                        .await
                        .map_err(api_err)?;
                    for i in page["issues"].as_array().into_iter().flatten() {
                        let key = i["key"].as_str().unwrap_or_default();
                        // An agent that lists its Jira projects sees only those.
                        if !ctx.search.scope.reads_jira_issue(key) {
                            continue;
                        }
                        if !i["fields"]["security"].is_null() {
                            // Restricted text: named, not quoted (jira_get_issue reads it
                            // and holds the run to it).
                            issues
                                .push(json!({"key": key, "restricted": true, "url": client.browse_url(key)}));
                            continue;
                        }
                        issues.push(json!({"key": key, "summary": i["fields"]["summary"], "status": i["fields"]["status"]["name"],
                                           "assignee": i["fields"]["assignee"]["displayName"], "updated": i["fields"]["updated"],
                                           "url": client.browse_url(key)}));
                    }
                    token = page["nextPageToken"].as_str().map(str::to_string);
                    if token.is_none() || issues.len() >= want || page["isLast"].as_bool() == Some(true) {
                        break;
                    }
                }
                issues.truncate(want);
                Ok(ToolOutput::json(json!({"issues": issues, "count": issues.len()})))
            }
        }
    }

    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        if let ApiKind::JiraAttachment(_) = &self.kind {
            // A realistic attachment: a small log, stored as a real virtual file.
            let log: String = (0..40)
                .map(|i| {
                    format!(
                        "2026-01-05T09:{i:02}:00Z gateway ERROR certificate expired for gateway.internal\n"
                    )
                })
                .collect();
            let name = args["filename"].as_str().unwrap_or("gateway.log").to_string();
            let file = crate::files::NewFile {
                mime: crate::files::mime::from_name(&name).to_string(),
                name,
                content: log.into_bytes(),
            };
            let meta = ctx
                .files
                .add(file, crate::files::FileSource::Attachment, None)
                .await
                .map_err(|e| ToolError::Fatal(e.to_string()))?;
            return Ok(ToolOutput::text(format!("Downloaded into {}", meta.describe())));
        }
        Ok(ToolOutput::json(match &self.kind {
            ApiKind::JiraGet(_) => {
                json!({"key": args["key"], "summary": "Gateway certificate expired", "status": "In Progress", "type": "Incident",
                "reporter": "Ana Lee", "assignee": "Bo Chen", "description": "All logins fail since 09:00.", "comments": [],
                "attachments": [{"id": "10001", "filename": "gateway.log", "size": 2048, "mime": "text/plain"}]})
            }
            ApiKind::JiraAttachment(_) => Value::Null,
            ApiKind::NotionPage(_) | ApiKind::NotionUpdate(_) => {
                json!({"id": args["page_id"], "url": "https://www.notion.so/Design-doc-153104cd477e809d8dc4ff2d96ae3090",
                "properties": {"Name": "Design doc", "Status": "Ready for review", "Reviewers": ""}})
            }
            ApiKind::NotionContent(_) => json!(
                "# Design doc\n## Problem\nLogins fail after certificate rotation.\n- rotate monthly\n- alert 14 days before expiry"
            ),
            ApiKind::NotionQuery(_) => {
                json!({"pages": [{"id": "153104cd-477e-809d-8dc4-ff2d96ae3090", "url": "https://www.notion.so/Design-doc-153104cd",
                "properties": {"Name": "Design doc", "Status": "Ready for review"}}], "count": 1})
            }
            ApiKind::NotionComment(_) => json!({"ok": true, "id": "249911a1-0f1e-4b2d-8e1f-6c6b5b5a0c01"}),
            ApiKind::SlackPermalink(_) => {
                json!({"permalink": format!("https://example.slack.com/archives/{}/p{}", args["channel"].as_str().unwrap_or("C0"), args["ts"].as_str().unwrap_or("0").replace('.', ""))})
            }
            ApiKind::SlackUser(_) => {
                json!({"id": args["user"], "name": "ana", "real_name": "Ana Lee", "display_name": "Ana", "title": "SRE", "tz": "Europe/Berlin", "is_bot": false})
            }
            ApiKind::SlackChannel(_) => {
                json!({"id": args["channel"], "name": "help-platform", "is_private": false, "topic": "Ask the platform team", "purpose": ""})
            }
            ApiKind::SlackThread(_) => messages_out(&json!({"messages": [
                {"user": "U061F7AUR", "text": "The login page returns 500 for SSO users since 9:00", "ts": args["ts"]},
                {"user": "U2147483697", "text": "Same here, started after the cert rotation", "ts": "1700000001.000100"}]})),
            ApiKind::SlackPost(_) => {
                json!({"ok": true, "channel": args["channel"], "ts": "1700000099.000100"})
            }
            ApiKind::JiraCreate(_) => {
                json!({"key": format!("{}-101", args["project"].as_str().unwrap_or("OPS")), "id": "10101",
                                             "url": format!("https://example.atlassian.net/browse/{}-101", args["project"].as_str().unwrap_or("OPS"))})
            }
            ApiKind::JiraComment(_) => json!({"ok": true, "id": "10000"}),
            ApiKind::JiraSearch(_) => {
                json!({"issues": [{"key": "OPS-7", "summary": "Gateway certificate expired", "status": "In Progress",
                                                          "assignee": "Ana", "updated": "2026-01-05T17:00:00.000+0000"}], "count": 1})
            }
        }))
    }
}
