//! The HTTP server: `fn app(state) -> Router` so tests drive it without a socket, the
//! background service (event writer, router, workers, cron) and graceful shutdown.

pub mod access;
pub mod agent_view;
pub mod channel_changes;
pub mod click;
mod connections;
pub mod digest;
pub mod dispatch;
mod escalation;
pub mod follow_ups;
pub mod handlers;
pub mod handoff;
mod held;
mod hook_error;
pub mod ingest;
pub mod inspector;
pub mod interactivity;
pub mod limits;
pub mod mcp;
pub mod model_watch;
mod notion_window;
pub mod outcomes;
pub mod refusals;
pub mod reseal;
pub mod scrape;
mod slack_teams;
pub mod socket_mode;
pub mod stops;
pub mod throttle;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::{Config, Settings, TriggerSpec};
use crate::integrations::notion::NotionClient;
use crate::integrations::slack::SlackClient;
use crate::run::Runner;

pub use connections::{ConnectionTimeouts, serve_connections};
pub use dispatch::{DispatchSettings, Dispatcher};
pub use ingest::Ingest;

/// Default request body cap (1 MB).
pub const BODY_LIMIT: usize = 1024 * 1024;
/// Requests taking longer than this are answered 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A request head must arrive whole within this long of its first byte (of the
/// connection's opening, for its first request); slower ones are closed.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A response write that makes no progress this long (the client stopped reading)
/// closes the connection.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long interrupted runs get to record their end after the grace period.
pub const INTERRUPT_WAIT: Duration = Duration::from_secs(5);

/// Secrets that authenticate inbound requests. Never logged.
#[derive(Clone, Default)]
pub struct Secrets {
    pub slack_signing: String,
    pub slack_bot_user: Option<String>,
    /// `SLACK_TEAM_IDS`; empty accepts every workspace.
    pub slack_teams: Vec<String>,
    pub jira: String,
    /// `NOTION_WEBHOOK_TOKEN`: the subscription's verification token, pasted by the
    /// operator. Unset means the Notion route is closed.
    pub notion: Option<String>,
    /// Bearer token per generic hook name.
    pub hooks: BTreeMap<String, String>,
    /// Who may read the run inspector and `/metrics`.
    pub admin: access::AdminAccess,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("hooks", &self.hooks.keys().collect::<Vec<_>>())
            .field("admin", &self.admin)
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// `SLACK_SIGNING_SECRET`, `SLACK_BOT_USER_ID`, `JIRA_WEBHOOK_SECRET`,
    /// `NOTION_WEBHOOK_TOKEN`, and
    /// `STEWARD_HOOK_<NAME>_TOKEN` for every webhook trigger (name upper-cased, `-` → `_`).
    pub fn new(config: &Config, settings: &Settings) -> Secrets {
        let mut hooks = BTreeMap::new();
        for agent in config.agents.values() {
            for t in &agent.triggers {
                if let TriggerSpec::Webhook(w) = t
                    && let Some(token) = settings.hook_token(&w.name)
                {
                    hooks.insert(w.name.clone(), token.to_string());
                }
            }
        }
        Secrets {
            slack_signing: settings.slack_signing_secret.clone().unwrap_or_default(),
            slack_bot_user: settings.slack_bot_user_id.clone(),
            slack_teams: settings.slack_team_ids.clone(),
            jira: settings.jira_webhook_secret.clone().unwrap_or_default(),
            notion: settings.notion_webhook_token.clone(),
            hooks,
            admin: access::AdminAccess {
                token: settings.admin_token.clone(),
                trusted_proxies: settings.trusted_proxies.clone(),
                trusted_user_header: settings
                    .trusted_user_header
                    .as_ref()
                    .map(|h| h.to_ascii_lowercase()),
                metrics_token: settings.metrics_token.clone(),
                open: false,
                metrics_open: false,
                // Served over TLS (the public URL is https): the login cookie is never
                // sent over plain HTTP.
                secure_cookie: settings
                    .public_url
                    .as_deref()
                    .is_some_and(|u| u.starts_with("https://")),
                hosts: access::Hosts {
                    bind: None,
                    public: settings
                        .public_url
                        .as_deref()
                        .and_then(|u| url::Url::parse(u).ok())
                        .and_then(|u| {
                            u.host_str()
                                .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
                        }),
                },
                throttle: Default::default(),
                metrics_throttle: Default::default(),
            },
        }
    }
}

impl Secrets {
    /// Whether Slack workspace `team` may reach steward (`SLACK_TEAM_IDS`). With a
    /// list, an event or click naming no workspace is refused too.
    pub fn slack_team_allowed(&self, team: Option<&str>) -> bool {
        self.slack_teams.is_empty() || team.is_some_and(|t| self.slack_teams.iter().any(|a| a == t))
    }

    /// Whether `SLACK_TEAM_IDS` names workspace `team` (never when it is unset).
    pub fn slack_team_listed(&self, team: &str) -> bool {
        self.slack_teams.iter().any(|a| a == team)
    }
}

pub use crate::config::settings::hook_token_var;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub runner: Runner,
    pub config: Arc<Config>,
    pub secrets: Arc<Secrets>,
    pub ingest: Ingest,
    pub slack: Option<SlackClient>,
    /// Background work started by handlers (joining channels).
    pub tasks: TaskTracker,
    /// Display names for the inspector.
    pub people: Arc<inspector::people::People>,
    /// Fired when a person decides an approval, so the dispatcher resumes the run now
    /// rather than at its next reconcile.
    pub resume: Arc<Notify>,
    /// Fired on SIGTERM before anything stops: `/readyz` turns 503 so load balancers
    /// send new requests elsewhere while this replica drains, and the dispatcher stops
    /// (no queued run starts; what arrives stays queued for the next start). A child of
    /// [`Service::shutdown`], so a stop without a signal drains too.
    pub draining: CancellationToken,
    /// Bounds how many refused requests are recorded (see `scrape::count_refusals`).
    pub refusals: Arc<refusals::RefusalBudget>,
    /// `steward improve` for digests' buttons (`steward serve` gives the config tree's).
    pub improver: Option<digest::Improver>,
    /// Whether a Notion setup window is open, a closed one remembered briefly.
    pub notion_window: Arc<notion_window::SetupWindow>,
}

/// The router with every route steward serves.
pub fn app(state: AppState) -> Router {
    let triggers = Router::new()
        .route("/slack/events", post(handlers::slack_events))
        .route("/slack/interactivity", post(interactivity::slack_interactivity))
        .route("/jira/webhook", post(handlers::jira_webhook))
        .route("/notion/webhook", post(handlers::notion_webhook))
        .route("/hooks/{name}", post(handlers::generic_hook))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            scrape::count_refusals,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(scrape::metrics))
        .merge(triggers)
        .merge(inspector::routes(state.clone()))
        .layer(axum::middleware::map_response(plain_hardening))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
        .with_state(state)
}

/// Every answer is what its `Content-Type` says and is never kept by a shared cache
/// (health, metrics and webhook answers included; the inspector adds its own policy).
async fn plain_hardening(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        ("x-content-type-options", "nosniff"),
        ("cache-control", "no-store"),
    ] {
        if !headers.contains_key(name) {
            headers.insert(name, axum::http::HeaderValue::from_static(value));
        }
    }
    response
}

/// Liveness: the process serves requests. It does not look at the database, so an
/// outage there does not get healthy replicas restarted.
async fn healthz(State(state): State<AppState>) -> Response {
    Json(json!({"status": "ok", "agents": state.config.agents.len()})).into_response()
}

/// Readiness: the store answers and the replica is not draining.
async fn readyz(State(state): State<AppState>) -> Response {
    if state.draining.is_cancelled() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "draining"})),
        )
            .into_response();
    }
    match state.runner.store.list_runs(1).await {
        Ok(_) => Json(json!({"status": "ready"})).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "readiness check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "unavailable", "error": "store unreachable"})),
            )
                .into_response()
        }
    }
}

/// The running service: handler state plus its owned background tasks.
pub struct Service {
    pub state: AppState,
    pub dispatcher: Arc<Dispatcher>,
    /// Owns the writer, dispatcher and run tasks.
    pub tracker: TaskTracker,
    pub shutdown: CancellationToken,
}

/// Runs the store's housekeeping ([`crate::store::EventQueue::maintain`]) once a second
/// until shutdown.
async fn maintain(
    store: Arc<dyn crate::store::Store>,
    retention: Duration,
    run_retention: Option<Duration>,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first prune runs at start, then every PRUNE_EVERY.
    let mut pruned_at: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.cancelled() => return,
        }
        if let Err(e) = store.maintain().await {
            tracing::warn!(error = %e, "store housekeeping failed");
        }
        if pruned_at.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            pruned_at = Some(std::time::Instant::now());
            match store.prune_events(crate::store::ago(retention)).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(events = n, "pruned the event log"),
                Err(e) => tracing::warn!(error = %e, "cannot prune the event log"),
            }
            if let Some(keep) = run_retention {
                // In batches, so a store that kept years catches up without holding
                // the writer for long.
                loop {
                    match store.prune_runs(crate::store::ago(keep)).await {
                        Ok(n) if n < u64::from(crate::store::PRUNE_BATCH) => {
                            if n > 0 {
                                tracing::info!(runs = n, "pruned ended runs past STEWARD_RUN_RETENTION");
                            }
                            break;
                        }
                        Ok(n) => tracing::info!(runs = n, "pruned ended runs past STEWARD_RUN_RETENTION"),
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot prune ended runs");
                            break;
                        }
                    }
                    if shutdown.is_cancelled() {
                        break;
                    }
                }
            }
        }
    }
}

/// How often deliveries older than the retention are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(60 * 60);

impl Service {
    /// Starts the event writer and the dispatcher (router, workers, cron, reconciler).
    pub fn start(
        runner: Runner,
        config: Arc<Config>,
        secrets: Secrets,
        slack: Option<SlackClient>,
        notion: Option<NotionClient>,
        settings: DispatchSettings,
    ) -> Service {
        let retention = settings.event_retention;
        let run_retention = settings.run_retention;
        let improver = settings.improver.clone();
        let tracker = TaskTracker::new();
        let shutdown = CancellationToken::new();
        // Cancelled at the first signal (and with `shutdown`): from then on no queued run
        // starts and no event is routed, while requests are still served for the drain.
        let draining = shutdown.child_token();
        let notify = Arc::new(Notify::new());
        let resume = Arc::new(Notify::new());
        let private = Arc::new(Mutex::new(Default::default()));
        let ingest = Ingest::start(
            runner.store.clone(),
            notify.clone(),
            private.clone(),
            &tracker,
            shutdown.clone(),
            settings.data_key.clone(),
        );
        let dispatcher = Arc::new(Dispatcher::new(
            runner.clone(),
            config.clone(),
            notify,
            resume.clone(),
            private,
            notion,
            slack.clone(),
            settings,
            tracker.clone(),
            draining.clone(),
        ));
        tracker.spawn(dispatcher.clone().run());
        tracker.spawn(maintain(
            runner.store.clone(),
            retention,
            run_retention,
            shutdown.clone(),
        ));
        if let Some(slack) = &slack {
            tracker.spawn(channel_changes::sync(
                runner.store.clone(),
                slack.clone(),
                shutdown.clone(),
            ));
        }
        tracker.spawn(model_watch::watch(
            runner.providers.clone(),
            config.clone(),
            runner.metrics.clone(),
            shutdown.clone(),
        ));
        let state = AppState {
            runner,
            config,
            secrets: Arc::new(secrets),
            ingest,
            people: Arc::new(inspector::people::People::new(slack.clone())),
            draining,
            resume,
            slack,
            tasks: tracker.clone(),
            refusals: Arc::default(),
            improver: improver.clone(),
            notion_window: Arc::default(),
        };
        Service {
            state,
            dispatcher,
            tracker,
            shutdown,
        }
    }

    /// Also receives Slack events over Socket Mode.
    pub fn with_socket_mode(self, config: socket_mode::SocketModeConfig, http: reqwest::Client) -> Service {
        self.tracker.spawn(socket_mode::run(
            self.state.clone(),
            config,
            http,
            self.shutdown.clone(),
        ));
        self
    }

    pub fn router(&self) -> Router {
        app(self.state.clone())
    }

    /// Stops taking new work and waits up to `grace` for running work. Runs still going
    /// then are cancelled and end `interrupted` (given [`INTERRUPT_WAIT`] to record
    /// that); a run that cannot even do that is left to its lease and reconciled by the
    /// next start.
    pub async fn stop(self, grace: Duration) {
        self.shutdown.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait()).await.is_ok() {
            return;
        }
        tracing::warn!(
            grace_secs = grace.as_secs_f64(),
            "runs still going after the grace period; interrupting them"
        );
        self.state.runner.interrupt.cancel();
        if tokio::time::timeout(INTERRUPT_WAIT, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "runs did not stop when interrupted; their leases will expire and the next start reconciles them"
            );
        }
    }
}

/// Serves on `addr` until SIGTERM or ctrl-c, then stops gracefully: `/readyz` turns
/// 503 at once, requests are still served for `drain` (so load balancers see the
/// change), then no new connections are accepted, and open connections and running
/// work both get the same `grace`. An idle keep-alive connection is closed after
/// `keep_alive`; a request head must arrive within [`HEADER_READ_TIMEOUT`].
pub async fn serve(
    addr: SocketAddr,
    service: Service,
    grace: Duration,
    drain: Duration,
    keep_alive: Duration,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let open_files = connections::raise_open_files();
    tracing::info!(addr = %listener.local_addr()?, agents = service.state.config.agents.len(), open_files, "steward listening");
    let stop = service.shutdown.clone();
    let on_signal = stop.clone();
    let draining = service.state.draining.clone();
    let interrupt = service.state.runner.interrupt.clone();
    let signals = tokio::spawn(async move {
        // A second signal during the drain is the "now" below, not the end of the drain.
        let mut now = false;
        tokio::select! {
            _ = shutdown_signal() => {
                draining.cancel();
                if !drain.is_zero() {
                    tracing::info!(drain_secs = drain.as_secs_f64(), "not ready; draining before stopping");
                    tokio::select! {
                        _ = tokio::time::sleep(drain) => {}
                        _ = shutdown_signal() => now = true,
                    }
                }
                on_signal.cancel();
            }
            _ = on_signal.cancelled() => {}
        }
        // A second signal means "now": running work is interrupted at once (each run
        // records `interrupted`), and the process exits once that is written, without
        // waiting out the grace period for connections.
        if !now {
            shutdown_signal().await;
        }
        tracing::warn!("second signal: interrupting running work and exiting");
        interrupt.cancel();
        tokio::time::sleep(INTERRUPT_WAIT).await;
        std::process::exit(130);
    });
    // Open connections and running work share one grace period (not one after the
    // other), so a stop takes at most drain + grace + INTERRUPT_WAIT.
    let connections = serve_connections(
        listener,
        service.router(),
        stop.clone(),
        ConnectionTimeouts {
            head: HEADER_READ_TIMEOUT,
            idle: keep_alive,
            write: WRITE_STALL_TIMEOUT,
            // Half the descriptors at most: the rest are the database's, the providers'
            // and the scripts'.
            max_connections: connections::MAX_CONNECTIONS.min((open_files / 2).max(64) as usize),
        },
        grace,
    );
    let work = async {
        stop.cancelled().await;
        service.stop(grace).await;
    };
    tokio::join!(connections, work);
    signals.abort();
    tracing::info!("steward stopped");
    Ok(())
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
