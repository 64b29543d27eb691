//! The events of a run's log, one variant each. Content that may quote a person is a
//! [`Private`] field, so a private run's log holds only lengths: redaction follows the
//! type, not a list of key names. Readers (`runs show`, the inspector, evals) see the
//! serialized form: `kind` is the variant name in snake case, `data` its fields.

use serde::Serialize;
use serde_json::Value;

use crate::provider::ErrorKind;
use crate::store::{Store, StoreError};
use crate::types::{Private, RunStatus, Termination, Usage};

/// One entry of a run's event log.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        agent: String,
        source: String,
        kind: String,
        mock_tools: bool,
        parent_id: Option<String>,
        depth: u32,
        /// The trigger event as JSON (for `steward eval new --from-run`); only its
        /// length for a private run.
        trigger: Private,
    },
    /// A private run's input was held in memory only and the process restarted.
    InputLost {
        reason: &'static str,
    },
    AttachmentRefused {
        note: Private,
    },
    FileAdded {
        file: String,
        name: Private,
        mime: String,
        bytes: u64,
    },
    ModelRequest {
        turn: u32,
        model: String,
        messages: usize,
        tools: usize,
    },
    ModelResponse {
        turn: u32,
        model: String,
        response_model: String,
        stop_reason: String,
        text: Option<Private>,
        tool_calls: Vec<CallRecord>,
        usage: Usage,
        /// `None` when the model has no price: the cost is unknown, not zero.
        cost_usd: Option<f64>,
        /// What the prompt cache saved on this call (USD), when priced.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_saved_usd: Option<f64>,
        duration_ms: u64,
    },
    ModelError {
        provider: &'static str,
        /// The model of the chain that failed last.
        model: String,
        kind: ErrorKind,
        status: Option<u16>,
        error: Private,
        duration_ms: u64,
    },
    /// Written (and made durable) before the tool can act.
    ToolCall {
        call_id: String,
        name: String,
        arguments: Private,
        /// Whether re-running after a crash could repeat a side effect.
        side_effect: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_call_id: Option<String>,
    },
    ToolResult {
        call_id: String,
        name: String,
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        fatal: Option<bool>,
        bytes: usize,
        duration_ms: u64,
        /// The first bytes of the output.
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<Private>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Private>,
    },
    /// One request a skill script made through the egress proxy, under its call.
    NetRequest {
        parent_call_id: String,
        /// `CONNECT` for an HTTPS tunnel, else the HTTP method.
        method: String,
        host: String,
        port: u16,
        /// The path without its query (a private run's is not kept).
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<Private>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        bytes_sent: u64,
        bytes_received: u64,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
        /// The secrets the proxy put in the request, by name (never values).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        secrets: Vec<String>,
    },
    Compaction {
        n: u32,
        tokens_before: u64,
        tokens_after: u64,
        transcript_file: String,
        kept_messages: usize,
        dropped_outputs: usize,
        usage: Usage,
        /// `None` when the summarizing model has no price.
        cost_usd: Option<f64>,
        /// The model that wrote the summary.
        model: String,
    },
    /// About to post the answer (a side effect, so durable first).
    Reply {
        destination: Value,
        side_effect: bool,
        text: Private,
    },
    ReplySent {
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        ts: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Private>,
    },
    FinalAnswer {
        text: Private,
        kept: bool,
        chars: usize,
    },
    RunError {
        termination: Termination,
        error: Option<Private>,
    },
    ScriptLog {
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<Private>,
        #[serde(skip_serializing_if = "Option::is_none")]
        truncated: Option<bool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    RunFinished {
        status: RunStatus,
        termination: Termination,
    },
    /// The run parked until a person approves or denies `name`.
    ApprovalRequested {
        approval: String,
        call_id: String,
        name: String,
        /// Where the request was posted (`{channel, ts}`), when it was.
        #[serde(skip_serializing_if = "Option::is_none")]
        posted: Option<Value>,
        deadline: String,
    },
    /// A person's decision (or the timeout), read when the run resumes.
    ApprovalDecided {
        approval: String,
        /// `approved`, `denied` or `timed_out`.
        decision: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        by: Option<String>,
    },
    /// Messages of the conversation that arrived while the run waited or worked, read by
    /// the model before its next call instead of starting another run.
    MessagesHandedIn {
        turn: u32,
        count: usize,
        text: Private,
    },
    /// Found after a crash: the run had made a side effect, so it is not re-run.
    Interrupted {
        reason: &'static str,
    },
    /// Found after a crash before any side effect: the run is queued again.
    Retried {
        reason: &'static str,
        attempt: u32,
    },
    /// The process died during every attempt of this run.
    CrashLoop {
        attempts: u32,
    },
}

/// A tool call as the model asked for it.
#[derive(Debug, Clone, Serialize)]
pub struct CallRecord {
    pub id: String,
    pub name: String,
    pub arguments: Private,
}

impl RunEvent {
    /// The event's kind and data as stored.
    pub fn to_parts(&self) -> (String, Value) {
        let (kind, data) = self.to_stored();
        (kind, serde_json::from_str(&data).unwrap_or(Value::Null))
    }

    /// The event's kind and its data as JSON text, serialized once: building a
    /// `Value` first and writing it out later cost a run more than the rest of its
    /// event log. serde_json writes an adjacently tagged variant as
    /// `{"kind":"<kind>","data":<data>}` (or `{"kind":"<kind>"}` without data), so the
    /// parts are cut out of that text.
    pub fn to_stored(&self) -> (String, String) {
        let Ok(text) = serde_json::to_string(self) else {
            return (String::new(), "null".into());
        };
        let split = text
            .strip_prefix("{\"kind\":\"")
            .and_then(|rest| rest.split_once('"'))
            .and_then(|(kind, rest)| {
                let data = match rest {
                    "}" => "null",
                    _ => rest.strip_prefix(",\"data\":")?.strip_suffix('}')?,
                };
                Some((kind.to_string(), data.to_string()))
            });
        // Every variant serializes to a tagged object; nothing else can come back.
        split.unwrap_or_else(|| (String::new(), "null".into()))
    }
}

/// Appends `event` to a run's log at once, outside a running run (crash recovery).
pub async fn append_now(store: &dyn Store, run_id: &str, event: RunEvent) -> Result<(), StoreError> {
    let (kind, data) = event.to_stored();
    let event = crate::store::NewEvent {
        at: chrono::Utc::now(),
        kind,
        data,
    };
    store.append_events(run_id, std::slice::from_ref(&event)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Privacy;
    use serde_json::json;

    #[test]
    fn private_fields_are_redacted_by_type() {
        let p = Privacy::Private;
        let event = RunEvent::ModelResponse {
            turn: 1,
            model: "openai/gpt-4.1".into(),
            response_model: "gpt-4.1".into(),
            stop_reason: "tool_calls".into(),
            text: Some(p.wrap("secret")),
            tool_calls: vec![CallRecord {
                id: "c".into(),
                name: "t".into(),
                arguments: p.wrap("{\"q\":1}"),
            }],
            usage: Usage::default(),
            cost_usd: Some(0.0),
            cache_saved_usd: None,
            duration_ms: 3,
        };
        let (kind, data) = event.to_parts();
        assert_eq!(kind, "model_response");
        assert_eq!(data["text"], "[private: 6 chars]");
        assert_eq!(
            data["tool_calls"],
            json!([{"id": "c", "name": "t", "arguments": "[private: 7 chars]"}])
        );
        assert_eq!(data["model"], "openai/gpt-4.1");
    }

    #[test]
    fn stored_text_is_the_tagged_serialization_cut_in_two() {
        let events = [
            RunEvent::InputLost { reason: "restart" },
            RunEvent::ModelRequest {
                turn: 2,
                model: "openai/\"quoted\" {model}".into(),
                messages: 3,
                tools: 1,
            },
            RunEvent::AttachmentRefused {
                note: Privacy::Recorded.wrap("too large: \"a.pdf\" } ,\"data\":"),
            },
        ];
        for event in events {
            let whole = serde_json::to_value(&event).unwrap();
            let (kind, data) = event.to_stored();
            assert_eq!(kind, whole["kind"], "{event:?}");
            let data: Value = serde_json::from_str(&data).unwrap();
            assert_eq!(data, whole["data"], "{event:?}");
            assert_eq!(event.to_parts(), (kind, data));
        }
    }
}
