//! Message content on `chat` spans, in the GenAI conventions' JSON shapes
//! (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`).
//! Recorded only when the run allows it: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`
//! and never for a private run (the caller decides; see [`super::ModelChain::capturing`]).

use serde_json::{Value, json};

use super::types::{ChatResponse, Message, ToolCall};

/// Longest text recorded per part; span attributes are not the place for whole files.
const MAX_PART_CHARS: usize = 8 * 1024;

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_PART_CHARS) {
        Some((at, _)) => format!("{}… [{} more chars]", &text[..at], text[at..].chars().count()),
        None => text.to_string(),
    }
}

fn call_part(c: &ToolCall) -> Value {
    json!({"type": "tool_call", "id": c.id, "name": c.name, "arguments": cut(&c.arguments)})
}

/// `gen_ai.input.messages`.
pub fn input_messages(messages: &[Message]) -> String {
    let out: Vec<Value> = messages
        .iter()
        .map(|m| match m {
            Message::User { content, images } => {
                let mut parts = vec![json!({"type": "text", "content": cut(content)})];
                parts.extend(
                    images
                        .iter()
                        .map(|i| json!({"type": "blob", "mime_type": i.mime})),
                );
                json!({"role": "user", "parts": parts})
            }
            Message::Assistant { text, tool_calls, .. } => {
                let mut parts: Vec<Value> = text
                    .iter()
                    .map(|t| json!({"type": "text", "content": cut(t)}))
                    .collect();
                parts.extend(tool_calls.iter().map(call_part));
                json!({"role": "assistant", "parts": parts})
            }
            Message::Tool { call_id, content, .. } => json!({"role": "tool", "parts": [
                {"type": "tool_call_response", "id": call_id, "response": cut(content)}
            ]}),
        })
        .collect();
    Value::Array(out).to_string()
}

/// `gen_ai.output.messages`.
pub fn output_messages(response: &ChatResponse) -> String {
    let mut parts: Vec<Value> = response
        .text
        .iter()
        .map(|t| json!({"type": "text", "content": cut(t)}))
        .collect();
    parts.extend(response.tool_calls.iter().map(call_part));
    json!([{"role": "assistant", "parts": parts, "finish_reason": response.stop_reason}]).to_string()
}

/// `gen_ai.system_instructions`.
pub fn system_instructions(system: &str) -> String {
    json!([{"type": "text", "content": cut(system)}]).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_in_the_conventions_shape() {
        let input = input_messages(&[
            Message::user("hi"),
            Message::Tool {
                call_id: "c1".into(),
                name: "t".into(),
                content: "x".repeat(MAX_PART_CHARS + 5),
                is_error: false,
            },
        ]);
        let v: Value = serde_json::from_str(&input).unwrap();
        assert_eq!(
            v[0],
            json!({"role": "user", "parts": [{"type": "text", "content": "hi"}]})
        );
        assert_eq!(v[1]["parts"][0]["type"], "tool_call_response");
        assert!(
            v[1]["parts"][0]["response"]
                .as_str()
                .unwrap()
                .ends_with("[5 more chars]")
        );
    }
}
