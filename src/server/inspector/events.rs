//! The event log in the inspector: `/events` (filters and the list), `/events/{id}`,
//! and the same as JSON at `/api/events` and `/api/events/{id}`.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;

use super::{bad_request, blank_none, day, not_found, pages, unavailable};
use crate::server::AppState;
use crate::store::{EventFilter, EventRecord};
use crate::types::event_outcome::OutcomeKind;

/// Events a list shows unless asked for another number, and at most.
const DEFAULT_LIST: u32 = 100;
const MAX_LIST: u32 = 1000;

/// `?source=&outcome=&agent=&since=YYYY-MM-DD&limit=`
#[derive(Debug, Default, Deserialize)]
pub struct EventQuery {
    pub source: Option<String>,
    pub outcome: Option<String>,
    pub agent: Option<String>,
    pub since: Option<String>,
    pub limit: Option<u32>,
}

impl EventQuery {
    fn filter(&self) -> Result<EventFilter, String> {
        let outcome = match blank_none(&self.outcome) {
            None => None,
            Some(o) => {
                Some(OutcomeKind::parse(&o).ok_or_else(|| format!("outcome='{o}' is not an outcome"))?)
            }
        };
        Ok(EventFilter {
            source: blank_none(&self.source),
            outcome,
            agent: blank_none(&self.agent),
            since: day(&self.since, "since", false)?,
            limit: self.limit.unwrap_or(DEFAULT_LIST).clamp(1, MAX_LIST),
        })
    }
}

pub async fn api_events(State(state): State<AppState>, Query(query): Query<EventQuery>) -> Response {
    let filter = match query.filter() {
        Ok(f) => f,
        Err(e) => return bad_request(true, e),
    };
    match state.runner.store.list_events(&filter).await {
        Ok(events) => Json(json!({ "events": events })).into_response(),
        Err(e) => unavailable(true, e),
    }
}

pub async fn api_event(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.runner.store.event_record(&id).await {
        Ok(Some(event)) => Json(json!({ "event": event })).into_response(),
        Ok(None) => not_found(true, "event"),
        Err(e) => unavailable(true, e),
    }
}

pub async fn event_list(State(state): State<AppState>, Query(query): Query<EventQuery>) -> Response {
    let filter = match query.filter() {
        Ok(f) => f,
        Err(e) => return bad_request(false, e),
    };
    let agents: Vec<String> = state.config.agents.keys().cloned().collect();
    match state.runner.store.list_events(&filter).await {
        Ok(events) => {
            Html(pages::page("Events", list(&events, &query, &agents)).into_string()).into_response()
        }
        Err(e) => unavailable(false, e),
    }
}

pub async fn event_page(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.runner.store.event_record(&id).await {
        Ok(Some(event)) => Html(pages::page("Event", detail(&event)).into_string()).into_response(),
        Ok(None) => not_found(false, "event"),
        Err(e) => unavailable(false, e),
    }
}

fn list(events: &[EventRecord], query: &EventQuery, agents: &[String]) -> Markup {
    let chosen = |v: &Option<String>, x: &str| v.as_deref() == Some(x);
    html! {
        form.filters method="get" action="/events" {
            select name="source" {
                option value="" { "any source" }
                @for s in ["slack", "jira", "notion", "webhook", "cron"] {
                    option value=(s) selected[chosen(&query.source, s)] { (s) }
                }
            }
            select name="outcome" {
                option value="" { "any outcome" }
                @for o in OutcomeKind::ALL {
                    option value=(o.as_str()) selected[chosen(&query.outcome, o.as_str())] { (o.as_str()) }
                }
            }
            select name="agent" {
                option value="" { "any agent" }
                @for a in agents {
                    option value=(a) selected[chosen(&query.agent, a)] { (a) }
                }
            }
            label { "from " input type="date" name="since" value=[query.since.as_deref()]; }
            button type="submit" { "Filter" }
        }
        @if events.is_empty() {
            p { "No events match." }
        } @else {
            table {
                tr { th { "received" } th { "source" } th { "kind" } th { "outcome" } th { "why" } }
                @for e in events {
                    tr {
                        td { a href={ "/events/" (e.id) } { (e.received_at.format("%Y-%m-%d %H:%M:%S")) } }
                        td { (e.source) }
                        td { (e.kind) }
                        td { (e.outcome_name()) }
                        td { (crate::triggers::event::one_line(&e.why(), 160)) }
                    }
                }
            }
        }
    }
}

fn detail(e: &EventRecord) -> Markup {
    html! {
        @if e.private {
            p.note { "This event came from a private conversation: only its metadata is kept." }
        }
        dl {
            dt { "event" } dd { code { (e.id) } }
            dt { "received" } dd { (e.received_at.format("%Y-%m-%d %H:%M:%S UTC")) }
            dt { "source" } dd { (e.source) " " (e.kind) }
            @if let Some(s) = &e.summary { dt { "summary" } dd { (s) } }
            dt { "outcome" } dd { (e.outcome_name()) }
            @if let Some(first) = &e.duplicate_of {
                dt { "first delivery" } dd { a href={ "/events/" (first) } { (first) } }
            }
            @if let Some(reason) = e.detail["reason"].as_str() { dt { "reason" } dd { (reason) } }
            @for run in e.detail["runs"].as_array().into_iter().flatten() {
                dt { "run" } dd {
                    @let id = run["id"].as_str().unwrap_or_default();
                    a href={ "/runs/" (id) } { (id) } " " (run["agent"].as_str().unwrap_or_default())
                }
            }
        }
        @if let Some(agents) = e.detail["agents"].as_object() {
            h2 { "Why no agent took it" }
            table {
                tr { th { "agent" } th { "first condition that did not hold" } }
                @for (agent, why) in agents {
                    tr { td { (agent) } td { (why.as_str().unwrap_or_default()) } }
                }
            }
        }
    }
}
