//! Coordinators drive a prepared run to its end: the LLM tool-calling loop, or a Rhai
//! script that calls the same tools. Both work only through the [`RunContext`] (and
//! its gateway) and return the same [`RunOutcome`].

use async_trait::async_trait;
use tracing::Instrument;

use super::context::RunContext;
use super::llm::LlmRun;
use super::{RunError, Termination, inputs, script};
use crate::config::AgentConfig;
use crate::types::RunOutcome;

/// Drives one run from its opening to a termination.
#[async_trait]
pub trait Coordinator: Send + Sync {
    async fn coordinate(&self, cx: &RunContext<'_>) -> Result<RunOutcome, RunError>;
}

/// The coordinator an agent's config asks for.
pub fn for_agent(agent: &AgentConfig) -> Box<dyn Coordinator> {
    match &agent.coordinator {
        crate::config::Coordinator::Script { path, source } => Box::new(ScriptCoordinator {
            path: path.display().to_string(),
            source: source.clone(),
        }),
        _ => Box::new(LlmCoordinator),
    }
}

/// Whose work a run is at the provider's limit: a person waiting in Slack (and the
/// subagents a run waits on) goes ahead of scheduled and webhook work.
pub fn priority_of(origin: &crate::triggers::Origin) -> crate::provider::Priority {
    match origin {
        crate::triggers::Origin::Slack { .. } | crate::triggers::Origin::Subagent { .. } => {
            crate::provider::Priority::Interactive
        }
        _ => crate::provider::Priority::Background,
    }
}

/// The model decides which tools to call, turn by turn.
pub struct LlmCoordinator;

#[async_trait]
impl Coordinator for LlmCoordinator {
    async fn coordinate(&self, cx: &RunContext<'_>) -> Result<RunOutcome, RunError> {
        let chain = match cx.runner.providers.chain(&cx.models) {
            Ok(chain) => chain
                .capturing(cx.capture_content)
                .muted_by(cx.recorder.private_flag())
                .priority(priority_of(&cx.trigger.origin))
                .under(cx.span.clone())
                .caching(crate::provider::Caching {
                    long_ttl: cx.agent.context.cache_1h,
                    // One key per agent: its runs land on the same OpenAI cache.
                    key: Some(format!("steward:{}", cx.agent.name)),
                    retention: cx.agent.context.prompt_cache_retention.clone(),
                })
                .reasoning(cx.agent.reasoning.clone()),
            Err(e) => {
                let out = RunOutcome::new(cx.run_id.as_str());
                return Ok(out.stopped(Termination::ProviderError, Some(e.message)));
            }
        };
        let required = match cx.skills.required_message(&cx.agent.skills.required) {
            Ok(required) => required,
            Err(e) => {
                let out = RunOutcome::new(cx.run_id.as_str());
                return Ok(out.stopped(Termination::ToolError, Some(e.to_string())));
            }
        };
        // A run that waited for an approval carries on from its checkpoint.
        let start = match super::approval::resume_point(cx).await? {
            Some(resume) => super::approval::Start::Resume(resume),
            None => {
                let text = cx.runner.sources.readable_text(cx.trigger).await;
                let mut prompt = cx.trigger.to_prompt_with(text.as_deref());
                for note in &cx.attachment_notes {
                    prompt.push_str(&format!("\n[steward: {note}]"));
                }
                // Files of the conversation are listed with its earlier turns, not as
                // the request's attachments.
                let history = super::thread::history(cx, &mut prompt).await?;
                let opening = inputs::opening_message(&cx.files, cx.agent, prompt, &cx.attachments).await?;
                super::approval::Start::Fresh { history, opening }
            }
        };
        let run = LlmRun {
            agent: cx.agent,
            chain: &chain,
            gateway: cx.gateway.clone(),
            recorder: &cx.recorder,
            cancel: cx.cancel.clone(),
            files: cx.files.clone(),
            counter: &cx.runner.tokens,
            reinject: required.map(crate::provider::Message::user).into_iter().collect(),
            skills: cx.skills.clone(),
            system: cx.system.clone(),
            child_totals: cx.child_totals.clone(),
            inbox: cx.inbox.clone(),
            live: cx.live.clone(),
            // A subagent cannot wait for a person (its parent holds the run).
            can_seal: cx.runner.data_key.is_some() && cx.parent_id.is_none(),
        };
        // People see the run working before the model is asked.
        if let Some(presence) = &cx.presence {
            presence.started().await;
        }
        Ok(run.run(start).await?)
    }
}

/// A Rhai script calls tools and asks models (through subagents) where it needs to.
pub struct ScriptCoordinator {
    /// For messages.
    pub path: String,
    pub source: String,
}

#[async_trait]
impl Coordinator for ScriptCoordinator {
    async fn coordinate(&self, cx: &RunContext<'_>) -> Result<RunOutcome, RunError> {
        let cost_cap = cx
            .agent
            .limits
            .max_cost_usd
            .map(|cap| (cap, cx.child_totals.clone()));
        let host = script::new_host(
            cx.gateway.clone(),
            cx.cancel.clone(),
            cx.agent.limits.timeout,
            cost_cap,
        );
        let mut out = script::run(
            &self.path,
            &self.source,
            &cx.agent.sandbox,
            host,
            cx.trigger,
            &cx.agent.vars,
        )
        // Entered, so the `run_script` span it makes is the run's child; a script run
        // polls this future only a few times.
        .instrument(cx.span.clone())
        .await;
        let (usage, cost, unknown) = cx.child_totals.take();
        out.usage.add(&usage);
        out.cost_usd += cost;
        out.cost_unknown |= unknown;
        Ok(out)
    }
}
