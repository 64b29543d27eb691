//! A small MCP server built with rmcp's server side, shared by the MCP tests, the MCP
//! benchmark and the stdio example (each includes this file by path): `add`, `fail`
//! (an error result), `big` (2 MB of text), `image` (a PNG), `env` (what of its
//! environment the server sees), `snoop` (its parent's environment, the host's files,
//! the network), and `grow`, after which `grown` appears and the
//! server says its tool list changed.
#![allow(dead_code)]

use std::sync::{Arc, RwLock};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// First number
    a: i64,
    /// Second number
    b: i64,
}

/// The tools on offer, shared by every session of one server (so `grow` in one session
/// changes the list all of them see).
pub type Shared = Arc<RwLock<ToolRouter<Demo>>>;

/// The descriptors past the standard three that the stdio server was started with,
/// taken before its runtime opens its own (`examples/mcp_stdio_demo.rs`).
pub static STARTED_WITH: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Where descriptor `fd` of this process leads.
fn descriptor_target(fd: &str) -> String {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// This process's descriptors past the standard three that lead to a file or a socket
/// (the listing's own descriptor aside), comma-separated.
pub fn held_descriptors() -> String {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|fd| fd.parse::<u32>().is_ok_and(|n| n > 2))
                .map(|fd| descriptor_target(&fd))
                .filter(|t| (t.starts_with('/') && !t.starts_with("/proc/")) || t.starts_with("socket:"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

#[derive(Clone)]
pub struct Demo {
    router: Shared,
}

impl Default for Demo {
    fn default() -> Self {
        Demo::new()
    }
}

impl Demo {
    /// A server whose `grown` tool appears only after `grow` is called.
    pub fn new() -> Self {
        Demo::sharing(Demo::tools())
    }

    /// The tools one server's sessions share.
    pub fn tools() -> Shared {
        Arc::new(RwLock::new(Self::tool_router().with_disabled("grown")))
    }

    pub fn sharing(router: Shared) -> Self {
        Demo { router }
    }

    fn router(&self) -> ToolRouter<Demo> {
        self.router.read().unwrap().clone()
    }
}

#[tool_router]
impl Demo {
    #[tool(description = "Adds the tool 'grown' and says the tool list changed")]
    async fn grow(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.router.write().unwrap().enable_route("grown");
        let peer = ctx.peer.clone();
        tokio::spawn(async move {
            let _ = peer.notify_tool_list_changed().await;
        });
        Ok(CallToolResult::success(vec![ContentBlock::text("grown")]))
    }

    #[tool(description = "Appears after grow")]
    async fn grown(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text("I am new")]))
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

    #[tool(description = "Returns a report as an embedded resource")]
    async fn report(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![
            ContentBlock::text("The Q3 report:"),
            ContentBlock::embedded_text("file:///reports/q3.md", "# Q3\n\nRevenue up 12%.\n"),
        ]))
    }

    #[tool(description = "Says what of its environment the server sees")]
    async fn env(&self) -> Result<CallToolResult, ErrorData> {
        let greeting = std::env::var("DEMO_GREETING").unwrap_or_default();
        let leaked = std::env::var("OPENAI_API_KEY").is_ok() || std::env::var("CARGO").is_ok();
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "greeting {greeting}; steward's variables visible: {leaked}"
        ))]))
    }

    #[tool(description = "Tries to read its parent's environment and the host's files")]
    async fn snoop(&self) -> Result<CallToolResult, ErrorData> {
        let parent = std::os::unix::process::parent_id();
        let environ = std::fs::read(format!("/proc/{parent}/environ")).unwrap_or_default();
        let seen = String::from_utf8_lossy(&environ);
        let leaked = seen.contains("CARGO") || seen.contains("DEMO_MCP_TOKEN") || seen.contains("PATH=");
        let home = std::fs::read_dir("/root").is_ok()
            || std::fs::read_dir("/home").is_ok_and(|mut d| d.next().is_some());
        let port = std::env::var("DEMO_PORT")
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(9);
        let net = std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            std::time::Duration::from_millis(300),
        );
        let net = match net {
            Ok(_) => "connected".to_string(),
            Err(e) => format!("{:?}", e.kind()),
        };
        eprintln!("snoop: this line goes to steward's log through a pipe");
        // What its standard error is (steward's log file would be a path), and which
        // descriptors past the standard three it was started with (inherited ones).
        let stderr = match descriptor_target("2") {
            t if t.starts_with("pipe:") => "pipe".to_string(),
            t => t,
        };
        let held = STARTED_WITH.get().cloned().unwrap_or_else(held_descriptors);
        let held = if held.is_empty() { "none".to_string() } else { held };
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "parent environment leaked: {leaked}; host home visible: {home}; network: {net}; stderr: {stderr}; inherited descriptors: {held}"
        ))]))
    }
}

#[tool_handler(router = self.router())]
impl ServerHandler for Demo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("demo", "0.1.0"))
    }
}
