//! Slack Socket Mode: receive the same Events API envelopes over a WebSocket (no public
//! URL needed). Each envelope is persisted through the same path as HTTP events, then
//! acknowledged; `disconnect` messages and errors lead to a reconnect with backoff.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::handlers::handle_slack_payload;

/// Where Socket Mode connects.
#[derive(Clone)]
pub struct SocketModeConfig {
    /// `SLACK_APP_TOKEN` (`xapp-...`).
    pub app_token: String,
    /// `SLACK_API_URL` (default `https://slack.com/api`).
    pub api_base: String,
}

impl std::fmt::Debug for SocketModeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketModeConfig")
            .field("api_base", &self.api_base)
            .finish_non_exhaustive()
    }
}

impl SocketModeConfig {
    /// Socket Mode is on when `SLACK_APP_TOKEN` is set.
    pub fn from_settings(settings: &crate::config::Settings) -> Option<SocketModeConfig> {
        let app_token = settings.slack_app_token.clone()?;
        let api_base = settings
            .slack_api_url
            .clone()
            .unwrap_or_else(|| crate::integrations::slack::DEFAULT_API_URL.into());
        Some(SocketModeConfig { app_token, api_base })
    }
}

const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Connects and reconnects until `shutdown`.
pub async fn run(
    state: AppState,
    config: SocketModeConfig,
    http: reqwest::Client,
    shutdown: CancellationToken,
) {
    let mut backoff = Duration::from_millis(500);
    loop {
        match session(&state, &config, &http, &shutdown).await {
            Ok(()) => backoff = Duration::from_millis(500),
            Err(e) => tracing::warn!(error = %e, "socket mode connection failed"),
        }
        if shutdown.is_cancelled() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.cancelled() => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A Socket Mode frame, by its `type` (Slack's documented envelope types).
///
/// slack-morphism 2.31.1 models these (`SlackSocketModeEvent`), but with its default
/// features off the model is not reachable from outside the crate (its `socket_mode`
/// listener module shadows the models' module of the same name), so this small enum
/// stands in; the payloads inside are parsed with slack-morphism's types.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Envelope {
    Hello,
    Disconnect {
        #[serde(default)]
        reason: String,
    },
    EventsApi,
    Interactive,
    #[serde(other)]
    Other,
}

/// Asks Slack for a WebSocket URL (`apps.connections.open`).
async fn open_url(config: &SocketModeConfig, http: &reqwest::Client) -> Result<String, String> {
    let resp: Value = http
        .post(format!(
            "{}/apps.connections.open",
            config.api_base.trim_end_matches('/')
        ))
        .bearer_auth(&config.app_token)
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    if resp["ok"].as_bool() != Some(true) {
        return Err(format!(
            "apps.connections.open: {}",
            resp["error"].as_str().unwrap_or("unknown_error")
        ));
    }
    resp["url"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| "apps.connections.open returned no url".into())
}

/// One connection: returns `Ok` when Slack asks us to reconnect or closes cleanly.
async fn session(
    state: &AppState,
    config: &SocketModeConfig,
    http: &reqwest::Client,
    shutdown: &CancellationToken,
) -> Result<(), String> {
    let url = open_url(config, http).await?;
    let (mut ws, _) = tokio_tungstenite::connect_async(url.as_str())
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!("socket mode connected");
    loop {
        let msg = tokio::select! {
            m = ws.next() => m,
            _ = shutdown.cancelled() => {
                let _ = ws.close(None).await;
                return Ok(());
            }
        };
        let text = match msg {
            None | Some(Ok(Message::Close(_))) => return Ok(()),
            Some(Err(e)) => return Err(e.to_string()),
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(_)) => continue,
        };
        let envelope: Value =
            serde_json::from_str(text.as_str()).map_err(|e| format!("bad envelope: {e}"))?;
        // The payload is handed on as JSON and parsed (through slack-morphism's models)
        // by the same code as HTTP deliveries.
        match Envelope::deserialize(&envelope) {
            Ok(Envelope::Hello) => continue,
            Ok(Envelope::Disconnect { reason }) => {
                tracing::info!(%reason, "socket mode asked to reconnect");
                return Ok(());
            }
            Ok(Envelope::EventsApi) => {
                // Persist first; acknowledge only what is stored (or refused for good).
                let last =
                    envelope["retry_attempt"].as_u64().unwrap_or(0) >= super::handlers::SLACK_LAST_RETRY;
                if let Err(e) = handle_slack_payload(state, &envelope["payload"], last).await {
                    tracing::warn!(error = %e, "socket mode event not handled");
                    if matches!(
                        e,
                        super::handlers::HookError::Unavailable(_) | super::handlers::HookError::Retry(_)
                    ) {
                        // Not acknowledged: Slack redelivers it.
                        continue;
                    }
                }
            }
            Ok(Envelope::Interactive) => {
                // Button clicks (approvals, feedback), authenticated by the socket.
                if let Err(e) = super::interactivity::handle(state, &envelope["payload"]).await {
                    tracing::warn!(error = %e, "socket mode click not handled");
                    continue;
                }
            }
            Ok(Envelope::Other) => {
                tracing::debug!(kind = ?envelope["type"], "socket mode frame acknowledged, not handled");
            }
            Err(e) => tracing::debug!(error = %e, "socket mode frame not understood"),
        }
        let Some(id) = envelope["envelope_id"].as_str() else {
            continue;
        };
        ws.send(Message::Text(json!({"envelope_id": id}).to_string().into()))
            .await
            .map_err(|e| e.to_string())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_frames_are_told_apart() {
        let frame = |v: Value| Envelope::deserialize(&v).unwrap();
        let hello = json!({"type": "hello", "num_connections": 1, "debug_info": {"host": "applink-7fc4fdbb64-4x5xq",
            "build_number": 10, "approximate_connection_time": 18060}, "connection_info": {"app_id": "A01K58AR4RF"}});
        assert_eq!(frame(hello), Envelope::Hello);
        let disconnect = json!({"type": "disconnect", "reason": "refresh_requested",
            "debug_info": {"host": "applink-7fc4fdbb64-4x5xq"}});
        assert_eq!(
            frame(disconnect),
            Envelope::Disconnect {
                reason: "refresh_requested".into()
            }
        );
        let events = json!({"envelope_id": "dbdd0ef3-1543-4f94-bfb4-133d0e6c1545", "type": "events_api",
            "accepts_response_payload": false, "payload": {"type": "event_callback"}});
        assert_eq!(frame(events), Envelope::EventsApi);
        let click = json!({"envelope_id": "57d6a792-4d35-4d0b-b6aa-3361493e1caf", "type": "interactive",
            "accepts_response_payload": false, "payload": {"type": "block_actions"}});
        assert_eq!(frame(click), Envelope::Interactive);
        let command =
            json!({"envelope_id": "1d3c79ab", "type": "slash_commands", "accepts_response_payload": true});
        assert_eq!(frame(command), Envelope::Other);
    }
}
