//! Agent Skills (agentskills.io format): `prompts/skills/<name>/SKILL.md` with YAML
//! front matter (`name`, `description`, optional `license`, `compatibility`, `metadata`,
//! `allowed-tools`) and a Markdown body. Loaded leniently, as the specification's client
//! guide advises: cosmetic problems are warnings, and only skills without a description
//! or with front matter that cannot be parsed are skipped.

pub mod access;
pub mod deps;
mod files;
mod parse;
pub mod search;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use access::RunSkills;
pub use files::SkillFile;

use crate::sandbox::process::ProcessSandbox;

/// Longest skill name the specification allows.
pub const MAX_NAME_LEN: usize = 64;
/// Longest description the specification allows; the catalog shortens longer ones.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility` the specification allows.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

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
    /// Its other files (`references/...`, `scripts/...`, assets), sorted by path.
    pub files: Vec<SkillFile>,
}

impl Skill {
    /// Other files of the skill, relative to its folder, sorted.
    pub fn extra_files(&self) -> Vec<String> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    /// Its scripts: files under `scripts/`.
    pub fn scripts(&self) -> impl Iterator<Item = &SkillFile> {
        self.files.iter().filter(|f| f.path.starts_with("scripts/"))
    }

    /// Whether it ships scripts that need the process sandbox (anything but Rhai).
    pub fn has_process_scripts(&self) -> bool {
        self.scripts().any(|f| !f.path.ends_with(".rhai"))
    }

    /// The requirements its `requirements.txt` files declare, as `(file,
    /// requirement)` (installed by [`deps::DepsCache`]).
    pub fn requirements(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for f in self
            .files
            .iter()
            .filter(|f| f.path.rsplit('/').next() == Some("requirements.txt"))
        {
            let Ok(text) = std::fs::read_to_string(self.dir.join(&f.path)) else {
                continue;
            };
            out.extend(
                text.lines()
                    .map(|l| l.split('#').next().unwrap_or("").trim())
                    .filter(|l| !l.is_empty())
                    .map(|l| (f.path.clone(), l.to_string())),
            );
        }
        out
    }
}

/// How serious a loading problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Worth fixing; `validate` still passes. The skill loaded, unless the message
    /// says it was not.
    Warning,
    /// The skill was skipped and `validate` fails.
    Error,
}

/// A problem found while loading skills.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
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

/// Every skill found, by name, with the problems met on the way, and the sandbox
/// their non-Rhai scripts run in.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    pub skills: BTreeMap<String, Skill>,
    pub diagnostics: Vec<SkillDiagnostic>,
    pub sandbox: Arc<ProcessSandbox>,
    /// Skills' installed Python requirements.
    pub deps: Arc<deps::DepsCache>,
    /// What scripts' egress proxies share: the internal addresses the operator opened
    /// (`STEWARD_HTTP_ALLOW`, as for `http_fetch`), secret values, the process's CA.
    pub egress: Arc<crate::http::proxy::EgressHub>,
}

/// A skill folder's instructions file: `SKILL.md`, or `skill.md` in lower case.
fn skill_file(folder: &Path) -> Option<(PathBuf, &'static str)> {
    ["SKILL.md", "skill.md"]
        .into_iter()
        .map(|n| (folder.join(n), n))
        .find(|(p, _)| p.is_file())
}

impl SkillSet {
    /// Loads `prompts/skills/` under `root` plus each of `extra_dirs` (relative to the
    /// root, e.g. `.agents/skills`). Missing folders are empty. The first folder wins
    /// when two define the same name. Scripts outside Rhai are refused until
    /// [`SkillSet::with_sandbox`] gives them a sandbox.
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
                let Some((path, file_name)) = skill_file(&folder) else {
                    set.report_folder_without_skill(&dir.join(&folder_name), &folder);
                    continue;
                };
                let rel = dir.join(&folder_name).join(file_name);
                let text = match std::fs::read(&path).map(String::from_utf8) {
                    Ok(Ok(text)) => text,
                    Ok(Err(e)) => {
                        set.diagnostics.push(SkillDiagnostic {
                            file: rel,
                            level: Level::Error,
                            message: format!(
                                "not UTF-8 text (invalid byte at offset {}); skipped",
                                e.utf8_error().valid_up_to()
                            ),
                        });
                        continue;
                    }
                    Err(e) => {
                        set.diagnostics.push(SkillDiagnostic {
                            file: rel,
                            level: Level::Error,
                            message: format!("cannot read: {e}; skipped"),
                        });
                        continue;
                    }
                };
                let mut diags = Vec::new();
                let skill = parse::parse(&text, &folder_name, &folder, &rel, &mut diags);
                set.diagnostics.extend(diags);
                let Some(mut skill) = skill else {
                    continue;
                };
                if let Some(existing) = set.skills.get(&skill.name) {
                    set.diagnostics.push(SkillDiagnostic {
                        file: rel.clone(),
                        level: Level::Warning,
                        message: format!(
                            "skill '{}' is already defined in {}; the first one is used and this one is not loaded",
                            skill.name,
                            existing.file.display()
                        ),
                    });
                    continue;
                }
                skill.files = files::inventory(&folder, file_name);
                set.skills.insert(skill.name.clone(), skill);
            }
        }
        set
    }

    /// A folder with no `SKILL.md`: a group folder holding skills one level too deep,
    /// or not a skill at all. Either way, said.
    fn report_folder_without_skill(&mut self, rel: &Path, folder: &Path) {
        let nested: Vec<String> = std::fs::read_dir(folder)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| skill_file(&e.path()).is_some())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let message = if nested.is_empty() {
            "folder has no SKILL.md, so it is not a skill".to_string()
        } else {
            let mut nested = nested;
            nested.sort();
            format!(
                "folder has no SKILL.md but holds skills one level down ({}); skills must sit directly in the skills folder, so these are not loaded",
                nested.join(", ")
            )
        };
        self.diagnostics.push(SkillDiagnostic {
            file: rel.to_path_buf(),
            level: Level::Warning,
            message,
        });
    }

    /// The same skills, with `sandbox` for their Python, shell and Node scripts.
    pub fn with_sandbox(mut self, sandbox: Arc<ProcessSandbox>) -> SkillSet {
        self.sandbox = sandbox;
        self
    }

    /// Scripts' egress goes through proxies sharing `hub`.
    pub fn with_egress(mut self, hub: Arc<crate::http::proxy::EgressHub>) -> SkillSet {
        self.egress = hub;
        self
    }

    /// Installs skills' requirements into (and mounts them from) `deps`.
    pub fn with_deps(mut self, deps: Arc<deps::DepsCache>) -> SkillSet {
        self.deps = deps;
        self
    }

    /// Skills that ship scripts the sandbox cannot run here, when it cannot.
    pub fn scripts_unavailable(&self) -> Option<(String, Vec<&str>)> {
        let why = self.sandbox.unavailable()?;
        let skills: Vec<&str> = self
            .skills
            .values()
            .filter(|s| s.has_process_scripts())
            .map(|s| s.name.as_str())
            .collect();
        (!skills.is_empty()).then(|| (why.to_string(), skills))
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.skills.keys().cloned().collect()
    }
}
