//! Slack through `steward serve`'s service, end to end on a real SQLite file with a
//! fake Slack and a fake model on 127.0.0.1.
//!
//! Approvals: the run parks (worker released), survives a restart, and resumes on a
//! signed `block_actions` click from an allowed person; others, second clicks,
//! tampered buttons and bad signatures change nothing; Deny and a timeout reach the
//! model as a tool error. Feedback buttons. Limits across two processes on one
//! database: a person's rate, an agent's concurrency, its daily budget.

mod support;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::extract::Json;
use axum::http::{Request, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::slack::SlackClient;
use steward::run::Runner;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{RunStatus, SqliteStore, Store};
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use support::*;
use tower::ServiceExt;

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const ASKER: &str = "U061F7AUR";
const APPROVER: &str = "U0APPROVER";
const HOOK_TOKEN: &str = "hook-token-123";

type Calls = Arc<Mutex<Vec<(String, Value)>>>;

/// An irreversible tool that counts its calls.
struct Deploy(Arc<AtomicU32>);

#[async_trait]
impl Tool for Deploy {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::OnceLock<ToolSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| ToolSpec {
            name: "deploy".into(),
            description: "Deploys a service to production.".into(),
            parameters: json!({"type": "object", "properties": {"service": {"type": "string"}}}),
            effect: Effect::Irreversible,
        })
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text(format!(
            "deployed {}",
            args["service"].as_str().unwrap_or("?")
        )))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn registry(deploys: &Arc<AtomicU32>) -> ToolRegistry {
    let mut r = ToolRegistry::core(Default::default());
    r.register(Arc::new(Deploy(deploys.clone())));
    r
}

/// The `ops` agent: deploys need approval from the asker or [`APPROVER`].
fn ops(timeout: &str) -> String {
    format!(
        "model: openai/gpt-4.1\nprompt: prompts/p.md\n\
         tools: [current_time, {{name: deploy, approval: required}}]\n\
         approval: {{approvers: [{APPROVER}], timeout: {timeout}}}\n\
         output: {{feedback: true, stream: false}}\n\
         triggers:\n  - slack_mention: {{}}\n"
    )
}

fn config(root: &Path, deploys: &Arc<AtomicU32>, agent: &str) -> Config {
    write(root, "prompts/p.md", "You deploy services when asked.");
    write(root, "agents/ops.yaml", agent);
    Config::load(
        root,
        &Known {
            tools: registry(deploys).names(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"))
}

/// A fake Slack recording every Web API call.
async fn fake_slack() -> (SlackClient, Calls) {
    fake_slack_refusing(|_, _| None).await
}

/// [`fake_slack`] that answers `ok: false` with the error `refuse` names for a call.
async fn fake_slack_refusing(refuse: fn(&str, &Value) -> Option<&'static str>) -> (SlackClient, Calls) {
    let calls: Calls = Arc::default();
    let c = calls.clone();
    let app = Router::new()
        .route("/conversations.info", axum::routing::get(conversations_info))
        .route(
            "/{method}",
            post(
                move |axum::extract::Path(method): axum::extract::Path<String>, Json(body): Json<Value>| {
                    c.lock().unwrap().push((method.clone(), body.clone()));
                    async move {
                        if let Some(error) = refuse(&method, &body) {
                            return Json(json!({"ok": false, "error": error}));
                        }
                        if method == "conversations.open" {
                            return Json(json!({"ok": true, "channel": {"id": "D0APPROVERS"}}));
                        }
                        Json(
                            json!({"ok": true, "channel": body["channel"].as_str().unwrap_or("C123ABC456"),
                            "ts": format!("1700000{:03}.000100", body.to_string().len() % 1000)}),
                        )
                    }
                },
            ),
        );
    let url = serve(app).await;
    (
        SlackClient::new(steward::http::client().unwrap(), &url, "xoxb-test"),
        calls,
    )
}

/// The model: asks to deploy, then reports what the tool said.
fn model(fake: &FakeModel) {
    fake.handler(|body| {
        let messages = body["messages"].as_array().unwrap();
        match messages.iter().rev().find(|m| m["role"] == "tool") {
            Some(result) => Reply::ok(openai_text(&format!(
                "Result: {}",
                result["content"].as_str().unwrap_or("")
            ))),
            None => Reply::ok(openai_tools(&[("call_1", "deploy", r#"{"service":"billing"}"#)])),
        }
    });
}

struct Steward {
    service: Option<Service>,
    store: Arc<dyn Store>,
}

async fn start(
    root: &Path,
    fake: &FakeModel,
    slack: &SlackClient,
    deploys: &Arc<AtomicU32>,
    timeout: &str,
) -> Steward {
    start_with(root, providers(Some(fake), None), slack, deploys, timeout).await
}

/// [`start`] with these providers.
async fn start_with(
    root: &Path,
    providers: steward::provider::ProviderSet,
    slack: &SlackClient,
    deploys: &Arc<AtomicU32>,
    timeout: &str,
) -> Steward {
    let config = Arc::new(config(root, deploys, timeout));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&root.join("steward.db")).await.unwrap());
    let runner = Runner::builder(store.clone())
        .providers(providers)
        .tools(registry(deploys))
        .tokens(tokens())
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
        hooks: [("deploys".to_string(), HOOK_TOKEN.to_string())].into(),
        ..Secrets::default()
    };
    let settings = DispatchSettings {
        lease: Duration::from_secs(60),
        ..DispatchSettings::default()
    };
    let service = Service::start(runner, config, secrets, Some(slack.clone()), None, settings);
    Steward {
        service: Some(service),
        store,
    }
}

/// A `block_actions` payload as Slack posts it, form-encoded.
fn click(user: &str, action: &str, value: &str) -> String {
    let payload = json!({
        "type": "block_actions", "token": "XXYYZZ", "api_app_id": "A123ABC456", "trigger_id": "1234.5678.abc",
        "user": {"id": user, "username": "someone", "name": "someone", "team_id": "T123ABC456"},
        "team": {"id": "T123ABC456", "domain": "acme"},
        "container": {"type": "message", "message_ts": "1700000000.000200", "channel_id": "C123ABC456", "is_ephemeral": false},
        "channel": {"id": "C123ABC456", "name": "ops"},
        "message": {"type": "message", "user": "UBOT", "ts": "1700000000.000200", "thread_ts": "1700000000.000100",
                    "text": "the message the button is on"},
        "response_url": "https://hooks.slack.com/actions/T123ABC456/1/abc",
        "actions": [{"action_id": action, "block_id": "steward_approval", "type": "button", "value": value,
                     "text": {"type": "plain_text", "text": "Approve"}, "action_ts": "1700000001.000300"}]
    });
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
}

/// A click on Slack's feedback buttons (`feedback_buttons` in a `context_actions`
/// block), as Slack sends it.
fn feedback_click(user: &str, value: &str) -> String {
    feedback_click_in(user, value, "C123ABC456")
}

/// [`feedback_click`] on a message in `channel`.
fn feedback_click_in(user: &str, value: &str, channel: &str) -> String {
    let payload = json!({
        "type": "block_actions", "token": "XXYYZZ", "api_app_id": "A123ABC456", "trigger_id": "1234.5678.abc",
        "user": {"id": user, "username": "someone", "name": "someone", "team_id": "T123ABC456"},
        "team": {"id": "T123ABC456", "domain": "acme"},
        "container": {"type": "message", "message_ts": "1700000000.000200", "channel_id": channel, "is_ephemeral": false},
        "channel": {"id": channel, "name": "ops"},
        "actions": [{"action_id": "steward_feedback", "block_id": "steward_feedback", "type": "feedback_buttons",
                     "value": value, "action_ts": "1700000001.000300"}]
    });
    form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
}

impl Steward {
    async fn feedback_click(&self, path: &str, user: &str, value: &str) -> StatusCode {
        let raw = feedback_click(user, value);
        self.send(slack_signed(
            path,
            "application/x-www-form-urlencoded",
            raw,
            SECRET,
        ))
        .await
    }

    async fn send(&self, req: Request<Body>) -> StatusCode {
        self.service
            .as_ref()
            .unwrap()
            .router()
            .oneshot(req)
            .await
            .unwrap()
            .status()
    }

    async fn mention(&self, event_id: &str) -> StatusCode {
        self.mention_from(event_id, ASKER).await
    }

    async fn mention_from(&self, event_id: &str, user: &str) -> StatusCode {
        self.mention_at(event_id, user, "1700000000.000100").await
    }

    /// A mention from `user` in its own message `ts` (a conversation of its own).
    async fn mention_at(&self, event_id: &str, user: &str, ts: &str) -> StatusCode {
        let body = event_callback(
            event_id,
            json!({"type": "app_mention", "user": user, "text": "<@UBOT> deploy billing",
                   "ts": ts, "channel": "C123ABC456", "event_ts": ts}),
        );
        self.send(slack_signed(
            "/slack/events",
            "application/json",
            body.to_string(),
            SECRET,
        ))
        .await
    }

    async fn click(&self, user: &str, action: &str, value: &str) -> StatusCode {
        let raw = click(user, action, value);
        self.send(slack_signed(
            "/slack/interactivity",
            "application/x-www-form-urlencoded",
            raw,
            SECRET,
        ))
        .await
    }

    async fn wait_status(&self, status: RunStatus) -> steward::store::RunRow {
        // Up to 20 s: a resumed run waits for the next reconcile, slow on a loaded CI box.
        for _ in 0..800 {
            if let Some(run) = self
                .store
                .list_runs(10)
                .await
                .unwrap()
                .into_iter()
                .find(|r| r.status == status)
            {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "no run reached {status:?}: {:?}",
            self.store.list_runs(10).await.unwrap()
        );
    }

    async fn stop(&mut self) {
        if let Some(s) = self.service.take() {
            s.stop(Duration::from_secs(5)).await;
        }
    }
}

fn posted(calls: &Calls, method: &str) -> Vec<Value> {
    calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, b)| b.clone())
        .collect()
}

/// The buttons' value of the approval request posted in the thread. The run is marked
/// waiting before the request is posted, so this waits for the post (up to 5 s).
async fn button_value(calls: &Calls) -> String {
    let mut found = None;
    for _ in 0..200 {
        found = posted(calls, "chat.postMessage")
            .into_iter()
            .find(|b| b["blocks"].to_string().contains("steward_approve"));
        if found.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let request = found.expect("an approval request");
    let actions = request["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "actions")
        .unwrap()
        .clone();
    actions["elements"][0]["value"].as_str().unwrap().to_string()
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn an_approved_call_runs_once_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));

    let mut first = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;
    assert_eq!(first.mention("EvAPPROVE1").await, StatusCode::OK);
    let waiting = first.wait_status(RunStatus::Waiting).await;
    assert_eq!(
        deploys.load(Ordering::SeqCst),
        0,
        "nothing runs before a decision"
    );
    // The request: in the thread, the tool and its arguments readable, two buttons.
    let request = posted(&calls, "chat.postMessage")
        .into_iter()
        .find(|b| b["blocks"].to_string().contains("steward_approve"))
        .unwrap();
    assert_eq!(request["thread_ts"], "1700000000.000100");
    let blocks = request["blocks"].to_string();
    assert!(
        blocks.contains("*ops* wants to run `deploy`. This cannot be undone."),
        "{blocks}"
    );
    assert!(blocks.contains(r#"*service*\n```\nbilling\n```"#), "{blocks}");
    assert!(blocks.contains(&format!("<@{ASKER}>, <@{APPROVER}>")), "{blocks}");
    let value = button_value(&calls).await;
    assert!(value.ends_with(&format!(":{}", waiting.id)));

    // The service restarts while the run waits: nothing is lost.
    first.stop().await;
    let second = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;
    assert_eq!(
        second.store.get_run(&waiting.id).await.unwrap().unwrap().status,
        RunStatus::Waiting
    );

    // A bad signature is refused outright.
    let forged = slack_signed(
        "/slack/interactivity",
        "application/x-www-form-urlencoded",
        click(ASKER, "steward_approve", &value),
        "wrong-secret",
    );
    assert_eq!(second.send(forged).await, StatusCode::UNAUTHORIZED);
    // Someone who is neither the asker nor an approver: told so, nothing changes.
    assert_eq!(
        second.click("U0STRANGER", "steward_approve", &value).await,
        StatusCode::OK
    );
    eventually("the stranger's ephemeral", || {
        posted(&calls, "chat.postEphemeral")
            .iter()
            .any(|b| b["user"] == "U0STRANGER" && b["text"].as_str().unwrap().starts_with("Only "))
    })
    .await;
    // A tampered button (a real request id with another run's id) is refused.
    let (approval, _) = value.split_once(':').unwrap();
    assert_eq!(
        second
            .click(ASKER, "steward_approve", &format!("{approval}:0000-other-run"))
            .await,
        StatusCode::OK
    );
    assert_eq!(
        second.store.get_run(&waiting.id).await.unwrap().unwrap().status,
        RunStatus::Waiting
    );

    // The asker approves: the run resumes on the new process and the tool runs once.
    assert_eq!(
        second.click(ASKER, "steward_approve", &value).await,
        StatusCode::OK
    );
    let done = second.wait_status(RunStatus::Succeeded).await;
    assert_eq!(done.id, waiting.id);
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    assert_eq!(done.final_text.as_deref(), Some("Result: deployed billing"));
    eventually("the request updated", || {
        posted(&calls, "chat.update").iter().any(|b| {
            b["text"]
                .as_str()
                .unwrap()
                .contains(&format!("Approved by <@{ASKER}>."))
        })
    })
    .await;
    // A second click changes nothing.
    assert_eq!(
        second.click(APPROVER, "steward_deny", &value).await,
        StatusCode::OK
    );
    eventually("the already-decided note", || {
        posted(&calls, "chat.postEphemeral").iter().any(|b| {
            b["user"] == APPROVER
                && b["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("Already decided: approved")
        })
    })
    .await;
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    // The decision is on the record.
    let kinds: Vec<String> = second
        .store
        .run_events(&done.id)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert!(kinds.contains(&"approval_requested".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"approval_decided".to_string()), "{kinds:?}");
    let approval_row = second.store.get_approval(approval).await.unwrap().unwrap();
    assert_eq!(
        (
            approval_row.decision.as_deref(),
            approval_row.decided_by.as_deref()
        ),
        (Some("approved"), Some(ASKER))
    );
}

/// Every approval request posted so far: (its buttons' value, its blocks as text).
fn requests(calls: &Calls) -> Vec<(String, String)> {
    posted(calls, "chat.postMessage")
        .into_iter()
        .filter(|b| b["blocks"].to_string().contains("steward_approve"))
        .map(|b| {
            let blocks = b["blocks"].as_array().unwrap();
            let actions = blocks.iter().find(|b| b["type"] == "actions").unwrap();
            (
                actions["elements"][0]["value"].as_str().unwrap().to_string(),
                b["blocks"].to_string(),
            )
        })
        .collect()
}

/// One model turn asking for two gated calls: each gets its own request showing its
/// own arguments (a long one folded, saying how much), the approved one runs, the
/// denied one reaches the model as denied.
#[tokio::test]
async fn two_gated_calls_in_one_turn_get_a_request_each() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    let long = "x".repeat(5000);
    let second_args = json!({"service": "payments", "reason": long}).to_string();
    fake.handler(move |body| {
        let messages = body["messages"].as_array().unwrap();
        let results: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                format!(
                    "{}={}",
                    m["tool_call_id"].as_str().unwrap(),
                    m["content"].as_str().unwrap()
                )
            })
            .collect();
        if results.is_empty() {
            Reply::ok(openai_tools(&[
                ("call_1", "deploy", r#"{"service":"billing"}"#),
                ("call_2", "deploy", &second_args),
            ]))
        } else {
            Reply::ok(openai_text(&results.join(" | ")))
        }
    });
    let deploys = Arc::new(AtomicU32::new(0));
    let s = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;
    assert_eq!(s.mention("EvTWO1").await, StatusCode::OK);
    let waiting = s.wait_status(RunStatus::Waiting).await;
    eventually("the first request", || requests(&calls).len() == 1).await;
    let (first, blocks) = requests(&calls).remove(0);
    assert!(
        blocks.contains("billing") && !blocks.contains("payments"),
        "{blocks}"
    );
    assert_eq!(s.click(ASKER, "steward_approve", &first).await, StatusCode::OK);

    // Approving the first call asks about the second; nothing has run yet.
    eventually("the second request", || requests(&calls).len() == 2).await;
    assert_eq!(
        deploys.load(Ordering::SeqCst),
        0,
        "no call runs before every decision"
    );
    let (second, blocks) = requests(&calls).remove(1);
    assert_ne!(first, second);
    // Destination first, then the long value folded with what was left out.
    let service_at = blocks.find("*service*").unwrap();
    let reason_at = blocks.find("*reason*").unwrap();
    assert!(service_at < reason_at, "{blocks}");
    assert!(blocks.contains("payments"), "{blocks}");
    assert!(blocks.contains("… 4300 more characters"), "{blocks}");
    assert!(
        blocks.contains(&format!("steward runs show {}", waiting.id)),
        "{blocks}"
    );
    assert_eq!(s.click(APPROVER, "steward_deny", &second).await, StatusCode::OK);

    let done = s.wait_status(RunStatus::Succeeded).await;
    assert_eq!(done.id, waiting.id);
    assert_eq!(deploys.load(Ordering::SeqCst), 1, "only the approved call ran");
    let answer = done.final_text.unwrap();
    assert!(answer.contains("call_1=deployed billing"), "{answer}");
    assert!(
        answer.contains("call_2=") && answer.contains("denied by"),
        "{answer}"
    );
    assert_eq!(requests(&calls).len(), 2, "one request per gated call");
}

#[tokio::test]
async fn a_denied_or_unanswered_call_reaches_the_model_as_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));
    let mut s = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;

    s.mention("EvDENY1").await;
    let waiting = s.wait_status(RunStatus::Waiting).await;
    assert_eq!(
        s.click(APPROVER, "steward_deny", &button_value(&calls).await)
            .await,
        StatusCode::OK
    );
    let done = s.wait_status(RunStatus::Succeeded).await;
    assert_eq!(done.id, waiting.id);
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    let text = done.final_text.unwrap();
    assert!(
        text.starts_with(&format!("Result: error: denied by @{APPROVER}")),
        "{text}"
    );
    s.stop().await;

    // No decision within the timeout counts as Deny.
    let dir = tempfile::tempdir().unwrap();
    calls.lock().unwrap().clear();
    let mut s = start(dir.path(), &fake, &slack, &deploys, &ops("1s")).await;
    s.mention("EvTIMEOUT1").await;
    s.wait_status(RunStatus::Waiting).await;
    let done = s.wait_status(RunStatus::Succeeded).await;
    assert_eq!(deploys.load(Ordering::SeqCst), 0);
    let text = done.final_text.unwrap();
    assert!(text.contains("not approved: no one decided within 1s"), "{text}");
    eventually("the request marked timed out", || {
        posted(&calls, "chat.update")
            .iter()
            .any(|b| b["text"].as_str().unwrap().contains("No decision in time"))
    })
    .await;
    s.stop().await;
}

/// An approval past its deadline is never approved, whether or not the sweep that times
/// it out has run yet (in a process just started, or one stopping): the click is
/// refused, the tool never runs, and the request ends timed out.
/// Two gated calls of one round with the same id (an OpenAI-compatible server that
/// repeats ids): each is asked about and decided on its own, so approving the one shown
/// never lets the other through.
#[tokio::test]
async fn calls_sharing_an_id_are_each_approved_on_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        let messages = body["messages"].as_array().unwrap();
        match messages.iter().rev().find(|m| m["role"] == "tool") {
            Some(_) => Reply::ok(openai_text("Done.")),
            None => Reply::ok(openai_tools(&[
                ("call_1", "deploy", r#"{"service":"billing"}"#),
                ("call_1", "deploy", r#"{"service":"payroll"}"#),
            ])),
        }
    });
    let deploys = Arc::new(AtomicU32::new(0));
    let mut s = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;
    assert_eq!(s.mention("EvSAMEID1").await, StatusCode::OK);
    let waiting = s.wait_status(RunStatus::Waiting).await;
    let requests = || {
        posted(&calls, "chat.postMessage")
            .into_iter()
            .filter(|b| b["blocks"].to_string().contains("steward_approve"))
            .collect::<Vec<_>>()
    };
    let value = button_value(&calls).await;
    assert!(requests()[0]["blocks"].to_string().contains("billing"));
    assert_eq!(s.click(ASKER, "steward_approve", &value).await, StatusCode::OK);
    // The second call waits for its own decision; only the approved one ran.
    eventually("a request for the second call", || {
        requests()
            .iter()
            .any(|b| b["blocks"].to_string().contains("payroll"))
    })
    .await;
    assert_eq!(
        deploys.load(Ordering::SeqCst),
        0,
        "nothing runs before the round is decided"
    );
    let run = s.store.get_run(&waiting.id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Waiting);
    s.stop().await;
}

#[tokio::test]
async fn a_request_past_its_deadline_cannot_be_approved() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));
    let mut first = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;
    first.mention("EvLATE1").await;
    let waiting = first.wait_status(RunStatus::Waiting).await;
    let value = button_value(&calls).await;
    let (approval, _) = value.split_once(':').unwrap();
    first.stop().await;
    // While no process runs, its deadline passes.
    let url = format!("sqlite://{}", dir.path().join("steward.db").display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    let moved = sqlx::query("UPDATE approvals SET deadline = ? WHERE id = ?")
        .bind("2000-01-01T00:00:00.000Z")
        .bind(approval)
        .execute(&db)
        .await
        .unwrap();
    assert_eq!(moved.rows_affected(), 1);
    db.close().await;

    let mut second = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;
    assert_eq!(
        second.click(ASKER, "steward_approve", &value).await,
        StatusCode::OK
    );
    eventually("the refusal", || {
        posted(&calls, "chat.postEphemeral").iter().any(|b| {
            let text = b["text"].as_str().unwrap();
            b["user"] == ASKER
                && (text.starts_with("This request timed out before it was decided")
                    || text.starts_with("Already decided: timed out"))
        })
    })
    .await;
    let done = second.wait_status(RunStatus::Succeeded).await;
    assert_eq!(done.id, waiting.id);
    assert_eq!(deploys.load(Ordering::SeqCst), 0, "the tool never ran");
    let row = second.store.get_approval(approval).await.unwrap().unwrap();
    assert_eq!(row.decision.as_deref(), Some("timed_out"));
    assert_eq!(row.decided_by, None);
    second.stop().await;
}

#[tokio::test]
async fn feedback_buttons_record_one_score_per_person() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));
    // An agent that asks for no feedback.
    write(
        dir.path(),
        "agents/quiet.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\n\
         output: {feedback: false}\ntriggers:\n  - webhook: { name: quiet }\n",
    );
    let mut s = start(dir.path(), &fake, &slack, &deploys, &ops("24h")).await;
    s.mention("EvFEEDBACK1").await;
    s.wait_status(RunStatus::Waiting).await;
    s.click(ASKER, "steward_approve", &button_value(&calls).await)
        .await;
    let done = s.wait_status(RunStatus::Succeeded).await;
    // The answer carries 👍 / 👎 for its run.
    let reply = posted(&calls, "chat.postMessage")
        .into_iter()
        .find(|b| b["text"] == "Result: deployed billing")
        .unwrap();
    let feedback = reply["blocks"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(feedback["type"], "context_actions");
    assert_eq!(feedback["block_id"], "steward_feedback");
    let buttons = &feedback["elements"][0];
    assert_eq!(buttons["type"], "feedback_buttons");
    assert_eq!(buttons["positive_button"]["value"], format!("up:{}", done.id));
    assert_eq!(buttons["negative_button"]["value"], format!("down:{}", done.id));

    // Clicks come to /slack/events as well as to the interactivity route.
    assert_eq!(
        s.feedback_click("/slack/events", ASKER, &format!("up:{}", done.id))
            .await,
        StatusCode::OK
    );
    assert_eq!(
        s.feedback_click("/slack/interactivity", ASKER, &format!("down:{}", done.id))
            .await,
        StatusCode::OK
    );
    assert_eq!(
        s.feedback_click("/slack/events", APPROVER, &format!("down:{}", done.id))
            .await,
        StatusCode::OK
    );
    // A 👎 asks what went wrong; the answer is stored with that score.
    eventually("the modal opened", || !posted(&calls, "views.open").is_empty()).await;
    let opened = posted(&calls, "views.open");
    assert_eq!(opened[0]["trigger_id"], "1234.5678.abc");
    assert_eq!(opened[0]["view"]["private_metadata"], done.id.as_str());
    let submission = json!({"type": "view_submission", "team": {"id": "T123ABC456", "domain": "acme"},
        "user": {"id": APPROVER, "username": "lead", "name": "lead", "team_id": "T123ABC456"},
        "api_app_id": "A123ABC456", "trigger_id": "1234.9999.def",
        "view": {"id": "V0FEEDBACK", "type": "modal", "callback_id": "steward_feedback_comment", "private_metadata": done.id,
                 "title": {"type": "plain_text", "text": "Feedback"}, "blocks": [],
                 "state": {"values": {"comment": {"text": {"type": "plain_text_input", "value": "It deployed the wrong service."}}}}}});
    let raw = form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &submission.to_string())
        .finish();
    let status = s
        .send(slack_signed(
            "/slack/events",
            "application/x-www-form-urlencoded",
            raw,
            SECRET,
        ))
        .await;
    assert_eq!(status, StatusCode::OK);
    // A click for an unknown run stores nothing; an unsigned one is a 401.
    assert_eq!(
        s.feedback_click("/slack/events", ASKER, "up:no-such-run").await,
        StatusCode::OK
    );
    let unsigned = slack_signed(
        "/slack/events",
        "application/x-www-form-urlencoded",
        feedback_click(ASKER, &format!("up:{}", done.id)),
        "wrong-secret",
    );
    assert_eq!(s.send(unsigned).await, StatusCode::UNAUTHORIZED);
    // Only the two votes count, and only on the message the run posted (a button
    // copied into another channel is not that message).
    assert_eq!(
        s.feedback_click("/slack/events", "U0THIRD", &format!("sideways:{}", done.id))
            .await,
        StatusCode::OK
    );
    let elsewhere = slack_signed(
        "/slack/events",
        "application/x-www-form-urlencoded",
        feedback_click_in("U0FOURTH", &format!("up:{}", done.id), "C0ELSEWHERE"),
        SECRET,
    );
    assert_eq!(s.send(elsewhere).await, StatusCode::OK);
    // A run of the same agent that never posted an answer takes no vote either.
    s.store
        .create_run(&steward::store::NewRun {
            id: "r-never-posted".into(),
            agent: "ops".into(),
            trigger_summary: "a run with no answer".into(),
            source: "slack".into(),
            kind: "app_mention".into(),
            ..steward::store::NewRun::default()
        })
        .await
        .unwrap();
    assert_eq!(
        s.feedback_click("/slack/events", ASKER, "up:r-never-posted")
            .await,
        StatusCode::OK
    );
    assert!(s.store.run_scores("r-never-posted").await.unwrap().is_empty());
    // Nor does a run of an agent with `feedback: false`, even one that posted there.
    s.store
        .create_run(&steward::store::NewRun {
            id: "r-quiet".into(),
            agent: "quiet".into(),
            trigger_summary: "a quiet run".into(),
            source: "webhook".into(),
            kind: "quiet".into(),
            ..steward::store::NewRun::default()
        })
        .await
        .unwrap();
    s.store
        .append_event(
            "r-quiet",
            "reply",
            &json!({"destination": {"slack": "C123ABC456"}}),
        )
        .await
        .unwrap();
    s.store
        .append_event(
            "r-quiet",
            "reply_sent",
            &json!({"ok": true, "ts": "1700000001.000100"}),
        )
        .await
        .unwrap();
    assert_eq!(
        s.feedback_click("/slack/events", ASKER, "up:r-quiet").await,
        StatusCode::OK
    );
    assert!(s.store.run_scores("r-quiet").await.unwrap().is_empty());
    let scores = s.store.run_scores(&done.id).await.unwrap();
    let votes: Vec<(Option<&str>, f64, Option<&str>)> = scores
        .iter()
        .map(|x| (x.source.as_deref(), x.score, x.explanation.as_deref()))
        .collect();
    assert_eq!(
        votes,
        [
            (Some(ASKER), 1.0, None),
            (Some(APPROVER), -1.0, Some("It deployed the wrong service."))
        ],
        "one vote each"
    );
    eventually("the second vote refused", || {
        posted(&calls, "chat.postEphemeral")
            .iter()
            .any(|b| b["user"] == ASKER && b["text"] == "You already rated this answer.")
    })
    .await;
    assert!(
        posted(&calls, "chat.postEphemeral")
            .iter()
            .any(|b| b["user"] == ASKER && b["text"] == "Thanks for the feedback.")
    );
    s.stop().await;
}

/// Waits until every stored event is routed (none queued or claimed).
async fn routed(s: &Steward) {
    for _ in 0..200 {
        if s.store.queue_depth().await.unwrap().0 == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("events were not routed");
}

#[tokio::test]
async fn a_persons_rate_and_an_agents_concurrency_hold_across_two_processes() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("Done.")).delay(Duration::from_millis(250)));
    let deploys = Arc::new(AtomicU32::new(0));
    let agent = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\n\
                 limits: {concurrency: 1, per_user_per_minute: 3}\ntriggers:\n  - slack_mention: {}\n";
    let mut a = start(dir.path(), &fake, &slack, &deploys, agent).await;
    let mut b = start(dir.path(), &fake, &slack, &deploys, agent).await;
    // Five requests from one person, alternating between the two processes, and two
    // from someone else, each a message of its own.
    for n in 0..5 {
        let s = if n % 2 == 0 { &a } else { &b };
        let ts = format!("17000001{n:02}.000100");
        assert_eq!(
            s.mention_at(&format!("EvRATE{n}"), ASKER, &ts).await,
            StatusCode::OK
        );
        routed(s).await;
    }
    for n in 0..2 {
        let ts = format!("17000002{n:02}.000100");
        b.mention_at(&format!("EvOTHER{n}"), "U0OTHER", &ts).await;
        routed(&b).await;
    }
    let runs = {
        let mut done = Vec::new();
        for _ in 0..400 {
            done = a.store.list_runs(20).await.unwrap();
            if done.len() == 5 && done.iter().all(|r| r.status.is_terminal()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        done
    };
    assert_eq!(
        runs.len(),
        5,
        "three for the first person, two for the other: {runs:?}"
    );
    assert_eq!(
        runs.iter().filter(|r| r.actor.as_deref() == Some(ASKER)).count(),
        3
    );
    assert!(runs.iter().all(|r| r.status == RunStatus::Succeeded));
    // One polite reply to the fourth request, silence for the fifth.
    let notices: Vec<Value> = posted(&calls, "chat.postMessage")
        .into_iter()
        .filter(|b| b["text"].as_str().unwrap().contains("in the last minute"))
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    // Concurrency 1 across both processes: no two runs overlapped.
    let mut spans: Vec<_> = runs
        .iter()
        .map(|r| (r.started_at.unwrap(), r.finished_at.unwrap()))
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "runs overlapped: {pair:?}");
    }
    a.stop().await;
    b.stop().await;
}

/// The event log's entries with `outcome`, as `events list` shows them (reason).
async fn outcomes(
    store: &Arc<dyn Store>,
    outcome: steward::types::event_outcome::OutcomeKind,
) -> Vec<String> {
    let filter = steward::store::EventFilter {
        outcome: Some(outcome),
        limit: 50,
        ..Default::default()
    };
    store
        .list_events(&filter)
        .await
        .unwrap()
        .iter()
        .map(|e| e.why())
        .collect()
}

#[tokio::test]
async fn a_burst_from_one_person_routed_in_one_batch_keeps_their_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("Done.")));
    let deploys = Arc::new(AtomicU32::new(0));
    let agent = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\n\
                 limits: {per_user_per_minute: 2}\ntriggers:\n  - slack_mention: {}\n";
    let mut s = start(dir.path(), &fake, &slack, &deploys, agent).await;
    // Sent at once, the four land in one group commit and one claim: routing decides
    // them as a batch, and still sees the person's earlier runs of the same batch.
    let sent = futures_util::future::join_all((0..4).map(|n| {
        let ts = format!("17000003{n:02}.000100");
        let s = &s;
        async move { s.mention_at(&format!("EvBURST{n}"), ASKER, &ts).await }
    }))
    .await;
    assert!(sent.iter().all(|c| *c == StatusCode::OK), "{sent:?}");
    routed(&s).await;
    let runs = s.store.list_runs(10).await.unwrap();
    assert_eq!(runs.len(), 2, "the person's rate is two a minute: {runs:?}");
    eventually("one notice for the refused requests", || {
        posted(&calls, "chat.postMessage")
            .iter()
            .any(|b| b["text"].as_str().unwrap().contains("in the last minute"))
    })
    .await;
    // The two refused deliveries say whose limit.
    let limited = outcomes(&s.store, steward::types::event_outcome::OutcomeKind::RateLimited).await;
    assert_eq!(limited.len(), 2, "{limited:?}");
    assert!(
        limited.iter().all(|w| w.contains("per-minute limit")),
        "{limited:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_daily_budget_stops_runs_with_a_reply_naming_the_owner() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    // 1,200 input tokens of gpt-4.1: $0.0024, over the $0.002 budget.
    fake.always(Reply::ok(openai_text("Done.")));
    let deploys = Arc::new(AtomicU32::new(0));
    let agent = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\nowner: U0OWNER\n\
                 limits: {daily_cost_usd: 0.002}\ntriggers:\n  - slack_mention: {}\n";
    let mut s = start(dir.path(), &fake, &slack, &deploys, agent).await;
    s.mention("EvBUDGET1").await;
    let first = s.wait_status(RunStatus::Succeeded).await;
    assert!(first.cost_usd > 0.002, "{}", first.cost_usd);
    // Another person's own message.
    s.mention_at("EvBUDGET2", "U0OTHER", "1700000000.000300").await;
    routed(&s).await;
    eventually("the budget reply", || {
        posted(&calls, "chat.postMessage").iter().any(|b| {
            let text = b["text"].as_str().unwrap();
            text.contains("daily budget ($0.002)") && text.contains("contact <@U0OWNER>")
        })
    })
    .await;
    assert_eq!(
        s.store.list_runs(10).await.unwrap().len(),
        1,
        "no run for the refused request"
    );
    let over = outcomes(&s.store, steward::types::event_outcome::OutcomeKind::OverBudget).await;
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(over[0].contains("daily budget"), "{over:?}");
    // Asked again in the same thread: refused, and not told a second time that day.
    let again = event_callback(
        "EvBUDGET3",
        json!({"type": "app_mention", "user": "U0OTHER", "text": "<@UBOT> please?",
               "ts": "1700000000.000400", "thread_ts": "1700000000.000300",
               "channel": "C123ABC456", "event_ts": "1700000000.000400"}),
    );
    s.send(slack_signed(
        "/slack/events",
        "application/json",
        again.to_string(),
        SECRET,
    ))
    .await;
    routed(&s).await;
    let over = outcomes(&s.store, steward::types::event_outcome::OutcomeKind::OverBudget).await;
    assert_eq!(over.len(), 2, "{over:?}");
    // Time for a second reply to go out, were one due.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let told = posted(&calls, "chat.postMessage")
        .iter()
        .filter(|b| b["text"].as_str().unwrap().contains("daily budget"))
        .count();
    assert_eq!(told, 1, "one budget reply a day in a conversation");
    s.stop().await;
}

#[tokio::test]
async fn without_a_thread_the_approvers_are_asked_by_dm_and_a_private_run_needs_the_data_key() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));
    let agent = format!(
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [{{name: deploy, approval: required}}]\n\
         approval: {{approvers: [{APPROVER}]}}\ntriggers:\n  - webhook: {{name: deploys}}\n  - slack_message: {{}}\n"
    );
    let mut s = start(dir.path(), &fake, &slack, &deploys, &agent).await;
    let hook = Request::post("/hooks/deploys")
        .header("authorization", format!("Bearer {HOOK_TOKEN}"))
        .header("content-type", "application/json")
        .body(Body::from(r#"{"text": "deploy billing"}"#))
        .unwrap();
    assert_eq!(s.send(hook).await, StatusCode::OK);
    let waiting = s.wait_status(RunStatus::Waiting).await;
    // The run parks before its request is posted: wait for the DM (bounded).
    for _ in 0..100 {
        if !posted(&calls, "chat.postMessage").is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let opened = posted(&calls, "conversations.open");
    assert_eq!(opened, [json!({"users": APPROVER})]);
    let request = posted(&calls, "chat.postMessage").pop().unwrap();
    assert_eq!(request["channel"], "D0APPROVERS");
    assert!(request.get("thread_ts").is_none());
    // Only the approvers may decide: a webhook has no asker.
    let value = button_value(&calls).await;
    s.click(APPROVER, "steward_approve", &value).await;
    let done = s.wait_status(RunStatus::Succeeded).await;
    assert_eq!(
        (done.id.as_str(), deploys.load(Ordering::SeqCst)),
        (waiting.id.as_str(), 1)
    );

    // A DM is private: without STEWARD_DATA_KEY its conversation cannot wait at rest.
    let dm = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "type": "event_callback", "event_id": "EvDM1", "event_time": 1700000000,
        "event": {"type": "message", "channel": "D024BE91L", "channel_type": "im", "user": ASKER,
                  "text": "deploy billing please", "ts": "1700000500.000100"}});
    assert_eq!(
        s.send(slack_signed(
            "/slack/events",
            "application/json",
            dm.to_string(),
            SECRET
        ))
        .await,
        StatusCode::OK
    );
    let failed = s.wait_status(RunStatus::Failed).await;
    // Its error names the key, but a private run's error is kept out of the store.
    assert_eq!(failed.termination.as_deref(), Some("tool_error"));
    assert_eq!(failed.error.as_deref(), Some("[private: 129 chars]"));
    let requests = posted(&calls, "chat.postMessage")
        .iter()
        .filter(|b| b["blocks"].to_string().contains("steward_approve"))
        .count();
    assert_eq!(requests, 1, "no request for the private run");
    assert_eq!(deploys.load(Ordering::SeqCst), 1, "its call did not run");
    s.stop().await;
}

/// A reasoning model behind the Responses API: asks to deploy with a reasoning item,
/// and refuses (400, as OpenAI does) a continuation that does not carry that item,
/// unchanged, right before the call.
fn reasoning_model(fake: &FakeModel) {
    let reasoning = json!({"type": "reasoning", "id": "rs_deploy", "summary": [],
                           "encrypted_content": "gAAAAABdeploy-reasoning=="});
    fake.handler(move |body| {
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let Some(at) = input.iter().position(|i| i["type"] == "function_call") else {
            return Reply::ok(responses_answer(
                vec![
                    reasoning.clone(),
                    responses_call("call_1", "deploy", r#"{"service":"billing"}"#),
                ],
                32,
            ));
        };
        if at == 0 || input[at - 1] != reasoning {
            return Reply::status(
                400,
                openai_error(
                    "Item 'fc_call_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_deploy'.",
                    "invalid_request_error",
                    "invalid_value",
                ),
            );
        }
        let result = input
            .iter()
            .find(|i| i["type"] == "function_call_output")
            .map(|i| i["output"].as_str().unwrap_or_default().to_string())
            .unwrap_or_default();
        Reply::ok(responses_answer(vec![responses_message(&format!("Result: {result}"))], 16))
    });
}

#[tokio::test]
async fn reasoning_survives_an_approval_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    reasoning_model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));
    let agent = ops("24h").replace("openai/gpt-4.1", "openai/gpt-5.2");
    let mut first = start_with(dir.path(), responses_providers(&fake), &slack, &deploys, &agent).await;
    assert_eq!(first.mention("EvREASON1").await, StatusCode::OK);
    let waiting = first.wait_status(RunStatus::Waiting).await;
    let value = button_value(&calls).await;
    // The run is parked in the database; a new process takes it from its checkpoint.
    first.stop().await;
    let mut second = start_with(dir.path(), responses_providers(&fake), &slack, &deploys, &agent).await;
    assert_eq!(
        second.click(ASKER, "steward_approve", &value).await,
        StatusCode::OK
    );
    let done = second.wait_status(RunStatus::Succeeded).await;
    assert_eq!(done.id, waiting.id);
    assert_eq!(deploys.load(Ordering::SeqCst), 1);
    // The continuation carried the reasoning item (the fake refuses it otherwise).
    let last = fake.requests().last().unwrap().body.clone();
    assert!(
        last["input"].to_string().contains("gAAAAABdeploy-reasoning=="),
        "{last}"
    );
    let replies = posted(&calls, "chat.postMessage");
    assert!(
        replies.iter().any(|b| b.to_string().contains("Result: ")),
        "{replies:?}"
    );
    second.stop().await;
}

#[tokio::test]
async fn a_person_is_called_once_by_the_asker_and_an_owner_resolves_it() {
    const OWNER: &str = "U0OWNER";
    let dir = tempfile::tempdir().unwrap();
    let (slack, calls) = fake_slack().await;
    let fake = FakeModel::start().await;
    model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));
    let agent = format!(
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time, deploy]\n\
         escalation: {{to: [{OWNER}, S0OPSTEAM], label: Ask the ops team}}\n\
         output: {{stream: false}}\ntriggers:\n  - slack_mention: {{}}\n"
    );
    let s = start(dir.path(), &fake, &slack, &deploys, &agent).await;
    s.mention("EvESCALATE1").await;
    let done = s.wait_status(RunStatus::Succeeded).await;
    // The answer carries the button, for its run, with the agent's label.
    let reply = posted(&calls, "chat.postMessage")
        .into_iter()
        .find(|b| b["text"] == "Result: deployed billing")
        .unwrap();
    let button = reply["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["block_id"] == "steward_escalate")
        .map(|b| b["elements"][0].clone())
        .unwrap_or_else(|| panic!("no escalation button: {reply:#}"));
    assert_eq!(button["value"], format!("esc:{}", done.id));
    assert_eq!(button["text"]["text"], "Ask the ops team");
    let value = format!("esc:{}", done.id);
    let calls_for_help = || {
        posted(&calls, "chat.postMessage")
            .into_iter()
            .filter(|b| {
                b["text"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("asked for a person")
            })
            .collect::<Vec<_>>()
    };
    let ephemeral = |needle: &str| {
        posted(&calls, "chat.postEphemeral")
            .iter()
            .any(|b| b["text"].as_str().unwrap_or_default().contains(needle))
    };

    // A stranger may not call for help on someone else's answer.
    assert_eq!(
        s.click("U0STRANGER", "steward_escalate", &value).await,
        StatusCode::OK
    );
    eventually("the stranger is told", || ephemeral("Only <@U061F7AUR>")).await;
    assert!(s.store.escalation(&done.id).await.unwrap().is_none());

    // The asker calls: one call for help in the conversation's thread, naming the
    // owners (a user and a group) and the asker.
    assert_eq!(s.click(ASKER, "steward_escalate", &value).await, StatusCode::OK);
    eventually("the call is posted", || calls_for_help().len() == 1).await;
    let call = &calls_for_help()[0];
    assert_eq!(call["channel"], "C123ABC456");
    assert_eq!(
        call["thread_ts"], "1700000000.000100",
        "in the conversation's thread"
    );
    let text = call["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("<@{ASKER}>"))
            && text.contains(&format!("<@{OWNER}>"))
            && text.contains("<!subteam^S0OPSTEAM>"),
        "{text}"
    );
    // A second click (a double click, or a retry) calls nobody again.
    assert_eq!(s.click(ASKER, "steward_escalate", &value).await, StatusCode::OK);
    eventually("the second click is told", || ephemeral("already asked")).await;
    assert_eq!(calls_for_help().len(), 1);
    let row = s.store.escalation(&done.id).await.unwrap().unwrap();
    assert_eq!(row.escalated_by, ASKER);
    assert_eq!(row.channel.as_deref(), Some("C123ABC456"));

    // Only an owner (or the asker) resolves it, once.
    let resolve = format!("resolve:{}", done.id);
    assert_eq!(
        s.click("U0STRANGER", "steward_resolve", &resolve).await,
        StatusCode::OK
    );
    eventually("the stranger is told", || ephemeral("can mark this resolved")).await;
    assert!(
        s.store
            .escalation(&done.id)
            .await
            .unwrap()
            .unwrap()
            .resolved_by
            .is_none()
    );
    assert_eq!(s.click(OWNER, "steward_resolve", &resolve).await, StatusCode::OK);
    eventually("the call is marked resolved", || {
        posted(&calls, "chat.update").iter().any(|b| {
            b["text"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("Resolved by <@{OWNER}>"))
        })
    })
    .await;
    assert_eq!(s.click(ASKER, "steward_resolve", &resolve).await, StatusCode::OK);
    eventually("a second resolve is told", || {
        ephemeral("Already resolved by <@U0OWNER>")
    })
    .await;
    let row = s.store.escalation(&done.id).await.unwrap().unwrap();
    assert_eq!(row.resolved_by.as_deref(), Some(OWNER));
    // `runs show` (and its JSON) carries it.
    let report = steward::run::report::RunReport::load(s.store.as_ref(), &done.id)
        .await
        .unwrap()
        .unwrap();
    let shown = serde_json::to_value(&report).unwrap();
    assert_eq!(
        shown["escalation"]["resolved_by"], OWNER,
        "{:#}",
        shown["escalation"]
    );

    // Every click is in the event log: what it did, or why it was refused.
    let logged = |outcome: steward::types::event_outcome::OutcomeKind| {
        let store = s.store.clone();
        async move {
            let filter = steward::store::EventFilter {
                outcome: Some(outcome),
                limit: 50,
                ..Default::default()
            };
            store
                .list_events(&filter)
                .await
                .unwrap()
                .iter()
                .map(|e| e.why())
                .collect::<Vec<_>>()
        }
    };
    let mut handled = Vec::new();
    for _ in 0..100 {
        handled = logged(steward::types::event_outcome::OutcomeKind::Handled).await;
        if handled.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(handled.iter().any(|w| w == "a person was called"), "{handled:?}");
    assert!(
        handled.iter().any(|w| w == "a call for a person was resolved"),
        "{handled:?}"
    );
    let ignored = logged(steward::types::event_outcome::OutcomeKind::Ignored).await;
    assert!(
        ignored.iter().any(|w| w.starts_with("click refused: Only")),
        "{ignored:?}"
    );

    // A failure notice carries the button too.
    fake.handler(|_| {
        Reply::status(
            400,
            openai_error("Invalid request", "invalid_request_error", "bad"),
        )
    });
    s.mention_at("EvESCALATE2", ASKER, "1700000500.000100").await;
    eventually("the failure notice is posted", || {
        posted(&calls, "chat.postMessage").iter().any(|b| {
            b["text"].as_str().unwrap_or_default().starts_with("Sorry")
                && b["blocks"].to_string().contains("steward_escalate")
        })
    })
    .await;
}

#[tokio::test]
async fn a_reply_slack_refuses_fails_the_run_as_undelivered_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // A Slack that refuses the answer (as it does for a channel the bot left) but takes
    // the short notice that follows.
    let (slack, calls) = fake_slack_refusing(|method, body| {
        let answer = body["text"].as_str().unwrap_or_default().starts_with("Result:");
        (method == "chat.postMessage" && answer).then_some("msg_blocks_too_long")
    })
    .await;
    let fake = FakeModel::start().await;
    model(&fake);
    let deploys = Arc::new(AtomicU32::new(0));
    let agent = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time, deploy]\n\
                 output: {stream: false}\ntriggers:\n  - slack_mention: {}\n";
    let s = start(dir.path(), &fake, &slack, &deploys, agent).await;
    s.mention("EvUNDELIVERED").await;
    let run = s.wait_status(RunStatus::Failed).await;
    assert_eq!(run.termination.as_deref(), Some("undelivered"));
    assert!(
        run.error
            .as_deref()
            .unwrap_or_default()
            .contains("msg_blocks_too_long"),
        "{:?}",
        run.error
    );
    eventually("the asker is told", || {
        posted(&calls, "chat.postMessage").iter().any(|b| {
            b["text"]
                .as_str()
                .unwrap_or_default()
                .contains("could not post my answer")
        })
    })
    .await;
}
