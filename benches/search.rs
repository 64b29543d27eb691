//! `search` over four sources (Slack as the asker, Notion, Jira, GitHub), each a fake on
//! 127.0.0.1 that answers after 300 ms with five hits: the call's wall time against the
//! slowest source (goal: within 1.3x), and the tokens of the 20-hit list the model
//! reads (goal: under 1,500). Run with `cargo bench --bench search` (`SEARCHES` sets
//! the sample count, default 15).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use axum::Router;
use axum::extract::{Json, Path as UrlPath};
use axum::routing::{get, post};
use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::config::search::SearchScope;
use steward::integrations::Clients;
use steward::tokens::{Encoding, TokenCounter};
use steward::triggers::TriggerEvent;
use steward::types::{ActionToken, ModelRef};
use support::*;
use tokio_util::sync::CancellationToken;

const LATENCY: Duration = Duration::from_millis(300);
const HITS: usize = 5;

async fn fakes() -> String {
    let slack = post(|UrlPath(method): UrlPath<String>| async move {
        if method == "assistant.search.info" {
            return Json(json!({"ok": true, "is_ai_search_enabled": true}));
        }
        tokio::time::sleep(LATENCY).await;
        let messages: Vec<Value> = (0..HITS)
            .map(|i| json!({"author_name": "Dana Whitfield", "author_user_id": "U0DANA", "team_id": "T1", "channel_id": "C0OPS",
                "channel_name": "ops", "message_ts": format!("17676{i:05}.000100"), "is_author_bot": false,
                "content": format!("Update {i}: the on-call runbook moved to Notion under Operations > On-call; the old Confluence page is archived and redirects there. Ping #ops if a step is out of date."),
                "permalink": format!("https://acme.slack.com/archives/C0OPS/p17676{i:05}000100")}))
            .collect();
        Json(
            json!({"ok": true, "results": {"messages": messages, "files": []}, "response_metadata": {"next_cursor": ""}}),
        )
    });
    let notion = post(|| async {
        tokio::time::sleep(LATENCY).await;
        let results: Vec<Value> = (0..HITS)
            .map(|i| json!({"object": "page", "id": format!("2a00000{i}-0000-4000-8000-000000000002"),
                "url": format!("https://www.notion.so/On-call-runbook-part-{i}-2a00000{i}000040008000000000000002"),
                "last_edited_time": "2026-01-04T10:00:00.000Z", "parent": {"type": "workspace", "workspace": true},
                "properties": {"Name": {"type": "title", "title": [{"plain_text": format!("On-call runbook, part {i}")}]}}}))
            .collect();
        Json(json!({"object": "list", "results": results, "has_more": false, "next_cursor": null}))
    });
    let jira = post(|| async {
        tokio::time::sleep(LATENCY).await;
        let issues: Vec<Value> = (0..HITS)
            .map(|i| json!({"key": format!("OPS-{}", 100 + i), "fields": {"summary": format!("Update the on-call runbook, section {i}"),
                "status": {"name": "In Progress"}, "assignee": {"displayName": "Dana Whitfield"}, "updated": "2026-01-03T09:00:00.000+0000"}}))
            .collect();
        Json(json!({"issues": issues, "isLast": true}))
    });
    let github = get(
        |axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>| async move {
            tokio::time::sleep(LATENCY).await;
            // Five pull requests; the issue search finds none.
            let n = if q["q"].contains("is:pull-request") {
                HITS
            } else {
                0
            };
            let items: Vec<Value> = (0..n)
            .map(|i| json!({"number": 40 + i, "title": format!("Link the on-call runbook from service {i}"), "state": "open",
                "user": {"login": "dana"}, "html_url": format!("https://github.com/acme/infra/pull/{}", 40 + i),
                "repository_url": "https://api.github.com/repos/acme/infra", "body": "Adds the runbook link to the service README.",
                "updated_at": "2026-01-02T08:00:00Z", "pull_request": {"merged_at": null}}))
            .collect();
            Json(json!({"total_count": n, "incomplete_results": false, "items": items}))
        },
    );
    serve(
        Router::new()
            .route("/slack/{method}", slack)
            .route("/notion/v1/search", notion)
            .route("/jira/rest/api/3/search/jql", jira)
            .route("/github/search/issues", github),
    )
    .await
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let samples: usize = std::env::var("SEARCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let base = fakes().await;
    let http = steward::http::client().unwrap();
    let clients = Clients {
        slack: Some(steward::integrations::slack::SlackClient::new(
            http.clone(),
            &format!("{base}/slack"),
            "xoxb-bench",
        )),
        jira: Some(steward::integrations::jira::JiraClient::new(
            http.clone(),
            &format!("{base}/jira"),
            "bot@acme.test",
            "t",
        )),
        notion: Some(steward::integrations::notion::NotionClient::new(
            http.clone(),
            &format!("{base}/notion"),
            "n",
        )),
        github: steward::integrations::github::GithubClient::new(
            http,
            &format!("{base}/github"),
            Some("g".into()),
        ),
        slack_search_user: None,
    };
    let tools =
        steward::integrations::builtin_tools(&clients, steward::http::Egress::new(Default::default()));
    let mut agent = AgentConfig::new(
        "finder",
        ModelRef::parse("openai/gpt-4.1").unwrap(),
        "You find things.",
        vec!["search".into()],
    );
    agent.search = SearchScope {
        slack_channel_types: vec!["public_channel".into()],
        slack_files: false,
        notion_roots: vec!["*".into()],
        jira_projects: vec!["OPS".into()],
        github_repos: vec!["acme/infra".into()],
    };
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        // A search, then an answer, per run.
        let asked = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if asked {
            Reply::ok(openai_text("done"))
        } else {
            Reply::ok(openai_tools(&[(
                "c1",
                "search",
                r#"{"query": "on-call runbook", "sources": ["slack", "notion", "jira", "github"]}"#,
            )]))
        }
    });
    let (_dir, runner) = runner(providers(Some(&fake), None), tools, false).await;
    let mut walls = Vec::new();
    let mut listed = String::new();
    for _ in 0..samples {
        let mut trigger = TriggerEvent::from_cli(json!({"text": "where is the on-call runbook?"}));
        trigger.action_token = Some(ActionToken::new("1.2.bench"));
        let out = runner
            .run(&agent, &trigger, None, CancellationToken::new())
            .await
            .unwrap();
        let events = runner.store.run_events(&out.run_id).await.unwrap();
        let result = events.iter().find(|e| e.kind == "tool_result").unwrap();
        walls.push(result.data["duration_ms"].as_u64().unwrap());
        let last = fake.requests().last().unwrap().body.clone();
        listed = last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap().to_string())
            .unwrap();
    }
    walls.sort_unstable();
    let median = walls[walls.len() / 2];
    let hits = listed.matches("\n- [").count();
    let tokens = TokenCounter::new().count(Encoding::O200k, &listed).tokens;
    println!(
        "search over 4 sources at {} ms each, {samples} runs: median {median} ms (min {}, max {}), {:.2}x the slowest source",
        LATENCY.as_millis(),
        walls[0],
        walls[walls.len() - 1],
        median as f64 / LATENCY.as_millis() as f64
    );
    println!(
        "the {hits}-hit list the model reads: {tokens} tokens ({} bytes)",
        listed.len()
    );
}
