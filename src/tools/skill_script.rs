//! `run_skill_script`: run a script a skill ships.
//!
//! - Rhai (`scripts/*.rhai`) runs in the same sandbox as coordinator scripts. It sees
//!   `args` and may call only tools that both the agent and the skill's
//!   `allowed-tools` grant; each such call goes through the run's tool gateway
//!   (recorded with its parent call id, counted toward `max_tool_calls`, and marking
//!   the run as having side effects when the tool has them). Its last expression is
//!   the result.
//! - Python, shell and Node scripts run in the bubblewrap sandbox
//!   ([`crate::sandbox::process`]) with the agent's `skills.scripts` limits: arguments
//!   as a list of strings, optional stdin, the run files the model names in the work
//!   folder; files the script writes there become run files. They have no network and
//!   no way to reach steward's tools.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rhai::{Dynamic, EvalAltResult, Map, Position, Scope};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Effect, Tool, ToolCtx, ToolError, ToolOutput, ToolResult, ToolSpec};

/// The tool's name.
pub const SKILL_SCRIPT_TOOL: &str = "run_skill_script";
use crate::files::{FileSource, NewFile, mime};
use crate::sandbox;
use crate::sandbox::process::{Job, Stop, WorkFile, find_program};
use crate::skills::Skill;

/// A skill's own egress list (`egress.yaml` in its folder: `allow: [hosts]`), which
/// narrows the agent's and never widens it; `None` without the file.
fn skill_egress(dir: &std::path::Path) -> Result<Option<Vec<String>>, String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct SkillEgress {
        allow: Vec<String>,
    }
    // A regular file inside the skill's folder: a link to `/srv/steward/.env` or a
    // mounted token would otherwise be read, and quoted back in the error below.
    let text = match crate::config::within::read_text(dir, std::path::Path::new("egress.yaml")) {
        Ok(text) => text,
        Err(crate::config::within::WithinError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(None);
        }
        Err(e) => return Err(format!("its skill's egress.yaml cannot be used: {e}")),
    };
    // Bounded first (aliases); then typed from the text, for errors' locations. The
    // error names where, never what: serde quotes the value it did not expect.
    let spec: SkillEgress = crate::config::yaml::value(&text)
        .and_then(|_| serde_yaml::from_str(&text))
        .map_err(|e| {
            let at = e
                .location()
                .map(|l| format!(":{}:{}", l.line(), l.column()))
                .unwrap_or_default();
            format!("its skill's egress.yaml{at} is not `allow: [hosts]` (a list of host names)")
        })?;
    Ok(Some(
        spec.allow
            .iter()
            .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase())
            .collect(),
    ))
}

/// Tail of stderr shown with a failed script.
const STDERR_TAIL: usize = 2000;

/// Wall-clock limit of one skill script.
const TIMEOUT: Duration = Duration::from_secs(30);

pub struct SkillScript {
    spec: ToolSpec,
}

pub fn skill_script_tool() -> Arc<dyn Tool> {
    Arc::new(SkillScript {
        spec: ToolSpec {
            name: SKILL_SCRIPT_TOOL.into(),
            description: "Run a script a skill ships, named as the skill lists it (scripts/<name>.py, .sh, .js or .rhai). Python, shell and Node scripts run sandboxed, with network only to the hosts the agent's skills.scripts.egress lists (through a proxy; HTTP_PROXY is set): pass `args` as a list of strings, optional `stdin`, and the ids of run files to put in their work folder; files they write come back as new run files. Rhai scripts take `args` as an object and return their result.".into(),
            parameters: super::args::schema_of::<ScriptArgs>(),
            effect: Effect::ReadOnly,
        },
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScriptArgs {
    skill: String,
    /// The script as the skill lists it, e.g. scripts/fill_form.py.
    #[schemars(length(min = 1))]
    script: String,
    /// Rhai: an object the script reads as `args`. Python, shell, Node: command-line
    /// arguments, a list of strings.
    #[serde(default)]
    #[schemars(schema_with = "args_schema")]
    args: Option<Value>,
    /// Text on the script's standard input (not for Rhai).
    stdin: Option<String>,
    /// Ids of run files to put in the script's work folder under their names (not for
    /// Rhai).
    files: Option<Vec<String>>,
}

fn args_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["object", "array"],
        "items": {"type": "string"},
        "description": "Rhai: an object read as `args`. Python, shell, Node: command-line arguments, a list of strings."
    })
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
        let a: ScriptArgs = super::args::parse(args)?;
        let skill = skills.skill(&a.skill).map_err(ToolError::from)?;
        let rel = resolve(skill, &a.script)?;
        if rel.ends_with(".rhai") {
            if a.stdin.is_some() || a.files.is_some() {
                return Err(ToolError::Model(format!(
                    "{rel} is a Rhai script: it takes `args` as an object, not `stdin` or `files`"
                )));
            }
            let script_args = match a.args {
                None => serde_json::Map::new(),
                Some(Value::Object(map)) => map,
                Some(_) => {
                    return Err(ToolError::Model(format!(
                        "{rel} is a Rhai script: pass `args` as an object"
                    )));
                }
            };
            let source = std::fs::read_to_string(skill.dir.join(&rel))
                .map_err(|_| ToolError::Model(format!("skill '{}' has no script {rel}", a.skill)))?;
            return run_rhai(ctx, skill, rel, source, script_args).await;
        }
        let argv = match a.args {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    other => Err(ToolError::Model(format!(
                        "`args` of {rel} must be strings; got {other}"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => {
                return Err(ToolError::Model(format!(
                    "{rel} takes `args` as a list of strings (command-line arguments)"
                )));
            }
        };
        run_process(
            ctx,
            skills,
            skill,
            &rel,
            argv,
            a.stdin,
            a.files.unwrap_or_default(),
        )
        .await
    }

    /// Skill scripts are local and sandboxed; the mock runs them too.
    async fn mock(&self, ctx: &ToolCtx, args: Value) -> ToolResult {
        self.call(ctx, args).await
    }
}

/// Runs a Rhai script of `skill` with `args`.
async fn run_rhai(
    ctx: &ToolCtx,
    skill: &Skill,
    rel: String,
    source: String,
    script_args: serde_json::Map<String, Value>,
) -> ToolResult {
    let input = rhai::serde::to_dynamic(Value::Object(script_args))
        .map_err(|e| ToolError::Model(format!("bad args: {e}")))?;
    let ctx = ctx.clone();
    let rt = tokio::runtime::Handle::current();
    let label = format!("{}/{rel}", skill.name);
    let grant = skill.allowed_tools.clone();
    let limits = ctx
        .skills
        .as_ref()
        .map(|s| s.rhai_limits().clone())
        .unwrap_or_default();
    // A fatal nested failure (the run's tool budget is spent, the store is down)
    // must end the run, not just this script.
    let fatal: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let fatal_seen = fatal.clone();
    let shown = label.clone();
    let task = sandbox::thread::run("steward-skill-script", move || {
        let mut engine = sandbox::engine(&limits, Some(Instant::now() + TIMEOUT), Some(ctx.cancel.clone()));
        engine.register_fn(
            "tool",
            move |name: &str, a: Map| -> Result<Dynamic, Box<EvalAltResult>> {
                let nested = ctx
                    .nested
                    .clone()
                    .ok_or_else(|| runtime_error("tools cannot be called here".into()))?;
                let a = Dynamic::from_map(a);
                sandbox::check_depth(&a)?;
                let json_args = rhai::serde::from_dynamic::<Value>(&a)?;
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
        // Converted, and an error told, on the script's thread: its deep stack is where
        // a deeply nested value can be walked (and dropped).
        let told = |e: Box<EvalAltResult>| sandbox::describe(&shown, &e);
        let v = engine
            .eval_with_scope::<Dynamic>(&mut scope, &source)
            .map_err(told)?;
        sandbox::check_depth(&v).map_err(told)?;
        Ok::<_, String>(
            rhai::serde::from_dynamic::<Value>(&v).unwrap_or_else(|_| Value::String(v.to_string())),
        )
    });
    let result = task
        .await
        .map_err(|e| ToolError::Model(format!("{label}: {e}")))?;
    if let Some(e) = fatal_seen.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(ToolError::Fatal(e));
    }
    match result {
        Ok(value) => Ok(ToolOutput::json(value)),
        Err(told) => Err(ToolError::Model(told)),
    }
}

/// The skill's script `script` (as listed, with or without `scripts/`; a bare name is
/// a Rhai script), or an error naming the scripts it has.
fn resolve(skill: &Skill, script: &str) -> Result<String, ToolError> {
    let trimmed = script.trim().trim_start_matches("./");
    if std::path::Path::new(trimmed)
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(ToolError::Model(format!(
            "invalid script path '{script}': it must stay inside the skill's folder"
        )));
    }
    let rel = if trimmed.contains('/') {
        trimmed.to_string()
    } else {
        format!("scripts/{trimmed}")
    };
    let listed = |p: &str| skill.files.iter().any(|f| f.path == p);
    if listed(&rel) {
        return Ok(rel);
    }
    let rhai = format!("{rel}.rhai");
    if !trimmed.contains('.') && listed(&rhai) {
        return Ok(rhai);
    }
    let scripts: Vec<&str> = skill.scripts().map(|f| f.path.as_str()).collect();
    Err(ToolError::Model(if scripts.is_empty() {
        format!(
            "skill '{}' has no script '{script}'; it has no scripts",
            skill.name
        )
    } else {
        format!(
            "skill '{}' has no script '{script}'; its scripts: {}",
            skill.name,
            scripts.join(", ")
        )
    }))
}

/// The interpreter a script needs: by extension, else by its `#!` line.
fn interpreter_for(rel: &str, head: &str) -> Option<String> {
    let shebang = head
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!"))
        .and_then(|l| {
            let mut words = l.split_whitespace();
            let first = words.next()?;
            let program = if first.ends_with("/env") {
                words.find(|w| !w.starts_with('-'))?
            } else {
                first
            };
            Some(program.rsplit('/').next().unwrap_or(program).to_string())
        })
        // Debian has no plain `python`.
        .map(|p| if p == "python" { "python3".to_string() } else { p });
    let ext = rel.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "py" => Some("python3".into()),
        "sh" => Some(
            shebang
                .filter(|p| matches!(p.as_str(), "bash" | "sh" | "dash"))
                .unwrap_or_else(|| "sh".into()),
        ),
        "bash" => Some("bash".into()),
        "js" | "mjs" | "cjs" => Some("node".into()),
        "rb" => Some("ruby".into()),
        "pl" => Some("perl".into()),
        _ => shebang,
    }
}

/// A work-folder name for a run file: its base name, or with the id in front when two
/// inputs share one. A leading dot becomes `_`: a person's attachment named `.npmrc` or
/// `.gitconfig` in the folder a script runs in would configure the programs it runs.
fn input_name(name: &str, id: &str, taken: &[WorkFile]) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    let undotted;
    let base = if base.is_empty() || base == "." || base == ".." {
        id
    } else if let Some(rest) = base.strip_prefix('.') {
        undotted = format!("_{rest}");
        &undotted
    } else {
        base
    };
    if taken.iter().any(|t| t.name == base) {
        format!("{id}-{base}")
    } else {
        base.to_string()
    }
}

fn tail(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    let start = text.len().saturating_sub(max);
    let start = (start..=text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].to_string()
}

/// Runs a Python, shell or Node script of `skill` in the process sandbox.
async fn run_process(
    ctx: &ToolCtx,
    skills: &crate::skills::RunSkills,
    skill: &Skill,
    rel: &str,
    argv: Vec<String>,
    stdin: Option<String>,
    file_ids: Vec<String>,
) -> ToolResult {
    let label = format!("{}/{rel}", skill.name);
    let sandbox = skills.sandbox();
    if let Some(why) = sandbox.unavailable() {
        return Err(ToolError::Model(format!(
            "{label} cannot run: Python, shell and Node skill scripts are unavailable on this host ({why})"
        )));
    }
    let head = std::fs::read(skill.dir.join(rel))
        .map(|b| String::from_utf8_lossy(&b[..b.len().min(256)]).into_owned())
        .unwrap_or_default();
    let Some(interpreter) = interpreter_for(rel, &head) else {
        return Err(ToolError::Model(format!(
            "{label}: cannot tell which interpreter runs it (no known extension and no #! line)"
        )));
    };
    let allowed = skills.interpreters();
    if !allowed.contains(&interpreter) {
        return Err(ToolError::Model(format!(
            "{label} needs the interpreter '{interpreter}', which this agent does not allow (allowed: {})",
            allowed.join(", ")
        )));
    }
    let Some(program) = find_program(&interpreter) else {
        return Err(ToolError::Model(format!(
            "{label} needs the interpreter '{interpreter}', which is not installed on this host"
        )));
    };
    // Inputs are written to the work folder before the script's limits watch it: held
    // to the same limits here, and each file once.
    let limits = skills.script_limits();
    let mut inputs: Vec<WorkFile> = Vec::new();
    let mut given: Vec<&str> = Vec::new();
    let mut bytes: u64 = 0;
    for id in &file_ids {
        if given.contains(&id.as_str()) {
            continue;
        }
        given.push(id);
        let (meta, content) = ctx.files.get(id).map_err(|e| ToolError::Model(e.to_string()))?;
        bytes += content.len() as u64;
        if inputs.len() >= limits.max_files || bytes > limits.max_written_bytes {
            return Err(ToolError::Model(format!(
                "{label}: its input files are more than a script's work folder holds ({} files, {} bytes)",
                limits.max_files, limits.max_written_bytes
            )));
        }
        let name = input_name(&meta.name, id, &inputs);
        inputs.push(WorkFile { name, content });
    }
    // A Python or Node script gets its skill's declared requirements, installed once.
    let deps = skills.deps().ensure(skill, &program).await.map_err(|e| {
        ToolError::Model(format!(
            "{label} cannot run: its skill's requirements did not install: {e}"
        ))
    })?;
    let span = tracing::info_span!(
        parent: crate::telemetry::parent(),
        "skill_script",
        otel.name = %format!("skill_script {label}"),
        "steward.skill.name" = skill.name.as_str(),
        "steward.skill.script" = rel,
        "steward.script.interpreter" = interpreter.as_str(),
        "steward.script.exit" = tracing::field::Empty,
        "steward.egress.requests" = tracing::field::Empty,
        "steward.egress.refused" = tracing::field::Empty,
        "error.type" = tracing::field::Empty,
    );
    // Network only through the run's own proxy, when the agent lists hosts.
    let proxy = match skills.script_egress() {
        None => None,
        Some((mut rules, hub)) => {
            rules.within =
                skill_egress(&skill.dir).map_err(|e| ToolError::Model(format!("{label} cannot run: {e}")))?;
            let socket = sandbox.socket_path(&uuid::Uuid::now_v7().simple().to_string());
            use crate::http::proxy::{Proxy, ProxyError};
            Some(
                Proxy::start(&socket, rules, hub.clone(), span.id()).map_err(|e| match e {
                    // The operator's to fix, and the model's to hear about.
                    ProxyError::Secrets(why) => ToolError::Model(format!(
                        "{label} cannot run: its skills.scripts.egress.secrets cannot be filled: {why}"
                    )),
                    e => ToolError::Fatal(format!("{label}: cannot start the egress proxy: {e}")),
                })?,
            )
        }
    };
    let job = Job {
        skill_dir: &skill.dir,
        script: rel,
        interpreter: &program,
        args: &argv,
        stdin: stdin.as_deref(),
        inputs: &inputs,
        deps: deps.as_deref(),
        proxy: proxy.as_ref().map(|p| crate::sandbox::process::Egress {
            socket: p.socket(),
            trust: p.trust_bundle(),
            env: p.secret_env(),
        }),
    };
    let finished = {
        use tracing::Instrument;
        sandbox.run(&job, &limits).instrument(span.clone()).await
    }
    .map_err(|e| ToolError::Model(format!("{label}: {e}")))?;
    let mut written = Vec::new();
    for f in &finished.files {
        let meta = ctx
            .files
            .add(
                NewFile {
                    name: f.name.clone(),
                    mime: mime::from_name(&f.name).to_string(),
                    content: f.content.to_vec(),
                },
                FileSource::ScriptOutput,
                None,
            )
            .await
            .map_err(|e| ToolError::Fatal(format!("cannot store a file {label} wrote: {e}")))?;
        written.push(serde_json::json!({"id": meta.id, "name": meta.name, "bytes": meta.size_bytes}));
    }
    let stdout = String::from_utf8_lossy(&finished.stdout).into_owned();
    // Every request through the proxy, recorded with the call (never query strings).
    let network = proxy.as_ref().map(|p| p.records()).unwrap_or_default();
    drop(proxy);
    if !network.is_empty() {
        span.record("steward.egress.requests", network.len());
        span.record(
            "steward.egress.refused",
            network.iter().filter(|r| r.refused.is_some()).count(),
        );
    }
    // The gateway records them as events under the call, whatever its result.
    ctx.network
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(network.iter().cloned());
    match &finished.stop {
        Stop::Exited(0) => {
            span.record("steward.script.exit", 0);
            let mut out = serde_json::json!({
                "exit_code": 0,
                "stdout": stdout,
                "stderr": tail(&finished.stderr, STDERR_TAIL),
                "files": written,
                "seconds": (finished.took.as_secs_f64() * 1000.0).round() / 1000.0,
            });
            if !network.is_empty() {
                out["network"] = serde_json::to_value(&network).unwrap_or_default();
            }
            Ok(ToolOutput::json(out))
        }
        stop => {
            if let Stop::Exited(code) = stop {
                span.record("steward.script.exit", *code);
            }
            span.record("error.type", "script_failed");
            let mut message = format!("{label} {}.", stop.describe(&limits, finished.took));
            let err = tail(&finished.stderr, STDERR_TAIL);
            if let Some(hint) = crate::skills::deps::missing_module_hint(&err, skill) {
                message.push_str(&format!("\n{hint}"));
            }
            if !err.is_empty() {
                message.push_str(&format!("\nstderr (last {STDERR_TAIL} bytes at most):\n{err}"));
            }
            let out = tail(&finished.stdout, STDERR_TAIL);
            if !out.is_empty() {
                message.push_str(&format!("\nstdout (last {STDERR_TAIL} bytes at most):\n{out}"));
            }
            if !written.is_empty() {
                message.push_str(&format!("\nfiles it wrote: {}", Value::from(written)));
            }
            if !network.is_empty() {
                let requests = serde_json::to_string(&network).unwrap_or_default();
                message.push_str(&format!("\nits network requests: {requests}"));
            }
            Err(ToolError::Model(message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inputs_name_is_its_base_name_without_a_leading_dot() {
        let taken = vec![WorkFile {
            name: "report.csv".into(),
            content: Arc::new(Vec::new()),
        }];
        assert_eq!(input_name("a/b/notes.txt", "f_1", &taken), "notes.txt");
        assert_eq!(input_name(".gitconfig", "f_2", &taken), "_gitconfig");
        assert_eq!(input_name("x/.curlrc", "f_3", &taken), "_curlrc");
        assert_eq!(input_name("report.csv", "f_4", &taken), "f_4-report.csv");
        assert_eq!(input_name("..", "f_5", &taken), "f_5");
    }
}
