//! Human-friendly durations in configs: `30s`, `10m`, `1h`, `500ms`, or a bare number of seconds.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A duration written as `<number><unit>` with unit `ms`, `s`, `m` or `h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

/// Writes a duration the way configs spell it: `20s`, `10m`, `1h30m`, `1500ms`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) || ms == 0 {
        return format!("{ms}ms");
    }
    let secs = ms / 1000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Parses `500ms`, `30s`, `10m`, `1h`, `1h30m` (and humantime's longer spellings such
/// as `2min` or `1day`); a bare integer means seconds. Values too large to represent
/// are an error, never an overflow.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    humantime::parse_duration(text).map_err(|e| match e {
        humantime::DurationError::NumberOverflow => DurationError::TooLarge(text.to_string()),
        // humantime's own wording ("expected number at 0") means little in a config.
        _ => DurationError::Invalid(text.to_string()),
    })
}

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("duration '{0}' is too large")]
    TooLarge(String),
    #[error("invalid duration '{0}'")]
    Invalid(String),
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HumanDuration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration like 30s, 10m or 1h")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(HumanDuration(Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                u64::try_from(v)
                    .map(|v| HumanDuration(Duration::from_secs(v)))
                    .map_err(|_| E::custom("expected a positive duration like 30s, 10m or 1h"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                parse_duration(v)
                    .map(HumanDuration)
                    .map_err(|e| E::custom(format!("{e}, expected a duration like 30s, 10m or 1h")))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_duration("ten minutes").is_err());
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn huge_values_are_errors_not_overflows() {
        assert!(parse_duration("99999999999999999999h").is_err());
        assert!(parse_duration("18446744073709551615h").is_err());
        assert!(parse_duration("5124095576030432h5124095576030432h").is_err());
    }
}
