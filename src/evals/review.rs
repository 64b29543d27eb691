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
    /// The problem in a sentence, as the `reviewer` subagent names it from the evidence
    /// (absent without a reviewer, or with `--no-model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
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
            summary: None,
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

/// Problems the reviewer names, at most (the rest keep their grouping key).
pub const NAMED: usize = 10;

/// The reviewer's question; the evidence is the attached file `problems.md`
/// ([`evidence_file`]).
pub fn reviewer_question(review: &Review) -> String {
    format!(
        "Name the problems of the automated agent {}. The attached file problems.md lists {} problems found in its {} runs, \
         ranked: each with its grouping key, how many runs show it and its example runs (request, answer, ending and the \
         signals on each; private runs show metadata and scores only). For each numbered problem, write one sentence that \
         says what goes wrong for the people using the agent, concretely, from the evidence (not the grouping key again). \
         Answer with one JSON object and nothing else: {{\"problems\": [{{\"n\": 1, \"name\": \"...\"}}]}}",
        review.agent,
        review.problems.len().min(NAMED),
        review.runs
    )
}

/// The reviewer's file: each of the first [`NAMED`] problems with its examples'
/// evidence (`examples[i]` for problem `i`).
pub fn evidence_file(review: &Review, examples: &[Vec<super::improve::evidence::RunEvidence>]) -> String {
    let mut out = String::new();
    for (n, (p, runs)) in review.problems.iter().zip(examples).take(NAMED).enumerate() {
        let head = format!(
            "Problem {}: {} ({} runs, {:.0}% of the period's)",
            n + 1,
            p.problem,
            p.runs,
            p.share * 100.0
        );
        out.push_str(&super::improve::evidence::markdown(&head, runs));
        out.push_str("\n\n");
    }
    out
}

/// The names in the reviewer's answer (`{"problems": [{"n", "name"}]}`) as (index into
/// `review.problems`, sentence); an answer naming none of them is refused.
pub fn names(review: &Review, answer: &serde_json::Value) -> Result<Vec<(usize, String)>, String> {
    let named: Vec<(usize, String)> = answer["problems"]
        .as_array()
        .ok_or("no \"problems\" list")?
        .iter()
        .filter_map(|item| {
            let i = usize::try_from(item["n"].as_u64()?).ok()?.checked_sub(1)?;
            let name = item["name"].as_str()?.trim();
            (i < review.problems.len() && !name.is_empty())
                .then(|| (i, crate::triggers::event::one_line(name, 300)))
        })
        .collect();
    if named.is_empty() {
        return Err("no problem was named (each item needs \"n\" and \"name\")".into());
    }
    Ok(named)
}

/// Sets each named problem's `summary`.
pub fn set_names(review: &mut Review, named: Vec<(usize, String)>) {
    for (i, name) in named {
        if let Some(p) = review.problems.get_mut(i) {
            p.summary = Some(name);
        }
    }
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

    #[test]
    fn the_reviewers_names_attach_to_their_problems() {
        let problem = |name: &str| Problem {
            problem: name.into(),
            runs: 1,
            share: 0.5,
            examples: vec![],
            fix_in: "the prompt or a skill",
            summary: None,
        };
        let mut review = Review {
            agent: "helpdesk".into(),
            since: Utc::now(),
            runs: 2,
            problems: vec![problem("👎 from people"), problem("ended max_turns")],
        };
        let answer = serde_json::json!({"problems": [{"n": 2, "name": "Long VPN questions run out of turns."}, {"n": 9, "name": "x"}]});
        let named = names(&review, &answer).unwrap();
        set_names(&mut review, named);
        assert_eq!(review.problems[0].summary, None);
        assert_eq!(
            review.problems[1].summary.as_deref(),
            Some("Long VPN questions run out of turns.")
        );
        assert!(names(&review, &serde_json::json!({"problems": []})).is_err());
    }
}
