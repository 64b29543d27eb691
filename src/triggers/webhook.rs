//! Generic webhooks (`POST /hooks/{name}`): any body becomes a trigger event; JSON is
//! kept as the payload, anything else as text.

use serde_json::{Value, json};

use reqwest::header::HeaderMap;

use super::auth::{self, AuthError};
use super::source::{Inbound, InboundError, header};
use super::{Origin, TriggerEvent};
use crate::config::TriggerSpec;

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
        traceparent: None,
        action_token: None,
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

/// Authenticates a call to hook `name` against its bearer token (`expected`; `None` for
/// a hook that does not exist or has no token: the same refusal, so callers cannot tell
/// which hook names exist) and makes its event.
pub fn receive(
    name: &str,
    expected: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Inbound, InboundError> {
    let given = header(headers, "authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    match expected {
        Some(expected) if auth::token_eq(given.trim().as_bytes(), expected.as_bytes()) => {}
        _ => return Err(AuthError::Mismatch.into()),
    }
    Ok(Inbound::Event {
        event: Box::new(event(name, body)),
        dedupe_key: dedupe_key(name, header(headers, "idempotency-key")),
    })
}

/// Whether webhook `rule` matches `event`; `None` when `rule` is not a webhook rule.
pub fn matches(rule: &TriggerSpec, event: &TriggerEvent) -> Option<bool> {
    let TriggerSpec::Webhook(w) = rule else {
        return None;
    };
    Some(matches!(&event.origin, Origin::Webhook { name } if name == &w.name))
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
