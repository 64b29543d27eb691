//! Ack latency and throughput of `POST /slack/events`: valid signatures, distinct event
//! ids, durable persistence (group commit), 50 concurrent connections from a load
//! generator on the same machine. Uses `wrk` when installed (pre-signed requests fed
//! by a Lua script), else a built-in generator. Afterwards, checks that every
//! acknowledged event is in the store.
//!
//! Run with `cargo bench --bench ingest`; with `INGEST_POSTGRES=postgres://...` the store
//! is PostgreSQL (a schema of its own, dropped afterwards) instead of SQLite, and the
//! built-in generator is also run against one and then three `steward serve` processes
//! on one schema (the load spread over them), as replicas are deployed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use steward::config::Config;
use steward::run::Runner;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{EventQueue, PgStore, SqliteStore, Store};
use steward::triggers::auth::sign_hex;

const SECRET: &str = "bench-signing-secret";
const CONNECTIONS: usize = 50;

fn body(i: usize) -> String {
    json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456", "type": "event_callback",
           "event_id": format!("EvBENCH{i:08}"), "event_time": 1515449522,
           "event": {"type": "app_mention", "user": "U061F7AUR", "text": "<@UBOT> status please",
                     "ts": "1515449522.000016", "channel": "C123ABC456", "event_ts": "1515449522.000016"}})
    .to_string()
}

fn signature(ts: &str, body: &str) -> String {
    format!(
        "v0={}",
        sign_hex(SECRET.as_bytes(), &[b"v0:", ts.as_bytes(), b":", body.as_bytes()])
    )
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Posts `n` signed events over `CONNECTIONS` connections, connection k to
/// `urls[k % urls.len()]`; how many, in how many seconds, and each ack latency in ms.
async fn builtin(urls: &[String], n: usize) -> (usize, f64, Vec<f64>) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()
        .unwrap();
    let next = Arc::new(AtomicUsize::new(0));
    let ts = chrono::Utc::now().timestamp().to_string();
    let bodies: Arc<Vec<(String, String)>> = Arc::new(
        (0..n)
            .map(|i| {
                let b = body(i);
                let s = signature(&ts, &b);
                (b, s)
            })
            .collect(),
    );
    let started = Instant::now();
    let mut tasks = Vec::new();
    for k in 0..CONNECTIONS {
        let (client, next, bodies, url, ts) = (
            client.clone(),
            next.clone(),
            bodies.clone(),
            urls[k % urls.len()].clone(),
            ts.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= bodies.len() {
                    return lat;
                }
                let (b, s) = &bodies[i];
                let t = Instant::now();
                let r = client
                    .post(&url)
                    .header("x-slack-request-timestamp", &ts)
                    .header("x-slack-signature", s)
                    .body(b.clone())
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success());
                lat.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    (all.len(), started.elapsed().as_secs_f64(), all)
}

fn wrk(url: &str, n: usize, dir: &std::path::Path) -> Option<String> {
    std::process::Command::new("wrk").arg("--version").output().ok()?;
    let ts = chrono::Utc::now().timestamp().to_string();
    // Requests come from a data file read in init(): a Lua chunk with 200k statements
    // would not compile.
    let mut data = String::new();
    for i in 0..n {
        // Ids distinct from the built-in run's.
        let b = body(10_000_000 + i);
        data.push_str(&format!("{}\t{b}\n", signature(&ts, &b)));
    }
    let data_path = dir.join("requests.tsv");
    std::fs::write(&data_path, data).ok()?;
    let lua = format!(
        r#"local counter = 0
function setup(thread) counter = counter + 1; thread:set("offset", counter) end
function init(args)
  reqs = {{}}
  local n = 0
  for line in io.lines("{path}") do
    n = n + 1
    -- Each thread takes every other request, so ids stay distinct.
    if n % 2 == offset % 2 then
      local sig, body = string.match(line, "^([^	]+)	(.*)$")
      reqs[#reqs + 1] = wrk.format("POST", "/slack/events", {{["Content-Type"] = "application/json", ["X-Slack-Request-Timestamp"] = "{ts}", ["X-Slack-Signature"] = sig}}, body)
    end
  end
  idx = 1
end
function request() local r = reqs[idx]; idx = idx + 1; if idx > #reqs then idx = 1 end; return r end
function response(status, headers, body) if status ~= 200 and not shown then shown = true; print("first non-200 answer: " .. status .. " " .. body) end end
"#,
        path = data_path.display()
    );
    let script = dir.join("slack.lua");
    std::fs::write(&script, lua).ok()?;
    let out = std::process::Command::new("wrk")
        .args(["-t2", &format!("-c{CONNECTIONS}"), "-d15s", "--latency", "-s"])
        .arg(&script)
        .arg(url)
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn main() {
    steward::http::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let postgres = std::env::var("INGEST_POSTGRES").ok();
        let schema = format!("ingest_bench_{}", std::process::id());
        let store: Arc<dyn Store> = match &postgres {
            Some(url) => Arc::new(PgStore::connect_in_schema(url, &schema).await.unwrap()),
            None => Arc::new(SqliteStore::open(&dir.path().join("ingest.db")).await.unwrap()),
        };
        println!("store: {}", if postgres.is_some() { "PostgreSQL" } else { "SQLite" });
        let runner = Runner::builder(store.clone()).mock_tools(true).build();
        let secrets = Secrets { slack_signing: SECRET.into(), ..Secrets::default() };
        // No agents: the router claims and drops events, so this measures the ack path.
        let service = Service::start(runner, Arc::new(Config::default()), secrets, None, None, DispatchSettings::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/slack/events", listener.local_addr().unwrap());
        let router = service.router();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

        let n = std::env::var("INGEST_BUILTIN").ok().and_then(|v| v.parse().ok()).unwrap_or(60_000);
        let wrk_n = std::env::var("WRK_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(450_000);
        let (count, secs, mut lat) = builtin(std::slice::from_ref(&url), n).await;
        lat.sort_by(|a, b| a.total_cmp(b));
        println!(
            "built-in generator (reqwest, same process), {CONNECTIONS} connections: {count} events in {secs:.2} s = {:.0} events/s; ack latency p50 {:.2} ms, p99 {:.2} ms",
            count as f64 / secs,
            percentile(&lat, 0.5),
            percentile(&lat, 0.99)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stored = store.count_events().await.unwrap();
        println!("  events stored: {stored} of {count} acknowledged");
        assert_eq!(stored as usize, count, "an acknowledged event is missing");

        let url2 = url.replace("/slack/events", "");
        let wrk_dir = tempfile::tempdir().unwrap();
        let before = store.count_events().await.unwrap();
        match tokio::task::spawn_blocking(move || { let r = wrk(&url2, wrk_n, wrk_dir.path()); drop(wrk_dir); r }).await.unwrap() {
            Some(out) => {
                println!("wrk -t2 -c{CONNECTIONS} -d15s (separate process):\n{out}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                println!("  events stored by the wrk run: {}", store.count_events().await.unwrap() - before);
            }
            None => println!("wrk not installed; skipped (apt-get install wrk)"),
        }
        service.stop(Duration::from_secs(5)).await;
        if let Some(url) = &postgres {
            for replicas in [1, 3] {
                replicas_on_postgres(url, replicas, n).await;
            }
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(&pool)
                .await
                .unwrap();
        }
    });
}

/// The built-in generator against `replicas` `steward serve` processes sharing one
/// PostgreSQL schema (release binary, one agent that Slack events do not match, so the
/// router claims and drops them as above).
async fn replicas_on_postgres(url: &str, replicas: usize, n: usize) {
    let root = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("prompts/intake.md", "You note requests.");
    write(
        "agents/intake.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/intake.md\ntriggers:\n  - webhook: { name: intake }\n",
    );
    let schema = format!("ingest_replicas_{}_{replicas}", std::process::id());
    let store = PgStore::connect_in_schema(url, &schema).await.unwrap();
    let db = format!("{url}?options=-c%20search_path%3D{schema}");
    let mut addrs = Vec::new();
    let mut children = Vec::new();
    for _ in 0..replicas {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        children.push(
            std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
                .args(["serve", "--addr", &addr])
                .env("STEWARD_ROOT", root.path())
                .env("DATABASE_URL", &db)
                .env("SLACK_SIGNING_SECRET", SECRET)
                .env("RUST_LOG", "error")
                .spawn()
                .unwrap(),
        );
        addrs.push(addr);
    }
    let client = reqwest::Client::new();
    for a in &addrs {
        let mut up = false;
        for _ in 0..200 {
            if client.get(format!("http://{a}/healthz")).send().await.is_ok() {
                up = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(up, "replica {a} did not start");
    }
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}/slack/events")).collect();
    let (count, secs, mut lat) = builtin(&urls, n).await;
    lat.sort_by(|a, b| a.total_cmp(b));
    println!(
        "built-in generator, {replicas} steward serve process{} on one PostgreSQL schema, {CONNECTIONS} connections: {count} events in {secs:.2} s = {:.0} events/s; ack latency p50 {:.2} ms, p99 {:.2} ms",
        if replicas == 1 { "" } else { "es" },
        count as f64 / secs,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99)
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    println!(
        "  events stored: {} of {count} acknowledged",
        store.count_events().await.unwrap()
    );
    for child in &mut children {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&pool)
        .await
        .unwrap();
}
