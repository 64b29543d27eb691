//! Running one agent on one trigger: create the run record, drive the coordinator,
//! record every step, and finish the run with a named termination reason.
//!
//! "Every agent is a subagent": top-level runs and subagent calls go through
//! [`Runner::run`] with different configs.

pub mod compaction;
pub mod context;
pub mod inputs;
pub mod llm;
pub mod recorder;
pub mod report;
pub mod termination;
pub mod trigger;

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::{AgentConfig, Coordinator, ToolSelection};
use crate::files::{FileSource, RunFiles};
use crate::provider::{ProviderSet, Usage};
use crate::store::{NewRun, RunFinish, RunStatus, Store, StoreError};
use crate::tokens::{Encoding, TokenCounter};
use crate::tools::ToolRegistry;
use crate::tools::files::BASE_TOOLS;

pub use recorder::Recorder;
pub use termination::Termination;
pub use trigger::TriggerEvent;

/// Shared by every run of a process.
#[derive(Clone)]
pub struct Runner {
    pub store: Arc<dyn Store>,
    pub providers: ProviderSet,
    pub tools: Arc<ToolRegistry>,
    /// Use every tool's mock instead of its real implementation.
    pub mock_tools: bool,
    pub tokens: Arc<TokenCounter>,
}

/// The result of a finished run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    pub status: RunStatus,
    pub termination: Termination,
    /// The final answer, or `None` when discarded per `output.reply`.
    pub final_text: Option<String>,
    pub error: Option<String>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub turns: u32,
    pub tool_calls: u32,
}

/// A failure of the harness itself (the run could not be recorded).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("agent '{0}' uses a script coordinator, which this build cannot run yet")]
    ScriptUnsupported(String),
}

impl Runner {
    /// Runs `agent` on `trigger` to completion and returns how it ended. Provider,
    /// tool and cap failures end the run (recorded, `Ok`); only store failures are `Err`.
    pub async fn run(
        &self,
        agent: &AgentConfig,
        trigger: &TriggerEvent,
        parent_id: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        if let Coordinator::Script(_) = agent.coordinator {
            return Err(RunError::ScriptUnsupported(agent.name.clone()));
        }
        let run_id = uuid::Uuid::now_v7().to_string();
        let summary = if trigger.private {
            format!("{} {} (private)", trigger.source, trigger.kind)
        } else {
            trigger.summary.clone()
        };
        self.store
            .create_run(&NewRun {
                id: run_id.clone(),
                agent: agent.name.clone(),
                parent_id: parent_id.map(str::to_string),
                trigger_summary: summary,
            })
            .await?;
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = %format!("invoke_agent {}", agent.name),
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.agent.name" = %agent.name,
            "gen_ai.prompt.name" = agent.prompt.as_ref().map(|p| p.path.as_str()).unwrap_or_default(),
            run_id = %run_id,
            parent_run_id = parent_id.unwrap_or_default(),
            termination = tracing::field::Empty,
        );
        let outcome = self
            .execute(agent, trigger, run_id, cancel)
            .instrument(span.clone())
            .await?;
        span.record("termination", outcome.termination.as_str());
        Ok(outcome)
    }

    async fn execute(
        &self,
        agent: &AgentConfig,
        trigger: &TriggerEvent,
        run_id: String,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        let recorder = Recorder::new(self.store.clone(), run_id.clone(), trigger.private);
        self.store
            .transition(&run_id, RunStatus::Queued, RunStatus::Running)
            .await?;
        recorder
            .event(
                "run_started",
                json!({"agent": agent.name, "source": trigger.source, "kind": trigger.kind, "mock_tools": self.mock_tools}),
            );
        let mut allowed = match &agent.tools {
            ToolSelection::List(list) => list.clone(),
            ToolSelection::Inherit => Vec::new(),
        };
        for base in BASE_TOOLS {
            if !allowed.iter().any(|a| a == base) {
                allowed.push((*base).to_string());
            }
        }
        let encoding = agent.models.first().map_or(Encoding::O200k, Encoding::for_model);
        // Private runs keep their files in memory only: no content reaches the store.
        let store = (!trigger.private).then(|| self.store.clone());
        let files = Arc::new(RunFiles::new(
            &run_id,
            store,
            self.tokens.clone(),
            encoding,
            agent.context.file_threshold_tokens,
        ));
        let mut attachments = Vec::new();
        for a in &trigger.attachments {
            let meta = files.add(a.clone(), FileSource::Attachment, None).await?;
            recorder.event("file_added", json!({"file": meta.id, "name": recorder.content(&meta.name), "mime": meta.mime, "bytes": meta.size_bytes}));
            attachments.push(meta);
        }
        let result = match self.providers.chain(&agent.models) {
            Ok(chain) => {
                let opening =
                    inputs::opening_message(&files, agent, trigger.to_prompt(), &attachments).await?;
                let run = llm::LlmRun {
                    agent,
                    chain: &chain,
                    tools: &self.tools,
                    allowed,
                    mock_tools: self.mock_tools,
                    recorder: &recorder,
                    cancel,
                    files: files.clone(),
                    counter: &self.tokens,
                    reinject: Vec::new(),
                };
                run.run(opening).await?
            }
            Err(e) => llm::LoopOutcome {
                termination: Termination::ProviderError,
                error: Some(e.message),
                ..llm::LoopOutcome::empty()
            },
        };

        let kept = if agent.output.reply {
            result.final_text.clone()
        } else {
            None
        };
        match (&result.final_text, result.termination) {
            (Some(text), Termination::Completed) => {
                recorder
                    .event(
                        "final_answer",
                        json!({"text": recorder.content(text), "kept": agent.output.reply, "chars": text.chars().count()}),
                    )
            }
            (_, Termination::Completed) => {}
            (_, t) => {
                tracing::warn!(termination = t.as_str(), error = result.error.as_deref().unwrap_or_default(), "run ended early");
                recorder
                    .event("run_error", json!({"termination": t.as_str(), "error": result.error}))
            }
        }
        let status = result.termination.status();
        let finish = RunFinish {
            status,
            termination: result.termination.as_str().to_string(),
            error: result.error.clone(),
            final_text: kept.as_deref().map(|t| recorder.content(t)),
            turns: result.turns,
            tool_calls: result.tool_calls,
            usage: result.usage,
            cost_usd: result.cost_usd,
        };
        recorder.event(
            "run_finished",
            json!({"status": status, "termination": result.termination.as_str()}),
        );
        recorder.flush().await?;
        self.store
            .finish_run(&run_id, RunStatus::Running, &finish)
            .await?;
        Ok(RunOutcome {
            run_id,
            status,
            termination: result.termination,
            final_text: kept,
            error: result.error,
            usage: result.usage,
            cost_usd: result.cost_usd,
            turns: result.turns,
            tool_calls: result.tool_calls,
        })
    }
}
