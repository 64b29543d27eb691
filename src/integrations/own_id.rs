//! Who steward is in a service (Jira's `accountId`, Notion's bot user), asked once and
//! kept. A failed lookup is not kept, but it is remembered for [`FAILED_FOR`]: while
//! the service is down or rate limiting, every event waiting on the answer (routed one
//! after another) fails at once instead of asking again and waiting out its timeout.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::ApiError;

/// How long a failed lookup answers for the next ones.
const FAILED_FOR: Duration = Duration::from_secs(2);

/// The id, once looked up; the last failure, for a while.
#[derive(Debug, Clone, Default)]
pub struct OwnId {
    id: Arc<tokio::sync::OnceCell<String>>,
    failed: Arc<Mutex<Option<(Instant, ApiError)>>>,
}

impl OwnId {
    /// The id, looked up with `lookup` unless known or failed a moment ago.
    pub async fn get<F, Fut>(&self, lookup: F) -> Result<String, ApiError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<String, ApiError>>,
    {
        if let Some(id) = self.id.get() {
            return Ok(id.clone());
        }
        if let Some((at, e)) = self.failed.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && at.elapsed() < FAILED_FOR
        {
            return Err(e.clone());
        }
        match self.id.get_or_try_init(lookup).await {
            Ok(id) => Ok(id.clone()),
            Err(e) => {
                *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn a_failure_answers_for_a_while_and_a_success_for_good() {
        let own = OwnId::default();
        let asked = AtomicU32::new(0);
        let down = || async {
            asked.fetch_add(1, Ordering::SeqCst);
            Err(ApiError::Transport {
                service: "jira",
                method: "GET /rest/api/3/myself".into(),
                message: "HTTP 503".into(),
            })
        };
        assert!(own.get(down).await.is_err());
        assert!(own.get(down).await.is_err());
        assert_eq!(
            asked.load(Ordering::SeqCst),
            1,
            "the second answered from the failure"
        );
        // Past the memo, the service is asked again.
        *own.failed.lock().unwrap() = Some((Instant::now() - FAILED_FOR, ApiError::NotConfigured("jira")));
        assert_eq!(
            own.get(|| async { Ok("acct-1".to_string()) }).await.unwrap(),
            "acct-1"
        );
        assert_eq!(own.get(down).await.unwrap(), "acct-1", "kept for good");
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }
}
