//! The tool registry: lookup, argument parsing and schema validation, then dispatch to
//! the real or the mock implementation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::{Tool, ToolCtx, ToolError, ToolResult, schema};
use crate::provider::ToolDef;

/// Tools that come and go while steward runs (an MCP server's, refreshed when it says
/// its list changed). Looked up after the registry's own tools.
pub trait ToolSource: Send + Sync {
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>>;
    /// Every tool the source has now.
    fn all(&self) -> Vec<Arc<dyn Tool>>;
}

/// Every tool steward knows, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Tools that always use their mock (per-tool `--mock`), whatever the run asks.
    mocked: BTreeSet<String>,
    sources: Vec<Arc<dyn ToolSource>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        ToolRegistry::default()
    }

    /// The built-in tools without integrations (callers add their own); `http_fetch`
    /// reaches only what `egress` permits.
    pub fn core(egress: crate::http::Egress) -> Self {
        let mut r = ToolRegistry::new();
        r.register(Arc::new(super::http_fetch::HttpFetch::new(egress)));
        r.register(Arc::new(super::current_time::CurrentTime::new()));
        for tool in super::files::base_tools()
            .into_iter()
            .chain(super::skills::skill_tools())
        {
            r.register(tool);
        }
        r.register(super::subagent::subagent_tool());
        r.register(super::skill_script::skill_script_tool());
        r
    }

    /// Adds a tool, replacing any with the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name.clone(), tool);
    }

    /// Makes `names` always use their mocks; unknown names are returned as an error.
    pub fn mock_only(&mut self, names: &[String]) -> Result<(), UnknownTool> {
        if let Some(unknown) = names.iter().find(|n| self.get(n).is_none()) {
            return Err(UnknownTool(unknown.clone()));
        }
        self.mocked.extend(names.iter().cloned());
        Ok(())
    }

    /// Adds tools that may change while steward runs.
    pub fn add_source(&mut self, source: Arc<dyn ToolSource>) {
        self.sources.push(source);
    }

    pub fn names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.tools.keys().cloned().collect();
        for s in &self.sources {
            names.extend(s.all().iter().map(|t| t.spec().name.clone()));
        }
        names
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .get(name)
            .cloned()
            .or_else(|| self.sources.iter().find_map(|s| s.get(name)))
    }

    /// What a run is doing while it calls `name` ([`Tool::status`]).
    pub fn status_of(&self, name: &str) -> String {
        self.get(name)
            .map_or_else(|| super::status::of(name), |t| t.status())
    }

    /// Definitions for the model, in name order so the request prefix is byte-stable.
    pub fn definitions(&self, names: &[String]) -> Vec<ToolDef> {
        let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let mut all: BTreeMap<String, Arc<dyn Tool>> = self.tools.clone();
        for s in &self.sources {
            for t in s.all() {
                all.entry(t.spec().name.clone()).or_insert(t);
            }
        }
        all.values()
            .filter(|t| wanted.contains(t.spec().name.as_str()))
            .map(|t| {
                let s = t.spec();
                ToolDef::new(s.name.clone(), s.description.clone(), s.parameters.clone())
            })
            .collect()
    }

    /// Runs tool `name` with the raw JSON `arguments` the caller produced. Unknown or
    /// disallowed tools, unparsable arguments and schema violations come back as
    /// [`ToolError::Model`] so the model can correct itself.
    pub async fn invoke(
        &self,
        allowed: &[String],
        name: &str,
        arguments: &str,
        ctx: &ToolCtx,
        mock: bool,
    ) -> ToolResult {
        let tool = match self.get(name) {
            Some(t) if allowed.iter().any(|a| a == name) => t,
            _ => {
                return Err(ToolError::Model(format!(
                    "unknown tool '{name}'; available tools: {}",
                    allowed.join(", ")
                )));
            }
        };
        let args: Value = if arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            serde_json::from_str(arguments).map_err(|e| {
                ToolError::Model(format!(
                    "arguments for '{name}' are not valid JSON ({e}); send a JSON object"
                ))
            })?
        };
        schema::validate(&tool.spec().parameters, &args).map_err(|errors| {
            ToolError::Model(format!("invalid arguments for '{name}': {}", errors.join("; ")))
        })?;
        if mock || self.mocked.contains(name) {
            tool.mock(ctx, args).await
        } else {
            tool.call(ctx, args).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> ToolCtx {
        ToolCtx {
            run_id: "r".into(),
            agent: "a".into(),
            call_id: "c".into(),
            cancel: Default::default(),
            files: std::sync::Arc::new(crate::files::RunFiles::new(
                "r",
                None,
                std::sync::Arc::new(crate::tokens::TokenCounter::new()),
                crate::tokens::Encoding::O200k,
                10_000,
            )),
            skills: None,
            subagents: None,
            nested: None,
            mock: true,
            search: Default::default(),
            network: Default::default(),
        }
    }

    #[tokio::test]
    async fn refuses_unknown_unlisted_and_malformed_calls() {
        let reg = ToolRegistry::core(Default::default());
        let allowed = vec!["current_time".to_string()];
        let e = reg
            .invoke(&allowed, "nope", "{}", &ctx(), true)
            .await
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown tool 'nope'; available tools: current_time")
        );
        let e = reg
            .invoke(&allowed, "http_fetch", "{}", &ctx(), true)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("unknown tool 'http_fetch'"));
        let e = reg
            .invoke(&allowed, "current_time", "{oops", &ctx(), true)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not valid JSON"), "{e}");
        let e = reg
            .invoke(&allowed, "current_time", "{\"timezone\": 5}", &ctx(), true)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("/timezone: expected string"), "{e}");
        assert!(
            reg.invoke(&allowed, "current_time", "", &ctx(), true)
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn single_tools_can_be_mocked() {
        let mut reg = ToolRegistry::core(Default::default());
        assert!(reg.mock_only(&["nope".into()]).is_err());
        reg.mock_only(&["current_time".into()]).unwrap();
        let allowed = vec!["current_time".to_string()];
        let out = reg
            .invoke(&allowed, "current_time", "{}", &ctx(), false)
            .await
            .unwrap();
        assert_eq!(out.to_model_text(), "2026-01-05T17:00:00+00:00 (Monday, UTC)");
    }

    #[test]
    fn definitions_are_sorted_and_filtered() {
        let reg = ToolRegistry::core(Default::default());
        let defs = reg.definitions(&["http_fetch".into(), "current_time".into()]);
        let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["current_time", "http_fetch"]);
    }
}

/// A tool name no registered tool has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot mock unknown tool '{0}'")]
pub struct UnknownTool(pub String);
