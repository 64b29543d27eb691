//! Model providers: a small [`Provider`] trait with one file per vendor, retries with
//! backoff, fallback chains and a price table.

pub mod anthropic;
pub mod chain;
pub mod content;
pub mod endpoint;
pub mod error;
pub mod limiter;
pub mod openai;
pub mod openai_responses;
pub mod pricing;
pub mod rate_headers;
pub mod retry;
pub mod settings;
pub mod types;

mod wire;

use async_trait::async_trait;

pub use chain::ModelChain;
pub use endpoint::Endpoint;
pub use error::{ErrorKind, ProviderError};
pub use limiter::{Limiters, Priority};
pub use settings::ProviderSet;
pub use types::{
    Caching, ChatRequest, ChatResponse, Deltas, Message, Reasoning, ReasoningSpec, ToolCall, ToolDef, Usage,
    WireCache,
};

/// One vendor API. Implementations make exactly one HTTP attempt per call; retries and
/// fallbacks live in [`ModelChain`] so every vendor gets the same policy.
#[async_trait]
pub trait Provider: Send + Sync {
    /// `openai`, `anthropic`, ... as used in model names and spans.
    fn name(&self) -> &'static str;
    async fn chat(&self, request: &ChatRequest<'_>) -> Result<ChatResponse, ProviderError>;

    /// The shutdown dates the provider itself announces for its models (OpenAI's
    /// `GET /v1/models` `shutdown_date`), by model name: `None` when the provider has
    /// no such list (the shipped lifecycle file is then all there is).
    async fn shutdown_dates(&self) -> Result<Option<ShutdownDates>, ProviderError> {
        Ok(None)
    }
}

/// Model names with the shutdown date the provider lists (`None`: none announced).
pub type ShutdownDates = std::collections::HashMap<String, Option<chrono::NaiveDate>>;
