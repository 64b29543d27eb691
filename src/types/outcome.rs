//! How a run ends: its status, the named reason it stopped, and the one outcome type
//! that coordinators produce, the store records and callers receive.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Usage;

/// Where a run is in its life. Changes only by compare-and-set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// The process died mid-run after side effects; reported, not retried.
    Interrupted,
    /// Paused until a person approves or denies a tool call; holds no worker.
    Waiting,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Waiting => "waiting",
        }
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        Some(match text {
            "queued" => RunStatus::Queued,
            "running" => RunStatus::Running,
            "succeeded" => RunStatus::Succeeded,
            "failed" => RunStatus::Failed,
            "cancelled" => RunStatus::Cancelled,
            "interrupted" => RunStatus::Interrupted,
            "waiting" => RunStatus::Waiting,
            _ => return None,
        })
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running | RunStatus::Waiting)
    }
}

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
    /// A person stopped it (Slack's Stop button, or a `:octagonal_sign:` reaction).
    StoppedByUser,
    /// The service stopped and the run did not finish within the grace period.
    Interrupted,
    /// The agent's prompt (hosted in Notion) could not be loaded and no copy was cached.
    PromptUnavailable,
    /// The process died during every attempt of the run; it is not retried again.
    CrashLoop,
    /// It finished, but its answer could not be delivered: Slack, Jira or Notion
    /// refused the reply.
    Undelivered,
    /// Not an end: the run waits for a person to decide on a tool call.
    AwaitingApproval,
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
            Termination::StoppedByUser => "stopped_by_user",
            Termination::Interrupted => "interrupted",
            Termination::PromptUnavailable => "prompt_unavailable",
            Termination::CrashLoop => "crash_loop",
            Termination::Undelivered => "undelivered",
            Termination::AwaitingApproval => "awaiting_approval",
        }
    }

    /// The final status a run ending this way gets.
    pub fn status(self) -> RunStatus {
        match self {
            Termination::Completed => RunStatus::Succeeded,
            Termination::Cancelled | Termination::StoppedByUser => RunStatus::Cancelled,
            Termination::Interrupted => RunStatus::Interrupted,
            Termination::AwaitingApproval => RunStatus::Waiting,
            _ => RunStatus::Failed,
        }
    }
}

/// What a run came to. Coordinators fill the totals and the model's last text; the
/// runner then decides what of the text is kept (`output.reply`) and adds skill loads.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    pub termination: Termination,
    /// The final answer: the model's last text while coordinating, then `None` when
    /// discarded per `output.reply`.
    pub final_text: Option<String>,
    pub error: Option<String>,
    pub turns: u32,
    pub tool_calls: u32,
    /// Token totals, including subagents' usage.
    pub usage: Usage,
    /// What the priced calls cost; see `cost_unknown`.
    pub cost_usd: f64,
    /// Some call's model had no price, so the run's true cost is unknown (`cost_usd`
    /// counts only the priced calls).
    pub cost_unknown: bool,
    pub compactions: u32,
    /// Skill loads by skill (and `skill/path` for sub-files).
    pub skill_loads: BTreeMap<String, u32>,
    /// The W3C `traceparent` of the run's span when traces are exported, so work done
    /// after the run (post-run evals) joins its trace.
    pub traceparent: Option<String>,
    /// With [`Termination::AwaitingApproval`]: the checkpoint to resume from (JSON).
    pub awaiting: Option<serde_json::Value>,
    /// The private conversations whose content the run came to hold (run::custody). A
    /// subagent's go to its parent with its answer, which carries that content.
    pub private_sources: Vec<String>,
}

impl RunOutcome {
    /// A run that has done nothing yet.
    pub fn new(run_id: impl Into<String>) -> Self {
        RunOutcome {
            run_id: run_id.into(),
            termination: Termination::Completed,
            final_text: None,
            error: None,
            traceparent: None,
            awaiting: None,
            private_sources: Vec::new(),
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            cost_usd: 0.0,
            cost_unknown: false,
            compactions: 0,
            skill_loads: BTreeMap::new(),
        }
    }

    /// The final status this outcome gives the run.
    pub fn status(&self) -> RunStatus {
        self.termination.status()
    }

    /// Ends with `termination` and `error`.
    pub fn stopped(mut self, termination: Termination, error: Option<String>) -> Self {
        self.termination = termination;
        self.error = error;
        self
    }
}
