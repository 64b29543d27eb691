//! Streamed model answers against fake servers that send server-sent events in the
//! vendors' documented shapes (OpenAI Chat Completions chunks with
//! `stream_options.include_usage`, Anthropic Messages events), cut at arbitrary byte
//! boundaries: the text arrives piece by piece and the assembled answer equals what
//! the non-streamed API returns.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};
use steward::provider::anthropic::Anthropic;
use steward::provider::openai::OpenAi;
use steward::provider::{ChatRequest, Deltas, Endpoint, ErrorKind, Message, Provider};
use support::serve;

/// Pieces of text as they stream, and how often an attempt restarted.
#[derive(Debug, Default)]
struct Recorded(Mutex<Vec<String>>);

impl Deltas for Recorded {
    fn text(&self, delta: &str) {
        self.0.lock().unwrap().push(delta.to_string());
    }
    fn restart(&self) {
        self.0.lock().unwrap().push("<restart>".into());
    }
    fn settled(&self) {}
}

/// A server answering every POST with `events` as SSE, sent in 7-byte pieces.
async fn sse_server(
    path: &'static str,
    status: u16,
    events: Vec<String>,
    bodies: Arc<Mutex<Vec<Value>>>,
) -> String {
    let app = Router::new().route(
        path,
        post(move |body: Bytes| {
            let events = events.clone();
            bodies
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            async move {
                let all: Vec<u8> = events.concat().into_bytes();
                let pieces: Vec<Result<Bytes, std::io::Error>> =
                    all.chunks(7).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
                Response::builder()
                    .status(status)
                    .header(
                        CONTENT_TYPE,
                        if status == 200 {
                            "text/event-stream"
                        } else {
                            "application/json"
                        },
                    )
                    .body(Body::from_stream(futures_util::stream::iter(pieces)))
                    .unwrap()
            }
        }),
    );
    serve(app).await
}

fn request<'a>(messages: &'a [Message], stream: &'a Recorded) -> ChatRequest<'a> {
    ChatRequest {
        model: "m",
        system: "You help.",
        messages,
        wire: &[],
        tools: &[],
        max_output_tokens: 1024,
        stream: Some(stream),
        caching: &steward::provider::Caching::NONE,
        reasoning: &steward::provider::ReasoningSpec::NONE,
    }
}

fn data(v: Value) -> String {
    format!("data: {v}\n\n")
}

#[tokio::test]
async fn openai_chunks_stream_text_and_assemble_tool_calls_and_usage() {
    let chunk = |delta: Value, finish: Value| {
        data(
            json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1694268190, "model": "gpt-4.1-2025-04-14",
                    "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}], "usage": null}),
        )
    };
    let events = vec![
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "Hel"}), Value::Null),
        chunk(json!({"content": "lo"}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "current_time", "arguments": "{\"tz\""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": ": \"UTC\"}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        data(
            json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "model": "gpt-4.1-2025-04-14", "choices": [],
                    "usage": {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49,
                              "prompt_tokens_details": {"cached_tokens": 10}}}),
        ),
        "data: [DONE]\n\n".to_string(),
    ];
    let bodies = Arc::default();
    let url = sse_server("/v1/chat/completions", 200, events, Arc::clone(&bodies)).await;
    let openai = OpenAi::new(
        steward::http::client().unwrap(),
        Endpoint {
            base_url: format!("{url}/v1"),
            api_key: Some("sk-test".into()),
        },
        Duration::from_secs(10),
    );
    let recorded = Recorded::default();
    let messages = [Message::user("what time is it?")];
    let answer = openai.chat(&request(&messages, &recorded)).await.unwrap();
    assert_eq!(*recorded.0.lock().unwrap(), ["Hel", "lo"]);
    assert_eq!(answer.text.as_deref(), Some("Hello"));
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].id, "call_1");
    assert_eq!(answer.tool_calls[0].name, "current_time");
    assert_eq!(answer.tool_calls[0].arguments, "{\"tz\": \"UTC\"}");
    assert_eq!(answer.stop_reason, "tool_calls");
    assert_eq!(answer.model, "gpt-4.1-2025-04-14");
    assert_eq!(
        (
            answer.usage.input_tokens,
            answer.usage.output_tokens,
            answer.usage.cached_input_tokens
        ),
        (42, 7, 10)
    );
    let sent = &bodies.lock().unwrap()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
}

fn anthropic(url: &str) -> Anthropic {
    Anthropic::new(
        steward::http::client().unwrap(),
        Endpoint {
            base_url: url.to_string(),
            api_key: Some("sk-ant-test".into()),
        },
        Duration::from_secs(10),
    )
}

fn event(name: &str, v: Value) -> String {
    format!("event: {name}\ndata: {v}\n\n")
}

#[tokio::test]
async fn anthropic_events_stream_text_and_assemble_tool_use_and_usage() {
    let events = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                   "model": "claude-sonnet-4-5", "stop_reason": null, "stop_sequence": null,
                   "usage": {"input_tokens": 25, "output_tokens": 1, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 0}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        event("ping", json!({"type": "ping"})),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me "}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "check."}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {}}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"tz\": "}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"UTC\"}"}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 30}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ];
    let bodies = Arc::default();
    let url = sse_server("/v1/messages", 200, events, Arc::clone(&bodies)).await;
    let recorded = Recorded::default();
    let messages = [Message::user("what time is it?")];
    let answer = anthropic(&url)
        .chat(&request(&messages, &recorded))
        .await
        .unwrap();
    assert_eq!(*recorded.0.lock().unwrap(), ["Let me ", "check."]);
    assert_eq!(answer.text.as_deref(), Some("Let me check."));
    assert_eq!(answer.tool_calls[0].id, "toolu_1");
    assert_eq!(
        serde_json::from_str::<Value>(&answer.tool_calls[0].arguments).unwrap(),
        json!({"tz": "UTC"})
    );
    assert_eq!(answer.stop_reason, "tool_use");
    assert_eq!(
        (answer.usage.input_tokens, answer.usage.output_tokens),
        (30, 30),
        "input includes cache reads"
    );
    assert_eq!(bodies.lock().unwrap()[0]["stream"], true);
}

#[tokio::test]
async fn a_stream_error_event_and_a_refused_stream_are_classified() {
    let overloaded = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "content": [],
                   "model": "claude-sonnet-4-5", "usage": {"input_tokens": 3, "output_tokens": 0}}}),
        ),
        event(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ];
    let url = sse_server("/v1/messages", 200, overloaded, Arc::default()).await;
    let recorded = Recorded::default();
    let messages = [Message::user("hi")];
    let err = anthropic(&url)
        .chat(&request(&messages, &recorded))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Server, "{err}");
    assert!(err.kind.is_retryable());

    let limited = vec![
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}).to_string(),
    ];
    let url = sse_server("/v1/messages", 429, limited, Arc::default()).await;
    let err = anthropic(&url)
        .chat(&request(&messages, &recorded))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::RateLimit);
    assert!(err.message.contains("slow down"), "{err}");
}

#[tokio::test]
async fn responses_events_stream_text_and_keep_reasoning_items_whole() {
    let answer = support::responses_answer(
        vec![
            support::responses_reasoning("rs_1", "gAAAAABencrypted=="),
            support::responses_message("Checking the clock."),
            support::responses_call("call_1", "current_time", r#"{"tz": "UTC"}"#),
        ],
        48,
    );
    let events = vec![support::responses_sse(&answer)];
    let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
    let url = sse_server("/v1/responses", 200, events, Arc::clone(&bodies)).await;
    let openai = OpenAi::new(
        steward::http::client().unwrap(),
        Endpoint {
            base_url: format!("{url}/v1"),
            api_key: Some("sk-test".into()),
        },
        Duration::from_secs(10),
    )
    .with_style(steward::provider::openai::ApiStyle::Responses);
    let recorded = Recorded::default();
    let messages = [Message::user("what time is it?")];
    let streamed = openai.chat(&request(&messages, &recorded)).await.unwrap();
    assert_eq!(recorded.0.lock().unwrap().concat(), "Checking the clock.");
    assert_eq!(streamed.text.as_deref(), Some("Checking the clock."));
    assert_eq!(streamed.tool_calls[0].id, "call_1");
    assert_eq!(streamed.tool_calls[0].arguments, r#"{"tz": "UTC"}"#);
    assert_eq!(streamed.stop_reason, "tool_calls");
    assert_eq!(streamed.usage.reasoning_tokens, 48);
    // The reasoning item comes back whole, encrypted content and all, for the next turn.
    assert_eq!(streamed.reasoning.len(), 1);
    assert_eq!(streamed.reasoning[0].item, answer["output"][0]);
    let sent = &bodies.lock().unwrap()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["store"], false);
}

#[tokio::test]
async fn anthropic_thinking_streams_with_its_signature() {
    let thinking = json!({"type": "thinking", "thinking": "The user wants the time; call the clock.",
                          "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"});
    let redacted = json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"});
    let answer = support::anthropic_message(
        vec![
            thinking.clone(),
            redacted.clone(),
            json!({"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {"tz": "UTC"}}),
        ],
        "tool_use",
    );
    let events = vec![support::anthropic_sse(&answer)];
    let url = sse_server("/v1/messages", 200, events, Arc::default()).await;
    let anthropic = Anthropic::new(
        steward::http::client().unwrap(),
        Endpoint {
            base_url: url,
            api_key: Some("sk-ant-test".into()),
        },
        Duration::from_secs(10),
    );
    let recorded = Recorded::default();
    let messages = [Message::user("what time is it?")];
    let streamed = anthropic.chat(&request(&messages, &recorded)).await.unwrap();
    // Thinking is never streamed as the answer.
    assert!(recorded.0.lock().unwrap().is_empty());
    assert_eq!(streamed.tool_calls[0].arguments, r#"{"tz":"UTC"}"#);
    let items: Vec<&Value> = streamed.reasoning.iter().map(|r| &r.item).collect();
    assert_eq!(items, [&thinking, &redacted]);
}

/// A server sending `events` as SSE with `gaps[i]` before event `i`.
async fn paced_server(events: Vec<String>, gaps: Vec<Duration>) -> String {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move || {
            let paced: Vec<(String, Duration)> = events.iter().cloned().zip(gaps.iter().copied()).collect();
            async move {
                let stream = futures_util::stream::unfold(paced.into_iter(), |mut rest| async move {
                    let (event, gap) = rest.next()?;
                    tokio::time::sleep(gap).await;
                    Some((Ok::<_, std::io::Error>(Bytes::from(event)), rest))
                });
                Response::builder()
                    .status(200)
                    .header(CONTENT_TYPE, "text/event-stream")
                    .body(Body::from_stream(stream))
                    .unwrap()
            }
        }),
    );
    serve(app).await
}

/// The request timeout bounds the wait for the answer's start and for each next piece
/// of a stream, not the whole stream: a model that keeps sending (long reasoning, a
/// long answer) is not cut, and one that goes silent is, with a timeout.
#[tokio::test]
async fn a_stream_is_timed_per_gap_not_as_a_whole() {
    let chunk = |content: &str| {
        data(
            json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1694268190, "model": "gpt-5.1",
                   "choices": [{"index": 0, "delta": {"content": content}, "logprobs": null, "finish_reason": null}]}),
        )
    };
    let done = data(
        json!({"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1694268190, "model": "gpt-5.1",
               "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}]}),
    );
    let events: Vec<String> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|c| chunk(c))
        .chain([done])
        .collect();
    let openai = |url: &str| {
        OpenAi::new(
            steward::http::client().unwrap(),
            Endpoint {
                base_url: format!("{url}/v1"),
                api_key: Some("sk-test".into()),
            },
            Duration::from_millis(800),
        )
    };
    let messages = [Message::user("think it through")];
    // Six pieces 300 ms apart: 1.8 s in all, past the 0.8 s timeout, never silent that long.
    let steady = paced_server(events.clone(), vec![Duration::from_millis(300); 6]).await;
    let recorded = Recorded::default();
    let answer = openai(&steady)
        .chat(&request(&messages, &recorded))
        .await
        .unwrap();
    assert_eq!(answer.text.as_deref(), Some("abcde"));
    // Silent for 2 s after the second piece.
    let mut gaps = vec![Duration::from_millis(50); 6];
    gaps[2] = Duration::from_secs(2);
    let stalled = paced_server(events, gaps).await;
    let recorded = Recorded::default();
    let err = openai(&stalled)
        .chat(&request(&messages, &recorded))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert!(err.message.contains("no more of the stream within"), "{err}");
}
