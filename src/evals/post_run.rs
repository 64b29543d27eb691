//! Post-run evals: after a production run ends, the agent's `evals.post_run` criteria
//! are scored by the judge on a sampled share of runs, in the background (the reply is
//! already posted). Scores are stored with the run (`steward runs show`, the
//! inspector), counted in `steward_eval_results_total`, and emitted as
//! `gen_ai.evaluation.result` events in the run's trace. For a private run the judge
//! reads the text in memory, its own run records none, and only scores are stored.

use std::sync::Arc;

use tracing::Instrument;

use super::judge::{self, Material, Verdict};
use crate::config::{AgentConfig, Config};
use crate::run::Runner;
use crate::store::{Score, StoreError};
use crate::triggers::TriggerEvent;
use crate::types::RunOutcome;

/// The judge's instructions when the tree has no `subagents/judge.yaml`.
const DEFAULT_JUDGE_PROMPT: &str = "You grade the runs of an automated agent against one criterion at a time. \
Read the transcript you are given (or its file), cite what the run did, and answer with the JSON verdict asked for.";

/// The judge for `agent`'s post-run evals: the `judge` subagent (with the agent's
/// `evals.model` when set), or a plain judge on that model or the agent's own.
pub fn judge_for(config: &Config, agent: &AgentConfig) -> Option<Arc<AgentConfig>> {
    let model = agent.post_run.model.clone();
    match config.subagents.get("judge") {
        Some(judge) => {
            let mut judge = (**judge).clone();
            if let Some(m) = model {
                judge.models = vec![m];
            } else if judge.models.is_empty() {
                judge.models = agent.models.clone();
            }
            (!judge.models.is_empty()).then(|| Arc::new(judge))
        }
        None => {
            let model = model.or_else(|| agent.models.first().cloned())?;
            Some(Arc::new(AgentConfig::new(
                "judge",
                model,
                DEFAULT_JUDGE_PROMPT,
                Vec::new(),
            )))
        }
    }
}

/// Whether `agent`'s run should be judged: it has criteria and the draw falls in its
/// sample.
pub fn wanted(agent: &AgentConfig) -> bool {
    agent.post_run.picks(fastrand::f64())
}

/// Scores every post-run criterion of `agent` on its finished run and stores the
/// scores. `trigger` and `outcome` are the run's, as held in memory (a private run's
/// text is nowhere else).
pub async fn evaluate(
    runner: &Runner,
    config: &Config,
    agent: &AgentConfig,
    trigger: &TriggerEvent,
    outcome: &RunOutcome,
) -> Result<Vec<Verdict>, StoreError> {
    let Some(judge) = judge_for(config, agent) else {
        tracing::warn!(agent = %agent.name, "post-run evals need a judge model: set evals.model or a model on subagents/judge.yaml");
        return Ok(Vec::new());
    };
    let span = tracing::info_span!(
        "evaluate_run",
        otel.name = %format!("evaluate_run {}", agent.name),
        "gen_ai.operation.name" = "evaluate",
        "gen_ai.agent.name" = %agent.name,
        run_id = %outcome.run_id,
    );
    if let Some(parent) = &outcome.traceparent {
        crate::telemetry::continue_trace(&span, parent);
    }
    async {
        let events = runner.store.run_events(&outcome.run_id).await?;
        // A run started in public can come to hold a private conversation (a read, a
        // subagent's answer): its stored row says so, and its judge is then private too.
        let private = trigger.private
            || !outcome.private_sources.is_empty()
            || runner
                .store
                .get_run(&outcome.run_id)
                .await?
                .is_some_and(|row| row.private);
        let mut material = Material::new(judge::transcript(trigger, &events, outcome.final_text.as_deref()));
        material.private = private;
        material.parent = Some(outcome.run_id.clone());
        let mut verdicts = Vec::new();
        for criterion in &agent.post_run.criteria {
            let v = judge::score(runner, &judge, criterion, &material).await;
            let label = match (&v.error, v.passed) {
                (Some(_), _) => "error",
                (None, true) => "pass",
                (None, false) => "fail",
            };
            // Explanations can quote the run: a private run keeps scores only, and the
            // trace gets one only where content may be captured.
            let explanation = (!private).then(|| v.error.clone().unwrap_or_else(|| v.explanation.clone()));
            let traced = explanation.as_deref().filter(|_| runner.capture_content);
            tracing::info!(
                "gen_ai.evaluation.name" = %criterion,
                "gen_ai.evaluation.score.value" = v.score,
                "gen_ai.evaluation.score.label" = label,
                "gen_ai.evaluation.explanation" = traced.unwrap_or(""),
                "gen_ai.evaluation.result"
            );
            let score = v.error.is_none().then_some(v.score);
            runner.metrics.eval_result(&agent.name, criterion, label, score);
            runner
                .store
                .add_score(
                    &outcome.run_id,
                    &Score {
                        kind: "judge".into(),
                        criterion: criterion.clone(),
                        passed: v.error.is_none().then_some(v.passed),
                        score: v.score,
                        explanation,
                        source: Some(v.model.clone()),
                        cost_usd: v.cost_usd,
                        at: chrono::Utc::now(),
                    },
                )
                .await?;
            verdicts.push(v);
        }
        Ok(verdicts)
    }
    .instrument(span)
    .await
}
