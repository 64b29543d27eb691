//! `steward triggers test`: an agent's triggers asked about one event (a file or a
//! stored delivery), or about the last stored deliveries, through the config as it is
//! now, so a `when:` filter is checked against real traffic before it ships.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::{AgentConfig, Config};
use crate::store::Store;
use crate::triggers::TriggerEvent;
use crate::triggers::explain::{Verdict, verdict};
use crate::triggers::router::{Routed, route};

/// What to replay.
pub enum Target {
    File(String),
    Stored(String),
    Last(u32),
}

/// Reads an event file: a normalized trigger (as stored), or a delivery as Slack
/// (Events API), Jira or Notion send it.
pub fn read_event(text: &str, file: &str) -> anyhow::Result<TriggerEvent> {
    let value: Value = serde_json::from_str(text).with_context(|| format!("{file} is not JSON"))?;
    if value.get("source").is_some() && value.get("kind").is_some() {
        return serde_json::from_value(value).with_context(|| format!("{file}: not a stored trigger"));
    }
    if value.get("event").is_some_and(Value::is_object) || value["type"] == "event_callback" {
        return match crate::triggers::slack::parse(&value, None)? {
            crate::triggers::slack::SlackPayload::Event { event, .. } => Ok(*event),
            crate::triggers::slack::SlackPayload::Ignored(why) => {
                anyhow::bail!("{file}: a Slack delivery steward ignores on arrival: {why}")
            }
            crate::triggers::slack::SlackPayload::Outsider { team, .. } => anyhow::bail!(
                "{file}: a Slack Connect delivery whose author is of workspace {}, not the receiving one: steward refuses it unless SLACK_TEAM_IDS lists that workspace",
                team.as_deref().unwrap_or("(not named)")
            ),
            _ => anyhow::bail!("{file}: a Slack delivery that starts no agent"),
        };
    }
    if value.get("webhookEvent").is_some() {
        let now = chrono::Utc::now().timestamp();
        let (event, _) =
            crate::triggers::jira::parse(&value, "", now).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        return Ok(event);
    }
    if value.get("entity").is_some() {
        return match crate::triggers::notion::parse(&value)? {
            crate::triggers::notion::NotionPayload::Event { event, .. } => Ok(*event),
            crate::triggers::notion::NotionPayload::Verification(_) => {
                anyhow::bail!("{file}: a Notion verification request, not an event")
            }
        };
    }
    anyhow::bail!(
        "{file}: neither a stored trigger (with source and kind) nor a Slack, Jira or Notion delivery"
    )
}

/// One trigger's tally over the replayed events.
#[derive(Debug, Default, Serialize)]
struct Tally {
    trigger: String,
    matched: u32,
    filter_false: u32,
    filter_failed: u32,
    /// The first failure's reason, to fix the filter by.
    #[serde(skip_serializing_if = "Option::is_none")]
    first_failure: Option<String>,
}

pub async fn test(
    config: &Config,
    store: Option<&dyn Store>,
    agent: &AgentConfig,
    target: Target,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    match target {
        Target::File(path) => {
            let text = if path == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?
            };
            let event = read_event(&text, &path)?;
            one(config, agent, &event, json_out).await
        }
        Target::Stored(id) => {
            let store = store.context("no store")?;
            let Some(stored) = store.event_bodies(Some(&id), 1).await?.pop() else {
                anyhow::bail!(
                    "no stored delivery {id} that reached routing (see `steward events show {id}`)"
                );
            };
            let event: TriggerEvent = serde_json::from_value(stored.body)
                .with_context(|| format!("event {id}: its stored trigger is unreadable"))?;
            if stored.private {
                eprintln!(
                    "event {id} is private: only its metadata is stored, so text and payload read empty"
                );
            }
            one(config, agent, &event, json_out).await
        }
        Target::Last(n) => {
            let store = store.context("no store")?;
            last(config, store, agent, n, json_out).await
        }
    }
}

/// Per trigger, whether it matched and which condition decided; then what routing
/// (with precedence) would start.
async fn one(
    config: &Config,
    agent: &AgentConfig,
    event: &TriggerEvent,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let mut scope = None;
    let rules: Vec<Value> = (0..agent.triggers.len())
        .map(|i| {
            let (v, why) = verdict(config, agent, i, event, &mut scope);
            json!({"trigger": i + 1, "kind": agent.triggers[i].kind_name(), "matched": v == Verdict::Matched, "why": why})
        })
        .collect();
    let routed = route(config, event, None).await;
    let takes = routed.agents.iter().any(|a| a.name == agent.name);
    if json_out {
        let out = json!({
            "agent": agent.name, "event": {"source": event.source, "kind": event.kind, "summary": event.summary},
            "triggers": rules, "takes_it": takes, "routing": routing_json(&routed),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("event: {} {} ({})", event.source, event.kind, event.summary);
    for r in &rules {
        println!(
            "  {}. {}  {}",
            r["trigger"],
            if r["matched"] == true {
                "matched  "
            } else {
                "no match "
            },
            r["why"].as_str().unwrap_or_default()
        );
    }
    println!("{}", routing_line(agent, &routed));
    Ok(ExitCode::SUCCESS)
}

fn routing_json(routed: &Routed) -> Value {
    json!({
        "agents": routed.agents.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
        "filtered": routed.filtered.iter().cloned().collect::<BTreeMap<_, _>>(),
        "outranked_by": routed.outranked.iter().cloned().collect::<BTreeMap<_, _>>(),
    })
}

fn routing_line(agent: &AgentConfig, routed: &Routed) -> String {
    let names: Vec<&str> = routed.agents.iter().map(|a| a.name.as_str()).collect();
    let started = if names.is_empty() {
        "routing: no agent would start".to_string()
    } else {
        format!("routing: would start {}", names.join(", "))
    };
    match routed.outranked.iter().find(|(a, _)| *a == agent.name) {
        Some((_, winner)) => format!(
            "{started} ({} matched, but {winner} takes the conversation)",
            agent.name
        ),
        None => started,
    }
}

/// The last `n` stored deliveries through the agent's triggers: how many each would
/// have taken, and how many the agent would have started after precedence.
async fn last(
    config: &Config,
    store: &dyn Store,
    agent: &AgentConfig,
    n: u32,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let stored = store.event_bodies(None, n).await?;
    let mut tallies: Vec<Tally> = agent
        .triggers
        .iter()
        .enumerate()
        .map(|(i, t)| Tally {
            trigger: format!("{}. {}", i + 1, t.kind_name()),
            ..Tally::default()
        })
        .collect();
    let (mut started, mut private, mut unreadable) = (0u32, 0u32, 0u32);
    let mut outranked: BTreeMap<String, u32> = BTreeMap::new();
    for s in &stored {
        let Ok(event) = serde_json::from_value::<TriggerEvent>(s.body.clone()) else {
            unreadable += 1;
            continue;
        };
        private += u32::from(s.private);
        let mut scope = None;
        for (i, t) in tallies.iter_mut().enumerate() {
            match verdict(config, agent, i, &event, &mut scope) {
                (Verdict::Matched, _) => t.matched += 1,
                (Verdict::FilterFalse, _) => t.filter_false += 1,
                (Verdict::FilterFailed, why) => {
                    t.filter_failed += 1;
                    t.first_failure.get_or_insert(why);
                }
                (Verdict::NoMatch, _) => {}
            }
        }
        let routed = route(config, &event, None).await;
        if routed.agents.iter().any(|a| a.name == agent.name) {
            started += 1;
        } else if let Some((_, winner)) = routed.outranked.iter().find(|(a, _)| *a == agent.name) {
            *outranked.entry(winner.clone()).or_default() += 1;
        }
    }
    let replayed = stored.len() as u32 - unreadable;
    if json_out {
        let out = json!({
            "agent": agent.name, "replayed": replayed, "private": private, "unreadable": unreadable,
            "would_start": started, "outranked_by": outranked, "triggers": tallies,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "replayed the last {replayed} stored deliveries through the current config{}",
        if private > 0 {
            format!(" ({private} private: metadata only, so their text and payload read empty)")
        } else {
            String::new()
        }
    );
    for t in &tallies {
        println!(
            "  {:<20} matched {:>6}   when: false {:>6}   when: failed {:>6}",
            t.trigger, t.matched, t.filter_false, t.filter_failed
        );
        if let Some(why) = &t.first_failure {
            println!("      first failure: {why}");
        }
    }
    println!("{} would have started for {started} of {replayed}", agent.name);
    for (winner, count) in &outranked {
        println!("  {count} matched but went to {winner} by precedence");
    }
    if unreadable > 0 {
        println!("  {unreadable} stored deliveries could not be read");
    }
    Ok(ExitCode::SUCCESS)
}
