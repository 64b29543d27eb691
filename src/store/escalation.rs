//! Escalations: a person asked for a human from a run's answer or failure notice
//! ("Get help from a person"), and an owner later marked it resolved. One per run: the
//! first click records it, later ones find it recorded.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use super::StoreError;

/// A run's escalation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EscalationRow {
    pub run_id: String,
    pub agent: String,
    /// The Slack user who clicked.
    pub escalated_by: String,
    pub escalated_at: DateTime<Utc>,
    /// Where the call for help was posted (set once it is).
    pub channel: Option<String>,
    pub message_ts: Option<String>,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait EscalationStore: Send + Sync {
    /// Records `row`; false (nothing written) when the run was escalated already.
    async fn escalate(&self, row: &EscalationRow) -> Result<bool, StoreError>;
    /// Where the call for help went, so "Resolved" can update it.
    async fn set_escalation_message(&self, run_id: &str, channel: &str, ts: &str) -> Result<(), StoreError>;
    async fn escalation(&self, run_id: &str) -> Result<Option<EscalationRow>, StoreError>;
    /// Marks it resolved by `by`; false when there is none or it is resolved already.
    async fn resolve_escalation(&self, run_id: &str, by: &str, at: DateTime<Utc>)
    -> Result<bool, StoreError>;
}

/// The statements, with `?` placeholders ([`numbered`] for PostgreSQL).
pub(super) const INSERT: &str = "INSERT INTO escalations (run_id, agent, escalated_by, escalated_at) \
     VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING";
pub(super) const SET_MESSAGE: &str = "UPDATE escalations SET channel = ?, message_ts = ? WHERE run_id = ?";
pub(super) const SELECT: &str = "SELECT run_id, agent, escalated_by, escalated_at, channel, message_ts, \
     resolved_by, resolved_at FROM escalations WHERE run_id = ?";
pub(super) const RESOLVE: &str = "UPDATE escalations SET resolved_by = ?, resolved_at = ? \
     WHERE run_id = ? AND resolved_at IS NULL";

/// `sql` with its `?` placeholders numbered `$1`, `$2`, ... (none of these statements
/// has a `?` inside a literal).
pub(super) fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_numbered_in_order() {
        assert_eq!(
            super::numbered("UPDATE t SET a = ?, b = ? WHERE c = ?"),
            "UPDATE t SET a = $1, b = $2 WHERE c = $3"
        );
    }
}
