//! Conversations on Jira issues and Notion pages through `steward serve`'s service: a
//! comment that mentions the bot where an agent answered continues with that agent,
//! the comments so far as context, and the answer goes in the same place. Fake Jira
//! and Notion servers keep their comments, in the providers' documented shapes.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Json, Path as UrlPath, Query};
use axum::http::{Request, StatusCode};
use axum::routing::get;
use serde_json::{Value, json};
use steward::config::{Config, Known};
use steward::integrations::jira::JiraClient;
use steward::integrations::notion::NotionClient;
use steward::run::Runner;
use steward::server::{DispatchSettings, Secrets, Service};
use steward::store::{RunRow, RunStatus, SqliteStore, Store};
use steward::triggers::auth::sign_hex;
use support::*;
use tower::ServiceExt;

const JIRA_SECRET: &str = "jira-webhook-secret";
const NOTION_TOKEN: &str = "secret_notion_verification";
const BOT_ACCOUNT: &str = "5b10ac8d82e05b22cc7d4ef5";
const BOT_USER: &str = "b0b0b0b0-0000-4000-8000-000000000001";
const PERSON: &str = "a1a1a1a1-0000-4000-8000-000000000002";

/// Comments kept by a fake service, in the order they were written.
#[derive(Clone, Default)]
struct Comments(Arc<Mutex<Vec<Value>>>);

impl Comments {
    fn push(&self, c: Value) {
        self.0.lock().unwrap().push(c);
    }
    fn all(&self) -> Vec<Value> {
        self.0.lock().unwrap().clone()
    }
}

fn adf(text: &str) -> Value {
    json!({"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [{"type": "text", "text": text}]}]})
}

async fn fake_jira(comments: Comments) -> String {
    let (read, write) = (comments.clone(), comments);
    let app = Router::new()
        .route(
            "/rest/api/3/myself",
            get(|| async { Json(json!({"accountId": BOT_ACCOUNT, "displayName": "Steward", "accountType": "atlassian"})) }),
        )
        .route(
            "/rest/api/3/issue/{key}/comment",
            get(move |Query(q): Query<HashMap<String, String>>| {
                let all = read.all();
                async move {
                    assert_eq!(q.get("orderBy").map(String::as_str), Some("-created"));
                    let mut newest_first = all.clone();
                    newest_first.reverse();
                    Json(json!({"startAt": 0, "maxResults": 100, "total": all.len(), "comments": newest_first}))
                }
            })
            .post(move |UrlPath(key): UrlPath<String>, Json(body): Json<Value>| {
                let store = write.clone();
                async move {
                    let id = format!("{}", 10_100 + store.all().len());
                    let mut c = json!({"id": id, "self": format!("https://example.atlassian.net/rest/api/3/issue/{key}/comment/{id}"),
                                   "author": {"accountId": BOT_ACCOUNT, "displayName": "Steward"},
                                   "body": body["body"], "created": "2026-11-24T10:05:00.000+0000"});
                    // As Jira keeps them: a restriction, a service desk's properties.
                    for field in ["visibility", "properties"] {
                        if !body[field].is_null() {
                            c[field] = body[field].clone();
                        }
                    }
                    store.push(c.clone());
                    (StatusCode::CREATED, Json(c))
                }
            }),
        );
    serve(app).await
}

/// A Notion comment object as `GET /v1/comments` lists it.
fn notion_comment(id: &str, discussion: &str, author: &str, rich_text: Value) -> Value {
    json!({"object": "comment", "id": id, "discussion_id": discussion, "created_time": "2026-11-24T10:00:00.000Z",
           "created_by": {"object": "user", "id": author}, "parent": {"type": "page_id", "page_id": "page"},
           "rich_text": rich_text})
}

fn plain(text: &str) -> Value {
    json!([{"type": "text", "text": {"content": text}, "plain_text": text, "annotations": {}}])
}

async fn fake_notion(comments: Comments) -> String {
    let (read, write) = (comments.clone(), comments);
    let app = Router::new()
        .route(
            "/v1/users/me",
            get(|| async {
                Json(json!({"object": "user", "id": BOT_USER, "type": "bot", "name": "Steward", "bot": {}}))
            }),
        )
        .route(
            "/v1/comments",
            get(move |Query(q): Query<HashMap<String, String>>| {
                let all = read.all();
                async move {
                    assert!(q.contains_key("block_id"));
                    Json(json!({"object": "list", "results": all, "next_cursor": null, "has_more": false}))
                }
            })
            .post(move |Json(body): Json<Value>| {
                let store = write.clone();
                async move {
                    let n = store.all().len();
                    // A comment on the page starts a discussion; one with a
                    // discussion_id answers in it.
                    let discussion = body["discussion_id"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or(format!("disc-{n}"));
                    let text = body["rich_text"][0]["text"]["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let c = notion_comment(&format!("comment-{n}"), &discussion, BOT_USER, plain(&text));
                    store.push(c.clone());
                    Json(c)
                }
            }),
        );
    serve(app).await
}

struct Steward {
    service: Service,
    store: Arc<dyn Store>,
}

async fn start(root: &Path, fake: &FakeModel, jira_url: &str, notion_url: &str) -> Steward {
    write(root, "prompts/p.md", "You triage.");
    write(
        root,
        "agents/triage.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - jira: {events: ['jira:issue_created']}\n",
    );
    write(
        root,
        "agents/pages.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - notion: {events: [page.created]}\n",
    );
    let tools = steward::tools::ToolRegistry::core(Default::default());
    let config = Config::load(
        root,
        &Known {
            tools: tools.names(),
            skills: Default::default(),
        },
    )
    .unwrap_or_else(|d| panic!("{d}"));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&root.join("steward.db")).await.unwrap());
    let http = steward::http::client().unwrap();
    let runner = Runner::builder(store.clone())
        .providers(providers(Some(fake), None))
        .tools(tools)
        .tokens(tokens())
        .sources(steward::triggers::Sources::new(
            steward::triggers::source::SourceSettings {
                jira: Some(JiraClient::new(
                    http.clone(),
                    jira_url,
                    "bot@example.com",
                    "api-token",
                )),
                notion: Some(NotionClient::new(http, notion_url, "secret_integration")),
                ..Default::default()
            },
        ))
        .build();
    let secrets = Secrets {
        jira: JIRA_SECRET.into(),
        notion: Some(NOTION_TOKEN.into()),
        ..Secrets::default()
    };
    let service = Service::start(
        runner,
        Arc::new(config),
        secrets,
        None,
        None,
        DispatchSettings::default(),
    );
    Steward { service, store }
}

impl Steward {
    async fn send(&self, req: Request<Body>) -> StatusCode {
        self.service.router().oneshot(req).await.unwrap().status()
    }

    /// Waits until `n` runs exist and all ended, newest first.
    async fn runs(&self, n: usize) -> Vec<RunRow> {
        ended_runs(self.store.as_ref(), n).await
    }

    async fn routed(&self) {
        all_routed(self.store.as_ref()).await
    }

    /// The events settled as ignored.
    async fn ignored(&self) -> Vec<steward::store::EventRecord> {
        self.store
            .list_events(&steward::store::EventFilter {
                outcome: Some(steward::types::event_outcome::OutcomeKind::Ignored),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
    }
}

fn jira_request(body: &Value) -> Request<Body> {
    let raw = body.to_string();
    Request::post("/jira/webhook")
        .header(
            "x-hub-signature",
            format!("sha256={}", sign_hex(JIRA_SECRET.as_bytes(), &[raw.as_bytes()])),
        )
        .body(Body::from(raw))
        .unwrap()
}

fn notion_request(body: &Value) -> Request<Body> {
    let raw = body.to_string();
    Request::post("/notion/webhook")
        .header(
            "x-notion-signature",
            format!("sha256={}", sign_hex(NOTION_TOKEN.as_bytes(), &[raw.as_bytes()])),
        )
        .body(Body::from(raw))
        .unwrap()
}

const ISSUE: &str = "OPS-7";

fn issue() -> Value {
    json!({"id": "10002", "key": ISSUE, "fields": {"summary": "VPN drops every hour", "project": {"key": "OPS"},
           "status": {"name": "To Do"}, "issuetype": {"name": "Bug"}}})
}

/// A `comment_created` webhook as Jira Cloud sends it.
/// A comment body (ADF) that mentions steward, then says `text`.
fn asking(text: &str) -> Value {
    json!({"type": "doc", "version": 1, "content": [{"type": "paragraph", "content": [
        {"type": "mention", "attrs": {"id": BOT_ACCOUNT, "text": "@Steward", "accessLevel": ""}},
        {"type": "text", "text": text}]}]})
}

/// The issue is created and its triage run ends.
async fn issue_created(s: &Steward) {
    let created = json!({"timestamp": chrono::Utc::now().timestamp_millis(), "webhookEvent": "jira:issue_created",
                         "user": {"displayName": "Ana"}, "issue": issue()});
    assert_eq!(s.send(jira_request(&created)).await, StatusCode::OK);
    s.runs(1).await;
}

fn comment_created(id: &str, author: (&str, &str), body: Value) -> Value {
    json!({"timestamp": chrono::Utc::now().timestamp_millis(), "webhookEvent": "comment_created",
           "comment": {"id": id, "author": {"accountId": author.0, "displayName": author.1}, "body": body,
                       "created": "2026-11-24T10:10:00.000+0000", "updated": "2026-11-24T10:10:00.000+0000"},
           "issue": issue()})
}

#[tokio::test]
async fn a_jira_comment_mentioning_the_bot_continues_on_that_issue() {
    let dir = tempfile::tempdir().unwrap();
    let jira = Comments::default();
    let jira_url = fake_jira(jira.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Likely the DHCP lease; priority P2.")));
    fake.push(Reply::ok(openai_text("Because it affects one office only.")));
    let s = start(dir.path(), &fake, &jira_url, "http://127.0.0.1:9").await;

    let created = json!({"timestamp": chrono::Utc::now().timestamp_millis(), "webhookEvent": "jira:issue_created",
                         "user": {"displayName": "Ana"}, "issue": issue()});
    assert_eq!(s.send(jira_request(&created)).await, StatusCode::OK);
    s.runs(1).await;
    assert_eq!(jira.all().len(), 1, "the triage answer is a comment");

    // A comment that does not mention the bot, and the bot's own comment, start nothing.
    let chatter = comment_created("10200", ("acct-ana", "Ana Lee"), adf("I see it too."));
    jira.push(chatter["comment"].clone());
    // An internal note on the issue: never in a public run's context.
    let mut note = comment_created(
        "10199",
        ("acct-bo", "Bo Chen"),
        adf("Internal: customer owes 40k."),
    );
    note["comment"]["jsdPublic"] = json!(false);
    jira.push(note["comment"].clone());
    assert_eq!(s.send(jira_request(&chatter)).await, StatusCode::OK);
    let own = comment_created(
        "10100",
        (BOT_ACCOUNT, "Steward"),
        adf("Likely the DHCP lease; priority P2."),
    );
    assert_eq!(s.send(jira_request(&own)).await, StatusCode::OK);
    s.routed().await;
    assert_eq!(s.store.list_runs(10).await.unwrap().len(), 1);

    // A mention of the bot continues with the triage agent, the comments as context.
    let ask = comment_created("10201", ("acct-ana", "Ana Lee"), asking(" why P2 and not P1?"));
    jira.push(ask["comment"].clone());
    assert_eq!(s.send(jira_request(&ask)).await, StatusCode::OK);
    let runs = s.runs(2).await;
    assert_eq!(runs[0].agent, "triage");
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    let second = chat_turns(&fake.requests()[1].body);
    assert!(
        second.contains(&(
            "assistant".to_string(),
            "Likely the DHCP lease; priority P2.".to_string()
        )),
        "{second:?}"
    );
    assert!(
        second.contains(&("user".to_string(), "@Ana Lee: I see it too.".to_string())),
        "{second:?}"
    );
    let (_, request) = second.last().unwrap();
    assert!(request.contains("why P2 and not P1?"), "{request}");
    assert!(
        !fake.requests()[1].body.to_string().contains("customer owes"),
        "an internal note stays out of a public run"
    );
    // The answer is a comment on the same issue.
    let all = jira.all();
    let last = all.last().unwrap();
    assert_eq!(last["author"]["accountId"], BOT_ACCOUNT);
    assert!(
        last["body"]
            .to_string()
            .contains("Because it affects one office only.")
    );
    s.service.stop(Duration::from_secs(5)).await;
}

/// A comment shown only to a role, or a service desk's internal note, is restricted
/// text: held as private (not at rest in plaintext), and steward's answer carries the
/// same restriction, so a customer never reads an answer to an internal note.
#[tokio::test]
async fn an_answer_to_restricted_jira_text_is_restricted_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let jira = Comments::default();
    let jira_url = fake_jira(jira.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Triage: P2.")));
    fake.push(Reply::ok(openai_text("For developers only.")));
    fake.push(Reply::ok(openai_text("An internal note.")));
    let s = start(dir.path(), &fake, &jira_url, "http://127.0.0.1:9").await;
    issue_created(&s).await;
    let mut restricted = comment_created(
        "10300",
        ("acct-ana", "Ana Lee"),
        asking(" cause is rotation-bug-4471?"),
    );
    restricted["comment"]["visibility"] =
        json!({"type": "role", "value": "Developers", "identifier": "Developers"});
    jira.push(restricted["comment"].clone());
    assert_eq!(s.send(jira_request(&restricted)).await, StatusCode::OK);
    s.runs(2).await;
    let answer = jira.all().last().unwrap().clone();
    assert!(
        answer["body"].to_string().contains("For developers only."),
        "{answer}"
    );
    assert_eq!(
        answer["visibility"],
        json!({"type": "role", "value": "Developers"})
    );
    assert!(answer["properties"].is_null(), "{answer}");

    let mut note = comment_created("10301", ("acct-ana", "Ana Lee"), asking(" agent-only detail"));
    note["comment"]["jsdPublic"] = json!(false);
    jira.push(note["comment"].clone());
    assert_eq!(s.send(jira_request(&note)).await, StatusCode::OK);
    s.runs(3).await;
    let answer = jira.all().last().unwrap().clone();
    assert!(
        answer["body"].to_string().contains("An internal note."),
        "{answer}"
    );
    assert_eq!(
        answer["properties"],
        json!([{"key": "sd.public.comment", "value": {"internal": true}}])
    );
    assert!(answer["visibility"].is_null(), "{answer}");
    let at_rest = ["steward.db", "steward.db-wal"].iter().any(|name| {
        std::fs::read(dir.path().join(name))
            .is_ok_and(|bytes| bytes.windows(14).any(|w| w == b"rotation-bug-4"))
    });
    assert!(!at_rest, "restricted text is not at rest in plaintext");
    s.service.stop(Duration::from_secs(5)).await;
}

/// An internal note that arrives while a public comment's run is working is not handed
/// to that run (whose answer the customer reads): it starts a run of its own, answered
/// internally.
#[tokio::test]
async fn an_internal_note_is_never_handed_to_a_public_comments_run() {
    let dir = tempfile::tempdir().unwrap();
    let jira = Comments::default();
    let jira_url = fake_jira(jira.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Triage: P2.")));
    fake.push(Reply::ok(openai_text("Public answer.")).delay(Duration::from_millis(800)));
    fake.push(Reply::ok(openai_text("Internal answer.")));
    let s = start(dir.path(), &fake, &jira_url, "http://127.0.0.1:9").await;
    issue_created(&s).await;
    let public = comment_created("10400", ("acct-cus", "Customer"), asking(" is it fixed yet?"));
    jira.push(public["comment"].clone());
    assert_eq!(s.send(jira_request(&public)).await, StatusCode::OK);
    for _ in 0..300 {
        if fake.requests().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fake.requests().len(), 2, "the public comment's run is working");
    let mut note = comment_created(
        "10401",
        ("acct-ana", "Ana Lee"),
        asking(" customer is on the fraud list"),
    );
    note["comment"]["jsdPublic"] = json!(false);
    jira.push(note["comment"].clone());
    assert_eq!(s.send(jira_request(&note)).await, StatusCode::OK);
    let runs = s.runs(3).await;
    assert_eq!(runs.len(), 3, "the note started a run of its own");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !requests[1].body.to_string().contains("fraud list"),
        "the public run never read the note"
    );
    assert!(requests[2].body.to_string().contains("fraud list"));
    let answers: Vec<Value> = jira
        .all()
        .into_iter()
        .filter(|c| c["body"].to_string().contains("answer."))
        .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    let public_answer = answers
        .iter()
        .find(|c| c["body"].to_string().contains("Public answer."))
        .unwrap();
    assert!(public_answer["properties"].is_null(), "{public_answer}");
    let internal_answer = answers
        .iter()
        .find(|c| c["body"].to_string().contains("Internal answer."))
        .unwrap();
    assert_eq!(
        internal_answer["properties"],
        json!([{"key": "sd.public.comment", "value": {"internal": true}}])
    );
    s.service.stop(Duration::from_secs(5)).await;
}

/// A rule on comments and updates answers people, never its own answer: a comment or
/// an issue change by the account steward acts as, and a Notion event the integration
/// wrote, start nothing (else each answer would start the next, without end).
#[tokio::test]
async fn steward_never_answers_its_own_comments_and_changes() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "agents/watcher.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - jira: {events: [comment_created, 'jira:issue_updated']}\n",
    );
    let jira = Comments::default();
    let jira_url = fake_jira(jira.clone()).await;
    let notion = Comments::default();
    let notion_url = fake_notion(notion.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Noted.")));
    let s = start(dir.path(), &fake, &jira_url, &notion_url).await;

    // A person's comment is answered with a comment.
    let chatter = comment_created("10200", ("acct-ana", "Ana Lee"), adf("I see it too."));
    assert_eq!(s.send(jira_request(&chatter)).await, StatusCode::OK);
    let runs = s.runs(1).await;
    assert_eq!(runs[0].agent, "watcher");
    let answer = jira.all().last().unwrap().clone();
    assert_eq!(answer["author"]["accountId"], BOT_ACCOUNT);
    // Jira's event for that answer, an issue change made by steward, and a page
    // steward's integration created: none starts a run.
    let own = comment_created("10300", (BOT_ACCOUNT, "Steward"), answer["body"].clone());
    let changed = json!({"timestamp": chrono::Utc::now().timestamp_millis(), "webhookEvent": "jira:issue_updated",
                         "user": {"accountId": BOT_ACCOUNT, "displayName": "Steward"}, "issue": issue(),
                         "changelog": {"items": [{"field": "priority", "fromString": "P3", "toString": "P2"}]}});
    let page = json!({"id": "evt-own", "timestamp": stamp(), "workspace_id": "ws", "type": "page.created",
                      "authors": [{"id": BOT_USER, "type": "bot"}],
                      "entity": {"id": "59833787-2cf9-4fdf-8782-e53db20768a5", "type": "page"},
                      "data": {"parent": {"id": "13950b26-c203-4f3b-b97d-93ec06319565", "type": "space"}}});
    assert_eq!(s.send(jira_request(&own)).await, StatusCode::OK);
    assert_eq!(s.send(jira_request(&changed)).await, StatusCode::OK);
    assert_eq!(s.send(notion_request(&page)).await, StatusCode::OK);
    s.routed().await;
    assert_eq!(s.store.list_runs(10).await.unwrap().len(), 1);
    let ignored = s.ignored().await;
    assert_eq!(ignored.len(), 3, "{ignored:?}");
    assert!(
        ignored
            .iter()
            .all(|e| e.detail.to_string().contains("steward's own comment or change")),
        "{ignored:?}"
    );
    s.service.stop(Duration::from_secs(5)).await;
}

/// When Jira will not say which account steward is, a comment cannot be told from
/// steward's own. While Jira is down or rate limiting, the event waits (left claimed,
/// routed again after a lease) rather than being lost; once Jira refuses for good (here
/// a 401), it starts nothing, and its outcome says why, rather than risk answering
/// steward's own answers without end.
#[tokio::test]
async fn a_comment_steward_cannot_place_starts_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "agents/watcher.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [current_time]\ntriggers:\n  - jira: {events: [comment_created]}\n",
    );
    let refusing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let now_refusing = refusing.clone();
    let jira = Router::new().route(
        "/rest/api/3/myself",
        get(move || {
            let refusing = now_refusing.load(std::sync::atomic::Ordering::SeqCst);
            async move {
                if refusing {
                    (StatusCode::UNAUTHORIZED, Json(json!({"errorMessages": ["Client must be authenticated to access this resource."]})))
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"errorMessages": ["Service unavailable"]})))
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jira_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, jira).await.unwrap() });
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("Noted.")));
    let s = start(dir.path(), &fake, &jira_url, "http://127.0.0.1:9").await;
    let chatter = comment_created("10200", ("acct-ana", "Ana Lee"), adf("I see it too."));
    assert_eq!(s.send(jira_request(&chatter)).await, StatusCode::OK);
    // Jira answers 503: the event waits, neither run nor ignored (past the 2 s for
    // which the failed lookup answers for the next ones).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(s.ignored().await.is_empty());
    assert!(s.store.list_runs(10).await.unwrap().is_empty());
    // Jira now refuses for good; the lease has run out (as if an hour went by).
    refusing.store(true, std::sync::atomic::Ordering::SeqCst);
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    assert_eq!(s.store.requeue_orphan_events(later).await.unwrap(), 1);
    s.routed().await;
    assert!(s.store.list_runs(10).await.unwrap().is_empty());
    let ignored = s.ignored().await;
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    let reason = ignored[0].detail["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("cannot tell whether this is steward's own comment or change (jira"),
        "{reason}"
    );
    s.service.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_notion_comment_mentioning_the_integration_continues_its_discussion() {
    let dir = tempfile::tempdir().unwrap();
    let notion = Comments::default();
    let notion_url = fake_notion(notion.clone()).await;
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("The page needs an owner.")));
    fake.push(Reply::ok(openai_text("Pick whoever wrote the first draft.")));
    let s = start(dir.path(), &fake, "http://127.0.0.1:9", &notion_url).await;
    let page = "59833787-2cf9-4fdf-8782-e53db20768a5";

    let created = json!({"id": "evt-1", "timestamp": stamp(), "workspace_id": "ws", "type": "page.created",
                         "authors": [{"id": PERSON, "type": "person"}], "entity": {"id": page, "type": "page"},
                         "data": {"parent": {"id": "13950b26-c203-4f3b-b97d-93ec06319565", "type": "space"}}});
    assert_eq!(s.send(notion_request(&created)).await, StatusCode::OK);
    s.runs(1).await;
    let first = notion.all();
    assert_eq!(first.len(), 1, "the answer is a page comment");
    let discussion = first[0]["discussion_id"].as_str().unwrap().to_string();

    // A reply in that discussion that mentions the integration.
    let mention = json!([
        {"type": "mention", "mention": {"type": "user", "user": {"object": "user", "id": BOT_USER}}, "plain_text": "@Steward", "annotations": {}},
        {"type": "text", "text": {"content": " who should that be?"}, "plain_text": " who should that be?", "annotations": {}}]);
    notion.push(notion_comment("c-2", &discussion, PERSON, mention));
    let event = json!({"id": "evt-2", "timestamp": stamp(), "workspace_id": "ws", "type": "comment.created",
                       "authors": [{"id": PERSON, "type": "person"}], "entity": {"id": "c-2", "type": "comment"},
                       "data": {"page_id": page, "parent": {"id": page, "type": "page"}}});
    assert_eq!(s.send(notion_request(&event)).await, StatusCode::OK);
    let runs = s.runs(2).await;
    assert_eq!(runs[0].agent, "pages");
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    let second = chat_turns(&fake.requests()[1].body);
    assert!(
        second.contains(&("assistant".to_string(), "The page needs an owner.".to_string())),
        "{second:?}"
    );
    let (_, request) = second.last().unwrap();
    assert!(request.contains("@Steward who should that be?"), "{request}");
    // Answered in the same discussion.
    let all = notion.all();
    let answer = all.last().unwrap();
    assert_eq!(answer["discussion_id"], discussion.as_str());
    assert!(
        answer["rich_text"][0]["plain_text"]
            .as_str()
            .unwrap()
            .contains("first draft")
    );

    // A comment without a mention starts nothing.
    notion.push(notion_comment("c-4", &discussion, PERSON, plain("thanks")));
    let event = json!({"id": "evt-3", "timestamp": stamp(), "workspace_id": "ws", "type": "comment.created",
                       "authors": [{"id": PERSON, "type": "person"}], "entity": {"id": "c-4", "type": "comment"},
                       "data": {"page_id": page, "parent": {"id": page, "type": "page"}}});
    assert_eq!(s.send(notion_request(&event)).await, StatusCode::OK);
    s.routed().await;
    assert_eq!(s.store.list_runs(10).await.unwrap().len(), 2);
    s.service.stop(Duration::from_secs(5)).await;
}

/// Now, as Notion stamps its events: a signed event older than the replay window is
/// refused.
fn stamp() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
