//! How many refused requests are written to the event log: a few a minute per source
//! and kind, so a flood of forged requests cannot fill the database (the metrics count
//! them all) nor crowd out the record of a real refusal.

/// Refused requests recorded per source and minute, at most.
pub const REFUSALS_RECORDED_PER_MINUTE: u32 = 30;

/// Bounds how many refused requests are recorded, per source and minute.
#[derive(Debug, Default)]
pub struct RefusalBudget {
    /// Per source and kind: the minute counted and how many were recorded in it.
    by_source: std::sync::Mutex<std::collections::HashMap<(&'static str, Refused), MinuteCount>>,
}

/// A minute (Unix minutes) and how many refusals were recorded in it.
type MinuteCount = (i64, u32);

/// What kind of refusal is recorded, each with its own budget: a flood of forged
/// requests must not crowd out the record of a real workspace's or person's refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refused {
    /// Unsigned, malformed or oversized requests.
    Request,
    /// Signed requests refused by policy (another workspace, an outsider's click).
    Policy,
}

impl RefusalBudget {
    /// Whether one more refusal of `kind` from `source` may be recorded this minute.
    pub fn admit(&self, source: &'static str, kind: Refused) -> bool {
        let minute = chrono::Utc::now().timestamp() / 60;
        let mut map = self.by_source.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry((source, kind)).or_insert((minute, 0));
        if entry.0 != minute {
            *entry = (minute, 0);
        }
        entry.1 += 1;
        entry.1 <= REFUSALS_RECORDED_PER_MINUTE
    }
}
