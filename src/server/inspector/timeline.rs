//! A run's event log as a readable timeline: one [`Step`] per event worth showing,
//! with its title, facts and (folded) text. Content of a private run is never taken
//! from its events, whatever they hold.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::store::StoredEvent;

/// Text longer than this is folded behind a summary line.
pub const FOLD_CHARS: usize = 600;

/// One entry of the timeline.
#[derive(Debug, Clone)]
pub struct Step {
    pub at: DateTime<Utc>,
    /// `model`, `tool`, `file`, `compaction`, `reply`, `error`, `run`, `log`: for styling.
    pub class: &'static str,
    pub title: String,
    /// Short facts shown on the title line (tokens, cost, duration).
    pub facts: Vec<String>,
    /// Labelled text blocks (the answer, arguments, a result).
    pub texts: Vec<(&'static str, String)>,
    /// Where the step can be seen (a reply's Slack thread or Notion page).
    pub link: Option<String>,
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn tokens(usage: &Value) -> String {
    let mut out = format!(
        "{} in, {} out",
        num(&usage["input_tokens"]),
        num(&usage["output_tokens"])
    );
    let cached = num(&usage["cached_input_tokens"]);
    if cached > 0 {
        out.push_str(&format!(" ({cached} cached)"));
    }
    let reasoning = num(&usage["reasoning_tokens"]);
    if reasoning > 0 {
        out.push_str(&format!(", {reasoning} reasoning"));
    }
    out
}

fn millis(v: &Value) -> String {
    let ms = num(v);
    if ms >= 1000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

fn cost(v: &Value) -> Option<String> {
    v.as_f64().filter(|c| *c > 0.0).map(|c| format!("${c:.4}"))
}

/// The timeline of a run's events. With `private`, steps carry no text at all.
pub fn steps(events: &[StoredEvent], private: bool) -> Vec<Step> {
    events.iter().filter_map(|e| step(e, private)).collect()
}

fn step(e: &StoredEvent, private: bool) -> Option<Step> {
    let d = &e.data;
    let mut s = Step {
        at: e.at,
        class: "run",
        title: String::new(),
        facts: Vec::new(),
        texts: Vec::new(),
        link: None,
    };
    let add_text = |s: &mut Step, label: &'static str, v: &Value| {
        if !private && let Some(t) = text(v) {
            s.texts.push((label, t));
        }
    };
    match e.kind.as_str() {
        "run_started" => {
            s.title = format!(
                "Started by {} {}",
                text(&d["source"])?,
                text(&d["kind"]).unwrap_or_default()
            );
            if d["mock_tools"].as_bool() == Some(true) {
                s.facts.push("mock tools".into());
            }
        }
        "model_request" => return None,
        "model_response" => {
            s.class = "model";
            s.title = format!(
                "Turn {} · {}",
                num(&d["turn"]),
                text(&d["model"]).unwrap_or_default()
            );
            s.facts.push(tokens(&d["usage"]));
            s.facts.extend(cost(&d["cost_usd"]));
            s.facts.push(millis(&d["duration_ms"]));
            if let Some(stop) = text(&d["stop_reason"]) {
                s.facts.push(format!("stop: {stop}"));
            }
            add_text(&mut s, "answer", &d["text"]);
            if let Some(calls) = d["tool_calls"].as_array().filter(|c| !c.is_empty()) {
                let names: Vec<String> = calls.iter().filter_map(|c| text(&c["name"])).collect();
                s.facts.push(format!("asks for {}", names.join(", ")));
            }
        }
        "model_error" => {
            s.class = "error";
            s.title = format!(
                "Model error · {} {}",
                text(&d["provider"]).unwrap_or_default(),
                text(&d["model"]).unwrap_or_default()
            );
            s.facts.extend(text(&d["kind"]));
            add_text(&mut s, "error", &d["error"]);
        }
        "tool_call" => {
            s.class = "tool";
            s.title = format!("Tool call · {}", text(&d["name"])?);
            s.facts.extend(text(&d["call_id"]).map(|id| format!("id {id}")));
            if d["side_effect"].as_bool() == Some(true) {
                s.facts.push("side effect".into());
            }
            add_text(&mut s, "arguments", &d["arguments"]);
        }
        "tool_result" => {
            let ok = d["ok"].as_bool() == Some(true);
            s.class = if ok { "tool" } else { "error" };
            s.title = format!(
                "Tool {} · {}",
                if ok { "result" } else { "error" },
                text(&d["name"]).unwrap_or_default()
            );
            s.facts.push(format!("{} bytes", num(&d["bytes"])));
            s.facts.push(millis(&d["duration_ms"]));
            add_text(&mut s, "result", &d["content"]);
            add_text(&mut s, "error", &d["error"]);
        }
        "net_request" => {
            let refused = text(&d["refused"]);
            s.class = if refused.is_some() { "error" } else { "tool" };
            s.title = format!(
                "Network · {} {}:{}",
                text(&d["method"]).unwrap_or_default(),
                text(&d["host"]).unwrap_or_default(),
                num(&d["port"])
            );
            s.facts
                .extend(d["status"].as_u64().map(|c| format!("status {c}")));
            s.facts.push(format!(
                "{} bytes out, {} in",
                num(&d["bytes_sent"]),
                num(&d["bytes_received"])
            ));
            s.facts.push(millis(&d["duration_ms"]));
            add_text(&mut s, "path", &d["path"]);
            if let Some(names) = d["secrets"].as_array().filter(|n| !n.is_empty()) {
                let names: Vec<&str> = names.iter().filter_map(|n| n.as_str()).collect();
                s.facts.push(format!("secrets: {}", names.join(", ")));
            }
            add_text(&mut s, "refused", &d["refused"]);
        }
        "file_added" => {
            s.class = "file";
            s.title = format!("Virtual file {}", text(&d["file"]).unwrap_or_default());
            s.facts.extend(text(&d["mime"]));
            s.facts.push(format!("{} bytes", num(&d["bytes"])));
            add_text(&mut s, "name", &d["name"]);
        }
        "attachment_refused" => {
            s.class = "file";
            s.title = "Attachment not fetched".into();
            add_text(&mut s, "why", &d["note"]);
        }
        "compaction" => {
            s.class = "compaction";
            s.title = format!("Compaction {}", num(&d["n"]));
            s.facts.push(format!(
                "{} → {} tokens",
                num(&d["tokens_before"]),
                num(&d["tokens_after"])
            ));
            s.facts.extend(cost(&d["cost_usd"]));
            s.facts
                .extend(text(&d["transcript_file"]).map(|f| format!("transcript in {f}")));
        }
        "reply" => {
            s.class = "reply";
            s.title = format!("Reply to {}", destination(&d["destination"]));
            s.link = destination_link(&d["destination"]);
        }
        "reply_sent" => {
            let ok = d["ok"].as_bool() == Some(true);
            s.class = if ok { "reply" } else { "error" };
            s.title = if ok {
                "Reply posted".into()
            } else {
                "Reply failed".into()
            };
            s.facts.extend(text(&d["ts"]).map(|ts| format!("ts {ts}")));
            s.facts.extend(text(&d["id"]).map(|id| format!("id {id}")));
            add_text(&mut s, "error", &d["error"]);
        }
        "final_answer" => {
            s.class = "reply";
            s.title = "Final answer".into();
            s.facts.push(format!("{} chars", num(&d["chars"])));
            add_text(&mut s, "answer", &d["text"]);
        }
        "run_error" => {
            s.class = "error";
            s.title = format!("Ended early: {}", text(&d["termination"]).unwrap_or_default());
            add_text(&mut s, "error", &d["error"]);
        }
        "script_log" => {
            s.class = "log";
            s.title = "Script log".into();
            s.facts.extend(text(&d["note"]));
            add_text(&mut s, "log", &d["text"]);
        }
        "approval_requested" => {
            s.class = "approval";
            s.title = format!("Waiting for approval · {}", text(&d["name"]).unwrap_or_default());
            s.facts.extend(text(&d["deadline"]).map(|t| format!("until {t}")));
        }
        "approval_decided" => {
            let decision = text(&d["decision"]).unwrap_or_default();
            s.class = if decision == "approved" {
                "approval"
            } else {
                "error"
            };
            s.title = match text(&d["by"]) {
                Some(by) => format!("{} by {by}", capitalize(&decision)),
                None => capitalize(&decision.replace('_', " ")),
            };
        }
        "run_finished" => {
            s.title = format!(
                "Finished: {} ({})",
                text(&d["status"]).unwrap_or_default(),
                text(&d["termination"]).unwrap_or_default()
            );
        }
        other => {
            s.title = other.replace('_', " ");
            s.facts.extend(text(&d["reason"]));
        }
    }
    Some(s)
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A link to where a reply went: its Slack thread (or channel), or its Notion page.
/// Slack resolves `/archives/<channel>/p<ts>` to the workspace the reader is signed in to.
fn destination_link(d: &Value) -> Option<String> {
    let plain = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    };
    if let Some(channel) = text(&d["slack"]).filter(|c| plain(c)) {
        return Some(match text(&d["thread_ts"]).filter(|t| plain(t)) {
            Some(ts) => format!("https://slack.com/archives/{channel}/p{}", ts.replace('.', "")),
            None => format!("https://slack.com/archives/{channel}"),
        });
    }
    text(&d["notion"])
        .filter(|p| plain(p))
        .map(|page| format!("https://www.notion.so/{}", page.replace('-', "")))
}

/// Where a reply went, in words: `Slack C123 thread 1700.1`, `Jira ABC-1`.
fn destination(d: &Value) -> String {
    let mut parts = Vec::new();
    for (key, label) in [("slack", "Slack"), ("jira", "Jira"), ("notion", "Notion page")] {
        if let Some(v) = text(&d[key]) {
            parts.push(format!("{label} {v}"));
        }
    }
    if let Some(ts) = text(&d["thread_ts"]) {
        parts.push(format!("thread {ts}"));
    }
    if parts.is_empty() {
        d.to_string()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, data: Value) -> StoredEvent {
        StoredEvent {
            seq: 1,
            run_id: "r".into(),
            at: Utc::now(),
            kind: kind.into(),
            data,
        }
    }

    #[test]
    fn approvals_show_who_decided() {
        let asked = event(
            "approval_requested",
            json!({"approval": "a1", "call_id": "c1", "name": "deploy", "deadline": "2026-11-25T10:00:00.000Z"}),
        );
        let decided = event(
            "approval_decided",
            json!({"approval": "a1", "decision": "denied", "by": "U0ADA"}),
        );
        let timed_out = event(
            "approval_decided",
            json!({"approval": "a1", "decision": "timed_out"}),
        );
        let s = steps(&[asked, decided, timed_out], false);
        assert_eq!(s[0].title, "Waiting for approval · deploy");
        assert_eq!(s[0].facts, ["until 2026-11-25T10:00:00.000Z"]);
        assert_eq!((s[1].title.as_str(), s[1].class), ("Denied by U0ADA", "error"));
        assert_eq!(s[2].title, "Timed out");
    }

    #[test]
    fn a_private_run_shows_no_text() {
        let e = event(
            "tool_result",
            json!({"name": "http_fetch", "ok": true, "bytes": 12, "duration_ms": 1500, "content": "<script>"}),
        );
        let open = steps(std::slice::from_ref(&e), false);
        assert_eq!(open[0].texts, [("result", "<script>".to_string())]);
        assert_eq!(open[0].facts, ["12 bytes", "1.5 s"]);
        let private = steps(&[e], true);
        assert!(private[0].texts.is_empty());
        assert_eq!(private[0].title, "Tool result · http_fetch");
    }
}

#[cfg(test)]
mod link_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_links_to_its_thread_or_page() {
        assert_eq!(
            destination_link(&json!({"slack": "C0HELP", "thread_ts": "1700000000.000100"})).as_deref(),
            Some("https://slack.com/archives/C0HELP/p1700000000000100")
        );
        assert_eq!(
            destination_link(&json!({"notion": "153104cd-477e-809d-8dc4-ff2d96ae3090"})).as_deref(),
            Some("https://www.notion.so/153104cd477e809d8dc4ff2d96ae3090")
        );
        assert_eq!(destination_link(&json!({"slack": "C0\"><script>"})), None);
    }
}
