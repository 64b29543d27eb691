//! `pr-merged` over 200 messages against fake Slack and GitHub servers: the Rhai script
//! coordinator versus an LLM-coordinated version of the same workflow against the fake
//! model server (which answers instantly and plays a perfect model). Reports wall time,
//! turns and prompt tokens.
//!
//! Run with `cargo bench --bench pr_merged`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Path as UrlPath, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use steward::config::{AgentConfig, Config, Known};
use steward::integrations::github::GithubClient;
use steward::integrations::slack::SlackClient;
use steward::tokens::{Encoding, TokenCounter};
use steward::tools::ToolRegistry;
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::*;
use tokio_util::sync::CancellationToken;

type Messages = Arc<Mutex<Vec<Value>>>;

fn messages() -> Vec<Value> {
    (0..200)
        .map(|i| {
            let text = match i % 5 {
                0 => "Standup notes: nothing blocking".to_string(),
                1 => format!("Two PRs: https://github.com/acme/web/pull/{} and https://github.com/acme/web/pull/{}", i, i + 1000),
                _ => format!("Please review https://github.com/acme/web/pull/{i} when you have a minute"),
            };
            json!({"type": "message", "user": "U123ABC456", "text": text, "ts": format!("1700000000.{i:06}"), "reactions": []})
        })
        .collect()
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

async fn fakes(msgs: Messages) -> (String, String) {
    let slack = Router::new()
        .route(
            "/conversations.history",
            get(|State(m): State<Messages>| async move {
                Json(json!({"ok": true, "messages": *m.lock().unwrap()}))
            }),
        )
        .route(
            "/reactions.add",
            post(|State(m): State<Messages>, Json(b): Json<Value>| async move {
                let mut msgs = m.lock().unwrap();
                if let Some(msg) = msgs.iter_mut().find(|x| x["ts"] == b["timestamp"]) {
                    msg["reactions"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"name": b["name"], "count": 1}));
                }
                Json(json!({"ok": true}))
            }),
        )
        .with_state(msgs);
    let github = Router::new().route(
        "/repos/{o}/{r}/pulls/{n}",
        get(|UrlPath((_o, _r, n)): UrlPath<(String, String, u64)>| async move {
            let merged = n % 3 == 0;
            Json(json!({"number": n, "state": if merged || n % 3 == 1 { "closed" } else { "open" }, "merged": merged, "title": "PR"}))
        }),
    );
    (serve(slack).await, serve(github).await)
}

fn registry(slack: &str, github: &str) -> ToolRegistry {
    let http = steward::http::client().unwrap();
    let mut reg = ToolRegistry::core(Default::default());
    for t in steward::integrations::tools::integration_tools(
        Some(SlackClient::new(http.clone(), slack, "xoxb")),
        GithubClient::new(http, github, None),
    ) {
        reg.register(t);
    }
    for t in steward::integrations::tools::notion_tools(None) {
        reg.register(t);
    }
    reg
}

/// A perfect model for the LLM version: history, then every PR lookup in one turn, then
/// every reaction in one turn, then the answer.
fn perfect_model(body: &Value) -> Reply {
    let msgs = body["messages"].as_array().unwrap();
    let tool_results: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    let call = |id: String, name: &str, args: Value| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}});
    let calls: Vec<Value> = match tool_results.len() {
        0 => vec![call(
            "h".into(),
            "slack_channel_history",
            json!({"channel": "C0PRREVIEW", "limit": 200}),
        )],
        1 => {
            let history: Value = serde_json::from_str(tool_results[0]["content"].as_str().unwrap()).unwrap();
            let re = regex::Regex::new(r"https://github\.com/[\w.-]+/[\w.-]+/pull/\d+").unwrap();
            history["messages"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    let urls: std::collections::BTreeSet<&str> = re
                        .find_iter(m["text"].as_str().unwrap())
                        .map(|x| x.as_str())
                        .collect();
                    (urls.len() == 1).then(|| {
                        call(
                            format!("g{i}_{}", m["ts"].as_str().unwrap().replace('.', "_")),
                            "github_pr_state",
                            json!({"url": urls.first().unwrap()}),
                        )
                    })
                })
                .collect()
        }
        n if tool_results.last().unwrap()["tool_call_id"]
            .as_str()
            .unwrap()
            .starts_with('g') =>
        {
            let _ = n;
            tool_results
                .iter()
                .filter(|t| t["tool_call_id"].as_str().unwrap().starts_with('g'))
                .filter_map(|t| {
                    let v: Value = serde_json::from_str(t["content"].as_str().unwrap()).unwrap();
                    let ts = t["tool_call_id"]
                        .as_str()
                        .unwrap()
                        .split_once('_')
                        .unwrap()
                        .1
                        .replacen('_', ".", 1);
                    (v["state"] != "open").then(|| {
                        call(
                            format!("r{ts}"),
                            "slack_add_reaction",
                            json!({"channel": "C0PRREVIEW", "ts": ts, "name": "merged"}),
                        )
                    })
                })
                .collect()
        }
        _ => vec![],
    };
    if calls.is_empty() {
        return Reply::ok(openai_text("Marked the merged pull requests."));
    }
    Reply::ok(openai_message(
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
        "tool_calls",
        0,
        0,
    ))
}

fn main() {
    steward::http::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let counter = TokenCounter::new();

        // Script coordinator.
        let msgs: Messages = Arc::new(Mutex::new(messages()));
        let (slack, github) = fakes(msgs.clone()).await;
        let reg = registry(&slack, &github);
        let config = Config::load(root, &Known { tools: reg.names(), skills: steward::skills::SkillSet::load(root, &[]).names() }).unwrap();
        let fake = FakeModel::start().await;
        let (_d, script_runner) = runner(providers(Some(&fake), None), reg, false).await;
        let agent = config.agent("pr-merged").unwrap();
        let started = Instant::now();
        let out = script_runner.run(&agent, &TriggerEvent::from_cli(json!({})), None, CancellationToken::new()).await.unwrap();
        let script_ms = started.elapsed().as_secs_f64() * 1e3;
        let marked = msgs.lock().unwrap().iter().filter(|m| !m["reactions"].as_array().unwrap().is_empty()).count();
        println!(
            "script  : {script_ms:.0} ms, {} tool calls, {} model requests, {} prompt tokens, {marked} messages marked ({:?})",
            out.tool_calls,
            fake.requests().len(),
            out.usage.input_tokens,
            out.termination
        );

        // LLM coordinator, same tools, perfect instant model.
        let msgs: Messages = Arc::new(Mutex::new(messages()));
        let (slack, github) = fakes(msgs.clone()).await;
        let fake = FakeModel::start().await;
        fake.handler(perfect_model);
        let (_d2, llm_runner) = runner(providers(Some(&fake), None), registry(&slack, &github), false).await;
        let mut llm = AgentConfig::new(
            "pr-merged-llm",
            ModelRef::parse("openai/gpt-4.1").unwrap(),
            "In channel C0PRREVIEW, add the :merged: reaction to every message with exactly one GitHub pull request URL whose PR is merged or closed and not yet reacted.",
            vec!["slack_channel_history".into(), "github_pr_state".into(), "slack_add_reaction".into()],
        );
        llm.limits.max_tool_calls = 500;
        llm.context.file_threshold_tokens = 500_000;
        let started = Instant::now();
        let out = llm_runner.run(&llm, &TriggerEvent::from_cli(json!({})), None, CancellationToken::new()).await.unwrap();
        let llm_ms = started.elapsed().as_secs_f64() * 1e3;
        let prompt_tokens: u64 = fake
            .requests()
            .iter()
            .map(|r| {
                let text: String = r.body["messages"].as_array().unwrap().iter().map(|m| format!("{}{}", m["content"].as_str().unwrap_or_default(), m["tool_calls"])).collect();
                counter.count(Encoding::O200k, &text).tokens + counter.count(Encoding::O200k, &r.body["tools"].to_string()).tokens
            })
            .sum();
        let marked = msgs.lock().unwrap().iter().filter(|m| !m["reactions"].as_array().unwrap().is_empty()).count();
        println!(
            "llm     : {llm_ms:.0} ms with an instant model, {} turns, {} tool calls, {prompt_tokens} prompt tokens, {marked} messages marked ({:?})",
            out.turns, out.tool_calls, out.termination
        );
        println!("  (a real model adds seconds per turn and costs money per token; the script spends zero tokens)");
    });
}
