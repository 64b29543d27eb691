//! Slack Connect: in a channel shared with another organisation, steward acts only for
//! people of the workspace receiving the event (or of one `SLACK_TEAM_IDS` lists).
//! Everyone else there is an outsider: a run they start could read the organisation's
//! public channels (which need no membership check inside it) into the shared channel,
//! and approve its own gated calls as the person who asked.

use std::time::Duration;

use super::AppState;
use crate::triggers::{Origin, TriggerEvent};

/// How long ingest waits for `users.info` to name an author's workspace (Slack wants
/// its acknowledgement within 3 s; privacy may take 2 s more after this).
const LOOKUP_WAIT: Duration = Duration::from_millis(800);

/// The workspace of a Slack Connect event's author: `named` when the payload says,
/// else Slack's `users.info` for the author (`user.team_id`); `None` when neither can
/// say (no client, no answer in time, no author).
pub(crate) async fn author_team(
    state: &AppState,
    event: &TriggerEvent,
    named: Option<String>,
) -> Option<String> {
    if named.is_some() {
        return named;
    }
    let (Some(client), Origin::Slack { user: Some(user), .. }) = (&state.slack, &event.origin) else {
        return None;
    };
    let query = [("user", user.clone())];
    match tokio::time::timeout(LOOKUP_WAIT, client.get("users.info", &query)).await {
        Ok(Ok(v)) => v["user"]["team_id"].as_str().map(str::to_string),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "users.info could not name a Slack Connect author's workspace");
            None
        }
        Err(_) => None,
    }
}

/// Whether a Slack Connect event's author, of workspace `team`, may start runs: a
/// person of the receiving workspace, or of one `SLACK_TEAM_IDS` lists. An author whose
/// workspace nobody could name is refused.
pub(crate) fn admitted(state: &AppState, event: &TriggerEvent, team: Option<&str>) -> bool {
    let home = match &event.origin {
        Origin::Slack { team, .. } => team.as_deref(),
        _ => None,
    };
    team.is_some_and(|t| Some(t) == home || state.secrets.slack_team_listed(t))
}
