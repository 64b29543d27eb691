//! The one reader of rate-limit waits: `retry-after-ms` (OpenAI), then `Retry-After` as
//! seconds or as an HTTP date (RFC 9110), for every provider and integration.

use std::time::Duration;

use reqwest::header::HeaderMap;

/// How long the server asked us to wait, if it said; a date in the past is zero.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, chrono::Utc::now())
}

/// [`retry_after`] as of `now` (for HTTP-date values).
pub fn retry_after_at(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let seconds = |v: &str| {
        v.parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
    };
    if let Some(ms) = get("retry-after-ms").and_then(seconds) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = get("retry-after")?;
    if let Some(s) = seconds(value) {
        return Some(Duration::from_secs_f64(s));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    Some(
        (at.with_timezone(&chrono::Utc) - now)
            .to_std()
            .unwrap_or(Duration::ZERO),
    )
}

/// Whole seconds to wait (rounded up), or `default` when the server did not say.
pub fn retry_after_secs(headers: &HeaderMap, default: u64) -> u64 {
    retry_after(headers).map_or(default, |d| d.as_secs_f64().ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn reads_milliseconds_seconds_and_http_dates() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-23T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let at = |pairs| retry_after_at(&headers(pairs), now);
        assert_eq!(at(&[("retry-after", "2")]), Some(Duration::from_secs(2)));
        assert_eq!(at(&[("retry-after", " 1.5 ")]), Some(Duration::from_millis(1500)));
        assert_eq!(
            at(&[("retry-after", "3"), ("retry-after-ms", "150")]),
            Some(Duration::from_millis(150))
        );
        assert_eq!(
            at(&[("retry-after", "Mon, 23 Nov 2026 10:00:30 GMT")]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            at(&[("retry-after", "Mon, 23 Nov 2026 09:00:00 GMT")]),
            Some(Duration::ZERO)
        );
        assert_eq!(at(&[("retry-after", "soon")]), None);
        assert_eq!(at(&[("retry-after", "-1")]), None);
        assert_eq!(at(&[("retry-after", "1e300")]), None);
        assert_eq!(at(&[]), None);
        assert_eq!(retry_after_secs(&headers(&[("retry-after", "1.2")]), 7), 2);
        assert_eq!(retry_after_secs(&headers(&[]), 7), 7);
    }
}
