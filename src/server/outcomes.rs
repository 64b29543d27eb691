//! What the router decided for an event, as the outcome stored with it.

use std::sync::Arc;

use serde_json::json;

use crate::config::{AgentConfig, Config};
use crate::store::NewRun;
use crate::triggers::TriggerEvent;
use crate::types::event_outcome::{EventOutcome, OutcomeKind};

/// The outcome of a routed event: runs started (or a follow-up's run), messages handed
/// to a conversation's run, agents refused by a limit, or, when nothing matched, each
/// agent's reason.
pub fn decide(
    config: &Config,
    trigger: &TriggerEvent,
    runs: &[NewRun],
    handed: &[Arc<AgentConfig>],
    follow_up: bool,
    refused: &[(OutcomeKind, String)],
) -> EventOutcome {
    let runs_json: Vec<_> = runs
        .iter()
        .map(|r| json!({"id": r.id, "agent": r.agent}))
        .collect();
    let handed_json: Vec<_> = handed.iter().map(|a| a.name.clone()).collect();
    let refused_json: serde_json::Map<_, _> = refused
        .iter()
        .map(|(k, agent)| (agent.clone(), json!(k.as_str())))
        .collect();
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
    let kind = if follow_up && (!runs.is_empty() || !handed.is_empty()) {
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
    } else {
        detail = json!({"agents": crate::triggers::explain::no_agent(config, trigger)});
        OutcomeKind::NoAgent
    };
    EventOutcome::new(kind, detail)
}
