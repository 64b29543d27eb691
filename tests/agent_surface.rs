//! Slack's agent surface through `steward serve`'s service against a fake Slack that
//! records every call with its time: the thinking status before the model is asked,
//! the agent session, and a Stop (Slack's button or the stop reaction) that stops a run
//! mid-loop.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Json, Path as UrlPath, Query};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::slack::SlackClient;
use steward::run::Runner;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{RunStatus, SqliteStore, Store};
use support::*;
use tower::ServiceExt;

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const CHANNEL: &str = "C0HELP";

type Calls = Arc<Mutex<Vec<(String, Value, Instant)>>>;

async fn fake_slack(calls: Calls) -> SlackClient {
    let app = Router::new()
        .route("/conversations.info", get(conversations_info))
        .route(
            "/conversations.replies",
            get(|Query(_q): Query<HashMap<String, String>>| async {
                Json(json!({"ok": true, "messages": [], "has_more": false}))
            }),
        )
        .route(
            "/{method}",
            post(move |UrlPath(method): UrlPath<String>, Json(body): Json<Value>| {
                let calls = calls.clone();
                async move {
                    calls
                        .lock()
                        .unwrap()
                        .push((method.clone(), body.clone(), Instant::now()));
                    Json(json!({"ok": true, "channel": body["channel"], "ts": "1700009999.000100"}))
                }
            }),
        );
    let url = serve(app).await;
    SlackClient::new(steward::http::client().unwrap(), &url, "xoxb-test")
}

/// A slow tool with side effects: it notes when it starts and when it is done (in
/// [`DEPLOYS`]: only one test calls it).
struct Deploy;

static DEPLOYS: (std::sync::atomic::AtomicU32, std::sync::atomic::AtomicU32) = (
    std::sync::atomic::AtomicU32::new(0),
    std::sync::atomic::AtomicU32::new(0),
);

#[async_trait::async_trait]
impl steward::tools::Tool for Deploy {
    fn spec(&self) -> &steward::tools::ToolSpec {
        static SPEC: std::sync::OnceLock<steward::tools::ToolSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| steward::tools::ToolSpec {
            name: "deploy".into(),
            description: "Deploys a service (side effect).".into(),
            parameters: json!({"type": "object"}),
            effect: steward::tools::Effect::SideEffecting,
        })
    }
    async fn call(&self, _ctx: &steward::tools::ToolCtx, _args: Value) -> steward::tools::ToolResult {
        use std::sync::atomic::Ordering;
        DEPLOYS.0.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(600)).await;
        DEPLOYS.1.fetch_add(1, Ordering::SeqCst);
        Ok(steward::tools::ToolOutput::text("deployed"))
    }
    async fn mock(&self, ctx: &steward::tools::ToolCtx, args: Value) -> steward::tools::ToolResult {
        self.call(ctx, args).await
    }
}

struct Steward {
    service: Service,
    store: Arc<dyn Store>,
}

async fn start(root: &Path, fake: &FakeModel, slack: &SlackClient, agent: &str) -> Steward {
    write(root, "prompts/p.md", "You help.");
    write(root, "agents/helpdesk.yaml", agent);
    write(
        root,
        "subagents/planner.yaml",
        "description: Plans.\nmodel: openai/gpt-4.1\nprompt: prompts/p.md\ntools: []\n",
    );
    let mut tools = steward::tools::ToolRegistry::core(Default::default());
    tools.register(Arc::new(Deploy));
    let config = Config::load(
        root,
        &Known {
            tools: tools.names(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&root.join("steward.db")).await.unwrap());
    let runner = Runner::builder(store.clone())
        .providers(providers(Some(fake), None))
        .subagents(config.subagents.clone())
        .tools(tools)
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
        ..Secrets::default()
    };
    let service = Service::start(
        runner,
        Arc::new(config),
        secrets,
        Some(slack.clone()),
        None,
        DispatchSettings::default(),
    );
    Steward { service, store }
}

impl Steward {
    async fn deliver(&self, event_id: &str, event: Value) -> StatusCode {
        let body = event_callback(event_id, event).to_string();
        let req = slack_signed("/slack/events", "application/json", body, SECRET);
        self.service.router().oneshot(req).await.unwrap().status()
    }
}

const AGENT: &str =
    "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - slack_mention: {}\n";

fn mention(ts: &str) -> Value {
    json!({"type": "app_mention", "user": "U0ADA", "text": "<@UBOT> what time is it?", "ts": ts, "channel": CHANNEL, "event_ts": ts})
}

fn methods(calls: &Calls, method: &str) -> Vec<Value> {
    calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _, _)| m == method)
        .map(|(_, b, _)| b.clone())
        .collect()
}

#[tokio::test]
async fn the_thinking_status_is_up_before_the_model_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = fake_slack(calls.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "current_time", "{}")])));
    fake.push(Reply::ok(openai_text("It is noon.")));
    let s = start(dir.path(), &fake, &slack, AGENT).await;
    let ts = "1700003000.000100";
    s.deliver("EvS1", mention(ts)).await;
    let runs = ended_runs(s.store.as_ref(), 1).await;
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    // The run is stored as ended before its presence shows the end: wait for that last
    // update (the assertions below check what it was).
    for _ in 0..200 {
        let last = |method: &str| methods(&calls, method).last().map(|b| b["status"].clone());
        if last("assistant.threads.setStatus") == Some(json!(""))
            && last("agents.sessions.setStatus") == Some(json!("closed"))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }

    let recorded = calls.lock().unwrap().clone();
    let (_, first_status, status_at) = recorded
        .iter()
        .find(|(m, _, _)| m == "assistant.threads.setStatus")
        .expect("a thinking status")
        .clone();
    let first_model = fake.requests()[0].at;
    assert!(
        status_at <= first_model,
        "the status came after the model was asked"
    );
    assert_eq!(first_status["channel_id"], CHANNEL);
    assert_eq!(
        first_status["thread_ts"], ts,
        "under the mention, where the answer goes"
    );
    assert_eq!(first_status["status"], "is thinking…");
    // The tool call shows as a step; the status is cleared at the end.
    let statuses = methods(&calls, "assistant.threads.setStatus");
    assert!(
        statuses
            .iter()
            .any(|b| b["loading_messages"] == json!(["Checking the time…"])),
        "{statuses:?}"
    );
    assert_eq!(statuses.last().unwrap()["status"], "");
    let sessions = methods(&calls, "agents.sessions.setStatus");
    assert_eq!(sessions[0]["status"], "processing");
    assert_eq!(sessions[0]["initiator_user_id"], "U0ADA");
    assert_eq!(sessions.last().unwrap()["status"], "closed");
    // No reactions unless the agent asks for them (`output.status: reaction | both`).
    assert!(methods(&calls, "reactions.add").is_empty());
    s.service.stop(Duration::from_secs(5)).await;
}

/// Waits until the fake model has had `n` requests.
async fn model_requests(fake: &FakeModel, n: usize) {
    for _ in 0..400 {
        if fake.requests().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the model had {} requests", fake.requests().len());
}

async fn stopped_mid_loop(stop: impl Fn(&str) -> Value) {
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = fake_slack(calls.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "current_time", "{}")])));
    // The second model call takes long: the Stop arrives while it is in flight.
    fake.push(Reply::ok(openai_tools(&[("c2", "current_time", "{}")])).delay(Duration::from_secs(5)));
    fake.push(Reply::ok(openai_text("never reached")));
    let s = start(dir.path(), &fake, &slack, AGENT).await;
    let ts = "1700004000.000100";
    s.deliver("EvX1", mention(ts)).await;
    model_requests(&fake, 2).await;
    let asked = Instant::now();
    assert_eq!(s.deliver("EvX2", stop(ts)).await, StatusCode::OK);
    let runs = ended_runs(s.store.as_ref(), 1).await;
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "the model call in flight was dropped"
    );
    let run = &runs[0];
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.termination.as_deref(), Some("stopped_by_user"));
    assert_eq!(run.error.as_deref(), Some("stopped by U0ADA"));
    assert_eq!(fake.requests().len(), 2, "no model call after the stop");
    assert_eq!(runs.len(), 1, "a stop starts nothing");
    // Slack does not set the session back; steward does (after the run's row is
    // written, so wait for it). No answer, no failure note.
    for _ in 0..200 {
        if methods(&calls, "agents.sessions.setStatus").last().unwrap()["status"] == "closed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        methods(&calls, "agents.sessions.setStatus").last().unwrap()["status"],
        "closed"
    );
    assert_eq!(
        methods(&calls, "assistant.threads.setStatus").last().unwrap()["status"],
        ""
    );
    assert!(methods(&calls, "chat.postMessage").is_empty());
    // A stop for a run that already ended does nothing.
    assert_eq!(s.deliver("EvX3", stop(ts)).await, StatusCode::OK);
    all_routed(s.store.as_ref()).await;
    assert_eq!(s.store.list_runs(10).await.unwrap().len(), 1);
    s.service.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn slacks_stop_button_stops_the_run_mid_loop() {
    stopped_mid_loop(|ts| {
        json!({"type": "agent_session_stopped", "channel": CHANNEL, "thread_ts": ts, "user": "U0ADA",
               "streaming_message_ts": [], "event_ts": "1700004010.000100"})
    })
    .await;
}

#[tokio::test]
async fn a_stop_reaction_on_the_request_stops_the_run() {
    stopped_mid_loop(|ts| {
        json!({"type": "reaction_added", "user": "U0ADA", "reaction": "octagonal_sign", "item_user": "U0ADA",
               "item": {"type": "message", "channel": CHANNEL, "ts": ts}, "event_ts": "1700004010.000100"})
    })
    .await;
}

#[tokio::test]
async fn an_unsigned_stop_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let slack = fake_slack(Calls::default()).await;
    let fake = FakeModel::start().await;
    let s = start(dir.path(), &fake, &slack, AGENT).await;
    let body = event_callback(
        "EvF1",
        json!({"type": "agent_session_stopped", "channel": CHANNEL, "thread_ts": "1.1", "user": "U0ADA"}),
    )
    .to_string();
    let forged = slack_signed("/slack/events", "application/json", body, "not-the-secret");
    assert_eq!(
        s.service.router().oneshot(forged).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    s.service.stop(Duration::from_secs(5)).await;
}

const DM_AGENT: &str = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - slack_dm: {}\n\
suggested_prompts:\n  - {title: Reset my password, message: How do I reset my SSO password?}\n  - {title: VPN, message: The VPN keeps dropping}\n";

#[tokio::test]
async fn the_agent_view_suggests_prompts_knows_the_channel_in_view_and_titles_its_threads() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = fake_slack(calls.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Open the SSO portal and choose Reset.")));
    let s = start(dir.path(), &fake, &slack, DM_AGENT).await;

    // Opening the Messages tab suggests the DM agent's prompts; nothing runs.
    s.deliver("EvH1", json!({"type": "app_home_opened", "user": "U0ADA", "channel": "D0ADA", "tab": "messages", "event_ts": "1700005000.000100"}))
        .await;
    let thread = "1700005001.000100";
    s.deliver(
        "EvH2",
        json!({"type": "assistant_thread_started", "event_ts": "1700005001.000200",
               "assistant_thread": {"user_id": "U0ADA", "channel_id": "D0ADA", "thread_ts": thread,
                                    "context": {"channel_id": "C0VIEW", "team_id": "T1", "enterprise_id": null}}}),
    )
    .await;
    all_routed(s.store.as_ref()).await;
    let suggested = methods(&calls, "assistant.threads.setSuggestedPrompts");
    assert_eq!(suggested.len(), 2, "{suggested:?}");
    assert_eq!(suggested[0]["channel_id"], "D0ADA");
    assert!(suggested[0].get("thread_ts").is_none());
    assert_eq!(suggested[1]["thread_ts"], thread);
    assert_eq!(
        suggested[1]["prompts"],
        json!([{"title": "Reset my password", "message": "How do I reset my SSO password?"},
               {"title": "VPN", "message": "The VPN keeps dropping"}])
    );
    assert!(s.store.list_runs(10).await.unwrap().is_empty());

    // A message in that thread: the run knows the channel in view; its first answer
    // names the thread.
    let ts = "1700005002.000100";
    s.deliver(
        "EvH3",
        json!({"type": "message", "channel": "D0ADA", "channel_type": "im", "user": "U0ADA",
               "text": "How do I reset my SSO password?", "ts": ts, "thread_ts": thread, "event_ts": ts}),
    )
    .await;
    let runs = ended_runs(s.store.as_ref(), 1).await;
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    let request = chat_turns(&fake.requests()[0].body);
    assert!(
        request
            .last()
            .unwrap()
            .1
            .contains("\"viewing_channel\": \"C0VIEW\""),
        "{request:?}"
    );
    let titles = methods(&calls, "assistant.threads.setTitle");
    assert_eq!(titles.len(), 1);
    assert_eq!(titles[0]["thread_ts"], thread);
    assert_eq!(titles[0]["title"], "How do I reset my SSO password?");
    s.service.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn the_channel_beside_the_agent_view_reaches_that_persons_dm_runs() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = fake_slack(calls.clone()).await;
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("Done.")));
    let s = start(dir.path(), &fake, &slack, DM_AGENT).await;
    let context = |id: &str| {
        json!({"type": "app_context_changed", "user": "U0ADA",
        "context": {"entities": [{"type": "slack#/types/channel_id", "value": id, "team_id": "T1"}]}})
    };
    let dm = |ts: &str, user: &str| {
        json!({"type": "message", "channel": "D0ADA", "channel_type": "im", "user": user,
        "text": "What is going on here?", "ts": ts, "event_ts": ts})
    };

    // Slack's documented shape names no person: nothing is kept, nothing runs.
    assert_eq!(
        s.deliver(
            "EvX0",
            json!({"type": "app_context_changed", "context": {"entities": [
            {"type": "slack#/types/channel_id", "value": "C0NOBODY", "team_id": "T1"}]}})
        )
        .await,
        StatusCode::OK
    );
    s.deliver("EvX1", context("C0INCIDENT")).await;
    all_routed(s.store.as_ref()).await;
    assert!(s.store.list_runs(10).await.unwrap().is_empty());

    // That person's DM without a thread context knows the channel in view ...
    s.deliver("EvX2", dm("1700006000.000100", "U0ADA")).await;
    ended_runs(s.store.as_ref(), 1).await;
    let first = chat_turns(&fake.requests()[0].body);
    assert!(
        first
            .last()
            .unwrap()
            .1
            .contains("\"viewing_channel\": \"C0INCIDENT\""),
        "{first:?}"
    );
    // ... someone else's does not ...
    s.deliver("EvX3", dm("1700006001.000100", "U0BOB")).await;
    ended_runs(s.store.as_ref(), 2).await;
    let other = chat_turns(&fake.requests()[1].body);
    assert!(!other.last().unwrap().1.contains("viewing_channel"), "{other:?}");
    // ... and once the person looks at no channel, neither does theirs.
    s.deliver(
        "EvX4",
        json!({"type": "app_context_changed", "user": "U0ADA", "context": {}}),
    )
    .await;
    all_routed(s.store.as_ref()).await;
    s.deliver("EvX5", dm("1700006002.000100", "U0ADA")).await;
    ended_runs(s.store.as_ref(), 3).await;
    let cleared = chat_turns(&fake.requests()[2].body);
    assert!(
        !cleared.last().unwrap().1.contains("viewing_channel"),
        "{cleared:?}"
    );
    assert!(!format!("{:?}", fake.requests()).contains("C0NOBODY"));
    s.service.stop(Duration::from_secs(5)).await;
}

#[test]
fn suggested_prompts_need_a_dm_trigger() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "prompts/p.md", "You help.");
    write(
        dir.path(),
        "agents/helpdesk.yaml",
        &DM_AGENT.replace("  - slack_dm: {}\n", "  - slack_mention: {}\n"),
    );
    let known = Known {
        tools: steward::tools::ToolRegistry::core(Default::default()).names(),
        skills: Default::default(),
    };
    let err = Config::load(dir.path(), &known).unwrap_err().to_string();
    assert!(
        err.contains("'suggested_prompts' are shown in Slack's agent DM view"),
        "{err}"
    );
}

#[tokio::test]
async fn a_stop_lets_a_side_effecting_call_under_way_finish() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = fake_slack(calls.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "deploy", "{}")])));
    fake.push(Reply::ok(openai_text("never reached")));
    let agent = AGENT.replace("tools: [current_time]", "tools: [deploy]");
    let s = start(dir.path(), &fake, &slack, &agent).await;
    let ts = "1700006000.000100";
    s.deliver("EvD1", mention(ts)).await;
    while DEPLOYS.0.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stop = json!({"type": "agent_session_stopped", "channel": CHANNEL, "thread_ts": ts, "user": "U0ADA"});
    s.deliver("EvD2", stop).await;
    let runs = ended_runs(s.store.as_ref(), 1).await;
    assert_eq!(runs[0].termination.as_deref(), Some("stopped_by_user"));
    assert_eq!(
        (DEPLOYS.0.load(Ordering::SeqCst), DEPLOYS.1.load(Ordering::SeqCst)),
        (1, 1),
        "the deploy finished"
    );
    let events = s.store.run_events(&runs[0].id).await.unwrap();
    let result = events
        .iter()
        .find(|e| e.kind == "tool_result")
        .expect("its result is recorded");
    assert_eq!(result.data["ok"], true);
    assert_eq!(fake.requests().len(), 1, "no model call after the stop");
    s.service.stop(Duration::from_secs(5)).await;
}

/// A fake Slack that streams: `chat.startStream` gives the message a ts; `fail` names
/// a method and the answer it gets instead (status, body, Retry-After).
async fn streaming_slack(calls: Calls, fail: Option<(&'static str, u16, Value)>) -> SlackClient {
    let app = Router::new()
        .route(
            "/conversations.replies",
            get(|| async { Json(json!({"ok": true, "messages": [], "has_more": false})) }),
        )
        .route(
            "/{method}",
            post(move |UrlPath(method): UrlPath<String>, Json(body): Json<Value>| {
                let calls = calls.clone();
                let fail = fail.clone();
                async move {
                    calls
                        .lock()
                        .unwrap()
                        .push((method.clone(), body.clone(), Instant::now()));
                    if let Some((m, status, answer)) = fail
                        && m == method
                    {
                        let mut resp = (StatusCode::from_u16(status).unwrap(), Json(answer)).into_response();
                        resp.headers_mut().insert("retry-after", "0".parse().unwrap());
                        return resp;
                    }
                    Json(json!({"ok": true, "channel": body["channel"], "ts": "1700007777.000100"}))
                        .into_response()
                }
            }),
        );
    let url = serve(app).await;
    SlackClient::new(steward::http::client().unwrap(), &url, "xoxb-test")
}

/// A long answer: 2,000 characters in sentences.
fn long_answer() -> String {
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

/// The text people see of a reply: what streamed, then what was posted.
fn shown(calls: &Calls) -> String {
    let mut text = String::new();
    for (m, b, _) in calls.lock().unwrap().iter() {
        match m.as_str() {
            "chat.startStream" | "chat.appendStream" => {
                text.push_str(b["markdown_text"].as_str().unwrap_or_default())
            }
            "chat.postMessage" => text.push_str(&b["blocks"].to_string()),
            _ => {}
        }
    }
    text
}

#[tokio::test]
async fn an_answer_streams_into_its_thread_with_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = streaming_slack(calls.clone(), None).await;
    let fake = FakeModel::start().await;
    let answer = long_answer();
    fake.push(Reply::ok(openai_tools(&[("c1", "current_time", "{}")])));
    fake.push(Reply::ok(openai_text(&answer)));
    let agent = format!("{AGENT}output: {{feedback: true}}\n");
    let s = start(dir.path(), &fake, &slack, &agent).await;
    let ts = "1700008000.000100";
    s.deliver("EvST1", mention(ts)).await;
    let runs = ended_runs(s.store.as_ref(), 1).await;
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    assert!(fake.requests().iter().all(|r| r.body["stream"] == true));

    let recorded = calls.lock().unwrap().clone();
    let at = |method: &str| {
        recorded
            .iter()
            .position(|(m, _, _)| m == method)
            .unwrap_or_else(|| panic!("no {method}"))
    };
    assert!(at("assistant.threads.setStatus") < at("chat.startStream"));
    assert!(at("chat.startStream") < at("chat.stopStream"));
    let start_body = &recorded[at("chat.startStream")].1;
    assert_eq!(start_body["channel"], CHANNEL);
    assert_eq!(start_body["thread_ts"], ts);
    assert_eq!(start_body["recipient_user_id"], "U0ADA");
    // The tool call is a task: in progress, then complete with a line of its output.
    let tasks: Vec<Value> = recorded
        .iter()
        .filter(|(m, _, _)| m.ends_with("Stream"))
        .flat_map(|(_, b, _)| b["chunks"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "task_update")
        .collect();
    let states: Vec<&str> = tasks.iter().map(|t| t["status"].as_str().unwrap()).collect();
    assert_eq!(states, ["in_progress", "complete"], "{tasks:?}");
    assert_eq!(tasks[0]["id"], "c1");
    assert_eq!(tasks[0]["title"], "Checking the time…");
    // The text arrived whole, once, in few calls; no separate reply.
    assert_eq!(shown(&calls), answer);
    let stream_calls = recorded.iter().filter(|(m, _, _)| m.ends_with("Stream")).count();
    assert!(
        stream_calls <= 12,
        "{stream_calls} stream calls for 2,000 characters"
    );
    let text_calls = recorded
        .iter()
        .filter(|(m, b, _)| m.ends_with("Stream") && b["markdown_text"].is_string())
        .count();
    assert!(text_calls <= 10, "{text_calls} calls carried the text");
    assert!(methods(&calls, "chat.postMessage").is_empty());
    let stop = &recorded[at("chat.stopStream")].1;
    assert_eq!(stop["ts"], "1700007777.000100");
    assert_eq!(
        stop["metadata"]["event_type"], "steward_reply",
        "later runs know it as their own"
    );
    assert_eq!(stop["blocks"][0]["type"], "context");
    assert_eq!(
        stop["blocks"][1]["type"], "context_actions",
        "feedback buttons end the answer"
    );
    s.service.stop(Duration::from_secs(5)).await;
}

/// How a mention reaches steward.
#[derive(Clone, Copy)]
enum Delivery {
    /// A signed POST to `/slack/events`.
    Http,
    /// An `events_api` envelope over a Socket Mode WebSocket.
    SocketMode,
}

/// A fake Socket Mode endpoint: `apps.connections.open` hands out a WebSocket that
/// sends `payload` as one `events_api` envelope and then stays open. Its Web API base.
async fn socket_mode_slack(payload: Value) -> String {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let ws = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_url = format!("ws://{}/link", ws.local_addr().unwrap());
    tokio::spawn(async move {
        let (tcp, _) = ws.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        let hello = json!({"type": "hello", "num_connections": 1});
        ws.send(Message::Text(hello.to_string().into())).await.unwrap();
        let envelope = json!({"envelope_id": "env-1", "type": "events_api", "accepts_response_payload": false,
                              "retry_attempt": 0, "retry_reason": "", "payload": payload});
        ws.send(Message::Text(envelope.to_string().into())).await.unwrap();
        while ws.next().await.is_some() {}
    });
    serve(Router::new().route(
        "/apps.connections.open",
        post(move || {
            let url = ws_url.clone();
            async move { Json(json!({"ok": true, "url": url})) }
        }),
    ))
    .await
}

async fn falls_back(fail: (&'static str, u16, Value)) {
    falls_back_over(fail, Delivery::Http).await;
}

async fn falls_back_over(fail: (&'static str, u16, Value), delivery: Delivery) {
    let failing = fail.0;
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = streaming_slack(calls.clone(), Some(fail)).await;
    let fake = FakeModel::start().await;
    let answer = long_answer();
    fake.push(Reply::ok(openai_text(&answer)));
    let mut s = start(dir.path(), &fake, &slack, AGENT).await;
    match delivery {
        Delivery::Http => {
            s.deliver("EvFB1", mention("1700008100.000100")).await;
        }
        Delivery::SocketMode => {
            let api_base = socket_mode_slack(event_callback("EvFB1", mention("1700008100.000100"))).await;
            s.service = s.service.with_socket_mode(
                steward::server::socket_mode::SocketModeConfig {
                    app_token: "xapp-1-test".into(),
                    api_base,
                },
                steward::http::client().unwrap(),
            );
        }
    }
    let runs = ended_runs(s.store.as_ref(), 1).await;
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    // Nothing lost, nothing twice: what Slack accepted of the stream, then the reply,
    // make the answer.
    let posted = methods(&calls, "chat.postMessage");
    assert_eq!(posted.len(), 1, "the rest goes as one reply");
    let recorded = calls.lock().unwrap().clone();
    assert!(
        recorded.iter().any(|(m, _, _)| m == "chat.startStream"),
        "streaming was tried"
    );
    let accepted: String = recorded
        .iter()
        .filter(|(m, _, _)| (m == "chat.startStream" || m == "chat.appendStream") && m != failing)
        .map(|(_, b, _)| b["markdown_text"].as_str().unwrap_or_default().to_string())
        .collect();
    let rest = posted[0]["text"].as_str().unwrap();
    assert_eq!(format!("{accepted}{rest}"), answer);
    s.service.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_refused_stream_posts_the_answer_as_a_reply() {
    falls_back((
        "chat.startStream",
        200,
        json!({"ok": false, "error": "not_allowed_token_type"}),
    ))
    .await;
}

#[tokio::test]
async fn a_stream_slack_ended_posts_the_rest() {
    falls_back((
        "chat.appendStream",
        200,
        json!({"ok": false, "error": "message_not_in_streaming_state"}),
    ))
    .await;
}

#[tokio::test]
async fn a_rate_limited_stream_posts_the_rest() {
    falls_back((
        "chat.appendStream",
        429,
        json!({"ok": false, "error": "ratelimited"}),
    ))
    .await;
}

#[tokio::test]
async fn a_subagent_is_a_task_and_the_planner_gives_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let calls = Calls::default();
    let slack = streaming_slack(calls.clone(), None).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "subagent",
        r#"{"name": "planner", "prompt": "Plan the VPN fix."}"#,
    )])));
    fake.push(Reply::ok(openai_text(
        "Check the keepalive, then restart the tunnel.",
    )));
    fake.push(Reply::ok(openai_text("Done: following the plan fixed it.")));
    let agent = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\nsubagents: [planner]\ntriggers:\n  - slack_mention: {}\n";
    let s = start(dir.path(), &fake, &slack, agent).await;
    s.deliver("EvPL1", mention("1700008200.000100")).await;
    let runs = ended_runs(s.store.as_ref(), 2).await;
    assert!(runs.iter().all(|r| r.status == RunStatus::Succeeded), "{runs:?}");
    let chunks: Vec<Value> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _, _)| m.ends_with("Stream"))
        .flat_map(|(_, b, _)| b["chunks"].as_array().cloned().unwrap_or_default())
        .collect();
    let task: Vec<(&str, &str)> = chunks
        .iter()
        .filter(|c| c["type"] == "task_update")
        .map(|c| (c["title"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        task,
        [
            ("Asking a subagent…", "in_progress"),
            ("Asking a subagent…", "complete")
        ]
    );
    let plan: Vec<&Value> = chunks.iter().filter(|c| c["type"] == "plan_update").collect();
    assert_eq!(plan.len(), 1, "{chunks:?}");
    assert_eq!(plan[0]["title"], "Check the keepalive, then restart the tunnel.");
    s.service.stop(Duration::from_secs(5)).await;
}

/// Socket Mode changes how events arrive, not how replies leave (the Web API over
/// HTTPS): a mention over the socket streams its answer, and a stream Slack ends
/// falls back the same way.
#[tokio::test]
async fn a_mention_over_socket_mode_streams_and_falls_back_the_same_way() {
    falls_back_over(
        (
            "chat.appendStream",
            200,
            json!({"ok": false, "error": "message_not_in_streaming_state"}),
        ),
        Delivery::SocketMode,
    )
    .await;
}
