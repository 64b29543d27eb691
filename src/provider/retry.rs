//! Retry timing: exponential backoff with full jitter, or the server's `Retry-After`.

use std::time::Duration;

use super::error::ProviderError;

/// How often and how long to wait before retrying a retryable failure.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt, per model.
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Upper bound on a server-requested wait, so one header cannot stall a run.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `attempt` (0-based) after `err`.
    pub fn delay(&self, attempt: u32, err: &ProviderError) -> Duration {
        if let Some(wait) = err.retry_after {
            return wait.min(self.max_retry_after);
        }
        let exp = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.min(16)))
            .min(self.max_delay);
        // Full jitter in [exp/2, exp]: spreads retries of many runs hitting one limit.
        let half = exp / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::error::ErrorKind;

    #[test]
    fn backs_off_exponentially_within_bounds() {
        let p = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
            max_retry_after: Duration::from_secs(5),
        };
        let err = ProviderError::new("openai", ErrorKind::Server, "x");
        for attempt in 0..6 {
            let d = p.delay(attempt, &err);
            let cap = Duration::from_millis((100u64 << attempt).min(1000));
            assert!(d >= cap / 2 && d <= cap, "attempt {attempt}: {d:?}");
        }
    }

    #[test]
    fn honours_retry_after_up_to_a_cap() {
        let p = RetryPolicy::default();
        let mut err = ProviderError::new("openai", ErrorKind::RateLimit, "x");
        err.retry_after = Some(Duration::from_secs(3));
        assert_eq!(p.delay(0, &err), Duration::from_secs(3));
        err.retry_after = Some(Duration::from_secs(3600));
        assert_eq!(p.delay(0, &err), p.max_retry_after);
    }
}
