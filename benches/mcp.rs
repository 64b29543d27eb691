//! The cost of an MCP tool call: `add` on a real MCP server (rmcp's server side) over
//! Streamable HTTP on 127.0.0.1, called through the tool registry as a run's gateway
//! calls it, against a built-in tool doing the same work. Median and p90 over 1,000
//! calls each. Run with `cargo bench --bench mcp`.

#[path = "../tests/support/mcp_demo.rs"]
mod mcp_demo;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use steward::config::mcp::{McpServer, McpTransport};
use steward::files::RunFiles;
use steward::tokens::{Encoding, TokenCounter};
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use tokio_util::sync::CancellationToken;

const CALLS: usize = 1_000;

/// The same work as a built-in tool.
struct Add(ToolSpec);

#[async_trait]
impl Tool for Add {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
        Ok(ToolOutput::text(sum.to_string()))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn summary(mut micros: Vec<f64>) -> (f64, f64) {
    micros.sort_unstable_by(f64::total_cmp);
    (micros[micros.len() / 2], micros[micros.len() * 9 / 10])
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let service = StreamableHttpService::new(
        || Ok(mcp_demo::Demo::new()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    // Small writes go out at once (no Nagle wait against the client's delayed ACK), as
    // a production server would set.
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(
        async move { axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await },
    );

    let servers: BTreeMap<String, McpServer> = [(
        "bench".to_string(),
        McpServer {
            name: "bench".into(),
            transport: McpTransport::Http {
                url,
                bearer_env: None,
                headers_env: BTreeMap::new(),
            },
            timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
        },
    )]
    .into();
    let mut reg = ToolRegistry::core(Default::default());
    let (hub, warnings) =
        steward::integrations::mcp::connect_all(&servers, &|_| None, reg.names(), None, None).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    reg.add_source(hub);
    reg.register(Arc::new(Add(ToolSpec {
        name: "add".into(),
        description: "Add two integers".into(),
        parameters: json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        effect: Effect::ReadOnly,
    })));
    let files = Arc::new(RunFiles::new(
        "bench",
        None,
        Arc::new(TokenCounter::new()),
        Encoding::O200k,
        10_000,
    ));
    let ctx = ToolCtx {
        run_id: "bench".into(),
        agent: "bench".into(),
        call_id: "c".into(),
        cancel: CancellationToken::new(),
        files,
        skills: None,
        subagents: None,
        nested: None,
        mock: false,
        search: Default::default(),
        network: Default::default(),
    };
    let allowed = vec!["add".to_string(), "bench__add".to_string()];
    let mut figures = Vec::new();
    for name in ["add", "bench__add"] {
        // Warm up the connection and the allocator.
        for i in 0..50 {
            reg.invoke(&allowed, name, &json!({"a": i, "b": 1}).to_string(), &ctx, false)
                .await
                .unwrap();
        }
        let mut micros = Vec::with_capacity(CALLS);
        for i in 0..CALLS {
            let args = json!({"a": i, "b": 2}).to_string();
            let started = Instant::now();
            let out = reg.invoke(&allowed, name, &args, &ctx, false).await.unwrap();
            micros.push(started.elapsed().as_secs_f64() * 1e6);
            assert_eq!(out.model_text(), (i + 2).to_string());
        }
        figures.push((name, summary(micros)));
    }
    for (name, (median, p90)) in &figures {
        println!("{name:<12} {CALLS} calls: median {median:.1} µs, p90 {p90:.1} µs");
    }
    let (builtin, mcp) = (figures[0].1.0, figures[1].1.0);
    println!(
        "an MCP call costs {:.1} µs more than the built-in one (median)",
        mcp - builtin
    );
}
