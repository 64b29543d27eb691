//! Prometheus metrics: one [`Metrics`] per process, shared by the runner (runs, model
//! calls, tokens, cost, tools, skills, compactions), the server (trigger events, queue
//! depth) and the dispatcher (lease reclaims, retries), rendered at `/metrics` in the
//! OpenMetrics text format by `prometheus-client`.
//!
//! Label values come from configuration (agent, tool, skill and model names) and small
//! closed sets (status, outcome), never from request content, so the number of series
//! stays bounded.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::types::{RunStatus, Termination, Usage};

/// Upper bounds of the run duration histogram, in seconds: a quick lookup to a long
/// script run.
const RUN_SECONDS: [f64; 12] = [
    0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
];

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of [`Metrics::render_prometheus`]'s output.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    agent: String,
    status: String,
    termination: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabel {
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelCallLabels {
    agent: String,
    provider: String,
    model: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    agent: String,
    model: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    agent: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    agent: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SkillLabels {
    agent: String,
    skill: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TriggerLabels {
    source: String,
    kind: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvalLabels {
    agent: String,
    criterion: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvalScoreLabels {
    agent: String,
    criterion: String,
}

/// Judge scores run from 0 to 1.
const EVAL_SCORES: [f64; 10] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

fn eval_histogram() -> Histogram {
    Histogram::new(EVAL_SCORES)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeedbackLabels {
    agent: String,
    vote: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EscalationLabels {
    agent: String,
    /// `asked` (a person asked for help) or `resolved`.
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LoginLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    source: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    provider: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    queue: &'static str,
}

type FloatCounter = Counter<f64, AtomicU64>;

/// How a tool call ended, for `steward_tool_calls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOutcome {
    Ok,
    /// The tool answered with an error the model can act on.
    Error,
    /// The error ended the run.
    Fatal,
}

impl ToolOutcome {
    fn as_str(self) -> &'static str {
        match self {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Error => "error",
            ToolOutcome::Fatal => "fatal",
        }
    }
}

/// What became of an inbound trigger request, for `steward_trigger_events_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerOutcome {
    /// Stored and acknowledged.
    Accepted,
    /// A retry of an event already stored.
    Duplicate,
    /// Bad signature or token (401).
    Unauthorized,
    /// Body over the limit (413).
    TooLarge,
    /// Malformed (400).
    BadRequest,
    /// Stored, but no agent's trigger matched it.
    NoAgent,
    /// Matched an agent, but a limit refused the run (rate per person, daily budget).
    Limited,
    /// Signed, but from a Slack workspace not in `SLACK_TEAM_IDS`.
    ForeignTeam,
}

impl TriggerOutcome {
    fn as_str(self) -> &'static str {
        match self {
            TriggerOutcome::Accepted => "accepted",
            TriggerOutcome::Duplicate => "duplicate",
            TriggerOutcome::Unauthorized => "unauthorized",
            TriggerOutcome::TooLarge => "too_large",
            TriggerOutcome::BadRequest => "bad_request",
            TriggerOutcome::NoAgent => "no_agent",
            TriggerOutcome::Limited => "limited",
            TriggerOutcome::ForeignTeam => "foreign_team",
        }
    }
}

/// Every metric steward exports. Cheap to update from any thread (atomics behind a
/// read-mostly lock per family); rendering walks the registry.
pub struct Metrics {
    registry: Registry,
    runs: Family<RunLabels, Counter>,
    run_seconds: Family<AgentLabel, Histogram, fn() -> Histogram>,
    model_calls: Family<ModelCallLabels, Counter>,
    tokens: Family<TokenLabels, Counter>,
    cost: Family<CostLabels, FloatCounter>,
    tool_calls: Family<ToolLabels, Counter>,
    skill_loads: Family<SkillLabels, Counter>,
    subagent_runs: Family<AgentLabel, Counter>,
    compactions: Family<AgentLabel, Counter>,
    triggers: Family<TriggerLabels, Counter>,
    queue_depth: Family<QueueLabels, Gauge>,
    model_shutdown: Family<ModelLabels, Gauge>,
    events: Family<EventLabels, Counter>,
    lease_reclaims: Counter,
    retries: Counter,
    spans_dropped: Counter,
    evals: Family<EvalLabels, Counter>,
    eval_scores: Family<EvalScoreLabels, Histogram, fn() -> Histogram>,
    feedback: Family<FeedbackLabels, Counter>,
    escalations: Family<EscalationLabels, Counter>,
    logins: Family<LoginLabels, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn run_histogram() -> Histogram {
    Histogram::new(RUN_SECONDS)
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("steward");
        let m = Metrics {
            runs: Family::default(),
            run_seconds: Family::new_with_constructor(run_histogram),
            model_calls: Family::default(),
            tokens: Family::default(),
            cost: Family::default(),
            tool_calls: Family::default(),
            skill_loads: Family::default(),
            subagent_runs: Family::default(),
            compactions: Family::default(),
            triggers: Family::default(),
            queue_depth: Family::default(),
            model_shutdown: Family::default(),
            events: Family::default(),
            lease_reclaims: Counter::default(),
            retries: Counter::default(),
            spans_dropped: Counter::default(),
            evals: Family::default(),
            eval_scores: Family::new_with_constructor(eval_histogram),
            feedback: Family::default(),
            escalations: Family::default(),
            logins: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "runs",
            "Runs finished, by agent, status and termination reason",
            m.runs.clone(),
        );
        registry.register_with_unit(
            "run_duration",
            "Wall time of finished runs",
            Unit::Seconds,
            m.run_seconds.clone(),
        );
        registry.register(
            "model_calls",
            "Model calls by agent, provider, model and outcome (ok or an error kind)",
            m.model_calls.clone(),
        );
        registry.register(
            "model_tokens",
            "Tokens by agent, model and kind (input, output, cached_input, cache_write, reasoning)",
            m.tokens.clone(),
        );
        registry.register(
            "cost_usd",
            "Model cost in US dollars, by agent and model",
            m.cost.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls through the gateway, by agent, tool and outcome (ok, error, fatal)",
            m.tool_calls.clone(),
        );
        registry.register(
            "skill_loads",
            "Agent Skills loaded, by agent and skill",
            m.skill_loads.clone(),
        );
        registry.register(
            "subagent_runs",
            "Subagent runs started, by subagent",
            m.subagent_runs.clone(),
        );
        registry.register(
            "compactions",
            "Context compactions, by agent",
            m.compactions.clone(),
        );
        registry.register(
            "trigger_events",
            "Inbound trigger events by source, kind and outcome",
            m.triggers.clone(),
        );
        registry.register(
            "queue_depth",
            "Work waiting: trigger events not yet routed, runs not yet started",
            m.queue_depth.clone(),
        );
        registry.register(
            "events",
            "Inbound deliveries by source and outcome (started, no_agent, duplicate, ignored, refused, ...)",
            m.events.clone(),
        );
        registry.register(
            "model_shutdown_timestamp_seconds",
            "When the provider says a configured model shuts down (Unix time of the date, UTC), by provider and model; read from the provider's model list once a day",
            m.model_shutdown.clone(),
        );
        registry.register(
            "lease_reclaims",
            "Runs found with an expired lease (their process died)",
            m.lease_reclaims.clone(),
        );
        registry.register(
            "run_retries",
            "Runs queued again after a crash",
            m.retries.clone(),
        );
        registry.register(
            "otel_spans_dropped",
            "Spans not exported (queue full or the OTLP endpoint failed)",
            m.spans_dropped.clone(),
        );
        registry.register(
            "eval_results",
            "Post-run eval verdicts by agent, criterion and result (pass, fail, error)",
            m.evals.clone(),
        );
        registry.register(
            "eval_score",
            "Post-run judge scores (0 to 1) by agent and criterion; verdicts that errored have none",
            m.eval_scores.clone(),
        );
        registry.register(
            "feedback",
            "People's reactions to replies, by agent and vote (up, down)",
            m.feedback.clone(),
        );
        registry.register(
            "escalations",
            "Calls for a person from an agent's answers (state asked) and their resolutions (resolved)",
            m.escalations.clone(),
        );
        registry.register(
            "inspector_logins",
            "Inspector sign-in attempts by outcome (ok, wrong_token, throttled)",
            m.logins.clone(),
        );
        Metrics { registry, ..m }
    }

    /// A run ended.
    pub fn run_finished(&self, agent: &str, status: RunStatus, termination: Termination, seconds: f64) {
        self.runs
            .get_or_create(&RunLabels {
                agent: agent.to_string(),
                status: status.as_str().to_string(),
                termination: termination.as_str().to_string(),
            })
            .inc();
        self.run_seconds
            .get_or_create(&AgentLabel {
                agent: agent.to_string(),
            })
            .observe(seconds);
    }

    /// A model answered: one call, its tokens and its cost. `model` is the configured
    /// `provider/model` reference.
    pub fn model_answered(&self, agent: &str, model: &str, usage: &Usage, cost_usd: Option<f64>) {
        let (provider, name) = model.split_once('/').unwrap_or(("", model));
        self.model_call(agent, provider, name, "ok");
        let kinds = [
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cached_input", usage.cached_input_tokens),
            ("cache_write", usage.cache_write_tokens),
            ("reasoning", usage.reasoning_tokens),
        ];
        for (kind, n) in kinds {
            if n > 0 {
                self.tokens
                    .get_or_create(&TokenLabels {
                        agent: agent.to_string(),
                        model: model.to_string(),
                        kind,
                    })
                    .inc_by(n);
            }
        }
        // An unpriced model's calls add nothing: their cost is unknown, not zero.
        if let Some(cost_usd) = cost_usd.filter(|c| *c > 0.0) {
            self.cost
                .get_or_create(&CostLabels {
                    agent: agent.to_string(),
                    model: model.to_string(),
                })
                .inc_by(cost_usd);
        }
    }

    /// A model call failed after its retries; `outcome` is the error kind.
    pub fn model_failed(&self, agent: &str, provider: &str, model: &str, outcome: &str) {
        self.model_call(agent, provider, model, outcome);
    }

    fn model_call(&self, agent: &str, provider: &str, model: &str, outcome: &str) {
        self.model_calls
            .get_or_create(&ModelCallLabels {
                agent: agent.to_string(),
                provider: provider.to_string(),
                model: model.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub fn tool_called(&self, agent: &str, tool: &str, outcome: ToolOutcome) {
        self.tool_calls
            .get_or_create(&ToolLabels {
                agent: agent.to_string(),
                tool: tool.to_string(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    pub fn skill_loaded(&self, agent: &str, skill: &str, times: u64) {
        self.skill_loads
            .get_or_create(&SkillLabels {
                agent: agent.to_string(),
                skill: skill.to_string(),
            })
            .inc_by(times);
    }

    pub fn subagent_started(&self, agent: &str) {
        self.subagent_runs
            .get_or_create(&AgentLabel {
                agent: agent.to_string(),
            })
            .inc();
    }

    pub fn compacted(&self, agent: &str) {
        self.compactions
            .get_or_create(&AgentLabel {
                agent: agent.to_string(),
            })
            .inc();
    }

    pub fn trigger(&self, source: &str, kind: &str, outcome: TriggerOutcome) {
        self.triggers
            .get_or_create(&TriggerLabels {
                source: source.to_string(),
                kind: kind.to_string(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// Sets the queue gauges (read from the store when scraped).
    pub fn set_queue_depth(&self, events: u64, runs: u64) {
        let set = |queue, n: u64| {
            self.queue_depth
                .get_or_create(&QueueLabels { queue })
                .set(i64::try_from(n).unwrap_or(i64::MAX))
        };
        set("events", events);
        set("runs", runs);
    }

    /// A delivery from `source` ended with `outcome`.
    pub fn event_outcome(&self, source: &str, outcome: crate::types::event_outcome::OutcomeKind) {
        self.events
            .get_or_create(&EventLabels {
                source: source.to_string(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    /// The provider lists `date` as `model`'s shutdown day.
    pub fn model_shutdown(&self, provider: &str, model: &str, date: chrono::NaiveDate) {
        let at = date.and_time(chrono::NaiveTime::MIN).and_utc().timestamp();
        self.model_shutdown
            .get_or_create(&ModelLabels {
                provider: provider.to_string(),
                model: model.to_string(),
            })
            .set(at);
    }

    /// A post-run eval verdict: `pass`, `fail` or `error`, and the judge's score (none
    /// when judging failed).
    pub fn eval_result(&self, agent: &str, criterion: &str, result: &str, score: Option<f64>) {
        self.evals
            .get_or_create(&EvalLabels {
                agent: agent.to_string(),
                criterion: criterion.to_string(),
                result: result.to_string(),
            })
            .inc();
        if let Some(score) = score {
            self.eval_scores
                .get_or_create(&EvalScoreLabels {
                    agent: agent.to_string(),
                    criterion: criterion.to_string(),
                })
                .observe(score);
        }
    }

    /// A 👍 (`up`) or 👎 (`down`) on a reply.
    pub fn feedback(&self, agent: &str, up: bool) {
        self.feedback
            .get_or_create(&FeedbackLabels {
                agent: agent.to_string(),
                vote: if up { "up" } else { "down" },
            })
            .inc();
    }

    /// A call for a person (`resolved: false`) or its resolution.
    pub fn escalation(&self, agent: &str, resolved: bool) {
        self.escalations
            .get_or_create(&EscalationLabels {
                agent: agent.to_string(),
                state: if resolved { "resolved" } else { "asked" },
            })
            .inc();
    }

    /// An inspector sign-in attempt: `ok`, `wrong_token` or `throttled`.
    pub fn login(&self, outcome: &'static str) {
        self.logins.get_or_create(&LoginLabels { outcome }).inc();
    }

    pub fn lease_reclaimed(&self) {
        self.lease_reclaims.inc();
    }

    pub fn run_retried(&self) {
        self.retries.inc();
    }

    pub fn spans_dropped(&self, n: u64) {
        self.spans_dropped.inc_by(n);
    }

    /// Every metric in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Every metric in the Prometheus text format 0.0.4 ([`PROMETHEUS_CONTENT_TYPE`]),
    /// for scrapers and tools that do not ask for OpenMetrics (`promtool`, older
    /// agents): counter families are named with their `_total` suffix, and the
    /// OpenMetrics-only `# UNIT` and `# EOF` lines are left out.
    pub fn render_prometheus(&self) -> String {
        to_prometheus_text(&self.render())
    }
}

fn to_prometheus_text(open_metrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = open_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len() + 16 * counters.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_with_labels() {
        let m = Metrics::new();
        m.run_finished("helpdesk", RunStatus::Succeeded, Termination::Completed, 1.5);
        m.model_answered(
            "helpdesk",
            "openai/gpt-4.1",
            &Usage {
                input_tokens: 100,
                output_tokens: 7,
                ..Usage::default()
            },
            Some(0.25),
        );
        m.tool_called("helpdesk", "http_fetch", ToolOutcome::Error);
        let text = m.render();
        assert!(
            text.contains(
                r#"steward_runs_total{agent="helpdesk",status="succeeded",termination="completed"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(
            r#"steward_model_tokens_total{agent="helpdesk",model="openai/gpt-4.1",kind="input"} 100"#
        ));
        assert!(text.contains(
            r#"steward_model_calls_total{agent="helpdesk",provider="openai",model="gpt-4.1",outcome="ok"} 1"#
        ));
        assert!(text.contains(r#"steward_cost_usd_total{agent="helpdesk",model="openai/gpt-4.1"} 0.25"#));
        assert!(
            text.contains(
                r#"steward_tool_calls_total{agent="helpdesk",tool="http_fetch",outcome="error"} 1"#
            )
        );
        assert!(
            text.contains(r#"steward_run_duration_seconds_bucket{le="2.5",agent="helpdesk"} 1"#),
            "{text}"
        );
        assert!(text.trim_end().ends_with("# EOF"));
        let plain = m.render_prometheus();
        assert!(plain.contains("# TYPE steward_runs_total counter\n"), "{plain}");
        assert!(plain.contains("# HELP steward_runs_total Runs finished"));
        assert!(plain.contains("# TYPE steward_run_duration_seconds histogram\n"));
        assert!(!plain.contains("# EOF") && !plain.contains("# UNIT"));
    }
}
