//! Eval results for people and CI: a table per case, the whole result as JSON, JUnit
//! XML (read by GitHub Actions, GitLab and Jenkins), and a comparison with an earlier
//! JSON result that names regressions.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::suite::{CaseResult, EvalMode};

/// A suite's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub mode: EvalMode,
    pub passed: bool,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn new(mode: EvalMode, cases: Vec<CaseResult>) -> Report {
        Report {
            mode,
            passed: cases.iter().all(|c| c.passed),
            cases,
        }
    }

    /// One block per case: verdict, passes k/n, tokens, cost, latency, then every failed
    /// expectation and judge explanation.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let width = self.cases.iter().map(|c| c.id.len()).max().unwrap_or(4).max(4);
        let _ = writeln!(
            out,
            "{:<6} {:<width$} {:>6} {:>9} {:>9} {:>9}",
            "", "case", "passes", "tokens", "cost", "latency"
        );
        for c in &self.cases {
            let (tokens, cost, latency) = c.totals();
            let _ = writeln!(
                out,
                "{:<6} {:<width$} {:>6} {:>9} {:>9} {:>8}s",
                if c.passed { "PASS" } else { "FAIL" },
                c.id,
                format!("{}/{}", c.passes, c.trials),
                tokens,
                format!("${cost:.4}"),
                format!("{:.1}", latency as f64 / 1000.0),
            );
            if c.passed {
                continue;
            }
            // Trials that failed the same way are told once ("trials 1-3").
            let mut groups: Vec<(Vec<usize>, Vec<String>)> = Vec::new();
            for (n, t) in c.results.iter().enumerate().filter(|(_, t)| !t.passed) {
                let lines = failure_lines(t);
                match groups.iter_mut().find(|(_, l)| *l == lines) {
                    Some((trials, _)) => trials.push(n + 1),
                    None => groups.push((vec![n + 1], lines)),
                }
            }
            for (trials, lines) in groups {
                let label = match trials.as_slice() {
                    _ if c.trials <= 1 => String::new(),
                    [one] => format!("trial {one}: "),
                    [first, .., last] if last - first + 1 == trials.len() => {
                        format!("trials {first}-{last}: ")
                    }
                    many => format!(
                        "trials {}: ",
                        many.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
                    ),
                };
                for (i, line) in lines.iter().enumerate() {
                    let lead = if i == 0 { label.as_str() } else { "" };
                    let _ = writeln!(out, "       {lead}{line}");
                }
            }
        }
        let passed = self.cases.iter().filter(|c| c.passed).count();
        let _ = writeln!(out, "\n{passed}/{} cases passed", self.cases.len());
        out
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// JUnit XML: one test suite, one test case per eval case, a `<failure>` with every
    /// failed expectation.
    pub fn junit(&self) -> String {
        let failures = self.cases.iter().filter(|c| !c.passed).count();
        let total_secs: f64 = self
            .cases
            .iter()
            .flat_map(|c| &c.results)
            .map(|t| t.latency_ms as f64 / 1000.0)
            .sum();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"steward eval\" tests=\"{}\" failures=\"{failures}\" time=\"{total_secs:.3}\">",
            self.cases.len()
        );
        let _ = writeln!(
            out,
            "  <testsuite name=\"steward eval\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{total_secs:.3}\">",
            self.cases.len()
        );
        for c in &self.cases {
            let secs: f64 = c.results.iter().map(|t| t.latency_ms as f64 / 1000.0).sum();
            let _ = write!(
                out,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{secs:.3}\"",
                xml(&c.agent),
                xml(&c.id)
            );
            if c.passed {
                out.push_str("/>\n");
                continue;
            }
            let mut lines = Vec::new();
            for t in &c.results {
                lines.extend(t.error.iter().cloned());
                lines.extend(
                    t.checks
                        .iter()
                        .filter(|k| !k.passed)
                        .map(|k| format!("{}: {}", k.name, k.detail)),
                );
                lines.extend(t.verdicts.iter().filter(|v| !v.passed).map(|v| {
                    format!(
                        "judge \"{}\": {}",
                        v.criterion,
                        v.error.as_deref().unwrap_or(&v.explanation)
                    )
                }));
            }
            let _ = writeln!(
                out,
                ">\n      <failure message=\"passed {}/{} trials, needs {}\">{}</failure>\n    </testcase>",
                c.passes,
                c.trials,
                c.min_pass,
                xml(&lines.join("\n"))
            );
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

/// Text for XML content and attributes.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Characters XML 1.0 cannot hold at all.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => {}
            c => out.push(c),
        }
    }
    out
}

/// The parts of an earlier `--json` result a comparison reads.
#[derive(Debug, Deserialize)]
pub struct Earlier {
    pub cases: Vec<EarlierCase>,
}

#[derive(Debug, Deserialize)]
pub struct EarlierCase {
    pub id: String,
    pub passes: u32,
    pub trials: u32,
    #[serde(default)]
    pub results: Vec<EarlierTrial>,
}

#[derive(Debug, Deserialize)]
pub struct EarlierTrial {
    #[serde(default)]
    pub tokens: u64,
    #[serde(default)]
    pub cost_usd: f64,
}

/// Regressions against `earlier`: a lower pass rate, or tokens or cost per trial up by
/// more than `threshold` (0.2 = 20%). Returns one line per regression.
pub fn compare(now: &Report, earlier: &Earlier, threshold: f64) -> Vec<String> {
    let mut out = Vec::new();
    for c in &now.cases {
        let Some(old) = earlier.cases.iter().find(|o| o.id == c.id) else {
            continue;
        };
        let rate = |p: u32, t: u32| if t == 0 { 0.0 } else { f64::from(p) / f64::from(t) };
        let (was, is) = (rate(old.passes, old.trials), rate(c.passes, c.trials));
        if is < was {
            out.push(format!(
                "{}: pass rate {:.0}% → {:.0}% ({}/{} → {}/{})",
                c.id,
                was * 100.0,
                is * 100.0,
                old.passes,
                old.trials,
                c.passes,
                c.trials
            ));
        }
        let per_trial = |sum: f64, n: usize| if n == 0 { 0.0 } else { sum / n as f64 };
        let old_tokens = per_trial(
            old.results.iter().map(|t| t.tokens as f64).sum(),
            old.results.len(),
        );
        let new_tokens = per_trial(c.results.iter().map(|t| t.tokens as f64).sum(), c.results.len());
        if old_tokens > 0.0 && new_tokens > old_tokens * (1.0 + threshold) {
            out.push(format!(
                "{}: tokens per trial {:.0} → {:.0} (+{:.0}%)",
                c.id,
                old_tokens,
                new_tokens,
                (new_tokens / old_tokens - 1.0) * 100.0
            ));
        }
        let old_cost = per_trial(old.results.iter().map(|t| t.cost_usd).sum(), old.results.len());
        let new_cost = per_trial(c.results.iter().map(|t| t.cost_usd).sum(), c.results.len());
        if old_cost > 0.0 && new_cost > old_cost * (1.0 + threshold) {
            out.push(format!(
                "{}: cost per trial ${:.4} → ${:.4} (+{:.0}%)",
                c.id,
                old_cost,
                new_cost,
                (new_cost / old_cost - 1.0) * 100.0
            ));
        }
    }
    out
}

/// What one failed trial printed: its error, or else each failed check, then each failed
/// judge verdict. A trial with an error (a model answer missing from the recording, a
/// case that could not run) stopped there, so its checks only repeat it and are left out.
fn failure_lines(t: &super::suite::Trial) -> Vec<String> {
    let mut lines = Vec::new();
    match &t.error {
        Some(e) => {
            for (i, line) in e.lines().enumerate() {
                lines.push(if i == 0 {
                    format!("error: {line}")
                } else {
                    line.to_string()
                });
            }
        }
        None => {
            for check in t.checks.iter().filter(|c| !c.passed) {
                lines.push(format!("✗ {}: {}", check.name, check.detail));
            }
        }
    }
    for v in t.verdicts.iter().filter(|v| !v.passed) {
        let why = v.error.as_deref().unwrap_or(&v.explanation);
        lines.push(format!("✗ judge ({:.2}) \"{}\": {why}", v.score, v.criterion));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_and_drops_control_characters() {
        assert_eq!(xml("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;");
    }
}
