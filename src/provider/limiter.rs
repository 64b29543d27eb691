//! Provider limits that adapt: one limiter per provider and model in the process,
//! shared by every run, subagent and judge. Concurrency doubles every round of calls
//! until the provider first refuses one (slow start), then grows by one call per round
//! of successes while it is in use (additive increase) and halves when the provider says
//! "slow down" (429), once per burst: a refusal of a call sent before the last decrease
//! was already counted. 529 and "overloaded" answers count as "slow down" too. A
//! `Retry-After`, or rate-limit headers saying a budget is spent (see
//! [`super::rate_headers`]), pause new calls to that model until it passes. Interactive
//! work (a person waiting in Slack) goes ahead of scheduled and webhook work.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Who waits for a model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// A person is waiting (a Slack mention, a DM).
    Interactive,
    /// Cron, webhooks, evals, post-run judges.
    #[default]
    Background,
}

/// Concurrent calls a model starts with, before it has answered anything.
pub const INITIAL: f64 = 32.0;
/// The most concurrent calls to one model.
pub const MAX: f64 = 1024.0;
/// Longest pause a `Retry-After` imposes on new calls.
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// The limiters of one process, by provider and model.
#[derive(Debug, Default)]
pub struct Limiters {
    by_model: Mutex<HashMap<String, Arc<Limiter>>>,
}

impl Limiters {
    /// The limiter of `provider`'s `model`, made on first use.
    pub fn get(&self, provider: &str, model: &str) -> Arc<Limiter> {
        let mut map = self.by_model.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(format!("{provider}/{model}"))
            .or_insert_with(|| Arc::new(Limiter::new(INITIAL, MAX)))
            .clone()
    }
}

#[derive(Debug)]
struct State {
    limit: f64,
    in_flight: usize,
    /// Interactive callers waiting: background ones let them go first.
    interactive_waiting: usize,
    paused_until: Option<Instant>,
    last_decrease: Option<Instant>,
}

impl State {
    /// Before the first "slow down" the limit doubles every round of calls (slow start,
    /// as TCP's), so a burst reaches the provider's capacity in a few rounds.
    fn slow_start(&self) -> bool {
        self.last_decrease.is_none()
    }

    fn pause(&mut self, now: Instant, wait: Duration) {
        let until = now + wait.min(MAX_PAUSE);
        self.paused_until = Some(self.paused_until.map_or(until, |p| p.max(until)));
    }
}

/// One model's adaptive concurrency limit.
#[derive(Debug)]
pub struct Limiter {
    state: Mutex<State>,
    changed: Notify,
    max: f64,
}

/// A slot for one call; the slot frees when dropped.
#[derive(Debug)]
pub struct Permit {
    limiter: Arc<Limiter>,
    issued: Instant,
}

impl Permit {
    /// When the call was let through (see [`Limiter::slowed`]).
    pub fn issued(&self) -> Instant {
        self.issued
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.limiter.lock().in_flight -= 1;
        self.limiter.changed.notify_waiters();
    }
}

/// Counts an interactive caller as waiting until it gets a slot or gives up.
struct Waiting<'a>(&'a Limiter, bool);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.lock().interactive_waiting -= 1;
            self.0.changed.notify_waiters();
        }
    }
}

impl Limiter {
    pub fn new(initial: f64, max: f64) -> Limiter {
        Limiter {
            state: Mutex::new(State {
                limit: initial.clamp(1.0, max),
                in_flight: 0,
                interactive_waiting: 0,
                paused_until: None,
                last_decrease: None,
            }),
            changed: Notify::new(),
            max,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a slot: under the limit, past any pause, and (for background work) with
    /// no interactive caller waiting.
    pub async fn acquire(self: &Arc<Self>, priority: Priority) -> Permit {
        let mut waiting = Waiting(self, false);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let pause = {
                let mut s = self.lock();
                let now = Instant::now();
                let paused = s.paused_until.filter(|t| *t > now);
                let behind = priority == Priority::Background && s.interactive_waiting > 0;
                if paused.is_none() && !behind && (s.in_flight as f64) < s.limit.floor() {
                    s.in_flight += 1;
                    if waiting.1 {
                        s.interactive_waiting -= 1;
                        waiting.1 = false;
                    }
                    return Permit {
                        limiter: self.clone(),
                        issued: now,
                    };
                }
                if priority == Priority::Interactive && !waiting.1 {
                    s.interactive_waiting += 1;
                    waiting.1 = true;
                }
                paused
            };
            match pause {
                Some(until) => {
                    tokio::select! {
                        () = &mut changed => {}
                        () = tokio::time::sleep_until(until.into()) => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// A call succeeded: one more slot per limit's worth of successes (one per success
    /// in slow start), while calls use at least half the limit (an idle limit does not
    /// grow past twice what is used).
    pub fn succeeded(&self) {
        let mut s = self.lock();
        if (s.in_flight as f64) + 1.0 >= s.limit / 2.0 {
            let step = if s.slow_start() { 1.0 } else { 1.0 / s.limit };
            s.limit = (s.limit + step).min(self.max);
        }
        drop(s);
        self.changed.notify_waiters();
    }

    /// The provider refused a call let through at `issued` ("slow down"): halve the
    /// limit, unless the call went out before the last decrease (that burst is counted
    /// already), and pause new calls for its `Retry-After`.
    pub fn slowed(&self, issued: Instant, retry_after: Option<Duration>) {
        let mut s = self.lock();
        let now = Instant::now();
        if s.last_decrease.is_none_or(|t| issued >= t) {
            s.limit = (s.limit / 2.0).max(1.0);
            s.last_decrease = Some(now);
        }
        if let Some(wait) = retry_after {
            s.pause(now, wait);
        }
    }

    /// The provider's rate-limit headers say this model's budget is spent for `wait`:
    /// new calls wait that long (at most a minute), with the limit left as it is.
    pub fn spent_for(&self, wait: Duration) {
        self.lock().pause(Instant::now(), wait);
    }

    /// The current limit (for metrics and tests).
    pub fn limit(&self) -> f64 {
        self.lock().limit
    }

    /// Calls under way.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_follow_the_limit_and_free_on_drop() {
        let l = Arc::new(Limiter::new(2.0, 8.0));
        let a = l.acquire(Priority::Background).await;
        let _b = l.acquire(Priority::Background).await;
        let l2 = l.clone();
        let third = tokio::spawn(async move { l2.acquire(Priority::Background).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!third.is_finished(), "a third call waits at a limit of 2");
        drop(a);
        let _c = tokio::time::timeout(Duration::from_secs(1), third)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.in_flight(), 2);
    }

    #[tokio::test]
    async fn slow_down_halves_once_per_burst_and_success_grows_it_back() {
        let l = Arc::new(Limiter::new(16.0, 64.0));
        let sent = Instant::now();
        l.slowed(sent, None);
        l.slowed(sent, None);
        assert_eq!(l.limit(), 8.0, "one burst halves once");
        // Idle: successes do not grow the limit.
        l.succeeded();
        l.succeeded();
        assert_eq!(l.limit(), 8.0);
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(l.acquire(Priority::Background).await);
        }
        for _ in 0..8 {
            l.succeeded();
        }
        assert!(l.limit() > 8.9 && l.limit() < 9.1, "{}", l.limit());
        // A call sent after the decrease and refused is news: halve again.
        let late = held.pop().map(|p| p.issued()).unwrap_or_else(Instant::now);
        l.slowed(late, None);
        assert!(l.limit() < 5.0, "{}", l.limit());
    }

    #[tokio::test]
    async fn before_any_refusal_the_limit_doubles_each_round() {
        let l = Arc::new(Limiter::new(4.0, 64.0));
        let held: Vec<Permit> = futures_round(&l, 4).await;
        for _ in 0..4 {
            l.succeeded();
        }
        drop(held);
        assert_eq!(l.limit(), 8.0);
    }

    async fn futures_round(l: &Arc<Limiter>, n: usize) -> Vec<Permit> {
        let mut held = Vec::new();
        for _ in 0..n {
            held.push(l.acquire(Priority::Background).await);
        }
        held
    }

    #[tokio::test]
    async fn a_person_waiting_goes_first() {
        let l = Arc::new(Limiter::new(1.0, 1.0));
        let held = l.acquire(Priority::Background).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let (lb, ob) = (l.clone(), order.clone());
        let background = tokio::spawn(async move {
            let _p = lb.acquire(Priority::Background).await;
            ob.lock().unwrap_or_else(|e| e.into_inner()).push("background");
            tokio::time::sleep(Duration::from_millis(10)).await;
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let (li, oi) = (l.clone(), order.clone());
        let interactive = tokio::spawn(async move {
            let _p = li.acquire(Priority::Interactive).await;
            oi.lock().unwrap_or_else(|e| e.into_inner()).push("interactive");
            tokio::time::sleep(Duration::from_millis(10)).await;
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(held);
        let _ = tokio::join!(background, interactive);
        let order = order.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(order, ["interactive", "background"]);
    }

    #[tokio::test]
    async fn retry_after_pauses_new_calls() {
        let l = Arc::new(Limiter::new(4.0, 4.0));
        l.slowed(Instant::now(), Some(Duration::from_millis(200)));
        let started = Instant::now();
        let _p = l.acquire(Priority::Interactive).await;
        assert!(started.elapsed() >= Duration::from_millis(190));
    }

    #[tokio::test]
    async fn a_spent_budget_pauses_without_halving() {
        let l = Arc::new(Limiter::new(4.0, 4.0));
        l.spent_for(Duration::from_millis(150));
        assert_eq!(l.limit(), 4.0);
        let started = Instant::now();
        let _p = l.acquire(Priority::Background).await;
        assert!(started.elapsed() >= Duration::from_millis(140));
    }
}
