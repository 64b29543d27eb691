//! The runs this process is working on. A run's lease can lapse while its process
//! still works on it (renewals failed for a while: a database blip, a starved pool);
//! the same process's reconcile must not take such a run and start a second copy, since
//! the first one's renewals, under the same owner, would keep succeeding. Another
//! replica may take it: then the first copy's next renewal fails and it stops.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The ids of the runs this process holds (started and not yet ended).
#[derive(Debug, Default)]
pub struct Held(Mutex<HashSet<String>>);

/// One held run: forgotten when dropped, however its task ends.
#[derive(Debug)]
pub struct HeldRun {
    held: Arc<Held>,
    id: String,
}

impl Held {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds run `id` until the returned guard is dropped.
    pub fn hold(self: &Arc<Self>, id: &str) -> HeldRun {
        self.set().insert(id.to_string());
        HeldRun {
            held: self.clone(),
            id: id.to_string(),
        }
    }

    /// Whether this process is working on run `id`.
    pub fn holds(&self, id: &str) -> bool {
        self.set().contains(id)
    }
}

impl Drop for HeldRun {
    fn drop(&mut self) {
        self.held.set().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_held_until_its_guard_drops() {
        let held = Arc::new(Held::default());
        let guard = held.hold("r1");
        assert!(held.holds("r1") && !held.holds("r2"));
        drop(guard);
        assert!(!held.holds("r1"));
    }
}
