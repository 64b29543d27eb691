//! The demo MCP server (`tests/support/mcp_demo.rs`) over stdio: the stdio server the
//! tests start as a child process (`tests/mcp.rs`).

#[path = "../tests/support/mcp_demo.rs"]
mod mcp_demo;

use rmcp::ServiceExt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // What it was started with, before its runtime opens descriptors of its own.
    let _ = mcp_demo::STARTED_WITH.set(mcp_demo::held_descriptors());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let running = mcp_demo::Demo::new().serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
            Ok(())
        })
}
