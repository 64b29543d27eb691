//! A primary model with fallbacks, each retried with backoff.

use std::sync::Arc;

use super::Provider;
use super::error::ProviderError;
use super::pricing::{Bill, Prices};
use super::retry::RetryPolicy;
use super::types::{Caching, ChatRequest, ChatResponse, Message, ReasoningSpec, ToolDef, WireCache};
use crate::types::ModelRef;

/// The models a run may use, in order of preference.
#[derive(Clone)]
pub struct ModelChain {
    entries: Vec<(ModelRef, Arc<dyn Provider>)>,
    retry: RetryPolicy,
    /// Record message content on `chat` spans.
    capture_content: bool,
    /// The process's adaptive provider limits, when calls go through them.
    limiters: Option<Arc<super::Limiters>>,
    /// Who waits for this chain's calls.
    priority: super::Priority,
    /// Set when content must no longer be captured (see [`ModelChain::muted_by`]).
    muted: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// What each answer is billed at.
    prices: Arc<Prices>,
    /// The prompt-cache hints of every request (the agent's).
    caching: Caching,
    /// How hard every request asks the model to think (the agent's `reasoning`).
    reasoning: ReasoningSpec,
    /// The run's span: `chat` spans are its children when no other span is current.
    parent: Option<tracing::Span>,
}

/// A successful call and which model served it.
#[derive(Debug, Clone)]
pub struct ChatOutcome {
    pub response: ChatResponse,
    pub model: ModelRef,
    /// Failed attempts before this answer, across models.
    pub failed_attempts: Vec<ProviderError>,
    /// What the answer cost and would have cost uncached; `None` when the model has no
    /// price (its cost is unknown, not zero).
    pub bill: Option<Bill>,
}

impl ChatOutcome {
    /// The answer's cost in USD, when its model has a price.
    pub fn cost_usd(&self) -> Option<f64> {
        self.bill.map(|b| b.cost_usd)
    }
}

/// Retries of "slow down" answers before a call gives up: far beyond what a provider's
/// limit takes to clear; a run's timeout ends the wait before this does.
const MAX_SLOWED: u32 = 100;

/// How long a call waits on the provider's limits before the person is told.
const TELL_WAITING_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

/// Awaits `wait` (a limiter slot, a pause the provider asked for); once `tell_at`
/// passes while it waits, tells `stream` the run is waiting for the provider.
async fn noting<F: std::future::Future>(
    wait: F,
    stream: Option<&dyn super::Deltas>,
    tell_at: tokio::time::Instant,
    told: &mut bool,
) -> F::Output {
    let Some(stream) = stream.filter(|_| !*told) else {
        return wait.await;
    };
    tokio::pin!(wait);
    tokio::select! {
        out = &mut wait => out,
        () = tokio::time::sleep_until(tell_at) => {
            *told = true;
            stream.waiting(true);
            wait.await
        }
    }
}

impl ModelChain {
    pub fn new(entries: Vec<(ModelRef, Arc<dyn Provider>)>, retry: RetryPolicy, prices: Arc<Prices>) -> Self {
        ModelChain {
            entries,
            retry,
            capture_content: false,
            limiters: None,
            priority: super::Priority::Background,
            muted: None,
            prices,
            caching: Caching::NONE,
            reasoning: ReasoningSpec::NONE,
            parent: None,
        }
    }

    /// Asks every request's provider to cache this way (one agent's settings).
    pub fn caching(mut self, caching: Caching) -> Self {
        self.caching = caching;
        self
    }

    /// Asks every request's model to think this hard (one agent's `reasoning`).
    pub fn reasoning(mut self, reasoning: ReasoningSpec) -> Self {
        self.reasoning = reasoning;
        self
    }

    /// The price of the primary model, when it has one.
    pub fn primary_price(&self) -> Option<&super::pricing::Price> {
        let m = self.primary()?;
        self.prices.price(&m.provider, &m.model)
    }

    /// Records prompts and answers on the `chat` spans (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`, `gen_ai.system_instructions`). The caller turns this on
    /// only when the operator asked for content capture and the run is not private.
    pub fn capturing(mut self, on: bool) -> Self {
        self.capture_content = on;
        self
    }

    /// Takes a slot of `limiters` (per provider and model) for each call and tells it how
    /// the provider answered.
    pub fn limited_by(mut self, limiters: Arc<super::Limiters>) -> Self {
        self.limiters = Some(limiters);
        self
    }

    /// Whose work this is: a person waiting goes ahead of background work at a limit.
    pub fn priority(mut self, priority: super::Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Stops content capture once `muted` is set (the run read a private conversation
    /// mid-way).
    pub fn muted_by(mut self, muted: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.muted = Some(muted);
        self
    }

    /// The cache hints for a call now: once the run holds private content, its prompt is
    /// kept in the provider's cache no longer than the provider's default (no 24-hour
    /// retention, no one-hour lifetime).
    fn caching_now(&self) -> std::borrow::Cow<'_, Caching> {
        let private = self
            .muted
            .as_ref()
            .is_some_and(|m| m.load(std::sync::atomic::Ordering::SeqCst));
        match private && (self.caching.long_ttl || self.caching.retention.is_some()) {
            true => std::borrow::Cow::Owned(Caching {
                long_ttl: false,
                key: self.caching.key.clone(),
                retention: None,
            }),
            false => std::borrow::Cow::Borrowed(&self.caching),
        }
    }

    /// Whether this call's content goes on its span.
    fn captures(&self) -> bool {
        self.capture_content
            && !self
                .muted
                .as_ref()
                .is_some_and(|m| m.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Makes `chat` spans children of `run` (the run's span) unless another span is
    /// current (a compaction's).
    pub fn under(mut self, run: tracing::Span) -> Self {
        self.parent = Some(run);
        self
    }

    /// The parent of a span made for this chain's run: the current span, else the run's.
    pub fn span_parent(&self) -> Option<tracing::Id> {
        self.parent
            .as_ref()
            .map_or_else(crate::telemetry::parent, crate::telemetry::parent_or)
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
        let caching = self.caching_now();
        for (index, (model, provider)) in self.entries.iter().enumerate() {
            let request = ChatRequest {
                model: &model.model,
                system,
                messages,
                wire,
                tools,
                max_output_tokens,
                stream,
                caching: &caching,
                reasoning: &self.reasoning,
            };
            let span = tracing::info_span!(
                parent: self.span_parent(),
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
                "steward.cache_saved_usd" = tracing::field::Empty,
                "steward.retries" = tracing::field::Empty,
                // The chain's first model is the primary; later ones are fallbacks.
                "steward.fallback" = index > 0,
                "error.type" = tracing::field::Empty,
                "gen_ai.system_instructions" = tracing::field::Empty,
                "gen_ai.input.messages" = tracing::field::Empty,
                "gen_ai.output.messages" = tracing::field::Empty,
            );
            if self.captures() {
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
            // Its requests carry its trace context (`traceparent`) to the provider.
            let call = self.call_with_retries(provider.as_ref(), &request, &mut failed);
            let result = crate::telemetry::propagation::sending(crate::telemetry::span_context(&span), call)
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
                    let bill = self
                        .prices
                        .price(&model.provider, &model.model)
                        .map(|p| p.bill(u, caching.long_ttl));
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
                            ("steward.retries", &retries),
                        ],
                    );
                    // An unpriced model's cost is left off the span, not recorded as 0.
                    if let Some(b) = bill {
                        span.record("steward.cost_usd", b.cost_usd);
                        span.record("steward.cache_saved_usd", b.saved_usd());
                    }
                    if self.captures() {
                        span.record(
                            "gen_ai.output.messages",
                            super::content::output_messages(&response).as_str(),
                        );
                    }
                    return Ok(ChatOutcome {
                        response,
                        model: model.clone(),
                        failed_attempts: failed,
                        bill,
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
        // "Slow down" is not a failure: those retries are counted apart, and bounded
        // only far out (the run's own timeout ends a wait first).
        let mut slowed = 0;
        let limiter = self
            .limiters
            .as_ref()
            .map(|l| l.get(provider.name(), request.model));
        // Waiting on the provider's limits (a slot, a "slow down") longer than this is
        // shown to the person waiting; the call itself is not counted.
        let tell_at = tokio::time::Instant::now() + TELL_WAITING_AFTER;
        let mut told = false;
        loop {
            // A retry, or the first try of a fallback model, replaces what streamed.
            if let Some(stream) = request.stream
                && (attempt > 0 || slowed > 0 || !failed.is_empty())
            {
                stream.restart();
            }
            let permit = match &limiter {
                Some(l) => Some(noting(l.acquire(self.priority), request.stream, tell_at, &mut told).await),
                None => None,
            };
            let issued = permit.as_ref().map(|p| p.issued());
            let answer = provider.chat(request).await;
            drop(permit);
            match answer {
                Ok(r) => {
                    if let Some(l) = &limiter {
                        l.succeeded();
                        if let Some(wait) = r.spent_for {
                            l.spent_for(wait);
                        }
                    }
                    if let Some(stream) = request.stream {
                        stream.settled();
                        if told {
                            stream.waiting(false);
                        }
                        if request.reasoning.summary.is_some() {
                            for summary in r.reasoning.iter().filter_map(|r| r.summary()) {
                                stream.thinking(&summary);
                            }
                        }
                    }
                    return Ok(r);
                }
                Err(err) if err.is_slow_down() && limiter.is_some() && slowed < MAX_SLOWED => {
                    if let (Some(l), Some(issued)) = (&limiter, issued) {
                        l.slowed(issued, err.retry_after);
                    }
                    let wait = self.retry.delay(slowed.min(4), &err);
                    // Kind and status only: a provider's message can quote the request.
                    tracing::info!(provider = err.provider, kind = ?err.kind, status = ?err.status, slowed, wait_ms = wait.as_millis() as u64, "the provider asked to slow down; waiting");
                    failed.push(err);
                    noting(tokio::time::sleep(wait), request.stream, tell_at, &mut told).await;
                    slowed += 1;
                }
                Err(err) if err.kind.is_retryable() && attempt < self.retry.max_retries => {
                    let wait = self.retry.delay(attempt, &err);
                    tracing::warn!(provider = err.provider, kind = ?err.kind, status = ?err.status, attempt, wait_ms = wait.as_millis() as u64, "retrying model call");
                    failed.push(err);
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }
}
