//! A run's status where people look: how it ended, as its presence shows it (see
//! [`super::presence`]), and one line per finished top-level run in the log channel
//! (`STEWARD_LOG_CHANNEL`), never for private runs. Best effort: a failure is logged
//! and never fails the run.

use crate::config::AgentConfig;
use crate::triggers::source::Progress;
use crate::triggers::{Sources, TriggerEvent};
use crate::types::{RunOutcome, Termination};

/// How a run ended, as the status reactions show it.
pub fn progress_of(outcome: &RunOutcome) -> Progress {
    if outcome.termination == Termination::Completed {
        Progress::Done
    } else {
        Progress::Failed
    }
}

/// The log channel's line for a finished run.
pub fn log_line(
    agent: &str,
    trigger: &TriggerEvent,
    outcome: &RunOutcome,
    public_url: Option<&str>,
) -> String {
    let tokens = outcome.usage.input_tokens + outcome.usage.output_tokens;
    let mut line = format!(
        "*{agent}* · {} {} · {} ({}) · {} turn{} · {tokens} tokens · ${:.4}",
        trigger.source,
        trigger.kind,
        outcome.status().as_str(),
        outcome.termination.as_str(),
        outcome.turns,
        if outcome.turns == 1 { "" } else { "s" },
        outcome.cost_usd,
    );
    match public_url {
        Some(url) => line.push_str(&format!(
            " · <{}/runs/{}|run>",
            url.trim_end_matches('/'),
            outcome.run_id
        )),
        None => line.push_str(&format!(" · run `{}`", outcome.run_id)),
    }
    line
}

/// What people see when a top-level run has ended: its log-channel line and, if it
/// failed, the sentence saying so where they asked.
pub async fn ended(sources: &Sources, agent: &AgentConfig, trigger: &TriggerEvent, outcome: &RunOutcome) {
    log(sources, agent, trigger, outcome).await;
    super::failure::tell(sources, agent, trigger, outcome).await;
}

/// Posts the run's line to the log channel; nothing for private runs or without one.
pub async fn log(sources: &Sources, agent: &AgentConfig, trigger: &TriggerEvent, outcome: &RunOutcome) {
    let Some((client, channel)) = &sources.log else {
        return;
    };
    if trigger.private {
        return;
    }
    let text = log_line(&agent.name, trigger, outcome, sources.public_url.as_deref());
    let body = serde_json::json!({"channel": channel, "text": text, "unfurl_links": false});
    if let Err(e) = client.call("chat.postMessage", &body).await {
        tracing::warn!(error = %e, %channel, "cannot post the run to the log channel");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Usage;

    #[test]
    fn the_log_line_names_what_an_owner_checks() {
        let trigger = TriggerEvent::from_cli(serde_json::json!({"text": "secret words"}));
        let outcome = RunOutcome {
            usage: Usage {
                input_tokens: 1000,
                output_tokens: 234,
                ..Usage::default()
            },
            cost_usd: 0.0123,
            turns: 2,
            ..RunOutcome::new("r-1")
        };
        let line = log_line(
            "helpdesk",
            &trigger,
            &outcome,
            Some("https://steward.example.com/"),
        );
        assert_eq!(
            line,
            "*helpdesk* · cli manual · succeeded (completed) · 2 turns · 1234 tokens · $0.0123 · <https://steward.example.com/runs/r-1|run>"
        );
        assert!(!line.contains("secret"));
    }
}
