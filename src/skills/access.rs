//! What one run may do with skills: the catalog for its system prompt, loading bodies
//! and sub-files, and counting loads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path};
use std::sync::{Arc, Mutex};

use super::search::SkillIndex;
use super::{MAX_DESCRIPTION_CHARS, Skill, SkillSet};
use crate::config::SkillsSpec;
use crate::config::spec::ScriptsSpec;
use crate::sandbox::process::{ProcessLimits, ProcessSandbox};
use crate::tokens::quick_estimate;

/// Largest skill file `load_subskill` returns.
const MAX_SUBSKILL_BYTES: u64 = 256 * 1024;
/// Largest skill body loaded whole (estimated tokens). A skill's instructions are
/// needed whole, so they skip the file threshold up to this; past it the load gives
/// the opening and the sections to load one by one.
pub const MAX_SKILL_TOKENS: u64 = 16_000;
/// Files listed when a skill loads; the rest are counted.
const MAX_LISTED_FILES: usize = 40;
/// Skills `skill_search` returns.
pub const SEARCH_RESULTS: usize = 5;

/// The skills of one run.
pub struct RunSkills {
    set: Arc<SkillSet>,
    available: BTreeSet<String>,
    prohibited: BTreeSet<String>,
    required: BTreeSet<String>,
    loads: Mutex<BTreeMap<String, u32>>,
    /// Skills loaded whole in this run, in order (for "already loaded" and compaction).
    loaded: Mutex<Vec<String>>,
    scripts: ScriptsSpec,
    /// The agent's `sandbox:` limits, for its skills' Rhai scripts.
    rhai: crate::sandbox::SandboxLimits,
    /// Set when the catalog is over its token budget: the prompt lists names only.
    index: Option<SkillIndex>,
}

/// Whether `name` matches an `allowed` entry: `*`, an exact name, or a `prefix-*` glob.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

const CATALOG_HEAD: &str = "## Skills\n\nSkills hold know-how for recurring tasks. Before doing work a skill covers, load it with `load_skills`; load further files of a skill with `load_subskill`.\n";

impl RunSkills {
    pub fn new(set: Arc<SkillSet>, spec: &SkillsSpec) -> RunSkills {
        let prohibited: BTreeSet<String> = spec.prohibited.iter().cloned().collect();
        let available: BTreeSet<String> = set
            .skills
            .keys()
            .filter(|n| spec.allowed.iter().any(|p| matches(p, n)) || spec.required.contains(n))
            .filter(|n| !prohibited.contains(*n))
            .cloned()
            .collect();
        let mut skills = RunSkills {
            set,
            available,
            prohibited,
            required: spec.required.iter().cloned().collect(),
            loads: Mutex::new(BTreeMap::new()),
            loaded: Mutex::new(Vec::new()),
            scripts: spec.scripts.clone(),
            rhai: crate::sandbox::SandboxLimits::default(),
            index: None,
        };
        if quick_estimate(&skills.full_catalog()) > spec.catalog_tokens {
            skills.index = Some(skills.build_index());
        }
        skills
    }

    /// A search index over the available skills.
    fn build_index(&self) -> SkillIndex {
        SkillIndex::new(
            self.available
                .iter()
                .filter_map(|n| self.set.get(n))
                .map(|s| (s.name.as_str(), s.description.as_str())),
        )
    }

    pub fn is_empty(&self) -> bool {
        self.available.is_empty()
    }

    /// Names of the skills this run may load, sorted.
    pub fn names(&self) -> Vec<String> {
        self.available.iter().cloned().collect()
    }

    /// Whether the catalog is over its budget, so the run needs `skill_search`.
    pub fn searchable(&self) -> bool {
        self.index.is_some()
    }

    /// One catalog line: name, description (shortened past the specification's
    /// limit), and whether its scripts cannot run here.
    fn line(&self, s: &Skill, with_description: bool) -> String {
        let mut line = format!("\n- {}", s.name);
        if with_description {
            let description = super::parse::shorten(&s.description.replace('\n', " "), MAX_DESCRIPTION_CHARS);
            line.push_str(&format!(": {description}"));
        }
        if s.has_process_scripts() && self.set.sandbox.unavailable().is_some() {
            line.push_str(" (scripts unavailable on this host)");
        }
        line
    }

    fn full_catalog(&self) -> String {
        let mut out = String::from(CATALOG_HEAD);
        for s in self.available.iter().filter_map(|n| self.set.get(n)) {
            out.push_str(&self.line(s, true));
        }
        out.push('\n');
        out
    }

    /// The catalog for the system prompt: name and description of each available
    /// skill, or names only with a pointer to `skill_search` when that would be over
    /// the agent's `catalog_tokens`.
    pub fn catalog(&self) -> Option<String> {
        if self.available.is_empty() {
            return None;
        }
        if self.index.is_none() {
            return Some(self.full_catalog());
        }
        let mut out = format!(
            "{CATALOG_HEAD}There are {} skills, listed by name only. Find the ones for a task with `skill_search` (it returns their descriptions), then load them.\n",
            self.available.len()
        );
        for s in self.available.iter().filter_map(|n| self.set.get(n)) {
            out.push_str(&self.line(s, false));
        }
        out.push('\n');
        Some(out)
    }

    /// The skills best matching `query`, with their descriptions.
    pub fn search(&self, query: &str) -> String {
        // Only an over-budget catalog keeps an index; an explicit grant of the tool
        // without one searches a fresh index.
        let hits = match &self.index {
            Some(index) => index.search(query, SEARCH_RESULTS),
            None => self.build_index().search(query, SEARCH_RESULTS),
        };
        if hits.is_empty() {
            return format!("No skill matches '{query}'. Try other words, or go on without a skill.");
        }
        let mut out = format!("Skills matching '{query}', best first:\n");
        for (name, _) in hits {
            if let Some(s) = self.set.get(&name) {
                out.push_str(&self.line(s, true));
            }
        }
        out
    }

    /// Skill `name`, if this run may use it.
    pub fn skill(&self, name: &str) -> Result<&Skill, SkillError> {
        self.check(name)
    }

    fn check(&self, name: &str) -> Result<&Skill, SkillError> {
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

    fn count(&self, key: String) {
        *self
            .loads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default() += 1;
    }

    /// The bodies of skills `names`, counting each load. Every name is checked
    /// before any loads, so a failed call counts nothing. A skill loaded earlier in
    /// the run answers that it is already loaded instead of being sent again.
    pub fn load_many(&self, names: &[String]) -> Result<String, SkillError> {
        for n in names {
            if let Err(e) = self.check(n) {
                return traced_load(n, false, None, || Err(e));
            }
        }
        let mut parts = Vec::new();
        for n in names {
            let already = self.loaded.lock().unwrap_or_else(|e| e.into_inner()).contains(n);
            if already {
                parts.push(format!(
                    "# Skill: {n}\n\n(already loaded above in this run; its instructions are unchanged)"
                ));
            } else {
                parts.push(self.load(n)?);
            }
        }
        Ok(parts.join("\n\n"))
    }

    /// The body of skill `name` (with its files, license and compatibility), counting
    /// the load.
    pub fn load(&self, name: &str) -> Result<String, SkillError> {
        traced_load(name, self.check(name).is_ok(), None, || self.load_body(name))
    }

    fn load_body(&self, name: &str) -> Result<String, SkillError> {
        let skill = self.check(name)?;
        self.count(name.to_string());
        {
            let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
            if !loaded.iter().any(|n| n == name) {
                loaded.push(name.to_string());
            }
        }
        Ok(self.render(skill))
    }

    /// A loaded skill as the model reads it.
    fn render(&self, skill: &Skill) -> String {
        let mut out = format!("# Skill: {}\n", skill.name);
        if let Some(license) = &skill.license {
            out.push_str(&format!("License: {license}\n"));
        }
        if let Some(c) = &skill.compatibility {
            out.push_str(&format!("Compatibility: {c}\n"));
        }
        out.push('\n');
        let body = skill.body.trim_end();
        if quick_estimate(body) <= MAX_SKILL_TOKENS {
            out.push_str(body);
        } else {
            out.push_str(&outline(&skill.name, body));
        }
        out.push_str(&self.files_note(skill));
        out
    }

    /// The skill's files (binary ones marked, the listing capped), its declared
    /// requirements, and whether its scripts can run here.
    fn files_note(&self, skill: &Skill) -> String {
        let mut out = String::new();
        if !skill.files.is_empty() {
            let listed: Vec<String> = skill
                .files
                .iter()
                .take(MAX_LISTED_FILES)
                .map(|f| {
                    if f.binary {
                        format!("{} (binary, {} bytes; not readable as text)", f.path, f.bytes)
                    } else {
                        f.path.clone()
                    }
                })
                .collect();
            let more = skill.files.len().saturating_sub(MAX_LISTED_FILES);
            let more = if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            };
            out.push_str(&format!(
                "\n\n(Other files of this skill, for load_subskill{}: {}{more})",
                if skill.scripts().next().is_some() {
                    "; scripts/ run with run_skill_script"
                } else {
                    ""
                },
                listed.join(", ")
            ));
        }
        if skill.has_process_scripts() {
            match self.set.sandbox.unavailable() {
                Some(why) => out.push_str(&format!(
                    "\n(Its Python, shell and Node scripts cannot run on this host: {why}.)"
                )),
                None => {
                    use super::deps::{DepsState, Ecosystem};
                    for ecosystem in Ecosystem::ALL {
                        let declared = super::deps::declared_in(skill, ecosystem);
                        if declared.is_empty() {
                            continue;
                        }
                        let program = ecosystem.program();
                        let (language, whose) = match ecosystem {
                            Ecosystem::Python => ("Python", "scripts'"),
                            Ecosystem::Node => ("Node", "Node scripts'"),
                        };
                        let found = crate::sandbox::process::find_program(program);
                        let note = match found.map(|p| self.set.deps.state(skill, &p)) {
                            Some(DepsState::Ready(_)) => "installed".to_string(),
                            Some(DepsState::Installing) => {
                                "installing; a script run waits for it".to_string()
                            }
                            Some(DepsState::Failed(e)) => {
                                format!(
                                    "failed to install, so its {language} scripts cannot import them: {e}"
                                )
                            }
                            None => format!("not installable: {program} is not on this host"),
                            _ => "installed at its first script run".to_string(),
                        };
                        out.push_str(&format!(
                            "\n(Its {whose} requirements, {}: {note}.)",
                            declared.requirements.join(", ")
                        ));
                    }
                }
            }
        }
        out
    }

    /// A file inside skill `name`'s folder, or with `section`, one section of its
    /// `SKILL.md`. Paths that are absolute, contain `..` or resolve (through links)
    /// outside the folder are refused.
    pub fn load_sub(&self, name: &str, path: &str, section: Option<&str>) -> Result<String, SkillError> {
        traced_load(name, self.check(name).is_ok(), Some(path), || {
            self.load_sub_body(name, path, section)
        })
    }

    fn load_sub_body(&self, name: &str, path: &str, section: Option<&str>) -> Result<String, SkillError> {
        let skill = self.check(name)?;
        let rel = Path::new(path);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(SkillError::Outside(path.to_string()));
        }
        let is_skill_md = matches!(path, "SKILL.md" | "skill.md");
        if let Some(section) = section {
            if !is_skill_md {
                return Err(SkillError::Unreadable(
                    "`section` applies to SKILL.md only".into(),
                ));
            }
            let text = find_section(&skill.body, section).ok_or_else(|| SkillError::NoSection {
                section: section.to_string(),
                sections: headings(&skill.body)
                    .into_iter()
                    .map(|(h, _)| h)
                    .collect::<Vec<_>>()
                    .join("; "),
            })?;
            self.count(format!("{name}/SKILL.md#{section}"));
            return Ok(format!("# {name}/SKILL.md § {section}\n\n{text}"));
        }
        if is_skill_md {
            return self.load(name);
        }
        if skill.files.iter().any(|f| f.path == path && f.binary) {
            return Err(SkillError::Binary(path.to_string()));
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
        let text =
            std::fs::read(&full).map_err(|e| SkillError::Unreadable(format!("cannot read '{path}': {e}")))?;
        let text = String::from_utf8(text).map_err(|_| SkillError::Binary(path.to_string()))?;
        self.count(format!("{name}/{path}"));
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

    /// After a compaction: the skills the model loaded (required ones are pinned
    /// already), so their instructions survive the summary. Not counted as loads.
    pub fn reinjection(&self) -> Option<String> {
        let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let bodies: Vec<String> = loaded
            .iter()
            .filter(|n| !self.required.contains(*n))
            .filter_map(|n| self.set.get(n))
            .map(|s| self.render(s))
            .collect();
        (!bodies.is_empty()).then(|| {
            format!(
                "[steward: skills loaded earlier in this run, kept through compaction]\n\n{}",
                bodies.join("\n\n")
            )
        })
    }

    /// Loads per skill (and per `skill/path` for sub-files).
    pub fn loads(&self) -> BTreeMap<String, u32> {
        self.loads.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The sandbox for Python, shell and Node scripts.
    pub fn sandbox(&self) -> &ProcessSandbox {
        &self.set.sandbox
    }

    /// Skills' installed Python requirements.
    pub fn deps(&self) -> &super::deps::DepsCache {
        &self.set.deps
    }

    /// The agent's network for sandboxed scripts, when it gives them any: the proxy's
    /// rules and what the process's proxies share.
    pub fn script_egress(
        &self,
    ) -> Option<(
        crate::http::proxy::EgressRules,
        &std::sync::Arc<crate::http::proxy::EgressHub>,
    )> {
        self.scripts
            .egress
            .as_ref()
            .map(|e| (e.rules(), &self.set.egress))
    }

    /// Rhai skill scripts run under `limits` (the agent's `sandbox:`) rather than the
    /// defaults.
    pub fn with_rhai_limits(mut self, limits: crate::sandbox::SandboxLimits) -> RunSkills {
        self.rhai = limits;
        self
    }

    /// The limits a Rhai skill script runs under.
    pub fn rhai_limits(&self) -> &crate::sandbox::SandboxLimits {
        &self.rhai
    }

    /// The agent's limits for sandboxed scripts.
    pub fn script_limits(&self) -> ProcessLimits {
        self.scripts.limits()
    }

    /// Interpreters the agent allows for scripts.
    pub fn interpreters(&self) -> &[String] {
        &self.scripts.interpreters
    }
}

/// `## ` and `### ` headings of a Markdown body with the estimated tokens under each.
fn headings(body: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let mut fence = false;
    for line in body.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        let heading = (!fence)
            .then(|| line.strip_prefix("## ").or_else(|| line.strip_prefix("### ")))
            .flatten();
        match heading {
            Some(h) => out.push((h.trim().to_string(), 0)),
            None => {
                if let Some(last) = out.last_mut() {
                    last.1 += quick_estimate(line) + 1;
                }
            }
        }
    }
    out
}

/// The text of section `wanted` (its heading through the next heading of the same or
/// a higher level), matched without regard to case.
fn find_section(body: &str, wanted: &str) -> Option<String> {
    let wanted = wanted.trim().trim_start_matches('#').trim().to_lowercase();
    let mut out: Option<(usize, Vec<&str>)> = None;
    let mut fence = false;
    for line in body.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        let level = if fence {
            0
        } else {
            line.chars().take_while(|c| *c == '#').count()
        };
        let is_heading = level > 0 && line[level..].starts_with(' ');
        match &mut out {
            Some((open, lines)) => {
                if is_heading && level <= *open {
                    break;
                }
                lines.push(line);
            }
            None if is_heading && line[level..].trim().to_lowercase() == wanted => {
                out = Some((level, vec![line]));
            }
            None => {}
        }
    }
    out.map(|(_, lines)| lines.join("\n"))
}

/// A body too large to load whole: its opening (up to the first section) and its
/// sections, to load one at a time.
fn outline(name: &str, body: &str) -> String {
    let opening: String = body
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .collect::<Vec<_>>()
        .join("\n");
    let opening = crate::tokens::floor_char(&opening, (MAX_SKILL_TOKENS as usize) * 2);
    let sections: Vec<String> = headings(body)
        .into_iter()
        .map(|(h, t)| format!("- {h} (~{t} tokens)"))
        .collect();
    format!(
        "{}\n\n[steward: these instructions are ~{} tokens, over the {MAX_SKILL_TOKENS}-token limit for loading a skill whole. Above is its opening; load the sections the task needs with load_subskill {{\"skill\": \"{name}\", \"path\": \"SKILL.md\", \"section\": \"<heading>\"}}. Sections:\n{}]",
        opening.trim_end(),
        quick_estimate(body),
        sections.join("\n")
    )
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
    #[error("'{0}' is a binary file (a font, image or archive), not text")]
    Binary(String),
    #[error("SKILL.md has no section '{section}'; sections: {sections}")]
    NoSection { section: String, sections: String },
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
            SkillError::Binary(_) => "binary",
            SkillError::NoSection { .. } => "no_section",
            SkillError::Unreadable(_) => "unreadable",
        }
    }
}

/// Runs one skill load inside a `load_skill {name}` span with its size or error. The
/// name and path are the model's words: a name of no skill the agent may load
/// (`known` false) is `(unknown)`, and the path of a failed load is left off, so a
/// private run's text never reaches a trace through them.
fn traced_load(
    name: &str,
    known: bool,
    path: Option<&str>,
    load: impl FnOnce() -> Result<String, SkillError>,
) -> Result<String, SkillError> {
    let name = if known { name } else { "(unknown)" };
    let span = tracing::info_span!(
        parent: crate::telemetry::parent(),
        "load_skill",
        otel.name = %format!("load_skill {name}"),
        "steward.skill.name" = name,
        "steward.skill.file" = tracing::field::Empty,
        "steward.skill.bytes" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    );
    let _entered = span.enter();
    let result = load();
    match &result {
        Ok(text) => {
            span.record("steward.skill.file", path.unwrap_or("SKILL.md"));
            span.record("steward.skill.bytes", text.len() as u64)
        }
        Err(e) => {
            span.record(
                "steward.skill.file",
                if path.is_some() {
                    "(not loaded)"
                } else {
                    "SKILL.md"
                },
            );
            span.record("error.type", e.kind())
        }
    };
    result
}
