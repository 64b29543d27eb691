//! Turns the YAML files of a config tree into validated runtime types, collecting every
//! problem with its location.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::diagnostic::{Diagnostic, Diagnostics, locate};
use super::parse::parse_all;
use super::prices::Prices;
use super::spec::SkillsSpec;
use super::spec::{AgentSpec, CacheSpec, ContextSpec, CoordinatorSpec, LimitsSpec, SubagentSpec, ToolsSpec};
use super::within;
use super::{
    AgentConfig, Config, ContextSettings, Coordinator, Known, Limits, OutputSettings, Prompt, ToolSelection,
};
use crate::sandbox::filter::{Filter, FilterEngine};
use crate::types::ModelRef;

/// One YAML file read from disk.
struct Source {
    /// Relative to the root, for messages.
    rel: PathBuf,
    text: String,
}

impl Source {
    fn error_at(&self, key: &str, value: Option<&str>, message: impl Into<String>) -> Diagnostic {
        let (line, col) = locate(&self.text, key, value);
        Diagnostic::new(&self.rel, line, col, message)
    }
}

pub(super) fn load_tree(root: &Path, known: &Known) -> Result<Config, Diagnostics> {
    let mut diags = Vec::new();
    let mut config = Config {
        root: root.to_path_buf(),
        ..Config::default()
    };
    match Prices::load(root) {
        Ok(prices) => config.prices = Arc::new(prices),
        Err(d) => diags.push(d),
    }

    for source in read_yaml_dir(root, "mcp", &mut diags) {
        let name = name_of(None, &source.rel);
        match parse_all::<super::mcp::McpSpec>(&source.rel, &source.text) {
            Ok(spec) => match super::mcp::build(&name, spec, root) {
                Ok(server) => {
                    config.mcp.insert(name, server);
                }
                Err(problems) => {
                    for (key, value, message) in problems {
                        diags.push(source.error_at(
                            key,
                            (!value.is_empty()).then_some(value.as_str()),
                            message,
                        ));
                    }
                }
            },
            Err(found) => diags.extend(found),
        }
    }

    let mut agent_specs = Vec::new();
    for source in read_yaml_dir(root, "agents", &mut diags) {
        match parse_all::<AgentSpec>(&source.rel, &source.text) {
            Ok(spec) => agent_specs.push((source, spec)),
            Err(found) => diags.extend(found),
        }
    }
    let mut sub_specs = Vec::new();
    for source in read_yaml_dir(root, "subagents", &mut diags) {
        match parse_all::<SubagentSpec>(&source.rel, &source.text) {
            Ok(spec) => sub_specs.push((source, spec)),
            Err(found) => diags.extend(found),
        }
    }

    let sub_names: BTreeSet<String> = sub_specs
        .iter()
        .map(|(src, spec)| name_of(spec.name.as_deref(), &src.rel))
        .collect();

    for (src, spec) in sub_specs {
        if let Some(agent) = build_subagent(root, &src, spec, known, &sub_names, &mut diags) {
            check_priced(&src, &agent, &config.prices, &mut diags);
            check_mcp(&src, &agent, &config.mcp, &mut diags);
            insert_unique(root, &mut config.subagents, agent, &src, &mut diags);
        }
    }
    let mut texts = super::overlap::Texts::new();
    for (src, spec) in agent_specs {
        if let Some(agent) = build_agent(root, &src, spec, known, &sub_names, &config.filters, &mut diags) {
            check_priced(&src, &agent, &config.prices, &mut diags);
            check_mcp(&src, &agent, &config.mcp, &mut diags);
            texts.insert(agent.name.clone(), (src.rel.clone(), src.text.clone()));
            insert_unique(root, &mut config.agents, agent, &src, &mut diags);
        }
    }
    diags.extend(super::overlap::unordered(&config.agents, &texts));
    diags.extend(super::overlap::shared_hook_tokens(&config.agents, &texts));

    if diags.is_empty() {
        Ok(config)
    } else {
        Err(Diagnostics(diags))
    }
}

/// A cost cap on a model with no price could never stop anything: a config error
/// naming the model and where to price it.
fn check_priced(src: &Source, agent: &AgentConfig, prices: &Prices, diags: &mut Vec<Diagnostic>) {
    let unpriced: Vec<String> = agent
        .models
        .iter()
        .filter(|m| prices.price(&m.provider, &m.model).is_none())
        .map(ToString::to_string)
        .collect();
    if unpriced.is_empty() {
        return;
    }
    let caps = [
        ("max_cost_usd", agent.limits.max_cost_usd.is_some()),
        ("daily_cost_usd", agent.limits.daily_cost_usd.is_some()),
    ];
    for (key, _) in caps.iter().filter(|(_, set)| *set) {
        diags.push(src.error_at(
            key,
            None,
            format!(
                "{key} needs a price for {}, which has none: add it to {} at the config root (see docs/configuration.md#prices)",
                unpriced.join(", "),
                super::prices::FILE
            ),
        ));
    }
}

impl Config {
    /// `provider/model` names agents use that have no price (their cost is unknown),
    /// with the agents using them.
    pub fn unpriced(&self) -> Vec<(String, String)> {
        self.agents
            .values()
            .chain(self.subagents.values())
            .flat_map(|a| a.models.iter().map(move |m| (a, m)))
            .filter(|(_, m)| self.prices.price(&m.provider, &m.model).is_none())
            .map(|(a, m)| (a.name.clone(), m.to_string()))
            .collect()
    }

    /// Configured models near or past their announced shutdown on `today`, as
    /// `(warnings, refusals)`: a warning from 90 days before, naming the replacement; a
    /// refusal after, since the provider no longer serves the model.
    pub fn lifecycle_findings(&self, today: chrono::NaiveDate) -> (Vec<String>, Vec<String>) {
        use super::lifecycle::{Lifecycle, Standing};
        let lifecycle = Lifecycle::shipped();
        let (mut warnings, mut refusals) = (Vec::new(), Vec::new());
        let mut seen = BTreeSet::new();
        for a in self.agents.values().chain(self.subagents.values()) {
            for m in &a.models {
                if !seen.insert((a.name.clone(), m.to_string())) {
                    continue;
                }
                match lifecycle.standing(m, today) {
                    Some(Standing::Retiring(r)) => warnings.push(format!(
                        "{}: {m} shuts down on {} ({} days); move to {}",
                        a.file.display(),
                        r.shutdown,
                        (r.shutdown - today).num_days(),
                        r.replacement
                    )),
                    Some(Standing::Retired(r)) => refusals.push(format!(
                        "{}: {m} was shut down on {}; the provider refuses it: use {}",
                        a.file.display(),
                        r.shutdown,
                        r.replacement
                    )),
                    None => {}
                }
            }
        }
        (warnings, refusals)
    }

    /// What `validate` says about agents' `reasoning:` settings: models that do not
    /// reason, values a provider is known to refuse.
    pub fn reasoning_warnings(&self) -> Vec<String> {
        self.agents
            .values()
            .chain(self.subagents.values())
            .flat_map(|a| super::reasoning::warnings(&a.name, &a.models, &a.reasoning))
            .collect()
    }
}

fn insert_unique(
    root: &Path,
    map: &mut BTreeMap<String, Arc<AgentConfig>>,
    agent: AgentConfig,
    src: &Source,
    diags: &mut Vec<Diagnostic>,
) {
    if let Some(existing) = map.get(&agent.name) {
        // Point at the file whose `name:` makes the clash: two files of one folder
        // cannot share a stem, so at least one of them names itself.
        let declares = |text: &str| super::diagnostic::find_key(text, "name", 0);
        let message = |other: &Path| {
            format!(
                "duplicate name '{}': {} is called that too; rename one (name: or the file name)",
                agent.name,
                other.display()
            )
        };
        if declares(&src.text).is_some() {
            diags.push(src.error_at("name", None, message(&existing.file)));
        } else {
            let (line, column) = std::fs::read_to_string(root.join(&existing.file))
                .ok()
                .as_deref()
                .and_then(declares)
                .map_or((1, 1), |(l, c)| (l + 1, c + 1));
            diags.push(Diagnostic::new(&existing.file, line, column, message(&src.rel)));
        }
        return;
    }
    map.insert(agent.name.clone(), Arc::new(agent));
}

/// Reads every `*.yaml`/`*.yml` of `root/dir` in name order; a missing folder is empty.
fn read_yaml_dir(root: &Path, dir: &str, diags: &mut Vec<Diagnostic>) -> Vec<Source> {
    let path = root.join(dir);
    let Ok(entries) = std::fs::read_dir(&path) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let rel = PathBuf::from(dir).join(p.file_name().unwrap_or_default());
            match within::read_text(root, &rel) {
                Ok(text) => Some(Source { rel, text }),
                Err(within::WithinError::Io { source, .. }) => {
                    diags.push(Diagnostic::new(&rel, 1, 1, format!("cannot read file: {source}")));
                    None
                }
                Err(e) => {
                    diags.push(Diagnostic::new(&rel, 1, 1, e.to_string()));
                    None
                }
            }
        })
        .collect()
}

/// The diagnostic for a `what` file (prompt, script) at `path` that cannot be used.
fn unreadable(what: &str, path: &str, e: within::WithinError) -> String {
    match e {
        within::WithinError::Io { source, .. } => format!("cannot read {what} file '{path}': {source}"),
        other => format!("{what} file: {other}"),
    }
}

fn name_of(name: Option<&str>, rel: &Path) -> String {
    name.map(str::to_string).unwrap_or_else(|| {
        rel.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}

fn check_name(src: &Source, name: &str, diags: &mut Vec<Diagnostic>) {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        diags.push(src.error_at(
            "name",
            None,
            format!("invalid name '{name}', expected lowercase letters, digits, '-' or '_'"),
        ));
    }
}

fn build_models(
    src: &Source,
    model: Option<&str>,
    fallbacks: &[String],
    required: bool,
    diags: &mut Vec<Diagnostic>,
) -> Vec<ModelRef> {
    let mut models = Vec::new();
    match model {
        Some(m) => match ModelRef::parse(m) {
            Ok(r) => models.push(r),
            Err(e) => diags.push(src.error_at("model", None, e.to_string())),
        },
        None if required => diags.push(Diagnostic::new(
            &src.rel,
            1,
            1,
            "missing field 'model', expected provider/model such as openai/gpt-4.1",
        )),
        None => {}
    }
    for f in fallbacks {
        match ModelRef::parse(f) {
            Ok(r) => models.push(r),
            Err(e) => diags.push(src.error_at("fallbacks", Some(f), e.to_string())),
        }
    }
    models
}

fn build_post_run(
    src: &Source,
    spec: &super::spec::EvalsSpec,
    diags: &mut Vec<Diagnostic>,
) -> super::PostRunEvals {
    let sample = spec.sample.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sample) {
        diags.push(src.error_at("sample", None, format!("sample {sample} is not between 0 and 1")));
    }
    if spec.sample.is_some() && spec.post_run.is_empty() {
        diags.push(src.error_at("sample", None, "'sample' needs criteria in 'post_run'"));
    }
    if let Some(m) = spec.model.as_deref().filter(|_| spec.post_run.is_empty()) {
        diags.push(src.error_at(
            "model",
            Some(m),
            "evals 'model' judges the 'post_run' criteria, and there are none: add criteria or remove it",
        ));
    }
    let model = spec.model.as_deref().and_then(|m| match ModelRef::parse(m) {
        Ok(r) => Some(r),
        Err(e) => {
            diags.push(src.error_at("model", Some(m), e.to_string()));
            None
        }
    });
    if let Some(c) = spec.post_run.iter().find(|c| c.trim().is_empty()) {
        diags.push(src.error_at("post_run", Some(c), "a post_run criterion is empty"));
    }
    super::PostRunEvals {
        criteria: spec.post_run.clone(),
        sample,
        model,
    }
}

fn build_prompt(
    root: &Path,
    src: &Source,
    prompt: Option<&str>,
    url: Option<String>,
    required: bool,
    diags: &mut Vec<Diagnostic>,
) -> Option<Prompt> {
    let Some(path) = prompt else {
        if required {
            diags.push(Diagnostic::new(
                &src.rel,
                1,
                1,
                "missing field 'prompt', expected a prompt file such as prompts/my_agent.md",
            ));
        }
        return None;
    };
    // `notion:<page-id>`: owners edit the prompt live in Notion; it is fetched at run time.
    if let Some(page) = path.strip_prefix("notion:") {
        let page = page.trim();
        if page.len() < 32 || !page.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            diags.push(src.error_at(
                "prompt",
                None,
                format!("invalid Notion page id '{page}', expected 32 hex digits"),
            ));
            return None;
        }
        let bare = page.replace('-', "");
        return Some(Prompt {
            path: path.to_string(),
            text: String::new(),
            url: url.or_else(|| Some(format!("https://www.notion.so/{bare}"))),
        });
    }
    match within::read_text(root, Path::new(path)) {
        Ok(text) if text.trim().is_empty() => {
            diags.push(src.error_at("prompt", None, format!("prompt file '{path}' is empty")));
            None
        }
        Ok(text) => Some(Prompt {
            path: path.to_string(),
            text,
            url,
        }),
        Err(e) => {
            diags.push(src.error_at("prompt", None, unreadable("prompt", path, e)));
            None
        }
    }
}

/// Which tools need approval, by whom and for how long. Only an LLM run can wait for
/// a decision across restarts (its conversation is checkpointed); a script cannot be
/// suspended mid-call, so `approval: required` on a script agent is an error.
fn build_approval(
    src: &Source,
    tools: &[super::spec::ToolEntry],
    spec: &super::spec::ApprovalSpec,
    is_llm: bool,
    diags: &mut Vec<Diagnostic>,
) -> super::ApprovalSettings {
    let mut gated: BTreeSet<String> = BTreeSet::new();
    for t in tools.iter().filter(|t| t.needs_approval()) {
        let name = t.name();
        // One MCP tool is gated under the name its calls carry; a whole server cannot
        // be (its tools are known only once connected).
        match name.strip_prefix("mcp:").map(|rest| rest.split_once('/')) {
            Some(Some((server, tool))) => {
                gated.insert(format!("{server}{}{tool}", super::mcp::SEPARATOR));
            }
            Some(None) => diags.push(src.error_at(
                "approval",
                Some(name),
                format!("'approval: required' applies to one MCP tool ({name}/<tool>), not a whole server"),
            )),
            None => {
                gated.insert(name.to_string());
            }
        }
    }
    if let Some(first) = gated.iter().next()
        && !is_llm
    {
        diags.push(src.error_at(
            "approval",
            Some(first),
            "'approval: required' works with LLM coordinators only: a script cannot wait for a decision across restarts",
        ));
    }
    if gated.is_empty() && *spec != super::spec::ApprovalSpec::default() {
        diags.push(src.error_at(
            "approval",
            None,
            "'approval' has no effect: no tool is marked 'approval: required'",
        ));
    }
    for id in &spec.approvers {
        if !(id.starts_with('U') || id.starts_with('W')) || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
            diags.push(src.error_at(
                "approvers",
                Some(id),
                format!("approver '{id}' is not a Slack user id (U… or W…)"),
            ));
        }
    }
    let d = super::ApprovalSettings::default();
    super::ApprovalSettings {
        tools: gated,
        approvers: spec.approvers.clone(),
        timeout: spec.timeout.map(|t| t.0).unwrap_or(d.timeout),
    }
}

/// `mcp:<server>` and `mcp:<server>/<tool>` entries name a server of `mcp/` (its tools
/// are known once steward connects).
fn check_mcp(
    src: &Source,
    agent: &AgentConfig,
    servers: &BTreeMap<String, super::mcp::McpServer>,
    diags: &mut Vec<Diagnostic>,
) {
    for entry in agent.tool_names() {
        let Some(rest) = entry.strip_prefix("mcp:") else {
            continue;
        };
        let server = rest.split_once('/').map_or(rest, |(s, _)| s);
        if !servers.contains_key(server) {
            let known: Vec<&str> = servers.keys().map(String::as_str).collect();
            diags.push(src.error_at(
                "tools",
                Some(entry),
                format!(
                    "unknown MCP server '{server}' (no mcp/{server}.yaml); known: {}",
                    if known.is_empty() {
                        "(none)".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
    }
}

fn check_tools(src: &Source, tools: &[String], known: &BTreeSet<String>, diags: &mut Vec<Diagnostic>) {
    for tool in tools {
        if tool.starts_with("mcp:") {
            continue;
        }
        if !known.contains(tool) {
            let list: Vec<&str> = known.iter().map(String::as_str).collect();
            diags.push(src.error_at(
                "tools",
                Some(tool),
                format!(
                    "unknown tool '{tool}'{}, expected one of {}",
                    super::parse::did_you_mean(tool, list.iter().copied()),
                    list.join(", ")
                ),
            ));
        }
    }
}

/// Checks each rule and compiles its `when:` filter (by the rule's index).
fn check_triggers(
    src: &Source,
    triggers: &[super::TriggerSpec],
    engine: &FilterEngine,
    diags: &mut Vec<Diagnostic>,
) -> Vec<Option<Arc<Filter>>> {
    use super::schedule::{parse_schedule, parse_tz};
    let mut filters = Vec::with_capacity(triggers.len());
    for (index, t) in triggers.iter().enumerate() {
        filters.push(t.when().and_then(|expr| match engine.compile(expr) {
            Ok(f) => Some(Arc::new(f)),
            Err(e) => {
                let (line, column) = when_position(src, triggers, index, expr, e.line, e.column);
                diags.push(Diagnostic::new(&src.rel, line, column, e.message));
                None
            }
        }));
        match t {
            super::TriggerSpec::Cron(c) => {
                if let Err(e) = parse_schedule(&c.schedule) {
                    diags.push(src.error_at("schedule", Some(&c.schedule), e.to_string()));
                }
                if let Err(e) = parse_tz(c.timezone.as_deref()) {
                    diags.push(src.error_at("timezone", c.timezone.as_deref(), e.to_string()));
                }
            }
            super::TriggerSpec::Webhook(w) if !valid_hook_name(&w.name) => {
                diags.push(src.error_at(
                    "name",
                    Some(&w.name),
                    format!(
                        "invalid webhook name '{}', expected letters, digits, '-' or '_'",
                        w.name
                    ),
                ));
            }
            _ => {}
        }
    }
    filters
}

/// Where a filter's error is in the file: the expression's own line and column, counted
/// from where it is written after the rule's `when:` key (the key itself when the
/// expression cannot be found verbatim, as in a folded block).
fn when_position(
    src: &Source,
    triggers: &[super::TriggerSpec],
    index: usize,
    expr: &str,
    line: usize,
    column: usize,
) -> (usize, usize) {
    let (rule_line, _) = super::overlap::rule_position(&src.text, triggers, index);
    let Some((key_line, key_col)) =
        super::diagnostic::find_key(&src.text, "when", rule_line.saturating_sub(1))
    else {
        return (rule_line, 1);
    };
    let first = expr.lines().next().unwrap_or_default();
    let found = src
        .text
        .lines()
        .enumerate()
        .skip(key_line)
        .take(3)
        .find_map(|(i, l)| {
            let from = if i == key_line { key_col } else { 0 };
            l.get(from..)
                .and_then(|rest| rest.find(first))
                .map(|at| (i, from + at))
        });
    match found {
        Some((i, at)) if line <= 1 => (i + 1, at + column),
        Some((i, _)) => (i + line, column),
        None => (key_line + 1, key_col + 1),
    }
}

/// `escalation:`: Slack ids of the right kinds, and a label Slack can show.
fn build_escalation(
    src: &Source,
    e: &super::spec::EscalationSpec,
    diags: &mut Vec<Diagnostic>,
) -> super::Escalation {
    if e.to.is_empty() {
        diags.push(src.error_at(
            "to",
            None,
            "escalation.to names nobody: list Slack user ids (U…) or user group ids (S…)",
        ));
    }
    for id in &e.to {
        if !(id.starts_with('U') || id.starts_with('W') || id.starts_with('S')) || id.len() < 3 {
            diags.push(src.error_at(
                "to",
                Some(id),
                format!("escalation.to: '{id}' is not a Slack user id (U…, W…) or user group id (S…)"),
            ));
        }
    }
    if let Some(c) = &e.channel
        && !(c.starts_with('C') || c.starts_with('G'))
    {
        diags.push(src.error_at(
            "channel",
            Some(c),
            format!("escalation.channel: '{c}' is not a Slack channel id (C…, G…)"),
        ));
    }
    let label = e
        .label
        .clone()
        .unwrap_or_else(|| super::DEFAULT_ESCALATION_LABEL.to_string());
    // Slack refuses a button whose text is longer.
    if label.trim().is_empty() || label.chars().count() > 75 {
        diags.push(src.error_at("label", None, "escalation.label must be 1 to 75 characters"));
    }
    super::Escalation {
        to: e.to.clone(),
        channel: e.channel.clone(),
        label,
    }
}

/// Webhook names become URL paths and environment variable names.
pub fn valid_hook_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn check_subagents(src: &Source, listed: &[String], known: &BTreeSet<String>, diags: &mut Vec<Diagnostic>) {
    for sub in listed {
        if !known.contains(sub) {
            let list: Vec<&str> = known.iter().map(String::as_str).collect();
            diags.push(src.error_at(
                "subagents",
                Some(sub),
                format!(
                    "unknown subagent '{sub}'{}, expected one of: {}",
                    super::parse::did_you_mean(sub, list.iter().copied()),
                    if list.is_empty() {
                        "(none in subagents/)".to_string()
                    } else {
                        list.join(", ")
                    }
                ),
            ));
        }
    }
}

fn check_skills(src: &Source, spec: &SkillsSpec, known: &BTreeSet<String>, diags: &mut Vec<Diagnostic>) {
    let list = || known.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
    for (key, names) in [
        ("required", &spec.required),
        ("allowed", &spec.allowed),
        ("prohibited", &spec.prohibited),
    ] {
        for name in names.iter().filter(|n| !n.ends_with('*')) {
            if !known.contains(name) {
                diags.push(src.error_at(
                    key,
                    Some(name),
                    format!(
                        "unknown skill '{name}' in skills.{key}{}, expected one of: {}",
                        super::parse::did_you_mean(name, known.iter().map(String::as_str)),
                        list()
                    ),
                ));
            }
        }
    }
    let scripts = &spec.scripts;
    for i in &scripts.interpreters {
        if i.is_empty() || i.contains(['/', ' ']) {
            diags.push(src.error_at(
                "interpreters",
                Some(i),
                format!("interpreter '{i}' must be a program name such as python3, not a path"),
            ));
        }
    }
    for (key, value) in [
        ("cpu_seconds", scripts.cpu_seconds),
        ("memory_mb", scripts.memory_mb),
        ("max_processes", scripts.max_processes),
        ("max_output_kb", scripts.max_output_kb),
        ("max_files", scripts.max_files),
        ("max_written_mb", scripts.max_written_mb),
        ("timeout", scripts.timeout.0.as_millis() as u64),
    ] {
        if value == 0 {
            diags.push(src.error_at(key, None, format!("skills.scripts.{key} must be above 0")));
        }
    }
    if spec.catalog_tokens == 0 {
        diags.push(src.error_at("catalog_tokens", None, "skills.catalog_tokens must be above 0"));
    }
    for name in spec.required.iter().filter(|n| spec.prohibited.contains(n)) {
        diags.push(src.error_at(
            "required",
            Some(name),
            format!("skill '{name}' is both required and prohibited"),
        ));
    }
}

fn build_limits(src: &Source, spec: &LimitsSpec, diags: &mut Vec<Diagnostic>) -> Limits {
    let d = Limits::default();
    let limits = Limits {
        max_tool_calls: spec.max_tool_calls.unwrap_or(d.max_tool_calls),
        max_turns: spec.max_turns.unwrap_or(d.max_turns),
        timeout: spec.timeout.map(|t| t.0).unwrap_or(d.timeout),
        tool_timeout: spec.tool_timeout.map(|t| t.0).unwrap_or(d.tool_timeout),
        max_cost_usd: spec.max_cost_usd,
        subagent_depth: spec.subagent_depth.unwrap_or(d.subagent_depth),
        subagent_concurrency: spec.subagent_concurrency.unwrap_or(d.subagent_concurrency),
        concurrency: spec.concurrency,
        per_user_per_minute: spec.per_user_per_minute.unwrap_or(d.per_user_per_minute),
        daily_cost_usd: spec.daily_cost_usd,
    };
    if limits.concurrency == Some(0) {
        diags.push(src.error_at("concurrency", None, "concurrency must be at least 1"));
    }
    if limits.per_user_per_minute == 0 {
        diags.push(src.error_at(
            "per_user_per_minute",
            None,
            "per_user_per_minute must be at least 1",
        ));
    }
    if limits.daily_cost_usd.is_some_and(|c| c.is_nan() || c <= 0.0) {
        diags.push(src.error_at("daily_cost_usd", None, "daily_cost_usd must be a positive number"));
    }
    if limits.subagent_concurrency == 0 {
        diags.push(src.error_at(
            "subagent_concurrency",
            None,
            "subagent_concurrency must be at least 1",
        ));
    }
    if limits.max_turns == 0 {
        diags.push(src.error_at("max_turns", None, "max_turns must be at least 1"));
    }
    if limits.timeout.is_zero() {
        diags.push(src.error_at("timeout", None, "timeout must be longer than zero"));
    }
    if limits.tool_timeout.is_zero() {
        diags.push(src.error_at("tool_timeout", None, "tool_timeout must be longer than zero"));
    }
    if limits.max_cost_usd.is_some_and(|c| c.is_nan() || c <= 0.0) {
        diags.push(src.error_at("max_cost_usd", None, "max_cost_usd must be a positive number"));
    }
    limits
}

/// The search scope, and a config error for a search tool granted without the source
/// it searches (it would do nothing).
fn build_search(
    src: &Source,
    spec: &super::search::SearchSpec,
    tools: &[String],
    diags: &mut Vec<Diagnostic>,
) -> super::search::SearchScope {
    let (scope, problems) = super::search::build(spec);
    for (key, value, message) in problems {
        diags.push(src.error_at(key, (!value.is_empty()).then_some(value.as_str()), message));
    }
    let sources = scope.sources();
    for (tool, needs) in super::search::SEARCH_TOOLS {
        let missing = if needs == "any" {
            sources.is_empty()
        } else {
            !sources.contains(&needs)
        };
        if tools.iter().any(|t| t == tool) && missing {
            let what = if needs == "any" {
                "at least one source under search: (slack, notion, jira, github)".to_string()
            } else {
                format!("search.{needs} (what it may search)")
            };
            diags.push(src.error_at("tools", Some(tool), format!("tool '{tool}' needs {what}")));
        }
    }
    scope
}

/// The values of `reasoning:` the providers could never take. Effort is an open set
/// (each provider names its own levels), so only its emptiness is an error here;
/// values a known model refuses are warnings from `validate`.
fn check_reasoning(src: &Source, spec: &crate::types::ReasoningSpec, diags: &mut Vec<Diagnostic>) {
    if let Some(effort) = spec.effort.as_deref()
        && (effort.trim().is_empty() || effort.trim() != effort)
    {
        diags.push(src.error_at(
            "effort",
            None,
            format!("reasoning.effort is a level such as low, medium or high, not '{effort}'"),
        ));
    }
    // Anthropic's smallest thinking budget.
    if let Some(budget) = spec.budget_tokens
        && budget < 1024
    {
        diags.push(src.error_at(
            "budget_tokens",
            None,
            format!("reasoning.budget_tokens is at least 1024 (Anthropic's smallest thinking budget), not {budget}"),
        ));
    }
    if let Some(summary) = spec.summary.as_deref()
        && !matches!(summary, "auto" | "concise" | "detailed")
    {
        diags.push(src.error_at(
            "summary",
            Some(summary),
            format!("reasoning.summary is auto, concise or detailed, not '{summary}'"),
        ));
    }
}

fn build_context(
    src: &Source,
    spec: &ContextSpec,
    cache: &CacheSpec,
    diags: &mut Vec<Diagnostic>,
) -> ContextSettings {
    let d = ContextSettings::default();
    let cache_1h = match cache.ttl.as_deref() {
        None | Some("5m") => false,
        Some("1h") => true,
        Some(other) => {
            diags.push(src.error_at(
                "ttl",
                Some(other),
                format!("cache.ttl is 5m or 1h, not '{other}'"),
            ));
            false
        }
    };
    if let Some(r) = cache.prompt_cache_retention.as_deref()
        && !matches!(r, "in_memory" | "24h")
    {
        diags.push(src.error_at(
            "prompt_cache_retention",
            Some(r),
            format!("cache.prompt_cache_retention is in_memory or 24h, not '{r}'"),
        ));
    }
    let ctx = ContextSettings {
        window_tokens: spec.window_tokens.or(d.window_tokens),
        compact_at: spec.compact_at.unwrap_or(d.compact_at),
        file_threshold_tokens: spec.file_threshold_tokens.unwrap_or(d.file_threshold_tokens),
        file_preview_tokens: spec.file_preview_tokens.unwrap_or(d.file_preview_tokens),
        max_output_tokens: spec.max_output_tokens.unwrap_or(d.max_output_tokens),
        thread: spec.thread.unwrap_or(d.thread),
        stay_under_price_tier: spec.stay_under_price_tier.unwrap_or(d.stay_under_price_tier),
        cache_1h,
        prompt_cache_retention: cache.prompt_cache_retention.clone(),
    };
    if !(ctx.compact_at > 0.0 && ctx.compact_at <= 1.0) {
        diags.push(src.error_at("compact_at", None, "compact_at must be a fraction in (0, 1]"));
    }
    if ctx.file_preview_tokens > ctx.file_threshold_tokens {
        diags.push(src.error_at(
            "file_preview_tokens",
            None,
            "file_preview_tokens must not exceed file_threshold_tokens",
        ));
    }
    ctx
}

fn build_agent(
    root: &Path,
    src: &Source,
    spec: AgentSpec,
    known: &Known,
    subagents: &BTreeSet<String>,
    filter_engine: &FilterEngine,
    diags: &mut Vec<Diagnostic>,
) -> Option<AgentConfig> {
    let before = diags.len();
    let name = name_of(spec.name.as_deref(), &src.rel);
    check_name(src, &name, diags);

    let is_llm = spec.coordinator == CoordinatorSpec::Llm;
    let tool_names: Vec<String> = spec.tools.iter().map(|t| t.name().to_string()).collect();
    let coordinator = match (spec.coordinator, &spec.script) {
        (CoordinatorSpec::Llm, None) => Coordinator::Llm,
        (CoordinatorSpec::Llm, Some(_)) => {
            diags.push(src.error_at("script", None, "'script' needs 'coordinator: script'"));
            Coordinator::Llm
        }
        (CoordinatorSpec::Script, None) => {
            diags.push(src.error_at(
                "coordinator",
                None,
                "'coordinator: script' needs 'script: scripts/<name>.rhai'",
            ));
            Coordinator::Llm
        }
        (CoordinatorSpec::Script, Some(path)) => match within::read_text(root, Path::new(path)) {
            Ok(source) => {
                check_script(path, &source, &tool_names, &sandbox_limits(&spec.sandbox), diags);
                Coordinator::Script {
                    path: PathBuf::from(path),
                    source,
                }
            }
            Err(e) => {
                diags.push(src.error_at("script", None, unreadable("script", path, e)));
                Coordinator::Llm
            }
        },
    };
    let models = build_models(src, spec.model.as_deref(), &spec.fallbacks, is_llm, diags);
    let prompt = build_prompt(root, src, spec.prompt.as_deref(), spec.prompt_url, is_llm, diags);
    check_tools(src, &tool_names, &known.tools, diags);
    let approval = build_approval(src, &spec.tools, &spec.approval, is_llm, diags);
    let filters = check_triggers(src, &spec.triggers, filter_engine, diags);
    let escalation = spec.escalation.as_ref().map(|e| build_escalation(src, e, diags));
    check_subagents(src, &spec.subagents, subagents, diags);
    check_skills(src, &spec.skills, &known.skills, diags);
    let limits = build_limits(src, &spec.limits, diags);
    let context = build_context(src, &spec.context, &spec.cache, diags);
    let search = build_search(src, &spec.search, &tool_names, diags);
    let private_egress = build_private_egress(src, &spec.private_egress, &tool_names, diags);
    check_reasoning(src, &spec.reasoning, diags);
    if !is_llm && spec.reasoning.is_set() {
        diags.push(src.error_at(
            "reasoning",
            None,
            "reasoning applies to agents whose model coordinates; a script's model calls are its subagents': set reasoning there",
        ));
    }
    if !is_llm && spec.cache != CacheSpec::default() {
        diags.push(src.error_at(
            "cache",
            None,
            "cache applies to agents whose model coordinates; a script's model calls are its subagents': set cache there",
        ));
    }
    let post_run = build_post_run(src, &spec.evals, diags);
    let d = OutputSettings::default();
    let output = OutputSettings {
        reply: spec.output.reply.unwrap_or(d.reply),
        prompt_link: spec.output.prompt_link.unwrap_or(d.prompt_link),
        status: spec.output.status.unwrap_or(match coordinator {
            Coordinator::Llm => super::StatusMode::Native,
            _ => super::StatusMode::None,
        }),
        stream: spec
            .output
            .stream
            .unwrap_or(matches!(coordinator, Coordinator::Llm)),
        feedback: spec.output.feedback.unwrap_or(d.feedback),
    };
    if spec.output.stream == Some(true) && !matches!(coordinator, Coordinator::Llm) {
        diags.push(src.error_at(
            "stream",
            None,
            "'output.stream' applies to LLM agents: a script's answer is known only when it ends",
        ));
    }

    // Agents people address (a Slack mention) or that answer on an issue or a page
    // take follow-ups unless told not to.
    let mentioned = spec.triggers.iter().any(|t| {
        matches!(
            t,
            super::TriggerSpec::SlackMention(_) | super::TriggerSpec::Jira(_) | super::TriggerSpec::Notion(_)
        )
    });
    let follow_ups = spec.follow_ups.unwrap_or(mentioned).then(|| {
        spec.follow_up_window
            .map(|w| w.0)
            .unwrap_or(std::time::Duration::from_secs(24 * 3600))
    });
    if spec.follow_up_window.is_some() && follow_ups.is_none() {
        diags.push(src.error_at(
            "follow_up_window",
            None,
            "'follow_up_window' needs follow-ups: set 'follow_ups: true' or give the agent a slack_mention, jira or notion trigger",
        ));
    }
    let debounce = spec.debounce.map_or(super::DEFAULT_DEBOUNCE, |d| d.0);
    let dm = spec
        .triggers
        .iter()
        .any(|t| matches!(t, super::TriggerSpec::SlackDm(_)));
    if !spec.suggested_prompts.is_empty() && !dm {
        diags.push(src.error_at(
            "suggested_prompts",
            None,
            "'suggested_prompts' are shown in Slack's agent DM view: give the agent a 'slack_dm: {}' trigger",
        ));
    }
    if spec.suggested_prompts.len() > 4 {
        diags.push(src.error_at(
            "suggested_prompts",
            None,
            format!(
                "Slack shows at most 4 suggested prompts; this agent has {}",
                spec.suggested_prompts.len()
            ),
        ));
    }
    if spec.debounce.is_some() && matches!(coordinator, Coordinator::Script { .. }) {
        diags.push(src.error_at(
            "debounce",
            None,
            "'debounce' applies to LLM agents: a script run reads no messages that arrive after it was queued",
        ));
    }
    if let Some(d) = &spec.digest {
        check_digest(src, d, spec.owner.is_some(), diags);
    }
    if let Some(e) = &spec.skills.scripts.egress {
        check_script_egress(src, e, diags);
    }
    (diags.len() == before).then(|| AgentConfig {
        name,
        description: spec.description,
        owner: spec.owner,
        escalation,
        digest: spec.digest,
        follow_ups,
        debounce,
        suggested_prompts: spec.suggested_prompts,
        file: src.rel.clone(),
        coordinator,
        models,
        prompt,
        tools: ToolSelection::List(tool_names),
        approval,
        subagents: spec.subagents,
        skills: spec.skills,
        triggers: spec.triggers,
        filters,
        preload_bytes: spec.files.preload_bytes.unwrap_or(8192),
        context,
        reasoning: spec.reasoning,
        search,
        limits,
        output,
        post_run,
        sandbox: sandbox_limits(&spec.sandbox),
        vars: serde_json::to_value(&spec.vars).unwrap_or_default(),
        private_egress,
    })
}

/// `skills.scripts.egress`: hosts or `*.domain` patterns, and secrets for allowed hosts.
fn check_script_egress(src: &Source, e: &super::spec::ScriptEgressSpec, diags: &mut Vec<Diagnostic>) {
    for (key, value, message) in e.problems() {
        diags.push(src.error_at(key, (!value.is_empty()).then_some(value.as_str()), message));
    }
}

/// `digest:`: it is for the owner, on a valid schedule, in a Slack channel.
fn check_digest(src: &Source, d: &super::spec::DigestSpec, has_owner: bool, diags: &mut Vec<Diagnostic>) {
    use super::schedule::{parse_schedule, parse_tz};
    if !has_owner {
        diags.push(src.error_at(
            "digest",
            None,
            "a digest is for the agent's owner: add 'owner:' (a Slack user id such as U0123ABC)",
        ));
    }
    if let Err(e) = parse_schedule(&d.schedule) {
        diags.push(src.error_at("schedule", Some(&d.schedule), e.to_string()));
    }
    if let Err(e) = parse_tz(d.timezone.as_deref()) {
        diags.push(src.error_at("timezone", d.timezone.as_deref(), e.to_string()));
    }
    let channel_like = d.channel.len() >= 9
        && (d.channel.starts_with('C') || d.channel.starts_with('G'))
        && d.channel
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if !channel_like {
        diags.push(src.error_at(
            "channel",
            Some(&d.channel),
            format!(
                "digest channel '{}' is not a Slack channel id (C… or G…, from the channel's details)",
                d.channel
            ),
        ));
    }
}

/// `private_egress`: each entry a Slack conversation id, a tool the agent is granted,
/// or a host name; anything else is an error naming what it can be.
fn build_private_egress(
    src: &Source,
    entries: &[String],
    tools: &[String],
    diags: &mut Vec<Diagnostic>,
) -> Vec<String> {
    for e in entries {
        let channel = e.len() >= 9
            && matches!(e.as_bytes()[0], b'C' | b'G' | b'D')
            && e.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
        let tool = tools.iter().any(|t| t == e);
        let host = e.contains('.')
            && !e.contains('/')
            && e.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if !(channel || tool || host) {
            diags.push(src.error_at(
                "private_egress",
                Some(e),
                format!(
                    "'{e}' in private_egress is not a Slack channel id (C0123ABC), a tool this agent is granted, or a host name (status.example.com)"
                ),
            ));
        }
    }
    entries.to_vec()
}

fn sandbox_limits(spec: &super::spec::SandboxSpec) -> crate::sandbox::SandboxLimits {
    let d = crate::sandbox::SandboxLimits::default();
    crate::sandbox::SandboxLimits {
        max_operations: spec.max_operations.unwrap_or(d.max_operations),
        max_call_depth: spec.max_call_depth.unwrap_or(d.max_call_depth),
        max_expr_depth: spec.max_expr_depth.unwrap_or(d.max_expr_depth),
        max_string_bytes: spec.max_string_bytes.unwrap_or(d.max_string_bytes),
        max_array_len: spec.max_array_len.unwrap_or(d.max_array_len),
        max_map_len: spec.max_map_len.unwrap_or(d.max_map_len),
    }
}

/// Compiles a coordinator script and checks the tools it names literally are allowed;
/// problems are reported at their place in the script file.
fn check_script(
    path: &str,
    source: &str,
    allowed: &[String],
    limits: &crate::sandbox::SandboxLimits,
    diags: &mut Vec<Diagnostic>,
) {
    let file = Path::new(path);
    if let Err((line, col, msg)) = crate::sandbox::check(source, limits) {
        diags.push(Diagnostic::new(file, line, col, format!("syntax error: {msg}")));
        return;
    }
    let base: Vec<&str> = super::BASE_TOOLS.to_vec();
    for (line, col, tool) in crate::sandbox::literal_tools(source) {
        // `mcp:<server>` grants every `<server>__…` tool, `mcp:<server>/<tool>` one.
        let via_mcp = allowed.iter().any(|a| {
            a.strip_prefix("mcp:")
                .is_some_and(|rest| match rest.split_once('/') {
                    Some((server, one)) => tool == format!("{server}{}{one}", super::mcp::SEPARATOR),
                    None => tool.starts_with(&format!("{rest}{}", super::mcp::SEPARATOR)),
                })
        });
        if !allowed.contains(&tool) && !base.contains(&tool.as_str()) && !via_mcp {
            diags.push(Diagnostic::new(
                file,
                line,
                col,
                format!("the script calls tool '{tool}', which its agent does not allow (add it to the agent's tools)"),
            ));
        }
    }
}

fn build_subagent(
    root: &Path,
    src: &Source,
    spec: SubagentSpec,
    known: &Known,
    subagents: &BTreeSet<String>,
    diags: &mut Vec<Diagnostic>,
) -> Option<AgentConfig> {
    let before = diags.len();
    let name = name_of(spec.name.as_deref(), &src.rel);
    check_name(src, &name, diags);
    // A subagent without a model uses its parent's.
    let models = build_models(src, spec.model.as_deref(), &spec.fallbacks, false, diags);
    let prompt = build_prompt(root, src, spec.prompt.as_deref(), spec.prompt_url, true, diags);
    let tools = match spec.tools {
        ToolsSpec::List(list) => {
            check_tools(src, &list, &known.tools, diags);
            ToolSelection::List(list)
        }
        ToolsSpec::Keyword(_) => ToolSelection::Inherit,
    };
    check_subagents(src, &spec.subagents, subagents, diags);
    check_skills(src, &spec.skills, &known.skills, diags);
    for (key, set) in [
        ("concurrency", spec.limits.concurrency.is_some()),
        ("per_user_per_minute", spec.limits.per_user_per_minute.is_some()),
        ("daily_cost_usd", spec.limits.daily_cost_usd.is_some()),
        // Nesting depth is the top-level agent's (`Lineage::root`); a subagent's own
        // would be read by nothing.
        ("subagent_depth", spec.limits.subagent_depth.is_some()),
    ] {
        if set {
            diags.push(src.error_at(
                key,
                None,
                format!("'{key}' applies to agents (what triggers start), not to subagents"),
            ));
        }
    }
    let limits = build_limits(src, &spec.limits, diags);
    let context = build_context(src, &spec.context, &spec.cache, diags);
    check_reasoning(src, &spec.reasoning, diags);
    let listed = match &tools {
        ToolSelection::List(l) => l.clone(),
        ToolSelection::Inherit => Vec::new(),
    };
    let search = build_search(src, &spec.search, &listed, diags);
    // A subagent's skill scripts run with its own egress policy: the same checks apply.
    if let Some(e) = &spec.skills.scripts.egress {
        check_script_egress(src, e, diags);
    }
    (diags.len() == before).then(|| AgentConfig {
        name,
        description: spec.description,
        owner: None,
        digest: None,
        escalation: None,
        follow_ups: None,
        debounce: super::DEFAULT_DEBOUNCE,
        suggested_prompts: Vec::new(),
        file: src.rel.clone(),
        coordinator: Coordinator::Llm,
        models,
        // A subagent cannot wait for a person; tools needing approval stay with
        // the parent (see `run::context`).
        approval: super::ApprovalSettings::default(),
        prompt,
        tools,
        subagents: spec.subagents,
        skills: spec.skills,
        triggers: Vec::new(),
        filters: Vec::new(),
        preload_bytes: 0,
        context,
        reasoning: spec.reasoning,
        search,
        limits,
        // A subagent's answer always goes back to its caller.
        output: OutputSettings {
            reply: true,
            prompt_link: false,
            status: super::StatusMode::None,
            stream: false,
            feedback: false,
        },
        post_run: Default::default(),
        sandbox: Default::default(),
        vars: serde_json::Value::Object(Default::default()),
        private_egress: Vec::new(),
    })
}
