//! A primary model with fallbacks, each retried with backoff.

use std::sync::Arc;

use super::Provider;
use super::error::ProviderError;
use super::retry::RetryPolicy;
use super::types::{ChatRequest, ChatResponse, Message, ToolDef, WireCache};
use crate::types::ModelRef;

/// The models a run may use, in order of preference.
#[derive(Clone)]
pub struct ModelChain {
    entries: Vec<(ModelRef, Arc<dyn Provider>)>,
    retry: RetryPolicy,
    /// Record message content on `chat` spans.
    capture_content: bool,
}

/// A successful call and which model served it.
#[derive(Debug, Clone)]
pub struct ChatOutcome {
    pub response: ChatResponse,
    pub model: ModelRef,
    /// Failed attempts before this answer, across models.
    pub failed_attempts: Vec<ProviderError>,
}

impl ModelChain {
    pub fn new(entries: Vec<(ModelRef, Arc<dyn Provider>)>, retry: RetryPolicy) -> Self {
        ModelChain {
            entries,
            retry,
            capture_content: false,
        }
    }

    /// Records prompts and answers on the `chat` spans (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`, `gen_ai.system_instructions`). The caller turns this on
    /// only when the operator asked for content capture and the run is not private.
    pub fn capturing(mut self, on: bool) -> Self {
        self.capture_content = on;
        self
    }

    /// The primary model.
    pub fn primary(&self) -> Option<&ModelRef> {
        self.entries.first().map(|(m, _)| m)
    }

    /// Calls the first model, retrying retryable errors per the policy, then falls back
    /// to the next model when the error allows it. Returns the last error otherwise.
    /// With `stream`, answers stream and their text goes there as it comes (restarted
    /// before a retry or a fallback, settled when an answer arrives).
    pub async fn chat(
        &self,
        system: &str,
        messages: &[Message],
        wire: &[WireCache],
        tools: &[ToolDef],
        max_output_tokens: u32,
        stream: Option<&dyn super::Deltas>,
    ) -> Result<ChatOutcome, ProviderError> {
        let mut failed = Vec::new();
        for (index, (model, provider)) in self.entries.iter().enumerate() {
            let request = ChatRequest {
                model: &model.model,
                system,
                messages,
                wire,
                tools,
                max_output_tokens,
                stream,
            };
            let span = tracing::info_span!(
                "chat",
                otel.kind = "client",
                "gen_ai.operation.name" = "chat",
                "gen_ai.provider.name" = provider.name(),
                "gen_ai.request.model" = model.model.as_str(),
                "gen_ai.request.max_tokens" = max_output_tokens,
                "gen_ai.response.model" = tracing::field::Empty,
                "gen_ai.response.id" = tracing::field::Empty,
                "gen_ai.response.finish_reasons" = tracing::field::Empty,
                "gen_ai.usage.input_tokens" = tracing::field::Empty,
                "gen_ai.usage.output_tokens" = tracing::field::Empty,
                "gen_ai.usage.cache_read.input_tokens" = tracing::field::Empty,
                "gen_ai.usage.cache_creation.input_tokens" = tracing::field::Empty,
                "gen_ai.usage.reasoning.output_tokens" = tracing::field::Empty,
                "steward.cost_usd" = tracing::field::Empty,
                "steward.retries" = tracing::field::Empty,
                // The chain's first model is the primary; later ones are fallbacks.
                "steward.fallback" = index > 0,
                "error.type" = tracing::field::Empty,
                "gen_ai.system_instructions" = tracing::field::Empty,
                "gen_ai.input.messages" = tracing::field::Empty,
                "gen_ai.output.messages" = tracing::field::Empty,
            );
            if self.capture_content {
                span.record(
                    "gen_ai.system_instructions",
                    super::content::system_instructions(system).as_str(),
                );
                span.record(
                    "gen_ai.input.messages",
                    super::content::input_messages(messages).as_str(),
                );
            }
            let failed_before = failed.len();
            // The span is not entered: a model call makes no spans of its own, and
            // entering on every poll of the HTTP future costs more than the span. It times
            // the call by living across it; retries are counted on it.
            let result = self
                .call_with_retries(provider.as_ref(), &request, &mut failed)
                .await
                .map_err(|mut e| {
                    e.model = model.model.clone();
                    e
                });
            for e in &mut failed[failed_before..] {
                e.model = model.model.clone();
            }
            match result {
                Ok(response) => {
                    let u = &response.usage;
                    let cost = super::pricing::cost(&model.provider, &model.model, u);
                    let retries = (failed.len() - failed_before) as u64;
                    crate::telemetry::record_fields(
                        &span,
                        &[
                            ("gen_ai.response.model", &response.model.as_str()),
                            ("gen_ai.response.id", &response.id.as_str()),
                            ("gen_ai.response.finish_reasons", &response.stop_reason.as_str()),
                            ("gen_ai.usage.input_tokens", &u.input_tokens),
                            ("gen_ai.usage.output_tokens", &u.output_tokens),
                            ("gen_ai.usage.cache_read.input_tokens", &u.cached_input_tokens),
                            ("gen_ai.usage.cache_creation.input_tokens", &u.cache_write_tokens),
                            ("gen_ai.usage.reasoning.output_tokens", &u.reasoning_tokens),
                            ("steward.cost_usd", &cost),
                            ("steward.retries", &retries),
                        ],
                    );
                    if self.capture_content {
                        span.record(
                            "gen_ai.output.messages",
                            super::content::output_messages(&response).as_str(),
                        );
                    }
                    return Ok(ChatOutcome {
                        response,
                        model: model.clone(),
                        failed_attempts: failed,
                    });
                }
                Err(err) => {
                    span.record("error.type", err.kind.as_str());
                    span.record("steward.retries", (failed.len() - failed_before) as u64);
                    let fallback = err.kind.allows_fallback();
                    failed.push(err);
                    if !fallback {
                        break;
                    }
                    tracing::warn!(model = %model, "model unavailable, trying the next fallback");
                }
            }
        }
        Err(failed.pop().unwrap_or_else(|| {
            ProviderError::new("steward", super::ErrorKind::NotConfigured, "no model configured")
        }))
    }

    async fn call_with_retries(
        &self,
        provider: &dyn Provider,
        request: &ChatRequest<'_>,
        failed: &mut Vec<ProviderError>,
    ) -> Result<ChatResponse, ProviderError> {
        let mut attempt = 0;
        loop {
            // A retry, or the first try of a fallback model, replaces what streamed.
            if let Some(stream) = request.stream
                && (attempt > 0 || !failed.is_empty())
            {
                stream.restart();
            }
            match provider.chat(request).await {
                Ok(r) => {
                    if let Some(stream) = request.stream {
                        stream.settled();
                    }
                    return Ok(r);
                }
                Err(err) if err.kind.is_retryable() && attempt < self.retry.max_retries => {
                    let wait = self.retry.delay(attempt, &err);
                    tracing::warn!(error = %err, attempt, wait_ms = wait.as_millis() as u64, "retrying model call");
                    failed.push(err);
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }
}
