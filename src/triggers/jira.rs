//! Jira Cloud webhooks (`jira:issue_created`, `jira:issue_updated` with its changelog,
//! `comment_created`, ...). Rich-text fields may be strings or ADF.

use serde_json::{Value, json};

use super::adf::field_text;
use crate::run::trigger::one_line;
use crate::run::{Origin, TriggerEvent};

/// Parses a webhook body; `identifier` is `X-Atlassian-Webhook-Identifier` (the dedupe
/// key; retries carry the same one).
pub fn parse(body: &Value, identifier: Option<&str>) -> Result<(TriggerEvent, String), String> {
    let webhook_event = body["webhookEvent"]
        .as_str()
        .ok_or("missing webhookEvent")?
        .to_string();
    let issue = &body["issue"];
    let key = issue["key"].as_str().unwrap_or_default().to_string();
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
    let dedupe = match identifier {
        Some(id) => format!("jira:{id}"),
        // Without the header, the event's own identity is the best key we have.
        None => format!(
            "jira:{webhook_event}:{key}:{}:{}",
            body["timestamp"], body["comment"]["id"]
        ),
    };
    let event = TriggerEvent {
        source: "jira".into(),
        kind: webhook_event.clone(),
        summary: one_line(&format!("{webhook_event} {key} {summary}"), 120),
        text: Some(text),
        payload: json!({
            "webhookEvent": webhook_event, "issue_key": key, "project": project,
            "status": issue["fields"]["status"]["name"], "issuetype": issue["fields"]["issuetype"]["name"],
            "reporter": issue["fields"]["reporter"]["displayName"], "changes": changes,
            "user": body["user"]["displayName"],
        }),
        private: false,
        origin: Origin::Jira {
            issue_key: key,
            project,
            webhook_event,
            changed_fields,
        },
        attachments: Vec::new(),
    };
    Ok((event, dedupe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_updated_with_changelog_and_adf() {
        let body = json!({
            "timestamp": 1731000000000u64, "webhookEvent": "jira:issue_updated", "issue_event_type_name": "issue_generic",
            "user": {"displayName": "Ana"},
            "issue": {"id": "10002", "key": "OPS-7", "fields": {
                "summary": "Gateway certificate expired", "project": {"key": "OPS"},
                "status": {"name": "In Progress"},
                "description": {"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [{"type": "text", "text": "All logins fail."}]}]}}},
            "changelog": {"id": "1", "items": [{"field": "status", "fieldtype": "jira", "fromString": "To Do", "toString": "In Progress"}]}
        });
        let (e, key) = parse(&body, Some("abc-123")).unwrap();
        assert_eq!(key, "jira:abc-123");
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
