//! The demo MCP server (`tests/support/mcp_demo.rs`) over stdio: the stdio server the
//! tests start as a child process (`tests/mcp.rs`).

#[path = "../tests/support/mcp_demo.rs"]
mod mcp_demo;

use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let running = mcp_demo::Demo::new().serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
