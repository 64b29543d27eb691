//! Slack's own signs that an agent is working: the thinking status in a thread
//! (`assistant.threads.setStatus` with rotating `loading_messages`), cleared when the
//! run ends, and an agent session (`agents.sessions.setStatus`), which gives people a
//! Stop button, opened as `processing` and closed at the end.

use serde_json::{Value, json};
use slack_morphism::api::{SlackAgentSessionStatus, SlackApiAgentsSessionsSetStatusRequest};

use crate::integrations::ApiError;
use crate::integrations::slack::SlackClient;
use crate::triggers::Origin;
use crate::triggers::source::Progress;

/// Slack shows at most this many loading messages; more are cut, not refused.
pub const MAX_LOADING_MESSAGES: usize = 10;
/// A session title is one short line.
const MAX_TITLE_CHARS: usize = 80;

/// The channel and thread a run's status belongs in: the trigger's thread, or the
/// triggering message itself (which the answer will thread under).
fn thread_of(origin: &Origin) -> Option<(String, String)> {
    let (channel, root) = origin.slack_thread()?;
    let ts = match (root, origin) {
        (Some(root), _) => root.to_string(),
        (None, Origin::Slack { ts: Some(ts), .. }) => ts.clone(),
        _ => return None,
    };
    Some((channel.to_string(), ts))
}

/// The `assistant.threads.setStatus` body; an empty `status` clears it.
pub fn status_body(channel: &str, thread_ts: &str, status: &str, loading: &[&str]) -> Value {
    let mut body = json!({"channel_id": channel, "thread_ts": thread_ts, "status": status});
    if !loading.is_empty() {
        // slack-morphism's request type has no `loading_messages`: the field is ours.
        let cut: Vec<&str> = loading.iter().take(MAX_LOADING_MESSAGES).copied().collect();
        body["loading_messages"] = json!(cut);
    }
    body
}

fn session(
    channel: &str,
    thread_ts: &str,
    status: SlackAgentSessionStatus,
) -> SlackApiAgentsSessionsSetStatusRequest {
    SlackApiAgentsSessionsSetStatusRequest {
        status,
        channel_id: Some(channel.into()),
        thread_ts: Some(thread_ts.into()),
        title: None,
        initiator_user_id: None,
        icon_emoji: None,
        icon_url: None,
        username: None,
    }
}

/// Shows `progress` natively; `Ok(false)` when the origin has no Slack thread.
pub async fn show(client: &SlackClient, origin: &Origin, progress: &Progress) -> Result<bool, ApiError> {
    let Some((channel, ts)) = thread_of(origin) else {
        return Ok(false);
    };
    let (status, session) = match progress {
        Progress::Working { title, user } => {
            let mut open = session(&channel, &ts, SlackAgentSessionStatus::Processing);
            open.title = Some(crate::triggers::event::one_line(title, MAX_TITLE_CHARS));
            open.initiator_user_id = user.as_deref().map(Into::into);
            let status = status_body(
                &channel,
                &ts,
                "is thinking…",
                &["Reading the conversation…", "Thinking…"],
            );
            (status, Some(open))
        }
        Progress::Step(text) => (status_body(&channel, &ts, "is working…", &[text.as_str()]), None),
        Progress::Done | Progress::Failed => (
            status_body(&channel, &ts, "", &[]),
            Some(session(&channel, &ts, SlackAgentSessionStatus::Closed)),
        ),
    };
    let set = client.call("assistant.threads.setStatus", &status);
    let (set, sess) = match session {
        Some(s) => {
            let (a, b) = tokio::join!(set, client.send("agents.sessions.setStatus", &s));
            (a, Some(b))
        }
        None => (set.await, None),
    };
    if let Some(Err(e)) = sess {
        // Workspaces without agent sessions answer with an error: the status still shows.
        tracing::debug!(error = %e, "agents.sessions.setStatus failed");
    }
    set.map(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_messages_over_the_limit_are_cut() {
        let many: Vec<String> = (0..14).map(|i| format!("step {i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let body = status_body("C1", "1.2", "is working…", &refs);
        assert_eq!(
            body["loading_messages"].as_array().unwrap().len(),
            MAX_LOADING_MESSAGES
        );
        assert!(
            status_body("C1", "1.2", "", &[])
                .get("loading_messages")
                .is_none()
        );
    }

    #[test]
    fn the_status_goes_in_the_thread_or_under_the_message() {
        let origin = |channel: &str, thread_ts: Option<&str>| Origin::Slack {
            team: None,
            channel: channel.into(),
            channel_type: None,
            user: None,
            ts: Some("5.5".into()),
            thread_ts: thread_ts.map(str::to_string),
            reaction: None,
        };
        assert_eq!(thread_of(&origin("C1", None)), Some(("C1".into(), "5.5".into())));
        assert_eq!(thread_of(&origin("D1", None)), Some(("D1".into(), "5.5".into())));
        let threaded = origin("C1", Some("1.1"));
        assert_eq!(thread_of(&threaded), Some(("C1".into(), "1.1".into())));
    }
}
