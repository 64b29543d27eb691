//! How hard a model should think: an agent's `reasoning:` block.

use serde::{Deserialize, Serialize};

/// How hard a model should think, per agent (`reasoning:` in its config). Each adapter
/// maps it to its API: OpenAI `reasoning.effort` (Chat Completions `reasoning_effort`),
/// Anthropic adaptive thinking with `output_config.effort`, or a thinking budget.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasoningSpec {
    /// Passed through as the provider spells it (`none`, `minimal`, `low`, `medium`,
    /// `high`, `xhigh`, `max`, ...); `none` turns Anthropic's thinking off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// Anthropic: a fixed thinking budget (`thinking.budget_tokens`) for models that
    /// take one, instead of adaptive thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
    /// OpenAI: ask for reasoning summaries (`auto`, `concise`, `detailed`). In Slack
    /// each turn's summary is shown as a "Thinking…" step of the streamed reply, never
    /// as the answer; runs, spans and the inspector do not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

impl ReasoningSpec {
    /// Nothing asked: each provider's default.
    pub const NONE: ReasoningSpec = ReasoningSpec {
        effort: None,
        budget_tokens: None,
        summary: None,
    };

    /// Whether anything is asked at all.
    pub fn is_set(&self) -> bool {
        self != &ReasoningSpec::NONE
    }
}
