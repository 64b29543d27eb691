//! What every trigger rule shares: its kind's name, its `when:` filter, and, for Slack
//! rules (conversations, where one agent answers), its place in the precedence order.

use super::TriggerSpec;

/// Whether `value` passes a rule's list (`channels`, `events`, `projects`, ...): an
/// empty list matches anything.
pub fn in_list(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v == value)
}

/// Where a Slack rule stands when several agents' rules match one message: the most
/// specific wins, then the higher `priority:`; `also: true` rules run beside the winner
/// instead of competing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precedence {
    /// 2 for naming channels (or being a direct-message rule, which names its kind of
    /// conversation), plus 1 for a `when:` filter.
    pub specificity: u8,
    pub priority: i32,
    pub also: bool,
}

impl Precedence {
    /// The ordering key: specificity first, then priority.
    pub fn rank(&self) -> (u8, i32) {
        (self.specificity, self.priority)
    }
}

impl TriggerSpec {
    /// The rule's key in YAML (`slack_mention`, `jira`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            TriggerSpec::SlackReaction(_) => "slack_reaction",
            TriggerSpec::SlackMention(_) => "slack_mention",
            TriggerSpec::SlackMessage(_) => "slack_message",
            TriggerSpec::SlackDm(_) => "slack_dm",
            TriggerSpec::Jira(_) => "jira",
            TriggerSpec::Notion(_) => "notion",
            TriggerSpec::Cron(_) => "cron",
            TriggerSpec::Webhook(_) => "webhook",
        }
    }

    /// The rule's `when:` expression, if it has one.
    pub fn when(&self) -> Option<&str> {
        match self {
            TriggerSpec::SlackReaction(r) => r.when.as_deref(),
            TriggerSpec::SlackMention(r) | TriggerSpec::SlackMessage(r) => r.when.as_deref(),
            TriggerSpec::SlackDm(r) => r.when.as_deref(),
            TriggerSpec::Jira(r) => r.when.as_deref(),
            TriggerSpec::Notion(r) => r.when.as_deref(),
            TriggerSpec::Cron(r) => r.when.as_deref(),
            TriggerSpec::Webhook(r) => r.when.as_deref(),
        }
    }

    /// Its precedence for a Slack rule; `None` for the sources that fan out (Jira,
    /// Notion, webhooks, cron: not conversations, so every matching agent runs).
    pub fn precedence(&self) -> Option<Precedence> {
        let (names_place, priority, also) = match self {
            TriggerSpec::SlackReaction(r) => (!r.channels.is_empty(), r.priority, r.also),
            TriggerSpec::SlackMention(r) | TriggerSpec::SlackMessage(r) => {
                (!r.channels.is_empty(), r.priority, r.also)
            }
            TriggerSpec::SlackDm(r) => (true, r.priority, r.also),
            _ => return None,
        };
        Some(Precedence {
            specificity: 2 * u8::from(names_place) + u8::from(self.when().is_some()),
            priority,
            also,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(yaml: &str) -> TriggerSpec {
        // As configs are read: a single-key map, not a YAML tag.
        let d = serde_yaml::Deserializer::from_str(yaml);
        serde_yaml::with::singleton_map_recursive::deserialize(d).unwrap()
    }

    #[test]
    fn naming_a_channel_outranks_a_filter_which_outranks_nothing() {
        let bare = rule("slack_mention: {}").precedence().unwrap();
        let filtered = rule("slack_mention: {when: 'text != \"\"'}")
            .precedence()
            .unwrap();
        let channel = rule("slack_mention: {channels: [C1]}").precedence().unwrap();
        let both = rule("slack_mention: {channels: [C1], when: 'true', priority: -1}")
            .precedence()
            .unwrap();
        assert!(bare.rank() < filtered.rank());
        assert!(filtered.rank() < channel.rank());
        assert!(channel.rank() < both.rank(), "specificity before priority");
        assert!(rule("slack_dm: {also: true}").precedence().unwrap().also);
        assert_eq!(rule("webhook: {name: x}").precedence(), None);
    }
}
