//! `steward eval` end to end: cases in a temporary tree, model answers from the fake
//! OpenAI server (record, live) or from cassettes (replay, no key, no network).

mod support;

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};
use support::*;

/// A tree with one agent (`clock`, which may call `current_time` and `http_fetch`) and
/// a judge subagent on another model.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/clock.md", "You tell the time.\nBe brief.");
    write(root, "prompts/judge.md", "You grade runs.");
    write(
        root,
        "agents/clock.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/clock.md\ntools: [current_time, http_fetch]\n",
    );
    write(
        root,
        "subagents/judge.yaml",
        "description: Grades.\nmodel: openai/gpt-4.1-mini\nprompt: prompts/judge.md\ntools: []\n",
    );
    write(
        root,
        "evals/clock/tokyo.yaml",
        r#"description: Asks the clock for Tokyo time and answers with it.
trigger:
  text: What time is it in Tokyo?
mocks:
  current_time: { result: "2026-01-05 18:00 JST" }
expect:
  tools_called: [{ name: current_time, args: { timezone: tokyo } }]
  tools_not_called: [http_fetch]
  reply: { contains: ["18:00"], not_contains: ["sorry"] }
  max_turns: 3
criteria:
  - The answer gives the time in Tokyo.
"#,
    );
    dir
}

/// The clock agent calls current_time once, then answers with what it got; the judge
/// (gpt-4.1-mini) passes answers that mention 18:00.
fn clock_model(fake: &FakeModel) {
    fake.handler(|body| {
        let model = body["model"].as_str().unwrap_or_default();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        if model == "gpt-4.1-mini" {
            let question = messages
                .iter()
                .map(|m| m["content"].to_string())
                .collect::<String>();
            let pass = question.contains("18:00 in Tokyo");
            return Reply::ok(openai_text(&format!(
                "{{\"pass\": {pass}, \"score\": {}, \"explanation\": \"The answer {} the Tokyo time.\"}}",
                if pass { 1.0 } else { 0.0 },
                if pass { "gives" } else { "lacks" }
            )));
        }
        let result = messages
            .iter()
            .find(|m| m["role"] == "tool")
            .and_then(|m| m["content"].as_str().map(str::to_string));
        match result {
            Some(r) => Reply::ok(openai_text(&format!("It is {} in Tokyo.", &r[11..16]))),
            None => Reply::ok(openai_tools(&[(
                "c1",
                "current_time",
                r#"{"timezone": "Asia/Tokyo"}"#,
            )])),
        }
    });
}

/// `steward eval <args>` in the tree `root`.
async fn eval_async(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    steward_in_async(root, &[&["eval"], args].concat(), env).await
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(o)))
}

#[tokio::test]
async fn record_then_replay_without_a_key_gives_the_same_result() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];

    let recorded = eval_async(root, &["--record", "--json"], &live).await;
    assert!(recorded.status.success(), "{}", output_text(&recorded));
    let recorded = json_of(&recorded);
    assert_eq!(recorded["passed"], true);
    let case = &recorded["cases"][0];
    assert_eq!(case["id"], "clock/tokyo");
    let trial = &case["results"][0];
    assert_eq!(trial["verdicts"][0]["passed"], true);
    assert_eq!(trial["verdicts"][0]["model"], "openai/gpt-4.1-mini");
    assert!(
        trial["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["passed"] == true)
    );
    let cassette = root.join("evals/cassettes/clock/tokyo.json");
    let stored: Value = serde_json::from_slice(&std::fs::read(&cassette).unwrap()).unwrap();
    // Two agent turns and one judge call.
    assert_eq!(stored["interactions"].as_array().unwrap().len(), 3);
    let calls = fake.requests().len();

    // Replay: no key, no server; identical checks and verdicts, every time.
    for _ in 0..3 {
        let replayed = eval_async(root, &["--json"], &[]).await;
        assert!(replayed.status.success(), "{}", output_text(&replayed));
        let replayed = json_of(&replayed);
        let strip = |v: &Value| {
            let mut t = v["cases"][0]["results"][0].clone();
            t.as_object_mut().unwrap().remove("latency_ms");
            t
        };
        assert_eq!(strip(&replayed), strip(&recorded));
    }
    assert_eq!(fake.requests().len(), calls, "replay never calls the model");

    // The table names the case, its passes and totals.
    let table = eval_async(root, &[], &[]).await;
    let out = output_text(&table);
    assert!(
        out.contains("PASS") && out.contains("clock/tokyo") && out.contains("1/1"),
        "{out}"
    );
    assert!(out.contains("1/1 cases passed"));
}

/// A cassette is committed with the cases: a case whose run holds private content (a
/// DM's message here) is not recorded, and says why.
#[tokio::test]
async fn a_run_holding_private_content_is_not_recorded() {
    let dir = tree();
    let root = dir.path();
    write(
        root,
        "evals/clock/from-a-dm.yaml",
        r#"description: Asked in a DM.
trigger:
  slack:
    token: XXYYZZ
    team_id: T123ABC456
    api_app_id: A123ABC456
    type: event_callback
    event_id: Ev0DM00001
    event_time: 1767607200
    event:
      type: message
      channel_type: im
      user: U061F7AUR
      text: "What time is it in Tokyo? (our merger closes then)"
      ts: "1767607200.000100"
      channel: D0PRIVATE1
      event_ts: "1767607200.000100"
mocks:
  current_time: { result: "2026-01-05 18:00 JST" }
expect:
  reply: { contains: ["18:00"] }
"#,
    );
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let out = eval_async(root, &["--record", "clock/from-a-dm"], &live).await;
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("not recorded: the run held private content"),
        "{text}"
    );
    assert!(!root.join("evals/cassettes/clock/from-a-dm.json").exists());
}

/// An eval has no Slack client to tell a private channel from a public one, so what a
/// real Slack read brought is held as private: the case is not recorded, whatever the
/// channel, and says why.
#[tokio::test]
async fn a_real_slack_read_is_not_recorded() {
    let dir = tree();
    let root = dir.path();
    write(
        root,
        "agents/reader.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/clock.md\ntools: [slack_channel_history]\n",
    );
    write(
        root,
        "evals/reader/history.yaml",
        r#"description: Reads a channel for real.
trigger:
  text: What did the deals channel say?
mocks:
  slack_channel_history: real
expect:
  reply: { contains: ["Friday"] }
"#,
    );
    let slack = axum::Router::new().route(
        "/conversations.history",
        axum::routing::get(|| async {
            axum::Json(json!({"ok": true, "has_more": false, "messages": [
                {"type": "message", "user": "U0DEALS", "text": "The merger closes Friday.", "ts": "1767607200.000100"}]}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, slack).await.unwrap() });
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        if messages.iter().any(|m| m["role"] == "tool") {
            Reply::ok(openai_text("It closes Friday."))
        } else {
            Reply::ok(openai_tools(&[(
                "c1",
                "slack_channel_history",
                r#"{"channel": "C0DEALS01"}"#,
            )]))
        }
    });
    let base = format!("{}/v1", fake.url);
    let live = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "sk-test"),
        ("SLACK_BOT_TOKEN", "xoxb-test"),
        ("SLACK_API_URL", api.as_str()),
    ];
    let out = eval_async(root, &["--record", "reader/history"], &live).await;
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("not recorded: the run held private content") && text.contains("a real Slack read"),
        "{text}"
    );
    assert!(
        fake.requests().len() >= 2,
        "the real read happened and its result reached the model"
    );
    assert!(!root.join("evals/cassettes/reader/history.json").exists());
}

#[tokio::test]
async fn a_prompt_edit_misses_the_cassette_with_a_diff() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    assert!(eval_async(root, &["--record"], &live).await.status.success());

    write(root, "prompts/clock.md", "You tell the time.\nBe thorough.");
    let out = eval_async(root, &["clock"], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let out = output_text(&out);
    assert!(out.contains("FAIL") && out.contains("clock/tokyo"), "{out}");
    assert!(
        out.contains("case clock/tokyo: no recorded model answer"),
        "{out}"
    );
    assert!(out.contains("the system prompt changed"), "{out}");
    assert!(
        out.contains("- Be brief.") && out.contains("+ Be thorough."),
        "{out}"
    );
    assert!(out.contains("steward eval --record clock/tokyo"), "{out}");
}

#[tokio::test]
async fn failing_expectations_and_judge_are_reported_with_junit() {
    let dir = tree();
    let root = dir.path();
    // The same agent, but the clock answers 09:00: the reply and the judge fail.
    write(
        root,
        "evals/clock/wrong.yaml",
        r#"trigger: { text: "What time is it in Tokyo?" }
mocks:
  current_time: { result: "2026-01-05 09:00 JST" }
expect:
  tools_called: [current_time]
  calls: { current_time: 2 }
  reply: { contains: ["18:00"] }
criteria: [The answer gives the time in Tokyo.]
"#,
    );
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let junit = root.join("junit.xml");
    let out = eval_async(root, &["--live", "--junit", junit.to_str().unwrap()], &live).await;
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let report = output_text(&out);
    assert!(report.contains("PASS   clock/tokyo"), "{report}");
    assert!(report.contains("FAIL   clock/wrong"), "{report}");
    assert!(
        report.contains("✗ calls: current_time = 2: called 1 time(s)"),
        "{report}"
    );
    assert!(
        report.contains("✗ reply contains '18:00': reply: It is 09:00 in Tokyo."),
        "{report}"
    );
    assert!(
        report.contains(
            "✗ judge (0.00) \"The answer gives the time in Tokyo.\": The answer lacks the Tokyo time."
        ),
        "{report}"
    );
    assert!(report.contains("1/2 cases passed"));
    // Live mode writes no cassette.
    assert!(!root.join("evals/cassettes").exists());

    // JUnit: well-formed, one failure with the reasons.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let mut reader = quick_xml::Reader::from_str(&xml);
    let (mut cases, mut failures, mut failure_text) = (0, 0, String::new());
    let mut in_failure = false;
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                match e.name().into_inner() {
                    "testcase" => cases += 1,
                    "failure" => {
                        failures += 1;
                        in_failure = true;
                    }
                    _ => {}
                }
            }
            quick_xml::events::Event::Text(t) if in_failure => {
                failure_text.push_str(&t.xml10_content());
            }
            quick_xml::events::Event::End(e) if e.name().into_inner() == "failure" => in_failure = false,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!((cases, failures), (2, 1), "{xml}");
    assert!(failure_text.contains("calls: current_time = 2"), "{failure_text}");
}

#[tokio::test]
async fn k_of_n_trials_pass_when_enough_do() {
    let dir = tree();
    let root = dir.path();
    write(
        root,
        "evals/clock/flaky.yaml",
        "trigger: { text: \"What time is it in Tokyo?\" }\nmocks: { current_time: { result: \"2026-01-05 18:00 JST\" } }\nexpect: { reply: { contains: [\"18:00\"] } }\ntrials: 3\nmin_pass: 2\n",
    );
    let fake = FakeModel::start().await;
    // The first run answers wrongly; the next two right.
    let answers = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    fake.handler(move |body| {
        let has_result = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool");
        if !has_result {
            return Reply::ok(openai_tools(&[(
                "c1",
                "current_time",
                r#"{"timezone": "Asia/Tokyo"}"#,
            )]));
        }
        let n = answers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Reply::ok(openai_text(if n == 0 {
            "I am not sure."
        } else {
            "It is 18:00 in Tokyo."
        }))
    });
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let out = eval_async(root, &["--live", "--json", "clock/flaky"], &live).await;
    assert!(out.status.success(), "{}", output_text(&out));
    let v = json_of(&out);
    let case = &v["cases"][0];
    assert_eq!(
        (case["passes"].clone(), case["trials"].clone()),
        (json!(2), json!(3))
    );
    assert_eq!(case["passed"], true);
    let passed: Vec<bool> = case["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["passed"].as_bool().unwrap())
        .collect();
    assert_eq!(passed, [false, true, true]);
}

#[tokio::test]
async fn bad_cases_fail_alone_and_validate_names_their_lines() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    assert!(
        eval_async(root, &["--record", "clock/tokyo"], &live)
            .await
            .status
            .success()
    );
    write(
        root,
        "evals/clock/typo.yaml",
        "trigger: { text: hi }\nexpect:\n  tools_caled: [current_time]\n",
    );
    write(
        root,
        "evals/clock/ungranted.yaml",
        "trigger: { text: hi }\nmocks:\n  jira_create_issue: { result: ok }\n",
    );
    write(root, "evals/nobody/case.yaml", "trigger: { text: hi }\n");
    write(root, "evals/clock/corrupt.yaml", "trigger: { text: hi }\n");
    write(root, "evals/cassettes/clock/corrupt.json", "{not json");

    let out = eval_async(root, &[], &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let report = output_text(&out);
    assert!(
        report.contains("PASS   clock/tokyo"),
        "the good case still runs: {report}"
    );
    assert!(
        report.contains(
            "evals/clock/typo.yaml:3:3: unknown key 'tools_caled' in 'expect'; did you mean 'tools_called'?"
        ),
        "{report}"
    );
    assert!(
        report.contains("evals/clock/ungranted.yaml:3:3: mock for tool 'jira_create_issue', which agent 'clock' does not have"),
        "{report}"
    );
    assert!(report.contains("unknown agent 'nobody'"), "{report}");
    assert!(
        report.contains("cassette") && report.contains("corrupt.json is corrupt"),
        "{report}"
    );

    let validate = {
        let root = root.to_path_buf();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
                .arg("validate")
                .env("STEWARD_ROOT", &root)
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    assert_eq!(validate.status.code(), Some(1));
    let problems = String::from_utf8_lossy(&validate.stderr);
    assert!(problems.contains("evals/clock/typo.yaml:3:3"), "{problems}");
    assert!(problems.contains("evals/nobody/case.yaml"), "{problems}");
}

#[tokio::test]
async fn compare_fails_on_a_lower_pass_rate() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let before = eval_async(root, &["--record", "--json"], &live).await;
    assert!(before.status.success());
    let old = root.join("before.json");
    std::fs::write(&old, &before.stdout).unwrap();
    let same = eval_async(root, &["--compare", old.to_str().unwrap()], &[]).await;
    assert!(same.status.success(), "{}", output_text(&same));
    assert!(output_text(&same).contains("no regressions"));
    // A prompt edit: the case now misses its cassette and fails.
    write(root, "prompts/clock.md", "Different.");
    let after = eval_async(root, &["--compare", old.to_str().unwrap()], &[]).await;
    assert_eq!(after.status.code(), Some(1));
    assert!(
        output_text(&after).contains("clock/tokyo: pass rate 100% → 0% (1/1 → 0/1)"),
        "{}",
        output_text(&after)
    );
}

/// Calls one tool of `steward mcp` serving the tree at `root` (its store `s.db`) and
/// returns its JSON answer; a tool error fails the test.
async fn mcp_call(root: &Path, tool: &'static str, args: Value) -> Value {
    use rmcp::ServiceExt;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    cmd.arg("mcp")
        .env("STEWARD_ROOT", root)
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", root.join("s.db").display()),
        )
        .env("RUST_LOG", "error");
    let client = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let request = rmcp::model::CallToolRequestParams::new(tool)
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let result = client.call_tool(request).await.unwrap();
    let text = result.content[0].as_text().unwrap().text.clone();
    assert_ne!(result.is_error, Some(true), "{tool}: {text}");
    client.cancel().await.unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
async fn a_recorded_run_becomes_a_case_that_replays_green() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let ev = root.join("event.json");
    std::fs::write(&ev, r#"{"text": "What time is it in Tokyo?"}"#).unwrap();
    let run = {
        let (root, ev, base) = (root.to_path_buf(), ev.clone(), base.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
                .args([
                    "run",
                    "clock",
                    "--event",
                    ev.to_str().unwrap(),
                    "--mock-tools",
                    "--json",
                ])
                .env("STEWARD_ROOT", &root)
                .env(
                    "DATABASE_URL",
                    format!("sqlite://{}", root.join("s.db").display()),
                )
                .env("OPENAI_BASE_URL", &base)
                .env("OPENAI_API_KEY", "sk-test")
                .env("RUST_LOG", "error")
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    assert!(run.status.success(), "{}", output_text(&run));
    let run_id = json_of(&run)["id"].as_str().unwrap().to_string();
    let short = &run_id[run_id.len() - 8..];
    let case_path = root.join(format!("evals/clock/from-run-{short}.yaml"));

    // The MCP server's draft_eval_case gives the same draft (by a prefix of the id) and
    // writes nothing.
    let drafted = mcp_call(root, "draft_eval_case", json!({"run_id": &run_id[..13]})).await;
    assert_eq!(drafted["path"], format!("evals/clock/from-run-{short}.yaml"));
    assert_eq!(drafted["model_answers"], 2, "{drafted}");
    assert!(!case_path.exists(), "the MCP draft writes nothing");

    let out = eval_async(root, &["new", "--from-run", &run_id], &[]).await;
    assert!(out.status.success(), "{}", output_text(&out));
    let case = std::fs::read_to_string(&case_path).unwrap();
    assert_eq!(
        drafted["case_yaml"],
        case.as_str(),
        "one draft, two ways to get it"
    );
    // run_evals over MCP replays it as `steward eval` does.
    let report = mcp_call(
        root,
        "run_evals",
        json!({"targets": [format!("clock/from-run-{short}")]}),
    )
    .await;
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["cases"].as_array().map(Vec::len), Some(1), "{report}");
    assert!(
        case.contains("What time is it in Tokyo?") && case.contains("current_time"),
        "{case}"
    );
    assert!(
        root.join(format!("evals/cassettes/clock/from-run-{short}.json"))
            .exists()
    );
    // Replays green without a key or the model.
    let calls = fake.requests().len();
    let replay = eval_async(root, &[&format!("clock/from-run-{short}")], &[]).await;
    assert!(replay.status.success(), "{}", output_text(&replay));
    assert_eq!(fake.requests().len(), calls);
}

#[tokio::test]
async fn post_run_evals_score_a_cli_run_and_runs_show_lists_them() {
    let dir = tree();
    let root = dir.path();
    write(
        root,
        "agents/clock.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/clock.md\ntools: [current_time, http_fetch]\n\
         evals: { post_run: [\"The answer gives the time in Tokyo.\"], sample: 1.0 }\n",
    );
    let fake = FakeModel::start().await;
    clock_model(&fake);
    let base = format!("{}/v1", fake.url);
    let ev = root.join("event.json");
    std::fs::write(&ev, r#"{"text": "What time is it in Tokyo?"}"#).unwrap();
    let cmd = |args: Vec<String>| {
        let (root, base) = (root.to_path_buf(), base.clone());
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
                .args(&args)
                .env("STEWARD_ROOT", &root)
                .env(
                    "DATABASE_URL",
                    format!("sqlite://{}", root.join("s.db").display()),
                )
                .env("OPENAI_BASE_URL", &base)
                .env("OPENAI_API_KEY", "sk-test")
                .env("RUST_LOG", "error")
                .output()
                .unwrap()
        })
    };
    let run = cmd(vec![
        "run".into(),
        "clock".into(),
        "--event".into(),
        ev.to_str().unwrap().into(),
        "--mock-tools".into(),
    ])
    .await
    .unwrap();
    assert!(run.status.success(), "{}", output_text(&run));
    // The answer is printed as before; the judge ran afterwards.
    let answer = String::from_utf8_lossy(&run.stdout);
    assert!(answer.contains("in Tokyo"), "{answer}");
    let list = cmd(vec![
        "runs".into(),
        "list".into(),
        "--all".into(),
        "--json".into(),
    ])
    .await
    .unwrap();
    let runs: Value = serde_json::from_slice(&list.stdout).unwrap();
    let clock = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "clock")
        .unwrap();
    let id = clock["id"].as_str().unwrap().to_string();
    let show = cmd(vec!["runs".into(), "show".into(), id.clone(), "--json".into()])
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&show.stdout).unwrap();
    let score = &report["scores"][0];
    assert_eq!(score["kind"], "judge");
    assert_eq!(score["criterion"], "The answer gives the time in Tokyo.");
    // The built-in current_time mock is not 18:00, so this judge fails the answer, and
    // says why.
    assert_eq!(score["passed"], answer.contains("18:00"));
    assert_eq!(
        score["source"], "openai/gpt-4.1-mini",
        "the judge subagent's own model"
    );
    assert!(
        score["explanation"].as_str().unwrap().contains("the Tokyo time"),
        "{score}"
    );
    // The judge's run is recorded as a child of the judged run.
    let judge = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "judge")
        .unwrap();
    assert_eq!(judge["parent_id"], id.as_str());
    let human = cmd(vec!["runs".into(), "show".into(), id]).await.unwrap();
    let shown = String::from_utf8_lossy(&human.stdout);
    assert!(
        shown.contains("scores:") && shown.contains("The answer gives the time in Tokyo."),
        "{shown}"
    );
}

#[tokio::test]
async fn a_judge_that_does_not_answer_with_a_verdict_is_an_error_not_a_pass() {
    let dir = tree();
    let root = dir.path();
    let fake = FakeModel::start().await;
    let judged = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = judged.clone();
    fake.handler(move |body| {
        if body["model"] == "gpt-4.1-mini" {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return Reply::ok(openai_text("PASS. Looks good to me."));
        }
        let answered = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "tool");
        Reply::ok(if answered {
            openai_text("It is 18:00 in Tokyo.")
        } else {
            openai_tools(&[("c1", "current_time", r#"{"timezone": "Asia/Tokyo"}"#)])
        })
    });
    let base = format!("{}/v1", fake.url);
    let live = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let out = eval_async(root, &["--live", "--json", "clock/tokyo"], &live).await;
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let v = json_of(&out);
    let verdict = &v["cases"][0]["results"][0]["verdicts"][0];
    assert_eq!(verdict["passed"], false);
    assert!(
        verdict["error"]
            .as_str()
            .unwrap()
            .starts_with("the judge did not answer with a verdict: PASS. Looks good to me."),
        "{verdict}"
    );
    // Asked once more, then given up on.
    assert_eq!(judged.load(std::sync::atomic::Ordering::SeqCst), 2);
}
