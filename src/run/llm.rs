//! The LLM coordinator: model ⇄ tools until the model answers without tool calls or a
//! cap ends the run.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use super::approval::{Checkpoint, Start};
use super::compaction::{CompactError, Compactor};
use super::conversation::{Conversation, fixed_tokens, message_tokens, status_message, tool_message_tokens};
use super::events::{CallRecord, RunEvent};
use super::gateway::Gateway;
use super::inputs::inline_or_file;
use super::recorder::Recorder;
use super::subagents::ChildTotals;
use crate::config::AgentConfig;
use crate::files::{FileSource, RunFiles};
use crate::provider::chain::ChatOutcome;
use crate::provider::{Message, ModelChain, ProviderError, ToolCall, ToolDef, WireCache, pricing};
use crate::store::StoreError;
use crate::tokens::TokenCounter;
use crate::tools::{ToolError, ToolOutput};
use crate::types::{RunOutcome, Termination};

/// How long a model call may run before the events recorded so far are written anyway.
const FLUSH_WHILE_WAITING: Duration = Duration::from_millis(200);

/// Tool calls of one round that run at once; the rest wait their turn (results keep
/// the calls' order). A model asking for 40 fetches at once would hold 40 answers of
/// up to 20 MiB each, and hit a service's rate limit with all of them.
pub const MAX_CALLS_AT_ONCE: usize = 8;

/// Everything one LLM-coordinated run needs.
pub struct LlmRun<'a> {
    pub agent: &'a AgentConfig,
    pub chain: &'a ModelChain,
    /// Every tool call goes through it (grant, cap, records, spans).
    pub gateway: Arc<Gateway>,
    pub recorder: &'a Recorder,
    pub cancel: CancellationToken,
    pub files: Arc<RunFiles>,
    /// Exact counts for compaction transcripts and oversized outputs.
    pub counter: &'a TokenCounter,
    /// Required skills: they open the conversation, before the original request, and
    /// both stay verbatim through every compaction.
    pub reinject: Vec<Message>,
    /// The run's skills: `load_skills` names them, and skills the model loaded come
    /// back after a compaction.
    pub skills: Arc<crate::skills::RunSkills>,
    /// The system prompt (agent prompt, harness instructions, catalogs); byte-stable.
    pub system: String,
    /// Usage and cost of finished subagent runs, not yet added to this run's totals.
    pub child_totals: Arc<ChildTotals>,
    /// Messages of the conversation handed to this run while it works (see
    /// [`super::inbox`]); read before each model call.
    pub inbox: Option<Arc<super::inbox::Inbox>>,
    /// Where the model's text streams as it comes (a reply streaming into Slack).
    pub live: Option<Arc<dyn crate::triggers::source::Live>>,
    /// Whether a run holding private content can wait for a decision (its checkpoint
    /// must be sealed: `STEWARD_DATA_KEY`).
    pub can_seal: bool,
}

/// The context window of a run: the agent's override, else the primary model's.
pub fn window_of(agent: &AgentConfig, chain: &ModelChain) -> u64 {
    agent.context.window_tokens.unwrap_or_else(|| {
        chain.primary().map_or(pricing::DEFAULT_WINDOW, |m| {
            pricing::context_window(&m.provider, &m.model)
        })
    })
}

impl LlmRun<'_> {
    /// Adds the conversation's new messages as one user turn, and records that they
    /// were handed in.
    fn hand_in(&self, messages: Vec<super::inbox::Handed>, conv: &mut Conversation, turn: u32) {
        if messages.is_empty() {
            return;
        }
        let lines: Vec<String> = messages.iter().map(|m| m.text.clone()).collect();
        let text = format!(
            "[steward: new messages in this conversation since your last turn, oldest first; answer them too:]\n{}",
            lines.join("\n")
        );
        self.recorder.record(RunEvent::MessagesHandedIn {
            turn,
            count: messages.len(),
            text: self.recorder.wrap(lines.join("\n")),
        });
        let m = Message::user(text);
        let t = message_tokens(&m);
        conv.push(m, t);
    }
}

/// The conversation size that triggers compaction: `compact_at` of the window, and,
/// unless the agent opts out (`stay_under_price_tier: false`), below the size above
/// which the model bills every input token at its dearer long-context rate (with a
/// tenth to spare for the turn's own growth).
pub fn compact_limit(agent: &AgentConfig, chain: &ModelChain, window: u64) -> u64 {
    let by_window = (window as f64 * agent.context.compact_at) as u64;
    match chain.primary_price().and_then(|p| p.long_context) {
        Some((above, _)) if agent.context.stay_under_price_tier => by_window.min(above / 10 * 9),
        _ => by_window,
    }
}

enum Step<T> {
    Done(T),
    Stop(Termination, Option<String>),
}

impl LlmRun<'_> {
    /// Runs the loop from the opening message, or from the checkpoint of a run that
    /// waited for an approval. Errors are store failures only; every other problem ends
    /// the run with a termination reason.
    pub async fn run(self, start: Start) -> Result<RunOutcome, StoreError> {
        let system = self.system.clone();
        let mut defs = self.gateway.registry().definitions(self.gateway.allowed());
        for def in defs.iter_mut().filter(|d| d.name == "load_skills") {
            def.parameters = crate::tools::skills::load_skills_parameters(
                std::mem::take(&mut def.parameters),
                &self.skills.names(),
            );
        }
        let limits = &self.agent.limits;
        let window = window_of(self.agent, self.chain);
        let compact_limit = compact_limit(self.agent, self.chain, window);
        let started = tokio::time::Instant::now();
        let mut conv = Conversation::new(fixed_tokens(&system, &defs));
        let mut out = RunOutcome::new(self.recorder.run_id());
        // The held round of a resumed run, with the refusals its decision makes.
        let mut held: Option<(Vec<ToolCall>, HashMap<String, String>)> = None;
        let mut spent = Duration::ZERO;
        // Where the request sits when earlier turns of a thread come before it.
        let mut request_at = None;
        match start {
            Start::Fresh { history, opening } => {
                if !history.is_empty() {
                    request_at = Some(self.reinject.len() + history.len());
                }
                let all = self
                    .reinject
                    .iter()
                    .cloned()
                    .chain(history)
                    .chain(std::iter::once(opening));
                for m in all {
                    let t = message_tokens(&m);
                    conv.push(m, t);
                }
            }
            Start::Resume(resume) => {
                let c = resume.checkpoint;
                for m in &c.messages {
                    conv.push(m.clone(), message_tokens(m));
                }
                out.turns = c.turns;
                out.usage = c.usage;
                out.cost_usd = c.cost_usd;
                out.compactions = c.compactions;
                request_at = c.request_at;
                self.gateway.restore_calls(c.tool_calls);
                spent = Duration::from_millis(c.elapsed_ms);
                let custody = self.gateway.custody();
                for source in &c.private_sources {
                    self.gateway.hold_private(source).await;
                }
                custody.recall(&c.custody);
                for (id, refusal) in &c.decided {
                    if refusal.is_none() {
                        custody.approve(id);
                    }
                }
                // Another gated call of the round still waits for its own decision.
                if c.undecided().is_some() {
                    out.tool_calls = c.tool_calls;
                    out.awaiting = serde_json::to_value(&c).ok();
                    return Ok(finish(out, Termination::AwaitingApproval, None));
                }
                let refusals = c.refusals();
                held = Some((c.calls, refusals));
            }
        }
        // Time spent waiting for a person does not count against the run's timeout.
        let deadline = started + limits.timeout.saturating_sub(spent);
        let mut call_ids: HashSet<String> = conv
            .messages()
            .iter()
            .flat_map(|m| match m {
                Message::Assistant { tool_calls, .. } => tool_calls.iter().map(|c| c.id.clone()).collect(),
                _ => Vec::new(),
            })
            .collect();
        loop {
            if let Some((calls, refusals)) = held.take() {
                if let Some((t, e)) = self
                    .finish_round(&calls, &refusals, &mut conv, &mut out, window, deadline)
                    .await?
                {
                    return Ok(finish(out, t, e));
                }
                continue;
            }
            if out.turns >= limits.max_turns {
                return Ok(stop(
                    out,
                    Termination::MaxTurns,
                    format!("reached max_turns ({})", limits.max_turns),
                ));
            }
            if conv.total() > compact_limit
                && let Err(e) = self
                    .compact(&mut conv, &mut out, window, &mut request_at, (&system, &defs))
                    .await
            {
                return match e {
                    CompactError::Store(e) => Err(e),
                    CompactError::Provider(e) => Ok(stop(out, Termination::ProviderError, e.to_string())),
                };
            }
            if let Some(inbox) = &self.inbox {
                self.hand_in(inbox.take(), &mut conv, out.turns);
            }
            self.files.set_budget(compact_limit.saturating_sub(conv.total()));
            let outcome = match self
                .model_turn(&system, conv.messages(), conv.wire(), &defs, out.turns, deadline)
                .await?
            {
                Step::Done(o) => o,
                Step::Stop(t, e) => return Ok(finish(out, t, e)),
            };
            out.turns += 1;
            let cost = outcome.cost_usd();
            let mut response = outcome.response;
            fresh_call_ids(&mut response.tool_calls, &mut call_ids);
            conv.observe_input(response.usage.input_tokens);
            out.usage.add(&response.usage);
            match cost {
                Some(cost) => out.cost_usd += cost,
                None => out.cost_unknown = true,
            }

            if response.tool_calls.is_empty() {
                // Messages that came while the model wrote this answer: it answers
                // them too, with its draft before it, rather than leave them unread.
                let late = match &self.inbox {
                    Some(i) if out.turns < limits.max_turns => i.take_or_close(),
                    Some(i) => {
                        i.close();
                        Vec::new()
                    }
                    None => Vec::new(),
                };
                if late.is_empty() {
                    out.final_text = response.text;
                    return Ok(out);
                }
                let draft = Message::Assistant {
                    text: response.text,
                    tool_calls: Vec::new(),
                    reasoning: response.reasoning,
                };
                let t = message_tokens(&draft);
                conv.push(draft, t);
                self.hand_in(late, &mut conv, out.turns);
                continue;
            }
            if let Some(max) = limits.max_cost_usd
                && out.cost_usd >= max
            {
                let e = format!("spent ${:.4}, over max_cost_usd ${max}", out.cost_usd);
                return Ok(stop(out, Termination::MaxCost, e));
            }
            let requested = response.tool_calls.len() as u32;
            if let Err(e) = self.gateway.reserve(requested) {
                out.tool_calls = self.gateway.calls();
                return Ok(stop(
                    out,
                    Termination::MaxToolCalls,
                    format!("the model asked for {e}"),
                ));
            }
            let calls = response.tool_calls.clone();
            let assistant = Message::Assistant {
                text: response.text,
                tool_calls: response.tool_calls,
                reasoning: response.reasoning,
            };
            let t = match response.usage.output_tokens {
                0 => message_tokens(&assistant),
                n => n,
            };
            conv.push(assistant, t);
            // A call needing a person's approval holds the whole round: the run parks
            // here with its conversation and resumes the round once someone decides.
            // That is a tool marked `approval: required`, or a call that would carry
            // private content out of its conversation (`run::custody`).
            let mut notes = std::collections::BTreeMap::new();
            let gated: Vec<String> = calls
                .iter()
                .filter(|c| {
                    if let Some(note) = self.gateway.egress_note(&c.id, &c.name, &c.arguments) {
                        notes.insert(c.id.clone(), note);
                        return true;
                    }
                    self.agent.approval.tools.contains(&c.name)
                })
                .map(|c| c.id.clone())
                .collect();
            // A private run that cannot wait refuses the calls that would take its
            // content elsewhere and goes on; a tool that needs approval still stops it
            // (in `approval::park`), as before.
            let cannot_wait = self.recorder.privacy().is_private() && !self.can_seal;
            let required = calls
                .iter()
                .any(|c| gated.contains(&c.id) && self.agent.approval.tools.contains(&c.name));
            if cannot_wait && !gated.is_empty() && !required {
                let refusals: HashMap<String, String> = notes
                    .into_iter()
                    .map(|(id, note)| (id, format!("{note} This run cannot wait for a person's decision (STEWARD_DATA_KEY is not set), so it was not run.")))
                    .collect();
                if let Some((t, e)) = self
                    .finish_round(&calls, &refusals, &mut conv, &mut out, window, deadline)
                    .await?
                {
                    return Ok(finish(out, t, e));
                }
                continue;
            }
            if !gated.is_empty() {
                out.tool_calls = self.gateway.calls();
                let checkpoint = Checkpoint {
                    messages: conv.messages().to_vec(),
                    calls,
                    gated,
                    decided: Vec::new(),
                    notes,
                    private_sources: self.gateway.custody().sources(),
                    custody: self.gateway.custody().remembered(),
                    turns: out.turns,
                    usage: out.usage,
                    cost_usd: out.cost_usd,
                    compactions: out.compactions,
                    tool_calls: out.tool_calls,
                    elapsed_ms: (spent + started.elapsed()).as_millis() as u64,
                    request_at,
                };
                out.awaiting = serde_json::to_value(&checkpoint).ok();
                return Ok(finish(out, Termination::AwaitingApproval, None));
            }
            if let Some((t, e)) = self
                .finish_round(&calls, &HashMap::new(), &mut conv, &mut out, window, deadline)
                .await?
            {
                return Ok(finish(out, t, e));
            }
        }
    }

    /// Runs a round of tool calls (those in `refusals` are refused with its reason, not
    /// run) and adds their results, any images and the context status to `conv`.
    /// `Some` ends the run.
    async fn finish_round(
        &self,
        calls: &[ToolCall],
        refusals: &HashMap<String, String>,
        conv: &mut Conversation,
        out: &mut RunOutcome,
        window: u64,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(Termination, Option<String>)>, StoreError> {
        let round = self.tool_round(calls, refusals, deadline).await?;
        out.tool_calls = self.gateway.calls();
        // Subagents' usage counts toward this run's totals and cost cap.
        let (child_usage, child_cost, child_unknown) = self.child_totals.take();
        out.usage.add(&child_usage);
        out.cost_usd += child_cost;
        out.cost_unknown |= child_unknown;
        let results = match round {
            Step::Done(results) => results,
            Step::Stop(t, e) => return Ok(Some((t, e))),
        };
        let mut images = Vec::new();
        for (call, (result, span)) in calls.iter().zip(results) {
            let (content, is_error, counted) = match result {
                Ok(output) => {
                    images.extend(output.images.iter().cloned());
                    let name = format!("{}-{}", call.name, call.id);
                    // A repeat of an earlier call shows what that call showed: the
                    // same file when its output became one, not a second copy.
                    let shown = output
                        .repeat_of
                        .as_deref()
                        .and_then(|first| self.gateway.shown(first));
                    let (text, counted) = match shown {
                        Some(shown) => (shown, None),
                        None if output.whole => {
                            let text = output.to_model_text();
                            let n = crate::tokens::quick_estimate(&text);
                            (text, Some(n))
                        }
                        None => {
                            inline_or_file(
                                &self.files,
                                self.agent,
                                output.to_model_text(),
                                &name,
                                FileSource::ToolOutput,
                            )
                            .await?
                        }
                    };
                    if counted.is_none() && output.repeat_of.is_none() {
                        self.gateway.shown_as(&call.id, &text);
                    }
                    span.record("steward.tool.result_file", counted.is_none());
                    let text = match &output.repeat_of {
                        Some(first) => format!(
                            "[steward: the same call as {first} earlier in this run; its result, not fetched again]\n{text}"
                        ),
                        None => text,
                    };
                    // A repeat's note changed the text: count it as sent.
                    let counted = counted.filter(|_| output.repeat_of.is_none());
                    (text, false, counted)
                }
                Err(e) => (format!("error: {e}"), true, None),
            };
            let m = Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            };
            // A whole output was counted by the inline decision: count it once.
            let t = match counted {
                Some(tokens) => tool_message_tokens(tokens),
                None => message_tokens(&m),
            };
            conv.push(m, t);
        }
        if !images.is_empty() {
            let m = Message::User {
                content: "[steward: images loaded by the tool calls above.]".into(),
                images,
            };
            let t = message_tokens(&m);
            conv.push(m, t);
        }
        // The status goes last; its own size (estimated from its length) is included
        // in the figure it reports.
        let files = self.files.list();
        // Where compaction really happens (below a price tier, it may be sooner).
        let compact_at = compact_limit(self.agent, self.chain, window) as f64 / window.max(1) as f64;
        let draft = status_message(conv.total(), window, compact_at, &files);
        let own = (draft.len() as u64).div_ceil(4) + 4;
        let status = Message::user(status_message(conv.total() + own, window, compact_at, &files));
        let t = message_tokens(&status);
        conv.push(status, t);
        Ok(None)
    }

    async fn compact(
        &self,
        conv: &mut Conversation,
        out: &mut RunOutcome,
        window: u64,
        request_at: &mut Option<usize>,
        (system, tools): (&str, &[ToolDef]),
    ) -> Result<(), CompactError> {
        let compactor = Compactor {
            chain: self.chain,
            counter: self.counter,
            encoding: self.files.encoding(),
            files: &self.files,
            window,
            // The required skills, then the original request: the conversation's start
            // (after a thread's earlier turns, the request is kept on its own).
            pinned: self.reinject.len() + usize::from(request_at.is_none()),
            request: *request_at,
            system,
            tools,
        };
        let n = out.compactions + 1;
        let span = tracing::info_span!(
            parent: self.chain.span_parent(),
            "compaction",
            otel.name = "compaction",
            "steward.compaction.n" = n,
            "steward.compaction.tokens_before" = conv.total(),
            "steward.compaction.tokens_after" = tracing::field::Empty,
            "steward.compaction.dropped_outputs" = tracing::field::Empty,
        );
        let done = compactor.compact(conv, n).instrument(span.clone()).await?;
        span.record("steward.compaction.tokens_after", done.tokens_after);
        span.record("steward.compaction.dropped_outputs", done.dropped_outputs as u64);
        out.compactions = n;
        out.usage.add(&done.usage);
        match done.cost_usd {
            Some(cost) => out.cost_usd += cost,
            None => out.cost_unknown = true,
        }
        self.recorder.record(RunEvent::Compaction {
            n,
            tokens_before: done.tokens_before,
            tokens_after: done.tokens_after,
            transcript_file: done.transcript_file.clone(),
            kept_messages: done.kept_messages,
            dropped_outputs: done.dropped_outputs,
            usage: done.usage,
            cost_usd: done.cost_usd,
            model: done.model.clone(),
        });
        let mut messages = done.messages;
        *request_at = done.request_at;
        // Skills the model loaded were in the summarized part: their instructions come
        // back whole, once, after the pinned start and the summary.
        if let Some(text) = self.skills.reinjection() {
            let at = compactor.pinned.min(messages.len()) + 1;
            let at = at.min(messages.len());
            let m = Message::user(text);
            let t = message_tokens(&m);
            messages.insert(at, (m, t));
            if let Some(r) = request_at.as_mut().filter(|r| **r >= at) {
                *r += 1;
            }
        }
        conv.replace(messages);
        Ok(())
    }

    async fn model_turn(
        &self,
        system: &str,
        messages: &[Message],
        wire: &[WireCache],
        defs: &[ToolDef],
        turn: u32,
        deadline: tokio::time::Instant,
    ) -> Result<Step<ChatOutcome>, StoreError> {
        let model = self.chain.primary().map(ToString::to_string).unwrap_or_default();
        self.recorder.record(RunEvent::ModelRequest {
            turn: turn + 1,
            model,
            messages: messages.len(),
            tools: defs.len(),
        });
        let started = Instant::now();
        let call = self.chain.chat(
            system,
            messages,
            wire,
            defs,
            self.agent.context.max_output_tokens,
            self.live.as_deref().map(|l| l as &dyn crate::provider::Deltas),
        );
        let mut call = std::pin::pin!(tokio::time::timeout_at(deadline, call));
        // Events are group-committed before the tool round (the durability point); a
        // model that is slow to answer gets them written while it thinks, so the log of
        // a run in progress lags by at most this long. A fast model costs no extra commit.
        let lazy_flush = tokio::time::sleep(FLUSH_WHILE_WAITING);
        let mut lazy_flush = std::pin::pin!(lazy_flush);
        let mut flushed = false;
        let result = loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return Ok(Step::Stop(Termination::Cancelled, Some("cancelled".into()))),
                r = &mut call => break r,
                _ = &mut lazy_flush, if !flushed => {
                    flushed = true;
                    self.recorder.flush().await?;
                }
            }
        };
        let elapsed = started.elapsed();
        match result {
            Err(_) => Ok(Step::Stop(Termination::Timeout, Some(self.timeout_message()))),
            Ok(Err(err)) => {
                self.record_model_error(&err, elapsed);
                Ok(Step::Stop(Termination::ProviderError, Some(err.to_string())))
            }
            Ok(Ok(outcome)) => {
                for failed in &outcome.failed_attempts {
                    self.record_model_error(failed, Duration::ZERO);
                }
                let r = &outcome.response;
                let rec = self.recorder;
                rec.record(RunEvent::ModelResponse {
                    turn: turn + 1,
                    model: outcome.model.to_string(),
                    response_model: r.model.clone(),
                    stop_reason: r.stop_reason.clone(),
                    text: rec.privacy().wrap_opt(r.text.as_deref()),
                    tool_calls: r
                        .tool_calls
                        .iter()
                        .map(|c| CallRecord {
                            id: c.id.clone(),
                            name: self.gateway.recorded_name(&c.name).to_string(),
                            arguments: rec.wrap(c.arguments.as_str()),
                        })
                        .collect(),
                    usage: r.usage,
                    cost_usd: outcome.cost_usd(),
                    cache_saved_usd: outcome.bill.map(|b| b.saved_usd()),
                    duration_ms: elapsed.as_millis() as u64,
                });
                Ok(Step::Done(outcome))
            }
        }
    }

    fn record_model_error(&self, err: &ProviderError, elapsed: Duration) {
        self.recorder.record(RunEvent::ModelError {
            provider: err.provider,
            model: err.model.clone(),
            kind: err.kind,
            status: err.status,
            error: self.recorder.wrap(err.message.as_str()),
            duration_ms: elapsed.as_millis() as u64,
        });
    }

    /// Runs one turn's tool calls concurrently and returns their results in call order.
    async fn tool_round(
        &self,
        calls: &[ToolCall],
        refusals: &HashMap<String, String>,
        deadline: tokio::time::Instant,
    ) -> Result<Step<Vec<(Result<ToolOutput, ToolError>, tracing::Span)>>, StoreError> {
        for call in calls {
            self.gateway
                .record_call(&call.id, &call.name, &call.arguments, None);
        }
        // Durable before any tool can cause a side effect. A round of read-only calls
        // changes nothing a crash could repeat, so its events may wait for the next
        // commit (at most `Recorder::MAX_LAG` later, or the end of the run).
        let acts = calls.iter().any(|c| self.gateway.is_side_effecting(&c.name));
        if acts || self.recorder.lagging() {
            self.gateway.flush().await?;
        }
        let round = CancellationToken::new();
        // A slot per call under way: a slow call holds only its own, so the rest keep
        // starting as others finish (`buffered` would wait on the slowest first call).
        let slots = tokio::sync::Semaphore::new(MAX_CALLS_AT_ONCE);
        let futures = calls.iter().map(|call| {
            let slots = &slots;
            async {
                // Never closed: acquiring cannot fail.
                let _slot = slots.acquire().await.ok();
                match refusals.get(&call.id) {
                    Some(reason) => self.gateway.refuse(&call.id, &call.name, reason),
                    None => {
                        self.gateway
                            .execute_traced(&call.id, &call.name, &call.arguments, round.child_token())
                            .await
                    }
                }
            }
        });
        let all = join_all(futures);
        tokio::pin!(all);
        let results = tokio::select! {
            _ = self.cancel.cancelled() => {
                // A call with side effects already under way finishes (within the
                // run's time) and is recorded, rather than being cut off half done.
                if acts {
                    let _ = tokio::time::timeout_at(deadline, &mut all).await;
                }
                round.cancel();
                return Ok(Step::Stop(Termination::Cancelled, Some("cancelled".into())));
            }
            r = tokio::time::timeout_at(deadline, &mut all) => match r {
                Ok(r) => r,
                Err(_) => {
                    round.cancel();
                    return Ok(Step::Stop(Termination::Timeout, Some(self.timeout_message())));
                }
            },
        };
        let fatal = calls.iter().zip(&results).find_map(|(call, (r, _))| match r {
            Err(ToolError::Fatal(e)) => Some(format!("tool '{}' failed: {e}", call.name)),
            _ => None,
        });
        // A nested call (a skill script's) may have spent the budget.
        let termination = if self.gateway.cap_hit() {
            Termination::MaxToolCalls
        } else {
            Termination::ToolError
        };
        Ok(match fatal {
            Some(e) => Step::Stop(termination, Some(e)),
            None => Step::Done(results),
        })
    }

    fn timeout_message(&self) -> String {
        format!(
            "run exceeded its timeout of {}s",
            self.agent.limits.timeout.as_secs_f64()
        )
    }
}

fn stop(out: RunOutcome, termination: Termination, error: String) -> RunOutcome {
    finish(out, termination, Some(error))
}

fn finish(mut out: RunOutcome, termination: Termination, error: Option<String>) -> RunOutcome {
    out.termination = termination;
    out.error = error;
    out
}

/// Gives each of a round's calls an id no other call of the run has had: approvals,
/// custody's approved calls and the round's results key on ids, and an
/// OpenAI-compatible server may send none or repeat one (a person approving the one
/// call they were shown would otherwise let through another with its id). A provider's
/// own ids are kept when they are new; the conversation sent back carries the same ids.
fn fresh_call_ids(calls: &mut [ToolCall], seen: &mut HashSet<String>) {
    for call in calls {
        if !call.id.is_empty() && seen.insert(call.id.clone()) {
            continue;
        }
        let mut n = seen.len();
        loop {
            let id = format!("call_steward_{n}");
            if seen.insert(id.clone()) {
                tracing::debug!(given = %call.id, id = %id, "a tool call's id was empty or used before; renamed");
                call.id = id;
                break;
            }
            n += 1;
        }
    }
}
