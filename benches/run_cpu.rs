//! Per-turn harness CPU, end to end as a user runs it: `steward run` (the release
//! binary) against an OpenAI-compatible model server on 127.0.0.1 that answers at once,
//! with a tool that fetches a 4 KB page over HTTP every turn, SQLite on. The CPU time
//! (user + system) of the steward process is measured for runs of 10, 50 and 110 turns;
//! the per-turn cost is the slope between them, so start-up and config loading cancel
//! out (start-up is ~25 ms of CPU, most of it loading the system's root certificates).
//! 10 → 50 is the figure the re-layering issue names; 10 → 110 also shows how the cost
//! grows with the conversation (each request carries the whole history).
//! Runs of different lengths are interleaved so drift on a shared machine hits all.
//!
//! Run with `cargo bench --bench run_cpu`. Prints medians of 21 runs each. With
//! `RUN_CPU_OTLP=1` every run also exports its traces to a receiver on the bench server;
//! `RUN_CPU_OTLP=compare` interleaves runs with and without export and prints both.
//!
//! The CPU figures include the kernel's TCP work, which on a shared VM varies with the
//! host's load by 2× between sessions. `RUN_CPU_INSTRUCTIONS=1` runs each `steward run`
//! under `valgrind --tool=callgrind` instead and reports user-space instructions (all
//! threads): repeatable for the same binary whatever the machine is doing, so one round
//! is enough and small differences (OTLP export on against off) are visible.
//!
//! Under valgrind a model call that the fake answers at once still takes long enough
//! to cross the harness's 200 ms write-while-waiting point on some turns and not others,
//! depending on what else the process does (an export thread slows the run thread under
//! valgrind's one-thread-at-a-time scheduling). So in instruction mode the fake model
//! answers after `RUN_CPU_MODEL_MS` (default 300 ms), as a real model would: every turn
//! writes its events while waiting, in both configurations alike. Each configuration
//! also has its own database, so neither leaves the other a different WAL to read.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::{get, post};
use serde_json::{Value, json};

const PAGE_BYTES: usize = 4096;
const ROUNDS: usize = 21;
const TURNS: [usize; 3] = [10, 50, 110];

/// Answers with an `http_fetch` call until the conversation holds as many tool results
/// as the model name asks for (`turns-10`), then with a final text.
async fn chat(State((page_url, delay)): State<(String, Duration)>, Json(body): Json<Value>) -> Json<Value> {
    tokio::time::sleep(delay).await;
    let model = body["model"].as_str().unwrap_or_default().to_string();
    let want: usize = model.trim_start_matches("turns-").parse().unwrap_or(1);
    let done = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let usage = json!({"prompt_tokens": 1000 + 1100 * done, "completion_tokens": 20});
    if done + 1 >= want {
        return Json(json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "All pages fetched."}}],
            "usage": usage,
        }));
    }
    let args = json!({ "url": format!("{page_url}?n={done}") }).to_string();
    Json(json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("call_{done}"), "type": "function",
                 "function": {"name": "http_fetch", "arguments": args}}]}}],
        "usage": usage,
    }))
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// CPU time of children this process has waited for, in seconds.
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// One `steward run` of `agent`; returns its CPU seconds, or with `instructions` the
/// user-space instructions valgrind counted.
fn run_once(root: &Path, agent: &str, base: &str, db: &Path, otlp: bool, instructions: bool) -> f64 {
    let before = children_cpu();
    let mut cmd = if instructions {
        let mut c = Command::new("valgrind");
        // RUN_CPU_CALLGRIND_OUT keeps the profile (the last run's) for callgrind_annotate.
        let out = std::env::var("RUN_CPU_CALLGRIND_OUT").unwrap_or_else(|_| "/dev/null".into());
        c.args([
            "--tool=callgrind",
            &format!("--callgrind-out-file={out}"),
            env!("CARGO_BIN_EXE_steward"),
        ]);
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_steward"))
    };
    // With `otlp`, traces go to the receiver on the bench server.
    if otlp {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", base.trim_end_matches("/v1"));
    } else {
        cmd.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    }
    let out = cmd
        .args(["run", agent, "--event", root.join("event.json").to_str().unwrap()])
        .env("STEWARD_ROOT", root)
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("OPENAI_BASE_URL", base)
        .env("OPENAI_API_KEY", "sk-bench")
        .env("STEWARD_HTTP_ALLOW", "127.0.0.1")
        // `steward run` logs errors only by default; RUN_CPU_LOG=warn,steward=info is
        // what `steward serve` runs with, where steward's spans exist for log lines
        // whether or not they are exported.
        .env(
            "RUST_LOG",
            std::env::var("RUN_CPU_LOG").unwrap_or_else(|_| "error".into()),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "steward run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "All pages fetched.");
    if instructions {
        // "==123== Collected : 456789"
        let stderr = String::from_utf8_lossy(&out.stderr);
        return stderr
            .lines()
            .find_map(|l| l.split("Collected : ").nth(1))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no instruction count from valgrind: {stderr}"));
    }
    children_cpu() - before
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let instructions = std::env::var("RUN_CPU_INSTRUCTIONS").is_ok_and(|v| v == "1");
    let model_delay = Duration::from_millis(
        std::env::var("RUN_CPU_MODEL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if instructions { 300 } else { 0 }),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let page: String = "steward benchmark page. ".repeat(PAGE_BYTES / 24 + 1)[..PAGE_BYTES].to_string();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/page", get(move || async move { page.clone() }))
        .route("/v1/traces", post(|| async { "" }))
        .with_state((format!("http://{addr}/page"), model_delay));
    rt.spawn(async move { axum::serve(listener, app).await.unwrap() });

    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "prompts/bench.md",
        "Fetch the pages you are asked to.",
    );
    write(
        root.path(),
        "event.json",
        r#"{"text": "Fetch the benchmark pages."}"#,
    );
    for turns in TURNS {
        write(
            root.path(),
            &format!("agents/bench-{turns}.yaml"),
            &format!(
                "description: Benchmark.\nmodel: openai/turns-{turns}\nprompt: prompts/bench.md\ntools: [http_fetch]\nlimits: {{ max_turns: 200, max_tool_calls: 200 }}\ncontext: {{ window_tokens: 1000000 }}\noutput: {{ reply: true }}\n"
            ),
        );
    }
    let base = format!("http://{addr}/v1");
    // Warm up: first start creates the database and pages the binary in.
    let db_for = |otlp: bool| {
        root.path()
            .join(if otlp { "steward-otlp.db" } else { "steward.db" })
    };
    run_once(root.path(), "bench-10", &base, &db_for(false), false, false);
    run_once(root.path(), "bench-10", &base, &db_for(true), false, false);
    // RUN_CPU_ROUNDS=1 makes a short run to profile (perf record -g).
    let rounds: usize = std::env::var("RUN_CPU_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if instructions { 1 } else { ROUNDS });
    // RUN_CPU_OTLP=1 exports every run's traces; =compare interleaves runs with and
    // without export and prints both, so drift on a shared machine hits both alike.
    let mode = std::env::var("RUN_CPU_OTLP").unwrap_or_default();
    let configs: &[bool] = match mode.as_str() {
        "1" => &[true],
        "compare" => &[false, true],
        _ => &[false],
    };
    let mut samples: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); TURNS.len()]; configs.len()];
    for _ in 0..rounds {
        for (i, turns) in TURNS.iter().enumerate() {
            for (c, &otlp) in configs.iter().enumerate() {
                let agent = format!("bench-{turns}");
                samples[c][i].push(run_once(
                    root.path(),
                    &agent,
                    &base,
                    &db_for(otlp),
                    otlp,
                    instructions,
                ));
            }
        }
    }
    for (c, &otlp) in configs.iter().enumerate() {
        if configs.len() > 1 {
            println!("OTLP export {}:", if otlp { "on" } else { "off" });
        }
        if instructions {
            report_instructions(&samples[c]);
        } else {
            report(&samples[c], rounds);
        }
    }
    std::thread::sleep(Duration::from_millis(10));
}

/// Prints the (median) instruction counts per run length and the per-turn slopes.
fn report_instructions(samples: &[Vec<f64>]) {
    let by_turns: Vec<f64> = samples.iter().map(|s| median(s.clone())).collect();
    for (turns, n) in TURNS.iter().zip(&by_turns) {
        println!("turns {turns:>3}: {:.2} M instructions", n / 1e6);
    }
    println!(
        "per-turn instructions, slope 10 -> 50 turns: {:.0} k",
        (by_turns[1] - by_turns[0]) / 40.0 / 1e3
    );
    println!(
        "per-turn instructions, slope 10 -> 110 turns: {:.0} k",
        (by_turns[2] - by_turns[0]) / 100.0 / 1e3
    );
}

/// Prints the medians per run length and the per-turn slopes.
fn report(samples: &[Vec<f64>], rounds: usize) {
    let mut by_turns = Vec::new();
    for (turns, s) in TURNS.iter().zip(samples) {
        let m = median(s.clone());
        println!(
            "turns {turns:>3}: median CPU {:.1} ms (min {:.1}, max {:.1}) over {rounds} runs",
            m * 1e3,
            s.iter().cloned().fold(f64::MAX, f64::min) * 1e3,
            s.iter().cloned().fold(0.0, f64::max) * 1e3,
        );
        by_turns.push(m);
    }
    println!(
        "per-turn harness CPU, slope 10 -> 50 turns: {:.3} ms",
        (by_turns[1] - by_turns[0]) / 40.0 * 1e3
    );
    println!(
        "per-turn harness CPU, slope 10 -> 110 turns: {:.3} ms",
        (by_turns[2] - by_turns[0]) / 100.0 * 1e3
    );
}
