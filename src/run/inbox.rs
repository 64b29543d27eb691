//! Messages handed to a run of a conversation while it waits for its turn or works:
//! the LLM loop reads them before its next model call instead of a second run starting.
//!
//! Held in memory only. Slack stays the record: a run that is retried re-reads the
//! conversation, where every handed message also is.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::triggers::{Sources, TriggerEvent};

/// One message of the conversation, as the model reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Handed {
    /// The message's id in its source (a Slack `ts`), to skip what the run already read.
    pub id: Option<String>,
    /// `@Author: text`, entities resolved.
    pub text: String,
}

impl Handed {
    /// The message of `trigger`, its author and mentions named as a reader sees them.
    pub async fn from_trigger(sources: &Sources, trigger: &TriggerEvent) -> Handed {
        let text = sources.readable_text(trigger).await.unwrap_or_default();
        let author = match trigger.actor() {
            Some(a) if a.starts_with('U') || a.starts_with('W') => {
                sources.readable(&trigger.origin, &format!("<@{a}>")).await
            }
            Some(a) => a,
            None => "someone".to_string(),
        };
        let id = match &trigger.origin {
            crate::triggers::Origin::Slack { ts, .. } => ts.clone(),
            _ => None,
        };
        Handed {
            id,
            text: format!("{author}: {text}"),
        }
    }
}

#[derive(Debug)]
struct State {
    open: bool,
    pending: Vec<Handed>,
    /// Ids the run has read already (from the conversation itself).
    seen: HashSet<String>,
    last: Instant,
}

/// The mailbox of one run. Open until the run takes its last look; a message offered
/// after that is refused, and its sender starts a run of its own.
#[derive(Debug)]
pub struct Inbox {
    state: Mutex<State>,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox {
            state: Mutex::new(State {
                open: true,
                pending: Vec::new(),
                seen: HashSet::new(),
                last: Instant::now(),
            }),
        }
    }
}

impl Inbox {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere mid-push; the data is still whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `message` to the run; `false` when the run no longer reads its inbox.
    pub fn offer(&self, message: Handed) -> bool {
        let mut s = self.state();
        if !s.open {
            return false;
        }
        s.pending.push(message);
        s.last = Instant::now();
        true
    }

    /// Marks message ids the run read from the conversation itself: offered again,
    /// they are not handed twice.
    pub fn seen<I: IntoIterator<Item = String>>(&self, ids: I) {
        self.state().seen.extend(ids);
    }

    /// The messages handed since the last look, oldest first, less those already read.
    pub fn take(&self) -> Vec<Handed> {
        let mut s = self.state();
        let pending = std::mem::take(&mut s.pending);
        let State { seen, .. } = &mut *s;
        pending
            .into_iter()
            .filter(|m| m.id.as_ref().is_none_or(|id| seen.insert(id.clone())))
            .collect()
    }

    /// The run's last look: what is pending, and closed when nothing is, in one step, so
    /// no message falls between the run's answer and its end.
    pub fn take_or_close(&self) -> Vec<Handed> {
        let taken = self.take();
        if taken.is_empty() {
            self.close();
        }
        taken
    }

    /// Refuses every later offer.
    pub fn close(&self) {
        self.state().open = false;
    }

    /// How long to wait for the conversation to go quiet: `debounce` after the newest
    /// message handed (or the inbox's creation), zero once that has passed.
    pub fn quiet_in(&self, debounce: Duration) -> Duration {
        debounce.saturating_sub(self.state().last.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: &str) -> Handed {
        Handed {
            id: Some(id.into()),
            text: format!("@ana: {id}"),
        }
    }

    #[test]
    fn hands_messages_once_in_order_and_refuses_after_the_last_look() {
        let inbox = Inbox::default();
        assert!(inbox.offer(m("1")));
        assert!(inbox.offer(m("2")));
        inbox.seen(["1".to_string()]);
        assert_eq!(inbox.take(), vec![m("2")]);
        assert!(inbox.take().is_empty());
        assert!(inbox.offer(m("2")), "still open");
        assert!(inbox.take_or_close().is_empty(), "2 was handed already");
        assert!(!inbox.offer(m("3")), "closed after an empty last look");
    }

    #[test]
    fn a_last_look_with_messages_keeps_the_inbox_open() {
        let inbox = Inbox::default();
        inbox.offer(m("1"));
        assert_eq!(inbox.take_or_close(), vec![m("1")]);
        assert!(inbox.offer(m("2")));
    }

    #[test]
    fn quiet_in_counts_from_the_newest_message() {
        let inbox = Inbox::default();
        assert!(inbox.quiet_in(Duration::from_secs(60)) > Duration::from_secs(59));
        assert_eq!(inbox.quiet_in(Duration::ZERO), Duration::ZERO);
    }
}
