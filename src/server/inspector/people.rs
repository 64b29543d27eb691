//! Display names for the people who triggered runs. Runs store the source's id (a Slack
//! user id); the inspector shows a name, looked up once with Slack's `users.info` and
//! kept for the life of the process. A page's names are looked up together, a few at
//! a time, each within a deadline; a failed lookup is not retried for a while, so a
//! rate-limited or unreachable Slack costs a page one short wait, then none.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::integrations::slack::SlackClient;

/// Most names kept; past this the cache starts over (ids are few in practice).
const MAX_CACHED: usize = 10_000;
/// Longest one `users.info` call may take before the id is shown instead.
const LOOKUP_WAIT: Duration = Duration::from_secs(2);
/// How long a failed lookup shows the id before Slack is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(300);
/// Lookups in flight at once for one page (Slack's users.info allows ~100 a minute).
const PARALLEL: usize = 8;

/// Resolves actor ids to display names.
#[derive(Default)]
pub struct People {
    slack: Option<SlackClient>,
    names: Mutex<HashMap<String, String>>,
    failed: Mutex<HashMap<String, Instant>>,
}

impl People {
    pub fn new(slack: Option<SlackClient>) -> People {
        People {
            slack,
            ..People::default()
        }
    }

    /// Names for every actor in `actors`, each distinct id looked up once, at most
    /// [`PARALLEL`] at a time.
    pub async fn names<'a>(&self, actors: impl IntoIterator<Item = &'a str>) -> HashMap<String, String> {
        // Owned ids: a future borrowing each `&str` trips the Send check of the route.
        let distinct: BTreeSet<String> = actors.into_iter().map(str::to_string).collect();
        futures_util::stream::iter(distinct)
            .map(|actor| async move {
                let name = self.name(&actor).await;
                (actor, name)
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await
    }

    /// The name to show for `actor`: a Slack user id becomes the person's display
    /// name when Slack says; anything else (or a failed lookup) is shown as stored.
    async fn name(&self, actor: &str) -> String {
        if let Some(name) = self.names.lock().unwrap_or_else(|e| e.into_inner()).get(actor) {
            return name.clone();
        }
        let Some(slack) = self.slack.as_ref().filter(|_| is_slack_user(actor)) else {
            return actor.to_string();
        };
        if self
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(actor)
            .is_some_and(|at| at.elapsed() < RETRY_AFTER)
        {
            return actor.to_string();
        }
        let query = [("user", actor.to_string())];
        let name = match tokio::time::timeout(LOOKUP_WAIT, slack.get("users.info", &query)).await {
            Ok(Ok(body)) => {
                let user = &body["user"];
                [
                    &user["profile"]["display_name"],
                    &user["profile"]["real_name"],
                    &user["real_name"],
                    &user["name"],
                ]
                .into_iter()
                .filter_map(|v| v.as_str())
                .find(|s| !s.trim().is_empty())
                .unwrap_or(actor)
                .to_string()
            }
            failed => {
                match failed {
                    Ok(Err(e)) => tracing::debug!(actor, error = %e, "cannot look up a Slack user's name"),
                    _ => tracing::debug!(actor, "a Slack user's name took too long to look up"),
                }
                let mut failures = self.failed.lock().unwrap_or_else(|e| e.into_inner());
                if failures.len() >= MAX_CACHED {
                    failures.clear();
                }
                failures.insert(actor.to_string(), Instant::now());
                return actor.to_string();
            }
        };
        let mut names = self.names.lock().unwrap_or_else(|e| e.into_inner());
        if names.len() >= MAX_CACHED {
            names.clear();
        }
        names.insert(actor.to_string(), name.clone());
        name
    }
}

/// Slack user ids: `U…` or `W…` (Enterprise Grid), upper-case letters and digits.
fn is_slack_user(id: &str) -> bool {
    (id.starts_with('U') || id.starts_with('W'))
        && id.len() >= 5
        && id.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::extract::RawQuery;
    use serde_json::json;

    use super::*;

    /// A fake Slack `users.info`: U1 has a name, U2 is rate limited (Slack's 200 with
    /// `ok: false`), U3 answers after 5 s. Counts calls per user.
    async fn fake_slack(calls: Arc<Mutex<HashMap<String, usize>>>, started: Arc<AtomicUsize>) -> String {
        let app = axum::Router::new().fallback(move |RawQuery(q): RawQuery| {
            let calls = calls.clone();
            let started = started.clone();
            async move {
                let q = q.unwrap_or_default();
                let user = q
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("user="))
                    .unwrap_or_default()
                    .to_string();
                started.fetch_add(1, Ordering::SeqCst);
                *calls.lock().unwrap().entry(user.clone()).or_default() += 1;
                match user.as_str() {
                    "U0000001" => axum::Json(
                        json!({"ok": true, "user": {"name": "ada", "profile": {"display_name": "Ada L."}}}),
                    ),
                    "U0000003" => {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        axum::Json(json!({"ok": true, "user": {"name": "late"}}))
                    }
                    _ => axum::Json(json!({"ok": false, "error": "ratelimited"})),
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    #[tokio::test]
    async fn a_page_looks_names_up_together_and_failures_wait_before_a_retry() {
        let calls: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let started = Arc::new(AtomicUsize::new(0));
        let url = fake_slack(calls.clone(), started.clone()).await;
        let slack = SlackClient::new(crate::http::client().unwrap(), &url, "xoxb-test");
        let people = People::new(Some(slack));
        let actors = ["U0000001", "U0000002", "U0000003", "U0000001", "webhook:intake"];
        let began = Instant::now();
        let names = people.names(actors).await;
        let took = began.elapsed();
        assert_eq!(names["U0000001"], "Ada L.");
        assert_eq!(names["U0000002"], "U0000002", "a failed lookup shows the id");
        assert_eq!(names["U0000003"], "U0000003", "a slow lookup shows the id");
        assert_eq!(
            names["webhook:intake"], "webhook:intake",
            "not a Slack id: not looked up"
        );
        // Together: the 2 s deadline once, not per person.
        assert!(took < Duration::from_secs(4), "{took:?}");
        assert_eq!(started.load(Ordering::SeqCst), 3, "each distinct Slack id once");
        // The next page: the name is cached and the failures are not asked again yet.
        let again = people.names(actors).await;
        assert_eq!(again, names);
        assert_eq!(started.load(Ordering::SeqCst), 3, "{:?}", calls.lock().unwrap());
    }
}
