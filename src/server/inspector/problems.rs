//! An agent's problems in the inspector: `/problems?agent=&days=` (the review of
//! `steward review`, with links to example runs) and the same as JSON at
//! `/api/problems`.

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use maud::html;
use serde::Deserialize;

use super::{bad_request, blank_none, pages, unavailable};
use crate::server::AppState;

/// The period unless asked for another, and the longest.
const DEFAULT_DAYS: u32 = 7;
const MAX_DAYS: u32 = 90;

/// `?agent=&days=`
#[derive(Debug, Default, Deserialize)]
pub struct ProblemQuery {
    pub agent: Option<String>,
    pub days: Option<u32>,
}

impl ProblemQuery {
    fn since(&self) -> chrono::DateTime<chrono::Utc> {
        let days = self.days.unwrap_or(DEFAULT_DAYS).clamp(1, MAX_DAYS);
        chrono::Utc::now() - chrono::Duration::days(i64::from(days))
    }
}

async fn reviewed(
    state: &AppState,
    query: &ProblemQuery,
    api: bool,
) -> Result<crate::evals::review::Review, Response> {
    let Some(agent) = blank_none(&query.agent) else {
        return Err(bad_request(api, "agent= names the agent to review".into()));
    };
    if !state.config.agents.contains_key(&agent) {
        return Err(bad_request(api, format!("no agent '{agent}'")));
    }
    crate::evals::review::review(state.runner.store.as_ref(), &agent, query.since())
        .await
        .map_err(|e| unavailable(api, e))
}

pub async fn api_problems(State(state): State<AppState>, Query(query): Query<ProblemQuery>) -> Response {
    match reviewed(&state, &query, true).await {
        Ok(review) => Json(review).into_response(),
        Err(r) => r,
    }
}

pub async fn problem_page(State(state): State<AppState>, Query(query): Query<ProblemQuery>) -> Response {
    let agents: Vec<&String> = state.config.agents.keys().collect();
    let chosen = blank_none(&query.agent);
    let review = match &chosen {
        Some(_) => match reviewed(&state, &query, false).await {
            Ok(r) => Some(r),
            Err(r) => return r,
        },
        None => None,
    };
    let days = query.days.unwrap_or(DEFAULT_DAYS).clamp(1, MAX_DAYS);
    let body = html! {
        form.filters method="get" action="/problems" {
            select name="agent" {
                @for a in &agents {
                    option value=(a) selected[chosen.as_deref() == Some(a.as_str())] { (a) }
                }
            }
            " over the last "
            input type="number" name="days" min="1" max=(MAX_DAYS) value=(days);
            " days "
            button type="submit" { "Review" }
        }
        @if let Some(r) = &review {
            p { (r.runs) " runs of " (r.agent) " since " (crate::store::timestamp(r.since)) "." }
            @if r.problems.is_empty() {
                p.note { "No problems: every run completed, no tool failed, no judge or person said no." }
            } @else {
                table {
                    thead { tr { th { "#" } th { "problem" } th { "runs" } th { "share" } th { "fix likely in" } th { "examples" } } }
                    tbody {
                        @for (n, p) in r.problems.iter().enumerate() {
                            tr {
                                td { (n + 1) }
                                td { (p.problem) }
                                td { (p.runs) }
                                td { (format!("{:.0}%", p.share * 100.0)) }
                                td { (p.fix_in) }
                                td { @for id in &p.examples { a href={ "/runs/" (id) } { (id.get(..8).unwrap_or(id)) } " " } }
                            }
                        }
                    }
                }
            }
        } @else {
            p.note { "Choose an agent to see its problems: how runs ended, failed tool calls, failed judge criteria and people's 👎, ranked." }
        }
    };
    Html(pages::page("Problems", body).into_string()).into_response()
}
