//! A run's record as shown by `steward run --json` and `steward runs show`.

use serde::Serialize;
use serde_json::Value;

use crate::store::{RunRow, Score, Store, StoreError, StoredEvent};

/// One tool call with its outcome, joined from the `tool_call` and `tool_result` events.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCallReport {
    pub call_id: String,
    pub name: String,
    pub arguments: Value,
    pub ok: bool,
    pub result_bytes: u64,
    pub duration_ms: u64,
    pub error: Option<String>,
}

/// The whole record of a run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    #[serde(flatten)]
    pub run: RunRow,
    pub tool_calls_detail: Vec<ToolCallReport>,
    pub events: Vec<StoredEvent>,
    /// Post-run eval verdicts and people's reactions.
    pub scores: Vec<Score>,
    /// Tokens and cost of each of the run's own model calls, and what the cache saved.
    pub token_bill: super::bill::TokenBill,
    /// A person called from its answer ("Get help from a person"), and its resolution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<crate::store::EscalationRow>,
}

impl RunReport {
    /// Loads run `id`; `None` when it does not exist.
    pub async fn load(store: &dyn Store, id: &str) -> Result<Option<RunReport>, StoreError> {
        let Some(run) = store.get_run(id).await? else {
            return Ok(None);
        };
        let events = store.run_events(id).await?;
        let scores = store.run_scores(id).await?;
        let escalation = store.escalation(id).await?;
        Ok(Some(RunReport {
            escalation,
            tool_calls_detail: tool_calls(&events),
            token_bill: super::bill::TokenBill::from_events(&events),
            run,
            events,
            scores,
        }))
    }
}

fn tool_calls(events: &[StoredEvent]) -> Vec<ToolCallReport> {
    let mut calls: Vec<ToolCallReport> = Vec::new();
    for e in events {
        let id = e.data["call_id"].as_str().unwrap_or_default();
        match e.kind.as_str() {
            "tool_call" => {
                let raw = e.data["arguments"].as_str().unwrap_or_default();
                calls.push(ToolCallReport {
                    call_id: id.to_string(),
                    name: e.data["name"].as_str().unwrap_or_default().to_string(),
                    // Show parsed arguments when they parse, the raw text otherwise.
                    arguments: serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string())),
                    ok: false,
                    result_bytes: 0,
                    duration_ms: 0,
                    error: None,
                });
            }
            "tool_result" => {
                if let Some(c) = calls.iter_mut().rev().find(|c| c.call_id == id) {
                    c.ok = e.data["ok"].as_bool().unwrap_or(false);
                    c.result_bytes = e.data["bytes"].as_u64().unwrap_or(0);
                    c.duration_ms = e.data["duration_ms"].as_u64().unwrap_or(0);
                    c.error = e.data["error"].as_str().map(str::to_string);
                }
            }
            _ => {}
        }
    }
    calls
}
