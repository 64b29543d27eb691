//! The short-lived token Slack puts in an event a person caused (`action_token`), that
//! lets the bot search what that person can see (`assistant.search.context`). It lives
//! in memory only: it is never serialized (so never stored, sealed or sent to a model),
//! and it prints as `<redacted>`.

/// A person's Slack search grant for one request.
#[derive(Clone, PartialEq, Eq)]
pub struct ActionToken(String);

impl ActionToken {
    pub fn new(token: impl Into<String>) -> ActionToken {
        ActionToken(token.into())
    }

    /// The token, for the one request that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ActionToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActionToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_token() {
        let t = ActionToken::new("10647138185092.960436384805.afce3599");
        assert!(!format!("{t:?}").contains("afce3599"));
        assert_eq!(t.expose(), "10647138185092.960436384805.afce3599");
    }
}
