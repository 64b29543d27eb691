//! Running one agent on one trigger: create the run record, drive the coordinator,
//! record every step, and finish the run with a named termination reason.
//!
//! "Every agent is a subagent": top-level runs and subagent calls go through
//! [`Runner::run`] with different configs.

pub mod approval;
pub mod bill;
pub mod builder;
pub mod compaction;
pub mod context;
pub mod conversation;
pub mod coordinator;
pub mod custody;
pub mod events;
pub mod failure;
pub mod gateway;
pub mod inbox;
pub mod inputs;
pub mod llm;
pub mod metering;
pub mod presence;
pub mod prompts;
pub mod recorder;
pub mod reply;
pub mod report;
pub mod script;
pub mod status;
pub mod stop;
pub mod subagents;
pub mod thread;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use std::collections::BTreeMap;

use crate::config::BASE_TOOLS;
use crate::config::{AgentConfig, ToolSelection};
use crate::files::RunFiles;
use crate::provider::ProviderSet;
use crate::skills::SkillSet;
use crate::store::{NewRun, RunStatus, Store, StoreError};
use crate::tokens::TokenCounter;
use crate::tools::ToolRegistry;
use crate::tools::skills::SKILL_TOOLS;
use crate::types::ModelRef;

use crate::triggers::{Origin, Sources, TriggerEvent};
pub use crate::types::{RunOutcome, Termination};
pub use events::RunEvent;
pub use recorder::Recorder;

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
    /// Where final answers are posted and trigger files fetched from.
    pub sources: Arc<Sources>,
    /// Prompts hosted in Notion, with their last good copies.
    pub prompts: Arc<prompts::PromptCache>,
    /// How attached documents are extracted (bounds, worker process).
    pub extractor: Arc<crate::files::extractor::Extractor>,
    /// The process's Prometheus metrics; every run's events are counted here.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Record message content on spans (never for private runs):
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
    pub capture_content: bool,
    /// Fired when the service stops and its grace period is over. Runs started by the
    /// service take child tokens of it; a run cancelled this way ends `interrupted`.
    pub interrupt: CancellationToken,
    /// Seals what a private run leaves at rest while it waits for an approval
    /// (`STEWARD_DATA_KEY`); without it a private run cannot wait.
    pub data_key: Option<crate::types::seal::DataKey>,
    /// Enter a top-level run's span on every poll of the run, so log lines inside it
    /// carry the run. Off when logs do not show spans: spans made in the run then name
    /// it as their parent explicitly, and the per-poll cost is saved.
    pub instrument_runs: bool,
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
    /// Tools a run above this one needs a person's approval for: never called here,
    /// where no one can be asked (a subagent's own `tools:` list included).
    pub gated: Vec<String>,
    /// The parent's models, for subagents without their own.
    pub parent_models: Vec<ModelRef>,
    /// The parent's files and the ids this run may see.
    pub files: Option<(Arc<RunFiles>, Vec<String>)>,
    /// A run row created beforehand (by the server's dispatcher) to execute.
    pub existing_run: Option<String>,
    /// Where later messages of the run's conversation are handed to it (LLM runs the
    /// server starts in a conversation).
    pub inbox: Option<Arc<inbox::Inbox>>,
    /// The run's status where it was asked (top-level runs; set by `run_in`).
    pub presence: Option<Arc<presence::Presence>>,
    /// A person's Stop for this run (runs the server starts from Slack); the run's
    /// cancellation token is its token.
    pub stop: Option<Arc<stop::StopSignal>>,
    /// The reply streaming where it will land (top-level LLM runs answering in a Slack
    /// thread; set by `run_in`).
    pub live: Option<Arc<dyn crate::triggers::source::Live>>,
    /// Whether the top-level run answers where more people than the asker read
    /// (subagents take their parent's; `None`: from the trigger).
    pub answers_in_public: Option<bool>,
    /// The person a subagent's parent run acts for: the subagent reads Slack for them
    /// (their private conversations, as a member), not as a run no person started.
    pub acting_for: Option<String>,
    /// Their workspace (an Enterprise Grid channel of another one is read as private).
    pub acting_team: Option<String>,
    /// What a subagent's parent run knew of URLs (`run::custody`): those it received
    /// and the hosts it wrote. The subagent's prompt is the parent model's writing, so
    /// its own URLs are not received.
    pub custody: custody::Remembered,
    /// A run the server's dispatcher started, whose row the next start's reconcile
    /// retries: when steward stops before it ends and it made no side effect, it is
    /// left for that retry ([`RunError::LeftForNextStart`]) rather than ended
    /// `interrupted`.
    pub retry_interrupted: bool,
}

impl Lineage {
    /// A top-level run of `agent`.
    pub fn root(agent: &AgentConfig) -> Lineage {
        Lineage {
            parent_id: None,
            depth: 0,
            max_depth: agent.limits.subagent_depth,
            inherited_tools: Vec::new(),
            gated: Vec::new(),
            parent_models: Vec::new(),
            files: None,
            existing_run: None,
            inbox: None,
            presence: None,
            stop: None,
            live: None,
            answers_in_public: None,
            acting_for: None,
            acting_team: None,
            custody: Default::default(),
            retry_interrupted: false,
        }
    }
}

/// A failure of the harness itself (the run could not be recorded).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Files(String),
    /// A parked run's checkpoint could not be written, sealed or read back.
    #[error("approval checkpoint: {0}")]
    Checkpoint(String),
    /// steward stopped before the run ended and it made no side effect: its row stays
    /// `running` for the next start to retry (see [`Lineage::retry_interrupted`]).
    #[error("left for the next start: steward stopped before the run ended, and it made no side effect")]
    LeftForNextStart,
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
                        source: trigger.source.clone(),
                        kind: trigger.kind.clone(),
                        actor: trigger.actor(),
                        private: trigger.private,
                        thread_key: None,
                    })
                    .await?;
                id
            }
        };
        let span = tracing::info_span!(
            // A subagent's run is a child of its parent's tool call.
            parent: crate::telemetry::parent(),
            "invoke_agent",
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.agent.name" = %agent.name,
            "gen_ai.prompt.name" = agent.prompt.as_ref().map(|p| p.path.as_str()).unwrap_or_default(),
            "gen_ai.agent.id" = %run_id,
            "gen_ai.conversation.id" = %run_id,
            run_id = %run_id,
            parent_run_id = lineage.parent_id.as_deref().unwrap_or_default(),
            depth = lineage.depth,
            "steward.trigger.source" = %trigger.source,
            "steward.trigger.kind" = %trigger.kind,
            "steward.coordinator" = agent.coordinator.kind(),
            termination = tracing::field::Empty,
            "gen_ai.usage.input_tokens" = tracing::field::Empty,
            "gen_ai.usage.output_tokens" = tracing::field::Empty,
            "steward.turns" = tracing::field::Empty,
            "steward.tool_calls" = tracing::field::Empty,
            "steward.cost_usd" = tracing::field::Empty,
        );
        // A top-level run continues the trace of the request that brought its event.
        if lineage.parent_id.is_none()
            && let Some(traceparent) = &trigger.traceparent
        {
            crate::telemetry::continue_trace(&span, traceparent);
        }
        // Prompts hosted in Notion are fetched (or taken from the cache) first; a run
        // whose prompt cannot be had fails now rather than waiting in the queue. It still
        // has its span, its log line and its failure notice.
        let resolved = match self
            .prompts
            .resolve(agent, &self.sources, self.store.as_ref())
            .await
        {
            Ok(resolved) => resolved,
            Err(e) => {
                let outcome = self
                    .end_unstarted(run_id, agent, trigger, Termination::PromptUnavailable, e)
                    .instrument(span.clone())
                    .await?;
                span.record("termination", outcome.termination.as_str());
                if lineage.parent_id.is_none() {
                    status::ended(&self.sources, agent, trigger, &outcome).await;
                }
                return Ok(outcome);
            }
        };
        let agent = resolved.as_ref().unwrap_or(agent);
        let top_level = lineage.parent_id.is_none();
        // The "working" status goes up while the run starts, not before it: the person
        // waits for one Slack call less (the first model call waits for it).
        let mut lineage = lineage;
        if top_level {
            lineage.presence = presence::Presence::start(self.sources.clone(), agent, trigger);
            let streams = agent.output.stream && agent.output.reply && agent.takes_handoffs();
            lineage.live = self
                .sources
                .for_origin(&trigger.origin)
                .filter(|_| streams)
                .and_then(|s| s.live(&trigger.origin));
        }
        let presence = lineage.presence.clone();
        // A subagent's run is always entered: it runs inside its parent's tool span,
        // which would otherwise be the current span of everything it does.
        let execute = self.execute(agent, trigger, run_id, lineage, cancel, span.clone());
        let outcome = if self.instrument_runs || !top_level {
            execute.instrument(span.clone()).await
        } else {
            execute.await
        };
        // A run waiting for an approval has not ended: its status stays to the request.
        let ended = outcome
            .as_ref()
            .ok()
            .filter(|o| o.termination != Termination::AwaitingApproval);
        if let Some(p) = &presence {
            p.end(ended.map(status::progress_of)).await;
        }
        let outcome = outcome?;
        if top_level && outcome.termination != Termination::AwaitingApproval {
            status::ended(&self.sources, agent, trigger, &outcome).await;
        }
        span.record("termination", outcome.termination.as_str());
        span.record("gen_ai.usage.input_tokens", outcome.usage.input_tokens);
        span.record("gen_ai.usage.output_tokens", outcome.usage.output_tokens);
        span.record("steward.turns", outcome.turns);
        span.record("steward.tool_calls", outcome.tool_calls);
        span.record("steward.cost_usd", outcome.cost_usd);
        let mut outcome = outcome;
        outcome.traceparent = crate::telemetry::traceparent(&span);
        Ok(outcome)
    }

    /// Ends a run that could not start (its prompt could not be loaded).
    async fn end_unstarted(
        &self,
        run_id: String,
        agent: &AgentConfig,
        trigger: &TriggerEvent,
        termination: Termination,
        error: String,
    ) -> Result<RunOutcome, RunError> {
        tracing::warn!(run = %run_id, termination = termination.as_str(), error = %error, "run could not start");
        let recorder = Recorder::new(self.store.clone(), run_id.clone(), trigger.private)
            .metered(metering::Meter::new(self.metrics.clone(), &agent.name));
        self.store
            .transition(&run_id, RunStatus::Queued, RunStatus::Running)
            .await?;
        recorder.record(RunEvent::RunError {
            termination,
            error: Some(recorder.wrap(error.as_str())),
        });
        let result = RunOutcome::new(run_id).stopped(termination, Some(error));
        self.close(&recorder, result).await
    }

    /// prepare → coordinate → finish.
    async fn execute(
        &self,
        agent: &AgentConfig,
        trigger: &TriggerEvent,
        run_id: String,
        lineage: Lineage,
        cancel: CancellationToken,
        span: tracing::Span,
    ) -> Result<RunOutcome, RunError> {
        let stop = lineage.stop.clone();
        let retry_interrupted = lineage.retry_interrupted;
        // Entered while preparing (once per run): attachment extraction spans are its.
        let cx = context::prepare(self, agent, trigger, run_id, lineage, cancel, span.clone())
            .instrument(span)
            .await?;
        let mut result = coordinator::for_agent(agent).coordinate(&cx).await?;
        if result.termination == Termination::Cancelled
            && self.interrupt.is_cancelled()
            && retry_interrupted
            && self.retry_is_safe(&cx).await?
        {
            // Nothing it did needs undoing: the next start runs it again from the
            // beginning (reconcile's retry), rather than asking the person to ask again.
            if let Some(live) = &cx.live {
                live.abandon().await;
            }
            cx.recorder.record(RunEvent::Interrupted {
                reason: "steward stopped before this run finished; the next start runs it again",
            });
            cx.recorder.flush().await?;
            return Err(RunError::LeftForNextStart);
        }
        if result.termination == Termination::Cancelled && self.interrupt.is_cancelled() {
            result.termination = Termination::Interrupted;
            result.error = Some("steward stopped before this run finished (the grace period ran out)".into());
        } else if result.termination == Termination::Cancelled
            && let Some(by) = stop.as_ref().and_then(|s| s.stopped_by())
        {
            result.termination = Termination::StoppedByUser;
            result.error = Some(format!("stopped by {by}"));
        }
        self.finish(cx, result).await
    }

    /// Whether run `cx`, stopped by steward, may run again from the beginning without
    /// anyone seeing or getting anything twice: no side-effecting call of its own, no
    /// part of its reply shown, and no subagent or skill script called (what those did
    /// is not in this run's events: a subagent posting with inherited tools, a script
    /// calling an API).
    async fn retry_is_safe(&self, cx: &context::RunContext<'_>) -> Result<bool, RunError> {
        if cx.live.as_ref().is_some_and(|l| l.shown()) {
            return Ok(false);
        }
        cx.recorder.flush().await?;
        Ok(repeats_nothing(self.store.as_ref(), &cx.run_id).await?)
    }

    /// Posts the answer of a completed top-level run where its trigger came from,
    /// records how the run ended and writes its totals.
    async fn finish(
        &self,
        cx: context::RunContext<'_>,
        mut result: RunOutcome,
    ) -> Result<RunOutcome, RunError> {
        // A stream that will carry no answer closes as it is (its text stays).
        let answering =
            result.termination == Termination::Completed && result.final_text.is_some() && agent_replies(&cx);
        if !answering && let Some(live) = &cx.live {
            live.abandon().await;
        }
        if result.termination == Termination::AwaitingApproval {
            let parked = approval::park(self, &cx, result).await?;
            if parked.termination == Termination::AwaitingApproval {
                return Ok(parked);
            }
            // It could not wait (a private run without a data key): it ends here.
            result = parked;
        }
        let (agent, recorder) = (cx.agent, &cx.recorder);
        let completed = result.termination == Termination::Completed;
        // Top-level runs post their answer where the trigger came from.
        if let (Some(text), true, true, None) =
            (&result.final_text, agent.output.reply, completed, &cx.parent_id)
        {
            // An answer drawing on a private conversation that others than its members
            // would read goes to the asker alone (`run::custody`).
            let private_to = match cx.gateway.custody().answer_leaves() {
                true => Some(
                    reply::private_destination(&self.sources, cx.gateway.custody(), &cx.trigger.origin).await,
                ),
                false => None,
            };
            let (origin, live) = match &private_to {
                Some(Ok(dm)) => {
                    if let Some(live) = &cx.live {
                        live.abandon().await;
                    }
                    // A link to the private source, never a quote: Slack shows a
                    // private channel's link only to its members.
                    let custody = cx.gateway.custody();
                    let links: Vec<String> = custody
                        .sources()
                        .iter()
                        .filter(|c| c.starts_with(['C', 'G']) && c.bytes().all(|b| b.is_ascii_alphanumeric()))
                        .map(|c| format!("<#{c}>"))
                        .collect();
                    let from = match links.is_empty() {
                        true => String::new(),
                        false => format!(" ({})", links.join(", ")),
                    };
                    let note = format!(
                        "I sent my answer to <@{}> directly: it draws on a private conversation{from}.",
                        custody.asker().unwrap_or_default()
                    );
                    if let Err(e) =
                        reply::post(&self.sources, agent, &cx.trigger.origin, &note, recorder, None).await
                    {
                        tracing::warn!(run = %cx.run_id, error = %e, "cannot say where the answer went");
                    }
                    (dm.clone(), None)
                }
                Some(Err(why)) => {
                    if let Some(live) = &cx.live {
                        live.abandon().await;
                    }
                    tracing::warn!(run = %cx.run_id, "answer withheld: {why}");
                    recorder.record(RunEvent::ReplySent {
                        ok: false,
                        ts: None,
                        id: None,
                        error: Some(recorder.wrap(format!("withheld: {why}"))),
                    });
                    (cx.trigger.origin.clone(), None)
                }
                None => (cx.trigger.origin.clone(), cx.live.clone()),
            };
            let withheld = matches!(private_to, Some(Err(_)));
            let posted = match withheld {
                true => Ok(None),
                false => reply::post(&self.sources, agent, &origin, text, recorder, live.as_deref()).await,
            };
            match posted {
                Ok(Some(sent)) => {
                    recorder.record(RunEvent::ReplySent {
                        ok: true,
                        ts: Some(sent["ts"].clone()),
                        id: Some(sent["id"].clone()),
                        error: None,
                    });
                    thread::remember(self.store.as_ref(), agent, &cx.trigger.origin).await;
                    if !cx.answered_before.load(std::sync::atomic::Ordering::Relaxed)
                        && let Some(source) = self.sources.for_origin(&cx.trigger.origin)
                        // The person's own words name it; a title lives in Slack only.
                        && let title = cx.trigger.text.as_deref().unwrap_or(&cx.trigger.summary)
                        && let Err(e) = source.name_conversation(&cx.trigger.origin, title).await
                    {
                        tracing::debug!(error = %e, "cannot title the conversation");
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(run = %cx.run_id, error = %e, "cannot post the reply");
                    recorder.record(RunEvent::ReplySent {
                        ok: false,
                        ts: None,
                        id: None,
                        error: Some(recorder.wrap(e.to_string())),
                    });
                    // The service refused the answer: nobody got it, so the run failed
                    // to deliver and says so. Without a configured source (evals, the
                    // CLI) there was nowhere to deliver to; the answer stands.
                    if !matches!(e, crate::integrations::ApiError::NotConfigured(_)) {
                        result.termination = Termination::Undelivered;
                        result.error = Some(format!("the reply could not be delivered: {e}"));
                    }
                }
            }
        }
        match (&result.final_text, result.termination) {
            (Some(text), Termination::Completed) => recorder.record(RunEvent::FinalAnswer {
                text: recorder.wrap(text.as_str()),
                kept: agent.output.reply,
                chars: text.chars().count(),
            }),
            (_, Termination::Completed) => {}
            (_, termination) => {
                let error = recorder.privacy().wrap_opt(result.error.as_deref());
                tracing::warn!(termination = termination.as_str(), error = ?error, "run ended early");
                recorder.record(RunEvent::RunError { termination, error });
            }
        }
        if !agent.output.reply {
            result.final_text = None;
        }
        result.skill_loads = cx.skills.loads();
        result.private_sources = cx.gateway.custody().sources();
        for (skill, n) in &result.skill_loads {
            self.metrics.skill_loaded(&agent.name, skill, u64::from(*n));
        }
        self.close(recorder, result).await
    }

    /// Writes how a run ended: the `run_finished` event, then its totals and
    /// termination on the run row (moving it out of `running`).
    async fn close(&self, recorder: &Recorder, result: RunOutcome) -> Result<RunOutcome, RunError> {
        recorder.record(RunEvent::RunFinished {
            status: result.status(),
            termination: result.termination,
        });
        recorder.flush().await?;
        self.store
            .finish_run(&result.run_id, RunStatus::Running, &result, recorder.privacy())
            .await?;
        Ok(result)
    }
}

/// Whether run `run_id`, run again from the beginning, repeats nothing anyone would
/// see twice, as far as its stored events tell: no side-effecting call or posted reply,
/// and no subagent or skill script called (what those did is not in this run's events:
/// a subagent posting with inherited tools, a script calling an API). Crash recovery
/// and a stop's retry both ask.
pub async fn repeats_nothing(store: &dyn Store, run_id: &str) -> Result<bool, StoreError> {
    if store.has_side_effects(run_id).await? {
        return Ok(false);
    }
    let opaque = [
        crate::tools::subagent::SUBAGENT_TOOL,
        crate::tools::skill_script::SKILL_SCRIPT_TOOL,
    ];
    let events = store.run_events(run_id).await?;
    Ok(!events
        .iter()
        .any(|e| e.kind == "tool_call" && opaque.contains(&e.data["name"].as_str().unwrap_or_default())))
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

/// Whether a run's answer is posted where its trigger came from (a top-level run of an
/// agent that replies).
fn agent_replies(cx: &context::RunContext<'_>) -> bool {
    cx.agent.output.reply && cx.parent_id.is_none()
}
