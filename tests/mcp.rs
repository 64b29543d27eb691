//! MCP servers as tools, against a real MCP server built with `rmcp`'s server side and
//! served over Streamable HTTP on 127.0.0.1: tools listed and called through the run's
//! gateway, the grant enforced, large and image results as files, error results as tool
//! errors, a server down at start skipped, a server gone mid-run a tool error.

mod support;

#[path = "support/mcp_demo.rs"]
mod mcp_demo;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::json;
use steward::config::mcp::{McpServer, McpTransport};
use steward::config::{AgentConfig, Config, Known};
use steward::tools::ToolRegistry;
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::*;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "mcp-test-token";

/// The demo server behind a bearer-token check; its URL and the task serving it.
async fn demo_server() -> (String, tokio::task::JoinHandle<()>) {
    let shared = mcp_demo::Demo::tools();
    let service = StreamableHttpService::new(
        move || Ok(mcp_demo::Demo::sharing(shared.clone())),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            |req: axum::extract::Request, next: axum::middleware::Next| async move {
                let ok = req
                    .headers()
                    .get("authorization")
                    .is_some_and(|v| v == format!("Bearer {TOKEN}").as_str());
                if !ok {
                    return axum::http::StatusCode::UNAUTHORIZED.into_response();
                }
                next.run(req).await
            },
        ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, task)
}

use axum::response::IntoResponse;

fn server(url: &str) -> BTreeMap<String, McpServer> {
    [(
        "demo".to_string(),
        McpServer {
            name: "demo".into(),
            transport: McpTransport::Http {
                url: url.into(),
                bearer_env: Some("DEMO_MCP_TOKEN".into()),
                headers_env: BTreeMap::new(),
            },
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        },
    )]
    .into()
}

/// The port of a listener on the host, for the stdio server to try to reach.
static HOST_PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();

fn var(name: &str) -> Option<String> {
    match name {
        "DEMO_MCP_TOKEN" => Some(TOKEN.to_string()),
        "DEMO_PORT" => HOST_PORT.get().map(|p| p.to_string()),
        _ => None,
    }
}

async fn registry_with(servers: &BTreeMap<String, McpServer>) -> (ToolRegistry, Vec<String>) {
    let mut reg = ToolRegistry::core(Default::default());
    let (hub, warnings) = steward::integrations::mcp::connect_all(
        servers,
        &var,
        reg.names(),
        None,
        Some(steward::integrations::mcp::Jail {
            sandbox: &jail(),
            egress: &Default::default(),
        }),
    )
    .await;
    reg.add_source(hub);
    (reg, warnings)
}

fn jail() -> steward::sandbox::process::ProcessSandbox {
    let jail =
        steward::sandbox::process::ProcessSandbox::detect(std::env::temp_dir().join("steward-mcp-test"));
    if let Some(why) = jail.unavailable() {
        panic!("the sandbox is unavailable ({why}); install bubblewrap (.ci/deps does)");
    }
    jail
}

fn agent(tools: &[&str]) -> AgentConfig {
    AgentConfig::new(
        "operator",
        ModelRef::parse("openai/gpt-4.1").unwrap(),
        "You operate things.",
        tools.iter().map(|t| t.to_string()).collect(),
    )
}

/// A server answering with a redirect is not followed: its token headers would go to
/// wherever it points. The server is skipped with a warning; the target hears nothing.
#[tokio::test]
async fn an_mcp_servers_redirect_is_not_followed() {
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    let target = axum::Router::new().fallback(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { "caught" }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = format!("http://{}/collect", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, target).await.unwrap() });
    let to = elsewhere.clone();
    let redirector = axum::Router::new().fallback(move || {
        let to = to.clone();
        async move {
            (
                axum::http::StatusCode::TEMPORARY_REDIRECT,
                [(axum::http::header::LOCATION, to)],
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, redirector).await.unwrap() });
    let mut servers = server(&url);
    if let Some(McpServer {
        transport: McpTransport::Http { headers_env, .. },
        ..
    }) = servers.get_mut("demo")
    {
        headers_env.insert("X-Api-Key".into(), "DEMO_MCP_TOKEN".into());
    }
    let (reg, warnings) = registry_with(&servers).await;
    assert!(!reg.names().iter().any(|n| n.starts_with("demo__")));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
}

/// A `STEWARD_SECRET_*` token named by a url server goes only to the hosts its
/// operator bound it to (`_HOSTS`): unbound, or bound elsewhere, the server is skipped
/// with a warning saying why, and it hears nothing.
#[tokio::test]
async fn a_steward_secret_token_goes_only_to_its_bound_hosts() {
    let (url, _server) = demo_server().await;
    let port = url::Url::parse(&url).unwrap().port().unwrap();
    let mut servers = server(&url);
    if let Some(McpServer {
        transport: McpTransport::Http { bearer_env, .. },
        ..
    }) = servers.get_mut("demo")
    {
        *bearer_env = Some("STEWARD_SECRET_DEMO".into());
    }
    for (bound, refused) in [
        (None, "set STEWARD_SECRET_DEMO_HOSTS"),
        (Some("evil.example".to_string()), "may go only to evil.example"),
        (Some(format!("127.0.0.1:{port}")), ""),
    ] {
        let var = |name: &str| match name {
            "STEWARD_SECRET_DEMO" => Some(TOKEN.to_string()),
            "STEWARD_SECRET_DEMO_HOSTS" => bound.clone(),
            _ => None,
        };
        let reg = ToolRegistry::core(Default::default());
        let (hub, warnings) =
            steward::integrations::mcp::connect_all(&servers, &var, reg.names(), None, None).await;
        let tools = steward::tools::registry::ToolSource::all(hub.as_ref()).len();
        if refused.is_empty() {
            assert!(warnings.is_empty() && tools > 0, "{warnings:?}");
        } else {
            assert!(
                tools == 0 && warnings.iter().any(|w| w.contains(refused)),
                "{bound:?}: {warnings:?}"
            );
        }
    }
}

#[tokio::test]
async fn an_agent_lists_and_calls_mcp_tools_through_the_gateway() {
    let (url, _server) = demo_server().await;
    let (reg, warnings) = registry_with(&server(&url)).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    for name in ["demo__add", "demo__fail", "demo__big", "demo__image"] {
        assert!(
            reg.names().contains(name),
            "{name} missing from {:?}",
            reg.names()
        );
    }
    let add = reg.get("demo__add").unwrap();
    assert_eq!(add.spec().parameters["properties"]["a"]["type"], "integer");

    let trigger = TriggerEvent::from_cli(json!({"text": "go"}));
    let OneRound {
        fake,
        out,
        runner,
        dir: _dir,
        ..
    } = one_round(
        reg,
        &agent(&["mcp:demo"]),
        &trigger,
        &[
            ("c1", "demo__add", r#"{"a": 2, "b": 3}"#),
            ("c2", "demo__fail", "{}"),
            ("c3", "demo__big", "{}"),
            ("c4", "demo__image", "{}"),
            ("c5", "demo__report", "{}"),
        ],
        "done",
    )
    .await;
    assert_eq!(out.final_text.as_deref(), Some("done"));
    // The model was offered the server's tools under their steward names.
    let offered: Vec<String> = fake.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(offered.contains(&"demo__add".to_string()), "{offered:?}");
    let r = tool_results(&fake);
    assert_eq!(r["c1"], "5");
    assert_eq!(r["c2"], "error: the widget service is down");
    assert!(
        r["c3"].contains("The whole text is file f_"),
        "{}",
        &r["c3"][r["c3"].len().saturating_sub(400)..]
    );
    assert!(r["c3"].len() < 20_000, "a preview, not 2 MB");
    assert!(
        r["c4"].contains("image/png") && r["c4"].contains("file f_"),
        "{}",
        r["c4"]
    );
    assert!(
        r["c5"]
            .starts_with("The Q3 report:\n[resource file:///reports/q3.md (text/plain, 22 bytes), file f_"),
        "{}",
        r["c5"]
    );
    // Recorded like any call.
    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let calls: Vec<&str> = events
        .iter()
        .filter(|e| e.kind == "tool_call")
        .map(|e| e.data["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        calls,
        [
            "demo__add",
            "demo__fail",
            "demo__big",
            "demo__image",
            "demo__report"
        ]
    );
}

#[tokio::test]
async fn a_single_granted_tool_is_all_the_agent_gets() {
    let (url, _server) = demo_server().await;
    let (reg, _) = registry_with(&server(&url)).await;
    let trigger = TriggerEvent::from_cli(json!({"text": "go"}));
    let OneRound { fake, dir: _dir, .. } = one_round(
        reg,
        &agent(&["mcp:demo/add"]),
        &trigger,
        &[
            ("c1", "demo__fail", "{}"),
            ("c2", "demo__add", r#"{"a": 1, "b": 1}"#),
        ],
        "done",
    )
    .await;
    let offered = fake.requests()[0].body["tools"].to_string();
    assert!(
        offered.contains("demo__add") && !offered.contains("demo__fail"),
        "{offered}"
    );
    let r = tool_results(&fake);
    assert!(
        r["c1"].contains("unknown tool 'demo__fail'"),
        "refused: {}",
        r["c1"]
    );
    assert_eq!(r["c2"], "2");
}

#[tokio::test]
async fn a_server_down_at_start_is_skipped_and_one_gone_mid_run_is_a_tool_error() {
    // Down at start (nothing listens), or refusing our token: a warning each.
    let dead = server("http://127.0.0.1:9/mcp");
    let (reg, warnings) = registry_with(&dead).await;
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("MCP server 'demo':") && warnings[0].ends_with("its tools are unavailable"),
        "{warnings:?}"
    );
    assert!(!reg.names().iter().any(|n| n.starts_with("demo__")));

    let (url, server_task) = demo_server().await;
    let (reg, _) = registry_with(&server(&url)).await;
    server_task.abort();
    let _ = server_task.await;
    let trigger = TriggerEvent::from_cli(json!({"text": "go"}));
    let OneRound {
        fake, out, dir: _dir, ..
    } = one_round(
        reg,
        &agent(&["mcp:demo"]),
        &trigger,
        &[("c1", "demo__add", r#"{"a": 2, "b": 3}"#)],
        "the server is gone",
    )
    .await;
    assert_eq!(
        out.final_text.as_deref(),
        Some("the server is gone"),
        "the run went on"
    );
    let r = tool_results(&fake);
    assert!(r["c1"].starts_with("error: MCP server 'demo'"), "{}", r["c1"]);
}

#[test]
fn mcp_files_and_entries_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You operate things.");
    write(
        root,
        "mcp/demo.yaml",
        "url: https://mcp.example.com/mcp\nbearer_env: DEMO_MCP_TOKEN\n",
    );
    write(
        root,
        "mcp/bad.yaml",
        "url: https://mcp.example.com/mcp\nbearer_env: ghp_literalsecret\n",
    );
    write(root, "mcp/both.yaml", "url: https://x/mcp\ncommand: x\n");
    write(
        root,
        "mcp/leaky.yaml",
        "command: /usr/bin/true\nenv: {T: STEWARD_SECRET_GH}\n",
    );
    write(
        root,
        "agents/operator.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [mcp:demo, mcp:nowhere/search]\n",
    );
    let err = Config::load(
        root,
        &Known {
            tools: Default::default(),
            skills: Default::default(),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("mcp/bad.yaml:2:") && err.contains("not an environment variable name"),
        "{err}"
    );
    assert!(
        err.contains("mcp/both.yaml:1:1: an MCP server has either url"),
        "{err}"
    );
    assert!(
        err.contains("mcp/leaky.yaml:2:") && err.contains("would give the server the secret itself"),
        "{err}"
    );
    assert!(
        err.contains("agents/operator.yaml:3:") && err.contains("unknown MCP server 'nowhere'"),
        "{err}"
    );
    assert!(!err.contains("mcp:demo,"), "{err}");
}

#[tokio::test]
async fn a_script_calls_an_mcp_tool_through_the_gateway() {
    let (url, _server) = demo_server().await;
    let (reg, _) = registry_with(&server(&url)).await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "mcp/demo.yaml",
        &format!("url: {url}\nbearer_env: DEMO_MCP_TOKEN\n"),
    );
    write(
        root,
        "scripts/sum.rhai",
        "let r = tool(\"demo__add\", #{a: 20, b: 22});\nreply(`the sum is ${r}`);\n",
    );
    write(
        root,
        "agents/summer.yaml",
        "coordinator: script\nscript: scripts/sum.rhai\ntools: [mcp:demo/add]\ntriggers:\n  - webhook: {name: sum}\n",
    );
    let config = Config::load(
        root,
        &Known {
            tools: reg.names(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let fake = FakeModel::start().await;
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let agent = config.agent("summer").unwrap();
    let out = runner
        .run(
            &agent,
            &TriggerEvent::from_cli(json!({"text": "go"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.final_text.as_deref(), Some("the sum is 42"), "{out:?}");
}

/// The example stdio server, built by `cargo test` next to the test binaries.
fn stdio_demo() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().unwrap().parent().unwrap();
    debug.join("examples").join("mcp_stdio_demo")
}

fn stdio_server(sandbox: Option<steward::config::mcp::StdioSandbox>) -> BTreeMap<String, McpServer> {
    let command = stdio_demo();
    assert!(
        command.exists(),
        "{} (cargo test builds the examples)",
        command.display()
    );
    [(
        "local".to_string(),
        McpServer {
            name: "local".into(),
            transport: McpTransport::Stdio {
                command: command.display().to_string(),
                args: Vec::new(),
                env: [
                    ("DEMO_GREETING".to_string(), "DEMO_MCP_TOKEN".to_string()),
                    ("DEMO_PORT".to_string(), "DEMO_PORT".to_string()),
                ]
                .into(),
                sandbox,
            },
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
        },
    )]
    .into()
}

/// As `mcp/local.yaml` with `command:` the demo's path would be sandboxed: its folder
/// at `/server`.
fn demo_sandbox() -> steward::config::mcp::StdioSandbox {
    let command = stdio_demo();
    steward::config::mcp::StdioSandbox {
        dir: command.parent().map(|p| p.to_path_buf()),
        program: format!("/server/{}", command.file_name().unwrap().to_string_lossy()),
        egress: None,
    }
}

#[tokio::test]
async fn a_stdio_server_runs_sandboxed_with_only_its_named_environment() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    HOST_PORT.get_or_init(|| listener.local_addr().unwrap().port());
    let servers = stdio_server(Some(demo_sandbox()));
    let (reg, warnings) = registry_with(&servers).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    let trigger = TriggerEvent::from_cli(json!({"text": "go"}));
    let OneRound { fake, dir: _dir, .. } = one_round(
        reg,
        &agent(&["mcp:local"]),
        &trigger,
        &[("c1", "local__env", "{}"), ("c2", "local__snoop", "{}")],
        "done",
    )
    .await;
    let r = tool_results(&fake);
    assert_eq!(
        r["c1"],
        format!("greeting {TOKEN}; steward's variables visible: false")
    );
    // Its parent inside the sandbox is bubblewrap's init, started from an empty
    // environment; the host's files and network are out of reach.
    assert_eq!(
        r["c2"],
        "parent environment leaked: false; host home visible: false; network: ConnectionRefused; stderr: pipe; inherited descriptors: none"
    );

    // Outside the sandbox (`sandbox: false`), the same server reads steward's
    // environment from /proc and reaches the host's port: what the sandbox prevents.
    let (reg, warnings) = registry_with(&stdio_server(None)).await;
    assert!(warnings.is_empty(), "{warnings:?}");
    let OneRound { fake, dir: _dir, .. } = one_round(
        reg,
        &agent(&["mcp:local"]),
        &trigger,
        &[("c2", "local__snoop", "{}")],
        "done",
    )
    .await;
    let r = tool_results(&fake);
    assert!(r["c2"].contains("parent environment leaked: true"), "{}", r["c2"]);
    assert!(
        r["c2"].ends_with("network: connected") || r["c2"].contains("connected"),
        "{}",
        r["c2"]
    );

    // A command that is not there: a warning naming the server, not a failed start.
    let mut missing = servers.clone();
    if let Some(s) = missing.get_mut("local") {
        s.transport = McpTransport::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            sandbox: None,
        };
    }
    let (_, warnings) = registry_with(&missing).await;
    assert!(
        warnings[0].starts_with("MCP server 'local': cannot start /nonexistent/mcp-server"),
        "{warnings:?}"
    );
}

#[test]
fn approval_gates_one_mcp_tool_not_a_whole_server() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You operate things.");
    write(root, "mcp/demo.yaml", "url: https://mcp.example.com/mcp\n");
    write(
        root,
        "agents/gated.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [mcp:demo, {name: mcp:demo/add, approval: required}]\n",
    );
    let config = Config::load(
        root,
        &Known {
            tools: Default::default(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"));
    assert!(
        config
            .agent("gated")
            .unwrap()
            .approval
            .tools
            .contains("demo__add")
    );
    write(
        root,
        "agents/gated.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [{name: mcp:demo, approval: required}]\n",
    );
    let err = Config::load(
        root,
        &Known {
            tools: Default::default(),
            skills: Default::default(),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("applies to one MCP tool"), "{err}");
}

#[tokio::test]
async fn a_server_that_hangs_while_connecting_is_skipped_after_its_timeout() {
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let _hold = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            open.push(tcp);
        }
    });
    let mut servers = server(&url);
    if let Some(s) = servers.get_mut("demo") {
        s.connect_timeout = Duration::from_millis(500);
    }
    let started = std::time::Instant::now();
    let (reg, warnings) = registry_with(&servers).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("MCP server 'demo': no answer within 500ms while connecting"),
        "{warnings:?}"
    );
    assert!(!reg.names().iter().any(|n| n.starts_with("demo__")));
}

#[tokio::test]
async fn a_new_tool_is_picked_up_when_the_server_says_its_list_changed() {
    let (url, _server) = demo_server().await;
    let (reg, _) = registry_with(&server(&url)).await;
    assert!(!reg.names().contains("demo__grown"));
    let tools = Arc::new(reg);
    let files = Arc::new(steward::files::RunFiles::new(
        "r",
        None,
        tokens(),
        steward::tokens::Encoding::O200k,
        10_000,
    ));
    let ctx = steward::tools::ToolCtx {
        run_id: "r".into(),
        agent: "operator".into(),
        call_id: "c1".into(),
        cancel: CancellationToken::new(),
        files,
        skills: None,
        subagents: None,
        nested: None,
        mock: false,
        search: Default::default(),
        network: Default::default(),
    };
    let allowed = vec!["demo__grow".to_string(), "demo__grown".to_string()];
    let out = tools
        .invoke(&allowed, "demo__grow", "{}", &ctx, false)
        .await
        .unwrap();
    assert_eq!(out.model_text(), "grown");
    // The notification arrives, the list is read again, and the new tool is there.
    for _ in 0..100 {
        if tools.names().contains("demo__grown") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = tools
        .invoke(&allowed, "demo__grown", "{}", &ctx, false)
        .await
        .unwrap();
    assert_eq!(out.model_text(), "I am new");
}

/// The operator adds the two numbers of "Add X and Y" with the demo server's `add`,
/// then answers with what the tool said.
fn adding_model(fake: &FakeModel) {
    fake.handler(|body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        if let Some(result) = messages.iter().find(|m| m["role"] == "tool") {
            return Reply::ok(openai_text(&format!(
                "The tool said: {}",
                result["content"].as_str().unwrap_or_default()
            )));
        }
        let asked = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .map(|m| m["content"].to_string())
            .unwrap_or_default();
        let numbers: Vec<i64> = asked
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        let args = json!({"a": numbers[0], "b": numbers[1]}).to_string();
        Reply::ok(openai_tools(&[("c1", "demo__add", &args)]))
    });
}

#[tokio::test]
async fn mcp_tools_are_recorded_for_evals_and_replayed_without_the_server() {
    let (url, server_task) = demo_server().await;
    let fake = FakeModel::start().await;
    adding_model(&fake);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "prompts/operator.md",
        "You add numbers with the demo server.",
    );
    write(
        root,
        "agents/operator.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/operator.md\ntools: [mcp:demo]\n",
    );
    write(
        root,
        "mcp/demo.yaml",
        &format!("url: {url}\nbearer_env: DEMO_MCP_TOKEN\n"),
    );
    write(
        root,
        "evals/operator/add.yaml",
        "description: Adds with the server.\ntrigger:\n  text: Add 2 and 3\nexpect:\n  tools_called: [{ name: demo__add, args: { a: 2, b: 3 } }]\n  reply: { contains: [\"The tool said: 5\"] }\n",
    );
    write(
        root,
        "evals/operator/mocked.yaml",
        "description: The case's own mock wins over the server.\ntrigger:\n  text: Add 40 and 2\nmocks:\n  demo__add: { result: \"42 (mocked)\" }\nexpect:\n  reply: { contains: [\"42 (mocked)\"] }\n",
    );
    let base = format!("{}/v1", fake.url);
    let live = [
        ("OPENAI_BASE_URL", base.as_str()),
        ("OPENAI_API_KEY", "sk-test"),
        ("DEMO_MCP_TOKEN", TOKEN),
    ];

    // Recording reaches the server: its tool list and the call's result are kept.
    let recorded = steward_in_async(root, &["eval", "--record", "--json"], &live).await;
    assert!(recorded.status.success(), "{}", output_text(&recorded));
    assert!(
        output_text(&recorded).contains("recorded evals/mcp/demo.json"),
        "{}",
        output_text(&recorded)
    );
    let cassette: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("evals/mcp/demo.json")).unwrap()).unwrap();
    let listed: Vec<&str> = cassette["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&"add") && listed.contains(&"big"), "{listed:?}");
    let calls = cassette["calls"].as_array().unwrap();
    assert_eq!(
        calls.len(),
        1,
        "the mocked case never reached the server: {calls:?}"
    );
    assert_eq!(calls[0]["tool"], "add");
    assert_eq!(calls[0]["arguments"], json!({"a": 2, "b": 3}));
    assert_eq!(calls[0]["result"]["content"][0]["text"], "5");

    // The server goes away; replays need neither it nor a key.
    server_task.abort();
    let _ = server_task.await;
    let asked = fake.requests().len();
    let replayed = steward_in_async(root, &["eval", "--json"], &[]).await;
    assert!(replayed.status.success(), "{}", output_text(&replayed));
    let report: serde_json::Value = serde_json::from_slice(&replayed.stdout).unwrap();
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["cases"].as_array().unwrap().len(), 2);
    assert_eq!(fake.requests().len(), asked, "replay never calls the model");

    // `steward run --mock-tools` answers from the recording, and says what is missing
    // for a call that was never recorded.
    let model = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let mock_run = |name: &str, text: &str| {
        let event = root.join(name);
        std::fs::write(&event, json!({ "text": text }).to_string()).unwrap();
        let event = event.to_str().unwrap().to_string();
        async move {
            steward_in_async(
                root,
                &["run", "operator", "--mock-tools", "--event", &event],
                &model,
            )
            .await
        }
    };
    let o = mock_run("same.json", "Add 2 and 3").await;
    assert!(o.status.success(), "{}", output_text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "The tool said: 5");
    let o = mock_run("other.json", "Add 7 and 8").await;
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        said.contains(r#"no mock recorded for MCP tool demo__add with arguments {"a":7,"b":8}"#)
            && said.contains(r#"only for {"a":2,"b":3}"#)
            && said.contains("steward eval --record"),
        "{}",
        output_text(&o)
    );

    // Validation knows the recorded tools: a mock of one the server never listed is
    // named with how to record it.
    let ok = steward_in_async(root, &["validate"], &[]).await;
    assert!(ok.status.success(), "{}", output_text(&ok));
    write(
        root,
        "evals/operator/unknown.yaml",
        "trigger:\n  text: hi\nmocks:\n  demo__nope: { result: x }\n",
    );
    let bad = steward_in_async(root, &["validate"], &[]).await;
    assert!(!bad.status.success());
    assert!(
        output_text(&bad).contains("mock for MCP tool 'demo__nope', which evals/mcp/demo.json does not list"),
        "{}",
        output_text(&bad)
    );
    std::fs::remove_file(root.join("evals/operator/unknown.yaml")).unwrap();

    // Without the recording, a replay says how to make one.
    std::fs::remove_file(root.join("evals/mcp/demo.json")).unwrap();
    let missing = steward_in_async(root, &["eval", "operator/add"], &[]).await;
    assert!(!missing.status.success());
    assert!(
        output_text(&missing).contains("MCP server 'demo' has no recorded tool list"),
        "{}",
        output_text(&missing)
    );
}

/// Through `steward run`: a stdio MCP server named in `mcp/` runs sandboxed by default,
/// so reading its parent's environment (`/proc/$PPID/environ`) finds nothing of
/// steward's (its keys, its PATH, cargo's variables).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steward_run_starts_a_stdio_server_in_the_sandbox() {
    let demo = stdio_demo();
    assert!(
        demo.exists(),
        "{} (cargo test builds the examples)",
        demo.display()
    );
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "prompts/p.md", "You operate things.");
    write(
        root.path(),
        "mcp/local.yaml",
        &format!("command: {}\n", demo.display()),
    );
    write(
        root.path(),
        "agents/operator.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [mcp:local]\n",
    );
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("c1", "local__snoop", "{}")])));
    fake.push(Reply::ok(openai_text("done")));
    let event = root.path().join("event.json");
    std::fs::write(&event, r#"{"text": "look around"}"#).unwrap();
    let base = format!("{}/v1", fake.url);
    let out = steward_in_async(
        root.path(),
        &["run", "operator", "--event", event.to_str().unwrap()],
        &[
            ("OPENAI_API_KEY", "sk-secret-key-for-the-test"),
            ("OPENAI_BASE_URL", &base),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", output_text(&out));
    let r = tool_results(&fake);
    assert!(
        r["c1"].starts_with("parent environment leaked: false; host home visible: false"),
        "{}",
        r["c1"]
    );
    // Through `steward run` too: its log is not the server's standard error, and
    // nothing steward holds open (the database, its sockets) reached the server.
    assert!(
        r["c1"].ends_with("stderr: pipe; inherited descriptors: none"),
        "{}",
        r["c1"]
    );
}
