//! The normalized event a `when:` filter reads (docs/triggers.md, "Filters").

use serde_json::Value;

use crate::sandbox::filter::FilterInput;

use super::{Origin, TriggerEvent};

/// `text`, `user`, `channel`, `reaction`, `labels`, `fields`, `payload`, `source`,
/// `kind` of `event`. `labels` and `fields` are a Jira issue's (`issue.fields`, kept as the
/// payload's `fields`), empty
/// for other sources; an absent value is an empty string, never unit, so a filter
/// compares without checking for it first.
pub fn filter_input(event: &TriggerEvent) -> FilterInput {
    let (channel, reaction) = match &event.origin {
        Origin::Slack {
            channel, reaction, ..
        } => (channel.clone(), reaction.clone().unwrap_or_default()),
        _ => (String::new(), String::new()),
    };
    let fields = match &event.origin {
        Origin::Jira { .. } => event.payload["fields"].clone(),
        _ => Value::Null,
    };
    let labels = fields["labels"]
        .as_array()
        .map(|l| l.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    FilterInput {
        text: event.text.clone().unwrap_or_default(),
        user: event.actor().unwrap_or_default(),
        channel,
        reaction,
        labels,
        fields: if fields.is_object() {
            fields
        } else {
            Value::Object(Default::default())
        },
        payload: event.payload.clone(),
        source: event.source.clone(),
        kind: event.kind.clone(),
    }
}
