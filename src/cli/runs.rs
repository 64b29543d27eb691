//! `steward runs list|show` and `steward stats`.

use std::process::ExitCode;

use anyhow::Context;

use super::plain::plain;
use crate::run::report::RunReport;
use crate::store::Store;

pub async fn list(
    store: &dyn Store,
    filter: &crate::store::RunFilter,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let runs = store.query_runs(filter).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(ExitCode::SUCCESS);
    }
    if runs.is_empty() {
        let filtered = filter.agent.is_some()
            || filter.status.is_some()
            || filter.source.is_some()
            || filter.since.is_some();
        println!("{}", if filtered { "no runs match" } else { "no runs yet" });
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<36}  {:<20}  {:<11}  {:<14}  {:>8}  {:>8}  {:<24}  SUMMARY",
        "ID", "AGENT", "STATUS", "TERMINATION", "TOKENS", "COST", "CREATED"
    );
    for r in runs {
        println!(
            "{:<36}  {:<20}  {:<11}  {:<14}  {:>8}  {:>8}  {:<24}  {}",
            r.id,
            r.agent,
            r.status.as_str(),
            r.termination.as_deref().unwrap_or("-"),
            r.usage.input_tokens + r.usage.output_tokens,
            format!("${:.4}", r.cost_usd),
            crate::store::timestamp(r.created_at),
            plain(&r.trigger_summary)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The one run whose id is `id` or starts with it (`store::resolve_run_id`).
async fn resolve_id(store: &dyn Store, id: &str) -> anyhow::Result<String> {
    crate::store::resolve_run_id(store, id)
        .await?
        .map_err(anyhow::Error::msg)
}

pub async fn show(store: &dyn Store, id: &str, json: bool) -> anyhow::Result<ExitCode> {
    let id = resolve_id(store, id).await?;
    let report = RunReport::load(store, &id)
        .await?
        .with_context(|| format!("no run with id {id}"))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let r = &report.run;
    println!("run {}  agent {}  {}", r.id, r.agent, r.status.as_str());
    println!("trigger: {}", plain(&r.trigger_summary));
    if let Some(t) = &r.termination {
        println!("termination: {t}");
    }
    if let Some(e) = &r.error {
        println!("error: {}", plain(e));
    }
    if let Some(esc) = &report.escalation {
        println!("{}", escalation_line(esc));
    }
    // A model without a price leaves the cost unknown rather than understated.
    let cost = match report.token_bill.cost_usd {
        None => format!("unknown (priced calls: ${:.4})", r.cost_usd),
        Some(_) => format!("${:.4}", r.cost_usd),
    };
    println!(
        "turns {}  tool calls {}  tokens in {} (cached {}) out {} (reasoning {})  cost {cost}",
        r.turns,
        r.tool_calls,
        r.usage.input_tokens,
        r.usage.cached_input_tokens,
        r.usage.output_tokens,
        r.usage.reasoning_tokens,
    );
    if !report.token_bill.calls.is_empty() {
        println!(
            "
token bill (this run's model calls; subagents bill their own runs):"
        );
        print!("{}", report.token_bill.render());
    }
    println!("\ntimeline:");
    for e in &report.events {
        println!(
            "  {}  {:<15} {}",
            crate::store::timestamp(e.at),
            e.kind,
            plain(&crate::triggers::event::one_line(&e.data.to_string(), 240))
        );
        // Why a step failed is the part people read for: shown whole, under the step.
        for key in ["error", "reason", "note"] {
            if let Some(why) = e.data[key].as_str().filter(|w| !w.is_empty()) {
                println!(
                    "  {:<24}  {key}: {}",
                    "",
                    plain(&crate::triggers::event::one_line(why, 2_000))
                );
            }
        }
    }
    if let Some(text) = &r.final_text {
        println!("\nfinal answer:\n{}", plain(text));
    }
    if !report.scores.is_empty() {
        println!("\nscores:");
        for s in &report.scores {
            let verdict = match (s.kind.as_str(), s.passed) {
                ("human", _) if s.score > 0.0 => "👍".to_string(),
                ("human", _) => "👎".to_string(),
                (_, Some(true)) => format!("pass {:.2}", s.score),
                (_, Some(false)) => format!("fail {:.2}", s.score),
                (_, None) => "error".to_string(),
            };
            println!(
                "  {:<6} {verdict:<10} {}  ({}){}",
                s.kind,
                s.criterion,
                s.source.as_deref().unwrap_or("?"),
                s.explanation
                    .as_deref()
                    .map(|e| format!(": {}", plain(e)))
                    .unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `steward stats`: per agent, the runs since `since`, their tokens, the share of
/// input read from the prompt cache (the figure that decides an agent's bill), cost.
pub async fn stats(store: &dyn Store, since: std::time::Duration, json: bool) -> anyhow::Result<ExitCode> {
    let from = chrono::Utc::now() - chrono::Duration::from_std(since).context("--since is too long")?;
    let usage = store.usage_by_agent(from).await?;
    if json {
        let rows: Vec<serde_json::Value> = usage
            .iter()
            .map(|u| {
                let mut v = serde_json::to_value(u).unwrap_or_default();
                v["cache_hit"] = serde_json::json!(u.cache_hit());
                v
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if usage.is_empty() {
        println!(
            "no runs in the last {}",
            crate::types::duration::format_duration(since)
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<24} {:>6} {:>12} {:>10} {:>12} {:>10} {:>10}",
        "AGENT", "RUNS", "INPUT", "CACHE HIT", "CACHE WRITE", "OUTPUT", "COST"
    );
    for u in &usage {
        println!(
            "{:<24} {:>6} {:>12} {:>9.0}% {:>12} {:>10} {:>10}",
            u.agent,
            u.runs,
            u.input_tokens,
            u.cache_hit() * 100.0,
            u.cache_write_tokens,
            u.output_tokens,
            format!("${:.4}", u.cost_usd)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// "escalated by U… at …; resolved by U… at …" (or "not resolved yet").
pub fn escalation_line(e: &crate::store::EscalationRow) -> String {
    let resolved = match (&e.resolved_by, e.resolved_at) {
        (Some(by), Some(at)) => format!("resolved by {by} at {}", crate::store::timestamp(at)),
        _ => "not resolved yet".into(),
    };
    format!(
        "escalated: a person was asked by {} at {}; {resolved}",
        e.escalated_by,
        crate::store::timestamp(e.escalated_at)
    )
}

/// `steward review AGENT`: the agent's problems, ranked.
/// Prints a review: a line per problem (the reviewer's sentence first, when it named
/// one), or JSON.
pub fn print_review(review: &crate::evals::review::Review, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(&review)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}: {} run{} since {}",
        review.agent,
        review.runs,
        if review.runs == 1 { "" } else { "s" },
        crate::store::timestamp(review.since)
    );
    if review.problems.is_empty() {
        println!("no problems: every run completed, no tool failed, no judge or person said no");
    }
    for (n, p) in review.problems.iter().enumerate() {
        println!(
            "{}. {}: {} run{} ({:.0}%); fix likely in {}",
            n + 1,
            match &p.summary {
                Some(s) => format!("{s} [{}]", p.problem),
                None => p.problem.clone(),
            },
            p.runs,
            if p.runs == 1 { "" } else { "s" },
            p.share * 100.0,
            p.fix_in
        );
        println!("   e.g. {}", p.examples.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
