//! Whether a Notion setup window is open (`steward notion-token --listen` opened one in
//! the store). Unsigned requests to `/notion/webhook` ask this before they are refused,
//! so a closed window is remembered for [`CLOSED_FOR`]: a flood of them costs no
//! database reads. An open window is read again each time (it closes as soon as the
//! listener takes its token).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::Utc;

use crate::store::{Store, StoreError};

/// How long a closed window is taken as closed without asking the store: a window the
/// listener opens is seen at most this late (it keeps its window open for minutes).
const CLOSED_FOR: Duration = Duration::from_secs(2);

/// The last time the store said no window was open.
#[derive(Debug, Default)]
pub struct SetupWindow(Mutex<Option<Instant>>);

impl SetupWindow {
    /// Whether a window is open now (until the time the setting `key` holds).
    pub async fn open(&self, store: &dyn Store, key: &str) -> Result<bool, StoreError> {
        let closed_at = *self.0.lock().unwrap_or_else(|e| e.into_inner());
        if closed_at.is_some_and(|at| at.elapsed() < CLOSED_FOR) {
            return Ok(false);
        }
        let open = store
            .get_setting(key)
            .await?
            .and_then(|v| chrono::DateTime::parse_from_rfc3339(&v).ok())
            .is_some_and(|until| until > Utc::now());
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = (!open).then(Instant::now);
        Ok(open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SettingStore as _;

    /// A closed window is remembered briefly (no store read); an open one is read each
    /// time, so it closes at once.
    #[tokio::test]
    async fn a_closed_window_is_remembered_briefly_and_an_open_one_never() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::SqliteStore::open(&dir.path().join("s.db"))
            .await
            .unwrap();
        let window = SetupWindow::default();
        assert!(!window.open(&store, "until").await.unwrap());
        let later = (Utc::now() + chrono::Duration::minutes(5)).to_rfc3339();
        store.set_setting("until", &later).await.unwrap();
        assert!(
            !window.open(&store, "until").await.unwrap(),
            "still remembered closed"
        );
        tokio::time::sleep(CLOSED_FOR).await;
        assert!(window.open(&store, "until").await.unwrap());
        store
            .set_setting("until", &Utc::now().to_rfc3339())
            .await
            .unwrap();
        assert!(!window.open(&store, "until").await.unwrap(), "closed at once");
    }
}
