//! Agent configuration: YAML specs on disk ([`spec`]) validated into runtime types
//! ([`AgentConfig`]). Loading collects every problem in the tree instead of stopping at
//! the first, so `steward validate` can print them all.

pub mod diagnostic;
pub mod lifecycle;
pub mod mcp;
pub mod needs;
pub mod overlap;
pub mod parse;
pub mod prices;
pub mod reasoning;
pub mod schedule;
pub mod search;
pub mod settings;
pub mod spec;
pub mod trigger;
pub mod within;
pub mod yaml;

mod build;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::types::ModelRef;

pub use diagnostic::{Diagnostic, Diagnostics};
pub use settings::Settings;
pub use spec::{SkillsSpec, TriggerSpec};

/// Names of the tools every agent gets without listing them (the virtual-file tools).
/// How long a conversation must be quiet before a run queued in it starts (`debounce`).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(2);

pub const BASE_TOOLS: &[&str] = &[
    "extract_file",
    "file_read",
    "file_regex",
    "load_file",
    "peek_file",
];

/// What configs may refer to.
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub tools: BTreeSet<String>,
    pub skills: BTreeSet<String>,
}

/// The validated config tree.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub root: PathBuf,
    pub agents: BTreeMap<String, Arc<AgentConfig>>,
    pub subagents: BTreeMap<String, Arc<AgentConfig>>,
    /// The shipped prices with the root's `prices.yaml` over them.
    pub prices: Arc<prices::Prices>,
    /// MCP servers (`mcp/<name>.yaml`), by name.
    pub mcp: BTreeMap<String, mcp::McpServer>,
    /// Compiles and runs the agents' `when:` trigger filters.
    pub filters: Arc<crate::sandbox::filter::FilterEngine>,
}

impl Config {
    /// Loads `agents/` and `subagents/` under `root`, checking each against the tools
    /// and skills that exist. Returns every problem found if there is at least one.
    pub fn load(root: &Path, known: &Known) -> Result<Config, Diagnostics> {
        build::load_tree(root, known)
    }

    /// Looks up an agent by name with an error that lists the ones that exist.
    pub fn agent(&self, name: &str) -> Result<Arc<AgentConfig>, String> {
        self.agents.get(name).cloned().ok_or_else(|| {
            let known: Vec<&str> = self.agents.keys().map(String::as_str).collect();
            format!(
                "unknown agent '{name}'{}, expected one of: {}",
                parse::did_you_mean(name, known.iter().copied()),
                if known.is_empty() {
                    "(none configured)".to_string()
                } else {
                    known.join(", ")
                }
            )
        })
    }
}

/// Whether an LLM or a script drives the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coordinator {
    Llm,
    /// A Rhai script: its path relative to the root and its source.
    Script {
        path: PathBuf,
        source: String,
    },
}

impl Coordinator {
    /// `llm` or `script`, as configs name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Coordinator::Llm => "llm",
            Coordinator::Script { .. } => "script",
        }
    }
}

/// Which tools a run may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSelection {
    List(Vec<String>),
    /// A subagent using its parent's tools.
    Inherit,
}

/// The prompt that drives a run, loaded at config time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// Where the prompt came from, relative to the root (`prompts/foo.md`).
    pub path: String,
    pub text: String,
    /// Link shown in outputs; defaults to the repository path.
    pub url: Option<String>,
}

/// `evals:` of an agent: criteria a judge scores after its production runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PostRunEvals {
    pub criteria: Vec<String>,
    /// Share of runs judged (0 to 1).
    pub sample: f64,
    /// Overrides the judge's model.
    pub model: Option<ModelRef>,
}

impl PostRunEvals {
    /// Whether a run is judged, given a uniform draw in [0, 1).
    pub fn picks(&self, draw: f64) -> bool {
        !self.criteria.is_empty() && draw < self.sample
    }
}

/// Caps that end a run with a named termination reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub max_tool_calls: u32,
    pub max_turns: u32,
    pub timeout: Duration,
    /// Longest one tool call may take (subagent calls have their own limits).
    pub tool_timeout: Duration,
    pub max_cost_usd: Option<f64>,
    pub subagent_depth: u32,
    pub subagent_concurrency: u32,
    /// Runs at once across replicas (`None`: only the process's own per-agent cap).
    pub concurrency: Option<u32>,
    /// Slack-triggered runs per person per minute.
    pub per_user_per_minute: u32,
    /// Spend per UTC day before new runs are refused.
    pub daily_cost_usd: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_tool_calls: 40,
            max_turns: 30,
            timeout: Duration::from_secs(600),
            tool_timeout: Duration::from_secs(120),
            max_cost_usd: None,
            subagent_depth: 1,
            subagent_concurrency: 4,
            concurrency: None,
            per_user_per_minute: 10,
            daily_cost_usd: None,
        }
    }
}

/// Approval of tool calls (`tools: [{name, approval: required}]`, `approval:`).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalSettings {
    /// Tools whose every call waits for a person's Approve.
    pub tools: BTreeSet<String>,
    /// Slack user ids who may decide besides the person who triggered the run.
    pub approvers: Vec<String>,
    /// How long a run waits; no decision by then counts as Deny.
    pub timeout: Duration,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        ApprovalSettings {
            tools: BTreeSet::new(),
            approvers: Vec::new(),
            timeout: Duration::from_secs(24 * 3600),
        }
    }
}

/// Context-window settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSettings {
    /// Overrides the model's window from the table in `provider::pricing`.
    pub window_tokens: Option<u64>,
    pub compact_at: f64,
    pub file_threshold_tokens: u64,
    pub file_preview_tokens: u64,
    pub max_output_tokens: u32,
    /// Start with the conversation the trigger is in (a Slack thread, a DM).
    pub thread: bool,
    /// Compact below the model's long-context price tier.
    pub stay_under_price_tier: bool,
    /// Anthropic prompt-cache markers ask for one hour rather than five minutes.
    pub cache_1h: bool,
    /// OpenAI `prompt_cache_retention`.
    pub prompt_cache_retention: Option<String>,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            window_tokens: None,
            compact_at: 0.8,
            file_threshold_tokens: 10_000,
            file_preview_tokens: 1_000,
            max_output_tokens: 8_192,
            thread: true,
            stay_under_price_tier: true,
            cache_1h: false,
            prompt_cache_retention: None,
        }
    }
}

/// How a run's status shows in Slack (`output.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusMode {
    /// `:eyes:` on the triggering message, then `:white_check_mark:` or `:x:`.
    Reaction,
    /// Slack's thinking status in the thread (`assistant.threads.setStatus`, with what
    /// the run is doing) and an agent session with a Stop button.
    Native,
    Both,
    None,
}

impl StatusMode {
    pub fn reactions(self) -> bool {
        matches!(self, StatusMode::Reaction | StatusMode::Both)
    }

    pub fn native(self) -> bool {
        matches!(self, StatusMode::Native | StatusMode::Both)
    }
}

/// What happens to the final answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSettings {
    /// Keep the final answer (and post it where the trigger came from); when false the
    /// agent acts only through tools and its final text is discarded.
    pub reply: bool,
    pub prompt_link: bool,
    /// How a Slack-triggered run shows it is working (`output.status`): Slack's own
    /// thinking status and agent session, reactions on the triggering message, both, or
    /// nothing. Default: native for LLM agents, none for script coordinators (code
    /// workflows that add their own reactions).
    pub status: StatusMode,
    /// Stream a Slack reply into its thread while the run works (`output.stream`):
    /// the model's text as it comes and each tool call as a task. Default: on for LLM
    /// agents that reply.
    pub stream: bool,
    /// 👍 / 👎 buttons under Slack replies (`output: {feedback: true}`).
    pub feedback: bool,
}

impl Default for OutputSettings {
    fn default() -> Self {
        OutputSettings {
            reply: true,
            prompt_link: true,
            status: StatusMode::Native,
            stream: true,
            feedback: false,
        }
    }
}

/// Where the "Get help from a person" button leads (`escalation:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    /// Slack users (`U…`, `W…`) and user groups (`S…`) called; the users may resolve.
    pub to: Vec<String>,
    /// Where the call goes, with a link to the thread; `None`: in the thread.
    pub channel: Option<String>,
    pub label: String,
}

/// The button's text unless `escalation.label` says otherwise.
pub const DEFAULT_ESCALATION_LABEL: &str = "Get help from a person";

/// One validated agent or subagent: "every agent is a subagent", so both share a type
/// and a runner.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub name: String,
    pub description: String,
    /// Who to contact about the agent (a Slack user id or text).
    pub owner: Option<String>,
    /// Who a person reaches with the "Get help from a person" button, if it is shown.
    pub escalation: Option<Escalation>,
    /// The owner's digest (`digest:`), validated.
    pub digest: Option<spec::DigestSpec>,
    /// Follow-ups in its Slack threads reach it for this long after its last reply
    /// there; `None`: they do not.
    pub follow_ups: Option<Duration>,
    /// A run queued behind another of its conversation starts once no message came for
    /// this long, so a burst becomes one turn.
    pub debounce: Duration,
    /// What Slack's agent DM view suggests (agents with a `slack_dm` trigger).
    pub suggested_prompts: Vec<spec::SuggestedPrompt>,
    /// The YAML file it came from, relative to the root.
    pub file: PathBuf,
    pub coordinator: Coordinator,
    /// The primary model first, then fallbacks; empty only for script coordinators.
    pub models: Vec<ModelRef>,
    pub prompt: Option<Prompt>,
    pub tools: ToolSelection,
    /// Tools a person approves at each call, who may, and how long a run waits.
    pub approval: ApprovalSettings,
    pub subagents: Vec<String>,
    pub skills: SkillsSpec,
    pub triggers: Vec<TriggerSpec>,
    /// Each trigger's compiled `when:` filter, by the trigger's index.
    pub filters: Vec<Option<Arc<crate::sandbox::filter::Filter>>>,
    pub preload_bytes: u64,
    pub context: ContextSettings,
    /// How hard its model thinks (passed to every model call of its runs).
    pub reasoning: crate::types::ReasoningSpec,
    /// What the agent's search tools may search.
    pub search: search::SearchScope,
    pub limits: Limits,
    pub output: OutputSettings,
    pub post_run: PostRunEvals,
    pub sandbox: crate::sandbox::SandboxLimits,
    /// The script's `vars` (JSON object).
    pub vars: serde_json::Value,
    /// Destinations private content may reach without an approval (see
    /// `run::custody`): Slack channel ids, tool names, hosts.
    pub private_egress: Vec<String>,
}

impl AgentConfig {
    /// The `when:` filter of trigger `index`, if it has one.
    pub fn filter(&self, index: usize) -> Option<&crate::sandbox::filter::Filter> {
        self.filters.get(index).and_then(Option::as_deref)
    }

    /// Whether later messages of its conversation can be handed to a running run:
    /// the LLM loop reads them between model calls; a script cannot.
    pub fn takes_handoffs(&self) -> bool {
        !matches!(self.coordinator, Coordinator::Script { .. })
    }

    /// A minimal LLM agent, for tests and embedding; configs normally come from YAML.
    pub fn new(name: &str, model: ModelRef, prompt: &str, tools: Vec<String>) -> Self {
        AgentConfig {
            name: name.to_string(),
            description: String::new(),
            owner: None,
            escalation: None,
            digest: None,
            follow_ups: None,
            debounce: DEFAULT_DEBOUNCE,
            suggested_prompts: Vec::new(),
            file: PathBuf::from(format!("agents/{name}.yaml")),
            coordinator: Coordinator::Llm,
            models: vec![model],
            prompt: Some(Prompt {
                path: format!("prompts/{name}.md"),
                text: prompt.to_string(),
                url: None,
            }),
            tools: ToolSelection::List(tools),
            approval: ApprovalSettings::default(),
            subagents: Vec::new(),
            skills: SkillsSpec::default(),
            triggers: Vec::new(),
            filters: Vec::new(),
            preload_bytes: 8192,
            context: ContextSettings::default(),
            reasoning: Default::default(),
            search: Default::default(),
            limits: Limits::default(),
            output: OutputSettings::default(),
            post_run: PostRunEvals::default(),
            sandbox: Default::default(),
            vars: serde_json::Value::Object(Default::default()),
            private_egress: Vec::new(),
        }
    }

    /// The tool names this agent lists (empty for `inherit`).
    pub fn tool_names(&self) -> &[String] {
        match &self.tools {
            ToolSelection::List(list) => list,
            ToolSelection::Inherit => &[],
        }
    }
}
