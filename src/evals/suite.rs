//! Running cases: each trial is a real run of the agent on a fresh runner (its own
//! SQLite file, the case's tool mocks, model calls through the case's cassette), then
//! its objective expectations and judge criteria. A case passes when at least
//! `min_pass` of its trials pass.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::case::{Case, TriggerInput};

/// Most bytes of a file an eval case attaches: what steward takes of a Slack upload.
const MAX_ATTACHED_BYTES: u64 = crate::config::settings::DEFAULT_ATTACHMENT_CAP;
use super::cassette::{Cassette, CassetteProvider, Mode};
use super::expect::{self, Check, Observed};
use super::judge::{self, Verdict};
use crate::config::Config;
use crate::files::NewFile;
use crate::provider::ProviderSet;
use crate::run::Runner;
use crate::skills::SkillSet;
use crate::store::{FileStore, RunStore, SqliteStore};
use crate::tokens::TokenCounter;
use crate::tools::ToolRegistry;
use crate::triggers::TriggerEvent;

/// Where model answers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalMode {
    /// From cassettes only: no key, no network, the same result every time.
    Replay,
    /// From the real models, written to the cassettes.
    Record,
    /// From the real models, nothing written.
    Live,
}

/// What every case of a suite shares.
pub struct Suite {
    pub root: PathBuf,
    pub config: Arc<Config>,
    /// Every tool steward has (their built-in mocks answer unless a case says).
    pub tools: Arc<ToolRegistry>,
    pub skills: Arc<SkillSet>,
    /// The real providers, for `Record` and `Live`.
    pub real: ProviderSet,
    pub tokens: Arc<TokenCounter>,
    pub mode: EvalMode,
    /// Overrides every case's trials (and scales its `min_pass` to the same share).
    pub trials: Option<u32>,
    /// Run a case's trials at once rather than one after another (the improve gate:
    /// live trials under the provider limiter). Off for `steward eval`, whose report
    /// lists trials in the order they ran.
    pub concurrent_trials: bool,
}

/// One trial of a case.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub passed: bool,
    pub checks: Vec<Check>,
    pub verdicts: Vec<Verdict>,
    pub turns: u32,
    pub tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
    /// The case could not run (a cassette miss, a bad trigger).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The run held private content (a private trigger, a private conversation it
    /// read, or a real Slack read): a recording of it is not saved.
    #[serde(skip)]
    pub held_private: bool,
}

/// A case's result over its trials.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub agent: String,
    pub description: String,
    pub passed: bool,
    pub passes: u32,
    pub trials: u32,
    pub min_pass: u32,
    pub results: Vec<Trial>,
}

impl CaseResult {
    /// Tokens and cost summed over trials; latency is the median.
    pub fn totals(&self) -> (u64, f64, u64) {
        let tokens = self.results.iter().map(|t| t.tokens).sum();
        let cost = self.results.iter().map(|t| t.cost_usd).sum();
        let mut latencies: Vec<u64> = self.results.iter().map(|t| t.latency_ms).collect();
        latencies.sort_unstable();
        (
            tokens,
            cost,
            latencies.get(latencies.len() / 2).copied().unwrap_or(0),
        )
    }
}

/// A result for a case that could not even start.
pub fn broken(id: &str, agent: &str, error: String) -> CaseResult {
    CaseResult {
        id: id.to_string(),
        agent: agent.to_string(),
        description: String::new(),
        passed: false,
        passes: 0,
        trials: 1,
        min_pass: 1,
        results: vec![Trial {
            passed: false,
            checks: Vec::new(),
            verdicts: Vec::new(),
            turns: 0,
            tokens: 0,
            cost_usd: 0.0,
            latency_ms: 0,
            error: Some(error),
            held_private: false,
        }],
    }
}

/// Where a case's cassette lives: `evals/cassettes/<agent>/<case>.json`.
pub fn cassette_path(root: &Path, case: &Case) -> PathBuf {
    root.join("evals/cassettes").join(format!("{}.json", case.id))
}

/// A fixed slot, so a cron case's prompt is the same on every replay.
const DEFAULT_SLOT: &str = "2026-01-05T09:00:00Z";

/// The trigger event a case describes.
pub fn trigger(
    root: &Path,
    config: &Config,
    agent: &str,
    input: &TriggerInput,
) -> Result<TriggerEvent, String> {
    let json = |v: &serde_yaml::Value| serde_json::to_value(v).unwrap_or(Value::Null);
    let mut event = if let Some(text) = &input.text {
        TriggerEvent::from_cli(json!({ "text": text }))
    } else if let Some(body) = &input.slack {
        match crate::triggers::slack::parse(&json(body), None).map_err(|e| format!("slack trigger: {e}"))? {
            crate::triggers::slack::SlackPayload::Event { event, .. } => *event,
            _ => return Err("slack trigger: the payload is not an event steward runs agents on".into()),
        }
    } else if let Some(body) = &input.jira {
        let body = json(body);
        // The case's own timestamp is "now": recorded payloads never go stale.
        let now = body["timestamp"].as_i64().unwrap_or(0) / 1000;
        crate::triggers::jira::parse(&body, "eval", now)
            .map_err(|e| format!("jira trigger: {e}"))?
            .0
    } else if let Some(body) = &input.notion {
        match crate::triggers::notion::parse(&json(body)).map_err(|e| format!("notion trigger: {e}"))? {
            crate::triggers::notion::NotionPayload::Event { event, .. } => *event,
            _ => return Err("notion trigger: the payload is a verification request, not an event".into()),
        }
    } else if let Some(hook) = &input.webhook {
        let body = serde_json::to_vec(&json(&hook.body)).unwrap_or_default();
        crate::triggers::webhook::event(&hook.name, &body)
    } else if let Some(event) = &input.event {
        serde_json::from_value(json(event)).map_err(|e| format!("event trigger: {e}"))?
    } else if let Some(cron) = &input.cron {
        let job = crate::triggers::cron::jobs(config)
            .into_iter()
            .find(|j| j.agent == agent)
            .ok_or_else(|| format!("cron trigger: agent '{agent}' has no cron trigger"))?;
        let slot = cron.slot.as_deref().unwrap_or(DEFAULT_SLOT);
        let slot = chrono::DateTime::parse_from_rfc3339(slot)
            .map_err(|e| format!("cron trigger: slot '{slot}': {e}"))?
            .with_timezone(&chrono::Utc);
        job.event(slot)
    } else {
        return Err("the trigger is empty".into());
    };
    for path in &input.files {
        let content = crate::config::within::read_bytes(root, path, MAX_ATTACHED_BYTES)
            .map_err(|e| format!("attached file: {e}"))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        event.attachments.push(NewFile {
            mime: crate::files::mime::from_name(&name).to_string(),
            name,
            content,
        });
    }
    Ok(event)
}

impl Suite {
    /// The providers a trial's runs call: every known provider name answered through
    /// `cassette` (recording from, or passing through to, the real one).
    fn providers(&self, cassette: &Arc<Cassette>) -> ProviderSet {
        let mut set = ProviderSet::new(self.real.retry.clone());
        for name in ["openai", "anthropic"] {
            let mode = match self.mode {
                EvalMode::Replay => Mode::Replay,
                EvalMode::Record => {
                    Mode::Record(self.real.get(name).unwrap_or_else(|why| unavailable(name, why)))
                }
                EvalMode::Live => {
                    Mode::Live(self.real.get(name).unwrap_or_else(|why| unavailable(name, why)))
                }
            };
            set = set.with(
                name,
                Arc::new(CassetteProvider::new(name, mode, cassette.clone())),
            );
        }
        set
    }

    /// Runs every trial of `case`, then saves its cassette when recording.
    pub async fn run_case(&self, case: &Case) -> CaseResult {
        let path = cassette_path(&self.root, case);
        let cassette = match self.mode {
            EvalMode::Record => Cassette::fresh(&path, &case.id),
            _ => match Cassette::load(&path, &case.id) {
                Ok(c) => c,
                Err(e) => return broken(&case.id, &case.agent, e.to_string()),
            },
        };
        let cassette = Arc::new(cassette);
        let (trials, min_pass) = match self.trials {
            Some(n) => {
                let share = f64::from(case.min_pass) / f64::from(case.trials);
                (n, ((share * f64::from(n)).ceil() as u32).clamp(1, n))
            }
            None => (case.trials, case.min_pass),
        };
        let results = if self.concurrent_trials {
            futures_util::future::join_all((0..trials).map(|_| self.trial(case, &cassette))).await
        } else {
            let mut results = Vec::with_capacity(trials as usize);
            for _ in 0..trials {
                results.push(self.trial(case, &cassette).await);
            }
            results
        };
        // A cassette is committed with the cases: what a run read from a private
        // conversation must not go into the repository with it.
        if self.mode == EvalMode::Record && results.iter().any(|t| t.held_private) {
            let mut refused = broken(
                &case.id,
                &case.agent,
                "not recorded: the run held private content (a private trigger, a private conversation it read, or a real Slack read, whose channel an eval cannot check), and a cassette is committed with the cases; mock the tools that read it".into(),
            );
            // So the caller keeps the MCP recordings of this run out too.
            for t in &mut refused.results {
                t.held_private = true;
            }
            return refused;
        }
        if self.mode == EvalMode::Record
            && let Err(e) = cassette.save()
        {
            return broken(&case.id, &case.agent, e.to_string());
        }
        let passes = results.iter().filter(|t| t.passed).count() as u32;
        CaseResult {
            id: case.id.clone(),
            agent: case.agent.clone(),
            description: case.spec.description.clone(),
            passed: passes >= min_pass,
            passes,
            trials,
            min_pass,
            results,
        }
    }

    async fn trial(&self, case: &Case, cassette: &Arc<Cassette>) -> Trial {
        let started = Instant::now();
        let failed = |error: String| Trial {
            passed: false,
            checks: Vec::new(),
            verdicts: Vec::new(),
            turns: 0,
            tokens: 0,
            cost_usd: 0.0,
            latency_ms: started.elapsed().as_millis() as u64,
            error: Some(error),
            held_private: false,
        };
        let agent = match self.config.agents.get(&case.agent) {
            Some(a) => a.clone(),
            None => return failed(format!("unknown agent '{}'", case.agent)),
        };
        let agent = match &case.spec.vars {
            Some(vars) => {
                let mut a = (*agent).clone();
                a.vars = serde_json::to_value(vars).unwrap_or(Value::Null);
                Arc::new(a)
            }
            None => agent,
        };
        let trigger = match trigger(&self.root, &self.config, &case.agent, &case.spec.trigger) {
            Ok(t) => t,
            Err(e) => return failed(e),
        };
        let providers = self.providers(cassette);
        let scratch = match Scratch::new() {
            Ok(s) => s,
            Err(e) => return failed(format!("cannot make a scratch folder: {e}")),
        };
        let store = match SqliteStore::open(&scratch.db()).await {
            Ok(s) => Arc::new(s),
            Err(e) => return failed(format!("cannot open a scratch store: {e}")),
        };
        let runner = Runner::builder(store.clone())
            .providers(providers)
            .tools(super::mocks::registry(&self.tools, &case.mocks))
            .mock_tools(true)
            .tokens(self.tokens.clone())
            .subagents(self.config.subagents.clone())
            .skills((*self.skills).clone())
            .build();
        let outcome = match runner.run(&agent, &trigger, None, CancellationToken::new()).await {
            Ok(o) => o,
            Err(e) => return failed(format!("the run could not be recorded: {e}")),
        };
        let latency_ms = started.elapsed().as_millis() as u64;
        let events = store.run_events(&outcome.run_id).await.unwrap_or_default();
        let files = store
            .run_files(&outcome.run_id)
            .await
            .map(|f| f.len())
            .unwrap_or(0);
        let seen = Observed::from_events(&events, files);
        // An eval has no Slack client to tell a private channel from a public one (its
        // runs are not a service's), so whatever a real Slack read brought counts as
        // private: a recording of it would carry a real workspace's messages.
        let real_slack = seen.calls.iter().any(|(name, _)| {
            crate::run::custody::is_slack_read(name)
                && matches!(case.mocks.get(name), Some(super::case::Mock::Real))
        });
        let checks = expect::check(&case.spec.expect, &outcome, &seen);
        let mut verdicts = Vec::new();
        if !case.spec.criteria.is_empty() {
            match self.config.subagents.get("judge") {
                Some(judge) => {
                    let text = judge::transcript(&trigger, &events, outcome.final_text.as_deref());
                    let material = judge::Material::new(text);
                    for criterion in &case.spec.criteria {
                        verdicts.push(judge::score(&runner, judge, criterion, &material).await);
                    }
                }
                None => {
                    return failed(
                        "the case has criteria but there is no subagents/judge.yaml to score them".into(),
                    );
                }
            }
        }
        // A model call the cassette lacks is the case's error, not a failed expectation;
        // told from the cassette's own words on, without the provider's error prefix
        // ("openai bad request: ") it travelled under.
        const MISS: &str = "no recorded model answer";
        let miss = outcome
            .error
            .iter()
            .chain(verdicts.iter().filter_map(|v| v.error.as_ref()))
            .find(|e| e.contains(MISS))
            .map(|e| {
                let head = format!("case {}: {MISS}", case.id);
                e.find(&head).map_or_else(|| e.clone(), |at| e[at..].to_string())
            });
        let judge_cost: f64 = verdicts.iter().map(|v| v.cost_usd).sum();
        let passed = miss.is_none() && checks.iter().all(|c| c.passed) && verdicts.iter().all(|v| v.passed);
        Trial {
            passed,
            checks,
            verdicts,
            turns: outcome.turns,
            tokens: outcome.usage.input_tokens + outcome.usage.output_tokens,
            cost_usd: outcome.cost_usd + judge_cost,
            latency_ms,
            error: miss,
            held_private: trigger.private || !outcome.private_sources.is_empty() || real_slack,
        }
    }
}

/// A provider that is not configured, for record and live runs: every call fails with
/// the reason.
fn unavailable(name: &'static str, why: String) -> Arc<dyn crate::provider::Provider> {
    struct Missing(&'static str, String);
    #[async_trait::async_trait]
    impl crate::provider::Provider for Missing {
        fn name(&self) -> &'static str {
            self.0
        }
        async fn chat(
            &self,
            _request: &crate::provider::ChatRequest<'_>,
        ) -> Result<crate::provider::ChatResponse, crate::provider::ProviderError> {
            Err(crate::provider::ProviderError::new(
                self.0,
                crate::provider::ErrorKind::NotConfigured,
                self.1.clone(),
            ))
        }
    }
    Arc::new(Missing(name, why))
}

/// A trial's database, in a folder of its own user's alone (what the run read is in
/// it), removed with the folder when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("steward-eval-{}", uuid::Uuid::now_v7()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Scratch(dir))
    }

    fn db(&self) -> PathBuf {
        self.0.join("eval.db")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
