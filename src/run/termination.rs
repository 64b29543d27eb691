//! Why a run ended.

use serde::Serialize;

use crate::store::RunStatus;

/// The named reason a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Termination {
    /// The model answered without tool calls.
    Completed,
    MaxTurns,
    MaxToolCalls,
    Timeout,
    MaxCost,
    /// Every model of the chain failed.
    ProviderError,
    /// A tool reported a fatal error.
    ToolError,
    /// A coordinator script failed (syntax, runtime error, or a sandbox limit).
    ScriptError,
    Cancelled,
    /// The service stopped and the run did not finish within the grace period.
    Interrupted,
    /// The agent's prompt (hosted in Notion) could not be loaded and no copy was cached.
    PromptUnavailable,
}

impl Termination {
    pub fn as_str(self) -> &'static str {
        match self {
            Termination::Completed => "completed",
            Termination::MaxTurns => "max_turns",
            Termination::MaxToolCalls => "max_tool_calls",
            Termination::Timeout => "timeout",
            Termination::MaxCost => "max_cost",
            Termination::ProviderError => "provider_error",
            Termination::ToolError => "tool_error",
            Termination::ScriptError => "script_error",
            Termination::Cancelled => "cancelled",
            Termination::Interrupted => "interrupted",
            Termination::PromptUnavailable => "prompt_unavailable",
        }
    }

    /// The final status a run ending this way gets.
    pub fn status(self) -> RunStatus {
        match self {
            Termination::Completed => RunStatus::Succeeded,
            Termination::Cancelled => RunStatus::Cancelled,
            Termination::Interrupted => RunStatus::Interrupted,
            _ => RunStatus::Failed,
        }
    }
}
