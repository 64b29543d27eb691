//! Cron triggers: standard 5-field crontab lines (normalized for the `cron` crate, which
//! wants seconds), a time zone, and which slots are due.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::config::spec::{CronTrigger, MissedPolicy};
use crate::config::{Config, TriggerSpec};

/// Slots older than this when noticed count as missed (the service was down).
pub const GRACE_SECS: i64 = 120;

/// Parses a crontab expression: 5 fields (minute hour day month weekday), or 6 with
/// seconds first.
pub fn parse_schedule(expr: &str) -> Result<cron::Schedule, String> {
    let fields = expr.split_whitespace().count();
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let normalized = match fields {
        5 => format!(
            "0 {} {}",
            parts[..4].join(" "),
            weekdays(parts[4]).map_err(|e| format!("invalid cron expression '{expr}': {e}"))?
        ),
        6 => format!(
            "{} {}",
            parts[..5].join(" "),
            weekdays(parts[5]).map_err(|e| format!("invalid cron expression '{expr}': {e}"))?
        ),
        n => {
            return Err(format!(
                "invalid cron expression '{expr}': expected 5 fields (minute hour day month weekday), found {n}"
            ));
        }
    };
    cron::Schedule::from_str(&normalized).map_err(|e| format!("invalid cron expression '{expr}': {e}"))
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

pub fn parse_tz(name: Option<&str>) -> Result<Tz, String> {
    match name {
        None => Ok(Tz::UTC),
        Some(n) => n.parse().map_err(|_| {
            format!("unknown time zone '{n}', expected an IANA name such as America/Los_Angeles")
        }),
    }
}

/// One cron trigger of one agent.
#[derive(Debug, Clone)]
pub struct CronJob {
    pub agent: String,
    pub index: usize,
    pub expr: String,
    pub schedule: cron::Schedule,
    pub tz: Tz,
    pub missed: MissedPolicy,
}

impl CronJob {
    /// Key of this job's last-fired slot in the store.
    pub fn state_key(&self) -> String {
        format!("cron:{}:{}", self.agent, self.index)
    }

    /// Slots in `(after, until]`, in order.
    pub fn slots(&self, after: DateTime<Utc>, until: DateTime<Utc>) -> Vec<DateTime<Utc>> {
        self.schedule
            .after(&after.with_timezone(&self.tz))
            .map(|t| t.with_timezone(&Utc))
            .take_while(|t| *t <= until)
            .take(10_000)
            .collect()
    }

    /// Which slot (if any) to fire now, given the last fired slot: the latest due slot if
    /// it is recent; a stale one (missed while down) only with `missed: run_once`.
    pub fn due(
        &self,
        last: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
        let slots = self.slots(last, now);
        let Some(&latest) = slots.last() else {
            return (None, None);
        };
        let recent = (now - latest).num_seconds() <= GRACE_SECS;
        let fire = (recent || self.missed == MissedPolicy::RunOnce).then_some(latest);
        (fire, Some(latest))
    }
}

/// Every cron trigger in the config (assumes it validated).
pub fn jobs(config: &Config) -> Vec<CronJob> {
    let mut out = Vec::new();
    for agent in config.agents.values() {
        for (index, t) in agent.triggers.iter().enumerate() {
            if let TriggerSpec::Cron(CronTrigger {
                schedule,
                timezone,
                missed,
            }) = t
                && let (Ok(s), Ok(tz)) = (parse_schedule(schedule), parse_tz(timezone.as_deref()))
            {
                out.push(CronJob {
                    agent: agent.name.clone(),
                    index,
                    expr: schedule.clone(),
                    schedule: s,
                    tz,
                    missed: missed.unwrap_or_default(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn job(expr: &str, tz: &str, missed: MissedPolicy) -> CronJob {
        CronJob {
            agent: "a".into(),
            index: 0,
            expr: expr.into(),
            schedule: parse_schedule(expr).unwrap(),
            tz: parse_tz(Some(tz)).unwrap(),
            missed,
        }
    }

    #[test]
    fn five_fields_are_normalized_and_bad_lines_rejected() {
        assert!(parse_schedule("0 9 * * 1-5").is_ok());
        assert!(parse_schedule("*/15 * * * *").is_ok());
        assert!(
            parse_schedule("0 9 * *")
                .unwrap_err()
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

    #[test]
    fn weekday_mornings_in_a_zone() {
        let j = job("0 9 * * 1-5", "America/Los_Angeles", MissedPolicy::Skip);
        // Friday 2026-01-09 08:00 PST = 16:00 UTC; the next slots are Fri 17:00 UTC and Mon 17:00 UTC.
        let from = Utc.with_ymd_and_hms(2026, 1, 9, 16, 0, 0).unwrap();
        let slots = j.slots(from, from + chrono::Duration::days(4));
        assert_eq!(
            slots,
            vec![
                Utc.with_ymd_and_hms(2026, 1, 9, 17, 0, 0).unwrap(),
                Utc.with_ymd_and_hms(2026, 1, 12, 17, 0, 0).unwrap()
            ]
        );
    }

    #[test]
    fn missed_slots_fire_once_or_not_at_all() {
        let last = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 5, 30, 0).unwrap();
        let skip = job("0 * * * *", "UTC", MissedPolicy::Skip);
        let (fire, seen) = skip.due(last, now);
        assert_eq!(fire, None);
        assert_eq!(seen, Some(Utc.with_ymd_and_hms(2026, 1, 1, 5, 0, 0).unwrap()));
        let once = job("0 * * * *", "UTC", MissedPolicy::RunOnce);
        assert_eq!(once.due(last, now).0, seen);
        // A slot that just passed fires either way.
        let just = Utc.with_ymd_and_hms(2026, 1, 1, 5, 0, 30).unwrap();
        assert_eq!(skip.due(last, just).0, seen);
    }
}
