//! Virtual files, the base file tools, extraction, large results, preloading and
//! compaction, against the fake model server with a real SQLite store.

mod support;

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::files::{FileMeta, FileSource, NewFile, RunFiles};
use steward::run::Termination;
use steward::store::{RunStore, SqliteStore, Store};
use steward::tokens::{Encoding, TokenCounter};
use steward::tools::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::*;
use tokio_util::sync::CancellationToken;

/// Returns `text` verbatim, or a numbered chunk of ~2,000 tokens when `text` is empty.
struct Fixed {
    spec: ToolSpec,
    text: String,
    calls: AtomicU32,
}

impl Fixed {
    fn new(name: &str, text: String) -> Arc<Fixed> {
        Arc::new(Fixed {
            spec: ToolSpec {
                name: name.into(),
                description: "Returns data.".into(),
                parameters: json!({"type": "object"}),
                effect: Effect::ReadOnly,
            },
            text,
            calls: AtomicU32::new(0),
        })
    }
}

#[async_trait]
impl Tool for Fixed {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.text.is_empty() {
            return Ok(ToolOutput::text(format!(
                "chunk {n}: {}",
                "alpha beta gamma delta ".repeat(500)
            )));
        }
        Ok(ToolOutput::text(self.text.clone()))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn agent(tools: &[&str]) -> AgentConfig {
    AgentConfig::new(
        "files",
        ModelRef::parse("openai/gpt-4.1").unwrap(),
        "You work with data.",
        tools.iter().map(|s| s.to_string()).collect(),
    )
}

fn registry(extra: Vec<Arc<dyn Tool>>) -> ToolRegistry {
    let mut r = builtin_registry();
    for t in extra {
        r.register(t);
    }
    r
}

fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

fn last_user(body: &Value) -> String {
    let msgs = body["messages"].as_array().unwrap();
    let m = msgs.iter().rev().find(|m| m["role"] == "user").unwrap();
    m["content"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| m["content"].to_string())
}

fn big_table(rows: usize, needle_at: usize) -> String {
    let mut s = String::with_capacity(rows * 60);
    for i in 0..rows {
        if i == needle_at {
            s.push_str("needle 4242 found here\n");
        } else {
            s.push_str(&format!(
                "row {i:06}: status=ok latency={}ms region=eu-west-1\n",
                i % 97
            ));
        }
    }
    s
}

#[tokio::test]
async fn a_five_megabyte_result_becomes_a_file_the_model_can_search() {
    let big = big_table(100_000, 50_000);
    assert!(big.len() > 5_000_000);
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("call_1", "dump", "{}")])));
    fake.push(Reply::ok(openai_tools(&[(
        "call_2",
        "file_regex",
        r#"{"id": "f_1", "pattern": "needle \\d+"}"#,
    )])));
    fake.push(Reply::ok(openai_text("Found needle 4242 on line 50001.")));
    let (_dir, runner) = runner(
        providers(Some(&fake), None),
        registry(vec![Fixed::new("dump", big)]),
        false,
    )
    .await;
    let out = runner
        .run(
            &agent(&["dump"]),
            &TriggerEvent::from_cli(json!({"text": "find the needle"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);

    let reqs = fake.requests();
    let counter = TokenCounter::new();
    let inline = &tool_messages(&reqs[1].body)[0];
    let tokens = counter.count(Encoding::O200k, inline).tokens;
    assert!(tokens < 1_500, "{tokens} tokens of the 5 MB result went inline");
    assert!(
        inline.contains("The whole text is file f_1 (dump-call_1.txt, text/plain, 5"),
        "{inline}"
    );
    let status = last_user(&reqs[1].body);
    assert!(
        status.contains("- f_1 dump-call_1.txt (text/plain, 5"),
        "{status}"
    );
    assert!(
        status.contains("100000 lines, tool output); read: bytes 0-"),
        "{status}"
    );

    let found = &tool_messages(&reqs[2].body)[1];
    assert_eq!(
        found,
        "f_1: 1 matching line for /needle \\d+/\n50001: needle 4242 found here\n"
    );

    // The file and its read state are in the store.
    let files = runner.store.run_files(&out.run_id).await.unwrap();
    assert_eq!(files.len(), 1);
    let meta: FileMeta = serde_json::from_value(files[0].meta.clone()).unwrap();
    assert_eq!(meta.source, FileSource::ToolOutput);
    assert_eq!(meta.read.lines, vec![[50001, 50001]]);
    assert_eq!(files[0].content.len() as u64, meta.size_bytes);
}

#[tokio::test]
async fn the_context_after_a_large_result_matches_the_snapshot() {
    let table: String = (0..3000).map(|i| format!("row {i}: value={}\n", i * 7)).collect();
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_tools(&[("call_1", "table", "{}")])));
    fake.push(Reply::ok(openai_text("ok")));
    let (_dir, runner) = runner(
        providers(Some(&fake), None),
        registry(vec![Fixed::new("table", table)]),
        false,
    )
    .await;
    let mut a = agent(&["table"]);
    a.context.window_tokens = Some(200_000);
    runner
        .run(
            &a,
            &TriggerEvent::from_cli(json!({"text": "read the table"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let msgs = fake.requests()[1].body["messages"].as_array().unwrap().clone();
    let seen = format!(
        "=== tool message ===\n{}\n=== status message ===\n{}\n",
        msgs[3]["content"].as_str().unwrap(),
        msgs[4]["content"].as_str().unwrap()
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/large_result.txt");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &seen).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        seen, expected,
        "context differs from tests/snapshots/large_result.txt (UPDATE_SNAPSHOTS=1 to accept)"
    );
}

#[tokio::test]
async fn compaction_keeps_long_runs_inside_a_small_window() {
    let fake = FakeModel::start().await;
    let chunk_calls = Arc::new(AtomicU32::new(0));
    let transcript_read = Arc::new(Mutex::new(None::<String>));
    let (calls, read) = (chunk_calls.clone(), transcript_read.clone());
    fake.handler(move |body| {
        // Report the request's real size, as providers do: the run budgets from it.
        let size = request_tokens(body);
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        if system.starts_with("You are compacting") {
            return Reply::ok(reported(
                openai_text("Summary: the agent is reading chunks one by one; keep going until 15."),
                size,
            ));
        }
        // After a compaction, read the first lines of the transcript file once.
        let user = last_user(body);
        if let Some(at) = user.find("The full transcript before this compaction is file ") {
            let id: String = user[at + 51..]
                .chars()
                .take_while(|c| *c == 'f' || *c == '_' || c.is_ascii_digit())
                .collect();
            let mut r = read.lock().unwrap();
            if r.is_none() {
                *r = Some(id.clone());
                let args = json!({"id": id, "start_line": 1, "end_line": 3}).to_string();
                return Reply::ok(reported(
                    openai_tools(&[("call_read", "file_read", args.as_str())]),
                    size,
                ));
            }
        }
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n > 15 {
            return Reply::ok(reported(openai_text("All 15 chunks read."), size));
        }
        let id = format!("call_{n}");
        Reply::ok(reported(openai_tools(&[(id.as_str(), "chunk", "{}")]), size))
    });
    let (_dir, runner) = runner(
        providers(Some(&fake), None),
        registry(vec![Fixed::new("chunk", String::new())]),
        false,
    )
    .await;
    let mut a = agent(&["chunk"]);
    a.context.window_tokens = Some(8_000);
    let (spans, guard) = capture_spans();
    let out = runner
        .run(
            &a,
            &TriggerEvent::from_cli(json!({"text": "read 15 chunks"})),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed, "{:?}", out.error);
    assert_eq!(out.final_text.as_deref(), Some("All 15 chunks read."));

    let events = runner.store.run_events(&out.run_id).await.unwrap();
    let compactions: Vec<&Value> = events
        .iter()
        .filter(|e| e.kind == "compaction")
        .map(|e| &e.data)
        .collect();
    assert!(compactions.len() >= 2, "only {} compactions", compactions.len());
    // Each compaction is a span with its sizes, for traces.
    drop(guard);
    let spans = spans.lock().unwrap().clone();
    let compaction_spans: Vec<_> = spans.iter().filter(|(name, _)| name == "compaction").collect();
    assert_eq!(compaction_spans.len(), compactions.len());
    for (_, f) in &compaction_spans {
        let n = |k: &str| f[k].parse::<u64>().unwrap();
        assert!(
            n("steward.compaction.tokens_after") < n("steward.compaction.tokens_before"),
            "{f:?}"
        );
    }
    for c in &compactions {
        assert!(c["tokens_after"].as_u64().unwrap() < c["tokens_before"].as_u64().unwrap());
    }

    // No request ever exceeded the window.
    for (i, r) in fake.requests().iter().enumerate() {
        let n = request_tokens(&r.body);
        assert!(n < 8_000, "request {i} carries {n} tokens");
    }

    // The transcript file was readable with file_read.
    let id = transcript_read
        .lock()
        .unwrap()
        .clone()
        .expect("the model saw a transcript file id");
    let read_result = fake
        .requests()
        .iter()
        .flat_map(|r| tool_messages(&r.body))
        .find(|t| t.starts_with(&format!("{id} lines 1-3")))
        .expect("file_read on the transcript returned its lines");
    assert!(read_result.contains("### user"), "{read_result}");
}

async fn files_with(store: Arc<dyn Store>) -> (Arc<RunFiles>, ToolCtx) {
    let files = Arc::new(RunFiles::new(
        "run-files",
        Some(store),
        tokens(),
        Encoding::O200k,
        10_000,
    ));
    let ctx = ToolCtx {
        run_id: "run-files".into(),
        agent: "files".into(),
        call_id: "c".into(),
        cancel: CancellationToken::new(),
        files: files.clone(),
        skills: None,
        subagents: None,
        nested: None,
        mock: false,
        search: Default::default(),
        network: Default::default(),
    };
    (files, ctx)
}

async fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    s.create_run(&steward::store::NewRun {
        id: "run-files".into(),
        agent: "files".into(),
        parent_id: None,
        trigger_summary: "t".into(),
        event_id: None,
        ..Default::default()
    })
    .await
    .unwrap();
    (dir, Arc::new(s))
}

fn fixture(name: &str) -> NewFile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    NewFile {
        name: name.into(),
        mime: steward::files::mime::from_name(name).into(),
        content: std::fs::read(path).unwrap(),
    }
}

async fn call(reg: &ToolRegistry, ctx: &ToolCtx, name: &str, args: Value) -> Result<String, ToolError> {
    let allowed: Vec<String> = reg.names().into_iter().collect();
    reg.invoke(&allowed, name, &args.to_string(), ctx, false)
        .await
        .map(|o| o.to_model_text())
}

#[tokio::test]
async fn extract_file_reads_pdf_docx_and_pptx_and_survives_bad_input() {
    let (_dir, store) = store().await;
    let (files, ctx) = files_with(store.clone()).await;
    let reg = registry(vec![]);
    for (name, expect) in [
        (
            "report.pdf",
            vec!["Revenue was 42 million dollars.", "Headcount: 118 people."],
        ),
        (
            "review.docx",
            vec![
                "Root cause: an expired certificate on the & gateway.",
                "Action: rotate",
            ],
        ),
        (
            "roadmap.pptx",
            vec![
                "--- slide 1 ---\nRoadmap 2027\nShip steward",
                "Slack triggers & Jira tools",
            ],
        ),
    ] {
        let meta = files
            .add(fixture(name), FileSource::Attachment, None)
            .await
            .unwrap();
        let out = call(&reg, &ctx, "extract_file", json!({"id": meta.id}))
            .await
            .unwrap();
        assert!(
            out.starts_with(&format!("Extracted {} ({name}) into f_", meta.id)),
            "{out}"
        );
        let new_id = out
            .split(" into ")
            .nth(1)
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .to_string();
        let (new_meta, content) = files.get(&new_id).unwrap();
        assert_eq!(new_meta.source, FileSource::Extracted);
        assert_eq!(new_meta.derived_from.as_deref(), Some(meta.id.as_str()));
        let text = String::from_utf8(content.to_vec()).unwrap();
        for e in expect {
            assert!(text.contains(e), "{name}: `{e}` not in {text:?}");
        }
        // Extracting again returns the same file.
        let again = call(&reg, &ctx, "extract_file", json!({"id": meta.id}))
            .await
            .unwrap();
        assert!(again.contains(&format!("into {new_id}:")));
    }

    let corrupt = files
        .add(fixture("corrupt.pdf"), FileSource::Attachment, None)
        .await
        .unwrap();
    let err = call(&reg, &ctx, "extract_file", json!({"id": corrupt.id}))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ToolError::Model(m) if m.starts_with(&format!("cannot extract {}", corrupt.id))),
        "{err}"
    );
    let bomb = files
        .add(fixture("bomb.docx"), FileSource::Attachment, None)
        .await
        .unwrap();
    let err = call(&reg, &ctx, "extract_file", json!({"id": bomb.id}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("safety cap"), "{err}");
    // Still serving: a good document extracts after the bad ones.
    let again = files
        .add(fixture("report.pdf"), FileSource::Attachment, None)
        .await
        .unwrap();
    assert!(
        call(&reg, &ctx, "extract_file", json!({"id": again.id}))
            .await
            .is_ok()
    );
    // Files survive a restart.
    let reloaded = RunFiles::new("run-files", Some(store), tokens(), Encoding::O200k, 10_000);
    reloaded.restore().await.unwrap();
    assert_eq!(reloaded.list(), files.list());
}

#[tokio::test]
async fn file_tools_give_clear_errors() {
    let (_dir, store) = store().await;
    let (files, ctx) = files_with(store).await;
    let reg = registry(vec![]);
    let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    files
        .add(
            NewFile {
                name: "lines.txt".into(),
                mime: "text/plain".into(),
                content: text.into_bytes(),
            },
            FileSource::Message,
            None,
        )
        .await
        .unwrap();
    files
        .add(fixture("report.pdf"), FileSource::Attachment, None)
        .await
        .unwrap();

    let err = |r: Result<String, ToolError>| r.unwrap_err().to_string();
    assert_eq!(
        err(call(&reg, &ctx, "file_read", json!({"id": "f_9"})).await),
        "unknown file id 'f_9'; known files: f_1, f_2"
    );
    assert_eq!(
        err(call(&reg, &ctx, "file_read", json!({"id": "f_1", "start_line": 101})).await),
        "start_line 101 is beyond the end of f_1 (100 lines)"
    );
    assert_eq!(
        err(call(
            &reg,
            &ctx,
            "file_read",
            json!({"id": "f_1", "start_line": 9, "end_line": 3})
        )
        .await),
        "end_line 3 is before start_line 9"
    );
    assert_eq!(
        err(call(
            &reg,
            &ctx,
            "peek_file",
            json!({"id": "f_1", "start": 5000, "stop": 6000})
        )
        .await),
        "byte 5000 is beyond the end of f_1 (792 bytes)"
    );
    assert!(
        err(call(
            &reg,
            &ctx,
            "file_regex",
            json!({"id": "f_1", "pattern": "(unclosed"})
        )
        .await)
        .starts_with("invalid regex '(unclosed'")
    );
    assert_eq!(
        err(call(&reg, &ctx, "file_read", json!({"id": "f_2"})).await),
        "f_2 (application/pdf) is not a text file; use extract_file to turn it into text first"
    );
    assert_eq!(
        err(call(&reg, &ctx, "extract_file", json!({"id": "f_1"})).await),
        "f_1 (text/plain) is not a PDF, DOCX, PPTX or HTML file; read text files with file_read"
    );
    assert_eq!(
        err(call(
            &reg,
            &ctx,
            "file_read",
            json!({"id": "f_1", "start_line": 1, "start_byte": 0})
        )
        .await),
        "give either a line range or a byte range, not both"
    );
    // A reversed byte range is the model's mistake, not a panic of the run.
    assert_eq!(
        err(call(
            &reg,
            &ctx,
            "file_read",
            json!({"id": "f_1", "start_byte": 10, "end_byte": 5})
        )
        .await),
        "end_byte 5 must be greater than start_byte 10"
    );

    // Ranges past the end are clamped with a note; reads are tracked.
    let out = call(
        &reg,
        &ctx,
        "file_read",
        json!({"id": "f_1", "start_line": 98, "end_line": 120}),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        "f_1 lines 98-100 of 100 (the file ends at line 100):\nline 98\nline 99\nline 100\n"
    );
    let out = call(
        &reg,
        &ctx,
        "file_regex",
        json!({"id": "f_1", "pattern": "^line 5\\d$", "max_matches": 2, "context_lines": 1}),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        "f_1: 10 matching lines for /^line 5\\d$/ (showing the first 2)\n49- line 49\n50: line 50\n51: line 51\n52- line 52\n"
    );
    let out = call(
        &reg,
        &ctx,
        "peek_file",
        json!({"id": "f_1", "start": 0, "stop": 14}),
    )
    .await
    .unwrap();
    assert_eq!(out, "f_1 bytes 0-14 of 792:\nline 1\nline 2\n");
    let out = call(&reg, &ctx, "load_file", json!({"id": "f_1"})).await.unwrap();
    assert!(out.starts_with("f_1 (lines.txt, 100 lines):\nline 1\n"));
    assert_eq!(files.get("f_1").unwrap().0.read.describe(), "all");
}

#[tokio::test]
async fn attachments_are_preloaded_with_images_as_image_content() {
    let fake = FakeModel::start().await;
    fake.push(Reply::ok(openai_text("seen")));
    let (_dir, runner) = runner(providers(Some(&fake), None), registry(vec![]), false).await;
    let notes: String = (0..2000).map(|i| format!("note {i}\n")).collect();
    // The smallest valid PNG: 1x1 transparent pixel.
    let png: Vec<u8> = vec![
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0,
        0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c,
        0x63, 0, 1, 0, 0, 5, 0, 1, 0x0d, 0x0a, 0x2d, 0xb4, 0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42,
        0x60, 0x82,
    ];
    let mut trigger = TriggerEvent::from_cli(json!({"text": "look at these"}));
    trigger.attachments = vec![
        NewFile {
            name: "notes.txt".into(),
            mime: "text/plain".into(),
            content: notes.clone().into_bytes(),
        },
        NewFile {
            name: "screen.png".into(),
            mime: "image/png".into(),
            content: png,
        },
        fixture("review.docx"),
    ];
    let out = runner
        .run(&agent(&[]), &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::Completed);
    let first = &fake.requests()[0].body["messages"][1];
    let parts = first["content"].as_array().expect("text and image parts");
    let text = parts[0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "[steward: f_1 notes.txt (preloaded, first bytes of {} bytes):]\nnote 0\n",
            notes.len()
        )),
        "{text}"
    );
    assert!(
        !text.contains("note 1999"),
        "only the first preload_bytes are included"
    );
    assert!(text.contains("[steward: image f_2 (screen.png) is attached.]"));
    assert!(
        text.contains("[steward: f_4 review.docx.txt (in full of"),
        "{text}"
    );
    assert!(text.contains("Root cause: an expired certificate"));
    assert!(text.contains(
        "- f_3 review.docx (application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    ));
    assert!(text.contains("- f_1 notes.txt (text/plain, "), "{text}");
    assert_eq!(parts[1]["type"], "image_url");
    assert!(
        parts[1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,iVBORw0KGgo")
    );

    // preload_bytes: 0 disables preloading (the file list stays).
    fake.push(Reply::ok(openai_text("seen")));
    let mut a = agent(&[]);
    a.preload_bytes = 0;
    trigger.attachments.truncate(1);
    runner
        .run(&a, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    let first = fake.requests()[1].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        !first.contains("note 0") && first.contains("- f_1 notes.txt"),
        "{first}"
    );
}

/// A subagent sees only the files it was given, under their parent's ids: a file it
/// adds takes an id after the highest it holds, never one of those (a count of its
/// files would have named its first new file `f_2` beside the parent's `f_2`).
#[tokio::test]
async fn a_subagents_new_files_never_take_an_id_it_holds() {
    let parent = RunFiles::new("run-files", None, tokens(), Encoding::O200k, 10_000);
    for name in ["a.txt", "b.txt"] {
        let file = NewFile {
            name: name.into(),
            mime: "text/plain".into(),
            content: format!("{name}\n").into_bytes(),
        };
        parent.add(file, FileSource::Attachment, None).await.unwrap();
    }
    let child = parent.subset(&["f_2".to_string()], "child", None).unwrap();
    let file = NewFile {
        name: "c.txt".into(),
        mime: "text/plain".into(),
        content: b"c.txt\n".to_vec(),
    };
    let added = child.add(file, FileSource::ToolOutput, None).await.unwrap();
    assert_eq!(added.id, "f_3");
    assert_eq!(child.get("f_2").unwrap().0.name, "b.txt");
    assert_eq!(child.get("f_3").unwrap().0.name, "c.txt");
}
