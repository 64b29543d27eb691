//! The `steward improve` gate: 20 cases (19 existing, 1 made from a production run) ×
//! 3 trials × 2 variants (the current tree and the candidate), live against a fake
//! OpenAI server on 127.0.0.1 that takes 200 ms per call, through the real binary.
//!
//! `cargo bench --bench improve_gate`: prints the wall time of each of 3 runs of
//! `steward improve helpdesk --trials 3` (the improver's two calls included) and their
//! median, and the model calls one run makes. Goal (issue #40): under 10 s.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

const EXISTING: usize = 19;
const RUNS: usize = 3;
const LATENCY: Duration = Duration::from_millis(200);
const RUNBOOK: &str = "https://wiki.example.com/runbook";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

fn tree(root: &std::path::Path) {
    write(
        root,
        "prompts/helpdesk.md",
        "You answer IT questions.\nAnswer briefly.\n",
    );
    write(root, "prompts/judge.md", "You grade runs.");
    write(root, "prompts/improver.md", "You improve agents.");
    write(
        root,
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: [current_time]\n",
    );
    write(
        root,
        "subagents/judge.yaml",
        "description: Grades.\nmodel: openai/gpt-4.1-mini\nprompt: prompts/judge.md\ntools: []\n",
    );
    write(
        root,
        "subagents/improver.yaml",
        "description: Proposes fixes.\nmodel: openai/gpt-4.1-nano\nprompt: prompts/improver.md\ntools: []\n",
    );
    for n in 0..EXISTING {
        write(
            root,
            &format!("evals/helpdesk/q{n:02}.yaml"),
            &format!(
                "trigger: {{ text: \"Question {n}: where is the office?\" }}\nexpect: {{ reply: {{ contains: [\"office\"] }} }}\n"
            ),
        );
    }
}

/// Every call takes [`LATENCY`]; answers as in tests/improve.rs.
fn model(fake: &FakeModel) {
    fake.handler(|body| {
        let text: String = body["messages"].as_array().into_iter().flatten().map(|m| m["content"].to_string()).collect();
        let system = body["messages"][0]["content"].as_str().unwrap_or_default().to_string();
        let asked: String = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .collect();
        let answer = match body["model"].as_str().unwrap_or_default() {
            "gpt-4.1-nano" if text.contains("Draft eval expectations") => {
                let runs = text.split("Runs: ").nth(1).unwrap_or_default();
                let runs = runs.split("\\n").next().unwrap_or_default();
                let cases: Vec<Value> = runs
                    .split(", ")
                    .map(|id| json!({"run": id, "criteria": ["The answer links the runbook."], "reply_contains": [RUNBOOK]}))
                    .collect();
                json!({"cases": cases}).to_string()
            }
            "gpt-4.1-nano" => json!({"rationale": "No link.", "edits": [{"file": "prompts/helpdesk.md", "find": "Answer briefly.",
                "replace": format!("Answer briefly. For password questions, link the runbook: {RUNBOOK}")}]})
            .to_string(),
            "gpt-4.1-mini" => {
                let pass = text.split("final answer").last().unwrap_or_default().contains(RUNBOOK);
                format!("{{\"pass\": {pass}, \"score\": {}, \"explanation\": \"x\"}}", u8::from(pass))
            }
            _ if asked.contains("password") && system.contains("link the runbook") => format!("Reset it; see {RUNBOOK}"),
            _ if asked.contains("password") => "Reset it in settings.".into(),
            _ => "The office is on floor 3.".into(),
        };
        Reply::ok(openai_text(&answer)).delay(LATENCY)
    });
}

async fn bench() {
    use steward::store::{Score, ScoreStore, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    tree(root);
    let fake = FakeModel::start().await;
    model(&fake);
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let event = root.join("ev.json");
    std::fs::write(&event, r#"{"text": "How do I reset my password?"}"#).unwrap();
    let o = steward_in_async(
        root,
        &["run", "helpdesk", "--event", event.to_str().unwrap(), "--json"],
        &live,
    )
    .await;
    assert!(o.status.success(), "{}", output_text(&o));
    let id = serde_json::from_slice::<Value>(&o.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let store = SqliteStore::open(&root.join("s.db")).await.unwrap();
    let score = Score {
        kind: "human".into(),
        criterion: "reaction".into(),
        passed: Some(false),
        score: -1.0,
        explanation: Some("no link".into()),
        source: Some("U1".into()),
        cost_usd: 0.0,
        at: chrono::Utc::now(),
    };
    store.add_score(&id, &score).await.unwrap();
    drop(store);

    let mut walls = Vec::new();
    for n in 0..RUNS {
        let before = fake.requests().len();
        let started = Instant::now();
        let o = steward_in_async(
            root,
            &["improve", "helpdesk", "--runs", &id, "--trials", "3", "--json"],
            &live,
        )
        .await;
        let wall = started.elapsed();
        assert!(o.status.success(), "{}", output_text(&o));
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["cases"].as_array().unwrap().len(), EXISTING + 1);
        let calls = fake.requests().len() - before;
        println!(
            "run {}: {:.2} s wall, {calls} model calls at {} ms each",
            n + 1,
            wall.as_secs_f64(),
            LATENCY.as_millis()
        );
        walls.push(wall);
    }
    walls.sort();
    println!(
        "improve gate, {} cases x 3 trials x 2 variants: median {:.2} s (goal: under 10 s)",
        EXISTING + 1,
        walls[RUNS / 2].as_secs_f64()
    );
}
