//! One search per source, as [`Hit`]s: ids, titles, links and one-line snippets, never
//! whole documents. Each applies the run's [`SearchGrant`]: Slack runs as the person
//! who asked (their `action_token`) or a configured user token, never broader; Notion,
//! Jira and GitHub run with steward's access and drop what is outside the agent's
//! scope before the model sees it.

use serde::Serialize;
use serde_json::{Value, json};

use crate::integrations::github::GithubClient;
use crate::integrations::jira::JiraClient;
use crate::integrations::notion::NotionClient;
use crate::integrations::slack::SlackClient;
use crate::tools::ToolError;
use crate::tools::search_grant::SearchGrant;

/// Longest snippet, in characters.
pub const SNIPPET_CHARS: usize = 160;
/// How far up a Notion page's parents a scope check looks.
const NOTION_DEPTH: usize = 4;

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub source: &'static str,
    /// The item's id in its source (Slack `channel/ts`, a Notion page id, `OPS-12`,
    /// `owner/repo#42`): what a read tool takes.
    pub id: String,
    pub title: String,
    pub url: String,
    pub snippet: String,
    /// When it was written or last changed (ISO 8601).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// From a private Slack conversation, in a run that answers where others read:
    /// the snippet is withheld, the link stays.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub private: bool,
}

/// `text` on one line, cut to `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

fn model(message: impl Into<String>) -> ToolError {
    ToolError::Model(message.into())
}

/// What a Slack search asks for.
#[derive(Debug, Clone, Default)]
pub struct SlackQuery {
    pub query: String,
    pub channel_types: Option<Vec<String>>,
    /// UNIX seconds.
    pub after: Option<i64>,
    pub before: Option<i64>,
    pub limit: usize,
}

/// Slack's Real-time Search, as the person who asked: the bot token with the run's
/// `action_token`, or `user` (a user token) for runs no person started.
pub async fn slack(
    bot: Option<&SlackClient>,
    user: Option<&SlackClient>,
    grant: &SearchGrant,
    q: &SlackQuery,
) -> Result<Vec<Hit>, ToolError> {
    let scope = &grant.scope;
    if !scope.slack() {
        return Err(model("Slack search is off for this agent (search.slack)"));
    }
    let (client, token) = match (&grant.action_token, bot, user) {
        (Some(t), Some(bot), _) => (bot, Some(t)),
        (None, _, Some(user)) => (user, None),
        (_, None, _) => return Err(model("Slack is not configured (set SLACK_BOT_TOKEN)")),
        (None, _, None) => {
            return Err(model(format!(
                "Slack search runs as the person who asked, and this run was started by {}, not by a person's message: it cannot search Slack (an operator may set SLACK_SEARCH_USER_TOKEN for such runs)",
                grant.started_by
            )));
        }
    };
    if !client.search_enabled().await.map_err(|e| model(e.to_string()))? {
        return Err(model(
            "Slack's Real-time Search is not enabled for this workspace (assistant.search.info)",
        ));
    }
    // Only the channel types the agent allows, whatever the model asked for.
    let types: Vec<String> = match &q.channel_types {
        Some(asked) => asked
            .iter()
            .filter(|t| scope.slack_channel_types.contains(t))
            .cloned()
            .collect(),
        None => scope.slack_channel_types.clone(),
    };
    if types.is_empty() {
        return Err(model(format!(
            "none of those channel types may be searched; this agent searches {}",
            scope.slack_channel_types.join(", ")
        )));
    }
    let mut content = vec!["messages"];
    if scope.slack_files {
        content.push("files");
    }
    let mut hits = Vec::new();
    let mut cursor: Option<String> = None;
    while hits.len() < q.limit {
        let mut body = json!({
            "query": q.query,
            "channel_types": types.join(","),
            "content_types": content.join(","),
            "limit": (q.limit - hits.len()).min(20),
        });
        if let Some(t) = token {
            body["action_token"] = json!(t.expose());
        }
        if let Some(a) = q.after {
            body["after"] = json!(a);
        }
        if let Some(b) = q.before {
            body["before"] = json!(b);
        }
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let page = client
            .search_context(&body)
            .await
            .map_err(|e| model(e.to_string()))?;
        for m in page["results"]["messages"].as_array().into_iter().flatten() {
            // Slack filters by channel_types already; a hit of another type is dropped
            // here too rather than trusted.
            if let Some(hit) = slack_message(client, grant, m).await {
                hits.push(hit);
            }
        }
        // A file hit names no conversation: where the agent may search beyond public
        // channels and others read the answer, or the answer goes to a channel shared
        // with another organisation, it is linked, never quoted or named (a title can
        // be the secret).
        let unsure = grant.answers_in_public
            && (grant
                .scope
                .slack_channel_types
                .iter()
                .any(|t| t != "public_channel")
                || match &grant.conversation {
                    Some(here) => client.said_shared_outside(here).await,
                    None => false,
                });
        for f in page["results"]["files"].as_array().into_iter().flatten() {
            hits.push(Hit {
                source: "slack",
                id: f["file_id"].as_str().unwrap_or_default().to_string(),
                title: match unsure {
                    true => "a file not everyone here may be able to read".to_string(),
                    false => f["title"].as_str().unwrap_or("(file)").to_string(),
                },
                url: f["permalink"].as_str().unwrap_or_default().to_string(),
                snippet: match unsure {
                    true => "(a file that may be private: not quoted here; open the link)".to_string(),
                    false => one_line(f["content"].as_str().unwrap_or_default(), SNIPPET_CHARS),
                },
                when: None,
                private: unsure,
            });
        }
        cursor = page["response_metadata"]["next_cursor"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    hits.truncate(q.limit);
    Ok(hits)
}

/// Whether a conversation's type is among `allowed` (Slack's `channel_types` names):
/// D ids are `im`, G ids `mpim` or `private_channel`, C ids by `conversations.info`.
async fn type_allowed(client: &SlackClient, allowed: &[String], channel: &str) -> bool {
    let has = |t: &str| allowed.iter().any(|a| a == t);
    if channel.starts_with('D') {
        return has("im");
    }
    if channel.starts_with('G') {
        return has("mpim") || has("private_channel");
    }
    if client.is_private_channel(channel).await {
        has("private_channel") || has("mpim")
    } else {
        has("public_channel")
    }
}

/// A search hit as the model sees it; `None` when its conversation is of a type the
/// agent may not search.
async fn slack_message(client: &SlackClient, grant: &SearchGrant, m: &Value) -> Option<Hit> {
    let channel = m["channel_id"].as_str().unwrap_or_default();
    if !type_allowed(client, &grant.scope.slack_channel_types, channel).await {
        tracing::info!(%channel, "dropped a Slack search hit outside the agent's channel types");
        return None;
    }
    let ts = m["message_ts"].as_str().unwrap_or_default();
    let author = m["author_name"]
        .as_str()
        .or(m["author_user_id"].as_str())
        .unwrap_or("someone");
    let where_ = m["channel_name"]
        .as_str()
        .map_or_else(|| channel.to_string(), |n| format!("#{n}"));
    // A private conversation's words stay out of an answer others read: linked only,
    // and without its name, who wrote or when (a channel's name can be the secret).
    // On Enterprise Grid, a public channel of another workspace counts the same.
    let private = grant.answers_in_public
        && ((grant
            .scope
            .slack_channel_types
            .iter()
            .any(|t| t != "public_channel")
            && client.is_private_channel(channel).await)
            || match (&grant.team, client.channel_workspaces(channel).await) {
                (Some(team), Some(teams)) => !teams.iter().any(|t| t == team),
                _ => false,
            }
            || match &grant.conversation {
                Some(here) => here != channel && client.said_shared_outside(here).await,
                None => false,
            });
    if private {
        return Some(Hit {
            source: "slack",
            id: format!("{channel}/{ts}"),
            title: "a message in a conversation not everyone here can read".to_string(),
            url: m["permalink"].as_str().unwrap_or_default().to_string(),
            snippet: "(not quoted here; open the link)".to_string(),
            when: None,
            private,
        });
    }
    let snippet = one_line(
        &client.humanize(m["content"].as_str().unwrap_or_default()).await,
        SNIPPET_CHARS,
    );
    Some(Hit {
        source: "slack",
        id: format!("{channel}/{ts}"),
        title: format!("{author} in {where_}"),
        url: m["permalink"].as_str().unwrap_or_default().to_string(),
        snippet,
        when: ts_date(ts),
        private,
    })
}

/// A Slack `ts` (`1700000000.000100`) as an ISO 8601 date.
fn ts_date(ts: &str) -> Option<String> {
    let secs: i64 = ts.split('.').next()?.parse().ok()?;
    chrono::DateTime::from_timestamp(secs, 0).map(|d| d.format("%Y-%m-%d").to_string())
}

/// Notion pages (or data sources) shared with the integration, kept only when under
/// one of the agent's roots.
pub async fn notion(
    client: Option<&NotionClient>,
    grant: &SearchGrant,
    query: &str,
    object: Option<&str>,
    limit: usize,
) -> Result<Vec<Hit>, ToolError> {
    let scope = &grant.scope;
    if scope.notion_roots.is_empty() {
        return Err(model("Notion search is off for this agent (search.notion.roots)"));
    }
    let client = client.ok_or_else(|| model("Notion is not configured (set NOTION_TOKEN)"))?;
    let found = client
        .search(query, object, (limit * 2).min(100) as u32)
        .await
        .map_err(|e| model(e.to_string()))?;
    let mut hits = Vec::new();
    for page in found["results"].as_array().into_iter().flatten() {
        if hits.len() >= limit {
            break;
        }
        if !in_notion_scope(client, grant, page).await {
            continue;
        }
        let parent = &page["parent"];
        let parent_name = parent["type"].as_str().unwrap_or("workspace");
        hits.push(Hit {
            source: "notion",
            id: page["id"].as_str().unwrap_or_default().to_string(),
            title: notion_title(page),
            url: page["url"].as_str().unwrap_or_default().to_string(),
            snippet: format!(
                "{} in {}",
                page["object"].as_str().unwrap_or("page"),
                parent_name.replace('_', " ")
            ),
            when: page["last_edited_time"].as_str().map(str::to_string),
            private: false,
        });
    }
    Ok(hits)
}

/// A page's (or data source's) title: the property of type `title`.
pub fn notion_title(page: &Value) -> String {
    let parts = page["properties"]
        .as_object()
        .and_then(|p| p.values().find(|v| v["type"] == "title"))
        .map(|t| &t["title"])
        .unwrap_or(&page["title"]);
    let text: String = parts
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["plain_text"].as_str())
        .collect();
    if text.is_empty() {
        "(untitled)".into()
    } else {
        text
    }
}

/// Whether `page` is a root, sits in a root database, or has a root among its parent
/// pages (up to [`NOTION_DEPTH`] levels).
pub(crate) async fn in_notion_scope(client: &NotionClient, grant: &SearchGrant, page: &Value) -> bool {
    let scope = &grant.scope;
    let mut current = page.clone();
    for _ in 0..=NOTION_DEPTH {
        if current["id"].as_str().is_some_and(|id| scope.notion_root(id)) {
            return true;
        }
        let parent = &current["parent"];
        let next = match parent["type"].as_str() {
            Some("page_id") => parent["page_id"].as_str(),
            Some("database_id") | Some("data_source_id") => {
                let db = parent["database_id"].as_str();
                let ds = parent["data_source_id"].as_str();
                return db.is_some_and(|d| scope.notion_root(d)) || ds.is_some_and(|d| scope.notion_root(d));
            }
            _ => None,
        };
        let Some(next) = next else {
            return false;
        };
        if scope.notion_root(next) {
            return true;
        }
        current = match client.get_page(next).await {
            Ok(p) => p,
            Err(_) => return false,
        };
    }
    false
}

/// Jira issues in the agent's projects whose text matches `query`, newest first.
pub async fn jira(
    client: Option<&JiraClient>,
    grant: &SearchGrant,
    query: &str,
    limit: usize,
) -> Result<Vec<Hit>, ToolError> {
    let scope = &grant.scope;
    if scope.jira_projects.is_empty() {
        return Err(model("Jira search is off for this agent (search.jira.projects)"));
    }
    let client = client
        .ok_or_else(|| model("Jira is not configured (set JIRA_BASE_URL, JIRA_EMAIL, JIRA_API_TOKEN)"))?;
    let text = query.replace('\\', "\\\\").replace('"', "\\\"");
    let mut jql = format!("text ~ \"{text}\"");
    if !scope.jira_projects.iter().any(|p| p == "*") {
        jql.push_str(&format!(" AND project in ({})", scope.jira_projects.join(", ")));
    }
    jql.push_str(" ORDER BY updated DESC");
    let page = client
        .search_page(&jql, limit.min(100) as u32, None)
        .await
        .map_err(|e| model(e.to_string()))?;
    Ok(page["issues"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let key = i["key"].as_str()?;
            if !i["fields"]["security"].is_null() {
                // An issue with a security level is restricted text: linked, never quoted
                // (jira_get_issue reads it and holds the run to it).
                return scope.jira_issue(key).then(|| Hit {
                    source: "jira",
                    id: key.to_string(),
                    title: key.to_string(),
                    url: client.browse_url(key),
                    snippet: "(an issue with a security level: not quoted here; read it with jira_get_issue)"
                        .into(),
                    when: i["fields"]["updated"].as_str().map(str::to_string),
                    private: true,
                });
            }
            scope.jira_issue(key).then(|| Hit {
                source: "jira",
                id: key.to_string(),
                title: format!("{key} {}", i["fields"]["summary"].as_str().unwrap_or_default()),
                url: client.browse_url(key),
                snippet: format!(
                    "{}, assigned to {}",
                    i["fields"]["status"]["name"].as_str().unwrap_or("unknown status"),
                    i["fields"]["assignee"]["displayName"]
                        .as_str()
                        .unwrap_or("no one")
                ),
                when: i["fields"]["updated"].as_str().map(str::to_string),
                private: false,
            })
        })
        .take(limit)
        .collect())
}

/// `issue`, `pr` or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GithubKind {
    Issue,
    Pr,
    Both,
}

/// GitHub issues and pull requests in the agent's repositories.
pub async fn github(
    client: &GithubClient,
    grant: &SearchGrant,
    query: &str,
    kind: GithubKind,
    limit: usize,
) -> Result<Vec<Hit>, ToolError> {
    let scope = &grant.scope;
    if scope.github_repos.is_empty() {
        return Err(model("GitHub search is off for this agent (search.github.repos)"));
    }
    let repos: String = scope.github_repos.iter().map(|r| format!(" repo:{r}")).collect();
    // GitHub requires one of these qualifiers; both kinds are two searches.
    let kinds: &[&str] = match kind {
        GithubKind::Issue => &["is:issue"],
        GithubKind::Pr => &["is:pull-request"],
        GithubKind::Both => &["is:issue", "is:pull-request"],
    };
    let queries: Vec<String> = kinds.iter().map(|k| format!("{query} {k}{repos}")).collect();
    let asks = queries.iter().map(|q| client.search_issues(q, limit as u32));
    let mut hits = Vec::new();
    for found in futures_util::future::join_all(asks).await {
        let found = found.map_err(|e| model(e.to_string()))?;
        for item in found["items"].as_array().into_iter().flatten() {
            let repo = item["repository_url"]
                .as_str()
                .and_then(|u| u.split("/repos/").nth(1))
                .unwrap_or_default();
            if !scope.github_repo(repo) {
                continue;
            }
            let number = item["number"].as_u64().unwrap_or(0);
            let what = if item.get("pull_request").is_some() {
                "pull request"
            } else {
                "issue"
            };
            hits.push(Hit {
                source: "github",
                id: format!("{repo}#{number}"),
                title: format!("{repo}#{number} {}", item["title"].as_str().unwrap_or_default()),
                url: item["html_url"].as_str().unwrap_or_default().to_string(),
                snippet: format!(
                    "{what}, {} by {}: {}",
                    item["state"].as_str().unwrap_or("unknown"),
                    item["user"]["login"].as_str().unwrap_or("someone"),
                    one_line(item["body"].as_str().unwrap_or_default(), 100)
                ),
                when: item["updated_at"].as_str().map(str::to_string),
                private: false,
            });
        }
    }
    hits.truncate(limit);
    Ok(hits)
}
