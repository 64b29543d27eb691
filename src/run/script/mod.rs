//! Code-driven workflows: Rhai scripts that call the same tools as the LLM loop and ask
//! an LLM (through `subagent`) only where judgment is needed.

pub mod host;

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use rhai::{Dynamic, Scope};
use serde_json::Value;

use crate::sandbox::{self, SandboxLimits};

use crate::run::Termination;
use crate::triggers::TriggerEvent;
use crate::types::RunOutcome;
use host::{Host, HostStop};

/// Runs `source` (from `path`, for messages) on a blocking thread under the sandbox and
/// the run's deadline, and maps how it ended onto the same termination reasons as LLM runs.
pub async fn run(
    path: &str,
    source: &str,
    limits: &SandboxLimits,
    host: Arc<Host>,
    trigger: &TriggerEvent,
    vars: &Value,
) -> RunOutcome {
    let deadline = host.deadline.into_std();
    let mut engine = sandbox::engine(limits, Some(deadline), Some(host.cancel.clone()));
    host::register(&mut engine, host.clone());
    let ast = match engine.compile(source) {
        Ok(a) => a,
        Err(e) => return failed(Termination::ScriptError, format!("{path}: {e}"), &host),
    };
    let mut scope = Scope::new();
    scope.push_constant(
        "trigger",
        rhai::serde::to_dynamic(trigger).unwrap_or(Dynamic::UNIT),
    );
    scope.push_constant("vars", rhai::serde::to_dynamic(vars).unwrap_or(Dynamic::UNIT));
    let cancel = host.cancel.clone();
    // Entered on the script's thread, so the tool calls it makes are its children.
    let span = tracing::info_span!(
        "run_script",
        otel.name = %format!("run_script {path}"),
        "steward.script.path" = path,
        "steward.tool_calls" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    );
    let on_thread = span.clone();
    let shown = path.to_string();
    // An error is told (and dropped) on the script's thread: a value it throws can
    // nest deeper than an async worker's stack can walk.
    let task = sandbox::thread::run("steward-script", move || {
        let _entered = on_thread.enter();
        engine
            .run_ast_with_scope(&mut scope, &ast)
            .map_err(|e| (sandbox::stopped_by(&e), sandbox::describe(&shown, &e)))
    });
    // The engine stops itself at the deadline; a native call that never returns to it
    // still ends the run a moment later (its thread is left to finish).
    let overdue = tokio::time::Instant::from_std(deadline) + std::time::Duration::from_secs(5);
    let result = tokio::select! {
        // A stop wins over what the script made of it: its tool calls fail once the run
        // is stopped, and the script may end on that failure at the same moment.
        biased;
        _ = cancel.cancelled() => return failed(Termination::Cancelled, "cancelled".into(), &host),
        r = task => r,
        _ = tokio::time::sleep_until(overdue) => return failed(
            Termination::Timeout,
            format!(
                "{path}: the script exceeded its timeout of {}",
                crate::types::duration::format_duration(host.timeout)
            ),
            &host,
        ),
    };
    if cancel.is_cancelled() {
        return failed(Termination::Cancelled, "cancelled".into(), &host);
    }
    let mut out = RunOutcome::new(host.recorder().run_id());
    out.tool_calls = host.gateway.calls();
    let stop = host.stop.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match result {
        Err(e) => {
            out.termination = Termination::ScriptError;
            out.error = Some(format!("{path}: {e}"));
        }
        Ok(Ok(())) => out.final_text = host.replied.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        Ok(Err((stopped_by, described))) => {
            let (termination, message) = match stop {
                Some((HostStop::MaxToolCalls, m)) => (Termination::MaxToolCalls, m),
                Some((HostStop::FatalTool, m)) => (Termination::ToolError, m),
                Some((HostStop::MaxCost, m)) => (Termination::MaxCost, m),
                _ if stopped_by.as_deref() == Some(sandbox::DEADLINE) => (
                    Termination::Timeout,
                    format!(
                        "{path}: the script exceeded its timeout of {}",
                        crate::types::duration::format_duration(host.timeout)
                    ),
                ),
                _ => (Termination::ScriptError, described),
            };
            out.termination = termination;
            out.error = Some(message);
        }
    }
    span.record("steward.tool_calls", out.tool_calls);
    if out.termination != Termination::Completed {
        span.record("error.type", out.termination.as_str());
    }
    out
}

fn failed(termination: Termination, error: String, host: &Host) -> RunOutcome {
    let mut out = RunOutcome::new(host.recorder().run_id());
    out.termination = termination;
    out.error = Some(error);
    out.tool_calls = host.gateway.calls();
    out
}

/// A host for one script run: tool calls go through `gateway`; the script stops at
/// `timeout` from now.
pub fn new_host(
    gateway: Arc<crate::run::gateway::Gateway>,
    cancel: tokio_util::sync::CancellationToken,
    timeout: std::time::Duration,
    cost_cap: Option<(f64, Arc<crate::run::subagents::ChildTotals>)>,
) -> Arc<Host> {
    Arc::new(Host {
        cost_cap,
        rt: tokio::runtime::Handle::current(),
        gateway,
        cancel,
        deadline: tokio::time::Instant::now() + timeout,
        timeout,
        calls: AtomicU32::new(0),
        log: Mutex::new(host::LogBudget::default()),
        stop: Mutex::new(None),
        replied: Mutex::new(None),
    })
}
