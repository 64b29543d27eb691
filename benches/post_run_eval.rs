//! The judge's prompt for a post-run eval of a 20-turn run: each turn fetched an 8 KB
//! page (the event log keeps the first 16 KB of each result, so the transcript holds
//! them). Counts o200k tokens of the judge's system prompt plus its question, with the
//! transcript inline against as a virtual file (what steward does past 6,000
//! characters). Goal: under 5,000 tokens.
//!
//! Run with `cargo bench --bench post_run_eval`.

use chrono::Utc;
use serde_json::json;
use steward::evals::judge::{self, Material};
use steward::store::StoredEvent;
use steward::tokens::{Encoding, TokenCounter};
use steward::triggers::TriggerEvent;

const TURNS: usize = 20;
const PAGE_BYTES: usize = 8 * 1024;

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let system = [
        std::fs::read_to_string(root.join("prompts/subagents/judge.md")).unwrap_or_default(),
        std::fs::read_to_string(root.join("prompts/harness.md")).unwrap_or_default(),
    ]
    .join("\n\n");
    let page =
        "Quarterly report: revenue grew 12.4% to 3.1 M EUR; churn fell to 2.1%. ".repeat(PAGE_BYTES / 72);
    let mut events = Vec::new();
    for turn in 0..TURNS {
        let event = |kind: &str, data: serde_json::Value| StoredEvent {
            seq: events_len(turn, kind),
            run_id: "r".into(),
            at: Utc::now(),
            kind: kind.into(),
            data,
        };
        events.push(event(
            "tool_call",
            json!({"name": "http_fetch", "arguments": format!("{{\"url\": \"https://intranet.example.com/reports/{turn}\"}}")}),
        ));
        events.push(event(
            "tool_result",
            json!({"name": "http_fetch", "ok": true, "content": page}),
        ));
    }
    let trigger = TriggerEvent::from_cli(json!({"text": "Summarize the last 20 quarterly reports."}));
    let transcript = judge::transcript(&trigger, &events, Some("Revenue grew every quarter; churn fell."));
    let counter = TokenCounter::new();
    let count = |text: &str| counter.count(Encoding::O200k, text).tokens;
    let criterion = "The answer quotes the numbers exactly as the reports state them.";
    let system_tokens = count(&system);
    let mut inline = Material::new(transcript.clone());
    inline.as_file = false;
    let as_file = Material::new(transcript.clone());
    println!(
        "{TURNS}-turn run: transcript {} characters, {} tokens",
        transcript.chars().count(),
        count(&transcript)
    );
    println!("judge system prompt: {system_tokens} tokens");
    // An attached file's first `files.preload_bytes` (8 KB unless the judge sets it)
    // go into the first message.
    let preload = steward::tokens::floor_char(&transcript, 8192).to_string();
    for (name, material) in [("inline", &inline), ("as a file (steward's choice)", &as_file)] {
        let question = judge::question(criterion, material);
        let preloaded = if material.as_file { count(&preload) } else { 0 };
        println!(
            "judge prompt, transcript {name}: {} tokens (system {system_tokens} + question {} + preloaded file start {preloaded})",
            system_tokens + count(&question) + preloaded,
            count(&question)
        );
    }
}

fn events_len(turn: usize, kind: &str) -> i64 {
    (turn * 2 + usize::from(kind == "tool_result")) as i64
}
