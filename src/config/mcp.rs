//! MCP servers (`mcp/<name>.yaml`): where a Model Context Protocol server lives (a
//! Streamable HTTP URL or a command run over stdio) and how long steward waits for it.
//! Secrets never sit in the file: headers and child environment name environment
//! variables, read when steward connects.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::types::duration::HumanDuration;

/// How long a call may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long connecting (and listing tools) may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Between a server's name and its tool's in the names the model sees.
pub const SEPARATOR: &str = "__";

/// One `mcp/<name>.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSpec {
    /// A Streamable HTTP endpoint (`https://…/mcp`).
    pub url: Option<String>,
    /// A program speaking MCP over stdio.
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// The environment variable holding a bearer token for `url`.
    pub bearer_env: Option<String>,
    /// Header name → environment variable holding its value, for `url`.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// Variable name in the child → steward's environment variable holding its value,
    /// for `command`. The child gets nothing else of steward's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Longest one tool call may take (default 60s).
    pub timeout: Option<HumanDuration>,
    /// Longest connecting and listing its tools may take (default 10s).
    pub connect_timeout: Option<HumanDuration>,
    /// For `command`: `false` runs the server outside the sandbox (it then sees the
    /// host's files and network as steward's user does); `{dir: <folder>}` names the
    /// folder mounted read-only at `/server`. Sandboxed by default.
    pub sandbox: Option<SandboxSpec>,
    /// For a sandboxed `command` server: the hosts it may reach through steward's egress
    /// proxy (`allow`) and the secrets it gets as placeholders (`secrets`); it has no
    /// network without it.
    pub egress: Option<crate::config::spec::ScriptEgressSpec>,
}

/// `sandbox:` of a command server.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SandboxSpec {
    /// `true` (the default) or `false` (no sandbox).
    On(bool),
    Dir {
        /// The server's folder, relative to the config root.
        dir: String,
    },
}

/// How a command server is sandboxed (see `sandbox::process::ProcessSandbox::server_command`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioSandbox {
    /// The host folder mounted read-only at `/server`, its working folder; none
    /// mounted when `None` (the server then works in `/work`).
    pub dir: Option<std::path::PathBuf>,
    /// The program as the sandbox sees it: a path under `/server`, an absolute system
    /// path, or a bare name looked up in the system's program folders.
    pub program: String,
    /// Hosts it may reach through the egress proxy (none: no network).
    pub egress: Option<crate::http::proxy::EgressRules>,
}

/// System folders the sandbox shows (read-only) at the same paths.
const SYSTEM_DIRS: &[&str] = &["/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"];

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpTransport {
    Http {
        url: String,
        bearer_env: Option<String>,
        headers_env: BTreeMap<String, String>,
    },
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        /// `None` when the file says `sandbox: false`.
        sandbox: Option<StdioSandbox>,
    },
}

/// A validated MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub name: String,
    pub transport: McpTransport,
    pub timeout: Duration,
    pub connect_timeout: Duration,
}

impl McpServer {
    /// The environment variables its file names: tokens, headers, its environment and
    /// its egress secrets.
    pub fn named_vars(&self) -> Vec<String> {
        match &self.transport {
            McpTransport::Http {
                bearer_env,
                headers_env,
                ..
            } => bearer_env.iter().chain(headers_env.values()).cloned().collect(),
            McpTransport::Stdio { env, sandbox, .. } => env
                .values()
                .cloned()
                .chain(
                    sandbox
                        .iter()
                        .filter_map(|s| s.egress.as_ref())
                        .flat_map(|e| e.secrets.iter())
                        .flat_map(|r| [r.env.clone(), crate::http::secrets::hosts_var(&r.env)]),
                )
                .collect(),
        }
    }
}

/// An environment variable name (`GITHUB_MCP_TOKEN`).
fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// A server name usable as a tool-name prefix: no `__`, and no `_` at either end, so
/// `a_` + `__` + `x` can never read as `a` + `__` + `_x` (one server's tools passing as
/// another's, and taken by its `mcp:` grant).
pub fn is_server_name(s: &str) -> bool {
    !s.is_empty()
        && !s.contains(SEPARATOR)
        && !s.starts_with('_')
        && !s.ends_with('_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Whether environment variable `name` holds one of steward's own keys, which would let
/// a server read every run (`STEWARD_DATA_KEY`), sign in (`STEWARD_ADMIN_TOKEN`), forge
/// deliveries (the signing secrets and hook tokens), take the event stream
/// (`SLACK_APP_TOKEN`), reach the store (`DATABASE_URL`), or act and spend as steward
/// (its Slack, Jira, Notion, GitHub and model keys, its collector's headers): a server
/// gets a variable of its own. `STEWARD_SECRET_*` values are meant for servers: a url
/// server's token within its `_HOSTS` binding, a command server's as a placeholder.
fn is_stewards_own(name: &str) -> bool {
    (name.starts_with("STEWARD_") && !name.starts_with("STEWARD_SECRET_"))
        || matches!(
            name,
            "DATABASE_URL"
                | "SLACK_SIGNING_SECRET"
                | "SLACK_APP_TOKEN"
                | "SLACK_BOT_TOKEN"
                | "SLACK_SEARCH_USER_TOKEN"
                | "JIRA_API_TOKEN"
                | "JIRA_WEBHOOK_SECRET"
                | "NOTION_TOKEN"
                | "NOTION_WEBHOOK_TOKEN"
                | "GITHUB_TOKEN"
                | "OPENAI_API_KEY"
                | "ANTHROPIC_API_KEY"
                | "OTEL_EXPORTER_OTLP_HEADERS"
                | "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
        )
}

/// Where a sandboxed server's folder and program are (see [`StdioSandbox`]), or why
/// the program cannot be seen from inside the sandbox.
fn sandbox_of(
    root: &std::path::Path,
    name: &str,
    command: &str,
    dir: Option<&str>,
) -> Result<StdioSandbox, String> {
    use std::path::Path;
    let dir = match dir {
        Some(d) => Some(root.join(d)),
        None => {
            let own = root.join("mcp").join(name);
            if own.is_dir() {
                Some(own)
            } else if command.starts_with('/') && !SYSTEM_DIRS.iter().any(|s| command.starts_with(s)) {
                // A program installed elsewhere: its own folder is the server's.
                Path::new(command).parent().map(Path::to_path_buf)
            } else {
                None
            }
        }
    };
    let program = if !command.contains('/') || SYSTEM_DIRS.iter().any(|s| command.starts_with(s)) {
        command.to_string()
    } else {
        let Some(d) = &dir else {
            return Err(format!(
                "'{command}' is not visible inside the sandbox: put the server in mcp/{name}/, name its folder with sandbox: {{dir: ...}}, or use a program under /usr"
            ));
        };
        let full = if command.starts_with('/') {
            std::path::PathBuf::from(command)
        } else {
            d.join(command)
        };
        match full.strip_prefix(d) {
            Ok(rel)
                if rel
                    .components()
                    .all(|c| matches!(c, std::path::Component::Normal(_))) =>
            {
                format!("/server/{}", rel.display())
            }
            _ => {
                return Err(format!(
                    "'{command}' is outside the server's folder {}, which is all the sandbox shows of the host",
                    d.display()
                ));
            }
        }
    };
    Ok(StdioSandbox {
        dir,
        program,
        egress: None,
    })
}

/// Validates `spec` as server `name` of the config under `root`; problems as (key,
/// value, message).
pub fn build(
    name: &str,
    spec: McpSpec,
    root: &std::path::Path,
) -> Result<McpServer, Vec<(&'static str, String, String)>> {
    let mut problems = Vec::new();
    if !is_server_name(name) {
        problems.push((
            "url",
            String::new(),
            format!("server name '{name}' (the file name) must be lowercase letters, digits, - and _, without '__' and not starting or ending with '_'"),
        ));
    }
    let envs = (spec.bearer_env.iter().map(|v| ("bearer_env", v)))
        .chain(spec.headers_env.values().map(|v| ("headers_env", v)))
        .chain(spec.env.values().map(|v| ("env", v)));
    for (key, v) in envs {
        if !is_env_name(v) {
            problems.push((
                key,
                v.clone(),
                format!("'{v}' is not an environment variable name: secrets are named, never written here"),
            ));
        } else if is_stewards_own(v) {
            problems.push((
                key,
                v.clone(),
                format!("'{v}' is steward's own setting, never handed to a server; give the server its own variable (STEWARD_SECRET_… for a sandboxed one's egress)"),
            ));
        } else if key == "env" && crate::http::secrets::is_secret_var(v) {
            // A program holding the value could send it anywhere its egress reaches, or
            // echo it into a tool result; as a placeholder it reaches only its hosts.
            problems.push((
                key,
                v.clone(),
                format!("'{v}' would give the server the secret itself: list it under egress.secrets, where the server holds a placeholder and the proxy puts the value in requests to the hosts {}_HOSTS allows", v),
            ));
        }
    }
    let transport = match (spec.url, spec.command) {
        (Some(url), None) => {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                problems.push(("url", url.clone(), format!("'{url}' is not an http(s) URL")));
            }
            if !spec.env.is_empty()
                || !spec.args.is_empty()
                || spec.sandbox.is_some()
                || spec.egress.is_some()
            {
                problems.push((
                    "args",
                    String::new(),
                    "args, env, sandbox and egress apply to command servers".into(),
                ));
            }
            McpTransport::Http {
                url,
                bearer_env: spec.bearer_env,
                headers_env: spec.headers_env,
            }
        }
        (None, Some(command)) => {
            if spec.bearer_env.is_some() || !spec.headers_env.is_empty() {
                problems.push((
                    "command",
                    String::new(),
                    "bearer_env and headers_env apply to url servers".into(),
                ));
            }
            let sandbox = match &spec.sandbox {
                Some(SandboxSpec::On(false)) => None,
                Some(SandboxSpec::On(true)) | None => Some(sandbox_of(root, name, &command, None)),
                Some(SandboxSpec::Dir { dir }) => Some(sandbox_of(root, name, &command, Some(dir))),
            };
            let mut sandbox = match sandbox.transpose() {
                Ok(s) => s,
                Err(e) => {
                    problems.push(("command", command.clone(), e));
                    None
                }
            };
            if let Some(egress) = &spec.egress {
                problems.extend(egress.problems());
                for name in egress.secrets.keys().filter(|n| spec.env.contains_key(*n)) {
                    problems.push((
                        "env",
                        name.clone(),
                        format!("{name} is both in env and in egress.secrets: a secret reaches the server only as its placeholder, so remove it from env"),
                    ));
                }
                match sandbox.as_mut() {
                    Some(within) if egress.max_requests.is_none() && egress.max_mb.is_none() => {
                        // No per-run caps: the server lives as long as steward.
                        within.egress = Some(crate::http::proxy::EgressRules {
                            max_requests: u32::MAX,
                            max_bytes: u64::MAX,
                            listed_in: "this server's egress.allow",
                            ..egress.rules()
                        });
                    }
                    Some(_) => problems.push((
                        "egress",
                        String::new(),
                        "a server's egress takes allow and secrets: max_requests and max_mb cap a script run, not a server that lives as long as steward".into(),
                    )),
                    None if matches!(spec.sandbox, Some(SandboxSpec::On(false))) => problems.push((
                        "egress",
                        String::new(),
                        "egress applies to sandboxed command servers: with sandbox: false the server already has the host's network".into(),
                    )),
                    None => {}
                }
            }
            McpTransport::Stdio {
                command,
                args: spec.args,
                env: spec.env,
                sandbox,
            }
        }
        _ => {
            problems.push((
                "url",
                String::new(),
                "an MCP server has either url (Streamable HTTP) or command (stdio)".into(),
            ));
            return Err(problems);
        }
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(McpServer {
        name: name.to_string(),
        transport,
        timeout: spec.timeout.map_or(DEFAULT_TIMEOUT, |d| d.0),
        connect_timeout: spec.connect_timeout.map_or(DEFAULT_CONNECT_TIMEOUT, |d| d.0),
    })
}

/// The registry names an agent's `mcp:` tool entry stands for, among `names`:
/// `mcp:github` → every `github__*`, `mcp:github/search` → `github__search`. `None` for
/// an entry that is not an MCP one.
pub fn expand<'a>(entry: &str, names: impl Iterator<Item = &'a String>) -> Option<Vec<String>> {
    let rest = entry.strip_prefix("mcp:")?;
    Some(match rest.split_once('/') {
        Some((server, tool)) => vec![format!("{server}{SEPARATOR}{tool}")],
        None => {
            let prefix = format!("{rest}{SEPARATOR}");
            names.filter(|n| n.starts_with(&prefix)).cloned().collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> McpSpec {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn server_names_cannot_pass_one_servers_tools_as_anothers() {
        for good in ["github", "jira-cloud", "a_b", "x1"] {
            assert!(is_server_name(good), "{good}");
        }
        for bad in ["a_", "_a", "a__b", "", "GitHub"] {
            assert!(!is_server_name(bad), "{bad}");
        }
        // `mcp:a` takes a's tools only; a name `a___x` could only come from a server
        // `a_` (now refused) or a tool `_x` (skipped when listed).
        let names = ["a__x".to_string(), "ab__y".to_string()];
        assert_eq!(expand("mcp:a", names.iter()), Some(vec!["a__x".to_string()]));
    }

    #[test]
    fn servers_are_urls_or_commands_with_named_secrets() {
        let root = std::path::Path::new("/srv/steward");
        let s = build(
            "github",
            spec("url: https://api.example.com/mcp\nbearer_env: GITHUB_MCP_TOKEN\n"),
            root,
        )
        .unwrap();
        assert!(matches!(s.transport, McpTransport::Http { .. }));
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        let s = build(
            "notes",
            spec("command: notes-mcp\nargs: [--stdio]\nenv: {NOTES_KEY: NOTES_KEY}\ntimeout: 5s\n"),
            root,
        )
        .unwrap();
        assert_eq!(s.timeout, Duration::from_secs(5));
        let bad = build(
            "x",
            spec("url: https://a/mcp\nbearer_env: 'ghp_literal123'\n"),
            root,
        )
        .unwrap_err();
        assert!(bad[0].2.contains("not an environment variable name"), "{bad:?}");
        // steward's own keys never go to a server.
        for own in [
            "url: https://a/mcp\nbearer_env: STEWARD_ADMIN_TOKEN\n",
            "url: https://a/mcp\nheaders_env: {X-Key: SLACK_SIGNING_SECRET}\n",
            "command: notes-mcp\nenv: {K: STEWARD_DATA_KEY}\n",
            "command: notes-mcp\nenv: {K: DATABASE_URL}\n",
            "url: https://a/mcp\nbearer_env: SLACK_BOT_TOKEN\n",
            "command: notes-mcp\nenv: {K: JIRA_WEBHOOK_SECRET}\n",
        ] {
            let bad = build("x", spec(own), root).unwrap_err();
            assert!(bad[0].2.contains("steward's own setting"), "{own}: {bad:?}");
        }
        // A secret goes to a command server only as a placeholder (egress.secrets).
        let bad = build(
            "x",
            spec("command: notes-mcp\nenv: {K: STEWARD_SECRET_NOTES}\n"),
            root,
        )
        .unwrap_err();
        assert!(
            bad[0].2.contains("would give the server the secret itself"),
            "{bad:?}"
        );
        assert!(
            build(
                "x",
                spec("url: https://a/mcp\nbearer_env: STEWARD_SECRET_NOTES\n"),
                root
            )
            .is_ok()
        );
        assert!(build("x", spec("args: []\n"), root).is_err());
        assert!(build("a__b", spec("url: https://a/mcp\n"), root).is_err());
    }

    #[test]
    fn command_servers_are_sandboxed_unless_the_file_says_otherwise() {
        let root = std::path::Path::new("/srv/steward");
        let sandbox_of = |yaml: &str| match build("notes", spec(yaml), root) {
            Ok(McpServer {
                transport: McpTransport::Stdio { sandbox, .. },
                ..
            }) => Ok(sandbox),
            Ok(_) => panic!("not a command server"),
            Err(p) => Err(p[0].2.clone()),
        };
        // A system program: no folder, the name looked up inside.
        let s = sandbox_of("command: python3\n").unwrap().unwrap();
        assert_eq!((s.dir, s.program.as_str()), (None, "python3"));
        // A program elsewhere: its folder becomes /server.
        let s = sandbox_of("command: /opt/notes/bin/notes-mcp\n")
            .unwrap()
            .unwrap();
        assert_eq!(s.dir.as_deref(), Some(std::path::Path::new("/opt/notes/bin")));
        assert_eq!(s.program, "/server/notes-mcp");
        let s = sandbox_of("command: ./server.py\nsandbox: {dir: tools/notes}\n")
            .unwrap()
            .unwrap();
        assert_eq!(
            s.dir.as_deref(),
            Some(std::path::Path::new("/srv/steward/tools/notes"))
        );
        assert_eq!(s.program, "/server/server.py");
        assert_eq!(sandbox_of("command: x\nsandbox: false\n").unwrap(), None);
        let e = sandbox_of("command: ../escape.sh\nsandbox: {dir: tools/notes}\n").unwrap_err();
        assert!(e.contains("outside the server's folder"), "{e}");
        let e = sandbox_of("command: ./server.py\n").unwrap_err();
        assert!(e.contains("not visible inside the sandbox"), "{e}");
        assert!(build("x", spec("url: https://a/mcp\nsandbox: false\n"), root).is_err());
    }

    #[test]
    fn entries_expand_to_registry_names() {
        let names = [
            "github__search".to_string(),
            "github__get_issue".to_string(),
            "notes__find".to_string(),
        ];
        assert_eq!(
            expand("mcp:github", names.iter()).unwrap(),
            ["github__search", "github__get_issue"]
        );
        assert_eq!(expand("mcp:notes/find", names.iter()).unwrap(), ["notes__find"]);
        assert!(expand("http_fetch", names.iter()).is_none());
    }
}
