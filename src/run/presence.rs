//! A run's presence where it was asked, while it works: Slack's thinking status (what
//! the run is doing now, from the tool it calls) and agent session, or reactions on the
//! triggering message (`output.status`). Best effort: a failure is logged and never
//! fails the run.
//!
//! One task per run sends the updates, at most one step per [`STEP_INTERVAL`] (the
//! newest wins), so tool calls never wait for Slack. When the run ends the task is told
//! to stop and awaited, so an update already on its way lands before the final status
//! (aborting it could let it land after the clear).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{AgentConfig, StatusMode};
use crate::triggers::source::Progress;
use crate::triggers::{Origin, Sources, TriggerEvent};

/// Slack throttles `assistant.threads.setStatus`; a status changes at most this often.
pub const STEP_INTERVAL: Duration = Duration::from_secs(2);
/// How long the first model call waits for the "working" status to be up.
const START_WAIT: Duration = Duration::from_secs(1);

/// The presence of one top-level run.
pub struct Presence {
    sources: Arc<Sources>,
    mode: StatusMode,
    origin: Origin,
    steps: watch::Sender<Option<String>>,
    started: watch::Receiver<bool>,
    /// Tells the task to stop between updates.
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl Presence {
    /// Starts showing that the run works; `None` when the agent shows no status or the
    /// trigger's source has nowhere to show it.
    pub fn start(
        sources: Arc<Sources>,
        agent: &AgentConfig,
        trigger: &TriggerEvent,
    ) -> Option<Arc<Presence>> {
        let mode = shown_mode(agent, trigger)?;
        sources.for_origin(&trigger.origin)?;
        let (steps, mut step_rx) = watch::channel(None::<String>);
        let (started_tx, started) = watch::channel(false);
        // The session's title is the request in the person's words (it shows only in
        // Slack, to people who see the thread).
        let working = Progress::Working {
            title: trigger.text.clone().unwrap_or_else(|| trigger.summary.clone()),
            user: trigger.actor(),
        };
        let (src, origin) = (sources.clone(), trigger.origin.clone());
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let task = tokio::spawn(async move {
            show(&src, mode, &origin, &working).await;
            started_tx.send_replace(true);
            loop {
                tokio::select! {
                    () = stopped.cancelled() => return,
                    changed = step_rx.changed() => if changed.is_err() { return },
                }
                let step = step_rx.borrow_and_update().clone();
                if let Some(text) = step {
                    show(&src, mode, &origin, &Progress::Step(text)).await;
                    tokio::select! {
                        () = stopped.cancelled() => return,
                        () = tokio::time::sleep(STEP_INTERVAL) => {}
                    }
                }
            }
        });
        Some(Arc::new(Presence {
            sources,
            mode,
            origin: trigger.origin.clone(),
            steps,
            started,
            stop,
            task: Mutex::new(Some(task)),
        }))
    }

    /// Says what the run does now ("Searching Jira…").
    pub fn step(&self, text: String) {
        self.steps.send_replace(Some(text));
    }

    /// Waits (a little) until the "working" status is up, so people see it before
    /// the model is asked.
    pub async fn started(&self) {
        let mut rx = self.started.clone();
        let _ = tokio::time::timeout(START_WAIT, rx.wait_for(|up| *up)).await;
    }

    fn take_task(&self) -> Option<JoinHandle<()>> {
        self.task.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The run ended: no more steps (an update on its way lands first); shows how
    /// (`None` leaves the status to what comes next, as for a run that waits for an
    /// approval).
    pub async fn end(&self, progress: Option<Progress>) {
        self.stop.cancel();
        if let Some(task) = self.take_task() {
            let _ = task.await;
        }
        if let Some(p) = progress {
            show(&self.sources, self.mode, &self.origin, &p).await;
        }
    }
}

impl Drop for Presence {
    /// A presence dropped without [`Presence::end`] (the run was cancelled) stops at
    /// once.
    fn drop(&mut self) {
        if let Some(task) = self.take_task() {
            task.abort();
        }
    }
}

/// Shows how a run ended whose presence died with its process (a run ended when
/// another process reconciled it): the same final status an ended presence shows.
pub async fn show_end(sources: &Sources, agent: &AgentConfig, trigger: &TriggerEvent, progress: Progress) {
    if let Some(mode) = shown_mode(agent, trigger) {
        show(sources, mode, &trigger.origin, &progress).await;
    }
}

/// How `agent` shows a run's status for `trigger`; `None` when it shows none there
/// (only Slack has a place for it).
fn shown_mode(agent: &AgentConfig, trigger: &TriggerEvent) -> Option<StatusMode> {
    let mode = agent.output.status;
    (mode != StatusMode::None && matches!(trigger.origin, Origin::Slack { .. })).then_some(mode)
}

async fn show(sources: &Sources, mode: StatusMode, origin: &Origin, progress: &Progress) {
    let Some(source) = sources.for_origin(origin) else {
        return;
    };
    if let Err(e) = source.show_progress(origin, mode, progress).await {
        tracing::warn!(error = %e, ?progress, "cannot show the run's status in Slack");
    }
}
