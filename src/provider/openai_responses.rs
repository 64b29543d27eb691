//! OpenAI's Responses API (`POST /v1/responses`), the one that carries a reasoning
//! model's reasoning across the turns of a tool loop.
//!
//! Every request is stateless (`store: false`): OpenAI keeps nothing, and asks back for
//! the reasoning items as `encrypted_content` (`include`). Those items return in the
//! next request's input, in place before the calls they led to, exactly as received.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::{ErrorKind, ProviderError, classify};
use super::types::{ChatRequest, ChatResponse, Message, Reasoning, ToolCall, Usage, cached};

/// The provider these requests belong to, in errors and reasoning items (`openai`;
/// `openai::NAME` is this one, so the two files do not import each other).
pub const NAME: &str = "openai";

/// Asks for reasoning items back, encrypted, since nothing is stored.
const INCLUDE: [&str; 1] = ["reasoning.encrypted_content"];

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    instructions: &'a str,
    input: Vec<&'a RawValue>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    /// `context.max_output_tokens`: reasoning and visible output together, as
    /// Anthropic's `max_tokens` counts adaptive thinking.
    max_output_tokens: u32,
    store: bool,
    include: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<WireReasoning<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_retention: Option<&'a str>,
}

#[derive(Serialize)]
struct WireReasoning<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a RawValue,
    /// steward's tool schemas are not written for strict mode (optional fields are
    /// left out rather than made nullable), so the model's arguments are validated
    /// by the tools themselves, as on Chat Completions.
    strict: bool,
}

/// Input items in the Responses shape.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Message {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: &'a str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText { text: &'a str },
    InputImage { image_url: String },
    OutputText { text: &'a str },
}

/// A message as Responses input items. Reasoning goes first, where the model wrote it,
/// and only when it was written by the model now asked.
fn items(m: &Message, model: &str) -> Result<Vec<Box<RawValue>>, serde_json::Error> {
    fn raw<T: Serialize>(value: &T) -> Result<Box<RawValue>, serde_json::Error> {
        serde_json::value::to_raw_value(value)
    }
    match m {
        Message::User { content, images } => {
            let mut parts = vec![Part::InputText { text: content }];
            parts.extend(images.iter().map(|i| Part::InputImage {
                image_url: format!("data:{};base64,{}", i.mime, i.data_base64),
            }));
            Ok(vec![raw(&Item::Message {
                role: "user",
                content: parts,
            })?])
        }
        Message::Assistant {
            text,
            tool_calls,
            reasoning,
        } => {
            let mut out = Vec::with_capacity(reasoning.len() + tool_calls.len() + 1);
            for r in reasoning.iter().filter(|r| r.belongs_to(NAME, model)) {
                out.push(raw(&r.item)?);
            }
            if let Some(text) = text.as_deref().filter(|t| !t.is_empty()) {
                out.push(raw(&Item::Message {
                    role: "assistant",
                    content: vec![Part::OutputText { text }],
                })?);
            }
            for c in tool_calls {
                out.push(raw(&Item::FunctionCall {
                    call_id: &c.id,
                    name: &c.name,
                    arguments: &c.arguments,
                })?);
            }
            Ok(out)
        }
        Message::Tool { call_id, content, .. } => Ok(vec![raw(&Item::FunctionCallOutput {
            call_id,
            output: content,
        })?]),
    }
}

/// Serializes a request body exactly as sent, with its prompt-cache fields unless
/// `cache_fields` is off; public so benchmarks count its cost.
pub fn encode_request(request: &ChatRequest<'_>, cache_fields: bool) -> Result<Vec<u8>, serde_json::Error> {
    // A message's items depend on the model (only its own reasoning goes in), so a
    // cache filled for one model serves only that model; a fallback encodes afresh.
    let mut own: Vec<Option<Vec<Box<RawValue>>>> = Vec::with_capacity(request.messages.len());
    for (i, m) in request.messages.iter().enumerate() {
        let slot = request.wire.get(i).map(|c| &c.responses);
        if let Some(slot) = slot
            && slot.get().is_none()
        {
            let _ = slot.set((request.model.into(), items(m, request.model)?));
        }
        let hit = slot
            .and_then(|s| s.get())
            .is_some_and(|(model, _)| **model == *request.model);
        own.push(if hit { None } else { Some(items(m, request.model)?) });
    }
    let mut input: Vec<&RawValue> = Vec::with_capacity(request.messages.len() * 2);
    for (i, own) in own.iter().enumerate() {
        let list = own.as_ref().or_else(|| {
            request
                .wire
                .get(i)
                .and_then(|c| c.responses.get())
                .map(|(_, list)| list)
        });
        input.extend(list.into_iter().flatten().map(|b| b.as_ref()));
    }
    let tools = request
        .tools
        .iter()
        .map(|t| {
            cached(&t.wire.responses, || {
                serde_json::value::to_raw_value(&WireTool {
                    kind: "function",
                    name: &t.name,
                    description: &t.description,
                    parameters: t.parameters_json()?,
                    strict: false,
                })
            })
        })
        .collect::<Result<Vec<&RawValue>, serde_json::Error>>()?;
    let spec = request.reasoning;
    let reasoning = (spec.effort.is_some() || spec.summary.is_some()).then_some(WireReasoning {
        effort: spec.effort.as_deref(),
        summary: spec.summary.as_deref(),
    });
    let size: usize = input.iter().map(|i| i.get().len() + 1).sum();
    let mut out = Vec::with_capacity((size + request.system.len() + 4096).next_power_of_two());
    let body = WireRequest {
        model: request.model,
        instructions: request.system,
        input,
        parallel_tool_calls: (!tools.is_empty()).then_some(true),
        tools,
        max_output_tokens: request.max_output_tokens,
        store: false,
        include: INCLUDE,
        reasoning,
        stream: request.stream.is_some(),
        prompt_cache_key: request.caching.key.as_deref().filter(|_| cache_fields),
        prompt_cache_retention: request.caching.retention.as_deref().filter(|_| cache_fields),
    };
    serde_json::to_writer(&mut out, &body)?;
    Ok(out)
}

/// A Responses answer (`object: "response"`) as the provider-neutral response; `model`
/// is the model asked, which later turns' reasoning items are kept for.
pub fn decode_response(mut response: Value, model: &str) -> Result<ChatResponse, ProviderError> {
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        return Err(failed(error));
    }
    // Taken, not borrowed: reasoning items (kilobytes of encrypted content) move into
    // the answer whole.
    let Value::Array(output) = response["output"].take() else {
        return Err(ProviderError::new(
            NAME,
            ErrorKind::Decode,
            "response has no output",
        ));
    };
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut reasoning = Vec::new();
    for item in output {
        match item["type"].as_str().unwrap_or_default() {
            "message" => {
                for part in item["content"].as_array().into_iter().flatten() {
                    match part["type"].as_str() {
                        Some("output_text") => text.push_str(part["text"].as_str().unwrap_or_default()),
                        Some("refusal") => text.push_str(part["refusal"].as_str().unwrap_or_default()),
                        _ => {}
                    }
                }
            }
            "function_call" => tool_calls.push(ToolCall {
                id: item["call_id"].as_str().unwrap_or_default().to_string(),
                name: item["name"].as_str().unwrap_or_default().to_string(),
                arguments: item["arguments"].as_str().unwrap_or_default().to_string(),
            }),
            "reasoning" => reasoning.push(Reasoning {
                provider: NAME.to_string(),
                model: model.to_string(),
                item,
            }),
            _ => {}
        }
    }
    let u = &response["usage"];
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let stop_reason = if !tool_calls.is_empty() {
        "tool_calls".to_string()
    } else if response["status"] == "incomplete" {
        // `max_output_tokens` or `content_filter`.
        response["incomplete_details"]["reason"]
            .as_str()
            .unwrap_or("incomplete")
            .to_string()
    } else {
        "stop".to_string()
    };
    Ok(ChatResponse {
        id: response["id"].as_str().unwrap_or_default().to_string(),
        text: (!text.is_empty()).then_some(text),
        tool_calls,
        usage: Usage {
            input_tokens: n(&u["input_tokens"]),
            output_tokens: n(&u["output_tokens"]),
            cached_input_tokens: n(&u["input_tokens_details"]["cached_tokens"]),
            cache_write_tokens: n(&u["input_tokens_details"]["cache_write_tokens"]),
            reasoning_tokens: n(&u["output_tokens_details"]["reasoning_tokens"]),
        },
        stop_reason,
        model: response["model"].as_str().unwrap_or_default().to_string(),
        reasoning,
        spent_for: None,
    })
}

/// A failed response's `error` (`{"code", "message"}`) as a classified error.
fn failed(error: &Value) -> ProviderError {
    let code = error["code"].as_str().unwrap_or_default();
    let message = error["message"].as_str().unwrap_or_default();
    // Classified as the HTTP status the same error gets before a stream starts.
    let status = match code {
        "rate_limit_exceeded" => 429,
        "server_error" | "internal_error" => 500,
        "server_is_overloaded" | "slow_down" => 503,
        _ => 400,
    };
    ProviderError::new(
        NAME,
        classify(status, code, message),
        format!("response failed: {code}: {message}"),
    )
}

/// A streamed answer put back together: text deltas go on as they come; whole output
/// items arrive with `response.output_item.done` (reasoning items with their
/// encrypted content); `response.completed` (or `.incomplete`) brings status and
/// usage; `response.failed` and `error` events fail the call.
#[derive(Default)]
pub struct Streamed {
    /// Output items by `output_index`, as each finished.
    items: Vec<Value>,
    /// The final response object.
    response: Option<Value>,
}

impl Streamed {
    /// Takes one event's data.
    pub fn take(&mut self, data: &str, deltas: &dyn super::Deltas) -> Result<(), ProviderError> {
        let event = super::wire::stream_event(NAME, data)?;
        match event["type"].as_str().unwrap_or_default() {
            "response.output_text.delta" => {
                if let Some(text) = event["delta"].as_str().filter(|t| !t.is_empty()) {
                    deltas.text(text);
                }
            }
            "response.output_item.done" => {
                let index = event["output_index"].as_u64().unwrap_or(self.items.len() as u64) as usize;
                if self.items.len() <= index {
                    self.items.resize(index + 1, Value::Null);
                }
                self.items[index] = event["item"].clone();
            }
            "response.completed" | "response.incomplete" => self.response = Some(event["response"].clone()),
            "response.failed" => return Err(failed(&event["response"]["error"])),
            "error" => return Err(failed(&event)),
            _ => {}
        }
        Ok(())
    }

    /// The answer as the non-streamed API would have sent it.
    pub fn response(self, model: &str) -> Result<ChatResponse, ProviderError> {
        let Some(mut response) = self.response else {
            return Err(ProviderError::new(
                NAME,
                ErrorKind::Decode,
                "the stream ended without response.completed",
            ));
        };
        // The final event may list the output again; items seen whole are the same.
        let listed = response["output"].as_array().is_some_and(|o| !o.is_empty());
        if !listed || self.items.iter().any(|i| i["type"] == "reasoning") {
            let items: Vec<Value> = self.items.into_iter().filter(|i| !i.is_null()).collect();
            if !items.is_empty() {
                response["output"] = Value::Array(items);
            }
        }
        decode_response(response, model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::types::{Caching, ReasoningSpec, ToolDef};
    use serde_json::json;

    fn request<'a>(
        messages: &'a [Message],
        wire: &'a [crate::provider::WireCache],
        tools: &'a [ToolDef],
        reasoning: &'a ReasoningSpec,
    ) -> ChatRequest<'a> {
        ChatRequest {
            model: "gpt-5.6",
            system: "sys",
            messages,
            wire,
            tools,
            max_output_tokens: 100,
            stream: None,
            caching: &Caching::NONE,
            reasoning,
        }
    }

    #[test]
    fn reasoning_goes_back_in_place_and_only_to_its_model() {
        let item = json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"});
        let messages = vec![
            Message::user("hi"),
            Message::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "current_time".into(),
                    arguments: "{}".into(),
                }],
                reasoning: vec![
                    Reasoning {
                        provider: NAME.into(),
                        model: "gpt-5.6".into(),
                        item: item.clone(),
                    },
                    Reasoning {
                        provider: NAME.into(),
                        model: "gpt-5.6-mini".into(),
                        item: json!({"type": "reasoning", "id": "rs_other"}),
                    },
                ],
            },
            Message::Tool {
                call_id: "call_1".into(),
                name: "current_time".into(),
                content: "noon".into(),
                is_error: false,
            },
        ];
        let tools = vec![ToolDef::new("current_time", "time", json!({"type": "object"}))];
        let effort = ReasoningSpec {
            effort: Some("high".into()),
            ..ReasoningSpec::NONE
        };
        let plain = encode_request(&request(&messages, &[], &tools, &effort), true).unwrap();
        let wire: Vec<crate::provider::WireCache> = messages.iter().map(|_| Default::default()).collect();
        let cached = encode_request(&request(&messages, &wire, &tools, &effort), true).unwrap();
        assert_eq!(plain, cached, "cached encodings give the same bytes");
        // A fallback model reusing the conversation's cache gets none of the reasoning.
        let mut fallback = request(&messages, &wire, &tools, &effort);
        fallback.model = "gpt-5.6-mini";
        let other: Value = serde_json::from_slice(&encode_request(&fallback, true).unwrap()).unwrap();
        assert!(!other["input"].to_string().contains("rs_1"), "{other}");
        assert!(other["input"].to_string().contains("rs_other"), "{other}");
        let v: Value = serde_json::from_slice(&plain).unwrap();
        assert_eq!(v["store"], false);
        assert_eq!(v["max_output_tokens"], 100);
        assert_eq!(v["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(v["instructions"], "sys");
        assert_eq!(v["reasoning"], json!({"effort": "high"}));
        assert_eq!(
            v["input"],
            json!([
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                item,
                {"type": "function_call", "call_id": "call_1", "name": "current_time", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "noon"},
            ])
        );
        assert_eq!(
            v["tools"][0],
            json!({"type": "function", "name": "current_time", "description": "time",
                   "parameters": {"type": "object"}, "strict": false})
        );
    }

    #[test]
    fn decodes_output_items_and_usage() {
        let raw = json!({
            "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5.6-2026-09-01",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "t", "arguments": "{\"a\":1}", "status": "completed"},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "checking", "annotations": []}]}
            ],
            "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 30},
                      "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 40}, "total_tokens": 150}
        });
        let r = decode_response(raw, "gpt-5.6").unwrap();
        assert_eq!(r.text.as_deref(), Some("checking"));
        assert_eq!(r.tool_calls[0].id, "call_1");
        assert_eq!(r.stop_reason, "tool_calls");
        assert_eq!(r.reasoning.len(), 1);
        assert_eq!(r.reasoning[0].model, "gpt-5.6");
        assert_eq!(r.reasoning[0].item["encrypted_content"], "gAAAA");
        assert_eq!(
            (
                r.usage.cached_input_tokens,
                r.usage.cache_write_tokens,
                r.usage.reasoning_tokens
            ),
            (60, 30, 40)
        );
        let incomplete = json!({"id": "resp_2", "status": "incomplete", "output": [],
                                "incomplete_details": {"reason": "max_output_tokens"}});
        assert_eq!(
            decode_response(incomplete, "m").unwrap().stop_reason,
            "max_output_tokens"
        );
        let failed = json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow"});
        assert_eq!(super::failed(&failed).kind, ErrorKind::RateLimit);
    }
}
