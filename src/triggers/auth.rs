//! Request authentication: HMAC signatures and bearer tokens, compared in constant time.

use hmac::{KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = hmac::Hmac<Sha256>;

/// Slack refuses requests older than five minutes; so do we.
pub const SLACK_MAX_AGE_SECS: i64 = 300;

/// How old a signed Jira or Notion event may be, by its own timestamp: 23 hours.
/// Within the window a replayed body is a duplicate of the stored event; past it, it is
/// refused. Its dedupe key is kept at least `STEWARD_EVENT_RETENTION` (24 h or more)
/// from its arrival, which may be [`MAX_SKEW_SECS`] before its timestamp: the hour
/// between covers that, so no key is pruned while its body could still be replayed.
pub const REPLAY_WINDOW_SECS: i64 = crate::config::settings::MIN_EVENT_RETENTION.as_secs() as i64 - 3600;
/// How far in the future an event's timestamp may be (clock skew).
pub const MAX_SKEW_SECS: i64 = 300;
const _: () = assert!(
    REPLAY_WINDOW_SECS + MAX_SKEW_SECS < crate::config::settings::MIN_EVENT_RETENTION.as_secs() as i64
);

/// Whether an event stamped `ts_secs` is inside the replay window around `now`: its age
/// in seconds when it is not.
pub fn outside_replay_window(ts_secs: i64, now: i64) -> Option<i64> {
    let age_secs = now.saturating_sub(ts_secs);
    (!(-MAX_SKEW_SECS..=REPLAY_WINDOW_SECS).contains(&age_secs)).then_some(age_secs)
}

/// Why a request was refused (always answered 401, with nothing stored).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing header {0}")]
    Missing(&'static str),
    #[error("malformed header {0}")]
    Malformed(&'static str),
    #[error("request timestamp outside the five-minute window")]
    Stale,
    #[error("stale event: {0}")]
    StaleEvent(String),
    #[error("signature mismatch")]
    Mismatch,
    #[error("no secret configured ({0})")]
    NotConfigured(&'static str),
}

fn mac(secret: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut m = <HmacSha256 as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    for p in parts {
        m.update(p);
    }
    m
}

/// Hex HMAC-SHA256 of the concatenated parts (used by tests and fake servers too).
pub fn sign_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    hex::encode(mac(secret, parts).finalize().into_bytes())
}

/// Checks a hex HMAC-SHA256 in constant time.
fn verify_hex(secret: &[u8], parts: &[&[u8]], given: &str) -> Result<(), AuthError> {
    let bytes = hex::decode(given.trim()).map_err(|_| AuthError::Mismatch)?;
    mac(secret, parts)
        .verify_slice(&bytes)
        .map_err(|_| AuthError::Mismatch)
}

/// Slack's `v0` scheme: `X-Slack-Signature: v0=hex(hmac(secret, "v0:{ts}:{body}"))`
/// with `X-Slack-Request-Timestamp` within five minutes of `now`.
pub fn verify_slack(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), AuthError> {
    if secret.is_empty() {
        return Err(AuthError::NotConfigured("SLACK_SIGNING_SECRET"));
    }
    let ts = timestamp.ok_or(AuthError::Missing("X-Slack-Request-Timestamp"))?;
    let sig = signature.ok_or(AuthError::Missing("X-Slack-Signature"))?;
    let ts_num: i64 = ts
        .trim()
        .parse()
        .map_err(|_| AuthError::Malformed("X-Slack-Request-Timestamp"))?;
    // Checked arithmetic: a timestamp near i64::MIN must not overflow the subtraction.
    let age = now.checked_sub(ts_num).and_then(i64::checked_abs);
    if age.is_none_or(|a| a > SLACK_MAX_AGE_SECS) {
        return Err(AuthError::Stale);
    }
    let hex_sig = sig
        .strip_prefix("v0=")
        .ok_or(AuthError::Malformed("X-Slack-Signature"))?;
    verify_hex(secret.as_bytes(), &[b"v0:", ts.as_bytes(), b":", body], hex_sig)
}

/// `sha256=<hex>` HMAC of the raw body (Jira's `X-Hub-Signature`, Notion's
/// `X-Notion-Signature`).
pub fn verify_sha256_header(
    secret: &str,
    header: Option<&str>,
    name: &'static str,
    body: &[u8],
) -> Result<(), AuthError> {
    let value = header.ok_or(AuthError::Missing(name))?;
    let hex_sig = value
        .trim()
        .strip_prefix("sha256=")
        .ok_or(AuthError::Malformed(name))?;
    verify_hex(secret.as_bytes(), &[body], hex_sig)
}

/// Constant-time equality for tokens, of the two sides' SHA-256 digests: comparing the
/// values themselves would return early on a length mismatch and tell a guesser the
/// token's length.
pub fn token_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::Digest;
    let (a, b) = (sha2::Sha256::digest(a), sha2::Sha256::digest(b));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_signatures() {
        // The example from Slack's "Verifying requests" documentation.
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let ts = "1531420618";
        let sig = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(
            verify_slack(secret, Some(ts), Some(sig), body, 1531420618 + 10),
            Ok(())
        );
        assert_eq!(
            verify_slack(secret, Some(ts), Some(sig), body, 1531420618 + 301),
            Err(AuthError::Stale)
        );
        assert_eq!(
            verify_slack(secret, Some(ts), Some(sig), b"tampered", 1531420618),
            Err(AuthError::Mismatch)
        );
        assert_eq!(
            verify_slack(secret, None, Some(sig), body, 0),
            Err(AuthError::Missing("X-Slack-Request-Timestamp"))
        );
        // Extreme timestamps are stale, not an overflow panic.
        for (ts, now) in [
            (i64::MIN.to_string(), 1531420618),
            ("9223372036854775807".to_string(), -1000),
            ("-9223372036854775808".to_string(), i64::MAX),
        ] {
            assert_eq!(
                verify_slack(secret, Some(&ts), Some(sig), body, now),
                Err(AuthError::Stale)
            );
        }
        assert_eq!(
            verify_slack("", Some(ts), Some(sig), body, 0),
            Err(AuthError::NotConfigured("SLACK_SIGNING_SECRET"))
        );
    }

    #[test]
    fn sha256_headers_and_tokens() {
        let sig = format!("sha256={}", sign_hex(b"s3cret", &[b"{}"]));
        assert_eq!(
            verify_sha256_header("s3cret", Some(&sig), "X-Hub-Signature", b"{}"),
            Ok(())
        );
        assert_eq!(
            verify_sha256_header("other", Some(&sig), "X-Hub-Signature", b"{}"),
            Err(AuthError::Mismatch)
        );
        assert_eq!(
            verify_sha256_header("s3cret", Some("md5=00"), "X-Hub-Signature", b"{}"),
            Err(AuthError::Malformed("X-Hub-Signature"))
        );
        assert!(token_eq(b"abc", b"abc") && !token_eq(b"abc", b"abd") && !token_eq(b"abc", b"abcd"));
    }
}
