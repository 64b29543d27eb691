//! Which Notion rules an event matches: event type and database from the event, and a
//! property condition (`property` / `to`) from the page as it is now.

use serde_json::Value;

use crate::config::TriggerSpec;
use crate::config::spec::NotionTrigger;
use crate::integrations::notion::{NotionClient, property_text};
use crate::triggers::{Origin, TriggerEvent};

use super::normalize_id;
use crate::config::trigger::in_list;

/// Whether Notion `rule` matches `event` apart from its property condition; `None` when
/// `rule` is not a Notion rule.
pub fn matches(rule: &TriggerSpec, event: &TriggerEvent) -> Option<bool> {
    let TriggerSpec::Notion(NotionTrigger { events, database, .. }) = rule else {
        return None;
    };
    let Origin::Notion { database_id, .. } = &event.origin else {
        return Some(false);
    };
    Some(
        in_list(events, &event.kind)
            && database
                .as_ref()
                .is_none_or(|want| database_id.as_deref() == Some(normalize_id(want).as_str())),
    )
}

/// The page an event is about, fetched at most once while routing it, and why it could
/// not be, when Notion was rate limiting, failing or unreachable.
#[derive(Default)]
pub struct PageCache(Option<Option<Value>>, Option<String>);

impl PageCache {
    /// Why the page could not be fetched for now (asking again later may succeed).
    pub fn unavailable(&self) -> Option<&str> {
        self.1.as_deref()
    }
}

/// Whether `rule`'s property condition holds (true when it has none). The page is
/// fetched once per event; without a Notion client such a rule does not match.
pub async fn condition_holds(
    rule: &TriggerSpec,
    agent: &str,
    event: &TriggerEvent,
    notion: Option<&NotionClient>,
    cache: &mut PageCache,
) -> bool {
    let TriggerSpec::Notion(NotionTrigger {
        property: Some(prop),
        to: Some(want),
        ..
    }) = rule
    else {
        return true;
    };
    let Origin::Notion {
        entity_id: Some(id), ..
    } = &event.origin
    else {
        return false;
    };
    let Some(client) = notion else {
        tracing::warn!(%agent, "notion rule with a property condition but NOTION_TOKEN is not set");
        return false;
    };
    if cache.0.is_none() {
        cache.0 = Some(match client.get_page(id).await {
            Ok(page) => Some(page),
            Err(e) => {
                tracing::warn!(error = %e, "cannot fetch the Notion page");
                if e.is_transient() {
                    cache.1 = Some(e.to_string());
                }
                None
            }
        });
    }
    let value = cache
        .0
        .as_ref()
        .and_then(|p| p.as_ref())
        .and_then(|p| property_text(p, prop));
    value.as_deref() == Some(want.as_str())
}
