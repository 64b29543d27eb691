//! `steward events list|show`: what became of each delivery.

use std::process::ExitCode;

use super::plain::plain;
use crate::store::{EventFilter, EventRecord, Store};

pub async fn list(store: &dyn Store, filter: &EventFilter, json: bool) -> anyhow::Result<ExitCode> {
    let events = store.list_events(filter).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&events)?);
        return Ok(ExitCode::SUCCESS);
    }
    if events.is_empty() {
        println!("no events match");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<36}  {:<24}  {:<8}  {:<20}  {:<13}  WHY",
        "ID", "RECEIVED", "SOURCE", "KIND", "OUTCOME"
    );
    for e in &events {
        println!(
            "{:<36}  {:<24}  {:<8}  {:<20}  {:<13}  {}",
            e.id,
            crate::store::timestamp(e.received_at),
            e.source,
            e.kind,
            e.outcome_name(),
            plain(&crate::triggers::event::one_line(&e.why(), 100))
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn show(store: &dyn Store, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let Some(event) = store.event_record(id).await? else {
        anyhow::bail!("no event with id {id}");
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&event)?);
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", plain(&describe(&event)));
    Ok(ExitCode::SUCCESS)
}

/// The event as `events show` prints it.
pub fn describe(e: &EventRecord) -> String {
    let mut out = format!(
        "event     {}\nreceived  {}\nsource    {} {}\noutcome   {}\n",
        e.id,
        crate::store::timestamp(e.received_at),
        e.source,
        e.kind,
        e.outcome_name()
    );
    if let Some(summary) = &e.summary {
        out.push_str(&format!("summary   {summary}\n"));
    }
    if e.private {
        out.push_str("private   yes (metadata only)\n");
    }
    if let Some(first) = &e.duplicate_of {
        out.push_str(&format!("first delivery  {first}\n"));
    }
    if let Some(reason) = e.detail["reason"].as_str() {
        out.push_str(&format!("reason    {reason}\n"));
    }
    if let Some(agents) = e.detail["agents"].as_object() {
        out.push_str("agents that could have taken it:\n");
        for (agent, why) in agents {
            out.push_str(&format!("  {agent}: {}\n", why.as_str().unwrap_or_default()));
        }
    }
    for run in e.detail["runs"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "run       {}  {}\n",
            run["id"].as_str().unwrap_or_default(),
            run["agent"].as_str().unwrap_or_default()
        ));
    }
    out
}
