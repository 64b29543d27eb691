//! What a run's search tools may search, and as whom: the agent's scope (Notion roots,
//! Jira projects, GitHub repositories, Slack channel types), the person's Slack
//! `action_token` when a person asked, and whether the answer lands where others read
//! it (then private Slack hits are linked, never quoted).

use crate::config::search::SearchScope;
use crate::types::ActionToken;

/// One run's search grant, handed to tools in their `ToolCtx`.
#[derive(Debug, Clone, Default)]
pub struct SearchGrant {
    pub scope: SearchScope,
    /// Slack's grant to search what the asking person can see (memory only).
    pub action_token: Option<ActionToken>,
    /// The run answers in a Slack channel, where more people than the asker read.
    pub answers_in_public: bool,
    /// What started the run (`slack app_mention`, `cron`), for plain refusals.
    pub started_by: String,
    /// The Slack user who asked, when a person in Slack started the run.
    pub asker: Option<String>,
    /// The Slack workspace the run acts for: on Enterprise Grid a public channel of
    /// another workspace is as private as a private channel to those who read here.
    pub team: Option<String>,
    /// The Slack conversation the run answers in: when it is shared with another
    /// organisation (Slack Connect), hits from this organisation's other channels are
    /// linked, never quoted.
    pub conversation: Option<String>,
    /// The event log, for `event_outcome` ("why didn't you answer?").
    pub events: Option<EventLogHandle>,
    /// The Jira issue the run answers on (its key, upper case) and the restriction its
    /// answer is posted under: that comments restricted otherwise stay out of
    /// what the run reads, and a comment the run adds there is restricted the same way.
    pub jira_home: Option<(String, crate::types::jira_restriction::Restriction)>,
}

impl SearchGrant {
    /// The restriction an answer is posted under when `key` is the Jira issue the run
    /// answers on; `None` for any other issue (or a run from elsewhere).
    pub fn restriction_on(&self, key: &str) -> Option<&crate::types::jira_restriction::Restriction> {
        self.jira_home
            .as_ref()
            .filter(|(home, _)| home.eq_ignore_ascii_case(key))
            .map(|(_, restriction)| restriction)
    }
}

/// The store's event log, as a search source.
#[derive(Clone)]
pub struct EventLogHandle(pub std::sync::Arc<dyn crate::store::EventLog>);

impl std::fmt::Debug for EventLogHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventLogHandle")
    }
}
