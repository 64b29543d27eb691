//! Persist-then-ack with group commit: request handlers hand normalized events to one
//! writer task, which inserts whatever has queued up in a single transaction and tells
//! each handler whether its event was new or a duplicate. The handler acknowledges only
//! after that commit, so an acknowledged event is never lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::store::{EventRow, Store};
use crate::triggers::TriggerEvent;
use crate::types::event_outcome::EventOutcome;
use crate::types::seal::DataKey;

/// Largest group commit.
const MAX_BATCH: usize = 1024;

/// Full content of private events (and of events carrying an `action_token`), kept
/// in memory only, by event id.
pub type PrivateCache = Arc<Mutex<HashMap<String, Held>>>;

/// A private event's content kept in memory for the process that claims it.
#[derive(Debug)]
pub struct Held {
    pub at: std::time::Instant,
    /// A sealed copy is stored with the row, so any replica can claim it without this.
    pub sealed: bool,
    pub event: TriggerEvent,
}

/// How long a private event's text waits in memory for this process to claim it, when
/// a sealed copy is stored too: another replica may claim it from the sealed copy, and
/// this one would otherwise keep the text for ever.
const PRIVATE_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// How long content with no sealed copy (no `STEWARD_DATA_KEY`, or a person's search
/// grant, which is never sealed) waits for this process's claim. Past it, another
/// replica has claimed the event (and run it without the content), or the queue is an
/// hour behind: kept longer, such content would stay in memory for good, and a run
/// that claims it later starts without it and says so.
const UNSEALED_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Drops from `cache` the private events that have waited past their time at `now`
/// ([`PRIVATE_CACHE_TTL`] with a sealed copy, [`UNSEALED_CACHE_TTL`] without).
fn forget_expired(cache: &mut HashMap<String, Held>, now: std::time::Instant) {
    cache.retain(|_, held| {
        let ttl = match held.sealed {
            true => PRIVATE_CACHE_TTL,
            false => UNSEALED_CACHE_TTL,
        };
        now.saturating_duration_since(held.at) < ttl
    });
}

struct Submission {
    row: EventRow,
    private_event: Option<TriggerEvent>,
    reply: oneshot::Sender<Result<bool, String>>,
}

/// Hands events to the writer.
#[derive(Clone)]
pub struct Ingest {
    tx: mpsc::Sender<Submission>,
    /// Seals private events at rest (`STEWARD_DATA_KEY`).
    data_key: Option<DataKey>,
}

/// How long a webhook waits for its event's commit before answering 503: well inside
/// the request timeout (10 s), which would answer 408.
pub const COMMIT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("the event store is unavailable: {0}")]
    Store(String),
    #[error("steward is shutting down")]
    ShuttingDown,
}

/// The row stored for an event. Private events keep routing metadata only (source,
/// kind, origin ids): no text, no payload (file names and URLs are free text), no
/// attachments.
pub fn event_row(event: &TriggerEvent, dedupe_key: &str) -> EventRow {
    let mut stored = event.clone();
    if stored.private {
        stored.text = None;
        stored.payload = serde_json::json!({"private": true});
        stored.summary = crate::run::trigger_summary(event);
        stored.attachments.clear();
    }
    EventRow {
        id: uuid::Uuid::now_v7().to_string(),
        source: event.source.clone(),
        kind: event.kind.clone(),
        dedupe_key: dedupe_key.to_string(),
        received_at: chrono::Utc::now(),
        private: event.private,
        body: serde_json::to_value(&stored).unwrap_or_default(),
        sealed: None,
        outcome: None,
    }
}

/// Where a private event's sealed content is bound (`DataKey::seal_at`): its row.
pub fn sealed_event_place(id: &str) -> String {
    format!("event:{id}")
}

/// [`event_row`] for a private event whose whole content is kept sealed under `key`,
/// so whichever process routes it can answer it. A failure to seal keeps the content in
/// memory only (as without a key).
pub fn sealed_row(event: &TriggerEvent, dedupe_key: &str, key: &DataKey) -> EventRow {
    let mut row = event_row(event, dedupe_key);
    if event.private {
        match serde_json::to_vec(event)
            .map_err(|e| e.to_string())
            .and_then(|plain| {
                key.seal_at(&sealed_event_place(&row.id), &plain)
                    .map_err(|e| e.to_string())
            }) {
            Ok(sealed) => row.sealed = Some(sealed),
            Err(e) => {
                tracing::warn!(error = %e, "cannot seal a private event; its text stays in memory only")
            }
        }
    }
    row
}

impl Ingest {
    /// Starts the writer on `tracker`; it stops when `shutdown` is cancelled, after
    /// committing what was already submitted.
    pub fn start(
        store: Arc<dyn Store>,
        notify: Arc<Notify>,
        private: PrivateCache,
        tracker: &TaskTracker,
        shutdown: CancellationToken,
        data_key: Option<DataKey>,
    ) -> Ingest {
        let (tx, mut rx) = mpsc::channel::<Submission>(8192);
        tracker.spawn(async move {
            loop {
                let first = tokio::select! {
                    s = rx.recv() => match s { Some(s) => s, None => break },
                    _ = shutdown.cancelled() => {
                        rx.close();
                        match rx.try_recv() { Ok(s) => s, Err(_) => break }
                    }
                };
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(s) => batch.push(s),
                        Err(_) => break,
                    }
                }
                let rows: Vec<EventRow> = batch.iter().map(|s| s.row.clone()).collect();
                {
                    let mut cache = private.lock().unwrap_or_else(|e| e.into_inner());
                    let now = std::time::Instant::now();
                    forget_expired(&mut cache, now);
                    for s in &mut batch {
                        if let Some(event) = s.private_event.take() {
                            // The search grant is never sealed: kept until claimed.
                            let sealed = s.row.sealed.is_some() && event.action_token.is_none();
                            cache.insert(
                                s.row.id.clone(),
                                Held {
                                    at: now,
                                    sealed,
                                    event,
                                },
                            );
                        }
                    }
                }
                match store.insert_events(&rows).await {
                    Ok(results) => {
                        let any_new = results.iter().any(|r| *r);
                        {
                            // Duplicates start nothing; drop their private content.
                            let mut cache = private.lock().unwrap_or_else(|e| e.into_inner());
                            for (s, new) in batch.iter().zip(&results) {
                                if !new {
                                    cache.remove(&s.row.id);
                                }
                            }
                        }
                        for (s, new) in batch.into_iter().zip(results) {
                            let _ = s.reply.send(Ok(new));
                        }
                        if any_new {
                            notify.notify_one();
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %e, events = rows.len(), "cannot persist events");
                        // Nothing was stored: the sender delivers again, and that
                        // delivery brings its content anew.
                        let mut cache = private.lock().unwrap_or_else(|e| e.into_inner());
                        for s in &batch {
                            cache.remove(&s.row.id);
                        }
                        drop(cache);
                        for s in batch {
                            let _ = s.reply.send(Err(e.to_string()));
                        }
                    }
                }
            }
        });
        Ingest { tx, data_key }
    }

    /// Persists `event` under `dedupe_key`; `Ok(true)` when new, `Ok(false)` for a
    /// duplicate. Returns after the commit, or an error after [`COMMIT_WAIT`] without
    /// one (a database that stopped answering makes the pool wait; the sender must
    /// hear 503 and retry before the request times out, and a late commit of the same
    /// event is then a duplicate).
    pub async fn submit(&self, event: &TriggerEvent, dedupe_key: &str) -> Result<bool, IngestError> {
        tokio::time::timeout(COMMIT_WAIT, self.submit_now(event, dedupe_key))
            .await
            .map_err(|_| IngestError::Store(format!("no commit within {} s", COMMIT_WAIT.as_secs())))?
    }

    /// Records a delivery settled on arrival (ignored, refused): metadata and the
    /// outcome only, never its content. Does not wait for the commit, and drops the
    /// record when the writer is backed up (the metric still counts it).
    pub fn record(&self, source: &str, kind: &str, outcome: EventOutcome) {
        let id = uuid::Uuid::now_v7().to_string();
        let (reply, _) = oneshot::channel();
        let submission = Submission {
            row: EventRow {
                dedupe_key: format!("settled:{id}"),
                id,
                source: source.to_string(),
                kind: kind.to_string(),
                received_at: chrono::Utc::now(),
                private: false,
                body: serde_json::json!({}),
                sealed: None,
                outcome: Some(outcome),
            },
            private_event: None,
            reply,
        };
        if self.tx.try_send(submission).is_err() {
            tracing::debug!("event writer busy; a settled delivery is counted, not recorded");
        }
    }

    async fn submit_now(&self, event: &TriggerEvent, dedupe_key: &str) -> Result<bool, IngestError> {
        let (reply, rx) = oneshot::channel();
        let submission = Submission {
            row: match &self.data_key {
                Some(key) => sealed_row(event, dedupe_key, key),
                None => event_row(event, dedupe_key),
            },
            // A private event's text, or a person's search grant, stays in memory
            // for the run (the stored row has neither).
            private_event: (event.private || event.action_token.is_some()).then(|| event.clone()),
            reply,
        };
        self.tx
            .send(submission)
            .await
            .map_err(|_| IngestError::ShuttingDown)?;
        rx.await
            .map_err(|_| IngestError::ShuttingDown)?
            .map_err(IngestError::Store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_events_expire_from_memory_unsealed_ones_later() {
        let start = std::time::Instant::now();
        let held = |sealed| Held {
            at: start,
            sealed,
            event: TriggerEvent::from_cli(serde_json::json!({"text": "private words"})),
        };
        let mut cache = HashMap::from([
            ("sealed".to_string(), held(true)),
            ("grant".to_string(), held(false)),
        ]);
        let almost = PRIVATE_CACHE_TTL - std::time::Duration::from_secs(1);
        forget_expired(&mut cache, start + almost);
        assert_eq!(cache.len(), 2, "both wait inside the window");
        forget_expired(&mut cache, start + PRIVATE_CACHE_TTL);
        let left: Vec<&String> = cache.keys().collect();
        assert_eq!(
            left,
            ["grant"],
            "the sealed one goes; another replica claims it from the store"
        );
        let almost = UNSEALED_CACHE_TTL - std::time::Duration::from_secs(1);
        forget_expired(&mut cache, start + almost);
        assert_eq!(
            cache.len(),
            1,
            "one with no sealed copy waits longer for its claim"
        );
        forget_expired(&mut cache, start + UNSEALED_CACHE_TTL);
        assert!(cache.is_empty(), "but not for good");
    }
}
