//! `load_skills`, `load_subskill` and `skill_search`: progressive disclosure of Agent
//! Skills.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::args::{parse, schema_of};
use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// The skill tools, given to agents that have skills available.
pub const SKILL_TOOLS: &[&str] = &["load_skills", "load_subskill", "run_skill_script"];

/// Given on top of [`SKILL_TOOLS`] when the catalog is over its token budget.
pub const SKILL_SEARCH: &str = "skill_search";

#[derive(Clone, Copy)]
enum Kind {
    Load,
    Sub,
    Search,
}

struct SkillTool {
    spec: ToolSpec,
    kind: Kind,
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
            kind: Kind::Load,
        }),
        Arc::new(SkillTool {
            spec: ToolSpec {
                name: "load_subskill".into(),
                description: "Load another file of a skill (for example references/x.md or templates/y.md), as listed when the skill was loaded; or, with `section`, one section of a SKILL.md too large to load whole.".into(),
                parameters: schema_of::<SubArgs>(),
                effect: Effect::ReadOnly,
            },
            kind: Kind::Sub,
        }),
        Arc::new(SkillTool {
            spec: ToolSpec {
                name: SKILL_SEARCH.into(),
                description: "Find the skills for a task when the catalog lists names only: returns the best-matching skills with their descriptions.".into(),
                parameters: schema_of::<SearchArgs>(),
                effect: Effect::ReadOnly,
            },
            kind: Kind::Search,
        }),
    ]
}

/// `load_skills`'s parameters for one run: `names` limited to the skills it may load.
pub fn load_skills_parameters(mut parameters: Value, names: &[String]) -> Value {
    if let Some(items) = parameters.pointer_mut("/properties/names/items")
        && let Some(obj) = items.as_object_mut()
    {
        obj.insert("enum".into(), Value::from(names.to_vec()));
    }
    parameters
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
    /// A heading of SKILL.md, to load only that section.
    section: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// What the task is about, in a few words.
    #[schemars(length(min = 1))]
    query: String,
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
        let text = match self.kind {
            Kind::Sub => {
                let a: SubArgs = parse(args)?;
                skills.load_sub(&a.skill, &a.path, a.section.as_deref())
            }
            Kind::Load => {
                let a: LoadArgs = parse(args)?;
                skills.load_many(&a.names)
            }
            Kind::Search => {
                let a: SearchArgs = parse(args)?;
                Ok(skills.search(&a.query))
            }
        };
        // A skill's instructions are needed whole: they skip the file threshold.
        if matches!(self.kind, Kind::Load) {
            return text.map(ToolOutput::whole).map_err(ToolError::from);
        }
        text.map(ToolOutput::text).map_err(ToolError::from)
    }

    /// Skills are local files; the mock is the real thing.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}
