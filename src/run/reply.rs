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

/// The link to the prompt (or script) that drove `agent`: its `url`, else its repository
/// path under `base` (`STEWARD_PROMPT_BASE_URL`).
pub fn prompt_link(agent: &AgentConfig, base: Option<&str>) -> Option<String> {
    let path = match (&agent.prompt, &agent.coordinator) {
        (Some(p), _) if p.url.is_some() => return p.url.clone(),
        (_, Coordinator::Script { path, .. }) => path.display().to_string(),
        (Some(p), _) => p.path.clone(),
        (None, _) => return None,
    };
    Some(match base {
        Some(base) => format!("{}/{path}", base.trim_end_matches('/')),
        None => path,
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
        .then(|| prompt_link(agent, sources.prompt_base_url.as_deref()))
        .flatten();
    let reply = Reply {
        text,
        prompt_link: link.as_deref(),
        idempotency_key: format!("{}:reply", recorder.run_id()),
    };
    source.post_reply(origin, &reply).await.map(Some)
}
