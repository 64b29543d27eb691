//! Cron schedules as configs write them: standard 5-field crontab lines (normalized for
//! the `cron` crate, which wants a seconds field) and IANA time zones.

use std::str::FromStr;

use chrono_tz::Tz;

/// Parses a crontab expression: 5 fields (minute hour day month weekday), or 6 with
/// seconds first.
pub fn parse_schedule(expr: &str) -> Result<cron::Schedule, ScheduleError> {
    let invalid = |reason: String| ScheduleError::Expression {
        expr: expr.to_string(),
        reason,
    };
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let normalized = match parts.len() {
        5 => format!(
            "0 {} {}",
            parts[..4].join(" "),
            weekdays(parts[4]).map_err(invalid)?
        ),
        6 => format!(
            "{} {}",
            parts[..5].join(" "),
            weekdays(parts[5]).map_err(invalid)?
        ),
        n => {
            return Err(invalid(format!(
                "expected 5 fields (minute hour day month weekday), found {n}"
            )));
        }
    };
    cron::Schedule::from_str(&normalized).map_err(|e| invalid(e.to_string()))
}

/// A schedule or time zone a config cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("invalid cron expression '{expr}': {reason}")]
    Expression { expr: String, reason: String },
    #[error("unknown time zone '{0}', expected an IANA name such as America/Los_Angeles")]
    TimeZone(String),
}

/// Crontab numbers weekdays 0-7 with 0 and 7 for Sunday; the `cron` crate numbers them
/// 1-7 from Sunday. Numeric lists, ranges and steps are expanded and renumbered; names
/// (`MON-FRI`) and `*` pass through.
fn weekdays(field: &str) -> Result<String, String> {
    if field == "*" || field == "?" || field.chars().any(|c| c.is_ascii_alphabetic()) {
        return Ok(field.to_string());
    }
    let mut days = std::collections::BTreeSet::new();
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (
                r,
                s.parse::<u32>()
                    .map_err(|_| format!("bad step in weekday '{item}'"))?,
            ),
            None => (item, 1),
        };
        let (lo, hi) = match range {
            "*" => (0, 6),
            r => match r.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => {
                    let n = num(r)?;
                    (n, if step > 1 { 6 } else { n })
                }
            },
        };
        if lo > hi || step == 0 {
            return Err(format!("bad weekday range '{item}'"));
        }
        days.extend((lo..=hi).step_by(step as usize).map(|d| d % 7 + 1));
    }
    Ok(days.iter().map(u32::to_string).collect::<Vec<_>>().join(","))
}

fn num(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(n) if n <= 7 => Ok(n),
        _ => Err(format!("weekday '{s}' is not 0-7")),
    }
}

pub fn parse_tz(name: Option<&str>) -> Result<Tz, ScheduleError> {
    match name {
        None => Ok(Tz::UTC),
        Some(n) => n.parse().map_err(|_| ScheduleError::TimeZone(n.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_fields_are_normalized_and_bad_lines_rejected() {
        assert!(parse_schedule("0 9 * * 1-5").is_ok());
        assert!(parse_schedule("*/15 * * * *").is_ok());
        assert!(
            parse_schedule("0 9 * *")
                .unwrap_err()
                .to_string()
                .contains("expected 5 fields")
        );
        assert!(parse_schedule("0 25 * * *").is_err());
        assert!(parse_tz(Some("Mars/Base")).is_err());
    }

    #[test]
    fn crontab_weekdays_are_renumbered() {
        assert_eq!(weekdays("1-5").unwrap(), "2,3,4,5,6");
        assert_eq!(weekdays("0,7").unwrap(), "1");
        assert_eq!(weekdays("*/2").unwrap(), "1,3,5,7");
        assert_eq!(weekdays("MON-FRI").unwrap(), "MON-FRI");
        assert!(weekdays("8").is_err());
    }
}
