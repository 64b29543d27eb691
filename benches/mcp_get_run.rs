//! `get_run` over MCP: a coding agent reading one 100-step run through `steward mcp`
//! (stdio, rmcp's client), from a real SQLite store. The run has 100 tool calls with
//! their results (2 KB each) and 50 model responses, as a long run records them.
//!
//! `cargo bench --bench mcp_get_run`: prints the median and 90th percentile of 50 calls
//! after one warm-up call. Goal (issue #40): under 50 ms.

use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use steward::store::{NewEvent, NewRun, RunStatus, RunStore, SqliteStore};

const CALLS: usize = 50;
const STEPS: usize = 100;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn seed(db: &std::path::Path) -> String {
    let store = SqliteStore::open(db).await.unwrap();
    let id = "0196bench-0000-7000-8000-000000000100".to_string();
    store
        .create_run(&NewRun {
            id: id.clone(),
            agent: "helpdesk".into(),
            trigger_summary: "a long investigation".into(),
            source: "slack".into(),
            kind: "app_mention".into(),
            ..NewRun::default()
        })
        .await
        .unwrap();
    store
        .transition(&id, RunStatus::Queued, RunStatus::Running)
        .await
        .unwrap();
    let now = chrono::Utc::now();
    let mut events = vec![NewEvent {
        at: now,
        kind: "run_started".into(),
        data: json!({"agent": "helpdesk", "trigger": json!({"text": "why is the VPN down?"}).to_string()})
            .to_string(),
    }];
    let page = "The runbook says: restart the tunnel, then check the keepalive. ".repeat(32);
    for step in 0..STEPS {
        let call_id = format!("call_{step}");
        if step % 2 == 0 {
            events.push(NewEvent {
                at: now,
                kind: "model_response".into(),
                data: json!({"text": null, "stop_reason": "tool_calls", "response_model": "gpt-4.1",
                    "tool_calls": [{"id": call_id, "name": "http_fetch", "arguments": "{\"url\":\"https://wiki.example.com/vpn\"}"}],
                    "usage": {"input_tokens": 12000 + step * 300, "output_tokens": 80},
                    "duration_ms": 900})
                .to_string(),
            });
        }
        events.push(NewEvent {
            at: now,
            kind: "tool_call".into(),
            data: json!({"call_id": call_id, "name": "http_fetch",
                "arguments": "{\"url\":\"https://wiki.example.com/vpn\"}", "side_effect": false})
            .to_string(),
        });
        events.push(NewEvent {
            at: now,
            kind: "tool_result".into(),
            data: json!({"call_id": call_id, "name": "http_fetch", "ok": true, "bytes": page.len(),
                "duration_ms": 120, "content": page})
            .to_string(),
        });
    }
    store.append_events(&id, &events).await.unwrap();
    id
}

async fn bench() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let id = seed(&db).await;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    cmd.arg("mcp")
        .env("STEWARD_ROOT", env!("CARGO_MANIFEST_DIR"))
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("RUST_LOG", "error");
    let client = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let call = || {
        let request = CallToolRequestParams::new("get_run")
            .with_arguments(json!({"id": &id[..12]}).as_object().cloned().unwrap());
        client.call_tool(request)
    };
    let first = call().await.unwrap();
    let text = first.content[0].as_text().unwrap().text.clone();
    assert!(
        text.len() > STEPS * 1000,
        "the whole run comes back ({} bytes)",
        text.len()
    );
    let mut took: Vec<Duration> = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let result = call().await.unwrap();
        took.push(started.elapsed());
        assert_ne!(result.is_error, Some(true));
    }
    took.sort();
    println!(
        "get_run over MCP (stdio), {STEPS}-step run, {} KB answer: median {:.1} ms, p90 {:.1} ms over {CALLS} calls",
        text.len() / 1024,
        took[CALLS / 2].as_secs_f64() * 1000.0,
        took[CALLS * 9 / 10].as_secs_f64() * 1000.0
    );
    client.cancel().await.unwrap();
}
