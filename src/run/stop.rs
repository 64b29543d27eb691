//! A person stopping a run: Slack's Stop button on the agent session
//! (`agent_session_stopped`) or a `:octagonal_sign:` reaction on the triggering
//! message. The run's cancellation token fires (the model call in flight is dropped,
//! no further tool starts) and the run ends `stopped_by_user`, naming who stopped it.

use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

/// The Stop of one run.
#[derive(Debug)]
pub struct StopSignal {
    token: CancellationToken,
    by: Mutex<Option<String>>,
}

impl StopSignal {
    /// A stop for a run whose cancellation is a child of `parent` (the service's).
    pub fn new(parent: &CancellationToken) -> StopSignal {
        StopSignal {
            token: parent.child_token(),
            by: Mutex::new(None),
        }
    }

    /// The token the run runs under.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Stops the run on behalf of `user`; the first stop names who.
    pub fn stop(&self, user: Option<String>) {
        let mut by = self.by.lock().unwrap_or_else(|e| e.into_inner());
        if by.is_none() {
            *by = Some(user.unwrap_or_else(|| "someone".into()));
        }
        drop(by);
        self.token.cancel();
    }

    /// Who stopped the run, once someone has.
    pub fn stopped_by(&self) -> Option<String> {
        self.by.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_stop_names_who_and_cancels() {
        let service = CancellationToken::new();
        let s = StopSignal::new(&service);
        assert_eq!(s.stopped_by(), None);
        s.stop(Some("U0ADA".into()));
        s.stop(Some("U0BO".into()));
        assert!(s.token().is_cancelled());
        assert!(!service.is_cancelled());
        assert_eq!(s.stopped_by().as_deref(), Some("U0ADA"));
    }
}
