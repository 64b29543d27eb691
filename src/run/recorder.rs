//! Records a run's events; content fields are [`Private`] and so redacted by type for
//! private runs.
//!
//! Events are stamped when they happen and group-committed at [`Recorder::flush`], which
//! the coordinators call before anything that could cause a side effect (a tool round
//! with a side-effecting tool, a reply), while a model is slow to answer, when events
//! have waited [`Recorder::MAX_LAG`], and before the run finishes. So the log is durable
//! before any side effect and costs one database round trip per flush, not per event.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::events::RunEvent;
use super::metering::Meter;
use crate::store::{NewEvent, Store, StoreError};
use crate::types::{Privacy, Private};

/// Events held back at most before a commit.
const MAX_PENDING: usize = 256;

/// Writes the event log of one run.
pub struct Recorder {
    store: Arc<dyn Store>,
    run_id: String,
    /// Private from the start (a private trigger) or from the moment the run read a
    /// private conversation ([`Recorder::taint`]).
    private: Arc<std::sync::atomic::AtomicBool>,
    pending: Mutex<Vec<NewEvent>>,
    /// When events were last written.
    flushed: Mutex<Instant>,
    /// Counts the events into the process's metrics.
    meter: Option<Meter>,
}

impl Recorder {
    pub fn new(store: Arc<dyn Store>, run_id: String, private: bool) -> Self {
        Recorder {
            store,
            run_id,
            private: Arc::new(std::sync::atomic::AtomicBool::new(private)),
            pending: Mutex::new(Vec::new()),
            flushed: Mutex::new(Instant::now()),
            meter: None,
        }
    }

    /// Also counts every recorded event with `meter`.
    pub fn metered(mut self, meter: Meter) -> Self {
        self.meter = Some(meter);
        self
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The run's privacy policy now: wrap content with it before recording.
    pub fn privacy(&self) -> Privacy {
        Privacy::from_private(self.private.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// The run now holds private content: everything recorded from here on (and its
    /// final answer) is redacted as a private run's.
    pub fn taint(&self) {
        self.private.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Set once the run is private (for those who must stop showing its content, such
    /// as trace capture).
    pub fn private_flag(&self) -> Arc<std::sync::atomic::AtomicBool> {
        self.private.clone()
    }

    /// `text` under the run's privacy policy.
    pub fn wrap(&self, text: impl Into<String>) -> Private {
        self.privacy().wrap(text)
    }

    /// Records one event, written at the next [`Recorder::flush`].
    pub fn record(&self, event: RunEvent) {
        if let Some(meter) = &self.meter {
            meter.observe(&event);
        }
        let (kind, data) = event.to_stored();
        let event = NewEvent {
            at: chrono::Utc::now(),
            kind,
            data,
        };
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).push(event);
    }

    /// How long recorded events may wait for a commit that is not needed for safety:
    /// the log of a run in progress is at most this stale.
    pub const MAX_LAG: Duration = Duration::from_secs(1);

    /// Whether the events waiting to be written are older than [`Recorder::MAX_LAG`]
    /// allows, or too many to keep waiting.
    pub fn lagging(&self) -> bool {
        let waiting = self.pending.lock().unwrap_or_else(|e| e.into_inner()).len();
        let since = self.flushed.lock().unwrap_or_else(|e| e.into_inner()).elapsed();
        since >= Self::MAX_LAG || waiting >= MAX_PENDING
    }

    /// Writes every recorded event in one group commit.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let batch = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if batch.is_empty() {
            return Ok(());
        }
        self.store.append_events(&self.run_id, &batch).await?;
        *self.flushed.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        Ok(())
    }
}
