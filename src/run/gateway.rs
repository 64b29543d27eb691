//! The tool gateway: the one door every tool call of a run goes through, whoever makes
//! it (the model, a coordinator script, a skill script calling tools). It enforces the
//! agent's grant and `max_tool_calls`, records the call durably before it can cause a
//! side effect (so crash recovery knows whether a retry could repeat one), opens the
//! `execute_tool` span, and records the result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::recorder::Recorder;
use crate::files::RunFiles;
use crate::run::events::RunEvent;
use crate::skills::RunSkills;
use crate::store::StoreError;
use crate::tools::subagent::{SUBAGENT_TOOL, SubagentLauncher};
use crate::tools::{NestedTools, ToolCtx, ToolError, ToolOutput, ToolRegistry, ToolResult};

/// Stored tool output is capped; the whole text went to the caller.
const PREVIEW_BYTES: usize = 16 * 1024;

/// What a call of a tool the registry does not know is recorded as.
pub const UNKNOWN_TOOL: &str = "(unknown)";

/// What a run's tools may see besides their arguments.
pub struct GatewayParts {
    pub agent: String,
    pub tools: Arc<ToolRegistry>,
    /// Tool names this run may call.
    pub allowed: Vec<String>,
    /// Tools that need a person's approval (this run's `approval.tools` and its
    /// parents'): the model's own calls wait for one (`run::llm`); a skill script's
    /// calls are refused, since a script cannot be suspended mid-call.
    pub gated: Vec<String>,
    pub mock: bool,
    pub recorder: Arc<Recorder>,
    pub files: Arc<RunFiles>,
    pub skills: Option<Arc<RunSkills>>,
    pub subagents: Option<Arc<dyn SubagentLauncher>>,
    pub max_tool_calls: u32,
    /// Longest one call may take; `subagent` is bounded by the child run's own limits.
    pub tool_timeout: Duration,
    /// The run's span, parent of its `execute_tool` spans.
    pub span: tracing::Span,
    /// Whether tool calls enter their span on every poll (when the run does).
    pub enter_spans: bool,
    /// Record arguments and results on `execute_tool` spans (never for private runs).
    pub capture_content: bool,
    /// Where the run's status shows what it does (top-level Slack runs).
    pub presence: Option<Arc<super::presence::Presence>>,
    /// The streamed reply, where each call shows as a task.
    pub live: Option<Arc<dyn crate::triggers::source::Live>>,
    /// What the run's search tools may search, and as whom.
    pub search: Arc<crate::tools::search_grant::SearchGrant>,
    /// Which private conversations the run may read and where their content may go.
    pub custody: Arc<super::custody::Custody>,
}

/// A call refused because the run's `max_tool_calls` budget would be exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{requested} more tool call(s) after {done} would pass max_tool_calls ({max})")]
pub struct CapExceeded {
    pub requested: u32,
    pub done: u32,
    pub max: u32,
}

/// One run's tool gateway.
pub struct Gateway {
    parts: GatewayParts,
    calls: AtomicU32,
    cap_hit: AtomicBool,
    nested: AtomicU32,
    this: Weak<Gateway>,
    /// Results of repeatable calls by tool and arguments: a second identical call is
    /// answered from here (no second fetch, no second bill for reading it).
    reads: Mutex<HashMap<String, (String, ToolOutput)>>,
    /// What the model was shown for a call whose output became a file (the preview
    /// naming the file), by call id: a repeat shows the same file, not a new copy.
    shown: Mutex<HashMap<String, String>>,
}

impl Gateway {
    pub fn new(parts: GatewayParts) -> Arc<Gateway> {
        Arc::new_cyclic(|this| Gateway {
            parts,
            calls: AtomicU32::new(0),
            cap_hit: AtomicBool::new(false),
            nested: AtomicU32::new(0),
            this: this.clone(),
            reads: Mutex::default(),
            shown: Mutex::default(),
        })
    }

    /// The key a repeatable call is remembered by; `None` for tools that are not
    /// (side effects, answers that change by themselves) and unparsable arguments.
    fn read_key(&self, name: &str, arguments: &str) -> Option<String> {
        let tool = self.parts.tools.get(name)?;
        if !tool.repeatable() || self.parts.mock {
            return None;
        }
        // Parsed and written back, so spacing and key order do not make a new call.
        let args: Value = serde_json::from_str(arguments).ok()?;
        Some(format!("{name}\u{0}{args}"))
    }

    /// Records what the model was shown for `call_id` when its output became a file.
    pub fn shown_as(&self, call_id: &str, text: &str) {
        self.shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(call_id.to_string(), text.to_string());
    }

    /// What the model was shown for `call_id`, when its output became a file.
    pub fn shown(&self, call_id: &str) -> Option<String> {
        self.shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(call_id)
            .cloned()
    }

    pub fn allowed(&self) -> &[String] {
        &self.parts.allowed
    }

    pub fn registry(&self) -> &Arc<ToolRegistry> {
        &self.parts.tools
    }

    pub fn files(&self) -> &Arc<RunFiles> {
        &self.parts.files
    }

    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.parts.recorder
    }

    /// Whether the run's content may go into traces and logs (content capture is on
    /// and the run holds nothing private).
    pub fn captures_content(&self) -> bool {
        self.parts.capture_content && self.parts.recorder.privacy() == crate::types::Privacy::Recorded
    }

    pub fn custody(&self) -> &Arc<super::custody::Custody> {
        &self.parts.custody
    }

    /// Why `call` needs a person's approval to carry the run's private content out of
    /// its conversation (see [`super::custody::Custody::egress_note`]).
    pub fn egress_note(&self, call_id: &str, name: &str, arguments: &str) -> Option<String> {
        let effect = self.parts.tools.get(name).map(|t| t.spec().effect)?;
        let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        self.parts.custody.egress_note(call_id, name, effect, &args)
    }

    /// The run now holds content of private conversation `source` (read by a call, or
    /// held before it parked): redacted at rest from here on, its new files kept in
    /// memory, and nothing more streamed where others than the source's members read.
    pub async fn hold_private(&self, source: &str) {
        let custody = &self.parts.custody;
        custody.taint(source);
        let recorder = &self.parts.recorder;
        if !recorder.privacy().is_private() {
            recorder.taint();
            // The row says so now, not only when the run ends: a run whose process dies
            // is ended by another, which knows nothing of what it read.
            if let Err(e) = recorder.store().mark_private(recorder.run_id()).await {
                tracing::warn!(run = %recorder.run_id(), error = %e, "cannot mark the run private before it ends");
            }
        }
        self.parts.files.keep_in_memory();
        if custody.answer_leaves()
            && let Some(live) = &self.parts.live
        {
            live.abandon().await;
        }
    }

    /// Custody's checks before a call: a Slack read the asker may not make, or content
    /// leaving a private conversation without approval, is a tool error. `Ok(Some(c))`:
    /// the call reads private conversation `c`.
    async fn custody_check(
        &self,
        call_id: &str,
        name: &str,
        arguments: &str,
    ) -> Result<Option<String>, ToolError> {
        let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
        let effect = self.parts.tools.get(name).map(|t| t.spec().effect);
        if let Some(note) = effect.and_then(|e| self.parts.custody.egress_note(call_id, name, e, &args)) {
            return Err(ToolError::Model(format!(
                "{note} No person approved it, so it was not run."
            )));
        }
        // What the call writes is the run's own, whatever a tool echoes of it later.
        self.parts.custody.wrote(name, &args);
        self.parts.custody.check_read(name, &args).await
    }

    /// Tool calls made so far (never more than the cap).
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst).min(self.parts.max_tool_calls)
    }

    pub fn max_tool_calls(&self) -> u32 {
        self.parts.max_tool_calls
    }

    /// Whether a call was refused for `max_tool_calls` (the run should end with that
    /// termination reason).
    pub fn cap_hit(&self) -> bool {
        self.cap_hit.load(Ordering::SeqCst)
    }

    /// Sets the calls already made, for a run resumed from its checkpoint.
    pub fn restore_calls(&self, n: u32) {
        self.calls.store(n, Ordering::SeqCst);
    }

    /// The name a call is recorded, traced, counted and shown under: a name the
    /// registry does not know becomes [`UNKNOWN_TOOL`], since a model's made-up name can
    /// carry text (a private run's) and would make a new metric label per call. The
    /// model itself is told the name it used.
    pub fn recorded_name<'a>(&self, name: &'a str) -> &'a str {
        if self.parts.tools.get(name).is_some() {
            name
        } else {
            UNKNOWN_TOOL
        }
    }

    /// A recorded call not run: a person denied it (or no one decided in time). The
    /// model gets `reason` as the tool's error.
    pub fn refuse(&self, call_id: &str, name: &str, reason: &str) -> (ToolResult, tracing::Span) {
        let recorder = &self.parts.recorder;
        recorder.record(RunEvent::ToolResult {
            call_id: call_id.to_string(),
            name: self.recorded_name(name).to_string(),
            ok: false,
            fatal: Some(false),
            bytes: 0,
            duration_ms: 0,
            content: None,
            error: Some(recorder.wrap(reason)),
        });
        (Err(ToolError::Model(reason.to_string())), tracing::Span::none())
    }

    /// Takes `n` calls from the budget, all or none.
    pub fn reserve(&self, n: u32) -> Result<(), CapExceeded> {
        let max = self.parts.max_tool_calls;
        let taken = self.calls.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
            (c + n <= max).then_some(c + n)
        });
        taken.map(|_| ()).map_err(|done| {
            self.cap_hit.store(true, Ordering::SeqCst);
            CapExceeded {
                requested: n,
                done,
                max,
            }
        })
    }

    /// Whether `name` is a registered side-effecting tool.
    pub fn is_side_effecting(&self, name: &str) -> bool {
        self.parts
            .tools
            .get(name)
            .is_some_and(|t| t.spec().effect.changes_anything())
    }

    /// Records that a call is about to happen (written at the next flush). Marked so
    /// crash recovery knows whether re-running could repeat a side effect.
    pub fn record_call(&self, call_id: &str, name: &str, arguments: &str, parent: Option<&str>) {
        let recorder = &self.parts.recorder;
        recorder.record(RunEvent::ToolCall {
            call_id: call_id.to_string(),
            name: self.recorded_name(name).to_string(),
            arguments: recorder.wrap(arguments),
            side_effect: self.is_side_effecting(name),
            parent_call_id: parent.map(str::to_string),
        });
    }

    /// Makes the recorded calls durable: called before any tool can act.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.parts.recorder.flush().await
    }

    fn ctx(&self, call_id: &str, cancel: CancellationToken) -> ToolCtx {
        ToolCtx {
            run_id: self.parts.recorder.run_id().to_string(),
            agent: self.parts.agent.clone(),
            call_id: call_id.to_string(),
            cancel,
            files: self.parts.files.clone(),
            skills: self.parts.skills.clone(),
            subagents: self.parts.subagents.clone(),
            nested: self.this.upgrade().map(|g| g as Arc<dyn NestedTools>),
            mock: self.parts.mock,
            search: self.parts.search.clone(),
            network: Default::default(),
        }
    }

    /// Runs a call already reserved and recorded: grant check, schema validation,
    /// dispatch, span and result event.
    pub async fn execute(
        &self,
        call_id: &str,
        name: &str,
        arguments: &str,
        cancel: CancellationToken,
    ) -> ToolResult {
        self.execute_traced(call_id, name, arguments, cancel).await.0
    }

    /// [`Gateway::execute`], also handing back the call's `execute_tool` span, still
    /// open, so the caller can record what became of the result
    /// (`steward.tool.result_file`) before it ends.
    pub async fn execute_traced(
        &self,
        call_id: &str,
        name: &str,
        arguments: &str,
        cancel: CancellationToken,
    ) -> (ToolResult, tracing::Span) {
        let capture = self.parts.capture_content;
        let shown = self.recorded_name(name);
        let span = tracing::info_span!(
            parent: crate::telemetry::parent_or(&self.parts.span),
            "execute_tool",
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = shown,
            "gen_ai.tool.call.id" = call_id,
            "gen_ai.tool.type" = "function",
            run_id = self.parts.recorder.run_id(),
            "steward.tool.side_effect" = self.is_side_effecting(name),
            "steward.tool.result_bytes" = tracing::field::Empty,
            "steward.tool.result_file" = tracing::field::Empty,
            "steward.tool.repeat_of" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            "gen_ai.tool.call.arguments" = tracing::field::Empty,
            "gen_ai.tool.call.result" = tracing::field::Empty,
        );
        // Not once the run holds private content (a private read, a subagent's answer
        // carrying one): capture was decided from the trigger when the run started.
        if capture && !self.parts.recorder.privacy().is_private() {
            span.record("gen_ai.tool.call.arguments", arguments);
        }
        let status = self.parts.tools.status_of(shown);
        if let Some(presence) = &self.parts.presence {
            presence.step(status.clone());
        }
        if let Some(live) = &self.parts.live {
            live.task(
                call_id,
                &status,
                crate::triggers::source::TaskState::Running,
                None,
            );
        }
        let key = self.read_key(name, arguments);
        let earlier = key.as_ref().and_then(|k| {
            self.reads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(k)
                .cloned()
        });
        let result = async {
            let ctx = self.ctx(call_id, cancel);
            let started = Instant::now();
            let checked = self.custody_check(call_id, name, arguments).await;
            // Private conversations the run held before the call: a call that brings
            // back more (a subagent's answer) is held like a private read.
            let held_before = self.parts.custody.sources().len();
            // A tool that panics ends the run cleanly (a fatal tool error: recorded,
            // hand-offs closed, sealed input erased), not the run's task with it.
            let invoke = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
                self.parts
                    .tools
                    .invoke(&self.parts.allowed, name, arguments, &ctx, self.parts.mock),
            ));
            let invoke = async {
                invoke.await.unwrap_or_else(|_| {
                    tracing::error!(tool = %shown, "tool panicked");
                    Err(ToolError::Fatal(format!("tool '{shown}' failed unexpectedly")))
                })
            };
            let result = if let Err(e) = &checked {
                Err(e.clone())
            } else if let Some((first, mut output)) = earlier {
                span.record("steward.tool.repeat_of", first.as_str());
                output.repeat_of = Some(first);
                Ok(output)
            } else if name == SUBAGENT_TOOL {
                invoke.await
            } else {
                let limit = self.parts.tool_timeout;
                tokio::time::timeout(limit, invoke).await.unwrap_or_else(|_| {
                    ctx.cancel.cancel();
                    Err(ToolError::Model(format!(
                        "tool '{name}' did not finish within {} (limits.tool_timeout); try a smaller request",
                        crate::types::duration::format_duration(limit)
                    )))
                })
            };
            let duration_ms = started.elapsed().as_millis() as u64;
            if let (Some(k), Ok(output)) = (&key, &result)
                && output.repeat_of.is_none()
            {
                let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
                reads
                    .entry(k.clone())
                    .or_insert_with(|| (call_id.to_string(), output.clone()));
            }
            let recorder = &self.parts.recorder;
            if let (Ok(Some(channel)), Ok(_)) = (&checked, &result) {
                self.hold_private(channel).await;
            }
            if let Ok(output) = &result {
                self.parts.custody.saw_restricted(name, &output.value);
            }
            let read = checked.as_ref().ok().and_then(Option::as_deref);
            for source in self.parts.custody.sources().iter().skip(held_before) {
                if Some(source.as_str()) != read {
                    self.hold_private(source).await;
                }
            }
            if let Ok(output) = &result {
                self.parts.custody.saw_result(name, output).await;
            }
            let capture = capture && !recorder.privacy().is_private();
            let event = match &result {
                Ok(output) => {
                    let text = output.model_text();
                    span.record("steward.tool.result_bytes", text.len() as u64);
                    if capture {
                        span.record(
                            "gen_ai.tool.call.result",
                            crate::tokens::floor_char(&text, PREVIEW_BYTES),
                        );
                    }
                    RunEvent::ToolResult {
                        call_id: call_id.to_string(),
                        name: shown.to_string(),
                        ok: true,
                        fatal: None,
                        bytes: text.len(),
                        duration_ms,
                        content: Some(recorder.wrap(crate::tokens::floor_char(&text, PREVIEW_BYTES))),
                        error: None,
                    }
                }
                Err(e) => {
                    let fatal = matches!(e, ToolError::Fatal(_));
                    span.record("error.type", if fatal { "fatal" } else { "tool_error" });
                    RunEvent::ToolResult {
                        call_id: call_id.to_string(),
                        name: shown.to_string(),
                        ok: false,
                        fatal: Some(fatal),
                        bytes: 0,
                        duration_ms,
                        content: None,
                        error: Some(recorder.wrap(e.to_string())),
                    }
                }
            };
            recorder.record(event);
            let network = std::mem::take(&mut *ctx.network.lock().unwrap_or_else(|e| e.into_inner()));
            // A private run's record names an unlisted host no more than its trace does.
            let private = recorder.privacy() == crate::types::Privacy::Private;
            for r in &network {
                let (host, refused) = match private {
                    true => (r.shown_host(), r.shown_refusal()),
                    false => (r.host.as_str(), r.refused.as_deref()),
                };
                recorder.record(RunEvent::NetRequest {
                    parent_call_id: call_id.to_string(),
                    method: r.method.clone(),
                    host: host.to_string(),
                    port: r.port,
                    path: r.path.as_deref().map(|p| recorder.wrap(p)),
                    status: r.status,
                    bytes_sent: r.bytes_sent,
                    bytes_received: r.bytes_received,
                    duration_ms: r.ms,
                    refused: refused.map(str::to_string),
                    secrets: r.secrets.clone(),
                });
            }
            if let Some(live) = &self.parts.live {
                use crate::triggers::source::TaskState;
                let (state, line) = match &result {
                    Ok(output) => (TaskState::Done, output.model_text().to_string()),
                    Err(e) => (TaskState::Failed, e.to_string()),
                };
                live.task(call_id, &status, state, Some(&line));
                // What the planner subagent answers is the run's plan.
                if state == TaskState::Done && name == SUBAGENT_TOOL && is_planner(arguments) {
                    live.plan(&line);
                }
            }
            result
        };
        // Requests the tool makes to a service carry the tool span's trace context.
        let result = crate::telemetry::within(&span, self.parts.enter_spans, result);
        let result =
            crate::telemetry::propagation::sending(crate::telemetry::span_context(&span), result).await;
        (result, span)
    }

    /// One call end to end: reserve, record, flush, execute. Exceeding the cap is a
    /// fatal tool error (and sets [`Gateway::cap_hit`]).
    pub async fn call(
        &self,
        call_id: &str,
        name: &str,
        arguments: &str,
        parent: Option<&str>,
        cancel: CancellationToken,
    ) -> ToolResult {
        // A script's thread may still be running when its run has been stopped: it
        // acts no more.
        if cancel.is_cancelled() {
            return Err(ToolError::Fatal("the run was stopped".into()));
        }
        self.reserve(1)
            .map_err(|e| ToolError::Fatal(format!("reached max_tool_calls: {e}")))?;
        self.record_call(call_id, name, arguments, parent);
        self.flush()
            .await
            .map_err(|e| ToolError::Fatal(format!("cannot record the tool call: {e}")))?;
        self.execute(call_id, name, arguments, cancel).await
    }
}

#[async_trait]
impl NestedTools for Gateway {
    async fn call_nested(&self, parent: &ToolCtx, grant: &[String], name: &str, args: Value) -> ToolResult {
        if !self.parts.allowed.iter().any(|t| t == name) {
            return Err(ToolError::Model(format!(
                "tool '{name}' is not granted to agent '{}'",
                self.parts.agent
            )));
        }
        if !grant.iter().any(|t| t == name) {
            return Err(ToolError::Model(format!(
                "tool '{name}' is not in this skill's allowed-tools"
            )));
        }
        if self.parts.gated.iter().any(|t| t == name) {
            return Err(ToolError::Model(format!(
                "tool '{name}' needs a person's approval (approval.tools), which a skill script cannot wait for: call it yourself, outside the script"
            )));
        }
        let n = self.nested.fetch_add(1, Ordering::SeqCst) + 1;
        let call_id = format!("{}.{n}", parent.call_id);
        self.call(
            &call_id,
            name,
            &args.to_string(),
            Some(&parent.call_id),
            parent.cancel.child_token(),
        )
        .await
    }
}

/// Whether a `subagent` call's arguments name the planner.
fn is_planner(arguments: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(arguments).is_ok_and(|a| a["name"] == "planner")
}
