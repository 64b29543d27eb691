//! One tool of an MCP server, as a steward tool: a live call goes to the server; a mock
//! call answers from the server's cassette, or goes to the server and is recorded,
//! depending on how the tools were set up ([`Recorded`]).

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::RoleClient;
use rmcp::model::CallToolRequestParams;
use rmcp::service::Peer;
use serde_json::Value;

use super::cassette::McpCassette;
use crate::config::mcp::McpServer;
use crate::tools::{Tool, ToolCtx, ToolError, ToolResult, ToolSpec};

/// What MCP tools do with recordings (`evals/mcp/<server>.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recording {
    /// Mock calls answer from the recording; live calls go to the server.
    Replay,
    /// Every call, mock or live, goes to the server and its result is recorded
    /// (`steward eval --record`).
    Record,
    /// Every call goes to the server and nothing is recorded (`steward eval --live`).
    Live,
}

/// One tool of a server. `peer` is `None` when the tool comes from a recording alone
/// (the server is not reached at all).
pub(super) struct McpTool {
    pub spec: ToolSpec,
    pub remote: String,
    pub server: McpServer,
    pub peer: Option<Peer<RoleClient>>,
    pub cassette: Option<Arc<McpCassette>>,
    pub recording: Recording,
    /// The sandboxed server's egress proxy, once it runs.
    pub network: super::ServerNet,
}

impl McpTool {
    /// The server's answer to a real call.
    async fn ask(
        &self,
        peer: &Peer<RoleClient>,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<rmcp::model::CallToolResult, ToolError> {
        let server = &self.server;
        let request = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        tokio::time::timeout(server.timeout, peer.call_tool(request))
            .await
            .map_err(|_| {
                ToolError::Model(format!(
                    "MCP server '{}' did not answer within {}",
                    server.name,
                    crate::types::duration::format_duration(server.timeout)
                ))
            })?
            .map_err(|e| ToolError::Model(format!("MCP server '{}': {e}", server.name)))
    }

    /// The recorded answer to this call, or a "no mock recorded" tool error that says
    /// how to get one.
    async fn replay(&self, ctx: &ToolCtx, arguments: serde_json::Map<String, Value>) -> ToolResult {
        let name = &self.spec.name;
        let how = format!(
            "record it with `steward eval --record` while the server is reachable, or give the eval case a mock (mocks: {{{name}: {{result: ...}}}})"
        );
        let Some(cassette) = &self.cassette else {
            return Err(ToolError::Model(format!(
                "no mock recorded for MCP tool {name}: {how}"
            )));
        };
        match cassette.find(&self.remote, &Value::Object(arguments)) {
            Ok(answer) => super::result::output(ctx, &self.server.name, name, &answer).await,
            Err(miss) => Err(ToolError::Model(format!(
                "no mock recorded for MCP tool {name} {miss}; {how}"
            ))),
        }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let arguments = object(args)?;
        let Some(peer) = &self.peer else {
            // Not connected: only the recording can answer.
            return self.replay(ctx, arguments).await;
        };
        // The arguments are kept only when the call is recorded.
        let recorder = self
            .cassette
            .as_ref()
            .filter(|_| self.recording == Recording::Record);
        let kept = recorder.map(|_| arguments.clone());
        let answer = self.ask(peer, arguments).await;
        // The server's requests that ended during the call are the call's.
        if let Some(proxy) = self.network.get() {
            ctx.network
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(proxy.take_records());
        }
        let answer = answer?;
        if let (Some(cassette), Some(arguments)) = (recorder, kept) {
            cassette.add(&self.remote, Value::Object(arguments), answer.clone());
        }
        super::result::output(ctx, &self.server.name, &self.spec.name, &answer).await
    }

    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        match self.recording {
            Recording::Record | Recording::Live if self.peer.is_some() => self.call(ctx, args).await,
            _ => self.replay(ctx, object(args)?).await,
        }
    }
}

/// A call's arguments as the object MCP sends; no arguments is an empty object.
fn object(args: Value) -> Result<serde_json::Map<String, Value>, ToolError> {
    match args {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Default::default()),
        other => Err(ToolError::Model(format!(
            "arguments must be an object, not {other}"
        ))),
    }
}
