//! A small MCP server over stdio, built with rmcp's server side: the stdio server the
//! tests start as a child process (`tests/mcp.rs`). One tool, `add`.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// First number
    a: i64,
    /// Second number
    b: i64,
}

#[derive(Clone)]
struct Demo {
    tool_router: ToolRouter<Demo>,
}

#[tool_router]
impl Demo {
    fn new() -> Self {
        Demo {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Add two integers")]
    async fn add(
        &self,
        Parameters(AddArgs { a, b }): Parameters<AddArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        // The child sees only the variables its file names: say which it got.
        let seen = std::env::var("DEMO_GREETING").unwrap_or_default();
        let leaked = std::env::var("OPENAI_API_KEY").is_ok();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{} ({seen}; steward's keys visible: {leaked})",
            a + b
        ))]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("stdio-demo", "0.1.0"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let running = Demo::new().serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
