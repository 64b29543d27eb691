//! Which agents an event starts: every agent whose `triggers:` rules match.

use std::sync::Arc;

use crate::config::{AgentConfig, Config, TriggerSpec};
use crate::integrations::notion::NotionClient;
use crate::triggers::TriggerEvent;

use super::{cron, jira, notion, slack, webhook};

/// An empty list matches anything.
pub(crate) fn in_list(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v == value)
}

/// Whether `rule` matches `event`, apart from Notion property conditions (which need
/// the page and are checked by [`route`]). Each source decides for its own rules.
pub fn matches(rule: &TriggerSpec, agent: &str, index: usize, event: &TriggerEvent) -> bool {
    slack::route::matches(rule, event)
        .or_else(|| jira::route::matches(rule, event))
        .or_else(|| notion::route::matches(rule, event))
        .or_else(|| webhook::matches(rule, event))
        .or_else(|| cron::matches(rule, agent, index, event))
        .unwrap_or(false)
}

/// The agents `event` starts. Notion rules with `property`/`to` fetch the page and
/// compare the property's current value; without a Notion client they do not match.
pub async fn route(
    config: &Config,
    event: &TriggerEvent,
    notion: Option<&NotionClient>,
) -> Vec<Arc<AgentConfig>> {
    let mut out = Vec::new();
    let mut page = notion::route::PageCache::default();
    for agent in config.agents.values() {
        for (i, rule) in agent.triggers.iter().enumerate() {
            if !matches(rule, &agent.name, i, event)
                || !notion::route::condition_holds(rule, &agent.name, event, notion, &mut page).await
            {
                continue;
            }
            out.push(agent.clone());
            break;
        }
    }
    out
}
