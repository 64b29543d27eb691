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

    /// How long to wait for a whole answer that is not streamed, or for a streamed
    /// one's start and each gap in it, given the usual `timeout`: a high effort (`high` and above, or any level past `medium` a
    /// provider adds) or a thinking budget of 16,000 tokens or more may think for
    /// minutes before it answers, so it gets at least [`LONG_THINKING`].
    pub fn answer_timeout(&self, timeout: std::time::Duration) -> std::time::Duration {
        let light = ["none", "minimal", "low", "medium"];
        let long = self
            .effort
            .as_deref()
            .is_some_and(|e| !light.contains(&e.to_ascii_lowercase().as_str()))
            || self.budget_tokens.is_some_and(|b| b >= 16_000);
        match long {
            true => timeout.max(LONG_THINKING),
            false => timeout,
        }
    }
}

/// The least time an answer with a high reasoning effort is given (for a streamed
/// one: its start and each gap in it).
pub const LONG_THINKING: std::time::Duration = std::time::Duration::from_secs(600);

#[cfg(test)]
mod timeout_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn high_efforts_and_large_budgets_wait_longer() {
        let base = Duration::from_secs(120);
        let with = |effort: Option<&str>, budget: Option<u32>| ReasoningSpec {
            effort: effort.map(str::to_string),
            budget_tokens: budget,
            summary: None,
        };
        assert_eq!(ReasoningSpec::NONE.answer_timeout(base), base);
        assert_eq!(with(Some("medium"), None).answer_timeout(base), base);
        assert_eq!(with(Some("Low"), Some(4_000)).answer_timeout(base), base);
        for long in [
            with(Some("high"), None),
            with(Some("xhigh"), None),
            with(Some("max"), None),
            with(None, Some(32_000)),
        ] {
            assert_eq!(long.answer_timeout(base), LONG_THINKING);
        }
        assert_eq!(
            with(Some("high"), None).answer_timeout(Duration::from_secs(900)),
            Duration::from_secs(900)
        );
    }
}
