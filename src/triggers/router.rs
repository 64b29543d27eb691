//! Which agents an event starts: for a Slack message (a conversation) the one agent
//! whose matching rule is most specific, with `also: true` rules beside it; for Jira,
//! Notion, webhooks and cron every agent whose rules match. A rule's `when:` filter
//! must hold too.

use std::sync::Arc;

use crate::config::trigger::Precedence;
use crate::config::{AgentConfig, Config, TriggerSpec};
use crate::integrations::notion::NotionClient;
use crate::triggers::TriggerEvent;

use super::filter_input::filter_input;
use super::{cron, jira, notion, slack, webhook};

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

/// What routing decided for one event.
#[derive(Debug, Default)]
pub struct Routed {
    /// The agents the event starts: for a Slack message the one that wins by
    /// precedence, then every agent whose matching rule says `also: true`; for the
    /// sources that fan out, every agent with a matching rule.
    pub agents: Vec<Arc<AgentConfig>>,
    /// Agents with a rule that matched but whose `when:` filter did not hold, with the
    /// reason (false, or the error it failed with).
    pub filtered: Vec<(String, String)>,
    /// Agents whose rule matched a Slack message another agent took by precedence:
    /// `(agent, the agent that took it)`.
    pub outranked: Vec<(String, String)>,
    /// A Notion rule's page could not be fetched for now (rate limited, failing,
    /// unreachable): what was decided without it may change once it can be.
    pub unavailable: Option<String>,
}

/// Why a `when:` filter did not take an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterMiss {
    /// It failed (an error, over its limits, not a boolean) rather than being false.
    pub failed: bool,
    pub reason: String,
}

/// Whether the `index`-th rule's `when:` filter holds for the event whose filter scope
/// is `scope` (built on first use).
pub fn filter_holds(
    config: &Config,
    agent: &AgentConfig,
    index: usize,
    event: &TriggerEvent,
    scope: &mut Option<rhai::Scope<'static>>,
) -> Result<(), FilterMiss> {
    let Some(filter) = agent.filter(index) else {
        return Ok(());
    };
    let scope = scope.get_or_insert_with(|| config.filters.scope(filter_input(event)));
    let kind = agent
        .triggers
        .get(index)
        .map_or("trigger", TriggerSpec::kind_name);
    match config.filters.holds(filter, scope) {
        Ok(true) => Ok(()),
        Ok(false) => Err(FilterMiss {
            failed: false,
            reason: format!("{kind}: when: {} is false", filter.source),
        }),
        // Rhai's errors can quote their input (`parse_int` does): the event log keeps no
        // text of a private conversation.
        Err(_) if event.private => Err(FilterMiss {
            failed: true,
            reason: format!(
                "{kind}: when: {} failed (the error is not kept: it can quote a private conversation)",
                filter.source
            ),
        }),
        Err(e) => Err(FilterMiss {
            failed: true,
            reason: format!("{kind}: when: {} failed: {e}", filter.source),
        }),
    }
}

/// The agents `event` starts (see [`Routed`]). Notion rules with `property`/`to` fetch
/// the page and compare the property's current value; without a Notion client they do
/// not match.
pub async fn route(config: &Config, event: &TriggerEvent, notion: Option<&NotionClient>) -> Routed {
    let mut routed = Routed::default();
    let mut page = notion::route::PageCache::default();
    let mut scope = None;
    // Slack rules that matched, each agent's best: competing for the conversation.
    let mut competing: Vec<(Arc<AgentConfig>, Precedence)> = Vec::new();
    for agent in config.agents.values() {
        // The agent's best matching rule: a fan-out rule (`None`) takes it at once.
        let mut best: Option<Precedence> = None;
        let mut fan_out = false;
        let mut filtered = None;
        for (i, rule) in agent.triggers.iter().enumerate() {
            if !matches(rule, &agent.name, i, event) {
                continue;
            }
            if let Err(miss) = filter_holds(config, agent, i, event, &mut scope) {
                filtered.get_or_insert(miss.reason);
                continue;
            }
            if !notion::route::condition_holds(rule, &agent.name, event, notion, &mut page).await {
                continue;
            }
            match rule.precedence() {
                None => {
                    fan_out = true;
                    break;
                }
                Some(p) => {
                    // A competing rule beats an `also` one; then the higher rank.
                    let key = |p: &Precedence| (!p.also, p.rank());
                    if best.is_none_or(|b| key(&p) > key(&b)) {
                        best = Some(p);
                    }
                }
            }
        }
        if fan_out {
            routed.agents.push(agent.clone());
        } else if let Some(p) = best {
            competing.push((agent.clone(), p));
        } else if let Some(why) = filtered {
            routed.filtered.push((agent.name.clone(), why));
        }
    }
    // One agent per conversation: the highest rank wins (ties, which `validate`
    // refuses, go to the first by name); `also` rules run beside it.
    let winner = competing
        .iter()
        .filter(|(_, p)| !p.also)
        .fold(None::<&(Arc<AgentConfig>, Precedence)>, |best, c| match best {
            Some(b) if b.1.rank() >= c.1.rank() => Some(b),
            _ => Some(c),
        })
        .map(|(a, _)| a.clone());
    if let Some(w) = &winner {
        routed.agents.push(w.clone());
    }
    for (agent, p) in competing {
        if p.also {
            routed.agents.push(agent);
        } else if let Some(w) = winner.as_ref().filter(|w| w.name != agent.name) {
            routed.outranked.push((agent.name.clone(), w.name.clone()));
        }
    }
    routed.unavailable = page.unavailable().map(str::to_string);
    routed
}
