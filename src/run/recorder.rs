//! Appends a run's events to the store as they happen, redacting message content for
//! private runs.

use std::sync::Arc;

use serde_json::Value;

use crate::store::{Store, StoreError};

/// Keys whose string values carry message or tool content.
const CONTENT_KEYS: &[&str] = &["text", "content", "arguments", "final_text", "prompt", "preview", "error"];

/// Writes the event log of one run.
#[derive(Clone)]
pub struct Recorder {
    store: Arc<dyn Store>,
    run_id: String,
    private: bool,
}

impl Recorder {
    pub fn new(store: Arc<dyn Store>, run_id: String, private: bool) -> Self {
        Recorder {
            store,
            run_id,
            private,
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Appends one event; content fields are replaced by their length when private.
    pub async fn event(&self, kind: &str, mut data: Value) -> Result<(), StoreError> {
        if self.private {
            redact(&mut data);
        }
        self.store.append_event(&self.run_id, kind, &data).await
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
        assert_eq!(v, json!({"name": "t", "text": "[private: 6 chars]", "calls": [{"arguments": "[private: 7 chars]", "id": "c"}]}));
    }
}
