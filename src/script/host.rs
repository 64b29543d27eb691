//! The API a coordinator script sees: `trigger`, `vars`, `tool(name, args)`,
//! `subagent(name, prompt, files)`, `file_read`, `file_regex`, `files()`, `reply(text)`,
//! `log(text)` and `regex_find_all(pattern, text)`. Tool calls go through the same
//! registry, schema validation, events and spans as the LLM loop.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rhai::{Array, Dynamic, Engine, EvalAltResult, Map, Position};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::files::RunFiles;
use crate::run::Recorder;
use crate::skills::RunSkills;
use crate::tools::subagent::SubagentLauncher;
use crate::tools::{Effect, ToolCtx, ToolError, ToolRegistry};

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

fn fail<T>(message: impl Into<String>) -> RhaiResult<T> {
    Err(Box::new(EvalAltResult::ErrorRuntime(
        Dynamic::from(message.into()),
        Position::NONE,
    )))
}

/// Why the host stopped a script (beyond a plain script error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostStop {
    MaxToolCalls,
    FatalTool,
}

/// Everything the script API needs, shared by the registered functions.
pub struct Host {
    pub rt: tokio::runtime::Handle,
    pub agent: String,
    pub tools: Arc<ToolRegistry>,
    pub allowed: Vec<String>,
    pub mock: bool,
    pub recorder: Arc<Recorder>,
    pub files: Arc<RunFiles>,
    pub skills: Option<Arc<RunSkills>>,
    pub subagents: Option<Arc<dyn SubagentLauncher>>,
    pub cancel: CancellationToken,
    pub deadline: tokio::time::Instant,
    pub max_tool_calls: u32,
    pub calls: AtomicU32,
    pub stop: Mutex<Option<(HostStop, String)>>,
    pub replied: Mutex<Option<String>>,
}

impl Host {
    fn stop_with(&self, why: HostStop, message: String) -> Box<EvalAltResult> {
        *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some((why, message.clone()));
        Box::new(EvalAltResult::ErrorTerminated(
            Dynamic::from(message),
            Position::NONE,
        ))
    }

    /// Calls a tool like the LLM loop does: cap, events (flushed before the call), span,
    /// schema validation, result event.
    pub fn call_tool(&self, name: &str, args: Value) -> RhaiResult<Dynamic> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n > self.max_tool_calls {
            return Err(self.stop_with(
                HostStop::MaxToolCalls,
                format!("reached max_tool_calls ({})", self.max_tool_calls),
            ));
        }
        let call_id = format!("script_{n}");
        let arguments = args.to_string();
        let side_effect = self
            .tools
            .get(name)
            .is_some_and(|t| t.spec().effect == Effect::SideEffecting);
        self.recorder.event(
            "tool_call",
            json!({"call_id": call_id, "name": name, "arguments": arguments, "side_effect": side_effect}),
        );
        let ctx = ToolCtx {
            run_id: self.recorder.run_id().to_string(),
            agent: self.agent.clone(),
            call_id: call_id.clone(),
            cancel: self.cancel.child_token(),
            files: self.files.clone(),
            skills: self.skills.clone(),
            subagents: self.subagents.clone(),
            registry: Some(self.tools.clone()),
            mock: self.mock,
        };
        let span = tracing::info_span!(
            "execute_tool",
            otel.name = %format!("execute_tool {name}"),
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = %name,
            "gen_ai.tool.call.id" = %call_id,
            run_id = %self.recorder.run_id(),
        );
        let started = Instant::now();
        let result = self.rt.block_on(
            async {
                self.recorder
                    .flush()
                    .await
                    .map_err(|e| ToolError::Fatal(e.to_string()))?;
                match tokio::time::timeout_at(
                    self.deadline,
                    self.tools
                        .invoke(&self.allowed, name, &arguments, &ctx, self.mock),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Err(ToolError::Fatal(
                        "the run's timeout passed during the tool call".into(),
                    )),
                }
            }
            .instrument(span),
        );
        let duration_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(out) => {
                let text = out.to_model_text();
                self.recorder.event(
                    "tool_result",
                    json!({"call_id": call_id, "name": name, "ok": true, "bytes": text.len(), "duration_ms": duration_ms,
                           "content": crate::tokens::floor_char(&text, 16 * 1024)}),
                );
                rhai::serde::to_dynamic(out.value)
            }
            Err(e) => {
                let fatal = matches!(e, ToolError::Fatal(_));
                self.recorder.event(
                    "tool_result",
                    json!({"call_id": call_id, "name": name, "ok": false, "fatal": fatal, "bytes": 0, "duration_ms": duration_ms, "error": e.to_string()}),
                );
                if fatal {
                    return Err(self.stop_with(HostStop::FatalTool, format!("tool '{name}' failed: {e}")));
                }
                fail(format!("tool '{name}': {e}"))
            }
        }
    }
}

fn to_json(d: &Dynamic) -> RhaiResult<Value> {
    rhai::serde::from_dynamic::<Value>(d)
}

/// Registers the script API on `engine`.
pub fn register(engine: &mut Engine, host: Arc<Host>) {
    let h = host.clone();
    engine.register_fn("tool", move |name: &str, args: Map| -> RhaiResult<Dynamic> {
        h.call_tool(name, to_json(&Dynamic::from_map(args))?)
    });
    let h = host.clone();
    engine.register_fn("tool", move |name: &str| -> RhaiResult<Dynamic> {
        h.call_tool(name, json!({}))
    });
    let h = host.clone();
    engine.register_fn("file_read", move |id: &str| -> RhaiResult<Dynamic> {
        h.call_tool("file_read", json!({"id": id}))
    });
    let h = host.clone();
    engine.register_fn(
        "file_read",
        move |id: &str, start: i64, end: i64| -> RhaiResult<Dynamic> {
            h.call_tool(
                "file_read",
                json!({"id": id, "start_line": start, "end_line": end}),
            )
        },
    );
    let h = host.clone();
    engine.register_fn(
        "file_regex",
        move |id: &str, pattern: &str| -> RhaiResult<Dynamic> {
            h.call_tool("file_regex", json!({"id": id, "pattern": pattern}))
        },
    );
    let h = host.clone();
    engine.register_fn("files", move || -> RhaiResult<Dynamic> {
        rhai::serde::to_dynamic(h.files.list())
    });
    let h = host.clone();
    engine.register_fn(
        "subagent",
        move |name: &str, prompt: &str, files: Array| -> RhaiResult<Dynamic> {
            let Some(launcher) = h.subagents.clone() else {
                return fail("this agent cannot call subagents");
            };
            let ids: Vec<String> = files.iter().map(|f| f.to_string()).collect();
            let result =
                h.rt.block_on(launcher.launch(name, prompt, &ids, "script", h.cancel.child_token()));
            match result {
                Ok(text) => Ok(Dynamic::from(text)),
                Err(e) => fail(e),
            }
        },
    );
    let h = host.clone();
    engine.register_fn("reply", move |text: &str| {
        *h.replied.lock().unwrap_or_else(|e| e.into_inner()) = Some(text.to_string());
    });
    let h = host.clone();
    engine.register_fn("log", move |text: &str| {
        tracing::info!(run = %h.recorder.run_id(), "script: {}", h.recorder.content(text));
        h.recorder.event("script_log", json!({"text": text}));
    });
    engine.register_fn(
        "regex_find_all",
        |pattern: &str, text: &str| -> RhaiResult<Array> {
            let re = regex::RegexBuilder::new(pattern)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| format!("invalid regex: {e}"))?;
            Ok(re
                .find_iter(text)
                .take(10_000)
                .map(|m| Dynamic::from(m.as_str().to_string()))
                .collect())
        },
    );
}
