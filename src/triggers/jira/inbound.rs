//! Jira Cloud webhooks (`jira:issue_created`, `jira:issue_updated` with its changelog,
//! `comment_created`, ...). Rich-text fields may be strings or ADF.

use serde_json::{Value, json};

use crate::integrations::adf_text::field_text;
use reqwest::header::HeaderMap;

use crate::triggers::auth::{self, AuthError};
use crate::triggers::event::one_line;
use crate::triggers::source::{Inbound, InboundError, header, json_body};
use crate::triggers::{Origin, TriggerEvent};

pub use crate::triggers::auth::REPLAY_WINDOW_SECS;

/// Why a Jira body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JiraError {
    #[error("{0}")]
    Malformed(String),
    #[error("event timestamp is {age_secs}s old, outside the {REPLAY_WINDOW_SECS}s replay window")]
    Stale { age_secs: i64 },
}

/// Parses a signed webhook body. The dedupe key is the SHA-256 of the signed body
/// (`body_sha256`): Jira's retries resend the same body, and a captured body cannot be
/// varied without breaking its signature, unlike the unsigned
/// `X-Atlassian-Webhook-Identifier` header. Bodies whose `timestamp` (ms) is outside the
/// replay window around `now_secs` are refused.
pub fn parse(body: &Value, body_sha256: &str, now_secs: i64) -> Result<(TriggerEvent, String), JiraError> {
    let ts_ms = body["timestamp"]
        .as_i64()
        .ok_or_else(|| JiraError::Malformed("missing timestamp".into()))?;
    if let Some(age_secs) = crate::triggers::auth::outside_replay_window(ts_ms / 1000, now_secs) {
        return Err(JiraError::Stale { age_secs });
    }
    let malformed = |m: &str| JiraError::Malformed(m.to_string());
    let webhook_event = body["webhookEvent"]
        .as_str()
        .ok_or_else(|| malformed("missing webhookEvent"))?
        .to_string();
    let issue = &body["issue"];
    // Jira Server's comment events carry no `issue`: the comment's own `self` URL
    // (`.../rest/api/2/issue/10148/comment/252789`) names the issue by id, which the
    // REST API takes wherever it takes a key. Without either there is no issue to
    // answer on, and a comment delivery is refused rather than answered at
    // `/issue//comment`. Events about no issue (projects, versions) keep an empty key.
    let key = match issue["key"].as_str() {
        Some(k) if !k.is_empty() => k.to_string(),
        _ if body["comment"].is_object() => issue_of_comment(&body["comment"]["self"]).ok_or_else(|| {
            malformed("a comment event that names no issue (neither `issue` nor the comment's `self`)")
        })?,
        _ => String::new(),
    };
    let project = issue["fields"]["project"]["key"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| key.split('-').next().unwrap_or_default().to_string());
    let changed_fields: Vec<String> = body["changelog"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["field"].as_str().map(str::to_string))
        .collect();
    let summary = issue["fields"]["summary"].as_str().unwrap_or_default();
    let description = field_text(&issue["fields"]["description"]);
    let comment = field_text(&body["comment"]["body"]);
    let mut text = format!("{key}: {summary}");
    if !description.is_empty() {
        text.push_str(&format!("\n\nDescription:\n{description}"));
    }
    if !comment.is_empty() {
        let author = body["comment"]["author"]["displayName"]
            .as_str()
            .unwrap_or("someone");
        text.push_str(&format!("\n\nComment by {author}:\n{comment}"));
    }
    let changes: Vec<Value> = body["changelog"]["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| json!({"field": i["field"], "from": i["fromString"], "to": i["toString"]}))
        .collect();
    let dedupe = format!("jira:{body_sha256}");
    // Restricted content: an issue with a security level, a comment shown only to a
    // role or group, a service desk's internal note. It is held as private text is, and
    // a reply keeps the comment's restriction.
    let visibility = body["comment"]["visibility"]
        .is_object()
        .then(|| body["comment"]["visibility"].clone());
    let internal = body["comment"]["jsdPublic"] == false;
    let private = !issue["fields"]["security"].is_null() || visibility.is_some() || internal;
    let event = TriggerEvent {
        source: "jira".into(),
        kind: webhook_event.clone(),
        summary: match private {
            true => format!("{webhook_event} {key}"),
            false => one_line(&format!("{webhook_event} {key} {summary}"), 120),
        },
        text: Some(text),
        payload: json!({
            "webhookEvent": webhook_event, "issue_key": key, "project": project,
            "status": issue["fields"]["status"]["name"], "issuetype": issue["fields"]["issuetype"]["name"],
            "reporter": issue["fields"]["reporter"]["displayName"], "changes": changes,
            "user": body["user"]["displayName"], "account": body["user"]["accountId"],
            "comment": comment_facts(&body["comment"]),
            "fields": filter_fields(&issue["fields"]),
        }),
        private,
        origin: Origin::Jira {
            issue_key: key,
            project,
            webhook_event,
            changed_fields,
            visibility,
            internal,
        },
        attachments: Vec::new(),
        traceparent: None,
        action_token: None,
    };
    Ok((event, dedupe))
}

/// Most bytes of one field kept for filters: labels, priority, status, components and
/// most custom fields are far smaller; long text and histories are not for filtering.
const MAX_FIELD_BYTES: usize = 1024;

/// The issue's fields for `when:` filters (`labels`, `fields.priority.name`), without
/// empty ones and those the event's text already carries or that are large
/// (description, comments, attachments, work logs): the payload is also what the
/// model reads.
fn filter_fields(fields: &Value) -> Value {
    let Some(map) = fields.as_object() else {
        return Value::Null;
    };
    let kept: serde_json::Map<String, Value> = map
        .iter()
        .filter(|(name, value)| {
            !matches!(
                name.as_str(),
                "description" | "comment" | "attachment" | "worklog"
            ) && !value.is_null()
                && value.to_string().len() <= MAX_FIELD_BYTES
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    Value::Object(kept)
}

/// What routing needs of a comment: its id, its author's account and the accounts it
/// mentions; `null` for events without one.
fn comment_facts(comment: &Value) -> Value {
    if comment.is_null() {
        return Value::Null;
    }
    let mut mentioned = Vec::new();
    mentions(&comment["body"], &mut mentioned);
    json!({"id": comment["id"], "author": comment["author"]["accountId"],
           "created": comment["created"], "mentions": mentioned})
}

/// Account ids mentioned in a comment body: ADF `mention` nodes, or `[~accountid:…]`
/// in wiki markup.
pub fn mentions(body: &Value, out: &mut Vec<String>) {
    match body {
        Value::String(text) => {
            for part in text.split("[~accountid:").skip(1) {
                if let Some((id, _)) = part.split_once(']') {
                    out.push(id.to_string());
                }
            }
        }
        Value::Object(node) => {
            if node.get("type").and_then(Value::as_str) == Some("mention")
                && let Some(id) = body["attrs"]["id"].as_str()
            {
                out.push(id.to_string());
            }
            if let Some(children) = node.get("content") {
                mentions(children, out);
            }
        }
        Value::Array(nodes) => nodes.iter().for_each(|n| mentions(n, out)),
        _ => {}
    }
}

/// Authenticates a request to `/jira/webhook` (`X-Hub-Signature` over the body, replay
/// window) and parses it.
/// The issue id in a comment's `self` URL (`.../issue/{id}/comment/{comment id}`).
fn issue_of_comment(url: &Value) -> Option<String> {
    let path = url.as_str()?;
    let (_, rest) = path.split_once("/issue/")?;
    let (id, _) = rest.split_once("/comment")?;
    (!id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')).then(|| id.to_string())
}

pub fn receive(secret: &str, headers: &HeaderMap, body: &[u8], now: i64) -> Result<Inbound, InboundError> {
    if secret.is_empty() {
        return Err(AuthError::NotConfigured("JIRA_WEBHOOK_SECRET").into());
    }
    auth::verify_sha256_header(
        secret,
        header(headers, "x-hub-signature"),
        "X-Hub-Signature",
        body,
    )?;
    let value = json_body(body)?;
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(body));
    let (event, dedupe_key) = parse(&value, &digest, now).map_err(|e| match e {
        JiraError::Stale { .. } => InboundError::Unauthorized(AuthError::StaleEvent(e.to_string())),
        JiraError::Malformed(m) => InboundError::BadRequest(m),
    })?;
    Ok(Inbound::Event {
        event: Box::new(event),
        dedupe_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comment_mentions_from_adf_and_wiki_markup() {
        let adf = json!({"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [
            {"type": "mention", "attrs": {"id": "5b10ac8d82e05b22cc7d4ef5", "text": "@Steward"}},
            {"type": "text", "text": " why P1?"}]}]});
        let mut found = Vec::new();
        mentions(&adf, &mut found);
        assert_eq!(found, ["5b10ac8d82e05b22cc7d4ef5"]);
        let mut found = Vec::new();
        mentions(&json!("[~accountid:abc] and [~accountid:def] please"), &mut found);
        assert_eq!(found, ["abc", "def"]);
    }

    /// `when:` filters see the issue's labels and fields, and `user` is the account id:
    /// a display name is anyone's to choose, so a filter on it could be passed by
    /// renaming oneself.
    #[test]
    fn filters_see_labels_fields_and_the_account() {
        let now = 1_731_000_100;
        let body = json!({
            "timestamp": 1731000000000u64, "webhookEvent": "jira:issue_created",
            "user": {"accountId": "acct-ana", "displayName": "Ana Lee"},
            "issue": {"key": "OPS-1", "fields": {"summary": "Disk full", "labels": ["infra", "no-bot"],
                      "priority": {"name": "High"}, "description": "long text", "project": {"key": "OPS"}}}});
        let (e, _) = parse(&body, "ef56", now).unwrap();
        let input = crate::triggers::filter_input::filter_input(&e);
        assert_eq!(input.labels, ["infra", "no-bot"]);
        assert_eq!(input.fields["priority"]["name"], "High");
        assert!(
            input.fields["description"].is_null(),
            "the text carries it already"
        );
        assert_eq!(input.user, "acct-ana");
        let engine = crate::sandbox::filter::FilterEngine::default();
        let filter = engine
            .compile(
                r#"labels.contains("infra") && fields.priority.name == "High" && !labels.contains("skip")"#,
            )
            .unwrap();
        assert_eq!(engine.holds(&filter, &mut engine.scope(input)), Ok(true));
    }

    /// Jira Server's `comment_created` has no `issue` object: the comment's `self`
    /// names the issue by id; a delivery naming no issue at all is refused.
    #[test]
    fn a_jira_server_comment_without_an_issue_names_it_from_the_comment() {
        let now = 1_731_000_100;
        let body = json!({
            "timestamp": 1731000000000u64, "webhookEvent": "comment_created",
            "comment": {"self": "https://jira.example.com/rest/api/2/issue/10148/comment/252789",
                        "id": "252789", "author": {"displayName": "Ana"}, "body": "Is the gateway back?",
                        "created": "2024-11-07T17:20:00.000+0000"}});
        let (e, _) = parse(&body, "cd34", now).unwrap();
        assert!(
            matches!(&e.origin, Origin::Jira { issue_key, .. } if issue_key == "10148"),
            "{:?}",
            e.origin
        );
        let nothing =
            json!({"timestamp": 1731000000000u64, "webhookEvent": "comment_created", "comment": {"id": "1"}});
        assert!(parse(&nothing, "ef56", now).is_err());
    }

    #[test]
    fn issue_updated_with_changelog_and_adf() {
        let now = 1_731_000_100;
        let body = json!({
            "timestamp": 1731000000000u64, "webhookEvent": "jira:issue_updated", "issue_event_type_name": "issue_generic",
            "user": {"displayName": "Ana"},
            "issue": {"id": "10002", "key": "OPS-7", "fields": {
                "summary": "Gateway certificate expired", "project": {"key": "OPS"},
                "status": {"name": "In Progress"},
                "description": {"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [{"type": "text", "text": "All logins fail."}]}]}}},
            "changelog": {"id": "1", "items": [{"field": "status", "fieldtype": "jira", "fromString": "To Do", "toString": "In Progress"}]}
        });
        let (e, key) = parse(&body, "ab12", now).unwrap();
        assert_eq!(key, "jira:ab12");
        assert_eq!(
            parse(&body, "ab12", now + REPLAY_WINDOW_SECS).unwrap_err(),
            JiraError::Stale {
                age_secs: REPLAY_WINDOW_SECS + 100
            }
        );
        assert!(matches!(
            parse(&body, "ab12", now - 3600),
            Err(JiraError::Stale { .. })
        ));
        assert_eq!(
            e.text.as_deref(),
            Some("OPS-7: Gateway certificate expired\n\nDescription:\nAll logins fail.")
        );
        assert!(
            matches!(&e.origin, Origin::Jira { project, changed_fields, .. } if project == "OPS" && changed_fields == &["status"])
        );
        assert_eq!(e.payload["changes"][0]["to"], "In Progress");
    }
}
