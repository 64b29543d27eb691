//! Agent Skills (agentskills.io format): `prompts/skills/<name>/SKILL.md` with YAML
//! front matter (`name`, `description`, optional `license`, `compatibility`, `metadata`,
//! `allowed-tools`) and a Markdown body. Loaded leniently, as the specification's client
//! guide advises: cosmetic problems are warnings, and only skills without a description
//! or with front matter that cannot be parsed are skipped.

pub mod access;
mod parse;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use access::RunSkills;

/// Longest skill name the specification allows.
pub const MAX_NAME_LEN: usize = 64;

/// One loaded skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: BTreeMap<String, String>,
    /// Tools the skill's scripts may use (`allowed-tools`).
    pub allowed_tools: Vec<String>,
    pub body: String,
    /// The skill's folder (absolute).
    pub dir: PathBuf,
    /// `SKILL.md`, relative to the config root, for messages.
    pub file: PathBuf,
}

impl Skill {
    /// Other files of the skill (`references/...`, `templates/...`, `scripts/...`),
    /// relative to its folder, sorted.
    pub fn extra_files(&self) -> Vec<String> {
        let mut out = Vec::new();
        collect(&self.dir, &self.dir, &mut out);
        out.retain(|f| f != "SKILL.md");
        out.sort();
        out
    }
}

fn collect(base: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(base, &p, out);
        } else if let Ok(rel) = p.strip_prefix(base) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// How serious a loading problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The skill loaded anyway.
    Warning,
    /// The skill was skipped.
    Error,
}

/// A problem found while loading skills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDiagnostic {
    pub file: PathBuf,
    pub level: Level,
    pub message: String,
}

impl fmt::Display for SkillDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.level {
            Level::Warning => "warning",
            Level::Error => "error",
        };
        write!(f, "{}: {level}: {}", self.file.display(), self.message)
    }
}

/// Every skill found, by name, with the problems met on the way.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    pub skills: BTreeMap<String, Skill>,
    pub diagnostics: Vec<SkillDiagnostic>,
}

impl SkillSet {
    /// Loads `prompts/skills/` under `root` plus each of `extra_dirs` (relative to the
    /// root, e.g. `.agents/skills`). Missing folders are empty. The first folder wins
    /// when two define the same name.
    pub fn load(root: &Path, extra_dirs: &[PathBuf]) -> SkillSet {
        let mut set = SkillSet::default();
        let dirs = std::iter::once(PathBuf::from("prompts/skills")).chain(extra_dirs.iter().cloned());
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(root.join(&dir)) else {
                continue;
            };
            let mut folders: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            folders.sort();
            for folder in folders {
                let folder_name = folder
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let rel = dir.join(&folder_name).join("SKILL.md");
                let Ok(text) = std::fs::read_to_string(folder.join("SKILL.md")) else {
                    continue;
                };
                let mut diags = Vec::new();
                let skill = parse::parse(&text, &folder_name, &folder, &rel, &mut diags);
                set.diagnostics.extend(diags);
                if let Some(skill) = skill {
                    if let Some(existing) = set.skills.get(&skill.name) {
                        set.diagnostics.push(SkillDiagnostic {
                            file: rel.clone(),
                            level: Level::Error,
                            message: format!(
                                "skill '{}' is already defined in {}; skipped",
                                skill.name,
                                existing.file.display()
                            ),
                        });
                        continue;
                    }
                    set.skills.insert(skill.name.clone(), skill);
                }
            }
        }
        set
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.skills.keys().cloned().collect()
    }
}
