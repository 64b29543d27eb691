//! Which agents an event starts: every agent whose `triggers:` rules match.

use std::sync::Arc;

use crate::config::spec::{JiraTrigger, NotionTrigger};
use crate::config::{AgentConfig, Config, TriggerSpec};
use crate::integrations::notion::{NotionClient, property_text};
use crate::triggers::{Origin, TriggerEvent};

use super::notion::normalize_id;

fn in_list(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v == value)
}

/// Whether `rule` matches `event`, apart from Notion property conditions (which need
/// the page and are checked by [`route`]).
pub fn matches(rule: &TriggerSpec, agent: &str, index: usize, event: &TriggerEvent) -> bool {
    match (rule, &event.origin) {
        (TriggerSpec::SlackMention(r), Origin::Slack { channel, .. }) => {
            event.kind == "app_mention" && in_list(&r.channels, channel)
        }
        (TriggerSpec::SlackMessage(r), Origin::Slack { channel, .. }) => {
            event.kind == "message" && in_list(&r.channels, channel)
        }
        (
            TriggerSpec::SlackReaction(r),
            Origin::Slack {
                channel,
                reaction: Some(got),
                ..
            },
        ) => event.kind == "reaction_added" && got == &r.reaction && in_list(&r.channels, channel),
        (
            TriggerSpec::Jira(JiraTrigger {
                events,
                projects,
                fields,
            }),
            Origin::Jira {
                project,
                webhook_event,
                changed_fields,
                ..
            },
        ) => {
            in_list(events, webhook_event)
                && in_list(projects, project)
                && (fields.is_empty()
                    || changed_fields
                        .iter()
                        .any(|f| fields.iter().any(|w| w.eq_ignore_ascii_case(f))))
        }
        (TriggerSpec::Notion(NotionTrigger { events, database, .. }), Origin::Notion { database_id, .. }) => {
            in_list(events, &event.kind)
                && database
                    .as_ref()
                    .is_none_or(|want| database_id.as_deref() == Some(normalize_id(want).as_str()))
        }
        (TriggerSpec::Webhook(w), Origin::Webhook { name }) => &w.name == name,
        (
            TriggerSpec::Cron(_),
            Origin::Cron {
                agent: a, trigger, ..
            },
        ) => a == agent && *trigger == index,
        _ => false,
    }
}

/// The agents `event` starts. Notion rules with `property`/`to` fetch the page and
/// compare the property's current value; without a Notion client they do not match.
pub async fn route(
    config: &Config,
    event: &TriggerEvent,
    notion: Option<&NotionClient>,
) -> Vec<Arc<AgentConfig>> {
    let mut out = Vec::new();
    let mut page = None;
    for agent in config.agents.values() {
        for (i, rule) in agent.triggers.iter().enumerate() {
            if !matches(rule, &agent.name, i, event) {
                continue;
            }
            if let TriggerSpec::Notion(NotionTrigger {
                property: Some(prop),
                to: Some(want),
                ..
            }) = rule
            {
                let Origin::Notion {
                    entity_id: Some(id), ..
                } = &event.origin
                else {
                    continue;
                };
                let Some(client) = notion else {
                    tracing::warn!(agent = %agent.name, "notion rule with a property condition but NOTION_TOKEN is not set");
                    continue;
                };
                if page.is_none() {
                    page = Some(
                        client
                            .get_page(id)
                            .await
                            .map_err(|e| tracing::warn!(error = %e, "cannot fetch the Notion page"))
                            .ok(),
                    );
                }
                let value = page
                    .as_ref()
                    .and_then(|p| p.as_ref())
                    .and_then(|p| property_text(p, prop));
                if value.as_deref() != Some(want.as_str()) {
                    continue;
                }
            }
            out.push(agent.clone());
            break;
        }
    }
    out
}
