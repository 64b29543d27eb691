//! `steward improve`: from a problem `steward review` found (or runs chosen by hand) to
//! a candidate change checked by evals. The problem's runs become eval cases whose
//! expectations the `improver` subagent drafts from the feedback and judge
//! explanations ([`evidence`], [`proposal`]); the improver proposes one change; the
//! agent's whole suite plus the new cases runs live on the current tree and on the
//! candidate, and the [`gate`] accepts the candidate only if the new cases pass more
//! often and no existing case passes less often beyond a tolerance. The result is a
//! folder, `improvements/<agent>/<id>/`: the patch, the new cases, the candidate's
//! recordings (so replay in CI guards the fix) and a report ([`Improvement`]).
//!
//! The orchestration that needs the environment (providers, trees on disk, GitHub)
//! lives in `cli::improve`.

pub mod evidence;
pub mod gate;
pub mod proposal;

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

pub use gate::{CaseDelta, Decision, Rate};
pub use proposal::{CaseExpectations, Change, Edit, FileChange};

/// What one `steward improve` found, proposed and decided.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Improvement {
    /// The folder's name under `improvements/<agent>/`.
    pub id: String,
    pub agent: String,
    /// The problem, as review names it (or "runs chosen by hand").
    pub problem: String,
    /// The problem's runs (private ones included, by id only).
    pub runs: Vec<String>,
    /// Runs that could not become cases, with why (private, too old).
    pub skipped: Vec<String>,
    /// The new cases' ids (`helpdesk/improve-1a2b3c4d`).
    pub new_cases: Vec<String>,
    pub rationale: String,
    /// The change as a unified diff.
    pub patch: String,
    pub trials: u32,
    pub tolerance: f64,
    pub cases: Vec<CaseDelta>,
    pub decision: Decision,
    /// The improver's own model cost.
    pub improver_cost_usd: f64,
}

impl Improvement {
    /// Tokens and cost summed over every case, before and after.
    pub fn totals(&self) -> (u64, u64, f64, f64) {
        self.cases.iter().fold((0, 0, 0.0, 0.0), |(tb, ta, cb, ca), d| {
            (
                tb + d.tokens_before,
                ta + d.tokens_after,
                cb + d.cost_before,
                ca + d.cost_after,
            )
        })
    }

    /// The report for people (and a pull request's body).
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "# Improvement {} for {}\n\n**{}**\n\n## Problem\n\n{}\n\nRuns: {}\n",
            self.id,
            self.agent,
            self.decision.why,
            self.problem,
            self.runs.join(", ")
        );
        for s in &self.skipped {
            let _ = writeln!(out, "- skipped {s}");
        }
        let _ = write!(
            out,
            "\n## The change\n\n{}\n\n```diff\n{}```\n\n## Eval results ({} trials each, live)\n\n| case | before | after | tokens before | tokens after | cost before | cost after |\n|---|---|---|---|---|---|---|\n",
            self.rationale, self.patch, self.trials
        );
        for d in &self.cases {
            let _ = writeln!(
                out,
                "| {}{} | {} | {} | {} | {} | ${:.4} | ${:.4} |",
                d.id,
                if d.new { " (new)" } else { "" },
                d.before,
                d.after,
                d.tokens_before,
                d.tokens_after,
                d.cost_before,
                d.cost_after
            );
        }
        let (tb, ta, cb, ca) = self.totals();
        let _ = write!(
            out,
            "| **all** | | | {tb} | {ta} | ${cb:.4} | ${ca:.4} |\n\nAn existing case may lose at most {:.0}% of its trials. The improver's own calls cost ${:.4}.\n",
            self.tolerance * 100.0,
            self.improver_cost_usd
        );
        out
    }
}
