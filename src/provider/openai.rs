//! OpenAI: the Responses API for OpenAI's own host (see [`super::openai_responses`]),
//! Chat Completions for every other server speaking it (vLLM, Ollama, LiteLLM).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::endpoint::Endpoint;
use super::error::{ErrorKind, ProviderError};
use super::types::{ChatRequest, ChatResponse, Message, ToolCall, Usage, cached};
use super::{Provider, wire};
use serde_json::value::RawValue;

pub use super::openai_responses::NAME;

/// The request fields that steer OpenAI's prompt cache; servers that only speak the
/// older protocol (vLLM, Ollama, LiteLLM) may refuse them.
const CACHE_FIELDS: [&str; 2] = ["prompt_cache_key", "prompt_cache_retention"];

/// Which of OpenAI's APIs an endpoint is spoken to with (`OPENAI_API_STYLE`).
pub use crate::config::settings::ApiStyle;

/// An OpenAI client for one endpoint.
pub struct OpenAi {
    client: reqwest::Client,
    endpoint: Endpoint,
    timeout: Duration,
    style: ApiStyle,
    /// Send [`CACHE_FIELDS`] to this endpoint: on unless turned off by setting, or by
    /// the endpoint refusing one of them (a 400 naming it).
    cache_fields: AtomicBool,
}

impl OpenAi {
    pub fn new(client: reqwest::Client, endpoint: Endpoint, timeout: Duration) -> Self {
        OpenAi {
            style: ApiStyle::default_for(&endpoint.base_url),
            client,
            endpoint,
            timeout,
            cache_fields: AtomicBool::new(true),
        }
    }

    /// Speaks `style` to this endpoint instead of the default for its host.
    pub fn with_style(mut self, style: ApiStyle) -> Self {
        self.style = style;
        self
    }

    /// Sends the prompt-cache fields (`prompt_cache_key`, `prompt_cache_retention`)
    /// or not (`OPENAI_CACHE_FIELDS=off`, for compatible servers that refuse them).
    pub fn with_cache_fields(self, on: bool) -> Self {
        self.cache_fields.store(on, Ordering::Relaxed);
        self
    }

    async fn send(
        &self,
        request: &ChatRequest<'_>,
        cache_fields: bool,
    ) -> Result<ChatResponse, ProviderError> {
        if self.style == ApiStyle::Responses {
            return self.send_responses(request, cache_fields).await;
        }
        let body = encode_request_with(request, cache_fields)
            .map_err(|e| ProviderError::new(NAME, ErrorKind::BadRequest, e.to_string()))?;
        let url = format!(
            "{}/chat/completions",
            self.endpoint.base_url.trim_end_matches('/')
        );
        let mut http = self.client.post(url);
        if let Some(key) = &self.endpoint.api_key {
            http = http.bearer_auth(key);
        }
        // A model asked to think hard may send nothing for minutes.
        let timeout = request.reasoning.answer_timeout(self.timeout);
        let Some(deltas) = request.stream else {
            let (response, spent): (WireResponse, _) = wire::post_json(NAME, http, body, timeout).await?;
            return decode_response(response).map(|r| r.spent(spent));
        };
        let mut stream = Streamed::default();
        let spent = wire::post_sse(NAME, http, body, timeout, |data| stream.take(data, deltas)).await?;
        decode_response(stream.response()?).map(|r| r.spent(spent))
    }

    async fn send_responses(
        &self,
        request: &ChatRequest<'_>,
        cache_fields: bool,
    ) -> Result<ChatResponse, ProviderError> {
        use super::openai_responses as responses;
        let body = responses::encode_request(request, cache_fields)
            .map_err(|e| ProviderError::new(NAME, ErrorKind::BadRequest, e.to_string()))?;
        let url = format!("{}/responses", self.endpoint.base_url.trim_end_matches('/'));
        let mut http = self.client.post(url);
        if let Some(key) = &self.endpoint.api_key {
            http = http.bearer_auth(key);
        }
        // A model asked to think hard may send nothing for minutes.
        let timeout = request.reasoning.answer_timeout(self.timeout);
        let Some(deltas) = request.stream else {
            let (response, spent): (Value, _) = wire::post_json(NAME, http, body, timeout).await?;
            return responses::decode_response(response, request.model).map(|r| r.spent(spent));
        };
        let mut stream = responses::Streamed::default();
        let spent = wire::post_sse(NAME, http, body, timeout, |data| stream.take(data, deltas)).await?;
        stream.response(request.model).map(|r| r.spent(spent))
    }
}

#[async_trait]
impl Provider for OpenAi {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn chat(&self, request: &ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let fields = self.cache_fields.load(Ordering::Relaxed)
            && (request.caching.key.is_some() || request.caching.retention.is_some());
        match self.send(request, fields).await {
            // A server that does not know the fields: stop sending them there, and ask
            // again at once (nothing streamed: the request was refused whole).
            Err(e)
                if fields
                    && e.kind == ErrorKind::BadRequest
                    && CACHE_FIELDS.iter().any(|f| e.message.contains(f)) =>
            {
                self.cache_fields.store(false, Ordering::Relaxed);
                tracing::warn!(
                    base_url = %self.endpoint.base_url,
                    "the server refused OpenAI's prompt-cache fields; no longer sending them there (OPENAI_CACHE_FIELDS=off says so up front)"
                );
                self.send(request, false).await
            }
            other => other,
        }
    }

    /// `GET /v1/models`, where OpenAI lists each model's `shutdown_date` (`YYYY-MM-DD`
    /// or null). Asked only with a key (a keyless compatible server has no such list).
    async fn shutdown_dates(&self) -> Result<Option<super::ShutdownDates>, ProviderError> {
        let Some(key) = &self.endpoint.api_key else {
            return Ok(None);
        };
        let url = format!("{}/models", self.endpoint.base_url.trim_end_matches('/'));
        let http = self.client.get(url).bearer_auth(key);
        let list: ModelList = wire::get_json(NAME, http, self.timeout).await?;
        Ok(Some(
            list.data
                .into_iter()
                .map(|m| {
                    let date = m
                        .shutdown_date
                        .and_then(|d| chrono::NaiveDate::parse_from_str(&d, "%Y-%m-%d").ok());
                    (m.id, date)
                })
                .collect(),
        ))
    }
}

/// `GET /v1/models`: the fields read from each model.
#[derive(Deserialize)]
struct ModelList {
    data: Vec<ListedModel>,
}

#[derive(Deserialize)]
struct ListedModel {
    id: String,
    #[serde(default)]
    shutdown_date: Option<String>,
}

/// A streamed Chat Completions answer put back together: `choices[0].delta` pieces of
/// content and tool calls (by index), the finish reason, and the usage of the last
/// chunk (`stream_options.include_usage`).
#[derive(Default)]
struct Streamed {
    id: String,
    model: String,
    content: String,
    /// (id, name, arguments) by the index the deltas name.
    calls: Vec<(String, String, String)>,
    finish: Option<String>,
    usage: Option<Value>,
}

/// Most tool calls one streamed answer may hold.
const MAX_STREAMED_CALLS: usize = 1024;

impl Streamed {
    fn take(&mut self, data: &str, deltas: &dyn super::Deltas) -> Result<(), ProviderError> {
        let chunk = super::wire::stream_event(NAME, data)?;
        if !chunk["error"].is_null() {
            return Err(wire::stream_error(NAME, data));
        }
        if let Some(id) = chunk["id"].as_str() {
            self.id = id.to_string();
        }
        if let Some(model) = chunk["model"].as_str() {
            self.model = model.to_string();
        }
        if !chunk["usage"].is_null() {
            self.usage = Some(chunk["usage"].clone());
        }
        let Some(choice) = chunk["choices"].get(0) else {
            return Ok(());
        };
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            self.content.push_str(text);
            deltas.text(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().unwrap_or(0) as usize;
            // A server's index sizes the list: one past any real round is an error, not
            // a billion empty slots.
            if index >= MAX_STREAMED_CALLS {
                return Err(ProviderError::new(
                    NAME,
                    ErrorKind::Decode,
                    format!("a streamed tool call's index {index} is past {MAX_STREAMED_CALLS}"),
                ));
            }
            if self.calls.len() <= index {
                self.calls.resize(index + 1, Default::default());
            }
            let slot = &mut self.calls[index];
            if let Some(id) = call["id"].as_str() {
                slot.0 = id.to_string();
            }
            if let Some(name) = call["function"]["name"].as_str() {
                slot.1.push_str(name);
            }
            if let Some(args) = call["function"]["arguments"].as_str() {
                slot.2.push_str(args);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish = Some(reason.to_string());
        }
        Ok(())
    }

    /// The answer as the non-streamed API would have sent it.
    fn response(self) -> Result<WireResponse, ProviderError> {
        let calls: Vec<Value> = self
            .calls
            .into_iter()
            .map(|(id, name, arguments)| {
                serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
            })
            .collect();
        let content = (!self.content.is_empty()).then_some(self.content);
        let whole = serde_json::json!({
            "id": self.id, "model": self.model, "usage": self.usage,
            "choices": [{"finish_reason": self.finish, "message": {"content": content, "tool_calls": calls}}],
        });
        serde_json::from_value(whole).map_err(|e| {
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
    messages: Vec<WireItem<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    /// With `stream`: a last chunk carries the usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A message as sent: built now, or copied from the conversation's [`WireCache`].
#[derive(Serialize)]
#[serde(untagged)]
enum WireItem<'a> {
    Fresh(WireMessage<'a>),
    Cached(&'a serde_json::value::RawValue),
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize, Deserialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize, Deserialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::value::RawValue,
}

/// One conversation message in the Chat Completions shape.
fn wire_message(m: &Message) -> WireMessage<'_> {
    match m {
        Message::User { content, images } if images.is_empty() => WireMessage::User {
            content: UserContent::Text(content),
        },
        Message::User { content, images } => {
            let mut parts = vec![Part::Text { text: content }];
            parts.extend(images.iter().map(|i| Part::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{};base64,{}", i.mime, i.data_base64),
                },
            }));
            WireMessage::User {
                content: UserContent::Parts(parts),
            }
        }
        // Chat Completions has no way to carry reasoning back.
        Message::Assistant { text, tool_calls, .. } => WireMessage::Assistant {
            content: text.as_deref(),
            tool_calls: tool_calls
                .iter()
                .map(|c| WireToolCall {
                    id: &c.id,
                    kind: "function",
                    function: WireFunctionCall {
                        name: &c.name,
                        arguments: &c.arguments,
                    },
                })
                .collect(),
        },
        Message::Tool { call_id, content, .. } => WireMessage::Tool {
            tool_call_id: call_id,
            content,
        },
    }
}

/// Serializes a request body exactly as sent, with its prompt-cache fields; public so
/// benchmarks count its cost.
pub fn encode_request(request: &ChatRequest<'_>) -> Result<Vec<u8>, serde_json::Error> {
    encode_request_with(request, true)
}

/// [`encode_request`], leaving out the prompt-cache fields unless `cache_fields`.
fn encode_request_with(request: &ChatRequest<'_>, cache_fields: bool) -> Result<Vec<u8>, serde_json::Error> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    messages.push(WireItem::Fresh(WireMessage::System {
        content: request.system,
    }));
    for (i, m) in request.messages.iter().enumerate() {
        let Some(cache) = request.wire.get(i) else {
            messages.push(WireItem::Fresh(wire_message(m)));
            continue;
        };
        if cache.openai.get().is_none() {
            let raw = serde_json::value::to_raw_value(&wire_message(m))?;
            let _ = cache.openai.set(raw);
        }
        messages.push(match cache.openai.get() {
            Some(raw) => WireItem::Cached(raw),
            None => WireItem::Fresh(wire_message(m)),
        });
    }
    let tools = request
        .tools
        .iter()
        .map(|t| {
            cached(&t.wire.openai, || {
                serde_json::value::to_raw_value(&WireTool {
                    kind: "function",
                    function: WireFunction {
                        name: &t.name,
                        description: &t.description,
                        parameters: t.parameters_json()?,
                    },
                })
            })
        })
        .collect::<Result<Vec<&RawValue>, serde_json::Error>>()?;
    // Output caps are left to the server: `max_tokens` is rejected by reasoning models
    // and `max_completion_tokens` by some compatible servers.
    // Sized up front: the body of a long run is hundreds of KB, and growing it by
    // doubling copied it about twice more per turn.
    let cached: usize = messages
        .iter()
        .map(|m| match m {
            WireItem::Cached(raw) => raw.get().len() + 1,
            WireItem::Fresh(_) => 256,
        })
        .sum();
    // A power of two, so consecutive turns ask the allocator for the same size: a body
    // that grows a little every turn would otherwise get fresh zeroed pages each time.
    let mut out = Vec::with_capacity((cached + request.system.len() + 4096).next_power_of_two());
    let body = WireRequest {
        model: request.model,
        messages,
        parallel_tool_calls: (!tools.is_empty()).then_some(true),
        tools,
        stream: request.stream.is_some(),
        stream_options: request.stream.map(|_| serde_json::json!({"include_usage": true})),
        prompt_cache_key: request.caching.key.as_deref().filter(|_| cache_fields),
        prompt_cache_retention: request.caching.retention.as_deref().filter(|_| cache_fields),
        reasoning_effort: request.reasoning.effort.as_deref(),
    };
    serde_json::to_writer(&mut out, &body)?;
    Ok(out)
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireResponseMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireResponseMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<OwnedToolCall>,
}

#[derive(Deserialize)]
struct OwnedToolCall {
    id: String,
    function: OwnedFunctionCall,
}

#[derive(Deserialize)]
struct OwnedFunctionCall {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

fn decode_response(response: WireResponse) -> Result<ChatResponse, ProviderError> {
    let Some(choice) = response.choices.into_iter().next() else {
        return Err(ProviderError::new(
            NAME,
            ErrorKind::Decode,
            "response has no choices",
        ));
    };
    let usage = response.usage.unwrap_or_default();
    Ok(ChatResponse {
        id: response.id,
        text: choice.message.content.filter(|t| !t.is_empty()),
        tool_calls: choice
            .message
            .tool_calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: c.function.arguments,
            })
            .collect(),
        usage: Usage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cached_input_tokens: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            cache_write_tokens: 0,
            reasoning_tokens: usage.completion_tokens_details.map_or(0, |d| d.reasoning_tokens),
        },
        stop_reason: choice.finish_reason.unwrap_or_default(),
        model: response.model,
        reasoning: Vec::new(),
        spent_for: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Quiet;
    impl crate::provider::Deltas for Quiet {
        fn text(&self, _: &str) {}
        fn restart(&self) {}
        fn settled(&self) {}
    }

    #[test]
    fn a_streamed_call_index_past_any_round_is_an_error() {
        let mut s = Streamed::default();
        let chunk = |i: u64| {
            format!(
                r#"{{"id":"c","model":"m","choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{i},"id":"call_1","function":{{"name":"f","arguments":"{{}}"}}}}]}}}}]}}"#
            )
        };
        assert!(s.take(&chunk(1), &Quiet).is_ok());
        let err = s.take(&chunk(4_000_000_000), &Quiet).unwrap_err();
        assert!(err.to_string().contains("index 4000000000"), "{err}");
        assert_eq!(s.calls.len(), 2);
    }
    use crate::provider::types::ToolDef;

    #[test]
    fn cached_encodings_give_the_same_bytes_and_are_reused() {
        let messages = vec![
            Message::user("héllo \"quoted\" \u{1F600}"),
            Message::assistant(
                Some("calling".into()),
                vec![ToolCall {
                    id: "c1".into(),
                    name: "http_fetch".into(),
                    arguments: "{\"url\": \"https://example.com\"}".into(),
                }],
            ),
            Message::Tool {
                call_id: "c1".into(),
                name: "http_fetch".into(),
                content: "line 1\nline 2".into(),
                is_error: false,
            },
        ];
        let request = |wire| ChatRequest {
            model: "gpt-4.1",
            system: "sys",
            messages: &messages,
            wire,
            tools: &[],
            max_output_tokens: 100,
            stream: None,
            caching: &crate::provider::types::Caching::NONE,
            reasoning: &crate::provider::ReasoningSpec::NONE,
        };
        let plain = encode_request(&request(&[])).unwrap();
        let wire: Vec<crate::provider::WireCache> = messages.iter().map(|_| Default::default()).collect();
        let first = encode_request(&request(&wire)).unwrap();
        assert_eq!(first, plain);
        assert!(
            wire.iter().all(|w| w.openai.get().is_some()),
            "every message was cached"
        );
        // A second encode copies the cached bytes: poison one to prove it is read.
        let poisoned: Vec<crate::provider::WireCache> = messages.iter().map(|_| Default::default()).collect();
        let _ = poisoned[2].openai.set(
            serde_json::value::to_raw_value(
                &serde_json::json!({"role": "tool", "tool_call_id": "c1", "content": "cached"}),
            )
            .unwrap(),
        );
        let again: Value = serde_json::from_slice(&encode_request(&request(&poisoned)).unwrap()).unwrap();
        assert_eq!(again["messages"][3]["content"], "cached");
    }

    #[test]
    fn encodes_a_tool_round_trip() {
        let messages = vec![
            Message::user("hi"),
            Message::assistant(
                None,
                vec![ToolCall {
                    id: "call_1".into(),
                    name: "current_time".into(),
                    arguments: "{}".into(),
                }],
            ),
            Message::Tool {
                call_id: "call_1".into(),
                name: "current_time".into(),
                content: "noon".into(),
                is_error: false,
            },
        ];
        let tools = vec![ToolDef::new(
            "current_time",
            "time",
            serde_json::json!({"type": "object", "properties": {}}),
        )];
        let body = encode_request(&ChatRequest {
            model: "gpt-4.1",
            system: "sys",
            messages: &messages,
            wire: &[],
            tools: &tools,
            max_output_tokens: 100,
            stream: None,
            caching: &crate::provider::types::Caching::NONE,
            reasoning: &crate::provider::ReasoningSpec::NONE,
        })
        .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v["messages"][0],
            serde_json::json!({"role": "system", "content": "sys"})
        );
        assert_eq!(
            v["messages"][2]["tool_calls"][0]["function"]["name"],
            "current_time"
        );
        assert_eq!(v["messages"][2]["content"], Value::Null);
        assert_eq!(
            v["messages"][3],
            serde_json::json!({"role": "tool", "tool_call_id": "call_1", "content": "noon"})
        );
        assert_eq!(v["tools"][0]["type"], "function");
        assert_eq!(v["parallel_tool_calls"], true);
    }

    #[test]
    fn responses_only_for_openais_own_host_by_default() {
        assert_eq!(
            ApiStyle::default_for("https://api.openai.com/v1"),
            ApiStyle::Responses
        );
        assert_eq!(
            ApiStyle::default_for("https://API.OpenAI.com:443/v1"),
            ApiStyle::Responses
        );
        assert_eq!(
            ApiStyle::default_for("http://127.0.0.1:11434/v1"),
            ApiStyle::ChatCompletions
        );
        assert_eq!(
            ApiStyle::default_for("https://api.openai.com.example.net/v1"),
            ApiStyle::ChatCompletions
        );
        assert_eq!(ApiStyle::parse("responses"), Some(ApiStyle::Responses));
        assert_eq!(ApiStyle::parse("chat"), None);
    }

    #[test]
    fn decodes_usage_details() {
        let raw = serde_json::json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4.1-2025-04-14",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                      "prompt_tokens_details": {"cached_tokens": 64},
                      "completion_tokens_details": {"reasoning_tokens": 5}}
        });
        let r = decode_response(serde_json::from_value(raw).unwrap()).unwrap();
        assert_eq!(r.text.as_deref(), Some("done"));
        assert_eq!(r.usage.cached_input_tokens, 64);
        assert_eq!(r.usage.reasoning_tokens, 5);
        assert_eq!(r.stop_reason, "stop");
    }
}
