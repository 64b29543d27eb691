//! The PostgreSQL store, for several replicas on one database: the same contracts as
//! the SQLite store (the store suite runs on both), with `FOR UPDATE SKIP LOCKED`
//! claims. Times are RFC 3339 text and JSON is text, as in SQLite, so rows read the
//! same on both.

use std::str::FromStr;

use async_trait::async_trait;
use serde_json::Value;
use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Postgres, QueryBuilder};

use super::escalation::{self, EscalationRow, EscalationStore};
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
    (1, "init", include_str!("migrations/postgres/0001_init.sql")),
    (2, "sealed", include_str!("migrations/postgres/0002_sealed.sql")),
    (
        3,
        "claimed at",
        include_str!("migrations/postgres/0003_claimed_at.sql"),
    ),
    (
        4,
        "approvals",
        include_str!("migrations/postgres/0004_approvals.sql"),
    ),
    (
        5,
        "thread key",
        include_str!("migrations/postgres/0005_thread_key.sql"),
    ),
    (
        6,
        "lease owner",
        include_str!("migrations/postgres/0006_lease_owner.sql"),
    ),
    (
        7,
        "event outcomes",
        include_str!("migrations/postgres/0007_event_outcomes.sql"),
    ),
    (
        8,
        "outcomes of older events",
        include_str!("migrations/postgres/0008_outcomes_of_older_events.sql"),
    ),
    (
        9,
        "escalations",
        include_str!("migrations/postgres/0009_escalations.sql"),
    ),
    (
        10,
        "partial outcome index",
        include_str!("migrations/postgres/0010_partial_outcome_index.sql"),
    ),
    (
        11,
        "one human score per person",
        include_str!("migrations/postgres/0011_one_human_score_per_person.sql"),
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

/// A PostgreSQL-backed [`Store`](super::Store).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host/db`) and migrates the schema.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        PgStore::connect_with(Self::options(url)?).await
    }

    /// Connects with everything in its own schema (created if missing): one database
    /// serves several stores, as the tests do.
    pub async fn connect_in_schema(url: &str, schema: &str) -> Result<PgStore, StoreError> {
        if !schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(StoreError::Url {
                url: super::redact_url(url),
                reason: format!("schema '{schema}' must be letters, digits and _"),
            });
        }
        let admin = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_with(Self::options(url)?)
            .await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE SCHEMA IF NOT EXISTS {schema}"
        )))
        .execute(&admin)
        .await?;
        admin.close().await;
        PgStore::connect_with(Self::options(url)?.options([("search_path", schema)])).await
    }

    fn options(url: &str) -> Result<PgConnectOptions, StoreError> {
        PgConnectOptions::from_str(url).map_err(|e| StoreError::Url {
            url: super::redact_url(url),
            reason: e.to_string(),
        })
    }

    async fn connect_with(options: PgConnectOptions) -> Result<PgStore, StoreError> {
        // One direct connection first: a refused or unauthorized connection is reported
        // at once with its reason, instead of as a pool timeout.
        let probe = <sqlx::PgConnection as sqlx::Connection>::connect_with(&options).await?;
        sqlx::Connection::close(probe).await?;
        // Over TCP (not a Unix socket), each new connection gets TCP_NODELAY (see
        // `nodelay`): without it every group commit waits ~40 ms for a delayed ACK.
        let port = (!options.get_host().starts_with('/')).then(|| options.get_port());
        let pool = PgPoolOptions::new()
            .max_connections(10)
            // An unreachable database is a clear error at start, not a long hang.
            .acquire_timeout(std::time::Duration::from_secs(10))
            .after_connect(move |_conn, _meta| {
                Box::pin(async move {
                    if let Some(port) = port {
                        super::nodelay::set_on_sockets_to(port);
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        let migrator = migrator();
        migrator
            .run(&pool)
            .await
            .map_err(|e| super::migrate_error(e, &migrator))?;
        Ok(PgStore { pool })
    }
}

#[async_trait]
impl RunStore for PgStore {
    async fn create_run(&self, run: &NewRun) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO runs (id, agent, parent_id, trigger_summary, status, created_at, event_id, source, trigger_kind, actor, private, thread_key) \
             VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7, $8, $9, $10, $11)",
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
        .execute(&self.pool)
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
        // Advisory locks (per agent, per conversation; taken in that order, held to
        // commit) serialize the checks and the update across replicas; READ COMMITTED
        // alone would let two both see room.
        let mut tx = self.pool.begin().await?;
        if max.is_some() {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                .bind(format!("steward.concurrency.{agent}"))
                .execute(&mut *tx)
                .await?;
        }
        if let Some(thread) = thread {
            sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
                .bind(format!("steward.thread.{thread}"))
                .execute(&mut *tx)
                .await?;
        }
        let done = sqlx::query(
            "UPDATE runs SET status = 'running', started_at = $1 WHERE id = $2 AND status = 'queued' \
             AND ($3::bigint IS NULL OR (SELECT COUNT(*) FROM runs WHERE agent = $4 AND status = 'running') < $3) \
             AND ($5::text IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.thread_key = $5 AND r.id <> $2 \
                  AND (r.status = 'running' OR (r.status = 'queued' AND r.id < $2))))",
        )
        .bind(timestamp(Utc::now()))
        .bind(id)
        .bind(max.map(i64::from))
        .bind(agent)
        .bind(thread)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    async fn runs_since(&self, agent: &str, actor: &str, since: DateTime<Utc>) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM runs WHERE agent = $1 AND actor = $2 AND created_at >= $3 AND parent_id IS NULL",
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
        let rows = sqlx::query(sqlx::AssertSqlSafe(super::usage_by_agent_sql("$1")))
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
            sqlx::query_scalar("SELECT SUM(cost_usd) FROM runs WHERE agent = $1 AND created_at >= $2")
                .bind(agent)
                .bind(timestamp(since))
                .fetch_one(&self.pool)
                .await?;
        Ok(cost.unwrap_or(0.0))
    }

    async fn transition(&self, id: &str, from: RunStatus, to: RunStatus) -> Result<bool, StoreError> {
        let started = (to == RunStatus::Running).then(|| timestamp(Utc::now()));
        let done = sqlx::query(
            "UPDATE runs SET status = $1, started_at = COALESCE($2, started_at) WHERE id = $3 AND status = $4",
        )
        .bind(to.as_str())
        .bind(started)
        .bind(id)
        .bind(from.as_str())
        .execute(&self.pool)
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
            "UPDATE runs SET status = $1, termination = $2, error = $3, final_text = $4, turns = $5, tool_calls = $6, \
             input_tokens = $7, output_tokens = $8, cached_input_tokens = $9, cache_write_tokens = $10, \
             reasoning_tokens = $11, cost_usd = $12, skill_loads = $13, finished_at = $14, private = private OR $17 \
             WHERE id = $15 AND status = $16",
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
        .bind(id)
        .bind(from.as_str())
        // A run that read a private conversation ends private.
        .bind(privacy.is_private())
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 1 {
            // An ended run never resumes: its checkpoints (the whole conversation, sealed
            // or not) are erased rather than kept beside the key for ever.
            sqlx::query("UPDATE approvals SET checkpoint = $1 WHERE run_id = $2")
                .bind(Vec::<u8>::new())
                .bind(id)
                .execute(&self.pool)
                .await?;
        }
        Ok(done.rows_affected() == 1)
    }

    async fn append_events(&self, run_id: &str, events: &[NewEvent]) -> Result<(), StoreError> {
        // One multi-row INSERT per chunk: a single round trip to SQLite's worker thread
        // instead of one per event. SQLite allows 32,766 bound parameters.
        for chunk in events.chunks(1000) {
            let mut query = QueryBuilder::<Postgres>::new("INSERT INTO run_events (run_id, at, kind, data) ");
            query.push_values(chunk, |mut row, e| {
                row.push_bind(run_id.to_string())
                    .push_bind(timestamp(e.at))
                    .push_bind(e.kind.clone())
                    .push_bind(e.data.clone());
            });
            query.build().execute(&self.pool).await?;
        }
        Ok(())
    }

    async fn prune_runs(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        use sqlx::Row;
        let cut = timestamp(before);
        let found = sqlx::query(sqlx::AssertSqlSafe(super::prune::trees_sql("$1")))
            .bind(&cut)
            .fetch_all(&self.pool)
            .await?;
        let members = found
            .iter()
            .map(|r| {
                Ok(super::prune::Member {
                    id: r.try_get("id")?,
                    root: r.try_get("root")?,
                    depth: i64::from(r.try_get::<i32, _>("depth")?),
                    status: r.try_get("status")?,
                    finished_at: r.try_get("finished_at")?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
        let doomed = super::prune::deletable(members, &cut);
        if doomed.is_empty() {
            return Ok(0);
        }
        let mut tx = self.pool.begin().await?;
        for id in &doomed {
            for table in super::prune::DEPENDENTS {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DELETE FROM {table} WHERE run_id = $1"
                )))
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query("DELETE FROM runs WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(doomed.len() as u64)
    }

    async fn mark_private(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET private = TRUE WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn get_run(&self, id: &str) -> Result<Option<RunRow>, StoreError> {
        let row = sqlx::query(rows::select_runs!(" WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::run).transpose()
    }

    async fn run_ids_with_prefix(&self, prefix: &str, limit: u32) -> Result<Vec<String>, StoreError> {
        let ids = sqlx::query_scalar("SELECT id FROM runs WHERE left(id, $1::int) = $2 ORDER BY id LIMIT $3")
            .bind(prefix.chars().count() as i64)
            .bind(prefix)
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
        Ok(ids)
    }

    async fn list_runs(&self, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(rows::select_runs!(" ORDER BY created_at DESC, id DESC LIMIT $1"))
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(rows::run).collect()
    }

    async fn query_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let mut q: QueryBuilder<Postgres> = QueryBuilder::new(rows::select_runs!(" WHERE 1 = 1"));
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
            q.push(" AND (trigger_summary ILIKE ")
                .push_bind(pattern.clone())
                .push(" ESCAPE '\\' OR COALESCE(final_text, '') ILIKE ")
                .push_bind(pattern)
                .push(" ESCAPE '\\')");
        }
        q.push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(filter.limit));
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(rows::run).collect()
    }

    async fn child_runs(&self, parent_id: &str) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(rows::select_runs!(
            " WHERE parent_id = $1 ORDER BY created_at, id"
        ))
        .bind(parent_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::run).collect()
    }

    async fn run_events(&self, run_id: &str) -> Result<Vec<StoredEvent>, StoreError> {
        let rows =
            sqlx::query("SELECT seq, run_id, at, kind, data FROM run_events WHERE run_id = $1 ORDER BY seq")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(rows::stored_event).collect()
    }

    async fn renew_lease(&self, run_id: &str, until: DateTime<Utc>, owner: &str) -> Result<bool, StoreError> {
        // A run nobody has renewed yet belongs to its creator, who claims it here.
        let done = sqlx::query(
            "UPDATE runs SET lease_until = $1, lease_owner = $2 WHERE id = $3 \
             AND (lease_owner IS NULL OR lease_owner = $4)",
        )
        .bind(timestamp(until))
        .bind(owner)
        .bind(run_id)
        .bind(owner)
        .execute(&self.pool)
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
            "UPDATE runs SET lease_until = $1, lease_owner = $2 WHERE id = $3 \
             AND status IN ('queued', 'running') AND (lease_until IS NULL OR lease_until <= $4)",
        )
        .bind(timestamp(until))
        .bind(owner)
        .bind(run_id)
        .bind(timestamp(now))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn expired_runs(&self, now: DateTime<Utc>) -> Result<Vec<ExpiredRun>, StoreError> {
        let now = timestamp(now);
        let rows = sqlx::query(
            "SELECT id, agent, status, event_id, attempt FROM runs WHERE event_id IS NOT NULL \
             AND status IN ('queued', 'running') AND (lease_until IS NULL OR lease_until <= $1) ORDER BY created_at",
        )
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::expired).collect()
    }

    async fn has_side_effects(&self, run_id: &str) -> Result<bool, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM run_events WHERE run_id = $1 AND kind IN ('tool_call', 'reply') \
             AND (data::jsonb ->> 'side_effect') = 'true'",
        )
        .bind(run_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(n > 0)
    }

    async fn requeue(&self, run_id: &str, from: RunStatus) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE runs SET status = 'queued', attempt = attempt + 1 WHERE id = $1 AND status = $2",
        )
        .bind(run_id)
        .bind(from.as_str())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 1 {
            sqlx::query("DELETE FROM run_files WHERE run_id = $1")
                .bind(run_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl FileStore for PgStore {
    async fn put_file(&self, run_id: &str, file: &StoredFile) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO run_files (run_id, file_id, meta, content) VALUES ($1, $2, $3, $4)")
            .bind(run_id)
            .bind(&file.id)
            .bind(file.meta.to_string())
            .bind(&file.content)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn update_file(&self, run_id: &str, file_id: &str, meta: &Value) -> Result<(), StoreError> {
        sqlx::query("UPDATE run_files SET meta = $1 WHERE run_id = $2 AND file_id = $3")
            .bind(meta.to_string())
            .bind(run_id)
            .bind(file_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn run_files(&self, run_id: &str) -> Result<Vec<StoredFile>, StoreError> {
        let rows = sqlx::query("SELECT file_id, meta, content FROM run_files WHERE run_id = $1 ORDER BY CAST(substr(file_id, 3) AS INTEGER)")
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
             WHERE r.thread_key = $1 AND r.private = false AND r.parent_id IS NULL AND r.id <> $2 \
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
impl EventQueue for PgStore {
    async fn insert_events(&self, events: &[EventRow]) -> Result<Vec<bool>, StoreError> {
        // One statement is atomic on its own: batches that fit one chunk skip the
        // BEGIN/COMMIT round trips, which matters on the ack path.
        let out = if events.len() <= rows::EVENT_CHUNK {
            let inserted = insert_event_chunk(&self.pool, events).await?;
            rows::mark_new(events, &inserted)
        } else {
            let mut tx = self.pool.begin().await?;
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
        if !retries.is_empty() {
            let column = |f: fn(&EventRow) -> String| retries.iter().map(|e| f(e)).collect::<Vec<String>>();
            let recorded = sqlx::query(
                "INSERT INTO events (id, source, kind, dedupe_key, received_at, status, private, body, \
                 outcome, duplicate_of) \
                 SELECT v.id, v.source, v.kind, v.dedupe_key, v.received_at, 'settled', v.private, '{}', \
                 'duplicate', e.id \
                 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[], $7::text[]) \
                 AS v(id, source, kind, dedupe_key, received_at, private, first_key) \
                 JOIN events e ON e.dedupe_key = v.first_key \
                 ON CONFLICT(dedupe_key) DO NOTHING",
            )
            .bind(column(|e| e.id.clone()))
            .bind(column(|e| e.source.clone()))
            .bind(column(|e| e.kind.clone()))
            .bind(column(|e| format!("{}#retry#{}", e.dedupe_key, e.id)))
            .bind(column(|e| timestamp(e.received_at)))
            .bind(retries.iter().map(|e| e.private).collect::<Vec<bool>>())
            .bind(column(|e| e.dedupe_key.clone()))
            .execute(&self.pool)
            .await;
            if let Err(err) = recorded {
                tracing::warn!(error = %err, "cannot record duplicate deliveries");
            }
        }
        Ok(out)
    }

    async fn claim_events(&self, limit: u32) -> Result<Vec<EventRow>, StoreError> {
        let rows = sqlx::query(
            "UPDATE events SET status = 'claimed', claimed_at = $1 WHERE id IN \
             (SELECT id FROM events WHERE status = 'queued' ORDER BY received_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) \
             RETURNING id, source, kind, dedupe_key, received_at, private, body, sealed",
        )
        .bind(timestamp(Utc::now()))
        .bind(limit as i64)
        .fetch_all(&self.pool)
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
        let mut tx = self.pool.begin().await?;
        let mut update = QueryBuilder::<Postgres>::new("UPDATE events SET status = CASE WHEN id IN (");
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
            let mut insert = QueryBuilder::<Postgres>::new(
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
             AND COALESCE(claimed_at, '') < $1 \
             AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.event_id = events.id)",
        )
        .bind(timestamp(claimed_before))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    async fn get_event(&self, id: &str) -> Result<Option<EventRow>, StoreError> {
        let row = sqlx::query(
            "SELECT id, source, kind, dedupe_key, received_at, private, body, sealed FROM events WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(rows::event).transpose()
    }

    async fn erase_sealed(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE events SET sealed = NULL WHERE id = $1 AND sealed IS NOT NULL AND NOT EXISTS \
             (SELECT 1 FROM runs WHERE runs.event_id = $2 AND runs.status IN ('queued', 'running', 'waiting'))",
        )
        .bind(id)
        .bind(id)
        .execute(&self.pool)
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
impl ScoreStore for PgStore {
    async fn add_score(&self, run_id: &str, score: &Score) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO run_scores (run_id, kind, criterion, passed, score, explanation, source, cost_usd, at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
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
        .execute(&self.pool)
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
            "UPDATE run_scores SET explanation = $1 WHERE run_id = $2 AND criterion = $3 AND source = $4",
        )
        .bind(explanation)
        .bind(run_id)
        .bind(criterion)
        .bind(source)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn run_scores(&self, run_id: &str) -> Result<Vec<Score>, StoreError> {
        let rows = sqlx::query(
            "SELECT kind, criterion, passed, score, explanation, source, cost_usd, at FROM run_scores \
             WHERE run_id = $1 ORDER BY id",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::score).collect()
    }

    async fn run_by_reply_ts(&self, ts: &str) -> Result<Option<String>, StoreError> {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT run_id FROM run_events WHERE kind = 'reply_sent' AND (data::jsonb ->> 'ts') = $1 \
             ORDER BY seq DESC LIMIT 1",
        )
        .bind(ts)
        .fetch_optional(&self.pool)
        .await?;
        Ok(id)
    }
}

#[async_trait]
impl ApprovalStore for PgStore {
    async fn suspend_run(&self, a: &ApprovalRow) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin().await?;
        let parked = sqlx::query(
            "UPDATE runs SET status = 'waiting', lease_until = NULL WHERE id = $1 AND status = 'running'",
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
             created_at, deadline) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
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
        sqlx::query("UPDATE approvals SET channel = $1, message_ts = $2 WHERE id = $3")
            .bind(channel)
            .bind(ts)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn get_approval(&self, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let sql = format!("SELECT {} FROM approvals WHERE id = $1", rows::APPROVAL_COLUMNS);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::approval).transpose()
    }

    async fn latest_approval(&self, run_id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let sql = format!(
            "SELECT {} FROM approvals WHERE run_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1",
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
        let mut tx = self.pool.begin().await?;
        let decided = sqlx::query(
            "UPDATE approvals SET decision = $1, decided_by = $2, decided_at = $3 WHERE id = $4 AND decision IS NULL",
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
            "UPDATE runs SET status = 'queued', lease_until = $1 \
             WHERE id = (SELECT run_id FROM approvals WHERE id = $2) AND status = 'waiting'",
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
            "SELECT id FROM approvals WHERE decision IS NULL AND deadline < $1 ORDER BY deadline",
        )
        .bind(timestamp(now))
        .fetch_all(&self.pool)
        .await?)
    }
}

#[async_trait]
impl SettingStore for PgStore {
    async fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn set_setting(&self, key: &str, value: &str) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            .bind(key)
            .bind(value)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn take_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("DELETE FROM settings WHERE key = $1 RETURNING value")
                .bind(key)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn add_setting_line(&self, key: &str, line: &str, max_lines: u32) -> Result<bool, StoreError> {
        super::check_setting_line(line)?;
        // One statement: the check and the append cannot interleave with another's.
        let done = sqlx::query(concat!(
            "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = ",
            "CASE WHEN settings.value = '' THEN excluded.value ELSE settings.value || chr(10) || excluded.value END ",
            "WHERE strpos(chr(10) || settings.value || chr(10), chr(10) || excluded.value || chr(10)) = 0 ",
            "AND (CASE WHEN settings.value = '' THEN 0 ",
            "ELSE length(settings.value) - length(replace(settings.value, chr(10), '')) + 1 END) < $3"
        ))
        .bind(key)
        .bind(line)
        .bind(i64::from(max_lines))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}

/// `INSERT ... ON CONFLICT(dedupe_key) DO NOTHING RETURNING id` for a chunk of events;
/// returns the ids inserted.
/// `, outcome = CASE id ... END, outcome_detail = CASE id ... END` for the routes that
/// carry an outcome (nothing when none does).
fn push_outcomes(update: &mut QueryBuilder<Postgres>, routes: &[Route<'_>]) {
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
    E: sqlx::Executor<'e, Database = Postgres>,
{
    // One statement text whatever the number of rows (arrays, not a VALUES list per
    // size): each connection prepares it once, and a batch is never near PostgreSQL's
    // 65,535-parameter limit.
    let column = |f: fn(&EventRow) -> String| chunk.iter().map(f).collect::<Vec<String>>();
    sqlx::query_scalar(
        "INSERT INTO events (id, source, kind, dedupe_key, received_at, status, private, body, sealed, \
         outcome, outcome_detail) \
         SELECT id, source, kind, dedupe_key, received_at, status, private, body, sealed, outcome, outcome_detail \
         FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[], $7::text[], $8::bytea[], \
         $9::text[], $10::text[], $11::text[]) \
         AS t(id, source, kind, dedupe_key, received_at, private, body, sealed, status, outcome, outcome_detail) \
         ON CONFLICT(dedupe_key) DO NOTHING RETURNING id",
    )
    .bind(column(|e| e.id.clone()))
    .bind(column(|e| e.source.clone()))
    .bind(column(|e| e.kind.clone()))
    .bind(column(|e| e.dedupe_key.clone()))
    .bind(column(|e| timestamp(e.received_at)))
    .bind(chunk.iter().map(|e| e.private).collect::<Vec<bool>>())
    .bind(column(|e| e.body.to_string()))
    .bind(chunk.iter().map(|e| e.sealed.clone()).collect::<Vec<Option<Vec<u8>>>>())
    .bind(chunk.iter().map(|e| rows::settled(e).0.to_string()).collect::<Vec<String>>())
    .bind(chunk.iter().map(|e| rows::settled(e).1.map(str::to_string)).collect::<Vec<Option<String>>>())
    .bind(chunk.iter().map(|e| rows::settled(e).2).collect::<Vec<Option<String>>>())
    .fetch_all(executor)
    .await
}

#[async_trait]
impl EventLog for PgStore {
    async fn list_events(&self, filter: &EventFilter) -> Result<Vec<EventRecord>, StoreError> {
        let (cond, binds) = super::event_log::where_clause(filter, true);
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
        let sql = format!("SELECT {} FROM events WHERE id = $1", rows::EVENT_RECORD_COLUMNS);
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(rows::event_record).transpose()
    }

    async fn event_bodies(&self, id: Option<&str>, limit: u32) -> Result<Vec<StoredBody>, StoreError> {
        let sql = super::event_log::bodies_sql(id.is_some(), limit, true);
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
        let Some((sql, pattern)) = super::event_log::about_message_sql(channel, ts, limit, true) else {
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
            "DELETE FROM events WHERE received_at < $1 AND status NOT IN ('queued', 'claimed') \
             AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.event_id = events.id \
             AND runs.status IN ('queued', 'running', 'waiting'))",
        )
        .bind(timestamp(before))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }
}
#[async_trait]
impl EscalationStore for PgStore {
    async fn escalate(&self, row: &EscalationRow) -> Result<bool, StoreError> {
        let done = sqlx::query(sqlx::AssertSqlSafe(escalation::numbered(escalation::INSERT)))
            .bind(&row.run_id)
            .bind(&row.agent)
            .bind(&row.escalated_by)
            .bind(timestamp(row.escalated_at))
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn set_escalation_message(&self, run_id: &str, channel: &str, ts: &str) -> Result<(), StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(escalation::numbered(escalation::SET_MESSAGE)))
            .bind(channel)
            .bind(ts)
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn escalation(&self, run_id: &str) -> Result<Option<EscalationRow>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(escalation::numbered(escalation::SELECT)))
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
        let done = sqlx::query(sqlx::AssertSqlSafe(escalation::numbered(escalation::RESOLVE)))
            .bind(by)
            .bind(timestamp(at))
            .bind(run_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

#[async_trait]
impl SealedStore for PgStore {
    async fn sealed_values(&self) -> Result<Vec<SealedValue>, StoreError> {
        sqlx::query(sqlx::AssertSqlSafe(escalation::numbered(sealed::ERASE_UNREAD)))
            .execute(&self.pool)
            .await?;
        let events = sqlx::query_as(sealed::EVENTS).fetch_all(&self.pool).await?;
        let checkpoints = sqlx::query_as(sealed::CHECKPOINTS).fetch_all(&self.pool).await?;
        Ok(sealed::values(events, checkpoints))
    }

    async fn replace_sealed(&self, value: &SealedValue, with: &[u8]) -> Result<bool, StoreError> {
        let done = sqlx::query(sqlx::AssertSqlSafe(escalation::numbered(
            sealed::replace_statement(value.kind),
        )))
        .bind(with)
        .bind(&value.id)
        .bind(&value.bytes)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
