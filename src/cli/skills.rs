//! `steward skills list` and `steward skills install`: the skills under the root, their
//! scripts' requirements and whether those are installed.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use super::{Outside, scripts_unavailable_line};
use crate::config::Settings;
use crate::sandbox::process::find_program;
use crate::skills::deps::{self, DepsState, Ecosystem};
use crate::skills::{Skill, SkillSet};

/// A skill's requirements for `ecosystem` as `skills list` shows them: the declared ones
/// and their state (`none`, `installed`, `not installed`, `no python3`, `no node`).
fn requirements(skills: &SkillSet, skill: &Skill, ecosystem: Ecosystem) -> (Vec<String>, &'static str) {
    let declared = deps::declared_in(skill, ecosystem);
    if declared.is_empty() {
        return (Vec::new(), "none");
    }
    let state = match find_program(ecosystem.program()) {
        None if ecosystem == Ecosystem::Python => "no python3",
        None => "no node",
        Some(interpreter) => match skills.deps.state(skill, &interpreter) {
            DepsState::Ready(_) => "installed",
            DepsState::Installing => "installing",
            DepsState::Failed(_) => "failed",
            DepsState::None | DepsState::Missing => "not installed",
        },
    };
    (declared.requirements, state)
}

pub(super) fn list(root: &Path, env: &Settings, json: bool) -> anyhow::Result<ExitCode> {
    let outside = Outside::new(env.clone(), Arc::default())?;
    let skills = outside.skills(root);
    if json {
        let list: Vec<serde_json::Value> = skills
            .skills
            .values()
            .map(|s| {
                let (declared, state) = requirements(&skills, s, Ecosystem::Python);
                let (node, node_state) = requirements(&skills, s, Ecosystem::Node);
                serde_json::json!({
                    "name": s.name,
                    "description": s.description,
                    "file": s.file,
                    "license": s.license,
                    "compatibility": s.compatibility,
                    "allowed_tools": s.allowed_tools,
                    "scripts": s.scripts().map(|f| f.path.as_str()).collect::<Vec<_>>(),
                    "scripts_available": !s.has_process_scripts() || skills.sandbox.unavailable().is_none(),
                    "requirements": {"declared": declared, "state": state},
                    "node_requirements": {"declared": node, "state": node_state},
                })
            })
            .collect();
        let out = serde_json::json!({
            "skills": list,
            "diagnostics": skills.diagnostics,
            "scripts_unavailable": skills.scripts_unavailable().map(|(why, _)| why),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    if skills.skills.is_empty() {
        println!("no skills found under prompts/skills/");
    }
    for s in skills.skills.values() {
        println!("{:<24} {}", s.name, s.description.replace('\n', " "));
        println!("{:<24} {}", "", s.file.display());
        let (declared, state) = requirements(&skills, s, Ecosystem::Python);
        if !declared.is_empty() {
            println!("{:<24} requirements ({state}): {}", "", declared.join(", "));
        }
        let (node, state) = requirements(&skills, s, Ecosystem::Node);
        if !node.is_empty() {
            println!("{:<24} node requirements ({state}): {}", "", node.join(", "));
        }
    }
    for d in &skills.diagnostics {
        println!("{d}");
    }
    if let Some(line) = scripts_unavailable_line(&skills) {
        println!("warning: {line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Installs the requirements of skill `name` (or of every skill that declares some);
/// exit 1 when one fails, with the installer's error.
pub(super) async fn install(root: &Path, env: &Settings, name: Option<&str>) -> anyhow::Result<ExitCode> {
    let outside = Outside::new(env.clone(), Arc::default())?;
    let skills = outside.skills(root);
    if let Some(n) = name
        && !skills.skills.contains_key(n)
    {
        let known: Vec<&str> = skills.skills.keys().map(String::as_str).collect();
        anyhow::bail!("no skill '{n}', expected one of: {}", known.join(", "));
    }
    let mut failed = false;
    let mut any = false;
    for skill in skills
        .skills
        .values()
        .filter(|s| name.is_none_or(|n| n == s.name))
    {
        let mut declares = false;
        for ecosystem in Ecosystem::ALL {
            let declared = deps::declared_in(skill, ecosystem);
            let program = ecosystem.program();
            if declared.is_empty() {
                continue;
            }
            declares = true;
            any = true;
            let Some(interpreter) = find_program(program) else {
                failed = true;
                eprintln!(
                    "{}: {program} is not installed on this host: its requirements ({}) cannot be installed",
                    skill.name,
                    declared.files.join(", ")
                );
                continue;
            };
            match skills.deps.ensure(skill, &interpreter).await {
                Ok(Some(site)) => println!("{}: installed in {}", skill.name, site.display()),
                Ok(None) => {}
                Err(e) => {
                    failed = true;
                    eprintln!("{}: {e}", skill.name);
                }
            }
        }
        if !declares && name.is_some() {
            println!("{}: declares no requirements", skill.name);
        }
    }
    if !any && name.is_none() {
        println!("no skill declares requirements");
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Installs every skill's requirements, one skill after another (for `serve` at start);
/// failures are logged and kept for the scripts that need them.
pub(super) async fn install_in_background(skills: &SkillSet) {
    for ecosystem in Ecosystem::ALL {
        let Some(interpreter) = find_program(ecosystem.program()) else {
            continue;
        };
        for skill in skills.skills.values() {
            if let Ok(Some(site)) = skills.deps.ensure(skill, &interpreter).await {
                tracing::info!(skill = %skill.name, site = %site.display(), "skill requirements ready");
            }
        }
    }
}
