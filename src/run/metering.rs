//! Run metrics from the event log: every event a run records passes through its
//! [`Meter`], so the LLM loop, scripts, subagents and compaction are counted in one
//! place and the same way, whichever coordinator made them.

use std::sync::Arc;
use std::time::Instant;

use super::events::RunEvent;
use crate::metrics::{Metrics, ToolOutcome};

/// Counts one run's events into the process's [`Metrics`].
pub struct Meter {
    metrics: Arc<Metrics>,
    agent: String,
    started: Instant,
}

impl Meter {
    pub fn new(metrics: Arc<Metrics>, agent: &str) -> Meter {
        Meter {
            metrics,
            agent: agent.to_string(),
            started: Instant::now(),
        }
    }

    /// Counts what `event` says happened.
    pub fn observe(&self, event: &RunEvent) {
        let m = &self.metrics;
        let agent = self.agent.as_str();
        match event {
            RunEvent::RunStarted {
                parent_id: Some(_), ..
            } => m.subagent_started(agent),
            RunEvent::ModelResponse {
                model,
                usage,
                cost_usd,
                ..
            } => m.model_answered(agent, model, usage, *cost_usd),
            RunEvent::ModelError {
                provider,
                model,
                kind,
                ..
            } => m.model_failed(agent, provider, model, kind.code()),
            RunEvent::ToolResult { name, ok, fatal, .. } => {
                let outcome = match (ok, fatal) {
                    (true, _) => ToolOutcome::Ok,
                    (false, Some(true)) => ToolOutcome::Fatal,
                    (false, _) => ToolOutcome::Error,
                };
                m.tool_called(agent, name, outcome);
            }
            RunEvent::Compaction {
                usage,
                cost_usd,
                model,
                ..
            } => {
                m.compacted(agent);
                // The summary is a model call too, billed to the run.
                m.model_answered(agent, model, usage, *cost_usd);
            }
            RunEvent::RunFinished { status, termination } => {
                m.run_finished(agent, *status, *termination, self.started.elapsed().as_secs_f64())
            }
            _ => {}
        }
    }
}
