//! Provider limits that adapt: one limiter per provider and model in the process,
//! shared by every run, subagent and judge. Concurrency doubles every round of calls
//! until the provider first refuses one (slow start), then grows by a thirty-second of
//! itself (at least one call) per round of successes while it is in use (additive
//! increase) and falls to [`DECREASE`] of itself when the provider says "slow down"
//! (429), once per burst: a refusal of a call sent before the last decrease
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

/// Concurrent calls a model starts with, before it has answered anything. A provider
/// tier of a few thousand requests a minute serves hundreds of concurrent calls of a
/// few seconds each; starting lower only delays a burst, starting higher only costs one
/// round of refusals.
pub const INITIAL: f64 = 128.0;
/// What a "slow down" leaves of the limit. Not a half (TCP Reno's): the limit then
/// saws between 70% and 100% of what the provider allows rather than 50% and 100%
/// (CUBIC's factor, for the same reason).
pub const DECREASE: f64 = 0.7;
/// After the first "slow down", a round of successes grows the limit by this share of
/// itself (at least one call), so a limit of hundreds recovers in a few rounds.
const GROWTH: f64 = 1.0 / 32.0;
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
    /// Calls out when the current burst's first refusal came back, and the refusals
    /// of that burst so far: what the provider served of it is the difference.
    burst_out: f64,
    burst_refused: f64,
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
                burst_out: 0.0,
                burst_refused: 0.0,
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

    /// A call succeeded: a round's growth per limit's worth of successes (one per
    /// success in slow start), while calls use at least half the limit (an idle limit does not
    /// grow past twice what is used).
    pub fn succeeded(&self) {
        let mut s = self.lock();
        if (s.in_flight as f64) + 1.0 >= s.limit / 2.0 {
            // Per success: one (slow start doubles each round), or a round's growth
            // spread over the round's `limit` successes.
            let step = if s.slow_start() {
                1.0
            } else {
                (s.limit * GROWTH).max(1.0) / s.limit
            };
            s.limit = (s.limit + step).min(self.max);
        }
        drop(s);
        self.changed.notify_waiters();
    }

    /// The provider refused a call let through at `issued` ("slow down"): lower the
    /// limit to [`DECREASE`] of itself, unless the call went out before the last
    /// decrease (that burst is counted already: the limit then only comes down to the
    /// calls of the burst the provider did not refuse), and pause new calls for its
    /// `Retry-After`.
    pub fn slowed(&self, issued: Instant, retry_after: Option<Duration>) {
        let mut s = self.lock();
        let now = Instant::now();
        if s.last_decrease.is_none_or(|t| issued >= t) {
            s.limit = (s.limit * DECREASE).max(1.0);
            s.last_decrease = Some(now);
            // This call's slot is free already: it was out too.
            s.burst_out = s.in_flight as f64 + 1.0;
            s.burst_refused = 1.0;
        } else {
            // Another refusal of a burst already counted: the limit need not fall
            // again, but never stays above what the provider served of the burst (a
            // start far above its capacity comes down in one burst, not in many).
            s.burst_refused += 1.0;
            s.limit = s.limit.min(s.burst_out - s.burst_refused).max(1.0);
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
    async fn slow_down_lowers_once_per_burst_and_success_grows_it_back() {
        let l = Arc::new(Limiter::new(40.0, 256.0));
        let mut out = futures_round(&l, 40).await;
        let sent = out[0].issued();
        for _ in 0..2 {
            out.pop();
            l.slowed(sent, None);
        }
        drop(out);
        assert_eq!(l.limit(), 28.0, "one burst lowers once, to 70%");
        // Idle: successes do not grow the limit.
        l.succeeded();
        l.succeeded();
        assert_eq!(l.limit(), 28.0);
        let mut held = Vec::new();
        for _ in 0..28 {
            held.push(l.acquire(Priority::Background).await);
        }
        // A round of successes adds one (28 / 32 is less than one call).
        for _ in 0..28 {
            l.succeeded();
        }
        assert!(l.limit() > 28.9 && l.limit() < 29.1, "{}", l.limit());
        // A call sent after the decrease and refused is news: lower again.
        let late = held.pop().map(|p| p.issued()).unwrap_or_else(Instant::now);
        l.slowed(late, None);
        assert!(l.limit() < 20.5, "{}", l.limit());
    }

    #[tokio::test]
    async fn a_start_far_above_capacity_comes_down_in_one_burst() {
        // 128 calls out, the provider serves 20: 108 refusals of one burst leave 20.
        let l = Arc::new(Limiter::new(128.0, 1024.0));
        let mut held = futures_round(&l, 128).await;
        let issued = held[0].issued();
        for _ in 0..108 {
            held.pop();
            l.slowed(issued, None);
        }
        assert_eq!(l.limit(), 20.0);
    }

    #[tokio::test]
    async fn a_large_limit_grows_by_a_share_of_itself() {
        let l = Arc::new(Limiter::new(320.0, 1024.0));
        l.slowed(Instant::now(), None);
        let start = l.limit();
        assert_eq!(start, 224.0);
        let _held: Vec<Permit> = futures_round(&l, 224).await;
        for _ in 0..224 {
            l.succeeded();
        }
        // One round: about 224 / 32 = 7 more calls.
        assert!(l.limit() > 230.0 && l.limit() < 232.0, "{}", l.limit());
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
