//! Records a run's events; content fields are [`Private`] and so redacted by type for
//! private runs.
//!
//! Events are stamped when they happen and group-committed at [`Recorder::flush`], which
//! the coordinators call before every wait on the outside world (a model call, a tool
//! round) and before the run finishes. So the log is durable before any side effect
//! and costs one database round trip per flush instead of one per event.

use std::sync::{Arc, Mutex};

use super::events::RunEvent;
use crate::store::{NewEvent, Store, StoreError};
use crate::types::{Privacy, Private};

/// Writes the event log of one run.
pub struct Recorder {
    store: Arc<dyn Store>,
    run_id: String,
    privacy: Privacy,
    pending: Mutex<Vec<NewEvent>>,
}

impl Recorder {
    pub fn new(store: Arc<dyn Store>, run_id: String, private: bool) -> Self {
        Recorder {
            store,
            run_id,
            privacy: Privacy::from_private(private),
            pending: Mutex::new(Vec::new()),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The run's privacy policy: wrap content with it before recording.
    pub fn privacy(&self) -> Privacy {
        self.privacy
    }

    /// `text` under the run's privacy policy.
    pub fn wrap(&self, text: impl Into<String>) -> Private {
        self.privacy.wrap(text)
    }

    /// Records one event, written at the next [`Recorder::flush`].
    pub fn record(&self, event: RunEvent) {
        let (kind, data) = event.to_parts();
        let event = NewEvent {
            at: chrono::Utc::now(),
            kind,
            data,
        };
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }

    /// Writes every recorded event in one group commit.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if batch.is_empty() {
            return Ok(());
        }
        self.store.append_events(&self.run_id, &batch).await
    }
}
