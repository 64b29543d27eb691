//! `GET /metrics`: the process's [`Metrics`](crate::metrics::Metrics) for Prometheus,
//! with the queue gauges read from the store at scrape time; and the middleware that
//! counts refused trigger requests (401, 400, 413), which never reach a handler's body.

use axum::extract::{Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::metrics::TriggerOutcome;
use crate::types::event_outcome::{EventOutcome, OutcomeKind};

/// Serves the metrics, or 401: without `STEWARD_METRICS_TOKEN` when one is set, and to
/// everyone when none is set and steward listens beyond loopback.
pub async fn metrics(
    State(state): State<AppState>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    let admin = &state.secrets.admin;
    let client = super::throttle::client_of(&extensions);
    let guarded = admin.metrics_token.is_some();
    if guarded && let Err(wait) = admin.metrics_throttle.attempt(client, std::time::Instant::now()) {
        state.runner.metrics.login("throttled");
        return super::throttle::too_many(wait);
    }
    if guarded && admin.metrics_allowed(&headers) {
        admin.metrics_throttle.succeeded(client);
    }
    if !admin.metrics_allowed(&headers) {
        let why = if guarded {
            "send STEWARD_METRICS_TOKEN as a bearer token\n"
        } else if admin.metrics_open {
            "/metrics answers without STEWARD_METRICS_TOKEN only on this machine: this request came through a proxy or names another host\n"
        } else {
            "/metrics is closed: steward listens beyond loopback (or STEWARD_PUBLIC_URL names another host) and STEWARD_METRICS_TOKEN is not set; set it and scrape with it as a bearer token\n"
        };
        return (StatusCode::UNAUTHORIZED, why).into_response();
    }
    let metrics = &state.runner.metrics;
    match state.runner.store.queue_depth().await {
        Ok((events, runs)) => metrics.set_queue_depth(events, runs),
        // Still serve the rest; the gauges keep their last value.
        Err(e) => tracing::warn!(error = %e, "cannot read the queue depth for /metrics"),
    }
    // Prometheus asks for OpenMetrics; everything else gets the classic text format.
    let open_metrics = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    if open_metrics {
        ([(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], metrics.render()).into_response()
    } else {
        (
            [(CONTENT_TYPE, crate::metrics::PROMETHEUS_CONTENT_TYPE)],
            metrics.render_prometheus(),
        )
            .into_response()
    }
}

/// The trigger source a webhook path belongs to.
fn source_of(path: &str) -> &'static str {
    match path {
        "/slack/events" | "/slack/interactivity" => "slack",
        "/jira/webhook" => "jira",
        "/notion/webhook" => "notion",
        _ => "webhook",
    }
}

/// Counts trigger requests refused before they became events. Accepted and duplicate
/// events are counted where they are stored (they know their kind).
pub async fn count_refusals(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let source = source_of(request.uri().path());
    let response = next.run(request).await;
    let outcome = match response.status() {
        StatusCode::UNAUTHORIZED => Some(TriggerOutcome::Unauthorized),
        StatusCode::PAYLOAD_TOO_LARGE => Some(TriggerOutcome::TooLarge),
        StatusCode::BAD_REQUEST => Some(TriggerOutcome::BadRequest),
        _ => None,
    };
    if let Some(outcome) = outcome {
        state.runner.metrics.trigger(source, "", outcome);
        state.runner.metrics.event_outcome(source, OutcomeKind::Refused);
        let reason = match response.extensions().get::<super::handlers::Refusal>() {
            Some(r) => r.0.clone(),
            None if response.status() == StatusCode::PAYLOAD_TOO_LARGE => "too large".into(),
            None => format!("HTTP {}", response.status().as_u16()),
        };
        // Recorded without the body, at most a few a minute per source: a flood of
        // forged requests must not fill the database (the metric counts them all).
        if state.refusals.admit(source, super::refusals::Refused::Request) {
            state.ingest.record(
                source,
                "refused",
                EventOutcome::because(OutcomeKind::Refused, reason),
            );
        }
    }
    response
}
