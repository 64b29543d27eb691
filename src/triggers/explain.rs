//! Why an event started no agent: for each agent with a trigger for the event's source,
//! the first condition of its closest trigger that did not hold. Asked only for events
//! that matched nothing, so routing itself stays as fast as before.

use serde_json::{Map, Value};

use crate::config::{AgentConfig, Config, TriggerSpec};
use crate::triggers::{Origin, TriggerEvent};

use super::router;
use crate::config::trigger::in_list;

/// `{agent: reason}` for every agent with a trigger of `event`'s source.
pub fn no_agent(config: &Config, event: &TriggerEvent) -> Value {
    let mut out = Map::new();
    let mut scope = None;
    for agent in config.agents.values() {
        let reasons: Vec<String> = (0..agent.triggers.len())
            .filter(|&i| reason(&agent.triggers[i], event).is_some())
            .map(|i| verdict(config, agent, i, event, &mut scope).1)
            .collect();
        // The first trigger of the source speaks for the agent; several are listed.
        if !reasons.is_empty() {
            out.insert(agent.name.clone(), Value::String(reasons.join("; ")));
        }
    }
    Value::Object(out)
}

/// What one rule made of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Matched,
    /// A condition of the rule itself did not hold.
    NoMatch,
    /// Every condition held but its `when:` filter was false.
    FilterFalse,
    /// Its `when:` filter failed (counted as false).
    FilterFailed,
}

/// Whether rule `index` of `agent` takes `event`, and the condition that decided: the
/// first that did not hold, or that every one did (with its `when:` filter's value).
/// A Notion property condition needs the page and is not asked here.
pub fn verdict(
    config: &Config,
    agent: &AgentConfig,
    index: usize,
    event: &TriggerEvent,
    scope: &mut Option<rhai::Scope<'static>>,
) -> (Verdict, String) {
    let Some(rule) = agent.triggers.get(index) else {
        return (Verdict::NoMatch, "no such trigger".into());
    };
    let kind = rule.kind_name();
    if !router::matches(rule, &agent.name, index, event) {
        let why = reason(rule, event)
            .filter(|r| !r.ends_with(": matched"))
            .unwrap_or_else(|| format!("{kind}: trigger kind (not a {} event)", event.source));
        return (Verdict::NoMatch, why);
    }
    if let Err(miss) = router::filter_holds(config, agent, index, event, scope) {
        let v = if miss.failed {
            Verdict::FilterFailed
        } else {
            Verdict::FilterFalse
        };
        return (v, miss.reason);
    }
    let mut how = match agent.filter(index) {
        Some(f) => format!("{kind}: matched, and when: {} is true", f.source),
        None => format!("{kind}: matched"),
    };
    if let TriggerSpec::Notion(n) = rule
        && let (Some(p), Some(to)) = (&n.property, &n.to)
    {
        how.push_str(&format!(" (if the page's {p} is {to} when it arrives)"));
    }
    (Verdict::Matched, how)
}

fn list(items: &[String]) -> String {
    items.join(", ")
}

/// Why `rule` did not take `event`; `None` when `rule` is for another source.
fn reason(rule: &TriggerSpec, event: &TriggerEvent) -> Option<String> {
    match (&event.origin, rule) {
        (
            Origin::Slack {
                channel,
                channel_type,
                reaction,
                ..
            },
            rule,
        ) => slack(
            rule,
            &event.kind,
            channel,
            channel_type.as_deref(),
            reaction.as_deref(),
        ),
        (
            Origin::Jira {
                project,
                webhook_event,
                changed_fields,
                ..
            },
            TriggerSpec::Jira(r),
        ) => Some(if !in_list(&r.events, webhook_event) {
            format!("jira: listens for {}, not {webhook_event}", list(&r.events))
        } else if !in_list(&r.projects, project) {
            format!(
                "jira: wrong project ({project}; listens in {})",
                list(&r.projects)
            )
        } else if !r.fields.is_empty()
            && !changed_fields
                .iter()
                .any(|f| r.fields.iter().any(|w| w.eq_ignore_ascii_case(f)))
        {
            format!("jira: none of the fields {} changed", list(&r.fields))
        } else {
            "jira: matched".into()
        }),
        (Origin::Notion { database_id, .. }, TriggerSpec::Notion(r)) => {
            Some(if !in_list(&r.events, &event.kind) {
                format!("notion: listens for {}, not {}", list(&r.events), event.kind)
            } else if r.database.is_some() && database_id.is_none() {
                "notion: the event names no database".into()
            } else if r.database.is_some() {
                "notion: wrong database".into()
            } else {
                format!(
                    "notion: property {} is not {}",
                    r.property.as_deref().unwrap_or_default(),
                    r.to.as_deref().unwrap_or_default()
                )
            })
        }
        (Origin::Webhook { name }, TriggerSpec::Webhook(w)) => {
            Some(format!("webhook: listens on hook {}, not {name}", w.name))
        }
        (Origin::Cron { .. }, TriggerSpec::Cron(_)) => Some("cron: another agent's schedule".into()),
        _ => None,
    }
}

fn slack(
    rule: &TriggerSpec,
    kind: &str,
    channel: &str,
    channel_type: Option<&str>,
    reaction: Option<&str>,
) -> Option<String> {
    let wrong_channel =
        |channels: &[String]| format!("wrong channel ({channel}; listens in {})", list(channels));
    Some(match rule {
        TriggerSpec::SlackMention(r) => {
            if kind != "app_mention" {
                format!("slack_mention: trigger kind (a mention, not {kind})")
            } else if !in_list(&r.channels, channel) {
                format!("slack_mention: {}", wrong_channel(&r.channels))
            } else {
                "slack_mention: matched".into()
            }
        }
        TriggerSpec::SlackMessage(r) => {
            if kind != "message" {
                format!("slack_message: trigger kind (a message, not {kind})")
            } else {
                format!("slack_message: {}", wrong_channel(&r.channels))
            }
        }
        TriggerSpec::SlackDm(_) => {
            if kind != "message" {
                format!("slack_dm: trigger kind (a direct message, not {kind})")
            } else if channel_type != Some("im") && !channel.starts_with('D') {
                "slack_dm: not a direct message".into()
            } else {
                "slack_dm: matched".into()
            }
        }
        TriggerSpec::SlackReaction(r) => {
            if kind != "reaction_added" {
                format!("slack_reaction: trigger kind (a reaction, not {kind})")
            } else if reaction != Some(r.reaction.as_str()) {
                format!(
                    "slack_reaction: wrong reaction ({}; listens for {})",
                    reaction.unwrap_or("none"),
                    r.reaction
                )
            } else {
                format!("slack_reaction: {}", wrong_channel(&r.channels))
            }
        }
        _ => return None,
    })
}
