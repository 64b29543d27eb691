//! Anthropic Messages API.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::endpoint::Endpoint;
use super::error::{ErrorKind, ProviderError};
use super::types::{ChatRequest, ChatResponse, Message, ToolCall, Usage, cached};
use super::{Provider, wire};
use serde_json::value::RawValue;

pub const NAME: &str = "anthropic";
const API_VERSION: &str = "2023-06-01";

/// A Messages API client for one endpoint.
pub struct Anthropic {
    client: reqwest::Client,
    endpoint: Endpoint,
    timeout: Duration,
}

impl Anthropic {
    pub fn new(client: reqwest::Client, endpoint: Endpoint, timeout: Duration) -> Self {
        Anthropic {
            client,
            endpoint,
            timeout,
        }
    }
}

#[async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn chat(&self, request: &ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let body = encode_request(request)
            .map_err(|e| ProviderError::new(NAME, ErrorKind::BadRequest, e.to_string()))?;
        let url = format!("{}/v1/messages", self.endpoint.base_url.trim_end_matches('/'));
        let mut http = self.client.post(url).header("anthropic-version", API_VERSION);
        if let Some(key) = &self.endpoint.api_key {
            http = http.header("x-api-key", key);
        }
        // A model asked to think hard may send nothing for minutes.
        let timeout = request.reasoning.answer_timeout(self.timeout);
        let Some(deltas) = request.stream else {
            let (response, spent): (WireResponse, _) = wire::post_json(NAME, http, body, timeout).await?;
            return Ok(decode_response(response, request.model).spent(spent));
        };
        let mut stream = Streamed::default();
        let spent = wire::post_sse(NAME, http, body, timeout, |data| stream.take(data, deltas)).await?;
        Ok(decode_response(stream.response()?, request.model).spent(spent))
    }
}

/// A streamed Messages answer put back together from its events: `message_start` (id,
/// model, input usage), `content_block_start` / `_delta` (text, tool input as partial
/// JSON, thinking and its signature), `message_delta` (stop reason, output usage); an
/// `error` event fails the call.
#[derive(Default)]
struct Streamed {
    message: Value,
    /// Blocks by index: the block as started, and the text or partial JSON it grew.
    blocks: Vec<(Value, String)>,
}

impl Streamed {
    fn take(&mut self, data: &str, deltas: &dyn super::Deltas) -> Result<(), ProviderError> {
        let event = super::wire::stream_event(NAME, data)?;
        let index = event["index"].as_u64().unwrap_or(0) as usize;
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => self.message = event["message"].clone(),
            "content_block_start" => {
                if self.blocks.len() <= index {
                    self.blocks.resize(index + 1, (Value::Null, String::new()));
                }
                self.blocks[index].0 = event["content_block"].clone();
            }
            "content_block_delta" => {
                let Some((_, grown)) = self.blocks.get_mut(index) else {
                    return Ok(());
                };
                let delta = &event["delta"];
                match delta["type"].as_str().unwrap_or_default() {
                    // Thinking grows its block; it is never the answer's text.
                    "thinking_delta" => grown.push_str(delta["thinking"].as_str().unwrap_or_default()),
                    // The signature comes whole, just before the block stops.
                    "signature_delta" => {
                        self.blocks[index].0["signature"] = delta["signature"].clone();
                    }
                    _ => {
                        if let Some(text) = delta["text"].as_str() {
                            grown.push_str(text);
                            deltas.text(text);
                        } else if let Some(json) = delta["partial_json"].as_str() {
                            grown.push_str(json);
                        }
                    }
                }
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    self.message["stop_reason"] = Value::String(reason.to_string());
                }
                if let Some(out) = event["usage"]["output_tokens"].as_u64() {
                    self.message["usage"]["output_tokens"] = out.into();
                }
            }
            "error" => return Err(wire::stream_error(NAME, data)),
            _ => {}
        }
        Ok(())
    }

    /// The answer as the non-streamed API would have sent it.
    fn response(mut self) -> Result<WireResponse, ProviderError> {
        let content: Vec<Value> = self
            .blocks
            .into_iter()
            .map(|(mut block, grown)| {
                match block["type"].as_str() {
                    Some("text") => block["text"] = Value::String(grown),
                    Some("thinking") => block["thinking"] = Value::String(grown),
                    Some("tool_use") => {
                        // An empty input streams no JSON at all.
                        block["input"] = match grown.trim() {
                            "" => serde_json::json!({}),
                            json => serde_json::from_str(json).unwrap_or(Value::String(grown.clone())),
                        };
                    }
                    _ => {}
                }
                block
            })
            .collect();
        self.message["content"] = Value::Array(content);
        serde_json::from_value(self.message).map_err(|e| {
            ProviderError::new(
                NAME,
                ErrorKind::Decode,
                format!("cannot assemble a streamed answer: {e}"),
            )
        })
    }
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    system: [SystemBlock<'a>; 1],
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolItem<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<Value>,
}

/// A tool in the request: serialized before, or with the cache marker.
#[derive(Serialize)]
#[serde(untagged)]
enum ToolItem<'a> {
    Cached(&'a RawValue),
    Marked(WireTool<'a>),
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// Where a cached prefix ends (Anthropic reads the longest cached prefix ending at or
/// up to 20 blocks before a marker, and writes one at each marker).
#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
    /// Omitted for the default five minutes, so the bytes stay as they were.
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl: Option<&'static str>,
}

impl CacheControl {
    fn for_request(caching: &super::types::Caching) -> CacheControl {
        CacheControl {
            kind: "ephemeral",
            ttl: caching.long_ttl.then_some("1h"),
        }
    }
}

/// The API refuses more than this many `cache_control` markers in one request.
pub const MAX_MARKERS: usize = 4;

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<Marked<'a>>,
}

/// A content block, with a cache marker when a prefix should end at it.
#[derive(Serialize)]
struct Marked<'a> {
    #[serde(flatten)]
    block: Content<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// A block built from the conversation, or one sent back as the model wrote it (a
/// thinking block with its signature).
#[derive(Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Built(Block<'a>),
    Verbatim(&'a Value),
}

impl<'a> From<Block<'a>> for Marked<'a> {
    fn from(block: Block<'a>) -> Self {
        Marked {
            block: Content::Built(block),
            cache_control: None,
        }
    }
}

impl Marked<'_> {
    /// A block the API accepts a marker on: not an empty text block, and never a
    /// thinking block (a marker there is refused, and would change it).
    fn markable(&self) -> bool {
        match &self.block {
            Content::Built(Block::Text { text }) => !text.is_empty(),
            Content::Built(_) => true,
            Content::Verbatim(_) => false,
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    Image {
        source: ImageSource<'a>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::value::RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

/// Serializes a request body exactly as sent. Anthropic needs strictly alternating
/// roles, so tool results and any following user text merge into one user message.
///
/// Cache markers go where long-running agent clients put them, at most
/// [`MAX_MARKERS`]: the last tool, the system prompt, and the last block of each of the
/// last two messages. Tools, system and earlier messages serialize byte-identically
/// from turn to turn, so each request reads the previous one's prefix from cache and
/// writes only what the turn added. A marker never adds or changes content.
pub fn encode_request(request: &ChatRequest<'_>) -> Result<Vec<u8>, serde_json::Error> {
    let mut messages: Vec<WireMessage> = Vec::with_capacity(request.messages.len());
    for m in request.messages {
        let (role, blocks) = match m {
            Message::User { content, images } => {
                // Images first, then the text that refers to them (Anthropic's advice).
                let mut blocks: Vec<Block> = images
                    .iter()
                    .map(|i| Block::Image {
                        source: ImageSource {
                            kind: "base64",
                            media_type: &i.mime,
                            data: &i.data_base64,
                        },
                    })
                    .collect();
                blocks.push(Block::Text { text: content });
                ("user", blocks.into_iter().map(Marked::from).collect::<Vec<_>>())
            }
            Message::Assistant {
                text,
                tool_calls,
                reasoning,
            } => {
                let mut blocks: Vec<Marked> = Vec::with_capacity(tool_calls.len() + reasoning.len() + 1);
                // Thinking first, as the model wrote it; only to the model that wrote
                // it (another refuses its signature).
                blocks.extend(
                    reasoning
                        .iter()
                        .filter(|r| r.belongs_to(NAME, request.model))
                        .map(|r| Marked {
                            block: Content::Verbatim(&r.item),
                            cache_control: None,
                        }),
                );
                if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(Block::Text { text }.into());
                }
                for c in tool_calls {
                    // Anthropic needs an object; arguments another model mangled become {}.
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| Value::Object(Default::default()));
                    blocks.push(
                        Block::ToolUse {
                            id: &c.id,
                            name: &c.name,
                            input,
                        }
                        .into(),
                    );
                }
                ("assistant", blocks)
            }
            Message::Tool {
                call_id,
                content,
                is_error,
                ..
            } => (
                "user",
                vec![Marked::from(Block::ToolResult {
                    tool_use_id: call_id,
                    content,
                    is_error: *is_error,
                })],
            ),
        };
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(WireMessage {
                role,
                content: blocks,
            }),
        }
    }
    let marker = CacheControl::for_request(request.caching);
    // Every tool but the last is the same bytes each turn; the last carries the
    // marker that caches the tool list.
    let mut tools = Vec::with_capacity(request.tools.len());
    for (i, t) in request.tools.iter().enumerate() {
        let tool = |cache_control| -> Result<WireTool<'_>, serde_json::Error> {
            Ok(WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: t.parameters_json()?,
                cache_control,
            })
        };
        tools.push(if i + 1 == request.tools.len() {
            ToolItem::Marked(tool(Some(marker))?)
        } else {
            ToolItem::Cached(cached(&t.wire.anthropic, || {
                serde_json::value::to_raw_value(&tool(None)?)
            })?)
        });
    }
    let system = SystemBlock {
        kind: "text",
        text: request.system,
        cache_control: (!request.system.is_empty()).then_some(marker),
    };
    for m in messages.iter_mut().rev().take(2) {
        if let Some(last) = m.content.iter_mut().rev().find(|b| b.markable()) {
            last.cache_control = Some(marker);
        }
    }
    let (thinking, output_config, max_tokens) = thinking(request);
    let body = WireRequest {
        stream: request.stream.is_some(),
        model: request.model,
        max_tokens,
        system: [system],
        messages,
        tools,
        thinking,
        output_config,
    };
    serde_json::to_vec(&body)
}

/// The request's `thinking`, `output_config` and `max_tokens` for the agent's
/// `reasoning`: a budget asks for fixed thinking (`max_tokens` grows by it, since the
/// budget counts against it); an effort asks for adaptive thinking at that effort;
/// `none` or nothing asks for none.
///
/// A tool loop that began without thinking from this model (an earlier answer came
/// from a fallback, or a checkpoint from before thinking was configured) continues
/// without it: the API refuses thinking when the assistant turn being continued does
/// not start with a thinking block.
fn thinking(request: &ChatRequest<'_>) -> (Option<Value>, Option<Value>, u32) {
    let spec = request.reasoning;
    let max = request.max_output_tokens;
    let effort = spec.effort.as_deref().filter(|e| *e != "none");
    if spec.budget_tokens.is_none() && effort.is_none() {
        return (None, None, max);
    }
    // The turn being continued: the last assistant message, when it called tools
    // (its results, and any text after them, make the user turn that follows).
    let open = request.messages.iter().rev().find_map(|m| match m {
        Message::Assistant {
            tool_calls,
            reasoning,
            ..
        } => Some((!tool_calls.is_empty()).then_some(reasoning)),
        _ => None,
    });
    // `None` also when that message called no tools: no turn is being continued.
    let open = open.flatten();
    if let Some(reasoning) = open
        && !reasoning.iter().any(|r| r.belongs_to(NAME, request.model))
    {
        return (None, None, max);
    }
    let output_config = effort.map(|e| serde_json::json!({"effort": e}));
    match spec.budget_tokens {
        Some(budget) => (
            Some(serde_json::json!({"type": "enabled", "budget_tokens": budget})),
            output_config,
            max.saturating_add(budget),
        ),
        None => (Some(serde_json::json!({"type": "adaptive"})), output_config, max),
    }
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// The answer as the provider-neutral response; `model` is the model asked, whose
/// later turns may carry this answer's thinking blocks.
fn decode_response(response: WireResponse, model: &str) -> ChatResponse {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut reasoning = Vec::new();
    for block in response.content {
        let field = |name: &str| block[name].as_str().unwrap_or_default().to_string();
        match block["type"].as_str().unwrap_or_default() {
            "text" => text.push_str(block["text"].as_str().unwrap_or_default()),
            "tool_use" => tool_calls.push(ToolCall {
                id: field("id"),
                name: field("name"),
                arguments: block["input"].to_string(),
            }),
            "thinking" | "redacted_thinking" => reasoning.push(super::types::Reasoning {
                provider: NAME.to_string(),
                model: model.to_string(),
                item: block,
            }),
            _ => {}
        }
    }
    let u = response.usage;
    let cache_read = u.cache_read_input_tokens.unwrap_or(0);
    let cache_write = u.cache_creation_input_tokens.unwrap_or(0);
    ChatResponse {
        id: response.id,
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: Usage {
            // Anthropic's input_tokens excludes cache reads and writes.
            input_tokens: u.input_tokens + cache_read + cache_write,
            output_tokens: u.output_tokens,
            cached_input_tokens: cache_read,
            cache_write_tokens: cache_write,
            reasoning_tokens: 0,
        },
        stop_reason: response.stop_reason.unwrap_or_default(),
        model: response.model,
        reasoning,
        spent_for: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::types::ToolDef;

    #[test]
    fn merges_tool_results_and_user_text_into_one_user_turn() {
        let messages = vec![
            Message::user("go"),
            Message::Assistant {
                text: Some("checking".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "toolu_1".into(),
                        name: "a".into(),
                        arguments: "{\"x\":1}".into(),
                    },
                    ToolCall {
                        id: "toolu_2".into(),
                        name: "b".into(),
                        arguments: "not json".into(),
                    },
                ],
                reasoning: Vec::new(),
            },
            Message::Tool {
                call_id: "toolu_1".into(),
                name: "a".into(),
                content: "r1".into(),
                is_error: false,
            },
            Message::Tool {
                call_id: "toolu_2".into(),
                name: "b".into(),
                content: "bad".into(),
                is_error: true,
            },
            Message::user("status"),
        ];
        let body = encode_request(&ChatRequest {
            model: "claude-sonnet-4-5",
            system: "sys",
            messages: &messages,
            wire: &[],
            tools: &[],
            max_output_tokens: 1024,
            stream: None,
            caching: &super::super::types::Caching::NONE,
            reasoning: &super::super::types::ReasoningSpec::NONE,
        })
        .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        let msgs = v["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1]["content"][1]["input"], serde_json::json!({"x": 1}));
        assert_eq!(msgs[1]["content"][2]["input"], serde_json::json!({}));
        assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
        assert_eq!(msgs[2]["content"][1]["is_error"], true);
        assert_eq!(
            msgs[2]["content"][2],
            serde_json::json!({"type": "text", "text": "status", "cache_control": {"type": "ephemeral"}})
        );
        assert_eq!(v["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(v["max_tokens"], 1024);
    }

    /// Where the markers of one request are: `system`, `tool:<name>`, and
    /// `<message index>.<block index>`.
    fn markers(
        messages: &[Message],
        tools: &[ToolDef],
        caching: &super::super::types::Caching,
    ) -> Vec<String> {
        let body = encode_request(&ChatRequest {
            model: "claude-sonnet-4-5",
            system: "You help.",
            messages,
            wire: &[],
            tools,
            max_output_tokens: 64,
            stream: None,
            caching,
            reasoning: &super::super::types::ReasoningSpec::NONE,
        })
        .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        let mut found = Vec::new();
        if !v["system"][0]["cache_control"].is_null() {
            found.push("system".to_string());
        }
        for t in v["tools"].as_array().into_iter().flatten() {
            if !t["cache_control"].is_null() {
                found.push(format!("tool:{}", t["name"].as_str().unwrap()));
            }
        }
        for (i, m) in v["messages"].as_array().unwrap().iter().enumerate() {
            for (j, b) in m["content"].as_array().unwrap().iter().enumerate() {
                if !b["cache_control"].is_null() {
                    found.push(format!("{i}.{j}"));
                }
            }
        }
        assert!(found.len() <= MAX_MARKERS, "{found:?}");
        found
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str) -> Message {
        Message::Tool {
            call_id: id.into(),
            name: "read".into(),
            content: "out".into(),
            is_error: false,
        }
    }

    #[test]
    fn cache_markers_sit_on_the_last_tool_the_system_and_the_last_two_messages() {
        let tools = [
            ToolDef::new("read", "Reads.", serde_json::json!({"type": "object"})),
            ToolDef::new("write", "Writes.", serde_json::json!({"type": "object"})),
        ];
        let none = super::super::types::Caching::NONE;
        let assistant = |calls: Vec<ToolCall>| Message::assistant(None, calls);
        let image = Message::User {
            content: "What is in it?".into(),
            images: vec![super::super::types::Image {
                mime: "image/png".into(),
                data_base64: "iVBORw0KGgo=".into(),
            }],
        };
        /// Name, conversation, tools, where the markers go.
        type Case<'a> = (&'a str, Vec<Message>, &'a [ToolDef], Vec<&'a str>);
        let cases: Vec<Case> = vec![
            (
                "one message",
                vec![Message::user("hi")],
                &tools,
                vec!["system", "tool:write", "0.0"],
            ),
            (
                "one message, no tools",
                vec![Message::user("hi")],
                &[],
                vec!["system", "0.0"],
            ),
            (
                "tool-only turns",
                vec![
                    Message::user("hi"),
                    assistant(vec![call("a")]),
                    result("a"),
                    assistant(vec![call("b")]),
                    result("b"),
                ],
                &tools,
                vec!["system", "tool:write", "3.0", "4.0"],
            ),
            (
                "parallel calls",
                vec![
                    Message::user("hi"),
                    assistant(vec![call("a"), call("b"), call("c")]),
                    result("a"),
                    result("b"),
                    result("c"),
                ],
                &tools,
                vec!["system", "tool:write", "1.2", "2.2"],
            ),
            (
                // Tool results and the status line after them make one user message.
                "results then text",
                vec![
                    Message::user("hi"),
                    assistant(vec![call("a")]),
                    result("a"),
                    Message::user("[steward: 3 turns left]"),
                ],
                &tools,
                vec!["system", "tool:write", "1.0", "2.1"],
            ),
            (
                "an image",
                vec![image],
                &tools,
                vec!["system", "tool:write", "0.1"],
            ),
            (
                // An empty text block takes no marker: the one before it does.
                "empty text",
                vec![
                    Message::user("hi"),
                    assistant(vec![call("a")]),
                    result("a"),
                    Message::user(""),
                ],
                &[],
                vec!["system", "1.0", "2.0"],
            ),
        ];
        for (name, messages, tools, want) in cases {
            assert_eq!(markers(&messages, tools, &none), want, "{name}");
        }
    }

    #[test]
    fn a_long_ttl_is_asked_for_on_every_marker_and_the_default_adds_no_bytes() {
        let long = super::super::types::Caching {
            long_ttl: true,
            ..Default::default()
        };
        let messages = [Message::user("hi")];
        let req = |caching| ChatRequest {
            model: "m",
            system: "s",
            messages: &messages,
            wire: &[],
            tools: &[],
            max_output_tokens: 64,
            stream: None,
            caching,
            reasoning: &super::super::types::ReasoningSpec::NONE,
        };
        let body = String::from_utf8(encode_request(&req(&long)).unwrap()).unwrap();
        assert_eq!(
            body.matches(r#""cache_control":{"type":"ephemeral","ttl":"1h"}"#)
                .count(),
            2
        );
        let body = String::from_utf8(encode_request(&req(&Default::default())).unwrap()).unwrap();
        assert_eq!(body.matches(r#""cache_control":{"type":"ephemeral"}"#).count(), 2);
    }

    #[test]
    fn decodes_usage_with_cache() {
        let raw = serde_json::json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Let me look."},
                        {"type": "tool_use", "id": "toolu_1", "name": "current_time", "input": {}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 30, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100}
        });
        let r = decode_response(serde_json::from_value(raw).unwrap(), "claude-sonnet-4-5");
        assert_eq!(r.tool_calls[0].arguments, "{}");
        assert_eq!(r.usage.input_tokens, 115);
        assert_eq!(r.usage.cached_input_tokens, 100);
        assert_eq!(r.stop_reason, "tool_use");
    }
}
