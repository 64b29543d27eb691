//! What one run may do with skills: the catalog for its system prompt, loading bodies
//! and sub-files, and counting loads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path};
use std::sync::{Arc, Mutex};

use super::SkillSet;
use crate::config::SkillsSpec;

/// Largest skill file `load_subskill` returns.
const MAX_SUBSKILL_BYTES: u64 = 256 * 1024;

/// The skills of one run.
pub struct RunSkills {
    set: Arc<SkillSet>,
    available: BTreeSet<String>,
    prohibited: BTreeSet<String>,
    loads: Mutex<BTreeMap<String, u32>>,
}

/// Whether `name` matches an `allowed` entry: `*`, an exact name, or a `prefix-*` glob.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

impl RunSkills {
    pub fn new(set: Arc<SkillSet>, spec: &SkillsSpec) -> RunSkills {
        let prohibited: BTreeSet<String> = spec.prohibited.iter().cloned().collect();
        let available = set
            .skills
            .keys()
            .filter(|n| spec.allowed.iter().any(|p| matches(p, n)) || spec.required.contains(n))
            .filter(|n| !prohibited.contains(*n))
            .cloned()
            .collect();
        RunSkills {
            set,
            available,
            prohibited,
            loads: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.available.is_empty()
    }

    /// The catalog for the system prompt (name and description of each available skill).
    pub fn catalog(&self) -> Option<String> {
        if self.available.is_empty() {
            return None;
        }
        let mut out = String::from(
            "## Skills\n\nSkills hold know-how for recurring tasks. Before doing work a skill covers, load it with `load_skills`; load further files of a skill with `load_subskill`.\n",
        );
        for name in &self.available {
            if let Some(s) = self.set.get(name) {
                out.push_str(&format!("\n- {}: {}", s.name, s.description.replace('\n', " ")));
            }
        }
        out.push('\n');
        Some(out)
    }

    /// Skill `name`, if this run may use it.
    pub fn skill(&self, name: &str) -> Result<&super::Skill, SkillError> {
        self.check(name)
    }

    fn check(&self, name: &str) -> Result<&super::Skill, SkillError> {
        if self.prohibited.contains(name) {
            return Err(SkillError::Prohibited(name.to_string()));
        }
        match self.set.get(name) {
            Some(s) if self.available.contains(name) => Ok(s),
            Some(_) => Err(SkillError::NotAllowed(name.to_string())),
            None => Err(SkillError::Unknown {
                name: name.to_string(),
                available: self.available.iter().cloned().collect::<Vec<_>>().join(", "),
            }),
        }
    }

    /// The body of skill `name` (with the list of its other files), counting the load.
    pub fn load(&self, name: &str) -> Result<String, SkillError> {
        traced_load(name, None, || self.load_body(name))
    }

    fn load_body(&self, name: &str) -> Result<String, SkillError> {
        let skill = self.check(name)?;
        *self
            .loads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.to_string())
            .or_default() += 1;
        let mut out = format!("# Skill: {}\n\n{}", skill.name, skill.body.trim_end());
        let extra = skill.extra_files();
        if !extra.is_empty() {
            out.push_str(&format!(
                "\n\n(Other files of this skill, for load_subskill: {})",
                extra.join(", ")
            ));
        }
        Ok(out)
    }

    /// A file inside skill `name`'s folder. Paths that are absolute, contain `..` or
    /// resolve (through links) outside the folder are refused.
    pub fn load_sub(&self, name: &str, path: &str) -> Result<String, SkillError> {
        traced_load(name, Some(path), || self.load_sub_body(name, path))
    }

    fn load_sub_body(&self, name: &str, path: &str) -> Result<String, SkillError> {
        let skill = self.check(name)?;
        let rel = Path::new(path);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(SkillError::Outside(path.to_string()));
        }
        let base = skill
            .dir
            .canonicalize()
            .map_err(|e| SkillError::Unreadable(format!("skill folder unreadable: {e}")))?;
        let full = base.join(rel).canonicalize().map_err(|_| SkillError::NoFile {
            name: name.to_string(),
            path: path.to_string(),
            files: skill.extra_files().join(", "),
        })?;
        if !full.starts_with(&base) {
            return Err(SkillError::Outside(path.to_string()));
        }
        let size = std::fs::metadata(&full).map(|m| m.len()).unwrap_or(0);
        if size > MAX_SUBSKILL_BYTES {
            return Err(SkillError::TooLarge {
                path: path.to_string(),
                size,
            });
        }
        let text = std::fs::read_to_string(&full)
            .map_err(|e| SkillError::Unreadable(format!("cannot read '{path}': {e}")))?;
        *self
            .loads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(format!("{name}/{path}"))
            .or_default() += 1;
        Ok(format!("# {name}/{path}\n\n{text}"))
    }

    /// The message injecting required skills, counted as loads.
    pub fn required_message(&self, required: &[String]) -> Result<Option<String>, SkillError> {
        if required.is_empty() {
            return Ok(None);
        }
        let bodies: Result<Vec<String>, SkillError> = required.iter().map(|n| self.load(n)).collect();
        Ok(Some(format!(
            "[steward: required skills for this agent]\n\n{}",
            bodies?.join("\n\n")
        )))
    }

    /// Loads per skill (and per `skill/path` for sub-files).
    pub fn loads(&self) -> BTreeMap<String, u32> {
        self.loads.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why a skill or one of its files cannot be used; the message goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("skill '{0}' is prohibited for this agent")]
    Prohibited(String),
    #[error("skill '{0}' is not allowed for this agent")]
    NotAllowed(String),
    #[error("unknown skill '{name}'; available skills: {available}")]
    Unknown { name: String, available: String },
    #[error("path '{0}' must stay inside the skill folder (no '..' or absolute paths)")]
    Outside(String),
    #[error("skill '{name}' has no file '{path}'; files: {files}")]
    NoFile {
        name: String,
        path: String,
        files: String,
    },
    #[error("'{path}' is {size} bytes, over the {MAX_SUBSKILL_BYTES}-byte limit")]
    TooLarge { path: String, size: u64 },
    #[error("{0}")]
    Unreadable(String),
}

impl SkillError {
    /// A short name for the kind of failure (`error.type` on spans).
    pub fn kind(&self) -> &'static str {
        match self {
            SkillError::Prohibited(_) => "prohibited",
            SkillError::NotAllowed(_) => "not_allowed",
            SkillError::Unknown { .. } => "unknown",
            SkillError::Outside(_) => "outside",
            SkillError::NoFile { .. } => "no_file",
            SkillError::TooLarge { .. } => "too_large",
            SkillError::Unreadable(_) => "unreadable",
        }
    }
}

/// Runs one skill load inside a `load_skill {name}` span with its size or error.
fn traced_load(
    name: &str,
    path: Option<&str>,
    load: impl FnOnce() -> Result<String, SkillError>,
) -> Result<String, SkillError> {
    let span = tracing::info_span!(
        "load_skill",
        otel.name = %format!("load_skill {name}"),
        "steward.skill.name" = name,
        "steward.skill.file" = path.unwrap_or("SKILL.md"),
        "steward.skill.bytes" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    );
    let _entered = span.enter();
    let result = load();
    match &result {
        Ok(text) => span.record("steward.skill.bytes", text.len() as u64),
        Err(e) => span.record("error.type", e.kind()),
    };
    result
}
