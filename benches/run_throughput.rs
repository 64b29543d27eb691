//! Run throughput: 1,000 webhook events queued at once on `steward serve` (release
//! binary, SQLite), each starting a 5-turn run of one agent (four `current_time` calls,
//! then an answer) against an OpenAI-compatible model on 127.0.0.1 that takes 200 ms to
//! answer every call. The floor is 5 × 200 ms = 1 s when every run goes at once
//! (`--concurrency 1000 --agent-concurrency 1000`); the goal is a wall time under 2× the
//! floor from the first event posted to the last run finished, with the process's peak
//! RSS (VmHWM) under 500 MB.
//!
//! Run with `cargo bench --bench run_throughput` (`THROUGHPUT_RUNS` sets the count).
//! `THROUGHPUT_DEFAULTS=1` starts `serve` with its default caps instead;
//! `THROUGHPUT_MODEL_LIMIT=200` has the model serve at most 200 calls at once and answer
//! 429 beyond (the limit-bound floor is then runs × 5 × 200 ms / 200).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};

const MODEL_LATENCY: Duration = Duration::from_millis(200);
const TURNS: usize = 5;

/// Calls `current_time` until the conversation holds `TURNS - 1` tool results, then
/// answers; every answer after `MODEL_LATENCY`.
async fn chat(
    axum::extract::State(limit): axum::extract::State<Arc<ModelLimit>>,
    Json(body): Json<Value>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use std::sync::atomic::Ordering;
    limit.calls.fetch_add(1, Ordering::SeqCst);
    if limit.in_flight.fetch_add(1, Ordering::SeqCst) >= limit.allowed {
        limit.in_flight.fetch_sub(1, Ordering::SeqCst);
        limit.refused.fetch_add(1, Ordering::SeqCst);
        let error = json!({"error": {"message": "Rate limit reached for requests", "type": "requests",
            "param": null, "code": "rate_limit_exceeded"}});
        return (axum::http::StatusCode::TOO_MANY_REQUESTS, Json(error)).into_response();
    }
    let answer = answer(body).await;
    limit.in_flight.fetch_sub(1, Ordering::SeqCst);
    answer.into_response()
}

/// How many calls the fake model serves at once, and what it saw.
#[derive(Default)]
struct ModelLimit {
    allowed: usize,
    in_flight: std::sync::atomic::AtomicUsize,
    calls: std::sync::atomic::AtomicUsize,
    refused: std::sync::atomic::AtomicUsize,
}

async fn answer(body: Value) -> Json<Value> {
    tokio::time::sleep(MODEL_LATENCY).await;
    let done = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let usage = json!({"prompt_tokens": 200 + 50 * done, "completion_tokens": 10});
    if done + 1 >= TURNS {
        return Json(json!({
            "id": "chatcmpl-throughput", "object": "chat.completion", "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Noted."}}],
            "usage": usage,
        }));
    }
    Json(json!({
        "id": "chatcmpl-throughput", "object": "chat.completion", "model": "gpt-4.1-mini",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("call_{done}"), "type": "function",
                 "function": {"name": "current_time", "arguments": "{}"}}]}}],
        "usage": usage,
    }))
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A field of `/proc/<pid>/status` in MB (`VmHWM`, `VmRSS`).
fn status_mb(pid: u32, field: &str) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// User + system CPU seconds of process `pid` so far.
fn cpu_secs(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let runs: usize = std::env::var("THROUGHPUT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let model = listener.local_addr().unwrap();
    let allowed: usize = std::env::var("THROUGHPUT_MODEL_LIMIT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    let defaults = std::env::var("THROUGHPUT_DEFAULTS").is_ok_and(|v| v == "1");
    let limit = Arc::new(ModelLimit {
        allowed,
        ..ModelLimit::default()
    });
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(limit.clone());
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });

    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "prompts/burst.md",
        "Note the request; check the time first.",
    );
    write(
        root.path(),
        "agents/burst.yaml",
        "description: Throughput.\nmodel: openai/gpt-4.1-mini\nprompt: prompts/burst.md\ntools: [current_time]\ntriggers:\n  - webhook: { name: burst }\noutput: { reply: false }\n",
    );
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let db = root.path().join("steward.db");
    // THROUGHPUT_CALLGRIND=<file> runs the server under callgrind, for a profile.
    let mut command = match std::env::var("THROUGHPUT_CALLGRIND") {
        Ok(out) => {
            let mut c = std::process::Command::new("valgrind");
            c.args([
                "--tool=callgrind",
                &format!("--callgrind-out-file={out}"),
                env!("CARGO_BIN_EXE_steward"),
            ]);
            c
        }
        Err(_) => std::process::Command::new(env!("CARGO_BIN_EXE_steward")),
    };
    command.args(["serve", "--addr", &addr]);
    if !defaults {
        command.args(["--concurrency", "1000", "--agent-concurrency", "1000"]);
    }
    let mut child = command
        .env("STEWARD_ROOT", root.path())
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("OPENAI_BASE_URL", format!("http://{model}/v1"))
        .env("OPENAI_API_KEY", "sk-bench")
        .env("STEWARD_HOOK_BURST_TOKEN", "burst-token")
        .env("RUST_LOG", "error")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .spawn()
        .unwrap();
    let pid = child.id();

    rt.block_on(async {
        steward::http::install_crypto_provider();
        let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
        let url = format!("http://{addr}/hooks/burst");
        for _ in 0..1200 {
            if client.get(format!("http://{addr}/healthz")).send().await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let rss_idle = status_mb(pid, "VmRSS:");
        let cpu_before = cpu_secs(pid);
        let started = Instant::now();
        let first_post = chrono::Utc::now();
        let mut posts = Vec::new();
        for chunk in (0..runs).collect::<Vec<_>>().chunks(runs.div_ceil(50)) {
            let (client, url, chunk) = (client.clone(), url.clone(), chunk.to_vec());
            posts.push(tokio::spawn(async move {
                for i in chunk {
                    let r = client
                        .post(&url)
                        .bearer_auth("burst-token")
                        .header("idempotency-key", format!("burst-{i}"))
                        .body(format!("{{\"text\": \"request {i}\"}}"))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 200);
                }
            }));
        }
        for p in posts {
            p.await.unwrap();
        }
        let queued = started.elapsed();
        // Count finished runs as they end (WAL: readers never block). One count query,
        // not a read of every row: the poll shares the two cores with the server.
        let store = steward::store::SqliteStore::open(&db).await.unwrap();
        use steward::store::RunStore;
        let counter = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect(&format!("sqlite://{}?mode=ro", db.display()))
            .await
            .unwrap();
        let finished = loop {
            let done: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM runs WHERE status NOT IN ('queued', 'running', 'waiting')",
            )
            .fetch_one(&counter)
            .await
            .unwrap();
            let done = done as usize;
            if done >= runs {
                break started.elapsed();
            }
            if started.elapsed() > Duration::from_secs(600) {
                panic!("only {done} of {runs} runs finished in 10 minutes");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let rows = store.list_runs(runs as u32 + 10).await.unwrap();
        // Succeeded after all its turns: the runs really went through the model 5 times.
        let completed = rows
            .iter()
            .filter(|r| r.status == steward::store::RunStatus::Succeeded && r.turns as usize == TURNS)
            .count();
        // With a model limit, the floor is the limit's: every call at the limit's pace.
        let floor = match allowed {
            usize::MAX => MODEL_LATENCY * TURNS as u32,
            n => (MODEL_LATENCY * TURNS as u32).mul_f64((runs as f64 / n as f64).max(1.0)),
        };
        let (calls, refused) = (
            limit.calls.load(std::sync::atomic::Ordering::SeqCst),
            limit.refused.load(std::sync::atomic::Ordering::SeqCst),
        );
        println!(
            "settings: {}; model limit: {}; model calls {calls}, refused (429) {refused} ({:.1}%)",
            if defaults { "serve's defaults" } else { "--concurrency 1000 --agent-concurrency 1000" },
            if allowed == usize::MAX { "none".to_string() } else { format!("{allowed} at once") },
            100.0 * refused as f64 / calls.max(1) as f64,
        );
        // Where the time went: when runs were routed (created), started and finished,
        // counted from the first post, and how long each run took from start to end.
        let at = |t: chrono::DateTime<chrono::Utc>| (t - first_post).num_milliseconds() as f64 / 1000.0;
        let spread = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let q = |p: f64| v.get(((v.len() as f64 - 1.0) * p) as usize).copied().unwrap_or(0.0);
            format!("first {:.2} s, median {:.2} s, last {:.2} s", q(0.0), q(0.5), q(1.0))
        };
        println!("runs created: {}", spread(rows.iter().map(|r| at(r.created_at)).collect()));
        let mut buckets = [0usize; 40];
        for r in &rows {
            let b = ((at(r.created_at) * 10.0) as usize).min(39);
            buckets[b] += 1;
        }
        println!("created per 100 ms: {buckets:?}");
        println!(
            "runs started: {}",
            spread(rows.iter().filter_map(|r| r.started_at.map(at)).collect())
        );
        println!(
            "runs finished: {}",
            spread(rows.iter().filter_map(|r| r.finished_at.map(at)).collect())
        );
        println!(
            "run durations: {}",
            spread(
                rows.iter()
                    .filter_map(|r| Some((r.finished_at? - r.started_at?).num_milliseconds() as f64 / 1000.0))
                    .collect()
            )
        );
        println!(
            "{runs} runs of {TURNS} turns, model latency {} ms: all queued in {:.2} s, all finished in {:.2} s ({:.2}× the {:.1} s floor); {completed} succeeded after {TURNS} turns",
            MODEL_LATENCY.as_millis(),
            queued.as_secs_f64(),
            finished.as_secs_f64(),
            finished.as_secs_f64() / floor.as_secs_f64(),
            floor.as_secs_f64(),
        );
        println!(
            "steward serve RSS: {:.1} MB idle, peak {:.1} MB (VmHWM); CPU {:.2} s for the burst",
            rss_idle,
            status_mb(pid, "VmHWM:"),
            cpu_secs(pid) - cpu_before
        );
        assert_eq!(completed, runs, "every run succeeded after {TURNS} turns");
    });
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();
}
