//! MCP servers as tools: steward connects to each server of `mcp/` when it starts
//! (Streamable HTTP or a stdio child process, with the official `rmcp` client), lists
//! its tools, and registers each as `<server>__<tool>` with the server's JSON schema.
//! Calls then go through the run's gateway like any tool (grant, caps, recording,
//! spans). A server that is down at start is skipped with a warning; a server that goes
//! away later makes its calls fail as tool errors the model reads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock, Weak};

use async_trait::async_trait;
use base64::Engine;
use rmcp::model::{CallToolRequestParams, ContentBlock, ResourceContents};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

use crate::config::mcp::{McpServer, McpTransport, SEPARATOR};
use crate::files::{FileSource, NewFile};
use crate::tools::registry::ToolSource;
use crate::tools::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// Every connected server's tools, by steward name; kept current when a server says its
/// list changed. The registry consults it as a [`ToolSource`].
pub struct McpHub {
    tools: RwLock<BTreeMap<String, Arc<dyn Tool>>>,
    /// Names taken by built-in tools: a server's tool of the same name is skipped.
    builtin: BTreeSet<String>,
    /// The live connections (dropping one closes it).
    running: Mutex<Vec<RunningService<RoleClient, Refresher>>>,
}

impl ToolSource for McpHub {
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    fn all(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }
}

impl McpHub {
    /// Replaces `server`'s tools with `tools`; warnings for the ones skipped.
    fn replace(&self, server: &str, tools: Vec<Arc<dyn Tool>>) -> Vec<String> {
        let prefix = format!("{server}{SEPARATOR}");
        let mut warnings = Vec::new();
        let mut all = self.tools.write().unwrap_or_else(|e| e.into_inner());
        all.retain(|name, _| !name.starts_with(&prefix));
        for t in tools {
            let name = t.spec().name.clone();
            if self.builtin.contains(&name) {
                warnings.push(format!(
                    "MCP server '{server}': tool {name} collides with a built-in tool; skipped"
                ));
            } else {
                all.insert(name, t);
            }
        }
        warnings
    }
}

/// Re-lists a server's tools when it says they changed (`notifications/tools/list_changed`).
#[derive(Clone)]
pub struct Refresher {
    hub: Weak<McpHub>,
    server: McpServer,
}

impl ClientHandler for Refresher {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        match list(&self.server, &context.peer).await {
            Ok((tools, mut warnings)) => {
                let n = tools.len();
                warnings.extend(hub.replace(&self.server.name, tools));
                for w in warnings {
                    tracing::warn!("{w}");
                }
                tracing::info!(server = %self.server.name, tools = n, "MCP server's tools refreshed");
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot refresh an MCP server's tools; keeping the old list")
            }
        }
    }
}

/// A server could not be reached or listed.
#[derive(Debug, thiserror::Error)]
#[error("MCP server '{server}': {message}")]
pub struct McpError {
    pub server: String,
    pub message: String,
}

fn fail(server: &McpServer, message: impl std::fmt::Display) -> McpError {
    McpError {
        server: server.name.clone(),
        message: message.to_string(),
    }
}

/// Connects to `server`, reading the secrets it names with `var`; `handler` hears the
/// server's notifications.
pub async fn connect(
    server: &McpServer,
    http: reqwest::Client,
    var: &dyn Fn(&str) -> Option<String>,
    handler: Refresher,
) -> Result<RunningService<RoleClient, Refresher>, McpError> {
    let needed = |name: &str| var(name).ok_or_else(|| fail(server, format!("{name} is not set")));
    let connecting = async {
        match &server.transport {
            McpTransport::Http {
                url,
                bearer_env,
                headers_env,
            } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(env) = bearer_env {
                    config = config.auth_header(needed(env)?);
                }
                let mut headers = std::collections::HashMap::new();
                for (header, env) in headers_env {
                    let name = reqwest::header::HeaderName::from_bytes(header.as_bytes())
                        .map_err(|e| fail(server, format!("header {header}: {e}")))?;
                    let value = reqwest::header::HeaderValue::from_str(&needed(env)?)
                        .map_err(|e| fail(server, format!("header {header}: {e}")))?;
                    headers.insert(name, value);
                }
                let transport =
                    StreamableHttpClientTransport::with_client(http, config.custom_headers(headers));
                handler.serve(transport).await.map_err(|e| fail(server, e))
            }
            McpTransport::Stdio { command, args, env } => {
                let mut values = BTreeMap::new();
                for (child, ours) in env {
                    values.insert(child.clone(), needed(ours)?);
                }
                let cmd = tokio::process::Command::new(command).configure(|c| {
                    // The child sees only what its file names, nothing else of steward's.
                    c.args(args).env_clear().envs(&values);
                    if let Some(path) = std::env::var_os("PATH") {
                        c.env("PATH", path);
                    }
                });
                let transport = TokioChildProcess::new(cmd)
                    .map_err(|e| fail(server, format!("cannot start {command}: {e}")))?;
                handler.serve(transport).await.map_err(|e| fail(server, e))
            }
        }
    };
    tokio::time::timeout(server.connect_timeout, connecting)
        .await
        .map_err(|_| {
            let limit = crate::types::duration::format_duration(server.connect_timeout);
            fail(server, format!("no answer within {limit} while connecting"))
        })?
}

/// A server's tools, as steward tools named `<server>__<tool>`, and a warning for each
/// tool that cannot be offered (a name or schema the model could not use).
async fn list(
    server: &McpServer,
    peer: &Peer<RoleClient>,
) -> Result<(Vec<Arc<dyn Tool>>, Vec<String>), McpError> {
    let listed = tokio::time::timeout(server.connect_timeout, peer.list_all_tools())
        .await
        .map_err(|_| fail(server, "no answer while listing tools"))?
        .map_err(|e| fail(server, e))?;
    let mut warnings = Vec::new();
    let usable = listed.into_iter().filter(|t| {
        let name_ok = !t.name.is_empty()
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let schema_ok = t.input_schema.get("type").and_then(Value::as_str) == Some("object");
        if !(name_ok && schema_ok) {
            warnings.push(format!(
                "MCP server '{}': tool '{}' has {}; skipped",
                server.name,
                t.name,
                if name_ok {
                    "an input schema that is not an object schema"
                } else {
                    "a name the model cannot call"
                }
            ));
        }
        name_ok && schema_ok
    });
    let tools = usable
        .map(|t| {
            let remote = t.name.to_string();
            let read_only = t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
            Arc::new(McpTool {
                spec: ToolSpec {
                    name: format!("{}{SEPARATOR}{remote}", server.name),
                    description: t.description.as_deref().unwrap_or_default().to_string(),
                    parameters: Value::Object((*t.input_schema).clone()),
                    // A server's word that a tool only reads is taken; anything else may
                    // change something.
                    effect: if read_only {
                        Effect::ReadOnly
                    } else {
                        Effect::SideEffecting
                    },
                },
                remote,
                server: server.clone(),
                peer: peer.clone(),
            }) as Arc<dyn Tool>
        })
        .collect();
    Ok((tools, warnings))
}

/// Connects to every server, lists its tools, and returns them as one [`McpHub`] (kept
/// current on `tools/list_changed`), with one warning per server or tool that could not
/// be used (skipped; steward starts without it).
pub async fn connect_all(
    servers: &BTreeMap<String, McpServer>,
    http: reqwest::Client,
    var: &dyn Fn(&str) -> Option<String>,
    builtin: BTreeSet<String>,
) -> (Arc<McpHub>, Vec<String>) {
    let hub = Arc::new(McpHub {
        tools: RwLock::default(),
        builtin,
        running: Mutex::default(),
    });
    let mut warnings = Vec::new();
    for server in servers.values() {
        let handler = Refresher {
            hub: Arc::downgrade(&hub),
            server: server.clone(),
        };
        let running = match connect(server, http.clone(), var, handler).await {
            Ok(r) => r,
            Err(e) => {
                warnings.push(format!("{e}; its tools are unavailable"));
                continue;
            }
        };
        match list(server, running.peer()).await {
            Ok((tools, skipped)) => {
                warnings.extend(skipped);
                warnings.extend(hub.replace(&server.name, tools));
                hub.running
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(running);
            }
            Err(e) => warnings.push(format!("{e}; its tools are unavailable")),
        }
    }
    (hub, warnings)
}

/// One tool of a connected server.
struct McpTool {
    spec: ToolSpec,
    remote: String,
    server: McpServer,
    peer: Peer<RoleClient>,
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let server = &self.server;
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => {
                return Err(ToolError::Model(format!(
                    "arguments must be an object, not {other}"
                )));
            }
        };
        let request = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        let answer = tokio::time::timeout(server.timeout, self.peer.call_tool(request))
            .await
            .map_err(|_| {
                ToolError::Model(format!(
                    "MCP server '{}' did not answer within {}",
                    server.name,
                    crate::types::duration::format_duration(server.timeout)
                ))
            })?
            .map_err(|e| ToolError::Model(format!("MCP server '{}': {e}", server.name)))?;
        let mut text = Vec::new();
        for (i, block) in answer.content.iter().enumerate() {
            match block {
                ContentBlock::Text(t) => text.push(t.text.clone()),
                ContentBlock::Image(image) => {
                    let bytes = decode(server, &image.data)?;
                    let ext = image.mime_type.rsplit('/').next().unwrap_or("bin");
                    let name = format!("{}-{}-{i}.{ext}", self.spec.name, ctx.call_id);
                    let id = keep(ctx, name, &image.mime_type, bytes).await?;
                    text.push(format!("[image {} ({}), file {id}]", i + 1, image.mime_type));
                }
                // An embedded resource (a document the server hands back) is a file too.
                ContentBlock::Resource(embedded) => {
                    let (uri, mime, bytes) = match &embedded.resource {
                        ResourceContents::TextResourceContents {
                            uri, mime_type, text, ..
                        } => (
                            uri,
                            mime_type.clone().unwrap_or_else(|| "text/plain".into()),
                            text.clone().into_bytes(),
                        ),
                        ResourceContents::BlobResourceContents {
                            uri, mime_type, blob, ..
                        } => (
                            uri,
                            mime_type
                                .clone()
                                .unwrap_or_else(|| "application/octet-stream".into()),
                            decode(server, blob)?,
                        ),
                        other => {
                            text.push(serde_json::to_string(other).unwrap_or_default());
                            continue;
                        }
                    };
                    let last = uri.rsplit('/').next().filter(|n| !n.is_empty());
                    let name = last.map_or_else(
                        || format!("{}-{}-{i}", self.spec.name, ctx.call_id),
                        str::to_string,
                    );
                    let size = bytes.len();
                    let id = keep(ctx, name, &mime, bytes).await?;
                    text.push(format!("[resource {uri} ({mime}, {size} bytes), file {id}]"));
                }
                other => text.push(serde_json::to_string(other).unwrap_or_default()),
            }
        }
        if text.is_empty()
            && let Some(structured) = &answer.structured_content
        {
            text.push(structured.to_string());
        }
        let text = text.join("\n");
        if answer.is_error == Some(true) {
            return Err(ToolError::Model(text));
        }
        Ok(ToolOutput::text(text))
    }

    async fn mock(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        Err(ToolError::Model(format!(
            "no mock recorded for MCP tool {}: give the eval case a mock for it (mocks: {{{}: {{result: ...}}}})",
            self.spec.name, self.spec.name
        )))
    }
}

/// Base64 content from `server`, decoded.
fn decode(server: &McpServer, data: &str) -> Result<Vec<u8>, ToolError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|e| {
            ToolError::Model(format!(
                "MCP server '{}' sent unreadable base64 content: {e}",
                server.name
            ))
        })
}

/// Keeps `bytes` as a virtual file of the run; its id.
async fn keep(ctx: &ToolCtx, name: String, mime: &str, bytes: Vec<u8>) -> Result<String, ToolError> {
    let file = ctx
        .files
        .add(
            NewFile {
                name,
                mime: mime.to_string(),
                content: bytes,
            },
            FileSource::ToolOutput,
            None,
        )
        .await
        .map_err(|e| ToolError::Model(format!("cannot keep the tool's file: {e}")))?;
    Ok(file.id)
}
