//! Skills' requirements, installed: what a skill declares for Python
//! (`requirements.txt` files, PEP 723 `# /// script` blocks in its Python scripts) or
//! for Node (the `dependencies` of its top-level `package.json`) is installed once per
//! declaration into a folder of the cache (`<name>-<hash>/`), mounted read-only at
//! `/deps` in the sandbox with `PYTHONPATH` and `NODE_PATH` naming it. The hash covers
//! the declarations and the interpreter, so the same declarations are never installed
//! twice and a changed one gets a folder of its own.
//!
//! Node packages install with `npm install --ignore-scripts` (no package's install
//! script runs on the host) from the registry `NPM_CONFIG_REGISTRY` names, else npm's.
//!
//! The installer is `uv pip install` when `uv` is on the host, else the interpreter's
//! own `pip`, with `--target` (no virtual environment to create) and **wheels only**
//! (`--only-binary :all:`, uv's `--no-build`): a source distribution's build script
//! would run on the host, outside the sandbox, so it is refused. It runs with an empty
//! environment but for `PATH`, a scratch `HOME` and the package index settings
//! (`PIP_INDEX_URL`, `UV_INDEX_URL`, ...), so nothing of steward's (keys, tokens)
//! reaches it; and its network goes through an egress proxy of its own (on a loopback
//! port, `HTTP_PROXY`/`HTTPS_PROXY`) that allows the package index's hosts only, with
//! the address checks of every other egress: a requirement naming a file elsewhere is
//! refused, and an index at an internal address needs `STEWARD_HTTP_ALLOW`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::Skill;

/// Longest an install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// Installer output kept in a failure's message.
const ERROR_TAIL: usize = 2_000;
/// The file marking a finished install.
const COMPLETE: &str = ".steward-complete";

/// Which packages a script's interpreter imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecosystem {
    /// `python3`: `requirements.txt`, PEP 723.
    Python,
    /// `node`: `package.json`.
    Node,
}

impl Ecosystem {
    pub const ALL: [Ecosystem; 2] = [Ecosystem::Python, Ecosystem::Node];

    /// The program its requirements install for.
    pub fn program(self) -> &'static str {
        match self {
            Ecosystem::Python => "python3",
            Ecosystem::Node => "node",
        }
    }

    /// The ecosystem of `interpreter` (`python3.11`, `node`), if it has one.
    pub fn of(interpreter: &Path) -> Option<Ecosystem> {
        let name = interpreter.file_name()?.to_str()?;
        if name.starts_with("python") {
            Some(Ecosystem::Python)
        } else if name == "node" || name == "nodejs" {
            Some(Ecosystem::Node)
        } else {
            None
        }
    }
}

/// What a skill declares.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    /// The files that declare them (`requirements.txt`, `scripts/x.py`).
    pub files: Vec<String>,
    /// One requirement specifier each (`pypdf>=4`).
    pub requirements: Vec<String>,
}

impl Declared {
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// The `dependencies` of a PEP 723 `# /// script` block, if `text` has one.
fn pep723(text: &str) -> Option<Vec<String>> {
    let mut inside = false;
    let mut toml = String::new();
    for line in text.lines() {
        if !inside {
            inside = line.trim_end() == "# /// script";
            continue;
        }
        if line.trim_end() == "# ///" {
            break;
        }
        toml.push_str(line.strip_prefix("# ").or_else(|| line.strip_prefix('#'))?);
        toml.push('\n');
    }
    // `dependencies = ["a", "b>=2"]`, on one line or several.
    let start = toml.find("dependencies")?;
    let list = &toml[start..];
    let open = list.find('[')?;
    let close = list.find(']')?;
    Some(
        list.get(open + 1..close)?
            .split(',')
            .map(|s| s.trim().trim_matches(['"', '\'']).trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// What `skill` declares for `interpreter`'s ecosystem (nothing for another program).
pub fn declared_for(skill: &Skill, interpreter: &Path) -> Declared {
    Ecosystem::of(interpreter).map_or_else(Declared::default, |e| declared_in(skill, e))
}

/// What `skill` declares for `ecosystem`.
pub fn declared_in(skill: &Skill, ecosystem: Ecosystem) -> Declared {
    match ecosystem {
        Ecosystem::Python => declared(skill),
        Ecosystem::Node => declared_node(skill),
    }
}

/// The `dependencies` of `skill`'s top-level `package.json`, as `name@spec`, sorted;
/// a file that is not JSON declares nothing (and `validate` is not told: npm would say
/// the same at install).
pub fn declared_node(skill: &Skill) -> Declared {
    let Ok(text) = std::fs::read_to_string(skill.dir.join("package.json")) else {
        return Declared::default();
    };
    let deps = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("dependencies").and_then(|d| d.as_object()).cloned())
        .unwrap_or_default();
    let mut requirements: Vec<String> = deps
        .iter()
        .map(|(name, spec)| format!("{name}@{}", spec.as_str().unwrap_or("*")))
        .collect();
    requirements.sort();
    Declared {
        files: if requirements.is_empty() {
            Vec::new()
        } else {
            vec!["package.json".into()]
        },
        requirements,
    }
}

/// What `skill` declares: its `requirements.txt` lines and its Python scripts' PEP 723
/// dependencies.
pub fn declared(skill: &Skill) -> Declared {
    let mut out = Declared::default();
    for (file, requirement) in skill.requirements() {
        if !out.files.contains(&file) {
            out.files.push(file);
        }
        out.requirements.push(requirement);
    }
    for f in skill.scripts().filter(|f| f.path.ends_with(".py")) {
        let Ok(text) = std::fs::read_to_string(skill.dir.join(&f.path)) else {
            continue;
        };
        if let Some(deps) = pep723(&text).filter(|d| !d.is_empty()) {
            out.files.push(f.path.clone());
            out.requirements.extend(deps);
        }
    }
    out
}

/// A skill's requirements, as far as this process knows.
#[derive(Debug, Clone, PartialEq)]
pub enum DepsState {
    /// It declares none.
    None,
    /// Declared, not installed yet (installed at the first script run, or by `steward
    /// skills install`).
    Missing,
    Installing,
    /// Installed in this folder (its `site/` is what scripts import from).
    Ready(PathBuf),
    /// The installer failed (its output's end).
    Failed(String),
}

/// Installed requirements of every skill, in one cache folder.
#[derive(Debug)]
pub struct DepsCache {
    dir: PathBuf,
    /// The package index settings the installer gets.
    index: Vec<(String, String)>,
    /// Installs under way or failed in this process, by install folder; one install
    /// per folder at a time (later callers wait for it).
    installs: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<Option<String>>>>>,
    /// What the installer's proxy checks addresses with.
    egress: Arc<crate::http::proxy::EgressHub>,
}

/// The variables naming package indexes, whose hosts installs may reach.
const INDEX_VARS: [&str; 4] = [
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
];

/// Where PyPI's files are, beside the index itself.
const PYPI: [&str; 2] = ["pypi.org", "files.pythonhosted.org"];

/// The variable naming Node's registry.
const NPM_REGISTRY_VAR: &str = "NPM_CONFIG_REGISTRY";

/// npm's registry when none is set.
const NPM: &str = "registry.npmjs.org";

impl Default for DepsCache {
    fn default() -> Self {
        DepsCache::new(std::env::temp_dir().join("steward-skill-deps"), Vec::new())
    }
}

impl DepsCache {
    pub fn new(dir: PathBuf, index: Vec<(String, String)>) -> DepsCache {
        DepsCache {
            dir,
            index,
            installs: Mutex::default(),
            egress: Arc::default(),
        }
    }

    /// Installs reach the index through proxies checking addresses as `hub` does
    /// (`STEWARD_HTTP_ALLOW`).
    pub fn with_egress(mut self, hub: Arc<crate::http::proxy::EgressHub>) -> DepsCache {
        self.egress = hub;
        self
    }

    /// The hosts installs for `ecosystem` may reach: those of the configured indexes
    /// (with their ports when not the scheme's), else PyPI's (PyPI's files host goes
    /// with PyPI) or npm's.
    pub fn index_hosts(&self, ecosystem: Ecosystem) -> Vec<String> {
        let vars: &[&str] = match ecosystem {
            Ecosystem::Python => &INDEX_VARS,
            Ecosystem::Node => &[NPM_REGISTRY_VAR],
        };
        let mut hosts: Vec<String> = self
            .index
            .iter()
            .filter(|(k, _)| vars.contains(&k.as_str()))
            .flat_map(|(_, v)| v.split_whitespace())
            .filter_map(|u| url::Url::parse(u).ok())
            .filter_map(|u| {
                let host = u.host_str()?.trim_matches(['[', ']']).to_ascii_lowercase();
                Some(match u.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host,
                })
            })
            .collect();
        match ecosystem {
            Ecosystem::Python if hosts.is_empty() || hosts.iter().any(|h| h == PYPI[0]) => {
                hosts.extend(PYPI.map(String::from))
            }
            Ecosystem::Node if hosts.is_empty() => hosts.push(NPM.into()),
            _ => {}
        }
        hosts.sort();
        hosts.dedup();
        hosts
    }

    /// The folder `skill`'s declarations install into with `interpreter`.
    pub fn folder(&self, skill: &Skill, declared: &Declared, interpreter: &Path) -> PathBuf {
        let mut hash = Sha256::new();
        hash.update(interpreter.as_os_str().as_encoded_bytes());
        for r in &declared.requirements {
            hash.update([0]);
            hash.update(r.as_bytes());
        }
        // The name is hashed too, and only its plain characters name the folder: a
        // name is only warned about when odd, and `../x` must not leave the cache.
        hash.update([0]);
        hash.update(skill.name.as_bytes());
        let digest = hex::encode(hash.finalize());
        let plain: String = skill
            .name
            .chars()
            .take(64)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{plain}-{}", &digest[..16]))
    }

    /// `skill`'s state for `interpreter`.
    pub fn state(&self, skill: &Skill, interpreter: &Path) -> DepsState {
        let declared = declared_for(skill, interpreter);
        if declared.is_empty() {
            return DepsState::None;
        }
        let folder = self.folder(skill, &declared, interpreter);
        if folder.join(COMPLETE).exists() {
            return DepsState::Ready(folder);
        }
        let lock = self
            .installs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&folder)
            .cloned();
        match lock {
            Some(l) => match l.try_lock() {
                Err(_) => DepsState::Installing,
                Ok(done) => match done.as_ref() {
                    Some(error) => DepsState::Failed(error.clone()),
                    None => DepsState::Missing,
                },
            },
            None => DepsState::Missing,
        }
    }

    /// Installs `skill`'s requirements for `interpreter` unless they are installed;
    /// `None` when it declares none. A failure is kept: later calls in this process
    /// answer with it rather than install again (a changed declaration is a new try).
    pub async fn ensure(&self, skill: &Skill, interpreter: &Path) -> Result<Option<PathBuf>, String> {
        let declared = declared_for(skill, interpreter);
        let mounted = |folder: &Path| match Ecosystem::of(interpreter) {
            Some(Ecosystem::Node) => folder.join("node/node_modules"),
            _ => folder.join("site"),
        };
        if declared.is_empty() {
            return Ok(None);
        }
        // Installed requirements are trusted by their marker alone: only a cache no one
        // else can write to may be read.
        crate::sandbox::private_dir::ensure(&self.dir)
            .map_err(|e| format!("the skill requirements cache cannot be used: {e}"))?;
        let folder = self.folder(skill, &declared, interpreter);
        if folder.join(COMPLETE).exists() {
            return Ok(Some(mounted(&folder)));
        }
        let lock = self
            .installs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(folder.clone())
            .or_default()
            .clone();
        let mut failed = lock.lock().await;
        if let Some(error) = failed.as_ref() {
            return Err(error.clone());
        }
        if folder.join(COMPLETE).exists() {
            return Ok(Some(mounted(&folder)));
        }
        tracing::info!(skill = %skill.name, requirements = ?declared.requirements, "installing a skill's requirements");
        match self.install(&declared, &folder, interpreter).await {
            Ok(()) => Ok(Some(mounted(&folder))),
            Err(e) => {
                tracing::warn!(skill = %skill.name, error = %e, "a skill's requirements did not install");
                *failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// One install into a fresh folder, renamed into place once complete (a crash
    /// leaves no half-installed folder that looks finished).
    async fn install(&self, declared: &Declared, folder: &Path, interpreter: &Path) -> Result<(), String> {
        let ecosystem = Ecosystem::of(interpreter).unwrap_or(Ecosystem::Python);
        if let Some(why) = declared
            .requirements
            .iter()
            .find_map(|r| not_from_the_index(ecosystem, r))
        {
            return Err(format!("{why} (declared in {})", declared.files.join(", ")));
        }
        let scratch = self
            .dir
            .join(format!(".install-{}", uuid::Uuid::now_v7().simple()));
        let result = self
            .install_into(declared, &scratch, interpreter, ecosystem)
            .await;
        let result = result.and_then(|()| {
            std::fs::write(scratch.join(COMPLETE), declared.requirements.join("\n"))
                .and_then(|()| std::fs::rename(&scratch, folder))
                .map_err(|e| format!("cannot move the install into {}: {e}", folder.display()))
        });
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&scratch);
            // Another process installed the same declarations first: theirs serves.
            if folder.join(COMPLETE).exists() {
                return Ok(());
            }
        }
        result
    }

    async fn install_into(
        &self,
        declared: &Declared,
        target: &Path,
        interpreter: &Path,
        ecosystem: Ecosystem,
    ) -> Result<(), String> {
        let home = target.join("home");
        std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
        let mut command = match ecosystem {
            Ecosystem::Python => python_installer(declared, target, interpreter)?,
            Ecosystem::Node => node_installer(declared, target)?,
        };
        let rules = crate::http::proxy::EgressRules {
            allow: self.index_hosts(ecosystem),
            listed_in: match ecosystem {
                Ecosystem::Python => {
                    "the package index's hosts (PIP_INDEX_URL, UV_INDEX_URL and their EXTRA_ forms; PyPI's without them)"
                }
                Ecosystem::Node => "the package registry's host (NPM_CONFIG_REGISTRY; npm's without it)",
            },
            within: None,
            max_requests: u32::MAX,
            max_bytes: u64::MAX,
            secrets: Vec::new(),
        };
        let proxy = crate::http::proxy::Proxy::start_tcp(rules, self.egress.clone())
            .map_err(|e| format!("cannot start the installer's egress proxy: {e}"))?;
        let proxy_url = proxy.addr().map(|a| format!("http://{a}")).unwrap_or_default();
        command
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("npm_config_cache", home.join(".npm"))
            // No git for npm: version-control dependencies are refused above anyway.
            .env("npm_config_git", "/bin/false")
            .envs(self.index.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(
                [
                    "HTTP_PROXY",
                    "HTTPS_PROXY",
                    "http_proxy",
                    "https_proxy",
                    "ALL_PROXY",
                ]
                .map(|k| (k, proxy_url.as_str())),
            )
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(INSTALL_TIMEOUT, command.output())
            .await
            .map_err(|_| format!("the install took longer than {} s", INSTALL_TIMEOUT.as_secs()))?
            .map_err(|e| format!("cannot start the installer: {e}"))?;
        if output.status.success() {
            return Ok(());
        }
        // What the proxy refused is the clearest reason; the installer's words follow.
        let mut refused: Vec<String> = proxy.records().into_iter().filter_map(|r| r.refused).collect();
        refused.dedup();
        let text = String::from_utf8_lossy(&output.stderr);
        let text = if text.trim().is_empty() {
            String::from_utf8_lossy(&output.stdout)
        } else {
            text
        };
        let start = text.len().saturating_sub(ERROR_TAIL);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(text.len());
        let refusals = match refused.is_empty() {
            true => String::new(),
            false => format!("the egress proxy refused: {}; ", refused.join("; ")),
        };
        Err(format!(
            "the installer failed ({}): {refusals}{}",
            output.status,
            text[start..].trim()
        ))
    }
}

/// Why `spec` is refused: a source other than the package index or registry (a
/// version-control URL, which git or ssh would fetch around the installer's proxy and
/// which npm builds with its `prepare` script even under `--ignore-scripts`; a local
/// path; an installer option such as another index).
fn not_from_the_index(ecosystem: Ecosystem, spec: &str) -> Option<String> {
    let spec = spec.trim();
    let lower = spec.to_ascii_lowercase();
    let refused = match ecosystem {
        Ecosystem::Python => {
            spec.starts_with('-')
                || ["git+", "hg+", "svn+", "bzr+", "file:"]
                    .iter()
                    .any(|s| lower.contains(s))
                || spec.starts_with(['.', '/', '~'])
        }
        // `name@spec`: only versions and ranges (no `github:`, `git+ssh:`, `file:`,
        // `npm:` alias, `user/repo`, URL).
        Ecosystem::Node => {
            split_node_spec(spec).is_none_or(|(_, version)| version.contains([':', '/', '\\']))
        }
    };
    refused.then(|| {
        format!(
            "requirement '{spec}' is not a package from the index: steward installs released packages from the package index or registry only (no version-control URLs, local paths or installer options)"
        )
    })
}

/// `name@version` split at the `@` after the name (a scoped name begins with `@`).
fn split_node_spec(spec: &str) -> Option<(&str, &str)> {
    let at = spec.get(1..)?.find('@')? + 1;
    Some((&spec[..at], &spec[at + 1..]))
}

/// `uv pip install` (or the interpreter's pip) of `declared` into `target/site`, wheels
/// only.
fn python_installer(
    declared: &Declared,
    target: &Path,
    interpreter: &Path,
) -> Result<tokio::process::Command, String> {
    let site = target.join("site");
    std::fs::create_dir_all(&site).map_err(|e| format!("cannot make {}: {e}", site.display()))?;
    let requirements = target.join("requirements.txt");
    std::fs::write(&requirements, declared.requirements.join("\n") + "\n").map_err(|e| e.to_string())?;
    Ok(match crate::sandbox::process::find_program("uv") {
        Some(uv) => {
            let mut c = tokio::process::Command::new(uv);
            c.args(["pip", "install", "--no-build", "--python"])
                .arg(interpreter)
                .arg("--target")
                .arg(&site)
                .arg("-r")
                .arg(&requirements);
            c
        }
        None => {
            let mut c = tokio::process::Command::new(interpreter);
            c.args([
                "-m",
                "pip",
                "install",
                "--only-binary",
                ":all:",
                "--no-input",
                "--disable-pip-version-check",
                "--no-warn-script-location",
                "--no-cache-dir",
                "--target",
            ])
            .arg(&site)
            .arg("-r")
            .arg(&requirements);
            c
        }
    })
}

/// `npm install --ignore-scripts` of `declared` (`name@spec`) into
/// `target/node/node_modules`: no package's install script runs on the host.
fn node_installer(declared: &Declared, target: &Path) -> Result<tokio::process::Command, String> {
    let npm = crate::sandbox::process::find_program("npm")
        .ok_or("npm is not installed on this host: a skill's package.json cannot be installed")?;
    let dir = target.join("node");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let dependencies: serde_json::Map<String, serde_json::Value> = declared
        .requirements
        .iter()
        .filter_map(|r| split_node_spec(r))
        .map(|(name, spec)| (name.to_string(), spec.into()))
        .collect();
    let manifest = serde_json::json!({
        "name": "steward-skill-deps",
        "version": "0.0.0",
        "private": true,
        "dependencies": dependencies,
    });
    std::fs::write(dir.join("package.json"), manifest.to_string()).map_err(|e| e.to_string())?;
    let mut c = tokio::process::Command::new(npm);
    c.args([
        "install",
        "--ignore-scripts",
        "--omit=dev",
        "--no-audit",
        "--no-fund",
        "--no-package-lock",
        "--no-update-notifier",
        "--prefix",
    ])
    .arg(&dir);
    Ok(c)
}

/// A hint for a script that failed on `ModuleNotFoundError: No module named 'x'` (or
/// Node's `Cannot find module 'x'`).
pub fn missing_module_hint(stderr: &str, skill: &Skill) -> Option<String> {
    if let Some(line) = stderr.lines().find(|l| l.contains("Cannot find module '")) {
        let module = line.split('\'').nth(1)?;
        // A relative path is the script's own file, not a package.
        if module.starts_with('.') || module.starts_with('/') {
            return None;
        }
        let declared = declared_node(skill);
        return Some(if declared.is_empty() {
            format!(
                "The script requires '{module}', which this skill does not declare: add it to the dependencies of {}/package.json and steward installs it.",
                skill.dir.display()
            )
        } else {
            format!(
                "The script requires '{module}', which none of the skill's package.json dependencies ({}) provides: declare it there.",
                declared.requirements.join(", ")
            )
        });
    }
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains("ModuleNotFoundError: No module named"))?;
    let module = line
        .rsplit("No module named")
        .next()?
        .trim()
        .trim_matches(['\'', '"']);
    let top = module.split('.').next().unwrap_or(module);
    let declared = declared(skill);
    Some(if declared.is_empty() {
        format!(
            "The script imports '{top}', which this skill does not declare: add it to {}/requirements.txt (or the script's `# /// script` block) and steward installs it.",
            skill
                .file
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
    } else {
        format!(
            "The script imports '{top}', which none of the skill's declared requirements ({}) provides: declare the package that does in {}.",
            declared.requirements.join(", "),
            declared.files.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skills_folder_in_the_cache_stays_in_the_cache() {
        let cache = DepsCache::new(PathBuf::from("/cache"), Vec::new());
        let skill = |name: &str| Skill {
            name: name.into(),
            description: String::new(),
            license: None,
            compatibility: None,
            metadata: Default::default(),
            allowed_tools: Vec::new(),
            body: String::new(),
            dir: PathBuf::from("/skills/x"),
            file: PathBuf::from("skills/x/SKILL.md"),
            files: Vec::new(),
        };
        let declared = Declared {
            files: vec!["requirements.txt".into()],
            requirements: vec!["pypdf>=4".into()],
        };
        let python = Path::new("/usr/bin/python3");
        let odd = cache.folder(&skill("../../srv/steward/x"), &declared, python);
        assert_eq!(odd.parent(), Some(Path::new("/cache")), "{odd:?}");
        let plain = cache.folder(&skill("pdf-forms"), &declared, python);
        assert!(
            plain
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("pdf-forms-")
        );
        assert_ne!(odd, plain);
    }

    #[test]
    fn only_released_packages_from_the_index_are_installed() {
        for ok in [
            "pypdf>=4",
            "requests==2.31.0",
            "pkg @ https://files.example.com/pkg-1.whl",
            "numpy; python_version>'3.8'",
        ] {
            assert!(not_from_the_index(Ecosystem::Python, ok).is_none(), "{ok}");
        }
        for refused in [
            "git+ssh://git@github.com/a/b",
            "pkg @ git+https://x/y",
            "-e .",
            "--index-url http://evil/simple",
            "./local",
            "pkg @ file:///etc/x.whl",
        ] {
            assert!(
                not_from_the_index(Ecosystem::Python, refused).is_some(),
                "{refused}"
            );
        }
        for ok in ["left-pad@1.3.0", "@scope/pkg@^2", "lodash@*"] {
            assert!(not_from_the_index(Ecosystem::Node, ok).is_none(), "{ok}");
        }
        for refused in [
            "x@github:u/r",
            "x@git+ssh://git@h/r.git",
            "x@file:../y",
            "x@npm:other@1",
            "x@u/r",
            "x@https://h/x.tgz",
        ] {
            assert!(
                not_from_the_index(Ecosystem::Node, refused).is_some(),
                "{refused}"
            );
        }
    }

    #[test]
    fn pep_723_blocks_declare_dependencies() {
        let script = "#!/usr/bin/env python3\n# /// script\n# requires-python = \">=3.10\"\n# dependencies = [\n#   \"pypdf>=4\",\n#   'rich',\n# ]\n# ///\nimport pypdf\n";
        assert_eq!(
            pep723(script),
            Some(vec!["pypdf>=4".to_string(), "rich".to_string()])
        );
        assert_eq!(pep723("import os\n"), None);
    }
}
