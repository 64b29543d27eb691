//! The `steward` binary: exit codes, one-line errors, `run`, `runs`, `validate`, `serve`.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::*;

/// The binary with no provider settings and quiet logs; callers add the rest.
fn bare_steward() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_steward"));
    cmd.env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env("RUST_LOG", "error");
    cmd
}

fn steward(root: &Path, db: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = bare_steward();
    cmd.args(args)
        .env("STEWARD_ROOT", root)
        .env("DATABASE_URL", format!("sqlite://{}", db.display()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

async fn steward_async(root: &Path, db: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let (root, db) = (root.to_path_buf(), db.to_path_buf());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        steward(&root, &db, &args, &env)
    })
    .await
    .unwrap()
}

/// Writes `text` to `root/rel`, making its folders.
fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A failing command prints one line (no panic, no backtrace) and exits 1.
fn assert_one_line_failure(o: &Output, needle: &str) {
    assert_eq!(o.status.code(), Some(1), "stderr: {}", stderr(o));
    let err = stderr(o);
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
}

#[test]
fn validate_and_serve_refuse_a_root_without_agents() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let missing = dir.path().join("no/such/dir");
    let o = steward(&missing, &db, &["validate"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no/such/dir: no such directory; pass --root or set STEWARD_ROOT"),
        "{}",
        stderr(&o)
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = steward(&empty, &db, &["validate"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("empty: no agents (expected YAML files in"),
        "{}",
        stderr(&o)
    );
    let o = steward(&empty, &db, &["serve", "--addr", "127.0.0.1:0"], &[]);
    assert_one_line_failure(&o, "no agents (expected YAML files in");
}

#[test]
fn validate_accepts_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let o = steward(repo(), &dir.path().join("db"), &["validate"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("ok: "), "{}", stdout(&o));
}

#[test]
fn validate_prints_every_problem_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("agents")).unwrap();
    std::fs::write(
        root.join("agents/a.yaml"),
        "model: openai/gpt-4.1\nprompt: prompts/none.md\n",
    )
    .unwrap();
    std::fs::write(root.join("agents/b.yaml"), "model: openai/gpt-4.1\ntool: x\n").unwrap();
    std::fs::write(root.join("agents/c.yaml"), "model: [\n").unwrap();
    let o = steward(root, &root.join("db"), &["validate"], &[]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("agents/a.yaml:2:1: cannot read prompt file 'prompts/none.md'"),
        "{err}"
    );
    assert!(
        err.contains("agents/b.yaml:2:1: unknown key 'tool'; did you mean 'tools'?"),
        "{err}"
    );
    assert!(err.contains("agents/c.yaml:"), "{err}");
    assert!(err.contains("3 problems found"), "{err}");

    // Three mistakes in one file are reported in one round, in plain words.
    std::fs::write(
        root.join("agents/b.yaml"),
        "model: openai/gpt-4.1\ntoolz: [current_time]\nlimits: { max_turns: lots }\ndescripton: x\n",
    )
    .unwrap();
    let o = steward(root, &root.join("db"), &["validate"], &[]);
    let err = stderr(&o);
    for want in [
        "agents/b.yaml:2:1: unknown key 'toolz'; did you mean 'tools'?",
        "agents/b.yaml:3:22: invalid type: string \"lots\", expected a whole number for 'limits.max_turns'",
        "agents/b.yaml:4:1: unknown key 'descripton'; did you mean 'description'?",
    ] {
        assert!(err.contains(want), "expected `{want}` in: {err}");
    }
    assert!(!err.contains("u32") && !err.contains("struct "), "{err}");
    assert!(err.contains("5 problems found"), "{err}");
}

#[test]
fn bad_input_gives_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let not_json = dir.path().join("event.txt");
    std::fs::write(&not_json, "hello there").unwrap();
    let ev = not_json.to_str().unwrap();

    let o = steward(repo(), &db, &["run", "page-summarizer", "--event", ev], &[]);
    assert_one_line_failure(&o, "is not valid JSON: expected value at line 1 column 1");

    let o = steward(repo(), &db, &["run", "nobody", "--event", ev], &[]);
    assert_one_line_failure(
        &o,
        "unknown agent 'nobody', expected one of: doc-review, helpdesk, jira-from-thread, page-summarizer, pr-merged",
    );

    let o = steward(
        repo(),
        &db,
        &["run", "page-summarizer", "--event", "/does/not/exist.json"],
        &[],
    );
    assert_one_line_failure(&o, "cannot read event file /does/not/exist.json");
}

#[test]
fn missing_api_key_fails_the_run_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let ev = dir.path().join("e.json");
    std::fs::write(&ev, r#"{"text": "summarize https://example.com"}"#).unwrap();
    // With the default log level (no RUST_LOG): the error alone, no log lines first.
    let o = bare_steward()
        .args(["run", "page-summarizer", "--event", ev.to_str().unwrap()])
        .env("STEWARD_ROOT", repo())
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_one_line_failure(
        &o,
        "cannot use model openai/gpt-6-luna: OPENAI_API_KEY is not set",
    );
    // The failed run was recorded.
    let o = steward(repo(), &db, &["runs", "list", "--json"], &[]);
    let runs: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(runs[0]["status"], "failed");
    assert_eq!(runs[0]["termination"], "provider_error");
}

/// A model endpoint's redirect is not followed (reqwest would carry a custom key
/// header such as Anthropic's `x-api-key` to the host it names): the run fails as a
/// provider error and the other host hears nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_model_endpoints_redirect_is_not_followed() {
    let heard = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = heard.clone();
    let elsewhere = serve(axum::Router::new().fallback(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { "{}" }
    }))
    .await;
    let redirector = serve(axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let to = format!("{elsewhere}{uri}");
        async move { axum::response::Redirect::temporary(&to) }
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let ev = dir.path().join("e.json");
    std::fs::write(&ev, r#"{"text": "summarize https://example.com"}"#).unwrap();
    let base = format!("{redirector}/v1");
    let env = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];
    let o = steward_async(
        repo(),
        &db,
        &["run", "page-summarizer", "--event", ev.to_str().unwrap()],
        &env,
    )
    .await;
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(heard.load(std::sync::atomic::Ordering::SeqCst), 0);
    let o = steward(repo(), &db, &["runs", "list", "--json"], &[]);
    let runs: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(runs[0]["termination"], "provider_error");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_with_mock_tools_prints_the_answer_and_the_record() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[
        ("call_1", "http_fetch", "{\"url\": \"https://example.com/post\"}"),
        ("call_2", "current_time", "{}"),
    ])));
    fake.push(Reply::ok(openai_text(
        "Example page: nothing much. Read on 2026-01-05 from https://example.com/post",
    )));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("data/steward.db");
    let ev = dir.path().join("e.json");
    std::fs::write(&ev, r#"{"text": "summarize https://example.com/post"}"#).unwrap();
    let base = format!("{}/v1", fake.url);
    let env = [("OPENAI_BASE_URL", base.as_str()), ("OPENAI_API_KEY", "sk-test")];

    let o = steward_async(
        repo(),
        &db,
        &[
            "run",
            "page-summarizer",
            "--event",
            ev.to_str().unwrap(),
            "--mock-tools",
        ],
        &env,
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).trim(),
        "Example page: nothing much. Read on 2026-01-05 from https://example.com/post"
    );
    // The mock http_fetch answered; no real network was touched.
    let second = &fake.requests()[1].body["messages"];
    assert!(
        second[3]["content"]
            .as_str()
            .unwrap()
            .contains("Mock content served for https://example.com/post")
    );
    assert_eq!(second[4]["content"], "2026-01-05T17:00:00+00:00 (Monday, UTC)");

    fake.push(Reply::ok(openai_tools(&[(
        "call_9",
        "current_time",
        "{\"timezone\": \"Asia/Tokyo\"}",
    )])));
    fake.push(Reply::ok(openai_text("done")));
    let o = steward_async(
        repo(),
        &db,
        &[
            "run",
            "page-summarizer",
            "--event",
            ev.to_str().unwrap(),
            "--mock-tools",
            "--json",
        ],
        &env,
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let record: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(record["status"], "succeeded");
    assert_eq!(record["termination"], "completed");
    assert_eq!(record["final_text"], "done");
    assert_eq!(record["usage"]["input_tokens"], 2200);
    assert_eq!(record["tool_calls_detail"][0]["name"], "current_time");
    assert_eq!(
        record["tool_calls_detail"][0]["arguments"],
        json!({"timezone": "Asia/Tokyo"})
    );
    assert_eq!(
        record["tool_calls_detail"][0]["result_bytes"],
        "2026-01-06T02:00:00+09:00 (Tuesday, Asia/Tokyo)".len()
    );
    assert!(record["tool_calls_detail"][0]["duration_ms"].is_u64());
    let id = record["id"].as_str().unwrap().to_string();

    let o = steward_async(repo(), &db, &["runs", "list"], &[]).await;
    assert_eq!(stdout(&o).lines().count(), 3, "{}", stdout(&o));
    assert!(stdout(&o).contains(&id));
    let o = steward_async(repo(), &db, &["runs", "show", &id], &[]).await;
    let text = stdout(&o);
    assert!(
        text.contains("termination: completed")
            && text.contains("tool_call")
            && text.contains("final answer:\ndone"),
        "{text}"
    );
    let o = steward_async(repo(), &db, &["runs", "show", "no-such-run"], &[]).await;
    assert_one_line_failure(&o, "no run with id no-such-run");
    // Any unique prefix names a run, as git does; a shared one lists the candidates.
    let o = steward_async(repo(), &db, &["runs", "show", &id[..id.len() - 4]], &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with(&format!("run {id} ")), "{}", stdout(&o));
    // UUIDv7 ids start with the time: two runs made seconds apart share their first
    // 4 digits (which change every 49 days).
    let o = steward_async(repo(), &db, &["runs", "show", &id[..4]], &[]).await;
    assert_one_line_failure(&o, &format!("run id prefix {} is ambiguous: ", &id[..4]));
    assert!(stderr(&o).contains(&id), "{}", stderr(&o));
}

#[test]
fn serve_answers_healthz_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_local_addr();
    let mut child = Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &addr])
        .env("STEWARD_ROOT", repo())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("fresh/steward.db").display()),
        )
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    let mut body = String::new();
    for _ in 0..100 {
        if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
            use std::io::{Read, Write};
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            s.read_to_string(&mut body).unwrap();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("\"status\":\"ok\""), "{body}");
    assert!(
        dir.path().join("fresh/steward.db").exists(),
        "the database is created on first start"
    );
    signal(&child, "-TERM");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// One HTTP/1.1 GET; the whole response, or an empty string when nothing listens.
fn get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut body = String::new();
    if s.write_all(request.as_bytes()).is_ok() {
        let _ = s.read_to_string(&mut body);
    }
    body
}

#[test]
fn readiness_turns_false_on_sigterm_before_the_server_stops() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_local_addr();
    let mut child = Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &addr, "--drain", "3s"])
        .env("STEWARD_ROOT", repo())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.path().join("s.db").display()),
        )
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    let mut ready = String::new();
    for _ in 0..100 {
        ready = get(&addr, "/readyz");
        if !ready.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        ready.starts_with("HTTP/1.1 200") && ready.contains("\"status\":\"ready\""),
        "{ready}"
    );
    signal(&child, "-TERM");
    // Still serving, but no longer ready; liveness is unchanged.
    let mut draining = String::new();
    for _ in 0..40 {
        draining = get(&addr, "/readyz");
        if draining.starts_with("HTTP/1.1 503") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(draining.contains("\"status\":\"draining\""), "{draining}");
    assert!(get(&addr, "/healthz").starts_with("HTTP/1.1 200"));
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(get(&addr, "/readyz"), "", "stopped after the drain");
}

/// `steward serve` (with `args`) with one agent whose model takes 60 s to answer, and
/// one run of it started: the model, the config root, the store and the process.
async fn serving_a_slow_run(
    args: &[&str],
) -> (
    FakeModel,
    tempfile::TempDir,
    std::path::PathBuf,
    std::process::Child,
) {
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("too late")).delay(std::time::Duration::from_secs(60)));
    let (root, db, addr, child) = serving_the_slow_agent(&fake, args);
    let status = post_hook_when_up(
        &addr,
        "slow",
        "slow-token-0123456789",
        "{\"text\": \"take your time\"}",
    )
    .await;
    assert_eq!(status, 200);
    (fake, root, db, child)
}

/// `steward serve` (with `args`) over a tree whose agent `slow` runs on the webhook
/// `slow` (token `slow-token-0123456789`) against `fake`; returns the tree, its database, the
/// address and the process.
fn serving_the_slow_agent(
    fake: &FakeModel,
    args: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, String, std::process::Child) {
    let root = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| put(root.path(), rel, text);
    write("prompts/slow.md", "You answer slowly.");
    write(
        "agents/slow.yaml",
        "description: Slow.\nmodel: openai/gpt-4.1\nprompt: prompts/slow.md\ntriggers:\n  - webhook: { name: slow }\noutput: { reply: false }\n",
    );
    let db = root.path().join("steward.db");
    let (addr, child) = serve_slow(root.path(), &db, fake, args);
    (root, db, addr, child)
}

/// `steward serve` (with `args`) over the slow agent's tree at `root` and database `db`.
fn serve_slow(root: &Path, db: &Path, fake: &FakeModel, args: &[&str]) -> (String, std::process::Child) {
    let addr = free_local_addr();
    let base = format!("{}/v1", fake.url);
    let child = Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["serve", "--addr", &addr])
        .args(args)
        .env("STEWARD_ROOT", root)
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("OPENAI_BASE_URL", &base)
        .env("OPENAI_API_KEY", "sk-test")
        .env("STEWARD_HOOK_SLOW_TOKEN", "slow-token-0123456789")
        .env("RUST_LOG", "error")
        .spawn()
        .unwrap();
    (addr, child)
}

/// Sends `signal` (`-INT`, `-TERM`) to `child`.
fn signal(child: &std::process::Child, signal: &str) {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args([signal, &pid])
            .status()
            .unwrap()
            .success()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signal_during_the_drain_starts_no_queued_run() {
    let fake = FakeModel::start().await;
    // The first run's answer comes during the drain, freeing the only slot.
    fake.push(Reply::ok(openai_text("first")).delay(std::time::Duration::from_secs(3)));
    fake.always(Reply::ok(openai_text("second")));
    let (root, db, addr, mut child) =
        serving_the_slow_agent(&fake, &["--drain", "6s", "--grace", "30s", "--concurrency", "1"]);
    let body = |n: u32| format!("{{\"text\": \"request {n}\"}}");
    assert_eq!(
        post_hook_when_up(&addr, "slow", "slow-token-0123456789", &body(1)).await,
        200
    );
    for _ in 0..200 {
        if !fake.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(
        post_hook_when_up(&addr, "slow", "slow-token-0123456789", &body(2)).await,
        200
    );
    // Both runs exist: the first calling the model, the second queued for the slot.
    let runs = || {
        let o = steward(root.path(), &db, &["runs", "list", "--json"], &[]);
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    for _ in 0..200 {
        if runs().as_array().is_some_and(|r| r.len() == 2) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    signal(&child, "-INT");
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    // The first finished within the drain; the slot it freed started nothing.
    assert_eq!(fake.requests().len(), 1, "only the first run called the model");
    let runs = runs();
    let statuses: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.len(), 2, "{runs}");
    assert!(
        statuses.contains(&"succeeded") && statuses.contains(&"queued"),
        "{runs}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_signal_during_the_drain_interrupts_at_once() {
    // A 30 s drain and a 60 s grace: only the second signal can end this early.
    a_second_signal_interrupts(&["--drain", "30s", "--grace", "60s"], "-TERM").await;
}

/// `steward serve` with `args` and a run waiting on a model that takes 60 s: after the
/// `first` signal it keeps going; a second (SIGINT) ends it within seconds, the run
/// (which made no side effect) left `running` for the next start.
async fn a_second_signal_interrupts(args: &[&str], first: &str) {
    let (fake, root, db, mut child) = serving_a_slow_run(args).await;
    for _ in 0..200 {
        if !fake.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    signal(&child, first);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "still draining or in its grace period"
    );
    let signalled = std::time::Instant::now();
    signal(&child, "-INT");
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    let took = signalled.elapsed();
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    // Interrupted runs record it and the process ends (0 once all is written, 130 if
    // that takes longer than INTERRUPT_WAIT).
    assert!(matches!(status.code(), Some(0) | Some(130)), "{status:?}");
    let o = steward(root.path(), &db, &["runs", "list", "--json"], &[]);
    let runs: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(runs[0]["status"], "running", "{runs}");
}

/// SIGTERM with a run that outlasts the grace period and has made no side effect: the
/// run is left `running` with its lease released, and the next start runs it again (the
/// same run, from the beginning) rather than asking the person to ask again.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_leaves_a_run_without_side_effects_to_the_next_start() {
    // The model takes 60 s to answer; the service gets SIGTERM with --grace 1s.
    let (fake, root, db, mut child) = serving_a_slow_run(&["--grace", "1s"]).await;
    // The run is waiting on the model.
    for _ in 0..200 {
        if !fake.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(fake.requests().len(), 1);
    let signalled = std::time::Instant::now();
    signal(&child, "-TERM");
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    let took = signalled.elapsed();
    assert_eq!(status.code(), Some(0));
    // Grace (1 s) plus the time to record the interruption; far less than the model's 60 s.
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");

    let runs = || {
        let o = steward(root.path(), &db, &["runs", "list", "--json"], &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let left = runs();
    assert_eq!(left[0]["agent"], "slow");
    assert_eq!(left[0]["status"], "running", "{left}");

    // The next start takes it at once (its lease was released) and runs it again.
    fake.always(Reply::ok(openai_text("done now")));
    let (_addr, mut again) = serve_slow(root.path(), &db, &fake, &[]);
    let mut now = runs();
    for _ in 0..200 {
        if now[0]["status"] == "succeeded" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        now = runs();
    }
    again.kill().unwrap();
    let _ = again.wait();
    assert_eq!(now.as_array().map(Vec::len), Some(1), "{now}");
    assert_eq!(now[0]["id"], left[0]["id"], "{now}");
    assert_eq!(now[0]["status"], "succeeded", "{now}");
    assert_eq!(fake.requests().len(), 2, "asked again from the beginning");
}

#[test]
fn a_dotenv_file_in_the_working_directory_is_read_and_the_environment_wins() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    std::fs::write(
        dir.path().join(".env"),
        format!(
            "# comments and blank lines are fine\n\nSTEWARD_ROOT={}\nDATABASE_URL=sqlite://{}\n",
            repo().display(),
            db.display()
        ),
    )
    .unwrap();
    let validate = |extra: &[(&str, &str)]| {
        let mut cmd = bare_steward();
        cmd.arg("validate")
            .current_dir(dir.path())
            .env_remove("STEWARD_ROOT")
            .env_remove("DATABASE_URL");
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    // The root comes from .env.
    let o = validate(&[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&repo().display().to_string()),
        "{}",
        stdout(&o)
    );
    // A variable set in the environment overrides the file.
    let empty = tempfile::tempdir().unwrap();
    let o = validate(&[("STEWARD_ROOT", empty.path().to_str().unwrap())]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no agents"), "{}", stderr(&o));
    // A malformed file is a one-line error, not a silent skip.
    std::fs::write(dir.path().join(".env"), "STEWARD_ROOT='unclosed\n").unwrap();
    let o = validate(&[]);
    assert_one_line_failure(&o, "cannot read .env: ");
}

#[test]
fn serve_refuses_a_concurrency_of_zero() {
    let dir = tempfile::tempdir().unwrap();
    for flag in ["--concurrency", "--agent-concurrency"] {
        let o = steward(repo(), &dir.path().join("db"), &["serve", flag, "0"], &[]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    }
}

#[tokio::test]
async fn a_database_from_a_newer_steward_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    // A store this steward made (read-only commands do not make one)...
    drop(steward::store::SqliteStore::open(&db).await.unwrap());
    // ...and a later steward applied a migration this one does not have.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, execution_time) \
         VALUES (9999, 'from the future', '2027-01-01', 1, x'00', 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let o = steward_async(repo(), &db, &["runs", "list"], &[]).await;
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("schema version 9999, newer than this steward knows")
            && err.contains("run that version"),
        "{err}"
    );
}

/// `steward reseal` binds a queued private event sealed the old way (no associated
/// data) to its row, once; without the key it says what it needs.
#[tokio::test]
async fn reseal_binds_values_sealed_before_binding_once() {
    use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
    use steward::store::{EventQueue, EventRow, SqliteStore};
    let key_text = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let store = SqliteStore::open(&db).await.unwrap();
    let bytes: Vec<u8> = (0u8..32).collect();
    let sealing = LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &bytes).unwrap());
    let mut data = b"{}".to_vec();
    sealing
        .seal_in_place_append_tag(Nonce::assume_unique_for_key([9; 12]), Aad::empty(), &mut data)
        .unwrap();
    let row = EventRow {
        id: "ev-1".into(),
        source: "slack".into(),
        kind: "message".into(),
        dedupe_key: "k1".into(),
        received_at: chrono::Utc::now(),
        private: true,
        body: serde_json::json!({}),
        sealed: Some([vec![9; 12], data].concat()),
        outcome: None,
    };
    store.insert_events(&[row]).await.unwrap();
    drop(store);
    let o = steward_async(repo(), &db, &["reseal"], &[("STEWARD_DATA_KEY", "")]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("needs STEWARD_DATA_KEY"), "{}", stderr(&o));
    for bound in ["bound 1 sealed values", "bound 0 sealed values"] {
        let o = steward_async(repo(), &db, &["reseal"], &[("STEWARD_DATA_KEY", key_text)]).await;
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).starts_with(bound),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    let store = SqliteStore::open(&db).await.unwrap();
    let sealed = store.get_event("ev-1").await.unwrap().unwrap().sealed.unwrap();
    let key = steward::types::seal::DataKey::parse(key_text).unwrap();
    assert_eq!(
        key.open_at(&steward::server::ingest::sealed_event_place("ev-1"), &sealed)
            .unwrap(),
        b"{}"
    );
}

/// `steward events list|show` read the event log: filters, the one-line reason, each
/// agent's reason on `show`, and clear errors for an unknown id or outcome.
#[tokio::test]
async fn events_list_and_show_read_the_event_log() {
    use steward::store::{EventQueue, EventRow, Route, SqliteStore};
    use steward::types::event_outcome::{EventOutcome, OutcomeKind};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let store = SqliteStore::open(&db).await.unwrap();
    let row = |id: &str, key: &str| EventRow {
        id: id.into(),
        source: "slack".into(),
        kind: "reaction_added".into(),
        dedupe_key: key.into(),
        received_at: chrono::Utc::now(),
        private: false,
        body: json!({"summary": "reaction :eyes: in C0GENERAL"}),
        sealed: None,
        outcome: None,
    };
    store.insert_events(&[row("ev-a", "slack:EvA")]).await.unwrap();
    store.insert_events(&[row("ev-b", "slack:EvA")]).await.unwrap();
    store.claim_events(10).await.unwrap();
    let no_agent = EventOutcome::new(
        OutcomeKind::NoAgent,
        json!({"agents": {"ticket": "slack_reaction: wrong reaction (eyes; listens for jira)"}}),
    );
    store
        .route_events(
            &[Route {
                event_id: "ev-a",
                runs: &[],
                outcome: Some(&no_agent),
            }],
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    drop(store);
    let o = steward_async(repo(), &db, &["events", "list"], &[]).await;
    let text = stdout(&o);
    assert!(
        text.contains("no_agent") && text.contains("wrong reaction"),
        "{text}"
    );
    assert!(
        text.contains("duplicate") && text.contains("retry of ev-a"),
        "{text}"
    );
    let o = steward_async(
        repo(),
        &db,
        &["events", "list", "--outcome", "no_agent", "--json"],
        &[],
    )
    .await;
    let listed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["id"], "ev-a");
    let o = steward_async(
        repo(),
        &db,
        &["events", "list", "--agent", "ticket", "--since", "1h"],
        &[],
    )
    .await;
    assert!(
        stdout(&o).contains("ev-a") && !stdout(&o).contains("ev-b"),
        "{}",
        stdout(&o)
    );
    let o = steward_async(repo(), &db, &["events", "show", "ev-a"], &[]).await;
    let text = stdout(&o);
    assert!(
        text.contains("outcome   no_agent") && text.contains("  ticket: slack_reaction: wrong reaction"),
        "{text}"
    );
    let o = steward_async(repo(), &db, &["events", "show", "nope"], &[]).await;
    assert_one_line_failure(&o, "no event with id nope");
    let o = steward_async(repo(), &db, &["events", "list", "--outcome", "vanished"], &[]).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("one of started, handed_to_run"),
        "{}",
        stderr(&o)
    );
}

#[tokio::test]
async fn triggers_test_asks_a_file_a_stored_event_and_the_last_deliveries() {
    use steward::store::{EventQueue, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, text: &str| put(root, rel, text);
    write("prompts/p.md", "Answer.");
    write(
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - slack_mention: {}\n",
    );
    write(
        "agents/links.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - slack_mention: { channels: [C0LINKS], when: 'text.contains(\"https://\")' }\n",
    );
    // Each its own message (a mention's dedupe key is its message).
    let delivery = |id: &str, channel: &str, text: &str| {
        let ts = format!("1700000000.00010{}", id.trim_start_matches("Ev"));
        json!({"token": "XXYYZZ", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
            "event_id": id, "event_time": 1700000000,
            "authorizations": [{"enterprise_id": null, "team_id": "T1", "user_id": "UBOT", "is_bot": true}],
            "event": {"type": "app_mention", "user": "U1", "text": text, "ts": ts,
                      "channel": channel, "event_ts": ts}})
    };
    let db = root.join("steward.db");
    let store = SqliteStore::open(&db).await.unwrap();
    let mut ids = Vec::new();
    for (id, channel, text) in [
        ("Ev1", "C0LINKS", "<@UBOT> is https://status.example.com down?"),
        ("Ev2", "C0LINKS", "<@UBOT> who is on call?"),
        ("Ev3", "C0GENERAL", "<@UBOT> vpn?"),
    ] {
        let steward::triggers::slack::SlackPayload::Event { event, dedupe_key } =
            steward::triggers::slack::parse(&delivery(id, channel, text), Some("UBOT")).unwrap()
        else {
            panic!("not an event")
        };
        let row = steward::server::ingest::event_row(&event, &dedupe_key);
        ids.push(row.id.clone());
        store.insert_events(&[row]).await.unwrap();
    }
    drop(store);

    // A delivery file, as Slack sends it.
    let file = root.join("ev.json");
    std::fs::write(
        &file,
        delivery("Ev9", "C0LINKS", "<@UBOT> see https://x.example").to_string(),
    )
    .unwrap();
    let o = steward_async(
        root,
        &db,
        &["triggers", "test", "links", "--event", file.to_str().unwrap()],
        &[],
    )
    .await;
    let text = stdout(&o);
    assert!(
        text.contains("1. matched") && text.contains("is true"),
        "{text}{}",
        stderr(&o)
    );
    assert!(text.contains("routing: would start links"), "{text}");
    let o = steward_async(
        root,
        &db,
        &["triggers", "test", "helpdesk", "--event", file.to_str().unwrap()],
        &[],
    )
    .await;
    assert!(
        stdout(&o).contains("helpdesk matched, but links takes the conversation"),
        "{}",
        stdout(&o)
    );

    // One stored delivery: the filter decided.
    let o = steward_async(
        root,
        &db,
        &["triggers", "test", "links", "--event-id", &ids[1]],
        &[],
    )
    .await;
    let text = stdout(&o);
    assert!(
        text.contains("no match") && text.contains("when: text.contains(\"https://\") is false"),
        "{text}{}",
        stderr(&o)
    );
    assert!(text.contains("routing: would start helpdesk"), "{text}");

    // The last deliveries, through the config as it is now.
    let o = steward_async(
        root,
        &db,
        &["triggers", "test", "links", "--last", "10", "--json"],
        &[],
    )
    .await;
    let v: Value =
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    assert_eq!(v["replayed"], 3, "{v}");
    assert_eq!(v["would_start"], 1, "{v}");
    assert_eq!(v["triggers"][0]["matched"], 1, "{v}");
    assert_eq!(v["triggers"][0]["filter_false"], 1, "{v}");
    let o = steward_async(root, &db, &["triggers", "test", "helpdesk", "--last", "10"], &[]).await;
    let text = stdout(&o);
    assert!(text.contains("helpdesk would have started for 2 of 3"), "{text}");
    assert!(
        text.contains("1 matched but went to links by precedence"),
        "{text}"
    );
    // Nothing to test against is a clear error.
    let o = steward_async(root, &db, &["triggers", "test", "links"], &[]).await;
    assert_one_line_failure(&o, "--event FILE, --event-id ID or --last N");
}

#[test]
fn read_only_commands_never_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo.db");
    for args in [
        &["runs", "list"][..],
        &["runs", "show", "0193"],
        &["stats"],
        &["events", "list"],
        &["events", "show", "x"],
        &["triggers", "test", "helpdesk", "--last", "10"],
        &["eval", "new", "--from-run", "0193"],
    ] {
        let o = steward(repo(), &missing, args, &[]);
        assert_one_line_failure(&o, "no run store at");
        assert!(
            stderr(&o).contains("typo.db") && stderr(&o).contains("DATABASE_URL"),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_signal_interrupts_at_once() {
    // The model takes 60 s; the grace is 60 s too: only the second SIGINT ends it early.
    a_second_signal_interrupts(&["--grace", "60s"], "-INT").await;
}

#[test]
fn an_event_with_a_misspelt_or_no_message_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let file = dir.path().join("event.json");
    std::fs::write(&file, r#"{"txt": "What time is it?"}"#).unwrap();
    let o = steward(
        repo(),
        &db,
        &["run", "helpdesk", "--event", file.to_str().unwrap()],
        &[],
    );
    assert_one_line_failure(&o, "its key 'txt' (did you mean 'text'?)");
    std::fs::write(&file, "{}").unwrap();
    let o = steward(
        repo(),
        &db,
        &["run", "helpdesk", "--event", file.to_str().unwrap()],
        &[],
    );
    assert_one_line_failure(&o, "the event is empty");
}

#[tokio::test]
async fn runs_list_filters_by_agent_status_trigger_and_since() {
    use steward::store::{NewRun, RunStatus, RunStore, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let store = SqliteStore::open(&db).await.unwrap();
    for (id, agent, source, done) in [
        ("r1", "helpdesk", "slack", true),
        ("r2", "helpdesk", "cron", false),
        ("r3", "doc-review", "notion", true),
    ] {
        store
            .create_run(&NewRun {
                id: id.into(),
                agent: agent.into(),
                trigger_summary: format!("summary of {id}"),
                source: source.into(),
                kind: "k".into(),
                ..NewRun::default()
            })
            .await
            .unwrap();
        if done {
            assert!(
                store
                    .transition(id, RunStatus::Queued, RunStatus::Running)
                    .await
                    .unwrap()
            );
        }
    }
    drop(store);
    let ids = |args: &[&str]| {
        let mut all = vec!["runs", "list", "--json"];
        all.extend_from_slice(args);
        let o = steward(repo(), &db, &all, &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let runs: Value = serde_json::from_slice(&o.stdout).unwrap();
        let mut ids: Vec<String> = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&[]), ["r1", "r2", "r3"]);
    assert_eq!(ids(&["--agent", "helpdesk"]), ["r1", "r2"]);
    assert_eq!(ids(&["--status", "running"]), ["r1", "r3"]);
    assert_eq!(ids(&["--trigger", "cron"]), ["r2"]);
    assert_eq!(ids(&["--agent", "helpdesk", "--status", "queued"]), ["r2"]);
    assert_eq!(ids(&["--since", "1h"]).len(), 3);
    let o = steward(repo(), &db, &["runs", "list", "--status", "done"], &[]);
    assert!(stderr(&o).contains("unknown status 'done'"), "{}", stderr(&o));
    let o = steward(repo(), &db, &["runs", "list", "--agent", "nobody"], &[]);
    assert_eq!(stdout(&o).trim(), "no runs match");
}

#[test]
fn an_eval_case_without_a_recording_says_so_once_and_live_needs_its_key_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, text: &str| put(root, rel, text);
    write("prompts/p.md", "Answer.");
    write(
        "agents/helpdesk.yaml",
        "model: openai/gpt-4.1\nprompt: prompts/p.md\ntriggers:\n  - slack_mention: {}\n",
    );
    write(
        "evals/helpdesk/hello.yaml",
        "description: says hello\ntrigger: { text: hello }\nexpect:\n  reply: { contains: [hi] }\n",
    );
    let db = root.join("steward.db");
    let o = steward(root, &db, &["eval", "--trials", "3"], &[]);
    let out = stdout(&o);
    assert!(
        out.contains("trials 1-3: error:") && out.contains("there is no such file"),
        "{out}"
    );
    assert_eq!(
        out.matches("no recorded model answer").count(),
        1,
        "told once: {out}"
    );
    assert!(!out.contains("cassette is empty"), "{out}");
    // Said in the cassette's words (not under the provider's "bad request"), and the
    // expectations a run that never started cannot meet are not listed after it.
    assert!(
        out.contains("error: case helpdesk/hello: no recorded model answer"),
        "{out}"
    );
    assert!(!out.contains("bad request") && !out.contains('✗'), "{out}");
    let o = steward(
        root,
        &db,
        &["eval", "--live", "--trials", "3"],
        &[("OPENAI_API_KEY", "")],
    );
    assert_one_line_failure(
        &o,
        "calling the real models needs OPENAI_API_KEY (for helpdesk/hello)",
    );
}

#[test]
fn the_start_up_summary_names_each_missing_setting_and_who_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |rel: &str, text: &str| put(root, rel, text);
    write("prompts/p.md", "Answer.");
    let agent = |triggers: &str, tools: &str| {
        format!("model: openai/gpt-4.1\nprompt: prompts/p.md\ntools: [{tools}]\ntriggers:\n{triggers}")
    };
    write(
        "agents/helpdesk.yaml",
        &(agent("  - slack_mention: {}\n", "current_time")
            + "skills:\n  scripts:\n    egress:\n      allow: [status.example.com]\n      secrets:\n        STATUS_KEY: {env: STEWARD_SECRET_STATUS, hosts: [status.example.com]}\n"),
    );
    write(
        "mcp/github.yaml",
        "url: https://api.githubcopilot.com/mcp/\nbearer_env: GITHUB_MCP_TOKEN\n",
    );
    write(
        "agents/jira-watch.yaml",
        &agent(
            "  - jira: { events: [\"jira:issue_created\"] }\n",
            "jira_get_issue",
        ),
    );
    write(
        "agents/docs.yaml",
        &agent("  - notion: { events: [page.created] }\n", "notion_read_page"),
    );
    write(
        "agents/intake.yaml",
        &agent(
            "  - webhook: { name: zapier-intake }\n",
            "github_pr_state, \"mcp:github\"",
        ),
    );
    let db = root.join("steward.db");
    let none = [
        ("OPENAI_API_KEY", ""),
        ("SLACK_BOT_TOKEN", ""),
        ("SLACK_SIGNING_SECRET", ""),
        ("SLACK_APP_TOKEN", ""),
        ("JIRA_WEBHOOK_SECRET", ""),
        ("JIRA_BASE_URL", ""),
        ("JIRA_API_TOKEN", ""),
        ("NOTION_WEBHOOK_TOKEN", ""),
        ("NOTION_TOKEN", ""),
        ("GITHUB_TOKEN", ""),
    ];
    let o = steward(root, &db, &["validate", "--env"], &none);
    assert_eq!(o.status.code(), Some(0), "warnings only: {}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "slack_mention: helpdesk",
        "webhook: intake",
        "MISSING OPENAI_API_KEY (OpenAI models; for docs, helpdesk, intake, jira-watch)",
        "MISSING SLACK_SIGNING_SECRET or SLACK_APP_TOKEN (receiving Slack events; for helpdesk)",
        "MISSING SLACK_BOT_TOKEN (replying in and reading Slack; for helpdesk)",
        "MISSING JIRA_WEBHOOK_SECRET (receiving Jira webhooks; for jira-watch)",
        "MISSING JIRA_BASE_URL, JIRA_EMAIL and JIRA_API_TOKEN (the Jira API; for jira-watch)",
        "MISSING NOTION_WEBHOOK_TOKEN",
        "MISSING NOTION_TOKEN (the Notion API; for docs)",
        "MISSING GITHUB_TOKEN (the GitHub API; for intake)",
        "MISSING STEWARD_HOOK_ZAPIER_INTAKE_TOKEN (its webhook's bearer token; for intake)",
        "MISSING STEWARD_SECRET_STATUS (a secret of its skill scripts; for helpdesk)",
        "MISSING STEWARD_SECRET_STATUS_HOSTS (the hosts that secret may go to; for helpdesk)",
        "MISSING GITHUB_MCP_TOKEN (an MCP server's token; for intake)",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
    let o = steward(root, &db, &["validate", "--env", "--strict"], &none);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // Set, it says so.
    let o = steward(
        root,
        &db,
        &["validate", "--env"],
        &[("OPENAI_API_KEY", "sk-test")],
    );
    assert!(stdout(&o).contains("set     OPENAI_API_KEY"), "{}", stdout(&o));
    // serve --strict refuses to start without them.
    let o = steward(root, &db, &["serve", "--addr", "127.0.0.1:0", "--strict"], &none);
    assert_one_line_failure(&o, "--strict: not set: ");
}

#[tokio::test]
async fn review_ranks_an_agents_problems_with_example_runs() {
    use steward::store::{NewRun, RunStatus, RunStore, Score, ScoreStore, SqliteStore};
    use steward::types::{Privacy, RunOutcome, Termination};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let store = SqliteStore::open(&db).await.unwrap();
    let score = |kind: &str, criterion: &str| Score {
        kind: kind.into(),
        criterion: criterion.into(),
        passed: Some(false),
        score: if kind == "human" { -1.0 } else { 0.2 },
        explanation: Some("no runbook link".into()),
        source: Some("U1".into()),
        cost_usd: 0.0,
        at: chrono::Utc::now(),
    };
    for n in 0..6 {
        let id = format!("r{n}");
        store
            .create_run(&NewRun {
                id: id.clone(),
                agent: "helpdesk".into(),
                trigger_summary: "q".into(),
                source: "slack".into(),
                kind: "app_mention".into(),
                ..NewRun::default()
            })
            .await
            .unwrap();
        store
            .transition(&id, RunStatus::Queued, RunStatus::Running)
            .await
            .unwrap();
        let termination = if n == 5 {
            Termination::MaxTurns
        } else {
            Termination::Completed
        };
        let outcome = RunOutcome {
            termination,
            tool_calls: 1,
            ..RunOutcome::new(&id)
        };
        store
            .finish_run(&id, RunStatus::Running, &outcome, Privacy::from_private(false))
            .await
            .unwrap();
        // Four runs: the judge says no link; three: a person's 👎; two: fetch failed.
        if n < 4 {
            store
                .add_score(&id, &score("judge", "The answer links the runbook."))
                .await
                .unwrap();
        }
        if n < 3 {
            store.add_score(&id, &score("human", "reaction")).await.unwrap();
        }
        let error = format!("http_fetch: 50{n} from https://wiki.example.com/page/{n}");
        let ok = n >= 2;
        store
            .append_event(&id, "tool_result", &json!({"name": "http_fetch", "ok": ok, "error": if ok { Value::Null } else { json!(error) }}))
            .await
            .unwrap();
    }
    drop(store);
    let o = steward(repo(), &db, &["review", "helpdesk", "--json"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"], 6);
    let problems = v["problems"].as_array().unwrap();
    let names: Vec<&str> = problems.iter().map(|p| p["problem"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "judge: The answer links the runbook.",
            "👎 from people",
            "tool http_fetch failed: http_fetch: # from https://wiki.example.com/page/#",
            "ended max_turns",
        ],
        "ranked by runs, the two fetch errors one class"
    );
    assert_eq!(problems[0]["runs"], 4);
    assert_eq!(problems[0]["examples"].as_array().unwrap().len(), 4);
    assert!((problems[1]["share"].as_f64().unwrap() - 0.5).abs() < 1e-9);
    assert!(problems[3]["fix_in"].as_str().unwrap().starts_with("limits"));
    let o = steward(repo(), &db, &["review", "helpdesk"], &[]);
    assert!(
        stdout(&o).contains("1. judge: The answer links the runbook.: 4 runs (67%)"),
        "{}",
        stdout(&o)
    );
}

#[tokio::test]
async fn steward_mcp_serves_agents_runs_events_and_reviews_over_stdio() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    use steward::store::{NewRun, RunStatus, RunStore, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    let store = SqliteStore::open(&db).await.unwrap();
    store
        .create_run(&NewRun {
            id: "0193abcd-run".into(),
            agent: "helpdesk".into(),
            trigger_summary: "how do I reset my VPN?".into(),
            source: "slack".into(),
            kind: "app_mention".into(),
            ..NewRun::default()
        })
        .await
        .unwrap();
    store
        .transition("0193abcd-run", RunStatus::Queued, RunStatus::Running)
        .await
        .unwrap();
    drop(store);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_steward"));
    cmd.arg("mcp")
        .env("STEWARD_ROOT", repo())
        .env("DATABASE_URL", format!("sqlite://{}", db.display()))
        .env("RUST_LOG", "error");
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let client = ().serve(transport).await.unwrap();
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for want in [
        "list_agents",
        "list_runs",
        "get_run",
        "list_events",
        "review_agent",
        "draft_eval_case",
        "run_evals",
        "propose_improvement",
    ] {
        assert!(tools.iter().any(|t| t == want), "{tools:?}");
    }
    let call = |name: &'static str, args: Value| {
        let client = &client;
        async move {
            let request = CallToolRequestParams::new(name)
                .with_arguments(args.as_object().cloned().unwrap_or_default());
            let result = client.call_tool(request).await.unwrap();
            let text = result
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone())
                .unwrap_or_default();
            (result.is_error == Some(true), text)
        }
    };
    let (err, text) = call("list_agents", json!({})).await;
    assert!(
        !err && text.contains("\"helpdesk\"") && text.contains("slack_mention"),
        "{text}"
    );
    let (err, text) = call("get_run", json!({"id": "0193ab"})).await;
    assert!(
        !err && text.contains("0193abcd-run") && text.contains("how do I reset my VPN?"),
        "{text}"
    );
    let (err, text) = call("list_runs", json!({"agent": "helpdesk", "status": "running"})).await;
    assert!(!err && text.contains("0193abcd-run"), "{text}");
    let (err, text) = call("list_runs", json!({"status": "done"})).await;
    assert!(err && text.contains("status"), "{text}");
    let (err, text) = call("review_agent", json!({"agent": "helpdesk", "days": 1})).await;
    assert!(!err && text.contains("\"runs\":1"), "{text}");
    let (err, _) = call("review_agent", json!({"agent": "nobody"})).await;
    assert!(err);
    let (err, text) = call("list_events", json!({})).await;
    assert!(!err && text.contains("\"events\""), "{text}");
    // A run with no recorded trigger cannot be drafted, and says why.
    let (err, text) = call("draft_eval_case", json!({"run_id": "0193ab"})).await;
    assert!(err && text.contains("before steward kept triggers"), "{text}");
    client.cancel().await.unwrap();
}

#[test]
fn metrics_are_closed_beyond_loopback_without_their_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("steward.db");
    // Serves on `host` with `extra` set, asks for /metrics (with `bearer`, when given);
    // returns the answer's first line and what steward logged.
    let serve = |host: &str, extra: &[(&str, &str)], bearer: Option<&str>| {
        let port = free_local_addr().rsplit_once(':').unwrap().1.to_string();
        let mut cmd = bare_steward();
        cmd.args(["serve", "--addr", &format!("{host}:{port}")])
            .env("STEWARD_ROOT", repo())
            .env("DATABASE_URL", format!("sqlite://{}", db.display()))
            .env("RUST_LOG", "warn")
            .env_remove("STEWARD_METRICS_TOKEN")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let local = format!("127.0.0.1:{port}");
        for _ in 0..400 {
            if get(&local, "/healthz").starts_with("HTTP/1.1 200") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let answer = {
            use std::io::{Read, Write};
            let mut s = std::net::TcpStream::connect(&local).unwrap();
            let auth = bearer
                .map(|b| format!("Authorization: Bearer {b}\r\n"))
                .unwrap_or_default();
            write!(
                s,
                "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
            )
            .unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            text
        };
        signal(&child, "-TERM");
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        (answer, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // Every address, no token: closed, and said at start and in the answer.
    let (answer, log) = serve("0.0.0.0", &[], None);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains("STEWARD_METRICS_TOKEN is not set"), "{answer}");
    assert!(
        log.contains("/metrics is closed: set STEWARD_METRICS_TOKEN"),
        "{log}"
    );
    // With the token: served to a scraper that sends it, and nothing to warn about.
    let token = [("STEWARD_METRICS_TOKEN", "scrape-me")];
    let (answer, log) = serve("0.0.0.0", &token, Some("scrape-me"));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!log.contains("/metrics is closed"), "{log}");
    let (answer, _) = serve("0.0.0.0", &token, None);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    // Loopback, no token: only this machine can ask, as for the inspector.
    let (answer, log) = serve("127.0.0.1", &[], None);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(!log.contains("/metrics is closed"), "{log}");
    // Loopback behind a proxy that serves a public name: closed, the inspector too.
    let public = [("STEWARD_PUBLIC_URL", "https://steward.example.com")];
    let (answer, log) = serve("127.0.0.1", &public, None);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        log.contains("/metrics is closed: STEWARD_PUBLIC_URL names steward.example.com"),
        "{log}"
    );
    assert!(
        log.contains("the run inspector is closed: STEWARD_PUBLIC_URL names steward.example.com"),
        "{log}"
    );
}
