//! Integration tools against fake Slack and Jira servers speaking their documented
//! formats: request shapes, `ok: false`, 429 with `Retry-After`, entity resolution both
//! ways, JQL paging.

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Query;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use steward::integrations::github::GithubClient;
use steward::integrations::jira::JiraClient;
use steward::integrations::slack::SlackClient;
use steward::tools::{ToolCtx, ToolError, ToolRegistry};
use support::serve;
use tokio_util::sync::CancellationToken;

type Q = Query<std::collections::HashMap<String, String>>;

fn ctx() -> ToolCtx {
    ToolCtx {
        call_id: "call-1".into(),
        ..support::tool_ctx("run-1", Default::default())
    }
}

fn registry(slack: Option<SlackClient>, jira: Option<JiraClient>) -> ToolRegistry {
    let http = steward::http::client().unwrap();
    let mut reg = ToolRegistry::core(Default::default());
    for t in steward::integrations::tools::integration_tools_with(
        slack,
        GithubClient::new(http, "http://127.0.0.1:1", None),
        jira,
    ) {
        reg.register(t);
    }
    reg
}

async fn call(reg: &ToolRegistry, name: &str, args: Value) -> Result<Value, ToolError> {
    let allowed: Vec<String> = reg.names().into_iter().collect();
    reg.invoke(&allowed, name, &args.to_string(), &ctx(), false)
        .await
        .map(|o| o.value)
}

/// Slack limits a method for a while after a 429: every call of that method waits
/// out the `Retry-After`, not only the one refused, so a second call made meanwhile does
/// not spend its own retries against the same limit.
#[tokio::test]
async fn a_slack_rate_limit_holds_every_call_of_the_method() {
    let hits = Arc::new(AtomicU32::new(0));
    let first = Arc::new(Mutex::new(None::<std::time::Instant>));
    let (h, f) = (hits.clone(), first.clone());
    let app = Router::new().route(
        "/users.info",
        get(move || {
            let (h, f) = (h.clone(), f.clone());
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                // Like Slack: limited for a second from the first call.
                let limited = {
                    let mut f = f.lock().unwrap();
                    let start = *f.get_or_insert_with(std::time::Instant::now);
                    start.elapsed() < Duration::from_millis(900)
                };
                if limited {
                    return (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "1")],
                        Json(json!({"ok": false, "error": "ratelimited"})),
                    )
                        .into_response();
                }
                Json(json!({"ok": true, "user": {"id": "U0ANA", "name": "ana"}})).into_response()
            }
        }),
    );
    let url = serve(app).await;
    let slack = SlackClient::new(steward::http::client().unwrap(), &url, "xoxb-test");
    let ask =
        |slack: SlackClient| async move { slack.get("users.info", &[("user", "U0ANA".to_string())]).await };
    let a = tokio::spawn(ask(slack.clone()));
    // The second call starts once the first was refused.
    for _ in 0..100 {
        if hits.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let b = tokio::spawn(ask(slack.clone()));
    assert!(a.await.unwrap().is_ok());
    assert!(b.await.unwrap().is_ok());
    assert_eq!(
        hits.load(Ordering::SeqCst),
        3,
        "the refused call, its retry, and the second call after the wait"
    );
}

#[tokio::test]
async fn slack_tools_resolve_entities_and_handle_errors() {
    let posted = Arc::new(Mutex::new(Vec::<(HeaderMap, Value)>::new()));
    let replies_calls = Arc::new(AtomicU32::new(0));
    let (p, rc) = (posted.clone(), replies_calls.clone());
    let app = Router::new()
        .route(
            "/conversations.replies",
            get(move |q: Q, headers: HeaderMap| {
                let rc = rc.clone();
                async move {
                    assert_eq!(headers["authorization"], "Bearer xoxb-test");
                    assert_eq!((q.0["channel"].as_str(), q.0["ts"].as_str()), ("C0HELP", "1700000000.000100"));
                    // The first call is rate limited.
                    if rc.fetch_add(1, Ordering::SeqCst) == 0 {
                        return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")], Json(json!({"ok": false, "error": "ratelimited"}))).into_response();
                    }
                    Json(json!({"ok": true, "has_more": false, "messages": [
                        {"type": "message", "user": "U0ANA", "text": "<@U0BO> can you check <#C0OPS|ops-alerts> and <#C0HELP>? Not <#C0ACQUIRE>.", "ts": "1700000000.000100"}]}))
                    .into_response()
                }
            }),
        )
        .route(
            "/users.info",
            get(|q: Q| async move {
                let (display, real) = match q.0["user"].as_str() {
                    "U0ANA" => ("", "Ana Lee"),
                    "U0BO" => ("Bo", "Bo Chen"),
                    _ => return Json(json!({"ok": false, "error": "user_not_found"})),
                };
                Json(json!({"ok": true, "user": {"id": q.0["user"], "name": "x", "profile": {"display_name": display, "real_name": real}}}))
            }),
        )
        .route(
            "/conversations.info",
            get(|q: Q| async move {
                match q.0["channel"].as_str() {
                    "C0HELP" => Json(json!({"ok": true, "channel": {"id": "C0HELP", "name": "help-platform", "created": 1449252889, "is_channel": true, "is_private": false,
                                                                     "topic": {"value": "Ask us"}, "purpose": {"value": ""}}})),
                    // A private channel whose name is the secret.
                    "C0ACQUIRE" => Json(json!({"ok": true, "channel": {"id": "C0ACQUIRE", "name": "acme-acquisition", "created": 1449252889, "is_channel": true, "is_private": true}})),
                    _ => Json(json!({"ok": false, "error": "channel_not_found"})),
                }
            }),
        )
        .route(
            "/chat.getPermalink",
            get(|q: Q| async move {
                match q.0["channel"].as_str() {
                    "C0HELP" => Json(json!({"ok": true, "channel": "C0HELP", "permalink": "https://acme.slack.com/archives/C0HELP/p1700000000000100"})),
                    _ => Json(json!({"ok": false, "error": "channel_not_found"})),
                }
            }),
        )
        .route(
            "/chat.postMessage",
            post(move |headers: HeaderMap, Json(b): Json<Value>| {
                let p = p.clone();
                async move {
                    p.lock().unwrap().push((headers, b.clone()));
                    Json(json!({"ok": true, "channel": b["channel"], "ts": "1700000099.000100"}))
                }
            }),
        );
    let url = serve(app).await;
    let reg = registry(
        Some(SlackClient::new(
            steward::http::client().unwrap(),
            &url,
            "xoxb-test",
        )),
        None,
    );

    let thread = call(
        &reg,
        "slack_read_thread",
        json!({"channel": "C0HELP", "ts": "1700000000.000100"}),
    )
    .await
    .unwrap();
    assert_eq!(
        replies_calls.load(Ordering::SeqCst),
        2,
        "retried after Retry-After"
    );
    let m = &thread["messages"][0];
    assert_eq!(
        m["text"], "@Bo can you check #ops-alerts and #help-platform? Not #C0ACQUIRE.",
        "a private channel is not named"
    );
    assert_eq!(m["user_name"], "Ana Lee");

    // The model's @names and #names go back out as ids.
    call(&reg, "slack_post_message", json!({"channel": "C0HELP", "thread_ts": "1700000000.000100", "text": "Thanks @Ana Lee, @Bo will look in #help-platform"}))
        .await
        .unwrap();
    let (headers, body) = posted.lock().unwrap()[0].clone();
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body["text"], "Thanks <@U0ANA>, <@U0BO> will look in <#C0HELP>");
    assert_eq!(body["thread_ts"], "1700000000.000100");
    assert_eq!(
        body["metadata"]["event_payload"]["idempotency_key"],
        "run-1:call-1"
    );

    let link = call(
        &reg,
        "slack_permalink",
        json!({"channel": "C0HELP", "ts": "1700000000.000100"}),
    )
    .await
    .unwrap();
    assert_eq!(
        link["permalink"],
        "https://acme.slack.com/archives/C0HELP/p1700000000000100"
    );
    // ok: false arrives as HTTP 200 and becomes a clear tool error.
    let err = call(&reg, "slack_permalink", json!({"channel": "CGONE", "ts": "1"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "slack chat.getPermalink: channel_not_found");
    let user = call(&reg, "slack_user_info", json!({"user": "U0BO"}))
        .await
        .unwrap();
    assert_eq!(user["display_name"], "Bo");
    let channel = call(&reg, "slack_channel_info", json!({"channel": "C0HELP"}))
        .await
        .unwrap();
    assert_eq!(
        (channel["name"].as_str(), channel["topic"].as_str()),
        (Some("help-platform"), Some("Ask us"))
    );
    // Without a token the tools say what to set.
    let bare = registry(None, None);
    let err = call(&bare, "slack_read_thread", json!({"channel": "C1", "ts": "1"}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "Slack is not configured (set SLACK_BOT_TOKEN)");
}

#[tokio::test]
async fn jira_search_pages_with_next_page_token() {
    let bodies = Arc::new(Mutex::new(Vec::<Value>::new()));
    let b = bodies.clone();
    let app = Router::new().route(
        "/rest/api/3/search/jql",
        post(move |Json(body): Json<Value>| {
            let b = b.clone();
            async move {
                b.lock().unwrap().push(body.clone());
                let (start, next, n) = match body["nextPageToken"].as_str() {
                    None => (0, Some("page-2"), 100),
                    Some("page-2") => (100, Some("page-3"), 100),
                    _ => (200, None, 50),
                };
                let issues: Vec<Value> = (start..start + n)
                    .map(|i| json!({"id": format!("{}", 10000 + i), "key": format!("OPS-{i}"), "fields": {
                        "summary": format!("Issue {i}"), "status": {"name": "To Do"}, "assignee": null, "updated": "2026-11-20T10:00:00.000+0000"}}))
                    .collect();
                let mut page = json!({"issues": issues, "isLast": next.is_none()});
                if let Some(t) = next {
                    page["nextPageToken"] = json!(t);
                }
                Json(page)
            }
        }),
    );
    let url = serve(app).await;
    let reg = registry(
        None,
        Some(JiraClient::new(
            steward::http::client().unwrap(),
            &url,
            "bot@acme.com",
            "t",
        )),
    );
    let out = call(
        &reg,
        "jira_search",
        json!({"jql": "project = OPS ORDER BY updated DESC", "max_results": 500}),
    )
    .await
    .unwrap();
    assert_eq!(out["count"], 250);
    assert_eq!(out["issues"][249]["key"], "OPS-249");
    let sent = bodies.lock().unwrap().clone();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0]["jql"], "project = OPS ORDER BY updated DESC");
    assert!(sent[0].get("nextPageToken").is_none());
    assert_eq!(sent[1]["nextPageToken"], "page-2");
    assert_eq!(sent[2]["nextPageToken"], "page-3");
    // max_results stops early.
    let out = call(
        &reg,
        "jira_search",
        json!({"jql": "project = OPS", "max_results": 150}),
    )
    .await
    .unwrap();
    assert_eq!(out["count"], 150);
}

#[tokio::test]
async fn notion_tools_read_pages_blocks_and_databases_and_write_comments() {
    use axum::extract::Path as UrlPath;
    let writes = Arc::new(Mutex::new(Vec::<(String, Value)>::new()));
    let (w1, w2) = (writes.clone(), writes.clone());
    let page = |id: &str| {
        json!({"object": "page", "id": id, "url": format!("https://www.notion.so/{id}"), "properties": {
        "Name": {"id": "title", "type": "title", "title": [{"type": "text", "plain_text": "Design doc"}]},
        "Status": {"id": "s", "type": "status", "status": {"name": "Ready for review"}}}})
    };
    let text = |t: &str| json!([{"type": "text", "plain_text": t, "annotations": {"bold": false, "code": false}, "href": null}]);
    let app = Router::new()
        .route("/v1/pages/{id}", get(move |UrlPath(id): UrlPath<String>, h: HeaderMap| async move {
            assert_eq!(h["notion-version"], "2022-06-28");
            Json(page(&id))
        }).patch(move |UrlPath(id): UrlPath<String>, Json(b): Json<Value>| {
            let w = w1.clone();
            async move {
                w.lock().unwrap().push((format!("PATCH {id}"), b));
                Json(page(&id))
            }
        }))
        .route("/v1/blocks/{id}/children", get(move |UrlPath(id): UrlPath<String>, q: Q| async move {
            let body = match (id.as_str(), q.0.get("start_cursor").map(String::as_str)) {
                ("p1", None) => json!({"results": [
                    {"id": "b1", "type": "heading_2", "has_children": false, "heading_2": {"rich_text": text("Problem")}},
                    {"id": "b2", "type": "bulleted_list_item", "has_children": true, "bulleted_list_item": {"rich_text": text("rotate certs")}}],
                    "has_more": true, "next_cursor": "c2"}),
                ("p1", Some("c2")) => json!({"results": [
                    {"id": "b3", "type": "paragraph", "has_children": false, "paragraph": {"rich_text": text("The end.")}}], "has_more": false, "next_cursor": null}),
                ("b2", _) => json!({"results": [
                    {"id": "b4", "type": "to_do", "has_children": false, "to_do": {"rich_text": text("monthly"), "checked": true}}], "has_more": false, "next_cursor": null}),
                _ => json!({"results": [], "has_more": false}),
            };
            Json(body)
        }))
        .route("/v1/databases/{id}/query", post(move |UrlPath(id): UrlPath<String>, Json(b): Json<Value>| async move {
            assert_eq!(id, "db1");
            assert_eq!(b["filter"]["property"], "Status");
            Json(json!({"object": "list", "results": [page("p1"), page("p2")], "has_more": false, "next_cursor": null}))
        }))
        .route("/v1/comments", post(move |Json(b): Json<Value>| {
            let w = w2.clone();
            async move {
                w.lock().unwrap().push(("comment".into(), b));
                Json(json!({"object": "comment", "id": "c-1"}))
            }
        }));
    let url = serve(app).await;
    let http = steward::http::client().unwrap();
    let mut reg = ToolRegistry::core(Default::default());
    for t in steward::integrations::tools::notion_tools(Some(
        steward::integrations::notion::NotionClient::new(http, &url, "secret_x"),
    )) {
        reg.register(t);
    }
    let p = call(&reg, "notion_get_page", json!({"page_id": "p1"}))
        .await
        .unwrap();
    assert_eq!(
        p["properties"],
        json!({"Name": "Design doc", "Status": "Ready for review"})
    );
    let md = call(&reg, "notion_read_page", json!({"page_id": "p1"}))
        .await
        .unwrap();
    assert_eq!(
        md,
        json!("## Problem\n- rotate certs\n  - [x] monthly\nThe end.\n")
    );
    let q = call(&reg, "notion_query_database", json!({"database_id": "db1", "filter": {"property": "Status", "status": {"equals": "Ready for review"}}})).await.unwrap();
    assert_eq!(q["count"], 2);
    call(
        &reg,
        "notion_add_comment",
        json!({"page_id": "p1", "text": "Looks good"}),
    )
    .await
    .unwrap();
    call(
        &reg,
        "notion_update_property",
        json!({"page_id": "p1", "properties": {"Reviewers": {"people": [{"id": "u1"}]}}}),
    )
    .await
    .unwrap();
    // A page id that names another endpoint (`../databases/{id}` would turn a page
    // update into a change of the database's columns) is refused, nothing sent.
    for (tool, args) in [
        (
            "notion_update_property",
            json!({"page_id": "../databases/db1", "properties": {"Status": null}}),
        ),
        ("notion_read_page", json!({"page_id": "p1?filter=x"})),
        ("notion_query_database", json!({"database_id": "db1/../../users"})),
    ] {
        let err = call(&reg, tool, args).await.unwrap_err().to_string();
        assert!(err.contains("is not a Notion id"), "{tool}: {err}");
    }
    let w = writes.lock().unwrap().clone();
    assert_eq!(w.len(), 2, "only the two real writes reached Notion: {w:?}");
    assert_eq!(
        w[0].1,
        json!({"parent": {"page_id": "p1"}, "rich_text": [{"type": "text", "text": {"content": "Looks good"}}]})
    );
    assert_eq!(
        w[1],
        (
            "PATCH p1".to_string(),
            json!({"properties": {"Reviewers": {"people": [{"id": "u1"}]}}})
        )
    );
}

#[tokio::test]
async fn slack_files_become_virtual_files_within_the_cap() {
    use support::*;
    let downloads = Arc::new(AtomicU32::new(0));
    let d = downloads.clone();
    let app = Router::new().route(
        "/files/{name}",
        get(
            move |axum::extract::Path(name): axum::extract::Path<String>, h: HeaderMap| {
                let d = d.clone();
                async move {
                    assert_eq!(h["authorization"], "Bearer xoxb-test");
                    d.fetch_add(1, Ordering::SeqCst);
                    match name.as_str() {
                        "notes.txt" => "deploy at 14:00, owner Ana".to_string(),
                        _ => "x".repeat(5000),
                    }
                }
            },
        ),
    );
    // files.info as Slack answers it for a Slack Connect file this workspace may read.
    let info_url = Arc::new(std::sync::Mutex::new(String::new()));
    let base = info_url.clone();
    let app = app.route(
        "/files.info",
        get(
            move |axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>| {
                let base = base.lock().unwrap().clone();
                async move {
                    match q.get("file").map(String::as_str) {
                        Some("F4") => Json(json!({"ok": true, "file": {"id": "F4", "name": "shared.txt",
                            "mimetype": "text/plain", "size": 26, "url_private_download": format!("{base}/files/notes.txt")}})),
                        _ => Json(json!({"ok": false, "error": "file_not_found"})),
                    }
                }
            },
        ),
    );
    let url = serve(app).await;
    *info_url.lock().unwrap() = url.clone();
    let slack = SlackClient::new(steward::http::client().unwrap(), &url, "xoxb-test");
    let payload = |files: Value| {
        json!({"token": "XXYYZZ", "type": "event_callback", "event_id": "EvF1", "team_id": "T1", "api_app_id": "A1", "event_time": 1700000000,
               "event": {"type": "message", "subtype": "file_share", "channel": "C0HELP", "channel_type": "channel", "user": "U1",
                         "text": "see attached", "ts": "1700000000.000100", "files": files}})
    };
    let files = json!([
        {"id": "F1", "name": "notes.txt", "mimetype": "text/plain", "size": 26, "url_private_download": format!("{url}/files/notes.txt")},
        {"id": "F2", "name": "huge.mov", "mimetype": "video/quicktime", "size": 31457280, "url_private_download": format!("{url}/files/huge.mov")},
        {"id": "F3", "name": "liar.txt", "mimetype": "text/plain", "size": 10, "url_private_download": format!("{url}/files/liar.txt")}
    ]);
    let steward::triggers::slack::SlackPayload::Event { event, .. } =
        steward::triggers::slack::parse(&payload(files), None).unwrap()
    else {
        panic!()
    };
    let sources = steward::triggers::Sources::new(steward::triggers::source::SourceSettings {
        slack: Some(slack.clone()),
        egress: loopback_egress(),
        attachment_cap: 1000,
        ..Default::default()
    });
    let fetched = sources.attachments(&event).await;
    let (got, notes) = (fetched.files, fetched.notes);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (
            got[0].name.as_str(),
            got[0].mime.as_str(),
            got[0].content.as_slice()
        ),
        (
            "notes.txt",
            "text/plain",
            b"deploy at 14:00, owner Ana".as_slice()
        )
    );
    assert_eq!(
        notes[0],
        "file huge.mov (31457280 bytes) was not loaded: it is over the 1000-byte attachment cap."
    );
    assert!(
        notes[1].contains("liar.txt could not be loaded")
            && notes[1].contains("larger than the 1000-byte attachment cap"),
        "{}",
        notes[1]
    );
    assert_eq!(
        downloads.load(Ordering::SeqCst),
        2,
        "the 30 MB file was never downloaded"
    );

    // Slack Connect shares name the file only (`file_access: check_file_info`): asked
    // about with files.info, then loaded; one files.info refuses is said in a note.
    let connect = json!([
        {"id": "F4", "file_access": "check_file_info", "created": 1700000000, "timestamp": 1700000000, "user": "U2"},
        {"id": "F5", "file_access": "check_file_info", "created": 1700000000, "timestamp": 1700000000, "user": "U2"}
    ]);
    let steward::triggers::slack::SlackPayload::Event { event: shared, .. } =
        steward::triggers::slack::parse(&payload(connect), None).unwrap()
    else {
        panic!()
    };
    let fetched = sources.attachments(&shared).await;
    assert_eq!(fetched.files.len(), 1, "{:?}", fetched.notes);
    assert_eq!(fetched.files[0].name, "shared.txt");
    assert_eq!(fetched.files[0].content, b"deploy at 14:00, owner Ana");
    assert!(
        fetched
            .notes
            .iter()
            .any(|n| n.contains("F5") && n.contains("Slack Connect") && n.contains("file_not_found")),
        "{:?}",
        fetched.notes
    );

    // A whole run: the file is a virtual file, preloaded; the refusal is explained.
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("noted")));
    let (_d, mut r) = runner(
        providers(Some(&fake), None),
        ToolRegistry::core(Default::default()),
        false,
    )
    .await;
    // The service's own cap this time (20 MB).
    r.sources = Arc::new(steward::triggers::Sources::new(
        steward::triggers::source::SourceSettings {
            slack: Some(slack.clone()),
            egress: loopback_egress(),
            ..Default::default()
        },
    ));
    let agent = steward::config::AgentConfig::new(
        "a",
        steward::types::ModelRef::parse("openai/gpt-4.1").unwrap(),
        "Help.",
        vec![],
    );
    let mut a = agent.clone();
    a.output.reply = false;
    r.run(&a, &event, None, CancellationToken::new()).await.unwrap();
    let opening = fake.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        opening.contains("[steward: f_1 notes.txt (in full of 26 bytes):]\ndeploy at 14:00, owner Ana"),
        "{opening}"
    );
    assert!(opening.contains("[steward: file huge.mov (31457280 bytes) was not loaded: it is over the 20971520-byte attachment cap.]"), "{opening}");
}

#[tokio::test]
async fn prompts_load_from_notion_with_a_fallback_to_the_last_good_copy() {
    use support::*;
    let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let u = up.clone();
    let fetches = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let f = fetches.clone();
    let app = Router::new().route(
        "/v1/blocks/{id}/children",
        get(move |axum::extract::Path(id): axum::extract::Path<String>| {
            let (u, f) = (u.clone(), f.clone());
            async move {
                f.fetch_add(1, Ordering::SeqCst);
                assert_eq!(id.replace('-', ""), "1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6");
                if !u.load(Ordering::SeqCst) {
                    return (StatusCode::BAD_GATEWAY, Json(json!({"object": "error", "message": "upstream down"}))).into_response();
                }
                Json(json!({"results": [{"id": "b1", "type": "paragraph", "has_children": false,
                    "paragraph": {"rich_text": [{"type": "text", "plain_text": "You triage support requests from Notion.", "annotations": {}, "href": null}]}}],
                    "has_more": false})).into_response()
            }
        }),
    );
    let url = serve(app).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("agents")).unwrap();
    std::fs::write(
        dir.path().join("agents/triage.yaml"),
        "model: openai/gpt-4.1\nprompt: notion:1a2b3c4d-5e6f-47a8-b9c0-d1e2f3a4b5c6\n",
    )
    .unwrap();
    let config =
        steward::config::Config::load(dir.path(), &Default::default()).unwrap_or_else(|d| panic!("{d}"));
    let agent = config.agent("triage").unwrap();
    assert_eq!(
        agent.prompt.as_ref().unwrap().url.as_deref(),
        Some("https://www.notion.so/1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6")
    );

    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("ok")));
    let (_d, mut r) = runner(
        providers(Some(&fake), None),
        ToolRegistry::core(Default::default()),
        false,
    )
    .await;
    r.sources = Arc::new(steward::triggers::Sources::new(
        steward::triggers::source::SourceSettings {
            notion: Some(steward::integrations::notion::NotionClient::new(
                steward::http::client().unwrap(),
                &url,
                "secret_x",
            )),
            ..Default::default()
        },
    ));
    r.prompts = Arc::new(steward::run::prompts::PromptCache::with_ttl(
        std::time::Duration::ZERO,
    ));
    let t = steward::triggers::TriggerEvent::from_cli(json!({"text": "hi"}));
    r.run(&agent, &t, None, CancellationToken::new()).await.unwrap();
    let system = |i: usize| {
        fake.requests()[i].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(system(0).starts_with("You triage support requests from Notion."));
    // Another replica (its own memory cache, the same store) within the TTL takes the
    // copy the first one saved instead of asking Notion again.
    let shared = steward::run::prompts::PromptCache::default();
    let before = fetches.load(Ordering::SeqCst);
    let again = shared
        .resolve(&agent, &r.sources, r.store.as_ref())
        .await
        .unwrap()
        .unwrap();
    assert!(
        again
            .prompt
            .unwrap()
            .text
            .starts_with("You triage support requests from Notion.")
    );
    assert_eq!(fetches.load(Ordering::SeqCst), before, "served from the store");
    // Notion is down: the last good copy is used.
    up.store(false, Ordering::SeqCst);
    let out = r.run(&agent, &t, None, CancellationToken::new()).await.unwrap();
    assert_eq!(out.status(), steward::store::RunStatus::Succeeded);
    assert!(system(1).starts_with("You triage support requests from Notion."));
    // A new process (an empty memory cache) on the same store, Notion still down: the
    // copy another replica saved in the store is used.
    r.prompts = Arc::new(steward::run::prompts::PromptCache::default());
    let out = r.run(&agent, &t, None, CancellationToken::new()).await.unwrap();
    assert_eq!(out.status(), steward::store::RunStatus::Succeeded);
    assert!(system(2).starts_with("You triage support requests from Notion."));
    // With no copy at all (another database) the run fails at once, recorded with a
    // clear error (it must not wait in the queue to be retried forever).
    let (_d2, mut fresh) = runner(
        providers(Some(&fake), None),
        ToolRegistry::core(Default::default()),
        false,
    )
    .await;
    fresh.sources = r.sources.clone();
    let r = fresh;
    let calls = fake.requests().len();
    let out = r.run(&agent, &t, None, CancellationToken::new()).await.unwrap();
    assert_eq!(out.status(), steward::store::RunStatus::Failed);
    assert_eq!(out.termination.as_str(), "prompt_unavailable");
    let err = out.error.unwrap();
    assert!(
        err.starts_with("cannot load the prompt from Notion page 1a2b3c4d-5e6f-47a8-b9c0-d1e2f3a4b5c6"),
        "{err}"
    );
    let row = r.store.get_run(&out.run_id).await.unwrap().unwrap();
    assert_eq!(row.status, steward::store::RunStatus::Failed);
    assert_eq!(row.termination.as_deref(), Some("prompt_unavailable"));
    assert_eq!(fake.requests().len(), calls, "no model call without a prompt");
}

#[tokio::test]
async fn jira_issue_and_attachments_become_files() {
    use axum::extract::Path as UrlPath;
    let app = Router::new()
        .route("/rest/api/3/issue/{key}", get(|UrlPath(key): UrlPath<String>, h: HeaderMap| async move {
            assert_eq!(h["authorization"], "Basic Ym90QGFjbWUuY29tOnQ=");
            Json(json!({"id": "10002", "key": key, "fields": {
                "summary": "Gateway down", "status": {"name": "To Do"}, "issuetype": {"name": "Incident"},
                "reporter": {"displayName": "Ana"}, "assignee": null,
                "description": {"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [{"type": "text", "text": "See the log."}]}]},
                "comment": {"comments": [{"author": {"displayName": "Bo"}, "created": "2026-11-20T10:00:00.000+0000", "body": "On it"}]},
                "attachment": [{"id": "10001", "filename": "gateway.log", "size": 48, "mimeType": "text/plain"}]}}))
        }))
        .route("/rest/api/3/attachment/content/{id}", get(|UrlPath(id): UrlPath<String>| async move {
            assert_eq!(id, "10001");
            "09:00 ERROR certificate expired\n09:01 ERROR retry\n"
        }))
        .route("/rest/api/3/issue/NOPE-1", get(|| async { (StatusCode::NOT_FOUND, Json(json!({"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}}))) }));
    let strays = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = strays.clone();
    let app = app.fallback(move |uri: axum::http::Uri| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push(uri.to_string());
            Json(json!({"issues": [{"key": "HR-1"}]}))
        }
    });
    let url = serve(app).await;
    let reg = registry(
        None,
        Some(JiraClient::new(
            steward::http::client().unwrap(),
            &url,
            "bot@acme.com",
            "t",
        )),
    );
    let issue = call(&reg, "jira_get_issue", json!({"key": "OPS-7"}))
        .await
        .unwrap();
    assert_eq!(issue["description"], "See the log.");
    assert_eq!(issue["comments"][0]["body"], "On it");
    assert_eq!(
        issue["attachments"][0],
        json!({"id": "10001", "filename": "gateway.log", "size": 48, "mime": "text/plain"})
    );
    let err = call(&reg, "jira_get_issue", json!({"key": "NOPE-1"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "jira GET /rest/api/3/issue/NOPE-1: Issue does not exist or you do not have permission to see it."
    );
    // Downloading puts the attachment in the run's files.
    let c = ctx();
    let allowed: Vec<String> = reg.names().into_iter().collect();
    let out = reg
        .invoke(
            &allowed,
            "jira_get_attachment",
            &json!({"id": "10001", "issue": "OPS-7", "filename": "gateway.log"}).to_string(),
            &c,
            false,
        )
        .await
        .unwrap();
    assert!(
        out.to_model_text()
            .starts_with("Downloaded into f_1 gateway.log (text/plain, 50 bytes"),
        "{}",
        out.to_model_text()
    );
    let (_, content) = c.files.get("f_1").unwrap();
    assert_eq!(
        content.as_slice(),
        b"09:00 ERROR certificate expired\n09:01 ERROR retry\n"
    );
    // An issue named with the id is checked, scope or not: the attachment must be on it.
    let err = reg
        .invoke(
            &allowed,
            "jira_get_attachment",
            &json!({"id": "10009", "issue": "OPS-7"}).to_string(),
            &c,
            false,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("attachment 10009 is not on OPS-7 (its attachments: 10001)"),
        "{err}"
    );
    let named = reg
        .invoke(
            &allowed,
            "jira_get_attachment",
            &json!({"id": "10001", "issue": "OPS-7"}).to_string(),
            &c,
            false,
        )
        .await
        .unwrap();
    assert!(
        named.to_model_text().starts_with("Downloaded into f_2"),
        "{}",
        named.to_model_text()
    );
    // An id that would climb out of its endpoint (a prompt injection's) is refused
    // before anything is sent: no other Jira endpoint is reached with steward's token.
    for (tool, args) in [
        (
            "jira_get_attachment",
            json!({"id": "../../search/jql?jql=project=HR", "issue": "OPS-7"}),
        ),
        ("jira_get_issue", json!({"key": "OPS-7/../../myself"})),
        ("jira_add_comment", json!({"key": "..", "body": "hi"})),
    ] {
        let err = reg
            .invoke(&allowed, tool, &args.to_string(), &c, false)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is not on OPS-7") || err.contains("is not an issue key"),
            "{tool}: {err}"
        );
    }
    assert!(strays.lock().unwrap().is_empty(), "{:?}", strays.lock().unwrap());
}

/// On the issue a run answers on, `jira_get_issue` shows only the comments its answer's
/// readers may read, and `jira_add_comment` there is restricted as the answer is; from
/// elsewhere (a Slack run) the whole issue is read and held as restricted text.
#[tokio::test]
async fn a_runs_own_issue_is_read_and_written_under_its_triggers_restriction() {
    use axum::extract::Path as UrlPath;
    use steward::types::jira_restriction::Restriction;
    let posted = Arc::new(Mutex::new(Vec::<Value>::new()));
    let p = posted.clone();
    let comment = |id: &str, body: &str, extra: Value| {
        let mut c = json!({"id": id, "author": {"displayName": "Bo"}, "created": "2026-11-20T10:00:00.000+0000", "body": body});
        if let Value::Object(extra) = extra {
            c.as_object_mut().unwrap().extend(extra);
        }
        c
    };
    let comments = json!([
        comment("1", "public note", json!({})),
        comment(
            "2",
            "developers only",
            json!({"visibility": {"type": "role", "value": "Developers", "identifier": "Developers"}})
        ),
        comment("3", "agents only", json!({"jsdPublic": false})),
    ]);
    let app = Router::new()
        .route("/rest/api/3/issue/{key}", get(move |UrlPath(key): UrlPath<String>| {
            let comments = comments.clone();
            async move {
                Json(json!({"id": "10007", "key": key, "fields": {"summary": "Login fails", "comment": {"comments": comments}}}))
            }
        }))
        .route("/rest/api/3/issue/{key}/comment", axum::routing::post(move |UrlPath(key): UrlPath<String>, Json(mut body): Json<Value>| {
            let p = p.clone();
            async move {
                body["issue"] = json!(key);
                p.lock().unwrap().push(body);
                (StatusCode::CREATED, Json(json!({"id": "10100"})))
            }
        }));
    let url = serve(app).await;
    let reg = registry(
        None,
        Some(JiraClient::new(
            steward::http::client().unwrap(),
            &url,
            "bot@acme.com",
            "t",
        )),
    );
    let allowed: Vec<String> = reg.names().into_iter().collect();
    let developers = Restriction {
        visibility: Some(json!({"type": "role", "value": "Developers"})),
        internal: false,
    };
    let at_home = |restriction: Option<Restriction>| ToolCtx {
        call_id: "call-1".into(),
        ..support::tool_ctx(
            "run-1",
            Arc::new(steward::tools::search_grant::SearchGrant {
                jira_home: restriction.map(|r| ("OPS-7".to_string(), r)),
                ..Default::default()
            }),
        )
    };
    let read = |c: ToolCtx| {
        let (reg, allowed) = (&reg, &allowed);
        async move {
            reg.invoke(
                allowed,
                "jira_get_issue",
                &json!({"key": "OPS-7"}).to_string(),
                &c,
                false,
            )
            .await
            .unwrap()
            .value
        }
    };
    let bodies = |v: &Value| -> Vec<String> {
        v["comments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["body"].as_str().unwrap().to_string())
            .collect()
    };
    // A public comment's run: the public comment only, and nothing restricted held.
    let public = read(at_home(Some(Restriction::default()))).await;
    assert_eq!(bodies(&public), ["public note"]);
    assert_eq!(
        (public["comments_left_out"].clone(), public["restricted"].clone()),
        (json!(2), json!(false))
    );
    // A Developers-only comment's run: the public one and the Developers' one.
    let devs = read(at_home(Some(developers.clone()))).await;
    assert_eq!(bodies(&devs), ["public note", "developers only"]);
    assert_eq!(
        (devs["comments_left_out"].clone(), devs["restricted"].clone()),
        (json!(1), json!(true))
    );
    // From elsewhere: everything, held as restricted text by the run.
    let elsewhere = read(at_home(None)).await;
    assert_eq!(bodies(&elsewhere).len(), 3);
    assert!(elsewhere["comments_left_out"].is_null());
    assert_eq!(elsewhere["restricted"], true);

    // A comment on the run's own issue carries its restriction; on another issue none.
    for key in ["OPS-7", "OPS-8"] {
        reg.invoke(
            &allowed,
            "jira_add_comment",
            &json!({"key": key, "body": "Rotated."}).to_string(),
            &at_home(Some(developers.clone())),
            false,
        )
        .await
        .unwrap();
    }
    let posted = posted.lock().unwrap().clone();
    assert_eq!(posted[0]["issue"], "OPS-7");
    assert_eq!(
        posted[0]["visibility"],
        json!({"type": "role", "value": "Developers"})
    );
    assert_eq!(posted[1]["issue"], "OPS-8");
    assert!(posted[1]["visibility"].is_null(), "{}", posted[1]);
}

#[tokio::test]
async fn a_posted_reply_counts_as_a_side_effect_for_crash_recovery() {
    use steward::store::{NewRun, RunStore, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    store
        .create_run(&NewRun {
            id: "r1".into(),
            agent: "a".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!store.has_side_effects("r1").await.unwrap());
    store
        .append_event(
            "r1",
            "tool_call",
            &json!({"name": "current_time", "side_effect": false}),
        )
        .await
        .unwrap();
    assert!(!store.has_side_effects("r1").await.unwrap());
    store
        .append_event(
            "r1",
            "reply",
            &json!({"destination": {"slack": "C1"}, "side_effect": true}),
        )
        .await
        .unwrap();
    assert!(
        store.has_side_effects("r1").await.unwrap(),
        "a run that replied must not be re-run after a crash"
    );
}

#[tokio::test]
async fn doc_review_reads_the_page_and_comments_with_the_prompt_link() {
    use axum::extract::Path as UrlPath;
    use support::*;
    let comments = Arc::new(Mutex::new(Vec::<Value>::new()));
    let c = comments.clone();
    let page_id = "153104cd-477e-809d-8dc4-ff2d96ae3090";
    let app = Router::new()
        .route("/v1/pages/{id}", get(|UrlPath(id): UrlPath<String>| async move {
            Json(json!({"object": "page", "id": id, "url": "https://www.notion.so/Design-doc", "properties": {
                "Name": {"id": "title", "type": "title", "title": [{"type": "text", "plain_text": "Cert rotation"}]},
                "Status": {"id": "s", "type": "status", "status": {"name": "Ready for review"}}}}))
        }))
        .route("/v1/blocks/{id}/children", get(|| async {
            Json(json!({"results": [{"id": "b1", "type": "paragraph", "has_children": false,
                "paragraph": {"rich_text": [{"type": "text", "plain_text": "We will rotate certificates monthly.", "annotations": {}, "href": null}]}}], "has_more": false}))
        }))
        .route("/v1/comments", post(move |Json(b): Json<Value>| {
            let c = c.clone();
            async move {
                c.lock().unwrap().push(b);
                Json(json!({"object": "comment", "id": "c-1"}))
            }
        }));
    let url = serve(app).await;
    let http = steward::http::client().unwrap();
    let notion = steward::integrations::notion::NotionClient::new(http.clone(), &url, "secret_x");
    let mut reg = ToolRegistry::core(Default::default());
    for t in steward::integrations::tools::notion_tools(Some(notion.clone())) {
        reg.register(t);
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let skills = steward::skills::SkillSet::load(root, &[]);
    let known = steward::config::Known {
        tools: builtin_registry().names(),
        skills: skills.names(),
    };
    let config = steward::config::Config::load(root, &known).unwrap_or_else(|d| panic!("{d}"));
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[(
        "c1",
        "notion_read_page",
        &format!("{{\"page_id\": \"{page_id}\"}}"),
    )])));
    fake.push(Reply::ok(openai_text(
        "Strong: a clear decision. Missing: a rollback plan for a bad certificate.",
    )));
    let (_d, mut r) = runner(providers(Some(&fake), None), reg, false).await;
    r.skills = Arc::new(skills);
    r.subagents = Arc::new(config.subagents.clone());
    r.sources = Arc::new(steward::triggers::Sources::new(
        steward::triggers::source::SourceSettings {
            notion: Some(notion),
            prompt_base_url: Some("https://github.com/acme/steward/blob/main".into()),
            ..Default::default()
        },
    ));
    // The webhook event as Notion sends it.
    let body = json!({"id": "ev-1", "timestamp": "2024-12-05T23:55:34.285Z", "type": "page.properties_updated",
        "entity": {"id": page_id, "type": "page"},
        "data": {"parent": {"id": "1a2b3c4d-5e6f-47a8-b9c0-d1e2f3a4b5c6", "type": "database"}, "updated_properties": ["s"]}});
    let steward::triggers::notion::NotionPayload::Event { event, .. } =
        steward::triggers::notion::parse(&body).unwrap()
    else {
        panic!()
    };
    let agent = config.agent("doc-review").unwrap();
    let routed = steward::triggers::router::route(&config, &event, r.sources.notion.as_ref()).await;
    assert_eq!(
        routed.agents.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["doc-review"]
    );
    let out = r
        .run(&agent, &event, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        out.status(),
        steward::store::RunStatus::Succeeded,
        "{:?}",
        out.error
    );
    let content = fake.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"]
        .clone();
    assert_eq!(content, "We will rotate certificates monthly.\n");
    let posted = comments.lock().unwrap().clone();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0]["parent"]["page_id"], page_id);
    assert_eq!(
        posted[0]["rich_text"][0]["text"]["content"],
        "Strong: a clear decision. Missing: a rollback plan for a bad certificate.\n\nPrompt: https://github.com/acme/steward/blob/main/prompts/doc_review.md"
    );
}

#[tokio::test]
async fn files_on_a_notion_page_become_virtual_files() {
    use axum::extract::Path as UrlPath;
    let base = Arc::new(Mutex::new(String::new()));
    let b = base.clone();
    let app = Router::new()
        .route("/v1/pages/{id}", get(move |UrlPath(id): UrlPath<String>| {
            let b = b.lock().unwrap().clone();
            async move {
                Json(json!({"object": "page", "id": id, "properties": {
                    "Attachments": {"id": "f", "type": "files", "files": [
                        {"name": "spec.md", "type": "file", "file": {"url": format!("{b}/s3/spec.md?X-Amz-Signature=abc"), "expiry_time": "2026-11-22T08:00:00.000Z"}},
                        {"name": "big.md", "type": "external", "external": {"url": format!("{b}/s3/big.md")}}]}}}))
            }
        }))
        .route("/s3/{name}", get(|UrlPath(name): UrlPath<String>, h: HeaderMap| async move {
            // Signed URLs refuse extra auth headers.
            assert!(h.get("authorization").is_none());
            if name == "spec.md" { "# Spec\nrotate monthly\n".to_string() } else { "x".repeat(5000) }
        }));
    let url = serve(app).await;
    *base.lock().unwrap() = url.clone();
    let sources = steward::triggers::Sources::new(steward::triggers::source::SourceSettings {
        notion: Some(steward::integrations::notion::NotionClient::new(
            steward::http::client().unwrap(),
            &url,
            "secret_x",
        )),
        egress: loopback_egress(),
        attachment_cap: 1000,
        ..Default::default()
    });
    let body = json!({"id": "ev-9", "type": "page.properties_updated", "entity": {"id": "p9", "type": "page"}, "data": {"parent": {"id": "db", "type": "database"}}});
    let steward::triggers::notion::NotionPayload::Event { event, .. } =
        steward::triggers::notion::parse(&body).unwrap()
    else {
        panic!()
    };
    let fetched = sources.attachments(&event).await;
    let (files, notes) = (fetched.files, fetched.notes);
    assert_eq!(files.len(), 1);
    assert_eq!(
        (
            files[0].name.as_str(),
            files[0].mime.as_str(),
            files[0].content.as_slice()
        ),
        ("spec.md", "text/markdown", b"# Spec\nrotate monthly\n".as_slice())
    );
    assert!(
        notes[0].starts_with("file big.md could not be loaded")
            && notes[0].contains("1000-byte attachment cap"),
        "{notes:?}"
    );
}

/// The fake services listen on 127.0.0.1, which the egress checks refuse by default.
fn loopback_egress() -> steward::http::Egress {
    steward::http::Egress::new(steward::http::EgressPolicy::parse("127.0.0.1").unwrap())
}

/// Privacy from `conversations.info`: a C-id private channel is private, a public one
/// is asked about once and cached, and a failed answer (an error, `ok: false`) counts
/// as private and is asked again next time rather than remembered.
#[tokio::test]
async fn conversations_info_decides_privacy_and_a_failure_counts_as_private() {
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = asked.clone();
    let app = Router::new().route(
        "/api/conversations.info",
        get(
            move |Query(q): Query<std::collections::HashMap<String, String>>| {
                let seen = seen.clone();
                async move {
                    let id = q.get("channel").cloned().unwrap_or_default();
                    seen.lock().unwrap().push(id.clone());
                    match id.as_str() {
                        "C0PRIV" => Json(json!({"ok": true, "channel": {"id": "C0PRIV", "is_channel": true,
                        "is_private": true, "is_im": false, "is_mpim": false}}))
                        .into_response(),
                        "C0PUB" => Json(json!({"ok": true, "channel": {"id": "C0PUB", "is_channel": true,
                        "is_private": false, "is_im": false, "is_mpim": false}}))
                        .into_response(),
                        "C0SCOPE" => Json(json!({"ok": false, "error": "missing_scope"})).into_response(),
                        _ => Json(json!({"ok": false, "error": "channel_not_found"})).into_response(),
                    }
                }
            },
        ),
    );
    let url = serve(app).await;
    let slack = SlackClient::new(
        steward::http::client().unwrap(),
        &format!("{url}/api"),
        "xoxb-test",
    );
    assert!(slack.is_private_channel("C0PRIV").await);
    assert!(!slack.is_private_channel("C0PUB").await);
    assert!(!slack.is_private_channel("C0PUB").await, "cached");
    assert!(
        slack.is_private_channel("C0SCOPE").await,
        "an error counts as private"
    );
    assert!(slack.is_private_channel("C0DOWN").await);
    assert!(slack.is_private_channel("C0DOWN").await);
    // D and G ids are private without asking.
    assert!(slack.is_private_channel("D0DM").await && slack.is_private_channel("G0OLD").await);
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.iter().filter(|c| *c == "C0PUB").count(), 1, "{asked:?}");
    assert_eq!(
        asked.iter().filter(|c| *c == "C0DOWN").count(),
        2,
        "failures are not remembered: {asked:?}"
    );
    assert!(!asked.iter().any(|c| c.starts_with('D') || c.starts_with('G')));
}

/// A channel link's label names the channel in its own text only: it never renames the
/// channel in other text, nor turns a model's `#name` into a link to it (anyone can
/// post `<#C0EVIL|incidents>` through the API). A channel made private loses the name
/// Slack gave it while public.
#[tokio::test]
async fn a_channel_links_label_stays_in_its_own_text() {
    let app = Router::new().route(
        "/conversations.info",
        get(|q: Query<Value>| async move {
            match q.0["channel"].as_str() {
                Some("C0INCIDENTS") => Json(json!({"ok": true, "channel": {"id": "C0INCIDENTS", "name": "incidents", "created": 1449252889, "is_channel": true, "is_private": false}})),
                _ => Json(json!({"ok": false, "error": "channel_not_found"})),
            }
        }),
    );
    let url = serve(app).await;
    let slack = SlackClient::new(steward::http::client().unwrap(), &url, "xoxb-test");
    assert_eq!(slack.humanize("see <#C0INCIDENTS>").await, "see #incidents");
    assert_eq!(
        slack.humanize("<#C0EVIL|incidents> <#C0INCIDENTS|zz>").await,
        "#incidents #incidents",
        "a label is used only where Slack gives no name"
    );
    assert_eq!(slack.mentionize("ask #incidents"), "ask <#C0INCIDENTS>");
    assert_eq!(
        slack.humanize("back to <#C0EVIL>").await,
        "back to #C0EVIL",
        "the label did not name the channel"
    );
    slack.made_private("C0INCIDENTS");
    assert_eq!(slack.mentionize("ask #incidents"), "ask #incidents");
    // Slack's answer still says public (it can lag the change): the name stays gone.
    assert_eq!(slack.humanize("in <#C0INCIDENTS>").await, "in #C0INCIDENTS");
    assert_eq!(slack.mentionize("ask #incidents"), "ask #incidents");
}
