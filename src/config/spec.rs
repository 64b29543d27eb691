//! YAML shapes of `agents/*.yaml` and `subagents/*.yaml`, exactly as written on disk.
//!
//! These types only describe syntax: every struct denies unknown fields so a typo is an
//! error with a line and column. Meaning (prompt files exist, tools exist, model names
//! parse) is checked in [`super::build`], which turns specs into runtime types.

use serde::Deserialize;

use crate::http::secrets::{SECRET_VAR_PREFIX, is_secret_var};
use crate::types::duration::HumanDuration;

/// `digest:` of an agent.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestSpec {
    /// A 5-field crontab line: `0 9 * * 1` is Mondays at 9:00.
    pub schedule: String,
    /// IANA time zone of the schedule (default UTC).
    pub timezone: Option<String>,
    /// The Slack channel id it is posted in (`C…`, `G…`).
    pub channel: String,
}

/// One workflow: `agents/<name>.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// Defaults to the file stem.
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    /// Who to contact about this agent (a Slack user id such as `U0123ABC`, or text),
    /// named when its daily budget is spent.
    pub owner: Option<String>,
    /// A "Get help from a person" button under its Slack answers and failure notices.
    pub escalation: Option<EscalationSpec>,
    /// A digest for its owner, posted on a schedule: runs, 👍/👎, the judge's pass rate
    /// and its trend, the top problems with a "Propose a fix" button. Needs `owner`.
    pub digest: Option<DigestSpec>,
    /// Answer later messages in a Slack thread it answered without a new mention, and
    /// Jira or Notion comments that mention the bot where it answered (default: true
    /// for agents with a `slack_mention`, `jira` or `notion` trigger).
    pub follow_ups: Option<bool>,
    /// How long after its last reply in a thread follow-ups still reach it (default 24h).
    pub follow_up_window: Option<HumanDuration>,
    /// Prompts Slack's agent DM view offers when a person opens it (at most 4); for an
    /// agent with a `slack_dm` trigger.
    #[serde(default)]
    pub suggested_prompts: Vec<SuggestedPrompt>,
    /// Messages of a conversation that arrive this close together while a run of it is
    /// queued become one turn: a queued run starts only once the conversation has been
    /// quiet this long (default 2s; `0s` turns it off).
    pub debounce: Option<HumanDuration>,
    /// Written as single-key maps (`- cron: {...}`), the shape people expect in YAML.
    #[serde(default, with = "serde_yaml::with::singleton_map_recursive")]
    pub triggers: Vec<TriggerSpec>,
    #[serde(default)]
    pub coordinator: CoordinatorSpec,
    /// Rhai script, required with `coordinator: script`.
    pub script: Option<String>,
    /// `provider/model`, e.g. `openai/gpt-4.1`.
    pub model: Option<String>,
    /// Models tried in order when the primary one is unavailable.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Path of the prompt file relative to the root (`prompts/foo.md`).
    pub prompt: Option<String>,
    /// Link shown in outputs instead of the prompt's repository path.
    pub prompt_url: Option<String>,
    #[serde(default)]
    pub tools: Vec<ToolEntry>,
    /// Who may approve the tools marked `approval: required`, and for how long a run
    /// waits.
    #[serde(default)]
    pub approval: ApprovalSpec,
    #[serde(default)]
    pub skills: SkillsSpec,
    #[serde(default)]
    pub subagents: Vec<String>,
    #[serde(default)]
    pub files: FilesSpec,
    #[serde(default)]
    pub context: ContextSpec,
    /// How the provider's prompt cache keeps this agent's prefix.
    #[serde(default)]
    pub cache: CacheSpec,
    /// How hard its model thinks (docs/models.md).
    #[serde(default)]
    pub reasoning: crate::types::ReasoningSpec,
    /// What its search tools may search (docs/search.md).
    #[serde(default)]
    pub search: super::search::SearchSpec,
    #[serde(default)]
    pub limits: LimitsSpec,
    #[serde(default)]
    pub output: OutputSpec,
    #[serde(default)]
    pub evals: EvalsSpec,
    /// Limits of the Rhai sandbox: the script coordinator's and the agent's skills' Rhai
    /// scripts (a subagent's skill scripts run under the defaults).
    #[serde(default)]
    pub sandbox: SandboxSpec,
    /// Values a coordinator script reads as `vars` (channel ids, thresholds, ...).
    #[serde(default)]
    pub vars: serde_yaml::Mapping,
    /// Where a run that read a private conversation may still send things without a
    /// person's approval: Slack channel ids (`C0123ABC`), granted tool names
    /// (`jira_create_issue`), or hosts for `http_fetch` (`status.example.com`).
    #[serde(default)]
    pub private_egress: Vec<String>,
}

/// An agent's tool: its name, or `{name, approval: required}` for one a person must
/// approve at each call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEntry {
    Name(String),
    Detailed(DetailedTool),
}

impl<'de> Deserialize<'de> for ToolEntry {
    /// A name, or a mapping read as [`DetailedTool`] so a mistake in it is named
    /// (`unknown variant 'maybe', expected 'none' or 'required'`) rather than "did not
    /// match any variant".
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_yaml::Value::deserialize(d)? {
            serde_yaml::Value::String(name) => Ok(ToolEntry::Name(name)),
            v @ serde_yaml::Value::Mapping(_) => serde_yaml::from_value(v)
                .map(ToolEntry::Detailed)
                .map_err(|e| D::Error::custom(format!("in a tool entry: {e}"))),
            _ => Err(D::Error::custom(
                "a tool is a name or {name: <tool>, approval: required}",
            )),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DetailedTool {
    pub name: String,
    #[serde(default)]
    pub approval: ApprovalMode,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    #[default]
    None,
    Required,
}

impl ToolEntry {
    pub fn name(&self) -> &str {
        match self {
            ToolEntry::Name(n) => n,
            ToolEntry::Detailed(d) => &d.name,
        }
    }

    pub fn needs_approval(&self) -> bool {
        matches!(self, ToolEntry::Detailed(d) if d.approval == ApprovalMode::Required)
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSpec {
    /// Slack user ids who may decide besides the person who triggered the run; the
    /// request goes to them by DM when the trigger has no Slack thread.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// How long a run waits for a decision (default 24h); no decision counts as Deny.
    pub timeout: Option<HumanDuration>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SandboxSpec {
    pub max_operations: Option<u64>,
    pub max_call_depth: Option<usize>,
    pub max_expr_depth: Option<usize>,
    pub max_string_bytes: Option<usize>,
    pub max_array_len: Option<usize>,
    pub max_map_len: Option<usize>,
}

/// One subagent: `subagents/<name>.yaml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentSpec {
    pub name: Option<String>,
    #[serde(default)]
    pub description: String,
    pub model: Option<String>,
    #[serde(default)]
    pub fallbacks: Vec<String>,
    pub prompt: Option<String>,
    pub prompt_url: Option<String>,
    #[serde(default)]
    pub tools: ToolsSpec,
    /// Subagents this subagent may call (only with a parent `subagent_depth` above 1).
    #[serde(default)]
    pub subagents: Vec<String>,
    #[serde(default)]
    pub skills: SkillsSpec,
    #[serde(default)]
    pub context: ContextSpec,
    #[serde(default)]
    pub cache: CacheSpec,
    /// How hard its model thinks.
    #[serde(default)]
    pub reasoning: crate::types::ReasoningSpec,
    #[serde(default)]
    pub search: super::search::SearchSpec,
    #[serde(default)]
    pub limits: LimitsSpec,
}

/// A subagent's tools: an explicit list, or `inherit` for its parent's.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ToolsSpec {
    List(Vec<String>),
    Keyword(ToolsKeyword),
}

impl Default for ToolsSpec {
    fn default() -> Self {
        ToolsSpec::List(Vec::new())
    }
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ToolsKeyword {
    Inherit,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CoordinatorSpec {
    #[default]
    Llm,
    Script,
}

/// What starts an agent. Matching happens in the trigger router.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TriggerSpec {
    SlackReaction(SlackReactionTrigger),
    SlackMention(SlackChannelsTrigger),
    SlackMessage(SlackChannelsTrigger),
    /// Every direct message to the bot (`slack_dm: {}`).
    SlackDm(SlackDmTrigger),
    Jira(JiraTrigger),
    Notion(NotionTrigger),
    Cron(CronTrigger),
    Webhook(WebhookTrigger),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlackReactionTrigger {
    pub reaction: String,
    /// Empty means any channel the bot is in.
    #[serde(default)]
    pub channels: Vec<String>,
    /// A Rhai expression over the event that must hold too (docs/triggers.md).
    #[serde(default)]
    pub when: Option<String>,
    /// Breaks a tie of specificity between agents (higher wins; default 0).
    #[serde(default)]
    pub priority: i32,
    /// Runs beside the conversation's owner instead of competing to be it.
    #[serde(default)]
    pub also: bool,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlackChannelsTrigger {
    /// Empty means any channel the bot is in.
    #[serde(default)]
    pub channels: Vec<String>,
    /// A Rhai expression over the event that must hold too (docs/triggers.md).
    #[serde(default)]
    pub when: Option<String>,
    /// Breaks a tie of specificity between agents (higher wins; default 0).
    #[serde(default)]
    pub priority: i32,
    /// Runs beside the conversation's owner instead of competing to be it.
    #[serde(default)]
    pub also: bool,
}

/// `slack_dm: {}`: every direct message to the bot.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlackDmTrigger {
    /// A Rhai expression over the event that must hold too (docs/triggers.md).
    #[serde(default)]
    pub when: Option<String>,
    /// Breaks a tie of specificity between agents (higher wins; default 0).
    #[serde(default)]
    pub priority: i32,
    /// Runs beside the conversation's owner instead of competing to be it.
    #[serde(default)]
    pub also: bool,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct JiraTrigger {
    #[serde(default)]
    pub events: Vec<String>,
    #[serde(default)]
    pub projects: Vec<String>,
    /// Fire on `jira:issue_updated` only when one of these fields changed.
    #[serde(default)]
    pub fields: Vec<String>,
    /// A Rhai expression over the event that must hold too (docs/triggers.md).
    #[serde(default)]
    pub when: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NotionTrigger {
    #[serde(default)]
    pub events: Vec<String>,
    pub database: Option<String>,
    pub property: Option<String>,
    pub to: Option<String>,
    /// A Rhai expression over the event that must hold too (docs/triggers.md).
    #[serde(default)]
    pub when: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CronTrigger {
    /// Standard 5-field crontab line: minute hour day month weekday.
    pub schedule: String,
    /// IANA zone the schedule is read in (default UTC).
    pub timezone: Option<String>,
    /// Slots missed while steward was down: `skip` (default) or `run_once`.
    pub missed: Option<MissedPolicy>,
    /// A Rhai expression over the event that must hold too (docs/triggers.md).
    #[serde(default)]
    pub when: Option<String>,
}

/// What to do with cron slots that passed while the service was down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissedPolicy {
    #[default]
    Skip,
    RunOnce,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WebhookTrigger {
    pub name: String,
    /// A Rhai expression over the event that must hold too (docs/triggers.md).
    #[serde(default)]
    pub when: Option<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SkillsSpec {
    #[serde(default)]
    pub required: Vec<String>,
    #[serde(default = "all_allowed")]
    pub allowed: Vec<String>,
    #[serde(default)]
    pub prohibited: Vec<String>,
    /// Token budget of the skill catalog in the system prompt. Over it, the prompt
    /// lists names only and the agent gets `skill_search`.
    #[serde(default = "default_catalog_tokens")]
    pub catalog_tokens: u64,
    /// How skill scripts in Python, shell or Node run (`run_skill_script`).
    #[serde(default)]
    pub scripts: ScriptsSpec,
}

fn all_allowed() -> Vec<String> {
    vec!["*".to_string()]
}

fn default_catalog_tokens() -> u64 {
    2000
}

impl Default for SkillsSpec {
    fn default() -> Self {
        SkillsSpec {
            required: Vec::new(),
            allowed: all_allowed(),
            prohibited: Vec::new(),
            catalog_tokens: default_catalog_tokens(),
            scripts: ScriptsSpec::default(),
        }
    }
}

/// Limits and interpreters of sandboxed skill scripts (`skills.scripts`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ScriptsSpec {
    /// Interpreters a script may use, by program name.
    pub interpreters: Vec<String>,
    pub timeout: HumanDuration,
    pub cpu_seconds: u64,
    pub memory_mb: u64,
    pub max_processes: u64,
    pub max_output_kb: u64,
    pub max_files: u64,
    pub max_written_mb: u64,
    /// Network for Python, shell and Node scripts through steward's egress proxy; none
    /// without it.
    pub egress: Option<ScriptEgressSpec>,
}

/// `skills.scripts.egress`: the hosts scripts may reach and how much.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptEgressSpec {
    /// Host names and `*.domain` patterns.
    pub allow: Vec<String>,
    /// Requests per script run (default 100).
    pub max_requests: Option<u32>,
    /// Megabytes both ways per script run (default 50).
    pub max_mb: Option<u64>,
    /// Secrets by the variable the program sees (holding a placeholder the proxy
    /// replaces with the value on the secret's hosts).
    #[serde(default)]
    pub secrets: std::collections::BTreeMap<String, SecretSpec>,
}

/// `egress.secrets.NAME`: where steward reads the value and where it may go.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// steward's environment variable holding the value.
    pub env: String,
    /// Hosts (as `allow` entries, each within `allow`) the value goes to.
    pub hosts: Vec<String>,
    /// The one header the value may go in; any header without it.
    pub header: Option<String>,
    /// What a header holding just the placeholder becomes (`Bearer {}`); `{}` by default.
    pub format: Option<String>,
}

/// Variables steward sets in a sandbox itself: a secret cannot take their names.
const RESERVED_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LANG",
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING",
    "NODE_PATH",
    "SKILL_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
];

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `host` is a host name or `*.domain`, with an optional `:port`.
fn is_host_pattern(host: &str) -> bool {
    let bare = host.strip_prefix("*.").unwrap_or(host);
    let bare = match bare.rsplit_once(':') {
        Some((h, port)) if port.parse::<u16>().is_ok_and(|p| p > 0) => h,
        _ => bare,
    };
    !bare.is_empty()
        && bare.contains('.')
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
}

/// A host a `hosts` entry stands for, and its port, to test it against `allow`.
fn probe(entry: &str) -> (String, u16) {
    let (host, port) = match entry.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => (h, p.parse().unwrap_or(443)),
        _ => (entry, 443),
    };
    match host.strip_prefix("*.") {
        Some(domain) => (format!("stw-probe.{domain}"), port),
        None => (host.to_string(), port),
    }
}

impl ScriptEgressSpec {
    /// The proxy's rules.
    pub fn rules(&self) -> crate::http::proxy::EgressRules {
        crate::http::proxy::EgressRules {
            allow: self
                .allow
                .iter()
                .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                .collect(),
            listed_in: "this agent's skills.scripts.egress.allow",
            within: None,
            max_requests: self.max_requests.unwrap_or(100),
            max_bytes: self.max_mb.unwrap_or(50).saturating_mul(1024 * 1024),
            secrets: self
                .secrets
                .iter()
                .map(|(name, spec)| crate::http::secrets::SecretRule {
                    name: name.clone(),
                    env: spec.env.clone(),
                    hosts: spec
                        .hosts
                        .iter()
                        .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
                        .collect(),
                    header: spec.header.as_ref().map(|h| h.trim().to_ascii_lowercase()),
                    format: spec.format.clone().unwrap_or_else(|| "{}".into()),
                })
                .collect(),
        }
    }

    /// What is wrong with it, as (key, value, message).
    pub fn problems(&self) -> Vec<(&'static str, String, String)> {
        let mut problems = Vec::new();
        for host in &self.allow {
            if !is_host_pattern(host) {
                problems.push((
                    "allow",
                    host.clone(),
                    format!("egress host '{host}' is not a host name or a *.domain pattern, with an optional :port (no scheme, path or bare *)"),
                ));
            }
        }
        let allow = self.rules().allow;
        for (name, spec) in &self.secrets {
            let at = |m: String| ("secrets", name.clone(), format!("secret {name}: {m}"));
            if !is_var_name(name) || RESERVED_VARS.contains(&name.to_ascii_uppercase().as_str()) {
                problems.push(at(format!(
                    "'{name}' must be a variable name (letters, digits, _) other than those steward sets ({})",
                    RESERVED_VARS.join(", ")
                )));
            }
            if !is_var_name(&spec.env) {
                problems.push(at(format!(
                    "env '{}' is not an environment variable name: the value is read from steward's environment, never written here",
                    spec.env
                )));
            } else if !is_secret_var(&spec.env) {
                problems.push(at(format!(
                    "env '{}' must be named {SECRET_VAR_PREFIX}<NAME>: a secret for sandboxed programs has a variable of its own, so steward's own keys and tokens can never be handed to them",
                    spec.env
                )));
            }
            if spec.hosts.is_empty() {
                problems.push(at("hosts is empty: name the hosts the value may go to".into()));
            }
            for host in &spec.hosts {
                let lower = host.trim().to_ascii_lowercase();
                if !is_host_pattern(&lower) {
                    problems.push(at(format!(
                        "host '{host}' is not a host name or a *.domain pattern"
                    )));
                    continue;
                }
                let (probe, port) = probe(&lower);
                if !crate::http::secrets::host_listed(&allow, &probe, port) {
                    problems.push(at(format!(
                        "host '{host}' is not in allow: a secret goes only to allowed hosts"
                    )));
                }
            }
            if let Some(header) = &spec.header
                && http::HeaderName::from_bytes(header.trim().as_bytes()).is_err()
            {
                problems.push(at(format!("header '{header}' is not a header name")));
            }
            if let Some(format) = &spec.format
                && format.matches("{}").count() != 1
            {
                problems.push(at(format!(
                    "format '{format}' must hold {{}} once, where the value goes (such as 'Bearer {{}}')"
                )));
            }
        }
        problems
    }
}

impl Default for ScriptsSpec {
    fn default() -> Self {
        ScriptsSpec {
            interpreters: ["python3", "bash", "sh", "node"].map(String::from).to_vec(),
            timeout: HumanDuration(std::time::Duration::from_secs(60)),
            cpu_seconds: 60,
            memory_mb: 1024,
            max_processes: 64,
            max_output_kb: 1024,
            max_files: 100,
            max_written_mb: 64,
            egress: None,
        }
    }
}

impl ScriptsSpec {
    /// The sandbox limits these settings describe.
    pub fn limits(&self) -> crate::sandbox::process::ProcessLimits {
        crate::sandbox::process::ProcessLimits {
            wall: self.timeout.0,
            cpu_secs: self.cpu_seconds,
            memory_bytes: self.memory_mb.saturating_mul(1024 * 1024),
            max_processes: self.max_processes,
            max_output_bytes: usize::try_from(self.max_output_kb.saturating_mul(1024)).unwrap_or(usize::MAX),
            max_files: usize::try_from(self.max_files).unwrap_or(usize::MAX),
            max_written_bytes: self.max_written_mb.saturating_mul(1024 * 1024),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FilesSpec {
    pub preload_bytes: Option<u64>,
}

/// `cache: {ttl: 5m | 1h, prompt_cache_retention: in_memory | 24h}`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    /// How long Anthropic keeps a cached prefix: `5m` (default) or `1h`, for agents
    /// whose tools or approvals may idle longer than five minutes between turns.
    pub ttl: Option<String>,
    /// OpenAI's `prompt_cache_retention`: `in_memory` or `24h` (for scheduled agents
    /// that repeat a prefix every hour).
    pub prompt_cache_retention: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ContextSpec {
    pub window_tokens: Option<u64>,
    pub compact_at: Option<f64>,
    pub file_threshold_tokens: Option<u64>,
    pub file_preview_tokens: Option<u64>,
    /// Upper bound on the model's output per turn.
    pub max_output_tokens: Option<u32>,
    /// Start with the conversation the trigger is in (a Slack thread, a DM); default true.
    pub thread: Option<bool>,
    /// Compact before the conversation reaches the size above which the model bills
    /// input at a higher rate (its `long_context` price tier); default true.
    pub stay_under_price_tier: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    pub max_tool_calls: Option<u32>,
    pub max_turns: Option<u32>,
    pub timeout: Option<HumanDuration>,
    /// Longest one tool call may take.
    pub tool_timeout: Option<HumanDuration>,
    pub max_cost_usd: Option<f64>,
    /// How deep subagent calls may nest (1: subagents cannot call subagents).
    pub subagent_depth: Option<u32>,
    /// Subagent runs at once per parent run.
    pub subagent_concurrency: Option<u32>,
    /// Runs of this agent at once across all replicas (further events wait queued).
    pub concurrency: Option<u32>,
    /// Slack-triggered runs one person may start per minute (default 10).
    pub per_user_per_minute: Option<u32>,
    /// Spend per UTC day; once reached, new runs are refused with a reply.
    pub daily_cost_usd: Option<f64>,
}

/// A prompt Slack's agent view suggests: a short `title` and the `message` sent.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SuggestedPrompt {
    pub title: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    pub reply: Option<bool>,
    pub prompt_link: Option<bool>,
    /// `reaction | native | both | none` (default native for LLM agents).
    pub status: Option<super::StatusMode>,
    /// Stream Slack replies while the run works (default true for LLM agents).
    pub stream: Option<bool>,
    /// 👍 / 👎 buttons under Slack replies; a click is a human score on the run.
    pub feedback: Option<bool>,
}

/// `escalation: {to: [U0123ABC, S0456DEF], channel: C0789GHI, label: "Ask the team"}`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EscalationSpec {
    /// The people (`U…`/`W…`) and user groups (`S…`) who are called, and may resolve.
    pub to: Vec<String>,
    /// Post the call for help here, with a link to the thread (default: in the thread).
    pub channel: Option<String>,
    /// The button's text (default "Get help from a person").
    pub label: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EvalsSpec {
    /// Criteria a judge scores after production runs.
    #[serde(default)]
    pub post_run: Vec<String>,
    /// Share of runs judged, 0 to 1 (default 1: every run).
    pub sample: Option<f64>,
    /// The judge's model (default: the `judge` subagent's, else the agent's).
    pub model: Option<String>,
}
