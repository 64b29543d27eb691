//! Group commit of run events on SQLite: every run's [`append_events`] goes to one
//! writer task, which writes whatever has queued up, from all runs, in one transaction
//! and then answers each caller. SQLite admits one writer; a thousand runs each
//! committing its own events queued a thousand commits on it, and anything else that
//! had to write (routing the next events, starting runs) waited behind them.
//!
//! A caller still returns only after its events are committed, so the log stays
//! durable before any side effect. A batch that fails is retried one run at a time, so
//! one bad append (a run id that does not exist) fails only its own caller.
//!
//! The task belongs to the store: it ends when the last handle to the store is dropped
//! (its channel closes). Where no task can run (the runtime that started it has shut
//! down), appends are written directly.
//!
//! [`append_events`]: super::RunStore::append_events

use sqlx::{QueryBuilder, Sqlite, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::{NewEvent, StoreError, timestamp};

/// Rows written in one transaction, at most (more wait for the next one).
const MAX_BATCH_ROWS: usize = 8192;
/// Rows per INSERT statement, largest first: 4 parameters each, under SQLite's 32,766.
const CHUNKS: [usize; 5] = [256, 64, 16, 4, 1];

/// One row of `run_events`, bound as is.
struct Row {
    run_id: String,
    at: String,
    kind: String,
    data: String,
}

struct Append {
    rows: Vec<Row>,
    done: oneshot::Sender<Result<(), String>>,
}

/// The handle runs append through (cloned with the store).
#[derive(Clone)]
pub struct Appender {
    tx: mpsc::Sender<Append>,
}

impl Appender {
    /// Starts the writer task on the current runtime, writing through `writer`.
    pub fn start(writer: SqlitePool) -> Appender {
        let (tx, rx) = mpsc::channel(4096);
        tokio::spawn(run(writer, rx));
        Appender { tx }
    }

    /// Appends `events` of `run_id`, returning once they are committed.
    pub async fn append(
        &self,
        writer: &SqlitePool,
        run_id: &str,
        events: &[NewEvent],
    ) -> Result<(), StoreError> {
        let rows = events
            .iter()
            .map(|e| Row {
                run_id: run_id.to_string(),
                at: timestamp(e.at),
                kind: e.kind.clone(),
                data: e.data.clone(),
            })
            .collect();
        let (done, answer) = oneshot::channel();
        match self.tx.send(Append { rows, done }).await {
            Ok(()) => match answer.await {
                Ok(result) => result.map_err(StoreError::Corrupt),
                Err(_) => Err(StoreError::Corrupt(
                    "the event writer stopped before answering".into(),
                )),
            },
            // No writer task (its runtime is gone): write here.
            Err(mpsc::error::SendError(append)) => write(writer, &append.rows).await,
        }
    }
}

async fn run(writer: SqlitePool, mut rx: mpsc::Receiver<Append>) {
    while let Some(first) = rx.recv().await {
        let mut rows = first.rows.len();
        let mut batch = vec![first];
        while rows < MAX_BATCH_ROWS {
            match rx.try_recv() {
                Ok(append) => {
                    rows += append.rows.len();
                    batch.push(append);
                }
                Err(_) => break,
            }
        }
        if batch.len() == 1 {
            let append = batch.remove(0);
            let result = write(&writer, &append.rows).await.map_err(|e| e.to_string());
            let _ = append.done.send(result);
            continue;
        }
        let all: Vec<&Row> = batch.iter().flat_map(|a| &a.rows).collect();
        match write_all(&writer, &all).await {
            Ok(()) => {
                for append in batch {
                    let _ = append.done.send(Ok(()));
                }
            }
            Err(_) => {
                // One run's rows spoiled the batch: each alone, so only it fails.
                for append in batch {
                    let result = write(&writer, &append.rows).await.map_err(|e| e.to_string());
                    let _ = append.done.send(result);
                }
            }
        }
    }
}

async fn write(writer: &SqlitePool, rows: &[Row]) -> Result<(), StoreError> {
    let rows: Vec<&Row> = rows.iter().collect();
    write_all(writer, &rows).await
}

/// Writes `rows` in one transaction (rolled back if dropped half way).
async fn write_all(writer: &SqlitePool, rows: &[&Row]) -> Result<(), StoreError> {
    // Statements of a few fixed sizes, so each is prepared once and then found in the
    // connection's statement cache; a statement per batch size was parsed anew every
    // time (and pushed the other statements out of the cache).
    let mut chunks = Vec::new();
    let mut rest = rows;
    while !rest.is_empty() {
        let size = CHUNKS.iter().copied().find(|n| *n <= rest.len()).unwrap_or(1);
        let (chunk, later) = rest.split_at(size);
        chunks.push(chunk);
        rest = later;
    }
    if let [only] = chunks.as_slice() {
        // One statement commits by itself.
        return Ok(insert(writer, only).await?);
    }
    let mut tx = writer.begin().await?;
    for chunk in chunks {
        insert(&mut *tx, chunk).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn insert<'c, E>(exec: E, rows: &[&Row]) -> Result<(), sqlx::Error>
where
    E: sqlx::Executor<'c, Database = Sqlite>,
{
    let mut query = QueryBuilder::<Sqlite>::new("INSERT INTO run_events (run_id, at, kind, data) ");
    query.push_values(rows, |mut row, r| {
        row.push_bind(r.run_id.as_str())
            .push_bind(r.at.as_str())
            .push_bind(r.kind.as_str())
            .push_bind(r.data.as_str());
    });
    query.build().execute(exec).await?;
    Ok(())
}
