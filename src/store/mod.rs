//! Durable run records: a `runs` row per run with a compare-and-set state machine, and
//! an append-only `run_events` log written while the run progresses.

pub mod escalation;
pub mod event_log;
mod group_commit;
mod nodelay;
pub mod postgres;
mod prune;
mod rows;
pub mod sealed;
pub mod sqlite;

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

pub use crate::types::RunStatus;
use chrono::{DateTime, Utc};

use crate::types::event_outcome::EventOutcome;
use crate::types::{Privacy, RunOutcome, Usage};

pub use escalation::{EscalationRow, EscalationStore};
pub use event_log::{EventFilter, EventLog, EventRecord, StoredBody};
pub use postgres::PgStore;
pub use sealed::{SealedKind, SealedStore, SealedValue};
pub use sqlite::SqliteStore;

/// A run about to be queued.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub id: String,
    pub agent: String,
    pub parent_id: Option<String>,
    pub trigger_summary: String,
    /// The stored event that started it (server runs).
    pub event_id: Option<String>,
    /// The trigger's source (`slack`, `jira`, ...) and event type.
    pub source: String,
    pub kind: String,
    /// Who triggered it, as the source names them (a Slack user id, a Jira display
    /// name), when known.
    pub actor: Option<String>,
    /// From a private channel: the inspector shows metadata only.
    pub private: bool,
    /// The conversation it answers in (a Slack thread): one run of it at a time.
    pub thread_key: Option<String>,
}

/// An authenticated inbound event, as persisted before it is acknowledged.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub id: String,
    pub source: String,
    pub kind: String,
    /// Unique per logical event: a retry with the same key is a duplicate.
    pub dedupe_key: String,
    pub received_at: DateTime<Utc>,
    pub private: bool,
    /// The normalized event (JSON); for private events, metadata only.
    pub body: Value,
    /// A private event's whole content, sealed under `STEWARD_DATA_KEY`; erased when
    /// its runs end.
    pub sealed: Option<Vec<u8>>,
    /// Settled on arrival (ignored, refused): stored with this outcome and never
    /// routed. `None` for events to route.
    pub outcome: Option<EventOutcome>,
}

/// A virtual file of a run as stored: an id, metadata the store does not interpret,
/// and the bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredFile {
    pub id: String,
    pub meta: Value,
    pub content: Vec<u8>,
}

/// A run whose lease ran out (its process died).
#[derive(Debug, Clone)]
pub struct ExpiredRun {
    pub id: String,
    pub agent: String,
    pub status: RunStatus,
    pub event_id: Option<String>,
    pub attempt: u32,
}

/// An event waiting to be appended; `at` is when it happened, not when it was written.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub at: DateTime<Utc>,
    pub kind: String,
    /// The event's data as JSON text.
    pub data: String,
}

/// One row of `runs`.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub id: String,
    pub agent: String,
    pub parent_id: Option<String>,
    pub trigger_summary: String,
    pub status: RunStatus,
    pub termination: Option<String>,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub usage: Usage,
    pub cost_usd: f64,
    pub turns: u32,
    pub tool_calls: u32,
    pub final_text: Option<String>,
    pub skill_loads: BTreeMap<String, u32>,
    pub source: String,
    pub kind: String,
    pub actor: Option<String>,
    pub private: bool,
    /// The delivery that started it (server runs; see the event log).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
}

/// Which runs to list; every set field must match.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub agent: Option<String>,
    pub status: Option<RunStatus>,
    pub source: Option<String>,
    /// Created at or after.
    pub since: Option<DateTime<Utc>>,
    /// Created before.
    pub until: Option<DateTime<Utc>>,
    /// Case-insensitive substring of the trigger summary or the final answer.
    pub text: Option<String>,
    /// Only runs without a parent (workflows, not their subagent or judge runs).
    pub top_level: bool,
    pub limit: u32,
}

/// One entry of a run's event log.
#[derive(Debug, Clone, Serialize)]
pub struct StoredEvent {
    pub seq: i64,
    pub run_id: String,
    pub at: DateTime<Utc>,
    pub kind: String,
    pub data: Value,
}

/// One agent's token use over a period.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AgentUsage {
    pub agent: String,
    pub runs: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
}

impl AgentUsage {
    /// Share of input tokens read from the prompt cache.
    pub fn cache_hit(&self) -> f64 {
        if self.input_tokens == 0 {
            0.0
        } else {
            self.cached_input_tokens as f64 / self.input_tokens as f64
        }
    }
}

/// The query behind [`RunStore::usage_by_agent`], with `{since}` for the dialect's
/// placeholder. Sums are cast so both databases hand back 64-bit integers (PostgreSQL
/// sums BIGINT to NUMERIC).
pub(crate) fn usage_by_agent_sql(since: &str) -> String {
    format!(
        "SELECT agent, COUNT(*) AS runs, \
         CAST(COALESCE(SUM(input_tokens), 0) AS BIGINT) AS input_tokens, \
         CAST(COALESCE(SUM(cached_input_tokens), 0) AS BIGINT) AS cached_input_tokens, \
         CAST(COALESCE(SUM(cache_write_tokens), 0) AS BIGINT) AS cache_write_tokens, \
         CAST(COALESCE(SUM(output_tokens), 0) AS BIGINT) AS output_tokens, \
         COALESCE(SUM(cost_usd), 0.0) AS cost_usd \
         FROM runs WHERE created_at >= {since} AND parent_id IS NULL GROUP BY agent ORDER BY agent"
    )
}

/// A score given to a run: by the post-run judge, or by a person (a 👍 or 👎 on the
/// reply).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// `judge` or `human`.
    pub kind: String,
    /// The criterion judged, or `reaction` for a person's 👍/👎.
    pub criterion: String,
    pub passed: Option<bool>,
    /// 0 to 1 for the judge; 1 (👍) or -1 (👎) for people.
    pub score: f64,
    /// Why, when it may be stored (never for a private run).
    pub explanation: Option<String>,
    /// The judge model, or the person (a Slack user id).
    pub source: Option<String>,
    pub cost_usd: f64,
    pub at: DateTime<Utc>,
}

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("invalid database URL '{url}': {reason}")]
    Url { url: String, reason: String },
    #[error("cannot create database folder {path}: {source}")]
    Folder { path: String, source: std::io::Error },
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("invalid value: {0}")]
    Invalid(String),
    /// A run's files would pass their cap (`files::MAX_RUN_FILE_BYTES`).
    #[error("{0}")]
    Full(String),
    #[error("cannot migrate the database schema: {0}")]
    Migrate(String),
}

/// The one run whose id is `id` or starts with it, as git resolves commit prefixes:
/// `Ok(Err(why))` when no run or several match.
pub async fn resolve_run_id(store: &dyn Store, id: &str) -> Result<Result<String, String>, StoreError> {
    let ids = store.run_ids_with_prefix(id, 6).await?;
    Ok(match ids.as_slice() {
        [] => Err(format!("no run with id {id}")),
        [one] => Ok(one.clone()),
        _ if ids.iter().any(|i| i == id) => Ok(id.to_string()),
        many => Err(format!(
            "run id prefix {id} is ambiguous: {}{}",
            many.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
            if many.len() > 5 { ", ..." } else { "" }
        )),
    })
}

/// Run persistence, split by concern. SQLite is the embedded default; a Postgres
/// implementation shares these contracts (and the same test suite).
pub trait Store:
    RunStore
    + EventQueue
    + EventLog
    + FileStore
    + SettingStore
    + ScoreStore
    + ApprovalStore
    + EscalationStore
    + SealedStore
{
}

impl<
    T: RunStore
        + EventQueue
        + EventLog
        + FileStore
        + SettingStore
        + ScoreStore
        + ApprovalStore
        + EscalationStore
        + SealedStore,
> Store for T
{
}

/// Scores of runs (post-run evals, human feedback).
#[async_trait]
pub trait ScoreStore: Send + Sync {
    /// Adds `score`; `false` when it was not added because the person already has a
    /// human score of that criterion for the run (one each: a double-click or a
    /// replayed click counts once).
    async fn add_score(&self, run_id: &str, score: &Score) -> Result<bool, StoreError>;
    /// In the order they were given.
    async fn run_scores(&self, run_id: &str) -> Result<Vec<Score>, StoreError>;
    /// The run whose reply was posted as Slack message `ts`, if any.
    async fn run_by_reply_ts(&self, ts: &str) -> Result<Option<String>, StoreError>;
    /// Sets the explanation of the `criterion` score `source` gave run `run_id` (what
    /// a person wrote after a 👎); false when there is no such score.
    async fn explain_score(
        &self,
        run_id: &str,
        criterion: &str,
        source: &str,
        explanation: &str,
    ) -> Result<bool, StoreError>;
}

/// Runs and their event logs: creation, state transitions, leases, the record.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Inserts a run in `queued`.
    async fn create_run(&self, run: &NewRun) -> Result<(), StoreError>;
    /// Moves `id` from `from` to `to`; false when the run was not in `from`.
    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus) -> Result<bool, StoreError>;
    /// `queued` → `running` only while fewer than `max` runs of `agent` are running
    /// (when `max` is set) and, when `thread` is set, no run of that conversation is
    /// running and none queued before this one (one transaction, serialized across
    /// replicas); `false` means wait.
    async fn start_within(
        &self,
        id: &str,
        agent: &str,
        max: Option<u32>,
        thread: Option<&str>,
    ) -> Result<bool, StoreError>;
    /// Runs of `agent` started by `actor` since `since` (per-person rate limits).
    async fn runs_since(&self, agent: &str, actor: &str, since: DateTime<Utc>) -> Result<u64, StoreError>;
    /// What `agent`'s runs created since `since` cost, in US dollars.
    async fn cost_since(&self, agent: &str, since: DateTime<Utc>) -> Result<f64, StoreError>;
    /// Tokens and cost of the top-level runs created since `since`, per agent (their
    /// subagents' usage included), by agent name.
    async fn usage_by_agent(&self, since: DateTime<Utc>) -> Result<Vec<AgentUsage>, StoreError>;
    /// Ends a run that is in `from`; false when it was not.
    async fn finish_run(
        &self,
        id: &str,
        from: RunStatus,
        outcome: &RunOutcome,
        privacy: Privacy,
    ) -> Result<bool, StoreError>;
    /// Appends events to the run's log atomically, in order (one group commit).
    async fn append_events(&self, run_id: &str, events: &[NewEvent]) -> Result<(), StoreError>;
    /// Appends one event now.
    async fn append_event(&self, run_id: &str, kind: &str, data: &Value) -> Result<(), StoreError> {
        let event = NewEvent {
            at: Utc::now(),
            kind: kind.to_string(),
            data: data.to_string(),
        };
        self.append_events(run_id, std::slice::from_ref(&event)).await
    }
    async fn get_run(&self, id: &str) -> Result<Option<RunRow>, StoreError>;
    /// Deletes runs that ended before `before` (and whose subagent runs did too), with
    /// their steps, files, scores, approvals and escalations; at most [`PRUNE_BATCH`]
    /// runs a call. How many runs went.
    async fn prune_runs(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
    /// Marks run `id` private now (it came to hold a private conversation), so a run
    /// that never finishes by itself (its process died) is still shown and kept as
    /// private. Never unmarks.
    async fn mark_private(&self, id: &str) -> Result<(), StoreError>;
    /// Most recent first.
    async fn list_runs(&self, limit: u32) -> Result<Vec<RunRow>, StoreError>;
    /// Runs matching `filter`, most recent first, at most `filter.limit`.
    async fn query_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError>;
    /// Direct subagent runs of `parent_id`, oldest first.
    async fn child_runs(&self, parent_id: &str) -> Result<Vec<RunRow>, StoreError>;
    /// Ids of runs that start with `prefix`, at most `limit`, in id order.
    async fn run_ids_with_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<String>, StoreError>;
    /// In the order they were written.
    async fn run_events(&self, run_id: &str) -> Result<Vec<StoredEvent>, StoreError>;
    /// Sets a run's lease (the time after which it is presumed dead) for the process
    /// `owner`. False when another process took the run over (its lease ran out while
    /// this one stalled): the caller must stop working on it.
    async fn renew_lease(&self, run_id: &str, until: DateTime<Utc>, owner: &str) -> Result<bool, StoreError>;
    /// Server runs that are queued or running with a lease that ran out at or before `now`
    /// (a decided approval frees its run with a lease ending at the decision).
    async fn expired_runs(&self, now: DateTime<Utc>) -> Result<Vec<ExpiredRun>, StoreError>;
    /// Takes over a run from [`expired_runs`](Self::expired_runs): sets its lease to
    /// `until` only if it is still queued or running with a lease that ran out at or
    /// before `now`. Exactly one of several replicas reconciling the same run gets
    /// true; the others must leave it alone.
    async fn take_expired(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        owner: &str,
    ) -> Result<bool, StoreError>;
    /// Whether the run made a side-effecting tool call.
    async fn has_side_effects(&self, run_id: &str) -> Result<bool, StoreError>;
    /// Puts a run back in the queue for another attempt (its files dropped, its lease
    /// kept: the caller took it with [`take_expired`](Self::take_expired)); false when
    /// it was no longer in `from`.
    async fn requeue(&self, run_id: &str, from: RunStatus) -> Result<bool, StoreError>;
}

/// Virtual files of runs, stored as opaque metadata plus bytes.
#[async_trait]
pub trait FileStore: Send + Sync {
    /// Stores a new virtual file of a run. `meta` is opaque to the store (the files
    /// layer owns its shape).
    async fn put_file(&self, run_id: &str, file: &StoredFile) -> Result<(), StoreError>;
    /// Replaces a file's metadata (read tracking).
    async fn update_file(&self, run_id: &str, file_id: &str, meta: &Value) -> Result<(), StoreError>;
    /// Every file of a run, in id order.
    async fn run_files(&self, run_id: &str) -> Result<Vec<StoredFile>, StoreError>;
    /// The files of the other top-level, non-private runs of a conversation
    /// (`thread_key`), oldest run first, each run's in id order, with their run ids.
    async fn conversation_files(
        &self,
        thread_key: &str,
        except_run: &str,
    ) -> Result<Vec<(String, StoredFile)>, StoreError>;
}

/// One claimed event and the runs it starts, for [`EventQueue::route_events`].
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    pub event_id: &'a str,
    pub runs: &'a [NewRun],
    /// What became of the event; `None` leaves it to the queue state (routed or
    /// unmatched).
    pub outcome: Option<&'a EventOutcome>,
}

/// The durable queue of acknowledged trigger events.
#[async_trait]
pub trait EventQueue: Send + Sync {
    /// Inserts events in one transaction; for each, true if new, false if its dedupe
    /// key was seen before (a retry). A retry is recorded too, as its own `duplicate`
    /// event pointing at the first delivery (metadata only). Events with an
    /// [`EventRow::outcome`] are stored settled, never routed.
    async fn insert_events(&self, events: &[EventRow]) -> Result<Vec<bool>, StoreError>;
    /// Takes up to `limit` queued events for routing (marks them `claimed`). A claimed
    /// event leaves the queue for good only through [`EventQueue::route_event`].
    async fn claim_events(&self, limit: u32) -> Result<Vec<EventRow>, StoreError>;
    /// In one transaction: creates `runs` (queued, started by this event, leased until
    /// `lease_until`) and marks the claimed event `routed`, or `unmatched` when `runs`
    /// is empty. False (and nothing written) when the event was not claimed.
    async fn route_event(
        &self,
        event_id: &str,
        runs: &[NewRun],
        lease_until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        // The outcome the queue state means, so listing by outcome finds the event.
        use crate::types::event_outcome::{EventOutcome, OutcomeKind};
        let outcome = if runs.is_empty() {
            EventOutcome::new(OutcomeKind::NoAgent, serde_json::json!({}))
        } else {
            let started: Vec<_> = runs
                .iter()
                .map(|r| serde_json::json!({"id": r.id, "agent": r.agent}))
                .collect();
            EventOutcome::new(OutcomeKind::Started, serde_json::json!({"runs": started}))
        };
        let routed = self
            .route_events(
                &[Route {
                    event_id,
                    runs,
                    outcome: Some(&outcome),
                }],
                lease_until,
            )
            .await?;
        Ok(routed.first().copied().unwrap_or(false))
    }
    /// Takes a claimed event out of the queue with `outcome` and no run.
    async fn settle_event(&self, event_id: &str, outcome: &EventOutcome) -> Result<bool, StoreError> {
        let routed = self
            .route_events(
                &[Route {
                    event_id,
                    runs: &[],
                    outcome: Some(outcome),
                }],
                Utc::now(),
            )
            .await?;
        Ok(routed.first().copied().unwrap_or(false))
    }
    /// [`EventQueue::route_event`] for several events in one transaction (one commit,
    /// one turn on SQLite's single writer, for a whole claimed batch). For each route
    /// in order, whether it was written: an event no longer claimed is skipped.
    async fn route_events(
        &self,
        routes: &[Route<'_>],
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<bool>, StoreError>;
    /// Puts events claimed before `claimed_before` that have no run back in the queue
    /// (their router died between claiming and routing); returns how many. Routing
    /// takes milliseconds, so a claim older than a lease belongs to a dead process,
    /// whichever replica it was.
    async fn requeue_orphan_events(&self, claimed_before: DateTime<Utc>) -> Result<u64, StoreError>;
    async fn get_event(&self, id: &str) -> Result<Option<EventRow>, StoreError>;
    /// Drops an event's sealed content once none of its runs is queued or running.
    async fn erase_sealed(&self, id: &str) -> Result<(), StoreError>;
    /// How many deliveries are stored (every status; retries, recorded as
    /// `duplicate`, left out).
    async fn count_events(&self) -> Result<u64, StoreError>;
    /// Work waiting: events not yet routed, and runs queued but not started.
    async fn queue_depth(&self) -> Result<(u64, u64), StoreError>;
    /// Housekeeping kept off the acknowledgement path, run by the server about once a
    /// second (SQLite: a passive WAL checkpoint, which never blocks writers). Nothing by
    /// default.
    async fn maintain(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Runs parked for a person's decision on a tool call.
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Parks a running run (`running` → `waiting`, lease dropped) with its approval
    /// request, in one transaction; `false` when the run was not running.
    async fn suspend_run(&self, approval: &ApprovalRow) -> Result<bool, StoreError>;
    /// Where the request was posted (for updating it once decided).
    async fn set_approval_message(&self, id: &str, channel: &str, ts: &str) -> Result<(), StoreError>;
    async fn get_approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError>;
    /// The run's most recent approval request.
    async fn latest_approval(&self, run_id: &str) -> Result<Option<ApprovalRow>, StoreError>;
    /// Records the first decision on an open request and queues its run again (lease
    /// already expired, so the next reconcile on any replica resumes it). `false` when
    /// it was decided before: a second click changes nothing.
    async fn decide_approval(
        &self,
        id: &str,
        decision: &str,
        by: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Open requests whose deadline passed.
    async fn overdue_approvals(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError>;
}

/// Small key/value settings (cron progress, the Notion setup window).
#[async_trait]
pub trait SettingStore: Send + Sync {
    async fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError>;
    async fn set_setting(&self, key: &str, value: &str) -> Result<(), StoreError>;
    /// Adds `line` to the newline-separated list under `key` in one statement, so two
    /// writers at once both land: unless it is there already or the list holds
    /// `max_lines`. `line` must be non-empty and hold no newline. Whether it was added.
    async fn add_setting_line(&self, key: &str, line: &str, max_lines: u32) -> Result<bool, StoreError>;
    /// Removes `key` and returns what it held, in one statement: nothing added between
    /// a read and a clear is lost.
    async fn take_setting(&self, key: &str) -> Result<Option<String>, StoreError>;
}

/// What [`SettingStore::add_setting_line`] takes as a line: non-empty, no newline
/// (the list is newline-separated).
pub(crate) fn check_setting_line(line: &str) -> Result<(), StoreError> {
    if line.is_empty() || line.contains('\n') {
        return Err(StoreError::Invalid(
            "a setting line is empty or holds a newline".into(),
        ));
    }
    Ok(())
}

/// `url` with its password (if any) replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// A request for a person to approve a tool call, and the run's state to resume from.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRow {
    /// Goes in the buttons' value; checked against `run_id` on a click.
    pub id: String,
    pub run_id: String,
    pub tool: String,
    pub call_id: String,
    /// The Slack user who triggered the run (may decide).
    pub requester: Option<String>,
    /// Slack user ids who may decide as well.
    pub approvers: Vec<String>,
    pub channel: Option<String>,
    pub message_ts: Option<String>,
    /// The run's checkpoint (JSON; sealed with the data key for private runs).
    pub checkpoint: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub deadline: DateTime<Utc>,
    /// `approved`, `denied` or `timed_out`.
    pub decision: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
}

/// The time `d` ago (the earliest time there is, when `d` reaches past it).
pub fn ago(d: std::time::Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| Utc::now().checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// A time as SQLite stores it: RFC 3339 UTC with milliseconds, which sorts and compares
/// correctly as text.
/// Most runs one [`RunStore::prune_runs`] call deletes: a long-idle store catches up
/// over several calls instead of holding the writer for one long transaction.
pub const PRUNE_BATCH: u32 = 500;

/// Run statuses that have ended (a run in any other is never pruned).
pub const ENDED: &str = "'succeeded', 'failed', 'interrupted', 'cancelled'";

pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Reads a stored [`timestamp`].
pub fn parse_timestamp(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| StoreError::Corrupt(format!("bad timestamp '{text}': {e}")))
}

/// A migration failure as one line; a database migrated by a newer steward (a schema
/// version this binary does not know) says so, since the fix is to run that version.
pub(crate) fn migrate_error(
    e: sqlx::migrate::MigrateError,
    migrator: &sqlx::migrate::Migrator,
) -> StoreError {
    match e {
        sqlx::migrate::MigrateError::VersionMissing(version) => {
            let known = migrator.iter().map(|m| m.version).max().unwrap_or(0);
            StoreError::Migrate(format!(
                "the database is at schema version {version}, newer than this steward knows (up to {known}): \
                 it was upgraded by a newer steward; run that version, or point DATABASE_URL at another database"
            ))
        }
        e => StoreError::Migrate(e.to_string()),
    }
}
