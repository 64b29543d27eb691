//! Running subagents for a parent run: same runner, child config, a view of the
//! parent's files, bounded concurrency and depth, totals rolled up into the parent.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{Lineage, Runner, TriggerEvent};
use crate::files::RunFiles;
use crate::provider::Usage;
use crate::store::RunStatus;
use crate::tools::subagent::{SubagentError, SubagentLauncher};
use crate::triggers::event::one_line;
use crate::types::ModelRef;

/// Usage and cost of finished subagent runs, not yet added to the parent run's totals
/// (the parent's coordinator drains it, so children count toward its cost cap), and
/// what all of them cost together.
#[derive(Debug, Default)]
pub struct ChildTotals(Mutex<Totals>);

#[derive(Debug, Default)]
struct Totals {
    pending: (Usage, f64, bool),
    /// Every finished child's cost, never drained.
    spent: f64,
    /// What children still running may spend (their caps), under a parent's cap.
    reserved: f64,
}

impl ChildTotals {
    /// Adds a finished child's usage and cost (`cost_unknown`: some of its calls had
    /// no price).
    pub fn add(&self, usage: &Usage, cost_usd: f64, cost_unknown: bool) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        t.pending.0.add(usage);
        t.pending.1 += cost_usd;
        t.pending.2 |= cost_unknown;
        t.spent += cost_usd;
    }

    /// Takes what accumulated since the last call: usage, cost, whether any was unknown.
    pub fn take(&self) -> (Usage, f64, bool) {
        std::mem::take(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).pending)
    }

    /// What the run's finished children cost together, drained or not.
    pub fn spent(&self) -> f64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).spent
    }

    /// Sets aside for one child a share (one of `shares`, the children that may run at
    /// once) of what is left of `cap` after finished children's costs and running
    /// children's reservations (`own`, the child's own cap, when lower); `None` when
    /// nothing is left. Give it back with [`ChildTotals::release`] when the child ends:
    /// children at once share the cap instead of the first holding all of it.
    pub fn reserve(&self, cap: f64, own: Option<f64>, shares: usize) -> Option<f64> {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let left = cap - t.spent - t.reserved;
        if left <= 0.0 {
            return None;
        }
        let share = left / shares.max(1) as f64;
        let granted = own.map_or(share, |own| own.min(share));
        t.reserved += granted;
        Some(granted)
    }

    /// Gives back a reservation once its child ended (its cost is in `spent`).
    pub fn release(&self, granted: f64) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        t.reserved = (t.reserved - granted).max(0.0);
    }
}

/// A child's share of its parent's cap, given back when dropped (however it ended).
struct Reservation<'a>(&'a ChildTotals, f64);

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

/// Starts the subagents of one parent run.
pub struct Launcher {
    pub runner: Runner,
    pub parent_id: String,
    pub parent_private: bool,
    /// The parent's custody: a subagent of a run that read private content is private
    /// too (and cannot send it anywhere, having no one to approve).
    pub parent_custody: Arc<super::custody::Custody>,
    /// The person's Slack search grant, when the parent had one: a subagent searches
    /// for the same request.
    pub action_token: Option<crate::types::ActionToken>,
    /// Whether the parent answers where more people than the asker read.
    pub answers_in_public: bool,
    pub parent_allowed: Vec<String>,
    /// Tools the parent, or a run above it, needs approval for.
    pub gated: Vec<String>,
    pub parent_models: Vec<ModelRef>,
    pub parent_files: Arc<RunFiles>,
    /// Subagents the parent lists.
    pub names: Vec<String>,
    pub depth: u32,
    pub max_depth: u32,
    /// Caps concurrent children of this parent.
    pub semaphore: Semaphore,
    /// Children's usage and cost, drained into the parent's totals.
    pub totals: Arc<ChildTotals>,
    /// The parent's `max_cost_usd`: a child starting holds at most an equal share (one
    /// of `concurrency`) of what finished children spent and running ones hold left of
    /// it (its own cap when lower), and none starts once nothing is left.
    pub max_cost_usd: Option<f64>,
    /// Children at once (`subagent_concurrency`), for that share.
    pub concurrency: usize,
}

#[async_trait]
impl SubagentLauncher for Launcher {
    fn available(&self) -> Vec<String> {
        self.names.clone()
    }

    async fn launch(
        &self,
        name: &str,
        prompt: &str,
        files: &[String],
        _call_id: &str,
        cancel: CancellationToken,
    ) -> Result<String, SubagentError> {
        // Only the subagents this agent lists, whoever asks.
        let agent = self
            .names
            .iter()
            .any(|n| n == name)
            .then(|| self.runner.subagents.get(name).cloned())
            .flatten()
            .ok_or_else(|| SubagentError::Unknown(name.to_string()))?;
        for id in files {
            self.parent_files
                .get(id)
                .map_err(|e| SubagentError::Files(e.to_string()))?;
        }
        let not_run = |reason: String| SubagentError::NotRun {
            name: name.to_string(),
            reason,
        };
        let _permit = self
            .semaphore
            .acquire()
            .await
            .map_err(|e| not_run(e.to_string()))?;
        // Reserved once it may run, not while it waits its turn.
        let (agent, _reservation) = match self.max_cost_usd {
            None => (agent, None),
            Some(cap) => {
                let Some(granted) = self
                    .totals
                    .reserve(cap, agent.limits.max_cost_usd, self.concurrency)
                else {
                    return Err(SubagentError::NotRun {
                        name: name.to_string(),
                        reason: format!(
                            "this run's subagents spent or hold all of its max_cost_usd (${cap})"
                        ),
                    });
                };
                let mut capped = (*agent).clone();
                capped.limits.max_cost_usd = Some(granted);
                (Arc::new(capped), Some(Reservation(&self.totals, granted)))
            }
        };
        let trigger = TriggerEvent {
            source: "subagent".into(),
            kind: name.to_string(),
            summary: one_line(prompt, 120),
            text: Some(prompt.to_string()),
            payload: json!({"parent_run": self.parent_id, "files": files}),
            private: self.parent_private || self.parent_custody.tainted(),
            origin: crate::triggers::Origin::Subagent {
                parent_run: self.parent_id.clone(),
            },
            attachments: Vec::new(),
            traceparent: None,
            action_token: self.action_token.clone(),
        };
        let lineage = Lineage {
            parent_id: Some(self.parent_id.clone()),
            depth: self.depth + 1,
            max_depth: self.max_depth,
            inherited_tools: self.parent_allowed.clone(),
            gated: self.gated.clone(),
            parent_models: self.parent_models.clone(),
            files: Some((self.parent_files.clone(), files.to_vec())),
            existing_run: None,
            inbox: None,
            presence: None,
            stop: None,
            live: None,
            answers_in_public: Some(self.answers_in_public),
            acting_for: self.parent_custody.asker().map(str::to_string),
            acting_team: self.parent_custody.team().map(str::to_string),
            custody: self.parent_custody.remembered(),
            retry_interrupted: false,
        };
        let outcome = self
            .runner
            .run_in(&agent, &trigger, lineage, cancel)
            .await
            .map_err(|e| not_run(e.to_string()))?;
        self.totals
            .add(&outcome.usage, outcome.cost_usd, outcome.cost_unknown);
        // What the child read of private conversations comes back in its answer: the
        // parent holds it from here on (the gateway completes the hold after the call).
        // (A child private from the start, with no conversation of its own, holds ""
        // for its parent's content, which the parent already holds.)
        for source in outcome.private_sources.iter().filter(|s| !s.is_empty()) {
            self.parent_custody.taint(source);
        }
        if outcome.status() == RunStatus::Succeeded {
            Ok(outcome
                .final_text
                .unwrap_or_else(|| "(the subagent gave no answer)".into()))
        } else {
            Err(SubagentError::Failed {
                name: name.to_string(),
                run_id: outcome.run_id,
                termination: outcome.termination.as_str(),
                error: outcome.error.unwrap_or_else(|| "no details".into()),
            })
        }
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn children_at_once_share_the_parents_cap() {
        let totals = ChildTotals::default();
        // Two of two at once: each holds a share of what is left when it starts.
        assert_eq!(totals.reserve(1.0, None, 2), Some(0.5));
        assert_eq!(totals.reserve(1.0, None, 2), Some(0.25));
        totals.add(&Usage::default(), 0.5, false);
        totals.release(0.5);
        totals.release(0.25);
        // A child's own lower cap is what it holds.
        assert_eq!(totals.reserve(1.0, Some(0.1), 1), Some(0.1));
        assert_eq!(totals.reserve(1.0, None, 1), Some(0.4));
        // Nothing left: none starts.
        assert_eq!(totals.reserve(1.0, None, 1), None);
        assert_eq!(totals.spent(), 0.5);
    }
}
