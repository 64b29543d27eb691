//! One [`Tool`] trait, one [`ToolRegistry`]: whatever calls a tool (the model, a script,
//! a subagent) goes through the same schema validation and dispatch.

pub mod args;
pub mod current_time;
pub mod files;
pub mod http_fetch;
pub mod registry;
pub mod schema;
pub mod search_grant;
pub mod skill_script;
pub mod skills;
pub mod status;
pub mod subagent;

use async_trait::async_trait;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::files::RunFiles;
use crate::provider::types::Image;
use crate::skills::RunSkills;

pub use registry::ToolRegistry;

/// Whether calling a tool changes the world. Side-effecting calls carry an idempotency
/// key and decide whether a crashed run may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    ReadOnly,
    /// Changes something steward (or a person) can set back.
    SideEffecting,
    /// Changes something that cannot be taken back: people are notified, a record is
    /// created for others. An approval request says so.
    Irreversible,
}

impl Effect {
    pub fn changes_anything(self) -> bool {
        self != Effect::ReadOnly
    }
}

/// A tool's public description.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: String,
    /// Shown to the model: say what it does and when to use it.
    pub description: String,
    /// JSON Schema for the arguments object.
    pub parameters: Value,
    pub effect: Effect,
}

/// Per-call context handed to tools.
#[derive(Clone)]
pub struct ToolCtx {
    pub run_id: String,
    pub agent: String,
    /// The model's (or script's) id for this call.
    pub call_id: String,
    /// Cancelled when the run is cancelled or times out.
    pub cancel: CancellationToken,
    /// The run's virtual files.
    pub files: Arc<RunFiles>,
    /// The run's skills, when it has any.
    pub skills: Option<Arc<RunSkills>>,
    /// Starts subagents, when the run may call any.
    pub subagents: Option<Arc<dyn subagent::SubagentLauncher>>,
    /// The run's tool gateway, for tools that call tools (skill scripts): nested calls
    /// get the run's grant, cap and records.
    pub nested: Option<Arc<dyn NestedTools>>,
    /// Whether mocks are in use, passed on to nested calls.
    pub mock: bool,
    /// What the run's search tools may search, and as whom.
    pub search: Arc<search_grant::SearchGrant>,
    /// Requests the call made through an egress proxy (skill scripts), recorded by the
    /// gateway as events under the call whether it succeeded or not.
    pub network: NetSink,
}

/// Where a call's proxied requests are kept until the gateway records them.
pub type NetSink = Arc<std::sync::Mutex<Vec<crate::http::proxy::NetRecord>>>;

impl ToolCtx {
    /// Stable across retries of the same run and call, so a side effect happens once.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.run_id, self.call_id)
    }
}

/// Calls tools on behalf of a running tool, through the run's gateway.
#[async_trait]
pub trait NestedTools: Send + Sync {
    /// Calls `name` for the tool running under `parent`. Only tools in both the run's
    /// grant and `grant` (a skill's `allowed-tools`) may be called; the call is recorded
    /// with its parent call id and counts toward `max_tool_calls`.
    async fn call_nested(&self, parent: &ToolCtx, grant: &[String], name: &str, args: Value) -> ToolResult;
}

/// What a tool returns: text or structured JSON (scripts get it as maps and arrays).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub value: Value,
    /// Images for the model to see (sent as image content after the tool results).
    pub images: Vec<Image>,
    /// Set by the gateway when this is the earlier result of a call with the same
    /// arguments in the same run (the id of that call), not a new call.
    pub repeat_of: Option<String>,
    /// Goes into the context whole, however large (a loaded skill, which its tool
    /// caps itself), instead of becoming a file with a preview.
    pub whole: bool,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput::json(Value::String(text.into()))
    }

    pub fn json(value: Value) -> Self {
        ToolOutput {
            value,
            images: Vec::new(),
            repeat_of: None,
            whole: false,
        }
    }

    /// Text that goes into the context whole (see [`ToolOutput::whole`]).
    pub fn whole(text: impl Into<String>) -> Self {
        ToolOutput {
            whole: true,
            ..ToolOutput::text(text)
        }
    }

    /// The text the model sees: strings verbatim, anything else as pretty JSON.
    pub fn to_model_text(&self) -> String {
        self.model_text().into_owned()
    }

    /// [`ToolOutput::to_model_text`] without copying a string output.
    pub fn model_text(&self) -> std::borrow::Cow<'_, str> {
        match &self.value {
            Value::String(s) => std::borrow::Cow::Borrowed(s),
            other => serde_json::to_string_pretty(other)
                .unwrap_or_else(|_| other.to_string())
                .into(),
        }
    }
}

/// A failed tool call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// Goes back to the model as the tool's result, so it can correct itself.
    #[error("{0}")]
    Model(String),
    /// Ends the run: continuing would be unsafe or pointless.
    #[error("fatal tool error: {0}")]
    Fatal(String),
}

pub type ToolResult = Result<ToolOutput, ToolError>;

impl From<crate::skills::access::SkillError> for ToolError {
    /// The model named a skill or file it cannot use: it can correct itself.
    fn from(e: crate::skills::access::SkillError) -> Self {
        ToolError::Model(e.to_string())
    }
}

/// A capability an agent can use. Every tool has a real implementation and a mock used
/// by evals and `--mock-tools`; arguments arrive already validated against the schema.
#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;
    /// What a run is doing while it calls this tool, for Slack's thinking status.
    fn status(&self) -> String {
        status::of(&self.spec().name)
    }
    /// Whether, within one run, a call with the same arguments as an earlier one may
    /// be answered with that earlier result instead of running again: read-only tools
    /// whose answer depends on their arguments alone (fetches, Slack/Jira/Notion/GitHub
    /// reads, file reads). Tools with side effects never are; a read-only tool whose
    /// answer changes by itself (the time, a subagent's judgment) says no.
    fn repeatable(&self) -> bool {
        self.spec().effect == Effect::ReadOnly
    }
    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult;
    /// Realistic canned output with the same shape as [`Tool::call`], touching nothing.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult;
}
