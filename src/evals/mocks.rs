//! A case's tool mocks: canned results, errors and sequences in place of a tool, or the
//! real tool. Tools a case does not mock answer with their built-in mocks (eval runs are
//! mock runs), so nothing outside 127.0.0.1 is touched unless a case says `real`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::Value;

use super::case::Mock;
use crate::tools::{Tool, ToolCtx, ToolError, ToolOutput, ToolRegistry, ToolResult, ToolSpec};

/// One tool answering as its case says.
struct CaseMock {
    inner: Arc<dyn Tool>,
    mock: Mock,
    calls: AtomicUsize,
}

fn output(value: &Value) -> ToolOutput {
    match value {
        Value::String(text) => ToolOutput::text(text.clone()),
        other => ToolOutput::json(other.clone()),
    }
}

#[async_trait]
impl Tool for CaseMock {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        match &self.mock {
            Mock::Real => self.inner.call(ctx, args).await,
            Mock::Result(v) => Ok(output(v)),
            Mock::Error(message) => Err(ToolError::Model(message.clone())),
            Mock::Sequence(values) => {
                // Past the end, the last entry repeats.
                let v = values.get(n).or(values.last()).unwrap_or(&Value::Null);
                Ok(output(v))
            }
        }
    }

    /// Eval runs call mocks: the case's answer is the mock.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

/// `base` with each tool in `mocks` replaced by its case mock. Build one per trial:
/// sequences start again.
pub fn registry(base: &ToolRegistry, mocks: &BTreeMap<String, Mock>) -> ToolRegistry {
    let mut out = ToolRegistry::new();
    for name in base.names() {
        let Some(tool) = base.get(&name) else {
            continue;
        };
        match mocks.get(&name) {
            Some(mock) => out.register(Arc::new(CaseMock {
                inner: tool,
                mock: mock.clone(),
                calls: AtomicUsize::new(0),
            })),
            None => out.register(tool),
        }
    }
    out
}
