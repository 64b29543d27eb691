//! Knowledge search against fake Slack (`assistant.search.info`,
//! `assistant.search.context` requiring the person's action token), fake Notion
//! (`/v1/search`), fake Jira (`/rest/api/3/search/jql`) and fake GitHub
//! (`/search/issues`) on 127.0.0.1: as the person who asked, scoped, concurrent, and
//! leaving nothing behind.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Json, Path as UrlPath, Query};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde_json::{Value, json};
use steward::config::search::SearchScope;
use steward::config::{AgentConfig, Config, Known};
use steward::integrations::Clients;
use steward::integrations::github::GithubClient;
use steward::integrations::jira::JiraClient;
use steward::integrations::notion::NotionClient;
use steward::integrations::slack::SlackClient;
use steward::run::Runner;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{RunStatus, SqliteStore, Store};
use steward::tools::ToolRegistry;
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::*;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const TOKEN: &str = "10647138185092.960436384805.afce3599";
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const ROOT_PAGE: &str = "1c2d3e4f-0000-4000-8000-000000000001";

/// What the fakes saw, and how they behave.
#[derive(Default)]
struct World {
    /// (service, path or method, body or query)
    calls: Mutex<Vec<(String, String, Value)>>,
    /// Each source's answer is late by this much.
    delay: Mutex<Duration>,
    /// Sources that answer 500.
    failing: Mutex<Vec<&'static str>>,
    /// The workspace has no Real-time Search.
    no_search: Mutex<bool>,
    /// Source calls waiting at once now, and the most there ever were.
    waiting: std::sync::atomic::AtomicUsize,
    peak: std::sync::atomic::AtomicUsize,
}

impl World {
    fn record(&self, service: &str, what: &str, body: Value) {
        self.calls
            .lock()
            .unwrap()
            .push((service.into(), what.into(), body));
    }
    fn calls_to(&self, what: &str) -> Vec<Value> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, w, _)| w == what)
            .map(|(_, _, b)| b.clone())
            .collect()
    }
    async fn wait(&self, source: &'static str) -> bool {
        use std::sync::atomic::Ordering;
        let delay = *self.delay.lock().unwrap();
        let now = self.waiting.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(delay).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        !self.failing.lock().unwrap().contains(&source)
    }
}

/// Slack, Notion, Jira and GitHub behind one address, under `/slack`, `/notion`, `/jira`
/// and `/github`.
async fn fakes(world: Arc<World>) -> String {
    let w = world.clone();
    let slack = post(
        move |UrlPath(method): UrlPath<String>, headers: axum::http::HeaderMap, Json(body): Json<Value>| {
            let w = w.clone();
            async move {
                w.record("slack", &method, body.clone());
                // A user token searches as its user; the bot token needs the person's token.
                let user_token = headers["authorization"] == "Bearer xoxp-search-user";
                match method.as_str() {
                    "assistant.search.info" => {
                        Json(json!({"ok": true, "is_ai_search_enabled": !*w.no_search.lock().unwrap()}))
                    }
                    "assistant.search.context" => {
                        if !w.wait("slack").await {
                            return Json(json!({"ok": false, "error": "internal_error"}));
                        }
                        if !user_token && body["action_token"] != TOKEN {
                            return Json(json!({"ok": false, "error": "invalid_action_token"}));
                        }
                        Json(json!({"ok": true, "results": {"messages": [
                        {"author_name": "Dana", "author_user_id": "U0DANA", "team_id": "T1", "channel_id": "C0OPS",
                         "channel_name": "ops", "message_ts": "1767600000.000100", "is_author_bot": false,
                         "content": "The on-call runbook is in Notion under Operations.",
                         "permalink": "https://acme.slack.com/archives/C0OPS/p1767600000000100"},
                        {"author_name": "Lee", "author_user_id": "U0LEE", "team_id": "T1", "channel_id": "C0PRIV",
                         "channel_name": "incident-42", "message_ts": "1767600100.000100", "is_author_bot": false,
                         "content": "Secret: the payroll outage was caused by the vendor migration.",
                         "permalink": "https://acme.slack.com/archives/C0PRIV/p1767600100000100"}],
                        "files": if body["content_types"].as_str().is_some_and(|t| t.contains("files")) {
                            json!([{"file_id": "F0TERMS", "title": "Acme acquisition terms.pdf",
                                    "content": "Purchase price: 40M", "permalink": "https://acme.slack.com/files/U0LEE/F0TERMS/terms.pdf"}])
                        } else {
                            json!([])
                        }},
                        "response_metadata": {"next_cursor": ""}}))
                    }
                    _ => Json(json!({"ok": true, "channel": body["channel"], "ts": "1767609999.000100"})),
                }
            }
        },
    );
    let w = world.clone();
    let slack_info = get(move |Query(q): Query<HashMap<String, String>>| {
        let w = w.clone();
        async move {
            w.record("slack", "conversations.info", json!(q));
            let private = q.get("channel").is_some_and(|c| c == "C0PRIV");
            Json(
                json!({"ok": true, "channel": {"id": q.get("channel"), "is_private": private, "is_ext_shared": false}}),
            )
        }
    });
    let w = world.clone();
    let notion = post(move |Json(body): Json<Value>| {
        let w = w.clone();
        async move {
            w.record("notion", "/v1/search", body);
            if !w.wait("notion").await {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"object": "error", "message": "boom"})),
                );
            }
            let page = |id: &str, title: &str, parent: Value| {
                json!({"object": "page", "id": id, "url": format!("https://www.notion.so/{}", id.replace('-', "")),
                       "last_edited_time": "2026-01-04T10:00:00.000Z", "in_trash": false, "parent": parent,
                       "properties": {"Name": {"id": "title", "type": "title", "title": [{"type": "text", "plain_text": title}]}}})
            };
            (
                StatusCode::OK,
                Json(
                    json!({"object": "list", "type": "page_or_data_source", "has_more": false, "next_cursor": null,
                    "results": [
                        page("2a000000-0000-4000-8000-000000000002", "On-call runbook", json!({"type": "page_id", "page_id": ROOT_PAGE})),
                        page("3b000000-0000-4000-8000-000000000003", "Runbook: payroll (HR only)", json!({"type": "workspace", "workspace": true})),
                        page("4c000000-0000-4000-8000-000000000004", "Runbook appendix", json!({"type": "page_id", "page_id": "2a000000-0000-4000-8000-000000000002"})),
                    ]}),
                ),
            )
        }
    });
    let w = world.clone();
    let notion_page = get(move |UrlPath(id): UrlPath<String>| {
        let w = w.clone();
        async move {
            w.record("notion", "/v1/pages", json!(id));
            // Pages whose id starts with 9 sit at the workspace's top, outside the root.
            let parent = if id.starts_with('9') {
                json!({"type": "workspace", "workspace": true})
            } else {
                json!({"type": "page_id", "page_id": ROOT_PAGE})
            };
            Json(json!({"object": "page", "id": id, "parent": parent,
                        "url": format!("https://www.notion.so/{id}"), "properties": {}}))
        }
    });
    let w = world.clone();
    let jira = post(move |Json(body): Json<Value>| {
        let w = w.clone();
        async move {
            w.record("jira", "/rest/api/3/search/jql", body);
            if !w.wait("jira").await {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"errorMessages": ["boom"]})),
                );
            }
            let issue = |key: &str, summary: &str| {
                json!({"id": "10001", "key": key, "fields": {"summary": summary, "status": {"name": "In Progress"},
                       "assignee": {"displayName": "Dana"}, "updated": "2026-01-03T09:00:00.000+0000"}})
            };
            // An issue with a security level (asked for in `fields`).
            let mut restricted_hit = issue("OPS-13", "Payroll export leaked: runbook");
            restricted_hit["fields"]["security"] = json!({"id": "10000", "name": "Security team only"});
            (
                StatusCode::OK,
                Json(
                    json!({"issues": [issue("OPS-12", "Update the on-call runbook"), issue("HR-7", "Payroll runbook"),
                                      restricted_hit], "isLast": true}),
                ),
            )
        }
    });
    // An issue's attachments (Jira's issue shape, `fields=attachment`), and their content.
    let w = world.clone();
    let jira_issue = get(move |UrlPath(key): UrlPath<String>| {
        let w = w.clone();
        async move {
            w.record("jira", "/rest/api/3/issue", json!({"key": key}));
            if key == "OPS-13" {
                // An issue with a security level (Jira's `security` field).
                let restricted = json!({"id": "10013", "key": "OPS-13", "fields": {"summary": "Payroll export leaked",
                    "security": {"id": "10000", "name": "Security team only"}, "comment": {"comments": []},
                    "attachment": [{"id": "10031", "filename": "export.csv", "size": 10, "mimeType": "text/csv"}]}});
                return (StatusCode::OK, Json(restricted));
            }
            if key == "OPS-9" {
                // Moved to HR since: Jira answers the old key with the issue where it is.
                let moved = json!({"id": "10009", "key": "HR-9", "fields": {"summary": "Salary review",
                    "comment": {"comments": []}, "attachment": [{"id": "10091", "filename": "salaries.csv"}]}});
                return (StatusCode::OK, Json(moved));
            }
            if key != "OPS-12" {
                let missing = "Issue does not exist or you do not have permission to see it.";
                return (
                    StatusCode::NOT_FOUND,
                    Json(json!({"errorMessages": [missing], "errors": {}})),
                );
            }
            let attachment = json!({"self": "https://acme.atlassian.net/rest/api/3/attachment/10001", "id": "10001",
                "filename": "gateway.log", "author": {"displayName": "Dana"}, "created": "2026-01-03T09:00:00.000+0000",
                "size": 32, "mimeType": "text/plain",
                "content": "https://acme.atlassian.net/rest/api/3/attachment/content/10001"});
            (
                StatusCode::OK,
                Json(json!({"id": "10012", "key": "OPS-12", "fields": {"attachment": [attachment]}})),
            )
        }
    });
    let w = world.clone();
    let jira_content = get(move |UrlPath(id): UrlPath<String>| {
        let w = w.clone();
        async move {
            w.record("jira", "/rest/api/3/attachment/content", json!({"id": id}));
            "09:00 ERROR certificate expired\n"
        }
    });
    let w = world.clone();
    let github = get(move |Query(q): Query<HashMap<String, String>>| {
        let w = w.clone();
        async move {
            w.record("github", "/search/issues", json!(q));
            if !w.wait("github").await {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"message": "boom"})),
                );
            }
            let pr = q["q"].contains("is:pull-request");
            let item = |repo: &str, n: u64| {
                let mut i = json!({"number": n, "title": "Link the runbook", "state": "open", "user": {"login": "dana"},
                    "html_url": format!("https://github.com/{repo}/pull/{n}"), "repository_url": format!("https://api.github.com/repos/{repo}"),
                    "body": "Adds the link.", "updated_at": "2026-01-02T08:00:00Z"});
                if pr {
                    i["pull_request"] =
                        json!({"html_url": format!("https://github.com/{repo}/pull/{n}"), "merged_at": null});
                }
                i
            };
            (
                StatusCode::OK,
                Json(
                    json!({"total_count": 2, "incomplete_results": false, "items": [item("acme/infra", 42), item("acme/secret", 7)]}),
                ),
            )
        }
    });
    let app = Router::new()
        .route("/slack/conversations.info", slack_info)
        .route("/slack/{method}", slack)
        .route("/notion/v1/search", notion)
        .route("/notion/v1/pages/{id}", notion_page)
        .route("/jira/rest/api/3/search/jql", jira)
        .route("/jira/rest/api/3/issue/{key}", jira_issue)
        .route("/jira/rest/api/3/attachment/content/{id}", jira_content)
        .route("/github/search/issues", github);
    serve(app).await
}

fn clients(base: &str) -> Clients {
    let http = steward::http::client().unwrap();
    Clients {
        slack: Some(SlackClient::new(
            http.clone(),
            &format!("{base}/slack"),
            "xoxb-test",
        )),
        jira: Some(JiraClient::new(
            http.clone(),
            &format!("{base}/jira"),
            "bot@acme.test",
            "jira-token",
        )),
        notion: Some(NotionClient::new(
            http.clone(),
            &format!("{base}/notion"),
            "secret_notion",
        )),
        github: GithubClient::new(http, &format!("{base}/github"), Some("ghp_test".into())),
        slack_search_user: None,
    }
}

fn registry(clients: &Clients) -> ToolRegistry {
    steward::integrations::builtin_tools(clients, steward::http::Egress::new(Default::default()))
}

fn scope() -> SearchScope {
    SearchScope {
        slack_channel_types: vec!["public_channel".into(), "private_channel".into()],
        slack_files: false,
        notion_roots: vec![ROOT_PAGE.into()],
        jira_projects: vec!["OPS".into()],
        github_repos: vec!["acme/infra".into()],
    }
}

fn agent(tools: &[&str]) -> AgentConfig {
    let mut a = AgentConfig::new(
        "finder",
        ModelRef::parse("openai/gpt-4.1").unwrap(),
        "You find things.",
        tools.iter().map(|t| t.to_string()).collect(),
    );
    a.search = scope();
    a
}

/// The content the model got back for tool call `id`.
fn tool_result(fake: &FakeModel, id: &str) -> String {
    let last = fake.requests().last().unwrap().body.clone();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == id)
        .map(|m| m["content"].as_str().unwrap().to_string())
        .unwrap_or_else(|| panic!("no result for {id}"))
}

#[tokio::test(flavor = "current_thread")]
async fn a_mention_searches_slack_as_the_asker_and_the_token_is_kept_nowhere() {
    // Everything steward logs while it works.
    let logs = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || LogWriter(sink.clone()))
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let world = Arc::new(World::default());
    let base = fakes(world.clone()).await;
    let clients = clients(&base);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "slack_search",
        r#"{"query": "on-call runbook"}"#,
    )])));
    fake.push(Reply::ok(openai_text(
        "It is in Notion under Operations: https://acme.slack.com/archives/C0OPS/p1767600000000100",
    )));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You find things.");
    write(
        root,
        "agents/finder.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [slack_search]\nsearch: {slack: {channel_types: [public_channel, private_channel], files: true}}\ntriggers:\n  - slack_mention: {}\n",
    );
    let tools = registry(&clients);
    let config = Config::load(
        root,
        &Known {
            tools: tools.names(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&root.join("steward.db")).await.unwrap());
    let runner = Runner::builder(store.clone())
        .providers(providers(Some(&fake), None))
        .tools(tools)
        .tokens(tokens())
        .sources(steward::triggers::Sources::new(
            steward::triggers::source::SourceSettings {
                slack: clients.slack.clone(),
                ..Default::default()
            },
        ))
        .build();
    let secrets = Secrets {
        slack_signing: SECRET.into(),
        slack_bot_user: Some("UBOT".into()),
        ..Secrets::default()
    };
    let service = Service::start(
        runner,
        Arc::new(config),
        secrets,
        clients.slack.clone(),
        None,
        DispatchSettings::default(),
    );
    let mention = json!({"type": "app_mention", "user": "U0ADA", "text": "<@UBOT> where is the on-call runbook?",
        "ts": "1767608000.000100", "channel": "C0HELP", "event_ts": "1767608000.000100", "action_token": TOKEN});
    let req = slack_signed(
        "/slack/events",
        "application/json",
        event_callback("EvS1", mention).to_string(),
        SECRET,
    );
    assert_eq!(
        service.router().oneshot(req).await.unwrap().status(),
        StatusCode::OK
    );
    let runs = ended_runs(store.as_ref(), 1).await;
    assert_eq!(runs[0].status, RunStatus::Succeeded, "{:?}", runs[0]);

    // Slack was asked with the person's token, for the channel types the agent allows.
    let asked = world.calls_to("assistant.search.context");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["action_token"], TOKEN);
    assert_eq!(asked[0]["channel_types"], "public_channel,private_channel");
    assert_eq!(world.calls_to("assistant.search.info").len(), 1);
    // The public hit is quoted; the private one, in a channel answer, is linked only.
    let result = tool_result(&fake, "c1");
    assert!(
        result.contains("The on-call runbook is in Notion under Operations."),
        "{result}"
    );
    assert!(
        result.contains("https://acme.slack.com/archives/C0PRIV/p1767600100000100"),
        "{result}"
    );
    assert!(
        !result.contains("payroll outage"),
        "a private conversation was quoted in a channel: {result}"
    );
    // Nor named, nor who wrote there: a channel's name can be what is secret.
    assert!(
        !result.contains("incident-42") && !result.contains("Lee"),
        "a private conversation was named in a channel: {result}"
    );
    // A file hit names no conversation: linked, without its title or content.
    assert!(result.contains("F0TERMS/terms.pdf"), "{result}");
    assert!(
        !result.contains("acquisition") && !result.contains("40M"),
        "a file that may be private was named in a channel: {result}"
    );

    // The token reached Slack and nothing else: not the model, the database or the logs.
    service.stop(Duration::from_secs(5)).await;
    for r in fake.requests() {
        assert!(!String::from_utf8_lossy(&r.raw).contains(TOKEN));
    }
    for name in ["steward.db", "steward.db-wal"] {
        if let Ok(bytes) = std::fs::read(root.join(name)) {
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "the token is in {name}"
            );
        }
    }
    let logged = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(!logged.is_empty());
    assert!(!logged.contains(TOKEN), "the token is in the logs");
}

#[derive(Clone)]
struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs one call of `tool` in a run no person started; the model's view of the
/// result, the outcome, and how long the call took.
async fn run_search(world: Arc<World>, tool: &str, args: &str) -> (String, steward::run::RunOutcome) {
    let (result, out, _, _) = run_search_timed(world, tool, args).await;
    (result, out)
}

async fn run_search_timed(
    world: Arc<World>,
    tool: &str,
    args: &str,
) -> (String, steward::run::RunOutcome, Duration, Vec<String>) {
    let base = fakes(world).await;
    let clients = clients(&base);
    let trigger = TriggerEvent {
        source: "cron".into(),
        kind: "cron".into(),
        ..TriggerEvent::from_cli(json!({"text": "find the runbook"}))
    };
    // The run's database lives in `dir`: keep it until the events are read.
    let OneRound {
        fake,
        out,
        runner,
        dir: _dir,
    } = one_round(
        registry(&clients),
        &agent(&[tool]),
        &trigger,
        &[("c1", tool, args)],
        "done",
    )
    .await;
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let took = events
        .iter()
        .find(|e| e.kind == "tool_result")
        .and_then(|e| e.data["duration_ms"].as_u64())
        .unwrap_or(u64::MAX);
    // Where each file the run kept came from.
    let sources = runner
        .store
        .run_files(&out.run_id)
        .await
        .unwrap()
        .iter()
        .map(|f| f.meta["source"].as_str().unwrap_or_default().to_string())
        .collect();
    (
        tool_result(&fake, "c1"),
        out,
        Duration::from_millis(took),
        sources,
    )
}

#[tokio::test]
async fn a_run_no_person_started_is_told_plainly_it_cannot_search_slack() {
    let world = Arc::new(World::default());
    let (result, out) = run_search(world.clone(), "slack_search", r#"{"query": "runbook"}"#).await;
    assert_eq!(out.final_text.as_deref(), Some("done"));
    assert!(
        result.contains("Slack search runs as the person who asked, and this run was started by cron cron"),
        "{result}"
    );
    assert!(
        world.calls_to("assistant.search.context").is_empty(),
        "never a broader search"
    );
}

#[tokio::test]
async fn search_asks_every_source_at_once_and_survives_one_failing() {
    let world = Arc::new(World::default());
    *world.delay.lock().unwrap() = Duration::from_millis(300);
    *world.failing.lock().unwrap() = vec!["jira"];
    let (result, out, took, files) = run_search_timed(
        world.clone(),
        "search",
        r#"{"query": "runbook", "sources": ["notion", "jira", "github"]}"#,
    )
    .await;
    assert_eq!(out.final_text.as_deref(), Some("done"));
    assert!(result.contains("## notion (2 hits)"), "{result}");
    assert!(result.contains("## jira: failed"), "{result}");
    assert!(result.contains("## github (2 hits)"), "{result}");
    assert!(
        result.contains("[On-call runbook](https://www.notion.so/2a000000000040008000000000000002)"),
        "{result}"
    );
    assert!(result.contains("All hits with their ids: file f_"), "{result}");
    // One person's results: kept with the run, never carried into the thread's later
    // runs (those carry tool outputs only).
    assert_eq!(files, ["search_results"]);
    // The 300 ms sources overlapped: they were all waiting at once (the fakes count
    // it; a wall-clock bound would flake on a loaded machine).
    assert!(took >= Duration::from_millis(300), "took {took:?}");
    let peak = world.peak.load(std::sync::atomic::Ordering::SeqCst);
    assert!(peak >= 3, "at most {peak} sources were asked at once");
}

#[tokio::test]
async fn scopes_drop_what_the_agent_may_not_see() {
    let world = Arc::new(World::default());
    let (notion, _) = run_search(world.clone(), "notion_search", r#"{"query": "runbook"}"#).await;
    // Under the root directly, and through its parent (one page read up the chain).
    assert!(
        notion.contains("On-call runbook") && notion.contains("Runbook appendix"),
        "{notion}"
    );
    assert!(!notion.contains("payroll"), "{notion}");
    assert_eq!(
        world.calls_to("/v1/pages").len(),
        1,
        "the appendix's parent page is read to find the root above it"
    );

    let world = Arc::new(World::default());
    let (all, _) = run_search(
        world.clone(),
        "search",
        r#"{"query": "runbook", "sources": ["jira", "github"]}"#,
    )
    .await;
    assert!(all.contains("OPS-12") && !all.contains("HR-7"), "{all}");
    // An issue with a security level is named and linked, never quoted.
    assert!(all.contains("OPS-13") && !all.contains("Payroll export"), "{all}");
    assert!(
        all.contains("acme/infra#42") && !all.contains("acme/secret"),
        "{all}"
    );
    let jql = &world.calls_to("/rest/api/3/search/jql")[0]["jql"];
    assert_eq!(
        jql,
        "text ~ \"runbook\" AND project in (OPS) ORDER BY updated DESC"
    );
    let qs: Vec<String> = world
        .calls_to("/search/issues")
        .iter()
        .map(|q| q["q"].as_str().unwrap().to_string())
        .collect();
    assert!(
        qs.contains(&"runbook is:issue repo:acme/infra".to_string()),
        "{qs:?}"
    );
    assert!(
        qs.contains(&"runbook is:pull-request repo:acme/infra".to_string()),
        "{qs:?}"
    );

    // A source the agent does not list is refused by name.
    let world = Arc::new(World::default());
    let base = fakes(world).await;
    let clients = clients(&base);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "search",
        r#"{"query": "x", "sources": ["notion"]}"#,
    )])));
    fake.push(Reply::ok(openai_text("done")));
    let (_dir, runner) = runner(providers(Some(&fake), None), registry(&clients), false).await;
    let mut narrow = agent(&["search"]);
    narrow.search.notion_roots.clear();
    runner
        .run(
            &narrow,
            &TriggerEvent::from_cli(json!({"text": "x"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(tool_result(&fake, "c1").contains("this agent may not search 'notion'"));
}

/// An issue with a security level is restricted text: the run that reads it holds it
/// as it would a private conversation's (redacted at rest, its answer to the asker).
#[tokio::test]
async fn a_restricted_jira_issue_is_held_as_private() {
    let world = Arc::new(World::default());
    let (result, out) = run_search(world.clone(), "jira_get_issue", r#"{"key": "OPS-13"}"#).await;
    assert!(result.contains("\"restricted\": true"), "{result}");
    assert_eq!(out.private_sources, ["jira:OPS-13"]);
    let (result, out) = run_search(world.clone(), "jira_get_issue", r#"{"key": "OPS-12"}"#).await;
    assert!(result.contains("\"restricted\": false"), "{result}");
    assert!(out.private_sources.is_empty());
    // Its attachments are restricted text too, and never stored: the file is held in
    // memory from the start, as a private run's files are.
    let (result, out, _, stored) = run_search_timed(
        world.clone(),
        "jira_get_attachment",
        r#"{"id": "10031", "issue": "OPS-13"}"#,
    )
    .await;
    assert!(result.contains("\"restricted\": true"), "{result}");
    assert_eq!(out.private_sources, ["jira:OPS-13"]);
    assert!(
        stored.is_empty(),
        "no file row for a restricted attachment: {stored:?}"
    );
    // Found by jira_search: named, never quoted.
    let (result, out) = run_search(world, "jira_search", r#"{"jql": "text ~ runbook"}"#).await;
    assert!(
        result.contains("OPS-13") && !result.contains("Payroll export"),
        "{result}"
    );
    assert!(out.private_sources.is_empty());
}

/// Jira answers a moved issue's old key with the issue where it is now: the scope is
/// checked on that issue, not on the key the model gave.
#[tokio::test]
async fn a_moved_issue_is_checked_where_it_is_now() {
    let world = Arc::new(World::default());
    for (tool, args) in [
        ("jira_get_issue", r#"{"key": "OPS-9"}"#),
        ("jira_get_attachment", r#"{"id": "10091", "issue": "OPS-9"}"#),
        ("jira_add_comment", r#"{"key": "OPS-9", "body": "Approved."}"#),
    ] {
        let (result, _) = run_search(world.clone(), tool, args).await;
        assert!(
            result.contains("issue HR-9 is outside this agent's Jira projects"),
            "{tool}: {result}"
        );
        assert!(!result.contains("Salary"), "{result}");
    }
    assert!(world.calls_to("/rest/api/3/attachment/content").is_empty());
}

/// The read tools keep to the agent's search scope as its searches do: an issue of
/// another Jira project, a Notion page outside the roots, a repository not listed is a
/// tool error, and nothing of it reaches the model.
#[tokio::test]
async fn read_tools_keep_to_the_agents_scope() {
    let world = Arc::new(World::default());
    let (hr, _) = run_search(world.clone(), "jira_get_issue", r#"{"key": "HR-7"}"#).await;
    assert!(
        hr.contains("issue HR-7 is outside this agent's Jira projects (OPS; search.jira.projects)"),
        "{hr}"
    );
    assert!(
        world.calls_to("/rest/api/3/issue").is_empty(),
        "nothing asked of Jira"
    );

    // An attachment id names no project: a limited agent names the issue, which must be
    // in its projects and hold the attachment, before anything is downloaded.
    let world = Arc::new(World::default());
    for (args, refusal) in [
        (r#"{"id": "10001"}"#, "missing required property 'issue'"),
        (
            r#"{"id": "10001", "issue": "HR-7"}"#,
            "issue HR-7 is outside this agent's Jira projects (OPS; search.jira.projects)",
        ),
        (
            r#"{"id": "10042", "issue": "OPS-12"}"#,
            "attachment 10042 is not on OPS-12 (its attachments: 10001)",
        ),
    ] {
        let (result, _) = run_search(world.clone(), "jira_get_attachment", args).await;
        assert!(result.contains(refusal), "{args}: {result}");
    }
    assert_eq!(
        world.calls_to("/rest/api/3/issue"),
        vec![json!({"key": "OPS-12"})],
        "only the issue in scope was asked about"
    );
    assert!(world.calls_to("/rest/api/3/attachment/content").is_empty());
    let (downloaded, _) = run_search(
        world.clone(),
        "jira_get_attachment",
        r#"{"id": "10001", "issue": "OPS-12", "filename": "gateway.log"}"#,
    )
    .await;
    assert!(
        downloaded.starts_with("Downloaded into f_1 gateway.log (text/plain, 32 bytes"),
        "{downloaded}"
    );
    assert_eq!(
        world.calls_to("/rest/api/3/attachment/content"),
        vec![json!({"id": "10001"})]
    );

    // Writes keep to it as well: nothing is sent for an issue, project or page outside.
    let world = Arc::new(World::default());
    for (tool, args, refusal) in [
        (
            "jira_create_issue",
            r#"{"project": "HR", "summary": "Raise for Dana"}"#,
            "project HR is outside this agent's Jira projects (OPS; search.jira.projects)",
        ),
        (
            "jira_add_comment",
            r#"{"key": "HR-7", "body": "Done."}"#,
            "issue HR-7 is outside this agent's Jira projects (OPS; search.jira.projects)",
        ),
        (
            "notion_update_property",
            r#"{"page_id": "9a000000-0000-4000-8000-000000000009", "properties": {}}"#,
            "outside this agent's Notion roots (search.notion.roots)",
        ),
        (
            "notion_add_comment",
            r#"{"page_id": "9a000000-0000-4000-8000-000000000009", "text": "Seen."}"#,
            "outside this agent's Notion roots (search.notion.roots)",
        ),
    ] {
        let (result, _) = run_search(world.clone(), tool, args).await;
        assert!(result.contains(refusal), "{tool}: {result}");
    }
    assert!(world.calls_to("/rest/api/3/issue").is_empty());

    let world = Arc::new(World::default());
    let (outside, _) = run_search(
        world.clone(),
        "notion_get_page",
        r#"{"page_id": "9a000000-0000-4000-8000-000000000009"}"#,
    )
    .await;
    assert!(
        outside.contains("outside this agent's Notion roots (search.notion.roots)"),
        "{outside}"
    );
    let (inside, _) = run_search(
        world.clone(),
        "notion_get_page",
        r#"{"page_id": "2a000000-0000-4000-8000-000000000002"}"#,
    )
    .await;
    assert!(
        inside.contains("2a000000-0000-4000-8000-000000000002") && !inside.starts_with("error"),
        "{inside}"
    );
    let (content, _) = run_search(
        world,
        "notion_read_page",
        r#"{"page_id": "9a000000-0000-4000-8000-000000000009"}"#,
    )
    .await;
    assert!(content.contains("outside this agent's Notion roots"), "{content}");

    let (pr, _) = run_search(
        Arc::new(World::default()),
        "github_pr_state",
        r#"{"owner": "acme", "repo": "secret", "number": 1}"#,
    )
    .await;
    assert!(
        pr.contains(
            "acme/secret is not one of this agent's GitHub repositories (acme/infra; search.github.repos)"
        ),
        "{pr}"
    );
}

#[test]
fn a_search_tool_without_its_source_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You find things.");
    write(
        root,
        "agents/finder.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [notion_search, search]\nsearch: {github: {repos: [acme]}}\n",
    );
    let clients = clients("http://127.0.0.1:9");
    let tools = registry(&clients);
    let err = Config::load(
        root,
        &Known {
            tools: tools.names(),
            skills: Default::default(),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("tool 'notion_search' needs search.notion"), "{err}");
    assert!(err.contains("'acme' is not owner/name"), "{err}");
}

#[tokio::test]
async fn mocks_answer_in_the_real_shape() {
    let world = Arc::new(World::default());
    let base = fakes(world.clone()).await;
    let clients = clients(&base);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "search",
        r#"{"query": "runbook"}"#,
    )])));
    fake.push(Reply::ok(openai_text("done")));
    let (_dir, runner) = runner(providers(Some(&fake), None), registry(&clients), true).await;
    runner
        .run(
            &agent(&["search"]),
            &TriggerEvent::from_cli(json!({"text": "x"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let result = tool_result(&fake, "c1");
    for source in [
        "## slack (1 hits)",
        "## notion (1 hits)",
        "## jira (1 hits)",
        "## github (1 hits)",
    ] {
        assert!(result.contains(source), "{result}");
    }
    assert!(world.calls.lock().unwrap().is_empty(), "a mock touches nothing");
}

#[tokio::test]
async fn a_configured_user_token_searches_for_runs_no_person_started() {
    let world = Arc::new(World::default());
    let base = fakes(world.clone()).await;
    let mut clients = clients(&base);
    clients.slack_search_user = clients.slack.as_ref().map(|s| s.with_token("xoxp-search-user"));
    let trigger = TriggerEvent {
        source: "cron".into(),
        kind: "cron".into(),
        ..TriggerEvent::from_cli(json!({"text": "weekly digest"}))
    };
    let calls = [("c1", "slack_search", r#"{"query": "runbook"}"#)];
    let OneRound { fake, dir: _dir, .. } = one_round(
        registry(&clients),
        &agent(&["slack_search"]),
        &trigger,
        &calls,
        "done",
    )
    .await;
    let asked = world.calls_to("assistant.search.context");
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].get("action_token").is_none(),
        "a user token needs no action token"
    );
    assert!(tool_result(&fake, "c1").contains("The on-call runbook is in Notion"));
}

#[tokio::test]
async fn a_workspace_without_real_time_search_gets_a_clear_error() {
    let world = Arc::new(World::default());
    *world.no_search.lock().unwrap() = true;
    let base = fakes(world.clone()).await;
    let clients = clients(&base);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "slack_search",
        r#"{"query": "runbook"}"#,
    )])));
    fake.push(Reply::ok(openai_tools(&[(
        "c2",
        "slack_search",
        r#"{"query": "playbook"}"#,
    )])));
    fake.push(Reply::ok(openai_text("done")));
    let (_dir, runner) = runner(providers(Some(&fake), None), registry(&clients), false).await;
    let mut trigger = TriggerEvent::from_cli(json!({"text": "where is the runbook?"}));
    trigger.action_token = Some(steward::types::ActionToken::new(TOKEN));
    runner
        .run(
            &agent(&["slack_search"]),
            &trigger,
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(
        tool_result(&fake, "c2").contains("Real-time Search is not enabled for this workspace"),
        "{}",
        tool_result(&fake, "c2")
    );
    assert!(world.calls_to("assistant.search.context").is_empty());
    assert_eq!(
        world.calls_to("assistant.search.info").len(),
        1,
        "asked once per workspace"
    );
}

/// An agent that may search public channels only drops a private channel's hit even
/// when Slack returns one (a C id: `conversations.info` says it is private).
#[tokio::test]
async fn hits_outside_the_agents_channel_types_are_dropped_locally() {
    let world = Arc::new(World::default());
    let base = fakes(world.clone()).await;
    let mut clients = clients(&base);
    clients.slack_search_user = clients.slack.as_ref().map(|s| s.with_token("xoxp-search-user"));
    let trigger = TriggerEvent {
        source: "cron".into(),
        kind: "cron".into(),
        ..TriggerEvent::from_cli(json!({"text": "weekly digest"}))
    };
    let mut public_only = agent(&["slack_search"]);
    public_only.search.slack_channel_types = vec!["public_channel".into()];
    let calls = [("c1", "slack_search", r#"{"query": "runbook"}"#)];
    let OneRound { fake, dir: _dir, .. } =
        one_round(registry(&clients), &public_only, &trigger, &calls, "done").await;
    let result = tool_result(&fake, "c1");
    assert!(result.contains("The on-call runbook is in Notion"), "{result}");
    assert!(
        !result.contains("C0PRIV") && !result.contains("payroll"),
        "{result}"
    );
}
