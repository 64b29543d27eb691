//! The Stop of every run the server runs, by the places a person may stop it from:
//! the run's conversation (Slack's Stop button names the thread) and its triggering
//! message (a `:octagonal_sign:` reaction names the message).
//!
//! In memory and per process: a Stop for a run on another replica finds nothing here
//! and does nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::run::stop::StopSignal;
use crate::triggers::{Origin, TriggerEvent};

/// The reaction that stops a run where Slack's agent sessions are unavailable.
pub const STOP_REACTION: &str = "octagonal_sign";

/// Runs by a key that stops them: (run id, its stop).
type ByKey = HashMap<String, Vec<(String, Arc<StopSignal>)>>;

/// Running (or queued) runs by the keys that stop them.
#[derive(Default)]
pub struct Stops {
    runs: Mutex<ByKey>,
}

/// The keys a run of `trigger` may be stopped by.
fn keys_of(trigger: &TriggerEvent) -> Vec<String> {
    let mut keys: Vec<String> = trigger.conversation_key().into_iter().collect();
    if let Origin::Slack {
        channel,
        ts: Some(ts),
        reaction: None,
        ..
    } = &trigger.origin
    {
        keys.push(format!("{channel}:{ts}"));
    }
    keys.dedup();
    keys
}

/// The key and the person, when `trigger` asks to stop runs.
pub fn request(trigger: &TriggerEvent) -> Option<(String, Option<String>)> {
    let Origin::Slack {
        channel,
        ts,
        thread_ts,
        reaction,
        user,
        ..
    } = &trigger.origin
    else {
        return None;
    };
    let key = match (trigger.kind.as_str(), reaction.as_deref()) {
        ("agent_session_stopped", _) => format!("{channel}:{}", thread_ts.as_deref()?),
        ("reaction_added", Some(STOP_REACTION)) => format!("{channel}:{}", ts.as_deref()?),
        _ => return None,
    };
    Some((key, user.clone()))
}

impl Stops {
    fn map(&self) -> std::sync::MutexGuard<'_, ByKey> {
        self.runs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers run `run_id` of `trigger`.
    pub fn add(&self, run_id: &str, trigger: &TriggerEvent, stop: Arc<StopSignal>) {
        let mut map = self.map();
        for key in keys_of(trigger) {
            map.entry(key)
                .or_default()
                .push((run_id.to_string(), stop.clone()));
        }
    }

    /// Forgets run `run_id` (it ended).
    pub fn remove(&self, run_id: &str, trigger: &TriggerEvent) {
        let mut map = self.map();
        for key in keys_of(trigger) {
            if let Some(runs) = map.get_mut(&key) {
                runs.retain(|(id, _)| id != run_id);
                if runs.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }

    /// Stops every run `key` names; returns their ids (none when they all ended).
    pub fn stop(&self, key: &str, user: Option<String>) -> Vec<String> {
        let runs = self.map().get(key).cloned().unwrap_or_default();
        for (_, stop) in &runs {
            stop.stop(user.clone());
        }
        runs.into_iter().map(|(id, _)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    fn slack(kind: &str, ts: &str, thread_ts: Option<&str>, reaction: Option<&str>) -> TriggerEvent {
        let mut t = TriggerEvent::from_cli(serde_json::json!({}));
        t.source = "slack".into();
        t.kind = kind.into();
        t.origin = Origin::Slack {
            team: None,
            channel: "C1".into(),
            channel_type: None,
            user: Some("U0ADA".into()),
            ts: Some(ts.into()),
            thread_ts: thread_ts.map(str::to_string),
            reaction: reaction.map(str::to_string),
        };
        t
    }

    #[test]
    fn a_stop_reaches_the_run_by_its_thread_or_its_message() {
        let stops = Stops::default();
        let service = CancellationToken::new();
        let mention = slack("app_mention", "2.2", Some("1.1"), None);
        let signal = Arc::new(StopSignal::new(&service));
        stops.add("r1", &mention, signal.clone());

        let other = request(&slack("reaction_added", "9.9", None, Some(STOP_REACTION))).unwrap();
        assert!(stops.stop(&other.0, other.1).is_empty());
        assert!(request(&slack("reaction_added", "2.2", None, Some("eyes"))).is_none());
        let on_message = request(&slack("reaction_added", "2.2", None, Some(STOP_REACTION))).unwrap();
        assert_eq!(stops.stop(&on_message.0, on_message.1), ["r1"]);
        assert!(signal.token().is_cancelled());
        let button = request(&slack("agent_session_stopped", "1.1", Some("1.1"), None)).unwrap();
        assert_eq!(button.0, "C1:1.1");
        stops.remove("r1", &mention);
        assert!(
            stops.stop(&button.0, button.1).is_empty(),
            "a stop after the run ended does nothing"
        );
    }
}
