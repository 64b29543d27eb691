//! Token counting with tiktoken. One [`TokenCounter`] per process (building an encoder
//! parses ~200k ranks), shared through `Arc`; no global singletons.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::types::ModelRef;

/// Above this many bytes, text is estimated (bytes / 4) instead of encoded: such text is
/// far over any file threshold, and encoding megabytes would cost seconds.
pub const EXACT_LIMIT_BYTES: usize = 256 * 1024;

/// Tokens of one piece of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub tokens: u64,
    /// True when estimated rather than encoded.
    pub estimated: bool,
}

/// Which encoding fits a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// GPT-4o, GPT-4.1, GPT-5, o-series.
    O200k,
    /// GPT-4 and GPT-3.5.
    Cl100k,
}

impl Encoding {
    /// The encoding for `model`. Anthropic does not publish its tokenizer, so its models
    /// are estimated with o200k (close enough for budgeting).
    pub fn for_model(model: &ModelRef) -> Encoding {
        let m = model.model.as_str();
        let old_openai = model.provider == "openai"
            && (m.starts_with("gpt-4-") || m == "gpt-4" || m.starts_with("gpt-3.5"));
        if old_openai {
            Encoding::Cl100k
        } else {
            Encoding::O200k
        }
    }
}

/// Lazily built encoders.
#[derive(Default)]
pub struct TokenCounter {
    o200k: OnceLock<Option<CoreBPE>>,
    cl100k: OnceLock<Option<CoreBPE>>,
}

impl TokenCounter {
    pub fn new() -> Self {
        TokenCounter::default()
    }

    fn bpe(&self, enc: Encoding) -> Option<&CoreBPE> {
        match enc {
            Encoding::O200k => self.o200k.get_or_init(|| tiktoken_rs::o200k_base().ok()).as_ref(),
            Encoding::Cl100k => self
                .cl100k
                .get_or_init(|| tiktoken_rs::cl100k_base().ok())
                .as_ref(),
        }
    }

    /// Counts `text`; exact up to [`EXACT_LIMIT_BYTES`], estimated above.
    pub fn count(&self, enc: Encoding, text: &str) -> Count {
        if text.len() > EXACT_LIMIT_BYTES {
            return estimate(text);
        }
        match self.bpe(enc) {
            Some(bpe) => Count {
                tokens: bpe.encode_ordinary(text).len() as u64,
                estimated: false,
            },
            None => estimate(text),
        }
    }

    /// The longest prefix of `text` of at most `max_tokens` tokens, cut on a char
    /// boundary.
    pub fn prefix<'a>(&self, enc: Encoding, text: &'a str, max_tokens: u64) -> &'a str {
        // Only the head can matter: a token is rarely longer than 16 bytes.
        let head = floor_char(text, (max_tokens as usize).saturating_mul(16).min(text.len()));
        let Some(bpe) = self.bpe(enc) else {
            return floor_char(text, (max_tokens as usize) * 4);
        };
        let tokens = bpe.encode_ordinary(head);
        if tokens.len() as u64 <= max_tokens {
            return head;
        }
        let bytes: usize = tokens[..max_tokens as usize]
            .iter()
            .map(|t| {
                bpe.decode_bytes(std::slice::from_ref(t))
                    .map(|b| b.len())
                    .unwrap_or(0)
            })
            .sum();
        floor_char(text, bytes)
    }
}

fn estimate(text: &str) -> Count {
    Count {
        tokens: (text.len() as u64).div_ceil(4),
        estimated: true,
    }
}

/// A quick token estimate for budgeting the conversation between provider reports: a
/// token per four letters, digits or spaces, three per four punctuation marks (JSON is
/// mostly punctuation tokens), and one per non-ASCII character (CJK text is about a
/// token per character). One pass over the bytes, no tables; the provider's reported
/// input size replaces these estimates each turn (see `run::conversation`).
pub fn quick_estimate(text: &str) -> u64 {
    let (mut plain, mut punct, mut wide) = (0u64, 0u64, 0u64);
    for &b in text.as_bytes() {
        if b.is_ascii_alphanumeric() || b.is_ascii_whitespace() {
            plain += 1;
        } else if b < 0x80 {
            punct += 1;
        } else if b & 0xC0 != 0x80 {
            // The lead byte of a multi-byte character; continuation bytes are skipped.
            wide += 1;
        }
    }
    plain.div_ceil(4) + (punct * 3).div_ceil(4) + wide
}

/// The largest char boundary at or below `at`.
pub fn floor_char(text: &str, at: usize) -> &str {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_cuts_prefixes() {
        let c = TokenCounter::new();
        let n = c.count(Encoding::O200k, "hello world, this is a test");
        assert!(!n.estimated && n.tokens > 3 && n.tokens < 12, "{n:?}");
        let text = "word ".repeat(5000);
        let p = c.prefix(Encoding::O200k, &text, 100);
        assert_eq!(c.count(Encoding::O200k, p).tokens, 100);
        assert!(text.starts_with(p));
        let big = "x".repeat(EXACT_LIMIT_BYTES + 4);
        assert_eq!(
            c.count(Encoding::O200k, &big),
            Count {
                tokens: (EXACT_LIMIT_BYTES as u64 + 4) / 4,
                estimated: true
            }
        );
        assert_eq!(c.prefix(Encoding::O200k, "short", 100), "short");
    }

    #[test]
    fn quick_estimates_stay_near_the_encoder() {
        let c = TokenCounter::new();
        for text in [
            "The quick brown fox jumps over the lazy dog. ".repeat(40),
            "日本語のテキストです。".repeat(40),
            "{\"id\": 12345, \"name\": \"value\", \"tags\": [\"a\", \"b\"]}\n".repeat(40),
        ] {
            let exact = c.count(Encoding::O200k, &text).tokens as f64;
            let quick = quick_estimate(&text) as f64;
            assert!(
                quick / exact > 0.75 && quick / exact < 1.5,
                "{quick} vs {exact} for {text:.20}"
            );
        }
        assert_eq!(quick_estimate(""), 0);
        assert_eq!(quick_estimate("abcde"), 2);
        assert_eq!(quick_estimate("é"), 1);
    }

    #[test]
    fn picks_encodings() {
        assert_eq!(
            Encoding::for_model(&ModelRef::parse("openai/gpt-4-turbo").unwrap()),
            Encoding::Cl100k
        );
        assert_eq!(
            Encoding::for_model(&ModelRef::parse("openai/gpt-4.1").unwrap()),
            Encoding::O200k
        );
        assert_eq!(
            Encoding::for_model(&ModelRef::parse("anthropic/claude-sonnet-4-5").unwrap()),
            Encoding::O200k
        );
    }
}
