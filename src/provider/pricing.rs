//! Context windows by model, and the prices (`config::prices`) each call is billed at.

pub use crate::config::prices::{Bill, Price, Prices, Rates};

/// Context windows in tokens, by longest model-name prefix.
const WINDOWS: &[(&str, &str, u64)] = &[
    ("openai", "gpt-4.1", 1_047_576),
    ("openai", "gpt-5", 400_000),
    // Not yet published as one figure for the family; gpt-5's, so compaction errs early.
    ("openai", "gpt-6", 400_000),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_by_prefix() {
        assert_eq!(context_window("openai", "gpt-4.1-mini"), 1_047_576);
        assert_eq!(context_window("anthropic", "claude-sonnet-4-5"), 200_000);
        assert_eq!(context_window("openai", "llama3"), DEFAULT_WINDOW);
    }
}
