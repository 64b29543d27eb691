//! Owner digests (`digest:` on an agent) and what their buttons start. The dispatcher's
//! cron tick persists one `steward`/`digest` event per agent and slot (the event log's
//! dedupe key makes a slot post once across replicas and restarts); routing it posts
//! the digest. "Propose a fix" (owners only) persists a `steward`/`propose_fix` event,
//! once per digest and problem, which any replica's router takes and runs as
//! `steward improve` in the background, posting the report in the digest's thread with
//! "Open PR" and "Dismiss".

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::click::{ButtonClick, Click};
use super::mcp::{EvalRunner, ImproveRequest};
use crate::config::{AgentConfig, Config};
use crate::evals::digest::Digest;
use crate::integrations::slack::SlackClient;
use crate::store::{Store, StoreError};
use crate::triggers::cron::CronJob;
use crate::triggers::{Origin, TriggerEvent};
use crate::types::event_outcome::{EventOutcome, OutcomeKind};

/// The source of the events steward makes for itself.
pub const SOURCE: &str = "steward";
/// "Propose a fix" on a digest's problem.
pub const PROPOSE_ACTION: &str = "steward_improve";
/// "Open PR" under an accepted improvement.
pub const PR_ACTION: &str = "steward_improve_pr";
/// "Dismiss" under an improvement.
pub const DISMISS_ACTION: &str = "steward_improve_dismiss";

/// `steward improve` for the service: the config tree's suite and improvements
/// (given by `steward serve`; none in tests that do not need it).
#[derive(Clone)]
pub struct Improver(pub Arc<dyn EvalRunner>);

impl std::fmt::Debug for Improver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Improver")
    }
}

/// Every agent's digest schedule, as cron jobs (`index` unused).
pub fn jobs(config: &Config) -> Vec<CronJob> {
    use crate::config::schedule::{parse_schedule, parse_tz};
    config
        .agents
        .values()
        .filter_map(|a| {
            let d = a.digest.as_ref()?;
            Some(CronJob {
                agent: a.name.clone(),
                index: usize::MAX,
                expr: d.schedule.clone(),
                schedule: parse_schedule(&d.schedule).ok()?,
                tz: parse_tz(d.timezone.as_deref()).ok()?,
                missed: crate::config::spec::MissedPolicy::Skip,
            })
        })
        .collect()
}

/// The event that posts `agent`'s digest for `slot`, and its dedupe key.
pub fn digest_event(agent: &str, slot: DateTime<Utc>) -> (TriggerEvent, String) {
    let slot = slot.to_rfc3339();
    let event = steward_event(
        "digest",
        format!("digest of {agent} at {slot}"),
        json!({"agent": agent, "slot": slot}),
    );
    (event, format!("digest:{agent}:{slot}"))
}

/// The event "Propose a fix" persists: problem `problem` of `agent`'s digest, whose
/// report goes to `thread` in `channel`.
pub fn propose_event(agent: &str, problem: u64, channel: &str, thread: &str, user: &str) -> TriggerEvent {
    steward_event(
        "propose_fix",
        format!("propose a fix for problem {problem} of {agent}"),
        json!({"agent": agent, "problem": problem, "channel": channel, "thread_ts": thread, "user": user}),
    )
}

fn steward_event(kind: &str, summary: String, payload: Value) -> TriggerEvent {
    TriggerEvent {
        source: SOURCE.into(),
        kind: kind.into(),
        summary,
        text: None,
        payload,
        private: false,
        origin: Origin::Cli,
        attachments: Vec::new(),
        traceparent: None,
        action_token: None,
    }
}

/// `text` cut to what one Block Kit section holds (3,000 characters; bytes bound them).
fn section_text(text: &str) -> &str {
    crate::tokens::floor_char(text, 2900)
}

/// A run's link in the inspector when `STEWARD_PUBLIC_URL` is set, else its id.
fn run_link(public_url: Option<&str>, id: &str) -> String {
    match public_url {
        Some(base) => format!(
            "<{}/runs/{id}|{}>",
            base.trim_end_matches('/'),
            crate::evals::draft::short_id(id)
        ),
        None => format!("`{id}`"),
    }
}

/// The digest as a Slack message (Block Kit): the week in numbers, then each problem
/// with its example runs and a "Propose a fix" button.
pub fn message(digest: &Digest, channel: &str, slot: &str, public_url: Option<&str>) -> Value {
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": format!("Weekly digest: {}", digest.agent)}}),
        json!({"type": "section", "text": {"type": "mrkdwn", "text": format!(
            "*{}* runs · 👍 {} · 👎 {} · judge: {}",
            digest.runs, digest.thumbs_up, digest.thumbs_down, digest.judge_line()
        )}}),
    ];
    if digest.problems.is_empty() {
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": "No problems this week: every run completed, no tool failed, no judge or person said no."}}));
    }
    for (n, p) in digest.problems.iter().enumerate() {
        let examples: Vec<String> = p.examples.iter().map(|id| run_link(public_url, id)).collect();
        let text = format!(
            "*{}. {}*\n{} runs ({:.0}%) · fix likely in {}\ne.g. {}",
            n + 1,
            p.summary.as_deref().unwrap_or(&p.problem),
            p.runs,
            p.share * 100.0,
            p.fix_in,
            examples.join(", ")
        );
        blocks.push(json!({
            "type": "section",
            "text": {"type": "mrkdwn", "text": section_text(&text)},
            "accessory": {"type": "button", "action_id": PROPOSE_ACTION, "text": {"type": "plain_text", "text": "Propose a fix"},
                "value": format!("improve:{}:{}:{slot}", digest.agent, n + 1)}
        }));
    }
    json!({
        "channel": channel,
        "text": format!("Weekly digest: {} ({} runs)", digest.agent, digest.runs),
        "blocks": blocks,
        "unfurl_links": false,
    })
}

/// A proposal under way renews this often that it is alive
/// (`propose_fix:<event id>` in the store's settings: the time, or `done`).
const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(30);
/// A proposal whose heartbeat is older than this was cut off (its process stopped):
/// another replica, or the restarted one, takes it over.
const STALE_SECS: i64 = 180;
/// How far back cut-off proposals are looked for.
const RESUME_WITHIN_DAYS: i64 = 2;

fn job_key(event_id: &str) -> String {
    format!("propose_fix:{event_id}")
}

/// What the service needs to post digests and run proposals.
pub struct Ctx<'a> {
    pub store: &'a Arc<dyn Store>,
    pub config: &'a Config,
    pub slack: Option<&'a SlackClient>,
    pub improver: Option<&'a Improver>,
    pub public_url: Option<&'a str>,
    pub tasks: &'a tokio_util::task::TaskTracker,
}

/// Routes a `steward` event: posts a digest now, or starts proposing a fix in the
/// background (owned by `tasks`). `None` for other sources.
pub async fn route(
    ctx: &Ctx<'_>,
    event_id: &str,
    trigger: &TriggerEvent,
) -> Result<Option<EventOutcome>, StoreError> {
    let Ctx {
        store,
        config,
        slack,
        public_url,
        ..
    } = *ctx;
    if trigger.source != SOURCE {
        return Ok(None);
    }
    let p = &trigger.payload;
    let Some(agent) = p["agent"].as_str().and_then(|a| config.agents.get(a)) else {
        return Ok(Some(EventOutcome::because(
            OutcomeKind::Ignored,
            "no such agent any more",
        )));
    };
    let Some(slack) = slack else {
        return Ok(Some(EventOutcome::because(
            OutcomeKind::Ignored,
            "SLACK_BOT_TOKEN is not set",
        )));
    };
    match trigger.kind.as_str() {
        "digest" => {
            let Some(d) = &agent.digest else {
                return Ok(Some(EventOutcome::because(
                    OutcomeKind::Ignored,
                    "the agent has no digest any more",
                )));
            };
            let digest = crate::evals::digest::gather(store.as_ref(), &agent.name, Utc::now()).await?;
            let slot = p["slot"].as_str().unwrap_or_default();
            let body = message(&digest, &d.channel, slot, public_url);
            Ok(Some(match slack.call("chat.postMessage", &body).await {
                Ok(_) => {
                    EventOutcome::because(OutcomeKind::Handled, format!("digest posted in {}", d.channel))
                }
                Err(e) => EventOutcome::because(OutcomeKind::Ignored, format!("cannot post the digest: {e}")),
            }))
        }
        "propose_fix" => {
            // Alive before it is settled: a crash from here on leaves a heartbeat that
            // goes stale, and another replica takes the proposal over.
            store
                .set_setting(&job_key(event_id), &Utc::now().to_rfc3339())
                .await?;
            start_proposal(ctx, slack, event_id, trigger);
            Ok(Some(EventOutcome::because(
                OutcomeKind::Handled,
                "proposing a fix",
            )))
        }
        other => Ok(Some(EventOutcome::because(
            OutcomeKind::Ignored,
            format!("unknown steward event {other}"),
        ))),
    }
}

/// Runs the proposal `trigger` asks for in the background, renewing its heartbeat.
fn start_proposal(ctx: &Ctx<'_>, slack: &SlackClient, event_id: &str, trigger: &TriggerEvent) {
    let p = &trigger.payload;
    let (channel, thread) = (
        p["channel"].as_str().unwrap_or_default().to_string(),
        p["thread_ts"].as_str().unwrap_or_default().to_string(),
    );
    let request = ImproveRequest {
        agent: p["agent"].as_str().unwrap_or_default().to_string(),
        problem: p["problem"].as_u64().map(|n| n as usize),
        runs: None,
        trials: None,
    };
    let (slack, improver, store, key) = (
        slack.clone(),
        ctx.improver.cloned(),
        ctx.store.clone(),
        job_key(event_id),
    );
    ctx.tasks.spawn(async move {
        let work = propose(slack, improver, request, channel, thread);
        tokio::pin!(work);
        let mut beat = tokio::time::interval(HEARTBEAT);
        beat.tick().await;
        loop {
            tokio::select! {
                () = &mut work => break,
                _ = beat.tick() => {
                    if let Err(e) = store.set_setting(&key, &Utc::now().to_rfc3339()).await {
                        tracing::warn!(error = %e, "cannot renew a proposal's heartbeat");
                    }
                }
            }
        }
        if let Err(e) = store.set_setting(&key, "done").await {
            tracing::warn!(error = %e, "cannot record a finished proposal");
        }
    });
}

/// Takes over proposals whose process stopped before they finished (their heartbeat
/// is stale); returns how many.
pub async fn resume_proposals(ctx: &Ctx<'_>) -> Result<usize, StoreError> {
    let Some(slack) = ctx.slack else {
        return Ok(0);
    };
    let filter = crate::store::EventFilter {
        source: Some(SOURCE.into()),
        outcome: Some(OutcomeKind::Handled),
        agent: None,
        since: Some(Utc::now() - chrono::Duration::days(RESUME_WITHIN_DAYS)),
        limit: 200,
    };
    let mut resumed = 0;
    for e in ctx.store.list_events(&filter).await? {
        if e.kind != "propose_fix" {
            continue;
        }
        let key = job_key(&e.id);
        let stale = match ctx.store.get_setting(&key).await?.as_deref() {
            None | Some("done") => false,
            Some(at) => DateTime::parse_from_rfc3339(at)
                .map(|t| (Utc::now() - t.with_timezone(&Utc)).num_seconds() > STALE_SECS)
                .unwrap_or(true),
        };
        if !stale {
            continue;
        }
        let Some(row) = ctx.store.get_event(&e.id).await? else {
            continue;
        };
        let Ok(trigger) = serde_json::from_value::<TriggerEvent>(row.body) else {
            continue;
        };
        tracing::warn!(event = %e.id, "taking over a proposal whose process stopped");
        ctx.store.set_setting(&key, &Utc::now().to_rfc3339()).await?;
        start_proposal(ctx, slack, &e.id, &trigger);
        resumed += 1;
    }
    Ok(resumed)
}

async fn post(slack: &SlackClient, body: Value) {
    if let Err(e) = slack.call("chat.postMessage", &body).await {
        tracing::warn!(error = %e, "cannot post in the digest's thread");
    }
}

/// Runs `steward improve` for the request and posts the report in the thread.
async fn propose(
    slack: SlackClient,
    improver: Option<Improver>,
    request: ImproveRequest,
    channel: String,
    thread: String,
) {
    let say = |text: String| json!({"channel": channel, "thread_ts": thread, "text": text});
    let Some(Improver(improver)) = improver else {
        post(
            &slack,
            say(
                "This steward has no config tree to change: run `steward improve` in the config repository."
                    .into(),
            ),
        )
        .await;
        return;
    };
    post(
        &slack,
        say(format!(
            "Proposing a fix for problem {} of {}: drafting cases and a change, then running the evals live before and after it…",
            request.problem.unwrap_or(1),
            request.agent
        )),
    )
    .await;
    let agent = request.agent.clone();
    let report = match improver.improve(request).await {
        Ok(r) => r,
        Err(e) => {
            post(&slack, say(format!("Could not propose a fix: {e}"))).await;
            return;
        }
    };
    post(&slack, report_message(&agent, &report, &channel, &thread)).await;
}

/// The improvement's report in the thread: the decision, the change, the pass rates;
/// "Open PR" and "Dismiss" when it was accepted.
pub fn report_message(agent: &str, report: &Value, channel: &str, thread: &str) -> Value {
    let why = report["decision"]["why"].as_str().unwrap_or_default();
    let accepted = report["decision"]["accepted"] == true;
    let id = report["id"].as_str().unwrap_or_default();
    let mut rows = Vec::new();
    for c in report["cases"].as_array().into_iter().flatten() {
        rows.push(format!(
            "{}{}: {}/{} → {}/{}",
            c["id"].as_str().unwrap_or_default(),
            if c["new"] == true { " (new)" } else { "" },
            c["before"]["passes"],
            c["before"]["trials"],
            c["after"]["passes"],
            c["after"]["trials"]
        ));
    }
    let patch = crate::tokens::floor_char(report["patch"].as_str().unwrap_or_default(), 2000).to_string();
    let text = format!(
        "*{why}*\n{}\n```{patch}```\n{}\nReport: `improvements/{agent}/{id}/report.md`",
        report["rationale"].as_str().unwrap_or_default(),
        rows.join("\n")
    );
    let mut blocks = vec![json!({"type": "section", "text": {"type": "mrkdwn",
        "text": section_text(&text)}})];
    if accepted {
        let value = format!("{agent}:{id}");
        blocks.push(json!({"type": "actions", "block_id": "steward_improvement", "elements": [
            {"type": "button", "action_id": PR_ACTION, "style": "primary", "text": {"type": "plain_text", "text": "Open PR"}, "value": value},
            {"type": "button", "action_id": DISMISS_ACTION, "text": {"type": "plain_text", "text": "Dismiss"}, "value": value}
        ]}));
    }
    json!({"channel": channel, "thread_ts": thread, "text": why, "blocks": blocks})
}

/// Only the agent's owner may use a digest's buttons.
fn owner_only(agent: Option<&Arc<AgentConfig>>, user: &str) -> Result<Arc<AgentConfig>, Click> {
    match agent {
        Some(a) if a.owner.as_deref() == Some(user) => Ok(a.clone()),
        Some(a) => Err(Click::Refused(format!(
            "Only the agent's owner ({}) can do this.",
            a.owner
                .as_deref()
                .map(|o| format!("<@{o}>"))
                .unwrap_or_else(|| "none set".into())
        ))),
        None => Err(Click::Refused("This agent is gone.".into())),
    }
}

/// A click on one of a digest's buttons.
pub async fn click(
    state: &super::AppState,
    click: &ButtonClick,
    payload: &Value,
) -> Result<Click, StoreError> {
    match click.action_id.as_str() {
        PROPOSE_ACTION => {
            // improve:<agent>:<n>:<slot>
            let mut parts = click.value.splitn(4, ':');
            let (Some("improve"), Some(agent), Some(n), Some(slot)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Ok(Click::Refused("This button is not valid.".into()));
            };
            let agent = match owner_only(state.config.agents.get(agent), &click.user) {
                Ok(a) => a,
                Err(refused) => return Ok(refused),
            };
            let thread = click
                .thread_ts
                .clone()
                .or(click.message_ts.clone())
                .unwrap_or_default();
            let problem = n.parse::<u64>().unwrap_or(1);
            let event = propose_event(&agent.name, problem, &click.channel, &thread, &click.user);
            let row = super::ingest::event_row(&event, &format!("propose_fix:{}:{slot}:{n}", agent.name));
            if state.runner.store.insert_events(&[row]).await?.first() != Some(&true) {
                return Ok(Click::Refused(
                    "A fix for this problem was already asked for: its report is in this thread.".into(),
                ));
            }
            state.resume.notify_one();
            Ok(Click::Proposing)
        }
        PR_ACTION | DISMISS_ACTION => {
            let Some((agent, id)) = click.value.split_once(':') else {
                return Ok(Click::Refused("This button is not valid.".into()));
            };
            if let Err(refused) = owner_only(state.config.agents.get(agent), &click.user) {
                return Ok(refused);
            }
            let Some(slack) = state.slack.clone() else {
                return Ok(Click::Ignored);
            };
            let (agent, id, user) = (agent.to_string(), id.to_string(), click.user.clone());
            let (channel, ts) = (
                click.channel.clone(),
                click.message_ts.clone().unwrap_or_default(),
            );
            let thread = click.thread_ts.clone().unwrap_or_else(|| ts.clone());
            let improver = state.improver.clone();
            let open = click.action_id == PR_ACTION;
            // The report stays; its buttons give way to what became of them.
            let report = payload["message"]["blocks"][0].clone();
            state.tasks.spawn(async move {
                let note = if !open {
                    format!("Dismissed by <@{user}>.")
                } else {
                    match improver {
                        None => "This steward has no config tree: run `steward improve --github-pr` in the config repository.".into(),
                        Some(Improver(i)) => match i.open_pr(&agent, &id).await {
                            Ok(url) => format!("<@{user}> opened {url}"),
                            Err(e) => format!("Could not open the pull request: {e}"),
                        },
                    }
                };
                // The buttons go, so a second click cannot open a second pull request.
                let mut blocks = vec![json!({"type": "section", "text": {"type": "mrkdwn", "text": note}})];
                if report.is_object() {
                    blocks.insert(0, report);
                }
                let update = json!({"channel": channel, "ts": ts, "text": note, "blocks": blocks});
                if let Err(e) = slack.call("chat.update", &update).await {
                    tracing::warn!(error = %e, "cannot update the improvement message");
                    post(&slack, json!({"channel": channel, "thread_ts": thread, "text": note})).await;
                }
            });
            Ok(Click::Improvement)
        }
        _ => Ok(Click::Ignored),
    }
}
