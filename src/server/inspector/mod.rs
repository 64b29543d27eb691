//! The run inspector, for the people who own workflows: `/runs` (recent runs with
//! filters and search), `/runs/{id}` (one run as a timeline), `/prompts/{path}` (the
//! prompt or script an agent runs), the same data as JSON under `/api/runs`, and
//! `/login`. Every route passes [`AdminAccess`](super::access::AdminAccess) first.

mod events;
pub mod pages;
pub mod people;
mod problems;
pub mod timeline;

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::access::Denied;
use crate::config::{AgentConfig, Coordinator};
use crate::run::reply::{inspector_prompt_path, prompt_path};
use crate::store::{RunFilter, RunRow, RunStatus};

/// Most runs one list shows.
const MAX_LIST: u32 = 500;
/// Runs a list shows unless asked for another number.
const DEFAULT_LIST: u32 = 100;

/// The inspector's routes, behind the access check (`/login` is open).
pub fn routes(state: AppState) -> Router<AppState> {
    let guarded = Router::new()
        .route("/runs", get(run_list))
        .route("/runs/{id}", get(run_page))
        .route("/prompts/{*path}", get(prompt_page))
        .route("/api/runs", get(api_runs))
        .route("/api/runs/{id}", get(api_run))
        .route("/events", get(events::event_list))
        .route("/events/{id}", get(events::event_page))
        .route("/api/events", get(events::api_events))
        .route("/api/events/{id}", get(events::api_event))
        .route("/problems", get(problems::problem_page))
        .route("/api/problems", get(problems::api_problems))
        .nest_service(
            "/mcp",
            crate::server::mcp::http_service(state.runner.store.clone(), state.config.clone()),
        )
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), guard));
    Router::new()
        .route("/login", get(login_form).post(login))
        .merge(guarded)
        .route_layer(axum::middleware::from_fn_with_state(state, host_guard))
}

/// The inspector's pages run no script, load nothing from elsewhere and are never
/// framed, cached or named in a Referer: a policy that holds even if some text escaped
/// its escaping, and keeps run data out of shared caches and other sites' logs.
const HARDENING: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-frame-options", "DENY"),
    ("x-content-type-options", "nosniff"),
    ("cache-control", "no-store"),
    ("referrer-policy", "no-referrer"),
];

fn harden(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in HARDENING {
        if !headers.contains_key(name) {
            headers.insert(name, axum::http::HeaderValue::from_static(value));
        }
    }
    response
}

/// Refuses (403) inspector requests whose `Host` is not this steward's, so a page that
/// rebinds its own name to steward's address cannot read runs in a local browser.
async fn host_guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let admin = &state.secrets.admin;
    let changes = !matches!(
        *request.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    );
    match admin.host_allowed(request.headers()) {
        Ok(()) => match admin.origin_allowed(request.headers()) {
            Err(origin) if changes => {
                tracing::warn!(%origin, path = %request.uri().path(), "refused an inspector request posted from another site");
                let message =
                    format!("this steward takes requests only from its own pages, not from '{origin}'");
                harden((StatusCode::FORBIDDEN, Json(json!({"error": message}))).into_response())
            }
            _ => harden(next.run(request).await),
        },
        Err(host) => {
            tracing::warn!(%host, path = %request.uri().path(), "refused an inspector request for another host");
            let message = format!(
                "this steward does not answer to the host '{host}': use localhost, its address, or STEWARD_PUBLIC_URL"
            );
            harden((StatusCode::FORBIDDEN, Json(json!({"error": message}))).into_response())
        }
    }
}

/// Refuses requests [`AdminAccess`](super::access::AdminAccess) does not admit: 401,
/// as JSON under `/api`, else as a page pointing at `/login`.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let admin = &state.secrets.admin;
    // A bearer token is a guess like a typed one: throttled the same way.
    let client = super::throttle::client_of(request.extensions());
    let viewer = admin.viewer(request.headers(), client);
    // A person the trusted proxy names is no guess, whatever `Authorization` it
    // forwards (oauth2-proxy can pass its own): only a bearer that decides access counts.
    let bearer = admin.token.is_some()
        && request.headers().contains_key(axum::http::header::AUTHORIZATION)
        && !matches!(viewer, Ok(super::access::Viewer::Person(_)));
    if bearer && let Err(wait) = admin.throttle.attempt(client, std::time::Instant::now()) {
        state.runner.metrics.login("throttled");
        return super::throttle::too_many(wait);
    }
    match viewer {
        Ok(viewer) => {
            if bearer && viewer == super::access::Viewer::Admin {
                admin.throttle.succeeded(client);
            }
            next.run(request).await
        }
        Err(denied) => {
            let api = request.uri().path().starts_with("/api/");
            let mut response = if api {
                Json(json!({"error": denied.to_string()})).into_response()
            } else {
                Html(pages::message("Sign in", &denied.to_string()).into_string()).into_response()
            };
            *response.status_mut() = StatusCode::UNAUTHORIZED;
            if denied == Denied::NeedsToken {
                response.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    axum::http::HeaderValue::from_static("Bearer realm=\"steward\""),
                );
            }
            response
        }
    }
}

/// `/runs` and `/api/runs` query parameters; blank means unset.
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    pub agent: Option<String>,
    pub status: Option<String>,
    pub source: Option<String>,
    /// `YYYY-MM-DD`, inclusive.
    pub since: Option<String>,
    /// `YYYY-MM-DD`, inclusive.
    pub until: Option<String>,
    pub q: Option<String>,
    pub limit: Option<u32>,
    /// `all` lists subagent and judge runs too; by default only workflows' own runs.
    pub runs: Option<String>,
}

fn blank_none(v: &Option<String>) -> Option<String> {
    v.as_ref().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn day(v: &Option<String>, name: &str, next: bool) -> Result<Option<DateTime<Utc>>, String> {
    let Some(text) = blank_none(v) else {
        return Ok(None);
    };
    let date = NaiveDate::parse_from_str(&text, "%Y-%m-%d")
        .map_err(|_| format!("{name}='{text}' is not a date (YYYY-MM-DD)"))?;
    let date = if next {
        date.succ_opt().unwrap_or(date)
    } else {
        date
    };
    Ok(date.and_hms_opt(0, 0, 0).map(|t| t.and_utc()))
}

impl ListQuery {
    fn filter(&self) -> Result<RunFilter, String> {
        let status = match blank_none(&self.status) {
            None => None,
            Some(s) => Some(RunStatus::parse(&s).ok_or_else(|| format!("status='{s}' is not a run status"))?),
        };
        Ok(RunFilter {
            agent: blank_none(&self.agent),
            status,
            source: blank_none(&self.source),
            since: day(&self.since, "since", false)?,
            until: day(&self.until, "until", true)?,
            text: blank_none(&self.q),
            top_level: blank_none(&self.runs).as_deref() != Some("all"),
            limit: self.limit.unwrap_or(DEFAULT_LIST).clamp(1, MAX_LIST),
        })
    }
}

fn bad_request(api: bool, message: String) -> Response {
    let mut r = if api {
        Json(json!({"error": message})).into_response()
    } else {
        Html(pages::message("Bad request", &message).into_string()).into_response()
    };
    *r.status_mut() = StatusCode::BAD_REQUEST;
    r
}

fn unavailable(api: bool, e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "the inspector cannot read the store");
    let message = "the run store is unavailable".to_string();
    let mut r = if api {
        Json(json!({"error": message})).into_response()
    } else {
        Html(pages::message("Unavailable", &message).into_string()).into_response()
    };
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r
}

fn not_found(api: bool, what: &str) -> Response {
    let message = format!("no {what} here");
    let mut r = if api {
        Json(json!({"error": message})).into_response()
    } else {
        Html(pages::message("Not found", &message).into_string()).into_response()
    };
    *r.status_mut() = StatusCode::NOT_FOUND;
    r
}

/// Who triggered `run`, as a page shows it: the person's name from `names` (their id
/// when it has none), or "parent run" for a subagent's run.
fn actor_label(run: &RunRow, names: &HashMap<String, String>) -> String {
    match &run.actor {
        Some(actor) => names.get(actor).cloned().unwrap_or_else(|| actor.clone()),
        None if run.parent_id.is_some() => "parent run".into(),
        None => String::new(),
    }
}

async fn run_list(State(state): State<AppState>, Query(query): Query<ListQuery>) -> Response {
    let filter = match query.filter() {
        Ok(f) => f,
        Err(e) => return bad_request(false, e),
    };
    let runs = match state.runner.store.query_runs(&filter).await {
        Ok(runs) => runs,
        Err(e) => return unavailable(false, e),
    };
    let names = state
        .people
        .names(runs.iter().filter_map(|r| r.actor.as_deref()))
        .await;
    let listed: Vec<pages::ListedRun> = runs
        .into_iter()
        .map(|run| pages::ListedRun {
            actor: actor_label(&run, &names),
            run,
        })
        .collect();
    let agents: Vec<String> = state.config.agents.keys().cloned().collect();
    let sources = ["slack", "jira", "notion", "webhook", "cron", "cli", "subagent"];
    Html(pages::run_list(&listed, &filter, &agents, &sources).into_string()).into_response()
}

/// The agent (or subagent) config a run was of, if it still exists.
fn agent_of<'a>(state: &'a AppState, name: &str) -> Option<&'a AgentConfig> {
    state
        .config
        .agents
        .get(name)
        .or_else(|| state.config.subagents.get(name))
        .map(|a| a.as_ref())
}

async fn run_page(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let store = &state.runner.store;
    let run = match store.get_run(&id).await {
        Ok(Some(run)) => run,
        Ok(None) => return not_found(false, "run"),
        Err(e) => return unavailable(false, e),
    };
    let (events, children, scores, escalation) = match (
        store.run_events(&id).await,
        store.child_runs(&id).await,
        store.run_scores(&id).await,
        store.escalation(&id).await,
    ) {
        (Ok(e), Ok(c), Ok(s), Ok(x)) => (e, c, s, x),
        (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => {
            return unavailable(false, e);
        }
    };
    let page = pages::RunPage {
        actor: actor_label(&run, &state.people.names(run.actor.as_deref()).await),
        steps: timeline::steps(&events, run.private),
        children,
        prompt: agent_of(&state, &run.agent)
            .and_then(prompt_path)
            .map(|p| inspector_prompt_path(&p)),
        scores,
        escalation,
        run: &run,
    };
    Html(pages::run_detail(&page).into_string()).into_response()
}

/// The prompt or script at repository path `path` (`prompts/x.md`, or `x.md` for a file
/// under `prompts/`), with the agents that use it. Only what the loaded configuration
/// holds is served: never a file read from disk by a requested path.
fn find_prompt(state: &AppState, path: &str) -> Option<(String, String, Vec<String>)> {
    let wanted = [path.to_string(), format!("prompts/{path}")];
    let mut found: Option<(String, String)> = None;
    let mut users = Vec::new();
    for agent in state
        .config
        .agents
        .values()
        .chain(state.config.subagents.values())
    {
        let Some(p) = prompt_path(agent).filter(|p| wanted.contains(p)) else {
            continue;
        };
        users.push(agent.name.clone());
        if found.is_none() {
            let text = match &agent.coordinator {
                Coordinator::Script { source, .. } => source.clone(),
                Coordinator::Llm => agent.prompt.as_ref().map(|p| p.text.clone()).unwrap_or_default(),
            };
            found = Some((p, text));
        }
    }
    found.map(|(p, t)| (p, t, users))
}

async fn prompt_page(State(state): State<AppState>, Path(path): Path<String>) -> Response {
    match find_prompt(&state, &path) {
        Some((path, text, users)) => Html(pages::prompt(&path, &text, &users).into_string()).into_response(),
        None => not_found(false, "prompt"),
    }
}

async fn api_runs(State(state): State<AppState>, Query(query): Query<ListQuery>) -> Response {
    let filter = match query.filter() {
        Ok(f) => f,
        Err(e) => return bad_request(true, e),
    };
    match state.runner.store.query_runs(&filter).await {
        Ok(runs) => Json(json!({ "runs": runs })).into_response(),
        Err(e) => unavailable(true, e),
    }
}

async fn api_run(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    let store = &state.runner.store;
    let run = match store.get_run(&id).await {
        Ok(Some(run)) => run,
        Ok(None) => return not_found(true, "run"),
        Err(e) => return unavailable(true, e),
    };
    match (
        store.run_events(&id).await,
        store.child_runs(&id).await,
        store.run_scores(&id).await,
    ) {
        (Ok(events), Ok(children), Ok(scores)) => {
            let children: Vec<&str> = children.iter().map(|c| c.id.as_str()).collect();
            Json(json!({ "run": run, "events": events, "children": children, "scores": scores }))
                .into_response()
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => unavailable(true, e),
    }
}

async fn login_form() -> Html<String> {
    Html(pages::login(false).into_string())
}

/// `POST /login` with a form body `token=...`: sets the session cookie and goes to
/// `/runs`, or shows the form again.
/// Tries are throttled per client address: after a few wrong tokens each further try
/// waits longer (429 with `Retry-After`), counted in `steward_inspector_logins_total`.
async fn login(State(state): State<AppState>, extensions: axum::http::Extensions, body: Bytes) -> Response {
    let admin = &state.secrets.admin;
    let client = super::throttle::client_of(&extensions);
    let now = std::time::Instant::now();
    if let Err(wait) = admin.throttle.attempt(client, now) {
        state.runner.metrics.login("throttled");
        return super::throttle::too_many(wait);
    }
    let typed = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    match admin.login(&typed) {
        Some(cookie) => {
            admin.throttle.succeeded(client);
            state.runner.metrics.login("ok");
            let mut headers = HeaderMap::new();
            if let Ok(v) = cookie.parse() {
                headers.insert(SET_COOKIE, v);
            }
            headers.insert(LOCATION, axum::http::HeaderValue::from_static("/runs"));
            (StatusCode::SEE_OTHER, headers).into_response()
        }
        None => {
            state.runner.metrics.login("wrong_token");
            tracing::warn!(client = ?client, "failed inspector sign-in");
            (StatusCode::UNAUTHORIZED, Html(pages::login(true).into_string())).into_response()
        }
    }
}
