//! The shipped eval suite (`evals/`): every case of every shipped agent replays green
//! from its cassette, with no key and no network, and gives the same result every time.
//!
//! The cassettes were recorded by `record_shipped_cassettes` below against a scripted
//! stand-in model on 127.0.0.1 (these machines cannot reach a real model). To record
//! against real models instead: `steward eval --record` with `OPENAI_API_KEY` and
//! `ANTHROPIC_API_KEY` set. To re-record with the stand-in after changing a prompt:
//! `cargo test --test shipped_evals -- --ignored record_shipped_cassettes`.

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use support::*;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

async fn eval(args: &[&str], env: &[(&str, &str)]) -> Output {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_steward"));
        cmd.arg("eval")
            .args(&args)
            .env("STEWARD_ROOT", repo())
            .env_remove("OPENAI_API_KEY")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL")
            .env("RUST_LOG", "error");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    })
    .await
    .unwrap()
}

/// The result without wall-clock latencies.
fn stable(out: &Output) -> Value {
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    for case in v["cases"].as_array_mut().unwrap() {
        for trial in case["results"].as_array_mut().unwrap() {
            trial.as_object_mut().unwrap().remove("latency_ms");
        }
    }
    v
}

#[tokio::test]
async fn the_shipped_suite_replays_green_and_identically() {
    let first = eval(&["--json"], &[]).await;
    let report = stable(&first);
    let failed: Vec<&Value> = report["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] != true)
        .collect();
    assert!(failed.is_empty(), "failing shipped cases: {failed:#?}");
    // At least three cases for every shipped agent.
    for agent in [
        "page-summarizer",
        "helpdesk",
        "jira-from-thread",
        "doc-review",
        "pr-merged",
    ] {
        let n = report["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["agent"] == agent)
            .count();
        assert!(n >= 3, "{agent} has {n} cases");
    }
    // 20 consecutive replays, one result.
    for _ in 1..20 {
        assert_eq!(stable(&eval(&["--json"], &[]).await), report);
    }
}

/// Text of an OpenAI or Anthropic request's system prompt.
fn system_of(body: &Value, anthropic: bool) -> String {
    if anthropic {
        match &body["system"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
            _ => String::new(),
        }
    } else {
        body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Tool results so far, in order.
fn results_of(body: &Value, anthropic: bool) -> Vec<String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    if anthropic {
        messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .map(|b| match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect()
    } else {
        messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

/// The person's message in the trigger prompt (`Message:` up to the payload).
fn trigger_message(body: &Value) -> String {
    for m in body["messages"].as_array().into_iter().flatten() {
        let text = match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
            _ => continue,
        };
        if let Some(rest) = text.strip_prefix("Trigger:")
            && let Some(start) = rest.find("Message:\n")
        {
            let rest = &rest[start + "Message:\n".len()..];
            return rest.split("\nEvent payload").next().unwrap_or(rest).to_string();
        }
    }
    String::new()
}

/// A scripted stand-in for the shipped agents' models, in both wire formats.
fn stand_in(body: &Value) -> Reply {
    let anthropic = body.get("system").is_some();
    let system = system_of(body, anthropic);
    let conversation = body["messages"].to_string();
    let results = results_of(body, anthropic);
    let say = |text: &str| {
        Reply::ok(if anthropic {
            anthropic_text(text)
        } else {
            openai_text(text)
        })
    };
    let call = |calls: &[(&str, &str, Value)]| {
        Reply::ok(if anthropic {
            anthropic_tools(calls)
        } else {
            let args: Vec<(String, String, String)> = calls
                .iter()
                .map(|(id, n, a)| (id.to_string(), n.to_string(), a.to_string()))
                .collect();
            let refs: Vec<(&str, &str, &str)> = args
                .iter()
                .map(|(i, n, a)| (i.as_str(), n.as_str(), a.as_str()))
                .collect();
            openai_tools(&refs)
        })
    };
    if conversation.contains("Grade an automated agent's run") {
        return say(
            "{\"pass\": true, \"score\": 0.9, \"explanation\": \"The final answer does what the criterion asks, as the transcript shows.\"}",
        );
    }
    if system.contains("# Router") {
        // The thread, not the project menu before it.
        let thread = conversation.split("Thread:").nth(1).unwrap_or_default();
        let project = if thread.contains("checkout") || thread.contains("website") {
            "WEB"
        } else if thread.contains("dashboard") || thread.contains("export") {
            "DATA"
        } else {
            "I am not sure which project owns this."
        };
        return say(project);
    }
    if system.contains("# Page summarizer") {
        let url = regex::Regex::new(r"https://[^\s\\\x22]+")
            .unwrap()
            .find(&conversation)
            .map(|m| m.as_str().to_string());
        return match (url, results.as_slice()) {
            (None, _) => say("Please send me a link (URL) to the page you want summarized."),
            (Some(url), []) => call(&[
                ("call_1", "http_fetch", json!({ "url": url })),
                ("call_2", "current_time", json!({})),
            ]),
            (Some(url), [page, ..]) if page.starts_with("error") => say(&format!(
                "I could not fetch {url}: {}. I have not guessed its content.",
                page.trim_start_matches("error: ")
            )),
            (Some(url), [page, ..]) => {
                let lines: Vec<&str> = page.lines().filter(|l| !l.trim().is_empty()).collect();
                let bullets: Vec<String> = lines.iter().skip(1).map(|l| format!("- {l}")).collect();
                say(&format!(
                    "{}.\n{}\nRead on 2026-01-05 from {url}",
                    lines.first().unwrap_or(&""),
                    bullets.join("\n")
                ))
            }
        };
    }
    if system.contains("# Helpdesk") {
        // Only the person's message counts (the formatting skill has links of its own).
        let asked = trigger_message(body);
        let url = regex::Regex::new(r"https://[^\s\\\x22?>]+")
            .unwrap()
            .find(&asked)
            .map(|m| m.as_str().to_string());
        return match (url, results.as_slice()) {
            // A "where is" question is searched first, and the answer cites what it found.
            (None, []) if asked.contains("where is") => {
                call(&[("call_search01", "search", json!({ "query": "on-call runbook" }))])
            }
            (None, [found, ..]) if asked.contains("where is") => say(&format!(
                "The on-call runbook is in Notion under Operations: <{}|On-call runbook>. Dana noted in #ops that the old wiki page redirects there.",
                regex::Regex::new(r"https://www\.notion\.so/[^)\s]+")
                    .unwrap()
                    .find(found)
                    .map_or("", |m| m.as_str())
            )),
            (Some(url), []) => call(&[("call_1", "http_fetch", json!({ "url": url }))]),
            (Some(_), [page, ..]) => say(&format!("The handbook says: {page}")),
            (None, _) if asked.contains("freeze") => say(
                "The deploy freeze runs from Friday 15:00 to Monday 09:00; outside it, deploys need a green pipeline. I will not repeat credentials here: please rotate the token you pasted.",
            ),
            (None, _) => say(
                "To reset your VPN password: 1. open https://vpn.example.com/reset, 2. confirm with your SSO login, 3. reconnect. If that fails, ask in #it-help.",
            ),
        };
    }
    if system.contains("# Design doc review") {
        // The page id follows "entity" in the trigger's payload (JSON inside JSON).
        let page = regex::Regex::new(
            r"entity.{0,60}?([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
        )
        .unwrap()
        .captures(&conversation)
        .map(|c| c[1].to_string())
        .unwrap_or_default();
        return match results.as_slice() {
            [] => call(&[
                ("call_1", "notion_get_page", json!({ "page_id": page })),
                ("call_2", "notion_read_page", json!({ "page_id": page })),
            ]),
            all if all.iter().all(|r| r.starts_with("error")) => say(
                "I could not read this page: the integration has no access to it. Share the page with the integration and move it to Ready for review again.",
            ),
            all if all.iter().any(|r| r.contains("## Rollout")) => say(
                "Strong: the problem is stated with numbers, and the decision explains why a token bucket fits bursts. Also strong: the risks come with a mitigation. Most important change before approval: none blocking; document how per-key overrides are requested.",
            ),
            _ => say(
                "Strong: the problem statement quantifies the load (40% of write IOPS). Missing: there is no rollout plan, and the failover risk has no mitigation beyond re-login. Most important change before approval: add a rollout plan (shadow traffic, staged percentages, rollback).",
            ),
        };
    }
    say("(the stand-in model has no script for this request)")
}

#[tokio::test]
#[ignore = "rewrites evals/cassettes/; run on purpose after changing prompts or cases"]
async fn record_shipped_cassettes() {
    let fake = FakeModel::start().await;
    fake.handler(stand_in);
    let openai = format!("{}/v1", fake.url);
    let out = eval(
        &["--record", "--json"],
        &[
            ("OPENAI_BASE_URL", &openai),
            ("OPENAI_API_KEY", "sk-stand-in"),
            ("ANTHROPIC_BASE_URL", &fake.url),
            ("ANTHROPIC_API_KEY", "sk-ant-stand-in"),
        ],
    )
    .await;
    let report = stable(&out);
    assert_eq!(report["passed"], true, "{report:#}");
}
