//! The inspector's HTML, as maud templates: checked at compile time, every `(value)`
//! escaped, no JavaScript (folded text uses `<details>`).

use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::timeline::{FOLD_CHARS, Step};
use crate::store::{RunFilter, RunRow, Score};

const CSS: &str = "
body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1100px;padding:1rem;color:#1d1d1f}
a{color:#0b57d0}h1{font-size:1.4rem}h1 a{color:inherit;text-decoration:none}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #e3e3e3;vertical-align:top}
th{font-size:.8rem;text-transform:uppercase;color:#666}
.status{font-weight:600}.succeeded{color:#18794e}.failed,.interrupted{color:#b42318}.running,.queued{color:#8a6d00}
form.filters{display:flex;flex-wrap:wrap;gap:.5rem;margin:1rem 0}form.filters input,form.filters select{padding:.3rem}
ol.timeline{list-style:none;padding:0}ol.timeline li{border-left:4px solid #ccc;padding:.4rem .8rem;margin:.5rem 0;background:#fafafa}
li.model{border-color:#0b57d0}li.tool{border-color:#7a4cc2}li.error{border-color:#b42318}li.reply{border-color:#18794e}li.approval{border-color:#b54708}
li.file,li.compaction{border-color:#8a6d00}.facts{color:#555;font-size:.85rem}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #e3e3e3;padding:.5rem;margin:.3rem 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}dt{color:#666}
.note{background:#fff7e0;padding:.5rem;border:1px solid #f0d890}
";

/// A whole page around `body`.
pub fn page(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · steward" }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { a href="/runs" { "steward runs" } " · " a href="/events" { "events" } " · " a href="/problems" { "problems" } }
                (body)
            }
        }
    }
}

/// One row of the run list, with its actor's display name resolved.
pub struct ListedRun {
    pub run: RunRow,
    pub actor: String,
}

fn duration(run: &RunRow) -> String {
    match (run.started_at, run.finished_at) {
        (Some(s), Some(f)) => {
            let ms = (f - s).num_milliseconds().max(0);
            if ms >= 60_000 {
                format!("{}m {}s", ms / 60_000, (ms % 60_000) / 1000)
            } else {
                format!("{:.1}s", ms as f64 / 1000.0)
            }
        }
        (Some(_), None) => "running".into(),
        _ => String::new(),
    }
}

/// How long the run waited between being created and starting.
fn queued(run: &RunRow) -> String {
    match run.started_at {
        Some(s) => format!(
            "{:.1}s",
            (s - run.created_at).num_milliseconds().max(0) as f64 / 1000.0
        ),
        None => "not started".into(),
    }
}

/// Whether the run list is unfiltered (so an empty one means no runs at all).
fn filter_is_empty(f: &RunFilter) -> bool {
    f.agent.is_none()
        && f.status.is_none()
        && f.source.is_none()
        && f.since.is_none()
        && f.until.is_none()
        && f.text.is_none()
}

/// Slack's markup as a reader sees it: `<@U1>` → `@U1`, `<#C1|ops>` → `#ops`,
/// `<https://x|label>` → `label`, `<https://x>` → `https://x`.
fn slack_plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('>') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let inner = &rest[open + 1..open + close];
        let (target, label) = match inner.split_once('|') {
            Some((t, l)) => (t, Some(l)),
            None => (inner, None),
        };
        let shown = match (target.chars().next(), label) {
            (Some('@'), Some(l)) => format!("@{l}"),
            (Some('@'), None) => target.to_string(),
            (Some('#'), Some(l)) => format!("#{l}"),
            (Some('!'), _) => format!(
                "@{}",
                target
                    .trim_start_matches('!')
                    .split('^')
                    .next()
                    .unwrap_or_default()
            ),
            (_, Some(l)) => l.to_string(),
            _ => target.to_string(),
        };
        out.push_str(&shown);
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

fn when(run: &RunRow) -> String {
    run.created_at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `/runs`: filters and the matching runs.
pub fn run_list(runs: &[ListedRun], filter: &RunFilter, agents: &[String], sources: &[&str]) -> Markup {
    let date = |d: Option<chrono::DateTime<chrono::Utc>>| d.map(|d| d.format("%Y-%m-%d").to_string());
    let body = html! {
        form.filters method="get" action="/runs" {
            input type="search" name="q" placeholder="search summaries" value=[filter.text.as_deref()];
            select name="agent" {
                option value="" { "any agent" }
                @for a in agents {
                    option value=(a) selected[filter.agent.as_deref() == Some(a.as_str())] { (a) }
                }
            }
            select name="status" {
                option value="" { "any status" }
                @for s in ["succeeded", "failed", "cancelled", "interrupted", "running", "queued"] {
                    option value=(s) selected[filter.status.map(|x| x.as_str()) == Some(s)] { (s) }
                }
            }
            select name="source" {
                option value="" { "any trigger" }
                @for s in sources {
                    option value=(s) selected[filter.source.as_deref() == Some(*s)] { (s) }
                }
            }
            label { "from " input type="date" name="since" value=[date(filter.since)]; }
            label { "to " input type="date" name="until" value=[date(filter.until)]; }
            label { input type="checkbox" name="runs" value="all" checked[!filter.top_level]; " subagent runs too" }
            button type="submit" { "Filter" }
        }
        @if runs.is_empty() && filter_is_empty(filter) {
            p.note {
                "No runs yet. A run starts when someone mentions the bot in Slack, a Jira or Notion webhook or a generic hook arrives, a cron schedule fires, or you run "
                code { "steward run AGENT --event FILE" }
                ". It shows here as it works. "
                a href="/events" { "Events" }
                " lists every delivery and why it started nothing."
            }
        } @else if runs.is_empty() {
            p { "No runs match." }
        } @else {
            table {
                thead { tr {
                    th { "started" } th { "agent" } th { "trigger" } th { "by" } th { "status" }
                    th { "duration" } th { "tokens" } th { "cost" }
                } }
                tbody {
                    @for r in runs {
                        tr {
                            td { a href={ "/runs/" (r.run.id) } { (when(&r.run)) } }
                            td { (r.run.agent) }
                            td { (slack_plain(&r.run.trigger_summary)) }
                            td { (r.actor) }
                            td.status.(r.run.status.as_str()) {
                                (r.run.status.as_str())
                                @if let Some(t) = &r.run.termination { @if t != "completed" { " (" (t) ")" } }
                            }
                            td { (duration(&r.run)) }
                            td { (r.run.usage.input_tokens + r.run.usage.output_tokens) }
                            td { (format!("${:.4}", r.run.cost_usd)) }
                        }
                    }
                }
            }
        }
    };
    page("Runs", body)
}

/// What the run page shows besides the timeline.
pub struct RunPage<'a> {
    pub run: &'a RunRow,
    pub actor: String,
    pub steps: Vec<Step>,
    pub children: Vec<RunRow>,
    /// The prompt (or script) page, when the agent still exists.
    pub prompt: Option<String>,
    /// Post-run eval verdicts and people's 👍/👎.
    pub scores: Vec<Score>,
    /// A person called from its answer, and whether it is resolved.
    pub escalation: Option<crate::store::EscalationRow>,
}

fn folded(label: &str, text: &str) -> Markup {
    html! {
        @if text.chars().count() > FOLD_CHARS {
            details {
                summary { (label) " (" (text.chars().count()) " characters)" }
                pre { (text) }
            }
        } @else {
            div.facts { (label) }
            pre { (text) }
        }
    }
}

/// `/runs/{id}`: the run's facts and its timeline.
pub fn run_detail(p: &RunPage<'_>) -> Markup {
    let r = p.run;
    let body = html! {
        h2 { (r.agent) " · " span.status.(r.status.as_str()) { (r.status.as_str()) } }
        @if r.private {
            p.note { "This run came from a private channel: only its metadata is shown." }
        }
        dl {
            dt { "run" } dd { code { (r.id) } }
            dt { "trigger" } dd { (r.source) " " (r.kind) " · " (slack_plain(&r.trigger_summary)) }
            dt { "by" } dd { (p.actor) }
            dt { "started" } dd { (when(r)) }
            dt { "queued for" } dd { (queued(r)) }
            dt { "duration" } dd { (duration(r)) }
            dt { "ended" } dd { (r.termination.as_deref().unwrap_or("")) }
            dt { "turns, tool calls" } dd { (r.turns) ", " (r.tool_calls) }
            dt { "tokens" } dd {
                (r.usage.input_tokens) " in (" (r.usage.cached_input_tokens) " cached), "
                (r.usage.output_tokens) " out"
                @if r.usage.reasoning_tokens > 0 { " (" (r.usage.reasoning_tokens) " reasoning)" }
            }
            dt { "cost" } dd { (format!("${:.4}", r.cost_usd)) }
            @if !r.skill_loads.is_empty() {
                dt { "skills loaded" } dd {
                    @for (skill, n) in &r.skill_loads { (skill) " ×" (n) " " }
                }
            }
            @if let Some(parent) = &r.parent_id {
                dt { "parent run" } dd { a href={ "/runs/" (parent) } { (parent) } }
            }
            @if let Some(event) = &r.event_id {
                dt { "event" } dd { a href={ "/events/" (event) } { (event) } }
            }
            @if let Some(prompt) = &p.prompt {
                dt { "prompt" } dd { a href=(prompt) { (prompt) } }
            }
            @if let Some(error) = &r.error {
                dt { "error" } dd { (error) }
            }
            @if let Some(e) = &p.escalation {
                dt { "escalated" } dd {
                    span.status.escalated { "escalated" } " by " (e.escalated_by) " at " (crate::store::timestamp(e.escalated_at))
                    @match (&e.resolved_by, e.resolved_at) {
                        (Some(by), Some(at)) => { " · resolved by " (by) " at " (crate::store::timestamp(at)) }
                        _ => { " · not resolved yet" }
                    }
                }
            }
        }
        @if !p.children.is_empty() {
            h3 { "Subagent runs" }
            ul {
                @for c in &p.children {
                    li { a href={ "/runs/" (c.id) } { (c.agent) } " · " (c.status.as_str()) " · " (duration(c)) }
                }
            }
        }
        @if !p.scores.is_empty() {
            h3 { "Scores" }
            table {
                thead { tr { th { "by" } th { "criterion" } th { "verdict" } th { "why" } } }
                tbody {
                    @for s in &p.scores {
                        tr {
                            td { (s.kind) " " (s.source.as_deref().unwrap_or("")) }
                            td { (s.criterion) }
                            td {
                                @match (s.kind.as_str(), s.passed) {
                                    ("human", _) => { (if s.score > 0.0 { "👍" } else { "👎" }) }
                                    (_, Some(true)) => { span.status.succeeded { "pass " (format!("{:.2}", s.score)) } }
                                    (_, Some(false)) => { span.status.failed { "fail " (format!("{:.2}", s.score)) } }
                                    (_, None) => { span.status.failed { "error" } }
                                }
                            }
                            td { (s.explanation.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
        h3 { "Timeline" }
        ol.timeline {
            @for s in &p.steps {
                li.(s.class) {
                    span.facts { (s.at.format("%H:%M:%S%.3f")) " " }
                    strong { (s.title) }
                    @if let Some(link) = &s.link { " " a href=(link) { "open" } }
                    @if !s.facts.is_empty() { span.facts { " · " (s.facts.join(" · ")) } }
                    @for (label, text) in &s.texts { (folded(label, text)) }
                }
            }
        }
        @if !r.private {
            @if let Some(text) = &r.final_text {
                h3 { "Final reply" }
                pre { (text) }
            }
        }
    };
    page(&format!("Run {}", r.id), body)
}

/// `/prompts/{path}`: a prompt or script as the agents load it.
pub fn prompt(path: &str, text: &str, agents: &[String]) -> Markup {
    page(
        path,
        html! {
            h2 { (path) }
            p.facts { "used by " (agents.join(", ")) }
            pre { (text) }
        },
    )
}

/// `/login`: the admin token form.
pub fn login(failed: bool) -> Markup {
    page(
        "Sign in",
        html! {
            @if failed { p.note { "That token is not right." } }
            form method="post" action="/login" {
                label { "Admin token " input type="password" name="token" autofocus; }
                " "
                button type="submit" { "Sign in" }
            }
        },
    )
}

/// A refusal or a missing page, as a page.
pub fn message(title: &str, text: &str) -> Markup {
    page(title, html! { p.note { (text) } })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slack_markup_reads_as_people_see_it() {
        assert_eq!(
            slack_plain(
                "<@U0BOT> can <@U12|ana> see <#C0OPS|ops-alerts> and <https://x.example/a|the doc>? <https://y.example> <!here>"
            ),
            "@U0BOT can @ana see #ops-alerts and the doc? https://y.example @here"
        );
        assert_eq!(slack_plain("a < b"), "a < b");
    }
}
