//! Notion webhooks: the one-time `verification_token` handshake, then thin signed events
//! (`page.created`, `page.properties_updated`, `page.content_updated`, `comment.created`)
//! carrying ids; agents fetch what they need.

use serde_json::{Value, json};

use reqwest::header::HeaderMap;

use crate::triggers::auth::{self, AuthError};
use crate::triggers::event::PayloadError;
use crate::triggers::source::{Inbound, InboundError, header, json_body};
use crate::triggers::{Origin, TriggerEvent};

/// What a Notion webhook body is.
#[derive(Debug)]
pub enum NotionPayload {
    /// The subscription handshake: store this token, it signs every later event.
    Verification(String),
    Event {
        event: Box<TriggerEvent>,
        dedupe_key: String,
    },
}

/// Notion ids with and without dashes name the same object.
pub fn normalize_id(id: &str) -> String {
    id.replace('-', "").to_ascii_lowercase()
}

pub fn parse(body: &Value) -> Result<NotionPayload, PayloadError> {
    if let Some(token) = body["verification_token"].as_str() {
        return Ok(NotionPayload::Verification(token.to_string()));
    }
    let kind = body["type"].as_str().ok_or("missing type")?.to_string();
    let id = body["id"].as_str().ok_or("missing id")?.to_string();
    let entity_id = body["entity"]["id"].as_str().map(str::to_string);
    let entity_type = body["entity"]["type"].as_str().map(str::to_string);
    let parent = &body["data"]["parent"];
    let page_id = match entity_type.as_deref() {
        Some("page") => entity_id.clone(),
        _ => body["data"]["page_id"].as_str().map(str::to_string),
    };
    let database_id = match parent["type"].as_str() {
        Some("database") | Some("data_source") => parent["id"].as_str().map(normalize_id),
        _ => None,
    };
    let event = TriggerEvent {
        source: "notion".into(),
        kind: kind.clone(),
        summary: format!("{kind} {}", entity_id.as_deref().unwrap_or("?")),
        text: None,
        payload: json!({
            "id": id, "type": kind, "timestamp": body["timestamp"], "entity": body["entity"],
            "parent": parent, "updated_properties": body["data"]["updated_properties"], "authors": body["authors"],
        }),
        private: false,
        origin: Origin::Notion {
            entity_id,
            entity_type,
            database_id,
            page_id,
        },
        attachments: Vec::new(),
        traceparent: None,
        action_token: None,
    };
    Ok(NotionPayload::Event {
        event: Box::new(event),
        dedupe_key: format!("notion:{id}"),
    })
}

/// Authenticates and parses a request to `/notion/webhook`. Closed (`NotFound`) unless
/// the operator set `secret` (`NOTION_WEBHOOK_TOKEN`) or holds a setup window open:
/// nothing a request carries becomes a signing key. The subscription handshake (which
/// Notion does not sign) is accepted only inside a setup window; events only with a
/// valid `X-Notion-Signature` and a `timestamp` inside the replay window around `now`.
pub fn receive(
    secret: Option<&str>,
    setup_window_open: bool,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Inbound, InboundError> {
    let Some(secret) = secret else {
        if !setup_window_open {
            return Err(InboundError::NotFound);
        }
        // During set-up only the handshake is expected.
        return match parse(&json_body(body)?)? {
            NotionPayload::Verification(token) => Ok(Inbound::VerificationToken(token)),
            NotionPayload::Event { .. } => Err(AuthError::NotConfigured("NOTION_WEBHOOK_TOKEN").into()),
        };
    };
    // Parsed once: the handshake is recognised before the signature check, events only
    // after it.
    match parse(&json_body(body)?)? {
        NotionPayload::Verification(token) if setup_window_open => Ok(Inbound::VerificationToken(token)),
        NotionPayload::Verification(_) => {
            tracing::warn!(
                "a Notion verification token arrived outside a setup window and was ignored; run `steward notion-token --listen` to accept a new subscription"
            );
            Err(AuthError::Missing("X-Notion-Signature").into())
        }
        NotionPayload::Event { event, dedupe_key } => {
            auth::verify_sha256_header(
                secret,
                header(headers, "x-notion-signature"),
                "X-Notion-Signature",
                body,
            )?;
            // The dedupe key outlives the replay window, so a captured delivery is a
            // duplicate inside it and refused after it.
            let stamped = event.payload["timestamp"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .ok_or_else(|| InboundError::BadRequest("a Notion event without a timestamp".into()))?;
            if let Some(age) = auth::outside_replay_window(stamped.timestamp(), now) {
                return Err(AuthError::StaleEvent(format!(
                    "event timestamp is {age}s old, outside the {}s replay window",
                    auth::REPLAY_WINDOW_SECS
                ))
                .into());
            }
            Ok(Inbound::Event { event, dedupe_key })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_and_properties_updated() {
        assert!(
            matches!(parse(&json!({"verification_token": "secret_tMrlL1qK5vuQAh1b6cZGhFChZTSYJlce98V0pYn7yBl"})).unwrap(), NotionPayload::Verification(t) if t.starts_with("secret_"))
        );
        let body = json!({
            "id": "367cba44-b6f3-4c92-81e7-6a2e9659efd4", "timestamp": "2024-12-05T23:55:34.285Z",
            "workspace_id": "13950b26-c203-4f3b-b97d-93ec06319565", "subscription_id": "29d75c0d-5546-4414-8459-7b7a92f1fc4b",
            "integration_id": "0ef2e755-4912-8096-91c1-00376a88a5ca", "type": "page.properties_updated",
            "authors": [{"id": "c7c11cca-1d73-471d-9b6e-bdef51470190", "type": "person"}],
            "entity": {"id": "153104cd-477e-809d-8dc4-ff2d96ae3090", "type": "page"},
            "data": {"parent": {"id": "13950b26-c203-4f3b-b97d-93ec06319565", "type": "database"}, "updated_properties": ["XGe%40"]}
        });
        let NotionPayload::Event { event, dedupe_key } = parse(&body).unwrap() else {
            panic!()
        };
        assert_eq!(dedupe_key, "notion:367cba44-b6f3-4c92-81e7-6a2e9659efd4");
        assert!(
            matches!(&event.origin, Origin::Notion { database_id: Some(d), .. } if d == "13950b26c2034f3bb97d93ec06319565")
        );
    }
}
