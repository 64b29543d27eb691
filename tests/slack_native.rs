//! Slack-native runs against a fake Slack Web API on 127.0.0.1: trigger text reaches
//! the model with names instead of ids (looked up once per workspace), the model's
//! `@name` goes back out as a mention, replies are mrkdwn blocks with a footer, and a
//! long answer is attached as a file (or split when the upload fails).

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Json, Query};
use axum::routing::{get, post};
use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::integrations::slack::SlackClient;
use steward::run::Termination;
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::*;
use tokio_util::sync::CancellationToken;

type Calls = Arc<Mutex<Vec<(String, Value)>>>;

/// A fake Slack: users.info and conversations.info (counted), chat.postMessage, and
/// the three steps of a file upload. `fail_upload` makes the upload URL answer 500.
async fn fake_slack(fail_upload: Arc<AtomicBool>) -> (String, Calls, Arc<AtomicU32>) {
    let calls: Calls = Arc::default();
    let lookups = Arc::new(AtomicU32::new(0));
    let base = Arc::new(Mutex::new(String::new()));
    let record = |calls: &Calls, method: &str, body: Value| calls.lock().unwrap().push((method.into(), body));
    let (c1, c2, c3, c4) = (calls.clone(), calls.clone(), calls.clone(), calls.clone());
    let (l1, l2) = (lookups.clone(), lookups.clone());
    let b = base.clone();
    let app = Router::new()
        .route(
            "/users.info",
            get(move |Query(q): Query<HashMap<String, String>>| {
                l1.fetch_add(1, Ordering::SeqCst);
                async move {
                    // The shape of Slack's documented users.info answer.
                    let (name, display, real) = match q["user"].as_str() {
                        "U061F7AUR" => ("ada", "Ada", "Ada Lovelace"),
                        "U0G9QF9C6" => ("grace", "", "Grace Hopper"),
                        "UBOT" => ("steward", "Steward", "Steward"),
                        _ => return Json(json!({"ok": false, "error": "user_not_found"})),
                    };
                    Json(json!({"ok": true, "user": {"id": q["user"], "team_id": "T123ABC456", "name": name,
                        "real_name": real, "is_bot": false,
                        "profile": {"display_name": display, "real_name": real}}}))
                }
            }),
        )
        .route(
            "/conversations.info",
            get(move |Query(q): Query<HashMap<String, String>>| {
                l2.fetch_add(1, Ordering::SeqCst);
                async move {
                    match q["channel"].as_str() {
                        "C012AB3CD" => Json(json!({"ok": true, "channel": {"id": "C012AB3CD", "name": "general", "created": 1449252889,
                            "is_channel": true, "is_private": false}})),
                        _ => Json(json!({"ok": false, "error": "channel_not_found"})),
                    }
                }
            }),
        )
        .route(
            "/chat.postMessage",
            post(move |Json(body): Json<Value>| {
                record(&c1, "chat.postMessage", body.clone());
                async move { Json(json!({"ok": true, "channel": body["channel"], "ts": "1700000100.000100"})) }
            }),
        )
        .route(
            "/files.getUploadURLExternal",
            get(move |Query(q): Query<HashMap<String, String>>| {
                record(&c2, "files.getUploadURLExternal", json!(q));
                let url = format!("{}/upload/F0ANSWER", b.lock().unwrap());
                async move { Json(json!({"ok": true, "upload_url": url, "file_id": "F0ANSWER"})) }
            }),
        )
        .route(
            "/upload/F0ANSWER",
            post(move |body: axum::body::Bytes| {
                let failing = fail_upload.load(Ordering::SeqCst);
                record(&c3, "upload", json!(String::from_utf8_lossy(&body)));
                async move {
                    if failing {
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        axum::http::StatusCode::OK
                    }
                }
            }),
        )
        .route(
            "/files.completeUploadExternal",
            post(move |Json(body): Json<Value>| {
                record(&c4, "files.completeUploadExternal", body);
                async move { Json(json!({"ok": true, "files": [{"id": "F0ANSWER", "title": "answer.md"}]})) }
            }),
        );
    let url = serve(app).await;
    *base.lock().unwrap() = url.clone();
    (url, calls, lookups)
}

/// An app_mention as Slack delivers it, parsed the way the server parses it.
fn mention(event_id: &str, text: &str) -> TriggerEvent {
    let payload = event_callback(
        event_id,
        json!({"type": "app_mention", "user": "U061F7AUR", "text": text, "ts": "1700000000.000100",
               "channel": "C0HELP", "event_ts": "1700000000.000100"}),
    );
    match steward::triggers::slack::parse(&payload, None).unwrap() {
        steward::triggers::slack::SlackPayload::Event { event, .. } => *event,
        other => panic!("not an event: {other:?}"),
    }
}

async fn slack_runner(fake: &FakeModel, slack_url: &str) -> (tempfile::TempDir, steward::run::Runner) {
    let slack = SlackClient::new(steward::http::client().unwrap(), slack_url, "xoxb-test");
    let (dir, mut runner) = runner(
        providers(Some(fake), None),
        steward::tools::ToolRegistry::core(Default::default()),
        false,
    )
    .await;
    runner.sources = Arc::new(steward::triggers::Sources::new(
        steward::triggers::source::SourceSettings {
            slack: Some(slack),
            public_url: Some("https://steward.example.com".into()),
            ..Default::default()
        },
    ));
    (dir, runner)
}

fn agent() -> AgentConfig {
    AgentConfig::new(
        "helper",
        ModelRef::parse("openai/gpt-4o").unwrap(),
        "You help.",
        vec![],
    )
}

/// The text of the first user message the model received.
fn opening(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| {
            m["content"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| m["content"].to_string())
        })
        .unwrap()
}

#[tokio::test]
async fn the_model_reads_names_and_its_names_become_mentions() {
    let (slack_url, calls, lookups) = fake_slack(Arc::default()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text(
        "**Sure**, @Ada. I asked @Grace Hopper in #general; see [the runbook](https://wiki.example.com/run_book_v2).",
    )));
    fake.push(Reply::ok(openai_text("Again, @Ada.")));
    let (_db, runner) = slack_runner(&fake, &slack_url).await;
    let text =
        "<@UBOT> ask <@U0G9QF9C6> in <#C012AB3CD> and <#C0OPS|ops> about &lt;prod&gt; <https://x.io/a|this>";
    let out = runner
        .run(&agent(), &mention("Ev1", text), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let seen = opening(&fake.requests()[0].body);
    assert!(
        seen.contains("@Steward ask @Grace Hopper in #general and #ops about <prod> [this](https://x.io/a)"),
        "{seen}"
    );
    // The reply: the model's names are mentions again, Markdown is mrkdwn, and the
    // footer names the run and who asked.
    let posts: Vec<Value> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == "chat.postMessage")
        .map(|(_, b)| b.clone())
        .collect();
    assert_eq!(posts.len(), 1);
    let body = &posts[0];
    assert_eq!(
        (body["channel"].as_str(), body["thread_ts"].as_str()),
        (Some("C0HELP"), Some("1700000000.000100"))
    );
    // Ada was never looked up (she only asked), so `@Ada` stays text; Grace and
    // #general were, so they link.
    assert_eq!(
        body["blocks"][0]["text"]["text"],
        "*Sure*, @Ada. I asked <@U0G9QF9C6> in <#C012AB3CD>; see <https://wiki.example.com/run_book_v2|the runbook>."
    );
    let footer = body["blocks"][1]["elements"][0]["text"].as_str().unwrap();
    assert_eq!(
        footer,
        format!(
            "<https://steward.example.com/prompts/helper.md|Prompt>  ·  <https://steward.example.com/runs/{}|Run>  ·  Asked by <@U061F7AUR>",
            out.run_id
        )
    );
    assert_eq!(
        lookups.load(Ordering::SeqCst),
        3,
        "users.info twice, conversations.info once"
    );

    // A second run in the same workspace reuses the names: no more lookups.
    let out = runner
        .run(&agent(), &mention("Ev2", text), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    assert!(opening(&fake.requests()[1].body).contains("@Grace Hopper in #general"));
    assert_eq!(lookups.load(Ordering::SeqCst), 3, "cached per workspace");
}

#[tokio::test]
async fn a_long_answer_is_attached_as_a_file_or_split_when_it_cannot_be() {
    let failing = Arc::new(AtomicBool::new(false));
    let (slack_url, calls, _) = fake_slack(failing.clone()).await;
    let fake = FakeModel::start().await;
    let long = format!(
        "## Findings\n\nThe outage began at 09:12.\n\n{}",
        "- a detail of the timeline\n".repeat(800)
    );
    fake.always(Reply::ok(openai_text(&long)));
    let (_db, runner) = slack_runner(&fake, &slack_url).await;

    let out = runner
        .run(
            &agent(),
            &mention("Ev3", "<@UBOT> summarize"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let seen: Vec<(String, Value)> = calls.lock().unwrap().drain(..).collect();
    let methods: Vec<&str> = seen.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        [
            "files.getUploadURLExternal",
            "upload",
            "files.completeUploadExternal",
            "chat.postMessage"
        ]
    );
    assert_eq!(seen[0].1["filename"], "answer.md");
    assert_eq!(seen[0].1["length"], long.len().to_string());
    assert_eq!(
        seen[1].1,
        json!(long),
        "the file holds the whole answer, as Markdown"
    );
    assert_eq!(
        (seen[2].1["channel_id"].as_str(), seen[2].1["thread_ts"].as_str()),
        (Some("C0HELP"), Some("1700000000.000100"))
    );
    let message = &seen[3].1;
    let opening = message["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(
        opening.starts_with("*Findings*\n\nThe outage began at 09:12."),
        "{opening}"
    );
    assert!(opening.contains("attached as a file"));
    assert!(opening.chars().count() < 1_000);

    // The upload fails: the answer goes out in parts instead, none over the limits.
    failing.store(true, Ordering::SeqCst);
    let out = runner
        .run(
            &agent(),
            &mention("Ev4", "<@UBOT> summarize"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let posts: Vec<Value> = calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(m, _)| m == "chat.postMessage")
        .map(|(_, b)| b.clone())
        .collect();
    assert!(posts.len() >= 2, "{}", posts.len());
    let mut details = 0;
    for (n, p) in posts.iter().enumerate() {
        let blocks = p["blocks"].as_array().unwrap();
        assert!(blocks.len() <= 50);
        for b in blocks.iter().filter(|b| b["type"] == "section") {
            let text = b["text"]["text"].as_str().unwrap();
            assert!(text.chars().count() <= 3_000);
            details += text.matches("a detail of the timeline").count();
        }
        // Each part is its own post, recognisable by its key.
        let key = p["metadata"]["event_payload"]["idempotency_key"]
            .as_str()
            .unwrap();
        assert_eq!(
            key,
            if n == 0 {
                format!("{}:reply", out.run_id)
            } else {
                format!("{}:reply:{n}", out.run_id)
            }
        );
    }
    assert_eq!(details, 800, "nothing lost");
    assert!(
        !posts[0]["blocks"][0]["text"]["text"]
            .as_str()
            .unwrap()
            .contains("attached")
    );
}
