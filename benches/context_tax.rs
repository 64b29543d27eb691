//! The context tax, against a fake Anthropic that models its prompt cache (markers
//! write prefixes, a lookup tries 20 blocks back, prefixes under 1,024 tokens are not
//! kept; tests/support/prompt_cache.rs):
//!
//! 1. 20 turns of 4 KB tool results under a 6 KB system prompt: the share of input
//!    read from cache and the input bill against the same requests uncached, for
//!    steward's markers and for the old layout (the system prompt marked alone, the
//!    same requests otherwise). Goals: at least 90% read, at most 0.22x the bill.
//! 2. A compaction of a conversation of about 150,000 tokens: the share of the
//!    summary request read from cache. Goal: at least 90%.
//! 3. The run's reported cost against the fake's usage priced by hand: within 1%.
//!
//! The cache is deterministic, so these are exact figures, not timings; each scenario
//! runs once (`cargo bench --bench context_tax`).

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use steward::config::AgentConfig;
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::prompt_cache::{CacheUse, PromptCache};
use support::*;
use tokio_util::sync::CancellationToken;

/// USD per million tokens of claude-sonnet-4-5 (the shipped prices.yaml).
const INPUT: f64 = 3.0;
const READ: f64 = 0.3;
const WRITE: f64 = 3.75;
const OUTPUT: f64 = 15.0;
const OUTPUT_TOKENS: u64 = 50;

/// A read-only tool answering `bytes` of data-like text for each `n`.
struct Chunk {
    spec: ToolSpec,
    bytes: usize,
}

#[async_trait::async_trait]
impl Tool for Chunk {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        let n = args["n"].as_u64().unwrap_or(0);
        let body: String = (0..self.bytes as u64 / 8)
            .map(|i| format!("{:07} ", i * 7919 + n))
            .collect();
        Ok(ToolOutput::text(body))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

fn registry(bytes: usize) -> ToolRegistry {
    let mut reg = ToolRegistry::core(Default::default());
    reg.register(Arc::new(Chunk {
        spec: ToolSpec {
            name: "read_chunk".into(),
            description: "Reads one chunk of the data set.".into(),
            parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
            effect: Effect::ReadOnly,
        },
        bytes,
    }));
    reg
}

/// The same request with only the system prompt marked (steward's layout before).
fn old_layout(body: &Value) -> Value {
    let mut old = body.clone();
    for t in old["tools"].as_array_mut().into_iter().flatten() {
        t.as_object_mut().map(|o| o.remove("cache_control"));
    }
    for m in old["messages"].as_array_mut().into_iter().flatten() {
        for b in m["content"].as_array_mut().into_iter().flatten() {
            b.as_object_mut().map(|o| o.remove("cache_control"));
        }
    }
    old
}

struct Recorded {
    now: Vec<CacheUse>,
    before: Vec<CacheUse>,
    summary_at: Option<usize>,
}

/// Starts the caching fake: `turns` tool calls (each a new chunk), then an answer; a
/// request ending in steward's compaction instruction gets a summary.
async fn fake(turns: usize) -> (FakeModel, Arc<Mutex<Recorded>>) {
    let fake = FakeModel::start().await;
    let recorded = Arc::new(Mutex::new(Recorded {
        now: Vec::new(),
        before: Vec::new(),
        summary_at: None,
    }));
    let calls = AtomicUsize::new(0);
    let r = recorded.clone();
    // Two caches: one sees steward's requests, the other the same with the old markers.
    let now_cache = Mutex::new(PromptCache::default());
    let before_cache = Mutex::new(PromptCache::default());
    fake.handler(move |body| {
        let used = now_cache.lock().unwrap().serve(body);
        let old = before_cache.lock().unwrap().serve(&old_layout(body));
        let mut rec = r.lock().unwrap();
        rec.now.push(used);
        rec.before.push(old);
        let last = body["messages"].as_array().unwrap().last().unwrap().to_string();
        let content = if last.contains("must be compacted now") {
            rec.summary_at = Some(rec.now.len() - 1);
            vec![json!({"type": "text", "text": "Summary: chunks read so far, numbers kept in the transcript file."})]
        } else {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n < turns {
                vec![json!({"type": "tool_use", "id": format!("toolu_{n:03}"), "name": "read_chunk", "input": {"n": n}})]
            } else {
                vec![json!({"type": "text", "text": "Done."})]
            }
        };
        let stop = if content[0]["type"] == "tool_use" { "tool_use" } else { "end_turn" };
        let mut message = anthropic_message(content, stop);
        message["usage"] = used.usage(OUTPUT_TOKENS);
        Reply::ok(message)
    });
    (fake, recorded)
}

fn agent(max_turns: u32) -> AgentConfig {
    // About 6 KB of instructions.
    let prompt: String = (0..100)
        .map(|i| format!("Rule {i:03}: read every chunk and keep its numbers exact.\n"))
        .collect();
    let mut a = AgentConfig::new(
        "reader",
        ModelRef::parse("anthropic/claude-sonnet-4-5").unwrap(),
        &prompt,
        vec!["read_chunk".into()],
    );
    a.limits.max_turns = max_turns;
    a.limits.max_tool_calls = max_turns;
    a
}

fn input_cost(u: &CacheUse) -> f64 {
    (u.uncached as f64 * INPUT + u.read as f64 * READ + u.written as f64 * WRITE) / 1e6
}

fn uncached_cost(u: &CacheUse) -> f64 {
    u.total() as f64 * INPUT / 1e6
}

fn share(uses: &[CacheUse]) -> (f64, f64) {
    let read: u64 = uses.iter().map(|u| u.read).sum();
    let total: u64 = uses.iter().map(CacheUse::total).sum();
    let bill: f64 = uses.iter().map(input_cost).sum();
    let full: f64 = uses.iter().map(uncached_cost).sum();
    (read as f64 / total as f64, bill / full)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // 1. Twenty turns of 4 KB results.
    let (model, recorded) = fake(20).await;
    let (_dir, first) = runner(providers(None, Some(&model)), registry(4096), false).await;
    let trigger = TriggerEvent::from_cli(json!({"text": "Read chunks 0 to 19."}));
    let out = first
        .run(&agent(30), &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    let rec = std::mem::replace(
        &mut *recorded.lock().unwrap(),
        Recorded {
            now: Vec::new(),
            before: Vec::new(),
            summary_at: None,
        },
    );
    let (hit, ratio) = share(&rec.now);
    let (old_hit, old_ratio) = share(&rec.before);
    println!(
        "20 turns of 4 KB tool results under a 6 KB system prompt ({} requests):",
        rec.now.len()
    );
    println!(
        "  steward's markers:   {:.1}% of input read from cache, input bill {:.3}x uncached",
        hit * 100.0,
        ratio
    );
    println!(
        "  system marked alone: {:.1}% of input read from cache, input bill {:.3}x uncached",
        old_hit * 100.0,
        old_ratio
    );
    // 3. The reported cost against the fake's usage priced by hand.
    let by_hand: f64 = rec
        .now
        .iter()
        .map(|u| input_cost(u) + OUTPUT_TOKENS as f64 * OUTPUT / 1e6)
        .sum();
    println!(
        "  cost reported ${:.6}, priced by hand ${:.6} ({:+.3}%)",
        out.cost_usd,
        by_hand,
        (out.cost_usd - by_hand) / by_hand * 100.0
    );

    // 2. A conversation of about 150,000 tokens, compacted.
    let (model, recorded) = fake(200).await;
    let (_dir2, second) = runner(providers(None, Some(&model)), registry(16 * 1024), false).await;
    let mut a = agent(200);
    a.context.compact_at = 0.75;
    let trigger = TriggerEvent::from_cli(json!({"text": "Read every chunk."}));
    let out = second
        .run(&a, &trigger, None, CancellationToken::new())
        .await
        .unwrap();
    let rec = recorded.lock().unwrap();
    match rec.summary_at {
        Some(at) => {
            let u = rec.now[at];
            println!(
                "compaction of a {}-token conversation: {:.1}% of the summary request read from cache ({} compactions in {} turns)",
                u.total(),
                u.read as f64 / u.total() as f64 * 100.0,
                out.compactions,
                out.turns
            );
        }
        None => println!("compaction: none happened ({out:?})"),
    }
}
