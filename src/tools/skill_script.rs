//! `run_skill_script`: run a Rhai script a skill ships (`scripts/*.rhai`) in the same
//! sandbox as coordinator scripts: reliable arithmetic and data reshaping without a
//! Python sandbox. The script sees `args` and may call only tools that both the agent
//! and the skill's `allowed-tools` grant; each such call goes through the run's tool
//! gateway (recorded with its parent call id, counted toward `max_tool_calls`, and
//! marking the run as having side effects when the tool has them). Its last
//! expression is the result.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rhai::{Dynamic, EvalAltResult, Map, Position, Scope};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};
use crate::sandbox::{self, SandboxLimits};

/// Wall-clock limit of one skill script.
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct SkillScript {
    spec: ToolSpec,
}

pub fn skill_script_tool() -> Arc<dyn Tool> {
    Arc::new(SkillScript {
        spec: ToolSpec {
            name: "run_skill_script".into(),
            description: "Run a script shipped by a skill (listed among its files as scripts/<name>.rhai) with JSON arguments; returns the script's result.".into(),
            parameters: super::args::schema_of::<ScriptArgs>(),
            effect: Effect::ReadOnly,
        },
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScriptArgs {
    skill: String,
    #[schemars(length(min = 1))]
    script: String,
    /// Input the script reads as `args`.
    args: Option<serde_json::Map<String, Value>>,
}

fn runtime_error(msg: String) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(msg), Position::NONE))
}

#[async_trait]
impl Tool for SkillScript {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    /// A script runs code; its answer may change between runs of it.
    fn repeatable(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let skills = ctx
            .skills
            .as_ref()
            .ok_or_else(|| ToolError::Model("no skills are available to this agent".into()))?;
        let ScriptArgs {
            skill: skill_name,
            script,
            args: script_args,
        } = super::args::parse(args)?;
        let skill = skills.skill(&skill_name).map_err(ToolError::from)?.clone();
        let file = script.trim_start_matches("scripts/").trim_end_matches(".rhai");
        if file.is_empty()
            || !file
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(ToolError::Model(format!("invalid script name '{script}'")));
        }
        let rel = format!("scripts/{file}.rhai");
        let source = std::fs::read_to_string(skill.dir.join(&rel))
            .map_err(|_| ToolError::Model(format!("skill '{skill_name}' has no script {rel}")))?;
        let input = rhai::serde::to_dynamic(Value::Object(script_args.unwrap_or_default()))
            .map_err(|e| ToolError::Model(format!("bad args: {e}")))?;
        let ctx = ctx.clone();
        let rt = tokio::runtime::Handle::current();
        let label = format!("{skill_name}/{rel}");
        // A fatal nested failure (the run's tool budget is spent, the store is down)
        // must end the run, not just this script.
        let fatal: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let fatal_seen = fatal.clone();
        let task = tokio::task::spawn_blocking(move || {
            let mut engine = sandbox::engine(&SandboxLimits::default(), Some(Instant::now() + TIMEOUT));
            let grant = skill.allowed_tools.clone();
            engine.register_fn(
                "tool",
                move |name: &str, a: Map| -> Result<Dynamic, Box<EvalAltResult>> {
                    let nested = ctx
                        .nested
                        .clone()
                        .ok_or_else(|| runtime_error("tools cannot be called here".into()))?;
                    let json_args = rhai::serde::from_dynamic::<Value>(&Dynamic::from_map(a))?;
                    match rt.block_on(nested.call_nested(&ctx, &grant, name, json_args)) {
                        Ok(out) => rhai::serde::to_dynamic(out.value),
                        Err(ToolError::Fatal(e)) => {
                            *fatal.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
                            Err(Box::new(EvalAltResult::ErrorTerminated(
                                Dynamic::from(e),
                                Position::NONE,
                            )))
                        }
                        Err(e) => Err(runtime_error(e.to_string())),
                    }
                },
            );
            let mut scope = Scope::new();
            scope.push_constant("args", input);
            engine.eval_with_scope::<Dynamic>(&mut scope, &source)
        });
        let result = task
            .await
            .map_err(|e| ToolError::Model(format!("{label}: {e}")))?;
        if let Some(e) = fatal_seen.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(ToolError::Fatal(e));
        }
        match result {
            Ok(v) => {
                let value =
                    rhai::serde::from_dynamic::<Value>(&v).unwrap_or_else(|_| Value::String(v.to_string()));
                Ok(ToolOutput::json(value))
            }
            Err(e) => {
                let pos = e.position();
                let at = pos.line().map(|l| format!(":{l}")).unwrap_or_default();
                Err(ToolError::Model(format!("{label}{at}: {e}")))
            }
        }
    }

    /// Skill scripts are local and sandboxed; the mock runs them too.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}
