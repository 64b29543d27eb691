//! Sign-in throttling: each client address may try the inspector's token a few times,
//! then waits a delay that doubles with every further failure (up to [`MAX_DELAY`]).
//! A correct token clears the address's record; records idle for [`FORGET_AFTER`] are
//! dropped.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures allowed before any delay.
const FREE_TRIES: u32 = 3;
/// The longest wait between two tries.
pub const MAX_DELAY: Duration = Duration::from_secs(300);
/// A record not touched for this long is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Records kept at most (the oldest are dropped first).
const MAX_RECORDS: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last: Instant,
}

/// Failed sign-ins by client address. `None` stands for requests whose address is
/// unknown (tests that call the router directly): they share one record.
#[derive(Debug, Default)]
pub struct LoginThrottle {
    records: Mutex<HashMap<Option<IpAddr>, Record>>,
}

/// How long `failures` failures make the next try wait.
fn delay(failures: u32) -> Duration {
    if failures < FREE_TRIES {
        return Duration::ZERO;
    }
    let doublings = (failures - FREE_TRIES).min(16);
    Duration::from_secs(1u64 << doublings).min(MAX_DELAY)
}

impl LoginThrottle {
    /// `Err(wait)` when `client` must wait before trying again.
    pub fn check(&self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        match records.get(&client) {
            Some(r) => {
                let due = r.last + delay(r.failures);
                if now < due { Err(due - now) } else { Ok(()) }
            }
            None => Ok(()),
        }
    }

    /// Records a wrong token from `client`.
    pub fn failed(&self, client: Option<IpAddr>, now: Instant) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.retain(|_, r| now.saturating_duration_since(r.last) < FORGET_AFTER);
        if records.len() >= MAX_RECORDS
            && let Some(oldest) = records.iter().min_by_key(|(_, r)| r.last).map(|(k, _)| *k)
        {
            records.remove(&oldest);
        }
        let r = records.entry(client).or_insert(Record {
            failures: 0,
            last: now,
        });
        r.failures = r.failures.saturating_add(1);
        r.last = now;
    }

    /// A correct token: `client` starts afresh.
    pub fn succeeded(&self, client: Option<IpAddr>) {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_grows_with_each_failure_and_a_success_clears_it() {
        let t = LoginThrottle::default();
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        let b = Some(IpAddr::from([10, 0, 0, 2]));
        let now = Instant::now();
        for _ in 0..FREE_TRIES {
            assert!(t.check(a, now).is_ok());
            t.failed(a, now);
        }
        assert_eq!(t.check(a, now), Err(Duration::from_secs(1)));
        assert!(t.check(b, now).is_ok(), "another address is not held back");
        t.failed(a, now + Duration::from_secs(1));
        assert_eq!(
            t.check(a, now + Duration::from_secs(1)),
            Err(Duration::from_secs(2))
        );
        assert!(t.check(a, now + Duration::from_secs(3)).is_ok());
        assert_eq!(delay(40), MAX_DELAY);
        t.succeeded(a);
        assert!(t.check(a, now + Duration::from_secs(1)).is_ok());
    }
}
