//! Records a run's events, redacting message content for private runs.
//!
//! Events are stamped when they happen and group-committed at [`Recorder::flush`], which
//! the coordinators call before every wait on the outside world (a model call, a tool
//! round) and before the run finishes. So the log is durable before any side effect
//! and costs one database round trip per flush instead of one per event.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::store::{NewEvent, Store, StoreError, now_text};

/// Keys whose string values carry message or tool content.
const CONTENT_KEYS: &[&str] = &[
    "text",
    "content",
    "arguments",
    "final_text",
    "prompt",
    "preview",
    "error",
    // Attachment notes name the file.
    "note",
];

/// Writes the event log of one run.
pub struct Recorder {
    store: Arc<dyn Store>,
    run_id: String,
    private: bool,
    pending: Mutex<Vec<NewEvent>>,
}

impl Recorder {
    pub fn new(store: Arc<dyn Store>, run_id: String, private: bool) -> Self {
        Recorder {
            store,
            run_id,
            private,
            pending: Mutex::new(Vec::new()),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Records one event, written at the next [`Recorder::flush`]; content fields are
    /// replaced by their length when the run is private.
    pub fn event(&self, kind: &str, mut data: Value) {
        if self.private {
            redact(&mut data);
        }
        let event = NewEvent {
            at: now_text(),
            kind: kind.to_string(),
            data,
        };
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }

    /// Writes every recorded event in one group commit.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if batch.is_empty() {
            return Ok(());
        }
        self.store.append_events(&self.run_id, &batch).await
    }

    /// Content as stored for this run: the text itself, or a placeholder when private.
    pub fn content(&self, text: &str) -> String {
        if self.private {
            format!("[private: {} chars]", text.chars().count())
        } else {
            text.to_string()
        }
    }
}

/// Replaces content strings anywhere in `value` with a length placeholder.
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match v {
                    Value::String(s) if CONTENT_KEYS.contains(&k.as_str()) => {
                        *v = Value::String(format!("[private: {} chars]", s.chars().count()));
                    }
                    other => redact(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_nested_content() {
        let mut v = json!({"name": "t", "text": "secret", "calls": [{"arguments": "{\"q\":1}", "id": "c"}]});
        redact(&mut v);
        assert_eq!(
            v,
            json!({"name": "t", "text": "[private: 6 chars]", "calls": [{"arguments": "[private: 7 chars]", "id": "c"}]})
        );
    }
}
