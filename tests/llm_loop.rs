//! The LLM tool loop against fake OpenAI and Anthropic servers with a real SQLite store.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::run::Termination;
use steward::store::RunStatus;
use steward::tools::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::*;
use tokio_util::sync::CancellationToken;

/// When each call started and ended.
type Spans = Arc<Mutex<Vec<(Instant, Instant)>>>;

/// Sleeps, recording when each call started and ended.
struct Sleepy {
    spec: ToolSpec,
    spans: Spans,
}

impl Sleepy {
    fn new(spans: Spans) -> Self {
        Sleepy {
            spec: ToolSpec {
                name: "sleepy".into(),
                description: "Waits a moment.".into(),
                parameters: json!({"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]}),
                effect: Effect::ReadOnly,
            },
            spans,
        }
    }
}

#[async_trait]
impl Tool for Sleepy {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let start = Instant::now();
        tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
        self.spans.lock().unwrap().push((start, Instant::now()));
        Ok(ToolOutput::text("slept"))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

/// Always fails fatally.
struct Broken(ToolSpec);

#[async_trait]
impl Tool for Broken {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        Err(ToolError::Fatal("credentials revoked".into()))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn registry() -> (ToolRegistry, Spans) {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let mut reg = builtin_registry();
    reg.register(Arc::new(Sleepy::new(spans.clone())));
    reg.register(Arc::new(Broken(ToolSpec {
        name: "broken".into(),
        description: "Fails.".into(),
        parameters: json!({"type": "object"}),
        effect: Effect::SideEffecting,
    })));
    (reg, spans)
}

fn agent(model: &str) -> AgentConfig {
    AgentConfig::new(
        "helper",
        ModelRef::parse(model).unwrap(),
        "You help with time questions.",
        vec!["current_time".into(), "sleepy".into(), "broken".into()],
    )
}

fn trigger(text: &str) -> TriggerEvent {
    TriggerEvent::from_cli(json!({"text": text}))
}

/// Serialized request parts that must not change between turns.
fn prefix_openai(body: &Value) -> (String, String) {
    (body["messages"][0].to_string(), body["tools"].to_string())
}

#[tokio::test]
async fn openai_multi_turn_tool_loop() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "call_1",
        "current_time",
        "{\"timezone\":\"Asia/Tokyo\"}",
    )])));
    fake.push(Reply::ok(openai_tools(&[("call_2", "current_time", "{}")])));
    fake.push(Reply::ok(openai_text("It is Tuesday 02:00 in Tokyo.")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;

    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("What time is it in Tokyo?"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();

    assert_eq!(out.termination, Termination::Completed);
    assert_eq!(out.status(), RunStatus::Succeeded);
    assert_eq!(out.final_text.as_deref(), Some("It is Tuesday 02:00 in Tokyo."));
    assert_eq!((out.turns, out.tool_calls), (3, 2));
    assert_eq!(out.usage.input_tokens, 3200);

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].headers["authorization"], "Bearer sk-test");
    assert_eq!(reqs[0].body["model"], "gpt-4.1");
    let first = &reqs[0].body["messages"];
    assert_eq!(first[0]["role"], "system");
    assert!(
        first[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("You help with time questions.")
    );
    assert!(
        first[1]["content"]
            .as_str()
            .unwrap()
            .contains("What time is it in Tokyo?")
    );
    // The tool result of turn 1 is in the request of turn 2.
    let second = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(second.len(), 5);
    let status = second[4]["content"].as_str().unwrap();
    assert_eq!(second[4]["role"], "user");
    assert!(
        status.starts_with("[steward status] Context: ") && status.contains("Files: none."),
        "{status}"
    );
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_1");
    assert_eq!(
        second[3]["content"],
        "2026-01-06T02:00:00+09:00 (Tuesday, Asia/Tokyo)"
    );
    // System prompt and tool schemas are byte-identical across turns, and earlier
    // messages are never rewritten.
    let p0 = prefix_openai(&reqs[0].body);
    for r in &reqs[1..] {
        assert_eq!(prefix_openai(&r.body), p0);
    }
    assert_eq!(reqs[2].body["messages"].as_array().unwrap()[..5], second[..]);
    let tool_names: Vec<&str> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tool_names,
        [
            "broken",
            "current_time",
            "extract_file",
            "file_read",
            "file_regex",
            "load_file",
            "peek_file",
            "sleepy"
        ]
    );

    // The run and its events are in the store.
    let report = steward::run::report::RunReport::load(runner.store.as_ref(), &out.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.run.status, RunStatus::Succeeded);
    assert_eq!(report.run.termination.as_deref(), Some("completed"));
    assert_eq!(report.run.usage.input_tokens, 3200);
    assert!(report.run.cost_usd > 0.0);
    assert_eq!(report.tool_calls_detail.len(), 2);
    assert_eq!(
        report.tool_calls_detail[0].arguments,
        json!({"timezone": "Asia/Tokyo"})
    );
    assert!(report.tool_calls_detail[0].ok);
    let kinds: Vec<&str> = report.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "model_request",
            "model_response",
            "tool_call",
            "tool_result",
            "model_request",
            "model_response",
            "tool_call",
            "tool_result",
            "model_request",
            "model_response",
            "final_answer",
            "run_finished"
        ]
    );
}

#[tokio::test]
async fn anthropic_multi_turn_tool_loop() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(anthropic_tools(&[(
        "toolu_01",
        "current_time",
        json!({"timezone": "Europe/Berlin"}),
    )])));
    fake.push(Reply::ok(anthropic_text("It is 18:00 in Berlin.")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(None, Some(&fake)), reg, true).await;

    let out = runner
        .run(
            &agent("anthropic/claude-sonnet-4-5"),
            &trigger("Time in Berlin?"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    assert_eq!(out.final_text.as_deref(), Some("It is 18:00 in Berlin."));
    assert_eq!(out.usage.cached_input_tokens, 200);

    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].headers["x-api-key"], "sk-ant-test");
    assert_eq!(reqs[0].headers["anthropic-version"], "2023-06-01");
    assert_eq!(reqs[0].body["system"], reqs[1].body["system"]);
    assert_eq!(
        reqs[0].body["tools"].to_string(),
        reqs[1].body["tools"].to_string()
    );
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(
        msgs[1]["content"][0],
        json!({"type": "tool_use", "id": "toolu_01", "name": "current_time", "input": {"timezone": "Europe/Berlin"},
               "cache_control": {"type": "ephemeral"}})
    );
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "toolu_01");
    assert_eq!(
        msgs[2]["content"][0]["content"],
        "2026-01-05T18:00:00+01:00 (Monday, Europe/Berlin)"
    );
}

/// One round of `calls` to the `sleepy` tool, then an answer: each call's (start, end)
/// and the tool results' call ids in the order the model got them.
async fn sleepy_round(calls: &[(&str, &str, &str)]) -> (Vec<(Instant, Instant)>, Vec<String>) {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(calls)));
    fake.push(Reply::ok(openai_text("done")));
    let (reg, spans) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("go"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let spans = spans.lock().unwrap().clone();
    let msgs = fake.requests()[1].body["messages"].as_array().unwrap().clone();
    let ids = msgs
        .iter()
        .filter_map(|m| m["tool_call_id"].as_str().map(str::to_string))
        .collect();
    (spans, ids)
}

#[tokio::test]
async fn parallel_tool_calls_overlap_in_time() {
    let (spans, ids) = sleepy_round(&[
        ("call_a", "sleepy", "{\"ms\": 300}"),
        ("call_b", "sleepy", "{\"ms\": 300}"),
        ("call_c", "sleepy", "{\"ms\": 300}"),
    ])
    .await;
    assert_eq!(spans.len(), 3);
    let latest_start = spans.iter().map(|s| s.0).max().unwrap();
    let earliest_end = spans.iter().map(|s| s.1).min().unwrap();
    assert!(
        latest_start < earliest_end,
        "tool calls of one turn must run concurrently"
    );
    // Results come back in call order.
    assert_eq!(ids, ["call_a", "call_b", "call_c"]);
}

/// Twelve calls in one turn: eight run at once, the rest as those finish (a slow first
/// call does not hold them back), and the results still come back in call order.
#[tokio::test]
async fn a_rounds_calls_run_at_most_eight_at_once() {
    let calls: Vec<(String, String)> = (0..12)
        .map(|i| {
            let ms = if i == 0 { 800 } else { 150 + i };
            (format!("call_{i:02}"), format!("{{\"ms\": {ms}}}"))
        })
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "sleepy", args.as_str()))
        .collect();
    let (spans, ids) = sleepy_round(&refs).await;
    assert_eq!(spans.len(), 12);
    let most = spans
        .iter()
        .map(|(start, _)| spans.iter().filter(|(s, e)| s <= start && start < e).count())
        .max()
        .unwrap();
    assert_eq!(most, steward::run::llm::MAX_CALLS_AT_ONCE);
    let slow_end = spans.iter().map(|s| s.1).max().unwrap();
    let last_start = spans.iter().map(|s| s.0).max().unwrap();
    assert!(
        last_start < slow_end,
        "the later calls waited for the slow first one"
    );
    let want: Vec<&str> = calls.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, want);
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    let fake = FakeModel::start().await;
    fake.push(
        Reply::status(
            429,
            openai_error(
                "Rate limit reached for gpt-4.1 on tokens per min",
                "tokens",
                "rate_limit_exceeded",
            ),
        )
        .header("retry-after", "1"),
    );
    fake.push(Reply::ok(openai_text("hello")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("hi"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 2);
    let waited = reqs[1].at - reqs[0].at;
    assert!(
        waited >= Duration::from_millis(950),
        "Retry-After was not honoured: {waited:?}"
    );
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let err = events
        .iter()
        .find(|e| e.kind == "model_error")
        .expect("the 429 is recorded");
    assert_eq!(err.data["kind"], "rate_limit");
    assert_eq!(err.data["status"], 429);
}

#[tokio::test]
async fn server_error_then_success() {
    let fake = FakeModel::start().await;
    fake.push(Reply::status(
        500,
        openai_error(
            "The server had an error processing your request.",
            "server_error",
            "",
        ),
    ));
    fake.push(Reply::ok(openai_text("recovered")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("hi"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.final_text.as_deref(), Some("recovered"));
    assert_eq!(fake.requests().len(), 2);
    assert_eq!(
        fake.requests()[0].raw,
        fake.requests()[1].raw,
        "a retry resends the same request"
    );
}

#[tokio::test]
async fn falls_back_to_the_second_model() {
    let openai = FakeModel::start().await;
    openai.always(Reply::status(
        503,
        openai_error("Service overloaded", "server_error", ""),
    ));
    let anthropic = FakeModel::start().await;
    anthropic.push(Reply::ok(anthropic_text("answered by the fallback")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&openai), Some(&anthropic)), reg, true).await;
    let mut a = agent("openai/gpt-4.1");
    a.models
        .push(ModelRef::parse("anthropic/claude-haiku-4-5").unwrap());
    let out = runner
        .run(&a, &trigger("hi"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    assert_eq!(out.final_text.as_deref(), Some("answered by the fallback"));
    // The primary was tried 1 + max_retries times before falling back.
    assert_eq!(openai.requests().len(), 3);
    assert_eq!(anthropic.requests().len(), 1);
    assert_eq!(anthropic.requests()[0].body["model"], "claude-haiku-4-5");
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let resp = events.iter().find(|e| e.kind == "model_response").unwrap();
    assert_eq!(resp.data["model"], "anthropic/claude-haiku-4-5");
}

#[tokio::test]
async fn max_turns_ends_the_run() {
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_tools(&[("call_x", "current_time", "{}")])));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let mut a = agent("openai/gpt-4.1");
    a.limits.max_turns = 3;
    let out = runner
        .run(&a, &trigger("loop"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::MaxTurns);
    assert_eq!(out.status(), RunStatus::Failed);
    assert_eq!(fake.requests().len(), 3);
    let row = runner.store.get_run(&out.run_id).await.unwrap().unwrap();
    assert_eq!(row.termination.as_deref(), Some("max_turns"));
    assert!(row.error.unwrap().contains("max_turns (3)"));
}

#[tokio::test]
async fn max_tool_calls_ends_the_run() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "current_time", "{}")])));
    fake.push(Reply::ok(openai_tools(&[
        ("c2", "current_time", "{}"),
        ("c3", "current_time", "{}"),
    ])));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let mut a = agent("openai/gpt-4.1");
    a.limits.max_tool_calls = 2;
    let out = runner
        .run(&a, &trigger("many"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::MaxToolCalls);
    assert_eq!(out.tool_calls, 1);
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    assert_eq!(events.iter().filter(|e| e.kind == "tool_call").count(), 1);
}

#[tokio::test]
async fn timeout_ends_the_run() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "sleepy", "{\"ms\": 5000}")])));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let mut a = agent("openai/gpt-4.1");
    a.limits.timeout = Duration::from_millis(400);
    let started = Instant::now();
    let out = runner
        .run(&a, &trigger("slow"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the tool was not cut off"
    );
    assert_eq!(
        runner
            .store
            .get_run(&out.run_id)
            .await
            .unwrap()
            .unwrap()
            .termination
            .as_deref(),
        Some("timeout")
    );
}

#[tokio::test]
async fn timeout_covers_a_slow_model() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("late")).delay(Duration::from_secs(5)));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let mut a = agent("openai/gpt-4.1");
    a.limits.timeout = Duration::from_millis(300);
    let out = runner
        .run(&a, &trigger("slow"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Timeout);
}

#[tokio::test]
async fn max_cost_ends_the_run() {
    let fake = FakeModel::start().await;
    // 700k prompt tokens on gpt-4.1 cost $1.40 (and stay under the compaction point).
    fake.always(Reply::ok(openai_message(
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "current_time", "arguments": "{}"}}]}),
        "tool_calls",
        700_000,
        10,
    )));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let mut a = agent("openai/gpt-4.1");
    a.limits.max_cost_usd = Some(2.5);
    let out = runner
        .run(&a, &trigger("expensive"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::MaxCost);
    assert_eq!(fake.requests().len(), 2);
    assert!(out.cost_usd >= 2.5);
    let row = runner.store.get_run(&out.run_id).await.unwrap().unwrap();
    assert!((row.cost_usd - out.cost_usd).abs() < 1e-9);
}

#[tokio::test]
async fn a_tool_past_its_timeout_is_cut_off_and_the_model_told() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "sleepy", "{\"ms\": 5000}")])));
    fake.push(Reply::ok(openai_text("it was too slow")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let mut a = agent("openai/gpt-4.1");
    a.limits.tool_timeout = Duration::from_millis(200);
    let started = Instant::now();
    let out = runner
        .run(&a, &trigger("slow"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the tool was not cut off"
    );
    let msgs = fake.requests()[1].body["messages"].as_array().unwrap().clone();
    let result = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        result["content"],
        "error: tool 'sleepy' did not finish within 200ms (limits.tool_timeout); try a smaller request"
    );
}

#[tokio::test]
async fn a_registered_tool_outside_the_grant_is_refused_and_recorded() {
    let fake = FakeModel::start().await;
    // http_fetch is in the registry, but this agent was not given it.
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "http_fetch",
        "{\"url\": \"https://example.com\"}",
    )])));
    fake.push(Reply::ok(openai_text("ok")));
    let (reg, _) = registry();
    assert!(reg.names().contains("http_fetch"));
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("x"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    let msgs = fake.requests()[1].body["messages"].as_array().unwrap().clone();
    let result = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .starts_with("error: unknown tool 'http_fetch'; available tools: current_time, sleepy, broken"),
        "{result}"
    );
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let call = events.iter().find(|e| e.kind == "tool_call").unwrap();
    assert_eq!(call.data["name"], "http_fetch");
    assert_eq!(call.data["call_id"], "c1");
    let done = events.iter().find(|e| e.kind == "tool_result").unwrap();
    assert_eq!(done.data["ok"], false);
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_go_back_to_the_model() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[
        ("c1", "delete_everything", "{}"),
        ("c2", "current_time", "{\"timezone\": "),
        ("c3", "sleepy", "{\"ms\": \"soon\"}"),
    ])));
    fake.push(Reply::ok(openai_text("sorry")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("x"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    let msgs = fake.requests()[1].body["messages"].as_array().unwrap().clone();
    let results: Vec<&str> = msgs[3..6]
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        results[0],
        "error: unknown tool 'delete_everything'; available tools: current_time, sleepy, broken, extract_file, file_read, file_regex, load_file, peek_file"
    );
    assert!(
        results[1].starts_with("error: arguments for 'current_time' are not valid JSON"),
        "{}",
        results[1]
    );
    assert_eq!(
        results[2],
        "error: invalid arguments for 'sleepy': /ms: expected integer, got string"
    );
    let report = steward::run::report::RunReport::load(runner.store.as_ref(), &out.run_id)
        .await
        .unwrap()
        .unwrap();
    assert!(
        report
            .tool_calls_detail
            .iter()
            .all(|c| !c.ok && c.error.is_some())
    );
    assert_eq!(report.tool_calls_detail[1].arguments, json!("{\"timezone\": "));
    // A made-up name is recorded, traced and counted as "(unknown)": it can carry text,
    // and every new one would be a new metric label. The model was told the name.
    assert_eq!(report.tool_calls_detail[0].name, "(unknown)");
    assert_eq!(report.tool_calls_detail[1].name, "current_time");
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let response = events.iter().find(|e| e.kind == "model_response").unwrap();
    assert_eq!(response.data["tool_calls"][0]["name"], "(unknown)");
    let metrics = runner.metrics.render();
    assert!(!metrics.contains("delete_everything"), "{metrics}");
}

#[tokio::test]
async fn fatal_tool_error_ends_the_run() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "broken", "{}")])));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("x"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::ToolError);
    assert!(out.error.unwrap().contains("credentials revoked"));
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn auth_error_fails_the_run_cleanly() {
    let fake = FakeModel::start().await;
    fake.always(Reply::status(
        401,
        openai_error("Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"),
    ));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let out = runner
        .run(
            &agent("openai/gpt-4.1"),
            &trigger("hi"),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::ProviderError);
    assert_eq!(out.status(), RunStatus::Failed);
    let err = out.error.unwrap();
    assert!(
        err.contains("openai authentication: HTTP 401: Incorrect API key"),
        "{err}"
    );
    assert_eq!(fake.requests().len(), 1, "auth errors are not retried");
    let row = runner.store.get_run(&out.run_id).await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Failed);
    assert_eq!(row.termination.as_deref(), Some("provider_error"));
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.kind == "model_error" && e.data["kind"] == "auth")
    );
    assert_eq!(events.last().unwrap().kind, "run_finished");
    // The same runner keeps working afterwards.
    let ok = FakeModel::start().await;
    ok.push(Reply::ok(openai_text("fine")));
    let (reg, _) = registry();
    let (_dir2, runner2) = support::runner(providers(Some(&ok), None), reg, true).await;
    assert_eq!(
        runner2
            .run(
                &agent("openai/gpt-4.1"),
                &trigger("hi"),
                None,
                CancellationToken::new()
            )
            .await
            .unwrap()
            .status(),
        RunStatus::Succeeded
    );
}

#[tokio::test]
async fn reply_false_discards_the_final_answer() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("internal notes")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let mut a = agent("openai/gpt-4.1");
    a.output.reply = false;
    let out = runner
        .run(&a, &trigger("x"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.status(), RunStatus::Succeeded);
    assert_eq!(out.final_text, None);
    assert_eq!(
        runner
            .store
            .get_run(&out.run_id)
            .await
            .unwrap()
            .unwrap()
            .final_text,
        None
    );
    let system = fake.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("Your final answer is discarded"));
}

#[tokio::test]
async fn private_runs_keep_no_message_content() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "current_time",
        "{\"timezone\": \"Europe/Paris\"}",
    )])));
    fake.push(Reply::ok(openai_text("the secret answer")));
    let (reg, _) = registry();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, true).await;
    let mut t = trigger("the secret question");
    t.private = true;
    let out = runner
        .run(&agent("openai/gpt-4.1"), &t, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.final_text.as_deref(), Some("the secret answer"));
    let row = runner.store.get_run(&out.run_id).await.unwrap().unwrap();
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let everything = format!("{row:?} {:?}", events);
    for secret in ["secret question", "secret answer", "Europe/Paris"] {
        assert!(!everything.contains(secret), "'{secret}' leaked into the store");
    }
}

/// Looks in the store for its own `tool_call` event while it runs.
struct Witness {
    spec: ToolSpec,
    store: Arc<std::sync::OnceLock<Arc<dyn steward::store::Store>>>,
    saw: Arc<Mutex<Vec<(String, bool)>>>,
}

#[async_trait]
impl Tool for Witness {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, ctx: &ToolCtx, _args: Value) -> ToolResult {
        let events = self.store.get().unwrap().run_events(&ctx.run_id).await.unwrap();
        let recorded = events
            .iter()
            .any(|e| e.kind == "tool_call" && e.data["call_id"] == ctx.call_id.as_str());
        self.saw.lock().unwrap().push((self.spec.name.clone(), recorded));
        Ok(ToolOutput::text("done"))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

#[tokio::test]
async fn a_side_effecting_call_is_on_disk_before_the_tool_acts() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "look", "{}")])));
    fake.push(Reply::ok(openai_tools(&[("c2", "act", "{}")])));
    fake.push(Reply::ok(openai_text("done")));
    let store = Arc::new(std::sync::OnceLock::new());
    let saw = Arc::new(Mutex::new(Vec::new()));
    let (mut reg, _) = registry();
    for (name, effect) in [("look", Effect::ReadOnly), ("act", Effect::SideEffecting)] {
        reg.register(Arc::new(Witness {
            spec: ToolSpec {
                name: name.into(),
                description: "Checks the log.".into(),
                parameters: json!({"type": "object"}),
                effect,
            },
            store: store.clone(),
            saw: saw.clone(),
        }));
    }
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let _ = store.set(runner.store.clone());
    let a = AgentConfig::new(
        "helper",
        ModelRef::parse("openai/gpt-4.1").unwrap(),
        "You check things.",
        vec!["look".into(), "act".into()],
    );
    let out = runner
        .run(&a, &trigger("go"), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    let saw = saw.lock().unwrap().clone();
    // A side-effecting call is durable before it runs; a read-only round need not be.
    assert!(saw.contains(&("act".to_string(), true)), "{saw:?}");
    assert_eq!(saw.len(), 2);
    // Every event is written by the end of the run.
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let calls = events.iter().filter(|e| e.kind == "tool_call").count();
    let results = events.iter().filter(|e| e.kind == "tool_result").count();
    assert_eq!((calls, results), (2, 2));
}

/// A fake OpenAI that serves at most `allowed` calls at once (each 50 ms) and answers
/// 429 beyond; counts the calls and the refusals.
async fn limited_model(
    allowed: usize,
) -> (
    String,
    Arc<std::sync::atomic::AtomicUsize>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let in_flight = Arc::new(AtomicUsize::new(0));
    let (served, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, r) = (served.clone(), refused.clone());
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let (in_flight, s, r) = (in_flight.clone(), s.clone(), r.clone());
            async move {
                if in_flight.fetch_add(1, Ordering::SeqCst) >= allowed {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    r.fetch_add(1, Ordering::SeqCst);
                    let body = openai_error(
                        "Rate limit reached for requests",
                        "requests",
                        "rate_limit_exceeded",
                    );
                    return (axum::http::StatusCode::TOO_MANY_REQUESTS, axum::Json(body));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                s.fetch_add(1, Ordering::SeqCst);
                (axum::http::StatusCode::OK, axum::Json(openai_text("ok")))
            }
        }),
    );
    (serve(app).await, served, refused)
}

/// 1,000 calls at once against a model that allows 20: every call succeeds (a "slow
/// down" is waited out, never a failure), and refusals stay near the one burst it takes
/// to learn the provider's capacity (the starting limit less what it serves) plus 5%.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_adapt_to_the_providers_limit_and_none_fails() {
    use std::sync::atomic::Ordering;
    let (url, served, refused) = limited_model(20).await;
    let ep = steward::provider::Endpoint {
        base_url: format!("{url}/v1"),
        api_key: Some("sk-test".into()),
    };
    let client = steward::http::client().unwrap();
    let set = steward::provider::ProviderSet::new(fast_retry()).with(
        "openai",
        Arc::new(steward::provider::openai::OpenAi::new(
            client,
            ep,
            Duration::from_secs(10),
        )),
    );
    let model = ModelRef::parse("openai/gpt-4.1").unwrap();
    let messages = [steward::provider::Message::user("hi")];
    let mut calls = Vec::new();
    const CALLS: usize = 1000;
    for _ in 0..CALLS {
        let chain = set.chain(std::slice::from_ref(&model)).unwrap();
        let messages = messages.clone();
        calls.push(tokio::spawn(async move {
            chain
                .chat("system", &messages, &[], &[], 100, None)
                .await
                .map(|_| ())
        }));
    }
    let mut failed = 0;
    for c in calls {
        if c.await.unwrap().is_err() {
            failed += 1;
        }
    }
    assert_eq!(failed, 0, "a rate limit is waited out, not a failure");
    assert_eq!(served.load(Ordering::SeqCst), CALLS);
    let refusals = refused.load(Ordering::SeqCst);
    eprintln!("refusals: {refusals} for {CALLS} calls");
    let learning = steward::provider::limiter::INITIAL as usize - 20;
    assert!(
        refusals <= learning + CALLS / 20,
        "refusals: {refusals} for {CALLS} calls"
    );
}

/// What a chain told the person waiting: waits on the provider and reasoning steps.
#[derive(Debug, Default)]
struct Told(std::sync::Mutex<Vec<String>>);

impl steward::provider::Deltas for Told {
    fn text(&self, _delta: &str) {}
    fn restart(&self) {}
    fn settled(&self) {}
    fn waiting(&self, on: bool) {
        self.0.lock().unwrap().push(format!("waiting {on}"));
    }
    fn thinking(&self, summary: &str) {
        self.0.lock().unwrap().push(format!("thinking {summary}"));
    }
}

/// OpenAI's rate-limit headers say the request budget is spent: the next call to that
/// model waits for the reset instead of being sent to collect a 429.
#[tokio::test]
async fn a_spent_budget_holds_the_next_call_until_it_resets() {
    let fake = FakeModel::start().await;
    fake.push(
        Reply::ok(openai_text("first"))
            .header("x-ratelimit-limit-requests", "500")
            .header("x-ratelimit-remaining-requests", "0")
            .header("x-ratelimit-reset-requests", "600ms")
            .header("x-ratelimit-remaining-tokens", "29000")
            .header("x-ratelimit-reset-tokens", "2ms"),
    )
    .always(Reply::ok(openai_text("second")));
    let set = providers(Some(&fake), None);
    let model = ModelRef::parse("openai/gpt-4.1").unwrap();
    let messages = [steward::provider::Message::user("hi")];
    for _ in 0..2 {
        let chain = set.chain(std::slice::from_ref(&model)).unwrap();
        chain
            .chat("system", &messages, &[], &[], 100, None)
            .await
            .unwrap();
    }
    let seen = fake.requests();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(
        gap >= Duration::from_millis(550),
        "the second call went after {gap:?}"
    );
}

/// Anthropic's 529 `overloaded_error` is a "slow down": more of them than the retry
/// budget allows are waited out, not a failed run, and after a few seconds of waiting
/// the person is told (and told again when it is over).
#[tokio::test]
async fn an_overloaded_provider_is_waited_out_and_the_person_told() {
    let fake = FakeModel::start().await;
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    for _ in 0..4 {
        fake.push(Reply::status(529, overloaded.clone()).header("retry-after", "1"));
    }
    fake.always(Reply::ok(anthropic_text("here")));
    let set = providers(None, Some(&fake));
    let model = ModelRef::parse("anthropic/claude-sonnet-4-6").unwrap();
    let chain = set.chain(std::slice::from_ref(&model)).unwrap();
    let told = Told::default();
    let messages = [steward::provider::Message::user("hi")];
    let out = chain
        .chat("system", &messages, &[], &[], 100, Some(&told))
        .await
        .expect("an overloaded provider is waited out");
    assert_eq!(out.response.text.as_deref(), Some("here"));
    assert_eq!(
        fake.requests().len(),
        5,
        "four refusals (over the retry budget of 2), then the answer"
    );
    assert_eq!(*told.0.lock().unwrap(), ["waiting true", "waiting false"]);
}

/// An agent that asks for reasoning summaries sees each as a "Thinking…" step; one
/// that does not ask sees none, and the encrypted content is never read.
#[tokio::test]
async fn reasoning_summaries_are_steps_only_when_asked() {
    let fake = FakeModel::start().await;
    let mut reasoning = responses_reasoning("rs_1", "gAAAAB-opaque");
    reasoning["summary"] =
        json!([{"type": "summary_text", "text": "**Checking the clock** before answering."}]);
    fake.always(Reply::ok(responses_answer(
        vec![reasoning, responses_message("Noon.")],
        64,
    )));
    let set = responses_providers(&fake);
    let model = ModelRef::parse("openai/gpt-6-sol").unwrap();
    let messages = [steward::provider::Message::user("time?")];
    for (summary, expected) in [
        (
            Some("auto"),
            vec!["thinking **Checking the clock** before answering."],
        ),
        (None, vec![]),
    ] {
        let spec = steward::types::ReasoningSpec {
            effort: Some("low".into()),
            summary: summary.map(str::to_string),
            ..steward::types::ReasoningSpec::NONE
        };
        let chain = set.chain(std::slice::from_ref(&model)).unwrap().reasoning(spec);
        let told = Told::default();
        let out = chain
            .chat("system", &messages, &[], &[], 100, Some(&told))
            .await
            .unwrap();
        assert_eq!(
            out.response.text.as_deref(),
            Some("Noon."),
            "the summary is never the answer"
        );
        assert_eq!(*told.0.lock().unwrap(), expected);
    }
}
