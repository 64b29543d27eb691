//! `steward improve AGENT`: a problem's runs become eval cases, the improver proposes
//! one change, and the gate runs the agent's suite plus the new cases live on the
//! current tree and on the candidate (both copied to a scratch folder) before anything
//! is written to `improvements/<agent>/<id>/`. `--apply` writes an accepted change to
//! the tree (a prompt hosted in Notion gets a comment, never an edit); `--github-pr`
//! opens a pull request with it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::{Outside, eval, load_config};
use crate::config::{AgentConfig, Config, Settings};
use crate::evals::ask::ask_json;
use crate::evals::draft::{self, DraftError};
use crate::evals::improve::{
    Improvement, evidence,
    gate::{self, DEFAULT_TOLERANCE},
    proposal::{self, CaseExpectations, FileChange},
};
use crate::evals::suite::{EvalMode, Suite};
use crate::evals::{CaseResult, review};
use crate::metrics::Metrics;
use crate::provider::ProviderSet;
use crate::run::Runner;
use crate::store::{SqliteStore, Store};

/// Cases (of both variants together) the gate runs at once; each runs its trials at
/// once, and the provider limiter paces the calls.
const GATE_CASES_AT_ONCE: usize = 16;
/// Folders never copied into the gate's scratch trees.
const NOT_COPIED: [&str; 5] = [".git", "target", "improvements", "node_modules", ".venv"];

/// Files the gate's scratch trees never need and should not hold a copy of: secrets
/// (`.env`, `.env.local`) and SQLite databases with their journals.
fn kept_out(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with(".env")
        || [".db", ".db-wal", ".db-shm", ".db-journal", ".sqlite", ".sqlite3"]
            .iter()
            .any(|x| name.ends_with(x))
}

/// What `steward improve` is asked.
#[derive(Debug, Clone)]
pub(crate) struct ImproveArgs {
    pub agent: String,
    /// 1-based rank in `steward review`'s list (default 1).
    pub problem: Option<usize>,
    /// Runs chosen by hand instead of a problem (ids or unique prefixes).
    pub runs: Vec<String>,
    pub since: std::time::Duration,
    pub trials: u32,
    pub tolerance: f64,
}

impl ImproveArgs {
    pub fn new(agent: &str) -> ImproveArgs {
        ImproveArgs {
            agent: agent.to_string(),
            problem: None,
            runs: Vec::new(),
            since: std::time::Duration::from_secs(7 * 86_400),
            trials: 3,
            tolerance: DEFAULT_TOLERANCE,
        }
    }
}

/// A proposal with what it takes to apply it.
pub(crate) struct Proposed {
    pub improvement: Improvement,
    /// `improvements/<agent>/<id>/` (absolute).
    pub dir: PathBuf,
    pub files: Vec<FileChange>,
    /// The new cases: path relative to the root, text.
    pub cases: Vec<(PathBuf, String)>,
    /// The candidate's recordings: path relative to the root, text.
    pub recordings: Vec<(PathBuf, String)>,
}

/// A scratch folder in the system's temporary folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("steward-improve-{}", uuid::Uuid::now_v7()));
        // Its own user's alone: the candidate's recordings and runs are in it.
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A runner for steward's own helpers (the improver, the reviewer): the environment's
/// providers and a store of its own in `dir` (their runs are not production runs).
async fn helper_runner(
    providers: &ProviderSet,
    config: &Config,
    tools: crate::tools::ToolRegistry,
    skills: &crate::skills::SkillSet,
    dir: &Path,
) -> anyhow::Result<Runner> {
    let store = Arc::new(SqliteStore::open(&dir.join("helper.db")).await?);
    Ok(Runner::builder(store)
        .providers(providers.clone())
        .tools(tools)
        .subagents(config.subagents.clone())
        .skills(skills.clone())
        .build())
}

/// `steward review`'s naming step: when the tree has a `reviewer` subagent, it reads
/// the problems' evidence (private runs as metadata and scores) as the file
/// `problems.md` and names each problem in a sentence. Without a reviewer, nothing is
/// asked.
pub(super) async fn name_problems(
    root: &Path,
    env: &Settings,
    metrics: Arc<Metrics>,
    store: &dyn Store,
    review: &mut review::Review,
) -> anyhow::Result<()> {
    let outside = Outside::new(env.clone(), metrics)?;
    let tools = outside.tools();
    let skills = outside.skills(root);
    let config = load_config(root, &tools, &skills)?;
    let Some(reviewer) = config.subagents.get("reviewer").cloned() else {
        return Ok(());
    };
    helper_keys(env, &reviewer)?;
    let mut examples = Vec::new();
    for p in review.problems.iter().take(review::NAMED) {
        examples.push(evidence::gather(store, &p.examples).await?);
    }
    let file = review::evidence_file(review, &examples);
    let scratch = Scratch::new().context("cannot make a scratch folder")?;
    let providers = outside.providers().with_prices(config.prices.clone());
    let runner = helper_runner(&providers, &config, tools, &skills, &scratch.0).await?;
    let question = review::reviewer_question(review);
    let (named, _cost) = ask_json(&runner, &reviewer, &question, Some(("problems.md", &file)), |v| {
        review::names(review, &v)
    })
    .await?;
    review::set_names(review, named);
    Ok(())
}

/// The improver: `subagents/improver.yaml`, else the judge.
fn improver(config: &Config) -> anyhow::Result<Arc<AgentConfig>> {
    config
        .subagents
        .get("improver")
        .or_else(|| config.subagents.get("judge"))
        .cloned()
        .ok_or_else(|| {
            anyhow::anyhow!(
                "steward improve needs an improver: add subagents/improver.yaml (a model and a short prompt; see docs/evals.md), or a judge (subagents/judge.yaml), which it falls back to"
            )
        })
}

/// A helper subagent's model keys, checked before it runs.
fn helper_keys(env: &Settings, helper: &AgentConfig) -> anyhow::Result<()> {
    for m in &helper.models {
        let Some(key) = eval::missing_key(env, m) else {
            continue;
        };
        anyhow::bail!(
            "the {} ({}) calls {m} and needs {key}; set it, or give it another model",
            helper.name,
            helper.file.display()
        );
    }
    Ok(())
}

/// The runs to improve from, and the problem they show.
async fn selection(store: &dyn Store, args: &ImproveArgs) -> anyhow::Result<(String, Vec<String>)> {
    if !args.runs.is_empty() {
        let mut ids = Vec::new();
        for prefix in &args.runs {
            let found = store.run_ids_with_prefix(prefix, 2).await?;
            match found.as_slice() {
                [one] => ids.push(one.clone()),
                [] => anyhow::bail!("no run {prefix}"),
                _ => anyhow::bail!("run id prefix {prefix} is ambiguous; give more of it"),
            }
        }
        return Ok(("runs chosen by hand (--runs)".to_string(), ids));
    }
    let since = crate::store::ago(args.since);
    let review = review::review(store, &args.agent, since).await?;
    let n = args.problem.unwrap_or(1);
    if review.problems.is_empty() {
        anyhow::bail!(
            "steward review found no problems for {} in {} runs since {}; nothing to improve (or name runs with --runs)",
            args.agent,
            review.runs,
            since.format("%Y-%m-%d %H:%M UTC")
        );
    }
    let Some(problem) = n.checked_sub(1).and_then(|i| review.problems.get(i)) else {
        anyhow::bail!(
            "--problem {n}: the review of {} lists problems 1 to {}",
            args.agent,
            review.problems.len()
        );
    };
    Ok((
        format!(
            "{} ({} of {} runs; the fix likely lies in {})",
            problem.problem, problem.runs, review.runs, problem.fix_in
        ),
        problem.examples.clone(),
    ))
}

/// The files the improver may change: the agent's YAML, its prompt (a Notion-hosted one
/// as `notion:<page>`), and the `SKILL.md` of each skill it requires that lives in the
/// tree.
async fn changeable(
    root: &Path,
    outside: &Outside,
    agent: &AgentConfig,
    skills: &crate::skills::SkillSet,
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    let rel = agent.file.to_string_lossy().into_owned();
    let text =
        std::fs::read_to_string(root.join(&agent.file)).with_context(|| format!("cannot read {rel}"))?;
    files.insert(rel, text);
    if let Some(prompt) = &agent.prompt {
        if let Some(page) = prompt.path.strip_prefix("notion:") {
            let notion = outside.clients.notion.as_ref().ok_or_else(|| {
                anyhow::anyhow!(
                    "{}'s prompt lives in Notion and NOTION_TOKEN is not set",
                    agent.name
                )
            })?;
            let text = notion
                .page_markdown(page.trim(), 1_000)
                .await
                .with_context(|| format!("cannot read the prompt page {page}"))?;
            files.insert(prompt.path.clone(), text);
        } else {
            files.insert(prompt.path.clone(), prompt.text.clone());
        }
    }
    for name in &agent.skills.required {
        if let Some(skill) = skills.skills.get(name)
            && let Ok(rel) = skill.dir.join("SKILL.md").strip_prefix(root)
            && let Ok(text) = std::fs::read_to_string(root.join(rel))
        {
            files.insert(rel.to_string_lossy().into_owned(), text);
        }
    }
    Ok(files)
}

/// A draft case with the improver's expectations: the run's trigger and tool results,
/// the criteria and strings to contain, and an ending of `completed` (the calls the
/// run made are not expected again: the fix may change them).
fn case_yaml(draft: &draft::Draft, expect: &CaseExpectations, problem: &str) -> anyhow::Result<String> {
    let mut case: Value = serde_yaml::from_str(&draft.yaml).context("the draft case is not YAML")?;
    case["description"] = json!(format!("From run {}: {problem}", draft.run_id));
    let mut expectations = json!({ "termination": "completed" });
    if !expect.reply_contains.is_empty() {
        expectations["reply"] = json!({ "contains": expect.reply_contains });
    }
    case["expect"] = expectations;
    case["criteria"] = json!(expect.criteria);
    Ok(format!(
        "# Written by `steward improve` from run {} (expectations drafted by the improver).\n{}",
        draft.run_id,
        serde_yaml::to_string(&case)?
    ))
}

/// Copies the config tree at `from` into `to`, leaving out [`NOT_COPIED`] and the files
/// [`kept_out`] names; links are copied as links.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if NOT_COPIED.iter().any(|n| name == *n) {
            continue;
        }
        let kind = entry.file_type()?;
        if !kind.is_dir() && kept_out(&name) {
            continue;
        }
        let target = to.join(&name);
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            // As a link, not its target's bytes: a link that leads out of the tree stays
            // one (and config loading refuses it) in the copy too.
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Writes `text` at `rel` under `root`, making its folder. `rel` comes from the
/// improver's answer: a path that is absolute or climbs out is refused.
fn write_at(root: &Path, rel: &Path, text: &str) -> std::io::Result<()> {
    if !rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{}' is not a path inside the config folder", rel.display()),
        ));
    }
    let path = root.join(rel);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

/// A prompt hosted in Notion, pinned in a scratch tree to `text`: the agent's YAML
/// points at a local copy, so both variants run on the text the improver saw.
fn pin_notion_prompt(tree: &Path, agent: &AgentConfig, prompt_path: &str, text: &str) -> anyhow::Result<()> {
    let local = format!("prompts/.improve-{}.md", agent.name);
    write_at(tree, Path::new(&local), text)?;
    let yaml_path = tree.join(&agent.file);
    let yaml = std::fs::read_to_string(&yaml_path)?;
    let page = prompt_path.trim_start_matches("notion:");
    let pinned: Vec<String> = yaml
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("prompt:") && l.contains(page) {
                format!("prompt: {local}")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&yaml_path, pinned.join("\n") + "\n")?;
    Ok(())
}

/// One side of the gate: a tree's config, tools and skills.
struct Variant {
    suite: Suite,
    cases: Vec<crate::evals::Case>,
    broken: Vec<CaseResult>,
    /// Keeps MCP servers connected while the gate runs.
    _hub: Option<Arc<crate::integrations::mcp::McpHub>>,
}

impl Variant {
    /// Loads `tree`; a config that does not load is the error (for the candidate: the
    /// reason it is rejected).
    async fn load(
        outside: &Outside,
        tree: &Path,
        agent: &str,
        mode: EvalMode,
        trials: u32,
        real: &ProviderSet,
    ) -> anyhow::Result<Variant> {
        let mut tools = outside.tools();
        let skills = outside.skills(tree);
        let config = Arc::new(load_config(tree, &tools, &skills)?);
        let hub = outside.connect_mcp(&mut tools, &config, None).await;
        let names: Vec<String> = tools.names().into_iter().collect();
        let (cases, broken) = eval::cases(tree, &[agent.to_string()], &config, &names);
        Ok(Variant {
            suite: Suite {
                root: tree.to_path_buf(),
                config,
                tools: Arc::new(tools),
                skills: Arc::new(skills),
                real: real.clone(),
                tokens: Arc::default(),
                mode,
                trials: Some(trials),
                concurrent_trials: true,
            },
            cases,
            broken,
            _hub: hub,
        })
    }
}

/// Runs both variants' cases, all at once up to [`GATE_CASES_AT_ONCE`]; returns the
/// results of each, sorted by case id.
async fn run_gate(current: &Variant, candidate: &Variant) -> (Vec<CaseResult>, Vec<CaseResult>) {
    let jobs = current
        .cases
        .iter()
        .map(|c| (0, &current.suite, c))
        .chain(candidate.cases.iter().map(|c| (1, &candidate.suite, c)));
    let done: Vec<(usize, CaseResult)> = futures_util::stream::iter(jobs)
        .map(|(side, suite, case)| async move { (side, suite.run_case(case).await) })
        .buffer_unordered(GATE_CASES_AT_ONCE)
        .collect()
        .await;
    let mut sides = (current.broken.clone(), candidate.broken.clone());
    for (side, result) in done {
        if side == 0 {
            sides.0.push(result);
        } else {
            sides.1.push(result);
        }
    }
    sides.0.sort_by(|a, b| a.id.cmp(&b.id));
    sides.1.sort_by(|a, b| a.id.cmp(&b.id));
    sides
}

/// A free name for a new case: `evals/<agent>/improve-<short>.yaml`, numbered when
/// taken.
fn case_path(root: &Path, agent: &str, run_id: &str) -> PathBuf {
    let short = draft::short_id(run_id);
    let dir = PathBuf::from("evals").join(agent);
    let mut rel = dir.join(format!("improve-{short}.yaml"));
    let mut n = 2;
    while root.join(&rel).exists() {
        rel = dir.join(format!("improve-{short}-{n}.yaml"));
        n += 1;
    }
    rel
}

/// Finds the problem's runs, drafts cases, asks the improver for a change, runs the
/// gate and writes `improvements/<agent>/<id>/`. Nothing in the tree outside that
/// folder changes.
pub(crate) async fn propose(
    root: &Path,
    env: &Settings,
    store: &dyn Store,
    metrics: Arc<Metrics>,
    args: &ImproveArgs,
) -> anyhow::Result<Proposed> {
    if args.trials == 0 {
        anyhow::bail!("--trials must be at least 1");
    }
    if !(0.0..=1.0).contains(&args.tolerance) {
        anyhow::bail!("--tolerance is a share of trials, from 0 to 1");
    }
    let outside = Outside::new(env.clone(), metrics)?;
    let tools = outside.tools();
    let skills = outside.skills(root);
    let config = load_config(root, &tools, &skills)?;
    let agent = config.agent(&args.agent).map_err(anyhow::Error::msg)?;
    let improver = improver(&config)?;
    helper_keys(env, &improver)?;

    let (problem, ids) = selection(store, args).await?;
    let mut skipped = Vec::new();
    let mut drafts = Vec::new();
    for id in &ids {
        match draft::from_run(store, id).await {
            Ok(d) if d.agent != args.agent => {
                anyhow::bail!("run {id} is a run of {}, not {}", d.agent, args.agent)
            }
            Ok(d) => drafts.push(d),
            Err(e @ (DraftError::Private(_) | DraftError::NoTrigger(_))) => skipped.push(e.to_string()),
            Err(e) => return Err(e.into()),
        }
    }
    if drafts.is_empty() {
        anyhow::bail!(
            "none of the problem's runs can become an eval case: {}; name other runs with --runs",
            skipped.join("; ")
        );
    }
    let evidence = evidence::gather(store, &ids).await?;
    let evidence_md = evidence::markdown(&problem, &evidence);

    let scratch = Scratch::new().context("cannot make a scratch folder")?;
    let real = outside.providers().with_prices(config.prices.clone());
    let runner = helper_runner(&real, &config, tools, &skills, &scratch.0).await?;

    // (a) the new cases' expectations.
    let draft_ids: Vec<String> = drafts.iter().map(|d| d.run_id.clone()).collect();
    let question = proposal::cases_question(&evidence_md, &draft_ids);
    let attached = proposal::attachment(&evidence_md);
    let (expectations, mut improver_cost) = ask_json(&runner, &improver, &question, attached, |v| {
        proposal::parse_cases(v, &draft_ids)
    })
    .await?;
    if expectations.iter().any(|e| !e.criteria.is_empty()) && !config.subagents.contains_key("judge") {
        anyhow::bail!("the improver drafted criteria, which a judge scores: add subagents/judge.yaml");
    }
    let mut cases = Vec::new();
    for expect in &expectations {
        let Some(d) = drafts.iter().find(|d| d.run_id == expect.run) else {
            continue;
        };
        let rel = case_path(root, &args.agent, &d.run_id);
        if cases.iter().any(|(r, _): &(PathBuf, String)| *r == rel) {
            continue;
        }
        cases.push((rel, case_yaml(d, expect, &problem)?));
    }

    // (b) the candidate change.
    let files = changeable(root, &outside, &agent, &skills).await?;
    let question = proposal::change_question(&evidence_md, &expectations, &files);
    let ((change, changed), cost) = ask_json(&runner, &improver, &question, attached, |v| {
        proposal::parse_change(v, &files)
    })
    .await?;
    improver_cost += cost;

    // (c) the gate, on two copies of the tree.
    let (current_tree, candidate_tree) = (scratch.0.join("current"), scratch.0.join("candidate"));
    for tree in [&current_tree, &candidate_tree] {
        copy_tree(root, tree).context("cannot copy the config tree")?;
        for (rel, text) in &cases {
            write_at(tree, rel, text)?;
        }
        if let Some((path, text)) = files.iter().find(|(p, _)| p.starts_with("notion:")) {
            pin_notion_prompt(tree, &agent, path, text)?;
        }
    }
    for c in &changed {
        match c.file.strip_prefix("notion:") {
            Some(_) => pin_notion_prompt(&candidate_tree, &agent, &c.file, &c.after)?,
            None => write_at(&candidate_tree, Path::new(&c.file), &c.after)?,
        }
    }
    let current = Variant::load(
        &outside,
        &current_tree,
        &args.agent,
        EvalMode::Live,
        args.trials,
        &real,
    )
    .await?;
    eval::missing_keys(env, &current.suite.config, &current.cases)?;
    let new_ids: BTreeSet<String> = cases
        .iter()
        .map(|(rel, _)| {
            rel.strip_prefix("evals")
                .unwrap_or(rel)
                .with_extension("")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let id = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let dir = root.join("improvements").join(&args.agent).join(&id);
    let patch = proposal::unified_diff(&changed);
    let (deltas, decision, recordings) = match Variant::load(
        &outside,
        &candidate_tree,
        &args.agent,
        EvalMode::Record,
        args.trials,
        &real,
    )
    .await
    {
        Ok(candidate) => {
            let (before, after) = run_gate(&current, &candidate).await;
            let (deltas, decision) = gate::decide(&before, &after, &new_ids, args.tolerance);
            // Every case of the agent, recorded on the candidate: applied, the change
            // replays green in CI (an edited prompt misses the old recordings).
            let mut recordings = Vec::new();
            for case in &candidate.cases {
                let path = crate::evals::suite::cassette_path(&candidate_tree, case);
                if let Ok(text) = std::fs::read_to_string(&path) {
                    let rel = path.strip_prefix(&candidate_tree).unwrap_or(&path).to_path_buf();
                    recordings.push((rel, text));
                }
            }
            (deltas, decision, recordings)
        }
        Err(e) => (
            Vec::new(),
            gate::Decision {
                accepted: false,
                why: format!("rejected: the candidate's config does not load: {e:#}"),
                broke: Vec::new(),
            },
            Vec::new(),
        ),
    };
    let improvement = Improvement {
        id,
        agent: args.agent.clone(),
        problem,
        runs: ids,
        skipped,
        new_cases: new_ids.into_iter().collect(),
        rationale: change.rationale,
        patch,
        trials: args.trials,
        tolerance: args.tolerance,
        cases: deltas,
        decision,
        improver_cost_usd: improver_cost,
    };

    // (d) the folder.
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot make {}", dir.display()))?;
    std::fs::write(dir.join("patch.diff"), &improvement.patch)?;
    std::fs::write(dir.join("report.md"), improvement.markdown())?;
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&improvement)? + "\n",
    )?;
    // What "Open PR" on a digest's report needs later: the files before and after.
    std::fs::write(
        dir.join("changes.json"),
        serde_json::to_string_pretty(&changed)? + "\n",
    )?;
    for (rel, text) in &cases {
        let name = rel.file_name().unwrap_or_default();
        write_at(&dir, &Path::new("cases").join(name), text)?;
    }
    for (rel, text) in &recordings {
        write_at(
            &dir,
            &Path::new("recordings").join(rel.strip_prefix("evals/cassettes").unwrap_or(rel)),
            text,
        )?;
    }
    for c in changed.iter().filter(|c| c.file.starts_with("notion:")) {
        std::fs::write(dir.join("proposed-prompt.md"), &c.after)?;
    }
    Ok(Proposed {
        improvement,
        dir,
        files: changed,
        cases,
        recordings,
    })
}

/// An improvement written earlier, read back from `improvements/<agent>/<id>/` (for
/// "Open PR" on a digest's report).
pub(crate) fn load(root: &Path, agent: &str, id: &str) -> anyhow::Result<Proposed> {
    let safe = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    };
    if !safe(agent) || !safe(id) {
        anyhow::bail!("no improvement {agent}/{id}");
    }
    let dir = root.join("improvements").join(agent).join(id);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .with_context(|| format!("cannot read improvements/{agent}/{id}/{name}"))
    };
    let improvement: Improvement = serde_json::from_str(&read("report.json")?)?;
    let files: Vec<FileChange> = serde_json::from_str(&read("changes.json")?)?;
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(dir.join("cases"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let rel = Path::new("evals").join(agent).join(entry.file_name());
        cases.push((rel, std::fs::read_to_string(entry.path())?));
    }
    let mut recordings = Vec::new();
    let recorded = dir.join("recordings");
    let mut stack = vec![recorded.clone()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(&recorded) {
                recordings.push((
                    Path::new("evals/cassettes").join(rel),
                    std::fs::read_to_string(&path)?,
                ));
            }
        }
    }
    Ok(Proposed {
        improvement,
        dir,
        files,
        cases,
        recordings,
    })
}

/// Writes an accepted change into the tree: the edited files, the new cases and the
/// recordings. A prompt hosted in Notion is not edited: the proposed text goes to its
/// page as a comment. Returns what was done, a line each.
pub(crate) async fn apply(
    root: &Path,
    outside_env: &Settings,
    proposed: &Proposed,
) -> anyhow::Result<Vec<String>> {
    if !proposed.improvement.decision.accepted {
        anyhow::bail!(
            "the candidate was rejected; nothing applied ({})",
            proposed.improvement.decision.why
        );
    }
    let mut done = Vec::new();
    for c in &proposed.files {
        if let Some(page) = c.file.strip_prefix("notion:") {
            let http = crate::http::client().context("cannot build the HTTP client")?;
            let clients = crate::integrations::Clients::from_settings(http, outside_env);
            let notion = clients.notion.ok_or_else(|| {
                anyhow::anyhow!("NOTION_TOKEN is not set: cannot comment on the prompt page")
            })?;
            let text = format!(
                "steward improve proposes this prompt ({}; report in improvements/{}/{}):\n\n{}",
                proposed.improvement.decision.why,
                proposed.improvement.agent,
                proposed.improvement.id,
                c.after
            );
            notion.add_comment(page.trim(), &text).await?;
            done.push(format!(
                "commented the proposed prompt on Notion page {}",
                page.trim()
            ));
        } else {
            write_at(root, Path::new(&c.file), &c.after)?;
            done.push(format!("changed {}", c.file));
        }
    }
    for (rel, text) in proposed.cases.iter().chain(&proposed.recordings) {
        write_at(root, rel, text)?;
        done.push(format!("wrote {}", rel.display()));
    }
    Ok(done)
}

/// Opens a pull request in `repo` with the change, the new cases, the recordings and
/// the improvement's folder; returns its address.
pub(crate) async fn github_pr(
    root: &Path,
    env: &Settings,
    repo: &str,
    proposed: &Proposed,
) -> anyhow::Result<String> {
    let imp = &proposed.improvement;
    if !imp.decision.accepted {
        anyhow::bail!(
            "the candidate was rejected; no pull request ({})",
            imp.decision.why
        );
    }
    if env.github_token.is_none() {
        anyhow::bail!("--github-pr needs GITHUB_TOKEN (contents and pull requests: write)");
    }
    let http = crate::http::client().context("cannot build the HTTP client")?;
    let github = crate::integrations::github::GithubClient::from_settings(http, env);
    let base = github.repository(repo).await?["default_branch"]
        .as_str()
        .unwrap_or("main")
        .to_string();
    let sha = github.branch_sha(repo, &base).await?;
    let branch = format!("steward/improve-{}-{}", imp.agent, imp.id.to_lowercase());
    github.create_branch(repo, &branch, &sha).await?;
    let message = format!("steward improve {}: {}", imp.agent, imp.id);
    let mut files: Vec<(String, String)> = proposed
        .files
        .iter()
        .filter(|c| !c.file.starts_with("notion:"))
        .map(|c| (c.file.clone(), c.after.clone()))
        .collect();
    for (rel, text) in proposed.cases.iter().chain(&proposed.recordings) {
        files.push((rel.to_string_lossy().into_owned(), text.clone()));
    }
    let folder = proposed.dir.strip_prefix(root).unwrap_or(&proposed.dir);
    for name in ["report.md", "report.json", "patch.diff"] {
        let text = std::fs::read_to_string(proposed.dir.join(name))?;
        files.push((folder.join(name).to_string_lossy().into_owned(), text));
    }
    for (path, text) in &files {
        github
            .put_file(repo, &branch, path, text.as_bytes(), &message)
            .await?;
    }
    let title = format!(
        "steward improve: {}: {}",
        imp.agent,
        crate::triggers::event::one_line(&imp.problem, 80)
    );
    let pr = github
        .create_pull(repo, &branch, &base, &title, &imp.markdown())
        .await?;
    Ok(pr["html_url"].as_str().unwrap_or_default().to_string())
}

/// What `steward improve` does with an accepted candidate, and how it reports.
pub(super) struct Output {
    pub apply: bool,
    /// Open a pull request in this repository (`owner/name`).
    pub pr_repo: Option<String>,
    pub json: bool,
}

/// `steward improve`: proposes, then applies or opens a pull request when asked; prints
/// the report. Exit 0 when the candidate was accepted, 1 when rejected.
pub(super) async fn improve(
    root: &Path,
    env: &Settings,
    store: &dyn Store,
    metrics: Arc<Metrics>,
    args: ImproveArgs,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let Output {
        apply: do_apply,
        pr_repo,
        json: json_out,
    } = output;
    let proposed = propose(root, env, store, metrics, &args).await?;
    let imp = &proposed.improvement;
    let mut notes = vec![format!(
        "wrote {}",
        proposed.dir.strip_prefix(root).unwrap_or(&proposed.dir).display()
    )];
    if imp.decision.accepted {
        if do_apply {
            notes.extend(apply(root, env, &proposed).await?);
        }
        if let Some(repo) = &pr_repo {
            notes.push(format!("opened {}", github_pr(root, env, repo, &proposed).await?));
        }
    } else if do_apply || pr_repo.is_some() {
        notes.push("the candidate was rejected: nothing applied, no pull request".into());
    }
    if json_out {
        println!("{}", serde_json::to_string_pretty(imp)?);
    } else {
        print!("{}", imp.markdown());
    }
    for n in notes {
        eprintln!("{n}");
    }
    Ok(if imp.decision.accepted {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
