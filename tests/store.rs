//! The store contracts, on both backends: SQLite (a file per test) and PostgreSQL (a
//! schema per test in the database at 127.0.0.1:5432, or `STEWARD_TEST_POSTGRES_URL`).
//! Without a reachable PostgreSQL the Postgres half is skipped with a notice, except
//! under `CI=true`, where it fails.

mod support;

use std::sync::Arc;

use chrono::{Duration as Span, Utc};
use serde_json::json;
use steward::store::{
    EventFilter, EventRecord, EventRow, NewEvent, NewRun, PgStore, Route, RunFilter, RunStatus, RunStore,
    Score, SqliteStore, Store, StoredFile,
};
use steward::types::event_outcome::{EventOutcome, OutcomeKind};
use steward::types::{Privacy, RunOutcome, Termination};

const DEFAULT_PG: &str = "postgres://postgres@127.0.0.1:5432/test";

async fn sqlite() -> (Option<tempfile::TempDir>, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    (Some(dir), Arc::new(store))
}

fn pg_url() -> String {
    std::env::var("STEWARD_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_PG.into())
}

/// A store in a fresh schema, and the schema's name (drop it with [`drop_schema`]).
async fn postgres() -> Option<(Arc<dyn Store>, String)> {
    let url = pg_url();
    let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
    match PgStore::connect_in_schema(&url, &schema).await {
        Ok(store) => Some((Arc::new(store), schema)),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("PostgreSQL at {url} is required under CI=true: {e}")
        }
        Err(e) => {
            eprintln!("skipping the PostgreSQL half: {e}");
            None
        }
    }
}

async fn drop_schema(schema: &str) {
    let pool = sqlx::PgPool::connect(&pg_url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&pool)
        .await
        .unwrap();
}

/// Runs `suite` on SQLite, then on PostgreSQL.
macro_rules! both {
    ($name:ident, $suite:ident) => {
        #[tokio::test]
        async fn $name() {
            let (_dir, s) = sqlite().await;
            $suite(s).await;
            if let Some((p, schema)) = postgres().await {
                $suite(p).await;
                drop_schema(&schema).await;
            }
        }
    };
}

fn run(id: &str, agent: &str) -> NewRun {
    NewRun {
        id: id.into(),
        agent: agent.into(),
        trigger_summary: format!("summary of {id}"),
        source: "slack".into(),
        kind: "app_mention".into(),
        ..NewRun::default()
    }
}

fn event(id: &str, key: &str) -> EventRow {
    EventRow {
        id: id.into(),
        source: "slack".into(),
        kind: "app_mention".into(),
        dedupe_key: key.into(),
        received_at: Utc::now(),
        private: false,
        body: json!({"text": id}),
        sealed: None,
        outcome: None,
    }
}

async fn runs_move_through_their_states(s: Arc<dyn Store>) {
    s.create_run(&run("r1", "helpdesk")).await.unwrap();
    assert!(
        !s.transition("r1", RunStatus::Running, RunStatus::Succeeded)
            .await
            .unwrap()
    );
    assert!(
        s.transition("r1", RunStatus::Queued, RunStatus::Running)
            .await
            .unwrap()
    );
    let outcome = RunOutcome {
        final_text: Some("the secret answer".into()),
        error: Some("quoted input".into()),
        termination: Termination::MaxTurns,
        turns: 3,
        tool_calls: 2,
        cost_usd: 0.25,
        ..RunOutcome::new("r1")
    };
    assert!(
        s.finish_run("r1", RunStatus::Running, &outcome, Privacy::Private)
            .await
            .unwrap()
    );
    assert!(
        !s.finish_run("r1", RunStatus::Running, &outcome, Privacy::Private)
            .await
            .unwrap()
    );
    let row = s.get_run("r1").await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Failed);
    assert_eq!(row.termination.as_deref(), Some("max_turns"));
    assert_eq!(row.final_text.as_deref(), Some("[private: 17 chars]"));
    assert_eq!((row.turns, row.tool_calls), (3, 2));
    assert!((row.cost_usd - 0.25).abs() < 1e-9);
    assert!(row.started_at.is_some() && row.finished_at.is_some());
    assert_eq!((row.source.as_str(), row.kind.as_str()), ("slack", "app_mention"));
    assert!(s.get_run("nope").await.unwrap().is_none());
}
both!(
    runs_move_through_their_states_on_both,
    runs_move_through_their_states
);

async fn usage_is_summed_per_agent_over_top_level_runs(s: Arc<dyn Store>) {
    let since = chrono::Utc::now() - chrono::Duration::hours(1);
    for (id, agent, cached) in [
        ("u1", "helpdesk", 900u64),
        ("u2", "helpdesk", 0),
        ("u3", "triage", 50),
    ] {
        s.create_run(&run(id, agent)).await.unwrap();
        s.transition(id, RunStatus::Queued, RunStatus::Running)
            .await
            .unwrap();
        let outcome = RunOutcome {
            usage: steward::types::Usage {
                input_tokens: 1000,
                cached_input_tokens: cached,
                cache_write_tokens: 100,
                output_tokens: 10,
                reasoning_tokens: 0,
            },
            cost_usd: 0.01,
            ..RunOutcome::new(id)
        };
        s.finish_run(id, RunStatus::Running, &outcome, Privacy::Recorded)
            .await
            .unwrap();
    }
    // A subagent run is counted in its parent's totals, not again.
    let mut child = run("u4", "researcher");
    child.parent_id = Some("u1".into());
    s.create_run(&child).await.unwrap();
    let usage = s.usage_by_agent(since).await.unwrap();
    assert_eq!(usage.len(), 2, "{usage:?}");
    assert_eq!((usage[0].agent.as_str(), usage[0].runs), ("helpdesk", 2));
    assert_eq!((usage[0].input_tokens, usage[0].cached_input_tokens), (2000, 900));
    assert!((usage[0].cache_hit() - 0.45).abs() < 1e-9);
    assert!((usage[0].cost_usd - 0.02).abs() < 1e-9);
    assert_eq!(usage[1].agent, "triage");
    assert!(
        s.usage_by_agent(chrono::Utc::now() + chrono::Duration::hours(1))
            .await
            .unwrap()
            .is_empty()
    );
}
both!(
    usage_is_summed_per_agent_over_top_level_runs_on_both,
    usage_is_summed_per_agent_over_top_level_runs
);

async fn events_keep_their_order_and_side_effects_are_found(s: Arc<dyn Store>) {
    s.create_run(&run("r2", "a")).await.unwrap();
    let now = Utc::now();
    let events: Vec<NewEvent> = (0..5)
        .map(|i| NewEvent {
            at: now + Span::milliseconds(i),
            kind: if i == 3 { "tool_call".into() } else { "note".into() },
            data: json!({"i": i, "side_effect": i == 3}).to_string(),
        })
        .collect();
    s.append_events("r2", &events).await.unwrap();
    let stored = s.run_events("r2").await.unwrap();
    let order: Vec<i64> = stored.iter().map(|e| e.data["i"].as_i64().unwrap()).collect();
    assert_eq!(order, [0, 1, 2, 3, 4]);
    assert!(s.has_side_effects("r2").await.unwrap());
    s.create_run(&run("r3", "a")).await.unwrap();
    s.append_event("r3", "tool_call", &json!({"side_effect": false}))
        .await
        .unwrap();
    assert!(!s.has_side_effects("r3").await.unwrap());
    // Reply lookup by Slack ts, for feedback.
    s.append_event(
        "r3",
        "reply_sent",
        &json!({"ok": true, "ts": "1700000000.000100"}),
    )
    .await
    .unwrap();
    assert_eq!(
        s.run_by_reply_ts("1700000000.000100").await.unwrap().as_deref(),
        Some("r3")
    );
    assert_eq!(s.run_by_reply_ts("1.2").await.unwrap(), None);
}
both!(
    events_keep_their_order_on_both,
    events_keep_their_order_and_side_effects_are_found
);

async fn runs_are_listed_filtered_and_searched(s: Arc<dyn Store>) {
    s.create_run(&run("0001", "helpdesk")).await.unwrap();
    s.create_run(&NewRun {
        trigger_summary: "Deploy 100% failed_now".into(),
        ..run("0002", "deploys")
    })
    .await
    .unwrap();
    s.create_run(&NewRun {
        parent_id: Some("0001".into()),
        ..run("0003", "judge")
    })
    .await
    .unwrap();
    assert_eq!(s.list_runs(10).await.unwrap().len(), 3);
    let filter = |f: RunFilter| RunFilter { limit: 10, ..f };
    let ids = |rows: Vec<steward::store::RunRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
    let by_agent = s
        .query_runs(&filter(RunFilter {
            agent: Some("deploys".into()),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(ids(by_agent), ["0002"]);
    // Case-insensitive; % and _ match literally.
    let text = |t: &str| {
        filter(RunFilter {
            text: Some(t.into()),
            ..Default::default()
        })
    };
    assert_eq!(ids(s.query_runs(&text("deploy 100%")).await.unwrap()), ["0002"]);
    assert_eq!(ids(s.query_runs(&text("FAILED_NOW")).await.unwrap()), ["0002"]);
    assert!(s.query_runs(&text("100_")).await.unwrap().is_empty());
    let top = s
        .query_runs(&filter(RunFilter {
            top_level: true,
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(top.len(), 2);
    assert_eq!(ids(s.child_runs("0001").await.unwrap()), ["0003"]);
    let queued = s
        .query_runs(&filter(RunFilter {
            status: Some(RunStatus::Queued),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert_eq!(queued.len(), 3);
    let future = s
        .query_runs(&filter(RunFilter {
            since: Some(Utc::now() + Span::days(1)),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert!(future.is_empty());
    assert_eq!(s.run_ids_with_prefix("000", 10).await.unwrap().len(), 3);
    assert_eq!(s.run_ids_with_prefix("0002", 10).await.unwrap(), ["0002"]);
}
both!(runs_are_listed_on_both, runs_are_listed_filtered_and_searched);

async fn the_event_queue_dedupes_claims_and_routes(s: Arc<dyn Store>) {
    let first = s
        .insert_events(&[event("e1", "k1"), event("e2", "k2"), event("e3", "k1")])
        .await
        .unwrap();
    assert_eq!(
        first,
        [true, true, false],
        "a key repeated in one batch counts once"
    );
    assert_eq!(s.insert_events(&[event("e4", "k2")]).await.unwrap(), [false]);
    assert_eq!(s.count_events().await.unwrap(), 2);
    assert_eq!(s.queue_depth().await.unwrap(), (2, 0));
    // Two claimers never get the same event.
    let (a, b) = tokio::join!(s.claim_events(1), s.claim_events(1));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.len() + b.len(), 2);
    assert!(a.iter().all(|x| b.iter().all(|y| x.id != y.id)));
    assert!(s.claim_events(10).await.unwrap().is_empty());
    let lease = Utc::now() + Span::seconds(60);
    assert!(
        s.route_event("e1", &[run("from-e1", "helpdesk")], lease)
            .await
            .unwrap()
    );
    assert!(!s.route_event("e1", &[], lease).await.unwrap(), "routed once");
    let routed = s.get_run("from-e1").await.unwrap().unwrap();
    assert_eq!(routed.status, RunStatus::Queued);
    assert_eq!(s.queue_depth().await.unwrap(), (1, 1));
    // e2 was claimed by a router that died: it goes back once its claim is stale,
    // not while a live router may still be routing it.
    assert_eq!(
        s.requeue_orphan_events(Utc::now() - Span::seconds(60))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        s.requeue_orphan_events(Utc::now() + Span::seconds(1))
            .await
            .unwrap(),
        1
    );
    assert_eq!(s.claim_events(10).await.unwrap().len(), 1);
    assert_eq!(
        s.get_event("e2").await.unwrap().unwrap().body,
        json!({"text": "e2"})
    );
    assert!(s.get_event("e9").await.unwrap().is_none());
}
both!(the_event_queue_on_both, the_event_queue_dedupes_claims_and_routes);

async fn a_claimed_batch_is_routed_in_one_transaction(s: Arc<dyn Store>) {
    let events: Vec<EventRow> = (0..5)
        .map(|i| event(&format!("b{i}"), &format!("bk{i}")))
        .collect();
    s.insert_events(&events).await.unwrap();
    assert_eq!(s.claim_events(4).await.unwrap().len(), 4);
    let lease = Utc::now() + Span::seconds(60);
    let two = [run("b0-a", "helpdesk"), run("b0-b", "triage")];
    let one = [run("b2-a", "helpdesk")];
    let later = [run("b4-a", "helpdesk")];
    let started = EventOutcome::new(
        OutcomeKind::Started,
        json!({"runs": [{"id": "b0-a", "agent": "helpdesk"}, {"id": "b0-b", "agent": "triage"}]}),
    );
    let no_agent = EventOutcome::new(
        OutcomeKind::NoAgent,
        json!({"agents": {"helpdesk": "wrong channel"}}),
    );
    let routes = [
        Route {
            event_id: "b0",
            runs: &two,
            outcome: Some(&started),
        },
        Route {
            event_id: "b1",
            runs: &[],
            outcome: Some(&no_agent),
        },
        Route {
            event_id: "b2",
            runs: &one,
            outcome: None,
        },
        // Still queued (not claimed): skipped, nothing written for it.
        Route {
            event_id: "b4",
            runs: &later,
            outcome: None,
        },
    ];
    let written = s.route_events(&routes, lease).await.unwrap();
    assert_eq!(written, [true, true, true, false]);
    for id in ["b0-a", "b0-b", "b2-a"] {
        let r = s.get_run(id).await.unwrap().unwrap();
        assert_eq!(
            (r.status, r.source.as_str()),
            (RunStatus::Queued, "slack"),
            "{id}"
        );
    }
    assert!(s.get_run("b4-a").await.unwrap().is_none());
    // b3 (claimed) and b4 (queued) wait; the three runs are queued. Routed twice is
    // refused.
    assert_eq!(s.queue_depth().await.unwrap(), (2, 3));
    assert_eq!(s.route_events(&routes[..1], lease).await.unwrap(), [false]);
    // Each outcome is written with its route, in the same transaction.
    let b0 = s.event_record("b0").await.unwrap().unwrap();
    assert_eq!(
        (b0.outcome, b0.detail["runs"][1]["agent"].as_str()),
        (Some(OutcomeKind::Started), Some("triage"))
    );
    let b1 = s.event_record("b1").await.unwrap().unwrap();
    assert_eq!(b1.outcome_name(), "no_agent");
    assert_eq!(b1.why(), "helpdesk: wrong channel");
    let b2 = s.event_record("b2").await.unwrap().unwrap();
    assert_eq!((b2.outcome, b2.outcome_name()), (None, "started"));
}
both!(
    a_claimed_batch_is_routed_on_both,
    a_claimed_batch_is_routed_in_one_transaction
);

async fn appends_from_many_runs_at_once_all_land_and_a_bad_one_fails_alone(s: Arc<dyn Store>) {
    let runs = 40;
    for i in 0..runs {
        s.create_run(&run(&format!("g{i}"), "a")).await.unwrap();
    }
    let now = Utc::now();
    // Different sizes, so batches mix statements of every size.
    let appends = (0..runs).map(|i| {
        let s = s.clone();
        async move {
            let events: Vec<NewEvent> = (0..(i * 7 % 300 + 1))
                .map(|n| NewEvent {
                    at: now,
                    kind: "note".into(),
                    data: json!({"run": i, "n": n}).to_string(),
                })
                .collect();
            s.append_events(&format!("g{i}"), &events)
                .await
                .map(|_| events.len())
        }
    });
    let nothing = json!({});
    let bad = s.append_event("no-such-run", "note", &nothing);
    let (results, bad) = tokio::join!(futures_util::future::join_all(appends), bad);
    assert!(bad.is_err(), "an event of a run that does not exist is refused");
    for (i, r) in results.into_iter().enumerate() {
        let n = r.unwrap_or_else(|e| panic!("run g{i}: {e}"));
        let stored = s.run_events(&format!("g{i}")).await.unwrap();
        let order: Vec<i64> = stored.iter().map(|e| e.data["n"].as_i64().unwrap()).collect();
        assert_eq!(
            order,
            (0..n as i64).collect::<Vec<_>>(),
            "g{i} in order, none lost"
        );
    }
}
both!(
    appends_from_many_runs_land_on_both,
    appends_from_many_runs_at_once_all_land_and_a_bad_one_fails_alone
);

async fn leases_expire_and_runs_are_requeued_without_their_files(s: Arc<dyn Store>) {
    s.insert_events(&[event("ev", "kev")]).await.unwrap();
    s.claim_events(1).await.unwrap();
    let past = Utc::now() - Span::seconds(5);
    s.route_event("ev", &[run("leased", "a")], past).await.unwrap();
    let expired = s.expired_runs(Utc::now()).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!((expired[0].id.as_str(), expired[0].attempt), ("leased", 1));
    let now = Utc::now();
    let until = now + Span::seconds(60);
    assert!(
        s.take_expired("leased", now, until, "replica-a").await.unwrap(),
        "the first taker"
    );
    assert!(
        !s.take_expired("leased", now, until, "replica-b").await.unwrap(),
        "a second replica reconciling the same run leaves it alone"
    );
    assert!(s.expired_runs(now).await.unwrap().is_empty());
    // The lease is replica-a's now: the process that created the run and stalled past
    // its lease cannot renew it.
    assert!(
        !s.renew_lease("leased", Utc::now() + Span::seconds(60), "creator")
            .await
            .unwrap()
    );
    assert!(
        s.renew_lease("leased", Utc::now() + Span::seconds(60), "replica-a")
            .await
            .unwrap()
    );
    assert!(s.expired_runs(Utc::now()).await.unwrap().is_empty());
    s.transition("leased", RunStatus::Queued, RunStatus::Running)
        .await
        .unwrap();
    let file = |id: &str| StoredFile {
        id: id.into(),
        meta: json!({"name": id}),
        content: vec![0, 159, 146, 150],
    };
    for id in ["f_10", "f_2", "f_1"] {
        s.put_file("leased", &file(id)).await.unwrap();
    }
    s.update_file("leased", "f_2", &json!({"name": "f_2", "read": true}))
        .await
        .unwrap();
    let files = s.run_files("leased").await.unwrap();
    let ids: Vec<&str> = files.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["f_1", "f_2", "f_10"], "numeric order");
    assert_eq!(files[1].meta["read"], true);
    assert_eq!(files[0].content, [0, 159, 146, 150], "bytes round-trip");
    assert!(s.requeue("leased", RunStatus::Running).await.unwrap());
    assert!(s.run_files("leased").await.unwrap().is_empty());
    let row = s.get_run("leased").await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Queued);
    assert!(!s.requeue("leased", RunStatus::Running).await.unwrap());
}
both!(
    leases_and_files_on_both,
    leases_expire_and_runs_are_requeued_without_their_files
);

async fn settings_and_scores(s: Arc<dyn Store>) {
    assert_eq!(s.get_setting("k").await.unwrap(), None);
    s.set_setting("k", "one").await.unwrap();
    s.set_setting("k", "two").await.unwrap();
    assert_eq!(s.get_setting("k").await.unwrap().as_deref(), Some("two"));
    // Lines added at once all land (the Notion handshake's tokens), once each, up to
    // the cap; an emptied list starts again.
    let adds = (0..12).map(|i| {
        let s = s.clone();
        tokio::spawn(async move { s.add_setting_line("list", &format!("t{}", i % 6), 8).await })
    });
    for add in adds {
        add.await.unwrap().unwrap();
    }
    let mut lines: Vec<String> = s
        .get_setting("list")
        .await
        .unwrap()
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    assert_eq!(lines, ["t0", "t1", "t2", "t3", "t4", "t5"]);
    for i in 6..12 {
        let added = s.add_setting_line("list", &format!("t{i}"), 8).await.unwrap();
        assert_eq!(added, i < 8, "t{i}: added only while there is room");
    }
    assert_eq!(
        s.get_setting("list").await.unwrap().unwrap().lines().count(),
        8,
        "capped"
    );
    s.set_setting("list", "").await.unwrap();
    s.add_setting_line("list", "again", 8).await.unwrap();
    assert_eq!(s.get_setting("list").await.unwrap().as_deref(), Some("again"));
    // A line that is part of another is its own line.
    assert!(s.add_setting_line("list", "again1", 8).await.unwrap());
    assert!(s.add_setting_line("list", "gain", 8).await.unwrap());
    assert!(
        !s.add_setting_line("list", "again", 8).await.unwrap(),
        "already there: not added"
    );
    assert_eq!(
        s.get_setting("list").await.unwrap().as_deref(),
        Some("again\nagain1\ngain")
    );
    assert!(s.add_setting_line("list", "two\nlines", 8).await.is_err());
    assert!(s.add_setting_line("list", "", 8).await.is_err());
    // Taking empties it in one step.
    assert_eq!(
        s.take_setting("list").await.unwrap().as_deref(),
        Some("again\nagain1\ngain")
    );
    assert_eq!(s.take_setting("list").await.unwrap(), None);
    assert_eq!(s.get_setting("list").await.unwrap(), None);
    // A run that comes to hold a private conversation is marked so at once.
    s.create_run(&run("tainted", "a")).await.unwrap();
    assert!(!s.get_run("tainted").await.unwrap().unwrap().private);
    s.mark_private("tainted").await.unwrap();
    s.mark_private("tainted").await.unwrap();
    assert!(s.get_run("tainted").await.unwrap().unwrap().private);
    s.create_run(&run("scored", "a")).await.unwrap();
    let score = |kind: &str, passed: Option<bool>, value: f64| Score {
        kind: kind.into(),
        criterion: "c".into(),
        passed,
        score: value,
        explanation: None,
        source: Some("openai/gpt-4.1".into()),
        cost_usd: 0.001,
        at: Utc::now(),
    };
    s.add_score("scored", &score("judge", Some(true), 0.9))
        .await
        .unwrap();
    assert!(s.add_score("scored", &score("human", None, -1.0)).await.unwrap());
    // One human score per person and criterion: the same click twice at once counts
    // once, whichever reaches the store first.
    let click = Score {
        source: Some("U0ANA".into()),
        ..score("human", Some(true), 1.0)
    };
    let (a, b) = tokio::join!(s.add_score("scored", &click), s.add_score("scored", &click));
    assert_eq!([a.unwrap(), b.unwrap()].iter().filter(|added| **added).count(), 1);
    assert!(
        !s.add_score("scored", &click).await.unwrap(),
        "and later ones too"
    );
    // Judges' scores are not limited.
    assert!(
        s.add_score("scored", &score("judge", Some(false), 0.2))
            .await
            .unwrap()
    );
    assert!(
        s.add_score("scored", &score("judge", Some(false), 0.2))
            .await
            .unwrap()
    );
    let scores = s.run_scores("scored").await.unwrap();
    assert_eq!(scores.len(), 5);
    assert_eq!((scores[0].kind.as_str(), scores[0].passed), ("judge", Some(true)));
    assert_eq!((scores[1].kind.as_str(), scores[1].score), ("human", -1.0));
}
both!(settings_and_scores_on_both, settings_and_scores);

async fn approvals_park_decide_once_and_time_out(s: Arc<dyn Store>) {
    let now = Utc::now();
    let row = |id: &str, run_id: &str, deadline: chrono::DateTime<Utc>| steward::store::ApprovalRow {
        id: id.into(),
        run_id: run_id.into(),
        tool: "deploy".into(),
        call_id: "call_1".into(),
        requester: Some("U1".into()),
        approvers: vec!["U2".into(), "U3".into()],
        channel: None,
        message_ts: None,
        checkpoint: b"{\"messages\": []}".to_vec(),
        created_at: now,
        deadline,
        decision: None,
        decided_by: None,
        decided_at: None,
    };
    for id in ["parked", "late"] {
        // Runs of a stored event, as the dispatcher resumes those.
        let new = NewRun {
            event_id: Some(format!("ev-{id}")),
            ..run(id, "ops")
        };
        s.create_run(&new).await.unwrap();
    }
    // Only a running run parks.
    assert!(!s.suspend_run(&row("a0", "parked", now)).await.unwrap());
    for id in ["parked", "late"] {
        assert!(
            s.transition(id, RunStatus::Queued, RunStatus::Running)
                .await
                .unwrap()
        );
    }
    let hour = chrono::Duration::hours(1);
    assert!(s.suspend_run(&row("a1", "parked", now + hour)).await.unwrap());
    assert!(s.suspend_run(&row("a2", "late", now - hour)).await.unwrap());
    assert_eq!(
        s.get_run("parked").await.unwrap().unwrap().status,
        RunStatus::Waiting
    );
    // A waiting run is not a dead one: no lease to expire.
    assert!(
        s.expired_runs(now + hour * 2)
            .await
            .unwrap()
            .iter()
            .all(|r| r.id != "parked")
    );
    s.set_approval_message("a1", "C1", "1700000000.000100")
        .await
        .unwrap();
    let stored = s.get_approval("a1").await.unwrap().unwrap();
    assert_eq!(
        stored,
        steward::store::ApprovalRow {
            channel: Some("C1".into()),
            message_ts: Some("1700000000.000100".into()),
            created_at: stored.created_at,
            deadline: stored.deadline,
            ..row("a1", "parked", now + hour)
        }
    );
    assert_eq!(s.overdue_approvals(now).await.unwrap(), ["a2"]);
    // The first decision wins and queues the run with its lease already out.
    assert!(
        s.decide_approval("a1", "approved", Some("U2"), now)
            .await
            .unwrap()
    );
    assert!(!s.decide_approval("a1", "denied", Some("U3"), now).await.unwrap());
    let decided = s.latest_approval("parked").await.unwrap().unwrap();
    assert_eq!(
        (decided.decision.as_deref(), decided.decided_by.as_deref()),
        (Some("approved"), Some("U2"))
    );
    assert_eq!(
        s.get_run("parked").await.unwrap().unwrap().status,
        RunStatus::Queued
    );
    // Free at once: a reconcile in the same millisecond as the decision resumes it
    // (with `<` it waited for the next periodic reconcile, half a lease later).
    assert!(
        s.expired_runs(now)
            .await
            .unwrap()
            .iter()
            .any(|r| r.id == "parked")
    );
    assert!(s.decide_approval("a2", "timed_out", None, now).await.unwrap());
    assert!(s.overdue_approvals(now).await.unwrap().is_empty());
    // A run that ends keeps no checkpoint (it never resumes); one still waiting does.
    assert!(
        s.transition("parked", RunStatus::Queued, RunStatus::Running)
            .await
            .unwrap()
    );
    let outcome = RunOutcome::new("parked");
    assert!(
        s.finish_run("parked", RunStatus::Running, &outcome, Privacy::Private)
            .await
            .unwrap()
    );
    assert!(s.get_approval("a1").await.unwrap().unwrap().checkpoint.is_empty());
    assert!(!s.get_approval("a2").await.unwrap().unwrap().checkpoint.is_empty());
}
both!(approvals_on_both, approvals_park_decide_once_and_time_out);

/// A value sealed as steward did before values were bound to their row (no associated
/// data), written here with ring directly rather than with steward's own code.
fn sealed_unbound(plain: &[u8]) -> Vec<u8> {
    use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
    let bytes: Vec<u8> = (0u8..32).collect();
    let key = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &bytes).unwrap());
    let nonce = [7u8; 12];
    let mut data = plain.to_vec();
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
        .unwrap();
    [nonce.to_vec(), data].concat()
}

/// `steward reseal`: a value sealed before binding is sealed again bound to its row
/// (and then opens only there); a bound one, a plain checkpoint and one under another
/// key are left as they are. `serve`'s start binds nothing; it erases the sealed text of
/// a routed event nothing will read.
async fn unbound_sealed_values_are_bound_to_their_rows(s: Arc<dyn Store>) {
    use steward::run::approval::checkpoint_place;
    use steward::server::ingest::sealed_event_place;
    use steward::server::reseal::{Resealed, bind_unbound};
    use steward::types::seal::DataKey;
    // The bytes 0..32, as `sealed_unbound` uses.
    let key = DataKey::parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").unwrap();
    let other = DataKey::parse("AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=").unwrap();
    let sealed = |id: &str, bytes: Vec<u8>| EventRow {
        private: true,
        sealed: Some(bytes),
        ..event(id, &format!("key-{id}"))
    };
    let bound = key.seal_at(&sealed_event_place("ev-bound"), b"bound").unwrap();
    let foreign = other
        .seal_at(&sealed_event_place("ev-foreign"), b"foreign")
        .unwrap();
    let rows = [
        sealed("ev-old", sealed_unbound(b"the merger closes friday")),
        sealed("ev-bound", bound.clone()),
        sealed("ev-foreign", foreign.clone()),
        sealed("ev-done", sealed_unbound(b"nothing reads this")),
    ];
    s.insert_events(&rows).await.unwrap();
    // `ev-done` was routed to no run by a process that stopped before erasing it.
    let claimed = s.claim_events(10).await.unwrap();
    assert_eq!(claimed.len(), 4);
    // The others have a run each, still queued.
    for e in claimed.iter().filter(|e| e.id != "ev-done") {
        let runs = [NewRun {
            event_id: Some(e.id.clone()),
            ..run(&format!("r-{}", e.id), "dm")
        }];
        assert!(
            s.route_event(&e.id, &runs, Utc::now() + Span::minutes(5))
                .await
                .unwrap()
        );
    }
    let no_agent = EventOutcome::because(OutcomeKind::NoAgent, "no agent matched");
    assert!(s.settle_event("ev-done", &no_agent).await.unwrap());
    // Two parked runs: one held private content (sealed, unbound), one did not.
    let now = Utc::now();
    let approval = |id: &str, run_id: &str, checkpoint: Vec<u8>| steward::store::ApprovalRow {
        id: id.into(),
        run_id: run_id.into(),
        tool: "deploy".into(),
        call_id: "call_1".into(),
        requester: Some("U1".into()),
        approvers: vec![],
        channel: None,
        message_ts: None,
        checkpoint,
        created_at: now,
        deadline: now + Span::hours(1),
        decision: None,
        decided_by: None,
        decided_at: None,
    };
    let plain = b"{\"messages\": []}".to_vec();
    for (run_id, approval_id, checkpoint) in [
        (
            "p-private",
            "a-private",
            sealed_unbound(b"{\"messages\": [\"secret\"]}"),
        ),
        ("p-plain", "a-plain", plain.clone()),
    ] {
        s.create_run(&run(run_id, "ops")).await.unwrap();
        assert!(
            s.transition(run_id, RunStatus::Queued, RunStatus::Running)
                .await
                .unwrap()
        );
        assert!(
            s.suspend_run(&approval(approval_id, run_id, checkpoint))
                .await
                .unwrap()
        );
    }

    // `serve`'s start binds nothing (a planted old value would be bound where it was
    // put); it only erases what nothing reads.
    steward::server::reseal::at_start(s.as_ref(), &key).await;
    let still = s.get_event("ev-old").await.unwrap().unwrap().sealed.unwrap();
    assert_eq!(key.open_unbound(&still).unwrap(), b"the merger closes friday");
    assert_eq!(s.get_event("ev-done").await.unwrap().unwrap().sealed, None);
    // `steward reseal`, the operator's one-off:
    let first = bind_unbound(s.as_ref(), &key).await.unwrap();
    assert_eq!(
        first,
        Resealed {
            bound: 2,
            unreadable: 1
        }
    );
    let old = s.get_event("ev-old").await.unwrap().unwrap().sealed.unwrap();
    assert_eq!(
        key.open_at(&sealed_event_place("ev-old"), &old).unwrap(),
        b"the merger closes friday"
    );
    assert!(key.open_unbound(&old).is_err(), "no longer opens anywhere");
    assert!(key.open_at(&sealed_event_place("ev-bound"), &old).is_err());
    let get = |id: &'static str| {
        let s = s.clone();
        async move { s.get_event(id).await.unwrap().unwrap().sealed }
    };
    assert_eq!(get("ev-bound").await, Some(bound));
    assert_eq!(get("ev-foreign").await, Some(foreign), "left for its key");
    assert_eq!(get("ev-done").await, None, "erased: nothing reads it");
    let checkpoint = s.get_approval("a-private").await.unwrap().unwrap().checkpoint;
    assert_eq!(
        key.open_at(&checkpoint_place("p-private"), &checkpoint).unwrap(),
        b"{\"messages\": [\"secret\"]}"
    );
    assert_eq!(
        s.get_approval("a-plain").await.unwrap().unwrap().checkpoint,
        plain
    );
    // A second start finds nothing left to bind.
    let second = bind_unbound(s.as_ref(), &key).await.unwrap();
    assert_eq!(
        second,
        Resealed {
            bound: 0,
            unreadable: 1
        }
    );
}
both!(
    unbound_sealed_values_on_both,
    unbound_sealed_values_are_bound_to_their_rows
);

/// `STEWARD_RUN_RETENTION`: a run that ended before the cut-off goes with its subagent
/// runs, steps and scores; a tree with a run still going stays whole, and so does a run
/// still going.
async fn ended_runs_past_the_retention_go_with_everything_they_hold(s: Arc<dyn Store>) {
    let child = |id: &str, parent: &str| NewRun {
        parent_id: Some(parent.into()),
        ..run(id, "a")
    };
    for new in [
        run("old", "a"),
        child("old-child", "old"),
        run("busy", "a"),
        child("busy-child", "busy"),
        run("going", "a"),
    ] {
        s.create_run(&new).await.unwrap();
        assert!(
            s.transition(&new.id, RunStatus::Queued, RunStatus::Running)
                .await
                .unwrap()
        );
    }
    for id in ["old-child", "old", "busy"] {
        assert!(
            s.finish_run(id, RunStatus::Running, &RunOutcome::new(id), Privacy::Recorded)
                .await
                .unwrap()
        );
    }
    s.append_event("old", "tool_call", &json!({"name": "x"}))
        .await
        .unwrap();
    s.append_event("old-child", "tool_call", &json!({"name": "y"}))
        .await
        .unwrap();
    let score = Score {
        kind: "judge".into(),
        criterion: "c".into(),
        passed: Some(true),
        score: 1.0,
        explanation: None,
        source: None,
        cost_usd: 0.0,
        at: Utc::now(),
    };
    assert!(s.add_score("old", &score).await.unwrap());
    // Nothing ended before a cut-off in the past.
    assert_eq!(s.prune_runs(Utc::now() - Span::hours(1)).await.unwrap(), 0);
    assert_eq!(s.prune_runs(Utc::now() + Span::minutes(1)).await.unwrap(), 2);
    for id in ["old", "old-child"] {
        assert!(s.get_run(id).await.unwrap().is_none(), "{id}");
        assert!(s.run_events(id).await.unwrap().is_empty(), "{id}");
    }
    assert!(s.run_scores("old").await.unwrap().is_empty());
    for id in ["busy", "busy-child", "going"] {
        assert!(s.get_run(id).await.unwrap().is_some(), "{id} is kept");
    }
    assert_eq!(s.prune_runs(Utc::now() + Span::minutes(1)).await.unwrap(), 0);
}
both!(
    run_retention_on_both,
    ended_runs_past_the_retention_go_with_everything_they_hold
);

async fn a_conversation_runs_one_at_a_time_in_order(s: Arc<dyn Store>) {
    // uuid v7 ids sort by creation: "t1" before "t2".
    for id in ["t1", "t2"] {
        let new = NewRun {
            thread_key: Some("C1:1700000000.000100".into()),
            ..run(id, "helpdesk")
        };
        s.create_run(&new).await.unwrap();
    }
    s.create_run(&run("other", "helpdesk")).await.unwrap();
    let thread = Some("C1:1700000000.000100");
    assert!(
        !s.start_within("t2", "helpdesk", None, thread).await.unwrap(),
        "t1 came first"
    );
    assert!(s.start_within("t1", "helpdesk", None, thread).await.unwrap());
    assert!(
        !s.start_within("t2", "helpdesk", None, thread).await.unwrap(),
        "t1 is running"
    );
    // Another conversation is not held up, but the agent's cap still counts t1.
    assert!(!s.start_within("other", "helpdesk", Some(1), None).await.unwrap());
    assert!(s.start_within("other", "helpdesk", Some(2), None).await.unwrap());
    s.finish_run(
        "t1",
        RunStatus::Running,
        &RunOutcome::new("t1"),
        Privacy::Recorded,
    )
    .await
    .unwrap();
    assert!(s.start_within("t2", "helpdesk", None, thread).await.unwrap());
}
both!(conversations_on_both, a_conversation_runs_one_at_a_time_in_order);

async fn a_conversation_s_files_come_from_its_other_public_runs(s: Arc<dyn Store>) {
    let key = "C1:1700000000.000200";
    let file = |id: &str, text: &str| StoredFile {
        id: id.into(),
        meta: serde_json::json!({"id": id, "source": "tool_output"}),
        content: text.as_bytes().to_vec(),
    };
    for (id, private, thread) in [
        ("a1", false, Some(key)),
        ("a2", false, Some(key)),
        ("dm", true, Some(key)),
        ("elsewhere", false, None),
    ] {
        let new = NewRun {
            thread_key: thread.map(str::to_string),
            private,
            ..run(id, "helpdesk")
        };
        s.create_run(&new).await.unwrap();
        for n in [2, 10] {
            s.put_file(id, &file(&format!("f_{n}"), &format!("{id} {n}")))
                .await
                .unwrap();
        }
    }
    let got: Vec<(String, String)> = s
        .conversation_files(key, "a2")
        .await
        .unwrap()
        .into_iter()
        .map(|(run, f)| (run, String::from_utf8(f.content).unwrap()))
        .collect();
    // Not the asking run's own, not a private run's, in file-number order.
    assert_eq!(
        got,
        [
            ("a1".to_string(), "a1 2".to_string()),
            ("a1".to_string(), "a1 10".to_string())
        ]
    );
}
both!(
    conversation_files_on_both,
    a_conversation_s_files_come_from_its_other_public_runs
);

#[tokio::test]
async fn steward_serve_runs_a_webhook_on_postgres() {
    let _alone = SERVERS.lock().await;
    use support::*;
    let Some((_, schema)) = postgres().await else {
        return;
    };
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("noted")));
    let root = intake_tree();
    let url = format!("{}?options=-c%20search_path%3D{schema}", pg_url());
    let addr = free_local_addr();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &addr])
        .env("STEWARD_ROOT", root.path())
        .env("DATABASE_URL", &url)
        .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
        .env("OPENAI_API_KEY", "sk-test")
        .env("STEWARD_HOOK_INTAKE_TOKEN", "intake-token-0123456789")
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    let status = post_hook_when_up(
        &addr,
        "intake",
        "intake-token-0123456789",
        "{\"text\": \"new laptop\"}",
    )
    .await;
    assert_eq!(status, 200);
    let store = PgStore::connect_in_schema(&pg_url(), &schema).await.unwrap();
    let mut runs = Vec::new();
    for _ in 0..200 {
        runs = store.list_runs(10).await.unwrap();
        if runs.first().is_some_and(|r| r.status.is_terminal()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    assert_eq!(runs[0].source, "webhook");
    assert!(!store.run_events(&runs[0].id).await.unwrap().is_empty());
    // The database goes away under the server: a webhook is refused with 503, so the
    // sender retries, rather than acknowledged without being stored.
    drop_schema(&schema).await;
    let status = post_hook_when_up(&addr, "intake", "intake-token-0123456789", "{\"text\": \"lost\"}").await;
    assert_eq!(status, 503);
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

/// Tests that start `steward serve` processes take turns: several sets of replicas on
/// 2 cores at once starve each other, and the kill test's replica may then have nothing
/// in flight to take over.
static SERVERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A TCP proxy to `upstream` that, once `cut` is set, stops passing bytes both ways
/// while keeping every connection open: a database that stopped answering (a network
/// partition or a hung server), which the pool cannot tell from a slow one.
async fn partition_proxy(upstream: String, cut: Arc<std::sync::atomic::AtomicBool>) -> String {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let pump = |cut: Arc<std::sync::atomic::AtomicBool>| {
                move |mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf| async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        let n = match from.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        while cut.load(Ordering::SeqCst) {
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        }
                        if to.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                }
            };
            tokio::spawn(pump(cut.clone())(cr, sw));
            tokio::spawn(pump(cut.clone())(sr, cw));
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_that_stops_answering_makes_webhooks_answer_503_not_408() {
    let _alone = SERVERS.lock().await;
    use std::sync::atomic::{AtomicBool, Ordering};
    use support::*;
    let Some((_, schema)) = postgres().await else {
        return;
    };
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("noted")));
    let root = intake_tree();
    let mut url = reqwest::Url::parse(&pg_url()).unwrap();
    let upstream = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    let cut = Arc::new(AtomicBool::new(false));
    let proxy = partition_proxy(upstream, cut.clone()).await;
    let port: u16 = proxy.rsplit(':').next().unwrap().parse().unwrap();
    url.set_port(Some(port)).unwrap();
    url.set_query(Some(&format!("options=-c%20search_path%3D{schema}")));
    let addr = free_local_addr();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &addr])
        .env("STEWARD_ROOT", root.path())
        .env("DATABASE_URL", url.as_str())
        .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
        .env("OPENAI_API_KEY", "sk-test")
        .env("STEWARD_HOOK_INTAKE_TOKEN", "intake-token-0123456789")
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    let status = post_hook_when_up(
        &addr,
        "intake",
        "intake-token-0123456789",
        "{\"text\": \"first\"}",
    )
    .await;
    assert_eq!(status, 200);
    cut.store(true, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let status = post_hook_when_up(
        &addr,
        "intake",
        "intake-token-0123456789",
        "{\"text\": \"unstored\"}",
    )
    .await;
    let waited = started.elapsed();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    let _ = child.wait();
    cut.store(false, Ordering::SeqCst);
    // 503 (the sender retries), not the request timeout's 408, and not a 200 for an
    // event that was never stored.
    assert_eq!(status, 503, "after {waited:?}");
    drop_schema(&schema).await;
}

#[test]
fn an_unreachable_postgres_is_a_one_line_error_without_the_password() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["runs", "list"])
        .env("DATABASE_URL", "postgres://steward:hunter2@127.0.0.1:1/steward")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot open the run store postgres://steward:***@127.0.0.1:1/steward"),
        "{err}"
    );
    assert!(!err.contains("hunter2"));
}

/// A `STEWARD_DATA_KEY` for replicas that take Slack events (32 zero bytes, base64).
const TEST_DATA_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

/// Runs `steward serve` with `env` on a tree with a Slack agent and returns its exit
/// code and stderr: for start-up errors, which come before any port or database.
fn serve_start_error(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let root = tempfile::tempdir().unwrap();
    support::write(root.path(), "prompts/helper.md", "You help.");
    support::write(
        root.path(),
        "agents/helper.yaml",
        "description: Helper.\ntriggers:\n  - slack_mention: {}\nmodel: openai/gpt-4.1\nprompt: prompts/helper.md\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", "127.0.0.1:0"])
        .env("STEWARD_ROOT", root.path())
        .env("OPENAI_API_KEY", "sk-test")
        .env("SLACK_SIGNING_SECRET", "s")
        .env("SLACK_BOT_TOKEN", "xoxb-test")
        .env("RUST_LOG", "error")
        .env_remove("STEWARD_DATA_KEY")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_database_urls_and_data_keys_are_one_line_errors() {
    // Another database's URL would otherwise name a SQLite file (password and all).
    let (code, err) = serve_start_error(&[("DATABASE_URL", "mysql://app:hunter2@127.0.0.1/app")]);
    assert_eq!(code, Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("`mysql` is not a supported database"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    // PostgreSQL with a Slack agent and no key: replicas could not read private input.
    // (Checked before connecting: port 1 is never reached.)
    let (code, err) = serve_start_error(&[("DATABASE_URL", "postgres://steward@127.0.0.1:1/steward")]);
    assert_eq!(code, Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: STEWARD_DATA_KEY is not set"), "{err}");
    // A malformed key.
    let (code, err) = serve_start_error(&[
        ("DATABASE_URL", "postgres://steward@127.0.0.1:1/steward"),
        ("STEWARD_DATA_KEY", "not-base64-and-too-short"),
    ]);
    assert_eq!(code, Some(1));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: STEWARD_DATA_KEY='(hidden)' is not valid: 32 bytes"),
        "{err}"
    );
}

/// Posts a Slack Events API body to `addr`, signed now with `secret`; the HTTP status,
/// or 0 when the replica is gone.
async fn post_slack(client: &reqwest::Client, addr: &str, body: &str, secret: &str) -> u16 {
    let ts = chrono::Utc::now().timestamp().to_string();
    let sig = format!(
        "v0={}",
        steward::triggers::auth::sign_hex(secret.as_bytes(), &[b"v0:", ts.as_bytes(), b":", body.as_bytes()])
    );
    client
        .post(format!("http://{addr}/slack/events"))
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", ts)
        .header("x-slack-signature", sig)
        .body(body.to_string())
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

/// The replica test: three `steward serve` processes on one PostgreSQL schema,
/// 5,000 signed Slack mentions spread over them, each delivered a second time to
/// another replica (as Slack retries), and one replica killed with SIGKILL halfway with
/// runs in flight. Afterwards every event was stored once and has exactly one run.
#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_on_postgres_run_each_event_once_when_one_is_killed() {
    let _alone = SERVERS.lock().await;
    use futures_util::StreamExt;
    use support::*;
    const EVENTS: usize = 5_000;
    const SECRET: &str = "replica-test-signing-secret";
    let Some((_, schema)) = postgres().await else {
        return;
    };
    let fake = FakeModel::start().await;
    // Each model call takes a while; the last 300 events before the kill take 15 s, so
    // every replica, the one killed included, surely has runs in flight when it dies
    // (under a loaded machine runs otherwise finish as fast as they are delivered, and
    // delivering half the events, each twice, can itself take several seconds).
    fake.handler(|body| {
        let text = body.to_string();
        let n: Option<usize> = text
            .split("request ")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|digits| digits.parse().ok());
        let slow = n.is_some_and(|n| (EVENTS / 2 - 300..EVENTS / 2).contains(&n));
        let delay = if slow { 15_000 } else { 200 };
        Reply::ok(openai_text("noted")).delay(std::time::Duration::from_millis(delay))
    });
    // Slack's Web API: the channel is public; whatever the runs post is accepted.
    let api = axum::Router::new()
        .route("/conversations.info", axum::routing::get(conversations_info))
        .fallback(|| async {
            axum::Json(json!({"ok": true, "ts": "1515449523.000100", "channel": "C123ABC456"}))
        });
    let api_base = serve(api).await;
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "prompts/helper.md", "You note requests.");
    write(
        root.path(),
        "agents/helper.yaml",
        "description: Helper.\ntriggers:\n  - slack_mention: {}\nmodel: openai/gpt-4.1\nprompt: prompts/helper.md\noutput: { reply: true }\n",
    );
    let url = format!("{}?options=-c%20search_path%3D{schema}", pg_url());
    let replica = |addr: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .args([
                "serve",
                "--addr",
                addr,
                "--lease",
                "2s",
                "--grace",
                "1s",
                "--concurrency",
                "64",
            ])
            .args(["--agent-concurrency", "64"])
            .env("STEWARD_ROOT", root.path())
            .env("DATABASE_URL", &url)
            .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
            .env("OPENAI_API_KEY", "sk-test")
            .env("SLACK_SIGNING_SECRET", SECRET)
            .env("STEWARD_DATA_KEY", TEST_DATA_KEY)
            .env("SLACK_BOT_TOKEN", "xoxb-test")
            .env("SLACK_BOT_USER_ID", "UBOT")
            .env("SLACK_API_URL", &api_base)
            .env("RUST_LOG", "error")
            .spawn()
            .unwrap()
    };
    let addrs: Vec<String> = (0..3).map(|_| free_local_addr()).collect();
    let mut children = Children(addrs.iter().map(|a| replica(a)).collect());
    // Idle connections are given up before the replicas close them (an idle keep-alive
    // connection is closed after steward's 10 s header timeout): a pooled connection
    // the server is closing at that instant would fail a delivery that never reached
    // it, a race of the client's pool, not of steward.
    let client = reqwest::Client::builder()
        .pool_idle_timeout(std::time::Duration::from_secs(5))
        .build()
        .unwrap();
    let mention = |i: usize| {
        let ts = format!("1700000000.{i:06}");
        event_callback(
            &format!("Ev{i:08}"),
            // One person per event: the per-person rate (10 a minute) is not under test.
            json!({"type": "app_mention", "user": format!("U{i:08}"), "text": format!("<@UBOT> request {i}"),
                   "ts": ts, "channel": "C123ABC456", "event_ts": ts}),
        )
        .to_string()
    };
    // Every replica is up (a url_verification answers once the routes are served).
    for a in &addrs {
        let challenge = json!({"token": "XXYYZZ", "challenge": "up", "type": "url_verification"}).to_string();
        let mut up = false;
        for _ in 0..400 {
            if post_slack(&client, a, &challenge, SECRET).await == 200 {
                up = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(up, "replica {a} did not start");
    }
    // Each event goes to one replica and again to the next, 32 deliveries at a time.
    let deliver = |range: std::ops::Range<usize>| {
        let (client, addrs) = (client.clone(), addrs.clone());
        futures_util::stream::iter(range)
            .map(move |i| {
                let (client, addrs, body) = (client.clone(), addrs.clone(), mention(i));
                async move {
                    let a = post_slack(&client, &addrs[i % 3], &body, SECRET).await;
                    let b = post_slack(&client, &addrs[(i + 1) % 3], &body, SECRET).await;
                    (i, [(i % 3, a), ((i + 1) % 3, b)])
                }
            })
            .buffer_unordered(32)
            .collect::<Vec<(usize, [(usize, u16); 2])>>()
    };
    let delivered = deliver(0..EVENTS / 2).await;
    // Runs are in flight (the slow ones take 15 s) before the kill.
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let mut in_flight: i64 = 0;
    for _ in 0..400 {
        in_flight = sqlx::query_scalar("SELECT COUNT(*) FROM runs WHERE status = 'running'")
            .fetch_one(&pool)
            .await
            .unwrap();
        // Each replica runs at most 64 at once (--agent-concurrency): more than 128
        // running means the one about to be killed holds some.
        if in_flight > 128 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(in_flight > 128, "only {in_flight} runs in flight before the kill");
    // A replica dies mid-stream, with whatever it had claimed and was running.
    children[2].kill().unwrap();
    children[2].wait().unwrap();
    let after_kill = deliver(EVENTS / 2..EVENTS).await;
    // A live replica answers 200, or 503 when the store did not commit within its 5 s
    // (a loaded machine), which Slack retries; anything else is a fault. The killed
    // replica's deliveries fail to connect (0).
    let mut faults = Vec::new();
    let mut unacknowledged = Vec::new();
    for (i, tries) in delivered.iter().chain(&after_kill) {
        let live = |r: usize| *i < EVENTS / 2 || r != 2;
        faults.extend(
            tries
                .iter()
                .filter(|(r, status)| live(*r) && ![200, 503].contains(status))
                .map(|(r, status)| (*i, *r, *status)),
        );
        if tries.iter().all(|(_, status)| *status != 200) {
            unacknowledged.push(*i);
        }
    }
    assert!(
        faults.is_empty(),
        "(event, replica, status) answered by a live replica: {faults:?}"
    );
    // Slack retries a delivery nobody acknowledged; here once more, to a live replica.
    let mut acknowledged = EVENTS - unacknowledged.len();
    for &i in &unacknowledged {
        if post_slack(&client, &addrs[i % 2], &mention(i), SECRET).await == 200 {
            acknowledged += 1;
        }
    }
    if !unacknowledged.is_empty() {
        eprintln!(
            "{} event(s) answered 503 by both replicas and retried",
            unacknowledged.len()
        );
    }

    // Every acknowledged event ends in exactly one finished run.
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move { sqlx::query_scalar::<_, i64>(sql).fetch_one(&pool).await.unwrap() }
    };
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(600) {
        let runs = count("SELECT COUNT(*) FROM runs").await as usize;
        let open = count("SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running', 'waiting')").await;
        let queued = count("SELECT COUNT(*) FROM events WHERE status IN ('queued', 'claimed')").await;
        if (runs >= acknowledged || started.elapsed() > std::time::Duration::from_secs(30))
            && open == 0
            && queued == 0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for child in children.iter_mut().take(2) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
    let events = count("SELECT COUNT(*) FROM events WHERE outcome IS DISTINCT FROM 'duplicate'").await;
    // A second delivery that reached a live replica is recorded as a duplicate of the
    // first: every event of the first half, and after the kill the third of events
    // whose two replicas both live.
    let duplicates = count("SELECT COUNT(*) FROM events WHERE outcome = 'duplicate'").await;
    let per_event: Vec<i64> = sqlx::query_scalar("SELECT COUNT(*) FROM runs GROUP BY event_id")
        .fetch_all(&pool)
        .await
        .unwrap();
    let resumed = count("SELECT COUNT(*) FROM runs WHERE attempt > 1").await;
    let statuses: Vec<(String, i64)> = sqlx::query_as("SELECT status, COUNT(*) FROM runs GROUP BY status")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    assert_eq!(acknowledged, EVENTS, "the live replicas acknowledged every event");
    assert_eq!(events as usize, EVENTS, "each delivered twice, stored once");
    let expected = EVENTS / 2 + (EVENTS / 2..EVENTS).filter(|i| i % 3 == 0).count();
    // A 503 only says the commit was not seen within 5 s: it may have landed after,
    // and then the extra retry above is one more duplicate.
    // And a 503 whose commit never landed makes the other delivery's 200 a first
    // delivery, one duplicate fewer.
    let saw_503 = delivered
        .iter()
        .chain(&after_kill)
        .filter(|(_, tries)| tries.iter().any(|(_, status)| *status == 503))
        .count();
    assert!(
        (expected.saturating_sub(saw_503)..=expected + unacknowledged.len()).contains(&(duplicates as usize)),
        "retries recorded as duplicates: {duplicates}, expected {expected} (+ up to {} retried)",
        unacknowledged.len()
    );
    assert_eq!(per_event.len(), EVENTS, "every event has a run");
    assert!(
        per_event.iter().all(|n| *n == 1),
        "no event ran twice: {:?}",
        per_event.iter().filter(|n| **n != 1).collect::<Vec<_>>()
    );
    // A run the killed replica had started may have been reported rather than re-run
    // (never re-run after a side effect); every run has ended either way.
    let open: i64 = statuses
        .iter()
        .filter(|(s, _)| ["queued", "running", "waiting"].contains(&s.as_str()))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(open, 0, "runs still open: {statuses:?}");
    assert!(
        resumed > 0,
        "the killed replica's runs were taken over by another"
    );
    drop_schema(&schema).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn three_replicas_fire_each_cron_slot_once() {
    let _alone = SERVERS.lock().await;
    use support::*;
    let Some((_, schema)) = postgres().await else {
        return;
    };
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("tick noted")));
    let root = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("prompts/tick.md", "You note ticks.");
    // Every two seconds (a seconds field first), so three replicas see several slots.
    write(
        "agents/tick.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/tick.md\ntriggers:\n  - cron: { schedule: \"*/2 * * * * *\", timezone: UTC }\noutput: { reply: false }\n",
    );
    let url = format!("{}?options=-c%20search_path%3D{schema}", pg_url());
    let mut children = Children(
        (0..3)
            .map(|_| {
                std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
                    .args(["serve", "--addr", &free_local_addr()])
                    .env("STEWARD_ROOT", root.path())
                    .env("DATABASE_URL", &url)
                    .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
                    .env("OPENAI_API_KEY", "sk-test")
                    .env("RUST_LOG", "error")
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    tokio::time::sleep(std::time::Duration::from_secs(9)).await;
    for child in children.iter_mut() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    // One event per slot; one run per event.
    let slots: Vec<(String, i64)> = sqlx::query_as(
        "SELECT dedupe_key, (SELECT COUNT(*) FROM runs WHERE runs.event_id = events.id) FROM events WHERE source = 'cron'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert!(slots.len() >= 2, "several slots fired over 9 s: {slots:?}");
    assert!(
        slots.iter().all(|(_, runs)| *runs == 1),
        "each slot ran once: {slots:?}"
    );
    let distinct: std::collections::BTreeSet<&String> = slots.iter().map(|(k, _)| k).collect();
    assert_eq!(distinct.len(), slots.len());
    // And none was missed: from the first slot fired to the last, every 2 s slot is
    // there exactly once (`cron:{agent}:{index}:{slot}`).
    let times: std::collections::BTreeSet<i64> = slots
        .iter()
        .map(|(k, _)| {
            let slot = k.splitn(4, ':').nth(3).unwrap();
            chrono::DateTime::parse_from_rfc3339(slot).unwrap().timestamp()
        })
        .collect();
    let (first, last) = (*times.first().unwrap(), *times.last().unwrap());
    let expected: std::collections::BTreeSet<i64> = (first..=last).step_by(2).collect();
    assert_eq!(
        times, expected,
        "every slot from the first to the last fired once"
    );
    drop_schema(&schema).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sealed_private_dm_is_answered_by_another_replica_and_pg_dump_holds_no_text() {
    let _alone = SERVERS.lock().await;
    use support::*;
    let Some((store, schema)) = postgres().await else {
        return;
    };
    let secret = "the acquisition closes on the 14th";
    let key_text = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let key = steward::types::seal::DataKey::parse(key_text).unwrap();
    // Acknowledged by a replica that then died: stored sealed.
    let dm = json!({"token": "XXYYZZ", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
        "event_id": "EvPGDM1", "event_time": 1355517523,
        "event": {"type": "message", "channel": "D024BE91L", "user": "U2147483697", "text": secret,
                  "ts": "1355517523.000005", "channel_type": "im"}});
    let steward::triggers::slack::SlackPayload::Event { event, dedupe_key } =
        steward::triggers::slack::parse(&dm, Some("UBOT")).unwrap()
    else {
        panic!("not an event")
    };
    let row = steward::server::ingest::sealed_row(&event, &dedupe_key, &key);
    store.insert_events(std::slice::from_ref(&row)).await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("prompts/dm.md", "You answer direct messages.");
    write(
        "agents/dm.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/dm.md\ntriggers:\n  - slack_message: {}\noutput: { reply: false }\n",
    );
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("Noted, keeping it quiet.")));
    let url = format!("{}?options=-c%20search_path%3D{schema}", pg_url());
    // Another replica, with the same key, claims it.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &free_local_addr()])
        .env("STEWARD_ROOT", root.path())
        .env("DATABASE_URL", &url)
        .env("STEWARD_DATA_KEY", key_text)
        .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
        .env("OPENAI_API_KEY", "sk-test")
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    let mut done = false;
    for _ in 0..200 {
        let runs = store.list_runs(10).await.unwrap();
        let erased = store.get_event(&row.id).await.unwrap().unwrap().sealed.is_none();
        if runs.first().is_some_and(|r| r.status == RunStatus::Succeeded) && erased {
            done = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert!(done, "the run succeeded and the sealed copy was erased");
    assert!(
        fake.requests()[0].body.to_string().contains(secret),
        "answered with its text"
    );
    // Nothing in the database holds the text.
    let dump = std::process::Command::new("pg_dump")
        .args(["--schema", &schema, "--data-only", &pg_url()])
        .output();
    match dump {
        Ok(out) if out.status.success() => {
            assert!(out.stdout.len() > 100, "a real dump");
            assert!(
                !out.stdout.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "private text found in pg_dump"
            );
        }
        other => panic!("pg_dump failed: {other:?}"),
    }
    drop_schema(&schema).await;
}

/// Socket Mode on two replicas of one database: Slack may deliver the same event to
/// each replica's connection (a retry, or a reconnect); it is stored once and runs once.
#[tokio::test(flavor = "multi_thread")]
async fn socket_mode_on_two_replicas_runs_an_event_delivered_to_both_once() {
    let _alone = SERVERS.lock().await;
    use futures_util::{SinkExt, StreamExt};
    use support::*;
    use tokio_tungstenite::tungstenite::Message;
    let Some((_, schema)) = postgres().await else {
        return;
    };
    // The WebSocket side of the fake Slack: every connection gets the same event, each
    // in an envelope of its own, and stays open.
    let ws_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ws_url = format!("ws://{}/link", ws_listener.local_addr().unwrap());
    let acks = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let acks_srv = acks.clone();
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let (tcp, _) = ws_listener.accept().await.unwrap();
            n += 1;
            let acks = acks_srv.clone();
            tokio::spawn(async move {
                let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                let hello = json!({"type": "hello", "num_connections": 2});
                ws.send(Message::Text(hello.to_string().into())).await.unwrap();
                let payload = json!({"token": "XXYYZZ", "team_id": "T123ABC456", "api_app_id": "A123ABC456",
                    "type": "event_callback", "event_id": "EvTWICE1", "event_time": 1515449522,
                    "event": {"type": "app_mention", "user": "U061F7AUR", "text": "<@UBOT> status please",
                              "ts": "1515449522.000016", "channel": "C123ABC456", "event_ts": "1515449522.000016"}});
                let envelope = json!({"envelope_id": format!("env-{n}"), "type": "events_api",
                    "accepts_response_payload": false, "payload": payload});
                ws.send(Message::Text(envelope.to_string().into())).await.unwrap();
                while let Some(Ok(m)) = ws.next().await {
                    if let Message::Text(t) = m {
                        let v: serde_json::Value = serde_json::from_str(t.as_str()).unwrap();
                        if let Some(id) = v["envelope_id"].as_str() {
                            acks.lock().unwrap().push(id.to_string());
                        }
                    }
                }
            });
        }
    });
    // The Web API side: apps.connections.open, and whatever the run posts.
    let api = axum::Router::new()
        .route(
            "/apps.connections.open",
            axum::routing::post(move || {
                let url = ws_url.clone();
                async move { axum::Json(json!({"ok": true, "url": url})) }
            }),
        )
        .fallback(|| async {
            axum::Json(json!({"ok": true, "ts": "1515449523.000100", "channel": "C123ABC456"}))
        });
    let api_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_base = format!("http://{}", api_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(api_listener, api).await.unwrap() });

    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("all green")));
    let root = tempfile::tempdir().unwrap();
    for (rel, text) in [
        ("prompts/helper.md", "You answer briefly."),
        (
            "agents/helper.yaml",
            "description: Helper.\ntriggers:\n  - slack_mention: {}\nmodel: openai/gpt-4.1\nprompt: prompts/helper.md\noutput: { reply: true }\n",
        ),
    ] {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let url = format!("{}?options=-c%20search_path%3D{schema}", pg_url());
    let replica = |addr: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_steward"))
            .args(["serve", "--addr", addr])
            .env("STEWARD_ROOT", root.path())
            .env("DATABASE_URL", &url)
            .env("OPENAI_BASE_URL", format!("{}/v1", fake.url))
            .env("OPENAI_API_KEY", "sk-test")
            .env("SLACK_APP_TOKEN", "xapp-1-test")
            .env("STEWARD_DATA_KEY", TEST_DATA_KEY)
            .env("SLACK_BOT_TOKEN", "xoxb-test")
            .env("SLACK_BOT_USER_ID", "UBOT")
            .env("SLACK_API_URL", &api_base)
            .env("RUST_LOG", "error")
            .spawn()
            .unwrap()
    };
    let mut children = Children((0..2).map(|_| replica(&free_local_addr())).collect());
    for _ in 0..200 {
        if acks.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let mut acked = acks.lock().unwrap().clone();
    acked.sort();
    assert_eq!(
        acked,
        ["env-1", "env-2"],
        "each replica acknowledged its envelope"
    );
    let store = PgStore::connect_in_schema(&pg_url(), &schema).await.unwrap();
    for _ in 0..200 {
        let runs = store.list_runs(10).await.unwrap();
        if runs.first().is_some_and(|r| r.status.is_terminal()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    // Both replicas have routed what they received by now.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let runs = store.list_runs(10).await.unwrap();
    assert_eq!(runs.len(), 1, "one run for the event both replicas received");
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    assert_eq!(steward::store::EventQueue::count_events(&store).await.unwrap(), 1);
    for child in children.iter_mut() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
    drop_schema(&schema).await;
}

/// The event log: a retry is its own `duplicate` record pointing at the first delivery,
/// settled events are never routed, filters narrow the list, and pruning keeps what is
/// recent or still has work.
async fn the_event_log_records_lists_and_prunes(s: Arc<dyn Store>) {
    let first = event("e-first", "slack:Ev1");
    let retry = event("e-retry", "slack:Ev1");
    assert_eq!(s.insert_events(&[first]).await.unwrap(), [true]);
    assert_eq!(s.insert_events(&[retry]).await.unwrap(), [false]);
    let dup = s
        .event_record("e-retry")
        .await
        .unwrap()
        .expect("the retry is recorded");
    assert_eq!(
        (dup.outcome, dup.duplicate_of.as_deref()),
        (Some(OutcomeKind::Duplicate), Some("e-first"))
    );
    assert_eq!(dup.summary, None, "a duplicate keeps no body");
    let mut ignored = event("e-ignored", "ignored:1");
    ignored.outcome = Some(EventOutcome::because(OutcomeKind::Ignored, "our own message"));
    assert_eq!(s.insert_events(&[ignored]).await.unwrap(), [true]);
    // Only the first delivery waits to be routed.
    let claimed = s.claim_events(10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["e-first"]
    );
    let no_agent = EventOutcome::new(
        OutcomeKind::NoAgent,
        json!({"agents": {"helpdesk": "wrong channel"}}),
    );
    s.route_events(
        &[Route {
            event_id: "e-first",
            runs: &[],
            outcome: Some(&no_agent),
        }],
        Utc::now(),
    )
    .await
    .unwrap();
    let all = |f: EventFilter| {
        let s = s.clone();
        async move { s.list_events(&EventFilter { limit: 50, ..f }).await.unwrap() }
    };
    let ids = |v: Vec<EventRecord>| v.into_iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(
        ids(all(EventFilter::default()).await),
        ["e-retry", "e-ignored", "e-first"]
    );
    let only = |o| EventFilter {
        outcome: Some(o),
        ..EventFilter::default()
    };
    assert_eq!(ids(all(only(OutcomeKind::Ignored)).await), ["e-ignored"]);
    assert_eq!(ids(all(only(OutcomeKind::NoAgent)).await), ["e-first"]);
    let helpdesk = EventFilter {
        agent: Some("helpdesk".into()),
        ..EventFilter::default()
    };
    assert_eq!(ids(all(helpdesk).await), ["e-first"]);
    let help = EventFilter {
        agent: Some("help".into()),
        ..EventFilter::default()
    };
    assert!(all(help).await.is_empty(), "an agent name matches whole");
    let later = EventFilter {
        since: Some(Utc::now() + Span::seconds(5)),
        ..EventFilter::default()
    };
    assert!(all(later).await.is_empty());
    // Pruning: everything here is settled and older than a moment from now.
    let mut waiting = event("e-waiting", "slack:Ev2");
    waiting.received_at = Utc::now() - Span::days(30);
    s.insert_events(&[waiting]).await.unwrap();
    let pruned = s.prune_events(Utc::now() + Span::seconds(1)).await.unwrap();
    assert_eq!(pruned, 3, "a queued event stays until it is routed");
    assert_eq!(ids(all(EventFilter::default()).await), ["e-waiting"]);
}
both!(
    the_event_log_on_both_backends,
    the_event_log_records_lists_and_prunes
);

async fn an_escalation_is_recorded_once_and_resolved_once(s: Arc<dyn Store>) {
    use steward::store::EscalationRow;
    let row = EscalationRow {
        run_id: "r-esc".into(),
        agent: "helpdesk".into(),
        escalated_by: "U1".into(),
        escalated_at: Utc::now(),
        channel: None,
        message_ts: None,
        resolved_by: None,
        resolved_at: None,
    };
    assert!(s.escalation("r-esc").await.unwrap().is_none());
    assert!(
        !s.resolve_escalation("r-esc", "U2", Utc::now()).await.unwrap(),
        "nothing to resolve"
    );
    assert!(s.escalate(&row).await.unwrap());
    let again = EscalationRow {
        escalated_by: "U9".into(),
        ..row.clone()
    };
    assert!(!s.escalate(&again).await.unwrap(), "the first click wins");
    s.set_escalation_message("r-esc", "C0HELP", "1700000000.000100")
        .await
        .unwrap();
    let got = s.escalation("r-esc").await.unwrap().unwrap();
    assert_eq!(got.escalated_by, "U1");
    assert_eq!(got.channel.as_deref(), Some("C0HELP"));
    assert_eq!(got.message_ts.as_deref(), Some("1700000000.000100"));
    assert!(s.resolve_escalation("r-esc", "U2", Utc::now()).await.unwrap());
    assert!(
        !s.resolve_escalation("r-esc", "U3", Utc::now()).await.unwrap(),
        "resolved once"
    );
    let got = s.escalation("r-esc").await.unwrap().unwrap();
    assert_eq!(got.resolved_by.as_deref(), Some("U2"));
    assert!(got.resolved_at.is_some());
}
both!(
    escalations_on_both_backends,
    an_escalation_is_recorded_once_and_resolved_once
);
