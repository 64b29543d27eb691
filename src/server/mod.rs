//! The HTTP server: `fn app(state) -> Router` so tests drive it without a socket, and
//! `serve` with graceful shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::run::Runner;

/// Default request body cap (1 MB).
pub const BODY_LIMIT: usize = 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub runner: Runner,
    pub config: Arc<Config>,
    /// Cancelled on shutdown; runs started by the server watch it.
    pub shutdown: CancellationToken,
}

/// The router with every route steward serves.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(state)
}

async fn healthz(State(state): State<AppState>) -> Response {
    match state.runner.store.list_runs(1).await {
        Ok(_) => Json(json!({"status": "ok", "agents": state.config.agents.len()})).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "health check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "error": "store unreachable"})),
            )
                .into_response()
        }
    }
}

/// Serves `app` on `addr` until `shutdown` is cancelled (or SIGTERM/ctrl-c arrives),
/// then stops accepting and lets in-flight requests finish for up to `grace`.
pub async fn serve(addr: SocketAddr, state: AppState, grace: Duration) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(addr = %listener.local_addr()?, agents = state.config.agents.len(), "steward listening");
    let shutdown = state.shutdown.clone();
    let signals = shutdown.clone();
    let signal_task = tokio::spawn(async move {
        tokio::select! {
            _ = shutdown_signal() => signals.cancel(),
            _ = signals.cancelled() => {}
        }
    });
    let stopped = shutdown.clone();
    let server =
        axum::serve(listener, app(state)).with_graceful_shutdown(async move { stopped.cancelled().await });
    let result = tokio::select! {
        r = server => r,
        _ = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::warn!("shutdown grace period over, dropping open connections");
            Ok(())
        }
    };
    signal_task.abort();
    tracing::info!("steward stopped");
    result
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("ctrl-c received, shutting down"),
        _ = term => tracing::info!("SIGTERM received, shutting down"),
    }
}
