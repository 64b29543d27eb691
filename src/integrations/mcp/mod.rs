//! MCP servers as tools: steward connects to each server of `mcp/` when it starts
//! (Streamable HTTP or a stdio child process, with the official `rmcp` client), lists
//! its tools, and registers each as `<server>__<tool>` with the server's JSON schema.
//! Calls then go through the run's gateway like any tool (grant, caps, recording,
//! spans). A server that is down at start is skipped with a warning; a server that goes
//! away later makes its calls fail as tool errors the model reads.
//!
//! Mocks and evals use cassettes ([`cassette`]): `steward eval --record` records each
//! server's tool list and call results, and [`replay_all`] offers the same tools from
//! them alone, answering from the recorded results, without reaching any server.

pub mod cassette;
mod result;
mod tool;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};

use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::Value;

use self::cassette::McpCassette;
use self::tool::McpTool;
pub use self::tool::Recording;
use crate::config::mcp::{McpServer, McpTransport, SEPARATOR};
use crate::sandbox::process::{ProcessLimits, ProcessSandbox, ServerGuard, find_program};
use crate::tools::registry::ToolSource;
use crate::tools::{Effect, Tool, ToolSpec};

/// Where a server's recordings are and what its tools do with them.
#[derive(Clone)]
struct Binding {
    cassette: Option<Arc<McpCassette>>,
    recording: Recording,
    /// The sandboxed server's egress proxy, once it runs: each call takes the requests
    /// that ended meanwhile as its own.
    network: ServerNet,
}

/// A command server's egress proxy, set when the server starts.
pub(super) type ServerNet = Arc<std::sync::OnceLock<Arc<crate::http::proxy::Proxy>>>;

/// Where MCP cassettes live (`evals/mcp`) and what tools do with them.
#[derive(Debug, Clone)]
pub struct Recordings {
    pub dir: PathBuf,
    pub mode: Recording,
}

/// Every connected server's tools, by steward name; kept current when a server says its
/// list changed. The registry consults it as a [`ToolSource`].
pub struct McpHub {
    tools: RwLock<BTreeMap<String, Arc<dyn Tool>>>,
    /// Names taken by built-in tools: a server's tool of the same name is skipped.
    builtin: BTreeSet<String>,
    /// The live connections (dropping one closes it).
    running: Mutex<Vec<RunningService<RoleClient, Refresher>>>,
    /// The command servers' sandboxes and log readers, kept as long as the hub.
    children: Mutex<Vec<ChildGuard>>,
    /// Every server's cassette, for [`McpHub::save_recordings`].
    cassettes: Mutex<Vec<Arc<McpCassette>>>,
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
    fn new(builtin: BTreeSet<String>) -> Arc<McpHub> {
        Arc::new(McpHub {
            tools: RwLock::default(),
            builtin,
            running: Mutex::default(),
            children: Mutex::default(),
            cassettes: Mutex::default(),
        })
    }

    /// Writes every cassette that recorded something new; the files written, or the
    /// first error.
    pub fn save_recordings(&self) -> Result<Vec<PathBuf>, cassette::McpCassetteError> {
        let cassettes = self.cassettes.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut written = Vec::new();
        for c in cassettes {
            if c.save()? {
                written.push(c.file().to_path_buf());
            }
        }
        Ok(written)
    }

    /// The cassette of `server` in `recordings`, kept for saving; a corrupt one is an
    /// error (the caller warns and leaves the server out).
    fn cassette(&self, server: &str, recordings: Option<&Recordings>) -> Result<Binding, String> {
        let Some(r) = recordings else {
            return Ok(Binding {
                cassette: None,
                recording: Recording::Replay,
                network: ServerNet::default(),
            });
        };
        let c = Arc::new(McpCassette::load(&r.dir, server).map_err(|e| e.to_string())?);
        self.cassettes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(c.clone());
        Ok(Binding {
            cassette: Some(c),
            recording: r.mode,
            network: ServerNet::default(),
        })
    }

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
    binding: Binding,
}

impl ClientHandler for Refresher {
    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        match list(&self.server, &context.peer, &self.binding).await {
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

/// What a command server needs kept while it runs: its sandbox (work folder, process
/// cgroup), its egress proxy, and the task copying its stderr into the log.
pub struct ChildGuard {
    _sandbox: Option<ServerGuard>,
    proxy: Option<Arc<crate::http::proxy::Proxy>>,
    _stderr: Option<tokio_util::task::AbortOnDropHandle<()>>,
}

/// Where command servers run: the process sandbox, and what their egress proxies share
/// (the internal addresses `STEWARD_HTTP_ALLOW` opens, secret values, the CA).
#[derive(Clone, Copy)]
pub struct Jail<'a> {
    pub sandbox: &'a ProcessSandbox,
    pub egress: &'a std::sync::Arc<crate::http::proxy::EgressHub>,
}

/// Limits of a sandboxed command server: those of scripts, with room for a runtime
/// such as Node that reserves much address space.
fn server_limits() -> ProcessLimits {
    ProcessLimits {
        memory_bytes: 8 * 1024 * 1024 * 1024,
        max_processes: 64,
        ..ProcessLimits::default()
    }
}

/// Connects to `server`, reading the secrets it names with `var`; `handler` hears the
/// server's notifications. A command server runs in `jail` unless its file says
/// `sandbox: false`.
pub async fn connect(
    server: &McpServer,
    var: &dyn Fn(&str) -> Option<String>,
    handler: Refresher,
    jail: Option<Jail<'_>>,
) -> Result<(RunningService<RoleClient, Refresher>, Option<ChildGuard>), McpError> {
    let needed = |name: &str| var(name).ok_or_else(|| fail(server, format!("{name} is not set")));
    let connecting = async {
        match &server.transport {
            McpTransport::Http {
                url,
                bearer_env,
                headers_env,
            } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                // A `STEWARD_SECRET_*` token goes only to the hosts its operator bound it to.
                let parsed = url::Url::parse(url).map_err(|e| fail(server, format!("url: {e}")))?;
                let (host, port) = (
                    parsed.host_str().unwrap_or_default(),
                    parsed.port_or_known_default().unwrap_or_default(),
                );
                for env in bearer_env.iter().chain(headers_env.values()) {
                    crate::http::secrets::may_send(env, parsed.scheme(), host, port, var)
                        .map_err(|e| fail(server, e))?;
                }
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
                // A redirect is not followed: reqwest would carry the server's headers
                // (tokens other than Authorization) to wherever it points, and past
                // steward's address checks.
                let mut http = crate::http::client_builder().redirect(reqwest::redirect::Policy::none());
                // A server on this machine is reached directly: an `HTTP_PROXY` from the
                // environment would otherwise get its plain-http token.
                if crate::http::secrets::is_loopback(host) {
                    http = http.no_proxy();
                }
                let http = http.build().map_err(|e| fail(server, e))?;
                let transport =
                    StreamableHttpClientTransport::with_client(http, config.custom_headers(headers));
                Ok((handler.serve(transport).await.map_err(|e| fail(server, e))?, None))
            }
            McpTransport::Stdio {
                command,
                args,
                env,
                sandbox,
            } => {
                let mut values = BTreeMap::new();
                if let Some(secret) = env.values().find(|v| crate::http::secrets::is_secret_var(v)) {
                    return Err(fail(
                        server,
                        format!(
                            "{secret} would reach the server as its value: refused (egress.secrets gives it a placeholder)"
                        ),
                    ));
                }
                for (child, ours) in env {
                    values.insert(child.clone(), needed(ours)?);
                }
                let (cmd, jailed, proxy) = match sandbox {
                    Some(within) => {
                        let Jail {
                            sandbox: jail,
                            egress,
                        } = jail.ok_or_else(|| fail(server, "no script sandbox in this process"))?;
                        // A server with egress keeps a proxy of its own while it runs.
                        let proxy = match &within.egress {
                            Some(rules) => {
                                let socket =
                                    jail.socket_path(&format!("server-{}", uuid::Uuid::now_v7().simple()));
                                let p = crate::http::proxy::Proxy::start(
                                    &socket,
                                    rules.clone(),
                                    egress.clone(),
                                    None,
                                )
                                .map_err(|e| fail(server, format!("cannot start its egress proxy: {e}")))?;
                                Some(p)
                            }
                            None => None,
                        };
                        let program = match within.program.contains('/') {
                            true => std::path::PathBuf::from(&within.program),
                            false => find_program(&within.program).ok_or_else(|| {
                                fail(
                                    server,
                                    format!(
                                        "'{}' is not in /usr/local/bin, /usr/bin or /bin",
                                        within.program
                                    ),
                                )
                            })?,
                        };
                        let (cmd, guard) = jail
                            .server_command(
                                within.dir.as_deref(),
                                &program,
                                args,
                                &values,
                                &server_limits(),
                                proxy.as_ref().map(|p| crate::sandbox::process::Egress {
                                    socket: p.socket(),
                                    trust: p.trust_bundle(),
                                    env: p.secret_env(),
                                }),
                            )
                            .map_err(|e| {
                                fail(
                                    server,
                                    format!("{e}; `sandbox: false` in its file runs it outside the sandbox"),
                                )
                            })?;
                        (cmd, Some(guard), proxy)
                    }
                    None => {
                        let path = std::env::var_os("PATH");
                        // It and what it starts die first when memory runs out.
                        let mut cmd = crate::sandbox::process::dying_first(command, args, path.as_deref())
                            .map_err(|e| fail(server, format!("cannot start {command}: {e}")))?;
                        // The child sees only what its file names, nothing else of
                        // steward's (it runs as steward's user: `sandbox: false` is a
                        // choice to trust it).
                        cmd.env_clear().envs(&values);
                        if let Some(path) = path {
                            cmd.env("PATH", path);
                        }
                        crate::sandbox::process::inherit_only_stdio(&mut cmd);
                        (cmd, None, None)
                    }
                };
                // Its stderr is read into steward's log, line by line, never shared.
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| fail(server, format!("cannot start {command}: {e}")))?;
                let forward = stderr.map(|err| {
                    let name = server.name.clone();
                    tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
                        use tokio::io::AsyncBufReadExt;
                        let mut lines = tokio::io::BufReader::new(err).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            let line: String = line.chars().take(2000).collect();
                            // At debug: a server may echo the arguments it was called
                            // with, which can quote a private conversation.
                            tracing::debug!(server = %name, "MCP server stderr: {line}");
                        }
                    }))
                });
                let running = handler.serve(transport).await.map_err(|e| fail(server, e))?;
                Ok((
                    running,
                    Some(ChildGuard {
                        _sandbox: jailed,
                        proxy: proxy.map(Arc::new),
                        _stderr: forward,
                    }),
                ))
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
/// tool that cannot be offered. In record mode the list is recorded.
async fn list(
    server: &McpServer,
    peer: &Peer<RoleClient>,
    binding: &Binding,
) -> Result<(Vec<Arc<dyn Tool>>, Vec<String>), McpError> {
    let listed = tokio::time::timeout(server.connect_timeout, peer.list_all_tools())
        .await
        .map_err(|_| fail(server, "no answer while listing tools"))?
        .map_err(|e| fail(server, e))?;
    if binding.recording == Recording::Record
        && let Some(c) = &binding.cassette
    {
        c.set_tools(listed.clone());
    }
    Ok(tools_from(server, listed, Some(peer), binding))
}

/// `listed` as steward tools, and a warning for each tool that cannot be offered (a name
/// or schema the model could not use). Without a `peer`, the tools answer from the
/// binding's cassette alone.
fn tools_from(
    server: &McpServer,
    listed: Vec<rmcp::model::Tool>,
    peer: Option<&Peer<RoleClient>>,
    binding: &Binding,
) -> (Vec<Arc<dyn Tool>>, Vec<String>) {
    let mut warnings = Vec::new();
    let usable = listed.into_iter().filter(|t| {
        // No leading `_`: `a` + `__` + `_x` would read as server `a_`'s tool `x`. At
        // most 64 characters with the server's name (the providers' limit).
        let full = server.name.len() + SEPARATOR.len() + t.name.len();
        let name_ok = !t.name.is_empty()
            && !t.name.starts_with('_')
            && full <= MAX_TOOL_NAME
            && t.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        let schema_ok = t.input_schema.get("type").and_then(Value::as_str) == Some("object");
        // Sent with every model request of every agent granted the server.
        let schema_small = serde_json::to_vec(&*t.input_schema).map_or(0, |b| b.len()) <= MAX_SCHEMA_BYTES;
        let why = if !name_ok {
            Some(format!("a name the model cannot call (letters, digits, `_` and `-`, at most {MAX_TOOL_NAME} characters with the server's name)"))
        } else if !schema_ok {
            Some("an input schema that is not an object schema".to_string())
        } else if !schema_small {
            Some(format!("an input schema over {MAX_SCHEMA_BYTES} bytes"))
        } else {
            None
        };
        if let Some(why) = &why {
            // The name as the server gave it, cut and quoted: it is the server's text.
            let shown: String = t.name.chars().take(80).collect();
            warnings.push(format!("MCP server '{}': tool {shown:?} has {why}; skipped", server.name));
        }
        why.is_none()
    });
    let tools = usable
        .map(|t| {
            let remote = t.name.to_string();
            let read_only = t.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true);
            Arc::new(McpTool {
                spec: ToolSpec {
                    name: format!("{}{SEPARATOR}{remote}", server.name),
                    description: cut_description(t.description.as_deref().unwrap_or_default()),
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
                peer: peer.cloned(),
                cassette: binding.cassette.clone(),
                recording: binding.recording,
                network: binding.network.clone(),
            }) as Arc<dyn Tool>
        })
        .collect();
    (tools, warnings)
}

/// Longest tool name the model providers take (OpenAI: 64), the server's name included.
const MAX_TOOL_NAME: usize = 64;
/// Largest input schema a server's tool may have.
const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// Longest description kept of a server's tool (the rest is cut, marked).
const MAX_DESCRIPTION_CHARS: usize = 2_000;

/// A server's tool description, cut to [`MAX_DESCRIPTION_CHARS`]: it goes with every
/// model request of every agent granted the server.
fn cut_description(text: &str) -> String {
    match text.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        None => text.to_string(),
        Some((at, _)) => format!("{}… (cut)", &text[..at]),
    }
}

/// Connects to every server, lists its tools, and returns them as one [`McpHub`] (kept
/// current on `tools/list_changed`), with one warning per server or tool that could not
/// be used (skipped; steward starts without it). With `recordings`, mock calls answer
/// from the servers' cassettes, or are made for real and recorded, per its mode.
pub async fn connect_all(
    servers: &BTreeMap<String, McpServer>,
    var: &dyn Fn(&str) -> Option<String>,
    builtin: BTreeSet<String>,
    recordings: Option<&Recordings>,
    jail: Option<Jail<'_>>,
) -> (Arc<McpHub>, Vec<String>) {
    let hub = McpHub::new(builtin);
    let mut warnings = Vec::new();
    for server in servers.values() {
        let binding = match hub.cassette(&server.name, recordings) {
            Ok(b) => b,
            Err(e) => {
                warnings.push(format!("{e}; server '{}' is not used", server.name));
                continue;
            }
        };
        let handler = Refresher {
            hub: Arc::downgrade(&hub),
            server: server.clone(),
            binding: binding.clone(),
        };
        let running = match connect(server, var, handler, jail).await {
            Ok(r) => r,
            Err(e) => {
                warnings.push(format!("{e}; its tools are unavailable"));
                continue;
            }
        };
        let (running, child) = running;
        if let Some(proxy) = child.as_ref().and_then(|c| c.proxy.clone()) {
            let _ = binding.network.set(proxy);
        }
        match list(server, running.peer(), &binding).await {
            Ok((tools, skipped)) => {
                if let Some(child) = child {
                    hub.children.lock().unwrap_or_else(|e| e.into_inner()).push(child);
                }
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

/// Every server's tools from its cassette in `dir` alone, answering from the recorded
/// results; no server is reached. A server without a recorded tool list is a warning
/// saying how to record one, and offers no tools.
pub fn replay_all(
    servers: &BTreeMap<String, McpServer>,
    builtin: BTreeSet<String>,
    dir: &Path,
) -> (Arc<McpHub>, Vec<String>) {
    let hub = McpHub::new(builtin);
    let recordings = Recordings {
        dir: dir.to_path_buf(),
        mode: Recording::Replay,
    };
    let mut warnings = Vec::new();
    for server in servers.values() {
        let binding = match hub.cassette(&server.name, Some(&recordings)) {
            Ok(b) => b,
            Err(e) => {
                warnings.push(format!("{e}; server '{}' offers no tools", server.name));
                continue;
            }
        };
        let Some(listed) = binding.cassette.as_ref().and_then(|c| c.tools()) else {
            warnings.push(format!(
                "MCP server '{}' has no recorded tool list ({}); its tools are unavailable: record them with `steward eval --record` while the server is reachable",
                server.name,
                McpCassette::path(dir, &server.name).display()
            ));
            continue;
        };
        let (tools, skipped) = tools_from(server, listed, None, &binding);
        warnings.extend(skipped);
        warnings.extend(hub.replace(&server.name, tools));
    }
    (hub, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn a_servers_tools_are_held_to_what_a_model_request_can_carry() {
        let server = McpServer {
            name: "wiki".into(),
            transport: crate::config::mcp::McpTransport::Http {
                url: "http://127.0.0.1:1/mcp".into(),
                bearer_env: None,
                headers_env: Default::default(),
            },
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
        };
        let object = |extra: usize| {
            let mut schema = serde_json::Map::new();
            schema.insert("type".into(), json!("object"));
            schema.insert("description".into(), json!("x".repeat(extra)));
            Arc::new(schema)
        };
        let listed = vec![
            rmcp::model::Tool::new("search", "d".repeat(5_000), object(0)),
            rmcp::model::Tool::new("a".repeat(60), "too long a name", object(0)),
            rmcp::model::Tool::new("huge", "a huge schema", object(20_000)),
        ];
        let binding = Binding {
            cassette: None,
            recording: Recording::Replay,
            network: Default::default(),
        };
        let (tools, warnings) = tools_from(&server, listed, None, &binding);
        let names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
        assert_eq!(names, ["wiki__search"]);
        let description = &tools[0].spec().description;
        assert!(description.ends_with("… (cut)") && description.chars().count() < 2_100);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("at most 64 characters"), "{warnings:?}");
        assert!(
            warnings[1].contains("input schema over 16384 bytes"),
            "{warnings:?}"
        );
    }
}
