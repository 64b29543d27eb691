//! `steward review AGENT`: an agent's problem signals over a period, grouped into
//! ranked problems by a deterministic key (how runs ended, which tool failed and how,
//! which judge criterion failed, people's 👎), each with its count, its share of the
//! period's runs, up to five example runs and where the fix likely lies. Private runs
//! count by their metadata only: their error texts are grouped as `[private]`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::store::{RunFilter, RunRow, RunStatus, Store, StoreError};

/// Example runs kept per problem.
const EXAMPLES: usize = 5;
/// Most runs read for one review (the most recent first).
const MAX_RUNS: u32 = 10_000;

/// One group of like signals.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// What went wrong, as the grouping key reads (`ended max_turns`,
    /// `tool http_fetch failed: …`, `judge: The answer links the runbook`, `👎 from people`).
    pub problem: String,
    /// Runs showing it.
    pub runs: usize,
    /// `runs` over the period's runs.
    pub share: f64,
    /// Up to five of them, most recent first.
    pub examples: Vec<String>,
    /// Where the fix likely lies: prompt, skill, tool grant, limits, a missing tool or
    /// data source, the model provider, the app's permissions.
    pub fix_in: &'static str,
}

/// The review of one agent over a period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Review {
    pub agent: String,
    pub since: DateTime<Utc>,
    pub runs: usize,
    /// Most runs first.
    pub problems: Vec<Problem>,
}

/// Where a run that ended this way is likely fixed.
fn fix_for_termination(termination: &str) -> &'static str {
    match termination {
        "max_turns" | "max_tool_calls" | "timeout" | "max_cost" => {
            "limits (or a prompt that takes fewer steps)"
        }
        "provider_error" => "the model provider (keys, limits, fallbacks)",
        "tool_error" => "a tool (its configuration or the service behind it)",
        "script_error" => "the coordinator script",
        "undelivered" => "the Slack, Jira or Notion app's permissions",
        "prompt_unavailable" => "the prompt's host (Notion)",
        _ => "the service (restarts, leases)",
    }
}

/// A tool error as a grouping class: each run of digits blurred to `#`, the first line,
/// at most 80 characters.
fn error_class(error: &str) -> String {
    let mut blurred = String::with_capacity(error.len());
    for c in error.chars() {
        if c.is_ascii_digit() {
            if !blurred.ends_with('#') {
                blurred.push('#');
            }
        } else {
            blurred.push(c);
        }
    }
    let line = blurred.lines().next().unwrap_or_default().trim();
    crate::triggers::event::one_line(line, 80)
}

fn fix_for_tool_error(class: &str) -> &'static str {
    if class.contains("not granted") || class.contains("not in its grant") || class.contains("refused") {
        "the tool grant (tools:) or the agent's private egress"
    } else if class.contains("not configured") || class.contains("not set") {
        "a missing tool or data source (its settings)"
    } else {
        "the tool's use in the prompt or skill, or the service behind it"
    }
}

/// Reviews `agent`'s top-level runs created since `since`.
pub async fn review(store: &dyn Store, agent: &str, since: DateTime<Utc>) -> Result<Review, StoreError> {
    let filter = RunFilter {
        agent: Some(agent.to_string()),
        since: Some(since),
        top_level: true,
        limit: MAX_RUNS,
        ..Default::default()
    };
    let runs: Vec<RunRow> = store.query_runs(&filter).await?;
    // problem → (fix, run ids in order)
    let mut groups: BTreeMap<String, (&'static str, Vec<String>)> = BTreeMap::new();
    let mut add = |problem: String, fix: &'static str, run: &str| {
        let entry = groups.entry(problem).or_insert((fix, Vec::new()));
        if entry.1.last().map(String::as_str) != Some(run) {
            entry.1.push(run.to_string());
        }
    };
    for run in &runs {
        if let Some(t) = run.termination.as_deref().filter(|t| *t != "completed")
            && run.status != RunStatus::Waiting
        {
            add(format!("ended {t}"), fix_for_termination(t), &run.id);
        }
        if run.tool_calls > 0 {
            for e in store.run_events(&run.id).await? {
                if e.kind == "tool_result" && e.data["ok"] == false {
                    let name = e.data["name"].as_str().unwrap_or("?");
                    let class = if run.private {
                        "[private]".to_string()
                    } else {
                        error_class(e.data["error"].as_str().unwrap_or_default())
                    };
                    let fix = fix_for_tool_error(&class);
                    add(format!("tool {name} failed: {class}"), fix, &run.id);
                }
            }
        }
        for s in store.run_scores(&run.id).await? {
            match (s.kind.as_str(), s.passed) {
                ("judge", Some(false)) => add(
                    format!("judge: {}", s.criterion),
                    "the prompt or a skill",
                    &run.id,
                ),
                ("human", Some(false)) => add(
                    "👎 from people".into(),
                    "the prompt or a skill (read their comments)",
                    &run.id,
                ),
                _ => {}
            }
        }
    }
    let total = runs.len();
    let mut problems: Vec<Problem> = groups
        .into_iter()
        .map(|(problem, (fix_in, ids))| Problem {
            runs: ids.len(),
            share: if total == 0 {
                0.0
            } else {
                ids.len() as f64 / total as f64
            },
            examples: ids.into_iter().take(EXAMPLES).collect(),
            problem,
            fix_in,
        })
        .collect();
    problems.sort_by(|a, b| b.runs.cmp(&a.runs).then_with(|| a.problem.cmp(&b.problem)));
    Ok(Review {
        agent: agent.to_string(),
        since,
        runs: total,
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_group_by_class_not_by_their_numbers() {
        assert_eq!(
            error_class("http_fetch: 503 from https://status.example.com/incidents/42\nmore"),
            error_class("http_fetch: 502 from https://status.example.com/incidents/7")
        );
        assert!(fix_for_tool_error("tool 'x' is not granted to this agent").starts_with("the tool grant"));
        assert!(fix_for_termination("max_turns").starts_with("limits"));
    }
}
