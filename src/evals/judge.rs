//! Subjective criteria, scored by a judge model: the `judge` subagent's config (its own
//! model where it names one, so the judge is not the model it grades), asked one
//! criterion at a time for a JSON verdict. An answer in another shape is asked for once
//! more, then counted as an error, never as a pass.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::run::{Lineage, Runner};
use crate::store::StoredEvent;
use crate::triggers::TriggerEvent;

/// Longest transcript kept (a long one is a file the judge reads in parts); the rest
/// is cut with a note.
pub const MAX_TRANSCRIPT_CHARS: usize = 1_000_000;

/// One criterion's verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Verdict {
    pub criterion: String,
    pub passed: bool,
    /// 0 to 1.
    pub score: f64,
    pub explanation: String,
    /// The judge model (`provider/model`).
    pub model: String,
    pub cost_usd: f64,
    /// Set when the judge could not give a verdict (the criterion then fails).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the judge reads: the request, the tool calls with their results, the answer.
pub fn transcript(trigger: &TriggerEvent, events: &[StoredEvent], answer: Option<&str>) -> String {
    let mut out = format!(
        "## The request\n\n{}\n## What the agent did\n\n",
        trigger.to_prompt()
    );
    let mut any = false;
    for e in events {
        match e.kind.as_str() {
            "tool_call" => {
                any = true;
                out.push_str(&format!(
                    "- called {} with {}\n",
                    e.data["name"].as_str().unwrap_or("?"),
                    e.data["arguments"].as_str().unwrap_or("{}")
                ));
            }
            "tool_result" => {
                let body = e.data["content"]
                    .as_str()
                    .or(e.data["error"].as_str())
                    .unwrap_or_default();
                out.push_str(&format!(
                    "  → {}: {}\n",
                    if e.data["ok"].as_bool() == Some(true) {
                        "result"
                    } else {
                        "error"
                    },
                    crate::tokens::floor_char(body, 4000)
                ));
            }
            _ => {}
        }
    }
    if !any {
        out.push_str("(no tool calls)\n");
    }
    out.push_str(&format!(
        "\n## The agent's final answer\n\n{}\n",
        answer.unwrap_or("(no answer)")
    ));
    if out.chars().count() > MAX_TRANSCRIPT_CHARS {
        let cut: String = out.chars().take(MAX_TRANSCRIPT_CHARS).collect();
        out = format!("{cut}\n\n[transcript cut at {MAX_TRANSCRIPT_CHARS} characters]");
    }
    out
}

/// What the judge reads about a run.
#[derive(Debug, Clone)]
pub struct Material {
    /// The transcript ([`transcript`]).
    pub transcript: String,
    /// Give the transcript as a virtual file (`transcript.md`) instead of inline, so a
    /// long run does not fill the judge's context: the judge reads what it needs.
    pub as_file: bool,
    /// The judged run was private: the judge's own run records no text.
    pub private: bool,
    /// The judged run, recorded as the judge run's parent.
    pub parent: Option<String>,
}

impl Material {
    /// Inline up to [`INLINE_CHARS`], as a file beyond.
    pub fn new(transcript: String) -> Material {
        let as_file = transcript.chars().count() > INLINE_CHARS;
        Material {
            transcript,
            as_file,
            private: false,
            parent: None,
        }
    }
}

/// Longest transcript given inline; longer ones become a file.
pub const INLINE_CHARS: usize = 6_000;

/// The judge's question for one criterion.
pub fn question(criterion: &str, material: &Material) -> String {
    let body = if material.as_file {
        format!(
            "The run's transcript ({} characters: the request, each tool call with its result, the final answer) is the attached file transcript.md. Read the parts you need with the file tools; do not guess.\n",
            material.transcript.chars().count()
        )
    } else {
        material.transcript.clone()
    };
    format!(
        "Grade an automated agent's run against one criterion.\n\nCriterion: {criterion}\n\n{body}\n\
         Answer with one JSON object and nothing else: \
         {{\"pass\": true or false, \"score\": a number from 0 to 1, \"explanation\": \"one or two sentences citing the run\"}}"
    )
}

/// The verdict in `answer`, if it holds one: the first `{` to the last `}` as JSON
/// with a boolean `pass`.
fn parse(answer: &str) -> Option<(bool, f64, String)> {
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    let v: Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    let passed = v["pass"].as_bool()?;
    let score = v["score"]
        .as_f64()
        .unwrap_or(if passed { 1.0 } else { 0.0 })
        .clamp(0.0, 1.0);
    let explanation = v["explanation"].as_str().unwrap_or_default().to_string();
    Some((passed, score, explanation))
}

/// Scores `criterion` with `judge` (a run of its own on `runner`).
pub async fn score(
    runner: &Runner,
    judge: &Arc<AgentConfig>,
    criterion: &str,
    material: &Material,
) -> Verdict {
    let model = judge.models.first().map(|m| m.to_string()).unwrap_or_default();
    let mut verdict = Verdict {
        criterion: criterion.to_string(),
        passed: false,
        score: 0.0,
        explanation: String::new(),
        model,
        cost_usd: 0.0,
        error: None,
    };
    let mut last = String::new();
    for attempt in 0..2 {
        let mut prompt = question(criterion, material);
        if attempt > 0 {
            prompt.push_str("\n\nYour previous answer was not a JSON object with a boolean \"pass\". Answer with the JSON object only.");
        }
        let mut trigger = TriggerEvent::from_cli(json!({ "text": prompt }));
        trigger.private = material.private;
        if material.as_file {
            trigger.attachments.push(crate::files::NewFile {
                name: "transcript.md".into(),
                mime: "text/markdown".into(),
                content: material.transcript.clone().into_bytes(),
            });
        }
        let mut lineage = Lineage::root(judge);
        lineage.parent_id = material.parent.clone();
        let outcome = match runner
            .run_in(judge, &trigger, lineage, CancellationToken::new())
            .await
        {
            Ok(o) => o,
            Err(e) => {
                verdict.error = Some(format!("the judge could not run: {e}"));
                return verdict;
            }
        };
        verdict.cost_usd += outcome.cost_usd;
        let Some(answer) = outcome.final_text else {
            last = outcome
                .error
                .unwrap_or_else(|| outcome.termination.as_str().to_string());
            continue;
        };
        if let Some((passed, score, explanation)) = parse(&answer) {
            verdict.passed = passed;
            verdict.score = score;
            verdict.explanation = explanation;
            return verdict;
        }
        last = crate::triggers::event::one_line(&answer, 200);
    }
    verdict.error = Some(format!("the judge did not answer with a verdict: {last}"));
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_json_with_a_boolean_pass() {
        assert_eq!(
            parse("Sure.\n{\"pass\": true, \"score\": 0.9, \"explanation\": \"Cites the page.\"}"),
            Some((true, 0.9, "Cites the page.".into()))
        );
        assert_eq!(parse("{\"pass\": false}"), Some((false, 0.0, String::new())));
        assert_eq!(parse("PASS: looks fine"), None);
        assert_eq!(parse("{\"pass\": \"yes\"}"), None);
    }
}
