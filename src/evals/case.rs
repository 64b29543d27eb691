//! Eval cases: `evals/<agent>/<case>.yaml`, read with the same file:line:column
//! diagnostics as agent configs, then checked against the loaded configuration (the
//! agent exists, every mocked or expected tool is one the agent may call).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::config::diagnostic::{Diagnostic, find_key};
use crate::config::{AgentConfig, Config, ToolSelection};

/// Largest eval case file: a case drafted from a run holds its tool results as mocks.
const MAX_CASE_BYTES: u64 = 16 * 1024 * 1024;

/// One case as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// What the case checks, in a sentence.
    #[serde(default)]
    pub description: String,
    /// The agent under test; defaults to the folder name (`evals/<agent>/`).
    pub agent: Option<String>,
    pub trigger: TriggerInput,
    /// Canned tool results by tool name; tools not listed answer with their built-in
    /// mocks.
    #[serde(default)]
    pub mocks: BTreeMap<String, MockSpec>,
    /// Replaces the agent's `vars` (script coordinators).
    pub vars: Option<serde_yaml::Mapping>,
    #[serde(default)]
    pub expect: Expectations,
    /// Plain-language statements a judge model scores.
    #[serde(default)]
    pub criteria: Vec<String>,
    /// How many times to run the case (default 1) and how many must pass (default all).
    pub trials: Option<u32>,
    pub min_pass: Option<u32>,
}

/// What starts the run: a short form, or a payload in a source's own format.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerInput {
    /// Short form: the text addressed to the agent, as `steward run --event` takes it.
    pub text: Option<String>,
    /// A Slack Events API body (`event_callback` with an `app_mention`, `message` or
    /// `reaction_added` event).
    pub slack: Option<serde_yaml::Value>,
    /// A Jira webhook body.
    pub jira: Option<serde_yaml::Value>,
    /// A Notion webhook event body.
    pub notion: Option<serde_yaml::Value>,
    /// A generic webhook: its name and JSON body.
    pub webhook: Option<WebhookInput>,
    /// A cron slot of the agent's first cron trigger.
    pub cron: Option<CronInput>,
    /// A normalized trigger event as steward stores it (source, kind, text, payload,
    /// origin): what `steward eval new --from-run` writes.
    pub event: Option<serde_yaml::Value>,
    /// Files attached to the trigger, relative to the root.
    #[serde(default)]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookInput {
    pub name: String,
    #[serde(default)]
    pub body: serde_yaml::Value,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CronInput {
    /// RFC 3339; defaults to a fixed time so replays stay identical.
    pub slot: Option<String>,
}

/// A tool's canned behaviour: `real`, or one of `result`, `error`, `results`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MockSpec {
    /// `real`: the tool's own implementation (network and all).
    Keyword(String),
    Canned(CannedSpec),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CannedSpec {
    /// Every call returns this (text, or JSON for a structured tool).
    pub result: Option<serde_yaml::Value>,
    /// Every call fails with this message (the model sees it).
    pub error: Option<String>,
    /// Call n returns entry n; calls past the end repeat the last one.
    pub results: Option<Vec<serde_yaml::Value>>,
}

/// Objective checks on the run.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expectations {
    /// Each entry must have been called at least once: a tool name, or a name with
    /// argument matchers.
    #[serde(default)]
    pub tools_called: Vec<CallMatcher>,
    #[serde(default)]
    pub tools_not_called: Vec<String>,
    /// Exact call counts by tool.
    #[serde(default)]
    pub calls: BTreeMap<String, u32>,
    /// `completed` (default when unset: any), `max_turns`, `tool_error`, ...
    pub termination: Option<String>,
    pub reply: Option<ReplyExpect>,
    /// `thread` (Slack), `jira_comment`, `notion_comment` or `none`.
    pub posted_to: Option<String>,
    /// Virtual files the run created (tool outputs stored as files, transcripts), at
    /// least.
    pub files_created: Option<u32>,
    pub max_turns: Option<u32>,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CallMatcher {
    Name(String),
    WithArgs {
        name: String,
        /// Argument name → a value the argument must contain (strings) or equal.
        args: BTreeMap<String, serde_yaml::Value>,
    },
}

impl CallMatcher {
    pub fn name(&self) -> &str {
        match self {
            CallMatcher::Name(n) | CallMatcher::WithArgs { name: n, .. } => n,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyExpect {
    #[serde(default)]
    pub contains: Vec<String>,
    #[serde(default)]
    pub not_contains: Vec<String>,
    /// A regular expression the reply must match.
    pub matches: Option<String>,
}

/// How a tool answers in a case, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Mock {
    Real,
    Result(Value),
    Error(String),
    Sequence(Vec<Value>),
}

/// A case ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    /// `<agent>/<case>` (the file's path under `evals/` without `.yaml`).
    pub id: String,
    pub file: PathBuf,
    pub spec: CaseSpec,
    pub agent: String,
    pub mocks: BTreeMap<String, Mock>,
    pub trials: u32,
    pub min_pass: u32,
}

fn json(v: &serde_yaml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Every case file under `dir` (`evals/`), skipping `cassettes/`, sorted by path.
pub fn case_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(agents) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in agents.flatten() {
        let path = entry.path();
        if !path.is_dir() || path.file_name().is_some_and(|n| n == "cassettes" || n == "files") {
            continue;
        }
        if let Ok(files) = std::fs::read_dir(&path) {
            for f in files.flatten() {
                let p = f.path();
                if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// The tools `agent` may call by name (its list, with `mcp:<server>` standing for the
/// server's known tools; `inherit` only for subagents).
fn granted(agent: &AgentConfig, known_tools: &[String]) -> Vec<String> {
    match &agent.tools {
        ToolSelection::List(list) => list
            .iter()
            .flat_map(|t| {
                crate::config::mcp::expand(t, known_tools.iter()).unwrap_or_else(|| vec![t.clone()])
            })
            .collect(),
        ToolSelection::Inherit => Vec::new(),
    }
}

/// Why `tool` is unknown: an MCP server's tool that its cassette does not list says how
/// to record it.
fn unknown_tool(tool: &str, config: &Config) -> String {
    let server = tool
        .split_once(crate::config::mcp::SEPARATOR)
        .map(|(server, _)| server)
        .filter(|server| config.mcp.contains_key(*server));
    match server {
        Some(server) => format!(
            "mock for MCP tool '{tool}', which {}/{server}.json does not list: record the server's tools with `steward eval --record` while it is reachable",
            super::MCP_CASSETTES
        ),
        None => format!("mock for unknown tool '{tool}'"),
    }
}

/// Reads and checks one case. `root` is the repository root; `file` a path under
/// `root/evals/`.
pub fn load(
    root: &Path,
    file: &Path,
    config: &Config,
    known_tools: &[String],
) -> Result<Case, Vec<Diagnostic>> {
    let rel = file.strip_prefix(root).unwrap_or(file).to_path_buf();
    let text = crate::config::within::read_text_at_most(root, &rel, MAX_CASE_BYTES)
        .map_err(|e| vec![Diagnostic::new(&rel, 1, 1, format!("cannot read the case: {e}"))])?;
    let spec: CaseSpec = crate::config::parse::parse_all(&rel, &text)?;
    let at = |key: &str, message: String| {
        // find_key is 0-based; diagnostics count from 1.
        let (line, column) = find_key(&text, key, 0).map_or((1, 1), |(l, c)| (l + 1, c + 1));
        Diagnostic::new(&rel, line, column, message)
    };
    let folder = file
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let agent_name = spec.agent.clone().unwrap_or_else(|| folder.clone());
    let mut diags = Vec::new();
    let agent = match config.agents.get(&agent_name) {
        Some(a) => Some(a.clone()),
        None => {
            let known: Vec<&str> = config.agents.keys().map(String::as_str).collect();
            diags.push(at(
                "agent",
                format!(
                    "unknown agent '{agent_name}', expected one of: {}",
                    known.join(", ")
                ),
            ));
            None
        }
    };
    let t = &spec.trigger;
    let forms = [
        t.text.is_some(),
        t.slack.is_some(),
        t.jira.is_some(),
        t.notion.is_some(),
        t.webhook.is_some(),
        t.cron.is_some(),
        t.event.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if forms != 1 {
        diags.push(at(
            "trigger",
            "the trigger needs exactly one of text, slack, jira, notion, webhook, cron, event".into(),
        ));
    }
    for f in &t.files {
        match crate::config::within::resolve(root, f) {
            Ok(full) if full.is_file() => {}
            Ok(_) | Err(crate::config::within::WithinError::Io { .. }) => diags.push(at(
                "files",
                format!("attached file '{}' does not exist", f.display()),
            )),
            Err(e) => diags.push(at("files", format!("attached file {e}"))),
        }
    }
    let mut mocks = BTreeMap::new();
    if let Some(agent) = &agent {
        let granted = granted(agent, known_tools);
        for (tool, mock) in &spec.mocks {
            if !known_tools.iter().any(|k| k == tool) {
                diags.push(at(tool, unknown_tool(tool, config)));
                continue;
            }
            if !granted.iter().any(|g| g == tool) {
                diags.push(at(
                    tool,
                    format!(
                        "mock for tool '{tool}', which agent '{agent_name}' does not have (its tools: {})",
                        granted.join(", ")
                    ),
                ));
                continue;
            }
            let resolved = match mock {
                MockSpec::Keyword(k) if k == "real" => Ok(Mock::Real),
                MockSpec::Keyword(k) => Err(format!(
                    "unknown mock '{k}', expected real or a map with result, error or results"
                )),
                MockSpec::Canned(c) => match (&c.result, &c.error, &c.results) {
                    (Some(r), None, None) => Ok(Mock::Result(json(r))),
                    (None, Some(e), None) => Ok(Mock::Error(e.clone())),
                    (None, None, Some(rs)) if !rs.is_empty() => {
                        Ok(Mock::Sequence(rs.iter().map(json).collect()))
                    }
                    _ => Err("a mock needs exactly one of result, error or results (non-empty)".to_string()),
                },
            };
            match resolved {
                Ok(m) => {
                    mocks.insert(tool.clone(), m);
                }
                Err(e) => diags.push(at(tool, format!("{tool}: {e}"))),
            }
        }
        let expected = spec
            .expect
            .tools_called
            .iter()
            .map(CallMatcher::name)
            .chain(spec.expect.tools_not_called.iter().map(String::as_str))
            .chain(spec.expect.calls.keys().map(String::as_str));
        for tool in expected {
            let base =
                crate::config::BASE_TOOLS.contains(&tool) || tool == "subagent" || tool.starts_with("load_");
            if !base && !known_tools.iter().any(|k| k == tool) {
                diags.push(at(tool, format!("expectation names unknown tool '{tool}'")));
            }
        }
    }
    if let Some(posted) = &spec.expect.posted_to
        && !["thread", "jira_comment", "notion_comment", "none"].contains(&posted.as_str())
    {
        diags.push(at(
            "posted_to",
            format!("posted_to '{posted}' is not one of thread, jira_comment, notion_comment, none"),
        ));
    }
    if let Some(re) = spec.expect.reply.as_ref().and_then(|r| r.matches.as_ref())
        && let Err(e) = regex::Regex::new(re)
    {
        diags.push(at("matches", format!("invalid regular expression: {e}")));
    }
    let trials = spec.trials.unwrap_or(1);
    let min_pass = spec.min_pass.unwrap_or(trials);
    if trials == 0 || min_pass == 0 || min_pass > trials {
        diags.push(at(
            "trials",
            format!("need 1 <= min_pass <= trials, got trials {trials}, min_pass {min_pass}"),
        ));
    }
    if !diags.is_empty() {
        return Err(diags);
    }
    Ok(Case {
        id: format!("{folder}/{stem}"),
        file: rel,
        agent: agent_name,
        mocks,
        trials,
        min_pass,
        spec,
    })
}
