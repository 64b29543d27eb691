//! Values kept sealed under the data key (a private event's content, a private run's
//! approval checkpoint), listed for the start-up pass that binds values sealed before
//! values were bound to their row, and erases the sealed content nothing will read.

use async_trait::async_trait;

use super::StoreError;

/// Which kind of row a [`SealedValue`] is kept in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealedKind {
    /// `events.sealed`: the whole private event.
    Event,
    /// `approvals.checkpoint`: a parked run's state (plain JSON when the run held no
    /// private content; the caller tells the two apart).
    Checkpoint,
}

/// One value as it is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedValue {
    pub kind: SealedKind,
    /// The row's id: the event's, or the approval's.
    pub id: String,
    /// What its seal is bound to: the event's id, or the approval's run.
    pub owner: String,
    pub bytes: Vec<u8>,
}

#[async_trait]
pub trait SealedStore: Send + Sync {
    /// Erases the sealed content of routed events none of whose runs is queued, running
    /// or waiting (a process stopped between a run's end and its erasing), then lists
    /// every sealed event and every checkpoint not yet erased.
    async fn sealed_values(&self) -> Result<Vec<SealedValue>, StoreError>;
    /// Replaces `value`'s bytes with `with`, unless its row changed since it was listed;
    /// whether it was replaced.
    async fn replace_sealed(&self, value: &SealedValue, with: &[u8]) -> Result<bool, StoreError>;
}

/// The statements, with `?` placeholders (`escalation::numbered` for PostgreSQL).
pub(super) const ERASE_UNREAD: &str = "UPDATE events SET sealed = NULL WHERE sealed IS NOT NULL \
     AND status NOT IN ('queued', 'claimed') AND NOT EXISTS (SELECT 1 FROM runs \
     WHERE runs.event_id = events.id AND runs.status IN ('queued', 'running', 'waiting'))";
pub(super) const EVENTS: &str = "SELECT id, sealed FROM events WHERE sealed IS NOT NULL";
pub(super) const CHECKPOINTS: &str =
    "SELECT id, run_id, checkpoint FROM approvals WHERE length(checkpoint) > 0";
pub(super) const REPLACE_EVENT: &str = "UPDATE events SET sealed = ? WHERE id = ? AND sealed = ?";
pub(super) const REPLACE_CHECKPOINT: &str =
    "UPDATE approvals SET checkpoint = ? WHERE id = ? AND checkpoint = ?";

/// The statement that replaces a value of `kind`.
pub(super) fn replace_statement(kind: SealedKind) -> &'static str {
    match kind {
        SealedKind::Event => REPLACE_EVENT,
        SealedKind::Checkpoint => REPLACE_CHECKPOINT,
    }
}

/// The listed rows as values.
pub(super) fn values(
    events: Vec<(String, Vec<u8>)>,
    checkpoints: Vec<(String, String, Vec<u8>)>,
) -> Vec<SealedValue> {
    let events = events.into_iter().map(|(id, bytes)| SealedValue {
        kind: SealedKind::Event,
        owner: id.clone(),
        id,
        bytes,
    });
    let checkpoints = checkpoints.into_iter().map(|(id, run, bytes)| SealedValue {
        kind: SealedKind::Checkpoint,
        id,
        owner: run,
        bytes,
    });
    events.chain(checkpoints).collect()
}
