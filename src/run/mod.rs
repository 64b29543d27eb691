//! Running one agent on one trigger: create the run record, drive the coordinator,
//! record every step, and finish the run with a named termination reason.
//!
//! "Every agent is a subagent": top-level runs and subagent calls go through
//! [`Runner::run`] with different configs.

pub mod attachments;
pub mod compaction;
pub mod context;
pub mod gateway;
pub mod inputs;
pub mod llm;
pub mod prompts;
pub mod recorder;
pub mod reply;
pub mod report;
pub mod script;
pub mod subagents;
pub mod termination;

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use std::collections::BTreeMap;

use crate::config::BASE_TOOLS;
use crate::config::{AgentConfig, Coordinator, ToolSelection};
use crate::files::{FileSource, RunFiles};
use crate::provider::{ProviderSet, Usage};
use crate::skills::{RunSkills, SkillSet};
use crate::store::{NewRun, RunFinish, RunStatus, Store, StoreError};
use crate::tokens::{Encoding, TokenCounter};
use crate::tools::ToolRegistry;
use crate::tools::skills::SKILL_TOOLS;
use crate::types::ModelRef;

use crate::triggers::{Origin, TriggerEvent};
pub use recorder::Recorder;
pub use termination::Termination;

/// Shared by every run of a process.
#[derive(Clone)]
pub struct Runner {
    pub store: Arc<dyn Store>,
    pub providers: ProviderSet,
    pub tools: Arc<ToolRegistry>,
    /// Use every tool's mock instead of its real implementation.
    pub mock_tools: bool,
    pub tokens: Arc<TokenCounter>,
    /// Subagent configs by name.
    pub subagents: Arc<BTreeMap<String, Arc<AgentConfig>>>,
    pub skills: Arc<SkillSet>,
    /// Where final answers are posted.
    pub outputs: Arc<reply::Outputs>,
    /// How attached documents are extracted (bounds, worker process).
    pub extractor: Arc<crate::files::extractor::Extractor>,
}

/// Where a run sits in a tree of runs.
#[derive(Clone)]
pub struct Lineage {
    pub parent_id: Option<String>,
    /// 0 for a top-level run.
    pub depth: u32,
    /// From the top-level agent's `limits.subagent_depth`.
    pub max_depth: u32,
    /// The parent's tools, for `tools: inherit`.
    pub inherited_tools: Vec<String>,
    /// The parent's models, for subagents without their own.
    pub parent_models: Vec<ModelRef>,
    /// The parent's files and the ids this run may see.
    pub files: Option<(Arc<RunFiles>, Vec<String>)>,
    /// A run row created beforehand (by the server's dispatcher) to execute.
    pub existing_run: Option<String>,
}

impl Lineage {
    /// A top-level run of `agent`.
    pub fn root(agent: &AgentConfig) -> Lineage {
        Lineage {
            parent_id: None,
            depth: 0,
            max_depth: agent.limits.subagent_depth,
            inherited_tools: Vec::new(),
            parent_models: Vec::new(),
            files: None,
            existing_run: None,
        }
    }
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
    pub skill_loads: BTreeMap<String, u32>,
}

/// A failure of the harness itself (the run could not be recorded).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Files(String),
    #[error("run {0} is not queued (another worker took it)")]
    NotQueued(String),
    #[error("{0}")]
    Prompt(String),
}

impl Runner {
    /// Runs `agent` on `trigger` as a top-level run and returns how it ended. Provider,
    /// tool and cap failures end the run (recorded, `Ok`); only store failures are `Err`.
    pub async fn run(
        &self,
        agent: &AgentConfig,
        trigger: &TriggerEvent,
        parent_id: Option<&str>,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        let mut lineage = Lineage::root(agent);
        lineage.parent_id = parent_id.map(str::to_string);
        self.run_in(agent, trigger, lineage, cancel).await
    }

    /// Runs `agent` at a place in a tree of runs: the same code serves top-level runs and
    /// subagent calls ("every agent is a subagent").
    pub async fn run_in(
        &self,
        agent: &AgentConfig,
        trigger: &TriggerEvent,
        lineage: Lineage,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        // Prompts hosted in Notion are fetched (or taken from the cache) first.
        let resolved = self
            .outputs
            .prompts
            .resolve(agent, self.outputs.notion.as_ref())
            .await
            .map_err(RunError::Prompt)?;
        let agent = resolved.as_ref().unwrap_or(agent);
        let run_id = match &lineage.existing_run {
            Some(id) => id.clone(),
            None => {
                let id = uuid::Uuid::now_v7().to_string();
                self.store
                    .create_run(&NewRun {
                        id: id.clone(),
                        agent: agent.name.clone(),
                        parent_id: lineage.parent_id.clone(),
                        trigger_summary: trigger_summary(trigger),
                        event_id: None,
                    })
                    .await?;
                id
            }
        };
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = %format!("invoke_agent {}", agent.name),
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.agent.name" = %agent.name,
            "gen_ai.prompt.name" = agent.prompt.as_ref().map(|p| p.path.as_str()).unwrap_or_default(),
            run_id = %run_id,
            parent_run_id = lineage.parent_id.as_deref().unwrap_or_default(),
            depth = lineage.depth,
            termination = tracing::field::Empty,
        );
        let outcome = self
            .execute(agent, trigger, run_id, lineage, cancel)
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
        lineage: Lineage,
        cancel: CancellationToken,
    ) -> Result<RunOutcome, RunError> {
        let recorder = Arc::new(Recorder::new(self.store.clone(), run_id.clone(), trigger.private));
        self.store
            .transition(&run_id, RunStatus::Queued, RunStatus::Running)
            .await?;
        recorder.event(
            "run_started",
            json!({
                "agent": agent.name, "source": trigger.source, "kind": trigger.kind,
                "mock_tools": self.mock_tools, "parent_id": lineage.parent_id, "depth": lineage.depth,
            }),
        );
        let models = if agent.models.is_empty() {
            lineage.parent_models.clone()
        } else {
            agent.models.clone()
        };
        let encoding = models.first().map_or(Encoding::O200k, Encoding::for_model);
        // Private runs keep their files in memory only: no content reaches the store.
        let store = (!trigger.private).then(|| self.store.clone());
        let files = Arc::new(match &lineage.files {
            Some((parent, ids)) => parent
                .subset(ids, &run_id, store)
                .map_err(|e| RunError::Files(e.to_string()))?,
            None => RunFiles::new(
                &run_id,
                store,
                self.tokens.clone(),
                encoding,
                agent.context.file_threshold_tokens,
            )
            .with_extractor(self.extractor.clone()),
        });
        let mut attachments = files.list();
        let (fetched, attachment_notes) =
            attachments::fetch(&self.outputs, trigger, crate::integrations::attachment_cap()).await;
        for note in &attachment_notes {
            recorder.event("attachment_refused", json!({"note": note}));
        }
        for a in trigger.attachments.iter().chain(&fetched) {
            let meta = files.add(a.clone(), FileSource::Attachment, None).await?;
            recorder.event(
                "file_added",
                json!({"file": meta.id, "name": recorder.content(&meta.name), "mime": meta.mime, "bytes": meta.size_bytes}),
            );
            attachments.push(meta);
        }

        let skills = Arc::new(RunSkills::new(self.skills.clone(), &agent.skills));
        let can_delegate = lineage.depth < lineage.max_depth && !agent.subagents.is_empty();
        let allowed = allowed_tools(agent, &lineage, !skills.is_empty(), can_delegate);
        let child_totals = Arc::new(std::sync::Mutex::new((Usage::default(), 0.0)));
        let launcher: Option<Arc<dyn crate::tools::subagent::SubagentLauncher>> = can_delegate.then(|| {
            Arc::new(subagents::Launcher {
                runner: self.clone(),
                parent_id: run_id.clone(),
                parent_private: trigger.private,
                parent_allowed: allowed.clone(),
                parent_models: models.clone(),
                parent_files: files.clone(),
                names: agent.subagents.clone(),
                depth: lineage.depth,
                max_depth: lineage.max_depth,
                semaphore: tokio::sync::Semaphore::new(agent.limits.subagent_concurrency.max(1) as usize),
                totals: child_totals.clone(),
            }) as Arc<dyn crate::tools::subagent::SubagentLauncher>
        });

        let mut system = llm::system_prompt(agent);
        if let Some(catalog) = skills.catalog() {
            system.push('\n');
            system.push_str(&catalog);
        }
        if can_delegate {
            system
                .push_str("\n## Subagents\n\nHand self-contained tasks to these with the `subagent` tool:\n");
            for name in &agent.subagents {
                let description = self
                    .subagents
                    .get(name)
                    .map(|s| s.description.replace('\n', " "))
                    .unwrap_or_default();
                system.push_str(&format!("\n- {name}: {description}"));
            }
            system.push('\n');
        }

        let gateway = gateway::Gateway::new(gateway::GatewayParts {
            agent: agent.name.clone(),
            tools: self.tools.clone(),
            allowed,
            mock: self.mock_tools,
            recorder: recorder.clone(),
            files: files.clone(),
            skills: (!skills.is_empty()).then(|| skills.clone()),
            subagents: launcher.clone(),
            max_tool_calls: agent.limits.max_tool_calls,
        });
        let result = if let Coordinator::Script { path, source } = &agent.coordinator {
            let host = script::new_host(gateway, launcher, cancel, agent.limits.timeout);
            let mut out = script::run(
                &path.display().to_string(),
                source,
                &agent.sandbox,
                host,
                trigger,
                &agent.vars,
            )
            .await;
            let (u, c) = std::mem::take(&mut *child_totals.lock().unwrap_or_else(|e| e.into_inner()));
            out.usage.add(&u);
            out.cost_usd += c;
            out
        } else {
            match (
                self.providers.chain(&models),
                skills.required_message(&agent.skills.required),
            ) {
                (Err(e), _) => llm::LoopOutcome {
                    termination: Termination::ProviderError,
                    error: Some(e.message),
                    ..llm::LoopOutcome::empty()
                },
                (_, Err(e)) => llm::LoopOutcome {
                    termination: Termination::ToolError,
                    error: Some(e),
                    ..llm::LoopOutcome::empty()
                },
                (Ok(chain), Ok(required)) => {
                    let mut prompt = trigger.to_prompt();
                    for note in &attachment_notes {
                        prompt.push_str(&format!(
                            "
[steward: {note}]"
                        ));
                    }
                    let opening = inputs::opening_message(&files, agent, prompt, &attachments).await?;
                    let run = llm::LlmRun {
                        agent,
                        chain: &chain,
                        gateway,
                        recorder: &recorder,
                        cancel,
                        files: files.clone(),
                        counter: &self.tokens,
                        reinject: required.map(crate::provider::Message::user).into_iter().collect(),
                        system,
                        child_totals,
                    };
                    run.run(opening).await?
                }
            }
        };

        let kept = if agent.output.reply {
            result.final_text.clone()
        } else {
            None
        };
        // Top-level runs post their answer where the trigger came from.
        if let (Some(text), true, None) = (
            &kept,
            result.termination == Termination::Completed,
            &lineage.parent_id,
        ) {
            match self.outputs.post(agent, &trigger.origin, text, &recorder).await {
                Ok(Some(sent)) => recorder.event(
                    "reply_sent",
                    json!({"ok": true, "ts": sent["ts"], "id": sent["id"]}),
                ),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(run = %run_id, error = %e, "cannot post the reply");
                    recorder.event("reply_sent", json!({"ok": false, "error": e.to_string()}));
                }
            }
        }
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
                let error = result.error.as_deref().map(|e| recorder.content(e)).unwrap_or_default();
                tracing::warn!(termination = t.as_str(), error = %error, "run ended early");
                recorder
                    .event("run_error", json!({"termination": t.as_str(), "error": result.error}))
            }
        }
        let status = result.termination.status();
        let finish = RunFinish {
            status,
            termination: result.termination.as_str().to_string(),
            // Errors can quote the input (a script that throws the message text).
            error: result.error.as_deref().map(|e| recorder.content(e)),
            final_text: kept.as_deref().map(|t| recorder.content(t)),
            turns: result.turns,
            tool_calls: result.tool_calls,
            usage: result.usage,
            cost_usd: result.cost_usd,
            skill_loads: skills.loads(),
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
            skill_loads: skills.loads(),
        })
    }
}

/// The summary stored for a run: never message content from a private trigger.
pub fn trigger_summary(trigger: &TriggerEvent) -> String {
    if trigger.private {
        format!("{} {} (private)", trigger.source, trigger.kind)
    } else {
        trigger.summary.clone()
    }
}

/// The tools a run may call: its own list (or the parent's for `inherit`), the base
/// file tools, the skill tools when it has skills, and `subagent` when it may delegate.
fn allowed_tools(
    agent: &AgentConfig,
    lineage: &Lineage,
    has_skills: bool,
    can_delegate: bool,
) -> Vec<String> {
    let mut allowed: Vec<String> = match &agent.tools {
        ToolSelection::List(list) => list.clone(),
        ToolSelection::Inherit => lineage
            .inherited_tools
            .iter()
            .filter(|t| *t != "subagent")
            .cloned()
            .collect(),
    };
    let extra = BASE_TOOLS
        .iter()
        .chain(if has_skills { SKILL_TOOLS } else { &[] })
        .chain(if can_delegate { &["subagent"][..] } else { &[] });
    for name in extra {
        if !allowed.iter().any(|a| a == name) {
            allowed.push((*name).to_string());
        }
    }
    if !can_delegate {
        allowed.retain(|t| t != "subagent");
    }
    allowed
}
