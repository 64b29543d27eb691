//! The context tax: prompt caches that hit on every provider (Anthropic markers against
//! a fake that models prefix caching, OpenAI's `prompt_cache_key`), compaction that
//! reads from cache, true prices (unknown, never 0), and repeated reads served from
//! the run instead of fetched again.

mod support;

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use steward::config::{AgentConfig, Config, Known};
use steward::provider::pricing::Prices;
use steward::tools::{Effect, Tool, ToolCtx, ToolOutput, ToolRegistry, ToolResult, ToolSpec};
use steward::triggers::TriggerEvent;
use steward::types::ModelRef;
use support::prompt_cache::{CacheUse, PromptCache, extends_prefix};
use support::*;
use tokio_util::sync::CancellationToken;

/// The number of tool results in an Anthropic request so far.
fn results_so_far(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .count()
}

/// A fake Anthropic whose usage comes from a [`PromptCache`]: `answer(body)` picks
/// the content; every request's cache use is kept in order.
fn caching_anthropic(
    fake: &FakeModel,
    answer: impl Fn(&Value) -> Vec<Value> + Send + Sync + 'static,
) -> Arc<Mutex<Vec<CacheUse>>> {
    let cache = Arc::new(Mutex::new(PromptCache::default()));
    let uses = Arc::new(Mutex::new(Vec::new()));
    let seen = uses.clone();
    fake.handler(move |body| {
        let used = cache.lock().unwrap().serve(body);
        seen.lock().unwrap().push(used);
        let content = answer(body);
        let stop = if content.iter().any(|c| c["type"] == "tool_use") {
            "tool_use"
        } else {
            "end_turn"
        };
        let mut message = anthropic_message(content, stop);
        message["usage"] = used.usage(50);
        Reply::ok(message)
    });
    uses
}

/// What `uses` cost at claude-sonnet-4-5's list prices, by hand (50 output tokens each).
fn priced_by_hand(uses: &[CacheUse]) -> f64 {
    uses.iter()
        .map(|u| {
            (u.uncached as f64 * 3.0 + u.read as f64 * 0.3 + u.written as f64 * 3.75 + 50.0 * 15.0) / 1e6
        })
        .sum()
}

#[test]
fn a_long_anthropic_run_reads_nine_tenths_of_its_input_from_cache_through_steward_run() {
    const TURNS: usize = 30;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fake = rt.block_on(FakeModel::start());
    let uses = caching_anthropic(&fake, |body| {
        let n = results_so_far(body);
        if n < TURNS {
            let start = n * 4096;
            vec![
                json!({"type": "tool_use", "id": format!("toolu_{n:02}"), "name": "file_read",
                        "input": {"id": "f_1", "start_byte": start, "end_byte": start + 4096}}),
            ]
        } else {
            vec![json!({"type": "text", "text": "Read it all."})]
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // A 6 KB system prompt, and a file of 4 KB pieces.
    let prompt: String = (0..100)
        .map(|i| format!("Rule {i:03}: read every part of the file and keep the numbers exact.\n"))
        .collect();
    assert!(prompt.len() >= 6_000);
    write(root, "prompts/p.md", &prompt);
    write(
        root,
        "agents/reader.yaml",
        "model: anthropic/claude-sonnet-4-5\nprompt: prompts/p.md\ntools: [file_read]\nlimits: {max_turns: 40}\n",
    );
    let data: String = (0..TURNS * 4096 / 64)
        .map(|i| format!("{:063}\n", i * 7919))
        .collect();
    write(root, "data.txt", &data);
    write(
        root,
        "event.json",
        r#"{"text": "Read the whole file, piece by piece."}"#,
    );
    let out = Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["run", "reader", "--event"])
        .arg(root.join("event.json"))
        .arg("--file")
        .arg(root.join("data.txt"))
        .arg("--json")
        .env("STEWARD_ROOT", root)
        .env("DATABASE_URL", format!("sqlite://{}", root.join("db").display()))
        .env("ANTHROPIC_BASE_URL", &fake.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env_remove("OPENAI_API_KEY")
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "succeeded", "{report}");

    // Every request extends the one before it: a marker never moved content.
    let requests = fake.requests();
    assert_eq!(requests.len(), TURNS + 1);
    for pair in requests.windows(2) {
        assert!(
            extends_prefix(&pair[0].body, &pair[1].body),
            "a request changed the prefix it shared"
        );
        let markers = pair[1]
            .raw
            .windows(15)
            .filter(|w| w == b"\"cache_control\"")
            .count();
        assert!(markers <= 4, "{markers} markers");
    }

    // The bill: what the fake says, priced as by hand, and mostly read from cache.
    let uses = uses.lock().unwrap().clone();
    let bill = &report["token_bill"];
    assert_eq!(bill["calls"].as_array().unwrap().len(), TURNS + 1);
    let read: u64 = uses.iter().map(|u| u.read).sum();
    let total: u64 = uses.iter().map(CacheUse::total).sum();
    assert_eq!(bill["cache_read_tokens"], read);
    assert_eq!(bill["input_tokens"], total);
    let hit = bill["cache_hit"].as_f64().unwrap();
    assert!(hit >= 0.9, "only {:.1}% read from cache", hit * 100.0);
    let by_hand = priced_by_hand(&uses);
    let cost = bill["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - by_hand).abs() / by_hand < 0.01,
        "billed {cost}, by hand {by_hand}"
    );
    assert!(
        bill["cache_saved_usd"].as_f64().unwrap() > cost,
        "the cache saved more than the run cost"
    );

    // The agent's hit rate over the last day.
    let stats = Command::new(env!("CARGO_BIN_EXE_steward"))
        .args(["stats", "--since", "24h", "--json"])
        .env("STEWARD_ROOT", root)
        .env("DATABASE_URL", format!("sqlite://{}", root.join("db").display()))
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats[0]["agent"], "reader");
    assert_eq!(stats[0]["runs"], 1);
    assert!(
        (stats[0]["cache_hit"].as_f64().unwrap() - hit).abs() < 1e-9,
        "{stats}"
    );
}

/// A read-only tool that answers 4 KB for any `n` and counts its calls.
struct ReadChunk(Arc<AtomicU32>);

/// A tool with a side effect that counts its calls.
struct WriteNote(Arc<AtomicU32>);

fn spec(name: &str, effect: Effect) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("{name} (test)"),
        parameters: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        effect,
    }
}

#[async_trait::async_trait]
impl Tool for ReadChunk {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::OnceLock<ToolSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| spec("read_chunk", Effect::ReadOnly))
    }
    async fn call(&self, _ctx: &ToolCtx, args: Value) -> ToolResult {
        self.0.fetch_add(1, Ordering::SeqCst);
        let n = args["n"].as_u64().unwrap_or(0);
        // About 4 KB that tokenizes like real data (not one repeated letter).
        let body: String = (0..512u64).map(|i| format!("{:07} ", i * 7919 + n)).collect();
        Ok(ToolOutput::text(format!("chunk {n}: {body}")))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

#[async_trait::async_trait]
impl Tool for WriteNote {
    fn spec(&self) -> &ToolSpec {
        static SPEC: std::sync::OnceLock<ToolSpec> = std::sync::OnceLock::new();
        SPEC.get_or_init(|| spec("write_note", Effect::SideEffecting))
    }
    async fn call(&self, _ctx: &ToolCtx, _args: Value) -> ToolResult {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::text("noted"))
    }
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

struct Counters {
    reads: Arc<AtomicU32>,
    writes: Arc<AtomicU32>,
}

fn tools() -> (ToolRegistry, Counters) {
    let counters = Counters {
        reads: Arc::default(),
        writes: Arc::default(),
    };
    let mut reg = ToolRegistry::core(Default::default());
    reg.register(Arc::new(ReadChunk(counters.reads.clone())));
    reg.register(Arc::new(WriteNote(counters.writes.clone())));
    (reg, counters)
}

fn agent(name: &str, model: &str) -> AgentConfig {
    AgentConfig::new(
        name,
        ModelRef::parse(model).unwrap(),
        "You read chunks.",
        vec!["read_chunk".into(), "write_note".into()],
    )
}

/// Runs `a` on the plain trigger.
async fn go(runner: &steward::run::Runner, a: &AgentConfig) -> steward::run::RunOutcome {
    runner
        .run(a, &trigger(), None, CancellationToken::new())
        .await
        .unwrap()
}

fn trigger() -> TriggerEvent {
    TriggerEvent::from_cli(json!({"text": "go"}))
}

#[tokio::test]
async fn a_repeated_read_comes_from_the_run_and_a_write_is_never_repeated_from_it() {
    let fake = FakeModel::start().await;
    for (id, name, args) in [
        ("c1", "read_chunk", r#"{"n": 1}"#),
        ("c2", "write_note", r#"{"n": 1}"#),
        // The same read, spelt differently: still the same call.
        ("c3", "read_chunk", r#"{ "n" : 1 }"#),
        ("c4", "write_note", r#"{"n": 1}"#),
        ("c5", "read_chunk", r#"{"n": 2}"#),
    ] {
        fake.push(Reply::ok(openai_tools(&[(id, name, args)])));
    }
    fake.push(Reply::ok(openai_text("done")));
    let (reg, counters) = tools();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let out = runner
        .run(
            &agent("reader", "openai/gpt-4.1"),
            &trigger(),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(out.final_text.as_deref(), Some("done"));
    assert_eq!(counters.reads.load(Ordering::SeqCst), 2, "n=1 once, n=2 once");
    assert_eq!(counters.writes.load(Ordering::SeqCst), 2, "every write runs");
    let last = fake.requests().last().unwrap().body.clone();
    let repeat = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "c3")
        .unwrap();
    let text = repeat["content"].as_str().unwrap();
    assert!(
        text.starts_with("[steward: the same call as c1 earlier in this run"),
        "{text}"
    );
    assert!(text.contains("chunk 1: 0000001 "));
}

#[tokio::test]
async fn openai_requests_carry_one_cache_key_per_agent_and_the_retention_asked_for() {
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("ok")));
    let (reg, _) = tools();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    let mut hourly = agent("hourly", "openai/gpt-4.1");
    hourly.context.prompt_cache_retention = Some("24h".into());
    for a in [
        &agent("reader", "openai/gpt-4.1"),
        &agent("reader", "openai/gpt-4.1"),
        &hourly,
    ] {
        runner
            .run(a, &trigger(), None, CancellationToken::new())
            .await
            .unwrap();
    }
    let bodies: Vec<Value> = fake.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies[0]["prompt_cache_key"], "steward:reader");
    assert_eq!(bodies[0]["prompt_cache_key"], bodies[1]["prompt_cache_key"]);
    assert_eq!(bodies[2]["prompt_cache_key"], "steward:hourly");
    assert!(bodies[0].get("prompt_cache_retention").is_none());
    assert_eq!(bodies[2]["prompt_cache_retention"], "24h");
    // A private run's prompt is kept no longer than the provider's default.
    let mut private = trigger();
    private.private = true;
    runner
        .run(&hourly, &private, None, CancellationToken::new())
        .await
        .unwrap();
    let last = fake.requests().last().unwrap().body.clone();
    assert_eq!(last["prompt_cache_key"], "steward:hourly");
    assert!(last.get("prompt_cache_retention").is_none(), "{last}");
}

#[tokio::test]
async fn a_server_that_refuses_the_cache_fields_stops_getting_them() {
    let fake = FakeModel::start().await;
    // vLLM's answer to a field it does not know.
    fake.handler(|body| {
        if body.get("prompt_cache_key").is_some() {
            Reply::status(
                400,
                json!({"object": "error", "message": "[{'type': 'extra_forbidden', 'loc': ('body', 'prompt_cache_key'), 'msg': 'Extra inputs are not permitted'}]",
                       "type": "BadRequestError", "param": null, "code": 400}),
            )
        } else {
            Reply::ok(openai_text("ok"))
        }
    });
    let (reg, _) = tools();
    let (_dir, runner) = runner(providers(Some(&fake), None), reg, false).await;
    for _ in 0..2 {
        let out = runner
            .run(
                &agent("reader", "openai/gpt-4.1"),
                &trigger(),
                None,
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert_eq!(out.final_text.as_deref(), Some("ok"));
    }
    let with_key: Vec<bool> = fake
        .requests()
        .iter()
        .map(|r| r.body.get("prompt_cache_key").is_some())
        .collect();
    assert_eq!(with_key, [true, false, false], "refused once, then never sent");

    // Turned off up front (OPENAI_CACHE_FIELDS=off): never sent at all.
    let quiet = FakeModel::start().await;
    quiet.always(Reply::ok(openai_text("ok")));
    let endpoint = steward::provider::Endpoint {
        base_url: format!("{}/v1", quiet.url),
        api_key: Some("sk-test".into()),
    };
    let openai = steward::provider::openai::OpenAi::new(
        steward::http::client().unwrap(),
        endpoint,
        std::time::Duration::from_secs(5),
    )
    .with_cache_fields(false);
    let set = steward::provider::ProviderSet::new(fast_retry()).with("openai", Arc::new(openai));
    let (reg, _) = tools();
    let (_dir, runner) = support::runner(set, reg, false).await;
    go(&runner, &agent("reader", "openai/gpt-4.1")).await;
    assert!(quiet.requests()[0].body.get("prompt_cache_key").is_none());
}

#[tokio::test]
async fn compaction_asks_for_the_summary_on_the_runs_own_cached_prefix() {
    let fake = FakeModel::start().await;
    // Turns counted across compactions (which fold earlier results into a summary).
    let turns = AtomicU32::new(0);
    let uses = caching_anthropic(&fake, move |body| {
        let last = body["messages"].as_array().unwrap().last().unwrap();
        let asks_summary = last["content"].to_string().contains("must be compacted now");
        let n = if asks_summary {
            0
        } else {
            turns.fetch_add(1, Ordering::SeqCst)
        };
        if asks_summary {
            vec![json!({"type": "text", "text": "Summary: read chunks 0 to 30."})]
        } else if n < 60 {
            vec![
                json!({"type": "tool_use", "id": format!("toolu_{n:02}"), "name": "read_chunk", "input": {"n": n}}),
            ]
        } else {
            vec![json!({"type": "text", "text": "done"})]
        }
    });
    let (reg, _) = tools();
    let (_dir, runner) = runner(providers(None, Some(&fake)), reg, false).await;
    let mut a = agent("reader", "anthropic/claude-sonnet-4-5");
    // A system prompt long enough to be cached on its own (over 1,024 tokens).
    let rules: String = (0..100)
        .map(|i| format!("Rule {i:03}: keep every number exact.\n"))
        .collect();
    a.prompt.as_mut().unwrap().text = rules;
    a.context.window_tokens = Some(48_000);
    a.limits.max_tool_calls = 100;
    a.limits.max_turns = 100;
    let out = go(&runner, &a).await;
    assert!(out.compactions >= 1, "{out:?}");
    assert_eq!(out.final_text.as_deref(), Some("done"));
    let requests = fake.requests();
    let at = requests
        .iter()
        .position(|r| r.body["messages"].to_string().contains("must be compacted now"))
        .expect("a summary request");
    // The summary request is the run's request as it stood, plus the instruction: it
    // extends the turn before it and reads nearly all of it from cache.
    assert!(extends_prefix(&requests[at - 1].body, &requests[at].body));
    assert_eq!(requests[at].body["tools"], requests[at - 1].body["tools"]);
    assert_eq!(requests[at].body["system"], requests[at - 1].body["system"]);
    let used = uses.lock().unwrap()[at];
    assert!(used.read as f64 >= 0.9 * used.total() as f64, "{used:?}");
    // After it, tools and system are unchanged, so that prefix still hits.
    let after = &requests[at + 1].body;
    assert_eq!(after["tools"].to_string(), requests[0].body["tools"].to_string());
    assert_eq!(
        after["system"].to_string(),
        requests[0].body["system"].to_string()
    );
    // The tools and system prompt before the first message still come from cache.
    assert!(
        uses.lock().unwrap()[at + 1].read >= 1024,
        "{:?}",
        uses.lock().unwrap()[at + 1]
    );
    assert!(
        after["messages"]
            .to_string()
            .contains("Summary: read chunks 0 to 30")
    );
}

#[tokio::test]
async fn a_subagents_requests_keep_their_prefix_too() {
    let fake = FakeModel::start().await;
    caching_anthropic(&fake, |body| {
        let system = body["system"].to_string();
        let n = results_so_far(body);
        if system.contains("You dig.") {
            if n < 4 {
                vec![
                    json!({"type": "tool_use", "id": format!("toolu_s{n}"), "name": "read_chunk", "input": {"n": n}}),
                ]
            } else {
                vec![json!({"type": "text", "text": "dug"})]
            }
        } else if n == 0 {
            vec![json!({"type": "tool_use", "id": "toolu_p0", "name": "subagent",
                        "input": {"name": "digger", "prompt": "Read chunks 0 to 3."}})]
        } else {
            vec![json!({"type": "text", "text": "done"})]
        }
    });
    let (reg, _) = tools();
    let dir = tempfile::tempdir().unwrap();
    let mut digger = AgentConfig::new(
        "digger",
        ModelRef::parse("anthropic/claude-sonnet-4-5").unwrap(),
        "You dig.",
        vec!["read_chunk".into()],
    );
    digger.description = "Digs.".into();
    let store = steward::store::SqliteStore::open(&dir.path().join("db"))
        .await
        .unwrap();
    let runner = steward::run::Runner::builder(Arc::new(store))
        .providers(providers(None, Some(&fake)))
        .tools(reg)
        .tokens(tokens())
        .subagents([("digger".to_string(), Arc::new(digger))].into())
        .build();
    let mut parent = AgentConfig::new(
        "reader",
        ModelRef::parse("anthropic/claude-sonnet-4-5").unwrap(),
        "You read chunks.",
        vec!["read_chunk".into(), "subagent".into()],
    );
    parent.subagents = vec!["digger".into()];
    let out = go(&runner, &parent).await;
    assert_eq!(out.final_text.as_deref(), Some("done"));
    let child: Vec<Value> = fake
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| b["system"].to_string().contains("You dig."))
        .collect();
    assert_eq!(child.len(), 5);
    for pair in child.windows(2) {
        assert!(extends_prefix(&pair[0], &pair[1]));
    }
}

fn known() -> Known {
    Known {
        tools: ["read_chunk".to_string()].into(),
        skills: Default::default(),
    }
}

#[tokio::test]
async fn an_unpriced_models_cost_is_unknown_and_a_budget_on_it_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You help.");
    write(
        root,
        "agents/local.yaml",
        "model: openai/llama3.3-70b\nprompt: prompts/p.md\ntools: [read_chunk]\nlimits: {max_cost_usd: 0.5}\n",
    );
    let err = Config::load(root, &known()).unwrap_err().to_string();
    assert!(
        err.contains("agents/local.yaml:4:")
            && err.contains("max_cost_usd needs a price for openai/llama3.3-70b")
            && err.contains("prices.yaml"),
        "{err}"
    );
    // Priced in the deployment's own file: fine.
    write(
        root,
        "prices.yaml",
        "openai:\n  llama3.3-70b: {input: 0.1, output: 0.1}\n",
    );
    let config = Config::load(root, &known()).unwrap();
    assert!(config.unpriced().is_empty());
    assert!(config.prices.price("openai", "llama3.3-70b").is_some());

    // Without a price a run's cost is unknown, not 0.
    let fake = FakeModel::start().await;
    fake.always(Reply::ok(openai_text("ok")));
    let (reg, _) = tools();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        steward::store::SqliteStore::open(&dir.path().join("db"))
            .await
            .unwrap(),
    );
    let runner = steward::run::Runner::builder(store.clone())
        .providers(providers(Some(&fake), None).with_prices(Arc::new(Prices::shipped())))
        .tools(reg)
        .tokens(tokens())
        .build();
    let out = runner
        .run(
            &agent("local", "openai/llama3.3-70b"),
            &trigger(),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(out.cost_unknown);
    let report = steward::run::report::RunReport::load(store.as_ref(), &out.run_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.token_bill.cost_usd, None);
    assert!(report.token_bill.render().contains("unknown"));
}

/// `steward validate` warns about unpriced models and still passes.
#[test]
fn validate_warns_about_an_unpriced_model() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "prompts/p.md", "You help.");
    write(
        root,
        "agents/local.yaml",
        "model: openai/llama3.3-70b\nprompt: prompts/p.md\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_steward"))
        .arg("validate")
        .env("STEWARD_ROOT", root)
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: agent local uses openai/llama3.3-70b, which has no price"),
        "{err}"
    );
}

#[tokio::test]
async fn compaction_stays_under_a_long_context_price_tier_unless_told_otherwise() {
    let fake = FakeModel::start().await;
    let set = providers(Some(&fake), Some(&fake));
    let sonnet = set
        .chain(&[ModelRef::parse("anthropic/claude-sonnet-4-5").unwrap()])
        .unwrap();
    let gpt = set.chain(&[ModelRef::parse("openai/gpt-4.1").unwrap()]).unwrap();
    // Sonnet with its 1M-token window bills input above 200k at twice the rate.
    let mut a = agent("reader", "anthropic/claude-sonnet-4-5");
    a.context.window_tokens = Some(1_000_000);
    assert_eq!(steward::run::llm::compact_limit(&a, &sonnet, 1_000_000), 180_000);
    a.context.stay_under_price_tier = false;
    assert_eq!(steward::run::llm::compact_limit(&a, &sonnet, 1_000_000), 800_000);
    // No tier: the window decides.
    let b = agent("reader", "openai/gpt-4.1");
    assert_eq!(steward::run::llm::compact_limit(&b, &gpt, 1_047_576), 838_060);
}
