//! `load_skills` and `load_subskill`: progressive disclosure of Agent Skills.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::args::{parse, schema_of};
use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// The skill tools, given to agents that have skills available.
pub const SKILL_TOOLS: &[&str] = &["load_skills", "load_subskill", "run_skill_script"];

struct SkillTool {
    spec: ToolSpec,
    sub: bool,
}

pub fn skill_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(SkillTool {
            spec: ToolSpec {
                name: "load_skills".into(),
                description: "Load the instructions of one or more skills from the catalog in the system prompt.".into(),
                parameters: schema_of::<LoadArgs>(),
                effect: Effect::ReadOnly,
            },
            sub: false,
        }),
        Arc::new(SkillTool {
            spec: ToolSpec {
                name: "load_subskill".into(),
                description: "Load another file of a skill (for example references/x.md or templates/y.md), as listed when the skill was loaded.".into(),
                parameters: schema_of::<SubArgs>(),
                effect: Effect::ReadOnly,
            },
            sub: true,
        }),
    ]
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LoadArgs {
    #[schemars(length(min = 1, max = 10))]
    names: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SubArgs {
    skill: String,
    #[schemars(length(min = 1))]
    path: String,
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    /// Loads are counted per skill; a second load is cheap and counted.
    fn repeatable(&self) -> bool {
        false
    }

    async fn call(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        let Some(skills) = &ctx.skills else {
            return Err(ToolError::Model("no skills are available to this agent".into()));
        };
        let text = if self.sub {
            let a: SubArgs = parse(args)?;
            skills.load_sub(&a.skill, &a.path)
        } else {
            let a: LoadArgs = parse(args)?;
            a.names
                .iter()
                .map(|n| skills.load(n))
                .collect::<Result<Vec<_>, _>>()
                .map(|b| b.join("\n\n"))
        };
        text.map(ToolOutput::text).map_err(ToolError::from)
    }

    /// Skills are local files; the mock is the real thing.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}
