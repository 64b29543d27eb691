//! Never silent: a run a person started that fails answers where they asked with one
//! plain sentence on what went wrong and what they can do, and the run's id (linked to
//! the inspector when `STEWARD_PUBLIC_URL` is set). No stack traces, no provider
//! payloads, nothing of the run's private input.

use crate::config::AgentConfig;
use crate::triggers::Sources;
use crate::triggers::source::Reply;
use crate::triggers::{Origin, TriggerEvent};
use crate::types::duration::format_duration;
use crate::types::{RunOutcome, Termination};

/// The sentence for a run that ended with `termination`.
pub fn explain(agent: &AgentConfig, termination: Termination) -> Option<String> {
    let l = &agent.limits;
    Some(match termination {
        Termination::Completed
        | Termination::AwaitingApproval
        | Termination::Cancelled
        | Termination::StoppedByUser => return None,
        Termination::ProviderError => {
            "Sorry, I could not get an answer from the AI model (it failed or refused); please try again in a few minutes.".into()
        }
        Termination::Timeout => format!(
            "Sorry, this took longer than my time limit ({}) and I stopped; a narrower request may work.",
            format_duration(l.timeout)
        ),
        Termination::MaxTurns => format!(
            "Sorry, I reached my limit of {} steps before finishing; a narrower request may work.",
            l.max_turns
        ),
        Termination::MaxToolCalls => format!(
            "Sorry, I reached my limit of {} tool calls before finishing; a narrower request may work.",
            l.max_tool_calls
        ),
        Termination::MaxCost => "Sorry, this request reached my spending limit before I finished.".into(),
        Termination::ToolError => "Sorry, a tool I needed failed, so I stopped; the run shows which one.".into(),
        Termination::ScriptError => "Sorry, my workflow script failed; its owner can see why in the run.".into(),
        Termination::PromptUnavailable => {
            "Sorry, I could not load my instructions right now; please try again in a few minutes.".into()
        }
        Termination::Interrupted | Termination::CrashLoop => {
            "Sorry, I was interrupted before finishing; please ask again.".into()
        }
        Termination::Undelivered => {
            "Sorry, I finished but could not post my answer here; its owner can read it in the run.".into()
        }
    })
}

/// Posts the failure sentence for a top-level run a person started (a Slack, Jira or
/// Notion trigger). Best effort: a failure to post is logged.
pub async fn tell(sources: &Sources, agent: &AgentConfig, trigger: &TriggerEvent, outcome: &RunOutcome) {
    if !matches!(
        trigger.origin,
        Origin::Slack { .. } | Origin::Jira { .. } | Origin::Notion { .. }
    ) {
        return;
    }
    let Some(sentence) = explain(agent, outcome.termination) else {
        return;
    };
    let Some(source) = sources.for_origin(&trigger.origin) else {
        return;
    };
    let id = &outcome.run_id;
    let text = match sources.public_url.as_deref() {
        Some(public) => format!(
            "{sentence} (run <{}/runs/{id}|{id}>)",
            public.trim_end_matches('/')
        ),
        None => format!("{sentence} (run `{id}`)"),
    };
    let reply = Reply {
        text: &text,
        prompt_link: None,
        run_link: None,
        feedback: None,
        escalate: agent.escalation.as_ref().map(|e| (id.as_str(), e.label.as_str())),
        idempotency_key: format!("{id}:failure"),
    };
    if let Err(e) = source.post_reply(&trigger.origin, &reply).await {
        tracing::warn!(run = %id, error = %e, "cannot tell the person their run failed");
    }
}
