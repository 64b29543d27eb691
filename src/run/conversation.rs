//! The conversation a coordinator sends to the model, with token counts kept per message
//! so the total is known every turn without re-tokenizing the conversation.
//!
//! Counts are quick estimates ([`quick_estimate`]) until the provider reports the real
//! input size of a request; from then on the total is that report plus estimates of the
//! messages added since. So no turn runs a tokenizer, and the figure the model and the
//! compaction threshold see is exact up to the newest messages.

use crate::files::FileMeta;
use crate::provider::{Message, ToolDef, WireCache};
use crate::tokens::quick_estimate;

/// Framing tokens per message (role, separators), as OpenAI documents for chat formats.
const PER_MESSAGE: u64 = 4;
/// Rough cost of one image (a 1024×1024 image is ~765–1,600 tokens depending on provider).
const PER_IMAGE: u64 = 1_000;

/// Messages after the system prompt, each with its token count.
pub struct Conversation {
    messages: Vec<Message>,
    tokens: Vec<u64>,
    /// Each message's encoding, kept so a turn serializes only what is new.
    wire: Vec<WireCache>,
    /// System prompt and tool definitions: counted once, sent every turn.
    fixed: u64,
    /// The provider-reported input tokens of the last request.
    reported: Option<u64>,
    /// Sum of the estimates of the messages added since that report (all of them without one).
    since_report: u64,
}

impl Conversation {
    pub fn new(fixed: u64) -> Self {
        Conversation {
            messages: Vec::new(),
            tokens: Vec::new(),
            wire: Vec::new(),
            fixed,
            reported: None,
            since_report: 0,
        }
    }

    /// Appends a message whose tokens were counted by [`message_tokens`].
    pub fn push(&mut self, message: Message, tokens: u64) {
        self.since_report += tokens;
        self.messages.push(message);
        self.tokens.push(tokens);
        self.wire.push(WireCache::default());
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Per-message encodings, parallel to [`Conversation::messages`].
    pub fn wire(&self) -> &[WireCache] {
        &self.wire
    }

    pub fn token_counts(&self) -> &[u64] {
        &self.tokens
    }

    /// Tokens of the next request's input.
    pub fn total(&self) -> u64 {
        self.reported.unwrap_or(self.fixed) + self.since_report
    }

    /// Records the provider's count of a request's input, which held every message up
    /// to now. A zero (a provider that reports nothing) keeps the estimates.
    pub fn observe_input(&mut self, input_tokens: u64) {
        if input_tokens > 0 {
            self.reported = Some(input_tokens);
            self.since_report = 0;
        }
    }

    pub fn fixed(&self) -> u64 {
        self.fixed
    }

    /// Replaces the messages (after compaction).
    pub fn replace(&mut self, messages: Vec<(Message, u64)>) {
        self.messages.clear();
        self.tokens.clear();
        self.wire.clear();
        self.reported = None;
        self.since_report = 0;
        for (m, t) in messages {
            self.push(m, t);
        }
    }
}

/// Estimated tokens of one message.
pub fn message_tokens(message: &Message) -> u64 {
    let count = quick_estimate;
    PER_MESSAGE
        + match message {
            Message::User { content, images } => count(content) + PER_IMAGE * images.len() as u64,
            Message::Assistant { text, tool_calls, .. } => {
                text.as_deref().map_or(0, count)
                    + tool_calls
                        .iter()
                        .map(|c| count(&c.name) + count(&c.arguments) + 3)
                        .sum::<u64>()
            }
            Message::Tool { content, .. } => count(content),
        }
}

/// Tokens of a tool message whose content counts `content_tokens` (as
/// [`message_tokens`] would count it).
pub fn tool_message_tokens(content_tokens: u64) -> u64 {
    PER_MESSAGE + content_tokens
}

/// Estimated tokens of the system prompt and tool definitions. Each tool counts its
/// name, description and schema (the schema serialized once, as the requests send it)
/// and the punctuation around them.
pub fn fixed_tokens(system: &str, tools: &[ToolDef]) -> u64 {
    let frame = quick_estimate(r#"{"name":"","description":"","parameters":},"#);
    let defs: u64 = tools
        .iter()
        .map(|t| {
            let schema = t.parameters_json().map_or(0, |raw| quick_estimate(raw.get()));
            frame + quick_estimate(&t.name) + quick_estimate(&t.description) + schema
        })
        .sum();
    PER_MESSAGE + quick_estimate(system) + defs
}

/// The status appended after every tool round: context use and the file list.
pub fn status_message(used: u64, window: u64, compact_at: f64, files: &[FileMeta]) -> String {
    let pct = used as f64 * 100.0 / window.max(1) as f64;
    let mut out = format!(
        "[steward status] Context: {used} of {window} tokens used ({pct:.1}%); compaction at {:.0}%.",
        compact_at * 100.0
    );
    out.push_str(&file_list(files));
    out
}

/// `\nFiles:\n- f_1 ...` or an empty string.
pub fn file_list(files: &[FileMeta]) -> String {
    if files.is_empty() {
        return "\nFiles: none.".into();
    }
    let mut out = String::from("\nFiles:");
    for f in files {
        out.push_str("\n- ");
        out.push_str(&f.describe());
    }
    out
}
