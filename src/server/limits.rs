//! Limits checked before a run is created, counted in the store so they hold across
//! replicas: a per-person rate on Slack-triggered runs (one polite reply, then
//! silence until the minute is over) and a daily cost budget per agent (refused with
//! a reply naming the owner). The concurrency cap is applied when a run starts
//! (`RunStore::start_within`, see `dispatch`).

use chrono::{DateTime, Utc};

use crate::config::AgentConfig;
use crate::store::{Store, StoreError};
use crate::triggers::TriggerEvent;

/// Whether a run may be created, and what to tell the person when not.
#[derive(Debug, Clone, PartialEq)]
pub enum Admit {
    Yes,
    /// Refused: the agent's daily budget is spent; the reply to post, if one is due.
    OverBudget(Option<String>),
    /// Refused: the person's per-minute limit; the reply to post, if one is due.
    RateLimited(Option<String>),
}

/// The rate window.
const MINUTE: chrono::Duration = chrono::Duration::seconds(60);

/// The person whose per-minute limit `trigger` counts against: Slack's users only
/// (a webhook's or a schedule's "actor" is the source itself, not a person).
pub fn limited_person(trigger: &TriggerEvent) -> Option<String> {
    (trigger.source == "slack").then(|| trigger.actor()).flatten()
}

/// Checks `agent`'s daily budget and, for Slack triggers with a person, their rate.
pub async fn admit(
    store: &dyn Store,
    agent: &AgentConfig,
    trigger: &TriggerEvent,
    now: DateTime<Utc>,
) -> Result<Admit, StoreError> {
    if let Some(budget) = agent.limits.daily_cost_usd {
        let midnight = now
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .unwrap_or_default()
            .and_utc();
        let spent = store.cost_since(&agent.name, midnight).await?;
        if spent >= budget {
            tracing::warn!(agent = %agent.name, spent, budget, "daily budget spent; run refused");
            if !budget_notice_due(store, agent, trigger, now).await? {
                return Ok(Admit::OverBudget(None));
            }
            return Ok(Admit::OverBudget(Some(format!(
                "Sorry, *{}* has used its daily budget ({}) and takes new requests again at 00:00 UTC. \
                 To raise it, contact {}.",
                agent.name,
                usd(budget),
                owner(agent)
            ))));
        }
    }
    let limit = agent.limits.per_user_per_minute;
    if let Some(person) = limited_person(trigger) {
        let recent = store.runs_since(&agent.name, &person, now - MINUTE).await?;
        if recent >= u64::from(limit) {
            // One reply per person and minute; the rest is silence.
            let key = format!("rate_notice.{}.{person}", agent.name);
            let noticed = store
                .get_setting(&key)
                .await?
                .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
                .is_some_and(|t| now - t.with_timezone(&Utc) < MINUTE);
            tracing::info!(agent = %agent.name, %person, recent, limit, "per-person rate reached; run refused");
            if noticed {
                return Ok(Admit::RateLimited(None));
            }
            store.set_setting(&key, &now.to_rfc3339()).await?;
            return Ok(Admit::RateLimited(Some(format!(
                "You have asked *{}* {limit} times in the last minute, which is its limit. \
                 Please wait a minute; I will ignore further requests until then.",
                agent.name
            ))));
        }
    }
    Ok(Admit::Yes)
}

/// Most conversations told of a spent budget per agent and day: a storm of events (a
/// Jira bulk edit, a channel's burst) gets a bounded number of replies.
const BUDGET_NOTICES: usize = 20;

/// Whether the refusal of `trigger` for `agent`'s spent budget is told: once a day in
/// each conversation (its thread, issue or page; else the person, else the source), for
/// at most [`BUDGET_NOTICES`] conversations. Kept as one setting per agent: the day,
/// then a short SHA-256 of each conversation told. Replicas admitting at the same
/// moment may each tell one conversation (a read, then a write).
async fn budget_notice_due(
    store: &dyn Store,
    agent: &AgentConfig,
    trigger: &TriggerEvent,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let key = format!("budget_notice.{}", agent.name);
    let day = now.date_naive().to_string();
    let place = trigger
        .conversation_key()
        .or_else(|| trigger.actor())
        .unwrap_or_else(|| trigger.source.clone());
    // The same on every replica and every build (std's hasher promises neither).
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("budget_notice {place}").as_bytes());
    let tag = hex::encode(&digest[..8]);
    let kept = store.get_setting(&key).await?.unwrap_or_default();
    let mut told: Vec<&str> = kept.split(' ').collect();
    if told.first() != Some(&day.as_str()) {
        told = vec![&day];
    }
    if told.contains(&tag.as_str()) || told.len() > BUDGET_NOTICES {
        return Ok(false);
    }
    told.push(&tag);
    store.set_setting(&key, &told.join(" ")).await?;
    Ok(true)
}

/// Dollars as people write them: `$20.00`, `$0.002`.
fn usd(amount: f64) -> String {
    if amount >= 1.0 {
        format!("${amount:.2}")
    } else {
        let text = format!("{amount:.4}");
        format!("${}", text.trim_end_matches('0'))
    }
}

/// The owner as a mention when it is a Slack user id, else as written.
fn owner(agent: &AgentConfig) -> String {
    match agent.owner.as_deref() {
        Some(id)
            if (id.starts_with('U') || id.starts_with('W'))
                && id.len() > 1
                && id.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) =>
        {
            format!("<@{id}>")
        }
        Some(text) => text.to_string(),
        None => format!("the owner of `{}`", agent.file.display()),
    }
}
