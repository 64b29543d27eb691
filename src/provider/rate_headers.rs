//! Providers' rate-limit headers, read on every answer: when a budget (requests or
//! tokens in the current window) is spent, new calls to that model wait until it resets
//! instead of being sent to collect a 429.
//!
//! OpenAI sends `x-ratelimit-remaining-{requests,tokens}` with
//! `x-ratelimit-reset-{requests,tokens}` as Go-style durations (`1s`, `6m0s`, `8.64s`,
//! `20ms`); Anthropic sends `anthropic-ratelimit-{requests,tokens,input-tokens,
//! output-tokens}-remaining` with `...-reset` as RFC 3339 times.

use std::time::Duration;

use reqwest::header::HeaderMap;

/// The budgets each vendor reports, as (remaining header, reset header).
const BUDGETS: &[(&str, &str)] = &[
    ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"),
    (
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    ),
    (
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
    ),
    (
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
    ),
    (
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
    ),
];

/// How long until every spent budget resets: `None` while each has something left
/// (or the provider sends no such headers).
pub fn spent_for(headers: &HeaderMap) -> Option<Duration> {
    spent_for_at(headers, chrono::Utc::now())
}

/// [`spent_for`] as of `now` (for RFC 3339 reset times).
pub fn spent_for_at(headers: &HeaderMap, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    BUDGETS
        .iter()
        .filter(|(remaining, _)| get(remaining).and_then(|v| v.parse::<u64>().ok()) == Some(0))
        .filter_map(|(_, reset)| reset_in(get(reset)?, now))
        .max()
}

/// A reset value as a wait: a Go duration (OpenAI) or an RFC 3339 time (Anthropic).
fn reset_in(value: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(value) {
        return Some(
            (at.with_timezone(&chrono::Utc) - now)
                .to_std()
                .unwrap_or(Duration::ZERO),
        );
    }
    go_duration(value)
}

/// A Go `time.Duration` string (`1h2m3.5s`, `20ms`, `0s`) as a [`Duration`].
fn go_duration(value: &str) -> Option<Duration> {
    let mut rest = value;
    let mut total = 0.0_f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit..];
    }
    (total.is_finite() && total < 1e9).then(|| Duration::from_secs_f64(total))
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
    fn reads_go_durations() {
        assert_eq!(go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(go_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(go_duration("8.64s"), Some(Duration::from_millis(8640)));
        assert_eq!(go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(go_duration(""), None);
        assert_eq!(go_duration("soon"), None);
        assert_eq!(go_duration("5"), None);
    }

    #[test]
    fn a_spent_openai_budget_waits_for_its_reset() {
        // As OpenAI documents them: requests left, tokens spent.
        let h = headers(&[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]);
        assert_eq!(spent_for(&h), Some(Duration::from_secs(360)));
        let fine = headers(&[
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-reset-requests", "1s"),
        ]);
        assert_eq!(spent_for(&fine), None);
        assert_eq!(spent_for(&HeaderMap::new()), None);
    }

    #[test]
    fn a_spent_anthropic_budget_waits_until_its_reset_time() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-25T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let h = headers(&[
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-11-25T10:00:12Z"),
            ("anthropic-ratelimit-input-tokens-remaining", "0"),
            ("anthropic-ratelimit-input-tokens-reset", "2026-11-25T10:00:30Z"),
            ("anthropic-ratelimit-output-tokens-remaining", "8000"),
            ("anthropic-ratelimit-output-tokens-reset", "2026-11-25T10:00:59Z"),
        ]);
        assert_eq!(spent_for_at(&h, now), Some(Duration::from_secs(30)));
        // A reset already past is no wait.
        let past = headers(&[
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-11-25T09:59:00Z"),
        ]);
        assert_eq!(spent_for_at(&past, now), Some(Duration::ZERO));
    }
}
