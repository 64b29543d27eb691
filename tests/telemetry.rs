//! Traces over OTLP/HTTP: `steward run` with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a
//! receiver on 127.0.0.1 that decodes `ExportTraceServiceRequest` as a collector would.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use support::*;

type Received = Arc<Mutex<Vec<(HashMap<String, String>, Span)>>>;

/// Collects every span with its resource attributes; checks the auth header it was given.
async fn collect(
    State((spans, headers_seen)): State<(Received, Arc<Mutex<Vec<String>>>)>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> &'static str {
    if let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        headers_seen.lock().unwrap().push(v.to_string());
    }
    // OTLP/HTTP in either encoding, as the exporter's protocol says.
    let json = headers
        .get("content-type")
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    let request = if json {
        serde_json::from_slice::<ExportTraceServiceRequest>(&body).expect("a valid OTLP JSON body")
    } else {
        ExportTraceServiceRequest::decode(body).expect("a valid OTLP protobuf body")
    };
    let mut out = spans.lock().unwrap();
    for rs in request.resource_spans {
        let resource: HashMap<String, String> = rs
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .map(|kv| {
                (
                    kv.key.clone(),
                    text(kv.value.as_ref().and_then(|v| v.value.as_ref())),
                )
            })
            .collect();
        for ss in rs.scope_spans {
            for span in ss.spans {
                out.push((resource.clone(), span));
            }
        }
    }
    ""
}

fn text(v: Option<&AnyValue>) -> String {
    match v {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        // String arrays (finish reasons) as `[a,b]`, so a test sees the type.
        Some(AnyValue::ArrayValue(a)) => format!(
            "[{}]",
            a.values
                .iter()
                .map(|v| text(v.value.as_ref()))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ => String::new(),
    }
}

fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| text(kv.value.as_ref().and_then(|v| v.value.as_ref())))
}

#[tokio::test]
async fn a_run_exports_genai_spans_in_one_trace() {
    let spans: Received = Arc::default();
    let auth: Arc<Mutex<Vec<String>>> = Arc::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(collect))
        .with_state((spans.clone(), auth.clone()));
    let collector = serve(app).await;

    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "call_1",
        "http_fetch",
        "{\"url\": \"https://example.com/post\"}",
    )])));
    fake.push(Reply::ok(openai_text("A short summary.")));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let ev = dir.path().join("e.json");
    std::fs::write(&ev, r#"{"text": "summarize https://example.com/post"}"#).unwrap();
    let base = format!("{}/v1", fake.url);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .args([
                "run",
                "page-summarizer",
                "--event",
                ev.to_str().unwrap(),
                "--mock-tools",
            ])
            .env("STEWARD_ROOT", &repo)
            .env("DATABASE_URL", format!("sqlite://{}", db.display()))
            .env("OPENAI_BASE_URL", base)
            .env("OPENAI_API_KEY", "sk-test")
            .env_remove("ANTHROPIC_API_KEY")
            .env("RUST_LOG", "error")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector)
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Bearer%20collector-token",
            )
            .env("OTEL_SERVICE_NAME", "steward-test")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "A short summary.");

    // Flushed before the process exited.
    let spans = spans.lock().unwrap().clone();
    let by_name =
        |name: &str| -> Vec<&Span> { spans.iter().map(|(_, s)| s).filter(|s| s.name == name).collect() };
    let agent = by_name("invoke_agent page-summarizer");
    assert_eq!(
        agent.len(),
        1,
        "{:?}",
        spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
    );
    let agent = agent[0];
    let chats = by_name("chat gpt-6-luna");
    assert_eq!(chats.len(), 2);
    let tools = by_name("execute_tool http_fetch");
    assert_eq!(tools.len(), 1);

    // One trace; model and tool spans are children of the run's span.
    for s in chats.iter().chain(&tools) {
        assert_eq!(s.trace_id, agent.trace_id);
        assert_eq!(s.parent_span_id, agent.span_id, "{} under the run", s.name);
    }
    assert_eq!(
        attr(agent, "gen_ai.operation.name").as_deref(),
        Some("invoke_agent")
    );
    assert_eq!(
        attr(agent, "gen_ai.agent.name").as_deref(),
        Some("page-summarizer")
    );
    assert_eq!(attr(chats[0], "gen_ai.provider.name").as_deref(), Some("openai"));
    assert_eq!(
        attr(chats[0], "gen_ai.request.model").as_deref(),
        Some("gpt-6-luna")
    );
    assert_eq!(attr(tools[0], "gen_ai.tool.name").as_deref(), Some("http_fetch"));
    assert_eq!(attr(tools[0], "gen_ai.tool.call.id").as_deref(), Some("call_1"));
    assert_eq!(attr(tools[0], "gen_ai.tool.type").as_deref(), Some("function"));
    assert!(attr(tools[0], "steward.tool.result_bytes").is_some_and(|b| b.parse::<u64>().unwrap() > 0));
    assert_eq!(
        attr(tools[0], "steward.tool.result_file").as_deref(),
        Some("false")
    );
    // Without OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, no content at all.
    for s in chats.iter().chain(&tools) {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.tool.call.arguments",
        ] {
            assert_eq!(attr(s, key), None, "{key} on {}", s.name);
        }
    }
    // The run's span carries its identity, trigger and totals.
    let run_id = attr(agent, "gen_ai.conversation.id").unwrap();
    assert_eq!(attr(agent, "gen_ai.agent.id"), Some(run_id.clone()));
    assert_eq!(run_id.len(), 36, "a run id: {run_id}");
    assert_eq!(attr(agent, "steward.trigger.source").as_deref(), Some("cli"));
    assert_eq!(attr(agent, "steward.coordinator").as_deref(), Some("llm"));
    assert_eq!(attr(agent, "termination").as_deref(), Some("completed"));
    assert_eq!(attr(agent, "steward.turns").as_deref(), Some("2"));
    assert_eq!(attr(agent, "steward.tool_calls").as_deref(), Some("1"));
    // 1,000 prompt tokens for the tool-calling turn, 1,200 for the answer (the fake's usage).
    assert_eq!(attr(agent, "gen_ai.usage.input_tokens").as_deref(), Some("2200"));
    // Each model call: the response's id and finish reason, usage, not a fallback.
    let first = chats
        .iter()
        .find(|c| attr(c, "gen_ai.response.finish_reasons").as_deref() == Some("[tool_calls]"));
    let first = first.expect("the tool-calling turn");
    assert_eq!(
        attr(first, "gen_ai.response.id").as_deref(),
        Some("chatcmpl-abc123")
    );
    assert_eq!(attr(first, "gen_ai.usage.input_tokens").as_deref(), Some("1000"));
    assert_eq!(attr(first, "steward.fallback").as_deref(), Some("false"));
    assert_eq!(attr(first, "steward.retries").as_deref(), Some("0"));
    // The resource names the service; the exporter sent the configured header.
    assert_eq!(
        spans[0].0.get("service.name").map(String::as_str),
        Some("steward-test")
    );
    assert!(auth.lock().unwrap().iter().all(|h| h == "Bearer collector-token"));
    assert!(!auth.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_malformed_otlp_setting_stops_start_up_with_its_name() {
    let output = tokio::task::spawn_blocking(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .args(["runs", "list"])
            .env("DATABASE_URL", "sqlite::memory:")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
            .env("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "error: OTEL_EXPORTER_OTLP_HEADERS: 'no-equals-sign' is not key=value (entries are separated by commas)"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_trace_runs_from_the_webhook_through_the_queue_to_the_run() {
    webhook_trace("http/protobuf", None).await;
}

/// The sender's `traceparent` is continued: its trace runs on through the ingest span,
/// the queue, the run and the model call, whose request carries it on to the provider.
/// Over OTLP/HTTP JSON, with resource attributes from `OTEL_RESOURCE_ATTRIBUTES`.
#[tokio::test(flavor = "multi_thread")]
async fn a_senders_trace_context_is_continued_and_sent_on_over_http_json() {
    webhook_trace(
        "http/json",
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    )
    .await;
}

async fn webhook_trace(protocol: &str, traceparent: Option<&str>) {
    let spans: Received = Arc::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(collect))
        .with_state((spans.clone(), Arc::default()));
    let collector = serve(app).await;
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("noted")));
    let root = intake_tree();
    let addr = free_local_addr();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &addr])
        .env("STEWARD_ROOT", root.path())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", root.path().join("s.db").display()),
        )
        .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
        .env("OPENAI_API_KEY", "sk-test")
        .env("STEWARD_HOOK_INTAKE_TOKEN", "intake-token-0123456789")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment.name=test,service.namespace=ops",
        )
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    let client = steward::http::client().unwrap();
    let mut status = 0;
    for _ in 0..100 {
        let mut request = client
            .post(format!("http://{addr}/hooks/intake"))
            .bearer_auth("intake-token-0123456789")
            .body("{\"text\": \"new laptop for Ana\"}");
        if let Some(tp) = traceparent {
            request = request
                .header("traceparent", tp)
                .header("tracestate", "vendor=abc");
        }
        if let Ok(r) = request.send().await {
            status = r.status().as_u16();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200);
    for _ in 0..200 {
        if !fake.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    // Let the run finish, then stop the service: its spans are flushed on the way out.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));

    let spans = spans.lock().unwrap().clone();
    let find = |name: &str| spans.iter().map(|(_, s)| s).find(|s| s.name == name).cloned();
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    let ingest = find("ingest webhook").unwrap_or_else(|| panic!("no ingest span in {names:?}"));
    let run = find("invoke_agent intake").unwrap_or_else(|| panic!("no run span in {names:?}"));
    assert_eq!(
        run.trace_id, ingest.trace_id,
        "one trace from the webhook to the run"
    );
    assert_eq!(
        run.parent_span_id, ingest.span_id,
        "the run continues the ingest span"
    );
    assert_eq!(attr(&ingest, "steward.dedupe_hit").as_deref(), Some("false"));
    assert!(attr(&ingest, "steward.ack_ms").is_some_and(|ms| ms.parse::<f64>().unwrap() >= 0.0));
    let chat = find("chat gpt-4.1").expect("the model call");
    assert_eq!(chat.trace_id, ingest.trace_id);
    // The resource: steward's default name, the operator's attributes, the SDK's own.
    let resource = &spans[0].0;
    assert_eq!(resource.get("service.name").map(String::as_str), Some("steward"));
    assert_eq!(
        resource.get("deployment.environment.name").map(String::as_str),
        Some("test")
    );
    assert_eq!(
        resource.get("telemetry.sdk.name").map(String::as_str),
        Some("opentelemetry")
    );
    // The model call's request carried the chat span's context to the provider.
    let sent = fake.requests()[0]
        .headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .expect("a traceparent on the model request");
    assert_eq!(
        sent,
        format!("00-{}-{}-01", hex(&chat.trace_id), hex(&chat.span_id))
    );
    if let Some(tp) = traceparent {
        // The sender's trace, continued: the ingest span is its child.
        assert_eq!(hex(&ingest.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&ingest.parent_span_id), "00f067aa0ba902b7");
        assert_eq!(ingest.trace_state, "vendor=abc");
        assert!(sent.starts_with(&tp[..36]), "{sent}");
    } else {
        assert!(
            ingest.parent_span_id.is_empty(),
            "a root without a sender's context"
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The model of a boss that delegates once to `helper`, and of the helper.
fn delegating_model(fake: &FakeModel) {
    fake.handler(|body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        let answered = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        Reply::ok(if system.starts_with("You are the helper") {
            openai_text("hello from the helper")
        } else if answered {
            openai_text("The helper says hello.")
        } else {
            openai_tools(&[
                (
                    "s1",
                    "subagent",
                    r#"{"name": "helper", "prompt": "Say hello to the boss"}"#,
                ),
                ("k1", "load_skills", r#"{"names": ["greeting"]}"#),
            ])
        })
    });
}

#[tokio::test]
async fn a_subagent_run_is_a_child_of_its_tool_span_and_content_is_captured_when_asked() {
    // Quiet logs: the run is not entered on every poll; its spans name their parents.
    subagent_trace("error").await;
}

#[tokio::test]
async fn the_span_tree_is_the_same_when_logs_show_spans() {
    // `serve`'s default filter: the run's span is entered on every poll.
    subagent_trace("warn,steward=info").await;
}

/// A boss run delegating to a helper, exported with `rust_log` as the log filter: the
/// span tree and captured content checked.
async fn subagent_trace(rust_log: &str) {
    let spans: Received = Arc::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(collect))
        .with_state((spans.clone(), Arc::default()));
    let collector = serve(app).await;
    let fake = FakeModel::start().await;
    delegating_model(&fake);

    let root = tempfile::tempdir().unwrap();
    write(root.path(), "prompts/boss.md", "You are the boss agent.");
    write(root.path(), "prompts/helper.md", "You are the helper subagent.");
    write(
        root.path(),
        "prompts/skills/greeting/SKILL.md",
        "---\nname: greeting\ndescription: How to greet people.\n---\nSay hello warmly.\n",
    );
    write(
        root.path(),
        "subagents/helper.yaml",
        "description: Helps.\nprompt: prompts/helper.md\ntools: []\n",
    );
    write(
        root.path(),
        "agents/boss.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/boss.md\ntools: []\nsubagents: [helper]\n",
    );
    let ev = root.path().join("e.json");
    std::fs::write(&ev, r#"{"text": "Ask the helper to greet me"}"#).unwrap();
    let base = format!("{}/v1", fake.url);
    let dir = root.path().to_path_buf();
    let rust_log = rust_log.to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .args(["run", "boss", "--event", ev.to_str().unwrap()])
            .env("STEWARD_ROOT", &dir)
            .env("DATABASE_URL", format!("sqlite://{}", dir.join("s.db").display()))
            .env("OPENAI_BASE_URL", base)
            .env("OPENAI_API_KEY", "sk-test")
            .env_remove("ANTHROPIC_API_KEY")
            .env("RUST_LOG", rust_log)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector)
            .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let spans = spans.lock().unwrap().clone();
    let named = |name: &str| -> Vec<Span> {
        spans
            .iter()
            .map(|(_, s)| s.clone())
            .filter(|s| s.name == name)
            .collect()
    };
    let boss = &named("invoke_agent boss")[0];
    let delegate = &named("execute_tool subagent")[0];
    // A span a tool makes hangs under the tool's span, whether or not it was entered.
    let load = &named("execute_tool load_skills")[0];
    let skill = &named("load_skill greeting")[0];
    assert_eq!(load.parent_span_id, boss.span_id);
    assert_eq!(
        skill.parent_span_id, load.span_id,
        "the skill load is the tool call's"
    );
    let helper = &named("invoke_agent helper")[0];
    assert_eq!(delegate.parent_span_id, boss.span_id);
    assert_eq!(
        helper.parent_span_id, delegate.span_id,
        "the child run hangs under the tool call"
    );
    let chats = named("chat gpt-4.1");
    assert_eq!(chats.len(), 3);
    assert_eq!(
        chats
            .iter()
            .filter(|c| c.parent_span_id == helper.span_id)
            .count(),
        1,
        "the helper's model call is the helper's"
    );
    assert_eq!(
        chats.iter().filter(|c| c.parent_span_id == boss.span_id).count(),
        2,
        "the boss's two model calls are the boss's"
    );
    assert!(
        spans.iter().all(|(_, s)| s.trace_id == boss.trace_id),
        "one trace"
    );
    assert_eq!(attr(helper, "gen_ai.agent.name").as_deref(), Some("helper"));
    assert_eq!(attr(helper, "parent_run_id"), attr(boss, "gen_ai.agent.id"));

    // Content, because it was asked for: prompts and answers on chat spans, arguments
    // and results on tool spans, in the conventions' shapes.
    let first = chats.iter().find(|c| c.parent_span_id == boss.span_id).unwrap();
    let input: serde_json::Value =
        serde_json::from_str(&attr(first, "gen_ai.input.messages").unwrap()).unwrap();
    assert_eq!(input[0]["role"], "user");
    assert!(
        input[0]["parts"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Ask the helper to greet me")
    );
    assert!(
        attr(first, "gen_ai.system_instructions")
            .unwrap()
            .contains("You are the boss agent.")
    );
    assert!(
        attr(first, "gen_ai.output.messages")
            .unwrap()
            .contains("\"tool_call\"")
    );
    assert!(
        attr(delegate, "gen_ai.tool.call.arguments")
            .unwrap()
            .contains("Say hello to the boss")
    );
    assert!(
        attr(delegate, "gen_ai.tool.call.result")
            .unwrap()
            .contains("hello from the helper")
    );
}

#[tokio::test]
async fn content_is_never_captured_for_a_private_run() {
    let fake = FakeModel::start().await;
    fake.handler(|body| {
        let answered = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        Reply::ok(if answered {
            openai_text("SECRET-ANSWER")
        } else {
            openai_tools(&[("c1", "current_time", r#"{"timezone": "UTC"}"#)])
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let store = steward::store::SqliteStore::open(&dir.path().join("s.db"))
        .await
        .unwrap();
    let runner = steward::run::Runner::builder(Arc::new(store))
        .providers(providers(Some(&fake), None))
        .tools(builtin_registry())
        .tokens(tokens())
        .capture_content(true)
        .build();
    let agent = steward::config::AgentConfig::new(
        "a",
        steward::types::ModelRef::parse("openai/gpt-4.1").unwrap(),
        "You are terse.",
        vec!["current_time".into()],
    );
    for private in [false, true] {
        let (captured, guard) = capture_spans();
        let mut trigger =
            steward::triggers::TriggerEvent::from_cli(serde_json::json!({"text": "SECRET-QUESTION"}));
        trigger.private = private;
        let outcome = runner
            .run(&agent, &trigger, None, tokio_util::sync::CancellationToken::new())
            .await
            .unwrap();
        drop(guard);
        assert_eq!(outcome.termination.as_str(), "completed");
        let spans = captured.lock().unwrap().clone();
        let content_keys = [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ];
        let with_content: Vec<&String> = spans
            .iter()
            .filter(|(_, f)| content_keys.iter().any(|k| f.contains_key(*k)))
            .map(|(n, _)| n)
            .collect();
        let everything = format!("{spans:?}");
        if private {
            assert!(
                with_content.is_empty(),
                "private run spans carry content: {with_content:?}"
            );
            assert!(!everything.contains("SECRET"));
        } else {
            assert!(with_content.iter().any(|n| *n == "chat"), "{spans:?}");
            assert!(with_content.iter().any(|n| *n == "execute_tool"));
            assert!(everything.contains("SECRET-QUESTION") && everything.contains("SECRET-ANSWER"));
        }
    }
}

#[tokio::test]
async fn a_script_run_has_a_run_script_span_over_its_tool_calls() {
    let spans: Received = Arc::default();
    let app = axum::Router::new()
        .route("/v1/traces", post(collect))
        .with_state((spans.clone(), Arc::default()));
    let collector = serve(app).await;
    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "scripts/clock.rhai",
        "let now = tool(\"current_time\", #{ timezone: \"UTC\" });\nreply(`checked the time`);\n",
    );
    write(
        root.path(),
        "agents/clock.yaml",
        "coordinator: script\nscript: scripts/clock.rhai\ntools: [current_time]\n",
    );
    let ev = root.path().join("e.json");
    std::fs::write(&ev, r#"{"text": "what time is it"}"#).unwrap();
    let dir = root.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .args(["run", "clock", "--event", ev.to_str().unwrap()])
            .env("STEWARD_ROOT", &dir)
            .env("DATABASE_URL", format!("sqlite://{}", dir.join("s.db").display()))
            .env("RUST_LOG", "error")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let spans = spans.lock().unwrap().clone();
    let find = |name: &str| {
        spans
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no {name} span"))
            .clone()
    };
    let agent = find("invoke_agent clock");
    let script = find("run_script scripts/clock.rhai");
    let tool = find("execute_tool current_time");
    assert_eq!(attr(&agent, "steward.coordinator").as_deref(), Some("script"));
    assert_eq!(script.parent_span_id, agent.span_id);
    assert_eq!(
        tool.parent_span_id, script.span_id,
        "the script's tool calls are its children"
    );
    assert_eq!(attr(&script, "steward.tool_calls").as_deref(), Some("1"));
    assert_eq!(attr(&script, "error.type"), None);
}

/// `steward_otel_spans_dropped_total` from a running `steward serve`.
async fn dropped_spans(addr: &str) -> u64 {
    let text = steward::http::client()
        .unwrap()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("steward_otel_spans_dropped_total "))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no dropped-spans counter in\n{text}"))
}

#[tokio::test]
async fn an_unreachable_collector_drops_spans_counts_them_and_warns_once() {
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("noted")));
    let root = intake_tree();
    // Nothing listens there.
    let collector = format!("http://{}", free_local_addr());
    let addr = free_local_addr();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &addr])
        .env("STEWARD_ROOT", root.path())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", root.path().join("s.db").display()),
        )
        .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
        .env("OPENAI_API_KEY", "sk-test")
        .env("STEWARD_HOOK_INTAKE_TOKEN", "intake-token-0123456789")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &collector)
        .env("RUST_LOG", "error")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = 0;
    for round in 1..=2 {
        let body = format!("{{\"text\": \"request {round}\"}}");
        assert_eq!(
            post_hook_when_up(&addr, "intake", "intake-token-0123456789", &body).await,
            200
        );
        // The run completes whatever the collector does; its spans are then dropped.
        let mut dropped = 0;
        for _ in 0..200 {
            dropped = dropped_spans(&addr).await;
            if fake.requests().len() >= round && dropped > seen {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(fake.requests().len(), round, "the run went ahead");
        assert!(
            dropped > seen,
            "round {round}: dropped spans are counted ({dropped})"
        );
        seen = dropped;
    }
    let pid = child.id().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warnings = stderr
        .lines()
        .filter(|l| l.contains("dropped") && l.contains("span"))
        .count();
    assert_eq!(warnings, 1, "one warning a minute at most:\n{stderr}");
}
