//! Channels Slack says now reach fewer or other people. A channel made private
//! (`channel_convert_to_private`) is taken as private at once by this process, and
//! written to the store, where every replica takes it within [`SYNC_EVERY`]; without
//! this, a public answer from `conversations.info` would be trusted for up to
//! [`PUBLIC_FOR`](crate::integrations::slack::PUBLIC_FOR) after the change. A channel
//! shared with another organisation (`channel_shared`) is taken as shared at once here;
//! other replicas ask Slack again within
//! [`UNSHARED_FOR`](crate::integrations::slack::UNSHARED_FOR) anyway.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::hook_error::HookError;
use crate::integrations::slack::SlackClient;
use crate::store::Store;
use crate::triggers::source::ChannelChange;

/// Setting key of the channels Slack said were made private, one id a line.
pub const MADE_PRIVATE_KEY: &str = "slack.channels_made_private";

/// Channels kept in that list; one made private past it is taken by the replica that
/// heard it only (the others ask Slack within `PUBLIC_FOR`).
pub const MAX_MADE_PRIVATE: u32 = 10_000;

/// How often each replica reads the list.
pub const SYNC_EVERY: Duration = Duration::from_secs(10);

/// Takes what Slack said of `channel`. A store that cannot keep it answers 503, so
/// Slack delivers the event again.
pub async fn take(state: &AppState, channel: &str, change: ChannelChange) -> Result<Response, HookError> {
    if !is_channel_id(channel) {
        return Err(HookError::BadRequest("malformed channel id".into()));
    }
    if let Some(slack) = &state.slack {
        match change {
            ChannelChange::MadePrivate => slack.made_private(channel),
            ChannelChange::SharedOutside => slack.made_shared_outside(channel),
            ChannelChange::UnsharedOutside => slack.made_unshared_outside(channel),
        }
    }
    if change == ChannelChange::MadePrivate {
        let store = &state.runner.store;
        let unavailable = |e: crate::store::StoreError| HookError::Unavailable(e.to_string());
        let added = store
            .add_setting_line(MADE_PRIVATE_KEY, channel, MAX_MADE_PRIVATE)
            .await
            .map_err(unavailable)?;
        let listed = added
            || store
                .get_setting(MADE_PRIVATE_KEY)
                .await
                .map_err(unavailable)?
                .is_some_and(|list| list.lines().any(|id| id == channel));
        if !listed {
            tracing::warn!(
                %channel,
                max = MAX_MADE_PRIVATE,
                "the list of channels made private is full: other replicas take this one as private only when Slack's public answer expires (10 minutes)"
            );
        }
    }
    tracing::info!(%channel, ?change, "Slack says a channel now reaches fewer or other people");
    Ok((StatusCode::OK, Json(json!({"ok": true}))).into_response())
}

/// Slack's conversation ids are upper-case letters and digits.
fn is_channel_id(id: &str) -> bool {
    (2..=32).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// Every [`SYNC_EVERY`] until `shutdown`: takes the channels any replica heard were
/// made private (the first read at start, so a restarted process knows them too).
pub async fn sync(store: std::sync::Arc<dyn Store>, slack: SlackClient, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(SYNC_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        match store.get_setting(MADE_PRIVATE_KEY).await {
            Ok(Some(list)) => list.lines().for_each(|id| slack.made_private(id)),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read the channels made private"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ids_are_slacks_shape() {
        assert!(is_channel_id("C1234ABCD"));
        assert!(is_channel_id("G0123"));
        assert!(!is_channel_id("C1\nC2"));
        assert!(!is_channel_id("c123"));
        assert!(!is_channel_id(""));
    }
}
