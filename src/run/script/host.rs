//! The API a coordinator script sees: `trigger`, `vars`, `tool(name, args)`,
//! `subagent(name, prompt, files)`, `file_read`, `file_regex`, `files()`, `reply(text)`,
//! `log(text)` and `regex_find_all(pattern, text)`. Tool calls go through the same
//! registry, schema validation, events and spans as the LLM loop.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rhai::{Array, Dynamic, Engine, EvalAltResult, Map, Position};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::run::Recorder;
use crate::run::events::RunEvent;
use crate::run::gateway::Gateway;
use crate::tools::ToolError;

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
    MaxCost,
}

/// Default cap on `log()` lines per run.
pub const MAX_LOG_LINES: u32 = 1_000;
/// Default cap on `log()` bytes per run.
pub const MAX_LOG_BYTES: usize = 1024 * 1024;

/// What a run's script may still log; past either cap, one `log truncated` event is
/// recorded and later lines are dropped.
#[derive(Debug)]
pub struct LogBudget {
    pub lines_left: u32,
    pub bytes_left: usize,
    pub truncated: bool,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget {
            lines_left: MAX_LOG_LINES,
            bytes_left: MAX_LOG_BYTES,
            truncated: false,
        }
    }
}

/// Everything the script API needs, shared by the registered functions.
pub struct Host {
    pub rt: tokio::runtime::Handle,
    /// Every tool call goes through it (grant, cap, records, spans).
    pub gateway: Arc<Gateway>,
    pub cancel: CancellationToken,
    pub deadline: tokio::time::Instant,
    /// The limit the deadline came from, for messages.
    pub timeout: Duration,
    /// Numbers the script's calls (`script_1`, ...).
    pub calls: AtomicU32,
    pub log: Mutex<LogBudget>,
    pub stop: Mutex<Option<(HostStop, String)>>,
    pub replied: Mutex<Option<String>>,
    /// The agent's `max_cost_usd` and what the script's subagents (its only model
    /// calls) have spent: checked before each call, so a script stops once it is spent.
    pub cost_cap: Option<(f64, Arc<crate::run::subagents::ChildTotals>)>,
}

impl Host {
    fn stop_with(&self, why: HostStop, message: String) -> Box<EvalAltResult> {
        *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = Some((why, message.clone()));
        Box::new(EvalAltResult::ErrorTerminated(
            Dynamic::from(message),
            Position::NONE,
        ))
    }

    pub(crate) fn recorder(&self) -> &Recorder {
        self.gateway.recorder()
    }

    /// Calls a tool through the gateway under the run's deadline.
    pub fn call_tool(&self, name: &str, args: Value) -> RhaiResult<Dynamic> {
        if let Some((cap, spent)) = &self.cost_cap
            && spent.spent() >= *cap
        {
            return Err(self.stop_with(
                HostStop::MaxCost,
                format!("spent ${:.4}, over max_cost_usd ${cap}", spent.spent()),
            ));
        }
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let call_id = format!("script_{n}");
        let arguments = args.to_string();
        let call = self
            .gateway
            .call(&call_id, name, &arguments, None, self.cancel.child_token());
        let result = self.rt.block_on(async {
            match tokio::time::timeout_at(self.deadline, call).await {
                Ok(r) => r,
                Err(_) => Err(ToolError::Fatal(
                    "the run's timeout passed during the tool call".into(),
                )),
            }
        });
        match result {
            Ok(out) => rhai::serde::to_dynamic(out.value),
            Err(ToolError::Fatal(e)) if self.gateway.cap_hit() => Err(self.stop_with(
                HostStop::MaxToolCalls,
                format!("reached max_tool_calls ({}): {e}", self.gateway.max_tool_calls()),
            )),
            Err(ToolError::Fatal(e)) => {
                Err(self.stop_with(HostStop::FatalTool, format!("tool '{name}' failed: {e}")))
            }
            Err(e) => fail(format!("tool '{name}': {e}")),
        }
    }

    /// `log(text)`: to the run's events and the service log, within the run's budget.
    fn log(&self, text: &str) {
        let mut budget = self.log.lock().unwrap_or_else(|e| e.into_inner());
        if budget.truncated {
            return;
        }
        if budget.lines_left == 0 || text.len() > budget.bytes_left {
            budget.truncated = true;
            drop(budget);
            tracing::warn!(run = %self.recorder().run_id(), "script log truncated");
            self.recorder().record(RunEvent::ScriptLog {
                text: None,
                truncated: Some(true),
                note: Some(format!(
                    "log truncated: a run keeps at most {MAX_LOG_LINES} lines and {MAX_LOG_BYTES} bytes of script log"
                )),
            });
            return;
        }
        budget.lines_left -= 1;
        budget.bytes_left -= text.len();
        drop(budget);
        // A log line in a span is exported with the trace: the text only where content
        // may be captured, else its size (the run's own event keeps it).
        if self.gateway.captures_content() {
            tracing::info!(run = %self.recorder().run_id(), "script: {text}");
        } else {
            tracing::info!(run = %self.recorder().run_id(), bytes = text.len(), "script log line");
        }
        let text = self.recorder().wrap(text);
        self.recorder().record(RunEvent::ScriptLog {
            text: Some(text),
            truncated: None,
            note: None,
        });
    }
}

fn to_json(d: &Dynamic) -> RhaiResult<Value> {
    crate::sandbox::check_depth(d)?;
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
        rhai::serde::to_dynamic(h.gateway.files().list())
    });
    let h = host.clone();
    engine.register_fn(
        "subagent",
        move |name: &str, prompt: &str, files: Array| -> RhaiResult<Dynamic> {
            // Through the gateway like any tool call: the agent's `subagents:` list,
            // `max_tool_calls`, the run's record, and custody of what the child read.
            let ids: Vec<String> = files.iter().map(|f| f.to_string()).collect();
            h.call_tool(
                crate::tools::subagent::SUBAGENT_TOOL,
                json!({"name": name, "prompt": prompt, "files": ids}),
            )
        },
    );
    let h = host.clone();
    engine.register_fn("reply", move |text: &str| {
        *h.replied.lock().unwrap_or_else(|e| e.into_inner()) = Some(text.to_string());
    });
    let h = host.clone();
    engine.register_fn("log", move |text: &str| h.log(text));
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
