//! Display names for the people who triggered runs. Runs store the source's id (a Slack
//! user id); the inspector shows a name, looked up once with Slack's `users.info` and
//! kept for the life of the process.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::integrations::slack::SlackClient;

/// Most names kept; past this the cache starts over (ids are few in practice).
const MAX_CACHED: usize = 10_000;

/// Resolves actor ids to display names.
#[derive(Default)]
pub struct People {
    slack: Option<SlackClient>,
    names: Mutex<HashMap<String, String>>,
}

impl People {
    pub fn new(slack: Option<SlackClient>) -> People {
        People {
            slack,
            names: Mutex::default(),
        }
    }

    /// The name to show for `actor`: a Slack user id becomes the person's display
    /// name when Slack says; anything else (or a failed lookup) is shown as stored.
    pub async fn name(&self, actor: &str) -> String {
        if let Some(name) = self.names.lock().unwrap_or_else(|e| e.into_inner()).get(actor) {
            return name.clone();
        }
        let Some(slack) = self.slack.as_ref().filter(|_| is_slack_user(actor)) else {
            return actor.to_string();
        };
        let name = match slack.get("users.info", &[("user", actor.to_string())]).await {
            Ok(body) => {
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
            Err(e) => {
                tracing::debug!(actor, error = %e, "cannot look up a Slack user's name");
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
