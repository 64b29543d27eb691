//! Sign-in throttling: each client address may try the inspector's token a few times,
//! then waits a delay that doubles with every further failure (up to [`MAX_DELAY`]).
//! Every try counts as a failure until a correct token clears the address's record, so
//! parallel guesses cannot slip past together. IPv6 clients are counted by their /64.
//! Records idle for [`FORGET_AFTER`] are dropped, and at most [`MAX_RECORDS`] are kept.

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

/// The key an address is throttled under: IPv6 clients by their /64 (one host can
/// hold a whole /64), IPv4 (also IPv4-mapped) by address.
fn key(client: Option<IpAddr>) -> Option<IpAddr> {
    client.map(|ip| match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::from([s[0], s[1], s[2], s[3], 0, 0, 0, 0])
            }
        },
        v4 => v4,
    })
}

impl LoginThrottle {
    /// Takes one try for `client`, counted as a failure until [`Self::succeeded`]
    /// clears it; `Err(wait)` when `client` must wait first (nothing is counted then).
    pub fn attempt(&self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let client = key(client);
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = records.get(&client) {
            let due = r.last + delay(r.failures);
            if now < due {
                return Err(due - now);
            }
        }
        records.retain(|_, r| now.saturating_duration_since(r.last) < FORGET_AFTER);
        if records.len() >= MAX_RECORDS
            && !records.contains_key(&client)
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
        Ok(())
    }

    /// A correct token: `client` starts afresh.
    pub fn succeeded(&self, client: Option<IpAddr>) {
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key(client));
    }
}

/// The client address of a request, from the connection (see `server::WithPeer`).
pub fn client_of(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|p| p.0.ip())
}

/// The answer to a throttled try: 429 with `Retry-After`.
pub fn too_many(wait: Duration) -> axum::response::Response {
    use axum::response::IntoResponse;
    let secs = wait.as_secs().max(1);
    let mut response = (
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        format!("Too many wrong tokens from your address: try again in {secs} s.\n"),
    )
        .into_response();
    if let Ok(v) = secs.to_string().parse() {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
    }
    response
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
            assert!(t.attempt(a, now).is_ok());
        }
        assert_eq!(t.attempt(a, now), Err(Duration::from_secs(1)));
        assert!(t.attempt(b, now).is_ok(), "another address is not held back");
        assert!(t.attempt(a, now + Duration::from_secs(1)).is_ok());
        assert_eq!(
            t.attempt(a, now + Duration::from_secs(1)),
            Err(Duration::from_secs(2))
        );
        assert!(t.attempt(a, now + Duration::from_secs(3)).is_ok());
        assert_eq!(delay(40), MAX_DELAY);
        t.succeeded(a);
        assert!(t.attempt(a, now + Duration::from_secs(3)).is_ok());
        // One IPv6 host holds a /64: its addresses share a record.
        let v6 = |last: u16| Some(IpAddr::from([0x2001, 0xdb8, 1, 2, 0, 0, 0, last]));
        for i in 0..FREE_TRIES as u16 {
            assert!(t.attempt(v6(i), now).is_ok());
        }
        assert!(t.attempt(v6(99), now).is_err());
    }
}
