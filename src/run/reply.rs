//! Posting a run's final answer back where its trigger came from, through the trigger's
//! [`crate::triggers::Source`]: the Slack thread (never the channel root for a thread
//! event), a comment on the Jira issue, a comment on the Notion page; each ending with a
//! link to the prompt that drove it.

use serde_json::Value;

use super::{Origin, Recorder};
use crate::config::{AgentConfig, Coordinator};
use crate::integrations::ApiError;
use crate::run::events::RunEvent;
use crate::triggers::Sources;
use crate::triggers::source::Reply;

/// The repository path of the prompt (or script) that drives `agent`.
pub fn prompt_path(agent: &AgentConfig) -> Option<String> {
    match (&agent.coordinator, &agent.prompt) {
        (Coordinator::Script { path, .. }, _) => Some(path.display().to_string()),
        (_, Some(p)) => Some(p.path.clone()),
        _ => None,
    }
}

/// Where the run inspector shows the prompt at repository path `path`
/// (`prompts/helpdesk.md` → `/prompts/helpdesk.md`, `scripts/x.rhai` →
/// `/prompts/scripts/x.rhai`).
pub fn inspector_prompt_path(path: &str) -> String {
    match path.strip_prefix("prompts/") {
        Some(rest) => format!("/prompts/{rest}"),
        None => format!("/prompts/{path}"),
    }
}

/// The link to the prompt (or script) that drove `agent`: its `url`; else its
/// repository path under `base` (`STEWARD_PROMPT_BASE_URL`); else its page in the run
/// inspector at `public` (`STEWARD_PUBLIC_URL`). `None` when none of them is known: a
/// bare relative path is not a link anyone can click.
pub fn prompt_link(agent: &AgentConfig, base: Option<&str>, public: Option<&str>) -> Option<String> {
    if let Some(url) = agent.prompt.as_ref().and_then(|p| p.url.clone()) {
        return Some(url);
    }
    let path = prompt_path(agent)?;
    match (base, public) {
        (Some(base), _) => Some(format!("{}/{path}", base.trim_end_matches('/'))),
        (None, Some(public)) => Some(format!(
            "{}{}",
            public.trim_end_matches('/'),
            inspector_prompt_path(&path)
        )),
        (None, None) => None,
    }
}

/// Where an answer that draws on a private conversation goes instead of the trigger's
/// place: a DM with the person who asked. `Err` says why there is none (no person, no
/// Slack, Slack refused), and the answer is then withheld.
pub async fn private_destination(
    sources: &Sources,
    custody: &super::custody::Custody,
    origin: &Origin,
) -> Result<Origin, String> {
    let Some(asker) = custody.asker() else {
        return Err(
            "it draws on a private conversation and no person asked, so there is no one to send it to alone"
                .into(),
        );
    };
    let Some(slack) = &sources.slack else {
        return Err("it draws on a private conversation and Slack is not configured to send it by DM".into());
    };
    let opened = slack
        .call("conversations.open", &serde_json::json!({"users": asker}))
        .await
        .map_err(|e| format!("cannot open a DM with the person who asked: {e}"))?;
    let channel = opened["channel"]["id"].as_str().unwrap_or_default().to_string();
    if channel.is_empty() {
        return Err("Slack opened no DM with the person who asked".into());
    }
    let team = match origin {
        Origin::Slack { team, .. } => team.clone(),
        _ => None,
    };
    Ok(Origin::Slack {
        team,
        channel,
        channel_type: Some("im".into()),
        user: Some(asker.to_string()),
        ts: None,
        thread_ts: None,
        reaction: None,
    })
}

/// Posts `text` to the trigger's place. Returns `Ok(None)` when the origin has no
/// reply destination. The `reply` event is flushed before posting so crash recovery
/// treats the run as having side effects.
pub async fn post(
    sources: &Sources,
    agent: &AgentConfig,
    origin: &Origin,
    text: &str,
    recorder: &Recorder,
    live: Option<&dyn crate::triggers::source::Live>,
) -> Result<Option<Value>, ApiError> {
    let Some(source) = sources.for_origin(origin) else {
        return Ok(None);
    };
    let Some(destination) = source.reply_destination(origin) else {
        return Ok(None);
    };
    recorder.record(RunEvent::Reply {
        destination,
        side_effect: true,
        text: recorder.wrap(text),
    });
    recorder.flush().await.map_err(|e| ApiError::Transport {
        service: "steward",
        method: "reply".into(),
        message: e.to_string(),
    })?;
    let link = agent
        .output
        .prompt_link
        .then(|| {
            prompt_link(
                agent,
                sources.prompt_base_url.as_deref(),
                sources.public_url.as_deref(),
            )
        })
        .flatten();
    let run_link = sources
        .public_url
        .as_deref()
        .map(|public| format!("{}/runs/{}", public.trim_end_matches('/'), recorder.run_id()));
    let reply = Reply {
        text,
        prompt_link: link.as_deref(),
        run_link: run_link.as_deref(),
        feedback: agent.output.feedback.then(|| recorder.run_id()),
        escalate: agent
            .escalation
            .as_ref()
            .map(|e| (recorder.run_id(), e.label.as_str())),
        idempotency_key: format!("{}:reply", recorder.run_id()),
    };
    // A streamed reply ends its stream; what people have not seen of the answer (all
    // of it when nothing streamed) is posted as a normal reply.
    let rest = match live {
        Some(live) => match live.finish(&reply).await {
            crate::triggers::source::Finished::Streamed(sent) => return Ok(Some(sent)),
            crate::triggers::source::Finished::Post { rest } => rest,
        },
        None => return source.post_reply(origin, &reply).await.map(Some),
    };
    if rest.trim().is_empty() {
        return Ok(Some(Value::Null));
    }
    let reply = Reply { text: &rest, ..reply };
    source.post_reply(origin, &reply).await.map(Some)
}
