//! Which run of a conversation, in this process, takes the conversation's next
//! messages: the newest run of each (conversation, agent) that reads an inbox, from
//! when it is queued until it ends.
//!
//! In memory and per process: on another replica a message starts a run of its own,
//! queued behind this one (`RunStore::start_within` keeps the order).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::run::inbox::{Handed, Inbox};

type Key = (String, String);

/// The open inboxes by (conversation key, agent name).
#[derive(Default)]
pub struct Handoffs {
    open: Mutex<HashMap<Key, Arc<Inbox>>>,
}

impl Handoffs {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Inbox>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new inbox for a run of `agent` in `conversation`; later messages go to it.
    pub fn open(&self, conversation: &str, agent: &str) -> Arc<Inbox> {
        let inbox = Arc::new(Inbox::default());
        self.map()
            .insert((conversation.to_string(), agent.to_string()), inbox.clone());
        inbox
    }

    /// Whether a run of `agent` in `conversation` may take a message now.
    pub fn has(&self, conversation: &str, agent: &str) -> bool {
        self.map()
            .contains_key(&(conversation.to_string(), agent.to_string()))
    }

    /// Hands `message` to the run; `false` when none takes it (it ended meanwhile).
    pub fn offer(&self, conversation: &str, agent: &str, message: Handed) -> bool {
        let inbox = self
            .map()
            .get(&(conversation.to_string(), agent.to_string()))
            .cloned();
        inbox.is_some_and(|i| i.offer(message))
    }

    /// Closes `inbox` at its run's end, and forgets it unless a newer run's replaced it.
    pub fn close(&self, conversation: &str, agent: &str, inbox: &Arc<Inbox>) {
        inbox.close();
        let mut map = self.map();
        let key = (conversation.to_string(), agent.to_string());
        if map.get(&key).is_some_and(|i| Arc::ptr_eq(i, inbox)) {
            map.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Handed {
        Handed {
            id: None,
            text: text.into(),
        }
    }

    #[test]
    fn a_newer_run_takes_over_and_an_older_close_leaves_it() {
        let h = Handoffs::default();
        assert!(!h.offer("C:1", "a", m("nobody")));
        let first = h.open("C:1", "a");
        assert!(h.offer("C:1", "a", m("one")));
        assert!(!h.offer("C:1", "b", m("other agent")));
        let second = h.open("C:1", "a");
        h.close("C:1", "a", &first);
        assert!(h.has("C:1", "a"), "the newer inbox stays");
        assert!(h.offer("C:1", "a", m("two")));
        assert_eq!(second.take(), vec![m("two")]);
        h.close("C:1", "a", &second);
        assert!(!h.has("C:1", "a"));
    }
}
