//! Approval of tool calls: a run whose model asks for a tool marked
//! `approval: required` parks (its conversation checkpointed in the store, sealed for
//! private runs, its worker released), a person decides in Slack, and any replica
//! resumes it from the checkpoint, running the call or telling the model it was
//! denied. A restart in between loses nothing: the wait is a row, not a task.

use chrono::Utc;
use serde::{Deserialize, Serialize};

use super::context::RunContext;
use super::events::RunEvent;
use super::{RunError, Runner};
use crate::provider::{Message, ToolCall};
use crate::store::ApprovalRow;
use crate::triggers::Origin;
use crate::triggers::source::ApprovalRequest;
use crate::types::{RunOutcome, Termination, Usage};

/// Everything a parked run resumes from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The conversation up to and including the assistant message asking for `calls`.
    pub messages: Vec<Message>,
    /// The held round: every call of that message, none run yet.
    pub calls: Vec<ToolCall>,
    /// The ids of the calls that need a decision, one request each, asked in order.
    pub gated: Vec<String>,
    /// Decisions taken so far, by call id: `None` approved, `Some(reason)` refused.
    #[serde(default)]
    pub decided: Vec<(String, Option<String>)>,
    /// Why a call needs a decision beyond the agent's config (private content leaving
    /// its conversation), by call id; shown on its request.
    #[serde(default)]
    pub notes: std::collections::BTreeMap<String, String>,
    /// Private conversations whose content the run holds (see `run::custody`): a
    /// resumed run is as private as it was.
    #[serde(default)]
    pub private_sources: Vec<String>,
    /// What the run's custody knew of URLs (received, and hosts it wrote): a resumed
    /// run does not forget what it wrote before it parked.
    #[serde(default)]
    pub custody: super::custody::Remembered,
    pub turns: u32,
    pub usage: Usage,
    pub cost_usd: f64,
    pub compactions: u32,
    /// Tool calls counted against `max_tool_calls`, the held round included.
    pub tool_calls: u32,
    /// Run time before parking (the wait does not count toward `limits.timeout`).
    pub elapsed_ms: u64,
    /// The request's index when the run continues a thread (see `Compactor::request`).
    #[serde(default)]
    pub request_at: Option<usize>,
}

/// Where an LLM run starts.
pub enum Start {
    /// The conversation so far (a Slack thread: earlier turns), then the request.
    Fresh {
        history: Vec<Message>,
        opening: Message,
    },
    Resume(Resume),
}

impl Checkpoint {
    /// The first gated call nobody has decided yet.
    pub fn undecided(&self) -> Option<&ToolCall> {
        self.gated
            .iter()
            .find(|id| !self.decided.iter().any(|(d, _)| d == *id))
            .and_then(|id| self.calls.iter().find(|c| &c.id == id))
    }

    /// The refused calls with their reasons.
    pub fn refusals(&self) -> std::collections::HashMap<String, String> {
        self.decided
            .iter()
            .filter_map(|(id, r)| r.clone().map(|r| (id.clone(), r)))
            .collect()
    }
}

/// A checkpoint with the latest decision added to it.
pub struct Resume {
    pub checkpoint: Checkpoint,
}

/// Decisions as stored.
pub const APPROVED: &str = "approved";
pub const DENIED: &str = "denied";
pub const TIMED_OUT: &str = "timed_out";
/// Nobody could be asked (no Slack thread, no approvers, Slack refused the post).
pub const UNDELIVERABLE: &str = "undeliverable";

/// The decided checkpoint this run resumes from, if it parked and someone decided.
pub async fn resume_point(cx: &RunContext<'_>) -> Result<Option<Resume>, RunError> {
    let store = &cx.runner.store;
    let Some(row) = store.latest_approval(&cx.run_id).await? else {
        return Ok(None);
    };
    let Some(decision) = row.decision.clone() else {
        return Ok(None);
    };
    // A checkpoint is sealed when its run held private content then; a plain one
    // reads as JSON as it is.
    let mut checkpoint: Checkpoint = match serde_json::from_slice(&row.checkpoint) {
        Ok(c) => c,
        Err(plain_error) => match &cx.runner.data_key {
            Some(key) => {
                let plain = key
                    .open_at(&checkpoint_place(&cx.run_id), &row.checkpoint)
                    .map_err(|e| {
                        RunError::Checkpoint(format!("cannot open it: {e} (as JSON: {plain_error})"))
                    })?;
                // Where, never what: serde quotes the value it did not expect, and this
                // one was sealed because it is private.
                serde_json::from_slice(&plain).map_err(|e| {
                    RunError::Checkpoint(format!(
                        "unreadable ({:?} at line {}, column {})",
                        e.classify(),
                        e.line(),
                        e.column()
                    ))
                })?
            }
            None if cx.trigger.private => {
                return Err(RunError::Checkpoint(
                    "the run's checkpoint is sealed and STEWARD_DATA_KEY is not set".into(),
                ));
            }
            None => return Err(RunError::Checkpoint(format!("unreadable: {plain_error}"))),
        },
    };
    let by = match &row.decided_by {
        Some(user) => {
            cx.runner
                .sources
                .readable(&cx.trigger.origin, &format!("<@{user}>"))
                .await
        }
        None => String::new(),
    };
    cx.recorder.record(RunEvent::ApprovalDecided {
        approval: row.id.clone(),
        decision: decision.clone(),
        by: row.decided_by.clone(),
    });
    let refusal = match decision.as_str() {
        APPROVED => None,
        DENIED => Some(format!("denied by {by}: a person decided this call must not run")),
        TIMED_OUT => Some(format!(
            "not approved: no one decided within {}; the call was not run",
            crate::types::duration::format_duration(cx.agent.approval.timeout)
        )),
        _ => Some("steward could not ask anyone to approve this call, so it was not run".into()),
    };
    // The decision is this request's call's alone; the round's other gated calls
    // each get a request of their own.
    if !checkpoint.decided.iter().any(|(d, _)| *d == row.call_id) {
        checkpoint.decided.push((row.call_id.clone(), refusal));
    }
    Ok(Some(Resume { checkpoint }))
}

/// Where a run's sealed checkpoint is bound (`DataKey::seal_at`): its run.
pub fn checkpoint_place(run_id: &str) -> String {
    format!("checkpoint:{run_id}")
}

/// Parks a run that returned [`Termination::AwaitingApproval`]: stores the request and
/// checkpoint, moves the run to `waiting` and asks in Slack. A private run needs
/// `STEWARD_DATA_KEY` (its checkpoint holds the conversation); without it the run
/// fails saying so.
pub async fn park(runner: &Runner, cx: &RunContext<'_>, outcome: RunOutcome) -> Result<RunOutcome, RunError> {
    let Some(checkpoint) = outcome.awaiting.clone() else {
        return Ok(outcome.stopped(Termination::ToolError, Some("no checkpoint to wait with".into())));
    };
    let parsed: Checkpoint =
        serde_json::from_value(checkpoint.clone()).map_err(|e| RunError::Checkpoint(e.to_string()))?;
    let json = serde_json::to_vec(&checkpoint).unwrap_or_default();
    // Sealed when the run holds private content: a private trigger, or a private
    // conversation it read.
    let sealed = match (cx.recorder.privacy().is_private(), &runner.data_key) {
        (false, _) => json,
        (true, Some(key)) => key
            .seal_at(&checkpoint_place(&cx.run_id), &json)
            .map_err(|e| RunError::Checkpoint(e.to_string()))?,
        (true, None) => {
            let mut out = outcome;
            out.awaiting = None;
            return Ok(out.stopped(
                Termination::ToolError,
                Some("a tool needs approval, but a private run can only wait for it with STEWARD_DATA_KEY set (its conversation must be sealed at rest)".into()),
            ));
        }
    };
    // One request per gated call: the next one nobody decided yet.
    let first = parsed
        .undecided()
        .cloned()
        .ok_or_else(|| RunError::Checkpoint("no undecided gated call in it".into()))?;
    let now = Utc::now();
    let deadline = now + chrono::Duration::from_std(cx.agent.approval.timeout).unwrap_or_default();
    let requester = match &cx.trigger.origin {
        Origin::Slack { user, .. } => user.clone(),
        _ => None,
    };
    let row = ApprovalRow {
        id: uuid::Uuid::now_v7().to_string(),
        run_id: cx.run_id.clone(),
        tool: first.name.clone(),
        call_id: first.id.clone(),
        requester: requester.clone(),
        approvers: cx.agent.approval.approvers.clone(),
        channel: None,
        message_ts: None,
        checkpoint: sealed,
        created_at: now,
        deadline,
        decision: None,
        decided_by: None,
        decided_at: None,
    };
    cx.recorder.record(RunEvent::ApprovalRequested {
        approval: row.id.clone(),
        call_id: first.id.clone(),
        name: first.name.clone(),
        posted: None,
        deadline: crate::store::timestamp(deadline),
    });
    cx.recorder.flush().await?;
    if !runner.store.suspend_run(&row).await? {
        return Err(RunError::Checkpoint(
            "the run left `running` before it could wait".into(),
        ));
    }
    let request = ApprovalRequest {
        approval: &row.id,
        run_id: &cx.run_id,
        agent: &cx.agent.name,
        tool: &first.name,
        arguments: &first.arguments,
        reversible: runner
            .tools
            .get(&first.name)
            .is_none_or(|t| t.spec().effect != crate::tools::Effect::Irreversible),
        requester: requester.as_deref(),
        approvers: &cx.agent.approval.approvers,
        timeout: cx.agent.approval.timeout,
        run_link: runner
            .sources
            .public_url
            .as_deref()
            .map(|p| format!("{}/runs/{}", p.trim_end_matches('/'), cx.run_id)),
        note: parsed.notes.get(&first.id).cloned(),
    };
    // A request for a run holding private content from elsewhere shows that content
    // (the call's arguments): it goes to the asker by DM, or else to the approvers by
    // DM, never to the thread others read.
    let ask_in = match cx.gateway.custody().answer_leaves() {
        true => super::reply::private_destination(&runner.sources, cx.gateway.custody(), &cx.trigger.origin)
            .await
            .unwrap_or(Origin::Cli),
        false => cx.trigger.origin.clone(),
    };
    match runner.sources.ask_approval(&ask_in, &request).await {
        Ok((channel, ts)) => runner.store.set_approval_message(&row.id, &channel, &ts).await?,
        Err(e) => {
            // Nobody to ask: the run resumes at once with the call refused.
            tracing::warn!(run = %cx.run_id, error = %e, "cannot ask for approval");
            runner
                .store
                .decide_approval(&row.id, UNDELIVERABLE, None, Utc::now())
                .await?;
        }
    }
    tracing::info!(run = %cx.run_id, tool = %first.name, approval = %row.id, "run waiting for approval");
    Ok(outcome)
}
