//! `steward improve` end to end: production runs of a helpdesk get 👎 "no link", the
//! review ranks that problem first, the improver (a fake model whose answers depend on
//! the prompt it reads) drafts cases that fail on the current prompt and a change that
//! makes them pass, the gate accepts it, `--apply` and `--github-pr` deliver it, and
//! the written recordings replay offline; a change that breaks an existing case is
//! rejected with that case named.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use support::*;

const RUNBOOK: &str = "https://wiki.example.com/runbook";

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "prompts/helpdesk.md",
        "You answer IT questions.\nAnswer briefly.\n",
    );
    write(root, "prompts/judge.md", "You grade runs.");
    write(root, "prompts/improver.md", "You improve agents.");
    write(
        root,
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: [current_time]\n",
    );
    write(
        root,
        "subagents/judge.yaml",
        "description: Grades.\nmodel: openai/gpt-4.1-mini\nprompt: prompts/judge.md\ntools: []\n",
    );
    write(
        root,
        "subagents/improver.yaml",
        "description: Proposes fixes.\nmodel: openai/gpt-4.1-nano\nprompt: prompts/improver.md\ntools: []\n",
    );
    write(
        root,
        "subagents/reviewer.yaml",
        "description: Names problems.\nmodel: openai/gpt-4.1-nano\nprompt: prompts/improver.md\ntools: []\n",
    );
    write(
        root,
        "evals/helpdesk/greeting.yaml",
        "description: Greets back.\ntrigger: { text: \"Hello!\" }\nexpect: { reply: { contains: [\"Hello\"] } }\n",
    );
    dir
}

fn all_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["content"].to_string())
        .collect()
}

/// The helpdesk links the runbook only when its prompt says so (and answers with the
/// link alone when its prompt says that); the judge passes answers with the link; the
/// improver drafts a link criterion and proposes the good change, or, with `bad` set,
/// one that makes every answer the bare link.
fn model(fake: &FakeModel, bad: Arc<AtomicBool>) {
    fake.handler(move |body| {
        let text = all_text(body);
        let system = body["messages"][0]["content"].as_str().unwrap_or_default().to_string();
        let asked = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .collect::<String>();
        match body["model"].as_str().unwrap_or_default() {
            // The reviewer reads its evidence file, then names the problem from it.
            "gpt-4.1-nano" if text.contains("Name the problems") => {
                let file = body["messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|m| m["role"] == "tool")
                    .map(|m| m["content"].to_string());
                match file {
                    None => Reply::ok(openai_tools(&[("r1", "file_read", r#"{"id": "f_1"}"#)])),
                    Some(f) if f.contains("no link to the runbook") && f.contains("private run") => Reply::ok(openai_text(
                        &json!({"problems": [{"n": 1, "name": "Password answers lack the runbook link."}]}).to_string(),
                    )),
                    Some(f) => Reply::ok(openai_text(&format!("unexpected evidence: {f}"))),
                }
            }
            "gpt-4.1-nano" if text.contains("Draft eval expectations") => {
                let runs = text.split("Runs: ").nth(1).unwrap_or_default();
                let runs = runs.split("\\n").next().unwrap_or_default();
                let cases: Vec<Value> = runs
                    .split(", ")
                    .map(|id| json!({"run": id, "criteria": ["The answer links the password runbook."], "reply_contains": [RUNBOOK]}))
                    .collect();
                Reply::ok(openai_text(&json!({"cases": cases}).to_string()))
            }
            "gpt-4.1-nano" => {
                let replace = if bad.load(Ordering::SeqCst) {
                    format!("Answer only with the runbook link {RUNBOOK}")
                } else {
                    format!("Answer briefly. For password questions, link the runbook: {RUNBOOK}")
                };
                // The prompt as shown: a file of the tree, or a Notion page.
                let file = text
                    .split("--- notion:")
                    .nth(1)
                    .and_then(|rest| rest.split(" ---").next())
                    .map(|page| format!("notion:{page}"))
                    .unwrap_or_else(|| "prompts/helpdesk.md".into());
                Reply::ok(openai_text(
                    &json!({"rationale": "People said the answers had no runbook link.",
                        "edits": [{"file": file, "find": "Answer briefly.", "replace": replace}]})
                    .to_string(),
                ))
            }
            "gpt-4.1-mini" => {
                let answer = text.split("final answer").last().unwrap_or_default();
                let pass = answer.contains("wiki.example.com/runbook");
                Reply::ok(openai_text(&format!(
                    "{{\"pass\": {pass}, \"score\": {}, \"explanation\": \"link {}\"}}",
                    u8::from(pass),
                    if pass { "given" } else { "missing" }
                )))
            }
            _ if system.contains("Answer only with the runbook link") => Reply::ok(openai_text(RUNBOOK)),
            _ if asked.contains("password") && system.contains("link the runbook") => {
                Reply::ok(openai_text(&format!("Reset it in settings; see {RUNBOOK}")))
            }
            _ if asked.contains("password") => Reply::ok(openai_text("Reset it in settings.")),
            _ => Reply::ok(openai_text("Hello! How can I help?")),
        }
    });
}

/// Two production runs of the helpdesk through `steward run`, each with a person's 👎
/// ("no link"), and a private run with a 👎 whose text must never be read.
async fn production(root: &Path, live: &[(&str, &str)]) -> Vec<String> {
    use steward::store::{NewRun, RunStatus, RunStore, Score, ScoreStore, SqliteStore};
    use steward::types::{Privacy, RunOutcome};
    std::fs::write(root.join("ev.json"), r#"{"text": "How do I reset my password?"}"#).unwrap();
    let event = root.join("ev.json");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let o = steward_in_async(
            root,
            &["run", "helpdesk", "--event", event.to_str().unwrap(), "--json"],
            live,
        )
        .await;
        assert!(o.status.success(), "{}", output_text(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    let store = SqliteStore::open(&root.join("s.db")).await.unwrap();
    let thumbs_down = |explanation: Option<&str>| Score {
        kind: "human".into(),
        criterion: "reaction".into(),
        passed: Some(false),
        score: -1.0,
        explanation: explanation.map(str::to_string),
        source: Some("U1".into()),
        cost_usd: 0.0,
        at: chrono::Utc::now(),
    };
    for id in &ids {
        store
            .add_score(id, &thumbs_down(Some("no link to the runbook")))
            .await
            .unwrap();
    }
    let private = "01PRIVATE-run-0001".to_string();
    store
        .create_run(&NewRun {
            id: private.clone(),
            agent: "helpdesk".into(),
            trigger_summary: "what is Bob's salary".into(),
            source: "slack".into(),
            kind: "app_mention".into(),
            private: true,
            ..NewRun::default()
        })
        .await
        .unwrap();
    store
        .transition(&private, RunStatus::Queued, RunStatus::Running)
        .await
        .unwrap();
    store
        .finish_run(
            &private,
            RunStatus::Running,
            &RunOutcome::new(&private),
            Privacy::from_private(true),
        )
        .await
        .unwrap();
    store.add_score(&private, &thumbs_down(None)).await.unwrap();
    ids
}

/// A fake GitHub: the repository, its main branch, a branch, files (the prompt exists)
/// and pull requests; every request recorded.
async fn fake_github() -> (String, Arc<std::sync::Mutex<Vec<(String, String, Value)>>>) {
    use axum::extract::{Request, State};
    use axum::http::StatusCode;
    type Seen = Arc<std::sync::Mutex<Vec<(String, String, Value)>>>;
    let seen: Seen = Arc::default();
    async fn handle(State(seen): State<Seen>, req: Request) -> (StatusCode, axum::Json<Value>) {
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let bytes = axum::body::to_bytes(req.into_body(), 1 << 20).await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        seen.lock().unwrap().push((method.clone(), path.clone(), body));
        let (status, answer) = match (method.as_str(), path.as_str()) {
            ("GET", "/repos/acme/config") => (200, json!({"default_branch": "main"})),
            ("GET", "/repos/acme/config/git/ref/heads/main") => (200, json!({"object": {"sha": "c0ffee"}})),
            ("POST", "/repos/acme/config/git/refs") => (201, json!({"ref": "x"})),
            ("GET", "/repos/acme/config/contents/prompts/helpdesk.md") => (200, json!({"sha": "blob1"})),
            ("GET", _) => (404, json!({"message": "Not Found"})),
            ("PUT", _) => (201, json!({"content": {}})),
            ("POST", "/repos/acme/config/pulls") => (
                201,
                json!({"number": 7, "html_url": "https://github.com/acme/config/pull/7"}),
            ),
            _ => (422, json!({"message": "unexpected"})),
        };
        (StatusCode::from_u16(status).unwrap(), axum::Json(answer))
    }
    let app = axum::Router::new().fallback(handle).with_state(seen.clone());
    (serve(app).await, seen)
}

#[tokio::test]
async fn improve_drafts_failing_cases_gates_a_fix_applies_it_and_rejects_a_breaking_one() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    let bad = Arc::new(AtomicBool::new(false));
    model(&fake, bad.clone());
    let base = format!("{}/v1", fake.url);
    let (github, seen) = fake_github().await;
    let live = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "sk-test"),
        ("GITHUB_API_URL", github.as_str()),
        ("GITHUB_TOKEN", "ghp_test"),
    ];
    let ids = production(root, &live).await;

    // The review ranks the 👎 first: two public runs and the private one; without a
    // model (--no-model, or no key) it keeps the grouping key and asks nothing.
    let calls = fake.requests().len();
    let o = steward_in_async(root, &["review", "helpdesk", "--json", "--no-model"], &live).await;
    let review: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(review["problems"][0]["problem"], "👎 from people", "{review}");
    assert_eq!(review["problems"][0]["runs"], 3);
    assert!(review["problems"][0].get("summary").is_none());
    let o = steward_in_async(root, &["review", "helpdesk"], &[]).await;
    assert!(
        output_text(&o).contains("needs OPENAI_API_KEY"),
        "{}",
        output_text(&o)
    );
    assert!(
        output_text(&o).contains("1. 👎 from people: 3 runs"),
        "{}",
        output_text(&o)
    );
    assert_eq!(fake.requests().len(), calls);
    // The reviewer names it from the evidence, which it gets as a file.
    let o = steward_in_async(root, &["review", "helpdesk"], &live).await;
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("1. Password answers lack the runbook link. [👎 from people]: 3 runs"),
        "{}",
        output_text(&o)
    );
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.body.to_string().contains("salary"))
    );

    let o = steward_in_async(
        root,
        &[
            "improve",
            "helpdesk",
            "--problem",
            "1",
            "--trials",
            "2",
            "--json",
            "--apply",
            "--github-pr",
            "--repo",
            "acme/config",
        ],
        &live,
    )
    .await;
    assert!(o.status.success(), "{}", output_text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["decision"]["accepted"], true, "{report}");
    assert_eq!(report["new_cases"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(
        report["skipped"].as_array().unwrap().len(),
        1,
        "the private run: {report}"
    );
    assert!(report["skipped"][0].as_str().unwrap().contains("private channel"));
    for case in report["cases"].as_array().unwrap() {
        if case["new"] == true {
            // The drafted case fails on the current prompt and passes on the candidate.
            assert_eq!(
                (case["before"]["passes"].clone(), case["after"]["passes"].clone()),
                (json!(0), json!(2)),
                "{case}"
            );
        } else {
            assert_eq!(case["id"], "helpdesk/greeting");
            assert_eq!(case["after"]["passes"], 2, "{case}");
        }
    }
    assert!(report["patch"].as_str().unwrap().contains(&format!(
        "+Answer briefly. For password questions, link the runbook: {RUNBOOK}"
    )));

    // The improvement's folder.
    let folder = root
        .join("improvements/helpdesk")
        .join(report["id"].as_str().unwrap());
    for f in [
        "patch.diff",
        "report.md",
        "report.json",
        "recordings/helpdesk/greeting.json",
    ] {
        assert!(folder.join(f).exists(), "{f}");
    }
    let md = std::fs::read_to_string(folder.join("report.md")).unwrap();
    assert!(md.contains("| helpdesk/greeting | 2/2 | 2/2 |"), "{md}");
    // The private run's text reached neither the improver nor the report.
    assert!(!md.contains("salary"));
    assert!(
        fake.requests()
            .iter()
            .all(|r| !r.body.to_string().contains("salary"))
    );

    // --apply: the prompt, the cases and the recordings are in the tree, and the whole
    // suite replays green without a key or the model.
    let prompt = std::fs::read_to_string(root.join("prompts/helpdesk.md")).unwrap();
    assert!(prompt.contains("link the runbook"), "{prompt}");
    let calls = fake.requests().len();
    let replay = steward_in_async(root, &["eval", "helpdesk", "--json"], &[]).await;
    assert!(replay.status.success(), "{}", output_text(&replay));
    let replayed: Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(replayed["cases"].as_array().unwrap().len(), 3, "{replayed}");
    assert_eq!(fake.requests().len(), calls, "replay asks no model");

    // --github-pr: a branch from main, the files, then the pull request.
    let seen = seen.lock().unwrap().clone();
    let put_prompt = seen
        .iter()
        .find(|(m, p, _)| m == "PUT" && p.ends_with("/contents/prompts/helpdesk.md"))
        .expect("the prompt is written on the branch");
    assert_eq!(
        put_prompt.2["sha"], "blob1",
        "the existing file's blob is replaced"
    );
    use base64::Engine as _;
    let content = base64::engine::general_purpose::STANDARD
        .decode(put_prompt.2["content"].as_str().unwrap())
        .unwrap();
    assert_eq!(String::from_utf8(content).unwrap(), prompt);
    let branch = put_prompt.2["branch"].as_str().unwrap();
    assert!(
        seen.iter().any(|(m, _, b)| m == "POST"
            && b["ref"] == format!("refs/heads/{branch}")
            && b["sha"] == "c0ffee")
    );
    assert!(
        seen.iter()
            .any(|(m, p, _)| m == "PUT" && p.contains("/contents/evals/helpdesk/improve-"))
    );
    let pr = seen
        .iter()
        .find(|(m, p, _)| m == "POST" && p.ends_with("/pulls"))
        .unwrap();
    assert_eq!(
        (pr.2["head"].as_str(), pr.2["base"].as_str()),
        (Some(branch), Some("main"))
    );
    assert!(pr.2["body"].as_str().unwrap().contains("accepted"));
    assert!(output_text(&o).contains("opened https://github.com/acme/config/pull/7"));

    // A candidate that answers everything with the bare link breaks the greeting case.
    bad.store(true, Ordering::SeqCst);
    let o = steward_in_async(
        root,
        &[
            "improve", "helpdesk", "--runs", &ids[0], "--trials", "2", "--json", "--apply",
        ],
        &live,
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["decision"]["accepted"], false);
    assert_eq!(
        report["decision"]["broke"],
        json!(["helpdesk/greeting"]),
        "{report}"
    );
    assert!(
        report["decision"]["why"]
            .as_str()
            .unwrap()
            .contains("helpdesk/greeting (2/2 → 0/2)")
    );
    assert!(output_text(&o).contains("nothing applied"));
    assert_eq!(
        std::fs::read_to_string(root.join("prompts/helpdesk.md")).unwrap(),
        prompt,
        "a rejected change is not applied"
    );
}

/// Calls one tool of `steward mcp <flags>` serving the tree at `root`; returns whether
/// it was a tool error, and its text.
async fn mcp_call(
    root: &Path,
    flags: &[&str],
    env: &[(&str, &str)],
    tool: &'static str,
    args: Value,
) -> (bool, String) {
    use rmcp::ServiceExt;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    cmd.arg("mcp")
        .args(flags)
        .env("STEWARD_ROOT", root)
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", root.join("s.db").display()),
        )
        .env("RUST_LOG", "error");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let client = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let request = rmcp::model::CallToolRequestParams::new(tool)
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let result = client.call_tool(request).await.unwrap();
    let text = result.content[0].as_text().unwrap().text.clone();
    client.cancel().await.unwrap();
    (result.is_error == Some(true), text)
}

#[tokio::test]
async fn over_mcp_live_tools_need_allow_live_and_propose_improvement_leaves_the_tree_alone() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    model(&fake, Arc::default());
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    production(root, &live).await;
    let calls = fake.requests().len();

    // Without --allow-live: neither live evals nor improvements, and no model is asked.
    let (err, text) = mcp_call(root, &[], &live, "run_evals", json!({"live": true})).await;
    assert!(err && text.contains("--allow-live"), "{text}");
    let (err, text) = mcp_call(
        root,
        &[],
        &live,
        "propose_improvement",
        json!({"agent": "helpdesk"}),
    )
    .await;
    assert!(err && text.contains("--allow-live"), "{text}");
    assert_eq!(fake.requests().len(), calls);

    // With it: live evals reach the model, and an improvement is proposed and gated.
    let (err, text) = mcp_call(
        root,
        &["--allow-live"],
        &live,
        "run_evals",
        json!({"live": true, "targets": ["helpdesk"]}),
    )
    .await;
    assert!(!err, "{text}");
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (report["mode"].as_str(), report["passed"].as_bool()),
        (Some("live"), Some(true)),
        "{report}"
    );
    assert!(fake.requests().len() > calls);
    let (err, text) = mcp_call(
        root,
        &["--allow-live"],
        &live,
        "propose_improvement",
        json!({"agent": "helpdesk", "problem": 1, "trials": 1}),
    )
    .await;
    assert!(!err, "{text}");
    let report: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report["decision"]["accepted"], true, "{report}");
    assert!(
        root.join("improvements/helpdesk")
            .join(report["id"].as_str().unwrap())
            .join("patch.diff")
            .exists()
    );
    // The tree itself is unchanged: no new case, the prompt as it was.
    assert_eq!(
        std::fs::read_to_string(root.join("prompts/helpdesk.md")).unwrap(),
        "You answer IT questions.\nAnswer briefly.\n"
    );
    assert_eq!(std::fs::read_dir(root.join("evals/helpdesk")).unwrap().count(), 1);
}

type SlackCalls = Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// `steward serve` on the tree at `root` with Slack at `slack`, the model at `model` and
/// `extra` variables; returns its address and the guard that stops it.
fn serve_steward(root: &Path, slack: &str, model: &str, extra: &[(&str, &str)]) -> (String, Children) {
    let addr = free_local_addr();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    command
        .args(["serve", "--addr", &addr])
        .env("STEWARD_ROOT", root)
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", root.join("s.db").display()),
        )
        .env("RUST_LOG", "error")
        .env("SLACK_SIGNING_SECRET", "signing-secret")
        .env("SLACK_BOT_TOKEN", "xoxb-test")
        .env("SLACK_BOT_USER_ID", "UBOT")
        .env("SLACK_API_URL", slack)
        .env("OPENAI_BASE_URL", model)
        .env("OPENAI_API_KEY", "sk-test")
        .envs(extra.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    (addr, Children(vec![command.spawn().unwrap()]))
}

/// A fake Slack Web API: every call recorded with its JSON body; `ok` with a ts.
async fn fake_slack() -> (String, SlackCalls) {
    let calls: SlackCalls = Arc::default();
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/api/{method}",
        axum::routing::any(
            move |axum::extract::Path(method): axum::extract::Path<String>, body: String| {
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
                let n = {
                    let mut seen = seen.lock().unwrap();
                    seen.push((method.clone(), body));
                    seen.len()
                };
                async move {
                    axum::Json(
                        json!({"ok": true, "ts": format!("1700000100.{n:06}"), "channel": "C0DIGEST01",
                        "user_id": "UBOT", "team_id": "T1"}),
                    )
                }
            },
        ),
    );
    (format!("{}/api", serve(app).await), calls)
}

/// Waits until a Slack call matching `want` was made; returns its body.
async fn slack_call(calls: &SlackCalls, what: &str, want: impl Fn(&str, &Value) -> bool) -> Value {
    for _ in 0..600 {
        if let Some((_, b)) = calls.lock().unwrap().iter().find(|(m, b)| want(m, b)) {
            return b.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no {what} in {:#?}", calls.lock().unwrap());
}

/// A signed click on a button of the message `message` in the digest channel.
async fn click(base: &str, user: &str, action: &str, value: &str, message: &Value) -> u16 {
    let payload = json!({"type": "block_actions", "team": {"id": "T1", "domain": "acme"},
        "user": {"id": user, "username": "someone", "team_id": "T1"},
        "api_app_id": "A1", "token": "t", "trigger_id": "1.2.3",
        "container": {"type": "message", "message_ts": message["ts"], "channel_id": "C0DIGEST01", "is_ephemeral": false},
        "channel": {"id": "C0DIGEST01", "name": "helpdesk-owners"},
        "message": message,
        "actions": [{"action_id": action, "block_id": "b", "type": "button",
                     "text": {"type": "plain_text", "text": "x"}, "value": value, "action_ts": "1700000200.000100"}]});
    let body = format!(
        "payload={}",
        form_urlencoded::byte_serialize(payload.to_string().as_bytes()).collect::<String>()
    );
    let ts = chrono::Utc::now().timestamp().to_string();
    let sig = format!(
        "v0={}",
        steward::triggers::auth::sign_hex(b"signing-secret", &[b"v0:", ts.as_bytes(), b":", body.as_bytes()])
    );
    steward::http::client()
        .unwrap()
        .post(format!("{base}/slack/interactivity"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", ts)
        .header("x-slack-signature", sig)
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_posts_the_week_and_its_buttons_propose_a_fix_and_open_a_pr_through_steward_serve() {
    use steward::store::{SettingStore, SqliteStore};
    let dir = tree();
    let root = dir.path();
    write(
        root,
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: [current_time]\nowner: U0OWNER\ndigest: { schedule: \"* * * * *\", channel: C0DIGEST01 }\n",
    );
    let fake = FakeModel::start().await;
    model(&fake, Arc::default());
    let base = format!("{}/v1", fake.url);
    let (github, seen_github) = fake_github().await;
    let (slack, calls) = fake_slack().await;
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    production(root, &live).await;
    // The digest's schedule was last seen a minute ago: this minute's slot is due.
    let store = SqliteStore::open(&root.join("s.db")).await.unwrap();
    let ago = chrono::Utc::now() - chrono::Duration::seconds(61);
    store
        .set_setting("digest:helpdesk", &ago.to_rfc3339())
        .await
        .unwrap();
    drop(store);

    let extra = [
        ("GITHUB_API_URL", github.as_str()),
        ("GITHUB_TOKEN", "ghp_test"),
        ("STEWARD_CONFIG_REPO", "acme/config"),
        ("STEWARD_PUBLIC_URL", "https://steward.example.com"),
    ];
    let (addr, _children) = serve_steward(root, &slack, &base, &extra);
    let server = format!("http://{addr}");

    // The digest: the week in numbers and the 👎 problem with its runs and a button.
    let digest = slack_call(&calls, "digest", |m, b| {
        m == "chat.postMessage" && b["text"].as_str().is_some_and(|t| t.starts_with("Weekly digest"))
    })
    .await;
    assert_eq!(digest["channel"], "C0DIGEST01");
    let text = digest["blocks"].to_string();
    assert!(text.contains("👍 0 · 👎 3"), "{text}");
    assert!(
        text.contains("1. 👎 from people") && text.contains("https://steward.example.com/runs/"),
        "{text}"
    );
    let button = &digest["blocks"][2]["accessory"];
    assert_eq!(button["action_id"], "steward_improve");
    let value = button["value"].as_str().unwrap().to_string();
    let message = json!({"type": "message", "ts": "1700000100.000001", "text": digest["text"], "blocks": digest["blocks"]});

    // Only the owner may ask for a fix; the owner's click starts it once.
    assert_eq!(
        click(&server, "U0SOMEONE", "steward_improve", &value, &message).await,
        200
    );
    let refused = slack_call(&calls, "a refusal", |m, b| {
        m == "chat.postEphemeral" && b["user"] == "U0SOMEONE"
    })
    .await;
    assert!(
        refused
            .to_string()
            .contains("Only the agent's owner (<@U0OWNER>)"),
        "{refused}"
    );
    assert_eq!(
        click(&server, "U0OWNER", "steward_improve", &value, &message).await,
        200
    );
    let report = slack_call(&calls, "the report", |m, b| {
        m == "chat.postMessage"
            && b["thread_ts"] == "1700000100.000001"
            && b["blocks"].to_string().contains("Open PR")
    })
    .await;
    assert!(
        report["text"].as_str().unwrap().starts_with("accepted"),
        "{report}"
    );
    assert_eq!(
        click(&server, "U0OWNER", "steward_improve", &value, &message).await,
        200
    );
    let again = slack_call(&calls, "a second click's note", |m, b| {
        m == "chat.postEphemeral" && b.to_string().contains("already asked for")
    })
    .await;
    assert_eq!(again["user"], "U0OWNER");

    // Open PR: the pull request, and the report's buttons replaced by its link.
    let pr_value = report["blocks"][1]["elements"][0]["value"]
        .as_str()
        .unwrap()
        .to_string();
    let report_message = json!({"type": "message", "ts": "1700000100.000009", "thread_ts": "1700000100.000001",
        "text": report["text"], "blocks": report["blocks"]});
    assert_eq!(
        click(
            &server,
            "U0OWNER",
            "steward_improve_pr",
            &pr_value,
            &report_message
        )
        .await,
        200
    );
    let updated = slack_call(&calls, "the updated report", |m, _| m == "chat.update").await;
    assert!(
        updated["text"]
            .as_str()
            .unwrap()
            .contains("opened https://github.com/acme/config/pull/7"),
        "{updated}"
    );
    assert_eq!(
        updated["blocks"][0], report["blocks"][0],
        "the report stays, its buttons go"
    );
    assert!(
        seen_github
            .lock()
            .unwrap()
            .iter()
            .any(|(m, p, _)| m == "POST" && p.ends_with("/pulls"))
    );
    // The tree itself is unchanged by the service.
    assert_eq!(
        std::fs::read_to_string(root.join("prompts/helpdesk.md")).unwrap(),
        "You answer IT questions.\nAnswer briefly.\n"
    );
}

#[test]
fn a_digest_needs_an_owner_a_schedule_and_a_channel_id() {
    let dir = tree();
    let root = dir.path();
    write(
        root,
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: []\ndigest: { schedule: \"0 25 * * 1\", channel: \"#helpdesk\" }\n",
    );
    let o = steward_in(root, &["validate"], &[]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("agents/helpdesk.yaml:4:") && text.contains("a digest is for the agent's owner"),
        "{text}"
    );
    assert!(
        text.contains("digest channel '#helpdesk' is not a Slack channel id"),
        "{text}"
    );
    assert!(text.contains("0 25 * * 1"), "{text}");
}

const PAGE: &str = "1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6";

/// A fake Notion: the prompt page's blocks, and comments recorded.
async fn fake_notion() -> (String, SlackCalls) {
    let comments: SlackCalls = Arc::default();
    let seen = comments.clone();
    let paragraph = |text: &str| {
        json!({"object": "block", "id": format!("b-{}", text.len()), "type": "paragraph", "has_children": false,
               "paragraph": {"rich_text": [{"type": "text", "plain_text": text, "text": {"content": text}, "annotations": {}}]}})
    };
    let blocks = json!({"object": "list", "has_more": false, "next_cursor": null,
        "results": [paragraph("You answer IT questions."), paragraph("Answer briefly.")]});
    let app = axum::Router::new()
        .route(
            "/v1/blocks/{id}/children",
            axum::routing::get(move || async move { axum::Json(blocks) }),
        )
        .route(
            "/v1/comments",
            axum::routing::post(move |body: String| {
                seen.lock()
                    .unwrap()
                    .push(("comment".into(), serde_json::from_str(&body).unwrap()));
                async { axum::Json(json!({"object": "comment", "id": "c1"})) }
            }),
        );
    (serve(app).await, comments)
}

#[tokio::test]
async fn a_prompt_hosted_in_notion_gets_the_proposed_text_as_a_comment_never_an_edit() {
    let dir = tree();
    let root = dir.path();
    let yaml = format!("model: openai/gpt-4.1\nprompt: notion:{PAGE}\ntools: [current_time]\n");
    write(root, "agents/helpdesk.yaml", &yaml);
    let fake = FakeModel::start().await;
    model(&fake, Arc::default());
    let base = format!("{}/v1", fake.url);
    let (notion, comments) = fake_notion().await;
    let live = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "sk-test"),
        ("NOTION_TOKEN", "secret_test"),
        ("NOTION_API_URL", notion.as_str()),
    ];
    production(root, &live).await;
    let o = steward_in_async(
        root,
        &["improve", "helpdesk", "--trials", "1", "--json", "--apply"],
        &live,
    )
    .await;
    assert!(o.status.success(), "{}", output_text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["decision"]["accepted"], true, "{report}");
    assert!(
        report["patch"]
            .as_str()
            .unwrap()
            .contains(&format!("--- a/notion:{PAGE}")),
        "{report}"
    );
    // The page gets a comment with the proposed text; the agent's YAML still points at it.
    let comments = comments.lock().unwrap().clone();
    assert_eq!(comments.len(), 1, "{comments:?}");
    let comment = &comments[0].1;
    assert_eq!(comment["parent"]["page_id"], PAGE);
    let text = comment["rich_text"][0]["text"]["content"].as_str().unwrap();
    assert!(
        text.contains("steward improve proposes this prompt") && text.contains("link the runbook"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("agents/helpdesk.yaml")).unwrap(),
        yaml
    );
    let folder = root
        .join("improvements/helpdesk")
        .join(report["id"].as_str().unwrap());
    assert!(
        std::fs::read_to_string(folder.join("proposed-prompt.md"))
            .unwrap()
            .contains("link the runbook")
    );
    assert!(output_text(&o).contains(&format!("commented the proposed prompt on Notion page {PAGE}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_cut_off_by_a_stopped_process_is_taken_over_by_the_next_one() {
    use steward::store::{EventQueue, SettingStore, SqliteStore};
    use steward::types::event_outcome::{EventOutcome, OutcomeKind};
    let dir = tree();
    let root = dir.path();
    write(
        root,
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/helpdesk.md\ntools: [current_time]\nowner: U0OWNER\ndigest: { schedule: \"0 9 * * 1\", channel: C0DIGEST01 }\n",
    );
    let fake = FakeModel::start().await;
    model(&fake, Arc::default());
    let base = format!("{}/v1", fake.url);
    let (slack, calls) = fake_slack().await;
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    production(root, &live).await;
    // A replica took the owner's click, settled it and stopped mid-proposal: its
    // heartbeat is ten minutes old.
    let store = SqliteStore::open(&root.join("s.db")).await.unwrap();
    let event =
        steward::server::digest::propose_event("helpdesk", 1, "C0DIGEST01", "1700000100.000001", "U0OWNER");
    let row = steward::server::ingest::event_row(&event, "propose_fix:helpdesk:test:1");
    let id = row.id.clone();
    assert_eq!(store.insert_events(&[row]).await.unwrap(), [true]);
    store
        .settle_event(
            &id,
            &EventOutcome::because(OutcomeKind::Handled, "proposing a fix"),
        )
        .await
        .unwrap();
    let stale = chrono::Utc::now() - chrono::Duration::minutes(10);
    store
        .set_setting(&format!("propose_fix:{id}"), &stale.to_rfc3339())
        .await
        .unwrap();
    drop(store);

    let (_addr, _children) = serve_steward(root, &slack, &base, &[]);
    let report = slack_call(&calls, "the resumed proposal's report", |m, b| {
        m == "chat.postMessage"
            && b["thread_ts"] == "1700000100.000001"
            && b["blocks"].to_string().contains("Open PR")
    })
    .await;
    assert!(
        report["text"].as_str().unwrap().starts_with("accepted"),
        "{report}"
    );
    // Finished: marked done, so no later process takes it again.
    let store = SqliteStore::open(&root.join("s.db")).await.unwrap();
    let mut done = None;
    for _ in 0..100 {
        done = store.get_setting(&format!("propose_fix:{id}")).await.unwrap();
        if done.as_deref() == Some("done") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(done.as_deref(), Some("done"));
}

/// `/mcp` of `steward serve` through rmcp's Streamable HTTP client: the admin token as
/// the bearer, and without it nothing; the service has no tree, so live tools say where
/// they run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_mcp_endpoint_takes_the_admin_token_through_rmcps_client() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    model(&fake, Arc::default());
    let base = format!("{}/v1", fake.url);
    let (slack, _) = fake_slack().await;
    let (addr, _children) = serve_steward(
        root,
        &slack,
        &base,
        &[("STEWARD_ADMIN_TOKEN", "admin-token-for-the-test")],
    );
    let url = format!("http://{addr}/mcp");
    let connect = |token: Option<&str>| {
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
        if let Some(t) = token {
            config = config.auth_header(t.to_string());
        }
        let transport = StreamableHttpClientTransport::with_client(steward::http::client().unwrap(), config);
        async move { ().serve(transport).await }
    };
    // Up?
    let mut client = None;
    for _ in 0..200 {
        match connect(Some("admin-token-for-the-test")).await {
            Ok(c) => {
                client = Some(c);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
    let client = client.expect("steward serve answers /mcp with the admin token");
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        tools.iter().any(|t| t == "propose_improvement") && tools.iter().any(|t| t == "get_run"),
        "{tools:?}"
    );
    let call = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let request = rmcp::model::CallToolRequestParams::new(name)
                .with_arguments(args.as_object().cloned().unwrap_or_default());
            let result = client.call_tool(request).await.unwrap();
            (
                result.is_error == Some(true),
                result.content[0].as_text().unwrap().text.clone(),
            )
        }
    };
    let (err, text) = call("list_agents", json!({})).await;
    assert!(!err && text.contains("helpdesk"), "{text}");
    let (err, text) = call("propose_improvement", json!({"agent": "helpdesk"})).await;
    assert!(err && text.contains("config repository"), "{text}");
    let (err, text) = call("run_evals", json!({"live": true})).await;
    assert!(err && text.contains("config repository"), "{text}");
    client.cancel().await.unwrap();
    // No token, or a wrong one: no session.
    assert!(connect(None).await.is_err());
    assert!(connect(Some("wrong")).await.is_err());
}
