//! Knowledge search without a copy: `slack_search`, `notion_search`, `github_search`
//! and `search`, which asks every source the agent allows at once. Sources are asked
//! live at question time, as [`sources`] describes; nothing is indexed or kept beyond
//! the run's files. Results are two-phase: ids, links and snippets here, whole items
//! through the read tools (`notion_read_page`, `jira_get_issue`, `slack_read_thread`).

pub mod sources;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use self::sources::{GithubKind, Hit, SlackQuery};
use super::Clients;
use crate::files::{FileSource, NewFile};
use crate::tools::args::{parse, schema_of};
use crate::tools::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// How long `search` waits for one source before naming it as timed out.
pub const SOURCE_TIMEOUT: Duration = Duration::from_secs(10);
/// Hits per source shown inline by `search`; the rest are in its file.
pub const INLINE_PER_SOURCE: usize = 10;
/// Hits asked of each source by `search`.
const PER_SOURCE: usize = 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SlackSearchArgs {
    /// What to look for, in the asker's words
    #[schemars(length(min = 1, max = 500))]
    query: String,
    /// Some of public_channel, private_channel, im, mpim (default: all the agent may search)
    channel_types: Option<Vec<String>>,
    /// Only messages after this date (YYYY-MM-DD)
    after: Option<String>,
    /// Only messages before this date (YYYY-MM-DD)
    before: Option<String>,
    /// At most this many results (default 20)
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NotionSearchArgs {
    /// Words in the page title
    #[schemars(length(min = 1, max = 500))]
    query: String,
    /// page or data_source (default: both)
    filter: Option<String>,
    /// At most this many results (default 20)
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GithubSearchArgs {
    /// GitHub search words (qualifiers such as label:bug work too)
    #[schemars(length(min = 1, max = 256))]
    query: String,
    /// issue, pr or both (default both)
    kind: Option<String>,
    /// At most this many results (default 20)
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// What to look for, in the asker's words
    #[schemars(length(min = 1, max = 500))]
    query: String,
    /// Some of slack, notion, jira, github (default: every source this agent may search)
    sources: Option<Vec<String>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Slack,
    Notion,
    Github,
    All,
}

/// One search tool over the process's clients.
struct SearchTool {
    spec: ToolSpec,
    kind: Kind,
    clients: Clients,
}

/// The search tools over `clients`.
pub fn search_tools(clients: &Clients) -> Vec<Arc<dyn Tool>> {
    let tool = |name: &str, description: &str, parameters: Value, kind: Kind| -> Arc<dyn Tool> {
        Arc::new(SearchTool {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters,
                effect: Effect::ReadOnly,
            },
            kind,
            clients: clients.clone(),
        })
    };
    vec![
        tool(
            "slack_search",
            "Search Slack messages the person who asked can see (Slack's real-time search, at question time). Returns author, channel, date, a snippet and a permalink for each message; read a whole thread with slack_read_thread.",
            schema_of::<SlackSearchArgs>(),
            Kind::Slack,
        ),
        tool(
            "notion_search",
            "Search Notion pages (and databases) by title among those this agent may search. Returns title, link, last edit and parent; read a page with notion_read_page.",
            schema_of::<NotionSearchArgs>(),
            Kind::Notion,
        ),
        tool(
            "github_search",
            "Search GitHub issues and pull requests in the repositories this agent may search. Returns number, title, state, author, link and a snippet.",
            schema_of::<GithubSearchArgs>(),
            Kind::Github,
        ),
        tool(
            "search",
            "Search every source this agent may search (Slack, Notion, Jira, GitHub) at once. Returns up to 10 hits per source, each with a link and a one-line snippet, and the full list as a file. Use it first for 'where is' and 'what did we decide' questions; rephrase and search again when nothing fits.",
            schema_of::<SearchArgs>(),
            Kind::All,
        ),
    ]
}

/// `YYYY-MM-DD` as UNIX seconds (midnight UTC).
fn day(text: &str) -> Result<i64, ToolError> {
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc().timestamp())
        .ok_or_else(|| ToolError::Model(format!("'{text}' is not a date (YYYY-MM-DD)")))
}

impl SearchTool {
    /// One source's hits for `search`.
    async fn source(&self, ctx: &ToolCtx, source: &str, query: &str) -> Result<Vec<Hit>, ToolError> {
        let c = &self.clients;
        let grant = &ctx.search;
        match source {
            "slack" => {
                let q = SlackQuery {
                    query: query.to_string(),
                    limit: PER_SOURCE,
                    ..SlackQuery::default()
                };
                sources::slack(c.slack.as_ref(), c.slack_search_user.as_ref(), grant, &q).await
            }
            "notion" => sources::notion(c.notion.as_ref(), grant, query, None, PER_SOURCE).await,
            "jira" => sources::jira(c.jira.as_ref(), grant, query, PER_SOURCE).await,
            "github" => sources::github(&c.github, grant, query, GithubKind::Both, PER_SOURCE).await,
            other => Err(ToolError::Model(format!("unknown source '{other}'"))),
        }
    }

    /// Every allowed source at once, each with its own timeout; one that fails is named
    /// and the others still answer.
    async fn all(&self, ctx: &ToolCtx, args: SearchArgs) -> ToolResult {
        let allowed = ctx.search.scope.sources();
        let wanted: Vec<&str> = match &args.sources {
            Some(asked) => {
                if let Some(bad) = asked.iter().find(|s| !allowed.contains(&s.as_str())) {
                    return Err(ToolError::Model(format!(
                        "this agent may not search '{bad}'; it searches {}",
                        allowed.join(", ")
                    )));
                }
                allowed
                    .iter()
                    .copied()
                    .filter(|s| asked.iter().any(|a| a == s))
                    .collect()
            }
            None => allowed,
        };
        let query = args.query.as_str();
        let asks = wanted.iter().map(|source| async move {
            let result = tokio::time::timeout(SOURCE_TIMEOUT, self.source(ctx, source, query))
                .await
                .unwrap_or_else(|_| {
                    Err(ToolError::Model(format!(
                        "no answer within {}s",
                        SOURCE_TIMEOUT.as_secs()
                    )))
                });
            (*source, result)
        });
        let answers = futures_util::future::join_all(asks).await;
        let all: Vec<&Hit> = answers
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .flatten()
            .collect();
        let listed = serde_json::to_vec_pretty(&all).unwrap_or_default();
        let file = ctx
            .files
            .add(
                NewFile {
                    name: "search-results.json".into(),
                    mime: "application/json".into(),
                    content: listed,
                },
                FileSource::SearchResults,
                None,
            )
            .await
            .map_err(|e| ToolError::Model(format!("cannot keep the results: {e}")))?;
        Ok(ToolOutput::text(render(&args.query, &answers, &file.id)))
    }
}

/// The grouped result list `search` returns.
pub fn render(query: &str, answers: &[(&str, Result<Vec<Hit>, ToolError>)], file_id: &str) -> String {
    let mut out = format!("Search results for \"{query}\":\n");
    for (source, answer) in answers {
        match answer {
            Ok(hits) if hits.is_empty() => out.push_str(&format!("\n## {source}: nothing found\n")),
            Ok(hits) => {
                out.push_str(&format!("\n## {source} ({} hits)\n", hits.len()));
                for h in hits.iter().take(INLINE_PER_SOURCE) {
                    let when = h
                        .when
                        .as_deref()
                        .map(|w| format!(" ({})", w.get(..10).unwrap_or(w)))
                        .unwrap_or_default();
                    out.push_str(&format!("- [{}]({}){when}: {}\n", h.title, h.url, h.snippet));
                }
                if hits.len() > INLINE_PER_SOURCE {
                    out.push_str(&format!(
                        "- … {} more in file {file_id}\n",
                        hits.len() - INLINE_PER_SOURCE
                    ));
                }
            }
            Err(e) => out.push_str(&format!("\n## {source}: failed ({e})\n")),
        }
    }
    out.push_str(&format!(
        "\nAll hits with their ids: file {file_id}. Cite the links you use.\n"
    ));
    out
}

fn hits_output(hits: Vec<Hit>) -> ToolResult {
    Ok(ToolOutput::json(json!({"count": hits.len(), "results": hits})))
}

#[async_trait]
impl Tool for SearchTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn status(&self) -> String {
        match self.kind {
            Kind::Slack => "Searching Slack…",
            Kind::Notion => "Searching Notion…",
            Kind::Github => "Searching GitHub…",
            Kind::All => "Searching…",
        }
        .into()
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let c = &self.clients;
        match self.kind {
            Kind::Slack => {
                let a: SlackSearchArgs = parse(args)?;
                let q = SlackQuery {
                    query: a.query,
                    channel_types: a.channel_types,
                    after: a.after.as_deref().map(day).transpose()?,
                    before: a.before.as_deref().map(day).transpose()?,
                    limit: a.limit.unwrap_or(20) as usize,
                };
                hits_output(
                    sources::slack(c.slack.as_ref(), c.slack_search_user.as_ref(), &ctx.search, &q).await?,
                )
            }
            Kind::Notion => {
                let a: NotionSearchArgs = parse(args)?;
                let object = match a.filter.as_deref() {
                    None => None,
                    Some(f @ ("page" | "data_source")) => Some(f),
                    Some(other) => {
                        return Err(ToolError::Model(format!(
                            "filter is page or data_source, not '{other}'"
                        )));
                    }
                };
                let limit = a.limit.unwrap_or(20) as usize;
                hits_output(sources::notion(c.notion.as_ref(), &ctx.search, &a.query, object, limit).await?)
            }
            Kind::Github => {
                let a: GithubSearchArgs = parse(args)?;
                let kind = match a.kind.as_deref() {
                    None | Some("both") => GithubKind::Both,
                    Some("issue") => GithubKind::Issue,
                    Some("pr") => GithubKind::Pr,
                    Some(other) => {
                        return Err(ToolError::Model(format!(
                            "kind is issue, pr or both, not '{other}'"
                        )));
                    }
                };
                let limit = a.limit.unwrap_or(20) as usize;
                hits_output(sources::github(&c.github, &ctx.search, &a.query, kind, limit).await?)
            }
            Kind::All => self.all(ctx, parse(args)?).await,
        }
    }

    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        // One realistic hit per source the agent may search, in the real shapes.
        let query = args["query"].as_str().unwrap_or("runbook").to_string();
        let sample = |source: &'static str| match source {
            "slack" => Hit {
                source,
                id: "C0OPS/1767600000.000100".into(),
                title: "Dana in #ops".into(),
                url: "https://example.slack.com/archives/C0OPS/p1767600000000100".into(),
                snippet: format!(
                    "The {query} lives in Notion under Operations; ping #ops if it is out of date."
                ),
                when: Some("2026-01-05".into()),
                private: false,
            },
            "notion" => Hit {
                source,
                id: "1c2d3e4f-0000-4000-8000-000000000001".into(),
                title: format!("On-call {query}"),
                url: "https://www.notion.so/On-call-runbook-1c2d3e4f000040008000000000000001".into(),
                snippet: "page in page id".into(),
                when: Some("2026-01-04T10:00:00.000Z".into()),
                private: false,
            },
            "jira" => Hit {
                source,
                id: "OPS-12".into(),
                title: format!("OPS-12 Update the {query}"),
                url: "https://example.atlassian.net/browse/OPS-12".into(),
                snippet: "In Progress, assigned to Dana".into(),
                when: Some("2026-01-03T09:00:00.000+0000".into()),
                private: false,
            },
            _ => Hit {
                source: "github",
                id: "acme/infra#42".into(),
                title: format!("acme/infra#42 Link the {query} from the README"),
                url: "https://github.com/acme/infra/pull/42".into(),
                snippet: "pull request, open by dana: Adds the link.".into(),
                when: Some("2026-01-02T08:00:00Z".into()),
                private: false,
            },
        };
        match self.kind {
            Kind::Slack => hits_output(vec![sample("slack")]),
            Kind::Notion => hits_output(vec![sample("notion")]),
            Kind::Github => hits_output(vec![sample("github")]),
            Kind::All => {
                let answers: Vec<(&str, Result<Vec<Hit>, ToolError>)> = ctx
                    .search
                    .scope
                    .sources()
                    .into_iter()
                    .map(|s| (s, Ok(vec![sample(s)])))
                    .collect();
                Ok(ToolOutput::text(render(&query, &answers, "f_search")))
            }
        }
    }
}
