//! What workflow owners see: `/metrics` (values and `promtool check metrics`), the run
//! inspector (through the router, in headless Chromium, its access control, a private
//! run), and status in Slack (reactions on the triggering message, the log channel).

mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, StatusCode};
use axum::routing::{get, post};
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::slack::SlackClient;
use steward::run::Runner;
use steward::server::access::AdminAccess;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{RunRow, SqliteStore, Store};
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use steward::triggers::auth::sign_hex;
use steward::triggers::source::SourceSettings;
use support::*;
use tower::ServiceExt;

const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const ADMIN_TOKEN: &str = "admin-token-0123456789";
/// Tool output with markup the inspector must show as text.
const HOSTILE: &str = "<script>alert(\"pwned\")</script> found 3 open tickets";

/// Returns [`HOSTILE`] text.
struct Lookup;

#[async_trait]
impl Tool for Lookup {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::OnceLock<ToolSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| ToolSpec {
            name: "lookup".into(),
            description: "Looks up tickets.".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            effect: Effect::ReadOnly,
        })
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        Ok(ToolOutput::text(format!(
            "{HOSTILE} for {}",
            args["q"].as_str().unwrap_or("")
        )))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    r.register(Arc::new(Lookup));
    r
}

fn tree(root: &Path, extra: &[(&str, &str)]) -> Config {
    for (rel, text) in extra {
        write(root, rel, text);
    }
    write(
        root,
        "prompts/helpdesk.md",
        "You are the helpdesk. Answer from the ticket system.",
    );
    write(
        root,
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: [lookup]\ntriggers:\n  - slack_mention: {}\n\
         output: { status: both, stream: false }\n\
         evals: { post_run: [\"The answer says whether the ticket is open.\"], model: openai/judge-model }\n",
    );
    Config::load(
        root,
        &Known {
            tools: registry().names(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"))
}

/// Every Slack Web API call the fake received: method and body.
type SlackCalls = Arc<Mutex<Vec<(String, Value)>>>;

async fn slack_post(
    State(calls): State<SlackCalls>,
    axum::extract::Path(method): axum::extract::Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    calls.lock().unwrap().push((method, body));
    axum::Json(json!({"ok": true, "channel": "C123ABC456", "ts": "1700000000.000100"}))
}

/// `users.info`, as Slack documents it.
async fn users_info() -> axum::Json<Value> {
    axum::Json(
        json!({"ok": true, "user": {"id": "U061F7AUR", "name": "ana", "real_name": "Ana Lima",
        "profile": {"display_name": "Ana L.", "real_name": "Ana Lima"}}}),
    )
}

async fn fake_slack() -> (String, SlackCalls) {
    let calls: SlackCalls = Arc::default();
    let app = axum::Router::new()
        .route("/api/users.info", get(users_info))
        .route("/api/conversations.info", get(conversations_info))
        .route("/api/{method}", post(slack_post))
        .with_state(calls.clone());
    (format!("{}/api", serve(app).await), calls)
}

struct Harness {
    _dir: tempfile::TempDir,
    service: Service,
    store: Arc<dyn Store>,
    slack: SlackCalls,
    fake: FakeModel,
}

/// The model calls `lookup` once, then answers with the text it was shown.
fn tool_then_answer(fake: &FakeModel, answer: &'static str) {
    fake.handler(move |body| {
        // The post-run judge: passes answers that say "open", explaining with a quote.
        if body["model"] == "judge-model" {
            let asked = body["messages"].to_string();
            let pass = asked.contains("ticket is open");
            return Reply::ok(openai_text(&format!(
                "{{\"pass\": {pass}, \"score\": {}, \"explanation\": \"The answer was: {answer}\"}}",
                if pass { 0.9 } else { 0.1 }
            )));
        }
        let has_result = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if has_result {
            Reply::ok(openai_text(answer))
        } else {
            Reply::ok(openai_tools(&[("call_1", "lookup", r#"{"q":"vpn"}"#)]))
        }
    });
}

async fn start(admin: AdminAccess) -> Harness {
    start_with(admin, &[]).await
}

/// [`start`] with more files in the config tree (agents beside the helpdesk).
async fn start_with(admin: AdminAccess, extra: &[(&str, &str)]) -> Harness {
    let dir = tempfile::tempdir().unwrap();
    let config = Arc::new(tree(dir.path(), extra));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("steward.db")).await.unwrap());
    let (slack_url, slack) = fake_slack().await;
    let client = SlackClient::new(steward::http::client().unwrap(), &slack_url, "xoxb-test");
    let fake = FakeModel::start().await;
    tool_then_answer(&fake, "Your VPN ticket is open.");
    let runner = Runner::builder(store.clone())
        .providers(providers(Some(&fake), None))
        .tools(registry())
        .tokens(tokens())
        .sources(steward::triggers::Sources::new(SourceSettings {
            slack: Some(client.clone()),
            public_url: Some("https://steward.example.com".into()),
            log_channel: Some("C0LOG".into()),
            ..SourceSettings::default()
        }))
        .build();
    let secrets = Secrets {
        slack_signing: SLACK_SECRET.into(),
        slack_bot_user: Some("UBOT".into()),
        admin,
        ..Secrets::default()
    };
    let service = Service::start(
        runner,
        config,
        secrets,
        Some(client),
        None,
        DispatchSettings::default(),
    );
    Harness {
        _dir: dir,
        service,
        store,
        slack,
        fake,
    }
}

/// What `serve` on loopback with no access configured admits: the inspector and
/// `/metrics` without a token.
fn open() -> AdminAccess {
    AdminAccess {
        open: true,
        metrics_open: true,
        ..AdminAccess::default()
    }
}

fn slack_request(body: &Value, secret: &str) -> Request<Body> {
    let raw = body.to_string();
    let ts = chrono::Utc::now().timestamp();
    let sig = format!(
        "v0={}",
        sign_hex(
            secret.as_bytes(),
            &[b"v0:", ts.to_string().as_bytes(), b":", raw.as_bytes()]
        )
    );
    Request::post("/slack/events")
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", ts.to_string())
        .header("x-slack-signature", sig)
        .body(Body::from(raw))
        .unwrap()
}

/// An `app_mention` event callback, as Slack's Events API documents it.
fn mention(event_id: &str, channel: &str, ts: &str, text: &str) -> Value {
    json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "event": {"type": "app_mention", "user": "U061F7AUR", "text": text, "ts": ts,
                  "channel": channel, "event_ts": ts},
        "type": "event_callback", "event_id": event_id, "event_time": 1515449522,
        "authorizations": [{"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]})
}

impl Harness {
    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
        let resp = self.service.router().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (status, headers, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// `/api/events` once it lists at least `n` deliveries, each with its outcome (or
    /// what it lists after 10 s).
    async fn settled_events(&self, n: usize) -> Vec<Value> {
        let mut events = Vec::new();
        for _ in 0..200 {
            let (status, body) = self.get("/api/events").await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let v: Value = serde_json::from_str(&body).unwrap();
            events = v["events"].as_array().cloned().unwrap_or_default();
            if events.len() >= n && events.iter().all(|e| !e["outcome"].is_null()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        events
    }

    async fn get(&self, path: &str) -> (StatusCode, String) {
        let (status, _, body) = self.send(Request::get(path).body(Body::empty()).unwrap()).await;
        (status, body)
    }

    /// Waits until `n` top-level runs have finished and their status is shown.
    /// Waits until `n` top-level runs have finished, their status is shown and their
    /// post-run eval is stored; returns them (the judge's own runs left out).
    async fn finished(&self, n: usize) -> Vec<RunRow> {
        for _ in 0..400 {
            let mut runs = self.store.list_runs(100).await.unwrap();
            runs.retain(|r| r.parent_id.is_none());
            let mut judged = 0;
            for r in &runs {
                judged += usize::from(!self.store.run_scores(&r.id).await.unwrap().is_empty());
            }
            let marks = self
                .slack
                .lock()
                .unwrap()
                .iter()
                .filter(|(m, b)| m == "reactions.add" && b["name"] != "eyes")
                .count();
            if runs.len() >= n && runs.iter().all(|r| r.status.is_terminal()) && marks >= n && judged >= n {
                return runs;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "runs did not finish: {:?}",
            self.store.list_runs(100).await.unwrap()
        );
    }
}

/// `promtool check metrics` (Debian package `prometheus`) on `text`.
fn promtool_check(text: &str) {
    use std::io::Write;
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool not found: install Debian's `prometheus` package (.ci/deps does)");
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- metrics ---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn line_value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
}

/// Open (loopback, nothing configured), the inspector, its API, MCP and `/metrics`
/// still refuse a request a proxy forwarded: a proxy on the same machine connects from
/// loopback, and its forwarding headers are what tell it apart.
#[tokio::test]
async fn the_open_inspector_refuses_what_a_proxy_forwards() {
    let h = start(open()).await;
    let forwarded = |method: &str, path: &str, header: &str| {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header, "203.0.113.7")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
            ))
            .unwrap()
    };
    for (method, path) in [
        ("GET", "/runs"),
        ("GET", "/api/runs"),
        ("GET", "/events"),
        ("POST", "/mcp"),
    ] {
        for header in ["x-forwarded-for", "forwarded", "via"] {
            let (status, _, body) = h.send(forwarded(method, path, header)).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path} with {header}");
            assert!(body.contains("came through a proxy"), "{body}");
        }
    }
    let (status, _, body) = h.send(forwarded("GET", "/metrics", "x-real-ip")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("came through a proxy"), "{body}");
    // MCP reads its own body: held to the same 1 MB as every route.
    let big = Request::post("/mcp")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(vec![b' '; 2 << 20]))
        .unwrap();
    let (status, _, body) = h.send(big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    // Asked directly, all answer.
    assert_eq!(h.get("/api/runs").await.0, StatusCode::OK);
    assert_eq!(h.get("/metrics").await.0, StatusCode::OK);
}

#[tokio::test]
async fn metrics_status_and_inspector_after_slack_runs() {
    let h = start(open()).await;
    for (i, ts) in ["1515449522.000016", "1515449600.000100"].iter().enumerate() {
        let req = slack_request(
            &mention(
                &format!("Ev{i}"),
                "C123ABC456",
                ts,
                "<@UBOT> is my VPN ticket open?",
            ),
            SLACK_SECRET,
        );
        assert_eq!(h.send(req).await.0, StatusCode::OK);
    }
    let forged = slack_request(&mention("Ev9", "C123ABC456", "1.2", "hi"), "wrong-secret");
    assert_eq!(h.send(forged).await.0, StatusCode::UNAUTHORIZED);
    let runs = h.finished(2).await;
    assert!(runs.iter().all(|r| r.status.as_str() == "succeeded"), "{runs:?}");

    // /metrics: values, then the exposition format through promtool.
    let (status, headers, metrics) = h
        .send(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    // Prometheus itself asks for OpenMetrics.
    let (_, headers, open_metrics) = h
        .send(
            Request::get("/metrics")
                .header(
                    "accept",
                    "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
                )
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    assert!(open_metrics.trim_end().ends_with("# EOF"));
    let expect = |series: &str, value: f64| {
        assert_eq!(
            line_value(&metrics, series),
            Some(value),
            "{series} in\n{metrics}"
        );
    };
    expect(
        r#"steward_runs_total{agent="helpdesk",status="succeeded",termination="completed"}"#,
        2.0,
    );
    expect(
        r#"steward_tool_calls_total{agent="helpdesk",tool="lookup",outcome="ok"}"#,
        2.0,
    );
    expect(
        r#"steward_model_calls_total{agent="helpdesk",provider="openai",model="gpt-4.1",outcome="ok"}"#,
        4.0,
    );
    expect(
        r#"steward_trigger_events_total{source="slack",kind="app_mention",outcome="accepted"}"#,
        2.0,
    );
    expect(
        r#"steward_trigger_events_total{source="slack",kind="",outcome="unauthorized"}"#,
        1.0,
    );
    expect(r#"steward_queue_depth{queue="events"}"#, 0.0);
    expect(
        r#"steward_eval_results_total{agent="helpdesk",criterion="The answer says whether the ticket is open.",result="pass"}"#,
        2.0,
    );
    expect(
        r#"steward_eval_score_count{agent="helpdesk",criterion="The answer says whether the ticket is open."}"#,
        2.0,
    );
    expect(r#"steward_run_duration_seconds_count{agent="helpdesk"}"#, 2.0);
    let input = line_value(
        &metrics,
        r#"steward_model_tokens_total{agent="helpdesk",model="openai/gpt-4.1",kind="input"}"#,
    )
    .unwrap();
    assert!(input > 0.0);
    assert!(
        line_value(
            &metrics,
            r#"steward_cost_usd_total{agent="helpdesk",model="openai/gpt-4.1"}"#
        )
        .unwrap()
            > 0.0
    );
    promtool_check(&metrics);

    // Status in Slack: eyes while working, then a check mark in its place; one log line
    // per run with a link to the inspector.
    let calls = h.slack.lock().unwrap().clone();
    let on_first: Vec<(String, String)> = calls
        .iter()
        .filter(|(m, b)| m.starts_with("reactions.") && b["timestamp"] == "1515449522.000016")
        .map(|(m, b)| (m.clone(), b["name"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        on_first,
        [
            ("reactions.add".to_string(), "eyes".to_string()),
            ("reactions.remove".to_string(), "eyes".to_string()),
            ("reactions.add".to_string(), "white_check_mark".to_string()),
        ]
    );
    // And Slack's own: the thinking status in the thread with what the run did, cleared
    // at the end; an agent session opened as processing and closed.
    let native: Vec<(String, Value)> = calls
        .iter()
        .filter(|(m, b)| {
            (m == "assistant.threads.setStatus" || m == "agents.sessions.setStatus")
                && b["thread_ts"] == "1515449522.000016"
        })
        .cloned()
        .collect();
    let statuses: Vec<&str> = native
        .iter()
        .filter(|(m, _)| m == "assistant.threads.setStatus")
        .map(|(_, b)| b["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.first(), Some(&"is thinking…"), "{native:?}");
    assert_eq!(statuses.last(), Some(&""), "cleared at the end: {native:?}");
    assert!(
        native
            .iter()
            .any(|(_, b)| b["loading_messages"] == json!(["Running lookup…"])),
        "the tool call shows: {native:?}"
    );
    let sessions: Vec<&str> = native
        .iter()
        .filter(|(m, _)| m == "agents.sessions.setStatus")
        .map(|(_, b)| b["status"].as_str().unwrap())
        .collect();
    assert_eq!(sessions, ["processing", "closed"]);
    let log_lines: Vec<&Value> = calls
        .iter()
        .filter(|(m, b)| m == "chat.postMessage" && b["channel"] == "C0LOG")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(log_lines.len(), 2);
    let line = log_lines[0]["text"].as_str().unwrap();
    assert!(
        line.starts_with("*helpdesk* · slack app_mention · succeeded (completed) · 2 turns"),
        "{line}"
    );
    assert!(line.contains("<https://steward.example.com/runs/"), "{line}");
    // The reply ends with a context block: the prompt's inspector page, the run's page
    // and who asked.
    let reply = calls
        .iter()
        .find(|(m, b)| m == "chat.postMessage" && b["channel"] == "C123ABC456")
        .unwrap();
    let blocks = reply.1["blocks"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "section", "{}", reply.1);
    let footer = blocks.last().unwrap();
    assert_eq!(footer["type"], "context");
    let footer = footer["elements"][0]["text"].as_str().unwrap();
    assert!(
        footer.starts_with(
            "<https://steward.example.com/prompts/helpdesk.md|Prompt>  ·  <https://steward.example.com/runs/"
        ),
        "{footer}"
    );
    assert!(footer.contains("|Run>  ·  Asked by <@U"), "{footer}");

    // The inspector: list with the person's display name, the run's timeline with the
    // hostile tool output escaped, the prompt page, and the JSON API.
    let (status, list) = h.get("/runs?agent=helpdesk&status=succeeded&source=slack").await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains("Ana L."), "{list}");
    assert_eq!(list.matches("href=\"/runs/").count(), 2);
    // Judge runs are children of the runs they judged: listed only when asked for.
    let (_, top) = h.get("/runs").await;
    assert_eq!(top.matches("href=\"/runs/").count(), 2, "{top}");
    let (_, all) = h.get("/runs?runs=all").await;
    assert_eq!(all.matches("href=\"/runs/").count(), 4, "{all}");
    let (_, none) = h.get("/runs?q=no-such-words").await;
    assert!(none.contains("No runs match."));
    let (status, _) = h.get("/runs?since=yesterday").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let id = &runs[0].id;
    let (status, page) = h.get(&format!("/runs/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    for text in [
        "Started by slack app_mention",
        "Turn 1 · openai/gpt-4.1",
        "Tool call · lookup",
        "Tool result · lookup",
        "Final answer",
        "Your VPN ticket is open.",
        "/prompts/helpdesk.md",
        "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;",
    ] {
        assert!(page.contains(text), "{text} missing from\n{page}");
    }
    assert!(
        !page.contains("<script>"),
        "markup from a tool result must be escaped"
    );

    let (status, prompt) = h.get("/prompts/helpdesk.md").await;
    assert_eq!(status, StatusCode::OK);
    assert!(prompt.contains("You are the helpdesk."));
    assert_eq!(h.get("/prompts/../../etc/passwd").await.0, StatusCode::NOT_FOUND);

    let (status, api) = h.get("/api/runs?limit=1").await;
    assert_eq!(status, StatusCode::OK);
    let api: Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["runs"].as_array().unwrap().len(), 1);
    let (_, one) = h.get(&format!("/api/runs/{id}")).await;
    let one: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(one["run"]["source"], "slack");
    assert_eq!(one["run"]["actor"], "U061F7AUR");
    assert!(
        one["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "tool_result")
    );
    assert_eq!(h.get("/api/runs/nope").await.0, StatusCode::NOT_FOUND);

    // The post-run judge's verdict is stored with the run and shown on its page.
    assert_eq!(one["scores"][0]["kind"], "judge");
    assert_eq!(one["scores"][0]["passed"], true);
    assert_eq!(one["scores"][0]["source"], "openai/judge-model");
    assert!(page.contains("Scores") && page.contains("pass 0.90"), "{page}");

    // A 👍 on the bot's reply is a human score on the run that posted it.
    let reply_ts = "1700000000.000100";
    let thumbs = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "event": {"type": "reaction_added", "user": "U061F7AUR", "reaction": "+1", "item_user": "UBOT",
                  "item": {"type": "message", "channel": "C123ABC456", "ts": reply_ts}, "event_ts": "1700000100.000200"},
        "type": "event_callback", "event_id": "EvThumbs", "event_time": 1700000100});
    assert_eq!(
        h.send(slack_request(&thumbs, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    let mut human = Vec::new();
    for _ in 0..200 {
        human.clear();
        for r in &runs {
            for s in h.store.run_scores(&r.id).await.unwrap() {
                if s.kind == "human" {
                    human.push(s);
                }
            }
        }
        if !human.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(human.len(), 1, "one 👍 recorded");
    assert_eq!(human[0].score, 1.0);
    assert_eq!(human[0].source.as_deref(), Some("U061F7AUR"));
    // The vote is counted right after it is stored.
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = h.get("/metrics").await.1;
        if metrics.contains("steward_feedback_total") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        line_value(&metrics, r#"steward_feedback_total{agent="helpdesk",vote="up"}"#),
        Some(1.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_inspector_is_closed_unless_access_is_configured() {
    // A non-loopback bind with nothing configured: closed.
    let closed = start(AdminAccess::default()).await;
    assert_eq!(closed.get("/runs").await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(closed.get("/api/runs").await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        closed.get("/prompts/helpdesk.md").await.0,
        StatusCode::UNAUTHORIZED
    );
    // Metrics too (a non-loopback bind without STEWARD_METRICS_TOKEN), saying why.
    let (status, why) = closed.get("/metrics").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(why.contains("STEWARD_METRICS_TOKEN is not set"), "{why}");

    let h = start(AdminAccess {
        token: Some(ADMIN_TOKEN.into()),
        trusted_user_header: Some("x-forwarded-user".into()),
        trusted_proxies: steward::http::networks::Networks::parse("127.0.0.1").unwrap(),
        metrics_token: Some("scrape-me".into()),
        ..AdminAccess::default()
    })
    .await;
    assert_eq!(h.get("/runs").await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(h.get("/metrics").await.0, StatusCode::UNAUTHORIZED);
    let with = |path: &str, header: &str, value: &str| {
        Request::get(path)
            .header(header, value)
            .body(Body::empty())
            .unwrap()
    };
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    assert_eq!(
        h.send(with("/runs", "authorization", &bearer)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        h.send(with("/metrics", "authorization", "Bearer scrape-me"))
            .await
            .0,
        StatusCode::OK
    );
    // The header counts only from the proxy's address (STEWARD_TRUSTED_PROXIES).
    let from = |ip: [u8; 4], request: Request<Body>| {
        let mut request = request;
        let peer = std::net::SocketAddr::from((ip, 40000));
        request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
        request
    };
    assert_eq!(
        h.send(from(
            [127, 0, 0, 1],
            with("/runs", "x-forwarded-user", "ana@example.com")
        ))
        .await
        .0,
        StatusCode::OK
    );
    assert_eq!(
        h.send(from(
            [10, 0, 0, 9],
            with("/runs", "x-forwarded-user", "ana@example.com")
        ))
        .await
        .0,
        StatusCode::UNAUTHORIZED
    );
    // A proxy that forwards its own `Authorization` beside the person's name: each
    // request is the person's, none a guess, so none is throttled.
    for _ in 0..6 {
        let mut request = with("/runs", "x-forwarded-user", "ana@example.com");
        request
            .headers_mut()
            .insert("authorization", "Bearer proxy-own-token".parse().unwrap());
        assert_eq!(h.send(from([127, 0, 0, 1], request)).await.0, StatusCode::OK);
    }

    // The login form sets a cookie that admits the browser.
    let login = |token: &str| {
        Request::post("/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(format!("token={token}")))
            .unwrap()
    };
    assert_eq!(h.send(login("wrong")).await.0, StatusCode::UNAUTHORIZED);
    let (status, headers, _) = h.send(login(ADMIN_TOKEN)).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("HttpOnly") && !cookie.contains(ADMIN_TOKEN));
    let pair = cookie.split(';').next().unwrap();
    assert_eq!(h.send(with("/runs", "cookie", pair)).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_private_run_shows_metadata_only_and_is_not_logged() {
    let h = start(open()).await;
    tool_then_answer(&h.fake, "PRIVATE-ANSWER about the merger");
    let secret = "PRIVATE-QUESTION about the merger";
    let req = slack_request(
        &mention("EvP", "G024BE91L", "1355517523.000005", secret),
        SLACK_SECRET,
    );
    assert_eq!(h.send(req).await.0, StatusCode::OK);
    let runs = h.finished(1).await;
    let id = &runs[0].id;
    let (status, page) = h.get(&format!("/runs/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("only its metadata is shown"));
    assert!(page.contains("Tool result · lookup"), "the steps are listed");
    for text in ["PRIVATE", "merger", "found 3 open tickets", "vpn"] {
        assert!(!page.contains(text), "{text} leaked into the private run's page");
    }
    let (_, list) = h.get("/runs").await;
    assert!(!list.contains("merger"));
    let calls = h.slack.lock().unwrap().clone();
    assert!(
        !calls.iter().any(|(_, b)| b["channel"] == "C0LOG"),
        "private runs are never posted to the log channel"
    );
    // The judge read the text in memory; only its score is stored.
    let scores = h.store.run_scores(id).await.unwrap();
    assert_eq!(scores.len(), 1);
    assert_eq!(
        scores[0].explanation, None,
        "no explanation that could quote a private run"
    );
    // The status reactions carry no text and are still shown.
    assert!(
        calls
            .iter()
            .any(|(m, b)| m == "reactions.add" && b["name"] == "white_check_mark")
    );
}

/// Serves the service on 127.0.0.1 for a browser; returns its base URL.
async fn serve_service(h: &Harness) -> (String, tokio_util::sync::CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(steward::server::serve_connections(
        listener,
        h.service.router(),
        stop.clone(),
        steward::server::ConnectionTimeouts {
            head: Duration::from_secs(10),
            idle: Duration::from_secs(75),
            write: Duration::from_secs(30),
            max_connections: 1024,
        },
        Duration::from_secs(1),
    ));
    (url, stop)
}

/// Debian's Chromium, headless: the page's DOM after it loaded, and a screenshot.
async fn chromium(args: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--window-size=1200,900",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(args)
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("chromium did not finish within 90 s")
        .expect("chromium not found: install Debian's `chromium` package (.ci/deps does)");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[tokio::test]
async fn the_inspector_in_a_real_browser() {
    let h = start(open()).await;
    let req = slack_request(
        &mention(
            "EvB",
            "C123ABC456",
            "1515449522.000016",
            "<@UBOT> is my VPN ticket open?",
        ),
        SLACK_SECRET,
    );
    assert_eq!(h.send(req).await.0, StatusCode::OK);
    let runs = h.finished(1).await;
    let (url, stop) = serve_service(&h).await;

    let list = chromium(&["--dump-dom", &format!("{url}/runs")]).await;
    let dom = String::from_utf8_lossy(&list.stdout);
    assert!(dom.contains("steward runs") && dom.contains("Ana L."), "{dom}");

    let page_url = format!("{url}/runs/{}", runs[0].id);
    let detail = chromium(&["--dump-dom", &page_url]).await;
    let dom = String::from_utf8_lossy(&detail.stdout);
    assert!(dom.contains("Tool result · lookup"), "{dom}");
    assert!(dom.contains("Your VPN ticket is open."));
    // The hostile output is text in the DOM, not an element.
    assert!(dom.contains("&lt;script&gt;alert"), "{dom}");
    assert!(!dom.contains("<script>"));

    let shot = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("inspector-run.png");
    let _ = std::fs::remove_file(&shot);
    chromium(&[&format!("--screenshot={}", shot.display()), &page_url]).await;
    let png = std::fs::read(&shot).expect("a screenshot was written");
    assert!(
        png.len() > 1000 && png.starts_with(b"\x89PNG"),
        "{} bytes",
        png.len()
    );
    stop.cancel();
}

#[test]
fn the_grafana_dashboard_queries_only_metrics_steward_exports() {
    use steward::metrics::{Metrics, ToolOutcome, TriggerOutcome};
    use steward::types::{RunStatus, Termination, Usage};
    // Every family with at least one series.
    let m = Metrics::new();
    m.run_finished("a", RunStatus::Failed, Termination::MaxTurns, 3.0);
    let usage = Usage {
        input_tokens: 1,
        output_tokens: 1,
        ..Usage::default()
    };
    m.model_answered("a", "openai/gpt-4.1", &usage, Some(0.1));
    m.model_failed("a", "openai", "gpt-4.1", "timeout");
    m.tool_called("a", "t", ToolOutcome::Ok);
    m.skill_loaded("a", "s", 1);
    m.subagent_started("b");
    m.compacted("a");
    m.trigger("slack", "app_mention", TriggerOutcome::Accepted);
    m.set_queue_depth(1, 2);
    m.lease_reclaimed();
    m.run_retried();
    m.spans_dropped(1);
    let exported: std::collections::BTreeSet<String> = m
        .render_prometheus()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect();

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/steward.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 10);
    let metric = regex::Regex::new(r"steward_[a-z_]+").unwrap();
    let mut used = std::collections::BTreeSet::new();
    for panel in panels {
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {} has no query", panel["title"]);
        for t in targets {
            let expr = t["expr"].as_str().unwrap();
            for name in metric.find_iter(expr) {
                assert!(
                    exported.contains(name.as_str()),
                    "panel {} queries {} which steward does not export ({exported:?})",
                    panel["title"],
                    name.as_str()
                );
                used.insert(name.as_str().to_string());
            }
        }
    }
    for wanted in [
        "steward_runs_total",
        "steward_run_duration_seconds_bucket",
        "steward_tool_calls_total",
        "steward_skill_loads_total",
        "steward_model_tokens_total",
        "steward_cost_usd_total",
        "steward_trigger_events_total",
    ] {
        assert!(used.contains(wanted), "the dashboard does not show {wanted}");
    }
}

/// "Why didn't it answer?": every delivery ends with an outcome a person can look up:
/// a run started, a retry as a duplicate of its first delivery, a reaction no agent
/// listens for (with each agent's reason), the bot's own message ignored, a forged
/// request refused without its body; in `/api/events`, the Events page and metrics.
#[tokio::test]
async fn every_delivery_has_an_outcome_in_the_event_log() {
    let h = start(open()).await;
    let first = mention(
        "Ev0EVLOG1",
        "C0GENERAL",
        "1700000000.000100",
        "<@UBOT> is my vpn ticket open?",
    );
    assert_eq!(
        h.send(slack_request(&first, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    assert_eq!(
        h.send(slack_request(&first, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    let reaction = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "event": {"type": "reaction_added", "user": "U061F7AUR", "reaction": "eyes",
                  "item": {"type": "message", "channel": "C0GENERAL", "ts": "1700000000.000100"},
                  "item_user": "U0G9QF9C6", "event_ts": "1700000001.000200"},
        "type": "event_callback", "event_id": "Ev0EVLOG2", "event_time": 1700000001,
        "authorizations": [{"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]});
    assert_eq!(
        h.send(slack_request(&reaction, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    let own = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "event": {"type": "message", "channel": "C0GENERAL", "user": "UBOT", "text": "Your VPN ticket is open.",
                  "ts": "1700000002.000300", "event_ts": "1700000002.000300", "channel_type": "channel"},
        "type": "event_callback", "event_id": "Ev0EVLOG3", "event_time": 1700000002,
        "authorizations": [{"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]});
    assert_eq!(h.send(slack_request(&own, SLACK_SECRET)).await.0, StatusCode::OK);
    let forged = mention(
        "Ev0EVLOG4",
        "C0GENERAL",
        "1700000003.000400",
        "<@UBOT> secret words",
    );
    assert_eq!(
        h.send(slack_request(&forged, "not-the-secret")).await.0,
        StatusCode::UNAUTHORIZED
    );
    h.finished(1).await;
    let events = h.settled_events(5).await;
    let by = |outcome: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["outcome"] == outcome)
            .cloned()
            .collect()
    };
    assert_eq!(events.len(), 5, "{events:#?}");
    let started = &by("started")[0];
    let run = &started["detail"]["runs"][0];
    assert_eq!(run["agent"], "helpdesk");
    let duplicate = &by("duplicate")[0];
    assert_eq!(
        duplicate["duplicate_of"], started["id"],
        "a retry points at its first delivery"
    );
    let no_agent = &by("no_agent")[0];
    assert_eq!(no_agent["kind"], "reaction_added");
    let why = no_agent["detail"]["agents"]["helpdesk"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("trigger kind"), "{why}");
    let ignored = &by("ignored")[0];
    assert!(
        ignored["detail"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("own"),
        "{ignored}"
    );
    let refused = &by("refused")[0];
    assert_eq!(refused["source"], "slack");
    assert!(
        !refused.to_string().contains("secret words"),
        "a refused body is not kept: {refused}"
    );
    assert!(
        refused["detail"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("signature"),
        "{refused}"
    );
    // Filters, one event, and the pages people read.
    let (_, only) = h.get("/api/events?outcome=no_agent").await;
    let only: Value = serde_json::from_str(&only).unwrap();
    assert_eq!(only["events"].as_array().map(Vec::len), Some(1));
    let (status, _) = h.get("/api/events?outcome=nonsense").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let id = no_agent["id"].as_str().unwrap();
    let (status, page) = h.get(&format!("/events/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("Why no agent took it") && page.contains("helpdesk"),
        "{page}"
    );
    let (_, list) = h.get("/events").await;
    assert!(list.contains("duplicate") && list.contains("refused"), "{list}");
    let run_id = run["id"].as_str().unwrap();
    let (_, run_page) = h.get(&format!("/runs/{run_id}")).await;
    assert!(
        run_page.contains(&format!("/events/{}", started["id"].as_str().unwrap())),
        "a run links to its event"
    );
    let (_, metrics) = h.get("/metrics").await;
    for outcome in ["started", "duplicate", "no_agent", "ignored", "refused"] {
        assert!(
            metrics.contains(&format!(
                "steward_events_total{{source=\"slack\",outcome=\"{outcome}\"}} 1"
            )),
            "{outcome}: {metrics}"
        );
    }
}

/// A `when:` filter that fails on a private conversation's text (Rhai's `parse_int`
/// quotes its input in its error) leaves the event log a reason without the text.
#[tokio::test]
async fn a_failing_filter_on_a_private_conversation_keeps_no_text() {
    let parser = "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: [lookup]\ntriggers:\n  \
                  - slack_mention: { when: 'text.parse_int() > 0' }\noutput: { status: none, stream: false }\n";
    let h = start_with(open(), &[("agents/parser.yaml", parser)]).await;
    tool_then_answer(&h.fake, "done");
    let req = slack_request(
        &mention("EvPRIVF1", "G024BE91L", "1700000300.000100", "SECRET-XYZ budget"),
        SLACK_SECRET,
    );
    assert_eq!(h.send(req).await.0, StatusCode::OK);
    let events = h.settled_events(1).await;
    let detail = events[0]["detail"].to_string();
    assert!(
        detail.contains("when: text.parse_int() > 0 failed (the error is not kept"),
        "{detail}"
    );
    assert!(!detail.contains("SECRET"), "{detail}");
}

/// A reaction event callback, as Slack's Events API documents it.
fn reaction(event_id: &str, name: &str, ts: &str) -> Value {
    json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "event": {"type": "reaction_added", "user": "U061F7AUR", "reaction": name,
                  "item": {"type": "message", "channel": "C0GENERAL", "ts": ts},
                  "item_user": "U0G9QF9C6", "event_ts": ts},
        "type": "event_callback", "event_id": event_id, "event_time": 1700000001,
        "authorizations": [{"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]})
}

#[tokio::test]
async fn one_agent_answers_a_conversation_by_precedence_and_filters_are_recorded() {
    let agent = |triggers: &str| {
        format!(
            "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: [lookup]\ntriggers:\n{triggers}output: {{ status: none, stream: false }}\n"
        )
    };
    let (infra, logger, links, broken) = (
        agent("  - slack_mention: { channels: [C0INFRA] }\n"),
        agent("  - slack_mention: { also: true }\n"),
        agent("  - slack_reaction: { reaction: link, when: 'text.contains(\"https://\")' }\n"),
        agent("  - slack_reaction: { reaction: boom, when: 'labels[3] == \"x\"' }\n"),
    );
    let h = start_with(
        open(),
        &[
            ("agents/infra.yaml", &infra),
            ("agents/logger.yaml", &logger),
            ("agents/links.yaml", &links),
            ("agents/broken.yaml", &broken),
        ],
    )
    .await;
    let sends = [
        mention(
            "Ev0PREC1",
            "C0INFRA",
            "1700000100.000100",
            "<@UBOT> is the build broken?",
        ),
        mention(
            "Ev0PREC2",
            "C0GENERAL",
            "1700000200.000100",
            "<@UBOT> is my vpn ticket open?",
        ),
        reaction("Ev0PREC3", "link", "1700000300.000100"),
        reaction("Ev0PREC4", "boom", "1700000400.000100"),
    ];
    for body in &sends {
        assert_eq!(h.send(slack_request(body, SLACK_SECRET)).await.0, StatusCode::OK);
    }
    // Four runs: infra and the logger in C0INFRA, the helpdesk and the logger elsewhere.
    let mut runs = Vec::new();
    for _ in 0..400 {
        runs = h.store.list_runs(100).await.unwrap();
        runs.retain(|r| r.parent_id.is_none() && r.agent != "judge");
        if runs.len() >= 4 && runs.iter().all(|r| r.finished_at.is_some()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut agents: Vec<(String, String)> = runs
        .iter()
        .map(|r| (r.trigger_summary.clone(), r.agent.clone()))
        .collect();
    agents.sort();
    let who: Vec<&str> = agents.iter().map(|(_, a)| a.as_str()).collect();
    assert_eq!(runs.len(), 4, "{agents:?}");
    assert_eq!(
        who.iter().filter(|a| **a == "logger").count(),
        2,
        "also: true runs beside the owner: {agents:?}"
    );
    assert!(
        agents
            .iter()
            .any(|(t, a)| t.contains("build broken") && a == "infra")
            && !agents
                .iter()
                .any(|(t, a)| t.contains("build broken") && a == "helpdesk"),
        "the channel's own agent answers there, not the helpdesk: {agents:?}"
    );
    let events = h.settled_events(4).await;
    let started: Vec<&Value> = events.iter().filter(|e| e["outcome"] == "started").collect();
    assert_eq!(started.len(), 2, "{events:#?}");
    assert!(
        started
            .iter()
            .any(|e| e["detail"]["outranked_by"]["helpdesk"] == "infra"),
        "the event says who took it from whom: {started:#?}"
    );
    let filtered: Vec<&Value> = events.iter().filter(|e| e["outcome"] == "filtered").collect();
    assert_eq!(filtered.len(), 2, "{events:#?}");
    let reasons: Vec<String> = filtered
        .iter()
        .flat_map(|e| e["detail"]["filtered"].as_object().cloned().unwrap_or_default())
        .map(|(agent, why)| format!("{agent}: {}", why.as_str().unwrap_or_default()))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("links: slack_reaction: when: text.contains") && r.ends_with("is false")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("broken: slack_reaction: when: labels[3]") && r.contains("failed")),
        "an erroring filter counts as false and keeps its error: {reasons:?}"
    );
}

fn asker_ctx(asker: Option<&str>, store: &Arc<dyn Store>) -> ToolCtx {
    tool_ctx(
        "run-why",
        Arc::new(steward::tools::search_grant::SearchGrant {
            asker: asker.map(str::to_string),
            events: Some(steward::tools::search_grant::EventLogHandle(store.clone())),
            ..Default::default()
        }),
    )
}

#[tokio::test]
async fn why_didnt_it_answer_is_answered_from_the_record_for_people_who_could_see_it() {
    use steward::integrations::event_outcome::EventOutcomeTool;
    let h = start(open()).await;
    let asked = mention(
        "Ev0WHY1",
        "C0GENERAL",
        "1700000100.000100",
        "<@UBOT> is my vpn ticket open?",
    );
    assert_eq!(
        h.send(slack_request(&asked, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    let reaction = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "event": {"type": "reaction_added", "user": "U061F7AUR", "reaction": "eyes",
                  "item": {"type": "message", "channel": "C0GENERAL", "ts": "1700000200.000100"},
                  "item_user": "U0G9QF9C6", "event_ts": "1700000201.000200"},
        "type": "event_callback", "event_id": "Ev0WHY2", "event_time": 1700000201,
        "authorizations": [{"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]});
    assert_eq!(
        h.send(slack_request(&reaction, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    let secret = mention(
        "Ev0WHY3",
        "C0PRIVOPS",
        "1700000300.000100",
        "<@UBOT> the merger plan",
    );
    assert_eq!(
        h.send(slack_request(&secret, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    h.finished(1).await;
    h.settled_events(3).await;
    let (slack_url, _) = fake_slack().await;
    let slack = SlackClient::new(steward::http::client().unwrap(), &slack_url, "xoxb-test");
    let tool = EventOutcomeTool::new(Some(slack));
    let store = h.store.clone();
    let ask = |asker: Option<&'static str>, link: &str| {
        let tool = &tool;
        let store = store.clone();
        let link = link.to_string();
        async move {
            tool.call(&asker_ctx(asker, &store), json!({"permalink": link}))
                .await
                .map(|o| o.to_model_text())
                .map_err(|e| e.to_string())
        }
    };
    let link = |channel: &str, ts: &str| {
        format!(
            "https://acme.slack.com/archives/{channel}/p{}",
            ts.replace('.', "")
        )
    };
    // The reaction matched no agent: the record says which condition failed.
    let why = ask(Some("U061F7AUR"), &link("C0GENERAL", "1700000200.000100"))
        .await
        .unwrap();
    assert!(why.contains("no_agent") && why.contains("trigger kind"), "{why}");
    // The mention started the helpdesk.
    let why = ask(Some("U0SOMEONE"), &link("C0GENERAL", "1700000100.000100"))
        .await
        .unwrap();
    assert!(why.contains("started") && why.contains("helpdesk"), "{why}");
    assert!(!why.contains("vpn ticket"), "no message text: {why}");
    // A message steward never received.
    let why = ask(Some("U061F7AUR"), &link("C0GENERAL", "1700000999.000100"))
        .await
        .unwrap();
    assert!(
        why.contains("\"found\":false") || why.contains("No delivery"),
        "{why}"
    );
    // A private channel the asker cannot be shown to be in, someone else's DM, no asker,
    // and a link that is not one: refused, nothing listed.
    let err = ask(Some("U0OUTSIDER"), &link("C0PRIVOPS", "1700000300.000100"))
        .await
        .unwrap_err();
    assert!(err.contains("C0PRIVOPS") && !err.contains("started"), "{err}");
    let err = ask(Some("U0OUTSIDER"), &link("D0SOMEONE", "1700000400.000100"))
        .await
        .unwrap_err();
    assert!(err.contains("direct conversation"), "{err}");
    let err = ask(None, &link("C0GENERAL", "1700000200.000100"))
        .await
        .unwrap_err();
    assert!(err.contains("only a person"), "{err}");
    let err = ask(Some("U061F7AUR"), "https://example.com/nope")
        .await
        .unwrap_err();
    assert!(err.contains("not a Slack message link"), "{err}");
}

#[tokio::test]
async fn the_problems_page_reviews_an_agent_behind_the_inspectors_guard() {
    let h = start(open()).await;
    let asked = mention(
        "Ev0PROB1",
        "C0GENERAL",
        "1700000500.000100",
        "<@UBOT> is my vpn ticket open?",
    );
    assert_eq!(
        h.send(slack_request(&asked, SLACK_SECRET)).await.0,
        StatusCode::OK
    );
    h.finished(1).await;
    let (status, body) = h.get("/api/problems?agent=helpdesk").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["agent"], "helpdesk");
    assert_eq!(v["runs"], 1, "{v}");
    assert!(v["problems"].is_array(), "{v}");
    let (status, _) = h.get("/api/problems?agent=nobody").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, page) = h.get("/problems?agent=helpdesk&days=3").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("runs of helpdesk") && page.contains("No problems"),
        "{page}"
    );
    let closed = start(AdminAccess::default()).await;
    let (status, _) = closed.get("/api/problems?agent=helpdesk").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn mcp_over_http_is_behind_the_inspectors_guard() {
    let initialize = || {
        Request::post("/mcp")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(
                json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}})
                .to_string(),
            ))
            .unwrap()
    };
    let closed = start(AdminAccess::default()).await;
    assert_eq!(closed.send(initialize()).await.0, StatusCode::UNAUTHORIZED);
    let h = start(open()).await;
    let (status, headers, body) = h.send(initialize()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"steward\""), "server info names steward: {body}");
    assert!(headers.contains_key("mcp-session-id"), "{headers:?}");
}
