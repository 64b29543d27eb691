//! Cron schedules as configs write them: standard 5-field crontab lines, or 6 with
//! seconds in front (normalized for the `cron` crate, which wants a seconds field), and
//! IANA time zones.

use std::str::FromStr;

use chrono_tz::Tz;

/// The five crontab fields, with their ranges (weekday 7 is Sunday too).
const FIELDS: [(&str, &str, u32, u32); 5] = [
    ("minute", "minutes", 0, 59),
    ("hour", "hours", 0, 23),
    ("day of the month", "days of the month", 1, 31),
    ("month", "months", 1, 12),
    ("weekday", "weekdays (0 and 7 are Sunday)", 0, 7),
];

/// Parses a standard 5-field crontab line (minute hour day month weekday), or 6 fields
/// with seconds in front (for schedules under a minute). Errors name the field and its
/// range as written, never the `cron` crate's own form.
pub fn parse_schedule(expr: &str) -> Result<cron::Schedule, ScheduleError> {
    let invalid = |reason: String| ScheduleError::Expression {
        expr: expr.to_string(),
        reason,
    };
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let (seconds, fields) = match parts.len() {
        5 => ("0", &parts[..]),
        6 => (parts[0], &parts[1..]),
        n => {
            return Err(invalid(format!(
                "expected 5 fields (minute hour day month weekday), found {n}"
            )));
        }
    };
    if parts.len() == 6 {
        check_field(seconds, "second", "seconds", 0, 59).map_err(invalid)?;
    }
    for (field, (name, plural, lo, hi)) in fields.iter().zip(FIELDS) {
        check_field(field, name, plural, lo, hi).map_err(invalid)?;
    }
    let normalized = format!(
        "{seconds} {} {}",
        fields[..4].join(" "),
        weekdays(fields[4]).map_err(invalid)?
    );
    cron::Schedule::from_str(&normalized).map_err(|e| invalid(e.to_string()))
}

/// The numbers of one field (lists, ranges, steps) within `lo..=hi`; names (`MON`,
/// `JAN`) and `*` are left to the parser.
fn check_field(field: &str, name: &str, plural: &str, lo: u32, hi: u32) -> Result<(), String> {
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (item, None),
        };
        if let Some(step) = step
            && step.parse::<u32>().map_or(true, |n| n == 0)
        {
            return Err(format!(
                "the {name} field's step '{step}' is not a positive number"
            ));
        }
        for n in range.split('-').filter(|n| *n != "*") {
            if n.chars().any(|c| c.is_ascii_alphabetic()) {
                continue;
            }
            match n.parse::<u32>() {
                Ok(v) if (lo..=hi).contains(&v) => {}
                Ok(v) => return Err(format!("{name} {v} is out of range: {plural} are {lo}-{hi}")),
                Err(_) => return Err(format!("'{item}' is not a valid {name}")),
            }
        }
    }
    Ok(())
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
        let err = parse_schedule("0 25 * * *").unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid cron expression '0 25 * * *': hour 25 is out of range: hours are 0-23"
        );
        // Six fields: seconds in front, for schedules under a minute.
        assert!(parse_schedule("*/2 * * * * *").is_ok());
        let err = parse_schedule("61 0 9 * * 1-5").unwrap_err().to_string();
        assert!(
            err.contains("second 61 is out of range: seconds are 0-59"),
            "{err}"
        );
        assert!(
            parse_schedule("0 9 * * 1 x x")
                .unwrap_err()
                .to_string()
                .contains("found 7")
        );
        assert!(
            parse_schedule("*/0 * * * *")
                .unwrap_err()
                .to_string()
                .contains("step '0'")
        );
        assert!(
            parse_schedule("0 9 32 * *")
                .unwrap_err()
                .to_string()
                .contains("days of the month are 1-31")
        );
        assert!(parse_schedule("0 9 * JAN-MAR MON").is_ok());
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
