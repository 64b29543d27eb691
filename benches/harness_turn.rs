//! Harness overhead per turn: an in-process model that answers instantly (after
//! serializing the request exactly as the OpenAI adapter would), a trivial tool, and a
//! real SQLite run store (and a null store, to separate the database's cost). Reports
//! median µs per turn at ~20,000 and ~200,000 tokens of context,
//! turns per second, process CPU per turn, and peak RSS.
//!
//! Run with `cargo bench --bench harness_turn`; `HARNESS_API=responses` encodes each
//! request for OpenAI's Responses API instead of Chat Completions, with a reasoning item
//! (encrypted content, as a reasoning model returns) carried back on every turn.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::provider::retry::RetryPolicy;
use steward::provider::{
    ChatRequest, ChatResponse, Provider, ProviderError, ProviderSet, ToolCall, Usage, openai,
};
use steward::run::Runner;
use steward::store::{
    ApprovalRow, ApprovalStore, EventQueue, EventRow, ExpiredRun, FileStore, NewEvent, NewRun, RunRow,
    RunStatus, RunStore, SettingStore, SqliteStore, Store, StoreError, StoredEvent, StoredFile,
};
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use steward::triggers::TriggerEvent;
use steward::types::{ModelRef, Privacy, RunOutcome};
use tokio_util::sync::CancellationToken;

const TURNS: u32 = 40;
const RUNS: usize = 15;

/// Answers every call with one tool call; never ends the run (max_turns does).
struct InstantModel {
    /// Encode as the Responses API and answer with a reasoning item.
    responses: bool,
    calls: AtomicU32,
    bytes: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl Provider for InstantModel {
    fn name(&self) -> &'static str {
        "openai"
    }
    async fn chat(&self, request: &ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        // Count the serialization a real adapter performs every turn.
        let body = if self.responses {
            steward::provider::openai_responses::encode_request(request, true).expect("encode")
        } else {
            openai::encode_request(request).expect("encode")
        };
        self.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        // A reasoning model's item: about 1 KB of encrypted content per turn.
        let reasoning = if self.responses {
            vec![steward::provider::Reasoning {
                provider: "openai".into(),
                model: request.model.to_string(),
                item: json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [],
                             "encrypted_content": "gAAAAB".repeat(170)}),
            }]
        } else {
            Vec::new()
        };
        Ok(ChatResponse {
            id: String::new(),
            text: None,
            tool_calls: vec![ToolCall {
                id: format!("call_{n}"),
                name: "noop".into(),
                arguments: "{\"n\": 1}".into(),
            }],
            usage: Usage {
                input_tokens: 20_000,
                output_tokens: 20,
                ..Usage::default()
            },
            stop_reason: "tool_calls".into(),
            model: "bench".into(),
            reasoning,
            spent_for: None,
        })
    }
}

struct Noop(ToolSpec);

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        Ok(ToolOutput::text("ok: 42 items processed"))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

/// Discards everything: isolates the harness's own cost from the database's.
struct NullStore;

#[async_trait]
impl RunStore for NullStore {
    async fn start_within(
        &self,
        _id: &str,
        _agent: &str,
        _max: Option<u32>,
        _thread: Option<&str>,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }
    async fn runs_since(
        &self,
        _agent: &str,
        _actor: &str,
        _since: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, StoreError> {
        Ok(0)
    }
    async fn usage_by_agent(
        &self,
        _since: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<steward::store::AgentUsage>, StoreError> {
        Ok(Vec::new())
    }
    async fn cost_since(
        &self,
        _agent: &str,
        _since: chrono::DateTime<chrono::Utc>,
    ) -> Result<f64, StoreError> {
        Ok(0.0)
    }
    async fn create_run(&self, _run: &NewRun) -> Result<(), StoreError> {
        Ok(())
    }

    async fn transition(&self, _id: &str, _from: RunStatus, _to: RunStatus) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn finish_run(
        &self,
        _id: &str,
        _from: RunStatus,
        _f: &RunOutcome,
        _p: Privacy,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn append_events(&self, _run_id: &str, _events: &[NewEvent]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn get_run(&self, _id: &str) -> Result<Option<RunRow>, StoreError> {
        Ok(None)
    }

    async fn mark_private(&self, _id: &str) -> Result<(), StoreError> {
        Ok(())
    }

    async fn prune_runs(&self, _before: chrono::DateTime<chrono::Utc>) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn list_runs(&self, _limit: u32) -> Result<Vec<RunRow>, StoreError> {
        Ok(Vec::new())
    }

    async fn query_runs(&self, _filter: &steward::store::RunFilter) -> Result<Vec<RunRow>, StoreError> {
        Ok(Vec::new())
    }

    async fn child_runs(&self, _parent_id: &str) -> Result<Vec<RunRow>, StoreError> {
        Ok(Vec::new())
    }

    async fn run_ids_with_prefix(&self, _prefix: &str, _limit: u32) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }

    async fn run_events(&self, _run_id: &str) -> Result<Vec<StoredEvent>, StoreError> {
        Ok(Vec::new())
    }

    async fn renew_lease(
        &self,
        _run_id: &str,
        _until: chrono::DateTime<chrono::Utc>,
        _owner: &str,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn expired_runs(&self, _now: chrono::DateTime<chrono::Utc>) -> Result<Vec<ExpiredRun>, StoreError> {
        Ok(Vec::new())
    }

    async fn take_expired(
        &self,
        _run_id: &str,
        _now: chrono::DateTime<chrono::Utc>,
        _until: chrono::DateTime<chrono::Utc>,
        _owner: &str,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn has_side_effects(&self, _run_id: &str) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn requeue(&self, _run_id: &str, _from: RunStatus) -> Result<bool, StoreError> {
        Ok(false)
    }
}

#[async_trait]
impl FileStore for NullStore {
    async fn put_file(&self, _run_id: &str, _file: &StoredFile) -> Result<(), StoreError> {
        Ok(())
    }

    async fn update_file(&self, _run_id: &str, _file_id: &str, _meta: &Value) -> Result<(), StoreError> {
        Ok(())
    }

    async fn run_files(&self, _run_id: &str) -> Result<Vec<StoredFile>, StoreError> {
        Ok(Vec::new())
    }

    async fn conversation_files(
        &self,
        _thread_key: &str,
        _except_run: &str,
    ) -> Result<Vec<(String, StoredFile)>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait]
impl steward::store::EscalationStore for NullStore {
    async fn escalate(&self, _: &steward::store::EscalationRow) -> Result<bool, StoreError> {
        Ok(true)
    }
    async fn set_escalation_message(&self, _: &str, _: &str, _: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn escalation(&self, _: &str) -> Result<Option<steward::store::EscalationRow>, StoreError> {
        Ok(None)
    }
    async fn resolve_escalation(
        &self,
        _: &str,
        _: &str,
        _: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
}

#[async_trait]
impl steward::store::EventLog for NullStore {
    async fn list_events(
        &self,
        _: &steward::store::EventFilter,
    ) -> Result<Vec<steward::store::EventRecord>, StoreError> {
        Ok(Vec::new())
    }
    async fn event_record(&self, _: &str) -> Result<Option<steward::store::EventRecord>, StoreError> {
        Ok(None)
    }
    async fn event_bodies(
        &self,
        _: Option<&str>,
        _: u32,
    ) -> Result<Vec<steward::store::StoredBody>, StoreError> {
        Ok(Vec::new())
    }
    async fn events_about_message(
        &self,
        _: &str,
        _: &str,
        _: u32,
    ) -> Result<Vec<(steward::store::EventRecord, Option<String>)>, StoreError> {
        Ok(Vec::new())
    }
    async fn prune_events(&self, _: chrono::DateTime<chrono::Utc>) -> Result<u64, StoreError> {
        Ok(0)
    }
}

#[async_trait]
impl EventQueue for NullStore {
    async fn insert_events(&self, events: &[EventRow]) -> Result<Vec<bool>, StoreError> {
        Ok(vec![true; events.len()])
    }

    async fn claim_events(&self, _limit: u32) -> Result<Vec<EventRow>, StoreError> {
        Ok(Vec::new())
    }

    async fn route_events(
        &self,
        routes: &[steward::store::Route<'_>],
        _lease_until: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<bool>, StoreError> {
        Ok(vec![true; routes.len()])
    }

    async fn requeue_orphan_events(
        &self,
        _claimed_before: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn get_event(&self, _id: &str) -> Result<Option<EventRow>, StoreError> {
        Ok(None)
    }

    async fn count_events(&self) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn erase_sealed(&self, _id: &str) -> Result<(), StoreError> {
        Ok(())
    }

    async fn queue_depth(&self) -> Result<(u64, u64), StoreError> {
        Ok((0, 0))
    }
}

#[async_trait]
impl steward::store::ScoreStore for NullStore {
    async fn add_score(&self, _run_id: &str, _score: &steward::store::Score) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn run_scores(&self, _run_id: &str) -> Result<Vec<steward::store::Score>, StoreError> {
        Ok(Vec::new())
    }

    async fn run_by_reply_ts(&self, _ts: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    async fn explain_score(
        &self,
        _run: &str,
        _criterion: &str,
        _source: &str,
        _text: &str,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
}

#[async_trait]
impl SettingStore for NullStore {
    async fn get_setting(&self, _key: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }

    async fn set_setting(&self, _key: &str, _value: &str) -> Result<(), StoreError> {
        Ok(())
    }

    async fn add_setting_line(&self, _key: &str, _line: &str, _max_lines: u32) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn take_setting(&self, _key: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }
}

#[async_trait]
impl ApprovalStore for NullStore {
    async fn suspend_run(&self, _approval: &ApprovalRow) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn set_approval_message(&self, _id: &str, _channel: &str, _ts: &str) -> Result<(), StoreError> {
        Ok(())
    }
    async fn get_approval(&self, _id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        Ok(None)
    }
    async fn latest_approval(&self, _run_id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        Ok(None)
    }
    async fn decide_approval(
        &self,
        _id: &str,
        _decision: &str,
        _by: Option<&str>,
        _at: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn overdue_approvals(
        &self,
        _now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }
}

fn proc_status(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; 11 and 12 after the command name.
    (ticks(11) + ticks(12)) / 100.0
}

/// Varied English-like text of `chars` characters (about 4 characters per o200k token,
/// like real prose, unlike a repeated phrase).
fn prose(chars: usize) -> String {
    const WORDS: &[&str] = &[
        "the",
        "incident",
        "started",
        "when",
        "deploy",
        "pipeline",
        "rolled",
        "back",
        "customer",
        "reported",
        "latency",
        "spikes",
        "across",
        "regions",
        "because",
        "certificate",
        "rotation",
        "failed",
        "silently",
        "engineers",
        "paged",
        "on-call",
        "mitigated",
        "by",
        "restarting",
        "gateway",
        "nodes",
        "postmortem",
        "action",
        "items",
        "include",
        "alerts",
        "dashboards",
        "runbooks",
        "ownership",
        "quarterly",
        "review",
    ];
    let mut out = String::with_capacity(chars + 16);
    let mut i: usize = 0;
    while out.len() < chars {
        out.push_str(WORDS[(i * 7919 + i / 3) % WORDS.len()]);
        out.push(if i % 13 == 12 { '.' } else { ' ' });
        if i.is_multiple_of(17) {
            out.push_str(&format!("{} ", i * 31 % 10_000));
        }
        i += 1;
    }
    out.truncate(chars);
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    steward::http::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("bench.db")).await.unwrap());
        measure("SQLite store, 20k tokens", sqlite.clone(), 120_000).await;
        measure("null store, 20k tokens", Arc::new(NullStore), 120_000).await;
        measure("SQLite store, 200k tokens", sqlite, 1_200_000).await;
        measure("null store, 200k tokens", Arc::new(NullStore), 1_200_000).await;
        // What counting the whole conversation every turn would cost instead.
        let counter = steward::tokens::TokenCounter::new();
        let chunk = prose(200_000);
        counter.count(steward::tokens::Encoding::O200k, &chunk);
        let started = Instant::now();
        let mut tokens = 0;
        for _ in 0..4 {
            tokens += counter.count(steward::tokens::Encoding::O200k, &chunk).tokens;
        }
        println!(
            "re-tokenizing 800 KB ({tokens} tokens) from scratch: {:.1} ms per turn (the harness counts each message once)",
            started.elapsed().as_secs_f64() * 1e3
        );
        println!("  peak RSS        {} KiB", proc_status("VmHWM:"));
    });
}

async fn measure(label: &str, store: Arc<dyn Store>, context_chars: usize) {
    let model = Arc::new(InstantModel {
        responses: std::env::var("HARNESS_API").is_ok_and(|v| v == "responses"),
        calls: AtomicU32::new(0),
        bytes: Default::default(),
    });
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Noop(ToolSpec {
        name: "noop".into(),
        description: "Does nothing quickly.".into(),
        parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        effect: Effect::ReadOnly,
    })));
    let runner = Runner::builder(store)
        .providers(ProviderSet::new(RetryPolicy::default()).with("openai", model.clone()))
        .tools(tools)
        .build();
    let mut agent = AgentConfig::new(
        "bench",
        ModelRef::parse("openai/bench").unwrap(),
        "Benchmark agent.",
        vec!["noop".into()],
    );
    agent.limits.max_turns = TURNS;
    agent.limits.max_tool_calls = TURNS * 2;
    // Keep the whole context inline (no file, no compaction) to measure its cost.
    agent.context.window_tokens = Some(1_047_576);
    agent.context.file_threshold_tokens = 500_000;
    let context = prose(context_chars);
    let trigger = TriggerEvent::from_cli(json!({"text": context}));

    // Warm up caches, the pool and the allocator.
    runner
        .run(&agent, &trigger, None, CancellationToken::new())
        .await
        .unwrap();

    let mut per_turn_us = Vec::with_capacity(RUNS);
    let cpu_before = cpu_seconds();
    let bytes_before = model.bytes.load(Ordering::Relaxed);
    let wall = Instant::now();
    for _ in 0..RUNS {
        let started = Instant::now();
        let out = runner
            .run(&agent, &trigger, None, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.turns, TURNS);
        per_turn_us.push(started.elapsed().as_secs_f64() * 1e6 / f64::from(TURNS));
    }
    let total_turns = f64::from(TURNS) * RUNS as f64;
    let cpu_per_turn_us = (cpu_seconds() - cpu_before) * 1e6 / total_turns;
    let wall_s = wall.elapsed().as_secs_f64();
    let avg_request_kb = (model.bytes.load(Ordering::Relaxed) - bytes_before) as f64 / total_turns / 1024.0;
    let med = median(&mut per_turn_us);
    let min = per_turn_us[0];
    let max = per_turn_us[per_turn_us.len() - 1];
    let counter = steward::tokens::TokenCounter::new();
    let tokens: u64 = context
        .as_bytes()
        .chunks(200_000)
        .map(|c| {
            counter
                .count(
                    steward::tokens::Encoding::O200k,
                    std::str::from_utf8(c).unwrap_or_default(),
                )
                .tokens
        })
        .sum();
    println!(
        "harness_turn [{label}]: {RUNS} runs x {TURNS} turns, {tokens} o200k tokens of context, avg request {avg_request_kb:.0} KiB"
    );
    println!("  wall per turn   median {med:.0} µs  (min {min:.0}, max {max:.0})");
    println!(
        "  turns/second    {:.0} (median), {:.0} overall",
        1e6 / med,
        total_turns / wall_s
    );
    println!(
        "  CPU per turn    {cpu_per_turn_us:.0} µs (process user+sys, all threads; 10 ms tick resolution)"
    );
}

#[async_trait]
impl steward::store::SealedStore for NullStore {
    async fn sealed_values(&self) -> Result<Vec<steward::store::SealedValue>, StoreError> {
        Ok(Vec::new())
    }
    async fn replace_sealed(
        &self,
        _value: &steward::store::SealedValue,
        _with: &[u8],
    ) -> Result<bool, StoreError> {
        Ok(false)
    }
}
