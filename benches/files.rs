//! Virtual-file benchmarks:
//! - `file_regex` throughput over a 100 MB file, through the real tool, and peak RSS;
//! - `extract_file` on a 50-page PDF, compared with `pdftotext` when it is installed;
//! - token efficiency: prompt tokens sent for a run whose tool returns 2 MB, with the
//!   result stored as a file versus sent inline.
//!
//! Run with `cargo bench --bench files`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::files::extract::{self, DocKind};
use steward::files::{FileSource, NewFile, RunFiles};
use steward::provider::retry::RetryPolicy;
use steward::provider::{
    ChatRequest, ChatResponse, Message, Provider, ProviderError, ProviderSet, ToolCall, Usage,
};
use steward::run::Runner;
use steward::store::SqliteStore;
use steward::tokens::{Encoding, TokenCounter};
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolResult, ToolSpec};
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use tokio_util::sync::CancellationToken;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

async fn regex_throughput(tokens: Arc<TokenCounter>) {
    let mut text = String::with_capacity(101 * 1024 * 1024);
    let mut i = 0u64;
    while text.len() < 100 * 1024 * 1024 {
        text.push_str(&format!(
            "{i:09} level=INFO service=gateway latency={}ms path=/api/v1/items/{}\n",
            i % 997,
            i % 10_007
        ));
        if i % 500_000 == 250_000 {
            text.push_str("level=ERROR certificate expired for gateway.internal\n");
        }
        i += 1;
    }
    let mb = text.len() as f64 / (1024.0 * 1024.0);
    let files = Arc::new(RunFiles::new("bench", None, tokens, Encoding::O200k, 10_000));
    let meta = files
        .add(
            NewFile {
                name: "big.log".into(),
                mime: "text/plain".into(),
                content: text.into_bytes(),
            },
            FileSource::ToolOutput,
            None,
        )
        .await
        .unwrap();
    let reg = steward::integrations::builtin_tools(
        &steward::integrations::Clients::from_settings(steward::http::client().unwrap(), &Default::default()),
        Default::default(),
    );
    let ctx = ToolCtx {
        run_id: "bench".into(),
        agent: "bench".into(),
        call_id: "c".into(),
        cancel: CancellationToken::new(),
        files,
        skills: None,
        subagents: None,
        nested: None,
        mock: false,
        search: Default::default(),
        network: Default::default(),
    };
    let allowed = vec!["file_regex".to_string()];
    for (label, pattern) in [
        ("literal", "certificate expired"),
        ("regex", r"latency=99\dms path=/api/v1/items/1\d{3}$"),
    ] {
        let mut rates = Vec::new();
        let mut first_line = String::new();
        for _ in 0..5 {
            let args = json!({"id": meta.id, "pattern": pattern, "max_matches": 20}).to_string();
            let started = Instant::now();
            let out = reg
                .invoke(&allowed, "file_regex", &args, &ctx, false)
                .await
                .unwrap();
            rates.push(mb / started.elapsed().as_secs_f64());
            first_line = out.to_model_text().lines().next().unwrap_or_default().to_string();
        }
        println!(
            "file_regex {label:<8} over {mb:.0} MB: median {:.0} MB/s  ({first_line})",
            median(&mut rates)
        );
    }
    println!(
        "  peak RSS after the 100 MB searches: {} MiB",
        peak_rss_kib() / 1024
    );
}

async fn pdf_extraction() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fifty-pages.pdf");
    let bytes = Arc::new(std::fs::read(&path).unwrap());
    let mut times = Vec::new();
    let mut chars = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let text = extract::extract(DocKind::Pdf, bytes.clone(), extract::DEFAULT_TIMEOUT)
            .await
            .unwrap();
        times.push(started.elapsed().as_secs_f64() * 1e3);
        chars = text.len();
    }
    println!(
        "extract_file on a 50-page PDF: median {:.1} ms ({chars} chars)",
        median(&mut times)
    );
    let mut pt = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let ok = std::process::Command::new("pdftotext")
            .arg(&path)
            .arg("-")
            .output()
            .map(|o| o.status.success());
        if !matches!(ok, Ok(true)) {
            println!("  pdftotext not installed; no comparison");
            return;
        }
        pt.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let p = median(&mut pt);
    println!(
        "  pdftotext (poppler, a separate process): median {p:.1} ms; ratio steward/pdftotext {:.2}",
        median(&mut times) / p
    );
}

/// Calls the big tool, then (if the result became a file) searches it, then answers;
/// counts every prompt token it is sent.
struct CountingModel {
    counter: Arc<TokenCounter>,
    prompt_tokens: AtomicU64,
    calls: AtomicU32,
}

#[async_trait]
impl Provider for CountingModel {
    fn name(&self) -> &'static str {
        "openai"
    }
    async fn chat(&self, request: &ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let mut tokens = self.counter.count(Encoding::O200k, request.system).tokens;
        for m in request.messages {
            let text = match m {
                Message::User { content, .. } | Message::Tool { content, .. } => content.as_str(),
                Message::Assistant { text, .. } => text.as_deref().unwrap_or_default(),
            };
            // Chunked so long texts are counted exactly, not estimated.
            tokens += text
                .as_bytes()
                .chunks(200_000)
                .map(|c| {
                    self.counter
                        .count(Encoding::O200k, &String::from_utf8_lossy(c))
                        .tokens
                })
                .sum::<u64>();
        }
        self.prompt_tokens.fetch_add(tokens, Ordering::Relaxed);
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let became_file = request.messages.iter().any(
            |m| matches!(m, Message::Tool { content, .. } if content.contains("The whole text is file")),
        );
        let call = |id: &str, name: &str, args: &str| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        };
        let tool_calls = match n {
            0 => vec![call("c1", "export", "{}")],
            1 if became_file => vec![call(
                "c2",
                "file_regex",
                r#"{"id": "f_1", "pattern": "status=failed"}"#,
            )],
            _ => vec![],
        };
        Ok(ChatResponse {
            id: String::new(),
            text: tool_calls.is_empty().then(|| "3 failed jobs.".to_string()),
            tool_calls,
            usage: Usage::default(),
            stop_reason: "stop".into(),
            model: "bench".into(),
            reasoning: Vec::new(),
            spent_for: None,
        })
    }
}

struct Export(ToolSpec, String);

#[async_trait]
impl Tool for Export {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        Ok(ToolOutput::text(self.1.clone()))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

async fn token_efficiency(tokens: Arc<TokenCounter>) {
    let mut export = String::new();
    let mut i = 0;
    while export.len() < 2 * 1024 * 1024 {
        let status = if i % 7001 == 5 { "failed" } else { "ok" };
        export.push_str(&format!(
            "{{\"job\": {i}, \"status\": \"{status}\", \"owner\": \"team-{}\", \"duration_s\": {}}}\n",
            i % 40,
            i % 600
        ));
        i += 1;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("b.db")).await.unwrap());
    let mut results = Vec::new();
    for inline in [false, true] {
        let model = Arc::new(CountingModel {
            counter: tokens.clone(),
            prompt_tokens: AtomicU64::new(0),
            calls: AtomicU32::new(0),
        });
        let mut reg = steward::integrations::builtin_tools(
            &steward::integrations::Clients::from_settings(
                steward::http::client().unwrap(),
                &Default::default(),
            ),
            Default::default(),
        );
        reg.register(Arc::new(Export(
            ToolSpec {
                name: "export".into(),
                description: "Job export.".into(),
                parameters: json!({"type": "object"}),
                effect: Effect::ReadOnly,
            },
            export.clone(),
        )));
        let runner = Runner::builder(store.clone())
            .providers(ProviderSet::new(RetryPolicy::default()).with("openai", model.clone()))
            .tools(reg)
            .tokens(tokens.clone())
            .build();
        let mut agent = AgentConfig::new(
            "bench",
            ModelRef::parse("openai/gpt-4.1").unwrap(),
            "Count failed jobs.",
            vec!["export".into()],
        );
        if inline {
            agent.context.file_threshold_tokens = u64::MAX / 4;
            agent.context.file_preview_tokens = 1_000;
            agent.context.window_tokens = Some(100_000_000);
        }
        let out = runner
            .run(
                &agent,
                &TriggerEvent::from_cli(json!({"text": "How many jobs failed?"})),
                None,
                CancellationToken::new(),
            )
            .await
            .unwrap();
        let sent = model.prompt_tokens.load(Ordering::Relaxed);
        println!(
            "token efficiency, 2 MB tool result {}: {sent} prompt tokens over {} model calls ({:?})",
            if inline { "sent inline" } else { "stored as a file" },
            out.turns,
            out.termination
        );
        results.push(sent);
    }
    println!(
        "  ratio inline/file: {:.0}x fewer prompt tokens with files",
        results[1] as f64 / results[0] as f64
    );
}

fn main() {
    steward::http::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tokens = Arc::new(TokenCounter::new());
    rt.block_on(async {
        pdf_extraction().await;
        token_efficiency(tokens.clone()).await;
        regex_throughput(tokens).await;
    });
}
