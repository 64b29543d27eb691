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
pub(super) fn cases(
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

/// Runs the cases `targets` names (every case when empty) in `mode` and reports them;
/// `progress` shows a bar on stderr. The CLI prints the report; the MCP server's
/// `run_evals` returns it.
pub(crate) async fn run_report(
    root: &Path,
    env: &Settings,
    mode: EvalMode,
    targets: &[String],
    trials: Option<u32>,
    progress: bool,
) -> anyhow::Result<Report> {
    let outside = Outside::new(env.clone(), Arc::default())?;
    let mut tools = outside.tools();
    let skills = outside.skills(root);
    let config = Arc::new(load_config(root, &tools, &skills)?);
    // MCP tools: replays answer from the servers' cassettes without reaching them;
    // recording reaches them and records; live reaches them.
    let hub = match mode {
        EvalMode::Replay => {
            for w in replay_mcp(root, &mut tools, &config) {
                eprintln!("warning: {w}");
            }
            None
        }
        EvalMode::Record | EvalMode::Live => {
            let recordings = mcp::Recordings {
                dir: mcp_dir(root),
                mode: if mode == EvalMode::Record {
                    mcp::Recording::Record
                } else {
                    mcp::Recording::Live
                },
            };
            outside.connect_mcp(&mut tools, &config, Some(&recordings)).await
        }
    };
    let names: Vec<String> = tools.names().into_iter().collect();
    let (cases, mut results) = cases(root, targets, &config, &names);
    if cases.is_empty() && results.is_empty() {
        anyhow::bail!(
            "no eval cases{} under {}",
            if targets.is_empty() {
                String::new()
            } else {
                format!(" match {}", targets.join(" "))
            },
            root.join("evals").display()
        );
    }
    if mode != EvalMode::Replay {
        missing_keys(env, &config, &cases)?;
    }
    let suite = Suite {
        root: root.to_path_buf(),
        config,
        tools: Arc::new(tools),
        skills: Arc::new(skills),
        real: outside.providers(),
        tokens: Arc::default(),
        mode,
        trials,
        concurrent_trials: false,
    };
    // A progress bar on a terminal; nothing on a pipe or in CI logs.
    let progress = if progress {
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
    let private = results.iter().find(|r| r.results.iter().any(|t| t.held_private));
    if let (Some(_), Some(case)) = (&hub, private) {
        // One cassette per server serves every case: this run's calls are in it.
        eprintln!(
            "warning: MCP recordings not saved: case {} held private content; mock its tools, then record again",
            case.id
        );
    } else if let Some(hub) = hub {
        for file in hub.save_recordings()? {
            eprintln!("recorded {}", file.strip_prefix(root).unwrap_or(&file).display());
        }
    }
    results.sort_by(|a, b| a.id.cmp(&b.id));
    let report = Report::new(mode, results);
    Ok(report)
}

pub(super) async fn eval(root: &Path, env: &Settings, args: EvalArgs) -> anyhow::Result<ExitCode> {
    let progress = std::io::stderr().is_terminal();
    let report = run_report(root, env, args.mode, &args.targets, args.trials, progress).await?;
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

/// The key calling `model` needs and the environment lacks, if any.
pub(super) fn missing_key(env: &Settings, model: &crate::types::ModelRef) -> Option<&'static str> {
    match model.provider.as_str() {
        "openai" if env.openai_api_key.is_none() => Some("OPENAI_API_KEY"),
        "anthropic" if env.anthropic_api_key.is_none() => Some("ANTHROPIC_API_KEY"),
        _ => None,
    }
}

/// Recording or running live calls the real models: every provider the selected cases'
/// agents (and their fallbacks and subagents) use needs its key, checked before any
/// trial runs rather than failing each one.
pub(super) fn missing_keys(
    env: &Settings,
    config: &crate::config::Config,
    cases: &[Case],
) -> anyhow::Result<()> {
    let mut missing: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for case in cases {
        let Some(agent) = config.agents.get(&case.agent) else {
            continue;
        };
        let subagents = agent.subagents.iter().filter_map(|s| config.subagents.get(s));
        let models = agent.models.iter().chain(subagents.flat_map(|s| s.models.iter()));
        for m in models {
            let Some(key) = missing_key(env, m) else {
                continue;
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

/// `steward eval new --from-run ID`: a draft case from a recorded run (its trigger, its
/// tool results as mocks, its expectations as observed, empty criteria) and a cassette
/// of its model answers; the new case replays green.
pub(super) async fn new_from_run(
    root: &Path,
    env: &Settings,
    store: &dyn crate::store::Store,
    id: &str,
) -> anyhow::Result<ExitCode> {
    let crate::evals::draft::Draft {
        rel_path: rel,
        yaml,
        responses,
        ..
    } = crate::evals::draft::from_run(store, id).await?;
    let path = root.join(&rel);
    if path.exists() {
        anyhow::bail!("{} already exists", rel.display());
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, &yaml)?;

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
        concurrent_trials: false,
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
