//! Rows as both backends return them: the same columns and column types (times as RFC
//! 3339 text, JSON as text), read once here for SQLite and PostgreSQL alike.

use sqlx::Row;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;

use super::{
    ApprovalRow, EventRow, ExpiredRun, RunRow, RunStatus, Score, StoreError, StoredEvent, StoredFile,
    parse_timestamp,
};
use crate::types::Usage;
use serde_json::Value;

/// Typed column reads, implemented for each backend's row.
pub(super) trait Cols {
    fn text(&self, c: &str) -> Result<String, sqlx::Error>;
    fn opt_text(&self, c: &str) -> Result<Option<String>, sqlx::Error>;
    fn int(&self, c: &str) -> Result<i64, sqlx::Error>;
    fn float(&self, c: &str) -> Result<f64, sqlx::Error>;
    fn flag(&self, c: &str) -> Result<bool, sqlx::Error>;
    fn opt_flag(&self, c: &str) -> Result<Option<bool>, sqlx::Error>;
    fn bytes(&self, c: &str) -> Result<Vec<u8>, sqlx::Error>;
    fn opt_bytes(&self, c: &str) -> Result<Option<Vec<u8>>, sqlx::Error>;
}

macro_rules! cols {
    ($row:ty) => {
        impl Cols for $row {
            fn text(&self, c: &str) -> Result<String, sqlx::Error> {
                self.try_get(c)
            }
            fn opt_text(&self, c: &str) -> Result<Option<String>, sqlx::Error> {
                self.try_get(c)
            }
            fn int(&self, c: &str) -> Result<i64, sqlx::Error> {
                self.try_get(c)
            }
            fn float(&self, c: &str) -> Result<f64, sqlx::Error> {
                self.try_get(c)
            }
            fn flag(&self, c: &str) -> Result<bool, sqlx::Error> {
                self.try_get(c)
            }
            fn opt_flag(&self, c: &str) -> Result<Option<bool>, sqlx::Error> {
                self.try_get(c)
            }
            fn bytes(&self, c: &str) -> Result<Vec<u8>, sqlx::Error> {
                self.try_get(c)
            }
            fn opt_bytes(&self, c: &str) -> Result<Option<Vec<u8>>, sqlx::Error> {
                self.try_get(c)
            }
        }
    };
}

cols!(SqliteRow);
cols!(PgRow);

/// `SELECT <the columns [`run`] reads> FROM runs` and the rest of the query: named
/// columns, not `*`, so a statement prepared before a migration added columns still
/// returns what it was prepared for.
macro_rules! select_runs {
    ($rest:literal) => {
        concat!(
            "SELECT id, agent, parent_id, trigger_summary, status, termination, error, created_at, ",
            "started_at, finished_at, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, ",
            "reasoning_tokens, cost_usd, turns, tool_calls, final_text, skill_loads, source, trigger_kind, ",
            "actor, private, event_id FROM runs",
            $rest
        )
    };
}
pub(super) use select_runs;

/// Events inserted per statement.
pub(super) const EVENT_CHUNK: usize = 500;

fn json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(e.to_string()))
}

fn count(row: &impl Cols, c: &str) -> Result<u64, StoreError> {
    Ok(row.int(c)?.max(0) as u64)
}

fn status(text: String) -> Result<RunStatus, StoreError> {
    RunStatus::parse(&text).ok_or_else(|| StoreError::Corrupt(format!("unknown status '{text}'")))
}

fn optional_time(text: Option<String>) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
    text.as_deref().map(parse_timestamp).transpose()
}

/// A `runs` row read with [`select_runs`].
pub(super) fn run(row: &impl Cols) -> Result<RunRow, StoreError> {
    Ok(RunRow {
        id: row.text("id")?,
        agent: row.text("agent")?,
        parent_id: row.opt_text("parent_id")?,
        trigger_summary: row.text("trigger_summary")?,
        status: status(row.text("status")?)?,
        termination: row.opt_text("termination")?,
        error: row.opt_text("error")?,
        created_at: parse_timestamp(&row.text("created_at")?)?,
        started_at: optional_time(row.opt_text("started_at")?)?,
        finished_at: optional_time(row.opt_text("finished_at")?)?,
        usage: Usage {
            input_tokens: count(row, "input_tokens")?,
            output_tokens: count(row, "output_tokens")?,
            cached_input_tokens: count(row, "cached_input_tokens")?,
            cache_write_tokens: count(row, "cache_write_tokens")?,
            reasoning_tokens: count(row, "reasoning_tokens")?,
        },
        cost_usd: row.float("cost_usd")?,
        turns: count(row, "turns")? as u32,
        tool_calls: count(row, "tool_calls")? as u32,
        final_text: row.opt_text("final_text")?,
        skill_loads: json(&row.text("skill_loads")?)?,
        source: row.text("source")?,
        kind: row.text("trigger_kind")?,
        actor: row.opt_text("actor")?,
        private: row.flag("private")?,
        event_id: row.opt_text("event_id")?,
    })
}

/// `id, source, kind, dedupe_key, received_at, private, body, sealed` of `events`.
pub(super) fn event(row: &impl Cols) -> Result<EventRow, StoreError> {
    Ok(EventRow {
        id: row.text("id")?,
        source: row.text("source")?,
        kind: row.text("kind")?,
        dedupe_key: row.text("dedupe_key")?,
        received_at: parse_timestamp(&row.text("received_at")?)?,
        private: row.flag("private")?,
        body: json(&row.text("body")?)?,
        sealed: row.opt_bytes("sealed")?,
        outcome: None,
    })
}

/// `id, private, body` of `events`.
pub(super) fn stored_body(row: &impl Cols) -> Result<super::StoredBody, StoreError> {
    Ok(super::StoredBody {
        id: row.text("id")?,
        private: row.flag("private")?,
        body: json(&row.text("body")?)?,
    })
}

/// The columns [`event_record`] reads.
pub(super) const EVENT_RECORD_COLUMNS: &str =
    "id, source, kind, received_at, status, private, body, outcome, outcome_detail, duplicate_of";

/// An [`EventRecord`](super::EventRecord) from [`EVENT_RECORD_COLUMNS`].
pub(super) fn event_record(row: &impl Cols) -> Result<super::EventRecord, StoreError> {
    let body: Value = json(&row.text("body")?)?;
    let outcome = row
        .opt_text("outcome")?
        .and_then(|o| crate::types::event_outcome::OutcomeKind::parse(&o));
    let detail = match row.opt_text("outcome_detail")? {
        Some(text) => json(&text)?,
        None => Value::Null,
    };
    Ok(super::EventRecord {
        id: row.text("id")?,
        source: row.text("source")?,
        kind: row.text("kind")?,
        received_at: parse_timestamp(&row.text("received_at")?)?,
        status: row.text("status")?,
        private: row.flag("private")?,
        outcome,
        detail,
        duplicate_of: row.opt_text("duplicate_of")?,
        summary: body["summary"].as_str().map(str::to_string),
    })
}

/// The `(status, outcome, outcome_detail)` an event row is inserted with.
pub(super) fn settled(e: &EventRow) -> (&'static str, Option<&'static str>, Option<String>) {
    match &e.outcome {
        Some(o) => (
            "settled",
            Some(o.kind.as_str()),
            (!o.detail.is_null()).then(|| o.detail.to_string()),
        ),
        None => ("queued", None, None),
    }
}

/// `seq, run_id, at, kind, data` of `run_events`.
pub(super) fn stored_event(row: &impl Cols) -> Result<StoredEvent, StoreError> {
    Ok(StoredEvent {
        seq: row.int("seq")?,
        run_id: row.text("run_id")?,
        at: parse_timestamp(&row.text("at")?)?,
        kind: row.text("kind")?,
        data: json(&row.text("data")?)?,
    })
}

/// `id, agent, status, event_id, attempt` of `runs`.
pub(super) fn expired(row: &impl Cols) -> Result<ExpiredRun, StoreError> {
    Ok(ExpiredRun {
        id: row.text("id")?,
        agent: row.text("agent")?,
        status: status(row.text("status")?)?,
        event_id: row.opt_text("event_id")?,
        attempt: row.int("attempt")?.max(0) as u32,
    })
}

/// `file_id, meta, content` of `run_files`.
pub(super) fn file(row: &impl Cols) -> Result<StoredFile, StoreError> {
    Ok(StoredFile {
        id: row.text("file_id")?,
        meta: json(&row.text("meta")?)?,
        content: row.bytes("content")?,
    })
}

/// `kind, criterion, passed, score, explanation, source, cost_usd, at` of `run_scores`.
pub(super) fn score(row: &impl Cols) -> Result<Score, StoreError> {
    Ok(Score {
        kind: row.text("kind")?,
        criterion: row.text("criterion")?,
        passed: row.opt_flag("passed")?,
        score: row.float("score")?,
        explanation: row.opt_text("explanation")?,
        source: row.opt_text("source")?,
        cost_usd: row.float("cost_usd")?,
        at: parse_timestamp(&row.text("at")?)?,
    })
}

/// Which events were inserted; of a key repeated within one batch, the first wins.
pub(super) fn mark_new(chunk: &[EventRow], inserted: &[String]) -> Vec<bool> {
    let inserted: std::collections::HashSet<&str> = inserted.iter().map(String::as_str).collect();
    let mut seen = std::collections::HashSet::new();
    chunk
        .iter()
        .map(|e| inserted.contains(e.id.as_str()) && seen.insert(e.dedupe_key.as_str()))
        .collect()
}

/// The columns [`approval`] reads.
pub(super) const APPROVAL_COLUMNS: &str = "id, run_id, tool, call_id, requester, approvers, channel, message_ts, \
     checkpoint, created_at, deadline, decision, decided_by, decided_at";

pub(super) fn approval(r: &impl Cols) -> Result<ApprovalRow, StoreError> {
    let approvers: Vec<String> = serde_json::from_str(&r.text("approvers")?)
        .map_err(|e| StoreError::Corrupt(format!("bad approvers list: {e}")))?;
    Ok(ApprovalRow {
        id: r.text("id")?,
        run_id: r.text("run_id")?,
        tool: r.text("tool")?,
        call_id: r.text("call_id")?,
        requester: r.opt_text("requester")?,
        approvers,
        channel: r.opt_text("channel")?,
        message_ts: r.opt_text("message_ts")?,
        checkpoint: r.bytes("checkpoint")?,
        created_at: parse_timestamp(&r.text("created_at")?)?,
        deadline: parse_timestamp(&r.text("deadline")?)?,
        decision: r.opt_text("decision")?,
        decided_by: r.opt_text("decided_by")?,
        decided_at: r
            .opt_text("decided_at")?
            .as_deref()
            .map(parse_timestamp)
            .transpose()?,
    })
}

/// An `escalations` row.
pub(super) fn escalation(row: &impl Cols) -> Result<super::EscalationRow, StoreError> {
    Ok(super::EscalationRow {
        run_id: row.text("run_id")?,
        agent: row.text("agent")?,
        escalated_by: row.text("escalated_by")?,
        escalated_at: parse_timestamp(&row.text("escalated_at")?)?,
        channel: row.opt_text("channel")?,
        message_ts: row.opt_text("message_ts")?,
        resolved_by: row.opt_text("resolved_by")?,
        resolved_at: optional_time(row.opt_text("resolved_at")?)?,
    })
}

/// [`event_record`] and the Slack user its stored origin names.
pub(super) fn event_record_with_author(
    row: &impl Cols,
) -> Result<(super::EventRecord, Option<String>), StoreError> {
    let record = event_record(row)?;
    let body: Value = json(&row.text("body")?)?;
    let user = body["origin"]["user"].as_str().map(str::to_string);
    Ok((record, user))
}
