//! Cron triggers: standard 5-field crontab lines (normalized for the `cron` crate, which
//! wants seconds), a time zone, and which slots are due.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::{Origin, TriggerEvent};
use crate::config::schedule::{parse_schedule, parse_tz};
use crate::config::spec::{CronTrigger, MissedPolicy};
use crate::config::{Config, TriggerSpec};
use serde_json::json;

/// Slots older than this when noticed count as missed (the service was down).
pub const GRACE_SECS: i64 = 120;

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
    /// The trigger event of the run due at `slot`.
    pub fn event(&self, slot: DateTime<Utc>) -> TriggerEvent {
        let slot = slot.to_rfc3339();
        TriggerEvent {
            source: "cron".into(),
            kind: "cron".into(),
            summary: format!("cron {} at {slot}", self.expr),
            text: None,
            payload: json!({"schedule": self.expr, "timezone": self.tz.name(), "slot": slot, "agent": self.agent}),
            private: false,
            origin: Origin::Cron {
                agent: self.agent.clone(),
                trigger: self.index,
                schedule: self.expr.clone(),
                slot,
            },
            attachments: Vec::new(),
            traceparent: None,
            action_token: None,
        }
    }

    /// One key per agent, trigger and slot: a slot fires once however many replicas see it.
    pub fn dedupe_key(&self, slot: DateTime<Utc>) -> String {
        format!("cron:{}:{}:{}", self.agent, self.index, slot.to_rfc3339())
    }

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
                ..
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

/// Whether cron `rule` (trigger `index` of `agent`) is the one that fired `event`;
/// `None` when `rule` is not a cron rule.
pub fn matches(rule: &TriggerSpec, agent: &str, index: usize, event: &TriggerEvent) -> Option<bool> {
    let TriggerSpec::Cron(_) = rule else {
        return None;
    };
    Some(matches!(&event.origin, Origin::Cron { agent: a, trigger, .. } if a == agent && *trigger == index))
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
