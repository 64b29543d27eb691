//! Follow-up latency: from a signed Slack `message` event posted to `/slack/events`
//! (a plain reply in a thread the agent answered, no mention) to the model's first
//! request of the run it starts, with a 50-message thread read from a fake Slack that
//! takes 100 ms per call. In-process service, SQLite, a model on 127.0.0.1 answering at
//! once. Goal: under 300 ms plus the Slack call.
//!
//! Also: the tokens the 50-message thread costs as conversation turns, against the
//! same thread pasted raw (the `conversations.replies` JSON an agent without this would
//! put in its prompt).
//!
//! Run with `cargo bench --bench follow_up` (`FOLLOW_UPS` sets the sample count).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Json, Query};
use axum::routing::{get, post};
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::slack::SlackClient;
use steward::run::Runner;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{SqliteStore, Store};
use steward::tokens::{Encoding, TokenCounter};
use steward::triggers::auth::sign_hex;
use tower::ServiceExt;

const SECRET: &str = "bench-signing-secret";
const SLACK_LATENCY: Duration = Duration::from_millis(100);
const ROOT: &str = "1700000000.000100";
const THREAD: usize = 50;

/// The thread: a root, people's replies, and one earlier answer of the bot.
fn thread() -> Vec<Value> {
    let people = ["U0ADA", "U0BO", "U0CY", "U0DI", "U0ED"];
    (0..THREAD)
        .map(|i| {
            let ts = format!("17000000{i:02}.000100");
            if i == 1 {
                return json!({"type": "message", "user": "UBOT", "bot_id": "B0BOT", "ts": ts, "thread_ts": ROOT,
                    "text": "The gateway certificate expires on Friday; I would renew it on Thursday.",
                    "metadata": {"event_type": "steward_reply", "event_payload": {"idempotency_key": "r:reply"}}});
            }
            let mut m = json!({"type": "message", "user": people[i % people.len()], "ts": ts,
                "text": format!("Message {i}: we checked the staging gateway and the logs show handshake errors after the rotation, see the runbook section {i}."),
                "client_msg_id": format!("5c1f{i:04}-aa31-4e0c-9b7c-6c1a0f6d2e{i:02}"),
                "blocks": [{"type": "rich_text", "block_id": format!("b{i}"), "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": format!("Message {i}")}]}]}],
                "team": "T123ABC456", "reply_count": 0});
            if i > 0 {
                m["thread_ts"] = json!(ROOT);
            }
            m
        })
        .collect()
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

fn store_runs(store: &Arc<dyn Store>) -> Vec<String> {
    let store = store.clone();
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(async { store.list_runs(10).await.unwrap() })
            .into_iter()
            .map(|r| format!("{} {:?} {:?}", r.id, r.status, r.error))
            .collect()
    })
    .join()
    .unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let samples: usize = std::env::var("FOLLOW_UPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(samples));
}

async fn bench(samples: usize) {
    // Fake Slack, 100 ms a call.
    let slack_app = Router::new()
        .route(
            "/conversations.replies",
            get(|| async {
                tokio::time::sleep(SLACK_LATENCY).await;
                Json(json!({"ok": true, "messages": thread(), "has_more": false}))
            }),
        )
        .route(
            "/users.info",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                tokio::time::sleep(SLACK_LATENCY).await;
                Json(
                    json!({"ok": true, "user": {"id": q["user"], "name": q["user"].to_lowercase(),
                    "profile": {"display_name": format!("Person {}", &q["user"][3..])}}}),
                )
            }),
        )
        .route(
            "/{method}",
            post(|| async {
                tokio::time::sleep(SLACK_LATENCY).await;
                Json(json!({"ok": true, "channel": "C0HELP", "ts": "1700009999.000100"}))
            }),
        );
    let slack_url = serve(slack_app).await;
    // The model: notes when each request arrives, answers at once.
    let arrivals: Arc<Mutex<Vec<(Instant, Value)>>> = Arc::default();
    let a = arrivals.clone();
    let model_app = Router::new().route(
        "/v1/chat/completions",
        post(move |Json(body): Json<Value>| {
            a.lock().unwrap().push((Instant::now(), body));
            async {
                Json(json!({"id": "chatcmpl-b", "object": "chat.completion", "model": "gpt-4.1-mini",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Renew it Thursday."}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 5}}))
            }
        }),
    );
    let model_url = serve(model_app).await;

    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "You help.");
    write(
        dir.path(),
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1-mini\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - slack_mention: {}\n",
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
    let mut providers = steward::provider::ProviderSet::new(steward::provider::retry::RetryPolicy::default());
    let endpoint = steward::provider::Endpoint {
        base_url: format!("{model_url}/v1"),
        api_key: Some("sk-bench".into()),
    };
    providers = providers.with(
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
    let service = Service::start(
        runner,
        Arc::new(config),
        secrets,
        Some(slack),
        None,
        DispatchSettings::default(),
    );
    let app = service.router();
    let deliver = |event_id: String, event: Value| {
        let app = app.clone();
        async move {
            let body = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
                "type": "event_callback", "event_id": event_id, "event_time": 1700000000,
                "authorizations": [{"team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}], "event": event})
            .to_string();
            let ts = chrono::Utc::now().timestamp().to_string();
            let sig = format!(
                "v0={}",
                sign_hex(SECRET.as_bytes(), &[b"v0:", ts.as_bytes(), b":", body.as_bytes()])
            );
            let req = axum::http::Request::post("/slack/events")
                .header("content-type", "application/json")
                .header("x-slack-request-timestamp", ts)
                .header("x-slack-signature", sig)
                .body(axum::body::Body::from(body))
                .unwrap();
            let status = app.oneshot(req).await.unwrap().status();
            assert!(status.is_success(), "{status}");
        }
    };
    let wait_runs = |n: usize| {
        let store = store.clone();
        async move {
            for _ in 0..2000 {
                let runs = store.list_runs(500).await.unwrap();
                if runs.len() >= n && runs.iter().all(|r| r.status.is_terminal()) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            panic!("runs did not finish: {:?}", store.list_runs(500).await.unwrap());
        }
    };

    // The mention that makes the thread the agent's (and warms the name cache).
    deliver(
        "EvWARM".into(),
        json!({"type": "app_mention", "user": "U0ADA", "text": "<@UBOT> when does it expire?", "ts": "1700000098.000100",
               "thread_ts": ROOT, "channel": "C0HELP", "event_ts": "1700000098.000100"}),
    )
    .await;
    wait_runs(1).await;

    let mut latencies = Vec::new();
    for i in 0..samples {
        let seen = arrivals.lock().unwrap().len();
        let started = Instant::now();
        // Five people take turns: one person is limited to 10 runs a minute.
        let person = ["U0ADA", "U0BO", "U0CY", "U0DI", "U0ED"][i % 5];
        deliver(
            format!("EvFOLLOW{i}"),
            json!({"type": "message", "channel": "C0HELP", "channel_type": "channel", "user": person,
                   "text": "and what about the staging gateway?", "ts": format!("17000002{i:02}.000100"),
                   "thread_ts": ROOT, "event_ts": format!("17000002{i:02}.000100")}),
        )
        .await;
        let mut arrived = None;
        for _ in 0..10_000 {
            if let Some((at, _)) = arrivals.lock().unwrap().get(seen) {
                arrived = Some(*at);
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let arrived =
            arrived.unwrap_or_else(|| panic!("no model request for follow-up {i}: {:?}", store_runs(&store)));
        latencies.push((arrived - started).as_secs_f64() * 1000.0);
        wait_runs(i + 2).await;
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    let p50 = percentile(&latencies, 0.5);
    println!(
        "follow-up → first model request, {samples} follow-ups, {THREAD}-message thread, fake Slack at {} ms:",
        SLACK_LATENCY.as_millis()
    );
    println!(
        "  median {p50:.1} ms (p90 {:.1}, min {:.1}); minus the one conversations.replies call: {:.1} ms",
        percentile(&latencies, 0.9),
        latencies[0],
        p50 - SLACK_LATENCY.as_millis() as f64
    );

    // Tokens: the thread as turns (what the model got) against the thread pasted raw.
    let counter = TokenCounter::new();
    let last = arrivals.lock().unwrap().last().unwrap().1.clone();
    let messages = last["messages"].as_array().unwrap();
    let as_turns: String = messages
        .iter()
        .skip(1) // the system prompt
        .map(|m| m["content"].as_str().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let raw =
        serde_json::to_string_pretty(&json!({"ok": true, "messages": thread(), "has_more": false})).unwrap();
    let turns = counter.count(Encoding::O200k, &as_turns).tokens;
    let pasted = counter.count(Encoding::O200k, &raw).tokens;
    println!(
        "  tokens of the thread as turns: {turns}; pasted raw (conversations.replies JSON): {pasted} ({:.1}× more)",
        pasted as f64 / turns as f64
    );
    service.stop(Duration::from_secs(5)).await;
}
