//! Slack's thinking status under load: 50 mentions at once (each its own message, from
//! ten people), posted signed to `/slack/events`; for each, the time from posting the
//! event to the arrival of its `assistant.threads.setStatus` at a fake Slack (which
//! answers every call after 50 ms, like a real one on a good day). In-process service,
//! SQLite, a model on 127.0.0.1 answering after 200 ms. Goal: p99 under 300 ms.
//!
//! Then streaming: ten mentions one after another, each answered by a model that
//! streams a 2,000-character answer in 40-character pieces 20 ms apart; for each, the
//! time from the model's first piece to the answer's first text at Slack
//! (`chat.startStream`), and the Slack calls the streamed answer took. Goals: first
//! text under 500 ms after the first token, at most 10 calls.
//!
//! Run with `cargo bench --bench agent_status` (`MENTIONS` sets how many at once).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Json, Path as UrlPath};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::slack::SlackClient;
use steward::run::Runner;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{SqliteStore, Store};
use steward::triggers::auth::sign_hex;
use tower::ServiceExt;

const SECRET: &str = "bench-signing-secret";
const SLACK_LATENCY: Duration = Duration::from_millis(50);
const MODEL_LATENCY: Duration = Duration::from_millis(200);
/// Stream calls by thread: (method, arrival).
type StreamCalls = Arc<Mutex<HashMap<String, Vec<(String, Instant)>>>>;

const PIECE_EVERY: Duration = Duration::from_millis(20);

/// The streamed answer: 2,000 characters.
fn answer() -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 2_000 {
        n += 1;
        text.push_str(&format!(
            "Step {n}: check the tunnel on gw-{n} and restart it if the keepalive is off. "
        ));
    }
    text.truncate(2_000);
    text
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A signed `app_mention` event callback from `user` in its own message `ts`.
fn mention(event_id: &str, user: &str, text: &str, ts: &str) -> axum::http::Request<axum::body::Body> {
    let body = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "type": "event_callback", "event_id": event_id, "event_time": 1700000000,
        "authorizations": [{"team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}],
        "event": {"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": "C0HELP", "event_ts": ts}})
    .to_string();
    let now = chrono::Utc::now().timestamp().to_string();
    let sig = format!(
        "v0={}",
        sign_hex(
            SECRET.as_bytes(),
            &[b"v0:", now.as_bytes(), b":", body.as_bytes()]
        )
    );
    axum::http::Request::post("/slack/events")
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", now)
        .header("x-slack-signature", sig)
        .body(axum::body::Body::from(body))
        .unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let mentions: usize = std::env::var("MENTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(mentions));
}

async fn bench(mentions: usize) {
    // Fake Slack: notes when each thread's first status arrives.
    let statuses: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let s = statuses.clone();
    // Stream calls by thread: (method, arrival).
    let streams: StreamCalls = Arc::default();
    let st = streams.clone();
    let slack_app = Router::new()
        .route(
            "/conversations.replies",
            get(|| async {
                tokio::time::sleep(SLACK_LATENCY).await;
                Json(json!({"ok": true, "messages": [], "has_more": false}))
            }),
        )
        .route(
            "/{method}",
            post(move |UrlPath(method): UrlPath<String>, Json(body): Json<Value>| {
                if method.ends_with("Stream") {
                    // Only a start names its thread; appends and the stop name the message.
                    let key = match method.as_str() {
                        "chat.startStream" => body["thread_ts"].as_str().unwrap_or_default().to_string(),
                        _ => "streaming".to_string(),
                    };
                    st.lock()
                        .unwrap()
                        .entry(key)
                        .or_default()
                        .push((method.clone(), Instant::now()));
                }
                if method == "assistant.threads.setStatus"
                    && let Some(ts) = body["thread_ts"].as_str()
                {
                    s.lock()
                        .unwrap()
                        .entry(ts.to_string())
                        .or_insert_with(Instant::now);
                }
                async {
                    tokio::time::sleep(SLACK_LATENCY).await;
                    Json(json!({"ok": true, "channel": "C0HELP", "ts": "1700009999.000100"}))
                }
            }),
        );
    let slack_url = serve(slack_app).await;
    // The model: a short answer at once, or (asked to stream) a long one, piece by piece.
    let first_piece: Arc<Mutex<Option<Instant>>> = Arc::default();
    let fp = first_piece.clone();
    let model_app = Router::new().route(
        "/v1/chat/completions",
        post(move |Json(body): Json<Value>| {
            let fp = fp.clone();
            async move {
                tokio::time::sleep(MODEL_LATENCY).await;
                if body["stream"] != true {
                    return Json(json!({"id": "chatcmpl-b", "object": "chat.completion", "model": "gpt-4.1-mini",
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Done."}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 5}}))
                    .into_response();
                }
                let pieces: Vec<String> = answer().chars().collect::<Vec<_>>().chunks(40).map(|c| c.iter().collect()).collect();
                let chunk = |delta: Value, finish: Value| {
                    format!("data: {}\n\n", json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": "gpt-4.1-mini",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
                };
                let mut events: Vec<String> = pieces.iter().map(|p| chunk(json!({"content": p}), Value::Null)).collect();
                events.push(chunk(json!({}), json!("stop")));
                events.push(format!("data: {}\n\ndata: [DONE]\n\n", json!({"id": "chatcmpl-s", "object": "chat.completion.chunk",
                    "model": "gpt-4.1-mini", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 500}})));
                let stream = futures_util::stream::unfold((events.into_iter(), true), move |(mut rest, first)| {
                    let fp = fp.clone();
                    async move {
                        let next = rest.next()?;
                        if first {
                            *fp.lock().unwrap() = Some(Instant::now());
                        } else {
                            tokio::time::sleep(PIECE_EVERY).await;
                        }
                        Some((Ok::<_, std::io::Error>(axum::body::Bytes::from(next)), (rest, false)))
                    }
                });
                ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], axum::body::Body::from_stream(stream)).into_response()
            }
        }),
    );
    let model_url = serve(model_app).await;

    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "You help.");
    // Limits out of the way: this measures the status, not the admission rules.
    write(
        dir.path(),
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1-mini\nprompt: prompts/p.md\ntools: [current_time]\n\
         limits: {per_user_per_minute: 1000}\ntriggers:\n  - slack_mention: {}\n",
    );
    let http = steward::http::client().unwrap();
    let slack = SlackClient::new(http.clone(), &slack_url, "xoxb-bench");
    let tools = steward::tools::ToolRegistry::core(Default::default());
    let config = Config::load(
        dir.path(),
        &Known {
            tools: tools.names(),
            skills: Default::default(),
        },
    )
    .unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("steward.db")).await.unwrap());
    let endpoint = steward::provider::Endpoint {
        base_url: format!("{model_url}/v1"),
        api_key: Some("sk-bench".into()),
    };
    let providers = steward::provider::ProviderSet::new(steward::provider::retry::RetryPolicy::default())
        .with(
            "openai",
            Arc::new(steward::provider::openai::OpenAi::new(
                http,
                endpoint,
                Duration::from_secs(10),
            )),
        );
    let runner = Runner::builder(store.clone())
        .providers(providers)
        .tools(tools)
        .sources(steward::triggers::Sources::new(
            steward::triggers::source::SourceSettings {
                slack: Some(slack.clone()),
                ..Default::default()
            },
        ))
        .build();
    let secrets = Secrets {
        slack_signing: SECRET.into(),
        slack_bot_user: Some("UBOT".into()),
        ..Secrets::default()
    };
    let settings = DispatchSettings {
        global_concurrency: 64,
        agent_concurrency: 64,
        ..DispatchSettings::default()
    };
    let service = Service::start(runner, Arc::new(config), secrets, Some(slack), None, settings);
    let app = service.router();

    let mut posted = HashMap::new();
    let mut sends = Vec::new();
    for i in 0..mentions {
        let ts = format!("1700001{i:03}.000100");
        let req = mention(
            &format!("EvLOAD{i}"),
            &format!("U0P{:02}", i % 10),
            "<@UBOT> is the VPN down?",
            &ts,
        );
        posted.insert(ts, Instant::now());
        let app = app.clone();
        sends.push(tokio::spawn(
            async move { app.oneshot(req).await.unwrap().status() },
        ));
    }
    for s in sends {
        assert!(s.await.unwrap().is_success());
    }
    for _ in 0..3000 {
        if statuses.lock().unwrap().len() >= mentions {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seen = statuses.lock().unwrap().clone();
    assert_eq!(seen.len(), mentions, "every mention got a status");
    let mut latencies: Vec<f64> = posted
        .iter()
        .map(|(ts, at)| (seen[ts] - *at).as_secs_f64() * 1000.0)
        .collect();
    latencies.sort_by(|a, b| a.total_cmp(b));
    println!("event posted → assistant.threads.setStatus at Slack, {mentions} mentions at once:");
    println!(
        "  p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.9),
        percentile(&latencies, 0.99),
        latencies[latencies.len() - 1]
    );

    // The load's runs end before the streaming runs start, so calls are not mixed.
    for _ in 0..4000 {
        let runs = store.list_runs(500).await.unwrap();
        if runs.len() >= mentions && runs.iter().all(|r| r.status.is_terminal()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Streaming: one mention at a time, so the calls of each answer are its own.
    let mut first_text = Vec::new();
    let mut calls = Vec::new();
    for i in 0..10 {
        streams.lock().unwrap().clear();
        *first_piece.lock().unwrap() = None;
        let ts = format!("1700002{i:03}.000100");
        let req = mention(
            &format!("EvSTREAM{i}"),
            "U0ADA",
            "<@UBOT> how do I fix the tunnels?",
            &ts,
        );
        assert!(app.clone().oneshot(req).await.unwrap().status().is_success());
        let mut done = false;
        for _ in 0..2000 {
            let all = streams.lock().unwrap().clone();
            if all
                .values()
                .flatten()
                .any(|(m, _)| m.starts_with("chat.stopStream"))
            {
                done = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(done, "answer {i} did not stream to its end");
        let all = streams.lock().unwrap().clone();
        let started = all[&ts]
            .iter()
            .find(|(m, _)| m == "chat.startStream")
            .map(|(_, at)| *at)
            .unwrap();
        let first = first_piece.lock().unwrap().expect("the model streamed");
        first_text.push((started - first).as_secs_f64() * 1000.0);
        calls.push(all.values().map(Vec::len).sum::<usize>() as f64);
    }
    first_text.sort_by(|a, b| a.total_cmp(b));
    calls.sort_by(|a, b| a.total_cmp(b));
    println!("streamed 2,000-character answers, 10 mentions one after another:");
    println!(
        "  model's first piece → first text at Slack: median {:.1} ms (max {:.1}); Slack stream calls per answer: median {} (max {})",
        percentile(&first_text, 0.5),
        first_text[first_text.len() - 1],
        percentile(&calls, 0.5),
        calls[calls.len() - 1]
    );
    service.stop(Duration::from_secs(10)).await;
}
