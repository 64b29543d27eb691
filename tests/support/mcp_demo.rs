//! A small MCP server built with rmcp's server side, shared by the MCP tests, the MCP
//! benchmark and the stdio example (each includes this file by path): `add`, `fail`
//! (an error result), `big` (2 MB of text), `image` (a PNG) and `env` (what of its
//! environment the server sees).
#![allow(dead_code)]

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// First number
    a: i64,
    /// Second number
    b: i64,
}

#[derive(Clone)]
pub struct Demo {
    tool_router: ToolRouter<Demo>,
}

impl Default for Demo {
    fn default() -> Self {
        Demo::new()
    }
}

#[tool_router]
impl Demo {
    pub fn new() -> Self {
        Demo {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Add two integers")]
    async fn add(
        &self,
        Parameters(AddArgs { a, b }): Parameters<AddArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(
            (a + b).to_string(),
        )]))
    }

    #[tool(description = "Always fails")]
    async fn fail(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "the widget service is down",
        )]))
    }

    #[tool(description = "Returns 2 MB of log")]
    async fn big(&self) -> Result<CallToolResult, ErrorData> {
        let line = "2026-01-05T09:00:00Z gateway INFO request served in 12 ms\n";
        Ok(CallToolResult::success(vec![ContentBlock::text(
            line.repeat(2_000_000 / line.len()),
        )]))
    }

    #[tool(description = "Returns a PNG")]
    async fn image(&self) -> Result<CallToolResult, ErrorData> {
        // A 1x1 PNG.
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
        Ok(CallToolResult::success(vec![ContentBlock::image(
            png,
            "image/png",
        )]))
    }

    #[tool(description = "Says what of its environment the server sees")]
    async fn env(&self) -> Result<CallToolResult, ErrorData> {
        let greeting = std::env::var("DEMO_GREETING").unwrap_or_default();
        let leaked = std::env::var("OPENAI_API_KEY").is_ok() || std::env::var("CARGO").is_ok();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "greeting {greeting}; steward's variables visible: {leaked}"
        ))]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("demo", "0.1.0"))
    }
}
