//! What the router decided for an event, as the outcome stored with it.

use std::sync::Arc;

use serde_json::json;

use crate::config::{AgentConfig, Config};
use crate::store::NewRun;
use crate::triggers::TriggerEvent;
use crate::types::event_outcome::{EventOutcome, OutcomeKind};

/// What routing and admission decided for one event.
pub struct Decided<'a> {
    pub runs: &'a [NewRun],
    /// Agents whose run in the conversation takes the message instead.
    pub handed: &'a [Arc<AgentConfig>],
    /// Whether the agent came from a follow-up in its own thread, not a trigger.
    pub follow_up: bool,
    /// Agents refused by a limit, with the outcome that names it.
    pub refused: &'a [(OutcomeKind, String)],
    /// Agents whose `when:` filter did not hold, with why.
    pub filtered: &'a [(String, String)],
    /// Agents another agent took the message from by precedence.
    pub outranked: &'a [(String, String)],
}

/// The outcome of a routed event: runs started (or a follow-up's run), messages handed
/// to a conversation's run, agents refused by a limit, agents whose filter said no or,
/// when nothing matched, each agent's reason. Agents outranked by precedence are named
/// with whoever took the message.
pub fn decide(config: &Config, trigger: &TriggerEvent, d: &Decided<'_>) -> EventOutcome {
    let (runs, handed, refused) = (d.runs, d.handed, d.refused);
    let runs_json: Vec<_> = runs
        .iter()
        .map(|r| json!({"id": r.id, "agent": r.agent}))
        .collect();
    let handed_json: Vec<_> = handed.iter().map(|a| a.name.clone()).collect();
    let refused_json: serde_json::Map<_, _> = refused
        .iter()
        .map(|(k, agent)| (agent.clone(), json!(k.as_str())))
        .collect();
    let pairs = |list: &[(String, String)]| -> serde_json::Map<String, serde_json::Value> {
        list.iter().map(|(a, why)| (a.clone(), json!(why))).collect()
    };
    let mut detail = json!({});
    if !runs_json.is_empty() {
        detail["runs"] = json!(runs_json);
    }
    if !handed_json.is_empty() {
        detail["handed_to"] = json!(handed_json);
    }
    if !refused_json.is_empty() {
        detail["refused"] = json!(refused_json);
    }
    if !d.outranked.is_empty() {
        detail["outranked_by"] = json!(pairs(d.outranked));
    }
    if !d.filtered.is_empty() {
        detail["filtered"] = json!(pairs(d.filtered));
    }
    let kind = if d.follow_up && (!runs.is_empty() || !handed.is_empty()) {
        OutcomeKind::FollowUp
    } else if !runs.is_empty() {
        OutcomeKind::Started
    } else if !handed.is_empty() {
        OutcomeKind::HandedToRun
    } else if let Some((kind, agent)) = refused.first() {
        detail["reason"] = json!(match kind {
            OutcomeKind::OverBudget => format!("{agent}: its daily budget is spent"),
            _ => format!("{agent}: the person's per-minute limit"),
        });
        *kind
    } else if !d.filtered.is_empty() {
        detail["agents"] = crate::triggers::explain::no_agent(config, trigger);
        OutcomeKind::Filtered
    } else {
        detail = json!({"agents": crate::triggers::explain::no_agent(config, trigger)});
        OutcomeKind::NoAgent
    };
    EventOutcome::new(kind, detail)
}
