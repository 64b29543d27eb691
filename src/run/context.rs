//! The run context: everything one run's coordinator works with, built once by
//! [`prepare`] (records, files, attachments, skills, subagents, system prompt, gateway).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::gateway::{Gateway, GatewayParts};
use super::subagents::{self, ChildTotals};
use super::{Lineage, Recorder, RunError, Runner, allowed_tools};
use crate::config::AgentConfig;
use crate::files::{FileMeta, FileSource, RunFiles};
use crate::run::events::RunEvent;

use crate::skills::RunSkills;
use crate::store::RunStatus;
use crate::tokens::Encoding;
use crate::tools::search_grant::SearchGrant;
use crate::tools::subagent::SubagentLauncher;
use crate::triggers::TriggerEvent;
use crate::types::ModelRef;

/// One run, prepared: what the coordinator needs and what `finish` reads back.
pub struct RunContext<'a> {
    pub runner: &'a Runner,
    pub agent: &'a AgentConfig,
    pub trigger: &'a TriggerEvent,
    pub run_id: String,
    /// The parent run, for subagent runs; top-level runs post their answer.
    pub parent_id: Option<String>,
    pub recorder: Arc<Recorder>,
    pub files: Arc<RunFiles>,
    /// Files the run started with (the parent's subset, then attachments).
    pub attachments: Vec<FileMeta>,
    /// Why some attachments were not fetched, told to the model.
    pub attachment_notes: Vec<String>,
    pub skills: Arc<RunSkills>,
    /// The agent's models, or its parent's when it names none.
    pub models: Vec<ModelRef>,
    /// Agent prompt, harness instructions, skill and subagent catalogs; byte-stable.
    pub system: String,
    /// The only way this run calls tools.
    pub gateway: Arc<Gateway>,
    pub subagents: Option<Arc<dyn SubagentLauncher>>,
    pub child_totals: Arc<ChildTotals>,
    pub cancel: CancellationToken,
    /// Message content may go on spans: the operator asked for it
    /// (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`) and the run is not private.
    pub capture_content: bool,
    /// Later messages of the conversation, handed in while the run works.
    pub inbox: Option<Arc<super::inbox::Inbox>>,
    /// The run's status where it was asked (top-level Slack runs).
    pub presence: Option<Arc<super::presence::Presence>>,
    /// The reply streaming into its Slack thread (top-level LLM runs).
    pub live: Option<Arc<dyn crate::triggers::source::Live>>,
    /// The conversation it continues already holds an answer of the bot's (set when
    /// the thread is read); the first answer names an agent-view thread.
    pub answered_before: std::sync::atomic::AtomicBool,
    /// The run's `invoke_agent` span: the parent of the spans the run makes.
    pub span: tracing::Span,
}

/// Marks the run running and builds its context: files (the parent's subset or new),
/// attachments fetched under the cap, skills, the subagent launcher, the system prompt
/// and the tool gateway.
pub async fn prepare<'a>(
    runner: &'a Runner,
    agent: &'a AgentConfig,
    trigger: &'a TriggerEvent,
    run_id: String,
    lineage: Lineage,
    cancel: CancellationToken,
    span: tracing::Span,
) -> Result<RunContext<'a>, RunError> {
    let recorder = Arc::new(
        Recorder::new(runner.store.clone(), run_id.clone(), trigger.private)
            .metered(super::metering::Meter::new(runner.metrics.clone(), &agent.name)),
    );
    // False when the dispatcher already started it (`start_within`): only the process
    // that took the run (routed it, or took its expired lease) gets here.
    runner
        .store
        .transition(&run_id, RunStatus::Queued, RunStatus::Running)
        .await?;
    recorder.record(RunEvent::RunStarted {
        agent: agent.name.clone(),
        source: trigger.source.clone(),
        kind: trigger.kind.clone(),
        mock_tools: runner.mock_tools,
        parent_id: lineage.parent_id.clone(),
        depth: lineage.depth,
        trigger: recorder.wrap(serde_json::to_string(trigger).unwrap_or_default()),
    });
    let models = if agent.models.is_empty() {
        lineage.parent_models.clone()
    } else {
        agent.models.clone()
    };
    let encoding = models.first().map_or(Encoding::O200k, Encoding::for_model);
    // Private runs keep their files in memory only: no content reaches the store.
    let store = (!trigger.private).then(|| runner.store.clone());
    let files = Arc::new(match &lineage.files {
        Some((parent, ids)) => parent
            .subset(ids, &run_id, store)
            .map_err(|e| RunError::Files(e.to_string()))?,
        None => RunFiles::new(
            &run_id,
            store,
            runner.tokens.clone(),
            encoding,
            agent.context.file_threshold_tokens,
        )
        .with_extractor(runner.extractor.clone()),
    });
    let mut attachments = files.list();
    let fetched = runner.sources.attachments(trigger).await;
    let (fetched, attachment_notes) = (fetched.files, fetched.notes);
    for note in &attachment_notes {
        recorder.record(RunEvent::AttachmentRefused {
            note: recorder.wrap(note.as_str()),
        });
    }
    for a in trigger.attachments.iter().chain(&fetched) {
        let meta = files.add(a.clone(), FileSource::Attachment, None).await?;
        recorder.record(RunEvent::FileAdded {
            file: meta.id.clone(),
            name: recorder.wrap(meta.name.as_str()),
            mime: meta.mime.clone(),
            bytes: meta.size_bytes,
        });
        attachments.push(meta);
    }

    let skills = Arc::new(
        RunSkills::new(runner.skills.clone(), &agent.skills).with_rhai_limits(agent.sandbox.clone()),
    );
    let can_delegate = lineage.depth < lineage.max_depth && !agent.subagents.is_empty();
    // `mcp:<server>` entries stand for the server's tools as connected.
    let registered = runner.tools.names();
    // Tools this run or one above it needs approval for. Only this run's own model
    // calls can wait for a person (`run::llm`): skill scripts and subagents never
    // call them.
    let gated: Vec<String> = agent
        .approval
        .tools
        .iter()
        .chain(&lineage.gated)
        .cloned()
        .collect();
    let mut allowed: Vec<String> = allowed_tools(agent, &lineage, !skills.is_empty(), can_delegate)
        .into_iter()
        .flat_map(|t| crate::config::mcp::expand(&t, registered.iter()).unwrap_or_else(|| vec![t]))
        .filter(|t| !lineage.gated.contains(t))
        .collect();
    // A catalog over its budget lists names only; the model finds skills by search.
    if skills.searchable() && !allowed.iter().any(|t| t == crate::tools::skills::SKILL_SEARCH) {
        allowed.push(crate::tools::skills::SKILL_SEARCH.to_string());
    }
    let child_totals = Arc::new(ChildTotals::default());
    // Only a direct message is read by the asker alone; anywhere else others read the
    // answer, so private Slack search hits are linked there, never quoted.
    let answers_in_public = lineage.answers_in_public.unwrap_or_else(|| {
        !matches!(&trigger.origin, crate::triggers::Origin::Slack { channel, channel_type, .. }
            if channel.starts_with('D') || channel_type.as_deref() == Some("im"))
    });
    let custody = Arc::new(
        super::custody::Custody::new(agent, trigger, runner.sources.slack.clone())
            .acting_for(lineage.acting_for.clone(), lineage.acting_team.clone()),
    );
    custody.recall(&lineage.custody);
    let launcher: Option<Arc<dyn SubagentLauncher>> = can_delegate.then(|| {
        Arc::new(subagents::Launcher {
            runner: runner.clone(),
            parent_id: run_id.clone(),
            parent_private: trigger.private,
            parent_custody: custody.clone(),
            action_token: trigger.action_token.clone(),
            answers_in_public,
            // Tools needing approval are not handed down: a subagent cannot wait.
            parent_allowed: allowed.iter().filter(|t| !gated.contains(*t)).cloned().collect(),
            gated: gated.clone(),
            parent_models: models.clone(),
            parent_files: files.clone(),
            names: agent.subagents.clone(),
            depth: lineage.depth,
            max_depth: lineage.max_depth,
            semaphore: tokio::sync::Semaphore::new(agent.limits.subagent_concurrency.max(1) as usize),
            totals: child_totals.clone(),
            max_cost_usd: agent.limits.max_cost_usd,
            concurrency: agent.limits.subagent_concurrency.max(1) as usize,
        }) as Arc<dyn SubagentLauncher>
    });
    let system = system_prompt(runner, agent, &skills, can_delegate);
    let search = Arc::new(SearchGrant {
        scope: agent.search.clone(),
        action_token: trigger.action_token.clone(),
        answers_in_public,
        started_by: format!("{} {}", trigger.source, trigger.kind),
        asker: match &trigger.origin {
            crate::triggers::Origin::Slack { user, .. } => user.clone(),
            _ => None,
        },
        events: Some(crate::tools::search_grant::EventLogHandle(runner.store.clone())),
        team: custody.team().map(str::to_string),
        conversation: match &trigger.origin {
            crate::triggers::Origin::Slack { channel, .. } => Some(channel.clone()),
            _ => None,
        },
        jira_home: trigger
            .origin
            .jira_answer()
            .map(|(key, restriction)| (key.to_ascii_uppercase(), restriction)),
    });
    let capture_content = runner.capture_content && !trigger.private;
    let gateway = Gateway::new(GatewayParts {
        agent: agent.name.clone(),
        tools: runner.tools.clone(),
        allowed,
        gated,
        mock: runner.mock_tools,
        recorder: recorder.clone(),
        files: files.clone(),
        skills: (!skills.is_empty()).then(|| skills.clone()),
        subagents: launcher.clone(),
        max_tool_calls: agent.limits.max_tool_calls,
        tool_timeout: agent.limits.tool_timeout,
        capture_content,
        presence: lineage.presence.clone(),
        live: lineage.live.clone(),
        search,
        custody,
        span: span.clone(),
        // As the run itself (see `Runner::run`): subagent runs are always entered.
        enter_spans: runner.instrument_runs || lineage.depth > 0,
    });
    Ok(RunContext {
        runner,
        agent,
        trigger,
        run_id,
        parent_id: lineage.parent_id,
        recorder,
        files,
        attachments,
        attachment_notes,
        skills,
        models,
        system,
        gateway,
        subagents: launcher,
        child_totals,
        cancel,
        capture_content,
        inbox: lineage.inbox,
        presence: lineage.presence,
        live: lineage.live,
        answered_before: Default::default(),
        span,
    })
}

/// The harness instructions appended to every agent prompt.
const HARNESS: &str = include_str!("../../prompts/harness.md");

/// The start of the system prompt: the agent's prompt, then the harness instructions.
/// Built once per run and never changed, so provider prompt caches keep hitting.
fn base_prompt(agent: &AgentConfig) -> String {
    let prompt = agent
        .prompt
        .as_ref()
        .map(|p| p.text.trim_end())
        .unwrap_or_default();
    let output = if agent.output.reply {
        "Your final answer is delivered as the reply to the trigger, so write it for the person who will read it."
    } else {
        "Your final answer is discarded: do the work through tools, then finish with a short summary for the log."
    };
    format!("{prompt}\n\n{}\n- {output}\n", HARNESS.trim_end())
}

/// The agent's system prompt plus the skill catalog and, when it may delegate, the
/// subagent catalog.
fn system_prompt(runner: &Runner, agent: &AgentConfig, skills: &RunSkills, can_delegate: bool) -> String {
    let mut system = base_prompt(agent);
    if let Some(catalog) = skills.catalog() {
        system.push('\n');
        system.push_str(&catalog);
    }
    if can_delegate {
        system.push_str("\n## Subagents\n\nHand self-contained tasks to these with the `subagent` tool:\n");
        for name in &agent.subagents {
            let description = runner
                .subagents
                .get(name)
                .map(|s| s.description.replace('\n', " "))
                .unwrap_or_default();
            system.push_str(&format!("\n- {name}: {description}"));
        }
        system.push('\n');
    }
    system
}
