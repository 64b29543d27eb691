//! The LLM coordinator: model ⇄ tools until the model answers without tool calls or a
//! cap ends the run.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::recorder::Recorder;
use super::termination::Termination;
use crate::config::AgentConfig;
use crate::provider::chain::ChatOutcome;
use crate::provider::{Message, ModelChain, ProviderError, ToolCall, ToolDef, Usage, pricing};
use crate::store::StoreError;
use crate::tools::{ToolCtx, ToolError, ToolRegistry};

/// The harness instructions appended to every agent prompt.
const HARNESS: &str = include_str!("../../prompts/harness.md");

/// Everything one LLM-coordinated run needs.
pub struct LlmRun<'a> {
    pub agent: &'a AgentConfig,
    pub chain: &'a ModelChain,
    pub tools: &'a ToolRegistry,
    /// Tool names the model may call.
    pub allowed: Vec<String>,
    pub mock_tools: bool,
    pub recorder: &'a Recorder,
    pub cancel: CancellationToken,
}

/// What the loop produced.
#[derive(Debug, Clone)]
pub struct LoopOutcome {
    pub termination: Termination,
    /// The model's last text, before `output.reply` decides whether to keep it.
    pub final_text: Option<String>,
    pub error: Option<String>,
    pub turns: u32,
    pub tool_calls: u32,
    pub usage: Usage,
    pub cost_usd: f64,
}

/// The system prompt: the agent's prompt, then the harness instructions. Built once per
/// run and never changed, so provider prompt caches keep hitting.
pub fn system_prompt(agent: &AgentConfig) -> String {
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

enum Step<T> {
    Done(T),
    Stop(Termination, Option<String>),
}

impl LlmRun<'_> {
    /// Runs the loop starting from `first_message`. Errors are store failures only;
    /// every other problem ends the run with a termination reason.
    pub async fn run(self, first_message: String) -> Result<LoopOutcome, StoreError> {
        let system = system_prompt(self.agent);
        let defs = self.tools.definitions(&self.allowed);
        let limits = &self.agent.limits;
        let deadline = tokio::time::Instant::now() + limits.timeout;
        let mut messages = vec![Message::User {
            content: first_message,
        }];
        let mut out = LoopOutcome {
            termination: Termination::Completed,
            final_text: None,
            error: None,
            turns: 0,
            tool_calls: 0,
            usage: Usage::default(),
            cost_usd: 0.0,
        };
        loop {
            if out.turns >= limits.max_turns {
                return Ok(stop(
                    out,
                    Termination::MaxTurns,
                    format!("reached max_turns ({})", limits.max_turns),
                ));
            }
            let outcome = match self
                .model_turn(&system, &messages, &defs, out.turns, deadline)
                .await?
            {
                Step::Done(o) => o,
                Step::Stop(t, e) => return Ok(finish(out, t, e)),
            };
            out.turns += 1;
            let response = outcome.response;
            let cost = pricing::cost(&outcome.model.provider, &outcome.model.model, &response.usage);
            out.usage.add(&response.usage);
            out.cost_usd += cost;

            if response.tool_calls.is_empty() {
                out.final_text = response.text;
                return Ok(out);
            }
            if let Some(max) = limits.max_cost_usd
                && out.cost_usd >= max
            {
                let e = format!("spent ${:.4}, over max_cost_usd ${max}", out.cost_usd);
                return Ok(stop(out, Termination::MaxCost, e));
            }
            let requested = response.tool_calls.len() as u32;
            if out.tool_calls + requested > limits.max_tool_calls {
                let e = format!(
                    "the model asked for {requested} more tool calls after {}, over max_tool_calls ({})",
                    out.tool_calls, limits.max_tool_calls
                );
                return Ok(stop(out, Termination::MaxToolCalls, e));
            }
            out.tool_calls += requested;
            let calls = response.tool_calls.clone();
            messages.push(Message::Assistant {
                text: response.text,
                tool_calls: response.tool_calls,
            });
            match self.tool_round(&calls, deadline).await? {
                Step::Done(results) => messages.extend(results),
                Step::Stop(t, e) => return Ok(finish(out, t, e)),
            }
        }
    }

    async fn model_turn(
        &self,
        system: &str,
        messages: &[Message],
        defs: &[ToolDef],
        turn: u32,
        deadline: tokio::time::Instant,
    ) -> Result<Step<ChatOutcome>, StoreError> {
        let model = self.chain.primary().map(ToString::to_string).unwrap_or_default();
        self.recorder.event(
            "model_request",
            json!({"turn": turn + 1, "model": model, "messages": messages.len(), "tools": defs.len()}),
        );
        // Group-commit everything so far before waiting on the model.
        self.recorder.flush().await?;
        let started = Instant::now();
        let call = self
            .chain
            .chat(system, messages, defs, self.agent.context.max_output_tokens);
        let result = tokio::select! {
            _ = self.cancel.cancelled() => return Ok(Step::Stop(Termination::Cancelled, Some("cancelled".into()))),
            r = tokio::time::timeout_at(deadline, call) => r,
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
                self.recorder.event(
                    "model_response",
                    json!({
                        "turn": turn + 1,
                        "model": outcome.model.to_string(),
                        "response_model": r.model,
                        "stop_reason": r.stop_reason,
                        "text": r.text,
                        "tool_calls": r.tool_calls,
                        "usage": r.usage,
                        "cost_usd": pricing::cost(&outcome.model.provider, &outcome.model.model, &r.usage),
                        "duration_ms": elapsed.as_millis() as u64,
                    }),
                );
                Ok(Step::Done(outcome))
            }
        }
    }

    fn record_model_error(&self, err: &ProviderError, elapsed: Duration) {
        self.recorder.event(
            "model_error",
            json!({
                "provider": err.provider,
                "kind": err.kind,
                "status": err.status,
                "error": err.message,
                "duration_ms": elapsed.as_millis() as u64,
            }),
        );
    }

    /// Runs one turn's tool calls concurrently and returns their results in call order.
    async fn tool_round(
        &self,
        calls: &[ToolCall],
        deadline: tokio::time::Instant,
    ) -> Result<Step<Vec<Message>>, StoreError> {
        for call in calls {
            self.recorder.event(
                "tool_call",
                json!({"call_id": call.id, "name": call.name, "arguments": call.arguments}),
            );
        }
        // Durable before any tool can cause a side effect.
        self.recorder.flush().await?;
        let round = CancellationToken::new();
        let futures = calls.iter().map(|call| self.tool_call(call, round.clone()));
        let all = join_all(futures);
        let results = tokio::select! {
            _ = self.cancel.cancelled() => {
                round.cancel();
                return Ok(Step::Stop(Termination::Cancelled, Some("cancelled".into())));
            }
            r = tokio::time::timeout_at(deadline, all) => match r {
                Ok(r) => r,
                Err(_) => {
                    round.cancel();
                    return Ok(Step::Stop(Termination::Timeout, Some(self.timeout_message())));
                }
            },
        };
        let mut messages = Vec::with_capacity(results.len());
        let mut fatal = None;
        for (call, result) in calls.iter().zip(results) {
            let (content, is_error) = match result {
                Ok(text) => (text, false),
                Err(ToolError::Model(e)) => (format!("error: {e}"), true),
                Err(ToolError::Fatal(e)) => {
                    fatal.get_or_insert_with(|| format!("tool '{}' failed: {e}", call.name));
                    (format!("error: {e}"), true)
                }
            };
            messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
                is_error,
            });
        }
        Ok(match fatal {
            Some(e) => Step::Stop(Termination::ToolError, Some(e)),
            None => Step::Done(messages),
        })
    }

    /// One tool call with its span and result event.
    async fn tool_call(&self, call: &ToolCall, round: CancellationToken) -> Result<String, ToolError> {
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format!("execute_tool {}", call.name),
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = %call.name,
            "gen_ai.tool.call.id" = %call.id,
            run_id = %self.recorder.run_id(),
            "error.type" = tracing::field::Empty,
        );
        async {
            let ctx = ToolCtx {
                run_id: self.recorder.run_id().to_string(),
                agent: self.agent.name.clone(),
                call_id: call.id.clone(),
                cancel: round.child_token(),
            };
            let started = Instant::now();
            let result = self
                .tools
                .invoke(&self.allowed, &call.name, &call.arguments, &ctx, self.mock_tools)
                .await
                .map(|o| o.to_model_text());
            let duration_ms = started.elapsed().as_millis() as u64;
            let event = match &result {
                Ok(text) => json!({
                    "call_id": call.id, "name": call.name, "ok": true,
                    "bytes": text.len(), "duration_ms": duration_ms, "content": preview(text),
                }),
                Err(e) => {
                    tracing::Span::current().record("error.type", if matches!(e, ToolError::Fatal(_)) { "fatal" } else { "tool_error" });
                    json!({
                        "call_id": call.id, "name": call.name, "ok": false, "fatal": matches!(e, ToolError::Fatal(_)),
                        "bytes": 0, "duration_ms": duration_ms, "error": e.to_string(),
                    })
                }
            };
            self.recorder.event("tool_result", event);
            result
        }
        .instrument(span)
        .await
    }

    fn timeout_message(&self) -> String {
        format!(
            "run exceeded its timeout of {}s",
            self.agent.limits.timeout.as_secs_f64()
        )
    }
}

/// Stored tool output is capped; the full text went to the model.
const PREVIEW_BYTES: usize = 16 * 1024;

fn preview(text: &str) -> &str {
    let mut end = text.len().min(PREVIEW_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn stop(out: LoopOutcome, termination: Termination, error: String) -> LoopOutcome {
    finish(out, termination, Some(error))
}

fn finish(mut out: LoopOutcome, termination: Termination, error: Option<String>) -> LoopOutcome {
    out.termination = termination;
    out.error = error;
    out
}
