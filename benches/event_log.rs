//! The event log at size, through the release `steward` binary on SQLite:
//!
//! 1. `steward events list --outcome O --json` over 1,000,000 stored deliveries (goal:
//!    under 100 ms per query), for a common outcome, a rare one and one that is absent;
//! 2. `steward triggers test AGENT --last 10000` over 50 agents whose Slack and Jira
//!    rules carry `when:` filters (goal: under 2 s).
//!
//! Wall times are of the whole command (process start, opening the database, the
//! query, printing), the median of 5 runs each. Run with `cargo bench --bench
//! event_log` (`EVENT_LOG_ROWS` sets the count of stored deliveries).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use steward::store::{EventQueue, EventRow, SqliteStore};
use steward::types::event_outcome::{EventOutcome, OutcomeKind};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Runs `steward` with `args` 5 times; the median wall time and the last stdout.
fn timed(root: &Path, db: &Path, args: &[&str]) -> (Duration, String) {
    let mut times = Vec::new();
    let mut out = String::new();
    for _ in 0..5 {
        let started = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_steward"))
            .args(["--root", root.to_str().unwrap()])
            .args(args)
            .env("DATABASE_URL", format!("sqlite://{}", db.display()))
            .env("RUST_LOG", "error")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .output()
            .unwrap();
        times.push(started.elapsed());
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out = String::from_utf8_lossy(&o.stdout).into_owned();
    }
    (median(times), out)
}

/// A Slack mention as stored (the normalized trigger), in one of 40 channels.
fn slack_trigger(i: usize) -> serde_json::Value {
    let channel = format!("C{:04}", i % 40);
    let text = if i.is_multiple_of(3) {
        format!("<@UBOT> is https://status.example.com/{i} down?")
    } else {
        format!("<@UBOT> question {i}")
    };
    json!({"source": "slack", "kind": "app_mention", "summary": format!("mention in {channel}"),
        "text": text, "payload": {"user": "U1", "channel": channel, "text": text},
        "origin": {"type": "slack", "team": "T1", "channel": channel, "channel_type": null, "user": "U1",
                   "ts": format!("1700000000.{i:06}"), "thread_ts": null, "reaction": null}})
}

/// A Jira issue created in one of 5 projects, labelled `infra` one time in three, of
/// High priority one time in two.
fn jira_trigger(i: usize) -> serde_json::Value {
    let project = format!("P{}", i % 5);
    let labels = if i.is_multiple_of(3) {
        json!(["infra"])
    } else {
        json!(["web"])
    };
    let priority = if (i / 10).is_multiple_of(2) { "High" } else { "Low" };
    json!({"source": "jira", "kind": "jira:issue_created", "summary": format!("{project}-{i} created"),
        "text": null,
        "payload": {"webhookEvent": "jira:issue_created", "issue": {"key": format!("{project}-{i}"),
            "fields": {"labels": labels, "priority": {"name": priority}, "summary": "Something broke"}}},
        "origin": {"type": "jira", "issue_key": format!("{project}-{i}"), "project": project,
                   "webhook_event": "jira:issue_created", "changed_fields": []}})
}

fn main() {
    let rows: usize = std::env::var("EVENT_LOG_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let db = root.join("steward.db");

    // 50 agents: 40 on one Slack channel each (half with a filter), 10 on a Jira project
    // each with a filter; the helpdesk-like catch-all has the lowest priority.
    write(root, "prompts/p.md", "Answer.");
    for a in 0..40 {
        let when = if a % 2 == 0 {
            ", when: 'text.contains(\"https://\") && user != \"U0BOT\"'"
        } else {
            ""
        };
        write(
            root,
            &format!("agents/slack-{a:02}.yaml"),
            &format!(
                "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - slack_mention: {{ channels: [C{a:04}]{when} }}\n  - slack_dm: {{ priority: {a} }}\n"
            ),
        );
    }
    for a in 0..10 {
        write(
            root,
            &format!("agents/jira-{a:02}.yaml"),
            &format!(
                "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - jira: {{ events: [\"jira:issue_created\"], projects: [P{}], when: 'labels.contains(\"infra\") && fields.priority.name == \"High\"' }}\n",
                a % 5
            ),
        );
    }

    // The stored deliveries: the most recent 10,000 are full triggers (what
    // `triggers test` replays); the rest are settled records with outcomes.
    let started = Instant::now();
    rt.block_on(async {
        let store = SqliteStore::open(&db).await.unwrap();
        let outcomes = [
            (OutcomeKind::Started, 60),
            (OutcomeKind::NoAgent, 25),
            (OutcomeKind::Duplicate, 10),
            (OutcomeKind::Ignored, 4),
            (OutcomeKind::Refused, 1),
        ];
        let pick = |i: usize| {
            let mut at = i % 100;
            for (k, share) in outcomes {
                if at < share {
                    return k;
                }
                at -= share;
            }
            OutcomeKind::Started
        };
        let replayed = 10_000.min(rows);
        let mut batch = Vec::with_capacity(5_000);
        for i in 0..rows {
            let recent = i >= rows - replayed;
            let body = if recent {
                if i % 2 == 0 {
                    slack_trigger(i)
                } else {
                    jira_trigger(i)
                }
            } else {
                json!({"summary": format!("delivery {i}")})
            };
            batch.push(EventRow {
                id: uuid::Uuid::now_v7().to_string(),
                source: if recent && i % 2 == 1 { "jira" } else { "slack" }.into(),
                kind: "app_mention".into(),
                dedupe_key: format!("bench:{i}"),
                received_at: chrono::Utc::now(),
                private: false,
                body,
                sealed: None,
                // The recent ones wait in the queue as routing leaves them (no outcome
                // yet is fine: `triggers test` reads their bodies).
                outcome: (!recent).then(|| EventOutcome::new(pick(i), json!({"reason": "bench"}))),
            });
            if batch.len() == 5_000 {
                store.insert_events(&batch).await.unwrap();
                batch.clear();
            }
        }
        if !batch.is_empty() {
            store.insert_events(&batch).await.unwrap();
        }
    });
    println!(
        "stored {rows} deliveries in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    for (label, outcome) in [
        ("common (started, 60%)", "started"),
        ("rare (refused, 1%)", "refused"),
        ("absent (over_budget)", "over_budget"),
    ] {
        let (t, out) = timed(root, &db, &["events", "list", "--outcome", outcome, "--json"]);
        let n = serde_json::from_str::<serde_json::Value>(&out)
            .ok()
            .and_then(|v| v.as_array().map(Vec::len))
            .unwrap_or(0);
        println!(
            "events list --outcome {outcome} over {rows}: median {:.1} ms ({label}; {n} listed)",
            t.as_secs_f64() * 1000.0
        );
    }
    let (t, _) = timed(root, &db, &["events", "list", "--json"]);
    println!(
        "events list (no filter) over {rows}: median {:.1} ms",
        t.as_secs_f64() * 1000.0
    );
    let (t, _) = timed(root, &db, &["validate"]);
    println!(
        "for scale, the whole process with the 50-agent config (validate): median {:.1} ms",
        t.as_secs_f64() * 1000.0
    );

    for agent in ["slack-00", "jira-00"] {
        let (t, out) = timed(
            root,
            &db,
            &["triggers", "test", agent, "--last", "10000", "--json"],
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        println!(
            "triggers test {agent} --last 10000 over 50 agents: median {:.0} ms (replayed {}, would start {}, matched {})",
            t.as_secs_f64() * 1000.0,
            v["replayed"],
            v["would_start"],
            v["triggers"][0]["matched"]
        );
    }
}
