//! What the configured agents need from the environment, and whether it is set: the
//! start-up summary `serve` prints (and `validate --env`), so a missing key is found at
//! start, naming the agents it breaks, not at the first Slack request.

use std::collections::BTreeMap;

use super::settings::Settings;
use super::{AgentConfig, Config, TriggerSpec};

/// One setting some agents need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The environment variable(s), as a person sets them.
    pub setting: String,
    /// What it is for, in a few words.
    pub purpose: &'static str,
    pub set: bool,
    /// The agents that need it.
    pub agents: Vec<String>,
}

/// The summary: agents by trigger kind, then each needed setting.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub by_trigger: BTreeMap<&'static str, Vec<String>>,
    pub needs: Vec<Need>,
}

impl Summary {
    /// The settings that are needed and not set.
    pub fn missing(&self) -> impl Iterator<Item = &Need> {
        self.needs.iter().filter(|n| !n.set)
    }

    /// The summary as printed: one line per trigger kind and per setting.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (kind, agents) in &self.by_trigger {
            out.push(format!("{kind}: {}", agents.join(", ")));
        }
        for n in &self.needs {
            out.push(format!(
                "{} {} ({}; for {})",
                if n.set { "set    " } else { "MISSING" },
                n.setting,
                n.purpose,
                n.agents.join(", ")
            ));
        }
        out
    }
}

/// What `config`'s agents need of `settings`.
pub fn summarize(config: &Config, settings: &Settings, on_postgres: bool) -> Summary {
    let mut summary = Summary::default();
    let mut needs: BTreeMap<String, Need> = BTreeMap::new();
    let mut need = |setting: String, purpose: &'static str, set: bool, agent: &str| {
        let n = needs.entry(setting.clone()).or_insert(Need {
            setting,
            purpose,
            set,
            agents: Vec::new(),
        });
        if !n.agents.iter().any(|a| a == agent) {
            n.agents.push(agent.to_string());
        }
    };
    for agent in config.agents.values() {
        for t in &agent.triggers {
            let list = summary.by_trigger.entry(t.kind_name()).or_default();
            if !list.contains(&agent.name) {
                list.push(agent.name.clone());
            }
        }
        for (setting, purpose, set) in agent_needs(agent, settings, on_postgres) {
            need(setting, purpose, set, &agent.name);
        }
        for (setting, purpose, set) in variable_needs(config, agent, settings) {
            need(setting, purpose, set, &agent.name);
        }
        // Subagents run with the agent's keys.
        for sub in agent.subagents.iter().filter_map(|s| config.subagents.get(s)) {
            for (setting, purpose, set) in model_needs(sub, settings) {
                need(setting, purpose, set, &agent.name);
            }
        }
    }
    summary.needs = needs.into_values().collect();
    summary
}

/// Variables the agent's config files name: its scripts' secrets, and the tokens and
/// secrets of the MCP servers it uses.
fn variable_needs(config: &Config, agent: &AgentConfig, s: &Settings) -> Vec<(String, &'static str, bool)> {
    let set = |name: &str| s.named_var(name).is_some();
    let mut out: Vec<(String, &'static str, bool)> = Vec::new();
    if let Some(egress) = &agent.skills.scripts.egress {
        for spec in egress.secrets.values() {
            out.push((spec.env.clone(), "a secret of its skill scripts", set(&spec.env)));
            let bound = crate::http::secrets::hosts_var(&spec.env);
            let is_set = set(&bound);
            out.push((bound, "the hosts that secret may go to", is_set));
        }
    }
    let tools = agent.tool_names();
    for server in config.mcp.values() {
        let prefix = format!("mcp:{}", server.name);
        let used = tools
            .iter()
            .any(|t| *t == prefix || t.starts_with(&format!("{prefix}/")));
        if !used {
            continue;
        }
        for name in server.named_vars() {
            out.push((name.clone(), "an MCP server's token", set(&name)));
        }
    }
    out
}

fn model_needs(agent: &AgentConfig, s: &Settings) -> Vec<(String, &'static str, bool)> {
    let mut out = Vec::new();
    for m in &agent.models {
        match m.provider.as_str() {
            // An OpenAI-compatible server at another address may take no key.
            "openai" if s.openai_base_url.is_none() => out.push((
                "OPENAI_API_KEY".into(),
                "OpenAI models",
                s.openai_api_key.is_some(),
            )),
            "anthropic" => out.push((
                "ANTHROPIC_API_KEY".into(),
                "Anthropic models",
                s.anthropic_api_key.is_some(),
            )),
            _ => {}
        }
    }
    out
}

fn agent_needs(agent: &AgentConfig, s: &Settings, on_postgres: bool) -> Vec<(String, &'static str, bool)> {
    let mut out = model_needs(agent, s);
    let tools = agent.tool_names();
    let uses = |prefix: &str| tools.iter().any(|t| t.starts_with(prefix));
    let slack_trigger = agent.triggers.iter().any(|t| {
        matches!(
            t,
            TriggerSpec::SlackMention(_)
                | TriggerSpec::SlackMessage(_)
                | TriggerSpec::SlackDm(_)
                | TriggerSpec::SlackReaction(_)
        )
    });
    if slack_trigger {
        out.push((
            "SLACK_SIGNING_SECRET or SLACK_APP_TOKEN".into(),
            "receiving Slack events",
            s.slack_signing_secret.is_some() || s.slack_app_token.is_some(),
        ));
    }
    if slack_trigger || uses("slack_") {
        out.push((
            "SLACK_BOT_TOKEN".into(),
            "replying in and reading Slack",
            s.slack_bot_token.is_some(),
        ));
    }
    if slack_trigger && on_postgres {
        out.push((
            "STEWARD_DATA_KEY".into(),
            "private Slack input on PostgreSQL",
            s.data_key.is_some(),
        ));
    }
    let jira_trigger = agent.triggers.iter().any(|t| matches!(t, TriggerSpec::Jira(_)));
    if jira_trigger {
        out.push((
            "JIRA_WEBHOOK_SECRET".into(),
            "receiving Jira webhooks",
            s.jira_webhook_secret.is_some(),
        ));
    }
    if jira_trigger || uses("jira_") {
        out.push((
            "JIRA_BASE_URL, JIRA_EMAIL and JIRA_API_TOKEN".into(),
            "the Jira API",
            s.jira_base_url.is_some() && s.jira_api_token.is_some(),
        ));
    }
    let notion_trigger = agent.triggers.iter().any(|t| matches!(t, TriggerSpec::Notion(_)));
    if notion_trigger {
        out.push((
            "NOTION_WEBHOOK_TOKEN".into(),
            "receiving Notion webhooks (steward notion-token)",
            s.notion_webhook_token.is_some(),
        ));
    }
    if notion_trigger || uses("notion_") {
        out.push(("NOTION_TOKEN".into(), "the Notion API", s.notion_token.is_some()));
    }
    if uses("github_") {
        out.push(("GITHUB_TOKEN".into(), "the GitHub API", s.github_token.is_some()));
    }
    for t in &agent.triggers {
        if let TriggerSpec::Webhook(w) = t {
            out.push((
                super::settings::hook_token_var(&w.name),
                "its webhook's bearer token",
                s.hook_token(&w.name).is_some(),
            ));
        }
    }
    out
}
