//! The `subagent` base tool: hand a task to a configured subagent with a fresh context
//! and the files it should see; its final text is the tool's result.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// The name of the tool that hands a task to a subagent.
pub const SUBAGENT_TOOL: &str = "subagent";

/// Starts subagent runs on behalf of one parent run.
#[async_trait]
pub trait SubagentLauncher: Send + Sync {
    /// Subagents the parent may call.
    fn available(&self) -> Vec<String>;
    /// Runs subagent `name` on `prompt` with the parent's files `files`; returns its final
    /// text, or why it failed (a failed child is an error result, not a failed parent).
    async fn launch(
        &self,
        name: &str,
        prompt: &str,
        files: &[String],
        call_id: &str,
        cancel: CancellationToken,
    ) -> Result<String, SubagentError>;
}

/// Why a subagent gave no answer. It goes back to the parent model as an error result:
/// a failed child does not fail its parent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubagentError {
    #[error("subagent '{0}' is not configured")]
    Unknown(String),
    #[error("{0}")]
    Files(String),
    #[error("subagent '{name}' could not run: {reason}")]
    NotRun { name: String, reason: String },
    #[error("subagent '{name}' (run {run_id}) ended with {termination}: {error}")]
    Failed {
        name: String,
        run_id: String,
        termination: &'static str,
        error: String,
    },
}

pub struct SubagentTool {
    spec: ToolSpec,
}

impl SubagentTool {
    pub fn new() -> Self {
        SubagentTool {
            spec: ToolSpec {
                name: SUBAGENT_TOOL.into(),
                description: "Hand a self-contained task to a subagent listed in the system prompt. It starts with a fresh context holding only your prompt and the files you pass; its final answer comes back as this tool's result. Several subagent calls in one turn run concurrently.".into(),
                parameters: super::args::schema_of::<DelegateArgs>(),
                effect: Effect::ReadOnly,
            },
        }
    }
}

impl Default for SubagentTool {
    fn default() -> Self {
        SubagentTool::new()
    }
}

pub fn subagent_tool() -> Arc<dyn Tool> {
    Arc::new(SubagentTool::new())
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DelegateArgs {
    name: String,
    /// everything the subagent needs to know: it cannot see your conversation
    #[schemars(length(min = 1))]
    prompt: String,
    /// ids of your files it may read, e.g. ["f_2"]
    files: Option<Vec<String>>,
}

#[async_trait]
impl Tool for SubagentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    /// A second delegation is a second opinion, not a repeat.
    fn repeatable(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let Some(launcher) = &ctx.subagents else {
            return Err(ToolError::Model("this agent cannot call subagents".into()));
        };
        let DelegateArgs { name, prompt, files } = super::args::parse(args)?;
        let name = name.as_str();
        if !launcher.available().iter().any(|n| n == name) {
            return Err(ToolError::Model(format!(
                "unknown subagent '{name}'; available: {}",
                launcher.available().join(", ")
            )));
        }
        let files = files.unwrap_or_default();
        launcher
            .launch(name, &prompt, &files, &ctx.call_id, ctx.cancel.clone())
            .await
            .map(ToolOutput::text)
            .map_err(|e| ToolError::Model(e.to_string()))
    }

    /// A subagent is a run like any other: in mock mode its own tools are mocked.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}
