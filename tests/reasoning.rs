//! Reasoning carried across tool turns, against fakes that hold steward to what the real
//! APIs require: OpenAI's Responses API (reasoning items with encrypted content, sent
//! back in place with `store: false`) and Anthropic's Messages API (thinking blocks
//! with signatures, sent back unchanged). Each fake remembers what it issued and
//! answers 400 when a continuation drops or alters it, as the real APIs do, so a test
//! cannot pass by leaving reasoning out.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::run::Termination;
use steward::triggers::TriggerEvent;
use steward::types::{ModelRef, ReasoningSpec};
use support::*;
use tokio_util::sync::CancellationToken;

const TURNS: usize = 10;

fn agent(model: &str, effort: &str) -> AgentConfig {
    let mut a = AgentConfig::new(
        "planner",
        ModelRef::parse(model).unwrap(),
        "You plan with the clock.",
        vec!["current_time".into()],
    );
    a.reasoning = ReasoningSpec {
        effort: Some(effort.into()),
        ..ReasoningSpec::NONE
    };
    // Small enough that the growing context is compacted mid-loop.
    a.context.window_tokens = Some(48_000);
    a.limits.max_turns = 40;
    a.limits.max_tool_calls = 40;
    a
}

fn trigger() -> TriggerEvent {
    TriggerEvent::from_cli(json!({"text": "Plan the week, checking the time as you go."}))
}

/// A compaction's request for a summary: in place (the run's request plus an
/// instruction) or over the transcript.
fn is_summary_request(body: &Value) -> bool {
    let text = body.to_string();
    text.contains("must be compacted now") || text.contains("Summarize this conversation transcript")
}

/// What a fake refuses with, in each API's error shape.
fn openai_refusal(message: String) -> Reply {
    Reply::status(
        400,
        openai_error(&message, "invalid_request_error", "invalid_value"),
    )
}

/// A reasoning model behind the Responses API. Each turn it issues a reasoning item
/// with fresh encrypted content and one call; every request must carry each issued
/// item whose call it still holds, byte-for-byte, right before that call.
fn responses_model(fake: &FakeModel) -> Arc<Mutex<HashMap<String, Value>>> {
    let issued: Arc<Mutex<HashMap<String, Value>>> = Arc::default();
    let state = issued.clone();
    let turn = Arc::new(AtomicU32::new(0));
    fake.handler(move |body| {
        if body["store"] != false || body["include"] != json!(["reasoning.encrypted_content"]) {
            return openai_refusal("store: false with encrypted reasoning expected".into());
        }
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let issued = state.lock().unwrap().clone();
        for (i, item) in input.iter().enumerate() {
            if item["type"] != "function_call" {
                continue;
            }
            let call = item["call_id"].as_str().unwrap_or_default();
            let Some(reasoning) = issued.get(call) else {
                return openai_refusal(format!("No tool call found for function call output with call_id {call}."));
            };
            if i == 0 || &input[i - 1] != reasoning {
                return openai_refusal(format!(
                    "Item 'fc_{call}' of type 'function_call' was provided without its required 'reasoning' item: '{}'.",
                    reasoning["id"].as_str().unwrap_or_default()
                ));
            }
        }
        let outputs = input.iter().filter(|i| i["type"] == "function_call_output").count() as u64;
        let answer = |output: Vec<Value>| {
            let mut a = responses_answer(output, 64);
            // The context grows with each result, so the loop is compacted on the way.
            a["usage"]["input_tokens"] = json!(2_000 + 6_000 * outputs);
            Reply::ok(a)
        };
        if is_summary_request(body) {
            return answer(vec![responses_message("Summary: checked the time repeatedly.")]);
        }
        let n = turn.fetch_add(1, Ordering::SeqCst) as usize;
        if n >= TURNS {
            return answer(vec![responses_message(&format!("Planned after {n} checks."))]);
        }
        let call = format!("call_{n:02}");
        let reasoning = responses_reasoning(&format!("rs_{n:02}"), &format!("gAAAAB{n:02}-{}", body.to_string().len()));
        state.lock().unwrap().insert(call.clone(), reasoning.clone());
        answer(vec![
            reasoning,
            responses_call(&call, "current_time", r#"{"timezone": "UTC"}"#),
        ])
    });
    issued
}

/// Through the runner; `tests/streaming.rs` covers the streamed decoding of reasoning
/// items and thinking signatures.
#[tokio::test]
async fn responses_api_carries_reasoning_through_a_ten_turn_loop_and_a_compaction() {
    let fake = FakeModel::start().await;
    responses_model(&fake);
    let (_dir, runner) = runner(responses_providers(&fake), builtin_registry(), true).await;
    let a = agent("openai/gpt-5.2", "high");
    let out = runner
        .run(&a, &trigger(), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{out:?}");
    assert_eq!(out.final_text.as_deref(), Some("Planned after 10 checks."));
    assert!(out.compactions >= 1, "the loop was compacted on the way: {out:?}");
    let requests = fake.requests();
    assert!(requests.iter().all(|r| r.path == "/v1/responses"));
    assert!(requests.iter().all(|r| r.body["reasoning"]["effort"] == "high"));
    // Nothing was refused: each continuation carried its reasoning in place.
    assert!(requests.len() > TURNS, "{}", requests.len());
    let last = &requests.last().unwrap().body;
    assert!(last["input"].to_string().contains("gAAAAB09"), "{last}");
    // Reasoning tokens are counted, and billed at the model's rate.
    assert_eq!(
        out.usage.reasoning_tokens,
        64 * requests.len() as u64,
        "{:?}",
        out.usage
    );
    assert!(out.cost_usd > 0.0, "{}", out.cost_usd);
    // Never shown: the final answer and the recorded run hold no encrypted content.
    let recorded = runner.store.get_run(&out.run_id).await.unwrap().unwrap();
    assert!(!format!("{recorded:?}").contains("gAAAAB"));
    // What `steward run --json` and `runs show --json` print: the counts, per call and
    // in all, and never the reasoning itself.
    let report = steward::run::report::RunReport::load(runner.store.as_ref(), &out.run_id)
        .await
        .unwrap()
        .unwrap();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["usage"]["reasoning_tokens"], out.usage.reasoning_tokens,
        "{json}"
    );
    assert_eq!(json["token_bill"]["reasoning_tokens"], out.usage.reasoning_tokens);
    assert!(
        json["token_bill"]["calls"][0]["reasoning_tokens"] == 64,
        "{}",
        json["token_bill"]
    );
    assert!(!json.to_string().contains("gAAAAB"));
}

#[tokio::test]
async fn a_continuation_without_its_reasoning_is_refused_by_the_fake() {
    // The fake itself: a request that drops the reasoning item is a 400.
    let fake = FakeModel::start().await;
    let issued = responses_model(&fake);
    issued
        .lock()
        .unwrap()
        .insert("call_00".into(), responses_reasoning("rs_00", "gAAAAB00"));
    let client = steward::http::client().unwrap();
    let body = json!({"model": "gpt-5.2", "store": false, "include": ["reasoning.encrypted_content"], "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call", "call_id": "call_00", "name": "current_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_00", "output": "noon"}
    ]});
    let status = client
        .post(format!("{}/v1/responses", fake.url))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 400);
}

/// An Anthropic model thinking before each tool call. Every continuation must start
/// the assistant turn it continues with that turn's thinking block, unchanged
/// (thinking text and signature); any thinking block sent back must be one it issued.
fn thinking_model(fake: &FakeModel) {
    let issued: Arc<Mutex<HashMap<String, Value>>> = Arc::default();
    let turn = Arc::new(AtomicU32::new(0));
    fake.handler(move |body| {
        let refuse = |message: String| {
            Reply::status(
                400,
                json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}}),
            )
        };
        if body["thinking"] != json!({"type": "adaptive"}) || body["output_config"] != json!({"effort": "medium"}) {
            return refuse(format!("expected adaptive thinking at medium effort: {}", body["thinking"]));
        }
        let known = issued.lock().unwrap().clone();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        for m in messages.iter().filter(|m| m["role"] == "assistant") {
            let content = m["content"].as_array().cloned().unwrap_or_default();
            for block in content.iter().filter(|b| b["type"] == "thinking") {
                if !known.values().any(|k| k == block) {
                    return refuse("messages: thinking blocks cannot be modified".into());
                }
            }
            if let Some(call) = content.iter().find(|b| b["type"] == "tool_use") {
                let id = call["id"].as_str().unwrap_or_default();
                if content.first() != known.get(id) {
                    return refuse(
                        "messages: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block".into(),
                    );
                }
            }
        }
        let results = messages
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_result")
            .count() as u64;
        let answer = |content: Vec<Value>, stop: &str| {
            let mut a = anthropic_message(content, stop);
            a["model"] = json!("claude-sonnet-4-5-20250929");
            a["usage"]["input_tokens"] = json!(2_000 + 6_000 * results);
            a["usage"]["cache_read_input_tokens"] = json!(0);
            Reply::ok(a)
        };
        if is_summary_request(body) {
            return answer(vec![json!({"type": "text", "text": "Summary: checked the time."})], "end_turn");
        }
        let n = turn.fetch_add(1, Ordering::SeqCst) as usize;
        if n >= TURNS {
            return answer(vec![json!({"type": "text", "text": format!("Planned after {n} checks.")})], "end_turn");
        }
        let id = format!("toolu_{n:02}");
        let thinking = json!({"type": "thinking", "thinking": format!("I should check the time again ({n})."),
                              "signature": format!("EqQBCgIYAhIM{n:02}sig{}", body.to_string().len())});
        issued.lock().unwrap().insert(id.clone(), thinking.clone());
        answer(
            vec![
                thinking,
                json!({"type": "tool_use", "id": id, "name": "current_time", "input": {"timezone": "UTC"}}),
            ],
            "tool_use",
        )
    });
}

#[tokio::test]
async fn anthropic_thinking_goes_back_unchanged_through_a_ten_turn_loop_and_a_compaction() {
    let fake = FakeModel::start().await;
    thinking_model(&fake);
    let (_dir, runner) = runner(providers(None, Some(&fake)), builtin_registry(), true).await;
    let a = agent("anthropic/claude-sonnet-4-5", "medium");
    let out = runner
        .run(&a, &trigger(), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{out:?}");
    assert_eq!(out.final_text.as_deref(), Some("Planned after 10 checks."));
    assert!(out.compactions >= 1, "the loop was compacted on the way: {out:?}");
    let requests = fake.requests();
    assert!(requests.len() > TURNS);
    // No cache marker ever sits on a thinking block.
    for r in &requests {
        for m in r.body["messages"].as_array().unwrap() {
            for b in m["content"].as_array().into_iter().flatten() {
                assert!(b["type"] != "thinking" || b.get("cache_control").is_none(), "{b}");
            }
        }
        assert!(r.body["max_tokens"].as_u64().unwrap() > 0);
    }
    let recorded = runner.store.get_run(&out.run_id).await.unwrap().unwrap();
    assert!(!format!("{recorded:?}").contains("EqQBCgIYAhIM"));
}

#[tokio::test]
async fn a_budget_asks_for_fixed_thinking_and_room_for_it() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(anthropic_text("ok")));
    let (_dir, runner) = runner(providers(None, Some(&fake)), builtin_registry(), true).await;
    let mut a = agent("anthropic/claude-sonnet-4-5", "none");
    a.reasoning = ReasoningSpec {
        budget_tokens: Some(4096),
        ..ReasoningSpec::NONE
    };
    let out = runner
        .run(&a, &trigger(), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    let body = &fake.requests()[0].body;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
    assert!(body.get("output_config").is_none());
    assert!(body["max_tokens"].as_u64().unwrap() > 4096);
    // `none` on Anthropic is no thinking at all.
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(anthropic_text("ok")));
    let (_dir2, second) = support::runner(providers(None, Some(&fake)), builtin_registry(), true).await;
    second
        .run(
            &agent("anthropic/claude-sonnet-4-5", "none"),
            &trigger(),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let body = &fake.requests()[0].body;
    assert!(
        body.get("thinking").is_none() && body.get("output_config").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn chat_completions_takes_the_effort_as_reasoning_effort() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("ok")));
    let (_dir, runner) = runner(providers(Some(&fake), None), builtin_registry(), true).await;
    runner
        .run(
            &agent("openai/gpt-5.2", "low"),
            &trigger(),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let r = &fake.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.body["reasoning_effort"], "low");
}
