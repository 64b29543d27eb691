//! Generic webhooks (`POST /hooks/{name}`): any body becomes a trigger event; JSON is
//! kept as the payload, anything else as text.

use serde_json::{Value, json};

use super::{Origin, TriggerEvent};

/// The trigger event of a call to hook `name` with `body`.
pub fn event(name: &str, body: &[u8]) -> TriggerEvent {
    let (payload, text) = match serde_json::from_slice::<Value>(body) {
        Ok(v) => (v, None),
        Err(_) => {
            let text = String::from_utf8_lossy(body).into_owned();
            (json!({"body": text}), Some(text))
        }
    };
    TriggerEvent {
        source: "webhook".into(),
        kind: name.to_string(),
        summary: format!("webhook {name} ({} bytes)", body.len()),
        text,
        payload,
        private: false,
        origin: Origin::Webhook {
            name: name.to_string(),
        },
        attachments: Vec::new(),
    }
}

/// The caller's `Idempotency-Key` makes retries of one delivery one event; without it
/// every call is new.
pub fn dedupe_key(name: &str, idempotency_key: Option<&str>) -> String {
    match idempotency_key {
        Some(k) => format!("hook:{name}:{k}"),
        None => format!("hook:{name}:{}", uuid::Uuid::now_v7()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_text_bodies() {
        let e = event("deploys", br#"{"service": "api"}"#);
        assert_eq!(e.payload["service"], "api");
        assert_eq!(e.text, None);
        let e = event("deploys", b"plain words");
        assert_eq!(e.text.as_deref(), Some("plain words"));
        assert_eq!(e.payload["body"], "plain words");
        assert_eq!(dedupe_key("deploys", Some("k1")), "hook:deploys:k1");
    }
}
