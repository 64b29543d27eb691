//! What became of an inbound delivery ("why didn't it answer?"): one outcome per
//! stored event, with details a person can read.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// Runs started (`detail.runs`: run ids and agents).
    Started,
    /// A run of the same conversation, already queued or working, took the message.
    HandedToRun,
    /// A reply in a thread an agent answered: that agent took it.
    FollowUp,
    /// No agent's trigger matched (`detail.agents`: per agent with a trigger for this
    /// source, the first condition that did not hold).
    NoAgent,
    /// A trigger matched but its `when:` filter was false.
    Filtered,
    /// A retry of a delivery already stored (`duplicate_of`).
    Duplicate,
    /// A person's per-minute limit on an agent.
    RateLimited,
    /// The agent's daily budget is spent.
    OverBudget,
    /// Not for an agent: the bot's own message, another bot's, an edit or delete, an
    /// unsupported type (`detail.reason`).
    Ignored,
    /// Refused before it was read (bad signature, stale, too large): no body kept.
    Refused,
    /// Acted on without a run: a Stop, a 👍/👎, Slack's agent view.
    Handled,
}

impl OutcomeKind {
    pub const ALL: [OutcomeKind; 11] = [
        OutcomeKind::Started,
        OutcomeKind::HandedToRun,
        OutcomeKind::FollowUp,
        OutcomeKind::NoAgent,
        OutcomeKind::Filtered,
        OutcomeKind::Duplicate,
        OutcomeKind::RateLimited,
        OutcomeKind::OverBudget,
        OutcomeKind::Ignored,
        OutcomeKind::Refused,
        OutcomeKind::Handled,
    ];

    /// The stored and displayed name (`no_agent`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Started => "started",
            OutcomeKind::HandedToRun => "handed_to_run",
            OutcomeKind::FollowUp => "follow_up",
            OutcomeKind::NoAgent => "no_agent",
            OutcomeKind::Filtered => "filtered",
            OutcomeKind::Duplicate => "duplicate",
            OutcomeKind::RateLimited => "rate_limited",
            OutcomeKind::OverBudget => "over_budget",
            OutcomeKind::Ignored => "ignored",
            OutcomeKind::Refused => "refused",
            OutcomeKind::Handled => "handled",
        }
    }

    /// Parses a stored or typed name.
    pub fn parse(s: &str) -> Option<OutcomeKind> {
        OutcomeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An outcome and its details (JSON: run ids, reasons; never message text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventOutcome {
    pub kind: OutcomeKind,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub detail: Value,
}

impl EventOutcome {
    pub fn new(kind: OutcomeKind, detail: Value) -> EventOutcome {
        EventOutcome { kind, detail }
    }

    /// An outcome whose detail is one reason.
    pub fn because(kind: OutcomeKind, reason: impl Into<String>) -> EventOutcome {
        EventOutcome::new(kind, json!({"reason": reason.into()}))
    }
}
