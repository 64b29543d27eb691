//! Shared test support: a fake model server speaking the OpenAI and Anthropic wire
//! formats on 127.0.0.1, request capture, and a runner wired to it with a real SQLite
//! store in a temp folder.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use steward::provider::anthropic::Anthropic;
use steward::provider::openai::OpenAi;
use steward::provider::retry::RetryPolicy;
use steward::provider::{Endpoint, ProviderSet};
use steward::run::Runner;
use steward::store::SqliteStore;
use steward::tools::ToolRegistry;

pub mod prompt_cache;

/// One scripted answer of the fake server.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub delay: Duration,
}

impl Reply {
    pub fn ok(body: Value) -> Reply {
        Reply {
            status: 200,
            headers: Vec::new(),
            body,
            delay: Duration::ZERO,
        }
    }
    pub fn status(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body,
            delay: Duration::ZERO,
        }
    }
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }
}

/// A request the fake server received.
#[derive(Clone, Debug)]
pub struct Captured {
    pub path: String,
    pub headers: HeaderMap,
    pub raw: Bytes,
    pub body: Value,
    pub at: Instant,
}

/// Computes a reply from the request body.
pub type Handler = Arc<dyn Fn(&Value) -> Reply + Send + Sync>;

#[derive(Default)]
struct Inner {
    script: VecDeque<Reply>,
    /// Answers when the script is empty, before `fallback`.
    handler: Option<Handler>,
    /// Served when the script is empty.
    fallback: Option<Reply>,
    captured: Vec<Captured>,
}

/// A fake model server on 127.0.0.1:0 answering from a script.
#[derive(Clone)]
pub struct FakeModel {
    inner: Arc<Mutex<Inner>>,
    pub url: String,
    _server: Arc<tokio::task::JoinHandle<()>>,
}

impl FakeModel {
    pub async fn start() -> FakeModel {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/v1/messages", post(handle))
            .route("/v1/responses", post(handle))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeModel {
            inner,
            url: format!("http://{addr}"),
            _server: Arc::new(server),
        }
    }

    /// Queues answers, served in order.
    pub fn push(&self, reply: Reply) -> &Self {
        self.inner.lock().unwrap().script.push_back(reply);
        self
    }

    /// Answers computed from each request once the script runs out.
    pub fn handler(&self, h: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> &Self {
        self.inner.lock().unwrap().handler = Some(Arc::new(h));
        self
    }

    /// The answer served once the script runs out.
    pub fn always(&self, reply: Reply) -> &Self {
        self.inner.lock().unwrap().fallback = Some(reply);
        self
    }

    pub fn requests(&self) -> Vec<Captured> {
        self.inner.lock().unwrap().captured.clone()
    }
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    raw: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let (scripted, handler, fallback) = {
        let mut g = inner.lock().unwrap();
        g.captured.push(Captured {
            path: uri.path().to_string(),
            headers,
            raw: raw.clone(),
            body: body.clone(),
            at: Instant::now(),
        });
        (g.script.pop_front(), g.handler.clone(), g.fallback.clone())
    };
    // The handler runs outside the lock so it may inspect captured requests.
    let reply = scripted.or_else(|| handler.map(|h| h(&body))).or(fallback);
    let Some(reply) = reply else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake model: no scripted reply left",
        )
            .into_response();
    };
    tokio::time::sleep(reply.delay).await;
    // A request that asks for a stream gets the same answer as server-sent events.
    let mut resp = if reply.status == 200 && body["stream"] == true {
        let sse = if uri.path().ends_with("/messages") {
            anthropic_sse(&reply.body)
        } else if uri.path().ends_with("/responses") {
            responses_sse(&reply.body)
        } else {
            openai_sse(&reply.body)
        };
        ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], sse).into_response()
    } else {
        (
            StatusCode::from_u16(reply.status).unwrap(),
            axum::Json(reply.body),
        )
            .into_response()
    };
    for (k, v) in reply.headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    resp
}

/// A Chat Completions answer with text only.
pub fn openai_text(text: &str) -> Value {
    openai_message(json!({"role": "assistant", "content": text}), "stop", 1200, 40)
}

/// A Chat Completions answer asking for tool calls `(id, name, arguments)`.
pub fn openai_tools(calls: &[(&str, &str, &str)]) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
        .collect();
    openai_message(
        json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
        "tool_calls",
        1000,
        30,
    )
}

pub fn openai_message(message: Value, finish: &str, prompt_tokens: u64, completion_tokens: u64) -> Value {
    json!({
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4.1-2025-04-14",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        },
        "service_tier": "default"
    })
}

/// An OpenAI-style error body.
pub fn openai_error(message: &str, kind: &str, code: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// A Messages API answer with text only.
pub fn anthropic_text(text: &str) -> Value {
    anthropic_message(vec![json!({"type": "text", "text": text})], "end_turn")
}

/// A Messages API answer asking for tool calls `(id, name, input)`.
pub fn anthropic_tools(calls: &[(&str, &str, Value)]) -> Value {
    let content = calls
        .iter()
        .map(|(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input}))
        .collect();
    anthropic_message(content, "tool_use")
}

pub fn anthropic_message(content: Vec<Value>, stop: &str) -> Value {
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {"input_tokens": 900, "output_tokens": 35, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100}
    })
}

/// Fast retries so tests do not sleep on backoff.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        max_retry_after: Duration::from_secs(5),
    }
}

/// Providers pointing at fake servers.
pub fn providers(openai: Option<&FakeModel>, anthropic: Option<&FakeModel>) -> ProviderSet {
    let client = steward::http::client().unwrap();
    let timeout = Duration::from_secs(10);
    let mut set = ProviderSet::new(fast_retry());
    if let Some(f) = openai {
        let ep = Endpoint {
            base_url: format!("{}/v1", f.url),
            api_key: Some("sk-test".into()),
        };
        set = set.with("openai", Arc::new(OpenAi::new(client.clone(), ep, timeout)));
    }
    if let Some(f) = anthropic {
        let ep = Endpoint {
            base_url: f.url.clone(),
            api_key: Some("sk-ant-test".into()),
        };
        set = set.with("anthropic", Arc::new(Anthropic::new(client, ep, timeout)));
    }
    set
}

/// A runner over a fresh SQLite file; keep the TempDir alive for the test.
/// The built-in tools with clients from an empty environment (no service tokens).
pub fn builtin_registry() -> ToolRegistry {
    steward::integrations::builtin_tools(
        &steward::integrations::Clients::from_settings(steward::http::client().unwrap(), &Default::default()),
        Default::default(),
    )
}

pub async fn runner(
    providers: ProviderSet,
    tools: ToolRegistry,
    mock_tools: bool,
) -> (tempfile::TempDir, Runner) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("steward.db")).await.unwrap();
    let runner = Runner::builder(Arc::new(store))
        .providers(providers)
        .tools(tools)
        .mock_tools(mock_tools)
        .tokens(tokens())
        .build();
    (dir, runner)
}

/// One tokenizer for the whole test binary: building o200k takes a while.
/// A tool call's context in run `run_id`: fresh run files, no skills or subagents, real
/// tools, and `search` as the run's grant (who asked, what it may search).
pub fn tool_ctx(
    run_id: &str,
    search: Arc<steward::tools::search_grant::SearchGrant>,
) -> steward::tools::ToolCtx {
    steward::tools::ToolCtx {
        run_id: run_id.into(),
        agent: "a".into(),
        call_id: "c".into(),
        cancel: tokio_util::sync::CancellationToken::new(),
        files: Arc::new(steward::files::RunFiles::new(
            run_id,
            None,
            tokens(),
            steward::tokens::Encoding::O200k,
            10_000,
        )),
        skills: None,
        subagents: None,
        nested: None,
        mock: false,
        search,
        network: Default::default(),
    }
}

pub fn tokens() -> Arc<steward::tokens::TokenCounter> {
    static TOKENS: std::sync::OnceLock<Arc<steward::tokens::TokenCounter>> = std::sync::OnceLock::new();
    TOKENS
        .get_or_init(|| Arc::new(steward::tokens::TokenCounter::new()))
        .clone()
}

/// A free address on 127.0.0.1 for a `steward serve` child to listen on.
pub fn free_local_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("127.0.0.1:{port}")
}

/// Tokens of an OpenAI chat request's messages and tools.
pub fn request_tokens(body: &Value) -> u64 {
    let mut text = String::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        text.push_str(m["content"].as_str().unwrap_or_default());
        text.push_str(&m["tool_calls"].to_string());
    }
    text.push_str(&body["tools"].to_string());
    steward::tokens::TokenCounter::new()
        .count(steward::tokens::Encoding::O200k, &text)
        .tokens
}

/// `response` with `prompt_tokens` set to what the request really held.
pub fn reported(mut response: Value, prompt_tokens: u64) -> Value {
    response["usage"]["prompt_tokens"] = json!(prompt_tokens);
    response
}

/// Serves `app` on 127.0.0.1 (a fake Slack, Jira, Notion or collector); returns its URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// Spans closed while a [`SpanCapture`] is installed: name and recorded fields.
pub type CapturedSpans =
    std::sync::Arc<std::sync::Mutex<Vec<(String, std::collections::BTreeMap<String, String>)>>>;

#[derive(Default, Clone)]
struct FieldMap(std::collections::BTreeMap<String, String>);

impl tracing::field::Visit for FieldMap {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

/// A tracing layer that keeps every closed span with its fields, for tests.
pub struct SpanCapture(pub CapturedSpans);

impl<S> tracing_subscriber::Layer<S> for SpanCapture
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = FieldMap::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<FieldMap>()
        {
            values.record(fields);
        }
    }

    fn on_close(&self, id: tracing::span::Id, ctx: tracing_subscriber::layer::Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span.extensions().get::<FieldMap>().cloned().unwrap_or_default();
            self.0.lock().unwrap().push((span.name().to_string(), fields.0));
        }
    }
}

/// Captures this thread's spans until the guard is dropped.
pub fn capture_spans() -> (CapturedSpans, tracing::subscriber::DefaultGuard) {
    use tracing_subscriber::layer::SubscriberExt;
    let spans = CapturedSpans::default();
    let subscriber = tracing_subscriber::registry().with(SpanCapture(spans.clone()));
    (spans, tracing::subscriber::set_default(subscriber))
}

/// Posts `body` to a generic hook of a `steward serve` that may still be starting,
/// retrying until it listens (about 5 s); returns the HTTP status.
pub async fn post_hook_when_up(addr: &str, hook: &str, token: &str, body: &str) -> u16 {
    let client = steward::http::client().unwrap();
    for _ in 0..100 {
        let sent = client
            .post(format!("http://{addr}/hooks/{hook}"))
            .bearer_auth(token)
            .body(body.to_string())
            .send()
            .await;
        if let Ok(r) = sent {
            return r.status().as_u16();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("steward serve did not start");
}

/// A tree with one agent, `intake`, started by the generic webhook `intake`
/// (`STEWARD_HOOK_INTAKE_TOKEN`) and keeping no answer.
pub fn intake_tree() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("prompts/intake.md", "You note requests.");
    write(
        "agents/intake.yaml",
        "description: Intake.\nmodel: openai/gpt-4.1\nprompt: prompts/intake.md\ntriggers:\n  - webhook: { name: intake }\noutput: { reply: false }\n",
    );
    root
}

/// An Events API `event_callback` around `event`, as Slack documents it, with the bot
/// `UBOT` in its `authorizations`.
pub fn event_callback(event_id: &str, event: Value) -> Value {
    json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
        "type": "event_callback", "event_id": event_id, "event_time": 1700000000,
        "authorizations": [{"team_id": "T123ABC456", "user_id": "UBOT", "is_bot": true}], "event": event})
}

/// A request to `path` signed as Slack signs it (`v0` HMAC over timestamp and body).
pub fn slack_signed(
    path: &str,
    content_type: &str,
    body: String,
    secret: &str,
) -> axum::http::Request<axum::body::Body> {
    let ts = chrono::Utc::now().timestamp().to_string();
    let sig = format!(
        "v0={}",
        steward::triggers::auth::sign_hex(secret.as_bytes(), &[b"v0:", ts.as_bytes(), b":", body.as_bytes()])
    );
    axum::http::Request::post(path)
        .header("content-type", content_type)
        .header("x-slack-request-timestamp", ts)
        .header("x-slack-signature", sig)
        .body(axum::body::Body::from(body))
        .unwrap()
}

/// Writes `text` to `rel` under `root`, creating its folders.
pub fn write(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The roles and contents of the messages of a Chat Completions request.
pub fn chat_turns(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Waits until `n` runs exist and all ended; returns them newest first.
pub async fn ended_runs(store: &dyn steward::store::Store, n: usize) -> Vec<steward::store::RunRow> {
    for _ in 0..200 {
        let runs = store.list_runs(50).await.unwrap();
        if runs.len() >= n && runs.iter().all(|r| r.status.is_terminal()) {
            return runs;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("runs: {:?}", store.list_runs(50).await.unwrap());
}

/// Waits until every stored event is routed (none queued or claimed).
pub async fn all_routed(store: &dyn steward::store::Store) {
    for _ in 0..200 {
        if store.queue_depth().await.unwrap() == (0, 0) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("events not routed");
}

/// Text in the pieces a server streams it in (a few words at a time).
fn pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut piece = String::new();
    for (i, word) in text.split_inclusive(' ').enumerate() {
        piece.push_str(word);
        if i % 3 == 2 {
            out.push(std::mem::take(&mut piece));
        }
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

/// A Chat Completions answer as its stream of chunks (`stream_options.include_usage`).
pub fn openai_sse(answer: &Value) -> String {
    let choice = &answer["choices"][0];
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": answer["id"], "object": "chat.completion.chunk", "model": answer["model"],
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    };
    let mut out = chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    if let Some(text) = choice["message"]["content"].as_str() {
        for p in pieces(text) {
            out.push_str(&chunk(json!({"content": p}), Value::Null));
        }
    }
    for (i, call) in choice["message"]["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}}]}),
            Value::Null,
        ));
    }
    out.push_str(&chunk(json!({}), choice["finish_reason"].clone()));
    out.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"id": answer["id"], "object": "chat.completion.chunk", "model": answer["model"], "choices": [], "usage": answer["usage"]})
    ));
    out
}

/// A Messages answer as its stream of events.
pub fn anthropic_sse(answer: &Value) -> String {
    let event = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    let mut start = answer.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    for (i, block) in answer["content"].as_array().into_iter().flatten().enumerate() {
        match block["type"].as_str() {
            // Thinking streams as text, then its signature whole before the block stops.
            Some("thinking") => {
                out.push_str(&event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
                ));
                for p in pieces(block["thinking"].as_str().unwrap_or_default()) {
                    out.push_str(&event("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": p}})));
                }
                out.push_str(&event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "signature_delta", "signature": block["signature"]}}),
                ));
            }
            // Redacted thinking arrives whole.
            Some("redacted_thinking") => {
                out.push_str(&event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": block}),
                ));
            }
            Some("text") => {
                out.push_str(&event("content_block_start", json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})));
                for p in pieces(block["text"].as_str().unwrap_or_default()) {
                    out.push_str(&event("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": p}})));
                }
            }
            _ => {
                let mut started = block.clone();
                started["input"] = json!({});
                out.push_str(&event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": started}),
                ));
                out.push_str(&event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": block["input"].to_string()}}),
                ));
            }
        }
        out.push_str(&event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    out.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": answer["stop_reason"]},
        "usage": {"output_tokens": answer["usage"]["output_tokens"]}}),
    ));
    out.push_str(&event("message_stop", json!({"type": "message_stop"})));
    out
}

/// A run of `agent` on `trigger` whose model asks for `calls` (`(id, tool, arguments)`)
/// in one turn, then answers `answer`.
pub struct OneRound {
    pub fake: FakeModel,
    pub out: steward::run::RunOutcome,
    pub runner: Runner,
    pub dir: tempfile::TempDir,
}

pub async fn one_round(
    tools: ToolRegistry,
    agent: &steward::config::AgentConfig,
    trigger: &steward::triggers::TriggerEvent,
    calls: &[(&str, &str, &str)],
    answer: &str,
) -> OneRound {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(calls)));
    fake.push(Reply::ok(openai_text(answer)));
    let (dir, runner) = runner(providers(Some(&fake), None), tools, false).await;
    let out = runner
        .run(agent, trigger, None, tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    OneRound {
        fake,
        out,
        runner,
        dir,
    }
}

/// What the model was given back for each tool call of the last request, by call id.
pub fn tool_results(fake: &FakeModel) -> std::collections::BTreeMap<String, String> {
    let last = fake.requests().last().unwrap().body.clone();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `steward <args>` in the tree `root` (its store at `root/s.db`), with no provider
/// keys or base URLs and error-only logs unless `env` sets them.
pub fn steward_in(root: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    cmd.args(args)
        .env("STEWARD_ROOT", root)
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", root.join("s.db").display()),
        )
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env("RUST_LOG", "error");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// [`steward_in`] off the async runtime's threads.
pub async fn steward_in_async(
    root: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> std::process::Output {
    let root = root.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        steward_in(&root, &args, &env)
    })
    .await
    .unwrap()
}

/// A process's standard output then standard error, for assertions and messages.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A fake Slack's `conversations.info`: channels whose id starts with C are public
/// unless the id holds `PRIV` (Slack's private channels can have C ids).
pub async fn conversations_info(
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> axum::Json<Value> {
    let id = q.get("channel").cloned().unwrap_or_default();
    let private = !id.starts_with('C') || id.contains("PRIV");
    axum::Json(
        serde_json::json!({"ok": true, "channel": {"id": id, "name": "general", "is_channel": true,
        "is_private": private, "is_im": id.starts_with('D'), "is_mpim": false}}),
    )
}

/// Child processes (replicas of `steward serve`) killed when the test ends, passed or
/// panicked: a failed assertion must not leave servers holding database connections
/// for the tests after it.
pub struct Children(pub Vec<std::process::Child>);

impl std::ops::Deref for Children {
    type Target = Vec<std::process::Child>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Children {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A Responses API answer (`object: "response"`) with these output items.
pub fn responses_answer(output: Vec<Value>, reasoning_tokens: u64) -> Value {
    json!({
        "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": "gpt-5.2-2025-12-11",
        "output": output,
        "parallel_tool_calls": true,
        "store": false,
        "usage": {
            "input_tokens": 1200,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 40 + reasoning_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": 1240 + reasoning_tokens
        }
    })
}

/// A reasoning item as a `store: false` request with `include:
/// ["reasoning.encrypted_content"]` gets it.
pub fn responses_reasoning(id: &str, encrypted: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [], "encrypted_content": encrypted})
}

/// A function call output item.
pub fn responses_call(call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id, "name": name,
           "arguments": arguments, "status": "completed"})
}

/// An assistant message output item.
pub fn responses_message(text: &str) -> Value {
    json!({"type": "message", "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b", "status": "completed",
           "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A Responses answer as its stream of events: `response.created`, each output item
/// added, its deltas (text, function-call arguments), done whole, then
/// `response.completed` with the whole response.
pub fn responses_sse(answer: &Value) -> String {
    let mut seq = 0;
    let mut event = |v: Value| {
        let mut v = v;
        v["sequence_number"] = json!(seq);
        seq += 1;
        format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or_default())
    };
    let mut created = answer.clone();
    created["status"] = json!("in_progress");
    created["output"] = json!([]);
    let mut out = event(json!({"type": "response.created", "response": created}));
    for (i, item) in answer["output"].as_array().into_iter().flatten().enumerate() {
        let mut added = item.clone();
        match item["type"].as_str() {
            Some("message") => added["content"] = json!([]),
            Some("function_call") => added["arguments"] = json!(""),
            Some("reasoning") => {
                added.as_object_mut().unwrap().remove("encrypted_content");
            }
            _ => {}
        }
        out.push_str(&event(
            json!({"type": "response.output_item.added", "output_index": i, "item": added}),
        ));
        match item["type"].as_str() {
            Some("message") => {
                let text = item["content"][0]["text"].as_str().unwrap_or_default();
                for p in pieces(text) {
                    out.push_str(&event(
                        json!({"type": "response.output_text.delta", "item_id": item["id"],
                        "output_index": i, "content_index": 0, "delta": p, "logprobs": []}),
                    ));
                }
            }
            Some("function_call") => {
                out.push_str(&event(
                    json!({"type": "response.function_call_arguments.delta", "item_id": item["id"],
                    "output_index": i, "delta": item["arguments"]}),
                ));
                out.push_str(&event(
                    json!({"type": "response.function_call_arguments.done", "item_id": item["id"],
                    "output_index": i, "arguments": item["arguments"]}),
                ));
            }
            _ => {}
        }
        out.push_str(&event(
            json!({"type": "response.output_item.done", "output_index": i, "item": item}),
        ));
    }
    out.push_str(&event(json!({"type": "response.completed", "response": answer})));
    out
}

/// Providers pointing at fake servers, OpenAI spoken to with the Responses API.
pub fn responses_providers(openai: &FakeModel) -> ProviderSet {
    let client = steward::http::client().unwrap();
    let ep = Endpoint {
        base_url: format!("{}/v1", openai.url),
        api_key: Some("sk-test".into()),
    };
    let provider = OpenAi::new(client, ep, Duration::from_secs(10))
        .with_style(steward::provider::openai::ApiStyle::Responses);
    ProviderSet::new(fast_retry()).with("openai", Arc::new(provider))
}

/// Runs the Python script `text` (as `scripts/run.py` of a fresh skill folder) with
/// `args` in a real bubblewrap sandbox whose egress is `proxy`, with `limits`; the
/// steward executable is the forwarder inside.
pub async fn run_python_behind(
    proxy: &steward::http::proxy::Proxy,
    sandbox: &steward::sandbox::process::ProcessSandbox,
    text: &str,
    args: &[String],
) -> steward::sandbox::process::Finished {
    use steward::sandbox::process::{Egress, Job, ProcessLimits, find_program};
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "scripts/run.py", text);
    let python = find_program("python3").unwrap();
    sandbox
        .run(
            &Job {
                skill_dir: dir.path(),
                script: "scripts/run.py",
                interpreter: &python,
                args,
                stdin: None,
                inputs: &[],
                deps: None,
                proxy: Some(Egress {
                    socket: proxy.socket(),
                    trust: proxy.trust_bundle(),
                    env: proxy.secret_env(),
                }),
            },
            &ProcessLimits::default(),
        )
        .await
        .unwrap()
}

/// A sandbox for scripts under a fresh folder named for `tag`, with the steward
/// executable as its forwarder; asserts bubblewrap works here.
pub fn egress_sandbox(tag: &str) -> steward::sandbox::process::ProcessSandbox {
    let base = std::env::temp_dir().join(format!(
        "steward-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let sandbox = steward::sandbox::process::ProcessSandbox::detect(base)
        .with_forwarder(std::path::PathBuf::from(env!("CARGO_BIN_EXE_steward")));
    assert!(sandbox.unavailable().is_none(), "{:?}", sandbox.unavailable());
    sandbox
}

/// A minimal MCP stdio server in Python (newline-delimited JSON-RPC) with one tool,
/// `fetch`, that GETs a URL with urllib (which follows `HTTP_PROXY`), sending
/// `API_TOKEN` as its Authorization header when the server has one (and saying how it
/// begins: a placeholder's prefix, never a value).
pub const PY_MCP_FETCHER: &str = r#"import json, os, sys, urllib.request
def reply(i, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": i, "result": result}) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    method, i = msg.get("method"), msg.get("id")
    if method == "initialize":
        reply(i, {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "fetcher", "version": "1"}})
    elif method == "tools/list":
        reply(i, {"tools": [{"name": "fetch", "description": "GET a URL",
                  "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}}]})
    elif method == "tools/call":
        token = os.environ.get("API_TOKEN", "")
        headers = {"Authorization": token} if token else {}
        req = urllib.request.Request(msg["params"]["arguments"]["url"], headers=headers)
        try:
            text = urllib.request.urlopen(req, timeout=10).read().decode()
        except urllib.error.HTTPError as e:
            text = f"{e.code} {e.read().decode().strip()}"
        except Exception as e:
            text = f"error: {e}"
        if token:
            text = f"holds {token[:11]}; {text}"
        reply(i, {"content": [{"type": "text", "text": text}]})
    elif i is not None:
        reply(i, {})
"#;

/// The line of `out` that starts with `key` (a script's `key: value` report).
pub fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in {out}"))
}

/// A sandboxed script's stdout and stderr, asserting it exited with 0.
pub fn exited_ok(finished: &steward::sandbox::process::Finished) -> (String, String) {
    let out = String::from_utf8_lossy(&finished.stdout).into_owned();
    let err = String::from_utf8_lossy(&finished.stderr).into_owned();
    assert_eq!(
        finished.stop,
        steward::sandbox::process::Stop::Exited(0),
        "{out}{err}"
    );
    (out, err)
}
