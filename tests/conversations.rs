//! Conversations through `steward serve`'s service against a fake Slack that keeps its
//! messages (so a thread read back holds the bot's own replies): the thread as context,
//! follow-ups without a mention, direct messages, and a plain failure reply.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Json, Path as UrlPath, Query};
use axum::http::StatusCode;
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
const DM: &str = "D0ADA";

/// Slack's side: every message, as `conversations.replies` / `history` return them.
#[derive(Clone, Default)]
struct Workspace(Arc<Mutex<Vec<Value>>>);

impl Workspace {
    fn say(&self, channel: &str, ts: &str, thread_ts: Option<&str>, user: &str, text: &str) {
        let mut m = json!({"type": "message", "channel": channel, "user": user, "text": text, "ts": ts});
        if let Some(t) = thread_ts {
            m["thread_ts"] = json!(t);
        }
        self.0.lock().unwrap().push(m);
    }

    fn bot_posts(&self) -> Vec<Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["user"] == "UBOT")
            .cloned()
            .collect()
    }
}

async fn fake_slack(ws: Workspace) -> SlackClient {
    fake_slack_at(ws).await.0
}

/// The fake Slack and its base URL (files are served under `/files/`).
async fn fake_slack_at(ws: Workspace) -> (SlackClient, String) {
    let (w1, w2, w3) = (ws.clone(), ws.clone(), ws.clone());
    let app = Router::new()
        .route("/conversations.info", get(conversations_info))
        .route(
            "/conversations.replies",
            get(move |Query(q): Query<HashMap<String, String>>| {
                let all = w1.0.lock().unwrap().clone();
                async move {
                    assert_eq!(q.get("include_all_metadata").map(String::as_str), Some("true"));
                    let root = &q["ts"];
                    let mut thread: Vec<Value> = all
                        .into_iter()
                        .filter(|m| m["channel"] == q["channel"].as_str() && (m["ts"] == root.as_str() || m["thread_ts"] == root.as_str()))
                        .collect();
                    thread.sort_by(|a, b| a["ts"].as_str().cmp(&b["ts"].as_str()));
                    Json(json!({"ok": true, "messages": thread, "has_more": false}))
                }
            }),
        )
        .route(
            "/conversations.history",
            get(move |Query(q): Query<HashMap<String, String>>| {
                let all = w2.0.lock().unwrap().clone();
                async move {
                    let mut roots: Vec<Value> = all
                        .into_iter()
                        .filter(|m| m["channel"] == q["channel"].as_str() && m.get("thread_ts").is_none())
                        .collect();
                    roots.sort_by(|a, b| b["ts"].as_str().cmp(&a["ts"].as_str()));
                    Json(json!({"ok": true, "messages": roots, "has_more": false}))
                }
            }),
        )
        .route(
            "/users.info",
            get(|Query(q): Query<HashMap<String, String>>| async move {
                let name = match q["user"].as_str() {
                    "U0ADA" => "Ada",
                    "U0BO" => "Bo",
                    _ => return Json(json!({"ok": false, "error": "user_not_found"})),
                };
                Json(json!({"ok": true, "user": {"id": q["user"], "name": name.to_lowercase(), "profile": {"display_name": name}}}))
            }),
        )
        .route(
            "/files/{name}",
            get(|UrlPath(name): UrlPath<String>| async move { format!("contents of {name}: restart nginx with `systemctl restart nginx`.") }),
        )
        .route(
            "/{method}",
            post(move |UrlPath(method): UrlPath<String>, Json(body): Json<Value>| {
                let ws = w3.clone();
                async move {
                    if method == "auth.test" {
                        return Json(json!({"ok": true, "user_id": "UBOT", "bot_id": "B0BOT", "team_id": "T1"}));
                    }
                    if method != "chat.postMessage" {
                        return Json(json!({"ok": true}));
                    }
                    let mut all = ws.0.lock().unwrap();
                    let ts = format!("1700001{:03}.000100", all.len());
                    let mut m = json!({"type": "message", "channel": body["channel"], "user": "UBOT", "bot_id": "B0BOT",
                                       "text": body["text"], "ts": ts, "metadata": body["metadata"]});
                    if let Some(t) = body["thread_ts"].as_str() {
                        m["thread_ts"] = json!(t);
                    }
                    all.push(m);
                    Json(json!({"ok": true, "channel": body["channel"], "ts": ts}))
                }
            }),
        );
    let url = serve(app).await;
    (
        SlackClient::new(steward::http::client().unwrap(), &url, "xoxb-test"),
        url,
    )
}

struct Steward {
    service: Option<Service>,
    store: Arc<dyn Store>,
}

async fn start(root: &Path, fake: &FakeModel, slack: &SlackClient) -> Steward {
    start_with(root, fake, slack, &[]).await
}

/// [`start`] with more agents: `(file name, YAML)`.
async fn start_with(root: &Path, fake: &FakeModel, slack: &SlackClient, agents: &[(&str, &str)]) -> Steward {
    write(root, "prompts/p.md", "You help.");
    write(
        root,
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - slack_mention: {}\n  - slack_dm: {}\n",
    );
    // After the default, so a test may replace it.
    for (name, yaml) in agents {
        write(root, &format!("agents/{name}.yaml"), yaml);
    }
    let tools = steward::tools::ToolRegistry::core(Default::default());
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
        .tools(tools)
        .tokens(tokens())
        .sources(steward::triggers::Sources::new(
            steward::triggers::source::SourceSettings {
                slack: Some(slack.clone()),
                egress: steward::http::Egress::new(steward::http::EgressPolicy::parse("127.0.0.1").unwrap()),
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
    Steward {
        service: Some(service),
        store,
    }
}

impl Steward {
    /// Delivers an event callback with `event`, signed.
    async fn deliver(&self, event_id: &str, event: Value) -> StatusCode {
        let body = event_callback(event_id, event).to_string();
        let req = slack_signed("/slack/events", "application/json", body, SECRET);
        self.service
            .as_ref()
            .unwrap()
            .router()
            .oneshot(req)
            .await
            .unwrap()
            .status()
    }

    /// Waits until `n` runs exist and all ended; returns them newest first.
    async fn runs(&self, n: usize) -> Vec<steward::store::RunRow> {
        ended_runs(self.store.as_ref(), n).await
    }

    /// Waits until every stored event is routed.
    async fn routed(&self) {
        all_routed(self.store.as_ref()).await
    }

    async fn stop(&mut self) {
        if let Some(s) = self.service.take() {
            s.stop(Duration::from_secs(5)).await;
        }
    }
}

fn mention(channel: &str, user: &str, text: &str, ts: &str, thread_ts: Option<&str>) -> Value {
    let mut e = json!({"type": "app_mention", "user": user, "text": text, "ts": ts, "channel": channel, "event_ts": ts});
    if let Some(t) = thread_ts {
        e["thread_ts"] = json!(t);
    }
    e
}

fn message(channel: &str, user: &str, text: &str, ts: &str, thread_ts: Option<&str>) -> Value {
    let mut e = json!({"type": "message", "channel": channel, "channel_type": if channel.starts_with('D') { "im" } else { "channel" },
                       "user": user, "text": text, "ts": ts, "event_ts": ts});
    if let Some(t) = thread_ts {
        e["thread_ts"] = json!(t);
    }
    e
}

#[tokio::test]
async fn a_thread_is_the_context_and_follow_ups_need_no_mention() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let slack = fake_slack(ws.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text(
        "The cert expires Friday; renew it with certbot.",
    )));
    fake.push(Reply::ok(openai_text("Yes: run `certbot renew` on the gateway.")));
    fake.push(Reply::ok(openai_text("Third answer.")));
    let mut s = start(dir.path(), &fake, &slack).await;

    // A thread: Ada states a fact, Bo asks the bot.
    let root = "1700000000.000100";
    ws.say(
        CHANNEL,
        root,
        None,
        "U0ADA",
        "The VPN certificate on gw-2 expires Friday.",
    );
    ws.say(
        CHANNEL,
        "1700000010.000100",
        Some(root),
        "U0BO",
        "<@UBOT> what should we do?",
    );
    s.deliver(
        "EvT1",
        mention(
            CHANNEL,
            "U0BO",
            "<@UBOT> what should we do?",
            "1700000010.000100",
            Some(root),
        ),
    )
    .await;
    s.runs(1).await;
    let first = chat_turns(&fake.requests()[0].body);
    assert!(
        first.iter().any(|(role, text)| role == "user" && text == "@Ada: The VPN certificate on gw-2 expires Friday."),
        "{first:?}"
    );
    // The triggering message is last, marked as the request, and not repeated above.
    let (role, last) = first.last().unwrap();
    assert_eq!(role, "user");
    assert!(last.starts_with("[steward: the newest message of the conversation, the one to answer:]"));
    assert_eq!(
        first
            .iter()
            .filter(|(_, t)| t.contains("what should we do?"))
            .count(),
        1
    );

    // A plain reply in the bot's thread continues it, with the bot's reply as its own turn.
    ws.say(
        CHANNEL,
        "1700000020.000100",
        Some(root),
        "U0ADA",
        "can you give me the exact command?",
    );
    s.deliver(
        "EvT2",
        message(
            CHANNEL,
            "U0ADA",
            "can you give me the exact command?",
            "1700000020.000100",
            Some(root),
        ),
    )
    .await;
    let runs = s.runs(2).await;
    assert!(runs.iter().all(|r| r.status == RunStatus::Succeeded));
    // The event log says the reply reached the agent as a follow-up, not by a trigger.
    let follow_ups = s
        .store
        .list_events(&steward::store::EventFilter {
            outcome: Some(steward::types::event_outcome::OutcomeKind::FollowUp),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(follow_ups.len(), 1, "{follow_ups:?}");
    let second = chat_turns(&fake.requests()[1].body);
    assert!(
        second.contains(&(
            "assistant".to_string(),
            "The cert expires Friday; renew it with certbot.".to_string()
        )),
        "{second:?}"
    );
    let replies: Vec<Value> = ws.bot_posts();
    assert_eq!(replies.len(), 2);
    assert!(replies.iter().all(|r| r["thread_ts"] == root));

    // Nothing starts for: a thread the bot never answered in, a reply addressed to
    // someone else, another app's message, an edit.
    let other_root = "1700000100.000100";
    ws.say(CHANNEL, other_root, None, "U0ADA", "lunch?");
    s.deliver(
        "EvN1",
        message(CHANNEL, "U0BO", "sure", "1700000110.000100", Some(other_root)),
    )
    .await;
    s.deliver(
        "EvN2",
        message(
            CHANNEL,
            "U0BO",
            "<@U0ADA> can you check?",
            "1700000120.000100",
            Some(root),
        ),
    )
    .await;
    let mut from_app = message(CHANNEL, "U0APP", "build passed", "1700000130.000100", Some(root));
    from_app["bot_id"] = json!("B0CI");
    s.deliver("EvN3", from_app).await;
    let edit = json!({"type": "message", "subtype": "message_changed", "channel": CHANNEL, "ts": "1700000140.000100",
        "message": {"type": "message", "user": "U0ADA", "text": "can you give me the exact command, please?", "ts": "1700000020.000100", "thread_ts": root},
        "previous_message": {"type": "message", "user": "U0ADA", "text": "can you give me the exact command?", "ts": "1700000020.000100", "thread_ts": root}});
    s.deliver("EvN4", edit).await;
    s.routed().await;
    assert_eq!(
        s.store.list_runs(50).await.unwrap().len(),
        2,
        "none of them started a run"
    );
    s.stop().await;
}

#[tokio::test]
async fn direct_messages_are_a_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let slack = fake_slack(ws.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Noted: your laptop is a ThinkPad X1.")));
    fake.push(Reply::ok(openai_text("For the X1, hold F12 at boot.")));
    let mut s = start(dir.path(), &fake, &slack).await;

    ws.say(
        DM,
        "1700000200.000100",
        None,
        "U0ADA",
        "my laptop is a ThinkPad X1",
    );
    s.deliver(
        "EvD1",
        message(
            DM,
            "U0ADA",
            "my laptop is a ThinkPad X1",
            "1700000200.000100",
            None,
        ),
    )
    .await;
    s.runs(1).await;
    ws.say(
        DM,
        "1700000300.000100",
        None,
        "U0ADA",
        "how do I open its boot menu?",
    );
    s.deliver(
        "EvD2",
        message(
            DM,
            "U0ADA",
            "how do I open its boot menu?",
            "1700000300.000100",
            None,
        ),
    )
    .await;
    let runs = s.runs(2).await;
    assert!(runs.iter().all(|r| r.status == RunStatus::Succeeded && r.private));
    let second = chat_turns(&fake.requests()[1].body);
    assert!(
        second.contains(&("user".to_string(), "@Ada: my laptop is a ThinkPad X1".to_string())),
        "{second:?}"
    );
    assert!(
        second.contains(&(
            "assistant".to_string(),
            "Noted: your laptop is a ThinkPad X1.".to_string()
        )),
        "{second:?}"
    );
    // Answers in a DM go at its root, like a chat.
    assert!(ws.bot_posts().iter().all(|p| p.get("thread_ts").is_none()));
    // Nothing of the conversation is in the database.
    s.stop().await;
    drop(s);
    let bytes: Vec<u8> = ["steward.db", "steward.db-wal"]
        .iter()
        .filter_map(|n| std::fs::read(dir.path().join(n)).ok())
        .flatten()
        .collect();
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains("ThinkPad"), "private text at rest");
}

#[tokio::test]
async fn a_failed_run_says_so_in_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let slack = fake_slack(ws.clone()).await;
    let fake = FakeModel::start().await;
    fake.always(Reply::status(
        401,
        openai_error(
            "Incorrect API key provided: sk-test***",
            "invalid_request_error",
            "invalid_api_key",
        ),
    ));
    let mut s = start(dir.path(), &fake, &slack).await;
    s.deliver(
        "EvF1",
        mention(CHANNEL, "U0ADA", "<@UBOT> hello", "1700000400.000100", None),
    )
    .await;
    let runs = s.runs(1).await;
    assert_eq!(runs[0].status, RunStatus::Failed);
    // The run is recorded as failed before the failure is told in its thread.
    let mut posts = ws.bot_posts();
    for _ in 0..200 {
        if !posts.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        posts = ws.bot_posts();
    }
    assert_eq!(posts.len(), 1);
    let text = posts[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Sorry, I could not get an answer from the AI model"),
        "{text}"
    );
    assert!(text.contains(&format!("(run `{}`)", runs[0].id)), "{text}");
    assert!(
        !text.contains("sk-test") && !text.contains("invalid_api_key"),
        "{text}"
    );
    assert_eq!(posts[0]["thread_ts"], "1700000400.000100");
    s.stop().await;
}

/// Waits until the fake model has had `n` requests.
async fn model_requests(fake: &FakeModel, n: usize) {
    for _ in 0..200 {
        if fake.requests().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the model had {} requests", fake.requests().len());
}

#[tokio::test]
async fn messages_sent_during_a_run_are_handed_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let slack = fake_slack(ws.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Draft about the printer.")).delay(Duration::from_millis(700)));
    fake.push(Reply::ok(openai_text(
        "Printer on floor 3: use queue P3; toner is in the closet.",
    )));
    let mut s = start(dir.path(), &fake, &slack).await;

    // Three direct messages within a second: the first starts a run at once, the
    // other two reach it while the model is still answering.
    let lines = [
        ("1700000600.000100", "the printer is broken"),
        ("1700000600.300100", "the one on floor 3"),
        ("1700000600.600100", "also where is the toner?"),
    ];
    for (i, (ts, text)) in lines.iter().enumerate() {
        if i == 1 {
            model_requests(&fake, 1).await;
        }
        ws.say(DM, ts, None, "U0ADA", text);
        s.deliver(&format!("EvB{i}"), message(DM, "U0ADA", text, ts, None))
            .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let runs = s.runs(1).await;
    s.routed().await;
    assert_eq!(
        s.store.list_runs(50).await.unwrap().len(),
        1,
        "one run for the burst"
    );
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let last = chat_turns(&requests[1].body);
    // The draft stays as the model's turn; the later messages follow it, each once.
    assert!(
        last.contains(&("assistant".to_string(), "Draft about the printer.".to_string())),
        "{last:?}"
    );
    let (role, handed) = last.last().unwrap();
    assert_eq!(role, "user");
    assert!(
        handed.contains("@Ada: the one on floor 3\n@Ada: also where is the toner?"),
        "{handed}"
    );
    for (_, text) in &lines[1..] {
        assert_eq!(
            last.iter().filter(|(_, t)| t.contains(text)).count(),
            1,
            "{text} in {last:?}"
        );
    }
    // One answer, the final one.
    let posts = ws.bot_posts();
    assert_eq!(posts.len(), 1);
    assert!(posts[0]["text"].as_str().unwrap().contains("queue P3"));
    let events = s.store.run_events(&runs[0].id).await.unwrap();
    let handed_in: Vec<_> = events.iter().filter(|e| e.kind == "messages_handed_in").collect();
    assert_eq!(handed_in.len(), 1);
    assert_eq!(handed_in[0].data["count"], 2);
    // The event log says both went to the working run.
    let handed = s
        .store
        .list_events(&steward::store::EventFilter {
            outcome: Some(steward::types::event_outcome::OutcomeKind::HandedToRun),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(handed.len(), 2, "{handed:?}");
    // A DM is private: the handed text is recorded by length only.
    assert!(
        handed_in[0].data["text"]
            .as_str()
            .unwrap()
            .starts_with("[private:")
    );
    s.stop().await;
}

#[tokio::test]
async fn a_run_queued_behind_another_waits_for_quiet_and_answers_the_burst_once() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let slack = fake_slack(ws.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("gw-2 is up.")).delay(Duration::from_millis(600)));
    fake.push(Reply::ok(openai_text("Logged both.")));
    let ops = "C0OPS";
    let watcher = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\nfollow_ups: false\ndebounce: 300ms\ntriggers:\n  - slack_message: {channels: [C0OPS]}\n";
    let mut s = start_with(dir.path(), &fake, &slack, &[("watcher", watcher)]).await;

    let root = "1700000700.000100";
    ws.say(ops, root, None, "U0ADA", "<@UBOT> is gw-2 up?");
    s.deliver("EvW1", mention(ops, "U0ADA", "<@UBOT> is gw-2 up?", root, None))
        .await;
    model_requests(&fake, 1).await;
    // While the helpdesk answers, two messages for the watcher in the same thread.
    for (i, (ts, text)) in [
        ("1700000701.000100", "deploy 41 started"),
        ("1700000701.500100", "deploy 41 done"),
    ]
    .iter()
    .enumerate()
    {
        ws.say(ops, ts, Some(root), "U0BO", text);
        s.deliver(
            &format!("EvW{}", i + 2),
            message(ops, "U0BO", text, ts, Some(root)),
        )
        .await;
    }
    let mut runs = s.runs(2).await;
    s.routed().await;
    assert_eq!(
        s.store.list_runs(50).await.unwrap().len(),
        2,
        "the burst became one run"
    );
    runs.sort_by_key(|r| r.started_at);
    assert_eq!(runs[1].agent, "watcher");
    assert!(
        runs[1].started_at.unwrap() >= runs[0].finished_at.unwrap(),
        "the thread's runs overlapped: {runs:?}"
    );
    let second = chat_turns(&fake.requests()[1].body);
    // It read the first run's answer, then its own message with the one after it.
    assert!(
        second.contains(&("assistant".to_string(), "gw-2 is up.".to_string())),
        "{second:?}"
    );
    let (_, request) = second.last().unwrap();
    assert!(request.contains("deploy 41 started"), "{request}");
    assert!(
        request.contains(
            "[steward: written after it in the conversation, answer these too:]\n@Bo: deploy 41 done"
        ),
        "{request}"
    );
    assert_eq!(
        second
            .iter()
            .filter(|(_, t)| t.contains("deploy 41 done"))
            .count(),
        1,
        "{second:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn files_of_the_thread_and_of_earlier_runs_are_there_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let (slack, url) = fake_slack_at(ws.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "current_time", "{}")])));
    fake.push(Reply::ok(openai_text("Restart nginx; I noted the time.")));
    fake.push(Reply::ok(openai_text("Done before, see above.")));
    // Every tool output over a few tokens becomes a file.
    let helpdesk = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ncontext: {file_threshold_tokens: 5, file_preview_tokens: 2}\ntriggers:\n  - slack_mention: {}\n";
    let mut s = start_with(dir.path(), &fake, &slack, &[("helpdesk", helpdesk)]).await;

    let root = "1700000800.000100";
    ws.say(CHANNEL, root, None, "U0ADA", "runbook attached");
    ws.0.lock().unwrap()[0]["files"] = json!([{"id": "F1", "name": "runbook.txt", "mimetype": "text/plain", "size": 80,
        "url_private_download": format!("{url}/files/runbook.txt")}]);
    let ask = "1700000810.000100";
    ws.say(
        CHANNEL,
        ask,
        Some(root),
        "U0BO",
        "<@UBOT> what does the runbook say?",
    );
    s.deliver(
        "EvFi1",
        mention(
            CHANNEL,
            "U0BO",
            "<@UBOT> what does the runbook say?",
            ask,
            Some(root),
        ),
    )
    .await;
    let first = s.runs(1).await;
    let opening = chat_turns(&fake.requests()[0].body);
    // The thread's file is a virtual file of the run, listed with the earlier turns.
    let preamble = &opening
        .iter()
        .find(|(_, t)| t.starts_with("[steward: this request continues"))
        .unwrap()
        .1;
    assert!(preamble.contains("f_1 runbook.txt (text/plain"), "{preamble}");
    assert!(
        opening
            .iter()
            .any(|(_, t)| t.contains("[shared files: runbook.txt]")),
        "{opening:?}"
    );
    let files = s.store.run_files(&first[0].id).await.unwrap();
    assert_eq!(
        files[0].content,
        b"contents of runbook.txt: restart nginx with `systemctl restart nginx`."
    );
    let produced = files
        .iter()
        .find(|f| f.meta["source"] == "tool_output")
        .expect("the tool output was kept as a file");

    // A later run of the thread has the file the first one produced, under a new id
    // that names the old one.
    let again = "1700000820.000100";
    ws.say(
        CHANNEL,
        again,
        Some(root),
        "U0ADA",
        "<@UBOT> did you already check the time?",
    );
    s.deliver(
        "EvFi2",
        mention(
            CHANNEL,
            "U0ADA",
            "<@UBOT> did you already check the time?",
            again,
            Some(root),
        ),
    )
    .await;
    let runs = s.runs(2).await;
    assert!(runs.iter().all(|r| r.status == RunStatus::Succeeded), "{runs:?}");
    let later = chat_turns(&fake.requests()[2].body);
    let preamble = &later
        .iter()
        .find(|(_, t)| t.starts_with("[steward: this request continues"))
        .unwrap()
        .1;
    let from = format!("(was {} of run {})", produced.id, first[0].id);
    assert!(preamble.contains(&from), "{preamble}");
    assert!(preamble.contains("f_2 "), "{preamble}");
    let second_files = s.store.run_files(&runs[0].id).await.unwrap();
    let sources: Vec<&str> = second_files
        .iter()
        .map(|f| f.meta["source"].as_str().unwrap())
        .collect();
    assert_eq!(
        sources[..2],
        ["attachment", "tool_output"],
        "the thread's file, then the carried one"
    );
    assert_eq!(second_files[1].content, produced.content);
    s.stop().await;
}

#[tokio::test]
async fn a_400_message_thread_stays_under_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let slack = fake_slack(ws.clone()).await;
    let fake = FakeModel::start().await;
    // Summaries for compaction, then the answer: every request is answered the same.
    fake.handler(|_| Reply::ok(openai_text("Summary so far: the team debugged gw-2 for days.")));
    let window = 12_000;
    let helpdesk = format!(
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ncontext: {{window_tokens: {window}}}\ntriggers:\n  - slack_mention: {{}}\n"
    );
    let mut s = start_with(dir.path(), &fake, &slack, &[("helpdesk", &helpdesk)]).await;
    let root = "1700001000.000100";
    ws.say(
        CHANNEL,
        root,
        None,
        "U0ADA",
        "gw-2 keeps dropping tunnels, let's track it here",
    );
    for i in 1..400 {
        let who = if i % 2 == 0 { "U0ADA" } else { "U0BO" };
        ws.say(
            CHANNEL,
            &format!("1700001{:03}.000100", i),
            Some(root),
            who,
            &format!("update {i}: checked tunnel {i} on gw-2, the keepalive timer was reset and the logs show rekey at minute {i}; still flapping after the change"),
        );
    }
    let ask = "1700001999.000100";
    ws.say(
        CHANNEL,
        ask,
        Some(root),
        "U0ADA",
        "<@UBOT> summarize where we are",
    );
    s.deliver(
        "EvL1",
        mention(
            CHANNEL,
            "U0ADA",
            "<@UBOT> summarize where we are",
            ask,
            Some(root),
        ),
    )
    .await;
    let runs = s.runs(1).await;
    assert_eq!(runs[0].status, RunStatus::Succeeded, "{:?}", runs[0]);
    let requests = fake.requests();
    for r in &requests {
        let tokens = request_tokens(&r.body);
        assert!(
            tokens < window,
            "a request of {tokens} tokens over the {window}-token window"
        );
    }
    // Compacted, not cut: a summary request was made, and the answer request still
    // holds the request verbatim, last.
    let events = s.store.run_events(&runs[0].id).await.unwrap();
    assert!(events.iter().any(|e| e.kind == "compaction"), "no compaction");
    let last = chat_turns(&requests.last().unwrap().body);
    assert!(last.last().unwrap().1.contains("summarize where we are"));
    s.stop().await;
}

#[tokio::test]
async fn a_reaction_on_a_threaded_message_reads_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::default();
    let slack = fake_slack(ws.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Filed: printers on floors 3 and 4 jam.")));
    let ticket = "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - slack_reaction: {reaction: ticket}\n";
    let mut s = start_with(dir.path(), &fake, &slack, &[("ticket", ticket)]).await;
    let root = "1700002000.000100";
    let reply = "1700002010.000100";
    ws.say(CHANNEL, root, None, "U0ADA", "the printer on 3 is jammed");
    ws.say(CHANNEL, reply, Some(root), "U0BO", "same on 4");
    let reaction = json!({"type": "reaction_added", "user": "U0ADA", "reaction": "ticket", "item_user": "U0BO",
                          "item": {"type": "message", "channel": CHANNEL, "ts": reply}, "event_ts": "1700002020.000100"});
    s.deliver("EvR1", reaction).await;
    let runs = s.runs(1).await;
    assert_eq!(runs[0].agent, "ticket");
    let request = chat_turns(&fake.requests()[0].body);
    assert!(
        request.contains(&("user".to_string(), "@Ada: the printer on 3 is jammed".to_string())),
        "{request:?}"
    );
    assert!(
        request.contains(&("user".to_string(), "@Bo: same on 4".to_string())),
        "{request:?}"
    );
    assert!(
        request
            .last()
            .unwrap()
            .1
            .starts_with("[steward: the event to act on, a :ticket: reaction"),
        "{request:?}"
    );
    s.stop().await;
}
