//! The server: signed webhooks from every source, persist-then-ack with dedupe, routing
//! to agents, cron across restarts, crash reconciliation, private channels, body limits.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::notion::NotionClient;
use steward::run::{Lineage, Runner};
use steward::server::{DispatchSettings, Secrets, Service};

/// Access with `/metrics` answering without a token, as `serve` on loopback with no
/// `STEWARD_METRICS_TOKEN` sets it.
fn loopback_admin() -> steward::server::access::AdminAccess {
    steward::server::access::AdminAccess {
        metrics_open: true,
        ..Default::default()
    }
}
use steward::store::{EventQueue, NewRun, RunRow, RunStatus, RunStore, SqliteStore, Store};
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use steward::triggers::TriggerEvent;
use steward::triggers::auth::sign_hex;
use support::*;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const NOTION_TOKEN: &str = "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl";
const JIRA_SECRET: &str = "jira-webhook-secret";
const HOOK_TOKEN: &str = "hook-token-123";
const DB: &str = "1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6";

fn tree(root: &Path) -> Config {
    write(root, "prompts/p.md", "You are a test agent.");
    let agent = |name: &str, triggers: &str| {
        write(
            root,
            &format!("agents/{name}.yaml"),
            &format!(
                "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time, mark]\ntriggers:\n{triggers}"
            ),
        );
    };
    agent("helpdesk", "  - slack_mention: {}\n  - slack_message: {}\n");
    agent("ticket", "  - slack_reaction: { reaction: jira }\n");
    agent(
        "jira-watch",
        "  - jira: { events: [\"jira:issue_created\", \"jira:issue_updated\"], projects: [OPS] }\n",
    );
    agent(
        "notion-review",
        &format!(
            "  - notion: {{ events: [page.properties_updated], database: {DB}, property: Status, to: Ready for review }}\n"
        ),
    );
    agent("intake", "  - webhook: { name: zapier-intake }\n");
    agent(
        "nightly",
        "  - cron: { schedule: \"0 3 * * *\", timezone: UTC }\n",
    );
    let tools = registry().names();
    Config::load(
        root,
        &Known {
            tools,
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"))
}

/// A side-effecting tool that is slow, for crash tests.
struct Mark;

#[async_trait]
impl Tool for Mark {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::OnceLock<ToolSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| ToolSpec {
            name: "mark".into(),
            description: "Marks something (side effect).".into(),
            parameters: json!({"type": "object"}),
            effect: Effect::SideEffecting,
        })
    }
    async fn call(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        Ok(ToolOutput::text("marked"))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn registry() -> ToolRegistry {
    let mut r = builtin_registry();
    r.register(Arc::new(Mark));
    r
}

struct Harness {
    dir: tempfile::TempDir,
    config: Arc<Config>,
    fake: FakeModel,
    service: Option<Service>,
    store: Arc<dyn Store>,
}

async fn start(
    dir: tempfile::TempDir,
    fake: FakeModel,
    notion: Option<NotionClient>,
    lease: Duration,
) -> Harness {
    start_with_slack(dir, fake, notion, lease, None).await
}

async fn start_with_slack(
    dir: tempfile::TempDir,
    fake: FakeModel,
    notion: Option<NotionClient>,
    lease: Duration,
    slack: Option<steward::integrations::slack::SlackClient>,
) -> Harness {
    let settings = DispatchSettings {
        lease,
        ..DispatchSettings::default()
    };
    start_full(dir, fake, notion, slack, settings).await
}

/// [`start_with_slack`] with these dispatch settings.
async fn start_full(
    dir: tempfile::TempDir,
    fake: FakeModel,
    notion: Option<NotionClient>,
    slack: Option<steward::integrations::slack::SlackClient>,
    settings: DispatchSettings,
) -> Harness {
    let config = Arc::new(tree(dir.path()));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("steward.db")).await.unwrap());
    let runner = Runner::builder(store.clone())
        .providers(providers(Some(&fake), None))
        .tools(registry())
        .tokens(tokens())
        .sources(steward::triggers::Sources::new(
            steward::triggers::source::SourceSettings {
                slack: slack.clone(),
                ..Default::default()
            },
        ))
        .build();
    let secrets = Secrets {
        slack_signing: SLACK_SECRET.into(),
        slack_bot_user: Some("UBOT".into()),
        jira: JIRA_SECRET.into(),
        notion: Some(NOTION_TOKEN.into()),
        hooks: [("zapier-intake".to_string(), HOOK_TOKEN.to_string())].into(),
        admin: loopback_admin(),
        ..Secrets::default()
    };
    let service = Service::start(runner, config.clone(), secrets, slack, notion, settings);
    Harness {
        dir,
        config,
        fake,
        service: Some(service),
        store,
    }
}

async fn harness() -> Harness {
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("handled")));
    start(tempfile::tempdir().unwrap(), fake, None, Duration::from_secs(60)).await
}

impl Harness {
    /// The service's answer to `req`: its status and whole body.
    async fn exchange(&self, req: Request<Body>) -> (StatusCode, axum::body::Bytes) {
        let resp = self
            .service
            .as_ref()
            .unwrap()
            .router()
            .oneshot(req)
            .await
            .unwrap();
        let status = resp.status();
        (
            status,
            axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap(),
        )
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, Value) {
        let (status, bytes) = self.exchange(req).await;
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// `/metrics` in the classic text format.
    async fn metrics_text(&self) -> String {
        let (status, bytes) = self
            .exchange(Request::get("/metrics").body(Body::empty()).unwrap())
            .await;
        assert_eq!(status, StatusCode::OK);
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// Waits until `n` runs exist and all have finished.
    async fn finished_runs(&self, n: usize) -> Vec<RunRow> {
        for _ in 0..200 {
            let runs = self.store.list_runs(100).await.unwrap();
            if runs.len() >= n && runs.iter().all(|r| r.status.is_terminal()) {
                return runs;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "runs did not finish: {:?}",
            self.store.list_runs(100).await.unwrap()
        );
    }

    async fn stop(&mut self) {
        if let Some(s) = self.service.take() {
            s.stop(Duration::from_secs(5)).await;
        }
    }
}

fn slack_request(body: &Value, ts: i64, secret: &str, retry: Option<u32>) -> Request<Body> {
    let raw = body.to_string();
    let sig = format!(
        "v0={}",
        sign_hex(
            secret.as_bytes(),
            &[b"v0:", ts.to_string().as_bytes(), b":", raw.as_bytes()]
        )
    );
    let mut b = Request::post("/slack/events")
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", ts.to_string())
        .header("x-slack-signature", sig);
    if let Some(n) = retry {
        b = b
            .header("x-slack-retry-num", n.to_string())
            .header("x-slack-retry-reason", "http_timeout");
    }
    b.body(Body::from(raw)).unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn slack_event(event_id: &str, event: Value) -> Value {
    json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456", "event": event,
           "type": "event_callback", "event_id": event_id, "event_time": 1515449522,
           "authorizations": [{"enterprise_id": null, "team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}]})
}

fn mention(event_id: &str, text: &str) -> Value {
    slack_event(
        event_id,
        json!({"type": "app_mention", "user": "U061F7AUR", "text": text, "ts": "1515449522.000016",
        "channel": "C123ABC456", "event_ts": "1515449522.000016"}),
    )
}

#[tokio::test]
async fn slack_url_verification_and_signature_checks() {
    let mut h = harness().await;
    let challenge = json!({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
    let (status, body) = h.send(slack_request(&challenge, now(), SLACK_SECRET, None)).await;
    assert_eq!(
        (status, body["challenge"].as_str()),
        (
            StatusCode::OK,
            Some("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
        )
    );

    let ev = mention("EvAUTH1", "<@UBOT> hello");
    // Unsigned, wrong secret, stale: 401 with nothing persisted.
    let unsigned = Request::post("/slack/events")
        .body(Body::from(ev.to_string()))
        .unwrap();
    assert_eq!(h.send(unsigned).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        h.send(slack_request(&ev, now(), "wrong-secret", None)).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        h.send(slack_request(&ev, now() - 301, SLACK_SECRET, None))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    // A fresh, signed copy is new: the refused ones left nothing behind.
    let (status, body) = h.send(slack_request(&ev, now() - 30, SLACK_SECRET, None)).await;
    assert_eq!(
        (status, body["duplicate"].as_bool()),
        (StatusCode::OK, Some(false))
    );
    let runs = h.finished_runs(1).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].agent, "helpdesk");
    h.stop().await;
}

#[tokio::test]
async fn a_slack_event_delivered_three_times_starts_one_run() {
    let mut h = harness().await;
    let ev = mention("EvRETRY1", "<@UBOT> what's up?");
    let mut duplicates = Vec::new();
    for retry in [None, Some(1), Some(2)] {
        let (status, body) = h.send(slack_request(&ev, now(), SLACK_SECRET, retry)).await;
        assert_eq!(status, StatusCode::OK);
        duplicates.push(body["duplicate"].as_bool().unwrap());
    }
    assert_eq!(duplicates, [false, true, true]);
    let runs = h.finished_runs(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.store.list_runs(10).await.unwrap().len(), 1);
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    // The model saw the mention.
    let first = h.fake.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        first.contains("Trigger: slack app_mention") && first.contains("what's up?"),
        "{first}"
    );
    // A reaction routes to the reacji agent only; our own message is ignored.
    let reaction = slack_event(
        "EvREACT1",
        json!({"type": "reaction_added", "user": "U123ABC456", "reaction": "jira",
        "item_user": "U222", "item": {"type": "message", "channel": "C123ABC456", "ts": "1360782400.498405"}, "event_ts": "1360782804.083113"}),
    );
    assert_eq!(
        h.send(slack_request(&reaction, now(), SLACK_SECRET, None))
            .await
            .0,
        StatusCode::OK
    );
    let own = slack_event(
        "EvOWN1",
        json!({"type": "message", "channel": "C1", "user": "UBOT", "text": "my own reply", "ts": "1.2"}),
    );
    let (_, body) = h.send(slack_request(&own, now(), SLACK_SECRET, None)).await;
    assert!(body["ignored"].is_string());
    let runs = h.finished_runs(2).await;
    assert_eq!(runs.iter().filter(|r| r.agent == "ticket").count(), 1);
    assert_eq!(runs.len(), 2);
    h.stop().await;
}

fn jira_request(body: &Value, secret: Option<&str>, id: &str) -> Request<Body> {
    let raw = body.to_string();
    let mut b = Request::post("/jira/webhook").header("x-atlassian-webhook-identifier", id);
    if let Some(s) = secret {
        b = b.header(
            "x-hub-signature",
            format!("sha256={}", sign_hex(s.as_bytes(), &[raw.as_bytes()])),
        );
    }
    b.body(Body::from(raw)).unwrap()
}

fn jira_issue(event: &str, key: &str, description: Value) -> Value {
    json!({"timestamp": chrono::Utc::now().timestamp_millis(), "webhookEvent": event, "user": {"displayName": "Ana"},
           "issue": {"id": "10002", "key": key, "fields": {"summary": "Gateway down", "project": {"key": key.split('-').next().unwrap()},
                     "status": {"name": "To Do"}, "description": description}}})
}

#[tokio::test]
async fn jira_webhooks_with_string_and_adf_descriptions() {
    let mut h = harness().await;
    let plain = jira_issue("jira:issue_created", "OPS-1", json!("Plain text description"));
    assert_eq!(
        h.send(jira_request(&plain, None, "w1")).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        h.send(jira_request(&plain, Some("wrong"), "w1")).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        h.send(jira_request(&plain, Some(JIRA_SECRET), "w1")).await.0,
        StatusCode::OK
    );
    let adf = jira_issue(
        "jira:issue_created",
        "OPS-2",
        json!({"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": "ADF description text"}]}]}),
    );
    assert_eq!(
        h.send(jira_request(&adf, Some(JIRA_SECRET), "w2")).await.0,
        StatusCode::OK
    );
    // Retries carry the same identifier; another project does not match.
    assert_eq!(
        h.send(jira_request(&adf, Some(JIRA_SECRET), "w2")).await.1["duplicate"],
        true
    );
    let other = jira_issue("jira:issue_created", "WEB-9", json!("x"));
    assert_eq!(
        h.send(jira_request(&other, Some(JIRA_SECRET), "w3")).await.0,
        StatusCode::OK
    );
    let runs = h.finished_runs(2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.store.list_runs(10).await.unwrap().len(), 2);
    assert!(runs.iter().all(|r| r.agent == "jira-watch"));
    let seen: String = h
        .fake
        .requests()
        .iter()
        .map(|r| r.body["messages"][1]["content"].as_str().unwrap().to_string())
        .collect();
    assert!(
        seen.contains("Plain text description") && seen.contains("ADF description text"),
        "{seen}"
    );
    h.stop().await;
}

fn notion_request(body: &Value, token: Option<&str>) -> Request<Body> {
    let raw = body.to_string();
    let mut b = Request::post("/notion/webhook");
    if let Some(t) = token {
        b = b.header(
            "x-notion-signature",
            format!("sha256={}", sign_hex(t.as_bytes(), &[raw.as_bytes()])),
        );
    }
    b.body(Body::from(raw)).unwrap()
}

async fn fake_notion(status: &'static str) -> String {
    let app = axum::Router::new().route(
        "/v1/pages/{id}",
        axum::routing::get(move |axum::extract::Path(id): axum::extract::Path<String>, headers: axum::http::HeaderMap| async move {
            assert_eq!(headers["notion-version"], "2022-06-28");
            assert_eq!(headers["authorization"], "Bearer secret_notion");
            axum::Json(json!({"object": "page", "id": id, "properties": {
                "Status": {"id": "XGe%40", "type": "status", "status": {"id": "s1", "name": status, "color": "green"}},
                "Name": {"id": "title", "type": "title", "title": [{"type": "text", "plain_text": "Design doc"}]}}}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The service with a Notion client for `notion_url`, its model always answering.
async fn notion_harness(notion_url: &str) -> Harness {
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("reviewed")));
    let client = NotionClient::new(steward::http::client().unwrap(), notion_url, "secret_notion");
    start(
        tempfile::tempdir().unwrap(),
        fake,
        Some(client),
        Duration::from_secs(60),
    )
    .await
}

fn notion_event(id: &str) -> Value {
    // Stamped now: a signed event older than the replay window is refused.
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    json!({"id": id, "timestamp": now, "workspace_id": "13950b26-c203-4f3b-b97d-93ec06319565",
           "subscription_id": "29d75c0d-5546-4414-8459-7b7a92f1fc4b", "integration_id": "0ef2e755-4912-8096-91c1-00376a88a5ca",
           "type": "page.properties_updated", "authors": [{"id": "c7c11cca-1d73-471d-9b6e-bdef51470190", "type": "person"}],
           "entity": {"id": "153104cd-477e-809d-8dc4-ff2d96ae3090", "type": "page"},
           "data": {"parent": {"id": "1a2b3c4d-5e6f-47a8-b9c0-d1e2f3a4b5c6", "type": "database"}, "updated_properties": ["XGe%40"]}})
}

/// `steward notion-token --listen` on the store at `db`, its output captured.
fn notion_listener(db: &str) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["notion-token", "--listen", "--for", "60s"])
        .env("DATABASE_URL", db)
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Posts a handshake with `token` until the listener's window has opened and takes it.
async fn post_handshake_in_window(h: &Harness, token: &str) {
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, _) = h
            .send(notion_request(&json!({"verification_token": token}), None))
            .await;
        if status == StatusCode::OK {
            return;
        }
    }
    panic!("the handshake was never accepted during the window");
}

/// A Notion rule with a property condition needs the page: while Notion answers 503 the
/// event waits (left claimed, routed again after a lease) rather than being settled as
/// matching no agent; once Notion answers, it starts its run.
#[tokio::test]
async fn a_notion_event_waits_while_notion_cannot_show_its_page() {
    let up = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let now_up = up.clone();
    let app = axum::Router::new().route(
        "/v1/pages/{id}",
        axum::routing::get(move |axum::extract::Path(id): axum::extract::Path<String>| {
            let up = now_up.load(std::sync::atomic::Ordering::SeqCst);
            async move {
                if !up {
                    return (
                        StatusCode::SERVICE_UNAVAILABLE,
                        axum::Json(json!({"object": "error", "status": 503, "code": "service_unavailable",
                            "message": "Notion is unavailable, please try again later."})),
                    )
                        .into_response();
                }
                axum::Json(json!({"object": "page", "id": id, "properties": {
                    "Status": {"id": "XGe%40", "type": "status", "status": {"id": "s1", "name": "Ready for review", "color": "green"}}}}))
                    .into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let notion_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut h = notion_harness(&notion_url).await;
    assert_eq!(
        h.send(notion_request(&notion_event("e-down"), Some(NOTION_TOKEN)))
            .await
            .0,
        StatusCode::OK
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(h.store.list_runs(10).await.unwrap().is_empty());
    let settled = h
        .store
        .list_events(&steward::store::EventFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        settled.iter().all(|e| e.outcome.is_none()),
        "the event is not settled while Notion is down: {settled:?}"
    );
    up.store(true, std::sync::atomic::Ordering::SeqCst);
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    assert_eq!(h.store.requeue_orphan_events(later).await.unwrap(), 1);
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].agent, "notion-review");
    h.stop().await;
}

#[tokio::test]
async fn notion_handshake_then_signed_events_and_status_rules() {
    let notion_url = fake_notion("Ready for review").await;
    let mut h = notion_harness(&notion_url).await;
    let token = NOTION_TOKEN;
    // Events are verified against NOTION_WEBHOOK_TOKEN only.
    for sig in [None, Some("guess")] {
        assert_eq!(
            h.send(notion_request(&notion_event("e1"), sig)).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        h.send(notion_request(&notion_event("e1"), Some(token))).await.0,
        StatusCode::OK
    );
    // A captured delivery replayed after the replay window (its dedupe key may be
    // pruned by then) is refused, though its signature is good.
    let mut stale = notion_event("e0");
    stale["timestamp"] = json!("2024-12-05T23:55:34.285Z");
    let (status, body) = h.send(notion_request(&stale, Some(token))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("outside the 82800s replay window"),
        "{body}"
    );
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].agent, "notion-review");
    // A handshake outside a setup window is refused and stored nowhere.
    assert_eq!(
        h.send(notion_request(
            &json!({"verification_token": "secret_other"}),
            None
        ))
        .await
        .0,
        StatusCode::UNAUTHORIZED
    );
    // `steward notion-token --listen` opens a window, and prints the token that arrives.
    let db = format!("sqlite://{}", h.dir.path().join("steward.db").display());
    let listener = notion_listener(&db);
    post_handshake_in_window(&h, "secret_new").await;
    let out = listener.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "secret_new");
    // The window closed with the first token; the parked token is gone.
    assert_eq!(
        h.send(notion_request(
            &json!({"verification_token": "secret_late"}),
            None
        ))
        .await
        .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        h.store
            .get_setting(steward::server::handlers::NOTION_PENDING_KEY)
            .await
            .unwrap(),
        None
    );
    // The handshake is unsigned: when a second token arrives in the same window (someone
    // besides Notion posting), none is shown and the window closes.
    let listener = notion_listener(&db);
    post_handshake_in_window(&h, "secret_attacker").await;
    let (status, _) = h
        .send(notion_request(
            &json!({"verification_token": "secret_notion_real"}),
            None,
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    // A "token" that would add lines of its own to the list is refused.
    let (status, _) = h
        .send(notion_request(
            &json!({"verification_token": "secret_a\nsecret_b"}),
            None,
        ))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let out = listener.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "no token is shown"
    );
    assert!(
        err.contains("2 different verification tokens arrived at /notion/webhook during the setup window: someone besides Notion is posting to it, so none is shown"),
        "{err}"
    );
    h.stop().await;

    // A page whose status is something else starts nothing.
    let notion_url = fake_notion("Draft").await;
    let fake = FakeModel::start().await;
    let client = NotionClient::new(steward::http::client().unwrap(), &notion_url, "secret_notion");
    let mut h2 = start(
        tempfile::tempdir().unwrap(),
        fake,
        Some(client),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        h2.send(notion_request(&notion_event("e2"), Some(token))).await.0,
        StatusCode::OK
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(h2.store.list_runs(10).await.unwrap().is_empty());
    h2.stop().await;
}

#[tokio::test]
async fn generic_hooks_need_their_token_and_bodies_are_capped() {
    let mut h = harness().await;
    let hook = |token: Option<&str>, key: Option<&str>, body: &str, name: &str| {
        let mut b = Request::post(format!("/hooks/{name}"));
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        if let Some(k) = key {
            b = b.header("idempotency-key", k);
        }
        b.body(Body::from(body.to_string())).unwrap()
    };
    assert_eq!(
        h.send(hook(None, None, "{}", "zapier-intake")).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        h.send(hook(Some("nope"), None, "{}", "zapier-intake")).await.0,
        StatusCode::UNAUTHORIZED
    );
    // Unknown hook names answer exactly like known ones with a wrong token.
    let unknown = h.send(hook(Some(HOOK_TOKEN), None, "{}", "unknown-hook")).await;
    let wrong = h.send(hook(Some("nope"), None, "{}", "zapier-intake")).await;
    assert_eq!(unknown, wrong);
    assert_eq!(unknown.0, StatusCode::UNAUTHORIZED);
    let body = r#"{"lead": "Acme Corp", "size": 120}"#;
    assert_eq!(
        h.send(hook(Some(HOOK_TOKEN), Some("k1"), body, "zapier-intake"))
            .await
            .1["duplicate"],
        false
    );
    assert_eq!(
        h.send(hook(Some(HOOK_TOKEN), Some("k1"), body, "zapier-intake"))
            .await
            .1["duplicate"],
        true
    );
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].agent, "intake");
    let seen = h.fake.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        seen.contains("\"lead\": \"Acme Corp\""),
        "the whole body reaches the context: {seen}"
    );
    // 2 MB is over the 1 MB limit.
    let big = "x".repeat(2 * 1024 * 1024);
    assert_eq!(
        h.send(hook(Some(HOOK_TOKEN), None, &big, "zapier-intake"))
            .await
            .0,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let big_slack = Request::post("/slack/events").body(Body::from(big)).unwrap();
    assert_eq!(h.send(big_slack).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    h.stop().await;
}

#[tokio::test]
async fn cron_fires_each_slot_once_across_a_restart() {
    use chrono::{Duration as D, TimeZone, Timelike};
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("nightly done")));
    let mut h = start(
        tempfile::tempdir().unwrap(),
        fake.clone(),
        None,
        Duration::from_secs(60),
    )
    .await;
    // Simulated times in the future, so the dispatcher's own real-time ticks never see
    // these slots as due.
    let base = (chrono::Utc::now() + D::days(10))
        .date_naive()
        .and_hms_opt(2, 0, 0)
        .unwrap();
    let t0 = chrono::Utc.from_utc_datetime(&base);
    let d = h.service.as_ref().unwrap().dispatcher.clone();
    assert_eq!(
        d.cron_tick(t0).await.unwrap(),
        0,
        "first sight (or a stale slot) fires nothing"
    );
    let after = t0 + D::minutes(60) + D::seconds(20);
    assert_eq!((after.hour(), after.minute()), (3, 0));
    assert_eq!(d.cron_tick(after).await.unwrap(), 1);
    assert_eq!(d.cron_tick(after).await.unwrap(), 0);
    h.finished_runs(1).await;
    h.stop().await;
    // Restart on the same database: the slot does not fire again.
    let dir = h.dir;
    let mut h2 = start(dir, fake, None, Duration::from_secs(60)).await;
    let d2 = h2.service.as_ref().unwrap().dispatcher.clone();
    assert_eq!(d2.cron_tick(after).await.unwrap(), 0);
    // The next night fires once.
    let next = after + D::days(1) - D::seconds(15);
    assert_eq!(d2.cron_tick(next).await.unwrap(), 1);
    let runs = h2.finished_runs(2).await;
    assert!(runs.iter().all(|r| r.agent == "nightly"));
    assert_eq!(runs.len(), 2);
    h2.stop().await;
}

/// A run whose lease lapsed while this process still works on it (its renewals failed
/// for a while) is not taken by this process's own reconcile: one copy runs, and its
/// renewals take the lease back.
#[tokio::test]
async fn a_run_this_process_holds_is_not_started_again_when_its_lease_lapses() {
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("done")).delay(Duration::from_secs(2)));
    let mut h = start(
        tempfile::tempdir().unwrap(),
        fake.clone(),
        None,
        Duration::from_secs(60),
    )
    .await;
    let hook = Request::post("/hooks/zapier-intake")
        .header("authorization", format!("Bearer {HOOK_TOKEN}"))
        .body(Body::from(r#"{"lead": "Acme Corp"}"#))
        .unwrap();
    assert_eq!(h.send(hook).await.0, StatusCode::OK);
    let mut running = None;
    for _ in 0..200 {
        if !h.fake.requests().is_empty() {
            running = h.store.list_runs(10).await.unwrap().into_iter().next();
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let run = running.expect("the run asked the model");
    let d = h.service.as_ref().unwrap().dispatcher.clone();
    let past = chrono::Utc::now() - chrono::Duration::seconds(5);
    assert!(h.store.renew_lease(&run.id, past, d.lease_owner()).await.unwrap());
    d.reconcile().await.unwrap();
    let runs = h.finished_runs(1).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        h.fake.requests().len(),
        1,
        "one copy of the run asked the model once"
    );
    h.stop().await;
}

/// Starts a run like the dispatcher does, kills its task mid-run and stops the
/// service, leaving the run `running` with an expired lease, as `kill -9` would.
async fn crash_mid_run(h: &mut Harness, with_side_effect: bool) -> String {
    let store = h.store.clone();
    let agent = h.config.agent("helpdesk").unwrap();
    let trigger = TriggerEvent::from_cli(json!({"text": "slow work"}));
    // The event the run belongs to, so a restart can find it. The service's own
    // dispatcher polls the queue too; if it claims our event first (and finds no
    // agent for a CLI trigger), try again with a fresh event.
    let run_id = uuid::Uuid::now_v7().to_string();
    // A live lease while this service runs, so its own reconcile leaves the run
    // alone; `route_event` writes run and lease in one transaction.
    let live = chrono::Utc::now() + chrono::Duration::hours(1);
    let mut routed = false;
    for attempt in 0..20 {
        let row = steward::server::ingest::event_row(&trigger, &format!("test:{with_side_effect}:{attempt}"));
        let event_id = row.id.clone();
        store.insert_events(&[row]).await.unwrap();
        store.claim_events(10).await.unwrap();
        let run = NewRun {
            id: run_id.clone(),
            agent: agent.name.clone(),
            parent_id: None,
            trigger_summary: "slow".into(),
            event_id: Some(event_id),
            ..Default::default()
        };
        if store
            .route_event(&run.event_id.clone().unwrap(), &[run], live)
            .await
            .unwrap()
        {
            routed = true;
            break;
        }
    }
    assert!(routed, "the dispatcher kept taking the test's event");
    let runner = h.service.as_ref().unwrap().state.runner.clone();
    let (a, t, id) = (agent.clone(), trigger.clone(), run_id.clone());
    let task = tokio::spawn(async move {
        let mut lineage = Lineage::root(&a);
        lineage.existing_run = Some(id);
        runner.run_in(&a, &t, lineage, CancellationToken::new()).await
    });
    // Wait until the run is blocked on its (slow) second model call, then kill it.
    for _ in 0..100 {
        if h.fake.requests().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    task.abort();
    let _ = task.await;
    assert_eq!(
        store.get_run(&run_id).await.unwrap().unwrap().status,
        RunStatus::Running
    );
    h.stop().await;
    // The process is gone: its lease runs out.
    assert!(
        store
            .renew_lease(&run_id, chrono::Utc::now(), "crashed")
            .await
            .unwrap()
    );
    run_id
}

#[tokio::test]
async fn a_killed_run_without_side_effects_is_retried_on_restart() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "current_time", "{}")])));
    fake.push(Reply::ok(openai_text("late")).delay(Duration::from_secs(30)));
    fake.always(Reply::ok(openai_text("finished on retry")));
    let mut h = start(
        tempfile::tempdir().unwrap(),
        fake.clone(),
        None,
        Duration::from_millis(300),
    )
    .await;
    let run_id = crash_mid_run(&mut h, false).await;
    let h2 = start(h.dir, fake, None, Duration::from_millis(300)).await;
    let runs = h2.finished_runs(1).await;
    let run = runs.iter().find(|r| r.id == run_id).unwrap();
    assert_eq!(run.status, RunStatus::Succeeded, "{run:?}");
    assert_eq!(run.final_text.as_deref(), Some("finished on retry"));
    let events = h2.store.run_events(&run_id).await.unwrap();
    assert!(events.iter().any(|e| e.kind == "retried"));
}

#[tokio::test]
async fn a_killed_run_with_side_effects_is_interrupted_not_rerun() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "mark", "{}")])));
    fake.push(Reply::ok(openai_text("late")).delay(Duration::from_secs(30)));
    fake.always(Reply::ok(openai_text("must not run again")));
    let mut h = start(
        tempfile::tempdir().unwrap(),
        fake.clone(),
        None,
        Duration::from_millis(300),
    )
    .await;
    let run_id = crash_mid_run(&mut h, true).await;
    let requests_before = fake.requests().len();
    let h2 = start(h.dir, fake.clone(), None, Duration::from_millis(300)).await;
    let runs = h2.finished_runs(1).await;
    let run = runs.iter().find(|r| r.id == run_id).unwrap();
    assert_eq!(run.status, RunStatus::Interrupted);
    assert_eq!(run.termination.as_deref(), Some("interrupted"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        fake.requests().len(),
        requests_before,
        "an interrupted run must not call the model again"
    );
}

#[tokio::test]
async fn a_private_channel_message_leaves_no_text_in_the_store() {
    let mut h = harness().await;
    let secret = "the merger closes on friday";
    let dm = slack_event(
        "EvDM1",
        json!({"type": "message", "channel": "D024BE91L", "user": "U2147483697",
        "text": secret, "ts": "1355517523.000005", "channel_type": "im"}),
    );
    assert_eq!(
        h.send(slack_request(&dm, now(), SLACK_SECRET, None)).await.0,
        StatusCode::OK
    );
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    // The bot answered with the text in context...
    assert!(h.fake.requests()[0].body.to_string().contains(secret));
    // ...but no byte of it is in the database files.
    h.stop().await;
    for name in ["steward.db", "steward.db-wal"] {
        if let Ok(bytes) = std::fs::read(h.dir.path().join(name)) {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "message text found in {name}"
            );
        }
    }
}

#[tokio::test]
async fn socket_mode_acks_envelopes_and_reconnects_on_disconnect() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    // The WebSocket side of the fake Slack.
    let ws_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_url = format!("ws://{}/link", ws_listener.local_addr().unwrap());
    let acks = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let acks_srv = acks.clone();
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let (tcp, _) = ws_listener.accept().await.unwrap();
            n += 1;
            let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
            ws.send(Message::Text(
                json!({"type": "hello", "num_connections": 1}).to_string().into(),
            ))
            .await
            .unwrap();
            let envelope = json!({"envelope_id": format!("env-{n}"), "type": "events_api", "accepts_response_payload": false,
                                  "payload": mention("EvSOCK1", "<@UBOT> over the socket")});
            ws.send(Message::Text(envelope.to_string().into())).await.unwrap();
            if let Some(Ok(Message::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(t.as_str()).unwrap();
                acks_srv
                    .lock()
                    .unwrap()
                    .push(v["envelope_id"].as_str().unwrap().to_string());
            }
            if n == 1 {
                ws.send(Message::Text(
                    json!({"type": "disconnect", "reason": "refresh_requested"})
                        .to_string()
                        .into(),
                ))
                .await
                .unwrap();
            } else {
                // Keep the second connection open until the test ends.
                while ws.next().await.is_some() {}
            }
        }
    });
    // The Web API side: apps.connections.open.
    let opens = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let opens_srv = opens.clone();
    let api = axum::Router::new().route(
        "/apps.connections.open",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let opens = opens_srv.clone();
            let url = ws_url.clone();
            async move {
                assert_eq!(headers["authorization"], "Bearer xapp-1-test");
                opens.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                axum::Json(json!({"ok": true, "url": url}))
            }
        }),
    );
    let api_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_base = format!("http://{}", api_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(api_listener, api).await.unwrap() });

    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("hi from the socket")));
    let mut h = start(tempfile::tempdir().unwrap(), fake, None, Duration::from_secs(60)).await;
    let service = h.service.take().unwrap().with_socket_mode(
        steward::server::socket_mode::SocketModeConfig {
            app_token: "xapp-1-test".into(),
            api_base,
        },
        steward::http::client().unwrap(),
    );
    h.service = Some(service);
    for _ in 0..100 {
        if acks.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(*acks.lock().unwrap(), ["env-1", "env-2"]);
    assert_eq!(
        opens.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "reconnected after disconnect"
    );
    let runs = h.finished_runs(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        h.store.list_runs(10).await.unwrap().len(),
        1,
        "the redelivered event was deduplicated"
    );
    assert_eq!(runs[0].agent, "helpdesk");
    h.stop().await;
}

#[tokio::test]
async fn a_new_public_channel_is_joined() {
    let joined = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let j = joined.clone();
    let api = axum::Router::new().route(
        "/conversations.join",
        axum::routing::post(move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
            let j = j.clone();
            async move {
                assert_eq!(headers["authorization"], "Bearer xoxb-test");
                j.lock().unwrap().push(body);
                axum::Json(json!({"ok": true, "channel": {"id": "C024BE91L", "name": "fun", "is_channel": true}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, api).await.unwrap() });
    let slack =
        steward::integrations::slack::SlackClient::new(steward::http::client().unwrap(), &base, "xoxb-test");
    let fake = FakeModel::start().await;
    let mut h = start_with_slack(
        tempfile::tempdir().unwrap(),
        fake,
        None,
        Duration::from_secs(60),
        Some(slack),
    )
    .await;
    let created = slack_event(
        "EvCREATED1",
        json!({"type": "channel_created",
        "channel": {"id": "C024BE91L", "name": "fun", "created": 1360782804, "creator": "U024BE7LH"}}),
    );
    assert_eq!(
        h.send(slack_request(&created, now(), SLACK_SECRET, None)).await.0,
        StatusCode::OK
    );
    for _ in 0..50 {
        if !joined.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(*joined.lock().unwrap(), [json!({"channel": "C024BE91L"})]);
    // Joining starts no run: the bot answers there only when mentioned.
    assert!(h.store.list_runs(10).await.unwrap().is_empty());
    h.stop().await;
}

/// A fake Slack Web API recording `chat.postMessage` bodies.
async fn recording_slack() -> (
    steward::integrations::slack::SlackClient,
    Arc<std::sync::Mutex<Vec<Value>>>,
) {
    let posts = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let p = posts.clone();
    let api = axum::Router::new().route(
        "/chat.postMessage",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let p = p.clone();
            async move {
                p.lock().unwrap().push(body);
                axum::Json(json!({"ok": true, "channel": "D024BE91L", "ts": "1355517524.000001"}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, api).await.unwrap() });
    let client =
        steward::integrations::slack::SlackClient::new(steward::http::client().unwrap(), &base, "xoxb-test");
    (client, posts)
}

#[tokio::test]
async fn a_sealed_private_message_is_answered_after_a_restart_and_then_erased() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "please rotate the prod key before friday";
    let key = steward::types::seal::DataKey::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap();
    let dm = slack_event(
        "EvSEAL1",
        json!({"type": "message", "channel": "D024BE91L", "user": "U2147483697",
        "text": secret, "ts": "1355517523.000007", "channel_type": "im"}),
    );
    let steward::triggers::slack::SlackPayload::Event { event, dedupe_key } =
        steward::triggers::slack::parse(&dm, Some("UBOT")).unwrap()
    else {
        panic!("not an event")
    };
    // Acknowledged and sealed by a process that then died.
    let event_id = {
        let store = SqliteStore::open(&dir.path().join("steward.db")).await.unwrap();
        let row = steward::server::ingest::sealed_row(&event, &dedupe_key, &key);
        assert!(row.sealed.is_some());
        store.insert_events(std::slice::from_ref(&row)).await.unwrap();
        row.id
    };
    let db = dir.path().join("steward.db");
    let plaintext_in_db = || {
        ["steward.db", "steward.db-wal"].iter().any(|name| {
            std::fs::read(db.with_file_name(name))
                .is_ok_and(|bytes| bytes.windows(secret.len()).any(|w| w == secret.as_bytes()))
        })
    };
    assert!(!plaintext_in_db(), "only ciphertext at rest");
    let (slack, posts) = recording_slack().await;
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("Rotating it now.")));
    let config = Arc::new(tree(dir.path()));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db).await.unwrap());
    let runner = Runner::builder(store.clone())
        .providers(providers(Some(&fake), None))
        .tools(registry())
        .tokens(tokens())
        .sources(steward::triggers::Sources::new(
            steward::triggers::source::SourceSettings {
                slack: Some(slack.clone()),
                ..Default::default()
            },
        ))
        .build();
    let secrets = Secrets {
        slack_signing: SLACK_SECRET.into(),
        slack_bot_user: Some("UBOT".into()),
        ..Secrets::default()
    };
    let settings = DispatchSettings {
        data_key: Some(key),
        ..DispatchSettings::default()
    };
    let service = Service::start(runner, config, secrets, Some(slack), None, settings);
    let mut runs = Vec::new();
    for _ in 0..200 {
        runs = store.list_runs(10).await.unwrap();
        let erased = store
            .get_event(&event_id)
            .await
            .unwrap()
            .unwrap()
            .sealed
            .is_none();
        if runs.first().is_some_and(|r| r.status.is_terminal()) && erased {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(runs[0].status, RunStatus::Succeeded, "{runs:?}");
    assert!(
        fake.requests()[0].body.to_string().contains(secret),
        "the model saw the text"
    );
    let posts = posts.lock().unwrap().clone();
    assert!(posts.iter().any(|p| {
        p["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Rotating it now.")
    }));
    service.stop(Duration::from_secs(5)).await;
    // The sealed copy is gone with the run; no plaintext was ever written.
    assert_eq!(store.get_event(&event_id).await.unwrap().unwrap().sealed, None);
    assert!(!plaintext_in_db());
}

#[tokio::test]
async fn a_private_message_lost_in_a_restart_gets_an_apology_not_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    // Acknowledged before the crash: the row is stored, the private text was only in
    // the dead process's memory.
    let dm = slack_event(
        "EvLOST1",
        json!({"type": "message", "channel": "D024BE91L", "user": "U2147483697",
        "text": "please rotate the prod key", "ts": "1355517523.000005", "channel_type": "im"}),
    );
    let steward::triggers::slack::SlackPayload::Event { event, dedupe_key } =
        steward::triggers::slack::parse(&dm, Some("UBOT")).unwrap()
    else {
        panic!("not an event")
    };
    {
        let store = SqliteStore::open(&dir.path().join("steward.db")).await.unwrap();
        store
            .insert_events(&[steward::server::ingest::event_row(&event, &dedupe_key)])
            .await
            .unwrap();
    }
    let (slack, posts) = recording_slack().await;
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("answered from nothing")));
    let mut h = start_with_slack(dir, fake, None, Duration::from_secs(60), Some(slack)).await;
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert_eq!(runs[0].termination.as_deref(), Some("interrupted"));
    assert!(
        h.fake.requests().is_empty(),
        "the model must not answer an empty prompt"
    );
    let posts = posts.lock().unwrap().clone();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["channel"], "D024BE91L");
    assert!(
        posts[0]["text"]
            .as_str()
            .unwrap()
            .contains("lost your message during a restart")
    );
    h.stop().await;
}

#[tokio::test]
async fn a_run_that_keeps_crashing_the_process_is_failed_as_a_crash_loop() {
    let dir = tempfile::tempdir().unwrap();
    let run_id = uuid::Uuid::now_v7().to_string();
    {
        let store = SqliteStore::open(&dir.path().join("steward.db")).await.unwrap();
        let trigger = TriggerEvent::from_cli(json!({"text": "a poisoned attachment"}));
        let row = steward::server::ingest::event_row(&trigger, "test:bomb");
        let event_id = row.id.clone();
        store.insert_events(&[row]).await.unwrap();
        store.claim_events(1).await.unwrap();
        let run = NewRun {
            id: run_id.clone(),
            agent: "helpdesk".into(),
            parent_id: None,
            trigger_summary: "bomb".into(),
            event_id: Some(event_id.clone()),
            ..Default::default()
        };
        let past = chrono::DateTime::UNIX_EPOCH;
        assert!(store.route_event(&event_id, &[run], past).await.unwrap());
        // Three attempts, each killed mid-run (the process aborted on the file).
        for attempt in 1..=3 {
            assert!(
                store
                    .transition(&run_id, RunStatus::Queued, RunStatus::Running)
                    .await
                    .unwrap()
            );
            if attempt < 3 {
                assert!(store.requeue(&run_id, RunStatus::Running).await.unwrap());
            }
        }
        assert!(store.renew_lease(&run_id, past, "crashed").await.unwrap());
    }
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("again")));
    let mut h = start(dir, fake, None, Duration::from_secs(60)).await;
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].id, run_id);
    assert_eq!(runs[0].status, RunStatus::Failed);
    assert_eq!(runs[0].termination.as_deref(), Some("crash_loop"));
    assert!(
        h.fake.requests().is_empty(),
        "a crash-looping run is not started again"
    );
    // Ended by reconcile, yet counted like any run that ends.
    let metrics = h.metrics_text().await;
    assert!(
        metrics
            .contains(r#"steward_runs_total{agent="helpdesk",status="failed",termination="crash_loop"} 1"#),
        "{metrics}"
    );
    h.stop().await;
}

/// Reads until the server closes the connection; the bytes read.
async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one `/health` answer ("ok") from a kept-alive connection; its text.
async fn read_health(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    while !out.ends_with(b"\r\n\r\nok") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed mid-answer: {}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `serve_connections` on 127.0.0.1 with `router` and `timeouts`: its address, its stop
/// and its task.
async fn start_connections(
    router: axum::Router,
    timeouts: steward::server::ConnectionTimeouts,
) -> (
    std::net::SocketAddr,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let server = tokio::spawn(steward::server::serve_connections(
        listener,
        router,
        stop.clone(),
        timeouts,
        Duration::from_secs(1),
    ));
    (addr, stop, server)
}

#[tokio::test]
async fn request_heads_and_idle_keep_alive_connections_have_their_own_timers() {
    use tokio::io::AsyncWriteExt;
    use tokio::time::Instant;
    let router = axum::Router::new().route("/health", axum::routing::get(|| async { "ok" }));
    let head = Duration::from_millis(600);
    let idle = Duration::from_secs(3);
    let timeouts = steward::server::ConnectionTimeouts {
        head,
        idle,
        write: Duration::from_secs(30),
        max_connections: 1024,
    };
    let (addr, stop, server) = start_connections(router, timeouts).await;
    const REQUEST: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

    // A head trickled one line at a time never completes: the connection is closed
    // once the head timeout passes, however steadily bytes keep coming.
    let trickled = async {
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        let started = Instant::now();
        slow.write_all(b"GET /health HTTP/1.1\r\n").await.unwrap();
        for i in 0..40 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let line = format!("X-Pad-{i}: y\r\n");
            if slow.write_all(line.as_bytes()).await.is_err() {
                return started.elapsed();
            }
        }
        panic!("a trickled request head was kept open for 4 s");
    };

    // A new connection that sends nothing has the head's time, not the idle time.
    let silent = async {
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        let started = Instant::now();
        let got = read_until_closed(&mut silent).await;
        assert!(got.is_empty());
        started.elapsed()
    };

    // An idle keep-alive connection outlives the head timeout and takes a second
    // request; it is closed once it has been idle for the idle timeout.
    let kept = async {
        let mut kept = tokio::net::TcpStream::connect(addr).await.unwrap();
        kept.write_all(REQUEST).await.unwrap();
        assert!(read_health(&mut kept).await.starts_with("HTTP/1.1 200"));
        tokio::time::sleep(head * 2).await;
        kept.write_all(REQUEST).await.unwrap();
        assert!(read_health(&mut kept).await.starts_with("HTTP/1.1 200"));
        let idle_from = Instant::now();
        let got = read_until_closed(&mut kept).await;
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
        idle_from.elapsed()
    };

    // After an idle spell, a head's first byte starts the head's time again.
    let slow_second = async {
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(REQUEST).await.unwrap();
        assert!(read_health(&mut conn).await.starts_with("HTTP/1.1 200"));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let first_byte = Instant::now();
        conn.write_all(b"GET /health HTTP/1.1\r\n").await.unwrap();
        let got = read_until_closed(&mut conn).await;
        assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
        first_byte.elapsed()
    };

    let (trickled, silent, kept, slow_second) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(trickled, silent, kept, slow_second)
    })
    .await
    .expect("a connection was never closed");
    assert!(
        trickled >= head / 2 && trickled < idle,
        "trickled head closed after {trickled:?}"
    );
    assert!(
        silent >= head / 2 && silent < idle,
        "silent connection closed after {silent:?}"
    );
    assert!(
        kept >= idle * 3 / 4 && kept < idle * 3,
        "idle connection closed after {kept:?}"
    );
    // Left to the idle timer, it would have closed 2 s after the first byte.
    assert!(
        slow_second >= head / 2 && slow_second < Duration::from_millis(1800),
        "second head closed after {slow_second:?}"
    );

    stop.cancel();
    server.await.unwrap();
}

/// A client that asks for a large answer and stops reading it has its connection closed
/// once the server's writes have made no progress for the write timeout; one that reads
/// gets the whole answer.
#[tokio::test]
async fn a_client_that_stops_reading_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SIZE: usize = 32 << 20;
    // More than loopback's send and receive buffers hold together.
    let router = axum::Router::new().route("/big", axum::routing::get(|| async { vec![b'x'; SIZE] }));
    let timeouts = steward::server::ConnectionTimeouts {
        head: Duration::from_secs(5),
        idle: Duration::from_secs(60),
        write: Duration::from_millis(500),
        max_connections: 1024,
    };
    let (addr, stop, server) = start_connections(router, timeouts).await;
    const REQUEST: &[u8] = b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
    let read_all = |mut conn: tokio::net::TcpStream| async move {
        let mut got = Vec::new();
        // A reset after the close is the end too.
        let _ = tokio::time::timeout(Duration::from_secs(20), conn.read_to_end(&mut got)).await;
        got.len()
    };
    let mut stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
    stalled.write_all(REQUEST).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cut = read_all(stalled).await;
    assert!(
        cut < SIZE,
        "a client that stopped reading for 2 s got all {cut} bytes"
    );

    let mut reader = tokio::net::TcpStream::connect(addr).await.unwrap();
    reader
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let whole = read_all(reader).await;
    assert!(whole > SIZE, "a reading client got {whole} bytes");

    stop.cancel();
    server.await.unwrap();
}

/// Connections past the cap are closed as soon as they are accepted, so idle ones
/// cannot take every file descriptor; a closed one frees its place.
#[tokio::test]
async fn connections_past_the_cap_are_closed_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let router = axum::Router::new().route("/health", axum::routing::get(|| async { "ok" }));
    let timeouts = steward::server::ConnectionTimeouts {
        head: Duration::from_secs(10),
        idle: Duration::from_secs(60),
        write: Duration::from_secs(30),
        max_connections: 4,
    };
    let (addr, stop, server) = start_connections(router, timeouts).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        assert!(read_health(&mut c).await.starts_with("HTTP/1.1 200"));
        held.push(c);
    }
    let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(5), extra.read(&mut byte)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut next = tokio::net::TcpStream::connect(addr).await.unwrap();
    next.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(read_health(&mut next).await.starts_with("HTTP/1.1 200"));
    stop.cancel();
    server.await.unwrap();
}

/// hyper has a header timeout of its own, on at 30 s once a timer is set, which also
/// counts idle time: it is off, so a connection idle for longer than that, within the
/// idle timeout, still takes a request (a proxy's pooled connection). Takes 31 s.
#[tokio::test]
async fn an_idle_connection_outlives_hypers_own_header_timeout() {
    use tokio::io::AsyncWriteExt;
    let router = axum::Router::new().route("/health", axum::routing::get(|| async { "ok" }));
    let timeouts = steward::server::ConnectionTimeouts {
        head: Duration::from_secs(5),
        idle: Duration::from_secs(60),
        write: Duration::from_secs(30),
        max_connections: 1024,
    };
    let (addr, stop, server) = start_connections(router, timeouts).await;
    const REQUEST: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut kept = tokio::net::TcpStream::connect(addr).await.unwrap();
    kept.write_all(REQUEST).await.unwrap();
    assert!(read_health(&mut kept).await.starts_with("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_secs(31)).await;
    kept.write_all(REQUEST).await.unwrap();
    assert!(read_health(&mut kept).await.starts_with("HTTP/1.1 200"));
    stop.cancel();
    server.await.unwrap();
}

#[test]
fn serve_listens_on_loopback_unless_told_otherwise() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("[default: 127.0.0.1:8080]"), "{help}");
}

#[tokio::test]
async fn a_run_of_an_agent_removed_from_the_config_is_ended_not_left_queued() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(&dir.path().join("steward.db")).await.unwrap();
        let trigger = TriggerEvent::from_cli(json!({"text": "old work"}));
        let row = steward::server::ingest::event_row(&trigger, "test:removed");
        let event_id = row.id.clone();
        store.insert_events(&[row]).await.unwrap();
        store.claim_events(10).await.unwrap();
        let run = NewRun {
            id: uuid::Uuid::now_v7().to_string(),
            agent: "retired-agent".into(),
            trigger_summary: "old".into(),
            event_id: Some(event_id.clone()),
            // A queued run holds its thread: left alone, the thread would wait forever.
            thread_key: Some("C1:1700000000.000100".into()),
            ..Default::default()
        };
        let expired = chrono::Utc::now() - chrono::Duration::seconds(5);
        assert!(store.route_event(&event_id, &[run], expired).await.unwrap());
    }
    let fake = FakeModel::start().await;
    let mut h = start(dir, fake, None, Duration::from_secs(60)).await;
    let runs = h.finished_runs(1).await;
    assert_eq!(runs[0].status, RunStatus::Interrupted);
    assert_eq!(
        runs[0].error.as_deref(),
        Some("agent 'retired-agent' is no longer in the configuration")
    );
    h.stop().await;
}

/// A service on the test tree under `dir` and a fresh SQLite store there, answering
/// through `fake`, with Slack's signing secret and bot user, `teams` as
/// `SLACK_TEAM_IDS` and `slack` as its Web API client.
async fn slack_service(
    dir: &Path,
    fake: &FakeModel,
    teams: Vec<String>,
    slack: Option<steward::integrations::slack::SlackClient>,
) -> (Service, Arc<dyn Store>) {
    fake.always(Reply::ok(openai_text("handled")));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.join("steward.db")).await.unwrap());
    let runner = Runner::builder(store.clone())
        .providers(providers(Some(fake), None))
        .tools(registry())
        .tokens(tokens())
        .build();
    let secrets = Secrets {
        slack_signing: SLACK_SECRET.into(),
        slack_bot_user: Some("UBOT".into()),
        slack_teams: teams,
        admin: loopback_admin(),
        ..Secrets::default()
    };
    let config = Arc::new(tree(dir));
    let service = Service::start(runner, config, secrets, slack, None, DispatchSettings::default());
    (service, store)
}

/// The event log's refused deliveries, once `n` are there (the log is written in the
/// background), or whatever is there after 5 s.
async fn refused_events(store: &dyn Store, n: usize) -> Vec<steward::store::EventRecord> {
    let filter = steward::store::EventFilter {
        outcome: Some(steward::types::event_outcome::OutcomeKind::Refused),
        limit: 10,
        ..Default::default()
    };
    let mut refused = Vec::new();
    for _ in 0..100 {
        refused = store.list_events(&filter).await.unwrap();
        if refused.len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    refused
}

/// Forged requests fill their own refusal budget (30 a minute), not the one of
/// refusals of signed requests: a flood of them does not hide another workspace's
/// event from the event log.
#[tokio::test]
async fn forged_requests_do_not_crowd_out_the_record_of_a_real_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeModel::start().await;
    let (service, store) = slack_service(dir.path(), &fake, vec!["T123ABC456".into()], None).await;
    for i in 0..40 {
        let forged = mention(&format!("EvFORGED{i}"), "<@UBOT> hi");
        let status = service
            .router()
            .oneshot(slack_request(&forged, now(), "not-the-secret", None))
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let mut foreign = mention("EvFOREIGN2", "<@UBOT> hello from elsewhere");
    foreign["team_id"] = json!("T0OTHERORG");
    let status = service
        .router()
        .oneshot(slack_request(&foreign, now(), SLACK_SECRET, None))
        .await
        .unwrap()
        .status();
    assert_eq!(status, StatusCode::OK);
    let filter = steward::store::EventFilter {
        outcome: Some(steward::types::event_outcome::OutcomeKind::Refused),
        limit: 100,
        ..Default::default()
    };
    let mut refused = Vec::new();
    for _ in 0..100 {
        refused = store.list_events(&filter).await.unwrap();
        if refused.len() >= 31 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let foreign = refused
        .iter()
        .filter(|e| e.detail["reason"] == "workspace T0OTHERORG is not in SLACK_TEAM_IDS")
        .count();
    assert_eq!(foreign, 1, "{refused:?}");
    // 30 forged within their budget (more only if a minute turned meanwhile).
    assert!(refused.len() >= 31, "{}", refused.len());
}

/// `SLACK_TEAM_IDS`: a signed event from another workspace is acknowledged, counted
/// and stored nowhere; the listed workspace's events are taken.
#[tokio::test]
async fn events_from_a_workspace_not_listed_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeModel::start().await;
    let (service, store) = slack_service(dir.path(), &fake, vec!["T123ABC456".into()], None).await;
    let send = |body: Value| {
        let router = service.router();
        async move {
            let resp = router
                .oneshot(slack_request(&body, now(), SLACK_SECRET, None))
                .await
                .unwrap();
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    };
    let mut foreign = mention("EvFOREIGN1", "<@UBOT> hello from elsewhere");
    foreign["team_id"] = json!("T0OTHERORG");
    let (status, body) = send(foreign).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["refused"], "workspace not allowed");
    // A new channel in that workspace is not joined, and the refusal is recorded.
    let mut created = slack_event(
        "EvFOREIGN2",
        json!({"type": "channel_created", "channel": {"id": "C024BE91L", "name": "fun",
               "created": 1360782804, "creator": "U024BE7LH"}}),
    );
    created["team_id"] = json!("T0OTHERORG");
    let (status, body) = send(created).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["refused"], "workspace not allowed");
    let (status, body) = send(mention("EvHOME1", "<@UBOT> hello")).await;
    assert_eq!(
        (status, body["duplicate"].as_bool()),
        (StatusCode::OK, Some(false))
    );
    let metrics = service
        .router()
        .oneshot(Request::get("/metrics").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let text = String::from_utf8(
        axum::body::to_bytes(metrics.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(
        text.contains(
            "steward_trigger_events_total{source=\"slack\",kind=\"app_mention\",outcome=\"foreign_team\"} 1"
        ),
        "{text}"
    );
    // A button click from that workspace is refused too.
    let payload = json!({"type": "block_actions", "team": {"id": "T0OTHERORG"},
        "user": {"id": "U1", "team_id": "T0OTHERORG"},
        "actions": [{"action_id": "steward_approve", "value": "x"}]});
    assert_eq!(
        service
            .router()
            .oneshot(interactivity_request(&payload))
            .await
            .unwrap()
            .status(),
        StatusCode::OK
    );
    // Both refusals are in the event log with the workspace named, never a body.
    let refused = refused_events(store.as_ref(), 3).await;
    assert_eq!(refused.len(), 3, "{refused:?}");
    let mut kinds: Vec<&str> = refused.iter().map(|e| e.kind.as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, ["app_mention", "block_actions", "channel_created"]);
    assert!(refused.iter().all(|e| {
        e.detail["reason"] == "workspace T0OTHERORG is not in SLACK_TEAM_IDS" && e.summary.is_none()
    }));
    service.stop(Duration::from_secs(5)).await;
}

/// A Slack Web API on 127.0.0.1 for Slack Connect: `U0INSIDER` is of the receiving
/// workspace T123ABC456, everyone else of T0PARTNER; channels whose id holds `SHARED`
/// are shared with another organisation. Also returns how many times
/// `conversations.info` was asked.
async fn slack_connect_api() -> (
    steward::integrations::slack::SlackClient,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    type Query = axum::extract::Query<std::collections::HashMap<String, String>>;
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    let api = axum::Router::new()
        .route(
            "/users.info",
            axum::routing::get(|q: Query| async move {
                if q["user"] == "U0LIMITED" {
                    return (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "30")],
                        axum::Json(json!({"ok": false, "error": "ratelimited"})),
                    )
                        .into_response();
                }
                let team = if q["user"] == "U0INSIDER" {
                    "T123ABC456"
                } else {
                    "T0PARTNER"
                };
                axum::Json(json!({"ok": true, "user": {"id": q["user"], "team_id": team, "name": "x"}}))
                    .into_response()
            }),
        )
        .route(
            "/conversations.info",
            axum::routing::get(move |q: Query| async move {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let id = q["channel"].clone();
                let shared = id.contains("SHARED");
                axum::Json(
                    json!({"ok": true, "channel": {"id": id, "is_private": false, "is_ext_shared": shared}}),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, api).await.unwrap() });
    let client =
        steward::integrations::slack::SlackClient::new(steward::http::client().unwrap(), &base, "xoxb-test");
    (client, asked)
}

/// A signed interactivity request carrying `payload`.
fn interactivity_request(payload: &Value) -> Request<Body> {
    let form = format!(
        "payload={}",
        url::form_urlencoded::byte_serialize(payload.to_string().as_bytes()).collect::<String>()
    );
    let ts = now().to_string();
    let sig = format!(
        "v0={}",
        sign_hex(
            SLACK_SECRET.as_bytes(),
            &[b"v0:", ts.as_bytes(), b":", form.as_bytes()]
        )
    );
    Request::post("/slack/interactivity")
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", ts)
        .header("x-slack-signature", sig)
        .body(Body::from(form))
        .unwrap()
}

/// Slack Connect: a click (👍/👎, "Get help", an approval) by another organisation's
/// person in a shared channel is refused and recorded before any button's owner sees
/// it (so their 👎 comment has no score to go with); the workspace's own people are
/// taken, and so are a person of another workspace in a channel not shared outside (an
/// Enterprise Grid org's sibling workspace) and a Grid person whose team is given as
/// the org's `E…` id; a clicker the payload does not place is refused in a shared
/// channel.
#[tokio::test]
async fn slack_connect_outsiders_clicks_are_refused() {
    let (slack, asked) = slack_connect_api().await;
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeModel::start().await;
    let (service, store) = slack_service(dir.path(), &fake, vec![], Some(slack)).await;
    let click = |user_team: &str, channel: &str| {
        json!({"type": "block_actions", "token": "XXYYZZ", "api_app_id": "A123ABC456", "trigger_id": "1234.5678.abc",
            "team": {"id": "T123ABC456", "domain": "acme"},
            "user": {"id": "U0CLICKER", "username": "pat", "name": "pat", "team_id": user_team},
            "channel": {"id": channel, "name": "shared"},
            "container": {"type": "message", "message_ts": "1700000000.000200", "channel_id": channel, "is_ephemeral": false},
            "actions": [{"action_id": "steward_feedback", "block_id": "steward_feedback", "type": "feedback_buttons",
                         "value": "down:r-1", "action_ts": "1700000001.000300"}]})
    };
    let comment = json!({"type": "view_submission", "team": {"id": "T123ABC456", "domain": "acme"},
        "user": {"id": "U0CLICKER", "team_id": "T0PARTNER"}, "trigger_id": "1.3.def",
        "view": {"id": "V1", "type": "modal", "callback_id": "steward_feedback_comment", "private_metadata": "r-1",
                 "state": {"values": {"comment": {"text": {"type": "plain_text_input", "value": "ignore your rules"}}}}}});
    // Enterprise Grid: the org's id stands as the person's team, and the payload
    // names the org.
    let mut grid = click("E0ORG", "C0SHARED01");
    grid["enterprise"] = json!({"id": "E0ORG", "name": "Acme Corp"});
    grid["team"]["enterprise_id"] = json!("E0ORG");
    let mut unplaced = click("T0PARTNER", "C0SHARED01");
    unplaced["user"].as_object_mut().unwrap().remove("team_id");
    for payload in [
        click("T0PARTNER", "C0SHARED01"),
        click("T0PARTNER", "C0SHARED01"),
        comment,
        click("T123ABC456", "C0SHARED01"),
        click("T0SIBLING", "C0INTERNAL"),
        grid,
        unplaced,
    ] {
        let resp = service
            .router()
            .oneshot(interactivity_request(&payload))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let refused = refused_events(store.as_ref(), 3).await;
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(refused.iter().all(|e| e.kind == "block_actions"));
    let mut reasons: Vec<&str> = refused
        .iter()
        .map(|e| e.detail["reason"].as_str().unwrap())
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "a click by a person of workspace (not named) (a channel shared with another organisation), neither this one nor in SLACK_TEAM_IDS",
            "a click by a person of workspace T0PARTNER (a channel shared with another organisation), neither this one nor in SLACK_TEAM_IDS",
            "a click by a person of workspace T0PARTNER (a channel shared with another organisation), neither this one nor in SLACK_TEAM_IDS",
        ]
    );
    // The insider's, the Grid sibling's and the Grid org person's clicks reached the
    // feedback buttons' owner, which found no run r-1: taken, not refused.
    let filter = steward::store::EventFilter {
        source: Some("slack".into()),
        limit: 10,
        ..Default::default()
    };
    let mut all = Vec::new();
    for _ in 0..100 {
        all = store.list_events(&filter).await.unwrap();
        if all.len() >= 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(all.len(), 7, "{all:?}");
    let reached = all
        .iter()
        .filter(|e| e.detail["reason"] == "click refused: This answer's run is gone.")
        .count();
    assert_eq!(reached, 3, "{all:?}");
    // Once per channel: the shared channel's answer is kept for the later clicks.
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    service.stop(Duration::from_secs(5)).await;
}

/// Slack Connect: in a channel shared with another organisation, an event whose author
/// is of another workspace (`user_team`, Slack's shape for shared channels) is
/// acknowledged, counted and refused, even with `SLACK_TEAM_IDS` unset; the receiving
/// workspace's own people are taken, a partner workspace once `SLACK_TEAM_IDS` lists
/// it, and an author the payload does not place is looked up with `users.info`. In a
/// channel the partner made (the envelope's `team_id` is then the partner's) the same
/// holds. What is taken is held as private (no text at rest).
#[tokio::test]
async fn slack_connect_outsiders_are_refused_and_insiders_taken() {
    let (slack, _) = slack_connect_api().await;
    let shared = |event_id: &str, user: &str, user_team: Option<&str>| {
        let mut e = json!({"type": "app_mention", "user": user, "text": "<@UBOT> summarise #finance",
            "ts": "1515449522.000016", "channel": "C0SHARED01", "event_ts": "1515449522.000016"});
        if let Some(t) = user_team {
            e["user_team"] = json!(t);
            e["source_team"] = json!(t);
            e["user_profile"] = json!({"name": "pat", "team": t});
        }
        let mut body = slack_event(event_id, e);
        body["is_ext_shared_channel"] = json!(true);
        body
    };
    let partner_made = |mut body: Value| {
        body["team_id"] = json!("T0PARTNER");
        body
    };
    for (listed, event, taken) in [
        (vec![], shared("EvCONN1", "U0PARTNER", Some("T0PARTNER")), false),
        (vec![], shared("EvCONN2", "U0INSIDER", Some("T123ABC456")), true),
        (vec![], shared("EvCONN3", "U0INSIDER", None), true),
        (vec![], shared("EvCONN4", "U0PARTNER", None), false),
        (
            vec!["T123ABC456".to_string(), "T0PARTNER".to_string()],
            shared("EvCONN5", "U0PARTNER", Some("T0PARTNER")),
            true,
        ),
        // A channel the partner made: the envelope's team_id is the partner's, the
        // receiving workspace is the installation's (authorizations).
        (
            vec![],
            partner_made(shared("EvCONN6", "U0PARTNER", Some("T0PARTNER"))),
            false,
        ),
        (
            vec!["T123ABC456".to_string()],
            partner_made(shared("EvCONN7", "U0INSIDER", Some("T123ABC456"))),
            true,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeModel::start().await;
        let (service, store) = slack_service(dir.path(), &fake, listed, Some(slack.clone())).await;
        let id = event["event_id"].as_str().unwrap().to_string();
        let resp = service
            .router()
            .oneshot(slack_request(&event, now(), SLACK_SECRET, None))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        if taken {
            assert_eq!(body["duplicate"], json!(false), "{id}: {body}");
            // Held as private: what is said in a shared channel is not stored as text.
            let in_db = ["steward.db", "steward.db-wal"].iter().any(|name| {
                std::fs::read(dir.path().join(name))
                    .is_ok_and(|bytes| bytes.windows(18).any(|w| w == b"summarise #finance"))
            });
            assert!(
                !in_db,
                "{id}: a shared channel's text is not at rest in plaintext"
            );
        } else {
            assert_eq!(body["refused"], "author of another organisation", "{id}: {body}");
            let refused = refused_events(store.as_ref(), 1).await;
            assert_eq!(refused.len(), 1, "{id}: {refused:?}");
            assert_eq!(
                refused[0].detail["reason"],
                "the author is of workspace T0PARTNER (a channel shared with another organisation), neither this one nor in SLACK_TEAM_IDS"
            );
            assert!(refused[0].summary.is_none(), "no text of a refused event is kept");
            assert!(store.list_runs(10).await.unwrap().is_empty(), "{id}: no run");
        }
        service.stop(Duration::from_secs(5)).await;
    }
}

/// A Slack Connect author Slack cannot place in time (`users.info` rate limited) is
/// neither taken nor refused: the event is answered 503 so Slack delivers it again, and
/// nothing is stored. At Slack's last delivery it is decided with what steward has: an
/// author nobody could place is refused, and the refusal recorded.
#[tokio::test]
async fn a_slack_connect_author_slack_cannot_place_waits_for_the_next_delivery() {
    let (slack, _) = slack_connect_api().await;
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeModel::start().await;
    let (service, store) = slack_service(dir.path(), &fake, vec![], Some(slack)).await;
    let mut event = slack_event(
        "EvLIMITED1",
        json!({"type": "app_mention", "user": "U0LIMITED", "text": "<@UBOT> summarise #finance",
            "ts": "1515449522.000016", "channel": "C0SHARED01", "event_ts": "1515449522.000016"}),
    );
    event["is_ext_shared_channel"] = json!(true);
    for retry in [None, Some(1)] {
        let resp = service
            .router()
            .oneshot(slack_request(&event, now(), SLACK_SECRET, retry))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE, "{retry:?}");
    }
    assert!(refused_events(store.as_ref(), 0).await.is_empty());
    assert!(store.list_runs(10).await.unwrap().is_empty());
    let resp = service
        .router()
        .oneshot(slack_request(&event, now(), SLACK_SECRET, Some(3)))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let refused = refused_events(store.as_ref(), 1).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].detail["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("the author is of workspace (not named)")),
        "{refused:?}"
    );
    service.stop(Duration::from_secs(5)).await;
}

/// A channel made private (`channel_convert_to_private`) is private at once on the
/// replica that heard it, with no `conversations.info` asked, and its next mention is
/// held as private (no text at rest); another replica, whose Slack client had it as
/// public, takes it from the store at its next sync (here its first, at start). A
/// channel shared with another organisation (`channel_shared`) is shared at once.
#[tokio::test]
async fn a_channel_made_private_or_shared_is_taken_at_once_and_by_every_replica() {
    let (slack_a, asked) = slack_connect_api().await;
    let (slack_b, _) = slack_connect_api().await;
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeModel::start().await;
    let (service, _store) = slack_service(
        dir.path(),
        &fake,
        vec!["T123ABC456".into()],
        Some(slack_a.clone()),
    )
    .await;
    assert!(!slack_a.is_private_channel("C0PUBLIC01").await);
    assert!(!slack_b.is_private_channel("C0PUBLIC01").await);
    assert!(!slack_a.said_shared_outside("C0PUBLIC02").await);
    let before = asked.load(std::sync::atomic::Ordering::SeqCst);

    // Slack's example of the event, in the channel steward had as public.
    let converted = slack_event(
        "EvCONVERT1",
        json!({"subtype": "channel_convert_to_private", "user": "U1234ABCD",
            "text": "made this channel *private*. Now, it can only be viewed or joined by invitation.",
            "type": "message", "ts": "1730984822.596869", "channel": "C0PUBLIC01",
            "event_ts": "1730984822.596869", "channel_type": "group"}),
    );
    let shared = slack_event(
        "EvSHARED1",
        json!({"type": "channel_shared", "connected_team_id": "E163Q94DX", "channel": "C0PUBLIC02",
            "event_ts": "1561064063.001100"}),
    );
    // One steward never asked about: Slack's answer (still "not shared") cannot undo it.
    let unasked = slack_event(
        "EvSHARED2",
        json!({"type": "channel_shared", "connected_team_id": "E163Q94DX", "channel": "C0PUBLIC04",
            "event_ts": "1561064063.001200"}),
    );
    for event in [&converted, &shared, &unasked] {
        let resp = service
            .router()
            .oneshot(slack_request(event, now(), SLACK_SECRET, None))
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
    }
    assert!(slack_a.is_private_channel("C0PUBLIC01").await);
    assert!(slack_a.said_shared_outside("C0PUBLIC02").await);
    assert!(slack_a.said_shared_outside("C0PUBLIC04").await);
    assert!(slack_a.is_shared_outside("C0PUBLIC04").await);
    // The same event from a workspace SLACK_TEAM_IDS does not list is refused.
    let mut foreign = converted.clone();
    foreign["event_id"] = json!("EvCONVERT2");
    foreign["team_id"] = json!("T0OTHERORG");
    foreign["event"]["channel"] = json!("C0PUBLIC03");
    let resp = service
        .router()
        .oneshot(slack_request(&foreign, now(), SLACK_SECRET, None))
        .await
        .unwrap();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["refused"], "workspace not allowed", "{body}");
    assert_eq!(
        asked.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "taken from the events, not asked again"
    );
    // Shared with no other organisation any more: Slack is asked again, and says so.
    let unshared = slack_event(
        "EvUNSHARED1",
        json!({"type": "channel_unshared", "previously_connected_team_id": "E163Q94DX",
            "channel": "C0PUBLIC04", "is_ext_shared": false, "event_ts": "1561064063.001300"}),
    );
    let resp = service
        .router()
        .oneshot(slack_request(&unshared, now(), SLACK_SECRET, None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(!slack_a.said_shared_outside("C0PUBLIC04").await);

    // The next mention there is private: its text is not stored.
    let said = slack_event(
        "EvAFTER1",
        json!({"type": "app_mention", "user": "U0INSIDER", "text": "<@UBOT> read the layoff plan",
            "ts": "1730984900.000100", "channel": "C0PUBLIC01", "event_ts": "1730984900.000100"}),
    );
    let resp = service
        .router()
        .oneshot(slack_request(&said, now(), SLACK_SECRET, None))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let in_db = ["steward.db", "steward.db-wal"].iter().any(|name| {
        std::fs::read(dir.path().join(name))
            .is_ok_and(|bytes| bytes.windows(15).any(|w| w == b"the layoff plan"))
    });
    assert!(
        !in_db,
        "a channel made private keeps its text out of the database"
    );

    // Another replica over the same store, whose client still had the channel as public.
    let (replica, _) = slack_service(dir.path(), &fake, vec![], Some(slack_b.clone())).await;
    let mut taken = false;
    for _ in 0..100 {
        if slack_b.is_private_channel("C0PUBLIC01").await {
            taken = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(taken, "the other replica takes the change from the store");
    assert!(
        !slack_b.is_private_channel("C0PUBLIC03").await,
        "another workspace's change is not taken"
    );
    replica.stop(Duration::from_secs(5)).await;
    service.stop(Duration::from_secs(5)).await;
}

/// `serve`'s daily look at OpenAI's model list: a configured model with a
/// `shutdown_date` is reported and exported as a metric; models listed without one, or
/// not configured, are not.
#[tokio::test]
async fn openai_announced_shutdown_dates_reach_the_log_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let config = tree(dir.path());
    let listing = json!({"object": "list", "data": [
        {"id": "gpt-4.1", "object": "model", "created": 1744316542, "owned_by": "system",
         "shutdown_date": "2027-01-14"},
        {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system",
         "shutdown_date": "2027-01-14"},
        {"id": "gpt-6-sol", "object": "model", "created": 1788220800, "owned_by": "system",
         "shutdown_date": null},
    ]});
    let auth = Arc::new(std::sync::Mutex::new(None));
    let seen = auth.clone();
    let app = axum::Router::new().route(
        "/v1/models",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let (listing, seen) = (listing.clone(), seen.clone());
            async move {
                *seen.lock().unwrap() = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string());
                axum::Json(listing)
            }
        }),
    );
    let url = serve(app).await;
    let providers = steward::provider::ProviderSet::new(fast_retry()).with(
        "openai",
        Arc::new(steward::provider::openai::OpenAi::new(
            steward::http::client().unwrap(),
            steward::provider::Endpoint {
                base_url: format!("{url}/v1"),
                api_key: Some("sk-test".into()),
            },
            Duration::from_secs(5),
        )),
    );
    let metrics = steward::metrics::Metrics::new();
    let today = chrono::NaiveDate::from_ymd_opt(2026, 11, 25).unwrap();
    let found = steward::server::model_watch::check(&providers, &config, &metrics, today).await;
    let date = chrono::NaiveDate::from_ymd_opt(2027, 1, 14).unwrap();
    assert_eq!(found, [("openai".to_string(), "gpt-4.1".to_string(), date)]);
    assert_eq!(auth.lock().unwrap().as_deref(), Some("Bearer sk-test"));
    let text = metrics.render();
    assert!(
        text.contains(
            r#"steward_model_shutdown_timestamp_seconds{provider="openai",model="gpt-4.1"} 1799884800"#
        ),
        "{text}"
    );
    assert!(
        !text.contains(r#"model="gpt-4o""#),
        "not configured: not exported"
    );
}

#[tokio::test]
async fn a_stop_starts_no_queued_run_and_a_restart_takes_it_at_once() {
    let fake = FakeModel::start().await;
    // The first run's answer takes a while; the second run waits for the only slot.
    fake.push(Reply::ok(openai_text("first")).delay(Duration::from_secs(2)));
    fake.always(Reply::ok(openai_text("second, after the restart")));
    // A lease far longer than the test: a restart must not wait for it to run out.
    let lease = Duration::from_secs(120);
    let one_at_a_time = || DispatchSettings {
        lease,
        global_concurrency: 1,
        ..DispatchSettings::default()
    };
    let mut h = start_full(
        tempfile::tempdir().unwrap(),
        fake.clone(),
        None,
        None,
        one_at_a_time(),
    )
    .await;
    // Two webhook deliveries (not private, so nothing is lost in the restart).
    let hook = |key: &str| {
        Request::post("/hooks/zapier-intake")
            .header("authorization", format!("Bearer {HOOK_TOKEN}"))
            .header("idempotency-key", key)
            .body(Body::from(r#"{"text": "status?"}"#))
            .unwrap()
    };
    h.send(hook("stop-1")).await;
    h.send(hook("stop-2")).await;
    // Both runs exist, the first running, the second queued behind it.
    for _ in 0..200 {
        let runs = h.store.list_runs(10).await.unwrap();
        if runs.len() == 2 && runs.iter().any(|r| r.status == RunStatus::Running) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    h.stop().await;
    let runs = h.store.list_runs(10).await.unwrap();
    let first = runs
        .iter()
        .find(|r| r.status == RunStatus::Succeeded)
        .expect("the running run finished within the grace");
    let queued: Vec<_> = runs.iter().filter(|r| r.status == RunStatus::Queued).collect();
    assert_eq!(
        queued.len(),
        1,
        "the queued run did not start after the stop: {runs:?}"
    );
    assert_eq!(queued[0].turns, 0, "it never ran: {runs:?}");
    assert_eq!(fake.requests().len(), 1, "only the running run called the model");
    let (queued_id, first_id) = (queued[0].id.clone(), first.id.clone());

    // The next process takes it at its start, not when the 120 s lease would end.
    let started = std::time::Instant::now();
    let h2 = start_full(h.dir, fake.clone(), None, None, one_at_a_time()).await;
    let runs = h2.finished_runs(2).await;
    let second = runs.iter().find(|r| r.id == queued_id).unwrap();
    assert_eq!(second.status, RunStatus::Succeeded, "{second:?}");
    assert_eq!(second.final_text.as_deref(), Some("second, after the restart"));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "taken at once, not after the lease"
    );
    assert!(runs.iter().any(|r| r.id == first_id));
}
