//! The router and worker pool: claims persisted events, starts a run for every agent
//! whose rules match, executes runs under a global and a per-agent concurrency limit
//! with a renewed lease, fires cron slots, and reconciles runs whose process died.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ingest::{PrivateCache, event_row};
use super::limits;
use crate::config::{AgentConfig, Config};
use crate::integrations::notion::NotionClient;
use crate::integrations::slack::SlackClient;
use crate::run::events::RunEvent;
use crate::run::events::append_now;
use crate::run::{Lineage, Runner, trigger_summary};
use crate::store::{EventRow, NewRun, Route, RunStatus, StoreError};
use crate::triggers::Origin;
use crate::triggers::TriggerEvent;
use crate::triggers::cron::{CronJob, jobs};
use crate::triggers::router;
use crate::types::event_outcome::{EventOutcome, OutcomeKind};
use crate::types::{Privacy, RunOutcome, Termination};

/// What routing decided for one claimed event, written with its batch.
struct Planned {
    event: EventRow,
    trigger: TriggerEvent,
    /// The trigger holds its private text (see [`Dispatcher::trigger_of`]).
    whole: bool,
    /// The agents that start a run, one for each of `runs`.
    agents: Vec<Arc<AgentConfig>>,
    runs: Vec<NewRun>,
    /// The agents whose run in `conversation` takes the message instead.
    handed: Vec<Arc<AgentConfig>>,
    conversation: Option<String>,
    /// What becomes of the event, written with its runs.
    outcome: EventOutcome,
}

/// Worker settings.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// Runs at once across all agents.
    pub global_concurrency: usize,
    /// Runs at once per agent.
    pub agent_concurrency: usize,
    /// A run whose lease is not renewed for this long is presumed dead.
    pub lease: Duration,
    /// Seals private events at rest so they survive a restart (`STEWARD_DATA_KEY`).
    pub data_key: Option<crate::types::seal::DataKey>,
    /// How long the event log keeps deliveries (`STEWARD_EVENT_RETENTION`).
    pub event_retention: Duration,
    /// How long ended runs are kept (`STEWARD_RUN_RETENTION`); `None`: for ever.
    pub run_retention: Option<Duration>,
    /// `steward improve` for digests' "Propose a fix" (the config tree's, from
    /// `steward serve`).
    pub improver: Option<super::digest::Improver>,
}

/// The event log's retention unless `STEWARD_EVENT_RETENTION` says otherwise.
pub const DEFAULT_EVENT_RETENTION: Duration = Duration::from_secs(14 * 24 * 60 * 60);

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings {
            global_concurrency: 1000,
            agent_concurrency: 1000,
            lease: Duration::from_secs(60),
            data_key: None,
            event_retention: DEFAULT_EVENT_RETENTION,
            run_retention: None,
            improver: None,
        }
    }
}

/// Attempts a run gets before a crash during it fails it as `crash_loop`.
pub const MAX_ATTEMPTS: u32 = 3;

/// What a person is told when their private message was lost in a restart.
pub const LOST_INPUT_REPLY: &str = "Sorry, I lost your message during a restart; please send it again.";

/// Ends a queued or running run with `status`; false when it had already ended.
async fn end_run(
    store: &dyn crate::store::Store,
    run_id: &str,
    termination: Termination,
    error: &str,
) -> Result<bool, StoreError> {
    let finish = RunOutcome::new(run_id).stopped(termination, Some(error.into()));
    // The errors written here are steward's own words, never the person's.
    let recorded = Privacy::Recorded;
    if store
        .finish_run(run_id, RunStatus::Running, &finish, recorded)
        .await?
    {
        return Ok(true);
    }
    store
        .finish_run(run_id, RunStatus::Queued, &finish, recorded)
        .await
}

/// A private run whose text did not survive a restart: apologize where the person wrote
/// and end the run `interrupted`.
async fn input_lost(
    runner: &Runner,
    run_id: &str,
    agent: &AgentConfig,
    trigger: &TriggerEvent,
) -> Result<(), StoreError> {
    let recorder = crate::run::Recorder::new(runner.store.clone(), run_id.to_string(), true);
    recorder.record(RunEvent::InputLost {
        reason: "private input is kept in memory only and the process restarted",
    });
    if let Err(e) = crate::run::reply::post(
        &runner.sources,
        agent,
        &trigger.origin,
        LOST_INPUT_REPLY,
        &recorder,
        None,
    )
    .await
    {
        tracing::warn!(run = %run_id, error = %e, "cannot tell the person their message was lost");
    }
    recorder.flush().await?;
    if end_run(
        runner.store.as_ref(),
        run_id,
        Termination::Interrupted,
        "the private input of this run was lost in a restart; the person was asked to send it again",
    )
    .await?
    {
        // Ended here, not by the runner: counted here (it never ran, so no duration).
        runner.metrics.run_finished(
            &agent.name,
            Termination::Interrupted.status(),
            Termination::Interrupted,
            0.0,
        );
    }
    tracing::warn!(run = %run_id, agent = %agent.name, "private input lost in a restart; run ended with an apology");
    Ok(())
}

pub struct Dispatcher {
    pub runner: Runner,
    pub config: Arc<Config>,
    pub notify: Arc<Notify>,
    /// Fired when an approval is decided: reconcile (and so resume) at once.
    pub resume: Arc<Notify>,
    pub private: PrivateCache,
    pub notion: Option<NotionClient>,
    /// Updates approval requests that time out.
    pub slack: Option<SlackClient>,
    pub settings: DispatchSettings,
    pub tracker: TaskTracker,
    pub shutdown: CancellationToken,
    global: Arc<Semaphore>,
    per_agent: BTreeMap<String, Arc<Semaphore>>,
    cron: Vec<CronJob>,
    /// Owners' digests, on their schedules.
    digests: Vec<CronJob>,
    /// The runs of conversations that take their later messages.
    handoffs: Arc<super::handoff::Handoffs>,
    /// What a person's Stop reaches.
    stops: Arc<super::stops::Stops>,
    /// This process's name on the leases it holds (one per process, never reused).
    lease_owner: Arc<str>,
    /// The runs this process is working on: never taken again by its own reconcile.
    held: Arc<super::held::Held>,
    /// Per agent, told when one of its runs in this process ends: the longest-waiting
    /// of its runs waiting for a slot or a turn looks again at once.
    freed: BTreeMap<String, Arc<Notify>>,
}

/// Most claims of 64 events one `drain` routes before the dispatcher's other work
/// (cron slots, approval timeouts, reconcile) gets its turn.
const DRAIN_CLAIMS: usize = 8;

/// How long an event waits for a service routing needs (Jira or Notion saying which
/// account steward acts as, a Notion rule's page) while it is rate limiting, failing or
/// unreachable: routed again after each lease, then decided without it.
const SERVICE_PATIENCE: Duration = Duration::from_secs(30 * 60);

/// How soon a run held back by its agent's `limits.concurrency` or its conversation's
/// earlier run first looks again for its turn; each later look waits twice as long, up
/// to [`SLOT_POLL_MAX`]. A run of this process that ends wakes its agent's
/// longest-waiting run at once (`freed`); the polls find the rest (turns freed by other
/// replicas, a conversation's next run): a burst of queued runs costs the database one
/// look per run end and one per waiting run every 2 s, not five per waiting run a
/// second.
const SLOT_POLL: Duration = Duration::from_millis(200);
const SLOT_POLL_MAX: Duration = Duration::from_secs(2);

/// Ends run `run_id`'s lease now (it stays `owner`'s until another takes it), so the
/// next reconcile, here or on another replica, takes the run at once.
async fn release_lease(store: &dyn crate::store::Store, run_id: &str, owner: &str) {
    let lapsed = Utc::now() - chrono::Duration::seconds(1);
    if let Err(e) = store.renew_lease(run_id, lapsed, owner).await {
        tracing::warn!(run = %run_id, error = %e, "cannot release a run's lease");
    }
}

fn lease_until(lease: Duration) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::from_std(lease).unwrap_or_else(|_| chrono::Duration::seconds(60))
}

impl Dispatcher {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        runner: Runner,
        config: Arc<Config>,
        notify: Arc<Notify>,
        resume: Arc<Notify>,
        private: PrivateCache,
        notion: Option<NotionClient>,
        slack: Option<SlackClient>,
        settings: DispatchSettings,
        tracker: TaskTracker,
        shutdown: CancellationToken,
    ) -> Dispatcher {
        let per_agent = config
            .agents
            .keys()
            .map(|a| {
                (
                    a.clone(),
                    Arc::new(Semaphore::new(settings.agent_concurrency.max(1))),
                )
            })
            .collect();
        Dispatcher {
            global: Arc::new(Semaphore::new(settings.global_concurrency.max(1))),
            per_agent,
            cron: jobs(&config),
            digests: super::digest::jobs(&config),
            handoffs: Arc::default(),
            stops: Arc::default(),
            lease_owner: uuid::Uuid::now_v7().to_string().into(),
            held: Arc::default(),
            freed: config
                .agents
                .keys()
                .map(|a| (a.clone(), Arc::default()))
                .collect(),
            runner,
            config,
            notify,
            resume,
            private,
            notion,
            slack,
            settings,
            tracker,
            shutdown,
        }
    }

    /// This process's name on the leases it holds.
    pub fn lease_owner(&self) -> &str {
        &self.lease_owner
    }

    /// Routes events, fires cron slots and reconciles dead runs until shutdown.
    pub async fn run(self: Arc<Self>) {
        // Before anything here opens a sealed value.
        if let Some(key) = &self.settings.data_key {
            super::reseal::at_start(self.runner.store.as_ref(), key).await;
        }
        self.requeue_orphans().await;
        if let Err(e) = self.reconcile().await {
            tracing::error!(error = %e, "reconciling runs failed");
        }
        let mut last_reconcile = tokio::time::Instant::now();
        loop {
            let mut decided = false;
            tokio::select! {
                _ = self.notify.notified() => {}
                _ = self.resume.notified() => decided = true,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = self.shutdown.cancelled() => break,
            }
            if let Err(e) = self.cron_tick(Utc::now()).await {
                tracing::error!(error = %e, "cron tick failed");
            }
            match self.time_out_approvals(Utc::now()).await {
                Ok(n) => decided |= n > 0,
                Err(e) => tracing::error!(error = %e, "timing out approvals failed"),
            }
            if decided || last_reconcile.elapsed() > self.settings.lease / 2 {
                last_reconcile = tokio::time::Instant::now();
                self.requeue_orphans().await;
                if let Err(e) = self.reconcile().await {
                    tracing::error!(error = %e, "reconciling runs failed");
                }
            }
            if let Err(e) = self.drain().await {
                tracing::error!(error = %e, "routing events failed");
            }
        }
    }

    /// What digests and proposals need of the dispatcher.
    fn digest_ctx(&self) -> super::digest::Ctx<'_> {
        super::digest::Ctx {
            store: &self.runner.store,
            config: &self.config,
            slack: self.slack.as_ref(),
            improver: self.settings.improver.as_ref(),
            public_url: self.runner.sources.public_url.as_deref(),
            tasks: &self.tracker,
        }
    }

    /// Claimed events whose router died before routing them (any replica's: a claim
    /// older than a lease) go back in the queue; so do proposals a stopped process
    /// left unfinished.
    async fn requeue_orphans(&self) {
        if self.settings.improver.is_some() {
            match super::digest::resume_proposals(&self.digest_ctx()).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    proposals = n,
                    "took over proposals a stopped process left unfinished"
                ),
                Err(e) => tracing::error!(error = %e, "looking for unfinished proposals failed"),
            }
        }
        let before = Utc::now() - chrono::Duration::from_std(self.settings.lease).unwrap_or_default();
        match self.runner.store.requeue_orphan_events(before).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                events = n,
                "re-queued events claimed by a process that stopped before routing them"
            ),
            Err(e) => tracing::error!(error = %e, "re-queueing orphaned events failed"),
        }
    }

    /// Decides every approval request past its deadline as timed out (Deny); their runs
    /// resume at the next reconcile. Returns how many.
    pub async fn time_out_approvals(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let store = &self.runner.store;
        let mut n = 0;
        for id in store.overdue_approvals(now).await? {
            if !store
                .decide_approval(&id, crate::run::approval::TIMED_OUT, None, now)
                .await?
            {
                continue;
            }
            n += 1;
            if let Some(row) = store.get_approval(&id).await? {
                tracing::info!(run = %row.run_id, tool = %row.tool, "approval timed out; the call is denied");
                // On a task of its own: Slack's answer must not hold up the dispatcher.
                let (store, slack) = (store.clone(), self.slack.clone());
                self.tracker.spawn(async move {
                    let outcome = "No decision in time: denied.";
                    super::interactivity::update_request(store.as_ref(), slack.as_ref(), &row, outcome).await;
                });
            }
        }
        Ok(n)
    }

    /// Routes queued events ([`DRAIN_CLAIMS`] claims at most; the dispatcher comes back
    /// at once for the rest). A claimed batch is decided event by event and written
    /// in one transaction ([`EventQueue::route_events`]): on SQLite's single writer,
    /// one commit per event queued behind every running run's writes made routing
    /// the slowest part of a burst. An event whose conversation or person already has
    /// an event in the pending batch first writes and starts the batch, so that
    /// hand-offs, follow-ups and per-person limits see the earlier event's runs.
    ///
    /// [`EventQueue::route_events`]: crate::store::EventQueue::route_events
    pub async fn drain(&self) -> Result<usize, StoreError> {
        let mut n = 0;
        for _ in 0..DRAIN_CLAIMS {
            let events = self.runner.store.claim_events(64).await?;
            if events.is_empty() {
                return Ok(n);
            }
            let mut batch: Vec<Planned> = Vec::new();
            let mut keys: HashSet<String> = HashSet::new();
            for e in events {
                let Some((trigger, whole)) = self.trigger_of(&e) else {
                    // Unreadable: record that nothing can run for it rather than retry forever.
                    let why =
                        EventOutcome::because(OutcomeKind::Ignored, "unreadable (its private text is gone)");
                    self.runner.store.settle_event(&e.id, &why).await?;
                    continue;
                };
                let mine: Vec<String> = [
                    trigger.conversation_key().map(|c| format!("c:{c}")),
                    limits::limited_person(&trigger).map(|a| format!("p:{a}")),
                ]
                .into_iter()
                .flatten()
                .collect();
                if mine.iter().any(|k| keys.contains(k)) {
                    n += self.commit(std::mem::take(&mut batch)).await?;
                    keys.clear();
                }
                match self.plan(e, trigger, whole).await {
                    Ok(Some(planned)) => {
                        keys.extend(mine);
                        batch.push(planned);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        // What was decided before stays decided; this event (and the
                        // rest of the claim) goes back to the queue after a lease.
                        self.commit(batch).await?;
                        return Err(e);
                    }
                }
            }
            n += self.commit(batch).await?;
        }
        // More may be queued: routed on the next pass, once cron, approvals and
        // reconcile have had theirs (a storm of events must not hold them back).
        self.notify.notify_one();
        Ok(n)
    }

    /// The event's trigger, and whether it is whole: a private event's text lives only
    /// in this process's memory, so after a restart it comes back without it.
    fn trigger_of(&self, e: &EventRow) -> Option<(TriggerEvent, bool)> {
        let cached = self
            .private
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&e.id);
        if let Some(held) = cached {
            return Some((held.event, true));
        }
        // Sealed at ingest: readable by whichever process claims it.
        if let (Some(sealed), Some(key)) = (&e.sealed, &self.settings.data_key) {
            let place = super::ingest::sealed_event_place(&e.id);
            match key
                .open_at(&place, sealed)
                .map_err(|err| err.to_string())
                .and_then(|plain| {
                    serde_json::from_slice::<TriggerEvent>(&plain).map_err(|err| err.to_string())
                }) {
                Ok(t) => return Some((t, true)),
                Err(err) => {
                    tracing::error!(event = %e.id, error = %err, "cannot open a sealed private event")
                }
            }
        }
        serde_json::from_value(e.body.clone())
            .map_err(|err| tracing::error!(event = %e.id, error = "unreadable event body", detail = %Privacy::from_private(e.private).wrap(err.to_string())))
            .ok()
            .map(|t| (t, !e.private))
    }

    /// Whether event `e` may still wait for a service that could not answer for now
    /// (it arrived less than [`SERVICE_PATIENCE`] ago).
    fn may_wait(&self, e: &EventRow) -> bool {
        Utc::now() - e.received_at < chrono::Duration::from_std(SERVICE_PATIENCE).unwrap_or_default()
    }

    /// Leaves claimed event `e` unsettled, so the orphan requeue routes it again after a
    /// lease; its private text, which lived only in this process's memory until this
    /// claim, goes back there.
    fn wait(&self, e: &EventRow, trigger: TriggerEvent, whole: bool) {
        if whole && e.private && e.sealed.is_none() {
            let held = super::ingest::Held {
                at: std::time::Instant::now(),
                sealed: false,
                event: trigger,
            };
            self.private
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(e.id.clone(), held);
        }
    }

    /// A 👍 (`+1`) or 👎 (`-1`) reaction on a message steward posted as a run's reply
    /// becomes a human score on that run.
    async fn record_feedback(&self, trigger: &TriggerEvent) -> Result<(), StoreError> {
        let Origin::Slack {
            reaction: Some(reaction),
            ts: Some(ts),
            user,
            ..
        } = &trigger.origin
        else {
            return Ok(());
        };
        let up = match reaction.as_str() {
            "+1" | "thumbsup" => true,
            "-1" | "thumbsdown" => false,
            _ => return Ok(()),
        };
        let store = &self.runner.store;
        let Some(run_id) = store.run_by_reply_ts(ts).await? else {
            return Ok(());
        };
        // A person's reactions count once (their first).
        let added = store
            .add_score(
                &run_id,
                &crate::store::Score {
                    kind: "human".into(),
                    criterion: "reaction".into(),
                    passed: Some(up),
                    score: if up { 1.0 } else { -1.0 },
                    explanation: None,
                    source: user.clone(),
                    cost_usd: 0.0,
                    at: Utc::now(),
                },
            )
            .await?;
        if added && let Some(run) = store.get_run(&run_id).await? {
            self.runner.metrics.feedback(&run.agent, up);
        }
        tracing::info!(run = %run_id, up, "feedback recorded");
        Ok(())
    }

    /// Starts a run for every matching agent; returns how many.
    /// Decides what `e` starts: its runs, and the conversations' runs it is handed to.
    /// None when it is settled already (a stop, Slack's agent view).
    async fn plan(
        &self,
        e: EventRow,
        mut trigger: TriggerEvent,
        whole: bool,
    ) -> Result<Option<Planned>, StoreError> {
        // Slack's agent view: suggested prompts and the channel a person looks at.
        let store = self.runner.store.as_ref();
        if super::agent_view::handle(store, self.slack.as_ref(), &self.config, &trigger).await? {
            let why = EventOutcome::because(OutcomeKind::Handled, "Slack's agent view");
            store.settle_event(&e.id, &why).await?;
            return Ok(None);
        }
        // steward's own events: digests and proposed fixes.
        if let Some(why) = super::digest::route(&self.digest_ctx(), &e.id, &trigger).await? {
            store.settle_event(&e.id, &why).await?;
            return Ok(None);
        }
        // steward's own comment or change, which a rule on comments or updates would
        // answer again and again.
        if let Some(source) = self.runner.sources.for_origin(&trigger.origin) {
            let why = match source.is_our_own(&trigger).await {
                Ok(false) => None,
                Ok(true) => Some("steward's own comment or change".to_string()),
                // Jira or Notion is rate limiting or down for a moment: the event is left
                // claimed, so it is routed again after a lease (the orphan requeue),
                // until it is `SERVICE_PATIENCE` old.
                Err(error) if error.is_transient() && self.may_wait(&e) => {
                    tracing::warn!(event = %e.id, %error, "cannot tell yet whether an event is steward's own; it is routed again after a lease");
                    self.wait(&e, trigger, whole);
                    return Ok(None);
                }
                // Acting could answer steward's own comment, and that answer, without
                // end: an event it cannot place starts nothing, and says why.
                Err(error) => {
                    tracing::warn!(event = %e.id, %error, "cannot tell whether an event is steward's own; not acting on it");
                    Some(format!(
                        "cannot tell whether this is steward's own comment or change ({error}); not acted on, so steward cannot answer itself"
                    ))
                }
            };
            if let Some(why) = why {
                store
                    .settle_event(&e.id, &EventOutcome::because(OutcomeKind::Ignored, why))
                    .await?;
                return Ok(None);
            }
        }
        super::agent_view::add_context(store, &mut trigger).await?;
        self.record_feedback(&trigger).await?;
        // A Stop (Slack's button, or the stop reaction on a message a run works on)
        // cancels the runs it names and starts nothing.
        if let Some((key, user)) = super::stops::request(&trigger) {
            let stopped = self.stops.stop(&key, user);
            if !stopped.is_empty() || trigger.kind == "agent_session_stopped" {
                tracing::info!(event = %e.id, runs = ?stopped, "stop requested");
                let why = EventOutcome::new(
                    OutcomeKind::Handled,
                    serde_json::json!({"reason": "a stop request", "stopped": stopped}),
                );
                self.runner.store.settle_event(&e.id, &why).await?;
                return Ok(None);
            }
        }
        let routed = router::route(&self.config, &trigger, self.notion.as_ref()).await;
        if let Some(error) = &routed.unavailable
            && self.may_wait(&e)
        {
            tracing::warn!(event = %e.id, %error, "cannot read the Notion page a rule asks about yet; the event is routed again after a lease");
            self.wait(&e, trigger, whole);
            return Ok(None);
        }
        let mut matched = routed.agents;
        let mut follow_up = false;
        if matched.is_empty()
            && let Some(agent) = super::follow_ups::owner(
                self.runner.store.as_ref(),
                &self.runner.sources,
                &self.config,
                &trigger,
                Utc::now(),
            )
            .await?
        {
            tracing::debug!(event = %e.id, agent = %agent.name, "a follow-up in the agent's thread");
            matched.push(agent);
            follow_up = true;
        }
        let mut agents = Vec::new();
        // Agents refused by a limit, with the outcome that names the limit.
        let mut refused: Vec<(OutcomeKind, String)> = Vec::new();
        for agent in matched {
            let (kind, reply) =
                match limits::admit(self.runner.store.as_ref(), &agent, &trigger, Utc::now()).await? {
                    limits::Admit::Yes => {
                        agents.push(agent);
                        continue;
                    }
                    limits::Admit::OverBudget(reply) => (OutcomeKind::OverBudget, reply),
                    limits::Admit::RateLimited(reply) => (OutcomeKind::RateLimited, reply),
                };
            self.runner
                .metrics
                .trigger(&e.source, &e.kind, crate::metrics::TriggerOutcome::Limited);
            if let Some(text) = reply {
                self.tell(&trigger, &format!("refused:{}:{}", e.id, agent.name), text);
            }
            refused.push((kind, agent.name.clone()));
        }
        if agents.is_empty() && refused.is_empty() {
            tracing::debug!(event = %e.id, source = %e.source, kind = %e.kind, "no agent matched");
            self.runner
                .metrics
                .trigger(&e.source, &e.kind, crate::metrics::TriggerOutcome::NoAgent);
        }
        // A run of the same conversation and agent that is queued or working here
        // takes the message instead of a new run starting.
        let conversation = trigger.conversation_key();
        let handoff = trigger.handoff_key();
        let (handed, agents): (Vec<_>, Vec<_>) = agents.into_iter().partition(|a| {
            handoff
                .as_deref()
                .is_some_and(|c| a.takes_handoffs() && self.handoffs.has(c, &a.name))
        });
        let runs: Vec<NewRun> = agents
            .iter()
            .map(|agent| NewRun {
                id: uuid::Uuid::now_v7().to_string(),
                agent: agent.name.clone(),
                parent_id: None,
                trigger_summary: trigger_summary(&trigger),
                event_id: Some(e.id.clone()),
                source: trigger.source.clone(),
                kind: trigger.kind.clone(),
                actor: trigger.actor(),
                private: trigger.private,
                thread_key: conversation.clone(),
            })
            .collect();
        let outcome = super::outcomes::decide(
            &self.config,
            &trigger,
            &super::outcomes::Decided {
                runs: &runs,
                handed: &handed,
                follow_up,
                refused: &refused,
                filtered: &routed.filtered,
                outranked: &routed.outranked,
            },
        );
        Ok(Some(Planned {
            event: e,
            trigger,
            whole,
            agents,
            runs,
            handed,
            conversation,
            outcome,
        }))
    }

    /// Writes a batch of decisions in one transaction, then starts what each event
    /// started, in order. Returns how many runs started or took a message.
    async fn commit(&self, batch: Vec<Planned>) -> Result<usize, StoreError> {
        if batch.is_empty() {
            return Ok(0);
        }
        // The events leave the queue in the same transaction that creates their runs,
        // so a crash between the two loses nothing.
        let routes: Vec<Route<'_>> = batch
            .iter()
            .map(|p| Route {
                event_id: &p.event.id,
                runs: &p.runs,
                outcome: Some(&p.outcome),
            })
            .collect();
        let written = self
            .runner
            .store
            .route_events(&routes, lease_until(self.settings.lease))
            .await?;
        let mut started = 0;
        for (p, written) in batch.into_iter().zip(written) {
            if !written {
                continue;
            }
            let e = p.event;
            self.runner.metrics.event_outcome(&e.source, p.outcome.kind);
            if p.runs.is_empty() && e.sealed.is_some() {
                // Nothing will read it.
                self.runner.store.erase_sealed(&e.id).await?;
            }
            started += p.agents.len() + p.handed.len();
            for (run, agent) in p.runs.into_iter().zip(p.agents) {
                self.start(run.id, e.id.clone(), agent, p.trigger.clone(), p.whole);
            }
            if let Some(conversation) = p.conversation.filter(|_| !p.handed.is_empty()) {
                self.hand_over(&e.id, &conversation, p.handed, &p.trigger).await?;
            }
        }
        Ok(started)
    }

    /// Hands the message of `trigger` to the run of each agent working in
    /// `conversation`; where that run ended meanwhile, starts one of its own.
    async fn hand_over(
        &self,
        event_id: &str,
        conversation: &str,
        agents: Vec<Arc<AgentConfig>>,
        trigger: &TriggerEvent,
    ) -> Result<(), StoreError> {
        let message = crate::run::inbox::Handed::from_trigger(&self.runner.sources, trigger).await;
        let key = trigger.handoff_key();
        for agent in agents {
            if key
                .as_deref()
                .is_some_and(|k| self.handoffs.offer(k, &agent.name, message.clone()))
            {
                tracing::debug!(event = %event_id, agent = %agent.name, "handed to the conversation's run");
                continue;
            }
            let run = NewRun {
                id: uuid::Uuid::now_v7().to_string(),
                agent: agent.name.clone(),
                parent_id: None,
                trigger_summary: trigger_summary(trigger),
                event_id: Some(event_id.to_string()),
                source: trigger.source.clone(),
                kind: trigger.kind.clone(),
                actor: trigger.actor(),
                private: trigger.private,
                thread_key: Some(conversation.to_string()),
            };
            let store = &self.runner.store;
            store.create_run(&run).await?;
            // Between the two statements another replica's reconcile may have taken the
            // run (it had no lease yet): then it is theirs to start.
            if !store
                .renew_lease(&run.id, lease_until(self.settings.lease), &self.lease_owner)
                .await?
            {
                tracing::info!(run = %run.id, agent = %agent.name, "another replica took the new run first");
                continue;
            }
            // The trigger is whole: it is the one just routed, still in memory.
            self.spawn(run.id, event_id.to_string(), agent, trigger.clone());
        }
        Ok(())
    }

    /// Posts `text` where `trigger` came from, without a run (a limit's refusal).
    fn tell(&self, trigger: &TriggerEvent, key: &str, text: String) {
        let sources = self.runner.sources.clone();
        let origin = trigger.origin.clone();
        let key = key.to_string();
        self.tracker.spawn(async move {
            let Some(source) = sources.for_origin(&origin) else {
                return;
            };
            let reply = crate::triggers::source::Reply {
                text: &text,
                prompt_link: None,
                run_link: None,
                feedback: None,
                escalate: None,
                idempotency_key: key,
            };
            if let Err(e) = source.post_reply(&origin, &reply).await {
                tracing::warn!(error = %e, "cannot tell a person their request was refused");
            }
        });
    }

    /// Executes a queued run, or ends it `interrupted` with an apology when its private
    /// input was lost in a restart: never answer from an empty prompt.
    fn start(
        &self,
        run_id: String,
        event_id: String,
        agent: Arc<AgentConfig>,
        trigger: TriggerEvent,
        whole: bool,
    ) {
        if whole {
            return self.spawn(run_id, event_id, agent, trigger);
        }
        let runner = self.runner.clone();
        self.tracker.spawn(async move {
            if let Err(e) = input_lost(&runner, &run_id, &agent, &trigger).await {
                tracing::error!(run = %run_id, error = %e, "cannot end a run whose input was lost");
            }
        });
    }

    /// Executes a queued run on the tracker, renewing its lease until it ends.
    fn spawn(&self, run_id: String, event_id: String, agent: Arc<AgentConfig>, trigger: TriggerEvent) {
        let runner = self.runner.clone();
        let config = self.config.clone();
        let global = self.global.clone();
        let per_agent = self.per_agent.get(&agent.name).cloned();
        let lease = self.settings.lease;
        let thread = trigger.conversation_key();
        // From now until it ends, the run takes its conversation's later messages (those
        // meant for the same readers).
        let inbox = trigger
            .handoff_key()
            .filter(|_| agent.takes_handoffs())
            .map(|key| {
                let inbox = self.handoffs.open(&key, &agent.name);
                (key, inbox)
            });
        let handoffs = self.handoffs.clone();
        let stop = Arc::new(crate::run::stop::StopSignal::new(&runner.interrupt));
        let stops = self.stops.clone();
        let owner = self.lease_owner.clone();
        // Once the service stops, a run that has not started yet does not start.
        let shutdown = self.shutdown.clone();
        stops.add(&run_id, &trigger, stop.clone());
        let held = self.held.hold(&run_id);
        let freed = self.freed.get(&agent.name).cloned().unwrap_or_default();
        self.tracker.spawn(async move {
            let _held = held;
            let store = runner.store.clone();
            // Whether the store has it `running` (its turn came) before it executed.
            let marked = std::sync::atomic::AtomicBool::new(false);
            let work = async {
                // Across replicas, wait (queued, lease renewed) for a slot under the
                // agent's cap and for the conversation's earlier runs: one run of a
                // thread at a time, in the order its messages came.
                if agent.limits.concurrency.is_some() || thread.is_some() {
                    let max = agent.limits.concurrency;
                    let mut waited = false;
                    let mut poll = SLOT_POLL;
                    loop {
                        // Asked for before looking, so an end between the look and the
                        // wait is not missed.
                        let freed = freed.notified();
                        if store.start_within(&run_id, &agent.name, max, thread.as_deref()).await? {
                            break;
                        }
                        waited = true;
                        tokio::select! {
                            _ = tokio::time::sleep(poll) => {}
                            _ = freed => {}
                            // Still waiting when the service stops: the run stays queued
                            // for the next process.
                            _ = shutdown.cancelled() => return Ok(None),
                        }
                        poll = (poll * 2).min(SLOT_POLL_MAX);
                    }
                    marked.store(true, std::sync::atomic::Ordering::Relaxed);
                    // A run that waited its turn starts once the conversation is quiet,
                    // so a burst of messages becomes one turn. A first message starts
                    // at once.
                    if let Some((_, inbox)) = inbox.as_ref().filter(|_| waited) {
                        loop {
                            let quiet = inbox.quiet_in(agent.debounce);
                            if quiet.is_zero() {
                                break;
                            }
                            tokio::select! {
                                _ = tokio::time::sleep(quiet) => {}
                                _ = shutdown.cancelled() => return Ok(None),
                            }
                        }
                    }
                }
                let slots = async {
                    let global = global.acquire_owned().await;
                    let agent = match per_agent {
                        Some(s) => s.acquire_owned().await.ok(),
                        None => None,
                    };
                    (global, agent)
                };
                let _slots = tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => return Ok(None),
                    slots = slots => slots,
                };
                // A stop that came while the slot was being granted still wins.
                if shutdown.is_cancelled() {
                    return Ok(None);
                }
                let mut lineage = Lineage::root(&agent);
                lineage.existing_run = Some(run_id.clone());
                lineage.inbox = inbox.as_ref().map(|(_, i)| i.clone());
                lineage.stop = Some(stop.clone());
                lineage.retry_interrupted = true;
                runner.run_in(&agent, &trigger, lineage, stop.token()).await.map(Some)
            };
            let renew = async {
                loop {
                    tokio::time::sleep(lease / 3).await;
                    match store.renew_lease(&run_id, lease_until(lease), &owner).await {
                        Ok(true) => {}
                        // This process stalled past the lease and another replica took
                        // the run: it is theirs now; this copy stops where it is.
                        Ok(false) => {
                            tracing::error!(run = %run_id, "another process took over this run while this one stalled past its lease; abandoning it here");
                            return;
                        }
                        Err(e) => tracing::warn!(run = %run_id, error = %e, "cannot renew the run's lease"),
                    }
                }
            };
            let outcome = tokio::select! {
                r = work => match r {
                    Ok(None) => {
                        // Its turn had come but it never ran: queued again.
                        if marked.load(std::sync::atomic::Ordering::Relaxed)
                            && let Err(e) = store.requeue(&run_id, crate::store::RunStatus::Running).await
                        {
                            tracing::warn!(run = %run_id, error = %e, "cannot queue a run that did not start again");
                        }
                        // Its lease ends now, so a restarted process takes it at once
                        // instead of when the lease would have run out.
                        release_lease(store.as_ref(), &run_id, &owner).await;
                        tracing::info!(run = %run_id, agent = %agent.name, "run left queued at shutdown, for the next start");
                        None
                    }
                    Ok(Some(o)) => {
                        tracing::info!(run = %o.run_id, agent = %agent.name, status = o.status().as_str(), termination = o.termination.as_str(), "run finished");
                        Some(o)
                    }
                    Err(crate::run::RunError::LeftForNextStart) => {
                        // Its lease ends now, so the next start retries it at once.
                        release_lease(store.as_ref(), &run_id, &owner).await;
                        tracing::info!(run = %run_id, agent = %agent.name, "run interrupted before any side effect; the next start runs it again");
                        None
                    }
                    Err(e) => {
                        tracing::warn!(run = %run_id, agent = %agent.name, error = %e, "run did not execute");
                        None
                    }
                },
                _ = renew => None,
            };
            if let Some((conversation, inbox)) = &inbox {
                handoffs.close(conversation, &agent.name, inbox);
            }
            stops.remove(&run_id, &trigger);
            freed.notify_one();
            // A private event's sealed text goes once no run of it is left to read it.
            if trigger.private
                && let Err(e) = store.erase_sealed(&event_id).await
            {
                tracing::warn!(event = %event_id, error = %e, "cannot erase a private event's sealed text");
            }
            // Post-run evals: after the reply, on the sampled share of runs; a stop
            // cancels them (they are scores, not work anyone waits for).
            if let Some(outcome) = outcome
                && outcome.termination != Termination::AwaitingApproval
                && crate::evals::post_run::wanted(&agent)
            {
                let judged = crate::evals::post_run::evaluate(&runner, &config, &agent, &trigger, &outcome);
                tokio::select! {
                    r = judged => if let Err(e) = r {
                        tracing::warn!(run = %outcome.run_id, error = %e, "post-run evals failed");
                    },
                    _ = runner.interrupt.cancelled() => {}
                }
            }
        });
    }

    /// Ends a run that reconcile will not resume, as a run that ends by itself would
    /// end: counted, its final status and log line shown, the person told, its sealed
    /// input erased. False when it had already ended (nothing else happens then).
    async fn end_reconciled(
        &self,
        r: &crate::store::ExpiredRun,
        agent: Option<&Arc<AgentConfig>>,
        termination: Termination,
        error: &str,
    ) -> Result<bool, StoreError> {
        let store = &self.runner.store;
        if !end_run(store.as_ref(), &r.id, termination, error).await? {
            return Ok(false);
        }
        let outcome = RunOutcome::new(&r.id).stopped(termination, Some(error.into()));
        let ran = store
            .get_run(&r.id)
            .await?
            .map(|row| row.started_at.unwrap_or(row.created_at))
            .map_or(0.0, |at| {
                (Utc::now() - at).num_milliseconds().max(0) as f64 / 1000.0
            });
        self.runner
            .metrics
            .run_finished(&r.agent, outcome.status(), termination, ran);
        let Some(event) = (match &r.event_id {
            Some(id) => store.get_event(id).await?,
            None => None,
        }) else {
            return Ok(true);
        };
        if let (Some(agent), Some((trigger, _))) = (agent, self.trigger_of(&event)) {
            // Told on a task of its own: a rate-limited Slack (each call may wait out
            // several `Retry-After`s) must not hold up routing, cron and reconcile, and
            // a replica taking over many runs tells each person.
            let (sources, agent) = (self.runner.sources.clone(), agent.clone());
            self.tracker.spawn(async move {
                crate::run::presence::show_end(
                    &sources,
                    &agent,
                    &trigger,
                    crate::run::status::progress_of(&outcome),
                )
                .await;
                crate::run::status::ended(&sources, &agent, &trigger, &outcome).await;
            });
        }
        if event.private
            && let Err(e) = store.erase_sealed(&event.id).await
        {
            tracing::warn!(event = %event.id, error = %e, "cannot erase a private event's sealed text");
        }
        Ok(true)
    }

    /// Runs whose lease ran out belong to a process that died. One with no
    /// side-effecting tool call yet is retried; one with side effects is marked
    /// `interrupted` and reported, never silently re-run.
    pub async fn reconcile(&self) -> Result<(), StoreError> {
        let store = &self.runner.store;
        let now = Utc::now();
        for r in store.expired_runs(now).await? {
            // Every replica reconciles the same table: only the one that takes the lease
            // acts on the run, so an expired run is never started twice. A run this
            // process still works on lapsed only because its renewals failed: it is
            // not taken again here (its renewals take the lease back).
            if self.held.holds(&r.id)
                || !store
                    .take_expired(&r.id, now, lease_until(self.settings.lease), &self.lease_owner)
                    .await?
            {
                continue;
            }
            self.runner.metrics.lease_reclaimed();
            let Some(agent) = self.config.agents.get(&r.agent).cloned() else {
                // Ended rather than left queued: a queued run holds its conversation.
                let error = format!("agent '{}' is no longer in the configuration", r.agent);
                if self
                    .end_reconciled(&r, None, Termination::Interrupted, &error)
                    .await?
                {
                    tracing::warn!(run = %r.id, agent = %r.agent, "ended a run of an agent that no longer exists");
                }
                continue;
            };
            if r.status == RunStatus::Running && !crate::run::repeats_nothing(store.as_ref(), &r.id).await? {
                let reason = "process stopped after a side-effecting tool call (or a subagent or skill script, whose effects it cannot tell); not retried";
                append_now(store.as_ref(), &r.id, RunEvent::Interrupted { reason }).await?;
                let error = "steward stopped during this run after a side-effecting tool call; it was not re-run to avoid repeating the side effect";
                if self
                    .end_reconciled(&r, Some(&agent), Termination::Interrupted, error)
                    .await?
                {
                    tracing::error!(run = %r.id, agent = %r.agent, "run interrupted by a crash after side effects; reported, not retried");
                }
                continue;
            }
            // A run that keeps taking the process down (a decompression bomb, say) must
            // not crash-loop the service: after MAX_ATTEMPTS it is failed for good.
            if r.status == RunStatus::Running && r.attempt >= MAX_ATTEMPTS {
                let attempts = r.attempt;
                append_now(store.as_ref(), &r.id, RunEvent::CrashLoop { attempts }).await?;
                let error = format!(
                    "the process stopped during each of this run's {} attempts; it is not retried again",
                    r.attempt
                );
                if self
                    .end_reconciled(&r, Some(&agent), Termination::CrashLoop, &error)
                    .await?
                {
                    tracing::error!(run = %r.id, agent = %r.agent, attempts = r.attempt, "run failed as a crash loop");
                }
                continue;
            }
            if r.status == RunStatus::Running {
                if !store.requeue(&r.id, RunStatus::Running).await? {
                    continue;
                }
                let retried = RunEvent::Retried {
                    reason: "process stopped before any side effect",
                    attempt: r.attempt + 1,
                };
                append_now(store.as_ref(), &r.id, retried).await?;
                self.runner.metrics.run_retried();
            }
            let Some(event) = (match &r.event_id {
                Some(id) => store.get_event(id).await?,
                None => None,
            }) else {
                continue;
            };
            let Some((trigger, whole)) = self.trigger_of(&event) else {
                continue;
            };
            tracing::info!(run = %r.id, agent = %r.agent, "resuming a run whose process stopped");
            self.start(r.id, event.id.clone(), agent, trigger, whole);
        }
        Ok(())
    }

    /// Persists a cron event for every due slot (each `(schedule, slot)` once: the
    /// dedupe key makes a slot fire once even across restarts and replicas).
    pub async fn cron_tick(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let mut fired = 0;
        for job in &self.cron {
            let event = |slot| (job.event(slot), job.dedupe_key(slot));
            fired += usize::from(self.tick(&job.state_key(), job, now, event).await?);
        }
        for job in &self.digests {
            let event = |slot| super::digest::digest_event(&job.agent, slot);
            fired += usize::from(
                self.tick(&format!("digest:{}", job.agent), job, now, event)
                    .await?,
            );
        }
        Ok(fired)
    }

    /// One schedule: persists the event of its due slot, if any, once (the dedupe key),
    /// and remembers the last slot seen under `key`. A schedule seen for the first time
    /// starts counting from now.
    async fn tick(
        &self,
        key: &str,
        job: &CronJob,
        now: DateTime<Utc>,
        event: impl Fn(DateTime<Utc>) -> (TriggerEvent, String),
    ) -> Result<bool, StoreError> {
        let store = &self.runner.store;
        let last = store
            .get_setting(key)
            .await?
            .and_then(|v| DateTime::parse_from_rfc3339(&v).ok())
            .map(|d| d.with_timezone(&Utc));
        let Some(last) = last else {
            store.set_setting(key, &now.to_rfc3339()).await?;
            return Ok(false);
        };
        let (fire, seen) = job.due(last, now);
        let mut fired = false;
        if let Some(slot) = fire {
            let (event, dedupe) = event(slot);
            if store.insert_events(&[event_row(&event, &dedupe)]).await?.first() == Some(&true) {
                fired = true;
                self.notify.notify_one();
            }
        }
        if let Some(seen) = seen {
            store.set_setting(key, &seen.to_rfc3339()).await?;
        }
        Ok(fired)
    }
}
