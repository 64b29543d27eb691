//! An owner's digest of one agent (`digest:` in its YAML): over the last week, its runs,
//! people's 👍 and 👎, the post-run judge's pass rate and its trend against the week
//! before, and the top problems `steward review` finds, with example runs.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::review::{self, Problem};
use crate::store::{RunFilter, Store, StoreError};

/// The period a digest covers.
pub const PERIOD_DAYS: i64 = 7;
/// Problems a digest shows.
pub const TOP: usize = 3;
/// Most runs read per period.
const MAX_RUNS: u32 = 10_000;

/// Passing judge scores of all.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct PassRate {
    pub passed: usize,
    pub scored: usize,
}

impl PassRate {
    pub fn share(self) -> Option<f64> {
        (self.scored > 0).then(|| self.passed as f64 / self.scored as f64)
    }
}

/// One agent's week.
#[derive(Debug, Clone, Serialize)]
pub struct Digest {
    pub agent: String,
    pub since: DateTime<Utc>,
    pub until: DateTime<Utc>,
    pub runs: usize,
    pub thumbs_up: usize,
    pub thumbs_down: usize,
    pub judge: PassRate,
    /// The week before, for the trend.
    pub judge_before: PassRate,
    /// The top [`TOP`] problems, most runs first.
    pub problems: Vec<Problem>,
}

/// Counts runs, feedback and judge scores of `agent`'s top-level runs in `[since, until)`.
async fn week(
    store: &dyn Store,
    agent: &str,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<(usize, usize, usize, PassRate), StoreError> {
    let filter = RunFilter {
        agent: Some(agent.to_string()),
        since: Some(since),
        until: Some(until),
        top_level: true,
        limit: MAX_RUNS,
        ..Default::default()
    };
    let runs = store.query_runs(&filter).await?;
    let (mut up, mut down, mut judge) = (0, 0, PassRate::default());
    for run in &runs {
        for s in store.run_scores(&run.id).await? {
            match (s.kind.as_str(), s.passed) {
                ("human", Some(true)) => up += 1,
                ("human", Some(false)) => down += 1,
                ("judge", Some(p)) => {
                    judge.scored += 1;
                    judge.passed += usize::from(p);
                }
                _ => {}
            }
        }
    }
    Ok((runs.len(), up, down, judge))
}

/// The digest of `agent` for the week before `now`.
pub async fn gather(store: &dyn Store, agent: &str, now: DateTime<Utc>) -> Result<Digest, StoreError> {
    let since = now - Duration::days(PERIOD_DAYS);
    let (runs, thumbs_up, thumbs_down, judge) = week(store, agent, since, now).await?;
    let (_, _, _, judge_before) = week(store, agent, since - Duration::days(PERIOD_DAYS), since).await?;
    let mut review = review::review(store, agent, since).await?;
    review.problems.truncate(TOP);
    Ok(Digest {
        agent: agent.to_string(),
        since,
        until: now,
        runs,
        thumbs_up,
        thumbs_down,
        judge,
        judge_before,
        problems: review.problems,
    })
}

impl Digest {
    /// The judge's pass rate and its trend, in words: `83% (up from 70%)`.
    pub fn judge_line(&self) -> String {
        match (self.judge.share(), self.judge_before.share()) {
            (None, _) => "no judge scores".into(),
            (Some(now), None) => format!("{:.0}% of {} scores", now * 100.0, self.judge.scored),
            (Some(now), Some(before)) => {
                let trend = if (now - before).abs() < 0.005 {
                    "level with".to_string()
                } else if now > before {
                    "up from".to_string()
                } else {
                    "down from".to_string()
                };
                format!(
                    "{:.0}% of {} scores ({trend} {:.0}% the week before)",
                    now * 100.0,
                    self.judge.scored,
                    before * 100.0
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(judge: PassRate, judge_before: PassRate) -> Digest {
        Digest {
            agent: "helpdesk".into(),
            since: Utc::now(),
            until: Utc::now(),
            runs: 0,
            thumbs_up: 0,
            thumbs_down: 0,
            judge,
            judge_before,
            problems: Vec::new(),
        }
    }

    #[test]
    fn the_judge_line_says_the_trend() {
        let rate = |passed, scored| PassRate { passed, scored };
        assert_eq!(digest(rate(0, 0), rate(1, 2)).judge_line(), "no judge scores");
        assert_eq!(digest(rate(3, 4), rate(0, 0)).judge_line(), "75% of 4 scores");
        assert_eq!(
            digest(rate(3, 4), rate(1, 2)).judge_line(),
            "75% of 4 scores (up from 50% the week before)"
        );
        assert!(
            digest(rate(1, 4), rate(1, 2))
                .judge_line()
                .contains("down from 50%")
        );
    }
}
