//! `/metrics` render time with 100 agents and 100 tools: every agent has called every
//! tool (10,000 tool series, the worst case), and each agent has runs, a duration
//! histogram, two models' tokens and costs, skill loads, compactions and model errors.
//! Prints the median and p95 of 51 renders, in both formats (OpenMetrics for
//! Prometheus, text 0.0.4 for everything else), and the size of the output.
//!
//! Run with `cargo bench --bench metrics_render`.

use std::time::{Duration, Instant};

use steward::metrics::{Metrics, ToolOutcome, TriggerOutcome};
use steward::types::{RunStatus, Termination, Usage};

const AGENTS: usize = 100;
const TOOLS: usize = 100;
const RENDERS: usize = 51;

fn populated() -> Metrics {
    let m = Metrics::new();
    let usage = Usage {
        input_tokens: 1200,
        output_tokens: 80,
        cached_input_tokens: 1024,
        cache_write_tokens: 0,
        reasoning_tokens: 16,
    };
    for a in 0..AGENTS {
        let agent = format!("agent-{a:03}");
        for t in 0..TOOLS {
            m.tool_called(&agent, &format!("tool_{t:03}"), ToolOutcome::Ok);
        }
        m.tool_called(&agent, "tool_000", ToolOutcome::Error);
        for (i, status) in [RunStatus::Succeeded, RunStatus::Failed].into_iter().enumerate() {
            let termination = if i == 0 {
                Termination::Completed
            } else {
                Termination::MaxTurns
            };
            m.run_finished(&agent, status, termination, 3.5 * (i + 1) as f64);
        }
        for model in ["openai/gpt-4.1", "anthropic/claude-sonnet-4-5"] {
            m.model_answered(&agent, model, &usage, Some(0.0123));
        }
        m.model_failed(&agent, "openai", "gpt-4.1", "rate_limit");
        m.skill_loaded(&agent, "large-files", 2);
        m.compacted(&agent);
        m.subagent_started(&agent);
    }
    for source in ["slack", "jira", "notion", "webhook", "cron"] {
        m.trigger(source, "event", TriggerOutcome::Accepted);
        m.trigger(source, "", TriggerOutcome::Unauthorized);
    }
    m.set_queue_depth(3, 1);
    m
}

fn measure(render: impl Fn() -> String) -> (Duration, Duration, usize) {
    let bytes = render().len();
    let mut times: Vec<Duration> = (0..RENDERS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(render());
            start.elapsed()
        })
        .collect();
    times.sort();
    (times[RENDERS / 2], times[RENDERS * 95 / 100], bytes)
}

fn main() {
    let m = populated();
    let series = m
        .render_prometheus()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .count();
    println!("{AGENTS} agents × {TOOLS} tools: {series} series");
    for (name, (median, p95, bytes)) in [
        ("OpenMetrics", measure(|| m.render())),
        ("text 0.0.4", measure(|| m.render_prometheus())),
    ] {
        println!(
            "{name:<12} median {:>7.2} ms  p95 {:>7.2} ms  {:>7} KB",
            median.as_secs_f64() * 1000.0,
            p95.as_secs_f64() * 1000.0,
            bytes / 1024
        );
    }
}
