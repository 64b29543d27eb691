//! Prices per million tokens, for the cost of each call and the `max_cost_usd` cap.

use super::types::Usage;

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    pub output: f64,
}

const fn p(input: f64, cached_input: f64, cache_write: f64, output: f64) -> Price {
    Price {
        input,
        cached_input,
        cache_write,
        output,
    }
}

/// Published list prices (2025). Model names match by longest prefix, so dated
/// snapshots such as `gpt-4.1-2025-04-14` use their family's price.
const TABLE: &[(&str, &str, Price)] = &[
    ("openai", "gpt-5", p(1.25, 0.125, 1.25, 10.0)),
    ("openai", "gpt-5-mini", p(0.25, 0.025, 0.25, 2.0)),
    ("openai", "gpt-5-nano", p(0.05, 0.005, 0.05, 0.4)),
    ("openai", "gpt-4.1", p(2.0, 0.5, 2.0, 8.0)),
    ("openai", "gpt-4.1-mini", p(0.4, 0.1, 0.4, 1.6)),
    ("openai", "gpt-4.1-nano", p(0.1, 0.025, 0.1, 0.4)),
    ("openai", "gpt-4o", p(2.5, 1.25, 2.5, 10.0)),
    ("openai", "gpt-4o-mini", p(0.15, 0.075, 0.15, 0.6)),
    ("openai", "o3", p(2.0, 0.5, 2.0, 8.0)),
    ("openai", "o3-mini", p(1.1, 0.55, 1.1, 4.4)),
    ("openai", "o4-mini", p(1.1, 0.275, 1.1, 4.4)),
    ("anthropic", "claude-opus-4", p(15.0, 1.5, 18.75, 75.0)),
    ("anthropic", "claude-opus-4-5", p(5.0, 0.5, 6.25, 25.0)),
    ("anthropic", "claude-sonnet-4", p(3.0, 0.3, 3.75, 15.0)),
    ("anthropic", "claude-3-7-sonnet", p(3.0, 0.3, 3.75, 15.0)),
    ("anthropic", "claude-haiku-4-5", p(1.0, 0.1, 1.25, 5.0)),
    ("anthropic", "claude-3-5-haiku", p(0.8, 0.08, 1.0, 4.0)),
];

/// The price of `provider/model`, or `None` for models not in the table (self-hosted
/// models through an OpenAI-compatible server, new releases).
pub fn price(provider: &str, model: &str) -> Option<Price> {
    TABLE
        .iter()
        .filter(|(p, name, _)| *p == provider && model.starts_with(name))
        .max_by_key(|(_, name, _)| name.len())
        .map(|(_, _, price)| *price)
}

/// Context windows in tokens, by longest model-name prefix.
const WINDOWS: &[(&str, &str, u64)] = &[
    ("openai", "gpt-4.1", 1_047_576),
    ("openai", "gpt-5", 400_000),
    ("openai", "gpt-4o", 128_000),
    ("openai", "o3", 200_000),
    ("openai", "o4-mini", 200_000),
    ("openai", "gpt-4-turbo", 128_000),
    ("anthropic", "claude", 200_000),
];

/// Window used for models not in the table.
pub const DEFAULT_WINDOW: u64 = 128_000;

/// The context window of `provider/model`.
pub fn context_window(provider: &str, model: &str) -> u64 {
    WINDOWS
        .iter()
        .filter(|(p, name, _)| *p == provider && model.starts_with(name))
        .max_by_key(|(_, name, _)| name.len())
        .map_or(DEFAULT_WINDOW, |(_, _, w)| *w)
}

/// Cost in USD of one call's usage; zero for unknown models.
pub fn cost(provider: &str, model: &str, usage: &Usage) -> f64 {
    let Some(price) = price(provider, model) else {
        return 0.0;
    };
    let uncached = usage
        .input_tokens
        .saturating_sub(usage.cached_input_tokens)
        .saturating_sub(usage.cache_write_tokens);
    (uncached as f64 * price.input
        + usage.cached_input_tokens as f64 * price.cached_input
        + usage.cache_write_tokens as f64 * price.cache_write
        + usage.output_tokens as f64 * price.output)
        / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        assert_eq!(price("openai", "gpt-4.1-mini-2025-04-14").unwrap().input, 0.4);
        assert_eq!(price("openai", "gpt-4.1-2025-04-14").unwrap().input, 2.0);
        assert_eq!(
            price("anthropic", "claude-sonnet-4-5-20250929").unwrap().output,
            15.0
        );
        assert_eq!(price("anthropic", "claude-opus-4-5").unwrap().input, 5.0);
        assert!(price("openai", "llama3").is_none());
    }

    #[test]
    fn windows_by_prefix() {
        assert_eq!(context_window("openai", "gpt-4.1-mini"), 1_047_576);
        assert_eq!(context_window("anthropic", "claude-sonnet-4-5"), 200_000);
        assert_eq!(context_window("openai", "llama3"), DEFAULT_WINDOW);
    }

    #[test]
    fn cached_tokens_are_cheaper() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 1_000_000,
            cached_input_tokens: 500_000,
            ..Usage::default()
        };
        let c = cost("openai", "gpt-4.1", &usage);
        assert!((c - (1.0 + 0.25 + 8.0)).abs() < 1e-9, "{c}");
        assert_eq!(cost("openai", "unknown", &usage), 0.0);
    }
}
