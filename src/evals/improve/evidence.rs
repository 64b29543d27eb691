//! What the improver reads about a problem's runs: each run's request, answer, ending
//! and the signals on it (failed judge criteria with their explanations, people's 👎
//! with what they wrote). A private run gives its metadata and scores only: its text
//! was never stored, and its feedback comment is not kept either.

use std::fmt::Write as _;

use serde::Serialize;

use crate::store::{Store, StoreError};

/// One run's evidence.
#[derive(Debug, Clone, Serialize)]
pub struct RunEvidence {
    pub id: String,
    pub private: bool,
    /// The request, as stored (`None` for a private run).
    pub request: Option<String>,
    /// The final answer (`None` for a private run or a run without one).
    pub answer: Option<String>,
    pub termination: String,
    /// Failed signals: `judge: <criterion> — <explanation>`, `👎 — <comment>`.
    pub signals: Vec<String>,
}

/// Longest request or answer kept per run (the improver needs the gist, not the log).
const MAX_TEXT: usize = 2_000;

/// The evidence of `ids` (full run ids), in order; unknown ids are skipped.
pub async fn gather(store: &dyn Store, ids: &[String]) -> Result<Vec<RunEvidence>, StoreError> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(run) = store.get_run(id).await? else {
            continue;
        };
        let mut signals = Vec::new();
        for s in store.run_scores(id).await? {
            if s.passed != Some(false) {
                continue;
            }
            // Explanations are never stored for private runs; say so rather than guess.
            let why = match (&s.explanation, run.private) {
                (_, true) => " (private run: no text)".to_string(),
                (Some(e), false) if !e.is_empty() => format!(" — {e}"),
                _ => String::new(),
            };
            match s.kind.as_str() {
                "judge" => signals.push(format!("judge failed \"{}\"{why}", s.criterion)),
                "human" => signals.push(format!("👎 from a person{why}")),
                other => signals.push(format!("{other}: {}{why}", s.criterion)),
            }
        }
        let text = |t: &str| crate::tokens::floor_char(t, MAX_TEXT).to_string();
        out.push(RunEvidence {
            id: run.id.clone(),
            private: run.private,
            request: (!run.private).then(|| text(&run.trigger_summary)),
            answer: run.final_text.as_deref().filter(|_| !run.private).map(text),
            termination: run.termination.clone().unwrap_or_else(|| "running".into()),
            signals,
        });
    }
    Ok(out)
}

/// The evidence as Markdown, one section per run.
pub fn markdown(problem: &str, runs: &[RunEvidence]) -> String {
    let mut out = format!("# Problem\n\n{problem}\n\n# Runs showing it\n");
    for r in runs {
        let _ = write!(out, "\n## Run {}\n\n- ended: {}\n", r.id, r.termination);
        if r.private {
            out.push_str("- private run: only its metadata and scores are shown\n");
        }
        for s in &r.signals {
            let _ = writeln!(out, "- {s}");
        }
        if let Some(q) = &r.request {
            let _ = write!(out, "\nRequest:\n\n> {}\n", q.replace('\n', "\n> "));
        }
        if let Some(a) = &r.answer {
            let _ = write!(out, "\nAnswer:\n\n> {}\n", a.replace('\n', "\n> "));
        }
    }
    out
}
