//! `steward review` at size: 10,000 stored runs of one agent, 1,000 of them with a
//! problem signal (an early end, a failed tool call, a failed judge criterion or a 👎),
//! on SQLite through the release binary (process start included), median of 5 runs.
//! The goal is under 2 s (the reviewer subagent's model calls come on top).
//!
//! Run with `cargo bench --bench review` (`REVIEW_RUNS` sets the count).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use steward::store::{NewRun, RunStatus, RunStore, Score, ScoreStore, SqliteStore};
use steward::types::{Privacy, RunOutcome, Termination};

fn main() {
    let runs: usize = std::env::var("REVIEW_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let started = Instant::now();
    rt.block_on(async {
        let store = SqliteStore::open(&db).await.unwrap();
        for n in 0..runs {
            let id = format!("run-{n:06}");
            store
                .create_run(&NewRun {
                    id: id.clone(),
                    agent: "helpdesk".into(),
                    trigger_summary: "a question".into(),
                    source: "slack".into(),
                    kind: "app_mention".into(),
                    ..NewRun::default()
                })
                .await
                .unwrap();
            store.transition(&id, RunStatus::Queued, RunStatus::Running).await.unwrap();
            // One run in ten has a signal, of four kinds in turn.
            let signal = (n % 10 == 0).then_some((n / 10) % 4);
            let termination = if signal == Some(0) { Termination::MaxTurns } else { Termination::Completed };
            let outcome = RunOutcome {
                termination,
                tool_calls: 2,
                turns: 3,
                ..RunOutcome::new(&id)
            };
            store
                .finish_run(&id, RunStatus::Running, &outcome, Privacy::from_private(false))
                .await
                .unwrap();
            for call in 0..2 {
                let failed = signal == Some(1) && call == 1;
                let result = json!({"name": "http_fetch", "ok": !failed, "call_id": format!("c{call}"),
                    "error": if failed { json!(format!("http_fetch: 50{} from https://wiki.example.com/{n}", n % 4)) } else { json!(null) }});
                store.append_event(&id, "tool_result", &result).await.unwrap();
            }
            if signal == Some(2) || signal == Some(3) {
                let score = Score {
                    kind: if signal == Some(2) { "judge" } else { "human" }.into(),
                    criterion: if signal == Some(2) { "The answer links the runbook." } else { "reaction" }.into(),
                    passed: Some(false),
                    score: 0.1,
                    explanation: None,
                    source: None,
                    cost_usd: 0.0,
                    at: chrono::Utc::now(),
                };
                store.add_score(&id, &score).await.unwrap();
            }
        }
    });
    println!("stored {runs} runs in {:.1} s", started.elapsed().as_secs_f64());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut times = Vec::new();
    let mut out = String::new();
    for _ in 0..5 {
        let t = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_steward"))
            .args([
                "--root",
                root.to_str().unwrap(),
                "review",
                "helpdesk",
                "--since",
                "1d",
                "--json",
            ])
            .env("DATABASE_URL", format!("sqlite://{}", db.display()))
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        times.push(t.elapsed());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out = String::from_utf8_lossy(&o.stdout).into_owned();
    }
    times.sort();
    let median: Duration = times[times.len() / 2];
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    println!(
        "review over {} runs ({} problems, {} signals): median {:.0} ms (min {:.0}, max {:.0})",
        v["runs"],
        v["problems"].as_array().map_or(0, Vec::len),
        v["problems"].as_array().map_or(0, |p| p
            .iter()
            .map(|p| p["runs"].as_u64().unwrap_or(0))
            .sum::<u64>()),
        median.as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0
    );
}
