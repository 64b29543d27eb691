//! MCP cassettes: what an MCP server said, kept so its tools can be mocked and evaluated
//! without it. One file per server, `evals/mcp/<server>.json`, holds the server's tool
//! list (as `tools/list` gave it) and the results of the calls recorded against it (as
//! `tools/call` gave them), keyed by tool and arguments. `steward eval --record` writes
//! them; eval replays and `steward run --mock-tools` read them.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rmcp::model::{CallToolResult, Tool};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The file format's version.
const VERSION: u32 = 1;
/// Recorded argument sets named in a miss, at most.
const MAX_NAMED: usize = 3;

/// One recorded `tools/call`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedCall {
    /// The server's own tool name (without the `<server>__` prefix).
    pub tool: String,
    pub arguments: Value,
    pub result: CallToolResult,
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    version: u32,
    server: String,
    tools: Vec<Tool>,
    calls: Vec<RecordedCall>,
}

/// An MCP cassette could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum McpCassetteError {
    #[error("MCP cassette {path} is corrupt: {reason}; delete it and re-record with `steward eval --record`")]
    Corrupt { path: String, reason: String },
    #[error("cannot write MCP cassette {path}: {reason}")]
    Write { path: String, reason: String },
}

#[derive(Debug, Default)]
struct State {
    /// `None` until a tool list was recorded.
    tools: Option<Vec<Tool>>,
    calls: Vec<RecordedCall>,
    changed: bool,
}

/// One server's recordings, shared by every run that mocks or records its tools.
#[derive(Debug)]
pub struct McpCassette {
    path: PathBuf,
    server: String,
    state: Mutex<State>,
}

impl McpCassette {
    /// Where `server`'s cassette lives under `dir` (`evals/mcp`).
    pub fn path(dir: &Path, server: &str) -> PathBuf {
        dir.join(format!("{server}.json"))
    }

    /// Reads `server`'s cassette from `dir`; a missing file is an empty cassette.
    pub fn load(dir: &Path, server: &str) -> Result<McpCassette, McpCassetteError> {
        let path = Self::path(dir, server);
        let corrupt = |reason: String| McpCassetteError::Corrupt {
            path: path.display().to_string(),
            reason,
        };
        let state = match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State::default(),
            Err(e) => return Err(corrupt(e.to_string())),
            Ok(bytes) => {
                let file: File = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
                if file.version != VERSION {
                    return Err(corrupt(format!(
                        "version {} (this steward reads {VERSION})",
                        file.version
                    )));
                }
                if file.server != server {
                    return Err(corrupt(format!(
                        "it records server '{}', not '{server}'",
                        file.server
                    )));
                }
                State {
                    tools: Some(file.tools),
                    calls: file.calls,
                    changed: false,
                }
            }
        };
        Ok(McpCassette {
            path,
            server: server.to_string(),
            state: Mutex::new(state),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file, for messages.
    pub fn file(&self) -> &Path {
        &self.path
    }

    /// The recorded tool list, if one was recorded.
    pub fn tools(&self) -> Option<Vec<Tool>> {
        self.lock().tools.clone()
    }

    /// Records the server's tool list (replacing the old one).
    pub fn set_tools(&self, tools: Vec<Tool>) {
        let mut state = self.lock();
        if state.tools.as_ref() != Some(&tools) {
            state.tools = Some(tools);
            state.changed = true;
        }
    }

    /// The result recorded for `tool` called with `arguments` (compared as JSON values,
    /// so key order does not matter), or a message saying what is recorded instead.
    pub fn find(&self, tool: &str, arguments: &Value) -> Result<CallToolResult, String> {
        let state = self.lock();
        if let Some(call) = state
            .calls
            .iter()
            .find(|c| c.tool == tool && &c.arguments == arguments)
        {
            return Ok(call.result.clone());
        }
        let others: Vec<String> = state
            .calls
            .iter()
            .filter(|c| c.tool == tool)
            .map(|c| c.arguments.to_string())
            .collect();
        let recorded = match others.as_slice() {
            [] => format!("{} holds no call of it", self.path.display()),
            some => format!(
                "{} holds it only for {}{}",
                self.path.display(),
                some.iter()
                    .take(MAX_NAMED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                if some.len() > MAX_NAMED {
                    format!(" and {} more", some.len() - MAX_NAMED)
                } else {
                    String::new()
                }
            ),
        };
        Err(format!("with arguments {arguments}: {recorded}"))
    }

    /// Records `result` for `tool` called with `arguments`, replacing an older result for
    /// the same call.
    pub fn add(&self, tool: &str, arguments: Value, result: CallToolResult) {
        let mut state = self.lock();
        let call = RecordedCall {
            tool: tool.to_string(),
            arguments,
            result,
        };
        match state
            .calls
            .iter_mut()
            .find(|c| c.tool == call.tool && c.arguments == call.arguments)
        {
            Some(old) if old.result == call.result => return,
            Some(old) => *old = call,
            None => state.calls.push(call),
        }
        state.changed = true;
    }

    /// Writes the cassette if anything was recorded since it was read; whether it wrote.
    pub fn save(&self) -> Result<bool, McpCassetteError> {
        let mut state = self.lock();
        if !state.changed {
            return Ok(false);
        }
        let write = |reason: String| McpCassetteError::Write {
            path: self.path.display().to_string(),
            reason,
        };
        let mut calls = state.calls.clone();
        // Sorted, so a re-recording changes only the lines that changed.
        calls.sort_by_cached_key(|c| (c.tool.clone(), c.arguments.to_string()));
        let file = File {
            version: VERSION,
            server: self.server.clone(),
            tools: state.tools.clone().unwrap_or_default(),
            calls,
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| write(e.to_string()))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| write(e.to_string()))?;
        }
        std::fs::write(&self.path, text + "\n").map_err(|e| write(e.to_string()))?;
        state.changed = false;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;

    #[test]
    fn calls_are_found_by_arguments_whatever_their_order_and_survive_a_save() {
        let dir = tempfile::tempdir().unwrap();
        let c = McpCassette::load(dir.path(), "demo").unwrap();
        assert!(c.tools().is_none());
        c.add(
            "add",
            json!({"a": 2, "b": 3}),
            CallToolResult::success(vec![ContentBlock::text("5")]),
        );
        assert!(c.save().unwrap());
        assert!(!c.save().unwrap(), "nothing new, nothing written");

        let again = McpCassette::load(dir.path(), "demo").unwrap();
        assert_eq!(again.tools(), Some(Vec::new()));
        let found = again.find("add", &json!({"b": 3, "a": 2})).unwrap();
        assert_eq!(found.content[0].as_text().unwrap().text, "5");
        let miss = again.find("add", &json!({"a": 1, "b": 1})).unwrap_err();
        assert!(
            miss.contains(r#"with arguments {"a":1,"b":1}"#) && miss.contains(r#"only for {"a":2,"b":3}"#),
            "{miss}"
        );
        let none = again.find("fail", &json!({})).unwrap_err();
        assert!(none.contains("holds no call of it"), "{none}");
    }

    #[test]
    fn a_corrupt_or_foreign_cassette_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("demo.json"), "{not json").unwrap();
        let e = McpCassette::load(dir.path(), "demo").unwrap_err().to_string();
        assert!(
            e.contains("demo.json is corrupt") && e.contains("--record"),
            "{e}"
        );
        std::fs::write(
            dir.path().join("other.json"),
            r#"{"version": 1, "server": "demo", "tools": [], "calls": []}"#,
        )
        .unwrap();
        let e = McpCassette::load(dir.path(), "other").unwrap_err().to_string();
        assert!(e.contains("records server 'demo', not 'other'"), "{e}");
    }
}
