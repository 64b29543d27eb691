//! The improver's two answers: expectations for the problem's runs as eval cases
//! (criteria a judge scores and strings the answer must contain), and one candidate
//! change to the config tree as exact-text edits, which steward applies and shows as a
//! unified diff.
//!
//! Edits are `find`/`replace` pairs rather than a diff written by the model: a model's
//! hunk headers and context lines are often off by a line, while an exact passage
//! either occurs once in the file or the edit is refused with the reason (and asked
//! for once more).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Evidence longer than this goes to the improver as a file it reads in parts.
const INLINE_CHARS: usize = 12_000;

/// Expectations for one run's case.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
pub struct CaseExpectations {
    /// The run the case is made from.
    pub run: String,
    /// Plain-language statements a judge scores.
    #[serde(default)]
    pub criteria: Vec<String>,
    /// Strings the final answer must contain (objective checks).
    #[serde(default)]
    pub reply_contains: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct CasesAnswer {
    cases: Vec<CaseExpectations>,
}

/// One exact-text edit of a file of the config tree.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Edit {
    /// Relative to the root (`prompts/helpdesk.md`), or `notion:<page-id>` for a prompt
    /// hosted in Notion.
    pub file: String,
    /// Text that occurs exactly once in the file; empty: append `replace` at the end.
    #[serde(default)]
    pub find: String,
    pub replace: String,
}

/// The candidate change.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct Change {
    /// Why this change fixes the problem, tied to its evidence.
    pub rationale: String,
    pub edits: Vec<Edit>,
}

/// One file before and after the change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileChange {
    pub file: String,
    pub before: String,
    pub after: String,
}

impl Change {
    /// The files after the edits, in order of first edit; `files` holds every file the
    /// improver was shown (path → text). An edit of another file, a `find` that does not
    /// occur exactly once, or a change that changes nothing is refused with the reason.
    pub fn resolve(&self, files: &BTreeMap<String, String>) -> Result<Vec<FileChange>, String> {
        let mut changed: Vec<FileChange> = Vec::new();
        for edit in &self.edits {
            let Some(original) = files.get(&edit.file) else {
                let shown: Vec<&str> = files.keys().map(String::as_str).collect();
                return Err(format!(
                    "the edit names {}, which is not one of the files shown ({})",
                    edit.file,
                    shown.join(", ")
                ));
            };
            let index = match changed.iter().position(|c| c.file == edit.file) {
                Some(i) => i,
                None => {
                    changed.push(FileChange {
                        file: edit.file.clone(),
                        before: original.clone(),
                        after: original.clone(),
                    });
                    changed.len() - 1
                }
            };
            let text = &mut changed[index].after;
            if edit.find.is_empty() {
                if !text.ends_with('\n') && !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&edit.replace);
                continue;
            }
            match text.matches(edit.find.as_str()).count() {
                1 => *text = text.replacen(edit.find.as_str(), &edit.replace, 1),
                0 => {
                    return Err(format!(
                        "the edit's find text does not occur in {}: {:?}",
                        edit.file,
                        crate::triggers::event::one_line(&edit.find, 120)
                    ));
                }
                n => {
                    return Err(format!(
                        "the edit's find text occurs {n} times in {}; quote more of it so it occurs once",
                        edit.file
                    ));
                }
            }
        }
        changed.retain(|c| c.before != c.after);
        if changed.is_empty() {
            return Err("the change changes nothing".into());
        }
        Ok(changed)
    }
}

/// The change as a unified diff (`a/<file>`, `b/<file>`), three lines of context.
pub fn unified_diff(changes: &[FileChange]) -> String {
    let mut out = String::new();
    for c in changes {
        let diff = similar::TextDiff::from_lines(&c.before, &c.after);
        let text = diff
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{}", c.file), &format!("b/{}", c.file))
            .to_string();
        out.push_str(&text);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The first question: expectations for each run's case.
pub fn cases_question(evidence: &str, runs: &[String]) -> String {
    format!(
        "Draft eval expectations. An automated agent's production runs below show one problem. \
         Each run will become an eval case that replays its request with the same tool results; \
         write what a good run does instead, so the case fails on the agent as it is and passes \
         once the problem is fixed.\n\
         - criteria: plain-language statements a judge checks against a run's transcript, one fact each;\n\
         - reply_contains: short exact strings the final answer must contain, only where the fix is objective \
         (a link, a ticket key, a command).\n\
         Use the people's comments and the judge's explanations; do not invent requirements they do not support.\n\n\
         Runs: {}\n\n{}\n\
         Answer with one JSON object and nothing else: \
         {{\"cases\": [{{\"run\": \"<run id>\", \"criteria\": [\"...\"], \"reply_contains\": [\"...\"]}}]}}",
        runs.join(", "),
        inline_or_file(evidence)
    )
}

/// The second question: one candidate change over `files`.
pub fn change_question(
    evidence: &str,
    cases: &[CaseExpectations],
    files: &BTreeMap<String, String>,
) -> String {
    let mut shown = String::new();
    for (path, text) in files {
        shown.push_str(&format!("\n--- {path} ---\n{text}\n--- end of {path} ---\n"));
    }
    format!(
        "Propose one change to the agent's configuration that fixes the problem below. \
         The change is tested: the agent's eval cases run before and after it, and it is kept only if \
         the new cases pass more often and no existing case passes less often. Change as little as \
         fixes the problem; prefer the prompt or a skill's instructions over limits and tool grants.\n\n\
         New cases (what a good run does):\n{}\n\n{}\n\
         Files you may change (path, then full text):\n{shown}\n\
         Answer with one JSON object and nothing else: \
         {{\"rationale\": \"why this fixes the problem, citing the runs\", \
         \"edits\": [{{\"file\": \"<path as shown>\", \"find\": \"<text that occurs exactly once in the file; empty to append>\", \"replace\": \"<its replacement>\"}}]}}",
        serde_json::to_string_pretty(cases).unwrap_or_default(),
        inline_or_file(evidence),
    )
}

/// The evidence as an attachment, when it is too long to give inline.
pub fn attachment(evidence: &str) -> Option<(&'static str, &str)> {
    (evidence.chars().count() > INLINE_CHARS).then_some(("evidence.md", evidence))
}

fn inline_or_file(evidence: &str) -> String {
    if evidence.chars().count() > INLINE_CHARS {
        format!(
            "The evidence ({} characters: each run's request, answer, ending and the signals on it) is the \
             attached file evidence.md. Read the parts you need with the file tools.\n",
            evidence.chars().count()
        )
    } else {
        evidence.to_string()
    }
}

/// Parses the first answer: expectations for runs among `runs` (others are dropped),
/// at least one with a criterion or a string to contain.
pub fn parse_cases(value: Value, runs: &[String]) -> Result<Vec<CaseExpectations>, String> {
    let answer: CasesAnswer = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let cases: Vec<CaseExpectations> = answer
        .cases
        .into_iter()
        .filter(|c| runs.contains(&c.run))
        .filter(|c| !c.criteria.is_empty() || !c.reply_contains.is_empty())
        .collect();
    if cases.is_empty() {
        return Err(format!(
            "no case names one of the runs ({}) with a criterion or a string to contain",
            runs.join(", ")
        ));
    }
    Ok(cases)
}

/// Parses the second answer and checks it applies to `files`.
pub fn parse_change(
    value: Value,
    files: &BTreeMap<String, String>,
) -> Result<(Change, Vec<FileChange>), String> {
    let change: Change = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let resolved = change.resolve(files)?;
    Ok((change, resolved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn files() -> BTreeMap<String, String> {
        BTreeMap::from([(
            "prompts/helpdesk.md".to_string(),
            "# Helpdesk\n\nAnswer briefly.\nBe kind.\n".to_string(),
        )])
    }

    fn edit(file: &str, find: &str, replace: &str) -> Edit {
        Edit {
            file: file.into(),
            find: find.into(),
            replace: replace.into(),
        }
    }

    #[test]
    fn edits_apply_once_and_render_as_a_unified_diff() {
        let change = Change {
            rationale: "r".into(),
            edits: vec![
                edit(
                    "prompts/helpdesk.md",
                    "Answer briefly.",
                    "Answer briefly; link the runbook.",
                ),
                edit("prompts/helpdesk.md", "", "Sign off."),
            ],
        };
        let resolved = change.resolve(&files()).unwrap();
        assert_eq!(
            resolved[0].after,
            "# Helpdesk\n\nAnswer briefly; link the runbook.\nBe kind.\nSign off."
        );
        let diff = unified_diff(&resolved);
        assert!(
            diff.starts_with("--- a/prompts/helpdesk.md\n+++ b/prompts/helpdesk.md\n@@"),
            "{diff}"
        );
        assert!(
            diff.contains("-Answer briefly.\n+Answer briefly; link the runbook.\n"),
            "{diff}"
        );
    }

    #[test]
    fn edits_that_do_not_apply_say_why() {
        let refuse = |e: Edit| {
            Change {
                rationale: String::new(),
                edits: vec![e],
            }
            .resolve(&files())
            .unwrap_err()
        };
        assert!(refuse(edit("agents/other.yaml", "x", "y")).contains("not one of the files shown"));
        assert!(refuse(edit("prompts/helpdesk.md", "Missing.", "y")).contains("does not occur"));
        assert!(refuse(edit("prompts/helpdesk.md", "e", "y")).contains("times in prompts/helpdesk.md"));
        assert_eq!(
            refuse(edit("prompts/helpdesk.md", "Be kind.", "Be kind.")),
            "the change changes nothing"
        );
    }

    #[test]
    fn case_answers_keep_only_the_problems_runs_with_something_to_check() {
        let runs = vec!["r1".to_string(), "r2".to_string()];
        let v = json!({"cases": [
            {"run": "r1", "criteria": ["Links the runbook."]},
            {"run": "r2"},
            {"run": "other", "reply_contains": ["x"]}
        ]});
        let cases = parse_cases(v, &runs).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].run, "r1");
        assert!(
            parse_cases(json!({"cases": []}), &runs)
                .unwrap_err()
                .contains("no case names")
        );
    }
}
