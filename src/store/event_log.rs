//! The event log: every delivery's outcome, as people look it up (`steward events`,
//! `/api/events`, the inspector's Events page).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::StoreError;
use crate::types::event_outcome::OutcomeKind;

/// Which events to list, most recent first.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub source: Option<String>,
    pub outcome: Option<OutcomeKind>,
    /// Events whose outcome names this agent (a run it started, a reason it did not).
    pub agent: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub limit: u32,
}

/// One delivery and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventRecord {
    pub id: String,
    pub source: String,
    pub kind: String,
    pub received_at: DateTime<Utc>,
    /// The queue state (`queued`, `claimed`, `routed`, `unmatched`, `settled`).
    pub status: String,
    pub private: bool,
    /// `None` while the event waits to be routed (and for events stored before
    /// outcomes were recorded).
    pub outcome: Option<OutcomeKind>,
    /// Run ids and agents, reasons; never message text.
    pub detail: Value,
    /// For a duplicate: the first delivery's event id.
    pub duplicate_of: Option<String>,
    /// The trigger's one-line summary (metadata only for private events).
    pub summary: Option<String>,
}

impl EventRecord {
    /// The outcome's name, or what the queue state says when none is recorded yet.
    pub fn outcome_name(&self) -> &str {
        match (self.outcome, self.status.as_str()) {
            (Some(k), _) => k.as_str(),
            (None, "queued" | "claimed") => "pending",
            (None, "routed") => "started",
            (None, "unmatched") => "no_agent",
            (None, other) => other,
        }
    }

    /// One line on why: the reason, the agents' reasons, or the runs started.
    pub fn why(&self) -> String {
        if let Some(reason) = self.detail["reason"].as_str() {
            return reason.to_string();
        }
        if let Some(first) = &self.duplicate_of {
            return format!("retry of {first}");
        }
        if let Some(agents) = self.detail["agents"].as_object() {
            return agents
                .iter()
                .map(|(a, why)| format!("{a}: {}", why.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("; ");
        }
        if let Some(runs) = self.detail["runs"].as_array() {
            return runs
                .iter()
                .map(|r| {
                    format!(
                        "{} ({})",
                        r["agent"].as_str().unwrap_or_default(),
                        r["id"].as_str().unwrap_or_default()
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
        }
        String::new()
    }
}

/// A delivery's stored trigger, for replaying it through a config (`triggers test`).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredBody {
    pub id: String,
    pub private: bool,
    /// The serialized `TriggerEvent` (metadata only when private).
    pub body: Value,
}

/// Reading and pruning the log.
#[async_trait]
pub trait EventLog: Send + Sync {
    /// Events matching `filter`, most recent first.
    async fn list_events(&self, filter: &EventFilter) -> Result<Vec<EventRecord>, StoreError>;
    /// One event by id.
    async fn event_record(&self, id: &str) -> Result<Option<EventRecord>, StoreError>;
    /// The stored trigger bodies of the `limit` most recent deliveries that reached
    /// routing (not those settled on arrival: ignored, refused, duplicates), or of the
    /// one with `id`; most recent first. A private event's body is its metadata only.
    async fn event_bodies(&self, id: Option<&str>, limit: u32) -> Result<Vec<StoredBody>, StoreError>;
    /// Deliveries of Slack message `ts` in `channel` (a mention or message it was, a
    /// reaction on it), most recent first, with the Slack user each came from as
    /// stored. Private events keep their channel and ts, so they are found too.
    async fn events_about_message(
        &self,
        channel: &str,
        ts: &str,
        limit: u32,
    ) -> Result<Vec<(EventRecord, Option<String>)>, StoreError>;
    /// Deletes events received before `before` whose runs (if any) are all finished;
    /// returns how many.
    async fn prune_events(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// The SQL condition and binds shared by both backends' `list_events`: `?`
/// placeholders, or `$n` numbered from 1 when `numbered` (PostgreSQL).
pub(super) fn where_clause(filter: &EventFilter, numbered: bool) -> (String, Vec<String>) {
    let mut cond = Vec::new();
    let mut binds = Vec::new();
    let mut push = |sql: &str, value: String| {
        binds.push(value);
        cond.push(if numbered {
            sql.replace('?', &format!("${}", binds.len()))
        } else {
            sql.to_string()
        });
    };
    if let Some(s) = &filter.source {
        push("source = ?", s.clone());
    }
    if let Some(o) = filter.outcome {
        // One index range (`events_outcome`), in id order: rows routed before outcomes
        // were recorded got theirs from their queue state in a migration.
        push("outcome = ?", o.as_str().to_string());
    }
    if let Some(a) = &filter.agent {
        // Agent names are plain (letters, digits, `-`, `_`): the quoted name is a JSON
        // string or key in the detail, never part of a longer one.
        push("outcome_detail LIKE ?", format!("%\"{a}\"%"));
    }
    if let Some(t) = filter.since {
        push("received_at >= ?", super::timestamp(t));
    }
    let sql = if cond.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", cond.join(" AND "))
    };
    (sql, binds)
}

/// `event_bodies`' query on either backend: `?` placeholders, or `$1` when `numbered`.
pub(super) fn bodies_sql(id: bool, limit: u32, numbered: bool) -> String {
    let by_id = match (id, numbered) {
        (false, _) => "",
        (true, false) => " AND id = ?",
        (true, true) => " AND id = $1",
    };
    format!(
        "SELECT id, private, body FROM events WHERE status <> 'settled'{by_id} ORDER BY id DESC LIMIT {}",
        limit.max(1)
    )
}

/// `events_about_message`' query (`?`, or `$1` when `numbered`) and its one bind: the
/// stored origin names the channel before the ts (serde writes fields in order).
pub(super) fn about_message_sql(
    channel: &str,
    ts: &str,
    limit: u32,
    numbered: bool,
) -> Option<(String, String)> {
    // Both come from a parsed link; anything else could be a LIKE wildcard.
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    if !plain(channel) || !plain(ts) {
        return None;
    }
    let p = if numbered { "$1" } else { "?" };
    Some((
        format!(
            "SELECT {} FROM events WHERE source = 'slack' AND body LIKE {p} ORDER BY id DESC LIMIT {}",
            super::rows::EVENT_RECORD_COLUMNS,
            limit.max(1)
        ),
        format!("%\"channel\":\"{channel}\"%\"ts\":\"{ts}\"%"),
    ))
}
