//! The gate's decision: a candidate is accepted only if the new cases pass more often
//! on it than on the current tree, and no existing case's pass rate falls by more than
//! the tolerance.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::evals::CaseResult;

/// Default share of an existing case's trials a candidate may lose (one trial in three
/// at the default three trials is noise for a live model; a whole case is not).
pub const DEFAULT_TOLERANCE: f64 = 0.34;

/// One case before and after.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CaseDelta {
    pub id: String,
    /// Made from the problem's runs.
    pub new: bool,
    pub before: Rate,
    pub after: Rate,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub cost_before: f64,
    pub cost_after: f64,
}

/// Passing trials of all.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Rate {
    pub passes: u32,
    pub trials: u32,
}

impl Rate {
    pub fn share(self) -> f64 {
        if self.trials == 0 {
            0.0
        } else {
            f64::from(self.passes) / f64::from(self.trials)
        }
    }

    fn add(self, other: Rate) -> Rate {
        Rate {
            passes: self.passes + other.passes,
            trials: self.trials + other.trials,
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.passes, self.trials)
    }
}

/// The gate's verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Decision {
    pub accepted: bool,
    /// In a sentence.
    pub why: String,
    /// Existing cases the candidate broke (beyond the tolerance).
    pub broke: Vec<String>,
}

fn rate(c: &CaseResult) -> Rate {
    Rate {
        passes: c.passes,
        trials: c.trials,
    }
}

/// Pairs `before` and `after` by case id and decides. Cases only on one side count as
/// failing every trial on the other.
pub fn decide(
    before: &[CaseResult],
    after: &[CaseResult],
    new: &BTreeSet<String>,
    tolerance: f64,
) -> (Vec<CaseDelta>, Decision) {
    let mut pairs: BTreeMap<&str, (Option<&CaseResult>, Option<&CaseResult>)> = BTreeMap::new();
    for c in before {
        pairs.entry(&c.id).or_default().0 = Some(c);
    }
    for c in after {
        pairs.entry(&c.id).or_default().1 = Some(c);
    }
    let side = |c: Option<&CaseResult>, other: Option<&CaseResult>| match (c, other) {
        (Some(c), _) => (rate(c), c.totals().0, c.totals().1),
        (None, Some(o)) => (
            Rate {
                passes: 0,
                trials: o.trials,
            },
            0,
            0.0,
        ),
        (None, None) => (Rate::default(), 0, 0.0),
    };
    let deltas: Vec<CaseDelta> = pairs
        .into_iter()
        .map(|(id, (b, a))| {
            let (before, tokens_before, cost_before) = side(b, a);
            let (after, tokens_after, cost_after) = side(a, b);
            CaseDelta {
                id: id.to_string(),
                new: new.contains(id),
                before,
                after,
                tokens_before,
                tokens_after,
                cost_before,
                cost_after,
            }
        })
        .collect();
    let (mut new_before, mut new_after) = (Rate::default(), Rate::default());
    for d in deltas.iter().filter(|d| d.new) {
        new_before = new_before.add(d.before);
        new_after = new_after.add(d.after);
    }
    let broke: Vec<&CaseDelta> = deltas
        .iter()
        .filter(|d| !d.new && d.before.share() - d.after.share() > tolerance + 1e-9)
        .collect();
    let decision = if !broke.is_empty() {
        let named: Vec<String> = broke
            .iter()
            .map(|d| format!("{} ({} → {})", d.id, d.before, d.after))
            .collect();
        Decision {
            accepted: false,
            why: format!(
                "rejected: it breaks {} (more than {:.0}% of trials lost)",
                named.join(", "),
                tolerance * 100.0
            ),
            broke: broke.iter().map(|d| d.id.clone()).collect(),
        }
    } else if new_after.share() <= new_before.share() {
        Decision {
            accepted: false,
            why: format!(
                "rejected: the new cases pass no more often ({new_before} trials before, {new_after} after)"
            ),
            broke: Vec::new(),
        }
    } else {
        Decision {
            accepted: true,
            why: format!(
                "accepted: the new cases pass {new_after} trials (were {new_before}) and no existing case lost more than {:.0}% of its trials",
                tolerance * 100.0
            ),
            broke: Vec::new(),
        }
    };
    (deltas, decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evals::suite::broken;

    fn result(id: &str, passes: u32, trials: u32) -> CaseResult {
        let mut c = broken(id, "helpdesk", String::new());
        c.passes = passes;
        c.trials = trials;
        c.passed = passes == trials;
        c
    }

    #[test]
    fn accepts_a_fix_that_keeps_existing_cases() {
        let new = BTreeSet::from(["helpdesk/improve-1".to_string()]);
        let before = [
            result("helpdesk/improve-1", 0, 3),
            result("helpdesk/greeting", 3, 3),
        ];
        let after = [
            result("helpdesk/improve-1", 3, 3),
            result("helpdesk/greeting", 2, 3),
        ];
        let (deltas, d) = decide(&before, &after, &new, DEFAULT_TOLERANCE);
        assert!(d.accepted, "{}", d.why);
        assert_eq!(deltas.len(), 2);
        assert!(d.why.contains("3/3 trials (were 0/3)"), "{}", d.why);
    }

    #[test]
    fn rejects_a_candidate_that_breaks_a_case_naming_it() {
        let new = BTreeSet::from(["helpdesk/improve-1".to_string()]);
        let before = [
            result("helpdesk/improve-1", 0, 3),
            result("helpdesk/greeting", 3, 3),
        ];
        let after = [
            result("helpdesk/improve-1", 3, 3),
            result("helpdesk/greeting", 0, 3),
        ];
        let (_, d) = decide(&before, &after, &new, DEFAULT_TOLERANCE);
        assert!(!d.accepted);
        assert_eq!(d.broke, ["helpdesk/greeting"]);
        assert!(d.why.contains("helpdesk/greeting (3/3 → 0/3)"), "{}", d.why);
    }

    #[test]
    fn rejects_a_candidate_that_does_not_help() {
        let new = BTreeSet::from(["helpdesk/improve-1".to_string()]);
        let before = [result("helpdesk/improve-1", 1, 3)];
        let after = [result("helpdesk/improve-1", 1, 3)];
        let (_, d) = decide(&before, &after, &new, DEFAULT_TOLERANCE);
        assert!(!d.accepted);
        assert!(d.why.contains("no more often"), "{}", d.why);
    }
}
