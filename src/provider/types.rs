//! Provider-neutral conversation types. Each vendor adapter maps these to its wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::OnceLock;

pub use crate::types::{ReasoningSpec, Usage};

/// A tool call requested by the model. `arguments` is kept as the raw JSON text the
/// model produced, so malformed arguments can be reported back instead of lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// An image sent as image content (base64).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    pub mime: String,
    pub data_base64: String,
}

/// One message of the conversation after the system prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<Image>,
    },
    Assistant {
        text: Option<String>,
        tool_calls: Vec<ToolCall>,
        /// What the model reasoned before this answer, as its provider returned it, to
        /// be sent back unchanged in later turns. Never shown to people.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        reasoning: Vec<Reasoning>,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

/// One piece of a model's reasoning state, kept opaque: an OpenAI reasoning item
/// (`{"type": "reasoning", "id", "encrypted_content", "summary"}`, from a request with
/// `store: false`) or an Anthropic `thinking` / `redacted_thinking` block with its
/// signature. The APIs refuse a tool-loop continuation whose reasoning was dropped or
/// altered, and accept it only from the model that wrote it, so it is sent back
/// byte-for-byte and only to that provider and model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The provider that returned it (`openai`, `anthropic`).
    pub provider: String,
    /// The model asked (as in the request), whose later calls may carry it.
    pub model: String,
    /// The item or block exactly as received.
    pub item: Value,
}

impl Reasoning {
    /// Whether a request to `provider`'s `model` may carry this item.
    pub fn belongs_to(&self, provider: &str, model: &str) -> bool {
        self.provider == provider && self.model == model
    }

    /// The readable summary in this item, if the provider sent one: OpenAI's
    /// `summary[].text` parts, joined. Encrypted content is never read.
    pub fn summary(&self) -> Option<String> {
        let parts: Vec<&str> = self.item["summary"]
            .as_array()?
            .iter()
            .filter_map(|p| p["text"].as_str())
            .filter(|t| !t.trim().is_empty())
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

impl Message {
    /// An assistant message without reasoning.
    pub fn assistant(text: Option<String>, tool_calls: Vec<ToolCall>) -> Message {
        Message::Assistant {
            text,
            tool_calls,
            reasoning: Vec::new(),
        }
    }

    /// A text-only user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message::User {
            content: content.into(),
            images: Vec::new(),
        }
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments. serde_json keeps object keys sorted, so the
    /// serialized schema is byte-stable across turns (provider prompt caches hit).
    pub parameters: Value,
    /// The tool serialized, filled by the first request that sends it.
    #[serde(skip)]
    pub wire: ToolWire,
}

impl ToolDef {
    /// A tool offered with this schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: description.into(),
            parameters,
            wire: ToolWire::default(),
        }
    }

    /// The parameters' JSON, serialized once.
    pub fn parameters_json(&self) -> Result<&RawValue, serde_json::Error> {
        cached(&self.wire.parameters, || {
            serde_json::value::to_raw_value(&self.parameters)
        })
    }
}

/// A [`ToolDef`] serialized, once per run rather than once per turn: every turn of a
/// run offers the same tools, and writing their schemas and descriptions out again
/// each turn cost more than the rest of the request body (whose messages are cached
/// in [`WireCache`]). A clone starts empty (a copy may be changed before it is sent),
/// and it takes no part in comparisons: it is derived from the other fields.
#[derive(Default)]
pub struct ToolWire {
    parameters: OnceLock<Box<RawValue>>,
    /// The whole tool as OpenAI's Chat Completions takes it.
    pub openai: OnceLock<Box<RawValue>>,
    /// The whole tool as OpenAI's Responses API takes it.
    pub responses: OnceLock<Box<RawValue>>,
    /// The whole tool as Anthropic's Messages API takes it, without a cache marker.
    pub anthropic: OnceLock<Box<RawValue>>,
}

impl Clone for ToolWire {
    fn clone(&self) -> Self {
        ToolWire::default()
    }
}

impl PartialEq for ToolWire {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for ToolWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolWire")
    }
}

/// The value in `slot`, made by `make` the first time.
pub fn cached(
    slot: &OnceLock<Box<RawValue>>,
    make: impl FnOnce() -> Result<Box<RawValue>, serde_json::Error>,
) -> Result<&RawValue, serde_json::Error> {
    if let Some(raw) = slot.get() {
        return Ok(raw);
    }
    let raw = make()?;
    Ok(slot.get_or_init(|| raw))
}

/// A message's serialized wire form, filled by the adapter the first time it sends the
/// message. A message never changes once it is in a conversation, so later turns copy
/// these bytes instead of serializing the whole conversation again.
#[derive(Debug, Default)]
pub struct WireCache {
    pub openai: std::sync::OnceLock<Box<serde_json::value::RawValue>>,
    /// The message as Responses API input items (an assistant turn may be several:
    /// reasoning, text, function calls), with the model they were encoded for: which
    /// reasoning goes in depends on it.
    pub responses: std::sync::OnceLock<(Box<str>, Vec<Box<serde_json::value::RawValue>>)>,
}

/// Receives a model's answer text as it streams from the provider.
pub trait Deltas: Send + Sync + std::fmt::Debug {
    /// The next piece of the answer's text.
    fn text(&self, delta: &str);
    /// Another attempt begins (a retry, a fallback model): the pieces given since the
    /// last settled answer belong to an answer that will not be.
    fn restart(&self);
    /// An answer arrived whole: its pieces stand.
    fn settled(&self);
    /// The provider asked to slow down and the call has waited a few seconds for it
    /// (`true`), or the wait is over (`false`): tell the person waiting.
    fn waiting(&self, _on: bool) {}
    /// A reasoning summary of the answer just settled (the agent asked for
    /// `reasoning.summary`): shown as a step, never as the answer.
    fn thinking(&self, _summary: &str) {}
}

/// How a request asks the provider's prompt cache to keep its prefix (per agent, so
/// every run of an agent asks the same way and lands on the same cache).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caching {
    /// Anthropic: marked prefixes live an hour rather than five minutes (for agents
    /// that may idle longer between turns: slow tools, approvals). Billed at the
    /// one-hour write rate.
    pub long_ttl: bool,
    /// OpenAI `prompt_cache_key`: one value per agent, so its runs share a cache.
    pub key: Option<String>,
    /// OpenAI `prompt_cache_retention` (`in_memory` or `24h`).
    pub retention: Option<String>,
}

impl Caching {
    /// No cache hints beyond the providers' defaults.
    pub const NONE: Caching = Caching {
        long_ttl: false,
        key: None,
        retention: None,
    };
}

/// One model call.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// Model name without the provider prefix.
    pub model: &'a str,
    pub system: &'a str,
    pub messages: &'a [Message],
    /// One entry per message when the caller keeps encodings between turns (a
    /// conversation); empty otherwise.
    pub wire: &'a [WireCache],
    pub tools: &'a [ToolDef],
    pub max_output_tokens: u32,
    /// Stream the answer and hand its text here as it comes; `None` asks for the whole
    /// answer at once.
    pub stream: Option<&'a dyn Deltas>,
    /// Prompt-cache hints.
    pub caching: &'a Caching,
    /// How hard the model should think.
    pub reasoning: &'a ReasoningSpec,
}

/// The model's answer to one call (serializable for eval cassettes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// The provider's stop reason as sent (`stop`, `tool_calls`, `end_turn`, ...).
    pub stop_reason: String,
    /// The model that answered, as reported by the server.
    pub model: String,
    /// The provider's id of this response (`chatcmpl-...`, `msg_...`), when it sent one.
    pub id: String,
    /// Reasoning to carry into the next turn (see [`Reasoning`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
    /// How long the provider's rate-limit budget for this model is spent (its
    /// rate-limit headers said none is left); the chain pauses the model's limiter.
    /// Not recorded.
    #[serde(skip)]
    pub spent_for: Option<std::time::Duration>,
}

impl ChatResponse {
    /// This answer with the rate-limit wait its headers asked for.
    pub fn spent(mut self, spent_for: Option<std::time::Duration>) -> Self {
        self.spent_for = spent_for;
        self
    }
}
