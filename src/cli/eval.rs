//! `steward eval`: runs eval cases (`evals/<agent>/<case>.yaml`) in replay, record or
//! live mode and reports them as a table, JSON or JUnit, optionally against an earlier
//! result.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;

use super::{Outside, load_config, mcp_dir, replay_mcp};
use crate::config::Settings;
use crate::evals::report::{self, Report};
use crate::evals::suite::{self, EvalMode, Suite};
use crate::evals::{Case, CaseResult, case};
use crate::integrations::mcp;

/// How `steward eval` runs and reports.
pub(super) struct EvalArgs {
    /// Agent names, case ids (`helpdesk/vpn`) or paths; empty = every case.
    pub targets: Vec<String>,
    pub mode: EvalMode,
    pub trials: Option<u32>,
    pub json: bool,
    pub junit: Option<PathBuf>,
    pub compare: Option<PathBuf>,
    /// Tokens or cost per trial may grow this much before `--compare` fails.
    pub threshold: f64,
}

/// Whether `file` (a case under `evals/`) is one of `targets`.
fn selected(root: &Path, file: &Path, targets: &[String]) -> bool {
    if targets.is_empty() {
        return true;
    }
    let rel = file.strip_prefix(root.join("evals")).unwrap_or(file);
    let id = rel.with_extension("").to_string_lossy().into_owned();
    let agent = id.split('/').next().unwrap_or_default().to_string();
    targets.iter().any(|t| {
        let t = t.trim_end_matches('/');
        t == agent
            || t == id
            || Path::new(t) == file
            || root.join(t) == file
            || file.starts_with(root.join(t))
            || file.starts_with(t)
    })
}

/// Every selected case, loaded; a case that does not load is a failed result of its own
/// (the rest still run).
fn cases(
    root: &Path,
    targets: &[String],
    config: &crate::config::Config,
    tools: &[String],
) -> (Vec<Case>, Vec<CaseResult>) {
    let mut ok = Vec::new();
    let mut broken = Vec::new();
    for file in case::case_files(&root.join("evals")) {
        if !selected(root, &file, targets) {
            continue;
        }
        match case::load(root, &file, config, tools) {
            Ok(c) => ok.push(c),
            Err(diags) => {
                let rel = file.strip_prefix(root.join("evals")).unwrap_or(&file);
                let id = rel.with_extension("").to_string_lossy().into_owned();
                let agent = id.split('/').next().unwrap_or_default().to_string();
                let text: Vec<String> = diags.iter().map(ToString::to_string).collect();
                broken.push(suite::broken(&id, &agent, text.join("\n")));
            }
        }
    }
    (ok, broken)
}

/// Problems in every case file, for `steward validate`.
pub(super) fn validate_cases(root: &Path, config: &crate::config::Config, tools: &[String]) -> Vec<String> {
    case::case_files(&root.join("evals"))
        .iter()
        .filter_map(|f| case::load(root, f, config, tools).err())
        .flatten()
        .map(|d| d.to_string())
        .collect()
}

pub(super) async fn eval(root: &Path, env: &Settings, args: EvalArgs) -> anyhow::Result<ExitCode> {
    let outside = Outside::new(env.clone(), Arc::default())?;
    let mut tools = outside.tools();
    let skills = outside.skills(root);
    let config = Arc::new(load_config(root, &tools, &skills)?);
    // MCP tools: replays answer from the servers' cassettes without reaching them;
    // recording reaches them and records; live reaches them.
    let hub = match args.mode {
        EvalMode::Replay => {
            for w in replay_mcp(root, &mut tools, &config) {
                eprintln!("warning: {w}");
            }
            None
        }
        EvalMode::Record | EvalMode::Live => {
            let recordings = mcp::Recordings {
                dir: mcp_dir(root),
                mode: if args.mode == EvalMode::Record {
                    mcp::Recording::Record
                } else {
                    mcp::Recording::Live
                },
            };
            outside.connect_mcp(&mut tools, &config, Some(&recordings)).await
        }
    };
    let names: Vec<String> = tools.names().into_iter().collect();
    let (cases, mut results) = cases(root, &args.targets, &config, &names);
    if cases.is_empty() && results.is_empty() {
        anyhow::bail!(
            "no eval cases{} under {}",
            if args.targets.is_empty() {
                String::new()
            } else {
                format!(" match {}", args.targets.join(" "))
            },
            root.join("evals").display()
        );
    }
    if args.mode != EvalMode::Replay {
        missing_keys(env, &config, &cases)?;
    }
    let suite = Suite {
        root: root.to_path_buf(),
        config,
        tools: Arc::new(tools),
        skills: Arc::new(skills),
        real: outside.providers(),
        tokens: Arc::default(),
        mode: args.mode,
        trials: args.trials,
    };
    // A progress bar on a terminal; nothing on a pipe or in CI logs.
    let progress = if std::io::stderr().is_terminal() {
        indicatif::ProgressBar::new(cases.len() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}") {
        progress.set_style(style);
    }
    for case in &cases {
        progress.set_message(case.id.clone());
        results.push(suite.run_case(case).await);
        progress.inc(1);
    }
    progress.finish_and_clear();
    if let Some(hub) = hub {
        for file in hub.save_recordings()? {
            eprintln!("recorded {}", file.strip_prefix(root).unwrap_or(&file).display());
        }
    }
    results.sort_by(|a, b| a.id.cmp(&b.id));
    let report = Report::new(args.mode, results);
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.table());
    }
    if let Some(path) = &args.junit {
        std::fs::write(path, report.junit()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut ok = report.passed;
    if let Some(path) = &args.compare {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let earlier: report::Earlier = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a `steward eval --json` result", path.display()))?;
        let regressions = report::compare(&report, &earlier, args.threshold);
        if regressions.is_empty() {
            eprintln!("no regressions against {}", path.display());
        } else {
            eprintln!("regressions against {}:", path.display());
            for r in &regressions {
                eprintln!("  {r}");
            }
            ok = false;
        }
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Answers model calls with a recorded run's responses, in order, whatever is asked:
/// replaying it once in record mode writes a cassette keyed by the real requests.
struct Sequence {
    responses: std::sync::Mutex<std::collections::VecDeque<crate::provider::ChatResponse>>,
}

#[async_trait::async_trait]
impl crate::provider::Provider for Sequence {
    fn name(&self) -> &'static str {
        "recorded"
    }

    async fn chat(
        &self,
        _request: &crate::provider::ChatRequest<'_>,
    ) -> Result<crate::provider::ChatResponse, crate::provider::ProviderError> {
        self.responses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
            .ok_or_else(|| {
                crate::provider::ProviderError::new(
                    "recorded",
                    crate::provider::ErrorKind::BadRequest,
                    "the run asked the model more often than the recorded run did",
                )
            })
    }
}

/// A tool's recorded results as a case mock: one value, a sequence, or an error.
/// Recording or running live calls the real models: every provider the selected cases'
/// agents (and their fallbacks and subagents) use needs its key, checked before any
/// trial runs rather than failing each one.
fn missing_keys(env: &Settings, config: &crate::config::Config, cases: &[Case]) -> anyhow::Result<()> {
    let mut missing: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for case in cases {
        let Some(agent) = config.agents.get(&case.agent) else {
            continue;
        };
        let subagents = agent.subagents.iter().filter_map(|s| config.subagents.get(s));
        let models = agent.models.iter().chain(subagents.flat_map(|s| s.models.iter()));
        for m in models {
            let key = match m.provider.as_str() {
                "openai" if env.openai_api_key.is_none() => "OPENAI_API_KEY",
                "anthropic" if env.anthropic_api_key.is_none() => "ANTHROPIC_API_KEY",
                _ => continue,
            };
            let list = missing.entry(key).or_default();
            if !list.contains(&case.id.as_str()) {
                list.push(case.id.as_str());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let needs: Vec<String> = missing
        .iter()
        .map(|(key, cases)| format!("{key} (for {})", cases.join(", ")))
        .collect();
    anyhow::bail!(
        "calling the real models needs {}; set it, or replay the recordings with `steward eval`",
        needs.join(" and ")
    )
}

fn mock_of(results: &[Result<serde_json::Value, String>]) -> serde_json::Value {
    use serde_json::json;
    if let [Err(e)] | [Err(e), ..] = results
        && results.iter().all(|r| r.is_err())
    {
        return json!({ "error": e });
    }
    let values: Vec<serde_json::Value> = results
        .iter()
        .map(|r| match r {
            Ok(v) => v.clone(),
            Err(e) => serde_json::Value::String(format!("error: {e}")),
        })
        .collect();
    match values.as_slice() {
        [one] => json!({ "result": one }),
        many if many.iter().all(|v| v == &many[0]) => json!({ "result": many[0] }),
        many => json!({ "results": many }),
    }
}

/// `steward eval new --from-run ID`: a draft case from a recorded run (its trigger, its
/// tool results as mocks, its expectations as observed, empty criteria) and a cassette
/// of its model answers; the new case replays green.
pub(super) async fn new_from_run(
    root: &Path,
    env: &Settings,
    store: &dyn crate::store::Store,
    id: &str,
) -> anyhow::Result<ExitCode> {
    use serde_json::{Value, json};
    let ids = store.run_ids_with_prefix(id, 2).await?;
    let id = match ids.as_slice() {
        [one] => one.clone(),
        [] => anyhow::bail!("no run {id}"),
        _ => anyhow::bail!("run id prefix {id} is ambiguous; give more of it"),
    };
    let Some(run) = store.get_run(&id).await? else {
        anyhow::bail!("no run {id}");
    };
    if run.private {
        anyhow::bail!(
            "run {id} came from a private channel: its text was never stored, so it cannot become an eval case"
        );
    }
    let events = store.run_events(&id).await?;
    let started = events
        .iter()
        .find(|e| e.kind == "run_started")
        .context("the run has no run_started event")?;
    let trigger: Value = started.data["trigger"]
        .as_str()
        .and_then(|t| serde_json::from_str(t).ok())
        .context("the run was recorded before steward kept triggers; only newer runs can become cases")?;
    let mut tool_results: std::collections::BTreeMap<String, Vec<Result<Value, String>>> = Default::default();
    let mut responses = std::collections::VecDeque::new();
    let mut called = std::collections::BTreeMap::<String, u32>::new();
    for e in &events {
        let d = &e.data;
        match e.kind.as_str() {
            "tool_result" if d["parent_call_id"].is_null() => {
                let name = d["name"].as_str().unwrap_or_default().to_string();
                *called.entry(name.clone()).or_default() += 1;
                let result = if d["ok"].as_bool() == Some(true) {
                    let text = d["content"].as_str().unwrap_or_default();
                    Ok(serde_json::from_str::<Value>(text)
                        .ok()
                        .filter(|v| v.is_object() || v.is_array())
                        .unwrap_or_else(|| Value::String(text.to_string())))
                } else {
                    Err(d["error"].as_str().unwrap_or("failed").to_string())
                };
                tool_results.entry(name).or_default().push(result);
            }
            "model_response" => {
                let calls = d["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| crate::provider::ToolCall {
                        id: c["id"].as_str().unwrap_or_default().to_string(),
                        name: c["name"].as_str().unwrap_or_default().to_string(),
                        arguments: c["arguments"].as_str().unwrap_or("{}").to_string(),
                    })
                    .collect();
                responses.push_back(crate::provider::ChatResponse {
                    text: d["text"].as_str().map(str::to_string),
                    tool_calls: calls,
                    usage: serde_json::from_value(d["usage"].clone()).unwrap_or_default(),
                    stop_reason: d["stop_reason"].as_str().unwrap_or_default().to_string(),
                    model: d["response_model"].as_str().unwrap_or_default().to_string(),
                    id: String::new(),
                    // Runs record no reasoning; a replay continues without it.
                    reasoning: Vec::new(),
                    spent_for: None,
                });
            }
            _ => {}
        }
    }
    let mocks: serde_json::Map<String, Value> = tool_results
        .iter()
        .map(|(name, results)| (name.clone(), mock_of(results)))
        .collect();
    let short: String = id
        .chars()
        .rev()
        .take(8)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let rel = PathBuf::from("evals")
        .join(&run.agent)
        .join(format!("from-run-{short}.yaml"));
    let case = json!({
        "description": format!("From run {id} ({}). Fill in what a good run does.", run.trigger_summary),
        "trigger": { "event": trigger },
        "mocks": mocks,
        "expect": {
            "calls": called,
            "termination": run.termination.clone().unwrap_or_else(|| "completed".into()),
        },
        "criteria": [],
    });
    let yaml = serde_yaml::to_string(&case)?;
    let header = format!(
        "# Draft eval case written by `steward eval new --from-run {id}`.\n# Add criteria (plain-language statements a judge scores) and tighten the expectations.\n"
    );
    let path = root.join(&rel);
    if path.exists() {
        anyhow::bail!("{} already exists", rel.display());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, format!("{header}{yaml}"))?;

    // Replay the recorded answers once in record mode: the cassette gets real keys.
    let outside = Outside::new(env.clone(), Arc::default())?;
    let mut tools = outside.tools();
    let skills = outside.skills(root);
    let config = Arc::new(load_config(root, &tools, &skills)?);
    // The run's MCP tool results are the case's mocks; their definitions come from the
    // servers' cassettes.
    for w in replay_mcp(root, &mut tools, &config) {
        eprintln!("warning: {w}");
    }
    let names: Vec<String> = tools.names().into_iter().collect();
    let loaded = case::load(root, &path, &config, &names).map_err(|d| {
        anyhow::anyhow!(
            "the draft case does not load: {}",
            d.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
        )
    })?;
    let recorded: Arc<dyn crate::provider::Provider> = Arc::new(Sequence {
        responses: std::sync::Mutex::new(responses),
    });
    let real = crate::provider::ProviderSet::new(Default::default())
        .with("openai", recorded.clone())
        .with("anthropic", recorded);
    let suite = Suite {
        root: root.to_path_buf(),
        config,
        tools: Arc::new(tools),
        skills: Arc::new(skills),
        real,
        tokens: Arc::default(),
        mode: EvalMode::Record,
        trials: Some(1),
    };
    let result = suite.run_case(&loaded).await;
    println!("wrote {}", rel.display());
    println!("wrote {}", suite::cassette_path(Path::new(""), &loaded).display());
    if !result.passed {
        let report = Report::new(EvalMode::Record, vec![result]);
        eprint!("{}", report.table());
        eprintln!(
            "the draft does not replay as recorded yet; edit it, then `steward eval --record {}`",
            loaded.id
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
