//! Objective expectations, checked against what the run recorded: its tool calls,
//! termination, answer, reply destination, files and totals.

use serde::Serialize;
use serde_json::Value;

use super::case::{CallMatcher, Expectations};
use crate::store::StoredEvent;
use crate::types::RunOutcome;

/// One checked expectation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Check {
    /// What was expected, e.g. `tools_called: http_fetch`.
    pub name: String,
    pub passed: bool,
    /// What the run did instead, when it failed.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Check {
    fn new(name: impl Into<String>, passed: bool, detail: impl Into<String>) -> Check {
        let detail = if passed { String::new() } else { detail.into() };
        Check {
            name: name.into(),
            passed,
            detail,
        }
    }
}

/// What a run did, read from its events.
#[derive(Debug, Default)]
pub struct Observed {
    /// Tool calls in order: name and parsed arguments.
    pub calls: Vec<(String, Value)>,
    /// Where the answer was posted: `thread`, `jira_comment`, `notion_comment`.
    pub posted_to: Option<&'static str>,
    pub files: usize,
}

impl Observed {
    pub fn from_events(events: &[StoredEvent], files: usize) -> Observed {
        let mut out = Observed {
            files,
            ..Observed::default()
        };
        for e in events {
            match e.kind.as_str() {
                "tool_call" => {
                    let name = e.data["name"].as_str().unwrap_or_default().to_string();
                    let args = e.data["arguments"]
                        .as_str()
                        .and_then(|a| serde_json::from_str(a).ok())
                        .unwrap_or(Value::Null);
                    out.calls.push((name, args));
                }
                "reply" => {
                    let d = &e.data["destination"];
                    out.posted_to = if d.get("slack").is_some() {
                        Some("thread")
                    } else if d.get("jira").is_some() {
                        Some("jira_comment")
                    } else if d.get("notion").is_some() {
                        Some("notion_comment")
                    } else {
                        None
                    };
                }
                _ => {}
            }
        }
        out
    }

    fn count(&self, tool: &str) -> usize {
        self.calls.iter().filter(|(n, _)| n == tool).count()
    }
}

/// Whether `actual` satisfies `expected`: strings by case-insensitive containment,
/// anything else by equality.
fn arg_matches(actual: &Value, expected: &Value) -> bool {
    match expected {
        Value::String(want) => {
            let have = match actual {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            have.to_lowercase().contains(&want.to_lowercase())
        }
        other => actual == other,
    }
}

/// Every expectation of `expect` against the run.
pub fn check(expect: &Expectations, outcome: &RunOutcome, seen: &Observed) -> Vec<Check> {
    let mut out = Vec::new();
    let called: Vec<&str> = seen.calls.iter().map(|(n, _)| n.as_str()).collect();
    for m in &expect.tools_called {
        match m {
            CallMatcher::Name(name) => out.push(Check::new(
                format!("tools_called: {name}"),
                seen.count(name) > 0,
                format!("not called (calls: [{}])", called.join(", ")),
            )),
            CallMatcher::WithArgs { name, args } => {
                let args: Vec<(String, Value)> = args
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or(Value::Null)))
                    .collect();
                let hit = seen
                    .calls
                    .iter()
                    .any(|(n, a)| n == name && args.iter().all(|(k, v)| arg_matches(&a[k.as_str()], v)));
                let shown: Vec<String> = seen
                    .calls
                    .iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, a)| a.to_string())
                    .collect();
                out.push(Check::new(
                    format!(
                        "tools_called: {name} with {}",
                        args.iter()
                            .map(|(k, v)| format!("{k}~{v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    hit,
                    if shown.is_empty() {
                        "not called".to_string()
                    } else {
                        format!("called with {}", shown.join(" and "))
                    },
                ));
            }
        }
    }
    for name in &expect.tools_not_called {
        let n = seen.count(name);
        out.push(Check::new(
            format!("tools_not_called: {name}"),
            n == 0,
            format!("called {n} time(s)"),
        ));
    }
    for (name, want) in &expect.calls {
        let n = seen.count(name);
        out.push(Check::new(
            format!("calls: {name} = {want}"),
            n == *want as usize,
            format!("called {n} time(s)"),
        ));
    }
    let termination = outcome.termination.as_str();
    let want = expect.termination.as_deref().unwrap_or("completed");
    out.push(Check::new(
        format!("termination: {want}"),
        termination == want,
        match &outcome.error {
            Some(e) => format!("ended {termination}: {e}"),
            None => format!("ended {termination}"),
        },
    ));
    if let Some(reply) = &expect.reply {
        let text = outcome.final_text.as_deref().unwrap_or_default();
        let lower = text.to_lowercase();
        let quoted = || crate::triggers::event::one_line(text, 160);
        for c in &reply.contains {
            out.push(Check::new(
                format!("reply contains '{c}'"),
                lower.contains(&c.to_lowercase()),
                format!("reply: {}", quoted()),
            ));
        }
        for c in &reply.not_contains {
            out.push(Check::new(
                format!("reply does not contain '{c}'"),
                !lower.contains(&c.to_lowercase()),
                format!("reply: {}", quoted()),
            ));
        }
        if let Some(re) = &reply.matches {
            let hit = regex::Regex::new(re).is_ok_and(|r| r.is_match(text));
            out.push(Check::new(
                format!("reply matches /{re}/"),
                hit,
                format!("reply: {}", quoted()),
            ));
        }
    }
    if let Some(want) = &expect.posted_to {
        let got = seen.posted_to.unwrap_or("none");
        out.push(Check::new(
            format!("posted_to: {want}"),
            got == want,
            format!("posted to {got}"),
        ));
    }
    if let Some(min) = expect.files_created {
        out.push(Check::new(
            format!("files_created >= {min}"),
            seen.files >= min as usize,
            format!("{} file(s)", seen.files),
        ));
    }
    if let Some(max) = expect.max_turns {
        out.push(Check::new(
            format!("turns <= {max}"),
            outcome.turns <= max,
            format!("{} turns", outcome.turns),
        ));
    }
    if let Some(max) = expect.max_tokens {
        let used = outcome.usage.input_tokens + outcome.usage.output_tokens;
        out.push(Check::new(
            format!("tokens <= {max}"),
            used <= max,
            format!("{used} tokens"),
        ));
    }
    if let Some(max) = expect.max_cost_usd {
        out.push(Check::new(
            format!("cost <= ${max}"),
            outcome.cost_usd <= max,
            format!("${:.4}", outcome.cost_usd),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argument_matchers_and_counts() {
        let seen = Observed {
            calls: vec![("http_fetch".into(), json!({"url": "https://Example.com/VPN"}))],
            posted_to: Some("thread"),
            files: 0,
        };
        let expect: Expectations = serde_yaml::from_str(
            "tools_called: [{name: http_fetch, args: {url: example.com/vpn}}]\ntools_not_called: [jira_create_issue]\ncalls: {http_fetch: 2}\nposted_to: thread\n",
        )
        .unwrap();
        let outcome = RunOutcome::new("r");
        let checks = check(&expect, &outcome, &seen);
        let passed: Vec<(&str, bool)> = checks.iter().map(|c| (c.name.as_str(), c.passed)).collect();
        assert_eq!(
            passed,
            [
                ("tools_called: http_fetch with url~\"example.com/vpn\"", true),
                ("tools_not_called: jira_create_issue", true),
                ("calls: http_fetch = 2", false),
                ("termination: completed", true),
                ("posted_to: thread", true),
            ]
        );
        assert_eq!(checks[2].detail, "called 1 time(s)");
    }
}
