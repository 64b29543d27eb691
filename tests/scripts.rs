//! Script coordinators: the API surface, sandbox limits, the pr-merged workflow against
//! fake Slack and GitHub servers, and run records shaped like LLM runs'.

mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::github::GithubClient;
use steward::integrations::slack::SlackClient;
use steward::run::{Runner, Termination};
use steward::store::RunStatus;
use steward::tools::ToolRegistry;
use steward::triggers::TriggerEvent;
use support::*;
use tokio_util::sync::CancellationToken;

/// A fake Slack workspace: one channel's messages, with reactions that `reactions.add`
/// really adds.
#[derive(Clone, Default)]
struct Workspace {
    messages: Arc<Mutex<Vec<Value>>>,
    added: Arc<Mutex<Vec<(String, String)>>>,
}

async fn history(
    State(w): State<Workspace>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Json<Value> {
    assert_eq!(q.get("channel").map(String::as_str), Some("C0PRREVIEW"));
    Json(json!({"ok": true, "messages": *w.messages.lock().unwrap(), "has_more": false, "pin_count": 0}))
}

async fn react(State(w): State<Workspace>, Json(body): Json<Value>) -> Json<Value> {
    let ts = body["timestamp"].as_str().unwrap().to_string();
    let name = body["name"].as_str().unwrap().to_string();
    let mut msgs = w.messages.lock().unwrap();
    let Some(m) = msgs.iter_mut().find(|m| m["ts"] == ts.as_str()) else {
        return Json(json!({"ok": false, "error": "message_not_found"}));
    };
    let reactions = m.as_object_mut().unwrap().entry("reactions").or_insert(json!([]));
    if reactions
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == name.as_str())
    {
        return Json(json!({"ok": false, "error": "already_reacted"}));
    }
    reactions
        .as_array_mut()
        .unwrap()
        .push(json!({"name": name, "count": 1, "users": ["UBOT"]}));
    w.added.lock().unwrap().push((ts, name));
    Json(json!({"ok": true}))
}

async fn pull(UrlPath((owner, repo, n)): UrlPath<(String, String, u64)>) -> Json<Value> {
    assert_eq!((owner.as_str(), repo.as_str()), ("acme", "web"));
    let (state, merged) = match n % 4 {
        1 => ("open", false),
        2 | 0 => ("closed", true),
        _ => ("closed", false),
    };
    Json(
        json!({"url": format!("https://api.github.com/repos/acme/web/pulls/{n}"), "number": n, "state": state, "title": format!("PR {n}"),
                "merged": merged, "merged_at": if merged { json!("2026-11-20T10:00:00Z") } else { Value::Null },
                "html_url": format!("https://github.com/acme/web/pull/{n}")}),
    )
}

fn msg(ts: &str, text: &str, reactions: Value) -> Value {
    json!({"type": "message", "user": "U123ABC456", "text": text, "ts": ts, "reactions": reactions})
}

struct Setup {
    _dir: tempfile::TempDir,
    _db: tempfile::TempDir,
    config: Config,
    runner: Runner,
    workspace: Workspace,
}

impl Setup {
    /// Runs `agent` once on a CLI event saying "go".
    async fn run(&self, agent: &str) -> steward::run::RunOutcome {
        let agent = self.config.agent(agent).unwrap();
        self.runner
            .run(
                &agent,
                &TriggerEvent::from_cli(json!({"text": "go"})),
                None,
                CancellationToken::new(),
            )
            .await
            .unwrap()
    }
}

async fn setup(messages: Vec<Value>, extra: &[(&str, &str)]) -> Setup {
    let workspace = Workspace::default();
    *workspace.messages.lock().unwrap() = messages;
    let slack_url = serve(
        Router::new()
            .route("/conversations.history", get(history))
            .route("/reactions.add", post(react))
            .with_state(workspace.clone()),
    )
    .await;
    let github_url = serve(Router::new().route("/repos/{owner}/{repo}/pulls/{n}", get(pull))).await;
    let http = steward::http::client().unwrap();
    let mut reg = ToolRegistry::core(Default::default());
    for t in steward::integrations::tools::integration_tools(
        Some(SlackClient::new(http.clone(), &slack_url, "xoxb-test")),
        GithubClient::new(http, &github_url, Some("ghp_test".into())),
    ) {
        reg.register(t);
    }
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for f in ["agents/pr-merged.yaml", "scripts/pr_merged.rhai"] {
        write(dir.path(), f, &std::fs::read_to_string(root.join(f)).unwrap());
    }
    for (rel, text) in extra {
        write(dir.path(), rel, text);
    }
    let config = Config::load(
        dir.path(),
        &Known {
            tools: reg.names(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        let system = body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if system.starts_with("You are the router") {
            Reply::ok(openai_text("team: platform"))
        } else {
            Reply::ok(openai_text("llm run done")).delay(Duration::from_millis(300))
        }
    });
    let (db, mut runner) = runner(providers(Some(&fake), None), reg, false).await;
    runner.subagents = Arc::new(config.subagents.clone());
    Setup {
        _dir: dir,
        _db: db,
        config,
        runner,
        workspace,
    }
}

fn prs(n: u64) -> String {
    format!("https://github.com/acme/web/pull/{n}")
}

#[tokio::test]
async fn pr_merged_adds_exactly_the_right_reactions_and_is_idempotent() {
    let messages = vec![
        msg("1.0001", &format!("Review please: <{}|web#1>", prs(1)), json!([])), // open
        msg(
            "1.0002",
            &format!("Ready: {}", prs(2)),
            json!([{"name": "eyes", "count": 1, "users": ["U2"]}]),
        ), // merged
        msg("1.0003", &format!("Closed without merge: {}", prs(3)), json!([])),  // closed
        msg(
            "1.0004",
            &format!("Already marked: {}", prs(4)),
            json!([{"name": "merged", "count": 1, "users": ["UBOT"]}]),
        ),
        msg("1.0005", "Lunch anyone?", json!([])),
        msg(
            "1.0006",
            &format!("Two PRs: {} and {}", prs(2), prs(3)),
            json!([]),
        ),
        msg(
            "1.0007",
            &format!("Same PR twice: {} (see {})", prs(6), prs(6)),
            json!([]),
        ), // merged, counted once
    ];
    let s = setup(messages, &[]).await;
    let agent = s.config.agent("pr-merged").unwrap();
    let trigger = TriggerEvent::from_cli(json!({}));
    let out = s
        .runner
        .run(&agent, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    assert_eq!(
        (out.usage.input_tokens, out.usage.output_tokens, out.cost_usd),
        (0, 0, 0.0),
        "zero model tokens"
    );
    let added = s.workspace.added.lock().unwrap().clone();
    assert_eq!(
        added,
        [
            ("1.0002".to_string(), "merged".to_string()),
            ("1.0003".to_string(), "merged".to_string()),
            ("1.0007".to_string(), "merged".to_string())
        ]
    );
    // history + 4 PR lookups (1, 2, 3, 6) + 3 reactions.
    assert_eq!(out.tool_calls, 8);

    // A second run sees the reactions and adds nothing.
    let again = s
        .runner
        .run(&agent, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(again.termination, Termination::Completed);
    assert_eq!(s.workspace.added.lock().unwrap().len(), 3);
    assert_eq!(
        again.tool_calls, 2,
        "only the history and the still-open PR are read"
    );

    // The run record looks like an LLM run's: same event kinds and fields.
    let report = steward::run::report::RunReport::load(s.runner.store.as_ref(), &out.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.run.status, RunStatus::Succeeded);
    assert_eq!(report.run.termination.as_deref(), Some("completed"));
    let call = report
        .events
        .iter()
        .find(|e| e.kind == "tool_call" && e.data["name"] == "slack_add_reaction")
        .unwrap();
    assert_eq!(call.data["side_effect"], true);
    let keys: Vec<&String> = call.data.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["arguments", "call_id", "name", "side_effect"]);
    let result = report.events.iter().find(|e| e.kind == "tool_result").unwrap();
    let keys: Vec<&String> = result.data.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["bytes", "call_id", "content", "duration_ms", "name", "ok"]);
    assert_eq!(report.tool_calls_detail[0].name, "slack_channel_history");
    assert_eq!(report.events.first().unwrap().kind, "run_started");
    assert_eq!(report.events.last().unwrap().kind, "run_finished");
    assert!(report.events.iter().any(|e| {
        e.kind == "script_log"
            && e.data["text"]
                .as_str()
                .unwrap()
                .contains("checked 4 pull requests, marked 3")
    }));
}

const API_SCRIPT: &str = r#"
log(`trigger from ${trigger.source}: ${trigger.text}`);
let t = tool("current_time", #{ timezone: "Europe/Berlin" });
let listed = files();
let head = file_read(listed[0].id, 1, 2);
let hits = file_regex(listed[0].id, "beta");
let verdict = subagent("router", "Which team owns the gateway?", [listed[0].id]);
let caught = "";
try { tool("current_time", #{ timezone: 42 }); } catch (e) { caught = `${e}`; }
let found = regex_find_all("\\d+", "a1b22c333");
reply(`${vars.greeting} | ${t} | ${listed.len()} ${listed[0].name} | ${head} | ${hits} | ${verdict} | ${caught} | ${found}`);
"#;

#[tokio::test]
async fn the_script_api_surface() {
    let s = setup(
        Vec::new(),
        &[
            ("scripts/api.rhai", API_SCRIPT),
            ("prompts/router.md", "You are the router subagent."),
            ("subagents/router.yaml", "description: Routes.\nmodel: openai/gpt-4.1\nprompt: prompts/router.md\n"),
            (
                "agents/api.yaml",
                "coordinator: script\nscript: scripts/api.rhai\ntools: [current_time]\nsubagents: [router]\nvars: { greeting: hello }\n",
            ),
        ],
    )
    .await;
    let agent = s.config.agent("api").unwrap();
    let mut trigger = TriggerEvent::from_cli(json!({"text": "go"}));
    trigger.attachments = vec![steward::files::NewFile {
        name: "notes.txt".into(),
        mime: "text/plain".into(),
        content: b"alpha\nbeta\ngamma\n".to_vec(),
    }];
    let mut runner = s.runner.clone();
    runner.mock_tools = true;
    let out = runner
        .run(&agent, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let text = out.final_text.unwrap();
    let parts: Vec<&str> = text.split(" | ").collect();
    assert_eq!(parts[0], "hello");
    assert_eq!(parts[1], "2026-01-05T18:00:00+01:00 (Monday, Europe/Berlin)");
    assert_eq!(parts[2], "1 notes.txt");
    assert_eq!(parts[3], "f_1 lines 1-2 of 3:\nalpha\nbeta\n");
    assert_eq!(parts[4], "f_1: 1 matching line for /beta/\n2: beta\n");
    assert_eq!(parts[5], "team: platform");
    assert!(
        parts[6].contains("invalid arguments for 'current_time': /timezone: expected string"),
        "{}",
        parts[6]
    );
    assert_eq!(parts[7], r#"["1", "22", "333"]"#);
    // The subagent's run is linked and its tokens roll up into the script run.
    assert_eq!(out.usage.input_tokens, 1200);
    let runs = s.runner.store.list_runs(10).await.unwrap();
    assert!(
        runs.iter()
            .any(|r| r.agent == "router" && r.parent_id.as_deref() == Some(out.run_id.as_str()))
    );
}

/// A script agent's `max_cost_usd` holds: its subagents (its model calls) spend it, and
/// once it is spent the script stops before its next call.
#[tokio::test]
async fn a_scripts_cost_cap_stops_it_once_its_subagents_spent_it() {
    let s = setup(
        Vec::new(),
        &[
            (
                "scripts/costly.rhai",
                "let a = subagent(\"router\", \"one\", []);\nlet b = subagent(\"router\", \"two\", []);\nreply(`${a} ${b}`);\n",
            ),
            ("prompts/router.md", "You are the router subagent."),
            ("subagents/router.yaml", "description: Routes.\nmodel: openai/gpt-4.1\nprompt: prompts/router.md\n"),
            (
                "agents/costly.yaml",
                "coordinator: script\nscript: scripts/costly.rhai\nsubagents: [router]\nlimits: { max_cost_usd: 0.002 }\n",
            ),
        ],
    )
    .await;
    let out = s.run("costly").await;
    assert_eq!(out.termination, Termination::MaxCost, "{:?}", out.error);
    assert!(
        out.error.as_deref().unwrap().contains("over max_cost_usd $0.002"),
        "{:?}",
        out.error
    );
    assert!(
        out.cost_usd > 0.002,
        "the first subagent's cost counts: {}",
        out.cost_usd
    );
    let routers = s
        .runner
        .store
        .list_runs(10)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.agent == "router")
        .count();
    assert_eq!(routers, 1, "the second subagent never ran");
}

#[tokio::test]
async fn a_script_cannot_call_a_tool_outside_its_agents_grant() {
    // The name is built at run time, so validation cannot see it: the gateway must refuse.
    let script = r#"
        let name = "slack_" + "history";
        try {
            tool(name, #{ channel: "C1", limit: 5 });
            reply("called");
        } catch (e) {
            reply(`refused: ${e}`);
        }
    "#;
    let s = setup(
        Vec::new(),
        &[
            ("scripts/sneaky.rhai", script),
            (
                "agents/sneaky.yaml",
                "coordinator: script\nscript: scripts/sneaky.rhai\ntools: [current_time]\n",
            ),
        ],
    )
    .await;
    let out = s.run("sneaky").await;
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let text = out.final_text.unwrap();
    assert!(
        text.starts_with("refused: ") && text.contains("unknown tool 'slack_history'"),
        "{text}"
    );
    // The attempt is on the record, refused, and the tool never ran.
    let events = s.runner.store.run_events(&out.run_id).await.unwrap();
    let call = events
        .iter()
        .find(|e| e.kind == "tool_call")
        .expect("the call is recorded");
    // A name no registry knows is recorded as "(unknown)" (a model's made-up one can
    // carry text); the refusal names it.
    assert_eq!(call.data["name"], "(unknown)");
    let result = events.iter().find(|e| e.kind == "tool_result").unwrap();
    assert_eq!(result.data["ok"], false);
    assert!(
        result.data["error"].to_string().contains("slack_history"),
        "{}",
        result.data
    );
    assert_eq!(call.data["call_id"], "script_1");
    assert_eq!(result.data["call_id"], "script_1");
}

/// A stopped script run ends at once, and its thread stops calling tools: a Stop
/// pressed on a script that posts in a loop ends the posting, not only the run's record.
#[tokio::test]
async fn a_stopped_script_calls_no_more_tools() {
    let s = setup(
        Vec::new(),
        &[
            ("scripts/busy.rhai", "loop { tool(\"current_time\", #{}); }\n"),
            (
                "agents/busy.yaml",
                "coordinator: script\nscript: scripts/busy.rhai\ntools: [current_time]\nlimits: { timeout: 60s, max_tool_calls: 100000 }\n",
            ),
        ],
    )
    .await;
    let agent = s.config.agent("busy").unwrap();
    let mut runner = s.runner.clone();
    runner.mock_tools = true;
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.cancel();
    });
    let trigger = TriggerEvent::from_cli(json!({"text": "go"}));
    let out = runner.run(&agent, &trigger, None, cancel).await.unwrap();
    assert_eq!(out.termination, Termination::Cancelled, "{:?}", out.error);
    let calls = || async {
        let events = s.runner.store.run_events(&out.run_id).await.unwrap();
        events.iter().filter(|e| e.kind == "tool_call").count()
    };
    // Give a thread still running a moment to show itself, then look twice.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let settled = calls().await;
    assert!(settled > 0, "the script ran before the stop");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(calls().await, settled, "tools were called after the stop");
}

/// A value nested 9,999 deep, thrown: told and dropped on the script's own thread (on
/// an async worker's stack it overflowed and took the whole process with it).
#[tokio::test]
async fn a_thrown_deeply_nested_value_fails_only_its_run() {
    let s = setup(
        Vec::new(),
        &[
            (
                "scripts/deep.rhai",
                "fn deep() { for i in 0..9999 { this = [this.take()]; } this } let v = 0; throw v.deep();",
            ),
            (
                "agents/deep.yaml",
                "coordinator: script\nscript: scripts/deep.rhai\nlimits: { timeout: 120s }\nsandbox: { max_array_len: 20000 }\n",
            ),
        ],
    )
    .await;
    let agent = s.config.agent("deep").unwrap();
    let trigger = TriggerEvent::from_cli(json!({"text": "hi"}));
    let out = s
        .runner
        .run(&agent, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.status(), RunStatus::Failed);
    let err = out.error.unwrap();
    assert!(
        err.starts_with("scripts/deep.rhai") && err.contains("runtime error: [[["),
        "{}",
        &err[..200.min(err.len())]
    );
}

#[tokio::test]
async fn sandbox_limits_fail_the_run_while_the_server_keeps_serving() {
    let cases = [
        ("loop", "loop { }", "timeout"),
        ("recurse", "fn f(n) { f(n + 1) } f(0);", "call depth"),
        ("string", r#"let s = "x"; loop { s += s; }"#, "too large"),
        ("array", "let a = []; loop { a.push(1); }", "too large"),
        ("ops", "let i = 0; while true { i += 1; }", "too many operations"),
    ];
    let mut extra: Vec<(String, String)> = Vec::new();
    for (name, src, _) in &cases {
        extra.push((format!("scripts/{name}.rhai"), src.to_string()));
        let limits = if *name == "ops" {
            "sandbox: { max_operations: 100000 }\n"
        } else if *name == "loop" {
            // Room for more operations than a fast machine runs in the 1 s timeout, so
            // the timeout is what stops it.
            "sandbox: { max_operations: 5000000000 }\n"
        } else {
            "sandbox: { max_array_len: 1000, max_string_bytes: 100000 }\n"
        };
        extra.push((
            format!("agents/{name}.yaml"),
            format!("coordinator: script\nscript: scripts/{name}.rhai\nlimits: {{ timeout: 1s }}\n{limits}"),
        ));
    }
    extra.push((
        "scripts/logs.rhai".into(),
        "for i in 0..5000 { log(`line ${i}`); }\nreply(\"logged\");\n".into(),
    ));
    extra.push((
        "agents/logs.yaml".into(),
        "coordinator: script\nscript: scripts/logs.rhai\n".into(),
    ));
    extra.push(("prompts/p.md".into(), "You answer.".into()));
    extra.push((
        "agents/chat.yaml".into(),
        "model: openai/gpt-4.1\nprompt: prompts/p.md\n".into(),
    ));
    let refs: Vec<(&str, &str)> = extra.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let s = setup(Vec::new(), &refs).await;
    for (name, _, expect) in cases {
        let agent = s.config.agent(name).unwrap();
        let chat = s.config.agent("chat").unwrap();
        let started = Instant::now();
        let trigger = TriggerEvent::from_cli(json!({"text": "hi"}));
        // An LLM run on the same runner completes while the script misbehaves.
        let (script, llm) = tokio::join!(
            s.runner.run(&agent, &trigger, None, CancellationToken::new()),
            s.runner.run(&chat, &trigger, None, CancellationToken::new())
        );
        let script = script.unwrap();
        assert_eq!(
            llm.unwrap().status(),
            RunStatus::Succeeded,
            "{name}: the concurrent LLM run failed"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{name} took {:?}",
            started.elapsed()
        );
        assert_eq!(script.status(), RunStatus::Failed, "{name}");
        let err = script.error.unwrap();
        assert!(err.starts_with(&format!("scripts/{name}.rhai")), "{name}: {err}");
        assert!(err.to_lowercase().contains(expect), "{name}: {err}");
        let want = if name == "loop" {
            Termination::Timeout
        } else {
            Termination::ScriptError
        };
        assert_eq!(script.termination, want, "{name}: {err}");
        if name == "loop" {
            assert!(err.contains("timeout of 1s"), "the real limit is named: {err}");
        }
    }
    // A chatty script keeps at most 1,000 log lines, then one truncation note.
    let logs = s.config.agent("logs").unwrap();
    let out = s
        .runner
        .run(
            &logs,
            &TriggerEvent::from_cli(json!({"text": "hi"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.status(), RunStatus::Succeeded, "{:?}", out.error);
    let events = s.runner.store.run_events(&out.run_id).await.unwrap();
    let logged: Vec<_> = events.iter().filter(|e| e.kind == "script_log").collect();
    assert_eq!(logged.len(), 1_001);
    assert_eq!(logged[1_000].data["truncated"], true);
}

#[tokio::test]
async fn jira_from_thread_routes_creates_the_ticket_and_replies_in_the_thread() {
    // Fake Slack: the thread and the reply.
    let posted = Arc::new(Mutex::new(Vec::<Value>::new()));
    let p = posted.clone();
    let slack_url = serve(
        Router::new()
            .route(
                "/conversations.replies",
                get(|Query(q): Query<std::collections::HashMap<String, String>>| async move {
                    assert_eq!((q["channel"].as_str(), q["ts"].as_str()), ("C0HELP", "1700000000.000100"));
                    Json(json!({"ok": true, "has_more": false, "messages": [
                        {"type": "message", "user": "U061F7AUR", "text": "The signup form on the website shows a blank page in Safari", "ts": "1700000000.000100", "thread_ts": "1700000000.000100"},
                        {"type": "message", "user": "U2147483697", "text": "Repro on Safari 18, fine in Chrome", "ts": "1700000005.000200", "thread_ts": "1700000000.000100"}]}))
                }),
            )
            .route(
                "/chat.postMessage",
                post(move |Json(b): Json<Value>| {
                    let p = p.clone();
                    async move {
                        p.lock().unwrap().push(b.clone());
                        Json(json!({"ok": true, "channel": b["channel"], "ts": "1700000010.000300", "message": {"text": b["text"]}}))
                    }
                }),
            ),
    )
    .await;
    // Fake Jira.
    let created = Arc::new(Mutex::new(Vec::<Value>::new()));
    let c = created.clone();
    let jira_url = serve(Router::new().route(
        "/rest/api/3/issue",
        post(move |headers: axum::http::HeaderMap, Json(b): Json<Value>| {
            let c = c.clone();
            async move {
                // Basic auth with email:token.
                assert_eq!(headers["authorization"], "Basic Ym90QGFjbWUuY29tOmppcmEtdG9rZW4=");
                c.lock().unwrap().push(b);
                (axum::http::StatusCode::CREATED, Json(json!({"id": "10012", "key": "WEB-12", "self": "https://acme.atlassian.net/rest/api/3/issue/10012"})))
            }
        }),
    ))
    .await;
    let http = steward::http::client().unwrap();
    let slack = SlackClient::new(http.clone(), &slack_url, "xoxb-test");
    let jira =
        steward::integrations::jira::JiraClient::new(http.clone(), &jira_url, "bot@acme.com", "jira-token");
    let mut reg = ToolRegistry::core(Default::default());
    for t in steward::integrations::tools::integration_tools_with(
        Some(slack.clone()),
        GithubClient::new(http, "http://127.0.0.1:1", None),
        Some(jira.clone()),
    ) {
        reg.register(t);
    }
    for t in steward::integrations::tools::notion_tools(None) {
        reg.register(t);
    }
    // The shipped helpdesk (also in the tree) searches.
    let clients = steward::integrations::Clients {
        slack: Some(slack.clone()),
        jira: Some(jira.clone()),
        notion: None,
        github: GithubClient::new(steward::http::client().unwrap(), "http://127.0.0.1:1", None),
        slack_search_user: None,
    };
    for t in steward::integrations::search::search_tools(&clients) {
        reg.register(t);
    }
    reg.register(Arc::new(
        steward::integrations::event_outcome::EventOutcomeTool::new(None),
    ));
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let skills = steward::skills::SkillSet::load(root, &[]);
    let config = Config::load(
        root,
        &Known {
            tools: reg.names(),
            skills: skills.names(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text(" web\n")));
    let (_db, mut runner) = runner(providers(Some(&fake), None), reg, false).await;
    runner.subagents = Arc::new(config.subagents.clone());
    runner.sources = Arc::new(steward::triggers::Sources::new(
        steward::triggers::source::SourceSettings {
            slack: Some(slack),
            jira: Some(jira),
            prompt_base_url: Some("https://github.com/acme/steward/blob/main".into()),
            ..Default::default()
        },
    ));

    // The :jira: reaction, as Slack delivers it.
    let payload = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456", "type": "event_callback", "event_id": "EvJIRA1", "event_time": 1700000020,
        "event": {"type": "reaction_added", "user": "U061F7AUR", "reaction": "jira", "item_user": "U061F7AUR",
                  "item": {"type": "message", "channel": "C0HELP", "ts": "1700000000.000100"}, "event_ts": "1700000020.000400"}});
    let steward::triggers::slack::SlackPayload::Event { event, .. } =
        steward::triggers::slack::parse(&payload, None).unwrap()
    else {
        panic!()
    };
    let agent = config.agent("jira-from-thread").unwrap();
    let out = runner
        .run(&agent, &event, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);

    // One LLM call: the router, which saw the projects and the thread.
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    let asked = reqs[0].body["messages"][1]["content"].as_str().unwrap();
    assert!(
        asked.contains("WEB: The website") && asked.contains("blank page in Safari"),
        "{asked}"
    );
    // The ticket went to WEB with an ADF description.
    let body = created.lock().unwrap()[0].clone();
    assert_eq!(body["fields"]["project"], json!({"key": "WEB"}));
    assert_eq!(body["fields"]["issuetype"], json!({"name": "Task"}));
    assert_eq!(
        body["fields"]["summary"],
        "The signup form on the website shows a blank page in Safari"
    );
    assert_eq!(body["fields"]["description"]["type"], "doc");
    assert_eq!(
        body["fields"]["description"]["content"][0],
        json!({"type": "heading", "attrs": {"level": 2}, "content": [{"type": "text", "text": "Request"}]})
    );
    // The reply went to the thread, never the channel root, with the prompt link.
    let posts = posted.lock().unwrap().clone();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0]["channel"], "C0HELP");
    assert_eq!(posts[0]["thread_ts"], "1700000000.000100");
    assert_eq!(
        posts[0]["text"],
        format!("Created <{jira_url}/browse/WEB-12|WEB-12> in WEB from this thread.")
    );
    assert_eq!(
        posts[0]["blocks"][1]["elements"][0]["text"],
        "<https://github.com/acme/steward/blob/main/scripts/jira_from_thread.rhai|Prompt>  ·  Asked by <@U061F7AUR>"
    );
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == "reply" && e.data["side_effect"] == true)
    );
    assert!(
        events
            .iter()
            .any(|e| e.kind == "reply_sent" && e.data["ok"] == true)
    );
}
