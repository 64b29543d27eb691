//! The embedded SQLite store (WAL, created on first start).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::SqlSafeStr;
use sqlx::migrate::{Migrate, Migration, MigrationType, Migrator};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Sqlite};

use super::escalation::{self, EscalationRow, EscalationStore};
use super::group_commit::Appender;
use super::rows;
use super::sealed::{self, SealedStore, SealedValue};
use super::{
    ApprovalRow, ApprovalStore, EventFilter, EventLog, EventQueue, EventRecord, EventRow, ExpiredRun,
    FileStore, NewEvent, NewRun, Route, RunFilter, RunRow, RunStatus, RunStore, Score, ScoreStore,
    SettingStore, StoreError, StoredBody, StoredEvent, StoredFile, timestamp,
};
use chrono::{DateTime, Utc};

use crate::types::{Privacy, RunOutcome};

/// Schema migrations, applied in order once each by sqlx's migrator (recorded in
/// `_sqlx_migrations` with checksums, so an edited migration is refused). Embedded with
/// `include_str!` rather than `sqlx::migrate!` to keep sqlx's proc-macro crates out of
/// the build; the effect is the same.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "init", include_str!("migrations/0001_init.sql")),
    (2, "files", include_str!("migrations/0002_files.sql")),
    (3, "skill loads", include_str!("migrations/0003_skill_loads.sql")),
    (4, "events", include_str!("migrations/0004_events.sql")),
    (5, "run trigger", include_str!("migrations/0005_run_trigger.sql")),
    (6, "run scores", include_str!("migrations/0006_run_scores.sql")),
    (7, "sealed", include_str!("migrations/0007_sealed.sql")),
    (8, "claimed at", include_str!("migrations/0008_claimed_at.sql")),
    (9, "approvals", include_str!("migrations/0009_approvals.sql")),
    (10, "thread key", include_str!("migrations/0010_thread_key.sql")),
    (11, "lease owner", include_str!("migrations/0011_lease_owner.sql")),
    (
        12,
        "event outcomes",
        include_str!("migrations/0012_event_outcomes.sql"),
    ),
    (
        13,
        "outcomes of older events",
        include_str!("migrations/0013_outcomes_of_older_events.sql"),
    ),
    (14, "escalations", include_str!("migrations/0014_escalations.sql")),
    (
        15,
        "partial outcome index",
        include_str!("migrations/0015_partial_outcome_index.sql"),
    ),
    (
        16,
        "one human score per person",
        include_str!("migrations/0016_one_human_score_per_person.sql"),
    ),
];

fn migrator() -> Migrator {
    let migrations = MIGRATIONS
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                (*description).into(),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect();
    Migrator::with_migrations(migrations)
}

/// A SQLite-backed [`Store`].
///
/// Reads go through a pool of connections; every write goes through `writer`, a pool of
/// one. SQLite admits one writer at a time, and a second connection that finds the lock
/// taken waits in SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20... ms between
/// tries rather than waking when the lock frees: under load those sleeps were the p99
/// of webhook acknowledgements (18, 33, 53, 103 ms). Queued on one connection, writers
/// wake as soon as the previous one is done.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    writer: SqlitePool,
    /// Group-commits run events across runs ([`super::group_commit`]).
    appender: Appender,
}

impl SqliteStore {
    /// Opens (creating file and folder if needed) and migrates the database at `url`,
    /// e.g. `sqlite://data/steward.db`.
    pub async fn connect(url: &str) -> Result<SqliteStore, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Url {
                url: url.to_string(),
                reason: e.to_string(),
            })?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL + NORMAL: durable across process crashes, one fsync per checkpoint.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            // No checkpoint inside a commit: the connection whose commit crossed the
            // threshold would copy the WAL into the database (and fsync) before its
            // commit returned, stalling every acknowledgement waiting on it. `maintain`
            // checkpoints instead, off that path; a closing pool checkpoints too.
            .pragma("wal_autocheckpoint", "0")
            .foreign_keys(true);
        let in_memory = options.get_filename().to_string_lossy().contains(":memory:");
        if let Some(parent) = options.get_filename().parent()
            && !parent.as_os_str().is_empty()
            && !in_memory
        {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::Folder {
                path: parent.display().to_string(),
                source,
            })?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.clone())
            .await?;
        // An in-memory database exists per connection: there, one pool does both.
        let writer = if in_memory {
            pool.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await?
        };
        let appender = Appender::start(writer.clone());
        let store = SqliteStore {
            pool,
            writer,
            appender,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Opens a database file by path.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::connect(&format!("sqlite://{}", path.display())).await
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        let migrator = migrator();
        self.adopt_legacy_migrations(&migrator).await?;
        migrator
            .run(&self.writer)
            .await
            .map_err(|e| super::migrate_error(e, &migrator))
    }

    /// Databases made before the switch to sqlx's migrator recorded their migrations in
    /// `schema_migrations`: record those as applied in `_sqlx_migrations`, once, so
    /// nothing runs twice and nothing is lost.
    async fn adopt_legacy_migrations(&self, migrator: &Migrator) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        let legacy: Option<String> = sqlx::query_scalar(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
        )
        .fetch_optional(&mut *tx)
        .await?;
        if legacy.is_none() {
            return Ok(());
        }
        tx.ensure_migrations_table("_sqlx_migrations")
            .await
            .map_err(|e| StoreError::Migrate(e.to_string()))?;
        let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM schema_migrations")
            .fetch_all(&mut *tx)
            .await?;
        for m in migrator.iter().filter(|m| applied.contains(&m.version)) {
            sqlx::query(
                "INSERT OR IGNORE INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
                 VALUES (?, ?, TRUE, ?, 0)",
            )
            .bind(m.version)
            .bind(m.description.as_ref())
            .bind(m.checksum.as_ref())
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DROP TABLE schema_migrations")
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

#[async_trait]
impl RunStore for SqliteStore {
    async fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO runs (id, agent, parent_id, trigger_summary, status, created_at, event_id, source, trigger_kind, actor, private, thread_key) \
             VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&run.id)
        .bind(&run.agent)
        .bind(&run.parent_id)
        .bind(&run.trigger_summary)
        .bind(timestamp(Utc::now()))
        .bind(&run.event_id)
        .bind(&run.source)
        .bind(&run.kind)
        .bind(&run.actor)
        .bind(run.private)
        .bind(&run.thread_key)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn start_within(
        &self,
        id: &str,
        agent: &str,
        max: Option<u32>,
        thread: Option<&str>,
    ) -> Result<bool, StoreError> {
        // One writer connection: the checks and the update cannot interleave with
        // another replica's (SQLite serializes writers on the file).
        let done = sqlx::query(
            "UPDATE runs SET status = 'running', started_at = ? WHERE id = ? AND status = 'queued' \
             AND (? IS NULL OR (SELECT COUNT(*) FROM runs WHERE agent = ? AND status = 'running') < ?) \
             AND (? IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_key = ? AND r.id <> ? \
                  AND (r.status = 'running' OR (r.status = 'queued' AND r.id < ?))))",
        )
        .bind(timestamp(Utc::now()))
        .bind(id)
        .bind(max.map(i64::from))
        .bind(agent)
        .bind(max.map(i64::from))
        .bind(thread)
        .bind(thread)
        .bind(id)
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn runs_since(&self, agent: &str, actor: &str, since: DateTime<Utc>) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM runs WHERE agent = ? AND actor = ? AND created_at >= ? AND parent_id IS NULL",
        )
        .bind(agent)
        .bind(actor)
        .bind(timestamp(since))
        .fetch_one(&self.pool)
        .await?;
        Ok(n.max(0) as u64)
    }

    async fn usage_by_agent(&self, since: DateTime<Utc>) -> Result<Vec<super::AgentUsage>, StoreError> {
        use sqlx::Row;
        // The only text put into the statement is the dialect's placeholder.
        let rows = sqlx::query(sqlx::AssertSqlSafe(super::usage_by_agent_sql("?")))
            .bind(timestamp(since))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(super::AgentUsage {
                    agent: r.try_get("agent")?,
                    runs: r.try_get::<i64, _>("runs")? as u64,
                    input_tokens: r.try_get::<i64, _>("input_tokens")? as u64,
                    cached_input_tokens: r.try_get::<i64, _>("cached_input_tokens")? as u64,
                    cache_write_tokens: r.try_get::<i64, _>("cache_write_tokens")? as u64,
                    output_tokens: r.try_get::<i64, _>("output_tokens")? as u64,
                    cost_usd: r.try_get("cost_usd")?,
                })
            })
            .collect()
    }

    async fn cost_since(&self, agent: &str, since: DateTime<Utc>) -> Result<f64, StoreError> {
        let cost: Option<f64> =
            sqlx::query_scalar("SELECT SUM(cost_usd) FROM runs WHERE agent = ? AND created_at >= ?")
                .bind(agent)
                .bind(timestamp(since))
                .fetch_one(&self.pool)
                .await?;
        Ok(cost.unwrap_or(0.0))
    }

    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus) -> Result<bool, StoreError> {
        let started = (to == RunStatus::Running).then(|| timestamp(Utc::now()));
        let done = sqlx::query(
            "UPDATE runs SET status = ?, started_at = COALESCE(?, started_at) WHERE id = ? AND status = ?",
        )
        .bind(to.as_str())
        .bind(started)
        .bind(id)
        .bind(from.as_str())
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn finish_run(
        &self,
        id: &str,
        from: RunStatus,
        finish: &RunOutcome,
        privacy: Privacy,
    ) -> Result<bool, StoreError> {
        // Errors can quote the input (a script that throws the message text).
        let error = privacy.wrap_opt(finish.error.as_deref()).map(|p| p.to_string());
        let final_text = privacy
            .wrap_opt(finish.final_text.as_deref())
            .map(|p| p.to_string());
        let done = sqlx::query(
            "UPDATE runs SET status = ?, termination = ?, error = ?, final_text = ?, turns = ?, tool_calls = ?, \
             input_tokens = ?, output_tokens = ?, cached_input_tokens = ?, cache_write_tokens = ?, \
             reasoning_tokens = ?, cost_usd = ?, skill_loads = ?, finished_at = ?, private = MAX(private, ?) \
             WHERE id = ? AND status = ?",
        )
        .bind(finish.status().as_str())
        .bind(finish.termination.as_str())
        .bind(error)
        .bind(final_text)
        .bind(finish.turns as i64)
        .bind(finish.tool_calls as i64)
        .bind(finish.usage.input_tokens as i64)
        .bind(finish.usage.output_tokens as i64)
        .bind(finish.usage.cached_input_tokens as i64)
        .bind(finish.usage.cache_write_tokens as i64)
        .bind(finish.usage.reasoning_tokens as i64)
        .bind(finish.cost_usd)
        .bind(serde_json::to_string(&finish.skill_loads).map_err(|e| StoreError::Corrupt(e.to_string()))?)
        .bind(timestamp(Utc::now()))
        // A run that read a private conversation ends private.
        .bind(privacy.is_private() as i64)
        .bind(id)
        .bind(from.as_str())
        .execute(&self.writer)
        .await?;
        if done.rows_affected() == 1 {
            // An ended run never resumes: its checkpoints (the whole conversation, sealed
            // or not) are erased rather than kept beside the key for ever.
            sqlx::query("UPDATE approvals SET checkpoint = ? WHERE run_id = ?")
                .bind(Vec::<u8>::new())
                .bind(id)
                .execute(&self.writer)
                .await?;
        }
        Ok(done.rows_affected() == 1)
    }

    async fn append_events(&self, run_id: &str, events: &[NewEvent]) -> Result<(), StoreError> {
        self.appender.append(&self.writer, run_id, events).await
    }

    async fn prune_runs(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        use sqlx::Row;
        let cut = timestamp(before);
        let found = sqlx::query(sqlx::AssertSqlSafe(super::prune::trees_sql("?")))
            .bind(&cut)
            .fetch_all(&self.writer)
            .await?;
        let members = found
            .iter()
            .map(|r| {
                Ok(super::prune::Member {
                    id: r.try_get("id")?,
                    root: r.try_get("root")?,
                    depth: r.try_get("depth")?,
                    status: r.try_get("status")?,
                    finished_at: r.try_get("finished_at")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let doomed = super::prune::deletable(members, &cut);
        if doomed.is_empty() {
            return Ok(0);
        }
        let mut tx = self.writer.begin().await?;
        for id in &doomed {
            for table in super::prune::DEPENDENTS {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DELETE FROM {table} WHERE run_id = ?"
                )))
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query("DELETE FROM runs WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(doomed.len() as u64)
    }

    async fn mark_private(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET private = 1 WHERE id = ?")
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn get_run(&self, id: &str) -> Result<Option<RunRow>, StoreError> {
        let row = sqlx::query(rows::select_runs!(" WHERE id = ?"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::run).transpose()
    }

    async fn run_ids_with_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<String>, StoreError> {
        let ids = sqlx::query_scalar("SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT ?")
            .bind(prefix.chars().count() as i64)
            .bind(prefix)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
        Ok(ids)
    }

    async fn list_runs(&self, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(rows::select_runs!(" ORDER BY created_at DESC, id DESC LIMIT ?"))
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::run).collect()
    }

    async fn query_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(rows::select_runs!(" WHERE 1 = 1"));
        if let Some(agent) = &filter.agent {
            q.push(" AND agent = ").push_bind(agent.clone());
        }
        if let Some(status) = filter.status {
            q.push(" AND status = ").push_bind(status.as_str());
        }
        if let Some(source) = &filter.source {
            q.push(" AND source = ").push_bind(source.clone());
        }
        if filter.top_level {
            q.push(" AND parent_id IS NULL");
        }
        if let Some(since) = filter.since {
            q.push(" AND created_at >= ").push_bind(timestamp(since));
        }
        if let Some(until) = filter.until {
            q.push(" AND created_at < ").push_bind(timestamp(until));
        }
        if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
            // LIKE is case-insensitive for ASCII in SQLite; wildcards in the text are
            // escaped so they match literally.
            let pattern = format!(
                "%{}%",
                text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
            );
            q.push(" AND (trigger_summary LIKE ")
                .push_bind(pattern.clone())
                .push(" ESCAPE '\\' OR COALESCE(final_text, '') LIKE ")
                .push_bind(pattern)
                .push(" ESCAPE '\\')");
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(filter.limit));
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(rows::run).collect()
    }

    async fn child_runs(&self, parent_id: &str) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(rows::select_runs!(" WHERE parent_id = ? ORDER BY created_at, id"))
            .bind(parent_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::run).collect()
    }

    async fn run_events(&self, run_id: &str) -> Result<Vec<StoredEvent>, StoreError> {
        let rows =
            sqlx::query("SELECT seq, run_id, at, kind, data FROM run_events WHERE run_id = ? ORDER BY seq")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(rows::stored_event).collect()
    }

    async fn renew_lease(&self, run_id: &str, until: DateTime<Utc>, owner: &str) -> Result<bool, StoreError> {
        // A run nobody has renewed yet belongs to its creator, who claims it here.
        let done = sqlx::query(
            "UPDATE runs SET lease_until = ?, lease_owner = ? WHERE id = ? \
             AND (lease_owner IS NULL OR lease_owner = ?)",
        )
        .bind(timestamp(until))
        .bind(owner)
        .bind(run_id)
        .bind(owner)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn take_expired(
        &self,
        run_id: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        owner: &str,
    ) -> Result<bool, StoreError> {
        // One statement: a second replica's update finds the new lease and matches nothing.
        let done = sqlx::query(
            "UPDATE runs SET lease_until = ?, lease_owner = ? WHERE id = ? \
             AND status IN ('queued', 'running') AND (lease_until IS NULL OR lease_until <= ?)",
        )
        .bind(timestamp(until))
        .bind(owner)
        .bind(run_id)
        .bind(timestamp(now))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn expired_runs(&self, now: DateTime<Utc>) -> Result<Vec<ExpiredRun>, StoreError> {
        let now = timestamp(now);
        let rows = sqlx::query(
            "SELECT id, agent, status, event_id, attempt FROM runs WHERE event_id IS NOT NULL \
             AND status IN ('queued', 'running') AND (lease_until IS NULL OR lease_until <= ?) ORDER BY created_at",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::expired).collect()
    }

    async fn has_side_effects(&self, run_id: &str) -> Result<bool, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM run_events WHERE run_id = ? AND kind IN ('tool_call', 'reply') \
             AND json_extract(data, '$.side_effect') = 1",
        )
        .bind(run_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(n > 0)
    }

    async fn requeue(&self, run_id: &str, from: RunStatus) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        let done = sqlx::query(
            "UPDATE runs SET status = 'queued', attempt = attempt + 1 WHERE id = ? AND status = ?",
        )
        .bind(run_id)
        .bind(from.as_str())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 1 {
            sqlx::query("DELETE FROM run_files WHERE run_id = ?")
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl FileStore for SqliteStore {
    async fn put_file(&self, run_id: &str, file: &StoredFile) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO run_files (run_id, file_id, meta, content) VALUES (?, ?, ?, ?)")
            .bind(run_id)
            .bind(&file.id)
            .bind(file.meta.to_string())
            .bind(&file.content)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn update_file(&self, run_id: &str, file_id: &str, meta: &Value) -> Result<(), StoreError> {
        sqlx::query("UPDATE run_files SET meta = ? WHERE run_id = ? AND file_id = ?")
            .bind(meta.to_string())
            .bind(run_id)
            .bind(file_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn run_files(&self, run_id: &str) -> Result<Vec<StoredFile>, StoreError> {
        let rows = sqlx::query("SELECT file_id, meta, content FROM run_files WHERE run_id = ? ORDER BY CAST(substr(file_id, 3) AS INTEGER)")
            .bind(run_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::file).collect()
    }

    async fn conversation_files(
        &self,
        thread_key: &str,
        except_run: &str,
    ) -> Result<Vec<(String, StoredFile)>, StoreError> {
        let rows = sqlx::query(
            "SELECT f.run_id, f.file_id, f.meta, f.content FROM run_files f JOIN runs r ON r.id = f.run_id \
             WHERE r.thread_key = ? AND r.private = 0 AND r.parent_id IS NULL AND r.id <> ? \
             ORDER BY r.created_at, r.id, CAST(substr(f.file_id, 3) AS INTEGER)",
        )
        .bind(thread_key)
        .bind(except_run)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((rows::Cols::text(r, "run_id")?, rows::file(r)?)))
            .collect()
    }
}

#[async_trait]
impl EventQueue for SqliteStore {
    async fn insert_events(&self, events: &[EventRow]) -> Result<Vec<bool>, StoreError> {
        // One statement is atomic on its own: batches that fit one chunk skip the
        // BEGIN/COMMIT round trips, which matters on the ack path.
        let out = if events.len() <= rows::EVENT_CHUNK {
            let inserted = insert_event_chunk(&self.writer, events).await?;
            rows::mark_new(events, &inserted)
        } else {
            let mut tx = self.writer.begin().await?;
            let mut out = Vec::with_capacity(events.len());
            for chunk in events.chunks(rows::EVENT_CHUNK) {
                let inserted = insert_event_chunk(&mut *tx, chunk).await?;
                out.extend(rows::mark_new(chunk, &inserted));
            }
            tx.commit().await?;
            out
        };
        // Retries are recorded in one more statement per batch, after the batch's own
        // commit (a retry storm must not slow acknowledgements much); a failure costs
        // only the records. A cron slot every replica offers is coordination, not a
        // delivery: not recorded.
        let retries: Vec<&EventRow> = events
            .iter()
            .zip(&out)
            .filter(|(e, new)| !**new && e.source != "cron")
            .map(|(e, _)| e)
            .collect();
        for chunk in retries.chunks(rows::EVENT_CHUNK) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "WITH v(id, source, kind, dedupe_key, received_at, private, first_key) AS (",
            );
            q.push_values(chunk, |mut row, e| {
                row.push_bind(e.id.clone())
                    .push_bind(e.source.clone())
                    .push_bind(e.kind.clone())
                    .push_bind(format!("{}#retry#{}", e.dedupe_key, e.id))
                    .push_bind(timestamp(e.received_at))
                    .push_bind(e.private)
                    .push_bind(e.dedupe_key.clone());
            });
            q.push(
                ") INSERT INTO events (id, source, kind, dedupe_key, received_at, status, private, body, \
                 outcome, duplicate_of) \
                 SELECT v.id, v.source, v.kind, v.dedupe_key, v.received_at, 'settled', v.private, '{}', \
                 'duplicate', e.id FROM v JOIN events e ON e.dedupe_key = v.first_key WHERE true \
                 ON CONFLICT(dedupe_key) DO NOTHING",
            );
            if let Err(err) = q.build().persistent(false).execute(&self.writer).await {
                tracing::warn!(error = %err, "cannot record duplicate deliveries");
            }
        }
        Ok(out)
    }

    async fn maintain(&self) -> Result<(), StoreError> {
        // PASSIVE copies what no reader still needs and never waits for a lock.
        sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn claim_events(&self, limit: u32) -> Result<Vec<EventRow>, StoreError> {
        let rows = sqlx::query(
            "UPDATE events SET status = 'claimed', claimed_at = ? WHERE id IN \
             (SELECT id FROM events WHERE status = 'queued' ORDER BY received_at, id LIMIT ?) \
             RETURNING id, source, kind, dedupe_key, received_at, private, body, sealed",
        )
        .bind(timestamp(Utc::now()))
        .bind(limit as i64)
        .fetch_all(&self.writer)
        .await?;
        let mut events: Vec<EventRow> = rows.iter().map(rows::event).collect::<Result<_, _>>()?;
        events.sort_by(|a, b| (&a.received_at, &a.id).cmp(&(&b.received_at, &b.id)));
        Ok(events)
    }

    async fn route_events(
        &self,
        routes: &[Route<'_>],
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<bool>, StoreError> {
        if routes.is_empty() {
            return Ok(Vec::new());
        }
        // Three statements for the whole batch rather than two per event: each
        // statement is a wait for the database, and a router waiting 130 times per
        // batch behind a thousand running runs was the slowest part of a burst.
        let mut tx = self.writer.begin().await?;
        let mut update = QueryBuilder::<Sqlite>::new("UPDATE events SET status = CASE WHEN id IN (");
        let mut routed = update.separated(", ");
        // Never an event id: keeps the list valid SQL when no event starts a run.
        routed.push_bind("");
        for route in routes.iter().filter(|r| !r.runs.is_empty()) {
            routed.push_bind(route.event_id);
        }
        update.push(") THEN 'routed' ELSE 'unmatched' END");
        push_outcomes(&mut update, routes);
        update.push(" WHERE status = 'claimed' AND id IN (");
        let mut all = update.separated(", ");
        for route in routes {
            all.push_bind(route.event_id);
        }
        update.push(") RETURNING id");
        let moved: Vec<String> = update
            .build_query_scalar()
            .persistent(false)
            .fetch_all(&mut *tx)
            .await?;
        let moved: std::collections::HashSet<&str> = moved.iter().map(String::as_str).collect();
        let written: Vec<bool> = routes.iter().map(|r| moved.contains(r.event_id)).collect();
        let runs: Vec<(&str, &NewRun)> = routes
            .iter()
            .filter(|r| moved.contains(r.event_id))
            .flat_map(|r| r.runs.iter().map(move |run| (r.event_id, run)))
            .collect();
        let (now, lease_until) = (timestamp(Utc::now()), timestamp(lease_until));
        // 13 parameters a run: 1,000 runs stay under every backend's limit.
        for chunk in runs.chunks(1000) {
            let mut insert = QueryBuilder::<Sqlite>::new(
                "INSERT INTO runs (id, agent, parent_id, trigger_summary, status, created_at, event_id, \
                 lease_until, source, trigger_kind, actor, private, thread_key) ",
            );
            insert.push_values(chunk, |mut row, (event_id, run)| {
                row.push_bind(run.id.as_str())
                    .push_bind(run.agent.as_str())
                    .push_bind(run.parent_id.as_deref())
                    .push_bind(run.trigger_summary.as_str())
                    .push_bind("queued")
                    .push_bind(now.as_str())
                    .push_bind(*event_id)
                    .push_bind(lease_until.as_str())
                    .push_bind(run.source.as_str())
                    .push_bind(run.kind.as_str())
                    .push_bind(run.actor.as_deref())
                    .push_bind(run.private)
                    .push_bind(run.thread_key.as_deref());
            });
            insert.build().persistent(false).execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(written)
    }

    async fn requeue_orphan_events(&self, claimed_before: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE events SET status = 'queued', claimed_at = NULL WHERE status = 'claimed' \
             AND COALESCE(claimed_at, '') < ? \
             AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.event_id = events.id)",
        )
        .bind(timestamp(claimed_before))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }

    async fn get_event(&self, id: &str) -> Result<Option<EventRow>, StoreError> {
        let row = sqlx::query(
            "SELECT id, source, kind, dedupe_key, received_at, private, body, sealed FROM events WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(rows::event).transpose()
    }

    async fn erase_sealed(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE events SET sealed = NULL WHERE id = ? AND sealed IS NOT NULL AND NOT EXISTS \
             (SELECT 1 FROM runs WHERE runs.event_id = ? AND runs.status IN ('queued', 'running', 'waiting'))",
        )
        .bind(id)
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    async fn queue_depth(&self) -> Result<(u64, u64), StoreError> {
        let (events, runs): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM events WHERE status IN ('queued', 'claimed')), \
                    (SELECT COUNT(*) FROM runs WHERE status = 'queued')",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((events.max(0) as u64, runs.max(0) as u64))
    }

    async fn count_events(&self) -> Result<u64, StoreError> {
        let n: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE outcome IS NULL OR outcome <> 'duplicate'")
                .fetch_one(&self.pool)
                .await?;
        Ok(n.max(0) as u64)
    }
}

#[async_trait]
impl ScoreStore for SqliteStore {
    async fn add_score(&self, run_id: &str, score: &Score) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO run_scores (run_id, kind, criterion, passed, score, explanation, source, cost_usd, at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(run_id)
        .bind(&score.kind)
        .bind(&score.criterion)
        .bind(score.passed)
        .bind(score.score)
        .bind(&score.explanation)
        .bind(&score.source)
        .bind(score.cost_usd)
        .bind(timestamp(score.at))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn explain_score(
        &self,
        run_id: &str,
        criterion: &str,
        source: &str,
        explanation: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE run_scores SET explanation = ? WHERE run_id = ? AND criterion = ? AND source = ?",
        )
        .bind(explanation)
        .bind(run_id)
        .bind(criterion)
        .bind(source)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn run_scores(&self, run_id: &str) -> Result<Vec<Score>, StoreError> {
        let rows = sqlx::query(
            "SELECT kind, criterion, passed, score, explanation, source, cost_usd, at FROM run_scores \
             WHERE run_id = ? ORDER BY id",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::score).collect()
    }

    async fn run_by_reply_ts(&self, ts: &str) -> Result<Option<String>, StoreError> {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT run_id FROM run_events WHERE kind = 'reply_sent' AND json_extract(data, '$.ts') = ? \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(ts)
        .fetch_optional(&self.pool)
        .await?;
        Ok(id)
    }
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn suspend_run(&self, a: &ApprovalRow) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        let parked = sqlx::query(
            "UPDATE runs SET status = 'waiting', lease_until = NULL WHERE id = ? AND status = 'running'",
        )
        .bind(&a.run_id)
        .execute(&mut *tx)
        .await?;
        if parked.rows_affected() != 1 {
            return Ok(false);
        }
        let approvers = serde_json::to_string(&a.approvers).unwrap_or_else(|_| "[]".into());
        sqlx::query(
            "INSERT INTO approvals (id, run_id, tool, call_id, requester, approvers, channel, message_ts, checkpoint, \
             created_at, deadline) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&a.id)
        .bind(&a.run_id)
        .bind(&a.tool)
        .bind(&a.call_id)
        .bind(&a.requester)
        .bind(approvers)
        .bind(&a.channel)
        .bind(&a.message_ts)
        .bind(&a.checkpoint)
        .bind(timestamp(a.created_at))
        .bind(timestamp(a.deadline))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn set_approval_message(&self, id: &str, channel: &str, ts: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE approvals SET channel = ?, message_ts = ? WHERE id = ?")
            .bind(channel)
            .bind(ts)
            .bind(id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn get_approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let sql = format!("SELECT {} FROM approvals WHERE id = ?", rows::APPROVAL_COLUMNS);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::approval).transpose()
    }

    async fn latest_approval(&self, run_id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM approvals WHERE run_id = ? ORDER BY created_at DESC, id DESC LIMIT 1",
            rows::APPROVAL_COLUMNS
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::approval).transpose()
    }

    async fn decide_approval(
        &self,
        id: &str,
        decision: &str,
        by: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        let decided = sqlx::query(
            "UPDATE approvals SET decision = ?, decided_by = ?, decided_at = ? WHERE id = ? AND decision IS NULL",
        )
        .bind(decision)
        .bind(by)
        .bind(timestamp(at))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if decided.rows_affected() != 1 {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE runs SET status = 'queued', lease_until = ? \
             WHERE id = (SELECT run_id FROM approvals WHERE id = ?) AND status = 'waiting'",
        )
        .bind(timestamp(at))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn overdue_approvals(&self, now: DateTime<Utc>) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM approvals WHERE decision IS NULL AND deadline < ? ORDER BY deadline",
        )
        .bind(timestamp(now))
        .fetch_all(&self.pool)
        .await?)
    }
}

#[async_trait]
impl SettingStore for SqliteStore {
    async fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT value FROM settings WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn set_setting(&self, key: &str, value: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(value)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn take_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("DELETE FROM settings WHERE key = ? RETURNING value")
                .bind(key)
                .fetch_optional(&self.writer)
                .await?,
        )
    }

    async fn add_setting_line(&self, key: &str, line: &str, max_lines: u32) -> Result<bool, StoreError> {
        super::check_setting_line(line)?;
        // One statement: the check and the append cannot interleave with another's.
        let done = sqlx::query(concat!(
            "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = ",
            "CASE WHEN settings.value = '' THEN excluded.value ELSE settings.value || char(10) || excluded.value END ",
            "WHERE instr(char(10) || settings.value || char(10), char(10) || excluded.value || char(10)) = 0 ",
            "AND (CASE WHEN settings.value = '' THEN 0 ",
            "ELSE length(settings.value) - length(replace(settings.value, char(10), '')) + 1 END) < ?3"
        ))
        .bind(key)
        .bind(line)
        .bind(i64::from(max_lines))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}

/// `INSERT ... ON CONFLICT(dedupe_key) DO NOTHING RETURNING id` for a chunk of events;
/// returns the ids inserted.
/// `, outcome = CASE id ... END, outcome_detail = CASE id ... END` for the routes that
/// carry an outcome (nothing when none does).
fn push_outcomes(update: &mut QueryBuilder<Sqlite>, routes: &[Route<'_>]) {
    let with: Vec<(&str, &crate::types::event_outcome::EventOutcome)> = routes
        .iter()
        .filter_map(|r| Some((r.event_id, r.outcome?)))
        .collect();
    if with.is_empty() {
        return;
    }
    update.push(", outcome = CASE id");
    for (id, o) in &with {
        update.push(" WHEN ").push_bind(id.to_string());
        update.push(" THEN ").push_bind(o.kind.as_str());
    }
    update.push(" ELSE outcome END, outcome_detail = CASE id");
    for (id, o) in &with {
        update.push(" WHEN ").push_bind(id.to_string());
        update.push(" THEN ").push_bind(o.detail.to_string());
    }
    update.push(" ELSE outcome_detail END");
}

async fn insert_event_chunk<'e, E>(executor: E, chunk: &[EventRow]) -> Result<Vec<String>, sqlx::Error>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    let mut q = QueryBuilder::<Sqlite>::new(
        "INSERT INTO events (id, source, kind, dedupe_key, received_at, status, private, body, sealed, \
         outcome, outcome_detail) ",
    );
    q.push_values(chunk, |mut row, e| {
        let (status, outcome, detail) = rows::settled(e);
        row.push_bind(e.id.clone())
            .push_bind(e.source.clone())
            .push_bind(e.kind.clone())
            .push_bind(e.dedupe_key.clone())
            .push_bind(timestamp(e.received_at))
            .push_bind(status)
            .push_bind(e.private)
            .push_bind(e.body.to_string())
            .push_bind(e.sealed.clone())
            .push_bind(outcome)
            .push_bind(detail);
    });
    q.push(" ON CONFLICT(dedupe_key) DO NOTHING RETURNING id");
    q.build_query_scalar().fetch_all(executor).await
}

#[async_trait]
impl EventLog for SqliteStore {
    async fn list_events(&self, filter: &EventFilter) -> Result<Vec<EventRecord>, StoreError> {
        let (cond, binds) = super::event_log::where_clause(filter, false);
        let sql = format!(
            "SELECT {} FROM events {cond} ORDER BY id DESC LIMIT {}",
            rows::EVENT_RECORD_COLUMNS,
            filter.limit.max(1)
        );
        // Built from constants and placeholders only: every value is bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for b in binds {
            q = q.bind(b);
        }
        let found = q.fetch_all(&self.pool).await?;
        found.iter().map(rows::event_record).collect()
    }

    async fn event_record(&self, id: &str) -> Result<Option<EventRecord>, StoreError> {
        let sql = format!("SELECT {} FROM events WHERE id = ?", rows::EVENT_RECORD_COLUMNS);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::event_record).transpose()
    }

    async fn event_bodies(&self, id: Option<&str>, limit: u32) -> Result<Vec<StoredBody>, StoreError> {
        let sql = super::event_log::bodies_sql(id.is_some(), limit, false);
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(id) = id {
            q = q.bind(id);
        }
        let found = q.fetch_all(&self.pool).await?;
        found.iter().map(rows::stored_body).collect()
    }

    async fn events_about_message(
        &self,
        channel: &str,
        ts: &str,
        limit: u32,
    ) -> Result<Vec<(EventRecord, Option<String>)>, StoreError> {
        let Some((sql, pattern)) = super::event_log::about_message_sql(channel, ts, limit, false) else {
            return Ok(Vec::new());
        };
        let found = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(pattern)
            .fetch_all(&self.pool)
            .await?;
        found.iter().map(rows::event_record_with_author).collect()
    }

    async fn prune_events(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "DELETE FROM events WHERE received_at < ? AND status NOT IN ('queued', 'claimed') \
             AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.event_id = events.id \
             AND runs.status IN ('queued', 'running', 'waiting'))",
        )
        .bind(timestamp(before))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected())
    }
}

#[async_trait]
impl EscalationStore for SqliteStore {
    async fn escalate(&self, row: &EscalationRow) -> Result<bool, StoreError> {
        let done = sqlx::query(escalation::INSERT)
            .bind(&row.run_id)
            .bind(&row.agent)
            .bind(&row.escalated_by)
            .bind(timestamp(row.escalated_at))
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn set_escalation_message(&self, run_id: &str, channel: &str, ts: &str) -> Result<(), StoreError> {
        sqlx::query(escalation::SET_MESSAGE)
            .bind(channel)
            .bind(ts)
            .bind(run_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    async fn escalation(&self, run_id: &str) -> Result<Option<EscalationRow>, StoreError> {
        let row = sqlx::query(escalation::SELECT)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::escalation).transpose()
    }

    async fn resolve_escalation(
        &self,
        run_id: &str,
        by: &str,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(escalation::RESOLVE)
            .bind(by)
            .bind(timestamp(at))
            .bind(run_id)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl SealedStore for SqliteStore {
    async fn sealed_values(&self) -> Result<Vec<SealedValue>, StoreError> {
        sqlx::query(sealed::ERASE_UNREAD).execute(&self.writer).await?;
        let events = sqlx::query_as(sealed::EVENTS).fetch_all(&self.pool).await?;
        let checkpoints = sqlx::query_as(sealed::CHECKPOINTS).fetch_all(&self.pool).await?;
        Ok(sealed::values(events, checkpoints))
    }

    async fn replace_sealed(&self, value: &SealedValue, with: &[u8]) -> Result<bool, StoreError> {
        let done = sqlx::query(sealed::replace_statement(value.kind))
            .bind(with)
            .bind(&value.id)
            .bind(&value.bytes)
            .execute(&self.writer)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// The file an `sqlite:` URL (or plain path) names; `None` for an in-memory database
/// or a URL that does not parse.
pub fn file_of(url: &str) -> Option<PathBuf> {
    let options = SqliteConnectOptions::from_str(url).ok()?;
    let name = options.get_filename();
    (!name.to_string_lossy().contains(":memory:")).then(|| name.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Termination;
    use crate::types::Usage;

    async fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("nested/steward.db"))
            .await
            .unwrap();
        (dir, store)
    }

    fn new_run(id: &str) -> NewRun {
        NewRun {
            thread_key: None,
            id: id.into(),
            agent: "a".into(),
            parent_id: None,
            trigger_summary: "t".into(),
            ..NewRun::default()
        }
    }

    #[tokio::test]
    async fn status_changes_by_compare_and_set() {
        let (_dir, s) = store().await;
        s.create_run(&new_run("r1")).await.unwrap();
        assert!(
            s.transition("r1", RunStatus::Queued, RunStatus::Running)
                .await
                .unwrap()
        );
        assert!(
            !s.transition("r1", RunStatus::Queued, RunStatus::Running)
                .await
                .unwrap()
        );
        let finish = RunOutcome {
            final_text: Some("hi".into()),
            turns: 2,
            tool_calls: 1,
            skill_loads: [("slack-formatting".to_string(), 2)].into(),
            ..RunOutcome::new("r1")
        };
        let recorded = Privacy::Recorded;
        assert!(
            s.finish_run("r1", RunStatus::Running, &finish, recorded)
                .await
                .unwrap()
        );
        assert!(
            !s.finish_run("r1", RunStatus::Running, &finish, recorded)
                .await
                .unwrap()
        );
        let row = s.get_run("r1").await.unwrap().unwrap();
        assert_eq!(row.status, RunStatus::Succeeded);
        assert_eq!(row.final_text.as_deref(), Some("hi"));
        assert_eq!(row.skill_loads["slack-formatting"], 2);
        assert!(row.started_at.is_some() && row.finished_at.is_some());
    }

    #[tokio::test]
    async fn events_and_totals_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        {
            let s = SqliteStore::open(&path).await.unwrap();
            s.create_run(&new_run("r1")).await.unwrap();
            s.transition("r1", RunStatus::Queued, RunStatus::Running)
                .await
                .unwrap();
            let usage = Usage {
                input_tokens: 20,
                output_tokens: 4,
                cached_input_tokens: 8,
                ..Usage::default()
            };
            let finish = RunOutcome {
                turns: 1,
                usage,
                cost_usd: 0.75,
                ..RunOutcome::new("r1").stopped(Termination::MaxTurns, Some("reached max_turns (1)".into()))
            };
            let private = Privacy::Private;
            assert!(
                s.finish_run("r1", RunStatus::Running, &finish, private)
                    .await
                    .unwrap()
            );
            s.append_event("r1", "tool_call", &serde_json::json!({"name": "x"}))
                .await
                .unwrap();
            s.append_event("r1", "tool_result", &serde_json::json!({"ok": true}))
                .await
                .unwrap();
        }
        let s = SqliteStore::open(&path).await.unwrap();
        let row = s.get_run("r1").await.unwrap().unwrap();
        assert_eq!(row.usage.input_tokens, 20);
        assert_eq!(row.usage.cached_input_tokens, 8);
        assert!((row.cost_usd - 0.75).abs() < 1e-9);
        assert_eq!(row.termination.as_deref(), Some("max_turns"));
        // A private run's error is stored as its length only.
        assert_eq!(row.error.as_deref(), Some("[private: 21 chars]"));
        let events = s.run_events("r1").await.unwrap();
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["tool_call", "tool_result"]);
        assert_eq!(events[0].data["name"], "x");
        assert_eq!(s.list_runs(10).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_database_from_before_sqlx_migrations_is_adopted_not_rerun() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        {
            let s = SqliteStore::open(&path).await.unwrap();
            s.create_run(&new_run("r1")).await.unwrap();
            // Make it look like a database of the earlier layout (migrations 1-4).
            sqlx::raw_sql(
                "DROP INDEX runs_agent; ALTER TABLE runs DROP COLUMN source; \
                 ALTER TABLE runs DROP COLUMN trigger_kind; ALTER TABLE runs DROP COLUMN actor; \
                 ALTER TABLE runs DROP COLUMN private; DROP TABLE run_scores; ALTER TABLE events DROP COLUMN sealed; \
                 ALTER TABLE events DROP COLUMN claimed_at; DROP TABLE approvals; \
                 DROP INDEX runs_thread; ALTER TABLE runs DROP COLUMN thread_key; \
                 ALTER TABLE runs DROP COLUMN lease_owner; \
                 DROP INDEX events_outcome; ALTER TABLE events DROP COLUMN outcome; \
                 ALTER TABLE events DROP COLUMN outcome_detail; ALTER TABLE events DROP COLUMN duplicate_of; \
                 DROP TABLE _sqlx_migrations; \
                 CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL); \
                 INSERT INTO schema_migrations VALUES (1, 'x'), (2, 'x'), (3, 'x'), (4, 'x');",
            )
            .execute(&s.pool)
            .await
            .unwrap();
        }
        let s = SqliteStore::open(&path).await.unwrap();
        assert!(s.get_run("r1").await.unwrap().is_some(), "the data survives");
        let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&s.pool)
            .await
            .unwrap();
        // 1-4 adopted, the later ones applied on top.
        let all: Vec<i64> = MIGRATIONS.iter().map(|(v, _, _)| *v).collect();
        assert_eq!(versions, all);
        let legacy: Option<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE name = 'schema_migrations'")
                .fetch_optional(&s.pool)
                .await
                .unwrap();
        assert_eq!(legacy, None);
        // Opening again is a no-op.
        drop(s);
        SqliteStore::open(&path).await.unwrap();
    }
}
